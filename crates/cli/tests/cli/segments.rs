//! Execution segments against the lab server: one plan run as several
//! segments adds up exactly to the single-host plan, and `merge` says when
//! a segment is missing.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{assert_books_balance, lab, throng};
use throng_result::RunResult;

const THIRDS: &str = "0,1/3,2/3,1";
const QUARTERS: &str = "0,1/4,1/2,3/4,1";

/// The segments `FROM:TO` of a sequence's points.
fn segments_of(sequence: &str) -> Vec<String> {
    let points: Vec<&str> = sequence.split(',').collect();
    points.windows(2).map(|w| format!("{}:{}", w[0], w[1])).collect()
}

/// Runs `throng CMD ARGS --segment S --segment-sequence SEQ` for every
/// segment of SEQ (concurrently), and returns their result files.
fn run_segments(dir: &Path, cmd: &str, args: &[&str], sequence: &str) -> Vec<PathBuf> {
    let handles: Vec<_> = segments_of(sequence)
        .into_iter()
        .enumerate()
        .map(|(i, seg)| {
            let json = dir.join(format!("{cmd}-{i}.json"));
            let mut c = throng();
            c.arg(cmd)
                .args(args)
                .args(["--segment", &seg, "--segment-sequence", sequence, "--quiet", "--json"])
                .arg(&json);
            std::thread::spawn(move || {
                let out = common::output(&mut c);
                assert!(
                    out.status.success(),
                    "segment {seg}: exit {:?}: {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                );
                json
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn read(path: &Path) -> RunResult {
    RunResult::from_reader(std::fs::File::open(path).unwrap()).unwrap()
}

/// `throng merge FILES -o OUT [extra]`: (exit code, stderr, merged result).
fn merge(files: &[PathBuf], out: &Path, extra: &[&str]) -> (i32, String, RunResult) {
    let o = common::output(throng().arg("merge").args(files).arg("-o").arg(out).args(extra));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        read(out),
    )
}

#[test]
fn http_requests_in_three_segments_add_up_to_the_plan() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let files = run_segments(dir.path(), "http", &[&url, "-n", "1000", "-c", "10", "-t", "1"], THIRDS);
    let parts: Vec<RunResult> = files.iter().map(|f| read(f)).collect();
    let attempted: Vec<u64> = parts.iter().map(|r| r.measurements.requests.attempted).collect();
    // 1000 striped over thirds: 334, 333, 333.
    assert_eq!(attempted, vec![334, 333, 333]);
    for ((r, seg), file) in parts.iter().zip(segments_of(THIRDS)).zip(&files) {
        assert_books_balance(r);
        assert_eq!(r.segment.as_ref().unwrap().range(), seg);
        assert_eq!(r.segment.as_ref().unwrap().sequence().len(), 4);
        let problems = common::schema_violations(file);
        assert!(problems.is_empty(), "schema violations: {problems:#?}");
    }
    let (code, err, merged) = merge(&files, &dir.path().join("merged.json"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(merged.measurements.requests.attempted, 1000);
    assert_eq!(merged.measurements.requests.ok, 1000);
    assert_eq!(merged.segment, None);
    assert!(merged.segment_notes().next().is_none(), "{:?}", merged.notes);
    assert!(common::schema_violations(&dir.path().join("merged.json")).is_empty());

    // The text report names the segment.
    let o = common::output(throng().arg("report").arg(&files[1]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("segment 1/3:2/3 of 0,1/3,2/3,1"), "{text}");
}

#[test]
fn http_arrivals_in_three_segments_are_the_single_schedule() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let files = run_segments(dir.path(), "http", &[&url, "-r", "200", "-d", "3s", "-t", "1"], THIRDS);
    let parts: Vec<RunResult> = files.iter().map(|f| read(f)).collect();
    let attempted: Vec<u64> = parts.iter().map(|r| r.measurements.requests.attempted).collect();
    assert_eq!(attempted, vec![200, 200, 200]);
    let (code, err, merged) = merge(&files, &dir.path().join("merged.json"), &[]);
    assert_eq!(code, 0, "{err}");
    // The single-host plan: 200/s for 3 s = 600 arrivals, none dropped.
    assert_eq!(
        merged.measurements.requests.attempted + merged.measurements.dropped,
        600
    );
}

#[test]
fn storm_in_four_segments_adds_up_and_merge_names_a_missing_one() {
    let server = lab(None);
    let target = format!("tcp://{}", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let files = run_segments(
        dir.path(),
        "storm",
        &[
            &target,
            "--count",
            "1001",
            "--rate",
            "2000",
            "--max-concurrent",
            "50",
            "--workers",
            "1",
        ],
        QUARTERS,
    );
    let parts: Vec<RunResult> = files.iter().map(|f| read(f)).collect();
    let attempted: Vec<u64> = parts.iter().map(|r| r.measurements.connections.attempted).collect();
    assert_eq!(attempted.iter().sum::<u64>(), 1001, "{attempted:?}");
    assert!(attempted.iter().all(|&n| n == 250 || n == 251), "{attempted:?}");
    for r in &parts {
        assert!(r.measurements.peak_concurrent_connections <= 13, "cap share");
    }
    let (code, err, merged) = merge(&files, &dir.path().join("all.json"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(merged.measurements.connections.attempted, 1001);
    assert_eq!(merged.measurements.connections.ok, 1001);

    // One segment missing: the file is written with a note, exit 1.
    let three = [files[0].clone(), files[1].clone(), files[3].clone()];
    let out = dir.path().join("partial.json");
    let (code, err, partial) = merge(&three, &out, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("missing segment 1/2:3/4 of 0,1/4,1/2,3/4,1"), "{err}");
    // One line says what is wrong.
    assert_eq!(err.lines().filter(|l| l.contains("missing")).count(), 1, "{err}");
    assert!(
        partial.notes.iter().any(|n| n.contains("missing segment 1/2:3/4")),
        "{:?}",
        partial.notes
    );
    assert_eq!(
        partial.measurements.connections.attempted,
        1001 - parts[2].measurements.connections.attempted
    );
    let (code, err, _) = merge(&three, &out, &["--allow-partial"]);
    assert_eq!(code, 0, "{err}");

    // A segment given twice is reported too.
    let twice = [
        files[0].clone(),
        files[0].clone(),
        files[1].clone(),
        files[2].clone(),
        files[3].clone(),
    ];
    let (code, err, _) = merge(&twice, &out, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("segment 0:1/4 given 2 times"), "{err}");
}

#[test]
fn bad_segments_and_start_times_are_refused() {
    let cases: [&[&str]; 5] = [
        &["--segment", "1/3:1/2", "--segment-sequence", QUARTERS],
        &["--segment", "1/2:1/4"],
        &["--segment", "0:1/2", "--segment-sequence", "0,1/2"],
        &["--start-at", "2000-01-01T00:00:00Z"],
        &["--start-at", "4102444800000"],
    ];
    for extra in cases {
        let o = common::output(throng().args(["http", "http://127.0.0.1:9/", "-n", "1"]).args(extra));
        assert_eq!(
            o.status.code(),
            Some(2),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn start_at_starts_at_the_shared_time() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // Ahead: waits for it. A little late: keeps the shared start anyway.
    for start in [now + 1500, now - 2000] {
        let at = start.to_string();
        let args = [
            "http",
            &url,
            "-n",
            "10",
            "-c",
            "1",
            "--quiet",
            "--start-at",
            &at,
            "--json",
        ];
        let o = common::output(throng().args(args).arg(&json));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = read(&json);
        assert_eq!(r.started_at_unix_ms, start);
        assert_eq!(r.measurements.requests.ok, 10);
    }
}

const SCENARIO: &str = r#"
target: TARGET
scenarios:
  pervu:
    executor: per-vu-iterations
    vus: 5
    iterations: 4
    flow:
      - request: { name: p, path: "/" }
  shared:
    executor: shared-iterations
    vus: 4
    iterations: 101
    flow:
      - request: { name: s, path: "/" }
  arrivals:
    executor: constant-arrival-rate
    rate: 50
    duration: 2s
    pre_allocated_vus: 3
    max_vus: 10
    flow:
      - request: { name: a, path: "/" }
"#;

#[test]
fn scenario_iterations_in_three_segments_add_up() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, SCENARIO.replace("TARGET", &format!("http://{}", server.addr()))).unwrap();
    let files = run_segments(dir.path(), "run", &[file.to_str().unwrap(), "--threads", "2"], THIRDS);
    let requests = |r: &RunResult, step: &str| {
        r.measurements
            .scenario
            .as_ref()
            .unwrap()
            .tags
            .get(&format!("step:{step}"))
            .map_or(0, |t| t.requests)
    };
    let parts: Vec<RunResult> = files.iter().map(|f| read(f)).collect();
    // per-vu-iterations: 5 VUs striped 2, 2, 1 (or so), 4 iterations each.
    let pervu: Vec<u64> = parts.iter().map(|r| requests(r, "p")).collect();
    assert_eq!(pervu.iter().sum::<u64>(), 20, "{pervu:?}");
    assert!(pervu.iter().all(|n| n % 4 == 0), "{pervu:?}");
    let shared: Vec<u64> = parts.iter().map(|r| requests(r, "s")).collect();
    assert_eq!(shared, vec![34, 34, 33]);
    let arrivals: u64 = parts
        .iter()
        .map(|r| requests(r, "a") + r.measurements.scenario.as_ref().unwrap().dropped_iterations)
        .sum();
    assert_eq!(arrivals, 100, "50/s for 2 s");
    for r in &parts {
        assert_books_balance(r);
        assert!(r.segment.is_some());
    }
    let (code, err, merged) = merge(&files, &dir.path().join("merged.json"), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(requests(&merged, "p"), 20);
    assert_eq!(requests(&merged, "s"), 101);
    assert_eq!(
        merged.measurements.scenario.as_ref().unwrap().iterations,
        20 + 101 + requests(&merged, "a")
    );
}

/// The descriptor check counts the connections this segment may open, not
/// the whole plan's: an eighth of 24000 fits a 20000-descriptor limit.
#[test]
fn the_descriptor_check_counts_the_segments_share() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let run = common::http(&[&url, "-r", "200", "-n", "80", "-c", "24000", "--segment", "0:1/8"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 10, "the segment's eighth of 80 requests");
}
