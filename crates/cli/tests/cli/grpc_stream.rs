//! `throng grpc` server-streaming calls against the grpcio test server
//! (`grpc/grpc_server.py`, method `throngtest.Tester/Watch`): messages
//! counted, `first_message` and `last_message` timed, statuses after the
//! messages, `--expect-messages`, deadlines that cut a stream, and the
//! flags that do not fit the method.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::{GrpcServer, here};

use common::{Run, assert_books_balance, schema_violations, throng};

/// Runs `throng grpc ADDR --plaintext --proto tester.proto --call
/// Tester/Watch --data DATA ARGS --json FILE` and reads the result.
fn watch(addr: &str, data: &str, args: &[&str]) -> Run {
    common::with_json(
        throng()
            .args(["grpc", addr, "--plaintext", "--proto"])
            .arg(here("tester.proto"))
            .args(["--call", "throngtest.Tester/Watch", "--data", data, "-t", "1"])
            .args(args),
    )
}

#[test]
fn each_call_counts_its_messages_and_times_the_first_and_the_last() {
    let server = GrpcServer::start(None);
    let run = watch(
        &server.addr,
        r#"{"name": "throng", "count": 5}"#,
        &["-n", "40", "-c", "2", "--streams", "4"],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.attempted, 40);
    assert_eq!(m.requests.ok, 40);
    assert_eq!(m.status.get(&0), Some(&40));
    assert_eq!(m.messages, 200);
    // Each reply is CallReply{message: "hello throng #I"}: 5 bytes of
    // prefix, 2 of field header, 15 of text; five of them per call.
    assert_eq!(m.bytes.received_body, 40 * 5 * 22);
    let (first, last) = (&m.phases["first_message"], &m.phases["last_message"]);
    assert_eq!(first.count(), 40);
    assert_eq!(last.count(), 40);
    // Per call the first message comes no later than the last, and the
    // last no later than the trailers that end the call.
    assert!(first.min() <= last.min() && first.max() <= last.max());
    assert!(last.max() <= m.phases["response"].max());
    let out = run.stdout();
    assert!(out.contains("grpc-status   OK=40"), "{out}");
    assert!(
        out.contains("messages      200 received, 5.0 per answered call"),
        "{out}"
    );
    assert!(out.contains("first_message") && out.contains("last_message"), "{out}");
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
    let doc = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&run.json).unwrap()).unwrap();
    assert_eq!(doc["plan"]["grpc"]["server_streaming"], true);
    assert_eq!(doc["measurements"]["messages"], 200);
}

#[test]
fn expect_messages_fails_the_calls_of_another_length() {
    let server = GrpcServer::start(None);
    let data = r#"{"count": 3}"#;
    let run = watch(&server.addr, data, &["-n", "20", "--expect-messages", "3"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 20);
    assert!(
        run.stdout().contains("3 expected (--expect-messages)"),
        "{}",
        run.stdout()
    );

    let run = watch(&server.addr, data, &["-n", "20", "--expect-messages", "4"]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.ok, 0);
    assert_eq!(m.requests.errors.get("check_failed"), Some(&20));
    // The calls ended OK: it is the count that failed them.
    assert_eq!(m.status.get(&0), Some(&20));
    assert_eq!(m.messages, 60);
    assert!(run.stderr().contains("--expect-messages"), "{}", run.stderr());
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
}

#[test]
fn a_status_after_the_messages_is_the_calls_status() {
    let server = GrpcServer::start(None);
    let run = watch(
        &server.addr,
        r#"{"count": 2, "code": 14}"#,
        &["-n", "30", "--streams", "8"],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.errors.get("check_failed"), Some(&30));
    assert_eq!(m.status.get(&14), Some(&30));
    assert_eq!(m.messages, 60);
    assert_eq!(m.phases["first_message"].count(), 30);
    assert!(run.stdout().contains("UNAVAILABLE=30"), "{}", run.stdout());

    // None at all: an OK call without messages, timed by neither phase.
    let run = watch(&server.addr, r#"{"count": 0}"#, &["-n", "10"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.requests.ok, 10);
    assert_eq!(m.messages, 0);
    assert!(m.phases.get("first_message").is_none_or(|h| h.count() == 0));
}

#[test]
fn a_deadline_cuts_the_stream_and_keeps_what_arrived() {
    let server = GrpcServer::start(None);
    // The first message at once, the next a second later: past the deadline.
    let run = watch(
        &server.addr,
        r#"{"count": 10, "sleep_ms": 1000}"#,
        &["-n", "6", "--streams", "6", "--deadline", "300ms"],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.errors.get("grpc.deadline_exceeded"), Some(&6));
    assert!(m.messages >= 1 && m.messages <= 6, "messages {}", m.messages);
    // Cut-off calls are not timed to their last message.
    assert!(m.phases.get("last_message").is_none_or(|h| h.count() == 0));
    assert_eq!(m.connections.ok, 1);
}

#[test]
fn expect_messages_on_a_unary_method_is_refused() {
    let proto = here("tester.proto");
    let proto = proto.to_str().unwrap();
    let base = ["grpc", "127.0.0.1:9", "--plaintext", "--proto", proto, "-n", "1"];
    let cases: [(&[&str], &str); 1] = [(
        &["--call", "throngtest.Tester/Call", "--expect-messages", "2"],
        "--expect-messages: throngtest.Tester/Call is a unary method",
    )];
    for (extra, want) in cases {
        let o = common::output(throng().args(base).args(extra));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
    }
}

#[test]
fn messages_of_calls_all_cut_off_are_not_divided_by_no_call() {
    let server = GrpcServer::start(None);
    // The first message at once, the next after 2 s: a 300 ms deadline
    // cuts every call after one message.
    let run = watch(
        &server.addr,
        r#"{"count": 3, "sleep_ms": 2000}"#,
        &["-n", "4", "--streams", "4", "--deadline", "300ms"],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.errors.get("grpc.deadline_exceeded"), Some(&4));
    assert_eq!(m.messages, 4);
    let out = run.stdout();
    assert!(out.contains("messages      4 received, no call answered"), "{out}");
    assert!(!out.contains("per answered call"), "{out}");
}
