//! The faults themselves: names, kinds and the limits they keep.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Longest a fault keeps one connection, whatever the client does.
pub const HOLD_LIMIT: Duration = Duration::from_secs(60);
/// Longest the lab's MQTT broker ([`Fault::MqttBroker`], and
/// [`Fault::MqttNoPingresp`]) keeps one session: long enough for a storm
/// with the usual 30 s or 60 s keep-alive to have several PINGREQs
/// answered, still bounded.
pub const SESSION_LIMIT: Duration = Duration::from_secs(600);
/// Headers sent by [`Fault::ManyHeaders`].
pub const MANY_HEADERS: usize = 100_000;
/// Body length advertised (and sent, as fast as the client reads) by
/// [`Fault::HugeBody`].
pub const HUGE_BODY: u64 = 1 << 30;
/// Pause between two bytes of [`Fault::Trickle`].
pub const TRICKLE_EVERY: Duration = Duration::from_millis(100);
/// How long [`Fault::CloseEveryOther`] holds the connections it closes.
pub const CLOSE_AFTER: Duration = Duration::from_secs(1);

/// What the fault server does with each connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Reads the request, never answers.
    NeverAnswer,
    /// Sends a head announcing 1000 bytes of body, then nothing.
    StallBody,
    /// A valid response, one byte every 100 ms.
    Trickle,
    /// A chunked body that never ends.
    EndlessChunks,
    /// A head that never ends.
    EndlessHeaders,
    /// 100,000 headers, then an empty body.
    ManyHeaders,
    /// `Content-Length: 1073741824`, and the bytes, written as the client reads.
    HugeBody,
    /// Binary bytes that are not HTTP, then close.
    Garbage,
    /// An HTTP/0.9 answer: a body with no status line, then close.
    Http09,
    /// `Content-Length: -12`.
    BadContentLength,
    /// A chunked body whose chunk size is not hexadecimal.
    BadChunkSize,
    /// Reads the request, resets the connection (RST).
    RstBeforeResponse,
    /// Half a head, then RST.
    RstMidHeaders,
    /// The head and 100 of 1000 body bytes, then RST.
    RstMidBody,
    /// Reads the request, closes the connection (FIN).
    FinBeforeResponse,
    /// The head and 100 of 1000 body bytes, then FIN.
    FinMidBody,
    /// A valid 200 with `Connection: close`, then FIN, for every request.
    ConnectionCloseEverywhere,
    /// `100 Continue`, then a valid 200, for every request.
    Status100Then200,
    /// `101 Switching Protocols`; whatever the client sends afterwards is
    /// read and never answered (it is another protocol now).
    Status101,
    /// Accepts the connection and closes it at once, before reading.
    ListenerCloses,
    /// Reads and drops whatever comes, never answers; closes every second
    /// connection a server thread accepts (FIN) after [`CLOSE_AFTER`] and
    /// holds the others until the client closes them: held connections
    /// the server closes, in a number known in advance.
    CloseEveryOther,
    /// Reads the ClientHello, answers with a fatal `handshake_failure` alert.
    TlsAlert,
    /// Reads the ClientHello, answers with bytes that are not TLS.
    TlsGarbage,
    /// Reads the ClientHello, never answers.
    TlsStall,
    /// Greets a NATS client with a line that is not NATS.
    NatsGarbage,
    /// Accepts a NATS client and never sends INFO.
    NatsNoInfo,
    /// Sends INFO, then answers CONNECT with `-ERR 'Authorization Violation'`.
    NatsAuthError,
    /// Sends INFO; after CONNECT, a PING before the PONG that answers it —
    /// what a nats-server busy checking bcrypt passwords does.
    NatsEarlyPing,
    /// Reads an MQTT CONNECT, never answers.
    MqttNoConnack,
    /// Answers CONNECT with CONNACK "server unavailable" (3; 0x88 in MQTT 5).
    MqttConnackRefused,
    /// Answers CONNECT with CONNACK "bad user name or password" (4; 0x86
    /// in MQTT 5), as brokers that say so do (mosquitto says "not
    /// authorized").
    MqttBadPassword,
    /// Answers CONNECT with a remaining length that runs into a fifth byte.
    MqttBadLength,
    /// Answers CONNECT with a CONNACK claiming 200 MiB.
    MqttOversized,
    /// Answers CONNECT with DISCONNECT (server shutting down, 0x8B).
    MqttDisconnectAtConnect,
    /// Accepts CONNECT; after [`super::mqtt::DISCONNECT_AFTER`], DISCONNECT
    /// (0x8B) to an MQTT 5 client, and the close.
    MqttDisconnect,
    /// Answers CONNECT with CONNACK "not authorized" (5; 0x87 in MQTT 5).
    MqttNotAuthorized,
    /// Accepts CONNECT, then reads and drops every packet: PINGREQs are
    /// never answered.
    MqttNoPingresp,
    /// Answers CONNECT with bytes that are not MQTT (a packet of the
    /// reserved type 0), then reads and drops whatever comes.
    MqttGarbage,
    /// Accepts CONNECT, then a PUBLISH announcing the largest remaining
    /// length MQTT allows (256 MiB - 1), and its bytes as fast as the
    /// client reads them.
    MqttHugePublish,
    /// Not a fault: a minimal broker, CONNACK to CONNECT, PINGRESP to
    /// PINGREQ, the close after DISCONNECT; every other packet is skipped
    /// unread. A session costs its socket and a small task, so one lab
    /// holds many of them (each up to [`SESSION_LIMIT`]).
    MqttBroker,
    /// HTTP/2 (h2c): every second stream on a connection is reset with
    /// RST_STREAM INTERNAL_ERROR; the others are answered 200.
    H2RstStream,
    /// HTTP/2 (h2c): every second stream is refused (RST_STREAM
    /// REFUSED_STREAM); the others are answered 200.
    H2RefusedStream,
    /// HTTP/2 (h2c): answers [`crate::h2fault::GOAWAY_AFTER`] - 1 streams
    /// of a connection; on the next, GOAWAY (NO_ERROR) and the close: that
    /// stream and any opened after it are cut off.
    H2Goaway,
    /// HTTP/2 (h2c): a 16-byte initial stream window for request bodies,
    /// and 256 KiB response bodies (past the client's default window, which
    /// it must give back as it reads).
    H2TinyWindow,
    /// HTTP/2 (h2c): SETTINGS_MAX_CONCURRENT_STREAMS 1, each answer after
    /// 2 ms.
    H2MaxStreams1,
    /// HTTP/2 (h2c): SETTINGS_MAX_CONCURRENT_STREAMS 0, never raised: the
    /// server allows no stream at all.
    H2NoStreams,
    /// HTTP/2 (h2c): `content-length: 10`, then 3 bytes and END_STREAM.
    H2ShortBody,
    /// HTTP/2 (h2c): `content-length: 3`, then 10 bytes and END_STREAM.
    H2LongBody,
    /// HTTP/2 (h2c): `103 Early Hints`, then 200.
    H2EarlyHints,
    /// HTTP/2 (h2c): every second stream accepted and never answered (held
    /// until the connection ends); the others answered 200.
    H2Stall,
    /// HTTP/2 (h2c): every second stream answered 200 with 300 KiB of
    /// header fields (past a client's 256 KiB header list); the others 200.
    H2HugeHeaders,
    /// gRPC (h2c): each call answered OK with one message that is not
    /// protobuf (a field number 0).
    GrpcNotProtobuf,
    /// gRPC (h2c): each call answered 200 `content-type: text/html`.
    GrpcHtml,
    /// gRPC (h2c): a message prefix claiming 4 GiB, then 10 bytes, then OK.
    GrpcHugePrefix,
    /// gRPC (h2c): half a message (its prefix says 20 bytes, 8 come), then OK.
    GrpcHalfMessage,
    /// gRPC (h2c): a message flagged compressed, no `grpc-encoding`.
    GrpcCompressed,
    /// gRPC (h2c): a message prefix with reserved flag bits set (0x02).
    GrpcReservedFlags,
    /// gRPC (h2c): two messages, then OK (for a unary call).
    GrpcTwoMessages,
    /// gRPC (h2c): no message, then OK (for a unary call).
    GrpcNoMessage,
}

/// Which protocol a fault speaks (or breaks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// HTTP/1.1, inside TLS when the server has a certificate.
    Http,
    /// The TLS handshake itself (no certificate needed).
    Tls,
    /// The NATS greeting.
    Nats,
    /// An MQTT broker's answers to CONNECT.
    Mqtt,
    /// HTTP/2 with prior knowledge (h2c).
    H2,
}

impl Fault {
    /// Every fault, in the order of the documentation.
    pub const ALL: [Fault; 59] = [
        Fault::NeverAnswer,
        Fault::StallBody,
        Fault::Trickle,
        Fault::EndlessChunks,
        Fault::EndlessHeaders,
        Fault::ManyHeaders,
        Fault::HugeBody,
        Fault::Garbage,
        Fault::Http09,
        Fault::BadContentLength,
        Fault::BadChunkSize,
        Fault::RstBeforeResponse,
        Fault::RstMidHeaders,
        Fault::RstMidBody,
        Fault::FinBeforeResponse,
        Fault::FinMidBody,
        Fault::ConnectionCloseEverywhere,
        Fault::Status100Then200,
        Fault::Status101,
        Fault::ListenerCloses,
        Fault::CloseEveryOther,
        Fault::TlsAlert,
        Fault::TlsGarbage,
        Fault::TlsStall,
        Fault::NatsGarbage,
        Fault::NatsNoInfo,
        Fault::NatsAuthError,
        Fault::NatsEarlyPing,
        Fault::MqttNoConnack,
        Fault::MqttConnackRefused,
        Fault::MqttBadPassword,
        Fault::MqttBadLength,
        Fault::MqttOversized,
        Fault::MqttDisconnectAtConnect,
        Fault::MqttDisconnect,
        Fault::MqttNotAuthorized,
        Fault::MqttNoPingresp,
        Fault::MqttGarbage,
        Fault::MqttHugePublish,
        Fault::MqttBroker,
        Fault::H2RstStream,
        Fault::H2RefusedStream,
        Fault::H2Goaway,
        Fault::H2TinyWindow,
        Fault::H2MaxStreams1,
        Fault::H2NoStreams,
        Fault::H2ShortBody,
        Fault::H2LongBody,
        Fault::H2EarlyHints,
        Fault::H2Stall,
        Fault::H2HugeHeaders,
        Fault::GrpcNotProtobuf,
        Fault::GrpcHtml,
        Fault::GrpcHugePrefix,
        Fault::GrpcHalfMessage,
        Fault::GrpcCompressed,
        Fault::GrpcReservedFlags,
        Fault::GrpcTwoMessages,
        Fault::GrpcNoMessage,
    ];

    /// The name `--fault` takes.
    pub fn name(self) -> &'static str {
        match self {
            Fault::NeverAnswer => "never-answer",
            Fault::StallBody => "stall-body",
            Fault::Trickle => "trickle",
            Fault::EndlessChunks => "endless-chunks",
            Fault::EndlessHeaders => "endless-headers",
            Fault::ManyHeaders => "many-headers",
            Fault::HugeBody => "huge-body",
            Fault::Garbage => "garbage",
            Fault::Http09 => "http09",
            Fault::BadContentLength => "bad-content-length",
            Fault::BadChunkSize => "bad-chunk-size",
            Fault::RstBeforeResponse => "rst-before-response",
            Fault::RstMidHeaders => "rst-mid-headers",
            Fault::RstMidBody => "rst-mid-body",
            Fault::FinBeforeResponse => "fin-before-response",
            Fault::FinMidBody => "fin-mid-body",
            Fault::ConnectionCloseEverywhere => "connection-close-everywhere",
            Fault::Status100Then200 => "status-100-then-200",
            Fault::Status101 => "status-101",
            Fault::ListenerCloses => "listener-closes",
            Fault::CloseEveryOther => "close-every-other",
            Fault::TlsAlert => "tls-alert",
            Fault::TlsGarbage => "tls-garbage",
            Fault::TlsStall => "tls-stall",
            Fault::NatsGarbage => "nats-garbage",
            Fault::NatsNoInfo => "nats-no-info",
            Fault::NatsAuthError => "nats-auth-error",
            Fault::NatsEarlyPing => "nats-early-ping",
            Fault::MqttNoConnack => "mqtt-no-connack",
            Fault::MqttConnackRefused => "mqtt-connack-refused",
            Fault::MqttBadPassword => "mqtt-bad-password",
            Fault::MqttBadLength => "mqtt-bad-length",
            Fault::MqttOversized => "mqtt-oversized",
            Fault::MqttDisconnectAtConnect => "mqtt-disconnect-at-connect",
            Fault::MqttDisconnect => "mqtt-disconnect",
            Fault::MqttNotAuthorized => "mqtt-not-authorized",
            Fault::MqttNoPingresp => "mqtt-no-pingresp",
            Fault::MqttGarbage => "mqtt-garbage",
            Fault::MqttHugePublish => "mqtt-huge-publish",
            Fault::MqttBroker => "mqtt-broker",
            Fault::H2RstStream => "h2-rst-stream",
            Fault::H2RefusedStream => "h2-refused-stream",
            Fault::H2Goaway => "h2-goaway",
            Fault::H2TinyWindow => "h2-tiny-window",
            Fault::H2MaxStreams1 => "h2-max-streams-1",
            Fault::H2NoStreams => "h2-no-streams",
            Fault::H2ShortBody => "h2-short-body",
            Fault::H2LongBody => "h2-long-body",
            Fault::H2EarlyHints => "h2-early-hints",
            Fault::H2Stall => "h2-stall",
            Fault::H2HugeHeaders => "h2-huge-headers",
            Fault::GrpcNotProtobuf => "grpc-not-protobuf",
            Fault::GrpcHtml => "grpc-html",
            Fault::GrpcHugePrefix => "grpc-huge-prefix",
            Fault::GrpcHalfMessage => "grpc-half-message",
            Fault::GrpcCompressed => "grpc-compressed",
            Fault::GrpcReservedFlags => "grpc-reserved-flags",
            Fault::GrpcTwoMessages => "grpc-two-messages",
            Fault::GrpcNoMessage => "grpc-no-message",
        }
    }

    /// Longest it keeps one connection: [`SESSION_LIMIT`] for the MQTT
    /// broker's sessions, [`HOLD_LIMIT`] for every fault.
    pub fn hold_limit(self) -> Duration {
        match self {
            Fault::MqttBroker | Fault::MqttNoPingresp => SESSION_LIMIT,
            _ => HOLD_LIMIT,
        }
    }

    /// The protocol it speaks.
    pub fn kind(self) -> FaultKind {
        match self {
            Fault::TlsAlert | Fault::TlsGarbage | Fault::TlsStall => FaultKind::Tls,
            Fault::NatsGarbage | Fault::NatsNoInfo | Fault::NatsAuthError | Fault::NatsEarlyPing => FaultKind::Nats,
            Fault::MqttNoConnack
            | Fault::MqttConnackRefused
            | Fault::MqttBadPassword
            | Fault::MqttBadLength
            | Fault::MqttOversized
            | Fault::MqttDisconnectAtConnect
            | Fault::MqttDisconnect
            | Fault::MqttNotAuthorized
            | Fault::MqttNoPingresp
            | Fault::MqttGarbage
            | Fault::MqttHugePublish
            | Fault::MqttBroker => FaultKind::Mqtt,
            Fault::H2RstStream
            | Fault::H2RefusedStream
            | Fault::H2Goaway
            | Fault::H2TinyWindow
            | Fault::H2MaxStreams1
            | Fault::H2NoStreams
            | Fault::H2ShortBody
            | Fault::H2LongBody
            | Fault::H2EarlyHints
            | Fault::H2Stall
            | Fault::H2HugeHeaders
            | Fault::GrpcNotProtobuf
            | Fault::GrpcHtml
            | Fault::GrpcHugePrefix
            | Fault::GrpcHalfMessage
            | Fault::GrpcCompressed
            | Fault::GrpcReservedFlags
            | Fault::GrpcTwoMessages
            | Fault::GrpcNoMessage => FaultKind::H2,
            _ => FaultKind::Http,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--fault` name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown fault '{given}': use one of {}", Fault::ALL.map(Fault::name).join(", "))]
pub struct UnknownFault {
    given: String,
}

impl FromStr for Fault {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFault { given: s.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for f in Fault::ALL {
            assert_eq!(f.name().parse::<Fault>().unwrap(), f);
        }
        let mut names: Vec<_> = Fault::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len(), "names are unique");
        let e = "nope".parse::<Fault>().unwrap_err().to_string();
        assert!(e.starts_with("unknown fault 'nope': use one of never-answer, "), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_broker_session_outlasts_several_thirty_second_keepalives_and_faults_stay_short() {
        // A client pings at its keep-alive; a broker may wait 1.5 of it.
        // Two answered pings at 30 s need more than 60 s of session.
        let keepalive = Duration::from_secs(30);
        for f in [Fault::MqttBroker, Fault::MqttNoPingresp] {
            assert!(f.hold_limit() >= keepalive * 4, "{f}: {:?}", f.hold_limit());
            assert!(f.hold_limit() <= Duration::from_secs(3600), "{f}: bounded");
        }
        for f in Fault::ALL
            .into_iter()
            .filter(|f| !matches!(f, Fault::MqttBroker | Fault::MqttNoPingresp))
        {
            assert_eq!(f.hold_limit(), HOLD_LIMIT, "{f}");
        }
    }
}
