//! Which clock timed the responses: the kernel's receive stamps by default,
//! the user-space clock when asked (THRONG_TIMESTAMPS=user); the result
//! and the text report say which, and the phases stay consistent with
//! each other whichever it was. No durations are asserted.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{Aioquic, Nginx, assert_books_balance, output, schema_violations, throng};
use throng_result::RunResult;

const LOCATIONS: &str = r#"
    location = / { return 200; }
    location = /big { default_type text/plain; return 200 "$request_uri$request_uri$request_uri"; }
"#;

/// Runs `throng http ARGS` with `THRONG_TIMESTAMPS=clock` (unset for None),
/// a result file and a `--csv-requests` file; returns the result, the rows
/// and the text report rendered from the result.
fn run(clock: Option<&str>, args: &[&str]) -> (RunResult, Vec<Vec<String>>, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let csv = dir.path().join("rows.csv");
    let mut cmd = throng();
    cmd.arg("http")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--csv-requests")
        .arg(&csv)
        .arg("--quiet");
    match clock {
        Some(c) => cmd.env("THRONG_TIMESTAMPS", c),
        None => cmd.env_remove("THRONG_TIMESTAMPS"),
    };
    let o = output(&mut cmd);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(schema_violations(&json).is_empty(), "{:?}", schema_violations(&json));
    let result = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    let rows = read_rows(&csv);
    let text = output(throng().arg("report").arg(&json));
    assert_eq!(text.status.code(), Some(0));
    (result, rows, String::from_utf8(text.stdout).unwrap())
}

fn read_rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

/// Every ok row's phases are numbers ≥ 0 that fit inside each other:
/// send + wait + receive = response ≤ latency (closed loop: latency
/// starts at or before the request's first byte), give or take the
/// microsecond each column was rounded to.
fn assert_rows_consistent(rows: &[Vec<String>], expected: usize) {
    let col = |r: &Vec<String>, i: usize| -> Option<i64> { r[i].parse().ok() };
    let ok: Vec<_> = rows.iter().filter(|r| r[3] == "ok").collect();
    assert_eq!(ok.len(), expected, "one ok row per request");
    for r in ok {
        let [send, wait, receive, response, latency] = [9, 10, 11, 12, 13].map(|i| col(r, i).unwrap());
        for v in [send, wait, receive, response, latency] {
            assert!(v >= 0, "{r:?}");
        }
        assert!((send + wait + receive - response).abs() <= 2, "phases add up: {r:?}");
        assert!(response <= latency + 1, "response inside latency: {r:?}");
    }
}

fn clock_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.trim_start().starts_with("timestamps"))
        .unwrap_or_else(|| panic!("no timestamps line in:\n{text}"))
}

#[test]
fn kernel_stamps_time_the_responses_by_default() {
    // Alone: a busy machine makes the kernel stamp fall back more often.
    let _alone = common::heavy();
    let nginx = Nginx::start(LOCATIONS);
    for (args, n) in [
        (vec!["-n", "3000", "-c", "8"], 3000u64),
        (vec!["-n", "400", "-c", "4", "--no-keepalive"], 400),
    ] {
        let mut full = vec![nginx.url("/big")];
        full.extend(args.iter().map(|s| s.to_string()));
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        let (r, rows, text) = run(None, &full);
        assert_books_balance(&r);
        assert_eq!(r.measurements.requests.ok, n);
        let t = r.generator.timestamps.as_ref().expect("the result names its clock");
        assert_eq!(t.receive, "kernel");
        assert_eq!(t.kernel + t.user, n, "every response timed by one clock: {t:?}");
        // Fallbacks are rare (a descheduled clock read); most are stamped.
        assert!(t.kernel * 10 >= n * 9, "{t:?}");
        assert_rows_consistent(&rows, n as usize);
        assert!(
            clock_line(&text).contains("kernel receive (SO_TIMESTAMPING)")
                && clock_line(&text).contains("send at the system call"),
            "{text}"
        );
    }
}

#[test]
fn user_clock_when_asked_and_named() {
    // Alone: a busy machine makes the kernel stamp fall back more often.
    let _alone = common::heavy();
    let nginx = Nginx::start(LOCATIONS);
    let url = nginx.url("/");
    let (r, rows, text) = run(Some("user"), &[&url, "-n", "1000", "-c", "4"]);
    assert_books_balance(&r);
    let t = r.generator.timestamps.as_ref().unwrap();
    assert_eq!((t.receive.as_str(), t.kernel, t.user), ("user", 0, 1000));
    assert_rows_consistent(&rows, 1000);
    assert!(
        clock_line(&text).contains("user clock at the read (THRONG_TIMESTAMPS=user)"),
        "{text}"
    );
}

#[test]
fn open_loop_latency_covers_the_stamped_response() {
    // Alone: a busy machine makes the kernel stamp fall back more often.
    let _alone = common::heavy();
    let nginx = Nginx::start(LOCATIONS);
    let url = nginx.url("/");
    let (r, rows, _) = run(None, &[&url, "-r", "2000", "-n", "1000", "-c", "20"]);
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.requests.ok + m.dropped, 1000);
    let t = r.generator.timestamps.as_ref().unwrap();
    assert_eq!(t.kernel + t.user, m.requests.ok);
    // Open loop: latency runs from the intended start, never less than
    // the response it contains.
    assert_rows_consistent(&rows, m.requests.ok as usize);
}

#[test]
fn tls_responses_are_stamped_too() {
    // Alone: a busy machine makes the kernel stamp fall back more often.
    let _alone = common::heavy();
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("certs");
    let o = output(throng().args(["certs", "--out", c.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let p = |name: &str| c.join(name).display().to_string();
    let nginx = Nginx::start_tls(
        &format!(
            "ssl_certificate {}; ssl_certificate_key {}; ssl_protocols TLSv1.3;",
            p("server.pem"),
            p("server.key")
        ),
        LOCATIONS,
    );
    let url = nginx.https("localhost", "/big");
    let ca = p("ca.pem");
    for extra in [&[][..], &["--no-keepalive"][..]] {
        let mut args = vec![url.as_str(), "--cacert", &ca, "-n", "300", "-c", "3"];
        args.extend_from_slice(extra);
        let (r, rows, text) = run(None, &args);
        assert_books_balance(&r);
        assert_eq!(r.measurements.requests.ok, 300);
        let t = r.generator.timestamps.as_ref().unwrap();
        assert_eq!((t.receive.as_str(), t.kernel + t.user), ("kernel", 300), "{t:?}");
        assert!(t.kernel * 10 >= 300 * 9, "{t:?}");
        assert_rows_consistent(&rows, 300);
        assert!(clock_line(&text).contains("kernel receive"), "{text}");
    }
}

#[test]
fn http2_streams_are_stamped_too() {
    // Alone: a busy machine makes the kernel stamp fall back more often.
    let _alone = common::heavy();
    let nginx = Nginx::start_listen("http2", "", LOCATIONS);
    // Several streams per connection: one read often brings several
    // responses, each timed by that read's stamp.
    let url = nginx.url("/big");
    let (r, rows, text) = run(None, &[&url, "--http2", "-n", "2000", "-c", "2", "--streams", "8"]);
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 2000);
    let t = r.generator.timestamps.as_ref().unwrap();
    assert_eq!((t.receive.as_str(), t.kernel + t.user), ("kernel", 2000), "{t:?}");
    assert!(t.kernel * 10 >= 2000 * 9, "{t:?}");
    assert_rows_consistent(&rows, 2000);
    // A stream's time on the wire starts at the write of its HEADERS (its
    // first and, without a body, last byte), not when it queued them.
    let queued = rows.iter().filter(|r| r[3] == "ok" && r[9] != "0").count();
    assert_eq!(queued, 0, "rows with a send phase: {queued}");
    assert!(
        clock_line(&text).contains("kernel receive (SO_TIMESTAMPING), send at the system call that writes its HEADERS"),
        "{text}"
    );
    // Asked for the user clock, HTTP/2 uses it.
    let (r, rows, _) = run(
        Some("user"),
        &[&url, "--http2", "-n", "500", "-c", "2", "--streams", "4"],
    );
    let t = r.generator.timestamps.as_ref().unwrap();
    assert_eq!((t.receive.as_str(), t.kernel, t.user), ("user", 0, 500), "{t:?}");
    assert_rows_consistent(&rows, 500);
}

#[test]
fn http3_responses_are_stamped_at_the_quic_socket() {
    // Alone: a busy machine makes the kernel stamp fall back more often.
    let _alone = common::heavy();
    let (d, c) = common::certs();
    let server = Aioquic::start(&c, d.path(), 0);
    let url = server.url("/");
    let ca = c.join("ca.pem").display().to_string();
    // One connection, one stream (the latest datagram is the response's),
    // then several of each sharing the worker's socket.
    for (args, n) in [(&["-c", "1"][..], 300u64), (&["-c", "2", "--streams", "4"][..], 400)] {
        let total = n.to_string();
        let mut all = vec![url.as_str(), "--http3", "--cacert", &ca, "-n", &total];
        all.extend_from_slice(args);
        let (r, rows, text) = run(None, &all);
        assert_books_balance(&r);
        assert_eq!(r.measurements.requests.ok, n);
        let t = r.generator.timestamps.as_ref().expect("the result names its clock");
        // Every response timed by one clock, and the socket's stamps used:
        // before they existed, HTTP/3 counted none (0 + 0).
        assert_eq!((t.receive.as_str(), t.kernel + t.user), ("kernel", n), "{t:?}");
        assert!(t.kernel * 10 >= n * 9, "{t:?}");
        assert_rows_consistent(&rows, n as usize);
        assert!(
            clock_line(&text).contains("kernel receive (SO_TIMESTAMPING), send at the system call that carries it"),
            "{text}"
        );
    }
    // Asked for the user clock, HTTP/3 uses it.
    let (r, rows, text) = run(
        Some("user"),
        &[&url, "--http3", "--cacert", &ca, "-n", "200", "-c", "1"],
    );
    let t = r.generator.timestamps.as_ref().unwrap();
    assert_eq!((t.receive.as_str(), t.kernel, t.user), ("user", 0, 200), "{t:?}");
    assert_rows_consistent(&rows, 200);
    assert!(clock_line(&text).contains("THRONG_TIMESTAMPS=user"), "{text}");
    let stats = server.stop();
    assert_eq!(stats["requests"], 300 + 400 + 200);
}
