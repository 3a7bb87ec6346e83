//! One worker: an OS thread with its own single-threaded runtime, its own
//! connections and its own recorder. Nothing on the per-request path is
//! shared with other workers.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Live, Measurements, Phase, Recorder, Reply};
use throng_plan::{Arrivals, StatusSet, StormStarts};
use tokio::sync::{Notify, watch};
use tokio::task::LocalSet;
use tokio::time::Sleep;

use crate::conn::{self, Timing};
use crate::http1::ResponseReader;
use crate::rows::{Row, RowGuard, RowWriter};
use crate::timer::PreciseTimer;
use crate::transport::{self, TlsClient, Transport};

/// Size of the read buffer each worker shares among its connections.
pub(crate) const SCRATCH: usize = 64 * 1024;
/// How often a worker publishes its live figures.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// How often a worker publishes everything it measured so far, when the
/// coordinator asked for it (thresholds judged during the run, live metrics,
/// the live view).
const SNAPSHOT_EVERY: Duration = Duration::from_secs(1);

/// Where a worker publishes copies of everything it measured so far.
pub(crate) struct Snapshots {
    pub slot: Arc<Mutex<Option<Measurements>>>,
    /// Seconds of the per-second series to copy (None: all of them, for
    /// thresholds whose windows look back); totals are always complete.
    pub keep: Option<usize>,
}

/// Where the whole run is: workers watch this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunState {
    /// Sending.
    Running,
    /// Start nothing new; let what is in flight finish.
    Stopping,
    /// Stop now; whatever is in flight is `interrupted`.
    Aborting,
}

/// How a worker's load is shaped.
#[derive(Clone, Debug)]
pub(crate) enum WorkerLoad {
    /// `connections` tasks, each looping request after request; `budget`
    /// requests in all (None: until stopped).
    Closed {
        connections: u64,
        budget: Option<u64>,
        until: Option<Instant>,
    },
    /// Requests start on `arrivals`; up to `cap` connections.
    Open {
        arrivals: Arrivals,
        cap: u64,
        gap: Duration,
        /// Connections to open before the schedule starts.
        warm: u64,
    },
    /// A storm: each start opens a connection, makes at most one request,
    /// holds it, closes it.
    Storm(StormLoad),
    /// Scenarios: virtual users running flows.
    Scenario(crate::scenario::ScenarioLoad),
}

/// One worker's share of a storm.
#[derive(Clone, Debug)]
pub(crate) struct StormLoad {
    pub starts: StormStarts,
    /// Connections open or opening at once, at most.
    pub cap: Option<u64>,
    pub hold: Duration,
    /// True when starts follow a schedule (rate or jitter): lateness is
    /// recorded as schedule_lag.
    pub scheduled: bool,
    /// Average gap between this worker's starts.
    pub gap: Duration,
    /// This worker's index and the number of workers in the whole storm
    /// (all processes), for rotating source addresses.
    pub worker: u64,
    pub workers: u64,
    /// Reconnect held connections the server drops.
    pub reconnect: Option<throng_plan::Reconnect>,
    /// Seed for reconnect jitter.
    pub seed: u64,
}

/// What a worker needs to run.
#[derive(Debug)]
pub(crate) struct WorkerSpec {
    pub addr: SocketAddr,
    /// Shared by the workers, not copied (see run_http).
    pub request: bytes::Bytes,
    pub head_request: bool,
    pub timeout: Duration,
    pub keepalive: bool,
    pub expect: StatusSet,
    pub tls: Option<TlsClient>,
    /// The protocol spoken once connected (storms), and the TLS client for
    /// a protocol's own upgrade (NATS `tls_required`).
    pub protocol: Option<Arc<crate::protocol::ProtocolSpec>>,
    pub upgrade_tls: Option<TlsClient>,
    /// Local addresses to connect from, rotated (empty: the kernel picks).
    pub source: Arc<[std::net::IpAddr]>,
    pub origin: Instant,
    pub load: WorkerLoad,
    /// `--csv-requests`: where this worker writes its rows.
    pub rows: Option<RowSpec>,
}

/// A worker's share of `--csv-requests`.
#[derive(Clone, Debug)]
pub(crate) struct RowSpec {
    /// The run's parts directory.
    pub dir: std::path::PathBuf,
    /// This worker's number in the rows (unique over the run's processes).
    pub worker: u64,
    /// Rows it may write.
    pub budget: u64,
}

/// A worker's result: what it measured, and when it finished.
#[derive(Debug)]
pub(crate) struct WorkerDone {
    pub measurements: Measurements,
    pub finished: Instant,
    /// CPU this worker thread used: (user, system).
    pub cpu: (Duration, Duration),
    /// `--csv-requests`: rows written and left out, or why writing failed.
    pub rows: Option<Result<crate::rows::RowCounts, String>>,
}

/// State shared by one worker's tasks (never across threads).
pub(crate) struct Ctx {
    pub(crate) rec: RefCell<Recorder>,
    /// A scenario run's per-tag figures.
    pub(crate) scenario: RefCell<Option<throng_metrics::ScenarioRecorder>>,
    pub(crate) scratch: RefCell<Box<[u8]>>,
    pub(crate) spec: WorkerSpec,
    /// `--csv-requests`: this worker's row file.
    pub(crate) rows: Option<RefCell<RowWriter>>,
    /// Identity of the next connection attempt (in rows).
    next_conn: Cell<u64>,
    pub(crate) stopping: Cell<bool>,
    pub(crate) stop_notify: Notify,
    budget: Cell<Option<u64>>,
    pub(crate) in_flight: Cell<u64>,
    /// Connection attempts under way (counted `interrupted` on abort).
    pub(crate) connecting: Cell<u64>,
    /// Reconnect attempts under way (likewise).
    pub(crate) reconnecting: Cell<u64>,
    live_tasks: Cell<u64>,
    done_notify: Notify,
    // Open loop.
    queue: RefCell<VecDeque<Instant>>,
    idle: IdlePool,
    open_tasks: Cell<u64>,
    /// Identity of the next open-loop connection task (its idle slot).
    next_id: Cell<usize>,
    schedule_done: Cell<bool>,
}

impl Ctx {
    fn stop(&self) {
        if !self.stopping.replace(true) {
            self.stop_notify.notify_waiters();
            self.idle.wake_all();
        }
    }

    fn take_budget(&self) -> bool {
        match self.budget.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                self.budget.set(Some(n - 1));
                true
            }
        }
    }

    /// Counts a task that is about to be spawned; the worker ends when every
    /// counted task has dropped its [`TaskGuard`].
    pub(crate) fn task(self: &Rc<Self>) -> TaskGuard {
        self.live_tasks.set(self.live_tasks.get() + 1);
        TaskGuard(Rc::clone(self))
    }
}

/// Held by each counted task. A guard rather than a wrapping future: an
/// `async` block that awaits a captured future stores it twice, and every
/// byte of a task is paid once per connection.
pub(crate) struct TaskGuard(pub(crate) Rc<Ctx>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        let ctx = &self.0;
        let left = ctx.live_tasks.get() - 1;
        ctx.live_tasks.set(left);
        if left == 0 {
            ctx.done_notify.notify_one();
        }
    }
}

/// Idle open-loop connections, woken last-in first-out: the connection that
/// finished most recently takes the next request, so a few hot connections
/// carry a steady load and the rest stay idle (tokio's Notify wakes the
/// oldest waiter, which spreads load over every connection ever opened).
/// Every operation is O(1): wakers live in a slot per connection, and the
/// stack of idle ids may hold stale entries, skipped when popped.
#[derive(Default)]
struct IdlePool {
    slots: RefCell<Vec<Option<std::task::Waker>>>,
    stack: RefCell<Vec<usize>>,
}

impl IdlePool {
    /// Wakes the most recently idle connection; false if none is idle.
    fn wake_one(&self) -> bool {
        let mut stack = self.stack.borrow_mut();
        let mut slots = self.slots.borrow_mut();
        while let Some(id) = stack.pop() {
            if let Some(w) = slots.get_mut(id).and_then(Option::take) {
                w.wake();
                return true;
            }
        }
        false
    }

    /// Wakes every idle connection (the schedule ended or the run stops).
    fn wake_all(&self) {
        self.stack.borrow_mut().clear();
        let wakers: Vec<_> = self.slots.borrow_mut().iter_mut().filter_map(Option::take).collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Waits until `ready()` holds, registered as idle under `id` meanwhile.
    async fn wait(&self, id: usize, ready: impl Fn() -> bool) {
        std::future::poll_fn(|cx| {
            let mut slots = self.slots.borrow_mut();
            if slots.len() <= id {
                slots.resize(id + 1, None);
            }
            if ready() {
                slots[id] = None;
                return std::task::Poll::Ready(());
            }
            if slots[id].replace(cx.waker().clone()).is_none() {
                let mut stack = self.stack.borrow_mut();
                stack.push(id);
                // Stale ids pile up only when connections leave the pool
                // without being popped; keep the stack bounded anyway.
                if stack.len() > 2 * slots.len() + 16 {
                    stack.retain(|&i| slots[i].is_some());
                }
            }
            std::task::Poll::Pending
        })
        .await;
    }
}

/// An open connection and when its connect() was issued.
pub(crate) struct Conn {
    pub(crate) stream: Transport,
    pub(crate) opened: Instant,
    /// Its number among this worker's connection attempts (in rows).
    pub(crate) id: u64,
    /// `connect` and `tls` µs (0: none) of a connection opened with no row
    /// to write them in (an open loop's warm connection), for the row of
    /// its first request, as a closed loop's first request carries them.
    /// Zero once given, and when no rows are written.
    pub(crate) unreported: [u32; 2],
}

impl Conn {
    /// Puts the connection's `connect` and `tls` samples on its first row.
    pub(crate) fn report_setup(&mut self, row: &mut Row<'_>) {
        let [connect, tls] = std::mem::take(&mut self.unreported);
        if connect > 0 {
            row.phase(Phase::Connect, Duration::from_micros(u64::from(connect)));
        }
        if tls > 0 {
            row.phase(Phase::Tls, Duration::from_micros(u64::from(tls)));
        }
    }
}

/// Runs one worker to completion on the current thread.
pub(crate) fn run(
    spec: WorkerSpec,
    mut state: watch::Receiver<RunState>,
    live: Arc<Mutex<Live>>,
    snapshot: Option<Snapshots>,
) -> std::io::Result<WorkerDone> {
    let cpu_before = crate::sys::thread_cpu();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let origin = spec.origin;
    let rows = match &spec.rows {
        Some(r) => Some(RefCell::new(RowWriter::create(&r.dir, r.worker, r.budget).map_err(
            |e| {
                std::io::Error::new(
                    e.kind(),
                    format!("--csv-requests: cannot create '{}': {e}", r.dir.display()),
                )
            },
        )?)),
        None => None,
    };
    let ctx = Rc::new(Ctx {
        rec: RefCell::new(Recorder::new(origin)),
        scenario: RefCell::new(None),
        scratch: RefCell::new(vec![0u8; SCRATCH].into_boxed_slice()),
        budget: Cell::new(match spec.load {
            WorkerLoad::Closed { budget, .. } => budget,
            WorkerLoad::Open { .. } | WorkerLoad::Storm(_) | WorkerLoad::Scenario(_) => None,
        }),
        spec,
        rows,
        next_conn: Cell::new(0),
        stopping: Cell::new(false),
        stop_notify: Notify::new(),
        in_flight: Cell::new(0),
        connecting: Cell::new(0),
        reconnecting: Cell::new(0),
        live_tasks: Cell::new(0),
        done_notify: Notify::new(),
        queue: RefCell::new(VecDeque::new()),
        idle: IdlePool::default(),
        open_tasks: Cell::new(0),
        next_id: Cell::new(0),
        schedule_done: Cell::new(false),
    });

    let local = LocalSet::new();
    local.block_on(&rt, async {
        if let WorkerLoad::Open { warm, .. } = ctx.spec.load {
            for _ in 0..warm {
                spawn_open_task(&ctx, true);
            }
        }
        tokio::time::sleep_until(origin.into()).await;

        // Follow the run's state: stop gracefully, or abort (return).
        let watcher = {
            let ctx = Rc::clone(&ctx);
            async move {
                loop {
                    let s = *state.borrow_and_update();
                    match s {
                        RunState::Running => {}
                        RunState::Stopping => ctx.stop(),
                        RunState::Aborting => return,
                    }
                    if state.changed().await.is_err() {
                        // The coordinator is gone: stop as if told to.
                        ctx.stop();
                        std::future::pending::<()>().await;
                    }
                }
            }
        };

        // Publish live figures for the progress display.
        {
            let ctx = Rc::clone(&ctx);
            tokio::task::spawn_local(async move {
                let mut tick = tokio::time::interval(PUBLISH_EVERY);
                let mut next_snapshot = Instant::now() + SNAPSHOT_EVERY;
                loop {
                    tick.tick().await;
                    let figures = ctx.rec.borrow().live();
                    if let Ok(mut slot) = live.lock() {
                        *slot = figures;
                    }
                    if let Some(Snapshots { slot, keep }) = &snapshot
                        && Instant::now() >= next_snapshot
                    {
                        let now = Instant::now();
                        next_snapshot = now + SNAPSHOT_EVERY;
                        let m = match *keep {
                            None => {
                                let mut m = ctx.rec.borrow().snapshot(now);
                                m.scenario = ctx.scenario.borrow().as_ref().map(|s| s.clone().finish(now));
                                m
                            }
                            // A recent copy costs the same however long the run has lasted.
                            Some(keep) => {
                                let mut m = ctx.rec.borrow_mut().snapshot_recent(now, keep);
                                m.scenario = ctx.scenario.borrow_mut().as_mut().map(|s| s.snapshot_recent(now, keep));
                                m
                            }
                        };
                        if let Ok(mut slot) = slot.lock() {
                            *slot = Some(m);
                        }
                    }
                }
            });
        }

        match ctx.spec.load.clone() {
            WorkerLoad::Closed { connections, until, .. } => {
                if let Some(until) = until {
                    let ctx2 = Rc::clone(&ctx);
                    tokio::task::spawn_local(async move {
                        tokio::select! {
                            () = tokio::time::sleep_until(until.into()) => ctx2.stop(),
                            () = ctx2.stop_notify.notified() => {}
                        }
                    });
                }
                for _ in 0..connections {
                    tokio::task::spawn_local(closed_task(ctx.task()));
                }
            }
            WorkerLoad::Open { arrivals, cap, gap, .. } => {
                tokio::task::spawn_local(dispatcher(ctx.task(), arrivals, cap, gap));
            }
            WorkerLoad::Storm(load) => {
                tokio::task::spawn_local(crate::storm::dispatcher(ctx.task(), load));
            }
            WorkerLoad::Scenario(load) => crate::scenario::start(&ctx, load),
        }

        tokio::select! {
            () = ctx.done_notify.notified() => {}
            () = watcher => {}
        }
    });
    // Dropping the LocalSet cancels whatever is still running (abort).
    drop(local);

    let finished = Instant::now();
    let mut rec = ctx.rec.replace(Recorder::new(origin));
    let in_flight = ctx.in_flight.get();
    if in_flight > 0 {
        rec.requests_interrupted(finished, in_flight);
    }
    let connecting = ctx.connecting.get();
    if connecting > 0 {
        rec.connections_interrupted(finished, connecting, false);
    }
    let reconnecting = ctx.reconnecting.get();
    if reconnecting > 0 {
        rec.connections_interrupted(finished, reconnecting, true);
    }
    for _ in ctx.queue.borrow_mut().drain(..) {
        rec.dropped(finished);
    }
    let scenario = ctx.scenario.borrow_mut().take().map(|s| s.finish(finished));
    drop(rt);
    // Every task is gone: each request's row has been written.
    let rows = ctx.rows.as_ref().map(|w| {
        w.borrow_mut()
            .finish()
            .map_err(|e| format!("--csv-requests: writing rows failed: {e}"))
    });
    let mut measurements = rec.finish(finished);
    measurements.scenario = scenario;
    let cpu_after = crate::sys::thread_cpu();
    Ok(WorkerDone {
        measurements,
        finished,
        cpu: (
            cpu_after.0.saturating_sub(cpu_before.0),
            cpu_after.1.saturating_sub(cpu_before.1),
        ),
        rows,
    })
}

/// A closed-loop connection: request after request until the budget, the
/// deadline or a stop.
async fn closed_task(guard: TaskGuard) {
    let ctx = &guard.0;
    let mut conn: Option<Conn> = None;
    let mut reader = ResponseReader::new(ctx.spec.head_request);
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    while !ctx.stopping.get() && ctx.take_budget() {
        let start = Instant::now();
        one_request(ctx, &mut conn, &mut reader, sleep.as_mut(), start).await;
        // A request can end without waiting for anything (a refused
        // connect on loopback fails inside the system call): spend tokio's
        // cooperative budget so the worker's other tasks still get to run.
        tokio::task::coop::consume_budget().await;
    }
    close(ctx, conn);
}

/// Below this gap between arrivals, the dispatcher ticks instead of arming
/// its timer once per arrival.
const DENSE_GAP: Duration = Duration::from_millis(1);
/// The tick of a dense schedule: how late an arrival can be dispatched.
pub(crate) const DENSE_TICK: Duration = Duration::from_micros(200);

/// Hands scheduled start times to connections, opening more (up to the cap)
/// when none is free.
///
/// The queue of starts waiting for a connection never holds more than the
/// cap: each connection can take one of them next. When it is full, every
/// start due by then is `dropped` — counted by arithmetic, never made one by
/// one — so a schedule far beyond what the connections can carry costs
/// constant memory and a bounded amount of work per tick, and the worker
/// still hears a stop.
async fn dispatcher(guard: TaskGuard, mut arrivals: Arrivals, cap: u64, gap: Duration) {
    let ctx = &guard.0;
    let origin = ctx.spec.origin;
    let mut pacer = Pacer::new(gap);
    let mut growth = Growth::new(origin);
    let bound = usize::try_from(cap.max(1)).unwrap_or(usize::MAX);
    // After dropping, look again no sooner than this: the connections need
    // time to take what is queued.
    let mut not_before = origin;
    while let Some(offset) = arrivals.peek() {
        let due = origin + offset;
        if !pacer.wait_until(ctx, due.max(not_before)).await {
            break;
        }
        // A schedule in the past never waits above: let the worker's other
        // tasks (connections, the stop watcher) run.
        tokio::task::coop::consume_budget().await;
        arrivals.next();
        if ctx.queue.borrow().len() >= bound {
            let now = Instant::now();
            let n = 1 + arrivals.skip_through(now.saturating_duration_since(origin));
            ctx.rec.borrow_mut().dropped_many(now, n);
            not_before = now + DENSE_TICK;
            continue;
        }
        ctx.queue.borrow_mut().push_back(due);
        if ctx.idle.wake_one() {
            // An idle connection takes it.
        } else if ctx.open_tasks.get() < cap && growth.allow(Instant::now()) {
            spawn_open_task(ctx, false);
        }
        // Otherwise the start waits in the queue for the next free
        // connection; its lateness is recorded as schedule_lag.
    }
    ctx.schedule_done.set(true);
    ctx.idle.wake_all();
}

/// Waits for scheduled instants with microsecond precision: a timerfd armed
/// per instant for sparse schedules, a periodic tick for dense ones.
pub(crate) struct Pacer {
    timer: Option<PreciseTimer>,
    dense: bool,
}

impl Pacer {
    /// A pacer for a schedule whose starts are `gap` apart on average.
    pub(crate) fn new(gap: Duration) -> Self {
        let mut timer = PreciseTimer::new().ok();
        let dense = gap < DENSE_GAP;
        if dense
            && let Some(t) = timer.as_mut()
            && t.start_ticking(DENSE_TICK).is_err()
        {
            timer = None;
        }
        Pacer { timer, dense }
    }

    /// Waits until `due`; false if the run is stopping.
    pub(crate) async fn wait_until(&mut self, ctx: &Ctx, due: Instant) -> bool {
        loop {
            if ctx.stopping.get() {
                return false;
            }
            if Instant::now() >= due {
                return true;
            }
            let dense = self.dense;
            let wait = async {
                match self.timer.as_mut() {
                    Some(t) if dense => {
                        if t.tick().await.is_err() {
                            tokio::time::sleep_until(due.into()).await;
                        }
                    }
                    Some(t) => {
                        if t.sleep_until(due).await.is_err() {
                            tokio::time::sleep_until(due.into()).await;
                        }
                    }
                    None => tokio::time::sleep_until(due.into()).await,
                }
            };
            tokio::select! {
                () = wait => {}
                () = ctx.stop_notify.notified() => return false,
            }
            // A tick may come before `due`: look again.
        }
    }
}

/// Connections an open loop may open in one burst when none is free.
const GROWTH_BURST: f64 = 8.0;
/// Sustained rate at which it may open more (per worker).
const GROWTH_PER_SECOND: f64 = 10_000.0;

/// A token bucket on opening connections. A server hiccup of a few ms
/// leaves every connection busy; opening one per waiting request costs more
/// CPU than the requests themselves, which delays the schedule further and
/// opens still more — a cascade to the cap. Growing at a bounded rate waits
/// out short hiccups (recorded as schedule_lag) and still reaches the cap
/// within a tenth of a second under sustained overload.
struct Growth {
    tokens: f64,
    at: Instant,
}

impl Growth {
    fn new(now: Instant) -> Self {
        Growth {
            tokens: GROWTH_BURST,
            at: now,
        }
    }

    fn allow(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(now);
        self.tokens = (self.tokens + elapsed * GROWTH_PER_SECOND).min(GROWTH_BURST);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn spawn_open_task(ctx: &Rc<Ctx>, warm: bool) {
    ctx.open_tasks.set(ctx.open_tasks.get() + 1);
    let id = ctx.next_id.get();
    ctx.next_id.set(id + 1);
    tokio::task::spawn_local(open_task(ctx.task(), id, warm));
}

/// An open-loop connection: takes scheduled starts from the queue. A warm
/// one connects before the schedule starts, so that the first arrivals find
/// connections ready (as a client's pool would) instead of a burst of
/// connects that feeds on itself.
async fn open_task(guard: TaskGuard, id: usize, warm: bool) {
    let ctx = &guard.0;
    let mut conn: Option<Conn> = None;
    let mut reader = ResponseReader::new(ctx.spec.head_request);
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    if warm {
        // Boxed: see one_request.
        if let Ok(opened) = Box::pin(open_connection(ctx, &[], None, false, sleep.as_mut(), None)).await {
            conn = Some(opened.conn);
        }
    }
    loop {
        // See closed_task: requests may end without waiting.
        tokio::task::coop::consume_budget().await;
        if ctx.stopping.get() {
            break;
        }
        let job = ctx.queue.borrow_mut().pop_front();
        match job {
            Some(intended) => {
                let now = Instant::now();
                let lag = now.saturating_duration_since(intended);
                let too_late = {
                    let mut rec = ctx.rec.borrow_mut();
                    rec.phase(now, Phase::ScheduleLag, lag);
                    // It could not start before it would have timed out.
                    let too_late = lag > ctx.spec.timeout;
                    if too_late {
                        rec.dropped(now);
                    }
                    too_late
                };
                if too_late {
                    continue;
                }
                one_request(ctx, &mut conn, &mut reader, sleep.as_mut(), intended).await;
            }
            None if ctx.schedule_done.get() => break,
            None => {
                ctx.idle
                    .wait(id, || {
                        !ctx.queue.borrow().is_empty() || ctx.schedule_done.get() || ctx.stopping.get()
                    })
                    .await;
            }
        }
    }
    ctx.open_tasks.set(ctx.open_tasks.get() - 1);
    close(ctx, conn);
}

pub(crate) fn close(ctx: &Ctx, conn: Option<Conn>) {
    if let Some(c) = conn {
        drop(c.stream);
        let now = Instant::now();
        ctx.rec.borrow_mut().connection_closed(now, now - c.opened);
    }
}

/// A connection ready for requests.
pub(crate) struct Ready {
    pub(crate) conn: Conn,
    /// Bytes of `first` already written.
    pub(crate) written: usize,
    /// When it became ready (TCP connected, TLS handshake done).
    pub(crate) ready: Instant,
}

/// Opens a connection to the target (TCP, then TLS if the plan says so),
/// recording the attempt, its `connect` and `tls` samples and its outcome
/// (and, in `row`, the attempt's number and samples; the caller records a
/// failure there).
pub(crate) async fn open_connection(
    ctx: &Ctx,
    first: &[u8],
    source: Option<std::net::IpAddr>,
    reconnect: bool,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<Ready, ErrorClass> {
    let spec = &ctx.spec;
    let opened = Instant::now();
    // With rows written but none for this connection, its samples wait for its first request's.
    let hold_back = row.is_none() && ctx.rows.is_some();
    let mut unreported = [0u32; 2];
    // At least 1 µs, so that 0 keeps meaning "none".
    let micros = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX).max(1);
    let id = ctx.next_conn.get();
    ctx.next_conn.set(id + 1);
    if let Some(r) = row.as_deref_mut() {
        r.conn(id);
    }
    ctx.rec.borrow_mut().connection_started(opened, reconnect);
    let counter = if reconnect { &ctx.reconnecting } else { &ctx.connecting };
    counter.set(counter.get() + 1);
    // Resolved (established or failed) exactly once, below.
    let resolved = || counter.set(counter.get() - 1);
    let fail = |class| {
        resolved();
        ctx.rec.borrow_mut().connection_failed(Instant::now(), class, reconnect);
        class
    };
    let (stream, written, ready) = match &spec.tls {
        None => {
            let o = conn::connect(spec.addr, source, first, spec.timeout, sleep.as_mut())
                .await
                .map_err(fail)?;
            ctx.rec.borrow_mut().connected(o.established, o.established - opened);
            if let Some(r) = row.as_deref_mut() {
                r.phase(Phase::Connect, o.established - opened);
            } else if hold_back {
                unreported[0] = micros(o.established - opened);
            }
            (Transport::Plain(o.stream), o.written, o.established)
        }
        Some(tls) => {
            // The ClientHello goes out with the connect (see conn::connect).
            let (session, hello) = crate::tls_stream::start(Arc::clone(&tls.config), tls.server_name.clone())
                .map_err(|_| fail(ErrorClass::Tls("client_setup")))?;
            let o = conn::connect(spec.addr, source, &hello, spec.timeout, sleep.as_mut())
                .await
                .map_err(fail)?;
            ctx.rec.borrow_mut().connected(o.established, o.established - opened);
            if let Some(r) = row.as_deref_mut() {
                r.phase(Phase::Connect, o.established - opened);
            } else if hold_back {
                unreported[0] = micros(o.established - opened);
            }
            sleep.as_mut().reset((o.established + spec.timeout).into());
            // The client's Finished waits for the first thing the client
            // sends (the request, a line protocol's first send); otherwise
            // it leaves now.
            let client_speaks_first = !spec.request.is_empty()
                || matches!(spec.load, WorkerLoad::Scenario(_))
                || matches!(spec.protocol.as_deref(), Some(crate::protocol::ProtocolSpec::Lines { steps, .. })
                    if matches!(steps.first(), Some(crate::protocol::Step::Send(_))));
            let flush = !client_speaks_first;
            let (stream, h, done) = transport::handshake(o.stream, session, &hello, o.written, flush, sleep.as_mut())
                .await
                .map_err(fail)?;
            ctx.rec.borrow_mut().tls_handshake(done, done - o.established, h);
            if let Some(r) = row.as_deref_mut() {
                r.phase(Phase::Tls, done - o.established);
            } else if hold_back {
                unreported[1] = micros(done - o.established);
            }
            // The request has not been written: nothing of it went with the connect.
            (stream, 0, done)
        }
    };
    let (stream, ready) = match &spec.protocol {
        None => (stream, ready),
        Some(protocol) => {
            sleep.as_mut().reset((ready + spec.timeout).into());
            let done = crate::protocol::handshake(
                protocol,
                stream,
                spec.upgrade_tls.as_ref(),
                &ctx.scratch,
                spec.timeout,
                sleep,
            )
            .await
            .map_err(fail)?;
            let now = Instant::now();
            let mut rec = ctx.rec.borrow_mut();
            if let Some((d, h, at)) = done.tls {
                rec.tls_handshake(at, d, h);
                if let Some(r) = row.as_deref_mut() {
                    r.phase(Phase::Tls, d);
                }
            }
            rec.phase(now, Phase::Handshake, done.handshake);
            if let Some(r) = row {
                r.phase(Phase::Handshake, done.handshake);
            }
            (done.stream, now)
        }
    };
    resolved();
    ctx.rec.borrow_mut().connection_established(ready, reconnect);
    Ok(Ready {
        conn: Conn {
            stream,
            opened,
            id,
            unreported,
        },
        written,
        ready,
    })
}

/// One request: connect if needed, exchange, record. `origin` is where
/// latency is measured from (the intended start in open loop).
async fn one_request(
    ctx: &Ctx,
    conn: &mut Option<Conn>,
    reader: &mut ResponseReader,
    mut sleep: Pin<&mut Sleep>,
    origin: Instant,
) {
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    let spec = &ctx.spec;
    // Written when it drops: once, however the request ends.
    let now = Instant::now();
    let mut row = RowGuard::new(ctx, now);
    if let Some(r) = row.row() {
        if matches!(spec.load, WorkerLoad::Open { .. }) {
            r.phase(Phase::ScheduleLag, now.saturating_duration_since(origin));
        }
        if let Some(c) = conn.as_mut() {
            r.conn(c.id);
            c.report_setup(r);
        }
    }

    let (c, t_send, written) = match conn {
        Some(c) => (c, Instant::now(), 0),
        None => {
            // Boxed: the connect future is large and short-lived; keeping it
            // out of the task keeps every idle connection small. Plain TCP
            // sends the request with the connect (see conn::connect).
            let first: &[u8] = if spec.tls.is_some() { &[] } else { &spec.request };
            match Box::pin(open_connection(ctx, first, None, false, sleep.as_mut(), row.row())).await {
                Ok(o) => {
                    let c = conn.insert(o.conn);
                    // A request written with the connect started when the
                    // connection was established.
                    (c, o.ready, o.written)
                }
                Err(class) => {
                    let now = Instant::now();
                    ctx.rec.borrow_mut().request_failed(now, class, 0);
                    ctx.in_flight.set(ctx.in_flight.get() - 1);
                    if let Some(r) = row.row() {
                        r.failed(class);
                    }
                    return;
                }
            }
        }
    };
    if !exchange_on(ctx, c, reader, sleep, t_send, written, origin, row.row()).await {
        close(ctx, conn.take());
    }
}

/// Sends the plan's request on `c` (its first `written` bytes already out
/// since `t_send`), reads the response and records it (in `row` too); the
/// request was counted started and in flight by the caller. True when the
/// connection can carry another request.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange_on(
    ctx: &Ctx,
    c: &mut Conn,
    reader: &mut ResponseReader,
    mut sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    row: Option<&mut Row<'_>>,
) -> bool {
    let spec = &ctx.spec;
    let keep_server = ctx.rec.borrow().wants_first_reply();
    reader.reset(crate::http1::Keep {
        server: keep_server,
        ..crate::http1::Keep::default()
    });
    sleep.as_mut().reset((t_send + spec.timeout).into());
    let outcome = conn::exchange(&mut c.stream, &spec.request, written, reader, &ctx.scratch, sleep).await;
    ctx.in_flight.set(ctx.in_flight.get() - 1);

    let mut rec = ctx.rec.borrow_mut();
    match outcome {
        Ok(Timing {
            sent,
            first,
            done,
            extra,
        }) => {
            rec.sent(sent, spec.request.len() as u64);
            rec.phase(done, Phase::Send, sent - t_send);
            rec.phase(done, Phase::Wait, first.saturating_duration_since(sent));
            rec.phase(done, Phase::Receive, done - first);
            rec.phase(done, Phase::Response, done - t_send);
            rec.phase(done, Phase::Latency, done.saturating_duration_since(origin));
            let reply = Reply {
                status: reader.status,
                header_bytes: reader.header_bytes,
                body_bytes: reader.body_bytes,
            };
            if keep_server {
                rec.first_reply(reply, reader.take_server());
            }
            let ok = spec.expect.contains(reply.status);
            if ok {
                rec.request_ok(done, reply, reader.wire_bytes);
            } else {
                rec.request_rejected(done, reply, reader.wire_bytes);
            }
            if let Some(r) = row {
                r.phase(Phase::Send, sent - t_send);
                r.phase(Phase::Wait, first.saturating_duration_since(sent));
                r.phase(Phase::Receive, done - first);
                r.phase(Phase::Response, done - t_send);
                r.phase(Phase::Latency, done.saturating_duration_since(origin));
                r.reply(reply.status, spec.request.len() as u64, reader.wire_bytes);
                if ok {
                    r.ok();
                } else {
                    r.failed(ErrorClass::CheckFailed);
                }
            }
            spec.keepalive && !reader.close && !extra
        }
        Err(f) => {
            let now = Instant::now();
            rec.sent(now, f.written as u64);
            rec.request_failed(now, f.class, reader.wire_bytes);
            if let Some(r) = row {
                r.reply(0, f.written as u64, reader.wire_bytes);
                r.failed(f.class);
            }
            false
        }
    }
}
