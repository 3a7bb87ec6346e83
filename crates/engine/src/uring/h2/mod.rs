//! HTTP/2 closed and open loops on the ring, h2c (prior knowledge) or over
//! TLS (ALPN h2): each slot is one connection driving a `throng_http2::Conn`,
//! up to `--streams` streams in flight on it. An open loop (`-r`) takes its
//! starts from the ring's [`Schedule`] as the HTTP/1.1 loop does (a queue of
//! at most one start per stream slot; latency from the intended start,
//! lateness as `schedule_lag`, what no stream could take `dropped`): a start
//! goes to the first connection with room, else opens an idle connection.
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
use std::sync::{Arc, Mutex};
use std::time::Instant;

use io_uring::{opcode, squeue, types};
use socket2::SockAddr;
use throng_metrics::{ErrorClass, Live, SlowEnd};
use tokio::sync::watch;

mod complete;
mod conn;
mod end;

use super::context::{done, ring_ctx, wait_origin};
use super::publish::{self, Publisher};
use super::ring::{Ring, TICK};
use super::schedule::{Schedule, Starts};
use super::slot::{OP_SEND, user_data};
use crate::ctx::Ctx;
use crate::load::{WorkerLoad, WorkerSpec};
use crate::proto::http1::Keep;
use crate::proto::http2::{Spec, encode_head};
use crate::proto::session::Session;
use crate::transport::TlsClient;
use crate::worker::state::{RunState, Snapshots, WorkerDone};
use conn::{H2Conn, State, Stream};

/// Room for a receive's control messages (one SCM_TIMESTAMPING).
const CONTROL: usize = 64;
/// Plaintext taken out of a TLS session at a time (a record's most).
const PLAIN: usize = 16 * 1024;

/// The HTTP/2 loop of one worker on its ring.
struct H2Loop<'a> {
    ctx: &'a Ctx,
    spec: &'a Spec,
    /// Streams a connection carries at once: `--streams`, or one without
    /// keep-alive.
    streams: u32,
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
    /// What starts requests: the closed loop's budget (None: until
    /// stopped) or the open loop's schedule.
    source: Starts,
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
    // says the worker's connections. An open loop's connections open with
    // its first requests (no warm ones: a connection carries many).
    let (source, until, slots) = match spec.load.clone() {
        WorkerLoad::Closed {
            budget,
            until,
            connections,
        } => (Starts::Budget(budget), until, connections),
        WorkerLoad::Open { arrivals, cap, gap, .. } => {
            let slots = usize::try_from(cap).unwrap_or(usize::MAX).min(1 << 24);
            (Starts::Schedule(Schedule::new(arrivals, origin, slots, gap)), None, cap)
        }
        _ => {
            return Err(io::Error::other(
                "--io uring runs HTTP/2 closed and open loops only (the plan should have said so)",
            ));
        }
    };
    let closed = matches!(source, Starts::Budget(_));
    let crate::proto::wire::Wire::Http2(h2) = spec.wire.clone() else {
        return Err(io::Error::other("--io uring: not an HTTP/2 plan"));
    };
    // Without keep-alive every stream slot is a connection of its own,
    // closed when its one stream ends (as the epoll pool opens one per
    // request).
    let keepalive = spec.keepalive;
    let connections = if keepalive { h2.connections } else { slots };
    let connections = usize::try_from(connections).unwrap_or(usize::MAX).min(1 << 24);
    let ring = Ring::new(connections).map_err(|e| io::Error::new(e.kind(), format!("--io uring: {e}")))?;
    let ctx = ring_ctx(spec, true);
    let now = Instant::now();
    let mut lp = H2Loop {
        ctx: &ctx,
        spec: &h2,
        block: encode_head(&h2.method, &h2.uri, &h2.headers),
        streams: if keepalive { h2.streams } else { 1 },
        trace_at: None,
        traced: None,
        traces: Vec::new(),
        ring,
        conns: (0..connections).map(|_| H2Conn::new(now)).collect(),
        queued: Vec::new(),
        starts: if closed { (0..connections).collect() } else { Vec::new() },
        rearm: Vec::new(),
        source,
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
    if closed {
        // An open loop's waits end by its first arrival, at the origin.
        wait_origin(origin, &state, TICK);
    }
    let aborted = lp.run(&mut state, &live, snapshot.as_ref())?;
    if let Starts::Schedule(s) = &mut lp.source {
        // Aborted: the starts still queued were never sent.
        s.stop(Instant::now(), &mut ctx.rec.borrow_mut());
    }
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
            if let Starts::Schedule(s) = &mut self.source {
                s.dispatch(now, &mut self.ctx.rec.borrow_mut());
            }
            for i in std::mem::take(&mut self.starts) {
                self.turn(i, now)?;
            }
            self.assign(now)?;
            let finished = match &self.source {
                Starts::Budget(_) => self.conns.iter().all(|c| c.state == State::Done),
                Starts::Schedule(s) => s.finished() && self.ctx.in_flight.get() == 0,
            };
            if finished {
                return Ok(false);
            }
            self.stamp_queued();
            // An open loop's wait ends when its next start is due.
            let due = self.source.due_in();
            let in_flight = usize::try_from(self.ctx.in_flight.get()).unwrap_or(usize::MAX);
            self.ring.wait(in_flight, due, &mut self.batch)?;
            let now = Instant::now();
            self.ring.reap(&mut cqes);
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

    /// Starts nothing new (an open loop's queued starts are dropped);
    /// connections with nothing in flight are done.
    fn stop(&mut self) -> io::Result<()> {
        self.ctx.stop();
        if let Starts::Schedule(s) = &mut self.source {
            s.stop(Instant::now(), &mut self.ctx.rec.borrow_mut());
        }
        for i in 0..self.conns.len() {
            self.turn(i, Instant::now())?;
        }
        Ok(())
    }

    /// A request may start now: when it starts (latency's origin), now
    /// while the closed loop's budget lasts, or the open loop's next queued
    /// start (its lateness recorded as `schedule_lag`).
    fn take(&mut self, now: Instant) -> Option<Instant> {
        if self.ctx.stopping.get() {
            return None;
        }
        self.source
            .take(now, self.ctx.spec.timeout, &mut self.ctx.rec.borrow_mut())
    }

    /// Nothing more will start: the budget is spent, or the schedule
    /// ended with nothing queued.
    fn spent(&self) -> bool {
        match &self.source {
            Starts::Budget(b) => *b == Some(0),
            Starts::Schedule(s) => s.finished(),
        }
    }

    /// Open loop: hands the queued starts to connections with room, the
    /// first first (so a few connections carry a steady load, as the epoll
    /// pool takes the first with room), then opens idle ones, each with one
    /// start (the epoll pool opens one per start that finds no room).
    fn assign(&mut self, now: Instant) -> io::Result<()> {
        let waiting = |lp: &Self| matches!(&lp.source, Starts::Schedule(s) if s.waiting()) && !lp.ctx.stopping.get();
        if !waiting(self) {
            return Ok(());
        }
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.state == State::Ready && !c.dead && c.streams.len() < c.limit(self.streams) {
                self.fill(i, now);
                self.flush(i)?;
                if !waiting(self) {
                    return Ok(());
                }
            }
        }
        for i in 0..self.conns.len() {
            if self.conns[i].state != State::Idle {
                continue;
            }
            let Some(start) = self.take(now) else {
                return Ok(());
            };
            self.started();
            self.conns[i].waiting = Some(start);
            self.open(i, now)?;
            if !waiting(self) {
                return Ok(());
            }
        }
        Ok(())
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
            // An open loop's idle connection opens when a start needs it
            // (assign).
            State::Idle if matches!(self.source, Starts::Schedule(_)) => return Ok(()),
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
        let over = self.ctx.stopping.get() || self.spent();
        let c = &mut self.conns[i];
        if c.streams.is_empty() && c.waiting.is_none() {
            if over {
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
        let limit = self.conns[i].limit(self.streams);
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
            c.streams.reserve_exact(self.streams as usize);
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
}
