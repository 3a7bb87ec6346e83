//! A TLS storm connection on the ring (tls://, https://): its session made
//! before its connect (as on epoll, the ClientHello inside `connect`), the
//! handshake's flights through tracked sends and the multishot receive
//! (through [`super::super::tls::Tls`], the ring's HTTP path's), the `tls`
//! phase from TCP connected to the handshake's end, the connection
//! established only then, the one request with the client's Finished, and
//! the session shed before the hold.
//!
//! ```text
//!  connect ─► Handshaking: ClientHello, flights ─► handshake done: `tls`, established
//!                 │ alert, bad record, EOF, RST,        ├─ request: Exchanging (Finished + request)
//!                 │ timeout: tls.* / reset / timeout.tls └─ none: Finished sent ─► shed ─► hold
//!                 ▼
//!            connection (and request) failed, as epoll classes it
//! ```
//!
//! A held connection keeps no session and no buffer, as the epoll storm's
//! hold sheds its TLS: the server's later records (session tickets, its
//! close_notify) are read and dropped, its TCP close ends the hold; the
//! close sends no close_notify (neither does epoll's).

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

use io_uring::{opcode, types};
use throng_metrics::ErrorClass;
use throng_tls::rustls::ClientConnection;

use super::super::slot::{OP_SEND, user_data};
use super::{Phase, Storm};
use crate::errors::{Stage, classify};
use crate::proto::http1::{Feed, ParseError};
use crate::proto::session::Session;

impl Storm<'_> {
    /// Slot `i`'s next connect gets a new session (its ClientHello made
    /// now, inside the `connect` phase, as on epoll); false when rustls
    /// refuses one (recorded: the opening failed).
    pub(super) fn tls_prepare(&mut self, i: usize) -> io::Result<bool> {
        let Some(tls) = self.tls.as_mut() else {
            return Ok(true);
        };
        tls.grow(i + 1);
        let session = ClientConnection::new(Arc::clone(&tls.client.config), tls.client.server_name.clone());
        match (session, tls.conns.get_mut(i)) {
            (Ok(session), Some(c)) => {
                c.session = Some(session);
                Ok(true)
            }
            _ => {
                self.connect_failed(i, ErrorClass::Tls("client_setup"))?;
                Ok(false)
            }
        }
    }

    /// Slot `i`'s TCP connection is up at `now`: its ClientHello goes out,
    /// the handshake's deadline set.
    pub(super) fn tls_start(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let Some(c) = self.tls.as_mut().and_then(|t| t.conns.get_mut(i)) else {
            return self.connect_failed(i, ErrorClass::Tls("client_setup"));
        };
        c.hello = Some(now);
        self.slots[i].phase = Phase::Handshaking;
        self.deadline(i, now + self.ctx.spec.timeout);
        self.tls_flush(i)
    }

    /// Queues slot `i`'s records that are waiting (a flight, the request
    /// with the client's Finished) unless a send of it is in the kernel
    /// (its completion calls this again); arms the receive.
    pub(super) fn tls_flush(&mut self, i: usize) -> io::Result<()> {
        let ctx = self.ctx;
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
        if s.phase == Phase::Exchanging && !session.is_handshaking() && !c.request_out {
            // A storm's request is small: the session takes it whole (its
            // plaintext limit is far above a request's size).
            if session.writer().write_all(&ctx.spec.request).is_err() {
                return self.finish(i, Err(ErrorClass::Tls("client_setup")), Instant::now());
            }
            c.request_out = true;
            first = true;
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
            self.queued.push(i);
            self.deadline(i, Instant::now() + ctx.spec.timeout);
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
        // writes there (or frees it) while `sending`.
        let sqe = opcode::Send::new(types::Fd(s.fd), left.as_ptr(), chunk)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .user_data(user_data(i, s.generation, OP_SEND));
        s.sending = true;
        self.push(&sqe)
    }

    /// Slot `i`'s TLS send completed with `res`.
    pub(super) fn tls_sent(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        let phase = self.slots[i].phase;
        self.slots[i].sending = false;
        let failure = match res {
            n if n < 0 => Some(io::Error::from_raw_os_error(-n)),
            0 => Some(io::ErrorKind::WriteZero.into()),
            _ => None,
        };
        if let Some(e) = failure {
            let stage = if phase == Phase::Handshaking {
                Stage::Tls
            } else {
                Stage::Exchange
            };
            return self.tls_failed(i, classify(&e, stage), now);
        }
        let Some(c) = self.tls.as_mut().and_then(|t| t.conns.get_mut(i)) else {
            return Ok(());
        };
        c.off += res as usize;
        if c.off < c.out.len() {
            return self.tls_send(i);
        }
        let done = c.session.as_ref().is_some_and(|s| !s.is_handshaking());
        let more = c.session.as_ref().is_some_and(|s| s.wants_write());
        match phase {
            Phase::Handshaking | Phase::Exchanging if more => self.tls_flush(i),
            // The client's Finished is out: the hold.
            Phase::Handshaking if done => self.opened(i, now),
            _ => Ok(()),
        }
    }

    /// Slot `i`'s TLS failed with `class`: in its handshake, the connection
    /// and its request; after, the request.
    pub(super) fn tls_failed(&mut self, i: usize, class: ErrorClass, now: Instant) -> io::Result<()> {
        match self.slots[i].phase {
            Phase::Handshaking if self.tls.as_ref().is_some_and(|t| t.handshaking(i)) => self.connect_failed(i, class),
            Phase::Handshaking => {
                // Established, its Finished not out: the connection ends.
                self.close(i);
                self.opening_failed(i, now);
                Ok(())
            }
            Phase::Exchanging => self.finish(i, Err(class), now),
            _ => Ok(()),
        }
    }

    /// A receive's `payload` for slot `i` while its session lives (arrived
    /// at `at`, by the kernel's stamp when `kernel`), reaped at `now`.
    pub(super) fn tls_received(
        &mut self,
        i: usize,
        payload: &[u8],
        at: Instant,
        kernel: bool,
        now: Instant,
    ) -> io::Result<()> {
        let (Some(tls), Some(s)) = (self.tls.as_mut(), self.slots.get_mut(i)) else {
            return Ok(());
        };
        let mut response: Option<Result<Feed, ParseError>> = None;
        let mut extra = false;
        let exchanging = s.phase == Phase::Exchanging;
        let ex = s.exchange.as_mut();
        let mut ex = ex.filter(|_| exchanging);
        let fed = tls.records(i, payload, |plain| {
            let answered = matches!(response, Some(Ok(Feed::Done { .. })) | Some(Err(_)));
            let Some(ex) = ex.as_mut().filter(|_| !answered) else {
                extra = true;
                return Ok(());
            };
            ex.first.get_or_insert(at);
            let Session::Http1(reader) = &mut ex.session else {
                return Err(ErrorClass::Protocol);
            };
            response = Some(reader.feed(plain));
            Ok(())
        });
        if let Some(class) = fed.failed {
            self.send_alert(i);
            return self.tls_failed(i, class, now);
        }
        if fed.handshaken {
            self.handshaken(i, now)?;
            if self.slots[i].fd < 0 {
                return Ok(());
            }
        }
        match response {
            Some(Ok(Feed::Done { extra: more })) => {
                let first = self.slots[i].exchange.as_ref().and_then(|e| e.first).unwrap_or(at);
                return self.answered(i, first, at.max(first), more > 0 || extra || fed.closed, kernel);
            }
            Some(Err(ParseError::Malformed)) => return self.finish(i, Err(ErrorClass::Protocol), now),
            Some(Err(ParseError::Eof)) => return self.finish(i, Err(ErrorClass::Eof), now),
            Some(Ok(Feed::More)) | None => {}
        }
        if fed.closed {
            // The peer's close_notify: the end of the stream.
            return self.peer_closed(i, None, now);
        }
        if self.slots[i].phase == Phase::Handshaking && extra {
            // Application data before the handshake's end.
            return self.connect_failed(i, ErrorClass::Protocol);
        }
        // A flight, or a reply to the peer's records.
        self.tls_flush(i)
    }

    /// Slot `i`'s handshake ended at `now`: the `tls` sample and the
    /// report's line, the connection established; its request goes with
    /// the client's Finished, or the Finished alone before the hold.
    fn handshaken(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        let Some(c) = self.tls.as_mut().and_then(|t| t.conns.get_mut(i)) else {
            return Ok(());
        };
        let (Some(hello), Some(session)) = (c.hello.take(), c.session.as_ref()) else {
            return Ok(());
        };
        ctx.rec
            .borrow_mut()
            .tls_handshake(now, now - hello, crate::transport::negotiated(session));
        self.established(i, now);
        if ctx.spec.request.is_empty() {
            self.tls_flush(i)?;
            let s = &self.slots[i];
            if s.fd >= 0 && !s.sending {
                return self.opened(i, now);
            }
            return Ok(());
        }
        self.begin_exchange(i, now);
        self.tls_flush(i)
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
