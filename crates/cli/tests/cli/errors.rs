//! The error taxonomy against faults the lab server makes on demand, and
//! every user mistake: one line naming what is wrong, exit code 2, no panic.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_books_balance, free_port, http, lab, throng};

fn lab_url(server: &throng_lab::LabServer, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

#[test]
fn refused_when_nothing_listens_stops_early() {
    let port = free_port();
    let run = http(&[&format!("http://127.0.0.1:{port}/"), "-d", "30s", "-c", "4"]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert!(m.requests.error("refused") >= 4);
    assert_eq!(m.requests.ok, 0);
    assert_eq!(m.connections.error("refused"), m.requests.error("refused"));
    assert!(r.notes.iter().any(|n| n.contains("stopped early")), "{:?}", r.notes);
    assert!(r.duration_s < 30.0, "a dead target must not cost the whole duration");
    assert!(run.stderr().contains("refused"), "{}", run.stderr());
}

#[test]
fn reset_eof_and_garbage_are_classified() {
    let server = lab(None);
    for (path, class) in [("/reset", "reset"), ("/close", "eof"), ("/garbage", "protocol")] {
        let run = http(&[&lab_url(&server, path), "-n", "50", "-c", "5"]);
        assert_eq!(run.code(), 1, "{path}: stderr {}", run.stderr());
        let m = &run.result().measurements;
        assert_books_balance(run.result());
        assert_eq!(m.requests.error(class), 50, "{path}: {:?}", m.requests.errors);
        assert_eq!(m.requests.failed(), 50);
        // Each failure closes its connection; the next request reconnects.
        assert_eq!(m.connections.ok, 50, "{path}");
    }
}

#[test]
fn slow_responses_time_out() {
    let server = lab(None);
    let run = http(&[
        &lab_url(&server, "/delay/3000"),
        "-n",
        "4",
        "-c",
        "2",
        "--timeout",
        "200ms",
    ]);
    assert_eq!(run.code(), 1);
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.error("timeout.response"), 4);
}

#[test]
fn mixed_outcomes_keep_exact_books() {
    let server = lab(None);
    // 200s and 503s from the same target: statuses counted, 503 is check_failed.
    let ok = http(&[&lab_url(&server, "/"), "-n", "300", "-c", "3"]);
    let bad = http(&[&lab_url(&server, "/status/503"), "-n", "200", "-c", "2"]);
    assert_eq!(ok.result().measurements.status.get(&200), Some(&300));
    let m = &bad.result().measurements;
    assert_eq!(m.status.get(&503), Some(&200));
    assert_eq!(m.requests.error("check_failed"), 200);
    let classes = m.status_classes();
    assert_eq!(classes[4], 200);
}

#[test]
fn more_connections_than_descriptors_is_a_clear_error_before_starting() {
    let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
        "ulimit -n 64 && exec {} http http://127.0.0.1:9/ -c 500 -d 1s",
        env!("CARGO_BIN_EXE_throng")
    )));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("file descriptors") && err.contains("lower -c"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn user_mistakes_are_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let missing = missing.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["http", "http://127.0.0.1:1/", "--frobnicate"], "--frobnicate"),
        (&["http", "not a url"], "URL"),
        (&["http", "ftp://127.0.0.1/"], "scheme 'ftp'"),
        (&["http", "http://127.0.0.1:1/", "-d", "10x"], "--duration"),
        (&["http", "http://127.0.0.1:1/", "-r", "0"], "--rate"),
        (&["http", "http://127.0.0.1:1/", "-c", "0"], "-c/--connections"),
        (&["http", "http://127.0.0.1:1/", "-n", "5", "-d", "5s"], "--duration"),
        (&["http", "http://127.0.0.1:1/", "--body", missing], "--body"),
        (&["http", "http://127.0.0.1:1/", "-H", "nocolon"], "-H/--header"),
        (
            &["http", "http://127.0.0.1:1/", "--expect-status", "abc"],
            "--expect-status",
        ),
        (&["report", missing], "cannot read"),
        (&["serve", "--stall-every", "1s"], "--stall-for"),
        // Refused before anything starts: not 100,000 processes or threads.
        (
            &["serve", "--listen", "127.0.0.1:0", "--procs", "100000"],
            "give 1 to 256",
        ),
        (
            &["serve", "--listen", "127.0.0.1:0", "--threads", "100000"],
            "give 1 to 1024",
        ),
        (
            &["serve", "--listen", "127.0.0.1:0", "--hash-threads", "100000"],
            "give 1 to 1024",
        ),
        (&["nosuchcommand"], "nosuchcommand"),
    ];
    for (args, needle) in cases {
        let out = common::output(throng().args(*args));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?} should mention {needle}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line, got: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn unknown_host_fails_with_a_reason() {
    let out = common::output(throng().args(["http", "http://no-such-host.invalid/", "-n", "1", "-q"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot resolve host 'no-such-host.invalid'"), "{err}");
}

#[test]
fn request_bodies_are_sent_and_counted() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, br#"{"user":"throng","n":12345}"#).unwrap();
    let run = http(&[
        &lab_url(&server, "/echo"),
        "-n",
        "200",
        "-c",
        "4",
        "--body",
        body.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_eq!(m.requests.ok, 200);
    assert_eq!(m.bytes.received_body, 200 * 27, "the lab echoes each 27-byte body");
    let throng_result::Plan::Http(p) = &r.plan else {
        panic!("an http result")
    };
    assert_eq!(p.method, "POST", "a body implies POST");
    assert_eq!(p.body_bytes, 27);
    assert!(m.bytes.sent >= 200 * 27);
}
