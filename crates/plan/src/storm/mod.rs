//! `throng storm`: the validated plan of a connection storm.
//!
//! [`StormPlan::from_args`] reads as the steps it takes; each step is a
//! function of one of these modules: `steps` (connections, pace, workers,
//! timeout, request, TLS, HTTP version, client profile, reconnects,
//! trigger, segment, reach), `target` (the TARGET URL, `--request`,
//! `--source`) and `protocol` (NATS, lines, WebSocket).

mod mqtt;
mod protocol;
mod steps;
mod target;
#[cfg(test)]
mod tests;
mod userinfo;

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::format_duration;
use crate::error::PlanError;
use crate::head::{Authority, RequestHead};
use crate::http::{HttpVersion, IoModel, REDACTED, TlsSettings};
use crate::segment::Segment;

pub use mqtt::{
    CONN_PLACEHOLDER, DEFAULT_CLIENT_ID, DEFAULT_KEEPALIVE, MqttArgs, MqttSpec, MqttVersion, MqttWebSocket,
};
use protocol::parse_protocol;
pub use protocol::{EscapeError, unescape};
pub use target::parse_sources;
use target::parse_target;

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
    /// MQTT over TCP: CONNECT → CONNACK, then held with PINGREQs.
    Mqtt,
    /// MQTT over TLS.
    Mqtts,
}

impl StormScheme {
    /// True for `tls://` and `https://`: TLS from the first byte.
    pub fn is_tls(self) -> bool {
        matches!(
            self,
            StormScheme::Tls | StormScheme::Https | StormScheme::Wss | StormScheme::Mqtts
        )
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
    /// MQTT: CONNECT, established at an accepting CONNACK (then SUBSCRIBE
    /// and its SUBACK, when asked); PINGREQ every keep-alive while holding,
    /// DISCONNECT before the close.
    Mqtt(MqttSpec),
}

/// A WebSocket storm's upgrade and messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WsSpec {
    /// Path and query of the upgrade request.
    pub path: String,
    /// The `Host` header.
    pub host: String,
    /// The upgrade's `Authorization`: `Basic` from the target's
    /// `user:password@` (never serialized: a storm part's orders carry it
    /// apart, [`StormPlan::ws_authorization`]).
    #[serde(skip)]
    pub authorization: Option<SecretText>,
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
    pub fn new(text: &str) -> Result<Pattern, PatternError> {
        regex::bytes::Regex::new(text)
            .map(Pattern)
            .map_err(|reason| PatternError {
                text: text.to_string(),
                reason,
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

/// Why a `--expect` text is not a regular expression.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
#[error("'{text}' is not a regular expression: {}", PatternError::why(reason))]
pub struct PatternError {
    /// The text as given.
    pub text: String,
    /// The regex crate's error (part of the message, not its source).
    pub reason: regex::Error,
}

impl PatternError {
    /// A syntax error is several lines (the pattern, a caret under the
    /// fault, then "error: why"); the message is one line, so keep the why.
    fn why(reason: &regex::Error) -> String {
        let full = reason.to_string();
        let why = full.lines().last().unwrap_or_default();
        why.trim_start_matches("error: ").to_string()
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

/// Why [`StormPlan::restore_line_secrets`] could not put the texts back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretCount {
    /// Fewer texts than `--send-secret` steps.
    #[error("fewer --send-secret texts than steps")]
    Fewer,
    /// More texts than `--send-secret` steps.
    #[error("more --send-secret texts than steps")]
    More,
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
    /// `--count`.
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
    /// `--io`.
    pub io: IoModel,
    /// The MQTT flags.
    pub mqtt: MqttArgs,
    /// `--threshold`s as written (checked by the caller).
    pub thresholds: Vec<String>,
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
    /// How the workers were asked to drive their sockets (`--io`; always
    /// written; absent in results from before storms had it, which ran
    /// epoll). What ran is the result's `generator.io`.
    #[serde(default = "IoModel::before_auto")]
    pub io: IoModel,
    /// `--threshold`s as written: judged on the storm's figures at the end
    /// (and every second by `throng coordinate`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<String>,
}

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

    /// The `Authorization` of a WebSocket storm's upgrade, if any: what a
    /// storm part's orders carry besides the plan (which never holds it).
    pub fn ws_authorization(&self) -> Option<String> {
        match &self.protocol {
            Some(Protocol::WebSocket(ws)) => ws.authorization.as_ref().map(|a| a.expose().to_string()),
            _ => None,
        }
    }

    /// The password of an MQTT storm's CONNECT, if any: what a storm
    /// part's orders carry besides the plan (which never holds it).
    pub fn mqtt_password(&self) -> Option<String> {
        match &self.protocol {
            Some(Protocol::Mqtt(m)) => m.password.as_ref().map(|p| p.expose().to_string()),
            _ => None,
        }
    }

    /// Puts back the password [`StormPlan::mqtt_password`] took (nothing
    /// for other protocols).
    pub fn restore_mqtt_password(&mut self, value: Option<&str>) {
        if let Some(Protocol::Mqtt(m)) = &mut self.protocol {
            m.password = value.map(|v| SecretText::new(v.to_string()));
        }
    }

    /// Puts back the `Authorization` [`StormPlan::ws_authorization`] took
    /// (nothing for other protocols).
    pub fn restore_ws_authorization(&mut self, value: Option<&str>) {
        if let Some(Protocol::WebSocket(ws)) = &mut self.protocol {
            ws.authorization = value.map(|v| SecretText::new(v.to_string()));
        }
    }

    /// Puts back the texts [`StormPlan::line_secrets`] took, in order; an
    /// error when their number is not the plan's.
    pub fn restore_line_secrets(&mut self, texts: &[String]) -> Result<(), SecretCount> {
        let mut given = texts.iter();
        if let Some(Protocol::Lines { steps, .. }) = &mut self.protocol {
            for step in steps {
                if let LineStep::SendSecret(t) = step {
                    *t = SecretText::new(given.next().ok_or(SecretCount::Fewer)?.clone());
                }
            }
        }
        match given.next() {
            Some(_) => Err(SecretCount::More),
            None => Ok(()),
        }
    }

    /// Validates flags into a plan, one step after another. Every error
    /// names the flag and the fix.
    pub fn from_args(a: StormArgs) -> Result<StormPlan, PlanError> {
        let target = parse_target(&a.target)?;
        let connections = steps::connections(a.connections)?;
        steps::pace(&a)?;
        let workers = steps::workers(&a, connections)?;
        let client = steps::parse_client(&a, &target)?;
        let timeout = steps::timeout(a.timeout, client)?;
        let request = steps::request(&a, &target)?;
        let procs = steps::procs(a.procs.as_deref())?;
        let source = match a.source.as_deref() {
            Some(s) => parse_sources(s)?,
            None => Vec::new(),
        };
        let tls = steps::tls(&a.tls, &target)?;
        let protocol = parse_protocol(&a, &target, timeout)?;
        let http = steps::parse_http(&a, &target, protocol.as_ref())?;
        let hold = a.hold.unwrap_or(Duration::ZERO);
        let reconnect = steps::reconnect(&a, &target, client, hold)?;
        let trigger = steps::trigger(&a, hold)?;
        let segment = steps::segment(a.segment.clone(), connections)?;
        let reach = steps::reach(&a, &target, http)?;
        let plan = StormPlan {
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
            io: a.io,
            thresholds: a.thresholds.clone(),
        };
        if plan.io == IoModel::Uring
            && let Some(what) = plan.ring_refuses()
        {
            return Err(PlanError::invalid(
                "--io",
                format!(
                    "--io uring runs TCP and TLS storms (tcp://, tls://, http://, https:// with HTTP/1.1) only, not {what} yet; leave \
                     out --io (auto runs epoll for this storm), or pass --io epoll"
                ),
            ));
        }
        Ok(plan)
    }

    /// What keeps io_uring from carrying this storm (None: the ring
    /// carries it): TCP and TLS connects, at most one HTTP/1.1 request, the
    /// hold, reconnects and the close ride the ring; the rest is epoll's
    /// for now. The one decision `--io uring` refuses by and `--io auto`
    /// picks epoll by.
    pub fn ring_refuses(&self) -> Option<String> {
        match &self.protocol {
            Some(Protocol::Nats(_)) => return Some("NATS (nats://, --protocol nats)".to_string()),
            Some(Protocol::Lines { .. }) => return Some("a line protocol (--send, --expect)".to_string()),
            Some(Protocol::WebSocket(_)) => return Some("WebSocket (ws://, wss://)".to_string()),
            Some(Protocol::Mqtt(_)) => return Some("MQTT (mqtt://, mqtts://, --protocol mqtt)".to_string()),
            None if self.target.scheme == StormScheme::Nats => return Some("NATS (nats://)".to_string()),
            None => {}
        }
        if !self.http.is_http1() {
            return Some(format!("{} (--http2/--http3)", self.http.label()));
        }
        if self.reach.proxy.is_some() {
            return Some(
                "a proxy (-x/--proxy or the proxy environment; --proxy '' ignores the environment)".to_string(),
            );
        }
        None
    }

    /// This process's segment: the plan's, or the whole.
    pub fn segment(&self) -> Segment {
        self.segment.clone().unwrap_or_else(Segment::whole)
    }

    /// The bytes of the per-connection request, if any (asking the server
    /// to close after its response when connections are not held).
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
                // Without a hold, the server closes after its response: the
                // connection's TIME_WAIT is then the server's, as with ab
                // and `http --no-keepalive`, not the generator's.
                close: self.hold.is_zero(),
            }
            .to_vec(),
        )
    }

    /// A one-line description.
    pub fn describe(&self) -> String {
        let mut parts = vec![crate::duration::count(self.connections, "connection")];
        if let Some(r) = self.rate {
            parts.push(crate::duration::format_rate(r, ""));
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
        parts.push(crate::duration::count(self.workers, "worker"));
        if !self.source.is_empty() {
            parts.push(format!(
                "from {}",
                crate::duration::count(self.source.len() as u64, "source address")
            ));
        }
        if self.client != ClientProfile::Lenient {
            parts.push(format!("as {} clients", self.client.name()));
        }
        parts.join(", ")
    }
}
