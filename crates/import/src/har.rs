//! HTTP Archives (HAR 1.2): `log.entries`, each a request and the response
//! the browser got, in the order they started.
//!
//! What a VU would not send itself is left out and said so: CORS preflights
//! (the browser's, not the page's), requests to other schemes (`data:`,
//! extensions), bodies too large for a scenario file. Cookies are the VU's
//! jar's (it stores what responses set), so recorded `Cookie` headers are
//! dropped; the responses are kept for capture inference only.

use base64::Engine as _;
use serde_json::Value;

use crate::model::{Body, Flow, ImportError, Origin, Response, Step, dropped_header};

/// A request body larger than this is left out (a scenario file holds at
/// most 4 MiB, and its bodies are text).
const MAX_BODY: usize = 64 * 1024;
/// A response body larger than this is not searched for values to capture.
const MAX_RESPONSE: usize = 1024 * 1024;

/// The requests of the HAR document `input`.
pub(crate) fn parse(input: &str) -> Result<Flow, ImportError> {
    let doc: Value = serde_json::from_str(input.trim_start_matches('\u{feff}'))
        .map_err(|e| ImportError::Invalid(format!("not a HAR file: not JSON ({e})")))?;
    let entries = doc
        .pointer("/log/entries")
        .and_then(Value::as_array)
        .ok_or_else(|| ImportError::Invalid("not a HAR file: it has no log.entries list".into()))?;
    let mut flow = Flow::default();
    let (mut preflights, mut other_schemes, mut large) = (0, 0, Vec::new());
    let mut browser_headers = false;
    let mut braces = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let n = i + 1;
        let req = e.get("request").ok_or_else(|| bad(n, "has no request"))?;
        let method = text(req, "method").ok_or_else(|| bad(n, "has no request.method"))?;
        let raw = text(req, "url").ok_or_else(|| bad(n, "has no request.url"))?;
        let Some((origin, path, query)) = url::Url::parse(raw).ok().as_ref().and_then(Origin::of) else {
            other_schemes += 1;
            continue;
        };
        let headers = pairs(req.get("headers"));
        if method.eq_ignore_ascii_case("OPTIONS")
            && headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("access-control-request-method"))
        {
            preflights += 1;
            continue;
        }
        let before = headers.len();
        let mut kept: Vec<(String, String)> = headers
            .into_iter()
            .filter(|(k, _)| !dropped_header(k) && !k.eq_ignore_ascii_case("cookie"))
            .filter(|(k, _)| !k.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("sec-")))
            .collect();
        browser_headers |= kept.len() < before;
        let body = match body(req.get("postData")) {
            Ok(b) => b,
            Err(size) => {
                large.push(format!("entry {n} ({size} bytes)"));
                continue;
            }
        };
        if matches!(body, Body::Json(_) | Body::Form(_)) {
            // `json:` and `form:` set the Content-Type themselves.
            kept.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
        }
        let response = e.get("response").map(response);
        let expect = response
            .as_ref()
            .map(|r| r.status)
            .filter(|s| !(200..400).contains(s) && *s >= 100);
        let step = Step::new(
            format!("HAR entry {n}"),
            origin,
            method.to_ascii_uppercase(),
            path,
            query,
            kept,
            body,
        );
        if step.holds_braces() {
            braces.push(n);
            continue;
        }
        flow.steps.push(Step {
            expect,
            response,
            ..step
        });
    }
    if browser_headers {
        flow.notes.push(
            "left out the browser's own headers (Cookie: the VU's jar keeps cookies; Sec-*: fetch metadata and \
             client hints; Host, Content-Length, Accept-Encoding: throng sets its own)"
                .into(),
        );
    }
    if !braces.is_empty() {
        let list: Vec<String> = braces.iter().take(20).map(usize::to_string).collect();
        flow.notes.push(format!(
            "left out entries whose request holds `{{{{` (a scenario reads it as a template; add them by hand): {}",
            list.join(", ")
        ));
    }
    if preflights > 0 {
        flow.notes.push(format!(
            "left out {preflights} CORS preflight request(s) (OPTIONS the browser sends on its own)"
        ));
    }
    if other_schemes > 0 {
        flow.notes.push(format!(
            "left out {other_schemes} request(s) that are not http:// or https:// (data:, extensions)"
        ));
    }
    if !large.is_empty() {
        flow.notes.push(format!(
            "left out request(s) with a body over {} KiB: {}",
            MAX_BODY / 1024,
            large.join(", ")
        ));
    }
    if flow.steps.is_empty() {
        return Err(ImportError::Empty(
            "the HAR file has no http:// or https:// request to import".into(),
        ));
    }
    Ok(flow)
}

fn bad(n: usize, what: &str) -> ImportError {
    ImportError::Invalid(format!("not a HAR file: entry {n} {what}"))
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A HAR list of `{name, value}`.
fn pairs(list: Option<&Value>) -> Vec<(String, String)> {
    list.and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|p| Some((text(p, "name")?.to_string(), text(p, "value").unwrap_or("").to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A request's body; Err(size) when it is too large to keep.
fn body(post: Option<&Value>) -> Result<Body, usize> {
    let Some(post) = post else {
        return Ok(Body::None);
    };
    let mime = text(post, "mimeType").unwrap_or("").to_ascii_lowercase();
    let data = text(post, "text").unwrap_or("");
    if data.len() > MAX_BODY {
        return Err(data.len());
    }
    if mime.starts_with("application/json")
        && let Ok(v) = serde_json::from_str(data)
    {
        return Ok(Body::Json(v));
    }
    if mime.starts_with("application/x-www-form-urlencoded") {
        let params = pairs(post.get("params"));
        if !params.is_empty() {
            return Ok(Body::Form(params));
        }
        if !data.is_empty() {
            return Ok(Body::Form(
                url::form_urlencoded::parse(data.as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            ));
        }
    }
    Ok(if data.is_empty() {
        Body::None
    } else {
        Body::Raw(data.to_string())
    })
}

fn response(r: &Value) -> Response {
    let status = r.get("status").and_then(Value::as_u64).unwrap_or(0);
    let content = r.get("content");
    let mime = content.and_then(|c| text(c, "mimeType")).unwrap_or("");
    let body = content.and_then(|c| text(c, "text")).unwrap_or("");
    let json = if mime.contains("json") && body.len() <= MAX_RESPONSE {
        let decoded;
        let body = if content.and_then(|c| text(c, "encoding")) == Some("base64") {
            decoded = base64::engine::general_purpose::STANDARD
                .decode(body)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default();
            decoded.as_str()
        } else {
            body
        };
        serde_json::from_str(body).ok()
    } else {
        None
    };
    Response {
        status: u16::try_from(status).unwrap_or(0),
        headers: pairs(r.get("headers")),
        json,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entries_become_steps_and_what_a_vu_would_not_send_is_said() {
        let har = serde_json::json!({"log": {"entries": [
            {"request": {"method": "GET", "url": "http://h:8080/a?x=1", "headers": [
                {"name": ":authority", "value": "h"}, {"name": "Cookie", "value": "s=1"},
                {"name": "Accept", "value": "text/html"}]},
             "response": {"status": 404, "headers": [], "content": {"mimeType": "text/html", "text": ""}}},
            {"request": {"method": "OPTIONS", "url": "http://h:8080/b", "headers": [
                {"name": "Access-Control-Request-Method", "value": "POST"}]}},
            {"request": {"method": "POST", "url": "http://h:8080/b", "headers": [
                {"name": "Content-Type", "value": "application/json"}],
                "postData": {"mimeType": "application/json", "text": "{\"k\":[1,2]}"}}},
            {"request": {"method": "GET", "url": "data:image/png;base64,AAAA", "headers": []}}
        ]}});
        let f = parse(&har.to_string()).unwrap();
        assert_eq!(f.steps.len(), 2);
        assert_eq!(f.steps[0].headers, [("Accept".to_string(), "text/html".to_string())]);
        assert_eq!(f.steps[0].expect, Some(404));
        assert_eq!(f.steps[1].body, Body::Json(serde_json::json!({"k": [1, 2]})));
        assert!(f.steps[1].headers.is_empty());
        assert_eq!(f.notes.len(), 3, "{:?}", f.notes);
    }

    #[test]
    fn what_is_not_a_har_file_is_refused_saying_why() {
        for (input, want) in [
            ("nope", "not JSON"),
            ("{}", "no log.entries"),
            (r#"{"log":{"entries":[{}]}}"#, "entry 1 has no request"),
            (r#"{"log":{"entries":[]}}"#, "no http://"),
        ] {
            let e = parse(input).unwrap_err().to_string();
            assert!(e.contains(want), "{input}: {e}");
        }
    }
}
