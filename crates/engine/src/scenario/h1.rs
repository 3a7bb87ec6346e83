//! What a step sent in HTTP/1.1 on the VU's keep-alive connection needs
//! (a `request:` and an `sse:` step alike): the request's bytes, and the
//! connection, opened when the VU has none.

use std::time::Instant;

use throng_metrics::{ErrorClass, SlowEnd};
use throng_plan::RequestHead;
use throng_scenario::Cookies;

use super::flight::InFlight;
use super::ops::{ReqOp, Scen, Vu};
use crate::conn::open_connection_to;
use crate::ctx::Ctx;
use crate::redirect::Place;
use crate::rows::RowGuard;

/// Where a request goes and its bytes: the head (with the jar's cookies
/// for `target`) and `body`.
pub(super) fn head(
    sc: &Scen,
    vu: &Vu,
    op: &ReqOp,
    target: String,
    headers: &[(String, String)],
    body: &[u8],
) -> (Place, Vec<u8>) {
    let base = &sc.base;
    let place = Place {
        https: base.https,
        host: base.host.clone(),
        port: base.port,
        target,
    };
    let cookie = if sc.def.cookies == Cookies::Off {
        None
    } else {
        vu.jar.header(place.https, &place.host, &place.target)
    };
    let mut bytes = RequestHead {
        method: &op.req.method,
        target: &place.target,
        authority: &sc.authority,
        headers: &crate::redirect::with_cookie(headers, cookie),
        body_len: body.len(),
        close: false,
    }
    .to_vec();
    bytes.extend_from_slice(body);
    (place, bytes)
}

/// The VU's keep-alive connection, opened when it has none (plain TCP
/// sends `bytes` with the connect): when the request started and how much
/// of it is out. Err: the connect failed in that class, recorded (the
/// caller ends `flight`).
pub(super) async fn connect(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    bytes: &[u8],
    sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    flight: &InFlight<'_>,
    row: &mut RowGuard<'_>,
) -> Result<(Instant, usize), ErrorClass> {
    if vu.conn.is_some() {
        return Ok((Instant::now(), 0));
    }
    let dest = sc.dest.own();
    // Plain TCP sends the request with the connect (see conn::connect).
    let first: &[u8] = if dest.tls.is_some() { &[] } else { bytes };
    // Boxed: the connect future is large and short-lived.
    let opening = open_connection_to(
        ctx,
        &dest.route,
        dest.tls.as_ref(),
        first,
        None,
        false,
        sleep,
        row.row(),
    );
    match Box::pin(opening).await {
        Ok(o) => {
            vu.conn = Some(o.conn);
            Ok((o.sent, o.written))
        }
        Err(class) => {
            let now = Instant::now();
            ctx.rec.borrow_mut().request_failed(now, class, 0);
            if let Some(r) = row.row() {
                r.failed(class);
            }
            flight.slow(now, SlowEnd::Error(class));
            Err(class)
        }
    }
}
