//! Threads, listeners, connections.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::auth::{AuthConfig, Service};
use crate::fault::Fault;
use crate::http::{Action, Parsed, json, parse_request, route, unreadable};
use crate::stream::{LabStream, write_filler};

/// Bodies up to this size are written together with the head.
const INLINE_BODY: u64 = 64 * 1024;
/// Pending connections the kernel may queue per listener.
const BACKLOG: i32 = 16_384;

/// When the server answers nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Period.
    pub every: Duration,
    /// Length of the silent window at the end of each period.
    pub duration: Duration,
}

impl Stall {
    /// If `now` falls in a stall window, when that window ends.
    pub fn window_end(&self, start: Instant, now: Instant) -> Option<Instant> {
        let every = self.every.as_nanos();
        if every == 0 || self.duration.is_zero() {
            return None;
        }
        let t = now.saturating_duration_since(start).as_nanos();
        let into = t % every;
        let silent_from = every.saturating_sub(self.duration.as_nanos());
        (into >= silent_from).then(|| {
            let period_end = t - into + every;
            start + Duration::from_nanos(u64::try_from(period_end).unwrap_or(u64::MAX))
        })
    }
}

/// How to run the lab server.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// Threads, each with its own listener (SO_REUSEPORT).
    pub threads: usize,
    /// Optional stall windows.
    pub stall: Option<Stall>,
    /// Serve TLS with this configuration (it decides whether client
    /// certificates are required).
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
}

/// A running lab server; stops when dropped or on [`LabServer::stop`].
#[derive(Debug)]
pub struct LabServer {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl LabServer {
    /// Binds every listener, starts the threads, and returns once the
    /// server accepts connections. The auth endpoints use
    /// [`AuthConfig::default`].
    pub fn start(config: &LabConfig) -> io::Result<LabServer> {
        LabServer::start_with_auth(config, &AuthConfig::default())
    }

    /// [`LabServer::start`], with these auth settings.
    pub fn start_with_auth(config: &LabConfig, auth: &AuthConfig) -> io::Result<LabServer> {
        LabServer::start_inner(config, auth, None, false)
    }

    /// [`LabServer::start`], and on the same port, without TLS, the stream
    /// endpoints (`GET /sse`, a streamed `POST /v1/chat/completions`) over
    /// HTTP/2 with prior knowledge (h2c). Off in [`LabServer::start`], so
    /// that a client asking a plain lab for HTTP/2 is told it answers in
    /// HTTP/1.1.
    pub fn start_h2c(config: &LabConfig, auth: &AuthConfig) -> io::Result<LabServer> {
        LabServer::start_inner(config, auth, None, true)
    }

    /// A server that answers every connection with `fault` instead of the
    /// endpoints (see [`Fault`]). `config.stall` is ignored; `config.tls`
    /// wraps the HTTP faults (the TLS and NATS faults speak raw TCP).
    pub fn start_fault(config: &LabConfig, fault: Fault) -> io::Result<LabServer> {
        LabServer::start_inner(config, &AuthConfig::default(), Some(fault), false)
    }

    fn start_inner(config: &LabConfig, auth: &AuthConfig, fault: Option<Fault>, h2c: bool) -> io::Result<LabServer> {
        let threads = config.threads.max(1);
        let first = bind(config.listen)?;
        let addr = first
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("listener has no address"))?;
        let mut listeners = vec![first];
        for _ in 1..threads {
            listeners.push(bind(addr)?);
        }
        let (shutdown, _) = watch::channel(false);
        let start = Instant::now();
        let shared = Arc::new(Shared {
            stall: config.stall,
            start,
            tls: config.tls.clone().map(tokio_rustls::TlsAcceptor::from),
            auth: Service::new(auth)?,
            fault,
            h2c,
        });
        let mut handles = Vec::new();
        for (i, l) in listeners.into_iter().enumerate() {
            let rx = shutdown.subscribe();
            let shared = Arc::clone(&shared);
            let std_listener: std::net::TcpListener = l.into();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("throng-lab-{i}"))
                    .spawn(move || serve_thread(std_listener, shared, rx))?,
            );
        }
        Ok(LabServer {
            addr,
            shutdown,
            threads: handles,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes connections, joins the threads.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        let _ = self.shutdown.send(true);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for LabServer {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

struct Shared {
    stall: Option<Stall>,
    start: Instant,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// One store and one hashing pool for every thread: a user registered
    /// through one listener logs in through any other.
    auth: Service,
    /// Answer every connection with this fault instead.
    fault: Option<Fault>,
    /// Stream endpoints over h2c too ([`LabServer::start_h2c`]).
    h2c: bool,
}

/// Longest a client may take to complete a TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn bind(addr: SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    Ok(s)
}

fn serve_thread(listener: std::net::TcpListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let Ok(listener) = TcpListener::from_std(listener) else {
            return;
        };
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        let shared = Arc::clone(&shared);
                        // A task is as large as the largest future it may
                        // await: the faults (4 KB buffers, an HTTP/2 server)
                        // and TLS (a rustls session) are boxed so that a
                        // held plain connection costs ~1 KB, not ~10.
                        tokio::task::spawn_local(async move {
                            if let Some(fault) = shared.fault {
                                Box::pin(crate::fault::connection(stream, fault, shared.tls.as_ref())).await;
                                return;
                            }
                            match &shared.tls {
                                None => {
                                    let _ = connection(stream, &shared).await;
                                }
                                Some(acceptor) => Box::pin(tls_connection(stream, acceptor, &shared)).await,
                            }
                        });
                    }
                    // Out of descriptors or similar: back off briefly
                    // rather than spin, then keep serving.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                _ = shutdown.changed() => return,
            }
        }
    });
}

async fn tls_connection(stream: TcpStream, acceptor: &tokio_rustls::TlsAcceptor, shared: &Shared) {
    let accept = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
    if let Ok(Ok(tls)) = accept.await {
        let _ = connection(tls, shared).await;
    }
}

async fn connection<S: LabStream>(mut stream: S, shared: &Shared) -> io::Result<()> {
    // No buffer until the client sends something: a storm's held
    // connections cost the lab little more than the socket.
    let mut buf: Vec<u8> = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    let mut filled = 0usize;
    // Nothing answered yet and h2c served: the connection may still turn
    // out to be HTTP/2.
    let mut fresh = shared.h2c;
    loop {
        if fresh && filled > 0 {
            if stream.is_tls() || !crate::h2sse::may_be_preface(&buf[..filled]) {
                fresh = false;
            } else if filled >= crate::h2sse::PREFACE.len() {
                return Box::pin(crate::h2sse::serve(stream, buf[..filled].to_vec())).await;
            }
        }
        // Answer every complete request already buffered (pipelining).
        loop {
            if fresh {
                break;
            }
            match parse_request(&buf[..filled]) {
                Parsed::Partial => break,
                Parsed::Bad(why) => {
                    out.clear();
                    unreadable(&mut out, why);
                    stream.write_all(&out).await?;
                    return Ok(());
                }
                Parsed::Request(req) => {
                    let used = req.len;
                    let keep = req.keep_alive;
                    if let Some(end) = shared.stall.and_then(|s| s.window_end(shared.start, Instant::now())) {
                        tokio::time::sleep_until(end.into()).await;
                    }
                    out.clear();
                    match route(&req, &mut out) {
                        Action::Respond => stream.write_all(&out).await?,
                        Action::Delay(d) => {
                            tokio::time::sleep(d).await;
                            stream.write_all(&out).await?;
                        }
                        Action::Bytes(n) if n <= INLINE_BODY => {
                            // Head and body in one write: one segment, one wakeup.
                            out.resize(out.len() + n as usize, b'x');
                            stream.write_all(&out).await?;
                        }
                        Action::Bytes(n) => {
                            stream.write_all(&out).await?;
                            write_filler(&mut stream, n).await?;
                        }
                        Action::Reset => {
                            let sock = socket2::SockRef::from(stream.tcp());
                            sock.set_linger(Some(Duration::ZERO))?;
                            return Ok(());
                        }
                        Action::Close => return Ok(()),
                        Action::Garbage => {
                            stream.write_all(b"THIS IS NOT HTTP\r\n\r\n").await?;
                            return Ok(());
                        }
                        Action::WebSocket => {
                            stream.write_all(&out).await?;
                            return crate::ws::echo(&mut stream, &buf[used..filled]).await;
                        }
                        Action::Stream(events) => {
                            stream.write_all(&out).await?;
                            if !crate::sse::serve(&mut stream, &events).await? {
                                return Ok(());
                            }
                        }
                        Action::Auth(call) => {
                            // Waits for a hashing thread, not on this one:
                            // the thread's other connections go on.
                            let reply = Box::pin(shared.auth.handle(call)).await;
                            json(&mut out, &reply, keep);
                            stream.write_all(&out).await?;
                        }
                    }
                    buf.copy_within(used..filled, 0);
                    filled -= used;
                    if !keep {
                        stream.shutdown().await?;
                        return Ok(());
                    }
                }
            }
        }
        if buf.is_empty() && !stream.is_tls() {
            stream.tcp().readable().await?;
        }
        if filled == buf.len() {
            if buf.len() >= crate::http::MAX_REQUEST {
                return Ok(());
            }
            buf.resize((buf.len() * 2).max(1024), 0);
        }
        let n = stream.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_windows_are_the_end_of_each_period() {
        let s = Stall {
            every: Duration::from_secs(5),
            duration: Duration::from_secs(1),
        };
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(s.window_end(t0, at(0)), None);
        assert_eq!(s.window_end(t0, at(3_999)), None);
        assert_eq!(s.window_end(t0, at(4_000)), Some(at(5_000)));
        assert_eq!(s.window_end(t0, at(4_999)), Some(at(5_000)));
        assert_eq!(s.window_end(t0, at(5_000)), None);
        assert_eq!(s.window_end(t0, at(9_500)), Some(at(10_000)));
    }
}
