//! `throng http` against a real nginx on loopback: counts, statuses, bytes
//! and phase samples add up, in every load model and view.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Nginx, assert_books_balance, http};

const LOCATIONS: &str = r#"
    location = / { return 200; }
    location = /hello { default_type text/plain; return 200 "hello"; }
    location = /missing { return 404; }
    location = /gzip {
        default_type text/plain;
        gzip on; gzip_min_length 1; gzip_types text/plain;
        return 200 "a body long enough to be compressed, compressed, compressed, compressed";
    }
"#;

#[test]
fn closed_loop_keepalive_counts_add_up() {
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[&nginx.url("/hello"), "-n", "3000", "-c", "20", "-t", "2"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.attempted, 3000);
    assert_eq!(m.requests.ok, 3000);
    assert_eq!(m.status.get(&200), Some(&3000));
    // Keep-alive: one connection per connection slot, each connect timed once.
    assert_eq!(m.connections.ok, 20);
    assert_eq!(m.phases["connect"].count(), 20);
    for phase in ["wait", "receive", "response", "latency"] {
        assert_eq!(m.phases[phase].count(), 3000, "{phase}");
    }
    assert!(m.phase("schedule_lag").is_none(), "closed loop has no schedule");
    assert_eq!(m.peak_concurrent_connections, 20);
    assert_eq!(m.bytes.received_body, 5 * 3000);
    assert_eq!(m.bytes.received, m.bytes.received_headers + m.bytes.received_body);
    let request_size = m.bytes.sent / 3000;
    assert_eq!(m.bytes.sent, request_size * 3000, "every request has the same size");
    assert_eq!(
        m.first_reply
            .as_ref()
            .unwrap()
            .server
            .as_deref()
            .map(|s| s.starts_with("nginx")),
        Some(true)
    );
    assert!(!r.coordinated_omission_free);
    // Latency covers response; response covers wait.
    let (lat, resp, wait) = (&m.phases["latency"], &m.phases["response"], &m.phases["wait"]);
    assert!(lat.quantile(0.5) >= resp.quantile(0.5) && resp.quantile(0.5) >= wait.quantile(0.5));
    assert!(run.stdout().contains("NOT coordinated-omission-free"));
}

#[test]
fn no_keepalive_opens_a_connection_per_request() {
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[&nginx.url("/"), "-n", "600", "-c", "10", "--no-keepalive"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 600);
    assert_eq!(m.connections.attempted, 600);
    assert_eq!(m.connections.ok, 600);
    assert_eq!(m.phases["connect"].count(), 600);
    assert_eq!(m.phases["connection"].count(), 600, "every connection closed and timed");
}

#[test]
fn unexpected_status_is_check_failed_unless_expected() {
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[&nginx.url("/missing"), "-n", "200", "-c", "4"]);
    assert_eq!(run.code(), 1, "every request failed → exit 1");
    assert!(
        run.stderr().contains("every request failed (200 check_failed)"),
        "{}",
        run.stderr()
    );
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.error("check_failed"), 200);
    assert_eq!(m.status.get(&404), Some(&200), "the status is still reported");

    let run = http(&[&nginx.url("/missing"), "-n", "200", "-c", "4", "--expect-status", "404"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 200);
}

#[test]
fn open_loop_follows_the_schedule() {
    // Alone: 2000 req/s on a quiet machine; on a busy one some starts are
    // dropped, and everything below still holds.
    let _alone = common::heavy();
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[&nginx.url("/"), "-r", "2000", "-n", "3000", "-c", "100"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert!(r.coordinated_omission_free);
    // Every scheduled request was sent or counted as dropped: never silently less.
    assert_eq!(m.requests.attempted + m.dropped, 3000);
    // One lag per request sent; a dropped start never started, so has none.
    assert_eq!(
        m.phases["schedule_lag"].count(),
        m.requests.attempted,
        "dropped {}",
        m.dropped
    );
    assert_eq!(m.requests.ok, m.requests.attempted);
    // 3000 requests at 2000/s: the schedule spans 1.5 s. A request ends no
    // sooner than its intended start and no later than that plus its
    // latency (measured from the intended start), so the series shows the
    // schedule's shape on any machine: the 1000 starts due after the first
    // second end after it (less those dropped), and nothing ends after the
    // schedule's end plus the longest latency.
    let ended = |from: u64| {
        m.series
            .iter()
            .filter(|p| p.second >= from)
            .map(|p| p.requests)
            .sum::<u64>()
    };
    assert_eq!(ended(0), m.requests.attempted);
    assert!(ended(1) + m.dropped >= 1000, "{} + {}", ended(1), m.dropped);
    let last = m
        .series
        .iter()
        .filter(|p| p.requests > 0)
        .map(|p| p.second)
        .max()
        .unwrap();
    let latest_end_us = 1_500_000 + m.phases["latency"].max();
    assert!(last <= latest_end_us / 1_000_000, "{last} s, {latest_end_us} µs");
    assert!(m.peak_concurrent_connections <= 100);
    assert!(run.stdout().contains("latency is coordinated-omission-free"));
}

#[test]
fn ab_and_httperf_views_show_the_same_numbers() {
    let nginx = Nginx::start(LOCATIONS);
    let ab = http(&[&nginx.url("/hello"), "-n", "1000", "-c", "10", "--format", "ab"]);
    assert_eq!(ab.code(), 0);
    let out = ab.stdout();
    for line in [
        "Server Hostname:        127.0.0.1",
        "Document Path:          /hello",
        "Document Length:        5 bytes",
        "Concurrency Level:      10",
        "Complete requests:      1000",
        "Failed requests:        0",
        "HTML transferred:       5000 bytes",
        "Connection Times (ms)",
        "Percentage of the requests served within a certain time (ms)",
        "(longest request)",
    ] {
        assert!(out.contains(line), "missing '{line}' in:\n{out}");
    }
    let total = format!(
        "Total transferred:      {} bytes",
        ab.result().measurements.bytes.received
    );
    assert!(out.contains(&total), "{out}");

    let hp = http(&[
        &nginx.url("/"),
        "-r",
        "200",
        "-n",
        "400",
        "--no-keepalive",
        "--format",
        "httperf",
    ]);
    assert_eq!(hp.code(), 0);
    let out = hp.stdout();
    for line in [
        "Total: connections 400 requests 400 replies 400 test-duration",
        "Reply status: 1xx=0 2xx=400 3xx=0 4xx=0 5xx=0",
        "Connection length [replies/conn]: 1.000",
        "Errors: total 0 client-timo 0 socket-timo 0 connrefused 0 connreset 0",
        "Errors: fd-unavail 0 addrunavail 0 ftab-full 0 other 0",
    ] {
        assert!(out.contains(line), "missing '{line}' in:\n{out}");
    }
    // -r 200 for 400 connections: the last start is due at 1.995 s, so the
    // run lasts at least that and the rate is at most about 200 conn/s; a
    // busy machine stretches the run (how far depends on the machine), and
    // the view's rate is still its connections over its test-duration.
    let figure = |prefix: &str, at: usize| -> f64 {
        out.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|l| l.split_whitespace().nth(at))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no '{prefix}' in:\n{out}"))
    };
    let rate = figure("Connection rate: ", 0);
    let secs = figure("Total: connections 400 requests 400 replies 400 test-duration ", 0);
    assert!(secs >= 1.99, "the schedule spans 2 s: {out}");
    assert!(rate <= 201.0, "at most 200 conn/s: {out}");
    assert!((rate - 400.0 / secs).abs() <= 0.2, "connections / test-duration: {out}");
}

#[test]
fn chunked_responses_are_read_to_the_end() {
    // gzip makes nginx stream the body with chunked transfer encoding.
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[
        &nginx.url("/gzip"),
        "-n",
        "500",
        "-c",
        "5",
        "-H",
        "Accept-Encoding: gzip",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 500);
    assert_eq!(m.connections.ok, 5, "chunked responses keep connections reusable");
    let body = m.bytes.received_body / 500;
    assert_eq!(m.bytes.received_body, body * 500, "same body every time");
    assert!(body > 10 && body < 72, "compressed body: {body} bytes");
    let framing = m.bytes.received - m.bytes.received_headers - m.bytes.received_body;
    assert!(
        framing >= 500 * 5,
        "chunk sizes and the last chunk are on the wire: {framing}"
    );
}

#[test]
fn head_requests_have_no_body() {
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[&nginx.url("/hello"), "-n", "300", "-c", "3", "-m", "HEAD"]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.requests.ok, 300);
    assert_eq!(
        m.bytes.received_body, 0,
        "Content-Length: 5 on a HEAD reply announces no body"
    );
    assert_eq!(m.connections.ok, 3);
}
