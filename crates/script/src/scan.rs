//! The static scan: what a script imports and uses, read before it runs,
//! so what throng does not provide is refused at its line, never a
//! silent no-op. Also what the VUs need: intrinsics, `__ENV` names.

use regex::Regex;

use crate::error::ScriptError;

/// What each k6 module provides here, and what k6 has that throng does not yet.
const MODULES: [(&str, &[&str]); 6] = [
    ("k6", &["check", "sleep", "group", "fail"]),
    (
        "k6/http",
        &[
            "request",
            "get",
            "head",
            "options",
            "post",
            "put",
            "patch",
            "del",
            "batch",
            "cookieJar",
            "expectedStatuses",
            "setResponseCallback",
            "Response",
        ],
    ),
    ("k6/encoding", &["b64encode", "b64decode"]),
    ("k6/metrics", &["Counter", "Gauge", "Rate", "Trend"]),
    ("k6/data", &["SharedArray"]),
    (
        "k6/crypto",
        &[
            "md5",
            "sha1",
            "sha256",
            "sha384",
            "sha512",
            "sha512_256",
            "hmac",
            "createHash",
            "createHMAC",
            "randomBytes",
        ],
    ),
];

/// What a file imports and needs.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Relative files it imports, with the place of each.
    pub(crate) files: Vec<(String, usize, usize)>,
    /// It imports `k6/crypto` (its VUs get the hash functions).
    pub(crate) crypto: bool,
    /// Files it reads with `open()`, with the place of each.
    pub(crate) opened: Vec<(String, usize, usize)>,
    pub(crate) full_intrinsics: bool,
    /// It writes a regular expression (a literal, or `RegExp`).
    pub(crate) regex: bool,
    /// `__ENV.NAME`s (None: `__ENV` read another way).
    pub(crate) env_names: Option<Vec<String>>,
}

/// Scans one file.
pub(crate) fn scan(file: &str, text: &str) -> Result<Found, ScriptError> {
    let code = blank_comments(text);
    let at = |offset: usize, message: String| {
        let (line, column) = line_col(text, offset);
        ScriptError::at(file, line, column, &message)
    };
    let mut found = Found::default();
    // Invariant: the patterns below are constant and valid.
    let import = Regex::new(
        r#"\bimport\s+(?:([\w$]+)\s*,?\s*)?(?:\*\s*as\s+([\w$]+)|\{([^}]*)\})?\s*from\s*['"]([^'"]+)['"]|\bimport\s*['"]([^'"]+)['"]"#,
    )
    .expect("valid pattern");
    for c in import.captures_iter(&code) {
        let spec = c.get(4).or_else(|| c.get(5)).expect("one of the alternatives matched");
        let name = spec.as_str();
        if name.starts_with("./") || name.starts_with("../") {
            found.files.push((
                name.to_string(),
                line_col(text, spec.start()).0,
                line_col(text, spec.start()).1,
            ));
            continue;
        }
        // SharedArray's reader is a Proxy.
        found.full_intrinsics |= name == "k6/data";
        found.crypto |= name == "k6/crypto";
        let Some((_, members)) = MODULES.iter().find(|(m, _)| *m == name) else {
            let why = if name.starts_with("http://") || name.starts_with("https://") {
                "remote modules are not fetched: save the file beside the script and import it as './name.js'"
                    .to_string()
            } else {
                format!(
                    "module '{name}' is not supported by throng yet (supported: {}, and relative files './name.js'); \
                     see the guide's \"Coming from k6\" for the surface",
                    MODULES.iter().map(|(m, _)| *m).collect::<Vec<_>>().join(", ")
                )
            };
            return Err(at(spec.start(), why));
        };
        if let Some(list) = c.get(3) {
            for item in list.as_str().split(',') {
                let imported = item.split_whitespace().next().unwrap_or("");
                if imported.is_empty() || imported == "default" {
                    continue;
                }
                if !members.contains(&imported) {
                    let offset = list.start() + item.as_ptr() as usize - list.as_str().as_ptr() as usize;
                    return Err(at(offset, refusal(name, imported, members)));
                }
            }
        }
        for local in [c.get(1), c.get(2)].into_iter().flatten() {
            let uses = Regex::new(&format!(
                r"(?:^|[^\w$.]){}\s*\.\s*([\w$]+)",
                regex::escape(local.as_str())
            ))
            .expect("an escaped name is a valid pattern");
            for u in uses.captures_iter(&code) {
                let m = u.get(1).expect("the group is not optional");
                if !members.contains(&m.as_str()) {
                    return Err(at(m.start(), refusal(name, m.as_str(), members)));
                }
            }
        }
    }
    let lifecycle = Regex::new(r"\bexport\s+(?:async\s+)?(?:function\s*\*?\s*|(?:const|let|var)\s+)(handleSummary)\b")
        .expect("valid pattern");
    if let Some(c) = lifecycle.captures(&code) {
        let m = c.get(1).expect("the group is not optional");
        return Err(at(
            m.start(),
            format!(
                "{}() is not supported by throng yet: the run would skip it; move its requests into the \
                 default function or remove it",
                m.as_str()
            ),
        ));
    }
    // open() reads a file named by a literal, read once at load: the
    // VUs are given its text, not a disk read each.
    let open = Regex::new(r"(?:^|[^\w$.])(open)\s*\(").expect("valid pattern");
    let literal = Regex::new(r#"^open\s*\(\s*(?:'([^'\\\n]+)'|"([^"\\\n]+)")\s*\)"#).expect("valid pattern");
    for c in open.captures_iter(&code) {
        let m = c.get(1).expect("the group is not optional");
        let Some(l) = literal.captures(&code[m.start()..]) else {
            return Err(at(
                m.start(),
                "open() takes one path written as a string literal ('./users.json'), which throng reads once \
                 before the run; binary mode ('b') is not supported"
                    .into(),
            ));
        };
        let path = l.get(1).or_else(|| l.get(2)).expect("one of the alternatives matched");
        let (line, column) = line_col(text, m.start());
        found.opened.push((path.as_str().to_string(), line, column));
    }
    found.full_intrinsics |= Regex::new(&format!(r"\b(Date|Map|Set|{FULL})\b|\d+n\b"))
        .expect("valid pattern")
        .is_match(&code);
    // k6/crypto's binary digests and random bytes are ArrayBuffers, whose
    // accessors come with the typed-array intrinsics.
    found.full_intrinsics |= found.crypto;
    found.regex = uses_regex(&code);
    let env_dot = Regex::new(r"\b__ENV\s*\.\s*([\w$]+)").expect("valid pattern");
    let names: Vec<String> = env_dot.captures_iter(&code).map(|c| c[1].to_string()).collect();
    let all = code.matches("__ENV").count();
    found.env_names = (all == names.len()).then_some(names);
    Ok(found)
}

fn refusal(module: &str, member: &str, members: &[&str]) -> String {
    format!(
        "'{member}' from '{module}' is not supported by throng yet (supported: {}); see the guide's \
         \"Coming from k6\"",
        members.join(", ")
    )
}

/// The text with its comments turned into spaces (line breaks kept, so
/// offsets and lines stay), strings and template literals kept.
fn blank_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            out.push(c);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == q || (c == b'\n' && q != b'`') {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            out.extend_from_slice(b"  ");
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                i += 1;
            }
            if i < b.len() {
                out.extend_from_slice(b"  ");
                i += 2;
            }
            continue;
        }
        if matches!(c, b'\'' | b'"' | b'`') {
            quote = Some(c);
        }
        out.push(c);
        i += 1;
    }
    // Only ASCII bytes were replaced, by ASCII: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Line and column (from 1, in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The built-ins beyond Date, Map and Set that only a full context has.
const FULL: &str =
    r"WeakMap|WeakSet|WeakRef|FinalizationRegistry|Proxy|BigInt|ArrayBuffer|DataView|[A-Z][a-z]*\d*Array|performance";

/// Whether `code` names a built-in only a full context has (typed arrays,
/// `Proxy`, `BigInt` or a BigInt literal…).
pub(crate) fn uses_full(code: &str) -> bool {
    Regex::new(&format!(r"\b({FULL})\b|\d+n\b"))
        .expect("valid pattern")
        .is_match(code)
}

/// Whether `code` writes a regular expression literal or names `RegExp`:
/// a `/` where an expression starts (at a line's start, after an operator,
/// an arrow, `return`, `typeof`, `case` or `yield`; not after a value, as a
/// division is) and not a comment.
pub(crate) fn uses_regex(code: &str) -> bool {
    Regex::new(r"(?m)(?:^|=>|[=(,:\[!&|?{};+\-*%<>~^]|\b(?:return|typeof|case|yield|in|of))\s*/[^/*\s]|\bRegExp\b")
        .expect("valid pattern")
        .is_match(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(src: &str) -> ScriptError {
        match scan("t.js", src) {
            Err(e) => e,
            Ok(f) => panic!("accepted: {f:?}"),
        }
    }

    #[test]
    fn unsupported_modules_and_members_are_refused_at_their_line() {
        let e = refused("import http from 'k6/http';\nimport ws from 'k6/ws';\n");
        assert_eq!((e.line, e.column), (2, 17), "{e}");
        assert!(e.message.contains("'k6/ws'"), "{e}");
        let e = refused("import http from 'k6/http';\nexport default function () {\n  http.file();\n}\n");
        assert_eq!((e.line, e.column), (3, 8), "{e}");
        assert!(e.message.contains("'file' from 'k6/http'"), "{e}");
        let e = refused("import { check, randomSeed } from 'k6';\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("randomSeed"), "{e}");
        let e = refused("import x from 'https://jslib.k6.io/x.js';");
        assert!(e.message.contains("remote modules"), "{e}");
        let e = refused("\nexport function handleSummary() {}\n");
        assert_eq!((e.line, e.column), (2, 17), "{e}");
        let e = refused("const d = open(name);");
        assert!(e.message.contains("string literal"), "{e}");
        let e = refused("const d = open('./bin.dat', 'b');");
        assert!(e.message.contains("binary"), "{e}");
        let f = scan(
            "t.js",
            "const a = open('./users.json');\nconst b = open(\"data/x.csv\");\n",
        )
        .unwrap();
        assert_eq!(
            f.opened,
            [("./users.json".to_string(), 1, 11), ("data/x.csv".to_string(), 2, 11)]
        );
    }

    #[test]
    fn comments_hide_what_they_hold() {
        let f = scan(
            "t.js",
            "// import ws from 'k6/ws';\n/* http.batch() */\nimport http from 'k6/http';\nhttp.get('x');\n",
        )
        .unwrap();
        assert!(f.files.is_empty());
        assert!(!f.full_intrinsics);
    }

    #[test]
    fn env_names_and_intrinsics_are_found() {
        let f = scan(
            "t.js",
            "const a = __ENV.BASE; const b = __ENV.TOKEN; const d = new Date();",
        )
        .unwrap();
        assert_eq!(f.env_names, Some(vec!["BASE".to_string(), "TOKEN".to_string()]));
        assert!(f.full_intrinsics);
        assert!(!f.regex);
        assert!(scan("t.js", "const ok = /^a+$/.test(s);").unwrap().regex);
        assert!(
            scan("t.js", "check(r, { m: (r) => r.body.match(/id=(\\d+)/) });")
                .unwrap()
                .regex
        );
        for arrow in [
            "const ok = (s) => /^a+$/.test(s);",
            "const ok = s =>\n/^a+$/.test(s);",
            "function f(s) {\n  return s +\n    /x/.source;\n}",
            "switch (k) { case /a/.source: break; }",
        ] {
            assert!(scan("t.js", arrow).unwrap().regex, "{arrow}");
        }
        assert!(
            !scan("t.js", "const half = total / 2; const u = 'http://h/x';")
                .unwrap()
                .regex
        );
        let f = scan("t.js", "const k = 'X'; const a = __ENV[k];").unwrap();
        assert_eq!(f.env_names, None);
        let f = scan("t.js", "import { helper } from './lib/h.js';").unwrap();
        assert_eq!(f.files, vec![("./lib/h.js".to_string(), 1, 25)]);
    }
}
