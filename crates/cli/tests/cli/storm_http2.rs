//! `throng storm --http2` against real nginx (h2c with prior knowledge, and
//! TLS with ALPN h2): every connection's handshake includes the preface and
//! SETTINGS exchange, its request is one stream; counts, conservation, the
//! pre-run refusal of a server without HTTP/2, and a held connection the
//! server ends by its idle timeout.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{Nginx, assert_books_balance};

const LOCATIONS: &str = r#"
    location = / { return 200; }
    location = /hello { default_type text/plain; return 200 "hello"; }
    location = /missing { return 404; }
"#;

/// nginx over TLS; `listen` is `ssl http2` or `ssl` (HTTP/1.1 only).
fn tls_nginx(c: &Path, listen: &str) -> Nginx {
    common::nginx_tls(c, listen, false, "", LOCATIONS)
}

/// The figures every successful `--http2` storm of `n` connections, each
/// with one request, must show.
fn assert_h2_storm(run: &common::Run, n: u64) {
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!((m.connections.attempted, m.connections.ok), (n, n));
    assert_eq!((m.requests.attempted, m.requests.ok), (n, n));
    assert_eq!(m.status.get(&200), Some(&n));
    assert_eq!(m.bytes.received_body, 5 * n);
    // One preface-and-SETTINGS handshake and one stream per connection.
    assert_eq!(m.phases["connect"].count(), n);
    assert_eq!(m.phases["handshake"].count(), n);
    for phase in ["wait", "response", "connection"] {
        assert_eq!(m.phases[phase].count(), n, "{phase}");
    }
    let x = m.multiplex.as_ref().expect("an HTTP/2 storm has multiplex figures");
    assert_eq!(x.protocols.get("h2"), Some(&n));
    assert_eq!(x.streams_requested, 1);
    assert_eq!(x.peak_streams_per_connection, 1);
    assert_eq!((x.connections, x.requests), (n, n));
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (1, 1));
    match &r.plan {
        throng_result::Plan::Storm(p) => assert_eq!(p.http, throng_plan::HttpVersion::Http2),
        other => panic!("a storm plan, not {other:?}"),
    }
    assert!(
        common::schema_violations(&run.json).is_empty(),
        "{:?}",
        common::schema_violations(&run.json)
    );
}

#[test]
fn h2c_storm_makes_one_stream_per_connection() {
    let nginx = Nginx::start_listen("http2", "", LOCATIONS);
    let run = common::storm(&[&nginx.url("/hello"), "--http2", "-n", "300", "-c", "50"]);
    assert_h2_storm(&run, 300);
    assert_eq!(run.result().measurements.phases.get("tls").map_or(0, |h| h.count()), 0);
    // Spread over two processes: each child speaks HTTP/2 from the plan it
    // is given, and the merged result counts every connection once.
    let run = common::storm(&[&nginx.url("/hello"), "--http2", "-n", "200", "--procs", "2"]);
    assert_h2_storm(&run, 200);
}

#[test]
fn tls_storm_negotiates_h2_by_alpn() {
    let (_d, c) = common::certs();
    let nginx = tls_nginx(&c, "ssl http2");
    let ca = c.join("ca.pem");
    let run = common::storm(&[
        &nginx.https("localhost", "/hello"),
        "--cacert",
        ca.to_str().unwrap(),
        "--http2",
        "-n",
        "100",
        "-c",
        "20",
    ]);
    assert_h2_storm(&run, 100);
    assert_eq!(run.result().measurements.phases["tls"].count(), 100);
}

#[test]
fn a_status_the_storm_does_not_expect_is_check_failed_and_balanced() {
    let nginx = Nginx::start_listen("http2", "", LOCATIONS);
    let run = common::storm(&[&nginx.url("/"), "--http2", "--request", "GET /missing", "-n", "40"]);
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.connections.ok, 40);
    assert_eq!(m.requests.attempted, 40);
    assert_eq!(m.requests.errors.get("check_failed"), Some(&40));
    assert_eq!(m.status.get(&404), Some(&40));
}

#[test]
fn held_connections_end_when_the_server_ends_them() {
    // nginx ends an idle HTTP/2 connection (GOAWAY, close) after its
    // client_header_timeout before a request, keepalive_timeout after one;
    // the storm holds longer, so every connection is closed by the server.
    let nginx = Nginx::start_listen("http2", "keepalive_timeout 1s; client_header_timeout 1s;", LOCATIONS);
    for (request, requests) in [("none", 0), ("GET /hello", 30)] {
        let run = common::storm(&[
            &nginx.url("/"),
            "--http2",
            "--request",
            request,
            "-n",
            "30",
            "--hold",
            "20s",
        ]);
        assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
        let r = run.result();
        let m = &r.measurements;
        assert_books_balance(r);
        assert_eq!((m.connections.attempted, m.connections.ok), (30, 30));
        assert_eq!((m.requests.attempted, m.requests.ok), (requests, requests));
        assert_eq!(m.phases["handshake"].count(), 30);
        assert_eq!(m.closed_by_peer, 30, "{request}");
        let x = m.multiplex.as_ref().unwrap();
        assert_eq!((x.connections, x.requests), (30, requests));
    }
}

#[test]
fn a_server_without_http2_is_refused_before_the_storm() {
    let plain = Nginx::start(LOCATIONS);
    let run = common::storm(&[&plain.url("/"), "--http2", "-n", "10"]);
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(run.stderr().contains("does not speak HTTP/2"), "{}", run.stderr());

    let (_d, c) = common::certs();
    let tls = tls_nginx(&c, "ssl");
    let ca = c.join("ca.pem");
    let run = common::storm(&[
        &tls.https("localhost", "/"),
        "--cacert",
        ca.to_str().unwrap(),
        "--http2",
        "-n",
        "10",
    ]);
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(run.stderr().contains("does not speak HTTP/2"), "{}", run.stderr());
}

#[test]
fn http2_applies_to_http_targets_only() {
    for (target, extra) in [
        ("tcp://127.0.0.1:9", &[][..]),
        ("http://127.0.0.1:9/", &["--protocol", "lines", "--send", "x"][..]),
    ] {
        let run = common::storm(&[&[target, "--http2", "-n", "1"][..], extra].concat());
        assert_eq!(run.code(), 2, "{target}: {}", run.stderr());
        assert!(run.stderr().contains("--http2"), "{}", run.stderr());
    }
}
