//! Redirects of an HTTP/3 request: hops on its connection, or on one of
//! their own to another origin.

use std::time::Instant;

use bytes::Bytes;
use throng_metrics::ErrorClass;

use super::send::timed;
use super::state::{Broke, ConnState, Done, Progress, Want};
use super::{H3Spec, Own, SendRequest};
use crate::ctx::Ctx;

/// A redirect chain's last exchange so far.
pub(super) struct Chain {
    pub(super) outcome: Result<Done, Broke>,
    pub(super) t_send: Instant,
    pub(super) request_len: u64,
    pub(super) hops: u32,
}

/// Follows the redirects of a request whose first exchange is `first`
/// (`request_len` its size), as crate::redirect::follow does for HTTP/1.1
/// (methods, bodies, credentials, limits; each hop counted in `redirects`
/// and given `--timeout`): a hop to the plan's origin is a stream of this
/// connection; one to another https origin goes on an HTTP/3 connection
/// of its own, kept for the chain and closed at its end; one to http://
/// cannot be HTTP/3 and is `redirect.scheme`. With `trace` (the request's
/// trace id), each hop carries that trace with a span id of its own.
#[allow(clippy::too_many_arguments)]
pub(super) async fn follow_h3(
    ctx: &Ctx,
    h3: &H3Spec,
    f: &crate::redirect::FollowSpec,
    send: &mut SendRequest,
    state: &ConnState,
    first: Result<Done, Broke>,
    request_len: u64,
    keep_server: bool,
    progress: &Progress,
    trace: Option<[u8; 16]>,
) -> Chain {
    let mut ex = Chain {
        outcome: first,
        t_send: Instant::now(),
        request_len,
        hops: 0,
    };
    let mut place = f.place.clone();
    let mut method = f.method.clone();
    let mut body = true;
    let mut other: Option<(crate::redirect::Place, Own)> = None;
    while let Ok(d) = &ex.outcome {
        if !crate::redirect::is_redirect(d.reply.status) {
            break;
        }
        let hop = match crate::mux::next_step(ex.hops, f.limit, &place, &method, d.reply.status, d.location.as_deref())
        {
            Ok(h) => h,
            Err(class) => {
                ex.outcome = Err((class, false));
                break;
            }
        };
        ctx.rec
            .borrow_mut()
            .redirected(d.done, ex.request_len, d.reply.header_bytes + d.reply.body_bytes);
        ex.hops += 1;
        ex.t_send = Instant::now();
        let same = hop.place.same_origin(&f.place);
        body &= hop.body;
        let mut headers = crate::redirect::hop_headers(&f.headers, same, body, None);
        // With trace context: the request's trace, a span of its own.
        if let (Some(id), Some(t)) = (&trace, &ctx.spec.trace) {
            t.restamp(&mut headers, id);
        }
        let hop_body = if body { f.body.clone() } else { Bytes::new() };
        let parts = match crate::mux::hop_parts(&hop.place, &hop.method, &headers, hop_body) {
            Ok(p) => p,
            Err(class) => {
                (ex.outcome, ex.request_len) = (Err((class, false)), 0);
                break;
            }
        };
        ex.request_len = parts.h3_len();
        ex.outcome = if same {
            let want = Want {
                server: keep_server,
                location: true,
                request_len: ex.request_len,
            };
            timed(
                ctx,
                send,
                state,
                parts.request(),
                &parts.body,
                want,
                progress,
                ex.t_send,
                None,
            )
            .await
        } else {
            // Another connection's failure leaves this one alive.
            elsewhere(
                ctx,
                h3,
                &mut other,
                &hop.place,
                &parts,
                keep_server,
                ex.t_send,
                progress,
            )
            .await
            .map_err(|class| (class, false))
        };
        place = hop.place;
        method = hop.method;
    }
    if let Some((_, own)) = other {
        own.close(ctx);
    }
    ex
}

/// A hop to another origin than the plan's, on `other` (opened, or opened
/// anew when it is to another origin or ended); what it wrote and read
/// goes into `progress`.
#[allow(clippy::too_many_arguments)]
async fn elsewhere(
    ctx: &Ctx,
    h3: &H3Spec,
    other: &mut Option<(crate::redirect::Place, Own)>,
    place: &crate::redirect::Place,
    parts: &crate::mux::Parts,
    keep_server: bool,
    t_send: Instant,
    progress: &Progress,
) -> Result<Done, ErrorClass> {
    progress.begin();
    if !place.https {
        return Err(crate::redirect::SCHEME);
    }
    if other
        .as_ref()
        .is_none_or(|(p, own)| !p.same_origin(place) || !own.alive())
    {
        if let Some((_, own)) = other.take() {
            own.close(ctx);
        }
        let d = crate::redirect::dest(ctx, place).await?;
        let addr = d.route.addrs.first().copied().ok_or(crate::redirect::BAD_LOCATION)?;
        let name = d
            .tls
            .as_ref()
            .map_or_else(|| place.host.clone(), |t| t.server_name.to_str().into_owned());
        let own = Own::open(ctx, &h3.client, &name, addr).await?;
        *other = Some((place.clone(), own));
    }
    let Some((_, own)) = other.as_mut() else {
        // Invariant: opened just above.
        return Err(ErrorClass::Protocol);
    };
    let mut slot = crate::proto::http2::Slot::new(parts.method == http::Method::HEAD);
    slot.reset(crate::proto::http1::Keep {
        server: keep_server,
        headers: true,
        body: 0,
    });
    let sleep = std::pin::pin!(tokio::time::sleep_until((t_send + ctx.spec.timeout).into()));
    let t = own
        .exchange(
            ctx,
            parts.request(),
            &parts.body,
            parts.h3_len() as usize,
            &mut slot,
            sleep,
        )
        .await
        .map_err(|f| {
            progress.written.set(f.written as u64);
            progress.read.set(slot.wire_bytes());
            f.class
        })?;
    let location = slot
        .headers()
        .iter()
        .find(|(n, _)| n == "location")
        .map(|(_, v)| v.clone());
    Ok(Done {
        began: None,
        sent: t.sent,
        first: t.first,
        done: t.done,
        kernel: t.kernel,
        reply: slot.reply(),
        server: slot.server.take(),
        location,
        early: None,
    })
}
