//! A stream whose response is an event stream (`--sse`, `--llm`) over
//! HTTP/2: the driver keeps the stream's DATA in its entry's tap and wakes
//! the exchange, which reads it through an
//! [`events::Watch`](crate::proto::events::Watch) as HTTP/1.1's does
//! (crate::proto::http1::exchange_stream): one deadline re-armed as events
//! arrive (the stall limit, or `--sse-duration`'s end), and a stream ended
//! before the server ended it (`--sse-events`, `[DONE]`, the run's end) is
//! reset with CANCEL, so that the connection's other streams go on.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_metrics::{ErrorClass, Recorder};
use tokio::sync::futures::Notified;
use tokio::time::Sleep;

use super::Slot;
use super::driver::{H2Conn, Half, entry};
use super::stream::{Open, ready, start};
use crate::conn::{Failed, Timing};
use crate::proto::events::Watch;
use crate::proto::http1::EndedEarly;

/// What bounds a stream: `timeout`, the longest wait for the response's
/// head and then for each event; `until`, when `--sse-duration` ends it;
/// the run's stopping flag and its notification (created before the flag
/// was read).
pub(crate) struct Bounds<'a, 'n> {
    pub(crate) timeout: Duration,
    pub(crate) until: Option<Instant>,
    pub(crate) stopping: &'a Cell<bool>,
    pub(crate) stop: Pin<&'a mut Notified<'n>>,
}

/// Sends a request (its header `block`, then `body`) on a new stream of
/// `c` and reads its event-stream response into `watch`, recording event
/// phases in `rec`; the status and headers go into `slot`. `head_len`: the
/// header block's size as the caller counts it.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send_stream(
    c: &H2Conn,
    block: &[u8],
    body: &Bytes,
    head_len: usize,
    slot: &mut Slot,
    watch: &mut Watch,
    rec: &RefCell<Recorder>,
    mut sleep: Pin<&mut Sleep>,
    mut bounds: Bounds<'_, '_>,
) -> Result<(Timing, EndedEarly), Failed> {
    ready(c, slot, sleep.as_mut()).await?;
    let half = if body.is_empty() { Half::Closed } else { Half::WithBody };
    let (id, queued) = start(c, block, body.clone(), half, (false, true), head_len, slot)?;
    let sh = &*c.shared;
    let mut open = Open {
        c,
        id,
        slot,
        taken: false,
    };
    let (timeout, until) = (bounds.timeout, bounds.until);
    // Before the response starts, only the timeout counts: a
    // --sse-duration shorter than the server's first byte is no timeout
    // of the server's.
    let deadline = |watch: &Watch, t_send: Instant, started: bool| {
        let stall = watch.last_progress().max(t_send) + timeout;
        match until {
            Some(u) if started => u.min(stall),
            _ => stall,
        }
    };
    sleep.as_mut().reset(deadline(watch, queued, false).into());
    // Ok(None): the server ended the stream; Ok(Some(why)): it ended early.
    let ended = std::future::poll_fn(|cx| {
        let mut streams = sh.streams.borrow_mut();
        let Some(e) = entry(&mut streams, id) else {
            // Never: only this exchange removes its entry.
            return Poll::Ready(Err(ErrorClass::Protocol));
        };
        let started = e.first.is_some();
        if let Some(tap) = e.tap.as_mut()
            && !tap.is_empty()
        {
            if watch.feed(tap, Instant::now(), &mut rec.borrow_mut()).is_err() {
                return Poll::Ready(Err(ErrorClass::Sse("too_large")));
            }
            tap.clear();
            if let Some(why) = watch.ended() {
                return Poll::Ready(Ok(Some(why)));
            }
            sleep.as_mut().reset(deadline(watch, e.sent, started).into());
        }
        if let Some(end) = e.end {
            return Poll::Ready(end.map(|_| None));
        }
        if !e.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            e.waker = Some(cx.waker().clone());
        }
        // Polled once at most: it ends the exchange when ready.
        if started && (bounds.stopping.get() || bounds.stop.as_mut().poll(cx).is_ready()) {
            return Poll::Ready(Ok(Some("stopped")));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            return Poll::Ready(match (started, until) {
                (true, Some(u)) if now >= u => Ok(Some("duration")),
                (true, _) => Err(ErrorClass::Sse("stalled")),
                (false, _) => Err(ErrorClass::TimeoutResponse),
            });
        }
        Poll::Pending
    })
    .await;
    let now = Instant::now();
    let e = open.take();
    let unsent = e.as_ref().map_or(0, |e| e.body.len());
    let written = head_len + body.len().saturating_sub(unsent);
    let early = ended.map_err(|class| Failed { class, written })?;
    let done = match e.as_ref().and_then(|e| e.end) {
        Some(Ok(t)) if early.is_none() => t,
        _ => now,
    };
    let sent = e.as_ref().map_or(queued, |e| e.sent);
    let first = e.as_ref().and_then(|e| e.first).unwrap_or(done).min(done);
    Ok((
        Timing {
            sent,
            first,
            done,
            extra: false,
            kernel: false,
        },
        early,
    ))
}

/// A load run's stream (`--sse`, `--llm`) on a stream slot: its plan, and
/// once it ended, what its watch saw and why it ended early.
pub(crate) struct Read<'c> {
    pub(crate) ctx: &'c crate::ctx::Ctx,
    pub(crate) spec: &'c throng_plan::StreamSpec,
    /// The request's latency origin (an open loop's intended start).
    pub(crate) origin: Instant,
    pub(crate) watched: Option<(Box<Watch>, EndedEarly)>,
}

impl<'c> Read<'c> {
    /// The stream of a request started at `origin`, when the run reads
    /// streams.
    /// Boxed: a stream slot's future holds only a pointer.
    pub(crate) fn of(ctx: &'c crate::ctx::Ctx, origin: Instant) -> Option<Box<Read<'c>>> {
        let spec = ctx.spec.stream.as_deref()?;
        Some(Box::new(Read {
            ctx,
            spec,
            origin,
            watched: None,
        }))
    }

    /// Records how the stream ended (see crate::exchange::stream_ended).
    pub(crate) fn ended(&self, outcome: &Result<Timing, Failed>, recorded: Option<bool>, t_send: Instant) {
        if let Some((w, early)) = &self.watched {
            crate::exchange::stream_ended(self.ctx, w, self.spec, outcome, recorded, *early, t_send);
        }
    }
}

/// [`send_stream`] for a load run's stream: its watch goes into `read`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send_read(
    read: &mut Read<'_>,
    c: &H2Conn,
    block: &[u8],
    body: &Bytes,
    head_len: usize,
    slot: &mut Slot,
    sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    let ctx = read.ctx;
    let mut watch = Box::new(Watch::new(read.spec, read.origin));
    // Created before the stream's first look at the flag: a stop between
    // the two still wakes it.
    let stop = std::pin::pin!(ctx.stop_notify.notified());
    let bounds = Bounds {
        timeout: ctx.spec.timeout,
        until: read.spec.duration.map(|d| Instant::now() + d),
        stopping: &ctx.stopping,
        stop,
    };
    let r = send_stream(c, block, body, head_len, slot, &mut watch, &ctx.rec, sleep, bounds).await;
    match r {
        Ok((t, early)) => {
            read.watched = Some((watch, early));
            Ok(t)
        }
        Err(f) => {
            read.watched = Some((watch, None));
            Err(f)
        }
    }
}
