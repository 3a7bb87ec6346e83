//! `throng history` and `compare --baseline` against the lab server: the
//! baseline is exactly the last N runs of the new run's plan (its request
//! count the sum of theirs), other plans are skipped and counted, a missing
//! or empty history is exit 2, hostile entries are skipped without hanging
//! or reading without end, and the trend page has one point per run.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{lab, output, throng};
use serde_json::Value;
use throng_result::RunResult;

/// `throng ARGS`: exit code, stdout, stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let out = output(throng().args(args));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `throng http URL -c 1 -n N --json DIR/NAME --quiet`, checked to succeed.
fn http_run(dir: &Path, name: &str, url: &str, n: u32) -> (PathBuf, RunResult) {
    let json = dir.join(name);
    let n = n.to_string();
    let (code, _, err) = run(&[
        "http",
        url,
        "-c",
        "1",
        "-t",
        "1",
        "-n",
        &n,
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    (json, r)
}

fn add(result: &Path, history: &Path, label: &str) -> String {
    let (code, _, err) = run(&[
        "history",
        "add",
        result.to_str().unwrap(),
        "--dir",
        history.to_str().unwrap(),
        "--label",
        label,
    ]);
    assert_eq!(code, 0, "{err}");
    err
}

/// `compare --baseline HISTORY --last N NEW --format json`.
fn compare_baseline(history: &Path, last: u32, new: &Path) -> (i32, Option<Value>, String) {
    let last = last.to_string();
    let (code, out, err) = run(&[
        "compare",
        "--baseline",
        history.to_str().unwrap(),
        "--last",
        &last,
        new.to_str().unwrap(),
        "--format",
        "json",
    ]);
    (code, serde_json::from_str(&out).ok(), err)
}

/// A figure's value by its key (`a_count`: A's, in its unit).
fn figure(doc: &Value, section: &str, name: &str, side: &str) -> f64 {
    doc["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["section"] == section && f["name"] == name)
        .unwrap_or_else(|| panic!("no figure {section}/{name}"))[side]
        .as_f64()
        .unwrap()
}

/// The entry files of a history, in order.
fn entries(history: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(history)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

#[test]
fn the_baseline_is_the_last_runs_of_the_same_plan() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let other_url = format!("http://{}/bytes/10", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    // Three runs of one plan with different request counts would be three
    // plans; one plan with time-bound runs would make the counts unknown
    // ahead. So: one count, and the runs told apart by their entries.
    let (r1, _) = http_run(dir.path(), "r1.json", &url, 120);
    let (o1, _) = http_run(dir.path(), "o1.json", &other_url, 50);
    let (r2, run2) = http_run(dir.path(), "r2.json", &url, 120);
    let (r3, run3) = http_run(dir.path(), "r3.json", &url, 120);
    let said = add(&r1, &history, "v1");
    assert!(said.contains("the history holds 1 run of this plan"), "{said}");
    add(&o1, &history, "other");
    add(&r2, &history, "v2");
    let said = add(&r3, &history, "v3");
    assert!(said.contains("the history holds 3 runs of this plan"), "{said}");
    let files = entries(&history);
    assert_eq!(files.len(), 4);

    let (new, new_run) = http_run(dir.path(), "new.json", &url, 120);
    let (code, doc, err) = compare_baseline(&history, 2, &new);
    assert_eq!(code, 0, "{err}");
    let doc = doc.unwrap();
    assert_eq!(doc["a"]["runs"], 2);
    assert_eq!(doc["a"]["label"], "baseline");
    let sources: Vec<&str> = doc["a"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let last_two: Vec<String> = files[2..].iter().map(|p| p.display().to_string()).collect();
    assert_eq!(sources, last_two, "the last two entries of the plan, oldest first");
    let sum = run2.measurements.requests.attempted + run3.measurements.requests.attempted;
    assert_eq!(sum, 240);
    assert_eq!(figure(&doc, "summary", "requests", "a_count"), sum as f64);
    assert_eq!(
        figure(&doc, "summary", "requests", "b_count"),
        new_run.measurements.requests.attempted as f64
    );
    assert!(err.contains("(v2, v3)"), "{err}");
    assert!(err.contains("1 entry of another plan skipped"), "{err}");

    // The new run added before the comparison is not its own baseline.
    add(&new, &history, "new");
    let (code, doc, err) = compare_baseline(&history, 2, &new);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc.unwrap()["a"]["runs"], 2);
    assert!(err.contains("(v2, v3)") && err.contains("new run itself"), "{err}");

    // More than the history holds: those there are, and a line saying so.
    let (code, doc, err) = compare_baseline(&history, 10, &new);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc.unwrap()["a"]["runs"], 3);
    assert!(err.contains("--last 10 asked for more runs"), "{err}");
}

#[test]
fn no_run_of_the_plan_is_a_usage_error_naming_what_the_history_holds() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let (new, _) = http_run(dir.path(), "new.json", &format!("http://{}/", server.addr()), 20);
    let (code, _, err) = compare_baseline(&history, 2, &new);
    assert_eq!(code, 2, "a missing directory: {err}");
    assert!(err.contains("cannot read the history directory"), "{err}");
    std::fs::create_dir(&history).unwrap();
    let (code, _, err) = compare_baseline(&history, 2, &new);
    assert_eq!(code, 2, "an empty directory: {err}");
    assert!(err.contains("it holds no runs"), "{err}");
    let (other, other_run) = http_run(
        dir.path(),
        "other.json",
        &format!("http://{}/bytes/20", server.addr()),
        20,
    );
    add(&other, &history, "x");
    let (code, _, err) = compare_baseline(&history, 2, &new);
    assert_eq!(code, 2, "{err}");
    let fp = throng_result::history::fingerprint(&other_run.plan);
    assert!(err.contains(&format!("it holds {fp} (1 run: http GET")), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("error")).count(), 1, "{err}");
    for bad in ["0", "1001"] {
        let (code, _, err) = run(&[
            "compare",
            "--baseline",
            history.to_str().unwrap(),
            "--last",
            bad,
            new.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "--last {bad}: {err}");
    }
    let (code, _, err) = run(&[
        "history",
        "report",
        "--dir",
        dir.path().join("none").to_str().unwrap(),
        "--html",
        dir.path().join("t.html").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&[
        "history",
        "report",
        "--dir",
        history.to_str().unwrap(),
        "--plan",
        "0123456789abcdef",
        "--html",
        dir.path().join("t.html").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no run of this plan") && err.contains(&fp), "{err}");
}

#[test]
fn an_interrupted_run_is_not_added() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let (path, mut r) = http_run(dir.path(), "r.json", &format!("http://{}/", server.addr()), 20);
    r.interrupted = true;
    r.to_writer(std::fs::File::create(&path).unwrap()).unwrap();
    let history = dir.path().join("history");
    let (code, _, err) = run(&[
        "history",
        "add",
        path.to_str().unwrap(),
        "--dir",
        history.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(!history.exists() || entries(&history).is_empty());
}

#[test]
fn hostile_entries_are_skipped_and_bounded() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let (r1, run1) = http_run(dir.path(), "r1.json", &url, 30);
    add(&r1, &history, "good");
    let fp = throng_result::history::fingerprint(&run1.plan);
    let good = std::fs::read_to_string(&entries(&history)[0]).unwrap();
    let (head, result) = good.split_once('\n').unwrap();
    // Newer entries of the same plan, each hostile in its own way.
    let name = |n: u32| history.join(format!("{n:06}-{fp}.json"));
    // A result claiming 1e308 seconds.
    let mut doc: Value = serde_json::from_str(result).unwrap();
    doc["duration_s"] = serde_json::json!(1e308);
    std::fs::write(name(2), format!("{head}\n{doc}\n")).unwrap();
    // A head line without end (a gigabyte-long "index" line).
    std::fs::write(name(3), vec![b'{'; 1 << 20]).unwrap();
    // A file claiming to be larger than any entry (sparse: no disk used).
    let huge = std::fs::File::create(name(4)).unwrap();
    huge.set_len(1 << 40).unwrap();
    // A FIFO under an entry's name: opening it would block.
    let fifo = name(5);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // A head that names another plan than its file name.
    let lying = head.replace(&fp, "0123456789abcdef");
    std::fs::write(name(6), format!("{lying}\n{result}\n")).unwrap();

    let (new, _) = http_run(dir.path(), "new.json", &url, 30);
    let (code, doc, err) = compare_baseline(&history, 5, &new);
    assert_eq!(code, 0, "{err}");
    let doc = doc.unwrap();
    assert_eq!(doc["a"]["runs"], 1, "only the good entry: {err}");
    assert_eq!(figure(&doc, "summary", "requests", "a_count"), 30.0);
    for bad in [2, 3, 4, 6] {
        let shown = name(bad).display().to_string();
        assert!(err.contains(&format!("skipping {shown}")), "entry {bad}: {err}");
    }
    assert!(err.contains("duration_s"), "{err}");
    assert!(err.contains("longer than"), "{err}");
    assert!(err.contains("over the limit of 256 MiB"), "{err}");
    assert!(
        err.contains("4 entries damaged skipped") || err.contains("4 damaged"),
        "{err}"
    );

    let html = dir.path().join("trend.html");
    let (code, _, err) = run(&[
        "history",
        "report",
        "--dir",
        history.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("4 entries damaged skipped"), "{err}");
    let (code, out, err) = run(&["history", "list", "--dir", history.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 6, "a header and five regular files:\n{out}");
    // Entry 2 has a good head and a damaged result: list reads heads only.
    assert_eq!(out.matches("(damaged:").count(), 3, "{out}");
}

/// `data-points` of each chart, by `data-chart`.
fn chart_points(html: &str) -> Vec<(String, Vec<usize>)> {
    html.split("<svg class=\"chart\" data-chart=\"")
        .skip(1)
        .map(|part| {
            let id = part.split('"').next().unwrap_or_default().to_string();
            let body = part.split("</svg>").next().unwrap_or_default();
            let n = body
                .split("data-points=\"")
                .skip(1)
                .filter_map(|p| p.split('"').next()?.parse().ok())
                .collect();
            (id, n)
        })
        .collect()
}

#[test]
fn the_trend_page_has_a_point_per_run_of_one_plan() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let mut labels = Vec::new();
    for i in 0..4 {
        let (r, _) = http_run(dir.path(), &format!("r{i}.json"), &url, 40);
        let label = format!("build <{i}>");
        add(&r, &history, &label);
        labels.push(label);
    }
    let (o, other) = http_run(dir.path(), "o.json", &format!("http://{}/bytes/30", server.addr()), 40);
    add(&o, &history, "other");
    let html = dir.path().join("trend.html");
    let report = |extra: &[&str]| {
        let mut args = vec![
            "history",
            "report",
            "--dir",
            history.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ];
        args.extend(extra);
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        (std::fs::read_to_string(&html).unwrap(), err)
    };
    // The newest entry's plan by default: the other plan's one run.
    let (page, err) = report(&[]);
    let charts = chart_points(&page);
    assert_eq!(charts[0].0, "trend-latency");
    assert_eq!(charts[0].1, [1, 1]);
    assert!(err.contains("4 entries of another plan skipped"), "{err}");
    assert!(page.contains(&throng_result::history::fingerprint(&other.plan)));
    // The first plan, by its fingerprint.
    let fp = entries(&history)[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .split_once('-')
        .unwrap()
        .1
        .to_string();
    let (page, err) = report(&["--plan", &fp]);
    let charts = chart_points(&page);
    let ids: Vec<&str> = charts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["trend-latency", "trend-throughput", "trend-errors"]);
    assert_eq!(charts[0].1, [4, 4], "p50 and p99: a point per run");
    assert_eq!(charts[1].1, [4]);
    assert_eq!(charts[2].1, [4]);
    assert!(err.contains("1 entry of another plan skipped"), "{err}");
    assert!(page.contains("1 entry of another plan skipped"));
    for l in &labels {
        let escaped = l.replace('<', "&lt;").replace('>', "&gt;");
        assert!(page.contains(&escaped), "label {l}");
        assert!(!page.contains(l.as_str()), "label {l} unescaped");
    }
    assert_eq!(page.matches("<tr><td>").count(), 4, "a table row per run");
    assert!(page.contains("Content-Security-Policy"));
    // --last picks the newest.
    let (page, _) = report(&["--plan", &fp, "--last", "2"]);
    assert_eq!(chart_points(&page)[1].1, [2]);
    assert!(page.contains("build &lt;3&gt;") && !page.contains("build &lt;1&gt;"));
}

#[test]
fn a_directory_past_the_name_limit_is_refused() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let (r, _) = http_run(dir.path(), "r.json", &format!("http://{}/", server.addr()), 10);
    add(&r, &history, "one");
    // 100,000 names besides the entry: one past the limit.
    for i in 0..100_000 {
        std::fs::File::create(history.join(format!("junk-{i}"))).unwrap();
    }
    let (code, _, err) = compare_baseline(&history, 1, &r);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than 100000 names"), "{err}");
    let (code, _, err) = run(&["history", "list", "--dir", history.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    std::fs::remove_file(history.join("junk-0")).unwrap();
    let (code, out, err) = run(&["history", "list", "--dir", history.to_str().unwrap()]);
    assert_eq!(code, 0, "at the limit: {err}");
    assert_eq!(out.lines().count(), 2, "{out}");
}
