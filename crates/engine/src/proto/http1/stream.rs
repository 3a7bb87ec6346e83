//! HTTP/1.1 with an event-stream response (`--sse`, `--llm`): write the
//! request, then read the body event by event through an
//! [`events::Watch`](crate::proto::events::Watch) until the server ends
//! it, `--sse-events` or `--sse-duration` ends it, or it stalls.
//!
//! A hand-polled future as `io.rs`'s exchange, with one deadline re-armed
//! as events arrive: the stall limit (`--timeout` after the last event, or
//! after the request's start before any) or `--sse-duration`'s end,
//! whichever is first. A stream whose response has started ends, counted
//! `stopped`, when the run stops (its `-d` is over, or it was asked to
//! stop): a stream the server never ends does not outlive the run.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Recorder};
use tokio::io::{AsyncWrite, ReadBuf};
use tokio::sync::futures::Notified;
use tokio::time::Sleep;

use super::{Feed, ParseError, ResponseReader};
use crate::conn::{Failed, Timing};
use crate::errors::{Stage, classify};
use crate::proto::events::Watch;
use crate::transport::Transport;

/// How a stream exchange ends besides its timing: why, when it ended
/// before the server ended it (`events`, `completed` at `[DONE]`,
/// `duration`, `stopped` by the run's end).
pub(crate) type EndedEarly = Option<&'static str>;

/// Writes `request` (its first `written` bytes already out at `t_send`)
/// and reads the event stream that answers it into `watch`, recording
/// event phases in `rec`. `timeout`: the longest wait for the response's
/// head and then for each event; `until`: when `--sse-duration` ends it;
/// `stop`: the run's stopping flag and its notification (created before
/// the flag was read).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange_stream(
    stream: &mut Transport,
    request: &[u8],
    mut written: usize,
    t_send: Instant,
    reader: &mut ResponseReader,
    watch: &mut Watch,
    rec: &RefCell<Recorder>,
    scratch: &RefCell<Box<[u8]>>,
    timeout: Duration,
    until: Option<Instant>,
    mut sleep: Pin<&mut Sleep>,
    (stopping, mut stop): (&Cell<bool>, Pin<&mut Notified<'_>>),
) -> Result<(Timing, EndedEarly), Failed> {
    reader.tap();
    let mut last_write = t_send;
    let mut sent: Option<Instant> = None;
    let mut first: Option<Instant> = None;
    // Before the response starts, only --timeout counts: a --sse-duration
    // shorter than the server's first byte is no timeout of the server's.
    let deadline = |watch: &Watch, started: bool| {
        let stall = watch.last_progress().max(t_send) + timeout;
        match until {
            Some(u) if started => u.min(stall),
            _ => stall,
        }
    };
    sleep.as_mut().reset(deadline(watch, false).into());
    poll_fn(|cx| {
        let fail = |class, written| Poll::Ready(Err(Failed { class, written }));
        // The deadline passed: the stream's time is up (ok), or it stalled.
        let expired = |reader: &ResponseReader, first: Option<Instant>, sent: Option<Instant>, written| {
            let now = Instant::now();
            if until.is_some_and(|u| now >= u) && reader.started() {
                return Poll::Ready(Ok((
                    timing(sent.unwrap_or(t_send), first.unwrap_or(now), now),
                    Some("duration"),
                )));
            }
            let class = if reader.started() {
                ErrorClass::Sse("stalled")
            } else {
                ErrorClass::TimeoutResponse
            };
            fail(class, written)
        };
        while written < request.len() {
            let before = Instant::now();
            match Pin::new(&mut *stream).poll_write(cx, &request[written..]) {
                Poll::Ready(Ok(0)) => return fail(ErrorClass::Reset, written),
                Poll::Ready(Ok(n)) => {
                    written += n;
                    last_write = before;
                }
                Poll::Ready(Err(e)) => return fail(classify(&e, Stage::Exchange), written),
                Poll::Pending => {
                    if sleep.as_mut().poll(cx).is_ready() {
                        return fail(ErrorClass::TimeoutResponse, written);
                    }
                    return Poll::Pending;
                }
            }
        }
        if sent.is_none() {
            match Pin::new(&mut *stream).poll_flush(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return fail(classify(&e, Stage::Exchange), written),
                Poll::Pending => {
                    if sleep.as_mut().poll(cx).is_ready() {
                        return fail(ErrorClass::TimeoutResponse, written);
                    }
                    return Poll::Pending;
                }
            }
        }
        let sent_at = *sent.get_or_insert(last_write);
        loop {
            let mut buf = scratch.borrow_mut();
            let mut rb = ReadBuf::new(&mut buf[..]);
            match stream.poll_read_stamped(cx, &mut rb, false) {
                Poll::Pending => {
                    // Polled once at most: it ends the exchange when ready.
                    if reader.started() && (stopping.get() || stop.as_mut().poll(cx).is_ready()) {
                        let now = Instant::now();
                        return Poll::Ready(Ok((timing(sent_at, first.unwrap_or(now), now), Some("stopped"))));
                    }
                    if sleep.as_mut().poll(cx).is_ready() {
                        return expired(reader, first, sent, written);
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return fail(classify(&e, Stage::Exchange), written),
                Poll::Ready(Ok(_)) => {
                    let data = rb.filled();
                    let now = Instant::now();
                    if data.is_empty() {
                        return match reader.eof() {
                            Ok(()) => Poll::Ready(Ok((timing(sent_at, first.unwrap_or(now), now), None))),
                            Err(_) => fail(ErrorClass::Eof, written),
                        };
                    }
                    let first_at = *first.get_or_insert(now);
                    let fed = reader.feed(data);
                    let mut too_large = Ok(());
                    reader.drain_tapped(|body| too_large = watch.feed(body, now, &mut rec.borrow_mut()));
                    if too_large.is_err() {
                        return fail(ErrorClass::Sse("too_large"), written);
                    }
                    match fed {
                        Ok(Feed::More) => {}
                        Ok(Feed::Done { extra }) => {
                            let mut t = timing(sent_at, first_at, now);
                            t.extra = extra > 0;
                            return Poll::Ready(Ok((t, watch.ended())));
                        }
                        Err(ParseError::Malformed) => return fail(ErrorClass::Protocol, written),
                        Err(ParseError::Eof) => return fail(ErrorClass::Eof, written),
                    }
                    if let Some(why) = watch.ended() {
                        // Ended before the server ended it: the rest of
                        // the body is unread, so the connection closes.
                        return Poll::Ready(Ok((timing(sent_at, first_at, now), Some(why))));
                    }
                    sleep.as_mut().reset(deadline(watch, reader.started()).into());
                }
            }
        }
    })
    .await
}

/// A stream's timing; a stream's connection is reused only when the
/// server ended the response (the caller clears `extra` then).
fn timing(sent: Instant, first: Instant, done: Instant) -> Timing {
    Timing {
        sent,
        first,
        done: done.max(first),
        extra: true,
        kernel: false,
    }
}
