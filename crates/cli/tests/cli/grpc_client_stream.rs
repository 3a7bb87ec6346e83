//! `throng grpc` client-streaming and bidirectional calls against the
//! grpcio test server (`grpc/grpc_server.py`: `Upload` counts the messages
//! it read, `Chat` answers each): what the server counted equals what
//! throng says it sent, replies counted and timed, statuses, a deadline
//! that cuts a stream, JSON-lines messages, and the flags' errors.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::{GrpcServer, here};

use common::{Run, assert_books_balance, schema_violations, throng};

/// Runs `throng grpc ADDR --plaintext --proto tester.proto --call
/// Tester/METHOD ARGS --json FILE` and reads the result.
fn stream(addr: &str, method: &str, args: &[&str]) -> Run {
    common::with_json(
        throng()
            .args(["grpc", addr, "--plaintext", "--proto"])
            .arg(here("tester.proto"))
            .args(["--call", &format!("throngtest.Tester/{method}"), "-t", "1"])
            .args(args),
    )
}

/// The server's log lines starting with `what` (`upload`, `chat`): the
/// number of messages each of those calls read.
fn counted(server: &GrpcServer, what: &str) -> Vec<u64> {
    server
        .log()
        .lines()
        .filter_map(|l| l.strip_prefix(what)?.trim().parse().ok())
        .collect()
}

#[test]
fn each_client_stream_sends_its_messages_and_the_server_counts_them() {
    let server = GrpcServer::counting(None);
    let run = stream(
        &server.addr,
        "Upload",
        &[
            "--data",
            r#"{"name": "a"}"#,
            "--stream-messages",
            "7",
            "-n",
            "30",
            "--streams",
            "4",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!((m.requests.attempted, m.requests.ok), (30, 30));
    assert_eq!(m.status.get(&0), Some(&30));
    assert_eq!(m.messages_sent, 210);
    // One reply a call: CallReply{message: "received 7"}.
    assert_eq!(m.messages, 30);
    assert_eq!(counted(&server, "upload"), vec![7; 30]);
    // The body: seven framed CallRequest{name: "a"} (5 + 3 bytes each).
    assert!(m.bytes.sent >= 30 * 7 * 8, "sent {}", m.bytes.sent);
    // A single reply is timed by the call's phases, not first_message.
    assert!(m.phases.get("first_message").is_none_or(|h| h.count() == 0));
    let out = run.stdout();
    assert!(
        out.contains("requested     210 sent (7 a call, --stream-messages)"),
        "{out}"
    );
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
    let doc = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&run.json).unwrap()).unwrap();
    assert_eq!(doc["plan"]["grpc"]["client_streaming"], true);
    assert_eq!(doc["plan"]["grpc"]["stream_messages"], 7);
    assert_eq!(doc["measurements"]["messages_sent"], 210);
}

#[test]
fn a_bidirectional_call_times_its_first_reply_and_every_gap() {
    let server = GrpcServer::counting(None);
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("messages.jsonl");
    std::fs::write(&lines, "{\"name\": \"a\"}\n\n{\"name\": \"bb\"}\n{\"name\": \"ccc\"}\n").unwrap();
    let data = format!("@{}", lines.display());
    let run = stream(
        &server.addr,
        "Chat",
        &[
            "--data",
            &data,
            "--stream-messages",
            "5",
            "--stream-rate",
            "200",
            "-n",
            "12",
            "--streams",
            "6",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.ok, 12);
    assert_eq!((m.messages_sent, m.messages), (60, 60));
    assert_eq!(counted(&server, "chat"), vec![5; 12]);
    // Replies "hello a", "hello bb", "hello ccc", "hello a", "hello bb":
    // 5 + 2 + 6 + 7 + 8 + 9 + 7 + 8 bytes each call (prefix, field, text).
    assert_eq!(m.bytes.received_body, 12 * (14 + 15 + 16 + 14 + 15));
    assert_eq!(m.phases["first_message"].count(), 12);
    assert_eq!(m.phases["last_message"].count(), 12);
    // Four gaps between five replies, per call.
    assert_eq!(m.phases["message_gap"].count(), 48);
    let violations = schema_violations(&run.json);
    assert!(violations.is_empty(), "{violations:?}");
}

#[test]
fn a_status_at_the_end_of_a_client_stream_is_the_calls_status() {
    let server = GrpcServer::counting(None);
    let run = stream(
        &server.addr,
        "Upload",
        &["--data", r#"{"code": 5}"#, "--stream-messages", "3", "-n", "10"],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.status.get(&5), Some(&10));
    assert_eq!(m.requests.errors.get("check_failed"), Some(&10));
    assert_eq!(m.messages_sent, 30);
    assert!(run.stdout().contains("NOT_FOUND=10"), "{}", run.stdout());
    // Expected, the same status is ok.
    let run = stream(
        &server.addr,
        "Chat",
        &[
            "--data",
            r#"{"code": 5}"#,
            "--stream-messages",
            "2",
            "-n",
            "4",
            "--expect-code",
            "NOT_FOUND",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 4);
    assert_eq!(run.result().measurements.messages, 8);
}

#[test]
fn a_deadline_cuts_a_slow_client_stream_and_its_sent_messages_are_kept() {
    let server = GrpcServer::counting(None);
    // Ten messages a second: the deadline cuts each call after a few.
    let run = stream(
        &server.addr,
        "Chat",
        &[
            "--data",
            r#"{"name": "x"}"#,
            "--stream-messages",
            "50",
            "--stream-rate",
            "10",
            "-n",
            "3",
            "--streams",
            "3",
            "--deadline",
            "350ms",
        ],
    );
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.errors.get("grpc.deadline_exceeded"), Some(&3));
    // Each call sent its first message at once and one every 100 ms
    // until the deadline: some, never all 50.
    assert!(
        m.messages_sent >= 3 && m.messages_sent < 150,
        "sent {}",
        m.messages_sent
    );
    assert!(m.messages <= m.messages_sent, "{} > {}", m.messages, m.messages_sent);
    assert!(m.phases.get("last_message").is_none_or(|h| h.count() == 0));
}

#[test]
fn stream_flags_say_what_is_wrong_and_exit_2() {
    let proto = here("tester.proto");
    let proto = proto.to_str().unwrap();
    let base = ["grpc", "127.0.0.1:9", "--plaintext", "--proto", proto, "-n", "1"];
    let cases: [(&[&str], &str); 6] = [
        (
            &["--call", "throngtest.Tester/Call", "--stream-messages", "3"],
            "--stream-messages: throngtest.Tester/Call takes one request message",
        ),
        (
            &["--call", "throngtest.Tester/Watch", "--stream-rate", "3"],
            "--stream-rate: throngtest.Tester/Watch takes one request message",
        ),
        (
            &["--call", "throngtest.Tester/Upload", "--stream-messages", "0"],
            "--stream-messages 0: give 1 to 100000",
        ),
        (
            &["--call", "throngtest.Tester/Upload", "--stream-rate", "0"],
            "--stream-rate 0: give at least 1",
        ),
        (
            &["--call", "throngtest.Tester/Upload", "--expect-messages", "1"],
            "is a client-streaming method",
        ),
        (
            &[
                "--call",
                "throngtest.Tester/Chat",
                "--data",
                "{\"name\": \"a\"}\n{\"nope\": 1}",
            ],
            "--data (line 2,",
        ),
    ];
    for (extra, want) in cases {
        let o = common::output(throng().args(base).args(extra));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
    }
    // 64 MiB at most a call.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    std::fs::write(&big, format!("{{\"name\": \"{}\"}}", "x".repeat(1 << 20))).unwrap();
    let data = format!("@{}", big.display());
    let o = common::output(throng().args(base).args([
        "--call",
        "throngtest.Tester/Upload",
        "--data",
        &data,
        "--stream-messages",
        "100",
    ]));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("more than 64 MiB"), "{stderr}");
}

#[test]
fn a_stream_larger_than_the_windows_goes_whole_then_half_closes() {
    let server = GrpcServer::counting(None);
    // 500 messages of 4 KB a call: 2 MB, far past HTTP/2's first windows
    // (64 KB), so most of it waits for the server's WINDOW_UPDATEs and the
    // half-close follows the last of it.
    let data = format!(r#"{{"name": "{}"}}"#, "a".repeat(4000));
    let run = stream(
        &server.addr,
        "Upload",
        &["--data", &data, "--stream-messages", "500", "-n", "4", "--streams", "2"],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!((m.requests.ok, m.messages_sent), (4, 2000));
    assert_eq!(counted(&server, "upload"), vec![500; 4]);
    assert!(m.bytes.sent >= 4 * 500 * 4000, "{}", m.bytes.sent);
}
