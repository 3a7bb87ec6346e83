//! Storms: each start opens a connection (TCP, TLS), makes at most one
//! request, holds the connection, and closes it — paced by a rate or a
//! jitter, capped by how many may be open or opening at once.

use std::cell::Cell;
use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::Phase;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

use crate::http1::ResponseReader;
use crate::worker::{Conn, Ctx, Pacer, StormLoad, TaskGuard, close, exchange_on, open_connection};

/// Concurrency bookkeeping of one worker's storm.
#[derive(Default)]
struct Slots {
    active: Cell<u64>,
    freed: Notify,
}

/// Starts this worker's storm connections on schedule, at most `cap` open
/// or opening at once.
pub(crate) async fn dispatcher(guard: TaskGuard, load: StormLoad) {
    let ctx = &guard.0;
    let origin = ctx.spec.origin;
    let slots = Rc::new(Slots::default());
    let mut pacer = Pacer::new(load.gap);
    let sources = std::sync::Arc::clone(&ctx.spec.source);
    for (k, offset) in (0u64..).zip(load.starts.clone()) {
        let due = origin + offset;
        if !pacer.wait_until(ctx, due).await {
            break;
        }
        // Wait for a free slot; the wait counts as lateness.
        while load.cap.is_some_and(|cap| slots.active.get() >= cap) {
            tokio::select! {
                () = slots.freed.notified() => {}
                () = ctx.stop_notify.notified() => break,
            }
            if ctx.stopping.get() {
                break;
            }
        }
        if ctx.stopping.get() {
            break;
        }
        slots.active.set(slots.active.get() + 1);
        let source = if sources.is_empty() {
            None
        } else {
            // Rotate over the sources across every worker of the storm.
            let i = (k * load.workers + load.worker) % sources.len() as u64;
            sources.get(i as usize).copied()
        };
        let intended = load.scheduled.then_some(due);
        tokio::task::spawn_local(connection(ctx.task(), Rc::clone(&slots), intended, source, load.hold));
        // Let connections progress while a burst of starts is spawned.
        tokio::task::coop::consume_budget().await;
    }
}

/// One storm connection, start to close.
async fn connection(
    guard: TaskGuard,
    slots: Rc<Slots>,
    intended: Option<Instant>,
    source: Option<std::net::IpAddr>,
    hold: Duration,
) {
    let ctx = &guard.0;
    let start = Instant::now();
    if let Some(due) = intended {
        ctx.rec
            .borrow_mut()
            .phase(start, Phase::ScheduleLag, start.saturating_duration_since(due));
    }
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    let spec = &ctx.spec;
    let with_request = !spec.request.is_empty();
    // Plain TCP sends the request with the connect (see conn::connect).
    let first: &[u8] = if with_request && spec.tls.is_none() {
        &spec.request
    } else {
        &[]
    };
    if with_request {
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
    }
    match Box::pin(open_connection(ctx, first, source, sleep.as_mut())).await {
        Err(class) => {
            if with_request {
                ctx.rec.borrow_mut().request_failed(Instant::now(), class, 0);
                ctx.in_flight.set(ctx.in_flight.get() - 1);
            }
        }
        Ok(ready) => {
            let mut conn = ready.conn;
            let mut open = true;
            if with_request {
                let mut reader = ResponseReader::new(false);
                let origin = intended.unwrap_or(start);
                open = Box::pin(exchange_on(
                    ctx,
                    &mut conn,
                    &mut reader,
                    sleep.as_mut(),
                    ready.ready,
                    ready.written,
                    origin,
                ))
                .await
                    || (reader.status > 0 && !reader.close);
            }
            if open && !hold.is_zero() {
                // Nothing more is sent or expected on a held connection:
                // keep the socket, not the TLS session (see shed_tls).
                conn.stream = conn.stream.shed_tls();
                hold_open(ctx, &mut conn, ready.ready + hold, sleep.as_mut()).await;
            }
            close(ctx, Some(conn));
        }
    }
    slots.active.set(slots.active.get() - 1);
    slots.freed.notify_one();
}

/// Keeps `conn` open until `until`, a stop, or the server closing it
/// (counted). Whatever the server sends meanwhile is read and dropped.
async fn hold_open(ctx: &Ctx, conn: &mut Conn, until: Instant, mut sleep: Pin<&mut tokio::time::Sleep>) {
    sleep.as_mut().reset(until.into());
    let peer_closed = async {
        poll_fn(|cx| {
            loop {
                let mut buf = ctx.scratch.borrow_mut();
                let mut rb = ReadBuf::new(&mut buf[..]);
                match Pin::new(&mut conn.stream).poll_read(cx, &mut rb) {
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
        () = sleep => {}
        () = ctx.stop_notify.notified() => {}
        () = peer_closed => ctx.rec.borrow_mut().closed_by_peer(),
    }
}
