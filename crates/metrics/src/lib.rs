//! throng's measurement core: what a run records, and how records from many
//! workers (threads, processes, hosts) add up exactly.
//!
//! ```text
//!  worker 0: Recorder ─┐                      (per-worker, no locks, no atomics)
//!  worker 1: Recorder ─┼─ finish() ─► Measurements ─ merge() ─► Measurements
//!  worker N: Recorder ─┘                 (plain data, serde)       (exact: histograms add)
//! ```
//!
//! Every timed phase (see [`Phase`]) lands in an HDR histogram with microsecond
//! resolution and three significant digits. Every attempted unit of work
//! (request, connection) ends in exactly one outcome: `ok` or one
//! [`ErrorClass`]; [`Outcomes::is_balanced`] checks `attempted = ok + Σ errors`.
//!
//! Nothing here does I/O or depends on a runtime: the engine feeds a
//! [`Recorder`] with instants and durations it measured, and reports read
//! [`Measurements`].

mod custom;
mod hist;
mod measurements;
mod outcome;
mod phase;
mod pubsub;
mod recorder;
mod scenario;
mod slowest;
mod streams;

pub use custom::{CustomKind, CustomStats};
pub use hist::{
    EncodedHist, Hist, HistError, MAX_DECODED_BYTES, MAX_ENCODED_CHARS, MAX_SIGFIG, MAX_TRACKABLE_US, Shape, Summary,
};
pub use measurements::{ByteCounts, FirstReply, Measurements, Multiplex, SeriesPoint, TlsCounts};
pub use outcome::{ErrorClass, Outcomes};
pub use phase::Phase;
pub use pubsub::{LISTED_SUBSCRIBERS, PubSub, SubscriberBooks};
pub use recorder::{Handshake, Live, Recorder, Reply};
pub use scenario::{CheckCount, ScenarioRecorder, ScenarioSecond, ScenarioStats, TagSecond, TagStats};
pub use slowest::{SlowEnd, SlowRequest, Slowest, hex};
pub use streams::{StreamCounts, StreamSeen};
