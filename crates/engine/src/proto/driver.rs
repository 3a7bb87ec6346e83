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
/// a stream on HTTP/2's pool (the loops' tasks are HTTP/2's stream slots
/// now, see [`spawn_driver`]; the arm stays for a session that is one), or
/// on the task's own connection `conn` (connected if needed). `origin`, `scheduled`: see
/// `crate::exchange::one_request`.
///
/// Not an `async fn`: one would hold its arguments besides the protocol's
/// future it awaits, 64 bytes more in every closed-loop connection's task.
/// The caller awaits the protocol's future itself ([`OneRequest`]).
#[inline]
pub(crate) fn one_request<'a>(
    ctx: &'a Ctx,
    conn: &'a mut Option<Conn>,
    session: &'a mut Session,
    sleep: Pin<&'a mut Sleep>,
    origin: Instant,
    scheduled: bool,
    cursor: &'a mut Cursor,
) -> OneRequest<impl Future<Output = ()> + 'a, impl Future<Output = ()> + 'a> {
    match session {
        // Boxed: keeps HTTP/1.1's task as small as it was.
        Session::Http2(_) => OneRequest::Pooled(Box::pin(http2::one_request(
            ctx, session, sleep, origin, scheduled, cursor,
        ))),
        Session::Http1(_) => OneRequest::Own(crate::exchange::one_request(
            ctx, conn, session, sleep, origin, scheduled, cursor,
        )),
    }
}

/// The future of [`one_request`]: the request on the task's own connection
/// (held in place), or a stream on HTTP/2's pool (boxed).
pub(crate) enum OneRequest<O, P> {
    Own(O),
    Pooled(Pin<Box<P>>),
}

impl<O: Future<Output = ()>, P: Future<Output = ()>> Future for OneRequest<O, P> {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        // SAFETY: the `Own` future is never moved out of a pinned
        // `OneRequest` (no method takes it by value or swaps it), so
        // pinning it through the pinned enum is sound; `Pooled` is Unpin.
        match unsafe { self.get_unchecked_mut() } {
            OneRequest::Own(f) => unsafe { Pin::new_unchecked(f) }.poll(cx),
            OneRequest::Pooled(f) => f.as_mut().poll(cx),
        }
    }
}

/// Spawns one connection slot of a protocol that drives its connections
/// itself (HTTP/3: a task per slot running its request loops; HTTP/2: a
/// task per stream slot on the worker's pool, which opens connections as
/// the slots need them), taking its requests from `starts` (with `warm`,
/// HTTP/3 connects before the schedule starts). False when the worker's
/// protocol leaves that to the loop: a task of its own per connection with
/// a [`Session`].
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
        // HTTP/2: a task per stream slot on the worker's pool, its request
        // future held in place (http2::stream_slot says why).
        _ if ctx.conns.h2.is_some() => {
            tokio::task::spawn_local(http2::stream_slot(ctx.task(), Rc::clone(starts)));
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
