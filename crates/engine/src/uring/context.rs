//! What every loop on the ring starts from: the worker's context (no
//! tokio: the ring waits) and the wait for the run's origin.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use throng_metrics::Recorder;
use tokio::sync::{Notify, watch};

use crate::ctx::Ctx;
use crate::load::WorkerSpec;
use crate::worker::state::{RunState, WorkerDone};

/// A ring worker's context for `spec`: its recorder, and its picking
/// state among several requests with their targets' tags. `reads`: the
/// loop sends requests and reads responses (false for a storm that only
/// holds: no system call per connection for stamps it would never read,
/// as on epoll).
pub(super) fn ring_ctx(spec: WorkerSpec, reads: bool) -> Ctx {
    let (pick, tags) = crate::targets::Pick::of(spec.targets.as_ref(), spec.origin);
    Ctx {
        rec: RefCell::new(Recorder::new(spec.origin)),
        scenario: RefCell::new(tags),
        scratch: RefCell::new(Box::default()),
        stamp: reads && crate::stamps::clock() == crate::stamps::Clock::Kernel,
        stamps: Cell::new(crate::stamps::Counts::default()),
        client_speaks_first: reads,
        spec,
        pick,
        rows: None,
        next_conn: Cell::new(0),
        prefer: Cell::new(0),
        stopping: Cell::new(false),
        stop_notify: Notify::new(),
        in_flight: Cell::new(0),
        connecting: Cell::new(0),
        reconnecting: Cell::new(0),
        live_tasks: Cell::new(0),
        done_notify: Notify::new(),
        conns: crate::proto::Conns::none(),
    }
}

/// What a ring worker measured once its loop has ended, with its CPU
/// time since `cpu_before`.
pub(super) fn done(ctx: &Ctx, cpu_before: (Duration, Duration)) -> WorkerDone {
    let finished = Instant::now();
    WorkerDone::at(ctx.measured(finished), finished, cpu_before, None, ctx.stamps.get())
}

/// Waits for the run's origin, watching for an abort (`tick` at a time).
pub(super) fn wait_origin(origin: Instant, state: &watch::Receiver<RunState>, tick: Duration) {
    loop {
        let now = Instant::now();
        if now >= origin || *state.borrow() == RunState::Aborting {
            break;
        }
        std::thread::sleep((origin - now).min(tick));
    }
}
