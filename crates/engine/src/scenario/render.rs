//! A step's request rendered from its templates for one VU: target
//! (percent-encoded), headers, body (JSON, form or raw). I/O-free.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use throng_scenario::{Body, Context, JsonTemplate, Request};

use throng_plan::Rng;

use super::ops::{Scen, Vu};
use crate::trace::Tracer;

/// A request rendered: its target, headers (without the jar's cookies) and
/// body; plan's one writer (`RequestHead`) makes the bytes.
pub(super) struct Rendered {
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

/// What a VU's templates and expressions read: its variables, its last
/// status, the scenario's environment and setup captures.
pub(super) fn context<'a>(sc: &'a Scen, vu: &'a mut Vu) -> Context<'a> {
    let status = vu.status;
    let mut cx = vu_reads!(sc, vu).into_context();
    cx.status = status;
    cx
}

/// The parts of a VU an expression reads, borrowed apart from the session
/// a response is in: a request's captures go into `vars`, then its checks
/// read them.
pub(super) struct VuReads<'a> {
    pub(super) sc: &'a Scen,
    pub(super) id: u64,
    pub(super) iter: u64,
    pub(super) vars: &'a mut HashMap<String, String>,
    pub(super) rng: &'a mut Rng,
}

/// A VU's [`VuReads`], borrowed field by field: its session stays free for
/// the response being read.
macro_rules! vu_reads {
    ($sc:expr, $vu:expr) => {
        $crate::scenario::render::VuReads {
            sc: $sc,
            id: $vu.id,
            iter: $vu.iter,
            vars: &mut $vu.vars,
            rng: &mut $vu.rng,
        }
    };
}
pub(super) use vu_reads;

impl<'a> VuReads<'a> {
    /// What the expressions read (`status` 0: a check reads its response's).
    pub(super) fn into_context(self) -> Context<'a> {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Context {
            vu: self.id,
            iter: self.iter,
            scenario: &self.sc.def.name,
            rng: self.rng,
            vars: self.vars,
            env: &self.sc.env,
            setup: &self.sc.setup,
            now_ms,
            status: 0,
            failed: None,
        }
    }
}

/// Renders one template with the VU's variables (an `add:` step's value);
/// the error of an expression in it that failed.
pub(super) fn text(sc: &Scen, vu: &mut Vu, t: &throng_scenario::Template) -> Result<String, String> {
    let mut cx = context(sc, vu);
    let out = t.render(&mut cx);
    cx.failed.map_or(Ok(out), Err)
}

/// Why a request's templates gave no request.
pub(super) enum Unsent {
    /// A header value carries a control character (a captured or data
    /// value with a line break, say): such a request would smuggle a header
    /// or a request of its own, so it is never sent.
    Smuggled,
    /// An expression failed (its message): the iteration fails with it.
    Expression(String),
}

/// A step's request rendered ([`render`]); None when it would smuggle a
/// header (the caller counts it as never sent). Err: an expression failed,
/// and the VU's `fault` says which — the step must not begin.
pub(super) fn for_step(sc: &Scen, vu: &mut Vu, req: &Request, trace: Option<&Tracer>) -> Result<Option<Rendered>, ()> {
    match render(sc, vu, req, trace) {
        Ok(r) => Ok(Some(r)),
        Err(Unsent::Smuggled) => Ok(None),
        Err(Unsent::Expression(message)) => {
            vu.fault = Some(message);
            Err(())
        }
    }
}

/// Renders a request's target, headers and body; with `trace`, a
/// `traceparent` under the VU's iteration's trace id, with a new span id.
pub(super) fn render(sc: &Scen, vu: &mut Vu, req: &Request, trace: Option<&Tracer>) -> Result<Rendered, Unsent> {
    let trace_id = vu.trace;
    let mut cx = context(sc, vu);
    let mut target = String::with_capacity(128);
    let mut scratch = String::new();

    // Body first: its length goes in the head.
    let (body, content_type): (Vec<u8>, Option<&str>) = match &req.body {
        Body::None => (Vec::new(), None),
        Body::Json(j) => {
            let mut out = String::new();
            write_json(j, &mut cx, &mut out);
            (out.into_bytes(), Some("application/json"))
        }
        Body::Form(fields) => {
            let mut out = String::new();
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push('&');
                }
                encode_component(k, &mut out);
                out.push('=');
                scratch.clear();
                v.render_into(&mut cx, &mut scratch);
                encode_component(&scratch, &mut out);
            }
            (out.into_bytes(), Some("application/x-www-form-urlencoded"))
        }
        Body::Raw(t) => (t.render(&mut cx).into_bytes(), None),
    };

    scratch.clear();
    scratch.push_str(&sc.plan.target.base_path);
    req.path.render_into(&mut cx, &mut scratch);
    encode_target(&scratch, &mut target);
    for (i, (k, v)) in req.query.iter().enumerate() {
        let has_query = i > 0 || scratch.contains('?');
        target.push(if has_query { '&' } else { '?' });
        encode_component(k, &mut target);
        target.push('=');
        scratch.clear();
        v.render_into(&mut cx, &mut scratch);
        encode_component(&scratch, &mut target);
    }
    let own = |name: &str| req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut headers: Vec<(String, String)> = Vec::with_capacity(sc.plan.defaults.headers.len() + req.headers.len() + 1);
    let defaults = sc.plan.defaults.headers.iter().filter(|(k, _)| !own(k));
    for (k, v) in defaults.chain(&req.headers) {
        let value = v.render(&mut cx);
        if value.chars().any(throng_plan::is_forbidden_in_value) {
            return Err(Unsent::Smuggled);
        }
        headers.push((k.clone(), value));
    }
    if let Some(ct) = content_type
        && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("Content-Type".to_string(), ct.to_string()));
    }
    if let Some(e) = cx.failed {
        return Err(Unsent::Expression(e));
    }
    if let (Some(t), Some(id)) = (trace, &trace_id) {
        headers.push((throng_plan::TRACEPARENT.to_string(), t.value(id)));
    }
    Ok(Rendered { target, headers, body })
}

/// A list of JSON messages rendered for `vu`, each its text. Err: an
/// expression failed, and the VU's `fault` says which.
pub(super) fn json_list(sc: &Scen, vu: &mut Vu, list: &[JsonTemplate]) -> Result<Vec<String>, ()> {
    let mut cx = context(sc, vu);
    let mut out = Vec::with_capacity(list.len());
    for j in list {
        let mut text = String::new();
        write_json(j, &mut cx, &mut text);
        out.push(text);
    }
    let failed = cx.failed.take();
    drop(cx);
    if let Some(message) = failed {
        vu.fault = Some(message);
        return Err(());
    }
    Ok(out)
}

fn write_json(j: &JsonTemplate, cx: &mut Context<'_>, out: &mut String) {
    match j {
        JsonTemplate::Value(v) => out.push_str(&v.to_string()),
        JsonTemplate::Text(t) => out.push_str(&serde_json::Value::String(t.render(cx)).to_string()),
        JsonTemplate::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, cx, out);
            }
            out.push(']');
        }
        JsonTemplate::Object(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_json(v, cx, out);
            }
            out.push('}');
        }
    }
}

/// Percent-encodes what may not appear in a request target (spaces,
/// controls, non-ASCII); keeps `/ ? & = %` and the rest as written.
pub(super) fn encode_target(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_graphic() {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// Percent-encodes a query or form component (RFC 3986 unreserved kept).
pub(super) fn encode_component(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_and_targets_are_encoded() {
        let mut out = String::new();
        encode_component("a b&c=d/é", &mut out);
        assert_eq!(out, "a%20b%26c%3Dd%2F%C3%A9");
        let mut out = String::new();
        encode_target("/users/a b?x=1", &mut out);
        assert_eq!(out, "/users/a%20b?x=1");
    }
}
