//! The ring's completions for an HTTP/2 connection: opening it (connect,
//! the TLS handshake, the preface), sends done, and receives fed to its
//! protocol state.

use std::io;
use std::os::fd::IntoRawFd;
use std::sync::Arc;
use std::time::Instant;

use io_uring::{cqueue, opcode, types};
use throng_metrics::{ErrorClass, Phase, SlowEnd};

use super::H2Loop;
use super::conn::{State, TlsFed};
use crate::errors::{Stage, classify};
use crate::uring::ring::{BGID, close_fd};
use crate::uring::slot::{GENERATION, OP_CONNECT, OP_RECV, OP_SEND, new_socket, parse_user_data, user_data};

impl H2Loop<'_> {
    /// Opens connection `i` (counted started) and queues its connect.
    pub(super) fn open(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        let c = &mut self.conns[i];
        c.state = State::Connecting;
        c.tries = 0;
        c.addr = ctx.prefer.get();
        c.opened = now;
        c.deadline = now + ctx.spec.timeout;
        c.conn_id = ctx.next_conn.get();
        ctx.next_conn.set(c.conn_id + 1);
        ctx.rec.borrow_mut().connection_started(now, false);
        ctx.connecting.set(ctx.connecting.get() + 1);
        self.connect(i)
    }

    /// Opens a socket for connection `i` and queues its connect to the
    /// route's next address.
    pub(super) fn connect(&mut self, i: usize) -> io::Result<()> {
        let ctx = self.ctx;
        let addrs = &ctx.spec.route.addrs;
        let n = addrs.len().max(1);
        let c = &mut self.conns[i];
        let Some(&addr) = addrs.get(c.addr % n) else {
            return self.connect_failed(i, ErrorClass::Refused);
        };
        c.tries += 1;
        // TCP_NODELAY: HTTP/2 sends small frames often (as the epoll path).
        let socket = match new_socket(addr, true) {
            Ok(sock) => sock,
            Err(e) => return self.connect_failed(i, classify(&e, Stage::Connect)),
        };
        c.fd = socket.into_raw_fd();
        c.recv_armed = false;
        if ctx.stamp {
            crate::stamps::enable(c.fd);
        }
        let Some(sa) = self.addrs.get(c.addr % n) else {
            return self.connect_failed(i, ErrorClass::Refused);
        };
        let sqe = opcode::Connect::new(types::Fd(c.fd), sa.as_ptr().cast(), sa.len())
            .build()
            .user_data(user_data(i, c.generation, OP_CONNECT));
        self.push(&sqe)
    }

    /// Arms connection `i`'s multishot receive (if it is still open).
    pub(super) fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.fd < 0 || c.recv_armed {
            return Ok(());
        }
        c.recv_armed = true;
        let sqe = opcode::RecvMsgMulti::new(types::Fd(c.fd), &raw const *self.msghdr, BGID)
            .build()
            .user_data(user_data(i, c.generation, OP_RECV));
        self.push(&sqe)
    }

    /// Handles one completion.
    pub(super) fn complete(&mut self, ud: u64, res: i32, flags: u32, now: Instant) -> io::Result<()> {
        let (i, generation, op) = parse_user_data(ud);
        let bid = cqueue::buffer_select(flags);
        let current = self
            .conns
            .get(i)
            .is_some_and(|c| c.fd >= 0 && c.generation & GENERATION == generation);
        if !current {
            if let Some(b) = bid {
                self.ring.bufs.give_back(b);
            }
            return Ok(());
        }
        match op {
            OP_CONNECT => self.connected(i, res, now),
            OP_SEND => self.sent(i, res),
            OP_RECV => {
                if !cqueue::more(flags) {
                    self.conns[i].recv_armed = false;
                }
                let out = match (res, bid) {
                    (n, Some(b)) if n > 0 => {
                        let r = self.received(i, b, n as usize, now);
                        self.ring.bufs.give_back(b);
                        r
                    }
                    (0, _) => self.failed(i, ErrorClass::Eof),
                    (n, _) if n == -libc::ENOBUFS => {
                        self.rearm.push(i);
                        Ok(())
                    }
                    (n, _) if n < 0 => self.failed(i, classify(&io::Error::from_raw_os_error(-n), Stage::Exchange)),
                    _ => Ok(()),
                };
                let c = &self.conns[i];
                if c.fd >= 0 && !c.recv_armed && res > 0 {
                    self.rearm.push(i);
                }
                out
            }
            _ => Ok(()),
        }
    }

    /// Connection `i`'s connect completed with `res`: the preface goes out.
    pub(super) fn connected(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        if self.conns[i].state != State::Connecting {
            return Ok(());
        }
        let ctx = self.ctx;
        if res < 0 {
            let class = classify(&io::Error::from_raw_os_error(-res), Stage::Connect);
            let c = &mut self.conns[i];
            if crate::reach::try_next(class) && c.tries < ctx.spec.route.addrs.len() && now < c.deadline {
                close_fd(c.fd);
                c.fd = -1;
                c.generation = c.generation.wrapping_add(1);
                c.addr += 1;
                return self.connect(i);
            }
            return self.connect_failed(i, class);
        }
        let c = &mut self.conns[i];
        let n = ctx.spec.route.addrs.len().max(1);
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.connected(now, now - c.opened);
            if let Some(&addr) = ctx.spec.route.addrs.get(c.addr % n) {
                rec.reached(addr);
            }
        }
        ctx.prefer.set(c.addr % n);
        // A new socket: nothing of it is being sent.
        c.out.clear();
        c.off = 0;
        c.sending = false;
        if let Some(client) = &self.tls {
            // Established once its handshake is done (tls_received).
            match throng_tls::rustls::ClientConnection::new(Arc::clone(&client.config), client.server_name.clone()) {
                Ok(session) => c.tls = Some(Box::new(session)),
                Err(_) => return self.connect_failed(i, ErrorClass::Tls("client_setup")),
            }
            c.state = State::Tls;
            c.hello = now;
            c.deadline = now + ctx.spec.timeout;
            self.arm_recv(i)?;
            return self.flush(i);
        }
        ctx.rec.borrow_mut().connection_established(now, false);
        ctx.connecting.set(ctx.connecting.get() - 1);
        c.reset(self.spec.streams);
        c.state = State::Preface;
        c.preface_at = now;
        c.deadline = now + ctx.spec.timeout;
        self.arm_recv(i)?;
        self.flush(i)
    }

    /// Connection `i` could not be opened: the attempt and its request
    /// fail with `class`.
    pub(super) fn connect_failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let ctx = self.ctx;
        let now = Instant::now();
        ctx.connecting.set(ctx.connecting.get() - 1);
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.connection_failed(now, class, false);
            rec.request_failed(now, class, 0);
            if let Some(t) = &ctx.spec.trace {
                // The request waiting for the connection: among the
                // slowest under an id of its own, as on epoll.
                let start = self.conns[i].waiting.unwrap_or(now);
                t.offer(&mut rec, start, now, SlowEnd::Error(class), t.ids().0);
            }
        }
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        let c = &mut self.conns[i];
        c.waiting = None;
        self.drop_socket(i);
        self.conns[i].state = State::Idle;
        self.starts.push(i);
        Ok(())
    }

    /// Connection `i`'s send completed with `res`.
    pub(super) fn sent(&mut self, i: usize, res: i32) -> io::Result<()> {
        let c = &mut self.conns[i];
        c.sending = false;
        match res {
            n if n < 0 => self.failed(i, classify(&io::Error::from_raw_os_error(-n), Stage::Exchange)),
            // Nothing taken: the peer is gone (as a write of 0).
            0 => self.failed(i, ErrorClass::Reset),
            n => {
                c.off += n as usize;
                if c.off < c.out.len() {
                    return self.send(i);
                }
                self.starts.push(i);
                Ok(())
            }
        }
    }

    /// A `recvmsg` completion of `len` bytes in buffer `bid` for
    /// connection `i`.
    pub(super) fn received(&mut self, i: usize, bid: u16, len: usize, now: Instant) -> io::Result<()> {
        let buf = self.ring.bufs.data(bid, len);
        let Ok(out) = types::RecvMsgOut::parse(buf, &self.msghdr) else {
            return self.failed(i, ErrorClass::Protocol);
        };
        let payload = out.payload_data();
        if payload.is_empty() {
            return self.failed(i, ErrorClass::Eof);
        }
        let stamp = crate::stamps::from_control(out.control_data());
        let c = &mut self.conns[i];
        if c.tls.is_some() {
            let fed = c.feed_tls(payload, &mut self.plain, stamp, now, &self.spec.body, self.spec.streams);
            return self.tls_received(i, fed, now);
        }
        if let Err(class) = c.receive(payload, stamp, now, &self.spec.body) {
            return self.failed(i, class);
        }
        if c.state == State::Preface && c.settings && c.acked {
            self.handshaken(i, now);
        }
        self.end_streams(i);
        self.starts.push(i);
        Ok(())
    }

    /// What a receive's records did to TLS connection `i`: its handshake
    /// ended (the `tls` phase, the connection established, its preface
    /// next), it failed (in its handshake: the connection's failure), the
    /// peer closed it; then as a plain receive.
    pub(super) fn tls_received(&mut self, i: usize, fed: Result<TlsFed, ErrorClass>, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        let fed = match fed {
            Ok(fed) => fed,
            Err(class) => return self.failed(i, class),
        };
        let c = &mut self.conns[i];
        if fed.handshaken {
            ctx.connecting.set(ctx.connecting.get() - 1);
            if let Some(session) = c.tls.as_deref() {
                let mut rec = ctx.rec.borrow_mut();
                rec.tls_handshake(now, now - c.hello, crate::transport::negotiated(session));
                rec.connection_established(now, false);
            }
            c.state = State::Preface;
            c.preface_at = now;
            c.deadline = now + ctx.spec.timeout;
            if fed.not_h2 {
                return self.failed(i, ErrorClass::H2("not_negotiated"));
            }
        }
        if fed.closed {
            return self.failed(i, ErrorClass::Eof);
        }
        let c = &mut self.conns[i];
        if c.state == State::Tls {
            // A handshake flight to answer.
            return self.flush(i);
        }
        if c.state == State::Preface && c.settings && c.acked {
            self.handshaken(i, now);
        }
        self.end_streams(i);
        self.starts.push(i);
        Ok(())
    }

    /// Connection `i`'s preface was answered: the `handshake` phase.
    pub(super) fn handshaken(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        c.state = State::Ready;
        let server = c.server_max;
        let server_max = (server != u32::MAX).then_some(u64::from(server));
        let mut rec = self.ctx.rec.borrow_mut();
        rec.phase(now, Phase::Handshake, now - c.preface_at);
        rec.mux_connection("h2", u64::from(self.spec.streams), server_max);
    }
}
