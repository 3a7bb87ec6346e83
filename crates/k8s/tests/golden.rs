//! The manifests, byte for byte against tests/golden/, and their structure.
//!
//! Regenerate the golden files after an intended change with
//! `THRONG_UPDATE_GOLDEN=1 cargo test -p throng-k8s --test golden`, and read
//! the diff before committing it.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde::Deserialize;
use serde_yaml_ng::Value;
use throng_k8s::{JobRequest, Load, PerOpen, Plan, PlanFile, Work, generate, sizing};

/// 2026-01-01T00:01:00Z: a fixed clock.
const START: i64 = 1_767_225_660;

fn http_request() -> JobRequest {
    let load = Load {
        open: 400,
        per_open: PerOpen::Connection,
        rate: None,
        work: Work::KeepAliveRequest,
    };
    JobRequest {
        name: "throng".into(),
        namespace: "default".into(),
        image: "throng:0.1.0".into(),
        parallelism: 4,
        results_dir: "/results".into(),
        results_pvc: None,
        start_at_unix: START,
        plan: Plan::Command(
            [
                "http",
                "http://svc:8080/",
                "-c",
                "400",
                "-d",
                "5m",
                "-H",
                "X-Note: it's \"quoted\": yes",
                "-H",
                "Authorization: Bearer golden-token",
            ]
            .map(String::from)
            .to_vec(),
        ),
        // The Authorization header: the arguments go in the Secret.
        secret_args: true,
        secret_scenario: false,
        sizing: sizing::size(&load, 4),
    }
}

fn scenario_request() -> JobRequest {
    let load = Load {
        open: 300,
        per_open: PerOpen::Vu,
        rate: Some(3000.0),
        work: Work::Iteration(4),
    };
    JobRequest {
        name: "auth-ramp".into(),
        namespace: "load".into(),
        image: "registry.example/throng:0.1.0".into(),
        parallelism: 3,
        results_dir: "/results".into(),
        results_pvc: Some("throng-results".into()),
        start_at_unix: START,
        plan: Plan::Scenario {
            text: "target: https://auth.load.svc:8443\n# a comment: kept\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 300\n    duration: 1m\n    flow:\n      - request: { path: '/x?q={{uuid}}' }\n".into(),
            files: vec![
                PlanFile { path: "data/users.csv".into(), contents: "email,password\na@b.test,\"p,1\"\n".into(), secret: false },
                PlanFile { path: "ca.pem".into(), contents: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into(), secret: false },
                PlanFile { path: "client.key".into(), contents: "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n".into(), secret: true },
            ],
            extra_args: vec!["--env".into(), "BASE=https://auth.load.svc:8443".into()],
        },
        // --env values may be tokens: the arguments go in the Secret.
        secret_args: true,
        secret_scenario: false,
        sizing: sizing::size(&load, 3),
    }
}

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("THRONG_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (THRONG_UPDATE_GOLDEN=1 writes it)", path.display()));
    assert!(
        expected == actual,
        "{} differs from what generate() makes now; if intended, regenerate with THRONG_UPDATE_GOLDEN=1\n--- now:\n{actual}",
        path.display()
    );
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

fn get<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| match k.parse::<usize>() {
        Ok(i) => &v[i],
        Err(_) => &v[k],
    })
}

#[test]
fn http_job_matches_golden() {
    let m = generate(&http_request()).unwrap();
    golden("http-4.yaml", &m.yaml);
    golden("http-4.collect.sh", &m.collect);
}

#[test]
fn scenario_job_matches_golden() {
    let m = generate(&scenario_request()).unwrap();
    golden("scenario-3.yaml", &m.yaml);
    golden("scenario-3.collect.sh", &m.collect);
}

#[test]
fn manifests_have_the_fields_kubernetes_requires() {
    for req in [http_request(), scenario_request()] {
        let m = generate(&req).unwrap();
        let docs = documents(&m.yaml);
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        let n = req.parallelism as usize;
        for d in &docs {
            assert!(!get(d, "metadata.name").as_str().unwrap().is_empty());
            assert_eq!(get(d, "metadata.namespace").as_str(), Some(req.namespace.as_str()));
        }
        let cm = &docs[0];
        assert_eq!((cm["apiVersion"].as_str(), kinds[0]), (Some("v1"), "ConfigMap"));
        assert_eq!(cm["data"]["entrypoint.sh"].as_str(), Some(throng_k8s::AGENT_SCRIPT));
        let segments: Vec<&str> = get(cm, "data.segments").as_str().unwrap().lines().collect();
        assert_eq!(segments.len(), n);
        let job = docs.last().unwrap();
        assert_eq!(
            (job["apiVersion"].as_str(), *kinds.last().unwrap()),
            (Some("batch/v1"), "Job")
        );
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
        assert_eq!(spec["completions"].as_u64(), Some(n as u64));
        assert_eq!(spec["parallelism"].as_u64(), Some(n as u64));
        assert_eq!(get(spec, "template.spec.restartPolicy").as_str(), Some("Never"));
        let c = get(spec, "template.spec.containers.0");
        assert_eq!(c["image"].as_str(), Some(req.image.as_str()));
        assert_eq!(cm["data"]["start-at"].as_str(), Some("2026-01-01T00:01:00Z\n"));
        let sequence = throng_k8s::segments::sequence(n as u32) + "\n";
        assert_eq!(cm["data"]["segment-sequence"].as_str(), Some(sequence.as_str()));
        assert_eq!(get(c, "resources.requests"), get(c, "resources.limits"));
        // Every mount names a volume, and the plan's projected sources name the objects made here.
        let volumes: Vec<&str> = get(spec, "template.spec.volumes")
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        for mount in c["volumeMounts"].as_sequence().unwrap() {
            assert!(volumes.contains(&mount["name"].as_str().unwrap()));
        }
        let names: Vec<&str> = docs.iter().map(|d| get(d, "metadata.name").as_str().unwrap()).collect();
        for source in get(spec, "template.spec.volumes.0.projected.sources")
            .as_sequence()
            .unwrap()
        {
            let obj = source.get("configMap").or(source.get("secret")).unwrap();
            assert!(names.contains(&obj["name"].as_str().unwrap()));
            // Every key projected exists in its object.
            let owner = docs.iter().find(|d| get(d, "metadata.name") == &obj["name"]).unwrap();
            let data = owner.get("data").or(owner.get("stringData")).unwrap();
            for item in obj["items"].as_sequence().unwrap() {
                assert!(data.get(item["key"].as_str().unwrap()).is_some(), "{item:?}");
            }
        }
    }
}

#[test]
fn plan_text_and_arguments_survive_yaml_exactly() {
    let req = scenario_request();
    let docs = documents(&generate(&req).unwrap().yaml);
    let Plan::Scenario { text, files, .. } = &req.plan else {
        unreachable!()
    };
    assert_eq!(docs[0]["data"]["scenario.yaml"].as_str(), Some(text.as_str()));
    assert_eq!(
        docs[0]["data"]["file.data_users.csv"].as_str(),
        Some(files[0].contents.as_str())
    );
    assert_eq!(
        docs[1]["stringData"]["file.client.key"].as_str(),
        Some(files[2].contents.as_str())
    );
    // The key is not in the ConfigMap.
    assert!(get(&docs[0], "data").get("file.client.key").is_none());

    let mut req = http_request();
    req.secret_args = false;
    let docs = documents(&generate(&req).unwrap().yaml);
    let Plan::Command(args) = &req.plan else { unreachable!() };
    let got: Vec<&str> = docs[0]["data"]["args"].as_str().unwrap().lines().collect();
    assert_eq!(got, args.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn secrets_go_in_the_secret_and_never_in_the_config_map() {
    let mut req = http_request();
    let m = generate(&req).unwrap();
    let docs = documents(&m.yaml);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Secret", "Job"]);
    assert!(!serde_yaml_ng::to_string(&docs[0]).unwrap().contains("golden-token"));
    assert!(!serde_yaml_ng::to_string(&docs[2]).unwrap().contains("golden-token"));
    let args = docs[1]["stringData"]["args"].as_str().unwrap();
    assert!(args.contains("Authorization: Bearer golden-token\n"), "{args}");
    // Mounted at /plan/args as before, from the Secret, owner and group only.
    let sources = get(&docs[2], "spec.template.spec.volumes.0.projected.sources");
    let item = &sources[1]["secret"]["items"][0];
    assert_eq!(
        (item["key"].as_str(), item["path"].as_str(), item["mode"].as_u64()),
        (Some("args"), Some("args"), Some(0o440))
    );
    assert!(m.collect.contains("secret/throng-keys"), "{}", m.collect);

    // A scenario whose text holds a secret: the text goes in the Secret.
    req = scenario_request();
    req.secret_scenario = true;
    if let Plan::Scenario { text, .. } = &mut req.plan {
        text.push_str("defaults: { headers: { Authorization: Bearer golden-token } }\n");
    }
    let docs = documents(&generate(&req).unwrap().yaml);
    assert!(!serde_yaml_ng::to_string(&docs[0]).unwrap().contains("golden-token"));
    assert!(
        docs[1]["stringData"]["scenario.yaml"]
            .as_str()
            .unwrap()
            .contains("golden-token")
    );
}

#[test]
fn files_outside_the_scenario_directory_are_refused() {
    let mut req = scenario_request();
    if let Plan::Scenario { files, .. } = &mut req.plan {
        files[0].path = "../secrets.csv".into();
    }
    assert!(matches!(generate(&req), Err(throng_k8s::K8sError::File(_))));
    let mut req = http_request();
    req.results_dir = "results".into();
    assert!(generate(&req).is_err());
    req.results_dir = "/results".into();
    req.name = "Throng".into();
    assert!(generate(&req).is_err());
}

#[test]
#[ignore = "needs kubernetes-validate (PyPI; scripts/test.sh installs it)"]
fn golden_manifests_pass_the_kubernetes_schemas() {
    // kubectl's client-side dry run still asks an API server which kinds
    // exist; kubernetes-validate (PyPI; scripts/test.sh installs it) checks
    // against the published OpenAPI schemas offline.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let out = std::process::Command::new("kubernetes-validate")
        .arg("--strict")
        .arg(dir.join("http-4.yaml"))
        .arg(dir.join("scenario-3.yaml"))
        .output();
    let out =
        out.expect("kubernetes-validate is not installed: pip install kubernetes-validate (scripts/test.sh does)");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches(" passed for resource ").count(), 6, "{text}");
}

/// The agent script, run by sh with a stand-in `throng` that writes its
/// arguments as the result; the printed collect loop's awk then pulls the
/// result back out of the "log".
#[test]
fn agent_script_runs_its_segment_and_prints_the_result() {
    let req = http_request();
    let m = generate(&req).unwrap();
    let docs = documents(&m.yaml);
    let tmp = std::env::temp_dir().join(format!("throng-k8s-agent-{}", std::process::id()));
    let (plan, bin, results) = (tmp.join("plan"), tmp.join("bin"), tmp.join("results"));
    for d in [&plan, &bin, &results] {
        std::fs::create_dir_all(d).unwrap();
    }
    // The pod's /plan: the ConfigMap's files and the Secret's (the arguments).
    for d in &docs[..docs.len() - 1] {
        for (k, v) in d.get("data").or(d.get("stringData")).unwrap().as_mapping().unwrap() {
            std::fs::write(plan.join(k.as_str().unwrap()), v.as_str().unwrap()).unwrap();
        }
    }
    // Writes each argument on its own line to the file after --json.
    let fake = "#!/bin/sh\nfor a in \"$@\"; do [ \"$prev\" = --json ] && out=$a; prev=$a; done\n\
                printf '%s\\n' \"$@\" > \"$out\"\n";
    std::fs::write(bin.join("throng"), fake).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(bin.join("throng"))
        .status()
        .unwrap();
    let out = std::process::Command::new("sh")
        .arg(plan.join("entrypoint.sh"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("THRONG_PLAN_DIR", &plan)
        .env("THRONG_RESULTS_DIR", &results)
        .env("JOB_COMPLETION_INDEX", "2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = String::from_utf8(out.stdout).unwrap();
    let Plan::Command(args) = &req.plan else { unreachable!() };
    let mut expected: Vec<String> = args.clone();
    expected.extend(
        [
            "--segment",
            "1/2:3/4",
            "--segment-sequence",
            "0,1/4,1/2,3/4,1",
            "--start-at",
            "2026-01-01T00:01:00Z",
            "--json",
        ]
        .map(String::from),
    );
    expected.push(results.join("segment-2.json").display().to_string());
    let want = expected.join("\n") + "\n";
    assert!(log.starts_with("throng-result-begin segment-2.json\n"), "{log}");
    // The awk of the collect commands, on this log.
    let awk_line = m.collect.lines().find(|l| l.contains("awk")).unwrap();
    let program = awk_line.split('\'').nth(1).unwrap();
    let collected = tmp.join("collected");
    std::fs::create_dir_all(&collected).unwrap();
    let mut awk = std::process::Command::new("awk")
        .arg("-v")
        .arg(format!("dir={}", collected.display()))
        .arg(program)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    awk.stdin
        .take()
        .unwrap()
        // A line of stderr between the markers, as a pod's log can have it.
        .write_all(
            format!("report text\n{log}")
                .replacen(".json\n", ".json\nthrong-agent: throng exited with 0\n", 1)
                .as_bytes(),
        )
        .unwrap();
    assert!(awk.wait().unwrap().success());
    let got = std::fs::read_to_string(collected.join("segment-2.json")).unwrap();
    // Only the document's lines, unmarked.
    assert_eq!(got, want);
    std::fs::remove_dir_all(&tmp).unwrap();
}
