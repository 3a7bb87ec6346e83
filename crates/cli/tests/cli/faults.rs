//! The hostile-server matrix: `throng http` and `throng storm` against every
//! `throng serve --fault NAME`. Each run must end in the expected error
//! class(es), keep its books (attempted = ok + Σ errors, per second and in
//! total), write its result, and stay within a memory bound.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{FaultServer, assert_books_balance, command as run, throng};
use throng_result::RunResult;

/// Generous bound on the generator's peak memory in any of these runs (it
/// stays near 10 MB; a reader that kept an endless head or body would not).
const MEMORY_BOUND: u64 = 64 * 1024 * 1024;

/// What every run against a fault must keep: a result, balanced books, no
/// error class outside `allowed`, exactly `units` attempted (requests, or
/// connections for a storm), and the memory bound.
fn check<'a>(fault: &str, run: &'a common::Run, units: u64, allowed: &[&str]) -> &'a RunResult {
    let r = check_outcomes(fault, run, units, allowed);
    let m = &r.measurements;
    let outcomes = if m.requests.is_empty() {
        &m.connections
    } else {
        &m.requests
    };
    // Exit 1 when every unit failed (the README's exit codes).
    let expected = i32::from(outcomes.ok == 0 && outcomes.failed() > 0);
    assert_eq!(run.code(), expected, "{fault}: exit code; stderr {}", run.stderr());
    r
}

/// [`check`] without the exit code.
fn check_outcomes<'a>(fault: &str, run: &'a common::Run, units: u64, allowed: &[&str]) -> &'a RunResult {
    let stderr = run.stderr();
    assert!(!stderr.contains("panicked"), "{fault}: {stderr}");
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let outcomes = if m.requests.is_empty() {
        &m.connections
    } else {
        &m.requests
    };
    // A target where every connection fails is given up early, and says so.
    if outcomes.ok == 0 && outcomes.attempted < units {
        assert!(outcomes.attempted > 0, "{fault}: nothing attempted");
        assert!(
            r.notes.iter().any(|n| n.contains("stopped early")),
            "{fault}: {:?}",
            r.notes
        );
    } else {
        assert_eq!(outcomes.attempted, units, "{fault}: {outcomes:?}");
    }
    for (class, n) in &outcomes.errors {
        assert!(
            *n == 0 || allowed.contains(&class.as_str()),
            "{fault}: unexpected class {class} ({n}); expected only {allowed:?}; all: {:?}",
            outcomes.errors
        );
    }
    assert!(
        r.generator.peak_rss_bytes > 0 && r.generator.peak_rss_bytes < MEMORY_BOUND,
        "{fault}: peak memory {} bytes",
        r.generator.peak_rss_bytes
    );
    r
}

/// `throng http` against `fault`: every request ends in `class`.
fn all_fail_as(fault: &str, n: u64, extra: &[&str], class: &str) -> RunResult {
    let server = FaultServer::start(fault);
    let url = server.url("http");
    let n_text = n.to_string();
    let mut args = vec![url.as_str(), "-n", &n_text, "-c", "2", "-t", "1"];
    args.extend_from_slice(extra);
    let run = run("http", &args);
    let r = check(fault, &run, n, &[class]);
    let m = &r.measurements;
    assert!(
        m.requests.error(class) > 0 && m.requests.error(class) == m.requests.attempted,
        "{fault}"
    );
    r.clone()
}

#[test]
fn never_answer_times_out() {
    let r = all_fail_as("never-answer", 4, &["--timeout", "300ms"], "timeout.response");
    assert_eq!(r.measurements.bytes.received, 0);
}

#[test]
fn a_stalled_body_times_out_after_the_head() {
    let r = all_fail_as("stall-body", 4, &["--timeout", "300ms"], "timeout.response");
    // 40 bytes of head per request arrived; a failed request's bytes count
    // as received, not as headers.
    assert!(r.measurements.bytes.received >= 4 * 40, "{:?}", r.measurements.bytes);
}

#[test]
fn a_trickle_times_out_or_completes_given_time() {
    let r = all_fail_as("trickle", 2, &["--timeout", "350ms"], "timeout.response");
    assert!(r.measurements.bytes.received > 0);
    // 47 bytes at one per 100 ms: done in about 5 s.
    let server = FaultServer::start("trickle");
    let run = run("http", &[&server.url("http"), "-n", "1", "-c", "1", "--timeout", "60s"]);
    let r = check("trickle", &run, 1, &[]);
    assert_eq!(r.measurements.requests.ok, 1);
    assert_eq!(r.measurements.bytes.received_body, 8);
}

#[test]
fn endless_chunks_time_out_in_bounded_memory() {
    let r = all_fail_as("endless-chunks", 2, &["--timeout", "1s"], "timeout.response");
    assert!(
        r.measurements.bytes.received > 100_000,
        "the body kept coming: {:?}",
        r.measurements.bytes
    );
}

#[test]
fn endless_and_too_many_headers_are_protocol_errors() {
    all_fail_as("endless-headers", 6, &["--timeout", "5s"], "protocol");
    all_fail_as("many-headers", 6, &["--timeout", "5s"], "protocol");
}

#[test]
fn a_huge_body_is_counted_not_kept() {
    let server = FaultServer::start("huge-body");
    let run = run(
        "http",
        &[&server.url("http"), "-n", "1", "-c", "1", "--timeout", "100s"],
    );
    let r = check("huge-body", &run, 1, &[]);
    assert_eq!(r.measurements.requests.ok, 1);
    assert_eq!(r.measurements.bytes.received_body, 1 << 30);
}

#[test]
fn malformed_responses_are_protocol_errors() {
    for fault in ["garbage", "http09", "bad-content-length", "bad-chunk-size"] {
        all_fail_as(fault, 20, &["--timeout", "5s"], "protocol");
    }
}

#[test]
fn resets_at_each_point_are_resets() {
    for fault in ["rst-before-response", "rst-mid-headers", "rst-mid-body"] {
        let r = all_fail_as(fault, 20, &["--timeout", "5s"], "reset");
        // Each failure closes its connection; the next request reconnects.
        assert_eq!(r.measurements.connections.ok, 20, "{fault}");
    }
}

#[test]
fn early_closes_at_each_point_are_eof() {
    for fault in ["fin-before-response", "fin-mid-body"] {
        let r = all_fail_as(fault, 20, &["--timeout", "5s"], "eof");
        assert_eq!(r.measurements.connections.ok, 20, "{fault}");
    }
}

#[test]
fn connection_close_everywhere_reconnects_for_every_request() {
    let server = FaultServer::start("connection-close-everywhere");
    let run = run("http", &[&server.url("http"), "-n", "60", "-c", "2", "-t", "1"]);
    let r = check("connection-close-everywhere", &run, 60, &[]);
    let m = &r.measurements;
    assert_eq!(m.requests.ok, 60);
    assert_eq!(m.connections.ok, 60, "one connection per request");
    assert_eq!(m.status.get(&200), Some(&60));
}

#[test]
fn an_interim_100_is_skipped() {
    let server = FaultServer::start("status-100-then-200");
    let run = run("http", &[&server.url("http"), "-n", "200", "-c", "2", "-t", "1"]);
    let r = check("status-100-then-200", &run, 200, &[]);
    let m = &r.measurements;
    assert_eq!(m.requests.ok, 200);
    assert_eq!(m.status.get(&200), Some(&200));
    assert_eq!(m.status.get(&100), None);
    assert_eq!(m.connections.ok, 2, "kept alive across the interim responses");
}

#[test]
fn a_101_closes_its_connection() {
    // After 101 the connection speaks another protocol: a next request sent
    // into it is never answered, so each request needs its own connection.
    let server = FaultServer::start("status-101");
    let run = run(
        "http",
        &[&server.url("http"), "-n", "6", "-c", "1", "-t", "1", "--timeout", "2s"],
    );
    let r = check("status-101", &run, 6, &["check_failed", "protocol"]);
    let m = &r.measurements;
    assert_eq!(m.requests.error("timeout.response"), 0);
    assert_eq!(m.status.get(&101), Some(&6), "{:?}", m.status);
    assert_eq!(m.connections.ok, 6);
}

#[test]
fn a_listener_that_closes_at_once_is_eof_or_reset() {
    let server = FaultServer::start("listener-closes");
    let run = run("http", &[&server.url("http"), "-n", "30", "-c", "2", "-t", "1"]);
    let r = check("listener-closes", &run, 30, &["eof", "reset"]);
    let m = &r.measurements;
    assert_eq!(m.requests.failed(), 30);
    assert_eq!(m.requests.ok, 0);
}

/// `throng http https://…` against a TLS fault: every request fails its
/// handshake with `class`.
fn tls_fails_as(fault: &str, extra: &[&str], class: &str) {
    let server = FaultServer::start(fault);
    let mut args = vec![];
    let url = server.url("https");
    args.extend_from_slice(&[url.as_str(), "-n", "8", "-c", "2", "-t", "1", "-k"]);
    args.extend_from_slice(extra);
    let run = run("http", &args);
    let r = check(fault, &run, 8, &[class]);
    let m = &r.measurements;
    assert_eq!(m.requests.error(class), m.requests.attempted, "{fault}");
    assert_eq!(m.connections.error(class), m.connections.attempted, "{fault}");
}

#[test]
fn tls_alerts_garbage_and_stalls() {
    tls_fails_as("tls-alert", &[], "tls.handshake_failure");
    tls_fails_as("tls-garbage", &[], "tls.invalid_message");
    tls_fails_as("tls-stall", &["--timeout", "300ms"], "tls.handshake_timeout");
}

#[test]
fn http_faults_inside_tls_keep_their_class() {
    let (_dir, certs) = common::certs();
    for (fault, class) in [
        ("garbage", "protocol"),
        ("rst-mid-body", "reset"),
        ("fin-mid-body", "eof"),
        ("never-answer", "timeout.response"),
    ] {
        let server = FaultServer::start_with(fault, &["--tls", certs.to_str().unwrap()]);
        let run = run(
            "http",
            &[
                &server.url("https"),
                "-k",
                "-n",
                "6",
                "-c",
                "2",
                "-t",
                "1",
                "--timeout",
                "1s",
            ],
        );
        let r = check(fault, &run, 6, &[class]);
        assert_eq!(r.measurements.requests.error(class), 6, "{fault} over TLS");
        assert_eq!(r.measurements.tls.as_ref().map(|t| t.handshakes), Some(6), "{fault}");
    }
}

/// `throng storm nats://…` against a NATS fault: every connection fails
/// with `class`.
fn nats_fails_as(fault: &str, class: &str) {
    let server = FaultServer::start(fault);
    let url = format!("nats://127.0.0.1:{}", server.port);
    let run = run("storm", &[&url, "-n", "10", "-c", "5", "-t", "1", "--timeout", "500ms"]);
    let r = check(fault, &run, 10, &[class]);
    let m = &r.measurements.connections;
    assert_eq!(m.error(class), m.attempted, "{fault}");
}

#[test]
fn nats_garbage_missing_info_and_auth_errors() {
    nats_fails_as("nats-garbage", "protocol.unexpected_reply");
    nats_fails_as("nats-no-info", "timeout.handshake");
    nats_fails_as("nats-auth-error", "auth_failed");
}

/// The server's PING overtakes the PONG of CONNECT (seed 000 at bcrypt cost
/// 11): the lenient client answers it, connects and counts it; the nats.go
/// profile fails there, as nats.go does ("expected 'PONG', got 'PING'").
#[test]
fn nats_early_ping_is_counted_by_lenient_clients_and_fails_nats_go() {
    let server = FaultServer::start("nats-early-ping");
    let url = format!("nats://127.0.0.1:{}", server.port);
    let args = |client: &'static str| {
        vec![
            url.clone(),
            "-n".into(),
            "8".into(),
            "-c".into(),
            "4".into(),
            "-t".into(),
            "1".into(),
            "--timeout".into(),
            "2s".into(),
            "--client".into(),
            client.into(),
        ]
    };
    let lenient = args("lenient");
    let lenient = run("storm", &lenient.iter().map(String::as_str).collect::<Vec<_>>());
    let r = check("nats-early-ping", &lenient, 8, &[]);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 8, "{:?}", m.connections.errors);
    assert_eq!(
        m.handshake_out_of_turn.get("ping_before_pong").copied(),
        Some(8),
        "{:?}",
        m.handshake_out_of_turn
    );
    let strict = args("nats.go");
    let strict = run("storm", &strict.iter().map(String::as_str).collect::<Vec<_>>());
    let r = check("nats-early-ping", &strict, 8, &["protocol.unexpected_ping"]);
    let m = &r.measurements;
    // Every attempt fails (a storm that only fails may stop early, and says so).
    let attempted = m.connections.attempted;
    assert_eq!(
        m.connections.error("protocol.unexpected_ping"),
        attempted,
        "{:?}",
        m.connections.errors
    );
    assert_eq!(
        m.handshake_out_of_turn.get("ping_before_pong").copied(),
        Some(attempted)
    );
}

#[test]
fn an_unknown_fault_is_a_usage_error_naming_the_choices() {
    let o = common::output(throng().args(["serve", "--fault", "explode", "--listen", "127.0.0.1:0"]));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--fault") && err.contains("never-answer") && err.contains("nats-auth-error"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// `throng run` has its own exchange loop: the same faults must end its
/// requests in the same classes, with balanced books.
#[test]
fn scenario_requests_against_faults_keep_their_class() {
    for (fault, class) in [
        ("garbage", "protocol"),
        ("rst-mid-body", "reset"),
        ("fin-mid-body", "eof"),
        ("never-answer", "timeout.response"),
        ("endless-chunks", "timeout.response"),
        ("connection-close-everywhere", ""),
        ("status-100-then-200", ""),
    ] {
        let server = FaultServer::start(fault);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("faults.yaml");
        let yaml = format!(
            "target: {}\ndefaults:\n  timeout: 500ms\nscenarios:\n  s:\n    executor: shared-iterations\n    \
             vus: 2\n    iterations: 6\n    flow:\n      - request: {{ name: one, path: / }}\n",
            server.url("http")
        );
        std::fs::write(&file, yaml).unwrap();
        let run = run("run", &[file.to_str().unwrap(), "-t", "1"]);
        let allowed: &[&str] = if class.is_empty() { &[] } else { &[class] };
        let r = check(fault, &run, 6, allowed);
        let m = &r.measurements.requests;
        if class.is_empty() {
            assert_eq!(m.ok, 6, "{fault}: {m:?}");
        } else {
            assert_eq!(m.error(class), 6, "{fault}: {m:?}");
        }
    }
}

/// A storm's one request per connection is read by the same reader: its
/// requests end in the same classes, the connections themselves succeed.
#[test]
fn storm_requests_against_faults_keep_their_class() {
    for (fault, class) in [
        ("garbage", "protocol"),
        ("rst-mid-body", "reset"),
        ("fin-before-response", "eof"),
        ("stall-body", "timeout.response"),
        ("status-100-then-200", ""),
    ] {
        let server = FaultServer::start(fault);
        let run = run(
            "storm",
            &[
                &server.url("http"),
                "-n",
                "10",
                "-c",
                "5",
                "-t",
                "1",
                "--timeout",
                "500ms",
            ],
        );
        let allowed: &[&str] = if class.is_empty() { &[] } else { &[class] };
        let r = check(fault, &run, 10, allowed);
        let m = &r.measurements;
        assert_eq!(m.connections.ok, 10, "{fault}: {:?}", m.connections);
        if class.is_empty() {
            assert_eq!(m.requests.ok, 10, "{fault}: {:?}", m.requests);
        } else {
            assert_eq!(m.requests.error(class), 10, "{fault}: {:?}", m.requests);
        }
    }
}
