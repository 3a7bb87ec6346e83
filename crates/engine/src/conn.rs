//! One connection's work: connect, then request/response exchanges.
//!
//! Both functions are written as hand-polled futures so that the hot path
//! creates no futures, timers or buffers per request: the per-task `Sleep`
//! is re-armed (a cheap deadline extension in tokio), and reads go into the
//! worker's shared scratch buffer, borrowed only inside a single poll.

use std::cell::RefCell;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::ErrorClass;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Sleep;

use crate::errors::{Stage, classify};
use crate::http1::{Feed, ParseError, ResponseReader};

/// Opens a TCP connection to `addr`, or says why not, within `timeout`.
pub(crate) async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    mut sleep: Pin<&mut Sleep>,
) -> Result<TcpStream, ErrorClass> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|e| classify(&e, Stage::Connect))?;
    sleep.as_mut().reset((Instant::now() + timeout).into());
    let stream = tokio::select! {
        biased;
        r = socket.connect(addr) => r.map_err(|e| classify(&e, Stage::Connect))?,
        () = sleep => return Err(ErrorClass::TimeoutConnect),
    };
    // Requests are written whole; never let Nagle hold one back.
    stream.set_nodelay(true).map_err(|e| classify(&e, Stage::Connect))?;
    Ok(stream)
}

/// When the parts of one exchange happened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// Last request byte written.
    pub sent: Instant,
    /// First response byte read.
    pub first: Instant,
    /// Last response byte read.
    pub done: Instant,
    /// Bytes after the response (the connection cannot be reused).
    pub extra: bool,
}

/// Why an exchange failed, with the request bytes that got out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failed {
    pub class: ErrorClass,
    pub written: usize,
}

/// Writes `request` and reads one response into `reader`, within the
/// deadline `sleep` was armed with.
pub(crate) async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    request: &[u8],
    reader: &mut ResponseReader,
    scratch: &RefCell<Box<[u8]>>,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    let mut written = 0usize;
    let mut sent: Option<Instant> = None;
    let mut first: Option<Instant> = None;
    poll_fn(|cx| {
        let fail = |class, written| Poll::Ready(Err(Failed { class, written }));
        while written < request.len() {
            match Pin::new(&mut *stream).poll_write(cx, &request[written..]) {
                Poll::Ready(Ok(0)) => return fail(ErrorClass::Reset, written),
                Poll::Ready(Ok(n)) => written += n,
                Poll::Ready(Err(e)) => return fail(classify(&e, Stage::Exchange), written),
                Poll::Pending => {
                    if sleep.as_mut().poll(cx).is_ready() {
                        return fail(ErrorClass::TimeoutResponse, written);
                    }
                    return Poll::Pending;
                }
            }
        }
        let sent_at = *sent.get_or_insert_with(Instant::now);
        loop {
            // The borrow lives only inside this poll: no other task of this
            // worker runs until it returns.
            let mut buf = scratch.borrow_mut();
            let mut rb = ReadBuf::new(&mut buf[..]);
            match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                Poll::Pending => {
                    if sleep.as_mut().poll(cx).is_ready() {
                        return fail(ErrorClass::TimeoutResponse, written);
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return fail(classify(&e, Stage::Exchange), written),
                Poll::Ready(Ok(())) => {
                    let data = rb.filled();
                    let now = Instant::now();
                    if data.is_empty() {
                        return match reader.eof() {
                            Ok(()) => Poll::Ready(Ok(Timing {
                                sent: sent_at,
                                first: first.unwrap_or(now),
                                done: now,
                                extra: false,
                            })),
                            Err(_) => fail(ErrorClass::Eof, written),
                        };
                    }
                    let first_at = *first.get_or_insert(now);
                    match reader.feed(data) {
                        Ok(Feed::More) => continue,
                        Ok(Feed::Done { extra }) => {
                            return Poll::Ready(Ok(Timing {
                                sent: sent_at,
                                first: first_at,
                                done: now,
                                extra: extra > 0,
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
