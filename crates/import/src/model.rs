//! What an importer reads out of its input: requests in order, each with
//! where it came from and, when the input recorded one, its response.

use std::collections::BTreeMap;

use serde_json::Value;

/// Why an input could not be imported: what, where, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input is not what its kind says.
    #[error("{0}")]
    Invalid(String),
    /// The input has nothing to import.
    #[error("{0}")]
    Empty(String),
}

/// Names to values: headers, query parameters, form fields.
pub(crate) type Pairs = Vec<(String, String)>;

/// Where requests go: scheme, host and port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The origin of `url`, and its path with the query string split off
    /// into parameters (decoded).
    pub fn of(url: &url::Url) -> Option<(Origin, String, Pairs)> {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let origin = Origin {
            scheme: scheme.to_string(),
            host: url.host_str()?.to_string(),
            port: url.port_or_known_default()?,
        };
        let query = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        Some((origin, url.path().to_string(), query))
    }

    /// `scheme://host[:port]`, the port left out when it is the default.
    /// Never credentials: an [`Origin`] holds none.
    pub fn url(&self) -> String {
        let default = if self.scheme == "https" { 443 } else { 80 };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            format!("{}://{host}", self.scheme)
        } else {
            format!("{}://{host}:{}", self.scheme, self.port)
        }
    }
}

/// A request's body.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Body {
    None,
    Json(Value),
    Form(Vec<(String, String)>),
    Raw(String),
}

/// Where a capture takes its value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Capture {
    /// A JSON pointer into the body.
    Json(String),
    /// A response header.
    Header(String),
}

/// A response the input recorded (HAR): what captures are inferred from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub json: Option<Value>,
}

/// One request.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// Where it came from, for its comment (`HAR entry 3`); the comment
    /// adds the request as the scenario sends it (placeholders, never a
    /// credential).
    pub from: String,
    pub origin: Origin,
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// The status the recording got, when it is not one `ok` counts by
    /// default (200–399).
    pub expect: Option<u16>,
    pub capture: Vec<(String, Capture)>,
    pub response: Option<Response>,
    /// Its name (Postman's request name; None: `METHOD path`).
    pub name: Option<String>,
    /// The groups it is in, outermost first (Postman's folders).
    pub groups: Vec<String>,
}

impl Step {
    /// True when something it sends holds `{{`, which a scenario reads as
    /// the start of a template: a recorded or written literal cannot be
    /// carried over as it is.
    pub fn holds_braces(&self) -> bool {
        let has = |t: &str| t.contains("{{");
        has(&self.path)
            || self.query.iter().any(|(k, v)| has(k) || has(v))
            || self.headers.iter().any(|(k, v)| has(k) || has(v))
            || match &self.body {
                Body::None => false,
                Body::Json(v) => has(&v.to_string()),
                Body::Form(f) => f.iter().any(|(k, v)| has(k) || has(v)),
                Body::Raw(t) => has(t),
            }
    }

    /// A request with no expectation, capture, recorded response, name or
    /// group.
    pub fn new(
        from: String,
        origin: Origin,
        method: String,
        path: String,
        query: Pairs,
        headers: Pairs,
        body: Body,
    ) -> Step {
        Step {
            from,
            origin,
            method,
            path,
            query,
            headers,
            body,
            expect: None,
            capture: Vec::new(),
            response: None,
            name: None,
            groups: Vec::new(),
        }
    }
}

/// `hint` as a template variable's name: letters, digits and `_`, at most
/// 60 characters, never starting with a digit.
pub(crate) fn var_name(hint: &str) -> String {
    let mut s: String = hint
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .take(60)
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert_str(0, "v_");
    }
    s
}

/// `base` as an environment variable's name: capitals, digits and `_`,
/// at most 40 characters, never starting with a digit.
pub(crate) fn env_name(base: &str) -> String {
    let name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("SECRET_{name}")
    } else {
        name
    }
}

/// Calls `f` on every string inside `v`.
pub(crate) fn json_strings(v: &mut Value, f: &mut impl FnMut(&mut String)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|i| json_strings(i, f)),
        Value::Object(map) => map.values_mut().for_each(|i| json_strings(i, f)),
        _ => {}
    }
}

/// An input's requests.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    pub steps: Vec<Step>,
    /// `-k`: the server's certificate is not verified.
    pub insecure: bool,
    /// Environment variables the importer itself put in (a document's
    /// security schemes): name, and what it stands for.
    pub env: Vec<(String, String)>,
    pub notes: Vec<String>,
}

impl Flow {
    /// Keeps the steps to one origin (`wanted`, or the first step's): a
    /// scenario has one target. The others are named in a note.
    pub fn keep_origin(&mut self, wanted: Option<&str>) -> Result<(), ImportError> {
        let Some(first) = self.steps.first() else {
            return Err(ImportError::Empty("no request to import".into()));
        };
        let keep = match wanted {
            None => first.origin.clone(),
            Some(w) => {
                let url = url::Url::parse(w).map_err(|e| {
                    ImportError::Invalid(format!("--origin {w}: not a URL ({e}); give scheme://host[:port]"))
                })?;
                let Some((o, _, _)) = Origin::of(&url) else {
                    return Err(ImportError::Invalid(format!(
                        "--origin {w}: give an http:// or https:// origin"
                    )));
                };
                o
            }
        };
        let mut left: BTreeMap<String, usize> = BTreeMap::new();
        self.steps.retain(|s| {
            let same = s.origin == keep;
            if !same {
                *left.entry(s.origin.url()).or_default() += 1;
            }
            same
        });
        if self.steps.is_empty() {
            let seen: Vec<&str> = left.keys().map(String::as_str).collect();
            return Err(ImportError::Empty(format!(
                "no request goes to {}; the input's origins: {} (pick one with --origin)",
                keep.url(),
                seen.join(", ")
            )));
        }
        for (origin, n) in left {
            self.notes.push(format!(
                "left out {n} request(s) to {origin}: a scenario has one target (import them with --origin {origin})"
            ));
        }
        Ok(())
    }

    /// The target all steps go to.
    pub fn origin(&self) -> Option<&Origin> {
        self.steps.first().map(|s| &s.origin)
    }
}

/// Headers an importer never copies: the client computes them, or HTTP/2
/// pseudo-headers.
pub(crate) fn dropped_header(name: &str) -> bool {
    name.starts_with(':')
        || [
            "host",
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "upgrade",
            "te",
            "accept-encoding",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}
