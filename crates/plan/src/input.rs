//! Limits on the files a user hands throng: one bounded reader for every
//! file a flag or a file names ([`read_limited`], [`open_limited`]), with a
//! limit per kind; scenario and sweep YAML checked on the text before a
//! parser sees it; plain words for the parsers' type names.
//!
//! A YAML parser given `[[[[…` 200 KB deep spends minutes before its own
//! recursion limit; a 50 MB file costs gigabytes. Both are refused here, in
//! time linear in the text. A device or an endless pipe (`/dev/zero`, a
//! FIFO) named where a file is expected is read only to its kind's limit,
//! then refused: nothing reads a user's file without a bound.

use std::io::Read;
use std::path::Path;

/// Largest scenario or sweep file read, in bytes (4 MiB): far above any
/// hand-written plan, small enough to parse at once.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Largest certificate, key or credentials file read (1 MiB): `--cacert`,
/// `--cert`, `--key` (and a scenario's `tls:` block), `--nats-creds`,
/// `--bearer-file`, `-H @FILE`, `throng serve --tls DIR`'s files. A bundle
/// of every public CA is about 200 KB.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Largest `.proto` file read (`--proto`, `-I`/`--import-path` imports,
/// a scenario's `proto:` files), 4 MiB.
pub const MAX_PROTO_BYTES: u64 = 4 << 20;

/// Largest result document or result set read (`report`, `compare`,
/// `merge`), 1 GiB: a day-long run's per-second figures are a few
/// hundred megabytes at most. Streamed, not held whole.
pub const MAX_RESULT_BYTES: u64 = 1 << 30;

/// A file that could not be read, or was larger than its limit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The operating system's reason (not found, no permission, a directory).
    #[error("cannot read it: {0}")]
    Io(std::io::Error),
    /// More bytes than the limit of its kind (a device, an endless pipe or
    /// a file too large); only the limit (and one byte) was read.
    #[error("it is larger than the limit of {} for this kind of file", size(*limit))]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
}

impl ReadError {
    /// True when the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// `limit` bytes in words: `1 MiB`, `64 MiB`, `1 GiB`, `512 bytes`.
pub fn size(limit: u64) -> String {
    match limit {
        l if l >= 1 << 30 && l % (1 << 30) == 0 => format!("{} GiB", l >> 30),
        l if l >= 1 << 20 && l % (1 << 20) == 0 => format!("{} MiB", l >> 20),
        l if l >= 1 << 10 && l % (1 << 10) == 0 => format!("{} KiB", l >> 10),
        l => format!("{l} bytes"),
    }
}

/// Reads the whole of `path`, at most `limit` bytes: one byte more is
/// [`ReadError::TooLarge`], found without reading further (a `/dev/zero`
/// costs `limit` bytes of memory, not all of it).
pub fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    /// Room left past a regular file's bytes, so that a caller that puts a
    /// request head in front of a body does not copy it again.
    const ROOM: u64 = 16 << 10;
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    // A regular file's size is known: a large one is refused unread.
    let len = match file.metadata() {
        Ok(meta) if meta.is_file() && meta.len() > limit => return Err(ReadError::TooLarge { limit }),
        Ok(meta) if meta.is_file() => meta.len(),
        _ => 0,
    };
    let mut bytes = Vec::with_capacity(usize::try_from(len + ROOM).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Like [`read_limited`], as UTF-8 text; `Err(Ok(byte))` for text that is
/// not UTF-8 (the offset of the first bad byte).
pub fn read_limited_text(path: &Path, limit: u64) -> Result<String, Result<usize, ReadError>> {
    let bytes = read_limited(path, limit).map_err(Err)?;
    String::from_utf8(bytes).map_err(|e| Ok(e.utf8_error().valid_up_to()))
}

/// Opens `path` for a parser that streams: the reader fails with an error
/// whose message is [`ReadError::TooLarge`]'s when the file goes on past
/// `limit` bytes.
pub fn open_limited(path: &Path, limit: u64) -> Result<Limited<std::fs::File>, ReadError> {
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    if let Ok(meta) = file.metadata()
        && meta.is_file()
        && meta.len() > limit
    {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(Limited {
        inner: file,
        left: limit,
        limit,
    })
}

/// A reader that ends in an error past its limit ([`open_limited`]).
#[derive(Debug)]
pub struct Limited<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // At the limit: the file may end here, or go on.
            let mut one = [0u8; 1];
            return match self.inner.read(&mut one)? {
                0 => Ok(0),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::FileTooLarge,
                    ReadError::TooLarge { limit: self.limit },
                )),
            };
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Deepest nesting of mappings and sequences (block or flow) a scenario or
/// sweep file may have.
pub const MAX_NESTING: usize = 64;

/// Where and why a file's text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong and what to do.
    pub message: String,
}

/// The text without a leading UTF-8 byte order mark (some Windows editors
/// write one; YAML allows it, the parser does not skip it).
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Refuses YAML text nested deeper than [`MAX_NESTING`]: flow brackets
/// (`[`, `{`) outside quotes and comments, plus block levels (each deeper
/// indentation, each `- ` that opens a sequence item). It may count a level
/// too many in odd text (a bracket in a plain scalar), never one too few.
pub fn check_yaml_nesting(text: &str) -> Result<(), InputError> {
    let mut flow = 0usize;
    // Indentations of the open block levels, innermost last.
    let mut blocks: Vec<usize> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        let indent = line.len() - body.len();
        let mut chars = body.char_indices().peekable();
        if flow == 0 && !body.is_empty() && !body.starts_with('#') {
            while blocks.last().is_some_and(|&b| b >= indent) {
                blocks.pop();
            }
            blocks.push(indent);
            // `- - - x`: each dash opens one more level on this line.
            let mut at = indent;
            while let Some(&(i, '-')) = chars.peek() {
                if !matches!(body.as_bytes().get(i + 1), Some(b' ') | None) {
                    break;
                }
                chars.next();
                while chars.next_if(|&(_, c)| c == ' ').is_some() {}
                at = indent + chars.peek().map_or(body.len(), |&(j, _)| j);
                blocks.push(at);
                check(blocks.len(), n, at)?;
            }
            check(blocks.len(), n, at)?;
        }
        let mut quote: Option<char> = None;
        let mut previous = ' ';
        while let Some((i, c)) = chars.next() {
            match (quote, c) {
                (Some('"'), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') if previous == ' ' || "[{,:".contains(previous) => quote = Some(c),
                (None, '#') if previous == ' ' || previous == '\t' => break,
                (None, '[' | '{') => {
                    flow += 1;
                    check(blocks.len() + flow, n, indent + i)?;
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            previous = c;
        }
    }
    Ok(())
}

fn check(depth: usize, line: usize, column: usize) -> Result<(), InputError> {
    if depth > MAX_NESTING {
        return Err(InputError {
            line: line + 1,
            column: column + 1,
            message: format!(
                "nested more than {MAX_NESTING} levels deep; a scenario or sweep needs a few (flatten the file)"
            ),
        });
    }
    Ok(())
}

/// A parser's message with Rust's type names in plain words: `expected
/// f64` becomes `expected a number`, `u64` and its kin `a whole number (0
/// or more)`, `i64` and its kin `a whole number`, `a boolean` `true or
/// false`.
pub fn plain_types(message: &str) -> String {
    const UNSIGNED: [&str; 6] = ["u8", "u16", "u32", "u64", "u128", "usize"];
    const SIGNED: [&str; 6] = ["i8", "i16", "i32", "i64", "i128", "isize"];
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (head, tail) = rest.split_at(at + "expected ".len());
        out.push_str(head);
        let word_len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let word = &tail[..word_len];
        let plain = match word {
            "f32" | "f64" => Some("a number"),
            w if UNSIGNED.contains(&w) => Some("a whole number (0 or more)"),
            w if SIGNED.contains(&w) => Some("a whole number"),
            "a" if tail.starts_with("a boolean") => {
                rest = &tail["a boolean".len()..];
                out.push_str("true or false");
                continue;
            }
            _ => None,
        };
        match plain {
            Some(p) => {
                out.push_str(p);
                rest = &tail[word_len..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_and_block_nesting_is_refused_with_its_place() {
        let deep = "[".repeat(200_000);
        let e = check_yaml_nesting(&format!("a: {deep}")).unwrap_err();
        assert_eq!((e.line, e.column), (1, 4 + MAX_NESTING - 1), "{e:?}");
        let mut block = String::new();
        for i in 0..100 {
            block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        let e = check_yaml_nesting(&block).unwrap_err();
        assert_eq!(e.line, MAX_NESTING + 1, "{e:?}");
        let dashes = format!("{}x\n", "- ".repeat(100));
        assert!(check_yaml_nesting(&dashes).is_err());
    }

    #[test]
    fn ordinary_files_pass() {
        let ok = "# a [ comment\nscenarios:\n  a:\n    flow:\n      - request: {url: '/x[', method: \"GET]\"}\n      \
                  - think: 1s # ]]]\n    body: |\n      {\"a\": [1, 2]}\n";
        check_yaml_nesting(ok).unwrap();
        let nested = format!("{}1{}", "[".repeat(MAX_NESTING - 1), "]".repeat(MAX_NESTING - 1));
        check_yaml_nesting(&format!("a: {nested}")).unwrap();
    }

    #[test]
    fn files_are_read_to_their_limit_and_no_further() {
        let dir = std::env::temp_dir().join(format!("throng-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_limited(&f, 5).unwrap(), b"12345");
        assert!(matches!(read_limited(&f, 4), Err(ReadError::TooLarge { limit: 4 })));
        // An endless device: refused after the limit, not read to the end.
        let zero = Path::new("/dev/zero");
        let e = read_limited(zero, 1 << 20).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is larger than the limit of 1 MiB for this kind of file"
        );
        assert!(read_limited(&dir.join("absent"), 1).unwrap_err().is_not_found());
        let mut r = open_limited(zero, 1000).unwrap();
        let e = std::io::copy(&mut r, &mut std::io::sink()).unwrap_err();
        assert!(e.to_string().contains("larger than the limit of 1000 bytes"), "{e}");
        let mut r = open_limited(&f, 5).unwrap();
        assert_eq!(std::io::copy(&mut r, &mut std::io::sink()).unwrap(), 5);
        assert_eq!(read_limited_text(&f, 5).unwrap(), "12345");
        std::fs::write(&f, b"ab\xffc").unwrap();
        assert!(matches!(read_limited_text(&f, 5), Err(Ok(2))));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn bom_is_stripped() {
        assert_eq!(strip_bom("\u{feff}a: 1"), "a: 1");
        assert_eq!(strip_bom("a: 1"), "a: 1");
    }

    #[test]
    fn type_names_read_as_words() {
        assert_eq!(
            plain_types("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            plain_types("invalid value: integer `-1`, expected u64 at x"),
            "invalid value: integer `-1`, expected a whole number (0 or more) at x"
        );
        assert_eq!(
            plain_types("invalid type: string \"y\", expected a boolean"),
            "invalid type: string \"y\", expected true or false"
        );
        assert_eq!(plain_types("expected a sequence"), "expected a sequence");
        assert_eq!(
            plain_types("expected u64s, expected i32"),
            "expected u64s, expected a whole number"
        );
    }
}
