//! `sse:` steps: a request read as an event stream; mistakes at their line.

use std::time::Duration;

use super::*;
use crate::checks::CaptureFrom;

const SSE: &str = r#"
target: http://127.0.0.1:8080
defaults:
  timeout: 5s
scenarios:
  feed:
    executor: per-vu-iterations
    vus: 1
    iterations: 1
    flow:
      - sse:
          path: /sse?events=5
          events: 10
          expect_event: { data: '^3', within: 2s }
          capture: { n: { regex: '(\d+)' } }
      - sse:
          name: chat
          path: /v1/chat/completions
          json: { messages: [{ role: user, content: hi }], stream: true }
          llm: openai
          duration: 3s
          expect_event: { event: message }
      - request: { path: '/status/20{{n}}' }
"#;

fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "t.yaml", &|f| Err(format!("no file {f} in tests")))
}

fn req(plan: &ScenarioPlan, i: usize) -> &Request {
    match &plan.scenarios[0].flow[i] {
        Step::Request(r) => r,
        other => panic!("not a request step: {other:?}"),
    }
}

#[test]
fn an_sse_step_is_a_request_with_its_stream() {
    let plan = parse(SSE).unwrap();
    let first = req(&plan, 0);
    assert_eq!(
        (first.name.as_str(), first.method.as_str()),
        ("SSE /sse?events=5", "GET")
    );
    assert_eq!(first.redirects, 0);
    let s = first.sse.as_ref().unwrap();
    assert_eq!((s.llm, s.events, s.duration), (None, Some(10), None));
    let e = s.expect.as_ref().unwrap();
    assert_eq!(e.within, Duration::from_secs(2));
    assert!(e.matches("message", "3...") && !e.matches("message", "2") && e.event.is_none());
    assert!(matches!(first.captures[0].from, CaptureFrom::Regex(_)));

    let chat = req(&plan, 1);
    assert_eq!((chat.name.as_str(), chat.method.as_str()), ("chat", "POST"));
    let s = chat.sse.as_ref().unwrap();
    assert_eq!(s.llm, Some(throng_plan::LlmApi::OpenAi));
    assert_eq!(s.duration, Some(Duration::from_secs(3)));
    // within: defaults to the step's timeout.
    let e = s.expect.as_ref().unwrap();
    assert_eq!(e.within, Duration::from_secs(5));
    assert!(e.matches("message", "") && !e.matches("update", ""));
    assert!(req(&plan, 2).sse.is_none());
}

#[test]
fn sse_mistakes_are_named_at_their_line() {
    let cases = [
        ("llm: openai", "llm: claude", "llm: 'claude' is not an API", 20),
        ("events: 10", "events: 0", "events: 0 would end the stream", 13),
        (
            "expect_event: { data: '^3', within: 2s }",
            "expect_event: { within: 2s }",
            "expect_event: names no event",
            14,
        ),
        (
            "expect_event: { data: '^3', within: 2s }",
            "expect_event: { data: '(', within: 2s }",
            "data: is a regex",
            14,
        ),
        (
            "expect_event: { data: '^3', within: 2s }",
            "expect_event: { data: '3', within: 0s }",
            "within: 0s leaves no time",
            14,
        ),
        (
            "events: 10",
            "events: 10\n          form: { a: b }",
            "unknown field `form`",
            0,
        ),
    ];
    for (from, to, says, line) in cases {
        let text = SSE.replacen(from, to, 1);
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains(says), "{to}: {e}");
        if line > 0 {
            assert_eq!(e.line, line, "{to}: {e}");
        }
    }
    let both = SSE.replacen("      - sse:\n", "      - request: { path: / }\n        sse:\n", 1);
    let e = parse(&both).unwrap_err();
    assert!(e.message.contains("exactly one of request:, sse:"), "{e}");
}

#[test]
fn an_sse_step_over_http2_or_http3_is_accepted() {
    let own = SSE.replacen("          events: 10\n", "          events: 10\n          http: 2\n", 1);
    parse(&own).unwrap();
    let target = SSE.replacen(
        "target: http://127.0.0.1:8080\n",
        "target: { url: http://127.0.0.1:8080, http: 2 }\n",
        1,
    );
    parse(&target).unwrap();
    let https = SSE.replacen("target: http://127.0.0.1:8080\n", "target: https://127.0.0.1:8443\n", 1);
    let own = https.replacen("          events: 10\n", "          events: 10\n          http: 3\n", 1);
    parse(&own).unwrap();
    let target = SSE.replacen(
        "target: http://127.0.0.1:8080\n",
        "target: { url: https://127.0.0.1:8443, http: 3 }\n",
        1,
    );
    parse(&target).unwrap();
    // http: 3 still needs an https:// target.
    let clear = SSE.replacen("          events: 10\n", "          events: 10\n          http: 3\n", 1);
    let e = parse(&clear).unwrap_err();
    assert!(e.message.contains("http: 3 needs an https:// target"), "{e}");
    // At the step's http: line.
    assert_eq!(e.line, 14, "{e}");
}
