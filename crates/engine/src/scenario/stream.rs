//! A `request:` step in HTTP/2 or HTTP/3: a stream on the VU's own
//! connection of that protocol (`crate::proto::vu::Conns`), its redirects
//! followed (to another origin on a connection of their own).

use std::pin::{Pin, pin};
use std::time::Instant;

use bytes::Bytes;
use throng_metrics::ErrorClass;
use throng_plan::HttpVersion;
use throng_scenario::Cookies;
use tokio::time::Sleep;

use super::flight::{InFlight, answered, not_sent, unanswered};
use super::ops::{ReqOp, Scen, Vu};
use super::render::{Rendered, VuReads, vu_reads};
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::proto::session::Session;
use crate::proto::vu::dest::Dest;
use crate::proto::vu::{Hop, away_hop, stream_request, stream_session, stream_slot};
use crate::record::record_exchange;
use crate::redirect::Place;
use crate::rows::{Row, RowGuard};

/// One request in HTTP/2 or HTTP/3 (`http`: its own, else its target's):
/// on the VU's own connection of that protocol (opened, or opened again
/// when it was lost), as a stream. Its redirects to the target's origin
/// are followed on that connection; a hop to another origin goes on a
/// connection of its own ([`away_hop`]), kept for the request's next hops
/// there and closed at its end: the VU's own connections stay with its
/// target.
#[allow(clippy::too_many_arguments)]
pub(super) async fn request(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    op: &ReqOp,
    http: HttpVersion,
    origin: Option<Instant>,
    rendered: Rendered,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let dest = &*sc.dest;
    let jar = sc.def.cookies != Cookies::Off;
    let mut place = Place {
        https: sc.base.https,
        host: sc.base.host.clone(),
        port: sc.base.port,
        target: rendered.target,
    };
    // The target's origin: the hops there go on the VU's connection.
    let home = place.clone();
    let mut method = op.req.method.clone();
    let mut body = Bytes::from(rendered.body);
    let mut hops = 0u32;
    stream_session(&mut vu.session);
    vu.session.reset(op.keep);
    // The hops elsewhere: their connection, their responses.
    let mut other = crate::redirect::Elsewhere::new(ctx);
    let mut away: Option<Session> = None;
    let mut sleep = pin!(tokio::time::sleep(op.req.timeout));
    // When the first hop's request went (after any connect).
    let mut first_send: Option<Instant> = None;
    loop {
        let at_home = place.same_origin(&home);
        let cookie = if jar {
            vu.jar.header(place.https, &place.host, &place.target)
        } else {
            None
        };
        let mut headers =
            crate::redirect::hop_headers(&rendered.headers, at_home, hops == 0 || !body.is_empty(), cookie);
        // A hop: the iteration's trace, a span of its own.
        if let (true, Some(id), Some(t)) = (hops > 0, &vu.trace, &ctx.spec.trace) {
            t.restamp(&mut headers, id);
        }
        let hop = Hop {
            place: &place,
            method: &method,
            headers: &headers,
            body: &body,
            keep: op.keep,
            timeout: op.req.timeout,
        };
        let exchanged = if at_home {
            home_hop(ctx, dest, vu, http, &hop, sleep.as_mut(), row.row()).await
        } else {
            // Boxed: only a hop elsewhere makes this future large.
            Box::pin(away_hop(ctx, &mut other, &mut away, &hop, sleep.as_mut())).await
        };
        let (mut outcome, request_len, t_send) = match exchanged {
            Ok(e) => e,
            Err(class) => {
                other.close();
                if let Some(r) = row.row() {
                    r.redirects(hops);
                }
                return not_sent(ctx, op, flight, row, class);
            }
        };
        let first_send = *first_send.get_or_insert(t_send);
        // The session that read this response.
        let reply = match (at_home, away.as_ref()) {
            (false, Some(s)) => s,
            _ => &vu.session,
        };
        if let Ok(timing) = &outcome {
            if !at_home && !reply.reusable(timing) {
                other.close();
            }
            if jar {
                crate::redirect::store_cookies(&mut vu.jar, &place, reply.headers());
            }
            let status = reply.reply().status;
            if op.req.redirects > 0 && crate::redirect::is_redirect(status) {
                let location = reply
                    .headers()
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("location"))
                    .map(|(_, v)| v.as_str());
                let hop = match hops >= op.req.redirects {
                    true => Err(crate::redirect::TOO_MANY),
                    false => crate::redirect::next_hop(&place, &method, status, location),
                };
                match hop {
                    Ok(hop) => {
                        ctx.rec
                            .borrow_mut()
                            .redirected(timing.done, request_len as u64, reply.wire_bytes());
                        place = hop.place;
                        method = hop.method;
                        if !hop.body {
                            body = Bytes::new();
                        }
                        hops += 1;
                        continue;
                    }
                    Err(class) => {
                        outcome = Err(crate::conn::Failed {
                            class,
                            written: request_len,
                        });
                    }
                }
            }
        }
        other.close();
        if let Some(r) = row.row() {
            r.redirects(hops);
        }
        let session = match (at_home, away.as_mut()) {
            (false, Some(s)) => s,
            _ => &mut vu.session,
        };
        let sent = Sent {
            request_len,
            t_send,
            first_send,
            origin,
        };
        vu.answered = outcome.is_ok();
        vu.status = if vu.answered { session.reply().status } else { 0 };
        let reader = vu_reads!(sc, vu);
        return settle(ctx, op, reader, session, outcome, &sent, flight, row);
    }
}

/// A hop to the target's origin, as a stream on the VU's own connection
/// speaking `http` (opened when it has none, or opened again when it was
/// lost or is going away). The outcome, the request's size and when it
/// went; Err: it could not be sent, and why.
async fn home_hop(
    ctx: &Ctx,
    dest: &Dest,
    vu: &mut Vu,
    http: HttpVersion,
    hop: &Hop<'_>,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<(Result<Timing, Failed>, usize, Instant), ErrorClass> {
    // Lost or going away (GOAWAY): this step goes on a new one.
    vu.conns.drop_unusable(ctx, http, hop.timeout).await;
    if !vu.conns.has(http) {
        sleep.as_mut().reset((Instant::now() + hop.timeout).into());
        let conn = dest.conn_for(http);
        let id = vu
            .conns
            .open(ctx, http, conn, dest.quic.as_ref(), sleep.as_mut(), row.as_deref_mut())
            .await?;
        if let Some(r) = row {
            r.conn(id);
        }
    }
    let Some((request, request_len)) = stream_request(hop.method, hop.place, hop.headers, hop.body.len(), http) else {
        // A rendered value HTTP/2 cannot carry: never sent.
        return Err(ErrorClass::Protocol);
    };
    let t_send = Instant::now();
    sleep.as_mut().reset((t_send + hop.timeout).into());
    let Some(slot) = stream_slot(&mut vu.session) else {
        // Invariant: set by `request`.
        return Err(ErrorClass::Protocol);
    };
    let outcome = vu
        .conns
        .exchange(ctx, http, request, hop.body, request_len, slot, sleep)
        .await;
    Ok((outcome, request_len, t_send))
}

/// When a stream request's last hop went, and its size.
struct Sent {
    request_len: usize,
    t_send: Instant,
    /// When the first hop's request went (after any connect).
    first_send: Instant,
    /// Open models: its intended start.
    origin: Option<Instant>,
}

/// A stream request's end, over every hop: recorded, then answered
/// (captures, checks on the response `session` read) or not.
#[allow(clippy::too_many_arguments)]
fn settle(
    ctx: &Ctx,
    op: &ReqOp,
    vu: VuReads<'_>,
    session: &mut Session,
    outcome: Result<Timing, Failed>,
    sent: &Sent,
    flight: InFlight<'_>,
    mut row: RowGuard<'_>,
) {
    let expected = record_exchange(
        ctx,
        session,
        &outcome,
        sent.request_len,
        sent.t_send,
        sent.origin.unwrap_or(sent.first_send),
        &op.req.expect,
        false,
        row.row(),
    );
    drop(row);
    flight.settled(&outcome, session);
    match (outcome, expected) {
        (Ok(timing), Some(expected)) => answered(
            ctx,
            op,
            vu,
            session,
            flight,
            timing.done,
            timing.done - sent.first_send,
            expected,
        ),
        _ => unanswered(ctx, op, flight),
    }
}
