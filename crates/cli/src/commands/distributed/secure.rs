//! The agent connection's security: the token proof (an HMAC over the
//! agent's nonce, so the token never crosses the wire) and TLS.
//!
//! ```text
//!  TcpStream ─► handshake (bounded) ─► pump thread ◀─► UnixStream pair ─► Conn::Tls
//!  TcpStream ─────────────────────────────────────────────────────────► Conn::Tcp
//! ```
//!
//! A TLS connection is pumped by a thread of its own between the socket and
//! one end of a local socket pair; the other end is the [`Conn`] the
//! protocol reads and writes, so that it keeps its timeouts, its clones (a
//! reader thread beside a writer) and its bounded frames whatever the
//! transport.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_tls::rustls;

/// One connection between a coordinator and an agent.
pub enum Conn {
    Tcp(TcpStream),
    /// The local end of a TLS connection's pump.
    Tls(UnixStream),
}

impl Conn {
    pub fn try_clone(&self) -> std::io::Result<Conn> {
        Ok(match self {
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
            Conn::Tls(s) => Conn::Tls(s.try_clone()?),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_read_timeout(t),
            Conn::Tls(s) => s.set_read_timeout(t),
        }
    }

    pub fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_write_timeout(t),
            Conn::Tls(s) => s.set_write_timeout(t),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// The ALPN name both sides offer: a TLS peer that is not a throng agent
/// (or coordinator) fails the handshake instead of reading frames.
pub const ALPN: &[u8] = b"throng-agent/2";

/// The agent's TLS: the handshake within `limit`, then the pump.
pub fn accept_tls(tcp: TcpStream, config: Arc<rustls::ServerConfig>, limit: Duration) -> Result<Conn, String> {
    let conn = rustls::ServerConnection::new(config).map_err(|e| format!("TLS: {e}"))?;
    secure(tcp, rustls::Connection::Server(conn), limit)
}

/// The coordinator's TLS to `host`: the handshake within `limit`, then the
/// pump.
pub fn connect_tls(
    tcp: TcpStream,
    config: Arc<rustls::ClientConfig>,
    host: &str,
    limit: Duration,
) -> Result<Conn, String> {
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|_| format!("'{host}' is no name a certificate can hold; give HOST:PORT"))?;
    let conn = rustls::ClientConnection::new(config, name).map_err(|e| format!("TLS: {e}"))?;
    secure(tcp, rustls::Connection::Client(conn), limit)
}

fn secure(mut tcp: TcpStream, mut tls: rustls::Connection, limit: Duration) -> Result<Conn, String> {
    let deadline = Instant::now() + limit;
    while tls.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("the TLS handshake took over {} s", limit.as_secs()));
        }
        let _ = tcp.set_read_timeout(Some(left));
        let _ = tcp.set_write_timeout(Some(left));
        match tls.complete_io(&mut tcp) {
            Ok((0, 0)) if tls.is_handshaking() => return Err("the TLS handshake: the connection closed".into()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("the TLS handshake took over {} s", limit.as_secs()));
            }
            Err(e) => {
                // The alert that says why goes to the peer too.
                let _ = tls.write_tls(&mut tcp);
                return Err(format!("the TLS handshake failed: {e}"));
            }
        }
    }
    if tls.alpn_protocol() != Some(ALPN) {
        return Err("the TLS peer does not speak throng's agent protocol".into());
    }
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("a local socket pair: {e}"))?;
    std::thread::Builder::new()
        .name("throng-tls-pump".into())
        .spawn(move || pump(tls, tcp, theirs))
        .map_err(|e| format!("starting a thread: {e}"))?;
    Ok(Conn::Tls(ours))
}

/// Most plaintext held for the local side before the socket is read no more.
const HELD: usize = 256 * 1024;
/// Longest the pump waits to say goodbye once the local side closed.
const GOODBYE: Duration = Duration::from_secs(5);

/// Moves bytes between the TLS socket and the local end until either side
/// closes or fails; then both close.
fn pump(mut tls: rustls::Connection, tcp: TcpStream, local: UnixStream) {
    let _ = pump_until_end(&mut tls, &tcp, &local);
    let _ = tcp.shutdown(std::net::Shutdown::Both);
    let _ = local.shutdown(std::net::Shutdown::Both);
}

fn pump_until_end(tls: &mut rustls::Connection, mut tcp: &TcpStream, mut local: &UnixStream) -> std::io::Result<()> {
    tcp.set_nonblocking(true)?;
    local.set_nonblocking(true)?;
    let mut held: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut closing: Option<Instant> = None;
    loop {
        while tls.wants_write() {
            match tls.write_tls(&mut tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if !held.is_empty() {
            match local.write(&held) {
                Ok(n) => {
                    held.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(at) = closing
            && (!tls.wants_write() || at.elapsed() > GOODBYE)
        {
            return Ok(());
        }
        let read_tcp = held.len() < HELD && closing.is_none();
        let read_local = !tls.wants_write() && closing.is_none();
        let tcp_events =
            (if read_tcp { libc::POLLIN } else { 0 }) | (if tls.wants_write() { libc::POLLOUT } else { 0 });
        let local_events =
            (if read_local { libc::POLLIN } else { 0 }) | (if held.is_empty() { 0 } else { libc::POLLOUT });
        // A descriptor with nothing asked of it is left out (-1), so that
        // its hang-up does not wake the loop over and over.
        let watch = |fd: i32, events: libc::c_short| libc::pollfd {
            fd: if events == 0 { -1 } else { fd },
            events,
            revents: 0,
        };
        let mut fds = [
            watch(tcp.as_raw_fd(), tcp_events),
            watch(local.as_raw_fd(), local_events),
        ];
        // SAFETY: fds is a live array of two pollfd, its length given.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 200) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let hung = libc::POLLHUP | libc::POLLERR;
        if read_tcp && fds[0].revents & (libc::POLLIN | hung) != 0 {
            match tls.read_tls(&mut tcp) {
                Ok(0) => {
                    flush_held(local, &held);
                    return Ok(());
                }
                Ok(_) => {
                    tls.process_new_packets()
                        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                    loop {
                        match tls.reader().read(&mut buf) {
                            Ok(0) => {
                                flush_held(local, &held);
                                return Ok(());
                            }
                            Ok(n) => held.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            Err(e) => {
                                flush_held(local, &held);
                                return Err(e);
                            }
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if read_local && fds[1].revents & (libc::POLLIN | hung) != 0 {
            match local.read(&mut buf) {
                Ok(0) => {
                    tls.send_close_notify();
                    closing = Some(Instant::now());
                }
                Ok(n) => tls.writer().write_all(&buf[..n])?,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// What the peer sent before it closed, passed on (bounded in time).
fn flush_held(local: &UnixStream, held: &[u8]) {
    let _ = local.set_nonblocking(false);
    let _ = local.set_write_timeout(Some(GOODBYE));
    let mut local = local;
    let _ = local.write_all(held);
}

/// A fresh nonce: 32 random bytes as hex.
pub fn nonce() -> Result<String, String> {
    let mut b = [0u8; 32];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| "no random bytes from the system".to_string())?;
    Ok(hex(&b))
}

/// What proves knowledge of `token` for `nonce`: HMAC-SHA256 over the
/// nonce, keyed by the token, as hex; empty without a token.
pub fn proof(token: &str, nonce: &str) -> String {
    if token.is_empty() {
        return String::new();
    }
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, token.as_bytes());
    let mut msg = b"throng-coordinator-hello\0".to_vec();
    msg.extend_from_slice(nonce.as_bytes());
    hex(aws_lc_rs::hmac::sign(&key, &msg).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_depends_on_token_and_nonce_and_never_holds_the_token() {
        let n = nonce().unwrap();
        assert_eq!(n.len(), 64);
        assert_ne!(n, nonce().unwrap());
        let p = proof("secret-token", &n);
        assert_eq!(p.len(), 64);
        assert_eq!(p, proof("secret-token", &n));
        assert_ne!(p, proof("secret-tokem", &n));
        assert_ne!(p, proof("secret-token", &nonce().unwrap()));
        assert!(!p.contains("secret"));
        assert_eq!(proof("", &n), "");
    }
}
