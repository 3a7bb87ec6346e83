//! The worker context: state shared by one worker's tasks, and the guard
//! that counts them.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use throng_metrics::{Measurements, Recorder};
use tokio::sync::Notify;

use crate::load::WorkerSpec;
use crate::rows::{Labels, RowGuard, RowWriter};

/// State shared by one worker's tasks (never across threads).
pub(crate) struct Ctx {
    pub(crate) rec: RefCell<Recorder>,
    /// A scenario run's per-tag figures.
    pub(crate) scenario: RefCell<Option<throng_metrics::ScenarioRecorder>>,
    pub(crate) scratch: RefCell<Box<[u8]>>,
    /// Connections ask for the kernel's receive stamps (crate::stamps):
    /// kernel clock chosen, and the load makes requests.
    pub(crate) stamp: bool,
    /// Responses timed by each clock.
    pub(crate) stamps: Cell<crate::stamps::Counts>,
    /// The client sends first once connected (a request, a scenario, a line
    /// protocol that starts with a send): TLS's Finished waits to go out
    /// with it.
    pub(crate) client_speaks_first: bool,
    pub(crate) spec: WorkerSpec,
    /// Which request to send next, when the plan has several.
    pub(crate) pick: Option<crate::targets::Pick>,
    /// `--csv-requests`: this worker's row file.
    pub(crate) rows: Option<RefCell<RowWriter>>,
    /// Identity of the next connection attempt (in rows).
    pub(crate) next_conn: Cell<u64>,
    /// The index of the route's address that took the last connection:
    /// the next attempt starts there.
    pub(crate) prefer: Cell<usize>,
    pub(crate) stopping: Cell<bool>,
    pub(crate) stop_notify: Notify,
    pub(crate) in_flight: Cell<u64>,
    /// Connection attempts under way (counted `interrupted` on abort).
    pub(crate) connecting: Cell<u64>,
    /// Reconnect attempts under way (likewise).
    pub(crate) reconnecting: Cell<u64>,
    pub(crate) live_tasks: Cell<u64>,
    pub(crate) done_notify: Notify,
    /// What the worker's connections share (its protocol's, made from
    /// `spec.wire`; closed when the loops end).
    pub(crate) conns: crate::proto::Conns,
}

impl Ctx {
    /// What the worker measured, once its loops have ended (`finished`):
    /// what was still under way counted `interrupted` (per target too), and
    /// its targets' figures.
    pub(crate) fn measured(&self, finished: Instant) -> Measurements {
        let rec = self.take_recorder(finished);
        if let Some(p) = &self.pick {
            p.interrupted(&self.scenario);
        }
        let scenario = self.scenario.borrow_mut().take().map(|s| s.finish(finished));
        let mut measurements = rec.finish(finished);
        measurements.scenario = scenario;
        measurements
    }

    /// The worker's recorder at its end (`finished`), with what was still
    /// under way counted `interrupted`: requests in flight, connections
    /// opening and reconnecting. A fresh one is left in its place.
    pub(crate) fn take_recorder(&self, finished: Instant) -> Recorder {
        let mut rec = self.rec.replace(Recorder::new(self.spec.origin));
        let in_flight = self.in_flight.get();
        if in_flight > 0 {
            rec.requests_interrupted(finished, in_flight);
        }
        let connecting = self.connecting.get();
        if connecting > 0 {
            rec.connections_interrupted(finished, connecting, false);
        }
        let reconnecting = self.reconnecting.get();
        if reconnecting > 0 {
            rec.connections_interrupted(finished, reconnecting, true);
        }
        rec
    }

    /// Counts a response timed by the kernel's stamp (`kernel`) or the
    /// user clock.
    pub(crate) fn count_stamp(&self, kernel: bool) {
        let mut c = self.stamps.get();
        if kernel {
            c.kernel += 1;
        } else {
            c.user += 1;
        }
        self.stamps.set(c);
    }

    /// Starts nothing new from now on: every loop watches `stopping` and
    /// `stop_notify`.
    pub(crate) fn stop(&self) {
        if !self.stopping.replace(true) {
            self.stop_notify.notify_waiters();
        }
    }

    /// The row of a unit of work starting at `start` (empty when the run
    /// writes no rows).
    #[inline]
    pub(crate) fn row(&self, start: Instant) -> RowGuard<'_> {
        RowGuard::new(self.rows.as_ref(), self.spec.origin, start)
    }

    /// The same, with a scenario request's labels.
    pub(crate) fn labelled_row<'a>(&'a self, start: Instant, labels: Labels<'a>) -> RowGuard<'a> {
        RowGuard::labelled(self.rows.as_ref(), self.spec.origin, start, labels)
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
