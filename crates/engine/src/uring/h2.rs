//! HTTP/2 closed loops on the ring, h2c (prior knowledge) or over TLS (ALPN
//! h2): each slot is one connection driving a `throng_http2::Conn`, up to
//! `--streams` streams in flight on it.
//!
//! ```text
//!  slot ─► Connect ─► preface out (tracked send) + RecvMulti (armed once)
//!            ▲            │ completions, a batch per io_uring_enter
//!            │            ▼
//!        reconnect ◄── Conn::receive ─► stream ends ─► record_exchange (as epoll)
//!                         │
//!                         └─► new streams' HEADERS, acks, WINDOW_UPDATE:
//!                             the turn's output in one send
//! ```
//!
//! The connection is the epoll driver's, on the ring's operations: the
//! protocol is I/O-free, so what `Conn::pending_output` holds after a
//! turn (every stream started in it) is copied out (over TLS: written into
//! the connection's rustls session, its records copied out) and sent in one
//! tracked send; over TLS the handshake comes first (the `tls` phase from
//! the connect's completion, as epoll's), and a receive's records go to the
//! session, its plaintext to the connection; bytes from the multishot receive go to `Conn::receive`,
//! whose events end the streams. Recording is the epoll path's: a request
//! counts started when a stream takes it (a connection's first request
//! before its connect), its send time is taken just before the submission
//! that carries its HEADERS, its end at the kernel's receive stamp of the
//! bytes that ended it; the same classes (`h2.*`, `rst_stream.*`,
//! `goaway`, `timeout.response` with the stream reset CANCEL and the
//! connection going on, `timeout.handshake` for a preface unanswered). A
//! connection that fails, or whose server sent GOAWAY, takes no new
//! streams; once its last stream ends it is closed and the slot opens a
//! new one.

use std::io;
use std::os::fd::IntoRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types};
use socket2::SockAddr;
use throng_metrics::{ErrorClass, Live, Phase, SlowEnd};
use tokio::sync::watch;

use super::context::{done, ring_ctx, wait_origin};
use super::h2_conn::{H2Conn, State, Stream, TlsFed, stream_level};
use super::publish::{self, Publisher};
use super::ring::{BGID, Ring, close_fd};
use super::slot::{GENERATION, OP_CONNECT, OP_RECV, OP_SEND, new_socket, parse_user_data, user_data};
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::load::{WorkerLoad, WorkerSpec};
use crate::proto::http1::Keep;
use crate::proto::http2::{Spec, encode_head};
use crate::proto::session::Session;
use crate::record::record_exchange;
use crate::transport::TlsClient;
use crate::worker::state::{RunState, Snapshots, WorkerDone};

/// How often the loop wakes with nothing completed (deadlines, the run's
/// state, live figures).
const TICK: Duration = Duration::from_millis(10);
/// Room for a receive's control messages (one SCM_TIMESTAMPING).
const CONTROL: usize = 64;
/// Completions a wait asks for at most before waking.
const BATCH: usize = 16;
/// How long a wait holds out for a batch before it takes what has come.
const BATCH_WAIT_US: u32 = 50;
/// Plaintext taken out of a TLS session at a time (a record's most).
const PLAIN: usize = 16 * 1024;

/// The HTTP/2 loop of one worker on its ring.
struct H2Loop<'a> {
    ctx: &'a Ctx,
    spec: &'a Spec,
    /// The request's header block, encoded once.
    block: Vec<u8>,
    /// `--trace-context`: where the block's traceparent ids start, the
    /// block copied with a request's ids written over (HEADERS encodes it
    /// at once: one copy serves every stream), and each connection's
    /// streams' trace ids (empty without trace context; reused).
    trace_at: Option<usize>,
    traced: Option<Box<crate::trace::Traced>>,
    traces: Vec<Vec<(throng_http2::StreamId, [u8; 16])>>,
    ring: Ring,
    conns: Vec<H2Conn>,
    /// Connections whose queued send carries streams not stamped yet.
    queued: Vec<usize>,
    /// Connections to (re)open or fill at the top of the next turn.
    starts: Vec<usize>,
    /// Connections whose receive must be armed again.
    rearm: Vec<usize>,
    /// Requests left to start (None: until stopped).
    budget: Option<u64>,
    until: Option<Instant>,
    addrs: Vec<SockAddr>,
    msghdr: Box<libc::msghdr>,
    batch: bool,
    /// An https:// plan's TLS client (ALPN h2), and room for a receive's
    /// plaintext.
    tls: Option<TlsClient>,
    plain: Box<[u8]>,
}

/// Runs one worker's HTTP/2 closed loop on an io_uring; the contract of
/// [`crate::worker::run`].
pub(super) fn run(
    spec: WorkerSpec,
    mut state: watch::Receiver<RunState>,
    live: Arc<Mutex<Live>>,
    snapshot: Option<Snapshots>,
) -> io::Result<WorkerDone> {
    let cpu_before = crate::sys::thread_cpu();
    let origin = spec.origin;
    // The load counts stream slots (connections × --streams); the spec
    // says the worker's connections.
    let WorkerLoad::Closed { budget, until, .. } = spec.load.clone() else {
        return Err(io::Error::other(
            "--io uring runs HTTP/2 closed loops only (the plan should have said so)",
        ));
    };
    let crate::proto::wire::Wire::Http2(h2) = spec.wire.clone() else {
        return Err(io::Error::other("--io uring: not an HTTP/2 plan"));
    };
    let connections = usize::try_from(h2.connections).unwrap_or(usize::MAX).min(1 << 24);
    let ring = Ring::new(connections).map_err(|e| io::Error::new(e.kind(), format!("--io uring: {e}")))?;
    let ctx = ring_ctx(spec, true);
    let now = Instant::now();
    let mut lp = H2Loop {
        ctx: &ctx,
        spec: &h2,
        block: encode_head(&h2.method, &h2.uri, &h2.headers),
        trace_at: None,
        traced: None,
        traces: Vec::new(),
        ring,
        conns: (0..connections).map(|_| H2Conn::new(now)).collect(),
        queued: Vec::new(),
        starts: (0..connections).collect(),
        rearm: Vec::new(),
        budget,
        until,
        addrs: ctx.spec.route.addrs.iter().map(|&a| SockAddr::from(a)).collect(),
        msghdr: {
            // SAFETY: msghdr is plain old data; all-zero is a valid value.
            let mut m: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
            m.msg_controllen = CONTROL as _;
            m
        },
        batch: true,
        tls: ctx.spec.tls.clone(),
        plain: if ctx.spec.tls.is_some() {
            vec![0; PLAIN].into_boxed_slice()
        } else {
            Box::default()
        },
    };
    if ctx.spec.trace.is_some() {
        lp.trace_at = throng_plan::placeholder_at(&lp.block);
        lp.traces = (0..connections).map(|_| Vec::new()).collect();
    }
    wait_origin(origin, &state, TICK);
    let aborted = lp.run(&mut state, &live, snapshot.as_ref())?;
    lp.close_all(!aborted);
    drop(lp);
    Ok(done(&ctx, cpu_before))
}

impl H2Loop<'_> {
    /// Runs until every connection is done (budget spent, deadline passed
    /// or the run stopped, nothing in flight) or the run aborts (true).
    fn run(
        &mut self,
        state: &mut watch::Receiver<RunState>,
        live: &Mutex<Live>,
        snapshot: Option<&Snapshots>,
    ) -> io::Result<bool> {
        let mut next_scan = Instant::now() + TICK;
        let mut publisher = Publisher::new(Instant::now());
        let tick = types::Timespec::new().nsec(TICK.subsec_nanos());
        let args = types::SubmitArgs::new().timespec(&tick);
        let batch_args = types::SubmitArgs::new().timespec(&tick).min_wait_usec(BATCH_WAIT_US);
        let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
        loop {
            let mut stop = false;
            if publish::follow(state, || stop = true) {
                return Ok(true);
            }
            if stop {
                self.stop()?;
            }
            let now = Instant::now();
            for i in std::mem::take(&mut self.starts) {
                self.turn(i, now)?;
            }
            if self.conns.iter().all(|c| c.state == State::Done) {
                return Ok(false);
            }
            self.stamp_queued();
            let in_flight = usize::try_from(self.ctx.in_flight.get()).unwrap_or(usize::MAX);
            let want = if self.batch { (in_flight / 2).clamp(1, BATCH) } else { 1 };
            let waited = if want > 1 {
                self.ring.ring.submitter().submit_with_args(want, &batch_args)
            } else {
                self.ring.ring.submitter().submit_with_args(1, &args)
            };
            match waited {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
                // A kernel before 6.12 takes no min_wait: wait for one at a time.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && want > 1 => self.batch = false,
                Err(e) => return Err(io::Error::new(e.kind(), format!("--io uring: io_uring_enter: {e}"))),
            }
            let now = Instant::now();
            cqes.clear();
            cqes.extend(
                self.ring
                    .ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            for &(ud, res, flags) in &cqes {
                self.complete(ud, res, flags, now)?;
            }
            self.ring.bufs.publish();
            for i in std::mem::take(&mut self.rearm) {
                self.arm_recv(i)?;
            }
            if now >= next_scan {
                next_scan = now + TICK;
                self.expire(now)?;
                if let Some(until) = self.until
                    && now >= until
                {
                    self.stop()?;
                }
            }
            publisher.publish(self.ctx, now, live, snapshot);
        }
    }

    /// Starts nothing new; connections with nothing in flight are done.
    fn stop(&mut self) -> io::Result<()> {
        self.ctx.stop();
        for i in 0..self.conns.len() {
            self.turn(i, Instant::now())?;
        }
        Ok(())
    }

    /// A request may start now (taken from the budget): when it starts.
    fn take(&mut self, now: Instant) -> Option<Instant> {
        if self.ctx.stopping.get() {
            return None;
        }
        match &mut self.budget {
            None => Some(now),
            Some(0) => None,
            Some(n) => {
                *n -= 1;
                Some(now)
            }
        }
    }

    /// A request counted started (latency from `now`).
    fn started(&self) {
        self.ctx.rec.borrow_mut().request_started();
        self.ctx.in_flight.set(self.ctx.in_flight.get() + 1);
    }

    /// Moves connection `i` on: opens it when it has none, starts streams
    /// while it has room, sends what it has to send, closes it when it is
    /// dead with nothing in flight, and marks it done when nothing more
    /// will start.
    fn turn(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let c = &self.conns[i];
        match c.state {
            State::Done | State::Connecting | State::Tls => return Ok(()),
            // The preface (after a TLS handshake), acks of the server's
            // SETTINGS.
            State::Preface => return self.flush(i),
            State::Ready if c.dead && c.streams.is_empty() && c.waiting.is_none() && !c.sending => {
                self.close(i, true);
                self.starts.push(i);
                return Ok(());
            }
            State::Ready => {}
            State::Idle => {
                let Some(start) = self.take(now) else {
                    self.conns[i].state = State::Done;
                    return Ok(());
                };
                self.started();
                self.conns[i].waiting = Some(start);
                return self.open(i, now);
            }
        }
        self.fill(i, now);
        let c = &mut self.conns[i];
        if c.streams.is_empty() && c.waiting.is_none() {
            if self.ctx.stopping.get() || self.budget == Some(0) {
                // Open until the end, as the epoll path keeps its pool
                // (close_all counts it closed).
                c.state = State::Done;
                return Ok(());
            }
            c.shrink();
        }
        self.flush(i)
    }

    /// Starts streams on connection `i` while it has room and requests
    /// are left; a request that finds no room (the server allows no
    /// stream) waits, counted, until its deadline.
    fn fill(&mut self, i: usize, now: Instant) {
        let limit = self.conns[i].limit(self.spec.streams);
        loop {
            let c = &self.conns[i];
            if c.dead || c.streams.len() >= limit {
                return;
            }
            if !c.can_start() {
                let idle = c.streams.is_empty() && c.waiting.is_none();
                if idle && let Some(start) = self.take(now) {
                    self.started();
                    let c = &mut self.conns[i];
                    c.waiting = Some(start);
                    c.deadline = now + self.ctx.spec.timeout;
                }
                return;
            }
            let start = match self.conns[i].waiting.take() {
                Some(start) => start,
                None => match self.take(now) {
                    Some(start) => {
                        self.started();
                        start
                    }
                    None => return,
                },
            };
            self.start_stream(i, start, now);
        }
    }

    /// Opens a stream on connection `i` for a request started at `start`.
    fn start_stream(&mut self, i: usize, start: Instant, now: Instant) {
        let ctx = self.ctx;
        let body = &self.spec.body;
        let keep_server = ctx.rec.borrow().wants_first_reply();
        let head = ctx.spec.head_request;
        let c = &mut self.conns[i];
        let Some(conn) = c.h2.as_mut() else { return };
        let (block, trace) = match &ctx.spec.trace {
            Some(t) => {
                let traced = t.stamp_block(&mut self.traced, Some((&self.block[..], self.trace_at)));
                (&traced.bytes[..], Some(traced.id))
            }
            None => (&self.block[..], None),
        };
        let id = match conn.start_request(block, body.is_empty()) {
            Ok(id) => id,
            Err(e) => {
                // Checked can_start_request: a connection that ended.
                c.dead = true;
                let class = match e {
                    throng_http2::SendError::GoingAway | throng_http2::SendError::StreamIdsExhausted => {
                        ErrorClass::H2("goaway")
                    }
                    throng_http2::SendError::StreamLimit(_) => ErrorClass::H2("refused_stream"),
                    _ => ErrorClass::H2("protocol"),
                };
                ctx.in_flight.set(ctx.in_flight.get() - 1);
                let mut rec = ctx.rec.borrow_mut();
                rec.request_failed(now, class, 0);
                if let (Some(t), Some(id)) = (&ctx.spec.trace, trace) {
                    t.offer(&mut rec, start, now, SlowEnd::Error(class), id);
                }
                return;
            }
        };
        if let (Some(traces), Some(trace)) = (self.traces.get_mut(i), trace) {
            traces.push((id, trace));
        }
        let mut body_left = 0;
        if !body.is_empty() {
            let n = conn.send_data(id, body, true).unwrap_or(body.len());
            body_left = body.len() - n.min(body.len());
        }
        let mut session = c.session(head);
        if let Session::Http2(slot) = &mut session {
            slot.reset(Keep {
                server: keep_server,
                ..Keep::default()
            });
            slot.for_method(&self.spec.method);
            slot.begin();
        }
        if c.streams.capacity() == 0 {
            c.streams.reserve_exact(self.spec.streams as usize);
        }
        c.streams.push(Stream {
            id,
            session,
            start,
            sent: now,
            stamped: false,
            first: None,
            end: None,
            // Until its send is stamped (stamp_queued).
            deadline: now + ctx.spec.timeout,
            keep_server,
            body_left,
        });
        let open = c.streams.len() as u64;
        ctx.rec.borrow_mut().stream_opened(now, open);
    }

    /// Sends connection `i`'s pending output (every frame of the turn in
    /// one send), unless a send is under way (then its completion does).
    fn flush(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        if c.fd < 0 || !c.take_output() {
            return Ok(());
        }
        if c.streams.iter().any(|s| !s.stamped) {
            self.queued.push(i);
        }
        self.send(i)
    }

    /// Queues the send of what is left of connection `i`'s output.
    fn send(&mut self, i: usize) -> io::Result<()> {
        let c = &mut self.conns[i];
        let left = &c.out[c.off.min(c.out.len())..];
        let chunk = u32::try_from(left.len()).unwrap_or(u32::MAX);
        c.sending = true;
        let sqe = opcode::Send::new(types::Fd(c.fd), left.as_ptr(), chunk)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .user_data(user_data(i, c.generation, OP_SEND));
        self.push(&sqe)
    }

    /// The send time of every stream whose HEADERS the queued sends carry:
    /// now, just before the system call that submits them.
    fn stamp_queued(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let now = Instant::now();
        let timeout = self.ctx.spec.timeout;
        for i in self.queued.drain(..) {
            if let Some(c) = self.conns.get_mut(i) {
                for s in c.streams.iter_mut().filter(|s| !s.stamped) {
                    s.stamped = true;
                    s.sent = now;
                    s.deadline = now + timeout;
                }
            }
        }
    }

    /// Queues `sqe`, stamping queued sends if the queue must be submitted
    /// early to make room.
    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        let queued = &mut self.queued;
        let conns = &mut self.conns;
        let timeout = self.ctx.spec.timeout;
        self.ring.push(sqe, || {
            let now = Instant::now();
            for i in queued.drain(..) {
                if let Some(c) = conns.get_mut(i) {
                    for s in c.streams.iter_mut().filter(|s| !s.stamped) {
                        s.stamped = true;
                        s.sent = now;
                        s.deadline = now + timeout;
                    }
                }
            }
        })
    }

    /// Opens connection `i` (counted started) and queues its connect.
    fn open(&mut self, i: usize, now: Instant) -> io::Result<()> {
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
    fn connect(&mut self, i: usize) -> io::Result<()> {
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
    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
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
    fn complete(&mut self, ud: u64, res: i32, flags: u32, now: Instant) -> io::Result<()> {
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
    fn connected(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
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
    fn connect_failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
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
    fn sent(&mut self, i: usize, res: i32) -> io::Result<()> {
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
    fn received(&mut self, i: usize, bid: u16, len: usize, now: Instant) -> io::Result<()> {
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
    fn tls_received(&mut self, i: usize, fed: Result<TlsFed, ErrorClass>, now: Instant) -> io::Result<()> {
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
    fn handshaken(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        c.state = State::Ready;
        let server = c.server_max;
        let server_max = (server != u32::MAX).then_some(u64::from(server));
        let mut rec = self.ctx.rec.borrow_mut();
        rec.phase(now, Phase::Handshake, now - c.preface_at);
        rec.mux_connection("h2", u64::from(self.spec.streams), server_max);
    }

    /// Records the streams of connection `i` that ended, as the epoll
    /// path does; a failure that is not one stream's kills the connection.
    fn end_streams(&mut self, i: usize) {
        let ctx = self.ctx;
        let request_len = self.spec.head_bytes + self.spec.body.len();
        let head_len = self.spec.head_bytes;
        let body_len = self.spec.body.len();
        let traces = self.traces.get_mut(i);
        let c = &mut self.conns[i];
        let went_away = c.went_away;
        let mut dead = c.dead;
        let mut traces = traces;
        c.take_ended(|s, end| {
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
        c.dead = dead;
    }

    /// Connection `i` failed with `class`: its streams fail, a request
    /// waiting for it fails (its preface unanswered: the connection's
    /// failure), and it is closed; the slot opens a new one.
    fn failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
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
    fn expire(&mut self, now: Instant) -> io::Result<()> {
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
    fn close(&mut self, i: usize, count: bool) {
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
    fn drop_socket(&mut self, i: usize) {
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
    fn close_all(&mut self, count: bool) {
        for i in 0..self.conns.len() {
            self.close(i, count);
        }
        let _ = self.ring.ring.submitter().unregister_buf_ring(BGID);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
