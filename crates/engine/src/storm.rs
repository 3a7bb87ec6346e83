//! Storms: each start opens a connection (TCP, TLS, a protocol handshake),
//! makes at most one request, holds the connection — reconnecting when the
//! server drops it, if asked — and closes it; paced by a rate or a jitter,
//! capped by how many may be open or opening at once.

use std::cell::Cell;
use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use throng_plan::{Reconnect, Rng};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Sleep;

use crate::conn::{Conn, close, open_connection};
use crate::ctx::{Ctx, TaskGuard};
use crate::exchange::{Answered, exchange_on};
use crate::load::{StormLoad, WorkerLoad};
use crate::pacer::Pacer;
use crate::proto::Session;
use crate::proto::link::{self, Link};
use crate::rows::Row;

mod holder;

/// Concurrency bookkeeping of one worker's storm.
#[derive(Default)]
struct Slots {
    active: Cell<u64>,
    freed: Notify,
}

/// What every connection of this worker's storm shares.
struct Shared {
    slots: Slots,
    hold: Duration,
    reconnect: Option<Reconnect>,
    nats_go: bool,
    rng: std::cell::RefCell<Rng>,
    /// Held connections that need no task (see holder); None when the
    /// system gave no epoll set for it, or this storm's connections answer
    /// in ways the holder does not.
    holder: Option<holder::Holder>,
}

/// Starts this worker's storm.
pub(crate) fn start(ctx: &Rc<Ctx>, load: StormLoad) {
    tokio::task::spawn_local(dispatcher(ctx.task(), load));
}

/// Starts this worker's storm connections on schedule, at most `cap` open
/// or opening at once.
async fn dispatcher(guard: TaskGuard, load: StormLoad) {
    let ctx = &guard.0;
    let origin = ctx.spec.origin;
    let shared = Rc::new(Shared {
        slots: Slots::default(),
        hold: load.hold,
        reconnect: load.reconnect,
        nats_go: load.nats_go,
        rng: std::cell::RefCell::new(Rng::new(load.seed ^ load.worker.wrapping_mul(0x9E37_79B9))),
        holder: link::HeldTalk::of(&ctx.spec.wire).and_then(holder::Holder::new),
    });
    let mut pacer = Pacer::new(load.gap);
    let sources = std::sync::Arc::clone(&ctx.spec.source);
    for (k, offset) in (0u64..).zip(load.starts.clone()) {
        let due = origin + offset;
        if !pacer.wait_until(ctx, due).await {
            break;
        }
        // Wait for a free slot; the wait counts as lateness.
        while load.cap.is_some_and(|cap| shared.slots.active.get() >= cap) {
            tokio::select! {
                () = shared.slots.freed.notified() => {}
                () = ctx.stop_notify.notified() => break,
            }
            if ctx.stopping.get() {
                break;
            }
        }
        if ctx.stopping.get() {
            break;
        }
        shared.slots.active.set(shared.slots.active.get() + 1);
        let source = if sources.is_empty() {
            None
        } else {
            // Rotate over the sources across every worker of the storm.
            let i = (k * load.workers + load.worker) % sources.len() as u64;
            sources.get(i as usize).copied()
        };
        let intended = load.scheduled.then_some(due);
        // Numbered over the run, for protocols that name their clients by it.
        let number = k.saturating_mul(load.workers).saturating_add(load.worker);
        tokio::task::spawn_local(crate::numbered::scope(
            number,
            connection(ctx.task(), Rc::clone(&shared), intended, source),
        ));
        // Let connections progress while a burst of starts is spawned.
        tokio::task::coop::consume_budget().await;
    }
}

/// One storm connection, start to close (through any reconnects).
async fn connection(guard: TaskGuard, shared: Rc<Shared>, intended: Option<Instant>, source: Option<std::net::IpAddr>) {
    let ctx = &guard.0;
    let start = Instant::now();
    // The connection's row: written when it drops, however it ends.
    let mut row = ctx.row(start);
    if let Some(due) = intended {
        let lag = start.saturating_duration_since(due);
        ctx.rec.borrow_mut().phase(start, Phase::ScheduleLag, lag);
        if let Some(r) = row.row() {
            r.phase(Phase::ScheduleLag, lag);
        }
    }
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    // This task lives as long as its connection is held, and a task is as
    // large as the largest future it may await: what only opening (or a
    // protocol, or reconnecting) needs is boxed, freed once done, so that a
    // held connection costs a few hundred bytes here, not ~1.5 KB.
    let first = Box::pin(establish(
        ctx,
        source,
        intended.unwrap_or(start),
        false,
        sleep.as_mut(),
        row.row(),
    ))
    .await
    .ok();
    drop(row);
    ctx.rec
        .borrow_mut()
        .first_wave_resolved(first.as_ref().map(|(_, at)| *at));
    if let Some((conn, ready)) = first {
        let deadline = ready + shared.hold;
        finish(ctx, &shared, conn, deadline, source, sleep.as_mut()).await;
    } else {
        release(&shared);
    }
}

/// Holds an open connection until `deadline` (reconnecting as the policy
/// says), then closes it and frees its slot — or hands it to the holder,
/// which does that without this task.
async fn finish(
    ctx: &Rc<Ctx>,
    shared: &Rc<Shared>,
    mut conn: Link,
    deadline: Instant,
    source: Option<std::net::IpAddr>,
    mut sleep: Pin<&mut Sleep>,
) {
    if !shared.hold.is_zero() {
        conn = match hold_and_reconnect(ctx, shared, conn, deadline, source, sleep.as_mut()).await {
            Kept::Close(c) => c,
            Kept::Gone => return release(shared),
            Kept::HandedOver => return,
        };
    }
    if ctx.spec.wire.has_opening() {
        Box::pin(link::goodbye(ctx, &mut conn)).await;
    }
    conn.close(ctx);
    release(shared);
}

/// A connection the holder saw the server close, with a reconnect policy:
/// reconnects as [`hold_and_reconnect`] would have, then holds until
/// `deadline` again.
async fn resume(
    guard: TaskGuard,
    shared: Rc<Shared>,
    deadline: Instant,
    source: Option<std::net::IpAddr>,
    dropped: Instant,
) {
    let ctx = &guard.0;
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    match Box::pin(reconnect(ctx, &shared, deadline, source, dropped, sleep.as_mut())).await {
        Some(conn) => Box::pin(finish(ctx, &shared, conn, deadline, source, sleep.as_mut())).await,
        None => release(&shared),
    }
}

fn release(shared: &Shared) {
    shared.slots.active.set(shared.slots.active.get() - 1);
    shared.slots.freed.notify_one();
}

/// Opens a connection, runs the protocol handshake and the request (when
/// the plan has them). Err when it failed (already recorded): the
/// connection's failure class, or None when the request ended it. `row`
/// is the connection's: ok once established, whatever the request does.
async fn establish(
    ctx: &Ctx,
    source: Option<std::net::IpAddr>,
    origin: Instant,
    reconnect: bool,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<(Link, Instant), Option<ErrorClass>> {
    let spec = &ctx.spec;
    let with_request = !spec.request.is_empty();
    // A protocol that opens its own connections (a preface, QUIC).
    if let Some(own) = link::establish_own(
        ctx,
        with_request,
        source,
        origin,
        reconnect,
        sleep.as_mut(),
        row.as_deref_mut(),
    )
    .await
    {
        return own;
    }
    // Plain TCP sends the request with the connect (see conn::connect).
    let first: &[u8] = if with_request && spec.tls.is_none() && !spec.wire.has_opening() {
        &spec.request
    } else {
        &[]
    };
    if with_request {
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
    }
    match Box::pin(open_connection(
        ctx,
        first,
        source,
        reconnect,
        sleep.as_mut(),
        row.as_deref_mut(),
    ))
    .await
    {
        Err(class) => {
            if let Some(r) = row {
                r.failed(class);
            }
            if with_request {
                ctx.rec.borrow_mut().request_failed(Instant::now(), class, 0);
                ctx.in_flight.set(ctx.in_flight.get() - 1);
            }
            Err(Some(class))
        }
        Ok(ready) => {
            let mut conn = ready.conn;
            if let Some(r) = row.as_deref_mut() {
                r.ok();
            }
            if with_request {
                let mut session = Session::new(false);
                let answered = Box::pin(exchange_on(
                    ctx,
                    &mut conn,
                    &mut session,
                    sleep.as_mut(),
                    ready.sent,
                    ready.written,
                    origin,
                    row,
                ))
                .await;
                // Without a hold, the server's close after its response (the
                // request asks for it) is the connection's normal end: the
                // server closes first, so the TIME_WAIT is its, not the
                // generator's. With one, a failed request or a server that
                // closes leaves nothing to hold.
                match answered {
                    Answered::Reusable => {}
                    Answered::Closing if !holds(ctx) => {
                        // Its close awaited (a timeout at most), so that the
                        // server closes first.
                        let until = Instant::now() + spec.timeout;
                        hold_open(ctx, &mut conn, until, false, sleep).await;
                    }
                    Answered::Closing | Answered::Failed => {
                        close(ctx, Some(conn));
                        return Err(None);
                    }
                }
            }
            Ok((Link::Bytes(conn), ready.ready))
        }
    }
}

/// True when this storm holds its connections.
fn holds(ctx: &Ctx) -> bool {
    matches!(&ctx.spec.load, WorkerLoad::Storm(l) if !l.hold.is_zero())
}

/// How a hold ended.
enum Kept {
    /// The hold is over: close this connection.
    Close(Link),
    /// No connection is left (the server closed it; no reconnect).
    Gone,
    /// The holder has it now (and closes it, and frees its slot).
    HandedOver,
}

/// Holds `conn` until `deadline` or a stop. When the server closes it:
/// with a reconnect policy, reconnects (as the NATS clients do) and keeps
/// holding; without one, the connection is over. A connection that only
/// waits goes to the holder.
async fn hold_and_reconnect(
    ctx: &Rc<Ctx>,
    shared: &Rc<Shared>,
    mut conn: Link,
    deadline: Instant,
    source: Option<std::net::IpAddr>,
    mut sleep: Pin<&mut Sleep>,
) -> Kept {
    loop {
        let peer_closed;
        (conn, peer_closed) = match conn.hold_own(ctx, deadline, sleep.as_mut()).await {
            Ok(held) => held,
            Err(mut c) => {
                let answers = ctx.spec.wire.answers_while_holding();
                if !answers {
                    // Nothing more is sent or expected on a held connection:
                    // keep the socket, not the TLS session (see shed_tls).
                    c.stream = c.stream.shed_tls();
                }
                // Not this task either, when the holder takes it (a quiet
                // socket; MQTT over plain TCP, which it keeps alive).
                c = match holder::Holder::hold(ctx, shared, c, deadline, source) {
                    Ok(()) => return Kept::HandedOver,
                    Err(c) => c,
                };
                let closed = hold_open(ctx, &mut c, deadline, answers, sleep.as_mut()).await;
                (Link::Bytes(c), closed)
            }
        };
        if !peer_closed {
            return Kept::Close(conn);
        }
        let dropped = Instant::now();
        ctx.rec.borrow_mut().closed_by_peer(dropped);
        conn.close(ctx);
        conn = match Box::pin(reconnect(ctx, shared, deadline, source, dropped, sleep.as_mut())).await {
            Some(c) => c,
            None => return Kept::Gone,
        };
    }
}

/// Reconnects a connection the server closed at `dropped`, as the policy
/// says (none: nothing left), until `deadline` or a stop.
async fn reconnect(
    ctx: &Ctx,
    shared: &Shared,
    deadline: Instant,
    source: Option<std::net::IpAddr>,
    dropped: Instant,
    mut sleep: Pin<&mut Sleep>,
) -> Option<Link> {
    let policy = shared.reconnect?;
    let mut attempts = 0;
    // nats.go aborts reconnecting at the second authorization error
    // in a row from the same server (its processAuthError).
    let mut auth_failed_before = false;
    loop {
        let wait = policy.wait + policy.jitter.mul_f64(shared.rng.borrow_mut().next_f64());
        let at = Instant::now() + wait;
        if ctx.stopping.get() || at >= deadline {
            ctx.rec.borrow_mut().gave_up("hold_ended");
            return None;
        }
        sleep.as_mut().reset(at.into());
        tokio::select! {
            () = sleep.as_mut() => {}
            () = ctx.stop_notify.notified() => {
                ctx.rec.borrow_mut().gave_up("hold_ended");
                return None;
            }
        }
        attempts += 1;
        match Box::pin(establish(ctx, source, Instant::now(), true, sleep.as_mut(), None)).await {
            Ok((c, ready)) => {
                ctx.rec.borrow_mut().reconnected(ready, ready - dropped);
                return Some(c);
            }
            Err(Some(ErrorClass::AuthFailed)) if shared.nats_go => {
                if auth_failed_before {
                    ctx.rec.borrow_mut().gave_up("auth_failed_twice");
                    return None;
                }
                auth_failed_before = true;
            }
            Err(_) => {}
        }
        if attempts >= policy.max {
            let why = last_failure(ctx);
            ctx.rec.borrow_mut().gave_up(&why);
            return None;
        }
    }
}

/// The class of this worker's most recent connection failure (for "why
/// it never came back").
fn last_failure(ctx: &Ctx) -> String {
    ctx.rec
        .borrow()
        .last_connection_error()
        .unwrap_or_else(|| "max_reconnects".to_string())
}

/// Keeps `conn` open until `until` or a stop (false), or until the server
/// closes it (true). With `answer_pings`, answers NATS PINGs meanwhile;
/// otherwise whatever the server sends is read and dropped.
async fn hold_open(ctx: &Ctx, conn: &mut Conn, until: Instant, answer_pings: bool, mut sleep: Pin<&mut Sleep>) -> bool {
    // A stop that came before this hold began woke only the waiters there
    // were (Notify::notify_waiters): look at the flag first.
    if ctx.stopping.get() {
        return false;
    }
    sleep.as_mut().reset(until.into());
    let stream = &mut conn.stream;
    let peer_closed = async {
        if answer_pings {
            Box::pin(link::answer_while_holding(ctx, stream)).await;
            return;
        }
        poll_fn(|cx| {
            loop {
                let mut buf = ctx.scratch.borrow_mut();
                let mut rb = ReadBuf::new(&mut buf[..]);
                match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(()),
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(_)) => return Poll::Ready(()),
                }
            }
        })
        .await
    };
    tokio::select! {
        () = sleep => false,
        () = ctx.stop_notify.notified() => false,
        () = peer_closed => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `f` returns, without calling it.
    fn size_of_return<A, R>(_: impl FnOnce(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A held connection's task is its `connection` future: with a million
    /// held, every hundred bytes here is 100 MB. Unoptimized, it measured
    /// 1,448 bytes before what only opening needs was boxed, 1,016 after.
    #[test]
    fn a_held_connections_task_stays_small() {
        type Args = (TaskGuard, Rc<Shared>, Option<Instant>, Option<std::net::IpAddr>);
        let size = size_of_return(|a: Args| connection(a.0, a.1, a.2, a.3));
        assert!(size <= 1_200, "a storm connection's future is {size} bytes");
    }
}
