//! A WebSocket as a byte stream, for protocols that travel over one
//! (MQTT over WebSocket): what is written goes out in masked binary
//! frames, what binary messages bring is read in order, whatever the
//! frames' boundaries (a packet may span messages, a message hold several
//! packets). The server's pings are answered, its close ends the stream.
//! Framing is `crate::proto::ws::frame`'s; the upgrade,
//! `crate::proto::ws::upgrade_stream`'s.
//!
//! ```text
//!  poll_write(bytes) ──► one masked binary frame ──► out ──► inner
//!  inner ──► Reader ──► binary message ──► ready ──► poll_read
//!                   └─► ping ──► pong into out;  close ──► end of stream
//! ```

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Transport;
use crate::proto::ws::frame::{self, Event, FrameError, Masks, Reader};

/// Bytes one read from the socket takes.
const READ_CHUNK: usize = 4096;

/// Pongs wait to be written while less than this is: a server that pings
/// and never reads gets its latest pings answered, not a buffer that grows
/// (RFC 6455 5.5.3 lets a pong answer only the latest ping).
const MAX_PENDING: usize = 16 * 1024;

/// A WebSocket's binary messages as one stream of bytes, over a transport
/// that has been upgraded.
pub(crate) struct WsStream {
    inner: Transport,
    reader: Reader,
    masks: Masks,
    /// A received message's bytes not yet read (at most one message:
    /// [`frame::MAX_MESSAGE`]).
    ready: Vec<u8>,
    taken: usize,
    /// Frames encoded and not yet written: a write's frame, pongs, the
    /// close's answer (bounded: a write waits for it to drain first).
    out: Vec<u8>,
    sent: usize,
    /// The server closed (a close frame, or the end of its stream).
    closed: bool,
}

impl WsStream {
    /// Over `inner`, whose upgrade was answered with `rest` after the 101's
    /// head (frames the server sent at once); masks seeded with `seed`.
    pub(crate) fn new(inner: Transport, rest: &[u8], seed: u64) -> WsStream {
        let mut reader = Reader::default();
        reader.push(rest);
        WsStream {
            inner,
            reader,
            masks: Masks::new(seed),
            ready: Vec::new(),
            taken: 0,
            out: Vec::new(),
            sent: 0,
            closed: false,
        }
    }

    /// The upgraded transport underneath.
    pub(crate) fn inner(&self) -> &Transport {
        &self.inner
    }

    /// True when the storm's holder can go on with this WebSocket without a
    /// task (see `super::held`): the server has not closed it, no frames
    /// wait to be written, and the transport underneath can be taken apart
    /// too.
    pub(crate) fn can_part(&self) -> bool {
        let inner = match &self.inner {
            Transport::Plain(_) => true,
            Transport::Tls(t) => t.can_part(),
            Transport::Ws(_) => false,
        };
        inner && !self.closed && self.sent == self.out.len()
    }

    /// The transport underneath, the masks, the frame reader and the
    /// message bytes not yet read (see [`Self::can_part`]).
    pub(crate) fn into_parts(self) -> (Transport, Masks, Reader, Vec<u8>) {
        let mut ready = self.ready;
        ready.drain(..self.taken);
        (self.inner, self.masks, self.reader, ready)
    }

    fn queue(&mut self, opcode: u8, payload: &[u8]) {
        let mask = self.masks.next();
        frame::encode(&mut self.out, true, opcode, payload, mask);
    }

    /// Writes what `out` holds; Ready once it is all written.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out[self.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    // Keep only what is still to write: `out` holds no
                    // more than the pongs' bound and one write's frame.
                    self.out.drain(..self.sent);
                    self.sent = 0;
                    return Poll::Pending;
                }
            }
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

fn broken(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, FrameError(why))
}

impl AsyncRead for WsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.taken);
                buf.put_slice(&this.ready[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.ready.len() {
                    this.ready.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.closed {
                return Poll::Ready(Ok(()));
            }
            match this.reader.next().map_err(|e| broken(e.0))? {
                Some(Event::Message { binary: true, data }) => {
                    this.ready = data;
                    this.taken = 0;
                }
                Some(Event::Message { binary: false, .. }) => {
                    return Poll::Ready(Err(broken("a text message where binary ones carry the protocol")));
                }
                Some(Event::Ping(payload)) => {
                    if this.out.len() - this.sent < MAX_PENDING {
                        this.queue(frame::PONG, &payload);
                    }
                    // Out now if the socket takes it, else with the next write.
                    if let Poll::Ready(Err(e)) = this.drain(cx) {
                        return Poll::Ready(Err(e));
                    }
                }
                Some(Event::Pong(_)) => {}
                Some(Event::Close(code)) => {
                    this.closed = true;
                    this.queue(frame::CLOSE, &frame::close_payload(code));
                    let _ = this.drain(cx);
                }
                None => {
                    let mut chunk = [0u8; READ_CHUNK];
                    let mut rb = ReadBuf::new(&mut chunk);
                    std::task::ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
                    if rb.filled().is_empty() {
                        this.closed = true;
                    } else {
                        this.reader.push(rb.filled());
                    }
                }
            }
        }
    }
}

impl AsyncWrite for WsStream {
    /// Takes all of `buf` as one frame once the frames before it are out.
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.drain(cx))?;
        this.queue(frame::BINARY, buf);
        // Out now if the socket takes it; a flush finishes it otherwise.
        if let Poll::Ready(Err(e)) = this.drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A server frame (unmasked).
    fn server(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x80 | opcode];
        assert!(payload.len() < 126);
        f.push(payload.len() as u8);
        f.extend_from_slice(payload);
        f
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    }

    #[tokio::test]
    async fn bytes_cross_frame_boundaries_and_pings_are_answered() {
        let (c, mut s) = pair().await;
        // Two packets' bytes in three messages, a ping among them; the
        // first message came with the 101.
        let first = server(frame::BINARY, b"ab");
        let mut rest = server(frame::PING, b"p");
        rest.extend(server(frame::BINARY, b"cdef"));
        rest.extend(server(frame::BINARY, b"g"));
        s.write_all(&rest).await.unwrap();
        let mut ws = WsStream::new(Transport::Plain(c), &first, 7);
        let mut got = [0u8; 7];
        ws.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"abcdefg");
        ws.write_all(b"xyz").await.unwrap();
        ws.flush().await.unwrap();
        let mut wire = [0u8; 16];
        s.read_exact(&mut wire).await.unwrap();
        // The client's frames are masked: unmask them as a server would.
        let unmask = |f: &[u8]| -> (u8, Vec<u8>) {
            let len = usize::from(f[1] & 0x7F);
            assert_eq!(f[1] & 0x80, 0x80, "masked");
            let m = &f[2..6];
            (
                f[0] & 0x0F,
                f[6..6 + len].iter().enumerate().map(|(i, b)| b ^ m[i % 4]).collect(),
            )
        };
        assert_eq!(unmask(&wire[..7]), (frame::PONG, b"p".to_vec()));
        assert_eq!(unmask(&wire[7..]), (frame::BINARY, b"xyz".to_vec()));
        // A close ends the stream, answered with a close.
        s.write_all(&server(frame::CLOSE, &1000u16.to_be_bytes()))
            .await
            .unwrap();
        assert_eq!(ws.read(&mut got).await.unwrap(), 0);
        let mut close = [0u8; 8];
        s.read_exact(&mut close).await.unwrap();
        assert_eq!(unmask(&close), (frame::CLOSE, 1000u16.to_be_bytes().to_vec()));
    }

    #[tokio::test]
    async fn a_server_that_pings_and_never_reads_cannot_grow_the_pongs_waiting() {
        let (c, mut s) = pair().await;
        let ping = server(frame::PING, &[7; 125]);
        let mut ws = WsStream::new(Transport::Plain(c), &[], 3);
        // Far more pongs than the socket's buffers take, then one byte of
        // data: the reader gets through the pings to it.
        let writer = tokio::spawn(async move {
            for _ in 0..40_000 {
                s.write_all(&ping).await.unwrap();
            }
            s.write_all(&server(frame::BINARY, b"x")).await.unwrap();
            s
        });
        let mut b = [0u8; 1];
        ws.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"x");
        assert!(ws.out.len() < MAX_PENDING + 256, "{} bytes of pongs kept", ws.out.len());
        drop(writer.await.unwrap());
    }

    #[tokio::test]
    async fn a_text_message_or_broken_framing_is_a_ws_protocol_error() {
        for bad in [server(frame::TEXT, b"hi"), vec![0x83, 0]] {
            let (c, mut s) = pair().await;
            s.write_all(&bad).await.unwrap();
            let mut ws = WsStream::new(Transport::Plain(c), &[], 1);
            let mut b = [0u8; 4];
            let e = ws.read(&mut b).await.unwrap_err();
            assert_eq!(
                crate::errors::classify(&e, crate::errors::Stage::Exchange),
                throng_metrics::ErrorClass::WsProtocol
            );
        }
    }
}
