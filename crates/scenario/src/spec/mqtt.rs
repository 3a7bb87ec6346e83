//! An `mqtt:` step as validated: the broker and session (client id, user,
//! password, keep-alive, clean start, version), then its messages in
//! order — subscribe, publish, expect — on a connection of its own or the
//! VU's, kept from an earlier step to the same broker.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checks::Capture;
use crate::template::Template;

/// The MQTT version a step speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MqttVersion {
    /// MQTT 3.1.1 (protocol level 4).
    #[default]
    #[serde(rename = "3.1.1")]
    V311,
    /// MQTT 5.0.
    #[serde(rename = "5")]
    V5,
}

/// Longest payload file a `publish:` may name.
pub const MAX_MQTT_PAYLOAD: usize = 256 * 1024 - 1024;

/// What a `publish:` sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MqttPayload {
    /// `payload:`, rendered per message.
    Template(Template),
    /// `payload_file:`, read once when the file was checked (results keep
    /// its name only).
    File {
        file: String,
        #[serde(skip)]
        data: Vec<u8>,
    },
}

/// One message of an `mqtt:` step, in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MqttMessage {
    /// SUBSCRIBE to a topic filter, waiting for its SUBACK.
    Subscribe { filter: Template, qos: u8 },
    /// PUBLISH, waiting for its PUBACK (QoS 1) or PUBREC and PUBCOMP (QoS 2).
    Publish {
        topic: Template,
        payload: MqttPayload,
        qos: u8,
        #[serde(default)]
        retain: bool,
    },
    /// Waits for a message whose topic the filter matches and whose
    /// payload the regex matches (others are passed over), within the
    /// step's timeout; its captures read the payload.
    Expect {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topic: Option<Template>,
        #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_regex")]
        regex: Option<regex::Regex>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        captures: Vec<Capture>,
    },
}

impl PartialEq for MqttMessage {
    fn eq(&self, other: &Self) -> bool {
        use MqttMessage::*;
        match (self, other) {
            (Subscribe { filter: a, qos: x }, Subscribe { filter: b, qos: y }) => a == b && x == y,
            (
                Publish {
                    topic: a,
                    payload: p,
                    qos: x,
                    retain: r,
                },
                Publish {
                    topic: b,
                    payload: q,
                    qos: y,
                    retain: s,
                },
            ) => a == b && p == q && x == y && r == s,
            (
                Expect {
                    topic: a,
                    regex: x,
                    captures: c,
                },
                Expect {
                    topic: b,
                    regex: y,
                    captures: d,
                },
            ) => a == b && x.as_ref().map(regex::Regex::as_str) == y.as_ref().map(regex::Regex::as_str) && c == d,
            _ => false,
        }
    }
}

mod opt_regex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(r: &Option<regex::Regex>, s: S) -> Result<S::Ok, S::Error> {
        match r {
            Some(r) => s.serialize_some(r.as_str()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<regex::Regex>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| regex::Regex::new(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// An `mqtt:` step: CONNECT → CONNACK (or the VU's kept connection to the
/// same broker), then its messages in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MqttStep {
    /// Its `step` tag (default: `MQTT url`).
    pub name: String,
    /// As written: `mqtt://HOST:PORT`, `mqtts://HOST:PORT`, or over
    /// WebSocket `ws://HOST:PORT/PATH`, `wss://HOST:PORT/PATH`.
    pub url: String,
    pub host: String,
    pub port: u16,
    pub tls: bool,
    /// Over WebSocket: the upgrade's path and query (`/mqtt`), asking for
    /// the subprotocol `mqtt`; packets then go in binary messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<String>,
    pub version: MqttVersion,
    /// The client identifier (templated: `{{vu}}` keeps VUs apart).
    pub client_id: Template,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Template>,
    /// Sent in CONNECT; results read `<redacted>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<Template>,
    /// Announced in CONNECT (whole seconds).
    #[serde(with = "throng_plan::serde_duration")]
    pub keepalive: Duration,
    pub clean_start: bool,
    /// The messages, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MqttMessage>,
    /// Limit on the connect and CONNACK, and on each acknowledgement and
    /// expect.
    #[serde(with = "throng_plan::serde_duration")]
    pub timeout: Duration,
    /// Keep the connection for the VU's next `mqtt:` step to the same URL
    /// (else: DISCONNECT at the end of the step).
    #[serde(default)]
    pub keep: bool,
}

impl MqttStep {
    /// The templates it renders.
    pub fn templates(&self) -> Vec<&Template> {
        let mut out = vec![&self.client_id];
        out.extend(self.user.iter().chain(&self.password));
        for m in &self.messages {
            match m {
                MqttMessage::Subscribe { filter, .. } => out.push(filter),
                MqttMessage::Publish { topic, payload, .. } => {
                    out.push(topic);
                    if let MqttPayload::Template(t) = payload {
                        out.push(t);
                    }
                }
                MqttMessage::Expect { topic, .. } => out.extend(topic),
            }
        }
        out
    }
}

/// Whether an MQTT topic filter (`+` one level, `#` the rest) matches
/// `topic`. A topic starting with `$` is not matched by a filter starting
/// with a wildcard, as brokers do.
pub fn topic_matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let mut f = filter.split('/');
    let mut t = topic.split('/');
    loop {
        match (f.next(), t.next()) {
            (Some("#"), _) => return true,
            (Some("+"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn topic_filters_match_as_brokers_do() {
        assert!(topic_matches("a/b", "a/b"));
        assert!(!topic_matches("a/b", "a/c"));
        assert!(topic_matches("a/+", "a/c"));
        assert!(!topic_matches("a/+", "a/c/d"));
        assert!(topic_matches("a/#", "a/c/d"));
        assert!(topic_matches("a/#", "a"));
        assert!(topic_matches("#", "x/y"));
        assert!(!topic_matches("#", "$SYS/x"));
        assert!(!topic_matches("a/b", "a/b/c"));
        assert!(!topic_matches("a/b/c", "a/b"));
    }
}
