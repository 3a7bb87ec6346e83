//! The result document: one JSON file per run, versioned, with a JSON Schema
//! checked in at `schema/result.schema.json`.
//!
//! ```text
//!  engine ─► RunResult ─► to_writer ─► RESULT.json ─► from_reader ─► RunResult ─► reports
//!                                                        │
//!               RESULT-a.json, RESULT-b.json ─► merge ───┘  (histograms add: exact)
//! ```
//!
//! Every report is rendered from a [`RunResult`], so a run can be re-reported
//! or merged later without re-running it.
//!
//! Several runs of one plan in sequence (`--repeat N`) make a [`ResultSet`]
//! (schema `throng.result-set/v2`); [`runs_from_reader`] and [`load_runs`]
//! read either kind of document, so every command that reads results takes
//! both.
//!
//! Documents are read and written through `Read` and `Write`; [`load`] and
//! [`load_runs`] are the one place that opens a file (by path), for the
//! commands that read result files; the document is checked within
//! [`limits`] however it is read.
//! [`RunResult::unit`] says what a run counts (requests, or connections for
//! a storm) for every report.

mod document;
mod error;
pub mod history;
pub mod limits;
mod merge;
mod parts;
mod plan;
mod run;
mod schema;
#[cfg(test)]
mod tests;
mod time;

pub use document::{Document, ResultSet, load, load_runs, runs_from_reader};
pub use error::{ResultError, SHORT_CHARS, short};
pub use merge::segment_problems;
pub use parts::{Environment, Generator, Io, KernelSockets, Part, PushRecord, Timestamps, TriggerRecord};
pub use plan::{Plan, Unit};
pub use run::{IMPLIED_DROPPED, RunResult};
pub use schema::{SCHEMA, SET_SCHEMA};
pub use time::{per_second, rfc3339};
