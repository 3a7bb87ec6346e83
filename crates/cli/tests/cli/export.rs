//! Exports for other tools: `--csv` (per-second series), `--csv-requests`
//! (one row per request, per connection for storms) and `--hdr-log`
//! (HdrHistogram interval log) — read back and checked against the result
//! document they came from.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{assert_books_balance, lab, output, throng};
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use throng_metrics::{Hist, Outcomes};
use throng_result::RunResult;

/// A run with every export written next to its result.
struct Exported {
    dir: tempfile::TempDir,
    code: i32,
    stderr: String,
    stdout: String,
    result: Option<RunResult>,
}

impl Exported {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn result(&self) -> &RunResult {
        self.result
            .as_ref()
            .unwrap_or_else(|| panic!("no result; exit {} stderr: {}", self.code, self.stderr))
    }
}

/// `throng COMMAND ARGS --json --csv --csv-requests --hdr-log --quiet`.
fn exported(command: &str, args: &[&str], extra: &[&str]) -> Exported {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let out = output(
        throng()
            .arg(command)
            .args(args)
            .arg("--json")
            .arg(p("result.json"))
            .arg("--csv")
            .arg(p("series.csv"))
            .arg("--csv-requests")
            .arg(p("requests.csv"))
            .arg("--hdr-log")
            .arg(p("phases.hlog"))
            .arg("--quiet")
            .args(extra),
    );
    let result = common::read_result(&p("result.json"));
    Exported {
        code: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        result,
        dir,
    }
}

/// A CSV file as header and rows of fields (no field here holds a comma).
fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(str::to_string).collect();
    let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_string).collect()).collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "every row has every column: {r:?}");
    }
    (header, rows)
}

/// Sums of `metric` over the series CSV's seconds.
fn series_sum(path: &Path, metric: &str) -> u64 {
    let (header, rows) = read_csv(path);
    assert_eq!(header, ["second", "unix_ms", "metric", "value"]);
    rows.iter()
        .filter(|r| r[2] == metric)
        .map(|r| r[3].parse::<u64>().unwrap())
        .sum()
}

/// Checks the request rows against the outcomes they should add up to.
fn assert_rows_match(path: &Path, outcomes: &Outcomes) -> Vec<Vec<String>> {
    let (header, rows) = read_csv(path);
    assert_eq!(header.join(","), throng_engine::REQUESTS_CSV_HEADER);
    assert_eq!(rows.len() as u64, outcomes.attempted, "one row per attempted unit");
    let mut by_outcome: BTreeMap<String, u64> = BTreeMap::new();
    for r in &rows {
        *by_outcome.entry(r[3].clone()).or_default() += 1;
    }
    let ok = by_outcome.remove("ok").unwrap_or(0);
    assert_eq!(ok, outcomes.ok, "ok rows");
    assert_eq!(by_outcome, outcomes.errors, "rows per error class");
    rows
}

/// Sums each tag's counts over the interval log's intervals.
fn hdr_log_counts(path: &Path) -> BTreeMap<String, u64> {
    let bytes = std::fs::read(path).unwrap();
    let mut counts = BTreeMap::new();
    for entry in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(i) = entry.unwrap() {
            let h = Hist::decode(i.encoded_histogram()).unwrap();
            assert!(
                (i.max() - h.max() as f64 / 1000.0).abs() < 0.001,
                "Interval_Max is in ms"
            );
            *counts.entry(i.tag().unwrap().as_str().to_string()).or_default() += h.count();
        }
    }
    counts
}

/// Every export agrees with the result document: series sums, request
/// rows per outcome (`unit` says which outcomes a row stands for), and
/// the interval log's counts per phase.
fn assert_exports_agree(e: &Exported, unit: fn(&RunResult) -> &Outcomes) -> Vec<Vec<String>> {
    let r = e.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let series = e.path("series.csv");
    if !matches!(r.plan, throng_result::Plan::Storm(_)) {
        assert_eq!(series_sum(&series, "requests"), m.requests.ended());
        assert_eq!(series_sum(&series, "ok"), m.requests.ok);
    }
    assert_eq!(series_sum(&series, "bytes_received"), m.bytes.received);
    assert_eq!(series_sum(&series, "connections_opened"), m.connections.ok);
    for (name, h) in &m.phases {
        assert_eq!(series_sum(&series, &format!("{name}.count")), h.count(), "{name}");
    }
    let log: BTreeMap<String, u64> = m.phases.iter().map(|(k, h)| (k.clone(), h.count())).collect();
    assert_eq!(hdr_log_counts(&e.path("phases.hlog")), log);
    assert_rows_match(&e.path("requests.csv"), unit(r))
}

fn requests(r: &RunResult) -> &Outcomes {
    &r.measurements.requests
}

fn connections(r: &RunResult) -> &Outcomes {
    &r.measurements.connections
}

#[test]
fn closed_loop_exports_add_up_including_errors() {
    let server = lab(None);
    let base = format!("http://{}", server.addr());
    // An unexpected status is check_failed, and keeps its status in its row.
    let e = exported(
        "http",
        &[&format!("{base}/status/500"), "-n", "300", "-c", "4", "-t", "2"],
        &[],
    );
    assert_eq!(e.code, 1, "every request failed: {}", e.stderr);
    let rows = assert_exports_agree(&e, requests);
    assert_eq!(e.result().measurements.requests.error("check_failed"), 300);
    assert!(rows.iter().all(|r| r[3] == "check_failed" && r[4] == "500"));

    // The lab resets the connection: an error class other than
    // check_failed, with no status, and a connection in every row.
    let e = exported("http", &[&format!("{base}/reset"), "-n", "200", "-c", "2"], &[]);
    let rows = assert_exports_agree(&e, requests);
    let classes: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[3].as_str()).collect();
    assert!(!classes.contains("ok"), "{classes:?}");
    assert!(rows.iter().all(|r| !r[2].is_empty()), "every row names its connection");

    let e = exported("http", &[&format!("{base}/bytes/100"), "-n", "1000", "-c", "8"], &[]);
    assert_eq!(e.code, 0, "{}", e.stderr);
    let rows = assert_exports_agree(&e, requests);
    assert!(
        rows.iter()
            .all(|r| r[3] == "ok" && r[4] == "200" && r[15].parse::<u64>().unwrap() > 100)
    );
    let conns: std::collections::BTreeSet<(&str, &str)> = rows.iter().map(|r| (r[1].as_str(), r[2].as_str())).collect();
    assert_eq!(conns.len(), 8, "keep-alive: 8 connections carry every request");
    let connects = rows.iter().filter(|r| !r[6].is_empty()).count();
    assert_eq!(connects, 8, "a connect sample only on each connection's first request");
}

#[test]
fn open_loop_rows_carry_schedule_lag() {
    let server = lab(None);
    let e = exported(
        "http",
        &[&format!("http://{}/", server.addr()), "-r", "400", "-n", "600"],
        &[],
    );
    assert_eq!(e.code, 0, "{}", e.stderr);
    let rows = assert_exports_agree(&e, requests);
    assert!(
        rows.iter().all(|r| !r[5].is_empty()),
        "open loop: every row has schedule_lag"
    );
    // Keep-alive: each connection's first request carries its connect time,
    // also for the connections the open loop opened before its schedule
    // (as a closed loop's first requests do).
    let mut firsts: BTreeMap<(String, String), (u64, bool)> = BTreeMap::new();
    for r in &rows {
        let start: u64 = r[0].parse().unwrap();
        let first = firsts
            .entry((r[1].clone(), r[2].clone()))
            .or_insert((start, !r[6].is_empty()));
        if start < first.0 {
            *first = (start, !r[6].is_empty());
        }
    }
    let with_connect = rows.iter().filter(|r| !r[6].is_empty()).count();
    assert!(with_connect > 0, "no row has connect_us");
    assert_eq!(with_connect, firsts.len(), "one row per connection has connect_us");
    assert!(
        firsts.values().all(|(_, has)| *has),
        "it is the connection's first request's"
    );
    let connects = e.result().measurements.phases["connect"].count();
    assert!(
        with_connect as u64 <= connects,
        "{with_connect} rows, {connects} connects"
    );
    let starts: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    // 600 at 400/s span about 1.5 s of starts.
    let span = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(span > 1_000_000, "starts span {span} µs");
}

#[test]
fn storm_rows_are_one_per_connection() {
    let server = lab(None);
    let e = exported(
        "storm",
        &[
            &format!("http://{}/status/503", server.addr()),
            "-n",
            "300",
            "--rate",
            "600",
        ],
        &[],
    );
    // Every request got a 503: the run failed (README, "Exit codes"), and
    // its rows are still written.
    assert_eq!(e.code, 1, "{}", e.stderr);
    assert!(
        e.stderr.contains("every request failed (300 check_failed)"),
        "{}",
        e.stderr
    );
    let rows = assert_exports_agree(&e, connections);
    assert_eq!(rows.len(), 300);
    // The connection is the unit: established is ok, whatever the request got.
    assert!(rows.iter().all(|r| r[3] == "ok" && r[4] == "503"), "{:?}", rows.first());

    // Over two processes: each writes its own rows, joined into one file
    // with worker numbers unique over the processes.
    let e = exported(
        "storm",
        &[
            &format!("tcp://{}", server.addr()),
            "-n",
            "200",
            "--procs",
            "2",
            "-t",
            "2",
        ],
        &[],
    );
    assert_eq!(e.code, 0, "{}", e.stderr);
    let rows = assert_exports_agree(&e, connections);
    let workers: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(workers.len(), 4, "{workers:?}");
    let left: Vec<_> = std::fs::read_dir(e.dir.path())
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "no parts left behind: {left:?}");

    // Nothing listening: every connection refused, one row each.
    let port = common::free_port();
    let e = exported("storm", &[&format!("tcp://127.0.0.1:{port}"), "-n", "50"], &[]);
    let rows = assert_exports_agree(&e, connections);
    assert!(rows.iter().all(|r| r[3] == "refused"));
}

#[test]
fn scenario_rows_name_scenario_step_vu_and_iteration() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    let yaml = format!(
        r#"
target: http://{}
scenarios:
  browse:
    executor: per-vu-iterations
    vus: 3
    iterations: 4
    flow:
      - request: {{ name: home, path: / }}
      - request: {{ name: broken, path: /status/500 }}
  slow:
    executor: constant-vus
    vus: 2
    duration: 1s
    graceful_stop: 100ms
    flow:
      - request: {{ name: wait, path: /delay/400 }}
"#,
        server.addr()
    );
    std::fs::write(&file, yaml).unwrap();
    let e = exported("run", &[file.to_str().unwrap(), "--threads", "2"], &[]);
    let rows = assert_exports_agree(&e, requests);
    let count = |scenario: &str, step: &str, outcome: &str| {
        rows.iter()
            .filter(|r| r[16] == scenario && r[17] == step && r[3] == outcome)
            .count()
    };
    assert_eq!(count("browse", "home", "ok"), 12);
    assert_eq!(count("browse", "broken", "check_failed"), 12);
    // 3 VUs × 4 iterations: every (vu, iteration) pair once per step.
    let pairs: std::collections::BTreeSet<(&str, &str)> = rows
        .iter()
        .filter(|r| r[17] == "home")
        .map(|r| (r[18].as_str(), r[19].as_str()))
        .collect();
    assert_eq!(pairs.len(), 12);
    // The slow requests still in flight at the graceful stop are cut off.
    assert!(
        count("slow", "wait", "interrupted") >= 1,
        "{:?}",
        e.result().measurements.requests
    );
    assert!(e.stdout.contains("browse"));
}

#[test]
fn rows_stop_at_the_limit_with_a_note() {
    let server = lab(None);
    let e = exported(
        "http",
        &[&format!("http://{}/", server.addr()), "-n", "500", "-c", "2", "-t", "2"],
        &["--csv-requests-max", "100"],
    );
    assert_eq!(e.code, 0, "{}", e.stderr);
    let (_, rows) = read_csv(&e.path("requests.csv"));
    assert_eq!(rows.len(), 100);
    let note = e
        .result()
        .notes
        .iter()
        .find(|n| n.contains("--csv-requests-max"))
        .unwrap();
    assert!(note.contains("400 later requests"), "{note}");
    assert!(
        e.stdout.contains("--csv-requests-max"),
        "the report says so: {}",
        e.stdout
    );
}

#[test]
fn report_exports_a_saved_result_the_same_way() {
    let server = lab(None);
    let e = exported("http", &[&format!("http://{}/", server.addr()), "-n", "400"], &[]);
    assert_eq!(e.code, 0, "{}", e.stderr);
    let again_csv = e.path("again.csv");
    let again_log = e.path("again.hlog");
    let out = output(
        throng()
            .arg("report")
            .arg(e.path("result.json"))
            .arg("--csv")
            .arg(&again_csv)
            .arg("--hdr-log")
            .arg(&again_log),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&again_csv).unwrap(),
        std::fs::read_to_string(e.path("series.csv")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&again_log).unwrap(),
        std::fs::read_to_string(e.path("phases.hlog")).unwrap()
    );
}

#[test]
fn unwritable_paths_fail_before_the_run_naming_the_path() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    for flag in ["--csv", "--csv-requests", "--hdr-log"] {
        let out = output(
            throng()
                .args(["http", &url, "-n", "10", "--quiet", flag])
                .arg("/no/such/dir/out.csv"),
        );
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains(flag) && err.contains("/no/such/dir/out.csv"), "{err}");
        assert!(out.stdout.is_empty(), "no run happened");
    }
    let out = output(throng().args(["report", "/no/such/result.json", "--csv", "/tmp/x.csv"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/result.json"));
}
