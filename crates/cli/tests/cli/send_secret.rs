//! `storm --send-secret`: a line protocol's secret (redis `AUTH`) is sent
//! as given, by one process or by `--procs` children, and reaches no result
//! file, report, sweep record or Kubernetes manifest outside its Secret.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Child, Command, Stdio};

use common::{assert_books_balance, free_port, output, throng, wait_listening};
use throng_result::RunResult;

const PASSWORD: &str = "SECRET-REDIS-7";

/// A redis-server that wants `PASSWORD`, stopped on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Redis {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--requirepass", PASSWORD])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is not installed: run ./scripts/test.sh (Debian package redis-server)");
        wait_listening(([127, 0, 0, 1], port).into());
        Redis { child, port }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// AUTH, then a command only an authenticated client may run.
fn steps(auth: &str) -> Vec<String> {
    [
        "--send-secret",
        &format!("AUTH {auth}\\r\\n"),
        "--expect",
        "^\\+OK$",
        "--send",
        "DBSIZE\\r\\n",
        "--expect",
        "^:[0-9]+$",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn the_secret_authenticates_and_is_written_nowhere() {
    let redis = Redis::start();
    let target = format!("tcp://127.0.0.1:{}", redis.port);
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    // One process, then two children that get the plan on stdin.
    for (procs, json) in [("1", "one.json"), ("2", "two.json")] {
        let o = output(
            throng()
                .args(["storm", &target, "-n", "40", "--procs", procs])
                .args(steps(PASSWORD))
                .args(["--json", &p(json), "--html", &p(&format!("{json}.html"))])
                .args([
                    "--csv",
                    &p(&format!("{json}.csv")),
                    "--csv-requests",
                    &p(&format!("{json}.rows")),
                ]),
        );
        let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "--procs {procs}: {stderr}");
        let r = RunResult::from_reader(std::fs::File::open(dir.path().join(json)).unwrap()).unwrap();
        assert_books_balance(&r);
        let c = &r.measurements.connections;
        // Every connection authenticated: redis answers DBSIZE with a number.
        assert_eq!((c.attempted, c.ok), (40, 40), "--procs {procs}: {:?}", c.errors);
        assert_eq!(r.measurements.phases["handshake"].count(), 40);
        if procs == "2" {
            assert_eq!(r.parts.len(), 2, "ran as two processes");
        }
        let report = output(throng().args(["report", &p(json)]));
        let report = String::from_utf8_lossy(&report.stdout);
        crate::wire::assert_nowhere(dir.path(), &[&stdout, &stderr, &report], &[PASSWORD]);
        let plan = serde_json::to_string(&r.plan).unwrap();
        assert!(plan.contains(r#"{"send_secret":"<redacted>"}"#), "{plan}");
    }

    // The wrong secret: redis refuses it (so the right one was what let
    // the connections in), and the reply is counted, not the secret said.
    let o = output(
        throng()
            .args(["storm", &target, "-n", "5", "--json", &p("wrong.json"), "-q"])
            .args(steps("not-the-password")),
    );
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let r = RunResult::from_reader(std::fs::File::open(dir.path().join("wrong.json")).unwrap()).unwrap();
    assert_eq!(r.measurements.connections.error("protocol.unexpected_reply"), 5);
}

#[test]
fn k8s_manifests_and_sweeps_keep_the_secret_out() {
    let o = output(
        throng()
            .args([
                "k8s",
                "job",
                "--parallelism",
                "2",
                "--",
                "storm",
                "tcp://redis:6379",
                "-n",
                "10",
            ])
            .args(steps(PASSWORD)),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let yaml = String::from_utf8(o.stdout).unwrap();
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Secret", "Job"]);
    for x in [&docs[0], &docs[2]] {
        assert!(!serde_yaml_ng::to_string(x).unwrap().contains(PASSWORD), "{x:?}");
    }
    // The agents get the real text, from the Secret.
    assert!(docs[1]["stringData"]["args"].as_str().unwrap().contains(PASSWORD));
    assert!(!String::from_utf8_lossy(&o.stderr).contains(PASSWORD));

    // A sweep records its run line without the secret.
    let redacted = throng_plan::redact_command(&format!(
        "storm tcp://127.0.0.1:6379 -n {{{{n}}}} --send-secret 'AUTH {PASSWORD}\\r\\n' --expect '^\\+OK'"
    ));
    assert!(!redacted.contains(PASSWORD), "{redacted}");
}

#[test]
fn a_bad_escape_in_a_secret_is_refused_without_quoting_it() {
    let o = output(throng().args([
        "storm",
        "tcp://127.0.0.1:9",
        "-n",
        "1",
        "--send-secret",
        &format!("AUTH {PASSWORD}\\q"),
    ]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--send-secret") && !err.contains(PASSWORD), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
