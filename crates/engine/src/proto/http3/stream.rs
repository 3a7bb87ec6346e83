//! One request on its own stream: sent, its response read, recorded.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use throng_metrics::{ErrorClass, Phase};

use super::redirect::follow_h3;
use super::send::timed;
use super::sse::Tap;
use super::state::{Broke, ConnState, Done, Progress, Want};
use super::{H3Spec, SendRequest};
use crate::ctx::Ctx;
use crate::targets::Cursor;

/// One request on its own stream, recorded; latency from `intended` when
/// scheduled. `cursor`: the connection slot's place in the plan's several
/// requests; None for the request of a storm connection, whose row is the
/// connection's (none of its own here), with latency from the connection's
/// start. With `--redirects`, a redirect is followed (see [`follow`]) and
/// the chain is the one request. Ok when a response came (whatever its
/// status); Err(true) when the connection failed (no later request can
/// use it), Err(false) when only this request did.
pub(super) async fn exchange(
    ctx: &Ctx,
    h3: &H3Spec,
    send: &mut SendRequest,
    state: &ConnState,
    intended: Option<Instant>,
    cursor: Option<&Rc<RefCell<Cursor>>>,
) -> Result<(), bool> {
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    // The next of the plan's several requests (on this connection's origin).
    let entry = match (ctx.pick.as_ref(), cursor) {
        (Some(p), Some(c)) => {
            let i = p.next(&mut c.borrow_mut());
            p.started(i);
            Some((p, i))
        }
        _ => None,
    };
    let t_first = Instant::now();
    let mut row = if cursor.is_none() {
        crate::rows::RowGuard::new(None, ctx.spec.origin, t_first)
    } else {
        ctx.row(t_first)
    };
    if let (Some(r), Some(i)) = (row.row(), intended) {
        r.phase(Phase::ScheduleLag, t_first.saturating_duration_since(i));
    }
    let keep_server = ctx.rec.borrow().wants_first_reply();
    let follow = ctx.spec.follow.as_deref().filter(|f| f.limit > 0 && cursor.is_some());
    let request = match entry {
        // Every entry converted before the run (crate::mux::check_table).
        Some((p, i)) => match crate::mux::parts_of(&p.request_shared(i), true) {
            Ok(parts) => Ok((parts.request(), parts.body.clone(), parts.h3_len())),
            Err(_) => Err((ErrorClass::Protocol, false)),
        },
        None => Ok((h3.request(), h3.body.clone(), h3.request_len)),
    };
    // With trace context, this request's ids: its traceparent (over the
    // plan's placeholder; QPACK sends it as a literal, never indexed).
    let ids = ctx.spec.trace.as_ref().map(crate::trace::Tracer::ids);
    if let (Some((id, _)), Some(r)) = (&ids, row.row()) {
        r.trace(*id);
    }
    let mut request_len = 0;
    let progress = Progress::default();
    // A load run's event stream (a storm's request reads none).
    let mut tap = cursor.and_then(|_| Tap::of(ctx, intended.unwrap_or(t_first)));
    let mut done = match request {
        Ok((mut request, body, len)) => {
            set_traceparent(ctx, &mut request, ids.as_ref());
            request_len = len;
            let want = Want {
                server: keep_server,
                location: follow.is_some(),
                request_len: len,
            };
            let tap = tap.as_mut();
            timed(ctx, send, state, request, &body, want, &progress, t_first, tap).await
        }
        Err(broke) => Err(broke),
    };
    let mut t_send = t_first;
    if let Some(f) = follow
        && matches!(&done, Ok(d) if crate::redirect::is_redirect(d.reply.status))
    {
        let chain = Box::pin(follow_h3(
            ctx,
            h3,
            f,
            send,
            state,
            done,
            request_len,
            keep_server,
            &progress,
            ids.map(|(id, _)| id),
        ))
        .await;
        if let Some(r) = row.row() {
            r.redirects(chain.hops);
        }
        (done, t_send, request_len) = (chain.outcome, chain.t_send, chain.request_len);
    }
    // The request's first byte as the socket sent it, when known.
    if let Ok(Done { began: Some(b), .. }) = &done {
        t_send = *b;
    }
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    offer_slowest(ctx, ids.map(|(id, _)| id), intended.unwrap_or(t_first), &done);
    if let Some(tap) = &tap {
        let ok = done.as_ref().ok().map(|d| ctx.spec.expect.contains(d.reply.status));
        tap.ended(ctx, &done, ok, t_send);
    }
    let mut rec = ctx.rec.borrow_mut();
    match done {
        Ok(d) => {
            ctx.count_stamp(d.kernel);
            let origin = intended.unwrap_or(t_first);
            rec.sent(d.sent, request_len);
            let phases = [
                (Phase::Send, d.sent.saturating_duration_since(t_send)),
                (Phase::Wait, d.first.saturating_duration_since(d.sent)),
                (Phase::Receive, d.done.saturating_duration_since(d.first)),
                (Phase::Response, d.done.saturating_duration_since(t_send)),
                (Phase::Latency, d.done.saturating_duration_since(origin)),
            ];
            for (p, v) in phases {
                rec.phase(d.done, p, v);
            }
            if keep_server {
                rec.first_reply(d.reply, d.server);
            }
            let wire = d.reply.header_bytes + d.reply.body_bytes;
            let ok = ctx.spec.expect.contains(d.reply.status);
            if ok {
                rec.request_ok(d.done, d.reply, wire);
            } else {
                rec.request_rejected(d.done, d.reply, wire);
            }
            drop(rec);
            if let Some((p, i)) = entry {
                let response = Some((d.done.saturating_duration_since(t_send), ok));
                p.ended(&ctx.scenario, i, Instant::now(), response);
            }
            if let Some(r) = row.row() {
                for (p, v) in phases {
                    r.phase(p, v);
                }
                r.reply(d.reply.status, request_len, wire);
                if ok {
                    r.ok();
                } else {
                    r.failed(ErrorClass::CheckFailed);
                }
            }
            Ok(())
        }
        Err((class, connection)) => {
            drop(rec);
            failed(ctx, class, &progress, entry, &mut row);
            Err(connection)
        }
    }
}

/// Records a request that failed with `class`: what went out and came back
/// counts, whatever the outcome.
fn failed(
    ctx: &Ctx,
    class: ErrorClass,
    progress: &Progress,
    entry: Option<(&crate::targets::Pick, usize)>,
    row: &mut crate::rows::RowGuard<'_>,
) {
    let now = Instant::now();
    let (written, read) = (progress.written.get(), progress.read.get());
    {
        let mut rec = ctx.rec.borrow_mut();
        rec.sent(now, written);
        rec.request_failed(now, class, read);
    }
    if let Some((p, i)) = entry {
        p.ended(&ctx.scenario, i, now, None);
    }
    if let Some(r) = row.row() {
        r.reply(0, written, read);
        r.failed(class);
    }
}

/// With trace context, sets `request`'s traceparent (over the plan's
/// placeholder) to one with `ids`.
fn set_traceparent(ctx: &Ctx, request: &mut http::Request<()>, ids: Option<&([u8; 16], [u8; 8])>) {
    if let (Some(t), Some((id, parent))) = (&ctx.spec.trace, ids) {
        let value = throng_plan::traceparent_value(id, parent, t.flags());
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            request
                .headers_mut()
                .insert(http::HeaderName::from_static(throng_plan::TRACEPARENT), v);
        }
    }
}

/// A traced request (trace id `id`) that started at `origin` ended with
/// `done`: offered to the worker's slowest.
fn offer_slowest(ctx: &Ctx, id: Option<[u8; 16]>, origin: Instant, done: &Result<Done, Broke>) {
    if let (Some(t), Some(id)) = (&ctx.spec.trace, id) {
        let (end, how) = match done {
            Ok(d) => (d.done, throng_metrics::SlowEnd::Status(d.reply.status)),
            Err((class, _)) => (Instant::now(), throng_metrics::SlowEnd::Error(*class)),
        };
        t.offer(&mut ctx.rec.borrow_mut(), origin, end, how, id);
    }
}
