//! `--remote-write`: a real Prometheus (Debian's 2.42) takes the pushes on
//! its remote-write receiver, native histograms enabled; what it holds must
//! equal the result file. A receiver that refuses, fails or stalls leaves
//! the run's result and exit code alone, and the failures are counted. A
//! header's value never shows.
#![allow(clippy::unwrap_used)]

use crate::common;
use crate::prometheus::{encode, get, prometheus_bin};
use crate::push_receiver::{self, Push, Receiver};

use common::{certs, free_port, lab, nginx_tls, output, p, throng};
use throng_result::RunResult;

/// What a header carries in these tests; it must show nowhere.
const SECRET: &str = "Bearer s3cr3t-t0ken-4242";

const PUSH: Push = Push {
    flag: "--remote-write",
    field: "remote_write",
    reported: "remote write to",
};

/// Debian's Prometheus, receiving remote writes with native histograms.
pub(crate) fn receiver() -> Receiver {
    Receiver::start(
        &prometheus_bin(),
        "global:\n  evaluation_interval: 1s\n",
        &[
            "--web.enable-remote-write-receiver",
            "--enable-feature=native-histograms",
        ],
    )
}

/// Runs `throng http` against `target` pushing to `url` with a secret
/// header; see [`push_receiver::run`].
fn run(target: &str, url: &str, extra: &[&str]) -> (i32, String, String, RunResult) {
    push_receiver::run(&PUSH, SECRET, target, url, extra)
}

#[test]
fn prometheus_holds_exactly_the_counts_of_the_result_file() {
    let lab = lab(None);
    let prom = receiver();
    let url = format!("http://{}/api/v1/write", prom.addr);
    let (code, printed, text, r) = run(&format!("http://{}/", lab.addr()), &url, &["-d", "3s"]);
    assert_eq!(code, 0, "{printed}");
    let m = &r.measurements;
    assert!(m.requests.ok > 0);
    let push = r.remote_write.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    // Pushed while the run lasted (1 s interval over 3 s) and once at the end.
    assert!(push.pushes_sent >= 2 && push.samples_sent > 0, "{push:?}");
    assert!(printed.contains("remote write to http://127.0.0.1:"), "{printed}");

    let run_id = r#"job="throng",run_id=~".+""#;
    push_receiver::holds_the_counts(&prom, m, run_id);
    // The median from the native histogram is the HDR one within a bucket
    // of schema 8 (0.27 %) plus HDR's own 0.1 %.
    let (_, body) = get(
        prom.addr,
        &format!(
            "/api/v1/query?query={}",
            encode(r#"histogram_quantile(0.5, throng_phase_duration_seconds{phase="latency"})"#)
        ),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let p50: f64 = v["data"]["result"][0]["value"][1].as_str().unwrap().parse().unwrap();
    let hdr = m.phases["latency"].inner().value_at_quantile(0.5) as f64 / 1e6;
    assert!((p50 - hdr).abs() / hdr < 0.005, "native p50 {p50} s, HDR p50 {hdr} s");
    assert!(!printed.contains(SECRET) && !text.contains(SECRET));

    // Every query of the remote-write dashboard is PromQL this Prometheus
    // accepts, and the latency panels find the native histograms.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../dashboards/throng-remote-write.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut latency_panels = 0;
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$run_id", ".*")
                .replace("$agent", ".*");
            let (status, body) = get(prom.addr, &format!("/api/v1/query?query={}", encode(&e))).unwrap();
            assert_eq!(status, 200, "{e}: {body}");
            if e.contains("throng_phase_duration_seconds") {
                latency_panels += 1;
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                let phases: Vec<_> = v["data"]["result"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|r| r["metric"]["phase"].as_str())
                    .collect();
                assert!(phases.contains(&"latency"), "{e}: {body}");
            }
        }
    }
    assert_eq!(latency_panels, 3);
}

/// An https:// receiver (nginx terminating TLS in front of Prometheus):
/// with the CA given by --remote-write-cacert the pushes arrive and the
/// counts are the result's; without it the certificate is refused, the
/// failures are counted and the run is untouched.
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
    let url = tls.https("localhost", "/api/v1/write");
    let target = format!("http://{}/", lab.addr());
    let ca = p(&certs, "ca.pem");
    let (code, printed, _, r) = run(&target, &url, &["-n", "500", "--remote-write-cacert", &ca]);
    assert_eq!(code, 0, "{printed}");
    let push = r.remote_write.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    assert!(push.pushes_sent >= 1, "{push:?}");
    assert!(printed.contains("remote write to https://localhost:"), "{printed}");
    assert_eq!(
        prom.wait_for(r#"throng_requests_total{outcome="ok"}"#, 500),
        Some(500.0),
        "the pushes went through TLS to Prometheus"
    );

    // The system's CAs do not know this one: refused, counted, run untouched.
    let (code, printed, _, r) = run(&target, &url, &["-n", "200"]);
    assert_eq!(code, 0, "{printed}");
    assert_eq!(r.measurements.requests.ok, 200);
    let push = r.remote_write.as_ref().unwrap();
    assert_eq!(push.pushes_sent, 0, "{push:?}");
    assert!(push.samples_failed > 0, "{push:?}");
    let error = push.last_error.as_deref().unwrap_or_default().to_ascii_lowercase();
    assert!(error.contains("certificate"), "{push:?}");
    assert!(!printed.contains(SECRET));
}

#[test]
fn a_receiver_that_refuses_leaves_the_run_and_its_exit_code_alone() {
    let target = lab(None);
    let receiver = lab(None);
    let closed = format!("http://127.0.0.1:{}/api/v1/write", free_port());
    let fails = format!("http://{}/status/500", receiver.addr());
    let refuses = format!("http://{}/status/400", receiver.addr());
    let stalls = format!("http://{}/delay/60000", receiver.addr());
    for (url, tries) in [(closed, 3), (fails, 3), (refuses, 1), (stalls, 3)] {
        let (code, printed, text, r) = run(
            &format!("http://{}/", target.addr()),
            &url,
            &["-n", "300", "--remote-write-timeout", "1s"],
        );
        assert_eq!(code, 0, "{url}: {printed}");
        assert_eq!(r.measurements.requests.ok, 300, "{url}: {printed}");
        common::assert_books_balance(&r);
        let push = r.remote_write.as_ref().unwrap();
        assert_eq!(push.samples_sent, 0, "{url}: {push:?}");
        assert!(push.samples_failed > 0, "{url}: {push:?}");
        assert!(push.pushes_failed >= 1 && push.pushes_sent == 0, "{url}: {push:?}");
        let error = push.last_error.as_deref().unwrap_or_default();
        assert_eq!(error.contains("after 3 tries"), tries == 3, "{url}: {error}");
        assert!(printed.contains("failed"), "{url}: {printed}");
        assert!(!printed.contains(SECRET) && !text.contains(SECRET), "{url}");
    }
}

#[test]
fn a_bad_header_is_refused_without_showing_its_value() {
    let out = output(throng().args([
        "http",
        "http://127.0.0.1:9/",
        "-n",
        "1",
        "--remote-write",
        "http://127.0.0.1:9/api/v1/write",
        "--remote-write-header",
        SECRET,
    ]));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--remote-write-header (#1)"), "{err}");
    assert!(!err.contains("s3cr3t"), "{err}");
}

#[test]
fn a_storm_and_a_scenario_segment_push_under_their_labels() {
    let prom = receiver();
    push_receiver::storm_and_segment_push(&PUSH, &prom, &format!("http://{}/api/v1/write", prom.addr));
}

#[test]
fn a_k8s_job_ships_the_push_header_in_its_secret() {
    push_receiver::k8s_job_keeps_the_header_in_its_secret(&PUSH, "http://prometheus:9090/api/v1/write", SECRET);
}
