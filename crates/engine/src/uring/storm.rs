//! `throng storm` on the ring: one worker's storm connections as slots on
//! its io_uring instead of tokio tasks.
//!
//! ```text
//!  starts (rate, jitter, at once) ─► a free slot, under the cap ─► Connect
//!        │                                                          │
//!        │             the request (http://): Send + RecvMulti ◄────┤
//!        │                   │ HTTP/1.1 reader, record_exchange     │
//!        ▼                   ▼                                      ▼
//!   hold: the receive stays armed, no buffer of its own ──► hold end: close
//!        │ EOF, RST: closed by the server ──► --reconnect: wait, Connect again
//!        └─ stop: every held connection closed
//! ```
//!
//! What the epoll storm records, this records, at the same points: the
//! connection's start, `connect`, established or failed (its class), the
//! first wave resolved, the one request through
//! [`crate::record::record_exchange`], `closed_by_peer`, reconnects and why
//! they gave up, and a `connection` sample at every close; so reports,
//! classes and conservation are the same. A held connection is a slot
//! (about a hundred bytes) and its deadline; its receive is armed on the
//! worker's shared ring of provided buffers, so the server's close (or a
//! stray byte, read and dropped) needs no buffer per connection.
//!
//! TLS (tls://, https://) rides it too ([`tls`]): between `connected` and
//! `opened` a slot handshakes through its session in the ring's TLS table
//! ([`super::tls::Tls`]), and sheds it before the hold. The plan refuses
//! (`--io uring`) or hands epoll (auto) every storm that speaks a protocol
//! of its own ([`throng_plan::StormPlan::ring_refuses`]).

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{IntoRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types};
use socket2::SockAddr;
use throng_metrics::{ErrorClass, Live, Phase as Metric};
use throng_plan::{Reconnect, Rng, StormStarts};
use tokio::sync::watch;

use super::context::{done, ring_ctx};
use super::publish::{self, Publisher};
use super::ring::{BGID, Ring, close_fd};
use super::slot::{GENERATION, OP_CONNECT, OP_RECV, OP_SEND, new_socket, parse_user_data, user_data};
use super::tls::Tls;

mod exchange;
mod tls;
use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::load::{StormLoad, WorkerSpec};
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::worker::state::{RunState, Snapshots, WorkerDone};

/// How often the loop wakes with nothing completed (the run's state, the
/// live figures).
const TICK: Duration = Duration::from_millis(10);
/// The ring's size as if for this many connections at most: its
/// receive buffers (64 of 16 KiB) are shared by every slot and only the
/// responses and stray bytes of the moment use them, so a storm of 10,000
/// held connections maps a megabyte of them.
const RING_FOR: usize = 256;
/// Starts made per turn of the loop at most: a storm that starts
/// thousands at once reaps the first connects between its bursts (as the
/// epoll dispatcher lets its connections run between spawns), so neither
/// the completion queue nor the `connect` times grow with the burst.
const STARTS_PER_TURN: usize = 64;
/// Room for the control messages of a receive: one SCM_TIMESTAMPING (three
/// timespecs) with its header (as the ring's HTTP path).
const CONTROL: usize = 64;
/// Above this many request bytes, TCP_NODELAY is worth its system call (as
/// crate::conn).
const NODELAY_ABOVE: usize = 1400;

/// Where a storm slot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No connection: free for the next start.
    Free,
    /// connect() issued (the first or a reconnect).
    Connecting,
    /// TCP up, the TLS handshake under way (or its Finished on its way out).
    Handshaking,
    /// The request sent or queued; its response not complete.
    Exchanging,
    /// Established and held until its hold ends.
    Holding,
    /// Answered, not held: the server's close (which the request asked
    /// for) awaited, so that the server closes first and keeps the
    /// TIME_WAIT, as ab and `http --no-keepalive` leave it.
    Ending,
    /// The server closed it: waiting to reconnect.
    Waiting,
}

/// A request's exchange on its connection (boxed: a held slot has none).
struct Exchange {
    session: Session,
    /// Just before the submission that carried the request.
    t_send: Instant,
    first: Option<Instant>,
    keep_server: bool,
}

/// One storm connection, through its reconnects.
struct Slot {
    phase: Phase,
    /// The open socket (-1: none).
    fd: RawFd,
    /// Bumped at every close: completions of older sockets are stale.
    generation: u32,
    /// Bumped at every deadline set: older heap entries are stale.
    timer: u32,
    /// Addresses of the route tried for this opening, the one tried now.
    tries: u32,
    addr: u32,
    /// Reconnect attempts since the server closed it.
    attempts: u32,
    recv_armed: bool,
    /// A tracked send (TLS records) is in the kernel.
    sending: bool,
    /// This opening is a reconnect (counted as one).
    reconnect: bool,
    /// The first opening's outcome is not recorded yet (the first wave).
    first_wave: bool,
    /// connect() issued for the current connection.
    opened: Instant,
    /// The current phase's deadline (connect, response, hold end, the
    /// reconnect's wait).
    deadline: Instant,
    /// The hold's end: reconnects hold until then.
    hold_end: Instant,
    /// The server closed the connection (for the reconnect's time).
    dropped: Instant,
    /// The request's latency origin: its intended start (scheduled) or its
    /// start; a reconnect's request starts at its attempt.
    origin: Instant,
    source: Option<IpAddr>,
    exchange: Option<Box<Exchange>>,
}

impl Slot {
    fn new(now: Instant) -> Self {
        Slot {
            phase: Phase::Free,
            fd: -1,
            generation: 0,
            timer: 0,
            tries: 0,
            addr: 0,
            attempts: 0,
            recv_armed: false,
            sending: false,
            reconnect: false,
            first_wave: false,
            opened: now,
            deadline: now,
            hold_end: now,
            dropped: now,
            origin: now,
            source: None,
            exchange: None,
        }
    }
}

/// One worker's storm on its ring.
struct Storm<'a> {
    ctx: &'a Ctx,
    ring: Ring,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Deadlines: (when, slot, its timer then).
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Slots whose request is queued: their send time is taken just
    /// before the submission that carries it.
    queued: Vec<usize>,
    /// Slots whose receive must be armed again once buffers are back.
    rearm: Vec<usize>,
    starts: StormStarts,
    /// The next start's due instant (None: no more).
    next_due: Option<Instant>,
    /// Starts made, for rotating the sources.
    started: u64,
    /// Slots not free (open, opening or waiting to reconnect).
    live: u64,
    load: StormLoad,
    rng: Rng,
    /// The route's addresses in the kernel's form (alive as long as the ring).
    addrs: Vec<SockAddr>,
    /// The template of every multishot `recvmsg`: no name, room for the
    /// receive stamp (boxed: the kernel reads it at each arming).
    msghdr: Box<libc::msghdr>,
    /// The sessions of a TLS storm's slots (None: plain TCP).
    tls: Option<Tls>,
    /// A receive's records, copied out of the ring's buffer for the session.
    records: Vec<u8>,
}

/// Runs one worker's storm on an io_uring to completion on the current
/// thread; the same contract as [`crate::worker::run`].
pub(crate) fn run(
    spec: WorkerSpec,
    load: StormLoad,
    mut state: watch::Receiver<RunState>,
    live: Arc<Mutex<Live>>,
    snapshot: Option<Snapshots>,
) -> io::Result<WorkerDone> {
    let cpu_before = crate::sys::thread_cpu();
    let origin = spec.origin;
    let ring = Ring::new(RING_FOR).map_err(|e| io::Error::new(e.kind(), format!("--io uring: {e}")))?;
    let reads = !spec.request.is_empty();
    let ctx = ring_ctx(spec, reads);
    let mut starts = load.starts.clone();
    let next_due = starts.next().map(|o| origin + o);
    let mut storm = Storm {
        ctx: &ctx,
        ring,
        slots: Vec::new(),
        free: Vec::new(),
        deadlines: BinaryHeap::new(),
        queued: Vec::new(),
        rearm: Vec::new(),
        starts,
        next_due,
        started: 0,
        live: 0,
        rng: Rng::new(load.seed ^ load.worker.wrapping_mul(0x9E37_79B9)),
        load,
        addrs: ctx.spec.route.addrs.iter().map(|&a| SockAddr::from(a)).collect(),
        msghdr: {
            // SAFETY: msghdr is plain old data; all-zero is a valid value.
            let mut m: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
            m.msg_controllen = CONTROL as _;
            m
        },
        tls: ctx.spec.tls.clone().map(|client| Tls::new(client, 0)),
        records: Vec::new(),
    };
    let aborted = storm.run(&mut state, &live, snapshot.as_ref())?;
    storm.close_all(!aborted);
    drop(storm);
    Ok(done(&ctx, cpu_before))
}

impl Storm<'_> {
    /// Runs until every start is made and every slot free, or the run
    /// aborts (true).
    fn run(
        &mut self,
        state: &mut watch::Receiver<RunState>,
        live: &Mutex<Live>,
        snapshot: Option<&Snapshots>,
    ) -> io::Result<bool> {
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
            self.start_due(now)?;
            self.expire(now)?;
            if self.live == 0 && (self.next_due.is_none() || self.ctx.stopping.get()) {
                return Ok(false);
            }

            // Wait for completions until the next start or deadline, a
            // tick at most.
            let now = Instant::now();
            let mut wake = now + TICK;
            if let Some(due) = self.next_due
                && self.room()
            {
                wake = wake.min(due);
            }
            if let Some(Reverse((at, _, _))) = self.deadlines.peek() {
                wake = wake.min(*at);
            }
            self.stamp_queued();
            let wait = types::Timespec::from(wake.saturating_duration_since(now));
            let args = types::SubmitArgs::new().timespec(&wait);
            let waited = if wake <= now {
                self.ring.ring.submit()
            } else {
                self.ring.ring.submitter().submit_with_args(1, &args)
            };
            match waited {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {}
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

            publisher.publish(self.ctx, now, live, snapshot);
        }
    }

    /// A start may take a slot now (under the cap).
    fn room(&self) -> bool {
        self.load.cap.is_none_or(|cap| self.live < cap)
    }

    /// Starts the connections due by `now`, as many as the cap allows (a
    /// start that waits for a slot counts the wait as lateness, as on
    /// epoll).
    fn start_due(&mut self, now: Instant) -> io::Result<()> {
        for _ in 0..STARTS_PER_TURN {
            let Some(due) = self.next_due else {
                return Ok(());
            };
            if due > now || !self.room() || self.ctx.stopping.get() {
                return Ok(());
            }
            self.next_due = self.starts.next().map(|o| self.ctx.spec.origin + o);
            let k = self.started;
            self.started += 1;
            let sources = &self.ctx.spec.source;
            let source = if sources.is_empty() {
                None
            } else {
                // Rotated over the sources across every worker of the storm.
                let i = (k * self.load.workers + self.load.worker) % sources.len() as u64;
                sources.get(i as usize).copied()
            };
            let start = Instant::now();
            if self.load.scheduled {
                let lag = start.saturating_duration_since(due);
                self.ctx.rec.borrow_mut().phase(start, Metric::ScheduleLag, lag);
            }
            let i = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.slots.push(Slot::new(start));
                    self.slots.len() - 1
                }
            };
            self.live += 1;
            let s = &mut self.slots[i];
            s.source = source;
            s.first_wave = true;
            s.reconnect = false;
            s.attempts = 0;
            s.origin = if self.load.scheduled { due } else { start };
            self.open(i, start)?;
        }
        Ok(())
    }

    /// Sets slot `i`'s deadline to `at`.
    fn deadline(&mut self, i: usize, at: Instant) {
        let s = &mut self.slots[i];
        s.timer = s.timer.wrapping_add(1);
        s.deadline = at;
        // A worker's slots are at most its descriptor limit (far below 2^32).
        self.deadlines.push(Reverse((at, i as u32, s.timer)));
    }

    /// Handles the deadlines passed by `now`.
    fn expire(&mut self, now: Instant) -> io::Result<()> {
        while let Some(&Reverse((at, i, timer))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let i = i as usize;
            if self.slots.get(i).is_none_or(|s| s.timer != timer) {
                continue;
            }
            match self.slots[i].phase {
                Phase::Connecting => self.connect_failed(i, ErrorClass::TimeoutConnect)?,
                Phase::Handshaking => self.tls_failed(i, ErrorClass::TimeoutTls, now)?,
                Phase::Exchanging => self.finish(i, Err(ErrorClass::TimeoutResponse), now)?,
                Phase::Holding | Phase::Ending => {
                    self.close(i);
                    self.release(i);
                }
                Phase::Waiting => {
                    self.slots[i].attempts += 1;
                    self.open(i, now)?;
                }
                Phase::Free => {}
            }
        }
        Ok(())
    }

    /// Starts slot `i`'s connection (its request counted started).
    fn open(&mut self, i: usize, now: Instant) -> io::Result<()> {
        let ctx = self.ctx;
        if !ctx.spec.request.is_empty() {
            ctx.rec.borrow_mut().request_started();
            ctx.in_flight.set(ctx.in_flight.get() + 1);
        }
        let s = &mut self.slots[i];
        let reconnect = s.reconnect;
        s.phase = Phase::Connecting;
        s.tries = 0;
        s.addr = ctx.prefer.get() as u32;
        s.opened = now;
        if reconnect {
            // A reconnect's request starts at its attempt (as on epoll).
            s.origin = now;
        }
        ctx.next_conn.set(ctx.next_conn.get() + 1);
        ctx.rec.borrow_mut().connection_started(now, reconnect);
        let counter = self.counter(i);
        counter.set(counter.get() + 1);
        self.deadline(i, now + ctx.spec.timeout);
        self.connect(i)
    }

    /// What counts slot `i`'s opening until it resolves.
    fn counter(&self, i: usize) -> &Cell<u64> {
        if self.slots[i].reconnect {
            &self.ctx.reconnecting
        } else {
            &self.ctx.connecting
        }
    }

    /// Opens a socket for slot `i` (bound to its source address) and
    /// queues its connect to the route's next address.
    fn connect(&mut self, i: usize) -> io::Result<()> {
        if !self.tls_prepare(i)? {
            return Ok(());
        }
        let ctx = self.ctx;
        let addrs = &ctx.spec.route.addrs;
        let n = addrs.len().max(1);
        let s = &mut self.slots[i];
        let at = s.addr as usize % n;
        let Some(&addr) = addrs.get(at) else {
            return self.connect_failed(i, ErrorClass::Refused);
        };
        s.tries += 1;
        let socket = match new_socket(addr, ctx.spec.request.len() > NODELAY_ABOVE) {
            Ok(sock) => sock,
            Err(e) => return self.connect_failed(i, classify(&e, Stage::Connect)),
        };
        if let Some(ip) = s.source
            && let Err(e) = crate::conn::bind_source(&socket, ip)
        {
            return self.connect_failed(i, classify(&e, Stage::Connect));
        }
        s.fd = socket.into_raw_fd();
        s.recv_armed = false;
        if ctx.stamp {
            // Refused (never on Linux ≥ 2.6.30): reads fall back to the user
            // clock, and the result counts them.
            crate::stamps::enable(s.fd);
        }
        let Some(sa) = self.addrs.get(at) else {
            return self.connect_failed(i, ErrorClass::Refused);
        };
        let sqe = opcode::Connect::new(types::Fd(s.fd), sa.as_ptr().cast(), sa.len())
            .build()
            .user_data(user_data(i, s.generation, OP_CONNECT));
        self.push(&sqe)
    }

    /// Handles one completion.
    fn complete(&mut self, ud: u64, res: i32, flags: u32, now: Instant) -> io::Result<()> {
        let (i, generation, op) = parse_user_data(ud);
        let bid = cqueue::buffer_select(flags);
        if let Some(b) = bid {
            // Nothing is kept from a buffer past this completion.
            self.ring.bufs.give_back(b);
        }
        let current = self
            .slots
            .get(i)
            .is_some_and(|s| s.fd >= 0 && s.generation & GENERATION == generation);
        if !current {
            return Ok(());
        }
        match op {
            OP_CONNECT => self.connected(i, res, now),
            OP_SEND if self.tls.is_some() => self.tls_sent(i, res, now),
            OP_SEND => self.sent(i, res, now),
            OP_RECV => {
                if !cqueue::more(flags) {
                    self.slots[i].recv_armed = false;
                }
                let out = match (res, bid) {
                    (n, Some(b)) if n > 0 => self.received(i, b, n as usize, now),
                    (0, _) => self.peer_closed(i, None, now),
                    (n, _) if n == -libc::ENOBUFS => {
                        // Out of buffers: armed again once this batch gave them back.
                        self.rearm.push(i);
                        Ok(())
                    }
                    (n, _) if n < 0 => {
                        let class = classify(&io::Error::from_raw_os_error(-n), Stage::Exchange);
                        self.peer_closed(i, Some(class), now)
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
        if self.slots[i].phase != Phase::Connecting {
            return Ok(());
        }
        let ctx = self.ctx;
        let n = ctx.spec.route.addrs.len().max(1);
        if res < 0 {
            let class = classify(&io::Error::from_raw_os_error(-res), Stage::Connect);
            let s = &mut self.slots[i];
            if crate::reach::try_next(class) && (s.tries as usize) < n && now < s.deadline {
                // The next address, as the epoll path tries them in order.
                self.drop_socket(i);
                self.slots[i].addr += 1;
                return self.connect(i);
            }
            return self.connect_failed(i, class);
        }
        let s = &mut self.slots[i];
        let at = s.addr as usize % n;
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.connected(now, now - s.opened);
            if s.reconnect {
                rec.reconnect_accepted(now);
            }
            if let Some(&addr) = ctx.spec.route.addrs.get(at) {
                rec.reached(addr);
            }
        }
        ctx.prefer.set(at);
        if self.tls.is_some() {
            // Established once its handshake is done (tls::handshaken).
            return self.tls_start(i, now);
        }
        self.established(i, now);
        if ctx.spec.request.is_empty() {
            return self.opened(i, now);
        }
        self.begin_exchange(i, now);
        self.send(i, now)
    }

    /// Slot `i`'s connection is established at `now` (TCP connected, the
    /// TLS handshake done): its opening resolved, its hold's end set.
    fn established(&mut self, i: usize, now: Instant) {
        let counter = self.counter(i);
        counter.set(counter.get() - 1);
        let s = &mut self.slots[i];
        self.ctx.rec.borrow_mut().connection_established(now, s.reconnect);
        if !s.reconnect {
            s.hold_end = now + self.load.hold;
        }
    }

    /// Slot `i`'s request begins on its established connection.
    fn begin_exchange(&mut self, i: usize, now: Instant) {
        let ctx = self.ctx;
        let s = &mut self.slots[i];
        let keep_server = ctx.rec.borrow().wants_first_reply();
        let mut session = Session::new(false);
        session.reset(Keep {
            server: keep_server,
            ..Keep::default()
        });
        s.exchange = Some(Box::new(Exchange {
            session,
            t_send: now,
            first: None,
            keep_server,
        }));
        s.phase = Phase::Exchanging;
    }

    /// Arms slot `i`'s multishot receive (if its connection is still open).
    fn arm_recv(&mut self, i: usize) -> io::Result<()> {
        let s = &mut self.slots[i];
        if s.fd < 0 || s.recv_armed || matches!(s.phase, Phase::Free | Phase::Waiting) {
            return Ok(());
        }
        s.recv_armed = true;
        let sqe = opcode::RecvMsgMulti::new(types::Fd(s.fd), &raw const *self.msghdr, BGID)
            .build()
            .user_data(user_data(i, s.generation, OP_RECV));
        self.push(&sqe)
    }

    /// Slot `i`'s connection ended from the server's side (`class`: by an
    /// error, None: EOF): a response it delimits, a failed request, or a
    /// held connection closed by the server.
    fn peer_closed(&mut self, i: usize, class: Option<ErrorClass>, now: Instant) -> io::Result<()> {
        match self.slots[i].phase {
            Phase::Handshaking => {
                // The server ended the handshake: as epoll classes it.
                let class = class.unwrap_or(ErrorClass::Tls("handshake_eof"));
                self.tls_failed(i, class, now)
            }
            Phase::Exchanging => {
                if let Some(class) = class {
                    return self.finish(i, Err(class), now);
                }
                let Some(ex) = self.slots[i].exchange.as_mut() else {
                    return Ok(());
                };
                let first = ex.first.unwrap_or(now);
                let Session::Http1(reader) = &mut ex.session else {
                    return self.finish(i, Err(ErrorClass::Protocol), now);
                };
                match reader.eof() {
                    // A response the close delimits: not reusable, so not held.
                    Ok(()) => self.answered(i, first, now, true, false),
                    Err(_) => self.finish(i, Err(ErrorClass::Eof), now),
                }
            }
            Phase::Ending => {
                self.close(i);
                self.release(i);
                Ok(())
            }
            Phase::Holding => {
                self.ctx.rec.borrow_mut().closed_by_peer(now);
                self.close(i);
                if self.load.reconnect.is_some() {
                    let s = &mut self.slots[i];
                    s.dropped = now;
                    s.attempts = 0;
                    s.reconnect = true;
                    self.wait_to_reconnect(i, now);
                } else {
                    self.release(i);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Slot `i`'s opening is over (connected, its request answered): the
    /// first wave's or a reconnect's outcome, then the hold.
    fn opened(&mut self, i: usize, now: Instant) -> io::Result<()> {
        self.resolved(i, now);
        let hold = self.load.hold;
        let end = self.slots[i].hold_end;
        if hold.is_zero() || self.ctx.stopping.get() || now >= end {
            self.close(i);
            self.release(i);
            return Ok(());
        }
        self.slots[i].phase = Phase::Holding;
        self.deadline(i, end);
        // The server's close (or a stray byte) completes it; a request's
        // receive is armed already.
        self.arm_recv(i)
    }

    /// Slot `i`'s request was answered and the server closes after it:
    /// without a hold, that close ends the connection (awaited, a timeout
    /// at most); with one, there is nothing to hold.
    pub(super) fn answered_closing(&mut self, i: usize, now: Instant) -> io::Result<()> {
        if !self.load.hold.is_zero() {
            self.close(i);
            self.opening_failed(i, now);
            return Ok(());
        }
        self.resolved(i, now);
        if self.ctx.stopping.get() {
            self.close(i);
            self.release(i);
            return Ok(());
        }
        self.slots[i].phase = Phase::Ending;
        self.deadline(i, now + self.ctx.spec.timeout);
        self.arm_recv(i)
    }

    /// Slot `i` is established: the first wave's or a reconnect's outcome.
    fn resolved(&mut self, i: usize, now: Instant) {
        let hold = self.load.hold;
        let s = &mut self.slots[i];
        {
            let mut rec = self.ctx.rec.borrow_mut();
            if s.first_wave {
                s.first_wave = false;
                rec.first_wave_resolved(Some(s.hold_end - hold));
            }
            if s.reconnect {
                rec.reconnected(now, now - s.dropped);
            }
        }
        s.reconnect = false;
        if !s.sending
            && let Some(tls) = self.tls.as_mut()
        {
            // A held connection keeps no session and no buffer (as the
            // epoll storm's hold sheds its TLS).
            tls.shed(i);
        }
    }

    /// Slot `i`'s connection could not be opened: the attempt and its
    /// request fail with `class`.
    fn connect_failed(&mut self, i: usize, class: ErrorClass) -> io::Result<()> {
        let ctx = self.ctx;
        let now = Instant::now();
        let counter = self.counter(i);
        counter.set(counter.get() - 1);
        {
            let mut rec = ctx.rec.borrow_mut();
            rec.connection_failed(now, class, self.slots[i].reconnect);
            if !ctx.spec.request.is_empty() {
                rec.request_failed(now, class, 0);
            }
        }
        if !ctx.spec.request.is_empty() {
            ctx.in_flight.set(ctx.in_flight.get() - 1);
        }
        self.drop_socket(i);
        self.opening_failed(i, now);
        Ok(())
    }

    /// Slot `i`'s opening failed (already recorded): the first wave's
    /// outcome and the slot freed, or the next reconnect attempt.
    fn opening_failed(&mut self, i: usize, now: Instant) {
        let s = &mut self.slots[i];
        if s.first_wave {
            s.first_wave = false;
            self.ctx.rec.borrow_mut().first_wave_resolved(None);
        }
        if !s.reconnect {
            self.release(i);
            return;
        }
        let max = self.load.reconnect.map_or(0, |p| p.max);
        if s.attempts >= max {
            let why = self
                .ctx
                .rec
                .borrow()
                .last_connection_error()
                .unwrap_or_else(|| "max_reconnects".to_string());
            self.ctx.rec.borrow_mut().gave_up(&why);
            self.release(i);
            return;
        }
        self.wait_to_reconnect(i, now);
    }

    /// Slot `i` waits for its next reconnect attempt, or gives up when the
    /// wait would pass its hold's end or the run stops.
    fn wait_to_reconnect(&mut self, i: usize, now: Instant) {
        let Some(Reconnect { wait, jitter, .. }) = self.load.reconnect else {
            self.release(i);
            return;
        };
        let at = now + wait + jitter.mul_f64(self.rng.next_f64());
        if self.ctx.stopping.get() || at >= self.slots[i].hold_end {
            self.ctx.rec.borrow_mut().gave_up("hold_ended");
            self.release(i);
            return;
        }
        self.slots[i].phase = Phase::Waiting;
        self.deadline(i, at);
    }

    /// Frees slot `i` for the next start.
    fn release(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if s.phase == Phase::Free {
            return;
        }
        s.phase = Phase::Free;
        s.timer = s.timer.wrapping_add(1);
        s.exchange = None;
        self.live -= 1;
        self.free.push(i);
    }

    /// Closes slot `i`'s established connection (its `connection` sample).
    fn close(&mut self, i: usize) {
        let s = &self.slots[i];
        if s.fd < 0 {
            return;
        }
        let now = Instant::now();
        self.ctx.rec.borrow_mut().connection_closed(now, now - s.opened);
        self.drop_socket(i);
    }

    /// Closes slot `i`'s socket, shut down first when the ring holds a
    /// receive on it (the shutdown ends it, so the socket goes with the
    /// close); later completions of it are stale. System calls, not ring
    /// operations, as the ring's HTTP path closes. A storm that closes at
    /// once armed no receive: one system call, as epoll's close.
    fn drop_socket(&mut self, i: usize) {
        let s = &mut self.slots[i];
        if s.fd < 0 {
            return;
        }
        let fd = s.fd;
        // A send in the kernel ends with the shutdown too, before its
        // buffer is used again.
        let armed = s.recv_armed || s.sending;
        s.fd = -1;
        s.recv_armed = false;
        s.sending = false;
        s.generation = s.generation.wrapping_add(1);
        if let Some(tls) = &mut self.tls {
            tls.forget(i);
        }
        if armed {
            // SAFETY: shutdown on a socket this worker owns.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
        close_fd(fd);
    }

    /// Stop: no more starts; held connections closed, waits to reconnect
    /// given up; openings under way finish (and are closed at once).
    fn stop(&mut self) {
        self.ctx.stop();
        for i in 0..self.slots.len() {
            match self.slots[i].phase {
                Phase::Holding | Phase::Ending => {
                    self.close(i);
                    self.release(i);
                }
                Phase::Waiting => {
                    self.ctx.rec.borrow_mut().gave_up("hold_ended");
                    self.release(i);
                }
                _ => {}
            }
        }
    }

    /// At the end: closes every socket, counted closed when the run ended
    /// gracefully (an aborted run's are not, as on epoll).
    fn close_all(&mut self, count: bool) {
        for i in 0..self.slots.len() {
            if count && matches!(self.slots[i].phase, Phase::Holding | Phase::Ending) {
                self.close(i);
            }
            self.drop_socket(i);
        }
        let _ = self.ring.ring.submitter().unregister_buf_ring(BGID);
    }

    /// The send time of every queued request: now, just before the system
    /// call that submits them.
    fn stamp_queued(&mut self) {
        let now = Instant::now();
        for i in self.queued.drain(..) {
            if let Some(ex) = self.slots[i].exchange.as_mut() {
                ex.t_send = now;
            }
        }
    }

    /// Queues `sqe`, stamping queued sends if the queue must be submitted
    /// early to make room.
    fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        let queued = &mut self.queued;
        let slots = &mut self.slots;
        self.ring.push(sqe, || {
            let now = Instant::now();
            for i in queued.drain(..) {
                if let Some(ex) = slots[i].exchange.as_mut() {
                    ex.t_send = now;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a held connection costs on the ring beside its socket: its
    /// slot and its deadline's heap entry (no buffer, no task). The epoll
    /// holder's is ~70 bytes; 10,000 held here are under 1.6 MB.
    #[test]
    fn a_held_slot_is_tens_of_bytes() {
        let each = std::mem::size_of::<Slot>() + std::mem::size_of::<Reverse<(Instant, u32, u32)>>();
        assert!(each <= 160, "a held ring storm slot costs {each} bytes");
        // A TLS storm's slot has its entry in the ring's session table too;
        // held, its session and record buffer are shed (the entry's room
        // for a session stays: about a kilobyte).
        let tls = std::mem::size_of::<super::super::tls::TlsConn>();
        assert!(
            each + tls <= 1_400,
            "a held TLS ring storm slot costs {} bytes",
            each + tls
        );
    }
}
