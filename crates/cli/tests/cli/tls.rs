//! TLS and mTLS against real nginx, with certificates from `throng certs`:
//! full and resumed handshakes, and the right outcome for every way a
//! handshake goes wrong.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{Nginx, assert_books_balance, certs_with as certs, http, p, throng};

/// nginx over TLS 1.2 and 1.3 with a session cache and tickets (for
/// resumption), asking for a client certificate with `mtls`.
pub(crate) fn nginx_tls(c: &Path, mtls: bool) -> Nginx {
    common::nginx_tls(
        c,
        "ssl",
        mtls,
        "ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:1m; ssl_session_tickets on;",
        "location / { return 200 \"tls\"; }",
    )
}

#[test]
fn full_handshakes_by_default_resumed_when_asked() {
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    let ca = p(&c, "ca.pem");
    let run = http(&[
        &nginx.https("localhost", "/"),
        "--cacert",
        &ca,
        "-n",
        "300",
        "-c",
        "3",
        "--no-keepalive",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 300);
    let t = m.tls.as_ref().unwrap();
    assert_eq!(t.handshakes, 300);
    assert_eq!(t.resumed, 0, "storms and loads measure full handshakes unless told");
    assert_eq!(m.phases["tls"].count(), 300, "one tls sample per handshake");
    assert_eq!(t.versions.get("TLSv1_3"), Some(&300));
    assert!(run.stdout().contains("certificates verified against"));
    let problems = common::schema_violations(&run.json);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");

    let run = http(&[
        &nginx.https("localhost", "/"),
        "--cacert",
        &ca,
        "-n",
        "300",
        "-c",
        "1",
        "--no-keepalive",
        "--tls-resume",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let t = run.result().measurements.tls.clone().unwrap();
    assert_eq!(t.handshakes, 300);
    assert!(t.resumed >= 250, "most handshakes resume a session: {t:?}");

    // TLS 1.2 and a chosen group are negotiated and reported.
    let run = http(&[
        &nginx.https("localhost", "/"),
        "--cacert",
        &ca,
        "-n",
        "20",
        "-c",
        "1",
        "--tls-version",
        "1.2",
        "--tls-groups",
        "p256",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let t = run.result().measurements.tls.clone().unwrap();
    assert_eq!(t.versions.get("TLSv1_2"), Some(&1));
    assert_eq!(t.groups.get("secp256r1"), Some(&1));
}

#[test]
fn verification_failures_are_classified() {
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    // An unknown CA (no --cacert): matrix::http1_tls::fault.
    // A name the certificate was not issued for.
    let ca = p(&c, "ca.pem");
    let run = http(&[
        &nginx.https("127.0.0.1", "/"),
        "--cacert",
        &ca,
        "--sni",
        "other.example",
        "-n",
        "5",
        "-c",
        "1",
    ]);
    assert_eq!(
        run.result()
            .measurements
            .requests
            .error("tls.certificate_name_mismatch"),
        5
    );

    // --insecure accepts it, and the report says so.
    let run = http(&[
        &nginx.https("127.0.0.1", "/"),
        "--insecure",
        "--sni",
        "other.example",
        "-n",
        "5",
        "-c",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stdout().contains("NOT verified (--insecure)"));
}

#[test]
fn expired_certificates_fail_verification() {
    let (_d, c) = certs(&["--expired"]);
    let nginx = nginx_tls(&c, false);
    let run = http(&[
        &nginx.https("localhost", "/"),
        "--cacert",
        &p(&c, "ca.pem"),
        "-n",
        "4",
        "-c",
        "1",
    ]);
    assert_eq!(run.code(), 1);
    assert_eq!(run.result().measurements.requests.error("tls.certificate_expired"), 4);
}

#[test]
fn mtls_with_and_without_a_client_certificate() {
    let (_d, c) = certs(&["--rsa"]);
    let nginx = nginx_tls(&c, true);
    let ca = p(&c, "ca.pem");
    let run = http(&[
        &nginx.https("localhost", "/"),
        "--cacert",
        &ca,
        "--cert",
        &p(&c, "client.pem"),
        "--key",
        &p(&c, "client.key"),
        "-n",
        "100",
        "-c",
        "2",
        "--no-keepalive",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 100);
    assert!(run.stdout().contains("client certificate (mTLS)"));

    // nginx completes the handshake and answers 400 "No required SSL
    // certificate was sent": a response the plan does not expect.
    let run = http(&[&nginx.https("localhost", "/"), "--cacert", &ca, "-n", "10", "-c", "1"]);
    assert_eq!(run.code(), 1);
    let m = &run.result().measurements;
    assert_eq!(m.requests.error("check_failed"), 10);
    assert_eq!(m.status.get(&400), Some(&10));
}

#[test]
fn lab_server_requires_client_certificates_with_mtls() {
    let (_d, c) = certs(&[]);
    let ca = p(&c, "ca.pem");
    let read = |n: &str| (n.to_string(), std::fs::read(c.join(n)).unwrap());
    let config = throng_tls::server_config(&read("server.pem"), &read("server.key"), Some(&read("ca.pem"))).unwrap();
    let server = throng_lab::LabServer::start(&throng_lab::LabConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        stall: None,
        tls: Some(config),
    })
    .unwrap();
    let url = format!("https://localhost:{}/", server.addr().port());
    let ok = http(&[
        &url,
        "--cacert",
        &ca,
        "--cert",
        &p(&c, "client.pem"),
        "--key",
        &p(&c, "client.key"),
        "-n",
        "50",
    ]);
    assert_eq!(ok.code(), 0, "{}", ok.stderr());
    let without = http(&[&url, "--cacert", &ca, "-n", "8", "-c", "2"]);
    assert_eq!(without.code(), 1);
    assert_eq!(
        without.result().measurements.requests.error("tls.certificate_required"),
        8
    );
}

#[test]
fn tls_flag_mistakes_exit_2() {
    let (_d, c) = certs(&[]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["--cacert", "/nonexistent.pem"],
            "--cacert /nonexistent.pem: cannot read it",
        ),
        (&["--cacert", "/etc/hostname"], "--cacert /etc/hostname"),
        (&["--tls-groups", "x448"], "--tls-groups"),
        (&["--tls-version", "1.1"], "--tls-version"),
        (&["--insecure", "--cacert", "/etc/hostname"], "--insecure"),
    ];
    for (args, needle) in cases {
        let out = common::output(throng().args(["http", "https://127.0.0.1:9/", "-n", "1"]).args(*args));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = common::output(throng().args(["http", "http://127.0.0.1:9/", "--cacert", &p(&c, "ca.pem")]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TLS flags apply to https:// URLs"));
}

/// Runs `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = common::output(std::process::Command::new("openssl").current_dir(dir).args(args));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// X.509 v1 certificates as the most common recipe makes them: `openssl
/// x509 -req` without an extensions file, for the CA (signing its own
/// request) and for the client (signed by that CA).
fn v1_ca_and_client(dir: &Path) {
    for args in [
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "v1ca.key",
        ][..],
        &[
            "req",
            "-new",
            "-key",
            "v1ca.key",
            "-subj",
            "/CN=v1 CA",
            "-out",
            "v1ca.csr",
        ],
        &[
            "x509", "-req", "-in", "v1ca.csr", "-signkey", "v1ca.key", "-days", "2", "-out", "v1ca.pem",
        ],
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "v1client.key",
        ],
        &[
            "req",
            "-new",
            "-key",
            "v1client.key",
            "-subj",
            "/CN=v1 client",
            "-out",
            "v1client.csr",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "v1client.csr",
            "-CA",
            "v1ca.pem",
            "-CAkey",
            "v1ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "v1client.pem",
        ],
    ] {
        openssl(dir, args);
    }
    // Both are really v1: no version field, no extensions.
    for cert in ["v1ca.pem", "v1client.pem"] {
        let out = common::output(
            std::process::Command::new("openssl")
                .current_dir(dir)
                .args(["x509", "-noout", "-text", "-in", cert]),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Version: 1 (0x0)"), "{cert}: {text}");
    }
}

#[test]
fn x509_v1_client_certificates_are_presented() {
    let (_d, c) = certs(&[]);
    v1_ca_and_client(&c);
    let nginx = Nginx::start_tls(
        &format!(
            "ssl_certificate {}; ssl_certificate_key {}; ssl_client_certificate {}; ssl_verify_client on;",
            p(&c, "server.pem"),
            p(&c, "server.key"),
            p(&c, "v1ca.pem")
        ),
        "location / { return 200 \"$ssl_client_s_dn\"; }",
    );
    let url = nginx.https("localhost", "/");
    let ca = p(&c, "ca.pem");
    let run = http(&[
        &url,
        "--cacert",
        &ca,
        "--cert",
        &p(&c, "v1client.pem"),
        "--key",
        &p(&c, "v1client.key"),
        "-n",
        "20",
        "-c",
        "2",
        "--no-keepalive",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.requests.ok, 20, "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&20));
    assert_books_balance(run.result());

    // nginx's verdict is real: the v3 client certificate of another CA
    // gets 400 (the handshake completes, the certificate is refused).
    let run = http(&[
        &url,
        "--cacert",
        &ca,
        "--cert",
        &p(&c, "client.pem"),
        "--key",
        &p(&c, "client.key"),
        "-n",
        "5",
        "-c",
        "1",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_eq!(run.result().measurements.status.get(&400), Some(&5));

    // A key that is not the certificate's: a clear usage error, before any
    // connection.
    let run = http(&[
        &url,
        "--cacert",
        &ca,
        "--cert",
        &p(&c, "v1client.pem"),
        "--key",
        &p(&c, "client.key"),
        "-n",
        "1",
    ]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr()
            .contains("client.key is not the private key of the certificate in")
            && run.stderr().contains("their public keys differ"),
        "{}",
        run.stderr()
    );
}

#[test]
fn certs_refuses_to_write_a_key_through_a_planted_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    std::fs::create_dir_all(&out).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("client.key")).unwrap();
    let o = common::output(throng().args(["certs", "--out", out.to_str().unwrap()]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("client.key' is a symbolic link; refusing to write a private key through it"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}
