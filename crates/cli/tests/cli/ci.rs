//! CI: `--summary-md` on `http`, `storm` and `run` against the lab server
//! (and `grpc` against the grpcio test server);
//! the GitHub composite action (`action.yml`) run step by step as a runner
//! would (its `run:` scripts under `bash -eo pipefail` with the GITHUB_*
//! files and the `env:` its steps map from inputs, the install step given
//! the built binary; the `uses:` steps' inputs checked, as they cannot run
//! here); and the GitLab CI job in the guide (docs/guide/src/thresholds-ci.md), its script lines run as
//! GitLab's runner runs them, twice, as two pipelines sharing a cache.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{lab, output, throng};
use serde_yaml_ng::Value;
use throng_result::RunResult;

fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(name)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// The summary's lines, for a run of `args` with `--summary-md`.
fn summary_of(command: &str, args: &[String], dir: &Path) -> (i32, Vec<String>) {
    let md = dir.join(format!("{command}.md"));
    // The summary is appended: each run's is read alone.
    let _ = std::fs::remove_file(&md);
    let o = output(
        throng()
            .arg(command)
            .args(args)
            .arg("--summary-md")
            .arg(&md)
            .arg("--quiet"),
    );
    let text = std::fs::read_to_string(&md)
        .unwrap_or_else(|e| panic!("{command}: no summary ({e}): {}", String::from_utf8_lossy(&o.stderr)));
    (
        o.status.code().unwrap_or(-1),
        text.lines().map(str::to_string).collect(),
    )
}

#[test]
fn summary_md_puts_the_verdict_first_for_each_run_command() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    let (code, held) = summary_of(
        "http",
        &s(&[&url, "-c", "2", "-n", "150", "--threshold", "latency: p(99) < 10s"]),
        dir.path(),
    );
    assert_eq!(code, 0);
    assert_eq!(held[0], "### ✅ throng: 1 of 1 thresholds held");
    assert!(held[2].starts_with("- ✅ `latency: p(99) < 10s` — "), "{held:#?}");
    assert!(held.contains(&"| requests | 150 |".to_string()), "{held:#?}");
    assert!(held.contains(&"| failed | 0 (0.00%) |".to_string()), "{held:#?}");
    assert!(held.contains(&format!("`throng http GET {url}`")), "{held:#?}");

    let (code, failed) = summary_of(
        "http",
        &s(&[&url, "-c", "2", "-n", "150", "--threshold", "latency: p(99) < 1us"]),
        dir.path(),
    );
    assert_eq!(code, 99, "a failed threshold still writes the summary");
    assert_eq!(failed[0], "### ❌ throng: 1 of 1 thresholds failed");
    assert!(failed[2].starts_with("- ❌ `latency: p(99) < 1us` — "), "{failed:#?}");

    // Every connection refused: a storm against a closed loopback port.
    let closed = common::free_port();
    let (code, storm) = summary_of(
        "storm",
        &s(&[&format!("tcp://127.0.0.1:{closed}"), "-n", "7", "--workers", "1"]),
        dir.path(),
    );
    assert_eq!(code, 1);
    assert_eq!(storm[0], "### ❌ throng: every one of 7 connections failed");
    assert!(storm.contains(&"| connections | 7 |".to_string()), "{storm:#?}");
    assert!(storm.contains(&"| failed: `refused` | 7 |".to_string()), "{storm:#?}");

    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        format!(
            "target: {url}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    iterations: 20\n    \
             flow:\n      - request: {{ path: / }}\nthresholds:\n  errors: ['count == 0']\n"
        ),
    )
    .unwrap();
    let (code, run) = summary_of("run", &s(&[scenario.to_str().unwrap(), "--threads", "1"]), dir.path());
    assert_eq!(code, 0, "{run:#?}");
    assert_eq!(run[0], "### ✅ throng: 1 of 1 thresholds held");
    assert!(run.contains(&"| requests | 20 |".to_string()), "{run:#?}");
    assert!(run.contains(&"| iterations | 20 (0 dropped) |".to_string()), "{run:#?}");

    // Credentials in the URL reach neither the summary nor a history entry.
    let secret_url = format!("http://alice:s3cret@{}/", server.addr());
    let json = dir.path().join("secret.json");
    let (code, lines) = summary_of(
        "http",
        &s(&[&secret_url, "-n", "5", "--json", json.to_str().unwrap()]),
        dir.path(),
    );
    assert_eq!(code, 0);
    assert!(!lines.join("\n").contains("s3cret"), "{lines:#?}");
    let history = dir.path().join("history");
    let o = output(throng().args(["history", "add"]).arg(&json).arg("--dir").arg(&history));
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("s3cret"));
    for entry in std::fs::read_dir(&history).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains("s3cret"));
    }

    // Appended, as a job summary gathers every command's: two runs, two verdicts.
    let both = dir.path().join("both.md");
    for limit in ["latency: p(99) < 10s", "latency: p(99) < 1us"] {
        let o = output(
            throng()
                .args(["http", &url, "-n", "5", "-q", "--threshold", limit, "--summary-md"])
                .arg(&both),
        );
        assert!(matches!(o.status.code(), Some(0 | 99)), "{o:?}");
    }
    let text = std::fs::read_to_string(&both).unwrap();
    let verdicts: Vec<&str> = text.lines().filter(|l| l.starts_with("### ")).collect();
    assert_eq!(
        verdicts,
        [
            "### ✅ throng: 1 of 1 thresholds held",
            "### ❌ throng: 1 of 1 thresholds failed"
        ],
        "{text}"
    );

    // The path is checked before the run.
    let o = output(throng().args(["http", &url, "-n", "5", "--summary-md", "/nonexistent/dir/s.md"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--summary-md /nonexistent/dir/s.md"));
    // grpc takes it too (its runs are tested against a gRPC server in grpc.rs).
    let help = output(throng().args(["grpc", "--help"]));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--summary-md <FILE>"));
}

/// What the emulated runner saw of one use of the action.
struct ActionRun {
    /// Each step's name and exit code (None: skipped, or a `uses:` step).
    steps: Vec<(String, Option<i32>)>,
    /// The `with:` of each `uses:` step, evaluated.
    uses: Vec<(String, String, BTreeMap<String, String>)>,
    outputs: BTreeMap<String, BTreeMap<String, String>>,
    step_summary: String,
    workspace: PathBuf,
    _dir: tempfile::TempDir,
}

/// Replaces each `${{ … }}` in `s`: inputs, steps' outputs, runner.temp.
fn evaluate(
    s: &str,
    inputs: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, BTreeMap<String, String>>,
    temp: &Path,
) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("an unclosed expression") + start;
        let expr = rest[start + 3..end].trim();
        let value = if let Some(name) = expr.strip_prefix("inputs.") {
            inputs.get(name).cloned().unwrap_or_else(|| panic!("no input {name}"))
        } else if let Some(path) = expr.strip_prefix("steps.") {
            let (id, name) = path.split_once(".outputs.").expect("steps.ID.outputs.NAME");
            outputs.get(id).and_then(|o| o.get(name)).cloned().unwrap_or_default()
        } else if expr == "runner.temp" {
            temp.display().to_string()
        } else {
            panic!("the test runner does not know the expression {expr}")
        };
        out.push_str(&value);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Runs `action.yml` with `given` inputs as a runner would.
fn run_action(given: &[(&str, &str)]) -> ActionRun {
    let action: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(repo_file("action.yml")).unwrap()).unwrap();
    assert_eq!(text(&action["runs"]["using"]), "composite");
    let mut inputs = BTreeMap::new();
    for (name, spec) in action["inputs"].as_mapping().unwrap() {
        inputs.insert(text(name), spec.get("default").map(text).unwrap_or_default());
    }
    for (k, v) in given {
        assert!(inputs.contains_key(*k), "the action has no input {k}");
        inputs.insert(k.to_string(), v.to_string());
    }
    for (name, spec) in action["inputs"].as_mapping().unwrap() {
        if spec.get("required").is_some_and(|r| r.as_bool() == Some(true)) {
            assert!(
                given.iter().any(|(k, _)| *k == text(name)),
                "required input {} not given",
                text(name)
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let temp = dir.path().join("runner-temp");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&temp).unwrap();
    std::fs::create_dir_all(&workspace).unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let step_summary = files.join("step_summary.md");
    let github_path = files.join("path");
    std::fs::write(&step_summary, "").unwrap();
    std::fs::write(&github_path, "").unwrap();
    let mut outputs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut steps = Vec::new();
    let mut uses = Vec::new();
    let mut failed = false;
    for (i, step) in action["runs"]["steps"].as_sequence().unwrap().iter().enumerate() {
        let name = step.get("name").map(text).unwrap_or_else(|| format!("step {i}"));
        let condition = step.get("if").map(text).unwrap_or_default();
        let runs = match condition.as_str() {
            "" => !failed,
            "always()" => true,
            other => panic!("the test runner does not know the condition {other}"),
        };
        if let Some(action_ref) = step.get("uses") {
            let with: BTreeMap<String, String> = step
                .get("with")
                .and_then(Value::as_mapping)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (text(k), evaluate(&text(v), &inputs, &outputs, &temp)))
                        .collect()
                })
                .unwrap_or_default();
            uses.push((text(action_ref), condition.clone(), with));
            steps.push((name, None));
            continue;
        }
        if !runs {
            steps.push((name, None));
            continue;
        }
        assert_eq!(text(&step["shell"]), "bash", "{name}");
        let script = text(&step["run"]);
        assert!(
            !script.contains("${{"),
            "{name}: inputs reach a script through env:, never pasted into its text"
        );
        let script_path = temp.join(format!("step-{i}.sh"));
        std::fs::write(&script_path, &script).unwrap();
        let output_file = files.join(format!("output-{i}"));
        std::fs::write(&output_file, "").unwrap();
        // The PATH a later step sees: what earlier steps added first.
        let added: Vec<String> = std::fs::read_to_string(&github_path)
            .unwrap()
            .lines()
            .rev()
            .map(str::to_string)
            .collect();
        let path = [added, vec!["/usr/local/bin:/usr/bin:/bin".to_string()]]
            .concat()
            .join(":");
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&script_path)
            .current_dir(&workspace)
            .env_clear()
            .env("PATH", path)
            .env("HOME", dir.path())
            .env("RUNNER_TEMP", &temp)
            .env("GITHUB_WORKSPACE", &workspace)
            .env("GITHUB_STEP_SUMMARY", &step_summary)
            .env("GITHUB_OUTPUT", &output_file)
            .env("GITHUB_PATH", &github_path)
            .env("GITHUB_ACTIONS", "true")
            .env("CI", "true");
        if let Some(env) = step.get("env").and_then(Value::as_mapping) {
            for (k, v) in env {
                cmd.env(text(k), evaluate(&text(v), &inputs, &outputs, &temp));
            }
        }
        let o = output(&mut cmd);
        let code = o.status.code().unwrap_or(-1);
        eprintln!(
            "step {name}: exit {code}\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if let Some(id) = step.get("id") {
            let mut out = BTreeMap::new();
            for line in std::fs::read_to_string(&output_file).unwrap().lines() {
                let (k, v) = line.split_once('=').expect("NAME=VALUE lines");
                out.insert(k.to_string(), v.to_string());
            }
            outputs.insert(text(id), out);
        }
        failed |= code != 0;
        steps.push((name, Some(code)));
    }
    ActionRun {
        steps,
        uses,
        outputs,
        step_summary: std::fs::read_to_string(&step_summary).unwrap(),
        workspace,
        _dir: dir,
    }
}

#[test]
fn the_github_action_runs_summarizes_uploads_and_fails_on_99() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let binary = env!("CARGO_BIN_EXE_throng");
    let args = |limit: &str| format!("http {url} -c 2 -n 120 --threshold 'latency: p(99) < {limit}'");

    let ok = run_action(&[("args", &args("10s")), ("binary", binary)]);
    let codes: Vec<Option<i32>> = ok.steps.iter().map(|(_, c)| *c).collect();
    assert_eq!(codes, [Some(0), Some(0), None, Some(0)], "{:?}", ok.steps);
    assert_eq!(ok.outputs["run"]["exit-code"], "0");
    assert_eq!(ok.outputs["run"]["result"], "throng-result.json");
    let result_path = ok.workspace.join("throng-result.json");
    let r = RunResult::from_reader(std::fs::File::open(&result_path).unwrap()).unwrap();
    assert_eq!(r.measurements.requests.attempted, 120);
    assert!(r.thresholds_passed());
    assert!(
        ok.step_summary.starts_with("### ✅ throng: 1 of 1 thresholds held\n"),
        "{}",
        ok.step_summary
    );
    // The upload step: always, the result's path, the artifact's name.
    let [(action_ref, condition, with)] = ok.uses.as_slice() else {
        panic!("one uses: step expected: {:?}", ok.steps)
    };
    assert!(action_ref.starts_with("actions/upload-artifact@"), "{action_ref}");
    assert_eq!(condition, "always()");
    assert_eq!(with["path"], "throng-result.json");
    assert_eq!(with["name"], "throng-result");

    let failed = run_action(&[("args", &args("1us")), ("binary", binary), ("artifact-name", "perf")]);
    let codes: Vec<Option<i32>> = failed.steps.iter().map(|(_, c)| *c).collect();
    assert_eq!(codes, [Some(0), Some(0), None, Some(99)], "{:?}", failed.steps);
    assert_eq!(failed.outputs["run"]["exit-code"], "99");
    assert!(
        failed
            .step_summary
            .starts_with("### ❌ throng: 1 of 1 thresholds failed\n")
    );
    assert_eq!(failed.uses[0].2["name"], "perf");
    assert!(
        failed.workspace.join("throng-result.json").exists(),
        "the result is there to upload"
    );

    let warned = run_action(&[
        ("args", &args("1us")),
        ("binary", binary),
        ("fail-on-thresholds", "false"),
    ]);
    assert_eq!(warned.steps[3].1, Some(0), "{:?}", warned.steps);

    // A usage error (exit 2) fails the step too, and says so in the summary.
    let usage = run_action(&[("args", "http --no-such-flag"), ("binary", binary)]);
    assert_eq!(usage.outputs["run"]["exit-code"], "2");
    assert_eq!(usage.steps[3].1, Some(2));
    assert!(
        usage.step_summary.contains("❌ throng exited 2"),
        "{}",
        usage.step_summary
    );
}

/// The GitLab CI job in the guide (the yaml block holding `load-test:`).
fn gitlab_job() -> Value {
    let readme = std::fs::read_to_string(repo_file("docs/guide/src/thresholds-ci.md")).unwrap();
    let block = readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split("\n```").next())
        .find(|b| b.starts_with("load-test:"))
        .expect("a ```yaml block starting with load-test: in docs/guide/src/thresholds-ci.md");
    let doc: Value = serde_yaml_ng::from_str(block).unwrap();
    doc["load-test"].clone()
}

/// Runs the job's script lines as GitLab's runner does (one bash, `set -eo
/// pipefail`, the job's variables then `vars`), in `dir`: the exit code.
/// Each pipeline starts from a fresh checkout: only the job's cached paths
/// are left from the last one.
fn run_gitlab(job: &Value, dir: &Path, vars: &[(&str, String)]) -> i32 {
    let cached: Vec<String> = job["cache"]["paths"].as_sequence().unwrap().iter().map(text).collect();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !cached.iter().any(|c| c.trim_end_matches('/') == name) {
            let p = entry.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    let lines: Vec<String> = job["script"].as_sequence().unwrap().iter().map(text).collect();
    let script = format!("set -eo pipefail\n{}\n", lines.join("\n"));
    let path = dir.join("job.sh");
    std::fs::write(&path, script).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_throng"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    let mut cmd = Command::new("bash");
    cmd.arg(&path)
        .current_dir(dir)
        .env("PATH", format!("{bin}:/usr/local/bin:/usr/bin:/bin"));
    for (k, v) in job["variables"].as_mapping().unwrap() {
        cmd.env(text(k), text(v));
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let o = output(&mut cmd);
    eprintln!(
        "job: exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o.status.code().unwrap_or(-1)
}

#[test]
fn the_gitlab_example_runs_and_keeps_a_history() {
    let server = lab(None);
    let job = gitlab_job();
    let cached: Vec<String> = job["cache"]["paths"].as_sequence().unwrap().iter().map(text).collect();
    assert_eq!(cached, ["perf-history/"]);
    let artifacts: Vec<String> = job["artifacts"]["paths"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(text(&job["artifacts"]["when"]), "always");
    let dir = tempfile::tempdir().unwrap();
    let vars = |sha: &str, limit: &str| {
        vec![
            ("TARGET_URL", format!("http://{}/", server.addr())),
            ("LOAD_FLAGS", "-c 2 -n 150 -q".to_string()),
            ("P99_LIMIT", limit.to_string()),
            ("CI_COMMIT_SHORT_SHA", sha.to_string()),
        ]
    };
    let history = dir.path().join("perf-history");
    let entries = || std::fs::read_dir(&history).map_or(0, |d| d.count());
    // Pipeline 1: no baseline yet; the run joins the history.
    assert_eq!(run_gitlab(&job, dir.path(), &vars("aaa1111", "10s")), 0);
    assert_eq!(entries(), 1);
    for a in &artifacts {
        if a != "compare.md" {
            assert!(dir.path().join(a).exists(), "artifact {a}");
        }
    }
    // Pipeline 2: compared with pipeline 1's run.
    assert_eq!(run_gitlab(&job, dir.path(), &vars("bbb2222", "10s")), 0);
    assert_eq!(entries(), 2);
    let compare = std::fs::read_to_string(dir.path().join("compare.md")).unwrap();
    assert!(compare.contains("baseline"), "{compare}");
    let trend = std::fs::read_to_string(dir.path().join("trend.html")).unwrap();
    assert!(trend.contains("aaa1111") && trend.contains("bbb2222"));
    assert_eq!(trend.matches("<tr><td>").count(), 2);
    // Pipeline 3: a threshold fails; the job fails with 99, the run stays
    // out of the history, the summary says why.
    assert_eq!(run_gitlab(&job, dir.path(), &vars("ccc3333", "1us")), 99);
    assert_eq!(entries(), 2);
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(
        summary.starts_with("### ❌ throng: 1 of 1 thresholds failed"),
        "{summary}"
    );
}

#[test]
fn summary_md_of_a_grpc_run() {
    let server = crate::grpc::GrpcServer::start(None);
    let dir = tempfile::tempdir().unwrap();
    let proto = crate::grpc::here("tester.proto");
    let args: Vec<String> = [
        server.addr.as_str(),
        "--plaintext",
        "--proto",
        proto.to_str().unwrap(),
        "--call",
        "throngtest.Tester/Call",
        "-n",
        "50",
        "-c",
        "1",
        "-t",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, lines) = summary_of("grpc", &args, dir.path());
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(lines[0], "### ✅ throng: ran to its end (no thresholds)");
    assert!(
        lines[2].starts_with("`throng grpc ") && lines[2].ends_with(" throngtest.Tester/Call`"),
        "{lines:#?}"
    );
    assert!(lines.contains(&"| requests | 50 |".to_string()), "{lines:#?}");
    assert!(lines.contains(&"| failed | 0 (0.00%) |".to_string()), "{lines:#?}");
}
