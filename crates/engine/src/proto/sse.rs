//! Server-Sent Events: the `text/event-stream` reader (WHATWG HTML, "event
//! stream interpretation"). I/O-free and incremental: bytes go in as they
//! are read, split anywhere, and each complete event comes out through a
//! callback that borrows it (no allocation per event beyond the reader's
//! own buffers, which are reused). Bounded: a line longer than
//! `Limits::line` or an event whose data grows past `Limits::event` is an
//! error (`sse.too_large`), never buffered whole. Fuzzed in
//! `tests/fuzz_sse.rs`; meant to be shared by `http --sse` and a scenario
//! step.

/// How much one stream may make the reader hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest line, in bytes, without its line end.
    pub line: usize,
    /// The most data one event may gather, in bytes.
    pub event: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            line: 1 << 20,
            event: 1 << 20,
        }
    }
}

/// One dispatched event, borrowed from the reader until the callback
/// returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `event:` field; `message` when the event set none.
    pub kind: &'a str,
    /// The `data:` lines joined by `\n`.
    pub data: &'a str,
    /// The last event ID so far (it carries over events, as the spec says).
    pub id: &'a str,
}

/// Why the reader stopped: what it was asked to hold went past a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TooLarge {
    /// A line longer than `Limits::line` bytes.
    Line(usize),
    /// An event whose data went past `Limits::event` bytes.
    Event(usize),
}

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooLarge::Line(limit) => {
                write!(f, "an event-stream line is longer than {limit} bytes")
            }
            TooLarge::Event(limit) => {
                write!(f, "an event's data is longer than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for TooLarge {}

/// The incremental event-stream reader of one response body.
#[derive(Debug)]
pub struct Reader {
    limits: Limits,
    /// The line being read, without its end.
    line: Vec<u8>,
    /// The last byte fed was a CR: a LF right after it ends nothing.
    after_cr: bool,
    /// No line has ended yet: the first may start with a BOM.
    first_line: bool,
    data: String,
    /// A `data:` field was seen since the last dispatch.
    has_data: bool,
    kind: String,
    id: String,
    retry: Option<u64>,
    /// A field line was read since the last blank line.
    partial: bool,
    failed: Option<TooLarge>,
}

impl Reader {
    pub fn new(limits: Limits) -> Reader {
        Reader {
            limits,
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: String::new(),
            has_data: false,
            kind: String::new(),
            id: String::new(),
            retry: None,
            partial: false,
            failed: None,
        }
    }

    /// The reconnection time the stream last set with `retry:`, in ms.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Reads `bytes`, calling `on_event` for each event they complete.
    /// After an error the reader stays failed and reads nothing more.
    pub fn feed(&mut self, mut bytes: &[u8], on_event: &mut impl FnMut(Event<'_>)) -> Result<(), TooLarge> {
        if let Some(failed) = self.failed {
            return Err(failed);
        }
        while !bytes.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|&b| b == b'\r' || b == b'\n') {
                Some(end) => {
                    self.take(&bytes[..end])?;
                    self.after_cr = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    self.end_line(on_event)?;
                }
                None => {
                    self.take(bytes)?;
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    /// The stream ended: true when it ended inside an event (a field read
    /// but no blank line after it), which the spec discards.
    pub fn finish(&mut self) -> bool {
        self.partial || !self.line.is_empty()
    }

    fn take(&mut self, part: &[u8]) -> Result<(), TooLarge> {
        if self.line.len() + part.len() > self.limits.line {
            self.line.clear();
            return Err(self.fail(TooLarge::Line(self.limits.line)));
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn fail(&mut self, why: TooLarge) -> TooLarge {
        self.failed = Some(why);
        why
    }

    fn end_line(&mut self, on_event: &mut impl FnMut(Event<'_>)) -> Result<(), TooLarge> {
        let mut line = std::mem::take(&mut self.line);
        let mut text: &[u8] = &line;
        if self.first_line {
            self.first_line = false;
            if let Some(rest) = text.strip_prefix(b"\xEF\xBB\xBF") {
                text = rest;
            }
        }
        let result = self.interpret(text, on_event);
        line.clear();
        self.line = line;
        result
    }

    fn interpret(&mut self, line: &[u8], on_event: &mut impl FnMut(Event<'_>)) -> Result<(), TooLarge> {
        if line.is_empty() {
            self.partial = false;
            if self.has_data {
                on_event(Event {
                    kind: if self.kind.is_empty() { "message" } else { &self.kind },
                    data: &self.data,
                    id: &self.id,
                });
            }
            self.data.clear();
            self.kind.clear();
            self.has_data = false;
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        self.partial = true;
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                let more = value.len() + usize::from(self.has_data);
                if self.data.len() + more > self.limits.event {
                    return Err(self.fail(TooLarge::Event(self.limits.event)));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => {
                self.kind.clear();
                self.kind.push_str(&value);
            }
            b"id" if !value.contains('\0') => {
                self.id.clear();
                self.id.push_str(&value);
            }
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    struct Owned(String, String, String);

    fn read(input: &[u8], splits: &[usize]) -> (Vec<Owned>, Result<(), TooLarge>) {
        let mut reader = Reader::new(Limits::default());
        let mut events = Vec::new();
        let mut at = 0;
        let mut result = Ok(());
        for &cut in splits.iter().chain(std::iter::once(&input.len())) {
            let cut = cut.clamp(at, input.len());
            result = reader.feed(&input[at..cut], &mut |e| {
                events.push(Owned(e.kind.into(), e.data.into(), e.id.into()))
            });
            at = cut;
            if result.is_err() {
                break;
            }
        }
        (events, result)
    }

    fn ev(kind: &str, data: &str, id: &str) -> Owned {
        Owned(kind.into(), data.into(), id.into())
    }

    #[test]
    fn fields_comments_and_multi_line_data() {
        let input = b": hello\nevent: tick\ndata: a\ndata:b\nid: 7\n\ndata\n\nretry: 30\nx: y\n\n";
        let (events, result) = read(input, &[]);
        assert_eq!(result, Ok(()));
        assert_eq!(events, vec![ev("tick", "a\nb", "7"), ev("message", "", "7")]);
    }

    #[test]
    fn every_line_end_reads_the_same() {
        for end in ["\n", "\r\n", "\r"] {
            let input = format!("data: one{end}{end}data: two{end}data: 2{end}{end}");
            let (events, _) = read(input.as_bytes(), &[]);
            assert_eq!(
                events,
                vec![ev("message", "one", ""), ev("message", "two\n2", "")],
                "{end:?}"
            );
        }
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_end() {
        let input = b"data: a\r\n\r\ndata: b\r\n\r\n";
        for cut in 0..input.len() {
            let (events, _) = read(input, &[cut]);
            assert_eq!(events, vec![ev("message", "a", ""), ev("message", "b", "")]);
        }
    }

    #[test]
    fn a_bom_is_dropped_and_an_unended_event_discarded() {
        let mut reader = Reader::new(Limits::default());
        let mut n = 0;
        reader
            .feed(b"\xEF\xBB\xBFdata: x\n\ndata: half", &mut |e| {
                assert_eq!(e.data, "x");
                n += 1;
            })
            .unwrap();
        assert_eq!(n, 1);
        assert!(reader.finish());
    }

    #[test]
    fn id_with_nul_is_ignored_and_retry_needs_digits() {
        let mut reader = Reader::new(Limits::default());
        let mut ids = Vec::new();
        reader
            .feed(
                b"id: 1\ndata: a\n\nid: 2\0\nretry: 5x\ndata: b\n\nretry: 250\n\n",
                &mut |e| ids.push(e.id.to_string()),
            )
            .unwrap();
        assert_eq!(ids, ["1", "1"]);
        assert_eq!(reader.retry(), Some(250));
    }

    #[test]
    fn a_long_line_or_event_is_refused_not_held() {
        let limits = Limits { line: 16, event: 24 };
        let mut reader = Reader::new(limits);
        let chunk = [b'x'; 10];
        assert_eq!(reader.feed(&chunk, &mut |_| {}), Ok(()));
        assert_eq!(reader.feed(&chunk, &mut |_| {}), Err(TooLarge::Line(16)));
        assert!(reader.line.capacity() <= 16);
        assert_eq!(reader.feed(b"\n\n", &mut |_| {}), Err(TooLarge::Line(16)));

        let mut reader = Reader::new(limits);
        let mut n = 0;
        let result = reader.feed(b"data: 0123456789\ndata: 0123456789\ndata: 0123\n\n", &mut |_| n += 1);
        assert_eq!(result, Err(TooLarge::Event(24)));
        assert_eq!(n, 0);
    }

    proptest::proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    "data:[ a-z:]{0,6}", "event: [a-z]{0,4}", "id: [0-9]{0,3}",
                    ": [a-z]{0,4}", "retry: [0-9]{1,3}", "", "[a-z]{1,5}",
                ],
                0..24,
            ),
            ends in proptest::collection::vec(0usize..3, 24),
            mut cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let mut input = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                input.extend_from_slice(line.as_bytes());
                input.extend_from_slice([&b"\n"[..], b"\r\n", b"\r"][ends[i]]);
            }
            cuts.sort_unstable();
            let whole = read(&input, &[]);
            let split = read(&input, &cuts);
            proptest::prop_assert_eq!(&whole.0, &split.0);
            proptest::prop_assert_eq!(whole.1, split.1);
            let bytewise: Vec<usize> = (0..input.len()).collect();
            proptest::prop_assert_eq!(&whole.0, &read(&input, &bytewise).0);
        }
    }
}
