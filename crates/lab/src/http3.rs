//! The lab's HTTP/3 server (`throng serve --http3`): QUIC by quinn, HTTP/3
//! by h3, one thread, and the faults a real HTTP/3 server will not produce
//! on demand.
//!
//! ```text
//!  H3Server::start ─► thread: current-thread runtime, one quinn Endpoint (UDP)
//!                       └─ task per connection: h3 Connection::accept
//!                            └─ task per request: 200 (or /bytes/N), an event
//!                               stream (/sse, /v1/chat/completions: h3sse.rs), or the fault
//! ```

use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::watch;

use crate::fault::HOLD_LIMIT;
use crate::h2fault::{LONG_BODY, SHORT_BODY};
use crate::h3sse::Stops;

/// Largest `/bytes/N` body.
const MAX_BODY: u64 = 16 * 1024 * 1024;
/// The idle timeout the server asks for: what a client sees when the server
/// goes silent (`h3-silent`), well inside any response timeout.
const SILENT_IDLE: Duration = Duration::from_secs(1);
/// H3_EXCESSIVE_LOAD (RFC 9114, 8.1): the code `h3-close-connection` closes with.
const CLOSE_CODE: u32 = 0x107;

/// A hostile HTTP/3 server: every connection gets one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum H3Fault {
    /// Reads each request, resets its stream with H3_REQUEST_REJECTED.
    ResetStream,
    /// Answers the first request of each connection, then closes the
    /// connection with H3_EXCESSIVE_LOAD at the second.
    CloseConnection,
    /// Completes the handshake, reads the first request, then the whole
    /// server goes silent (no packet, not even an ACK) for up to a minute;
    /// it asked for a 1 s idle timeout, so the client's connection ends.
    Silent,
    /// Never answers a handshake (reads no datagram).
    NoHandshake,
    /// Answers as usual but allows one concurrent request stream per
    /// connection (MAX_STREAMS 1).
    OneStream,
    /// Allows one request stream per connection (MAX_STREAMS 1), answers
    /// it, and never gives the credit back (the stream is kept open until
    /// the connection ends): the client's next stream cannot open.
    StreamsExhausted,
    /// `content-length: 10`, then 3 bytes and the end of the stream.
    ShortBody,
    /// `content-length: 3`, then 10 bytes and the end of the stream.
    LongBody,
    /// `103 Early Hints`, then 200.
    EarlyHints,
}

impl H3Fault {
    /// Every fault, in the order of the documentation.
    pub const ALL: [H3Fault; 9] = [
        H3Fault::ResetStream,
        H3Fault::CloseConnection,
        H3Fault::Silent,
        H3Fault::NoHandshake,
        H3Fault::OneStream,
        H3Fault::StreamsExhausted,
        H3Fault::ShortBody,
        H3Fault::LongBody,
        H3Fault::EarlyHints,
    ];

    /// Its name for `--fault`.
    pub fn name(self) -> &'static str {
        match self {
            H3Fault::ResetStream => "h3-reset-stream",
            H3Fault::CloseConnection => "h3-close-connection",
            H3Fault::Silent => "h3-silent",
            H3Fault::NoHandshake => "h3-no-handshake",
            H3Fault::OneStream => "h3-one-stream",
            H3Fault::StreamsExhausted => "h3-streams-exhausted",
            H3Fault::ShortBody => "h3-short-body",
            H3Fault::LongBody => "h3-long-body",
            H3Fault::EarlyHints => "h3-early-hints",
        }
    }
}

impl std::fmt::Display for H3Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--fault` name that is not an HTTP/3 fault.
#[derive(Debug, thiserror::Error)]
#[error(
    "'{given}' is not an HTTP/3 fault; with --http3 choose one of: {}",
    H3Fault::ALL.map(H3Fault::name).join(", ")
)]
pub struct UnknownH3Fault {
    /// What was given.
    pub given: String,
}

impl FromStr for H3Fault {
    type Err = UnknownH3Fault;

    fn from_str(s: &str) -> Result<H3Fault, UnknownH3Fault> {
        H3Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownH3Fault { given: s.to_string() })
    }
}

/// A running HTTP/3 lab server; stops when dropped or on [`H3Server::stop`].
#[derive(Debug)]
pub struct H3Server {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    /// Wakes a server that went silent (`h3-silent`) blocks on it.
    wake: mpsc::Sender<()>,
    /// What its connections share: the codes peers stopped streams with.
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What an [`H3Server`]'s connections share with it.
#[derive(Debug)]
struct Shared {
    /// Wakes a server that went silent (`h3-silent`) blocks on it.
    woken: std::sync::Mutex<mpsc::Receiver<()>>,
    /// The codes of STOP_SENDING frames that ended event streams.
    stops: Stops,
}

impl H3Server {
    /// Binds UDP `listen` and serves HTTP/3 with the certificate of `tls`
    /// (its ALPN is replaced by `h3`; QUIC is TLS 1.3 only), answering
    /// every connection with `fault` when given.
    pub fn start(
        listen: SocketAddr,
        tls: &tokio_rustls::rustls::ServerConfig,
        fault: Option<H3Fault>,
    ) -> io::Result<H3Server> {
        let mut tls = tls.clone();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        tls.max_early_data_size = 0;
        let crypto = QuicServerConfig::try_from(tls).map_err(io::Error::other)?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = quinn::TransportConfig::default();
        transport.max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(if fault == Some(H3Fault::Silent) {
                SILENT_IDLE
            } else {
                HOLD_LIMIT
            })
            .map_err(io::Error::other)?,
        ));
        if matches!(fault, Some(H3Fault::OneStream | H3Fault::StreamsExhausted)) {
            transport.max_concurrent_bidi_streams(1u32.into());
        }
        config.transport_config(Arc::new(transport));
        let socket = std::net::UdpSocket::bind(listen)?;
        let addr = socket.local_addr()?;
        let (shutdown, rx) = watch::channel(false);
        let (wake, woken) = mpsc::channel();
        let shared = Arc::new(Shared {
            woken: std::sync::Mutex::new(woken),
            stops: Stops::default(),
        });
        let serving = Arc::clone(&shared);
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("throng-lab-h3".to_string())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    if fault == Some(H3Fault::NoHandshake) {
                        // Holds the port and reads nothing.
                        let _ = ready_tx.send(Ok(()));
                        let mut rx = rx;
                        let _ = tokio::time::timeout(HOLD_LIMIT * 10, rx.changed()).await;
                        drop(socket);
                        return;
                    }
                    let endpoint = match quinn::Endpoint::new(
                        quinn::EndpointConfig::default(),
                        Some(config),
                        socket,
                        Arc::new(quinn::TokioRuntime),
                    ) {
                        Ok(e) => e,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    serve(endpoint, fault, rx, serving).await;
                });
            })?;
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| io::Error::other("the HTTP/3 server thread did not start"))??;
        Ok(H3Server {
            addr,
            shutdown,
            wake,
            shared,
            thread: Some(thread),
        })
    }

    /// The UDP address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The codes of the STOP_SENDING frames that ended its event streams so
    /// far, each with how many streams it ended (a stream is seen stopped
    /// when its next event cannot be sent, so one stopped as its connection
    /// closed may not count).
    pub fn stop_codes(&self) -> std::collections::BTreeMap<u64, u64> {
        self.shared.stops.codes()
    }

    /// Closes every connection and joins the thread.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        let _ = self.shutdown.send(true);
        let _ = self.wake.send(());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for H3Server {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

async fn serve(
    endpoint: quinn::Endpoint,
    fault: Option<H3Fault>,
    mut shutdown: watch::Receiver<bool>,
    shared: Arc<Shared>,
) {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            loop {
                tokio::select! {
                    incoming = endpoint.accept() => {
                        let Some(incoming) = incoming else { break };
                        tokio::task::spawn_local(connection(incoming, fault, Arc::clone(&shared)));
                    }
                    _ = shutdown.changed() => break,
                }
            }
        })
        .await;
    endpoint.close(0u32.into(), b"lab server stopping");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
}

async fn connection(incoming: quinn::Incoming, fault: Option<H3Fault>, shared: Arc<Shared>) {
    let work = async move {
        let conn = incoming.await.ok()?;
        let quic = conn.clone();
        let mut h3: h3::server::Connection<h3_quinn::Connection, Bytes> =
            h3::server::Connection::new(h3_quinn::Connection::new(conn))
                .await
                .ok()?;
        let mut served = 0u64;
        loop {
            let resolver = h3.accept().await.ok()??;
            served += 1;
            match fault {
                Some(H3Fault::CloseConnection) if served >= 2 => {
                    quic.close(CLOSE_CODE.into(), b"lab fault h3-close-connection");
                    return Some(());
                }
                Some(H3Fault::Silent) => {
                    let _ = resolver.resolve_request().await;
                    // Blocks the thread: the endpoint sends nothing, not
                    // even ACKs, until the server stops or a minute passes.
                    if let Ok(rx) = shared.woken.lock() {
                        let _ = rx.recv_timeout(HOLD_LIMIT);
                    }
                    return Some(());
                }
                _ => {}
            }
            tokio::task::spawn_local(request(resolver, fault, quic.clone(), Arc::clone(&shared)));
        }
    };
    let _ = tokio::time::timeout(HOLD_LIMIT, work).await;
}

async fn request(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    fault: Option<H3Fault>,
    quic: quinn::Connection,
    shared: Arc<Shared>,
) -> Option<()> {
    let (req, mut stream) = resolver.resolve_request().await.ok()?;
    if fault == Some(H3Fault::ResetStream) {
        stream.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
        return Some(());
    }
    if fault.is_none() && crate::h3sse::routes(req.uri().path()) {
        crate::h3sse::answer(req, stream, quic, &shared.stops).await;
        return Some(());
    }
    let path = req.uri().path();
    let (status, mut body) = match path.strip_prefix("/bytes/").map(str::parse::<u64>) {
        None if path == "/" => (200, Bytes::new()),
        Some(Ok(n)) if n <= MAX_BODY => (200, Bytes::from(vec![b'x'; n as usize])),
        _ => (404, Bytes::from_static(b"not found\n")),
    };
    let mut resp = http::Response::builder().status(status).header("server", "throng-lab");
    match fault {
        Some(H3Fault::ShortBody) => {
            resp = resp.header("content-length", SHORT_BODY.1);
            body = Bytes::from(vec![b's'; SHORT_BODY.0]);
        }
        Some(H3Fault::LongBody) => {
            resp = resp.header("content-length", LONG_BODY.1);
            body = Bytes::from(vec![b'l'; LONG_BODY.0]);
        }
        Some(H3Fault::EarlyHints) => {
            let hints = http::Response::builder()
                .status(103)
                .header("link", "</style.css>; rel=preload")
                .body(())
                .ok()?;
            stream.send_response(hints).await.ok()?;
        }
        _ => {}
    }
    stream.send_response(resp.body(()).ok()?).await.ok()?;
    if !body.is_empty() {
        stream.send_data(body).await.ok()?;
    }
    stream.finish().await.ok()?;
    if fault == Some(H3Fault::StreamsExhausted) {
        // The request's end is never read and the stream never dropped:
        // QUIC does not count it closed, so no new credit goes out.
        let _ = tokio::time::timeout(HOLD_LIMIT, quic.closed()).await;
        drop(stream);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_round_trip() {
        for f in H3Fault::ALL {
            assert_eq!(f.name().parse::<H3Fault>().ok(), Some(f));
        }
        let e = "reset"
            .parse::<H3Fault>()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("h3-reset-stream"), "{e}");
    }
}
