//! WebSocket framing (RFC 6455), I/O-free: the upgrade request and the
//! check of its answer, client frames out (masked), server frames in
//! (reassembled into messages, control frames between fragments).
//!
//! ```text
//!  bytes read ──► Reader::push ──► Reader::next ──► Event (message, ping, pong, close)
//!  Event to send ──► encode (masked, 7/16/64-bit length) ──► bytes to write
//! ```
//!
//! Written here rather than taken from tungstenite or fastwebsockets: both
//! own the stream they run on, while a storm drives its transport by hand
//! (deadlines, TLS shed while holding, the scratch buffer shared by a
//! worker's connections); what a storm needs is small enough to test
//! whole (see the tests below).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The most bytes of one message (all its fragments) kept; a longer one is
/// a protocol error, so a hostile server cannot make the generator grow.
pub(crate) const MAX_MESSAGE: usize = 4 << 20;

/// The most bytes of an upgrade answer's head.
pub(crate) const MAX_HEAD: usize = 16 * 1024;

/// Opcodes.
pub(crate) const CONT: u8 = 0x0;
pub(crate) const TEXT: u8 = 0x1;
pub(crate) const BINARY: u8 = 0x2;
pub(crate) const CLOSE: u8 = 0x8;
pub(crate) const PING: u8 = 0x9;
pub(crate) const PONG: u8 = 0xA;

/// RFC 6455's close code for "no status code was present".
pub(crate) const NO_STATUS: u16 = 1005;

/// The server broke the framing rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameError(pub &'static str);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebSocket framing: {}", self.0)
    }
}

/// Carried in an `io::Error` by a WebSocket byte stream
/// (`crate::transport::ws`), classified `ws.protocol`.
impl std::error::Error for FrameError {}

/// What the server sent, once whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A text or binary message, fragments joined.
    Message { binary: bool, data: Vec<u8> },
    /// A ping with its payload (to be echoed in a pong).
    Ping(Vec<u8>),
    /// A pong with its payload.
    Pong(Vec<u8>),
    /// A close frame: its code ([`NO_STATUS`] when it has none).
    Close(u16),
}

/// Appends one client frame (masked with `mask`) to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) {
    out.push(if fin { 0x80 } else { 0 } | (opcode & 0x0F));
    let len = payload.len();
    if len < 126 {
        // Fits in 7 bits.
        out.push(0x80 | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(0x80 | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
}

/// A close frame's payload: the code, big-endian.
pub(crate) fn close_payload(code: u16) -> [u8; 2] {
    code.to_be_bytes()
}

/// One frame's header, parsed.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    fin: bool,
    opcode: u8,
    masked: bool,
    len: u64,
    size: usize,
}

/// Parses a frame header off `buf`: None when more bytes are needed.
fn header(buf: &[u8]) -> Result<Option<Header>, FrameError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        return Err(FrameError("reserved bits set without an extension"));
    }
    let opcode = b0 & 0x0F;
    let fin = b0 & 0x80 != 0;
    if !matches!(opcode, CONT | TEXT | BINARY | CLOSE | PING | PONG) {
        return Err(FrameError("unknown opcode"));
    }
    let masked = b1 & 0x80 != 0;
    let (len, mut size) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(b) => {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                let len = u64::from_be_bytes(a);
                if len >> 63 != 0 {
                    return Err(FrameError("64-bit length with its top bit set"));
                }
                (len, 10)
            }
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    if masked {
        size += 4;
    }
    if opcode >= CLOSE && (!fin || len > 125) {
        return Err(FrameError("fragmented or overlong control frame"));
    }
    Ok(Some(Header {
        fin,
        opcode,
        masked,
        len,
        size,
    }))
}

/// Server frames in, events out.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    buf: Vec<u8>,
    /// A fragmented message under way: (binary, bytes so far).
    partial: Option<(bool, Vec<u8>)>,
    /// Data frames are dropped as they stream in, never kept whole (a held
    /// socket reads what the server pushes only to keep it flowing).
    discard: bool,
    /// Bytes of a dropped data frame still to come.
    skip: u64,
}

impl Reader {
    /// A reader that drops data messages: only control frames come out,
    /// and memory stays bounded by the read buffer whatever their size.
    pub(crate) fn discarding() -> Reader {
        Reader {
            discard: true,
            ..Reader::default()
        }
    }

    /// Adds bytes read from the server.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// True when no frame is partly read, no message partly joined and
    /// nothing is being skipped (the reader can be dropped, and a new one
    /// start at the next frame).
    pub(crate) fn idle(&self) -> bool {
        self.buf.is_empty() && self.partial.is_none() && self.skip == 0
    }

    /// The next whole event, None when more bytes are needed.
    pub(crate) fn next(&mut self) -> Result<Option<Event>, FrameError> {
        loop {
            if self.skip > 0 {
                // Bounded by the buffer's length.
                let n = self.skip.min(self.buf.len() as u64) as usize;
                self.buf.drain(..n);
                self.skip -= n as u64;
                if self.skip > 0 {
                    return Ok(None);
                }
            }
            let Some(h) = header(&self.buf)? else {
                return Ok(None);
            };
            if h.masked {
                return Err(FrameError("a masked frame from the server"));
            }
            if self.discard && h.opcode < CLOSE {
                // The header is whole (header() said so) and unmasked.
                self.buf.drain(..h.size);
                self.skip = h.len;
                continue;
            }
            let so_far = self.partial.as_ref().map_or(0, |(_, d)| d.len());
            if h.len > (MAX_MESSAGE - so_far) as u64 {
                return Err(FrameError("message longer than the limit"));
            }
            // Bounded by MAX_MESSAGE just above.
            let end = h.size + h.len as usize;
            if self.buf.len() < end {
                return Ok(None);
            }
            let payload: Vec<u8> = self.buf[h.size..end].to_vec();
            self.buf.drain(..end);
            let event = match h.opcode {
                PING => Event::Ping(payload),
                PONG => Event::Pong(payload),
                CLOSE => match payload.as_slice() {
                    [] => Event::Close(NO_STATUS),
                    [_] => return Err(FrameError("a close frame of one byte")),
                    [a, b, ..] => Event::Close(u16::from_be_bytes([*a, *b])),
                },
                CONT => {
                    let Some((binary, mut data)) = self.partial.take() else {
                        return Err(FrameError("a continuation frame without a message"));
                    };
                    data.extend_from_slice(&payload);
                    if !h.fin {
                        self.partial = Some((binary, data));
                        continue;
                    }
                    Event::Message { binary, data }
                }
                op => {
                    if self.partial.is_some() {
                        return Err(FrameError("a new message before the last one ended"));
                    }
                    let binary = op == BINARY;
                    if !h.fin {
                        self.partial = Some((binary, payload));
                        continue;
                    }
                    Event::Message { binary, data: payload }
                }
            };
            return Ok(Some(event));
        }
    }
}

/// The GUID RFC 6455 appends to the key.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Key` for 16 random bytes.
pub(crate) fn key(nonce: [u8; 16]) -> String {
    STANDARD.encode(nonce)
}

/// The `Sec-WebSocket-Accept` a server must answer `key` with.
pub(crate) fn accept_for(key: &str) -> String {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(GUID.as_bytes());
    STANDARD.encode(ctx.finish().as_ref())
}

/// The upgrade request; `protocol` asks for a subprotocol
/// (`Sec-WebSocket-Protocol`, e.g. `mqtt`).
pub(crate) fn upgrade_request(
    path: &str,
    host: &str,
    authorization: Option<&str>,
    key: &str,
    protocol: Option<&str>,
) -> Vec<u8> {
    let authorization = match authorization {
        Some(value) => format!("Authorization: {value}\r\n"),
        None => String::new(),
    };
    let protocol = match protocol {
        Some(name) => format!("Sec-WebSocket-Protocol: {name}\r\n"),
        None => String::new(),
    };
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{protocol}{authorization}User-Agent: throng\r\n\r\n"
    )
    .into_bytes()
}

/// How an upgrade's answer went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Upgrade {
    /// More bytes needed.
    Partial,
    /// 101 with the right headers; the head was this many bytes.
    Accepted(usize),
    /// Another status.
    Refused(u16),
    /// Not an HTTP answer, or a 101 without the right headers.
    Malformed,
    /// A 101 that did not choose the subprotocol asked for (another, or
    /// none).
    WrongProtocol,
}

/// Checks the answer to an upgrade sent with `key`, asking for the
/// subprotocol `protocol` when there is one.
pub(crate) fn check_upgrade(buf: &[u8], key: &str, protocol: Option<&str>) -> Upgrade {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let size = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Upgrade::Partial,
        _ => return Upgrade::Malformed,
    };
    let Some(status) = r.code else {
        return Upgrade::Malformed;
    };
    if status != 101 {
        return Upgrade::Refused(status);
    }
    let header = |name: &str| {
        r.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    let upgrade = header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let connection =
        header("connection").is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade")));
    let accept = header("sec-websocket-accept").is_some_and(|v| v == accept_for(key));
    if !(upgrade && connection && accept) {
        return Upgrade::Malformed;
    }
    match protocol {
        Some(asked) if header("sec-websocket-protocol").is_none_or(|chosen| chosen != asked) => Upgrade::WrongProtocol,
        _ => Upgrade::Accepted(size),
    }
}

/// Masks for client frames: a xorshift seeded once per connection (RFC
/// 6455 asks masks to be unpredictable to the page's script, which a load
/// generator has none of; they only need to vary).
#[derive(Debug)]
pub(crate) struct Masks(u64);

impl Masks {
    pub(crate) fn new(seed: u64) -> Masks {
        Masks(seed | 1)
    }

    pub(crate) fn next(&mut self) -> [u8; 4] {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        let [a, b, c, d, ..] = x.to_le_bytes();
        [a, b, c, d]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A server frame (unmasked), as a server would write it.
    fn server(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        let len = payload.len();
        if len < 126 {
            out.push(len as u8);
        } else if len <= 0xFFFF {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        out.extend_from_slice(payload);
        out
    }

    /// Decodes a client frame: (fin, opcode, unmasked payload).
    fn unmask(frame: &[u8]) -> (bool, u8, Vec<u8>) {
        let h = header(frame).unwrap().unwrap();
        assert!(h.masked, "client frames are masked");
        let mask = &frame[h.size - 4..h.size];
        let body = &frame[h.size..];
        assert_eq!(body.len() as u64, h.len);
        (
            h.fin,
            h.opcode,
            body.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]).collect(),
        )
    }

    #[test]
    fn the_rfc_example_accept() {
        // RFC 6455, section 1.3.
        assert_eq!(accept_for("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn lengths_take_7_16_and_64_bits() {
        for (len, size) in [(0, 6), (125, 6), (126, 8), (65_535, 8), (65_536, 14), (70_000, 14)] {
            let mut out = Vec::new();
            encode(&mut out, true, BINARY, &vec![7u8; len], [1, 2, 3, 4]);
            assert_eq!(out.len(), size + len, "length {len}");
            let (fin, op, payload) = unmask(&out);
            assert!(fin);
            assert_eq!(op, BINARY);
            assert_eq!(payload, vec![7u8; len]);
        }
    }

    #[test]
    fn masking_is_applied() {
        let mut out = Vec::new();
        encode(&mut out, true, TEXT, b"Hello", [0x37, 0xfa, 0x21, 0x3d]);
        // RFC 6455, section 5.7: a masked "Hello".
        assert_eq!(out, [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]);
    }

    #[test]
    fn fragments_join_with_control_frames_between() {
        let mut r = Reader::default();
        r.push(&server(false, TEXT, b"Hel"));
        r.push(&server(true, PING, b"p"));
        r.push(&server(false, CONT, b"l"));
        r.push(&server(true, CONT, b"o"));
        assert_eq!(r.next(), Ok(Some(Event::Ping(b"p".to_vec()))));
        assert_eq!(
            r.next(),
            Ok(Some(Event::Message {
                binary: false,
                data: b"Hello".to_vec()
            }))
        );
        assert_eq!(r.next(), Ok(None));
    }

    #[test]
    fn a_discarding_reader_keeps_no_data_and_passes_control_frames() {
        let mut r = Reader::discarding();
        let big = vec![1u8; 3 * MAX_MESSAGE];
        let mut wire = server(true, BINARY, &big);
        wire.extend(server(true, PING, b"x"));
        wire.extend(server(false, TEXT, b"ab"));
        wire.extend(server(true, CONT, b"cd"));
        wire.extend(server(true, CLOSE, &[0x03, 0xE9]));
        let mut got = Vec::new();
        for c in wire.chunks(16 * 1024) {
            r.push(c);
            while let Some(e) = r.next().unwrap() {
                got.push(e);
            }
            assert!(r.buf.len() <= 16 * 1024 + 14, "kept {} bytes", r.buf.len());
        }
        assert_eq!(got, [Event::Ping(b"x".to_vec()), Event::Close(1001)]);
    }

    #[test]
    fn close_codes() {
        let mut r = Reader::default();
        r.push(&server(true, CLOSE, &[0x03, 0xF0, b'x']));
        r.push(&server(true, CLOSE, &[]));
        r.push(&server(true, CLOSE, &[1]));
        assert_eq!(r.next(), Ok(Some(Event::Close(1008))));
        assert_eq!(r.next(), Ok(Some(Event::Close(NO_STATUS))));
        assert!(r.next().is_err());
    }

    #[test]
    fn broken_frames_are_errors() {
        for bad in [
            vec![0x81 | 0x40, 0],                       // RSV1
            vec![0x83, 0],                              // opcode 3
            vec![0x09, 0],                              // a fragmented ping
            vec![0x89, 126, 0, 126],                    // an overlong ping
            vec![0x81, 0x80, 0, 0, 0, 0],               // masked by the server
            vec![0x80, 0],                              // continuation with nothing begun
            vec![0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0], // top bit of a 64-bit length
            vec![0x82, 127, 0, 0, 0, 1, 0, 0, 0, 0],    // past MAX_MESSAGE
        ] {
            let mut r = Reader::default();
            r.push(&bad);
            assert!(r.next().is_err(), "{bad:?}");
        }
        let mut r = Reader::default();
        r.push(&server(false, TEXT, b"a"));
        r.push(&server(true, TEXT, b"b"));
        assert!(r.next().is_err(), "a new message inside a fragmented one");
    }

    #[test]
    fn upgrade_answers() {
        let key = key([9; 16]);
        let good = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n\r\n\x01\x00",
            accept_for(&key)
        );
        let head = good.len() - 2;
        assert_eq!(check_upgrade(good.as_bytes(), &key, None), Upgrade::Accepted(head));
        assert_eq!(check_upgrade(&good.as_bytes()[..20], &key, None), Upgrade::Partial);
        let wrong = good.replace(&accept_for(&key), "AAAA");
        assert_eq!(check_upgrade(wrong.as_bytes(), &key, None), Upgrade::Malformed);
        assert_eq!(
            check_upgrade(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", &key, None),
            Upgrade::Refused(403)
        );
        assert_eq!(
            check_upgrade(b"SSH-2.0-OpenSSH\r\n\r\n", &key, None),
            Upgrade::Malformed
        );
        // A subprotocol asked for: the 101 must name it, and only it.
        assert_eq!(
            check_upgrade(good.as_bytes(), &key, Some("mqtt")),
            Upgrade::WrongProtocol
        );
        let chosen = good.replace("\r\n\r\n", "\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n");
        assert_eq!(
            check_upgrade(chosen.as_bytes(), &key, Some("mqtt")),
            Upgrade::Accepted(chosen.len() - 2)
        );
        let other = chosen.replace(": mqtt", ": mqttv3.1");
        assert_eq!(
            check_upgrade(other.as_bytes(), &key, Some("mqtt")),
            Upgrade::WrongProtocol
        );
        let endless = format!("HTTP/1.1 101 OK\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(check_upgrade(endless.as_bytes(), &key, None), Upgrade::Malformed);
    }

    #[test]
    fn an_upgrade_carries_authorization_only_when_given() {
        let bare = String::from_utf8(upgrade_request("/chat?x=1", "127.0.0.1:9000", None, "k", None)).unwrap();
        assert_eq!(
            bare,
            "GET /chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\nUser-Agent: throng\r\n\r\n"
        );
        assert!(!bare.to_ascii_lowercase().contains("authorization"));
        let with = String::from_utf8(upgrade_request("/", "h", Some("Basic dTpw"), "k", Some("mqtt"))).unwrap();
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(with.as_bytes()).unwrap().is_complete());
        let auth: Vec<&[u8]> = req
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("authorization"))
            .map(|h| h.value)
            .collect();
        assert_eq!(auth, [b"Basic dTpw".as_slice()]);
        assert!(with.contains("\r\nSec-WebSocket-Protocol: mqtt\r\n"));
        assert!(!bare.contains("Sec-WebSocket-Protocol"));
    }

    proptest! {
        /// Any messages, framed by a server in fragments of any size and
        /// read in chunks of any size, come out whole and in order.
        #[test]
        fn messages_survive_any_fragmenting_and_chunking(
            messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
            frag in 1usize..200,
            chunk in 1usize..97,
        ) {
            let mut wire = Vec::new();
            for m in &messages {
                let pieces: Vec<&[u8]> = if m.is_empty() { vec![&m[..]] } else { m.chunks(frag).collect() };
                for (i, p) in pieces.iter().enumerate() {
                    let op = if i == 0 { BINARY } else { CONT };
                    wire.extend(server(i + 1 == pieces.len(), op, p));
                }
            }
            let mut r = Reader::default();
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                r.push(c);
                while let Some(e) = r.next().unwrap() {
                    got.push(e);
                }
            }
            let want: Vec<Event> = messages.into_iter().map(|data| Event::Message { binary: true, data }).collect();
            prop_assert_eq!(got, want);
        }

        /// A client frame unmasks to what was encoded, whatever the mask.
        #[test]
        fn encode_round_trips(payload in proptest::collection::vec(any::<u8>(), 0..70_000), mask in any::<[u8; 4]>(), fin in any::<bool>()) {
            let mut out = Vec::new();
            encode(&mut out, fin, TEXT, &payload, mask);
            let (f, op, p) = unmask(&out);
            prop_assert_eq!((f, op), (fin, TEXT));
            prop_assert_eq!(p, payload);
        }
    }
}
