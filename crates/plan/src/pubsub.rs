//! `throng mqtt`: publishers and subscribers on an MQTT broker, validated
//! into a [`MqttPlan`]. The target, its `user:password@` and
//! `--mqtt-version` are read as an MQTT storm reads them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;
use crate::storm::{MqttArgs, MqttSpec, Protocol, StormArgs, StormPlan, StormScheme, StormTarget};

/// What stands for the publisher's (or pair's) number in `--topic`.
pub const TOPIC_PLACEHOLDER: &str = "{{n}}";

/// Bytes every message's payload starts with: a mark, the run's id, the
/// publisher's number, the message's sequence number and its send time.
pub const PAYLOAD_HEADER: u64 = 26;

/// The largest payload: a delivered PUBLISH must fit the 256 KiB a
/// subscriber accepts, with its topic.
pub const MAX_PAYLOAD: u64 = 255 * 1024;

/// The client identifiers: RUN is the run's id (in hex, as in its
/// payloads), {{n}} the publisher's or subscriber's number.
pub const CLIENT_IDS: &str = "throng-RUN-p{{n}}, throng-RUN-s{{n}}";

/// Publishers or subscribers at most.
pub const MAX_CLIENTS: u64 = 100_000;

/// Publisher-subscriber pairs whose books a run keeps at most (about 200
/// bytes each).
pub const MAX_BOOKS: u64 = 1_000_000;

/// `--payload`'s default.
pub const DEFAULT_PAYLOAD: u64 = 64;

/// `--window`'s default: QoS 1 and 2 messages a publisher has in flight.
pub const DEFAULT_WINDOW: u64 = 16;

/// `--drain`'s default.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(2);

/// `-d`'s default when neither `-d` nor `-n` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// Who publishes to which topic and who subscribes to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fan {
    /// Each publisher has its own topic; every subscriber subscribes to all
    /// of them.
    #[default]
    Out,
    /// Every publisher publishes to one topic, every subscriber on it.
    In,
    /// Publisher i to subscriber i, on topic i.
    Pairs,
}

impl Fan {
    /// The name `--fan` takes.
    pub fn name(self) -> &'static str {
        match self {
            Fan::Out => "out",
            Fan::In => "in",
            Fan::Pairs => "pairs",
        }
    }
}

/// The flags, as parsed.
#[derive(Clone, Debug, Default)]
pub struct PubSubArgs {
    /// `mqtt://[user:pass@]host:port`.
    pub target: String,
    pub publishers: Option<u64>,
    pub subscribers: Option<u64>,
    pub topic: Option<String>,
    pub rate: Option<f64>,
    pub qos: Option<u8>,
    pub payload: Option<u64>,
    /// `--data`: where it came from (`text` or `@FILE`), and its bytes.
    pub data: Option<(String, Vec<u8>)>,
    pub retain: bool,
    pub duration: Option<Duration>,
    pub messages: Option<u64>,
    pub fan: Option<String>,
    pub version: Option<String>,
    pub window: Option<u64>,
    pub drain: Option<Duration>,
    pub timeout: Option<Duration>,
    /// `--threshold`s, checked by the caller.
    pub thresholds: Vec<String>,
}

/// A validated `throng mqtt` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MqttPlan {
    /// The broker (its URL with any password as `***`).
    pub target: StormTarget,
    /// The session each client's CONNECT carries.
    pub session: MqttSpec,
    pub publishers: u64,
    pub subscribers: u64,
    /// The topic, `{{n}}` standing for the publisher's number.
    pub topic: String,
    pub fan: Fan,
    pub qos: u8,
    /// Bytes per message's payload.
    pub payload: u64,
    /// Where `--data` came from (its bytes follow each message's header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// `--data`'s bytes (not serialized).
    #[serde(skip)]
    pub data_bytes: Vec<u8>,
    pub retain: bool,
    /// Messages in all (`-n`), shared by the publishers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// How long publishers publish (`-d`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub duration: Option<Duration>,
    /// Messages per second over all publishers (open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// QoS 1 and 2 messages a publisher has unacknowledged at once.
    pub window: u64,
    /// How long subscribers wait for messages still in flight at the end.
    #[serde(with = "crate::duration::serde_duration")]
    pub drain: Duration,
    /// Limit on each connection's CONNECT/SUBSCRIBE.
    #[serde(with = "crate::duration::serde_duration")]
    pub timeout: Duration,
    /// `--threshold` criteria as typed; their verdicts are in the result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<String>,
}

fn invalid(flag: &'static str, message: impl Into<String>) -> PlanError {
    PlanError::invalid(flag, message)
}

/// The target, the session and the timeout, as an MQTT storm reads them.
fn broker(a: &PubSubArgs) -> Result<(StormTarget, MqttSpec, Duration), PlanError> {
    // ws:// is MQTT over WebSocket here: no other protocol is spoken.
    let over_ws = a
        .target
        .trim()
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("ws://"));
    let storm = StormPlan::from_args(StormArgs {
        target: a.target.clone(),
        protocol: over_ws.then(|| "mqtt".to_string()),
        connections: Some(1),
        timeout: a.timeout,
        mqtt: MqttArgs {
            version: a.version.clone(),
            ..MqttArgs::default()
        },
        cores: 1,
        ..StormArgs::default()
    })?;
    let session = match (storm.target.scheme, storm.protocol) {
        (StormScheme::Mqtt | StormScheme::Ws, Some(Protocol::Mqtt(m))) => m,
        (StormScheme::Mqtts | StormScheme::Wss, _) => {
            return Err(invalid(
                "TARGET",
                "throng mqtt speaks plain MQTT only (mqtt://HOST:1883, or over WebSocket ws://HOST:PORT/mqtt); \
                 mqtts:// and wss:// are for throng storm",
            ));
        }
        _ => {
            return Err(invalid(
                "TARGET",
                format!(
                    "'{}' is not an MQTT broker: give mqtt://HOST:1883 (or ws://HOST:PORT/mqtt for MQTT over WebSocket)",
                    storm.target.url
                ),
            ));
        }
    };
    Ok((storm.target, session, storm.timeout))
}

impl MqttPlan {
    /// Validates the flags.
    pub fn from_args(a: PubSubArgs) -> Result<MqttPlan, PlanError> {
        let (target, mut session, timeout) = broker(&a)?;
        let count = |flag: &'static str, n: Option<u64>| match n.unwrap_or(1) {
            n @ 1..=MAX_CLIENTS => Ok(n),
            n => Err(invalid(flag, format!("{n} is not 1 to {MAX_CLIENTS}"))),
        };
        let publishers = count("--publishers", a.publishers)?;
        let fan = match a.fan.as_deref().map(str::trim) {
            None | Some("out") => Fan::Out,
            Some("in") => Fan::In,
            Some("pairs") => Fan::Pairs,
            Some(other) => return Err(invalid("--fan", format!("'{other}' is not in, out or pairs"))),
        };
        // No subscribers is publish-only load (what the broker takes in); publishers need one.
        let subscribers = match a.subscribers.or((fan == Fan::Pairs).then_some(publishers)) {
            Some(0) => 0,
            n => count("--subscribers", n)?,
        };
        if fan == Fan::Pairs && subscribers != publishers {
            return Err(invalid(
                "--fan pairs",
                format!(
                    "pairs publisher i with subscriber i: give as many subscribers as publishers ({publishers}), not {subscribers}"
                ),
            ));
        }
        // Each subscriber keeps books per publisher it hears.
        let heard = if fan == Fan::Pairs { 1 } else { publishers };
        if heard.saturating_mul(subscribers) > MAX_BOOKS {
            return Err(invalid(
                "--publishers/--subscribers",
                format!(
                    "each subscriber keeps books per publisher it hears: at most {MAX_BOOKS} publisher-subscriber \
                     pairs, not {publishers} x {subscribers}; use fewer, or --fan pairs"
                ),
            ));
        }
        let topic = a.topic.unwrap_or_else(|| format!("throng/{TOPIC_PLACEHOLDER}"));
        if topic.is_empty() || topic.len() > 1024 || topic.contains(['\0', '+', '#']) {
            return Err(invalid(
                "--topic",
                "a topic name of 1 to 1024 bytes without NUL or the wildcards + and #, e.g. --topic 'bench/{{n}}'",
            ));
        }
        if fan != Fan::In && publishers > 1 && !topic.contains(TOPIC_PLACEHOLDER) {
            return Err(invalid(
                "--topic",
                format!(
                    "--fan {} gives each publisher its own topic: put {{{{n}}}} in it (e.g. 'bench/{{{{n}}}}'), or use --fan in",
                    fan.name()
                ),
            ));
        }
        let qos = a.qos.unwrap_or(0);
        if qos > 2 {
            return Err(invalid("--qos", format!("{qos} is not 0, 1 or 2")));
        }
        // What the clients' CONNECT and SUBSCRIBE say (RUN: the run's id in hex).
        session.client_id = CLIENT_IDS.to_string();
        session.qos = qos;
        let least = PAYLOAD_HEADER + a.data.as_ref().map_or(0, |(_, d)| d.len() as u64);
        let payload = match (a.payload, &a.data) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "--payload/--data",
                    "give one of them: --payload BYTES pads each message, --data sets what follows its header",
                ));
            }
            (Some(n), None) => n,
            (None, Some(_)) => least,
            (None, None) => DEFAULT_PAYLOAD,
        };
        if payload < PAYLOAD_HEADER || least > MAX_PAYLOAD || payload > MAX_PAYLOAD {
            let flag = if a.data.is_some() { "--data" } else { "--payload" };
            return Err(invalid(
                flag,
                format!(
                    "each payload holds {PAYLOAD_HEADER} bytes of header (sequence number, send time) and at most \
                     {MAX_PAYLOAD} bytes in all; {payload} does not fit"
                ),
            ));
        }
        if a.messages == Some(0) {
            return Err(invalid("-n", "give 1 message or more"));
        }
        if a.messages.is_some() && a.duration.is_some() {
            return Err(invalid(
                "-n/-d",
                "give one of them: -n MESSAGES in all, or -d DURATION of publishing",
            ));
        }
        let duration = match (a.messages, a.duration) {
            (Some(_), _) => None,
            (None, Some(d)) if d.is_zero() => return Err(invalid("-d", "give a duration above 0, e.g. -d 10s")),
            (None, d) => Some(d.unwrap_or(DEFAULT_DURATION)),
        };
        if let Some(r) = a.rate
            && !(r.is_finite() && r > 0.0)
        {
            return Err(invalid("--rate", "give messages per second above 0, e.g. --rate 1000"));
        }
        let window = a.window.unwrap_or(DEFAULT_WINDOW);
        if !(1..=u64::from(u16::MAX)).contains(&window) {
            return Err(invalid(
                "--window",
                format!("{window} is not 1 to 65535 (QoS 1 and 2 messages in flight per publisher)"),
            ));
        }
        let drain = a.drain.unwrap_or(DEFAULT_DRAIN);
        if drain > Duration::from_secs(3600) {
            return Err(invalid("--drain", "give at most 1h, e.g. --drain 5s"));
        }
        Ok(MqttPlan {
            target,
            session,
            publishers,
            subscribers,
            topic,
            fan,
            qos,
            payload,
            data: a.data.as_ref().map(|(from, _)| from.clone()),
            data_bytes: a.data.map(|(_, d)| d).unwrap_or_default(),
            retain: a.retain,
            messages: a.messages,
            duration,
            rate: a.rate,
            window,
            drain,
            timeout,
            thresholds: a.thresholds,
        })
    }

    /// The topic of publisher (or pair) `n`, from 1; `--fan in`: every
    /// publisher's is number 1's.
    pub fn topic_of(&self, n: u64) -> String {
        let n = if self.fan == Fan::In { 1 } else { n };
        self.topic.replace(TOPIC_PLACEHOLDER, &n.to_string())
    }

    /// The publishers (from 1) whose messages subscriber `s` (from 1)
    /// should receive.
    pub fn sources_of(&self, s: u64) -> std::ops::RangeInclusive<u64> {
        match self.fan {
            Fan::Pairs => s..=s,
            Fan::Out | Fan::In => 1..=self.publishers,
        }
    }

    /// The topics subscriber `s` subscribes to.
    pub fn subscriptions_of(&self, s: u64) -> Vec<String> {
        match self.fan {
            Fan::Pairs => vec![self.topic_of(s)],
            Fan::In => vec![self.topic_of(1)],
            Fan::Out => (1..=self.publishers).map(|p| self.topic_of(p)).collect(),
        }
    }

    /// Messages publisher `p` (from 1) sends under `-n` (None: until `-d`).
    pub fn messages_of(&self, p: u64) -> Option<u64> {
        let n = self.messages?;
        let base = n / self.publishers;
        Some(base + u64::from(p <= n % self.publishers))
    }

    /// One line: who publishes what, how much and how fast.
    pub fn describe(&self) -> String {
        let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let how_much = match (self.messages, self.duration) {
            (Some(n), _) => plural(n, "message"),
            (None, Some(d)) => format!("for {}", crate::format_duration(d)),
            (None, None) => String::new(),
        };
        let pace = match self.rate {
            Some(r) => format!("at {}", crate::format_rate(r, "messages")),
            None if self.qos == 0 => "closed loop (as fast as each publisher writes)".to_string(),
            None => format!("closed loop (window {})", self.window),
        };
        format!(
            "{}, {} (fan {}), QoS {}, {}-byte payloads{}, {how_much} {pace}",
            plural(self.publishers, "publisher"),
            plural(self.subscribers, "subscriber"),
            self.fan.name(),
            self.qos,
            self.payload,
            if self.retain { ", retained" } else { "" },
        )
    }

    /// Where connections go, `host:port`.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.target.host, self.target.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(target: &str) -> PubSubArgs {
        PubSubArgs {
            target: target.to_string(),
            publishers: Some(2),
            subscribers: Some(4),
            topic: Some("bench/{{n}}".to_string()),
            messages: Some(201),
            qos: Some(1),
            ..PubSubArgs::default()
        }
    }

    #[test]
    fn fan_out_splits_messages_and_subscribes_everyone_to_every_topic() {
        let p = MqttPlan::from_args(args("mqtt://u:secret@127.0.0.1:1883")).unwrap();
        assert_eq!((p.messages_of(1), p.messages_of(2)), (Some(101), Some(100)));
        assert_eq!(p.subscriptions_of(3), ["bench/1", "bench/2"]);
        assert_eq!(p.sources_of(4), 1..=2);
        assert_eq!(p.payload, DEFAULT_PAYLOAD);
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("secret"), "{json}");
    }

    #[test]
    fn pairs_and_in() {
        let mut a = args("mqtt://127.0.0.1:1883");
        a.fan = Some("pairs".into());
        let e = MqttPlan::from_args(a.clone()).unwrap_err();
        assert!(e.to_string().contains("as many subscribers as publishers"), "{e}");
        a.subscribers = None;
        let p = MqttPlan::from_args(a.clone()).unwrap();
        assert_eq!((p.subscribers, p.subscriptions_of(2)), (2, vec!["bench/2".to_string()]));
        a.fan = Some("in".into());
        a.topic = Some("one".into());
        let p = MqttPlan::from_args(a).unwrap();
        assert_eq!(p.subscriptions_of(1), ["one"]);
    }

    #[test]
    fn a_ws_target_is_mqtt_over_websocket() {
        let p = MqttPlan::from_args(args("ws://127.0.0.1:9001/mqtt?x=1")).unwrap();
        let ws = p.session.websocket.expect("over WebSocket");
        assert_eq!((ws.path.as_str(), ws.host.as_str()), ("/mqtt?x=1", "127.0.0.1:9001"));
        assert_eq!(
            MqttPlan::from_args(args("mqtt://127.0.0.1:1883"))
                .unwrap()
                .session
                .websocket,
            None
        );
    }

    #[test]
    fn wrong_flags_say_what_to_do() {
        type Change = fn(&mut PubSubArgs);
        let cases: [(Change, &str); 10] = [
            (
                |a| (a.publishers, a.subscribers) = (Some(2000), Some(1000)),
                "at most 1000000 publisher-subscriber pairs, not 2000 x 1000",
            ),
            (|a| a.qos = Some(3), "--qos: 3 is not 0, 1 or 2"),
            (|a| a.topic = Some("a/#".into()), "--topic: a topic name"),
            (|a| a.topic = Some("same".into()), "put {{n}} in it"),
            (|a| a.payload = Some(10), "--payload: each payload holds 26 bytes"),
            (|a| a.payload = Some(1 << 30), "at most"),
            (|a| a.duration = Some(Duration::from_secs(1)), "-n/-d"),
            (|a| a.window = Some(0), "--window: 0 is not 1 to 65535"),
            (|a| a.target = "http://127.0.0.1:80".into(), "not an MQTT broker"),
            (
                |a| a.target = "wss://127.0.0.1:443/mqtt".into(),
                "wss:// are for throng storm",
            ),
        ];
        for (change, want) in cases {
            let mut a = args("mqtt://127.0.0.1:1883");
            change(&mut a);
            let e = MqttPlan::from_args(a).unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        }
    }
}
