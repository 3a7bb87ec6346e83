//! Fuzz targets (proptest) for the HTTP/1 response reader and its chunked
//! decoder, and the seed corpus in `tests/corpus/http1/` run as ordinary
//! tests. `PROPTEST_CASES=N` runs longer; docs/FUZZING.md says how long each
//! target ran and what it found.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use throng_engine::http1::{Feed, Keep, ParseError, ResponseReader};

/// Keeps the server, the headers and the body.
fn keep_all() -> Keep {
    Keep {
        server: true,
        headers: true,
        body: KeepBody::all(),
    }
}

/// "Keep the whole body" for `Keep::body`, whether it is a flag or a byte
/// limit.
trait KeepBody {
    fn all() -> Self;
}

impl KeepBody for bool {
    fn all() -> bool {
        true
    }
}

impl KeepBody for usize {
    fn all() -> usize {
        1 << 20
    }
}

/// `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        // Next to this file: tests/NAME.proptest-regressions.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

/// What a reader made of some bytes.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    result: Result<Feed, ParseError>,
    /// The reader's verdict at the end of the stream (for close-delimited
    /// bodies), when the response was not complete before.
    at_eof: Option<Result<(), ParseError>>,
    status: u16,
    body: Vec<u8>,
    body_bytes: u64,
    wire_bytes: u64,
    header_bytes: u64,
}

/// Feeds `parts` in order, as reads off a socket would, then the end of the
/// stream. Checks the invariants that hold for any input.
fn read(parts: &[&[u8]], head_request: bool) -> Outcome {
    let mut r = ResponseReader::new(head_request);
    r.reset(keep_all());
    let mut result = Ok(Feed::More);
    let mut fed = 0u64;
    for p in parts {
        fed += p.len() as u64;
        result = r.feed(p);
        if let Ok(Feed::Done { extra }) = result {
            assert!(extra <= p.len(), "extra {extra} beyond the {} bytes fed", p.len());
            fed -= extra as u64;
            assert_eq!(r.wire_bytes, fed, "a complete response accounts for every byte it used");
        }
        if !matches!(result, Ok(Feed::More)) {
            break;
        }
    }
    assert!(r.wire_bytes <= fed);
    assert!(r.body().len() <= 1 << 20);
    assert!(r.body().len() as u64 <= r.body_bytes);
    let at_eof = matches!(result, Ok(Feed::More)).then(|| r.eof());
    Outcome {
        result,
        at_eof,
        status: r.status,
        body: r.body().to_vec(),
        body_bytes: r.body_bytes,
        wire_bytes: r.wire_bytes,
        header_bytes: r.header_bytes,
    }
}

/// The parts of an outcome that must not depend on how the bytes were
/// split into reads: `extra` does (it is what is left of the last read), and
/// so does how far a malformed response was counted on the wire.
fn split_free(o: &Outcome) -> Outcome {
    let failed = o.result.is_err();
    Outcome {
        result: o.result.map(|f| match f {
            Feed::Done { .. } => Feed::Done { extra: 0 },
            more => more,
        }),
        at_eof: o.at_eof,
        status: o.status,
        body: o.body.clone(),
        body_bytes: o.body_bytes,
        wire_bytes: if failed { 0 } else { o.wire_bytes },
        header_bytes: o.header_bytes,
    }
}

/// Cuts `msg` at `cuts` (taken modulo its length).
fn split<'a>(msg: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (msg.len() + 1)).collect();
    points.push(0);
    points.push(msg.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &msg[w[0]..w[1]]).collect()
}

/// How a generated response frames its body.
#[derive(Clone, Debug)]
enum Framing {
    Length,
    /// Chunk sizes (the body is cut into these), an extension on each size
    /// line, and trailers.
    Chunked {
        cuts: Vec<usize>,
        ext: bool,
        trailers: Vec<(String, String)>,
    },
    /// No length: the body ends with the connection.
    UntilEof,
}

#[derive(Clone, Debug)]
struct Response {
    interim: usize,
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    framing: Framing,
}

impl Response {
    fn serialise(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..self.interim {
            out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        out.extend_from_slice(format!("HTTP/1.1 {} Whatever\r\n", self.status).as_bytes());
        for (n, v) in &self.headers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        match &self.framing {
            Framing::Length => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.body.len()).as_bytes());
                out.extend_from_slice(&self.body);
            }
            Framing::Chunked { cuts, ext, trailers } => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for part in split(&self.body, cuts) {
                    if part.is_empty() {
                        continue;
                    }
                    out.extend_from_slice(format!("{:x}", part.len()).as_bytes());
                    if *ext {
                        out.extend_from_slice(b";name=\"v\"");
                    }
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(part);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"0\r\n");
                for (n, v) in trailers {
                    out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
                }
                out.extend_from_slice(b"\r\n");
            }
            Framing::UntilEof => {
                out.extend_from_slice(b"Connection: close\r\n\r\n");
                out.extend_from_slice(&self.body);
            }
        }
        out
    }
}

fn header() -> impl Strategy<Value = (String, String)> {
    ("X-[A-Za-z0-9-]{1,12}", "[ -~]{0,40}").prop_map(|(n, v)| (n, v.trim().to_string()))
}

fn response() -> impl Strategy<Value = Response> {
    let framing = prop_oneof![
        Just(Framing::Length),
        (
            prop::collection::vec(0usize..3000, 0..6),
            any::<bool>(),
            prop::collection::vec(header(), 0..3)
        )
            .prop_map(|(cuts, ext, trailers)| Framing::Chunked { cuts, ext, trailers }),
        Just(Framing::UntilEof),
    ];
    (
        0usize..3,
        (200u16..600).prop_filter("no body by definition", |s| *s != 204 && *s != 304),
        prop::collection::vec(header(), 0..20),
        prop::collection::vec(any::<u8>(), 0..3000),
        framing,
    )
        .prop_map(|(interim, status, headers, body, framing)| Response {
            interim,
            status,
            headers,
            body,
            framing,
        })
}

/// One random edit of a seed.
#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    Repeat(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, v)| Edit::Insert(i, v)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Edit::Delete(i, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1usize..32, 1usize..64).prop_map(|(i, n, k)| Edit::Repeat(i, n, k)),
    ]
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for e in edits {
        let at = |i: usize, v: &Vec<u8>| if v.is_empty() { 0 } else { i % (v.len() + 1) };
        match e {
            Edit::Flip(i, b) if !v.is_empty() => {
                let n = v.len();
                v[i % n] ^= b | 1;
            }
            Edit::Flip(..) => {}
            Edit::Insert(i, bytes) => {
                let i = at(*i, &v);
                v.splice(i..i, bytes.iter().copied());
            }
            Edit::Delete(i, n) => {
                let i = at(*i, &v);
                let end = (i + n).min(v.len());
                v.drain(i..end);
            }
            Edit::Truncate(i) => {
                let i = at(*i, &v);
                v.truncate(i);
            }
            Edit::Repeat(i, n, k) => {
                let i = at(*i, &v);
                let end = (i + n).min(v.len());
                let piece = v[i..end].to_vec();
                for _ in 0..*k {
                    v.splice(end..end, piece.iter().copied());
                }
            }
        }
    }
    v
}

/// The seed corpus: files in `tests/corpus/http1/`, named `NAME.OUTCOME`
/// where OUTCOME is `ok`, `malformed` or `eof`.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/http1");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(files.len() >= 20, "the corpus is in {}", dir.display());
    files
}

/// Every seed reads as its name says, whole and one byte at a time.
#[test]
fn corpus_seeds_read_as_named() {
    for (name, bytes) in corpus() {
        let whole = read(&[&bytes], false);
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        let by_byte = read(&bytewise, false);
        assert_eq!(
            split_free(&whole),
            split_free(&by_byte),
            "{name}: the split changed the outcome"
        );
        let verdict = match (&whole.result, &whole.at_eof) {
            (Ok(Feed::Done { .. }), _) | (Ok(Feed::More), Some(Ok(()))) => "ok",
            (Err(ParseError::Malformed), _) => "malformed",
            (Ok(Feed::More), Some(Err(ParseError::Eof))) | (Err(ParseError::Eof), _) => "eof",
            other => panic!("{name}: {other:?}"),
        };
        let expected = name.rsplit('.').next().unwrap();
        assert_eq!(verdict, expected, "{name}: {whole:?}");
    }
}

/// A head larger than the limit is refused however it arrives, and the
/// reader keeps no more of it than the limit and one read.
#[test]
fn a_head_past_the_limit_is_malformed_in_one_read_or_many() {
    let mut head = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
    head.resize(70 * 1024, b'a');
    head.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
    let whole = read(&[&head], false);
    let pieces: Vec<&[u8]> = head.chunks(4096).collect();
    let many = read(&pieces, false);
    assert_eq!(many.result, Err(ParseError::Malformed));
    assert_eq!(whole.result, many.result);
}

proptest! {
    #![proptest_config(config(256))]

    /// A response serialised then read gives back its status and body,
    /// however the bytes are split across reads, and a second response
    /// after it is left unread (`extra`).
    #[test]
    fn serialise_then_read_round_trips(resp in response(), cuts in prop::collection::vec(any::<usize>(), 0..10), tail in any::<bool>()) {
        let mut msg = resp.serialise();
        let len = msg.len();
        let until_eof = matches!(resp.framing, Framing::UntilEof);
        if tail && !until_eof {
            msg.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
        }
        let parts = split(&msg, &cuts);
        let out = read(&parts, false);
        if until_eof {
            prop_assert_eq!(&out.result, &Ok(Feed::More));
            prop_assert_eq!(&out.at_eof, &Some(Ok(())));
        } else {
            // The response ends in the part holding its last byte; the rest
            // of that part is `extra`.
            let mut end = 0;
            for p in &parts {
                end += p.len();
                if end >= len {
                    break;
                }
            }
            prop_assert_eq!(&out.result, &Ok(Feed::Done { extra: end - len }));
        }
        prop_assert_eq!(out.status, resp.status);
        prop_assert_eq!(&out.body, &resp.body);
        prop_assert_eq!(out.body_bytes, resp.body.len() as u64);
        prop_assert_eq!(out.wire_bytes, len as u64);
        prop_assert!(out.header_bytes > 0 && out.header_bytes < len as u64 + 1);
    }

    /// Arbitrary bytes, split anyhow: no panic, and the invariants in `read`.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096), cuts in prop::collection::vec(any::<usize>(), 0..8), head_request in any::<bool>()) {
        let parts = split(&bytes, &cuts);
        read(&parts, head_request);
    }

    /// Seeds from the corpus with random edits (flips, insertions,
    /// deletions, truncation, repeats): no panic, and however they are
    /// split, the same outcome.
    #[test]
    fn edited_seeds_read_the_same_however_split(pick in any::<usize>(), edits in prop::collection::vec(edit(), 1..6), cuts in prop::collection::vec(any::<usize>(), 0..8)) {
        let seeds = corpus();
        let (_, seed) = &seeds[pick % seeds.len()];
        let bytes = apply(seed, &edits);
        let whole = read(&[&bytes], false);
        let parts = split(&bytes, &cuts);
        let pieces = read(&parts, false);
        prop_assert_eq!(split_free(&whole), split_free(&pieces));
    }

    /// Chunked bodies: any chunk sizes (hex in either case, leading zeros,
    /// extensions) decode to the same body; sizes past 15 hex digits are
    /// refused rather than overflowing.
    #[test]
    fn chunk_sizes_decode_or_are_refused(sizes in prop::collection::vec(0u64..5000, 0..6), upper in any::<bool>(), zeros in 0usize..4, digits in 1usize..20) {
        let mut msg = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let mut total = 0u64;
        for s in sizes.iter().filter(|s| **s > 0) {
            let hex = if upper { format!("{s:X}") } else { format!("{s:x}") };
            msg.extend_from_slice(format!("{}{hex}\r\n", "0".repeat(zeros)).as_bytes());
            msg.resize(msg.len() + *s as usize, b'd');
            msg.extend_from_slice(b"\r\n");
            total += s;
        }
        msg.extend_from_slice(b"0\r\n\r\n");
        let out = read(&[&msg], false);
        let longest = sizes.iter().filter(|s| **s > 0).map(|s| format!("{s:x}").len() + zeros).max().unwrap_or(0);
        if longest <= 15 {
            prop_assert_eq!(out.result, Ok(Feed::Done { extra: 0 }));
            prop_assert_eq!(out.body_bytes, total);
        } else {
            prop_assert_eq!(out.result, Err(ParseError::Malformed));
        }
        // A huge size: refused, or waiting for data; never an overflow.
        let huge = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{}\r\nabc", "f".repeat(digits));
        let out = read(&[huge.as_bytes()], false);
        if digits > 15 {
            prop_assert_eq!(out.result, Err(ParseError::Malformed));
        } else {
            prop_assert_eq!(out.result, Ok(Feed::More));
            prop_assert_eq!(out.body_bytes, 3);
        }
    }
}
