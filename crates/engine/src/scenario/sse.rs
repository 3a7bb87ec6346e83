//! A scenario's `sse:` step: a request whose response is read as an event
//! stream, as `throng http --sse` reads one ([`crate::proto::events`]),
//! on the VU's keep-alive connection (HTTP/1.1).
//!
//! ```text
//!  render ─► head + body ─► connect if needed ─► exchange_stream ─► Watch
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

use std::pin::pin;
use std::time::Instant;

use throng_metrics::ErrorClass;
use throng_plan::StreamSpec;
use throng_scenario::{Cookies, ResponseView, SseSpec};

use super::flight::{InFlight, captures_and_checks, unanswered};
use super::h1::{connect, head};
use super::ops::{ReqOp, Scen, Vu};
use super::render::{Rendered, vu_reads};
use crate::conn::{Failed, close};
use crate::ctx::Ctx;
use crate::proto::events::Watch;
use crate::record::record_exchange;
use crate::rows::RowGuard;

/// The step's stream as `--sse` flags would give it.
fn stream_spec(s: &SseSpec) -> StreamSpec {
    StreamSpec {
        llm: s.llm,
        events: s.events,
        duration: s.duration,
        slo: None,
    }
}

/// Runs one `sse:` step (rendered, its unit begun).
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
    let (place, bytes) = head(sc, vu, op, rendered.target, &rendered.headers, &rendered.body);
    let mut sleep = pin!(tokio::time::sleep(op.req.timeout));
    let (t_send, written) = match connect(ctx, sc, vu, &bytes, sleep.as_mut(), &flight, &mut row).await {
        Ok(sent) => sent,
        Err(class) => {
            // The stream that never got a connection ended too.
            let seen = throng_metrics::StreamSeen::default();
            ctx.rec.borrow_mut().stream_ended(&class.name(), &seen);
            unanswered(ctx, op, flight);
            return;
        }
    };
    let Some(c) = vu.conn.as_mut() else {
        return;
    };
    vu.session.own_connection(op.head);
    vu.session.reset(op.keep);
    let keep = !op.req.captures.is_empty() || !op.req.checks.is_empty();
    let mut watch = Box::new(Watch::new(&stream, origin.unwrap_or(t_send)).awaiting(s.expect.clone(), keep));
    let within = s.expect.as_ref().map(|e| t_send + e.within);
    let until = match (stream.duration.map(|d| t_send + d), within) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let stop = pin!(ctx.stop_notify.notified());
    let r = vu
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
            sleep.as_mut(),
            (&ctx.stopping, stop),
        )
        .await;
    let (outcome, early) = match r {
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
            Err(Failed {
                class,
                written: bytes.len(),
            })
        }
        other => other,
    };
    let expected = record_exchange(
        ctx,
        &mut vu.session,
        &outcome,
        bytes.len(),
        t_send,
        origin.unwrap_or(t_send),
        &op.req.expect,
        false,
        row.row(),
    );
    drop(row);
    crate::exchange::stream_ended(ctx, &watch, &stream, &outcome, expected, early, t_send);
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
            if !vu.session.reusable(&timing) {
                close(ctx, vu.conn.take());
            }
        }
        _ => {
            unanswered(ctx, op, flight);
            close(ctx, vu.conn.take());
        }
    }
}
