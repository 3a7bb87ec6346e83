//! The client connection state machine (RFC 9113 §5, §6): bytes in,
//! events out, bytes to send. No I/O, no clock, no tasks.

use crate::error::{ConnError, ErrorCode, SendError};
use crate::frame::{self, Frame, Parsed, setting};
use crate::hpack;

/// A stream identifier; client streams are odd.
pub type StreamId = u32;

/// The connection preface a client sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The flow-control window every stream and the connection start with.
pub const DEFAULT_WINDOW: u32 = 65_535;

/// CONTINUATION frames one header block may span before the connection is
/// closed with ENHANCE_YOUR_CALM (a flood of tiny or empty ones).
const MAX_CONTINUATIONS: u32 = 128;

/// Acknowledgements (SETTINGS, PING) queued while the driver writes
/// nothing, before the connection is closed with ENHANCE_YOUR_CALM.
const MAX_QUEUED_ACKS: u32 = 4096;

/// Our side's settings: what the client advertises and holds itself to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// SETTINGS_HEADER_TABLE_SIZE: the most the server's encoder may keep
    /// in our decoder's dynamic table (bytes).
    pub header_table_size: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: receive window of each stream.
    pub initial_window_size: u32,
    /// The connection's receive window; above 65,535 a WINDOW_UPDATE on
    /// stream 0 follows our SETTINGS.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload we accept.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a larger response header list closes
    /// the connection (ENHANCE_YOUR_CALM) rather than being stored.
    pub max_header_list_size: u32,
    /// The most streams we open at once, whatever the server allows.
    pub max_concurrent_streams: u32,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            header_table_size: hpack::DEFAULT_TABLE_SIZE,
            initial_window_size: DEFAULT_WINDOW,
            connection_window: DEFAULT_WINDOW,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 16 * 1024,
            max_concurrent_streams: 100,
        }
    }
}

/// The server's settings, as last received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSettings {
    pub header_table_size: u32,
    /// `u32::MAX` until the server sets a limit.
    pub max_concurrent_streams: u32,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    /// `u32::MAX` until the server sets a limit.
    pub max_header_list_size: u32,
}

impl Default for PeerSettings {
    fn default() -> PeerSettings {
        PeerSettings {
            header_table_size: hpack::DEFAULT_TABLE_SIZE,
            max_concurrent_streams: u32::MAX,
            initial_window_size: DEFAULT_WINDOW,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: u32::MAX,
        }
    }
}

/// A decoded header list, kept in one reused buffer.
#[derive(Debug, Default)]
struct HeaderList {
    bytes: Vec<u8>,
    /// (end of name, end of value) offsets into `bytes`.
    ends: Vec<(u32, u32)>,
}

impl HeaderList {
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(name);
        let n = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.ends.push((n, self.bytes.len() as u32));
    }
}

/// A response's header fields (or trailers), borrowed for the length of
/// one event: pseudo-header fields (`:status`) included, in arrival order.
#[derive(Clone, Copy)]
pub struct Headers<'a> {
    list: &'a HeaderList,
}

impl<'a> Headers<'a> {
    /// The fields as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let list = self.list;
        let mut start = 0u32;
        list.ends.iter().map(move |&(n, v)| {
            let field = (
                &list.bytes[start as usize..n as usize],
                &list.bytes[n as usize..v as usize],
            );
            start = v;
            field
        })
    }

    /// The value of the first field named `name` (names arrive lower case).
    pub fn get(&self, name: &[u8]) -> Option<&'a [u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.list.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.ends.is_empty()
    }
}

impl std::fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(n, v)| (String::from_utf8_lossy(n), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

/// What [`Conn::receive`] reports, in the order the frames carried it.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A final response's header block (1xx interim responses are skipped).
    Response {
        stream: StreamId,
        status: u16,
        headers: Headers<'a>,
    },
    /// Response body bytes. Delivered bytes count as consumed: their
    /// flow-control credit is given back without the driver's help.
    Data { stream: StreamId, data: &'a [u8] },
    /// The trailer block, which ends the stream ([`Event::StreamEnd`] follows).
    Trailers { stream: StreamId, headers: Headers<'a> },
    /// The response is complete (END_STREAM).
    StreamEnd { stream: StreamId },
    /// The stream ended abnormally: RST_STREAM from the server
    /// (`by_peer`), or reset by us because the server broke a stream rule.
    /// After [`Event::StreamEnd`] of a request whose body is still being
    /// sent, a reset with NO_ERROR only means "stop sending the body": the
    /// response stands.
    StreamReset {
        stream: StreamId,
        code: ErrorCode,
        by_peer: bool,
    },
    /// The server sent GOAWAY: no new streams; streams up to `last_stream`
    /// may still complete.
    GoAway {
        last_stream: StreamId,
        code: ErrorCode,
        debug: &'a [u8],
    },
    /// A stream the server's GOAWAY says it never processed (its id is
    /// above `last_stream`): safe to retry on a new connection.
    CutOff { stream: StreamId },
    /// The server's SETTINGS arrived (and were acknowledged). A larger
    /// SETTINGS_INITIAL_WINDOW_SIZE also opens the windows of open streams,
    /// and a larger SETTINGS_MAX_CONCURRENT_STREAMS lets more start.
    Settings(PeerSettings),
    /// The server acknowledged our SETTINGS.
    SettingsAcked,
    /// The answer to our [`Conn::ping`].
    PingAck { data: [u8; 8] },
    /// Send capacity grew on `stream` (0: the connection): a body waiting
    /// for window may go on.
    WindowUpdate { stream: StreamId },
}

#[derive(Debug)]
struct Stream {
    id: StreamId,
    /// We may still send DATA (no END_STREAM sent yet).
    send_open: bool,
    /// The server may still send (no END_STREAM or reset received).
    recv_open: bool,
    got_response: bool,
    send_window: i64,
    recv_window: i64,
    /// Received bytes whose credit has not been returned yet.
    recv_unacked: u32,
}

/// A header block spread over HEADERS and CONTINUATION frames.
#[derive(Debug)]
struct Continuation {
    stream: StreamId,
    end_stream: bool,
    block: Vec<u8>,
    frames: u32,
}

/// One HTTP/2 client connection.
#[derive(Debug)]
pub struct Conn {
    ours: Settings,
    peer: PeerSettings,
    closed: bool,
    goaway_sent: bool,
    goaway_received: Option<StreamId>,
    /// The server's first frame (SETTINGS) arrived.
    preface_received: bool,
    settings_acked: bool,
    decoder: hpack::Decoder,
    streams: Vec<Stream>,
    next_stream: StreamId,
    send_window: i64,
    recv_window: i64,
    recv_unacked: u32,
    continuation: Option<Continuation>,
    /// The start of a frame whose end has not arrived.
    partial: Vec<u8>,
    out: Vec<u8>,
    queued_acks: u32,
    ping_outstanding: Option<[u8; 8]>,
    headers: HeaderList,
}

fn protocol(code: ErrorCode, why: &'static str) -> ConnError {
    ConnError::Protocol { code, why }
}

impl Conn {
    /// A connection whose preface, SETTINGS (ENABLE_PUSH 0 and `ours`) and
    /// connection WINDOW_UPDATE are already in the pending output.
    /// Out-of-range settings are clamped to what RFC 9113 allows.
    pub fn new(ours: Settings) -> Conn {
        let mut ours = ours;
        ours.max_frame_size = ours
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::MAX_MAX_FRAME_SIZE);
        ours.initial_window_size = ours.initial_window_size.min(frame::MAX_WINDOW);
        ours.connection_window = ours.connection_window.clamp(DEFAULT_WINDOW, frame::MAX_WINDOW);
        ours.max_concurrent_streams = ours.max_concurrent_streams.max(1);
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(PREFACE);
        frame::encode_settings(
            &mut out,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::HEADER_TABLE_SIZE, ours.header_table_size),
                (setting::INITIAL_WINDOW_SIZE, ours.initial_window_size),
                (setting::MAX_FRAME_SIZE, ours.max_frame_size),
                (setting::MAX_HEADER_LIST_SIZE, ours.max_header_list_size),
            ],
        );
        if ours.connection_window > DEFAULT_WINDOW {
            frame::encode_window_update(&mut out, 0, ours.connection_window - DEFAULT_WINDOW);
        }
        Conn {
            ours,
            peer: PeerSettings::default(),
            closed: false,
            goaway_sent: false,
            goaway_received: None,
            preface_received: false,
            settings_acked: false,
            // Until the server acknowledges our SETTINGS its encoder may
            // assume the initial 4096 bytes.
            decoder: hpack::Decoder::new(hpack::DEFAULT_TABLE_SIZE.max(ours.header_table_size)),
            streams: Vec::new(),
            next_stream: 1,
            send_window: DEFAULT_WINDOW as i64,
            recv_window: ours.connection_window as i64,
            recv_unacked: 0,
            continuation: None,
            partial: Vec::new(),
            out,
            queued_acks: 0,
            ping_outstanding: None,
            headers: HeaderList::default(),
        }
    }

    /// Bytes to write to the socket.
    pub fn pending_output(&self) -> &[u8] {
        &self.out
    }

    /// Marks the first `n` bytes of [`Conn::pending_output`] as written.
    pub fn consume_output(&mut self, n: usize) {
        let n = n.min(self.out.len());
        if n == self.out.len() {
            self.out.clear();
            self.queued_acks = 0;
        } else {
            self.out.drain(..n);
        }
    }

    /// Releases the buffers an idle connection does not need (the pending
    /// output, the partial frame and the header scratch space, where empty).
    /// A driver calls it when no stream is open.
    pub fn shrink(&mut self) {
        if self.out.is_empty() {
            self.out = Vec::new();
        }
        if self.partial.is_empty() {
            self.partial = Vec::new();
        }
        if self.streams.is_empty() {
            self.streams = Vec::new();
        }
        self.headers = HeaderList::default();
        self.decoder.shrink();
    }

    /// The server's settings as last received.
    pub fn peer_settings(&self) -> PeerSettings {
        self.peer
    }

    /// Streams open now (a request not yet fully answered).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Bytes in the HPACK dynamic table the server's encoder fills (RFC 7541
    /// §4.1 counting; bounded by our SETTINGS_HEADER_TABLE_SIZE): the part
    /// of an idle connection's memory the server decides.
    pub fn hpack_table_size(&self) -> usize {
        self.decoder.table_size()
    }

    /// The ids of the open streams, in no particular order: what a driver
    /// counts as cut short when the socket closes under them.
    pub fn streams(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.streams.iter().map(|s| s.id)
    }

    /// The most streams that may be open at once: ours and the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS, whichever is smaller.
    pub fn max_streams(&self) -> u32 {
        self.ours.max_concurrent_streams.min(self.peer.max_concurrent_streams)
    }

    /// Whether [`Conn::start_request`] would open a stream now.
    pub fn can_start_request(&self) -> bool {
        !self.closed
            && !self.goaway_sent
            && self.goaway_received.is_none()
            && self.streams.len() < self.max_streams() as usize
            && self.next_stream <= frame::MAX_WINDOW
    }

    /// The last stream id the server's GOAWAY will still process.
    pub fn goaway_received(&self) -> Option<StreamId> {
        self.goaway_received
    }

    /// The connection failed or was shut: it takes no more input.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Opens a stream with a header block encoded by
    /// [`crate::hpack::encode_request`] (encode once, reuse for every
    /// request). With `end_stream` the request has no body; otherwise send
    /// it with [`Conn::send_data`].
    pub fn start_request(&mut self, block: &[u8], end_stream: bool) -> Result<StreamId, SendError> {
        if self.closed || self.goaway_sent {
            return Err(SendError::Closed);
        }
        if self.goaway_received.is_some() {
            return Err(SendError::GoingAway);
        }
        if self.streams.len() >= self.max_streams() as usize {
            return Err(SendError::StreamLimit(self.max_streams()));
        }
        let id = self.next_stream;
        if id > frame::MAX_WINDOW {
            return Err(SendError::StreamIdsExhausted);
        }
        self.next_stream += 2;
        frame::encode_headers(&mut self.out, id, block, end_stream, self.peer.max_frame_size);
        self.streams.push(Stream {
            id,
            send_open: !end_stream,
            recv_open: true,
            got_response: false,
            send_window: self.peer.initial_window_size as i64,
            recv_window: self.ours.initial_window_size as i64,
            recv_unacked: 0,
        });
        Ok(id)
    }

    /// How many body bytes `stream` may send now (both windows).
    pub fn send_capacity(&self, stream: StreamId) -> usize {
        match self.streams.iter().find(|s| s.id == stream && s.send_open) {
            Some(s) => s.send_window.min(self.send_window).max(0) as usize,
            None => 0,
        }
    }

    /// Sends as much of `data` as the flow-control windows allow, in frames
    /// no larger than the server's max frame size, and returns how many
    /// bytes went. `end_stream` ends the request once all of `data` went;
    /// the rest waits for an [`Event::WindowUpdate`].
    pub fn send_data(&mut self, stream: StreamId, data: &[u8], end_stream: bool) -> Result<usize, SendError> {
        if self.closed {
            return Err(SendError::Closed);
        }
        let i = self
            .streams
            .iter()
            .position(|s| s.id == stream && s.send_open)
            .ok_or(SendError::NotSendable(stream))?;
        let s = &mut self.streams[i];
        let cap = s.send_window.min(self.send_window).max(0) as usize;
        let n = data.len().min(cap);
        let max = self.peer.max_frame_size as usize;
        let ends = end_stream && n == data.len();
        if n == 0 {
            if ends {
                frame::encode_data(&mut self.out, stream, &[], true);
                s.send_open = false;
            }
        } else {
            let mut chunks = data[..n].chunks(max).peekable();
            while let Some(chunk) = chunks.next() {
                let last = chunks.peek().is_none();
                frame::encode_data(&mut self.out, stream, chunk, ends && last);
            }
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            if ends {
                s.send_open = false;
            }
        }
        if !s.send_open && !s.recv_open {
            self.streams.swap_remove(i);
        }
        Ok(n)
    }

    /// Cancels a stream (a timeout, a run's end): RST_STREAM with `code`.
    /// Frames still arriving for it are dropped.
    pub fn reset_stream(&mut self, stream: StreamId, code: ErrorCode) {
        if let Some(i) = self.streams.iter().position(|s| s.id == stream) {
            self.streams.swap_remove(i);
            if !self.closed {
                frame::encode_rst_stream(&mut self.out, stream, code.0);
            }
        }
    }

    /// Sends a PING; [`Event::PingAck`] reports its answer. A new ping
    /// replaces one still unanswered.
    pub fn ping(&mut self, data: [u8; 8]) {
        if self.closed {
            return;
        }
        frame::encode_ping(&mut self.out, data, false);
        self.ping_outstanding = Some(data);
    }

    /// Shuts the connection gracefully: GOAWAY with `code`; no new streams,
    /// open ones may still complete.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.closed || self.goaway_sent {
            return;
        }
        self.goaway_sent = true;
        frame::encode_goaway(&mut self.out, 0, code.0, b"");
    }

    /// Takes bytes read from the socket — all of them: a frame cut at the
    /// end is kept until its rest arrives — and reports what they carried.
    /// An error closes the connection; the GOAWAY saying why is in the
    /// pending output.
    pub fn receive(&mut self, input: &[u8], on: &mut impl FnMut(Event<'_>)) -> Result<(), ConnError> {
        if self.closed {
            return Err(ConnError::Closed);
        }
        let r = self.receive_inner(input, on);
        if let Err(e) = &r {
            self.fail(e);
        }
        r
    }

    fn fail(&mut self, e: &ConnError) {
        if !self.closed {
            let why = e.to_string();
            frame::encode_goaway(&mut self.out, 0, e.code().0, why.as_bytes());
        }
        self.closed = true;
        self.streams.clear();
        self.continuation = None;
        self.partial = Vec::new();
    }

    fn receive_inner(&mut self, mut input: &[u8], on: &mut impl FnMut(Event<'_>)) -> Result<(), ConnError> {
        let max = self.ours.max_frame_size;
        if !self.partial.is_empty() {
            // Complete the partial frame from the new input.
            while let Parsed::Incomplete { needed } = frame::parse(&self.partial, max)? {
                let take = (needed - self.partial.len()).min(input.len());
                self.partial.extend_from_slice(&input[..take]);
                input = &input[take..];
                if self.partial.len() < needed {
                    return Ok(());
                }
            }
            let buf = std::mem::take(&mut self.partial);
            let r = match frame::parse(&buf, max)? {
                Parsed::Frame(f, _) => self.handle(f, on),
                Parsed::Incomplete { .. } => Ok(()),
            };
            self.partial = buf;
            self.partial.clear();
            r?;
        }
        while !input.is_empty() {
            match frame::parse(input, max)? {
                Parsed::Frame(f, n) => {
                    self.handle(f, on)?;
                    input = &input[n..];
                }
                Parsed::Incomplete { needed } => {
                    self.partial.reserve_exact(needed);
                    self.partial.extend_from_slice(input);
                    break;
                }
            }
            if self.closed {
                break;
            }
        }
        Ok(())
    }

    /// Whether `stream` is a client stream id not yet opened.
    fn is_idle(&self, stream: StreamId) -> bool {
        stream >= self.next_stream
    }

    fn handle(&mut self, f: Frame<'_>, on: &mut impl FnMut(Event<'_>)) -> Result<(), ConnError> {
        if !self.preface_received && !matches!(f, Frame::Settings { ack: false, .. }) {
            return Err(protocol(
                ErrorCode::PROTOCOL_ERROR,
                "the server's first frame is not SETTINGS",
            ));
        }
        if let Some(c) = &self.continuation {
            match f {
                Frame::Continuation { stream, .. } if stream == c.stream => {}
                _ => {
                    return Err(protocol(
                        ErrorCode::PROTOCOL_ERROR,
                        "a header block is interrupted by another frame",
                    ));
                }
            }
        }
        match f {
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(stream, end_stream, data, flow_len, on),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
                ..
            } => {
                if stream.is_multiple_of(2) || self.is_idle(stream) {
                    return Err(protocol(
                        ErrorCode::PROTOCOL_ERROR,
                        "HEADERS on a stream the client did not open",
                    ));
                }
                if end_headers {
                    return self.on_header_block(stream, end_stream, block, on);
                }
                if block.len() > self.max_block() {
                    return Err(too_large());
                }
                self.continuation = Some(Continuation {
                    stream,
                    end_stream,
                    block: block.to_vec(),
                    frames: 0,
                });
                Ok(())
            }
            Frame::Continuation { end_headers, block, .. } => {
                let max = self.max_block();
                let Some(c) = &mut self.continuation else {
                    return Err(protocol(
                        ErrorCode::PROTOCOL_ERROR,
                        "CONTINUATION without a header block to continue",
                    ));
                };
                c.frames += 1;
                if c.frames > MAX_CONTINUATIONS {
                    return Err(protocol(
                        ErrorCode::ENHANCE_YOUR_CALM,
                        "a header block spans too many CONTINUATION frames",
                    ));
                }
                if c.block.len() + block.len() > max {
                    return Err(too_large());
                }
                c.block.extend_from_slice(block);
                if end_headers {
                    let Some(c) = self.continuation.take() else {
                        return Ok(());
                    };
                    return self.on_header_block(c.stream, c.end_stream, &c.block, on);
                }
                Ok(())
            }
            Frame::PushPromise { .. } => Err(protocol(
                ErrorCode::PROTOCOL_ERROR,
                "PUSH_PROMISE although SETTINGS_ENABLE_PUSH is 0",
            )),
            Frame::Priority { .. } | Frame::Unknown { .. } => Ok(()),
            Frame::RstStream { stream, code } => {
                if self.is_idle(stream) {
                    return Err(protocol(ErrorCode::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
                }
                if let Some(i) = self.streams.iter().position(|s| s.id == stream) {
                    self.streams.swap_remove(i);
                    on(Event::StreamReset {
                        stream,
                        code: ErrorCode(code),
                        by_peer: true,
                    });
                }
                Ok(())
            }
            Frame::Settings { ack: true, .. } => {
                if !self.settings_acked {
                    self.settings_acked = true;
                    self.decoder.set_limit(self.ours.header_table_size);
                    on(Event::SettingsAcked);
                }
                Ok(())
            }
            Frame::Settings { ack: false, params } => self.on_settings(params, on),
            Frame::Ping { ack: false, data } => {
                self.queue_ack()?;
                frame::encode_ping(&mut self.out, data, true);
                Ok(())
            }
            Frame::Ping { ack: true, data } => {
                if self.ping_outstanding == Some(data) {
                    self.ping_outstanding = None;
                    on(Event::PingAck { data });
                }
                Ok(())
            }
            Frame::GoAway {
                last_stream,
                code,
                debug,
            } => {
                self.goaway_received = Some(self.goaway_received.map_or(last_stream, |l| l.min(last_stream)));
                on(Event::GoAway {
                    last_stream,
                    code: ErrorCode(code),
                    debug,
                });
                let mut cut = Vec::new();
                self.streams.retain(|s| {
                    if s.id > last_stream {
                        cut.push(s.id);
                    }
                    s.id <= last_stream
                });
                cut.sort_unstable();
                for stream in cut {
                    on(Event::CutOff { stream });
                }
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment, on),
        }
    }

    /// The largest header block (compressed) we collect across CONTINUATION
    /// frames: Huffman can take up to 30 bits for an 8-bit byte, so four
    /// times the header list limit bounds any block that could decode
    /// within it.
    fn max_block(&self) -> usize {
        (self.ours.max_header_list_size as usize)
            .saturating_mul(4)
            .max(self.ours.max_frame_size as usize)
    }

    fn queue_ack(&mut self) -> Result<(), ConnError> {
        self.queued_acks += 1;
        if self.queued_acks > MAX_QUEUED_ACKS {
            return Err(protocol(
                ErrorCode::ENHANCE_YOUR_CALM,
                "too many SETTINGS or PING frames to acknowledge while output is not written",
            ));
        }
        Ok(())
    }

    fn on_settings(&mut self, params: &[u8], on: &mut impl FnMut(Event<'_>)) -> Result<(), ConnError> {
        for (id, value) in frame::settings_iter(params) {
            match id {
                setting::HEADER_TABLE_SIZE => self.peer.header_table_size = value,
                setting::ENABLE_PUSH if value != 0 => {
                    return Err(protocol(
                        ErrorCode::PROTOCOL_ERROR,
                        "a server sent SETTINGS_ENABLE_PUSH other than 0",
                    ));
                }
                setting::MAX_CONCURRENT_STREAMS => self.peer.max_concurrent_streams = value,
                setting::INITIAL_WINDOW_SIZE => {
                    if value > frame::MAX_WINDOW {
                        return Err(protocol(
                            ErrorCode::FLOW_CONTROL_ERROR,
                            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    let delta = value as i64 - self.peer.initial_window_size as i64;
                    for s in &mut self.streams {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW as i64 {
                            return Err(protocol(
                                ErrorCode::FLOW_CONTROL_ERROR,
                                "SETTINGS_INITIAL_WINDOW_SIZE change overflows a stream window",
                            ));
                        }
                    }
                    self.peer.initial_window_size = value;
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value) {
                        return Err(protocol(
                            ErrorCode::PROTOCOL_ERROR,
                            "SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1",
                        ));
                    }
                    self.peer.max_frame_size = value;
                }
                setting::MAX_HEADER_LIST_SIZE => self.peer.max_header_list_size = value,
                _ => {}
            }
        }
        self.preface_received = true;
        self.queue_ack()?;
        frame::encode_settings_ack(&mut self.out);
        on(Event::Settings(self.peer));
        Ok(())
    }

    fn on_window_update(
        &mut self,
        stream: StreamId,
        increment: u32,
        on: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        if stream == 0 {
            if increment == 0 {
                return Err(protocol(
                    ErrorCode::PROTOCOL_ERROR,
                    "WINDOW_UPDATE of 0 on the connection",
                ));
            }
            self.send_window += increment as i64;
            if self.send_window > frame::MAX_WINDOW as i64 {
                return Err(protocol(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "connection window above 2^31-1",
                ));
            }
            on(Event::WindowUpdate { stream: 0 });
            return Ok(());
        }
        if self.is_idle(stream) {
            return Err(protocol(ErrorCode::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        let Some(s) = self.streams.iter_mut().find(|s| s.id == stream) else {
            return Ok(());
        };
        if increment == 0 {
            self.reset_local(stream, ErrorCode::PROTOCOL_ERROR, on);
            return Ok(());
        }
        s.send_window += increment as i64;
        if s.send_window > frame::MAX_WINDOW as i64 {
            self.reset_local(stream, ErrorCode::FLOW_CONTROL_ERROR, on);
            return Ok(());
        }
        on(Event::WindowUpdate { stream });
        Ok(())
    }

    fn on_data(
        &mut self,
        stream: StreamId,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
        on: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        if stream.is_multiple_of(2) || self.is_idle(stream) {
            return Err(protocol(
                ErrorCode::PROTOCOL_ERROR,
                "DATA on a stream the client did not open",
            ));
        }
        if flow_len as i64 > self.recv_window {
            return Err(protocol(
                ErrorCode::FLOW_CONTROL_ERROR,
                "DATA beyond the connection's receive window",
            ));
        }
        self.recv_window -= flow_len as i64;
        // The connection's credit comes back whatever happens to the stream.
        self.recv_unacked += flow_len;
        if self.recv_unacked >= self.ours.connection_window / 2 {
            frame::encode_window_update(&mut self.out, 0, self.recv_unacked);
            self.recv_window += self.recv_unacked as i64;
            self.recv_unacked = 0;
        }
        let window = self.ours.initial_window_size;
        let Some(i) = self.streams.iter().position(|s| s.id == stream && s.recv_open) else {
            // A stream we reset or that already ended: dropped.
            return Ok(());
        };
        let s = &mut self.streams[i];
        if flow_len as i64 > s.recv_window {
            self.reset_local(stream, ErrorCode::FLOW_CONTROL_ERROR, on);
            return Ok(());
        }
        if !s.got_response {
            self.reset_local(stream, ErrorCode::PROTOCOL_ERROR, on);
            return Ok(());
        }
        s.recv_window -= flow_len as i64;
        if !data.is_empty() {
            on(Event::Data { stream, data });
        }
        if end_stream {
            self.end_stream(i, on);
        } else {
            let s = &mut self.streams[i];
            s.recv_unacked += flow_len;
            if s.recv_unacked >= window / 2 && s.recv_unacked > 0 {
                frame::encode_window_update(&mut self.out, stream, s.recv_unacked);
                s.recv_window += s.recv_unacked as i64;
                s.recv_unacked = 0;
            }
        }
        Ok(())
    }

    fn end_stream(&mut self, i: usize, on: &mut impl FnMut(Event<'_>)) {
        let s = &mut self.streams[i];
        s.recv_open = false;
        let stream = s.id;
        if !s.send_open {
            self.streams.swap_remove(i);
        }
        on(Event::StreamEnd { stream });
    }

    /// Resets a stream because the server broke a rule of it.
    fn reset_local(&mut self, stream: StreamId, code: ErrorCode, on: &mut impl FnMut(Event<'_>)) {
        self.reset_stream(stream, code);
        on(Event::StreamReset {
            stream,
            code,
            by_peer: false,
        });
    }

    fn on_header_block(
        &mut self,
        stream: StreamId,
        end_stream: bool,
        block: &[u8],
        on: &mut impl FnMut(Event<'_>),
    ) -> Result<(), ConnError> {
        // Decode even for a stream we dropped: the HPACK table is shared.
        let Conn {
            decoder, headers, ours, ..
        } = self;
        headers.clear();
        decoder.decode(block, ours.max_header_list_size, &mut |n, v| headers.push(n, v))?;
        let Some(i) = self.streams.iter().position(|s| s.id == stream && s.recv_open) else {
            return Ok(());
        };
        let list = Headers { list: &self.headers };
        if self.streams[i].got_response {
            if !end_stream {
                self.reset_local(stream, ErrorCode::PROTOCOL_ERROR, on);
                return Ok(());
            }
            on(Event::Trailers { stream, headers: list });
            self.end_stream(i, on);
            return Ok(());
        }
        let status = match list.iter().next() {
            Some((b":status", v)) => parse_status(v),
            _ => None,
        };
        let Some(status) = status else {
            self.reset_local(stream, ErrorCode::PROTOCOL_ERROR, on);
            return Ok(());
        };
        if status < 200 {
            // An interim response: the final one follows.
            if end_stream {
                self.reset_local(stream, ErrorCode::PROTOCOL_ERROR, on);
            }
            return Ok(());
        }
        self.streams[i].got_response = true;
        on(Event::Response {
            stream,
            status,
            headers: Headers { list: &self.headers },
        });
        if end_stream {
            self.end_stream(i, on);
        }
        Ok(())
    }
}

fn too_large() -> ConnError {
    protocol(
        ErrorCode::ENHANCE_YOUR_CALM,
        "a header block is larger than SETTINGS_MAX_HEADER_LIST_SIZE allows",
    )
}

/// A three-digit status code, 100..=999.
fn parse_status(v: &[u8]) -> Option<u16> {
    match v {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            Some((a - b'0') as u16 * 100 + (b - b'0') as u16 * 10 + (c - b'0') as u16)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
