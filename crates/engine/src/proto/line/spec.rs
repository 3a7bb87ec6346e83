//! The protocol a storm speaks once connected, as the plan compiled it
//! (data only: the handshakes run in `super`): NATS's CONNECT, line steps,
//! WebSocket's steps.

use std::time::Duration;

/// The protocol a storm speaks, ready to run (regexes compiled, CONNECT
/// built once).
#[derive(Debug)]
pub(crate) enum ProtocolSpec {
    /// NATS with this CONNECT line (and PING) to send. `strict`: the
    /// first line after CONNECT must be PONG, as nats.go requires.
    Nats { connect: Vec<u8>, strict: bool },
    /// Line steps.
    Lines { steps: Vec<Step>, step_timeout: Duration },
    /// WebSocket: the upgrade, then message steps.
    WebSocket(crate::proto::ws::spec::Spec),
    /// MQTT: CONNECT (and SUBSCRIBE), then held with PINGREQs.
    Mqtt(crate::proto::mqtt::spec::Spec),
}

/// One compiled line step.
#[derive(Debug)]
pub(crate) enum Step {
    Send(Vec<u8>),
    Expect(regex::bytes::Regex),
}

impl ProtocolSpec {
    /// True when a held connection must keep answering (NATS PINGs), or
    /// speaks itself (MQTT's PINGREQ), so its TLS state must stay.
    pub(crate) fn answers_while_holding(&self) -> bool {
        matches!(
            self,
            ProtocolSpec::Nats { .. } | ProtocolSpec::WebSocket(_) | ProtocolSpec::Mqtt(_)
        )
    }
}

/// Builds the CONNECT line NATS clients send, with PING after it.
pub(crate) fn nats_connect(user: Option<&str>, secret: Option<&str>, token: bool, tls: bool) -> Vec<u8> {
    let mut o = serde_json::json!({
        "verbose": false,
        "pedantic": false,
        "tls_required": tls,
        "name": "throng",
        "lang": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": 1,
    });
    match (user, secret, token) {
        (_, Some(t), true) => o["auth_token"] = t.into(),
        (Some(u), Some(p), false) => {
            o["user"] = u.into();
            o["pass"] = p.into();
        }
        _ => {}
    }
    format!("CONNECT {o}\r\nPING\r\n").into_bytes()
}
