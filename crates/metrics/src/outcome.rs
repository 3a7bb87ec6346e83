//! The error taxonomy, and outcome counts that always balance.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hist::HistError;

/// `*into += n`, or [`HistError::Overflow`] naming `what`.
pub(crate) fn add(into: &mut u64, n: u64, what: &str) -> Result<(), HistError> {
    *into = into
        .checked_add(n)
        .ok_or_else(|| HistError::Overflow(format!("the counts of '{what}'")))?;
    Ok(())
}

/// Adds every count of `from` into `into` by key ([`add`]).
pub(crate) fn add_all<K: Ord + Clone + std::fmt::Display>(
    into: &mut BTreeMap<K, u64>,
    from: &BTreeMap<K, u64>,
    what: &str,
) -> Result<(), HistError> {
    for (k, &n) in from {
        add(into.entry(k.clone()).or_default(), n, &format!("{what}.{k}"))?;
    }
    Ok(())
}

/// Why a unit of work (connection, request) did not end `ok`.
///
/// The classes follow httperf's and extend them; their names (see
/// [`ErrorClass::name`]) appear in reports, result files and thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorClass {
    /// `connect()` did not complete within the timeout.
    TimeoutConnect,
    /// The TLS handshake did not complete within the timeout
    /// (`tls.handshake_timeout`).
    TimeoutTls,
    /// The response did not complete within the timeout.
    TimeoutResponse,
    /// Nothing listens there (ECONNREFUSED).
    Refused,
    /// The peer reset the connection (ECONNRESET, EPIPE).
    Reset,
    /// The peer closed the connection before the response was complete.
    Eof,
    /// No file descriptor could be had (EMFILE, ENFILE).
    FdUnavailable,
    /// No local address or port could be had (EADDRNOTAVAIL).
    AddrUnavailable,
    /// The response was malformed.
    Protocol,
    /// A response arrived but its status or a check said no.
    CheckFailed,
    /// Still in flight when the run ended.
    Interrupted,
    /// A protocol handshake got no answer within the timeout.
    TimeoutHandshake,
    /// The server refused the credentials (NATS `-ERR 'Authorization Violation'`).
    AuthFailed,
    /// The server answered a protocol handshake with an error, by reason
    /// (e.g. `maximum_connections_exceeded`), or a line protocol's
    /// expectation was not met (`unexpected_reply`).
    ProtocolError(&'static str),
    /// A TLS failure, by alert or cause (e.g. `bad_certificate`).
    Tls(&'static str),
    /// The proxy did not open the way to the target, by why:
    /// `unreachable` (its TCP connect failed), `auth_required` (407),
    /// `forbidden` (403), `bad_gateway` (5xx: it could not reach the
    /// target), `refused` (another status), `protocol` (not an HTTP
    /// answer), `closed` (it closed before answering), `timeout` (it
    /// took the connection but did not answer CONNECT within the timeout).
    Proxy(&'static str),
    /// A redirect that could not be followed: `too_many` (more hops than
    /// the request may follow), `bad_location` (no usable `Location`),
    /// `scheme` (to an https origin from a run with no TLS set up).
    Redirect(&'static str),
    /// Any other OS error, by errno name (e.g. `ENETUNREACH`).
    Other(&'static str),
    /// An HTTP/2 failure: `refused_stream`, `goaway`, `rst_stream.CODE`,
    /// `protocol`, `flow_control`, `not_negotiated`, `stream_limit`.
    H2(&'static str),
    /// A QUIC failure: `handshake_timeout`, `idle_timeout`,
    /// `stateless_reset`, `closed.CODE` (a transport error code), …
    Quic(&'static str),
    /// An HTTP/3 failure: `closed.CODE` (the connection, by application
    /// error code), `stream_reset.CODE`, `goaway`, `protocol`, `header_too_big`,
    /// `stream_limit`.
    H3(&'static str),
    /// WebSocket: the server answered the upgrade with this status, not 101
    /// (`ws.upgrade_refused.403`).
    WsUpgradeRefused(u16),
    /// WebSocket: the server closed with this code before the socket was
    /// established and its messages exchanged (`ws.closed.1008`).
    WsClosed(u16),
    /// WebSocket: a malformed upgrade answer (a wrong Sec-WebSocket-Accept)
    /// or frame (`ws.protocol`).
    WsProtocol,
    /// WebSocket: the server upgraded without the subprotocol asked for
    /// (MQTT over WebSocket asks for `mqtt`): another, or none
    /// (`ws.subprotocol_refused`).
    WsSubprotocol,
    /// A gRPC call's failure: `deadline_exceeded` (`--deadline` expired),
    /// or a reply a gRPC client rejects: `content_type`, `framing`,
    /// `compressed`, `decode`, `cardinality`.
    Grpc(&'static str),
    /// MQTT: `protocol` (a malformed packet, or one out of turn),
    /// `packet_too_large` (a packet over the most a storm reads), and the
    /// broker's refusals of CONNECT and SUBSCRIBE by the name of their
    /// return or reason code: `connack.REASON` (`connack.not_authorized`),
    /// `suback.REASON`. (One `&str`, not two: the class travels in every
    /// connection slot.)
    Mqtt(&'static str),
    /// MQTT 5: the server sent DISCONNECT with this reason code before the
    /// connection was established (`mqtt.disconnected.135`).
    MqttDisconnected(u8),
    /// An event stream's failure: `stalled` (no event within `--timeout`),
    /// `too_large` (a line or an event past the reader's limit).
    Sse(&'static str),
}

impl ErrorClass {
    /// The user-visible name: `timeout.connect`, `refused`, `tls.unknown_ca`,
    /// `other.ENETUNREACH`, …
    pub fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            ErrorClass::TimeoutConnect => "timeout.connect",
            ErrorClass::TimeoutTls => "tls.handshake_timeout",
            ErrorClass::TimeoutResponse => "timeout.response",
            ErrorClass::Refused => "refused",
            ErrorClass::Reset => "reset",
            ErrorClass::Eof => "eof",
            ErrorClass::FdUnavailable => "fd_unavailable",
            ErrorClass::AddrUnavailable => "addr_unavailable",
            ErrorClass::Protocol => "protocol",
            ErrorClass::CheckFailed => "check_failed",
            ErrorClass::Interrupted => "interrupted",
            ErrorClass::TimeoutHandshake => "timeout.handshake",
            ErrorClass::AuthFailed => "auth_failed",
            ErrorClass::ProtocolError(reason) => return Cow::Owned(format!("protocol.{reason}")),
            ErrorClass::Tls(cause) => return Cow::Owned(format!("tls.{cause}")),
            ErrorClass::Proxy(why) => return Cow::Owned(format!("proxy.{why}")),
            ErrorClass::Redirect(why) => return Cow::Owned(format!("redirect.{why}")),
            ErrorClass::Other(errno) => return Cow::Owned(format!("other.{errno}")),
            ErrorClass::H2(what) => return Cow::Owned(format!("h2.{what}")),
            ErrorClass::Quic(what) => return Cow::Owned(format!("quic.{what}")),
            ErrorClass::H3(what) => return Cow::Owned(format!("h3.{what}")),
            ErrorClass::WsUpgradeRefused(status) => return Cow::Owned(format!("ws.upgrade_refused.{status}")),
            ErrorClass::WsClosed(code) => return Cow::Owned(format!("ws.closed.{code}")),
            ErrorClass::WsProtocol => "ws.protocol",
            ErrorClass::WsSubprotocol => "ws.subprotocol_refused",
            ErrorClass::Grpc(what) => return Cow::Owned(format!("grpc.{what}")),
            ErrorClass::Mqtt(what) => return Cow::Owned(format!("mqtt.{what}")),
            ErrorClass::MqttDisconnected(code) => return Cow::Owned(format!("mqtt.disconnected.{code}")),
            ErrorClass::Sse(what) => return Cow::Owned(format!("sse.{what}")),
        })
    }

    /// A sentence for reports: what this class means.
    pub fn describe(name: &str) -> &'static str {
        match name {
            "timeout.connect" => "connect() did not complete within --timeout",
            "tls.handshake_timeout" => "TLS handshake did not complete within --timeout",
            "timeout.handshake" => "the protocol handshake got no answer within --timeout",
            "auth_failed" => "the server refused the credentials",
            "mqtt.ack_timeout" => {
                "no acknowledgement (PUBACK, or PUBREC/PUBCOMP) came within --drain after the last message"
            }
            "mqtt.unacknowledged" => {
                "the acknowledgement (PUBACK, or PUBREC/PUBCOMP) was still in flight when publishing stopped: \
                 --drain 0s waits for none"
            }
            "mqtt.puback.refused" => {
                "the broker refused the QoS 1 message (an MQTT 5 PUBACK failure code: not authorized, …)"
            }
            "mqtt.pubrec.refused" => {
                "the broker refused the QoS 2 message (an MQTT 5 PUBREC failure code: not authorized, …)"
            }
            "mqtt.pubcomp.refused" => "the broker ended the QoS 2 exchange with a failure code in PUBCOMP",
            "protocol.unexpected_reply" => "a reply did not match what the step expected",
            "protocol.unexpected_ping" => {
                "NATS: the server sent PING before the PONG of CONNECT; nats.go fails here \
                 (nats: expected 'PONG', got 'PING')"
            }
            "protocol.unexpected_info" => {
                "NATS: the server sent an INFO update before the PONG of CONNECT; nats.go fails here"
            }
            "auth_failed_twice" => "authorization failed on two reconnects in a row: nats.go stops reconnecting",
            "hold_ended" => {
                "dropped by the server; the hold ended before a reconnect was due or succeeded (or the run stopped first)"
            }
            "max_reconnects" => "--max-reconnects attempts failed",
            "tls.unknown_ca" => "the server's certificate is not issued by a trusted CA (--cacert, or the system's)",
            "tls.bad_certificate" => "the server refused this side's certificate (a bad_certificate alert)",
            "tls.certificate_unknown" => "the server refused this side's certificate (a certificate_unknown alert)",
            "tls.certificate_required" => "the server requires a client certificate",
            "tls.certificate_expired" => "the server's certificate has expired",
            "tls.certificate_not_yet_valid" => "the server's certificate is not valid yet (its notBefore is ahead)",
            "tls.certificate_name_mismatch" => "the server's certificate is not valid for the host name (or --sni)",
            "tls.certificate_revoked" => "the server's certificate is revoked",
            "tls.bad_certificate_signature" => "a signature in the server's certificate chain does not verify",
            "tls.certificate_malformed" => "the server's certificate is not valid DER",
            "tls.certificate_invalid_purpose" => "the server's certificate is not for server authentication (EKU)",
            "tls.certificate_unsupported_algorithm" => {
                "the server's certificate is signed with an unsupported algorithm"
            }
            "tls.certificate_unknown_critical_extension" => {
                "the server's certificate has a critical extension this side does not know"
            }
            "tls.ca_used_as_end_entity" => {
                "the server's certificate is a CA certificate (CA:TRUE) that is not itself one of --cacert's"
            }
            "tls.end_entity_used_as_ca" => "a certificate in the server's chain issues others but is not a CA",
            "tls.certificate_path_too_long" => "the server's chain is longer than a CA's path length allows",
            "tls.certificate_name_constraint_violated" => "the server's certificate breaks a CA's name constraints",
            "tls.certificate_unsupported_version" => "the server's certificate has an unsupported X.509 version",
            "tls.certificate_chain_too_complex" => "the server's chain took too many steps to verify",
            "tls.certificate_invalid" => "the server's certificate was refused (another reason)",
            "timeout.response" => "response did not complete within --timeout",
            "refused" => "connection refused: nothing listening",
            "reset" => "connection reset by the peer",
            "eof" => "peer closed the connection before the response was complete",
            "fd_unavailable" => "out of file descriptors (EMFILE/ENFILE)",
            "addr_unavailable" => "out of local ports or addresses (EADDRNOTAVAIL)",
            "protocol" => "malformed response",
            "check_failed" => "response arrived but its status or a check failed",
            "interrupted" => "still in flight when the run ended",
            "proxy.unreachable" => {
                "the proxy could not be reached (its TCP connect failed): check -x/--proxy or HTTPS_PROXY/HTTP_PROXY"
            }
            "proxy.auth_required" => {
                "the proxy asked for credentials (407): give them in the proxy URL, http://USER:PASSWORD@HOST:PORT"
            }
            "proxy.forbidden" => "the proxy refused to open a tunnel to the target (403): check its allowed ports",
            "proxy.bad_gateway" => "the proxy could not reach the target (5xx to CONNECT)",
            "proxy.refused" => "the proxy answered CONNECT with another status than 2xx",
            "proxy.protocol" => "the proxy's answer to CONNECT was not HTTP",
            "proxy.closed" => "the proxy closed the connection before answering CONNECT",
            "proxy.timeout" => "the proxy took the connection but did not answer CONNECT within --timeout",
            "redirect.too_many" => "a redirect past the number the request may follow (--redirects, redirects:)",
            "redirect.bad_location" => {
                "a redirect with no Location, or one that is not an http(s) URL with a host and a port from 1 to 65535"
            }
            "redirect.scheme" => "a redirect from http to https in a run with no TLS set up",
            "h2.refused_stream" => {
                "HTTP/2: the server refused the stream (RST_STREAM REFUSED_STREAM) before processing it"
            }
            "h2.goaway" => "HTTP/2: the server's GOAWAY kept the request from being sent or cut it off",
            "h2.protocol" => "HTTP/2: a protocol error (a malformed frame, or PROTOCOL_ERROR from either side)",
            "h2.flow_control" => "HTTP/2: a flow-control error (FLOW_CONTROL_ERROR from either side)",
            "h2.stream_limit" => {
                "HTTP/2: the server allowed no stream within --timeout (SETTINGS_MAX_CONCURRENT_STREAMS 0, or \
                 lowered under the streams open): the request was never sent, and the connection was replaced"
            }
            "h3.stream_limit" => {
                "HTTP/3: the server's stream credit (MAX_STREAMS) was used up and not renewed within --timeout: \
                 the request was never sent, and the connection was replaced"
            }
            "grpc.deadline_exceeded" => {
                "gRPC: the call's --deadline expired (no answer in time, or DEADLINE_EXCEEDED from the server)"
            }
            "grpc.content_type" => {
                "gRPC: the reply is not application/grpc (an HTTP 200 with another content-type; grpc-go: UNKNOWN)"
            }
            "grpc.framing" => {
                "gRPC: a reply message's 5-byte prefix has reserved flag bits set, or the reply ends inside a \
                 prefix or a message (grpc-go: INTERNAL)"
            }
            "grpc.compressed" => {
                "gRPC: a reply message is flagged compressed but the reply names no grpc-encoding (grpc-go: INTERNAL)"
            }
            "grpc.decode" => "gRPC: a reply message is not protobuf's wire format (grpc-go: INTERNAL)",
            "grpc.encoding" => {
                "gRPC: a reply message is compressed in an encoding throng does not inflate (only gzip; grpc-go: \
                 UNIMPLEMENTED)"
            }
            "grpc.decompress" => {
                "gRPC: a gzip reply message does not inflate (corrupt, or cut short; grpc-go: INTERNAL)"
            }
            "grpc.too_large" => {
                "gRPC: a reply message claims more than 4 MiB or a gzip one inflates past 4 MiB, the largest \
                 message a client takes (grpc-go: RESOURCE_EXHAUSTED)"
            }
            "grpc.cardinality" => {
                "gRPC: a unary call answered OK with no message, or with more than one (grpc-go: INTERNAL)"
            }
            "sse.stalled" => "event stream: no event arrived within --timeout (the stream stalled)",
            "sse.too_large" => "event stream: a line or an event's data was longer than the reader holds (1 MiB)",
            "h2.not_negotiated" => "HTTP/2: the server did not negotiate h2 in the TLS handshake (ALPN)",
            "ws.protocol" => {
                "WebSocket: a malformed answer to the upgrade (e.g. a wrong Sec-WebSocket-Accept) or a malformed frame"
            }
            "ws.subprotocol_refused" => {
                "WebSocket: the server upgraded without the subprotocol asked for (MQTT over WebSocket asks for \
                 'mqtt'): it named another, or none"
            }
            n if n.starts_with("ws.upgrade_refused.") => {
                "WebSocket: the server answered the upgrade with another status than 101 (by status)"
            }
            n if n.starts_with("ws.closed.") => {
                "WebSocket: the server closed the socket (a close frame, by code; 1005: none given) before its \
                 messages were exchanged"
            }
            "mqtt.ping_timeout" => {
                "MQTT: a held connection's PINGREQ got no PINGRESP within the keep-alive; this side closed it"
            }
            "mqtt.protocol" => "MQTT: a malformed packet (e.g. its remaining length), or one out of turn",
            "mqtt.packet_too_large" => "MQTT: the server sent a packet larger than a storm reads (256 KiB)",
            "mqtt.connack.unacceptable_protocol_version" | "mqtt.connack.unsupported_protocol_version" => {
                "MQTT: the broker refused the protocol version (--mqtt-version)"
            }
            "mqtt.connack.identifier_rejected" | "mqtt.connack.client_identifier_not_valid" => {
                "MQTT: the broker refused the client identifier (--client-id)"
            }
            "mqtt.connack.server_unavailable" => "MQTT: the broker is unavailable (CONNACK 3, or 0x88 in MQTT 5)",
            "mqtt.connack.bad_username_or_password" => {
                "MQTT: the broker refused the user name or password (CONNACK 4, or 0x86 in MQTT 5)"
            }
            "mqtt.connack.not_authorized" => "MQTT: the broker refused the client (CONNACK 5, or 0x87 in MQTT 5)",
            n if n.starts_with("mqtt.connack.") => "MQTT: the broker refused CONNECT (by its CONNACK reason code)",
            n if n.starts_with("mqtt.suback.") => "MQTT: the broker refused the subscription (by its SUBACK code)",
            n if n.starts_with("mqtt.disconnected.") => {
                "MQTT 5: the broker sent DISCONNECT (by reason code) before the connection was established"
            }
            n if n.starts_with("h2.rst_stream.") => "HTTP/2: the server reset the stream (RST_STREAM, by error code)",
            "quic.handshake_timeout" => "the QUIC handshake did not complete within --timeout",
            "quic.idle_timeout" => "the QUIC connection heard nothing from the server for its idle timeout",
            "quic.stateless_reset" => "the server no longer knew the QUIC connection (stateless reset)",
            "h3.goaway" => "HTTP/3: the server's GOAWAY kept the request from being sent",
            "h3.protocol" => "HTTP/3: a protocol error (a malformed frame or response)",
            "h3.header_too_big" => "HTTP/3: a header section larger than the peer allows",
            n if n.starts_with("quic.closed.") => "the server closed the QUIC connection (by transport error code)",
            n if n.starts_with("h3.closed.") => "HTTP/3: the server closed the connection (by error code)",
            n if n.starts_with("h3.stream_reset.") => "HTTP/3: the server reset the request's stream (by error code)",
            n if n.starts_with("quic.") => "a QUIC failure",
            n if n.starts_with("tls.") => "TLS failure",
            n if n.starts_with("protocol.") => "the server answered the handshake with an error",
            n if n.starts_with("other.") => "another OS error (named by its errno)",
            _ => "an error class this version of throng does not describe",
        }
    }
}

/// How the units of one kind ended: `attempted = ok + Σ errors` when balanced.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    /// Units started.
    pub attempted: u64,
    /// Units that ended well.
    pub ok: u64,
    /// Units that ended in each error class, by class name.
    pub errors: BTreeMap<String, u64>,
}

impl Outcomes {
    /// Nothing attempted.
    pub fn is_empty(&self) -> bool {
        self.attempted == 0
    }

    /// Σ errors (saturating at 2^64 - 1: counts read from a file are
    /// checked with [`Outcomes::checked_ended`] when it is loaded).
    pub fn failed(&self) -> u64 {
        self.errors.values().fold(0u64, |a, &n| a.saturating_add(n))
    }

    /// Units that ended (ok or failed).
    pub fn ended(&self) -> u64 {
        self.ok.saturating_add(self.failed())
    }

    /// `ok + Σ errors`, or None when that passes 2^64 - 1.
    pub fn checked_ended(&self) -> Option<u64> {
        self.errors.values().try_fold(self.ok, |a, &n| a.checked_add(n))
    }

    /// The accounting invariant: every attempted unit ended exactly once.
    pub fn is_balanced(&self) -> bool {
        self.checked_ended() == Some(self.attempted)
    }

    /// Count of one error class by name (0 when absent).
    pub fn error(&self, name: &str) -> u64 {
        self.errors.get(name).copied().unwrap_or(0)
    }

    /// Adds `other`'s counts to these; an error when a sum passes 2^64 - 1.
    pub fn merge(&mut self, other: &Outcomes) -> Result<(), HistError> {
        self.merge_as(other, "")
    }

    /// [`Self::merge`], an overflow naming the count `{unit}attempted`, …
    /// (`requests.ok`: whose counts overflowed, not only which).
    pub(crate) fn merge_as(&mut self, other: &Outcomes, unit: &str) -> Result<(), HistError> {
        add(&mut self.attempted, other.attempted, &format!("{unit}attempted"))?;
        add(&mut self.ok, other.ok, &format!("{unit}ok"))?;
        add_all(&mut self.errors, &other.errors, &format!("{unit}errors"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_documented_ones() {
        assert_eq!(ErrorClass::TimeoutResponse.name(), "timeout.response");
        assert_eq!(ErrorClass::Tls("unknown_ca").name(), "tls.unknown_ca");
        assert_eq!(ErrorClass::Other("ENETUNREACH").name(), "other.ENETUNREACH");
        assert_eq!(ErrorClass::Redirect("too_many").name(), "redirect.too_many");
        assert_eq!(ErrorClass::Quic("idle_timeout").name(), "quic.idle_timeout");
        assert_eq!(
            ErrorClass::Mqtt("connack.not_authorized").name(),
            "mqtt.connack.not_authorized"
        );
        assert_eq!(ErrorClass::MqttDisconnected(139).name(), "mqtt.disconnected.139");
        assert_eq!(
            ErrorClass::H3("closed.H3_EXCESSIVE_LOAD").name(),
            "h3.closed.H3_EXCESSIVE_LOAD"
        );
    }

    #[test]
    fn merge_adds_and_keeps_balance() {
        let mut a = Outcomes {
            attempted: 5,
            ok: 3,
            errors: [("refused".to_string(), 2)].into(),
        };
        let b = Outcomes {
            attempted: 4,
            ok: 1,
            errors: [("refused".to_string(), 1), ("eof".to_string(), 2)].into(),
        };
        assert!(a.is_balanced() && b.is_balanced());
        a.merge(&b).unwrap();
        assert_eq!(a.attempted, 9);
        assert_eq!(a.error("refused"), 3);
        assert_eq!(a.error("eof"), 2);
        assert!(a.is_balanced());
    }
}
