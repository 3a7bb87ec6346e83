//! Plans: what a run will do, validated once, then trusted.
//!
//! ```text
//!  flags (cli, raw) ──► HttpArgs ──validate──► HttpPlan ──► Arrivals (open loop)
//!                                   │                 └──► request bytes
//!                                   └─ PlanError: names the flag, says the fix
//! ```
//!
//! Everything here is pure: no sockets, no runtime, no clock. The engine
//! reads a [`HttpPlan`] and never re-checks it ([`StormPlan`]'s `--expect`
//! patterns arrive compiled). [`input`] bounds the YAML files users hand
//! throng (size, nesting, a byte order mark) before any parser sees them.

mod duration;
mod error;
mod http;
pub mod input;
mod schedule;
mod segment;
mod status;
mod storm;

pub use duration::{
    MAX_RATE, count, format_duration, format_rate, parse_duration, parse_rate, serde_duration, serde_opt_duration,
};
pub use error::PlanError;
pub use http::{
    HttpArgs, HttpPlan, Load, MAX_BODY_BYTES, REDACTED, SENSITIVE_HEADERS, Scheme, Stop, Target, TlsSettings,
    is_forbidden_in_value, is_secret, redact_command, redaction_note, secret_names,
};
pub use schedule::{Arrivals, Rng, StormStarts, arrival_offset, split_evenly};
pub use segment::{Fraction, MAX_CYCLE, Segment, parse_start_at};
pub use status::StatusSet;
pub use storm::{
    LineStep, NatsAuth, Pattern, Procs, Protocol, Reconnect, StormArgs, StormPlan, StormRequest, StormScheme,
    StormTarget, Trigger, parse_sources, unescape,
};
