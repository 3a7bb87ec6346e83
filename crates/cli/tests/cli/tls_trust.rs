//! Trusting a server's certificate as curl does, and saying why one is
//! refused: a self-signed certificate given to `--cacert` (the `openssl req
//! -x509` recipe, CA:TRUE) is accepted, its name still checked; every
//! refusal is its own class (expired, not yet valid, wrong name, unknown
//! issuer, a CA as the server's certificate, bad signature, wrong
//! purpose), and the hint never asks for a flag the run already has.
//! Certificates are made here (openssl for the recipe users follow, rcgen
//! for dates and extensions), served by nginx on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Nginx, assert_books_balance, http};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// nginx serving `chain` (PEM, the server's certificate first) with `key`.
fn serve(dir: &Path, name: &str, chain: &str, key: &str) -> Nginx {
    let cert = write(dir, &format!("{name}.pem"), chain);
    let key = write(dir, &format!("{name}.key"), key);
    Nginx::start_tls(
        &format!(
            "ssl_certificate {}; ssl_certificate_key {};",
            cert.display(),
            key.display()
        ),
        "location / { return 200 \"trusted\"; }",
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A self-signed certificate for localhost and 127.0.0.1, CA:TRUE, within
/// `not_before..not_after`: (certificate PEM, key PEM).
fn self_signed_ca(not_before: OffsetDateTime, not_after: OffsetDateTime) -> (String, String) {
    let mut p = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p.not_before = not_before;
    p.not_after = not_after;
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A CA named `cn`: its issuer and its certificate's PEM.
fn ca(cn: &str) -> (CertifiedIssuer<'static, KeyPair>, String) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let issuer = CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap();
    let pem = issuer.pem();
    (issuer, pem)
}

/// A server certificate for localhost issued by `by`, for `eku`.
fn leaf(by: &CertifiedIssuer<'static, KeyPair>, eku: ExtendedKeyUsagePurpose) -> (String, String) {
    let mut p = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p.extended_key_usages = vec![eku];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, by).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// `throng http URL --cacert CA -n 3 -c 1 EXTRA`.
fn get(url: &str, cacert: &Path, extra: &[&str]) -> common::Run {
    let mut args = vec![url, "--cacert", cacert.to_str().unwrap(), "-n", "3", "-c", "1"];
    args.extend_from_slice(extra);
    http(&args)
}

#[test]
fn a_self_signed_certificate_given_to_cacert_is_trusted_as_curl_trusts_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The recipe users follow: openssl's req -x509 makes CA:TRUE.
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(d.join("self.key"))
        .arg("-out")
        .arg(d.join("self.pem"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(d.join("self.pem"))
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "the recipe's certificate is a CA certificate"
    );
    let cert = std::fs::read_to_string(d.join("self.pem")).unwrap();
    let key = std::fs::read_to_string(d.join("self.key")).unwrap();
    let nginx = serve(d, "served", &cert, &key);
    let cacert = d.join("self.pem");

    // Refused before as tls.bad_certificate, with no reason.
    let run = get(&nginx.https("localhost", "/"), &cacert, &["--no-keepalive"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 3);
    assert_eq!(run.result().measurements.tls.as_ref().unwrap().handshakes, 3);
    assert_books_balance(run.result());
    // By its IP address too (the SAN has it).
    let run = get(&nginx.https("127.0.0.1", "/"), &cacert, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());

    // Trusted by exact match, its name is still checked.
    let run = get(&nginx.https("localhost", "/"), &cacert, &["--sni", "other.example"]);
    assert_eq!(run.code(), 1);
    let m = &run.result().measurements;
    assert_eq!(
        m.requests.error("tls.certificate_name_mismatch"),
        3,
        "{:?}",
        m.requests.errors
    );
    assert_books_balance(run.result());

    // The same certificate is not trusted when --cacert holds another one:
    // a CA certificate served as the server's, said as such, and the hint
    // does not ask for --cacert as if it were missing.
    let other = write(d, "other.pem", &self_signed_ca(days(-1), days(30)).0);
    let run = get(&nginx.https("localhost", "/"), &other, &[]);
    assert_eq!(run.code(), 1);
    let m = &run.result().measurements;
    assert_eq!(
        m.requests.error("tls.ca_used_as_end_entity"),
        3,
        "{:?}",
        m.requests.errors
    );
    let e = run.stderr();
    assert!(e.contains("CA certificate (CA:TRUE)"), "{e}");
    assert!(e.contains("it is not in") && e.contains("other.pem"), "{e}");
}

fn days(n: i64) -> OffsetDateTime {
    OffsetDateTime::now_utc() + Duration::days(n)
}

#[test]
fn every_refusal_names_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca_a, ca_a_pem) = ca("CA A");
    let ca_a_file = write(d, "ca-a.pem", &ca_a_pem);
    let (ca_b, _) = ca("CA B");
    // An impostor with CA A's name and its own key.
    let (impostor, _) = ca("CA A");

    let (expired, expired_key) = self_signed_ca(days(-30), days(-1));
    let expired_file = write(d, "expired.pem", &expired);
    let (early, early_key) = self_signed_ca(days(2), days(30));
    let early_file = write(d, "early.pem", &early);
    let (by_b, by_b_key) = leaf(&ca_b, ExtendedKeyUsagePurpose::ServerAuth);
    let (forged, forged_key) = leaf(&impostor, ExtendedKeyUsagePurpose::ServerAuth);
    let (client_only, client_only_key) = leaf(&ca_a, ExtendedKeyUsagePurpose::ClientAuth);

    // (what is served, the --cacert given, the class, words of the hint)
    let cases: [(&str, &str, &str, &Path, &str, &str); 5] = [
        (
            "expired",
            &expired,
            &expired_key,
            expired_file.as_path(),
            "tls.certificate_expired",
            "renew",
        ),
        (
            "early",
            &early,
            &early_key,
            early_file.as_path(),
            "tls.certificate_not_yet_valid",
            "clock",
        ),
        (
            "by_b",
            &by_b,
            &by_b_key,
            ca_a_file.as_path(),
            "tls.unknown_ca",
            "is not in",
        ),
        (
            "forged",
            &forged,
            &forged_key,
            ca_a_file.as_path(),
            "tls.bad_certificate_signature",
            "not its key",
        ),
        (
            "client_only",
            &client_only,
            &client_only_key,
            ca_a_file.as_path(),
            "tls.certificate_invalid_purpose",
            "server authentication",
        ),
    ];
    for (name, cert, key, cacert, class, hint) in cases {
        let nginx = serve(d, name, cert, key);
        let run = get(&nginx.https("localhost", "/"), cacert, &[]);
        assert_eq!(run.code(), 1, "{name}: {}", run.stderr());
        let m = &run.result().measurements;
        assert_eq!(m.requests.error(class), 3, "{name}: {:?}", m.requests.errors);
        assert_eq!(m.connections.error(class), 3, "{name}: {:?}", m.connections.errors);
        assert_books_balance(run.result());
        let e = run.stderr();
        assert!(e.contains(class) && e.contains(hint), "{name}: {e}");
        assert!(
            !e.contains("certificate rejected"),
            "{name}: a reason, not a bare refusal: {e}"
        );
        assert!(!e.contains("check --cacert"), "{name}: {e}");
    }
    // The reason is in the text report as a sentence too.
    let nginx = serve(d, "by_b2", &by_b, &by_b_key);
    let out = common::output(
        common::throng()
            .args(["http", &nginx.https("localhost", "/"), "--cacert"])
            .arg(&ca_a_file)
            .args(["-n", "2", "-c", "1"]),
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("tls.unknown_ca") && report.contains("not issued by a trusted CA"),
        "{report}"
    );
    // Without --cacert, the hint says to give one.
    let run = http(&[&nginx.https("localhost", "/"), "-n", "2", "-c", "1"]);
    assert_eq!(run.result().measurements.requests.error("tls.unknown_ca"), 2);
    assert!(run.stderr().contains("give --cacert FILE"), "{}", run.stderr());
}
