//! A coordinated scenario's thresholds judged on the agents' merged live
//! figures: one with `abort_on_fail` stops every agent.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::coordinate::{Agent, TOKEN, coordinate, nginx, token_file};

use common::{assert_books_balance, throng};
use throng_result::RunResult;

/// 20 requests/s for 30 s, 600 planned, 300 a segment: the bound of 320
/// requests never fails on one agent's figures, only on both added up
/// (after about 16 s), and then stops both agents.
#[test]
fn a_scenario_threshold_with_abort_on_fail_stops_every_agent_on_the_merged_figures() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = common::Nginx::start(&format!(
        "location / {{ access_log {}; return 200 \"ok\\n\"; }}",
        log.display()
    ));
    let scenario = dir.path().join("load.yaml");
    std::fs::write(
        &scenario,
        format!(
            "target: {}\nscenarios:\n  steady:\n    executor: constant-arrival-rate\n    rate: 20\n    duration: \
             30s\n    pre_allocated_vus: 2\n    max_vus: 4\n    flow:\n      - request: {{ name: hit, path: / }}\n\
             thresholds:\n  requests:\n    - threshold: \"count < 320\"\n      abort_on_fail: true\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let (a, b) = (Agent::start_with(&[]), Agent::start_with(&[]));
    let json = dir.path().join("run.json");
    let out = common::output(
        throng()
            .args(["coordinate", "--agents", &format!("{},{}", a.addr, b.addr), "--json"])
            .arg(&json)
            .args(["--", "run", scenario.to_str().unwrap(), "--threads", "1"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("threshold 'requests: count < 320'") && stderr.contains("stopping every agent (abort_on_fail)"),
        "{stderr}"
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    assert!(!r.thresholds_passed());
    assert!(!r.interrupted);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("stopped early (abort_on_fail): threshold")),
        "{:?}",
        r.notes
    );
    let ended = r.measurements.requests.ended();
    assert!((320..600).contains(&ended), "{ended} of 600 planned");
    assert_eq!(common::access_log(&log).len() as u64, r.measurements.requests.ok);
}

/// A storm's `--threshold` judged on the merged figures: 40 connections/s,
/// 400 planned, 200 a segment; `connections: count < 220` holds on either
/// agent's figures alone and fails only on both added up, and
/// `--abort-on-fail` then stops both.
#[test]
fn a_storm_threshold_fails_on_the_merged_figures_and_stops_every_agent() {
    let server = common::lab(None);
    let (a, b) = (Agent::start_with(&[]), Agent::start_with(&[]));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("storm.json");
    let out = common::output(
        throng()
            .args([
                "coordinate",
                "--abort-on-fail",
                "--agents",
                &format!("{},{}", a.addr, b.addr),
                "--json",
            ])
            .arg(&json)
            .args([
                "--",
                "storm",
                &format!("tcp://{}", server.addr()),
                "-n",
                "400",
                "--rate",
                "40",
            ])
            .args(["--threshold", "connections: count < 220"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    assert!(
        stderr.contains("threshold 'connections: count < 220'") && stderr.contains("stopping every agent"),
        "{stderr}"
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    assert_eq!(r.thresholds.len(), 1);
    assert!(!r.thresholds[0].passed, "{:?}", r.thresholds);
    let ended = r.measurements.connections.ended();
    assert!((220..400).contains(&ended), "{ended} of 400 planned");
}

#[test]
fn a_threshold_failing_on_the_merged_figures_stops_every_agent() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("all.json");
    // 100 requests/s for 60 s: 6000 planned; the threshold fails at once.
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &[
            "http",
            &server.url("/"),
            "-r",
            "100",
            "-d",
            "60s",
            "-c",
            "2",
            "--threshold",
            "latency: max < 1us",
            "--abort-on-fail",
        ],
    );
    assert_eq!(code, 99, "{stderr}");
    assert!(stderr.contains("stopping every agent (--abort-on-fail)"), "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    assert!(!r.thresholds_passed());
    assert!(!r.interrupted);
    let ended = r.measurements.requests.ended();
    assert!(ended > 0 && ended < 3000, "{ended} of 6000 planned");
    assert_eq!(common::access_log(&log).len() as u64, r.measurements.requests.ok);
}
