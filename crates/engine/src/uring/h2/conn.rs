//! One HTTP/2 connection of the ring's loop ([`super`]): its socket,
//! its I/O-free protocol state (`throng_http2::Conn`), the streams in
//! flight on it and the output the kernel is sending; and what a receive's
//! bytes do to its streams (the same events, classes and timing as the
//! epoll driver's `Shared::receive`).

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::time::Instant;

use throng_http2::{ErrorCode, Event, StreamId};
use throng_metrics::ErrorClass;
use throng_tls::rustls::ClientConnection;

use crate::proto::http2::{Slot, reset_class};
use crate::proto::session::Session;

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// No connection; its next request opens one.
    Idle,
    /// TCP connecting.
    Connecting,
    /// TLS handshaking (the `tls` phase): ALPN must choose h2.
    Tls,
    /// The preface spoken, waiting for the server's SETTINGS and its
    /// acknowledgement of ours (the `handshake` phase).
    Preface,
    /// Streams may start.
    Ready,
    /// Will start no more requests.
    Done,
}

/// One stream in flight.
pub(super) struct Stream {
    pub(super) id: StreamId,
    /// The response read into the slot (`Session::Http2`), as the epoll
    /// path's stream slot; reused by the connection's next streams.
    pub(super) session: Session,
    /// Latency's origin: when the request started (a connection's first
    /// request: before its connect, as on epoll).
    pub(super) start: Instant,
    /// Just before the submission of the send that carried its HEADERS.
    pub(super) sent: Instant,
    /// `sent` was taken (its HEADERS went out).
    pub(super) stamped: bool,
    pub(super) first: Option<Instant>,
    /// How it ended: at (the kernel's stamp: true), or the class.
    pub(super) end: Option<Result<(Instant, bool), ErrorClass>>,
    pub(super) deadline: Instant,
    pub(super) keep_server: bool,
    /// Bytes of the request body not handed to the connection yet (the
    /// windows were closed).
    pub(super) body_left: usize,
}

/// One connection.
pub(super) struct H2Conn {
    pub(super) state: State,
    pub(super) fd: RawFd,
    /// Bumped at every close: completions of older sockets are stale.
    pub(super) generation: u32,
    pub(super) opened: Instant,
    pub(super) conn_id: u64,
    /// The address being tried (index into the route), and how many were.
    pub(super) addr: usize,
    pub(super) tries: usize,
    pub(super) recv_armed: bool,
    /// Connect or preface deadline; a waiting request's.
    pub(super) deadline: Instant,
    /// The preface went out (the `handshake` phase's start).
    pub(super) preface_at: Instant,
    pub(super) h2: Option<Box<throng_http2::Conn>>,
    /// An https:// connection's session (records in and out of the ring).
    pub(super) tls: Option<Box<ClientConnection>>,
    /// TCP established, the ClientHello queued: the `tls` phase's start.
    pub(super) hello: Instant,
    pub(super) settings: bool,
    pub(super) acked: bool,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (u32::MAX: none).
    pub(super) server_max: u32,
    /// The server sent GOAWAY.
    pub(super) went_away: bool,
    /// No new streams (GOAWAY, a failure that is not a stream's).
    pub(super) dead: bool,
    pub(super) streams: Vec<Stream>,
    /// Sessions of ended streams, for the next ones.
    pub(super) spare: Vec<Session>,
    /// A request counted started that no stream carries yet (the
    /// connection's first, while it opens; one waiting for the server's
    /// cap to allow a stream): when it started.
    pub(super) waiting: Option<Instant>,
    /// Output the kernel is sending (one tracked send at a time); `off`
    /// of it went out.
    pub(super) out: Vec<u8>,
    pub(super) off: usize,
    pub(super) sending: bool,
    /// Streams it carried.
    pub(super) carried: u64,
}

impl H2Conn {
    pub(super) fn new(now: Instant) -> Self {
        H2Conn {
            state: State::Idle,
            fd: -1,
            generation: 0,
            opened: now,
            conn_id: 0,
            addr: 0,
            tries: 0,
            recv_armed: false,
            deadline: now,
            preface_at: now,
            h2: None,
            tls: None,
            hello: now,
            settings: false,
            acked: false,
            server_max: u32::MAX,
            went_away: false,
            dead: false,
            streams: Vec::new(),
            spare: Vec::new(),
            waiting: None,
            out: Vec::new(),
            off: 0,
            sending: false,
            carried: 0,
        }
    }

    /// A new connection's protocol state, nothing of the last one's.
    pub(super) fn reset(&mut self, streams: u32) {
        self.h2 = Some(Box::new(throng_http2::Conn::new(throng_http2::Settings {
            max_concurrent_streams: streams.max(1),
            max_header_list_size: crate::proto::http2::MAX_HEADER_LIST,
            ..throng_http2::Settings::default()
        })));
        self.settings = false;
        self.acked = false;
        self.server_max = u32::MAX;
        self.went_away = false;
        self.dead = false;
        self.carried = 0;
    }

    /// Streams it may carry now: `--streams`, capped by the server.
    pub(super) fn limit(&self, streams: u32) -> usize {
        streams.min(self.server_max).max(1) as usize
    }

    /// A stream may start now.
    pub(super) fn can_start(&self) -> bool {
        !self.dead && self.h2.as_ref().is_some_and(|c| c.can_start_request())
    }

    /// A session for a new stream: an ended stream's, or a new one.
    pub(super) fn session(&mut self, head: bool) -> Session {
        self.spare
            .pop()
            .unwrap_or_else(|| Session::Http2(Box::new(Slot::new(head))))
    }

    /// Fails every stream still open with `class` (the connection ended).
    pub(super) fn end_all(&mut self, class: ErrorClass) {
        self.dead = true;
        for s in &mut self.streams {
            finish(s, Err(class));
        }
    }

    /// Passes a receive's bytes to the connection and what they carried to
    /// the streams; `stamp`: the kernel's receive stamp of them, kept for
    /// a stream when it is after its send (else the reap's clock `now`).
    /// Err: the connection failed (its GOAWAY is in the pending output).
    pub(super) fn receive(
        &mut self,
        input: &[u8],
        stamp: Option<crate::stamps::Stamp>,
        now: Instant,
        body: &[u8],
    ) -> Result<(), ErrorClass> {
        let H2Conn {
            h2,
            streams,
            settings,
            acked,
            server_max,
            went_away,
            dead,
            ..
        } = self;
        let Some(conn) = h2.as_mut() else {
            return Err(ErrorClass::Protocol);
        };
        let arrived = stamp.and_then(|st| {
            let floor = streams.iter().filter(|s| s.stamped).map(|s| s.sent).min()?;
            crate::stamps::arrival(st, now, floor)
        });
        let at = |s: &Stream| match arrived {
            Some(a) if a >= s.sent => (a, true),
            _ => (now, false),
        };
        let mut window = false;
        let r = conn.receive(input, &mut |e| match e {
            Event::Response {
                stream,
                status,
                headers,
            } => {
                if let Some(s) = entry(streams, stream) {
                    s.first = Some(at(s).0);
                    if let Session::Http2(slot) = &mut s.session {
                        slot.head_fields(status, || headers.iter());
                    }
                }
            }
            Event::Data { stream, data } => {
                if let Some(s) = entry(streams, stream)
                    && let Session::Http2(slot) = &mut s.session
                {
                    slot.chunk(data);
                    if slot.over_length() {
                        finish(s, Err(ErrorClass::Protocol));
                    }
                }
            }
            Event::Trailers { stream, headers } => {
                if let Some(s) = entry(streams, stream)
                    && let Session::Http2(slot) = &mut s.session
                {
                    slot.trailer_fields(|| headers.iter());
                }
            }
            Event::StreamEnd { stream } => {
                if let Some(s) = entry(streams, stream) {
                    let short = matches!(&s.session, Session::Http2(slot) if slot.short_of_length());
                    if short {
                        finish(s, Err(ErrorClass::Eof));
                    } else {
                        let end = at(s);
                        finish(s, Ok(end));
                    }
                }
            }
            // After the end of the response, a reset only stops the
            // request body: the response stands (finish keeps the first end).
            Event::StreamReset { stream, code, by_peer } => {
                if let Some(s) = entry(streams, stream) {
                    finish(s, Err(reset_class(code, by_peer)));
                }
            }
            Event::CutOff { stream } => {
                if let Some(s) = entry(streams, stream) {
                    finish(s, Err(ErrorClass::H2("goaway")));
                }
            }
            Event::GoAway { .. } => {
                *went_away = true;
                *dead = true;
            }
            Event::Settings(p) => {
                *settings = true;
                *server_max = p.max_concurrent_streams;
            }
            Event::SettingsAcked => *acked = true,
            Event::WindowUpdate { .. } => window = true,
            _ => {}
        });
        r.map_err(|e| match e.code() {
            ErrorCode::FLOW_CONTROL_ERROR => ErrorClass::H2("flow_control"),
            _ => ErrorClass::H2("protocol"),
        })?;
        if window {
            self.send_bodies(body);
        }
        Ok(())
    }

    /// Hands what the windows now allow of the request bodies still
    /// waiting (`body`: the plan's) to the connection.
    pub(super) fn send_bodies(&mut self, body: &[u8]) {
        let Some(conn) = self.h2.as_mut() else {
            return;
        };
        for s in self.streams.iter_mut().filter(|s| s.body_left > 0 && s.end.is_none()) {
            let from = body.len().saturating_sub(s.body_left);
            match conn.send_data(s.id, &body[from..], true) {
                Ok(n) => s.body_left -= n.min(s.body_left),
                // The stream ended meanwhile: nothing more to send.
                Err(_) => s.body_left = 0,
            }
        }
    }

    /// Takes the streams that ended out of the connection (a stream that
    /// did not end with its response is reset with CANCEL, as epoll's):
    /// `each` records each.
    pub(super) fn take_ended(&mut self, mut each: impl FnMut(&mut Stream, Result<(Instant, bool), ErrorClass>)) {
        let mut k = 0;
        while k < self.streams.len() {
            let Some(end) = self.streams[k].end else {
                k += 1;
                continue;
            };
            let mut s = self.streams.swap_remove(k);
            if (end.is_err() || s.body_left > 0)
                && let Some(conn) = self.h2.as_mut()
            {
                conn.reset_stream(s.id, ErrorCode::CANCEL);
            }
            each(&mut s, end);
            self.carried += 1;
            self.spare.push(s.session);
        }
    }

    /// The connection's pending output moved to `out` for a send (false:
    /// none, or a send is still under way).
    pub(super) fn take_output(&mut self) -> bool {
        if self.sending {
            return false;
        }
        if let Some(session) = self.tls.as_mut() {
            // The frames go into the session (as far as its buffer takes
            // them: the rest at the next turn), its records out.
            if let Some(conn) = self.h2.as_mut()
                && !session.is_handshaking()
            {
                let pending = conn.pending_output();
                if !pending.is_empty() {
                    let n = session.writer().write(pending).unwrap_or(0);
                    conn.consume_output(n);
                }
            }
            self.out.clear();
            self.off = 0;
            while session.wants_write() {
                if !matches!(session.write_tls(&mut self.out), Ok(n) if n > 0) {
                    break;
                }
            }
            return !self.out.is_empty();
        }
        let Some(conn) = self.h2.as_mut() else {
            return false;
        };
        let pending = conn.pending_output();
        if pending.is_empty() {
            return false;
        }
        self.out.clear();
        self.out.extend_from_slice(pending);
        let n = pending.len();
        conn.consume_output(n);
        self.off = 0;
        true
    }

    /// Idle: the connection keeps no buffers.
    pub(super) fn shrink(&mut self) {
        if self.streams.is_empty() && !self.sending {
            if let Some(c) = self.h2.as_mut() {
                c.shrink();
            }
            self.out = Vec::new();
        }
    }
}

/// What a receive's records did to a TLS connection.
#[derive(Default)]
pub(super) struct TlsFed {
    /// The handshake ended with them (ALPN chose h2: the protocol's state
    /// is made).
    pub(super) handshaken: bool,
    /// It ended, and ALPN did not choose h2.
    pub(super) not_h2: bool,
    /// The peer's close_notify.
    pub(super) closed: bool,
}

impl H2Conn {
    /// Feeds a receive's records to the session; its plaintext goes to
    /// the HTTP/2 connection (through `plain`), as [`H2Conn::receive`].
    /// Err: the session or the connection failed.
    pub(super) fn feed_tls(
        &mut self,
        mut payload: &[u8],
        plain: &mut [u8],
        stamp: Option<crate::stamps::Stamp>,
        now: Instant,
        body: &[u8],
        streams: u32,
    ) -> Result<TlsFed, ErrorClass> {
        let mut fed = TlsFed::default();
        while !payload.is_empty() {
            let Some(session) = self.tls.as_mut() else {
                return Err(ErrorClass::Protocol);
            };
            let was_handshaking = session.is_handshaking();
            if session.read_tls(&mut payload).is_err() {
                return Err(ErrorClass::Protocol);
            }
            let state = session
                .process_new_packets()
                .map_err(|e| ErrorClass::Tls(throng_tls::failure_class(&e)))?;
            fed.closed |= state.peer_has_closed();
            if was_handshaking && !session.is_handshaking() {
                fed.handshaken = true;
                if session.alpn_protocol() != Some(b"h2") {
                    fed.not_h2 = true;
                    return Ok(fed);
                }
                self.reset(streams);
            }
            while let Some(session) = self.tls.as_mut() {
                let n = match session.reader().read(plain) {
                    Ok(n) if n > 0 => n,
                    _ => break,
                };
                if self.h2.is_none() {
                    // Plaintext before the handshake's end: never.
                    return Err(ErrorClass::Protocol);
                }
                self.receive(&plain[..n], stamp, now, body)?;
            }
        }
        Ok(fed)
    }
}

fn entry(streams: &mut [Stream], id: StreamId) -> Option<&mut Stream> {
    streams.iter_mut().find(|s| s.id == id)
}

/// Ends a stream once (the first end stands).
fn finish(s: &mut Stream, end: Result<(Instant, bool), ErrorClass>) {
    if s.end.is_none() {
        s.end = Some(end);
    }
}

/// True for a failure that ends one stream and leaves its connection
/// usable (as the epoll path's `stream_level`): a stream reset by the
/// server, a response timeout (the stream is cancelled), a body that broke
/// its `content-length` on a connection that goes on.
pub(super) fn stream_level(class: ErrorClass, dead: bool) -> bool {
    match class {
        ErrorClass::TimeoutResponse => true,
        ErrorClass::H2(name) => name == "refused_stream" || name.starts_with("rst_stream."),
        ErrorClass::Eof | ErrorClass::Protocol => !dead,
        _ => false,
    }
}
