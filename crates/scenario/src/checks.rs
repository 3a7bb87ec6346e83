//! Captures (values taken from a response into variables) and checks
//! (named assertions on a response, counted pass/fail).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::expr::{self, Condition, Value};

/// The parts of a response captures and checks read.
#[derive(Clone, Copy, Debug)]
pub struct ResponseView<'a> {
    /// HTTP status.
    pub status: u16,
    /// Headers, in order.
    pub headers: &'a [(String, String)],
    /// The body (after transfer decoding).
    pub body: &'a [u8],
    /// Response time.
    pub duration: Duration,
}

impl ResponseView<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json_at(&self, pointer: &str) -> Option<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_slice(self.body).ok()?;
        v.pointer(pointer).cloned()
    }
}

/// Where a captured value comes from.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaptureFrom {
    /// A JSON pointer into the body (`/data/token`).
    Json(String),
    /// A response header.
    Header(String),
    /// A regular expression on the body; its first group (or the match).
    Regex(#[serde(with = "regex_serde")] regex::Regex),
}

impl PartialEq for CaptureFrom {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CaptureFrom::Json(a), CaptureFrom::Json(b)) | (CaptureFrom::Header(a), CaptureFrom::Header(b)) => a == b,
            (CaptureFrom::Regex(a), CaptureFrom::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

/// A value taken from a response into a variable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    /// The variable.
    pub var: String,
    /// Where from.
    pub from: CaptureFrom,
}

impl Capture {
    /// The captured text, if the response has it.
    pub fn extract(&self, r: &ResponseView<'_>) -> Option<String> {
        match &self.from {
            CaptureFrom::Json(p) => r.json_at(p).map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }),
            CaptureFrom::Header(h) => r.header(h).map(str::to_string),
            CaptureFrom::Regex(re) => {
                let body = std::str::from_utf8(r.body).ok()?;
                let c = re.captures(body)?;
                c.get(1).or_else(|| c.get(0)).map(|m| m.as_str().to_string())
            }
        }
    }
}

/// What a check asserts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// The status is one of these.
    Status(Vec<u16>),
    /// The body contains this text.
    BodyContains(String),
    /// The JSON value at the pointer exists.
    JsonExists(String),
    /// The JSON value at the pointer equals this value.
    JsonEquals(String, serde_json::Value),
    /// The header exists (and contains this text, if given).
    Header(String, Option<String>),
    /// The response took less than this.
    DurationUnder(#[serde(with = "throng_plan::serde_duration")] Duration),
    /// The expression holds: it reads the VU's variables (this step's
    /// captures included), `status`, `duration_ms`, `body` and
    /// `json(POINTER)`.
    Expr(Condition),
}

impl CheckKind {
    /// True when the check reads the response's body.
    pub fn reads_body(&self) -> bool {
        match self {
            CheckKind::BodyContains(_) | CheckKind::JsonExists(_) | CheckKind::JsonEquals(..) => true,
            CheckKind::Expr(c) => c.expr.calls("json") || c.expr.variables().contains(&"body"),
            CheckKind::Status(_) | CheckKind::Header(..) | CheckKind::DurationUnder(_) => false,
        }
    }
}

/// A named assertion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Its name in reports and thresholds (`checks{check:NAME}`).
    pub name: String,
    /// What it asserts.
    pub kind: CheckKind,
}

impl Check {
    /// True when the response satisfies it; `vu` is what an `expr:` reads
    /// besides the response (an expression that fails to evaluate fails
    /// the check).
    pub fn passes(&self, r: &ResponseView<'_>, vu: &mut dyn expr::Context) -> bool {
        match &self.kind {
            CheckKind::Status(codes) => codes.contains(&r.status),
            CheckKind::BodyContains(t) => r.body.windows(t.len().max(1)).any(|w| w == t.as_bytes()) || t.is_empty(),
            CheckKind::JsonExists(p) => r.json_at(p).is_some(),
            CheckKind::JsonEquals(p, v) => r.json_at(p).is_some_and(|x| &x == v || json_loose_eq(&x, v)),
            CheckKind::Header(h, contains) => r
                .header(h)
                .is_some_and(|v| contains.as_ref().is_none_or(|c| v.contains(c.as_str()))),
            CheckKind::DurationUnder(d) => r.duration < *d,
            CheckKind::Expr(c) => c.expr.eval(&mut Reading { r, vu }).is_ok_and(|v| v.truthy()),
        }
    }
}

/// What a check's expression reads: the response, then the VU.
struct Reading<'a, 'r> {
    r: &'a ResponseView<'r>,
    vu: &'a mut dyn expr::Context,
}

impl expr::Context for Reading<'_, '_> {
    fn var(&self, name: &str) -> Option<Value> {
        match name {
            "status" => Some(Value::Num(f64::from(self.r.status))),
            "duration_ms" => Some(Value::Num(self.r.duration.as_secs_f64() * 1000.0)),
            "body" => Some(Value::Str(String::from_utf8_lossy(self.r.body).into_owned())),
            _ => self.vu.var(name),
        }
    }

    fn random(&mut self, lo: i64, hi: i64) -> i64 {
        self.vu.random(lo, hi)
    }

    fn json(&self, pointer: &str) -> Option<Value> {
        self.r.json_at(pointer).map(|v| expr::from_json(&v))
    }
}

/// `"200"` equals `200`: YAML authors write either.
fn json_loose_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    text(a) == text(b)
}

pub(crate) mod regex_serde {
    use serde::Deserialize;

    pub fn serialize<S: serde::Serializer>(re: &regex::Regex, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(re.as_str())
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<regex::Regex, D::Error> {
        let text = String::deserialize(d)?;
        regex::Regex::new(&text).map_err(serde::de::Error::custom)
    }
}

/// [`regex_serde`] for an optional regex.
pub(crate) mod regex_serde_opt {
    use serde::Deserialize;

    pub fn serialize<S: serde::Serializer>(re: &Option<regex::Regex>, s: S) -> Result<S::Ok, S::Error> {
        match re {
            Some(re) => s.serialize_some(re.as_str()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<regex::Regex>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| regex::Regex::new(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_and_checks_read_the_response() {
        let headers = vec![("Set-Cookie".to_string(), "sid=42; Path=/".to_string())];
        let body = br#"{"data":{"token":"abc","n":3},"message":"OTP sent"}"#;
        let r = ResponseView {
            status: 200,
            headers: &headers,
            body,
            duration: Duration::from_millis(20),
        };
        let cap = |from| Capture { var: "x".into(), from };
        assert_eq!(
            cap(CaptureFrom::Json("/data/token".into())).extract(&r).as_deref(),
            Some("abc")
        );
        assert_eq!(
            cap(CaptureFrom::Json("/data/n".into())).extract(&r).as_deref(),
            Some("3")
        );
        assert_eq!(
            cap(CaptureFrom::Header("set-cookie".into())).extract(&r).as_deref(),
            Some("sid=42; Path=/")
        );
        let re = regex::Regex::new(r#""message":"([^"]+)""#).unwrap();
        assert_eq!(cap(CaptureFrom::Regex(re)).extract(&r).as_deref(), Some("OTP sent"));
        assert_eq!(cap(CaptureFrom::Json("/nope".into())).extract(&r), None);

        let check = |kind| Check { name: "c".into(), kind }.passes(&r, &mut NoVu);
        assert!(check(CheckKind::Status(vec![200, 201])));
        assert!(!check(CheckKind::Status(vec![401])));
        assert!(check(CheckKind::BodyContains("OTP".into())));
        assert!(check(CheckKind::JsonExists("/data/token".into())));
        assert!(check(CheckKind::JsonEquals("/data/n".into(), serde_json::json!(3))));
        assert!(check(CheckKind::JsonEquals("/data/n".into(), serde_json::json!("3"))));
        assert!(check(CheckKind::Header("Set-Cookie".into(), Some("sid=".into()))));
        assert!(!check(CheckKind::Header("X-None".into(), None)));
        assert!(check(CheckKind::DurationUnder(Duration::from_millis(50))));
        assert!(!check(CheckKind::DurationUnder(Duration::from_millis(10))));
        let expr = |text: &str| CheckKind::Expr(Condition::parse(text).unwrap());
        assert!(check(expr("status == 200 && json('/data/n') * 2 == 6")));
        assert!(check(expr("contains(body, 'OTP') && json('/data/token') == 'abc'")));
        assert!(check(expr("duration_ms < 50 && json('/nope') == null")));
        assert!(!check(expr("json('/data/n') > 3")));
        assert!(!check(expr("number(json('/message')) > 1")), "an error fails the check");
        assert!(check(expr("vu_var == 'from the VU'")));
        assert!(expr("json('/a') == 1").reads_body() && expr("len(body) > 0").reads_body());
        assert!(!expr("status == 200").reads_body());
    }

    struct NoVu;
    impl expr::Context for NoVu {
        fn var(&self, name: &str) -> Option<Value> {
            (name == "vu_var").then(|| Value::Str("from the VU".into()))
        }
        fn random(&mut self, lo: i64, _: i64) -> i64 {
            lo
        }
    }
}
