//! OpenAPI 3 documents (3.0 and 3.1, JSON or YAML): one request per
//! operation, with example values for its path, required query and header
//! parameters and its JSON or form body.
//!
//! Examples come from the document where it gives them (`example`,
//! `examples`, a schema's `example`, `default`, first `enum` value), else
//! from the schema's type and format. `$ref`s to `#/components/…` are
//! followed (a cycle, or a reference elsewhere, ends in a placeholder
//! value). The operation's security (or the document's) becomes the header
//! or query parameter it names, its credential an `{{env.NAME}}` variable.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::model::{Body, Flow, ImportError, Origin, Step, env_name};

/// Operations a document may hold.
const MAX_OPERATIONS: usize = 10_000;
/// How deep an example is built into a schema.
const MAX_DEPTH: usize = 8;
/// The methods an OpenAPI path item may have, in the order they are taken.
const METHODS: [&str; 8] = ["get", "post", "put", "patch", "delete", "head", "options", "trace"];

/// The operations of the OpenAPI document `input` (JSON or YAML); `origin`
/// overrides its servers.
pub(crate) fn parse(input: &str, origin: Option<&str>) -> Result<Flow, ImportError> {
    let input = input.trim_start_matches('\u{feff}');
    let doc: Value = if input.trim_start().starts_with('{') {
        serde_json::from_str(input)
            .map_err(|e| ImportError::Invalid(format!("not an OpenAPI document: not JSON ({e})")))?
    } else {
        serde_yaml_ng::from_str(input)
            .map_err(|e| ImportError::Invalid(format!("not an OpenAPI document: not YAML ({e})")))?
    };
    let version = doc.get("openapi").and_then(Value::as_str).unwrap_or("");
    if !version.starts_with("3.") {
        let swagger = doc.get("swagger").is_some();
        return Err(ImportError::Invalid(if swagger {
            "a Swagger 2.0 document: convert it to OpenAPI 3 first (e.g. with swagger2openapi)".into()
        } else {
            format!(
                "not an OpenAPI 3 document (openapi: {:?})",
                version.chars().take(20).collect::<String>()
            )
        }));
    }
    let (origin, base) = server(&doc, origin)?;
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .ok_or_else(|| ImportError::Empty("the document has no paths".into()))?;
    let mut flow = Flow::default();
    let mut env = Vars::default();
    let mut deletes = 0;
    for (path, item) in paths {
        let item = resolve(&doc, item, &mut BTreeSet::new());
        for method in METHODS {
            let Some(op) = item.get(method) else {
                continue;
            };
            if flow.steps.len() >= MAX_OPERATIONS {
                return Err(ImportError::Invalid(format!("more than {MAX_OPERATIONS} operations")));
            }
            deletes += usize::from(method == "delete");
            let step = operation(&doc, &origin, &base, path, method, item, op, &mut env, &mut flow.notes);
            flow.steps.push(step);
        }
    }
    if flow.steps.is_empty() {
        return Err(ImportError::Empty("the document has no operation".into()));
    }
    if deletes > 0 {
        flow.notes.push(format!(
            "{deletes} DELETE operation(s) are in the flow with example ids: they run against the target as written"
        ));
    }
    flow.env = env.list;
    Ok(flow)
}

/// The target: `--origin`, or the first server (its variables at their
/// defaults); and the base path put in front of every path.
fn server(doc: &Value, origin: Option<&str>) -> Result<(Origin, String), ImportError> {
    let url = match origin {
        Some(o) => o.to_string(),
        None => {
            let s = doc.pointer("/servers/0").ok_or_else(|| {
                ImportError::Invalid("the document names no server: give the target with --origin URL".into())
            })?;
            let mut url = s.get("url").and_then(Value::as_str).unwrap_or("").to_string();
            if let Some(vars) = s.get("variables").and_then(Value::as_object) {
                for (k, v) in vars {
                    let d = v.get("default").and_then(Value::as_str).unwrap_or("");
                    url = url.replace(&format!("{{{k}}}"), d);
                }
            }
            url
        }
    };
    let parsed = url::Url::parse(&url).map_err(|_| {
        ImportError::Invalid(format!(
            "the server {:?} is not an absolute URL: give the target with --origin URL",
            url.chars().take(100).collect::<String>()
        ))
    })?;
    let (o, path, _) = Origin::of(&parsed)
        .ok_or_else(|| ImportError::Invalid(format!("the server {url:?}: only http:// and https:// servers")))?;
    Ok((o, path.trim_end_matches('/').to_string()))
}

/// `v` with a `$ref` to `#/…` followed (`seen`: the references followed on
/// the way, a cycle ends in `{}`).
fn resolve<'a>(doc: &'a Value, v: &'a Value, seen: &mut BTreeSet<String>) -> &'a Value {
    static EMPTY: Value = Value::Null;
    let mut v = v;
    for _ in 0..16 {
        let Some(r) = v.get("$ref").and_then(Value::as_str) else {
            return v;
        };
        let Some(pointer) = r.strip_prefix('#') else {
            return &EMPTY;
        };
        if !seen.insert(r.to_string()) {
            return &EMPTY;
        }
        v = doc.pointer(pointer).unwrap_or(&EMPTY);
    }
    &EMPTY
}

#[allow(clippy::too_many_arguments)]
fn operation(
    doc: &Value,
    origin: &Origin,
    base: &str,
    path: &str,
    method: &str,
    item: &Value,
    op: &Value,
    env: &mut Vars,
    notes: &mut Vec<String>,
) -> Step {
    let id = op
        .get("operationId")
        .and_then(Value::as_str)
        .map(|s| s.chars().take(200).collect::<String>());
    let label = id
        .clone()
        .unwrap_or_else(|| format!("{} {path}", method.to_ascii_uppercase()));
    // Path-level parameters, then the operation's (which win by name and place).
    let mut params: Vec<&Value> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")] {
        for p in list.and_then(Value::as_array).into_iter().flatten() {
            let p = resolve(doc, p, &mut BTreeSet::new());
            let key = |p: &Value| (p.get("name").cloned(), p.get("in").cloned());
            params.retain(|q| key(q) != key(p));
            params.push(p);
        }
    }
    let mut full = format!("{base}{path}");
    let (mut query, mut headers) = (Vec::new(), Vec::new());
    for p in params {
        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
        let required = p.get("required").and_then(Value::as_bool).unwrap_or(false);
        let value = scalar(&param_example(doc, p));
        match p.get("in").and_then(Value::as_str).unwrap_or("") {
            "path" => full = full.replace(&format!("{{{name}}}"), &value),
            "query" if required || p.get("example").is_some() => query.push((name.to_string(), value)),
            "header" if required => headers.push((name.to_string(), value)),
            "cookie" if required => notes.push(format!("{label}: the cookie {name} is not sent (set it by hand)")),
            _ => {}
        }
    }
    security(doc, op, &mut headers, &mut query, env, notes, &label);
    let body = body(doc, op, &mut headers, notes, &label);
    let expect = op
        .get("responses")
        .and_then(Value::as_object)
        .and_then(|r| {
            r.keys()
                .find_map(|k| k.parse::<u16>().ok().filter(|c| (200..300).contains(c)))
        })
        .filter(|c| !(200..400).contains(c));
    let groups = op
        .get("tags")
        .and_then(|t| t.get(0))
        .and_then(Value::as_str)
        .map(|t| vec![t.to_string()])
        .unwrap_or_default();
    let from = format!("operation {label}");
    let method = method.to_ascii_uppercase();
    Step {
        expect,
        name: id,
        groups,
        ..Step::new(from, origin.clone(), method, full, query, headers, body)
    }
}

fn param_example(doc: &Value, p: &Value) -> Value {
    if let Some(e) = p.get("example") {
        return e.clone();
    }
    if let Some(e) = p
        .get("examples")
        .and_then(Value::as_object)
        .and_then(|m| m.values().next())
    {
        let e = resolve(doc, e, &mut BTreeSet::new());
        if let Some(v) = e.get("value") {
            return v.clone();
        }
    }
    let schema = p.get("schema").unwrap_or(&Value::Null);
    example(doc, schema, 0, &mut BTreeSet::new())
}

/// A value of `schema`: its own example, default or first enum value, or
/// one built from its type.
fn example(doc: &Value, schema: &Value, depth: usize, seen: &mut BTreeSet<String>) -> Value {
    let reference = schema.get("$ref").and_then(Value::as_str).map(str::to_string);
    if let Some(r) = &reference
        && !seen.insert(r.clone())
    {
        return json!({});
    }
    let s = resolve(doc, schema, &mut BTreeSet::new());
    let out = example_of(doc, s, depth, seen);
    if let Some(r) = reference {
        seen.remove(&r);
    }
    out
}

fn example_of(doc: &Value, s: &Value, depth: usize, seen: &mut BTreeSet<String>) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    for key in ["example", "default", "const"] {
        if let Some(v) = s.get(key) {
            return v.clone();
        }
    }
    if let Some(v) = s.get("examples").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    if let Some(v) = s.get("enum").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        let mut merged = Map::new();
        for part in all {
            if let Value::Object(m) = example(doc, part, depth + 1, seen) {
                merged.extend(m);
            }
        }
        return Value::Object(merged);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return example(doc, first, depth + 1, seen);
        }
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        // 3.1: a list of types, `null` among them.
        Some(Value::Array(l)) => l
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut m = Map::new();
            for (k, v) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
                if v.get("readOnly").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                m.insert(k.clone(), example(doc, v, depth + 1, seen));
            }
            Value::Object(m)
        }
        "array" => {
            let items = s.get("items").unwrap_or(&Value::Null);
            json!([example(doc, items, depth + 1, seen)])
        }
        "integer" => json!(s.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        "number" => json!(s.get("minimum").and_then(Value::as_f64).unwrap_or(1.5)),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => json!(match s.get("format").and_then(Value::as_str).unwrap_or("") {
            "date" => "2026-01-01",
            "date-time" => "2026-01-01T00:00:00Z",
            "uuid" => "00000000-0000-4000-8000-000000000001",
            "email" => "user@example.test",
            "uri" | "url" => "https://example.test/",
            "ipv4" => "192.0.2.1",
            "byte" => "aGVsbG8=",
            _ => "string",
        }),
    }
}

/// A parameter's value as text.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn body(doc: &Value, op: &Value, headers: &mut Vec<(String, String)>, notes: &mut Vec<String>, label: &str) -> Body {
    let Some(rb) = op.get("requestBody") else {
        return Body::None;
    };
    let rb = resolve(doc, rb, &mut BTreeSet::new());
    let Some(content) = rb.get("content").and_then(Value::as_object) else {
        return Body::None;
    };
    let pick = content
        .iter()
        .find(|(t, _)| t.contains("json"))
        .or_else(|| {
            content
                .iter()
                .find(|(t, _)| t.starts_with("application/x-www-form-urlencoded"))
        })
        .or_else(|| content.iter().find(|(t, _)| t.starts_with("text/")));
    let Some((mime, media)) = pick else {
        notes.push(format!(
            "{label}: its body ({}) is not built; give it by hand",
            content.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
        return Body::None;
    };
    let value = media
        .get("example")
        .cloned()
        .or_else(|| {
            media
                .get("examples")
                .and_then(Value::as_object)
                .and_then(|m| m.values().next())
                .map(|e| resolve(doc, e, &mut BTreeSet::new()))
                .and_then(|e| e.get("value").cloned())
        })
        .unwrap_or_else(|| {
            example(
                doc,
                media.get("schema").unwrap_or(&Value::Null),
                0,
                &mut BTreeSet::new(),
            )
        });
    if mime.contains("json") {
        if !mime.starts_with("application/json") {
            headers.push(("Content-Type".into(), mime.clone()));
            return Body::Raw(value.to_string());
        }
        Body::Json(value)
    } else if mime.starts_with("application/x-www-form-urlencoded") {
        Body::Form(
            value
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect())
                .unwrap_or_default(),
        )
    } else {
        headers.push(("Content-Type".into(), mime.clone()));
        Body::Raw(scalar(&value))
    }
}

/// Environment variables handed out for credentials: name and what it is.
#[derive(Default)]
struct Vars {
    list: Vec<(String, String)>,
}

impl Vars {
    fn get(&mut self, name: &str, what: String) -> String {
        if !self.list.iter().any(|(n, _)| n == name) {
            self.list.push((name.to_string(), what));
        }
        format!("{{{{env.{name}}}}}")
    }
}

fn security(
    doc: &Value,
    op: &Value,
    headers: &mut Vec<(String, String)>,
    query: &mut Vec<(String, String)>,
    env: &mut Vars,
    notes: &mut Vec<String>,
    label: &str,
) {
    let req = op.get("security").or_else(|| doc.get("security"));
    let Some(first) = req
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_object)
    else {
        return;
    };
    for scheme_name in first.keys() {
        let scheme = doc
            .pointer(&format!(
                "/components/securitySchemes/{}",
                scheme_name.replace('~', "~0").replace('/', "~1")
            ))
            .map(|s| resolve(doc, s, &mut BTreeSet::new()))
            .unwrap_or(&Value::Null);
        let ty = scheme.get("type").and_then(Value::as_str).unwrap_or("");
        let what = |w: &str| format!("{w} (security scheme {scheme_name})");
        match ty {
            "http" => match scheme
                .get("scheme")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_ascii_lowercase()
                .as_str()
            {
                "basic" => headers.push((
                    "Authorization".into(),
                    format!("Basic {}", env.get("BASIC_AUTH", what("base64 of user:password"))),
                )),
                _ => headers.push((
                    "Authorization".into(),
                    format!("Bearer {}", env.get("BEARER_TOKEN", what("the bearer token"))),
                )),
            },
            "apiKey" => {
                let name = scheme.get("name").and_then(Value::as_str).unwrap_or("X-API-Key");
                let var = env_name(name);
                let value = env.get(&var, what(&format!("the API key {name}")));
                match scheme.get("in").and_then(Value::as_str) {
                    Some("query") => query.push((name.to_string(), value)),
                    Some("cookie") => notes.push(format!("{label}: the API key cookie {name} is not sent")),
                    _ => headers.push((name.to_string(), value)),
                }
            }
            "oauth2" | "openIdConnect" => headers.push((
                "Authorization".into(),
                format!("Bearer {}", env.get("BEARER_TOKEN", what("an access token"))),
            )),
            _ => notes.push(format!("{label}: the security scheme {scheme_name} is not applied")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn examples_follow_refs_and_stop_at_cycles() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {"id": {"type": "integer", "example": 7},
                     "next": {"$ref": "#/components/schemas/Node"}, "at": {"type": "string", "format": "date"},
                     "kind": {"enum": ["a", "b"]}, "ro": {"type": "string", "readOnly": true}}}}}});
        let v = example(
            &doc,
            &json!({"$ref": "#/components/schemas/Node"}),
            0,
            &mut BTreeSet::new(),
        );
        assert_eq!(v["id"], 7);
        assert_eq!(v["at"], "2026-01-01");
        assert_eq!(v["kind"], "a");
        assert_eq!(v["next"], json!({}), "the cycle ends: {v}");
        assert!(v.get("ro").is_none());
    }
}
