//! The request driver role: the one request a closed or open loop's task
//! makes in the worker's protocol ([`one_request`]), the protocols that
//! drive their connections themselves (HTTP/3's connection slots,
//! [`spawn_driver`]), and what the worker closes when its loops end
//! ([`close_all`]). The loops call these and name no protocol.

use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tokio::time::Sleep;

use super::session::Session;
use super::starts::Starts;
use super::wire::Wire;
use super::{http2, http3};
use crate::conn::Conn;
use crate::ctx::Ctx;
use crate::targets::Cursor;

/// One request of a closed or open loop's task, in the worker's protocol:
/// a stream on HTTP/2's pool, or on the task's own connection `conn`
/// (connected if needed). `origin`, `scheduled`: see
/// `crate::exchange::one_request`.
#[inline]
pub(crate) async fn one_request(
    ctx: &Ctx,
    conn: &mut Option<Conn>,
    session: &mut Session,
    sleep: Pin<&mut Sleep>,
    origin: Instant,
    scheduled: bool,
    cursor: &mut Cursor,
) {
    match session {
        // Boxed: keeps HTTP/1.1's task as small as it was.
        Session::Http2(_) => Box::pin(http2::one_request(ctx, session, sleep, origin, scheduled, cursor)).await,
        Session::Http1(_) => crate::exchange::one_request(ctx, conn, session, sleep, origin, scheduled, cursor).await,
    }
}

/// Spawns one connection slot of a protocol that drives its connections
/// itself (HTTP/3: a task per slot running its request loops), taking its
/// requests from `starts` (with `warm`, connected before the schedule
/// starts). False when the worker's protocol leaves that to the loop: a
/// task of its own per connection with a [`Session`].
pub(crate) fn spawn_driver<S: Starts + 'static>(ctx: &Rc<Ctx>, starts: &Rc<S>, warm: bool) -> bool {
    match &ctx.spec.wire {
        Wire::Http3(h3) => {
            tokio::task::spawn_local(http3::connection_slot(
                ctx.task(),
                Rc::clone(starts),
                Arc::clone(h3),
                warm,
            ));
            true
        }
        _ => false,
    }
}

/// Closes what the worker's connections share once its loops have ended
/// (HTTP/2's pooled connections: their `connection` samples).
pub(crate) fn close_all(ctx: &Ctx) {
    if let Some(pool) = &ctx.conns.h2 {
        pool.close_all(ctx);
    }
}
