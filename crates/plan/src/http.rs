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
pub use crate::tls::TlsSettings;

/// Run length when neither `-n` nor `-d` is given (as wrk).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Closed-loop connections when `-c` is not given.
pub const DEFAULT_CONNECTIONS: u32 = 50;
/// Open-loop connection cap when `-c` is not given.
pub const DEFAULT_OPEN_CAP: u32 = 1000;
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
    /// Statuses counted `ok`; any other response is `check_failed`.
    pub expect_status: StatusSet,
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
    pub fn from_args(args: HttpArgs) -> Result<HttpPlan, PlanError> {
        let (target, url_auth) = parse_target(&args.url)?;

        let method = args
            .method
            .clone()
            .unwrap_or_else(|| if args.body.is_some() { "POST" } else { "GET" }.to_string());
        if method.is_empty() || !method.bytes().all(is_token) {
            return Err(PlanError::invalid(
                "-m/--method",
                format!("'{method}' is not an HTTP method; use a token such as GET, POST or PUT"),
            ));
        }

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
        let mut marked = args.secret_headers.clone();
        marked.extend(from_files);
        let secret_headers = secret_names(&marked, headers.iter().map(|(n, _)| n.as_str()))?;

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
        let segment = args.segment.filter(|s| !s.is_whole());
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

        let timeout = args.timeout.unwrap_or(DEFAULT_TIMEOUT);
        if timeout.is_zero() {
            return Err(PlanError::invalid(
                "--timeout",
                "must be longer than 0, e.g. --timeout 10s",
            ));
        }

        let tls = match target.scheme {
            Scheme::Https => Some(args.tls),
            Scheme::Http if args.tls.any() => {
                return Err(PlanError::invalid(
                    "--cacert/--cert/--key/--insecure/--tls-*",
                    format!("TLS flags apply to https:// URLs; '{}' is plain http", target.url),
                ));
            }
            Scheme::Http => None,
        };

        let (body_file, body) = match args.body {
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
        framing_headers(&mut headers, body.len() as u64, body_file.as_deref())?;

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
            expect_status: args.expect_status.unwrap_or_default(),
            tls,
            segment,
            start_at_unix_ms: args.start_at_unix_ms,
            reach,
            wire: Wire::default(),
        };
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
        format!("{load}, {threads}, {stop}{ka}")
    }
}

pub(crate) fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The target, and the `Authorization` its `user:pass@` asks for; the
/// target's `url` keeps no credentials.
fn parse_target(given: &str) -> Result<(Target, Option<String>), PlanError> {
    let example = "e.g. http://127.0.0.1:8080/";
    // Errors quote the URL without its credentials.
    let masked = mask_userinfo(given);
    let text = masked.as_str();
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
/// authority's user information replaced by `***`.
fn mask_userinfo(text: &str) -> String {
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
    let shown = text.escape_debug().to_string();
    let bad = |why: &str| {
        PlanError::invalid(
            "-H/--header",
            format!("'{shown}': {why}; expected 'Name: value', e.g. -H 'Accept: application/json'"),
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
             (Authorization, Proxy-Authorization, Cookie, Set-Cookie always; more with --secret-header)",
            names.join(", ")
        )
    })
}

/// A command line as a user typed it (a sweep's `run:`), with the values of
/// secret headers (`-H 'Authorization: …'`, and those its `--secret-header`
/// names) and the passwords of URLs replaced: fit for a result file.
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
        .filter(|w| w[0].2 == "--secret-header")
        .map(|w| w[1].2.clone())
        .chain(
            words
                .iter()
                .filter_map(|w| w.2.strip_prefix("--secret-header=").map(str::to_string)),
        )
        .collect();
    let names = words.iter().filter_map(|w| w.2.split_once(':').map(|(n, _)| n.trim()));
    let secret = secret_names(&[], names)
        .unwrap_or_default()
        .into_iter()
        .chain(marked.iter().map(|m| m.trim().to_ascii_lowercase()))
        .collect::<Vec<_>>();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, word) in &words {
        let header = word
            .split_once(':')
            .filter(|(n, _)| !n.is_empty() && n.trim().bytes().all(is_token) && is_secret(&secret, n.trim()));
        let after_auth_flag = at_index(&words, *start)
            .and_then(|i| i.checked_sub(1))
            .is_some_and(|i| matches!(words[i].2.as_str(), "-a" | "--basic-auth"));
        let replaced = match header {
            _ if after_auth_flag => Some(format!("'{REDACTED}'")),
            _ if word.starts_with("--basic-auth=") => Some(format!("'--basic-auth={REDACTED}'")),
            Some((name, _)) => Some(format!("'{}: {REDACTED}'", name.trim())),
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
                "http http://h/ -a u:pw --basic-auth=u:pw -x http://u:pw@p:3128 --proxy=http://u:pw@p:1",
                "http http://h/ -a '<redacted>' '--basic-auth=<redacted>' -x 'http://u:***@p:3128/' \
                 '--proxy=http://u:***@p:1/'",
            ),
        ];
        for (given, want) in cases {
            assert_eq!(redact_command(given), want, "{given}");
        }
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
