//! The HTTP open loop: requests start on a schedule of arrivals, whatever
//! the responses do; connections are opened as needed, up to a cap.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use throng_metrics::Phase;
use throng_plan::Arrivals;

use crate::conn::{Conn, close, open_connection, open_connection_to};
use crate::ctx::{Ctx, TaskGuard};
use crate::pacer::{DENSE_TICK, Pacer};
use crate::proto::{Session, Starts, one_request, spawn_driver};
use crate::targets::Cursor;

/// One worker's open loop: the starts waiting for a connection, and the
/// connections waiting for a start.
struct Open {
    ctx: Rc<Ctx>,
    queue: RefCell<VecDeque<Instant>>,
    idle: IdlePool,
    tasks: Cell<u64>,
    /// Identity of the next connection task (its idle slot).
    next_id: Cell<usize>,
    schedule_done: Cell<bool>,
}

impl Drop for Open {
    /// Starts still waiting when the loop ends (stopped or aborted) were
    /// never sent: `dropped`.
    fn drop(&mut self) {
        let queued = self.queue.get_mut().len() as u64;
        if queued > 0 {
            self.ctx.rec.borrow_mut().dropped_many(Instant::now(), queued);
        }
    }
}

/// Starts the open loop: `warm` connections now, and requests on
/// `arrivals` (from the run's origin), up to `cap` connections.
pub(crate) fn start(ctx: &Rc<Ctx>, arrivals: Arrivals, cap: u64, gap: Duration, warm: u64) {
    let open = Rc::new(Open {
        ctx: Rc::clone(ctx),
        queue: RefCell::new(VecDeque::new()),
        idle: IdlePool::default(),
        tasks: Cell::new(0),
        next_id: Cell::new(0),
        schedule_done: Cell::new(false),
    });
    for _ in 0..warm {
        spawn_open_task(&open, true);
    }
    tokio::task::spawn_local(dispatcher(ctx.task(), open, arrivals, cap, gap));
}

/// Hands scheduled start times to connections, opening more (up to the cap)
/// when none is free.
///
/// The queue of starts waiting for a connection never holds more than the
/// cap: each connection can take one of them next. When it is full, every
/// start due by then is `dropped` — counted by arithmetic, never made one by
/// one — so a schedule far beyond what the connections can carry costs
/// constant memory and a bounded amount of work per tick, and the worker
/// still hears a stop.
async fn dispatcher(guard: TaskGuard, open: Rc<Open>, mut arrivals: Arrivals, cap: u64, gap: Duration) {
    let ctx = &guard.0;
    let origin = ctx.spec.origin;
    tokio::time::sleep_until(origin.into()).await;
    let mut pacer = Pacer::new(gap);
    let mut growth = Growth::new(origin);
    // Each of a connection's request loops can take one.
    let takers = cap.max(1).saturating_mul(ctx.spec.wire.loops_per_slot());
    let bound = usize::try_from(takers).unwrap_or(usize::MAX);
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
        if open.queue.borrow().len() >= bound {
            let now = Instant::now();
            let n = 1 + arrivals.skip_through(now.saturating_duration_since(origin));
            ctx.rec.borrow_mut().dropped_many(now, n);
            not_before = now + DENSE_TICK;
            continue;
        }
        open.queue.borrow_mut().push_back(due);
        if open.idle.wake_one() {
            // An idle connection takes it.
        } else if open.tasks.get() < cap && growth.allow(Instant::now()) {
            spawn_open_task(&open, false);
        }
        // Otherwise the start waits in the queue for the next free
        // connection; its lateness is recorded as schedule_lag.
    }
    // Ended or stopped: every idle connection leaves.
    open.schedule_done.set(true);
    open.idle.wake_all();
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
pub(crate) struct Growth {
    tokens: f64,
    at: Instant,
}

impl Growth {
    pub(crate) fn new(now: Instant) -> Self {
        Growth {
            tokens: GROWTH_BURST,
            at: now,
        }
    }

    pub(crate) fn allow(&mut self, now: Instant) -> bool {
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

fn spawn_open_task(open: &Rc<Open>, warm: bool) {
    open.tasks.set(open.tasks.get() + 1);
    // A protocol driving its own connections: their request loops take
    // starts as the connections here do.
    if spawn_driver(&open.ctx, open, warm) {
        return;
    }
    let id = open.next_id.get();
    open.next_id.set(id + 1);
    tokio::task::spawn_local(open_task(open.ctx.task(), Rc::clone(open), id, warm));
}

impl Open {
    /// The next scheduled start for the connection (or request loop) `id`,
    /// waiting idle for one; a start that waited longer than the timeout is
    /// `dropped`, not sent. None: the schedule ended or the run stops.
    async fn next_start(&self, id: usize) -> Option<Instant> {
        let ctx = &self.ctx;
        loop {
            // See closed_task: requests may end without waiting.
            tokio::task::coop::consume_budget().await;
            if ctx.stopping.get() {
                return None;
            }
            let job = self.queue.borrow_mut().pop_front();
            match job {
                Some(intended) => {
                    let now = Instant::now();
                    let lag = now.saturating_duration_since(intended);
                    let mut rec = ctx.rec.borrow_mut();
                    // It could not start before it would have timed out:
                    // dropped, never started, so no schedule_lag (which
                    // ends when a request starts), like the starts dropped
                    // when the queue is full. Every sent request has one.
                    if lag > ctx.spec.timeout {
                        rec.dropped(now);
                        continue;
                    }
                    rec.phase(now, Phase::ScheduleLag, lag);
                    return Some(intended);
                }
                None if self.schedule_done.get() => return None,
                None => {
                    self.idle
                        .wait(id, || {
                            !self.queue.borrow().is_empty() || self.schedule_done.get() || ctx.stopping.get()
                        })
                        .await;
                }
            }
        }
    }
}

impl Starts for Open {
    fn slot(&self) -> usize {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    async fn next(&self, slot: usize) -> Option<Option<Instant>> {
        self.next_start(slot).await.map(Some)
    }

    fn cancel(&self, slot: usize) {
        self.idle.forget(slot);
    }

    fn done(&self) {
        self.tasks.set(self.tasks.get() - 1);
    }
}

/// An open-loop connection: takes scheduled starts from the queue. A warm
/// one connects before the schedule starts, so that the first arrivals find
/// connections ready (as a client's pool would) instead of a burst of
/// connects that feeds on itself.
async fn open_task(guard: TaskGuard, open: Rc<Open>, id: usize, warm: bool) {
    let ctx = &guard.0;
    let mut conn: Option<Conn> = None;
    let mut session = Session::for_worker(ctx);
    // This connection's place in the plan's requests (`sequential`).
    let mut cursor = Cursor::default();
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    if warm {
        // Boxed: see one_request.
        // With targets on several origins, to the one this connection serves.
        let opened = match ctx.pick.as_ref().and_then(|p| p.dest(&mut cursor)) {
            Some(d) => {
                Box::pin(open_connection_to(
                    ctx,
                    &d.route,
                    d.tls.as_ref(),
                    &[],
                    None,
                    false,
                    sleep.as_mut(),
                    None,
                ))
                .await
            }
            None => Box::pin(open_connection(ctx, &[], None, false, sleep.as_mut(), None)).await,
        };
        if let Ok(opened) = opened {
            conn = Some(opened.conn);
        }
    }
    while let Some(intended) = open.next_start(id).await {
        one_request(
            ctx,
            &mut conn,
            &mut session,
            sleep.as_mut(),
            intended,
            true,
            &mut cursor,
        )
        .await;
    }
    open.tasks.set(open.tasks.get() - 1);
    close(ctx, conn);
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

    /// `id` no longer waits (its wait was cancelled): a start must not be
    /// handed to it.
    fn forget(&self, id: usize) {
        if let Some(slot) = self.slots.borrow_mut().get_mut(id) {
            *slot = None;
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
