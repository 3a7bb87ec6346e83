//! `throng grpc`'s call as its plan keeps it, and gRPC status names.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A `throng grpc` run's call: what the HTTP/2 request carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrpcCall {
    /// `pkg.Service/Method`.
    pub call: String,
    /// The `.proto` file the message was built from.
    pub proto: String,
    /// gRPC status codes counted `ok` (`--expect-code`; default `[0]`).
    pub expect: Vec<u16>,
    /// `--deadline`: sent as `grpc-timeout`; a call still unanswered then
    /// is `grpc.deadline_exceeded`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub deadline: Option<Duration>,
    /// The method is server-streaming: each call reads a stream of
    /// messages, counted, with the `first_message` and `last_message`
    /// phases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_streaming: bool,
    /// `--expect-messages`: a server-streaming call that ends with another
    /// number of messages is `check_failed`, whatever its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_messages: Option<u64>,
    /// The method is client-streaming (or, with `server_streaming`,
    /// bidirectional): the request body is `stream_messages` framed
    /// messages, sent in order, then the request stream is half-closed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_streaming: bool,
    /// `--stream-messages`: messages each client-streaming call sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_messages: Option<u64>,
    /// `--stream-rate`: messages per second within a call (none: as fast
    /// as flow control allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_rate: Option<u32>,
    /// `--grpc-encoding gzip`: request messages compressed, gzip replies
    /// accepted and inflated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

/// gRPC status code names (index = code), as the report shows them.
pub const GRPC_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The name of gRPC status `code` (`UNAVAILABLE`), or the number.
pub fn grpc_code_name(code: u16) -> std::borrow::Cow<'static, str> {
    GRPC_CODES.get(usize::from(code)).map_or_else(
        || std::borrow::Cow::Owned(code.to_string()),
        |n| std::borrow::Cow::Borrowed(*n),
    )
}
