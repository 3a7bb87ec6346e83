//! Captures inferred from a recording: a value a response gave that a later
//! request sends becomes a capture on the step that got it and a
//! `{{variable}}` where it is sent — a token from a login, an id from a
//! create, a `Location`.
//!
//! A value counts only if the server said it first: one the flow had sent
//! before the response that holds it (an email typed into a form and echoed
//! back, `application/json`) is the user's, not the server's. Strings
//! shorter than [`MIN_TEXT`] are too likely to match by chance; whole
//! numbers of three digits or more match only as a whole path segment or
//! value.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::model::{Body, Capture, Flow, Step, json_strings, var_name};

/// The shortest string value looked for in later requests.
const MIN_TEXT: usize = 6;
/// Values a response may contribute at most (a large JSON listing is not
/// searched beyond it).
const MAX_VALUES: usize = 2_000;
/// Values looked for at once, the most recent kept.
const MAX_FOUND: usize = 10_000;
/// What is remembered of the requests sent, to tell the user's values from
/// the server's.
const MAX_SENT: usize = 16 * 1024 * 1024;
/// Names templates keep for themselves.
const BUILT_IN: &[&str] = &[
    "vu",
    "iter",
    "scenario",
    "uuid",
    "random_email",
    "now_ms",
    "random_int",
    "env",
];

/// A value a response gave.
struct Found {
    value: String,
    /// Only as a whole segment or value (a number).
    whole: bool,
    step: usize,
    capture: Capture,
    hint: String,
}

pub(crate) fn captures(flow: &mut Flow) {
    let mut found: Vec<Found> = Vec::new();
    // Everything sent so far, one text (values joined by NUL).
    let mut sent = String::new();
    let mut names: BTreeMap<(usize, String), String> = BTreeMap::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for j in 0..flow.steps.len() {
        // Longest first: a token is replaced before a shorter value inside it.
        let mut order: Vec<&Found> = found.iter().collect();
        order.sort_by_key(|f| std::cmp::Reverse(f.value.len()));
        for f in order {
            let key = (f.step, capture_key(&f.capture));
            let var = names.get(&key).cloned().unwrap_or_else(|| name_for(&f.hint, &taken));
            if replace(&mut flow.steps[j], f, &var) && !names.contains_key(&key) {
                taken.insert(var.clone());
                names.insert(key, var);
            }
        }
        if sent.len() < MAX_SENT {
            for v in values_sent(&flow.steps[j]) {
                sent.push_str(&v);
                sent.push('\0');
            }
        }
        let Some(r) = &flow.steps[j].response else {
            continue;
        };
        let mut from = Vec::new();
        if let Some(json) = &r.json {
            walk(json, &mut String::new(), &mut from);
        }
        for (name, v) in &r.headers {
            let n = name.to_ascii_lowercase();
            if (n == "location" || n == "etag" || n.starts_with("x-") || n.contains("token")) && v.len() >= MIN_TEXT {
                from.push((v.clone(), false, Capture::Header(name.clone()), n.replace('-', "_")));
            }
        }
        for (value, whole, capture, hint) in from.into_iter().take(MAX_VALUES) {
            if sent.contains(value.as_str()) {
                continue;
            }
            found.retain(|f| f.value != value);
            found.push(Found {
                value,
                whole,
                step: j,
                capture,
                hint,
            });
        }
        if found.len() > MAX_FOUND {
            // The oldest go first: a later request most likely sends a recent value.
            found.drain(..found.len() - MAX_FOUND);
        }
    }
    for ((step, key), var) in names {
        let capture = match key.split_once(':') {
            Some(("json", p)) => Capture::Json(p.to_string()),
            Some((_, h)) => Capture::Header(h.to_string()),
            None => continue,
        };
        flow.steps[step].capture.push((var, capture));
    }
}

fn capture_key(c: &Capture) -> String {
    match c {
        Capture::Json(p) => format!("json:{p}"),
        Capture::Header(h) => format!("header:{h}"),
    }
}

/// String and whole-number values of `v`, with their JSON pointers.
fn walk(v: &Value, pointer: &mut String, out: &mut Vec<(String, bool, Capture, String)>) {
    if out.len() >= MAX_VALUES {
        return;
    }
    let hint = || {
        pointer
            .rsplit('/')
            .find(|t| t.parse::<usize>().is_err())
            .unwrap_or("value")
            .to_string()
    };
    match v {
        Value::String(s) if s.chars().count() >= MIN_TEXT && !s.contains("{{") => {
            out.push((s.clone(), false, Capture::Json(pointer.clone()), hint()));
        }
        Value::Number(n) if n.as_u64().is_some_and(|n| n >= 100) => {
            out.push((n.to_string(), true, Capture::Json(pointer.clone()), hint()));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                walk(item, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                walk(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Everything step `s` sends, as text.
fn values_sent(s: &Step) -> Vec<String> {
    let mut out = vec![s.path.clone()];
    out.extend(s.query.iter().map(|(_, v)| v.clone()));
    out.extend(s.headers.iter().map(|(_, v)| v.clone()));
    match &s.body {
        Body::Json(v) => out.push(v.to_string()),
        Body::Form(f) => out.extend(f.iter().map(|(_, v)| v.clone())),
        Body::Raw(t) => out.push(t.clone()),
        Body::None => {}
    }
    out
}

/// Replaces `f`'s value in what step `s` sends by `{{var}}`; true if it
/// was there.
fn replace(s: &mut Step, f: &Found, var: &str) -> bool {
    let template = format!("{{{{{var}}}}}");
    let mut hit = false;
    let mut one = |text: &mut String, segments: bool| {
        if f.whole {
            if segments {
                let parts: Vec<String> = text
                    .split('/')
                    .map(|p| if p == f.value { template.clone() } else { p.to_string() })
                    .collect();
                let joined = parts.join("/");
                if joined != *text {
                    *text = joined;
                    hit = true;
                }
            } else if *text == f.value {
                text.clone_from(&template);
                hit = true;
            }
        } else if text.contains(f.value.as_str()) {
            *text = text.replace(f.value.as_str(), &template);
            hit = true;
        }
    };
    one(&mut s.path, true);
    for (_, v) in &mut s.query {
        one(v, false);
    }
    for (_, v) in &mut s.headers {
        one(v, false);
    }
    match &mut s.body {
        Body::Json(v) => json_strings(v, &mut |t| one(t, false)),
        Body::Form(fields) => {
            for (_, v) in fields {
                one(v, false);
            }
        }
        Body::Raw(t) => one(t, false),
        Body::None => {}
    }
    hit
}

/// A variable name from `hint` (a JSON key or header name) not yet taken:
/// letters, digits and `_`, not starting with a digit, not a built-in.
fn name_for(hint: &str, taken: &BTreeSet<String>) -> String {
    let mut base = var_name(hint);
    if BUILT_IN.contains(&base.as_str()) {
        base.push_str("_value");
    }
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{Origin, Response};

    fn step(path: &str, headers: &[(&str, &str)], body: Body, response: Option<Value>) -> Step {
        let origin = Origin {
            scheme: "http".into(),
            host: "h".into(),
            port: 80,
        };
        let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Step {
            response: response.map(|json| Response {
                status: 200,
                headers: Vec::new(),
                json: Some(json),
            }),
            ..Step::new(
                String::new(),
                origin,
                "GET".into(),
                path.into(),
                Vec::new(),
                headers,
                body,
            )
        }
    }

    #[test]
    fn a_token_and_an_id_the_server_gave_become_captures() {
        let mut flow = Flow {
            steps: vec![
                step(
                    "/login",
                    &[("Accept", "application/json")],
                    Body::Json(serde_json::json!({"email": "someone@example.test"})),
                    Some(
                        serde_json::json!({"access_token": "tok-0123456789", "email": "someone@example.test",
                        "kind": "application/json", "user": {"id": 4711}}),
                    ),
                ),
                step(
                    "/users/4711",
                    &[("Authorization", "Bearer tok-0123456789")],
                    Body::Json(serde_json::json!({"who": "someone@example.test"})),
                    None,
                ),
            ],
            ..Flow::default()
        };
        captures(&mut flow);
        assert_eq!(
            flow.steps[0].capture,
            [
                ("access_token".to_string(), Capture::Json("/access_token".into())),
                ("id".to_string(), Capture::Json("/user/id".into())),
            ]
        );
        let s = &flow.steps[1];
        assert_eq!(s.path, "/users/{{id}}");
        assert_eq!(s.headers[0].1, "Bearer {{access_token}}");
        // Sent before the server said it: the user's own value stays.
        assert_eq!(s.body, Body::Json(serde_json::json!({"who": "someone@example.test"})));
    }

    #[test]
    fn names_are_valid_and_distinct() {
        let taken: BTreeSet<String> = ["id".to_string()].into();
        assert_eq!(name_for("id", &taken), "id_2");
        assert_eq!(name_for("x-csrf-token", &taken), "x_csrf_token");
        assert_eq!(name_for("9lives", &taken), "v_9lives");
        assert_eq!(name_for("uuid", &taken), "uuid_value");
    }
}
