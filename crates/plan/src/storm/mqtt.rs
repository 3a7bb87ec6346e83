//! An MQTT storm's session, from an mqtt:// or mqtts:// target and the
//! `--mqtt-version`, `--client-id`, `--keepalive`, `--clean-start`,
//! `--session-expiry`, `--subscribe` and `--qos` flags.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;

use super::{SecretText, StormArgs, StormScheme, StormTarget};

/// What stands for the connection's number in `--client-id` and
/// `--subscribe`.
pub const CONN_PLACEHOLDER: &str = "{{conn}}";

/// The client identifier when `--client-id` is not given: unique per
/// connection, as brokers require.
pub const DEFAULT_CLIENT_ID: &str = "throng-{{conn}}";

/// `--keepalive`'s default, as mosquitto's clients and Paho have it.
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(60);

/// The MQTT version a storm speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MqttVersion {
    /// MQTT 3.1.1 (protocol level 4).
    #[default]
    #[serde(rename = "3.1.1")]
    V311,
    /// MQTT 5.0 (protocol level 5).
    #[serde(rename = "5")]
    V5,
}

impl MqttVersion {
    /// The name `--mqtt-version` takes.
    pub fn name(self) -> &'static str {
        match self {
            MqttVersion::V311 => "3.1.1",
            MqttVersion::V5 => "5",
        }
    }
}

/// The MQTT flags, as parsed (before validation).
#[derive(Clone, Debug, Default)]
pub struct MqttArgs {
    /// `--mqtt-version`, as typed.
    pub version: Option<String>,
    /// `--client-id`.
    pub client_id: Option<String>,
    /// `--keepalive`.
    pub keepalive: Option<Duration>,
    /// `--clean-start`.
    pub clean_start: bool,
    /// `--session-expiry`.
    pub session_expiry: Option<Duration>,
    /// `--subscribe`.
    pub subscribe: Option<String>,
    /// `--qos`.
    pub qos: Option<u8>,
}

impl MqttArgs {
    /// The flags given, by name (for errors on other targets).
    fn given(&self) -> Option<&'static str> {
        [
            (self.version.is_some(), "--mqtt-version"),
            (self.client_id.is_some(), "--client-id"),
            (self.keepalive.is_some(), "--keepalive"),
            (self.clean_start, "--clean-start"),
            (self.session_expiry.is_some(), "--session-expiry"),
            (self.subscribe.is_some(), "--subscribe"),
            (self.qos.is_some(), "--qos"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// An MQTT storm's session: what each connection's CONNECT (and
/// SUBSCRIBE) says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MqttSpec {
    /// The protocol version.
    pub version: MqttVersion,
    /// The client identifier, `{{conn}}` standing for the connection's
    /// number (unique over the run).
    pub client_id: String,
    /// Keep-alive announced in CONNECT; while held, a PINGREQ this often
    /// (zero: neither).
    #[serde(with = "crate::duration::serde_duration")]
    pub keepalive: Duration,
    /// Clean session (3.1.1) or clean start (5).
    pub clean_start: bool,
    /// MQTT 5's Session Expiry Interval (`--session-expiry`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub session_expiry: Option<Duration>,
    /// The user name, from the target's `user@`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The password, from the target's `:password@` (never serialized: a
    /// storm part's orders carry it apart).
    #[serde(skip)]
    pub password: Option<SecretText>,
    /// A topic filter each connection subscribes to once connected
    /// (`{{conn}}` as in the client identifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<String>,
    /// The subscription's QoS.
    #[serde(default)]
    pub qos: u8,
    /// MQTT over WebSocket (a ws:// or wss:// target with `--protocol
    /// mqtt`): the upgrade's path and `Host`, asking for the subprotocol
    /// `mqtt`; then packets in binary messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<MqttWebSocket>,
}

/// Where MQTT over WebSocket upgrades.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MqttWebSocket {
    /// Path and query of the upgrade request (`/mqtt`).
    pub path: String,
    /// The `Host` header.
    pub host: String,
}

/// True for the targets that speak MQTT.
pub(super) fn is_mqtt(scheme: StormScheme) -> bool {
    matches!(scheme, StormScheme::Mqtt | StormScheme::Mqtts)
}

/// The MQTT flags for an mqtt:// or mqtts:// target, or a ws:// or wss://
/// one with `--protocol mqtt` (None for another target, which must not
/// have any of them).
pub(super) fn parse_mqtt(a: &StormArgs, target: &StormTarget) -> Result<Option<MqttSpec>, PlanError> {
    let m = &a.mqtt;
    let over_ws = matches!(target.scheme, StormScheme::Ws | StormScheme::Wss)
        && a.protocol.as_deref().map(str::trim) == Some("mqtt");
    if !is_mqtt(target.scheme) && !over_ws {
        if let Some(flag) = m.given() {
            return Err(PlanError::invalid(
                flag,
                format!(
                    "applies to MQTT storms (mqtt:// or mqtts:// targets, or ws:// and wss:// with --protocol mqtt); \
                     '{}' is not one",
                    target.url
                ),
            ));
        }
        return Ok(None);
    }
    if let Some(named) = a.protocol.as_deref().map(str::trim).filter(|n| *n != "mqtt") {
        return Err(PlanError::invalid(
            "--protocol",
            format!("'{named}' does not apply to {}: it speaks MQTT", target.url),
        ));
    }
    for (given, flag) in [
        (!a.steps.is_empty(), "--send/--expect"),
        (a.request.is_some(), "--request"),
        (a.nats_creds.is_some(), "--nats-creds"),
        (a.ping_every.is_some(), "--ping-every"),
        (a.client.is_some(), "--client"),
        (a.step_timeout.is_some(), "--step-timeout"),
    ] {
        if given {
            return Err(PlanError::invalid(
                flag,
                "does not apply to MQTT storms: they speak CONNECT, SUBSCRIBE and PINGREQ",
            ));
        }
    }
    let version = match m.version.as_deref().map(str::trim) {
        None | Some("3.1.1" | "3" | "4") => MqttVersion::V311,
        Some("5" | "5.0") => MqttVersion::V5,
        Some(other) => {
            return Err(PlanError::invalid(
                "--mqtt-version",
                format!("'{other}' is not 3.1.1 or 5"),
            ));
        }
    };
    let client_id = m.client_id.clone().unwrap_or_else(|| DEFAULT_CLIENT_ID.to_string());
    if client_id.is_empty() || client_id.len() > 1024 {
        return Err(PlanError::invalid(
            "--client-id",
            "must hold 1 to 1024 bytes, e.g. --client-id 'dev-{{conn}}'",
        ));
    }
    let keepalive = m.keepalive.unwrap_or(DEFAULT_KEEPALIVE);
    if keepalive.as_secs() > u64::from(u16::MAX) || (!keepalive.is_zero() && keepalive.subsec_nanos() != 0) {
        return Err(PlanError::invalid(
            "--keepalive",
            "MQTT counts it in whole seconds, 0 to 65535 (0: no keep-alive), e.g. --keepalive 30s",
        ));
    }
    if m.clean_start && m.session_expiry.is_some() {
        return Err(PlanError::invalid(
            "--clean-start/--session-expiry",
            "give one of them: --clean-start starts each connection afresh, --session-expiry keeps its session",
        ));
    }
    if let Some(e) = m.session_expiry
        && (e.as_secs() > u64::from(u32::MAX) || e.subsec_nanos() != 0)
    {
        return Err(PlanError::invalid(
            "--session-expiry",
            "MQTT counts it in whole seconds, up to 4294967295, e.g. --session-expiry 1h",
        ));
    }
    let qos = m.qos.unwrap_or(0);
    if qos > 1 {
        return Err(PlanError::invalid("--qos", format!("{qos} is not 0 or 1")));
    }
    if m.qos.is_some() && m.subscribe.is_none() {
        return Err(PlanError::invalid(
            "--qos",
            "is the QoS of --subscribe's subscription; give --subscribe 'topic/{{conn}}' too",
        ));
    }
    if let Some(topic) = &m.subscribe
        && (topic.is_empty() || topic.len() > 1024 || topic.contains('\0'))
    {
        return Err(PlanError::invalid(
            "--subscribe",
            "a topic filter of 1 to 1024 bytes without NUL, e.g. --subscribe 'devices/{{conn}}/cmd'",
        ));
    }
    let url = url::Url::parse(&a.target).ok();
    let user = url
        .as_ref()
        .map(|u| super::userinfo::percent_decode(u.username()))
        .filter(|u| !u.is_empty());
    let password = url
        .as_ref()
        .and_then(|u| u.password().map(super::userinfo::percent_decode))
        .map(SecretText::new);
    if password.is_some() && user.is_none() {
        return Err(PlanError::invalid(
            "TARGET",
            "MQTT sends a password only with a user name: mqtt://USER:PASSWORD@host:1883",
        ));
    }
    let websocket = over_ws.then(|| MqttWebSocket {
        path: super::target::target_path(&a.target),
        host: crate::head::Authority::new(&target.host, target.port, if target.scheme.is_tls() { 443 } else { 80 })
            .to_string(),
    });
    Ok(Some(MqttSpec {
        websocket,
        version,
        client_id,
        keepalive,
        // Without --session-expiry, every connection starts afresh.
        clean_start: m.session_expiry.is_none(),
        session_expiry: m.session_expiry,
        user,
        password,
        subscribe: m.subscribe.clone(),
        qos,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::{Protocol, StormArgs, StormPlan};
    use super::*;

    fn plan(target: &str, mqtt: MqttArgs) -> Result<StormPlan, PlanError> {
        StormPlan::from_args(StormArgs {
            target: target.into(),
            connections: Some(3),
            cores: 2,
            mqtt,
            ..StormArgs::default()
        })
    }

    fn spec(p: &StormPlan) -> &MqttSpec {
        match &p.protocol {
            Some(Protocol::Mqtt(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_and_credentials_from_the_url() {
        let p = plan("mqtt://dev:s%40cret@127.0.0.1", MqttArgs::default()).unwrap();
        assert_eq!(p.target.port, 1883);
        assert_eq!(p.target.url, "mqtt://dev:***@127.0.0.1");
        let m = spec(&p);
        assert_eq!(m.version, MqttVersion::V311);
        assert_eq!(m.client_id, DEFAULT_CLIENT_ID);
        assert_eq!(m.keepalive, DEFAULT_KEEPALIVE);
        assert!(m.clean_start);
        assert_eq!(m.user.as_deref(), Some("dev"));
        assert_eq!(m.password.as_ref().map(SecretText::expose), Some("s@cret"));
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("s@cret") && !json.contains("s%40cret"), "{json}");
        let tls = plan("mqtts://127.0.0.1", MqttArgs::default()).unwrap();
        assert_eq!(tls.target.port, 8883);
        assert!(tls.tls.is_some());
        assert!(tls.ring_refuses().is_some());
    }

    #[test]
    fn ws_with_protocol_mqtt_is_mqtt_over_websocket() {
        let over = |target: &str| {
            StormPlan::from_args(StormArgs {
                target: target.into(),
                connections: Some(3),
                cores: 2,
                protocol: Some("mqtt".into()),
                mqtt: MqttArgs {
                    version: Some("5".into()),
                    ..MqttArgs::default()
                },
                ..StormArgs::default()
            })
        };
        let p = over("ws://u:s3cr3t@127.0.0.1:9001/mqtt").unwrap();
        assert_eq!(p.target.url, "ws://u:***@127.0.0.1:9001/mqtt");
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("s3cr3t"), "{json}");
        let m = spec(&p);
        assert_eq!(m.password.as_ref().map(SecretText::expose), Some("s3cr3t"));
        assert_eq!(m.version, MqttVersion::V5);
        assert_eq!(m.user.as_deref(), Some("u"));
        let ws = m.websocket.as_ref().expect("over WebSocket");
        assert_eq!((ws.path.as_str(), ws.host.as_str()), ("/mqtt", "127.0.0.1:9001"));
        let tls = over("wss://localhost/mqtt").unwrap();
        assert!(tls.tls.is_some());
        assert_eq!(
            spec(&tls).websocket.as_ref().map(|w| w.host.as_str()),
            Some("localhost")
        );
        // Without --protocol mqtt, ws:// is a WebSocket storm, and the
        // MQTT flags say where they apply.
        let e = plan(
            "ws://127.0.0.1:9001/mqtt",
            MqttArgs {
                version: Some("5".into()),
                ..MqttArgs::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--protocol mqtt"), "{e}");
        assert_eq!(
            spec(&plan("mqtt://127.0.0.1", MqttArgs::default()).unwrap()).websocket,
            None
        );
    }

    #[test]
    fn flags_are_checked() {
        let bad = |m: MqttArgs, flag: &str| {
            let e = plan("mqtt://127.0.0.1:1883", m).unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        };
        bad(
            MqttArgs {
                version: Some("4.0".into()),
                ..MqttArgs::default()
            },
            "--mqtt-version",
        );
        bad(
            MqttArgs {
                qos: Some(2),
                subscribe: Some("t".into()),
                ..MqttArgs::default()
            },
            "--qos",
        );
        bad(
            MqttArgs {
                qos: Some(1),
                ..MqttArgs::default()
            },
            "--subscribe",
        );
        bad(
            MqttArgs {
                clean_start: true,
                session_expiry: Some(Duration::from_secs(60)),
                ..MqttArgs::default()
            },
            "--clean-start",
        );
        bad(
            MqttArgs {
                keepalive: Some(Duration::from_millis(1500)),
                ..MqttArgs::default()
            },
            "--keepalive",
        );
        let e = plan(
            "tcp://127.0.0.1:1883",
            MqttArgs {
                subscribe: Some("t".into()),
                ..MqttArgs::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--subscribe") && e.contains("mqtt://"), "{e}");
        let kept = plan(
            "mqtt://127.0.0.1:1883",
            MqttArgs {
                version: Some("5".into()),
                session_expiry: Some(Duration::from_secs(300)),
                ..MqttArgs::default()
            },
        )
        .unwrap();
        assert!(!spec(&kept).clean_start);
        assert_eq!(spec(&kept).version, MqttVersion::V5);
    }
}
