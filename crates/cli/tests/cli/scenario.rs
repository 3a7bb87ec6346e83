//! `throng run`: scenario files against the lab server (and its auth
//! service). Assertions are on counts, shapes and invariants, never on how
//! long anything took.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{assert_books_balance, lab, output, schema_violations, throng};
use throng_metrics::{ScenarioStats, TagStats};
use throng_result::RunResult;

struct Scenario {
    dir: tempfile::TempDir,
    file: PathBuf,
}

/// Writes `yaml` (with `TARGET` replaced by `target`) to a scenario file.
fn scenario(yaml: &str, target: &str) -> Scenario {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, yaml.replace("TARGET", target)).unwrap();
    Scenario { dir, file }
}

struct Ran {
    /// The scenario's directory, kept until the run's files are read.
    _scenario: Scenario,
    code: i32,
    stdout: String,
    stderr: String,
    result: Option<RunResult>,
    json: PathBuf,
    junit: PathBuf,
}

impl Ran {
    fn result(&self) -> &RunResult {
        self.result
            .as_ref()
            .unwrap_or_else(|| panic!("no result; exit {}: {}{}", self.code, self.stdout, self.stderr))
    }

    fn stats(&self) -> &ScenarioStats {
        self.result()
            .measurements
            .scenario
            .as_ref()
            .expect("a scenario run records scenario figures")
    }

    fn tag(&self, key: &str) -> &TagStats {
        self.stats()
            .tags
            .get(key)
            .unwrap_or_else(|| panic!("no tag '{key}' in {:?}", self.stats().tags.keys().collect::<Vec<_>>()))
    }
}

/// `throng run FILE --json --junit --quiet ARGS`.
fn run(s: Scenario, args: &[&str]) -> Ran {
    let json = s.dir.path().join("result.json");
    let junit = s.dir.path().join("junit.xml");
    let out = output(
        throng()
            .arg("run")
            .arg(&s.file)
            .arg("--json")
            .arg(&json)
            .arg("--junit")
            .arg(&junit)
            .arg("--quiet")
            .args(args),
    );
    let result = common::read_result(&json);
    Ran {
        _scenario: s,
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        result,
        json,
        junit,
    }
}

/// Invariants of every scenario result: the books balance, the document
/// follows the schema, and the all-requests tag agrees with the totals.
fn assert_consistent(r: &Ran) {
    let res = r.result();
    assert_books_balance(res);
    let violations = schema_violations(&r.json);
    assert!(violations.is_empty(), "schema violations: {violations:#?}");
    let all = r.tag("");
    let m = &res.measurements;
    let interrupted = m.requests.errors.get("interrupted").copied().unwrap_or(0);
    assert_eq!(
        all.requests + all.interrupted,
        m.requests.ended(),
        "every request is under the all tag"
    );
    assert_eq!(all.interrupted, interrupted);
    assert_eq!(all.requests - all.failed, m.requests.ok);
    assert_eq!(
        all.response.count(),
        m.status.values().sum::<u64>(),
        "a response time per response"
    );
    let series: u64 = r.stats().series.iter().map(|s| s.iterations).sum();
    assert_eq!(series, r.stats().iterations, "per-second iterations add up");
}

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).unwrap()
}

#[test]
fn the_auth_example_counts_expected_401s_as_ok() {
    let lab = common::auth_lab();
    let yaml = example("auth-stages.yaml").replace("http://127.0.0.1:8080", &format!("http://{}", lab.addr()));
    let s = scenario(&yaml, "");
    // The 5m30s ramp in about 5 s, same shape.
    let r = run(s, &["--scale", "0.015"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_consistent(&r);
    let st = r.stats();
    assert!(st.iterations >= 5, "iterations: {}", st.iterations);
    let m = &r.result().measurements;
    assert_eq!(
        m.requests.failed(),
        m.requests.errors.get("interrupted").copied().unwrap_or(0),
        "{:?}",
        m.requests
    );
    // Each register is a 200; every other step answers 401 and expects it.
    let register = r.tag("step:register");
    let refresh = r.tag("step:refresh (unknown token)");
    assert_eq!(register.failed, 0);
    assert_eq!(refresh.failed, 0);
    assert_eq!(m.status.get(&200).copied().unwrap_or(0), register.requests);
    assert_eq!(
        m.status.get(&401).copied().unwrap_or(0),
        r.tag("step:login before verify").requests + r.tag("step:verify-otp (wrong code)").requests + refresh.requests
    );
    assert!(m.status.get(&401).copied().unwrap_or(0) > 0);
    // "Successful" responses are those the step expects: here, all of them.
    assert_eq!(r.tag("").expected.count(), r.tag("").response.count());
    for (name, c) in &st.checks {
        assert_eq!(c.fails, 0, "check '{name}' failed {} times", c.fails);
        assert!(c.passes > 0, "check '{name}' never ran");
    }
    // Every stage of the ramp is tagged, and the thresholds held.
    for i in 1..=6 {
        assert!(st.tags.contains_key(&format!("stage:auth#{i}")), "stage {i} missing");
    }
    assert_eq!(r.result().thresholds.len(), 4);
    assert!(r.result().thresholds_passed(), "{:?}", r.result().thresholds);
    assert!(r.stdout.contains("load levels (per stage)"), "{}", r.stdout);
    assert!(r.stdout.contains("expected status only"), "{}", r.stdout);
}

const EXECUTORS: &str = r#"
target: TARGET
scenarios:
  constant:
    executor: constant-vus
    vus: 3
    duration: 2s
    flow:
      - request: { name: c, path: / }
      - think: 10ms
  pervu:
    executor: per-vu-iterations
    vus: 4
    iterations: 5
    flow:
      - request: { name: p, path: "/bytes/{{iter}}" }
  shared:
    executor: shared-iterations
    vus: 3
    iterations: 7
    flow:
      - request: { name: s, path: / }
  ramp:
    executor: ramping-vus
    start_time: 1s
    stages:
      - { duration: 1s, target: 6 }
      - { duration: 1s, target: 6 }
    flow:
      - request: { name: r, path: / }
      - think: 10ms
"#;

#[test]
fn closed_executors_follow_the_plan() {
    let lab = lab(None);
    let s = scenario(EXECUTORS, &format!("http://{}", lab.addr()));
    let r = run(s, &["--threads", "2"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_consistent(&r);
    // Iteration counts are exact where the plan fixes them.
    assert_eq!(r.tag("step:p").requests, 20, "4 VUs × 5 iterations");
    assert_eq!(r.tag("step:s").requests, 7, "7 iterations shared");
    assert_eq!(r.result().measurements.requests.failed(), 0);
    // VUs per scenario over time, from the per-second series (plan order:
    // constant, pervu, shared, ramp — sorted by name: constant, pervu, ramp, shared).
    let p = match &r.result().plan {
        throng_result::Plan::Run(p) => p,
        other => panic!("not a run: {other:?}"),
    };
    let index = |name: &str| p.scenarios.iter().position(|s| s.name == name).unwrap();
    let vus = |name: &str| -> Vec<u64> {
        let i = index(name);
        r.stats()
            .series
            .iter()
            .map(|x| x.vus_by_scenario.get(i).copied().unwrap_or(0))
            .collect()
    };
    assert_eq!(vus("constant").iter().max(), Some(&3), "{:?}", vus("constant"));
    assert_eq!(vus("pervu").iter().max(), Some(&4));
    assert_eq!(vus("shared").iter().max(), Some(&3));
    let ramp = vus("ramp");
    // Starts at 1 s, reaches its target of 6 during the second stage.
    assert_eq!(ramp.first(), Some(&0), "{ramp:?}");
    assert_eq!(ramp.iter().max(), Some(&6), "{ramp:?}");
    assert!(r.tag("stage:ramp#1").requests > 0 && r.tag("stage:ramp#2").requests > 0);
    // Constant VUs iterate throughout; the ramp only from its start.
    assert!(r.tag("step:c").requests > 3);
    let first_ramp_second = r.tag("step:r").series.iter().map(|x| x.second).min().unwrap();
    assert!(first_ramp_second >= 1, "the ramp started at {first_ramp_second}s");
}

const ARRIVALS: &str = r#"
target: TARGET
scenarios:
  steady:
    executor: constant-arrival-rate
    rate: 40
    duration: 2s
    pre_allocated_vus: 1
    max_vus: 2
    flow:
      - request: { name: slow, path: /delay/200 }
  ramp:
    executor: ramping-arrival-rate
    start_rate: 0
    time_unit: 1s
    pre_allocated_vus: 5
    max_vus: 50
    stages:
      - { duration: 2s, target: 30 }
    flow:
      - request: { name: fast, path: / }
"#;

#[test]
fn arrival_rates_start_on_schedule_and_drop_what_no_vu_can_take() {
    let lab = lab(None);
    let s = scenario(ARRIVALS, &format!("http://{}", lab.addr()));
    let r = run(s, &["--threads", "2"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_consistent(&r);
    let st = r.stats();
    // 40/s for 2 s is 80 starts. Two VUs each take 200 ms per iteration: at
    // most 10/s each, so most starts find no VU free and are dropped.
    let steady = r.tag("step:slow").requests + r.tag("step:slow").interrupted;
    assert!(st.dropped_iterations > 0);
    // 0 → 30/s over 2 s is 30 starts, every one taken (fast, 50 VUs).
    let fast = r.tag("step:fast").requests;
    assert_eq!(fast, 30);
    assert_eq!(steady + st.dropped_iterations, 80, "started + dropped = scheduled");
    assert!(
        r.result()
            .measurements
            .phase("schedule_lag")
            .is_some_and(|h| h.count() == steady + fast)
    );
    assert!(r.result().coordinated_omission_free);
}

/// One VU and four workers: every arrival goes to the worker that has the
/// VU (dealt round the workers, three of four would have been dropped for
/// want of one), and the first finds it idle before it ever ran.
#[test]
fn an_arrival_rate_with_fewer_vus_than_workers_drops_nothing() {
    let lab = lab(None);
    let yaml = r#"
target: TARGET
scenarios:
  sparse:
    executor: constant-arrival-rate
    rate: 2
    duration: 3s
    pre_allocated_vus: 1
    flow:
      - request: { name: one, path: / }
"#;
    let s = scenario(yaml, &format!("http://{}", lab.addr()));
    let r = run(s, &["--threads", "4"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_consistent(&r);
    // 2/s for 3 s: 6 starts, 500 ms apart, each a request of about 1 ms.
    assert_eq!(r.stats().dropped_iterations, 0, "{}", r.stdout);
    assert_eq!(r.tag("step:one").requests, 6, "{}", r.stdout);
}

const CAPTURE: &str = r#"
target: TARGET
scenarios:
  signup:
    executor: per-vu-iterations
    vus: 3
    iterations: 2
    flow:
      - request:
          name: register
          path: /auth/register
          json: { email: "u{{vu}}-{{iter}}-{{uuid}}@example.test", password: "pw-{{vu}}" }
          expect: [200]
          capture:
            email: { json: /email }
            otp: { json: /otp }
      - request:
          name: verify
          path: /auth/verify-otp
          json: { email: "{{email}}", otp: "{{otp}}" }
          expect: [200]
      - request:
          name: login
          path: /auth/login
          json: { email: "{{email}}", password: "pw-{{vu}}" }
          expect: [200]
          capture:
            token: { json: TOKEN_POINTER }
      - request:
          name: me
          path: /auth/me
          headers: { Authorization: "Bearer {{token}}" }
          check:
            is me: { json: /email, exists: true }
            has type: { header: Content-Type, contains: json }
"#;

#[test]
fn a_captured_token_authenticates_the_next_request() {
    let lab = common::auth_lab();
    let target = format!("http://{}", lab.addr());
    let good = scenario(&CAPTURE.replace("TOKEN_POINTER", "/access_token"), &target);
    let r = run(good, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_consistent(&r);
    let me = r.tag("step:me");
    assert_eq!(me.requests, 6);
    assert_eq!(me.failed, 0);
    assert_eq!(r.stats().checks["is me"].passes, 6);
    assert_eq!(r.stats().checks["has type"].passes, 6);

    // The same flow capturing nothing: /auth/me refuses every request.
    let bad = scenario(&CAPTURE.replace("TOKEN_POINTER", "/no_such_field"), &target);
    let r = run(bad, &[]);
    assert_eq!(
        r.code, 0,
        "no thresholds, and most requests succeed: {}{}",
        r.stdout, r.stderr
    );
    let me = r.tag("step:me");
    assert_eq!(me.requests, 6);
    assert_eq!(me.unexpected_status, 6);
    assert_eq!(r.stats().checks["is me"].fails, 6);
    assert_eq!(r.result().measurements.requests.errors.get("check_failed"), Some(&6));
    assert_eq!(r.tag("step:login").failed, 0);
}

const THRESHOLDS: &str = r#"
target: TARGET
scenarios:
  fast:
    executor: constant-arrival-rate
    rate: 20
    duration: 5s
    pre_allocated_vus: 2
    max_vus: 20
    flow:
      - request: { name: fast, path: / }
  slow:
    executor: constant-vus
    vus: 10
    duration: 1s
    start_time: 2s
    flow:
      - request: { name: slow, path: /delay/300 }
thresholds:
  response:
    - LIMIT
"#;

#[test]
fn thresholds_decide_the_exit_code_and_windows_catch_one_bad_second() {
    let lab = lab(None);
    let target = format!("http://{}", lab.addr());
    // About 100 fast requests and 30 slow ones, all slow ones within about
    // one second: the run's p(60) is fast, that second's is slow.
    let whole = run(scenario(&THRESHOLDS.replace("LIMIT", "p(60) < 100ms"), &target), &[]);
    assert_eq!(whole.code, 0, "{}{}", whole.stdout, whole.stderr);
    assert!(whole.result().thresholds_passed());
    let windowed = run(
        scenario(&THRESHOLDS.replace("LIMIT", "p(60) < 100ms over 1s"), &target),
        &[],
    );
    assert_eq!(windowed.code, 99, "{}{}", windowed.stdout, windowed.stderr);
    let v = &windowed.result().thresholds[0];
    assert!(!v.passed);
    assert!(v.observed.unwrap() >= 300_000.0, "{v:?}");
    assert!(windowed.stdout.contains("FAILED (exit code 99)"), "{}", windowed.stdout);
    assert!(
        windowed.stderr.contains("1 of 1 thresholds failed"),
        "{}",
        windowed.stderr
    );

    // JUnit: well-formed, one test case, one failure naming the threshold.
    let xml = std::fs::read_to_string(&windowed.junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].attribute("name"), Some("response: p(60) < 100ms over 1s"));
    let failure = cases[0].children().find(|n| n.has_tag_name("failure")).unwrap();
    assert!(failure.attribute("message").unwrap().contains("window"), "{xml}");
    let suites = doc.root_element();
    assert_eq!(suites.attribute("failures"), Some("1"));
    let passing = std::fs::read_to_string(&whole.junit).unwrap();
    let doc = roxmltree::Document::parse(&passing).unwrap();
    assert_eq!(doc.root_element().attribute("failures"), Some("0"));
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("failure")).count(), 0);
}

#[test]
fn abort_on_fail_stops_the_run_early() {
    let lab = lab(None);
    let yaml = r#"
target: TARGET
scenarios:
  slow:
    executor: constant-vus
    vus: 2
    duration: 30s
    flow:
      - request: { path: /delay/100 }
thresholds:
  response:
    - threshold: max < 10ms
      abort_on_fail: true
      delay: 1s
"#;
    let r = run(scenario(yaml, &format!("http://{}", lab.addr())), &[]);
    assert_eq!(r.code, 99, "{}{}", r.stdout, r.stderr);
    assert_consistent(&r);
    let res = r.result();
    assert!(res.notes.iter().any(|n| n.contains("abort_on_fail")), "{:?}", res.notes);
    // Stopped long before its 30 s: at 100 ms per request, 2 VUs make
    // about 20 requests a second.
    assert!(
        res.measurements.requests.ended() < 200,
        "{:?}",
        res.measurements.requests
    );
}

#[test]
fn bad_scenario_files_say_where_and_exit_2() {
    let good = "target: http://127.0.0.1:9\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n    flow:\n      - request: { path: / }\n";
    let cases: [(&str, &str, &str, usize); 6] = [
        ("    vus: 1\n", "    vus: 1\n    users: 5\n", "unknown field `users`", 6),
        ("    vus: 1\n", "    vus: lots\n", "invalid type", 5),
        ("    duration: 1s\n", "    duration: 1 fortnight\n", "duration", 6),
        ("{ path: / }", "{ path: \"/{{nope}}\" }", "{{nope}}", 8),
        (
            "executor: constant-vus",
            "executor: constant-users",
            "unknown variant `constant-users`",
            4,
        ),
        (
            "target: http://127.0.0.1:9",
            "target: ftp://127.0.0.1:9",
            "http:// or https://",
            1,
        ),
    ];
    for (from, to, message, line) in cases {
        let s = scenario(&good.replacen(from, to, 1), "");
        let file = s.file.clone();
        let r = run(s, &[]);
        assert_eq!(r.code, 2, "{to}: {}{}", r.stdout, r.stderr);
        let prefix = format!("{}:{line}:", file.display());
        assert!(r.stderr.contains(&prefix), "{to}: expected '{prefix}' in: {}", r.stderr);
        assert!(
            r.stderr.contains(message),
            "{to}: expected '{message}' in: {}",
            r.stderr
        );
        assert!(r.result.is_none());
    }
    // An environment variable the file uses must be set before anything starts.
    let with_env = good.replace("{ path: / }", "{ path: \"/{{env.THRONG_TEST_UNSET_PATH}}\" }");
    let r = run(scenario(&with_env, ""), &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("{{env.THRONG_TEST_UNSET_PATH}} used but not set") && r.stderr.contains("--env"),
        "{}",
        r.stderr
    );
    let r = run(scenario(&with_env, ""), &["--env", "THRONG_TEST_UNSET_PATH=x"]);
    assert_ne!(r.code, 2, "set with --env, the file runs: {}", r.stderr);
    // Flags are checked too.
    let r = run(scenario(good, ""), &["--scale", "0"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--scale"), "{}", r.stderr);
    let r = run(scenario(good, ""), &["--env", "NOEQUALS"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("NAME=VALUE"), "{}", r.stderr);
    let dir = tempfile::tempdir().unwrap();
    let missing = run(
        Scenario {
            file: dir.path().join("absent.yaml"),
            dir,
        },
        &[],
    );
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("cannot read the scenario file"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_target_that_is_down_fails_the_run_with_exit_1() {
    let port = common::free_port();
    let yaml = "target: TARGET\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 2\n    duration: 2s\n    flow:\n      - request: { path: / }\n";
    let r = run(scenario(yaml, &format!("http://127.0.0.1:{port}")), &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("refused"), "{}", r.stderr);
    assert_consistent(&r);
    assert!(r.tag("").failed > 0);
}

/// A fenced block of docs/guide/src/scenarios.md: the first whose opening line is
/// "```LANG" and whose first line contains `first`.
fn doc_block(lang: &str, first: &str) -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"))
        .unwrap();
    let opening = format!("```{lang}\n");
    doc.split(opening.as_str())
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.lines().next().is_some_and(|l| l.contains(first)))
        .unwrap_or_else(|| panic!("no ```{lang} block starting with '{first}' in docs/guide/src/scenarios.md"))
        .to_string()
}

/// Kills the child (the lab server) when the test ends, however it ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_docs_first_example_runs_as_written_against_throng_serve() {
    // The server as the page starts it, on a free port instead of 8080.
    let port = common::free_port();
    let serve = doc_block("sh,norun", "throng serve");
    let serve_args: Vec<String> = serve
        .lines()
        .next()
        .unwrap()
        .trim_end_matches('&')
        .split_whitespace()
        .skip(1)
        .map(|a| a.replace("127.0.0.1:8080", &format!("127.0.0.1:{port}")))
        .collect();
    assert_eq!(serve_args[0], "serve");
    let _server = Reaped(
        throng()
            .args(&serve_args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_listening(format!("127.0.0.1:{port}").parse().unwrap());

    let yaml = doc_block("yaml", "# auth.yaml").replace("127.0.0.1:8080", "TARGET");
    assert!(yaml.contains("TARGET"), "the example targets 127.0.0.1:8080");
    let s = scenario(&yaml, &format!("127.0.0.1:{port}"));
    let r = run(s, &["--scale", "0.05"]);
    assert_consistent(&r);
    // Thresholds on latency may fail on a busy machine (exit 99); nothing else may.
    assert!(r.code == 0 || r.code == 99, "exit {}: {}", r.code, r.stderr);
    let m = &r.result().measurements;
    assert!(m.requests.ok > 0);
    assert_eq!(
        m.requests.failed(),
        m.requests.error("interrupted"),
        "only the run's end cuts a request off"
    );
    for step in ["register", "verify", "wrong password", "login", "profile", "page"] {
        let t = r.tag(&format!("step:{step}"));
        assert!(t.requests > 0, "step {step} ran");
        assert_eq!(t.failed, 0, "step {step}: every status as expected");
    }
    assert_eq!(m.status.get(&401).copied(), Some(r.tag("step:wrong password").requests));
    let checks = &r.stats().checks;
    for name in ["has a token", "is the new user"] {
        let c = checks.get(name).unwrap_or_else(|| panic!("no check '{name}'"));
        assert!(c.passes > 0 && c.fails == 0, "{name}: {c:?}");
    }
    assert_eq!(r.stats().dropped_iterations, 0);

    // The mistake the page opens with is reported as the page says.
    let quoted = doc_block("", "auth.yaml:");
    let broken = yaml.replacen("Bearer {{token}}", "Bearer {{tokn}}", 1);
    let s = scenario(&broken, &format!("127.0.0.1:{port}"));
    let file = s.file.display().to_string();
    let r = run(s, &[]);
    assert_eq!(r.code, 2);
    let said = r.stderr.replace(&file, "auth.yaml");
    assert!(
        said.contains(quoted.trim()),
        "the page says\n{quoted}\nthrong says\n{said}"
    );
}
