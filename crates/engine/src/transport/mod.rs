//! A connection's byte stream: plain TCP, TLS over TCP, or a WebSocket's
//! binary messages over either (MQTT over WebSocket, [`ws`]).

pub(crate) mod held;
pub(crate) mod ws;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use std::sync::Arc;

use std::os::fd::AsRawFd;
use throng_metrics::{ErrorClass, Handshake};
use throng_tls::rustls::pki_types::ServerName;
use throng_tls::rustls::{ClientConfig, HandshakeKind};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::errors::{Stage, classify};
use crate::stamps::{self, Stamp};
use crate::tls_stream::TlsStream;

/// What a worker needs to speak TLS to the target.
#[derive(Clone)]
pub(crate) struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// Plain or TLS, or WebSocket over one of them. The TLS and WebSocket
/// states are boxed: they are large, and plain connections should not pay
/// for them.
pub(crate) enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
    Ws(Box<ws::WsStream>),
}

/// Finishes a TLS handshake whose ClientHello (`hello`) went out with the
/// connect (its first `written` bytes did), within the deadline `sleep` was
/// armed with. With `flush` false the client's Finished waits for the first
/// request. Returns the stream, what was negotiated and when it completed.
pub(crate) async fn handshake(
    tcp: TcpStream,
    tls: throng_tls::rustls::ClientConnection,
    hello: &[u8],
    written: usize,
    flush: bool,
    sleep: Pin<&mut Sleep>,
) -> Result<(Transport, Handshake, Instant), ErrorClass> {
    let mut stream = TlsStream::new(tcp, tls);
    let work = async {
        if written < hello.len() {
            stream.io.write_all(&hello[written..]).await?;
        }
        stream.handshake(flush).await
    };
    tokio::select! {
        biased;
        r = work => r.map_err(|e| classify(&e, Stage::Tls))?,
        () = sleep => return Err(ErrorClass::TimeoutTls),
    }
    let done = Instant::now();
    let h = negotiated(&stream.tls);
    Ok((Transport::Tls(Box::new(stream)), h, done))
}

/// What a completed handshake negotiated, for the TLS report line (the
/// epoll and io_uring paths alike).
pub(crate) fn negotiated(c: &throng_tls::rustls::ClientConnection) -> Handshake {
    Handshake {
        version: c.protocol_version().and_then(|v| v.as_str()).unwrap_or("unknown"),
        group: c
            .negotiated_key_exchange_group()
            .and_then(|g| g.name().as_str())
            .unwrap_or(""),
        cipher: c
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown"),
        resumed: matches!(c.handshake_kind(), Some(HandshakeKind::Resumed)),
        hello_retry: matches!(c.handshake_kind(), Some(HandshakeKind::FullWithHelloRetryRequest)),
    }
}

impl Transport {
    /// Reads into `buf`, and says when the bytes arrived by the kernel's
    /// receive stamp (`stamped`: the socket was asked for them, see
    /// [`crate::stamps`]). Plain TCP: the stamp of the last segment this
    /// read took. TLS: the stamp of the last socket read that fed the TLS
    /// session before this plaintext came out of it, so a record that
    /// arrived in pieces is stamped with its last piece.
    pub(crate) fn poll_read_stamped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
        stamped: bool,
    ) -> Poll<io::Result<Option<Stamp>>> {
        match self {
            Transport::Plain(s) if stamped => loop {
                std::task::ready!(s.poll_read_ready(cx))?;
                let fd = s.as_raw_fd();
                let room = buf.remaining();
                let mut short = None;
                // A read shorter than the room drained the socket: say
                // WouldBlock to tokio so that it forgets the readiness now,
                // and the next read waits for the next edge instead of
                // making a system call only to hear EAGAIN (one system call
                // fewer per request). Data that arrives meanwhile raises a
                // new edge, so nothing is missed. The bytes are kept aside.
                let read = s.try_io(Interest::READABLE, || {
                    let (n, stamp) = stamps::recv(fd, buf.initialize_unfilled())?;
                    if n < room {
                        short = Some((n, stamp));
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    Ok((n, stamp))
                });
                match (read, short) {
                    (_, Some((n, stamp))) | (Ok((n, stamp)), None) => {
                        buf.advance(n);
                        return Poll::Ready(Ok(stamp));
                    }
                    (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => {}
                    (Err(e), None) => return Poll::Ready(Err(e)),
                }
            },
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf).map_ok(|()| None),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf).map_ok(|()| s.arrival()),
            Transport::Ws(s) => Pin::new(s.as_mut()).poll_read(cx, buf).map_ok(|()| None),
        }
    }

    /// The TCP socket underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(t) => t,
            Transport::Tls(s) => &s.io,
            Transport::Ws(s) => s.inner().tcp(),
        }
    }

    /// From now on, TLS keeps the receive stamps of its socket reads (the
    /// socket was asked for them at connect; plain TCP needs nothing more).
    pub(crate) fn keep_stamps(&mut self) {
        if let Transport::Tls(s) = self {
            s.keep_stamps();
        }
    }

    /// Drops the TLS session state and keeps the socket. For a connection
    /// that will carry no more application data (a storm's hold): the
    /// server sees an idle TLS connection either way, and the client keeps
    /// ~1.5 KB instead of ~10 KB (rustls' 4 KB record buffer, AEAD contexts,
    /// the peer's certificates). Closing it later sends no close_notify —
    /// as a client closing with the session state kept does here too.
    pub(crate) fn shed_tls(self) -> Transport {
        match self {
            Transport::Tls(s) => Transport::Plain(s.io),
            plain => plain,
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Transport::Ws(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            // Try the system call first: tokio's poll_write spends the task's
            // cooperative budget and, once it is spent, yields *before*
            // writing, so a request timed as sent would leave only after
            // every other ready task ran. The worker yields between requests
            // instead (and reads still spend the budget). TLS writes the
            // same way (see tls_stream::SyncIo).
            Transport::Plain(s) => match s.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Pin::new(s).poll_write(cx, buf),
                r => Poll::Ready(r),
            },
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Transport::Ws(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Transport::Ws(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Transport::Ws(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
