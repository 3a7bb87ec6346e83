//! Before the run: does the server speak HTTP/2? A blocking check on the
//! caller's thread, bounded as a whole and woken to see a signal.

use std::time::Duration;

use crate::EngineError;

/// How long a preflight may take at most, whatever `--timeout` says.
const PREFLIGHT_LIMIT: Duration = Duration::from_secs(10);

/// How often a preflight's blocking reads and writes wake up to look at
/// the clock and at a signal.
const PREFLIGHT_POLL: Duration = Duration::from_millis(50);

/// Before the run: does the server speak HTTP/2? Over TLS, one handshake
/// tells by ALPN; in the clear (h2c), the server's first frame must be
/// SETTINGS. `Ok(Some(what it spoke instead))` when it does not; `Ok(None)`
/// when it does or when it cannot be told (unreachable, the handshake
/// failed: the run then counts those failures).
///
/// The whole check — connect, handshake, first frame — ends within
/// min(`timeout`, [`PREFLIGHT_LIMIT`]): a server whose bytes trickle in
/// (one every 0.3 s passes every per-read timeout) is
/// [`EngineError::Unanswered`]. A signal (`control` interrupted) ends it
/// within [`PREFLIGHT_POLL`] as [`EngineError::Interrupted`].
pub(crate) fn preflight(
    addr: std::net::SocketAddr,
    tls: Option<&crate::transport::TlsClient>,
    timeout: Duration,
    control: &crate::Control,
) -> Result<Option<String>, EngineError> {
    let bound = timeout.min(PREFLIGHT_LIMIT);
    let deadline = std::time::Instant::now() + bound;
    let what = if tls.is_some() {
        "a TLS handshake offering h2"
    } else {
        "the server's first HTTP/2 frame"
    };
    match preflight_until(addr, tls, deadline, control) {
        Check::Told(spoke) => Ok(spoke),
        Check::Interrupted => Err(EngineError::Interrupted(
            "during the HTTP/2 check, before the run started",
        )),
        Check::Late => Err(crate::error::Unanswered::Http2Check {
            addr,
            what,
            bound,
            limit_s: PREFLIGHT_LIMIT.as_secs(),
        }
        .into()),
    }
}

/// How a preflight ended.
enum Check {
    /// What the server spoke instead of HTTP/2 (None: h2, or it cannot be told).
    Told(Option<String>),
    /// The deadline passed first.
    Late,
    /// A signal came first.
    Interrupted,
}

/// The preflight, against a deadline and a signal.
fn preflight_until(
    addr: std::net::SocketAddr,
    tls: Option<&crate::transport::TlsClient>,
    deadline: std::time::Instant,
    control: &crate::Control,
) -> Check {
    // The next wait: until the deadline, in slices short enough to see a
    // signal; None when the check must end.
    let next = || -> Result<Duration, Check> {
        if control.was_interrupted() {
            return Err(Check::Interrupted);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(Check::Late);
        }
        Ok(left.min(PREFLIGHT_POLL))
    };
    // connect() cannot be woken: it runs on a thread of its own, bounded
    // by the deadline, and is waited for in slices. A refused or
    // unreachable address is for the run to count.
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if left.is_zero() {
        return Check::Late;
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let connecting = std::thread::Builder::new()
        .name("throng-h2-check".into())
        .spawn(move || {
            let _ = tx.send(std::net::TcpStream::connect_timeout(&addr, left));
        });
    if connecting.is_err() {
        return Check::Told(None);
    }
    let mut tcp = loop {
        let slice = match next() {
            Ok(s) => s,
            Err(end) => return end,
        };
        match rx.recv_timeout(slice) {
            Ok(Ok(tcp)) => break tcp,
            Ok(Err(e)) if waited(&e) => return Check::Late,
            Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Check::Told(None),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    };
    match tls {
        Some(t) => told_by_alpn(&mut tcp, t, &next),
        None => told_by_first_frame(&mut tcp, &next),
    }
}

/// A wait that ended without an answer: its slice passed, or a signal
/// came (a socket call with a timeout fails with EINTR even under
/// SA_RESTART); the loop looks at the clock and the signal again.
fn waited(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(e.kind(), K::WouldBlock | K::TimedOut | K::Interrupted)
}

/// Over TLS: what the handshake's ALPN chose, each wait as long as `next`
/// allows.
fn told_by_alpn(
    tcp: &mut std::net::TcpStream,
    t: &crate::transport::TlsClient,
    next: &dyn Fn() -> Result<Duration, Check>,
) -> Check {
    let Ok(mut c) = throng_tls::rustls::ClientConnection::new(std::sync::Arc::clone(&t.config), t.server_name.clone())
    else {
        return Check::Told(None);
    };
    while c.is_handshaking() {
        let slice = match next() {
            Ok(s) => s,
            Err(end) => return end,
        };
        if c.wants_write() {
            if tcp.set_write_timeout(Some(slice)).is_err() {
                return Check::Told(None);
            }
            match c.write_tls(tcp) {
                Ok(_) => {}
                Err(e) if waited(&e) => {}
                Err(_) => return Check::Told(None),
            }
            continue;
        }
        if tcp.set_read_timeout(Some(slice)).is_err() {
            return Check::Told(None);
        }
        match c.read_tls(tcp) {
            Ok(0) => return Check::Told(None),
            Ok(_) => {
                if let Err(e) = c.process_new_packets() {
                    // Tell the server why (best effort).
                    let _ = c.write_tls(tcp);
                    // The server would not agree on h2: a rustls
                    // client that offered only h2 ends the
                    // handshake itself.
                    return Check::Told(
                        (throng_tls::failure_class(&e) == "no_application_protocol")
                            .then(|| "a TLS handshake that does not offer h2 by ALPN".to_string()),
                    );
                }
            }
            Err(e) if waited(&e) => {}
            Err(_) => return Check::Told(None),
        }
    }
    Check::Told(match c.alpn_protocol() {
        Some(b"h2") => None,
        Some(other) => Some(format!("ALPN {}", String::from_utf8_lossy(other))),
        None => Some("no ALPN protocol (HTTP/1.1)".to_string()),
    })
}

/// In the clear (h2c): the server's first frame after the preface and an
/// empty SETTINGS, each wait as long as `next` allows.
fn told_by_first_frame(tcp: &mut std::net::TcpStream, next: &dyn Fn() -> Result<Duration, Check>) -> Check {
    use std::io::Write;
    // The preface and an empty SETTINGS frame.
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let mut sent = 0;
    while sent < hello.len() {
        let slice = match next() {
            Ok(s) => s,
            Err(end) => return end,
        };
        if tcp.set_write_timeout(Some(slice)).is_err() {
            return Check::Told(None);
        }
        match tcp.write(&hello[sent..]) {
            Ok(0) => return Check::Told(None),
            Ok(n) => sent += n,
            Err(e) if waited(&e) => {}
            Err(_) => return Check::Told(None),
        }
    }
    let mut head = [0u8; 9];
    let mut got = 0;
    while got < head.len() {
        let slice = match next() {
            Ok(s) => s,
            Err(end) => return end,
        };
        if tcp.set_read_timeout(Some(slice)).is_err() {
            return Check::Told(None);
        }
        match std::io::Read::read(tcp, &mut head[got..]) {
            Ok(0) => return Check::Told(None),
            Ok(n) => got += n,
            Err(e) if waited(&e) => {}
            Err(_) => return Check::Told(None),
        }
    }
    Check::Told(if head[3] == 4 {
        None
    } else if head.starts_with(b"HTTP/1") {
        Some("HTTP/1.x in the clear".to_string())
    } else {
        Some("something that is not an HTTP/2 SETTINGS frame".to_string())
    })
}
