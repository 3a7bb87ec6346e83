//! `throng k8s run` on a real cluster: the single-node one that
//! `scripts/k8s-local.sh up` starts on this machine (ignored: it needs that
//! cluster; run with
//! `cargo test -p throng --test cli k8s_run:: -- --ignored --test-threads 1`).
//! The kubeconfig is `THRONG_K8S_KUBECONFIG`, or the script's
//! `/tmp/throng-k8s/admin.conf`. The target is nginx on 127.0.0.1: the
//! agents' pods use the node's network, so they reach it there.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throng_result::RunResult;

use crate::common::{Nginx, assert_books_balance, throng};

const LOCATIONS: &str = r#"
    location = / { return 200; }
    location = /stub { stub_status; }
"#;

fn kubeconfig() -> String {
    std::env::var("THRONG_K8S_KUBECONFIG").unwrap_or_else(|_| "/tmp/throng-k8s/admin.conf".into())
}

fn kubectl(args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .args(["--kubeconfig", &kubeconfig(), "--request-timeout=30s"])
        .args(args)
        .output()
        .unwrap()
}

/// nginx's count of requests so far (this one included).
fn stub_requests(nginx: &Nginx) -> u64 {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], nginx.port));
    let (status, body) = crate::prometheus::get(addr, "/stub").unwrap();
    assert_eq!(status, 200, "{body}");
    // "server accepts handled requests\n 5 5 9"
    let line = body
        .lines()
        .skip_while(|l| !l.contains("accepts handled requests"))
        .nth(1)
        .unwrap_or_else(|| panic!("no stub_status in: {body}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// The child's exit code, waiting at most `limit`.
fn wait_end(child: &mut std::process::Child, limit: Duration) -> i32 {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("still running after {} s", limit.as_secs());
}

/// After a run, nothing it made is left.
fn assert_cleaned_up(name: &str) {
    for what in [format!("job/{name}"), format!("secret/{name}-token")] {
        let out = kubectl(&["get", &what, "--ignore-not-found", "-o", "name"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "", "{what} is left");
    }
}

#[test]
#[ignore = "needs the cluster of scripts/k8s-local.sh up"]
fn four_agents_count_exactly_what_nginx_counted() {
    let nginx = Nginx::start(LOCATIONS);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("merged.json");
    let before = stub_requests(&nginx);
    let out = throng()
        .args([
            "k8s",
            "run",
            "--agents",
            "4",
            "--name",
            "throng-it-count",
            "--kubeconfig",
            &kubeconfig(),
        ])
        .arg("--json")
        .arg(&json)
        .args(["--quiet", "--", "http", &nginx.url("/"), "-n", "4000", "-c", "8"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let after = stub_requests(&nginx);
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 4, "{:?}", r.notes);
    assert_eq!(r.measurements.requests.ok, 4000);
    // nginx counted each of them, and nothing else (the two stub reads aside).
    assert_eq!(after - before - 1, 4000, "{stderr}");
    for i in 0..4 {
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains(&format!("segment {i}/4:")) || (i == 0 && n.contains("segment 0:"))),
            "{:?}",
            r.notes
        );
    }
    assert!(stderr.contains("deleted job/throng-it-count"), "{stderr}");
    assert_cleaned_up("throng-it-count");
}

#[test]
#[ignore = "needs the cluster of scripts/k8s-local.sh up"]
fn a_pod_killed_mid_run_is_a_named_missing_segment() {
    let nginx = Nginx::start(LOCATIONS);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("merged.json");
    let before = stub_requests(&nginx);
    let mut run = throng()
        .args([
            "k8s",
            "run",
            "--agents",
            "4",
            "--name",
            "throng-it-kill",
            "--kubeconfig",
            &kubeconfig(),
        ])
        .arg("--json")
        .arg(&json)
        .args([
            "--quiet",
            "--",
            "http",
            &nginx.url("/"),
            "-r",
            "400",
            "-d",
            "20s",
            "-c",
            "4",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once requests arrive, the run is under way: delete agent 1's pod at once.
    let deadline = Instant::now() + Duration::from_secs(180);
    while stub_requests(&nginx) < before + 400 {
        assert!(Instant::now() < deadline, "no requests arrived");
        std::thread::sleep(Duration::from_millis(200));
    }
    let pods = kubectl(&[
        "get",
        "pods",
        "-l",
        "job-name=throng-it-kill,batch.kubernetes.io/job-completion-index=1",
        "-o",
        "name",
    ]);
    let pod = String::from_utf8_lossy(&pods.stdout).trim().to_string();
    assert!(pod.starts_with("pod/"), "{pod:?}");
    let killed = kubectl(&["delete", &pod, "--grace-period=0", "--force", "--wait=false"]);
    assert!(killed.status.success(), "{}", String::from_utf8_lossy(&killed.stderr));
    let status = wait_end(&mut run, Duration::from_secs(180));
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    eprintln!("{stderr}");
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains(":7701: segment 1/4:2/4 is missing"), "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 3, "{:?}", r.notes);
    assert!(
        r.notes.iter().any(|n| n.contains(":7701: segment 1/4:2/4 MISSING")),
        "{:?}",
        r.notes
    );
    // The three whole segments: 3/4 of 400/s for 20 s, each sent or dropped.
    let m = &r.measurements;
    assert_eq!(m.requests.attempted + m.dropped, 6000, "{:?}", m.requests);
    // nginx also served what the killed agent sent before it died.
    let after = stub_requests(&nginx);
    assert!(
        after - before - 1 > m.requests.ok,
        "{} {}",
        after - before - 1,
        m.requests.ok
    );
    assert_cleaned_up("throng-it-kill");
}
