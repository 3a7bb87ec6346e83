//! One worker: an OS thread with its own single-threaded runtime, its own
//! connections and its own recorder. Nothing on the per-request path is
//! shared with other workers.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use throng_metrics::{Live, Recorder};
use tokio::sync::{Notify, watch};
use tokio::task::LocalSet;

use crate::ctx::Ctx;
use crate::load::{WorkerLoad, WorkerSpec};
use crate::rows::RowWriter;

pub(crate) mod state;

pub(crate) use state::{RunState, Snapshots, WorkerDone};

/// Size of the read buffer each worker shares among its connections.
pub(crate) const SCRATCH: usize = 64 * 1024;

/// How often a worker publishes its live figures.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// How often a worker publishes everything it measured so far, when the
/// coordinator asked for it (thresholds judged during the run, live metrics,
/// the live view).
const SNAPSHOT_EVERY: Duration = Duration::from_secs(1);

/// Runs one worker to completion on the current thread: its context, the
/// io model that drives its sockets, its load, and what it measured.
pub(crate) fn run(
    spec: WorkerSpec,
    state: watch::Receiver<RunState>,
    live: Arc<Mutex<Live>>,
    snapshot: Option<Snapshots>,
) -> std::io::Result<WorkerDone> {
    if spec.io == throng_plan::IoModel::Uring {
        if let WorkerLoad::Storm(load) = &spec.load {
            let load = load.clone();
            return crate::uring::run_storm(spec, load, state, live, snapshot);
        }
        return crate::uring::run(spec, state, live, snapshot);
    }
    let cpu_before = crate::sys::thread_cpu();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let ctx = Rc::new(context(spec)?);
    let local = LocalSet::new();
    local.block_on(&rt, run_load(&ctx, state, live, snapshot));
    // Dropping the LocalSet cancels whatever is still running (abort).
    drop(local);
    crate::proto::close_all(&ctx);
    Ok(collect(&ctx, rt, cpu_before))
}

/// The worker's context: its recorder, row file, targets and the
/// connection state its protocol shares.
fn context(spec: WorkerSpec) -> std::io::Result<Ctx> {
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
    let (pick, tags) = crate::targets::Pick::of(spec.targets.as_ref(), spec.origin);
    let conns = crate::proto::Conns::new(&spec.wire, pick.as_ref());
    Ok(Ctx {
        rec: RefCell::new(Recorder::new(origin)),
        scenario: RefCell::new(tags),
        scratch: RefCell::new(vec![0u8; SCRATCH].into_boxed_slice()),
        // A storm that only holds connections reads no responses: no
        // system call per connection for stamps it would never read.
        stamp: crate::stamps::clock() == crate::stamps::Clock::Kernel
            && (!spec.request.is_empty() || matches!(spec.load, WorkerLoad::Scenario(_))),
        stamps: Cell::new(crate::stamps::Counts::default()),
        client_speaks_first: !spec.request.is_empty()
            || matches!(spec.load, WorkerLoad::Scenario(_))
            || spec.wire.client_speaks_first(),
        spec,
        pick,
        rows,
        next_conn: Cell::new(0),
        prefer: Cell::new(0),
        stopping: Cell::new(false),
        stop_notify: Notify::new(),
        in_flight: Cell::new(0),
        connecting: Cell::new(0),
        reconnecting: Cell::new(0),
        live_tasks: Cell::new(0),
        done_notify: Notify::new(),
        conns,
    })
}

/// Runs the worker's load until its tasks end or the run aborts,
/// following the run's state and publishing live figures meanwhile.
async fn run_load(
    ctx: &Rc<Ctx>,
    mut state: watch::Receiver<RunState>,
    live: Arc<Mutex<Live>>,
    snapshot: Option<Snapshots>,
) {
    // An open loop warms its connections before the schedule starts.
    if let WorkerLoad::Open {
        arrivals,
        cap,
        gap,
        warm,
    } = ctx.spec.load.clone()
    {
        crate::open::start(ctx, arrivals, cap, gap, warm);
    }
    tokio::time::sleep_until(ctx.spec.origin.into()).await;

    // Follow the run's state: stop gracefully, or abort (return).
    let watcher = {
        let ctx = Rc::clone(ctx);
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

    tokio::task::spawn_local(publish(Rc::clone(ctx), live, snapshot));

    match ctx.spec.load.clone() {
        WorkerLoad::Closed {
            connections,
            budget,
            until,
        } => crate::closed::start(ctx, connections, budget, until),
        // Started before the schedule: see above.
        WorkerLoad::Open { .. } => {}
        WorkerLoad::Storm(load) => crate::storm::start(ctx, load),
        WorkerLoad::Scenario(load) => crate::scenario::start(ctx, load),
    }

    tokio::select! {
        () = ctx.done_notify.notified() => {}
        () = watcher => {}
    }
}

/// Publishes live figures for the progress display, and snapshots when
/// the coordinator asked for them; until the worker's runtime ends.
async fn publish(ctx: Rc<Ctx>, live: Arc<Mutex<Live>>, snapshot: Option<Snapshots>) {
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
}

/// What the worker measured, its rows finished, its CPU time.
fn collect(ctx: &Ctx, rt: tokio::runtime::Runtime, cpu_before: (Duration, Duration)) -> WorkerDone {
    let finished = Instant::now();
    let measurements = ctx.measured(finished);
    drop(rt);
    // Every task is gone: each request's row has been written.
    let rows = ctx.rows.as_ref().map(|w| w.borrow_mut().finish());
    WorkerDone::at(measurements, finished, cpu_before, rows, ctx.stamps.get())
}
