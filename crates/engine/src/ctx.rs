//! The worker context: state shared by one worker's tasks, and the guard
//! that counts them.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use throng_metrics::Recorder;
use tokio::sync::Notify;

use crate::load::WorkerSpec;
use crate::open::IdlePool;
use crate::rows::RowWriter;

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
    pub(crate) spec: WorkerSpec,
    /// `--csv-requests`: this worker's row file.
    pub(crate) rows: Option<RefCell<RowWriter>>,
    /// Identity of the next connection attempt (in rows).
    pub(crate) next_conn: Cell<u64>,
    pub(crate) stopping: Cell<bool>,
    pub(crate) stop_notify: Notify,
    pub(crate) budget: Cell<Option<u64>>,
    pub(crate) in_flight: Cell<u64>,
    /// Connection attempts under way (counted `interrupted` on abort).
    pub(crate) connecting: Cell<u64>,
    /// Reconnect attempts under way (likewise).
    pub(crate) reconnecting: Cell<u64>,
    pub(crate) live_tasks: Cell<u64>,
    pub(crate) done_notify: Notify,
    // Open loop.
    pub(crate) queue: RefCell<VecDeque<Instant>>,
    pub(crate) idle: IdlePool,
    pub(crate) open_tasks: Cell<u64>,
    /// Identity of the next open-loop connection task (its idle slot).
    pub(crate) next_id: Cell<usize>,
    pub(crate) schedule_done: Cell<bool>,
}

impl Ctx {
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

    pub(crate) fn stop(&self) {
        if !self.stopping.replace(true) {
            self.stop_notify.notify_waiters();
            self.idle.wake_all();
        }
    }

    pub(crate) fn take_budget(&self) -> bool {
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
