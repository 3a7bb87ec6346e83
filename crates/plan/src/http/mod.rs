//! `throng http`: the validated plan of an HTTP/1.1 load run.
//!
//! [`HttpPlan::from_args`] reads as the steps it takes; each step is a
//! function of one of these modules, by what it validates:
//!
//! - `steps`: the run's shape (targets, load, stop, connections, threads,
//!   HTTP version, streams, timeout, TLS, body, `--io`);
//! - `target`: URLs, their credentials, each target's method;
//! - `headers`: `-H`, `Authorization`, `-T`, `--cookie`, framing headers,
//!   and which headers are secret;
//! - `redact`: secrets kept out of results and command lines;
//! - `table`: a plan of several requests, rendered once;
//! - `grpc`: `throng grpc`'s call and status names;
//! - `trace`: `--trace-context`, the `traceparent` each request carries.

mod grpc;
mod headers;
mod redact;
mod steps;
mod stream;
mod table;
mod target;
#[cfg(test)]
mod tests;
mod trace;

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::error::PlanError;
use crate::head::RequestHead;
use crate::reach::{Reach, ReachArgs};
use crate::segment::Segment;
use crate::status::StatusSet;
use crate::targets::{MAX_TAGGED_TARGETS, RawTarget, Requests, TargetInfo, TargetOrder};
pub use crate::tls::TlsSettings;

pub use crate::endpoint::{Scheme, Target};
pub use crate::head::is_token;
pub use grpc::{GRPC_CODES, GrpcCall, grpc_code_name};
pub use headers::{is_forbidden_in_value, secret_names};
pub use redact::{is_secret, redact_command, redaction_note};
pub use stream::{LlmApi, MAX_STREAM_EVENTS, Slo, StreamArgs, StreamSpec};
pub use target::mask_userinfo;
use target::{parse_target_at, target_method};
pub use trace::{
    DEFAULT_SLOWEST, MAX_SLOWEST, Sampling, TRACEPARENT, TraceContext, placeholder_at, placeholder_value,
    refuse_own_traceparent, trace_context_of, traceparent_at, traceparent_value, write_ids,
};

/// Run length when neither `-n` nor `-d` is given (as wrk).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Closed-loop connections when `-c` is not given.
pub const DEFAULT_CONNECTIONS: u32 = 50;
/// Open-loop connection cap when `-c` is not given.
pub const DEFAULT_OPEN_CAP: u32 = 1000;
/// The most redirects one request may follow (`--redirects`, a scenario's
/// `redirects:`): more is a loop, not a site.
pub const MAX_REDIRECTS: u32 = 100;
/// `--timeout` when not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest `--body` accepted (64 MiB): the body is held in memory once
/// for the whole run, and a file past this is almost always a mistake
/// (`/dev/zero`, a log that keeps growing).
pub const MAX_BODY_BYTES: u64 = 64 << 20;
/// Header values replaced by [`REDACTED`] in every file and report; more
/// are marked with `--secret-header NAME`.
pub const SENSITIVE_HEADERS: [&str; 4] = ["authorization", "proxy-authorization", "cookie", "set-cookie"];
/// What a secret header's value reads as in results and reports.
pub const REDACTED: &str = "<redacted>";

/// Flags as parsed, before validation. Every field maps to one flag.
#[derive(Clone, Debug, Default)]
pub struct HttpArgs {
    /// `URL`.
    pub url: String,
    /// `-c`.
    pub connections: Option<u32>,
    /// `-n`.
    pub requests: Option<u64>,
    /// `-d`.
    pub duration: Option<Duration>,
    /// `-r` (per second).
    pub rate: Option<f64>,
    /// `-t`.
    pub threads: Option<u32>,
    /// `-m`.
    pub method: Option<String>,
    /// `-H`, as typed.
    pub headers: Vec<String>,
    /// `--body`: the file's path and contents (read at the edge, at most
    /// [`MAX_BODY_BYTES`]).
    pub body: Option<(String, Vec<u8>)>,
    /// `--secret-header`, as typed: more headers whose values are redacted.
    pub secret_headers: Vec<String>,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--no-keepalive`.
    pub no_keepalive: bool,
    /// `--http2`.
    pub http2: bool,
    /// `--http3`.
    pub http3: bool,
    /// `--streams`.
    pub streams: Option<u32>,
    /// `--expect-status`.
    pub expect_status: Option<StatusSet>,
    /// TLS flags (`--cacert`, `--cert`, `--key`, `--insecure`, `--tls-*`).
    pub tls: TlsSettings,
    /// Cores on this machine (the default for `-t`).
    pub cores: u32,
    /// `--segment`/`--segment-sequence`: this process's share of the plan.
    pub segment: Option<Segment>,
    /// `--start-at`, ms since the Unix epoch.
    pub start_at_unix_ms: Option<u64>,
    /// `-a/--basic-auth`, as typed (`USER:PASSWORD`).
    pub basic_auth: Option<String>,
    /// `--bearer-file`: the file's path and its first line (read at the edge).
    pub bearer: Option<(String, String)>,
    /// `-H @FILE`: each header line with where it came from (`FILE:LINE`);
    /// their values are secret.
    pub header_lines: Vec<(String, String)>,
    /// `-4`/`-6`, `--connect-to`, `--resolve`, `-x/--proxy` and the proxy environment.
    pub reach: ReachArgs,
    /// More targets after `url` (further URLs, then a `--targets` file's);
    /// `url` may then be empty.
    pub targets: Vec<RawTarget>,
    /// `--targets-order`.
    pub targets_order: TargetOrder,
    /// `--body-lines`: the file's path and contents (at most
    /// [`MAX_TARGETS_FILE_BYTES`]).
    pub body_lines: Option<(String, Vec<u8>)>,
    /// `-T/--content-type`.
    pub content_type: Option<String>,
    /// `--threshold`, as typed (checked by the caller, judged on the result).
    pub thresholds: Vec<String>,
    /// `--redirects`: redirects to follow per request (None: 0).
    pub redirects: Option<u32>,
    /// `--cookie`, as typed: `name=value` each.
    pub cookies: Vec<String>,
    /// `--io`.
    pub io: IoModel,
    /// `--trace-context` (its value; sampled when given bare).
    pub trace_context: Option<Sampling>,
    /// `--slowest`.
    pub slowest: Option<u32>,
    /// `--sse`, `--llm`, `--sse-events`, `--sse-duration`, `--slo`.
    pub stream: StreamArgs,
}

/// How the workers drive their sockets (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoModel {
    /// io_uring when the ring carries the plan ([`HttpPlan::ring_refuses`])
    /// and the kernel allows it, epoll otherwise: decided by each process
    /// when it runs; its result's `generator.io` says which ran.
    #[default]
    Auto,
    /// tokio's epoll readiness loop: every protocol, every load.
    Epoll,
    /// One io_uring per worker: batched sends, multishot receives.
    /// HTTP/1.1 closed and open loops only, plain or over TLS.
    Uring,
}

impl IoModel {
    /// What a result written before `auto` existed ran when it does not
    /// say: epoll, then the default.
    pub(crate) fn before_auto() -> IoModel {
        IoModel::Epoll
    }

    /// The flag's value, as typed.
    pub fn name(&self) -> &'static str {
        match self {
            IoModel::Auto => "auto",
            IoModel::Epoll => "epoll",
            IoModel::Uring => "uring",
        }
    }
}

/// The most concurrent streams `--streams` may ask for per connection.
pub const MAX_STREAMS: u32 = 10_000;
/// The most streams one plan may keep in flight (`-c` × `--streams`).
pub const MAX_STREAMS_IN_FLIGHT: u64 = 200_000;

/// The HTTP version a plan speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpVersion {
    /// HTTP/1.1: one request at a time per connection.
    #[default]
    #[serde(rename = "http/1.1")]
    Http1,
    /// HTTP/2: ALPN `h2` over TLS, prior knowledge (h2c) over plain TCP;
    /// streams multiplexed on each connection.
    #[serde(rename = "h2")]
    Http2,
    /// HTTP/3 over QUIC.
    #[serde(rename = "h3")]
    Http3,
}

impl HttpVersion {
    /// True for HTTP/1.1 (the default, left out of result files).
    pub fn is_http1(&self) -> bool {
        *self == HttpVersion::Http1
    }

    /// True when streams are multiplexed on a connection (HTTP/2, HTTP/3).
    pub fn is_multiplexed(&self) -> bool {
        !self.is_http1()
    }

    /// The ALPN protocol id: `http/1.1`, `h2`, `h3`.
    pub fn alpn(&self) -> &'static str {
        match self {
            HttpVersion::Http1 => "http/1.1",
            HttpVersion::Http2 => "h2",
            HttpVersion::Http3 => "h3",
        }
    }

    /// The name users read: `HTTP/1.1`, `HTTP/2`, `HTTP/3`.
    pub fn label(&self) -> &'static str {
        match self {
            HttpVersion::Http1 => "HTTP/1.1",
            HttpVersion::Http2 => "HTTP/2",
            HttpVersion::Http3 => "HTTP/3",
        }
    }
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn one() -> u32 {
    1
}

/// Closed or open loop.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase")]
pub enum Load {
    /// Each connection sends its next request when the previous completed.
    Closed,
    /// Requests start on a fixed schedule, `rate` per second, whatever the
    /// responses do; `connections` is then a cap.
    Open {
        /// Requests per second.
        rate: f64,
    },
}

/// When the run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// After this many requests in total.
    Requests(u64),
    /// After this long.
    Duration(#[serde(with = "crate::duration::serde_duration")] Duration),
}

/// A validated `throng http` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpPlan {
    /// Where requests go.
    pub target: Target,
    /// Request method.
    pub method: String,
    /// Extra request headers, in order.
    pub headers: Vec<(String, String)>,
    /// Request body (not stored in result files; see `body_file`). Shared,
    /// not copied, by whoever sends it.
    #[serde(skip)]
    pub body: Bytes,
    /// Where the body came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_file: Option<String>,
    /// Body size.
    pub body_bytes: u64,
    /// Names of the headers whose values are secret (lowercase): the
    /// always-sensitive ones present and those marked `--secret-header`.
    /// Results and reports hold [`HttpPlan::redacted`], where these values
    /// read [`REDACTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_headers: Vec<String>,
    /// Connections (closed loop) or the connection cap (open loop).
    pub connections: u32,
    /// Worker threads.
    pub threads: u32,
    /// Closed or open loop.
    pub load: Load,
    /// When the run ends.
    pub stop: Stop,
    /// Limit on connect and on each request's response.
    #[serde(with = "crate::duration::serde_duration")]
    pub timeout: Duration,
    /// Reuse connections (false: one connection per request).
    pub keepalive: bool,
    /// How the workers were asked to drive their sockets (`--io`; always
    /// written; absent in results from before `auto`, which ran epoll
    /// unless they said uring). What ran is the result's `generator.io`.
    #[serde(default = "IoModel::before_auto")]
    pub io: IoModel,
    /// The HTTP version spoken (left out of result files for HTTP/1.1, so
    /// files of earlier versions read back as HTTP/1.1).
    #[serde(default, skip_serializing_if = "HttpVersion::is_http1")]
    pub http: HttpVersion,
    /// Most concurrent streams per connection (`--streams`; 1 for
    /// HTTP/1.1). The server's SETTINGS_MAX_CONCURRENT_STREAMS may cap it
    /// further at run time; the result says so.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub streams: u32,
    /// Statuses counted `ok`; any other response is `check_failed`.
    pub expect_status: StatusSet,
    /// Redirects each request follows (0: a 3xx is the final response).
    /// The final status is the one counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redirects: u32,
    /// TLS settings (https only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
    /// The execution segment this process runs (None: all of the plan).
    /// The plan's numbers stay the whole plan's; the engine takes the
    /// segment's share of each. Recorded in the result, not here.
    #[serde(skip)]
    pub segment: Option<Segment>,
    /// Start at this wall-clock instant (ms since the Unix epoch).
    #[serde(skip)]
    pub start_at_unix_ms: Option<u64>,
    /// Where connections go: address family, overrides, proxy.
    #[serde(default, skip_serializing_if = "Reach::is_default")]
    pub reach: Reach,
    /// The request's bytes, made once at validation; `body` is a view into
    /// them, so a large body is held once, whoever sends it.
    #[serde(skip)]
    wire: Wire,
    /// Every target, when there are several (`target` is the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetInfo>,
    /// How requests pick their target (or their `--body-lines` body).
    #[serde(default, skip_serializing_if = "is_round_robin")]
    pub targets_order: TargetOrder,
    /// `--body-lines`: the file and how many bodies it held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_lines: Option<BodyLines>,
    /// `--threshold`s as typed: `response{target:/a}: p(95) < 50ms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<String>,
    /// Every request the run sends, when there is more than one (several
    /// targets, `--body-lines`); empty otherwise.
    #[serde(skip)]
    requests: RequestTable,
    /// The run's requests are gRPC unary calls (`throng grpc`): statuses
    /// counted are gRPC status codes, not HTTP ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Box<GrpcCall>>,
    /// `--trace-context`: each request carries a new `traceparent`; the
    /// result keeps the slowest requests' trace ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
    /// `--sse`/`--llm`: each response is an event stream, read event by
    /// event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<Box<StreamSpec>>,
}

fn is_round_robin(o: &TargetOrder) -> bool {
    *o == TargetOrder::RoundRobin
}

/// Where `--body-lines` bodies came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyLines {
    /// The file.
    pub file: String,
    /// Bodies (non-blank lines) in it.
    pub count: u64,
}

/// The request table of a validated plan: derived, like [`Wire`].
#[derive(Clone, Default, Debug)]
struct RequestTable(std::sync::Arc<Requests>);

impl PartialEq for RequestTable {
    fn eq(&self, _: &RequestTable) -> bool {
        true
    }
}

/// The bytes of a validated plan's request: derived from the other fields
/// (so plans compare equal whatever it holds, e.g. one read back from a
/// result file, where it is empty).
#[derive(Clone, Default)]
struct Wire(Bytes);

impl PartialEq for Wire {
    fn eq(&self, _: &Wire) -> bool {
        true
    }
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Wire({} bytes)", self.0.len())
    }
}

impl HttpPlan {
    /// Validates flags into a plan, one step after another. Every error
    /// names the flag and the fix.
    pub fn from_args(mut args: HttpArgs) -> Result<HttpPlan, PlanError> {
        let raw = steps::raw_targets(&mut args)?;
        let (target, url_auth) = parse_target_at(&raw[0])?;
        let has_body = args.body.is_some() || args.body_lines.is_some() || raw[0].body.is_some();
        let method = target_method(&raw[0], &args, has_body)?;

        let (mut headers, from_files) = headers::given_headers(&args)?;
        headers::authorization(&mut headers, &args, url_auth)?;
        let reach = Reach::from_args(&args.reach, &target.host, Some(target.scheme == Scheme::Https))?;
        headers::proxy_authorization(&mut headers, &reach, &target);
        headers::content_type(&mut headers, args.content_type.as_deref())?;
        headers::cookie_header(&args.cookies, &mut headers)?;
        let mut marked = args.secret_headers.clone();
        marked.extend(from_files);
        let secret_headers = secret_names(&marked, headers.iter().map(|(n, _)| n.as_str()))?;

        let redirects = steps::redirects(args.redirects)?;
        let load = steps::load(args.rate)?;
        let stop = steps::stop(args.requests, args.duration)?;
        let workers = steps::workers(&mut args, load, stop)?;
        let http = steps::http_version(args.http2, args.http3, &target)?;
        let streams = steps::streams(args.streams, http, workers.connections)?;
        let timeout = steps::timeout(args.timeout)?;
        let tls = steps::tls(&args.tls, &target, http)?;
        let (body_file, body) = steps::body(args.body.take())?;
        let several = steps::is_several(&raw, &args);
        steps::combinations(http, &reach, several, redirects)?;
        let trace = trace::trace_context(&args, &headers)?;
        let stream = stream::stream_spec(&args.stream, redirects)?;
        if !several {
            headers::framing_headers(&mut headers, body.len() as u64, body_file.as_deref())?;
        }

        let mut plan = HttpPlan {
            target,
            method,
            headers,
            body_bytes: body.len() as u64,
            body: Bytes::new(),
            body_file,
            secret_headers,
            connections: workers.connections,
            threads: workers.threads,
            load,
            stop,
            timeout,
            keepalive: !args.no_keepalive,
            io: args.io,
            http,
            streams,
            expect_status: args.expect_status.unwrap_or_default(),
            redirects,
            tls,
            segment: workers.segment,
            start_at_unix_ms: args.start_at_unix_ms,
            reach,
            wire: Wire::default(),
            targets: Vec::new(),
            targets_order: args.targets_order,
            body_lines: None,
            thresholds: args.thresholds.clone(),
            requests: RequestTable::default(),
            grpc: None,
            trace,
            stream,
        };
        // The placeholder is rendered into the request(s) only: the engine
        // writes each request's ids over it; the plan's headers are the user's.
        if trace.is_some() {
            plan.headers.push(trace::placeholder());
        }
        if several {
            plan.render_table(&args, &raw, body)?;
        } else {
            plan.render_one(body);
        }
        if trace.is_some() {
            plan.headers.retain(|(n, _)| n != TRACEPARENT);
        }
        if plan.io == IoModel::Uring
            && let Some(what) = plan.ring_refuses()
        {
            return Err(PlanError::invalid(
                "--io",
                format!(
                    "--io uring runs HTTP/1.1 closed and open loops only (plain or TLS), not {what}; leave out --io (auto runs \
                     epoll for this plan), or pass --io epoll"
                ),
            ));
        }
        Ok(plan)
    }

    /// What keeps io_uring from carrying this plan (None: the ring carries
    /// it). The one decision `--io uring` refuses by and `--io auto` picks
    /// epoll by: a kind of plan the ring learns is one line less here.
    pub fn ring_refuses(&self) -> Option<String> {
        match self.http {
            HttpVersion::Http1 => {}
            // HTTP/2's closed and open loops ride the ring (engine uring/h2),
            // with or without keep-alive.
            HttpVersion::Http2 if self.request_table().is_some() => {
                return Some("several targets with --http2 (--targets, --body-lines, more URLs)".to_string());
            }
            HttpVersion::Http2 => {}
            HttpVersion::Http3 => return Some("HTTP/3 (--http3)".to_string()),
        }
        if self.requests.0.origin_count() > 1 {
            return Some("targets on several origins (hosts or ports)".to_string());
        }
        if self.redirects > 0 {
            return Some("--redirects".to_string());
        }
        if self.reach.proxy.is_some() {
            return Some(
                "a proxy (-x/--proxy or the proxy environment; --proxy '' ignores the environment)".to_string(),
            );
        }
        if self.grpc.is_some() {
            return Some("gRPC".to_string());
        }
        if self.stream.is_some() {
            return Some("event streams (--sse, --llm)".to_string());
        }
        None
    }

    /// Renders a plan's one request: the head goes in front of the body
    /// where it lies (a large allocation grows in place), so the body is
    /// never in memory twice; `body` is then a view into the request.
    fn render_one(&mut self, body: Vec<u8>) {
        let len = body.len();
        let mut wire = body;
        wire.splice(0..0, self.render_head(len));
        let wire = Bytes::from(wire);
        self.body = wire.slice(wire.len() - len..);
        self.wire = Wire(wire);
    }

    /// Every request of a plan with more than one (several targets, or
    /// `--body-lines`), rendered once; None for a plan of one request
    /// ([`HttpPlan::request_bytes`]) or one read back from a result.
    pub fn request_table(&self) -> Option<std::sync::Arc<Requests>> {
        (self.requests.0.len() > 1).then(|| std::sync::Arc::clone(&self.requests.0))
    }

    /// The origins (one target of each host and port, in the order first
    /// seen) when the targets are on more than one; empty otherwise.
    pub fn origins(&self) -> Vec<Target> {
        self.requests.0.origins.clone()
    }

    /// The names of the targets (`target:` tags), when there are several
    /// and at most [`MAX_TAGGED_TARGETS`]; empty otherwise.
    pub fn target_names(&self) -> Vec<String> {
        if self.targets.len() > MAX_TAGGED_TARGETS {
            return Vec::new();
        }
        self.targets.iter().map(|t| t.name.clone()).collect()
    }

    /// What a result says of a run with more targets than are tagged.
    pub fn targets_note(&self) -> Option<String> {
        (self.targets.len() > MAX_TAGGED_TARGETS).then(|| {
            format!(
                "{} targets: figures per target are kept for at most {MAX_TAGGED_TARGETS}, so this run has the \
                 figures of all its requests only",
                self.targets.len()
            )
        })
    }

    /// This process's segment: the plan's, or the whole.
    pub fn segment(&self) -> Segment {
        self.segment.clone().unwrap_or_else(Segment::whole)
    }

    /// True for open-loop plans (latency is coordinated-omission-free).
    pub fn is_open_loop(&self) -> bool {
        matches!(self.load, Load::Open { .. })
    }

    /// The exact bytes of one request, head and body: shared, not copied
    /// (made anew only for a plan read back from a result file).
    pub fn request_bytes(&self) -> Bytes {
        if self.wire.0.is_empty() {
            Bytes::from(self.render_request())
        } else {
            self.wire.0.clone()
        }
    }

    fn render_request(&self) -> Vec<u8> {
        let mut out = self.render_head(self.body.len());
        out.extend_from_slice(&self.body);
        out
    }

    /// The request line and headers, for a body of `body_len` bytes.
    fn render_head(&self, body_len: usize) -> Vec<u8> {
        // Through a proxy, plain http names the whole URL (absolute form).
        let absolute;
        let target = match (&self.reach.proxy, self.target.scheme) {
            (Some(_), Scheme::Http) => {
                absolute = format!("http://{}{}", self.target.host_authority(), self.target.path);
                &absolute
            }
            _ => &self.target.path,
        };
        let head = RequestHead {
            method: &self.method,
            target,
            authority: &self.target.host_authority(),
            headers: &self.headers,
            body_len,
            close: !self.keepalive,
        };
        // Room for the body too: render_request appends it without regrowing.
        let mut out = Vec::with_capacity(
            256 + self.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>() + self.body.len(),
        );
        head.write(&mut out);
        out
    }

    /// The plan as results and reports keep it: the values of secret
    /// headers read [`REDACTED`].
    pub fn redacted(&self) -> HttpPlan {
        let mut plan = self.clone();
        // The request holds the secrets; a result has no use for it.
        plan.wire = Wire::default();
        for (name, value) in &mut plan.headers {
            if is_secret(&plan.secret_headers, name) {
                *value = REDACTED.to_string();
            }
        }
        plan
    }

    /// Says which headers' values a result holds as [`REDACTED`], if any.
    pub fn redaction_note(&self) -> Option<String> {
        redaction_note(self.headers.iter().map(|(n, _)| n.as_str()), &self.secret_headers)
    }

    /// A one-line description: `closed loop, 50 connections, 2 threads, 10s`.
    pub fn describe(&self) -> String {
        let load = match self.load {
            Load::Closed => format!(
                "closed loop, {}",
                crate::duration::count(self.connections, "connection")
            ),
            Load::Open { rate } => format!(
                "open loop at {}, up to {}",
                crate::duration::format_rate(rate, "req"),
                crate::duration::count(self.connections, "connection")
            ),
        };
        let stop = match self.stop {
            Stop::Requests(n) => format!("{n} requests"),
            Stop::Duration(d) => format_duration(d),
        };
        let ka = if self.keepalive {
            ""
        } else {
            ", a new connection per request"
        };
        let threads = crate::duration::count(self.threads, "thread");
        let follow = match self.redirects {
            0 => String::new(),
            n => format!(", following up to {}", crate::duration::count(n, "redirect")),
        };
        let version = if self.http.is_http1() {
            String::new()
        } else {
            format!(
                ", {}, up to {} per connection",
                self.http.label(),
                crate::duration::count(self.streams, "stream")
            )
        };
        let trace = match self.trace {
            Some(t) => format!(
                ", a traceparent on each request ({})",
                match t.sampling {
                    Sampling::Sampled => "sampled",
                    Sampling::Unsampled => "unsampled",
                }
            ),
            None => String::new(),
        };
        format!("{load}, {threads}, {stop}{ka}{version}{follow}{trace}")
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
