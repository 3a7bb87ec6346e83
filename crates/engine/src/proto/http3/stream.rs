//! One request on its own stream: sent, its response read, recorded.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use throng_metrics::{ErrorClass, Phase, Reply};

use super::errors::stream_class;
use super::redirect::follow_h3;
use super::slot::ConnState;
use super::{H3Spec, SendRequest};
use crate::ctx::Ctx;
use crate::targets::Cursor;

/// When the parts of one exchange happened, and what came back.
pub(super) struct Done {
    pub(super) sent: Instant,
    pub(super) first: Instant,
    pub(super) done: Instant,
    pub(super) reply: Reply,
    pub(super) server: Option<String>,
    /// A redirect's `Location`, when the run follows redirects.
    pub(super) location: Option<String>,
}

/// A failed exchange: its class, and whether the whole connection failed.
pub(super) type Broke = (ErrorClass, bool);

/// What an exchange got done, kept however it ends (a timeout drops it
/// midway): whether its stream opened, the request bytes written and the
/// response bytes read, as `sent` and `received` count them.
#[derive(Default)]
pub(super) struct Progress {
    pub(super) opened: Cell<bool>,
    pub(super) written: Cell<u64>,
    pub(super) read: Cell<u64>,
}

impl Progress {
    pub(super) fn begin(&self) {
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
pub(super) struct Want {
    pub(super) server: bool,
    pub(super) location: bool,
    pub(super) request_len: u64,
}

/// [`one`] within `--timeout` from `t_send`, its stream counted closed
/// however it ends. A stream that could not even open in that time (the
/// server's MAX_STREAMS used up and not renewed) is `h3.stream_limit`,
/// and its connection is replaced: it failed as a whole.
#[allow(clippy::too_many_arguments)]
pub(super) async fn timed(
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
pub(super) const STREAM_LIMIT: ErrorClass = ErrorClass::H3("stream_limit");

/// The response head after any interim (1xx) ones, which h3 hands over as
/// responses of their own: skipped, as HTTP/1.1 and HTTP/2 skip them
/// (the wait is bounded by the caller's deadline).
pub(super) async fn final_response(
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
