//! What a protocol handshake produced (shared by the line protocols and
//! WebSocket's upgrade).

use std::time::{Duration, Instant};

use throng_metrics::Handshake;

use crate::transport::Transport;

/// What a protocol handshake produced.
pub(crate) struct Done {
    pub stream: Transport,
    /// Handshake time (CONNECT sent → PONG; first step → last expectation).
    pub handshake: Duration,
    /// A TLS upgrade (NATS `tls_required`), when one happened.
    pub tls: Option<(Duration, Handshake, Instant)>,
    /// Round trips of message exchanges after the handshake (WebSocket's
    /// send → expected message), recorded as `response`.
    pub exchanges: Vec<Duration>,
    /// MQTT: SUBSCRIBE sent → its SUBACK read, when the plan subscribes.
    pub subscribe: Option<Duration>,
    /// MQTT over WebSocket: the upgrade written → its 101 read.
    pub upgrade: Option<Duration>,
}
