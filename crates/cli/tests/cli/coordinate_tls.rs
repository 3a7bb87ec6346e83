//! `throng agent` and `throng coordinate` over TLS and mTLS, and the token:
//! proved, never sent, never shown; every refusal clear on both sides.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::coordinate::Agent;

use std::path::Path;

use common::{assert_books_balance, throng};
use throng_result::RunResult;

const TOKEN: &str = "tok-tls-5d2a9e";

/// `throng agent --listen 127.0.0.1:0 ARGS` (the shared one: port 0, the
/// address it prints).
fn agent(args: &[&str]) -> Agent {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    Agent::start_with(&args)
}

/// `throng coordinate --agents A,B [extra] -- COMMAND`: (exit code, stderr).
fn coordinate(agents: &[&Agent], extra: &[&str], command: &[&str]) -> (i32, String) {
    let list: Vec<&str> = agents.iter().map(|a| a.addr.as_str()).collect();
    let out = common::output(
        throng()
            .args(["coordinate", "--agents", &list.join(",")])
            .args(extra)
            .arg("--")
            .args(command),
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn nginx(log: &Path) -> common::Nginx {
    common::Nginx::start(&format!(
        "location / {{ access_log {}; return 200 \"ok\\n\"; }}",
        log.display()
    ))
}

#[test]
fn two_agents_over_mutual_tls_with_a_token_count_every_request_and_never_show_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_c, certs) = common::certs();
    let p = |n: &str| certs.join(n).display().to_string();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let token = token.display().to_string();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let tls = [
        "--token-file",
        &token,
        "--tls-cert",
        &p("server.pem"),
        "--tls-key",
        &p("server.key"),
        "--client-ca",
        &p("ca.pem"),
    ];
    let (a, b) = (agent(&tls), agent(&tls));
    let json = dir.path().join("all.json");
    let (code, stderr) = coordinate(
        &[&a, &b],
        &[
            "--token-file",
            &token,
            "--cacert",
            &p("ca.pem"),
            "--cert",
            &p("client.pem"),
            "--key",
            &p("client.key"),
            "--json",
            json.to_str().unwrap(),
        ],
        &["http", &server.url("/"), "-n", "1000", "-c", "2"],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 1000);
    assert_eq!(r.measurements.requests.attempted, 1000);
    assert_eq!(common::access_log(&log).len(), 1000, "nginx's count");
    assert_eq!(r.parts.len(), 2);
    for (agent, seg) in [(&a, "0:1/2"), (&b, "1/2:1")] {
        let named = format!("agent {}: segment {seg}: 500 requests (500 ok)", agent.addr);
        assert!(r.notes.contains(&named), "{named} not in {:?}", r.notes);
        let clock = format!("agent {}: clock offset ", agent.addr);
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with(&clock) && n.contains("ms round trip")),
            "{:?}",
            r.notes
        );
        let said = agent.wait_said("finished");
        assert!(
            said.contains("TLS, coordinators with a certificate of --client-ca only"),
            "{said}"
        );
        assert!(!said.contains(TOKEN), "the token leaked: {said}");
    }
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains(TOKEN) && !stderr.contains(TOKEN), "the token leaked");

    // Plain TCP to a TLS agent: a clear error, not a hang.
    let (code, stderr) = coordinate(
        &[&a],
        &["--token-file", &token],
        &["http", &server.url("/"), "-n", "10"],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("needs --cacert here"), "{stderr}");
    assert_eq!(common::access_log(&log).len(), 1000);
}

#[test]
fn a_missing_token_a_wrong_ca_or_no_client_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_c, certs) = common::certs();
    let (_o, other) = common::certs();
    let p = |n: &str| certs.join(n).display().to_string();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let token = token.display().to_string();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    let wrong = wrong.display().to_string();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let command = ["http", &server.url("/"), "-n", "10", "-c", "1"];

    // A plain agent with a token: none, or a wrong one, is refused (exit 2)
    // and both sides say why.
    let plain = agent(&["--token-file", &token]);
    let (code, stderr) = coordinate(&[&plain], &[], &command);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "agent {} refused: no token: this agent requires one",
            plain.addr
        )),
        "{stderr}"
    );
    plain.wait_said("no token: this agent requires one");
    let (code, stderr) = coordinate(&[&plain], &["--token-file", &wrong], &command);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("agent {} refused: wrong token", plain.addr)),
        "{stderr}"
    );
    let said = plain.wait_said("wrong token");
    assert!(!said.contains(TOKEN) && !said.contains("not-the-token"), "{said}");
    assert!(!stderr.contains(TOKEN) && !stderr.contains("not-the-token"), "{stderr}");

    // A TLS agent whose certificate the coordinator's CA did not issue.
    let tls = agent(&["--tls-cert", &p("server.pem"), "--tls-key", &p("server.key")]);
    let other_ca = other.join("ca.pem").display().to_string();
    let (code, stderr) = coordinate(&[&tls], &["--cacert", &other_ca], &command);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("agent {}: the TLS handshake failed", tls.addr))
            && stderr.contains("issued by --cacert"),
        "{stderr}"
    );
    tls.wait_said("the TLS handshake failed");

    // mTLS: a coordinator without a client certificate is refused.
    let mtls = agent(&[
        "--tls-cert",
        &p("server.pem"),
        "--tls-key",
        &p("server.key"),
        "--client-ca",
        &p("ca.pem"),
    ]);
    let (code, stderr) = coordinate(&[&mtls], &["--cacert", &p("ca.pem")], &command);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--client-ca") && stderr.contains("--cert/--key"),
        "{stderr}"
    );
    mtls.wait_said("the TLS handshake failed");
    assert!(common::access_log(&log).is_empty(), "a refused coordinator ran nothing");
}

#[test]
fn an_endless_or_unreadable_certificate_file_is_a_bounded_usage_error() {
    let (_c, certs) = common::certs();
    let key = certs.join("server.key").display().to_string();
    let out = common::output(throng().args([
        "agent",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        "/dev/zero",
        "--tls-key",
        &key,
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--tls-cert /dev/zero") && stderr.len() < 1000,
        "{stderr}"
    );
    let out = common::output(throng().args([
        "coordinate",
        "--agents",
        "127.0.0.1:9",
        "--cacert",
        "/dev/zero",
        "--",
        "http",
        "http://127.0.0.1:9/",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--cacert /dev/zero") && stderr.len() < 1000, "{stderr}");
    let out = common::output(throng().args([
        "agent",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        &key,
        "--tls-key",
        &key,
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--tls-cert") && stderr.contains("no PEM certificate"),
        "{stderr}"
    );
}

/// `--sni`: agents reached by address share one certificate for a name; the
/// coordinator verifies that name instead of the address it dials.
#[test]
fn sni_verifies_the_agents_certificate_for_a_name_not_the_address() {
    let dir = tempfile::tempdir().unwrap();
    let (_c, certs) = common::certs_with(&["--hosts", "throng-agent"]);
    let p = |n: &str| certs.join(n).display().to_string();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let command = ["http", &server.url("/"), "-n", "10", "-c", "1"];
    let tls = agent(&["--tls-cert", &p("server.pem"), "--tls-key", &p("server.key")]);
    // The certificate does not name 127.0.0.1.
    let (code, stderr) = coordinate(&[&tls], &["--cacert", &p("ca.pem")], &command);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the TLS handshake failed") && stderr.contains("a certificate for '127.0.0.1'"),
        "{stderr}"
    );
    let (code, stderr) = coordinate(&[&tls], &["--cacert", &p("ca.pem"), "--sni", "throng-agent"], &command);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("1 agents over TLS (each verified as 'throng-agent')"),
        "{stderr}"
    );
    assert_eq!(common::access_log(&log).len(), 10);
    // Another name is refused as the address was.
    let (code, stderr) = coordinate(&[&tls], &["--cacert", &p("ca.pem"), "--sni", "other-name"], &command);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("a certificate for 'other-name'"), "{stderr}");
    // --sni names what to verify: without --cacert it is a usage error.
    let (code, stderr) = coordinate(&[&tls], &["--sni", "throng-agent"], &command);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--cacert"), "{stderr}");
}
