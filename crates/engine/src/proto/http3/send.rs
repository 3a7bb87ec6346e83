//! One request on its own stream, timed: sent, its response read (no
//! recording here; `stream.rs`'s `exchange` records the outcome).

use std::time::Instant;

use bytes::{Buf, Bytes};
use throng_metrics::{ErrorClass, Reply};

use super::SendRequest;
use super::conn::with_clock;
use super::errors::stream_class;
use super::socket::WireClock;
use super::sse::{Tap, read_events};
use super::state::{Broke, ConnState, Done, Progress, Want};
use crate::ctx::Ctx;

/// [`one`] within `--timeout` from `t_send`, its stream counted closed
/// however it ends. A stream that could not even open in that time (the
/// server's MAX_STREAMS used up and not renewed) is `h3.stream_limit`,
/// and its connection is replaced: it failed as a whole. With `tap` (an
/// event stream), `--timeout` bounds the wait for the response's head and
/// then for each event, not the whole body.
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
    tap: Option<&mut Tap<'_>>,
) -> Result<Done, Broke> {
    progress.begin();
    let deadline = (t_send + ctx.spec.timeout).into();
    let outcome = match tap {
        None => tokio::time::timeout_at(deadline, one(ctx, request, body, send, want, state, progress, None))
            .await
            .unwrap_or_else(|_| Err(expired(progress))),
        Some(tap) => one(ctx, request, body, send, want, state, progress, Some((tap, t_send))).await,
    };
    if progress.opened.get() {
        state.in_flight.set(state.in_flight.get() - 1);
        ctx.rec.borrow_mut().stream_closed();
    }
    outcome
}

/// How an exchange whose time ran out fails: the response was late, or
/// its stream never opened (see [`timed`]).
fn expired(progress: &Progress) -> Broke {
    match progress.opened.get() {
        true => (ErrorClass::TimeoutResponse, false),
        false => (STREAM_LIMIT, true),
    }
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

/// The exchange itself; with `tap`, an event stream started at its
/// `Instant`, whose head is awaited here for `--timeout`. Err: the class,
/// and whether the connection failed (not only this stream).
#[allow(clippy::too_many_arguments)]
async fn one(
    ctx: &Ctx,
    request: http::Request<()>,
    body: &Bytes,
    send: &mut SendRequest,
    want: Want,
    state: &ConnState,
    progress: &Progress,
    tap: Option<(&mut Tap<'_>, Instant)>,
) -> Result<Done, Broke> {
    let head = request.method() == http::Method::HEAD;
    // The sends so far: the first after this carries the request's start.
    let began = with_clock(ctx, WireClock::mark);
    let asked = async {
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
        let handed = Instant::now();
        // quinn sends it when its connection's task runs next: the first send
        // after this carries the request's end.
        let ended = with_clock(ctx, WireClock::mark);
        let resp = final_response(&mut stream).await?;
        Ok((stream, handed, ended, resp))
    };
    let (mut stream, handed, ended, resp) = match &tap {
        None => asked.await?,
        Some((_, t_send)) => tokio::time::timeout_at((*t_send + ctx.spec.timeout).into(), asked)
            .await
            .unwrap_or_else(|_| Err(expired(progress)))?,
    };
    let now = Instant::now();
    let wire = Wire::read(ctx, began, ended, handed, now);
    let first = wire.received.unwrap_or(now);
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
    let mut early = None;
    match tap {
        Some((tap, t_send)) => {
            (body_bytes, early) = read_events(ctx, &mut stream, tap, progress, header_bytes, t_send).await?;
        }
        None => {
            while let Some(chunk) = stream.recv_data().await.map_err(|e| stream_class(&e))? {
                body_bytes += chunk.remaining() as u64;
                progress.read.set(header_bytes + body_bytes);
                if length.is_some_and(|l| body_bytes > l) {
                    // More than its content-length: malformed (RFC 9114 4.1.2).
                    return Err((ErrorClass::Protocol, false));
                }
            }
            if length.is_some_and(|l| body_bytes < l) {
                // The stream ended short of its content-length, as an
                // HTTP/1.1 body cut off by the connection's end.
                return Err((ErrorClass::Eof, false));
            }
        }
    }
    let (done, kernel) = wire.end(ctx);
    Ok(Done {
        began: wire.began,
        sent: wire.sent,
        // A stamped end can precede the clock of an unstamped head.
        first: first.min(done),
        done,
        kernel,
        reply: Reply {
            status: resp.status().as_u16(),
            header_bytes,
            body_bytes,
        },
        server,
        location,
        early,
    })
}

/// A request's times on the wire, as the worker's socket saw them when its
/// response head arrived (`crate::proto::http3::socket` says what they
/// mean with several connections on the socket).
pub(super) struct Wire {
    /// The first send after the stream was asked for (None: too many sends
    /// since, or none).
    pub(super) began: Option<Instant>,
    /// The first send after the request was handed over, else the handing.
    pub(super) sent: Instant,
    /// The latest datagram's arrival (None: no stamp, or implausible).
    pub(super) received: Option<Instant>,
}

impl Wire {
    /// The times of a request whose stream took the send mark `began` when
    /// asked for and `ended` when its request was `handed` over, read when
    /// its response head came (`now`).
    pub(super) fn read(ctx: &Ctx, began: Option<u64>, ended: Option<u64>, handed: Instant, now: Instant) -> Wire {
        with_clock(ctx, |c| {
            // A send is between the handing over and now, whatever the clock.
            let sent = ended
                .and_then(|m| c.sent_after(m))
                .filter(|s| *s >= handed && *s <= now)
                .unwrap_or(handed);
            let began = began.and_then(|m| c.sent_after(m)).filter(|b| *b <= sent);
            Wire {
                began,
                sent,
                received: c.received(now, sent),
            }
        })
        .unwrap_or(Wire {
            began: None,
            sent: handed,
            received: None,
        })
    }

    /// The response's end, seen now: the latest datagram's arrival and
    /// true, or now and false (no stamp, or implausible).
    pub(super) fn end(&self, ctx: &Ctx) -> (Instant, bool) {
        let now = Instant::now();
        match with_clock(ctx, |c| c.received(now, self.sent)).flatten() {
            Some(at) => (at, true),
            None => (now, false),
        }
    }
}
