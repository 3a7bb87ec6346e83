//! HTTP/2: requests as streams multiplexed on a worker's connections,
//! spoken by throng's own client (crate throng_http2, I/O-free).
//!
//! ```text
//!  loops (closed, open): one task per stream slot (connections × streams),
//!     │                          spawned by proto::spawn_driver (slot.rs)
//!     │ Session::Http2(Slot)     the slot's last response (status, sizes)
//!     │ http2::one_request       take a stream on a pooled connection
//!     │                          (open one while the pool may grow), start
//!     │                          it (header block encoded once per run),
//!     │                          wait, record_exchange
//!     ▼
//!  Pool (one per worker, in Ctx) ── H2Conn { streams in flight, requests
//!                                    carried, the server's cap }
//!                                      └─ Shared { throng_http2::Conn,
//!                                         entries: stream id → the slot
//!                                         lent for the exchange, waker }
//!                                           ▲ events        │ frames
//!  Driver (a task per connection, owns the socket): write pending output
//!  (every stream started since its last turn in one write), read into the
//!  thread's read buffer, Conn::receive, fill the entries, wake the streams
//! ```
//!
//! HTTP/1.1's `Session` holds one connection and speaks one request at a
//! time; here a slot holds no connection: it borrows a stream of one. A
//! connection takes at most `min(--streams, SETTINGS_MAX_CONCURRENT_STREAMS)`
//! streams at once; slots beyond that wait for room (not counted as a
//! request until they get it). The pool grows to the worker's share of
//! `-c`. A connection the server ends (GOAWAY, reset, EOF) takes no new
//! streams and is closed when its last stream ends; the next request opens
//! a new one. gRPC builds on the same pool (`Spec` names the request).
//!
//! Memory: a connection with no stream open keeps no buffers (its pending
//! output, partial frame and header scratch space are released), reads go
//! through one buffer per worker thread, and the request's header block is
//! shared: what an idle connection costs is its state and HPACK table.
//!
//! The files: `slot.rs` (a stream slot's task), `pool.rs` (a worker's
//! connections and a loop's request on them), `driver.rs` (a connection:
//! its state, the task that drives its socket, the preface), `stream.rs`
//! (one stream's exchange on a connection), `grpc.rs` (a stream as a
//! gRPC call), `storm.rs` (a storm's held connection), `scenario.rs` (a
//! VU's own connection), `check.rs` (the pre-run check that the server
//! speaks h2); here, what every one of
//! them shares: the request (`Spec`) and a stream's response (`Slot`).

mod check;
mod driver;
mod grpc;
mod pool;
mod scenario;
mod slot;
mod sse;
mod status;
mod storm;
mod stream;

use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_metrics::Reply;

use crate::proto::http1::Keep;

pub(crate) use check::preflight;
pub(crate) use driver::{MAX_HEADER_LIST, reset_class};
pub(crate) use grpc::call_once;
pub(crate) use pool::{Pool, one_request};
pub(crate) use scenario::Own;
pub(crate) use slot::stream_slot;
pub(crate) use sse::Bounds;
pub(crate) use storm::{Held, storm_establish};
pub(crate) use stream::encode_head;

/// What a worker sends on every stream, made once per run.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    /// Most concurrent streams per connection (`--streams`).
    pub streams: u32,
    /// Connections this worker may have open at once.
    pub connections: u64,
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The request's header block, decoded (bytes sent are counted as this
    /// plus the body: HPACK's compressed size per stream is not known).
    pub head_bytes: usize,
    /// The requests are gRPC calls: the status counted is `grpc-status`.
    pub grpc: bool,
    /// gRPC `--deadline`: the response wait, and its expiry's class.
    pub deadline: Option<Duration>,
    /// gRPC server streaming: the reply's messages are counted and timed.
    pub server_streaming: bool,
    /// `--expect-messages`: another count is `check_failed`.
    pub expect_messages: Option<u64>,
    /// gRPC client or bidirectional streaming: the body's messages, sent
    /// in order (paced), then the request half-closed.
    pub requests: Option<Requests>,
}

/// A scenario's gRPC call: whether its replies stream, and its request
/// messages when they do.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CallShape<'a> {
    pub server_streaming: bool,
    pub requests: Option<&'a Requests>,
}

/// A client-streaming call's request messages: where each ends in the
/// body, and the pause between two of them (`--stream-rate`; none: as fast
/// as flow control allows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Requests {
    /// The end offset of each framed message in the body, ascending.
    pub ends: Vec<usize>,
    pub gap: Option<Duration>,
}

impl Requests {
    /// The framed messages of `body` (5-byte prefixes), paced at `rate`
    /// per second; a body that is not whole messages ends at its last
    /// whole one (the body is throng's own, framed by the cli).
    pub(crate) fn of(body: &[u8], rate: Option<u32>) -> Requests {
        let mut ends = Vec::new();
        let mut at = 0usize;
        while let Some(prefix) = body.get(at..at + 5) {
            let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
            let end = at + 5 + len;
            if end > body.len() {
                break;
            }
            ends.push(end);
            at = end;
        }
        Requests {
            ends,
            gap: rate.filter(|&r| r > 0).map(|r| Duration::from_secs(1) / r),
        }
    }

    /// Messages whose every byte is among the first `bytes` of the body.
    pub(crate) fn sent(&self, bytes: usize) -> u64 {
        self.ends.partition_point(|&e| e <= bytes) as u64
    }
}

/// Why a plan's request cannot be sent as an HTTP/2 stream (what the user
/// sees, naming the flag to change).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpecError {
    #[error("the URL cannot be sent as an HTTP/2 request ({0})")]
    Url(#[source] http::Error),
    #[error("-m {method}: not an HTTP/2 method ({source})")]
    Method {
        method: String,
        source: http::method::InvalidMethod,
    },
    #[error("-H '{name}': not an HTTP/2 header name ({source})")]
    HeaderName {
        name: String,
        source: http::header::InvalidHeaderName,
    },
    #[error("-H '{name}': the value cannot be sent over HTTP/2 ({source})")]
    HeaderValue {
        name: String,
        source: http::header::InvalidHeaderValue,
    },
    #[error("the target cannot be sent as an HTTP/2 request ({0})")]
    StormTarget(#[source] http::Error),
    #[error("--request: '{method}' is not an HTTP/2 method ({source})")]
    StormMethod {
        method: String,
        source: http::method::InvalidMethod,
    },
}

/// Headers HTTP/2 forbids (RFC 9113 8.2.2); `Host` becomes `:authority`.
pub(crate) const CONNECTION_SPECIFIC: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

impl Spec {
    /// The plan's request as HTTP/2 parts, or why it cannot be sent.
    pub(crate) fn from_plan(plan: &throng_plan::HttpPlan, connections: u64) -> Result<Spec, SpecError> {
        let scheme = match plan.target.scheme {
            throng_plan::Scheme::Http => "http",
            throng_plan::Scheme::Https => "https",
        };
        // A Host header the user gave is the authority HTTP/2 sends.
        let authority = plan
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map_or_else(|| plan.target.authority(), |(_, v)| v.clone());
        let uri = http::Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query(plan.target.path.as_str())
            .build()
            .map_err(SpecError::Url)?;
        let method = http::Method::from_bytes(plan.method.as_bytes()).map_err(|source| SpecError::Method {
            method: plan.method.clone(),
            source,
        })?;
        let mut headers = http::HeaderMap::new();
        for (name, value) in &plan.headers {
            let lower = name.to_ascii_lowercase();
            if CONNECTION_SPECIFIC.contains(&lower.as_str()) {
                continue;
            }
            let n = http::HeaderName::from_bytes(lower.as_bytes()).map_err(|source| SpecError::HeaderName {
                name: name.clone(),
                source,
            })?;
            let v = http::HeaderValue::from_str(value).map_err(|source| SpecError::HeaderValue {
                name: name.clone(),
                source,
            })?;
            headers.append(n, v);
        }
        if !plan.body.is_empty() {
            headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(plan.body.len()));
        }
        if plan.trace.is_some() {
            // Its ids are written per request over the encoded block's
            // literal (crate::trace); never indexed in HPACK's table.
            headers.append(
                http::HeaderName::from_static(throng_plan::TRACEPARENT),
                http::HeaderValue::from_static(throng_plan::placeholder_value()),
            );
        }
        let head_bytes = plan.method.len()
            + uri.path_and_query().map_or(1, |p| p.as_str().len())
            + authority.len()
            + scheme.len()
            + headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>()
            + 40;
        Ok(Spec {
            head_bytes,
            streams: plan.streams.max(1),
            connections: connections.max(1),
            method,
            uri,
            headers,
            body: plan.body.clone(),
            grpc: plan.grpc.is_some(),
            deadline: plan.grpc.as_ref().and_then(|g| g.deadline),
            server_streaming: plan.grpc.as_ref().is_some_and(|g| g.server_streaming),
            expect_messages: plan.grpc.as_ref().and_then(|g| g.expect_messages),
            requests: plan
                .grpc
                .as_ref()
                .filter(|g| g.client_streaming)
                .map(|g| Requests::of(&plan.body, g.stream_rate)),
        })
    }
}

impl Spec {
    /// A storm's request (`--request`, or GET of the target's path; with
    /// none the storm only speaks the preface): one stream per connection.
    pub(crate) fn for_storm(plan: &throng_plan::StormPlan) -> Result<Spec, SpecError> {
        let scheme = if plan.target.scheme.is_tls() { "https" } else { "http" };
        let default_port = if plan.target.scheme.is_tls() { 443 } else { 80 };
        let authority = throng_plan::Authority::new(&plan.target.host, plan.target.port, default_port).to_string();
        let (method, path) = plan
            .request
            .as_ref()
            .map_or(("GET", "/"), |r| (r.method.as_str(), r.path.as_str()));
        let uri = http::Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query(path)
            .build()
            .map_err(SpecError::StormTarget)?;
        let method = http::Method::from_bytes(method.as_bytes()).map_err(|source| SpecError::StormMethod {
            method: method.to_string(),
            source,
        })?;
        let head_bytes = method.as_str().len() + path.len() + authority.len() + scheme.len() + 40;
        Ok(Spec {
            streams: 1,
            connections: 1,
            method,
            uri,
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
            head_bytes,
            grpc: false,
            deadline: None,
            server_streaming: false,
            expect_messages: None,
            requests: None,
        })
    }
}

/// Bytes of response header fields a slot keeps for captures and checks.
const KEPT_HEADERS: usize = 64 * 1024;

/// The decoded size of header fields as counted (name, value and 4 bytes
/// of framing each); pseudo-header fields are not counted.
fn field_bytes<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> u64 {
    fields
        .filter(|(n, _)| !n.starts_with(b":"))
        .map(|(n, v)| (n.len() + v.len() + 4) as u64)
        .sum()
}

/// A stream slot's last response: what `record_exchange` reads, and what
/// a scenario's captures, checks and cookie jar read (its headers and the
/// start of its body, when [`Slot::reset`] asked for them). A scenario's
/// HTTP/3 responses land in one too (crate::proto::http3::Own).
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) status: u16,
    pub(crate) header_bytes: u64,
    pub(crate) body_bytes: u64,
    pub(crate) server: Option<String>,
    head_request: bool,
    keep: Keep,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    truncated: bool,
    /// The response's `content-length`, when its body must match it (not
    /// a HEAD request's, a 204's or a 304's).
    length: Option<u64>,
    /// gRPC server streaming: messages of the last reply read whole, and
    /// when the first and the last of them were.
    messages: u64,
    first_message: Option<Instant>,
    last_message: Option<Instant>,
    /// gRPC bidirectional streaming: each gap between two reply messages
    /// (µs), at most [`MAX_GAPS`] a call.
    gaps: Vec<u32>,
    /// gRPC client streaming: request messages the call sent whole.
    sent_messages: u64,
}

/// Gaps between reply messages a slot keeps for one call (the rest are
/// counted as messages, not timed): 256 KiB at most.
const MAX_GAPS: usize = 65_536;

impl Slot {
    pub(crate) fn new(head_request: bool) -> Self {
        Slot {
            head_request,
            ..Slot::default()
        }
    }

    pub(crate) fn head_request(&self) -> bool {
        self.head_request
    }

    /// The next response answers a request with `method`: one to HEAD has
    /// no body, whatever its `content-length` says (a slot may serve
    /// requests of several methods: targets, scenario steps).
    pub(crate) fn for_method(&mut self, method: &http::Method) {
        self.head_request = method == http::Method::HEAD;
    }

    /// What to keep of the next responses besides status and sizes.
    pub(crate) fn reset(&mut self, keep: Keep) {
        self.keep = keep;
    }

    /// A new response begins: nothing of the last one stays.
    pub(crate) fn begin(&mut self) {
        self.status = 0;
        self.header_bytes = 0;
        self.body_bytes = 0;
        self.headers.clear();
        self.body.clear();
        self.truncated = false;
        self.length = None;
        self.messages = 0;
        self.first_message = None;
        self.last_message = None;
        self.gaps.clear();
        self.sent_messages = 0;
    }

    /// `n` reply messages were read whole at `t`: counted and timed.
    pub(crate) fn message_at(&mut self, n: u64, t: Instant) {
        // Messages one read completed came together: gaps of 0.
        for _ in 0..n.min(MAX_GAPS as u64) {
            if let Some(last) = self.last_message
                && self.gaps.len() < MAX_GAPS
            {
                let us = t.saturating_duration_since(last).as_micros();
                self.gaps.push(u32::try_from(us).unwrap_or(u32::MAX));
            }
            self.last_message = Some(t);
        }
        self.first_message.get_or_insert(t);
        self.messages += n;
    }

    /// The response's header fields: counted (decoded size), and kept when
    /// asked for.
    pub(crate) fn head(&mut self, status: u16, headers: &http::HeaderMap) {
        self.head_fields(status, || {
            headers.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        });
    }

    /// The same from (name, value) pairs (`fields` makes an iterator over
    /// them); pseudo-header fields (`:status`) are skipped.
    pub(crate) fn head_fields<'a, I>(&mut self, status: u16, fields: impl Fn() -> I)
    where
        I: Iterator<Item = (&'a [u8], &'a [u8])>,
    {
        self.status = status;
        self.header_bytes = field_bytes(fields()) + 13;
        let regular = || fields().filter(|(n, _)| !n.starts_with(b":"));
        self.length = if self.head_request || status == 204 || status == 304 {
            None
        } else {
            // One that is no number is not checked (as a missing one).
            regular()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"content-length"))
                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse().ok())
        };
        if self.keep.server {
            self.server = regular()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"server"))
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .map(str::to_string);
        }
        if self.keep.headers {
            self.keep_fields(regular());
        }
    }

    /// The response's trailer fields: counted, and kept after its headers
    /// when headers are asked for (a gRPC call's status and message).
    pub(crate) fn trailer_fields<'a, I>(&mut self, fields: impl Fn() -> I)
    where
        I: Iterator<Item = (&'a [u8], &'a [u8])>,
    {
        self.header_bytes += field_bytes(fields());
        if self.keep.headers {
            self.keep_fields(fields().filter(|(n, _)| !n.starts_with(b":")));
        }
    }

    /// Keeps fields up to HTTP/1.1's head limit: a server's huge header
    /// block costs each VU no more than an HTTP/1.1 head.
    fn keep_fields<'a>(&mut self, fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
        let mut kept: usize = self.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
        for (n, v) in fields {
            kept += n.len() + v.len() + 4;
            if kept > KEPT_HEADERS {
                break;
            }
            let name = String::from_utf8_lossy(n).to_ascii_lowercase();
            self.headers.push((name, String::from_utf8_lossy(v).into_owned()));
        }
    }

    /// A piece of the body: counted, and kept up to what was asked for.
    pub(crate) fn chunk(&mut self, data: &[u8]) {
        self.body_bytes += data.len() as u64;
        let room = self.keep.body.saturating_sub(self.body.len());
        if data.len() > room {
            self.truncated = self.keep.body > 0;
        }
        self.body.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// More body came than the response's `content-length` said: a
    /// malformed response (RFC 9113 8.1.1, RFC 9114 4.1.2), `protocol` —
    /// HTTP/1.1 cannot tell such bytes from the next response's.
    pub(crate) fn over_length(&self) -> bool {
        self.length.is_some_and(|l| self.body_bytes > l)
    }

    /// The stream ended with less body than its `content-length`: `eof`,
    /// as HTTP/1.1's body cut short by the connection's end.
    pub(crate) fn short_of_length(&self) -> bool {
        self.length.is_some_and(|l| self.body_bytes < l)
    }

    /// The kept headers (names lowercase, as HTTP/2 and HTTP/3 send them).
    pub(crate) fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The kept start of the body.
    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body was longer than what was kept.
    pub(crate) fn body_truncated(&self) -> bool {
        self.truncated
    }

    pub(crate) fn reply(&self) -> Reply {
        Reply {
            status: self.status,
            header_bytes: self.header_bytes,
            body_bytes: self.body_bytes,
        }
    }

    /// Bytes of the response: its decoded header block and its body
    /// (HTTP/2 frames compressed headers; per-stream wire sizes are not
    /// known).
    pub(crate) fn wire_bytes(&self) -> u64 {
        self.header_bytes + self.body_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed spec errors read as the messages they replaced: the flag,
    /// the value, the reason.
    #[test]
    fn spec_errors_name_the_flag_and_the_value() {
        let e = SpecError::HeaderName {
            name: "bad name".into(),
            source: http::HeaderName::from_bytes(b"bad name").unwrap_err(),
        };
        assert_eq!(
            e.to_string(),
            "-H 'bad name': not an HTTP/2 header name (invalid HTTP header name)"
        );
        let e = SpecError::Method {
            method: "G T".into(),
            source: http::Method::from_bytes(b"G T").unwrap_err(),
        };
        assert_eq!(e.to_string(), "-m G T: not an HTTP/2 method (invalid HTTP method)");
    }

    #[test]
    fn a_slot_keeps_what_it_was_asked_for_within_bounds() {
        let mut slot = Slot::new(false);
        let mut h = http::HeaderMap::new();
        h.insert("set-cookie", http::HeaderValue::from_static("sid=1"));
        h.insert("x-big", http::HeaderValue::from_str(&"v".repeat(70_000)).unwrap());
        slot.begin();
        slot.head(200, &h);
        slot.chunk(b"hello");
        // Nothing kept unless asked.
        assert!(slot.headers().is_empty() && slot.body().is_empty() && !slot.body_truncated());
        assert_eq!((slot.status, slot.body_bytes), (200, 5));
        slot.reset(Keep {
            server: false,
            headers: true,
            body: 4,
        });
        slot.begin();
        slot.head(201, &h);
        slot.chunk(b"hel");
        slot.chunk(b"lo");
        assert_eq!(slot.body(), b"hell");
        assert!(slot.body_truncated());
        assert_eq!(slot.body_bytes, 5);
        // The huge header is counted, not kept.
        assert_eq!(slot.headers(), [("set-cookie".to_string(), "sid=1".to_string())]);
        assert!(slot.header_bytes > 70_000);
        slot.begin();
        assert!(slot.headers().is_empty() && slot.body().is_empty() && !slot.body_truncated());
    }

    #[test]
    fn a_body_is_held_to_its_content_length() {
        let ten = [(&b":status"[..], &b"200"[..]), (&b"content-length"[..], &b"10"[..])];
        let mut s = Slot::new(false);
        s.begin();
        s.head_fields(200, || ten.iter().copied());
        s.chunk(b"abc");
        assert!(s.short_of_length() && !s.over_length());
        s.chunk(b"defghij");
        assert!(!s.short_of_length() && !s.over_length());
        s.chunk(b"k");
        assert!(s.over_length());
        // A new response forgets the last one's length.
        s.begin();
        assert!(!s.short_of_length());
        // No body to check: a HEAD request's, a 204's, a 304's; nor a
        // length that is no number.
        let mut head = Slot::new(true);
        head.head_fields(200, || ten.iter().copied());
        assert!(!head.short_of_length());
        for status in [204, 304] {
            s.begin();
            s.head_fields(status, || ten.iter().copied());
            assert!(!s.short_of_length(), "{status}");
        }
        let bad = [(&b"content-length"[..], &b"ten"[..])];
        s.begin();
        s.head_fields(200, || bad.iter().copied());
        assert!(!s.short_of_length());
    }
}
