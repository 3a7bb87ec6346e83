//! The container image that needs no registry (docker/Containerfile.static,
//! built by scripts/build-image.sh): built with podman, then run as users
//! and Kubernetes run it — `--version`, a short `throng http` against the
//! lab server on loopback (`--network host`), and the agent entrypoint of a
//! `throng k8s job`, one container per index, whose two segments add up to
//! the whole run.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use throng_result::RunResult;

use crate::common;

use common::{assert_books_balance, lab, output, throng};

/// The tag the test builds (and removes at the end).
const TAG: &str = "localhost/throng-test:image";

/// `podman run` as it works on the development machines: crun cannot set
/// the rlimits there, runc can; limits given, as a pod's runtime would.
fn podman_run() -> Command {
    let mut c = Command::new("timeout");
    c.args([
        "180",
        "podman",
        "--runtime",
        "/usr/sbin/runc",
        "run",
        "--rm",
        "--ulimit",
        "nofile=20000:20000",
        "--ulimit",
        "nproc=4096:4096",
        "--network",
        "host",
    ]);
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
#[ignore = "builds a release binary for musl and a podman image (minutes); THRONG_TEST_STATIC=1 scripts/test.sh runs it where podman and runc are installed (as root)"]
fn container_image() {
    // Alone: the release build takes both cores for minutes.
    let _alone = common::heavy();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Not through `output`: the build takes longer than one run's limit; it has its own.
    let built = Command::new("timeout")
        .arg("3600")
        .arg("sh")
        .arg(root.join("scripts/build-image.sh"))
        .arg(TAG)
        .env("THRONG_ENGINE", "podman")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built));
    assert_eq!(String::from_utf8_lossy(&built.stdout).trim(), TAG);

    // Runs as the numeric non-root user Kubernetes' runAsNonRoot checks.
    let user = output(Command::new("podman").args(["image", "inspect", "--format", "{{.Config.User}}", TAG]));
    assert_eq!(
        String::from_utf8_lossy(&user.stdout).trim(),
        "10001:10001",
        "{}",
        text(&user)
    );

    let v = output(podman_run().arg(TAG).arg("--version"));
    assert!(v.status.success(), "{}", text(&v));
    let want = String::from_utf8_lossy(&output(throng().arg("--version")).stdout).to_string();
    assert_eq!(String::from_utf8_lossy(&v.stdout), want);

    // What the entrypoint needs from busybox, as that user.
    let sh = output(
        podman_run()
            .args(["--entrypoint", "/bin/sh", TAG, "-c"])
            .arg("id -u; echo a-b | sed s/-/+/; echo x | cat; ulimit -Hn"),
    );
    assert!(sh.status.success(), "{}", text(&sh));
    assert_eq!(String::from_utf8_lossy(&sh.stdout), "10001\na+b\nx\n20000\n");

    // A load from inside the container, to the lab on the host's loopback.
    let lab = lab(None);
    let url = format!("http://{}/", lab.addr());
    let o = output(
        podman_run()
            .arg(TAG)
            .args(["http", &url, "-n", "50", "-c", "2", "--json", "-", "-q"]),
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = RunResult::from_reader(o.stdout.as_slice()).expect("stdout is one result document");
    assert_eq!(r.measurements.requests.ok, 50);
    assert_books_balance(&r);

    agents_run_their_segments(&url);

    let _ = Command::new("podman").args(["rmi", "-f", TAG]).output();
}

/// A `throng k8s job` of two agents, each run in the image as its pod would
/// (the Job's command and environment, the ConfigMap's files at /plan, an
/// empty /results): their two results add up to the run's 40 requests.
fn agents_run_their_segments(url: &str) {
    let o = output(throng().args([
        "k8s",
        "job",
        "--parallelism",
        "2",
        "--start-in",
        "20s",
        "--image",
        TAG,
        "--",
        "http",
        url,
        "-n",
        "40",
        "-c",
        "2",
    ]));
    assert!(o.status.success(), "{}", text(&o));
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&String::from_utf8_lossy(&o.stdout))
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let kind = |k: &str| docs.iter().find(|d| d["kind"].as_str() == Some(k)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan");
    let results = dir.path().join("results");
    std::fs::create_dir(&plan).unwrap();
    std::fs::create_dir(&results).unwrap();
    for (k, v) in kind("ConfigMap")["data"].as_mapping().unwrap() {
        std::fs::write(plan.join(k.as_str().unwrap()), v.as_str().unwrap()).unwrap();
    }
    // The pod's user (10001) reads the plan and writes the results.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&results, std::fs::Permissions::from_mode(0o777)).unwrap();
    let container = &kind("Job")["spec"]["template"]["spec"]["containers"][0];
    let command: Vec<&str> = container["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(command[0], "/bin/sh", "{command:?}");
    let mut env: Vec<String> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| format!("{}={}", e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert!(env.contains(&"THRONG_RESULTS_DIR=/results".to_string()), "{env:?}");
    env.push(String::new());
    // Both at once, as a Job's pods start: they wait for the shared start.
    let agents: Vec<_> = (0..2)
        .map(|i| {
            *env.last_mut().unwrap() = format!("JOB_COMPLETION_INDEX={i}");
            let mut c = podman_run();
            c.arg("-v")
                .arg(format!("{}:/plan:ro", plan.display()))
                .arg("-v")
                .arg(format!("{}:/results", results.display()));
            for e in &env {
                c.args(["-e", e]);
            }
            c.args(["--entrypoint", command[0], TAG]).args(&command[1..]);
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ok = 0;
    for (i, agent) in agents.into_iter().enumerate() {
        let o = agent.wait_with_output().unwrap();
        assert!(o.status.success(), "agent {i}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let begin = format!("throng-result-begin segment-{i}.json\n");
        let doc = out
            .split_once(&begin)
            .and_then(|(_, rest)| rest.split_once("\nthrong-result-end"))
            .map(|(doc, _)| {
                doc.lines()
                    .filter_map(|l| l.strip_prefix("throng-result-line "))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_else(|| panic!("agent {i}: no result between the markers: {}", text(&o)));
        let r = RunResult::from_reader(doc.as_bytes()).unwrap();
        assert_books_balance(&r);
        assert_eq!(r.measurements.requests.attempted, r.measurements.requests.ok);
        assert!(String::from_utf8_lossy(&o.stderr).contains("open files 20000 soft / 20000 hard"));
        ok += r.measurements.requests.ok;
    }
    assert_eq!(ok, 40);
}
