//! A gRPC reply judged as a gRPC client judges it, as its body arrives in
//! chunks of any size, without keeping it.
//!
//! ```text
//!  response headers ── head() ──► content-type application/grpc[+proto]?
//!                                 grpc-encoding given?
//!  DATA chunks ──────── feed() ─► 5-byte prefix (flag, length), message:
//!                                 flag 0 or 1 (1 only with grpc-encoding),
//!                                 the message's protobuf wire format walked
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
}

impl Reader {
    /// The reply's headers: an HTTP 200 must be `application/grpc`
    /// (another status is mapped to a gRPC one, as gRPC does, whatever its
    /// content type).
    pub(crate) fn head(&mut self, status: u16, content_type: Option<&[u8]>, encoding: Option<&[u8]>) {
        let ct = content_type.unwrap_or_default();
        let grpc = ct.strip_prefix(b"application/grpc");
        self.proto =
            matches!(grpc, Some(rest) if rest.is_empty() || rest.starts_with(b";") || rest.starts_with(b"+proto"));
        self.encoded = encoding.is_some_and(|e| !e.is_empty() && e != b"identity");
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
                if let Some(w) = self.wire.as_mut()
                    && !w.walk(part, self.left)
                {
                    self.fail(DECODE);
                }
                chunk = rest;
            }
            if self.prefix == 5 && self.left == 0 && self.fault.is_none() {
                if self.wire.as_ref().is_some_and(|w| !w.at_end()) {
                    self.fail(DECODE);
                } else {
                    done += 1;
                    self.messages += 1;
                }
                self.prefix = 0;
            }
        }
        done
    }

    /// A prefix read whole: its flag judged, the message's walk begun.
    fn start(&mut self) {
        self.left = u32::from_be_bytes(self.len);
        match self.flag {
            0 => {}
            1 if self.encoded => {}
            1 => self.fail(COMPRESSED),
            _ => self.fail(FRAMING),
        }
        self.wire = (self.proto && self.flag == 0).then(Wire::default);
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
        // Compressed with an encoding: counted, not walked.
        assert_eq!(read(&frame(1, &[0xff, 0xff]), 1, Some(b"gzip")), (1, None));
    }

    #[test]
    fn each_fault_is_its_class() {
        let cases: [(Vec<u8>, &str); 9] = [
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
            // 4 GiB claimed, 10 bytes given.
            ([&[0, 0xff, 0xff, 0xff, 0xff][..], &[0x08; 10]].concat(), FRAMING),
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
