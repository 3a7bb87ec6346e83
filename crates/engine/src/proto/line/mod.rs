//! Protocol handshakes on a storm's connections: NATS, and line protocols
//! (Redis, SMTP, memcached, custom) as send/expect steps.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::ErrorClass;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

use crate::errors::{Stage, classify};
use crate::transport::{self, TlsClient, Transport};

pub(crate) mod done;
pub(crate) mod spec;

pub(crate) use done::Done;
pub(crate) use spec::{ProtocolSpec, Step};

/// Longest protocol line accepted (README: a longer line is a `protocol`
/// error). NATS servers send INFO lines of a few kilobytes; they refuse
/// control lines over 4 KiB themselves.
const MAX_LINE: usize = 64 * 1024;

/// A line longer than [`MAX_LINE`] (inside the `io::Error` a read returns).
#[derive(Debug)]
struct LineTooLong;

impl std::fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a line longer than {MAX_LINE} bytes")
    }
}

impl std::error::Error for LineTooLong {}

/// The class of a failed read or write during a handshake: an overlong line
/// is the server breaking the protocol, everything else as the OS says.
fn io_fail(e: io::Error) -> ErrorClass {
    if e.get_ref().is_some_and(|inner| inner.is::<LineTooLong>()) {
        return ErrorClass::Protocol;
    }
    classify(&e, Stage::Exchange)
}

/// Reads lines off a transport; the partial line is kept between reads.
#[derive(Default)]
pub(crate) struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// The next line without its `\r\n`; None at the end of the stream.
    pub(crate) async fn next(
        &mut self,
        stream: &mut Transport,
        scratch: &RefCell<Box<[u8]>>,
    ) -> io::Result<Option<Vec<u8>>> {
        poll_fn(|cx| {
            loop {
                if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                    let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                    line.pop();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    return Poll::Ready(Ok(Some(line)));
                }
                if self.buf.len() > MAX_LINE {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, LineTooLong)));
                }
                let mut s = scratch.borrow_mut();
                let mut rb = ReadBuf::new(&mut s[..]);
                match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(Ok(None)),
                    Poll::Ready(Ok(())) => self.buf.extend_from_slice(rb.filled()),
                }
            }
        })
        .await
    }
}

/// What the server said out of turn during a NATS handshake, before the
/// PONG of CONNECT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OutOfTurn {
    /// A PING (nats.go: "nats: expected 'PONG', got 'PING'").
    pub ping: bool,
    /// An INFO update.
    pub info: bool,
    /// An `-ERR`, later followed by PONG (lenient only: nats.go fails at
    /// the `-ERR`).
    pub err_then_pong: bool,
}

impl OutOfTurn {
    /// The kinds seen, by their names in the result.
    pub(crate) fn kinds(self) -> impl Iterator<Item = &'static str> {
        [
            (self.ping, "ping_before_pong"),
            (self.info, "info_before_pong"),
            (self.err_then_pong, "err_then_pong"),
        ]
        .into_iter()
        .filter_map(|(seen, name)| seen.then_some(name))
    }
}

/// Runs the protocol's handshake within the deadline `sleep` was armed
/// with. `seen` collects what the server said out of turn, whether the
/// handshake then succeeds or fails; `conn` is the connection's number,
/// unique over the run and kept through reconnects (MQTT's `{{conn}}`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn handshake(
    spec: &ProtocolSpec,
    stream: Transport,
    tls: Option<&TlsClient>,
    scratch: &RefCell<Box<[u8]>>,
    timeout: Duration,
    sleep: Pin<&mut Sleep>,
    seen: &Cell<OutOfTurn>,
    conn: u64,
) -> Result<Done, ErrorClass> {
    match spec {
        ProtocolSpec::Nats { connect, strict } => {
            // An -ERR the lenient client waits past: what the handshake
            // ends in if no PONG follows.
            let pending = Cell::new(None);
            let work = nats(connect, *strict, stream, tls, scratch, timeout, seen, &pending);
            tokio::select! {
                biased;
                r = work => r,
                () = sleep => Err(pending.get().unwrap_or(ErrorClass::TimeoutHandshake)),
            }
        }
        ProtocolSpec::Lines { steps, step_timeout } => lines(steps, *step_timeout, stream, scratch, sleep).await,
        ProtocolSpec::WebSocket(ws) => crate::proto::ws::handshake(ws, stream, scratch, sleep).await,
        ProtocolSpec::Mqtt(m) => crate::proto::mqtt::handshake(m, stream, conn, timeout, scratch, sleep).await,
    }
}

#[allow(clippy::too_many_arguments)]
async fn nats(
    connect: &[u8],
    strict: bool,
    mut stream: Transport,
    tls: Option<&TlsClient>,
    scratch: &RefCell<Box<[u8]>>,
    timeout: Duration,
    seen: &Cell<OutOfTurn>,
    pending: &Cell<Option<ErrorClass>>,
) -> Result<Done, ErrorClass> {
    let mut lines = Lines::default();
    let info = lines
        .next(&mut stream, scratch)
        .await
        .map_err(io_fail)?
        .ok_or(ErrorClass::Eof)?;
    if let Some(err) = info.strip_prefix(b"-ERR") {
        return Err(nats_error(err));
    }
    let Some(json) = info.strip_prefix(b"INFO ") else {
        return Err(ErrorClass::ProtocolError("unexpected_reply"));
    };
    let info: serde_json::Value = serde_json::from_slice(json).map_err(|_| ErrorClass::ProtocolError("bad_info"))?;
    let tls_required = info
        .get("tls_required")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let mut upgraded = None;
    if tls_required && matches!(stream, Transport::Plain(_)) {
        let Some(tls) = tls else {
            return Err(ErrorClass::ProtocolError("tls_required"));
        };
        let Transport::Plain(tcp) = stream else {
            return Err(ErrorClass::ProtocolError("tls_required"));
        };
        let (session, hello) = crate::tls_stream::start(Arc::clone(&tls.config), tls.server_name.clone())
            .map_err(|_| ErrorClass::Tls("client_setup"))?;
        let started = Instant::now();
        let tls_deadline = std::pin::pin!(tokio::time::sleep(timeout));
        let (s, h, done) = transport::handshake(tcp, session, &hello, 0, true, tls_deadline).await?;
        stream = s;
        upgraded = Some((done - started, h, done));
    }
    let t0 = Instant::now();
    stream.write_all(connect).await.map_err(io_fail)?;
    stream.flush().await.map_err(io_fail)?;
    let note = |f: fn(&mut OutOfTurn)| {
        let mut s = seen.get();
        f(&mut s);
        seen.set(s);
    };
    loop {
        let line = match lines.next(&mut stream, scratch).await {
            Ok(Some(l)) => l,
            // The server closed after an -ERR: that is why.
            Ok(None) => return Err(pending.get().unwrap_or(ErrorClass::Eof)),
            Err(e) => return Err(pending.get().unwrap_or_else(|| io_fail(e))),
        };
        match line.as_slice() {
            b"PONG" => {
                if pending.get().is_some() {
                    note(|s| s.err_then_pong = true);
                }
                break;
            }
            l if l.starts_with(b"-ERR") => {
                let class = nats_error(&l[4..]);
                // nats.go fails at any -ERR; so does everyone at an
                // authorization error (the server closes next).
                if strict || class == ErrorClass::AuthFailed {
                    return Err(class);
                }
                if pending.get().is_none() {
                    pending.set(Some(class));
                }
            }
            b"PING" => {
                note(|s| s.ping = true);
                if strict {
                    // nats.go: "nats: expected 'PONG', got 'PING'".
                    return Err(ErrorClass::ProtocolError("unexpected_ping"));
                }
                stream.write_all(b"PONG\r\n").await.map_err(io_fail)?;
                stream.flush().await.map_err(io_fail)?;
            }
            l if l.starts_with(b"INFO") => {
                note(|s| s.info = true);
                if strict {
                    return Err(ErrorClass::ProtocolError("unexpected_info"));
                }
            }
            // +OK (verbose servers) and anything else.
            _ if strict => return Err(ErrorClass::ProtocolError("unexpected_reply")),
            _ => {}
        }
    }
    Ok(Done {
        stream,
        handshake: t0.elapsed(),
        tls: upgraded,
        exchanges: Vec::new(),
        subscribe: None,
        upgrade: None,
    })
}

async fn lines(
    steps: &[Step],
    step_timeout: Duration,
    mut stream: Transport,
    scratch: &RefCell<Box<[u8]>>,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Done, ErrorClass> {
    let mut reader = Lines::default();
    let t0 = Instant::now();
    for step in steps {
        match step {
            Step::Send(bytes) => {
                stream.write_all(bytes).await.map_err(io_fail)?;
                stream.flush().await.map_err(io_fail)?;
            }
            Step::Expect(re) => {
                sleep.as_mut().reset((Instant::now() + step_timeout).into());
                let line = tokio::select! {
                    biased;
                    r = reader.next(&mut stream, scratch) => r.map_err(io_fail)?.ok_or(ErrorClass::Eof)?,
                    () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
                };
                if !re.is_match(&line) {
                    return Err(ErrorClass::ProtocolError("unexpected_reply"));
                }
            }
        }
    }
    Ok(Done {
        stream,
        handshake: t0.elapsed(),
        tls: None,
        exchanges: Vec::new(),
        subscribe: None,
        upgrade: None,
    })
}

/// NATS's `-ERR 'Reason'` → a taxonomy class.
fn nats_error(rest: &[u8]) -> ErrorClass {
    let text = String::from_utf8_lossy(rest);
    let reason = text.trim().trim_matches('\'').trim().to_ascii_lowercase();
    if reason.starts_with("authorization violation") || reason.contains("authentication") {
        return ErrorClass::AuthFailed;
    }
    ErrorClass::ProtocolError(match reason.as_str() {
        "authorization timeout" => "authorization_timeout",
        "maximum connections exceeded" => "maximum_connections_exceeded",
        "secure connection - tls required" => "tls_required",
        "unknown protocol operation" => "unknown_protocol_operation",
        "invalid client protocol" => "invalid_client_protocol",
        "parser error" => "parser_error",
        "stale connection" => "stale_connection",
        "slow consumer" => "slow_consumer",
        "maximum control line exceeded" => "maximum_control_line_exceeded",
        "maximum payload violation" => "maximum_payload_violation",
        _ => "error",
    })
}

/// While a NATS connection is held: answer PINGs, true when the server
/// closed the connection (false never returns: the caller selects).
pub(crate) async fn answer_pings(stream: &mut Transport, scratch: &RefCell<Box<[u8]>>) {
    let mut lines = Lines::default();
    loop {
        match lines.next(stream, scratch).await {
            Ok(Some(l)) if l == b"PING" => {
                if stream.write_all(b"PONG\r\n").await.is_err() || stream.flush().await.is_err() {
                    return;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::spec::nats_connect;
    use super::*;

    #[test]
    fn connect_lines_carry_the_credentials() {
        let c = String::from_utf8(nats_connect(Some("u"), Some("p\"q"), false, false)).unwrap();
        assert!(c.starts_with("CONNECT {") && c.ends_with("}\r\nPING\r\n"), "{c}");
        let json: serde_json::Value = serde_json::from_str(&c["CONNECT ".len()..c.len() - 8]).unwrap();
        assert_eq!(json["user"], "u");
        assert_eq!(json["pass"], "p\"q");
        assert_eq!(json["verbose"], false);
        let t = String::from_utf8(nats_connect(None, Some("tok"), true, true)).unwrap();
        assert!(t.contains("\"auth_token\":\"tok\""));
    }

    #[test]
    fn nats_errors_by_reason() {
        assert_eq!(nats_error(b" 'Authorization Violation'"), ErrorClass::AuthFailed);
        assert_eq!(
            nats_error(b" 'Maximum Connections Exceeded'"),
            ErrorClass::ProtocolError("maximum_connections_exceeded")
        );
        assert_eq!(nats_error(b" 'Something New'"), ErrorClass::ProtocolError("error"));
    }
}
