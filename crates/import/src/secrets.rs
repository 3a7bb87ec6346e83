//! Credentials are never copied into a scenario: each becomes an
//! `{{env.NAME}}` placeholder, the same value the same name, and the user
//! is told which variables to set and what each stands for (never its
//! value).
//!
//! What counts as a credential: `Authorization` (its scheme kept: `Bearer
//! {{env.BEARER_TOKEN}}`), `Proxy-Authorization`, `Cookie`, headers named
//! like keys and tokens; query parameters, form fields and JSON body fields
//! named like passwords, secrets, tokens and API keys. A value already
//! made a `{{variable}}` (captured from a response) is the server's, not a
//! secret, and stays.

use serde_json::Value;

use crate::model::{Body, Flow, env_name};

/// Names that mark a credential (a header, parameter or field name,
/// lowercased, containing one).
const MARKS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "x-api",
    "credential",
    "session",
];
/// Names that are credentials whole.
const WHOLE: &[&str] = &["authorization", "proxy-authorization", "cookie", "pass", "pwd", "auth"];

fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    WHOLE.contains(&n.as_str()) || MARKS.iter().any(|m| n.contains(m))
}

/// The variables handed out: name, what it stands for, the value (kept
/// only to give one value one name; never written).
#[derive(Default)]
struct Vars {
    list: Vec<(String, String, String)>,
}

impl Vars {
    /// The variable for `value`, named from `base`; `what` describes it.
    fn get(&mut self, base: &str, value: &str, what: String) -> String {
        if let Some((name, _, _)) = self.list.iter().find(|(_, _, v)| v == value) {
            return name.clone();
        }
        let base = env_name(base);
        let mut name = base.clone();
        let mut n = 2;
        while self.list.iter().any(|(x, _, _)| *x == name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.list.push((name.clone(), what, value.to_string()));
        name
    }
}

/// Replaces the flow's credentials with placeholders; the variables to set
/// and what each stands for.
pub(crate) fn hide(flow: &mut Flow) -> Vec<(String, String)> {
    let mut vars = Vars::default();
    for (i, s) in flow.steps.iter_mut().enumerate() {
        let n = i + 1;
        for (name, v) in &mut s.headers {
            if !is_secret(name) || v.contains("{{") || v.is_empty() {
                continue;
            }
            let lower = name.to_ascii_lowercase();
            let scheme = v.split_once(' ').map(|(s, rest)| (s.to_string(), rest.to_string()));
            *v = match scheme {
                Some((scheme, rest)) if lower.ends_with("authorization") && !rest.is_empty() => {
                    let base = match scheme.to_ascii_lowercase().as_str() {
                        "bearer" => "BEARER_TOKEN".to_string(),
                        "basic" => "BASIC_AUTH".to_string(),
                        _ => format!("{name}_{scheme}"),
                    };
                    let what = format!("the {name} header's {scheme} credentials (step {n})");
                    format!("{scheme} {{{{env.{}}}}}", vars.get(&base, &rest, what))
                }
                _ => {
                    let what = format!("the {name} header (step {n})");
                    format!("{{{{env.{}}}}}", vars.get(name, v, what))
                }
            };
        }
        for (name, v) in &mut s.query {
            if is_secret(name) && !v.contains("{{") && !v.is_empty() {
                let what = format!("the {name} query parameter (step {n})");
                *v = format!("{{{{env.{}}}}}", vars.get(name, v, what));
            }
        }
        match &mut s.body {
            Body::Form(fields) => {
                for (name, v) in fields {
                    if is_secret(name) && !v.contains("{{") && !v.is_empty() {
                        let what = format!("the {name} form field (step {n})");
                        *v = format!("{{{{env.{}}}}}", vars.get(name, v, what));
                    }
                }
            }
            Body::Json(v) => json(v, n, &mut vars),
            Body::Raw(_) | Body::None => {}
        }
    }
    vars.list.into_iter().map(|(name, what, _)| (name, what)).collect()
}

fn json(v: &mut Value, n: usize, vars: &mut Vars) {
    match v {
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                match item {
                    Value::String(s) if is_secret(k) && !s.contains("{{") && !s.is_empty() => {
                        let what = format!("the {k} field of step {n}'s JSON body");
                        *s = format!("{{{{env.{}}}}}", vars.get(k, s, what));
                    }
                    other => json(other, n, vars),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| json(i, n, vars)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::{Origin, Step};

    #[test]
    fn credentials_become_placeholders_and_no_value_is_kept() {
        let step = |headers: Vec<(&str, &str)>, body: Body| {
            let origin = Origin {
                scheme: "http".into(),
                host: "h".into(),
                port: 80,
            };
            let query = vec![("api_key".into(), "k-123".into()), ("page".into(), "2".into())];
            let headers = headers
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Step::new(String::new(), origin, "POST".into(), "/".into(), query, headers, body)
        };
        let mut flow = Flow {
            steps: vec![
                step(
                    vec![("Authorization", "Bearer s3cr3t"), ("Accept", "*/*")],
                    Body::Json(serde_json::json!({"user": "a", "password": "hunter2", "nested": [{"token": "t-1"}]})),
                ),
                step(
                    vec![("Authorization", "Bearer s3cr3t"), ("X-Api-Key", "k-123")],
                    Body::Form(vec![("pass".into(), "hunter2".into())]),
                ),
            ],
            ..Flow::default()
        };
        let env = hide(&mut flow);
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["BEARER_TOKEN", "API_KEY", "TOKEN", "PASSWORD"]);
        let text = format!("{:?} {env:?}", flow.steps);
        for secret in ["s3cr3t", "hunter2", "k-123", "t-1"] {
            assert!(!text.contains(secret), "{secret} left in {text}");
        }
        assert_eq!(flow.steps[1].headers[0].1, "Bearer {{env.BEARER_TOKEN}}");
        assert_eq!(flow.steps[1].headers[1].1, "{{env.API_KEY}}", "one value, one name");
        assert_eq!(flow.steps[0].query[1].1, "2");
    }
}
