//! The HTTP closed loop: each connection sends its next request when the
//! previous response is in.

use std::pin::pin;
use std::time::{Duration, Instant};

use crate::conn::{Conn, close};
use crate::ctx::TaskGuard;
use crate::exchange::one_request;
use crate::http1::ResponseReader;

/// A closed-loop connection: request after request until the budget, the
/// deadline or a stop.
pub(crate) async fn closed_task(guard: TaskGuard) {
    let ctx = &guard.0;
    let mut conn: Option<Conn> = None;
    let mut reader = ResponseReader::new(ctx.spec.head_request);
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    while !ctx.stopping.get() && ctx.take_budget() {
        let start = Instant::now();
        one_request(ctx, &mut conn, &mut reader, sleep.as_mut(), start).await;
        // A request can end without waiting for anything (a refused
        // connect on loopback fails inside the system call): spend tokio's
        // cooperative budget so the worker's other tasks still get to run.
        tokio::task::coop::consume_budget().await;
    }
    close(ctx, conn);
}
