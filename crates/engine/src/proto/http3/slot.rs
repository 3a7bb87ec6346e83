//! A connection slot: its connections, one after another, and the request
//! loops each runs.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use throng_metrics::Phase;

use super::conn::{Driver, To, open_to, target_addr};
use super::state::ConnState;
use super::stream::exchange;
use super::{H3_NO_ERROR, H3Spec, SendRequest, Starts};
use crate::ctx::{Ctx, TaskGuard};
use crate::targets::Cursor;

/// One connection slot (`-c` of them): take a request, connect, run
/// `streams` request loops on the connection until it dies, the requests
/// end or the run stops; then again while there are requests.
/// With `warm` (an open loop's first connections), it connects before the
/// schedule starts, so that the first starts find it ready.
pub(crate) async fn connection_slot<S: Starts + 'static>(guard: TaskGuard, starts: Rc<S>, h3: Arc<H3Spec>, warm: bool) {
    let ctx = &guard.0;
    let loops = if ctx.spec.keepalive { h3.streams } else { 1 };
    // One idle slot per request loop, kept across reconnects.
    let slots: Rc<[usize]> = (0..loops).map(|_| starts.slot()).collect();
    // The slot's place in the plan's several requests, and with targets on
    // several origins the one its connections serve (as HTTP/1.1's).
    let cursor = Rc::new(RefCell::new(Cursor::default()));
    let to = {
        let mut c = cursor.borrow_mut();
        match ctx.pick.as_ref().and_then(|p| p.dest(&mut c)) {
            Some(d) => To {
                addr: d.route.addrs.first().copied().unwrap_or_else(|| target_addr(ctx)),
                server_name: d
                    .tls
                    .as_ref()
                    .map_or_else(|| h3.server_name.clone(), |t| t.server_name.to_str().into_owned()),
            },
            None => To {
                addr: target_addr(ctx),
                server_name: h3.server_name.clone(),
            },
        }
    };
    let opened = Instant::now();
    if warm && let Ok((quic, driver, send)) = open_to(ctx, &h3.client, &to.server_name, to.addr, h3.streams).await {
        run_connection(ctx, &starts, &h3, driver, send, &slots, None, &cursor).await;
        quic.close(H3_NO_ERROR.into(), b"");
        let now = Instant::now();
        ctx.rec.borrow_mut().connection_closed(now, now - opened);
    }
    while !ctx.stopping.get() {
        let Some(intended) = starts.next(slots[0]).await else {
            break;
        };
        let opened = Instant::now();
        match open_to(ctx, &h3.client, &to.server_name, to.addr, h3.streams).await {
            Ok((quic, driver, send)) => {
                run_connection(ctx, &starts, &h3, driver, send, &slots, Some(intended), &cursor).await;
                quic.close(H3_NO_ERROR.into(), b"");
                let now = Instant::now();
                ctx.rec.borrow_mut().connection_closed(now, now - opened);
            }
            Err(class) => {
                // The request taken fails with its connection.
                {
                    let mut rec = ctx.rec.borrow_mut();
                    rec.request_started();
                    rec.request_failed(Instant::now(), class, 0);
                }
                if let Some(r) = ctx.row(opened).row() {
                    if let Some(i) = intended {
                        r.phase(Phase::ScheduleLag, opened.saturating_duration_since(i));
                    }
                    r.failed(class);
                }
                tokio::task::coop::consume_budget().await;
            }
        }
    }
    starts.done();
}

/// Runs the request loops of one connection (the first one with the
/// request `first` already taken, when given) and its h3 driver, until
/// every loop ends.
#[allow(clippy::too_many_arguments)]
async fn run_connection<S: Starts + 'static>(
    ctx: &Rc<Ctx>,
    starts: &Rc<S>,
    h3: &Arc<H3Spec>,
    mut driver: Driver,
    send: SendRequest,
    slots: &[usize],
    first: Option<Option<Instant>>,
    cursor: &Rc<RefCell<Cursor>>,
) {
    let state = Rc::new(ConnState::default());
    let mut set = tokio::task::JoinSet::new();
    for (i, &slot) in slots.iter().enumerate() {
        set.spawn_local(request_loop(
            Rc::clone(ctx),
            Rc::clone(starts),
            Arc::clone(h3),
            send.clone(),
            Rc::clone(&state),
            slot,
            if i == 0 { first } else { None },
            Rc::clone(cursor),
        ));
    }
    drop(send);
    let mut driver_done = false;
    loop {
        tokio::select! {
            joined = set.join_next() => {
                if joined.is_none() {
                    break;
                }
            }
            _ = std::future::poll_fn(|cx| driver.poll_close(cx)), if !driver_done => {
                // The connection is closing: loops in an exchange see it on
                // their streams, loops waiting for a start leave.
                driver_done = true;
                state.dead.set(true);
                state.died.notify_waiters();
            }
        }
    }
    ctx.rec.borrow_mut().mux_connection_closed(state.carried.get());
}

/// Request after request on one connection, starting with `first` when
/// given (a request already taken).
#[allow(clippy::too_many_arguments)]
async fn request_loop<S: Starts>(
    ctx: Rc<Ctx>,
    starts: Rc<S>,
    h3: Arc<H3Spec>,
    mut send: SendRequest,
    state: Rc<ConnState>,
    slot: usize,
    first: Option<Option<Instant>>,
    cursor: Rc<RefCell<Cursor>>,
) {
    let mut next = first;
    loop {
        let intended = match next.take() {
            Some(i) => i,
            None => {
                if ctx.stopping.get() || state.dead.get() {
                    return;
                }
                // A start taken is always made: `next` pops it in the
                // poll that returns it, so losing this race loses none.
                let next = tokio::select! {
                    biased;
                    n = starts.next(slot) => n,
                    () = state.died.notified() => {
                        starts.cancel(slot);
                        None
                    }
                };
                match next {
                    Some(i) => i,
                    None => return,
                }
            }
        };
        let connection_lives = exchange(&ctx, &h3, &mut send, &state, intended, Some(&cursor)).await != Err(true);
        state.carried.set(state.carried.get() + 1);
        if !connection_lives {
            state.dead.set(true);
            state.died.notify_waiters();
            return;
        }
        if !ctx.spec.keepalive {
            return;
        }
        tokio::task::coop::consume_budget().await;
    }
}
