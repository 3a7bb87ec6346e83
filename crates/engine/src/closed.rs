//! The HTTP closed loop: each connection sends its next request when the
//! previous response is in.

use std::cell::Cell;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::conn::{Conn, close};
use crate::ctx::{Ctx, TaskGuard};
use crate::proto::{Session, Starts, one_request, spawn_driver};
use crate::targets::Cursor;

/// Requests this worker may still start (None: until stopped), shared by
/// its connections.
struct Budget(Cell<Option<u64>>);

impl Starts for Budget {
    async fn next(&self, _slot: usize) -> Option<Option<Instant>> {
        self.take().then_some(None)
    }
}

impl Budget {
    fn take(&self) -> bool {
        match self.0.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                self.0.set(Some(n - 1));
                true
            }
        }
    }
}

/// Starts `connections` connections, each looping request after request;
/// `budget` requests in all (None: until stopped), none started after
/// `until`.
pub(crate) fn start(ctx: &Rc<Ctx>, connections: u64, budget: Option<u64>, until: Option<Instant>) {
    if let Some(until) = until {
        let ctx2 = Rc::clone(ctx);
        tokio::task::spawn_local(async move {
            tokio::select! {
                () = tokio::time::sleep_until(until.into()) => ctx2.stop(),
                () = ctx2.stop_notify.notified() => {}
            }
        });
    }
    let budget = Rc::new(Budget(Cell::new(budget)));
    for _ in 0..connections {
        // A protocol driving its own connections takes the budget itself.
        if !spawn_driver(ctx, &budget, false) {
            tokio::task::spawn_local(closed_task(ctx.task(), Rc::clone(&budget)));
        }
    }
}

/// A closed-loop connection: request after request until the budget, the
/// deadline or a stop.
async fn closed_task(guard: TaskGuard, budget: Rc<Budget>) {
    let ctx = &guard.0;
    let mut conn: Option<Conn> = None;
    let mut session = Session::for_worker(ctx);
    // This connection's place in the plan's requests (`sequential`).
    let mut cursor = Cursor::default();
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    while !ctx.stopping.get() && budget.take() {
        let start = Instant::now();
        one_request(ctx, &mut conn, &mut session, sleep.as_mut(), start, false, &mut cursor).await;
        // A request can end without waiting for anything (a refused
        // connect on loopback fails inside the system call): spend tokio's
        // cooperative budget so the worker's other tasks still get to run.
        tokio::task::coop::consume_budget().await;
    }
    close(ctx, conn);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `f` returns, without calling it.
    fn size_of_return<A, R>(_: impl FnOnce(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A closed-loop connection's task is its `closed_task` future: with
    /// 15,000 connections, every hundred bytes here is 1.5 MB. Unoptimized,
    /// it measured 1,192 bytes while `Session` held HTTP/2's slot inline
    /// (168 bytes against HTTP/1.1's 72-byte reader), 1,096 with it boxed,
    /// 1,040 once `proto::one_request` stopped holding its arguments twice.
    #[test]
    fn a_closed_loop_connections_task_stays_small() {
        type Args = (TaskGuard, Rc<Budget>);
        let size = size_of_return(|a: Args| closed_task(a.0, a.1));
        assert!(size <= 1_080, "a closed-loop connection's future is {size} bytes");
        let session = std::mem::size_of::<Session>();
        let reader = std::mem::size_of::<crate::proto::http1::ResponseReader>();
        assert_eq!(session, reader, "a Session is no larger than HTTP/1.1's reader");
    }
}
