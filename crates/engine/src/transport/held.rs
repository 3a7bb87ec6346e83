//! A transport's layers over a socket the storm's holder keeps without a
//! task (`crate::storm`'s holder): TLS records through the connection's
//! rustls session, and WebSocket framing (binary messages carrying the
//! protocol's bytes, the server's pings answered, its close the end). The
//! holder reads the socket and hands the bytes here; the protocol's bytes
//! come out, and what the protocol sends goes back through the layers and
//! out with a non-blocking send, whole or not at all.
//!
//! ```text
//!  socket bytes ─► [TLS: read_tls, process] ─► plaintext ─► [WS: frames]
//!        ─► binary message ─► protocol        ping ─► pong; close, text ─► over
//!  protocol bytes ─► [WS: a masked binary frame] ─► [TLS: records] ─► socket
//! ```
//!
//! A held session over TLS keeps its rustls session (boxed, as the task
//! kept it); over WebSocket, 16 bytes between frames (its masks, and a
//! boxed frame reader only while a frame is cut short).

use std::io::{self, Read, Write};
use std::os::fd::RawFd;

use throng_tls::rustls::ClientConnection;
use tokio::net::TcpStream;

use super::Transport;
use crate::proto::ws::frame::{self, Event, Masks, Reader};

/// Plaintext taken out of the TLS session per call (a record is at most
/// 16 KiB; the rest comes in the next turns of the loop).
const PLAIN_CHUNK: usize = 4096;

/// The layers over one held socket (none for plain TCP).
pub(crate) struct Layers {
    tls: Option<Box<ClientConnection>>,
    ws: Option<WsLayer>,
}

/// A WebSocket's state while held.
struct WsLayer {
    masks: Masks,
    /// A frame a read cut short, or a fragmented message under way.
    partial: Option<Box<Reader>>,
}

/// A held socket's parts: the socket, its layers, and protocol bytes
/// already taken off the layers and not yet read.
pub(crate) type Parts = (TcpStream, Option<Box<Layers>>, Vec<u8>);

/// Takes a transport apart for the holder, or gives it back when it
/// cannot be held so (the peer ended it; writes are pending).
pub(crate) fn unwrap(t: Transport) -> Result<Parts, Transport> {
    match t {
        Transport::Plain(tcp) => Ok((tcp, None, Vec::new())),
        Transport::Tls(s) if s.can_part() => {
            let (tcp, tls) = (*s).into_parts();
            let layers = Layers {
                tls: Some(Box::new(tls)),
                ws: None,
            };
            Ok((tcp, Some(Box::new(layers)), Vec::new()))
        }
        Transport::Ws(s) if s.can_part() => {
            let (inner, masks, reader, ready) = (*s).into_parts();
            let (tcp, tls) = match inner {
                Transport::Plain(tcp) => (tcp, None),
                Transport::Tls(t) => {
                    let (tcp, tls) = (*t).into_parts();
                    (tcp, Some(Box::new(tls)))
                }
                // Not reached: can_part refuses a WebSocket in a WebSocket.
                w @ Transport::Ws(_) => return Err(w),
            };
            let partial = (!reader.idle()).then(|| Box::new(reader));
            let ws = Some(WsLayer { masks, partial });
            Ok((tcp, Some(Box::new(Layers { tls, ws })), ready))
        }
        t => Err(t),
    }
}

impl Layers {
    /// Handles `raw` bytes read off the socket `fd` (empty: only what the
    /// layers hold already): the protocol's bytes go to `take`, with a
    /// `send` that writes back through the layers (both return false when
    /// the session cannot go on). False when the session is over: TLS's
    /// close_notify or a bad record, a WebSocket close, a text message or
    /// broken framing, or `take` said so.
    pub(crate) fn read(
        &mut self,
        fd: RawFd,
        raw: &[u8],
        take: &mut impl FnMut(&[u8], &mut dyn FnMut(&[u8]) -> bool) -> bool,
    ) -> bool {
        let Layers { tls, ws } = self;
        let Some(t) = tls.as_deref_mut() else {
            return match ws {
                Some(w) => ws_in(w, None, fd, raw, take),
                None => take(raw, &mut |b| send_now(fd, b)),
            };
        };
        if !tls_in(t, fd, raw) {
            return false;
        }
        loop {
            let mut chunk = [0u8; PLAIN_CHUNK];
            let n = match t.reader().read(&mut chunk) {
                // The peer's close_notify.
                Ok(0) => return false,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            };
            let open = match ws {
                Some(w) => ws_in(w, Some(t), fd, &chunk[..n], take),
                None => take(&chunk[..n], &mut |b| tls_out(t, fd, b)),
            };
            if !open {
                return false;
            }
        }
    }

    /// Sends the protocol's `bytes` through the layers, whole now or not
    /// at all (false: the session cannot go on).
    pub(crate) fn send(&mut self, fd: RawFd, bytes: &[u8]) -> bool {
        let Layers { tls, ws } = self;
        match ws {
            Some(w) => ws_out(&mut w.masks, tls.as_deref_mut(), fd, frame::BINARY, bytes),
            None => out(tls.as_deref_mut(), fd, bytes),
        }
    }
}

/// Feeds socket bytes to the TLS session (and sends what it answers, a
/// key update's): false when they are not TLS the session takes.
fn tls_in(tls: &mut ClientConnection, fd: RawFd, mut raw: &[u8]) -> bool {
    while !raw.is_empty() {
        // 0 with bytes left: the session's buffer refuses them.
        if !matches!(tls.read_tls(&mut raw), Ok(n) if n > 0) {
            return false;
        }
        if tls.process_new_packets().is_err() {
            // Tell the peer why, as a TLS stack should; best effort.
            flush(tls, fd);
            return false;
        }
    }
    flush(tls, fd)
}

/// Plaintext from the socket through the WebSocket's frames: binary
/// messages to `take`, pings answered.
fn ws_in(
    w: &mut WsLayer,
    mut tls: Option<&mut ClientConnection>,
    fd: RawFd,
    plain: &[u8],
    take: &mut impl FnMut(&[u8], &mut dyn FnMut(&[u8]) -> bool) -> bool,
) -> bool {
    let reader = w.partial.get_or_insert_with(Box::default);
    reader.push(plain);
    loop {
        let Some(reader) = w.partial.as_mut() else { return true };
        let open = match reader.next() {
            Ok(None) => {
                if reader.idle() {
                    w.partial = None;
                }
                return true;
            }
            Ok(Some(Event::Message { binary: true, data })) => {
                let masks = &mut w.masks;
                take(&data, &mut |b| ws_out(masks, tls.as_deref_mut(), fd, frame::BINARY, b))
            }
            Ok(Some(Event::Ping(payload))) => ws_out(&mut w.masks, tls.as_deref_mut(), fd, frame::PONG, &payload),
            Ok(Some(Event::Pong(_))) => true,
            Ok(Some(Event::Close(code))) => {
                // Answered, as the task's stream does; the session is over.
                ws_out(
                    &mut w.masks,
                    tls.as_deref_mut(),
                    fd,
                    frame::CLOSE,
                    &frame::close_payload(code),
                );
                false
            }
            // A text message where binary ones carry the protocol, or
            // broken framing.
            Ok(Some(Event::Message { binary: false, .. })) | Err(_) => false,
        };
        if !open {
            return false;
        }
    }
}

/// One masked frame through TLS (when there is one) to the socket.
fn ws_out(masks: &mut Masks, tls: Option<&mut ClientConnection>, fd: RawFd, opcode: u8, payload: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(payload.len() + 14);
    frame::encode(&mut framed, true, opcode, payload, masks.next());
    out(tls, fd, &framed)
}

/// Bytes through TLS (when there is one) to the socket.
fn out(tls: Option<&mut ClientConnection>, fd: RawFd, bytes: &[u8]) -> bool {
    match tls {
        Some(t) => tls_out(t, fd, bytes),
        None => send_now(fd, bytes),
    }
}

fn tls_out(tls: &mut ClientConnection, fd: RawFd, bytes: &[u8]) -> bool {
    tls.writer().write_all(bytes).is_ok() && flush(tls, fd)
}

/// Writes the TLS session's pending records now: false when the socket
/// does not take them all.
fn flush(tls: &mut ClientConnection, fd: RawFd) -> bool {
    while tls.wants_write() {
        if !matches!(tls.write_tls(&mut FdOut(fd)), Ok(n) if n > 0) {
            return false;
        }
    }
    true
}

/// A socket as the Write rustls writes records to: never blocks.
struct FdOut(RawFd);

impl Write for FdOut {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `bytes` is readable for its length; the descriptor is
            // open (the holder owns it while it calls here).
            let n = unsafe {
                libc::send(
                    self.0,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            match usize::try_from(n) {
                Ok(n) => return Ok(n),
                Err(_) => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `bytes` now or not at all: false when the socket would block
/// (the server reads nothing: the connection cannot go on) or is broken.
/// A held connection writes a few bytes a keep-alive, so a full send
/// buffer means a stuck server, not a burst.
pub(crate) fn send_now(fd: RawFd, bytes: &[u8]) -> bool {
    matches!(FdOut(fd).write(bytes), Ok(n) if n == bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// A server frame (unmasked, short).
    fn server(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0x80 | opcode, u8::try_from(payload.len()).unwrap()];
        f.extend_from_slice(payload);
        f
    }

    /// A client frame's opcode and unmasked payload.
    fn unmask(f: &[u8]) -> (u8, Vec<u8>) {
        let len = usize::from(f[1] & 0x7F);
        let m = &f[2..6];
        let data = f[6..6 + len].iter().enumerate().map(|(i, b)| b ^ m[i % 4]).collect();
        (f[0] & 0x0F, data)
    }

    fn ws_layers() -> Layers {
        Layers {
            tls: None,
            ws: Some(WsLayer {
                masks: Masks::new(5),
                partial: None,
            }),
        }
    }

    /// Binary messages cut anywhere come out whole and in order, a ping
    /// between them is answered with its pong, what the protocol sends
    /// goes out in a masked binary frame, and the reader is dropped once
    /// no frame is cut.
    #[test]
    fn websocket_frames_cut_anywhere_carry_the_protocols_bytes() {
        let mut wire = server(frame::BINARY, b"ab");
        wire.extend(server(frame::PING, b"p"));
        wire.extend(server(frame::BINARY, b"cd"));
        for cut in 0..=wire.len() {
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            let mut layers = ws_layers();
            let mut got = Vec::new();
            let mut take = |b: &[u8], send: &mut dyn FnMut(&[u8]) -> bool| {
                got.extend_from_slice(b);
                b != b"cd" || send(b"ok")
            };
            assert!(layers.read(ours.as_raw_fd(), &wire[..cut], &mut take), "cut at {cut}");
            assert!(layers.read(ours.as_raw_fd(), &wire[cut..], &mut take), "cut at {cut}");
            assert_eq!(got, b"abcd", "cut at {cut}");
            assert!(layers.ws.as_ref().unwrap().partial.is_none(), "cut at {cut}");
            drop(ours);
            let mut sent = Vec::new();
            theirs.read_to_end(&mut sent).unwrap();
            assert_eq!(unmask(&sent[..7]), (frame::PONG, b"p".to_vec()), "cut at {cut}");
            assert_eq!(unmask(&sent[7..]), (frame::BINARY, b"ok".to_vec()), "cut at {cut}");
        }
    }

    /// A close is answered and ends the session; so does a text message
    /// or a masked frame from the server.
    #[test]
    fn a_websocket_close_or_broken_frame_ends_the_session() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut layers = ws_layers();
        let mut take = |_: &[u8], _: &mut dyn FnMut(&[u8]) -> bool| true;
        let close = server(frame::CLOSE, &1001u16.to_be_bytes());
        assert!(!layers.read(ours.as_raw_fd(), &close, &mut take));
        drop(ours);
        let mut sent = Vec::new();
        theirs.read_to_end(&mut sent).unwrap();
        assert_eq!(unmask(&sent), (frame::CLOSE, 1001u16.to_be_bytes().to_vec()));
        for bad in [server(frame::TEXT, b"hi"), vec![0x82, 0x81, 0, 0, 0, 0, 0]] {
            let (ours, _theirs) = UnixStream::pair().unwrap();
            assert!(!ws_layers().read(ours.as_raw_fd(), &bad, &mut take));
        }
    }

    /// What a WebSocket session keeps between frames.
    #[test]
    fn a_held_websocket_keeps_a_few_bytes() {
        assert!(std::mem::size_of::<Layers>() <= 32, "{}", std::mem::size_of::<Layers>());
    }
}
