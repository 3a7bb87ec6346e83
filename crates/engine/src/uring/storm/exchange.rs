//! A storm connection's one request on the ring: its send (queued, its
//! time taken at the submission that carries it), its response read from
//! the multishot `recvmsg` and timed by the kernel's receive stamps, and
//! how it ends, recorded through [`crate::record::record_exchange`] as the
//! epoll storm's `exchange_on` records it.

use std::io;
use std::time::Instant;

use io_uring::{opcode, squeue, types};
use throng_metrics::ErrorClass;

use super::super::slot::{OP_SEND, user_data};
use super::{Phase, Storm};
use crate::conn::{Failed, Timing};
use crate::errors::{Stage, classify};
use crate::exchange::Answered;
use crate::proto::http1::{Feed, ParseError};
use crate::proto::session::Session;
use crate::record::record_exchange;

impl Storm<'_> {
    /// Queues slot `i`'s request and arms its receive. MSG_WAITALL: the
    /// ring sends it all or fails; success posts no completion
    /// (SKIP_SUCCESS), a failure posts the error or the bytes that got out.
    pub(super) fn send(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let request = &self.ctx.spec.request;
        let chunk = u32::try_from(request.len()).unwrap_or(u32::MAX);
        let s = &self.slots[i];
        let sqe = opcode::Send::new(types::Fd(s.fd), request.as_ptr(), chunk)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(user_data(i, s.generation, OP_SEND));
        // Stamped just before the submission (stamp_queued).
        self.queued.push(i);
        self.deadline(i, now + self.ctx.spec.timeout);
        self.push(&sqe)?;
        self.arm_recv(i)
    }

    /// Slot `i`'s send failed (`res`: the error, or the bytes that got out).
    pub(super) fn sent(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        if self.slots[i].phase != Phase::Exchanging {
            return Ok(());
        }
        let class = if res < 0 {
            classify(&io::Error::from_raw_os_error(-res), Stage::Exchange)
        } else if (res as usize) < self.ctx.spec.request.len() {
            ErrorClass::Reset
        } else {
            return Ok(());
        };
        self.finish(i, Err(class), now)
    }

    /// A `recvmsg` completion of `len` bytes (header, control messages,
    /// payload) in buffer `bid` for slot `i`: its response, the server's
    /// close, or bytes sent to a held connection (dropped, as on epoll).
    pub(super) fn received(&mut self, i: usize, bid: u16, len: usize, now: Instant) -> io::Result<()> {
        let buf = self.ring.bufs.data(bid, len);
        let Ok(out) = types::RecvMsgOut::parse(buf, &self.msghdr) else {
            return match self.slots[i].phase {
                Phase::Exchanging => self.finish(i, Err(ErrorClass::Protocol), now),
                _ => Ok(()),
            };
        };
        let payload = out.payload_data();
        if payload.is_empty() {
            return self.peer_closed(i, None, now);
        }
        let live_session = self
            .tls
            .as_ref()
            .is_some_and(|t| t.conns.get(i).is_some_and(|c| c.session.is_some()));
        if live_session && matches!(self.slots[i].phase, Phase::Handshaking | Phase::Exchanging) {
            let t_send = self.slots[i].exchange.as_ref().map_or(now, |e| e.t_send);
            let arrived =
                crate::stamps::from_control(out.control_data()).and_then(|st| crate::stamps::arrival(st, now, t_send));
            // Copied out of the ring's buffer (which the session's handling
            // cannot borrow) into room kept for it: no allocation.
            let mut records = std::mem::take(&mut self.records);
            records.clear();
            records.extend_from_slice(payload);
            let out = self.tls_received(i, &records, arrived.unwrap_or(now), arrived.is_some(), now);
            self.records = records;
            return out;
        }
        if self.slots[i].phase != Phase::Exchanging {
            return Ok(());
        }
        let Some(ex) = self.slots[i].exchange.as_mut() else {
            return Ok(());
        };
        // The kernel's arrival, when it has a plausible one: after the
        // request left, and not after the reap (as the epoll path).
        let arrived =
            crate::stamps::from_control(out.control_data()).and_then(|st| crate::stamps::arrival(st, now, ex.t_send));
        let at = arrived.unwrap_or(now);
        let first = *ex.first.get_or_insert(at);
        let Session::Http1(reader) = &mut ex.session else {
            return self.finish(i, Err(ErrorClass::Protocol), now);
        };
        match reader.feed(payload) {
            Ok(Feed::More) => Ok(()),
            Ok(Feed::Done { extra }) => self.answered(i, first, at.max(first), extra > 0, arrived.is_some()),
            Err(ParseError::Malformed) => self.finish(i, Err(ErrorClass::Protocol), now),
            Err(ParseError::Eof) => self.finish(i, Err(ErrorClass::Eof), now),
        }
    }

    /// Slot `i`'s response is complete at `at` (by the kernel's stamp:
    /// `kernel`).
    pub(super) fn answered(
        &mut self,
        i: usize,
        first: Instant,
        at: Instant,
        extra: bool,
        kernel: bool,
    ) -> io::Result<()> {
        let Some(ex) = self.slots[i].exchange.as_ref() else {
            return Ok(());
        };
        let first = first.max(ex.t_send);
        let timing = Timing {
            sent: ex.t_send,
            first,
            done: at.max(first),
            extra,
            kernel,
        };
        self.finish(i, Ok(timing), Instant::now())
    }

    /// Slot `i`'s request ended with `outcome`: recorded as the epoll path
    /// records it; a connection that cannot be kept is closed, not held.
    pub(super) fn finish(&mut self, i: usize, outcome: Result<Timing, ErrorClass>, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        let s = &mut self.slots[i];
        let Some(mut ex) = s.exchange.take() else {
            return Ok(());
        };
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        let outcome = outcome.map_err(|class| Failed {
            class,
            written: spec.request.len(),
        });
        let recorded = record_exchange(
            ctx,
            &mut ex.session,
            &outcome,
            spec.request.len(),
            ex.t_send,
            s.origin,
            &spec.expect,
            ex.keep_server,
            None,
        );
        let answered = match outcome {
            Ok(_) if recorded.is_none() => Answered::Failed,
            Ok(timing) if ex.session.reusable(&timing) => Answered::Reusable,
            Ok(_) => Answered::Closing,
            Err(_) => Answered::Failed,
        };
        drop(ex);
        match answered {
            Answered::Reusable => return self.opened(i, now),
            Answered::Closing => return self.answered_closing(i, now),
            Answered::Failed => {}
        }
        // Failed: nothing to hold.
        self.close(i);
        self.opening_failed(i, now);
        Ok(())
    }
}
