//! Scenario `sse:` steps against the lab's event streams (`GET /sse`,
//! `POST /v1/chat/completions`): the awaited event ends the stream and its
//! capture feeds the next request; one that never comes fails the step by
//! class; events, phases, streams and requests counted exactly. Over
//! HTTP/2 (the lab's h2c streams, nginx's TLS with ALPN h2) as over
//! HTTP/1.1, a stream the step ends early reset while the VU's connection
//! goes on.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_books_balance, lab, output, schema_violations, throng};
use throng_result::RunResult;

/// `throng run` on `yaml` with TARGET replaced: exit code, result, stdout.
fn run(yaml: &str, target: &str) -> (i32, RunResult, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml.replace("TARGET", target)).unwrap();
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json));
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
target: TARGET
scenarios:
  feed:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - sse:
          name: feed
          path: /sse?events=10&interval=1&first=150
          expect_event: { event: message, data: '^4', within: 10s }
          capture: { n: { regex: '^(\d)' } }
      - request: { path: '/status/20{{n}}', name: next, expect: [204] }
thresholds:
  first_event: ["p(99) < 60s"]
  "requests{step:feed}": ["count == 6"]
"#;

#[test]
fn the_awaited_event_ends_the_stream_and_its_capture_feeds_the_next_request() {
    let server = lab(None);
    let (code, r, stdout) = run(FEED, &format!("http://{}", server.addr()));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (12, 12), "{stdout}");
    assert_eq!(tag(&r, "step:feed"), (6, 0));
    // The capture was "4": every next request asked for /status/204.
    assert_eq!(m.status.get(&204), Some(&6), "{:?}", m.status);
    // Events 0 to 4 of each stream, the fifth the awaited one.
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.events), (6, 30), "{s:?}");
    assert_eq!(s.ended.get("expected"), Some(&6), "{s:?}");
    assert_eq!((count(&r, "first_event"), count(&r, "event_gap")), (6, 24));
    assert_eq!(count(&r, "stream"), 6);
    assert!(r.thresholds.iter().all(|t| t.passed), "{stdout}");

    // A threshold on first_event can fail: the lab waits 150 ms before
    // each stream's first event.
    let failing = FEED.replace(r#"["p(99) < 60s"]"#, r#"["min < 100ms"]"#);
    let (code, r, stdout) = run(&failing, &format!("http://{}", server.addr()));
    assert_ne!(code, 0, "{stdout}");
    let t = r
        .thresholds
        .iter()
        .find(|t| t.threshold.contains("first_event"))
        .unwrap();
    assert!(!t.passed, "{stdout}");
}

#[test]
fn an_awaited_event_that_never_comes_fails_the_step_by_class() {
    let server = lab(None);
    let yaml = r#"
target: TARGET
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
          name: missing
          path: /status/404
          expect_event: { data: x }
"#;
    let (code, r, stdout) = run(yaml, &format!("http://{}", server.addr()));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted, 16, "{stdout}");
    // Its within: ran out: timeout.response; the stream ended without it:
    // sse.unmatched; a count reached: ok.
    assert_eq!(errors(&r, "timeout.response"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "sse.unmatched"), 4, "{:?}", m.requests.errors);
    assert_eq!(m.requests.ok, 4, "{stdout}");
    assert_eq!(tag(&r, "step:slow"), (4, 4));
    assert_eq!(tag(&r, "step:short"), (4, 4));
    assert_eq!(tag(&r, "step:counted"), (4, 0));
    // A status not expected is check_failed, not an unmet wait.
    assert_eq!(tag(&r, "step:missing"), (4, 4));
    assert_eq!(errors(&r, "check_failed"), 4, "{:?}", m.requests.errors);
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.streams, 16, "{s:?}");
    assert_eq!(s.ended.get("check_failed"), Some(&4), "{s:?}");
    assert_eq!(s.ended.get("timeout.response"), Some(&4), "{s:?}");
    assert_eq!(s.ended.get("sse.unmatched"), Some(&4), "{s:?}");
    assert_eq!(s.ended.get("events"), Some(&4), "{s:?}");
    // The short streams' 3 events each, the counted ones' 2.
    assert!(s.events >= 4 * 3 + 4 * 2 + 4, "{s:?}");
}

#[test]
fn an_llm_step_counts_tokens_and_times_them() {
    let server = lab(None);
    let yaml = r#"
target: TARGET
scenarios:
  chat:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - sse:
          name: chat
          path: /v1/chat/completions?tokens=5&interval=1
          json: { messages: [{ role: user, content: hi }], stream: true }
          llm: openai
          check:
            role: { body_contains: '"delta"' }
"#;
    let (code, r, stdout) = run(yaml, &format!("http://{}", server.addr()));
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
}

/// The guide's `sse:` example (docs/guide/src/scenarios.md), as written.
fn guide_example() -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"),
    )
    .unwrap();
    doc.split("```yaml\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.starts_with("# feed.yaml"))
        .expect("the sse: example in docs/guide/src/scenarios.md")
        .to_string()
}

#[test]
fn the_guides_example_runs_as_written_against_the_lab() {
    let server = lab(None);
    let yaml = guide_example().replace("http://127.0.0.1:8080", "TARGET");
    let (code, r, stdout) = run(&yaml, &format!("http://{}", server.addr()));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    // 20 iterations of three steps.
    assert_eq!((m.requests.attempted, m.requests.ok), (60, 60), "{stdout}");
    assert_eq!(tag(&r, "step:after"), (20, 0));
    // The capture was "3": each /bytes/3 answered 3 bytes.
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.streams, 40, "{s:?}");
    assert_eq!(
        (s.ended.get("expected"), s.ended.get("completed")),
        (Some(&20), Some(&20)),
        "{s:?}"
    );
    assert_eq!(s.tokens, 160, "{s:?}");
    // Events 0 to 3 of each feed, 8 tokens and their chunks of each chat.
    assert_eq!(count(&r, "first_event"), 40);
    assert_eq!((count(&r, "ttft"), count(&r, "itl")), (20, 140));
    assert!(
        stdout.contains("streams       40 ended: completed=20 expected=20"),
        "{stdout}"
    );
}

/// The lab answering event streams over h2c (prior knowledge).
fn h2c_lab() -> throng_lab::LabServer {
    throng_lab::LabServer::start_h2c(
        &throng_lab::LabConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            stall: None,
            tls: None,
        },
        &throng_lab::AuthConfig::default(),
    )
    .unwrap()
}

const FEED_H2: &str = r#"
target: { url: TARGET, http: 2 }
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
      - request: { path: '/sse?events={{n}}&interval=1', name: next, expect: [200] }
      - sse:
          name: counted
          path: '/sse?events={{n}}&interval=1'
"#;

#[test]
fn over_h2c_the_awaited_event_feeds_the_next_steps_on_the_same_connection() {
    let server = h2c_lab();
    let (code, r, stdout) = run(FEED_H2, &format!("http://{}", server.addr()));
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
    // Each feed ended by the step (RST_STREAM CANCEL): each VU's one
    // connection carried its three iterations' nine streams.
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
}

#[test]
fn over_h2c_limits_and_failures_end_a_stream_by_class_and_the_connection_stays() {
    let server = h2c_lab();
    let yaml = r#"
target: { url: TARGET, http: 2 }
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
    let (code, r, stdout) = run(yaml, &format!("http://{}", server.addr()));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted, 24, "{stdout}");
    assert_eq!(m.requests.ok, 8, "{stdout}");
    assert_eq!(errors(&r, "timeout.response"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "sse.unmatched"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "sse.stalled"), 4, "{:?}", m.requests.errors);
    assert_eq!(errors(&r, "check_failed"), 4, "{:?}", m.requests.errors);
    assert_eq!(tag(&r, "step:slow"), (4, 4));
    assert_eq!(tag(&r, "step:short"), (4, 4));
    assert_eq!(tag(&r, "step:counted"), (4, 0));
    assert_eq!(tag(&r, "step:timed"), (4, 0));
    assert_eq!(tag(&r, "step:stalled"), (4, 4));
    assert_eq!(tag(&r, "step:missing"), (4, 4));
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
fn over_h2c_an_llm_step_counts_tokens_and_times_them() {
    let server = h2c_lab();
    let yaml = r#"
target: TARGET
scenarios:
  chat:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - sse:
          name: chat
          http: 2
          path: /v1/chat/completions?tokens=5&interval=1
          json: { messages: [{ role: user, content: hi }], stream: true }
          llm: openai
          check:
            role: { body_contains: '"delta"' }
"#;
    let (code, r, stdout) = run(yaml, &format!("http://{}", server.addr()));
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

#[test]
fn over_tls_with_alpn_h2_a_capture_feeds_the_next_request_on_one_connection() {
    let (_d, c) = common::certs();
    let nginx = common::nginx_tls(
        &c,
        "ssl http2",
        false,
        "",
        "location = /sse { default_type text/event-stream;\n\
         return 200 \"data: a\n\ndata: b\n\nevent: x\ndata: c\n\n\"; }\n\
         location = /after/c { return 204; }",
    );
    let yaml = format!(
        r#"
target: {{ url: TARGET, http: 2 }}
tls: {{ cacert: '{}' }}
scenarios:
  feed:
    executor: per-vu-iterations
    vus: 1
    iterations: 3
    flow:
      - sse:
          name: feed
          path: /sse
          expect_event: {{ event: x }}
          capture: {{ c: {{ regex: '(.)' }} }}
      - request: {{ path: '/after/{{{{c}}}}', name: after, expect: [204] }}
      - sse:
          name: two
          path: /sse
          events: 2
"#,
        c.join("ca.pem").display()
    );
    let (code, r, stdout) = run(&yaml, &nginx.https("localhost", ""));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (9, 9), "{stdout}");
    assert_eq!(m.status.get(&204), Some(&3), "{:?}", m.status);
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.events), (6, 3 * 3 + 3 * 2), "{s:?}");
    assert_eq!(s.ended.get("expected"), Some(&3), "{s:?}");
    assert_eq!(s.ended.get("events"), Some(&3), "{s:?}");
    assert_eq!(m.connections.ok, 1, "{:?}", m.connections);
    assert_eq!(m.tls.as_ref().unwrap().handshakes, 1);
}
