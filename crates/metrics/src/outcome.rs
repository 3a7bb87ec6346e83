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
    /// answer), `closed` (it closed before answering).
    Proxy(&'static str),
    /// Any other OS error, by errno name (e.g. `ENETUNREACH`).
    Other(&'static str),
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
            ErrorClass::Other(errno) => return Cow::Owned(format!("other.{errno}")),
        })
    }

    /// A sentence for reports: what this class means.
    pub fn describe(name: &str) -> &'static str {
        match name {
            "timeout.connect" => "connect() did not complete within --timeout",
            "tls.handshake_timeout" => "TLS handshake did not complete within --timeout",
            "timeout.handshake" => "the protocol handshake got no answer within --timeout",
            "auth_failed" => "the server refused the credentials",
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
            "tls.unknown_ca" => "certificate not issued by a trusted CA",
            "tls.bad_certificate" => "certificate rejected",
            "tls.certificate_required" => "the server requires a client certificate",
            "tls.certificate_expired" => "certificate expired",
            "tls.certificate_name_mismatch" => "certificate not valid for the host name",
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
        add(&mut self.attempted, other.attempted, "attempted")?;
        add(&mut self.ok, other.ok, "ok")?;
        add_all(&mut self.errors, &other.errors, "errors")
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
