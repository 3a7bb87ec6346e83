//! `--prometheus`: a real Prometheus (Debian's package) scrapes throng every
//! second while it runs; what Prometheus saw must equal the result file.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, lab, output, throng};
use throng_result::RunResult;

/// The prometheus binary (scripts/test.sh installs Debian's package).
pub(crate) fn prometheus_bin() -> PathBuf {
    for p in ["/usr/bin/prometheus", "/usr/local/bin/prometheus"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    PathBuf::from("prometheus")
}

/// A Prometheus server scraping one target every second, stopped (SIGTERM,
/// bounded wait) on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: throng\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new(prometheus_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus ({e}); scripts/test.sh installs Debian's package"));
        let p = Prometheus { child, addr, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(addr, "/-/ready").is_none_or(|(status, _)| status != 200) {
            assert!(Instant::now() < deadline, "prometheus not ready within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        // Prometheus hands new targets to its scraper a few seconds after it
        // is ready; wait for the first scrape attempt (its `up` series, 0
        // while nothing listens), so that the run is scraped from its start.
        while p.max(r#"up{job="throng"}"#).is_none() {
            assert!(
                Instant::now() < deadline,
                "prometheus did not try its target within 30 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// The largest value the series of `selector` had over the last 5
    /// minutes (None: no such series yet).
    fn max(&self, selector: &str) -> Option<f64> {
        let q = format!("max_over_time({selector}[5m])");
        let (status, body) = get(self.addr, &format!("/api/v1/query?query={}", encode(&q)))?;
        assert_eq!(status, 200, "{q}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let result = v["data"]["result"].as_array()?;
        assert!(result.len() <= 1, "{q} matched several series: {body}");
        result.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Polls until `selector`'s max equals `want` (Prometheus may still be
    /// writing its last scrape), at most 20 s; returns what it saw last.
    fn wait_for(&self, selector: &str, want: u64) -> Option<f64> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = self.max(selector);
            if seen == Some(want as f64) || Instant::now() > deadline {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Stops a Prometheus: SIGTERM (it shuts down cleanly), a kill if that
/// takes over 10 s.
pub(crate) fn stop(child: &mut std::process::Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Percent-encodes a query parameter.
pub(crate) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A plain HTTP/1.0 GET with 5 s timeouts: status and body, None when the
/// server cannot be reached.
pub(crate) fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

fn read_result(path: &Path) -> RunResult {
    RunResult::from_reader(std::fs::File::open(path).unwrap()).unwrap()
}

#[test]
fn prometheus_sees_exactly_the_requests_of_the_result_file() {
    let lab = lab(None);
    let exporter: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let prom = Prometheus::start(exporter);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("result.json");
    let out = output(
        throng()
            .args([
                "http",
                &format!("http://{}/", lab.addr()),
                "-c",
                "4",
                "-t",
                "2",
                "-d",
                "3s",
            ])
            .args([
                "--prometheus",
                &exporter.to_string(),
                "--prometheus-linger",
                "3s",
                "--quiet",
            ])
            .arg("--json")
            .arg(&json),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = read_result(&json);
    let m = &r.measurements;
    assert!(m.requests.ok > 0);

    let ok = prom.wait_for(r#"throng_requests_total{outcome="ok"}"#, m.requests.ok);
    assert_eq!(
        ok,
        Some(m.requests.ok as f64),
        "Prometheus saw {ok:?}, the result says {}",
        m.requests.ok
    );
    let c2 = m.status_classes()[1];
    assert_eq!(
        prom.wait_for(r#"throng_responses_total{class="2xx"}"#, c2),
        Some(c2 as f64)
    );
    let sent = m.bytes.sent;
    assert_eq!(prom.wait_for("throng_bytes_sent_total", sent), Some(sent as f64));
    let latency = m.phases["latency"].count();
    assert_eq!(
        prom.wait_for(r#"throng_phase_duration_seconds_count{phase="latency"}"#, latency),
        Some(latency as f64)
    );
    let inf = prom.max(r#"throng_phase_duration_seconds_bucket{phase="latency",le="+Inf"}"#);
    assert_eq!(inf, Some(latency as f64));
    // The run was seen while it lasted, not only at the end.
    assert_eq!(prom.max("throng_running"), Some(1.0));

    // Every query of the Grafana dashboard is PromQL this Prometheus accepts.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../dashboards/throng.json")).unwrap(),
    )
    .unwrap();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$instance", ".*");
            let (status, body) = get(prom.addr, &format!("/api/v1/query?query={}", encode(&e))).unwrap();
            assert_eq!(status, 200, "{e}: {body}");
        }
    }
}

const SCENARIO: &str = r#"
target: TARGET
metrics:
  orders: counter
  paid: rate
  depth: gauge
  size: trend
scenarios:
  browse:
    executor: constant-vus
    vus: 3
    duration: 3s
    flow:
      - request: { name: home, path: / }
      - request: { name: missing, path: /status/404, expect: [404] }
      - add: { metric: orders, value: 1.5, tags: { shop: books } }
      - add: { metric: orders, value: 1.5, tags: { shop: books } }
      - add: { metric: paid, value: "{{ iter % 2 == 0 }}" }
      - add: { metric: depth, value: "{{ iter }}" }
      - add: { metric: size, value: 7 }
      - think: 5ms
"#;

#[test]
fn a_scenario_run_is_labelled_by_scenario_and_step() {
    let lab = lab(None);
    let exporter: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let prom = Prometheus::start(exporter);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, SCENARIO.replace("TARGET", &format!("http://{}", lab.addr()))).unwrap();
    let json = dir.path().join("result.json");
    let out = output(
        throng()
            .arg("run")
            .arg(&file)
            .args([
                "--prometheus",
                &exporter.to_string(),
                "--prometheus-linger",
                "3s",
                "--quiet",
            ])
            .arg("--json")
            .arg(&json),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = read_result(&json);
    let s = r.measurements.scenario.as_ref().unwrap();
    for step in ["home", "missing"] {
        let t = &s.tags[&format!("step:{step}")];
        assert!(t.requests > 0);
        let ok = t.requests - t.failed;
        let sel = format!(r#"throng_step_requests_total{{scenario="browse",step="{step}",result="ok"}}"#);
        assert_eq!(prom.wait_for(&sel, ok), Some(ok as f64), "{sel}");
        let sel = format!(r#"throng_step_response_seconds_count{{scenario="browse",step="{step}"}}"#);
        let n = t.response.count();
        assert_eq!(prom.wait_for(&sel, n), Some(n as f64), "{sel}");
    }
    let ok = r.measurements.requests.ok;
    assert_eq!(
        prom.wait_for(r#"throng_requests_total{outcome="ok"}"#, ok),
        Some(ok as f64)
    );
    let it = s.iterations;
    assert_eq!(prom.wait_for("throng_iterations_total", it), Some(it as f64));
    assert_eq!(prom.max("throng_vus"), Some(3.0));
    // Custom metrics, under their names, exactly (the sum of 1.5s is whole:
    // two per iteration).
    let c = &s.custom;
    let orders = c["orders"].sum as u64;
    assert_eq!(orders, 3 * it);
    for (sel, want) in [
        (r#"throng_custom_total{metric="orders",tags=""}"#.to_string(), orders),
        (
            r#"throng_custom_total{metric="orders",tags="shop:books"}"#.to_string(),
            orders,
        ),
        (
            r#"throng_custom_rate_total{metric="paid",result="true"}"#.to_string(),
            c["paid"].hits,
        ),
        (
            r#"throng_custom_rate_total{metric="paid",result="false"}"#.to_string(),
            c["paid"].count - c["paid"].hits,
        ),
        (
            r#"throng_custom_gauge{metric="depth",stat="max"}"#.to_string(),
            c["depth"].max.unwrap() as u64,
        ),
        (r#"throng_custom_trend{metric="size",quantile="0.99"}"#.to_string(), 7),
        (r#"throng_custom_trend_values_total{metric="size"}"#.to_string(), it),
    ] {
        assert_eq!(prom.wait_for(&sel, want), Some(want as f64), "{sel}");
    }
}
