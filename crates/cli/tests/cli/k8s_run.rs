//! `throng k8s run`: with a stand-in kubectl (argument errors, what is
//! deleted after a failure), and on a real cluster: the single-node one that
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

/// A stand-in `kubectl` in a directory of its own: it logs each call's
/// arguments, keeps what `apply` reads, and lists agent 0's pod as failed.
fn fake_kubectl(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {d}/calls\ncase \"$*\" in\n  *' apply '*) cat > {d}/applied.json ;;\n  \
             *' get pods '*) printf '0\\tFailed\\t\\tthrong-fake-0-abcde\\tError\\n' ;;\nesac\nexit 0\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn with_fake_kubectl(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let bin = fake_kubectl(dir);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    throng().env("PATH", path).args(args).output().unwrap()
}

#[test]
fn argument_errors_are_usage_errors_before_the_cluster_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = ["--", "http", "http://127.0.0.1:9/", "-n", "10"];
    let cases: [(&[&str], &str); 5] = [
        (&["--agents", "0"], "--agents 0: give 1 to 1000 agents"),
        (&["--agents", "2", "--base-port", "80"], "--base-port 80"),
        (&["--agents", "2", "--name", "Bad_Name"], "--name 'Bad_Name'"),
        (
            &["--agents", "2", "--kubeconfig", "/nonexistent/config"],
            "--kubeconfig /nonexistent/config: no such file",
        ),
        (&["--agents", "2", "--", "http", "not a url"], "the command after --"),
    ];
    for (flags, said) in cases {
        let mut args = vec!["k8s", "run"];
        args.extend_from_slice(flags);
        if !flags.contains(&"--") {
            args.extend_from_slice(&cmd);
        }
        let out = with_fake_kubectl(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    assert!(!dir.path().join("calls").exists(), "kubectl was called");
}

#[test]
fn a_failed_start_deletes_the_job_and_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let out = with_fake_kubectl(
        dir.path(),
        &[
            "k8s",
            "run",
            "--agents",
            "2",
            "--name",
            "throng-fake",
            "--namespace",
            "load",
            "--",
            "http",
            "http://127.0.0.1:9/",
            "-n",
            "10",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("agent 0: its pod throng-fake-0-abcde ended (Failed, Error)"),
        "{stderr}"
    );
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert!(
        calls[0].ends_with("--namespace load --request-timeout=30s apply -f -"),
        "{calls:?}"
    );
    assert!(calls[1].contains(" get pods -l job-name=throng-fake "), "{calls:?}");
    assert!(
        calls[2].ends_with("delete job throng-fake --ignore-not-found --wait=false"),
        "{calls:?}"
    );
    assert!(
        calls[3].ends_with("delete secret throng-fake-token --ignore-not-found --wait=false"),
        "{calls:?}"
    );
    assert!(stderr.contains("deleted job/throng-fake") && stderr.contains("deleted secret/throng-fake-token"));
    // The token is in the applied Secret, and nowhere on stderr.
    let applied: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("applied.json")).unwrap()).unwrap();
    let token = applied["items"][0]["stringData"]["token"].as_str().unwrap().trim();
    assert_eq!(token.len(), 32, "{token}");
    assert!(!stderr.contains(token), "{stderr}");
    assert_eq!(applied["items"][1]["spec"]["parallelism"], 2);
}
