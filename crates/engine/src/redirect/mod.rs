//! Following redirects: where a 3xx points (I/O-free, tested below), and
//! the hops that go there, on the request's connection or, for another
//! origin, on one opened for them.
//!
//! ```text
//!  first exchange ─► 301/302/303/307/308 + Location ─► next_hop ─► hop request
//!        ▲                                                             │
//!        └──────── same origin: the request's connection ◄─────────────┤
//!                  another origin: a connection of its own ◄───────────┘
//! ```
//!
//! A request with its hops is one request: counted once, at its final
//! response, whose status is the one checked; `latency` spans every hop,
//! the other phases are the final exchange's. Each hop counts in
//! `redirects` with the bytes it moved.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, SlowEnd};
use throng_plan::RequestHead;
use throng_scenario::CookieJar;
use tokio::time::Sleep;

use crate::conn::{Conn, Failed, Timing, close, open_connection_to};
use crate::ctx::Ctx;
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::reach::Route;
use crate::transport::TlsClient;

pub(crate) mod place;

pub(crate) use place::{
    BAD_LOCATION, FollowSpec, Hop, Place, SCHEME, TOO_MANY, hop_headers, is_redirect, next_hop, store_cookies,
    with_cookie,
};

/// One request of an HTTP run that follows redirects, `request` on `conn`
/// (open; its first `written` bytes out since `t_send`): exchange, follow,
/// record the final response (in `row` too). With `trace` (the id its
/// traceparent carries), every hop carries that trace id with a span id of
/// its own. The request was counted started and in flight by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn one_followed(
    ctx: &Ctx,
    conn: &mut Option<Conn>,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    mut row: Option<&mut crate::rows::Row<'_>>,
    request: &[u8],
    trace: Option<[u8; 16]>,
) {
    let spec = &ctx.spec;
    let (Some(f), Some(c)) = (spec.follow.as_deref(), conn.as_mut()) else {
        // Invariant: called with a follow spec and an open connection.
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        return;
    };
    let keep_server = ctx.rec.borrow().wants_first_reply();
    let keep = Keep {
        server: keep_server,
        headers: true,
        body: 0,
    };
    session.reset(keep);
    sleep.as_mut().reset((t_send + spec.timeout).into());
    let outcome = session
        .exchange(
            &mut c.stream,
            request,
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
        request_len: request.len(),
        hops: 0,
        elsewhere: false,
    };
    let req = Request {
        place: &f.place,
        method: &f.method,
        headers: &f.headers,
        body: &f.body,
        close: !spec.keepalive,
        limit: f.limit,
        timeout: spec.timeout,
        keep,
        home: None,
        trace,
    };
    let ex = follow(ctx, &req, None, session, conn, first, sleep).await;
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    if let Some(r) = row.as_deref_mut() {
        r.redirects(ex.hops);
    }
    let recorded = crate::record::record_exchange(
        ctx,
        session,
        &ex.outcome,
        ex.request_len,
        ex.t_send,
        origin,
        &spec.expect,
        keep_server,
        row,
    );
    if let (Some(id), Some(t)) = (trace, &spec.trace) {
        let (end, how) = match &ex.outcome {
            Ok(t) => (t.done, SlowEnd::Status(session.reply().status)),
            Err(f) => (Instant::now(), SlowEnd::Error(f.class)),
        };
        t.offer(&mut ctx.rec.borrow_mut(), origin, end, how, id);
    }
    let keep_conn = match &ex.outcome {
        Ok(t) => recorded.is_some() && spec.keepalive && (ex.elsewhere || session.reusable(t)),
        Err(_) => ex.elsewhere,
    };
    if !keep_conn {
        close(ctx, conn.take());
    }
}

/// A request, for following its redirects.
pub(crate) struct Request<'a> {
    /// Where the first exchange went (the plan's target).
    pub place: &'a Place,
    pub method: &'a str,
    /// Its headers, without `Host` unless the user gave one, and without
    /// the jar's cookies.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// `Connection: close` on every hop.
    pub close: bool,
    /// Redirects it may follow.
    pub limit: u32,
    pub timeout: Duration,
    /// What the reader keeps of each response (headers at least).
    pub keep: Keep,
    /// How to reach `place`'s origin again (a scenario's own target);
    /// None: the plan's target.
    pub home: Option<&'a crate::targets::Dest>,
    /// `--trace-context`: the trace id its traceparent carries; each hop
    /// carries it too, with a span id of its own.
    pub trace: Option<[u8; 16]>,
}

/// An exchange: its outcome, when its first byte went, its size, and the
/// hops taken to it.
pub(crate) struct Exchanged {
    pub outcome: Result<Timing, Failed>,
    pub t_send: Instant,
    pub request_len: usize,
    pub hops: u32,
    /// It went over a connection to another origin (closed since): the
    /// response says nothing about the request's own connection.
    pub elsewhere: bool,
}

/// Follows the redirects of `req`, whose first exchange (on `conn`) is
/// `ex`, up to `req.limit`; returns the final exchange, whose response
/// `session` holds. Every response, the final one too, stores its cookies
/// in `jar`. Each hop has `req.timeout`.
pub(crate) async fn follow(
    ctx: &Ctx,
    req: &Request<'_>,
    mut jar: Option<&mut CookieJar>,
    session: &mut Session,
    conn: &mut Option<Conn>,
    mut ex: Exchanged,
    mut sleep: Pin<&mut Sleep>,
) -> Exchanged {
    let mut place = req.place.clone();
    let mut method = req.method.to_string();
    let mut body = true;
    // A connection to another origin.
    let mut other = Elsewhere::new(ctx);
    while let Ok(timing) = ex.outcome {
        if let Some(j) = jar.as_deref_mut() {
            store_cookies(j, &place, session.headers());
        }
        let status = session.reply().status;
        if req.limit == 0 || !is_redirect(status) {
            break;
        }
        let failed = |class| {
            Err(Failed {
                class,
                written: ex.request_len,
            })
        };
        if ex.hops >= req.limit {
            ex.outcome = failed(TOO_MANY);
            break;
        }
        let location = session
            .headers()
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.as_str());
        let hop = match next_hop(&place, &method, status, location) {
            Ok(h) => h,
            Err(class) => {
                ex.outcome = failed(class);
                break;
            }
        };
        ctx.rec
            .borrow_mut()
            .redirected(timing.done, ex.request_len as u64, session.wire_bytes());
        // The connection that carried it goes on only if it may.
        if req.close || !session.reusable(&timing) {
            if ex.elsewhere {
                other.close();
            } else {
                close(ctx, conn.take());
            }
        }
        let same = hop.place.same_origin(req.place);
        body &= hop.body;
        let cookie = jar
            .as_deref()
            .and_then(|j| j.header(hop.place.https, &hop.place.host, &hop.place.target));
        let mut headers = hop_headers(req.headers, same, body, cookie);
        if let (Some(id), Some(t)) = (&req.trace, &ctx.spec.trace) {
            t.restamp(&mut headers, id);
        }
        let hop_body: &[u8] = if body { req.body } else { &[] };
        let mut bytes = RequestHead {
            method: &hop.method,
            target: &hop.place.target,
            authority: &hop.place.authority(),
            headers: &headers,
            body_len: hop_body.len(),
            close: req.close,
        }
        .to_vec();
        bytes.extend_from_slice(hop_body);
        let hops = ex.hops + 1;
        let broke = |class, t_send| Exchanged {
            outcome: Err(Failed { class, written: 0 }),
            t_send,
            request_len: bytes.len(),
            hops,
            elsewhere: !same,
        };
        let slot = if same { &mut *conn } else { other.slot(&hop.place) };
        let head = hop.method.eq_ignore_ascii_case("HEAD");
        if session.head_request() != head {
            *session = Session::new(head);
        }
        session.reset(req.keep);
        let via = match (same, req.home) {
            (false, _) => Via::Elsewhere(&hop.place),
            (true, Some(h)) => Via::Home(&h.route, h.tls.as_ref()),
            (true, None) => Via::Home(&ctx.spec.route, ctx.spec.tls.as_ref()),
        };
        let (outcome, t_send) = match hop_exchange(ctx, slot, via, &bytes, session, req.timeout, sleep.as_mut()).await {
            Ok(done) => done,
            Err(class) => {
                ex = broke(class, Instant::now());
                break;
            }
        };
        ex = Exchanged {
            outcome,
            t_send,
            request_len: bytes.len(),
            hops,
            elsewhere: !same,
        };
        place = hop.place;
        method = hop.method;
    }
    other.close();
    ex
}

/// The connection of a request's hops to another origin than its first:
/// opened for the first such hop, kept for the next while they go to the
/// same origin, closed (and recorded) when they leave it and when the
/// request ends, however it ends (a request cut off mid-hop drops it).
pub(crate) struct Elsewhere<'a> {
    ctx: &'a Ctx,
    /// HTTP/1.1.
    pub(crate) conn: Option<Conn>,
    /// HTTP/2 (a scenario step's hop to an https origin that chose h2).
    pub(crate) h2: Option<crate::proto::http2::Own>,
    /// Where they go.
    place: Option<Place>,
}

impl<'a> Elsewhere<'a> {
    pub(crate) fn new(ctx: &'a Ctx) -> Self {
        Elsewhere {
            ctx,
            conn: None,
            h2: None,
            place: None,
        }
    }

    /// Readies it for a hop to `place`: the connection of the last hop
    /// elsewhere stays when it went to the same origin; else it is closed.
    pub(crate) fn go(&mut self, place: &Place) {
        if self.place.as_ref().is_none_or(|p| !p.same_origin(place)) {
            self.close();
        }
        self.place = Some(place.clone());
    }

    /// The HTTP/1.1 slot of a hop to `place` (see [`Elsewhere::go`]).
    pub(crate) fn slot(&mut self, place: &Place) -> &mut Option<Conn> {
        self.go(place);
        &mut self.conn
    }

    /// Closes the connection, if there is one.
    pub(crate) fn close(&mut self) {
        close(self.ctx, self.conn.take());
        if let Some(own) = self.h2.take() {
            own.close(self.ctx);
        }
    }
}

impl Drop for Elsewhere<'_> {
    fn drop(&mut self) {
        self.close();
    }
}

/// Where a hop's connection goes when it has none open.
pub(crate) enum Via<'a> {
    /// The first request's origin, by its route and TLS client.
    Home(&'a Route, Option<&'a TlsClient>),
    /// Another origin: straight to its address (see [`dest`]).
    Elsewhere(&'a Place),
}

/// A hop's HTTP/1.1 request `bytes` on the connection in `slot`, opened
/// first `via` when there is none; its response read into `session` (reset
/// by the caller) within `timeout` of the request's first byte. The
/// outcome and when the request went; Err: no connection, and why.
pub(crate) async fn hop_exchange(
    ctx: &Ctx,
    slot: &mut Option<Conn>,
    via: Via<'_>,
    bytes: &[u8],
    session: &mut Session,
    timeout: Duration,
    mut sleep: Pin<&mut Sleep>,
) -> Result<(Result<Timing, Failed>, Instant), ErrorClass> {
    let (t_send, written) = match slot {
        Some(_) => (Instant::now(), 0),
        None => {
            let elsewhere;
            let (route, tls_client) = match via {
                Via::Home(route, tls) => (route, tls),
                Via::Elsewhere(place) => {
                    elsewhere = dest(ctx, place).await?;
                    (&elsewhere.route, elsewhere.tls.as_ref())
                }
            };
            let tls = tls_client.is_some();
            // Plain TCP sends the request with the connect (see conn::connect).
            let first: &[u8] = if tls { &[] } else { bytes };
            let opened = Box::pin(open_connection_to(
                ctx,
                route,
                tls_client,
                first,
                None,
                false,
                sleep.as_mut(),
                None,
            ))
            .await?;
            *slot = Some(opened.conn);
            (opened.sent, opened.written)
        }
    };
    let Some(c) = slot.as_mut() else {
        // Invariant: the slot was filled just above.
        return Err(ErrorClass::Protocol);
    };
    sleep.as_mut().reset((t_send + timeout).into());
    let outcome = session
        .exchange(
            &mut c.stream,
            bytes,
            written,
            t_send,
            ctx.stamp,
            &ctx.scratch,
            sleep.as_mut(),
        )
        .await;
    Ok((outcome, t_send))
}

/// Somewhere other than the plan's target (a redirect to another origin):
/// its addresses, with the run's `--connect-to`, `--resolve` and `-4`/`-6`
/// (not through the run's proxy).
pub(crate) struct Dest {
    pub(crate) route: Route,
    /// The plan's TLS client config with the origin's server name, or None: plain TCP.
    pub(crate) tls: Option<TlsClient>,
}

/// Where to connect for another origin: its addresses (address literals,
/// else names resolved within the timeout; a name that does not resolve
/// is a bad location), by the run's overrides and address family, and the
/// TLS server name (the origin's host, whatever the overrides say).
pub(crate) async fn dest(ctx: &Ctx, place: &Place) -> Result<Dest, ErrorClass> {
    if place.https && ctx.spec.tls.is_none() {
        return Err(SCHEME);
    }
    let reach = &ctx.spec.reach;
    let over = reach.override_for(&place.host, place.port);
    let port = over.and_then(|o| o.to_port).unwrap_or(place.port);
    let hosts: Vec<&str> = match over {
        Some(o) if !o.to.is_empty() => o.to.iter().map(String::as_str).collect(),
        _ => vec![place.host.as_str()],
    };
    let mut addrs = Vec::new();
    for host in hosts {
        match host.parse::<IpAddr>() {
            Ok(ip) => addrs.push(SocketAddr::new(ip, port)),
            Err(_) => {
                let lookup = tokio::net::lookup_host((host, port));
                match tokio::time::timeout(ctx.spec.timeout, lookup).await {
                    Ok(Ok(found)) => addrs.extend(found),
                    Ok(Err(_)) => {}
                    Err(_) => return Err(ErrorClass::TimeoutConnect),
                }
            }
        }
    }
    let mut addrs = crate::reach::of_family(addrs, reach.family);
    // As many as a target keeps (crate::reach), in the resolver's order.
    addrs.dedup();
    addrs.truncate(crate::reach::MAX_ADDRS);
    if addrs.is_empty() {
        return Err(BAD_LOCATION);
    }
    let tls = match (&ctx.spec.tls, place.https) {
        (Some(t), true) => Some(TlsClient {
            config: std::sync::Arc::clone(&t.config),
            server_name: throng_tls::rustls::pki_types::ServerName::try_from(place.host.clone())
                .map_err(|_| BAD_LOCATION)?,
        }),
        _ => None,
    };
    let route = Route {
        addrs,
        tunnel: None,
        proxied: false,
    };
    Ok(Dest { route, tls })
}
