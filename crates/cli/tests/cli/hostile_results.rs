//! Result files are input too: a damaged or hostile file given to `report`,
//! `compare` or `merge` is refused with one line naming the file and the
//! field, exit 2 — never a panic, an abort, or gigabytes of memory. Each
//! file here is made from a real run's result, changed in one place.
//! Names of any length are clipped for display, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::lab;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use serde_json::Value;

/// Memory a refusal may take: the whole process, generously (a report of a
/// real result takes a few MB; the hostile files took 1.6 GB to 8 TB).
const MEMORY_BOUND_KB: i64 = 200 * 1024;

/// A real result (300 requests to the lab server), made once per test binary.
fn base() -> Value {
    static BASE: OnceLock<Value> = OnceLock::new();
    BASE.get_or_init(|| {
        let server = lab(None);
        let run = common::http(&[&format!("http://{}/", server.addr()), "-n", "300", "-c", "2"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        serde_json::from_slice(&std::fs::read(&run.json).unwrap()).unwrap()
    })
    .clone()
}

/// What a child did: exit code, stdout, stderr, peak resident memory (KB).
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) max_rss_kb: i64,
}

/// Runs `throng ARGS`, measuring its peak memory; killed (and failed)
/// after 60 s.
///
/// The peak is read by GNU time, which forks throng from its own small
/// process: a child spawned straight from this test binary (one process for
/// every test module, hundreds of MB) would report this binary's peak
/// instead, since Linux keeps the peak of the memory a process had before
/// `exec` — and posix_spawn's child shares ours until then.
pub(crate) fn run(args: &[&str]) -> Ran {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let time = Path::new("/usr/bin/time");
    assert!(
        time.exists(),
        "/usr/bin/time (GNU time) measures peak memory here: apt-get install time (scripts/test.sh does)"
    );
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let rss_file = std::env::temp_dir().join(format!("throng-hostile-rss-{}-{n}", std::process::id()));
    let mut child = std::process::Command::new(time)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(env!("CARGO_BIN_EXE_throng"))
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).ok();
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // time and throng: the whole group.
            // SAFETY: kill(2) with a process group we made; no memory involved.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!("throng {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // GNU time exits with throng's status (128 + N for signal N).
    let code = status.code().unwrap_or(128);
    let measured = std::fs::read_to_string(&rss_file).unwrap_or_default();
    let _ = std::fs::remove_file(&rss_file);
    // "Command exited with non-zero status 2" comes first when it did.
    let max_rss_kb = measured
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .next_back()
        .unwrap_or_else(|| panic!("GNU time wrote no peak memory for {args:?}: {measured:?}"));
    Ran {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        max_rss_kb,
    }
}

fn write(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(doc).unwrap()).unwrap();
    path
}

/// The run was refused as a usage error: exit 2, one line on stderr naming
/// the file and every one of `words`, no panic, memory bounded.
#[track_caller]
fn assert_refused(r: &Ran, file: &Path, words: &[&str]) {
    assert_eq!(r.code, 2, "stderr: {}", r.stderr);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "one line: {}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(r.stderr.contains(name), "names the file: {}", r.stderr);
    for w in words {
        assert!(r.stderr.contains(w), "says '{w}': {}", r.stderr);
    }
    assert!(r.max_rss_kb < MEMORY_BOUND_KB, "{} KB: {}", r.max_rss_kb, r.stderr);
}

/// The V2 deflate encoding of a histogram with these bounds holding `value`.
fn hdr(low: u64, high: u64, sigfig: u8, value: u64) -> String {
    let mut h = Histogram::<u64>::new_with_bounds(low, high, sigfig).unwrap();
    h.record(value).unwrap();
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut bytes).unwrap();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Every histogram of `doc` (whole-run and per-second) replaced by `text`.
fn every_histogram(doc: &mut Value, text: &str) {
    let m = &mut doc["measurements"];
    for (_, h) in m["phases"].as_object_mut().unwrap() {
        h["hdr"] = text.into();
    }
    for p in m["series"].as_array_mut().unwrap() {
        if let Some(phases) = p["phases"].as_object_mut() {
            for (_, h) in phases {
                *h = text.into();
            }
        }
    }
}

#[test]
fn absurd_durations_are_refused_by_report_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.json", &base());
    for (name, d) in [("huge.json", 1e308), ("far.json", 1e12), ("minus.json", -1.0)] {
        let mut doc = base();
        doc["duration_s"] = d.into();
        let file = write(dir.path(), name, &doc);
        for format in ["httperf", "ab", "text", "json"] {
            let r = run(&["report", file.to_str().unwrap(), "--format", format]);
            assert_refused(&r, &file, &["'duration_s'", "366 days"]);
        }
        let html = dir.path().join("r.html");
        let r = run(&["report", file.to_str().unwrap(), "--html", html.to_str().unwrap()]);
        assert_refused(&r, &file, &["'duration_s'"]);
        let r = run(&["compare", good.to_str().unwrap(), file.to_str().unwrap()]);
        assert_refused(&r, &file, &["'duration_s'"]);
    }
    // A part's duration, a start after the year 3000, a series second past a
    // year: each named.
    for (name, field, change) in [
        (
            "part.json",
            "parts[0].duration_s",
            ("/parts/0/duration_s", Value::from(1e12)),
        ),
        (
            "start.json",
            "started_at_unix_ms",
            ("/started_at_unix_ms", Value::from(u64::MAX / 2)),
        ),
        (
            "second.json",
            "measurements.series[0].second",
            ("/measurements/series/0/second", Value::from(1u64 << 40)),
        ),
    ] {
        let mut doc = base();
        *doc.pointer_mut(change.0).unwrap() = change.1;
        let file = write(dir.path(), name, &doc);
        let r = run(&["report", file.to_str().unwrap(), "--format", "httperf"]);
        assert_refused(&r, &file, &[&format!("'{field}'")]);
    }
    // The real file still reports, in every view.
    let r = run(&["report", good.to_str().unwrap(), "--format", "httperf"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Reply rate"), "{}", r.stdout);
}

#[test]
fn huge_histogram_bounds_are_refused_before_any_is_decoded() {
    let dir = tempfile::tempdir().unwrap();
    // Significant digits 5, highest value 2^62: 1.67 GB in `report --html`
    // before this was checked.
    let mut doc = base();
    every_histogram(&mut doc, &hdr(1, 1 << 62, 5, 1000));
    let file = write(dir.path(), "digits.json", &doc);
    let html = dir.path().join("r.html");
    let r = run(&["report", file.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_refused(&r, &file, &["significant digits", ".hdr'"]);
    // Three digits but a highest value of 2^62.
    let mut doc = base();
    every_histogram(&mut doc, &hdr(1, 1 << 62, 3, 1000));
    let file = write(dir.path(), "high.json", &doc);
    let r = run(&["report", file.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_refused(&r, &file, &["highest value"]);
    // Only the per-second ones: named with their second.
    let mut doc = base();
    doc["measurements"]["series"][0]["phases"]["latency"] = hdr(1, 1 << 62, 5, 1000).into();
    let file = write(dir.path(), "second.json", &doc);
    let r = run(&["report", file.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_refused(&r, &file, &["'measurements.series[0].phases.latency'"]);
    // Each within limits, but 2,000 of them at the highest bound add up to
    // ~600 MB decoded: refused by the document's histogram budget.
    let mut doc = base();
    let wide = hdr(1, throng_metrics::MAX_TRACKABLE_US, 3, throng_metrics::MAX_TRACKABLE_US);
    let phases = doc["measurements"]["phases"].as_object_mut().unwrap();
    let template = phases.values().next().unwrap().clone();
    for i in 0..2000 {
        let mut h = template.clone();
        h["hdr"] = wide.clone().into();
        phases.insert(format!("made_up_{i}"), h);
    }
    let file = write(dir.path(), "many.json", &doc);
    assert!(std::fs::metadata(&file).unwrap().len() < 2_000_000);
    let r = run(&["report", file.to_str().unwrap()]);
    assert_refused(&r, &file, &["256 MiB"]);
}

#[test]
fn a_zlib_bomb_is_refused_after_a_megabyte() {
    use std::io::Write as _;
    // A valid V2 header saying 256 MiB of counts follow, and then 256 MiB of
    // zeros: ~256 KB compressed, 2.1 GB before the cap.
    let mut raw = Vec::new();
    raw.extend(0x1c84_9313u32.to_be_bytes());
    raw.extend((256u32 << 20).to_be_bytes());
    raw.extend(0u32.to_be_bytes());
    raw.extend(3u32.to_be_bytes());
    raw.extend(1u64.to_be_bytes());
    raw.extend(2048u64.to_be_bytes());
    raw.extend(1f64.to_be_bytes());
    let mut z = flate2_encoder();
    z.write_all(&raw).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..256 {
        z.write_all(&zeros).unwrap();
    }
    let body = z.finish().unwrap();
    let mut bytes = 0x1c84_9314u32.to_be_bytes().to_vec();
    bytes.extend((body.len() as u32).to_be_bytes());
    bytes.extend(body);
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut doc = base();
    doc["measurements"]["phases"]["latency"]["hdr"] = text.into();
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bomb.json", &doc);
    let r = run(&["report", file.to_str().unwrap()]);
    assert_refused(&r, &file, &["'measurements.phases.latency.hdr'", "inflates past"]);
}

fn flate2_encoder() -> flate2::write::ZlibEncoder<Vec<u8>> {
    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast())
}

#[test]
fn merge_refuses_far_apart_starts_overflow_and_unbalanced_books() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &base());
    let out = dir.path().join("merged.json");
    let merge = |files: &[&Path], extra: &[&str]| {
        let mut args = vec!["merge".to_string()];
        args.extend(files.iter().map(|f| f.to_str().unwrap().to_string()));
        args.extend(["-o".to_string(), out.to_str().unwrap().to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    };
    // Started 31 years later: the merged file would span 11,574 days (and
    // once took 14 TB to report).
    let mut doc = base();
    let start = doc["started_at_unix_ms"].as_u64().unwrap();
    doc["started_at_unix_ms"] = (start + 1_000_000_000_000).into();
    let far = write(dir.path(), "far.json", &doc);
    let r = merge(&[&a, &far], &[]);
    assert_refused(&r, &far, &["span", "366 days"]);
    assert!(!out.exists(), "nothing written");

    // Books that do not balance, named by file.
    let mut doc = base();
    doc["measurements"]["requests"]["attempted"] = 301.into();
    let unbalanced = write(dir.path(), "unbalanced.json", &doc);
    let r = merge(&[&a, &unbalanced], &[]);
    assert_refused(&r, &unbalanced, &["books", "301 attempted but 300 ended"]);
    // A second's classes that do not add up to its failures.
    let mut doc = base();
    doc["measurements"]["series"][0]["errors"] = 3.into();
    doc["measurements"]["series"][0]["error_classes"] = serde_json::json!({"reset": 2});
    let classes = write(dir.path(), "classes.json", &doc);
    let r = merge(&[&a, &classes], &[]);
    assert_refused(&r, &classes, &["second 0", "3 request failures"]);

    // Counts that overflow when added: each file balances on its own.
    let mut doc = base();
    let big = u64::MAX - 100;
    doc["measurements"]["requests"] = serde_json::json!({"attempted": big, "ok": big, "errors": {}});
    let huge = write(dir.path(), "huge.json", &doc);
    let r = merge(&[&huge, &huge], &[]);
    // A counter overflowed, not a histogram: the message says which.
    assert_refused(&r, &huge, &["2^64", "'requests.attempted'"]);
    assert!(!r.stderr.contains("histogram"), "{}", r.stderr);
    // Sums inside one file that pass 2^64 are refused when it is read.
    let mut doc = base();
    doc["measurements"]["requests"]["errors"] = serde_json::json!({"reset": u64::MAX, "eof": 5});
    let inside = write(dir.path(), "inside.json", &doc);
    let r = run(&["report", inside.to_str().unwrap()]);
    assert_refused(&r, &inside, &["'measurements.requests'", "2^64"]);
}

#[test]
fn merge_refuses_mixed_plans_unless_allowed_and_then_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &base());
    let out = dir.path().join("merged.json");
    let mut doc = base();
    let url = doc["plan"]["target"]["url"]
        .as_str()
        .unwrap()
        .replace("http://", "https://");
    doc["plan"]["target"]["url"] = url.into();
    let https = write(dir.path(), "https.json", &doc);
    let r = run(&[
        "merge",
        a.to_str().unwrap(),
        https.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_refused(
        &r,
        &https,
        &["a.json", "different plans", "target http://", "--allow-mixed"],
    );
    assert!(!out.exists());
    let r = run(&[
        "merge",
        a.to_str().unwrap(),
        https.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--allow-mixed",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let merged = throng_result::load_runs(&out).unwrap().remove(0);
    assert_eq!(merged.measurements.requests.attempted, 600);
    let note = merged
        .notes
        .iter()
        .find(|n| n.starts_with("MIXED PLANS"))
        .expect("a note says the plans differed");
    assert!(note.contains("https.json") && note.contains("target"), "{note}");
    let report = run(&["report", out.to_str().unwrap()]);
    assert!(report.stdout.contains("MIXED PLANS"), "{}", report.stdout);

    // Closed loop and open loop: the same target, a different shape.
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let closed = common::http(&[&url, "-n", "50", "-c", "2"]);
    let open = common::http(&[&url, "-r", "200", "-n", "50"]);
    let (c, o) = (closed.json.to_str().unwrap(), open.json.to_str().unwrap());
    let r = run(&["merge", c, o, "-o", out.to_str().unwrap()]);
    assert_refused(&r, &open.json, &["closed loop vs open loop"]);
    let r = run(&["merge", c, o, "-o", out.to_str().unwrap(), "--allow-mixed"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let merged = throng_result::load_runs(&out).unwrap().remove(0);
    assert_eq!(merged.measurements.requests.attempted, 100);
    assert!(
        merged.notes.iter().any(|n| n.contains("closed loop vs open loop")),
        "{:?}",
        merged.notes
    );

    // A storm and an HTTP run count different things: refused even when
    // mixing is allowed.
    let storm = dir.path().join("storm.json");
    let s = run(&[
        "storm",
        &format!("tcp://{}", server.addr()),
        "--count",
        "10",
        "--json",
        storm.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    let r = run(&[
        "merge",
        c,
        storm.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--allow-mixed",
    ]);
    assert_refused(&r, &storm, &["different commands", "command http vs storm"]);
}

#[test]
fn a_70000_character_label_is_clipped_in_every_compare_view() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &base());
    let b = write(dir.path(), "b.json", &base());
    let long = "L".repeat(70_000);
    let label_a = format!("A={long}");
    let html = dir.path().join("c.html");
    for format in ["text", "markdown", "json", "ab", "httperf"] {
        let r = run(&[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--label",
            &label_a,
            "--label",
            "B=short",
            "--format",
            format,
        ]);
        assert_eq!(r.code, 0, "{format}: {}", r.stderr);
        if format != "json" {
            assert!(
                r.stdout.contains("LLLL…"),
                "{format} clips the label: {}",
                &r.stdout[..200]
            );
            assert!(!r.stdout.contains(&long[..1000]), "{format} shows it whole");
        }
    }
    let r = run(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--label",
        &label_a,
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("LLLL…") && !page.contains(&long[..1000]));
}

#[test]
fn a_70000_character_step_and_check_name_are_clipped_in_text_html_and_junit() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let step = "s".repeat(70_000);
    let check = "c".repeat(70_000);
    // A YAML key past 1024 characters must be written explicitly (`? KEY`).
    let yaml = format!(
        "target: http://{}\nscenarios:\n  one:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    \
         flow:\n      - request:\n          name: {step}\n          path: /\n          check:\n            ? {check}\n            : {{ status: [200] }}\n\
         thresholds:\n  response:\n    - max < 60s\n",
        server.addr()
    );
    let file = dir.path().join("long.yaml");
    std::fs::write(&file, yaml).unwrap();
    let json = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let junit = dir.path().join("j.xml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throng"));
    cmd.arg("run")
        .arg(&file)
        .args(["--json", json.to_str().unwrap(), "--html", html.to_str().unwrap()])
        .args(["--junit", junit.to_str().unwrap()]);
    let o = common::output(&mut cmd);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The text report: the names cut to 60 characters, the run's figures there.
    assert!(stdout.contains(&format!("step:{}…", &step[..59])), "{stdout}");
    assert!(stdout.contains(&format!("{}…", &check[..59])), "{stdout}");
    assert!(!stdout.contains(&step[..100]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("{}…", &step[..59])) && !page.contains(&step[..100]));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(roxmltree::Document::parse(&xml).is_ok());
    // The result keeps the whole names (it is data), and re-reports alike.
    let r = run(&["report", json.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(&format!("step:{}…", &step[..59])));
    let r = run(&[
        "compare",
        json.to_str().unwrap(),
        json.to_str().unwrap(),
        "--format",
        "markdown",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}
