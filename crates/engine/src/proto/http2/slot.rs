//! A stream slot of the closed and open loops: a task that makes request
//! after request on the worker's pool, each on a stream of one of its
//! connections.

use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::pool::one_request;
use crate::ctx::TaskGuard;
use crate::proto::Session;
use crate::proto::starts::Starts;
use crate::targets::Cursor;

/// One stream slot (`-c` × `--streams` of them): request after request
/// until `starts` has no more or the run stops.
///
/// A task of its own rather than the loops' connection task, which holds
/// an HTTP/1.1 connection and its request future in place and so held an
/// HTTP/2 request's future boxed beside them: here the request's future
/// is held in place, one allocation per slot instead of a task sized for
/// HTTP/1.1 plus a box per request.
pub(crate) async fn stream_slot<S: Starts>(guard: TaskGuard, starts: Rc<S>) {
    let ctx = &guard.0;
    let id = starts.slot();
    let mut session = Session::for_worker(ctx);
    // This slot's place in the plan's requests (`sequential`).
    let mut cursor = Cursor::default();
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    while !ctx.stopping.get() {
        let Some(intended) = starts.next(id).await else {
            break;
        };
        // Closed loop: latency from now; open loop: from the intended start.
        let origin = intended.unwrap_or_else(Instant::now);
        one_request(
            ctx,
            &mut session,
            sleep.as_mut(),
            origin,
            intended.is_some(),
            &mut cursor,
        )
        .await;
        // A request can end without waiting for anything (a refused
        // connect): spend tokio's cooperative budget so the worker's other
        // tasks still get to run.
        tokio::task::coop::consume_budget().await;
    }
    starts.done();
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Never;

    impl Starts for Never {
        async fn next(&self, _slot: usize) -> Option<Option<Instant>> {
            None
        }
    }

    /// The size of what `f` returns, without calling it.
    fn size_of_return<A, R>(_: impl FnOnce(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A stream slot's task is this future: with 10,000 connections of one
    /// stream each, every hundred bytes here is a megabyte. Unoptimized,
    /// an HTTP/2 slot was the closed loop's connection task (1,040 bytes,
    /// sized for HTTP/1.1's request) plus its request's future boxed beside
    /// it (1,288 bytes, 624 once the targets' path stopped holding the
    /// parsed request): 896 bytes in one.
    #[test]
    fn a_stream_slots_task_stays_small() {
        type Args = (TaskGuard, Rc<Never>);
        let size = size_of_return(|a: Args| stream_slot(a.0, a.1));
        assert!(size <= 960, "a stream slot's task is a {size}-byte future");
    }
}
