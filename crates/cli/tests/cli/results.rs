//! Result documents: valid against the checked-in schema, re-reported
//! identically, merged exactly; interrupted runs still leave one.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;

use common::{assert_books_balance, http, lab, throng};
use throng_metrics::Hist;
use throng_result::RunResult;

#[test]
fn result_validates_against_the_schema() {
    let server = lab(None);
    let url = format!("http://{}/bytes/100", server.addr());
    let closed = http(&[&url, "-n", "500", "-c", "5"]);
    let open = http(&[&url, "-r", "500", "-n", "300", "--no-keepalive"]);
    let errors = http(&[&format!("http://{}/reset", server.addr()), "-n", "20", "-c", "2"]);
    let schema_text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../schema/result.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for run in [&closed, &open, &errors] {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&run.json).unwrap()).unwrap();
        let problems: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(problems.is_empty(), "schema violations: {problems:#?}");
    }
    // The schema is strict enough to catch a wrong document.
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&closed.json).unwrap()).unwrap();
    doc["measurements"]["requests"]["errors"]["made_up_class"] = 1.into();
    assert!(!validator.is_valid(&doc));
}

#[test]
fn report_re_renders_exactly_what_the_run_printed() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    for format in ["text", "ab", "httperf"] {
        let run = http(&[&url, "-n", "400", "-c", "4", "--format", format]);
        assert_eq!(run.code(), 0);
        let again = common::output(throng().args(["report", run.json.to_str().unwrap(), "--format", format]));
        assert_eq!(again.status.code(), Some(0));
        assert_eq!(
            String::from_utf8_lossy(&again.stdout),
            run.stdout(),
            "{format} view differs after a round trip"
        );
    }
}

#[test]
fn merge_is_exact() {
    let server = lab(None);
    let a = http(&[&format!("http://{}/", server.addr()), "-n", "700", "-c", "3"]);
    let b = http(&[&format!("http://{}/delay/2", server.addr()), "-n", "300", "-c", "3"]);
    let dir = tempfile::tempdir().unwrap();
    let merged_path = dir.path().join("merged.json");
    let merge = |extra: &[&str]| {
        common::output(
            throng()
                .args([
                    "merge",
                    a.json.to_str().unwrap(),
                    b.json.to_str().unwrap(),
                    "-o",
                    merged_path.to_str().unwrap(),
                ])
                .args(extra),
        )
    };
    // The two runs asked for different paths: a mixed merge must be asked for.
    let refused = merge(&[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("different plans"));
    let out = merge(&["--allow-mixed"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let merged = RunResult::from_reader(std::fs::File::open(&merged_path).unwrap()).unwrap();
    assert_books_balance(&merged);
    let (ra, rb) = (a.result(), b.result());
    let m = &merged.measurements;
    assert_eq!(m.requests.attempted, 1000);
    assert_eq!(m.requests.ok, ra.measurements.requests.ok + rb.measurements.requests.ok);
    assert_eq!(
        m.bytes.received,
        ra.measurements.bytes.received + rb.measurements.bytes.received
    );
    assert_eq!(merged.parts.len(), 2);
    for phase in ["latency", "wait", "connect"] {
        // One histogram that recorded both sets of values.
        let mut both = Hist::new();
        both.add(&ra.measurements.phases[phase]).unwrap();
        both.add(&rb.measurements.phases[phase]).unwrap();
        assert_eq!(m.phases[phase], both, "{phase}");
        assert_eq!(m.phases[phase].quantile(0.99), both.quantile(0.99));
    }
    // The merged p99 is the true p99: 30% of requests took ≥ 2 ms.
    assert!(m.phases["latency"].quantile(0.99) >= 2_000);
    // And its median is no later than where 72% of the fast run's were
    // (504 of the 1000), whatever the machine's speed (a fixed 2 ms was not).
    let fast = &ra.measurements.phases["latency"];
    assert!(m.phases["latency"].quantile(0.5) <= fast.quantile(0.72));
    // The window spans both runs, so throughput is not double-counted.
    assert!(merged.duration_s >= ra.duration_s.max(rb.duration_s));

    let bad = common::output(throng().args(["merge", "/nonexistent.json", "-o", merged_path.to_str().unwrap()]));
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn sigint_stops_gracefully_and_still_reports() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let child = throng()
        .args([
            "http",
            &format!("http://{}/delay/20", server.addr()),
            "-d",
            "60s",
            "-c",
            "8",
            "-q",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once requests are under way (not after a fixed 1.5 s, which
    // a busy machine can spend starting the binary): in flight at the signal,
    // they finish within the grace period, so some are ok.
    common::wait_established(server.addr().port(), 1);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // wait_with_output has no limit: the run must end within its timeout
    // (10 s) of the signal, and the test's own limit would catch a hang.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert!(r.interrupted);
    assert_books_balance(&r);
    assert!(r.measurements.requests.ok > 0);
    assert!(r.duration_s < 30.0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("interrupted"));
}

#[test]
fn demo_runs_both_loops() {
    let out = common::output(throng().args(["demo", "--duration", "1s"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("1. closed loop") && text.contains("2. open loop"),
        "{text}"
    );
    assert!(text.contains("NOT coordinated-omission-free"));
    assert!(text.contains("latency is coordinated-omission-free"));
    assert!(text.contains("p99 latency, closed loop:"));
}
