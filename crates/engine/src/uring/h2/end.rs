//! How an HTTP/2 connection's streams end on the ring: recorded as the
//! epoll driver records them, failed with their connection, past their
//! deadlines; and how a connection is closed.

use std::io;
use std::time::Instant;

use throng_metrics::{ErrorClass, SlowEnd};

use super::H2Loop;
use super::conn::{State, stream_level};
use crate::conn::{Failed, Timing};
use crate::record::record_exchange;
use crate::uring::ring::{BGID, close_fd};

impl H2Loop<'_> {
    /// Records the streams of connection `i` that ended, as the epoll
    /// path does; a failure that is not one stream's kills the connection.
    pub(super) fn end_streams(&mut self, i: usize) {
        let ctx = self.ctx;
        let request_len = self.spec.head_bytes + self.spec.body.len();
        let head_len = self.spec.head_bytes;
        let body_len = self.spec.body.len();
        let traces = self.traces.get_mut(i);
        let c = &mut self.conns[i];
        let went_away = c.went_away;
        let mut dead = c.dead;
        let mut ended = false;
        let mut traces = traces;
        c.take_ended(|s, end| {
            ended = true;
            let outcome = match end {
                Ok((done, kernel)) => Ok(Timing {
                    sent: s.sent,
                    first: s.first.unwrap_or(done).min(done),
                    done,
                    extra: false,
                    kernel,
                }),
                Err(mut class) => {
                    if matches!(class, ErrorClass::Reset | ErrorClass::Eof) && went_away {
                        // Accepted, then cut off by the connection's end
                        // after the server's GOAWAY.
                        class = ErrorClass::H2("goaway");
                    }
                    if !stream_level(class, dead) {
                        dead = true;
                    }
                    Err(Failed {
                        class,
                        written: if s.stamped {
                            head_len + body_len - s.body_left.min(body_len)
                        } else {
                            0
                        },
                    })
                }
            };
            ctx.in_flight.set(ctx.in_flight.get() - 1);
            record_exchange(
                ctx,
                &mut s.session,
                &outcome,
                request_len,
                s.sent,
                s.start,
                &ctx.spec.expect,
                s.keep_server,
                None,
            );
            if let (Some(t), Some(traces)) = (&ctx.spec.trace, traces.as_deref_mut())
                && let Some(k) = traces.iter().position(|(id, _)| *id == s.id)
            {
                let (_, trace) = traces.swap_remove(k);
                let (at, how) = match &outcome {
                    Ok(timing) => (timing.done, SlowEnd::Status(s.session.reply().status)),
                    Err(f) => (Instant::now(), SlowEnd::Error(f.class)),
                };
                t.offer(&mut ctx.rec.borrow_mut(), s.start, at, how, trace);
            }
            ctx.rec.borrow_mut().stream_closed();
        });
        // Without keep-alive a connection carries one stream: it is closed
        // once that ended (the loop's next turn).
        c.dead = dead || (ended && !ctx.spec.keepalive);
    }

    /// Connection `i` failed with `class`: its streams fail, a request
    /// waiting for it fails (its preface unanswered: the connection's
    /// failure), and it is closed; the slot opens a new one.
    pub(super) fn failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let ctx = self.ctx;
        let c = &mut self.conns[i];
        match c.state {
            State::Connecting => return self.connect_failed(i, class),
            // A TLS handshake that fails fails the connection, in epoll's
            // classes.
            State::Tls if class == ErrorClass::Eof => return self.connect_failed(i, ErrorClass::Tls("handshake_eof")),
            State::Tls => return self.connect_failed(i, class),
            _ => {}
        }
        let class = if matches!(class, ErrorClass::Reset | ErrorClass::Eof) && c.went_away {
            ErrorClass::H2("goaway")
        } else {
            class
        };
        c.end_all(class);
        if let Some(start) = c.waiting.take() {
            ctx.in_flight.set(ctx.in_flight.get() - 1);
            let now = Instant::now();
            let mut rec = ctx.rec.borrow_mut();
            rec.request_failed(now, class, 0);
            if let Some(t) = &ctx.spec.trace {
                t.offer(&mut rec, start, now, SlowEnd::Error(class), t.ids().0);
            }
        }
        self.end_streams(i);
        self.close(i, true);
        self.starts.push(i);
        Ok(())
    }

    /// Fails what is past its deadline: connects, prefaces, a request
    /// waiting for room, streams (reset CANCEL; the connection goes on).
    pub(super) fn expire(&mut self, now: Instant) -> io::Result<()> {
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            match c.state {
                State::Connecting if now >= c.deadline => self.connect_failed(i, ErrorClass::TimeoutConnect)?,
                State::Tls if now >= c.deadline => self.connect_failed(i, ErrorClass::TimeoutTls)?,
                State::Preface if now >= c.deadline => self.failed(i, ErrorClass::TimeoutHandshake)?,
                State::Ready => {
                    if let Some(start) = c.waiting.filter(|_| now >= c.deadline) {
                        // The server allowed no stream in time: the request
                        // was never sent, the connection is replaced.
                        c.waiting = None;
                        c.dead = true;
                        let ctx = self.ctx;
                        ctx.in_flight.set(ctx.in_flight.get() - 1);
                        let class = ErrorClass::H2("stream_limit");
                        let mut rec = ctx.rec.borrow_mut();
                        rec.request_failed(now, class, 0);
                        if let Some(t) = &ctx.spec.trace {
                            t.offer(&mut rec, start, now, SlowEnd::Error(class), t.ids().0);
                        }
                        drop(rec);
                        self.starts.push(i);
                    }
                    let c = &mut self.conns[i];
                    let mut late = false;
                    for s in c.streams.iter_mut().filter(|s| s.end.is_none() && now >= s.deadline) {
                        s.end = Some(Err(ErrorClass::TimeoutResponse));
                        late = true;
                    }
                    if late {
                        self.end_streams(i);
                        self.starts.push(i);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Closes connection `i` (counted closed when `count`).
    pub(super) fn close(&mut self, i: usize, count: bool) {
        let c = &self.conns[i];
        if c.fd < 0 {
            self.conns[i].state = State::Idle;
            return;
        }
        // Done with a socket: it was ready when its work ran out.
        if count && matches!(c.state, State::Preface | State::Ready | State::Done) {
            let now = Instant::now();
            let mut rec = self.ctx.rec.borrow_mut();
            rec.connection_closed(now, now - c.opened);
            if c.state != State::Preface {
                rec.mux_connection_closed(c.carried);
            }
        }
        self.drop_socket(i);
        let c = &mut self.conns[i];
        c.state = State::Idle;
        c.h2 = None;
        c.tls = None;
        c.streams = Vec::new();
        if let Some(traces) = self.traces.get_mut(i) {
            // A new connection's stream ids start over.
            traces.clear();
        }
        if !c.sending {
            // A send still in the kernel reads `out`: kept until the
            // connection's next (its completion is then stale).
            c.out = Vec::new();
        }
        c.sending = false;
    }

    /// Shuts connection `i`'s socket down and closes it; later
    /// completions of it are stale.
    pub(super) fn drop_socket(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd < 0 {
            return;
        }
        let fd = c.fd;
        c.fd = -1;
        c.tls = None;
        c.recv_armed = false;
        c.generation = c.generation.wrapping_add(1);
        // SAFETY: shutdown on a socket this worker owns.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        close_fd(fd);
    }

    /// At the end: closes every connection, counted closed when the run
    /// ended gracefully.
    pub(super) fn close_all(&mut self, count: bool) {
        for i in 0..self.conns.len() {
            self.close(i, count);
        }
        let _ = self.ring.ring.submitter().unregister_buf_ring(BGID);
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn::{H2Conn, Stream};

    /// What a ring HTTP/2 connection holds for its whole life besides its
    /// share of the ring: its 232-byte slot (the protocol's state and a TLS session boxed in it, 336
    /// bytes unoptimized, released when the connection closes). Its
    /// streams' entries (184 bytes each, and a response slot) and output
    /// come and go with streams (an idle connection shrinks them).
    #[test]
    fn a_ring_http2_connection_stays_small() {
        let slot = std::mem::size_of::<H2Conn>();
        assert!(slot <= 240, "a ring HTTP/2 connection's slot is {slot} bytes");
        let conn = std::mem::size_of::<throng_http2::Conn>();
        assert!(conn <= 400, "throng_http2::Conn is {conn} bytes");
        let stream = std::mem::size_of::<Stream>();
        assert!(stream <= 192, "a ring HTTP/2 stream is {stream} bytes");
    }
}
