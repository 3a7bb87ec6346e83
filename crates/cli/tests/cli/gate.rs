//! `throng compare --fail-on`: the gate CI runs on two results. The same
//! plan against two lab servers at the same URL (`--connect-to`), one of
//! them stalling, stands for a change that made the server slower: a
//! significant regression past a rule's limit exits 99 and names the rule,
//! a lenient rule passes, a change past the limit without evidence holds
//! and says "not significant", and rules on missing figures or mixed plans
//! are refused with exit 2. The JSON validates against its schema; the
//! markdown summary and JUnit carry the verdict.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{lab, output, throng};
use serde_json::Value;

/// `throng http URL ARGS --connect-to gate.test:8080:127.0.0.1:PORT --json DIR/NAME`.
fn run_to(dir: &Path, name: &str, port: u16, url_path: &str, args: &[&str]) -> PathBuf {
    let json = dir.join(name);
    let url = format!("http://gate.test:8080{url_path}");
    let out = output(
        throng()
            .arg("http")
            .arg(&url)
            .args(args)
            .arg("--connect-to")
            .arg(format!("gate.test:8080:127.0.0.1:{port}"))
            .arg("--json")
            .arg(&json)
            .arg("--quiet"),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json
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

/// Violations of `schema/compare.schema.json`.
fn violations(doc: &Value) -> Vec<String> {
    let load = |n: &str| -> Value {
        let path = format!("{}/../../schema/{n}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let validator = jsonschema::options()
        .with_resource(
            "https://throng.dev/schema/result.schema.json",
            jsonschema::Resource::from_contents(load("result.schema.json")).unwrap(),
        )
        .build(&load("compare.schema.json"))
        .unwrap();
    validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// A lab server that answers nothing for the last 30 ms of every 40 ms:
/// three requests in four wait, up to 30 ms.
fn stalling() -> throng_lab::LabServer {
    lab(Some(throng_lab::Stall {
        every: Duration::from_millis(40),
        duration: Duration::from_millis(30),
    }))
}

const PLAN: [&str; 10] = [
    "-r", "100", "-n", "100", "-t", "1", "--repeat", "5", "--settle", "100ms",
];

#[test]
fn a_significant_regression_fails_the_gate_and_a_lenient_rule_passes() {
    let (fast, slow) = (lab(None), stalling());
    let dir = tempfile::tempdir().unwrap();
    let a = run_to(dir.path(), "main.json", fast.addr().port(), "/", &PLAN);
    let b = run_to(dir.path(), "pr.json", slow.addr().port(), "/", &PLAN);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let md = dir.path().join("summary.md");
    let xml = dir.path().join("gate.xml");
    let (code, text, err) = compare(&[
        a,
        b,
        "--fail-on",
        "p99 > +10%",
        "rps < -20%",
        "--summary-md",
        md.to_str().unwrap(),
        "--junit",
        xml.to_str().unwrap(),
    ]);
    assert_eq!(code, 99, "{err}\n{text}");
    // The verdict first, then a line per rule, the failed one named.
    let mut lines = text.lines();
    let head = lines.next().unwrap();
    assert!(head.starts_with("GATE FAILED: 1 of 2 rules failed"), "{text}");
    let p99 = lines.next().unwrap();
    assert!(
        p99.trim_start().starts_with("FAILED") && p99.contains("p99 > +10%") && p99.contains("significant"),
        "{text}"
    );
    let rps = lines.next().unwrap();
    assert!(
        rps.trim_start().starts_with("HELD") && rps.contains("rps < -20%"),
        "{text}"
    );
    assert!(
        text.contains("throng compare: A = main"),
        "the comparison follows: {text}"
    );

    // The summary: the verdict on its first lines, the rule's row, no links.
    let summary = std::fs::read_to_string(&md).unwrap();
    let first: Vec<&str> = summary.lines().take(3).collect();
    assert!(first[0].contains("GATE FAILED"), "{summary}");
    assert!(
        first[2].starts_with("**GATE FAILED**: 1 of 2 rules failed"),
        "{summary}"
    );
    let row = summary.lines().find(|l| l.contains("`p99 > +10%`")).unwrap();
    assert!(
        row.starts_with("| **FAILED** |") && row.contains("latency p99"),
        "{row}"
    );
    assert!(!summary.contains("]("), "{summary}");
    for line in summary.lines().filter(|l| l.starts_with('|')) {
        assert!(!line.contains("http://"), "a link in the table: {line}");
    }
    // Appended, as a job summary gathers a step's commands.
    compare(&[a, b, "--summary-md", md.to_str().unwrap()]);
    let twice = std::fs::read_to_string(&md).unwrap();
    assert!(twice.starts_with(&summary) && twice.len() > summary.len());

    // JUnit: a test case per rule, a failure for the failed one.
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert!(junit.contains(r#"tests="2" failures="1""#), "{junit}");
    let case = junit.split("<testcase").find(|c| c.contains("p99 &gt; +10%")).unwrap();
    assert!(case.contains("<failure"), "{case}");
    let case = junit.split("<testcase").find(|c| c.contains("rps &lt; -20%")).unwrap();
    assert!(!case.contains("<failure"), "{case}");

    // JSON: the gate first, valid against the schema.
    let (code, json, err) = compare(&[a, b, "--fail-on", "p99 > +10%", "--format", "json"]);
    assert_eq!(code, 99, "{err}");
    assert!(
        json.trim_start()
            .starts_with("{\n  \"schema\": \"throng.compare/v2\",\n  \"gate\""),
        "{json}"
    );
    let doc: Value = serde_json::from_str(&json).unwrap();
    let problems = violations(&doc);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
    assert_eq!(doc["gate"]["verdict"], "failed");
    let rule = &doc["gate"]["rules"][0];
    assert_eq!(
        (rule["status"].as_str(), rule["figure"].as_str()),
        (Some("failed"), Some("latency p99"))
    );
    assert_eq!(rule["test"]["verdict"], "significant");
    assert!(rule["change_pct"].as_f64().unwrap() > 10.0, "{rule:#}");
    assert_eq!(doc["gate"]["mixed"].as_array().unwrap().len(), 0, "same plan, same URL");

    // The same runs under lenient rules: exit 0.
    let (code, text, err) = compare(&[a, b, "--fail-on", "p99 > +100000%", "latency: p50 > +10s"]);
    assert_eq!(code, 0, "{err}\n{text}");
    assert!(text.starts_with("GATE PASSED: all 2 rules held"), "{text}");
    // Markdown puts the verdict before the tables too.
    let (code, md_out, _) = compare(&[a, b, "--fail-on", "p99 > +10%", "--format", "markdown"]);
    assert_eq!(code, 99);
    let verdict = md_out.find("**GATE FAILED**").unwrap();
    assert!(verdict < md_out.find("| section |").unwrap(), "{md_out}");
}

#[test]
fn a_change_past_the_limit_without_evidence_holds_and_says_not_significant() {
    let (fast, slow) = (lab(None), stalling());
    let dir = tempfile::tempdir().unwrap();
    // One run a side of two seconds: two values each, which can never
    // reach p < 0.05, however far apart.
    let plan = ["-r", "100", "-d", "2s", "-t", "1"];
    let a = run_to(dir.path(), "a.json", fast.addr().port(), "/", &plan);
    let b = run_to(dir.path(), "b.json", slow.addr().port(), "/", &plan);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (code, text, err) = compare(&[a, b, "--fail-on", "p99 > +10%"]);
    assert_eq!(code, 0, "{err}\n{text}");
    let head = text.lines().next().unwrap();
    assert!(head.starts_with("GATE PASSED"), "{text}");
    assert!(head.contains("exceeds its limit but is not significant"), "{text}");
    let line = text.lines().nth(1).unwrap();
    assert!(
        line.trim_start().starts_with("NOT SIGNIFICANT") && line.contains("exceeds the limit but not significant"),
        "{text}"
    );
    let (code, json, _) = compare(&[a, b, "--fail-on", "p99 > +10%", "--format", "json"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&json).unwrap();
    assert!(violations(&doc).is_empty());
    let rule = &doc["gate"]["rules"][0];
    assert_eq!(
        (rule["status"].as_str(), rule["exceeded"].as_bool()),
        (Some("not_significant"), Some(true))
    );
    assert_eq!(rule["test"]["basis"], "seconds");
    assert_eq!(doc["gate"]["verdict"], "passed");
}

#[test]
fn rules_on_missing_figures_bad_rules_and_mixed_plans_exit_2() {
    let server = lab(None);
    let port = server.addr().port();
    let dir = tempfile::tempdir().unwrap();
    // Two targets a side: figures per target, `/` and `/bytes/10`.
    let targets = ["http://gate.test:8080/bytes/10", "-n", "60", "-c", "1", "-t", "1"];
    let a = run_to(dir.path(), "a.json", port, "/", &targets);
    let b = run_to(dir.path(), "b.json", port, "/", &targets);
    let other_rate = run_to(dir.path(), "r50.json", port, "/", &["-r", "50", "-n", "20", "-t", "1"]);
    let rate = run_to(
        dir.path(),
        "r100.json",
        port,
        "/",
        &["-r", "100", "-n", "20", "-t", "1"],
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (r50, r100) = (other_rate.to_str().unwrap(), rate.to_str().unwrap());

    // A rule on a target both sides have is judged.
    let (code, text, err) = compare(&[a, b, "--fail-on", "response{target:/bytes/10}: p(95) > +100000%"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("response{target:/bytes/10} p95"), "{text}");

    // Rules before the files: --fail-on took the files too, and gives them back.
    let (code, text, err) = compare(&["--fail-on", "p99 > +100000%", a, b]);
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("GATE PASSED"), "{text}");
    let (code, _, err) = compare(&[a, "--vs", b, "--fail-on", "p99 > +1%", a]);
    assert_eq!(code, 2);
    assert!(err.contains("give --fail-on after the result files"), "{err}");

    let summary = dir.path().join("never.md");
    for (args, says) in [
        (
            vec![a, b, "--fail-on", "response{target:/login}: p(95) > +15%"],
            "has no target '/login'; its targets: /, /bytes/10",
        ),
        (vec![a, b, "--fail-on", "tls: p99 > +1%"], "has no tls samples"),
        (vec![a, b, "--fail-on", "p99 >> +10%"], "column 6"),
        (vec![a, b, "--fail-on", "p99 > 10%"], "needs its sign"),
        (
            vec![
                r100,
                r50,
                "--fail-on",
                "p99 > +10%",
                "--summary-md",
                summary.to_str().unwrap(),
            ],
            "ran different plans (rate 100/s vs 50/s",
        ),
    ] {
        let (code, stdout, stderr) = compare(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("throng: error: --fail-on") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
    assert!(!summary.exists(), "nothing is written when the gate is refused");
    // Mixed plans: a warning without rules, judged with --allow-mixed.
    let (code, text, _) = compare(&[r100, r50]);
    assert_eq!(code, 0);
    assert!(
        text.contains("warning: the sides ran different plans: rate 100/s vs 50/s"),
        "{text}"
    );
    let (code, text, err) = compare(&[r100, r50, "--fail-on", "p99 > +100000%", "--allow-mixed"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("--allow-mixed judged them anyway"), "{text}");
}
