//! What the push tests share (`remote_write::`, `otlp::`): a Prometheus that
//! only receives, a run that pushes with a secret header, and the checks
//! both kinds of push make the same way (a storm and a scenario segment
//! labelled as such, the header kept in the k8s Secret alone).
#![allow(clippy::unwrap_used)]

use crate::common;
use crate::prometheus::{encode, get, stop};

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, lab, output, throng};
use throng_metrics::Measurements;
use throng_result::RunResult;

/// One kind of push: its flags' common prefix (`--remote-write`,
/// `--otlp`), its record's field in the result, and what the text report
/// says of it.
pub(crate) struct Push {
    pub(crate) flag: &'static str,
    pub(crate) field: &'static str,
    pub(crate) reported: &'static str,
}

/// A Prometheus that only receives (no scrapes), with `config` as its
/// configuration file and `flags` on its command line; stopped on drop.
pub(crate) struct Receiver {
    child: Child,
    pub(crate) addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Receiver {
    pub(crate) fn start(bin: &Path, config: &str, flags: &[&str]) -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .args(flags)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e}); scripts/test.sh installs it", bin.display()));
        let r = Receiver { child, addr, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while get(addr, "/-/ready").is_none_or(|(status, _)| status != 200) {
            assert!(Instant::now() < deadline, "prometheus not ready within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    /// The series `query` returns now.
    pub(crate) fn query(&self, query: &str) -> Vec<serde_json::Value> {
        let (status, body) = get(self.addr, &format!("/api/v1/query?query={}", encode(query))).unwrap();
        assert_eq!(status, 200, "{query}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"].as_array().unwrap().clone()
    }

    /// The value of `query` (one series), polled until it equals `want` or
    /// 15 s passed; returns what it saw last.
    pub(crate) fn wait_for(&self, query: &str, want: u64) -> Option<f64> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let result = self.query(query);
            assert!(result.len() <= 1, "{query} matched several series: {result:?}");
            let seen = result
                .first()
                .and_then(|r| r["value"][1].as_str())
                .and_then(|s| s.parse::<f64>().ok());
            if seen == Some(want as f64) || Instant::now() > deadline {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Runs `throng http` against `target` pushing to `url` every second with
/// `secret` in a header; returns the exit code, stdout + stderr, the result
/// file's text and the result, which the schema must accept with the
/// push's record in it.
pub(crate) fn run(
    push: &Push,
    secret: &str,
    target: &str,
    url: &str,
    extra: &[&str],
) -> (i32, String, String, RunResult) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("result.json");
    let out = output(
        throng()
            .args(["http", target, "-c", "2", "-t", "1"])
            .args(extra)
            .args([push.flag, url, &format!("{}-interval", push.flag), "1s"])
            .args([&format!("{}-header", push.flag), &format!("Authorization: {secret}")])
            .arg("--json")
            .arg(&json),
    );
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = RunResult::from_reader(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {printed}"));
    assert_eq!(common::schema_violations(&json), Vec::<String>::new());
    assert!(
        text.contains(&format!("\"{}\"", push.field)),
        "no {} in {text}",
        push.field
    );
    (out.status.code().unwrap_or(-1), printed, text, r)
}

/// What `prom` holds of a run whose measurements are `m`, under the label
/// matchers `labels` (on every query): the latency histogram's count, the response
/// histogram's, the requests ok and the 2xx responses equal the result's.
pub(crate) fn holds_the_counts(prom: &Receiver, m: &Measurements, labels: &str) {
    let latency = m.phases["latency"].count();
    assert_eq!(
        prom.wait_for(
            &format!(r#"histogram_count(throng_phase_duration_seconds{{phase="latency",{labels}}})"#),
            latency
        ),
        Some(latency as f64),
        "the histogram's count is the result's"
    );
    let response = m.phases["response"].count();
    assert_eq!(
        prom.wait_for(
            &format!(r#"histogram_count(throng_phase_duration_seconds{{phase="response",{labels}}})"#),
            response
        ),
        Some(response as f64)
    );
    assert_eq!(
        prom.wait_for(
            &format!(r#"throng_requests_total{{outcome="ok",{labels}}}"#),
            m.requests.ok
        ),
        Some(m.requests.ok as f64)
    );
    let c2 = m.status_classes()[1];
    assert_eq!(
        prom.wait_for(&format!(r#"throng_responses_total{{class="2xx",{labels}}}"#), c2),
        Some(c2 as f64)
    );
}

/// A storm and a scenario run as segment 1/2:1 push to `url`: the storm's
/// connections, and the step's requests and response histogram under the
/// agent's and the step's labels, are what their results say.
pub(crate) fn storm_and_segment_push(push: &Push, prom: &Receiver, url: &str) {
    let lab = lab(None);
    let storm = common::storm(&[&format!("tcp://{}", lab.addr()), "-n", "150", push.flag, url]);
    assert_eq!(storm.code(), 0, "{}", storm.stderr());
    let conns = storm.result().measurements.connections.ok;
    assert_eq!(conns, 150);
    assert_eq!(
        prom.wait_for(r#"throng_connections_total{outcome="ok"}"#, conns),
        Some(conns as f64)
    );
    let record = serde_json::to_value(storm.result()).unwrap()[push.field]["samples_sent"].as_u64();
    assert!(
        record.is_some_and(|n| n > 0),
        "the storm's {} record: {record:?}",
        push.field
    );

    let yaml = format!(
        "target: http://{}\nmetrics:\n  orders: counter\n  size: trend\nscenarios:\n  browse:\n    executor: \
         constant-vus\n    vus: 2\n    duration: 2s\n    flow:\n      - request: {{ name: home, path: / }}\n      \
         - add: {{ metric: orders, value: 0.5 }}\n      - add: {{ metric: orders, value: 1.5 }}\n      \
         - add: {{ metric: size, value: 9 }}\n",
        lab.addr()
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, yaml).unwrap();
    let run = common::with_json(throng().arg("run").arg(&file).args([
        "--threads",
        "1",
        "--segment",
        "1/2:1",
        push.flag,
        url,
    ]));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let home = &run.result().measurements.scenario.as_ref().unwrap().tags["step:home"];
    assert!(home.requests > 0);
    assert_eq!(
        prom.wait_for(
            r#"throng_step_requests_total{agent="1/2:1",scenario="browse",step="home",result="ok"}"#,
            home.requests - home.failed
        ),
        Some((home.requests - home.failed) as f64)
    );
    assert_eq!(
        prom.wait_for(
            r#"histogram_count(throng_step_response_seconds{agent="1/2:1",step="home"})"#,
            home.response.count()
        ),
        Some(home.response.count() as f64)
    );
    // Custom metrics, under the same names as /metrics: a sum that is not
    // whole per addition arrives exactly.
    let s = run.result().measurements.scenario.clone().unwrap();
    let orders = s.custom["orders"].sum as u64;
    assert_eq!(orders, 2 * s.iterations);
    assert_eq!(
        prom.wait_for(r#"throng_custom_total{agent="1/2:1",metric="orders"}"#, orders),
        Some(orders as f64)
    );
    assert_eq!(
        prom.wait_for(r#"throng_custom_trend{agent="1/2:1",metric="size",quantile="1"}"#, 9),
        Some(9.0)
    );
    assert!(run.stdout().contains(push.reported), "{}", run.stdout());
}

/// `throng k8s job` with a push to `url` and `secret` in its header: the
/// secret is in the Secret manifest and nowhere else.
pub(crate) fn k8s_job_keeps_the_header_in_its_secret(push: &Push, url: &str, secret: &str) {
    let header = format!("{}-header", push.flag);
    let auth = format!("Authorization: {secret}");
    let out = output(throng().args([
        "k8s",
        "job",
        "--parallelism",
        "2",
        "--",
        "http",
        "http://svc:8080/",
        "-n",
        "10",
        push.flag,
        url,
        &header,
        &auth,
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    common::assert_secret_only_in_the_k8s_secret(&stdout, &stderr, secret);
}
