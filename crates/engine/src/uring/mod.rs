//! `--io uring`: a worker that drives its HTTP/1.1 connections through one
//! io_uring instead of tokio's epoll readiness loop.
//!
//! ```text
//!  closed loop: slot ─► Connect ─► Send + RecvMulti (armed once per connection)
//!                          ▲            │ completions, a batch per io_uring_enter
//!                          │            ▼
//!                      reconnect ◄── ResponseReader ── record_exchange (as the epoll path)
//!
//!  open loop:   arrivals due ─► queue (one start per slot) ─► the slot freed last
//!               io_uring_enter waits until the next arrival at most
//! ```
//!
//! Each connection is a slot in a table, not a task: the loop queues the
//! sends of every connection whose response came in, submits them all in one
//! `io_uring_enter` that also waits for the next completions, and reads the
//! responses from a ring of provided buffers that a multishot receive per
//! connection fills. One system call carries many requests, where the
//! readiness model pays a `sendto` and a `recvfrom` for each.
//!
//! Measurement is the epoll path's: a request's send time is taken just
//! before the system call that submits its send, its first and last bytes
//! by the kernel's receive stamps that each multishot `recvmsg` carries in
//! its control messages (the reap time when a stamp is missing or
//! implausible, as crate::stamps says), and the outcome is recorded by
//! [`crate::record::record_exchange`], so error classes, bytes and
//! conservation are the same.
//!
//! An open loop (`-r`) starts requests on its schedule as the epoll open
//! loop does (see [`schedule`]): a slot per connection up to `-c`, the
//! latency of each request from its intended start, lateness as
//! `schedule_lag`, starts no slot could take as `dropped`. Every wait for
//! completions ends by the next arrival's due time (the wait's timeout),
//! so batching completions never delays a start.
//!
//! HTTP/2 closed and open loops (h2c or over TLS) run a loop of their own
//! on the same ring ([`h2`]): a slot per connection driving the I/O-free
//! `throng_http2` client, recorded as the epoll driver records its streams.
//!
//! TLS plans ride the same loop ([`tls`], [`tls_io`]): rustls is I/O-free,
//! so its records go out through the ring's sends (tracked to completion)
//! and come in through the same multishot receives; the plan refuses what
//! the ring does not carry (HTTP/3, proxies,
//! several targets) before the run.

mod context;
mod exchange;
mod h2;
mod publish;
mod ring;
mod schedule;
mod sends;
mod slot;
mod storm;
mod tls;
mod tls_io;

use std::io;
use std::os::fd::IntoRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use io_uring::{cqueue, opcode, squeue, types};
use socket2::SockAddr;
use throng_metrics::{ErrorClass, Live, SlowEnd};
use tokio::sync::watch;

use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::load::{WorkerLoad, WorkerSpec};
use crate::proto::http1::Keep;
use crate::record::record_exchange;
use crate::worker::state::{RunState, Snapshots, WorkerDone};

use publish::Publisher;
use ring::{BGID, Ring, TICK, close_fd};
pub(crate) use ring::{ProbeError, probe};
use schedule::{Schedule, Starts};
use sends::Sends;
use slot::{Early, GENERATION, OP_CONNECT, OP_RECV, OP_SEND, Phase, Slot, new_socket, parse_user_data, user_data};
pub(crate) use storm::run as run_storm;
use tls::Tls;

/// Room for the control messages of a receive: one SCM_TIMESTAMPING (three
/// timespecs) with its header.
const CONTROL: usize = 64;
/// A request above this size goes out in several segments: only then is
/// TCP_NODELAY worth its system call (as crate::conn).
const NODELAY_ABOVE: usize = 1400;
/// A request up to this size is sent with no completion on success
/// (SKIP_SUCCESS): it fits the socket's send buffer, so the kernel takes
/// it whole inside the submission. A larger one may still be going out
/// when its response arrives (a server answering before it read the
/// body): its send posts a completion, and the exchange ends only when
/// both are done, as the epoll path reads the response only once it has
/// written the whole request.
const SEND_UNTRACKED_MAX: usize = 16 * 1024;

/// The loop of one worker on its ring.
struct Loop<'a> {
    ctx: &'a Ctx,
    ring: Ring,
    slots: Vec<Slot>,
    /// What each slot sends (several requests, trace context).
    sends: Sends,
    /// Slots whose send is queued: their send time is taken just before
    /// the submission that carries it.
    queued: Vec<usize>,
    /// Slots whose next request starts at the top of the next turn (not
    /// at once: a connect that fails inside its system call would recurse).
    starts: Vec<usize>,
    /// Slots whose receive must be armed again (ENOBUFS, or the kernel
    /// ended the multishot) once buffers are back.
    rearm: Vec<usize>,
    /// What starts requests.
    source: Starts,
    until: Option<Instant>,
    /// Slots connecting (warm ones too) or exchanging.
    active: usize,
    /// The route's addresses in the kernel's form, for connect operations
    /// (alive as long as the ring).
    addrs: Vec<SockAddr>,
    /// The template of every multishot `recvmsg`: no name, room for the
    /// receive stamp (boxed: the kernel reads it at each arming).
    msghdr: Box<libc::msghdr>,
    /// Sockets ask for kernel receive stamps (crate::stamps).
    stamp: bool,
    /// Waits may hold out for a batch (the kernel took `min_wait`).
    batch: bool,
    /// A TLS plan's sessions, one per slot (none for plain plans).
    tls: Option<Tls>,
}

/// Runs one worker's closed or open loop on an io_uring to completion on
/// the current thread; the same contract as [`crate::worker::run`].
pub(crate) fn run(
    spec: WorkerSpec,
    mut state: watch::Receiver<RunState>,
    live: Arc<Mutex<Live>>,
    snapshot: Option<Snapshots>,
) -> io::Result<WorkerDone> {
    if matches!(spec.wire, crate::proto::wire::Wire::Http2(_)) {
        return h2::run(spec, state, live, snapshot);
    }
    let cpu_before = crate::sys::thread_cpu();
    let origin = spec.origin;
    // Closed: every slot starts at once. Open: slots are added as the
    // schedule needs them, `warm` of them connected before it starts.
    let (connections, source, until, warm) = match spec.load.clone() {
        WorkerLoad::Closed {
            connections,
            budget,
            until,
        } => (connections, Starts::Budget(budget), until, None),
        WorkerLoad::Open {
            arrivals,
            cap,
            warm,
            gap,
            ..
        } => {
            let cap_slots = usize::try_from(cap).unwrap_or(usize::MAX).min(1 << 24);
            (
                cap,
                Starts::Schedule(Schedule::new(arrivals, origin, cap_slots, gap)),
                None,
                Some(warm),
            )
        }
        _ => {
            return Err(io::Error::other(
                "--io uring runs HTTP closed and open loops only (the plan should have said so)",
            ));
        }
    };
    let connections = usize::try_from(connections).unwrap_or(usize::MAX).min(1 << 24);
    let ring = Ring::new(connections).map_err(|e| io::Error::new(e.kind(), format!("--io uring: {e}")))?;
    let ctx = context::ring_ctx(spec, true);
    let head = ctx.spec.head_request;
    let now = Instant::now();
    let closed = warm.is_none();
    let mut lp = Loop {
        ctx: &ctx,
        ring,
        slots: if closed {
            (0..connections).map(|_| Slot::new(head, now)).collect()
        } else {
            Vec::new()
        },
        sends: Sends::new(&ctx),
        queued: Vec::new(),
        starts: if closed { (0..connections).collect() } else { Vec::new() },
        rearm: Vec::new(),
        source,
        until,
        active: 0,
        addrs: ctx.spec.route.addrs.iter().map(|&a| SockAddr::from(a)).collect(),
        msghdr: {
            // SAFETY: msghdr is plain old data; all-zero is a valid value.
            let mut m: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
            m.msg_controllen = CONTROL as _;
            m
        },
        stamp: ctx.stamp,
        batch: true,
        tls: ctx
            .spec
            .tls
            .clone()
            .map(|client| Tls::new(client, if closed { connections } else { 0 })),
    };

    if let Some(warm) = warm {
        // The open loop's warm connections connect now; the loop's waits
        // end by the first arrival, at the origin.
        for _ in 0..warm.min(connections as u64) {
            lp.warm(now)?;
        }
    } else {
        context::wait_origin(origin, &state, TICK);
    }
    let aborted = lp.run(&mut state, &live, snapshot.as_ref())?;
    if let Starts::Schedule(s) = &mut lp.source {
        // Aborted: the starts still queued were never sent.
        s.stop(Instant::now(), &mut ctx.rec.borrow_mut());
    }
    lp.close_all(!aborted);
    drop(lp);
    Ok(context::done(&ctx, cpu_before))
}

impl Loop<'_> {
    /// Runs until every slot is done (budget spent, deadline passed or the
    /// run stopped, and nothing in flight) or the run aborts (true).
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
                self.stop();
            }
            let now = Instant::now();
            if let Starts::Schedule(s) = &mut self.source {
                s.dispatch(now, &mut self.ctx.rec.borrow_mut());
            }
            for i in std::mem::take(&mut self.starts) {
                self.next_request(i, now)?;
            }
            self.assign(now)?;
            let finished = match &self.source {
                Starts::Budget(_) => self.slots.iter().all(|s| s.phase == Phase::Done),
                Starts::Schedule(s) => s.finished(),
            };
            if self.active == 0 && (self.ctx.stopping.get() || finished) {
                return Ok(false);
            }

            self.stamp_queued();
            // An open loop's wait ends when its next start is due.
            let due = self.source.due_in();
            self.ring.wait(self.active, due, &mut self.batch)?;
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
                    self.stop();
                }
            }
            publisher.publish(self.ctx, now, live, snapshot);
        }
    }

    /// Starts nothing new: idle slots are done, queued starts dropped.
    fn stop(&mut self) {
        self.ctx.stop();
        if let Starts::Schedule(s) = &mut self.source {
            s.stop(Instant::now(), &mut self.ctx.rec.borrow_mut());
        }
        for s in &mut self.slots {
            if s.phase == Phase::Idle {
                s.phase = Phase::Done;
            }
        }
    }

    /// When slot `i`'s next request starts (latency's origin): now while
    /// the closed loop's budget lasts, or the open loop's next queued start
    /// (then the slot is idle until one comes). None: the slot is done or
    /// idle.
    fn take(&mut self, i: usize, now: Instant) -> Option<Instant> {
        if self.ctx.stopping.get() {
            self.slots[i].phase = Phase::Done;
            return None;
        }
        let start = self
            .source
            .take(now, self.ctx.spec.timeout, &mut self.ctx.rec.borrow_mut());
        if start.is_none() {
            match &mut self.source {
                Starts::Budget(_) => self.slots[i].phase = Phase::Done,
                Starts::Schedule(s) => s.idle(i),
            }
        }
        start
    }

    /// Open loop: hands the queued starts to idle slots, the one freed
    /// last first, then to new slots up to the cap (as fast as the epoll
    /// loop opens connections when none is free).
    fn assign(&mut self, now: Instant) -> io::Result<()> {
        loop {
            let Starts::Schedule(s) = &mut self.source else {
                return Ok(());
            };
            if !s.waiting() || self.ctx.stopping.get() {
                return Ok(());
            }
            let i = match s.pop_idle() {
                Some(i) if self.slots.get(i).is_some_and(|s| s.phase == Phase::Idle) => i,
                Some(_) => continue,
                None if s.may_grow(self.slots.len(), now) => self.add_slot(now),
                None => return Ok(()),
            };
            self.next_request(i, now)?;
        }
    }

    /// Open loop: a new slot connects before any request (a warm
    /// connection).
    fn warm(&mut self, now: Instant) -> io::Result<()> {
        let i = self.add_slot(now);
        self.slots[i].phase = Phase::Warming;
        self.active += 1;
        self.open(i, now)
    }

    /// A new slot (and its TLS session's holder); its index.
    fn add_slot(&mut self, now: Instant) -> usize {
        self.slots.push(Slot::new(self.ctx.spec.head_request, now));
        if let Some(tls) = &mut self.tls {
            tls.grow(self.slots.len());
        }
        self.slots.len() - 1
    }

    /// The send time of every queued send: now, just before the system
    /// call that submits them.
    fn stamp_queued(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let now = Instant::now();
        let timeout = self.ctx.spec.timeout;
        for i in self.queued.drain(..) {
            let len = self.sends.get(self.ctx, i).len();
            self.slots[i].queued_out(now, timeout, len);
        }
    }

    /// Queues `sqe`, stamping queued sends if the queue must be submitted
    /// early to make room.
    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        let queued = &mut self.queued;
        let slots = &mut self.slots;
        let (sends, ctx) = (&self.sends, self.ctx);
        let timeout = ctx.spec.timeout;
        self.ring.push(sqe, || {
            let now = Instant::now();
            for i in queued.drain(..) {
                slots[i].queued_out(now, timeout, sends.get(ctx, i).len());
            }
        })
    }

    /// Starts slot `i`'s next request, or marks it done or idle.
    fn next_request(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let Some(start) = self.take(i, now) else {
            return Ok(());
        };
        let ctx = self.ctx;
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        self.active += 1;
        let keep_server = ctx.rec.borrow().wants_first_reply();
        let s = &mut self.slots[i];
        s.start = start;
        s.first = None;
        s.written = 0;
        s.keep_server = keep_server;
        s.sending = false;
        s.early = Early::None;
        self.sends.next(ctx, i);
        if let Some(tls) = &mut self.tls {
            tls.next_request(i);
        }
        let s = &mut self.slots[i];
        s.session.reset(Keep {
            server: keep_server,
            ..Keep::default()
        });
        if s.fd >= 0 {
            s.phase = Phase::Exchanging;
            return self.send(i);
        }
        s.phase = Phase::Connecting;
        self.open(i, now)
    }

    /// Starts slot `i`'s new connection (counted started).
    fn open(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        let s = &mut self.slots[i];
        s.tries = 0;
        s.addr = ctx.prefer.get();
        s.opened = now;
        s.deadline = now + ctx.spec.timeout;
        s.conn_id = ctx.next_conn.get();
        ctx.next_conn.set(s.conn_id + 1);
        ctx.rec.borrow_mut().connection_started(now, false);
        ctx.connecting.set(ctx.connecting.get() + 1);
        if self.tls.is_some() {
            self.tls_prepare(i)?;
            if self.slots[i].phase == Phase::Idle {
                // No session could be made: counted failed.
                return Ok(());
            }
        }
        self.connect(i)
    }

    /// Opens a socket for slot `i` and queues its connect to the route's
    /// next address.
    fn connect(&mut self, i: usize) -> io::Result<()> {
        let ctx = self.ctx;
        let addrs = &ctx.spec.route.addrs;
        let n = addrs.len().max(1);
        let s = &mut self.slots[i];
        let Some(&addr) = addrs.get(s.addr % n) else {
            return self.connect_failed(i, ErrorClass::Refused);
        };
        s.tries += 1;
        let socket = match new_socket(addr, self.sends.longest() > NODELAY_ABOVE) {
            Ok(sock) => sock,
            Err(e) => return self.connect_failed(i, classify(&e, Stage::Connect)),
        };
        s.fd = socket.into_raw_fd();
        s.recv_armed = false;
        if self.stamp {
            // Refused (never on Linux ≥ 2.6.30): reads fall back to the user
            // clock, and the result counts them.
            crate::stamps::enable(s.fd);
        }
        let Some(sa) = self.addrs.get(s.addr % n) else {
            return self.connect_failed(i, ErrorClass::Refused);
        };
        let sqe = opcode::Connect::new(types::Fd(s.fd), sa.as_ptr().cast(), sa.len())
            .build()
            .user_data(user_data(i, s.generation, OP_CONNECT));
        self.push(&sqe)
    }

    /// Queues slot `i`'s request (what is left of it) and, on a new
    /// connection, its multishot receive.
    fn send(&mut self, i: usize) -> io::Result<()> {
        if self.tls.is_some() {
            return self.tls_flush(i);
        }
        let request = self.sends.get(self.ctx, i);
        let s = &mut self.slots[i];
        let track = request.len() > SEND_UNTRACKED_MAX;
        let left = &request[s.written.min(request.len())..];
        // At most u32::MAX bytes per operation: a longer rest goes in the
        // next one (sent() queues it).
        let chunk = u32::try_from(left.len()).unwrap_or(u32::MAX);
        // MSG_WAITALL: the ring sends it all or fails. A small request's
        // success needs no completion (SKIP_SUCCESS); a failure posts one
        // with the bytes that got out, or the error. A large one's posts
        // one either way (sent()).
        let sqe = opcode::Send::new(types::Fd(s.fd), left.as_ptr(), chunk)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .user_data(user_data(i, s.generation, OP_SEND));
        let sqe = if track {
            s.sending = true;
            sqe
        } else {
            sqe.flags(squeue::Flags::SKIP_SUCCESS)
        };
        if s.written == 0 {
            // Stamped just before the submission (stamp_queued); until
            // then a deadline no scan can reach first.
            self.slots[i].deadline = Instant::now() + self.ctx.spec.timeout;
            self.queued.push(i);
        }
        self.push(&sqe)?;
        if !self.slots[i].recv_armed {
            self.arm_recv(i)?;
        }
        Ok(())
    }

    /// Arms slot `i`'s multishot receive (if its connection is still open).
    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let s = &mut self.slots[i];
        if s.fd < 0 || s.recv_armed {
            return Ok(());
        }
        s.recv_armed = true;
        let sqe = opcode::RecvMsgMulti::new(types::Fd(s.fd), &raw const *self.msghdr, BGID)
            .build()
            .user_data(user_data(i, s.generation, OP_RECV));
        self.push(&sqe)
    }

    /// Handles one completion.
    fn complete(&mut self, ud: u64, res: i32, flags: u32, now: Instant) -> io::Result<()> {
        let (i, generation, op) = parse_user_data(ud);
        let bid = cqueue::buffer_select(flags);
        let current = self
            .slots
            .get(i)
            .is_some_and(|s| s.fd >= 0 && s.generation & GENERATION == generation);
        if !current {
            // A closed connection's: only its buffer matters.
            if let Some(b) = bid {
                self.ring.bufs.give_back(b);
            }
            return Ok(());
        }
        match op {
            OP_CONNECT => self.connected(i, res, now),
            OP_SEND => self.sent(i, res, now),
            OP_RECV => {
                if !cqueue::more(flags) {
                    self.slots[i].recv_armed = false;
                }
                let out = match (res, bid) {
                    (n, Some(b)) if n > 0 => {
                        let r = self.received(i, b, n as usize, now);
                        self.ring.bufs.give_back(b);
                        r
                    }
                    (0, _) => self.eof(i, now),
                    (n, _) if n == -libc::ENOBUFS => {
                        // Out of buffers: armed again once this batch gave them back.
                        self.rearm.push(i);
                        Ok(())
                    }
                    (n, _) if n < 0 => {
                        self.recv_failed(i, classify(&io::Error::from_raw_os_error(-n), Stage::Exchange))
                    }
                    _ => Ok(()),
                };
                let s = &self.slots[i];
                if s.fd >= 0 && !s.recv_armed && res > 0 {
                    // The kernel ended the multishot: arm it again.
                    self.rearm.push(i);
                }
                out
            }
            _ => Ok(()),
        }
    }

    /// Slot `i`'s connect completed with `res`.
    fn connected(&mut self, i: usize, res: i32, now: Instant) -> io::Result<()> {
        if !matches!(self.slots[i].phase, Phase::Connecting | Phase::Warming) {
            return Ok(());
        }
        if res < 0 {
            let class = classify(&io::Error::from_raw_os_error(-res), Stage::Connect);
            let s = &mut self.slots[i];
            if crate::reach::try_next(class) && s.tries < self.ctx.spec.route.addrs.len() && now < s.deadline {
                // The next address, as the epoll path tries them in order.
                close_fd(s.fd);
                s.fd = -1;
                s.generation = s.generation.wrapping_add(1);
                s.addr += 1;
                return self.connect(i);
            }
            return self.connect_failed(i, class);
        }
        let ctx = self.ctx;
        let s = &mut self.slots[i];
        let n = ctx.spec.route.addrs.len().max(1);
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.connected(now, now - s.opened);
            if let Some(&addr) = ctx.spec.route.addrs.get(s.addr % n) {
                rec.reached(addr);
            }
        }
        ctx.prefer.set(s.addr % n);
        if self.tls.is_some() {
            // Established once its handshake is done (tls_io::handshaken).
            return self.tls_start(i, now);
        }
        ctx.connecting.set(ctx.connecting.get() - 1);
        ctx.rec.borrow_mut().connection_established(now, false);
        if s.phase == Phase::Warming {
            // Ready for a start; its receive armed now, so that a server
            // closing it meanwhile is seen (and the close counted).
            s.phase = Phase::Idle;
            self.active -= 1;
            self.starts.push(i);
            return self.arm_recv(i);
        }
        s.phase = Phase::Exchanging;
        self.send(i)
    }

    /// Slot `i`'s connection could not be opened: the attempt and its
    /// request (a warm connection has none) fail with `class` (as the epoll
    /// path counts them).
    fn connect_failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let ctx = self.ctx;
        let now = Instant::now();
        let warm = self.slots[i].phase == Phase::Warming;
        ctx.connecting.set(ctx.connecting.get() - 1);
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.connection_failed(now, class, false);
            if !warm {
                rec.request_failed(now, class, 0);
                if let (Some(t), Some(id)) = (&ctx.spec.trace, self.sends.trace_id(i)) {
                    t.offer(&mut rec, self.slots[i].start, now, SlowEnd::Error(class), id);
                }
            }
        }
        if !warm {
            self.sends.ended(ctx, i, now, None);
        }
        if !warm {
            ctx.in_flight.set(ctx.in_flight.get() - 1);
        }
        self.active -= 1;
        self.drop_socket(i)?;
        self.slots[i].phase = Phase::Idle;
        self.starts.push(i);
        Ok(())
    }

    /// Slot `i`'s request failed with `class`.
    fn failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let written = self.slots[i].written;
        self.finish(i, Err(Failed { class, written }))
    }

    /// Records slot `i`'s request as the epoll path does, keeps or closes
    /// its connection, and starts its next request.
    fn finish(&mut self, i: usize, outcome: Result<Timing, Failed>) -> io::Result<()> {
        let ctx = self.ctx;
        let spec = &ctx.spec;
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        self.active -= 1;
        let s = &mut self.slots[i];
        s.phase = Phase::Idle;
        let recorded = record_exchange(
            ctx,
            &mut s.session,
            &outcome,
            self.sends.get(ctx, i).len(),
            s.t_send,
            s.start,
            &spec.expect,
            s.keep_server,
            None,
        );
        if let (Some(t), Some(id)) = (&spec.trace, self.sends.trace_id(i)) {
            let (end, how) = match &outcome {
                Ok(timing) => (timing.done, SlowEnd::Status(s.session.reply().status)),
                Err(f) => (Instant::now(), SlowEnd::Error(f.class)),
            };
            t.offer(&mut ctx.rec.borrow_mut(), s.start, end, how, id);
        }
        let response = match (&outcome, recorded) {
            (Ok(timing), Some(ok)) => Some((timing.done.saturating_duration_since(s.t_send), ok)),
            _ => None,
        };
        self.sends.ended(ctx, i, Instant::now(), response);
        let reuse = match outcome {
            Ok(timing) => recorded.is_some() && spec.keepalive && s.session.reusable(&timing),
            Err(_) => false,
        };
        if !reuse {
            self.drop_connection(i)?;
        }
        self.starts.push(i);
        Ok(())
    }

    /// Closes slot `i`'s connection (counted closed). A request in flight on
    /// it is the caller's to record.
    fn drop_connection(&mut self, i: usize) -> io::Result<()> {
        let s = &self.slots[i];
        if s.fd < 0 {
            return Ok(());
        }
        if !matches!(s.phase, Phase::Connecting | Phase::Warming) {
            let now = Instant::now();
            self.ctx.rec.borrow_mut().connection_closed(now, now - s.opened);
        }
        self.drop_socket(i)
    }

    /// Shuts slot `i`'s socket down (ending the receive the ring holds on
    /// it) and closes it; later completions of it are stale. Two system
    /// calls, not ring operations: the ring runs a shutdown on a worker
    /// thread, and one still queued when the ring is dropped would never
    /// close its socket.
    fn drop_socket(&mut self, i: usize) -> io::Result<()> {
        let s = &mut self.slots[i];
        if s.fd < 0 {
            return Ok(());
        }
        let fd = s.fd;
        s.fd = -1;
        s.recv_armed = false;
        s.generation = s.generation.wrapping_add(1);
        // SAFETY: shutdown on a socket this worker owns (it may not be
        // connected: then it fails, harmlessly).
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        close_fd(fd);
        if let Some(tls) = &mut self.tls {
            tls.forget(i);
        }
        Ok(())
    }

    /// Fails the requests past their deadline (connect or response).
    fn expire(&mut self, now: Instant) -> io::Result<()> {
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if now < s.deadline {
                continue;
            }
            match s.phase {
                Phase::Connecting | Phase::Warming => {
                    let handshaking = self.tls.as_ref().is_some_and(|t| t.handshaking(i));
                    let class = if handshaking {
                        ErrorClass::TimeoutTls
                    } else {
                        ErrorClass::TimeoutConnect
                    };
                    self.connect_failed(i, class)?;
                }
                Phase::Exchanging => self.failed(i, ErrorClass::TimeoutResponse)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// At the end: closes every connection, counted closed when the run
    /// ended gracefully (an aborted run's connections are not, as in the
    /// epoll path).
    fn close_all(&mut self, count: bool) {
        let now = Instant::now();
        for s in &mut self.slots {
            if s.fd >= 0 {
                if count && !matches!(s.phase, Phase::Connecting | Phase::Warming) {
                    self.ctx.rec.borrow_mut().connection_closed(now, now - s.opened);
                }
                // SAFETY: shutdown on a socket this worker owns; it ends the
                // receive the ring still holds, so the socket goes with it.
                unsafe { libc::shutdown(s.fd, libc::SHUT_RDWR) };
                close_fd(s.fd);
                s.fd = -1;
            }
        }
        let _ = self.ring.ring.submitter().unregister_buf_ring(BGID);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the ring holds for each connection: its slot (every field is
    /// paid once per connection: at 15,000 connections each 100 bytes here
    /// is 1.5 MB), and its share of what the ring holds resident
    /// (submission and completion entries, a page of each receive buffer),
    /// which is fixed past 4,096 connections. 248 bytes of slot (a 72-byte
    /// HTTP/1.1 reader, seven instants, how a response ended before its
    /// large request was all sent, the rest counters and flags); the ring
    /// 2.6 MB at most: 262 bytes per connection at 10,000 (what the cli's
    /// `memory::` ring bound is made of), 642 at 4,096, 788 at 1,000, 2,959
    /// at 100 (64 buffers at least). Epoll's task is ~1,040 bytes and its
    /// receive buffer is the worker's, shared. A buffer per connection
    /// (4 KiB each, up to 4,096 of them) held 17.4 MB at most, 4,240 bytes
    /// per connection at 4,096: more than epoll below ~5,000 connections.
    #[test]
    fn what_a_ring_connection_holds_stays_bounded() {
        let slot = std::mem::size_of::<Slot>();
        assert!(slot <= 248, "a ring slot is {slot} bytes");
        let most = ring::footprint(usize::MAX);
        assert!(most <= 2_700_000, "a ring holds {most} bytes at most");
        for (connections, bound) in [(100, 3_000), (1_000, 800), (4_096, 650), (10_000, 270), (15_000, 180)] {
            assert!(ring::footprint(connections) <= most);
            let share = ring::footprint(connections).div_ceil(connections);
            assert!(
                share <= bound,
                "at {connections} connections the ring holds {share} bytes per connection; at most {bound} expected"
            );
        }
    }

    #[test]
    fn this_kernel_has_what_the_transport_needs() {
        // io_uring is enabled on the development machines (Linux 6.18).
        assert_eq!(probe(), Ok(()));
        let ring = Ring::new(100).expect("a ring with its buffers");
        assert!(ring.ring.params().sq_entries() >= 128);
    }
}
