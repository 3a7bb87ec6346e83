//! One multiplexed connection: its state, shared by its streams and the
//! task that drives its socket; the preface that opens it.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use throng_http2::{ErrorCode, Event, StreamId};
use throng_metrics::{ErrorClass, Phase};
use tokio::io::{AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::Slot;
use super::status::grpc_code;
use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::proto::grpc::frame::Reader;
use crate::rows::Row;
use crate::transport::Transport;

/// One multiplexed connection: its state, shared with the task that drives
/// its socket.
pub(super) struct H2Conn {
    pub(super) shared: Rc<Shared>,
    /// connect() issued.
    pub(super) opened: Instant,
    /// Its number among the worker's connection attempts (rows).
    pub(super) id: u64,
    /// Streams it may carry at once: `--streams`, capped by the server.
    pub(super) limit: u32,
    pub(super) in_flight: Cell<u32>,
    pub(super) carried: Cell<u64>,
    pub(super) driver: tokio::task::JoinHandle<()>,
}

impl H2Conn {
    /// No new streams: the connection ended, or the server sent GOAWAY.
    pub(super) fn dead(&self) -> bool {
        self.shared.dead.get()
    }

    /// Streams it may carry now: the cap at the handshake, and a smaller
    /// SETTINGS_MAX_CONCURRENT_STREAMS the server sent since.
    pub(super) fn limit(&self) -> u32 {
        self.limit.min(self.shared.server_max.get()).max(1)
    }

    /// It ended in order, after the server's GOAWAY.
    pub(super) fn went_away(&self) -> bool {
        self.shared.went_away.get()
    }
}

/// The bytes of one worker thread's socket reads, shared by every HTTP/2
/// connection the thread drives (a worker is one thread with its own
/// runtime): a connection owns no read buffer. Borrowed only inside one
/// synchronous poll, never across an await.
const READ_BUF: usize = 64 * 1024;

thread_local! {
    static READ: RefCell<Box<[u8]>> = RefCell::new(vec![0; READ_BUF].into_boxed_slice());
}

/// The largest response header list a connection accepts (as HTTP/3's
/// head limit, with room): a larger one fails the connection
/// (`h2.protocol`) rather than being stored.
pub(crate) const MAX_HEADER_LIST: u32 = 256 * 1024;

/// What a connection's driver task and its streams share.
pub(super) struct Shared {
    pub(super) conn: RefCell<throng_http2::Conn>,
    /// The streams waiting for their responses.
    pub(super) streams: RefCell<Vec<Entry>>,
    /// The driver's waker: a stream has output for it.
    pub(super) driver: Cell<Option<Waker>>,
    /// Whoever waits on the connection itself (its handshake, a storm's hold).
    pub(super) waiter: Cell<Option<Waker>>,
    /// The server's SETTINGS arrived.
    pub(super) settings: Cell<bool>,
    /// The server acknowledged ours.
    pub(super) acked: Cell<bool>,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (u32::MAX: none).
    pub(super) server_max: Cell<u32>,
    /// No new streams (GOAWAY, or the connection ended).
    pub(super) dead: Cell<bool>,
    /// The server sent GOAWAY.
    pub(super) went_away: Cell<bool>,
    /// The driver ended, and why.
    pub(super) ended: Cell<Option<ErrorClass>>,
    /// The highest stream id whose `sent` the driver stamped at its write:
    /// ids rise with each stream started, so the streams above it are the
    /// ones whose HEADERS the next write carries.
    pub(super) stamped: Cell<StreamId>,
}

/// A stream waiting for its response: the requester's slot moved in for
/// the exchange, filled by the driver as the frames come.
pub(super) struct Entry {
    pub(super) id: StreamId,
    pub(super) slot: Slot,
    pub(super) grpc: bool,
    /// `grpc-status` of the response headers (a trailers-only response)
    /// and of the trailers.
    pub(super) grpc_head: Option<u16>,
    pub(super) grpc_trailers: Option<u16>,
    /// A gRPC reply, judged as it arrives (crate::proto::grpc::frame).
    pub(super) reader: Option<Reader>,
    /// An event stream's (`--sse`, `--llm`) DATA not read yet by its
    /// exchange (super::sse), which the driver wakes as it fills.
    pub(super) tap: Option<Vec<u8>>,
    /// The request body not sent yet (the windows were closed).
    pub(super) body: Bytes,
    /// How the request stream ends once `body` went.
    pub(super) half: Half,
    /// Just before the driver's write that carried its HEADERS (until
    /// then, when the stream handed them to the connection): no byte of
    /// the response came before.
    pub(super) sent: Instant,
    pub(super) first: Option<Instant>,
    pub(super) end: Option<Result<Instant, ErrorClass>>,
    /// `end` is the kernel's receive stamp (crate::stamps), not the read's clock.
    pub(super) kernel: bool,
    pub(super) waker: Option<Waker>,
}

/// How a request stream ends: what is still owed after its unsent body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Half {
    /// END_STREAM goes with the body's last frame.
    WithBody,
    /// More messages are still to come (a paced client stream).
    More,
    /// An empty DATA frame with END_STREAM follows the body (gRPC's
    /// half-close after a client stream's last message).
    Close,
    /// The request stream ended.
    Closed,
}

impl Entry {
    fn finish(&mut self, end: Result<Instant, ErrorClass>) {
        if self.end.is_none() {
            self.end = Some(end);
            if let Some(w) = self.waker.take() {
                w.wake();
            }
        }
    }
}

pub(super) fn entry(streams: &mut [Entry], id: StreamId) -> Option<&mut Entry> {
    streams.iter_mut().find(|e| e.id == id)
}

/// Keeps `cell`'s waker current with `cx`'s, cloning only when it changed.
pub(super) fn register(cell: &Cell<Option<Waker>>, cx: &Context<'_>) {
    let mut w = cell.take();
    if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
        w = Some(cx.waker().clone());
    }
    cell.set(w);
}

pub(super) fn wake(cell: &Cell<Option<Waker>>) {
    if let Some(w) = cell.take() {
        w.wake();
    }
}

impl Shared {
    fn new(streams: u32) -> Shared {
        let conn = throng_http2::Conn::new(throng_http2::Settings {
            max_concurrent_streams: streams.max(1),
            max_header_list_size: MAX_HEADER_LIST,
            ..throng_http2::Settings::default()
        });
        Shared {
            conn: RefCell::new(conn),
            streams: RefCell::new(Vec::new()),
            driver: Cell::new(None),
            waiter: Cell::new(None),
            settings: Cell::new(false),
            acked: Cell::new(false),
            server_max: Cell::new(u32::MAX),
            dead: Cell::new(false),
            went_away: Cell::new(false),
            ended: Cell::new(None),
            stamped: Cell::new(0),
        }
    }

    /// Passes bytes read to the connection and what they carried to the
    /// streams. `stamp`: the kernel's receive stamp of the read; what it
    /// carried arrived then (as HTTP/1.1 responses are timed), not when the
    /// worker got round to reading it.
    fn receive(&self, input: &[u8], stamp: Option<crate::stamps::Stamp>) -> Result<(), ErrorClass> {
        let now = Instant::now();
        let mut conn = self.conn.borrow_mut();
        let mut streams = self.streams.borrow_mut();
        // One stamp for the read: its age is checked against the oldest
        // stream's send, and each stream keeps it only when it is after
        // its own (else the read's clock, as a read without a stamp).
        let arrived = stamp.and_then(|st| {
            let floor = streams.iter().map(|e| e.sent).min()?;
            crate::stamps::arrival(st, now, floor)
        });
        let at = |e: &Entry| match arrived {
            Some(a) if a >= e.sent => (a, true),
            _ => (now, false),
        };
        let mut window = false;
        let mut connection = false;
        // A stream ended: room for one waiting for the server's cap.
        let mut freed = false;
        let r = conn.receive(input, &mut |e| match e {
            Event::Response {
                stream,
                status,
                headers,
            } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.first = Some(at(s).0);
                    s.slot.head_fields(status, || headers.iter());
                    if s.grpc {
                        s.grpc_head = grpc_code(headers.get(b"grpc-status"));
                    }
                    if let Some(r) = s.reader.as_mut() {
                        r.head(status, headers.get(b"content-type"), headers.get(b"grpc-encoding"));
                    }
                }
            }
            Event::Data { stream, data } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.slot.chunk(data);
                    if s.slot.over_length() {
                        // The exchange resets the stream when it takes it.
                        s.finish(Err(ErrorClass::Protocol));
                    }
                    if let Some(r) = s.reader.as_mut() {
                        let n = r.feed(data);
                        let fault = r.fault;
                        if n > 0 {
                            let (t, _) = at(s);
                            s.slot.message_at(n, t);
                        }
                        // The call failed there, as a gRPC client ends it:
                        // nothing more is read or inflated of it (the
                        // exchange resets the stream when it takes it).
                        if let Some(fault) = fault {
                            s.finish(Err(ErrorClass::Grpc(fault)));
                        }
                    }
                    if let Some(t) = s.tap.as_mut() {
                        t.extend_from_slice(data);
                        if let Some(w) = s.waker.take() {
                            w.wake();
                        }
                    }
                }
            }
            Event::Trailers { stream, headers } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.slot.trailer_fields(|| headers.iter());
                    if s.grpc {
                        s.grpc_trailers = grpc_code(headers.get(b"grpc-status"));
                    }
                }
            }
            Event::StreamEnd { stream } => {
                freed = true;
                if let Some(s) = entry(&mut streams, stream) {
                    if let Some(r) = s.reader.as_mut() {
                        r.end();
                    }
                    if s.slot.short_of_length() {
                        s.finish(Err(ErrorClass::Eof));
                    } else {
                        let (t, kernel) = at(s);
                        s.kernel = kernel;
                        s.finish(Ok(t));
                    }
                }
            }
            // After the end of the response, a reset only stops the
            // request body: the response stands (finish keeps the first end).
            Event::StreamReset { stream, code, by_peer } => {
                freed = true;
                if let Some(s) = entry(&mut streams, stream) {
                    s.finish(Err(reset_class(code, by_peer)));
                }
            }
            Event::CutOff { stream } => {
                if let Some(s) = entry(&mut streams, stream) {
                    s.finish(Err(ErrorClass::H2("goaway")));
                }
            }
            Event::GoAway { .. } => {
                self.went_away.set(true);
                self.dead.set(true);
                connection = true;
            }
            Event::Settings(p) => {
                self.settings.set(true);
                self.server_max.set(p.max_concurrent_streams);
                connection = true;
            }
            Event::SettingsAcked => {
                self.acked.set(true);
                connection = true;
            }
            Event::WindowUpdate { .. } => window = true,
            _ => {}
        });
        if window && r.is_ok() {
            send_bodies(&mut conn, &mut streams);
        }
        if connection || freed {
            wake(&self.waiter);
        }
        r.map_err(|e| match e.code() {
            ErrorCode::FLOW_CONTROL_ERROR => ErrorClass::H2("flow_control"),
            _ => ErrorClass::H2("protocol"),
        })
    }

    /// Stamps `sent` on the streams started since the last write that went
    /// out, and returns the newest one's id (for [`Shared::stamped`] once
    /// the write took bytes): the write about to be made carries their
    /// HEADERS, so their time on the wire starts now — not when the stream
    /// queued its frames, a task wakeup earlier (HTTP/1.1 too stamps at its
    /// write). The streams are in the order they started, so only the
    /// newest few are looked at; a write the socket refuses (it would
    /// block) sent nothing, and the next one stamps them again.
    fn stamp_sent(&self) -> StreamId {
        let floor = self.stamped.get();
        let mut streams = self.streams.borrow_mut();
        let last = match streams.last() {
            Some(e) if e.id > floor => e.id,
            _ => return floor,
        };
        let now = Instant::now();
        for e in streams.iter_mut().rev().take_while(|e| e.id > floor) {
            e.sent = now;
        }
        last
    }

    /// The driver ended: every stream still waiting fails with `class`.
    fn end(&self, class: ErrorClass) {
        self.dead.set(true);
        self.ended.set(Some(class));
        for s in self.streams.borrow_mut().iter_mut() {
            s.finish(Err(class));
        }
        wake(&self.waiter);
    }
}

/// Sends what the windows now allow of the request bodies still waiting.
fn send_bodies(conn: &mut throng_http2::Conn, streams: &mut [Entry]) {
    for s in streams
        .iter_mut()
        .filter(|s| !s.body.is_empty() || s.half == Half::Close)
    {
        send_body(conn, s);
    }
}

/// Sends what the windows allow of a stream's unsent body, and the end of
/// the request stream once it all went.
pub(super) fn send_body(conn: &mut throng_http2::Conn, s: &mut Entry) {
    match conn.send_data(s.id, &s.body, s.half == Half::WithBody) {
        Ok(n) => {
            bytes::Buf::advance(&mut s.body, n);
            if s.body.is_empty() {
                s.half = match s.half {
                    Half::Close => {
                        // A stream that ended meanwhile owes nothing.
                        let _ = conn.send_data(s.id, &[], true);
                        Half::Closed
                    }
                    Half::More => Half::More,
                    Half::WithBody | Half::Closed => Half::Closed,
                };
            }
        }
        // The stream ended meanwhile: nothing more to send.
        Err(_) => {
            s.body = Bytes::new();
            s.half = Half::Closed;
        }
    }
}

/// The task that owns a connection's socket: writes what the connection
/// has to send, reads what comes and dispatches it to the streams. Ends
/// (and the socket closes) when the connection fails or is aborted.
struct Driver {
    shared: Rc<Shared>,
    io: Transport,
}

/// Reads one poll of the driver makes at most before it yields to the
/// worker's other tasks.
const TURNS: usize = 16;

impl std::future::Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        match this.turn(cx) {
            Ok(()) => Poll::Pending,
            Err(class) => {
                this.shared.end(class);
                Poll::Ready(())
            }
        }
    }
}

impl Driver {
    /// Writes and reads until the socket would block (Ok: wakers are set)
    /// or the connection fails.
    fn turn(&mut self, cx: &mut Context<'_>) -> Result<(), ErrorClass> {
        for _ in 0..TURNS {
            self.flush(cx)?;
            let shared = &*self.shared;
            let io = &mut self.io;
            let read = READ.with(|buf| {
                let mut buf = buf.borrow_mut();
                let mut rb = ReadBuf::new(&mut buf[..]);
                // The stamped read: the kernel's receive stamp times what
                // it brought, and a read shorter than the buffer tells the
                // socket is drained, which saves the system call that would
                // only hear EAGAIN.
                match io.poll_read_stamped(cx, &mut rb, true) {
                    Poll::Pending => Ok(false),
                    Poll::Ready(Err(e)) => Err(classify(&e, Stage::Exchange)),
                    Poll::Ready(Ok(_)) if rb.filled().is_empty() => Err(ErrorClass::Eof),
                    Poll::Ready(Ok(stamp)) => shared.receive(rb.filled(), stamp).map(|()| true),
                }
            });
            match read {
                Ok(true) => {}
                Ok(false) => {
                    register(&shared.driver, cx);
                    if shared.streams.borrow().is_empty() {
                        // Idle: the connection keeps no buffers.
                        shared.conn.borrow_mut().shrink();
                        *shared.streams.borrow_mut() = Vec::new();
                    }
                    return Ok(());
                }
                Err(class) => {
                    // A protocol error's GOAWAY goes out if it can.
                    let _ = self.flush(cx);
                    return Err(class);
                }
            }
        }
        // Busy: let the worker's other tasks run, then go on.
        cx.waker().wake_by_ref();
        Ok(())
    }

    /// Writes the connection's pending output until it is all out or the
    /// socket would block (its waker is then set).
    fn flush(&mut self, cx: &mut Context<'_>) -> Result<(), ErrorClass> {
        let mut conn = self.shared.conn.borrow_mut();
        // Each round writes at least a byte, or flushes once and then must:
        // bounded by the output.
        let mut flushed = false;
        while !conn.pending_output().is_empty() {
            let newest = self.shared.stamp_sent();
            match Pin::new(&mut self.io).poll_write(cx, conn.pending_output()) {
                // A transport that takes nothing even after a flush.
                Poll::Ready(Ok(0)) if flushed => return Err(ErrorClass::Reset),
                // TLS whose buffer of records to send is full: out with
                // them first (then it takes more), or wait for the socket.
                Poll::Ready(Ok(0)) => {
                    flushed = true;
                    match Pin::new(&mut self.io).poll_flush(cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(e)) => return Err(classify(&e, Stage::Exchange)),
                        Poll::Pending => return Ok(()),
                    }
                }
                Poll::Ready(Ok(n)) => {
                    flushed = false;
                    self.shared.stamped.set(newest);
                    conn.consume_output(n);
                }
                Poll::Ready(Err(e)) => return Err(classify(&e, Stage::Exchange)),
                Poll::Pending => break,
            }
        }
        // TLS: records encrypted but not yet taken by the socket.
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(classify(&e, Stage::Exchange)),
            _ => Ok(()),
        }
    }
}

/// The taxonomy class of a stream reset: by the server (`by_peer`) with
/// its code, or by us because the server broke a stream rule.
pub(crate) fn reset_class(code: ErrorCode, by_peer: bool) -> ErrorClass {
    match code {
        ErrorCode::REFUSED_STREAM => ErrorClass::H2("refused_stream"),
        ErrorCode::FLOW_CONTROL_ERROR => ErrorClass::H2("flow_control"),
        c if by_peer => ErrorClass::H2(rst_name(c)),
        _ => ErrorClass::H2("protocol"),
    }
}

/// `rst_stream.CODE` by the RST_STREAM error code's name (RFC 9113 7).
fn rst_name(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::NO_ERROR => "rst_stream.no_error",
        ErrorCode::PROTOCOL_ERROR => "rst_stream.protocol_error",
        ErrorCode::INTERNAL_ERROR => "rst_stream.internal_error",
        ErrorCode::SETTINGS_TIMEOUT => "rst_stream.settings_timeout",
        ErrorCode::STREAM_CLOSED => "rst_stream.stream_closed",
        ErrorCode::FRAME_SIZE_ERROR => "rst_stream.frame_size_error",
        ErrorCode::CANCEL => "rst_stream.cancel",
        ErrorCode::COMPRESSION_ERROR => "rst_stream.compression_error",
        ErrorCode::CONNECT_ERROR => "rst_stream.connect_error",
        ErrorCode::ENHANCE_YOUR_CALM => "rst_stream.enhance_your_calm",
        ErrorCode::INADEQUATE_SECURITY => "rst_stream.inadequate_security",
        ErrorCode::HTTP_1_1_REQUIRED => "rst_stream.http_1_1_required",
        _ => "rst_stream.unknown",
    }
}

/// Records a multiplexed connection's end and stops its driver (which
/// closes the socket).
pub(super) fn close(ctx: &Ctx, c: &H2Conn) {
    c.driver.abort();
    let now = Instant::now();
    let mut rec = ctx.rec.borrow_mut();
    rec.connection_closed(now, now - c.opened);
    rec.mux_connection_closed(c.carried.get());
}

/// Speaks the preface on `stream` (see [`open`]) and starts the
/// connection's driver; records the `handshake` phase.
pub(super) async fn speak(
    ctx: &Ctx,
    streams: u32,
    stream: Transport,
    opened: Instant,
    id: u64,
    mut sleep: Pin<&mut Sleep>,
    row: Option<&mut Row<'_>>,
) -> Result<H2Conn, ErrorClass> {
    if let Transport::Tls(s) = &stream
        && s.tls.alpn_protocol() != Some(b"h2")
    {
        return Err(ErrorClass::H2("not_negotiated"));
    }
    // Nagle would hold a request back behind a small control frame still
    // unacknowledged (a PING ACK for grpc-go's BDP pings, a WINDOW_UPDATE)
    // for the peer's delayed ACK, ~40 ms: HTTP/2 sends small frames often.
    let _ = stream.tcp().set_nodelay(true);
    let start = Instant::now();
    sleep.as_mut().reset((start + ctx.spec.timeout).into());
    let (shared, driver) = handshake(streams, stream, sleep).await?;
    let now = Instant::now();
    let server = shared.server_max.get();
    let server_max = (server != u32::MAX).then_some(u64::from(server));
    let limit = server.min(streams).max(1);
    {
        let mut rec = ctx.rec.borrow_mut();
        rec.phase(now, Phase::Handshake, now - start);
        rec.mux_connection("h2", u64::from(streams), server_max);
    }
    if let Some(r) = row {
        r.phase(Phase::Handshake, now - start);
    }
    Ok(H2Conn {
        shared,
        opened,
        id,
        limit,
        in_flight: Cell::new(0),
        carried: Cell::new(0),
        driver,
    })
}
/// Starts the driver of a connection on `stream` that opens at most
/// `streams` at once and waits, within the deadline `sleep` was armed
/// with, for the server's SETTINGS and its acknowledgement of ours.
pub(super) async fn handshake(
    streams: u32,
    stream: Transport,
    sleep: Pin<&mut Sleep>,
) -> Result<(Rc<Shared>, tokio::task::JoinHandle<()>), ErrorClass> {
    let shared = Rc::new(Shared::new(streams));
    let driver = tokio::task::spawn_local(Driver {
        shared: Rc::clone(&shared),
        io: stream,
    });
    let spoken = std::future::poll_fn(|cx| {
        if let Some(class) = shared.ended.get() {
            return Poll::Ready(Err(class));
        }
        if shared.settings.get() && shared.acked.get() {
            return Poll::Ready(Ok(()));
        }
        register(&shared.waiter, cx);
        Poll::Pending
    });
    let spoken = tokio::select! {
        biased;
        r = spoken => r,
        () = sleep => Err(ErrorClass::TimeoutHandshake),
    };
    // The waiter's task may end long before the connection.
    shared.waiter.take();
    match spoken {
        Ok(()) => Ok((shared, driver)),
        Err(class) => {
            driver.abort();
            Err(class)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every HTTP/2 connection holds for its whole life besides its
    /// socket's registration: its driver task's future (`Driver`: the
    /// shared state's `Rc` and the transport) and that shared state
    /// (`Shared`, in an `Rc`: the protocol's `Conn` and the wakers). The
    /// stream entries and the protocol's buffers come and go with streams.
    /// Unoptimized: 40 and 440 bytes (336 of them `throng_http2::Conn`).
    #[test]
    fn a_connections_driver_and_state_stay_small() {
        let driver = std::mem::size_of::<Driver>();
        assert!(driver <= 48, "an HTTP/2 connection's driver is a {driver}-byte future");
        let shared = std::mem::size_of::<Shared>();
        assert!(shared <= 448, "an HTTP/2 connection's shared state is {shared} bytes");
        let conn = std::mem::size_of::<H2Conn>();
        assert!(conn <= 64, "a pooled HTTP/2 connection is {conn} bytes");
    }
}
