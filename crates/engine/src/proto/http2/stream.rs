//! One stream on a connection: the request's header block, its send, its
//! response read into the requester's slot, its failure's class.

use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use throng_http2::{ErrorCode, StreamId};
use throng_metrics::ErrorClass;
use tokio::time::Sleep;

use super::driver::{Entry, H2Conn, Half, Shared, entry, register, send_body, wake};
use super::status::grpc_code_or_http;
use super::{Requests, Slot, Spec};
use crate::conn::{Failed, Timing};
use crate::proto::grpc::frame::Reader;

/// The taxonomy class of a stream that could not start.
fn send_class(c: &H2Conn, e: &throng_http2::SendError) -> ErrorClass {
    use throng_http2::SendError as E;
    match e {
        E::GoingAway | E::StreamIdsExhausted => ErrorClass::H2("goaway"),
        E::StreamLimit(_) => {
            // The server allows no more streams than are open (a cap of 0,
            // or lowered under them): the next request goes on a new
            // connection rather than failing here again at once.
            c.shared.dead.set(true);
            ErrorClass::H2("refused_stream")
        }
        E::Closed => c.shared.ended.get().unwrap_or(ErrorClass::Eof),
        _ => ErrorClass::H2("protocol"),
    }
}

/// The HPACK header block of a request, encoded without the dynamic table
/// so that any request on any connection can reuse it.
pub(crate) fn encode_head(method: &http::Method, uri: &http::Uri, headers: &http::HeaderMap) -> Vec<u8> {
    let fields: Vec<(&[u8], &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
        .collect();
    let mut block = Vec::new();
    throng_http2::hpack::encode_request(
        &mut block,
        method.as_str().as_bytes(),
        uri.scheme_str().unwrap_or("http").as_bytes(),
        uri.authority().map_or(&b""[..], |a| a.as_str().as_bytes()),
        uri.path_and_query().map_or(&b"/"[..], |p| p.as_str().as_bytes()),
        &fields,
    );
    block
}

/// A request's header block as counted in `sent` (see crate::mux::Parts::h2_len).
pub(super) fn decoded_head_len(request: &http::Request<()>) -> usize {
    let uri = request.uri();
    request.method().as_str().len()
        + uri.scheme_str().map_or(0, str::len)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len())
        + request
            .headers()
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>()
        + 40
}

/// [`encode_head`] of a request's parts.
pub(super) fn request_head(request: &http::Request<()>) -> Vec<u8> {
    encode_head(request.method(), request.uri(), request.headers())
}

/// A stream of an exchange under way: on drop (a timeout, a VU cut off)
/// its entry goes, the requester's slot comes back and a stream still open
/// is reset with CANCEL, so that the connection stays usable.
pub(super) struct Open<'a> {
    pub(super) c: &'a H2Conn,
    pub(super) id: StreamId,
    pub(super) slot: &'a mut Slot,
    pub(super) taken: bool,
}

impl Open<'_> {
    /// Removes the stream's entry and gives the slot back.
    pub(super) fn take(&mut self) -> Option<Entry> {
        self.taken = true;
        let sh = &*self.c.shared;
        let mut streams = sh.streams.borrow_mut();
        let i = streams.iter().position(|e| e.id == self.id)?;
        let mut e = streams.swap_remove(i);
        drop(streams);
        std::mem::swap(self.slot, &mut e.slot);
        if !matches!(e.end, Some(Ok(_))) || !e.body.is_empty() || e.half != Half::Closed {
            sh.conn.borrow_mut().reset_stream(self.id, ErrorCode::CANCEL);
            wake(&sh.driver);
        }
        Some(e)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.taken {
            self.take();
        }
    }
}

/// Sends the plan's request on a new stream of `c` and reads the
/// response, within the deadline `sleep` was armed with.
pub(super) async fn exchange(
    spec: &Spec,
    block: &[u8],
    c: &H2Conn,
    slot: &mut Slot,
    keep_server: bool,
    sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    slot.keep.server = keep_server;
    slot.for_method(&spec.method);
    match &spec.requests {
        // Boxed: a client stream's pacing stays out of every other
        // stream's future.
        Some(r) => {
            Box::pin(send_stream(
                c,
                block,
                &spec.body,
                spec.server_streaming,
                r,
                spec.head_bytes,
                slot,
                sleep,
            ))
            .await
        }
        None => {
            send_on(
                c,
                block,
                &spec.body,
                spec.grpc,
                spec.server_streaming,
                spec.head_bytes,
                slot,
                sleep,
            )
            .await
        }
    }
}

/// Sends a request (its header `block`, then `body`) on a new stream of
/// `c` and reads the response into `slot`, within the deadline `sleep` was
/// armed with; `grpc`: the status is the call's `grpc-status` and the
/// reply is judged as a gRPC client would (crate::proto::grpc::frame: a
/// fault is its `grpc.*` class); `server_streaming`: its response messages are
/// counted and timed as they arrive, and any number of them is right (a
/// unary call's OK has exactly one). `head_len`: the header block's size as
/// the caller counts it; a failure after the stream started counts it and
/// the body handed to the connection as written.
#[allow(clippy::too_many_arguments)]
pub(super) async fn send_on(
    c: &H2Conn,
    block: &[u8],
    body: &Bytes,
    grpc: bool,
    server_streaming: bool,
    head_len: usize,
    slot: &mut Slot,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    ready(c, slot, sleep.as_mut()).await?;
    let sh = &*c.shared;
    let half = if body.is_empty() { Half::Closed } else { Half::WithBody };
    let (id, queued) = start(c, block, body.clone(), half, (grpc, false), head_len, slot)?;
    let mut open = Open {
        c,
        id,
        slot,
        taken: false,
    };
    let end = tokio::select! {
        biased;
        r = ended(sh, id) => r,
        () = sleep => Err(ErrorClass::TimeoutResponse),
    };
    let done = Done {
        end,
        queued,
        head_len,
        handed: body.len(),
        requests: None,
    };
    conclude(&mut open, done, grpc, server_streaming)
}

/// [`send_on`] for a gRPC client stream (`requests`): the body's messages
/// in order — the first at once, each next one a `gap` later when paced,
/// while the reply is read — then the request half-closed with an empty
/// DATA frame. A reply that ends first stops the sending; the messages
/// sent whole are the slot's `sent_messages`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn send_stream(
    c: &H2Conn,
    block: &[u8],
    body: &Bytes,
    server_streaming: bool,
    requests: &Requests,
    head_len: usize,
    slot: &mut Slot,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Timing, Failed> {
    ready(c, slot, sleep.as_mut()).await?;
    let sh = &*c.shared;
    let gap = requests.gap.filter(|_| requests.ends.len() > 1);
    let (now, half) = match gap {
        _ if body.is_empty() => (0, Half::Closed),
        Some(_) => (requests.ends[0], Half::More),
        None => (body.len(), Half::Close),
    };
    let (id, queued) = start(c, block, body.slice(..now), half, (true, false), head_len, slot)?;
    let mut open = Open {
        c,
        id,
        slot,
        taken: false,
    };
    let (end, handed) = match gap {
        None => {
            let end = tokio::select! {
                biased;
                r = ended(sh, id) => r,
                () = sleep => Err(ErrorClass::TimeoutResponse),
            };
            (end, now)
        }
        Some(gap) => pace(sh, id, body, requests, gap, queued, sleep).await,
    };
    let done = Done {
        end,
        queued,
        head_len,
        handed,
        requests: Some(requests),
    };
    conclude(&mut open, done, true, server_streaming)
}

/// Readies `slot` for a stream of `c` and waits, within the deadline
/// `sleep` was armed with, for the connection to allow one.
pub(super) async fn ready(c: &H2Conn, slot: &mut Slot, sleep: Pin<&mut Sleep>) -> Result<(), Failed> {
    slot.begin();
    if !room_now(&c.shared) {
        wait_room(&c.shared, sleep)
            .await
            .map_err(|class| Failed { class, written: 0 })?;
    }
    Ok(())
}

/// Starts a stream on `c` (room for it was waited for): its header block,
/// what the windows allow of `now` (the part of the body handed at once),
/// and its entry, which takes the requester's slot; `half`: how the
/// request stream ends after `now`. Returns its id and when it was queued.
pub(super) fn start(
    c: &H2Conn,
    block: &[u8],
    now: Bytes,
    mut half: Half,
    (grpc, tap): (bool, bool),
    head_len: usize,
    slot: &mut Slot,
) -> Result<(StreamId, Instant), Failed> {
    let sh = &*c.shared;
    let mut conn = sh.conn.borrow_mut();
    let id = conn.start_request(block, half == Half::Closed).map_err(|e| Failed {
        class: send_class(c, &e),
        written: 0,
    })?;
    let mut rest = now;
    if half != Half::Closed {
        let n = conn.send_data(id, &rest, half == Half::WithBody).map_err(|e| Failed {
            class: send_class(c, &e),
            written: head_len,
        })?;
        bytes::Buf::advance(&mut rest, n);
        if rest.is_empty() {
            half = match half {
                Half::Close => {
                    // Just sent on an open stream: it cannot fail.
                    let _ = conn.send_data(id, &[], true);
                    Half::Closed
                }
                Half::WithBody => Half::Closed,
                h => h,
            };
        }
    }
    // Until the driver's write stamps it (Shared::stamp_sent).
    let queued = Instant::now();
    // A message may be as large as the body the caller keeps, past 4 MiB.
    let reader = grpc.then(|| Reader::bounded(slot.keep.body));
    let mut streams = sh.streams.borrow_mut();
    // Room for one more, not Vec's four at a time: a connection with
    // one stream in flight (`--streams 1`, a VU's) keeps one entry.
    if streams.len() == streams.capacity() {
        streams.reserve_exact(1);
    }
    streams.push(Entry {
        id,
        slot: std::mem::take(slot),
        grpc,
        grpc_head: None,
        grpc_trailers: None,
        reader,
        tap: tap.then(Vec::new),
        body: rest,
        half,
        sent: queued,
        first: None,
        end: None,
        kernel: false,
        waker: None,
    });
    drop((conn, streams));
    // Handed to the connection: its driver writes the frames next, with
    // every other stream started meanwhile.
    wake(&sh.driver);
    Ok((id, queued))
}

/// How a stream's wait ended, and what of its body went.
struct Done<'a> {
    end: Result<Instant, ErrorClass>,
    queued: Instant,
    head_len: usize,
    /// Bytes of the body handed to the connection (some may be unsent).
    handed: usize,
    requests: Option<&'a Requests>,
}

/// The exchange's outcome once its wait ended: the entry taken back (the
/// slot with it), the bytes written, the gRPC status and faults judged.
fn conclude(open: &mut Open<'_>, d: Done<'_>, grpc: bool, server_streaming: bool) -> Result<Timing, Failed> {
    let mut e = open.take();
    let unsent = e.as_ref().map_or(0, |e| e.body.len());
    let written = d.head_len + d.handed.saturating_sub(unsent);
    if let Some(r) = d.requests {
        open.slot.sent_messages = r.sent(d.handed.saturating_sub(unsent));
    }
    let done = d.end.map_err(|class| Failed { class, written })?;
    // The driver's write stamped it; else (never, with a response) it
    // still holds when it was queued.
    let sent = e.as_ref().map_or(d.queued, |e| e.sent);
    // A stamped end can precede the clock of an unstamped first read.
    let first = e.as_ref().and_then(|e| e.first).unwrap_or(done).min(done);
    if grpc && let Some(e) = &mut e {
        open.slot.status = grpc_code_or_http(open.slot.status, e.grpc_trailers.or(e.grpc_head));
        if let Some(r) = e.reader.as_mut() {
            if !server_streaming {
                r.cardinality(open.slot.status);
            }
            if let Some(fault) = r.fault {
                return Err(Failed {
                    class: ErrorClass::Grpc(fault),
                    written,
                });
            }
        }
    }
    Ok(Timing {
        sent,
        first,
        done,
        extra: false,
        kernel: e.is_some_and(|e| e.kernel),
    })
}

/// Waits for stream `id`'s end while handing it a paced client stream's
/// messages (the first went at `queued`; each next one `gap` after the
/// last); returns the end and how much of the body went to the connection.
async fn pace(
    sh: &Shared,
    id: StreamId,
    body: &Bytes,
    r: &Requests,
    gap: std::time::Duration,
    queued: Instant,
    mut sleep: Pin<&mut Sleep>,
) -> (Result<Instant, ErrorClass>, usize) {
    let mut handed = r.ends[0];
    let mut next = 1;
    loop {
        let due = (next < r.ends.len())
            .then(|| queued.checked_add(gap.saturating_mul(u32::try_from(next).unwrap_or(u32::MAX))))
            .flatten();
        let tick = tokio::time::sleep_until(due.unwrap_or(queued).into());
        tokio::select! {
            biased;
            end = ended(sh, id) => return (end, handed),
            () = sleep.as_mut() => return (Err(ErrorClass::TimeoutResponse), handed),
            () = tick, if due.is_some() => {
                let end = r.ends[next];
                next += 1;
                push(sh, id, body, handed, end, next == r.ends.len());
                handed = end;
            }
        }
    }
}

/// The end of stream `id`'s exchange, once the driver set it.
fn ended(sh: &Shared, id: StreamId) -> impl std::future::Future<Output = Result<Instant, ErrorClass>> + '_ {
    std::future::poll_fn(move |cx| {
        let mut streams = sh.streams.borrow_mut();
        match entry(&mut streams, id) {
            Some(Entry { end: Some(end), .. }) => Poll::Ready(*end),
            Some(e) => {
                if !e.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    e.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            // Never: only this exchange removes its entry.
            None => Poll::Ready(Err(ErrorClass::Protocol)),
        }
    })
}

/// Hands a paced client stream's next message (the body up to `end`, after
/// the `handed` part) to the connection, and its half-close after it when
/// it is the `last`; a stream already answered sends no more.
fn push(sh: &Shared, id: StreamId, body: &Bytes, handed: usize, end: usize, last: bool) {
    let mut conn = sh.conn.borrow_mut();
    let mut streams = sh.streams.borrow_mut();
    let Some(e) = entry(&mut streams, id) else {
        return;
    };
    if e.end.is_some() || e.half != Half::More {
        return;
    }
    // The unsent part and the message are one run of the body.
    e.body = body.slice(handed - e.body.len()..end);
    if last {
        e.half = Half::Close;
    }
    send_body(&mut conn, e);
    drop((conn, streams));
    wake(&sh.driver);
}

/// Whether a stream may start on the connection now, or fail at once: only
/// the server's SETTINGS_MAX_CONCURRENT_STREAMS (0, or lowered under the
/// streams open) makes a stream wait.
fn room_now(sh: &Shared) -> bool {
    let conn = sh.conn.borrow();
    conn.open_streams() < conn.max_streams() as usize
        || conn.is_closed()
        || conn.goaway_received().is_some()
        || sh.ended.get().is_some()
}

/// Waits, within the deadline `sleep` was armed with, for the server to
/// allow a stream (a SETTINGS that raises its cap, a stream that ends).
/// A connection that allows none in that time is `h2.stream_limit` — the
/// request was never sent — and is replaced: it takes no new streams.
async fn wait_room(sh: &Shared, sleep: Pin<&mut Sleep>) -> Result<(), ErrorClass> {
    let room = std::future::poll_fn(|cx| {
        if room_now(sh) {
            return Poll::Ready(());
        }
        register(&sh.waiter, cx);
        Poll::Pending
    });
    let waited = tokio::select! {
        biased;
        () = room => Ok(()),
        () = sleep => {
            sh.dead.set(true);
            Err(ErrorClass::H2("stream_limit"))
        }
    };
    sh.waiter.take();
    waited
}

/// True for a failure that ends one stream and leaves its connection `c`
/// usable: a stream reset by the server, a response timeout (the stream is
/// cancelled), a body that broke its `content-length` on a connection
/// that goes on (the same classes from a connection that ended are its
/// failure).
pub(super) fn stream_level(class: ErrorClass, c: &H2Conn) -> bool {
    match class {
        ErrorClass::TimeoutResponse | ErrorClass::Grpc(_) | ErrorClass::Sse(_) => true,
        ErrorClass::H2(name) => name == "refused_stream" || name.starts_with("rst_stream."),
        ErrorClass::Eof | ErrorClass::Protocol => c.shared.ended.get().is_none() && !c.shared.conn.borrow().is_closed(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::Duration;

    use super::super::driver::handshake;
    use super::*;
    use crate::transport::Transport;

    /// Runs `f` on a current-thread runtime inside a LocalSet, as a
    /// worker runs its connections.
    fn on_local<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    /// Handles one frame of the raw server below: SETTINGS acknowledged,
    /// every request but stream 1's answered 200 "ok", resets noted.
    fn serve_frame(f: throng_http2::frame::Frame<'_>, out: &mut Vec<u8>, resets: &mut Vec<(u32, u32)>) {
        use throng_http2::frame::{self, Frame};
        match f {
            Frame::Settings { ack: false, .. } => frame::encode_settings_ack(out),
            Frame::Headers { stream, .. } if stream != 1 => {
                let mut block = Vec::new();
                throng_http2::hpack::encode_field(&mut block, b":status", b"200");
                frame::encode_headers(out, stream, &block, false, frame::DEFAULT_MAX_FRAME_SIZE);
                frame::encode_data(out, stream, b"ok", true);
            }
            Frame::RstStream { stream, code } => resets.push((stream, code)),
            _ => {}
        }
    }

    /// An HTTP/2 server for one connection, frame by frame; returns the
    /// RST_STREAM frames the client sent once it closes.
    async fn raw_server(listener: tokio::net::TcpListener) -> Vec<(u32, u32)> {
        use throng_http2::frame::{self, Parsed};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.unwrap();
        let mut out = Vec::new();
        frame::encode_settings(&mut out, &[(frame::setting::MAX_CONCURRENT_STREAMS, 10)]);
        s.write_all(&out).await.unwrap();
        let (mut buf, mut resets, mut chunk) = (Vec::new(), Vec::new(), [0u8; 4096]);
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return resets;
            }
            buf.extend_from_slice(&chunk[..n]);
            out.clear();
            while let Parsed::Frame(f, len) = frame::parse(&buf, frame::DEFAULT_MAX_FRAME_SIZE).unwrap() {
                serve_frame(f, &mut out, &mut resets);
                buf.drain(..len);
            }
            s.write_all(&out).await.unwrap();
        }
    }

    /// An HTTP/2 server for one connection whose SETTINGS allow no stream;
    /// with `raise`, a second SETTINGS allows one, 100 ms after the
    /// handshake. Every stream is answered 200.
    async fn capped_server(listener: tokio::net::TcpListener, raise: bool) {
        use throng_http2::frame::{self, Frame, Parsed};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = listener.accept().await.unwrap();
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.unwrap();
        let mut out = Vec::new();
        frame::encode_settings(&mut out, &[(frame::setting::MAX_CONCURRENT_STREAMS, 0)]);
        s.write_all(&out).await.unwrap();
        let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            let mut raised = false;
            out.clear();
            while let Parsed::Frame(f, len) = frame::parse(&buf, frame::DEFAULT_MAX_FRAME_SIZE).unwrap() {
                match f {
                    Frame::Settings { ack: false, .. } => {
                        frame::encode_settings_ack(&mut out);
                        raised = raise;
                    }
                    Frame::Headers { stream, .. } => {
                        let mut block = Vec::new();
                        throng_http2::hpack::encode_field(&mut block, b":status", b"200");
                        frame::encode_headers(&mut out, stream, &block, false, frame::DEFAULT_MAX_FRAME_SIZE);
                        frame::encode_data(&mut out, stream, b"ok", true);
                    }
                    _ => {}
                }
                buf.drain(..len);
            }
            s.write_all(&out).await.unwrap();
            if raised {
                tokio::time::sleep(Duration::from_millis(100)).await;
                out.clear();
                frame::encode_settings(&mut out, &[(frame::setting::MAX_CONCURRENT_STREAMS, 1)]);
                s.write_all(&out).await.unwrap();
            }
        }
    }

    /// A connection to `capped_server`, and a request's header block.
    async fn capped(raise: bool) -> (H2Conn, Vec<u8>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(capped_server(listener, raise));
        opened(addr, 0).await
    }

    /// A connection to the test server at `addr`, whose SETTINGS allow
    /// `server_max` streams, and a GET's header block.
    async fn opened(addr: std::net::SocketAddr, server_max: u32) -> (H2Conn, Vec<u8>) {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
        let (shared, driver) = handshake(4, Transport::Plain(tcp), sleep.as_mut()).await.unwrap();
        assert_eq!(shared.server_max.get(), server_max);
        let c = H2Conn {
            shared,
            opened: Instant::now(),
            id: 0,
            limit: 4,
            in_flight: Cell::new(0),
            carried: Cell::new(0),
            driver,
        };
        let uri: http::Uri = "http://127.0.0.1/".parse().unwrap();
        (c, encode_head(&http::Method::GET, &uri, &http::HeaderMap::new()))
    }

    #[test]
    fn a_stream_waits_for_the_servers_cap_to_rise() {
        on_local(async {
            let (c, block) = capped(true).await;
            let mut slot = Slot::new(false);
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let r = send_on(&c, &block, &Bytes::new(), false, false, 30, &mut slot, sleep.as_mut()).await;
            assert!(r.is_ok(), "{r:?}");
            assert_eq!((slot.status, slot.body_bytes), (200, 2));
            assert!(!c.dead());
            c.driver.abort();
        });
    }

    #[test]
    fn a_cap_that_never_rises_is_stream_limit_and_ends_the_connection() {
        on_local(async {
            let (c, block) = capped(false).await;
            let mut slot = Slot::new(false);
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_millis(100)));
            let r = send_on(&c, &block, &Bytes::new(), false, false, 30, &mut slot, sleep.as_mut()).await;
            let f = r.unwrap_err();
            assert_eq!((f.class, f.written), (ErrorClass::H2("stream_limit"), 0));
            assert!(c.dead(), "the connection takes no new stream: it is replaced");
            assert_eq!(c.shared.conn.borrow().open_streams(), 0, "nothing was sent");
            c.driver.abort();
        });
    }

    #[test]
    fn a_stream_past_its_deadline_is_cancelled_and_the_connection_goes_on() {
        on_local(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::task::spawn_local(raw_server(listener));
            let (c, block) = opened(addr, 10).await;
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let mut slot = Slot::new(true);
            // Stream 1 is never answered: its wait ends and it is cancelled.
            sleep
                .as_mut()
                .reset((Instant::now() + Duration::from_millis(50)).into());
            let r = send_on(&c, &block, &Bytes::new(), false, false, 0, &mut slot, sleep.as_mut()).await;
            assert_eq!(r.unwrap_err().class, ErrorClass::TimeoutResponse);
            assert!(slot.head_request(), "the requester's slot came back");
            // The connection goes on: streams 3, 5 and 7 are answered.
            for _ in 0..3 {
                sleep.as_mut().reset((Instant::now() + Duration::from_secs(10)).into());
                let r = send_on(&c, &block, &Bytes::new(), false, false, 0, &mut slot, sleep.as_mut()).await;
                assert!(r.is_ok(), "{r:?}");
                assert_eq!((slot.status, slot.body_bytes), (200, 2));
            }
            assert!(c.shared.streams.borrow().is_empty());
            assert_eq!(c.shared.conn.borrow().open_streams(), 0);
            assert!(!c.dead());
            c.driver.abort();
            drop(c);
            let resets = tokio::time::timeout(Duration::from_secs(10), server)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(resets, [(1, ErrorCode::CANCEL.0)]);
        });
    }

    /// A connection to `raw_server` whose stream 1 (never answered) ran
    /// out its short deadline, so the next streams are answered.
    async fn answering() -> (H2Conn, Vec<u8>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(raw_server(listener));
        let (c, block) = opened(addr, 10).await;
        let mut slot = Slot::new(false);
        let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_millis(50)));
        let r = send_on(&c, &block, &Bytes::new(), false, false, 0, &mut slot, sleep.as_mut()).await;
        assert_eq!(r.unwrap_err().class, ErrorClass::TimeoutResponse);
        (c, block)
    }

    /// A stream's send is stamped at the driver's write that carries its
    /// HEADERS, not when the stream queued them: the driver is another task
    /// and cannot write before the stream's task yields, so the stamp comes
    /// after an instant taken between the stream's first poll (which
    /// queues its frames) and the next. The old stamp at the queueing came
    /// before that instant.
    #[test]
    fn a_streams_send_is_stamped_at_the_write_not_when_queued() {
        on_local(async {
            let (c, block) = answering().await;
            let mut slot = Slot::new(false);
            let mut sleep = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let none = Bytes::new();
            let mut exchange = std::pin::pin!(send_on(&c, &block, &none, false, false, 0, &mut slot, sleep.as_mut()));
            let first = std::future::poll_fn(|cx| Poll::Ready(exchange.as_mut().poll(cx).is_pending())).await;
            assert!(first, "the stream waits for its response");
            assert_eq!(c.shared.conn.borrow().open_streams(), 1, "its HEADERS are queued");
            let queued = Instant::now();
            let t = exchange.await.unwrap();
            assert!(t.sent > queued, "the send was stamped before the driver wrote it");
            assert!(t.sent <= t.first && t.first <= t.done);
            c.driver.abort();
        });
    }

    /// Streams whose HEADERS one write carries share that write's stamp;
    /// a stream started after it is stamped at its own, later write.
    #[test]
    fn streams_written_together_share_the_writes_stamp() {
        on_local(async {
            let (c, block) = answering().await;
            let (mut s1, mut s2, mut s3) = (Slot::new(false), Slot::new(false), Slot::new(false));
            let mut d1 = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let mut d2 = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let mut d3 = std::pin::pin!(tokio::time::sleep(Duration::from_secs(10)));
            let none = Bytes::new();
            let (a, b) = tokio::join!(
                send_on(&c, &block, &none, false, false, 0, &mut s1, d1.as_mut()),
                send_on(&c, &block, &none, false, false, 0, &mut s2, d2.as_mut()),
            );
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_eq!(a.sent, b.sent, "one write carried both streams' HEADERS");
            let later = send_on(&c, &block, &Bytes::new(), false, false, 0, &mut s3, d3.as_mut())
                .await
                .unwrap();
            assert!(later.sent > a.sent.max(a.done).max(b.done));
            assert_eq!(c.shared.stamped.get(), 7, "streams 3, 5 and 7 were stamped");
            c.driver.abort();
        });
    }
}
