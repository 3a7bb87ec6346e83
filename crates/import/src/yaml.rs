//! Writes a flow as a scenario file: one scenario of one VU and one
//! iteration (the recording as it happened), a comment per step saying where
//! it came from. Scalars are written plain where YAML reads them back as the
//! same string, double-quoted (JSON escapes) otherwise.

use std::fmt::Write as _;

use serde_json::Value;

use crate::Kind;
use crate::model::{Body, Capture, Flow, Step};

/// The scenario file for `flow`.
pub(crate) fn write(flow: &Flow, scenario: &str, kind: Kind, source: &str) -> String {
    let mut out = String::new();
    let target = flow.origin().map(|o| o.url()).unwrap_or_default();
    let _ = writeln!(
        out,
        "# Imported by `throng import {}` from {}.",
        kind.name(),
        one_line(source)
    );
    out.push_str("# One VU runs the requests once, in their order; change the executor to add load.\n");
    if !flow.notes.is_empty() {
        out.push_str("#\n");
        for n in &flow.notes {
            let _ = writeln!(out, "# {}", one_line(n));
        }
    }
    let _ = writeln!(out, "target: {}", scalar(&target));
    if flow.insecure && target.starts_with("https://") {
        out.push_str("tls:\n  insecure: true\n");
    }
    out.push_str("scenarios:\n");
    let _ = writeln!(out, "  {}:", key(scenario));
    out.push_str("    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n");
    let mut open: Vec<&str> = Vec::new();
    for step in &flow.steps {
        // Close the groups this step is not in, open the ones it enters.
        let same = open
            .iter()
            .zip(&step.groups)
            .take_while(|(a, b)| **a == b.as_str())
            .count();
        open.truncate(same);
        for g in &step.groups[same..] {
            let pad = "  ".repeat(3 + 2 * open.len());
            let _ = writeln!(out, "{pad}- group:\n{pad}    name: {}\n{pad}    flow:", scalar(g));
            open.push(g);
        }
        write_step(&mut out, step, open.len());
    }
    out
}

fn write_step(out: &mut String, s: &Step, depth: usize) {
    let pad = "  ".repeat(3 + 2 * depth);
    let pad = pad.as_str();
    let mut url = format!("{}{}", s.origin.url(), s.path);
    for (i, (k, v)) in s.query.iter().enumerate() {
        url.push(if i == 0 { '?' } else { '&' });
        let _ = write!(url, "{k}={v}");
    }
    let shown: String = url.chars().take(200).collect();
    let cut = if shown.len() < url.len() { "…" } else { "" };
    let _ = writeln!(
        out,
        "{pad}# {}: {} {shown}{cut}",
        one_line(&s.from),
        one_line(&s.method)
    );
    let _ = writeln!(out, "{pad}- request:");
    let pad = format!("{pad}    ");
    let pad = pad.as_str();
    if let Some(name) = &s.name {
        let _ = writeln!(out, "{pad}name: {}", scalar(name));
    }
    let _ = writeln!(out, "{pad}method: {}", scalar(&s.method));
    let _ = writeln!(
        out,
        "{pad}path: {}",
        scalar(if s.path.is_empty() { "/" } else { &s.path })
    );
    pairs(out, pad, "query", &s.query);
    pairs(out, pad, "headers", &s.headers);
    match &s.body {
        Body::None => {}
        Body::Json(v) => {
            let _ = writeln!(out, "{pad}json: {}", json(v));
        }
        Body::Form(f) => pairs(out, pad, "form", f),
        Body::Raw(text) => {
            let _ = writeln!(out, "{pad}body: {}", scalar(text));
        }
    }
    if let Some(status) = s.expect {
        let _ = writeln!(out, "{pad}expect: [{status}]");
    }
    if !s.capture.is_empty() {
        let _ = writeln!(out, "{pad}capture:");
        for (name, c) in &s.capture {
            let (kind, what) = match c {
                Capture::Json(p) => ("json", p),
                Capture::Header(h) => ("header", h),
            };
            let _ = writeln!(out, "{pad}  {}: {{ {kind}: {} }}", key(name), scalar(what));
        }
    }
}

fn pairs(out: &mut String, pad: &str, what: &str, list: &[(String, String)]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(out, "{pad}{what}:");
    for (k, v) in list {
        let _ = writeln!(out, "{pad}  {}: {}", key(k), scalar(v));
    }
}

/// A JSON value in YAML's flow style (JSON is YAML), strings as scalars.
fn json(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        Value::Array(items) => format!("[{}]", items.iter().map(json).collect::<Vec<_>>().join(", ")),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", quoted(k), json(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// A mapping key: plain when safe, quoted otherwise.
fn key(k: &str) -> String {
    scalar(k)
}

/// A string scalar YAML reads back unchanged.
pub(crate) fn scalar(s: &str) -> String {
    if plain_ok(s) { s.to_string() } else { quoted(s) }
}

/// Double-quoted with JSON's escapes (valid YAML double-quoted style).
fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// True when `s` written plain reads back as the same string: it starts with
/// a letter, digit, `/` or `_` and holds no character YAML gives a meaning
/// there, and is not a word YAML reads as a boolean, null or number.
fn plain_ok(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !(first.is_ascii_alphanumeric() || first == '/' || first == '_') {
        return false;
    }
    if s.ends_with(' ') || s.ends_with(':') || s.contains(": ") || s.contains(" #") {
        return false;
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " _-./:;=+,%@~()".contains(c))
    {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if ["true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"].contains(&lower.as_str()) {
        return false;
    }
    // Numbers (and things YAML 1.1 reads as numbers: 1_000, 0x1f, 1e3, 1:30).
    !(s.parse::<f64>().is_ok()
        || first.is_ascii_digit() && s.chars().all(|c| c.is_ascii_hexdigit() || "_.:xXoObB+-".contains(c)))
}

/// One line: control characters escaped (a comment cannot hold a newline).
fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_read_back_as_the_same_strings() {
        for s in ["/users/1", "GET", "application/json", "Bearer abc", "a_b-c.d"] {
            assert_eq!(scalar(s), s);
        }
        for s in [
            "",
            "true",
            "No",
            "null",
            "123",
            "1.5",
            "0x1F",
            "1e3",
            "{{token}}",
            "a: b",
            "x #y",
            "-x",
            "*x",
            "&a",
            "!t",
            "'q'",
            "\"q\"",
            "a\nb",
            "tab\there",
            "ünï",
            "%x",
            "@x",
            "1:30",
            "end:",
        ] {
            let q = scalar(s);
            assert!(q.starts_with('"'), "{s:?} written plain as {q}");
            assert_eq!(serde_json::from_str::<String>(&q).unwrap_or_default(), s);
        }
    }
}
