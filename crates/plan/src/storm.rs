//! `throng storm`: the validated plan of a connection storm.

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::error::PlanError;
use crate::head::{Authority, RequestHead};
use crate::http::{DEFAULT_TIMEOUT, HttpVersion, REDACTED, TlsSettings, is_token};
use crate::segment::Segment;

/// What a storm connects to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StormScheme {
    /// Plain TCP: connect, hold, close.
    Tcp,
    /// TLS over TCP: connect, handshake, hold, close.
    Tls,
    /// TCP, then one HTTP request.
    Http,
    /// TLS, then one HTTP request.
    Https,
    /// NATS over TCP (upgraded to TLS when the server's INFO requires it).
    Nats,
    /// WebSocket over TCP: the HTTP/1.1 Upgrade, then frames.
    Ws,
    /// WebSocket over TLS.
    Wss,
}

impl StormScheme {
    /// True for `tls://` and `https://`: TLS from the first byte.
    pub fn is_tls(self) -> bool {
        matches!(self, StormScheme::Tls | StormScheme::Https | StormScheme::Wss)
    }
}

/// The protocol spoken on each connection once it is established.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Protocol {
    /// NATS: read INFO, send CONNECT and PING, established at PONG; answer
    /// the server's PINGs while holding.
    Nats(NatsAuth),
    /// A line protocol: steps that send text or expect a line matching a
    /// regular expression, in order.
    Lines {
        /// The steps.
        steps: Vec<LineStep>,
        /// Limit on each expectation.
        #[serde(with = "crate::duration::serde_duration")]
        step_timeout: Duration,
    },
    /// WebSocket: the HTTP/1.1 Upgrade (established at a checked 101), then
    /// messages sent and expected in order; pings answered while holding.
    #[serde(rename = "websocket")]
    WebSocket(WsSpec),
}

/// A WebSocket storm's upgrade and messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WsSpec {
    /// Path and query of the upgrade request.
    pub path: String,
    /// The `Host` header.
    pub host: String,
    /// Messages to send and expect after the upgrade, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<WsStep>,
    /// Limit on each expectation.
    #[serde(with = "crate::duration::serde_duration")]
    pub step_timeout: Duration,
    /// Send a ping this often while holding (`--ping-every`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub ping_every: Option<Duration>,
}

/// One WebSocket message step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WsStep {
    /// Send a text message (escapes decoded).
    Text(String),
    /// Send a binary message: the file's bytes (base64 in files, so that a
    /// storm's parts get them with their orders).
    Binary {
        /// The file as given.
        file: String,
        /// Its bytes.
        #[serde(with = "base64_bytes")]
        bytes: Vec<u8>,
    },
    /// The next data message must match this regular expression.
    Expect(Pattern),
}

/// The most bytes a `--send-binary` file may hold.
pub const MAX_BINARY: usize = 1 << 20;

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// NATS credentials. The secret is never written to result files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatsAuth {
    /// `user` of CONNECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// A password was given.
    #[serde(default)]
    pub password: bool,
    /// An auth token was given.
    #[serde(default)]
    pub token: bool,
    /// The password or token itself (not serialized).
    #[serde(skip)]
    pub secret: Option<String>,
}

/// One step of a line protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineStep {
    /// Send these bytes (escapes like `\r\n` already decoded).
    Send(String),
    /// Send these secret bytes (`--send-secret`: a password, `AUTH …`):
    /// sent as given, written [`REDACTED`] in every file.
    #[serde(rename = "send_secret")]
    SendSecret(SecretText),
    /// The next line must match this regular expression.
    Expect(Pattern),
}

/// The text of a `--send-secret`. Serialized, and in `{:?}`, it reads
/// [`REDACTED`]; read back it is empty until a storm part's orders put the
/// real text back ([`StormPlan::line_secrets`],
/// [`StormPlan::restore_line_secrets`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    /// Wraps `text` (escapes already decoded).
    pub fn new(text: String) -> SecretText {
        SecretText(text)
    }

    /// The text itself, for the wire only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for SecretText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for SecretText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SecretText, D::Error> {
        // What a file holds is the placeholder, never the secret.
        let _placeholder = String::deserialize(d)?;
        Ok(SecretText::default())
    }
}

/// A `--expect` regular expression, compiled once when the plan is
/// validated (so a bad one is a usage error before anything runs);
/// serialized as its text.
#[derive(Clone, Debug)]
pub struct Pattern(regex::bytes::Regex);

impl Pattern {
    /// Compiles `text`, or says why it is not a regular expression.
    pub fn new(text: &str) -> Result<Pattern, String> {
        regex::bytes::Regex::new(text).map(Pattern).map_err(|e| {
            // A syntax error is several lines (the pattern, a caret under the
            // fault, then "error: why"); the message is one line, so keep the why.
            let full = e.to_string();
            let why = full.lines().last().unwrap_or_default();
            format!(
                "'{text}' is not a regular expression: {}",
                why.trim_start_matches("error: ")
            )
        })
    }

    /// The text as given.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The compiled expression.
    pub fn regex(&self) -> &regex::bytes::Regex {
        &self.0
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Pattern {}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Pattern, D::Error> {
        let text = String::deserialize(d)?;
        Pattern::new(&text).map_err(serde::de::Error::custom)
    }
}

/// Which real client a NATS storm's connections behave like (`--client`).
///
/// The default is `lenient`: it answers whatever the server says during
/// the handshake and keeps waiting, so every connection's handshake is
/// timed to the end (the server's real cost), and the report still counts
/// the handshakes in which the server spoke out of turn and names the
/// clients that fail there. `nats.go` fails those handshakes as nats.go
/// does, with its timeouts and reconnect policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientProfile {
    /// Answers a PING, skips INFO updates, tolerates an `-ERR` the server
    /// follows with PONG; established at PONG.
    #[default]
    #[serde(rename = "lenient")]
    Lenient,
    /// nats.go (v1.53.1): the first line after CONNECT must be PONG (a PING
    /// or INFO there fails: `nats: expected 'PONG', got 'PING'`); 2 s
    /// connect timeout; reconnects by default (2 s wait, 100 ms jitter or
    /// 1 s with TLS, 60 attempts); gives up at the second authorization
    /// error in a row while reconnecting.
    #[serde(rename = "nats.go")]
    NatsGo,
}

impl ClientProfile {
    /// The name `--client` takes.
    pub fn name(self) -> &'static str {
        match self {
            ClientProfile::Lenient => "lenient",
            ClientProfile::NatsGo => "nats.go",
        }
    }

    /// nats.go's `DefaultTimeout`: dial, then the whole handshake (INFO,
    /// TLS, CONNECT → PONG) each within it.
    pub const NATS_GO_TIMEOUT: Duration = Duration::from_secs(2);
    /// nats.go's `DefaultReconnectJitterTLS`.
    pub const NATS_GO_JITTER_TLS: Duration = Duration::from_secs(1);
}

/// What a held connection does when the server closes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconnect {
    /// Wait before each attempt (the NATS clients' default is 2 s).
    #[serde(with = "crate::duration::serde_duration")]
    pub wait: Duration,
    /// Plus a uniformly random extra wait in [0, jitter).
    #[serde(with = "crate::duration::serde_duration")]
    pub jitter: Duration,
    /// Attempts before giving up on a connection.
    pub max: u32,
}

/// A shell command run once every connection is established and held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// Wait this long after the last connection was established.
    #[serde(with = "crate::duration::serde_duration")]
    pub after: Duration,
    /// Run with `sh -c`.
    pub command: String,
    /// Longest it may run (`--trigger-timeout`); then its process group is
    /// killed. Results written before the flag existed read as the default.
    #[serde(with = "crate::duration::serde_duration", default = "Trigger::default_timeout")]
    pub timeout: Duration,
}

impl Trigger {
    /// `--trigger-timeout`'s default.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    fn default_timeout() -> Duration {
        Self::DEFAULT_TIMEOUT
    }
}

/// Where a storm's connections go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StormTarget {
    /// The target as given.
    pub url: String,
    /// Scheme.
    pub scheme: StormScheme,
    /// Host name or address literal.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// One HTTP request per connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StormRequest {
    /// Method.
    pub method: String,
    /// Path and query.
    pub path: String,
}

/// How many processes share the storm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Procs {
    /// As many as the descriptor limit requires.
    Auto,
    /// Exactly this many.
    Count(u32),
}

/// A line-protocol step as typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepArg {
    /// `--send TEXT`.
    Send(String),
    /// `--send-secret TEXT`.
    SendSecret(String),
    /// `--expect REGEX`.
    Expect(String),
    /// `--send-binary @FILE`: the path as typed, and the file's bytes (read
    /// by the binary).
    SendBinary {
        /// As typed.
        path: String,
        /// The file's contents.
        bytes: Vec<u8>,
    },
}

/// Flags as parsed, before validation.
#[derive(Clone, Debug, Default)]
pub struct StormArgs {
    /// `TARGET`.
    pub target: String,
    /// `--connections`.
    pub connections: Option<u64>,
    /// `--rate` (per second).
    pub rate: Option<f64>,
    /// `--max-concurrent`.
    pub max_concurrent: Option<u64>,
    /// `--workers`.
    pub workers: Option<u32>,
    /// `--jitter`.
    pub jitter: Option<Duration>,
    /// `--hold`.
    pub hold: Option<Duration>,
    /// `--request`, as typed (`GET /`, `none`).
    pub request: Option<String>,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--procs`, as typed (`auto` or a number).
    pub procs: Option<String>,
    /// `--source`, as typed (a range or a CIDR).
    pub source: Option<String>,
    /// TLS flags.
    pub tls: TlsSettings,
    /// Seed of the jitter's random waits.
    pub seed: u64,
    /// `--protocol` (`nats`, `lines`), as typed.
    pub protocol: Option<String>,
    /// `--nats-creds`: (path, contents).
    pub nats_creds: Option<(String, String)>,
    /// `--send`, `--send-secret` and `--expect`, in command-line order.
    pub steps: Vec<StepArg>,
    /// `--step-timeout`.
    pub step_timeout: Option<Duration>,
    /// `--ping-every` (WebSocket).
    pub ping_every: Option<Duration>,
    /// `--reconnect`.
    pub reconnect: bool,
    /// `--reconnect-wait`.
    pub reconnect_wait: Option<Duration>,
    /// `--reconnect-jitter`.
    pub reconnect_jitter: Option<Duration>,
    /// `--max-reconnects`.
    pub max_reconnects: Option<u32>,
    /// `--client`, as typed.
    pub client: Option<String>,
    /// `--trigger-after`.
    pub trigger_after: Option<Duration>,
    /// `--trigger`.
    pub trigger: Option<String>,
    /// `--trigger-timeout`.
    pub trigger_timeout: Option<Duration>,
    /// Cores on this machine (the default for `--workers`).
    pub cores: u32,
    /// `--segment`/`--segment-sequence`: this process's share of the storm.
    pub segment: Option<Segment>,
    /// `-4`/`-6`, `--connect-to`, `--resolve`, `-x/--proxy` (and HTTPS_PROXY
    /// for TLS targets).
    pub reach: crate::reach::ReachArgs,
    /// `--http2`: each connection speaks HTTP/2 (http:// and https:// only).
    pub http2: bool,
    /// `--http3`: each connection is a QUIC connection speaking HTTP/3
    /// (https:// only).
    pub http3: bool,
}

/// A validated storm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StormPlan {
    /// Where connections go.
    pub target: StormTarget,
    /// Connections in all.
    pub connections: u64,
    /// New connections per second (None: as fast as `max_concurrent` allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Connections open or opening at once, at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<u64>,
    /// Worker threads per process.
    pub workers: u32,
    /// Each connection starts after a uniformly random wait in [0, jitter).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub jitter: Option<Duration>,
    /// How long each connection stays open once established.
    #[serde(with = "crate::duration::serde_duration")]
    pub hold: Duration,
    /// One request per connection (http/https targets, or --request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<StormRequest>,
    /// Limit on connect, handshake and request.
    #[serde(with = "crate::duration::serde_duration")]
    pub timeout: Duration,
    /// Processes.
    pub procs: Procs,
    /// Local addresses to connect from, rotated over connections.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<IpAddr>,
    /// TLS settings (tls/https only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
    /// Seed of the jitter's random waits (rerun with `--seed` to repeat them).
    pub seed: u64,
    /// The protocol spoken once connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Which client NATS connections behave like (lenient for other
    /// protocols and for results written before `--client` existed).
    #[serde(default)]
    pub client: ClientProfile,
    /// Reconnect held connections the server closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect: Option<Reconnect>,
    /// A command to run once every connection is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// The execution segment this process runs (None: all of the storm).
    /// The numbers above stay the whole storm's; the engine takes the
    /// segment's share. Recorded in the result, not here.
    #[serde(skip)]
    pub segment: Option<Segment>,
    /// Where connections go: address family, overrides, a proxy (CONNECT).
    #[serde(default, skip_serializing_if = "crate::reach::Reach::is_default")]
    pub reach: crate::reach::Reach,
    /// The HTTP version of an http(s) storm: with HTTP/2 each connection's
    /// handshake includes the preface and SETTINGS exchange, and its
    /// request is one stream (left out of result files for HTTP/1.1).
    #[serde(default, skip_serializing_if = "HttpVersion::is_http1")]
    pub http: HttpVersion,
}

/// The most source addresses a storm rotates over.
const MAX_SOURCES: u128 = 65_536;

impl StormPlan {
    /// The texts of the `--send-secret` steps, in order: what a storm
    /// part's orders carry besides the plan (which never holds them).
    pub fn line_secrets(&self) -> Vec<String> {
        match &self.protocol {
            Some(Protocol::Lines { steps, .. }) => steps
                .iter()
                .filter_map(|s| match s {
                    LineStep::SendSecret(t) => Some(t.expose().to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Puts back the texts [`StormPlan::line_secrets`] took, in order; an
    /// error when their number is not the plan's.
    pub fn restore_line_secrets(&mut self, texts: &[String]) -> Result<(), String> {
        let mut given = texts.iter();
        if let Some(Protocol::Lines { steps, .. }) = &mut self.protocol {
            for step in steps {
                if let LineStep::SendSecret(t) = step {
                    *t = SecretText::new(given.next().ok_or("fewer --send-secret texts than steps")?.clone());
                }
            }
        }
        match given.next() {
            Some(_) => Err("more --send-secret texts than steps".to_string()),
            None => Ok(()),
        }
    }

    /// Validates flags into a plan.
    pub fn from_args(a: StormArgs) -> Result<StormPlan, PlanError> {
        let target = parse_target(&a.target)?;
        let connections = match a.connections {
            Some(0) => {
                return Err(PlanError::invalid(
                    "--connections",
                    "must be at least 1, e.g. --connections 10000",
                ));
            }
            Some(n) => n,
            None => {
                return Err(PlanError::invalid(
                    "--connections",
                    "is required: how many connections, e.g. --connections 10000",
                ));
            }
        };
        if let Some(r) = a.rate
            && !(r.is_finite() && r > 0.0)
        {
            return Err(PlanError::invalid(
                "--rate",
                "must be greater than 0 connections per second, e.g. --rate 1000",
            ));
        }
        if a.max_concurrent == Some(0) {
            return Err(PlanError::invalid(
                "--max-concurrent",
                "must be at least 1, e.g. --max-concurrent 1000",
            ));
        }
        let workers = a.workers.unwrap_or(a.cores.max(1));
        if workers == 0 {
            return Err(PlanError::invalid("--workers", "must be at least 1, e.g. --workers 2"));
        }
        let workers = u32::try_from(u64::from(workers).min(connections)).unwrap_or(workers);
        let client = parse_client(&a, &target)?;
        let timeout = a.timeout.unwrap_or(match client {
            ClientProfile::NatsGo => ClientProfile::NATS_GO_TIMEOUT,
            ClientProfile::Lenient => DEFAULT_TIMEOUT,
        });
        if timeout.is_zero() {
            return Err(PlanError::invalid(
                "--timeout",
                "must be longer than 0, e.g. --timeout 10s",
            ));
        }
        let request = match a.request.as_deref().map(str::trim) {
            Some("none") => None,
            Some(text) => Some(parse_request(text)?),
            None => match target.scheme {
                StormScheme::Http | StormScheme::Https => Some(StormRequest {
                    method: "GET".into(),
                    path: target_path(&a.target),
                }),
                _ => None,
            },
        };
        let procs = match a.procs.as_deref().map(str::trim) {
            None | Some("auto") => Procs::Auto,
            Some(n) => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Procs::Count(n),
                _ => {
                    return Err(PlanError::invalid(
                        "--procs",
                        format!("'{n}' is not 'auto' or a count of at least 1"),
                    ));
                }
            },
        };
        let source = match a.source.as_deref() {
            Some(s) => parse_sources(s)?,
            None => Vec::new(),
        };
        let tls = if target.scheme.is_tls() || target.scheme == StormScheme::Nats {
            // NATS upgrades to TLS when the server's INFO requires it.
            Some(a.tls.clone())
        } else if a.tls.any() {
            return Err(PlanError::invalid(
                "--cacert/--cert/--key/--insecure/--tls-*",
                format!(
                    "TLS flags apply to tls:// and https:// targets; '{}' is plain",
                    target.url
                ),
            ));
        } else {
            None
        };
        let protocol = parse_protocol(&a, &target, timeout)?;
        let http = parse_http(&a, &target, protocol.as_ref())?;
        let reconnect_flags = a.reconnect_wait.is_some() || a.reconnect_jitter.is_some() || a.max_reconnects.is_some();
        // nats.go reconnects by default (its AllowReconnect): a held
        // connection under that profile does too.
        let wants_reconnect = a.reconnect || (client == ClientProfile::NatsGo && a.hold.is_some_and(|h| !h.is_zero()));
        if reconnect_flags && !wants_reconnect {
            return Err(PlanError::invalid(
                "--reconnect-wait/--reconnect-jitter/--max-reconnects",
                "apply with --reconnect (or --client nats.go with --hold)",
            ));
        }
        let hold = a.hold.unwrap_or(Duration::ZERO);
        let default_jitter = if client == ClientProfile::NatsGo && (target.scheme.is_tls() || a.tls.any()) {
            ClientProfile::NATS_GO_JITTER_TLS
        } else {
            Duration::from_millis(100)
        };
        let reconnect = if wants_reconnect {
            if hold.is_zero() {
                return Err(PlanError::invalid(
                    "--reconnect",
                    "reconnects held connections; give --hold, e.g. --hold 30s",
                ));
            }
            Some(Reconnect {
                wait: a.reconnect_wait.unwrap_or(Duration::from_secs(2)),
                jitter: a.reconnect_jitter.unwrap_or(default_jitter),
                max: a.max_reconnects.unwrap_or(60),
            })
        } else {
            None
        };
        let trigger = match (a.trigger_after, a.trigger.as_deref().map(str::trim)) {
            (_, Some("")) => return Err(PlanError::invalid("--trigger", "is empty; give a shell command")),
            (after, Some(cmd)) => {
                if hold.is_zero() {
                    return Err(PlanError::invalid(
                        "--trigger",
                        "runs once every connection is held; give --hold longer than --trigger-after",
                    ));
                }
                let timeout = match a.trigger_timeout {
                    Some(t) if t.is_zero() => {
                        return Err(PlanError::invalid(
                            "--trigger-timeout",
                            "must be longer than 0; give the longest the command may run, e.g. 60s",
                        ));
                    }
                    Some(t) => t,
                    None => Trigger::DEFAULT_TIMEOUT,
                };
                Some(Trigger {
                    after: after.unwrap_or(Duration::ZERO),
                    command: cmd.to_string(),
                    timeout,
                })
            }
            (Some(_), None) => {
                return Err(PlanError::invalid("--trigger-after", "needs --trigger 'COMMAND'"));
            }
            (None, None) => None,
        };
        if a.trigger_timeout.is_some() && trigger.is_none() {
            return Err(PlanError::invalid("--trigger-timeout", "needs --trigger 'COMMAND'"));
        }
        let segment = a.segment.filter(|s| !s.is_whole());
        if let Some(s) = &segment
            && s.share(connections) == 0
        {
            return Err(PlanError::invalid(
                "--connections",
                format!(
                    "--connections {connections} leaves segment {} no connection; raise --connections to at \
                     least the number of segments",
                    s.range()
                ),
            ));
        }
        let https = target.scheme.is_tls().then_some(true);
        let reach = crate::reach::Reach::from_args(&a.reach, &target.host, https)?;
        if http == HttpVersion::Http3 && reach.proxy.is_some() {
            return Err(PlanError::invalid(
                "--http3",
                "HTTP/3 runs over UDP and cannot go through an HTTP proxy; leave out -x/--proxy (or set --proxy '' \
                 to ignore HTTPS_PROXY), or use --http2",
            ));
        }
        Ok(StormPlan {
            target,
            connections,
            rate: a.rate,
            max_concurrent: a.max_concurrent,
            workers,
            jitter: a.jitter.filter(|j| !j.is_zero()),
            hold,
            request,
            timeout,
            procs,
            source,
            tls,
            seed: a.seed,
            protocol,
            client,
            reconnect,
            trigger,
            segment,
            reach,
            http,
        })
    }

    /// This process's segment: the plan's, or the whole.
    pub fn segment(&self) -> Segment {
        self.segment.clone().unwrap_or_else(Segment::whole)
    }

    /// The bytes of the per-connection request, if any.
    pub fn request_bytes(&self) -> Option<Vec<u8>> {
        let r = self.request.as_ref()?;
        let default_port = if self.target.scheme.is_tls() { 443 } else { 80 };
        let authority = Authority::new(&self.target.host, self.target.port, default_port);
        Some(
            RequestHead {
                method: &r.method,
                target: &r.path,
                authority: &authority,
                headers: &[],
                body_len: 0,
                close: false,
            }
            .to_vec(),
        )
    }

    /// A one-line description.
    pub fn describe(&self) -> String {
        let mut parts = vec![crate::count(self.connections, "connection")];
        if let Some(r) = self.rate {
            parts.push(crate::format_rate(r, ""));
        }
        if let Some(m) = self.max_concurrent {
            parts.push(format!("at most {m} at once"));
        }
        if let Some(j) = self.jitter {
            parts.push(format!("each after a random wait under {}", format_duration(j)));
        }
        parts.push(if self.hold.is_zero() {
            "closed at once".to_string()
        } else {
            format!("held {}", format_duration(self.hold))
        });
        match &self.request {
            Some(r) if self.http.is_multiplexed() => {
                parts.push(format!("one {} {} each over {}", r.method, r.path, self.http.label()));
            }
            Some(r) => parts.push(format!("one {} {} each", r.method, r.path)),
            None if self.http.is_multiplexed() => parts.push(format!("{} handshakes only", self.http.label())),
            None => {}
        }
        parts.push(crate::count(self.workers, "worker"));
        if !self.source.is_empty() {
            parts.push(format!(
                "from {}",
                crate::count(self.source.len() as u64, "source address")
            ));
        }
        if self.client != ClientProfile::Lenient {
            parts.push(format!("as {} clients", self.client.name()));
        }
        parts.join(", ")
    }
}

/// `--http2`: http:// (h2c, prior knowledge) and https:// (ALPN h2)
/// targets only; `--http3`: https:// only (QUIC is always encrypted). No
/// other protocol on the connection either way.
fn parse_http(a: &StormArgs, target: &StormTarget, protocol: Option<&Protocol>) -> Result<HttpVersion, PlanError> {
    let (flag, version) = match (a.http2, a.http3) {
        (false, false) => return Ok(HttpVersion::Http1),
        (true, true) => {
            return Err(PlanError::invalid(
                "--http2/--http3",
                "give one of them: a storm speaks one HTTP version",
            ));
        }
        (true, false) => ("--http2", HttpVersion::Http2),
        (false, true) => ("--http3", HttpVersion::Http3),
    };
    if version == HttpVersion::Http3 && target.scheme != StormScheme::Https {
        return Err(PlanError::invalid(
            flag,
            format!(
                "HTTP/3 runs over QUIC, which is always encrypted: use an https:// target ('{}' is not one)",
                target.url
            ),
        ));
    }
    if !matches!(target.scheme, StormScheme::Http | StormScheme::Https) {
        return Err(PlanError::invalid(
            flag,
            format!(
                "applies to http:// (h2c) and https:// (ALPN h2) targets; '{}' is not one",
                target.url
            ),
        ));
    }
    if protocol.is_some() {
        return Err(PlanError::invalid(
            flag,
            format!(
                "the connection speaks {}; leave out --protocol and --send/--expect",
                version.label()
            ),
        ));
    }
    if version == HttpVersion::Http3 {
        if a.source.is_some() {
            return Err(PlanError::invalid(
                "--source",
                "QUIC connections share one UDP socket per worker and need no extra source addresses; leave out \
                 --source with --http3",
            ));
        }
        if a.tls.version == Some(crate::TlsVersion::Tls12) {
            return Err(PlanError::invalid(
                "--tls-version",
                "QUIC (--http3) runs on TLS 1.3 only; leave out --tls-version 1.2",
            ));
        }
    }
    Ok(version)
}

fn parse_client(a: &StormArgs, target: &StormTarget) -> Result<ClientProfile, PlanError> {
    let Some(text) = a.client.as_deref().map(str::trim) else {
        return Ok(ClientProfile::Lenient);
    };
    let client = match text {
        "lenient" => ClientProfile::Lenient,
        "nats.go" | "nats-go" => ClientProfile::NatsGo,
        other => {
            return Err(PlanError::invalid(
                "--client",
                format!("'{other}' is not a client profile; use lenient or nats.go"),
            ));
        }
    };
    let nats = target.scheme == StormScheme::Nats || a.protocol.as_deref().map(str::trim) == Some("nats");
    if client == ClientProfile::NatsGo && !nats {
        return Err(PlanError::invalid(
            "--client",
            format!(
                "nats.go applies to NATS storms; '{}' does not speak NATS (use nats://… or --protocol nats)",
                target.url
            ),
        ));
    }
    Ok(client)
}

fn parse_target(given: &str) -> Result<StormTarget, PlanError> {
    let example = "e.g. tcp://127.0.0.1:8080, tls://127.0.0.1:8443, https://127.0.0.1:8443/, \
                   nats://user:pass@127.0.0.1:4222 or ws://127.0.0.1:8080/chat";
    // Errors quote the target with any user:password@ as ***@.
    let text = &crate::http::mask_userinfo(given);
    let url = url::Url::parse(given)
        .map_err(|e| PlanError::invalid("TARGET", format!("'{text}' is not a valid target ({e}); {example}")))?;
    let scheme = match url.scheme() {
        "tcp" => StormScheme::Tcp,
        "tls" => StormScheme::Tls,
        "http" => StormScheme::Http,
        "https" => StormScheme::Https,
        "nats" => StormScheme::Nats,
        "ws" => StormScheme::Ws,
        "wss" => StormScheme::Wss,
        other => {
            return Err(PlanError::invalid(
                "TARGET",
                format!("scheme '{other}' is not supported; {example}"),
            ));
        }
    };
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(PlanError::invalid("TARGET", format!("'{text}' has no host; {example}"))),
    };
    let port = match (url.port_or_known_default(), scheme) {
        (Some(p), _) => p,
        (None, StormScheme::Tls) => 443,
        (None, StormScheme::Nats) => 4222,
        (None, _) => {
            return Err(PlanError::invalid(
                "TARGET",
                format!("'{text}' needs a port; {example}"),
            ));
        }
    };
    Ok(StormTarget {
        url: redacted(&url),
        scheme,
        host,
        port,
    })
}

/// The protocol from the target's scheme, `--protocol`, and the line steps.
fn parse_protocol(a: &StormArgs, target: &StormTarget, timeout: Duration) -> Result<Option<Protocol>, PlanError> {
    let named = a.protocol.as_deref().map(str::trim);
    if matches!(target.scheme, StormScheme::Ws | StormScheme::Wss) {
        return parse_websocket(a, target, timeout).map(Some);
    }
    if a.ping_every.is_some() {
        return Err(PlanError::invalid(
            "--ping-every",
            "applies to WebSocket storms (ws:// or wss:// targets)",
        ));
    }
    let nats = target.scheme == StormScheme::Nats || named == Some("nats");
    if let Some(other) = named.filter(|n| !["nats", "lines", "none"].contains(n)) {
        return Err(PlanError::invalid(
            "--protocol",
            format!("'{other}' is not nats, lines or none"),
        ));
    }
    if named == Some("nats") && !matches!(target.scheme, StormScheme::Tcp | StormScheme::Tls | StormScheme::Nats) {
        return Err(PlanError::invalid(
            "--protocol",
            "nats runs over tcp://, tls:// or nats:// targets",
        ));
    }
    if nats {
        if !a.steps.is_empty() {
            return Err(PlanError::invalid(
                "--send/--expect",
                "line steps do not apply to NATS (it has its own handshake)",
            ));
        }
        let url = url::Url::parse(&a.target).ok();
        let url_user = url.as_ref().map(|u| u.username().to_string()).filter(|u| !u.is_empty());
        let url_pass = url.as_ref().and_then(|u| u.password().map(str::to_string));
        let mut auth = NatsAuth::default();
        match (url_user, url_pass, &a.nats_creds) {
            (Some(_), _, Some(_)) => {
                return Err(PlanError::invalid(
                    "--nats-creds",
                    "give credentials in the URL or in --nats-creds, not both",
                ));
            }
            (Some(user), Some(pass), None) => {
                auth.user = Some(percent_decode(&user));
                auth.password = true;
                auth.secret = Some(percent_decode(&pass));
            }
            (Some(token), None, None) => {
                auth.token = true;
                auth.secret = Some(percent_decode(&token));
            }
            (None, _, Some((path, text))) => {
                let (user, pass) = parse_creds(text).ok_or_else(|| {
                    PlanError::invalid(
                        "--nats-creds",
                        format!("{path}: expected 'user:password' or the user and the password on two lines"),
                    )
                })?;
                auth.user = Some(user);
                auth.password = true;
                auth.secret = Some(pass);
            }
            (None, _, None) => {}
        }
        return Ok(Some(Protocol::Nats(auth)));
    }
    if a.nats_creds.is_some() {
        return Err(PlanError::invalid(
            "--nats-creds",
            "applies to nats:// targets or --protocol nats",
        ));
    }
    if a.steps.is_empty() {
        if named == Some("lines") {
            return Err(PlanError::invalid(
                "--protocol",
                "lines needs steps: --send 'PING\\r\\n' --expect '^\\+PONG'",
            ));
        }
        return Ok(None);
    }
    let mut steps = Vec::new();
    for step in &a.steps {
        steps.push(match step {
            StepArg::Send(text) => LineStep::Send(unescape(text).map_err(|e| PlanError::invalid("--send", e))?),
            // The error may quote the text: say where, not what.
            StepArg::SendSecret(text) => LineStep::SendSecret(SecretText::new(unescape(text).map_err(|_| {
                PlanError::invalid(
                    "--send-secret",
                    "has a bad escape; write \\r \\n \\t \\\\ \\0 or \\xHH (two hex digits)",
                )
            })?)),
            StepArg::Expect(text) => {
                LineStep::Expect(Pattern::new(text).map_err(|e| PlanError::invalid("--expect", e))?)
            }
            StepArg::SendBinary { .. } => {
                return Err(PlanError::invalid(
                    "--send-binary",
                    "applies to WebSocket storms (ws:// or wss:// targets); use --send with \\xHH escapes",
                ));
            }
        });
    }
    let step_timeout = a.step_timeout.unwrap_or(timeout);
    if step_timeout.is_zero() {
        return Err(PlanError::invalid(
            "--step-timeout",
            "must be longer than 0, e.g. --step-timeout 2s",
        ));
    }
    Ok(Some(Protocol::Lines { steps, step_timeout }))
}

/// A WebSocket storm's upgrade and message steps.
fn parse_websocket(a: &StormArgs, target: &StormTarget, timeout: Duration) -> Result<Protocol, PlanError> {
    if let Some(named) = a.protocol.as_deref().map(str::trim).filter(|n| *n != "websocket") {
        return Err(PlanError::invalid(
            "--protocol",
            format!("'{named}' does not apply to {}: it speaks WebSocket", target.url),
        ));
    }
    if a.nats_creds.is_some() {
        return Err(PlanError::invalid("--nats-creds", "applies to nats:// targets"));
    }
    if a.request.is_some() {
        return Err(PlanError::invalid(
            "--request",
            "a WebSocket storm's request is its upgrade (GET of the target's path); leave --request out",
        ));
    }
    let mut steps = Vec::new();
    for step in &a.steps {
        steps.push(match step {
            StepArg::Send(text) => WsStep::Text(unescape(text).map_err(|e| PlanError::invalid("--send", e))?),
            StepArg::SendSecret(_) => {
                return Err(PlanError::invalid(
                    "--send-secret",
                    "is not supported for WebSocket storms yet; use --send",
                ));
            }
            StepArg::Expect(text) => WsStep::Expect(Pattern::new(text).map_err(|e| PlanError::invalid("--expect", e))?),
            StepArg::SendBinary { path, bytes } => {
                if bytes.len() > MAX_BINARY {
                    return Err(PlanError::invalid(
                        "--send-binary",
                        format!(
                            "{path} holds {} bytes; at most {MAX_BINARY} are sent as one message",
                            bytes.len()
                        ),
                    ));
                }
                WsStep::Binary {
                    file: path.clone(),
                    bytes: bytes.clone(),
                }
            }
        });
    }
    let step_timeout = a.step_timeout.unwrap_or(timeout);
    if step_timeout.is_zero() {
        return Err(PlanError::invalid(
            "--step-timeout",
            "must be longer than 0, e.g. --step-timeout 2s",
        ));
    }
    if a.ping_every.is_some_and(|p| p.is_zero()) {
        return Err(PlanError::invalid(
            "--ping-every",
            "must be longer than 0, e.g. --ping-every 5s",
        ));
    }
    let default_port = if target.scheme.is_tls() { 443 } else { 80 };
    Ok(Protocol::WebSocket(WsSpec {
        path: target_path(&a.target),
        host: Authority::new(&target.host, target.port, default_port).to_string(),
        steps,
        step_timeout,
        ping_every: a.ping_every,
    }))
}

/// Decodes `\r`, `\n`, `\t`, `\\`, `\0` and `\xHH` in a `--send` text.
pub fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('0') => out.push('\0'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let b =
                    u8::from_str_radix(&hex, 16).map_err(|_| format!("'\\x{hex}' is not a hex byte in '{text}'"))?;
                out.push(char::from(b));
            }
            Some(o) => {
                return Err(format!(
                    "'\\{o}' is not an escape in '{text}'; use \\r, \\n, \\t, \\\\, \\0 or \\xHH"
                ));
            }
            None => return Err(format!("'{text}' ends with a lone backslash")),
        }
    }
    Ok(out)
}

fn parse_creds(text: &str) -> Option<(String, String)> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    match lines.as_slice() {
        [one] => one.split_once(':').map(|(u, p)| (u.to_string(), p.to_string())),
        [user, pass] => Some((user.to_string(), pass.to_string())),
        _ => None,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The URL as given, with any password (or a lone user part, a NATS
/// token) replaced by `***`: result files must not carry secrets.
fn redacted(url: &url::Url) -> String {
    let mut u = url.clone();
    if u.password().is_some() {
        let _ = u.set_password(Some("***"));
    } else if !u.username().is_empty() && u.scheme() == "nats" {
        let _ = u.set_username("***");
    }
    let text = u.to_string();
    // url adds a trailing slash to hosts without a path; keep what was typed.
    if !url.as_str().ends_with('/') && text.ends_with('/') && u.path() == "/" {
        text[..text.len() - 1].to_string()
    } else {
        text
    }
}

fn target_path(text: &str) -> String {
    url::Url::parse(text)
        .map(|u| match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        })
        .unwrap_or_else(|_| "/".to_string())
}

fn parse_request(text: &str) -> Result<StormRequest, PlanError> {
    let bad = || {
        PlanError::invalid(
            "--request",
            format!("'{text}' is not 'METHOD /path' or 'none', e.g. --request 'GET /'"),
        )
    };
    let mut parts = text.split_whitespace();
    let (Some(method), Some(path), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if !method.bytes().all(is_token) || !path.starts_with('/') {
        return Err(bad());
    }
    Ok(StormRequest {
        method: method.to_string(),
        path: path.to_string(),
    })
}

/// Parses `127.0.0.2-127.0.0.200`, `127.0.0.0/24` or one address.
pub fn parse_sources(text: &str) -> Result<Vec<IpAddr>, PlanError> {
    let bad = |why: &str| {
        PlanError::invalid(
            "--source",
            format!("'{text}': {why}; e.g. --source 127.0.0.2-127.0.0.200 or --source 127.0.1.0/24"),
        )
    };
    let ip = |s: &str| s.trim().parse::<IpAddr>().map_err(|_| bad("not an IP address"));
    let (first, last) = if let Some((a, b)) = text.split_once('-') {
        (ip(a)?, ip(b)?)
    } else if let Some((a, bits)) = text.split_once('/') {
        let base = ip(a)?;
        let bits: u32 = bits
            .trim()
            .parse()
            .map_err(|_| bad("the prefix length is not a number"))?;
        let width = if base.is_ipv4() { 32 } else { 128 };
        if bits > width {
            return Err(bad("the prefix is longer than the address"));
        }
        let host_bits = width - bits;
        let n = to_u128(base);
        let mask = if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        let (lo, hi) = (n & !mask, n | mask);
        // Skip the network and broadcast addresses of IPv4 subnets.
        let (lo, hi) = if base.is_ipv4() && host_bits >= 2 {
            (lo + 1, hi - 1)
        } else {
            (lo, hi)
        };
        (from_u128(lo, base.is_ipv4()), from_u128(hi, base.is_ipv4()))
    } else {
        let a = ip(text)?;
        (a, a)
    };
    if first.is_ipv4() != last.is_ipv4() {
        return Err(bad("both ends must be IPv4 or both IPv6"));
    }
    let (lo, hi) = (to_u128(first), to_u128(last));
    if lo > hi {
        return Err(bad("the range runs backwards"));
    }
    if hi - lo >= MAX_SOURCES {
        return Err(bad("more than 65536 addresses"));
    }
    Ok((lo..=hi).map(|n| from_u128(n, first.is_ipv4())).collect())
}

fn to_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

fn from_u128(n: u128, v4: bool) -> IpAddr {
    if v4 {
        // Invariant: built from IPv4 values, so it fits 32 bits.
        IpAddr::V4(std::net::Ipv4Addr::from(n as u32))
    } else {
        IpAddr::V6(std::net::Ipv6Addr::from(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(target: &str) -> StormArgs {
        StormArgs {
            target: target.into(),
            connections: Some(100),
            cores: 2,
            ..StormArgs::default()
        }
    }

    #[test]
    fn expect_is_compiled_once_and_round_trips() {
        let with = |re: &str| {
            StormPlan::from_args(StormArgs {
                steps: vec![StepArg::Send("PING\\r\\n".into()), StepArg::Expect(re.into())],
                ..args("tcp://127.0.0.1:9000")
            })
        };
        for bad in ["*", "(a", "a{2,1}", "[z-a]"] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.starts_with("--expect: '"), "{bad}: {e}");
            assert!(e.contains("is not a regular expression"), "{bad}: {e}");
            assert!(
                !e.contains('\n') && !e.contains("parse error"),
                "one line, the reason only: {e}"
            );
        }
        let e = with("*").unwrap_err().to_string();
        assert!(
            e.ends_with("'*' is not a regular expression: repetition operator missing expression"),
            "{e}"
        );
        let p = with("^\\+PONG").unwrap();
        let Some(Protocol::Lines { steps, .. }) = &p.protocol else {
            panic!("{:?}", p.protocol)
        };
        let LineStep::Expect(re) = &steps[1] else {
            panic!("{steps:?}")
        };
        assert!(re.regex().is_match(b"+PONG"));
        let json = serde_json::to_string(&steps).unwrap();
        assert_eq!(json, r#"[{"send":"PING\r\n"},{"expect":"^\\+PONG"}]"#);
        let back: Vec<LineStep> = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, steps);
        assert!(serde_json::from_str::<Vec<LineStep>>(r#"[{"expect":"*"}]"#).is_err());
    }

    #[test]
    fn secret_sends_are_redacted_in_files_and_restored_from_orders() {
        let p = StormPlan::from_args(StormArgs {
            steps: vec![
                StepArg::SendSecret("AUTH hunter2\\r\\n".into()),
                StepArg::Expect("^\\+OK".into()),
                StepArg::Send("PING\\r\\n".into()),
            ],
            ..args("tcp://127.0.0.1:9000")
        })
        .unwrap();
        assert_eq!(p.line_secrets(), ["AUTH hunter2\r\n"]);
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(json.contains(r#"{"send_secret":"<redacted>"}"#), "{json}");
        assert!(!format!("{p:?}").contains("hunter2"));
        let mut back: StormPlan = serde_json::from_str(&json).unwrap();
        assert_eq!(back.line_secrets(), [""]);
        back.restore_line_secrets(&p.line_secrets()).unwrap();
        assert_eq!(back, p);
        assert!(back.restore_line_secrets(&[]).is_err());
        assert!(back.restore_line_secrets(&["a".into(), "b".into()]).is_err());
        let e = StormPlan::from_args(StormArgs {
            steps: vec![StepArg::SendSecret("pw\\q-hunter2".into())],
            ..args("tcp://127.0.0.1:9000")
        })
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--send-secret: ") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn a_bad_target_with_a_password_is_quoted_without_it() {
        for t in [
            "nats://u:s3cr3t@127.0.0.1:99999",
            "tcp://u:s3cr3t@[::1",
            "tcp://u:s3cr3t@127.0.0.1",
        ] {
            let e = parse_target(t).unwrap_err().to_string();
            assert!(e.starts_with("TARGET: ") && !e.contains("s3cr3t"), "{e}");
        }
    }

    #[test]
    fn targets_and_defaults() {
        let p = StormPlan::from_args(args("tcp://127.0.0.1:9000")).unwrap();
        assert_eq!(p.target.scheme, StormScheme::Tcp);
        assert_eq!(p.request, None);
        assert_eq!(p.hold, Duration::ZERO);
        assert_eq!(p.procs, Procs::Auto);
        assert_eq!(p.workers, 2);
        let p = StormPlan::from_args(args("https://localhost:8443/health?x=1")).unwrap();
        assert_eq!(p.request.as_ref().unwrap().path, "/health?x=1");
        assert!(p.tls.is_some());
        let bytes = String::from_utf8(p.request_bytes().unwrap()).unwrap();
        assert!(
            bytes.starts_with("GET /health?x=1 HTTP/1.1\r\nHost: localhost:8443\r\n"),
            "{bytes}"
        );
        let p = StormPlan::from_args(StormArgs {
            request: Some("none".into()),
            ..args("http://h:80/")
        })
        .unwrap();
        assert_eq!(p.request, None);
    }

    #[test]
    fn sources() {
        assert_eq!(parse_sources("127.0.0.2-127.0.0.4").unwrap().len(), 3);
        let v = parse_sources("127.0.1.0/30").unwrap();
        assert_eq!(
            v,
            vec!["127.0.1.1".parse::<IpAddr>().unwrap(), "127.0.1.2".parse().unwrap()]
        );
        assert_eq!(parse_sources("::1").unwrap().len(), 1);
        assert!(parse_sources("127.0.0.9-127.0.0.1").is_err());
        assert!(parse_sources("10.0.0.0/8").is_err(), "too many");
        assert!(parse_sources("nope").unwrap_err().to_string().contains("--source"));
    }

    #[test]
    fn errors_name_the_flag() {
        let flag = |a: StormArgs| match StormPlan::from_args(a).unwrap_err() {
            PlanError::Invalid { flag, .. } => flag,
        };
        assert_eq!(
            flag(StormArgs {
                connections: None,
                ..args("tcp://h:1")
            }),
            "--connections"
        );
        assert_eq!(flag(args("ftp://h:1")), "TARGET");
        assert_eq!(flag(args("tcp://h")), "TARGET");
        assert_eq!(
            flag(StormArgs {
                rate: Some(0.0),
                ..args("tcp://h:1")
            }),
            "--rate"
        );
        assert_eq!(
            flag(StormArgs {
                request: Some("GET".into()),
                ..args("tcp://h:1")
            }),
            "--request"
        );
        assert_eq!(
            flag(StormArgs {
                procs: Some("0".into()),
                ..args("tcp://h:1")
            }),
            "--procs"
        );
        assert_eq!(
            flag(StormArgs {
                trigger_timeout: Some(Duration::from_secs(5)),
                ..args("tcp://h:1")
            }),
            "--trigger-timeout"
        );
        assert_eq!(
            flag(StormArgs {
                trigger: Some("true".into()),
                trigger_timeout: Some(Duration::ZERO),
                hold: Some(Duration::from_secs(1)),
                ..args("tcp://h:1")
            }),
            "--trigger-timeout"
        );
        let tls = TlsSettings {
            insecure: true,
            ..TlsSettings::default()
        };
        assert_eq!(
            flag(StormArgs {
                tls,
                ..args("tcp://h:1")
            }),
            "--cacert/--cert/--key/--insecure/--tls-*"
        );
    }

    #[test]
    fn client_profiles() {
        let p = StormPlan::from_args(args("nats://127.0.0.1:4222")).unwrap();
        assert_eq!(p.client, ClientProfile::Lenient, "the default");
        assert_eq!(p.timeout, DEFAULT_TIMEOUT);
        assert_eq!(p.reconnect, None);
        let go = |extra: StormArgs| StormPlan::from_args(extra).unwrap();
        let p = go(StormArgs {
            client: Some("nats.go".into()),
            hold: Some(Duration::from_secs(10)),
            ..args("nats://127.0.0.1:4222")
        });
        assert_eq!(p.client, ClientProfile::NatsGo);
        assert_eq!(p.timeout, Duration::from_secs(2), "nats.go's DefaultTimeout");
        assert_eq!(
            p.reconnect,
            Some(Reconnect {
                wait: Duration::from_secs(2),
                jitter: Duration::from_millis(100),
                max: 60
            }),
            "nats.go reconnects by default"
        );
        assert!(p.describe().contains("as nats.go clients"), "{}", p.describe());
        let p = go(StormArgs {
            client: Some("nats.go".into()),
            hold: Some(Duration::from_secs(10)),
            timeout: Some(Duration::from_secs(5)),
            protocol: Some("nats".into()),
            ..args("tls://127.0.0.1:4222")
        });
        assert_eq!(p.timeout, Duration::from_secs(5), "an explicit --timeout wins");
        assert_eq!(p.reconnect.unwrap().jitter, Duration::from_secs(1), "TLS jitter");
        // Without --hold there is nothing to reconnect.
        assert_eq!(
            go(StormArgs {
                client: Some("nats.go".into()),
                ..args("nats://h:1")
            })
            .reconnect,
            None
        );
        let err = |a: StormArgs| StormPlan::from_args(a).unwrap_err().to_string();
        let e = err(StormArgs {
            client: Some("nats.go".into()),
            ..args("tcp://h:1")
        });
        assert!(e.contains("--client") && e.contains("NATS"), "{e}");
        let e = err(StormArgs {
            client: Some("nats.js".into()),
            ..args("nats://h:1")
        });
        assert!(e.contains("--client") && e.contains("lenient or nats.go"), "{e}");
    }

    #[test]
    fn http2_is_for_http_targets_and_round_trips() {
        let p = StormPlan::from_args(StormArgs {
            http2: true,
            ..args("https://h:8443/x")
        })
        .unwrap();
        assert_eq!(p.http, HttpVersion::Http2);
        assert!(p.describe().contains("one GET /x each over HTTP/2"), "{}", p.describe());
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""http":"h2""#), "{json}");
        assert_eq!(
            serde_json::from_str::<StormPlan>(&json).unwrap().http,
            HttpVersion::Http2
        );
        let none = StormPlan::from_args(StormArgs {
            http2: true,
            request: Some("none".into()),
            ..args("http://h:80/")
        })
        .unwrap();
        assert!(
            none.describe().contains("HTTP/2 handshakes only"),
            "{}",
            none.describe()
        );
        // HTTP/1.1 plans serialize as before.
        let plain = StormPlan::from_args(args("http://h:80/")).unwrap();
        assert!(!serde_json::to_string(&plain).unwrap().contains(r#""http":"#));
        let flag = |a: StormArgs| match StormPlan::from_args(a).unwrap_err() {
            PlanError::Invalid { flag, .. } => flag,
        };
        assert_eq!(
            flag(StormArgs {
                http2: true,
                ..args("tls://h:1")
            }),
            "--http2"
        );
        assert_eq!(
            flag(StormArgs {
                http2: true,
                steps: vec![StepArg::Send("x".into())],
                ..args("http://h:1/")
            }),
            "--http2"
        );
    }

    #[test]
    fn http3_is_for_https_targets_without_proxy_or_sources() {
        let p = StormPlan::from_args(StormArgs {
            http3: true,
            ..args("https://h:8443/x")
        })
        .unwrap();
        assert_eq!(p.http, HttpVersion::Http3);
        assert!(p.describe().contains("one GET /x each over HTTP/3"), "{}", p.describe());
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(
            serde_json::from_str::<StormPlan>(&json).unwrap().http,
            HttpVersion::Http3
        );
        let refused = |a: StormArgs| match StormPlan::from_args(a).unwrap_err() {
            PlanError::Invalid { flag, message } => format!("{flag}: {message}"),
        };
        for (a, flag, says) in [
            (
                StormArgs {
                    http3: true,
                    ..args("http://h:1/")
                },
                "--http3",
                "https://",
            ),
            (
                StormArgs {
                    http3: true,
                    http2: true,
                    ..args("https://h:1/")
                },
                "--http2/--http3",
                "one of them",
            ),
            (
                StormArgs {
                    http3: true,
                    source: Some("127.0.0.2-127.0.0.3".into()),
                    ..args("https://h:1/")
                },
                "--source",
                "UDP socket",
            ),
            (
                StormArgs {
                    http3: true,
                    reach: crate::reach::ReachArgs {
                        proxy: Some("http://127.0.0.1:3128".into()),
                        ..Default::default()
                    },
                    ..args("https://h:1/")
                },
                "--http3",
                "proxy",
            ),
        ] {
            let e = refused(a);
            assert!(e.starts_with(flag) && e.contains(says), "{e}");
        }
    }

    #[test]
    fn websocket_targets_steps_and_files() {
        let p = StormPlan::from_args(StormArgs {
            steps: vec![
                StepArg::Send("hi\\n".into()),
                StepArg::Expect("^hi".into()),
                StepArg::SendBinary {
                    path: "@f.bin".into(),
                    bytes: vec![0, 255, 7],
                },
            ],
            ping_every: Some(Duration::from_secs(5)),
            ..args("wss://example.test/chat?room=1")
        })
        .unwrap();
        assert_eq!(p.target.scheme, StormScheme::Wss);
        assert_eq!(p.target.port, 443);
        assert!(p.tls.is_some(), "wss is TLS");
        assert!(p.request.is_none(), "the upgrade is the request");
        let Some(Protocol::WebSocket(ws)) = &p.protocol else {
            panic!("{:?}", p.protocol);
        };
        assert_eq!(ws.path, "/chat?room=1");
        assert_eq!(ws.host, "example.test");
        assert_eq!(ws.ping_every, Some(Duration::from_secs(5)));
        assert_eq!(ws.steps[0], WsStep::Text("hi\n".into()));
        // The bytes travel in the plan (to a storm's parts) as base64.
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"bytes\":\"AP8H\""), "{json}");
        let back: StormPlan = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);

        let ws = StormPlan::from_args(args("ws://127.0.0.1:8080")).unwrap();
        assert_eq!(ws.target.port, 8080);
        let Some(Protocol::WebSocket(w)) = &ws.protocol else {
            panic!("{:?}", ws.protocol);
        };
        assert_eq!((w.path.as_str(), w.host.as_str()), ("/", "127.0.0.1:8080"));
    }

    #[test]
    fn websocket_flags_that_do_not_fit_name_themselves() {
        let err = |a: StormArgs| StormPlan::from_args(a).unwrap_err().to_string();
        let e = err(StormArgs {
            ping_every: Some(Duration::from_secs(1)),
            ..args("tcp://h:1")
        });
        assert!(e.contains("--ping-every") && e.contains("ws://"), "{e}");
        let e = err(StormArgs {
            steps: vec![StepArg::SendBinary {
                path: "@x".into(),
                bytes: vec![1],
            }],
            ..args("tcp://h:1")
        });
        assert!(e.contains("--send-binary"), "{e}");
        let e = err(StormArgs {
            steps: vec![StepArg::SendBinary {
                path: "@x".into(),
                bytes: vec![0; MAX_BINARY + 1],
            }],
            ..args("ws://h:1")
        });
        assert!(e.contains("--send-binary") && e.contains("at most"), "{e}");
        let e = err(StormArgs {
            request: Some("GET /".into()),
            ..args("ws://h:1")
        });
        assert!(e.contains("--request"), "{e}");
        let e = err(StormArgs {
            protocol: Some("nats".into()),
            ..args("ws://h:1")
        });
        assert!(e.contains("--protocol"), "{e}");
        let e = err(StormArgs {
            steps: vec![StepArg::SendSecret("x".into())],
            ..args("ws://h:1")
        });
        assert!(e.contains("--send-secret"), "{e}");
    }
}
