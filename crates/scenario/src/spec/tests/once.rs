//! `setup:` and `teardown:`: flows run once, their captures read as
//! `{{setup.NAME}}`, their tags in thresholds.

use super::*;

const ONCE: &str = r#"
target: http://127.0.0.1:8080
setup:
  - request:
      name: login
      method: POST
      path: /login
      capture:
        token: { json: /token }
teardown:
  - request:
      name: cleanup
      method: DELETE
      path: /tenant/{{setup.token}}
scenarios:
  load:
    executor: constant-vus
    vus: 2
    duration: 5s
    flow:
      - request:
          path: /item
          headers: { X-Token: "{{setup.token}}" }
thresholds:
  response{scenario:setup}: [p(95) < 1s]
"#;

#[track_caller]
fn once_rejects(from: &str, to: &str, at: &str, message: &str) {
    assert!(ONCE.contains(from), "ONCE has no '{from}'");
    let text = ONCE.replacen(from, to, 1);
    let e = parse(&text).expect_err(to);
    assert!(e.message.contains(message), "{to}: '{e}' does not say '{message}'");
    let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
    assert!(
        e.line > 0 && line.contains(at),
        "{to}: {e} points at '{line}', not at '{at}'"
    );
}

#[test]
fn setup_and_teardown_are_one_vu_one_iteration_scenarios() {
    let p = parse(ONCE).unwrap();
    let s = p.setup.as_ref().unwrap();
    assert_eq!(s.name, "setup");
    assert_eq!(
        s.executor,
        Executor::PerVuIterations {
            vus: 1,
            iterations: 1,
            max_duration: SETUP_LIMIT
        }
    );
    assert_eq!(capture_names(&s.flow), ["token"]);
    let t = p.teardown.as_ref().unwrap();
    assert_eq!(t.executor.length(), TEARDOWN_LIMIT);
    assert_eq!(p.scenarios.len(), 1, "setup and teardown are not load scenarios");
    assert_eq!(p.thresholds[0].tag, Some(("scenario".into(), "setup".into())));
    // A file without them has neither.
    let plain = parse(GOOD).unwrap();
    assert!(plain.setup.is_none() && plain.teardown.is_none());
}

#[test]
fn setup_reads_are_captures_of_setup() {
    once_rejects(
        "X-Token: \"{{setup.token}}\"",
        "X-Token: \"{{setup.tokn}}\"",
        "{{setup.tokn}}",
        "{{setup.tokn}} is not captured by setup (the setup: flow captures token)",
    );
    once_rejects(
        "path: /tenant/{{setup.token}}",
        "path: /tenant/{{setup.id}}",
        "{{setup.id}}",
        "{{setup.id}} is not captured by setup",
    );
    once_rejects(
        "      path: /login\n",
        "      path: /login/{{setup.token}}\n",
        "/login/{{setup.token}}",
        "is used inside the setup: flow",
    );
    // Without a setup: flow, nothing is captured.
    let text = ONCE.replacen(
        "setup:\n  - request:\n      name: login",
        "teardown0:\n  - request:\n      name: login",
        1,
    );
    assert!(parse(&text).is_err());
}

#[test]
fn once_flows_are_checked_where_they_are_written() {
    once_rejects(
        "      path: /tenant/{{setup.token}}\n",
        "      path: /tenant/{{setup.token}}\n    think: 1s\n",
        "teardown:",
        "each step is exactly one of",
    );
    once_rejects(
        "scenarios:\n  load:",
        "scenarios:\n  setup:",
        "setup:",
        "a scenario cannot be named 'setup'",
    );
    once_rejects(
        "teardown:\n  - request:\n      name: cleanup\n      method: DELETE\n      path: /tenant/{{setup.token}}\n",
        "teardown:\n  - think: 1s\n",
        "teardown:",
        "teardown: makes no request",
    );
    once_rejects(
        "response{scenario:setup}",
        "response{scenario:warmup}",
        "response{scenario:warmup}",
        "no request carries the tag scenario:warmup",
    );
}
