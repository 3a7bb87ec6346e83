//! A `request:` step: rendered, then sent in HTTP/1.1 on the VU's
//! keep-alive connection here, or as a stream on its HTTP/2 or HTTP/3
//! connection (`stream.rs`); recorded, its captures and checks.

use std::pin::pin;
use std::time::Instant;

use throng_metrics::{ErrorClass, Phase};
use throng_scenario::Cookies;

use super::flight::{InFlight, answered, begin, unanswered};
use super::h1::{connect, head};
use super::ops::{ReqOp, Scen, Vu, with_scen};
use super::render::{Rendered, for_step, vu_reads};
use super::stream;
use crate::conn::close;
use crate::ctx::Ctx;
use crate::record::record_exchange;
use crate::redirect::{Exchanged, Place};
use crate::rows::RowGuard;

/// One request of the flow: render, connect if needed, exchange, record,
/// capture, check.
pub(super) async fn request(ctx: &Ctx, sc: &Scen, vu: &mut Vu, op: &ReqOp, origin: Option<Instant>) {
    vu.answered = false;
    // An expression that failed: the step never begins.
    let Ok(rendered) = for_step(sc, vu, &op.req, ctx.spec.trace.as_ref()) else {
        return;
    };
    // Its own protocol, else its target's.
    let http = op.req.http.unwrap_or(sc.dest.http);
    // Its row: written when it drops, however the request ends.
    let (started, mut flight, mut row) = begin(ctx, sc, vu, &op.tags, &op.req.name);
    flight.traced(vu.trace, origin.unwrap_or(started), row.row());
    if let Some(r) = row.row() {
        if let Some(due) = origin {
            r.phase(Phase::ScheduleLag, started.saturating_duration_since(due));
        }
        if http.is_multiplexed() {
            if let Some(id) = vu.conns.id(http) {
                r.conn(id);
            }
        } else if let Some(c) = vu.conn.as_ref() {
            r.conn(c.id);
        }
    }
    let Some(rendered) = rendered else {
        // Never sent: counted `protocol`, a request throng could not frame.
        let now = Instant::now();
        ctx.rec.borrow_mut().request_failed(now, ErrorClass::Protocol, 0);
        if let Some(r) = row.row() {
            r.failed(ErrorClass::Protocol);
        }
        drop(row);
        flight.end(now, None, true);
        if !op.checks.is_empty() {
            with_scen(ctx, |r| op.checks.iter().for_each(|&i| r.check(i, false)));
        }
        return;
    };
    if let Some(s) = &op.req.sse {
        // Boxed: only sse: steps pay for the stream's future.
        return Box::pin(super::sse::request(ctx, sc, vu, op, s, origin, rendered, flight, row)).await;
    }
    if http.is_multiplexed() {
        // Boxed: HTTP/1.1 VUs keep their smaller future.
        return Box::pin(stream::request(ctx, sc, vu, op, http, origin, rendered, flight, row)).await;
    }
    http1(ctx, sc, vu, op, origin, rendered, flight, row).await;
}

/// A request in HTTP/1.1 on the VU's keep-alive connection (opened when it
/// has none; plain TCP sends the request with the connect), its redirects
/// followed; then [`settle`].
#[allow(clippy::too_many_arguments)]
async fn http1(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    origin: Option<Instant>,
    rendered: Rendered,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let (place, bytes) = head(sc, vu, op, rendered.target, &rendered.headers, &rendered.body);
    let mut sleep = pin!(tokio::time::sleep(op.req.timeout));
    let Ok((t_send, written)) = connect(ctx, sc, vu, &bytes, sleep.as_mut(), &flight, &mut row).await else {
        flight.end(Instant::now(), None, true);
        return;
    };
    let Some(c) = vu.conn.as_mut() else {
        return;
    };
    vu.session.own_connection(op.head);
    vu.session.reset(op.keep);
    sleep.as_mut().reset((t_send + op.req.timeout).into());
    let outcome = vu
        .session
        .exchange(
            &mut c.stream,
            &bytes,
            written,
            t_send,
            ctx.stamp,
            &ctx.scratch,
            sleep.as_mut(),
        )
        .await;
    let first = Exchanged {
        outcome,
        t_send,
        request_len: bytes.len(),
        hops: 0,
        elsewhere: false,
    };
    let jar = (sc.def.cookies != Cookies::Off).then_some(&mut vu.jar);
    let ex = if op.req.redirects > 0 {
        let req = crate::redirect::Request {
            place: &place,
            method: &op.req.method,
            headers: &rendered.headers,
            body: &rendered.body,
            close: false,
            limit: op.req.redirects,
            timeout: op.req.timeout,
            keep: op.keep,
            home: Some(sc.dest.own()),
            trace: vu.trace,
        };
        // Boxed: only a redirect makes this future large.
        Box::pin(crate::redirect::follow(
            ctx,
            &req,
            jar,
            &mut vu.session,
            &mut vu.conn,
            first,
            sleep,
        ))
        .await
    } else {
        first
    };
    if let Some(r) = row.row() {
        r.redirects(ex.hops);
    }
    settle(ctx, sc, vu, op, origin, &place, ex, t_send, flight, row);
}

/// An HTTP/1.1 request's end (`ex`, over every hop): recorded, then
/// answered (cookies stored, captures, checks) or not; the connection
/// closed when it cannot carry the next request.
#[allow(clippy::too_many_arguments)]
fn settle(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    origin: Option<Instant>,
    place: &Place,
    ex: Exchanged,
    t_send: Instant,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let expected = record_exchange(
        ctx,
        &mut vu.session,
        &ex.outcome,
        ex.request_len,
        ex.t_send,
        origin.unwrap_or(t_send),
        &op.req.expect,
        false,
        row.row(),
    );
    drop(row);
    vu.answered = ex.outcome.is_ok();
    vu.status = if vu.answered { vu.session.reply().status } else { 0 };
    flight.settled(&ex.outcome, &vu.session);
    let session = &vu.session;
    match (ex.outcome, expected) {
        (Ok(timing), Some(expected)) => {
            let done = timing.done;
            if sc.def.cookies != Cookies::Off && op.req.redirects == 0 {
                // Else `follow` stored them, from whichever origin answered.
                crate::redirect::store_cookies(&mut vu.jar, place, session.headers());
            }
            // Over every hop, from the first request's first byte.
            let reader = vu_reads!(sc, vu);
            answered(ctx, op, reader, session, flight, done, done - t_send, expected);
            if !ex.elsewhere && !session.reusable(&timing) {
                close(ctx, vu.conn.take());
            }
        }
        _ => {
            unanswered(ctx, op, flight);
            if !ex.elsewhere {
                close(ctx, vu.conn.take());
            }
        }
    }
}
