//! A flow's steps and a `request:`: method, URL, headers, body (JSON
//! templates), captures and checks.

use super::*;

impl Validator<'_> {
    pub(super) fn flow(&self, key: &str, steps: Vec<RawStep>, defaults: &Defaults) -> Result<Vec<Step>, ScenarioError> {
        let mut out = Vec::new();
        for mut st in steps {
            if let Some(step) = self.control(key, &mut st, defaults)? {
                out.push(step);
                continue;
            }
            if let Some(step) = self.js(key, &mut st)? {
                out.push(step);
                continue;
            }
            let many =
                "each step is exactly one of request:, sse:, grpc:, websocket:, mqtt:, think: or group:, or an add:";
            if let Some(a) = st.add.take() {
                if st.request.is_some()
                    || st.think.is_some()
                    || st.group.is_some()
                    || st.websocket.is_some()
                    || st.sse.is_some()
                    || st.mqtt.is_some()
                    || st.grpc.is_some()
                {
                    return Err(self.err(&[self.root.get(), key, "add:"], many));
                }
                out.push(Step::Add(Box::new(self.add(key, a)?)));
                continue;
            }
            if let Some(g) = st.grpc.take() {
                if st.request.is_some()
                    || st.think.is_some()
                    || st.group.is_some()
                    || st.websocket.is_some()
                    || st.sse.is_some()
                    || st.mqtt.is_some()
                {
                    return Err(self.err(&[self.root.get(), key, "grpc:"], many));
                }
                out.push(Step::Grpc(Box::new(self.grpc(key, g, defaults)?)));
                continue;
            }
            if let Some(m) = st.mqtt.take() {
                if st.request.is_some() || st.think.is_some() || st.group.is_some() || st.websocket.is_some() {
                    return Err(self.err(&[self.root.get(), key, "mqtt:"], many));
                }
                out.push(Step::Mqtt(Box::new(self.mqtt(key, m, defaults)?)));
                continue;
            }
            if let Some(w) = st.websocket.take() {
                if st.request.is_some() || st.think.is_some() || st.group.is_some() || st.sse.is_some() {
                    return Err(self.err(&[self.root.get(), key, "websocket:"], many));
                }
                out.push(Step::WebSocket(Box::new(self.websocket(key, w, defaults)?)));
                continue;
            }
            if let Some(s) = st.sse.take() {
                if st.request.is_some() || st.think.is_some() || st.group.is_some() {
                    return Err(self.err(&[self.root.get(), key, "sse:"], many));
                }
                out.push(Step::Request(Box::new(self.sse(key, s, defaults)?)));
                continue;
            }
            let step = match (st.request, st.think, st.group) {
                (Some(r), None, None) => Step::Request(Box::new(self.request(key, r, defaults)?)),
                (None, Some(t), None) => Step::Think(match t {
                    RawThink::Fixed(d) => Think::Fixed(d.0),
                    RawThink::Range(RawThinkRange { min, max }) => {
                        if max.0 < min.0 {
                            return Err(self.err(&[self.root.get(), key, "think:"], "think: min is above max"));
                        }
                        Think::Range(min.0, max.0)
                    }
                }),
                (None, None, Some(g)) => Step::Group {
                    flow: self.flow(key, g.flow, defaults)?,
                    name: g.name,
                },
                _ => {
                    // A setup:/teardown: list has no flow: key of its own.
                    let flow_key = if self.root.get() == "scenarios:" { "flow:" } else { key };
                    return Err(self.err(
                        &[self.root.get(), key, flow_key],
                        "each step is exactly one of request:, sse:, grpc:, websocket:, mqtt:, think: or group:, or an add:",
                    ));
                }
            };
            out.push(step);
        }
        Ok(out)
    }

    pub(super) fn request(&self, key: &str, r: RawRequest, defaults: &Defaults) -> Result<Request, ScenarioError> {
        let at = |f: &str| [self.root.get().to_string(), key.to_string(), f.to_string()];
        let path_at = at(&format!("path: {}", r.path));
        let here: Vec<&str> = path_at.iter().map(String::as_str).collect();
        let method = match &r.method {
            Some(m) => method(m).map_err(|e| {
                let written = format!("method: {m}");
                self.err_first(
                    &[
                        &[&here[..2], &[&written]].concat(),
                        &[&here[..], &["method:"]].concat(),
                        &here,
                    ],
                    e.to_string(),
                )
            })?,
            None if r.json.is_some() || r.form.is_some() || r.body.is_some() => "POST".to_string(),
            None => "GET".to_string(),
        };
        if !r.path.starts_with('/') && !r.path.starts_with("{{") {
            return Err(self.err(&here, format!("path '{}' must start with /", r.path)));
        }
        let scalar = |v: &serde_yaml_ng::Value| -> Option<String> {
            match v {
                serde_yaml_ng::Value::String(s) => Some(s.clone()),
                serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
                serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
                _ => None,
            }
        };
        let pairs = |m: &BTreeMap<String, serde_yaml_ng::Value>,
                     what: &str|
         -> Result<Vec<(String, Template)>, ScenarioError> {
            m.iter()
                .map(|(k, v)| {
                    let text =
                        scalar(v).ok_or_else(|| self.err(&here, format!("{what} '{k}' must be a string or number")))?;
                    Ok((k.clone(), self.template(&here, &text)?))
                })
                .collect()
        };
        let body = match (r.json, r.form, r.body) {
            (Some(j), None, None) => Body::Json(self.json(&here, j)?),
            (None, Some(f), None) => Body::Form(pairs(&f, "form field")?),
            (None, None, Some(b)) => Body::Raw(self.template(&here, &b)?),
            (None, None, None) => Body::None,
            _ => return Err(self.err(&here, "give one of json:, form: or body:")),
        };
        let (captures, checks) = self.captures_and_checks(&here, r.capture, r.check)?;
        let name = r.name.unwrap_or_else(|| format!("{method} {}", r.path));
        let (http, http_at) = match &r.http {
            Some(v) => {
                let (line, column) = self.request_http_at(&here);
                let version = self
                    .http_version(&here, v)
                    .map_err(|e| ScenarioError { line, column, ..e })?;
                (Some(version), format!("{}:{line}:{column}", self.file))
            }
            None => (None, String::new()),
        };
        Ok(Request {
            http,
            http_at,
            sse: None,
            path: self.template(&here, &r.path)?,
            query: pairs(&r.query, "query parameter")?,
            headers: r
                .headers
                .iter()
                .map(|(k, v)| self.header(&here, k, v))
                .collect::<Result<_, ScenarioError>>()?,
            body,
            expect: match &r.expect {
                Some(e) => self.statuses(&[&here[..], &["expect:"]].concat(), e)?,
                None => defaults.expect,
            },
            captures,
            checks,
            timeout: r.timeout.map_or(defaults.timeout, |d| d.0),
            max_body: r.max_body.map_or(defaults.max_body, |m| m.0),
            redirects: match r.redirects {
                Some(n) => self.redirects(&[&here[..], &[&format!("redirects: {n}")]].concat(), n)?,
                None => defaults.redirects,
            },
            name,
            method,
        })
    }

    /// Line and column of a request's `http:` (`here` is its path): on the
    /// path's own line when the request is a flow mapping, else on a line
    /// after it (its path's when it cannot be found).
    fn request_http_at(&self, here: &[&str]) -> (usize, usize) {
        let (line, column, found) = self.locate(here);
        let on_path_line = self
            .text
            .lines()
            .nth(line.saturating_sub(1))
            .and_then(|l| l.find("http:").map(|c| l[..c].chars().count() + 1));
        match (found, on_path_line) {
            (true, Some(c)) => (line, c),
            _ => match self.locate(&[here, &["http:"]].concat()) {
                (l, c, true) => (l, c),
                _ => (line, column),
            },
        }
    }

    /// A step's `capture:` and `check:` (request and grpc steps write them
    /// alike), at `here`.
    pub(super) fn captures_and_checks(
        &self,
        here: &[&str],
        capture: BTreeMap<String, RawCapture>,
        check: BTreeMap<String, RawCheck>,
    ) -> Result<(Vec<Capture>, Vec<Check>), ScenarioError> {
        let mut captures = Vec::new();
        for (var, c) in capture {
            let at = self.key_path(&[here, &["capture:"]].concat(), &var);
            if !is_identifier(&var) {
                let suggestion: String = var
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                let suggestion = if suggestion.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("_{suggestion}")
                } else {
                    suggestion
                };
                return Err(self.err(
                    &at,
                    format!(
                        "capture '{var}': a variable name is letters, digits and _, not starting with a digit, e.g. {suggestion}"
                    ),
                ));
            }
            if RESERVED.contains(&var.as_str()) {
                return Err(self.err(
                    &at,
                    format!(
                        "capture '{var}': {{{{{var}}}}} is built in ({}); give the variable another name, e.g. my_{var}",
                        RESERVED.join(", ")
                    ),
                ));
            }
            let from = match (c.json, c.header, c.regex) {
                (Some(p), None, None) => {
                    json_pointer(&p).map_err(|e| self.err(&at, format!("capture {var}: {e}")))?;
                    CaptureFrom::Json(p)
                }
                (None, Some(h), None) => CaptureFrom::Header(h),
                (None, None, Some(re)) => CaptureFrom::Regex(
                    regex::Regex::new(&re).map_err(|e| self.err(&at, format!("capture {var}: regex: {e}")))?,
                ),
                _ => {
                    return Err(self.err(
                        &at,
                        format!("capture {var}: give exactly one of json:, header: or regex:"),
                    ));
                }
            };
            captures.push(Capture { var, from });
        }
        let mut checks = Vec::new();
        for (name, c) in check {
            let at = self.key_path(&[here, &["check:"]].concat(), &name);
            let bad = |m: String| self.err(&at, format!("check '{name}': {m}"));
            // One kind, and only that kind's modifiers: a modifier on another
            // kind would be read and ignored, and the check pass regardless.
            let kinds = [
                ("status:", c.status.is_some()),
                ("body_contains:", c.body_contains.is_some()),
                ("json:", c.json.is_some()),
                ("header:", c.header.is_some()),
                ("duration_under:", c.duration_under.is_some()),
                ("expr:", c.expr.is_some()),
            ];
            let given: Vec<&str> = kinds.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect();
            const KINDS: &str = "status:, body_contains:, json: (with equals: or exists:), header: (with contains:), \
                                 duration_under: or expr:";
            let kind = match given.as_slice() {
                [] => return Err(bad(format!("give one of {KINDS}"))),
                [kind] => *kind,
                several => {
                    return Err(bad(format!(
                        "it has {}; give only one of {KINDS}",
                        several.join(" and ")
                    )));
                }
            };
            for (modifier, set, belongs) in [
                ("equals:", c.equals.is_some(), "json:"),
                ("exists:", c.exists.is_some(), "json:"),
                ("contains:", c.contains.is_some(), "header:"),
            ] {
                if set && kind != belongs {
                    return Err(bad(format!(
                        "{modifier} goes with {belongs}, not with {kind}; \
                         e.g. {{ json: /state, equals: active }} or {{ header: Content-Type, contains: json }}"
                    )));
                }
            }
            let kind = match c {
                RawCheck { status: Some(s), .. } => {
                    if s.is_empty() {
                        return Err(bad("status: is empty; list the codes that pass, e.g. [200]".into()));
                    }
                    if let Some(code) = s.iter().find(|c| !(100..=599).contains(*c)) {
                        return Err(bad(format!("status {code}: codes run from 100 to 599")));
                    }
                    CheckKind::Status(s)
                }
                RawCheck {
                    body_contains: Some(t), ..
                } => CheckKind::BodyContains(t),
                RawCheck {
                    json: Some(p),
                    equals,
                    exists,
                    ..
                } => {
                    json_pointer(&p).map_err(|e| bad(e.to_string()))?;
                    match (equals, exists) {
                        (Some(v), None) => {
                            CheckKind::JsonEquals(p, serde_json::to_value(&v).map_err(|e| bad(e.to_string()))?)
                        }
                        (None, Some(true) | None) => CheckKind::JsonExists(p),
                        _ => return Err(bad("json takes equals: VALUE or exists: true".into())),
                    }
                }
                RawCheck {
                    header: Some(h),
                    contains,
                    ..
                } => CheckKind::Header(h, contains),
                RawCheck {
                    duration_under: Some(d),
                    ..
                } => CheckKind::DurationUnder(d.0),
                RawCheck { expr: Some(text), .. } => CheckKind::Expr(Condition::parse(&text).map_err(|e| {
                    bad(format!(
                        "expr '{text}': at column {} of the expression: {}",
                        e.col, e.msg
                    ))
                })?),
                // The kinds were counted above: exactly one is set.
                _ => return Err(bad(format!("give one of {KINDS}"))),
            };
            checks.push(Check { name, kind });
        }
        Ok((captures, checks))
    }

    pub(super) fn json(&self, here: &[&str], v: serde_yaml_ng::Value) -> Result<JsonTemplate, ScenarioError> {
        use serde_yaml_ng::Value as Y;
        if let Some(var) = unquoted_template(&v) {
            return Err(self.err_at_use(
                here,
                &var,
                format!(
                    "{{{{{var}}}}} is not in quotes, so YAML reads it as a mapping and the body would send an \
                     object; write it as a string: \"{{{{{var}}}}}\""
                ),
            ));
        }
        Ok(match v {
            Y::String(s) => {
                let t = self.template(here, &s)?;
                if t.is_literal() {
                    JsonTemplate::Value(serde_json::Value::String(s))
                } else {
                    JsonTemplate::Text(t)
                }
            }
            Y::Sequence(items) => JsonTemplate::Array(
                items
                    .into_iter()
                    .map(|i| self.json(here, i))
                    .collect::<Result<_, _>>()?,
            ),
            Y::Mapping(m) => JsonTemplate::Object(
                m.into_iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Y::String(s) => s,
                            other => serde_yaml_ng::to_string(&other).unwrap_or_default().trim().to_string(),
                        };
                        Ok((key, self.json(here, v)?))
                    })
                    .collect::<Result<_, ScenarioError>>()?,
            ),
            other => JsonTemplate::Value(
                serde_json::to_value(&other).map_err(|e| self.err(here, format!("json body: {e}")))?,
            ),
        })
    }
}

/// The JSON of a body without templates; None when it has one.
pub(super) fn literal_json(j: &JsonTemplate) -> Option<serde_json::Value> {
    Some(match j {
        JsonTemplate::Value(v) => v.clone(),
        JsonTemplate::Text(_) => return None,
        JsonTemplate::Array(a) => serde_json::Value::Array(a.iter().map(literal_json).collect::<Option<_>>()?),
        JsonTemplate::Object(o) => serde_json::Value::Object(
            o.iter()
                .map(|(k, v)| Some((k.clone(), literal_json(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

/// The variable of `{{var}}` written without quotes: YAML reads it as a
/// flow mapping whose one key is the mapping `{var: null}`, with no value.
fn unquoted_template(v: &serde_yaml_ng::Value) -> Option<String> {
    use serde_yaml_ng::Value as Y;
    let Y::Mapping(outer) = v else { return None };
    let (Some((Y::Mapping(inner), Y::Null)), 1) = (outer.iter().next(), outer.len()) else {
        return None;
    };
    match (inner.iter().next(), inner.len()) {
        (Some((Y::String(var), Y::Null)), 1) => Some(var.trim().to_string()),
        _ => None,
    }
}

/// Methods whose names servers know in capitals only: written in any case,
/// sent in capitals.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// A method as written: a standard one in any case becomes its capitals
/// (`get` → `GET`); another token (`PURGE`, `PROPFIND`) is sent as written,
/// since methods are case-sensitive (RFC 9110 §9.1).
fn method(m: &str) -> Result<String, RequestFieldError> {
    if let Some(standard) = METHODS.iter().find(|s| s.eq_ignore_ascii_case(m)) {
        return Ok(standard.to_string());
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if m.len() > 64 {
        return Err(RequestFieldError::MethodLength { bytes: m.len() });
    }
    if m.is_empty() || !m.bytes().all(token) {
        return Err(RequestFieldError::Method { method: m.to_string() });
    }
    Ok(m.to_string())
}

/// Checks a JSON pointer (RFC 6901): empty (the whole document) or `/`
/// then keys separated by `/`, with `~0` for `~` and `~1` for `/` in a key.
pub(super) fn json_pointer(p: &str) -> Result<(), RequestFieldError> {
    if !p.is_empty() && !p.starts_with('/') {
        // `data.token`, `$.data.token`, `data[0].id`: a path as JSONPath or
        // k6's res.json() write it.
        let keys = p
            .trim_start_matches('$')
            .trim_start_matches('.')
            .replace('[', ".")
            .replace(']', "");
        let suggestion: String = keys
            .split('.')
            .filter(|k| !k.is_empty())
            .map(|k| format!("/{k}"))
            .collect();
        return Err(RequestFieldError::PointerStart {
            pointer: p.to_string(),
            suggestion: if suggestion.is_empty() {
                "/data/token".to_string()
            } else {
                suggestion
            },
        });
    }
    let mut rest = p;
    while let Some(i) = rest.find('~') {
        rest = &rest[i + 1..];
        if !rest.starts_with(['0', '1']) {
            return Err(RequestFieldError::PointerEscape { pointer: p.to_string() });
        }
    }
    Ok(())
}

/// Why a request's method or a JSON pointer (a capture's, a check's) is
/// not what it must be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum RequestFieldError {
    /// Not a method: neither a standard one nor a token.
    #[error(
        "'{method}' is not an HTTP method: write one of {} (in any case), or another token of letters, digits \
         and !#$%&'*+-.^_`|~",
        METHODS.join(", ")
    )]
    Method {
        /// The method as written.
        method: String,
    },
    /// A method longer than any server takes.
    #[error("a method of {bytes} bytes is no HTTP method: a method is a short token (at most 64 bytes) such as GET")]
    MethodLength {
        /// Its length.
        bytes: usize,
    },
    /// A pointer that does not start with `/` (a JSONPath, most likely),
    /// and the pointer it probably means.
    #[error("json '{pointer}' is a JSON pointer and starts with /, e.g. {suggestion}")]
    PointerStart { pointer: String, suggestion: String },
    /// A `~` not followed by 0 or 1.
    #[error("json '{pointer}': in a JSON pointer ~ starts an escape: write ~0 for ~ and ~1 for / inside a key")]
    PointerEscape { pointer: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors say what the strings said, byte for byte.
    #[test]
    fn field_errors_keep_their_text() {
        assert_eq!(method("get"), Ok("GET".to_string()));
        assert_eq!(method("PURGE"), Ok("PURGE".to_string()));
        assert_eq!(
            method("GE T").unwrap_err().to_string(),
            format!(
                "'GE T' is not an HTTP method: write one of {} (in any case), or another token of letters, digits \
                 and !#$%&'*+-.^_`|~",
                METHODS.join(", ")
            )
        );
        assert_eq!(
            json_pointer("$.data[0].id").unwrap_err().to_string(),
            "json '$.data[0].id' is a JSON pointer and starts with /, e.g. /data/0/id"
        );
        assert_eq!(
            json_pointer("$").unwrap_err().to_string(),
            "json '$' is a JSON pointer and starts with /, e.g. /data/token"
        );
        assert_eq!(
            json_pointer("/a~2").unwrap_err().to_string(),
            "json '/a~2': in a JSON pointer ~ starts an escape: write ~0 for ~ and ~1 for / inside a key"
        );
        assert_eq!(json_pointer("/a~0b/~1"), Ok(()));
    }
}
