//! Verdicts that never pass by accident: thresholds of a one-target
//! `throng http` run judged on its figures, a threshold over no samples
//! failing unless it says otherwise, filters that match nothing refused
//! before the run, an open loop that could not keep its schedule saying so,
//! failing statuses named by code, and the ab view of an open loop.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{FaultServer, assert_books_balance, free_port, http, output, scenario, throng};

/// tests/servers/alternate.py: 200, 503, 200, 503, ... over the whole
/// server; stopped on drop.
struct Alternate {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Alternate {
    fn start() -> Alternate {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/alternate.py");
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(&port_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start python3");
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let port = text.trim().parse().unwrap();
                return Alternate { child, port, _dir: dir };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("alternate.py exited ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("alternate.py did not listen within 15 s");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Alternate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `throng serve` with `extra` flags (a `--fault`), on a free port.
struct Lab(FaultServer);

impl Lab {
    fn start(extra: &[&str]) -> Lab {
        Lab(FaultServer::serve(extra))
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.0.addr())
    }
}

/// (threshold, passed, observed) of each verdict.
fn verdicts(r: &throng_result::RunResult) -> Vec<(String, bool, Option<f64>)> {
    r.thresholds
        .iter()
        .map(|v| (v.threshold.clone(), v.passed, v.observed))
        .collect()
}

#[test]
fn a_one_target_run_is_judged_on_its_requests() {
    let server = Alternate::start();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let run = http(&[
        &server.url(),
        "-n",
        "200",
        "-c",
        "4",
        "-t",
        "1",
        "--html",
        html.to_str().unwrap(),
        "--threshold",
        "errors: rate < 1%",
        "--threshold",
        "check_failed: rate < 1% over 1s",
        "--threshold",
        "requests: count >= 1000",
        "--threshold",
        "errors: count == 100",
        "--threshold",
        "response: p(50) < 30s",
    ]);
    assert_eq!(run.code(), 99, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.status.get(&503), Some(&100));
    assert_eq!(
        verdicts(r)[..4],
        [
            ("errors: rate < 1%".to_string(), false, Some(0.5)),
            ("check_failed: rate < 1% over 1s".to_string(), false, verdicts(r)[1].2),
            ("requests: count >= 1000".to_string(), false, Some(200.0)),
            ("errors: count == 100".to_string(), true, Some(100.0)),
        ]
    );
    // The worst second had 503s, so its rate is above 0.
    assert!(verdicts(r)[1].2.is_some_and(|v| v > 0.0), "{:?}", verdicts(r));
    let (_, passed, observed) = &verdicts(r)[4];
    assert!(*passed && observed.is_some(), "{:?}", verdicts(r));
    let out = run.stdout();
    assert!(out.contains("thresholds: 2 of 5 held — FAILED"), "{out}");
    assert!(!out.contains("no samples"), "{out}");
    // Failing statuses are named by code, in the text, the HTML and the JSON.
    assert!(out.contains("status        200=100 503=100"), "{out}");
    assert!(out.contains("503=100 not expected (--expect-status 200-399)"), "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("503 (not expected: check_failed)"), "HTML names the code");
    let json = std::fs::read_to_string(&run.json).unwrap();
    assert!(
        json.contains(r#""503":100"#) || json.contains(r#""503": 100"#),
        "JSON keeps the codes"
    );
}

#[test]
fn an_http2_run_of_one_target_is_judged_too() {
    // Every second stream is reset (RST_STREAM), on one connection.
    let lab = Lab::start(&["--fault", "h2-rst-stream"]);
    let run = http(&[
        &lab.url("/"),
        "--http2",
        "-c",
        "1",
        "--streams",
        "1",
        "-n",
        "20",
        "-t",
        "1",
        "--threshold",
        "errors: rate < 1%",
        "--threshold",
        "requests: count == 20",
    ]);
    assert_eq!(run.code(), 99, "{}", run.stderr());
    assert_books_balance(run.result());
    assert_eq!(
        verdicts(run.result()),
        [
            ("errors: rate < 1%".to_string(), false, Some(0.5)),
            ("requests: count == 20".to_string(), true, Some(20.0)),
        ]
    );
}

#[test]
fn every_failing_status_is_named_in_the_closing_line() {
    let lab = Lab::start(&[]);
    let run = http(&[&lab.url("/status/404"), "-n", "30", "-c", "1", "-t", "1"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let err = run.stderr();
    assert!(err.contains("every request failed (30 check_failed)"), "{err}");
    assert!(
        err.contains("a status the plan does not expect (404=30); --expect-status is 200-399"),
        "{err}"
    );
    assert!(run.stdout().contains("status        404=30"), "{}", run.stdout());
}

#[test]
fn a_threshold_over_no_samples_fails_unless_it_allows_it() {
    let lab = Lab::start(&[]);
    let yaml = |threshold: &str| {
        format!(
            "target: {}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    iterations: 3\n    \
             flow:\n      - request: {{ name: home, path: / }}\nthresholds:\n  group_duration: [\"{threshold}\"]\n  \
             errors: [rate < 1%]\n",
            lab.url("")
        )
    };
    // No group ever ran: nothing shows the bound held.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    let junit = dir.path().join("junit.xml");
    std::fs::write(&file, yaml("p(95) < 1s")).unwrap();
    let o = output(
        throng()
            .arg("run")
            .arg(&file)
            .args(["--threads", "1", "--quiet", "--junit"])
            .arg(&junit),
    );
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(99), "{out}{err}");
    assert!(out.contains("✗ group_duration: p(95) < 1s"), "{out}");
    assert!(out.contains("no samples: no group completed"), "{out}");
    assert!(out.contains("✓ errors: rate < 1%"), "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"tests="2" failures="1""#), "{xml}");
    assert!(
        xml.contains("<failure message=\"failed: no samples: no group completed"),
        "{xml}"
    );
    // Allowed: it holds, and says it had no samples.
    let run = scenario(&yaml("p(95) < 1s or no samples"));
    assert_eq!(run.code(), 0, "{}{}", run.stdout(), run.stderr());
    let v = &run.result().thresholds[0];
    assert!(v.passed && v.observed.is_none(), "{v:?}");
    assert!(v.detail.starts_with("no samples ("), "{v:?}");
}

#[test]
fn filters_and_metrics_that_match_nothing_are_refused_before_the_run() {
    // A closed port: a run that started would fail its requests (exit 1).
    let closed = format!("http://127.0.0.1:{}", free_port());
    let (a, b) = (format!("{closed}/a"), format!("{closed}/b"));
    for (args, says) in [
        (
            vec![a.as_str(), b.as_str(), "--threshold", "errors{target:/c}: rate < 1%"],
            "'errors{target:/c}: rate < 1%': no target is named '/c'; the targets are '/a' and '/b'",
        ),
        (
            vec![a.as_str(), "--threshold", "errors{target:/a}: rate < 1%"],
            "this run has one target",
        ),
        (
            vec![a.as_str(), "--threshold", "errors{step:login}: rate < 1%"],
            "step: filters are a scenario's",
        ),
        (
            vec![a.as_str(), "--threshold", "iterations: count > 1"],
            "iterations is a scenario's metric",
        ),
        (
            vec![a.as_str(), "--threshold", "dropped: rate < 1%"],
            "dropped is measured only in an open loop",
        ),
    ] {
        let mut args = args;
        args.extend(["-n", "5", "-c", "1"]);
        let run = http(&args);
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains(says), "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains("--threshold"), "{}", run.stderr());
        assert!(run.result.is_none(), "{args:?}: nothing ran");
    }
}

#[test]
fn an_open_loop_that_drops_its_schedule_says_so_and_its_thresholds_see_it() {
    // 5 connections to a 50 ms answer carry 100/s at most: 500/s drops most.
    let lab = Lab::start(&[]);
    let url = lab.url("/delay/50");
    let base = ["-r", "500", "-c", "5", "-d", "2s", "-t", "1"];
    let with = |extra: &[&str]| {
        let mut args = vec![url.as_str()];
        args.extend(base);
        args.extend(extra);
        http(&args)
    };
    // No thresholds: exit 0, loudly.
    let run = with(&[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let scheduled = m.requests.attempted + m.dropped;
    assert_eq!(scheduled, 1000, "every scheduled start sent or dropped");
    assert!(m.dropped * 100 > scheduled, "dropped {} of {scheduled}", m.dropped);
    let share = m.dropped as f64 * 100.0 / scheduled as f64;
    let out = run.stdout();
    let headline = format!(
        "schedule      {scheduled} scheduled, {} sent, {} dropped ({share:.2}%)",
        m.requests.attempted, m.dropped
    );
    assert!(out.contains(&headline), "{out}");
    assert!(
        out.contains(&format!("WARNING: {share:.2}% of the schedule was dropped")),
        "{out}"
    );
    assert!(out.contains("coordinated-omission-free for the requests sent"), "{out}");
    assert!(
        run.stderr().contains("--threshold 'dropped: rate < 1%'"),
        "{}",
        run.stderr()
    );

    // Thresholds judge the load asked for: one that holds on what was sent
    // does not pass the run.
    let run = with(&["--threshold", "response: p(95) < 30s"]);
    assert_eq!(run.code(), 99, "{}", run.stderr());
    let v = verdicts(run.result());
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].1, "{v:?}");
    assert_eq!(v[1].0, "dropped: rate <= 1%");
    assert!(!v[1].1, "{v:?}");
    let m = &run.result().measurements;
    let rate = m.dropped as f64 / (m.requests.attempted + m.dropped) as f64;
    assert_eq!(v[1].2, Some(rate));

    // A dropped threshold of the user's own replaces the implied one.
    let run = with(&["--threshold", "dropped: rate <= 100%"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(verdicts(run.result()).len(), 1);
    let run = with(&["--threshold", "dropped: count == 0"]);
    assert_eq!(run.code(), 99, "{}", run.stderr());
    assert_eq!(
        verdicts(run.result())[0].2,
        Some(run.result().measurements.dropped as f64)
    );
}

#[test]
fn the_ab_view_of_an_open_loop_does_not_claim_a_concurrency() {
    let lab = Lab::start(&[]);
    let run = http(&[&lab.url("/"), "-r", "200", "-n", "100", "-c", "4", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let o = output(throng().arg("report").arg(&run.json).args(["--format", "ab"]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("Concurrency Level:      none: open loop at 200 req/s"),
        "{text}"
    );
    let m = &run.result().measurements;
    let mean_ms = m.phases["latency"].mean() / 1000.0;
    assert!(
        text.contains(&format!(
            "Time per request:       {mean_ms:.3} [ms] (mean latency from the intended start"
        )),
        "{text}"
    );
    assert!(!text.contains("[ms] (mean)\n"), "{text}");
    // A closed loop keeps ab's figures.
    let run = http(&[&lab.url("/"), "-n", "100", "-c", "4", "-t", "1"]);
    let o = output(throng().arg("report").arg(&run.json).args(["--format", "ab"]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Concurrency Level:      4\n"), "{text}");
    assert!(text.contains("[ms] (mean)\n"), "{text}");
}

#[test]
fn abort_on_fail_waits_for_samples_and_no_samples_fails_at_the_end() {
    // A group that never runs: its threshold has no samples all along.
    // It must not stop the run (nothing shows it failed), and it fails at
    // the end (nothing shows it held).
    let lab = Lab::start(&[]);
    let yaml = format!(
        "target: {}\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    duration: 3s\n    flow:\n      \
         - request: {{ name: home, path: / }}\n      - think: 100ms\nthresholds:\n  group_duration:\n    - threshold: \
         p(95) < 1s\n      abort_on_fail: true\n      delay: 1s\n",
        lab.url("")
    );
    let run = scenario(&yaml);
    assert_eq!(run.code(), 99, "{}{}", run.stdout(), run.stderr());
    let r = run.result();
    assert!(!r.notes.iter().any(|n| n.contains("abort_on_fail")), "{:?}", r.notes);
    // Ran its 3 s: a request every ~100 ms, far more than one judgement's worth.
    assert!(r.measurements.requests.ok >= 15, "{:?}", r.measurements.requests);
    let v = &r.thresholds[0];
    assert!(!v.passed && v.detail.contains("no group completed"), "{v:?}");
}
