//! A scenario VU's own HTTP/3 connection: its steps are requests on it, one
//! at a time.

use std::cell::Cell;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

use bytes::{Buf, Bytes};
use throng_metrics::ErrorClass;
use tokio::time::Sleep;

use super::conn::{open_to, with_clock};
use super::errors::stream_class;
use super::send::{STREAM_LIMIT, Wire, final_response};
use super::socket::WireClock;
use super::sse::read_watch;
use super::{H3_NO_ERROR, SendRequest};
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::proto::events::Watch;
use crate::proto::http1::EndedEarly;
use crate::proto::http2::Bounds;

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
            let began = with_clock(ctx, WireClock::mark);
            let mut stream = send.send_request(request).await.map_err(|e| stream_class(&e))?;
            written.set(Some(request_len.saturating_sub(body.len())));
            ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
            let open = StreamOpen(ctx);
            if !body.is_empty() {
                stream.send_data(body.clone()).await.map_err(|e| stream_class(&e))?;
                written.set(Some(request_len));
            }
            stream.finish().await.map_err(|e| stream_class(&e))?;
            let handed = Instant::now();
            let ended = with_clock(ctx, WireClock::mark);
            let resp = final_response(&mut stream).await?;
            let now = Instant::now();
            let wire = Wire::read(ctx, began, ended, handed, now);
            let first = wire.received.unwrap_or(now);
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
            let (done, kernel) = wire.end(ctx);
            Ok(crate::conn::Timing {
                sent: wire.sent,
                // A stamped end can precede the clock of an unstamped head.
                first: first.min(done),
                done,
                extra: false,
                kernel,
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

    /// A request whose response is an event stream, as [`Own::exchange`]:
    /// its head awaited within the deadline `sleep` was armed with, its body
    /// read into `watch` within `bounds` (see [`super::sse::read_watch`]);
    /// a stream ended before the server ended it is stopped when dropped
    /// here, and the connection goes on for the VU's next steps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn sse(
        &mut self,
        ctx: &Ctx,
        request: http::Request<()>,
        body: &Bytes,
        request_len: usize,
        slot: &mut crate::proto::http2::Slot,
        watch: &mut Watch,
        mut sleep: Pin<&mut Sleep>,
        bounds: Bounds<'_, '_>,
    ) -> Result<(Timing, EndedEarly), Failed> {
        slot.begin();
        slot.for_method(request.method());
        let t_send = Instant::now();
        let send = &mut self.send;
        let written = Cell::new(None);
        let asked = async {
            let began = with_clock(ctx, WireClock::mark);
            let mut stream = send.send_request(request).await.map_err(|e| stream_class(&e))?;
            written.set(Some(request_len.saturating_sub(body.len())));
            ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
            let open = StreamOpen(ctx);
            if !body.is_empty() {
                stream.send_data(body.clone()).await.map_err(|e| stream_class(&e))?;
                written.set(Some(request_len));
            }
            stream.finish().await.map_err(|e| stream_class(&e))?;
            let handed = Instant::now();
            let ended = with_clock(ctx, WireClock::mark);
            let resp = final_response(&mut stream).await?;
            let wire = Wire::read(ctx, began, ended, handed, Instant::now());
            Ok((stream, open, wire, resp))
        };
        let headed = tokio::select! {
            biased;
            r = asked => r,
            () = sleep.as_mut() => match written.get() {
                Some(_) => Err((ErrorClass::TimeoutResponse, false)),
                None => Err((STREAM_LIMIT, true)),
            },
        };
        let outcome = match headed {
            Ok((mut stream, open, wire, resp)) => {
                let first = wire.received.unwrap_or_else(Instant::now);
                slot.head(resp.status().as_u16(), resp.headers());
                let read = read_watch(ctx, &mut stream, watch, bounds, t_send, sleep, |piece| {
                    slot.chunk(piece)
                })
                .await;
                // Dropped before the connection's next request: a stream
                // ended early is stopped now.
                drop(stream);
                drop(open);
                read.map(|(_, early)| {
                    let (done, kernel) = match early {
                        None => wire.end(ctx),
                        Some(_) => (Instant::now(), false),
                    };
                    let timing = Timing {
                        sent: wire.sent,
                        first: first.min(done),
                        done,
                        extra: false,
                        kernel,
                    };
                    (timing, early)
                })
            }
            Err(broke) => Err(broke),
        };
        self.carried.set(self.carried.get() + 1);
        outcome.map_err(|(class, connection)| {
            if connection {
                self.dead.set(true);
            }
            Failed {
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
