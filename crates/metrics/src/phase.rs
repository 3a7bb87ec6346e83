//! The timed phases of a unit of work. The names are part of the product:
//! users see them in reports, thresholds and result files.

/// One timed phase. See DESIGN.md, "What is measured", for the exact
/// start and end instant of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Intended start of a request or iteration → its actual start.
    ScheduleLag,
    /// `connect()` issued → TCP established.
    Connect,
    /// ClientHello written → handshake complete.
    Tls,
    /// First request byte written → last request byte written.
    Send,
    /// Last request byte written → first response byte read (TTFB).
    Wait,
    /// First response byte → last response byte.
    Receive,
    /// First request byte written → last response byte.
    Response,
    /// Intended (open loop) or actual (closed loop) start → last response byte.
    Latency,
    /// `connect()` issued → connection closed.
    Connection,
    /// Protocol handshake on an established connection (NATS: CONNECT sent →
    /// PONG; line protocols: first step → last expectation met).
    Handshake,
    /// A held connection's drop by the server → its re-established handshake.
    Reconnect,
    /// WebSocket: a ping sent (`--ping-every`) → its pong read; MQTT: a
    /// PINGREQ sent (every `--keepalive`) → its PINGRESP read.
    Pong,
    /// gRPC server streaming: first request byte written → the first
    /// message of the reply read whole.
    FirstMessage,
    /// gRPC server streaming: first request byte written → the last
    /// message of the reply read whole (before the trailers).
    LastMessage,
    /// gRPC bidirectional streaming: one reply message read whole → the
    /// next (every gap).
    MessageGap,
    /// MQTT: SUBSCRIBE sent → its SUBACK read.
    Subscribe,
    /// MQTT publish/subscribe: a message's send time, as its publisher
    /// stamped it in the payload → its PUBLISH read whole by a subscriber.
    Delivery,
    /// MQTT QoS 1: PUBLISH written → its PUBACK read.
    Puback,
    /// MQTT QoS 2: PUBLISH written → its PUBREC read.
    Pubrec,
    /// MQTT QoS 2: PUBREL written → its PUBCOMP read.
    Pubcomp,
    /// Event streams (`--sse`): the request's start (its intended start in
    /// an open loop) → the first event read whole.
    FirstEvent,
    /// Event streams: one event read whole → the next (every gap).
    EventGap,
    /// Event streams: first request byte written → the stream's end.
    Stream,
    /// LLM streams (`--llm`): the request's start (intended, in an open
    /// loop) → the first output token read (time to first token).
    Ttft,
    /// LLM streams: one token's chunk read → the next token's (inter-token
    /// latency, every gap).
    Itl,
    /// MQTT over WebSocket: the HTTP Upgrade written → its 101 read (before
    /// CONNECT → CONNACK, the `handshake`).
    Upgrade,
}

impl Phase {
    /// Every phase, in report order.
    pub const ALL: [Phase; 26] = [
        Phase::ScheduleLag,
        Phase::Connect,
        Phase::Tls,
        Phase::Send,
        Phase::Wait,
        Phase::Receive,
        Phase::Response,
        Phase::Latency,
        Phase::Connection,
        Phase::Handshake,
        Phase::Reconnect,
        Phase::Pong,
        Phase::FirstMessage,
        Phase::LastMessage,
        Phase::MessageGap,
        Phase::Subscribe,
        Phase::Delivery,
        Phase::Puback,
        Phase::Pubrec,
        Phase::Pubcomp,
        Phase::FirstEvent,
        Phase::EventGap,
        Phase::Stream,
        Phase::Ttft,
        Phase::Itl,
        Phase::Upgrade,
    ];

    /// Number of phases; recorders index arrays with [`Phase::index`].
    pub const COUNT: usize = Self::ALL.len();

    /// The user-visible name, e.g. `schedule_lag`.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::ScheduleLag => "schedule_lag",
            Phase::Connect => "connect",
            Phase::Tls => "tls",
            Phase::Send => "send",
            Phase::Wait => "wait",
            Phase::Receive => "receive",
            Phase::Response => "response",
            Phase::Latency => "latency",
            Phase::Connection => "connection",
            Phase::Handshake => "handshake",
            Phase::Reconnect => "reconnect",
            Phase::Pong => "pong",
            Phase::FirstMessage => "first_message",
            Phase::LastMessage => "last_message",
            Phase::MessageGap => "message_gap",
            Phase::Subscribe => "subscribe",
            Phase::Delivery => "delivery",
            Phase::Puback => "puback",
            Phase::Pubrec => "pubrec",
            Phase::Pubcomp => "pubcomp",
            Phase::FirstEvent => "first_event",
            Phase::EventGap => "event_gap",
            Phase::Stream => "stream",
            Phase::Ttft => "ttft",
            Phase::Itl => "itl",
            Phase::Upgrade => "upgrade",
        }
    }

    /// The phase with this user-visible name.
    pub fn from_name(name: &str) -> Option<Phase> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Position in [`Phase::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indexes_match_order() {
        for (i, p) in Phase::ALL.into_iter().enumerate() {
            assert_eq!(p.index(), i);
            assert_eq!(Phase::from_name(p.name()), Some(p));
        }
        assert_eq!(Phase::from_name("nope"), None);
    }
}
