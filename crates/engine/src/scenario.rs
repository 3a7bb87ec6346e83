//! Scenario runs: virtual users as tasks, not threads or interpreters.
//!
//! ```text
//!  per worker, per scenario: one controller task
//!    closed models (constant-vus, ramping-vus, per-vu-iterations, shared-iterations)
//!      every TICK: the worker's share of the VUs the plan wants now
//!        → start VU tasks up to it; VUs above it finish their iteration,
//!          and are cut off after the graceful period
//!    open models (constant-arrival-rate, ramping-arrival-rate)
//!      each scheduled start → the most recently idle VU, else a new VU
//!        (up to max_vus), else a dropped iteration
//!  VU task: iteration after iteration, each step in turn:
//!    render the request ─► its own keep-alive connection ─► exchange ─►
//!    Recorder (phases, outcomes) + ScenarioRecorder (tags, checks) ─► captures
//! ```
//!
//! A VU owns its variables, its connection and its response reader; the
//! compiled flow, the data rows and the recorders are shared by the worker's
//! VUs. A request cut off (graceful period over, run aborted) is counted
//! `interrupted` by a guard's destructor, so nothing leaves the books.
//!
//! A scenario's target says its protocol (`http: 1.1 | 2 | 3`): an HTTP/1.1
//! VU holds a keep-alive connection (crate::conn); an HTTP/2 or HTTP/3 VU
//! holds its own multiplexed connection (crate::proto::http2::Own,
//! crate::proto::http3::Own) and sends its steps as streams on it, one at a time
//! (a VU's steps are sequential). Either reconnects when its connection
//! is lost. A request's own `http:` replaces its target's for it: a VU then
//! holds one connection per protocol it speaks (`conn`, and `mux` by
//! [`mux_slot`]), each opened at first use.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::poll_fn;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use throng_metrics::{ErrorClass, Phase, ScenarioRecorder};
use throng_plan::{Authority, HttpVersion, RequestHead, Rng};
use throng_scenario::{
    BaseUrl, Body, CaptureFrom, CheckKind, Context, CookieJar, Cookies, Cursor, Executor, JsonTemplate, Request,
    ResponseView, Scenario, ScenarioPlan, Step, Think, share,
};
use tokio::sync::Notify;

use crate::conn::{Conn, close, open_connection_to};
use crate::ctx::{Ctx, TaskGuard};
use crate::exchange::record_exchange;
use crate::load::{ScenarioLoad, SharedCounters};
use crate::pacer::Pacer;
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::redirect::{Exchanged, Place};
use crate::rows::{Labels, RowGuard};

mod grpc;
mod ws;

/// Where one scenario's VUs connect and which protocol they speak: made
/// once per run (routes resolved, TLS clients with their ALPN), shared by
/// the workers.
pub(crate) struct Dest {
    pub(crate) http: HttpVersion,
    /// The route and, for https, the TLS client (ALPN `h2` for HTTP/2).
    pub(crate) conn: crate::targets::Dest,
    /// HTTP/3 (the target's or a request's): the QUIC client (ALPN `h3`)
    /// and the TLS server name.
    pub(crate) quic: Option<(quinn::ClientConfig, String)>,
    /// The route and TLS client of each other protocol (HTTP/1.1, HTTP/2)
    /// its requests name with their own `http:`.
    pub(crate) also: Vec<(HttpVersion, crate::targets::Dest)>,
}

impl Dest {
    /// The route and TLS client of `http` (the target's, when no request
    /// names another).
    pub(crate) fn conn_for(&self, http: HttpVersion) -> &crate::targets::Dest {
        self.also
            .iter()
            .find(|(h, _)| *h == http)
            .map_or(&self.conn, |(_, d)| d)
    }
}

impl std::fmt::Debug for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dest")
            .field("http", &self.http)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

/// How often a closed-model controller looks at its VU target.
const TICK: Duration = Duration::from_millis(10);

/// A request of the flow, with what recording it needs.
struct ReqOp {
    req: Request,
    /// Recorder tag indices: all, scenario, step, enclosing groups.
    tags: Vec<usize>,
    /// Recorder check indices, one per check of the request.
    checks: Vec<usize>,
    keep: Keep,
    head: bool,
}

/// The flow, flattened: groups become start/end markers.
enum Op {
    Request(Box<ReqOp>),
    Grpc(Box<grpc::GrpcOp>),
    WebSocket(Box<ws::WsOp>),
    Think(Think),
    GroupStart,
    GroupEnd(usize),
}

/// A VU slot of the worker's share of a scenario.
#[derive(Default)]
struct Slot {
    alive: bool,
    /// Will never run again (its iterations are done).
    finished: bool,
    /// Must stop by then (above the target: graceful period running).
    retire_at: Option<Instant>,
    /// Cut off: abandon the iteration now.
    killed: bool,
    /// Open models: the intended start handed to this VU.
    job: Option<Instant>,
    waker: Option<Waker>,
}

/// One scenario on one worker.
struct Scen {
    index: usize,
    def: Scenario,
    plan: Arc<ScenarioPlan>,
    env: Arc<HashMap<String, String>>,
    shared: Arc<SharedCounters>,
    worker: u32,
    workers: u32,
    /// This process's execution segment (the whole without one).
    segment: throng_plan::Segment,
    seed: u64,
    ops: Vec<Op>,
    /// Recorder tag index per stage (ramping executors).
    stage_tags: Vec<usize>,
    start: Instant,
    end: Instant,
    slots: RefCell<Vec<Slot>>,
    /// Closed models: VUs in slots below this may start iterations.
    target: Cell<u64>,
    active: Cell<u64>,
    kill: Notify,
    /// Open models: idle VUs, most recent last.
    idle: RefCell<Vec<usize>>,
    schedule_done: Cell<bool>,
    /// Its target (its own, else the file's) and how to reach it.
    base: BaseUrl,
    dest: Arc<Dest>,
    authority: Authority,
}

impl Scen {
    fn killed(&self, slot: usize) -> bool {
        self.slots.borrow().get(slot).is_some_and(|s| s.killed)
    }

    fn kill_all(&self) {
        for s in self.slots.borrow_mut().iter_mut().filter(|s| s.alive) {
            s.killed = true;
        }
        self.kill.notify_waiters();
        self.wake_idle();
    }

    fn wake_idle(&self) {
        let wakers: Vec<Waker> = self
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|s| s.waker.take())
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// The VU's number across the whole run (all segments), from 1.
    fn vu_id(&self, slot: usize) -> u64 {
        self.segment
            .nth(slot as u64 * u64::from(self.workers) + u64::from(self.worker))
            + 1
    }

    fn stage_tag(&self, now: Instant) -> Option<usize> {
        let since = now.saturating_duration_since(self.start) + self.def.start_time;
        let stage = self.def.stage_at(since)?;
        self.stage_tags.get(stage - 1).copied()
    }

    fn spawn_vu(self: &Rc<Self>, ctx: &Rc<Ctx>, slot: usize, job: Option<Instant>) {
        {
            let mut slots = self.slots.borrow_mut();
            if slots.len() <= slot {
                slots.resize_with(slot + 1, Slot::default);
            }
            let s = &mut slots[slot];
            s.alive = true;
            s.killed = false;
            s.retire_at = None;
            s.job = job;
        }
        self.active.set(self.active.get() + 1);
        with_scen(ctx, |r| r.vus(Instant::now(), self.index, self.active.get()));
        tokio::task::spawn_local(vu(ctx.task(), Rc::clone(self), slot));
    }
}

fn with_scen<T>(ctx: &Ctx, f: impl FnOnce(&mut ScenarioRecorder) -> T) -> Option<T> {
    ctx.scenario.borrow_mut().as_mut().map(f)
}

/// Sets up the worker's scenarios and starts their controllers.
pub(crate) fn start(ctx: &Rc<Ctx>, load: ScenarioLoad) {
    let mut rec = ScenarioRecorder::new(ctx.spec.origin);
    let all = rec.tag("");
    let mut scens = Vec::new();
    for (index, def) in load.plan.scenarios.iter().enumerate() {
        let target = def.target(&load.plan.target);
        let authority = Authority::new(&target.host, target.port, if target.https { 443 } else { 80 });
        let Some(dest) = load.dests.get(index) else {
            // Invariant: run_scenario makes one per scenario.
            continue;
        };
        let scenario_tag = rec.tag(&format!("scenario:{}", def.name));
        let mut ops = Vec::new();
        let jar = def.cookies != Cookies::Off;
        compile(&def.flow, &[all, scenario_tag], jar, &mut rec, &mut ops);
        let stage_tags = throng_scenario::stage_names(def)
            .iter()
            .map(|n| rec.tag(&format!("stage:{n}")))
            .collect();
        let start = ctx.spec.origin + def.start_time;
        scens.push(Rc::new(Scen {
            index,
            def: def.clone(),
            plan: Arc::clone(&load.plan),
            env: Arc::clone(&load.env),
            shared: Arc::clone(&load.shared),
            worker: load.worker,
            workers: load.workers,
            segment: load.plan.segment(),
            seed: load.seed,
            ops,
            stage_tags,
            start,
            end: start + def.executor.length(),
            slots: RefCell::new(Vec::new()),
            target: Cell::new(0),
            active: Cell::new(0),
            kill: Notify::new(),
            idle: RefCell::new(Vec::new()),
            schedule_done: Cell::new(false),
            base: target.clone(),
            dest: Arc::clone(dest),
            authority,
        }));
    }
    *ctx.scenario.borrow_mut() = Some(rec);
    for sc in scens {
        if sc.def.executor.is_open() {
            tokio::task::spawn_local(open_controller(ctx.task(), sc));
        } else {
            tokio::task::spawn_local(closed_controller(ctx.task(), sc));
        }
    }
}

/// `jar`: responses' headers are kept for the VUs' cookie jars.
fn compile(flow: &[Step], tags: &[usize], jar: bool, rec: &mut ScenarioRecorder, out: &mut Vec<Op>) {
    for step in flow {
        match step {
            Step::Request(r) => {
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("step:{}", r.name)));
                let keep = Keep {
                    server: false,
                    // Location and Set-Cookie are headers too.
                    headers: jar
                        || r.redirects > 0
                        || r.captures.iter().any(|c| matches!(c.from, CaptureFrom::Header(_)))
                        || r.checks.iter().any(|c| matches!(c.kind, CheckKind::Header(..))),
                    body: if r.captures.iter().any(|c| !matches!(c.from, CaptureFrom::Header(_)))
                        || r.checks.iter().any(|c| {
                            matches!(
                                c.kind,
                                CheckKind::BodyContains(_) | CheckKind::JsonExists(_) | CheckKind::JsonEquals(..)
                            )
                        }) {
                        // At most 64 MiB (checked when the file was read).
                        usize::try_from(r.max_body).unwrap_or(usize::MAX)
                    } else {
                        0
                    },
                };
                out.push(Op::Request(Box::new(ReqOp {
                    checks: r.checks.iter().map(|c| rec.check_index(&c.name)).collect(),
                    tags: t,
                    keep,
                    head: r.method.eq_ignore_ascii_case("HEAD"),
                    req: (**r).clone(),
                })));
            }
            Step::Grpc(g) => out.push(Op::Grpc(Box::new(grpc::GrpcOp::new(g, tags, rec)))),
            Step::WebSocket(w) => {
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("step:{}", w.name)));
                out.push(Op::WebSocket(Box::new(ws::WsOp {
                    ws: (**w).clone(),
                    tags: t,
                })));
            }
            Step::Think(t) => out.push(Op::Think(*t)),
            Step::Group { name, flow } => {
                let g = rec.group_index(name);
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("group:{name}")));
                out.push(Op::GroupStart);
                compile(flow, &t, jar, rec, out);
                out.push(Op::GroupEnd(g));
            }
        }
    }
}

/// Waits until `at`; false if the run is stopping first.
async fn sleep_until(ctx: &Ctx, at: Instant) -> bool {
    if ctx.stopping.get() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep_until(at.into()) => !ctx.stopping.get(),
        () = ctx.stop_notify.notified() => false,
    }
}

/// Keeps the worker's share of VUs at the plan's target, retiring the
/// excess gracefully and cutting off what outlives its graceful period.
async fn closed_controller(guard: TaskGuard, sc: Rc<Scen>) {
    let ctx = &guard.0;
    if !sleep_until(ctx, sc.start).await {
        return;
    }
    let (ramp_down, stop) = match &sc.def.executor {
        Executor::RampingVus { graceful_ramp_down, .. } => (*graceful_ramp_down, sc.def.graceful_stop),
        _ => (sc.def.graceful_stop, sc.def.graceful_stop),
    };
    loop {
        let now = Instant::now();
        let ended = now >= sc.end || ctx.stopping.get();
        let total = if ended {
            0
        } else {
            sc.def.executor.segment_vus_at(now - sc.start, &sc.segment)
        };
        let mine = share(total, sc.worker, sc.workers);
        sc.target.set(mine);
        let graceful = if ended { stop } else { ramp_down };
        let mut start = Vec::new();
        let mut killed = false;
        {
            let mut slots = sc.slots.borrow_mut();
            if slots.len() < mine as usize {
                slots.resize_with(mine as usize, Slot::default);
            }
            for (i, s) in slots.iter_mut().enumerate() {
                if (i as u64) < mine {
                    s.retire_at = None;
                    if !s.alive && !s.finished {
                        start.push(i);
                    }
                } else if s.alive {
                    let at = *s.retire_at.get_or_insert(now + graceful);
                    if now >= at && !s.killed {
                        s.killed = true;
                        killed = true;
                    }
                }
            }
        }
        for slot in start {
            sc.spawn_vu(ctx, slot, None);
        }
        if killed {
            sc.kill.notify_waiters();
        }
        let finished = sc.slots.borrow().iter().all(|s| s.finished || !s.alive) && !start_possible(&sc, now);
        if (ended || finished) && sc.active.get() == 0 {
            break;
        }
        // Stopping (Ctrl-C): VUs end at their next step; the coordinator
        // cuts off what is still in flight after its grace period.
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = ctx.stop_notify.notified(), if !ctx.stopping.get() => {}
        }
    }
}

/// True while a closed-model scenario may still start VUs.
fn start_possible(sc: &Scen, now: Instant) -> bool {
    if now >= sc.end {
        return false;
    }
    let slots = sc.slots.borrow();
    // Slots not yet created (a ramp still rising) or not finished.
    (slots.len() as u64) < share(sc.segment.share(sc.def.executor.max_vus()), sc.worker, sc.workers)
        || slots.iter().any(|s| !s.finished)
}

/// Starts iterations on the schedule: on the most recently idle VU, else on
/// a new one up to the worker's share of `max_vus`, else drops them.
async fn open_controller(guard: TaskGuard, sc: Rc<Scen>) {
    let ctx = &guard.0;
    // The segment's share of the VUs, then this worker's share of that.
    let (pre, max) = sc.def.executor.segment_open_vus(&sc.segment);
    let pre = share(pre, sc.worker, sc.workers) as usize;
    let max = share(max, sc.worker, sc.workers) as usize;
    // Pre-allocated VUs start idle; they connect on their first iteration.
    for slot in 0..pre {
        sc.spawn_vu(ctx, slot, None);
    }
    let curve = sc.def.executor.arrivals();
    let count = curve.as_ref().map_or(0, throng_scenario::ArrivalCurve::count);
    let gap = Duration::from_secs_f64(
        sc.def.executor.length().as_secs_f64() * f64::from(sc.workers) / (sc.segment.share(count).max(1) as f64),
    );
    let mut pacer = Pacer::new(gap);
    // The segment's arrivals of the whole schedule, every workers-th.
    let mut arrivals = curve
        .as_ref()
        .map(|c| throng_scenario::segment_arrivals(c, &sc.segment, sc.worker, sc.workers));
    // After dropping, look again no sooner than this: the VUs need time to
    // come free.
    let mut not_before = sc.start;
    while let Some(a) = arrivals.as_mut() {
        let Some((_, offset)) = a.peek() else { break };
        let due = sc.start + offset;
        if !pacer.wait_until(ctx, due.max(not_before)).await {
            break;
        }
        // A schedule in the past never waits above: let the VUs and the
        // stop watcher run.
        tokio::task::coop::consume_budget().await;
        a.next();
        let idle = sc.idle.borrow_mut().pop();
        match idle {
            Some(slot) => {
                let waker = {
                    let mut slots = sc.slots.borrow_mut();
                    slots[slot].job = Some(due);
                    slots[slot].waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            }
            None => {
                let alive = sc.active.get() as usize;
                if alive < max {
                    let free = sc.slots.borrow().iter().position(|s| !s.alive);
                    let slot = free.unwrap_or(sc.slots.borrow().len());
                    sc.spawn_vu(ctx, slot, Some(due));
                } else {
                    // No VU free: this start and every one due by now are
                    // dropped, counted without walking them (a rate far
                    // beyond the VUs costs constant work per tick).
                    let now = Instant::now();
                    let n = 1 + a.skip_through(now.saturating_duration_since(sc.start));
                    with_scen(ctx, |r| r.dropped_iterations(now, n));
                    not_before = now + crate::pacer::DENSE_TICK;
                }
            }
        }
    }
    sc.schedule_done.set(true);
    sc.wake_idle();
    // Iterations still running get the graceful period, then are cut off.
    let hard = sc.end.max(Instant::now()) + sc.def.graceful_stop;
    while sc.active.get() > 0 {
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = tokio::time::sleep_until(hard.into()) => {
                sc.kill_all();
                break;
            }
        }
    }
}

/// What one VU keeps between requests and iterations.
struct Vu {
    id: u64,
    iter: u64,
    rng: Rng,
    vars: HashMap<String, String>,
    /// What `Set-Cookie` stored (see the scenario's `cookies:`).
    jar: CookieJar,
    conn: Option<Conn>,
    /// Its HTTP/2 and HTTP/3 connections, one per protocol its requests
    /// speak, opened at first use (boxed: HTTP/1.1 VUs do not pay for
    /// them); see [`mux_slot`].
    mux: [Option<Box<Mux>>; 2],
    session: Session,
    /// A socket a `websocket:` step kept (`keep: true`).
    ws: Option<ws::Kept>,
}

/// A VU's own multiplexed connection.
enum Mux {
    H2(crate::proto::http2::Own),
    H3(crate::proto::http3::Own),
}

impl Mux {
    fn alive(&self) -> bool {
        match self {
            Mux::H2(c) => c.alive(),
            Mux::H3(c) => c.alive(),
        }
    }

    fn id(&self) -> u64 {
        match self {
            Mux::H2(c) => c.id(),
            Mux::H3(c) => c.id(),
        }
    }
}

/// A VU's HTTP/2 connection in its `mux`.
const MUX_H2: usize = 0;
/// A VU's HTTP/3 connection in its `mux`.
const MUX_H3: usize = 1;

/// Which of a VU's `mux` connections speaks `http` (HTTP/2 or HTTP/3).
fn mux_slot(http: HttpVersion) -> usize {
    match http {
        HttpVersion::Http3 => MUX_H3,
        _ => MUX_H2,
    }
}

/// Closes a VU's multiplexed connections, recording their ends.
fn close_muxes(ctx: &Ctx, vu: &mut Vu) {
    for m in &mut vu.mux {
        close_mux(ctx, m.take());
    }
}

/// Closes a VU's multiplexed connection, if it has one, recording its end.
fn close_mux(ctx: &Ctx, mux: Option<Box<Mux>>) {
    match mux.map(|m| *m) {
        Some(Mux::H2(c)) => c.close(ctx),
        Some(Mux::H3(c)) => c.close(ctx),
        None => {}
    }
}

/// A VU: runs iterations while its slot is wanted.
async fn vu(guard: TaskGuard, sc: Rc<Scen>, slot: usize) {
    let ctx = &guard.0;
    let id = sc.vu_id(slot);
    let mut vu = Vu {
        id,
        iter: 0,
        rng: Rng::new(sc.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (sc.index as u64) << 56),
        vars: HashMap::new(),
        jar: CookieJar::new(),
        conn: None,
        mux: [None, None],
        session: Session::new(false),
        ws: None,
    };
    let open = sc.def.executor.is_open();
    loop {
        tokio::task::coop::consume_budget().await;
        if ctx.stopping.get() || sc.killed(slot) {
            break;
        }
        let intended = if open {
            match next_job(&sc, ctx, slot).await {
                Some(due) => {
                    let now = Instant::now();
                    ctx.rec
                        .borrow_mut()
                        .phase(now, Phase::ScheduleLag, now.saturating_duration_since(due));
                    Some(due)
                }
                None => break,
            }
        } else {
            if (slot as u64) >= sc.target.get() || Instant::now() >= sc.end {
                break;
            }
            let more = match &sc.def.executor {
                Executor::PerVuIterations { iterations, .. } => vu.iter < *iterations,
                Executor::SharedIterations { iterations, .. } => {
                    let mine = sc.def.executor.segment_iterations(&sc.segment).unwrap_or(*iterations);
                    sc.shared.taken[sc.index].fetch_add(1, Ordering::Relaxed) < mine
                }
                _ => true,
            };
            if !more {
                if let Some(s) = sc.slots.borrow_mut().get_mut(slot) {
                    s.finished = true;
                }
                break;
            }
            None
        };
        let completed = {
            let run = pin!(iteration(ctx, &sc, &mut vu, intended));
            let cut = pin!(cut_off(&sc, slot));
            tokio::select! {
                biased;
                done = run => done,
                () = cut => false,
            }
        };
        if sc.killed(slot) {
            // The iteration was abandoned mid-request: its connection may
            // hold half a response.
            close(ctx, vu.conn.take());
            close_muxes(ctx, &mut vu);
            ws::drop_kept(ctx, vu.ws.take());
            break;
        }
        if completed {
            vu.iter += 1;
        }
    }
    close(ctx, vu.conn.take());
    close_muxes(ctx, &mut vu);
    if ctx.stopping.get() {
        ws::drop_kept(ctx, vu.ws.take());
    } else {
        ws::close_kept(ctx, vu.ws.take()).await;
    }
    if let Some(s) = sc.slots.borrow_mut().get_mut(slot) {
        s.alive = false;
        s.waker = None;
    }
    sc.active.set(sc.active.get() - 1);
    with_scen(ctx, |r| r.vus(Instant::now(), sc.index, sc.active.get()));
}

/// Resolves when the VU's slot is cut off.
async fn cut_off(sc: &Scen, slot: usize) {
    loop {
        let mut notified = pin!(sc.kill.notified());
        notified.as_mut().enable();
        if sc.killed(slot) {
            return;
        }
        notified.await;
    }
}

/// Open models: waits idle for the next intended start; None when the
/// schedule is over.
async fn next_job(sc: &Scen, ctx: &Ctx, slot: usize) -> Option<Instant> {
    if let Some(due) = sc.slots.borrow_mut().get_mut(slot).and_then(|s| s.job.take()) {
        return Some(due);
    }
    sc.idle.borrow_mut().push(slot);
    poll_fn(|cx| {
        let mut slots = sc.slots.borrow_mut();
        let Some(s) = slots.get_mut(slot) else {
            return Poll::Ready(None);
        };
        if let Some(due) = s.job.take() {
            return Poll::Ready(Some(due));
        }
        if sc.schedule_done.get() || ctx.stopping.get() || s.killed {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// One iteration of the flow; true when it ran to its end.
async fn iteration(ctx: &Ctx, sc: &Scen, vu: &mut Vu, intended: Option<Instant>) -> bool {
    let started = intended.unwrap_or_else(Instant::now);
    vu.vars.clear();
    if sc.def.cookies == Cookies::PerIteration {
        vu.jar.clear();
    }
    if let Some(data) = &sc.plan.data
        && data.row_count > 0
    {
        let n = match data.cursor {
            Cursor::PerVu => (vu.id - 1).wrapping_add(vu.iter),
            Cursor::Shared => sc.shared.cursor.fetch_add(1, Ordering::Relaxed),
        };
        // Invariant: row_count > 0, and the remainder is below it.
        let row = &data.rows[(n % data.row_count as u64) as usize];
        for (c, v) in data.columns.iter().zip(row) {
            vu.vars.insert(c.clone(), v.clone());
        }
    }
    let mut groups: Vec<Instant> = Vec::new();
    let mut origin = intended;
    for op in &sc.ops {
        if ctx.stopping.get() {
            return false;
        }
        match op {
            Op::Request(r) => request(ctx, sc, vu, r, origin.take()).await,
            // Boxed: HTTP/1.1 VUs keep their smaller future.
            Op::Grpc(g) => Box::pin(grpc::call(ctx, sc, vu, g, origin.take())).await,
            Op::WebSocket(w) => Box::pin(ws::step(ctx, sc, vu, w, origin.take())).await,
            Op::Think(t) => {
                let d = match *t {
                    Think::Fixed(d) => d,
                    Think::Range(a, b) => a + (b - a).mul_f64(vu.rng.next_f64()),
                };
                if !sleep_until(ctx, Instant::now() + d).await {
                    return false;
                }
            }
            Op::GroupStart => groups.push(Instant::now()),
            Op::GroupEnd(g) => {
                if let Some(t0) = groups.pop() {
                    with_scen(ctx, |r| r.group(*g, t0.elapsed()));
                }
            }
        }
    }
    let now = Instant::now();
    with_scen(ctx, |r| r.iteration(now, now.saturating_duration_since(started)));
    true
}

/// A request under way: if it is dropped before it ends (cut off, run
/// aborted), the destructor counts it `interrupted` in both recorders.
struct InFlight<'a> {
    ctx: &'a Ctx,
    tags: &'a [usize],
    stage: Option<usize>,
    armed: bool,
}

impl<'a> InFlight<'a> {
    fn new(ctx: &'a Ctx, tags: &'a [usize], stage: Option<usize>) -> Self {
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        InFlight {
            ctx,
            tags,
            stage,
            armed: true,
        }
    }

    /// The request ended: `response` is (response time, expected status).
    fn end(mut self, now: Instant, response: Option<(Duration, bool)>, failed: bool) {
        self.armed = false;
        self.ctx.in_flight.set(self.ctx.in_flight.get() - 1);
        self.tagged(now, response, failed);
    }

    fn cut_off(&self) {
        with_scen(self.ctx, |r| {
            r.interrupted(self.tags);
            if let Some(s) = self.stage {
                r.interrupted(&[s]);
            }
        });
    }

    fn tagged(&self, now: Instant, response: Option<(Duration, bool)>, failed: bool) {
        with_scen(self.ctx, |r| {
            r.request(now, self.tags, response, failed);
            if let Some(s) = self.stage {
                r.request(now, &[s], response, failed);
            }
        });
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.armed {
            let now = Instant::now();
            self.ctx.in_flight.set(self.ctx.in_flight.get() - 1);
            self.ctx
                .rec
                .borrow_mut()
                .request_failed(now, ErrorClass::Interrupted, 0);
            self.cut_off();
        }
    }
}

/// One request of the flow: render, connect if needed, exchange, record,
/// capture, check.
async fn request(ctx: &Ctx, sc: &Scen, vu: &mut Vu, op: &ReqOp, origin: Option<Instant>) {
    let rendered = render(sc, vu, &op.req);
    // Its own protocol, else its target's.
    let http = op.req.http.unwrap_or(sc.dest.http);
    let started = Instant::now();
    let stage = sc.stage_tag(started);
    let flight = InFlight::new(ctx, &op.tags, stage);
    // Its row: written when it drops, however the request ends.
    let mut row = ctx.labelled_row(
        started,
        Labels {
            scenario: &sc.def.name,
            step: &op.req.name,
            vu: vu.id,
            iteration: vu.iter,
        },
    );
    if let Some(r) = row.row() {
        if let Some(due) = origin {
            r.phase(Phase::ScheduleLag, started.saturating_duration_since(due));
        }
        if http.is_multiplexed() {
            if let Some(m) = vu.mux[mux_slot(http)].as_ref() {
                r.conn(m.id());
            }
        } else if let Some(c) = vu.conn.as_ref() {
            r.conn(c.id);
        }
    }
    let Some(rendered) = rendered else {
        // Never sent: counted `protocol`, a request throng could not frame.
        let now = Instant::now();
        ctx.rec.borrow_mut().request_failed(now, ErrorClass::Protocol, 0);
        if let Some(r) = row.row() {
            r.failed(ErrorClass::Protocol);
        }
        drop(row);
        flight.end(now, None, true);
        if !op.checks.is_empty() {
            with_scen(ctx, |r| op.checks.iter().for_each(|&i| r.check(i, false)));
        }
        return;
    };
    if http.is_multiplexed() {
        // Boxed: HTTP/1.1 VUs keep their smaller future.
        return Box::pin(mux_request(ctx, sc, vu, op, http, origin, rendered, flight, row)).await;
    }
    let target = &sc.base;
    let place = Place {
        https: target.https,
        host: target.host.clone(),
        port: target.port,
        target: rendered.target,
    };
    let cookie = if sc.def.cookies == Cookies::Off {
        None
    } else {
        vu.jar.header(place.https, &place.host, &place.target)
    };
    let mut bytes = RequestHead {
        method: &op.req.method,
        target: &place.target,
        authority: &sc.authority,
        headers: &crate::redirect::with_cookie(&rendered.headers, cookie),
        body_len: rendered.body.len(),
        close: false,
    }
    .to_vec();
    bytes.extend_from_slice(&rendered.body);
    let mut sleep = pin!(tokio::time::sleep(op.req.timeout));
    let (t_send, written) = match vu.conn {
        Some(_) => (Instant::now(), 0),
        None => {
            let dest = sc.dest.conn_for(HttpVersion::Http1);
            // Plain TCP sends the request with the connect (see conn::connect).
            let first: &[u8] = if dest.tls.is_some() { &[] } else { &bytes };
            // Boxed: the connect future is large and short-lived.
            let opening = open_connection_to(
                ctx,
                &dest.route,
                dest.tls.as_ref(),
                first,
                None,
                false,
                sleep.as_mut(),
                row.row(),
            );
            match Box::pin(opening).await {
                Ok(o) => {
                    vu.conn = Some(o.conn);
                    (o.sent, o.written)
                }
                Err(class) => {
                    let now = Instant::now();
                    ctx.rec.borrow_mut().request_failed(now, class, 0);
                    if let Some(r) = row.row() {
                        r.failed(class);
                    }
                    flight.end(now, None, true);
                    return;
                }
            }
        }
    };
    let Some(c) = vu.conn.as_mut() else {
        return;
    };
    if !matches!(vu.session, Session::Http1(_)) || vu.session.head_request() != op.head {
        vu.session = Session::new(op.head);
    }
    vu.session.reset(op.keep);
    sleep.as_mut().reset((t_send + op.req.timeout).into());
    let outcome = vu
        .session
        .exchange(
            &mut c.stream,
            &bytes,
            written,
            t_send,
            ctx.stamp,
            &ctx.scratch,
            sleep.as_mut(),
        )
        .await;
    let first = Exchanged {
        outcome,
        t_send,
        request_len: bytes.len(),
        hops: 0,
        elsewhere: false,
    };
    let jar = (sc.def.cookies != Cookies::Off).then_some(&mut vu.jar);
    let ex = if op.req.redirects > 0 {
        let req = crate::redirect::Request {
            place: &place,
            method: &op.req.method,
            headers: &rendered.headers,
            body: &rendered.body,
            close: false,
            limit: op.req.redirects,
            timeout: op.req.timeout,
            keep: op.keep,
            home: Some(sc.dest.conn_for(HttpVersion::Http1)),
        };
        // Boxed: only a redirect makes this future large.
        Box::pin(crate::redirect::follow(
            ctx,
            &req,
            jar,
            &mut vu.session,
            &mut vu.conn,
            first,
            sleep,
        ))
        .await
    } else {
        first
    };
    if let Some(r) = row.row() {
        r.redirects(ex.hops);
    }
    let expected = record_exchange(
        ctx,
        &mut vu.session,
        &ex.outcome,
        ex.request_len,
        ex.t_send,
        origin.unwrap_or(t_send),
        &op.req.expect,
        false,
        row.row(),
    );
    drop(row);
    let session = &vu.session;
    match (ex.outcome, expected) {
        (Ok(timing), Some(expected)) => {
            let done = timing.done;
            if sc.def.cookies != Cookies::Off && op.req.redirects == 0 {
                // Else `follow` stored them, from whichever origin answered.
                crate::redirect::store_cookies(&mut vu.jar, &place, session.headers());
            }
            // Over every hop, from the first request's first byte.
            answered(ctx, op, &mut vu.vars, session, flight, done, done - t_send, expected);
            if !ex.elsewhere && !session.reusable(&timing) {
                close(ctx, vu.conn.take());
            }
        }
        _ => {
            unanswered(ctx, op, flight);
            if !ex.elsewhere {
                close(ctx, vu.conn.take());
            }
        }
    }
}

/// A request answered (`expected`: its status was): the scenario's figures,
/// then its captures and checks on the response `session` holds.
#[allow(clippy::too_many_arguments)]
fn answered(
    ctx: &Ctx,
    op: &ReqOp,
    vars: &mut HashMap<String, String>,
    session: &Session,
    flight: InFlight<'_>,
    done: Instant,
    response: Duration,
    expected: bool,
) {
    flight.end(done, Some((response, expected)), !expected);
    if session.body_truncated() {
        with_scen(ctx, |r| r.body_truncated());
    }
    let view = ResponseView {
        status: session.reply().status,
        headers: session.headers(),
        body: session.body(),
        duration: response,
    };
    for cap in &op.req.captures {
        if let Some(v) = cap.extract(&view) {
            vars.insert(cap.var.clone(), v);
        }
    }
    if !op.checks.is_empty() {
        with_scen(ctx, |r| {
            for (check, &i) in op.req.checks.iter().zip(&op.checks) {
                r.check(i, check.passes(&view));
            }
        });
    }
}

/// A request that got no response: its checks fail.
fn unanswered(ctx: &Ctx, op: &ReqOp, flight: InFlight<'_>) {
    flight.end(Instant::now(), None, true);
    if !op.checks.is_empty() {
        with_scen(ctx, |r| op.checks.iter().for_each(|&i| r.check(i, false)));
    }
}

/// Fails a request before it was sent (no connection, or it cannot be
/// framed): counted with `class` in both recorders and its row.
fn not_sent(ctx: &Ctx, op: &ReqOp, flight: InFlight<'_>, mut row: RowGuard<'_>, class: ErrorClass) {
    let now = Instant::now();
    ctx.rec.borrow_mut().request_failed(now, class, 0);
    if let Some(r) = row.row() {
        r.failed(class);
    }
    drop(row);
    unanswered(ctx, op, flight);
}

/// One request in HTTP/2 or HTTP/3 (`http`: its own, else its target's):
/// on the VU's own connection of that protocol (opened, or opened again
/// when it was lost), as a stream. Its redirects to the target's origin
/// are followed on that connection; a hop to another origin goes on a
/// connection of its own ([`away_hop`]), kept for the request's next hops
/// there and closed at its end: the VU's own connections stay with its
/// target.
#[allow(clippy::too_many_arguments)]
async fn mux_request(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    http: HttpVersion,
    origin: Option<Instant>,
    rendered: Rendered,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let dest = &*sc.dest;
    let conn = dest.conn_for(http);
    let mux = mux_slot(http);
    let jar = sc.def.cookies != Cookies::Off;
    let mut place = Place {
        https: sc.base.https,
        host: sc.base.host.clone(),
        port: sc.base.port,
        target: rendered.target,
    };
    // The target's origin: the hops there go on the VU's connection.
    let home = place.clone();
    let mut method = op.req.method.clone();
    let mut body = Bytes::from(rendered.body);
    let mut hops = 0u32;
    if !matches!(vu.session, Session::Http2(_)) {
        vu.session = Session::Http2(crate::proto::http2::Slot::new(false));
    }
    vu.session.reset(op.keep);
    // The hops elsewhere: their connection, their responses.
    let mut other = crate::redirect::Elsewhere::new(ctx);
    let mut away: Option<Session> = None;
    let mut sleep = pin!(tokio::time::sleep(op.req.timeout));
    // When the first hop's request went (after any connect).
    let mut first_send: Option<Instant> = None;
    loop {
        let at_home = place.same_origin(&home);
        let cookie = if jar {
            vu.jar.header(place.https, &place.host, &place.target)
        } else {
            None
        };
        let headers = crate::redirect::hop_headers(&rendered.headers, at_home, hops == 0 || !body.is_empty(), cookie);
        let exchanged = if at_home {
            'home: {
                let usable = match vu.mux[mux].as_deref() {
                    Some(Mux::H2(c)) => c.ready(op.req.timeout).await,
                    Some(m) => m.alive(),
                    None => true,
                };
                if !usable {
                    // Lost or going away (GOAWAY): this step goes on a new one.
                    close_mux(ctx, vu.mux[mux].take());
                }
                if vu.mux[mux].is_none() {
                    sleep.as_mut().reset((Instant::now() + op.req.timeout).into());
                    let opened = match (&dest.quic, http) {
                        (Some((client, name)), HttpVersion::Http3) => {
                            // Invariant: a route has an address (an empty resolution
                            // is refused before the run); the fallback keeps this total.
                            let addr = conn.route.addrs.first().copied();
                            match addr {
                                Some(a) => Box::pin(crate::proto::http3::Own::open(ctx, client, name, a))
                                    .await
                                    .map(Mux::H3),
                                None => Err(ErrorClass::Refused),
                            }
                        }
                        _ => Box::pin(crate::proto::http2::Own::open(
                            ctx,
                            &conn.route,
                            conn.tls.as_ref(),
                            sleep.as_mut(),
                            row.row(),
                        ))
                        .await
                        .map(Mux::H2),
                    };
                    match opened {
                        Ok(m) => {
                            if let Some(r) = row.row() {
                                r.conn(m.id());
                            }
                            vu.mux[mux] = Some(Box::new(m));
                        }
                        Err(class) => break 'home Err(class),
                    }
                }
                let Some((request, request_len)) = stream_request(&method, &place, &headers, body.len(), http) else {
                    // A rendered value HTTP/2 cannot carry: never sent.
                    break 'home Err(ErrorClass::Protocol);
                };
                let t_send = Instant::now();
                sleep.as_mut().reset((t_send + op.req.timeout).into());
                let Session::Http2(slot) = &mut vu.session else {
                    // Invariant: set above.
                    break 'home Err(ErrorClass::Protocol);
                };
                // A failed stream counts what it wrote, as the pool's streams.
                let outcome = match vu.mux[mux].as_deref_mut() {
                    Some(Mux::H2(c)) => c.exchange(ctx, request, &body, request_len, slot, sleep.as_mut()).await,
                    Some(Mux::H3(c)) => c.exchange(ctx, request, &body, request_len, slot, sleep.as_mut()).await,
                    None => Err(crate::conn::Failed {
                        class: ErrorClass::Protocol,
                        written: 0,
                    }),
                };
                Ok((outcome, request_len, t_send))
            }
        } else {
            let hop = AwayHop {
                place: &place,
                method: &method,
                headers: &headers,
                body: &body,
                keep: op.keep,
                timeout: op.req.timeout,
            };
            // Boxed: only a hop elsewhere makes this future large.
            Box::pin(away_hop(ctx, &mut other, &mut away, &hop, sleep.as_mut())).await
        };
        let (mut outcome, request_len, t_send) = match exchanged {
            Ok(e) => e,
            Err(class) => {
                other.close();
                if let Some(r) = row.row() {
                    r.redirects(hops);
                }
                return not_sent(ctx, op, flight, row, class);
            }
        };
        let first_send = *first_send.get_or_insert(t_send);
        // The session that read this response.
        let reply = match (at_home, away.as_ref()) {
            (false, Some(s)) => s,
            _ => &vu.session,
        };
        if let Ok(timing) = &outcome {
            if !at_home && !reply.reusable(timing) {
                other.close();
            }
            if jar {
                crate::redirect::store_cookies(&mut vu.jar, &place, reply.headers());
            }
            let status = reply.reply().status;
            if op.req.redirects > 0 && crate::redirect::is_redirect(status) {
                let location = reply
                    .headers()
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("location"))
                    .map(|(_, v)| v.as_str());
                let hop = match hops >= op.req.redirects {
                    true => Err(crate::redirect::TOO_MANY),
                    false => crate::redirect::next_hop(&place, &method, status, location),
                };
                match hop {
                    Ok(hop) => {
                        ctx.rec
                            .borrow_mut()
                            .redirected(timing.done, request_len as u64, reply.wire_bytes());
                        place = hop.place;
                        method = hop.method;
                        if !hop.body {
                            body = Bytes::new();
                        }
                        hops += 1;
                        continue;
                    }
                    Err(class) => {
                        outcome = Err(crate::conn::Failed {
                            class,
                            written: request_len,
                        });
                    }
                }
            }
        }
        other.close();
        if let Some(r) = row.row() {
            r.redirects(hops);
        }
        let session = match (at_home, away.as_mut()) {
            (false, Some(s)) => s,
            _ => &mut vu.session,
        };
        let expected = record_exchange(
            ctx,
            session,
            &outcome,
            request_len,
            t_send,
            origin.unwrap_or(first_send),
            &op.req.expect,
            false,
            row.row(),
        );
        drop(row);
        match (outcome, expected) {
            (Ok(timing), Some(expected)) => answered(
                ctx,
                op,
                &mut vu.vars,
                session,
                flight,
                timing.done,
                timing.done - first_send,
                expected,
            ),
            _ => unanswered(ctx, op, flight),
        }
        return;
    }
}

/// A hop of an HTTP/2 or HTTP/3 step to another origin than its target's.
struct AwayHop<'a> {
    place: &'a Place,
    method: &'a str,
    headers: &'a [(String, String)],
    body: &'a Bytes,
    keep: Keep,
    timeout: Duration,
}

/// Sends `hop` on `other`'s connection, opened for it when there is none to
/// that origin: to `https://` offering ALPN h2 and http/1.1, and speaking
/// what the server chose; to `http://`, HTTP/1.1. Its response is read
/// into `away`. The outcome, the request's size and when it went; Err: it
/// could not be sent, and why.
async fn away_hop(
    ctx: &Ctx,
    other: &mut crate::redirect::Elsewhere<'_>,
    away: &mut Option<Session>,
    hop: &AwayHop<'_>,
    mut sleep: std::pin::Pin<&mut tokio::time::Sleep>,
) -> Result<(Result<crate::conn::Timing, crate::conn::Failed>, usize, Instant), ErrorClass> {
    let place = hop.place;
    other.go(place);
    if other.h2.as_ref().is_some_and(|o| !o.alive()) {
        other.close();
    }
    if place.https && other.conn.is_none() && other.h2.is_none() {
        sleep.as_mut().reset((Instant::now() + hop.timeout).into());
        let d = crate::redirect::dest(ctx, place).await?;
        // Invariant: `dest` gives an https origin a TLS client, or fails.
        let Some(mut tls) = d.tls else {
            return Err(crate::redirect::SCHEME);
        };
        let mut config = throng_tls::rustls::ClientConfig::clone(&tls.config);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        tls.config = Arc::new(config);
        let opening = open_connection_to(ctx, &d.route, Some(&tls), &[], None, false, sleep.as_mut(), None);
        let ready = Box::pin(opening).await?;
        let h2 = matches!(&ready.conn.stream, crate::transport::Transport::Tls(s)
            if s.tls.alpn_protocol() == Some(b"h2"));
        if h2 {
            other.h2 = Some(Box::pin(crate::proto::http2::Own::over(ctx, ready.conn, sleep.as_mut())).await?);
        } else {
            other.conn = Some(ready.conn);
        }
    }
    let head = hop.method.eq_ignore_ascii_case("HEAD");
    if let Some(own) = other.h2.as_ref() {
        if !matches!(away, Some(Session::Http2(s)) if s.head_request() == head) {
            *away = Some(Session::Http2(crate::proto::http2::Slot::new(head)));
        }
        let Some(Session::Http2(slot)) = away.as_mut() else {
            // Invariant: set just above.
            return Err(ErrorClass::Protocol);
        };
        slot.reset(hop.keep);
        let Some((request, request_len)) =
            stream_request(hop.method, place, hop.headers, hop.body.len(), HttpVersion::Http2)
        else {
            return Err(ErrorClass::Protocol);
        };
        let t_send = Instant::now();
        sleep.as_mut().reset((t_send + hop.timeout).into());
        let outcome = own.exchange(ctx, request, hop.body, request_len, slot, sleep).await;
        return Ok((outcome, request_len, t_send));
    }
    if !matches!(away, Some(s @ Session::Http1(_)) if s.head_request() == head) {
        *away = Some(Session::new(head));
    }
    let Some(s) = away.as_mut() else {
        // Invariant: set just above.
        return Err(ErrorClass::Protocol);
    };
    s.reset(hop.keep);
    let mut bytes = RequestHead {
        method: hop.method,
        target: &place.target,
        authority: &place.authority(),
        headers: hop.headers,
        body_len: hop.body.len(),
        close: false,
    }
    .to_vec();
    bytes.extend_from_slice(hop.body);
    let via = crate::redirect::Via::Elsewhere(place);
    crate::redirect::hop_exchange(ctx, &mut other.conn, via, &bytes, s, hop.timeout, sleep)
        .await
        .map(|(outcome, t_send)| (outcome, bytes.len(), t_send))
}

/// A rendered request as HTTP/2 or HTTP/3 parts (`:authority` from a Host
/// header the file gives, else the target's), and its size as counted
/// in `sent`: header fields decoded (name, value and 4 bytes each,
/// pseudo-headers included) and the body. None when a header cannot be
/// sent in this form.
fn stream_request(
    method: &str,
    place: &Place,
    headers: &[(String, String)],
    body_len: usize,
    http: HttpVersion,
) -> Option<(http::Request<()>, usize)> {
    let scheme = if place.https || http == HttpVersion::Http3 {
        "https"
    } else {
        "http"
    };
    let authority = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or_else(|| place.authority().to_string(), |(_, v)| v.clone());
    let uri = http::Uri::builder()
        .scheme(scheme)
        .authority(authority.as_str())
        .path_and_query(place.target.as_str())
        .build()
        .ok()?;
    let mut request = http::Request::new(());
    *request.method_mut() = http::Method::from_bytes(method.as_bytes()).ok()?;
    let map = request.headers_mut();
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("user-agent")) {
        let ua = concat!("throng/", env!("CARGO_PKG_VERSION"));
        map.insert(http::header::USER_AGENT, http::HeaderValue::from_static(ua));
    }
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if crate::proto::http2::CONNECTION_SPECIFIC.contains(&lower.as_str()) {
            continue;
        }
        let n = http::HeaderName::from_bytes(lower.as_bytes()).ok()?;
        let v = http::HeaderValue::from_str(value).ok()?;
        map.append(n, v);
    }
    if body_len > 0 {
        map.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body_len));
    }
    let size = method.len()
        + 11
        + scheme.len()
        + 11
        + authority.len()
        + 14
        + place.target.len()
        + 9
        + map.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>()
        + body_len;
    *request.uri_mut() = uri;
    Some((request, size))
}

/// A request rendered: its target, headers (without the jar's cookies) and
/// body; plan's one writer (`RequestHead`) makes the bytes.
struct Rendered {
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Renders a request's target, headers and body.
/// None when a rendered header value carries a control character (a
/// captured or data value with a line break, say): such a request would
/// smuggle a header or a request of its own, so it is never sent.
fn render(sc: &Scen, vu: &mut Vu, req: &Request) -> Option<Rendered> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut cx = Context {
        vu: vu.id,
        iter: vu.iter,
        scenario: &sc.def.name,
        rng: &mut vu.rng,
        vars: &vu.vars,
        env: &sc.env,
        now_ms,
    };
    let mut target = String::with_capacity(128);
    let mut scratch = String::new();

    // Body first: its length goes in the head.
    let (body, content_type): (Vec<u8>, Option<&str>) = match &req.body {
        Body::None => (Vec::new(), None),
        Body::Json(j) => {
            let mut out = String::new();
            write_json(j, &mut cx, &mut out);
            (out.into_bytes(), Some("application/json"))
        }
        Body::Form(fields) => {
            let mut out = String::new();
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push('&');
                }
                encode_component(k, &mut out);
                out.push('=');
                scratch.clear();
                v.render_into(&mut cx, &mut scratch);
                encode_component(&scratch, &mut out);
            }
            (out.into_bytes(), Some("application/x-www-form-urlencoded"))
        }
        Body::Raw(t) => (t.render(&mut cx).into_bytes(), None),
    };

    scratch.clear();
    scratch.push_str(&sc.plan.target.base_path);
    req.path.render_into(&mut cx, &mut scratch);
    encode_target(&scratch, &mut target);
    for (i, (k, v)) in req.query.iter().enumerate() {
        let has_query = i > 0 || scratch.contains('?');
        target.push(if has_query { '&' } else { '?' });
        encode_component(k, &mut target);
        target.push('=');
        scratch.clear();
        v.render_into(&mut cx, &mut scratch);
        encode_component(&scratch, &mut target);
    }
    let own = |name: &str| req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut headers: Vec<(String, String)> = Vec::with_capacity(sc.plan.defaults.headers.len() + req.headers.len() + 1);
    let defaults = sc.plan.defaults.headers.iter().filter(|(k, _)| !own(k));
    for (k, v) in defaults.chain(&req.headers) {
        let value = v.render(&mut cx);
        if value.chars().any(throng_plan::is_forbidden_in_value) {
            return None;
        }
        headers.push((k.clone(), value));
    }
    if let Some(ct) = content_type
        && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("Content-Type".to_string(), ct.to_string()));
    }
    Some(Rendered { target, headers, body })
}

fn write_json(j: &JsonTemplate, cx: &mut Context<'_>, out: &mut String) {
    match j {
        JsonTemplate::Value(v) => out.push_str(&v.to_string()),
        JsonTemplate::Text(t) => out.push_str(&serde_json::Value::String(t.render(cx)).to_string()),
        JsonTemplate::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, cx, out);
            }
            out.push(']');
        }
        JsonTemplate::Object(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_json(v, cx, out);
            }
            out.push('}');
        }
    }
}

/// Percent-encodes what may not appear in a request target (spaces,
/// controls, non-ASCII); keeps `/ ? & = %` and the rest as written.
fn encode_target(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_graphic() {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// Percent-encodes a query or form component (RFC 3986 unreserved kept).
fn encode_component(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_and_targets_are_encoded() {
        let mut out = String::new();
        encode_component("a b&c=d/é", &mut out);
        assert_eq!(out, "a%20b%26c%3Dd%2F%C3%A9");
        let mut out = String::new();
        encode_target("/users/a b?x=1", &mut out);
        assert_eq!(out, "/users/a%20b?x=1");
    }

    #[test]
    fn a_stream_request_carries_what_http2_allows() {
        let place = Place {
            https: false,
            host: "127.0.0.1".into(),
            port: 8080,
            target: "/me?x=1".into(),
        };
        let h = |n: &str, v: &str| (n.to_string(), v.to_string());
        let headers = [
            h("Host", "api.test"),
            h("Connection", "keep-alive"),
            h("X-Token", "t-42"),
        ];
        let (req, size) = stream_request("POST", &place, &headers, 5, HttpVersion::Http2).unwrap();
        assert_eq!(req.uri().to_string(), "http://api.test/me?x=1");
        assert_eq!(req.method(), "POST");
        let names: Vec<&str> = req.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["user-agent", "x-token", "content-length"]);
        assert_eq!(req.headers()["content-length"], "5");
        // Pseudo-headers, the three fields (name, value, 4 bytes each), the body.
        let ua = concat!("throng/", env!("CARGO_PKG_VERSION")).len();
        let fields = (10 + ua + 4) + (7 + 4 + 4) + (14 + 1 + 4);
        assert_eq!(size, (4 + 11) + (4 + 11) + (8 + 14) + (7 + 9) + fields + 5);
        // HTTP/3 is always https; a user's User-Agent replaces throng's.
        let (req, _) = stream_request("GET", &place, &[h("User-Agent", "me")], 0, HttpVersion::Http3).unwrap();
        assert_eq!(req.uri().to_string(), "https://127.0.0.1:8080/me?x=1");
        assert_eq!(req.headers()["user-agent"], "me");
        assert!(req.headers().get("content-length").is_none());
        // A method HTTP/2 cannot carry is never sent.
        assert!(stream_request("GE T", &place, &[], 0, HttpVersion::Http2).is_none());
    }
}
