//! How an exchange on the ring ends: the completion of its send (a large
//! request's is tracked, short sends continued), the response's bytes from
//! the multishot receive, and the two together — a response that ends
//! while its request is still going out waits for the send
//! ([`super::slot::Early`]), as the epoll path reads only once it has
//! written the whole request.

use std::io;
use std::time::Instant;

use io_uring::types;
use throng_metrics::ErrorClass;

use super::Loop;
use super::slot::{Early, Phase};
use crate::conn::Timing;
use crate::errors::{Stage, classify};
use crate::proto::http1::{Feed, ParseError};
use crate::proto::session::Session;

impl Loop<'_> {
    /// Slot `i`'s send completed with `res`: the error, or the bytes that
    /// got out. A small request's send completes only when it failed; a
    /// large one's always: short, the rest goes in another; whole, the
    /// exchange ends if its response is in.
    pub(super) fn sent(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        if self.tls.is_some() {
            return self.tls_sent(i, res, now);
        }
        let len = self.sends.get(self.ctx, i).len();
        let s = &mut self.slots[i];
        if s.phase != Phase::Exchanging {
            return Ok(());
        }
        if s.sending {
            s.sending = false;
            return match res {
                n if n < 0 => {
                    let e = io::Error::from_raw_os_error(-n);
                    self.failed(i, classify(&e, Stage::Exchange))
                }
                // Nothing taken: the peer is gone (as a write of 0).
                0 => self.failed(i, ErrorClass::Reset),
                n => {
                    s.written += n as usize;
                    if s.written < len {
                        return self.send(i);
                    }
                    s.t_sent = now;
                    match std::mem::replace(&mut s.early, Early::None) {
                        Early::None => Ok(()),
                        Early::Answered { at, extra, kernel } => self.done(i, at, extra, kernel),
                        Early::Failed(class) => self.failed(i, class),
                    }
                }
            };
        }
        match res {
            n if n < 0 => {
                s.written = 0;
                let e = io::Error::from_raw_os_error(-n);
                self.failed(i, classify(&e, Stage::Exchange))
            }
            n if (n as usize) < len => {
                s.written = n as usize;
                self.failed(i, ErrorClass::Reset)
            }
            _ => Ok(()),
        }
    }

    /// A `recvmsg` completion of `len` bytes (header, control messages,
    /// payload) in buffer `bid` for slot `i`.
    pub(super) fn received(&mut self, i: usize, bid: u16, len: usize, now: Instant) -> io::Result<()> {
        let buf = self.ring.bufs.data(bid, len);
        let Ok(out) = types::RecvMsgOut::parse(buf, &self.msghdr) else {
            return self.recv_failed(i, ErrorClass::Protocol);
        };
        let payload = out.payload_data();
        if payload.is_empty() {
            return self.eof(i, now);
        }
        let s = &mut self.slots[i];
        if let Some(tls) = &mut self.tls {
            // Records: the session decides what is plaintext, and when.
            let arrived = crate::stamps::from_control(out.control_data())
                .and_then(|st| crate::stamps::arrival(st, now, s.t_send));
            let at = arrived.unwrap_or(now);
            let fed = tls.feed(i, payload, s, at);
            return self.tls_received(i, fed, at, arrived.is_some(), now);
        }
        if s.phase != Phase::Exchanging {
            // Bytes nobody asked for: the connection cannot be trusted with
            // the next request.
            return self.drop_connection(i);
        }
        if s.early != Early::None {
            // Bytes after a response that ended before its request was all
            // sent: the exchange ends with the send, the connection is not
            // reused.
            s.early.no_reuse();
            return Ok(());
        }
        // The kernel's arrival, when it has a plausible one: after the
        // request left, and not after the reap (as the epoll path).
        let arrived =
            crate::stamps::from_control(out.control_data()).and_then(|st| crate::stamps::arrival(st, now, s.t_send));
        let at = arrived.unwrap_or(now);
        let first = *s.first.get_or_insert(at);
        let Session::Http1(reader) = &mut s.session else {
            return self.failed(i, ErrorClass::Protocol);
        };
        match reader.feed(payload) {
            Ok(Feed::More) => Ok(()),
            Ok(Feed::Done { extra }) => self.done(i, at.max(first), extra > 0, arrived.is_some()),
            Err(ParseError::Malformed) => self.recv_failed(i, ErrorClass::Protocol),
            Err(ParseError::Eof) => self.recv_failed(i, ErrorClass::Eof),
        }
    }

    /// The response side of slot `i` failed with `class`: its request
    /// fails, once its send has ended if a large one is still going out
    /// (as on epoll, the send's own failure wins); with no request in
    /// flight, the connection is dropped.
    pub(super) fn recv_failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let s = &mut self.slots[i];
        if matches!(s.phase, Phase::Connecting | Phase::Warming) {
            // A TLS connection in its handshake: the connection fails.
            return self.connect_failed(i, class);
        }
        if s.phase != Phase::Exchanging {
            return self.drop_connection(i);
        }
        if !s.sending {
            return self.failed(i, class);
        }
        match s.early {
            Early::None => s.early = Early::Failed(class),
            _ => s.early.no_reuse(),
        }
        Ok(())
    }

    /// Slot `i`'s connection ended (the peer closed it).
    pub(super) fn eof(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let s = &mut self.slots[i];
        if matches!(s.phase, Phase::Connecting | Phase::Warming) {
            // A TLS peer that closes in the handshake (as epoll names it).
            return self.connect_failed(i, ErrorClass::Tls("handshake_eof"));
        }
        if s.phase != Phase::Exchanging {
            return self.drop_connection(i);
        }
        if s.early != Early::None {
            // The peer closed after the response ended; the send says how
            // the exchange does.
            s.early.no_reuse();
            return Ok(());
        }
        let Session::Http1(reader) = &mut s.session else {
            return self.failed(i, ErrorClass::Protocol);
        };
        match reader.eof() {
            Ok(()) => self.done(i, now, false, false),
            Err(_) => self.recv_failed(i, ErrorClass::Eof),
        }
    }

    /// Slot `i`'s response is complete at `now` (by the kernel's stamp:
    /// `kernel`). While its request is still being sent, it waits for the
    /// send to end (as the epoll path, which reads only once it has
    /// written): the next request never goes out behind the rest of a
    /// body, and the timing is the one epoll would take, the first byte
    /// not before the last one sent.
    pub(super) fn done(&mut self, i: usize, now: Instant, extra: bool, kernel: bool) -> io::Result<()> {
        let s = &mut self.slots[i];
        if s.sending {
            s.early = Early::Answered { at: now, extra, kernel };
            return Ok(());
        }
        let first = s.first.unwrap_or(now).max(s.t_sent);
        let timing = Timing {
            sent: s.t_sent,
            first,
            done: now.max(first),
            extra,
            kernel,
        };
        self.finish(i, Ok(timing))
    }
}
