//! One request on a connection: send it, read the response, record it.

use std::pin::Pin;
use std::time::Instant;

use throng_metrics::{ErrorClass, Phase, Reply};
use tokio::time::Sleep;

use crate::conn::{self, Conn, Timing, close, open_connection};
use crate::ctx::Ctx;
use crate::http1::ResponseReader;
use crate::rows::Row;

/// One request: connect if needed, exchange, record. `origin` is where
/// latency is measured from: the intended start when `scheduled` (open
/// loop; its row shows the lateness), else the actual one.
pub(crate) async fn one_request(
    ctx: &Ctx,
    conn: &mut Option<Conn>,
    reader: &mut ResponseReader,
    mut sleep: Pin<&mut Sleep>,
    origin: Instant,
    scheduled: bool,
) {
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    let spec = &ctx.spec;
    // Written when it drops: once, however the request ends.
    let now = Instant::now();
    let mut row = ctx.row(now);
    if let Some(r) = row.row() {
        if scheduled {
            r.phase(Phase::ScheduleLag, now.saturating_duration_since(origin));
        }
        if let Some(c) = conn.as_ref() {
            r.conn(c.id);
        }
    }

    let (c, t_send, written) = match conn {
        Some(c) => (c, Instant::now(), 0),
        None => {
            // Boxed: the connect future is large and short-lived; keeping it
            // out of the task keeps every idle connection small. Plain TCP
            // sends the request with the connect (see conn::connect).
            let first: &[u8] = if spec.tls.is_some() { &[] } else { &spec.request };
            match Box::pin(open_connection(ctx, first, None, false, sleep.as_mut(), row.row())).await {
                Ok(o) => {
                    let c = conn.insert(o.conn);
                    // A request written with the connect started with the
                    // system call that wrote it.
                    (c, o.sent, o.written)
                }
                Err(class) => {
                    let now = Instant::now();
                    ctx.rec.borrow_mut().request_failed(now, class, 0);
                    ctx.in_flight.set(ctx.in_flight.get() - 1);
                    if let Some(r) = row.row() {
                        r.failed(class);
                    }
                    return;
                }
            }
        }
    };
    if !exchange_on(ctx, c, reader, sleep, t_send, written, origin, row.row()).await {
        close(ctx, conn.take());
    }
}

/// Sends the plan's request on `c` (its first `written` bytes already out
/// since `t_send`), reads the response and records it (in `row` too); the
/// request was counted started and in flight by the caller. True when the
/// connection can carry another request.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange_on(
    ctx: &Ctx,
    c: &mut Conn,
    reader: &mut ResponseReader,
    mut sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    row: Option<&mut Row<'_>>,
) -> bool {
    let spec = &ctx.spec;
    let keep_server = ctx.rec.borrow().wants_first_reply();
    reader.reset(crate::http1::Keep {
        server: keep_server,
        ..crate::http1::Keep::default()
    });
    sleep.as_mut().reset((t_send + spec.timeout).into());
    let outcome = conn::exchange(
        &mut c.stream,
        &spec.request,
        written,
        t_send,
        ctx.stamp,
        reader,
        &ctx.scratch,
        sleep,
    )
    .await;
    ctx.in_flight.set(ctx.in_flight.get() - 1);

    let mut rec = ctx.rec.borrow_mut();
    match outcome {
        Ok(Timing {
            sent,
            first,
            done,
            extra,
            kernel,
        }) => {
            ctx.count_stamp(kernel);
            rec.sent(sent, spec.request.len() as u64);
            rec.phase(done, Phase::Send, sent - t_send);
            rec.phase(done, Phase::Wait, first.saturating_duration_since(sent));
            rec.phase(done, Phase::Receive, done - first);
            rec.phase(done, Phase::Response, done - t_send);
            rec.phase(done, Phase::Latency, done.saturating_duration_since(origin));
            let reply = Reply {
                status: reader.status,
                header_bytes: reader.header_bytes,
                body_bytes: reader.body_bytes,
            };
            if keep_server {
                rec.first_reply(reply, reader.take_server());
            }
            let ok = spec.expect.contains(reply.status);
            if ok {
                rec.request_ok(done, reply, reader.wire_bytes);
            } else {
                rec.request_rejected(done, reply, reader.wire_bytes);
            }
            if let Some(r) = row {
                r.phase(Phase::Send, sent - t_send);
                r.phase(Phase::Wait, first.saturating_duration_since(sent));
                r.phase(Phase::Receive, done - first);
                r.phase(Phase::Response, done - t_send);
                r.phase(Phase::Latency, done.saturating_duration_since(origin));
                r.reply(reply.status, spec.request.len() as u64, reader.wire_bytes);
                if ok {
                    r.ok();
                } else {
                    r.failed(ErrorClass::CheckFailed);
                }
            }
            spec.keepalive && !reader.close && !extra
        }
        Err(f) => {
            let now = Instant::now();
            rec.sent(now, f.written as u64);
            rec.request_failed(now, f.class, reader.wire_bytes);
            if let Some(r) = row {
                r.reply(0, f.written as u64, reader.wire_bytes);
                r.failed(f.class);
            }
            false
        }
    }
}
