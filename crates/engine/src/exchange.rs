//! One request on a connection: send it, read the response, record it.
//!
//! ```text
//!  loops (closed, open, storm, scenario)
//!     │ Session::exchange        write the request, read the response
//!     │ Session::reusable        keep the connection for another?
//!     │ record_exchange          phases, bytes, outcome (recorder and row)
//!     ▼
//!  Session::Http1(ResponseReader) ── http1::exchange ── Transport (tcp | tls)
//! ```
//!
//! A protocol is a variant of [`Session`]: HTTP/2 sits beside `Http1` as a
//! stream slot (crate::proto::http2), and the loops do not change. An enum, not a trait object: the one match per
//! call compiles to a direct call while there is one variant.

use std::cell::RefCell;
use std::pin::Pin;
use std::time::Instant;

use throng_metrics::{ErrorClass, Phase, Reply};
use throng_plan::StatusSet;
use tokio::time::Sleep;

use crate::conn::{Conn, Failed, Timing, close, open_connection, open_connection_to};
use crate::ctx::Ctx;
use crate::proto::http1::{self, Keep, ResponseReader};
use crate::rows::Row;
use crate::targets::{Cursor, Pick};
use crate::transport::Transport;

/// The protocol spoken on one connection, with its state between
/// exchanges (the response being read).
pub(crate) enum Session {
    /// HTTP/1.1: one request, then its response.
    Http1(ResponseReader),
    /// HTTP/2: a stream slot; it borrows a stream of one of the worker's
    /// pooled connections per request (see crate::proto::http2). A scenario VU
    /// speaking HTTP/2 or HTTP/3 reads its responses into one too (its own
    /// connection is crate::proto::http2::Own or crate::proto::http3::Own).
    Http2(crate::proto::http2::Slot),
}

impl Session {
    /// A session in the protocol the plan speaks (HTTP/1.1 today) whose
    /// requests are `HEAD` (responses without a body) or not.
    pub(crate) fn new(head_request: bool) -> Self {
        Session::Http1(ResponseReader::new(head_request))
    }

    /// A session in the protocol the worker's plan speaks: HTTP/2 stream
    /// slots when it has an HTTP/2 pool, else HTTP/1.1.
    pub(crate) fn for_worker(ctx: &Ctx) -> Self {
        match ctx.h2 {
            Some(_) => Session::Http2(crate::proto::http2::Slot::new(ctx.spec.head_request)),
            None => Session::new(ctx.spec.head_request),
        }
    }

    /// True when its requests are `HEAD`.
    pub(crate) fn head_request(&self) -> bool {
        match self {
            Session::Http1(r) => r.head_request(),
            Session::Http2(s) => s.head_request(),
        }
    }

    /// Prepares for the next response, keeping what `keep` asks for.
    #[inline]
    pub(crate) fn reset(&mut self, keep: Keep) {
        match self {
            Session::Http1(r) => r.reset(keep),
            Session::Http2(s) => s.reset(keep),
        }
    }

    /// Writes `request` (its first `written` bytes are already out, the last
    /// of them at `t_send`) and reads its response, within the deadline
    /// `sleep` was armed with; `stamped`: arrivals by the kernel's stamps.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) async fn exchange(
        &mut self,
        stream: &mut Transport,
        request: &[u8],
        written: usize,
        t_send: Instant,
        stamped: bool,
        scratch: &RefCell<Box<[u8]>>,
        sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        match self {
            Session::Http1(r) => http1::exchange(stream, request, written, t_send, stamped, r, scratch, sleep).await,
            // HTTP/2 slots exchange through crate::proto::http2::one_request; a
            // caller that asks here gets a protocol failure, not a hang.
            Session::Http2(_) => Err(Failed {
                class: ErrorClass::Protocol,
                written,
            }),
        }
    }

    /// The last response's status and sizes.
    #[inline]
    pub(crate) fn reply(&self) -> Reply {
        match self {
            Session::Http1(r) => Reply {
                status: r.status,
                header_bytes: r.header_bytes,
                body_bytes: r.body_bytes,
            },
            Session::Http2(s) => s.reply(),
        }
    }

    /// Bytes read off the wire for the last response (so far, when it failed).
    #[inline]
    pub(crate) fn wire_bytes(&self) -> u64 {
        match self {
            Session::Http1(r) => r.wire_bytes,
            Session::Http2(s) => s.wire_bytes(),
        }
    }

    /// True when the connection can carry another request after the
    /// response `timing` describes (the protocol's keep-alive decision).
    #[inline]
    pub(crate) fn reusable(&self, timing: &Timing) -> bool {
        match self {
            Session::Http1(r) => !r.close && !timing.extra,
            Session::Http2(_) => true,
        }
    }

    /// The `Server` header of the last response, when asked for.
    pub(crate) fn take_server(&mut self) -> Option<String> {
        match self {
            Session::Http1(r) => r.take_server(),
            Session::Http2(s) => s.server.take(),
        }
    }

    /// The headers of the last response, when asked for.
    pub(crate) fn headers(&self) -> &[(String, String)] {
        match self {
            Session::Http1(r) => r.headers(),
            Session::Http2(s) => s.headers(),
        }
    }

    /// The body of the last response, when asked for.
    pub(crate) fn body(&self) -> &[u8] {
        match self {
            Session::Http1(r) => r.body(),
            Session::Http2(s) => s.body(),
        }
    }

    /// The last response's body was longer than what was kept.
    pub(crate) fn body_truncated(&self) -> bool {
        match self {
            Session::Http1(r) => r.body_truncated,
            Session::Http2(s) => s.body_truncated(),
        }
    }
}

/// Records one exchange's outcome in the worker's recorder and in `row`:
/// the bytes sent, the five request phases (send, wait, receive, response,
/// latency from `origin`), and ok, rejected (status not in `expect`) or the
/// error. With `first_reply`, the response is kept as the run's first.
/// Some(whether the status was expected) when a response arrived.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_exchange(
    ctx: &Ctx,
    session: &mut Session,
    outcome: &Result<Timing, Failed>,
    request_len: usize,
    t_send: Instant,
    origin: Instant,
    expect: &StatusSet,
    first_reply: bool,
    row: Option<&mut Row<'_>>,
) -> Option<bool> {
    let mut rec = ctx.rec.borrow_mut();
    match *outcome {
        Ok(Timing {
            sent,
            first,
            done,
            kernel,
            ..
        }) => {
            ctx.count_stamp(kernel);
            rec.sent(sent, request_len as u64);
            rec.phase(done, Phase::Send, sent - t_send);
            rec.phase(done, Phase::Wait, first.saturating_duration_since(sent));
            rec.phase(done, Phase::Receive, done - first);
            rec.phase(done, Phase::Response, done - t_send);
            rec.phase(done, Phase::Latency, done.saturating_duration_since(origin));
            let reply = session.reply();
            let wire_bytes = session.wire_bytes();
            if first_reply {
                rec.first_reply(reply, session.take_server());
            }
            let ok = expect.contains(reply.status);
            if ok {
                rec.request_ok(done, reply, wire_bytes);
            } else {
                rec.request_rejected(done, reply, wire_bytes);
            }
            if let Some(r) = row {
                r.phase(Phase::Send, sent - t_send);
                r.phase(Phase::Wait, first.saturating_duration_since(sent));
                r.phase(Phase::Receive, done - first);
                r.phase(Phase::Response, done - t_send);
                r.phase(Phase::Latency, done.saturating_duration_since(origin));
                r.reply(reply.status, request_len as u64, wire_bytes);
                if ok {
                    r.ok();
                } else {
                    r.failed(ErrorClass::CheckFailed);
                }
            }
            Some(ok)
        }
        Err(f) => {
            let now = Instant::now();
            let wire_bytes = session.wire_bytes();
            rec.sent(now, f.written as u64);
            rec.request_failed(now, f.class, wire_bytes);
            if let Some(r) = row {
                r.reply(0, f.written as u64, wire_bytes);
                r.failed(f.class);
            }
            None
        }
    }
}

/// One request: connect if needed, exchange, record. `origin` is where
/// latency is measured from: the intended start when `scheduled` (open
/// loop; its row shows the lateness), else the actual one.
pub(crate) async fn one_request(
    ctx: &Ctx,
    conn: &mut Option<Conn>,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    origin: Instant,
    scheduled: bool,
    cursor: &mut Cursor,
) {
    if let Session::Http2(_) = session {
        // Boxed: keeps HTTP/1.1's task as small as it was.
        return Box::pin(crate::proto::http2::one_request(
            ctx, session, sleep, origin, scheduled, cursor,
        ))
        .await;
    }
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    let spec = &ctx.spec;
    // The plan's request, or the next of its several (an index, no copy).
    let entry = ctx.pick.as_ref().map(|p| {
        let i = p.next(cursor);
        p.started(i);
        (p, i)
    });
    let request: &[u8] = match entry {
        Some((p, i)) => p.request(i),
        None => &spec.request,
    };
    // Written when it drops: once, however the request ends.
    let now = Instant::now();
    let mut row = ctx.row(now);
    if let Some(r) = row.row() {
        if scheduled {
            r.phase(Phase::ScheduleLag, now.saturating_duration_since(origin));
        }
        if let Some(c) = conn.as_mut() {
            r.conn(c.id);
            c.report_setup(r);
        }
    }

    let (c, t_send, written) = match conn {
        Some(c) => (c, Instant::now(), 0),
        None => {
            // Boxed: the connect future is large and short-lived; keeping it
            // out of the task keeps every idle connection small. Plain TCP
            // sends the request with the connect (see conn::connect).
            let first: &[u8] = if spec.tls.is_some() { &[] } else { request };
            // With targets on several origins, to the one this connection serves.
            let opening = match ctx.pick.as_ref().and_then(|p| p.dest(cursor)) {
                Some(d) => {
                    Box::pin(open_connection_to(
                        ctx,
                        &d.route,
                        d.tls.as_ref(),
                        first,
                        None,
                        false,
                        sleep.as_mut(),
                        row.row(),
                    ))
                    .await
                }
                None => Box::pin(open_connection(ctx, first, None, false, sleep.as_mut(), row.row())).await,
            };
            match opening {
                Ok(o) => {
                    let c = conn.insert(o.conn);
                    // A request written with the connect started with the
                    // system call that wrote it.
                    (c, o.sent, o.written)
                }
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
            }
        }
    };
    if spec.follow.is_some() {
        // Boxed: only runs that follow redirects pay for the larger future.
        Box::pin(crate::redirect::one_followed(
            ctx,
            conn,
            session,
            sleep,
            t_send,
            written,
            origin,
            row.row(),
        ))
        .await;
        return;
    }
    let sent = exchange_request(
        ctx,
        c,
        session,
        sleep,
        t_send,
        written,
        origin,
        row.row(),
        request,
        entry,
    );
    if !sent.await {
        close(ctx, conn.take());
    }
}

/// Sends the plan's request on `c` (its first `written` bytes already out
/// since `t_send`), reads the response and records it (in `row` too); the
/// request was counted started and in flight by the caller. True when the
/// connection can carry another request.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange_on(
    ctx: &Ctx,
    c: &mut Conn,
    session: &mut Session,
    sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    row: Option<&mut Row<'_>>,
) -> bool {
    exchange_request(
        ctx,
        c,
        session,
        sleep,
        t_send,
        written,
        origin,
        row,
        &ctx.spec.request,
        None,
    )
    .await
}

/// [`exchange_on`] for `request`, one of the plan's several (`entry`:
/// its picker and index, for the per-target figures).
#[allow(clippy::too_many_arguments)]
async fn exchange_request(
    ctx: &Ctx,
    c: &mut Conn,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    t_send: Instant,
    written: usize,
    origin: Instant,
    row: Option<&mut Row<'_>>,
    request: &[u8],
    entry: Option<(&Pick, usize)>,
) -> bool {
    let spec = &ctx.spec;
    let keep_server = ctx.rec.borrow().wants_first_reply();
    session.reset(Keep {
        server: keep_server,
        ..Keep::default()
    });
    sleep.as_mut().reset((t_send + spec.timeout).into());
    let outcome = session
        .exchange(&mut c.stream, request, written, t_send, ctx.stamp, &ctx.scratch, sleep)
        .await;
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    let recorded = record_exchange(
        ctx,
        session,
        &outcome,
        request.len(),
        t_send,
        origin,
        &spec.expect,
        keep_server,
        row,
    );
    if let Some((p, i)) = entry {
        let response = match (&outcome, recorded) {
            (Ok(t), Some(ok)) => Some((t.done.saturating_duration_since(t_send), ok)),
            _ => None,
        };
        p.ended(&ctx.scenario, i, Instant::now(), response);
    }
    match outcome {
        Ok(timing) => recorded.is_some() && spec.keepalive && session.reusable(&timing),
        Err(_) => false,
    }
}
