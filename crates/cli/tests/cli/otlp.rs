//! `--otlp`: a real Prometheus 3 takes the pushes on its OTLP receiver
//! (`--web.enable-otlp-receiver`, built from its Go module by
//! scripts/test.sh); what it holds must equal the result file. The
//! exponential histograms land as native histograms with the very buckets
//! remote write gives them. A receiver that is down or fails leaves the
//! run's result and exit code alone, and the failures are counted. A
//! header's value never shows.
#![allow(clippy::unwrap_used)]

use crate::common;
use crate::push_receiver::{self, Push, Receiver};

use std::path::PathBuf;

use common::{certs, free_port, lab, nginx_tls, output, p, throng};
use throng_result::RunResult;

/// What a header carries in these tests; it must show nowhere.
const SECRET: &str = "Bearer 0tlp-s3cr3t-4242";

/// The Prometheus with an OTLP receiver: `$THRONG_PROMETHEUS3`, or where
/// scripts/test.sh builds it. Missing, the tests fail (they never skip).
fn prometheus3_bin() -> PathBuf {
    let path = std::env::var_os("THRONG_PROMETHEUS3").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/throng-test/prometheus-v0.316.0/prometheus")
        },
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "no Prometheus 3 at {} (set THRONG_PROMETHEUS3, or run scripts/test.sh, which builds it)",
        path.display()
    );
    path
}

const PUSH: Push = Push {
    flag: "--otlp",
    field: "otlp",
    reported: "OTLP push to",
};

/// A Prometheus 3 that only receives (OTLP and remote write; no scrapes),
/// the resource attributes `run_id` and `agent` promoted to labels as the
/// guide says.
pub(crate) fn receiver() -> Receiver {
    Receiver::start(
        &prometheus3_bin(),
        "global:\n  evaluation_interval: 1s\notlp:\n  promote_resource_attributes: [run_id, agent]\n",
        &["--web.enable-otlp-receiver", "--web.enable-remote-write-receiver"],
    )
}

pub(crate) fn otlp_url(prom: &Receiver) -> String {
    format!("http://{}/api/v1/otlp/v1/metrics", prom.addr)
}

/// Runs `throng http` against `target` pushing over OTLP to `url` with a
/// secret header; see [`push_receiver::run`].
fn run(target: &str, url: &str, extra: &[&str]) -> (i32, String, String, RunResult) {
    push_receiver::run(&PUSH, SECRET, target, url, extra)
}

#[test]
fn prometheus_holds_exactly_the_counts_of_the_result_file() {
    let lab = lab(None);
    let prom = receiver();
    let (code, printed, text, r) = run(&format!("http://{}/", lab.addr()), &otlp_url(&prom), &["-d", "3s"]);
    assert_eq!(code, 0, "{printed}");
    let m = &r.measurements;
    assert!(m.requests.ok > 0);
    assert!(r.remote_write.is_none());
    let push = r.otlp.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    // Pushed while the run lasted (1 s interval over 3 s) and once at the end.
    assert!(push.pushes_sent >= 2 && push.samples_sent > 0, "{push:?}");
    assert!(printed.contains("OTLP push to http://127.0.0.1:"), "{printed}");
    assert!(!printed.contains(SECRET) && !text.contains(SECRET));

    // service.name is job; run_id promoted; service.instance.id is instance.
    let ids = r#"job="throng",run_id=~".+",instance=~".+""#;
    push_receiver::holds_the_counts(&prom, m, ids);
    assert_eq!(prom.wait_for(r#"throng_responses_total{class="5xx"}"#, 0), Some(0.0));
    // The names are remote write's: a monotonic sum's `_total` and the unit
    // `s`'s `seconds` are not added a second time.
    assert!(
        prom.query(r#"{__name__=~"throng_.*_total_total|throng_.*_seconds_seconds"}"#)
            .is_empty()
    );
    // The resource's other attributes are in target_info.
    let info = prom.query(r#"target_info{job="throng"}"#);
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0]["metric"]["run_id"], info[0]["metric"]["instance"], "{info:?}");

    // The median is the HDR one within a bucket of scale 8 (0.27 %) plus
    // HDR's own 0.1 %.
    let q = prom.query(r#"histogram_quantile(0.5, throng_phase_duration_seconds{phase="latency"})"#);
    let p50: f64 = q[0]["value"][1].as_str().unwrap().parse().unwrap();
    let hdr = m.phases["latency"].inner().value_at_quantile(0.5) as f64 / 1e6;
    assert!((p50 - hdr).abs() / hdr < 0.005, "native p50 {p50} s, HDR p50 {hdr} s");

    // Every query of the dashboard (one for both pushes) is PromQL this
    // Prometheus accepts, and the latency panels find the histograms.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../dashboards/throng-remote-write.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let run_ids: Vec<_> = prom
        .query(r#"throng_running{job="throng"}"#)
        .iter()
        .filter_map(|r| r["metric"]["run_id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(run_ids.len(), 1, "the dashboard's run_id variable finds the run");
    let mut latency_panels = 0;
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$run_id", &run_ids[0])
                .replace("$agent", ".*");
            let result = prom.query(&e);
            if e.contains("throng_phase_duration_seconds") {
                latency_panels += 1;
                let phases: Vec<_> = result.iter().filter_map(|r| r["metric"]["phase"].as_str()).collect();
                assert!(phases.contains(&"latency"), "{e}: {result:?}");
            }
        }
    }
    assert_eq!(latency_panels, 3);
}

/// Both pushes at once, into one Prometheus: each counted in its own
/// record, and the OTLP histogram has exactly the buckets (bounds and
/// counts) of the remote-write one: OTLP's bucket index is Prometheus' - 1.
#[test]
fn with_remote_write_at_once_the_histograms_are_the_same_buckets() {
    let lab = lab(None);
    let prom = receiver();
    let rw = format!("http://{}/api/v1/write", prom.addr);
    let (code, printed, _, r) = run(
        &format!("http://{}/", lab.addr()),
        &otlp_url(&prom),
        &["-n", "3000", "--remote-write", &rw],
    );
    assert_eq!(code, 0, "{printed}");
    for push in [r.remote_write.as_ref().unwrap(), r.otlp.as_ref().unwrap()] {
        assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
        assert!(push.pushes_sent >= 1, "{push:?}");
    }
    assert!(
        printed.contains("remote write to") && printed.contains("OTLP push to"),
        "{printed}"
    );
    let latency = r.measurements.phases["latency"].count();
    assert_eq!(latency, 3000);
    // Remote write's series have no instance; OTLP's do. One run_id for both.
    for which in [r#"instance="""#, r#"instance!="""#] {
        assert_eq!(
            prom.wait_for(
                &format!(r#"histogram_count(throng_phase_duration_seconds{{phase="latency",{which}}})"#),
                latency
            ),
            Some(latency as f64),
            "{which}"
        );
    }
    let series = prom.query(r#"throng_phase_duration_seconds{phase="latency"}"#);
    assert_eq!(series.len(), 2, "{series:?}");
    assert_eq!(series[0]["metric"]["run_id"], series[1]["metric"]["run_id"]);
    let buckets = |s: &serde_json::Value| s["histogram"][1]["buckets"].clone();
    assert!(buckets(&series[0]).as_array().is_some_and(|b| !b.is_empty()));
    assert_eq!(buckets(&series[0]), buckets(&series[1]));
}

#[test]
fn a_receiver_that_is_down_or_fails_leaves_the_run_and_its_exit_code_alone() {
    let target = lab(None);
    let receiver = lab(None);
    let closed = format!("http://127.0.0.1:{}/v1/metrics", free_port());
    let fails = format!("http://{}/status/500", receiver.addr());
    for url in [closed, fails] {
        let (code, printed, text, r) = run(
            &format!("http://{}/", target.addr()),
            &url,
            &["-n", "300", "--otlp-timeout", "1s"],
        );
        assert_eq!(code, 0, "{url}: {printed}");
        assert_eq!(r.measurements.requests.ok, 300, "{url}: {printed}");
        assert!(r.remote_write.is_none());
        common::assert_books_balance(&r);
        let push = r.otlp.as_ref().unwrap();
        assert_eq!(push.samples_sent, 0, "{url}: {push:?}");
        assert!(push.samples_failed > 0, "{url}: {push:?}");
        assert!(push.pushes_failed >= 1 && push.pushes_sent == 0, "{url}: {push:?}");
        let error = push.last_error.as_deref().unwrap_or_default();
        assert!(error.contains("after 3 tries"), "{url}: {error}");
        assert!(
            printed.contains("OTLP push to") && printed.contains("failed"),
            "{url}: {printed}"
        );
        assert!(!printed.contains(SECRET) && !text.contains(SECRET), "{url}");
    }
}

/// An https:// receiver (nginx terminating TLS in front of Prometheus):
/// with --otlp-cacert the pushes arrive; without it the certificate is
/// refused, counted, and the run is untouched.
#[test]
fn an_https_receiver_takes_the_pushes_when_its_ca_is_trusted() {
    let lab = lab(None);
    let prom = receiver();
    let (_dir, certs) = certs();
    let tls = nginx_tls(
        &certs,
        "ssl",
        false,
        "",
        &format!("location / {{ proxy_pass http://{}; }}", prom.addr),
    );
    let url = tls.https("localhost", "/api/v1/otlp/v1/metrics");
    let target = format!("http://{}/", lab.addr());
    let ca = p(&certs, "ca.pem");
    let (code, printed, _, r) = run(&target, &url, &["-n", "500", "--otlp-cacert", &ca]);
    assert_eq!(code, 0, "{printed}");
    let push = r.otlp.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    assert!(printed.contains("OTLP push to https://localhost:"), "{printed}");
    assert_eq!(
        prom.wait_for(r#"throng_requests_total{outcome="ok"}"#, 500),
        Some(500.0),
        "the pushes went through TLS to Prometheus"
    );

    let (code, printed, _, r) = run(&target, &url, &["-n", "200"]);
    assert_eq!(code, 0, "{printed}");
    assert_eq!(r.measurements.requests.ok, 200);
    let push = r.otlp.as_ref().unwrap();
    assert_eq!(push.pushes_sent, 0, "{push:?}");
    assert!(push.samples_failed > 0, "{push:?}");
    let error = push.last_error.as_deref().unwrap_or_default().to_ascii_lowercase();
    assert!(error.contains("certificate"), "{push:?}");
    assert!(!printed.contains(SECRET));
}

#[test]
fn usage_errors_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let https = "https://127.0.0.1:9/v1/metrics";
    for (args, want) in [
        (vec!["--otlp", "ftp://127.0.0.1:9/v1/metrics"], "--otlp ftp://"),
        (vec!["--otlp", https, "--otlp-cacert", missing], "--otlp-cacert"),
        (
            vec!["--otlp", https, "--otlp-cacert", "/dev/zero"],
            "--otlp-cacert /dev/zero",
        ),
        (
            vec!["--otlp", "http://127.0.0.1:9/v1/metrics", "--otlp-header", SECRET],
            "--otlp-header (#1)",
        ),
        (
            vec!["--otlp", "http://127.0.0.1:9/v1/metrics", "--otlp-interval", "10ms"],
            "--otlp-interval",
        ),
    ] {
        let out = output(throng().args(["http", "http://127.0.0.1:9/", "-n", "1"]).args(&args));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("s3cr3t"), "{args:?}: {err}");
    }
}

#[test]
fn a_storm_and_a_scenario_segment_push_under_their_attributes() {
    // The agent is a resource attribute, promoted to a label; the step a
    // data point attribute.
    let prom = receiver();
    push_receiver::storm_and_segment_push(&PUSH, &prom, &otlp_url(&prom));
}

#[test]
fn a_k8s_job_ships_the_otlp_header_in_its_secret() {
    push_receiver::k8s_job_keeps_the_header_in_its_secret(&PUSH, "http://collector:4318/v1/metrics", SECRET);
}
