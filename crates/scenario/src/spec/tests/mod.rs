//! The scenario file's parsing and validation, by what each test checks.

use std::time::Duration;

use super::raw::parse_size;
use super::types::requests;
use super::*;
use crate::checks::CheckKind;

mod checks;
mod executors;
mod file;
mod grpc;
mod js;
mod metrics;
mod once;
mod requests;
mod targets;

const GOOD: &str = r#"
target: http://127.0.0.1:8080/api
defaults:
  headers:
    User-Agent: throng-test
  timeout: 5s
scenarios:
  signup:
    executor: ramping-vus
    start_vus: 0
    stages:
      - { duration: 30s, target: 10 }
      - { duration: 1m, target: 50 }
    flow:
      - request:
          name: register
          path: /auth/register
          json: { email: "{{random_email}}", password: "pw-{{vu}}" }
          expect: [200]
          capture:
            token: { json: /token }
      - think: { min: 1s, max: 2s }
      - group:
          name: session
          flow:
            - request:
                path: /me
                headers: { Authorization: "Bearer {{token}}" }
                check:
                  is ok: { status: [200] }
thresholds:
  response{step:register}:
    - p(95) < 500ms
    - threshold: "p(99) < 2s over 10s"
      abort_on_fail: true
      delay: 5s
"#;

pub(super) fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "t.yaml", &|f| Err(format!("no file {f} in tests")))
}

/// Parses `GOOD` with `from` replaced by `to` and expects an error
/// containing `message`, on a line that holds `at`.
#[track_caller]
pub(super) fn rejects(from: &str, to: &str, at: &str, message: &str) -> ScenarioError {
    assert!(GOOD.contains(from), "GOOD has no '{from}'");
    let text = GOOD.replacen(from, to, 1);
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
    e
}
