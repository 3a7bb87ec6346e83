//! HTTP/2: requests as streams multiplexed on a worker's connections,
//! spoken by throng's own client (crate throng_http2, I/O-free).
//!
//! ```text
//!  loops (closed, open): one task per stream slot (connections × streams)
//!     │ Session::Http2(Slot)     the slot's last response (status, sizes)
//!     │ http2::one_request       take a stream on a pooled connection
//!     │                          (open one while the pool may grow), start
//!     │                          it (header block encoded once per run),
//!     │                          wait, record_exchange
//!     ▼
//!  Pool (one per worker, in Ctx) ── H2Conn { streams in flight, requests
//!                                    carried, the server's cap }
//!                                      └─ Shared { throng_http2::Conn,
//!                                         entries: stream id → the slot
//!                                         lent for the exchange, waker }
//!                                           ▲ events        │ frames
//!  Driver (a task per connection, owns the socket): write pending output
//!  (every stream started since its last turn in one write), read into the
//!  thread's read buffer, Conn::receive, fill the entries, wake the streams
//! ```
//!
//! HTTP/1.1's `Session` holds one connection and speaks one request at a
//! time; here a slot holds no connection: it borrows a stream of one. A
//! connection takes at most `min(--streams, SETTINGS_MAX_CONCURRENT_STREAMS)`
//! streams at once; slots beyond that wait for room (not counted as a
//! request until they get it). The pool grows to the worker's share of
//! `-c`. A connection the server ends (GOAWAY, reset, EOF) takes no new
//! streams and is closed when its last stream ends; the next request opens
//! a new one. gRPC builds on the same pool (`Spec` names the request).
//!
//! Memory: a connection with no stream open keeps no buffers (its pending
//! output, partial frame and header scratch space are released), reads go
//! through one buffer per worker thread, and the request's header block is
//! shared: what an idle connection costs is its state and HPACK table.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_http2::{ErrorCode, Event, StreamId};
use throng_metrics::{ErrorClass, Phase, Reply};
use throng_plan::StatusSet;
use tokio::io::{AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Sleep;

use crate::EngineError;
use crate::conn::{Failed, Timing, open_connection};
use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::exchange::{Session, record_exchange};
use crate::grpc_frame::Reader;
use crate::http1::Keep;
use crate::rows::Row;
use crate::transport::Transport;

/// What a worker sends on every stream, made once per run.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    /// Most concurrent streams per connection (`--streams`).
    pub streams: u32,
    /// Connections this worker may have open at once.
    pub connections: u64,
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The request's header block, decoded (bytes sent are counted as this
    /// plus the body: HPACK's compressed size per stream is not known).
    pub head_bytes: usize,
    /// The requests are gRPC calls: the status counted is `grpc-status`.
    pub grpc: bool,
    /// gRPC `--deadline`: the response wait, and its expiry's class.
    pub deadline: Option<Duration>,
    /// gRPC server streaming: the reply's messages are counted and timed.
    pub server_streaming: bool,
    /// `--expect-messages`: another count is `check_failed`.
    pub expect_messages: Option<u64>,
}

/// Headers HTTP/2 forbids (RFC 9113 8.2.2); `Host` becomes `:authority`.
pub(crate) const CONNECTION_SPECIFIC: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

impl Spec {
    /// The plan's request as HTTP/2 parts, or why it cannot be sent.
    pub(crate) fn from_plan(plan: &throng_plan::HttpPlan, connections: u64) -> Result<Spec, String> {
        let scheme = match plan.target.scheme {
            throng_plan::Scheme::Http => "http",
            throng_plan::Scheme::Https => "https",
        };
        // A Host header the user gave is the authority HTTP/2 sends.
        let authority = plan
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map_or_else(|| plan.target.authority(), |(_, v)| v.clone());
        let uri = http::Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query(plan.target.path.as_str())
            .build()
            .map_err(|e| format!("the URL cannot be sent as an HTTP/2 request ({e})"))?;
        let method = http::Method::from_bytes(plan.method.as_bytes())
            .map_err(|e| format!("-m {}: not an HTTP/2 method ({e})", plan.method))?;
        let mut headers = http::HeaderMap::new();
        for (name, value) in &plan.headers {
            let lower = name.to_ascii_lowercase();
            if CONNECTION_SPECIFIC.contains(&lower.as_str()) {
                continue;
            }
            let n = http::HeaderName::from_bytes(lower.as_bytes())
                .map_err(|e| format!("-H '{name}': not an HTTP/2 header name ({e})"))?;
            let v = http::HeaderValue::from_str(value)
                .map_err(|e| format!("-H '{name}': the value cannot be sent over HTTP/2 ({e})"))?;
            headers.append(n, v);
        }
        if !plan.body.is_empty() {
            headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(plan.body.len()));
        }
        let head_bytes = plan.method.len()
            + uri.path_and_query().map_or(1, |p| p.as_str().len())
            + authority.len()
            + scheme.len()
            + headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>()
            + 40;
        Ok(Spec {
            head_bytes,
            streams: plan.streams.max(1),
            connections: connections.max(1),
            method,
            uri,
            headers,
            body: plan.body.clone(),
            grpc: plan.grpc.is_some(),
            deadline: plan.grpc.as_ref().and_then(|g| g.deadline),
            server_streaming: plan.grpc.as_ref().is_some_and(|g| g.server_streaming),
            expect_messages: plan.grpc.as_ref().and_then(|g| g.expect_messages),
        })
    }
}

impl Spec {
    /// A storm's request (`--request`, or GET of the target's path; with
    /// none the storm only speaks the preface): one stream per connection.
    pub(crate) fn for_storm(plan: &throng_plan::StormPlan) -> Result<Spec, String> {
        let scheme = if plan.target.scheme.is_tls() { "https" } else { "http" };
        let default_port = if plan.target.scheme.is_tls() { 443 } else { 80 };
        let authority = throng_plan::Authority::new(&plan.target.host, plan.target.port, default_port).to_string();
        let (method, path) = plan
            .request
            .as_ref()
            .map_or(("GET", "/"), |r| (r.method.as_str(), r.path.as_str()));
        let uri = http::Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query(path)
            .build()
            .map_err(|e| format!("the target cannot be sent as an HTTP/2 request ({e})"))?;
        let method = http::Method::from_bytes(method.as_bytes())
            .map_err(|e| format!("--request: '{method}' is not an HTTP/2 method ({e})"))?;
        let head_bytes = method.as_str().len() + path.len() + authority.len() + scheme.len() + 40;
        Ok(Spec {
            streams: 1,
            connections: 1,
            method,
            uri,
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
            head_bytes,
            grpc: false,
            deadline: None,
            server_streaming: false,
            expect_messages: None,
        })
    }
}

/// Bytes of response header fields a slot keeps for captures and checks.
const KEPT_HEADERS: usize = 64 * 1024;

/// The decoded size of header fields as counted (name, value and 4 bytes
/// of framing each); pseudo-header fields are not counted.
fn field_bytes<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> u64 {
    fields
        .filter(|(n, _)| !n.starts_with(b":"))
        .map(|(n, v)| (n.len() + v.len() + 4) as u64)
        .sum()
}

/// A stream slot's last response: what `record_exchange` reads, and what
/// a scenario's captures, checks and cookie jar read (its headers and the
/// start of its body, when [`Slot::reset`] asked for them). A scenario's
/// HTTP/3 responses land in one too (crate::http3::Own).
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) status: u16,
    pub(crate) header_bytes: u64,
    pub(crate) body_bytes: u64,
    pub(crate) server: Option<String>,
    head_request: bool,
    keep: Keep,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    truncated: bool,
    /// The response's `content-length`, when its body must match it (not
    /// a HEAD request's, a 204's or a 304's).
    length: Option<u64>,
    /// gRPC server streaming: messages of the last reply read whole, and
    /// when the first and the last of them were.
    messages: u64,
    first_message: Option<Instant>,
    last_message: Option<Instant>,
}

impl Slot {
    pub(crate) fn new(head_request: bool) -> Self {
        Slot {
            head_request,
            ..Slot::default()
        }
    }

    pub(crate) fn head_request(&self) -> bool {
        self.head_request
    }

    /// The next response answers a request with `method`: one to HEAD has
    /// no body, whatever its `content-length` says (a slot may serve
    /// requests of several methods: targets, scenario steps).
    pub(crate) fn for_method(&mut self, method: &http::Method) {
        self.head_request = method == http::Method::HEAD;
    }

    /// What to keep of the next responses besides status and sizes.
    pub(crate) fn reset(&mut self, keep: Keep) {
        self.keep = keep;
    }

    /// A new response begins: nothing of the last one stays.
    pub(crate) fn begin(&mut self) {
        self.status = 0;
        self.header_bytes = 0;
        self.body_bytes = 0;
        self.headers.clear();
        self.body.clear();
        self.truncated = false;
        self.length = None;
        self.messages = 0;
        self.first_message = None;
        self.last_message = None;
    }

    /// The response's header fields: counted (decoded size), and kept when
    /// asked for.
    pub(crate) fn head(&mut self, status: u16, headers: &http::HeaderMap) {
        self.head_fields(status, || {
            headers.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        });
    }

    /// The same from (name, value) pairs (`fields` makes an iterator over
    /// them); pseudo-header fields (`:status`) are skipped.
    pub(crate) fn head_fields<'a, I>(&mut self, status: u16, fields: impl Fn() -> I)
    where
        I: Iterator<Item = (&'a [u8], &'a [u8])>,
    {
        self.status = status;
        self.header_bytes = field_bytes(fields()) + 13;
        let regular = || fields().filter(|(n, _)| !n.starts_with(b":"));
        self.length = if self.head_request || status == 204 || status == 304 {
            None
        } else {
            // One that is no number is not checked (as a missing one).
            regular()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"content-length"))
                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse().ok())
        };
        if self.keep.server {
            self.server = regular()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"server"))
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
                .map(str::to_string);
        }
        if self.keep.headers {
            self.keep_fields(regular());
        }
    }

    /// The response's trailer fields: counted, and kept after its headers
    /// when headers are asked for (a gRPC call's status and message).
    pub(crate) fn trailer_fields<'a, I>(&mut self, fields: impl Fn() -> I)
    where
        I: Iterator<Item = (&'a [u8], &'a [u8])>,
    {
        self.header_bytes += field_bytes(fields());
        if self.keep.headers {
            self.keep_fields(fields().filter(|(n, _)| !n.starts_with(b":")));
        }
    }

    /// Keeps fields up to HTTP/1.1's head limit: a server's huge header
    /// block costs each VU no more than an HTTP/1.1 head.
    fn keep_fields<'a>(&mut self, fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
        let mut kept: usize = self.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
        for (n, v) in fields {
            kept += n.len() + v.len() + 4;
            if kept > KEPT_HEADERS {
                break;
            }
            let name = String::from_utf8_lossy(n).to_ascii_lowercase();
            self.headers.push((name, String::from_utf8_lossy(v).into_owned()));
        }
    }

    /// A piece of the body: counted, and kept up to what was asked for.
    pub(crate) fn chunk(&mut self, data: &[u8]) {
        self.body_bytes += data.len() as u64;
        let room = self.keep.body.saturating_sub(self.body.len());
        if data.len() > room {
            self.truncated = self.keep.body > 0;
        }
        self.body.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// More body came than the response's `content-length` said: a
    /// malformed response (RFC 9113 8.1.1, RFC 9114 4.1.2), `protocol` —
    /// HTTP/1.1 cannot tell such bytes from the next response's.
    pub(crate) fn over_length(&self) -> bool {
        self.length.is_some_and(|l| self.body_bytes > l)
    }

    /// The stream ended with less body than its `content-length`: `eof`,
    /// as HTTP/1.1's body cut short by the connection's end.
    pub(crate) fn short_of_length(&self) -> bool {
        self.length.is_some_and(|l| self.body_bytes < l)
    }

    /// The kept headers (names lowercase, as HTTP/2 and HTTP/3 send them).
    pub(crate) fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The kept start of the body.
    pub(crate) fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body was longer than what was kept.
    pub(crate) fn body_truncated(&self) -> bool {
        self.truncated
    }

    pub(crate) fn reply(&self) -> Reply {
        Reply {
            status: self.status,
            header_bytes: self.header_bytes,
            body_bytes: self.body_bytes,
        }
    }

    /// Bytes of the response: its decoded header block and its body
    /// (HTTP/2 frames compressed headers; per-stream wire sizes are not
    /// known).
    pub(crate) fn wire_bytes(&self) -> u64 {
        self.header_bytes + self.body_bytes
    }
}

/// A worker's HTTP/2 connections, each serving one origin of the plan's
/// targets (one, or several: see crate::targets::Pick::bind).
pub(crate) struct Pool {
    pub(crate) spec: Spec,
    /// The spec's request header block, encoded once for every stream.
    block: Vec<u8>,
    /// Each connection with the origin it serves.
    conns: RefCell<Vec<(usize, Rc<H2Conn>)>>,
    /// Per origin: connections being opened (they count against the cap).
    opening: RefCell<Vec<u64>>,
    /// Per origin: the worker's connections that may serve it.
    caps: Vec<u64>,
    /// Per origin: a stream ended or a connection came or went (a slot of
    /// one origin waits for its own origin's room only).
    room: Vec<Notify>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("connections", &self.conns.borrow().len())
            .finish_non_exhaustive()
    }
}

/// What a slot gets: a stream on a connection, or the right to open one.
enum Take {
    Stream(Rc<H2Conn>),
    Open,
}

impl Pool {
    /// The pool of a worker whose targets `pick` chooses (None: one).
    pub(crate) fn new(spec: Spec, pick: Option<&crate::targets::Pick>) -> Self {
        let caps = pick.map_or_else(|| vec![spec.connections], |p| p.shares(spec.connections));
        Pool {
            block: encode_head(&spec.method, &spec.uri, &spec.headers),
            spec,
            conns: RefCell::new(Vec::new()),
            opening: RefCell::new(vec![0; caps.len()]),
            room: caps.iter().map(|_| Notify::new()).collect(),
            caps,
        }
    }

    /// Connections being opened to origin `o`, changed by `by`.
    fn opening(&self, o: usize, by: i64) -> u64 {
        let mut opening = self.opening.borrow_mut();
        let Some(n) = opening.get_mut(o) else { return 0 };
        *n = n.saturating_add_signed(by);
        *n
    }

    /// A stream on a live connection to origin `o` with room, or the right
    /// to open one; None when nothing frees up before the run stops.
    async fn take(&self, ctx: &Ctx, o: usize) -> Option<Take> {
        if !ctx.spec.keepalive {
            // A connection per request: the slots bound how many at once.
            return Some(Take::Open);
        }
        let room = self.room.get(o)?;
        loop {
            let notified = room.notified();
            let stop = ctx.stop_notify.notified();
            if ctx.stopping.get() {
                return None;
            }
            self.reap(ctx);
            {
                let conns = self.conns.borrow();
                if let Some((_, c)) = conns
                    .iter()
                    .find(|(at, c)| *at == o && !c.dead() && c.in_flight.get() < c.limit())
                {
                    c.in_flight.set(c.in_flight.get() + 1);
                    return Some(Take::Stream(Rc::clone(c)));
                }
                let open = conns.iter().filter(|(at, _)| *at == o).count() as u64 + self.opening(o, 0);
                if open < self.caps.get(o).copied().unwrap_or(0) {
                    self.opening(o, 1);
                    return Some(Take::Open);
                }
            }
            // Every stream is busy: wait for one to end (each is bounded
            // by --timeout) or for the stop.
            tokio::select! {
                () = notified => {}
                () = stop => return None,
            }
        }
    }

    /// Closes the connections that ended and carry no stream any more.
    fn reap(&self, ctx: &Ctx) {
        let mut conns = self.conns.borrow_mut();
        if conns.iter().any(|(_, c)| c.dead() && c.in_flight.get() == 0) {
            conns.retain(|(_, c)| {
                let done = c.dead() && c.in_flight.get() == 0;
                if done {
                    close(ctx, c);
                }
                !done
            });
        }
    }

    /// A stream on `c` (to origin `o`) ended.
    fn release(&self, ctx: &Ctx, c: &Rc<H2Conn>, o: usize) {
        c.in_flight.set(c.in_flight.get() - 1);
        c.carried.set(c.carried.get() + 1);
        ctx.rec.borrow_mut().stream_closed();
        let gone = c.dead() && c.in_flight.get() == 0;
        if gone {
            self.reap(ctx);
        }
        if let Some(room) = self.room.get(o) {
            if gone {
                room.notify_waiters();
            } else {
                room.notify_one();
            }
        }
    }

    /// Closes every connection (the worker's loops have ended).
    pub(crate) fn close_all(&self, ctx: &Ctx) {
        for (_, c) in self.conns.borrow_mut().drain(..) {
            close(ctx, &c);
        }
    }
}

/// Records a multiplexed connection's end and stops its driver (which
/// closes the socket).
fn close(ctx: &Ctx, c: &H2Conn) {
    c.driver.abort();
    let now = Instant::now();
    let mut rec = ctx.rec.borrow_mut();
    rec.connection_closed(now, now - c.opened);
    rec.mux_connection_closed(c.carried.get());
}

/// One request on a stream: take a stream (or open a connection), send,
/// read, record. `origin`: see exchange::one_request; in a closed loop the
/// wait for a free stream is not part of the request.
pub(crate) async fn one_request(
    ctx: &Ctx,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    origin: Instant,
    scheduled: bool,
    cursor: &mut crate::targets::Cursor,
) {
    let Some(pool) = ctx.h2.as_ref() else {
        return;
    };
    // With several targets, the origin this slot serves (see Pool).
    let o = ctx.pick.as_ref().map_or(0, |p| p.bind(cursor, pool.spec.connections));
    let Some(take) = pool.take(ctx, o).await else {
        if scheduled {
            // The run stopped before a stream freed up: a scheduled start
            // never sent.
            ctx.rec.borrow_mut().dropped(Instant::now());
        }
        return;
    };
    let now = Instant::now();
    let origin = if scheduled { origin } else { now };
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    // The next of the plan's several requests (on this slot's origin).
    let entry = ctx.pick.as_ref().map(|p| {
        let i = p.next(cursor);
        p.started(i);
        (p, i)
    });
    let mut row = ctx.row(now);
    if scheduled && let Some(r) = row.row() {
        r.phase(Phase::ScheduleLag, now.saturating_duration_since(origin));
    }
    let conn = match pool.conn_for(ctx, take, o, sleep.as_mut(), row.row()).await {
        Ok(c) => c,
        Err(class) => {
            let now = Instant::now();
            ctx.rec.borrow_mut().request_failed(now, class, 0);
            ctx.in_flight.set(ctx.in_flight.get() - 1);
            if let Some((p, i)) = entry {
                p.ended(&ctx.scenario, i, now, None);
            }
            if let Some(r) = row.row() {
                r.failed(class);
            }
            return;
        }
    };
    if let Some(r) = row.row() {
        r.conn(conn.id);
    }
    let mut t_send = Instant::now();
    ctx.rec
        .borrow_mut()
        .stream_opened(t_send, u64::from(conn.in_flight.get()));
    // A gRPC deadline shorter than --timeout ends the wait first.
    let deadline = pool.spec.deadline.filter(|d| *d < ctx.spec.timeout);
    sleep
        .as_mut()
        .reset((t_send + deadline.unwrap_or(ctx.spec.timeout)).into());
    let keep_server = ctx.rec.borrow().wants_first_reply();
    let follow = ctx.spec.follow.as_deref().filter(|f| f.limit > 0);
    let mut request_len = pool.spec.head_bytes + pool.spec.body.len();
    let mut outcome = match (&mut *session, entry) {
        (Session::Http2(slot), Some((p, i))) => {
            slot.reset(Keep {
                server: keep_server,
                ..Keep::default()
            });
            // Every entry converted before the run (crate::mux::check_table).
            match crate::mux::parts_of(&p.request_shared(i), pool.spec.uri.scheme_str() == Some("https")) {
                Ok(parts) => {
                    request_len = parts.h2_len();
                    slot.for_method(&parts.method);
                    send_on(
                        &conn,
                        &request_head(&parts.request()),
                        &parts.body,
                        false,
                        false,
                        request_len - parts.body.len(),
                        slot,
                        sleep.as_mut(),
                    )
                    .await
                }
                Err(_) => Err(Failed {
                    class: ErrorClass::Protocol,
                    written: 0,
                }),
            }
        }
        (Session::Http2(slot), None) => {
            if follow.is_some() {
                // The Location of a redirect is read from the headers.
                slot.reset(Keep {
                    server: keep_server,
                    headers: true,
                    body: 0,
                });
            }
            exchange(&pool.spec, &pool.block, &conn, slot, keep_server, sleep.as_mut()).await
        }
        // Never: the loops give HTTP/2 plans HTTP/2 slots.
        _ => Err(Failed {
            class: ErrorClass::Protocol,
            written: 0,
        }),
    };
    if let Err(f) = &mut outcome
        && matches!(f.class, ErrorClass::Reset | ErrorClass::Eof)
        && conn.went_away()
    {
        // A stream the server accepted, then closed the connection on
        // after its GOAWAY without answering: cut off by the GOAWAY.
        f.class = ErrorClass::H2("goaway");
    }
    if pool.spec.grpc {
        grpc_outcome(&mut outcome, session, deadline.is_some(), &ctx.spec.expect, request_len);
    }
    let mut released = false;
    if let (Some(f), Session::Http2(slot)) = (follow, &mut *session)
        && outcome
            .as_ref()
            .is_ok_and(|_| crate::redirect::is_redirect(slot.status))
    {
        // Its stream is done: the hops take streams of their own (on this
        // connection when it has room).
        pool.finish(ctx, &conn, o, &outcome);
        released = true;
        let first = crate::mux::Chain {
            outcome,
            t_send,
            request_len,
            hops: 0,
        };
        let chain = Box::pin(crate::mux::follow_h2(ctx, pool, f, slot, first, sleep)).await;
        if let Some(r) = row.row() {
            r.redirects(chain.hops);
        }
        (outcome, t_send, request_len) = (chain.outcome, chain.t_send, chain.request_len);
    }
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    // A stream of another length than --expect-messages fails its check
    // whatever its status: no status is expected of it.
    let wrong_count = match (&*session, pool.spec.expect_messages) {
        (Session::Http2(slot), Some(n)) => slot.messages != n,
        _ => false,
    };
    let nothing;
    let expect = if wrong_count {
        nothing = StatusSet::from_codes(&[]);
        &nothing
    } else {
        &ctx.spec.expect
    };
    let recorded = record_exchange(
        ctx,
        session,
        &outcome,
        request_len,
        t_send,
        origin,
        expect,
        keep_server,
        row.row(),
    );
    if let Some((p, i)) = entry {
        let response = match (&outcome, recorded) {
            (Ok(t), Some(ok)) => Some((t.done.saturating_duration_since(t_send), ok)),
            _ => None,
        };
        p.ended(&ctx.scenario, i, Instant::now(), response);
    }
    if pool.spec.server_streaming
        && let Session::Http2(slot) = &*session
    {
        record_messages(ctx, slot, &outcome, t_send);
    }
    if !released {
        pool.finish(ctx, &conn, o, &outcome);
    }
}

impl Pool {
    /// The connection of `take` (a stream on one, or one opened now to
    /// origin `o`: a failure to open is its class, recorded as the
    /// connection's).
    async fn conn_for(
        &self,
        ctx: &Ctx,
        take: Take,
        o: usize,
        sleep: Pin<&mut Sleep>,
        row: Option<&mut Row<'_>>,
    ) -> Result<Rc<H2Conn>, ErrorClass> {
        if let Take::Stream(c) = take {
            return Ok(c);
        }
        let dest = ctx.pick.as_ref().and_then(|p| p.origin_dest(o));
        let opened = Box::pin(open(ctx, &self.spec, dest, sleep, row)).await;
        if ctx.spec.keepalive {
            self.opening(o, -1);
        }
        match opened {
            Ok(c) => {
                let c = Rc::new(c);
                c.in_flight.set(1);
                if ctx.spec.keepalive {
                    self.conns.borrow_mut().push((o, Rc::clone(&c)));
                    // Room for more than this one stream.
                    if let Some(room) = self.room.get(o) {
                        room.notify_waiters();
                    }
                }
                Ok(c)
            }
            Err(class) => {
                if let Some(room) = self.room.get(o) {
                    room.notify_one();
                }
                Err(class)
            }
        }
    }

    /// A stream on `conn` (to origin `o`) ended with `outcome`: a connection that failed
    /// takes no new streams; without keep-alive it is closed.
    fn finish(&self, ctx: &Ctx, conn: &Rc<H2Conn>, o: usize, outcome: &Result<Timing, Failed>) {
        if let Err(f) = outcome
            && !stream_level(f.class, conn)
        {
            // The connection failed or is going away: no new streams on it.
            conn.shared.dead.set(true);
        }
        if !ctx.spec.keepalive {
            conn.shared.dead.set(true);
            conn.in_flight.set(0);
            conn.carried.set(1);
            ctx.rec.borrow_mut().stream_closed();
            close(ctx, conn);
            return;
        }
        self.release(ctx, conn, o);
    }

    /// A redirect's hop to origin `o` of the pool: a stream of one of its
    /// connections (opened when there is room), `parts` sent on it and the
    /// response read into `slot` within the deadline `sleep` was armed
    /// with. A run stopping before a stream frees up is `interrupted`.
    pub(crate) async fn hop(
        &self,
        ctx: &Ctx,
        o: usize,
        parts: &crate::mux::Parts,
        slot: &mut Slot,
        mut sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        let failed = |class| Failed { class, written: 0 };
        let take = self.take(ctx, o).await.ok_or(failed(ErrorClass::Interrupted))?;
        let conn = self
            .conn_for(ctx, take, o, sleep.as_mut(), None)
            .await
            .map_err(failed)?;
        ctx.rec
            .borrow_mut()
            .stream_opened(Instant::now(), u64::from(conn.in_flight.get()));
        slot.for_method(&parts.method);
        let mut outcome = send_on(
            &conn,
            &request_head(&parts.request()),
            &parts.body,
            false,
            false,
            parts.h2_len() - parts.body.len(),
            slot,
            sleep,
        )
        .await;
        if let Err(f) = &mut outcome
            && matches!(f.class, ErrorClass::Reset | ErrorClass::Eof)
            && conn.went_away()
        {
            f.class = ErrorClass::H2("goaway");
        }
        self.finish(ctx, &conn, o, &outcome);
        outcome
    }
}

/// A server-streaming call's messages: counted whatever the outcome, timed
/// (`first_message`, `last_message` from the first request byte) when the
/// call ended with its trailers.
fn record_messages(ctx: &Ctx, slot: &Slot, outcome: &Result<Timing, Failed>, t_send: Instant) {
    let mut rec = ctx.rec.borrow_mut();
    rec.messages(slot.messages);
    if let (Ok(t), Some(first), Some(last)) = (outcome, slot.first_message, slot.last_message) {
        rec.phase(t.done, Phase::FirstMessage, first.saturating_duration_since(t_send));
        rec.phase(t.done, Phase::LastMessage, last.saturating_duration_since(t_send));
    }
}

/// gRPC's view of a call's end: a wait cut by `--deadline`, or a
/// DEADLINE_EXCEEDED status the run does not expect, is
/// `grpc.deadline_exceeded` (the server and the client race to end the
/// call at the deadline; either way it is one class).
fn grpc_outcome(
    outcome: &mut Result<Timing, Failed>,
    session: &Session,
    deadline: bool,
    expect: &StatusSet,
    request_len: usize,
) {
    let (expired, written) = match outcome {
        Err(f) => (deadline && f.class == ErrorClass::TimeoutResponse, f.written),
        Ok(_) => (
            matches!(session, Session::Http2(slot) if slot.status == GRPC_DEADLINE_EXCEEDED)
                && !expect.contains(GRPC_DEADLINE_EXCEEDED),
            request_len,
        ),
    };
    if expired {
        *outcome = Err(Failed {
            class: ErrorClass::Grpc("deadline_exceeded"),
            written,
        });
    }
}

const GRPC_DEADLINE_EXCEEDED: u16 = 4;

/// A `grpc-status` value as a number.
fn grpc_code(value: Option<&[u8]>) -> Option<u16> {
    std::str::from_utf8(value?).ok()?.parse().ok()
}

/// The gRPC status of a response: `found` (`grpc-status` of its
/// trailers, or of its headers in a trailers-only response); without one,
/// the HTTP status mapped as gRPC's "HTTP to gRPC status code mapping" says.
fn grpc_code_or_http(http_status: u16, found: Option<u16>) -> u16 {
    match (found, http_status) {
        (Some(code), _) => code,
        // 200 without a status: the server broke off the call.
        (None, 200) => 13,
        (None, 400) => 13,
        (None, 401) => 16,
        (None, 403) => 7,
        (None, 404) => 12,
        (None, 429 | 502 | 503 | 504) => 14,
        (None, _) => 2,
    }
}

/// One multiplexed connection: its state, shared with the task that drives
/// its socket.
struct H2Conn {
    shared: Rc<Shared>,
    /// connect() issued.
    opened: Instant,
    /// Its number among the worker's connection attempts (rows).
    id: u64,
    /// Streams it may carry at once: `--streams`, capped by the server.
    limit: u32,
    in_flight: Cell<u32>,
    carried: Cell<u64>,
    driver: tokio::task::JoinHandle<()>,
}

impl H2Conn {
    /// No new streams: the connection ended, or the server sent GOAWAY.
    fn dead(&self) -> bool {
        self.shared.dead.get()
    }

    /// Streams it may carry now: the cap at the handshake, and a smaller
    /// SETTINGS_MAX_CONCURRENT_STREAMS the server sent since.
    fn limit(&self) -> u32 {
        self.limit.min(self.shared.server_max.get()).max(1)
    }

    /// It ended in order, after the server's GOAWAY.
    fn went_away(&self) -> bool {
        self.shared.went_away.get()
    }
}

/// The bytes of one worker thread's socket reads, shared by every HTTP/2
/// connection the thread drives (a worker is one thread with its own
/// runtime): a connection owns no read buffer. Borrowed only inside one
/// synchronous poll, never across an await.
const READ_BUF: usize = 64 * 1024;

thread_local! {
    static READ: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF].into_boxed_slice());
}

/// The largest response header list a connection accepts (as HTTP/3's
/// head limit, with room): a larger one fails the connection
/// (`h2.protocol`) rather than being stored.
const MAX_HEADER_LIST: u32 = 256 * 1024;

/// What a connection's driver task and its streams share.
struct Shared {
    conn: RefCell<throng_http2::Conn>,
    /// The streams waiting for their responses.
    streams: RefCell<Vec<Entry>>,
    /// The driver's waker: a stream has output for it.
    driver: Cell<Option<Waker>>,
    /// Whoever waits on the connection itself (its handshake, a storm's hold).
    waiter: Cell<Option<Waker>>,
    /// The server's SETTINGS arrived.
    settings: Cell<bool>,
    /// The server acknowledged ours.
    acked: Cell<bool>,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (u32::MAX: none).
    server_max: Cell<u32>,
    /// No new streams (GOAWAY, or the connection ended).
    dead: Cell<bool>,
    /// The server sent GOAWAY.
    went_away: Cell<bool>,
    /// The driver ended, and why.
    ended: Cell<Option<ErrorClass>>,
}

/// A stream waiting for its response: the requester's slot moved in for
/// the exchange, filled by the driver as the frames come.
struct Entry {
    id: StreamId,
    slot: Slot,
    grpc: bool,
    /// `grpc-status` of the response headers (a trailers-only response)
    /// and of the trailers.
    grpc_head: Option<u16>,
    grpc_trailers: Option<u16>,
    /// A gRPC reply, judged as it arrives (crate::grpc_frame).
    reader: Option<Reader>,
    /// The request body not sent yet (the windows were closed).
    body: Bytes,
    /// Handed to the connection: no byte of the response came before.
    sent: Instant,
    first: Option<Instant>,
    end: Option<Result<Instant, ErrorClass>>,
    /// `end` is the kernel's receive stamp (crate::stamps), not the read's clock.
    kernel: bool,
    waker: Option<Waker>,
}

impl Entry {
    fn finish(&mut self, end: Result<Instant, ErrorClass>) {
        if self.end.is_none() {
            self.end = Some(end);
            if let Some(w) = self.waker.take() {
                w.wake();
            }
        }
    }
}

fn entry(streams: &mut [Entry], id: StreamId) -> Option<&mut Entry> {
    streams.iter_mut().find(|e| e.id == id)
}

/// Keeps `cell`'s waker current with `cx`'s, cloning only when it changed.
fn register(cell: &Cell<Option<Waker>>, cx: &Context<'_>) {
    let mut w = cell.take();
    if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
        w = Some(cx.waker().clone());
    }
    cell.set(w);
}

fn wake(cell: &Cell<Option<Waker>>) {
    if let Some(w) = cell.take() {
        w.wake();
    }
}

impl Shared {
    fn new(streams: u32) -> Shared {
        let conn = throng_http2::Conn::new(throng_http2::Settings {
            max_concurrent_streams: streams.max(1),
            max_header_list_size: MAX_HEADER_LIST,
            ..throng_http2::Settings::default()
        });
        Shared {
            conn: RefCell::new(conn),
            streams: RefCell::new(Vec::new()),
            driver: Cell::new(None),
            waiter: Cell::new(None),
            settings: Cell::new(false),
            acked: Cell::new(false),
            server_max: Cell::new(u32::MAX),
            dead: Cell::new(false),
            went_away: Cell::new(false),
            ended: Cell::new(None),
        }
    }

    /// Passes bytes read to the connection and what they carried to the
    /// streams. `stamp`: the kernel's receive stamp of the read; what it
    /// carried arrived then (as HTTP/1.1 responses are timed), not when the
    /// worker got round to reading it.
    fn receive(&self, input: &[u8], stamp: Option<crate::stamps::Stamp>) -> Result<(), ErrorClass> {
        let now = Instant::now();
        let mut conn = self.conn.borrow_mut();
        let mut streams = self.streams.borrow_mut();
        // One stamp for the read: its age is checked against the oldest
        // stream's send, and each stream keeps it only when it is after
        // its own (else the read's clock, as a read without a stamp).
        let arrived = stamp.and_then(|st| {
            let floor = streams.iter().map(|e| e.sent).min()?;
            crate::stamps::arrival(st, now, floor)
        });
        let at = |e: &Entry| match arrived {
            Some(a) if a >= e.sent => (a, true),
            _ => (now, false),
        };
        let mut window = false;
        let mut connection = false;
        // A stream ended: room for one waiting for the server's cap.
        let mut freed = false;
        let r = conn.receive(input, &mut |e| match e {
            Event::Response {
                stream,
                status,
                headers,
            } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.first = Some(at(s).0);
                    s.slot.head_fields(status, || headers.iter());
                    if s.grpc {
                        s.grpc_head = grpc_code(headers.get(b"grpc-status"));
                    }
                    if let Some(r) = s.reader.as_mut() {
                        r.head(status, headers.get(b"content-type"), headers.get(b"grpc-encoding"));
                    }
                }
            }
            Event::Data { stream, data } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.slot.chunk(data);
                    if s.slot.over_length() {
                        // The exchange resets the stream when it takes it.
                        s.finish(Err(ErrorClass::Protocol));
                    }
                    if let Some(r) = s.reader.as_mut() {
                        let n = r.feed(data);
                        if n > 0 {
                            let (t, _) = at(s);
                            s.slot.first_message.get_or_insert(t);
                            s.slot.last_message = Some(t);
                            s.slot.messages += n;
                        }
                    }
                }
            }
            Event::Trailers { stream, headers } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.slot.trailer_fields(|| headers.iter());
                    if s.grpc {
                        s.grpc_trailers = grpc_code(headers.get(b"grpc-status"));
                    }
                }
            }
            Event::StreamEnd { stream } => {
                freed = true;
                if let Some(s) = entry(&mut streams, stream) {
                    if let Some(r) = s.reader.as_mut() {
                        r.end();
                    }
                    if s.slot.short_of_length() {
                        s.finish(Err(ErrorClass::Eof));
                    } else {
                        let (t, kernel) = at(s);
                        s.kernel = kernel;
                        s.finish(Ok(t));
                    }
                }
            }
            // After the end of the response, a reset only stops the
            // request body: the response stands (finish keeps the first end).
            Event::StreamReset { stream, code, by_peer } => {
                freed = true;
                if let Some(s) = entry(&mut streams, stream) {
                    s.finish(Err(reset_class(code, by_peer)));
                }
            }
            Event::CutOff { stream } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.finish(Err(ErrorClass::H2("goaway")));
                }
            }
            Event::GoAway { .. } => {
                self.went_away.set(true);
                self.dead.set(true);
                connection = true;
            }
            Event::Settings(p) => {
                self.settings.set(true);
                self.server_max.set(p.max_concurrent_streams);
                connection = true;
            }
            Event::SettingsAcked => {
                self.acked.set(true);
                connection = true;
            }
            Event::WindowUpdate { .. } => window = true,
            _ => {}
        });
        if window && r.is_ok() {
            send_bodies(&mut conn, &mut streams);
        }
        if connection || freed {
            wake(&self.waiter);
        }
        r.map_err(|e| match e.code() {
            ErrorCode::FLOW_CONTROL_ERROR => ErrorClass::H2("flow_control"),
            _ => ErrorClass::H2("protocol"),
        })
    }

    /// The driver ended: every stream still waiting fails with `class`.
    fn end(&self, class: ErrorClass) {
        self.dead.set(true);
        self.ended.set(Some(class));
        for s in self.streams.borrow_mut().iter_mut() {
            s.finish(Err(class));
        }
        wake(&self.waiter);
    }
}

/// Sends what the windows now allow of the request bodies still waiting.
fn send_bodies(conn: &mut throng_http2::Conn, streams: &mut [Entry]) {
    for s in streams.iter_mut().filter(|s| !s.body.is_empty()) {
        match conn.send_data(s.id, &s.body, true) {
            Ok(n) => bytes::Buf::advance(&mut s.body, n),
            // The stream ended meanwhile: nothing more to send.
            Err(_) => s.body = Bytes::new(),
        }
    }
}

/// The task that owns a connection's socket: writes what the connection
/// has to send, reads what comes and dispatches it to the streams. Ends
/// (and the socket closes) when the connection fails or is aborted.
struct Driver {
    shared: Rc<Shared>,
    io: Transport,
}

/// Reads one poll of the driver makes at most before it yields to the
/// worker's other tasks.
const TURNS: usize = 16;

impl std::future::Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        match this.turn(cx) {
            Ok(()) => Poll::Pending,
            Err(class) => {
                this.shared.end(class);
                Poll::Ready(())
            }
        }
    }
}

impl Driver {
    /// Writes and reads until the socket would block (Ok: wakers are set)
    /// or the connection fails.
    fn turn(&mut self, cx: &mut Context<'_>) -> Result<(), ErrorClass> {
        for _ in 0..TURNS {
            self.flush(cx)?;
            let shared = &*self.shared;
            let io = &mut self.io;
            let read = READ.with(|buf| {
                let mut buf = buf.borrow_mut();
                let mut rb = ReadBuf::new(&mut buf[..]);
                // The stamped read: the kernel's receive stamp times what
                // it brought, and a read shorter than the buffer tells the
                // socket is drained, which saves the system call that would
                // only hear EAGAIN.
                match io.poll_read_stamped(cx, &mut rb, true) {
                    Poll::Pending => Ok(false),
                    Poll::Ready(Err(e)) => Err(classify(&e, Stage::Exchange)),
                    Poll::Ready(Ok(_)) if rb.filled().is_empty() => Err(ErrorClass::Eof),
                    Poll::Ready(Ok(stamp)) => shared.receive(rb.filled(), stamp).map(|()| true),
                }
            });
            match read {
                Ok(true) => {}
                Ok(false) => {
                    register(&shared.driver, cx);
                    if shared.streams.borrow().is_empty() {
                        // Idle: the connection keeps no buffers.
                        shared.conn.borrow_mut().shrink();
                        *shared.streams.borrow_mut() = Vec::new();
                    }
                    return Ok(());
                }
                Err(class) => {
                    // A protocol error's GOAWAY goes out if it can.
                    let _ = self.flush(cx);
                    return Err(class);
                }
            }
        }
        // Busy: let the worker's other tasks run, then go on.
        cx.waker().wake_by_ref();
        Ok(())
    }

    /// Writes the connection's pending output until it is all out or the
    /// socket would block (its waker is then set).
    fn flush(&mut self, cx: &mut Context<'_>) -> Result<(), ErrorClass> {
        let mut conn = self.shared.conn.borrow_mut();
        // Each round writes at least a byte, or flushes once and then must:
        // bounded by the output.
        let mut flushed = false;
        while !conn.pending_output().is_empty() {
            match Pin::new(&mut self.io).poll_write(cx, conn.pending_output()) {
                // A transport that takes nothing even after a flush.
                Poll::Ready(Ok(0)) if flushed => return Err(ErrorClass::Reset),
                // TLS whose buffer of records to send is full: out with
                // them first (then it takes more), or wait for the socket.
                Poll::Ready(Ok(0)) => {
                    flushed = true;
                    match Pin::new(&mut self.io).poll_flush(cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(e)) => return Err(classify(&e, Stage::Exchange)),
                        Poll::Pending => return Ok(()),
                    }
                }
                Poll::Ready(Ok(n)) => {
                    flushed = false;
                    conn.consume_output(n);
                }
                Poll::Ready(Err(e)) => return Err(classify(&e, Stage::Exchange)),
                Poll::Pending => break,
            }
        }
        // TLS: records encrypted but not yet taken by the socket.
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(classify(&e, Stage::Exchange)),
            _ => Ok(()),
        }
    }
}

/// The taxonomy class of a stream reset: by the server (`by_peer`) with
/// its code, or by us because the server broke a stream rule.
fn reset_class(code: ErrorCode, by_peer: bool) -> ErrorClass {
    match code {
        ErrorCode::REFUSED_STREAM => ErrorClass::H2("refused_stream"),
        ErrorCode::FLOW_CONTROL_ERROR => ErrorClass::H2("flow_control"),
        c if by_peer => ErrorClass::H2(rst_name(c)),
        _ => ErrorClass::H2("protocol"),
    }
}

/// The taxonomy class of a stream that could not start.
fn send_class(c: &H2Conn, e: &throng_http2::SendError) -> ErrorClass {
    use throng_http2::SendError as E;
    match e {
        E::GoingAway | E::StreamIdsExhausted => ErrorClass::H2("goaway"),
        E::StreamLimit(_) => {
            // The server allows no more streams than are open (a cap of 0,
            // or lowered under them): the next request goes on a new
            // connection rather than failing here again at once.
            c.shared.dead.set(true);
            ErrorClass::H2("refused_stream")
        }
        E::Closed => c.shared.ended.get().unwrap_or(ErrorClass::Eof),
        _ => ErrorClass::H2("protocol"),
    }
}

/// The HPACK header block of a request, encoded without the dynamic table
/// so that any request on any connection can reuse it.
pub(crate) fn encode_head(method: &http::Method, uri: &http::Uri, headers: &http::HeaderMap) -> Vec<u8> {
    let fields: Vec<(&[u8], &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        .collect();
    let mut block = Vec::new();
    throng_http2::hpack::encode_request(
        &mut block,
        method.as_str().as_bytes(),
        uri.scheme_str().unwrap_or("http").as_bytes(),
        uri.authority().map_or(&b""[..], |a| a.as_str().as_bytes()),
        uri.path_and_query().map_or(&b"/"[..], |p| p.as_str().as_bytes()),
        &fields,
    );
    block
}

/// A request's header block as counted in `sent` (see crate::mux::Parts::h2_len).
fn decoded_head_len(request: &http::Request<()>) -> usize {
    let uri = request.uri();
    request.method().as_str().len()
        + uri.scheme_str().map_or(0, str::len)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len())
        + request
            .headers()
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>()
        + 40
}

/// [`encode_head`] of a request's parts.
fn request_head(request: &http::Request<()>) -> Vec<u8> {
    encode_head(request.method(), request.uri(), request.headers())
}

/// A stream of an exchange under way: on drop (a timeout, a VU cut off)
/// its entry goes, the requester's slot comes back and a stream still open
/// is reset with CANCEL, so that the connection stays usable.
struct Open<'a> {
    c: &'a H2Conn,
    id: StreamId,
    slot: &'a mut Slot,
    taken: bool,
}

impl Open<'_> {
    /// Removes the stream's entry and gives the slot back.
    fn take(&mut self) -> Option<Entry> {
        self.taken = true;
        let sh = &*self.c.shared;
        let mut streams = sh.streams.borrow_mut();
        let i = streams.iter().position(|e| e.id == self.id)?;
        let mut e = streams.swap_remove(i);
        drop(streams);
        std::mem::swap(self.slot, &mut e.slot);
        if !matches!(e.end, Some(Ok(_))) || !e.body.is_empty() {
            sh.conn.borrow_mut().reset_stream(self.id, ErrorCode::CANCEL);
            wake(&sh.driver);
        }
        Some(e)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.taken {
            self.take();
        }
    }
}

/// Sends the plan's request on a new stream of `c` and reads the
/// response, within the deadline `sleep` was armed with.
async fn exchange(
    spec: &Spec,
    block: &[u8],
    c: &H2Conn,
    slot: &mut Slot,
    keep_server: bool,
    sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    slot.keep.server = keep_server;
    slot.for_method(&spec.method);
    send_on(
        c,
        block,
        &spec.body,
        spec.grpc,
        spec.server_streaming,
        spec.head_bytes,
        slot,
        sleep,
    )
    .await
}

/// Sends a request (its header `block`, then `body`) on a new stream of
/// `c` and reads the response into `slot`, within the deadline `sleep` was
/// armed with; `grpc`: the status is the call's `grpc-status` and the
/// reply is judged as a gRPC client would (crate::grpc_frame: a fault is
/// its `grpc.*` class); `server_streaming`: its response messages are
/// counted and timed as they arrive, and any number of them is right (a
/// unary call's OK has exactly one). `head_len`: the header block's size as
/// the caller counts it; a failure after the stream started counts it and
/// the body handed to the connection as written.
#[allow(clippy::too_many_arguments)]
async fn send_on(
    c: &H2Conn,
    block: &[u8],
    body: &Bytes,
    grpc: bool,
    server_streaming: bool,
    head_len: usize,
    slot: &mut Slot,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    let fail = |class| Failed { class, written: 0 };
    slot.begin();
    let sh = &*c.shared;
    if !room_now(sh) {
        wait_room(sh, sleep.as_mut()).await.map_err(fail)?;
    }
    let (id, sent) = {
        let mut conn = sh.conn.borrow_mut();
        let id = conn
            .start_request(block, body.is_empty())
            .map_err(|e| fail(send_class(c, &e)))?;
        let mut rest = body.clone();
        if !body.is_empty() {
            let n = conn.send_data(id, body, true).map_err(|e| Failed {
                class: send_class(c, &e),
                written: head_len,
            })?;
            bytes::Buf::advance(&mut rest, n);
        }
        let sent = Instant::now();
        let mut streams = sh.streams.borrow_mut();
        // Room for one more, not Vec's four at a time: a connection with
        // one stream in flight (`--streams 1`, a VU's) keeps one entry.
        if streams.len() == streams.capacity() {
            streams.reserve_exact(1);
        }
        streams.push(Entry {
            id,
            slot: std::mem::take(slot),
            grpc,
            grpc_head: None,
            grpc_trailers: None,
            reader: grpc.then(Reader::default),
            body: rest,
            sent,
            first: None,
            end: None,
            kernel: false,
            waker: None,
        });
        (id, sent)
    };
    // Handed to the connection: its driver writes the frames next, with
    // every other stream started meanwhile.
    wake(&sh.driver);
    let mut open = Open {
        c,
        id,
        slot,
        taken: false,
    };
    let ended = std::future::poll_fn(|cx| {
        let mut streams = sh.streams.borrow_mut();
        match entry(&mut streams, id) {
            Some(Entry { end: Some(end), .. }) => Poll::Ready(*end),
            Some(e) => {
                if !e.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    e.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            // Never: only this exchange removes its entry.
            None => Poll::Ready(Err(ErrorClass::Protocol)),
        }
    });
    let end = tokio::select! {
        biased;
        r = ended => r,
        () = sleep => Err(ErrorClass::TimeoutResponse),
    };
    let mut e = open.take();
    let unsent = e.as_ref().map_or(0, |e| e.body.len());
    let written = head_len + body.len().saturating_sub(unsent);
    let done = end.map_err(|class| Failed { class, written })?;
    // A stamped end can precede the clock of an unstamped first read.
    let first = e.as_ref().and_then(|e| e.first).unwrap_or(done).min(done);
    if grpc && let Some(e) = &mut e {
        open.slot.status = grpc_code_or_http(open.slot.status, e.grpc_trailers.or(e.grpc_head));
        if let Some(r) = e.reader.as_mut() {
            if !server_streaming {
                r.cardinality(open.slot.status);
            }
            if let Some(fault) = r.fault {
                return Err(Failed {
                    class: ErrorClass::Grpc(fault),
                    written,
                });
            }
        }
    }
    Ok(Timing {
        sent,
        first,
        done,
        extra: false,
        kernel: e.is_some_and(|e| e.kernel),
    })
}

/// Whether a stream may start on the connection now, or fail at once: only
/// the server's SETTINGS_MAX_CONCURRENT_STREAMS (0, or lowered under the
/// streams open) makes a stream wait.
fn room_now(sh: &Shared) -> bool {
    let conn = sh.conn.borrow();
    conn.open_streams() < conn.max_streams() as usize
        || conn.is_closed()
        || conn.goaway_received().is_some()
        || sh.ended.get().is_some()
}

/// Waits, within the deadline `sleep` was armed with, for the server to
/// allow a stream (a SETTINGS that raises its cap, a stream that ends).
/// A connection that allows none in that time is `h2.stream_limit` — the
/// request was never sent — and is replaced: it takes no new streams.
async fn wait_room(sh: &Shared, sleep: Pin<&mut Sleep>) -> Result<(), ErrorClass> {
    let room = std::future::poll_fn(|cx| {
        if room_now(sh) {
            return Poll::Ready(());
        }
        register(&sh.waiter, cx);
        Poll::Pending
    });
    let waited = tokio::select! {
        biased;
        () = room => Ok(()),
        () = sleep => {
            sh.dead.set(true);
            Err(ErrorClass::H2("stream_limit"))
        }
    };
    sh.waiter.take();
    waited
}

/// Opens a connection and speaks the HTTP/2 preface: the client's
/// SETTINGS out, the server's in and ours acknowledged, recorded as the
/// `handshake` phase.
async fn open(
    ctx: &Ctx,
    spec: &Spec,
    dest: Option<&crate::targets::Dest>,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<H2Conn, ErrorClass> {
    // With targets on several origins, to the one the connection serves.
    let ready = match dest {
        Some(d) => {
            crate::conn::open_connection_to(
                ctx,
                &d.route,
                d.tls.as_ref(),
                &[],
                None,
                false,
                sleep.as_mut(),
                row.as_deref_mut(),
            )
            .await?
        }
        None => open_connection(ctx, &[], None, false, sleep.as_mut(), row.as_deref_mut()).await?,
    };
    let crate::conn::Ready { conn, .. } = ready;
    let opened = conn.opened;
    speak(ctx, spec.streams, conn.stream, opened, conn.id, sleep, row)
        .await
        .inspect_err(|_| {
            let now = Instant::now();
            ctx.rec.borrow_mut().connection_closed(now, now - opened);
        })
}

/// Speaks the preface on `stream` (see [`open`]) and starts the
/// connection's driver; records the `handshake` phase.
async fn speak(
    ctx: &Ctx,
    streams: u32,
    stream: Transport,
    opened: Instant,
    id: u64,
    mut sleep: Pin<&mut Sleep>,
    row: Option<&mut Row<'_>>,
) -> Result<H2Conn, ErrorClass> {
    if let Transport::Tls(s) = &stream
        && s.tls.alpn_protocol() != Some(b"h2")
    {
        return Err(ErrorClass::H2("not_negotiated"));
    }
    // Nagle would hold a request back behind a small control frame still
    // unacknowledged (a PING ACK for grpc-go's BDP pings, a WINDOW_UPDATE)
    // for the peer's delayed ACK, ~40 ms: HTTP/2 sends small frames often.
    let tcp = match &stream {
        Transport::Plain(t) => t,
        Transport::Tls(s) => &s.io,
    };
    let _ = tcp.set_nodelay(true);
    let start = Instant::now();
    sleep.as_mut().reset((start + ctx.spec.timeout).into());
    let (shared, driver) = handshake(streams, stream, sleep).await?;
    let now = Instant::now();
    let server = shared.server_max.get();
    let server_max = (server != u32::MAX).then_some(u64::from(server));
    let limit = server.min(streams).max(1);
    {
        let mut rec = ctx.rec.borrow_mut();
        rec.phase(now, Phase::Handshake, now - start);
        rec.mux_connection("h2", u64::from(streams), server_max);
    }
    if let Some(r) = row {
        r.phase(Phase::Handshake, now - start);
    }
    Ok(H2Conn {
        shared,
        opened,
        id,
        limit,
        in_flight: Cell::new(0),
        carried: Cell::new(0),
        driver,
    })
}
/// Starts the driver of a connection on `stream` that opens at most
/// `streams` at once and waits, within the deadline `sleep` was armed
/// with, for the server's SETTINGS and its acknowledgement of ours.
async fn handshake(
    streams: u32,
    stream: Transport,
    sleep: Pin<&mut Sleep>,
) -> Result<(Rc<Shared>, tokio::task::JoinHandle<()>), ErrorClass> {
    let shared = Rc::new(Shared::new(streams));
    let driver = tokio::task::spawn_local(Driver {
        shared: Rc::clone(&shared),
        io: stream,
    });
    let spoken = std::future::poll_fn(|cx| {
        if let Some(class) = shared.ended.get() {
            return Poll::Ready(Err(class));
        }
        if shared.settings.get() && shared.acked.get() {
            return Poll::Ready(Ok(()));
        }
        register(&shared.waiter, cx);
        Poll::Pending
    });
    let spoken = tokio::select! {
        biased;
        r = spoken => r,
        () = sleep => Err(ErrorClass::TimeoutHandshake),
    };
    // The waiter's task may end long before the connection.
    shared.waiter.take();
    match spoken {
        Ok(()) => Ok((shared, driver)),
        Err(class) => {
            driver.abort();
            Err(class)
        }
    }
}

/// One request outside the workers (crate::grpc_call) on a connection of
/// its own over `stream`: the preface, `request` with `body`, the response
/// into `slot` (`grpc`: its status is the call's `grpc-status`), all
/// within the deadline `sleep` was armed with; then the connection closes.
pub(crate) async fn call_once(
    stream: Transport,
    request: &http::Request<()>,
    body: &Bytes,
    grpc: bool,
    slot: &mut Slot,
    mut sleep: Pin<&mut Sleep>,
) -> Result<(), ErrorClass> {
    let (shared, driver) = handshake(1, stream, sleep.as_mut()).await?;
    let c = H2Conn {
        shared,
        opened: Instant::now(),
        id: 0,
        limit: 1,
        in_flight: Cell::new(0),
        carried: Cell::new(0),
        driver,
    };
    let block = encode_head(request.method(), request.uri(), request.headers());
    slot.for_method(request.method());
    // Any number of messages: a reflection call answers each of its asks.
    let outcome = send_on(&c, &block, body, grpc, true, 0, slot, sleep).await;
    c.driver.abort();
    outcome.map(|_| ()).map_err(|f| f.class)
}

/// A storm's HTTP/2 connection: preface spoken, its request (if any)
/// answered, held until the storm closes it.
pub(crate) struct Held(H2Conn);

/// Storm: opens a connection whose handshake includes the HTTP/2 preface
/// and SETTINGS exchange (a failure there fails the connection, with its
/// `h2.*` class), then makes the plan's request (if any) as one stream.
/// Like storm::establish: Err(Some(class)) when the connection failed,
/// Err(None) when the request ended it (both recorded).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn storm_establish(
    ctx: &Ctx,
    with_request: bool,
    source: Option<std::net::IpAddr>,
    origin: Instant,
    reconnect: bool,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<(Held, Instant), Option<ErrorClass>> {
    let Some(pool) = ctx.h2.as_ref() else {
        return Err(Some(ErrorClass::Protocol));
    };
    let spec = &pool.spec;
    if with_request {
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
    }
    let fail_request = |class: ErrorClass| {
        if with_request {
            ctx.rec.borrow_mut().request_failed(Instant::now(), class, 0);
            ctx.in_flight.set(ctx.in_flight.get() - 1);
        }
    };
    let spoken = async {
        let (stream, opening) = crate::conn::open_transport(
            ctx,
            &ctx.spec.route,
            ctx.spec.tls.as_ref(),
            &[],
            source,
            reconnect,
            sleep.as_mut(),
            row.as_deref_mut(),
        )
        .await?;
        match speak(
            ctx,
            spec.streams,
            stream,
            opening.opened,
            opening.id,
            sleep.as_mut(),
            row.as_deref_mut(),
        )
        .await
        {
            Ok(c) => {
                let ready = Instant::now();
                opening.counted(ctx, ready);
                Ok((c, ready))
            }
            Err(class) => {
                opening.failed(ctx, class);
                Err(class)
            }
        }
    };
    let (conn, ready) = match spoken.await {
        Ok(c) => c,
        Err(class) => {
            if let Some(r) = row {
                r.failed(class);
            }
            fail_request(class);
            return Err(Some(class));
        }
    };
    if let Some(r) = row.as_deref_mut() {
        r.ok();
    }
    if with_request {
        conn.in_flight.set(1);
        ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
        let t_send = Instant::now();
        sleep.as_mut().reset((t_send + ctx.spec.timeout).into());
        let keep_server = ctx.rec.borrow().wants_first_reply();
        let mut slot = Slot::new(ctx.spec.head_request);
        let mut outcome = exchange(spec, &pool.block, &conn, &mut slot, keep_server, sleep).await;
        if let Err(f) = &mut outcome
            && matches!(f.class, ErrorClass::Reset | ErrorClass::Eof)
            && conn.went_away()
        {
            f.class = ErrorClass::H2("goaway");
        }
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        let mut session = Session::Http2(slot);
        record_exchange(
            ctx,
            &mut session,
            &outcome,
            spec.head_bytes + spec.body.len(),
            t_send,
            origin,
            &ctx.spec.expect,
            keep_server,
            row,
        );
        conn.in_flight.set(0);
        conn.carried.set(1);
        ctx.rec.borrow_mut().stream_closed();
        if outcome.is_err() {
            // Nothing left to hold on a connection whose request failed.
            close(ctx, &conn);
            return Err(None);
        }
    }
    // Held idle from now on: it keeps no buffers (its driver shrinks it
    // only when it runs, and an idle connection's driver may never run).
    conn.shared.conn.borrow_mut().shrink();
    Ok((Held(conn), ready))
}

impl Held {
    /// Keeps the connection until `until` or a stop (false), or until the
    /// server ends it (GOAWAY, reset, close: true).
    pub(crate) async fn hold(&self, ctx: &Ctx, until: Instant, mut sleep: Pin<&mut Sleep>) -> bool {
        let c = &self.0;
        // A stop before the hold began woke only the waiters there were.
        if ctx.stopping.get() {
            return false;
        }
        sleep.as_mut().reset(until.into());
        tokio::select! {
            () = sleep => false,
            () = ctx.stop_notify.notified() => false,
            () = std::future::poll_fn(|cx| {
                if c.dead() {
                    return Poll::Ready(());
                }
                register(&c.shared.waiter, cx);
                Poll::Pending
            }) => true,
        }
    }

    /// Closes the connection and records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        close(ctx, &self.0);
    }
}

/// A scenario VU's own HTTP/2 connection: its steps are streams on it,
/// one at a time (a VU's steps are sequential, as k6's).
pub(crate) struct Own(H2Conn);

/// Counts a stream closed however its exchange ends (a VU cut off drops
/// the exchange mid-stream).
struct StreamOpen<'a>(&'a Ctx);

impl Drop for StreamOpen<'_> {
    fn drop(&mut self) {
        self.0.rec.borrow_mut().stream_closed();
    }
}

impl Own {
    /// Opens a connection by `route` (TLS with `tls`, whose ALPN offers
    /// h2; h2c with prior knowledge without) and speaks the preface;
    /// records as the pool's connections do.
    pub(crate) async fn open(
        ctx: &Ctx,
        route: &crate::reach::Route,
        tls: Option<&crate::transport::TlsClient>,
        mut sleep: Pin<&mut Sleep>,
        mut row: Option<&mut Row<'_>>,
    ) -> Result<Own, ErrorClass> {
        let ready =
            crate::conn::open_connection_to(ctx, route, tls, &[], None, false, sleep.as_mut(), row.as_deref_mut())
                .await?;
        let crate::conn::Ready { conn, .. } = ready;
        let opened = conn.opened;
        speak(ctx, 1, conn.stream, opened, conn.id, sleep, row)
            .await
            .map(Own)
            .inspect_err(|_| {
                let now = Instant::now();
                ctx.rec.borrow_mut().connection_closed(now, now - opened);
            })
    }

    /// As [`Own::open`], over `conn`, already open (TLS whose ALPN chose h2).
    pub(crate) async fn over(ctx: &Ctx, conn: crate::conn::Conn, sleep: Pin<&mut Sleep>) -> Result<Own, ErrorClass> {
        let opened = conn.opened;
        speak(ctx, 1, conn.stream, opened, conn.id, sleep, None)
            .await
            .map(Own)
            .inspect_err(|_| {
                let now = Instant::now();
                ctx.rec.borrow_mut().connection_closed(now, now - opened);
            })
    }

    /// Its number among the worker's connection attempts (rows).
    pub(crate) fn id(&self) -> u64 {
        self.0.id
    }

    /// False once the connection ended or failed: the next step opens a new one.
    pub(crate) fn alive(&self) -> bool {
        !self.0.dead()
    }

    /// True when a new stream may go: false once the server's GOAWAY came
    /// (or the connection failed), so that the next step goes on a new
    /// connection instead of failing unsent. A VU's one stream at a time
    /// never waits for room, so this does not wait (`_limit` is the most
    /// it may).
    pub(crate) async fn ready(&self, _limit: Duration) -> bool {
        !self.0.dead() && self.0.shared.conn.borrow().can_start_request()
    }

    /// One request as a stream, its response read into `slot`, within the
    /// deadline `sleep` was armed with; `request_len`: its size as the
    /// caller counts it (a failure after the stream started counts it
    /// written). A failure of the connection (not only of the stream)
    /// marks it dead.
    pub(crate) async fn exchange(
        &self,
        ctx: &Ctx,
        request: http::Request<()>,
        body: &Bytes,
        request_len: usize,
        slot: &mut Slot,
        sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        let c = &self.0;
        c.in_flight.set(1);
        ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
        let open = StreamOpen(ctx);
        let block = encode_head(request.method(), request.uri(), request.headers());
        let head_len = request_len.saturating_sub(body.len());
        slot.for_method(request.method());
        let mut outcome = send_on(c, &block, body, false, false, head_len, slot, sleep).await;
        drop(open);
        c.in_flight.set(0);
        c.carried.set(c.carried.get() + 1);
        if let Err(f) = &mut outcome {
            if matches!(f.class, ErrorClass::Reset | ErrorClass::Eof) && c.went_away() {
                f.class = ErrorClass::H2("goaway");
            }
            if !stream_level(f.class, c) {
                c.shared.dead.set(true);
            }
        }
        outcome
    }

    /// A gRPC call as a stream, as [`Own::exchange`]: its status is the
    /// call's `grpc-status`; a server-streaming reply's messages are
    /// counted and timed. `deadline`: `sleep` was armed with the call's
    /// deadline, so running out is `grpc.deadline_exceeded`, as is a
    /// DEADLINE_EXCEEDED status `expect` does not hold.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call(
        &self,
        ctx: &Ctx,
        request: http::Request<()>,
        body: &Bytes,
        server_streaming: bool,
        deadline: bool,
        expect: &StatusSet,
        slot: &mut Slot,
        sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        let c = &self.0;
        c.in_flight.set(1);
        let t_send = Instant::now();
        ctx.rec.borrow_mut().stream_opened(t_send, 1);
        let open = StreamOpen(ctx);
        let head_len = decoded_head_len(&request);
        slot.for_method(request.method());
        let mut outcome = send_on(
            c,
            &request_head(&request),
            body,
            true,
            server_streaming,
            head_len,
            slot,
            sleep,
        )
        .await;
        drop(open);
        c.in_flight.set(0);
        c.carried.set(c.carried.get() + 1);
        if let Err(f) = &mut outcome {
            if matches!(f.class, ErrorClass::Reset | ErrorClass::Eof) && c.went_away() {
                f.class = ErrorClass::H2("goaway");
            }
            if !stream_level(f.class, c) {
                c.shared.dead.set(true);
            }
        }
        let (expired, written) = match &outcome {
            Err(f) => (deadline && f.class == ErrorClass::TimeoutResponse, f.written),
            Ok(_) => (
                slot.status == GRPC_DEADLINE_EXCEEDED && !expect.contains(GRPC_DEADLINE_EXCEEDED),
                head_len + body.len(),
            ),
        };
        if expired {
            outcome = Err(Failed {
                class: ErrorClass::Grpc("deadline_exceeded"),
                written,
            });
        }
        if server_streaming {
            record_messages(ctx, slot, &outcome, t_send);
        }
        outcome
    }

    /// Closes the connection and records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        close(ctx, &self.0);
    }
}

/// True for a failure that ends one stream and leaves its connection `c`
/// usable: a stream reset by the server, a response timeout (the stream is
/// cancelled), a body that broke its `content-length` on a connection
/// that goes on (the same classes from a connection that ended are its
/// failure).
fn stream_level(class: ErrorClass, c: &H2Conn) -> bool {
    match class {
        ErrorClass::TimeoutResponse | ErrorClass::Grpc(_) => true,
        ErrorClass::H2(name) => name == "refused_stream" || name.starts_with("rst_stream."),
        ErrorClass::Eof | ErrorClass::Protocol => c.shared.ended.get().is_none() && !c.shared.conn.borrow().is_closed(),
        _ => false,
    }
}

/// `rst_stream.CODE` by the RST_STREAM error code's name (RFC 9113 7).
fn rst_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::NO_ERROR => "rst_stream.no_error",
        ErrorCode::PROTOCOL_ERROR => "rst_stream.protocol_error",
        ErrorCode::INTERNAL_ERROR => "rst_stream.internal_error",
        ErrorCode::SETTINGS_TIMEOUT => "rst_stream.settings_timeout",
        ErrorCode::STREAM_CLOSED => "rst_stream.stream_closed",
        ErrorCode::FRAME_SIZE_ERROR => "rst_stream.frame_size_error",
        ErrorCode::CANCEL => "rst_stream.cancel",
        ErrorCode::COMPRESSION_ERROR => "rst_stream.compression_error",
        ErrorCode::CONNECT_ERROR => "rst_stream.connect_error",
        ErrorCode::ENHANCE_YOUR_CALM => "rst_stream.enhance_your_calm",
        ErrorCode::INADEQUATE_SECURITY => "rst_stream.inadequate_security",
        ErrorCode::HTTP_1_1_REQUIRED => "rst_stream.http_1_1_required",
        _ => "rst_stream.unknown",
    }
}

/// How long a preflight may take at most, whatever `--timeout` says.
const PREFLIGHT_LIMIT: Duration = Duration::from_secs(10);

/// How often a preflight's blocking reads and writes wake up to look at
/// the clock and at a signal.
const PREFLIGHT_POLL: Duration = Duration::from_millis(50);

/// Before the run: does the server speak HTTP/2? Over TLS, one handshake
/// tells by ALPN; in the clear (h2c), the server's first frame must be
/// SETTINGS. `Ok(Some(what it spoke instead))` when it does not; `Ok(None)`
/// when it does or when it cannot be told (unreachable, the handshake
/// failed: the run then counts those failures).
///
/// The whole check — connect, handshake, first frame — ends within
/// min(`timeout`, [`PREFLIGHT_LIMIT`]): a server whose bytes trickle in
/// (one every 0.3 s passes every per-read timeout) is
/// [`EngineError::Unanswered`]. A signal (`control` interrupted) ends it
/// within [`PREFLIGHT_POLL`] as [`EngineError::Interrupted`].
pub(crate) fn preflight(
    addr: std::net::SocketAddr,
    tls: Option<&crate::transport::TlsClient>,
    timeout: Duration,
    control: &crate::Control,
) -> Result<Option<String>, EngineError> {
    let bound = timeout.min(PREFLIGHT_LIMIT);
    let deadline = std::time::Instant::now() + bound;
    let what = if tls.is_some() {
        "a TLS handshake offering h2"
    } else {
        "the server's first HTTP/2 frame"
    };
    match preflight_until(addr, tls, deadline, control) {
        Check::Told(spoke) => Ok(spoke),
        Check::Interrupted => Err(EngineError::Interrupted(
            "during the HTTP/2 check, before the run started",
        )),
        Check::Late => Err(EngineError::Unanswered(format!(
            "the HTTP/2 check of {addr} ({what}) did not finish within {}; the server answers too slowly or \
             not at all (it waits at most min(--timeout, {} s)): check the server, or give a longer --timeout",
            throng_plan::format_duration(bound),
            PREFLIGHT_LIMIT.as_secs()
        ))),
    }
}

/// How a preflight ended.
enum Check {
    /// What the server spoke instead of HTTP/2 (None: h2, or it cannot be told).
    Told(Option<String>),
    /// The deadline passed first.
    Late,
    /// A signal came first.
    Interrupted,
}

/// The preflight, against a deadline and a signal.
fn preflight_until(
    addr: std::net::SocketAddr,
    tls: Option<&crate::transport::TlsClient>,
    deadline: std::time::Instant,
    control: &crate::Control,
) -> Check {
    use std::io::Write;
    // The next wait: until the deadline, in slices short enough to see a
    // signal; None when the check must end.
    let next = || -> Result<Duration, Check> {
        if control.was_interrupted() {
            return Err(Check::Interrupted);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(Check::Late);
        }
        Ok(left.min(PREFLIGHT_POLL))
    };
    // A wait that ended without an answer: its slice passed, or a signal
    // came (a socket call with a timeout fails with EINTR even under
    // SA_RESTART); the loop looks at the clock and the signal again.
    let waited = |e: &std::io::Error| {
        use std::io::ErrorKind as K;
        matches!(e.kind(), K::WouldBlock | K::TimedOut | K::Interrupted)
    };
    // connect() cannot be woken: it runs on a thread of its own, bounded
    // by the deadline, and is waited for in slices. A refused or
    // unreachable address is for the run to count.
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if left.is_zero() {
        return Check::Late;
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let connecting = std::thread::Builder::new()
        .name("throng-h2-check".into())
        .spawn(move || {
            let _ = tx.send(std::net::TcpStream::connect_timeout(&addr, left));
        });
    if connecting.is_err() {
        return Check::Told(None);
    }
    let mut tcp = loop {
        let slice = match next() {
            Ok(s) => s,
            Err(end) => return end,
        };
        match rx.recv_timeout(slice) {
            Ok(Ok(tcp)) => break tcp,
            Ok(Err(e)) if waited(&e) => return Check::Late,
            Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Check::Told(None),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    };
    match tls {
        Some(t) => {
            let Ok(mut c) =
                throng_tls::rustls::ClientConnection::new(std::sync::Arc::clone(&t.config), t.server_name.clone())
            else {
                return Check::Told(None);
            };
            while c.is_handshaking() {
                let slice = match next() {
                    Ok(s) => s,
                    Err(end) => return end,
                };
                if c.wants_write() {
                    if tcp.set_write_timeout(Some(slice)).is_err() {
                        return Check::Told(None);
                    }
                    match c.write_tls(&mut tcp) {
                        Ok(_) => {}
                        Err(e) if waited(&e) => {}
                        Err(_) => return Check::Told(None),
                    }
                    continue;
                }
                if tcp.set_read_timeout(Some(slice)).is_err() {
                    return Check::Told(None);
                }
                match c.read_tls(&mut tcp) {
                    Ok(0) => return Check::Told(None),
                    Ok(_) => {
                        if let Err(e) = c.process_new_packets() {
                            // Tell the server why (best effort).
                            let _ = c.write_tls(&mut tcp);
                            // The server would not agree on h2: a rustls
                            // client that offered only h2 ends the
                            // handshake itself.
                            return Check::Told(
                                (throng_tls::failure_class(&e) == "no_application_protocol")
                                    .then(|| "a TLS handshake that does not offer h2 by ALPN".to_string()),
                            );
                        }
                    }
                    Err(e) if waited(&e) => {}
                    Err(_) => return Check::Told(None),
                }
            }
            Check::Told(match c.alpn_protocol() {
                Some(b"h2") => None,
                Some(other) => Some(format!("ALPN {}", String::from_utf8_lossy(other))),
                None => Some("no ALPN protocol (HTTP/1.1)".to_string()),
            })
        }
        None => {
            // The preface and an empty SETTINGS frame.
            let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            let mut sent = 0;
            while sent < hello.len() {
                let slice = match next() {
                    Ok(s) => s,
                    Err(end) => return end,
                };
                if tcp.set_write_timeout(Some(slice)).is_err() {
                    return Check::Told(None);
                }
                match tcp.write(&hello[sent..]) {
                    Ok(0) => return Check::Told(None),
                    Ok(n) => sent += n,
                    Err(e) if waited(&e) => {}
                    Err(_) => return Check::Told(None),
                }
            }
            let mut head = [0u8; 9];
            let mut got = 0;
            while got < head.len() {
                let slice = match next() {
                    Ok(s) => s,
                    Err(end) => return end,
                };
                if tcp.set_read_timeout(Some(slice)).is_err() {
                    return Check::Told(None);
                }
                match std::io::Read::read(&mut tcp, &mut head[got..]) {
                    Ok(0) => return Check::Told(None),
                    Ok(n) => got += n,
                    Err(e) if waited(&e) => {}
                    Err(_) => return Check::Told(None),
                }
            }
            Check::Told(if head[3] == 4 {
                None
            } else if head.starts_with(b"HTTP/1") {
                Some("HTTP/1.x in the clear".to_string())
            } else {
                Some("something that is not an HTTP/2 SETTINGS frame".to_string())
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_keeps_what_it_was_asked_for_within_bounds() {
        let mut slot = Slot::new(false);
        let mut h = http::HeaderMap::new();
        h.insert("set-cookie", http::HeaderValue::from_static("sid=1"));
        h.insert("x-big", http::HeaderValue::from_str(&"v".repeat(70_000)).unwrap());
        slot.begin();
        slot.head(200, &h);
        slot.chunk(b"hello");
        // Nothing kept unless asked.
        assert!(slot.headers().is_empty() && slot.body().is_empty() && !slot.body_truncated());
        assert_eq!((slot.status, slot.body_bytes), (200, 5));
        slot.reset(Keep {
            server: false,
            headers: true,
            body: 4,
        });
        slot.begin();
        slot.head(201, &h);
        slot.chunk(b"hel");
        slot.chunk(b"lo");
        assert_eq!(slot.body(), b"hell");
        assert!(slot.body_truncated());
        assert_eq!(slot.body_bytes, 5);
        // The huge header is counted, not kept.
        assert_eq!(slot.headers(), [("set-cookie".to_string(), "sid=1".to_string())]);
        assert!(slot.header_bytes > 70_000);
        slot.begin();
        assert!(slot.headers().is_empty() && slot.body().is_empty() && !slot.body_truncated());
    }

    #[test]
    fn grpc_status_from_the_call_or_the_http_status() {
        assert_eq!(grpc_code(Some(b"14")), Some(14));
        assert_eq!(grpc_code(Some(b"x")), None);
        assert_eq!(grpc_code(None), None);
        assert_eq!(grpc_code_or_http(200, Some(14)), 14);
        assert_eq!(grpc_code_or_http(503, Some(0)), 0);
        assert_eq!(grpc_code_or_http(200, None), 13);
        assert_eq!(grpc_code_or_http(404, None), 12);
        assert_eq!(grpc_code_or_http(503, None), 14);
        assert_eq!(grpc_code_or_http(418, None), 2);
    }

    /// Handles one frame of the raw server below: SETTINGS acknowledged,
    /// every request but stream 1's answered 200 "ok", resets noted.
    fn serve_frame(f: throng_http2::frame::Frame<'_>, out: &mut Vec<u8>, resets: &mut Vec<(u32, u32)>) {
        use throng_http2::frame::{self, Frame};
        match f {
            Frame::Settings { ack: false, .. } => frame::encode_settings_ack(out),
            Frame::Headers { stream, .. } if stream != 1 => {
                let mut block = Vec::new();
                throng_http2::hpack::encode_field(&mut block, b":status", b"200");
                frame::encode_headers(out, stream, &block, false, frame::DEFAULT_MAX_FRAME_SIZE);
                frame::encode_data(out, stream, b"ok", true);
            }
            Frame::RstStream { stream, code } => resets.push((stream, code)),
            _ => {}
        }
    }

    /// An HTTP/2 server for one connection, frame by frame; returns the
    /// RST_STREAM frames the client sent once it closes.
    async fn raw_server(listener: tokio::net::TcpListener) -> Vec<(u32, u32)> {
        use throng_http2::frame::{self, Parsed};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.unwrap();
        let mut out = Vec::new();
        frame::encode_settings(&mut out, &[(frame::setting::MAX_CONCURRENT_STREAMS, 10)]);
        s.write_all(&out).await.unwrap();
        let (mut buf, mut resets, mut chunk) = (Vec::new(), Vec::new(), [0u8; 4096]);
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return resets;
            }
            buf.extend_from_slice(&chunk[..n]);
            out.clear();
            while let Parsed::Frame(f, len) = frame::parse(&buf, frame::DEFAULT_MAX_FRAME_SIZE).unwrap() {
                serve_frame(f, &mut out, &mut resets);
                buf.drain(..len);
            }
            s.write_all(&out).await.unwrap();
        }
    }

    /// An HTTP/2 server for one connection whose SETTINGS allow no stream;
    /// with `raise`, a second SETTINGS allows one, 100 ms after the
    /// handshake. Every stream is answered 200.
    async fn capped_server(listener: tokio::net::TcpListener, raise: bool) {
        use throng_http2::frame::{self, Frame, Parsed};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.unwrap();
        let mut out = Vec::new();
        frame::encode_settings(&mut out, &[(frame::setting::MAX_CONCURRENT_STREAMS, 0)]);
        s.write_all(&out).await.unwrap();
        let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let mut raised = false;
            out.clear();
            while let Parsed::Frame(f, len) = frame::parse(&buf, frame::DEFAULT_MAX_FRAME_SIZE).unwrap() {
                match f {
                    Frame::Settings { ack: false, .. } => {
                        frame::encode_settings_ack(&mut out);
                        raised = raise;
                    }
                    Frame::Headers { stream, .. } => {
                        let mut block = Vec::new();
                        throng_http2::hpack::encode_field(&mut block, b":status", b"200");
                        frame::encode_headers(&mut out, stream, &block, false, frame::DEFAULT_MAX_FRAME_SIZE);
                        frame::encode_data(&mut out, stream, b"ok", true);
                    }
                    _ => {}
                }
                buf.drain(..len);
            }
            s.write_all(&out).await.unwrap();
            if raised {
                tokio::time::sleep(Duration::from_millis(100)).await;
                out.clear();
                frame::encode_settings(&mut out, &[(frame::setting::MAX_CONCURRENT_STREAMS, 1)]);
                s.write_all(&out).await.unwrap();
            }
        }
    }

    /// A connection to `capped_server`, and a request's header block.
    async fn capped(raise: bool) -> (H2Conn, Vec<u8>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(capped_server(listener, raise));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
        let (shared, driver) = handshake(4, Transport::Plain(tcp), sleep.as_mut()).await.unwrap();
        assert_eq!(shared.server_max.get(), 0);
        let c = H2Conn {
            shared,
            opened: Instant::now(),
            id: 0,
            limit: 4,
            in_flight: Cell::new(0),
            carried: Cell::new(0),
            driver,
        };
        let uri: http::Uri = "http://127.0.0.1/".parse().unwrap();
        (c, encode_head(&http::Method::GET, &uri, &http::HeaderMap::new()))
    }

    #[test]
    fn a_body_is_held_to_its_content_length() {
        let ten = [(&b":status"[..], &b"200"[..]), (&b"content-length"[..], &b"10"[..])];
        let mut s = Slot::new(false);
        s.begin();
        s.head_fields(200, || ten.iter().copied());
        s.chunk(b"abc");
        assert!(s.short_of_length() && !s.over_length());
        s.chunk(b"defghij");
        assert!(!s.short_of_length() && !s.over_length());
        s.chunk(b"k");
        assert!(s.over_length());
        // A new response forgets the last one's length.
        s.begin();
        assert!(!s.short_of_length());
        // No body to check: a HEAD request's, a 204's, a 304's; nor a
        // length that is no number.
        let mut head = Slot::new(true);
        head.head_fields(200, || ten.iter().copied());
        assert!(!head.short_of_length());
        for status in [204, 304] {
            s.begin();
            s.head_fields(status, || ten.iter().copied());
            assert!(!s.short_of_length(), "{status}");
        }
        let bad = [(&b"content-length"[..], &b"ten"[..])];
        s.begin();
        s.head_fields(200, || bad.iter().copied());
        assert!(!s.short_of_length());
    }

    #[test]
    fn a_stream_waits_for_the_servers_cap_to_rise() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let (c, block) = capped(true).await;
            let mut slot = Slot::new(false);
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let r = send_on(&c, &block, &Bytes::new(), false, false, 30, &mut slot, sleep.as_mut()).await;
            assert!(r.is_ok(), "{r:?}");
            assert_eq!((slot.status, slot.body_bytes), (200, 2));
            assert!(!c.dead());
            c.driver.abort();
        });
    }

    #[test]
    fn a_cap_that_never_rises_is_stream_limit_and_ends_the_connection() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let (c, block) = capped(false).await;
            let mut slot = Slot::new(false);
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_millis(100)));
            let r = send_on(&c, &block, &Bytes::new(), false, false, 30, &mut slot, sleep.as_mut()).await;
            let f = r.unwrap_err();
            assert_eq!((f.class, f.written), (ErrorClass::H2("stream_limit"), 0));
            assert!(c.dead(), "the connection takes no new stream: it is replaced");
            assert_eq!(c.shared.conn.borrow().open_streams(), 0, "nothing was sent");
            c.driver.abort();
        });
    }

    #[test]
    fn a_stream_past_its_deadline_is_cancelled_and_the_connection_goes_on() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::task::spawn_local(raw_server(listener));
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let (shared, driver) = handshake(4, Transport::Plain(tcp), sleep.as_mut()).await.unwrap();
            assert_eq!(shared.server_max.get(), 10);
            let c = H2Conn {
                shared,
                opened: Instant::now(),
                id: 0,
                limit: 4,
                in_flight: Cell::new(0),
                carried: Cell::new(0),
                driver,
            };
            let uri: http::Uri = "http://127.0.0.1/".parse().unwrap();
            let block = encode_head(&http::Method::GET, &uri, &http::HeaderMap::new());
            let mut slot = Slot::new(true);
            // Stream 1 is never answered: its wait ends and it is cancelled.
            sleep
                .as_mut()
                .reset((Instant::now() + Duration::from_millis(50)).into());
            let r = send_on(&c, &block, &Bytes::new(), false, false, 0, &mut slot, sleep.as_mut()).await;
            assert_eq!(r.unwrap_err().class, ErrorClass::TimeoutResponse);
            assert!(slot.head_request(), "the requester's slot came back");
            // The connection goes on: streams 3, 5 and 7 are answered.
            for _ in 0..3 {
                sleep.as_mut().reset((Instant::now() + Duration::from_secs(10)).into());
                let r = send_on(&c, &block, &Bytes::new(), false, false, 0, &mut slot, sleep.as_mut()).await;
                assert!(r.is_ok(), "{r:?}");
                assert_eq!((slot.status, slot.body_bytes), (200, 2));
            }
            assert!(c.shared.streams.borrow().is_empty());
            assert_eq!(c.shared.conn.borrow().open_streams(), 0);
            assert!(!c.dead());
            c.driver.abort();
            drop(c);
            let resets = tokio::time::timeout(Duration::from_secs(10), server)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(resets, [(1, ErrorCode::CANCEL.0)]);
        });
    }

    /// The size of what `f` returns, without calling it.
    fn size_of_return<A, R>(_: impl FnOnce(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A run opens its connections all at once, each in an `open` future
    /// of its own: at 10,000 h2c connections those were 36 MB (3.6 KB
    /// each, mostly TLS and proxy state a plain connection never uses)
    /// until conn::open_transport boxed those parts. Unoptimized, it
    /// measured 3,696 bytes before, 1,136 after.
    #[test]
    fn opening_a_connection_stays_small() {
        type Args<'a> = (&'a Ctx, &'a Spec, Pin<&'a mut Sleep>, Option<&'a mut Row<'a>>);
        let size = size_of_return(|a: Args| open(a.0, a.1, None, a.2, a.3));
        assert!(size <= 1_600, "opening an HTTP/2 connection is a {size}-byte future");
        let size = size_of_return(
            |(c, slot, sleep, body): (&H2Conn, &mut Slot, Pin<&mut Sleep>, &Bytes)| {
                send_on(c, &[], body, false, false, 0, slot, sleep)
            },
        );
        assert!(size <= 400, "a stream's exchange is a {size}-byte future");
    }
}
