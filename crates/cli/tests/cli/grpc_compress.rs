//! `throng grpc --grpc-encoding gzip` against the grpcio test server: request
//! messages compressed (the server reads them), gzip replies inflated and
//! counted, a reply that inflates past 4 MiB refused as `grpc.too_large`, a
//! server without gzip answering `UNIMPLEMENTED` counted by that status.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::{GrpcServer, here};

use common::{Run, assert_books_balance, schema_violations, throng};

/// Runs `throng grpc ADDR --plaintext --proto tester.proto --call
/// Tester/METHOD ARGS --json FILE` and reads the result.
fn call(addr: &str, method: &str, args: &[&str]) -> Run {
    common::with_json(
        throng()
            .args(["grpc", addr, "--plaintext", "--proto"])
            .arg(here("tester.proto"))
            .args(["--call", &format!("throngtest.Tester/{method}"), "-t", "1"])
            .args(args),
    )
}

#[test]
fn requests_go_compressed_and_the_server_reads_them() {
    let server = GrpcServer::counting(None);
    let data = format!(r#"{{"name": "{}"}}"#, "a".repeat(4000));
    let gzip = call(
        &server.addr,
        "Call",
        &["--data", &data, "-n", "10", "--grpc-encoding", "gzip"],
    );
    assert_eq!(gzip.code(), 0, "stderr: {}", gzip.stderr());
    let r = gzip.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 10);
    // The server decoded each: its reply "hello aaa…" (4006 bytes of text,
    // 3 of field header, 5 of prefix) came back uncompressed.
    assert_eq!(r.measurements.bytes.received_body, 10 * (5 + 3 + 4006));
    let plain = call(&server.addr, "Call", &["--data", &data, "-n", "10"]);
    assert_eq!(plain.code(), 0, "stderr: {}", plain.stderr());
    let (zipped, unzipped) = (r.measurements.bytes.sent, plain.result().measurements.bytes.sent);
    assert!(unzipped > 10 * 4000, "{unzipped}");
    assert!(zipped * 4 < unzipped, "compressed {zipped}, not {unzipped}");
    assert_eq!(server.calls(), 20);
    let violations = schema_violations(&gzip.json);
    assert!(violations.is_empty(), "{violations:?}");
    let doc = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&gzip.json).unwrap()).unwrap();
    assert_eq!(doc["plan"]["grpc"]["encoding"], "gzip");
}

#[test]
fn gzip_replies_are_inflated_and_counted() {
    let server = GrpcServer::compressing();
    let run = call(
        &server.addr,
        "Call",
        &["--data", r#"{"pad": 200000}"#, "-n", "8", "--grpc-encoding", "gzip"],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 8);
    // 200 KB of 'x' a reply, compressed on the wire.
    assert!(m.bytes.received_body < 8 * 20_000, "{}", m.bytes.received_body);
    // A bidirectional call both ways compressed: every reply counted.
    let run = call(
        &server.addr,
        "Chat",
        &[
            "--data",
            r#"{"name": "z"}"#,
            "--stream-messages",
            "6",
            "-n",
            "5",
            "--grpc-encoding",
            "gzip",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!((m.requests.ok, m.messages_sent, m.messages), (5, 30, 30));
}

#[test]
fn a_reply_that_inflates_past_4_mib_is_too_large() {
    let server = GrpcServer::compressing();
    // 5 MB of 'x': a few KB compressed, more than a client takes inflated.
    let run = call(
        &server.addr,
        "Call",
        &["--data", r#"{"pad": 5000000}"#, "-n", "4", "--grpc-encoding", "gzip"],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.errors.get("grpc.too_large"), Some(&4));
    assert!(r.measurements.bytes.received_body < 4 << 20);
    assert!(run.stdout().contains("inflates past 4 MiB"), "{}", run.stdout());
}

#[test]
fn an_encoding_throng_cannot_send_is_refused() {
    let o = common::output(
        throng()
            .args(["grpc", "127.0.0.1:9", "--plaintext", "--proto"])
            .arg(here("tester.proto"))
            .args(["--call", "throngtest.Tester/Call", "--grpc-encoding", "br", "-n", "1"]),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--grpc-encoding") && stderr.contains("gzip"),
        "{stderr}"
    );
}

#[test]
fn a_server_without_gzip_answers_unimplemented_and_the_calls_fail_by_status() {
    let server = GrpcServer::without_gzip();
    let data = r#"{"name": "zip"}"#;
    let run = call(
        &server.addr,
        "Call",
        &["--data", data, "-n", "10", "--grpc-encoding", "gzip"],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (10, 0));
    assert_eq!(
        m.requests.errors.get("check_failed"),
        Some(&10),
        "{:?}",
        m.requests.errors
    );
    // UNIMPLEMENTED is gRPC's 12.
    assert_eq!(m.status.get(&12), Some(&10), "{:?}", m.status);
    assert!(
        run.stdout().contains("grpc-status   UNIMPLEMENTED=10"),
        "{}",
        run.stdout()
    );
    // grpcio refused them before its handler.
    assert_eq!(server.calls(), 0, "{}", server.log());
    // The same calls uncompressed are answered.
    let plain = call(&server.addr, "Call", &["--data", data, "-n", "10"]);
    assert_eq!(plain.code(), 0, "stderr: {}", plain.stderr());
    assert_eq!(plain.result().measurements.requests.ok, 10);
    assert_eq!(server.calls(), 10, "{}", server.log());
}
