//! A scenario's `grpc:` steps: a call as a stream on the VU's own HTTP/2
//! connection (the scenario's target is `http: 2`, which the file's
//! validation made sure of).
//!
//! ```text
//!  message (JSON template) ── render ── Method::encode ──► framed message
//!    (a message without templates was encoded once, when the file was read)
//!  metadata + defaults.headers ── render ──► headers, with content-type
//!    application/grpc, te: trailers, grpc-timeout (deadline:)
//!  Own::call ──► grpc-status (the status recorded), the reply kept
//!  Method::decode_last(reply) ──► JSON text ──► captures, checks
//! ```

use std::pin::pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_metrics::{ErrorClass, Phase, ScenarioRecorder};
use throng_plan::{HttpVersion, StatusSet};
use throng_scenario::{CaptureFrom, CheckKind, GrpcStep, ResponseView};

use super::flight::{begin, captures_and_checks, not_sent, unanswered};
use super::ops::{GrpcOp, ReqOp, Scen, Vu, with_scen};
use super::render::{Rendered, for_step, json_list, vu_reads};
use crate::ctx::Ctx;
use crate::proto::grpc::frame::{gzip_messages, last_inflated};
use crate::proto::http1::Keep;
use crate::proto::http2::{CallShape, Requests};
use crate::proto::vu::{stream_reply, stream_request, stream_session, stream_slot};
use crate::record::record_exchange;
use crate::redirect::Place;

/// Headers defaults.headers may not set on a call (a step's metadata
/// cannot): the protocol's own, `grpc-*` too, and a body length, which the
/// message decides.
const PROTOCOL: [&str; 3] = ["content-type", "te", "content-length"];

impl GrpcOp {
    /// The step compiled: its tags, checks and what its reply keeps.
    pub(super) fn new(g: &GrpcStep, tags: &[usize], rec: &mut ScenarioRecorder) -> GrpcOp {
        let r = &g.request;
        let mut t = tags.to_vec();
        t.push(rec.tag(&format!("step:{}", r.name)));
        let decode = r.captures.iter().any(|c| !matches!(c.from, CaptureFrom::Header(_)))
            || r.checks.iter().any(|c| c.kind.reads_body());
        let keep = Keep {
            server: false,
            headers: r.captures.iter().any(|c| matches!(c.from, CaptureFrom::Header(_)))
                || r.checks.iter().any(|c| matches!(c.kind, CheckKind::Header(..))),
            // At most 64 MiB (checked when the file was read).
            body: if decode {
                usize::try_from(r.max_body).unwrap_or(usize::MAX)
            } else {
                0
            },
        };
        GrpcOp {
            op: ReqOp {
                checks: r.checks.iter().map(|c| rec.check_index(&c.name)).collect(),
                tags: t,
                keep,
                head: false,
                req: r.clone(),
            },
            // Compressed once, when the step has no template.
            framed: g.framed.as_deref().and_then(|f| framed_for(g, f.to_vec())),
            expect: StatusSet::from_codes(&g.expect),
            timeout_header: g.deadline.map(grpc_timeout),
            decode,
            step: g.clone(),
        }
    }
}

/// `grpc-timeout`: at most 8 digits and a unit (gRPC over HTTP/2).
fn grpc_timeout(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms < 100_000_000 {
        format!("{ms}m")
    } else {
        format!("{}S", d.as_secs().min(99_999_999))
    }
}

/// One call: render, connect if needed, call, record, capture, check.
pub(super) async fn call(ctx: &Ctx, sc: &Scen, vu: &mut Vu, g: &GrpcOp, origin: Option<Instant>) {
    let op = &g.op;
    // An expression that failed: the step never begins.
    let Ok(rendered) = for_step(sc, vu, &op.req, ctx.spec.trace.as_ref()) else {
        return;
    };
    // A list's messages, when one has a template.
    let texts = match (&g.framed, g.step.messages.is_empty()) {
        (None, false) => match json_list(sc, vu, &g.step.messages) {
            Ok(t) => Some(t),
            Err(()) => return,
        },
        _ => None,
    };
    let (started, mut flight, mut row) = begin(ctx, sc, vu, &op.tags, &op.req.name);
    flight.traced(vu.trace, origin.unwrap_or(started), row.row());
    if let Some(r) = row.row() {
        if let Some(due) = origin {
            r.phase(Phase::ScheduleLag, started.saturating_duration_since(due));
        }
        if let Some(id) = vu.conns.id(HttpVersion::Http2) {
            r.conn(id);
        }
    }
    // A rendered value a header cannot carry, or a message that does not
    // fit the method's input type: never sent, counted `protocol`.
    let Some(rendered) = rendered else {
        return not_sent(ctx, op, flight, row, ErrorClass::Protocol);
    };
    let body = match (&g.framed, &g.step.method) {
        (Some(f), _) => f.clone(),
        (None, Some(m)) => match encode(m, g, &rendered.body, texts) {
            Some(b) => b,
            None => return not_sent(ctx, op, flight, row, ErrorClass::Protocol),
        },
        // A plan read back from a result has no descriptors; never run.
        (None, None) => return not_sent(ctx, op, flight, row, ErrorClass::Protocol),
    };
    // A client stream sends its messages in order, cycled to
    // stream_messages.
    let (body, requests) = if g.step.client_streaming {
        match cycle(&body, g.step.stream_messages) {
            Some(b) => {
                let r = Requests::of(&b, g.step.stream_rate);
                (b, Some(r))
            }
            None => return not_sent(ctx, op, flight, row, ErrorClass::Protocol),
        }
    } else {
        (body, None)
    };
    let Some((request, request_len)) = call_request(sc, g, rendered, body.len()) else {
        return not_sent(ctx, op, flight, row, ErrorClass::Protocol);
    };
    let timeout = op.req.timeout;
    stream_session(&mut vu.session);
    vu.session.reset(op.keep);
    // Lost or going away (GOAWAY): this call goes on a new one.
    vu.conns.drop_unusable(ctx, HttpVersion::Http2, timeout).await;
    let mut sleep = pin!(tokio::time::sleep(timeout));
    if !vu.conns.has(HttpVersion::Http2) {
        let dest = &sc.dest.conn;
        let opened = vu
            .conns
            .open(ctx, HttpVersion::Http2, dest, None, sleep.as_mut(), row.row())
            .await;
        match opened {
            Ok(id) => {
                if let Some(r) = row.row() {
                    r.conn(id);
                }
            }
            Err(class) => return not_sent(ctx, op, flight, row, class),
        }
    }
    // A deadline shorter than the timeout ends the wait first.
    let deadline = g.step.deadline.filter(|d| *d < timeout);
    let t_send = Instant::now();
    sleep.as_mut().reset((t_send + deadline.unwrap_or(timeout)).into());
    let Some(slot) = stream_slot(&mut vu.session) else {
        // Invariant: set above.
        return not_sent(ctx, op, flight, row, ErrorClass::Protocol);
    };
    let shape = CallShape {
        server_streaming: g.step.server_streaming,
        requests: requests.as_ref(),
    };
    let called = vu
        .conns
        .call(
            ctx,
            request,
            &body,
            shape,
            deadline.is_some(),
            &g.expect,
            slot,
            sleep.as_mut(),
        )
        .await;
    let Some(outcome) = called else {
        // Invariant: opened above.
        return not_sent(ctx, op, flight, row, ErrorClass::Protocol);
    };
    let expected = record_exchange(
        ctx,
        &mut vu.session,
        &outcome,
        request_len,
        t_send,
        origin.unwrap_or(t_send),
        &g.expect,
        false,
        row.row(),
    );
    drop(row);
    flight.settled(&outcome, &vu.session);
    match (outcome, expected, stream_reply(&vu.session)) {
        (Ok(timing), Some(expected), Some(slot)) => {
            let done = timing.done;
            flight.end(done, Some((done - t_send, expected)), !expected);
            if slot.body_truncated() {
                with_scen(ctx, |r| r.body_truncated());
            }
            let json = match (&g.step.method, g.decode) {
                // A gzip reply's last message inflated first.
                (Some(m), true) => last_inflated(slot.body()).and_then(|last| m.decode_last(&last)),
                _ => None,
            };
            let view = ResponseView {
                status: slot.status,
                headers: slot.headers(),
                body: json.as_deref().unwrap_or_default().as_bytes(),
                duration: done - t_send,
            };
            let reader = vu_reads!(sc, vu);
            captures_and_checks(ctx, op, reader, &view);
        }
        _ => unanswered(ctx, op, flight),
    }
}

/// The step's framed messages as a call sends them: gzip-compressed with
/// `encoding: gzip`. None past the body limit.
fn framed_for(g: &GrpcStep, framed: Vec<u8>) -> Option<Bytes> {
    if g.gzip {
        gzip_messages(&framed).map(Bytes::from)
    } else {
        Some(Bytes::from(framed))
    }
}

/// The rendered messages (the list's `texts`, else the request's body)
/// encoded and framed, one after another; None when one does not fit the
/// method's input type.
fn encode(m: &throng_scenario::grpc::Method, g: &GrpcOp, body: &[u8], texts: Option<Vec<String>>) -> Option<Bytes> {
    let mut framed = Vec::new();
    match texts {
        Some(texts) => {
            for t in &texts {
                framed.extend_from_slice(&m.encode(t).ok()?);
            }
        }
        None => framed = m.encode(std::str::from_utf8(body).ok()?).ok()?,
    }
    framed_for(&g.step, framed)
}

/// `messages` (whole framed messages) cycled to `n` (none: as they are),
/// or None past the body limit (templated messages that render large).
fn cycle(messages: &Bytes, n: Option<u64>) -> Option<Bytes> {
    let ends = Requests::of(messages, None).ends;
    let k = ends.len();
    let n = n.map_or(k, |n| usize::try_from(n).unwrap_or(usize::MAX));
    if n == k || k == 0 {
        return Some(messages.clone());
    }
    let mut body = Vec::new();
    for i in 0..n {
        let j = i % k;
        let start = if j == 0 { 0 } else { ends[j - 1] };
        body.extend_from_slice(messages.get(start..ends[j])?);
        if body.len() as u64 > throng_plan::MAX_BODY_BYTES {
            return None;
        }
    }
    Some(Bytes::from(body))
}

/// The call's request: the step's rendered headers without the protocol's
/// own, `content-type: application/grpc`, `te: trailers` and
/// `grpc-timeout` (`deadline:`); and its size as `stream_request` counts
/// it. None when a header cannot be sent.
fn call_request(sc: &Scen, g: &GrpcOp, rendered: Rendered, body_len: usize) -> Option<(http::Request<()>, usize)> {
    let op = &g.op;
    let headers: Vec<(String, String)> = rendered
        .headers
        .into_iter()
        .filter(|(n, _)| {
            !PROTOCOL.iter().any(|p| n.eq_ignore_ascii_case(p))
                && !n.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("grpc-"))
        })
        .collect();
    let place = Place {
        https: sc.base.https,
        host: sc.base.host.clone(),
        port: sc.base.port,
        target: op.req.path.source().to_string(),
    };
    let (mut request, mut request_len) = stream_request("POST", &place, &headers, body_len, HttpVersion::Http2)?;
    let map = request.headers_mut();
    map.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    map.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    // As stream_request counts fields: name, value and 4 bytes each.
    request_len += ("content-type".len() + "application/grpc".len() + 4) + ("te".len() + "trailers".len() + 4);
    if let Some(t) = &g.timeout_header
        && let Ok(v) = http::HeaderValue::from_str(t)
    {
        request_len += 12 + t.len() + 4;
        map.insert("grpc-timeout", v);
    }
    if g.step.gzip {
        let gzip = http::HeaderValue::from_static("gzip");
        request_len += ("grpc-encoding".len() + 4 + 4) + ("grpc-accept-encoding".len() + 4 + 4);
        map.insert("grpc-encoding", gzip.clone());
        map.insert("grpc-accept-encoding", gzip);
    }
    Some((request, request_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_fit_eight_digits() {
        assert_eq!(grpc_timeout(Duration::from_millis(250)), "250m");
        assert_eq!(grpc_timeout(Duration::from_micros(10)), "1m");
        assert_eq!(grpc_timeout(Duration::from_secs(200_000)), "200000S");
    }

    #[test]
    fn a_list_of_messages_is_cycled_in_order() {
        let (a, b) = (&[0u8, 0, 0, 0, 1, 7][..], &[0u8, 0, 0, 0, 0][..]);
        let list = Bytes::from([a, b].concat());
        assert_eq!(cycle(&list, None).unwrap(), list);
        assert_eq!(cycle(&list, Some(2)).unwrap(), list);
        assert_eq!(cycle(&list, Some(3)).unwrap(), Bytes::from([a, b, a].concat()));
        assert_eq!(cycle(&list, Some(1)).unwrap(), Bytes::from(a.to_vec()));
        // One message of 1 MiB 100 times is past 64 MiB.
        let big = Bytes::from([&[0u8, 0, 0x10, 0, 0][..], &vec![0u8; 1 << 20]].concat());
        assert!(cycle(&big, Some(100)).is_none());
    }
}
