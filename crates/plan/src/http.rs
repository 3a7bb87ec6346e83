//! `throng http`: the validated plan of an HTTP/1.1 load run.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::error::PlanError;
use crate::head::{Authority, RequestHead};
use crate::reach::{Reach, ReachArgs};
use crate::segment::Segment;
use crate::status::StatusSet;
use crate::targets::{
    MAX_TAGGED_TARGETS, MAX_TARGETS, MAX_URL_BYTES, RawTarget, Requests, TargetInfo, TargetOrder, names,
    split_body_lines,
};
pub use crate::tls::TlsSettings;

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
}

/// How the workers drive their sockets (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoModel {
    /// tokio's epoll readiness loop: every protocol, every load.
    #[default]
    Epoll,
    /// One io_uring per worker: batched sends, multishot receives. Plain
    /// HTTP/1.1 closed loops only.
    Uring,
}

impl IoModel {
    /// True for the default (left out of result files).
    pub fn is_epoll(&self) -> bool {
        *self == IoModel::Epoll
    }
}

/// Refuses what `--io uring` cannot run yet, saying what and what to do.
fn uring_supports(
    target: &Target,
    http: HttpVersion,
    load: &Load,
    several: bool,
    redirects: u32,
    reach: &Reach,
) -> Result<(), PlanError> {
    let not = |what: &str| {
        Err(PlanError::invalid(
            "--io",
            format!(
                "--io uring runs plain HTTP/1.1 closed loops only, not {what}; leave out --io uring (or pass --io epoll)"
            ),
        ))
    };
    if target.scheme == Scheme::Https {
        return not("TLS (https://)");
    }
    if !http.is_http1() {
        return not(&format!("{} (--http2/--http3)", http.label()));
    }
    if matches!(load, Load::Open { .. }) {
        return not("open loops (-r)");
    }
    if several {
        return not("several targets (--targets, --body-lines, more URLs)");
    }
    if redirects > 0 {
        return not("--redirects");
    }
    if reach.proxy.is_some() {
        return not("a proxy (-x/--proxy or the proxy environment; --proxy '' ignores the environment)");
    }
    Ok(())
}

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS.
    Https,
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Scheme.
    pub scheme: Scheme,
    /// Host name or address literal (IPv6 without brackets).
    pub host: String,
    /// Port (the scheme's default when the URL has none).
    pub port: u16,
    /// Path and query, as sent on the request line.
    pub path: String,
}

impl Target {
    /// `host:port` for the `Host` header, with the port only when it is not
    /// the scheme's default.
    pub fn authority(&self) -> String {
        self.host_authority().to_string()
    }

    /// The [`Authority`] of this target.
    pub fn host_authority(&self) -> Authority {
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        Authority::new(&self.host, self.port, default)
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
    /// How the workers drive their sockets (left out of result files for
    /// the default, epoll).
    #[serde(default, skip_serializing_if = "IoModel::is_epoll")]
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
    pub grpc: Option<GrpcCall>,
}

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
    /// Validates flags into a plan. Every error names the flag and the fix.
    pub fn from_args(mut args: HttpArgs) -> Result<HttpPlan, PlanError> {
        let mut raw = std::mem::take(&mut args.targets);
        if !args.url.is_empty() {
            raw.insert(
                0,
                RawTarget {
                    at: "URL".into(),
                    url: args.url.clone(),
                    ..RawTarget::default()
                },
            );
        }
        if raw.is_empty() {
            return Err(PlanError::invalid(
                "URL",
                "no target; give a URL (or several), or --targets FILE, e.g. http://127.0.0.1:8080/",
            ));
        }
        if raw.len() > MAX_TARGETS {
            return Err(PlanError::invalid(
                "--targets",
                format!(
                    "{} targets, over the limit of {MAX_TARGETS}; split them and run one throng per part",
                    raw.len()
                ),
            ));
        }
        let (target, url_auth) = parse_target_at(&raw[0])?;

        let method = target_method(
            &raw[0],
            &args,
            args.body.is_some() || args.body_lines.is_some() || raw[0].body.is_some(),
        )?;

        let mut headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let mut from_files = Vec::new();
        for (at, line) in &args.header_lines {
            let (name, value) =
                parse_header(line).map_err(|e| PlanError::invalid("-H @FILE", format!("{at}: {}", e.message())))?;
            from_files.push(name.to_ascii_lowercase());
            headers.push((name, value));
        }
        authorization(&mut headers, &args, url_auth)?;
        let reach = Reach::from_args(&args.reach, &target.host, Some(target.scheme == Scheme::Https))?;
        if let (Some(p), Scheme::Http) = (&reach.proxy, target.scheme)
            && let Some(auth) = &p.authorization
        {
            headers.push(("Proxy-Authorization".to_string(), auth.clone()));
        }
        if let Some(ct) = &args.content_type {
            if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
                return Err(PlanError::invalid(
                    "-T/--content-type",
                    "-H 'Content-Type: …' sets it too; give one of them",
                ));
            }
            let ct = ct.trim_matches([' ', '\t']);
            if ct.is_empty() || ct.chars().any(is_forbidden_in_value) {
                return Err(PlanError::invalid(
                    "-T/--content-type",
                    format!("'{}' is not a media type; e.g. -T application/json", ct.escape_debug()),
                ));
            }
            headers.push(("Content-Type".to_string(), ct.to_string()));
        }
        cookie_header(&args.cookies, &mut headers)?;
        let mut marked = args.secret_headers.clone();
        marked.extend(from_files);
        let secret_headers = secret_names(&marked, headers.iter().map(|(n, _)| n.as_str()))?;
        let redirects = args.redirects.unwrap_or(0);
        if redirects > MAX_REDIRECTS {
            return Err(PlanError::invalid(
                "--redirects",
                format!("{redirects} is over the limit of {MAX_REDIRECTS}; give 0 to {MAX_REDIRECTS}"),
            ));
        }

        let load = match args.rate {
            Some(rate) if !(rate.is_finite() && rate > 0.0) => {
                return Err(PlanError::invalid(
                    "-r/--rate",
                    "must be greater than 0 requests per second, e.g. -r 1000",
                ));
            }
            Some(rate) => Load::Open { rate },
            None => Load::Closed,
        };

        let stop = match (args.requests, args.duration) {
            (Some(_), Some(_)) => {
                return Err(PlanError::invalid(
                    "-n/-d",
                    "give either -n REQUESTS or -d DURATION, not both",
                ));
            }
            (Some(0), None) => {
                return Err(PlanError::invalid("-n/--requests", "must be at least 1, e.g. -n 10000"));
            }
            (Some(n), None) => Stop::Requests(n),
            (None, Some(d)) if d.is_zero() => {
                return Err(PlanError::invalid(
                    "-d/--duration",
                    "must be longer than 0, e.g. -d 30s",
                ));
            }
            (None, Some(d)) => Stop::Duration(d),
            (None, None) => Stop::Duration(DEFAULT_DURATION),
        };

        let default_conns = match load {
            Load::Closed => DEFAULT_CONNECTIONS,
            Load::Open { .. } => DEFAULT_OPEN_CAP,
        };
        let mut connections = args.connections.unwrap_or(default_conns);
        if connections == 0 {
            return Err(PlanError::invalid("-c/--connections", "must be at least 1, e.g. -c 50"));
        }
        // A closed-loop run never needs more connections than requests: the
        // rest would sit idle (ab refuses such plans; we trim them).
        if let (Load::Closed, Stop::Requests(n)) = (load, stop) {
            connections = connections.min(u32::try_from(n).unwrap_or(u32::MAX));
        }

        let threads = args.threads.unwrap_or(args.cores.max(1));
        if threads == 0 {
            return Err(PlanError::invalid("-t/--threads", "must be at least 1, e.g. -t 2"));
        }
        let segment = args.segment.take().filter(|s| !s.is_whole());
        // This process's connections: its segment's share (at least one as
        // an open loop's cap).
        let mine = match &segment {
            Some(s) => {
                let share = u32::try_from(s.share(u64::from(connections))).unwrap_or(u32::MAX);
                if share == 0 && load == Load::Closed {
                    return Err(PlanError::invalid(
                        "-c/--connections",
                        format!(
                            "-c {connections} leaves segment {} no connection to send its requests on; \
                             raise -c to at least the number of segments",
                            s.range()
                        ),
                    ));
                }
                share.max(1)
            }
            None => connections,
        };
        // Every worker owns at least one connection.
        let threads = threads.min(mine);

        let http = http_version(args.http2, args.http3, &target)?;
        let streams = match (args.streams, http) {
            (None, _) => 1,
            (Some(_), HttpVersion::Http1) => {
                return Err(PlanError::invalid(
                    "--streams",
                    "multiplexes streams on HTTP/2 and HTTP/3 connections; add --http2 or --http3, or leave --streams out \
                     (HTTP/1.1 sends one request at a time per connection: raise -c instead)",
                ));
            }
            (Some(n), _) if n == 0 || n > MAX_STREAMS => {
                return Err(PlanError::invalid(
                    "--streams",
                    format!("must be between 1 and {MAX_STREAMS} streams per connection, e.g. --streams 10"),
                ));
            }
            (Some(n), _) => n,
        };
        if u64::from(connections) * u64::from(streams) > MAX_STREAMS_IN_FLIGHT {
            return Err(PlanError::invalid(
                "--streams",
                format!(
                    "-c {connections} × --streams {streams} asks for more than {MAX_STREAMS_IN_FLIGHT} streams in \
                     flight (each is a task with its own state); lower -c or --streams, or split the load over \
                     processes with --segment"
                ),
            ));
        }

        let timeout = args.timeout.unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            return Err(PlanError::invalid(
                "--timeout",
                "must be longer than 0, e.g. --timeout 10s",
            ));
        }

        let tls = match target.scheme {
            Scheme::Https => Some(args.tls.clone()),
            Scheme::Http if args.tls.any() => {
                return Err(PlanError::invalid(
                    "--cacert/--cert/--key/--insecure/--tls-*",
                    format!("TLS flags apply to https:// URLs; '{}' is plain http", target.url),
                ));
            }
            Scheme::Http => None,
        };
        if http == HttpVersion::Http3
            && tls
                .as_ref()
                .is_some_and(|t| t.version == Some(crate::TlsVersion::Tls12))
        {
            return Err(PlanError::invalid(
                "--tls-version",
                "QUIC (--http3) runs on TLS 1.3 only; leave out --tls-version 1.2",
            ));
        }

        let (body_file, body) = match args.body.take() {
            Some((path, bytes)) => (Some(path), bytes),
            None => (None, Vec::new()),
        };
        if body.len() as u64 > MAX_BODY_BYTES {
            return Err(PlanError::invalid(
                "--body",
                format!(
                    "{} is {} bytes, over the limit of {MAX_BODY_BYTES} bytes (64 MiB); send a smaller file",
                    body_file.as_deref().unwrap_or("the body"),
                    body.len()
                ),
            ));
        }
        let several = raw.len() > 1
            || args.body_lines.is_some()
            || raw[0]
                != RawTarget {
                    at: "URL".into(),
                    url: args.url.clone(),
                    ..RawTarget::default()
                };
        if http == HttpVersion::Http3 && reach.proxy.is_some() {
            return Err(PlanError::invalid(
                "--http3",
                "HTTP/3 runs over UDP and cannot go through an HTTP proxy; leave out -x/--proxy (or set \
                 --proxy '' to ignore HTTPS_PROXY), or use --http2",
            ));
        }
        if several && redirects > 0 {
            return Err(PlanError::invalid(
                "--redirects",
                "is not yet supported with several targets, --targets or --body-lines; run the redirecting \
                 target on its own, or list where it leads as a target",
            ));
        }
        if !several {
            framing_headers(&mut headers, body.len() as u64, body_file.as_deref())?;
        }
        if args.io == IoModel::Uring {
            uring_supports(&target, http, &load, several, redirects, &reach)?;
        }

        let mut plan = HttpPlan {
            target,
            method,
            headers,
            body_bytes: body.len() as u64,
            body: Bytes::new(),
            body_file,
            secret_headers,
            connections,
            threads,
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
            segment,
            start_at_unix_ms: args.start_at_unix_ms,
            reach,
            wire: Wire::default(),
            targets: Vec::new(),
            targets_order: args.targets_order,
            body_lines: None,
            thresholds: args.thresholds.clone(),
            requests: RequestTable::default(),
            grpc: None,
        };
        if several {
            plan.render_table(&args, &raw, body)?;
            return Ok(plan);
        }
        // The request once, and the body as its tail: the head goes in
        // front of the body where it lies (a large allocation grows in
        // place), so the body is never in memory twice.
        let len = body.len();
        let mut wire = body;
        wire.splice(0..0, plan.render_head(len));
        let wire = Bytes::from(wire);
        plan.body = wire.slice(wire.len() - len..);
        plan.wire = Wire(wire);
        Ok(plan)
    }

    /// Renders every request of a plan with several (targets, or
    /// `--body-lines` bodies) into its table, each target's headers and
    /// body checked; `body` is the `--body`/`--data` every target without
    /// its own sends.
    fn render_table(&mut self, args: &HttpArgs, raw: &[RawTarget], body: Vec<u8>) -> Result<(), PlanError> {
        let global = self.headers.clone();
        let mut table = Requests::builder();
        let full = || {
            PlanError::invalid(
                "--targets/--body-lines",
                format!(
                    "the requests to send come to more than {} MiB; every request is rendered once before the \
                     run, so use fewer targets, bodies or smaller bodies",
                    crate::targets::MAX_REQUEST_TABLE_BYTES >> 20
                ),
            )
        };
        let mut named = Vec::with_capacity(raw.len());
        let mut infos = Vec::with_capacity(raw.len());
        let mut origins: Vec<Target> = Vec::new();
        for (i, r) in raw.iter().enumerate() {
            let (target, url_auth) = parse_target_at(r)?;
            if target.scheme != self.target.scheme {
                return Err(PlanError::invalid(
                    if r.at.starts_with("URL") { "URL" } else { "--targets" },
                    format!(
                        "{}: {} is {} but {} is not; one run's targets are all http:// or all https:// \
                         (run one throng per scheme)",
                        r.at,
                        target.url,
                        if target.scheme == Scheme::Https {
                            "https"
                        } else {
                            "http"
                        },
                        self.target.url,
                    ),
                ));
            }
            // Each origin (host and port) once, in the order first seen.
            let origin = match origins
                .iter()
                .position(|o: &Target| (&o.host, o.port) == (&target.host, target.port))
            {
                Some(o) => o,
                None => {
                    origins.push(target.clone());
                    origins.len() - 1
                }
            };
            table.origin(origin);
            let (body_name, body): (Option<&str>, &[u8]) = match &r.body {
                Some((name, b)) => (Some(name), b),
                None => (self.body_file.as_deref(), &body),
            };
            if body.len() as u64 > MAX_BODY_BYTES {
                return Err(PlanError::invalid(
                    "--targets",
                    format!(
                        "{}: the body is {} bytes, over the limit of {MAX_BODY_BYTES} bytes (64 MiB)",
                        r.at,
                        body.len()
                    ),
                ));
            }
            let method = target_method(
                r,
                args,
                r.body.is_some() || self.body_file.is_some() || args.body_lines.is_some(),
            )?;
            let mut headers = global.clone();
            for h in &r.headers {
                let (name, value) = parse_header(h).map_err(|e| at_error(r, e))?;
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
                headers.push((name, value));
            }
            // Its own user:pass@ over the run's credentials (the first
            // target's are among them already).
            if let Some(auth) = url_auth.filter(|_| i > 0) {
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
                headers.push(("Authorization".to_string(), auth));
            }
            let secret = secret_names(&[], headers.iter().map(|(n, _)| n.as_str()))?;
            for name in secret {
                if !self.secret_headers.contains(&name) {
                    self.secret_headers.push(name);
                }
            }
            self.secret_headers.sort();
            let close = !self.keepalive;
            // Through a proxy, plain http names the whole URL (absolute form).
            let request_target = match (&self.reach.proxy, target.scheme) {
                (Some(_), Scheme::Http) => format!("http://{}{}", target.host_authority(), target.path),
                _ => target.path.clone(),
            };
            let render = |out: &mut Vec<u8>, headers: &[(String, String)], body: &[u8]| {
                RequestHead {
                    method: &method,
                    target: &request_target,
                    authority: &target.host_authority(),
                    headers,
                    body_len: body.len(),
                    close,
                }
                .write(out);
                out.extend_from_slice(body);
            };
            match &args.body_lines {
                Some((file, bytes)) => {
                    let lines = split_body_lines(file, bytes)?;
                    let mut headers = headers.clone();
                    for line in &lines {
                        let b = &bytes[line.clone()];
                        framing_headers(&mut headers, b.len() as u64, Some(file))?;
                        if !table.push(i, |out| render(out, &headers, b)) {
                            return Err(full());
                        }
                    }
                    self.body_lines = Some(BodyLines {
                        file: file.clone(),
                        count: lines.len() as u64,
                    });
                }
                None => {
                    framing_headers(&mut headers, body.len() as u64, body_name)
                        .map_err(|e| if i == 0 { e } else { at_error(r, e) })?;
                    if !table.push(i, |out| render(out, &headers, body)) {
                        return Err(full());
                    }
                }
            }
            infos.push(TargetInfo {
                name: String::new(),
                method: method.clone(),
                url: target.url.clone(),
                body_bytes: body.len() as u64,
            });
            named.push((method, target));
        }
        for (info, name) in infos.iter_mut().zip(names(&named)) {
            info.name = name;
        }
        if raw.len() > 1 && args.body_lines.is_some() {
            return Err(PlanError::invalid(
                "--body-lines",
                "cycles the bodies of one target; with several targets give each its body in the \
                 --targets file (an @file line, or \"body\" in JSON lines)",
            ));
        }
        // Every connection serves one origin (see the engine's targets):
        // a closed loop needs one per origin at least.
        if origins.len() > 1 && self.load == Load::Closed && (self.connections as usize) < origins.len() {
            return Err(PlanError::invalid(
                "-c/--connections",
                format!(
                    "-c {} is fewer than the {} origins (host:port) the targets are on; each connection serves \
                     one origin, so give at least -c {}",
                    self.connections,
                    origins.len(),
                    origins.len()
                ),
            ));
        }
        let table = table.finish();
        // The first request stands for the plan where one is asked for.
        self.wire = Wire(table.bytes(0));
        self.body_bytes = infos[0].body_bytes;
        self.method = infos[0].method.clone();
        if raw.len() > MAX_TAGGED_TARGETS
            && let Some(t) = self.thresholds.iter().find(|t| t.contains("{target:"))
        {
            return Err(PlanError::invalid(
                "--threshold",
                format!(
                    "'{t}': figures per target are kept for at most {MAX_TAGGED_TARGETS} targets and this run has \
                     {}; judge the whole run (e.g. 'response: p(95) < 500ms') or use fewer targets",
                    raw.len()
                ),
            ));
        }
        if raw.len() > 1 {
            self.targets = infos;
        }
        let mut table = table;
        if origins.len() > 1 {
            table.origins = origins;
        }
        self.requests = RequestTable(std::sync::Arc::new(table));
        Ok(())
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
            Load::Closed => format!("closed loop, {}", crate::count(self.connections, "connection")),
            Load::Open { rate } => format!(
                "open loop at {}, up to {}",
                crate::format_rate(rate, "req"),
                crate::count(self.connections, "connection")
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
        let threads = crate::count(self.threads, "thread");
        let follow = match self.redirects {
            0 => String::new(),
            n => format!(", following up to {}", crate::count(n, "redirect")),
        };
        let version = if self.http.is_http1() {
            String::new()
        } else {
            format!(
                ", {}, up to {} per connection",
                self.http.label(),
                crate::count(self.streams, "stream")
            )
        };
        format!("{load}, {threads}, {stop}{ka}{version}{follow}")
    }
}

/// `--http2`/`--http3` into the version spoken. HTTP/3 runs over QUIC,
/// which is always TLS (https://).
fn http_version(http2: bool, http3: bool, target: &Target) -> Result<HttpVersion, PlanError> {
    match (http2, http3) {
        (true, true) => Err(PlanError::invalid(
            "--http2/--http3",
            "give one of them: a run speaks one HTTP version",
        )),
        (_, true) if target.scheme != Scheme::Https => Err(PlanError::invalid(
            "--http3",
            format!(
                "HTTP/3 runs over QUIC, which is always encrypted: use an https:// URL ({})",
                target.url.replacen("http://", "https://", 1)
            ),
        )),
        (_, true) => Ok(HttpVersion::Http3),
        (true, _) => Ok(HttpVersion::Http2),
        _ => Ok(HttpVersion::Http1),
    }
}

/// True for a byte an HTTP token (a header name) may hold (RFC 9110 5.6.2).
pub fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `r`'s error, said with where it was written (a file's line).
fn at_error(r: &RawTarget, e: PlanError) -> PlanError {
    if r.at == "URL" {
        return e;
    }
    let PlanError::Invalid { flag, message } = e;
    let flag = if r.at.starts_with("URL") { flag } else { "--targets" };
    PlanError::invalid(flag, format!("{}: {message}", r.at))
}

fn parse_target_at(r: &RawTarget) -> Result<(Target, Option<String>), PlanError> {
    parse_target(&r.url).map_err(|e| at_error(r, e))
}

/// A target's method: its own, `-m`'s, or POST with a body and GET without.
fn target_method(r: &RawTarget, args: &HttpArgs, body: bool) -> Result<String, PlanError> {
    let method = r
        .method
        .clone()
        .or_else(|| args.method.clone())
        .unwrap_or_else(|| if body { "POST" } else { "GET" }.to_string());
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err(at_error(
            r,
            PlanError::invalid(
                "-m/--method",
                format!(
                    "'{}' is not an HTTP method; use a token such as GET, POST or PUT",
                    method.escape_debug()
                ),
            ),
        ));
    }
    Ok(method)
}

/// The target, and the `Authorization` its `user:pass@` asks for; the
/// target's `url` keeps no credentials.
fn parse_target(given: &str) -> Result<(Target, Option<String>), PlanError> {
    let example = "e.g. http://127.0.0.1:8080/";
    // Errors quote the URL without its credentials.
    let masked = mask_userinfo(given);
    let text = masked.as_str();
    if given.len() > MAX_URL_BYTES {
        return Err(PlanError::invalid(
            "URL",
            format!(
                "the URL is {} bytes, over the limit of {MAX_URL_BYTES} bytes (64 KiB); servers commonly refuse \
                 request lines past 8 KiB (414 URI Too Long); shorten it",
                given.len()
            ),
        ));
    }
    let url = url::Url::parse(given).map_err(|e| {
        PlanError::invalid(
            "URL",
            format!("'{text}' is not a valid URL ({e}); write it in full, {example}"),
        )
    })?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(PlanError::invalid(
                "URL",
                format!("scheme '{other}' is not supported by `throng http`; use http:// or https://, {example}"),
            ));
        }
    };
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(PlanError::invalid("URL", format!("'{text}' has no host; {example}"))),
    };
    let (shown, auth) = if url.username().is_empty() && url.password().is_none() {
        (given.to_string(), None)
    } else {
        let auth = crate::reach::basic_authorization(
            &crate::reach::decode(url.username()),
            &crate::reach::decode(url.password().unwrap_or("")),
        );
        let mut bare = url.clone();
        // Neither fails on an http(s) URL with a host.
        let _ = bare.set_username("");
        let _ = bare.set_password(None);
        (bare.to_string(), Some(auth))
    };
    let port = url.port_or_known_default().unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok((
        Target {
            url: shown,
            scheme,
            host,
            port,
            path,
        },
        auth,
    ))
}

/// `text` with anything between `://` and the `@` that ends the
/// authority's user information replaced by `***`: a URL fit for an error
/// message (it need not parse).
pub fn mask_userinfo(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => text.to_string(),
    }
}

/// Adds the one `Authorization` that `-a`, the URL's `user:pass@` or
/// `--bearer-file` asks for, refusing two sources at once (an `-H
/// 'Authorization: …'` counts as one).
fn authorization(headers: &mut Vec<(String, String)>, args: &HttpArgs, url: Option<String>) -> Result<(), PlanError> {
    let mut given: Vec<(&str, String)> = Vec::new();
    if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization")) {
        given.push(("-H 'Authorization: …'", String::new()));
    }
    if let Some(a) = &args.basic_auth {
        let Some((user, password)) = a.split_once(':') else {
            return Err(PlanError::invalid(
                "-a/--basic-auth",
                "expected USER:PASSWORD (the password after the first ':'), e.g. -a alice:s3cret",
            ));
        };
        if user.is_empty() || a.chars().any(|c| c.is_control()) {
            return Err(PlanError::invalid(
                "-a/--basic-auth",
                "the user is empty or a control character is in USER:PASSWORD; e.g. -a alice:s3cret",
            ));
        }
        given.push(("-a/--basic-auth", crate::reach::basic_authorization(user, password)));
    }
    if let Some(a) = url {
        given.push(("the URL's user:password@", a));
    }
    if let Some((path, token)) = &args.bearer {
        let token = token.trim_matches([' ', '\t']);
        if token.is_empty() || token.chars().any(is_forbidden_in_value) {
            return Err(PlanError::invalid(
                "--bearer-file",
                format!("{path}: the first line is empty or holds a control character; put the token alone on it"),
            ));
        }
        given.push(("--bearer-file", format!("Bearer {token}")));
    }
    match given.as_slice() {
        [] => Ok(()),
        [(_, value)] => {
            if !value.is_empty() {
                headers.push(("Authorization".to_string(), value.clone()));
            }
            Ok(())
        }
        [(a, _), (b, _), ..] => Err(PlanError::invalid(
            "-a/--basic-auth",
            format!("both {a} and {b} set the Authorization header; give one"),
        )),
    }
}

fn parse_header(text: &str) -> Result<(String, String), PlanError> {
    // The value may be a secret (Authorization, Cookie, an API key): an
    // error shows the name when it is a well-formed one, never the value.
    let shown = match text.split_once(':') {
        Some((name, _)) => {
            let name = name.trim_matches([' ', '\t']);
            if !name.is_empty() && name.len() <= 64 && name.bytes().all(is_token) {
                format!("'{name}: …'")
            } else {
                "a header".to_string()
            }
        }
        None => "a header".to_string(),
    };
    let bad = |why: &str| {
        PlanError::invalid(
            "-H/--header",
            format!("{shown}: {why}; expected 'Name: value', e.g. -H 'Accept: application/json'"),
        )
    };
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| bad("no ':' between name and value"))?;
    // Only spaces and tabs are optional whitespace around a field (RFC 9110
    // 5.6.3); str::trim would also eat a vertical tab or a form feed.
    let name = name.trim_matches([' ', '\t']);
    if name.is_empty() || !name.bytes().all(is_token) {
        return Err(bad("the name is empty or has characters a header name cannot have"));
    }
    let value = value.trim_matches([' ', '\t']);
    if let Some(c) = value.chars().find(|&c| is_forbidden_in_value(c)) {
        return Err(bad(&format!(
            "the value of {name} has the control character {}, which a header cannot carry",
            c.escape_debug()
        )));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Adds the `--cookie name=value` pairs to the request as one `Cookie`
/// header (after the value of a `-H Cookie:` when there is one).
fn cookie_header(cookies: &[String], headers: &mut Vec<(String, String)>) -> Result<(), PlanError> {
    if cookies.is_empty() {
        return Ok(());
    }
    let mut pairs = Vec::with_capacity(cookies.len());
    for (i, c) in cookies.iter().enumerate() {
        // The value is a secret: an error names the cookie by its place,
        // and by its name only when that is a well-formed one.
        let (name, value) = c.split_once('=').unwrap_or(("", c));
        let bad = |why: &str| {
            let shown = if !name.is_empty() && name.len() <= 64 && name.bytes().all(is_token) {
                format!(" ('{name}')")
            } else {
                String::new()
            };
            PlanError::invalid(
                "--cookie",
                format!(
                    "cookie {}{shown}: {why}; expected --cookie 'name=value', e.g. --cookie 'session=abc123'",
                    i + 1
                ),
            )
        };
        if !c.contains('=') {
            return Err(bad("no '=' between name and value"));
        }
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(bad("the name is empty or has characters a cookie name cannot have"));
        }
        if value
            .bytes()
            .any(|b| b.is_ascii_control() || b.is_ascii_whitespace() || b == b';' || b == b',' || b >= 0x80)
        {
            return Err(bad(
                "the value has a space, ';', ',' or a control or non-ASCII character, which a cookie value cannot carry",
            ));
        }
        pairs.push(c.as_str());
    }
    let joined = pairs.join("; ");
    match headers.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case("cookie")) {
        Some((_, v)) if !v.is_empty() => {
            v.push_str("; ");
            v.push_str(&joined);
        }
        Some((_, v)) => *v = joined,
        None => headers.push(("Cookie".to_string(), joined)),
    }
    Ok(())
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// True for a character a header value must not carry on the wire: any
/// control character but the horizontal tab (RFC 9110 5.5).
pub fn is_forbidden_in_value(c: char) -> bool {
    c.is_ascii_control() && c != '\t'
}

/// Refuses a Transfer-Encoding (throng sends bodies with a length, never
/// chunked) and a Content-Length that contradicts the body's `len`, and
/// drops one that agrees: the request head carries the one throng computes.
fn framing_headers(headers: &mut Vec<(String, String)>, len: u64, file: Option<&str>) -> Result<(), PlanError> {
    let body = match file {
        Some(f) => format!("--body {f} ({len} bytes)"),
        None => "no --body (0 bytes)".to_string(),
    };
    for (name, value) in headers.iter() {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(PlanError::invalid(
                "-H/--header",
                format!(
                    "'{name}: {value}': throng does not chunk request bodies; leave Transfer-Encoding out, \
                     throng sends {body} with a Content-Length"
                ),
            ));
        }
        if name.eq_ignore_ascii_case("content-length") && value.trim().parse::<u64>().ok() != Some(len) {
            return Err(PlanError::invalid(
                "-H/--header",
                format!(
                    "'{name}: {value}' contradicts {body}, and the server would read the difference as \
                     another request; leave Content-Length out, throng computes it"
                ),
            ));
        }
    }
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case("content-length"));
    Ok(())
}

/// The secret header names of a plan, lowercase, sorted, each once: the
/// always-sensitive ones among `present`, and every `--secret-header`.
pub fn secret_names<'a>(marked: &[String], present: impl Iterator<Item = &'a str>) -> Result<Vec<String>, PlanError> {
    let mut out = Vec::new();
    for m in marked {
        let name = m.trim();
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(PlanError::invalid(
                "--secret-header",
                format!(
                    "'{}' is not a header name; give the name only, e.g. --secret-header X-Api-Key",
                    m.escape_debug()
                ),
            ));
        }
        out.push(name.to_ascii_lowercase());
    }
    out.extend(
        present
            .map(str::to_ascii_lowercase)
            .filter(|n| SENSITIVE_HEADERS.contains(&n.as_str())),
    );
    out.sort();
    out.dedup();
    Ok(out)
}

/// The note a result carries when some of `headers` are `secret`.
pub fn redaction_note<'a>(headers: impl Iterator<Item = &'a str>, secret: &[String]) -> Option<String> {
    let mut names: Vec<&str> = headers.filter(|n| is_secret(secret, n)).collect();
    names.sort_by_key(|n| n.to_ascii_lowercase());
    names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    (!names.is_empty()).then(|| {
        format!(
            "the values of these request headers are secret and read {REDACTED} in this result: {} \
             (Authorization, Proxy-Authorization, Cookie, Set-Cookie always; more with --secret-header, or \
             --secret-metadata for grpc)",
            names.join(", ")
        )
    })
}

/// A command line as a user typed it (a sweep's `run:`), with the values of
/// secret headers (`-H 'Authorization: …'`, and those its `--secret-header`
/// names), of `--send-secret` and the passwords of URLs replaced: fit for a
/// result file.
/// Words are split as a POSIX shell would (quotes, backslashes); a word
/// that holds a secret is rewritten whole, single-quoted.
pub fn redact_command(text: &str) -> String {
    // (start, end, the word unquoted) of each word.
    let mut words: Vec<(usize, usize, String)> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        let mut end = start;
        let mut quote: Option<char> = None;
        while let Some(&(i, c)) = chars.peek() {
            if quote.is_none() && c.is_whitespace() {
                break;
            }
            chars.next();
            end = i + c.len_utf8();
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (Some('\''), c) => word.push(c),
                (_, '\\') => {
                    if let Some((j, n)) = chars.next() {
                        end = j + n.len_utf8();
                        word.push(n);
                    }
                }
                (_, c) => word.push(c),
            }
        }
        words.push((start, end, word));
    }
    let marked: Vec<String> = words
        .windows(2)
        .filter(|w| matches!(w[0].2.as_str(), "--secret-header" | "--secret-metadata"))
        .map(|w| w[1].2.clone())
        .chain(words.iter().filter_map(|w| {
            w.2.strip_prefix("--secret-header=")
                .or_else(|| w.2.strip_prefix("--secret-metadata="))
                .map(str::to_string)
        }))
        .collect();
    let names = words.iter().filter_map(|w| w.2.split_once(':').map(|(n, _)| n.trim()));
    let secret = secret_names(&[], names)
        .unwrap_or_default()
        .into_iter()
        .chain(marked.iter().map(|m| m.trim().to_ascii_lowercase()))
        .collect::<Vec<_>>();
    // The word after --send-secret, or --send-secret=TEXT: secret whole.
    let after_send_secret: Vec<bool> = std::iter::once(false)
        .chain(words.iter().map(|w| w.2 == "--send-secret"))
        .collect();
    // An inline body, the word after --data or --data=TEXT: a body may
    // carry credentials (a login form, a token in JSON) and is not in the
    // result either. `@FILE` and `@-` name where it comes from: kept.
    let after_data: Vec<bool> = std::iter::once(false)
        .chain(words.iter().map(|w| w.2 == "--data"))
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (i, (start, end, word)) in words.iter().enumerate() {
        if after_send_secret[i] || word.starts_with("--send-secret=") {
            let flag = if after_send_secret[i] { "" } else { "--send-secret=" };
            out.push_str(&text[at..*start]);
            out.push_str(&format!("'{flag}{REDACTED}'"));
            at = *end;
            continue;
        }
        let inline_data = if after_data[i] {
            Some("")
        } else {
            word.strip_prefix("--data=").map(|_| "--data=")
        };
        if let Some(flag) = inline_data {
            let value = &word[flag.len()..];
            if !value.starts_with('@') {
                out.push_str(&text[at..*start]);
                out.push_str(&format!("'{flag}{REDACTED}'"));
                at = *end;
            }
            continue;
        }
        let header = word
            .split_once(':')
            .filter(|(n, _)| !n.is_empty() && n.trim().bytes().all(is_token) && is_secret(&secret, n.trim()));
        let after_auth_flag = at_index(&words, *start)
            .and_then(|i| i.checked_sub(1))
            .is_some_and(|i| matches!(words[i].2.as_str(), "-a" | "--basic-auth"));
        let cookie = word
            .strip_prefix("--cookie=")
            .map(|_| format!("'--cookie={REDACTED}'"))
            .or_else(|| (*start > 0 && after_cookie_flag(&words, *start)).then(|| format!("'{REDACTED}'")));
        let replaced = match header {
            _ if after_auth_flag => Some(format!("'{REDACTED}'")),
            _ if word.starts_with("--basic-auth=") => Some(format!("'--basic-auth={REDACTED}'")),
            Some((name, _)) => Some(format!("'{}: {REDACTED}'", name.trim())),
            None if cookie.is_some() => cookie,
            None => {
                // A URL alone, or a flag's value: --proxy=URL.
                let (flag, value) = match word.split_once('=') {
                    Some((f, v)) if f.starts_with("--") => (format!("{f}="), v),
                    _ => (String::new(), word.as_str()),
                };
                url::Url::parse(value)
                    .ok()
                    .filter(|u| u.password().is_some())
                    .map(|mut u| {
                        let _ = u.set_password(Some("***"));
                        format!("'{flag}{u}'")
                    })
            }
        };
        if let Some(r) = replaced {
            out.push_str(&text[at..*start]);
            out.push_str(&r);
            at = *end;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// The index of the word starting at `start`.
fn at_index(words: &[(usize, usize, String)], start: usize) -> Option<usize> {
    words.iter().position(|w| w.0 == start)
}

/// True when the word starting at `start` follows a `--cookie` flag.
fn after_cookie_flag(words: &[(usize, usize, String)], start: usize) -> bool {
    words.windows(2).any(|w| w[1].0 == start && w[0].2 == "--cookie")
}

/// True when `name` is one of `secret` (lowercase names).
pub fn is_secret(secret: &[String], name: &str) -> bool {
    secret.iter().any(|s| s.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(url: &str) -> HttpArgs {
        HttpArgs {
            url: url.to_string(),
            cores: 2,
            ..HttpArgs::default()
        }
    }

    fn flag_of(e: PlanError) -> &'static str {
        match e {
            PlanError::Invalid { flag, .. } => flag,
        }
    }

    #[test]
    fn defaults_are_wrk_like() {
        let p = HttpPlan::from_args(args("http://127.0.0.1:8080/x?y=1")).unwrap();
        assert_eq!(p.target.host, "127.0.0.1");
        assert_eq!(p.target.port, 8080);
        assert_eq!(p.target.path, "/x?y=1");
        assert_eq!(p.connections, 50);
        assert_eq!(p.threads, 2);
        assert_eq!(p.load, Load::Closed);
        assert_eq!(p.stop, Stop::Duration(DEFAULT_DURATION));
        assert!(p.keepalive);
        assert_eq!(p.method, "GET");
    }

    #[test]
    fn io_uring_takes_plain_http1_closed_loops_and_refuses_the_rest() {
        let uring = |url: &str, f: &dyn Fn(&mut HttpArgs)| {
            let mut a = args(url);
            a.io = IoModel::Uring;
            f(&mut a);
            HttpPlan::from_args(a)
        };
        let p = uring("http://127.0.0.1:8080/", &|a| a.no_keepalive = true).unwrap();
        assert_eq!((p.io, p.keepalive), (IoModel::Uring, false));
        type Change<'a> = &'a dyn Fn(&mut HttpArgs);
        let refused: [(&str, Change, &str); 5] = [
            ("https://127.0.0.1/", &|_| {}, "TLS"),
            ("http://127.0.0.1/", &|a| a.http2 = true, "--http2"),
            ("http://127.0.0.1/", &|a| a.rate = Some(100.0), "open loops"),
            ("http://127.0.0.1/", &|a| a.redirects = Some(2), "--redirects"),
            (
                "http://127.0.0.1/",
                &|a| a.reach.proxy = Some("http://127.0.0.1:3128".into()),
                "proxy",
            ),
        ];
        for (url, f, what) in refused {
            let e = uring(url, f).unwrap_err().to_string();
            assert!(
                e.contains("--io") && e.contains(what) && e.contains("--io epoll"),
                "{e}"
            );
        }
        // The default is left out of result files; uring is said.
        let epoll = HttpPlan::from_args(args("http://127.0.0.1/")).unwrap();
        assert!(!serde_json::to_string(&epoll).unwrap().contains("\"io\""));
        assert!(serde_json::to_string(&p).unwrap().contains("\"io\":\"uring\""));
    }

    #[test]
    fn request_bytes_are_exact() {
        let mut a = args("http://example.test/a");
        a.headers = vec!["X-Test: 1".into()];
        a.no_keepalive = true;
        let p = HttpPlan::from_args(a).unwrap();
        let text = String::from_utf8(p.request_bytes().to_vec()).unwrap();
        let ua = concat!("User-Agent: throng/", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            text,
            format!("GET /a HTTP/1.1\r\nHost: example.test\r\n{ua}\r\nX-Test: 1\r\nConnection: close\r\n\r\n")
        );
    }

    #[test]
    fn body_implies_post_with_length_and_ipv6_authority() {
        let mut a = args("http://[::1]:9000/echo");
        a.body = Some(("b.json".into(), b"{}".to_vec()));
        let p = HttpPlan::from_args(a).unwrap();
        let text = String::from_utf8(p.request_bytes().to_vec()).unwrap();
        assert!(
            text.starts_with("POST /echo HTTP/1.1\r\nHost: [::1]:9000\r\n"),
            "{text}"
        );
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"), "{text}");
    }

    fn body_args(headers: &[&str], body: &'static [u8]) -> HttpArgs {
        let mut a = args("http://h/");
        a.headers = headers.iter().map(|h| h.to_string()).collect();
        a.body = Some(("b.txt".into(), body.to_vec()));
        a
    }

    fn message_of(e: PlanError) -> String {
        match e {
            PlanError::Invalid { message, .. } => message,
        }
    }

    #[test]
    fn content_length_that_agrees_is_sent_once_and_one_that_does_not_is_refused() {
        let p = HttpPlan::from_args(body_args(&["Content-Length: 10"], b"0123456789")).unwrap();
        let text = String::from_utf8(p.request_bytes().to_vec()).unwrap();
        assert_eq!(text.to_ascii_lowercase().matches("content-length").count(), 1, "{text}");
        assert!(text.ends_with("Content-Length: 10\r\n\r\n0123456789"), "{text}");

        let e = HttpPlan::from_args(body_args(&["content-length: 1"], b"0123456789")).unwrap_err();
        let m = message_of(e.clone());
        assert_eq!(flag_of(e), "-H/--header");
        assert!(m.contains("contradicts --body b.txt (10 bytes)"), "{m}");
        // Without a body: only 0 agrees.
        let mut a = args("http://h/");
        a.headers = vec!["Content-Length: 5".into()];
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "-H/--header");
        let mut a = args("http://h/");
        a.headers = vec!["Content-Length: 0".into()];
        let text = String::from_utf8(HttpPlan::from_args(a).unwrap().request_bytes().to_vec()).unwrap();
        assert!(!text.to_ascii_lowercase().contains("content-length"), "{text}");
    }

    #[test]
    fn transfer_encoding_is_refused() {
        let e = HttpPlan::from_args(body_args(&["Transfer-Encoding: chunked"], b"x")).unwrap_err();
        let m = message_of(e.clone());
        assert_eq!(flag_of(e), "-H/--header");
        assert!(m.contains("does not chunk request bodies"), "{m}");
    }

    #[test]
    fn control_characters_in_headers_are_refused() {
        for h in [
            "X-A: a\u{b}b",
            "X-A: a\u{c}",
            "X-A\u{b}: v",
            "X-A: \u{7f}",
            "X-A: a\rb",
            "X-A: a\u{0}",
        ] {
            let mut a = args("http://h/");
            a.headers = vec![h.to_string()];
            let e = HttpPlan::from_args(a).unwrap_err();
            let m = message_of(e.clone());
            assert_eq!(flag_of(e), "-H/--header", "{h:?}");
            assert!(
                !m.contains('\u{b}') && !m.contains('\r'),
                "the message shows it escaped: {m:?}"
            );
        }
        let mut a = args("http://h/");
        a.headers = vec!["X-A: a\tb".into()];
        assert_eq!(
            HttpPlan::from_args(a).unwrap().headers,
            [("X-A".to_string(), "a\tb".to_string())]
        );
    }

    #[test]
    fn a_bad_header_is_named_but_its_value_never_shown() {
        for (h, shown) in [
            ("Authorization: Bearer s3cr3t\u{1}", "'Authorization: …'"),
            ("Cookie s3cr3t", "a header"),
            ("Bad Name: s3cr3t", "a header"),
            ("X-Key: s3cr3t\u{b}", "'X-Key: …'"),
        ] {
            let e = parse_header(h).unwrap_err().to_string();
            assert!(e.starts_with(&format!("-H/--header: {shown}: ")), "{e}");
            assert!(!e.contains("s3cr3t"), "{e}");
        }
    }

    #[test]
    fn secret_headers_are_redacted_and_named() {
        let mut a = args("http://h/");
        a.headers = vec![
            "Authorization: Bearer s3cret".into(),
            "X-Api-Key: k3y".into(),
            "Cookie: c=1".into(),
            "Accept: */*".into(),
        ];
        a.secret_headers = vec!["x-api-key".into()];
        let p = HttpPlan::from_args(a).unwrap();
        // What is sent keeps the values.
        let sent = String::from_utf8(p.request_bytes().to_vec()).unwrap();
        assert!(sent.contains("Authorization: Bearer s3cret\r\n") && sent.contains("X-Api-Key: k3y"));
        let r = p.redacted();
        let json = serde_json::to_string(&r).unwrap();
        for secret in ["s3cret", "k3y", "c=1"] {
            assert!(!json.contains(secret), "{json}");
        }
        assert!(json.contains("*/*"), "{json}");
        assert_eq!(r.headers[0], ("Authorization".to_string(), REDACTED.to_string()));
        let note = p.redaction_note().unwrap();
        assert!(note.contains("Authorization, Cookie, X-Api-Key"), "{note}");
        let mut a = args("http://h/");
        a.secret_headers = vec!["Bad Name".into()];
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--secret-header");
    }

    #[test]
    fn command_lines_are_redacted_word_by_word() {
        let cases = [
            (
                "http http://h/ -H 'Authorization: Bearer s3cret' -c {{c}}",
                "http http://h/ -H 'Authorization: <redacted>' -c {{c}}",
            ),
            (
                "http http://h/ -H \"X-Key: k 3y\" --secret-header x-key -H Accept:\\ all",
                "http http://h/ -H 'X-Key: <redacted>' --secret-header x-key -H Accept:\\ all",
            ),
            (
                "storm nats://u:pw@127.0.0.1:4222 -n 5 -H cookie:a=1",
                "storm 'nats://u:***@127.0.0.1:4222' -n 5 -H 'cookie: <redacted>'",
            ),
            ("run s.yaml --env A=1", "run s.yaml --env A=1"),
            (
                "storm tcp://h:6379 -n 5 --send-secret 'AUTH pw\\r\\n' --expect '^\\+OK' --send-secret=AUTH\\ pw2",
                "storm tcp://h:6379 -n 5 --send-secret '<redacted>' --expect '^\\+OK' '--send-secret=<redacted>'",
            ),
            (
                "http http://h/ -a u:pw --basic-auth=u:pw -x http://u:pw@p:3128 --proxy=http://u:pw@p:1",
                "http http://h/ -a '<redacted>' '--basic-auth=<redacted>' -x 'http://u:***@p:3128/' \
                 '--proxy=http://u:***@p:1/'",
            ),
            (
                "http http://h/ --cookie sid=s3cret --cookie=b=2 -c 1",
                "http http://h/ --cookie '<redacted>' '--cookie=<redacted>' -c 1",
            ),
            (
                "http http://h/ --data 'user=a&password=s3cret' -T application/x-www-form-urlencoded",
                "http http://h/ --data '<redacted>' -T application/x-www-form-urlencoded",
            ),
            (
                "http http://h/ --data='{\"token\": \"s3cret\"}' -c 1",
                "http http://h/ '--data=<redacted>' -c 1",
            ),
            // Where the body comes from is not the body: kept.
            (
                "http http://h/ --data @body.json --data=@- --data @'my file'",
                "http http://h/ --data @body.json --data=@- --data @'my file'",
            ),
        ];
        for (given, want) in cases {
            assert_eq!(redact_command(given), want, "{given}");
        }
    }

    #[test]
    fn cookies_become_one_secret_cookie_header() {
        let mut a = args("http://h/");
        a.cookies = vec!["a=1".into(), "sid=s3cret".into()];
        let p = HttpPlan::from_args(a).unwrap();
        assert_eq!(p.headers, vec![("Cookie".to_string(), "a=1; sid=s3cret".to_string())]);
        let wire = String::from_utf8(p.request_bytes().to_vec()).unwrap();
        assert!(wire.contains("\r\nCookie: a=1; sid=s3cret\r\n"), "{wire}");
        let json = serde_json::to_string(&p.redacted()).unwrap();
        assert!(!json.contains("s3cret"), "{json}");
        // After a -H Cookie's value, in the same header.
        let mut a = args("http://h/");
        a.headers = vec!["Cookie: x=0".into()];
        a.cookies = vec!["a=1".into()];
        assert_eq!(HttpPlan::from_args(a).unwrap().headers[0].1, "x=0; a=1");
        for bad in ["novalue", "=1", "a b=1", "a=1;b=2", "a=x\ny", "a=\u{e9}", "x;s3cret"] {
            let mut a = args("http://h/");
            a.cookies = vec!["ok=1".into(), bad.into()];
            let e = HttpPlan::from_args(a).unwrap_err();
            assert_eq!(flag_of(e.clone()), "--cookie", "{bad}");
            let msg = e.to_string();
            assert!(msg.contains("cookie 2"), "{msg}");
            let value = bad.split_once('=').map_or(bad, |(_, v)| v);
            if value.len() > 1 {
                assert!(!msg.contains(value), "the value is a secret: {msg}");
            }
        }
    }

    #[test]
    fn redirects_default_to_none_and_are_bounded() {
        assert_eq!(HttpPlan::from_args(args("http://h/")).unwrap().redirects, 0);
        let mut a = args("http://h/");
        a.redirects = Some(5);
        assert_eq!(HttpPlan::from_args(a.clone()).unwrap().redirects, 5);
        let p = HttpPlan::from_args(a).unwrap();
        assert!(
            p.describe().ends_with(", following up to 5 redirects"),
            "{}",
            p.describe()
        );
        let mut a = args("http://h/");
        a.redirects = Some(MAX_REDIRECTS + 1);
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--redirects");
    }

    #[test]
    fn url_credentials_become_authorization_and_leave_the_url() {
        let p = HttpPlan::from_args(args("http://al%40ce:s3cret@h:81/x")).unwrap();
        assert_eq!(p.target.url, "http://h:81/x");
        let sent = String::from_utf8(p.request_bytes().to_vec()).unwrap();
        assert!(sent.contains(&format!(
            "Authorization: {}\r\n",
            crate::basic_authorization("al@ce", "s3cret")
        )));
        let json = serde_json::to_string(&p.redacted()).unwrap();
        assert!(!json.contains("s3cret") && !json.contains("Basic"), "{json}");
        let e = HttpPlan::from_args(args("http://u:s3cret@/x")).unwrap_err().to_string();
        assert!(!e.contains("s3cret") && e.contains("http://***@/x"), "{e}");
    }

    #[test]
    fn a_body_over_the_limit_is_refused() {
        let mut a = args("http://h/");
        a.body = Some(("big".into(), vec![0u8; MAX_BODY_BYTES as usize + 1]));
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--body");
    }

    #[test]
    fn closed_loop_trims_connections_and_threads() {
        let mut a = args("http://h/");
        a.requests = Some(3);
        a.threads = Some(8);
        let p = HttpPlan::from_args(a).unwrap();
        assert_eq!((p.connections, p.threads), (3, 3));
    }

    #[test]
    fn errors_name_the_flag() {
        let cases: Vec<(HttpArgs, &str)> = vec![
            (args("not a url"), "URL"),
            (args("ftp://h/"), "URL"),
            (
                HttpArgs {
                    rate: Some(0.0),
                    ..args("http://h/")
                },
                "-r/--rate",
            ),
            (
                HttpArgs {
                    connections: Some(0),
                    ..args("http://h/")
                },
                "-c/--connections",
            ),
            (
                HttpArgs {
                    requests: Some(0),
                    ..args("http://h/")
                },
                "-n/--requests",
            ),
            (
                HttpArgs {
                    duration: Some(Duration::ZERO),
                    ..args("http://h/")
                },
                "-d/--duration",
            ),
            (
                HttpArgs {
                    headers: vec!["nocolon".into()],
                    ..args("http://h/")
                },
                "-H/--header",
            ),
            (
                HttpArgs {
                    method: Some("GE T".into()),
                    ..args("http://h/")
                },
                "-m/--method",
            ),
            (
                HttpArgs {
                    timeout: Some(Duration::ZERO),
                    ..args("http://h/")
                },
                "--timeout",
            ),
            (
                HttpArgs {
                    threads: Some(0),
                    ..args("http://h/")
                },
                "-t/--threads",
            ),
        ];
        for (a, flag) in cases {
            assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), flag);
        }
    }

    fn raw(at: &str, url: &str) -> RawTarget {
        RawTarget {
            at: at.into(),
            url: url.into(),
            ..RawTarget::default()
        }
    }

    fn entries(p: &HttpPlan) -> Vec<String> {
        let t = p.request_table().unwrap();
        (0..t.len())
            .map(|i| String::from_utf8(t.get(i).to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn several_targets_render_once_each_with_their_headers_and_bodies() {
        let mut a = args("http://h/a");
        a.headers = vec!["X-All: 1".into(), "X-Over: global".into()];
        a.content_type = Some("text/plain".into());
        a.targets = vec![
            RawTarget {
                method: Some("PUT".into()),
                headers: vec!["x-over: mine".into(), "Authorization: Bearer t0k".into()],
                body: Some(("b.txt".into(), b"hey".to_vec())),
                ..raw("t:2", "http://h/b?q=1")
            },
            raw("URL 3", "http://h/a"),
        ];
        let p = HttpPlan::from_args(a).unwrap();
        let e = entries(&p);
        assert_eq!(e.len(), 3);
        assert!(e[0].starts_with("GET /a HTTP/1.1\r\n"), "{}", e[0]);
        assert!(
            e[0].contains("X-Over: global\r\nContent-Type: text/plain\r\n"),
            "{}",
            e[0]
        );
        assert!(e[1].starts_with("PUT /b?q=1 HTTP/1.1\r\n"), "{}", e[1]);
        assert!(!e[1].contains("global") && e[1].contains("x-over: mine"), "{}", e[1]);
        assert!(e[1].ends_with("Content-Length: 3\r\n\r\nhey"), "{}", e[1]);
        // Names: methods differ, so they lead; the same path twice gets #N.
        let names: Vec<&str> = p.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["GET /a #1", "PUT /b?q=1", "GET /a #3"]);
        // A target's secret header is redacted like -H's.
        assert!(p.secret_headers.contains(&"authorization".to_string()));
        assert_eq!(p.request_bytes(), p.request_table().unwrap().bytes(0));
        let json = serde_json::to_string(&p.redacted()).unwrap();
        assert!(!json.contains("t0k"), "{json}");
    }

    #[test]
    fn body_lines_make_one_request_per_line_and_errors_say_where() {
        let mut a = args("http://h/p");
        a.body_lines = Some(("l.txt".into(), b"one\ntwo\r\n\nthree".to_vec()));
        let p = HttpPlan::from_args(a).unwrap();
        let e = entries(&p);
        assert_eq!(e.len(), 3);
        assert!(e.iter().all(|r| r.starts_with("POST /p ")));
        assert!(e[1].ends_with("Content-Length: 3\r\n\r\ntwo"), "{}", e[1]);
        assert_eq!(p.body_lines.as_ref().map(|b| b.count), Some(3));
        assert!(p.targets.is_empty(), "one target: no per-target figures");

        let mut a = args("http://h/a");
        a.targets = vec![RawTarget {
            headers: vec!["nocolon".into()],
            ..raw("f.txt:4", "http://h/b")
        }];
        let e = HttpPlan::from_args(a).unwrap_err().to_string();
        assert!(e.starts_with("--targets: f.txt:4: a header: no ':'"), "{e}");
        let mut a = args("");
        a.targets = vec![raw("f.txt:9", "ftp://h/")];
        let e = HttpPlan::from_args(a).unwrap_err().to_string();
        assert!(e.starts_with("--targets: f.txt:9: scheme 'ftp'"), "{e}");
        assert_eq!(flag_of(HttpPlan::from_args(args("")).unwrap_err()), "URL");
    }

    #[test]
    fn http2_and_http3_take_several_targets_and_redirects() {
        let two = |a: HttpArgs| HttpArgs {
            // Beside the URL.
            targets: vec![RawTarget {
                at: "URL 2".into(),
                url: "https://b.test:8443/y".into(),
                ..RawTarget::default()
            }],
            connections: Some(2),
            ..a
        };
        for (h2, h3) in [(true, false), (false, true)] {
            let base = HttpArgs {
                http2: h2,
                http3: h3,
                ..args("https://a.test/x")
            };
            let p = HttpPlan::from_args(two(base.clone())).unwrap();
            assert_eq!((p.request_table().unwrap().len(), p.origins().len()), (2, 2));
            let p = HttpPlan::from_args(HttpArgs {
                redirects: Some(3),
                ..base
            })
            .unwrap();
            assert_eq!(p.redirects, 3);
        }
    }

    #[test]
    fn http2_and_streams_are_validated() {
        let p = HttpPlan::from_args(HttpArgs {
            http2: true,
            streams: Some(10),
            ..args("https://example.test/")
        })
        .unwrap();
        assert_eq!((p.http, p.streams), (HttpVersion::Http2, 10));
        assert_eq!(p.http.alpn(), "h2");
        assert!(
            p.describe().ends_with("HTTP/2, up to 10 streams per connection"),
            "{}",
            p.describe()
        );
        let json = serde_json::to_string(&p.redacted()).unwrap();
        assert!(
            json.contains(r#""http":"h2""#) && json.contains(r#""streams":10"#),
            "{json}"
        );
        let back: HttpPlan = serde_json::from_str(&json).unwrap();
        assert_eq!((back.http, back.streams), (HttpVersion::Http2, 10));

        let h1 = HttpPlan::from_args(args("http://example.test/")).unwrap();
        assert_eq!((h1.http, h1.streams), (HttpVersion::Http1, 1));
        // HTTP/1.1 plans are written as before (no new fields), and files
        // written before the fields existed read back as HTTP/1.1.
        let json = serde_json::to_string(&h1).unwrap();
        assert!(!json.contains("\"http\":") && !json.contains("streams"), "{json}");
        let back: HttpPlan = serde_json::from_str(&json).unwrap();
        assert_eq!((back.http, back.streams), (HttpVersion::Http1, 1));

        for (a, flag) in [
            (
                HttpArgs {
                    streams: Some(2),
                    ..args("http://x/")
                },
                "--streams",
            ),
            (
                HttpArgs {
                    http2: true,
                    streams: Some(0),
                    ..args("http://x/")
                },
                "--streams",
            ),
            (
                HttpArgs {
                    http2: true,
                    streams: Some(MAX_STREAMS + 1),
                    ..args("http://x/")
                },
                "--streams",
            ),
            (
                HttpArgs {
                    http3: true,
                    ..args("http://x/")
                },
                "--http3",
            ),
            (
                HttpArgs {
                    http2: true,
                    connections: Some(1000),
                    streams: Some(MAX_STREAMS),
                    ..args("http://x/")
                },
                "--streams",
            ),
        ] {
            assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), flag);
        }

        // HTTP/3 over https, closed or open loop, with streams.
        let p = HttpPlan::from_args(HttpArgs {
            http3: true,
            streams: Some(8),
            rate: Some(100.0),
            ..args("https://x:8443/")
        })
        .unwrap();
        assert_eq!((p.http, p.streams), (HttpVersion::Http3, 8));
        let e = HttpPlan::from_args(HttpArgs {
            http3: true,
            ..args("http://x:8443/a")
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("https://x:8443/a"), "{e}");
        let mut a = HttpArgs {
            http3: true,
            ..args("https://x/")
        };
        a.tls.version = Some(crate::TlsVersion::Tls12);
        assert_eq!(flag_of(HttpPlan::from_args(a).unwrap_err()), "--tls-version");
    }

    #[test]
    fn plan_round_trips_through_json() {
        let mut a = args("http://h:81/");
        a.rate = Some(250.0);
        a.duration = Some(Duration::from_secs(90));
        let p = HttpPlan::from_args(a).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains("\"1m30s\""), "{text}");
        let back: HttpPlan = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p);
    }
}
