//! `throng grpc` without `--proto`: the service's descriptors from the
//! server's reflection service (the grpcio test server with
//! grpcio-reflection, which offers only grpc.reflection.v1alpha, so the
//! fall back from v1 is exercised on every run), and the errors when the
//! server has no reflection, no such service, or is not there.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::GrpcServer;

use common::{Run, assert_books_balance, free_port, schema_violations, throng};

/// Runs `throng grpc ADDR ARGS --json FILE` (no --proto) and reads the
/// result.
fn grpc(addr: &str, args: &[&str]) -> Run {
    common::with_json(throng().args(["grpc", addr, "-t", "1"]).args(args))
}

#[test]
fn without_proto_the_server_describes_its_service() {
    let server = GrpcServer::reflecting(None);
    // A message with a field of an imported type: common.proto came too.
    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--call",
            "throngtest.Tester/Call",
            "--data",
            r#"{"name": "throng", "tag": {"key": "k", "values": ["a"]}}"#,
            "-n",
            "50",
            "--streams",
            "4",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.ok, 50);
    // CallReply{message: "hello throng"}: the name was encoded as field 1.
    assert_eq!(m.bytes.received_body, 19 * 50);
    assert!(
        run.stdout().starts_with(&format!(
            "throng grpc {} throngtest.Tester/Call (server reflection)",
            server.addr
        )),
        "{}",
        run.stdout()
    );
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
    let doc = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&run.json).unwrap()).unwrap();
    assert_eq!(doc["plan"]["grpc"]["proto"], "server reflection");

    // The reflected method is server-streaming: it is called as one.
    let run = grpc(
        &server.addr,
        &[
            "--plaintext",
            "--call",
            "throngtest.Tester/Watch",
            "--data",
            r#"{"count": 3}"#,
            "-n",
            "10",
            "--expect-messages",
            "3",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.messages, 30);
}

#[test]
fn reflection_over_tls_uses_the_tls_flags() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let o = common::output(throng().args(["certs", "--out", certs.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(0));
    let server = GrpcServer::reflecting(Some(&certs));
    let ca = certs.join("ca.pem");
    let run = grpc(
        &server.addr,
        &[
            "--cacert",
            ca.to_str().unwrap(),
            "--call",
            "throngtest.Tester/Call",
            "-n",
            "20",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 20);
    // Without the CA, reflection cannot start: a failure, with its class.
    let run = grpc(&server.addr, &["--call", "throngtest.Tester/Call", "-n", "1"]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    assert!(
        run.stderr().contains("server reflection") && run.stderr().contains("tls."),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_server_without_reflection_or_the_service_is_a_config_error() {
    let plain = GrpcServer::start(None);
    let run = grpc(
        &plain.addr,
        &["--plaintext", "--call", "throngtest.Tester/Call", "-n", "1"],
    );
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(
        run.stderr().contains("offers no server reflection") && run.stderr().contains("pass --proto"),
        "{}",
        run.stderr()
    );
    assert!(run.result.is_none(), "nothing ran");

    let reflecting = GrpcServer::reflecting(None);
    let run = grpc(
        &reflecting.addr,
        &["--plaintext", "--call", "throngtest.Nope/Call", "-n", "1"],
    );
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(
        run.stderr().contains("no service throngtest.Nope") && run.stderr().contains("it offers: throngtest.Tester"),
        "{}",
        run.stderr()
    );
    let run = grpc(
        &reflecting.addr,
        &["--plaintext", "--call", "throngtest.Tester/Nope", "-n", "1"],
    );
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(run.stderr().contains("has no method Nope"), "{}", run.stderr());

    // -I looks up --proto's imports: without --proto it is a mistake.
    let run = grpc(
        &reflecting.addr,
        &[
            "--plaintext",
            "--call",
            "throngtest.Tester/Call",
            "-I",
            "/tmp",
            "-n",
            "1",
        ],
    );
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(run.stderr().contains("-I/--import-path"), "{}", run.stderr());
}

#[test]
fn nobody_listening_is_a_failed_run_that_says_so() {
    let addr = format!("127.0.0.1:{}", free_port());
    let run = grpc(&addr, &["--plaintext", "--call", "throngtest.Tester/Call", "-n", "1"]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let stderr = run.stderr();
    assert!(
        stderr.contains("server reflection") && stderr.contains("refused") && stderr.contains("--proto"),
        "{stderr}"
    );
}

/// `grpc/hostile_reflection.py MODE` on a free loopback port; killed on drop.
struct Hostile {
    child: std::process::Child,
    addr: String,
}

impl Hostile {
    fn start(mode: &str) -> Hostile {
        let port = free_port();
        let child = std::process::Command::new("python3")
            .arg(crate::grpc::here("hostile_reflection.py"))
            .args([mode, &port.to_string()])
            .env("GRPC_VERBOSITY", "NONE")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs (scripts/test.sh installs grpcio)");
        let addr = format!("127.0.0.1:{port}");
        common::wait_listening(addr.parse().unwrap());
        Hostile { child, addr }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_hostile_reflection_answer_is_refused_before_it_is_decoded() {
    for (mode, words) in [
        ("many-types", "more than 1000 files or 200000 definitions"),
        ("many-files", "more than 1000 files or 200000 definitions"),
        ("not-reflection", "not a reflection response"),
    ] {
        let server = Hostile::start(mode);
        let ran = crate::hostile_results::run(&[
            "grpc",
            &server.addr,
            "--plaintext",
            "--call",
            "throngtest.Tester/Call",
            "-n",
            "1",
            "--quiet",
        ]);
        assert_eq!(ran.code, 2, "{mode}: {}{}", ran.stdout, ran.stderr);
        assert!(ran.stderr.contains(words), "{mode}: {}", ran.stderr);
        assert!(ran.stderr.contains("--proto FILE"), "{mode}: {}", ran.stderr);
        assert!(!ran.stderr.contains("panicked"), "{mode}: {}", ran.stderr);
        // The answer is 14 MB at most; decoded it was gigabytes.
        assert!(ran.max_rss_kb < 200 * 1024, "{mode}: peak {} kB", ran.max_rss_kb);
    }
}
