//! `throng run`: a scenario's target from the environment
//! (`target: "{{env.BASE}}"`) or the command line (`--target URL`), against
//! the lab server; an `--env` nothing reads is a one-line warning, and a
//! target that cannot be filled in is a usage error (exit 2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{assert_books_balance, lab, output, schema_violations, throng};
use throng_result::{Plan, RunResult};

/// Two VUs, three requests each.
const FLOW: &str = "
scenarios:
  users:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - request: { name: home, path: / }
";

/// Writes a scenario whose target line is `target`.
fn scenario(dir: &Path, target: &str) -> PathBuf {
    let file = dir.join("scenario.yaml");
    std::fs::write(&file, format!("target: {target}\n{FLOW}")).unwrap();
    file
}

struct Ran {
    out: Output,
    result: Option<RunResult>,
    json: PathBuf,
}

impl Ran {
    fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    /// The run sent its 6 requests to the lab; returns the target's URL and
    /// where it came from, as the result records them.
    fn sent_to_the_lab(&self) -> (String, Option<String>) {
        assert_eq!(self.code(), 0, "{}", self.stderr());
        let r = self.result.as_ref().expect("a result");
        assert_books_balance(r);
        assert_eq!(r.measurements.requests.ok, 6, "{:?}", r.measurements.requests);
        let violations = schema_violations(&self.json);
        assert!(violations.is_empty(), "{violations:#?}");
        let Plan::Run(plan) = &r.plan else {
            panic!("a scenario result")
        };
        (plan.target.url.clone(), plan.target.from.clone())
    }
}

/// `throng run FILE ARGS --json … --quiet`, the environment adjusted by `env`
/// (a None value removes the variable).
fn run(dir: &Path, file: &Path, args: &[&str], env: &[(&str, Option<&str>)]) -> Ran {
    let json = dir.join("result.json");
    let _ = std::fs::remove_file(&json);
    let mut cmd: Command = throng();
    cmd.arg("run")
        .arg(file)
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--quiet");
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = output(&mut cmd);
    let result = common::read_result(&json);
    Ran { out, result, json }
}

#[test]
fn the_target_comes_from_env_flags_or_the_environment() {
    let server = lab(None);
    let url = format!("http://{}", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path(), "\"{{env.THRONG_TEST_BASE}}\"");

    // From --env.
    let ran = run(
        dir.path(),
        &file,
        &["--env", &format!("THRONG_TEST_BASE={url}")],
        &[("THRONG_TEST_BASE", None)],
    );
    let (sent, from) = ran.sent_to_the_lab();
    assert_eq!(sent, url);
    assert_eq!(from.as_deref(), Some("{{env.THRONG_TEST_BASE}}"));
    assert!(!ran.stderr().contains("warning"), "{}", ran.stderr());

    // From the process's environment, a base path kept.
    let ran = run(
        dir.path(),
        &file,
        &[],
        &[("THRONG_TEST_BASE", Some(&format!("{url}/")))],
    );
    assert_eq!(ran.sent_to_the_lab().0, format!("{url}/"));
}

#[test]
fn target_flag_replaces_the_files_target() {
    let server = lab(None);
    let url = format!("http://{}", server.addr());
    let dir = tempfile::tempdir().unwrap();
    // Port 9 (discard) refuses: a request sent there would fail.
    let file = scenario(dir.path(), "http://127.0.0.1:9");
    let ran = run(dir.path(), &file, &["--target", &url], &[]);
    let (sent, from) = ran.sent_to_the_lab();
    assert_eq!((sent.as_str(), from.as_deref()), (url.as_str(), Some("--target")));

    // Also over a target that reads the environment, which then need not be set.
    let file = scenario(dir.path(), "\"{{env.THRONG_TEST_UNSET}}\"");
    let ran = run(dir.path(), &file, &["--target", &url], &[("THRONG_TEST_UNSET", None)]);
    assert_eq!(ran.sent_to_the_lab().1.as_deref(), Some("--target"));
}

#[test]
fn an_env_nothing_reads_is_a_one_line_warning() {
    let server = lab(None);
    let url = format!("http://{}", server.addr());
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path(), &url);
    let ran = run(
        dir.path(),
        &file,
        &[
            "--env",
            "BASEURL=http://elsewhere",
            "--env",
            "TOKEN=x",
            "--env",
            "TOKEN=y",
        ],
        &[],
    );
    ran.sent_to_the_lab();
    let err = ran.stderr();
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("--env BASEURL, TOKEN") && warnings[0].contains("nothing in"),
        "{err}"
    );

    // --target makes the file's {{env.BASE}} unread: said, not refused.
    let file = scenario(dir.path(), "\"{{env.BASE}}\"");
    let ran = run(
        dir.path(),
        &file,
        &["--target", &url, "--env", "BASE=http://127.0.0.1:9"],
        &[],
    );
    ran.sent_to_the_lab();
    assert!(ran.stderr().contains("--env BASE: nothing in"), "{}", ran.stderr());
}

#[test]
fn a_target_that_cannot_be_filled_in_exits_2_and_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path(), "\"{{env.THRONG_TEST_UNSET}}\"");
    let name = file.display().to_string();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[],
            &[
                ":1:",
                "{{env.THRONG_TEST_UNSET}} is not set",
                "--env THRONG_TEST_UNSET=URL",
                "--target URL",
            ],
        ),
        (
            &["--env", "THRONG_TEST_UNSET=ftp://127.0.0.1/"],
            &["{{env.THRONG_TEST_UNSET}} from the environment", "scheme 'ftp'"],
        ),
        (
            &["--target", "127.0.0.1:8080"],
            &["--target replaces this target", "not a URL"],
        ),
    ];
    for (args, needles) in cases {
        let ran = run(dir.path(), &file, args, &[("THRONG_TEST_UNSET", None)]);
        let err = ran.stderr();
        assert_eq!(ran.code(), 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(&name), "{args:?} names the file: {err}");
        for n in *needles {
            assert!(err.contains(n), "{args:?} should say {n}: {err}");
        }
        assert!(ran.result.is_none(), "nothing ran");
    }
    // Only {{env.…}} may fill a target in: it is fixed before any VU runs.
    let file = scenario(dir.path(), "\"http://127.0.0.1:{{vu}}\"");
    let ran = run(dir.path(), &file, &[], &[]);
    assert_eq!(ran.code(), 2, "{}", ran.stderr());
    assert!(ran.stderr().contains("only {{env.NAME}}"), "{}", ran.stderr());
}

#[test]
fn k8s_agents_get_the_target_from_their_env_flags() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path(), "\"{{env.BASE}}\"");
    let job = |extra: &[&str]| {
        output(
            throng()
                .args(["k8s", "job"])
                .arg(&file)
                .args(["--parallelism", "2", "--"])
                .args(extra)
                .env_remove("BASE"),
        )
    };
    let o = job(&["--env", "BASE=http://shop:8080"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let yaml = String::from_utf8(o.stdout).unwrap();
    assert!(yaml.contains("BASE=http://shop:8080"), "the agents get --env: {yaml}");
    let o = job(&["--target", "http://shop:8080"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The pods do not have this shell's environment: --env it is.
    let o = job(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--env BASE=URL"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
