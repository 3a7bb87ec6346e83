//! What a worker and the coordinator exchange: the run's state workers
//! watch, where a worker publishes its snapshots, and its result. A leaf,
//! shared by both kinds of worker (`crate::worker`, `crate::uring`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use throng_metrics::Measurements;

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

/// A worker's result: what it measured, and when it finished.
#[derive(Debug)]
pub(crate) struct WorkerDone {
    pub measurements: Measurements,
    pub finished: Instant,
    /// CPU this worker thread used: (user, system).
    pub cpu: (Duration, Duration),
    /// `--csv-requests`: rows written and left out, or why writing failed.
    pub rows: Option<std::io::Result<crate::rows::RowCounts>>,
    /// Responses timed by the kernel's receive stamp and by the user clock.
    pub stamps: crate::stamps::Counts,
}

impl WorkerDone {
    /// A worker's result at `finished`, its CPU time counted from
    /// `cpu_before` (the thread's at its start).
    pub(crate) fn at(
        measurements: Measurements,
        finished: Instant,
        cpu_before: (Duration, Duration),
        rows: Option<std::io::Result<crate::rows::RowCounts>>,
        stamps: crate::stamps::Counts,
    ) -> WorkerDone {
        let cpu_after = crate::sys::thread_cpu();
        WorkerDone {
            measurements,
            finished,
            cpu: (
                cpu_after.0.saturating_sub(cpu_before.0),
                cpu_after.1.saturating_sub(cpu_before.1),
            ),
            rows,
            stamps,
        }
    }
}
