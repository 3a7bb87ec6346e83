//! A gRPC reply judged as a gRPC client judges it, as its body arrives in
//! chunks of any size, without keeping it.
//!
//! ```text
//!  response headers ── head() ──► content-type application/grpc[+proto]?
//!                                 grpc-encoding given? gzip?
//!  DATA chunks ──────── feed() ─► 5-byte prefix (flag, length), message:
//!                                 flag 0 or 1 (1 only with grpc-encoding,
//!                                 and only gzip is inflated), at most
//!                                 MAX_MESSAGE bytes on the wire and
//!                                 inflated, the message's protobuf
//!                                 wire format walked
//!  end of stream ────── end() ──► not inside a prefix or a message
//!  status ───────────── cardinality(): a unary call's OK has one message
//! ```
//!
//! The first fault found is kept as the class it makes
//! (`grpc.<fault>`); nothing is allocated from a length the server
//! claims. What grpc-go reports for each: INTERNAL for a malformed frame,
//! a compressed flag without `grpc-encoding`, a message that does not
//! decode, and a unary call with no or a second message; UNKNOWN for an
//! answer that is not `application/grpc`.

/// A reply's fault, by the name of its class (`grpc.<name>`).
pub(crate) const CONTENT_TYPE: &str = "content_type";
/// A prefix with reserved flag bits set, or a body that ends inside a
/// prefix or a message.
pub(crate) const FRAMING: &str = "framing";
/// The compressed flag on a message of a reply without `grpc-encoding`.
pub(crate) const COMPRESSED: &str = "compressed";
/// A message that is not protobuf's wire format.
pub(crate) const DECODE: &str = "decode";
/// A unary call answered OK with no message, or with more than one.
pub(crate) const CARDINALITY: &str = "cardinality";
/// A compressed message in an encoding throng does not inflate (not gzip).
pub(crate) const ENCODING: &str = "encoding";
/// A gzip message that does not inflate (corrupt, or cut short).
pub(crate) const DECOMPRESS: &str = "decompress";
/// A message whose prefix claims more than [`MAX_MESSAGE`], or a gzip
/// message that inflates past it (a decompression bomb).
pub(crate) const TOO_LARGE: &str = "too_large";

/// The most bytes a reply message may have, as its prefix claims it and
/// once inflated: grpc-go's default largest message a client receives
/// (4 MiB), which it refuses as `RESOURCE_EXHAUSTED` from the prefix alone.
pub(crate) const MAX_MESSAGE: usize = 4 << 20;

/// Each framed message of `body` (throng's own, whole messages)
/// compressed with gzip, its flag set; None past 64 MiB.
pub(crate) fn gzip_messages(body: &[u8]) -> Option<Vec<u8>> {
    use std::io::Write as _;
    let mut out = Vec::with_capacity(body.len() / 2 + 32);
    let mut rest = body;
    while let Some(p) = rest.get(..5) {
        let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
        let message = rest.get(5..5 + len)?;
        rest = &rest[5 + len..];
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(message).ok()?;
        let packed = e.finish().ok()?;
        out.push(1);
        out.extend_from_slice(&u32::try_from(packed.len()).ok()?.to_be_bytes());
        out.extend_from_slice(&packed);
        if out.len() as u64 > throng_plan::MAX_BODY_BYTES {
            return None;
        }
    }
    Some(out)
}

/// The last whole message of a reply body kept (its flag and prefix
/// read), framed uncompressed: a gzip one inflated, at most
/// [`MAX_MESSAGE`] bytes. None when there is none, or it does not inflate
/// within the bound.
pub(crate) fn last_inflated(body: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut rest = body;
    let mut last = None;
    while let Some(p) = rest.get(..5) {
        let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
        let Some(m) = rest.get(5..5 + len) else {
            break;
        };
        last = Some((p[0], m));
        rest = &rest[5 + len..];
    }
    let (flag, message) = last?;
    let plain = match flag {
        0 => message.to_vec(),
        1 => {
            let mut out = Vec::new();
            let d = flate2::read::GzDecoder::new(message);
            d.take(MAX_MESSAGE as u64 + 1).read_to_end(&mut out).ok()?;
            if out.len() > MAX_MESSAGE {
                return None;
            }
            out
        }
        _ => return None,
    };
    let mut framed = Vec::with_capacity(plain.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&u32::try_from(plain.len()).ok()?.to_be_bytes());
    framed.extend_from_slice(&plain);
    Some(framed)
}

/// Deepest group nesting a message may have (protobuf's recursion limit).
const MAX_GROUPS: u16 = 100;

/// Reads one reply.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    /// Prefix bytes seen of the message being read (5: its body is).
    prefix: u8,
    flag: u8,
    len: [u8; 4],
    /// Body bytes of the message still to come.
    left: u32,
    /// The message's wire format, walked (None: not walked — compressed,
    /// or a codec other than protobuf).
    wire: Option<Wire>,
    /// The reply's messages read whole.
    pub(crate) messages: u64,
    /// The first fault found.
    pub(crate) fault: Option<&'static str>,
    /// The reply's messages are protobuf (`application/grpc`, `+proto`).
    proto: bool,
    /// The reply names a `grpc-encoding` (other than `identity`).
    encoded: bool,
    /// That encoding is gzip: compressed messages are inflated.
    gzip: bool,
    /// The compressed message being read, inflating as it arrives.
    inflate: Option<Box<flate2::write::GzDecoder<Inflated>>>,
    /// The largest message taken, past [`MAX_MESSAGE`] (0: that).
    max: usize,
}

/// Where a compressed message inflates to: counted (at most
/// [`MAX_MESSAGE`]) and walked, not kept.
#[derive(Debug, Default)]
struct Inflated {
    wire: Option<Wire>,
    out: usize,
    /// It went past `max`.
    over: bool,
    /// The most it may inflate to.
    max: usize,
    /// The walk found it is not protobuf.
    bad: bool,
}

impl std::io::Write for Inflated {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.max - self.out {
            self.over = true;
            return Err(std::io::Error::other("a reply message inflates past the limit"));
        }
        self.out += buf.len();
        // The most a message may still inflate to.
        let left = u32::try_from(self.max - self.out).unwrap_or(u32::MAX);
        if let Some(w) = self.wire.as_mut()
            && !self.bad
            && !w.walk(buf, left)
        {
            self.bad = true;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Reader {
    /// A reader that takes messages of up to `max` bytes when that is more
    /// than [`MAX_MESSAGE`] (a reflection answer the caller bounds itself).
    pub(crate) fn bounded(max: usize) -> Reader {
        Reader {
            max,
            ..Reader::default()
        }
    }

    fn max(&self) -> usize {
        self.max.max(MAX_MESSAGE)
    }

    /// The reply's headers: an HTTP 200 must be `application/grpc`
    /// (another status is mapped to a gRPC one, as gRPC does, whatever its
    /// content type).
    pub(crate) fn head(&mut self, status: u16, content_type: Option<&[u8]>, encoding: Option<&[u8]>) {
        let ct = content_type.unwrap_or_default();
        let grpc = ct.strip_prefix(b"application/grpc");
        self.proto =
            matches!(grpc, Some(rest) if rest.is_empty() || rest.starts_with(b";") || rest.starts_with(b"+proto"));
        self.encoded = encoding.is_some_and(|e| !e.is_empty() && e != b"identity");
        self.gzip = encoding == Some(b"gzip");
        if status == 200
            && !grpc.is_some_and(|rest| rest.is_empty() || rest.starts_with(b"+") || rest.starts_with(b";"))
        {
            self.fail(CONTENT_TYPE);
        }
    }

    fn fail(&mut self, fault: &'static str) {
        self.fault.get_or_insert(fault);
    }

    /// Reads `chunk`; returns how many messages it completed.
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) -> u64 {
        let mut done = 0;
        while !chunk.is_empty() {
            if self.fault.is_some() {
                // Nothing after a fault counts: the call failed there.
                return done;
            }
            if self.prefix < 5 {
                let b = chunk[0];
                chunk = &chunk[1..];
                match self.prefix {
                    0 => self.flag = b,
                    i => self.len[usize::from(i - 1)] = b,
                }
                self.prefix += 1;
                if self.prefix == 5 {
                    self.start();
                }
            } else {
                // Within a usize: at most the chunk's length.
                let n = (self.left as usize).min(chunk.len());
                let (part, rest) = chunk.split_at(n);
                self.left -= n as u32;
                if let Some(d) = self.inflate.as_mut() {
                    use std::io::Write as _;
                    if d.write_all(part).is_err() {
                        let fault = if d.get_ref().over { TOO_LARGE } else { DECOMPRESS };
                        self.fail(fault);
                    }
                } else if let Some(w) = self.wire.as_mut()
                    && !w.walk(part, self.left)
                {
                    self.fail(DECODE);
                }
                chunk = rest;
            }
            if self.prefix == 5 && self.left == 0 && self.fault.is_none() {
                match self.message_fault() {
                    Some(fault) => self.fail(fault),
                    None => {
                        done += 1;
                        self.messages += 1;
                    }
                }
                self.prefix = 0;
            }
        }
        done
    }

    /// A prefix read whole: its flag judged, the message's walk (or its
    /// inflating) begun.
    fn start(&mut self) {
        self.left = u32::from_be_bytes(self.len);
        self.inflate = None;
        self.wire = None;
        // Refused from its prefix, as grpc-go does, whatever is sent of it.
        if self.left as usize > self.max() && self.flag & !1 == 0 {
            return self.fail(TOO_LARGE);
        }
        match self.flag {
            0 => {}
            1 if self.gzip => {
                let into = Inflated {
                    wire: self.proto.then(Wire::default),
                    max: self.max(),
                    ..Inflated::default()
                };
                self.inflate = Some(Box::new(flate2::write::GzDecoder::new(into)));
            }
            1 if self.encoded => self.fail(ENCODING),
            1 => self.fail(COMPRESSED),
            _ => self.fail(FRAMING),
        }
        self.wire = (self.proto && self.flag == 0).then(Wire::default);
    }

    /// A message read whole: what is wrong with it, if anything (a
    /// compressed one must inflate whole, within its bound, to protobuf).
    fn message_fault(&mut self) -> Option<&'static str> {
        if let Some(mut d) = self.inflate.take() {
            let finished = d.try_finish();
            let into = d.get_ref();
            return match finished {
                Err(_) if into.over => Some(TOO_LARGE),
                Err(_) => Some(DECOMPRESS),
                Ok(()) if into.bad || into.wire.as_ref().is_some_and(|w| !w.at_end()) => Some(DECODE),
                Ok(()) => None,
            };
        }
        self.wire.as_ref().is_some_and(|w| !w.at_end()).then_some(DECODE)
    }

    /// The body ended: inside a prefix or a message is a framing fault.
    pub(crate) fn end(&mut self) {
        if self.prefix > 0 {
            self.fail(FRAMING);
        }
    }

    /// A unary call's status: OK must come with exactly one message, and
    /// no status with a second one.
    pub(crate) fn cardinality(&mut self, status: u16) {
        if self.messages > 1 || (status == 0 && self.messages == 0) {
            self.fail(CARDINALITY);
        }
    }
}

/// Where the walk of a message's top-level fields is.
#[derive(Debug, Default)]
enum Step {
    /// Reading a field's key (a varint).
    #[default]
    Key,
    /// Reading a varint field's value.
    Varint,
    /// Reading a length-delimited field's length.
    Length,
    /// Skipping a field's bytes (fixed32, fixed64, length-delimited).
    Skip(u32),
}

/// The protobuf wire format of one message, walked as it arrives: keys
/// valid (field number > 0, wire types 0–5), varints at most 10 bytes,
/// lengths within the message, groups closed. A field's content is not
/// looked into (without the method's types, bytes and a message are alike).
#[derive(Debug, Default)]
struct Wire {
    step: Step,
    value: u64,
    /// Bytes of the varint being read.
    shift: u8,
    groups: u16,
}

impl Wire {
    /// Walks `part`, after which `left` bytes of the message are still to
    /// come; false when the message is not protobuf.
    fn walk(&mut self, mut part: &[u8], left: u32) -> bool {
        while !part.is_empty() {
            let remaining = part.len() as u64 + u64::from(left);
            if let Step::Skip(n) = self.step {
                let k = (n as usize).min(part.len());
                part = &part[k..];
                self.step = match n - k as u32 {
                    0 => Step::Key,
                    n => Step::Skip(n),
                };
                continue;
            }
            let b = part[0];
            part = &part[1..];
            if self.shift == 10 || (self.shift == 9 && b > 1) {
                return false;
            }
            self.value |= u64::from(b & 0x7f) << (7 * u32::from(self.shift));
            self.shift += 1;
            if b & 0x80 != 0 {
                continue;
            }
            let value = std::mem::take(&mut self.value);
            self.shift = 0;
            // What follows this varint's last byte.
            let after = remaining - 1;
            self.step = match self.step {
                Step::Key => {
                    let (field, kind) = (value >> 3, value & 7);
                    if field == 0 || field > (1 << 29) - 1 {
                        return false;
                    }
                    match kind {
                        0 => Step::Varint,
                        1 => Step::Skip(8),
                        2 => Step::Length,
                        3 => {
                            self.groups += 1;
                            if self.groups > MAX_GROUPS {
                                return false;
                            }
                            Step::Key
                        }
                        4 => {
                            if self.groups == 0 {
                                return false;
                            }
                            self.groups -= 1;
                            Step::Key
                        }
                        5 => Step::Skip(4),
                        _ => return false,
                    }
                }
                Step::Varint => Step::Key,
                Step::Length if value > after => return false,
                // At most `after`, which is below 2^32 (a message's length).
                Step::Length if value > 0 => Step::Skip(value as u32),
                Step::Length => Step::Key,
                Step::Skip(_) => Step::Key,
            };
            if let Step::Skip(n) = self.step
                && u64::from(n) > after
            {
                return false;
            }
        }
        true
    }

    /// The message ended here: between fields, its groups closed.
    fn at_end(&self) -> bool {
        matches!(self.step, Step::Key) && self.shift == 0 && self.groups == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    /// Reads `body` in chunks of `size` after a 200 `application/grpc`
    /// head; returns the messages and the fault.
    fn read(body: &[u8], size: usize, encoding: Option<&[u8]>) -> (u64, Option<&'static str>) {
        let mut r = Reader::default();
        r.head(200, Some(b"application/grpc"), encoding);
        for c in body.chunks(size) {
            r.feed(c);
        }
        r.end();
        (r.messages, r.fault)
    }

    /// CallReply{message: "hi"}, a nested message, a fixed32, a group.
    const GOOD: &[u8] = &[
        0x0a, 2, b'h', b'i', 0x12, 2, 0x08, 1, 0x1d, 1, 2, 3, 4, 0x23, 0x08, 5, 0x24, 0x10, 0x80, 0x01,
    ];

    #[test]
    fn well_formed_replies_count_their_messages_in_any_chunking() {
        let mut body = frame(0, GOOD);
        body.extend(frame(0, &[]));
        body.extend(frame(0, GOOD));
        for size in [1, 2, 3, 7, body.len()] {
            assert_eq!(read(&body, size, None), (3, None), "chunks of {size}");
        }
        // Compressed with gzip: inflated and walked, in any chunking.
        let mut body = frame(1, &gzip(GOOD));
        body.extend(frame(0, GOOD));
        for size in [1, 3, body.len()] {
            assert_eq!(read(&body, size, Some(b"gzip")), (2, None), "chunks of {size}");
        }
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn compressed_replies_are_inflated_within_their_bound_or_their_class() {
        // Another encoding is not inflated; no encoding at all is the
        // compressed fault, as before.
        assert_eq!(read(&frame(1, &gzip(GOOD)), 4, Some(b"br")), (0, Some(ENCODING)));
        assert_eq!(read(&frame(1, &gzip(GOOD)), 4, None), (0, Some(COMPRESSED)));
        // Not gzip; gzip cut short; an empty compressed message.
        assert_eq!(read(&frame(1, &[0xff, 0xff]), 1, Some(b"gzip")), (0, Some(DECOMPRESS)));
        let cut = gzip(GOOD);
        assert_eq!(
            read(&frame(1, &cut[..cut.len() - 4]), 2, Some(b"gzip")),
            (0, Some(DECOMPRESS))
        );
        assert_eq!(read(&frame(1, &[]), 1, Some(b"gzip")), (0, Some(DECOMPRESS)));
        // Inflates to what is not protobuf.
        assert_eq!(read(&frame(1, &gzip(&[0xff; 3])), 7, Some(b"gzip")), (0, Some(DECODE)));
        // A bomb: 64 MiB of one byte in a few KiB, refused at 4 MiB.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 128 << 10, "{}", bomb.len());
        assert_eq!(read(&frame(1, &bomb), 4096, Some(b"gzip")), (0, Some(TOO_LARGE)));
        // Just at the bound: one bytes field filling it, whole; a byte
        // more is too large.
        let at_bound = |extra: usize| {
            let n = MAX_MESSAGE - 1 - 4 + extra;
            let mut m = vec![0x0a];
            let mut v = n;
            for _ in 0..3 {
                m.push((v as u8 & 0x7f) | 0x80);
                v >>= 7;
            }
            m.push(v as u8);
            m.resize(MAX_MESSAGE + extra, 7);
            read(&frame(1, &gzip(&m)), 65536, Some(b"gzip"))
        };
        assert_eq!(at_bound(0), (1, None));
        assert_eq!(at_bound(1), (0, Some(TOO_LARGE)));
    }

    #[test]
    fn messages_compress_and_the_last_reply_inflates_within_the_bound() {
        let body = [frame(0, GOOD), frame(0, &[])].concat();
        let zipped = gzip_messages(&body).unwrap();
        // Read back as a gzip reply: both messages, whole.
        assert_eq!(read(&zipped, 3, Some(b"gzip")), (2, None));
        assert_eq!(last_inflated(&zipped), Some(frame(0, &[])));
        let two = [frame(1, &gzip(GOOD)), frame(0, b"x")].concat();
        assert_eq!(last_inflated(&two), Some(frame(0, b"x")));
        assert_eq!(last_inflated(&two[..two.len() - 1]), Some(frame(0, GOOD)));
        // A bomb is not inflated past the bound.
        assert_eq!(last_inflated(&frame(1, &gzip(&vec![0u8; MAX_MESSAGE + 1]))), None);
        assert_eq!(last_inflated(&[]), None);
    }

    #[test]
    fn each_fault_is_its_class() {
        let cases: [(Vec<u8>, &str); 11] = [
            (frame(0, &[0xff, 0xff, 0xff]), DECODE),
            // Field number 0; wire type 7; a length past the message.
            (frame(0, &[0x00, 0x01]), DECODE),
            (frame(0, &[0x0f]), DECODE),
            (frame(0, &[0x0a, 9, b'x']), DECODE),
            // A group never closed; a varint of 11 bytes.
            (frame(0, &[0x0b]), DECODE),
            (
                frame(
                    0,
                    &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                ),
                DECODE,
            ),
            (frame(2, GOOD), FRAMING),
            (frame(1, GOOD), COMPRESSED),
            // 4 GiB claimed, 10 bytes given: refused from the prefix.
            ([&[0, 0xff, 0xff, 0xff, 0xff][..], &[0x08; 10]].concat(), TOO_LARGE),
            // A byte past 4 MiB claimed, compressed or not.
            ([&[0, 0, 0x40, 0, 1][..], &[0x08; 10]].concat(), TOO_LARGE),
            ([&[1, 0, 0x40, 0, 1][..], &[0x08; 10]].concat(), TOO_LARGE),
        ];
        for (body, fault) in cases {
            for size in [1, 4, body.len()] {
                assert_eq!(read(&body, size, None).1, Some(fault), "{body:?} in chunks of {size}");
            }
        }
        // Half a prefix.
        assert_eq!(read(&[0, 0, 0], 1, None), (0, Some(FRAMING)));
    }

    #[test]
    fn the_head_and_the_count_of_messages_are_judged() {
        let mut r = Reader::default();
        r.head(200, Some(b"text/html"), None);
        assert_eq!(r.fault, Some(CONTENT_TYPE));
        let mut r = Reader::default();
        r.head(200, None, None);
        assert_eq!(r.fault, Some(CONTENT_TYPE));
        // Another status is mapped to a gRPC status, not a fault.
        let mut r = Reader::default();
        r.head(503, Some(b"text/html"), None);
        assert_eq!(r.fault, None);
        for ct in [
            &b"application/grpc+proto"[..],
            b"application/grpc+json",
            b"application/grpc;charset=x",
        ] {
            let mut r = Reader::default();
            r.head(200, Some(ct), None);
            assert_eq!(r.fault, None, "{ct:?}");
        }
        // JSON messages are not walked as protobuf.
        let mut r = Reader::default();
        r.head(200, Some(b"application/grpc+json"), None);
        r.feed(&frame(0, b"{}"));
        assert_eq!((r.messages, r.fault), (1, None));
        let unary = |n: usize, status: u16| {
            let mut r = Reader::default();
            r.head(200, Some(b"application/grpc"), None);
            for _ in 0..n {
                r.feed(&frame(0, GOOD));
            }
            r.end();
            r.cardinality(status);
            r.fault
        };
        assert_eq!(unary(1, 0), None);
        assert_eq!(unary(0, 0), Some(CARDINALITY));
        assert_eq!(unary(2, 0), Some(CARDINALITY));
        assert_eq!(unary(0, 14), None, "an error status needs no message");
    }
}
