//! `--repeat` result sets and `throng compare` against the lab server:
//! identical plans are not told apart, a slower B is (right sign, right
//! size), one run per side says its basis is weaker, and bad inputs are
//! one-line errors with exit code 2.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{lab, output, throng};
use serde_json::Value;

/// Runs `throng ARGS --json DIR/NAME --quiet`; returns the file and stdout.
fn run_to(dir: &Path, name: &str, args: &[&str]) -> (PathBuf, String) {
    let json = dir.join(name);
    let out = output(throng().args(args).arg("--json").arg(&json).arg("--quiet"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (json, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `throng compare ARGS`: exit code, stdout, stderr.
fn compare(args: &[&str]) -> (i32, String, String) {
    let out = output(throng().arg("compare").args(args));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn compare_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let (code, stdout, stderr) = compare(&all);
    assert_eq!(code, 0, "{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    let problems = violations("compare.schema.json", &doc);
    assert!(problems.is_empty(), "comparison schema violations: {problems:#?}");
    doc
}

fn test_named<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test '{name}' in {:#}", doc["tests"]))
}

/// Violations of `schema/NAME` (which may refer to the result schema).
fn violations(name: &str, doc: &Value) -> Vec<String> {
    let load = |n: &str| -> Value {
        let path = format!("{}/../../schema/{n}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let validator = jsonschema::options()
        .with_resource(
            "https://throng.dev/schema/result.schema.json",
            jsonschema::Resource::from_contents(load("result.schema.json")).unwrap(),
        )
        .build(&load(name))
        .unwrap();
    validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

const REPEATS: &str = "5";

#[test]
fn identical_plans_show_no_significant_throughput_difference() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    // Open loop: the schedule, not the machine's load, sets the throughput.
    let plan = [
        "http", &url, "-r", "200", "-n", "200", "-t", "1", "--repeat", REPEATS, "--settle", "100ms",
    ];
    let (a, _) = run_to(dir.path(), "a.json", &plan);
    let (b, _) = run_to(dir.path(), "b.json", &plan);
    let set = read(&a);
    assert_eq!(set["schema"], "throng.result-set/v2");
    assert_eq!(set["runs"].as_array().unwrap().len(), 5);
    let problems = violations("result-set.schema.json", &set);
    assert!(problems.is_empty(), "result set schema violations: {problems:#?}");

    let doc = compare_json(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(doc["basis"], "runs");
    let tp = test_named(&doc, "throughput (ok/s)");
    assert_eq!(tp["a_per_s"].as_array().unwrap().len(), 5);
    assert_eq!(tp["b_per_s"].as_array().unwrap().len(), 5);
    assert_ne!(tp["verdict"], "significant", "{tp:#}");
    // Every figure both sides have is there, with A, B and the difference.
    let figures = doc["figures"].as_array().unwrap();
    let requests = figures.iter().find(|f| f["name"] == "requests").unwrap();
    assert_eq!(
        (requests["a_count"].as_f64(), requests["b_count"].as_f64()),
        (Some(1000.0), Some(1000.0))
    );
    assert_eq!(requests["diff_count"], 0.0);
    for section in [
        "phase latency",
        "outcomes: requests",
        "status",
        "generator",
        "concurrency",
    ] {
        assert!(figures.iter().any(|f| f["section"] == section), "no {section} figures");
    }

    // The same comparison as text names both sides and says not significant.
    let (code, text, _) = compare(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--label",
        "A=left",
        "--label",
        "B=right",
    ]);
    assert_eq!(code, 0);
    assert!(text.contains("A = left") && text.contains("B = right"), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("throughput (ok/s)") && l.contains('['))
        .unwrap();
    assert!(
        !line.ends_with(" significant") || line.ends_with("not significant"),
        "{line}"
    );
}

#[test]
fn slower_b_is_significant_with_the_right_sign_and_size() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let plan = |path: &str| -> Vec<String> {
        [
            "http",
            &format!("http://{}{path}", server.addr()),
            "-r",
            "100",
            "-n",
            "100",
            "-t",
            "1",
            "--repeat",
            REPEATS,
            "--settle",
            "100ms",
        ]
        .map(str::to_string)
        .to_vec()
    };
    let (fast, slow) = (plan("/"), plan("/delay/20"));
    let (a, _) = run_to(
        dir.path(),
        "fast.json",
        &fast.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let (b, _) = run_to(
        dir.path(),
        "slow.json",
        &slow.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let doc = compare_json(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(doc["a"]["label"], "fast");
    assert_eq!(doc["b"]["label"], "slow");
    let p50 = test_named(&doc, "latency p50");
    assert_eq!(p50["verdict"], "significant", "{p50:#}");
    let diff_ms = p50["diff_us"].as_f64().unwrap() / 1000.0;
    assert!(
        (18.0..35.0).contains(&diff_ms),
        "B − A of p50 is {diff_ms} ms, expected about +20 ms"
    );
    let interval = p50["interval_us"].as_array().unwrap();
    assert!(
        interval[0].as_f64().unwrap() > 0.0,
        "interval {interval:?} should be above 0"
    );
    assert!(p50["mann_whitney"]["p_value"].as_f64().unwrap() < 0.05);

    // The text view says so on the p50 line, with the sign.
    let (code, text, _) = compare(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("latency p50"))
        .unwrap();
    assert!(
        line.ends_with(" significant") && !line.ends_with("not significant"),
        "{line}"
    );
    assert!(line.contains("+2"), "{line}");

    // Several files per side: the runs of both sets on each side.
    let doc = compare_json(&[
        a.to_str().unwrap(),
        a.to_str().unwrap(),
        "--vs",
        b.to_str().unwrap(),
        "--label",
        "B=slow",
    ]);
    assert_eq!(doc["a"]["runs"], 10);
    assert_eq!(doc["b"]["label"], "slow");
    assert_eq!(test_named(&doc, "latency p50")["a_us"].as_array().unwrap().len(), 10);
}

#[test]
fn one_run_per_side_says_the_per_second_basis_is_weaker() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let url = |p: &str| format!("http://{}{p}", server.addr());
    let (a, _) = run_to(
        dir.path(),
        "direct.json",
        &["http", &url("/"), "-r", "100", "-d", "3s", "-t", "1"],
    );
    let (b, _) = run_to(
        dir.path(),
        "nat.json",
        &["http", &url("/delay/5"), "-r", "100", "-d", "3s", "-t", "1"],
    );
    assert_eq!(
        read(&a)["schema"],
        "throng.result/v2",
        "without --repeat a run is one document"
    );
    let (code, text, _) = compare(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("per-second"), "{text}");
    assert!(text.contains("weaker"), "{text}");
    let doc = compare_json(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(doc["basis"], "seconds");
    // 3 full seconds a side: one value each.
    assert_eq!(
        test_named(&doc, "throughput (ok/s)")["a_per_s"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(
        doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("weaker"))
    );

    // Both tools' layouts, in two columns.
    for (format, line) in [("ab", "Requests per second:"), ("httperf", "Reply rate [replies/s]:")] {
        let (code, text, err) = compare(&[a.to_str().unwrap(), b.to_str().unwrap(), "--format", format]);
        assert_eq!(code, 0, "{err}");
        assert!(text.starts_with("A: direct"), "{text}");
        let row = text.lines().find(|l| l.starts_with(line)).unwrap();
        assert_eq!(row.matches(line).count(), 2, "{row}");
        assert!(row.contains(" | "), "{row}");
    }
    // --html: one page with both sides overlaid, a line per side per chart.
    let page = dir.path().join("compare.html");
    let (code, _, err) = compare(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    for side in ["direct", "nat"] {
        assert!(
            html.contains(&format!("data-series=\"{side} · requests\"")),
            "{side} missing"
        );
    }
    assert!(html.contains("data-chart=\"spectrum\""));
    assert!(!html.contains("src=\"http"), "the page fetches nothing");
    let missing = dir.path().join("no/such/dir/compare.html");
    let (code, _, err) = compare(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        missing.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("no/such/dir/compare.html"), "{err}");
    // Markdown: tables.
    let (code, md, _) = compare(&[a.to_str().unwrap(), b.to_str().unwrap(), "--format", "markdown"]);
    assert_eq!(code, 0);
    assert!(
        md.contains("| section | figure | direct | nat | B−A | (B−A)/A |"),
        "{md}"
    );
}

#[test]
fn repeat_writes_a_set_that_report_and_merge_read() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{}/bytes/10", server.addr());
    let (set, printed) = run_to(
        dir.path(),
        "set.json",
        &[
            "http", &url, "-n", "100", "-c", "2", "-t", "1", "--repeat", "3", "--settle", "0s",
        ],
    );
    // The report adds the runs up and lists each.
    assert!(printed.contains("requests      300 in"), "{printed}");
    assert!(printed.contains("3 runs in sequence"), "{printed}");
    let table: Vec<&str> = printed
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("run "))
        .collect();
    assert_eq!(table.len(), 1 + 3 + 2, "header, 3 runs, median, spread: {table:#?}");
    // `throng report` renders the set exactly as the run printed it.
    let again = output(throng().args(["report", set.to_str().unwrap()]));
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&again.stdout), printed);
    // `throng merge` adds a set up in sequence: durations add, pauses excluded.
    let merged = dir.path().join("merged.json");
    let out = output(throng().args(["merge", set.to_str().unwrap(), "-o", merged.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = throng_result::load_runs(&set).unwrap();
    assert_eq!(runs.len(), 3);
    let m = throng_result::load_runs(&merged).unwrap().remove(0);
    common::assert_books_balance(&runs[0]);
    assert_eq!(m.measurements.requests.attempted, 300);
    let total: f64 = runs.iter().map(|r| r.duration_s).sum();
    assert!((m.duration_s - total).abs() < 1e-6, "{} vs {total}", m.duration_s);
}

#[test]
fn bad_inputs_are_one_line_errors_with_exit_2() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let (http, _) = run_to(
        dir.path(),
        "http.json",
        &[
            "http",
            &format!("http://{}/", server.addr()),
            "-n",
            "50",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    let (storm, _) = run_to(
        dir.path(),
        "storm.json",
        &[
            "storm",
            &format!("tcp://{}", server.addr()),
            "--count",
            "10",
            "--procs",
            "1",
        ],
    );
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let text = dir.path().join("text.json");
    std::fs::write(&text, "not json").unwrap();
    let missing = dir.path().join("missing.json");
    let h = http.to_str().unwrap();
    for (args, says) in [
        (vec![h, missing.to_str().unwrap()], "cannot read"),
        (vec![h, junk.to_str().unwrap()], "not a throng result"),
        (vec![h, text.to_str().unwrap()], "not a throng result"),
        (vec![h, storm.to_str().unwrap()], "same kind"),
        (vec![h], "two files"),
        (vec![h, h, "--label", "C=x"], "A=NAME"),
        (
            vec![storm.to_str().unwrap(), storm.to_str().unwrap(), "--format", "ab"],
            "ab view",
        ),
    ] {
        let (code, stdout, stderr) = compare(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("throng: error:") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
}
