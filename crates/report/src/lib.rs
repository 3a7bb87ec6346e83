//! Reports: every view of a run is rendered from its [`RunResult`], so any
//! result file can be re-reported later in any view.
//!
//! ```text
//!  RunResult ─┬─ text::write     (any result, routed by kind: an HTTP run's
//!             │                   phase table, outcomes, generator cost here;
//!             │                   storm.rs: connection storms; scenario.rs:
//!             │                   throng run's steps, stages, checks, thresholds)
//!             ├─ ab::write       (ApacheBench's layout and field meanings)
//!             ├─ httperf::write  (httperf's layout and error classes)
//!             ├─ junit::write    (threshold verdicts for CI)
//!             ├─ summary_md::write (verdict first, key figures: a PR comment,
//!             │                   a CI job summary)
//!             ├─ runs::write_set (a result set: runs added up, plus a table per run)
//!             └─ html::render    (one self-contained page; html::render_compare
//!                                 overlays several runs; charts from chart.rs)
//!
//!  [RunResult] ─ trend::Point::of ─ html::render_trend (a plan's runs over
//!                                    time: `throng history report`)
//!
//!  Side A, Side B ─ compare::Comparison ─ compare::write_{text,markdown,json,columns}
//!                     (figures side by side; stats: bootstrap, Mann–Whitney)
//! ```
//!
//! Writers take `impl Write` (or return a `String`) and never touch the
//! terminal or files. What a run counts (requests, or connections for a
//! storm) comes from [`RunResult::unit`], not from matching on the plan.
//!
//! Exports for other tools, from the same document:
//! `csv::write_series` (the per-second series, long-form CSV) and
//! `interval_log::write` (HdrHistogram interval log, one interval per
//! second per phase).

pub mod ab;
pub mod chart;
pub mod compare;
pub mod csv;
pub mod format;
pub mod gate;
pub mod html;
pub mod httperf;
pub mod interval_log;
pub mod junit;
mod mqtt;
pub mod runs;
pub mod scenario;
mod sections;
pub mod stats;
pub mod storm;
pub mod summary_md;
#[cfg(test)]
mod testing;
pub mod text;
pub mod trend;
pub(crate) mod view;

pub use view::{View, supports, write};
