//! Several targets in one `throng http` run: URLs on the command line or a
//! `--targets` file, `--body-lines` bodies, and the table of pre-rendered
//! requests the engine picks from by index.
//!
//! ```text
//!  --targets FILE ──parse_targets_file──► RawTarget … ─┐
//!  URL URL …      ─────────────────────► RawTarget … ─┼─► HttpPlan::from_args ─► Requests (one buffer,
//!  --body-lines FILE ──split_body_lines──► bodies  ────┘        every request rendered once, by index)
//! ```
//!
//! A targets file is one of:
//! - a list of URLs, one per line (each a GET, or `-m`'s method);
//! - vegeta's `http` format: `METHOD URL`, then `Name: value` header lines
//!   and an optional `@path` body line, targets apart by blank lines;
//! - vegeta's `json` format: one object per line, `{"method", "url",
//!   "header": {"Name": ["value", …]}, "body": "BASE64"}`.
//!
//! Lines starting with `#` are comments in the first two.

use std::ops::Range;

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::PlanError;

/// Targets one run may have (a file with more is refused).
pub const MAX_TARGETS: usize = 100_000;
/// The largest `--targets` or `--body-lines` file read (64 MiB).
pub const MAX_TARGETS_FILE_BYTES: u64 = 64 << 20;
/// The longest URL accepted (64 KiB). Servers commonly refuse request
/// lines past 8 KiB (414); past this it is almost always a mistake.
pub const MAX_URL_BYTES: usize = 64 << 10;
/// Bodies a `--body-lines` file may hold (lines past it are refused).
pub const MAX_BODY_LINES: usize = 1_000_000;
/// The rendered requests of a run, heads and bodies, in all (256 MiB):
/// every request is rendered once before the run, so this bounds memory.
pub const MAX_REQUEST_TABLE_BYTES: usize = 256 << 20;
/// Targets whose figures are kept each under its own `target:` tag: each
/// costs a few histograms per worker (about 50 KB), so a run with more
/// keeps the figures of all its requests only.
pub const MAX_TAGGED_TARGETS: usize = 256;
/// A target's name in reports and `target:` tags is cut to this many
/// characters.
const MAX_NAME_CHARS: usize = 80;

/// A target as written (command line or file), before validation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawTarget {
    /// Where it was written, for errors: `URL 2`, `targets.txt:7`.
    pub at: String,
    /// Its method (None: `-m`, or GET/POST).
    pub method: Option<String>,
    /// The URL.
    pub url: String,
    /// Its own headers, `Name: value`, added to (or replacing) `-H`'s.
    pub headers: Vec<String>,
    /// Its own body: where from (a path, or `json`) and the bytes.
    pub body: Option<(String, Vec<u8>)>,
}

/// How each request picks its target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetOrder {
    /// Each worker thread keeps one place in the list, shared by its
    /// connections: its requests, in the order they start, take the targets
    /// in turn (worker i starts at target i·T/workers).
    #[default]
    RoundRobin,
    /// Each connection keeps its own place and walks the list from the
    /// first target, as a user going through pages would.
    Sequential,
    /// Each request picks a target at random (uniform; seeded per worker).
    Random,
}

impl TargetOrder {
    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            TargetOrder::RoundRobin => "round-robin",
            TargetOrder::Sequential => "sequential",
            TargetOrder::Random => "random",
        }
    }
}

/// One target of a validated plan, as results keep it (its headers are not
/// kept: they may hold secrets).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// Its name in reports and `target:` tags.
    pub name: String,
    /// Method.
    pub method: String,
    /// URL as given.
    pub url: String,
    /// Body size.
    pub body_bytes: u64,
}

/// Every request a run sends, rendered once into one buffer; the engine
/// picks the next by index, so choosing a target costs no allocation.
#[derive(Clone, Default)]
pub struct Requests {
    bytes: Bytes,
    /// Entry i is `bytes[ends[i-1]..ends[i]]`.
    ends: Vec<usize>,
    /// The target of each entry (empty: entry i is target i).
    target_of: Vec<u32>,
    /// The origin (index into `origins`) of each target.
    origin_of: Vec<u32>,
    /// One target per origin (host and port) when there are several.
    pub(crate) origins: Vec<crate::endpoint::Target>,
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Requests({} entries, {} bytes)", self.ends.len(), self.bytes.len())
    }
}

impl Requests {
    /// Entries (at least 1 in a validated plan).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no entry (a plan read back from a result file).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn range(&self, i: usize) -> Range<usize> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        start..self.ends[i]
    }

    /// The bytes of entry `i` (`i < len()`).
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.range(i)]
    }

    /// Entry `i` as shared bytes.
    pub fn bytes(&self, i: usize) -> Bytes {
        self.bytes.slice(self.range(i))
    }

    /// The target (index into the plan's targets) of entry `i`.
    #[inline]
    pub fn target(&self, i: usize) -> usize {
        self.target_of.get(i).map_or(i, |&t| t as usize)
    }

    /// Origins (host and port) the targets are on: 1, or more.
    pub fn origin_count(&self) -> usize {
        self.origins.len().max(1)
    }

    /// The origin of entry `i` (0 when there is one).
    #[inline]
    pub fn origin(&self, i: usize) -> usize {
        self.origin_of.get(self.target(i)).map_or(0, |&o| o as usize)
    }

    /// A table being built, refused past [`MAX_REQUEST_TABLE_BYTES`].
    pub(crate) fn builder() -> RequestsBuilder {
        RequestsBuilder::default()
    }
}

/// Builds a [`Requests`] table.
#[derive(Default)]
pub(crate) struct RequestsBuilder {
    buf: Vec<u8>,
    ends: Vec<usize>,
    target_of: Vec<u32>,
    origin_of: Vec<u32>,
}

impl RequestsBuilder {
    /// The next target is on origin `o`.
    pub(crate) fn origin(&mut self, o: usize) {
        self.origin_of.push(u32::try_from(o).unwrap_or(u32::MAX));
    }

    /// Appends one request (`write` renders it), of target `target`;
    /// false when the table would pass its limit.
    pub(crate) fn push(&mut self, target: usize, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        write(&mut self.buf);
        self.ends.push(self.buf.len());
        self.target_of.push(u32::try_from(target).unwrap_or(u32::MAX));
        self.buf.len() <= MAX_REQUEST_TABLE_BYTES
    }

    pub(crate) fn finish(self) -> Requests {
        // Entry i being target i needs no map.
        let identity = self.target_of.iter().enumerate().all(|(i, &t)| t as usize == i);
        Requests {
            bytes: Bytes::from(self.buf),
            ends: self.ends,
            target_of: if identity { Vec::new() } else { self.target_of },
            origin_of: self.origin_of,
            origins: Vec::new(),
        }
    }
}

/// Why the caller could not read an `@path` body file of a targets file.
pub type BodyReadError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Parses a `--targets` file named `name` (for errors) whose contents are
/// `text`; `read` reads an `@path` body file of the http format (the
/// caller resolves the path and bounds the size; its error, whatever its
/// type, is said after the file and line). JSON lines are told by
/// the first line that is not blank or a comment starting with `{`.
pub fn parse_targets_file(
    name: &str,
    text: &str,
    read: &mut dyn FnMut(&str) -> Result<Vec<u8>, BodyReadError>,
) -> Result<Vec<RawTarget>, PlanError> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    let targets = match first {
        None => {
            return Err(PlanError::invalid(
                "--targets",
                format!("{name} has no targets; write one URL per line, e.g. http://127.0.0.1:8080/a"),
            ));
        }
        Some(l) if l.starts_with('{') => parse_json_lines(name, text)?,
        Some(_) => parse_http_format(name, text, read)?,
    };
    Ok(targets)
}

fn bad(name: &str, line: usize, why: impl std::fmt::Display) -> PlanError {
    PlanError::invalid("--targets", format!("{name}:{line}: {why}"))
}

fn too_many(name: &str, line: usize) -> PlanError {
    bad(
        name,
        line,
        format!("more than {MAX_TARGETS} targets; split the file and run one throng per part"),
    )
}

/// The JSON lines format (vegeta's `-format=json`).
fn parse_json_lines(name: &str, text: &str) -> Result<Vec<RawTarget>, PlanError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line {
        method: String,
        url: String,
        #[serde(default)]
        header: std::collections::BTreeMap<String, Vec<String>>,
        #[serde(default)]
        body: Option<String>,
    }
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        if out.len() == MAX_TARGETS {
            return Err(too_many(name, n));
        }
        let line: Line = serde_json::from_str(l).map_err(|e| {
            bad(
                name,
                n,
                format!(
                    "not a target ({e}); write one JSON object per line, e.g. \
                     {{\"method\":\"GET\",\"url\":\"http://127.0.0.1:8080/\",\"header\":{{\"Accept\":[\"*/*\"]}}}}"
                ),
            )
        })?;
        let body = match line.body {
            None => None,
            Some(b) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b.as_bytes())
                    .map_err(|e| bad(name, n, format!("body is not base64 ({e}); encode it as vegeta does")))?;
                Some((format!("{name}:{n}"), bytes))
            }
        };
        out.push(RawTarget {
            at: format!("{name}:{n}"),
            method: Some(line.method),
            url: line.url,
            headers: line
                .header
                .into_iter()
                .flat_map(|(k, vs)| vs.into_iter().map(move |v| format!("{k}: {v}")))
                .collect(),
            body,
        });
    }
    Ok(out)
}

/// A request line: `METHOD URL`, or a URL alone.
fn request_line(l: &str) -> Option<(Option<&str>, &str)> {
    let is_url = |u: &str| u.contains("://") && !u.contains(char::is_whitespace);
    if is_url(l) {
        return Some((None, l));
    }
    let (m, u) = l.split_once([' ', '\t'])?;
    let u = u.trim();
    (!m.is_empty() && m.bytes().all(crate::head::is_token) && is_url(u)).then_some((Some(m), u))
}

/// vegeta's `http` format (which a plain list of URLs also is).
fn parse_http_format(
    name: &str,
    text: &str,
    read: &mut dyn FnMut(&str) -> Result<Vec<u8>, BodyReadError>,
) -> Result<Vec<RawTarget>, PlanError> {
    let mut out: Vec<RawTarget> = Vec::new();
    // Whether the last target may still take headers and a body.
    let mut open = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let l = raw.trim();
        if l.is_empty() {
            open = false;
            continue;
        }
        if l.starts_with('#') {
            continue;
        }
        if let Some((method, url)) = request_line(l) {
            if out.len() == MAX_TARGETS {
                return Err(too_many(name, n));
            }
            out.push(RawTarget {
                at: format!("{name}:{n}"),
                method: method.map(str::to_string),
                url: url.to_string(),
                ..RawTarget::default()
            });
            open = true;
            continue;
        }
        let Some(t) = out.last_mut().filter(|_| open) else {
            return Err(bad(
                name,
                n,
                format!(
                    "'{}' is not a target; a target is a URL or 'METHOD URL' (e.g. GET http://127.0.0.1:8080/), \
                     followed by its header lines and an optional @body-file line",
                    shorten(l)
                ),
            ));
        };
        if let Some(path) = l.strip_prefix('@') {
            if t.body.is_some() {
                return Err(bad(name, n, "a second @body line; a target has at most one body file"));
            }
            let bytes = read(path.trim()).map_err(|e| bad(name, n, e))?;
            t.body = Some((path.trim().to_string(), bytes));
        } else if l.contains(':') {
            t.headers.push(l.to_string());
        } else {
            return Err(bad(
                name,
                n,
                format!(
                    "'{}' is neither a header ('Name: value') nor a body (@file) of the target above",
                    shorten(l)
                ),
            ));
        }
    }
    Ok(out)
}

/// `text` cut for an error message.
fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(MAX_NAME_CHARS).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}

/// The bodies of a `--body-lines` file: one per line (`\n` or `\r\n`),
/// blank lines skipped. `name` is for errors.
pub fn split_body_lines(name: &str, bytes: &[u8]) -> Result<Vec<Range<usize>>, PlanError> {
    let mut out = Vec::new();
    let mut start = 0;
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let end = start + line.len();
        let range = start..end - usize::from(line.ends_with(b"\r"));
        start = end + 1;
        if range.is_empty() {
            continue;
        }
        if out.len() == MAX_BODY_LINES {
            return Err(PlanError::invalid(
                "--body-lines",
                format!(
                    "{name}:{}: more than {MAX_BODY_LINES} bodies; use fewer lines (each request's bytes are \
                     rendered once before the run)",
                    n + 1
                ),
            ));
        }
        out.push(range);
    }
    if out.is_empty() {
        return Err(PlanError::invalid(
            "--body-lines",
            format!("{name} has no bodies; write one request body per line"),
        ));
    }
    Ok(out)
}

/// Names for `targets` in reports and `target:` tags: the path (or the
/// URL, when they are not all on one origin), with the method in front
/// when the methods differ, cut to a readable length; a name two targets
/// would share gets ` #N` (the target's number).
pub(crate) fn names(targets: &[(String, crate::endpoint::Target)]) -> Vec<String> {
    let one_origin = targets.windows(2).all(|w| {
        let (a, b) = (&w[0].1, &w[1].1);
        (a.scheme, &a.host, a.port) == (b.scheme, &b.host, b.port)
    });
    let one_method = targets.windows(2).all(|w| w[0].0 == w[1].0);
    let mut names: Vec<String> = targets
        .iter()
        .map(|(method, t)| {
            let what = if one_origin { &t.path } else { &t.url };
            let what = shorten(what);
            if one_method { what } else { format!("{method} {what}") }
        })
        .collect();
    // Counted in one pass: a file of 100,000 targets stays linear.
    let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::with_capacity(names.len());
    for n in &names {
        *seen.entry(n.as_str()).or_default() += 1;
    }
    let dup: Vec<bool> = names
        .iter()
        .map(|n| seen.get(n.as_str()).copied().unwrap_or(0) > 1)
        .collect();
    drop(seen);
    for (i, n) in names.iter_mut().enumerate() {
        if dup[i] {
            n.push_str(&format!(" #{}", i + 1));
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(p: &str) -> Result<Vec<u8>, BodyReadError> {
        Err(format!("no file {p}").into())
    }

    fn message(e: PlanError) -> String {
        e.to_string()
    }

    #[test]
    fn a_list_of_urls_and_the_http_format() {
        let text = "# comment\nhttp://h/a\nhttp://h/b\n\nPOST http://h/c\nX-A: 1\nContent-Type: text/plain\n@b.txt\n\n\
                    DELETE http://h/d\n";
        let mut read = |p: &str| Ok(format!("body of {p}").into_bytes());
        let t = parse_targets_file("t.txt", text, &mut read).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!((t[0].method.as_deref(), t[0].url.as_str()), (None, "http://h/a"));
        assert_eq!(t[1].at, "t.txt:3");
        assert_eq!(t[2].method.as_deref(), Some("POST"));
        assert_eq!(t[2].headers, ["X-A: 1", "Content-Type: text/plain"]);
        assert_eq!(t[2].body, Some(("b.txt".into(), b"body of b.txt".to_vec())));
        assert_eq!((t[3].method.as_deref(), t[3].at.as_str()), (Some("DELETE"), "t.txt:10"));
    }

    #[test]
    fn json_lines_as_vegeta_writes_them() {
        let text = "{\"method\":\"POST\",\"url\":\"http://h/p\",\"header\":{\"X-A\":[\"1\",\"2\"]},\"body\":\"aGVsbG8=\"}\n\
                    \n{\"method\":\"GET\",\"url\":\"http://h/g\"}\n";
        let t = parse_targets_file("t.json", text, &mut no_files).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].headers, ["X-A: 1", "X-A: 2"]);
        assert_eq!(t[0].body.as_ref().unwrap().1, b"hello");
        assert_eq!(t[1].at, "t.json:3");
        let e = message(parse_targets_file("t.json", "{\"method\":\"GET\"}\n", &mut no_files).unwrap_err());
        assert!(e.starts_with("--targets: t.json:1: not a target"), "{e}");
        let e = message(
            parse_targets_file(
                "t.json",
                "{\"method\":\"GET\",\"url\":\"http://h/\"}\n{\"method\":\"GET\",\"url\":\"http://h/\",\"body\":\"!!\"}",
                &mut no_files,
            )
            .unwrap_err(),
        );
        assert!(e.contains("t.json:2: body is not base64"), "{e}");
    }

    #[test]
    fn bad_lines_are_reported_with_file_and_line() {
        for (text, want) in [
            (
                "http://h/a\nnot a target at all\n",
                "t:2: 'not a target at all' is neither",
            ),
            ("X-A: 1\n", "t:1: 'X-A: 1' is not a target"),
            ("http://h/a\n\nX-A: 1\n", "t:3: 'X-A: 1' is not a target"),
            ("GET http://h/a\n@a\n@b\n", "t:3: a second @body line"),
            ("GET http://h/a\n@missing\n", "t:2: no file missing"),
            ("\n# only comments\n", "t has no targets"),
        ] {
            let mut read = |p: &str| if p == "missing" { no_files(p) } else { Ok(Vec::new()) };
            let e = message(parse_targets_file("t", text, &mut read).unwrap_err());
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_huge_file_is_refused_at_the_target_limit() {
        let text = "http://h/\n".repeat(MAX_TARGETS + 1);
        let e = message(parse_targets_file("big", &text, &mut no_files).unwrap_err());
        assert!(
            e.contains(&format!("big:{}: more than {MAX_TARGETS} targets", MAX_TARGETS + 1)),
            "{e}"
        );
    }

    #[test]
    fn names_of_many_targets_are_made_in_linear_time() {
        let t = crate::endpoint::Target {
            url: "http://h/same".into(),
            scheme: crate::endpoint::Scheme::Http,
            host: "h".into(),
            port: 80,
            path: "/same".into(),
        };
        let many: Vec<(String, crate::endpoint::Target)> =
            (0..MAX_TARGETS).map(|_| ("GET".into(), t.clone())).collect();
        let n = names(&many);
        assert_eq!(
            (n[0].as_str(), n[MAX_TARGETS - 1].as_str()),
            ("/same #1", "/same #100000")
        );
    }

    #[test]
    fn body_lines_split_and_bound() {
        let b = b"a\r\n\nbb\nccc";
        let r = split_body_lines("l", b).unwrap();
        let got: Vec<&[u8]> = r.iter().map(|r| &b[r.clone()]).collect();
        assert_eq!(got, [&b"a"[..], b"bb", b"ccc"]);
        assert!(split_body_lines("l", b"\n\n").is_err());
        let many = "x\n".repeat(MAX_BODY_LINES + 1);
        let e = message(split_body_lines("l", many.as_bytes()).unwrap_err());
        assert!(e.contains(&format!("l:{}: more than", MAX_BODY_LINES + 1)), "{e}");
    }
}
