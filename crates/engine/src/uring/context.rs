//! What every loop on the ring starts from: the worker's context (no
//! tokio: the ring waits) and the wait for the run's origin.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use throng_metrics::Recorder;
use tokio::sync::{Notify, watch};

use crate::ctx::Ctx;
use crate::load::WorkerSpec;
use crate::worker::state::RunState;

/// A ring worker's context for `spec`: its recorder, and its picking
/// state among several requests with their targets' tags.
pub(super) fn ring_ctx(spec: WorkerSpec) -> Ctx {
    let (pick, tags) = crate::targets::Pick::of(spec.targets.as_ref(), spec.origin);
    Ctx {
        rec: RefCell::new(Recorder::new(spec.origin)),
        scenario: RefCell::new(tags),
        scratch: RefCell::new(Box::default()),
        stamp: crate::stamps::clock() == crate::stamps::Clock::Kernel,
        stamps: Cell::new(crate::stamps::Counts::default()),
        client_speaks_first: true,
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
