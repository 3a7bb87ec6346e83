//! Plans: what a run will do, validated once, then trusted.
//!
//! ```text
//!  flags (cli, raw) ──► HttpArgs ──validate──► HttpPlan ──► worker_loads(threads): each worker's share
//!                                   │                 └──► request bytes (RequestHead, Authority)
//!                                   └─ PlanError: names the flag, says the fix
//! ```
//!
//! Everything here is pure: no sockets, no runtime, no clock. The engine
//! runs the loads a plan divides itself into ([`HttpPlan::worker_loads`],
//! [`StormPlan::worker_loads`]) and does not re-check what was validated
//! here: `--expect` patterns arrive compiled, TLS groups and versions as
//! [`TlsGroup`] and [`TlsVersion`] (throng-tls builds the client
//! configuration from [`TlsSettings`]). What it still checks is what only
//! the running process knows: the descriptor limit against the connections
//! (or scenario VUs) its segment needs, that the target resolves, and that
//! the target's name can be sent as a TLS server name. [`input`] bounds the files users hand
//! throng: its reader (the one file I/O here) reads a file a flag or a file names only up to
//! the limit of its kind, and YAML's size and nesting are checked before any parser sees it.

mod duration;
mod endpoint;
mod error;
mod head;
mod http;
pub mod input;
mod loads;
mod pubsub;
mod reach;
mod schedule;
mod segment;
mod status;
mod storm;
mod targets;
mod tls;

pub use duration::{
    DurationError, DurationFault, MAX_RATE, RateError, RateFault, count, format_duration, format_rate, parse_duration,
    parse_rate, serde_duration, serde_opt_duration,
};
pub use error::{PlanError, one_line};
pub use head::{Authority, RequestHead};
pub use http::{
    BodyLines, GRPC_CODES, GrpcCall, HttpArgs, HttpPlan, HttpVersion, IoModel, LlmApi, Load, MAX_BODY_BYTES,
    MAX_REDIRECTS, MAX_STREAM_EVENTS, MAX_STREAMS, REDACTED, SENSITIVE_HEADERS, Scheme, Slo, Stop, StreamArgs,
    StreamSpec, Target, TlsSettings, grpc_code_name, is_forbidden_in_value, is_secret, is_token, mask_userinfo,
    redact_command, redaction_note, secret_names,
};
pub use http::{
    DEFAULT_SLOWEST, MAX_SLOWEST, Sampling, TRACEPARENT, TraceContext, placeholder_at, placeholder_value,
    refuse_own_traceparent, trace_context_of, traceparent_at, traceparent_value, write_ids,
};
pub use loads::{HttpLoads, HttpWorkerLoad, StormLoads, StormWorkerLoad};
pub use pubsub::{
    DEFAULT_DRAIN, DEFAULT_PAYLOAD, DEFAULT_WINDOW, Fan, MAX_PAYLOAD, MqttPlan, PAYLOAD_HEADER, PubSubArgs,
    TOPIC_PLACEHOLDER,
};
pub use reach::{Family, Override, Proxy, Reach, ReachArgs, basic_authorization, no_proxy_matches};
pub use schedule::{Arrivals, Rng, StormStarts, arrival_offset, split_evenly};
pub use segment::{Fraction, MAX_CYCLE, Segment, parse_start_at};
pub use status::{StatusError, StatusSet};
pub use storm::{
    CONN_PLACEHOLDER, ClientProfile, DEFAULT_CLIENT_ID, DEFAULT_KEEPALIVE, EscapeError, LineStep, MAX_BINARY, MqttArgs,
    MqttSpec, MqttVersion, MqttWebSocket, NatsAuth, Pattern, PatternError, Procs, Protocol, Reconnect, SecretCount,
    SecretText, StepArg, StormArgs, StormPlan, StormRequest, StormScheme, StormTarget, Trigger, WsSpec, WsStep,
    parse_sources, unescape,
};
pub use targets::{
    BodyReadError, MAX_BODY_LINES, MAX_REQUEST_TABLE_BYTES, MAX_TAGGED_TARGETS, MAX_TARGETS, MAX_TARGETS_FILE_BYTES,
    MAX_URL_BYTES, RawTarget, Requests, TargetInfo, TargetOrder, parse_targets_file, split_body_lines,
};
pub use tls::{TlsGroup, TlsNameError, TlsVersion};
