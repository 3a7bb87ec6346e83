//! TLS over a tokio TcpStream, driven directly with rustls.
//!
//! Why not tokio-rustls: a storm's cost is dominated by system calls and
//! segments per connection. Driving rustls ourselves lets the ClientHello
//! leave in the system call after `connect()` (see conn::connect), and the
//! client's Finished leave together with the first request in one write,
//! instead of three writes and a readiness wait — two system calls and two
//! segments fewer per connection on both sides, and no wrapper state.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use std::os::fd::AsRawFd;
use throng_tls::rustls::pki_types::ServerName;
use throng_tls::rustls::{ClientConfig, ClientConnection};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::stamps::{self, Stamp};

/// A client TLS connection over TCP.
pub(crate) struct TlsStream {
    pub(crate) io: TcpStream,
    pub(crate) tls: ClientConnection,
    /// The peer's close_notify (or the socket's end) was seen.
    eof: bool,
    /// Socket reads ask for the kernel's receive stamp (see crate::stamps).
    stamped: bool,
    /// The stamp of the last socket read that brought one.
    arrival: Option<Stamp>,
}

/// Adapts a TcpStream to the blocking Read/Write rustls expects: WouldBlock
/// when the socket has nothing (tokio then waits for readiness).
struct SyncIo<'a>(&'a TcpStream);

impl Read for SyncIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

/// A SyncIo for reads that keeps the kernel's receive stamp.
struct StampedIo<'a>(&'a TcpStream, &'a mut Option<Stamp>);

impl Read for StampedIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let fd = self.0.as_raw_fd();
        let (n, stamp) = self.0.try_io(Interest::READABLE, || stamps::recv(fd, buf))?;
        if stamp.is_some() {
            *self.1 = stamp;
        }
        Ok(n)
    }
}

impl Write for SyncIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A new client connection and its first flight (the ClientHello), to be
/// sent with the TCP connect.
pub(crate) fn start(config: Arc<ClientConfig>, name: ServerName<'static>) -> io::Result<(ClientConnection, Vec<u8>)> {
    let mut tls = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let mut hello = Vec::with_capacity(2048);
    while tls.wants_write() {
        tls.write_tls(&mut hello)?;
    }
    Ok((tls, hello))
}

impl TlsStream {
    /// Wraps a connected socket whose ClientHello went out.
    pub(crate) fn new(io: TcpStream, tls: ClientConnection) -> Self {
        TlsStream {
            io,
            tls,
            eof: false,
            stamped: false,
            arrival: None,
        }
    }

    /// Keeps the kernel's receive stamps of socket reads from now on (the
    /// socket was asked for them).
    pub(crate) fn keep_stamps(&mut self) {
        self.stamped = true;
    }

    /// The stamp of the last socket read that brought one.
    pub(crate) fn arrival(&self) -> Option<Stamp> {
        self.arrival
    }

    /// True when the storm's holder can drive this session without a task
    /// (see `crate::transport::held`): the peer has not ended it and no
    /// records wait to be written.
    pub(crate) fn can_part(&self) -> bool {
        !self.eof && !self.tls.wants_write()
    }

    /// The socket and the TLS session (see [`Self::can_part`]).
    pub(crate) fn into_parts(self) -> (TcpStream, ClientConnection) {
        (self.io, self.tls)
    }

    /// Runs the handshake to completion. With `flush` false, the client's
    /// last flight stays buffered, to leave with the first request.
    pub(crate) async fn handshake(&mut self, flush: bool) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            while self.tls.is_handshaking() {
                if self.tls.wants_write() {
                    ready!(self.poll_write_tls(cx))?;
                    continue;
                }
                ready!(self.poll_read_tls(cx))?;
                if self.eof {
                    return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
                }
            }
            if flush {
                while self.tls.wants_write() {
                    ready!(self.poll_write_tls(cx))?;
                }
            }
            Poll::Ready(Ok(()))
        })
        .await
    }

    /// Reads TLS records from the socket into rustls and processes them.
    fn poll_read_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let read = if self.stamped {
                self.tls.read_tls(&mut StampedIo(&self.io, &mut self.arrival))
            } else {
                self.tls.read_tls(&mut SyncIo(&self.io))
            };
            match read {
                Ok(0) => {
                    self.eof = true;
                    return Poll::Ready(Ok(()));
                }
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.io.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        if let Err(e) = self.tls.process_new_packets() {
            // Tell the peer why, as a TLS stack should; best effort.
            let _ = self.tls.write_tls(&mut SyncIo(&self.io));
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Poll::Ready(Ok(()))
    }

    /// Writes pending TLS records to the socket (one vectored write).
    fn poll_write_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.tls.write_tls(&mut SyncIo(&self.io)) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.io.poll_write_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.tls.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    // 0: the peer's close_notify — end of stream.
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            if this.eof {
                // The socket ended without close_notify: an early end.
                return Poll::Ready(Ok(()));
            }
            ready!(this.poll_read_tls(cx))?;
            // Records that came with the response's read may need a reply
            // (key updates); send it on the way.
            if this.tls.wants_write() {
                let _ = this.poll_write_tls(cx);
            }
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = this.tls.writer().write(buf)?;
        // Push out what is encrypted (with any handshake records still
        // waiting); what the socket does not take now is flushed later.
        while this.tls.wants_write() {
            match this.poll_write_tls(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.tls.wants_write() {
            ready!(this.poll_write_tls(cx))?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.tls.send_close_notify();
        while this.tls.wants_write() {
            ready!(this.poll_write_tls(cx))?;
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
