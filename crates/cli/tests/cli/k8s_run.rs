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
    // The agents served TLS only: the coordinator verified each.
    assert!(
        stderr.contains("4 agents over TLS (each verified as 'throng-agent')"),
        "{stderr}"
    );
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
    // Agent 0 speaks TLS only: a plain connection gets no challenge.
    let ip = kubectl(&[
        "get",
        "pods",
        "-l",
        "job-name=throng-it-kill,batch.kubernetes.io/job-completion-index=0",
        "-o",
        "jsonpath={.items[0].status.podIP}",
    ]);
    let ip = String::from_utf8_lossy(&ip.stdout).trim().to_string();
    let said = plain_hello(&format!("{ip}:7700"));
    assert!(
        said.first().is_none_or(|b| *b == 0x15) && !String::from_utf8_lossy(&said).contains("nonce"),
        "a plain connection was answered: {:?}",
        String::from_utf8_lossy(&said)
    );
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

/// What an agent at `addr` answers a plain-text hello with, to its close
/// (or 10 s): an agent speaking plain TCP sends its challenge, one speaking
/// TLS an alert (0x15) or nothing.
fn plain_hello(addr: &str) -> Vec<u8> {
    use std::io::{Read as _, Write as _};
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(b"hello, agent\r\n\r\n");
    let mut said = Vec::new();
    let _ = s.take(4096).read_to_end(&mut said);
    said
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

/// `--dry-run` prints the Secret and the Job: the agents' certificates, and
/// neither the token nor the agents' key; kubectl is never called.
#[test]
fn a_dry_run_shows_the_certificates_and_never_the_token_or_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = with_fake_kubectl(
        dir.path(),
        &[
            "k8s",
            "run",
            "--agents",
            "3",
            "--name",
            "throng-dry",
            "--dry-run",
            "--",
            "http",
            "http://127.0.0.1:9/",
            "-n",
            "10",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!dir.path().join("calls").exists(), "kubectl was called");
    assert!(stderr.contains("nothing was created"), "{stderr}");
    let docs: Vec<serde_json::Value> = stdout
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{stdout}");
    assert_eq!(docs[0]["kind"], "Secret");
    assert_eq!(docs[0]["metadata"]["name"], "throng-dry-token");
    let data = &docs[0]["stringData"];
    for key in ["tls.crt", "ca.crt"] {
        let pem = data[key].as_str().unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{key}: {pem}");
    }
    for key in ["tls.key", "token"] {
        assert!(data[key].as_str().unwrap().starts_with("<redacted"), "{key}: {stdout}");
    }
    assert!(!stdout.contains("PRIVATE KEY"), "{stdout}");
    assert_eq!(docs[1]["kind"], "Job");
    assert_eq!(docs[1]["spec"]["parallelism"], 3);
    let script = docs[1]["spec"]["template"]["spec"]["containers"][0]["command"][2]
        .as_str()
        .unwrap();
    assert!(
        script.contains("--tls-cert /token/tls.crt --tls-key /token/tls.key"),
        "{script}"
    );
}

#[test]
fn per_agent_without_a_push_or_a_bad_push_url_is_refused_before_the_cluster_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (&["--per-agent"], "--per-agent shows each agent in the pushes"),
        (
            &["--remote-write", "ftp://127.0.0.1/"],
            "--remote-write ftp://127.0.0.1/",
        ),
        (
            &[
                "--otlp",
                "http://127.0.0.1:9/",
                "--otlp-header",
                "Authorization Bearer s3cr3t-h",
            ],
            "--otlp-header (#1): no ':'",
        ),
    ];
    for (flags, said) in cases {
        let mut args = vec!["k8s", "run", "--agents", "2"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "http", "http://127.0.0.1:9/", "-n", "10"]);
        let out = with_fake_kubectl(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(!stderr.contains("s3cr3t-h"), "{stderr}");
    }
    assert!(!dir.path().join("calls").exists(), "kubectl was called");
}

/// A stand-in `kubectl` whose one pod runs on 127.0.0.1, where the test
/// starts the agent itself from the Secret that was applied.
fn loopback_kubectl(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {d}/calls\ncase \"$*\" in\n  *' apply '*) cat > {d}/applied.tmp && \
             mv {d}/applied.tmp {d}/applied.json ;;\n  *' get pods '*) printf '0\\tRunning\\t127.0.0.1\\tthrong-lo-0-abcde\\t\\n' \
             ;;\nesac\nexit 0\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A child process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The whole of `k8s run` but the cluster: the agent is started from the
/// applied Secret's files, exactly as the pod's script starts it (TLS,
/// --client-ca); the coordinator verifies it as 'throng-agent' at
/// 127.0.0.1, presents the run's client certificate, and pushes the merged
/// and the agent's own series (--remote-write, --per-agent).
#[test]
fn the_agent_serves_tls_from_the_secret_and_the_pushes_reach_the_receiver() {
    let lab = crate::common::lab(None);
    let prom = crate::remote_write::receiver();
    let dir = tempfile::tempdir().unwrap();
    let bin = loopback_kubectl(dir.path());
    let json = dir.path().join("merged.json");
    let port = crate::common::free_port();
    let url = format!("http://{}/api/v1/write", prom.addr);
    let auth = "Authorization: Bearer k8s-push-s3cr3t";
    let run = throng()
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()),
        )
        .args([
            "k8s",
            "run",
            "--agents",
            "1",
            "--name",
            "throng-lo",
            "--ready-timeout",
            "60s",
        ])
        .args(["--base-port", &port.to_string(), "--per-agent"])
        .args([
            "--remote-write",
            &url,
            "--remote-write-interval",
            "1s",
            "--remote-write-header",
            auth,
        ])
        .arg("--json")
        .arg(&json)
        .args([
            "--quiet",
            "--",
            "http",
            &format!("http://{}/", lab.addr()),
            "-n",
            "300",
            "-c",
            "2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut run = Killed(run);
    // The Secret, once applied whole.
    let applied = dir.path().join("applied.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !applied.exists() {
        assert!(Instant::now() < deadline, "nothing was applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    let applied: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&applied).unwrap()).unwrap();
    let data = &applied["items"][0]["stringData"];
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    for key in ["token", "tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(secret.join(key), data[key].as_str().unwrap()).unwrap();
    }
    let token = data["token"].as_str().unwrap().trim().to_string();
    let key = data["tls.key"].as_str().unwrap().to_string();
    assert!(key.contains("PRIVATE KEY"), "{key}");
    let agent_log = dir.path().join("agent.log");
    let _agent = Killed(
        throng()
            .args(["agent", "--listen", &format!("127.0.0.1:{port}"), "--runs", "1"])
            .arg("--token-file")
            .arg(secret.join("token"))
            .arg("--tls-cert")
            .arg(secret.join("tls.crt"))
            .arg("--tls-key")
            .arg(secret.join("tls.key"))
            .arg("--client-ca")
            .arg(secret.join("ca.crt"))
            .current_dir("/")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&agent_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let code = wait_end(&mut run.0, Duration::from_secs(120));
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let agent_said = std::fs::read_to_string(&agent_log).unwrap();
    assert_eq!(code, 0, "{stderr}\nagent: {agent_said}");
    assert!(
        stderr.contains("1 agents over TLS (each verified as 'throng-agent')"),
        "{stderr}"
    );
    assert!(
        agent_said.contains("TLS, coordinators with a certificate of --client-ca only"),
        "{agent_said}"
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 1, "{:?}", r.notes);
    assert_eq!(r.measurements.requests.ok, 300);
    let push = r.remote_write.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    crate::push_receiver::holds_the_counts(&prom, &r.measurements, r#"job="throng",run_id=~"[0-9a-f]+",agent="""#);
    let agent = format!(r#"throng_requests_total{{outcome="ok",agent="1 127.0.0.1:{port}"}}"#);
    assert_eq!(prom.wait_for(&agent, 300), Some(300.0));
    // Deleted after the run; no secret on stderr or in the result.
    assert!(stderr.contains("deleted secret/throng-lo-token"), "{stderr}");
    let text = std::fs::read_to_string(&json).unwrap();
    // The key's first line of base64 stands for all of it.
    let key_line = key.lines().nth(1).unwrap();
    for s in [token.as_str(), key_line, "k8s-push-s3cr3t"] {
        assert!(!stderr.contains(s) && !text.contains(s), "a secret leaked: {stderr}");
    }
}
