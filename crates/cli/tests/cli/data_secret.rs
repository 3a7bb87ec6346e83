//! `--data TEXT` is a body typed on the command line, and a body may carry
//! credentials (a login form, a token in JSON): where throng writes a
//! command line down — a sweep's `run:` in its JSON, a Kubernetes Job's
//! `args` — an inline body is treated like `--send-secret`. `--data @FILE`
//! names a file, which is kept.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{lab, output, throng};

const SECRET: &str = "pw-Zq81x";

#[test]
fn a_sweep_sends_the_inline_body_and_writes_its_run_line_without_it() {
    let lab = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.yaml");
    std::fs::write(
        &file,
        format!(
            "parameters:\n  n: [3, 4]\nrun: \"http http://{}/echo -n {{{{n}}}} -c 1 --data 'user=a&password={SECRET}'\"\n",
            lab.addr()
        ),
    )
    .unwrap();
    let json = dir.path().join("sweep.json");
    let out = output(throng().arg("sweep").arg(&file).arg("--json").arg(&json));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains(SECRET) && !String::from_utf8_lossy(&out.stdout).contains(SECRET));
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let run = doc["run"].as_str().unwrap();
    assert!(run.ends_with("--data '<redacted>'"), "{run}");
    // The cells ran with the real body: every POST answered by /echo.
    let cells = doc["cells"].as_array().unwrap();
    let ok: Vec<u64> = cells
        .iter()
        .map(|c| c["runs"][0]["measurements"]["requests"]["ok"].as_u64().unwrap())
        .collect();
    assert_eq!(ok, [3, 4], "{text}");
    for c in cells {
        let m = &c["runs"][0]["measurements"]["requests"];
        assert_eq!(m["attempted"], m["ok"], "{m}");
    }
}

#[test]
fn a_k8s_job_ships_an_inline_body_in_its_secret_and_a_body_file_in_its_config_map() {
    let job = |data: &str| {
        let o = output(throng().args([
            "k8s",
            "job",
            "--parallelism",
            "2",
            "--",
            "http",
            "http://svc:8080/login",
            "-n",
            "100",
            "--data",
            data,
        ]));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!String::from_utf8_lossy(&o.stderr).contains(SECRET));
        let yaml = String::from_utf8(o.stdout).unwrap();
        serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect::<Vec<serde_yaml_ng::Value>>()
    };
    let docs = job(&format!("{{\"password\": \"{SECRET}\"}}"));
    let kinds: Vec<&str> = docs.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Secret", "Job"]);
    for x in [&docs[0], &docs[2]] {
        assert!(!serde_yaml_ng::to_string(x).unwrap().contains(SECRET), "{x:?}");
    }
    // The agents get the real body, from the Secret.
    assert!(docs[1]["stringData"]["args"].as_str().unwrap().contains(SECRET));

    // A body file is named, not inlined: no Secret needed for it.
    let docs = job("@body.json");
    let kinds: Vec<&str> = docs.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Job"]);
    assert!(docs[0]["data"]["args"].as_str().unwrap().contains("@body.json"));
}
