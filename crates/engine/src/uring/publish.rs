//! What a ring worker's loop does besides its sockets, the same for the
//! HTTP loop and the storm: follow the run's state, and publish its live
//! figures and snapshots on their schedule.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use throng_metrics::Live;
use tokio::sync::watch;

use crate::ctx::Ctx;
use crate::worker::state::{RunState, Snapshots};

/// How often a worker publishes its live figures (as the epoll worker).
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// How often a worker publishes a snapshot, when asked for.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(1);

/// Whether the run must end now (aborting: true). `stop` runs when the
/// coordinator asks to stop, or is gone (as if it had asked).
pub(super) fn follow(state: &mut watch::Receiver<RunState>, mut stop: impl FnMut()) -> bool {
    if state.has_changed().unwrap_or(true) {
        match *state.borrow_and_update() {
            RunState::Running => {}
            RunState::Stopping => stop(),
            RunState::Aborting => return true,
        }
        if state.has_changed().is_err() {
            stop();
        }
    }
    false
}

/// When the live figures and the next snapshot are due.
pub(super) struct Publisher {
    next_live: Instant,
    next_snapshot: Instant,
}

impl Publisher {
    pub(super) fn new(now: Instant) -> Publisher {
        Publisher {
            next_live: now + PUBLISH_EVERY,
            next_snapshot: now + SNAPSHOT_EVERY,
        }
    }

    /// Publishes the worker's live figures to `live`, and a snapshot to
    /// `snapshot` when asked for, each when due at `now`.
    pub(super) fn publish(&mut self, ctx: &Ctx, now: Instant, live: &Mutex<Live>, snapshot: Option<&Snapshots>) {
        if now < self.next_live {
            return;
        }
        self.next_live = now + PUBLISH_EVERY;
        let figures = ctx.rec.borrow().live();
        if let Ok(mut slot) = live.lock() {
            *slot = figures;
        }
        if let Some(Snapshots { slot, keep }) = snapshot
            && now >= self.next_snapshot
        {
            self.next_snapshot = now + SNAPSHOT_EVERY;
            let m = match *keep {
                None => ctx.rec.borrow().snapshot(now),
                Some(keep) => ctx.rec.borrow_mut().snapshot_recent(now, keep),
            };
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(m);
            }
        }
    }
}
