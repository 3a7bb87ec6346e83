//! A scenario's `sse:` step: a request whose response is read as an event
//! stream, as `throng http --sse` reads one ([`crate::proto::events`]),
//! on the VU's keep-alive connection (HTTP/1.1), or as a stream on its
//! HTTP/2 connection (`http: 2`, h2c or TLS with ALPN h2), shared with its
//! `request:` steps: a stream ended before the server ended it is reset
//! with CANCEL and the connection goes on.
//!
//! ```text
//!  render ─► head + body ─► connect if needed ─► exchange_stream ─► Watch
//!        └─► (http: 2) the VU's HTTP/2 connection ─► a stream, its DATA ─► Watch
//!    events: first_event | event_gap (llm: ttft | itl, tokens)
//!    ends: the server | events: N | duration: | expect_event arrived | the run stopped
//!  expect_event not met ─► timeout.response (its within: ran out)
//!                          sse.unmatched (the stream ended without it)
//!  ok ─► captures and checks on the awaited (else the last) event's data
//! ```
//!
//! One unit of work per step (`requests{step:NAME}`, its time the whole
//! stream's), and one stream in `streams` however it ends, so the books
//! balance as a request's do.

use std::pin::{Pin, pin};
use std::time::Instant;

use bytes::Bytes;
use throng_metrics::{ErrorClass, StreamSeen};
use throng_plan::{HttpVersion, StreamSpec};
use throng_scenario::{Cookies, ResponseView, SseSpec};
use tokio::time::Sleep;

use super::flight::{InFlight, captures_and_checks, not_sent, unanswered};
use super::h1::{connect, head};
use super::ops::{ReqOp, Scen, Vu};
use super::render::{Rendered, vu_reads};
use crate::conn::{Failed, Timing, close};
use crate::ctx::Ctx;
use crate::proto::events::Watch;
use crate::proto::http1::EndedEarly;
use crate::proto::http2::Bounds;
use crate::proto::vu::{stream_request, stream_session, stream_slot};
use crate::record::record_exchange;
use crate::redirect::Place;
use crate::rows::{Row, RowGuard};

/// The step's stream as `--sse` flags would give it.
fn stream_spec(s: &SseSpec) -> StreamSpec {
    StreamSpec {
        llm: s.llm,
        events: s.events,
        duration: s.duration,
        slo: None,
    }
}

/// A stream the step read (or began to): where it went, its request's
/// size, when it went, its watch and how it ended.
struct Streamed {
    place: Place,
    len: usize,
    t_send: Instant,
    watch: Box<Watch>,
    /// When `expect_event:`'s `within:` runs out.
    within: Option<Instant>,
    result: Result<(Timing, EndedEarly), Failed>,
    /// Read on the VU's HTTP/2 connection (not its HTTP/1.1 one).
    multiplexed: bool,
}

/// The step's watch for a stream sent at `t_send`, when its `within:`
/// runs out, and when the stream ends by `duration:` or `within:`.
fn watch_for(
    s: &SseSpec,
    stream: &StreamSpec,
    op: &ReqOp,
    origin: Option<Instant>,
    t_send: Instant,
) -> (Box<Watch>, Option<Instant>, Option<Instant>) {
    let keep = !op.req.captures.is_empty() || !op.req.checks.is_empty();
    let watch = Box::new(Watch::new(stream, origin.unwrap_or(t_send)).awaiting(s.expect.clone(), keep));
    let within = s.expect.as_ref().map(|e| t_send + e.within);
    let until = match (stream.duration.map(|d| t_send + d), within) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    (watch, within, until)
}

/// Runs one `sse:` step (rendered, its unit begun): over HTTP/1.1, or
/// HTTP/2 when it (else its target) speaks it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn request(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    s: &SseSpec,
    origin: Option<Instant>,
    rendered: Rendered,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let stream = stream_spec(s);
    let http = op.req.http.unwrap_or(sc.dest.http);
    let mut sleep = pin!(tokio::time::sleep(op.req.timeout));
    let streamed = if http.is_multiplexed() {
        let read = over_h2(
            ctx,
            sc,
            vu,
            op,
            (s, &stream, http),
            origin,
            rendered,
            sleep.as_mut(),
            row.row(),
        );
        match Box::pin(read).await {
            Ok(streamed) => streamed,
            Err(class) => {
                // The stream that never went ended too.
                ctx.rec.borrow_mut().stream_ended(&class.name(), &StreamSeen::default());
                return not_sent(ctx, op, flight, row, class);
            }
        }
    } else {
        match over_h1(
            ctx,
            sc,
            vu,
            op,
            (s, &stream),
            origin,
            rendered,
            sleep.as_mut(),
            &flight,
            &mut row,
        )
        .await
        {
            Some(streamed) => streamed,
            None => return unanswered(ctx, op, flight),
        }
    };
    finish(ctx, sc, vu, op, s, &stream, origin, streamed, flight, row);
}

/// The step over HTTP/1.1 on the VU's keep-alive connection (opened when
/// it has none). None: the connect failed (recorded, its stream ended).
#[allow(clippy::too_many_arguments)]
async fn over_h1(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    (s, stream): (&SseSpec, &StreamSpec),
    origin: Option<Instant>,
    rendered: Rendered,
    mut sleep: Pin<&mut Sleep>,
    flight: &InFlight<'_>,
    row: &mut RowGuard<'_>,
) -> Option<Streamed> {
    let (place, bytes) = head(sc, vu, op, rendered.target, &rendered.headers, &rendered.body);
    let (t_send, written) = match connect(ctx, sc, vu, &bytes, sleep.as_mut(), flight, row).await {
        Ok(sent) => sent,
        Err(class) => {
            // The stream that never got a connection ended too.
            ctx.rec.borrow_mut().stream_ended(&class.name(), &StreamSeen::default());
            return None;
        }
    };
    let c = vu.conn.as_mut()?;
    vu.session.own_connection(op.head);
    vu.session.reset(op.keep);
    let (mut watch, within, until) = watch_for(s, stream, op, origin, t_send);
    let stop = pin!(ctx.stop_notify.notified());
    let result = vu
        .session
        .exchange_stream(
            &mut c.stream,
            &bytes,
            written,
            t_send,
            &mut watch,
            &ctx.rec,
            &ctx.scratch,
            (op.req.timeout, until),
            sleep,
            (&ctx.stopping, stop),
        )
        .await;
    Some(Streamed {
        place,
        len: bytes.len(),
        t_send,
        watch,
        within,
        result,
        multiplexed: false,
    })
}

/// The step as a stream on the VU's HTTP/2 connection speaking `http`
/// (opened when it has none, or opened again when it was lost or is going
/// away), as a `request:` step's. Err: it could not be sent, and why.
#[allow(clippy::too_many_arguments)]
async fn over_h2(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    (s, stream, http): (&SseSpec, &StreamSpec, HttpVersion),
    origin: Option<Instant>,
    rendered: Rendered,
    mut sleep: Pin<&mut Sleep>,
    row: Option<&mut Row<'_>>,
) -> Result<Streamed, ErrorClass> {
    let timeout = op.req.timeout;
    vu.conns.drop_unusable(ctx, http, timeout).await;
    if !vu.conns.has(http) {
        let conn = sc.dest.conn_for(http);
        let opening = vu
            .conns
            .open(ctx, http, conn, sc.dest.quic.as_ref(), sleep.as_mut(), None);
        let id = opening.await?;
        if let Some(r) = row {
            r.conn(id);
        }
    }
    let place = Place {
        https: sc.base.https,
        host: sc.base.host.clone(),
        port: sc.base.port,
        target: rendered.target,
    };
    let cookie = match sc.def.cookies {
        Cookies::Off => None,
        _ => vu.jar.header(place.https, &place.host, &place.target),
    };
    let headers = crate::redirect::with_cookie(&rendered.headers, cookie);
    let body = Bytes::from(rendered.body);
    // A rendered value HTTP/2 cannot carry: never sent.
    let (request, len) =
        stream_request(&op.req.method, &place, &headers, body.len(), http).ok_or(ErrorClass::Protocol)?;
    stream_session(&mut vu.session);
    vu.session.reset(op.keep);
    let t_send = Instant::now();
    sleep.as_mut().reset((t_send + timeout).into());
    let (mut watch, within, until) = watch_for(s, stream, op, origin, t_send);
    // Invariant: `stream_session` made it read a stream's response.
    let slot = stream_slot(&mut vu.session).ok_or(ErrorClass::Protocol)?;
    let stop = pin!(ctx.stop_notify.notified());
    let bounds = Bounds {
        timeout,
        until,
        stopping: &ctx.stopping,
        stop,
    };
    let read = vu
        .conns
        .sse(ctx, http, request, &body, len, slot, &mut watch, sleep, bounds)
        .await;
    // None: never, the connection was opened above.
    let result = read.unwrap_or(Err(Failed {
        class: ErrorClass::Protocol,
        written: 0,
    }));
    Ok(Streamed {
        place,
        len,
        t_send,
        watch,
        within,
        result,
        multiplexed: true,
    })
}

/// A stream's end: the awaited event's verdict, recorded, then answered
/// (cookies, captures and checks on the awaited event) or not.
#[allow(clippy::too_many_arguments)]
fn finish(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    s: &SseSpec,
    stream: &StreamSpec,
    origin: Option<Instant>,
    streamed: Streamed,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let Streamed {
        place,
        len,
        t_send,
        watch,
        within,
        result,
        multiplexed,
    } = streamed;
    let (outcome, early) = match result {
        Ok((timing, early)) => (Ok(timing), early),
        Err(f) => (Err(f), None),
    };
    // The awaited event did not come: the step fails (a status not
    // expected stays check_failed: the stream was not the one asked for).
    let status_ok = op.req.expect.contains(vu.session.reply().status);
    let outcome = match outcome {
        Ok(_) if s.expect.is_some() && !watch.matched() && status_ok => {
            let now = Instant::now();
            let class = match early {
                Some("stopped") => ErrorClass::Interrupted,
                _ if within.is_some_and(|w| now >= w) => ErrorClass::TimeoutResponse,
                _ => ErrorClass::Sse("unmatched"),
            };
            Err(Failed { class, written: len })
        }
        other => other,
    };
    let expected = record_exchange(
        ctx,
        &mut vu.session,
        &outcome,
        len,
        t_send,
        origin.unwrap_or(t_send),
        &op.req.expect,
        false,
        row.row(),
    );
    drop(row);
    crate::exchange::stream_ended(ctx, &watch, stream, &outcome, expected, early, t_send);
    vu.answered = outcome.is_ok();
    vu.status = if vu.answered { vu.session.reply().status } else { 0 };
    flight.settled(&outcome, &vu.session);
    match (outcome, expected) {
        (Ok(timing), Some(expected)) => {
            let done = timing.done;
            let session = &vu.session;
            if sc.def.cookies != Cookies::Off {
                crate::redirect::store_cookies(&mut vu.jar, &place, session.headers());
            }
            let response = done.saturating_duration_since(t_send);
            flight.end(done, Some((response, expected)), !expected);
            let view = ResponseView {
                status: session.reply().status,
                headers: session.headers(),
                body: watch.kept().as_bytes(),
                duration: response,
            };
            captures_and_checks(ctx, op, vu_reads!(sc, vu), &view);
            if !multiplexed && !vu.session.reusable(&timing) {
                close(ctx, vu.conn.take());
            }
        }
        _ => {
            unanswered(ctx, op, flight);
            // A stream's failure that was the connection's marked it
            // dead: the next step opens another.
            if !multiplexed {
                close(ctx, vu.conn.take());
            }
        }
    }
}
