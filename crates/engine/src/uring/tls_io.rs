//! The io_uring loop's side of TLS (see [`super::tls`]): a slot's
//! ClientHello after its connect, its records sent (tracked to
//! completion), a receive's records fed to the session, the handshake's
//! end recorded, and failures counted as epoll counts them.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

use io_uring::{opcode, types};
use throng_metrics::ErrorClass;
use throng_tls::rustls::ClientConnection;

use super::Loop;
use super::slot::{Early, OP_SEND, Phase, user_data};
use super::tls::Fed;
use crate::errors::{Stage, classify};
use crate::proto::http1::{Feed, ParseError};

impl Loop<'_> {
    /// Slot `i`'s new connection gets its session before its connect is
    /// issued, as on epoll: the ClientHello (its key shares) is made inside
    /// the `connect` phase, and `tls` starts when it can go out.
    pub(super) fn tls_prepare(&mut self, i: usize) -> io::Result<()> {
        let Some(tls) = self.tls.as_mut() else {
            return Ok(());
        };
        let session = ClientConnection::new(Arc::clone(&tls.client.config), tls.client.server_name.clone());
        match (session, tls.conns.get_mut(i)) {
            (Ok(session), Some(c)) => {
                c.session = Some(session);
                Ok(())
            }
            _ => self.connect_failed(i, ErrorClass::Tls("client_setup")),
        }
    }

    /// Slot `i`'s TCP connection is up at `now`: its ClientHello queued.
    pub(super) fn tls_start(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let timeout = self.ctx.spec.timeout;
        let Some(c) = self.tls.as_mut().and_then(|t| t.conns.get_mut(i)) else {
            return Ok(());
        };
        c.hello = Some(now);
        let s = &mut self.slots[i];
        s.sending = false;
        s.deadline = now + timeout;
        self.tls_flush(i)
    }

    /// Queues slot `i`'s records that are waiting (a handshake flight, the
    /// request with the client's Finished, a reply to the peer's records)
    /// unless a send of it is in the kernel (its completion calls this
    /// again); arms the receive.
    pub(super) fn tls_flush(&mut self, i: usize) -> io::Result<()> {
        let request = self.sends.get(self.ctx, i);
        let timeout = self.ctx.spec.timeout;
        let (Some(tls), Some(s)) = (self.tls.as_mut(), self.slots.get_mut(i)) else {
            return Ok(());
        };
        let Some(c) = tls.conns.get_mut(i) else {
            return Ok(());
        };
        if s.sending || s.fd < 0 {
            return Ok(());
        }
        let Some(session) = c.session.as_mut() else {
            return Ok(());
        };
        let mut first = false;
        if s.phase == Phase::Exchanging && !session.is_handshaking() && s.written < request.len() {
            // The session takes what its buffer limit allows; the rest
            // goes when this is out.
            let n = session.writer().write(&request[s.written..]).unwrap_or(0);
            first = s.written == 0 && n > 0;
            if !first {
                c.spilled = true;
            }
            s.written += n;
            c.request_out = true;
        }
        c.out.clear();
        c.off = 0;
        while session.wants_write() {
            if !matches!(session.write_tls(&mut c.out), Ok(n) if n > 0) {
                break;
            }
        }
        if c.out.is_empty() {
            return self.arm_recv(i);
        }
        if first {
            // Stamped just before the submission (stamp_queued).
            s.deadline = Instant::now() + timeout;
            self.queued.push(i);
        }
        self.tls_send(i)?;
        self.arm_recv(i)
    }

    /// Queues a tracked send of what is left of slot `i`'s records.
    fn tls_send(&mut self, i: usize) -> io::Result<()> {
        let (Some(tls), Some(s)) = (self.tls.as_ref(), self.slots.get_mut(i)) else {
            return Ok(());
        };
        let Some(c) = tls.conns.get(i) else {
            return Ok(());
        };
        let left = &c.out[c.off.min(c.out.len())..];
        let chunk = u32::try_from(left.len()).unwrap_or(u32::MAX);
        // The records stay in `out` until this send's completion: nothing
        // writes there while `sending`.
        let sqe = opcode::Send::new(types::Fd(s.fd), left.as_ptr(), chunk)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .user_data(user_data(i, s.generation, OP_SEND));
        s.sending = true;
        self.push(&sqe)
    }

    /// Slot `i`'s TLS send completed with `res`.
    pub(super) fn tls_sent(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        let len = self.sends.get(self.ctx, i).len();
        let handshaking = self.tls.as_ref().is_some_and(|t| t.handshaking(i));
        let s = &mut self.slots[i];
        s.sending = false;
        let failure = match res {
            n if n < 0 => Some(io::Error::from_raw_os_error(-n)),
            0 => Some(io::ErrorKind::WriteZero.into()),
            _ => None,
        };
        if let Some(e) = failure {
            return self.tls_failed(i, classify(&e, if handshaking { Stage::Tls } else { Stage::Exchange }));
        }
        let Some(c) = self.tls.as_mut().and_then(|t| t.conns.get_mut(i)) else {
            return Ok(());
        };
        c.off += res as usize;
        if c.off < c.out.len() {
            c.spilled = true;
            return self.tls_send(i);
        }
        let more = s.written < len || c.session.as_ref().is_some_and(|c| c.wants_write());
        if s.phase != Phase::Exchanging || !c.request_out || more {
            // A handshake flight went, or a part of the request: what is
            // waiting goes next.
            c.spilled |= c.request_out;
            return self.tls_flush(i);
        }
        // The request is out.
        c.request_out = false;
        s.t_sent = if c.spilled { now } else { s.t_send };
        match std::mem::replace(&mut s.early, Early::None) {
            Early::None => Ok(()),
            Early::Answered { at, extra, kernel } => self.done(i, at, extra, kernel),
            Early::Failed(class) => self.failed(i, class),
        }
    }

    /// Slot `i`'s TLS failed with `class`: in its handshake, the connection
    /// and its request (a warm one has none); after, the request.
    pub(super) fn tls_failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let s = &self.slots[i];
        if matches!(s.phase, Phase::Connecting | Phase::Warming) {
            return self.connect_failed(i, class);
        }
        if s.phase != Phase::Exchanging {
            return self.drop_connection(i);
        }
        self.failed(i, class)
    }

    /// A receive of `payload` for slot `i` (arrived at `at`, by the kernel's
    /// stamp when `kernel`), reaped at `now`.
    pub(super) fn tls_received(
        &mut self,
        i: usize,
        fed: Fed,
        at: Instant,
        kernel: bool,
        now: Instant,
    ) -> io::Result<()> {
        if let Some(class) = fed.failed {
            self.send_alert(i);
            return self.tls_failed(i, class);
        }
        if fed.handshaken {
            self.handshaken(i, now)?;
        }
        let phase = self.slots[i].phase;
        match fed.response {
            Some(Ok(Feed::Done { extra })) => {
                let first = self.slots[i].first.unwrap_or(at);
                return self.done(i, at.max(first), extra > 0 || fed.extra || fed.closed, kernel);
            }
            Some(Err(ParseError::Malformed)) => return self.recv_failed(i, ErrorClass::Protocol),
            Some(Err(ParseError::Eof)) => return self.recv_failed(i, ErrorClass::Eof),
            Some(Ok(Feed::More)) | None => {}
        }
        if fed.closed {
            // The peer's close_notify: the end of the stream.
            return self.eof(i, now);
        }
        match phase {
            Phase::Exchanging if fed.extra => self.slots[i].early.no_reuse(),
            Phase::Connecting | Phase::Warming if fed.extra => return self.connect_failed(i, ErrorClass::Protocol),
            Phase::Idle | Phase::Done if fed.extra => return self.drop_connection(i),
            _ => {}
        }
        if matches!(phase, Phase::Connecting | Phase::Warming | Phase::Exchanging) && self.slots[i].fd >= 0 {
            // A handshake flight, or a reply to the peer's records.
            return self.tls_flush(i);
        }
        Ok(())
    }

    /// Slot `i`'s handshake ended at `now`: the `tls` sample and the
    /// report's line, the connection established; its request goes out
    /// with the client's Finished (a warm connection's waits for one).
    fn handshaken(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        let Some(c) = self.tls.as_mut().and_then(|t| t.conns.get_mut(i)) else {
            return Ok(());
        };
        let (Some(hello), Some(session)) = (c.hello.take(), c.session.as_ref()) else {
            return Ok(());
        };
        ctx.connecting.set(ctx.connecting.get() - 1);
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.tls_handshake(now, now - hello, crate::transport::negotiated(session));
            rec.connection_established(now, false);
        }
        let s = &mut self.slots[i];
        if s.phase == Phase::Warming {
            s.phase = Phase::Idle;
            self.active -= 1;
            self.starts.push(i);
            return Ok(());
        }
        s.phase = Phase::Exchanging;
        Ok(())
    }

    /// Tells the peer why slot `i`'s session failed, if it can without
    /// waiting (best effort, as epoll does; the connection closes next).
    fn send_alert(&mut self, i: usize) {
        let Some(tls) = self.tls.as_mut() else { return };
        let s = &self.slots[i];
        if s.fd < 0 || s.sending {
            return;
        }
        let alert = tls.alert(i);
        if !alert.is_empty() {
            // SAFETY: a send of a buffer we own on a socket this worker owns.
            unsafe {
                libc::send(
                    s.fd,
                    alert.as_ptr().cast(),
                    alert.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
        }
    }
}
