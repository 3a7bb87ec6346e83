//! Run control: what another thread (a signal handler, the live view) may
//! do to a run — interrupt it, ask for snapshots — and what a progress
//! display gets while it lasts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use throng_metrics::{Live, Measurements};
use tokio::sync::watch;

use crate::worker::state::RunState;

/// Lets another thread (a signal handler) stop a run.
#[derive(Clone, Debug)]
pub struct Control {
    state: Arc<watch::Sender<RunState>>,
    interrupted: Arc<AtomicBool>,
    snapshots: Arc<AtomicBool>,
}

impl Default for Control {
    fn default() -> Self {
        Self::new()
    }
}

impl Control {
    /// A control for one run.
    pub fn new() -> Self {
        Control {
            state: Arc::new(watch::Sender::new(RunState::Running)),
            interrupted: Arc::default(),
            snapshots: Arc::default(),
        }
    }

    /// Asks the run (call it before the run starts) to merge everything
    /// measured so far about once a second and hand it to `on_tick` in
    /// [`Progress::snapshot`] (live metrics, the live view). Each worker then
    /// copies its recorder once a second, off the per-request path; without
    /// this call, runs copy nothing.
    pub fn want_snapshots(&self) {
        self.snapshots.store(true, Ordering::SeqCst);
    }

    pub(crate) fn snapshots_wanted(&self) -> bool {
        self.snapshots.load(Ordering::SeqCst)
    }

    /// The user asked to stop (Ctrl-C, SIGTERM): start nothing new, wait up
    /// to the timeout for what is in flight. A second call aborts at once.
    pub fn interrupt(&self) {
        let first = !self.interrupted.swap(true, Ordering::SeqCst);
        if first {
            self.stop();
        } else {
            self.abort();
        }
    }

    /// True once [`Control::interrupt`] was called.
    pub fn was_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Start nothing new; what is in flight gets the grace period.
    pub(crate) fn stop(&self) {
        self.state.send_if_modified(|s| {
            if *s == RunState::Running {
                *s = RunState::Stopping;
                true
            } else {
                false
            }
        });
    }

    /// Stop now: whatever is in flight is `interrupted`.
    pub(crate) fn abort(&self) {
        self.state.send_replace(RunState::Aborting);
    }

    pub(crate) fn state(&self) -> RunState {
        *self.state.borrow()
    }

    /// What a worker watches.
    pub(crate) fn subscribe(&self) -> watch::Receiver<RunState> {
        self.state.subscribe()
    }
}

/// What a progress display gets ten times a second.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Since the run started.
    pub elapsed: Duration,
    /// Totals over all workers.
    pub live: Live,
    /// Requests the plan will make (when it is a count).
    pub total_requests: Option<u64>,
    /// How long the plan runs (when it is a duration).
    pub duration: Option<Duration>,
    /// Everything measured so far, merged over the workers: refreshed about
    /// once a second (the same `Arc` until then), None until the first
    /// merge or when nobody asked ([`Control::want_snapshots`]). Totals,
    /// counters and histograms are complete; the per-second series holds
    /// only the last few seconds (the last point is the second in progress)
    /// unless a threshold with abort_on_fail needs all of it.
    pub snapshot: Option<Arc<Measurements>>,
}
