//! Scenario `websocket:` steps against real servers: the lab's `GET /ws`
//! echo and the `websockets` PyPI server (crates/cli/tests/servers/
//! ws_server.py: echo, close). Counts of requests (one per expect),
//! messages, classes and connections, exactly.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{WsServer, assert_books_balance, lab, output, schema_violations, throng};
use throng_result::RunResult;

/// `throng run` on `yaml` with TARGET replaced: exit code, result, stdout,
/// the result file's text.
fn run(yaml: &str, target: &str) -> (i32, RunResult, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml.replace("TARGET", target)).unwrap();
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|_| panic!("no result: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(schema_violations(&json), Vec::<String>::new());
    let r = RunResult::from_reader(text.as_bytes()).unwrap();
    (out.status.code().unwrap_or(-1), r, stdout, text)
}

fn errors(r: &RunResult, class: &str) -> u64 {
    r.measurements.requests.errors.get(class).copied().unwrap_or(0)
}

/// (requests, failed) of a tag.
fn tag(r: &RunResult, key: &str) -> (u64, u64) {
    let s = r.measurements.scenario.as_ref().unwrap();
    s.tags.get(key).map_or((0, 0), |t| (t.requests, t.failed))
}

const ECHO: &str = r#"
target: TARGET
scenarios:
  chat:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    flow:
      - websocket:
          url: /ws
          name: chat
          headers: { Authorization: "Bearer s3cretWsToken" }
          timeout: 5s
          messages:
            - send: 'hello {{vu}}-{{iter}}'
            - expect: '^hello \d+-\d+$'
              capture: { who: { regex: 'hello (\d+-\d+)' } }
            - send: 'again {{who}}'
            - expect: '^again \d+-\d+$'
            - send_binary: AAEC/w==
      - request: { path: /, name: home }
thresholds:
  "requests{step:chat}": ["count == 20"]
"#;

#[test]
fn iterations_times_messages_are_counted_exactly_and_a_capture_feeds_the_next_send() {
    let server = lab(None);
    let (code, r, stdout, text) = run(ECHO, &format!("http://{}", server.addr()));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    let m = &r.measurements;
    // 10 iterations: 2 expects each (the chat step's requests) + 1 request.
    assert_eq!(m.requests.attempted, 30, "{stdout}");
    assert_eq!(m.requests.ok, 30, "{stdout}");
    assert_eq!(tag(&r, "step:chat"), (20, 0));
    assert_eq!(tag(&r, "step:home"), (10, 0));
    let s = m.scenario.as_ref().unwrap();
    // 3 messages sent per step; 2 echoes read (nothing waits for the
    // binary one's).
    assert_eq!(s.ws_sent, 30, "{stdout}");
    assert_eq!(s.ws_received, 20, "{stdout}");
    // The round trips are the step's figure, and a threshold reads them.
    assert_eq!(s.tags["step:chat"].response.count(), 20);
    assert!(r.thresholds.iter().all(|t| t.passed), "{stdout}");
    // Each step upgraded a socket of its own (keep: false) and the HTTP
    // request one keep-alive connection per VU.
    assert_eq!(m.phases["handshake"].count(), 10);
    assert_eq!(m.connections.attempted, 12, "{stdout}");
    assert!(
        stdout.contains("websocket     30 messages sent, 20 received"),
        "{stdout}"
    );
    // The upgrade's Authorization is a secret like a request's.
    assert!(!text.contains("s3cretWsToken") && !stdout.contains("s3cretWsToken"));
    assert!(text.contains("<redacted>"));
}

#[test]
fn a_kept_socket_serves_the_vus_next_steps_and_iterations() {
    let server = lab(None);
    let yaml = r#"
target: TARGET
scenarios:
  chat:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - websocket:
          url: /ws
          keep: true
          messages: [{ send: one }, { expect: '^one$' }]
      - websocket:
          url: /ws
          keep: true
          messages: [{ send: two }, { expect: '^two$' }]
"#;
    let (code, r, stdout, _) = run(yaml, &format!("http://{}", server.addr()));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 12, "{stdout}");
    // One socket per VU for all its steps and iterations.
    assert_eq!(r.measurements.connections.attempted, 2, "{stdout}");
    assert_eq!(r.measurements.phases["handshake"].count(), 2);
    // The default name is the URL.
    assert_eq!(tag(&r, "step:WS /ws"), (12, 0));
}

#[test]
fn an_expect_never_met_a_refused_upgrade_and_a_closed_socket_are_counted_by_class() {
    let server = lab(None);
    let yaml = r#"
target: TARGET
scenarios:
  bad:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - websocket:
          url: /ws
          name: never
          timeout: 200ms
          messages:
            - send: ping
            - expect: '^pong$'
            - send: not sent
            - expect: never counted
      - websocket:
          url: /status/404
          name: refused
          messages: [{ send: x }, { expect: x }]
"#;
    let (_, r, stdout, _) = run(yaml, &format!("http://{}", server.addr()));
    assert_books_balance(&r);
    // A failure ends the step: its later expects are not attempted.
    assert_eq!(r.measurements.requests.attempted, 12, "{stdout}");
    assert_eq!(errors(&r, "timeout.response"), 6, "{stdout}");
    assert_eq!(errors(&r, "ws.upgrade_refused.404"), 6, "{stdout}");
    assert_eq!(tag(&r, "step:never"), (6, 6));
    assert_eq!(tag(&r, "step:refused"), (6, 6));
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!((s.ws_sent, s.ws_received), (6, 6), "the echo of ping, passed over");
}

/// A `ws_server.py` in one mode, killed on drop.

#[test]
fn the_websockets_server_sees_every_step_close_with_1000_and_its_close_frames_are_classes() {
    let echo = WsServer::start("echo");
    let yaml = r#"
target: TARGET
scenarios:
  echo:
    executor: shared-iterations
    vus: 2
    iterations: 8
    flow:
      - websocket:
          url: ws://127.0.0.1:PORT/any
          name: echo
          messages: [{ send: '{"n": {{iter}}}' }, { expect: '"n"', capture: { n: { json: /n } } }]
      - websocket:
          url: /again
          name: again
          messages: [{ send: 'n={{n}}' }, { expect: '^n=\d+$' }]
"#
    .replace("PORT", &echo.port.to_string());
    let (code, r, stdout, _) = run(&yaml, &format!("http://127.0.0.1:{}", echo.port));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    assert_eq!(tag(&r, "step:echo"), (8, 0));
    assert_eq!(tag(&r, "step:again"), (8, 0), "the JSON capture fed the next step");
    // Every step ended with the close handshake: the server saw 1000 each time.
    let codes = echo.closes(16);
    assert_eq!(codes.len(), 16);
    assert!(codes.iter().all(|c| c == "1000"), "{codes:?}");

    let closing = WsServer::start("close");
    let yaml = r#"
target: TARGET
scenarios:
  closed:
    executor: per-vu-iterations
    vus: 1
    iterations: 3
    flow:
      - websocket: { url: /, messages: [{ send: hi }, { expect: hi }] }
"#;
    let (_, r, stdout, _) = run(yaml, &format!("http://127.0.0.1:{}", closing.port));
    assert_books_balance(&r);
    assert_eq!(errors(&r, "ws.closed.1008"), 3, "{stdout}");
}

#[test]
fn a_bad_step_is_refused_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    let cases = [
        ("url: ftp://x/chat", "s.yaml:9:11", "neither a path on the target"),
        (
            "url: ws://127.0.0.2:9/chat",
            "s.yaml:9:11",
            "not on the scenario's target",
        ),
        (
            "url: /chat\n          messages:\n            - send: x\n            - expect: '('",
            "s.yaml:12:15",
            "message 2: expect: is a regex",
        ),
        (
            "url: /chat\n          messages:\n            - send: x\n            - capture: { a: { regex: x } }",
            "s.yaml:12:15",
            "message 2 has none of them; give exactly one of send:",
        ),
        (
            "url: /chat\n          messages: []",
            "s.yaml:10:11",
            "messages is empty",
        ),
    ];
    for (step, at, what) in cases {
        let messages = if step.contains("messages") {
            ""
        } else {
            "\n          messages: [{ send: x }]"
        };
        let yaml = format!(
            "target: http://127.0.0.1:1\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - websocket:\n          {step}{messages}\n"
        );
        std::fs::write(&file, &yaml).unwrap();
        let out = output(throng().arg("run").arg(&file));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{yaml}\n{err}");
        assert!(err.contains(what), "{yaml}\n{err}");
        assert!(err.contains(at), "{at}: {err}");
    }
}

#[test]
fn a_step_cut_off_by_the_end_of_the_run_is_interrupted_and_its_socket_closed() {
    let server = lab(None);
    let yaml = r#"
target: TARGET
scenarios:
  waiting:
    executor: constant-vus
    vus: 2
    duration: 500ms
    graceful_stop: 200ms
    flow:
      - websocket:
          url: /ws
          name: wait
          timeout: 30s
          messages: [{ send: hi }, { expect: '^never$' }]
"#;
    let (_, r, stdout, _) = run(yaml, &format!("http://{}", server.addr()));
    assert_books_balance(&r);
    let m = &r.measurements;
    // Each VU's one step waited past the graceful stop: cut off.
    assert_eq!(m.requests.attempted, 2, "{stdout}");
    assert_eq!(errors(&r, "interrupted"), 2, "{stdout}");
    assert_eq!(m.connections.ok, 2);
    // Both sockets' ends are on the books.
    assert_eq!(m.phases["connection"].count(), 2, "{stdout}");
}

#[test]
fn the_docs_chat_example_runs_as_written_against_the_lab() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"))
        .unwrap();
    let yaml = doc
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.starts_with("# chat.yaml"))
        .expect("a ```yaml block starting with # chat.yaml in docs/guide/src/scenarios.md")
        .replace("http://127.0.0.1:8080", "TARGET");
    let server = lab(None);
    let (code, r, stdout, text) = run(&yaml, &format!("http://{}", server.addr()));
    // Its thresholds judge a duration (exit 1 if a busy machine breaks one):
    // only that they were judged is asserted.
    assert!(code == 0 || code == 1, "{stdout}");
    assert_eq!(r.thresholds.len(), 2);
    assert_books_balance(&r);
    // 10 VUs × 20 iterations × 2 expects.
    assert_eq!(tag(&r, "step:chat"), (400, 0), "{stdout}");
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!((s.ws_sent, s.ws_received), (400, 400));
    assert_eq!(r.measurements.connections.ok, 200);
    assert!(!text.contains("demo-token"));
}

#[test]
fn the_servers_pings_are_answered_while_an_expect_waits() {
    // A push a second, a ping every 0.1 s; a ping left 0.5 s unanswered
    // closes the socket (1011), which would fail the expect.
    let server = WsServer::start("pushping");
    let yaml = r#"
target: TARGET
scenarios:
  pushed:
    executor: per-vu-iterations
    vus: 2
    iterations: 1
    flow:
      - websocket:
          url: /
          name: pushed
          timeout: 10s
          messages: [{ expect: '^push 2$' }]
"#;
    let (code, r, stdout, _) = run(yaml, &format!("http://127.0.0.1:{}", server.port));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    assert_eq!(tag(&r, "step:pushed"), (2, 0), "{stdout}");
    // "push 1" passed over, "push 2" met.
    assert_eq!(r.measurements.scenario.as_ref().unwrap().ws_received, 4);
    assert_eq!(server.closes(2), ["1000", "1000"]);
}

#[test]
fn wss_through_nginx_upgrades_over_tls_and_nginx_refusals_are_counted() {
    let server = WsServer::start("echo");
    let (_certs_dir, c) = common::certs();
    let p = |n: &str| c.join(n).display().to_string();
    let nginx = common::nginx_wss(&c, server.port);
    let yaml = r#"
target: TARGET
tls: { cacert: CA }
scenarios:
  secure:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - websocket:
          url: /ws
          name: wss
          messages: [{ send: über }, { expect: '^über$' }]
      - websocket:
          url: /nowhere
          name: missing
          messages: [{ send: x }]
"#
    .replace("CA", &p("ca.pem"));
    let (_, r, stdout, _) = run(&yaml, &format!("https://localhost:{}", nginx.port));
    assert_books_balance(&r);
    assert_eq!(tag(&r, "step:wss"), (6, 0), "{stdout}");
    assert_eq!(errors(&r, "ws.upgrade_refused.404"), 6, "{stdout}");
    assert_eq!(r.measurements.phases["tls"].count(), 12);
    let closes = server.closes(6);
    assert!(closes.len() == 6 && closes.iter().all(|c| c == "1000"), "{closes:?}");
}

#[test]
fn a_kept_socket_ends_with_the_close_handshake_when_its_vu_is_done() {
    let server = WsServer::start("echo");
    let yaml = r#"
target: TARGET
scenarios:
  kept:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - websocket:
          url: /kept
          keep: true
          messages: [{ send: a }, { expect: '^a$' }]
      - think: 10ms
"#;
    let (code, r, stdout, _) = run(yaml, &format!("http://127.0.0.1:{}", server.port));
    assert_eq!(code, 0, "{stdout}");
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 4);
    assert_eq!(r.measurements.connections.ok, 2);
    assert_eq!(r.measurements.phases["connection"].count(), 2);
    assert_eq!(server.closes(2), ["1000", "1000"]);
}

#[test]
fn a_step_to_a_server_that_floods_pings_and_never_reads_ends_at_its_timeout() {
    let flood = WsServer::start("flood");
    let yaml = r#"
target: TARGET
scenarios:
  flood:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    max_duration: 60s
    flow:
      - websocket:
          url: /
          name: flood
          timeout: 1s
          messages: [{ send: hi }, { expect: '^never$' }]
"#;
    let (code, r, stdout, _) = run(yaml, &format!("http://127.0.0.1:{}", flood.port));
    assert_eq!(code, 1, "{stdout}");
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.attempted, 4, "{stdout}");
    assert_eq!(errors(&r, "timeout.response"), 4, "{stdout}");
}
