//! Scenario `sse:` steps over HTTP/3 against the lab's quinn-based server
//! (`GET /sse`, `POST /v1/chat/completions`): the awaited event's capture
//! feeds the next steps on the VU's own QUIC connection; `events:`,
//! `duration:`, a stall and an unmet `expect_event` end a stream by class
//! while the connection goes on; events, streams and requests counted
//! exactly, the books balanced.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_books_balance, h3_lab, output, schema_violations, throng};
use throng_result::RunResult;

/// `throng run` on `yaml` (TARGET: the lab's HTTP/3 server, CA: its CA)
/// against a fresh lab: exit code, result, stdout and stderr.
fn run(yaml: &str) -> (i32, RunResult, String) {
    let (d, c) = common::certs();
    let server = h3_lab(&c, None);
    let target = format!("https://localhost:{}", server.addr().port());
    let file = d.path().join("s.yaml");
    let ca = c.join("ca.pem").display().to_string();
    std::fs::write(&file, yaml.replace("TARGET", &target).replace("CA", &ca)).unwrap();
    let json = d.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json));
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("panicked"), "{stdout}");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no result: {stdout}"));
    assert_eq!(schema_violations(&json), Vec::<String>::new());
    let r = RunResult::from_reader(text.as_bytes()).unwrap();
    (out.status.code().unwrap_or(-1), r, stdout)
}

fn count(r: &RunResult, phase: &str) -> u64 {
    r.measurements.phases.get(phase).map_or(0, |h| h.count())
}

fn errors(r: &RunResult, class: &str) -> u64 {
    r.measurements.requests.errors.get(class).copied().unwrap_or(0)
}

/// (requests, failed) of a tag.
fn tag(r: &RunResult, key: &str) -> (u64, u64) {
    let s = r.measurements.scenario.as_ref().unwrap();
    s.tags.get(key).map_or((0, 0), |t| (t.requests, t.failed))
}

const FEED: &str = r#"
target: { url: 'TARGET', http: 3 }
tls: { cacert: 'CA' }
scenarios:
  feed:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - sse:
          name: feed
          path: /sse?events=10&interval=1&first=50
          expect_event: { event: message, data: '^4', within: 10s }
          capture: { n: { regex: '^(\d)' } }
      - request: { path: '/bytes/{{n}}0', name: next, expect: [200] }
      - sse:
          name: counted
          path: '/sse?events={{n}}&interval=1'
"#;

#[test]
fn the_awaited_event_feeds_the_next_steps_on_the_vus_quic_connection() {
    let (code, r, stdout) = run(FEED);
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (18, 18), "{stdout}");
    assert_eq!(tag(&r, "step:feed"), (6, 0));
    assert_eq!(tag(&r, "step:next"), (6, 0));
    assert_eq!(tag(&r, "step:counted"), (6, 0));
    // Events 0 to 4 of each feed (the fifth the awaited one), then the
    // capture "4": four events of each counted stream.
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.events), (12, 6 * 5 + 6 * 4), "{s:?}");
    assert_eq!(s.ended.get("expected"), Some(&6), "{s:?}");
    assert_eq!(s.ended.get("completed"), Some(&6), "{s:?}");
    assert_eq!((count(&r, "first_event"), count(&r, "event_gap")), (12, 6 * 4 + 6 * 3));
    assert_eq!(count(&r, "stream"), 12);
    // Each feed stopped by the step: each VU's one QUIC connection carried
    // its three iterations' nine streams.
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!((mux.connections, mux.requests), (2, 18), "{mux:?}");
}

#[test]
fn limits_and_failures_end_a_stream_by_class_and_the_connection_stays() {
    let yaml = r#"
target: { url: 'TARGET', http: 3 }
tls: { cacert: 'CA' }
scenarios:
  late:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - sse:
          name: slow
          path: /sse?events=1000000&interval=20
          expect_event: { data: '^never$', within: 300ms }
      - sse:
          name: short
          path: /sse?events=3&interval=1
          expect_event: { event: update }
      - sse:
          name: counted
          path: /sse?events=50&interval=1
          events: 2
      - sse:
          name: timed
          path: /sse?events=1000000&interval=20
          duration: 200ms
      - sse:
          name: stalled
          path: /sse?events=5&stall=2&interval=1
          timeout: 300ms
      - sse:
          name: missing
          path: /nothing
          expect_event: { data: x }
"#;
    let (code, r, stdout) = run(yaml);
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted, 24, "{stdout}");
    assert_eq!(m.requests.ok, 8, "{stdout}");
    assert_eq!(errors(&r, "timeout.response"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "sse.unmatched"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "sse.stalled"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "check_failed"), 4, "{:?}", m.requests.errors);
    for (step, failed) in [
        ("slow", 4),
        ("short", 4),
        ("counted", 0),
        ("timed", 0),
        ("stalled", 4),
        ("missing", 4),
    ] {
        assert_eq!(tag(&r, &format!("step:{step}")), (4, failed), "{step}");
    }
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.streams, 24, "{s:?}");
    for (ended, n) in [
        ("timeout.response", 4),
        ("sse.unmatched", 4),
        ("events", 4),
        ("duration", 4),
        ("sse.stalled", 4),
        ("check_failed", 4),
    ] {
        assert_eq!(s.ended.get(ended), Some(&n), "{ended}: {s:?}");
    }
    // The stalled streams' two events before the stall, the short ones'
    // three, the counted ones' two; the slow and timed ones' some.
    assert!(s.events >= 4 * (2 + 3 + 2) + 8, "{s:?}");
    // Every one a stream's failure, not its connection's.
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
}

#[test]
fn an_llm_step_counts_tokens_over_http3() {
    let yaml = r#"
target: 'TARGET'
tls: { cacert: 'CA' }
scenarios:
  chat:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - sse:
          name: chat
          http: 3
          path: /v1/chat/completions?tokens=5&interval=1
          json: { messages: [{ role: user, content: hi }], stream: true }
          llm: openai
          check:
            role: { body_contains: '"delta"' }
"#;
    let (code, r, stdout) = run(yaml);
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (4, 4), "{stdout}");
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.tokens), (4, 20), "{s:?}");
    assert_eq!(s.ended.get("completed"), Some(&4), "{s:?}");
    assert_eq!((count(&r, "ttft"), count(&r, "itl")), (4, 16));
    let checks = &m.scenario.as_ref().unwrap().checks;
    assert_eq!(
        checks.get("role").map(|c| (c.passes, c.fails)),
        Some((4, 0)),
        "{checks:?}"
    );
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
}
