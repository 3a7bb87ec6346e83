//! A request whose response is an event stream (`--sse`, `--llm`) over
//! HTTP/3: its body read as it arrives through an
//! [`events::Watch`](crate::proto::events::Watch), as HTTP/1.1's and
//! HTTP/2's are: one deadline re-armed as events arrive (the stall limit,
//! `--timeout` after the last event, or `--sse-duration`'s end), and a
//! stream ended before the server ended it (`--sse-events`, `[DONE]`, the
//! run's end, a stall, an event too large) stopped with STOP_SENDING, so
//! that the connection's other streams go on.
//!
//! ```text
//!  response head ─► DATA ─► Watch::feed ─► first_event | event_gap (| ttft, itl)
//!                    │         └─ ended (events, completed) ─► STOP_SENDING
//!                    ├─ FIN ─► the server ended it
//!                    └─ deadline: duration (ok) | sse.stalled ─► STOP_SENDING
//! ```

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Instant;

use bytes::{Buf, Bytes};
use throng_metrics::ErrorClass;
use throng_plan::StreamSpec;
use tokio::time::Sleep;

use super::errors::stream_class;
use super::state::{Broke, Done, Progress};
use crate::ctx::Ctx;
use crate::proto::events::Watch;
use crate::proto::http1::EndedEarly;
use crate::proto::http2::Bounds;

type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// DATA chunks read in one poll at most: a server that sends without a
/// pause still lets the deadline, the run's stop and other tasks be seen.
const CHUNKS_PER_POLL: usize = 32;

/// One request's event stream: what it reads and how it ended.
pub(super) struct Tap<'a> {
    spec: &'a StreamSpec,
    watch: Box<Watch>,
}

impl<'a> Tap<'a> {
    /// The stream of a request whose latency starts at `origin`, when the
    /// run reads streams. Boxed: only stream runs pay for the reader.
    pub(super) fn of(ctx: &'a Ctx, origin: Instant) -> Option<Tap<'a>> {
        let spec = ctx.spec.stream.as_deref()?;
        Some(Tap {
            spec,
            watch: Box::new(Watch::new(spec, origin)),
        })
    }

    /// Records how the stream ended (see crate::exchange::stream_ended):
    /// `done` is the exchange's outcome, `ok` whether its status was
    /// expected (None: it failed), `t_send` its start.
    pub(super) fn ended(&self, ctx: &Ctx, done: &Result<Done, Broke>, ok: Option<bool>, t_send: Instant) {
        let (outcome, early) = match done {
            Ok(d) => (
                Ok(crate::conn::Timing {
                    sent: d.sent,
                    first: d.first,
                    done: d.done,
                    extra: false,
                    kernel: d.kernel,
                }),
                d.early,
            ),
            Err((class, _)) => (
                Err(crate::conn::Failed {
                    class: *class,
                    written: 0,
                }),
                None,
            ),
        };
        crate::exchange::stream_ended(ctx, &self.watch, self.spec, &outcome, ok, early, t_send);
    }
}

/// Reads `stream`'s body (its head, `header_bytes` long, read) into
/// `tap`'s watch until the server ends it (None), it ends early (why), or
/// it fails; `progress` counts what arrived, and the body's length is
/// returned beside why it ended. A stream that did not end by the
/// server's FIN must be dropped, not read further. `t_send`: the request's start, from which the
/// first event is awaited for `--timeout`.
pub(super) async fn read_events(
    ctx: &Ctx,
    stream: &mut Stream,
    tap: &mut Tap<'_>,
    progress: &Progress,
    header_bytes: u64,
    t_send: Instant,
) -> Result<(u64, EndedEarly), Broke> {
    // Created before the stream's first look at the flag: a stop between
    // the two still wakes it.
    let stop = pin!(ctx.stop_notify.notified());
    let bounds = Bounds {
        timeout: ctx.spec.timeout,
        until: tap.spec.duration.map(|d| t_send + d),
        stopping: &ctx.stopping,
        stop,
    };
    let sleep = pin!(tokio::time::sleep_until(t_send.into()));
    let mut body = 0u64;
    let on_data = |piece: &[u8]| {
        body += piece.len() as u64;
        progress.read.set(header_bytes + body);
    };
    read_watch(ctx, stream, &mut tap.watch, bounds, t_send, sleep, on_data).await
}

/// Reads `stream`'s body into `watch` within `bounds` (the stall limit
/// re-armed per event from `t_send`, `until` ending it as `duration`, the
/// run's stop as `stopped`), `sleep` re-armed for it; `on_data` sees each
/// piece as it arrives. The body's length and why it ended early (None:
/// the server ended it). A stream that did not end by the server's FIN
/// must be dropped, not read further.
pub(super) async fn read_watch(
    ctx: &Ctx,
    stream: &mut Stream,
    watch: &mut Watch,
    mut bounds: Bounds<'_, '_>,
    t_send: Instant,
    mut sleep: Pin<&mut Sleep>,
    mut on_data: impl FnMut(&[u8]),
) -> Result<(u64, EndedEarly), Broke> {
    let (timeout, until) = (bounds.timeout, bounds.until);
    let deadline = |watch: &Watch| {
        let stall = watch.last_progress().max(t_send) + timeout;
        until.map_or(stall, |u| u.min(stall))
    };
    sleep.as_mut().reset(deadline(watch).into());
    let mut body = 0u64;
    let ended = poll_fn(|cx| {
        let mut more = true;
        for _ in 0..CHUNKS_PER_POLL {
            match stream.poll_recv_data(cx) {
                Poll::Pending => {
                    more = false;
                    break;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(stream_class(&e))),
                Poll::Ready(Ok(None)) => return Poll::Ready(Ok(None)),
                Poll::Ready(Ok(Some(mut chunk))) => {
                    let now = Instant::now();
                    body += chunk.remaining() as u64;
                    while chunk.has_remaining() {
                        let piece = chunk.chunk();
                        let n = piece.len();
                        on_data(piece);
                        if watch.feed(piece, now, &mut ctx.rec.borrow_mut()).is_err() {
                            return Poll::Ready(Err((ErrorClass::Sse("too_large"), false)));
                        }
                        chunk.advance(n);
                    }
                    if let Some(why) = watch.ended() {
                        return Poll::Ready(Ok(Some(why)));
                    }
                    sleep.as_mut().reset(deadline(watch).into());
                }
            }
        }
        // Polled once at most: it ends the exchange when ready.
        if bounds.stopping.get() || bounds.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ok(Some("stopped")));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(match until {
                Some(u) if Instant::now() >= u => Ok(Some("duration")),
                _ => Err((ErrorClass::Sse("stalled"), false)),
            });
        }
        if more {
            // Chunks left unread this time: poll again soon.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await;
    // A stream that did not end by the server's FIN is stopped when the
    // caller drops it: quinn sends STOP_SENDING then (with code 0, which
    // RFC 9114 9 reads as H3_NO_ERROR). Not h3's `stop_sending` with
    // H3_REQUEST_CANCELLED: h3-quinn 0.0.10 panics on it while a read is
    // outstanding, as one is whenever the last poll was pending
    // (hyperium/h3 issue 330; its unreleased fix still sends 0, issue 361).
    ended.map(|why| (body, why))
}
