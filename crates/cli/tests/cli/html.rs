//! The HTML report, rendered by a real browser (Debian's chromium, headless).
//!
//! A short run against the lab server writes `--html`; chromium then
//! renders the file twice: `--dump-dom` (the DOM after parsing and layout)
//! and `--screenshot`. The test checks that:
//!
//! - every chart is in the rendered DOM as an `<svg class="chart"
//!   data-chart=…>` whose polylines carry as many points as the run's
//!   per-second series has seconds (`data-points` and the real `points`
//!   attribute agree), the spectrum has points, and the phase chart has a
//!   box per measured phase;
//! - text from the command line (URL, header value) is escaped, not markup;
//! - the screenshot is a real picture: a PNG of the window's size whose
//!   pixels are far from uniform;
//! - the page made no network request. How, robustly: the page carries a
//!   Content-Security-Policy (`default-src 'none'`), so a browser blocks
//!   *any* fetch it would make and logs the violation as a console message
//!   (chromium prints those on stderr with `--enable-logging=stderr`). The
//!   test asserts (1) chromium logged no violation for the report, (2) a
//!   control copy of the report with one `<img src="http://…">` injected
//!   does log one — so the detector is not blind — and (3) no element of
//!   the rendered DOM has an attribute that loads anything (`src`, `href`,
//!   `srcset`, `action`, `poster`, `data`, CSS `url(`), and there are no
//!   `<script>`, `<link>`, `<img>`, `<iframe>`, `<object>` or `<embed>`
//!   elements. (Watching a proxy instead does not work: chromium's own
//!   update and sign-in requests go through it whatever the flags.)
//!
//! It needs chromium, so it is `#[ignore]`d; `scripts/test.sh` installs
//! chromium and runs it (`cargo test -- --include-ignored` does too).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{http, lab};

/// The chromium binary (the test fails, saying how to install it, without).
fn chromium() -> PathBuf {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        });
    found.expect(
        "chromium is not installed: run ./scripts/test.sh (it installs Debian's chromium), or \
         `apt-get install chromium`",
    )
}

/// Runs headless chromium on `page` with `extra` flags (bounded by the
/// common run limit). `--no-sandbox` because tests run as root in
/// containers; `--disable-dev-shm-usage` because containers' /dev/shm is
/// small; a fresh profile so runs never share state.
fn render(browser: &Path, page: &Path, extra: &[String]) -> Output {
    let profile = tempfile::tempdir().unwrap();
    let out = common::output(
        Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-dev-shm-usage",
                "--disable-extensions",
                "--no-first-run",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", page.display())),
    );
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Console lines in which chromium reports a blocked (attempted) fetch.
fn csp_violations(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains("Content Security Policy") || l.contains("Refused to"))
        .map(str::to_string)
        .collect()
}

/// One chart in the DOM: its polylines' `data-points`, the number of
/// coordinate pairs in their `points`, and its box rows.
#[derive(Debug, Default)]
struct Chart {
    declared: Vec<usize>,
    drawn: Vec<usize>,
    ranges: usize,
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    tag[start..].split('"').next()
}

/// Every `<...>` tag of a serialized DOM (text never holds a raw `<`).
fn tags(dom: &str) -> impl Iterator<Item = &str> {
    dom.split('<').skip(1).map(|t| t.split('>').next().unwrap_or(""))
}

fn charts(dom: &str) -> BTreeMap<String, Chart> {
    let mut out = BTreeMap::new();
    for part in dom.split("<svg ").skip(1) {
        let open = part.split('>').next().unwrap();
        if attr(&format!(" {open}"), "class") != Some("chart") {
            continue;
        }
        let id = attr(&format!(" {open}"), "data-chart").unwrap().to_string();
        let body = part.split("</svg>").next().unwrap();
        let mut c = Chart::default();
        for tag in tags(body) {
            if tag.starts_with("polyline ") {
                c.declared.push(attr(tag, "data-points").unwrap().parse().unwrap());
                c.drawn.push(attr(tag, "points").unwrap().split_whitespace().count());
            }
            if tag.starts_with("g ") && attr(tag, "class") == Some("range") {
                c.ranges += 1;
            }
        }
        out.insert(id, c);
    }
    out
}

#[test]
#[ignore = "needs chromium (scripts/test.sh installs it and runs this test)"]
fn html_report_renders_in_chromium_with_charts_and_no_network() {
    let browser = chromium();
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let url = format!("http://{}/bytes/64?q=<b>&x=\"y\"", server.addr());
    let run = http(&[
        &url,
        "-c",
        "4",
        "-d",
        "3s",
        "-t",
        "1",
        "-H",
        "X-Note: <i>hi</i>",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let result = run.result();
    let seconds = result.measurements.series.len();
    assert!(seconds >= 3, "a 3 s run has at least 3 seconds of series");

    let dom_run = render(&browser, &page, &["--dump-dom".to_string()]);
    let dom = String::from_utf8_lossy(&dom_run.stdout).into_owned();
    assert!(dom.contains("<title>throng"), "the DOM was not dumped: {dom:.300}");

    // Charts, with data.
    let charts = charts(&dom);
    for id in ["throughput", "errors", "active", "latency", "spectrum", "phases"] {
        assert!(charts.contains_key(id), "no {id} chart; charts: {:?}", charts.keys());
    }
    for (id, c) in &charts {
        assert_eq!(c.declared, c.drawn, "{id}: data-points must count the points drawn");
    }
    for id in ["throughput", "errors", "active"] {
        let c = &charts[id];
        assert!(!c.drawn.is_empty(), "{id} has no line");
        assert!(
            c.drawn.iter().all(|&n| n == seconds),
            "{id}: {:?}, {seconds} seconds",
            c.drawn
        );
    }
    let with_latency = result
        .measurements
        .series
        .iter()
        .filter(|p| p.phase("latency").unwrap().count() > 0)
        .count();
    assert!(with_latency > 0);
    assert_eq!(
        charts["latency"].drawn, [with_latency; 4],
        "p50, p90, p99 and max per second"
    );
    assert_eq!(charts["spectrum"].drawn.len(), 1);
    assert!(charts["spectrum"].drawn[0] > 10, "{:?}", charts["spectrum"]);
    let phases = result.measurements.phases.values().filter(|h| !h.is_empty()).count();
    assert_eq!(charts["phases"].ranges, phases, "a box per measured phase");
    assert!(dom.contains("<table class=\"outcomes requests\">"));
    assert!(dom.contains("<table class=\"status\">"));

    // Text from the command line is text.
    assert!(
        dom.contains("X-Note: &lt;i&gt;hi&lt;/i&gt;"),
        "header value not shown escaped"
    );
    assert!(!dom.contains("<i>") && !dom.contains("<b>"), "user text became markup");

    // No fetch: none attempted (CSP logs every blocked one) ...
    assert_eq!(csp_violations(&dom_run.stderr), Vec::<String>::new());
    // ... nothing in the DOM that could load anything ...
    for tag in tags(&dom) {
        let name = tag.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        for banned in ["script", "link", "img", "iframe", "object", "embed", "image", "use"] {
            assert_ne!(name, banned, "<{tag}> in the report");
        }
        for a in ["src", "href", "xlink:href", "srcset", "action", "poster", "data"] {
            assert!(attr(tag, a).is_none(), "{a}= in <{tag}>");
        }
        assert!(!tag.contains("url("), "url( in <{tag}>");
    }
    assert!(!dom.contains("@import") && !dom.contains("url("));
    // ... and the detector sees a fetch when there is one.
    let control = dir.path().join("control.html");
    let html = std::fs::read_to_string(&page).unwrap();
    std::fs::write(
        &control,
        html.replacen("<body>", "<body><img src=\"http://127.0.0.1:9/probe.png\">", 1),
    )
    .unwrap();
    let control_run = render(&browser, &control, &["--dump-dom".to_string()]);
    let violations = csp_violations(&control_run.stderr);
    assert!(
        violations.iter().any(|l| l.contains("probe.png")),
        "the control page's fetch was not reported; chromium's stderr: {}",
        String::from_utf8_lossy(&control_run.stderr)
    );

    // A screenshot that shows something.
    let shot = dir.path().join("report.png");
    render(
        &browser,
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,4000".to_string(),
            "--hide-scrollbars".to_string(),
        ],
    );
    let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert!(bytes.len() > 20_000, "screenshot is only {} bytes", bytes.len());
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1280, 4000));
    let px = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut dark = 0usize;
    for p in pixels.chunks(px) {
        colours.insert(p[..3.min(px)].to_vec());
        if p[..3.min(px)].iter().all(|&c| c < 128) {
            dark += 1;
        }
    }
    assert!(colours.len() > 50, "only {} colours: a blank page?", colours.len());
    // Text and axes: at least 0.1% of the picture is dark ink.
    assert!(dark * 1000 > pixels.len() / px, "only {dark} dark pixels");
}

#[test]
fn report_writes_html_from_a_result_file_and_names_an_unwritable_path() {
    let server = lab(None);
    let run = http(&[&format!("http://{}/", server.addr()), "-n", "200", "-c", "2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("again.html");
    let out = common::output(common::throng().arg("report").arg(&run.json).arg("--html").arg(&page));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(charts(&html).len(), 6, "every chart of an http run");

    let bad = dir.path().join("missing-dir").join("r.html");
    let out = common::output(common::throng().arg("report").arg(&run.json).arg("--html").arg(&bad));
    // Checked before anything is rendered: a usage error.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(&bad.display().to_string()), "names the path: {err}");
}

#[test]
fn storm_and_scenario_runs_write_their_html_reports() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();

    let storm = dir.path().join("storm.html");
    let out = common::output(
        common::throng()
            .args(["storm", &format!("tcp://{}", server.addr()), "--count", "40", "--quiet"])
            .arg("--html")
            .arg(&storm),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&storm).unwrap();
    let c = charts(&html);
    assert!(c["throughput"].drawn.iter().all(|&n| n > 0), "{c:?}");
    assert!(html.contains("Connections established per second"));
    assert!(html.contains("<table class=\"outcomes connections\">"));

    let yaml = dir.path().join("s.yaml");
    std::fs::write(
        &yaml,
        format!(
            "target: http://{}\n\
             scenarios:\n\
             \x20 ramp:\n\
             \x20   executor: ramping-vus\n\
             \x20   stages:\n\
             \x20     - {{ duration: 1s, target: 3 }}\n\
             \x20     - {{ duration: 1s, target: 3 }}\n\
             \x20   flow:\n\
             \x20     - request:\n\
             \x20         name: \"home <1>\"\n\
             \x20         path: /\n\
             \x20         check:\n\
             \x20           \"is <ok>\": {{ status: [200] }}\n\
             \x20     - think: 20ms\n\
             thresholds:\n\
             \x20 errors: [rate < 0.5]\n",
            server.addr()
        ),
    )
    .unwrap();
    let run = dir.path().join("run.html");
    let out = common::output(
        common::throng()
            .arg("run")
            .arg(&yaml)
            .arg("--quiet")
            .arg("--html")
            .arg(&run),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&run).unwrap();
    let c = charts(&html);
    assert_eq!(c.len(), 6, "{:?}", c.keys());
    assert!(html.contains("step:home &lt;1&gt;"), "step table with the escaped name");
    assert!(html.contains("is &lt;ok&gt;"), "check table with the escaped name");
    assert!(html.contains("<table class=\"stages\">"));
    assert!(html.contains("<table class=\"thresholds\">"));
    assert!(html.contains("data-series=\"VUs\""), "VUs over time");
}

#[test]
#[ignore = "needs chromium (scripts/test.sh installs it and runs this test)"]
fn history_trend_page_renders_in_chromium_with_a_point_per_run() {
    let browser = chromium();
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history");
    let url = format!("http://{}/", server.addr());
    for i in 0..3 {
        let run = http(&[&url, "-c", "1", "-t", "1", "-n", "60"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let label = format!("<b>build {i}</b>");
        let o = common::output(
            Command::new(env!("CARGO_BIN_EXE_throng"))
                .args(["history", "add"])
                .arg(&run.json)
                .arg("--dir")
                .arg(&history)
                .args(["--label", &label]),
        );
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let page = dir.path().join("trend.html");
    let o = common::output(
        Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["history", "report", "--dir"])
            .arg(&history)
            .arg("--html")
            .arg(&page),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));

    let dom_run = render(&browser, &page, &["--dump-dom".to_string()]);
    let dom = String::from_utf8_lossy(&dom_run.stdout).into_owned();
    assert!(
        dom.contains("<title>throng history"),
        "the DOM was not dumped: {dom:.300}"
    );
    let charts = charts(&dom);
    let ids: Vec<&str> = charts.keys().map(String::as_str).collect();
    assert_eq!(ids, ["trend-errors", "trend-latency", "trend-throughput"]);
    assert_eq!(charts["trend-latency"].drawn, [3, 3], "p50 and p99, a point per run");
    assert_eq!(charts["trend-throughput"].drawn, [3]);
    assert_eq!(charts["trend-errors"].drawn, [3]);
    for (id, c) in &charts {
        assert_eq!(c.declared, c.drawn, "{id}: data-points must count the points drawn");
    }
    assert!(dom.contains("&lt;b&gt;build 2&lt;/b&gt;"), "labels shown as text");
    assert!(!dom.contains("<b>"), "a label became markup");
    assert_eq!(csp_violations(&dom_run.stderr), Vec::<String>::new());
}
