//! `setup:` and `teardown:` flows, run once per run: nginx's own access log
//! counts them and shows what every load request carried.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::exit_codes::interrupt;
use common::{Nginx, access_log, assert_books_balance, throng};

/// nginx logging each request's method, path and X-Token header: `/login`
/// answers a token as JSON, `/bad` 500, anything else 200.
struct Server {
    nginx: Nginx,
    log: std::path::PathBuf,
    _logs: tempfile::TempDir,
}

impl std::ops::Deref for Server {
    type Target = Nginx;
    fn deref(&self) -> &Nginx {
        &self.nginx
    }
}

fn server() -> Server {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = Nginx::start_listen_http(
        "log_format once '$request_method $uri tok=$http_x_token';",
        "",
        &format!("access_log {} once;", log.display()),
        "location = /login { default_type application/json; return 200 '{\"token\":\"tok-4711\"}'; }\n\
         location = /bad { return 500; }\n\
         location / { return 200 'ok'; }",
    );
    Server {
        nginx,
        log,
        _logs: logs,
    }
}

fn log(n: &Server) -> Vec<String> {
    access_log(&n.log)
}

fn count(lines: &[String], prefix: &str) -> usize {
    lines.iter().filter(|l| l.starts_with(prefix)).count()
}

/// A file: setup logs in at `LOGIN`, teardown deletes the tenant, the
/// load (`LOAD`: executor fields) sends the token on every request.
fn file(n: &Nginx, login: &str, load: &str, extra: &str) -> String {
    format!(
        r#"
target: {}
setup:
  - request:
      name: login
      method: POST
      path: {login}
      capture:
        token: {{ json: /token }}
teardown:
  - request:
      name: cleanup
      method: DELETE
      path: /tenant
      headers: {{ X-Token: "{{{{setup.token}}}}" }}
scenarios:
  load:
{load}
    flow:
      - request:
          name: item
          path: /item
          headers: {{ X-Token: "{{{{setup.token}}}}" }}
{extra}
"#,
        n.url("")
    )
}

const TEN_VUS: &str = "    executor: per-vu-iterations\n    vus: 10\n    iterations: 3";

fn tag(r: &throng_result::RunResult, key: &str) -> u64 {
    r.measurements
        .scenario
        .as_ref()
        .unwrap()
        .tags
        .get(key)
        .map_or(0, |t| t.requests)
}

#[test]
fn setup_runs_once_and_every_vu_sends_its_capture() {
    let n = server();
    let run = common::scenario(&file(&n, "/login", TEN_VUS, ""));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = log(&n);
    assert_eq!(count(&lines, "POST /login"), 1, "{lines:?}");
    assert_eq!(count(&lines, "GET /item tok=tok-4711"), 30, "{lines:?}");
    assert_eq!(count(&lines, "GET /item"), 30, "{lines:?}");
    assert_eq!(count(&lines, "DELETE /tenant tok=tok-4711"), 1, "{lines:?}");
    // The setup first, the teardown after every load request.
    assert!(lines.first().unwrap().starts_with("POST /login"), "{lines:?}");
    assert!(lines.last().unwrap().starts_with("DELETE /tenant"), "{lines:?}");
    let r = run.result();
    assert_books_balance(r);
    // Their own tags; not in the load's figures.
    assert_eq!(tag(r, "scenario:setup"), 1);
    assert_eq!(tag(r, "scenario:teardown"), 1);
    assert_eq!(tag(r, ""), 30);
    assert_eq!(r.measurements.requests.attempted, 30);
    assert_eq!(common::schema_violations(&run.json), Vec::<String>::new());
    // The captured value is the server's secret, never the result's.
    let json = std::fs::read_to_string(&run.json).unwrap();
    assert!(!json.contains("tok-4711"));
    assert!(!run.stdout().contains("tok-4711") && !run.stderr().contains("tok-4711"));
}

#[test]
fn a_failed_setup_stops_the_run_before_any_load() {
    let n = server();
    let run = common::scenario(&file(&n, "/bad", TEN_VUS, ""));
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let err = run.stderr();
    assert!(err.contains("setup: flow of"), "{err}");
    assert!(err.contains("so the load did not start"), "{err}");
    assert!(err.contains("step 'login' failed"), "{err}");
    assert!(err.contains("captured nothing for token"), "{err}");
    let lines = log(&n);
    assert_eq!(count(&lines, "POST /bad"), 1, "{lines:?}");
    assert_eq!(lines.len(), 1, "no load, no teardown: {lines:?}");
}

#[test]
fn a_setup_capture_that_finds_nothing_stops_the_run() {
    let n = server();
    // /item answers 200 with a body that is not JSON.
    let run = common::scenario(&file(&n, "/item", TEN_VUS, ""));
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert!(run.stderr().contains("captured nothing for token"), "{}", run.stderr());
    let lines = log(&n);
    assert_eq!(count(&lines, "POST /item"), 1, "setup's: {lines:?}");
    assert_eq!(lines.len(), 1, "no load, no teardown: {lines:?}");
}

#[test]
fn teardown_runs_once_after_an_abort_on_fail() {
    let n = server();
    let load = "    executor: constant-vus\n    vus: 2\n    duration: 60s";
    // Every load request fails (the expect is 404): the threshold stops
    // the run early; teardown runs after it all the same.
    let extra =
        "          expect: [404]\nthresholds:\n  errors:\n    - threshold: rate < 0.5\n      abort_on_fail: true";
    let run = common::scenario(&file(&n, "/login", load, extra));
    assert_eq!(run.code(), 99, "{}", run.stderr());
    let lines = log(&n);
    assert_eq!(count(&lines, "POST /login"), 1, "{lines:?}");
    assert_eq!(count(&lines, "DELETE /tenant tok=tok-4711"), 1, "{lines:?}");
    assert!(lines.last().unwrap().starts_with("DELETE /tenant"), "{lines:?}");
    assert_eq!(tag(run.result(), "scenario:teardown"), 1);
}

#[test]
fn teardown_runs_once_after_ctrl_c() {
    let n = server();
    let load = "    executor: constant-vus\n    vus: 2\n    duration: 60s";
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenario.yaml");
    std::fs::write(&f, file(&n, "/login", load, "      - think: 10ms")).unwrap();
    let out = interrupt(
        throng().arg("run").arg(&f).args(["--threads", "1", "--quiet"]),
        Duration::from_millis(800),
    );
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = log(&n);
    assert_eq!(count(&lines, "POST /login"), 1, "{lines:?}");
    assert!(count(&lines, "GET /item") > 0, "{lines:?}");
    assert_eq!(count(&lines, "DELETE /tenant tok=tok-4711"), 1, "{lines:?}");
    assert!(lines.last().unwrap().starts_with("DELETE /tenant"), "{lines:?}");
}

#[test]
fn thresholds_name_the_setup_tag() {
    let n = server();
    let held = file(
        &n,
        "/login",
        TEN_VUS,
        "thresholds:\n  requests{scenario:setup}: [count == 1]",
    );
    let run = common::scenario(&held);
    assert_eq!(run.code(), 0, "{}", run.stdout());
    let failed = file(
        &n,
        "/login",
        TEN_VUS,
        "thresholds:\n  requests{scenario:setup}: [count > 1]",
    );
    let run = common::scenario(&failed);
    assert_eq!(run.code(), 99, "{}", run.stdout());
    assert!(!run.result().thresholds[0].passed);
}

#[test]
fn each_segment_runs_setup_once_and_merge_adds_them() {
    let n = server();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenario.yaml");
    std::fs::write(&f, file(&n, "/login", TEN_VUS, "")).unwrap();
    let mut parts = Vec::new();
    for seg in ["0:1/2", "1/2:1"] {
        let json = dir.path().join(format!("part-{}.json", parts.len()));
        let out = common::output(
            throng()
                .arg("run")
                .arg(&f)
                .args(["--threads", "1", "--quiet", "--segment", seg, "--json"])
                .arg(&json),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        parts.push(json);
    }
    assert_eq!(count(&log(&n), "POST /login"), 2, "one per segment");
    let merged = dir.path().join("merged.json");
    let out = common::output(throng().arg("merge").args(&parts).arg("-o").arg(&merged));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = common::read_result(Path::new(&merged)).unwrap();
    assert_eq!(tag(&r, "scenario:setup"), 2);
    assert_eq!(tag(&r, "scenario:teardown"), 2);
    assert_eq!(tag(&r, ""), 30);
}

/// The ```yaml block of docs/guide/src/scenarios.md whose first line
/// contains `first`.
fn guide_block(first: &str) -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"))
        .unwrap();
    doc.split("```yaml\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.lines().next().is_some_and(|l| l.contains(first)))
        .unwrap_or_else(|| panic!("no ```yaml block starting with '{first}' in the guide"))
        .to_string()
}

#[test]
fn the_guides_setup_example_runs_against_the_lab() {
    let lab = common::auth_lab();
    let yaml = guide_block("# once.yaml").replace("http://127.0.0.1:8080", &format!("http://{}", lab.addr()));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("once.yaml");
    std::fs::write(&f, yaml).unwrap();
    let run = common::with_json(
        throng()
            .arg("run")
            .arg(&f)
            .args(["--threads", "1", "--quiet", "--scale", "0.05"]),
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(tag(r, "scenario:setup"), 3);
    assert_eq!(tag(r, "scenario:teardown"), 1);
    let s = r.measurements.scenario.as_ref().unwrap();
    let me = &s.checks["signed in"];
    assert!(me.passes > 0 && me.fails == 0, "{me:?}");
    // Every load request was a `me` with the setup's token, answered 200.
    assert_eq!(tag(r, "step:me"), tag(r, ""));
    assert_eq!(s.tags[""].failed, 0);
}

/// A file with custom metrics: each of 4 VUs × 25 iterations asks for
/// `/item`, adds 2 to a counter, its iteration number (0–24) to a trend,
/// true to a rate and its VU to a gauge.
fn metrics_file(n: &Server, thresholds: &str) -> String {
    format!(
        r#"
target: {}
metrics:
  orders: counter
  basket: trend
  paid: rate
  queue: gauge
scenarios:
  shop:
    executor: per-vu-iterations
    vus: 4
    iterations: 25
    flow:
      - request:
          name: item
          path: /item
      - add: {{ metric: orders, value: 2, tags: {{ shop: books }} }}
      - add: {{ metric: basket, value: "{{{{iter}}}}" }}
      - add: {{ metric: paid, value: true }}
      - add: {{ metric: queue, value: "{{{{vu}}}}" }}
{thresholds}
"#,
        n.url("")
    )
}

fn custom(r: &throng_result::RunResult, name: &str) -> throng_metrics::CustomStats {
    r.measurements.scenario.as_ref().unwrap().custom[name].clone()
}

#[test]
fn custom_metrics_count_exactly() {
    let n = server();
    let run = common::scenario(&metrics_file(&n, ""));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(count(&log(&n), "GET /item"), 100);
    let r = run.result();
    assert_books_balance(r);
    let orders = custom(r, "orders");
    assert_eq!((orders.count, orders.sum), (100, 200.0));
    assert_eq!(custom(r, "orders{shop:books}").sum, 200.0);
    // Each VU added 0..=24 once: 4 of each value.
    let basket = custom(r, "basket");
    assert_eq!(basket.values.count(), 100);
    assert_eq!(basket.values.quantile(0.5), 12);
    assert_eq!(basket.values.quantile(0.95), 23);
    assert_eq!(basket.values.max(), 24);
    assert_eq!(basket.values.min(), 0);
    let paid = custom(r, "paid");
    assert_eq!((paid.hits, paid.count), (100, 100));
    let queue = custom(r, "queue");
    assert_eq!((queue.min, queue.max, queue.count), (Some(1.0), Some(4.0), 100));
    assert_eq!(common::schema_violations(&run.json), Vec::<String>::new());
    // The text report has them.
    let out = run.stdout();
    assert!(out.contains("orders") && out.contains("sum 200"), "{out}");
    assert!(out.contains("med 12, p95 23"), "{out}");
}

#[test]
fn thresholds_on_custom_metrics_pass_and_fail() {
    let n = server();
    let held = "thresholds:\n  orders: [count == 200]\n  orders{shop:books}: [count == 200]\n  basket: [p(95) < 30]\n  paid: [rate > 0.9]\n  queue: [value < 5]";
    let run = common::scenario(&metrics_file(&n, held));
    assert_eq!(run.code(), 0, "{}", run.stdout());
    assert!(run.result().thresholds.iter().all(|v| v.passed));
    let failed = "thresholds:\n  orders: [count == 200]\n  basket: [max > 24]";
    let run = common::scenario(&metrics_file(&n, failed));
    assert_eq!(run.code(), 99, "{}", run.stdout());
    let v = &run.result().thresholds;
    assert!(v[0].passed && !v[1].passed, "{v:?}");
    assert_eq!(v[1].observed, Some(24.0));
    // An undeclared metric is an error at its line, before anything is sent.
    let unknown = "thresholds:\n  baskets: [max > 24]";
    let run = common::scenario(&metrics_file(&n, unknown));
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("scenario.yaml:"), "{}", run.stderr());
    assert!(run.stderr().contains("'baskets' is not a metric"), "{}", run.stderr());
    assert_eq!(count(&log(&n), "GET /item"), 200, "the refused file sent nothing");
}

#[test]
fn custom_metrics_of_two_segments_merge_exactly() {
    let n = server();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenario.yaml");
    std::fs::write(&f, metrics_file(&n, "")).unwrap();
    let mut parts = Vec::new();
    for seg in ["0:1/2", "1/2:1"] {
        let json = dir.path().join(format!("part-{}.json", parts.len()));
        let out = common::output(
            throng()
                .arg("run")
                .arg(&f)
                .args(["--threads", "1", "--quiet", "--segment", seg, "--json"])
                .arg(&json),
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        parts.push(json);
    }
    let halves: Vec<throng_result::RunResult> = parts.iter().map(|p| common::read_result(p).unwrap()).collect();
    assert_eq!(halves.iter().map(|r| custom(r, "orders").sum).sum::<f64>(), 200.0);
    let merged = dir.path().join("merged.json");
    let out = common::output(throng().arg("merge").args(&parts).arg("-o").arg(&merged));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = common::read_result(&merged).unwrap();
    let orders = custom(&r, "orders");
    assert_eq!((orders.count, orders.sum), (100, 200.0));
    assert_eq!(custom(&r, "orders{shop:books}").sum, 200.0);
    let basket = custom(&r, "basket");
    assert_eq!(basket.values.count(), 100);
    assert_eq!(basket.values.quantile(0.95), 23);
    let queue = custom(&r, "queue");
    assert_eq!((queue.min, queue.max, queue.count), (Some(1.0), Some(4.0), 100));
    let paid = custom(&r, "paid");
    assert_eq!((paid.hits, paid.count), (100, 100));
}

#[test]
fn the_guides_custom_metrics_example_runs_against_the_lab() {
    let lab = common::lab(None);
    let yaml = guide_block("# shop.yaml").replace("http://127.0.0.1:8080", &format!("http://{}", lab.addr()));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("shop.yaml");
    std::fs::write(&f, yaml).unwrap();
    let html = dir.path().join("shop.html");
    let run = common::with_json(
        throng()
            .arg("run")
            .arg(&f)
            .args(["--threads", "1", "--quiet", "--html"])
            .arg(&html),
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("Custom metrics") && page.contains("<td>pages</td><td>counter</td><td>100</td><td>sum 100</td>")
    );
    let r = run.result();
    assert_eq!(r.thresholds.len(), 4);
    assert!(r.thresholds.iter().all(|v| v.passed), "{:?}", r.thresholds);
    assert_eq!(custom(r, "pages").sum, 100.0);
    assert_eq!(custom(r, "depth").max, Some(24.0));
    assert_eq!(tag(r, "step:page"), 100);
}

#[test]
fn a_failed_teardown_is_reported_not_fatal() {
    let n = server();
    let yaml = file(&n, "/login", TEN_VUS, "").replace("path: /tenant", "path: /bad");
    let run = common::scenario(&yaml);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let notes = &run.result().notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("teardown failed") && n.contains("step 'cleanup' failed")),
        "{notes:?}"
    );
    assert!(run.stdout().contains("teardown failed"), "{}", run.stdout());
    let lines = log(&n);
    assert_eq!(count(&lines, "GET /item"), 30, "{lines:?}");
    assert_eq!(count(&lines, "DELETE /bad tok=tok-4711"), 1, "{lines:?}");
    assert_eq!(tag(run.result(), ""), 30);
}

/// `--csv-requests` holds the setup's row first and the teardown's last,
/// under one header, and nothing of them is left beside the file; a setup
/// that fails leaves its own row there, for the post-mortem.
#[test]
fn csv_requests_holds_the_setup_and_teardown_rows_in_order() {
    let n = server();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.yaml");
    let csv = dir.path().join("rows.csv");
    let rows = |login: &str| {
        std::fs::write(&scenario, file(&n, login, TEN_VUS, "")).unwrap();
        let out = common::output(
            throng()
                .arg("run")
                .arg(&scenario)
                .args(["--threads", "1", "--quiet", "--csv-requests"])
                .arg(&csv),
        );
        let text = std::fs::read_to_string(&csv).unwrap();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        (out.status.code(), lines)
    };
    let (code, lines) = rows("/login");
    assert_eq!(code, Some(0));
    let header = &lines[0];
    assert!(header.starts_with("start_us,"), "{header}");
    let col = header.split(',').position(|c| c == "step").unwrap();
    let steps: Vec<&str> = lines[1..].iter().map(|l| l.split(',').nth(col).unwrap()).collect();
    assert_eq!(steps.len(), 32, "{lines:?}");
    assert_eq!((steps[0], steps[31]), ("login", "cleanup"));
    assert_eq!(steps.iter().filter(|s| **s == "item").count(), 30);
    assert_eq!(lines.iter().filter(|l| l.starts_with("start_us,")).count(), 1);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "only the scenario and the rows: {left:?}");

    let (code, lines) = rows("/bad");
    assert_eq!(code, Some(1));
    assert_eq!(lines.len(), 2, "the header and the failed login: {lines:?}");
    assert!(lines[1].contains(",login,"), "{lines:?}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}
