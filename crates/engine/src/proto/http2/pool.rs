//! A worker's pool of HTTP/2 connections and a loop's request on it.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

use throng_metrics::{ErrorClass, Phase, SlowEnd};
use throng_plan::StatusSet;
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::driver::{H2Conn, close, speak};
use super::grpc::{grpc_outcome, record_messages};
use super::sse::{Read, send_read};
use super::stream::{encode_head, exchange, send_on, stream_level};
use super::{Slot, Spec};
use crate::conn::{Failed, Timing, open_connection};
use crate::ctx::Ctx;
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::record::record_exchange;
use crate::rows::Row;

/// A worker's HTTP/2 connections, each serving one origin of the plan's
/// targets (one, or several: see crate::targets::Pick::bind).
pub(crate) struct Pool {
    pub(crate) spec: Spec,
    /// The spec's request header block, encoded once for every stream.
    pub(super) block: Vec<u8>,
    /// `--trace-context`: where the block's traceparent ids start.
    trace_at: Option<usize>,
    /// Each connection with the origin it serves.
    conns: RefCell<Vec<(usize, Rc<H2Conn>)>>,
    /// Per origin: connections being opened (they count against the cap).
    opening: RefCell<Vec<u64>>,
    /// Per origin: the worker's connections that may serve it.
    caps: Vec<u64>,
    /// Per origin: a stream ended or a connection came or went (a slot of
    /// one origin waits for its own origin's room only).
    room: Vec<Notify>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("connections", &self.conns.borrow().len())
            .finish_non_exhaustive()
    }
}

/// What a slot gets: a stream on a connection, or the right to open one.
enum Take {
    Stream(Rc<H2Conn>),
    Open,
}

impl Pool {
    /// The pool of a worker whose targets `pick` chooses (None: one).
    pub(crate) fn new(spec: Spec, pick: Option<&crate::targets::Pick>) -> Self {
        let caps = pick.map_or_else(|| vec![spec.connections], |p| p.shares(spec.connections));
        let block = encode_head(&spec.method, &spec.uri, &spec.headers);
        Pool {
            trace_at: throng_plan::placeholder_at(&block),
            block,
            spec,
            conns: RefCell::new(Vec::new()),
            opening: RefCell::new(vec![0; caps.len()]),
            room: caps.iter().map(|_| Notify::new()).collect(),
            caps,
        }
    }

    /// Connections being opened to origin `o`, changed by `by`.
    fn opening(&self, o: usize, by: i64) -> u64 {
        let mut opening = self.opening.borrow_mut();
        let Some(n) = opening.get_mut(o) else { return 0 };
        *n = n.saturating_add_signed(by);
        *n
    }

    /// A stream on a live connection to origin `o` with room, or the right
    /// to open one; None when nothing frees up before the run stops.
    async fn take(&self, ctx: &Ctx, o: usize) -> Option<Take> {
        if !ctx.spec.keepalive {
            // A connection per request: the slots bound how many at once.
            return Some(Take::Open);
        }
        let room = self.room.get(o)?;
        loop {
            let notified = room.notified();
            let stop = ctx.stop_notify.notified();
            if ctx.stopping.get() {
                return None;
            }
            self.reap(ctx);
            {
                let conns = self.conns.borrow();
                if let Some((_, c)) = conns
                    .iter()
                    .find(|(at, c)| *at == o && !c.dead() && c.in_flight.get() < c.limit())
                {
                    c.in_flight.set(c.in_flight.get() + 1);
                    return Some(Take::Stream(Rc::clone(c)));
                }
                let open = conns.iter().filter(|(at, _)| *at == o).count() as u64 + self.opening(o, 0);
                if open < self.caps.get(o).copied().unwrap_or(0) {
                    self.opening(o, 1);
                    return Some(Take::Open);
                }
            }
            // Every stream is busy: wait for one to end (each is bounded
            // by --timeout) or for the stop.
            tokio::select! {
                () = notified => {}
                () = stop => return None,
            }
        }
    }

    /// Closes the connections that ended and carry no stream any more.
    fn reap(&self, ctx: &Ctx) {
        let mut conns = self.conns.borrow_mut();
        if conns.iter().any(|(_, c)| c.dead() && c.in_flight.get() == 0) {
            conns.retain(|(_, c)| {
                let done = c.dead() && c.in_flight.get() == 0;
                if done {
                    close(ctx, c);
                }
                !done
            });
        }
    }

    /// A stream on `c` (to origin `o`) ended.
    fn release(&self, ctx: &Ctx, c: &Rc<H2Conn>, o: usize) {
        c.in_flight.set(c.in_flight.get() - 1);
        c.carried.set(c.carried.get() + 1);
        ctx.rec.borrow_mut().stream_closed();
        let gone = c.dead() && c.in_flight.get() == 0;
        if gone {
            self.reap(ctx);
        }
        if let Some(room) = self.room.get(o) {
            if gone {
                room.notify_waiters();
            } else {
                room.notify_one();
            }
        }
    }

    /// Closes every connection (the worker's loops have ended).
    pub(crate) fn close_all(&self, ctx: &Ctx) {
        for (_, c) in self.conns.borrow_mut().drain(..) {
            close(ctx, &c);
        }
    }
}

/// One request on a stream: take a stream (or open a connection), send,
/// read, record. `origin`: see exchange::one_request; in a closed loop the
/// wait for a free stream is not part of the request.
pub(crate) async fn one_request(
    ctx: &Ctx,
    session: &mut Session,
    mut sleep: Pin<&mut Sleep>,
    origin: Instant,
    scheduled: bool,
    cursor: &mut crate::targets::Cursor,
) {
    let Some(pool) = ctx.conns.h2.as_ref() else {
        return;
    };
    // With several targets, the origin this slot serves (see Pool).
    let o = ctx.pick.as_ref().map_or(0, |p| p.bind(cursor, pool.spec.connections));
    let Some(take) = pool.take(ctx, o).await else {
        if scheduled {
            // The run stopped before a stream freed up: a scheduled start
            // never sent.
            ctx.rec.borrow_mut().dropped(Instant::now());
        }
        return;
    };
    let now = Instant::now();
    let origin = if scheduled { origin } else { now };
    ctx.rec.borrow_mut().request_started();
    ctx.in_flight.set(ctx.in_flight.get() + 1);
    // The next of the plan's several requests (on this slot's origin).
    let entry = ctx.pick.as_ref().map(|p| {
        let i = p.next(cursor);
        p.started(i);
        (p, i)
    });
    let mut row = ctx.row(now);
    if scheduled && let Some(r) = row.row() {
        r.phase(Phase::ScheduleLag, now.saturating_duration_since(origin));
    }

    let conn = match pool.conn_for(ctx, take, o, sleep.as_mut(), row.row()).await {
        Ok(c) => c,
        Err(class) => return not_opened(ctx, class, entry, origin, row.row()),
    };
    if let Some(r) = row.row() {
        r.conn(conn.id);
    }
    let traced = stamp(ctx, pool, entry.is_none(), cursor, row.row());
    let mut t_send = Instant::now();
    ctx.rec
        .borrow_mut()
        .stream_opened(t_send, u64::from(conn.in_flight.get()));
    // A gRPC deadline shorter than --timeout ends the wait first.
    let deadline = pool.spec.deadline.filter(|d| *d < ctx.spec.timeout);
    sleep
        .as_mut()
        .reset((t_send + deadline.unwrap_or(ctx.spec.timeout)).into());
    let keep_server = ctx.rec.borrow().wants_first_reply();
    let follow = ctx.spec.follow.as_deref().filter(|f| f.limit > 0);
    let mut sse = Read::of(ctx, origin);
    let (mut outcome, mut request_len) = send_request(
        pool,
        &conn,
        session,
        entry,
        keep_server,
        follow.is_some(),
        sleep.as_mut(),
        traced,
        sse.as_deref_mut(),
    )
    .await;
    cut_off(&mut outcome, &conn);
    if pool.spec.grpc {
        grpc_outcome(&mut outcome, session, deadline.is_some(), &ctx.spec.expect, request_len);
    }
    let mut released = false;
    if let (Some(f), Session::Http2(slot)) = (follow, &mut *session)
        && outcome
            .as_ref()
            .is_ok_and(|_| crate::redirect::is_redirect(slot.status))
    {
        // Its stream is done: the hops take streams of their own (on this
        // connection when it has room).
        pool.finish(ctx, &conn, o, &outcome);
        released = true;
        let first = crate::mux::Chain {
            outcome,
            t_send,
            request_len,
            hops: 0,
        };
        let trace = traced_id(ctx, cursor);
        let chain = Box::pin(crate::mux::follow_h2(ctx, pool, f, slot, first, sleep, trace)).await;
        if let Some(r) = row.row() {
            r.redirects(chain.hops);
        }
        (outcome, t_send, request_len) = (chain.outcome, chain.t_send, chain.request_len);
    }
    // Its first byte went out with its HEADERS, at the driver's write (the
    // stream's `sent`), after every stream started meanwhile had queued its
    // own: its time on the wire starts there, as HTTP/1.1's starts at its
    // write.
    if let Ok(t) = &outcome {
        t_send = t_send.max(t.sent);
    }
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    // A stream of another length than --expect-messages fails its check
    // whatever its status: no status is expected of it.
    let wrong_count = match (&*session, pool.spec.expect_messages) {
        (Session::Http2(slot), Some(n)) => slot.messages != n,
        _ => false,
    };
    let nothing;
    let expect = if wrong_count {
        nothing = StatusSet::from_codes(&[]);
        &nothing
    } else {
        &ctx.spec.expect
    };
    let recorded = record_exchange(
        ctx,
        session,
        &outcome,
        request_len,
        t_send,
        origin,
        expect,
        keep_server,
        row.row(),
    );
    if let Some(r) = &sse {
        r.ended(&outcome, recorded, t_send);
    }
    offer_slowest(ctx, cursor, origin, &outcome, session);
    if let Some((p, i)) = entry {
        let response = match (&outcome, recorded) {
            (Ok(t), Some(ok)) => Some((t.done.saturating_duration_since(t_send), ok)),
            _ => None,
        };
        p.ended(&ctx.scenario, i, Instant::now(), response);
    }
    if (pool.spec.server_streaming || pool.spec.requests.is_some())
        && let Session::Http2(slot) = &*session
    {
        let bidi = pool.spec.server_streaming && pool.spec.requests.is_some();
        record_messages(ctx, slot, &outcome, t_send, pool.spec.server_streaming, bidi);
    }
    if !released {
        pool.finish(ctx, &conn, o, &outcome);
    }
}

/// A stream the server accepted, then closed the connection on after its
/// GOAWAY without answering: cut off by the GOAWAY.
fn cut_off(outcome: &mut Result<Timing, Failed>, conn: &H2Conn) {
    if let Err(f) = outcome
        && matches!(f.class, ErrorClass::Reset | ErrorClass::Eof)
        && conn.went_away()
    {
        f.class = ErrorClass::H2("goaway");
    }
}

/// A request that found no connection (`class`): recorded as failed, in
/// its row and, with trace context, in the slowest under an id of its own.
fn not_opened(
    ctx: &Ctx,
    class: ErrorClass,
    entry: Option<(&crate::targets::Pick, usize)>,
    origin: Instant,
    mut row: Option<&mut Row<'_>>,
) {
    let now = Instant::now();
    ctx.rec.borrow_mut().request_failed(now, class, 0);
    ctx.in_flight.set(ctx.in_flight.get() - 1);
    if let Some((p, i)) = entry {
        p.ended(&ctx.scenario, i, now, None);
    }
    if let Some(r) = row.as_deref_mut() {
        r.failed(class);
    }
    if let Some(t) = &ctx.spec.trace {
        let id = t.ids().0;
        if let Some(r) = row {
            r.trace(id);
        }
        t.offer(&mut ctx.rec.borrow_mut(), origin, now, SlowEnd::Error(class), id);
    }
}

/// With trace context, this request's ids in the task's cursor (`one`:
/// the plan's one header block copied there with them written over), and
/// in its row.
fn stamp<'a>(
    ctx: &'a Ctx,
    pool: &Pool,
    one: bool,
    cursor: &'a mut crate::targets::Cursor,
    row: Option<&mut Row<'_>>,
) -> Option<(&'a crate::trace::Tracer, &'a crate::trace::Traced)> {
    let t = ctx.spec.trace.as_ref()?;
    let traced = t.stamp_block(&mut cursor.traced, one.then_some((&pool.block[..], pool.trace_at)));
    if let Some(r) = row {
        r.trace(traced.id);
    }
    Some((t, traced))
}

/// A traced request ended with `outcome` (its status in `session`):
/// offered to the worker's slowest under its trace id.
fn offer_slowest(
    ctx: &Ctx,
    cursor: &crate::targets::Cursor,
    origin: Instant,
    outcome: &Result<Timing, Failed>,
    session: &Session,
) {
    if let (Some(t), Some(id)) = (&ctx.spec.trace, traced_id(ctx, cursor)) {
        let (end, how) = match (outcome, session) {
            (Ok(timing), Session::Http2(slot)) => (timing.done, SlowEnd::Status(slot.status)),
            (Ok(timing), _) => (timing.done, SlowEnd::Status(0)),
            (Err(f), _) => (Instant::now(), SlowEnd::Error(f.class)),
        };
        t.offer(&mut ctx.rec.borrow_mut(), origin, end, how, id);
    }
}

/// The trace id of the request `cursor`'s task sends (None: no trace
/// context). Read back after each await: the future holds no copy.
fn traced_id(ctx: &Ctx, cursor: &crate::targets::Cursor) -> Option<[u8; 16]> {
    ctx.spec.trace.as_ref()?;
    cursor.traced.as_ref().map(|t| t.id)
}

/// Sends a slot's request on `conn`: the next of the plan's several
/// requests (`entry`, its traceparent's ids from `traced`), or its one
/// request (`traced`'s copy of the block with trace context; `follow`: its
/// headers are kept, for a redirect's Location); `sse`: its response is an
/// event stream, read into it. Returns the outcome and the request's size
/// as counted.
#[allow(clippy::too_many_arguments)]
async fn send_request(
    pool: &Pool,
    conn: &H2Conn,
    session: &mut Session,
    entry: Option<(&crate::targets::Pick, usize)>,
    keep_server: bool,
    follow: bool,
    sleep: Pin<&mut Sleep>,
    traced: Option<(&crate::trace::Tracer, &crate::trace::Traced)>,
    sse: Option<&mut Read<'_>>,
) -> (Result<Timing, Failed>, usize) {
    let protocol = Failed {
        class: ErrorClass::Protocol,
        written: 0,
    };
    let mut request_len = pool.spec.head_bytes + pool.spec.body.len();
    // Never: the loops give HTTP/2 plans HTTP/2 slots.
    let Session::Http2(slot) = session else {
        return (Err(protocol), request_len);
    };
    let Some((block, body)) = request_parts(pool, slot, entry, keep_server, follow, traced, &mut request_len) else {
        return (Err(protocol), request_len);
    };
    let head_len = request_len - body.len();
    let outcome = match (sse, entry) {
        // Boxed: only stream runs pay for the larger future and the reader.
        (Some(r), _) => Box::pin(send_read(r, conn, &block, &body, head_len, slot, sleep)).await,
        (None, Some(_)) => send_on(conn, &block, &body, false, false, head_len, slot, sleep).await,
        (None, None) => exchange(&pool.spec, &block, conn, slot, keep_server, sleep).await,
    };
    (outcome, request_len)
}

/// The header block and body of [`send_request`]'s request, its slot
/// readied for it (None: an entry that cannot be sent, never: every entry
/// was converted before the run, crate::mux::check_table).
fn request_parts<'a>(
    pool: &'a Pool,
    slot: &mut Slot,
    entry: Option<(&crate::targets::Pick, usize)>,
    keep_server: bool,
    follow: bool,
    traced: Option<(&'a crate::trace::Tracer, &'a crate::trace::Traced)>,
    request_len: &mut usize,
) -> Option<(std::borrow::Cow<'a, [u8]>, bytes::Bytes)> {
    let Some((p, i)) = entry else {
        if follow {
            // The Location of a redirect is read from the headers.
            slot.reset(Keep {
                server: keep_server,
                headers: true,
                body: 0,
            });
        }
        slot.keep.server = keep_server;
        slot.for_method(&pool.spec.method);
        let block = traced.map_or(&pool.block[..], |(_, t)| &t.bytes[..]);
        return Some((block.into(), pool.spec.body.clone()));
    };
    slot.reset(Keep {
        server: keep_server,
        ..Keep::default()
    });
    // Only the encoded header block and the body wait for the response:
    // the parsed request (its header map, its URI) is dropped before the
    // await instead of being held, with a clone of it, in every stream's
    // future (1,056 -> 392 bytes unoptimized; a run holds one such future
    // per stream slot).
    let parts = crate::mux::parts_of(&p.request_shared(i), pool.spec.uri.scheme_str() == Some("https")).ok()?;
    *request_len = parts.h2_len();
    slot.for_method(&parts.method);
    let mut head = encode_head(&parts.method, &parts.uri, &parts.headers);
    if let (Some((t, ids)), Some(at)) = (traced, throng_plan::placeholder_at(&head)) {
        t.write(&mut head, at, ids);
    }
    Some((head.into(), parts.body))
}

impl Pool {
    /// The connection of `take` (a stream on one, or one opened now to
    /// origin `o`: a failure to open is its class, recorded as the
    /// connection's).
    async fn conn_for(
        &self,
        ctx: &Ctx,
        take: Take,
        o: usize,
        sleep: Pin<&mut Sleep>,
        row: Option<&mut Row<'_>>,
    ) -> Result<Rc<H2Conn>, ErrorClass> {
        if let Take::Stream(c) = take {
            return Ok(c);
        }
        let dest = ctx.pick.as_ref().and_then(|p| p.origin_dest(o));
        // Small (its parts are boxed inside): held in place.
        let opened = open(ctx, &self.spec, dest, sleep, row).await;
        if ctx.spec.keepalive {
            self.opening(o, -1);
        }
        match opened {
            Ok(c) => {
                let c = Rc::new(c);
                c.in_flight.set(1);
                if ctx.spec.keepalive {
                    self.conns.borrow_mut().push((o, Rc::clone(&c)));
                    // Room for more than this one stream.
                    if let Some(room) = self.room.get(o) {
                        room.notify_waiters();
                    }
                }
                Ok(c)
            }
            Err(class) => {
                if let Some(room) = self.room.get(o) {
                    room.notify_one();
                }
                Err(class)
            }
        }
    }

    /// A stream on `conn` (to origin `o`) ended with `outcome`: a connection that failed
    /// takes no new streams; without keep-alive it is closed.
    fn finish(&self, ctx: &Ctx, conn: &Rc<H2Conn>, o: usize, outcome: &Result<Timing, Failed>) {
        if let Err(f) = outcome
            && !stream_level(f.class, conn)
        {
            // The connection failed or is going away: no new streams on it.
            conn.shared.dead.set(true);
        }
        if !ctx.spec.keepalive {
            conn.shared.dead.set(true);
            conn.in_flight.set(0);
            conn.carried.set(1);
            ctx.rec.borrow_mut().stream_closed();
            close(ctx, conn);
            return;
        }
        self.release(ctx, conn, o);
    }

    /// A redirect's hop to origin `o` of the pool: a stream of one of its
    /// connections (opened when there is room), `parts` sent on it and the
    /// response read into `slot` within the deadline `sleep` was armed
    /// with. A run stopping before a stream frees up is `interrupted`.
    pub(crate) async fn hop(
        &self,
        ctx: &Ctx,
        o: usize,
        parts: &crate::mux::Parts,
        slot: &mut Slot,
        mut sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        let failed = |class| Failed { class, written: 0 };
        let take = self.take(ctx, o).await.ok_or(failed(ErrorClass::Interrupted))?;
        let conn = self
            .conn_for(ctx, take, o, sleep.as_mut(), None)
            .await
            .map_err(failed)?;
        ctx.rec
            .borrow_mut()
            .stream_opened(Instant::now(), u64::from(conn.in_flight.get()));
        slot.for_method(&parts.method);
        let head = encode_head(&parts.method, &parts.uri, &parts.headers);
        let mut outcome = send_on(
            &conn,
            &head,
            &parts.body,
            false,
            false,
            parts.h2_len() - parts.body.len(),
            slot,
            sleep,
        )
        .await;
        if let Err(f) = &mut outcome
            && matches!(f.class, ErrorClass::Reset | ErrorClass::Eof)
            && conn.went_away()
        {
            f.class = ErrorClass::H2("goaway");
        }
        self.finish(ctx, &conn, o, &outcome);
        outcome
    }
}

/// Opens a connection and speaks the HTTP/2 preface: the client's
/// SETTINGS out, the server's in and ours acknowledged, recorded as the
/// `handshake` phase.
///
/// Each part boxed on its own, so that only the part under way is held: a
/// run opens its connections all at once, and while they wait for the
/// server's SETTINGS (a round trip; on loopback TCP itself connects inside
/// the system call) each held the whole opening future, its connect and
/// TLS parts included (1,144 bytes unoptimized), instead of the preface's
/// (296): about 0.8 KB per connection at the run's peak of memory.
async fn open(
    ctx: &Ctx,
    spec: &Spec,
    dest: Option<&crate::targets::Dest>,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<H2Conn, ErrorClass> {
    // With targets on several origins, to the one the connection serves.
    let ready = match dest {
        Some(d) => {
            Box::pin(crate::conn::open_connection_to(
                ctx,
                &d.route,
                d.tls.as_ref(),
                &[],
                None,
                false,
                sleep.as_mut(),
                row.as_deref_mut(),
            ))
            .await?
        }
        None => {
            Box::pin(open_connection(
                ctx,
                &[],
                None,
                false,
                sleep.as_mut(),
                row.as_deref_mut(),
            ))
            .await?
        }
    };
    let crate::conn::Ready { conn, .. } = ready;
    let opened = conn.opened;
    Box::pin(speak(ctx, spec.streams, conn.stream, opened, conn.id, sleep, row))
        .await
        .inspect_err(|_| {
            let now = Instant::now();
            ctx.rec.borrow_mut().connection_closed(now, now - opened);
        })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    /// The size of what `f` returns, without calling it.
    fn size_of_return<A, R>(_: impl FnOnce(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A run opens its connections all at once, each in an `open` future
    /// of its own: at 10,000 h2c connections those were 36 MB (3.6 KB
    /// each, mostly TLS and proxy state a plain connection never uses)
    /// until conn::open_transport boxed those parts. Unoptimized, it
    /// measured 3,696 bytes before, 1,136 after; 1,144 later, then 104
    /// once its parts were boxed each on its own (the connect's is held
    /// only while TCP and TLS connect, the preface's while it is spoken).
    #[test]
    fn opening_a_connection_stays_small() {
        type Args<'a> = (&'a Ctx, &'a Spec, Pin<&'a mut Sleep>, Option<&'a mut Row<'a>>);
        let size = size_of_return(|a: Args| open(a.0, a.1, None, a.2, a.3));
        assert!(size <= 160, "opening an HTTP/2 connection is a {size}-byte future");
        type Speak<'a> = (
            &'a Ctx,
            crate::transport::Transport,
            Pin<&'a mut Sleep>,
            Option<&'a mut Row<'a>>,
        );
        let size = size_of_return(|a: Speak| speak(a.0, 1, a.1, Instant::now(), 0, a.2, a.3));
        assert!(size <= 400, "speaking the preface is a {size}-byte future");
        let size = size_of_return(
            |(c, slot, sleep, body): (&H2Conn, &mut Slot, Pin<&mut Sleep>, &Bytes)| {
                send_on(c, &[], body, false, false, 0, slot, sleep)
            },
        );
        assert!(size <= 400, "a stream's exchange is a {size}-byte future");
    }

    /// A closed or open loop's stream slot awaits this future for every
    /// request, boxed, and holds it while the response is awaited: at
    /// 10,000 connections of one stream each, every hundred bytes here is
    /// a megabyte. Unoptimized, it measured 1,288 bytes while the targets'
    /// path held the parsed request and a clone of it across the await
    /// (send_request 1,056 bytes), 624 since.
    #[test]
    fn a_streams_request_future_stays_small() {
        type Args<'a> = (
            &'a Ctx,
            &'a mut Session,
            Pin<&'a mut Sleep>,
            Instant,
            bool,
            &'a mut crate::targets::Cursor,
        );
        let size = size_of_return(|a: Args| one_request(a.0, a.1, a.2, a.3, a.4, a.5));
        assert!(size <= 700, "a stream's request is a {size}-byte future");
        type Send<'a> = (&'a Pool, &'a H2Conn, &'a mut Session, Pin<&'a mut Sleep>);
        let size = size_of_return(|a: Send| send_request(a.0, a.1, a.2, None, false, false, a.3, None, None));
        assert!(size <= 440, "sending a stream's request is a {size}-byte future");
    }
}
