//! An MQTT storm's session as the plan compiled it (data only: the
//! handshake and the hold run in `super`).

use std::time::Duration;

use super::codec::Version;

/// An MQTT storm's session, ready to run.
#[derive(Debug)]
pub(crate) struct Spec {
    pub version: Version,
    /// The client identifier, `{{conn}}` standing for the connection's number.
    pub client_id: String,
    pub clean_start: bool,
    /// Announced in CONNECT; a PINGREQ this often while held (zero: none).
    pub keepalive: Duration,
    /// MQTT 5's Session Expiry Interval, in seconds.
    pub session_expiry: Option<u32>,
    pub user: Option<String>,
    /// The password (its `Debug` is redacted).
    pub password: Option<throng_plan::SecretText>,
    /// A topic filter to subscribe to once connected (`{{conn}}` as above), and its QoS.
    pub subscribe: Option<(String, u8)>,
    /// Over WebSocket: the upgrade's path and `Host`.
    pub websocket: Option<(String, String)>,
}

impl Spec {
    /// From the validated plan's session.
    pub(crate) fn new(m: &throng_plan::MqttSpec) -> Spec {
        Spec {
            version: match m.version {
                throng_plan::MqttVersion::V5 => Version::V5,
                _ => Version::V311,
            },
            client_id: m.client_id.clone(),
            clean_start: m.clean_start,
            keepalive: m.keepalive,
            // The plan checked that it fits 32 bits.
            session_expiry: m.session_expiry.map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX)),
            user: m.user.clone(),
            password: m.password.clone(),
            subscribe: m.subscribe.clone().map(|t| (t, m.qos)),
            websocket: m.websocket.as_ref().map(|w| (w.path.clone(), w.host.clone())),
        }
    }

    /// The keep-alive in CONNECT's whole seconds (the plan checked the range).
    pub(crate) fn keepalive_secs(&self) -> u16 {
        u16::try_from(self.keepalive.as_secs()).unwrap_or(u16::MAX)
    }
}

/// `template` with every `{{conn}}` replaced by `conn`.
pub(crate) fn render(template: &str, conn: u64) -> String {
    if template.contains(throng_plan::CONN_PLACEHOLDER) {
        template.replace(throng_plan::CONN_PLACEHOLDER, &conn.to_string())
    } else {
        template.to_string()
    }
}
