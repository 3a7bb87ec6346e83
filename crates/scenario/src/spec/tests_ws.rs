//! `websocket:` steps: what the file says, validated; mistakes at their line.

use std::time::Duration;

use super::*;
use crate::checks::CaptureFrom;

const WS: &str = r#"
target: http://127.0.0.1:8080/api
defaults:
  headers:
    Authorization: "Bearer {{env.TOKEN}}"
  timeout: 5s
scenarios:
  chat:
    executor: per-vu-iterations
    vus: 1
    iterations: 1
    flow:
      - websocket:
          url: /chat/{{vu}}
          headers: { X-Room: lobby }
          messages:
            - send: 'hello {{vu}}'
            - expect: '^hello (\d+)$'
              capture: { who: { regex: 'hello (\d+)' } }
            - send: 'again {{who}}'
            - send_binary: AAEC/w==
      - websocket:
          url: ws://127.0.0.1:8080/raw
          name: raw
          timeout: 2s
          keep: true
          messages: [{ expect: ready, capture: { n: { json: /n } } }]
      - request: { path: '/after/{{who}}/{{n}}' }
thresholds:
  response{step:raw}: ["p(95) < 100ms"]
"#;

fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "t.yaml", &|f| Err(format!("no file {f} in tests")))
}

fn ws(plan: &ScenarioPlan, i: usize) -> &WebSocket {
    match &plan.scenarios[0].flow[i] {
        Step::WebSocket(w) => w,
        other => panic!("not a websocket step: {other:?}"),
    }
}

#[test]
fn a_websocket_step_validates_with_its_defaults() {
    let plan = parse(WS).unwrap();
    let w = ws(&plan, 0);
    assert_eq!(w.name, "WS /chat/{{vu}}");
    assert_eq!(w.timeout, Duration::from_secs(5), "defaults.timeout");
    assert!(!w.keep);
    assert_eq!(w.headers.len(), 1);
    assert_eq!(w.messages.len(), 4);
    let WsMessage::Expect { regex, captures } = &w.messages[1] else {
        panic!("{:?}", w.messages[1]);
    };
    assert_eq!(regex.as_str(), r"^hello (\d+)$");
    assert_eq!(captures[0].var, "who");
    assert!(matches!(captures[0].from, CaptureFrom::Regex(_)));
    assert_eq!(w.messages[3], WsMessage::SendBinary(vec![0, 1, 2, 255]));
    let raw = ws(&plan, 1);
    assert_eq!(
        (raw.name.as_str(), raw.keep, raw.timeout),
        ("raw", true, Duration::from_secs(2))
    );
    assert_eq!(raw.path.source(), "/raw");
    // The env a websocket step reads is the plan's, and its secret headers
    // are redacted as a request's.
    assert_eq!(plan.env_names(), ["TOKEN"]);
    let plan = plan.with_secret_headers(&["X-Room".to_string()]).unwrap();
    let redacted = plan.redacted();
    assert_eq!(ws(&redacted, 0).headers[0].1.source(), throng_plan::REDACTED);
    // A result keeps the step and reads it back.
    let json = serde_json::to_string(&redacted.scenarios[0].flow).unwrap();
    let back: Vec<Step> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, redacted.scenarios[0].flow);
}

fn rejects(from: &str, to: &str, at: &str, message: &str) {
    assert!(WS.contains(from), "WS has no '{from}'");
    let text = WS.replacen(from, to, 1);
    let e = match parse(&text) {
        Ok(_) => panic!("accepted: {to}"),
        Err(e) => e,
    };
    assert!(e.message.contains(message), "{to}: '{e}' does not say '{message}'");
    let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
    assert!(
        e.line > 0 && line.contains(at),
        "{to}: {e} points at '{line}', not at '{at}'"
    );
}

#[test]
fn websocket_mistakes_point_at_their_line() {
    rejects(
        "url: /chat/{{vu}}",
        "url: chat",
        "url: chat",
        "neither a path on the target",
    );
    rejects(
        "url: ws://127.0.0.1:8080/raw",
        "url: wss://127.0.0.1:8080/raw",
        "url: wss://",
        "not on the scenario's target",
    );
    rejects(
        "url: ws://127.0.0.1:8080/raw",
        "url: ws://127.0.0.1:9999/raw",
        "url: ws://",
        "not on the scenario's target",
    );
    rejects(
        "expect: '^hello (\\d+)$'",
        "expect: '^hello ('",
        "expect:",
        "expect: is a regex",
    );
    rejects(
        "- send_binary: AAEC/w==",
        "- send_binary: 'not base64!'",
        "send_binary",
        "send_binary is base64",
    );
    rejects(
        "- send: 'again {{who}}'",
        "- { send: x, expect: x }",
        "send: x",
        "message 3 has send: and expect:",
    );
    rejects(
        "- send: 'again {{who}}'",
        "- { send: x, capture: { a: { regex: x } } }",
        "capture",
        "capture: reads a received message",
    );
    rejects(
        "capture: { who: { regex: 'hello (\\d+)' } }",
        "capture: { who: { header: X } }",
        "who",
        "give exactly one of json: or regex:",
    );
    rejects(
        "capture: { who: { regex: 'hello (\\d+)' } }",
        "capture: { vu: { regex: x } }",
        "vu",
        "not one of the built-ins",
    );
    rejects(
        "url: /chat/{{vu}}",
        "url: /chat/{{vu}}\n          nope: 1",
        "nope",
        "unknown field `nope`",
    );
    // A send of the step reads what an earlier expect captured, not a later one.
    rejects(
        "- send: 'hello {{vu}}'",
        "- send: 'hello {{who}}'",
        "hello {{who}}",
        "which captures it itself",
    );
    // A request before the step cannot read its capture.
    rejects(
        "      - websocket:\n          url: /chat",
        "      - request: { path: '/{{n}}' }\n      - websocket:\n          url: /chat",
        "{{n}}",
        "before step 'raw' captures it",
    );
    // WebSocket over HTTP/2 is not supported.
    rejects(
        "target: http://127.0.0.1:8080/api",
        "target: { url: http://127.0.0.1:8080/api, http: 2 }",
        "url: /chat",
        "need an HTTP/1.1 target",
    );
    rejects(
        "messages: [{ expect: ready, capture: { n: { json: /n } } }]",
        "messages: []",
        "messages: []",
        "messages is empty",
    );
}
