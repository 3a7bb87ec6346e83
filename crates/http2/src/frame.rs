//! HTTP/2 frames (RFC 9113 §4, §6): parsed in place from a byte slice,
//! encoded into a caller's `Vec<u8>`.
//!
//! [`parse`] never copies: a complete frame borrows its payload from the
//! input; an incomplete one answers [`Parsed::Incomplete`] with how many
//! bytes the whole frame needs, so a caller keeps at most one partial frame.

use crate::error::FrameError;

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value and smallest allowed value.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// SETTINGS_MAX_FRAME_SIZE's largest allowed value (2^24 - 1).
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest window and window increment (2^31 - 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;
pub const FLAG_PADDED: u8 = 0x8;
pub const FLAG_PRIORITY: u8 = 0x20;

pub const TYPE_DATA: u8 = 0x0;
pub const TYPE_HEADERS: u8 = 0x1;
pub const TYPE_PRIORITY: u8 = 0x2;
pub const TYPE_RST_STREAM: u8 = 0x3;
pub const TYPE_SETTINGS: u8 = 0x4;
pub const TYPE_PUSH_PROMISE: u8 = 0x5;
pub const TYPE_PING: u8 = 0x6;
pub const TYPE_GOAWAY: u8 = 0x7;
pub const TYPE_WINDOW_UPDATE: u8 = 0x8;
pub const TYPE_CONTINUATION: u8 = 0x9;

/// SETTINGS parameter identifiers (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The dependency and weight of a HEADERS or PRIORITY frame (deprecated by
/// RFC 9113 but still parsed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub exclusive: bool,
    pub depends_on: u32,
    pub weight: u8,
}

/// One parsed frame; payloads borrow from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `flow_len` is the whole payload length, padding included: what flow
    /// control counts.
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        flow_len: u32,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        block: &'a [u8],
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    /// `params` holds whole 6-byte entries; read them with [`settings_iter`].
    Settings {
        ack: bool,
        params: &'a [u8],
    },
    PushPromise {
        stream: u32,
        end_headers: bool,
        promised: u32,
        block: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: u32,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// A frame of a type this crate does not know: ignored (RFC 9113 §4.1).
    Unknown {
        kind: u8,
        stream: u32,
    },
}

/// What [`parse`] found at the start of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A whole frame and the number of input bytes it took.
    Frame(Frame<'a>, usize),
    /// The input holds only part of a frame: the whole frame is `needed`
    /// bytes (header included; `HEADER_LEN` when not even the header is in).
    Incomplete { needed: usize },
}

/// The (id, value) pairs of a SETTINGS payload.
pub fn settings_iter(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    })
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn size(kind: &'static str, len: u32, why: &'static str) -> FrameError {
    FrameError::Size { kind, len, why }
}

fn protocol(kind: &'static str, why: &'static str) -> FrameError {
    FrameError::Protocol { kind, why }
}

/// Strips the padding of a PADDED payload.
fn unpad<'a>(kind: &'static str, flags: u8, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if flags & FLAG_PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(size(kind, 0, "PADDED flag set but no pad length"));
    };
    if pad as usize > rest.len() {
        return Err(protocol(kind, "padding is longer than the payload"));
    }
    Ok(&rest[..rest.len() - pad as usize])
}

/// Parses the frame at the start of `buf`. `max_frame_size` is the
/// SETTINGS_MAX_FRAME_SIZE this side advertised: a longer frame is a
/// FRAME_SIZE_ERROR before any of its payload is awaited.
pub fn parse(buf: &[u8], max_frame_size: u32) -> Result<Parsed<'_>, FrameError> {
    if buf.len() < HEADER_LEN {
        return Ok(Parsed::Incomplete { needed: HEADER_LEN });
    }
    let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]);
    let kind = buf[3];
    let flags = buf[4];
    let stream = be32(&buf[5..9]) & MAX_WINDOW;
    if len > max_frame_size {
        return Err(size(kind_name(kind), len, "longer than SETTINGS_MAX_FRAME_SIZE"));
    }
    let total = HEADER_LEN + len as usize;
    if buf.len() < total {
        return Ok(Parsed::Incomplete { needed: total });
    }
    let p = &buf[HEADER_LEN..total];
    let frame = match kind {
        TYPE_DATA => {
            if stream == 0 {
                return Err(protocol("DATA", "on stream 0"));
            }
            let data = unpad("DATA", flags, p)?;
            Frame::Data {
                stream,
                end_stream: flags & FLAG_END_STREAM != 0,
                data,
                flow_len: len,
            }
        }
        TYPE_HEADERS => {
            if stream == 0 {
                return Err(protocol("HEADERS", "on stream 0"));
            }
            let mut block = unpad("HEADERS", flags, p)?;
            let mut priority = None;
            if flags & FLAG_PRIORITY != 0 {
                if block.len() < 5 {
                    return Err(size("HEADERS", len, "PRIORITY flag set but no priority fields"));
                }
                priority = Some(parse_priority(block));
                block = &block[5..];
            }
            Frame::Headers {
                stream,
                end_stream: flags & FLAG_END_STREAM != 0,
                end_headers: flags & FLAG_END_HEADERS != 0,
                priority,
                block,
            }
        }
        TYPE_PRIORITY => {
            if stream == 0 {
                return Err(protocol("PRIORITY", "on stream 0"));
            }
            if len != 5 {
                return Err(size("PRIORITY", len, "must be 5 bytes"));
            }
            Frame::Priority {
                stream,
                priority: parse_priority(p),
            }
        }
        TYPE_RST_STREAM => {
            if stream == 0 {
                return Err(protocol("RST_STREAM", "on stream 0"));
            }
            if len != 4 {
                return Err(size("RST_STREAM", len, "must be 4 bytes"));
            }
            Frame::RstStream { stream, code: be32(p) }
        }
        TYPE_SETTINGS => {
            if stream != 0 {
                return Err(protocol("SETTINGS", "on a stream other than 0"));
            }
            let ack = flags & FLAG_ACK != 0;
            if ack && len != 0 {
                return Err(size("SETTINGS", len, "an acknowledgement must be empty"));
            }
            if !len.is_multiple_of(6) {
                return Err(size("SETTINGS", len, "not a multiple of 6 bytes"));
            }
            Frame::Settings { ack, params: p }
        }
        TYPE_PUSH_PROMISE => {
            if stream == 0 {
                return Err(protocol("PUSH_PROMISE", "on stream 0"));
            }
            let rest = unpad("PUSH_PROMISE", flags, p)?;
            if rest.len() < 4 {
                return Err(size("PUSH_PROMISE", len, "no promised stream id"));
            }
            Frame::PushPromise {
                stream,
                end_headers: flags & FLAG_END_HEADERS != 0,
                promised: be32(rest) & MAX_WINDOW,
                block: &rest[4..],
            }
        }
        TYPE_PING => {
            if stream != 0 {
                return Err(protocol("PING", "on a stream other than 0"));
            }
            if len != 8 {
                return Err(size("PING", len, "must be 8 bytes"));
            }
            let mut data = [0; 8];
            data.copy_from_slice(p);
            Frame::Ping {
                ack: flags & FLAG_ACK != 0,
                data,
            }
        }
        TYPE_GOAWAY => {
            if stream != 0 {
                return Err(protocol("GOAWAY", "on a stream other than 0"));
            }
            if len < 8 {
                return Err(size("GOAWAY", len, "shorter than 8 bytes"));
            }
            Frame::GoAway {
                last_stream: be32(p) & MAX_WINDOW,
                code: be32(&p[4..]),
                debug: &p[8..],
            }
        }
        TYPE_WINDOW_UPDATE => {
            if len != 4 {
                return Err(size("WINDOW_UPDATE", len, "must be 4 bytes"));
            }
            Frame::WindowUpdate {
                stream,
                increment: be32(p) & MAX_WINDOW,
            }
        }
        TYPE_CONTINUATION => {
            if stream == 0 {
                return Err(protocol("CONTINUATION", "on stream 0"));
            }
            Frame::Continuation {
                stream,
                end_headers: flags & FLAG_END_HEADERS != 0,
                block: p,
            }
        }
        _ => Frame::Unknown { kind, stream },
    };
    Ok(Parsed::Frame(frame, total))
}

fn parse_priority(p: &[u8]) -> Priority {
    let dep = be32(p);
    Priority {
        exclusive: dep & 0x8000_0000 != 0,
        depends_on: dep & MAX_WINDOW,
        weight: p[4],
    }
}

/// The RFC's name of a frame type, for messages.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        TYPE_DATA => "DATA",
        TYPE_HEADERS => "HEADERS",
        TYPE_PRIORITY => "PRIORITY",
        TYPE_RST_STREAM => "RST_STREAM",
        TYPE_SETTINGS => "SETTINGS",
        TYPE_PUSH_PROMISE => "PUSH_PROMISE",
        TYPE_PING => "PING",
        TYPE_GOAWAY => "GOAWAY",
        TYPE_WINDOW_UPDATE => "WINDOW_UPDATE",
        TYPE_CONTINUATION => "CONTINUATION",
        _ => "unknown",
    }
}

/// Writes a frame header. `len` must be below 2^24 (every caller passes a
/// length bounded by a max frame size, itself at most 2^24 - 1).
pub fn encode_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_MAX_FRAME_SIZE as usize);
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// Writes a header block as one HEADERS frame and as many CONTINUATION
/// frames as `max_frame_size` (the peer's) requires.
pub fn encode_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame_size: u32) {
    let max = max_frame_size.max(DEFAULT_MAX_FRAME_SIZE) as usize;
    let mut chunks = block.chunks(max);
    let first = chunks.next().unwrap_or(&[]);
    let single = block.len() <= max;
    let mut flags = if end_stream { FLAG_END_STREAM } else { 0 };
    if single {
        flags |= FLAG_END_HEADERS;
    }
    encode_header(out, first.len(), TYPE_HEADERS, flags, stream);
    out.extend_from_slice(first);
    let mut rest = chunks.peekable();
    while let Some(chunk) = rest.next() {
        let flags = if rest.peek().is_none() { FLAG_END_HEADERS } else { 0 };
        encode_header(out, chunk.len(), TYPE_CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// Writes one DATA frame; `data` must fit the peer's max frame size.
pub fn encode_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    encode_header(
        out,
        data.len(),
        TYPE_DATA,
        if end_stream { FLAG_END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(data);
}

pub fn encode_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    encode_header(out, params.len() * 6, TYPE_SETTINGS, 0, 0);
    for (id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn encode_settings_ack(out: &mut Vec<u8>) {
    encode_header(out, 0, TYPE_SETTINGS, FLAG_ACK, 0);
}

pub fn encode_ping(out: &mut Vec<u8>, data: [u8; 8], ack: bool) {
    encode_header(out, 8, TYPE_PING, if ack { FLAG_ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

pub fn encode_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    encode_header(out, 4, TYPE_RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn encode_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    encode_header(out, 4, TYPE_WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

/// Writes GOAWAY; the debug data is cut to 256 bytes.
pub fn encode_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32, debug: &[u8]) {
    let debug = &debug[..debug.len().min(256)];
    encode_header(out, 8 + debug.len(), TYPE_GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

fn encode_priority_fields(out: &mut Vec<u8>, p: Priority) {
    let dep = (p.depends_on & MAX_WINDOW) | if p.exclusive { 0x8000_0000 } else { 0 };
    out.extend_from_slice(&dep.to_be_bytes());
    out.push(p.weight);
}

impl Frame<'_> {
    /// Writes this frame, unpadded. Payload lengths must fit the receiver's
    /// max frame size (the caller split them); `Unknown` writes an empty
    /// frame of its type.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Frame::Data {
                stream,
                end_stream,
                data,
                ..
            } => encode_data(out, stream, data, end_stream),
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                priority,
                block,
            } => {
                let mut flags = 0;
                if end_stream {
                    flags |= FLAG_END_STREAM;
                }
                if end_headers {
                    flags |= FLAG_END_HEADERS;
                }
                let extra = if priority.is_some() { 5 } else { 0 };
                if priority.is_some() {
                    flags |= FLAG_PRIORITY;
                }
                encode_header(out, block.len() + extra, TYPE_HEADERS, flags, stream);
                if let Some(p) = priority {
                    encode_priority_fields(out, p);
                }
                out.extend_from_slice(block);
            }
            Frame::Priority { stream, priority } => {
                encode_header(out, 5, TYPE_PRIORITY, 0, stream);
                encode_priority_fields(out, priority);
            }
            Frame::RstStream { stream, code } => encode_rst_stream(out, stream, code),
            Frame::Settings { ack, params } => {
                encode_header(out, params.len(), TYPE_SETTINGS, if ack { FLAG_ACK } else { 0 }, 0);
                out.extend_from_slice(params);
            }
            Frame::PushPromise {
                stream,
                end_headers,
                promised,
                block,
            } => {
                let flags = if end_headers { FLAG_END_HEADERS } else { 0 };
                encode_header(out, 4 + block.len(), TYPE_PUSH_PROMISE, flags, stream);
                out.extend_from_slice(&(promised & MAX_WINDOW).to_be_bytes());
                out.extend_from_slice(block);
            }
            Frame::Ping { ack, data } => encode_ping(out, data, ack),
            Frame::GoAway {
                last_stream,
                code,
                debug,
            } => {
                encode_header(out, 8 + debug.len(), TYPE_GOAWAY, 0, 0);
                out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
                out.extend_from_slice(&code.to_be_bytes());
                out.extend_from_slice(debug);
            }
            Frame::WindowUpdate { stream, increment } => encode_window_update(out, stream, increment),
            Frame::Continuation {
                stream,
                end_headers,
                block,
            } => {
                let flags = if end_headers { FLAG_END_HEADERS } else { 0 };
                encode_header(out, block.len(), TYPE_CONTINUATION, flags, stream);
                out.extend_from_slice(block);
            }
            Frame::Unknown { kind, stream } => encode_header(out, 0, kind, 0, stream),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(buf: &[u8]) -> (Frame<'_>, usize) {
        match parse(buf, DEFAULT_MAX_FRAME_SIZE).unwrap() {
            Parsed::Frame(f, n) => (f, n),
            Parsed::Incomplete { needed } => panic!("incomplete, needs {needed}"),
        }
    }

    #[test]
    fn every_type_round_trips() {
        let prio = Priority {
            exclusive: true,
            depends_on: 3,
            weight: 200,
        };
        let frames = [
            Frame::Data {
                stream: 1,
                end_stream: true,
                data: b"hello",
                flow_len: 5,
            },
            Frame::Headers {
                stream: 3,
                end_stream: false,
                end_headers: true,
                priority: None,
                block: b"\x82\x84",
            },
            Frame::Headers {
                stream: 5,
                end_stream: true,
                end_headers: false,
                priority: Some(prio),
                block: b"\x82",
            },
            Frame::Priority {
                stream: 7,
                priority: prio,
            },
            Frame::RstStream { stream: 9, code: 8 },
            Frame::Settings {
                ack: false,
                params: &[0, 3, 0, 0, 0, 100, 0, 4, 0, 1, 0, 0],
            },
            Frame::Settings { ack: true, params: &[] },
            Frame::PushPromise {
                stream: 1,
                end_headers: true,
                promised: 2,
                block: b"\x82",
            },
            Frame::Ping {
                ack: true,
                data: *b"12345678",
            },
            Frame::GoAway {
                last_stream: 11,
                code: 2,
                debug: b"bye",
            },
            Frame::WindowUpdate {
                stream: 0,
                increment: MAX_WINDOW,
            },
            Frame::Continuation {
                stream: 3,
                end_headers: true,
                block: b"\x86",
            },
            Frame::Unknown { kind: 0xfa, stream: 0 },
        ];
        let mut out = Vec::new();
        for f in &frames {
            f.encode(&mut out);
        }
        let mut at = 0;
        for f in &frames {
            let (g, n) = one(&out[at..]);
            assert_eq!(&g, f);
            at += n;
        }
        assert_eq!(at, out.len());
        let settings: Vec<_> = settings_iter(&[0, 3, 0, 0, 0, 100, 0, 4, 0, 1, 0, 0]).collect();
        assert_eq!(settings, [(3, 100), (4, 65536)]);
    }

    #[test]
    fn incomplete_frames_say_what_they_need() {
        let mut out = Vec::new();
        encode_data(&mut out, 1, &[7; 100], false);
        assert_eq!(
            parse(&out[..4], DEFAULT_MAX_FRAME_SIZE),
            Ok(Parsed::Incomplete { needed: 9 })
        );
        for cut in 9..out.len() {
            assert_eq!(
                parse(&out[..cut], DEFAULT_MAX_FRAME_SIZE),
                Ok(Parsed::Incomplete { needed: 109 })
            );
        }
        assert!(matches!(parse(&out, DEFAULT_MAX_FRAME_SIZE), Ok(Parsed::Frame(_, 109))));
    }

    #[test]
    fn padding_is_stripped_and_counted_for_flow_control() {
        // DATA, PADDED|END_STREAM, stream 1: pad length 3, "hi", 3 zero bytes.
        let buf = [0, 0, 6, 0, 0x9, 0, 0, 0, 1, 3, b'h', b'i', 0, 0, 0];
        let (f, n) = one(&buf);
        assert_eq!(n, 15);
        assert_eq!(
            f,
            Frame::Data {
                stream: 1,
                end_stream: true,
                data: b"hi",
                flow_len: 6
            }
        );
        // HEADERS, PADDED|PRIORITY|END_HEADERS: pad 1, priority, block 0x82, pad.
        let buf = [0, 0, 8, 1, 0x2c, 0, 0, 0, 3, 1, 0, 0, 0, 1, 15, 0x82, 0];
        let (f, _) = one(&buf);
        let want = Priority {
            exclusive: false,
            depends_on: 1,
            weight: 15,
        };
        assert_eq!(
            f,
            Frame::Headers {
                stream: 3,
                end_stream: false,
                end_headers: true,
                priority: Some(want),
                block: b"\x82"
            }
        );
        // Padding longer than the payload.
        let bad = [0, 0, 2, 0, 0x8, 0, 0, 0, 1, 5, 0];
        assert_eq!(
            parse(&bad, DEFAULT_MAX_FRAME_SIZE).unwrap_err().code(),
            crate::ErrorCode::PROTOCOL_ERROR
        );
        // PADDED with an empty payload.
        let bad = [0, 0, 0, 0, 0x8, 0, 0, 0, 1];
        assert_eq!(
            parse(&bad, DEFAULT_MAX_FRAME_SIZE).unwrap_err().code(),
            crate::ErrorCode::FRAME_SIZE_ERROR
        );
    }

    #[test]
    fn size_limits_and_fixed_sizes_are_enforced() {
        // A huge length is refused from the header alone, before waiting for it.
        let huge = [0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1];
        assert_eq!(
            parse(&huge, DEFAULT_MAX_FRAME_SIZE).unwrap_err().code(),
            crate::ErrorCode::FRAME_SIZE_ERROR
        );
        assert_eq!(
            parse(&huge, MAX_MAX_FRAME_SIZE),
            Ok(Parsed::Incomplete {
                needed: 9 + MAX_MAX_FRAME_SIZE as usize
            })
        );
        let cases: [&[u8]; 6] = [
            &[0, 0, 7, TYPE_PING, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7],
            &[0, 0, 3, TYPE_RST_STREAM, 0, 0, 0, 0, 1, 0, 0, 0],
            &[0, 0, 5, TYPE_WINDOW_UPDATE, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0],
            &[0, 0, 5, TYPE_SETTINGS, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
            &[0, 0, 6, TYPE_SETTINGS, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
            &[0, 0, 4, TYPE_GOAWAY, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ];
        for c in cases {
            assert_eq!(
                parse(c, DEFAULT_MAX_FRAME_SIZE).unwrap_err().code(),
                crate::ErrorCode::FRAME_SIZE_ERROR,
                "{c:?}"
            );
        }
        // Stream-0 rules.
        let on_zero = [0, 0, 0, TYPE_DATA, 0, 0, 0, 0, 0];
        assert_eq!(
            parse(&on_zero, DEFAULT_MAX_FRAME_SIZE).unwrap_err().code(),
            crate::ErrorCode::PROTOCOL_ERROR
        );
        let ping_on_stream = [0, 0, 8, TYPE_PING, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            parse(&ping_on_stream, DEFAULT_MAX_FRAME_SIZE).unwrap_err().code(),
            crate::ErrorCode::PROTOCOL_ERROR
        );
    }

    #[test]
    fn large_header_blocks_split_into_continuations() {
        let block: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        encode_headers(&mut out, 1, &block, true, DEFAULT_MAX_FRAME_SIZE);
        let mut at = 0;
        let mut got = Vec::new();
        let mut kinds = Vec::new();
        loop {
            let (f, n) = one(&out[at..]);
            at += n;
            match f {
                Frame::Headers {
                    end_headers,
                    block,
                    end_stream,
                    ..
                } => {
                    assert!(end_stream);
                    kinds.push(("H", end_headers));
                    got.extend_from_slice(block);
                }
                Frame::Continuation { end_headers, block, .. } => {
                    kinds.push(("C", end_headers));
                    got.extend_from_slice(block);
                }
                other => panic!("{other:?}"),
            }
            if at == out.len() {
                break;
            }
        }
        assert_eq!(kinds, [("H", false), ("C", false), ("C", true)]);
        assert_eq!(got, block);
    }

    #[test]
    fn random_bytes_never_panic() {
        // A fixed-seed xorshift: the same inputs every run.
        let mut s = 0x2545_f491_4f6c_dd1d_u64;
        let mut buf = vec![0u8; 64];
        for _ in 0..20_000 {
            for b in buf.iter_mut() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *b = s as u8;
            }
            // Small lengths so that whole frames occur.
            buf[0] = 0;
            buf[1] = 0;
            buf[2] %= 56;
            buf[3] %= 12;
            let _ = parse(&buf, DEFAULT_MAX_FRAME_SIZE);
        }
    }
}
