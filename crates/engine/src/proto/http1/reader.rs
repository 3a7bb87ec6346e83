//! An incremental HTTP/1.1 response reader: feed it bytes as they arrive, it
//! says when the response is complete. Heads are parsed with `httparse`;
//! bodies are framed by Content-Length, chunked encoding, or the end of the
//! connection. Bodies are counted, not kept, unless asked for.

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Most headers accepted in one response.
const MAX_HEADERS: usize = 64;

/// What a reader keeps of the next response besides its status and sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// The `Server` header.
    pub server: bool,
    /// Every header, as (name, value).
    pub headers: bool,
    /// The body's first this many bytes (0: none); the rest is counted,
    /// not kept, and [`ResponseReader::body_truncated`] says so.
    pub body: usize,
}

/// Why a response could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not HTTP/1.x, or malformed framing.
    Malformed,
    /// The connection ended before the response was complete.
    Eof,
}

/// What a chunk of bytes did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// The response is not complete yet.
    More,
    /// The response is complete; `extra` bytes after it were not used.
    Done {
        /// Bytes after the end of the response.
        extra: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    Size { value: u64, digits: u8 },
    Ext { value: u64 },
    SizeLf { value: u64 },
    Data { remaining: u64 },
    DataCr,
    DataLf,
    TrailerLineStart,
    TrailerLine,
    EndLf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length { remaining: u64 },
    Chunked(Chunk),
    UntilEof,
    Done,
}

/// Rarely needed parts of a reader, allocated on first use so that an idle
/// connection's reader stays small.
#[derive(Debug, Default)]
struct Extras {
    /// A head split across reads is collected here.
    partial: Vec<u8>,
    server: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// With [`ResponseReader::tap`]: body bytes decoded since the last
    /// [`ResponseReader::drain_tapped`].
    tapped: Vec<u8>,
}

/// Reads one response at a time; [`ResponseReader::reset`] before the next.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    head_request: bool,
    keep: Keep,
    /// The connection must close after this response.
    pub close: bool,
    /// HTTP status of the response.
    pub status: u16,
    /// Bytes of the head.
    pub header_bytes: u64,
    /// Bytes of body after transfer decoding.
    pub body_bytes: u64,
    /// Bytes read off the wire for this response.
    pub wire_bytes: u64,
    /// The body was longer than [`Keep::body`]: what was kept is its start.
    pub body_truncated: bool,
    /// Body bytes are handed out (an event stream's reader reads them).
    tap: bool,
    extras: Option<Box<Extras>>,
}

impl ResponseReader {
    /// A reader for responses to `HEAD` (no body) or other methods.
    pub fn new(head_request: bool) -> Self {
        ResponseReader {
            state: State::Head,
            head_request,
            keep: Keep::default(),
            close: false,
            status: 0,
            header_bytes: 0,
            body_bytes: 0,
            wire_bytes: 0,
            body_truncated: false,
            tap: false,
            extras: None,
        }
    }

    /// Prepares for the next response, keeping what `keep` asks for.
    pub fn reset(&mut self, keep: Keep) {
        self.state = State::Head;
        self.keep = keep;
        self.status = 0;
        self.header_bytes = 0;
        self.body_bytes = 0;
        self.wire_bytes = 0;
        self.body_truncated = false;
        self.close = false;
        self.tap = false;
        if let Some(x) = &mut self.extras {
            x.tapped.clear();
            x.partial.clear();
            x.server = None;
            x.headers.clear();
            x.body.clear();
        }
    }

    /// Hands this response's body bytes (after transfer decoding) to
    /// [`ResponseReader::drain_tapped`]; until the next reset.
    pub fn tap(&mut self) {
        self.tap = true;
    }

    /// Calls `f` with the body bytes decoded since the last call (at most
    /// what the last [`ResponseReader::feed`] held), then forgets them.
    pub fn drain_tapped(&mut self, f: impl FnOnce(&[u8])) {
        if let Some(x) = &mut self.extras
            && !x.tapped.is_empty()
        {
            f(&x.tapped);
            x.tapped.clear();
        }
    }

    fn extras(&mut self) -> &mut Extras {
        self.extras.get_or_insert_with(Box::default)
    }

    /// True when this reader reads responses to `HEAD` (no body).
    pub fn head_request(&self) -> bool {
        self.head_request
    }

    /// The `Server` header of the last response, when asked for.
    pub fn take_server(&mut self) -> Option<String> {
        self.extras.as_mut().and_then(|x| x.server.take())
    }

    /// The body of the last response, when asked for.
    pub fn body(&self) -> &[u8] {
        self.extras.as_ref().map_or(&[], |x| &x.body)
    }

    /// The headers of the last response, when asked for.
    pub fn headers(&self) -> &[(String, String)] {
        self.extras.as_ref().map_or(&[], |x| &x.headers)
    }

    /// True once any byte of this response arrived.
    pub fn started(&self) -> bool {
        self.wire_bytes > 0
    }

    /// Feeds bytes just read.
    pub fn feed(&mut self, data: &[u8]) -> Result<Feed, ParseError> {
        let mut used = 0;
        while used < data.len() {
            let rest = &data[used..];
            let n = match self.state {
                State::Head => self.head(rest)?,
                State::Length { remaining } => {
                    let n = rest.len().min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    self.body_chunk(&rest[..n]);
                    let remaining = remaining - n as u64;
                    if remaining == 0 {
                        self.state = State::Done;
                    } else {
                        self.state = State::Length { remaining };
                    }
                    n
                }
                State::Chunked(c) => self.chunked(c, rest)?,
                State::UntilEof => {
                    self.body_chunk(rest);
                    rest.len()
                }
                State::Done => break,
            };
            used += n;
            self.wire_bytes += n as u64;
        }
        Ok(if self.state == State::Done {
            Feed::Done {
                extra: data.len() - used,
            }
        } else {
            Feed::More
        })
    }

    /// The connection ended. Completes a body framed by the connection's end;
    /// anything else is an early end.
    pub fn eof(&mut self) -> Result<(), ParseError> {
        match self.state {
            State::UntilEof | State::Done => {
                self.state = State::Done;
                Ok(())
            }
            _ => Err(ParseError::Eof),
        }
    }

    fn body_chunk(&mut self, bytes: &[u8]) {
        self.body_bytes += bytes.len() as u64;
        if self.tap {
            self.extras().tapped.extend_from_slice(bytes);
        }
        let limit = self.keep.body;
        if limit > 0 {
            let body = &mut self.extras().body;
            let room = limit.saturating_sub(body.len());
            body.extend_from_slice(&bytes[..bytes.len().min(room)]);
            self.body_truncated |= bytes.len() > room;
        }
    }

    /// Parses the head from `rest` (joined with any earlier partial head).
    /// Returns how many bytes of `rest` were used.
    fn head(&mut self, rest: &[u8]) -> Result<usize, ParseError> {
        let joined;
        let carried_len = self.extras.as_ref().map_or(0, |x| x.partial.len());
        let (buf, carried) = if carried_len == 0 {
            (rest, 0)
        } else {
            let x = self.extras();
            x.partial.extend_from_slice(rest);
            joined = std::mem::take(&mut x.partial);
            (&joined[..], carried_len)
        };
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                // The same limit whether the head came in one read or many.
                if len > MAX_HEAD {
                    return Err(ParseError::Malformed);
                }
                let status = resp.code.ok_or(ParseError::Malformed)?;
                let version = resp.version.unwrap_or(1);
                let mut length = None;
                let mut chunked = false;
                let mut close = version == 0;
                for h in resp.headers.iter() {
                    let name = h.name;
                    if name.eq_ignore_ascii_case("content-length") {
                        let text = std::str::from_utf8(h.value).map_err(|_| ParseError::Malformed)?;
                        let v: u64 = text.trim().parse().map_err(|_| ParseError::Malformed)?;
                        if length.is_some_and(|l| l != v) {
                            return Err(ParseError::Malformed);
                        }
                        length = Some(v);
                    } else if name.eq_ignore_ascii_case("transfer-encoding") {
                        chunked = last_token_is(h.value, b"chunked");
                    } else if name.eq_ignore_ascii_case("connection") {
                        if contains_token(h.value, b"close") {
                            close = true;
                        } else if contains_token(h.value, b"keep-alive") {
                            close = false;
                        }
                    } else if self.keep.server && name.eq_ignore_ascii_case("server") {
                        self.extras().server = Some(String::from_utf8_lossy(h.value).into_owned());
                    }
                    if self.keep.headers {
                        let value = String::from_utf8_lossy(h.value).into_owned();
                        self.extras().headers.push((name.to_string(), value));
                    }
                }
                self.header_bytes += len as u64;
                // After 101 Switching Protocols the connection speaks
                // another protocol: it can carry no further HTTP/1.1 request.
                self.close = close || status == 101;
                self.status = status;
                self.state = if (100..200).contains(&status) && status != 101 {
                    // Interim response: the real one follows.
                    State::Head
                } else if self.head_request || status == 204 || status == 304 || (100..200).contains(&status) {
                    State::Done
                } else if chunked {
                    State::Chunked(Chunk::Size { value: 0, digits: 0 })
                } else if let Some(l) = length {
                    if l == 0 {
                        State::Done
                    } else {
                        State::Length { remaining: l }
                    }
                } else {
                    self.close = true;
                    State::UntilEof
                };
                // Bytes of `rest` used: the head's end minus what was carried.
                Ok(len - carried)
            }
            Ok(httparse::Status::Partial) => {
                if buf.len() > MAX_HEAD {
                    return Err(ParseError::Malformed);
                }
                let partial = buf.to_vec();
                self.extras().partial = partial;
                Ok(rest.len())
            }
            Err(_) => Err(ParseError::Malformed),
        }
    }

    /// Runs the chunked-body state machine over `rest`; returns bytes used.
    fn chunked(&mut self, mut c: Chunk, rest: &[u8]) -> Result<usize, ParseError> {
        let mut i = 0;
        while i < rest.len() {
            let b = rest[i];
            c = match c {
                Chunk::Data { remaining } => {
                    let n = (rest.len() - i).min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    self.body_chunk(&rest[i..i + n]);
                    i += n;
                    let remaining = remaining - n as u64;
                    if remaining == 0 {
                        Chunk::DataCr
                    } else {
                        Chunk::Data { remaining }
                    }
                }
                Chunk::Size { value, digits } => {
                    i += 1;
                    match b {
                        b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                            if digits >= 15 {
                                return Err(ParseError::Malformed);
                            }
                            let d = (b as char).to_digit(16).unwrap_or(0);
                            Chunk::Size {
                                value: value * 16 + u64::from(d),
                                digits: digits + 1,
                            }
                        }
                        b';' | b' ' | b'\t' if digits > 0 => Chunk::Ext { value },
                        b'\r' if digits > 0 => Chunk::SizeLf { value },
                        b'\n' if digits > 0 => self.after_size(value),
                        _ => return Err(ParseError::Malformed),
                    }
                }
                Chunk::Ext { value } => {
                    i += 1;
                    match b {
                        b'\r' => Chunk::SizeLf { value },
                        b'\n' => self.after_size(value),
                        _ => Chunk::Ext { value },
                    }
                }
                Chunk::SizeLf { value } => {
                    i += 1;
                    if b != b'\n' {
                        return Err(ParseError::Malformed);
                    }
                    self.after_size(value)
                }
                Chunk::DataCr => {
                    i += 1;
                    match b {
                        b'\r' => Chunk::DataLf,
                        b'\n' => Chunk::Size { value: 0, digits: 0 },
                        _ => return Err(ParseError::Malformed),
                    }
                }
                Chunk::DataLf => {
                    i += 1;
                    if b != b'\n' {
                        return Err(ParseError::Malformed);
                    }
                    Chunk::Size { value: 0, digits: 0 }
                }
                Chunk::TrailerLineStart => {
                    i += 1;
                    match b {
                        b'\r' => Chunk::EndLf,
                        b'\n' => {
                            self.state = State::Done;
                            return Ok(i);
                        }
                        _ => Chunk::TrailerLine,
                    }
                }
                Chunk::TrailerLine => {
                    i += 1;
                    if b == b'\n' {
                        Chunk::TrailerLineStart
                    } else {
                        Chunk::TrailerLine
                    }
                }
                Chunk::EndLf => {
                    i += 1;
                    if b != b'\n' {
                        return Err(ParseError::Malformed);
                    }
                    self.state = State::Done;
                    return Ok(i);
                }
            };
            self.state = State::Chunked(c);
        }
        Ok(i)
    }

    fn after_size(&self, value: u64) -> Chunk {
        if value == 0 {
            Chunk::TrailerLineStart
        } else {
            Chunk::Data { remaining: value }
        }
    }
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .next_back()
        .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(parts: &[&[u8]]) -> (Result<Feed, ParseError>, ResponseReader) {
        let mut r = ResponseReader::new(false);
        r.reset(Keep {
            server: true,
            headers: true,
            body: 64,
        });
        let mut last = Ok(Feed::More);
        for p in parts {
            last = r.feed(p);
            if !matches!(last, Ok(Feed::More)) {
                break;
            }
        }
        (last, r)
    }

    #[test]
    fn content_length_body() {
        let (f, mut r) = read_all(&[b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 5\r\n\r\nhello"]);
        assert_eq!(r.headers().len(), 2);
        assert_eq!(r.headers()[0], ("Server".to_string(), "t".to_string()));
        assert_eq!(f, Ok(Feed::Done { extra: 0 }));
        assert_eq!(r.status, 200);
        assert_eq!(r.body(), b"hello");
        assert_eq!(r.header_bytes, 49);
        assert_eq!(r.wire_bytes, 54);
        assert_eq!(r.take_server().as_deref(), Some("t"));
        assert!(!r.close);
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let msg =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nT: v\r\n\r\n";
        let (f, r) = read_all(&[msg]);
        assert_eq!(f, Ok(Feed::Done { extra: 0 }));
        assert_eq!(r.body(), b"hello world");
        assert_eq!(r.wire_bytes, msg.len() as u64);
    }

    #[test]
    fn until_eof_and_http10_close() {
        let (f, mut r) = read_all(&[b"HTTP/1.0 200 OK\r\n\r\nabc"]);
        assert_eq!(f, Ok(Feed::More));
        assert!(r.close);
        assert_eq!(r.eof(), Ok(()));
        assert_eq!(r.body(), b"abc");
    }

    #[test]
    fn no_body_statuses_and_interim_responses() {
        let (f, r) = read_all(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"]);
        assert_eq!(f, Ok(Feed::Done { extra: 0 }));
        assert_eq!(r.status, 204);
        let mut head = ResponseReader::new(true);
        head.reset(Keep::default());
        assert_eq!(
            head.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"),
            Ok(Feed::Done { extra: 0 })
        );
    }

    #[test]
    fn connection_close_and_extra_bytes() {
        let (f, r) = read_all(&[b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\nXY"]);
        assert_eq!(f, Ok(Feed::Done { extra: 2 }));
        assert!(r.close);
    }

    #[test]
    fn a_body_past_the_limit_is_kept_in_part_and_said_so() {
        let read = |parts: &[&[u8]]| {
            let mut r = ResponseReader::new(false);
            r.reset(Keep {
                body: 8,
                ..Keep::default()
            });
            for p in parts {
                assert!(r.feed(p).is_ok());
            }
            r
        };
        let r = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nabcdefghijkl"]);
        assert_eq!((r.body(), r.body_bytes, r.body_truncated), (&b"abcdefgh"[..], 12, true));
        let r = read(&[b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nabcd", b"efgh"]);
        assert_eq!((r.body(), r.body_truncated), (&b"abcdefgh"[..], false));
        let r = read(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n5\r\nfghij\r\n0\r\n\r\n"]);
        assert_eq!((r.body(), r.body_bytes, r.body_truncated), (&b"abcdefgh"[..], 10, true));
    }

    #[test]
    fn switching_protocols_ends_the_connection() {
        let (f, r) =
            read_all(&[b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"]);
        assert_eq!(f, Ok(Feed::Done { extra: 0 }));
        assert_eq!(r.status, 101);
        assert!(r.close, "a 101 connection must not carry another request");
        // An interim 100 is not the end, and does not close.
        let (f, r) = read_all(&[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]);
        assert_eq!(f, Ok(Feed::Done { extra: 0 }));
        assert_eq!((r.status, r.close), (200, false));
    }

    #[test]
    fn early_end_and_garbage() {
        let (_, mut r) = read_all(&[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"]);
        assert_eq!(r.eof(), Err(ParseError::Eof));
        let (f, _) = read_all(&[b"SSH-2.0-OpenSSH\r\n\r\n"]);
        assert_eq!(f, Err(ParseError::Malformed));
        let (f, _) = read_all(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]);
        assert_eq!(f, Err(ParseError::Malformed));
        let (f, _) = read_all(&[b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"]);
        assert_eq!(f, Err(ParseError::Malformed));
    }

    proptest! {
        /// However the bytes are split across reads, the reader sees the same
        /// response.
        #[test]
        fn splits_do_not_matter(cuts in prop::collection::vec(0usize..200, 0..8), chunked in any::<bool>()) {
            let msg: &[u8] = if chunked {
                b"HTTP/1.1 200 OK\r\nServer: s\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\na;e\r\n0123456789\r\n0\r\n\r\n"
            } else {
                b"HTTP/1.1 404 Not Found\r\nServer: s\r\nContent-Length: 13\r\n\r\nabc0123456789"
            };
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (msg.len() + 1)).collect();
            points.push(0);
            points.push(msg.len());
            points.sort_unstable();
            points.dedup();
            let parts: Vec<&[u8]> = points.windows(2).map(|w| &msg[w[0]..w[1]]).collect();
            let (f, mut r) = read_all(&parts);
            prop_assert_eq!(f, Ok(Feed::Done { extra: 0 }));
            prop_assert_eq!(r.body(), b"abc0123456789");
            prop_assert_eq!(r.wire_bytes, msg.len() as u64);
            let server = r.take_server();
            prop_assert_eq!(server.as_deref(), Some("s"));
        }
    }
}
