//! HTTP/1.1 on one connection: write a request, read its response.
//!
//! Written as a hand-polled future so that the hot path creates no futures,
//! timers or buffers per request: the per-task `Sleep` is re-armed (a cheap
//! deadline extension in tokio), and reads go into the worker's shared
//! scratch buffer, borrowed only inside a single poll.

use std::cell::RefCell;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use throng_metrics::ErrorClass;
use tokio::io::{AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::{Feed, ParseError, ResponseReader};
use crate::conn::{Failed, Timing};
use crate::errors::{Stage, classify};
use crate::stamps;
use crate::transport::Transport;

/// Writes `request` (its first `written` bytes are already out, the last
/// of them at `t_send`) and reads one response into `reader`, within the
/// deadline `sleep` was armed with. With `stamped`, arrivals are taken
/// from the kernel's receive stamps (see crate::stamps).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn exchange(
    stream: &mut Transport,
    request: &[u8],
    mut written: usize,
    t_send: Instant,
    stamped: bool,
    reader: &mut ResponseReader,
    scratch: &RefCell<Box<[u8]>>,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    // Taken just before each write: the last one's is the send time.
    let mut last_write = t_send;
    let mut sent: Option<Instant> = None;
    let mut first: Option<Instant> = None;
    poll_fn(|cx| {
        let fail = |class, written| Poll::Ready(Err(Failed { class, written }));
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
            // TLS buffers what the socket did not take; make sure it left.
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
            // The borrow lives only inside this poll: no other task of this
            // worker runs until it returns.
            let mut buf = scratch.borrow_mut();
            let mut rb = ReadBuf::new(&mut buf[..]);
            match stream.poll_read_stamped(cx, &mut rb, stamped) {
                Poll::Pending => {
                    if sleep.as_mut().poll(cx).is_ready() {
                        return fail(ErrorClass::TimeoutResponse, written);
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return fail(classify(&e, Stage::Exchange), written),
                Poll::Ready(Ok(stamp)) => {
                    let data = rb.filled();
                    let now = Instant::now();
                    // The kernel's arrival, when it has a plausible one:
                    // after the request left, and not after the read.
                    let arrived = stamp.and_then(|s| stamps::arrival(s, now, sent_at));
                    let at = arrived.unwrap_or(now);
                    if data.is_empty() {
                        return match reader.eof() {
                            Ok(()) => Poll::Ready(Ok(Timing {
                                sent: sent_at,
                                first: first.unwrap_or(now),
                                done: now,
                                extra: false,
                                kernel: false,
                            })),
                            Err(_) => fail(ErrorClass::Eof, written),
                        };
                    }
                    let first_at = *first.get_or_insert(at);
                    match reader.feed(data) {
                        Ok(Feed::More) => continue,
                        Ok(Feed::Done { extra }) => {
                            return Poll::Ready(Ok(Timing {
                                sent: sent_at,
                                first: first_at,
                                // Stamps of later segments are not earlier,
                                // but a fallback read may be: keep the order.
                                done: at.max(first_at),
                                extra: extra > 0,
                                kernel: arrived.is_some(),
                            }));
                        }
                        Err(ParseError::Malformed) => return fail(ErrorClass::Protocol, written),
                        Err(ParseError::Eof) => return fail(ErrorClass::Eof, written),
                    }
                }
            }
        }
    })
    .await
}
