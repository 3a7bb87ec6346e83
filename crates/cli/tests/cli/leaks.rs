//! Secrets that must never be written: a password in a scenario's
//! `websocket:` URL or target, `--cookie` in a Kubernetes manifest outside
//! its Secret, a secret header or metadata value in an error message, and
//! `throng grpc --secret-metadata` values in results and reports. Each
//! test runs the command and looks for the secret in every output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{free_port, output, throng};
use throng_result::RunResult;

const SECRET: &str = "Pa55-LEAK-9t";

/// (exit code, stdout, stderr) of `cmd`.
fn run(cmd: &mut std::process::Command) -> (i32, String, String) {
    let o = output(cmd);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every file in `dir` (when given) and every text is free of `SECRET`.
fn nowhere(dir: Option<&std::path::Path>, texts: &[&str]) {
    for entry in dir.map(|d| std::fs::read_dir(d).unwrap()).into_iter().flatten() {
        let path = entry.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(!text.contains(SECRET), "{} holds the secret: {text}", path.display());
    }
    for t in texts {
        assert!(!t.contains(SECRET), "an output holds the secret: {t}");
    }
}

#[test]
fn a_websocket_url_with_credentials_is_refused_unquoted() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ws.yaml");
    std::fs::write(
        &file,
        format!(
            "target: http://127.0.0.1:{port}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    \
             iterations: 2\n    flow:\n      - websocket:\n          url: ws://me:{SECRET}@127.0.0.1:{port}/chat\n          \
             messages: [{{ send: hi }}]\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let p = |name: &str| out.join(name).display().to_string();
    let (code, stdout, stderr) = run(throng().arg("run").arg(&file).args([
        "--json",
        &p("r.json"),
        "--html",
        &p("r.html"),
        "--csv",
        &p("r.csv"),
        "-q",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("credentials") && stderr.contains("ws.yaml:9"),
        "{stderr}"
    );
    nowhere(Some(&out), &[&stdout, &stderr]);
    // Nor does `k8s job` ship it.
    let (code, stdout, stderr) = run(throng().args(["k8s", "job"]).arg(&file).args(["--parallelism", "2"]));
    assert_eq!(code, 2, "{stderr}");
    nowhere(Some(&out), &[&stdout, &stderr]);
}

#[test]
fn a_scenario_target_with_a_password_is_refused_unquoted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    let port = free_port();
    for target in [
        format!("http://me:{SECRET}@127.0.0.1:{port}"),
        format!("http://me:{SECRET}@127.0.0.1:{port}/a?x=1"),
        format!("ftp://me:{SECRET}@127.0.0.1:{port}"),
    ] {
        std::fs::write(
            &file,
            format!(
                "target: {target}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    iterations: 1\n    \
                 flow:\n      - request: {{ path: / }}\n"
            ),
        )
        .unwrap();
        let (code, stdout, stderr) = run(throng().arg("run").arg(&file).arg("-q"));
        assert_eq!(code, 2, "{target}: {stderr}");
        assert!(stderr.contains("t.yaml:1"), "{stderr}");
        nowhere(None, &[&stdout, &stderr]);
        // Given as --target, the same.
        std::fs::write(
            &file,
            "scenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      \
             - request: { path: / }\n",
        )
        .unwrap();
        let (code, stdout, stderr) = run(throng().arg("run").arg(&file).args(["--target", &target, "-q"]));
        assert_eq!(code, 2, "{target}: {stderr}");
        nowhere(None, &[&stdout, &stderr]);
    }
}

#[test]
fn cookies_go_in_the_k8s_secret_not_the_config_map() {
    let (code, stdout, stderr) = run(throng().args([
        "k8s",
        "job",
        "--parallelism",
        "2",
        "--",
        "http",
        "http://svc:8080/",
        "-n",
        "10",
        "--cookie",
        &format!("session={SECRET}"),
    ]));
    assert_eq!(code, 0, "{stderr}");
    common::assert_secret_only_in_the_k8s_secret(&stdout, &stderr, SECRET);
}

#[test]
fn a_bad_secret_header_or_metadata_is_refused_without_its_value() {
    let port = free_port().to_string();
    let url = format!("http://127.0.0.1:{port}/");
    let dir = tempfile::tempdir().unwrap();
    let headers = dir.path().join("headers");
    std::fs::write(&headers, format!("Accept: */*\nAuthorization: Bearer {SECRET}\u{b}x\n")).unwrap();
    let at_file = format!("@{}", headers.display());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "http".into(),
                url.clone(),
                "-H".into(),
                format!("Authorization: Bearer {SECRET}\u{1}"),
            ],
            "-H/--header",
        ),
        (
            vec!["http".into(), url.clone(), "-H".into(), format!("Cookie {SECRET}")],
            "-H/--header",
        ),
        (
            vec!["http".into(), url.clone(), "-H".into(), format!("Bad Name: {SECRET}")],
            "-H/--header",
        ),
        (vec!["http".into(), url.clone(), "-H".into(), at_file], "headers:2"),
        (
            vec![
                "grpc".into(),
                format!("127.0.0.1:{port}"),
                "--plaintext".into(),
                "--call".into(),
                "a.B/C".into(),
                "--metadata".into(),
                format!("authorization Bearer {SECRET}"),
            ],
            "--metadata",
        ),
        (
            vec![
                "grpc".into(),
                format!("127.0.0.1:{port}"),
                "--plaintext".into(),
                "--call".into(),
                "a.B/C".into(),
                "--metadata".into(),
                format!("grpc-key: {SECRET}"),
            ],
            "--metadata",
        ),
    ];
    for (args, names) in cases {
        let (code, stdout, stderr) = run(throng().args(&args).args(["-n", "1", "-q"]));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?}: {stderr}");
        nowhere(None, &[&stdout, &stderr]);
    }
}

#[test]
fn grpc_secret_metadata_is_sent_and_written_nowhere() {
    let server = crate::grpc::GrpcServer::start(None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let p = |name: &str| out.join(name).display().to_string();
    let (code, stdout, stderr) = run(throng()
        .args(["grpc", &server.addr, "--plaintext", "--proto"])
        .arg(crate::grpc::here("tester.proto"))
        .args([
            "--call",
            "throngtest.Tester/Call",
            "--data",
            r#"{"need_metadata": "x-api-key"}"#,
        ])
        .args([
            "--metadata",
            &format!("X-Api-Key: {SECRET}"),
            "--secret-metadata",
            "x-api-key",
        ])
        .args(["-n", "20", "-t", "1", "--json", &p("r.json"), "--html", &p("r.html")])
        .args(["--csv", &p("r.csv"), "--csv-requests", &p("rows.csv")]));
    assert_eq!(code, 0, "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(out.join("r.json")).unwrap()).unwrap();
    // The server saw the key: every call is ok (it answers
    // FAILED_PRECONDITION without it).
    assert_eq!(r.measurements.requests.ok, 20, "{:?}", r.measurements.requests.errors);
    let report = run(throng().args(["report", &p("r.json")])).1;
    nowhere(Some(&out), &[&stdout, &stderr, &report]);
    let text = std::fs::read_to_string(out.join("r.json")).unwrap();
    assert!(text.contains("<redacted>"), "{text}");

    // A key that is not one is refused.
    let (code, _, stderr) = run(throng().args([
        "grpc",
        &server.addr,
        "--plaintext",
        "--call",
        "a.B/C",
        "--secret-metadata",
        "x api key",
    ]));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--secret-metadata"), "{stderr}");
}
