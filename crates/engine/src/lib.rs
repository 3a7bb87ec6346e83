//! throng's engine: runs a plan and returns its result document.
//!
//! ```text
//!  run_http | run_storm | run_scenario (run/: a plan → one WorkerSpec per
//!        │   worker; preflight.rs: does the server speak the protocol asked?)
//!        │   (run_mqtt runs on the caller's thread: proto/mqtt/pubsub.rs)
//!        ▼
//!  coordinate.rs (caller's thread: progress, stop, grace; control.rs: signals)
//!        │ spawns one OS thread per worker
//!        ▼
//!  worker.rs: current-thread tokio runtime + LocalSet, one Ctx (ctx.rs)
//!        ├─ closed.rs: one task per connection, request after request
//!        ├─ open.rs: dispatcher (pacer.rs) ─► queue ─► connection tasks
//!        ├─ storm.rs: connect, at most one request, hold, close
//!        └─ scenario/: virtual users running flows (their connections: proto/vu/)
//!        │   each loop: conn.rs (open_connection: TCP, TLS, protocol
//!        │   handshake) ─► exchange.rs (Session: write, read, parse;
//!        │   record_exchange) ─► Recorder
//!        ▼
//!  Measurements per worker ── merge (coordinate.rs) ──► RunResult
//! ```
//!
//! Workers share nothing on the per-request path: each owns its sockets,
//! read buffer and [`throng_metrics::Recorder`]. The coordinator only reads
//! live figures each worker publishes ten times a second, and, when asked
//! ([`Control::want_snapshots`], or a threshold with abort_on_fail), a copy
//! of everything each worker measured so far, once a second, which it merges
//! for [`Progress::snapshot`].
//!
//! The four loops depend on `ctx`, `conn`, `exchange` and `pacer`, never on
//! each other; what a worker is given (`load`) and the context depend on no
//! loop. A protocol's code lives in its folder under `proto/` (whose
//! `mod.rs` maps the roles each provides), and, when it has a check before
//! the run, one arm in `preflight.rs`.
//! Why a run could not happen is an [`EngineError`] (`error.rs`).

mod closed;
mod conn;
mod control;
mod coordinate;
mod ctx;
mod error;
mod errors;
mod exchange;
mod io_model;
mod load;
mod mux;
mod numbered;
mod open;
mod pacer;
mod preflight;
mod proto;
mod reach;
mod record;
mod redirect;
mod rows;
mod run;
mod scenario;
mod stamps;
mod storm;
pub mod sys;
mod targets;
mod timer;
mod tls_stream;
mod trace;
mod transport;
mod trigger;
mod uring;
mod worker;

pub use control::{Control, Progress};
pub use error::{Asked, EngineError, NotSpoken, TlsSetup, Unanswered, WorkerFailure};
pub use errors::errno_name;
pub use io_model::{auto_fallback, storm_auto_fallback};
pub use proto::grpc::call as grpc_call;
pub use proto::http1;
pub use proto::sse;
pub use rows::{CannotWrite, HEADER as REQUESTS_CSV_HEADER, RequestLog, RowCounts};
pub use run::{
    OnceRun, ScenarioOptions, StormPart, add_once_rows, connections_per_process, resolve, run_http, run_mqtt,
    run_scenario, run_setup_flow, run_storm, run_teardown_flow, storm_peak_estimate,
};
// Built by `grpc_call` too (a call outside a run).
pub(crate) use run::plan_tls;
