//! HTTP/3 over QUIC (quinn + h3): a connection carries up to `streams`
//! requests at once, each on its own bidirectional stream.
//!
//! ```text
//!  closed loop: one task per connection
//!     │ open: UDP socket (its own quinn Endpoint) ─► QUIC handshake ─► h3 SETTINGS
//!     │       recorded as the `tls` phase (QUIC's handshake is TLS 1.3's)
//!     ├─ h3 driver (control streams, GOAWAY, close)
//!     └─ `streams` stream tasks, each request after request:
//!          send headers (+ body), finish ─► wait ─► response head ─► body
//!          └─ record: send / wait / receive / response / latency, ok or h3.* / quic.*
//! ```
//!
//! A stream reset fails its request only; a connection error (close, idle
//! timeout, stateless reset) fails every request in flight on it, and the
//! loop opens a new connection for the next. Every request taken from the
//! budget ends in exactly one outcome.

use std::cell::{Cell, RefCell};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use throng_metrics::{ErrorClass, Handshake, Phase, Reply};
use throng_plan::HttpPlan;

use crate::ctx::{Ctx, TaskGuard};
use crate::targets::Cursor;

/// The largest response header section accepted (decoded), as HTTP/1.1's
/// 64 KiB head limit: a larger one is `h3.header_too_big`.
const MAX_HEADER_SECTION: u64 = 64 * 1024;

/// The code a connection is closed with when done (RFC 9114 8.1).
const H3_NO_ERROR: u32 = 0x100;

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// What every HTTP/3 connection of a run needs: the QUIC client
/// configuration and the request, made once.
pub(crate) struct H3Spec {
    pub client: quinn::ClientConfig,
    pub server_name: String,
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The request's size as counted in `sent`: its header fields decoded
    /// (name, value and 4 bytes each, pseudo-headers included, as
    /// received headers are counted) and its body. QPACK's wire size is
    /// not known.
    pub request_len: u64,
    /// Requests in flight per connection, at most (the server's
    /// MAX_STREAMS may allow fewer: opening a stream then waits).
    pub streams: u32,
}

impl std::fmt::Debug for H3Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3Spec")
            .field("server_name", &self.server_name)
            .field("uri", &self.uri)
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
}

/// Headers HTTP/3 forbids (connection-specific) or carries as pseudo-headers.
const NOT_IN_H3: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The QUIC client of `tls` (its ALPN becomes `h3`), or why it cannot be
/// one.
pub(crate) fn quic_client(tls: &throng_tls::rustls::ClientConfig) -> Result<quinn::ClientConfig, String> {
    // quinn accepts a configuration without TLS 1.3 here and panics on the
    // first connection: plans refuse TLS 1.2 with HTTP/3.
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = false;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| format!("the TLS settings cannot carry QUIC ({e}); QUIC needs TLS 1.3"))?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// The parts of a request an [`H3Spec`] is made from.
struct Head<'a> {
    method: &'a str,
    authority: String,
    path: &'a str,
    /// For messages.
    url: &'a str,
    headers: &'a [(String, String)],
}

impl H3Spec {
    /// The HTTP/3 form of `plan`'s request, sent with `tls` (its ALPN
    /// becomes `h3`; QUIC needs TLS 1.3).
    pub(crate) fn new(
        plan: &HttpPlan,
        tls: &throng_tls::rustls::ClientConfig,
        server_name: String,
        streams: u32,
    ) -> Result<H3Spec, String> {
        let head = Head {
            method: &plan.method,
            authority: plan.target.authority(),
            path: &plan.target.path,
            url: &plan.target.url,
            headers: &plan.headers,
        };
        H3Spec::build(tls, server_name, &head, plan.body.clone(), streams)
    }

    /// A storm's: each connection makes at most the plan's one request
    /// (`GET /` when it names none), without headers or body.
    pub(crate) fn for_storm(
        plan: &throng_plan::StormPlan,
        tls: &throng_tls::rustls::ClientConfig,
    ) -> Result<H3Spec, String> {
        let (method, path) = plan
            .request
            .as_ref()
            .map_or(("GET", "/"), |r| (r.method.as_str(), r.path.as_str()));
        let server_name = plan
            .tls
            .as_ref()
            .and_then(|t| t.server_name.clone())
            .unwrap_or_else(|| plan.target.host.clone());
        let head = Head {
            method,
            authority: throng_plan::Authority::new(&plan.target.host, plan.target.port, 443).to_string(),
            path,
            url: &plan.target.url,
            headers: &[],
        };
        H3Spec::build(tls, server_name, &head, Bytes::new(), 1)
    }

    fn build(
        tls: &throng_tls::rustls::ClientConfig,
        server_name: String,
        head: &Head<'_>,
        body: Bytes,
        streams: u32,
    ) -> Result<H3Spec, String> {
        let client = quic_client(tls).map_err(|e| format!("--http3: {e}"))?;
        let method = http::Method::from_bytes(head.method.as_bytes())
            .map_err(|_| format!("--method '{}' is not an HTTP method", head.method))?;
        let uri = http::Uri::builder()
            .scheme("https")
            .authority(head.authority.as_str())
            .path_and_query(head.path)
            .build()
            .map_err(|e| format!("'{}' cannot be an HTTP/3 request target ({e})", head.url))?;
        let mut headers = http::HeaderMap::new();
        let ua = concat!("throng/", env!("CARGO_PKG_VERSION"));
        headers.insert(http::header::USER_AGENT, http::HeaderValue::from_static(ua));
        for (name, value) in head.headers {
            let lower = name.to_ascii_lowercase();
            if NOT_IN_H3.contains(&lower.as_str()) {
                continue;
            }
            let name = http::HeaderName::from_bytes(lower.as_bytes())
                .map_err(|_| format!("--header '{name}': not a header name HTTP/3 can carry"))?;
            let value = http::HeaderValue::from_str(value)
                .map_err(|_| format!("--header '{name}': its value cannot be sent"))?;
            headers.append(name, value);
        }
        if !body.is_empty() && !headers.contains_key(http::header::CONTENT_LENGTH) {
            headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body.len()));
        }
        let pseudo = [
            (":method", method.as_str().len()),
            (":scheme", 5),
            (":authority", uri.authority().map_or(0, |a| a.as_str().len())),
            (":path", uri.path_and_query().map_or(1, |p| p.as_str().len())),
        ];
        let request_len = pseudo.iter().map(|(n, v)| n.len() + v + 4).sum::<usize>()
            + headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>()
            + body.len();
        Ok(H3Spec {
            request_len: request_len as u64,
            client,
            server_name,
            method,
            uri,
            headers,
            body,
            streams: streams.max(1),
        })
    }

    fn request(&self) -> http::Request<()> {
        let mut req = http::Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Where a connection's request loops get their next request: the closed
/// loop's budget, or the open loop's schedule.
pub(crate) trait Starts {
    /// A new identity for one request loop (its idle slot in an open loop).
    fn slot(&self) -> usize {
        0
    }
    /// The next request to make, with its intended start when it has one
    /// (open loop: latency counts from there); None: no more for this loop.
    async fn next(&self, slot: usize) -> Option<Option<Instant>>;
    /// The request loop `slot` stopped waiting in [`Starts::next`] (its
    /// connection died meanwhile): forget it as idle.
    fn cancel(&self, _slot: usize) {}
    /// A connection slot's task ends.
    fn done(&self) {}
}

/// One connection slot (`-c` of them): take a request, connect, run
/// `streams` request loops on the connection until it dies, the requests
/// end or the run stops; then again while there are requests.
/// With `warm` (an open loop's first connections), it connects before the
/// schedule starts, so that the first starts find it ready.
pub(crate) async fn connection_slot<S: Starts + 'static>(guard: TaskGuard, starts: Rc<S>, h3: Arc<H3Spec>, warm: bool) {
    let ctx = &guard.0;
    let loops = if ctx.spec.keepalive { h3.streams } else { 1 };
    // One idle slot per request loop, kept across reconnects.
    let slots: Rc<[usize]> = (0..loops).map(|_| starts.slot()).collect();
    // The slot's place in the plan's several requests, and with targets on
    // several origins the one its connections serve (as HTTP/1.1's).
    let cursor = Rc::new(RefCell::new(Cursor::default()));
    let to = {
        let mut c = cursor.borrow_mut();
        match ctx.pick.as_ref().and_then(|p| p.dest(&mut c)) {
            Some(d) => To {
                addr: d.route.addrs.first().copied().unwrap_or_else(|| target_addr(ctx)),
                server_name: d
                    .tls
                    .as_ref()
                    .map_or_else(|| h3.server_name.clone(), |t| t.server_name.to_str().into_owned()),
            },
            None => To {
                addr: target_addr(ctx),
                server_name: h3.server_name.clone(),
            },
        }
    };
    let opened = Instant::now();
    if warm && let Ok((quic, driver, send)) = open_to(ctx, &h3.client, &to.server_name, to.addr, h3.streams).await {
        run_connection(ctx, &starts, &h3, driver, send, &slots, None, &cursor).await;
        quic.close(H3_NO_ERROR.into(), b"");
        let now = Instant::now();
        ctx.rec.borrow_mut().connection_closed(now, now - opened);
    }
    while !ctx.stopping.get() {
        let Some(intended) = starts.next(slots[0]).await else {
            break;
        };
        let opened = Instant::now();
        match open_to(ctx, &h3.client, &to.server_name, to.addr, h3.streams).await {
            Ok((quic, driver, send)) => {
                run_connection(ctx, &starts, &h3, driver, send, &slots, Some(intended), &cursor).await;
                quic.close(H3_NO_ERROR.into(), b"");
                let now = Instant::now();
                ctx.rec.borrow_mut().connection_closed(now, now - opened);
            }
            Err(class) => {
                // The request taken fails with its connection.
                {
                    let mut rec = ctx.rec.borrow_mut();
                    rec.request_started();
                    rec.request_failed(Instant::now(), class, 0);
                }
                if let Some(r) = ctx.row(opened).row() {
                    if let Some(i) = intended {
                        r.phase(Phase::ScheduleLag, opened.saturating_duration_since(i));
                    }
                    r.failed(class);
                }
                tokio::task::coop::consume_budget().await;
            }
        }
    }
    starts.done();
}

type Driver = h3::client::Connection<h3_quinn::Connection, Bytes>;

/// Where a connection slot's connections go.
struct To {
    addr: SocketAddr,
    server_name: String,
}

/// The worker's QUIC endpoint (one UDP socket for all its connections),
/// made at the first connection. One socket per connection would cost a
/// receive buffer each (quinn sizes it for GRO batches, over half a MB),
/// kept until the closed connection has drained.
fn endpoint(ctx: &Ctx, to: SocketAddr) -> Result<quinn::Endpoint, ErrorClass> {
    if let Some(e) = ctx.quic.borrow().as_ref() {
        return Ok(e.clone());
    }
    let bind: SocketAddr = if to.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let e = quinn::Endpoint::client(bind).map_err(|e| crate::errors::classify(&e, crate::errors::Stage::Connect))?;
    *ctx.quic.borrow_mut() = Some(e.clone());
    Ok(e)
}

/// Where QUIC goes: the route's first address (after -4/-6,
/// --connect-to, --resolve; a plan through a proxy is refused for HTTP/3).
fn target_addr(ctx: &Ctx) -> SocketAddr {
    // Invariant: a route has at least one address (an empty resolution is
    // refused before the run); the fallback only keeps this total.
    ctx.spec
        .route
        .addrs
        .first()
        .copied()
        .unwrap_or((Ipv4Addr::LOCALHOST, 0).into())
}

/// Opens a QUIC connection and its HTTP/3 session, recording the attempt,
/// its `tls` sample (the QUIC handshake) and its outcome.
async fn open(ctx: &Ctx, h3: &H3Spec) -> Result<(quinn::Connection, Driver, SendRequest), ErrorClass> {
    open_to(ctx, &h3.client, &h3.server_name, target_addr(ctx), h3.streams).await
}

/// [`open`] to `addr` with `client` (its ALPN `h3`) and `server_name`;
/// `streams`: the requests it may carry at once, for the report.
async fn open_to(
    ctx: &Ctx,
    client: &quinn::ClientConfig,
    server_name: &str,
    addr: SocketAddr,
    streams: u32,
) -> Result<(quinn::Connection, Driver, SendRequest), ErrorClass> {
    let spec = &ctx.spec;
    let started = Instant::now();
    ctx.rec.borrow_mut().connection_started(started, false);
    ctx.connecting.set(ctx.connecting.get() + 1);
    let result = async {
        let endpoint = endpoint(ctx, addr)?;
        let connecting = endpoint
            .connect_with(client.clone(), addr, server_name)
            .map_err(|_| ErrorClass::Quic("connect_error"))?;
        let deadline = started + spec.timeout;
        let quic = match tokio::time::timeout_at(deadline.into(), connecting).await {
            Err(_) => return Err(ErrorClass::Quic("handshake_timeout")),
            Ok(Err(e)) => return Err(connection_class(&e, true)),
            Ok(Ok(c)) => c,
        };
        let handshake = Instant::now();
        let (driver, send) = match tokio::time::timeout_at(
            deadline.into(),
            h3::client::builder()
                .max_field_section_size(MAX_HEADER_SECTION)
                .build(h3_quinn::Connection::new(quic.clone())),
        )
        .await
        {
            Err(_) => return Err(ErrorClass::Quic("handshake_timeout")),
            Ok(Err(e)) => return Err(h3_connection_class(&e)),
            Ok(Ok(pair)) => pair,
        };
        Ok((quic, driver, send, handshake))
    }
    .await;
    ctx.connecting.set(ctx.connecting.get() - 1);
    let mut rec = ctx.rec.borrow_mut();
    match result {
        Ok((quic, driver, send, handshake)) => {
            // QUIC carries TLS 1.3 (RFC 9001); quinn does not say which
            // group and suite were chosen.
            let h = Handshake {
                version: "TLSv1_3",
                group: "",
                cipher: "",
                resumed: false,
                hello_retry: false,
            };
            rec.tls_handshake(handshake, handshake - started, h);
            rec.connection_established(handshake, false);
            // quinn does not tell the peer's MAX_STREAMS: opening a stream
            // past it waits, so the peak per connection shows the cap.
            rec.mux_connection("h3", u64::from(streams), None);
            Ok((quic, driver, send))
        }
        Err(class) => {
            rec.connection_failed(Instant::now(), class, false);
            Err(class)
        }
    }
}

/// A storm's HTTP/3 connection: QUIC handshake and HTTP/3 session done,
/// its request (if any) answered, held until the storm closes it.
pub(crate) struct Held {
    quic: quinn::Connection,
    driver: Driver,
    /// Kept while held: h3 closes the connection once every request
    /// handle is gone.
    _send: SendRequest,
    opened: Instant,
    carried: u64,
}

/// Storm: opens a QUIC connection and its HTTP/3 session (recorded as the
/// `tls` phase, as for `throng http --http3`), then makes the plan's
/// request (if any) as one stream, its latency from `origin`. Like
/// storm::establish: Err(Some(class)) when the connection failed,
/// Err(None) when the request did (both recorded).
pub(crate) async fn storm_establish(
    ctx: &Ctx,
    h3: &H3Spec,
    with_request: bool,
    origin: Instant,
    row: Option<&mut crate::rows::Row<'_>>,
) -> Result<(Held, Instant), Option<ErrorClass>> {
    let opened = Instant::now();
    let (quic, driver, mut send) = match open(ctx, h3).await {
        Ok(c) => c,
        Err(class) => {
            if let Some(r) = row {
                r.failed(class);
            }
            if with_request {
                let mut rec = ctx.rec.borrow_mut();
                rec.request_started();
                rec.request_failed(Instant::now(), class, 0);
            }
            return Err(Some(class));
        }
    };
    let ready = Instant::now();
    if let Some(r) = row {
        r.ok();
    }
    let mut held = Held {
        quic,
        driver,
        _send: send.clone(),
        opened,
        carried: 0,
    };
    if with_request {
        let state = ConnState::default();
        let outcome = {
            let mut request = std::pin::pin!(exchange(ctx, h3, &mut send, &state, Some(origin), None));
            // The h3 driver reads the server's control stream meanwhile.
            let mut driver_done = false;
            loop {
                tokio::select! {
                    r = &mut request => break r,
                    _ = std::future::poll_fn(|cx| held.driver.poll_close(cx)), if !driver_done => driver_done = true,
                }
            }
        };
        held.carried = 1;
        if outcome.is_err() {
            // Nothing left to hold on a connection whose request failed.
            held.close(ctx);
            return Err(None);
        }
    }
    Ok((held, ready))
}

impl Held {
    /// Keeps the connection until `until` or a stop (false), or until the
    /// server or the network ends it (GOAWAY and close, idle timeout: true).
    /// quinn answers the server's PINGs and keeps the connection alive.
    pub(crate) async fn hold(
        &mut self,
        ctx: &Ctx,
        until: Instant,
        mut sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    ) -> bool {
        // A stop before the hold began woke only the waiters there were.
        if ctx.stopping.get() {
            return false;
        }
        sleep.as_mut().reset(until.into());
        let driver = &mut self.driver;
        tokio::select! {
            () = sleep => false,
            () = ctx.stop_notify.notified() => false,
            _ = std::future::poll_fn(|cx| driver.poll_close(cx)) => true,
            _ = self.quic.closed() => true,
        }
    }

    /// Closes the connection (CONNECTION_CLOSE with H3_NO_ERROR) and
    /// records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        self.quic.close(H3_NO_ERROR.into(), b"");
        let now = Instant::now();
        let mut rec = ctx.rec.borrow_mut();
        rec.connection_closed(now, now - self.opened);
        rec.mux_connection_closed(self.carried);
    }
}

/// State the request loops of one connection share.
#[derive(Default)]
struct ConnState {
    /// A connection-level error ended it: no loop starts another request.
    dead: Cell<bool>,
    /// Wakes the loops waiting for a start when it dies.
    died: tokio::sync::Notify,
    in_flight: Cell<u64>,
    carried: Cell<u64>,
}

/// Runs the request loops of one connection (the first one with the
/// request `first` already taken, when given) and its h3 driver, until
/// every loop ends.
#[allow(clippy::too_many_arguments)]
async fn run_connection<S: Starts + 'static>(
    ctx: &Rc<Ctx>,
    starts: &Rc<S>,
    h3: &Arc<H3Spec>,
    mut driver: Driver,
    send: SendRequest,
    slots: &[usize],
    first: Option<Option<Instant>>,
    cursor: &Rc<RefCell<Cursor>>,
) {
    let state = Rc::new(ConnState::default());
    let mut set = tokio::task::JoinSet::new();
    for (i, &slot) in slots.iter().enumerate() {
        set.spawn_local(request_loop(
            Rc::clone(ctx),
            Rc::clone(starts),
            Arc::clone(h3),
            send.clone(),
            Rc::clone(&state),
            slot,
            if i == 0 { first } else { None },
            Rc::clone(cursor),
        ));
    }
    drop(send);
    let mut driver_done = false;
    loop {
        tokio::select! {
            joined = set.join_next() => {
                if joined.is_none() {
                    break;
                }
            }
            _ = std::future::poll_fn(|cx| driver.poll_close(cx)), if !driver_done => {
                // The connection is closing: loops in an exchange see it on
                // their streams, loops waiting for a start leave.
                driver_done = true;
                state.dead.set(true);
                state.died.notify_waiters();
            }
        }
    }
    ctx.rec.borrow_mut().mux_connection_closed(state.carried.get());
}

/// Request after request on one connection, starting with `first` when
/// given (a request already taken).
#[allow(clippy::too_many_arguments)]
async fn request_loop<S: Starts>(
    ctx: Rc<Ctx>,
    starts: Rc<S>,
    h3: Arc<H3Spec>,
    mut send: SendRequest,
    state: Rc<ConnState>,
    slot: usize,
    first: Option<Option<Instant>>,
    cursor: Rc<RefCell<Cursor>>,
) {
    let mut next = first;
    loop {
        let intended = match next.take() {
            Some(i) => i,
            None => {
                if ctx.stopping.get() || state.dead.get() {
                    return;
                }
                // A start taken is always made: `next` pops it in the
                // poll that returns it, so losing this race loses none.
                let next = tokio::select! {
                    biased;
                    n = starts.next(slot) => n,
                    () = state.died.notified() => {
                        starts.cancel(slot);
                        None
                    }
                };
                match next {
                    Some(i) => i,
                    None => return,
                }
            }
        };
        let connection_lives = exchange(&ctx, &h3, &mut send, &state, intended, Some(&cursor)).await != Err(true);
        state.carried.set(state.carried.get() + 1);
        if !connection_lives {
            state.dead.set(true);
            state.died.notify_waiters();
            return;
        }
        if !ctx.spec.keepalive {
            return;
        }
        tokio::task::coop::consume_budget().await;
    }
}

/// When the parts of one exchange happened, and what came back.
struct Done {
    sent: Instant,
    first: Instant,
    done: Instant,
    reply: Reply,
    server: Option<String>,
    /// A redirect's `Location`, when the run follows redirects.
    location: Option<String>,
}

/// A failed exchange: its class, and whether the whole connection failed.
type Broke = (ErrorClass, bool);

/// What an exchange got done, kept however it ends (a timeout drops it
/// midway): whether its stream opened, the request bytes written and the
/// response bytes read, as `sent` and `received` count them.
#[derive(Default)]
struct Progress {
    opened: Cell<bool>,
    written: Cell<u64>,
    read: Cell<u64>,
}

impl Progress {
    fn begin(&self) {
        self.opened.set(false);
        self.written.set(0);
        self.read.set(0);
    }
}

/// One request on its own stream, recorded; latency from `intended` when
/// scheduled. `cursor`: the connection slot's place in the plan's several
/// requests; None for the request of a storm connection, whose row is the
/// connection's (none of its own here), with latency from the connection's
/// start. With `--redirects`, a redirect is followed (see [`follow`]) and
/// the chain is the one request. Ok when a response came (whatever its
/// status); Err(true) when the connection failed (no later request can
/// use it), Err(false) when only this request did.
async fn exchange(
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
    let mut request_len = 0;
    let progress = Progress::default();
    let mut done = match request {
        Ok((request, body, len)) => {
            request_len = len;
            let want = Want {
                server: keep_server,
                location: follow.is_some(),
                request_len: len,
            };
            timed(ctx, send, state, request, &body, want, &progress, t_first).await
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
        ))
        .await;
        if let Some(r) = row.row() {
            r.redirects(chain.hops);
        }
        (done, t_send, request_len) = (chain.outcome, chain.t_send, chain.request_len);
    }
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    let mut rec = ctx.rec.borrow_mut();
    match done {
        Ok(d) => {
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
            // What went out and came back counts, whatever the outcome.
            let now = Instant::now();
            let (written, read) = (progress.written.get(), progress.read.get());
            rec.sent(now, written);
            rec.request_failed(now, class, read);
            drop(rec);
            if let Some((p, i)) = entry {
                p.ended(&ctx.scenario, i, now, None);
            }
            if let Some(r) = row.row() {
                r.reply(0, written, read);
                r.failed(class);
            }
            Err(connection)
        }
    }
}

/// What an exchange keeps of the response besides its status and sizes,
/// and the request's size as counted in `sent`.
#[derive(Clone, Copy)]
struct Want {
    server: bool,
    location: bool,
    request_len: u64,
}

/// [`one`] within `--timeout` from `t_send`, its stream counted closed
/// however it ends. A stream that could not even open in that time (the
/// server's MAX_STREAMS used up and not renewed) is `h3.stream_limit`,
/// and its connection is replaced: it failed as a whole.
#[allow(clippy::too_many_arguments)]
async fn timed(
    ctx: &Ctx,
    send: &mut SendRequest,
    state: &ConnState,
    request: http::Request<()>,
    body: &Bytes,
    want: Want,
    progress: &Progress,
    t_send: Instant,
) -> Result<Done, Broke> {
    progress.begin();
    let outcome = tokio::time::timeout_at(
        (t_send + ctx.spec.timeout).into(),
        one(ctx, request, body, send, want, state, progress),
    )
    .await
    .unwrap_or_else(|_| match progress.opened.get() {
        true => Err((ErrorClass::TimeoutResponse, false)),
        false => Err((STREAM_LIMIT, true)),
    });
    if progress.opened.get() {
        state.in_flight.set(state.in_flight.get() - 1);
        ctx.rec.borrow_mut().stream_closed();
    }
    outcome
}

/// A request whose stream could not open within `--timeout`: the server's
/// stream credit (MAX_STREAMS) was used up and not renewed.
const STREAM_LIMIT: ErrorClass = ErrorClass::H3("stream_limit");

/// The response head after any interim (1xx) ones, which h3 hands over as
/// responses of their own: skipped, as HTTP/1.1 and HTTP/2 skip them
/// (the wait is bounded by the caller's deadline).
async fn final_response(
    stream: &mut h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
) -> Result<http::Response<()>, Broke> {
    loop {
        let resp = stream.recv_response().await.map_err(|e| stream_class(&e))?;
        if !resp.status().is_informational() {
            return Ok(resp);
        }
    }
}

/// The body length a response must have: its `content-length`, unless it
/// answers HEAD or is a 204 or 304 (none is checked when it is missing or
/// not a number).
fn content_length(resp: &http::Response<()>, head: bool) -> Option<u64> {
    let status = resp.status().as_u16();
    if head || status == 204 || status == 304 {
        return None;
    }
    resp.headers()
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The exchange itself. Err: the class, and whether the connection failed
/// (not only this stream).
async fn one(
    ctx: &Ctx,
    request: http::Request<()>,
    body: &Bytes,
    send: &mut SendRequest,
    want: Want,
    state: &ConnState,
    progress: &Progress,
) -> Result<Done, Broke> {
    let head = request.method() == http::Method::HEAD;
    // Opening the stream waits while the server's MAX_STREAMS is used up.
    let mut stream = send.send_request(request).await.map_err(|e| stream_class(&e))?;
    progress.opened.set(true);
    progress.written.set(want.request_len.saturating_sub(body.len() as u64));
    let open = state.in_flight.get() + 1;
    state.in_flight.set(open);
    ctx.rec.borrow_mut().stream_opened(Instant::now(), open);
    if !body.is_empty() {
        stream.send_data(body.clone()).await.map_err(|e| stream_class(&e))?;
        progress.written.set(want.request_len);
    }
    stream.finish().await.map_err(|e| stream_class(&e))?;
    let sent = Instant::now();
    let resp = final_response(&mut stream).await?;
    let first = Instant::now();
    let header_bytes = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().len() + v.len() + 4) as u64)
        .sum::<u64>();
    progress.read.set(header_bytes);
    let length = content_length(&resp, head);
    let (keep_server, keep_location) = (want.server, want.location);
    let server = if keep_server {
        resp.headers()
            .get(http::header::SERVER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    } else {
        None
    };
    let location = if keep_location {
        resp.headers()
            .get(http::header::LOCATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    } else {
        None
    };
    let mut body_bytes = 0u64;
    while let Some(chunk) = stream.recv_data().await.map_err(|e| stream_class(&e))? {
        body_bytes += chunk.remaining() as u64;
        progress.read.set(header_bytes + body_bytes);
        if length.is_some_and(|l| body_bytes > l) {
            // More than its content-length: malformed (RFC 9114 4.1.2).
            return Err((ErrorClass::Protocol, false));
        }
    }
    if length.is_some_and(|l| body_bytes < l) {
        // The stream ended short of its content-length, as an HTTP/1.1
        // body cut off by the connection's end.
        return Err((ErrorClass::Eof, false));
    }
    let done = Instant::now();
    Ok(Done {
        sent,
        first,
        done,
        reply: Reply {
            status: resp.status().as_u16(),
            header_bytes,
            body_bytes,
        },
        server,
        location,
    })
}

/// A redirect chain's last exchange so far.
struct Chain {
    outcome: Result<Done, Broke>,
    t_send: Instant,
    request_len: u64,
    hops: u32,
}

/// Follows the redirects of a request whose first exchange is `first`
/// (`request_len` its size), as crate::redirect::follow does for HTTP/1.1
/// (methods, bodies, credentials, limits; each hop counted in `redirects`
/// and given `--timeout`): a hop to the plan's origin is a stream of this
/// connection; one to another https origin goes on an HTTP/3 connection
/// of its own, kept for the chain and closed at its end; one to http://
/// cannot be HTTP/3 and is `redirect.scheme`.
#[allow(clippy::too_many_arguments)]
async fn follow_h3(
    ctx: &Ctx,
    h3: &H3Spec,
    f: &crate::redirect::FollowSpec,
    send: &mut SendRequest,
    state: &ConnState,
    first: Result<Done, Broke>,
    request_len: u64,
    keep_server: bool,
    progress: &Progress,
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
        let headers = crate::redirect::hop_headers(&f.headers, same, body, None);
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
    slot.reset(crate::http1::Keep {
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
        sent: t.sent,
        first: t.first,
        done: t.done,
        reply: slot.reply(),
        server: slot.server.take(),
        location,
    })
}

/// A scenario VU's own HTTP/3 connection: its steps are requests on it,
/// one at a time; its h3 driver runs in a task of its own.
pub(crate) struct Own {
    quic: quinn::Connection,
    send: SendRequest,
    opened: Instant,
    id: u64,
    carried: Cell<u64>,
    /// The driver ended or a request failed the connection.
    dead: Rc<Cell<bool>>,
    driver: tokio::task::JoinHandle<()>,
}

/// Counts a stream closed however its exchange ends.
struct StreamOpen<'a>(&'a Ctx);

impl Drop for StreamOpen<'_> {
    fn drop(&mut self) {
        self.0.rec.borrow_mut().stream_closed();
    }
}

impl Own {
    /// Opens a QUIC connection to `addr` and its HTTP/3 session.
    pub(crate) async fn open(
        ctx: &Ctx,
        client: &quinn::ClientConfig,
        server_name: &str,
        addr: SocketAddr,
    ) -> Result<Own, ErrorClass> {
        let id = ctx.next_conn.get();
        ctx.next_conn.set(id + 1);
        let opened = Instant::now();
        let (quic, mut driver, send) = open_to(ctx, client, server_name, addr, 1).await?;
        let dead = Rc::new(Cell::new(false));
        let driver = {
            let dead = Rc::clone(&dead);
            tokio::task::spawn_local(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
                dead.set(true);
            })
        };
        Ok(Own {
            quic,
            send,
            opened,
            id,
            carried: Cell::new(0),
            dead,
            driver,
        })
    }

    /// Its number among the worker's connection attempts (rows).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// False once the connection ended or failed.
    pub(crate) fn alive(&self) -> bool {
        !self.dead.get()
    }

    /// One request on its own stream, its response read into `slot`
    /// (bounded by `MAX_HEADER_SECTION` and the slot's keep), within the
    /// deadline `sleep` was armed with; `request_len`: its size as the
    /// caller counts it (a failure after the stream opened counts what of
    /// it was written). A stream that cannot open in that time is
    /// `h3.stream_limit` and the connection is replaced.
    pub(crate) async fn exchange(
        &mut self,
        ctx: &Ctx,
        request: http::Request<()>,
        body: &Bytes,
        request_len: usize,
        slot: &mut crate::proto::http2::Slot,
        sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    ) -> Result<crate::conn::Timing, crate::conn::Failed> {
        slot.begin();
        slot.for_method(request.method());
        let send = &mut self.send;
        let written = Cell::new(None);
        let work = async {
            let mut stream = send.send_request(request).await.map_err(|e| stream_class(&e))?;
            written.set(Some(request_len.saturating_sub(body.len())));
            ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
            let open = StreamOpen(ctx);
            if !body.is_empty() {
                stream.send_data(body.clone()).await.map_err(|e| stream_class(&e))?;
                written.set(Some(request_len));
            }
            stream.finish().await.map_err(|e| stream_class(&e))?;
            let sent = Instant::now();
            let resp = final_response(&mut stream).await?;
            let first = Instant::now();
            slot.head(resp.status().as_u16(), resp.headers());
            while let Some(mut chunk) = stream.recv_data().await.map_err(|e| stream_class(&e))? {
                while chunk.has_remaining() {
                    let piece = chunk.chunk();
                    let n = piece.len();
                    slot.chunk(piece);
                    chunk.advance(n);
                }
                if slot.over_length() {
                    return Err((ErrorClass::Protocol, false));
                }
            }
            if slot.short_of_length() {
                return Err((ErrorClass::Eof, false));
            }
            drop(open);
            Ok(crate::conn::Timing {
                sent,
                first,
                done: Instant::now(),
                extra: false,
                kernel: false,
            })
        };
        let outcome = tokio::select! {
            biased;
            r = work => r,
            () = sleep => match written.get() {
                Some(_) => Err((ErrorClass::TimeoutResponse, false)),
                None => Err((STREAM_LIMIT, true)),
            },
        };
        self.carried.set(self.carried.get() + 1);
        outcome.map_err(|(class, connection)| {
            if connection {
                self.dead.set(true);
            }
            crate::conn::Failed {
                class,
                written: written.get().unwrap_or(0),
            }
        })
    }

    /// Closes the connection (H3_NO_ERROR) and records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        self.quic.close(H3_NO_ERROR.into(), b"");
        self.driver.abort();
        let now = Instant::now();
        let mut rec = ctx.rec.borrow_mut();
        rec.connection_closed(now, now - self.opened);
        rec.mux_connection_closed(self.carried.get());
    }
}

/// The class of a stream error, and whether the whole connection failed.
fn stream_class(e: &h3::error::StreamError) -> (ErrorClass, bool) {
    use h3::error::StreamError;
    match e {
        StreamError::RemoteTerminate { code, .. } => (ErrorClass::H3(h3_code(code.value()).1), false),
        StreamError::HeaderTooBig { .. } => (ErrorClass::H3("header_too_big"), false),
        StreamError::RemoteClosing { .. } => (ErrorClass::H3("goaway"), true),
        StreamError::ConnectionError { 0: c, .. } => (h3_connection_class(c), true),
        StreamError::StreamError { .. } => (ErrorClass::H3("protocol"), false),
        _ => (ErrorClass::H3("protocol"), true),
    }
}

/// The class of an h3 connection error.
fn h3_connection_class(e: &h3::error::ConnectionError) -> ErrorClass {
    use h3::error::ConnectionError;
    use h3::quic::ConnectionErrorIncoming;
    match e {
        ConnectionError::Remote {
            0: ConnectionErrorIncoming::ApplicationClose { error_code },
            ..
        } => ErrorClass::H3(h3_code(*error_code).0),
        ConnectionError::Remote {
            0: ConnectionErrorIncoming::Timeout,
            ..
        }
        | ConnectionError::Timeout { .. } => ErrorClass::Quic("idle_timeout"),
        ConnectionError::Remote {
            0: ConnectionErrorIncoming::Undefined(inner),
            ..
        } => match inner.downcast_ref::<quinn::ConnectionError>() {
            Some(q) => connection_class(q, false),
            None => ErrorClass::Quic("other"),
        },
        _ => ErrorClass::H3("protocol"),
    }
}

/// The class of a QUIC connection error (`handshake`: before it was up).
fn connection_class(e: &quinn::ConnectionError, handshake: bool) -> ErrorClass {
    use quinn::ConnectionError;
    match e {
        ConnectionError::TimedOut if handshake => ErrorClass::Quic("handshake_timeout"),
        ConnectionError::TimedOut => ErrorClass::Quic("idle_timeout"),
        ConnectionError::ApplicationClosed(c) => ErrorClass::H3(h3_code(c.error_code.into_inner()).0),
        ConnectionError::ConnectionClosed(c) => transport_class(u64::from(c.error_code)),
        ConnectionError::TransportError(t) => transport_class(u64::from(t.code)),
        ConnectionError::Reset => ErrorClass::Quic("stateless_reset"),
        ConnectionError::VersionMismatch => ErrorClass::Quic("version_mismatch"),
        ConnectionError::LocallyClosed => ErrorClass::Quic("locally_closed"),
        ConnectionError::CidsExhausted => ErrorClass::Quic("cids_exhausted"),
    }
}

/// An HTTP/3 error code's name (RFC 9114 8.1, RFC 9204 6) after `$prefix`,
/// as one static string (error classes are `&'static str`).
macro_rules! h3_code_name {
    ($prefix:literal, $code:expr) => {
        match $code {
            0x100 => concat!($prefix, "H3_NO_ERROR"),
            0x101 => concat!($prefix, "H3_GENERAL_PROTOCOL_ERROR"),
            0x102 => concat!($prefix, "H3_INTERNAL_ERROR"),
            0x103 => concat!($prefix, "H3_STREAM_CREATION_ERROR"),
            0x104 => concat!($prefix, "H3_CLOSED_CRITICAL_STREAM"),
            0x105 => concat!($prefix, "H3_FRAME_UNEXPECTED"),
            0x106 => concat!($prefix, "H3_FRAME_ERROR"),
            0x107 => concat!($prefix, "H3_EXCESSIVE_LOAD"),
            0x108 => concat!($prefix, "H3_ID_ERROR"),
            0x109 => concat!($prefix, "H3_SETTINGS_ERROR"),
            0x10a => concat!($prefix, "H3_MISSING_SETTINGS"),
            0x10b => concat!($prefix, "H3_REQUEST_REJECTED"),
            0x10c => concat!($prefix, "H3_REQUEST_CANCELLED"),
            0x10d => concat!($prefix, "H3_REQUEST_INCOMPLETE"),
            0x10e => concat!($prefix, "H3_MESSAGE_ERROR"),
            0x10f => concat!($prefix, "H3_CONNECT_ERROR"),
            0x110 => concat!($prefix, "H3_VERSION_FALLBACK"),
            0x200 => concat!($prefix, "QPACK_DECOMPRESSION_FAILED"),
            0x201 => concat!($prefix, "QPACK_ENCODER_STREAM_ERROR"),
            0x202 => concat!($prefix, "QPACK_DECODER_STREAM_ERROR"),
            _ => concat!($prefix, "other"),
        }
    };
}

/// An HTTP/3 error code as the class of a connection closed with it
/// (`closed.CODE`) and of a stream reset with it (`stream_reset.CODE`).
fn h3_code(code: u64) -> (&'static str, &'static str) {
    (h3_code_name!("closed.", code), h3_code_name!("stream_reset.", code))
}

/// A QUIC transport error code (RFC 9000 20.1) as `closed.NAME`.
fn quic_code(code: u64) -> &'static str {
    match code {
        0x0 => "closed.NO_ERROR",
        0x1 => "closed.INTERNAL_ERROR",
        0x2 => "closed.CONNECTION_REFUSED",
        0x3 => "closed.FLOW_CONTROL_ERROR",
        0x4 => "closed.STREAM_LIMIT_ERROR",
        0x5 => "closed.STREAM_STATE_ERROR",
        0x6 => "closed.FINAL_SIZE_ERROR",
        0x7 => "closed.FRAME_ENCODING_ERROR",
        0x8 => "closed.TRANSPORT_PARAMETER_ERROR",
        0x9 => "closed.CONNECTION_ID_LIMIT_ERROR",
        0xa => "closed.PROTOCOL_VIOLATION",
        0xb => "closed.INVALID_TOKEN",
        0xc => "closed.APPLICATION_ERROR",
        0xd => "closed.CRYPTO_BUFFER_EXCEEDED",
        0xe => "closed.KEY_UPDATE_ERROR",
        0xf => "closed.AEAD_LIMIT_REACHED",
        0x10 => "closed.NO_VIABLE_PATH",
        _ => "closed.other",
    }
}

/// A QUIC transport error code: a TLS alert (0x100 + alert, RFC 9001 4.8)
/// as `tls.*`, any other as `quic.closed.NAME`.
fn transport_class(code: u64) -> ErrorClass {
    if (0x100..0x200).contains(&code) {
        return ErrorClass::Tls(match code - 0x100 {
            40 => "handshake_failure",
            42 => "bad_certificate",
            45 => "certificate_expired",
            46 => "certificate_unknown",
            48 => "unknown_ca",
            70 => "protocol_version",
            80 => "internal_error",
            112 => "unrecognized_name",
            116 => "certificate_required",
            120 => "no_application_protocol",
            _ => "alert",
        });
    }
    ErrorClass::Quic(quic_code(code))
}

/// How long an HTTP/3 preflight may take at most, whatever the plan's
/// timeout says.
const PREFLIGHT_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Before the run: does the server at `addr` speak HTTP/3? One QUIC
/// handshake with ALPN `h3` tells, on a thread and runtime of its own (the
/// caller may be inside one). Some(what happened instead) when nothing
/// answered in time or the handshake failed; None when it succeeded or
/// the check could not be made here (no socket, no runtime).
pub(crate) fn preflight(
    addr: SocketAddr,
    client: &quinn::ClientConfig,
    server_name: &str,
    timeout: std::time::Duration,
) -> Option<String> {
    let timeout = timeout.min(PREFLIGHT_LIMIT);
    let check = || -> Option<String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let bind: SocketAddr = match addr {
                SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
                SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let endpoint = quinn::Endpoint::client(bind).ok()?;
            let connecting = endpoint.connect_with(client.clone(), addr, server_name).ok()?;
            let spoke = match tokio::time::timeout(timeout, connecting).await {
                Ok(Ok(c)) => {
                    c.close(0u32.into(), b"");
                    None
                }
                Ok(Err(e)) => Some(format!("a failed QUIC handshake: {e}")),
                Err(_) => Some(format!(
                    "no QUIC handshake on UDP port {} within {} ms",
                    addr.port(),
                    timeout.as_millis()
                )),
            };
            endpoint.close(0u32.into(), b"");
            spoke
        })
    };
    std::thread::scope(|s| s.spawn(check).join().ok().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_their_rfc_names() {
        assert_eq!(h3_code(0x107).0, "closed.H3_EXCESSIVE_LOAD");
        assert_eq!(h3_code(0x10b).1, "stream_reset.H3_REQUEST_REJECTED");
        assert_eq!(h3_code(7), ("closed.other", "stream_reset.other"));
        assert_eq!(transport_class(0xa).name(), "quic.closed.PROTOCOL_VIOLATION");
        assert_eq!(transport_class(0x100 + 48).name(), "tls.unknown_ca");
        assert_eq!(transport_class(0x100 + 99).name(), "tls.alert");
    }
}
