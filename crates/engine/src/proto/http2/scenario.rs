//! A scenario VU's own HTTP/2 connection: its steps and gRPC calls as
//! streams on it, one at a time.

use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_metrics::ErrorClass;
use throng_plan::StatusSet;
use tokio::time::Sleep;

use super::Slot;
use super::driver::{H2Conn, close, speak};
use super::grpc::{GRPC_DEADLINE_EXCEEDED, record_messages};
use super::sse::send_stream as send_stream_sse;
use super::stream::{decoded_head_len, encode_head, request_head, send_on, send_stream, stream_level};
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::rows::Row;

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
        stream_ended(c, &mut outcome);
        outcome
    }

    /// A request whose response is an event stream, as [`Own::exchange`]:
    /// read into `watch` within `bounds` (see [`super::sse::send_stream`]);
    /// a stream ended before the server ended it is reset with CANCEL, so
    /// the connection goes on for the VU's next steps.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn sse(
        &self,
        ctx: &Ctx,
        request: http::Request<()>,
        body: &Bytes,
        request_len: usize,
        slot: &mut Slot,
        watch: &mut crate::proto::events::Watch,
        sleep: Pin<&mut Sleep>,
        bounds: super::sse::Bounds<'_, '_>,
    ) -> Result<(Timing, crate::proto::http1::EndedEarly), Failed> {
        let c = &self.0;
        c.in_flight.set(1);
        ctx.rec.borrow_mut().stream_opened(Instant::now(), 1);
        let open = StreamOpen(ctx);
        let block = encode_head(request.method(), request.uri(), request.headers());
        let head_len = request_len.saturating_sub(body.len());
        slot.for_method(request.method());
        let mut outcome = send_stream_sse(c, &block, body, head_len, slot, watch, &ctx.rec, sleep, bounds).await;
        drop(open);
        stream_ended(c, &mut outcome);
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
        shape: super::CallShape<'_>,
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
        let block = request_head(&request);
        let mut outcome = match shape.requests {
            Some(r) => {
                Box::pin(send_stream(
                    c,
                    &block,
                    body,
                    shape.server_streaming,
                    r,
                    head_len,
                    slot,
                    sleep,
                ))
                .await
            }
            None => send_on(c, &block, body, true, shape.server_streaming, head_len, slot, sleep).await,
        };
        drop(open);
        stream_ended(c, &mut outcome);
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
        if shape.server_streaming || shape.requests.is_some() {
            let bidi = shape.server_streaming && shape.requests.is_some();
            record_messages(ctx, slot, &outcome, t_send, shape.server_streaming, bidi);
        }
        outcome
    }

    /// Closes the connection and records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        close(ctx, &self.0);
    }
}

/// After a VU's stream on its own connection `c` ends: the connection is
/// free again; a reset or an early end after the server's GOAWAY is
/// `h2.goaway`, and a failure of the connection (not of the stream alone)
/// marks it dead, so the VU opens another.
fn stream_ended<T>(c: &H2Conn, outcome: &mut Result<T, Failed>) {
    c.in_flight.set(0);
    c.carried.set(c.carried.get() + 1);
    if let Err(f) = outcome {
        if matches!(f.class, ErrorClass::Reset | ErrorClass::Eof) && c.went_away() {
            f.class = ErrorClass::H2("goaway");
        }
        if !stream_level(f.class, c) {
            c.shared.dead.set(true);
        }
    }
}
