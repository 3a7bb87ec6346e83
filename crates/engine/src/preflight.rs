//! The one pre-run check path: before a run starts, each destination whose
//! protocol a plan asks for (HTTP/2, HTTP/3) is asked whether it speaks it,
//! so that a plan pointed at the wrong server is refused with what the
//! server spoke instead, not run as thousands of failures.
//!
//! ```text
//!  setup (run/http.rs, run/storm.rs, run/scenario.rs)
//!     │ [Dest { route, speak: Speak::Http2 | Speak::Http3, asked }]
//!     ▼
//!  check ── per destination: its protocol's check (one arm per protocol)
//!     │ None: it speaks it (or it cannot be told: the run counts that)
//!     ▼
//!  Some(what it spoke) ─► NotSpoken { asked, spoke } (a usage error)
//! ```
//!
//! A new protocol with a check adds a variant to [`Speak`] and one arm to
//! [`spoke`]; a new place that asks for a protocol adds a variant to
//! [`Asked`] (how its refusal reads).

use std::time::Duration;

use crate::Control;
use crate::error::EngineError;
pub use crate::error::{Asked, NotSpoken};
use crate::proto::{http2, http3};
use crate::reach::Route;
use crate::transport::TlsClient;

/// The protocol a destination must speak, with what its check needs.
#[derive(Clone, Copy)]
pub(crate) enum Speak<'a> {
    /// HTTP/2: over TLS (ALPN `h2`) with a client, else h2c (prior knowledge).
    Http2 { tls: Option<&'a TlsClient> },
    /// HTTP/3: a QUIC handshake with this client and server name.
    Http3 {
        client: &'a quinn::ClientConfig,
        name: &'a str,
    },
}

/// One destination to check before the run.
pub(crate) struct Dest<'a> {
    /// Where it is: the check speaks to its first address directly (a
    /// proxied route is not checked: its first address is the proxy's).
    pub route: &'a Route,
    /// What it must speak.
    pub speak: Speak<'a>,
    /// Who asked, for the refusal's words.
    pub asked: Asked,
}

/// Checks each destination in order, each within min(`timeout`, the
/// protocol's bound); the first one that speaks something else fails the
/// run before it starts. A signal ends an HTTP/2 check as
/// [`EngineError::Interrupted`]; one that gets no answer in time, as
/// [`EngineError::Unanswered`].
pub(crate) fn check<'a>(
    dests: impl IntoIterator<Item = Dest<'a>>,
    timeout: Duration,
    control: &Control,
) -> Result<(), EngineError> {
    for d in dests {
        if d.route.proxied {
            continue;
        }
        let Some(&addr) = d.route.addrs.first() else {
            continue;
        };
        if let Some(spoke) = spoke(addr, &d.speak, timeout, control)? {
            return Err(NotSpoken { asked: d.asked, spoke }.into());
        }
    }
    Ok(())
}

/// What the server at `addr` spoke instead of `speak` (None: it speaks it,
/// or the check cannot tell — a refused connection is the run's to count).
fn spoke(
    addr: std::net::SocketAddr,
    speak: &Speak<'_>,
    timeout: Duration,
    control: &Control,
) -> Result<Option<String>, EngineError> {
    match *speak {
        Speak::Http2 { tls } => http2::preflight(addr, tls, timeout, control),
        Speak::Http3 { client, name } => Ok(http3::preflight(addr, client, name, timeout)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn says(asked: Asked) -> String {
        NotSpoken {
            asked,
            spoke: "HTTP/1.1".into(),
        }
        .to_string()
    }

    #[test]
    fn refusals_read_as_before() {
        assert_eq!(
            says(Asked::HttpTarget {
                url: "http://127.0.0.1:1/".into()
            }),
            "--http2: http://127.0.0.1:1/ does not speak HTTP/2 (it answered with HTTP/1.1); leave out --http2 \
             to run over HTTP/1.1, or point at a server with HTTP/2 enabled"
        );
        assert_eq!(
            says(Asked::ScenarioTarget {
                file: "s.yaml".into(),
                which: "target".into(),
                url: "https://127.0.0.1:1".into(),
                http: 2
            }),
            "s.yaml: target https://127.0.0.1:1 has http: 2, but the server does not speak HTTP/2 (it answered \
             with HTTP/1.1); write http: 1.1 (or leave http: out) to run over HTTP/1.1, or point at a server with \
             HTTP/2 enabled"
        );
        assert_eq!(
            says(Asked::ScenarioTarget {
                file: "s.yaml".into(),
                which: "target".into(),
                url: "https://127.0.0.1:1".into(),
                http: 3
            }),
            "s.yaml: target https://127.0.0.1:1 has http: 3, but the server does not speak HTTP/3 (it answered \
             with HTTP/1.1); write http: 2 or http: 1.1 to run over TCP, or point at a server with HTTP/3 enabled"
        );
        assert_eq!(
            says(Asked::ScenarioRequest {
                at: "s.yaml:3:5".into(),
                scenario: "a".into(),
                url: "https://127.0.0.1:1".into(),
                http: 3
            }),
            "s.yaml:3:5: this request has http: 3, but scenario a's target https://127.0.0.1:1 does not speak \
             HTTP/3 (it answered with HTTP/1.1); leave http: out to use the target's protocol, or point at a \
             server with HTTP/3 enabled"
        );
    }

    #[test]
    fn a_refusal_is_a_usage_error() {
        let e: EngineError = NotSpoken {
            asked: Asked::StormTarget { url: "u".into() },
            spoke: "x".into(),
        }
        .into();
        assert!(e.is_usage());
        assert!(std::error::Error::source(&e).is_none());
    }
}
