use std::time::Duration;

use super::raw::parse_size;
use super::types::requests;
use super::*;
use crate::checks::CheckKind;

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

fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "t.yaml", &|f| Err(format!("no file {f} in tests")))
}

#[test]
fn a_full_file_validates() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.target.port, 8080);
    assert_eq!(plan.target.base_path, "/api");
    assert_eq!(plan.defaults.timeout, Duration::from_secs(5));
    let s = &plan.scenarios[0];
    assert_eq!(s.name, "signup");
    assert_eq!(s.executor.length(), Duration::from_secs(90));
    assert_eq!(s.stage_at(Duration::from_secs(31)), Some(2));
    assert_eq!(stage_names(s), ["signup#1", "signup#2"]);
    let Step::Request(r) = &s.flow[0] else {
        panic!("first step is a request")
    };
    assert_eq!(r.method, "POST");
    assert!(matches!(r.body, Body::Json(_)));
    assert!(matches!(s.flow[1], Step::Think(Think::Range(..))));
    let Step::Group { flow, .. } = &s.flow[2] else {
        panic!("third step is a group")
    };
    let Step::Request(me) = &flow[0] else {
        panic!("a request")
    };
    assert_eq!(me.name, "GET /me");
    assert_eq!(me.timeout, Duration::from_secs(5));
    assert_eq!(plan.thresholds.len(), 2);
    assert!(plan.thresholds[1].abort_on_fail);
    assert_eq!(plan.thresholds[1].window_s, Some(10));
    let fast = plan.clone().scaled(0.1);
    assert_eq!(fast.scenarios[0].executor.length(), Duration::from_secs(9));
    assert_eq!(fast.end(), Duration::from_secs(9));
    assert_eq!(fast.scale, 0.1);
}

#[test]
fn tls_groups_and_version_are_parsed_where_they_are_written() {
    use throng_plan::{TlsGroup, TlsVersion};
    let https = GOOD.replacen("http://", "https://", 1);
    let with = |block: &str| parse(&format!("{https}\ntls:\n{block}"));
    let p = with("  groups: [X25519, P-256]\n  version: \"1.3\"\n").unwrap();
    let tls = p.tls.unwrap();
    assert_eq!(tls.groups, [TlsGroup::X25519, TlsGroup::Secp256r1]);
    assert_eq!(tls.version, Some(TlsVersion::Tls13));
    let lines = https.lines().count();
    let e = with("  insecure: true\n  groups: [x448]\n").unwrap_err();
    assert!(
        e.message.contains("tls.groups: 'x448' is not a key-exchange group"),
        "{e}"
    );
    assert_eq!(e.line, lines + 4, "{e}");
    let e = with("  version: \"1.1\"\n").unwrap_err();
    assert!(e.message.contains("tls.version: '1.1' is not a TLS version"), "{e}");
    assert_eq!(e.line, lines + 3, "{e}");
}

#[test]
fn mistakes_point_at_their_line() {
    let cases: [(&str, &str, usize, &str); 6] = [
        ("  timeout: 5s", "  retries: 3", 0, "unknown field `retries`"),
        ("start_vus: 0", "start_vus: many", 0, "invalid type"),
        (
            "duration: 30s, target: 10",
            "duration: 30 parsecs, target: 10",
            0,
            "duration",
        ),
        ("Bearer {{token}}", "Bearer {{tokn}}", 0, "{{tokn}} is not defined"),
        (
            "executor: ramping-vus",
            "executor: ramping-users",
            0,
            "unknown variant `ramping-users`",
        ),
        (
            "response{step:register}",
            "response{step:regster}",
            0,
            "no request carries the tag step:regster",
        ),
    ];
    for (from, to, _, message) in cases {
        let text = GOOD.replacen(from, to, 1);
        let e = parse(&text).unwrap_err();
        let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
        assert!(e.message.contains(message), "{to}: {e}");
        assert!(e.line > 0 && e.column > 0, "{to}: {e}");
        // The line named holds the mistake.
        let needle = to
            .lines()
            .last()
            .unwrap_or(to)
            .split(':')
            .next()
            .unwrap_or_default()
            .trim();
        assert!(line.contains(needle), "{to}: {e} points at '{line}'");
        assert!(e.to_string().starts_with("t.yaml:"), "{e}");
    }
}

#[test]
fn an_unquoted_template_in_a_json_body_is_refused_where_it_is() {
    let from = r#"json: { email: "{{random_email}}", password: "pw-{{vu}}" }"#;
    for (to, var) in [
        (
            r#"json: { email: {{random_email}}, password: "pw-{{vu}}" }"#,
            "random_email",
        ),
        (r#"json: { email: "a", tags: [ {{ vu }} ] }"#, "vu"),
        (r#"json: { user: { id: {{vu}} } }"#, "vu"),
    ] {
        let e = rejects(from, to, "json:", "is not in quotes");
        assert!(e.message.contains(&format!("\"{{{{{var}}}}}\"")), "{e}");
        assert!(e.column > 10, "points into the line, at the template: {e}");
    }
    // Quoted, it is a string template; a real nested mapping stays an object.
    let ok = GOOD.replacen(
        from,
        r#"json: { email: "{{random_email}}", user: { id: 1, tags: [a] } }"#,
        1,
    );
    assert!(parse(&ok).is_ok());
}

/// Parses `GOOD` with `from` replaced by `to` and expects an error
/// containing `message`, on a line that holds `at`.
#[track_caller]
fn rejects(from: &str, to: &str, at: &str, message: &str) -> ScenarioError {
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

#[test]
fn framing_headers_and_control_characters_are_refused_where_written() {
    rejects(
        "User-Agent: throng-test",
        "User-Agent: throng-test\n    Content-Length: 5",
        "Content-Length: 5",
        "throng computes Content-Length",
    );
    rejects(
        "headers: { Authorization: \"Bearer {{token}}\" }",
        "headers: { Transfer-Encoding: chunked }",
        "Transfer-Encoding",
        "never chunks",
    );
    rejects(
        "User-Agent: throng-test",
        "User-Agent: \"throng\\vtest\"",
        "User-Agent",
        "control character \\u{b}",
    );
}

#[test]
fn max_body_is_a_size_with_a_default_and_a_limit() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.defaults.max_body, DEFAULT_MAX_BODY);
    let text = GOOD
        .replacen("timeout: 5s", "timeout: 5s\n  max_body: 4MiB", 1)
        .replacen("path: /me", "path: /me\n                max_body: 100", 1);
    let plan = parse(&text).unwrap();
    assert_eq!(plan.defaults.max_body, 4 << 20);
    let reqs = requests(&plan.scenarios[0].flow);
    assert_eq!((reqs[0].max_body, reqs[1].max_body), (4 << 20, 100));
    assert_eq!(parse_size("64KiB"), Ok(64 << 10));
    assert_eq!(parse_size(" 2 MB "), Ok(2_000_000));
    for bad in ["0", "65MiB", "1GiB", "x", "-1", "99999999999999999999"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    rejects("timeout: 5s", "timeout: 5s\n  max_body: 1GiB", "max_body", "not a size");
}

#[test]
fn redirects_and_cookies_have_defaults_and_limits() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.defaults.redirects, DEFAULT_REDIRECTS);
    assert_eq!(plan.scenarios[0].cookies, Cookies::PerIteration);
    let text = GOOD
        .replacen("timeout: 5s", "timeout: 5s\n  redirects: 3", 1)
        .replacen("path: /me", "path: /me\n                redirects: 0", 1)
        .replacen("executor: ramping-vus", "executor: ramping-vus\n    cookies: keep", 1);
    let plan = parse(&text).unwrap();
    let reqs = requests(&plan.scenarios[0].flow);
    assert_eq!(
        (plan.defaults.redirects, reqs[0].redirects, reqs[1].redirects),
        (3, 3, 0)
    );
    assert_eq!(plan.scenarios[0].cookies, Cookies::Keep);
    rejects(
        "timeout: 5s",
        "timeout: 5s\n  redirects: 101",
        "redirects: 101",
        "over the limit of 100",
    );
    rejects(
        "path: /me",
        "path: /me\n                redirects: 1000",
        "redirects: 1000",
        "over the limit of 100",
    );
    rejects(
        "executor: ramping-vus",
        "executor: ramping-vus\n    cookies: sometimes",
        "cookies",
        "per-iteration",
    );
}

#[test]
fn secret_headers_are_redacted_in_the_plan_a_result_keeps() {
    let text = GOOD.replacen(
        "User-Agent: throng-test",
        "User-Agent: throng-test\n    X-Api-Key: k3y-s3cret",
        1,
    );
    let plan = parse(&text).unwrap();
    assert_eq!(plan.secret_headers, ["authorization"]);
    let plan = plan.with_secret_headers(&["X-API-KEY".to_string()]).unwrap();
    assert_eq!(plan.secret_headers, ["authorization", "x-api-key"]);
    let json = serde_json::to_string(&plan.redacted()).unwrap();
    assert!(!json.contains("k3y-s3cret") && !json.contains("Bearer"), "{json}");
    assert!(json.contains("throng-test"), "{json}");
    let note = plan.redaction_note().unwrap();
    assert!(note.contains("Authorization, X-Api-Key"), "{note}");
    // What is sent is untouched.
    assert_eq!(plan.defaults.headers[1].1.source(), "k3y-s3cret");
}

#[test]
fn durations_need_a_unit() {
    for (from, to, at) in [
        ("timeout: 5s", "timeout: 5", "timeout: 5"),
        ("duration: 30s, target", "duration: 30, target", "duration: 30,"),
        ("duration: 30s, target", "duration: 0, target", "duration: 0,"),
        ("duration: 30s, target", "duration: '30', target", "duration: '30',"),
        ("start_vus: 0", "start_vus: 0\n    start_time: 1", "start_time: 1"),
        ("start_vus: 0", "start_vus: 0\n    graceful_stop: 2.5", "graceful_stop"),
        ("status: [200]", "duration_under: 1", "duration_under"),
        ("expect: [200]", "expect: [200]\n          timeout: 3", "timeout: 3"),
    ] {
        let e = rejects(from, to, at, "durations need a unit, e.g. 500ms, 30s, 2m");
        assert!(e.message.contains("has none"), "{e}");
    }
    let plan = parse(&GOOD.replacen("duration: 30s, target", "duration: 0s, target", 1)).unwrap();
    assert_eq!(plan.scenarios[0].executor.stages()[0].duration, Duration::ZERO);
}

#[test]
fn unknown_keys_in_short_or_long_forms_are_named() {
    rejects(
        "think: { min: 1s, max: 2s }",
        "think: { min: 1s, max: 2s, mean: 1s }",
        "mean",
        "unknown field `mean`, expected `min` or `max`",
    );
    rejects(
        "think: { min: 1s, max: 2s }",
        "think: { min: 1s }",
        "think",
        "missing field `max`",
    );
    rejects(
        "think: { min: 1s, max: 2s }",
        "think: 2",
        "think: 2",
        "durations need a unit",
    );
    rejects(
        "      abort_on_fail: true",
        "      abortOnFail: true",
        "abortOnFail",
        "unknown field `abortOnFail`, expected one of `threshold`, `abort_on_fail`, `delay`",
    );
    rejects("      delay: 5s", "      delay: 5", "delay: 5", "durations need a unit");
    rejects(
        "    - p(95) < 500ms",
        "    - 500",
        "500",
        "expected an expression such as p(95) < 500ms",
    );
    rejects(
        "scenarios:",
        "data: { file: users.csv, cursr: shared }\nscenarios:",
        "cursr",
        "unknown field `cursr`, expected `file` or `cursor`",
    );
    rejects(
        "scenarios:",
        "data: { file: users.csv, cursor: random }\nscenarios:",
        "random",
        "unknown variant `random`, expected `per-vu` or `shared`",
    );
    let read: &dyn Fn(&str) -> Result<String, String> = &|_| Ok("email\na@x\n".into());
    let text = GOOD.replacen("scenarios:", "data: { file: users.csv, cursor: shared }\nscenarios:", 1);
    let plan = ScenarioPlan::parse(&text, "t.yaml", read).unwrap();
    assert_eq!(plan.data.map(|d| d.cursor), Some(Cursor::Shared));
    let Step::Think(Think::Range(min, max)) = plan.scenarios[0].flow[1] else {
        panic!("a think range")
    };
    assert_eq!((min, max), (Duration::from_secs(1), Duration::from_secs(2)));
    assert_eq!(plan.thresholds[1].delay_ms, 5000);
}

/// GOOD's ramping-vus scenario header, to swap for another executor.
const RAMP: &str = "executor: ramping-vus\n    start_vus: 0\n    stages:\n      - { duration: 30s, target: 10 }\n      - { duration: 1m, target: 50 }\n";

#[test]
fn executors_need_their_fields() {
    // Named as written in the file (kebab-case), pointing at the executor.
    rejects(
        RAMP,
        "executor: constant-vus\n    duration: 1m\n",
        "executor: constant-vus",
        "the constant-vus executor needs vus, e.g. vus: 10",
    );
    rejects(
        RAMP,
        "executor: constant-arrival-rate\n    rate: 10\n    duration: 1m\n",
        "executor: constant-arrival-rate",
        "the constant-arrival-rate executor needs pre_allocated_vus",
    );
    rejects(
        RAMP,
        "executor: constant-arrival-rate\n    duration: 1m\n    pre_allocated_vus: 2\n",
        "executor: constant-arrival-rate",
        "the constant-arrival-rate executor needs rate",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    pre_allocated_vus: 2\n",
        "executor: ramping-arrival-rate",
        "the ramping-arrival-rate executor needs stages",
    );
    rejects(
        RAMP,
        "executor: per-vu-iterations\n    vus: 2\n",
        "executor: per-vu-iterations",
        "the per-vu-iterations executor needs iterations",
    );
}

#[test]
fn fields_of_another_executor_are_refused() {
    let e = rejects(
        RAMP,
        "executor: constant-vus\n    vus: 5\n    duration: 1m\n    rate: 10\n",
        "rate: 10",
        "`rate` is not a field of constant-vus; it takes vus, duration (and start_time, graceful_stop, flow)",
    );
    assert_eq!(e.column, 5, "{e}");
    rejects(
        RAMP,
        "executor: per-vu-iterations\n    vus: 5\n    iterations: 2\n    stages: [{ duration: 1s, target: 1 }]\n",
        "stages:",
        "`stages` is not a field of per-vu-iterations; it takes vus, iterations, max_duration",
    );
    rejects(
        "start_vus: 0",
        "start_vus: 0\n    time_unit: 1s",
        "time_unit",
        "`time_unit` is not a field of ramping-vus",
    );
    // `rate:` is found as a key, not inside `start_rate:` above it.
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    start_rate: 1\n    rate: 5\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 1 }]\n",
        "    rate: 5",
        "`rate` is not a field of ramping-arrival-rate",
    );
}

#[test]
fn counts_and_rates_that_run_nothing_are_refused() {
    let arrival = |extra: &str| {
        format!("executor: constant-arrival-rate\n    rate: 10\n    duration: 1m\n    pre_allocated_vus: 5\n{extra}")
    };
    rejects(
        RAMP,
        &arrival("    time_unit: 0s\n"),
        "time_unit: 0s",
        "time_unit must be longer than 0: rates are iterations per time_unit",
    );
    rejects(
        RAMP,
        &arrival("    max_vus: 2\n"),
        "max_vus: 2",
        "max_vus (2) is below pre_allocated_vus (5)",
    );
    rejects(
        RAMP,
        &arrival("").replace("rate: 10", "rate: 0"),
        "rate: 0",
        "rate must be greater than 0",
    );
    rejects(
        RAMP,
        &arrival("").replace("rate: 10", "rate: 1e15"),
        "rate: 1e15",
        "1000000000000000 per 1s is 1.000e15 per second: more than 100M per second is not a plan",
    );
    // Per time_unit: 6e9 a minute is 1e8 a second, the limit itself.
    assert!(
        parse(&GOOD.replacen(
            RAMP,
            &arrival("    time_unit: 1m\n").replace("rate: 10", "rate: 6e9"),
            1
        ))
        .is_ok()
    );
    rejects(
        RAMP,
        &arrival("    time_unit: 1m\n").replace("rate: 10", "rate: 6.1e9"),
        "rate: 6.1e9",
        "lower it or lengthen time_unit",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 2e8 }]\n",
        "stages:",
        "more than 100M per second",
    );
    rejects(
        RAMP,
        &arrival("").replace("pre_allocated_vus: 5", "pre_allocated_vus: 0"),
        "pre_allocated_vus: 0",
        "pre_allocated_vus must be at least 1: an arrival-rate scenario needs a VU ready",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    start_rate: -5\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 1 }]\n",
        "start_rate: -5",
        "start_rate cannot be negative",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 0 }]\n",
        "stages:",
        "start_rate and every stage's target are 0: no iteration would ever start",
    );
    rejects(
        RAMP,
        "executor: constant-vus\n    vus: 0\n    duration: 1m\n",
        "vus: 0",
        "vus must be at least 1: with no VUs the scenario runs nothing",
    );
    rejects(
        RAMP,
        "executor: shared-iterations\n    vus: 2\n    iterations: 0\n",
        "iterations: 0",
        "iterations must be at least 1",
    );
    rejects(
        RAMP,
        "executor: shared-iterations\n    vus: 2\n    iterations: 5\n    max_duration: 0s\n",
        "max_duration: 0s",
        "max_duration must be longer than 0",
    );
    rejects(
        "target: 10 }\n      - { duration: 1m, target: 50 }",
        "target: 0 }\n      - { duration: 1m, target: 0 }",
        "stages:",
        "start_vus and every stage's target are 0: no VU would ever run",
    );
    rejects("target: 50 }", "target: -1 }", "stages:", "cannot be negative");
    let text = GOOD
        .replacen("duration: 30s, target", "duration: 0s, target", 1)
        .replacen("duration: 1m, target", "duration: 0s, target", 1);
    let e = parse(&text).unwrap_err();
    assert!(e.message.contains("the stages last 0s in all"), "{e}");
    // Equal is fine, and max_vus defaults to pre_allocated_vus.
    let plan = parse(&GOOD.replacen(RAMP, &arrival("    max_vus: 5\n"), 1)).unwrap();
    let Executor::ConstantArrivalRate { max_vus, .. } = plan.scenarios[0].executor else {
        panic!("constant-arrival-rate")
    };
    assert_eq!(max_vus, 5);
    let plan = parse(&GOOD.replacen(RAMP, &arrival(""), 1)).unwrap();
    assert!(matches!(
        plan.scenarios[0].executor,
        Executor::ConstantArrivalRate { max_vus: 5, .. }
    ));
}

#[test]
fn check_modifiers_belong_to_their_kind() {
    let check = "is ok: { status: [200] }";
    for (to, message) in [
        (
            "is ok: { status: [200], contains: OK }",
            "check 'is ok': contains: goes with header:, not with status:",
        ),
        (
            "is ok: { body_contains: OK, equals: 1 }",
            "check 'is ok': equals: goes with json:, not with body_contains:",
        ),
        (
            "is ok: { header: X-A, exists: true }",
            "check 'is ok': exists: goes with json:, not with header:",
        ),
        (
            "is ok: { duration_under: 1s, contains: x }",
            "contains: goes with header:, not with duration_under:",
        ),
        (
            "is ok: { json: /a, contains: x }",
            "contains: goes with header:, not with json:",
        ),
        (
            "is ok: { status: [200], header: X-A }",
            "check 'is ok': it has status: and header:; give only one of",
        ),
        ("is ok: { contains: x }", "check 'is ok': give one of status:"),
        ("is ok: { json: /a, exists: false }", "equals: VALUE or exists: true"),
    ] {
        rejects(check, to, "is ok:", message);
    }
    let plan = parse(&GOOD.replacen(check, "is ok: { header: X-A, contains: b }", 1)).unwrap();
    let Step::Group { flow, .. } = &plan.scenarios[0].flow[2] else {
        panic!("a group")
    };
    let Step::Request(me) = &flow[0] else {
        panic!("a request")
    };
    assert_eq!(me.checks[0].kind, CheckKind::Header("X-A".into(), Some("b".into())));
}

#[test]
fn json_pointers_start_with_a_slash() {
    for (to, at, message) in [
        (
            "is ok: { json: data.token }",
            "is ok:",
            "check 'is ok': json 'data.token' is a JSON pointer and starts with /, e.g. /data/token",
        ),
        (
            "is ok: { json: '$.items[0].id', equals: 3 }",
            "is ok:",
            "json '$.items[0].id' is a JSON pointer and starts with /, e.g. /items/0/id",
        ),
        (
            "is ok: { json: /a~b }",
            "is ok:",
            "~ starts an escape: write ~0 for ~ and ~1 for /",
        ),
    ] {
        rejects("is ok: { status: [200] }", to, at, message);
    }
    rejects(
        "token: { json: /token }",
        "token: { json: token }",
        "token: { json: token }",
        "capture token: json 'token' is a JSON pointer and starts with /, e.g. /token",
    );
    rejects(
        "token: { json: /token }",
        "token: { json: /a~2 }",
        "token: { json",
        "~ starts an escape",
    );
    for ok in ["\"\"", "/", "/a~0b/c~1d/0"] {
        let text = GOOD.replacen("json: /token", &format!("json: {ok}"), 1);
        assert!(parse(&text).is_ok(), "{ok}");
    }
}

#[test]
fn statuses_are_real_and_listed() {
    for (to, at, message) in [
        (
            "expect: []",
            "expect: []",
            "expect: is empty, so every response would count as failed",
        ),
        ("expect: [600]", "expect: [600]", "statuses run from 100 to 599"),
        ("expect: [99]", "expect: [99]", "statuses run from 100 to 599"),
        ("expect: [\"300-200\"]", "expect:", "low to high"),
        ("expect: [6xx]", "expect:", "statuses run from 100 to 599"),
    ] {
        rejects("expect: [200]", to, at, message);
    }
    rejects(
        "  timeout: 5s",
        "  timeout: 5s\n  expect: []",
        "expect: []",
        "expect: is empty",
    );
    let check = "is ok: { status: [200] }";
    rejects(
        check,
        "is ok: { status: [] }",
        "is ok:",
        "check 'is ok': status: is empty",
    );
    rejects(
        check,
        "is ok: { status: [200, 999] }",
        "is ok:",
        "check 'is ok': status 999: codes run from 100 to 599",
    );
    rejects(check, "is ok: { status: [70000] }", "is ok:", "invalid value");
}

#[test]
fn variables_are_captured_before_they_are_used() {
    // A step before the one that captures it.
    let e = rejects(
        "    flow:\n      - request:\n          name: register",
        "    flow:\n      - request: { name: early, path: \"/x/{{token}}\" }\n      - request:\n          name: register",
        "{{token}}",
        "{{token}} is used in step 'early' before step 'register' captures it, in scenario 'signup': captures are cleared",
    );
    assert!(e.message.contains("move this request after 'register'"), "{e}");
    // The step that captures it.
    rejects(
        "path: /auth/register",
        "path: /auth/register/{{token}}",
        "{{token}}",
        "{{token}} is used in step 'register' which captures it itself",
    );
    // A default header goes with every request, the first one too...
    rejects(
        "User-Agent: throng-test",
        "Authorization: \"Bearer {{token}}\"",
        "{{token}}",
        "{{token}} is used in defaults.headers.Authorization, sent with step 'register', which captures it itself",
    );
    // ...unless the request sets that header itself (in any case).
    let text = GOOD
        .replacen("User-Agent: throng-test", "Authorization: \"Bearer {{token}}\"", 1)
        .replacen(
            "expect: [200]",
            "expect: [200]\n          headers: { authorization: none }",
            1,
        );
    parse(&text).unwrap();
    // Spaces inside the braces: still found, still pointed at.
    rejects(
        "path: /auth/register",
        "path: /auth/register/{{ token }}",
        "{{ token }}",
        "captures it itself",
    );
    // Never captured: the known names are those defined at that point.
    let e = rejects(
        "Bearer {{token}}",
        "Bearer {{tokn}}",
        "{{tokn}}",
        "{{tokn}} is not defined",
    );
    assert!(e.message.contains("known: token, vu, iter"), "{e}");
}

#[test]
fn standard_methods_are_capitalised() {
    let me = |plan: &ScenarioPlan| -> Request {
        let Step::Group { flow, .. } = &plan.scenarios[0].flow[2] else {
            panic!("a group")
        };
        let Step::Request(r) = &flow[0] else {
            panic!("a request")
        };
        (**r).clone()
    };
    for (written, sent) in [
        ("get", "GET"),
        ("Patch", "PATCH"),
        ("delete", "DELETE"),
        ("PURGE", "PURGE"),
        ("propfind", "propfind"),
    ] {
        let plan =
            parse(&GOOD.replacen("path: /me", &format!("path: /me\n                method: {written}"), 1)).unwrap();
        let r = me(&plan);
        assert_eq!(r.method, sent);
        assert_eq!(r.name, format!("{sent} /me"));
    }
    for bad in ["GE T", "\"\"", "GET/1", "\"PÖST\""] {
        let e = rejects(
            "path: /me",
            &format!("path: /me\n                method: {bad}"),
            "method:",
            "is not an HTTP method: write one of GET, HEAD, POST",
        );
        assert_eq!(e.column, 17, "{e}");
    }
}

#[test]
fn the_target_is_only_where_requests_go() {
    let target = "target: http://127.0.0.1:8080/api";
    for (to, message) in [
        ("target: http://127.0.0.1:8080/api?key=1", "has a query string (?key=1)"),
        ("target: http://127.0.0.1:8080/api?", "has a query string (?)"),
        ("target: http://127.0.0.1:8080/api#top", "has a fragment (#top)"),
        ("target: http://me:pw@127.0.0.1:8080/api", "has credentials (user@)"),
    ] {
        let e = rejects(target, to, "target:", message);
        assert_eq!(e.column, 1, "{e}");
    }
    let plan = parse(&GOOD.replacen(target, "target: http://127.0.0.1:8080/api/@me/", 1)).unwrap();
    assert_eq!(plan.target.base_path, "/api/@me");
}

#[test]
fn a_target_object_names_the_http_version() {
    let target = "target: http://127.0.0.1:8080/api";
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.target.http, throng_plan::HttpVersion::Http1);
    for (written, http) in [
        (
            "{ url: http://127.0.0.1:8080/api, http: 2 }",
            throng_plan::HttpVersion::Http2,
        ),
        (
            "{ url: 'http://127.0.0.1:8080/api', http: '2' }",
            throng_plan::HttpVersion::Http2,
        ),
        (
            "{ url: https://127.0.0.1:8443/api, http: 3 }",
            throng_plan::HttpVersion::Http3,
        ),
        (
            "{ url: http://127.0.0.1:8080/api, http: 1.1 }",
            throng_plan::HttpVersion::Http1,
        ),
        ("{ url: http://127.0.0.1:8080/api }", throng_plan::HttpVersion::Http1),
    ] {
        let plan = parse(&GOOD.replacen(target, &format!("target: {written}"), 1)).unwrap();
        assert_eq!(plan.target.http, http, "{written}");
        assert_eq!(plan.target.base_path, "/api", "{written}");
        assert!(plan.scenarios[0].target.is_none());
    }
    // The block form, and `http:` left out of the result when it is 1.1.
    let plan = parse(&GOOD.replacen(target, "target:\n  url: https://127.0.0.1:8443\n  http: 2", 1)).unwrap();
    assert_eq!(
        (plan.target.https, plan.target.http),
        (true, throng_plan::HttpVersion::Http2)
    );
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["target"]["http"], "h2");
    assert!(
        serde_json::to_value(parse(GOOD).unwrap()).unwrap()["target"]
            .get("http")
            .is_none()
    );
}

#[test]
fn a_target_objects_mistakes_point_at_their_line() {
    let target = "target: http://127.0.0.1:8080/api";
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  http: 4",
        "http: 4",
        "http: '4' is not an HTTP version throng speaks; write http: 1.1, 2 or 3",
    );
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  http: [2]",
        "http: [2]",
        "write http: 1.1, 2 or 3",
    );
    rejects(
        target,
        "target:\n  url: ws://127.0.0.1:8080\n  http: 2",
        "url: ws://",
        "scheme 'ws': use http:// or https://",
    );
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  http: 3",
        "http: 3",
        "http: 3 needs an https:// URL",
    );
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  protocol: h2",
        "protocol",
        "unknown field `protocol`, expected `url` or `http`",
    );
    rejects(target, "target: { http: 2 }", "target:", "target: needs url:");
    rejects(
        target,
        "target: { url: https://127.0.0.1:8443, http: 3 }\ntls:\n  version: \"1.2\"",
        "version:",
        "QUIC needs TLS 1.3",
    );
    rejects(
        target,
        "target: 8080",
        "target: 8080",
        "expected a URL, or a mapping with url: and http:",
    );
}

#[test]
fn a_scenarios_target_replaces_the_files() {
    let at = "    executor: ramping-vus";
    let plan = parse(&GOOD.replacen(at, &format!("    target: {{ http: 2 }}\n{at}"), 1)).unwrap();
    let own = plan.scenarios[0].target.as_ref().expect("its own target");
    // The file's URL, its own protocol.
    assert_eq!(
        (own.url.as_str(), own.http),
        ("http://127.0.0.1:8080/api", throng_plan::HttpVersion::Http2)
    );
    assert_eq!(
        plan.scenarios[0].target(&plan.target).http,
        throng_plan::HttpVersion::Http2
    );
    assert_eq!(plan.target.http, throng_plan::HttpVersion::Http1);
    // Its own URL; a plain string is HTTP/1.1 whatever the file speaks.
    let text = GOOD
        .replacen(
            "target: http://127.0.0.1:8080/api",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
            1,
        )
        .replacen(at, &format!("    target: https://127.0.0.1:8443/v2\n{at}"), 1);
    let plan = parse(&text).unwrap();
    let own = plan.scenarios[0].target(&plan.target);
    assert_eq!((own.https, own.port, own.base_path.as_str()), (true, 8443, "/v2"));
    assert_eq!(own.http, throng_plan::HttpVersion::Http1);
    // An object without http: keeps the file's protocol.
    let text = GOOD
        .replacen(
            "target: http://127.0.0.1:8080/api",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
            1,
        )
        .replacen(at, &format!("    target: {{ url: http://127.0.0.1:9090 }}\n{at}"), 1);
    let plan = parse(&text).unwrap();
    assert_eq!(
        plan.scenarios[0].target(&plan.target).http,
        throng_plan::HttpVersion::Http2
    );
    // tls: serves a scenario's https target too.
    let text = GOOD
        .replacen("defaults:", "tls: { insecure: true }\ndefaults:", 1)
        .replacen(
            at,
            &format!("    target: {{ url: https://127.0.0.1:8443, http: 3 }}\n{at}"),
            1,
        );
    assert!(parse(&text).unwrap().tls.is_some_and(|t| t.insecure));
    // Mistakes point into the scenario.
    let e = rejects(
        at,
        &format!("    target: {{ http: 5 }}\n{at}"),
        "http: 5",
        "http: '5' is not an HTTP version",
    );
    assert!(e.line > 1, "{e}");
    rejects(
        at,
        &format!("    target: {{ url: 'http://x:1/', http: 3 }}\n{at}"),
        "http: 3",
        "http: 3 needs an https:// URL",
    );
    rejects(
        at,
        &format!("    target: {{ url: http://x:1/, htp: 2 }}\n{at}"),
        "htp",
        "unknown field `htp`",
    );
}

#[test]
fn target_flag_replaces_every_url_and_keeps_the_protocols() {
    let at = "    executor: ramping-vus";
    let text = GOOD
        .replacen(
            "target: http://127.0.0.1:8080/api",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
            1,
        )
        .replacen(
            at,
            &format!("    target: {{ url: http://127.0.0.1:9090, http: 1.1 }}\n{at}"),
            1,
        );
    let given = TargetInputs {
        url: Some("http://10.0.0.1:7000"),
        env: None,
    };
    let plan = ScenarioPlan::parse_with(&text, "t.yaml", &|f| Err(format!("no file {f}")), &given).unwrap();
    assert_eq!(
        (plan.target.port, plan.target.http),
        (7000, throng_plan::HttpVersion::Http2)
    );
    let own = plan.scenarios[0].target(&plan.target);
    assert_eq!((own.port, own.http), (7000, throng_plan::HttpVersion::Http1));
}

#[test]
fn env_names_lists_every_variable_once() {
    let text = GOOD
        .replacen("User-Agent: throng-test", "User-Agent: \"{{env.UA}}\"", 1)
        .replacen(
            "path: /me",
            "path: /me/{{env.TENANT}}\n                query: { k: \"{{env.API_KEY}}\" }",
            1,
        )
        .replacen(
            "password: \"pw-{{vu}}\"",
            "password: \"{{env.TENANT}}-{{env.PASSWORD}}\"",
            1,
        );
    let plan = parse(&text).unwrap();
    assert_eq!(plan.env_names(), ["API_KEY", "PASSWORD", "TENANT", "UA"]);
    assert!(parse(GOOD).unwrap().env_names().is_empty());
    rejects("pw-{{vu}}", "pw-{{env.}}", "{{env.}}", "{{env.}} names no variable");
    rejects(
        "pw-{{vu}}",
        "pw-{{env.PASS-WORD}}",
        "{{env.PASS-WORD}}",
        "'PASS-WORD' is not an environment variable name",
    );
}

#[test]
fn capture_names_are_identifiers_and_not_built_ins() {
    for (name, message) in [
        (
            "user-id",
            "capture 'user-id': a variable name is letters, digits and _, not starting with a digit, e.g. user_id",
        ),
        ("2fa", "e.g. _2fa"),
        ("a.b", "e.g. a_b"),
        ("\"my token\"", "e.g. my_token"),
        ("vu", "capture 'vu': {{vu}} is built in"),
        ("env", "capture 'env': {{env}} is built in"),
        ("random_int", "give the variable another name, e.g. my_random_int"),
    ] {
        rejects(
            "token: { json: /token }",
            &format!("{name}: {{ json: /token }}"),
            "{ json: /token }",
            message,
        );
    }
    let read: &dyn Fn(&str) -> Result<String, String> = &|_| Ok("email,iter\na@x,1\n".into());
    let text = GOOD.replacen("scenarios:", "data: users.csv\nscenarios:", 1);
    let e = ScenarioPlan::parse(&text, "t.yaml", read).unwrap_err();
    assert!(
        e.message
            .contains("the column 'iter' is hidden by the built-in {{iter}}"),
        "{e}"
    );
    assert!(parse(&GOOD.replace("token", "_Token_2")).is_ok());
}

#[test]
fn thresholds_keep_the_files_order() {
    let text = GOOD.replacen(
        "thresholds:\n",
        "thresholds:\n  errors: [rate < 1%]\n  checks{check:is ok}: [rate > 0.9]\n",
        1,
    ) + "  iterations: [count > 0]\n  connect: [max < 1s]\n";
    let plan = parse(&text).unwrap();
    let keys: Vec<&str> = plan
        .thresholds
        .iter()
        .map(|t| t.text.split(": ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        keys,
        [
            "errors",
            "checks{check:is ok}",
            "response{step:register}",
            "response{step:register}",
            "iterations",
            "connect"
        ]
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  errors: []\n",
        "errors: []",
        "errors: the list is empty, so nothing is judged",
    );
    let text = GOOD.to_string() + "  response{step:register}: [p(99) < 1s]\n";
    let e = parse(&text).unwrap_err();
    assert!(e.message.contains("appears twice"), "{e}");
    assert_eq!(e.line, text.lines().count(), "{e}");
}

#[test]
fn scaling_keeps_the_graceful_periods() {
    let text = GOOD.replacen(
        "start_vus: 0",
        "start_vus: 0\n    start_time: 10s\n    graceful_stop: 20s\n    graceful_ramp_down: 40s",
        1,
    );
    let s = parse(&text).unwrap().scaled(0.5).scenarios.remove(0);
    assert_eq!(s.start_time, Duration::from_secs(5));
    assert_eq!(s.executor.length(), Duration::from_secs(45));
    assert_eq!(s.graceful_stop, Duration::from_secs(20));
    let Executor::RampingVus { graceful_ramp_down, .. } = s.executor else {
        panic!("ramping-vus")
    };
    assert_eq!(graceful_ramp_down, Duration::from_secs(40));
    let text = GOOD.replacen(
        RAMP,
        "executor: shared-iterations\n    vus: 2\n    iterations: 5\n    max_duration: 1m\n",
        1,
    );
    let s = parse(&text).unwrap().scaled(0.5).scenarios.remove(0);
    assert_eq!(s.executor.length(), Duration::from_secs(30));
    assert_eq!(s.graceful_stop, Duration::from_secs(30));
}

#[test]
fn data_columns_are_variables() {
    let text = GOOD
        .replacen("scenarios:", "data: users.csv\nscenarios:", 1)
        .replacen("{{token}}", "{{email}}", 1);
    let plan = ScenarioPlan::parse(&text, "t.yaml", &|_| Ok("email,password\na@x,1\nb@x,2\n".into())).unwrap();
    let data = plan.data.unwrap();
    assert_eq!(data.columns, ["email", "password"]);
    assert_eq!(data.row_count, 2);
    assert_eq!(data.cursor, Cursor::PerVu);
}

#[test]
fn an_error_quoting_a_huge_key_or_value_fits_one_line() {
    let key = "k".repeat(70_000);
    let files = [
        format!("{key}: 1\n"),
        GOOD.replacen("scenarios:", &format!("scenarios:\n  {key}: {{}}"), 1),
        GOOD.replacen("path: /me", &format!("path: \"/{{{{{key}}}}}\""), 1),
    ];
    for file in &files {
        let e = parse(file).expect_err("refused");
        assert!(
            e.message.contains(&key),
            "the message itself is whole: {}",
            &e.message[..200]
        );
        let shown = e.to_string();
        assert!(
            shown.chars().count() <= 320,
            "{} chars: {}",
            shown.chars().count(),
            &shown[..400]
        );
        assert!(!shown.contains('\n'));
        assert!(shown.contains(&format!("{}…", "k".repeat(60))), "{shown}");
        assert!(shown.starts_with("t.yaml:"), "{shown}");
    }
}

#[test]
fn shown_clips_quoted_spans_and_keeps_short_messages() {
    assert_eq!(
        shown("unknown field `a`, expected `b`"),
        "unknown field `a`, expected `b`"
    );
    assert_eq!(shown("don't say 'x'"), "don't say 'x'");
    let long = format!("key '{}' and \"{}\"", "a".repeat(100), "b".repeat(61));
    assert_eq!(
        shown(&long),
        format!("key '{}…' and \"{}…\"", "a".repeat(60), "b".repeat(60))
    );
    assert_eq!(shown("two\nlines"), "two lines");
    assert_eq!(shown(&"x ".repeat(400)).chars().count(), 301);
}

/// A file of grpc steps, with a .proto file read through `read`.
fn parse_grpc(flow: &str) -> Result<ScenarioPlan, ScenarioError> {
    const PROTO: &str = r#"syntax = "proto3"; package p;
        message In { string name = 1; int32 n = 2; } message Out { string message = 1; }
        service S { rpc Call(In) returns (Out); rpc Many(In) returns (stream Out); }"#;
    let text = format!(
        "target: {{ url: http://127.0.0.1:1, http: 2 }}\nproto: {{ files: [p.proto] }}\nscenarios:\n  s:\n    \
         executor: shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n{flow}"
    );
    ScenarioPlan::parse(&text, "g.yaml", &|f| match f {
        "p.proto" => Ok(PROTO.to_string()),
        _ => Err(format!("no {f}")),
    })
}

#[test]
fn grpc_steps_capture_for_later_steps_and_are_tagged() {
    let plan = parse_grpc(
        "      - grpc: { name: first, call: p.S/Call, message: { n: 3 }, capture: { m: { json: /message } } }\n      \
         - grpc: { call: p.S/Many, message: { name: \"{{m}}\" }, check: { ok: { json: /message } } }\n",
    )
    .unwrap();
    let Step::Grpc(first) = &plan.scenarios[0].flow[0] else {
        panic!("not a grpc step");
    };
    // No template: encoded once, framed (a 5-byte prefix, then field 2 = 3).
    assert_eq!(first.framed.as_deref(), Some(&[0, 0, 0, 0, 2, 0x10, 3][..]));
    assert_eq!(first.call, "p.S/Call");
    let Step::Grpc(second) = &plan.scenarios[0].flow[1] else {
        panic!("not a grpc step");
    };
    assert!(second.server_streaming && second.framed.is_none());
    // Named by its call when it has no name; tags and checks are known.
    assert_eq!(second.request.name, "p.S/Many");
    assert!(super::validate::tag_exists(&plan.scenarios, "step", "first"));
    assert!(super::validate::tag_exists(&plan.scenarios, "check", "ok"));
    // A capture used before the step that makes it.
    let e = parse_grpc(
        "      - grpc: { call: p.S/Call, message: { name: \"{{m}}\" } }\n      \
         - grpc: { call: p.S/Call, capture: { m: { json: /message } } }\n",
    )
    .unwrap_err();
    assert!(e.message.contains("{{m}} is used in step 'p.S/Call' before"), "{e}");
    // A message that does not fit, at its line; a status check refused.
    let e = parse_grpc("      - grpc:\n          call: p.S/Call\n          message: { n: \"x\" }\n").unwrap_err();
    assert_eq!((e.line, e.message.contains("not a p.In message")), (11, true), "{e}");
    let e = parse_grpc("      - grpc: { call: p.S/Call, check: { c: { status: [200] } } }\n").unwrap_err();
    assert!(e.message.contains("take no status:"), "{e}");
    let e = parse_grpc("      - grpc: { call: p.S/Call }\n        think: 1s\n").unwrap_err();
    assert!(
        e.message
            .contains("exactly one of request:, grpc:, websocket:, think: or group:"),
        "{e}"
    );
}

#[test]
fn a_threshold_may_pass_without_samples_only_when_it_says_so() {
    let text = GOOD.replacen(
        "thresholds:\n",
        "thresholds:\n  errors:\n    - rate < 1%\n    - rate < 2% or no samples\n    - threshold: rate < 3%\n      \
         no_samples: pass\n    - threshold: rate < 4%\n      no_samples: fail\n",
        1,
    );
    let plan = parse(&text).unwrap();
    let allowed: Vec<(&str, bool)> = plan
        .thresholds
        .iter()
        .filter(|t| t.metric == "errors")
        .map(|t| (t.text.as_str(), t.pass_without_samples))
        .collect();
    assert_eq!(
        allowed,
        [
            ("errors: rate < 1%", false),
            ("errors: rate < 2% or no samples", true),
            ("errors: rate < 3%", true),
            ("errors: rate < 4%", false),
        ]
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  errors:\n    - threshold: rate < 1% or no samples\n      no_samples: fail\n",
        "errors:",
        "ends 'or no samples' but no_samples: fail",
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  errors:\n    - threshold: rate < 1%\n      no_samples: maybe\n",
        "no_samples",
        "unknown variant",
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  dropped: [rate < 1%]\n",
        "dropped",
        "count dropped_iterations",
    );
}
