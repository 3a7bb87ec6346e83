//! One request on a connection: send it, read the response, record it.
//!
//! ```text
//!  loops (closed, open, storm, scenario)
//!     │ Session::exchange        write the request, read the response
//!     │ Session::reusable        keep the connection for another?
//!     │ record_exchange          phases, bytes, outcome (recorder and row)
//!     ▼
//!  Session::Http1(ResponseReader) ── http1::exchange ── Transport (tcp | tls)
//! ```
//!
//! The protocol interface, [`Session`], is `crate::proto::session`'s; the
//! loops reach this through `crate::proto::one_request`.

use std::pin::Pin;
use std::time::Instant;

use throng_metrics::{Phase, SlowEnd};
use tokio::time::Sleep;

use crate::conn::{Conn, close, open_connection, open_connection_to};
use crate::ctx::Ctx;
use crate::proto::events::Watch;
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::record::record_exchange;
use crate::rows::Row;
use crate::targets::{Cursor, Pick};

/// One request on a connection of the loop's own (a [`Session`] speaking
/// one request at a time: HTTP/1.1): connect if needed, exchange, record.
/// `origin` is where latency is measured from: the intended start when
/// `scheduled` (open loop; its row shows the lateness), else the actual one.
/// The loops call it through `crate::proto::one_request`.
pub(crate) async fn one_request(
    ctx: &Ctx,
    conn: &mut Option<Conn>,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    origin: Instant,
    scheduled: bool,
    cursor: &mut Cursor,
) {
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    // The plan's request, or the next of its several (an index, no copy).
    let entry = ctx.pick.as_ref().map(|p| {
        let i = p.next(cursor);
        p.started(i);
        (p, i)
    });
    let plain: &[u8] = match entry {
        Some((p, i)) => p.request(i),
        None => &ctx.spec.request,
    };
    // With targets on several origins, the one a new connection serves.
    let dest = match conn {
        None => ctx.pick.as_ref().and_then(|p| p.dest(cursor)),
        Some(_) => None,
    };
    // With trace context, the task's copy with this request's ids.
    let (request, trace): (&[u8], _) = match &ctx.spec.trace {
        Some(tracer) => {
            let t = tracer.stamp(&mut cursor.traced, plain, entry.is_none());
            (&t.bytes, Some(&t.id))
        }
        None => (plain, None),
    };
    let spec = &ctx.spec;
    // Written when it drops: once, however the request ends.
    let now = Instant::now();
    let mut row = ctx.row(now);
    if let Some(r) = row.row() {
        if let Some(&id) = trace {
            r.trace(id);
        }
        if scheduled {
            r.phase(Phase::ScheduleLag, now.saturating_duration_since(origin));
        }
        if let Some(c) = conn.as_mut() {
            r.conn(c.id);
            c.report_setup(r);
        }
    }

    let (c, t_send, written) = match conn {
        Some(c) => (c, Instant::now(), 0),
        None => {
            // Boxed: the connect future is large and short-lived; keeping it
            // out of the task keeps every idle connection small. Plain TCP
            // sends the request with the connect (see conn::connect).
            let first: &[u8] = if spec.tls.is_some() { &[] } else { request };
            let opening = match dest {
                Some(d) => {
                    Box::pin(open_connection_to(
                        ctx,
                        &d.route,
                        d.tls.as_ref(),
                        first,
                        None,
                        false,
                        sleep.as_mut(),
                        row.row(),
                    ))
                    .await
                }
                None => Box::pin(open_connection(ctx, first, None, false, sleep.as_mut(), row.row())).await,
            };
            match opening {
                Ok(o) => {
                    let c = conn.insert(o.conn);
                    // A request written with the connect started with the
                    // system call that wrote it.
                    (c, o.sent, o.written)
                }
                Err(class) => {
                    let now = Instant::now();
                    ctx.rec.borrow_mut().request_failed(now, class, 0);
                    if let Some(stream) = &spec.stream {
                        // A stream that never got a connection ended too.
                        let seen = throng_metrics::StreamSeen {
                            slo_met: stream.slo.map(|_| false),
                            ..Default::default()
                        };
                        ctx.rec.borrow_mut().stream_ended(&class.name(), &seen);
                    }
                    if let Some(&id) = trace {
                        slow(ctx, origin, now, SlowEnd::Error(class), id);
                    }
                    ctx.in_flight.set(ctx.in_flight.get() - 1);
                    if let Some((p, i)) = entry {
                        p.ended(&ctx.scenario, i, now, None);
                    }
                    if let Some(r) = row.row() {
                        r.failed(class);
                    }
                    return;
                }
            }
        }
    };
    if spec.follow.is_some() {
        // Boxed: only runs that follow redirects pay for the larger future.
        Box::pin(crate::redirect::one_followed(
            ctx,
            conn,
            session,
            sleep,
            t_send,
            written,
            origin,
            row.row(),
            request,
            trace.copied(),
        ))
        .await;
        return;
    }
    let sent = exchange_request(
        ctx,
        c,
        session,
        sleep,
        t_send,
        written,
        origin,
        row.row(),
        request,
        entry,
        trace,
    );
    if sent.await != Answered::Reusable {
        close(ctx, conn.take());
    }
}

/// How a request ended, for its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answered {
    /// Answered as expected; the connection can be held.
    Reusable,
    /// Answered as expected, and the server closes after its response (as
    /// a request with `Connection: close` asks).
    Closing,
    /// Failed, or answered with a status not expected.
    Failed,
}

/// Sends the plan's request on `c` (its first `written` bytes already out
/// since `t_send`), reads the response and records it (in `row` too); the
/// request was counted started and in flight by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange_on(
    ctx: &Ctx,
    c: &mut Conn,
    session: &mut Session,
    sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    row: Option<&mut Row<'_>>,
) -> Answered {
    exchange_request(
        ctx,
        c,
        session,
        sleep,
        t_send,
        written,
        origin,
        row,
        &ctx.spec.request,
        None,
        None,
    )
    .await
}

/// [`exchange_on`] for `request`, one of the plan's several (`entry`:
/// its picker and index, for the per-target figures), carrying `trace`.
#[allow(clippy::too_many_arguments)]
async fn exchange_request(
    ctx: &Ctx,
    c: &mut Conn,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    row: Option<&mut Row<'_>>,
    request: &[u8],
    entry: Option<(&Pick, usize)>,
    trace: Option<&[u8; 16]>,
) -> Answered {
    let spec = &ctx.spec;
    let keep_server = ctx.rec.borrow().wants_first_reply();
    session.reset(Keep {
        server: keep_server,
        ..Keep::default()
    });
    sleep.as_mut().reset((t_send + spec.timeout).into());
    let (outcome, watched) = match &spec.stream {
        None => (
            session
                .exchange(&mut c.stream, request, written, t_send, ctx.stamp, &ctx.scratch, sleep)
                .await,
            None,
        ),
        // Boxed: only stream runs pay for the larger future and the reader
        // (a closed loop's task stays small).
        Some(stream) => {
            let (outcome, watched) = Box::pin(read_stream(
                ctx, c, session, stream, sleep, t_send, written, origin, request,
            ))
            .await;
            (outcome, Some(watched))
        }
    };
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    let recorded = record_exchange(
        ctx,
        session,
        &outcome,
        request.len(),
        t_send,
        origin,
        &spec.expect,
        keep_server,
        row,
    );
    if let (Some((w, early)), Some(stream)) = (&watched, &spec.stream) {
        stream_ended(ctx, w, stream, &outcome, recorded, *early, t_send);
    }
    if let Some(&id) = trace {
        let (end, how) = match &outcome {
            Ok(t) => (t.done, SlowEnd::Status(session.reply().status)),
            Err(f) => (Instant::now(), SlowEnd::Error(f.class)),
        };
        slow(ctx, origin, end, how, id);
    }
    if let Some((p, i)) = entry {
        let response = match (&outcome, recorded) {
            (Ok(t), Some(ok)) => Some((t.done.saturating_duration_since(t_send), ok)),
            _ => None,
        };
        p.ended(&ctx.scenario, i, Instant::now(), response);
    }
    match outcome {
        Ok(_) if recorded.is_none() => Answered::Failed,
        Ok(timing) if spec.keepalive && session.reusable(&timing) => Answered::Reusable,
        Ok(_) => Answered::Closing,
        Err(_) => Answered::Failed,
    }
}

/// Exchanges `request` on `c` with an event-stream response (`--sse`,
/// `--llm`), read into a watch of its own; returns the outcome, the watch
/// and why the stream ended before the server ended it.
#[allow(clippy::too_many_arguments)]
async fn read_stream(
    ctx: &Ctx,
    c: &mut Conn,
    session: &mut Session,
    stream: &throng_plan::StreamSpec,
    sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    request: &[u8],
) -> (
    Result<crate::conn::Timing, crate::conn::Failed>,
    (Box<Watch>, Option<&'static str>),
) {
    let mut watch = Box::new(Watch::new(stream, origin));
    let limits = (ctx.spec.timeout, stream.duration.map(|d| t_send + d));
    // Created before the stream's first look at the flag: a stop between
    // the two still wakes it.
    let stop = std::pin::pin!(ctx.stop_notify.notified());
    let r = session
        .exchange_stream(
            &mut c.stream,
            request,
            written,
            t_send,
            &mut watch,
            &ctx.rec,
            &ctx.scratch,
            limits,
            sleep,
            (&ctx.stopping, stop),
        )
        .await;
    match r {
        Ok((timing, early)) => (Ok(timing), (watch, early)),
        Err(f) => (Err(f), (watch, None)),
    }
}

/// Records how a stream (`--sse`, `--llm`) ended: its `stream` phase when
/// it ended well, and its end and counts once, whatever the end.
pub(crate) fn stream_ended(
    ctx: &Ctx,
    w: &Watch,
    stream: &throng_plan::StreamSpec,
    outcome: &Result<crate::conn::Timing, crate::conn::Failed>,
    recorded: Option<bool>,
    early: Option<&'static str>,
    t_send: Instant,
) {
    let mut rec = ctx.rec.borrow_mut();
    match (outcome, recorded) {
        (Ok(t), Some(true)) => {
            rec.phase(t.done, Phase::Stream, t.done.saturating_duration_since(t_send));
            rec.stream_ended(early.unwrap_or("completed"), &w.seen(t_send, t.done, true, stream));
        }
        (Ok(t), _) => {
            let class = throng_metrics::ErrorClass::CheckFailed.name();
            rec.stream_ended(&class, &w.seen(t_send, t.done, false, stream));
        }
        (Err(f), _) => rec.stream_ended(&f.class.name(), &w.seen(t_send, Instant::now(), false, stream)),
    }
}

/// Offers a traced request that started (its latency's origin) at `origin`
/// and ended at `end` to the worker's slowest.
fn slow(ctx: &Ctx, origin: Instant, end: Instant, how: SlowEnd, id: [u8; 16]) {
    if let Some(t) = &ctx.spec.trace {
        t.offer(&mut ctx.rec.borrow_mut(), origin, end, how, id);
    }
}
