//! Postman collections (format v2.1, and v2.0, which differs only in ways
//! read the same here): requests in folder order, folders as groups.
//!
//! Postman's `{{variable}}`s are throng's templates already, so they mostly
//! stay: a variable a test script sets from a response
//! (`pm.environment.set("token", pm.response.json().access_token)`) becomes
//! a capture of that step; a collection variable with a value is put in
//! (a credential's as a placeholder, by the rules of `secrets`); any other
//! becomes `{{env.NAME}}`, named in a note. Postman's dynamic variables map
//! to throng's where one exists (`{{$guid}}` → `{{uuid}}`).
//! `pm.response.to.have.status(N)` becomes the step's `expect`. Scripts
//! doing anything else are named in a note: checks are the user's to write.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::Value;

use crate::model::{Body, Capture, Flow, ImportError, Origin, Step, dropped_header, env_name, json_strings, var_name};

/// Folders nested deeper than this are refused (a hostile file).
const MAX_DEPTH: usize = 32;
/// Requests a collection may hold.
const MAX_REQUESTS: usize = 10_000;

/// The requests of the Postman collection `input`.
pub(crate) fn parse(input: &str) -> Result<Flow, ImportError> {
    let doc: Value = serde_json::from_str(input.trim_start_matches('\u{feff}'))
        .map_err(|e| ImportError::Invalid(format!("not a Postman collection: not JSON ({e})")))?;
    let schema = doc.pointer("/info/schema").and_then(Value::as_str).unwrap_or("");
    if !schema.contains("collection/v2") {
        return Err(ImportError::Invalid(format!(
            "not a Postman collection v2.0 or v2.1 (info.schema is {:?}); export it from Postman as Collection v2.1",
            schema.chars().take(80).collect::<String>()
        )));
    }
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    for v in doc.get("variable").and_then(Value::as_array).into_iter().flatten() {
        if let (Some(k), Some(val)) = (text(v, "key"), v.get("value")) {
            let val = val.as_str().map_or_else(|| val.to_string(), str::to_string);
            vars.insert(k.to_string(), val);
        }
    }
    let mut c = Collection {
        vars,
        flow: Flow::default(),
        unconverted: Vec::new(),
    };
    let items = doc
        .get("item")
        .and_then(Value::as_array)
        .ok_or_else(|| ImportError::Invalid("not a Postman collection: it has no item list".into()))?;
    c.items(items, &[], doc.get("auth"), 0)?;
    if !c.unconverted.is_empty() {
        c.flow.notes.push(format!(
            "scripts not converted (only pm.*.set(…) from the response and status checks are): {}",
            c.unconverted.join(", ")
        ));
    }
    let mut flow = c.flow;
    settle(&mut flow, &c.vars);
    if flow.steps.is_empty() {
        return Err(ImportError::Empty("the collection has no request".into()));
    }
    Ok(flow)
}

struct Collection {
    vars: BTreeMap<String, String>,
    flow: Flow,
    unconverted: Vec<String>,
}

impl Collection {
    fn items(
        &mut self,
        items: &[Value],
        groups: &[String],
        auth: Option<&Value>,
        depth: usize,
    ) -> Result<(), ImportError> {
        if depth > MAX_DEPTH {
            return Err(ImportError::Invalid(format!("folders nested deeper than {MAX_DEPTH}")));
        }
        for item in items {
            let name = text(item, "name").unwrap_or("").chars().take(200).collect::<String>();
            // An item's own auth wins; `inherit` (or none) takes its parent's.
            let own = item.get("auth").filter(|a| text(a, "type") != Some("inherit"));
            if let Some(children) = item.get("item").and_then(Value::as_array) {
                let mut inner = groups.to_vec();
                inner.push(if name.is_empty() { "folder".into() } else { name });
                self.items(children, &inner, own.or(auth), depth + 1)?;
            } else if let Some(req) = item.get("request") {
                if self.flow.steps.len() >= MAX_REQUESTS {
                    return Err(ImportError::Invalid(format!("more than {MAX_REQUESTS} requests")));
                }
                let req_auth = req.get("auth").filter(|a| text(a, "type") != Some("inherit"));
                let n = self.flow.steps.len() + 1;
                let mut step = self.request(req, n, &name, req_auth.or(own).or(auth))?;
                step.groups = groups.to_vec();
                step.name = (!name.is_empty()).then_some(name);
                self.scripts(item, &mut step);
                self.flow.steps.push(step);
            }
        }
        Ok(())
    }

    fn request(&mut self, req: &Value, n: usize, name: &str, auth: Option<&Value>) -> Result<Step, ImportError> {
        let at = |what: String| ImportError::Invalid(format!("request {n} ({name:?}): {what}"));
        // A request may be a bare URL string (v2.0 allows it).
        let (method, url_v) = match req {
            Value::String(u) => ("GET".to_string(), Value::String(u.clone())),
            _ => (
                text(req, "method").unwrap_or("GET").to_ascii_uppercase(),
                req.get("url").cloned().unwrap_or(Value::Null),
            ),
        };
        let raw_url = match &url_v {
            Value::String(s) => s.clone(),
            v => text(v, "raw").unwrap_or("").to_string(),
        };
        let resolved = self.resolve(&raw_url);
        let with_scheme = if resolved.contains("://") {
            resolved.clone()
        } else {
            format!("http://{resolved}")
        };
        let url = url::Url::parse(&with_scheme).map_err(|e| {
            at(format!(
                "its URL {raw_url:?} is not one once its variables are put in ({e}); give the variable a value"
            ))
        })?;
        let (origin, _, _) =
            Origin::of(&url).ok_or_else(|| at(format!("{raw_url:?}: only http:// and https:// URLs")))?;
        // The path and query as written, variables kept (only the origin's
        // are put in).
        let (path, query) = path_and_query(&raw_url, &url_v, &self.vars);
        let mut headers = Vec::new();
        for h in req.get("header").and_then(Value::as_array).into_iter().flatten() {
            if h.get("disabled").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let (Some(k), Some(v)) = (text(h, "key"), text(h, "value"))
                && !dropped_header(k)
            {
                headers.push((k.to_string(), v.to_string()));
            }
        }
        let mut query = query;
        if let Some(a) = auth {
            self.auth(a, &mut headers, &mut query, n, name);
        }
        let body = self.body(req.get("body"), &mut headers, n, name)?;
        let from = format!("Postman request {n} ({})", name.chars().take(80).collect::<String>());
        Ok(Step::new(from, origin, method, path, query, headers, body))
    }

    /// `raw_url` with the variables that give its origin put in.
    fn resolve(&self, raw: &str) -> String {
        let mut out = raw.to_string();
        for _ in 0..4 {
            let next = replace_vars(&out, |name| self.vars.get(name).cloned());
            if next == out {
                break;
            }
            out = next;
        }
        out
    }

    fn auth(
        &mut self,
        a: &Value,
        headers: &mut Vec<(String, String)>,
        query: &mut Vec<(String, String)>,
        n: usize,
        name: &str,
    ) {
        let field = |kind: &str, key: &str| -> Option<String> {
            a.get(kind)?
                .as_array()?
                .iter()
                .find(|p| text(p, "key") == Some(key))
                .and_then(|p| p.get("value"))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        };
        match text(a, "type").unwrap_or("") {
            "bearer" => {
                if let Some(t) = field("bearer", "token") {
                    headers.push(("Authorization".into(), format!("Bearer {t}")));
                }
            }
            "basic" => {
                let user = field("basic", "username").unwrap_or_default();
                let pass = field("basic", "password").unwrap_or_default();
                if user.contains("{{") || pass.contains("{{") {
                    // A template cannot be base64-encoded when the file is
                    // written: the whole value comes from the environment.
                    headers.push(("Authorization".into(), "Basic {{env.BASIC_AUTH}}".into()));
                    self.flow.notes.push(format!(
                        "request {n} ({name}): Basic auth from variables: set BASIC_AUTH to base64(user:password)"
                    ));
                } else {
                    let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
                    headers.push(("Authorization".into(), format!("Basic {b}")));
                }
            }
            "apikey" => {
                let key = field("apikey", "key").unwrap_or_else(|| "X-API-Key".into());
                let value = field("apikey", "value").unwrap_or_default();
                if field("apikey", "in").as_deref() == Some("query") {
                    query.push((key, value));
                } else {
                    headers.push((key, value));
                }
            }
            "noauth" | "" => {}
            other => self.flow.notes.push(format!(
                "request {n} ({name}): {other} auth is not imported; add its header by hand"
            )),
        }
    }

    fn body(
        &mut self,
        b: Option<&Value>,
        headers: &mut Vec<(String, String)>,
        n: usize,
        name: &str,
    ) -> Result<Body, ImportError> {
        let Some(b) = b else {
            return Ok(Body::None);
        };
        if b.get("disabled").and_then(Value::as_bool) == Some(true) {
            return Ok(Body::None);
        }
        let has_type = |h: &[(String, String)]| h.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        Ok(match text(b, "mode").unwrap_or("") {
            "raw" => {
                let raw = text(b, "raw").unwrap_or("");
                let json_lang = b.pointer("/options/raw/language").and_then(Value::as_str) == Some("json");
                let json_type = headers
                    .iter()
                    .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.contains("json"));
                match serde_json::from_str::<Value>(raw) {
                    Ok(v) if json_lang || json_type => {
                        headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
                        Body::Json(v)
                    }
                    _ if raw.is_empty() => Body::None,
                    _ => {
                        if json_lang && !has_type(headers) {
                            headers.push(("Content-Type".into(), "application/json".into()));
                        }
                        Body::Raw(raw.to_string())
                    }
                }
            }
            "urlencoded" => {
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
                Body::Form(
                    b.get("urlencoded")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|p| p.get("disabled").and_then(Value::as_bool) != Some(true))
                        .filter_map(|p| Some((text(p, "key")?.to_string(), text(p, "value").unwrap_or("").to_string())))
                        .collect(),
                )
            }
            "graphql" => {
                let q = b.get("graphql");
                let query = q.and_then(|g| text(g, "query")).unwrap_or("");
                let variables = q
                    .and_then(|g| text(g, "variables"))
                    .and_then(|v| serde_json::from_str::<Value>(v).ok())
                    .unwrap_or(Value::Object(serde_json::Map::new()));
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
                Body::Json(serde_json::json!({ "query": query, "variables": variables }))
            }
            "" | "none" => Body::None,
            other => {
                return Err(ImportError::Invalid(format!(
                    "request {n} ({name}): a {other} body is not imported yet (multipart and file bodies); \
                     give it a raw or urlencoded body"
                )));
            }
        })
    }

    /// Captures and status expectations from the item's test scripts.
    fn scripts(&mut self, item: &Value, step: &mut Step) {
        let mut lines = Vec::new();
        for e in item.get("event").and_then(Value::as_array).into_iter().flatten() {
            if text(e, "listen") != Some("test") {
                if e.pointer("/script/exec").is_some() {
                    self.unconverted
                        .push(format!("{} ({})", step.from, text(e, "listen").unwrap_or("script")));
                }
                continue;
            }
            match e.pointer("/script/exec") {
                Some(Value::Array(l)) => lines.extend(l.iter().filter_map(Value::as_str).map(str::to_string)),
                Some(Value::String(s)) => lines.extend(s.lines().map(str::to_string)),
                _ => {}
            }
        }
        let script = lines.join("\n");
        let aliases = aliases(&script);
        let mut other = false;
        for stmt in script.split([';', '\n']).map(str::trim).filter(|s| !s.is_empty()) {
            if let Some((var, source)) = setter(stmt) {
                match capture_of(source, &aliases) {
                    Some(c) => step.capture.push((var_name(&var), c)),
                    None => other = true,
                }
            } else if let Some(code) = status(stmt) {
                step.expect = Some(code);
            } else if !is_plumbing(stmt) {
                other = true;
            }
        }
        if other {
            self.unconverted.push(step.from.clone());
        }
    }
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The path (from `/`) and query of a Postman URL as written, the origin's
/// variables put in: `{{baseUrl}}/users/{{id}}?x=1` → `/users/{{id}}`.
fn path_and_query(raw: &str, url: &Value, vars: &BTreeMap<String, String>) -> (String, Vec<(String, String)>) {
    let query: Vec<(String, String)> = match url.get("query").and_then(Value::as_array) {
        Some(q) => q
            .iter()
            .filter(|p| p.get("disabled").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| Some((text(p, "key")?.to_string(), text(p, "value").unwrap_or("").to_string())))
            .collect(),
        None => raw
            .split_once('?')
            .map(|(_, q)| {
                q.split('&')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').unwrap_or((p, ""));
                        (k.to_string(), v.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default(),
    };
    let without_query = raw.split(['?', '#']).next().unwrap_or("");
    // Skip the scheme and authority (a variable there is the origin's).
    let rest = match without_query.split_once("://") {
        Some((_, r)) => r,
        None => without_query,
    };
    let rest = if rest.starts_with("{{") {
        // `{{baseUrl}}/path`: the variable is the origin (perhaps with a base path).
        let end = rest.find("}}").map_or(rest.len(), |e| e + 2);
        let var = &rest[2..end.saturating_sub(2)];
        let base_path = vars
            .get(var.trim())
            .and_then(|v| url::Url::parse(v).ok())
            .map(|u| u.path().trim_end_matches('/').to_string())
            .unwrap_or_default();
        format!("{base_path}{}", &rest[end..])
    } else {
        rest.find('/').map_or_else(String::new, |i| rest[i..].to_string())
    };
    let path = if rest.is_empty() { "/".to_string() } else { rest };
    (path, query)
}

/// `text` with each `{{name}}` that `value` knows replaced.
fn replace_vars(text: &str, mut value: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            out.push_str(&rest[i..]);
            return out;
        };
        let name = after[..j].trim();
        match value(name) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[i..i + 2 + j + 2]),
        }
        rest = &after[j + 2..];
    }
    out.push_str(rest);
    out
}

/// Names given to the response's JSON in a script (`var j =
/// pm.response.json();`, `JSON.parse(responseBody)`).
fn aliases(script: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for stmt in script.split([';', '\n']).map(str::trim) {
        let decl = stmt
            .strip_prefix("var ")
            .or_else(|| stmt.strip_prefix("let "))
            .or_else(|| stmt.strip_prefix("const "));
        if let Some((name, value)) = decl.and_then(|d| d.split_once('=')) {
            let value = value.trim();
            if value == "pm.response.json()" || value == "JSON.parse(responseBody)" {
                names.insert(name.trim().to_string());
            }
        }
    }
    names
}

/// `pm.environment.set("name", EXPR)` (and collectionVariables, globals,
/// variables, `postman.setEnvironmentVariable`): the name and EXPR.
fn setter(stmt: &str) -> Option<(String, &str)> {
    let args = [
        "pm.environment.set(",
        "pm.collectionVariables.set(",
        "pm.globals.set(",
        "pm.variables.set(",
        "postman.setEnvironmentVariable(",
        "postman.setGlobalVariable(",
    ]
    .iter()
    .find_map(|p| stmt.strip_prefix(p))?;
    let args = args.trim_end().strip_suffix(')')?;
    let (name, expr) = args.split_once(',')?;
    let name = name.trim().trim_matches(['"', '\'', '`']);
    Some((name.to_string(), expr.trim()))
}

/// A capture for a script's expression of the response: its JSON at a
/// path, or a header.
fn capture_of(expr: &str, aliases: &BTreeSet<String>) -> Option<Capture> {
    if let Some(h) = expr
        .strip_prefix("pm.response.headers.get(")
        .or_else(|| expr.strip_prefix("postman.getResponseHeader("))
    {
        let h = h.strip_suffix(')')?.trim().trim_matches(['"', '\'']);
        return Some(Capture::Header(h.to_string()));
    }
    let path = ["pm.response.json()", "JSON.parse(responseBody)"]
        .iter()
        .find_map(|p| expr.strip_prefix(p))
        .or_else(|| {
            aliases.iter().find_map(|a| {
                expr.strip_prefix(a.as_str())
                    .filter(|r| r.is_empty() || r.starts_with(['.', '[']))
            })
        })?;
    pointer(path).map(Capture::Json)
}

/// `.a.b[0]["c d"]` as the JSON pointer `/a/b/0/c d`.
fn pointer(path: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = path;
    while !rest.is_empty() {
        let key;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            key = r[..end].to_string();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            key = r[..end].trim().trim_matches(['"', '\'']).to_string();
            rest = &r[end + 1..];
        } else {
            return None;
        }
        if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || " _-$".contains(c)) {
            return None;
        }
        out.push('/');
        out.push_str(&key.replace('~', "~0").replace('/', "~1"));
    }
    Some(out)
}

/// `pm.response.to.have.status(201)` and `pm.expect(pm.response.code).to.eql(201)`.
fn status(stmt: &str) -> Option<u16> {
    let inner = stmt
        .strip_prefix("pm.response.to.have.status(")
        .or_else(|| stmt.strip_prefix("pm.expect(pm.response.code).to.eql("))
        .or_else(|| stmt.strip_prefix("pm.expect(pm.response.code).to.equal("))?;
    let code: u16 = inner.trim_end_matches([')', ';', ' ']).trim().parse().ok()?;
    (100..=599).contains(&code).then_some(code)
}

/// Lines that wrap the statements read above and mean nothing alone.
fn is_plumbing(stmt: &str) -> bool {
    let s = stmt.trim();
    s.starts_with("//")
        || s.starts_with("pm.test(")
        || s == "})"
        || s == "}"
        || s == "});"
        || s.starts_with("var ")
        || s.starts_with("let ")
        || s.starts_with("const ")
}

/// Postman's dynamic variables throng has.
fn dynamic(name: &str) -> Option<&'static str> {
    Some(match name {
        "$guid" | "$randomUUID" => "{{uuid}}",
        "$randomInt" => "{{random_int 0 1000}}",
        "$randomEmail" | "$randomExampleEmail" => "{{random_email}}",
        _ => return None,
    })
}

/// Every `{{variable}}` the steps send, settled: one captured by an earlier
/// step stays (its name made a throng name), a dynamic one maps to
/// throng's, a collection variable with a value is put in, and the rest
/// read the environment.
fn settle(flow: &mut Flow, vars: &BTreeMap<String, String>) {
    let mut captured: BTreeSet<String> = BTreeSet::new();
    let mut from_env: BTreeSet<String> = BTreeSet::new();
    for s in &mut flow.steps {
        let mut fix = |text: &mut String| {
            if !text.contains("{{") {
                return;
            }
            *text = replace_vars(text, |name| {
                if let Some(d) = dynamic(name) {
                    return Some(d.to_string());
                }
                let n = var_name(name);
                if captured.contains(&n) {
                    return Some(format!("{{{{{n}}}}}"));
                }
                if let Some(v) = vars.get(name).filter(|v| !v.contains("{{")) {
                    return Some(v.clone());
                }
                let env = env_name(&n);
                from_env.insert(env.clone());
                Some(format!("{{{{env.{env}}}}}"))
            });
        };
        fix(&mut s.path);
        for (_, v) in &mut s.query {
            fix(v);
        }
        for (_, v) in &mut s.headers {
            fix(v);
        }
        match &mut s.body {
            Body::Json(v) => json_strings(v, &mut fix),
            Body::Form(f) => f.iter_mut().for_each(|(_, v)| fix(v)),
            Body::Raw(t) => fix(t),
            Body::None => {}
        }
        captured.extend(s.capture.iter().map(|(n, _)| n.clone()));
    }
    if !from_env.is_empty() {
        flow.notes.push(format!(
            "variables no earlier request captures read the environment: {} (set them with --env NAME=VALUE)",
            from_env.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn script_expressions_become_captures() {
        let a: BTreeSet<String> = ["j".to_string()].into();
        assert_eq!(
            capture_of("pm.response.json().data.token", &a),
            Some(Capture::Json("/data/token".into()))
        );
        assert_eq!(
            capture_of("j.items[0]['id']", &a),
            Some(Capture::Json("/items/0/id".into()))
        );
        assert_eq!(
            capture_of("pm.response.headers.get(\"Location\")", &a),
            Some(Capture::Header("Location".into()))
        );
        assert_eq!(capture_of("someFunction()", &a), None);
        assert_eq!(setter("pm.environment.set(\"tok\", j.t)"), Some(("tok".into(), "j.t")));
        assert_eq!(status("pm.response.to.have.status(201)"), Some(201));
    }

    #[test]
    fn variables_settle_into_captures_dynamics_and_the_environment() {
        let c = serde_json::json!({
            "info": {"name": "c", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"},
            "variable": [{"key": "base", "value": "http://h:8080/api"}],
            "item": [{"name": "F", "item": [
                {"name": "login", "request": {"method": "POST", "url": "{{base}}/login",
                  "body": {"mode": "raw", "raw": "{\"u\":\"{{user}}\",\"id\":\"{{$guid}}\"}", "options": {"raw": {"language": "json"}}}},
                 "event": [{"listen": "test", "script": {"exec": ["var j = pm.response.json();", "pm.environment.set('tok', j.token);", "pm.test('ok', function () {", "pm.response.to.have.status(201);", "});"]}}]},
                {"name": "me", "request": {"method": "GET", "url": {"raw": "{{base}}/me?x={{tok}}", "query": [{"key": "x", "value": "{{tok}}"}]},
                  "auth": {"type": "bearer", "bearer": [{"key": "token", "value": "{{tok}}"}]}}}
            ]}]
        });
        let f = parse(&c.to_string()).unwrap();
        let (a, b) = (&f.steps[0], &f.steps[1]);
        assert_eq!((a.path.as_str(), b.path.as_str()), ("/api/login", "/api/me"));
        assert_eq!(
            a.body,
            Body::Json(serde_json::json!({"u": "{{env.USER}}", "id": "{{uuid}}"}))
        );
        assert_eq!(a.capture, [("tok".to_string(), Capture::Json("/token".into()))]);
        assert_eq!(a.expect, Some(201));
        assert_eq!(b.query, [("x".to_string(), "{{tok}}".to_string())]);
        assert_eq!(b.headers, [("Authorization".to_string(), "Bearer {{tok}}".to_string())]);
        assert_eq!(a.groups, ["F"]);
        assert!(f.notes.iter().any(|n| n.contains("USER")), "{:?}", f.notes);
    }
}
