//! HTTP/3 (`throng http --http3`) against a real HTTP/3 server that is not
//! throng (aioquic, scripts/h3_server.py) and against the lab's quinn-based
//! server for the faults: counts, shapes (requests per connection, streams
//! in flight never above the cap) and the conservation law under each.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Aioquic, assert_books_balance, h3_lab as lab, http, p, throng};
use throng_lab::{H3Fault, H3Server};

fn lab_url(s: &H3Server) -> String {
    format!("https://localhost:{}/", s.addr().port())
}

/// `throng http URL --http3 --cacert CA ARGS` against the lab's HTTP/3
/// server, failing as `fault` says.
fn on_lab(fault: Option<H3Fault>, args: &[&str]) -> common::Run {
    let (_d, c) = common::certs();
    let server = lab(&c, fault);
    let (url, ca) = (lab_url(&server), p(&c, "ca.pem"));
    let run = http(&[&[url.as_str(), "--http3", "--cacert", &ca][..], args].concat());
    assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
    run
}

#[test]
fn aioquic_multiplexes_streams_up_to_the_cap_and_counts_every_request() {
    let (d, c) = common::certs();
    // Each answer waits 20 ms: four streams per connection are in flight together.
    let server = Aioquic::start(&c, d.path(), 20);
    let run = http(&[
        &server.url("/"),
        "--http3",
        "--cacert",
        &p(&c, "ca.pem"),
        "-n",
        "200",
        "-c",
        "2",
        "--streams",
        "4",
    ]);
    let stats = server.stop();
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted, 200);
    assert_eq!(m.requests.ok, 200, "{:?}", m.requests.errors);
    assert_eq!(m.status.get(&200), Some(&200));
    assert_eq!(m.connections.ok, 2, "one QUIC connection per -c");
    assert_eq!(m.phases["tls"].count(), 2, "one QUIC handshake sample per connection");
    assert!(!m.phases.contains_key("connect"), "UDP has no connect phase");
    assert_eq!(m.bytes.received_body, 200 * 8, "aioquic's body is 8 bytes");
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!(mux.protocols.get("h3"), Some(&2));
    assert_eq!(mux.connections, 2);
    assert_eq!(mux.requests, 200);
    assert_eq!(mux.min_requests_per_connection + mux.max_requests_per_connection, 200);
    assert_eq!(mux.peak_streams_per_connection, 4, "--streams 4 with slow answers");
    // The server's side of the same run.
    assert_eq!(stats["requests"], 200);
    assert_eq!(stats["connections"], 2);
    assert!(stats["max_concurrent"].as_u64().unwrap() <= 4, "{stats}");
    let problems = common::schema_violations(&run.json);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
}

#[test]
fn aioquic_no_keepalive_is_one_request_per_connection() {
    let (d, c) = common::certs();
    let server = Aioquic::start(&c, d.path(), 0);
    let run = http(&[
        &server.url("/bytes/1000"),
        "--http3",
        "--cacert",
        &p(&c, "ca.pem"),
        "-n",
        "20",
        "-c",
        "2",
        "--no-keepalive",
    ]);
    let stats = server.stop();
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 20);
    assert_eq!(m.connections.attempted, 20);
    assert_eq!(m.phases["tls"].count(), 20);
    assert_eq!(m.bytes.received_body, 20 * 1000);
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!((mux.connections, mux.max_requests_per_connection), (20, 1));
    assert_eq!(stats["connections"], 20);
}

#[test]
fn unknown_ca_fails_the_quic_handshake_as_tls() {
    let (_d, c) = common::certs();
    let server = lab(&c, None);
    // No --cacert: the lab's CA is not trusted.
    let run = http(&[&lab_url(&server), "--http3", "-n", "3", "-c", "1"]);
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.error("tls.unknown_ca"), 3, "{:?}", m.requests.errors);
    assert_eq!(m.connections.error("tls.unknown_ca"), 3);
}

#[test]
fn lab_serves_http3_with_streams() {
    let run = on_lab(None, &["-n", "300", "-c", "3", "--streams", "5"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 300);
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!((mux.connections, mux.requests), (3, 300));
    assert!(mux.peak_streams_per_connection <= 5, "{mux:?}");
}

// A reset stream fails its request and keeps the connection:
// matrix::h3_tls::fault.

#[test]
fn connection_close_counts_its_code() {
    let run = on_lab(Some(H3Fault::CloseConnection), &["-n", "10", "-c", "1"]);
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    // Each connection answers its first request and closes at the second.
    assert_eq!(m.requests.ok, 5, "{:?}", m.requests.errors);
    assert_eq!(m.requests.error("h3.closed.H3_EXCESSIVE_LOAD"), 5);
    assert_eq!(m.connections.ok, 5);
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!((mux.connections, mux.max_requests_per_connection), (5, 2));
}

#[test]
fn a_silent_server_is_an_idle_timeout() {
    // The idle timeout is the server's 1 s, or 3 PTOs when the handshake's
    // round trips were slow (a loaded machine): well inside --timeout 10s.
    let run = on_lab(Some(H3Fault::Silent), &["-n", "1", "-c", "1", "--timeout", "10s"]);
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.error("quic.idle_timeout"), 1, "{:?}", m.requests.errors);
    assert_eq!(m.connections.ok, 1, "the handshake completed before the silence");
}

#[test]
fn no_handshake_is_a_handshake_timeout() {
    let run = on_lab(Some(H3Fault::NoHandshake), &["-n", "2", "-c", "1", "--timeout", "1s"]);
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.error("quic.handshake_timeout"), 2, "{:?}", m.requests.errors);
    assert_eq!(m.connections.error("quic.handshake_timeout"), 2);
    assert!(!m.phases.contains_key("tls"));
}

#[test]
fn max_streams_one_caps_streams_in_flight() {
    let run = on_lab(Some(H3Fault::OneStream), &["-n", "60", "-c", "1", "--streams", "8"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.ok, 60);
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!(mux.streams_requested, 8);
    assert_eq!(
        mux.peak_streams_per_connection, 1,
        "the server allows one stream at a time"
    );
}

/// One connection, one stream, `n` requests against the lab's `fault`
/// with `--timeout 1s`: the run and its `--csv-requests` rows.
fn one_stream(fault: H3Fault, n: &str) -> (common::Run, Vec<(String, u64, u64)>) {
    let d = tempfile::tempdir().unwrap();
    let rows = d.path().join("rows.csv");
    let run = on_lab(
        Some(fault),
        &[
            "-n",
            n,
            "-c",
            "1",
            "--timeout",
            "1s",
            "--csv-requests",
            rows.to_str().unwrap(),
        ],
    );
    assert_books_balance(run.result());
    let rows = common::request_rows(&rows);
    (run, rows)
}

#[test]
fn a_reset_stream_counts_the_bytes_it_wrote() {
    let (run, rows) = one_stream(H3Fault::ResetStream, "10");
    let m = &run.result().measurements;
    assert_eq!(m.requests.error("h3.stream_reset.H3_REQUEST_REJECTED"), 10);
    let each = rows[0].1;
    assert!(each > 0, "{rows:?}");
    assert!(rows.iter().all(|r| r.1 == each), "{rows:?}");
    assert_eq!(m.bytes.sent, 10 * each, "{:?}", m.bytes);
}

#[test]
fn a_body_short_of_its_content_length_is_eof() {
    let (run, rows) = one_stream(H3Fault::ShortBody, "10");
    let m = &run.result().measurements;
    assert_eq!(m.requests.error("eof"), 10, "{:?}", m.requests);
    assert_eq!(m.connections.attempted, 1, "the stream failed, not the connection");
    let (sent, received) = (rows[0].1, rows[0].2);
    assert!(sent > 0 && received > throng_lab::SHORT_BODY.0 as u64, "{rows:?}");
    assert!(
        rows.iter().all(|r| (r.0.as_str(), r.1, r.2) == ("eof", sent, received)),
        "{rows:?}"
    );
    assert_eq!((m.bytes.sent, m.bytes.received), (10 * sent, 10 * received));
}

#[test]
fn a_body_past_its_content_length_is_protocol() {
    let (run, _) = one_stream(H3Fault::LongBody, "10");
    let m = &run.result().measurements;
    assert_eq!(m.requests.error("protocol"), 10, "{:?}", m.requests);
    assert_eq!(m.connections.attempted, 1);
}

#[test]
fn interim_responses_are_skipped() {
    let (run, _) = one_stream(H3Fault::EarlyHints, "20");
    let m = &run.result().measurements;
    assert_eq!(m.requests.ok, 20, "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&20), "{:?}", m.status);
    assert_eq!(m.status.len(), 1, "the 103 is no response of its own: {:?}", m.status);
}

#[test]
fn a_connection_out_of_stream_credit_is_replaced() {
    let (run, rows) = one_stream(H3Fault::StreamsExhausted, "6");
    let m = &run.result().measurements;
    // Each connection answers its one stream; the next cannot open within
    // --timeout, fails unsent, and a new connection takes the next request.
    assert_eq!(m.requests.ok, 3, "{:?}", m.requests);
    assert_eq!(m.requests.error("h3.stream_limit"), 3, "{:?}", m.requests);
    assert_eq!(m.connections.ok, 3, "{:?}", m.connections);
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.connections, x.max_requests_per_connection), (3, 2));
    assert!(
        rows.iter().filter(|r| r.0 == "h3.stream_limit").all(|r| r.1 == 0),
        "a request never sent wrote nothing: {rows:?}"
    );
}

#[test]
fn http3_needs_an_https_url() {
    let run = http(&["http://127.0.0.1:9/", "--http3", "-n", "1"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("--http3"), "{}", run.stderr());
    assert!(run.stderr().contains("https://"), "{}", run.stderr());
}

#[test]
fn open_loop_spreads_the_schedule_over_streams_and_drops_nothing_silently() {
    let run = on_lab(None, &["-r", "100", "-d", "2s", "-c", "2", "--streams", "4"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert!(r.coordinated_omission_free);
    let m = &r.measurements;
    assert_eq!(
        m.requests.attempted + m.dropped,
        200,
        "every scheduled start is sent or dropped"
    );
    assert_eq!(m.requests.ok, m.requests.attempted, "{:?}", m.requests.errors);
    assert!(m.phases["schedule_lag"].count() >= m.requests.attempted);
    let mux = m.multiplex.as_ref().unwrap();
    assert_eq!(mux.requests, m.requests.attempted);
    assert!(mux.connections <= 2, "-c caps the connections: {mux:?}");
    assert!(mux.peak_streams_per_connection <= 4, "{mux:?}");
}

#[test]
fn open_loop_under_connection_closes_reconnects_and_balances() {
    let run = on_lab(
        Some(H3Fault::CloseConnection),
        &["-r", "50", "-d", "2s", "-c", "1", "--streams", "4"],
    );
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.attempted + m.dropped, 100);
    let closed = m.requests.error("h3.closed.H3_EXCESSIVE_LOAD");
    assert_eq!(m.requests.ok + closed, m.requests.attempted, "{:?}", m.requests.errors);
    // How many get an answer depends on timing: starts queued during a
    // handshake go out together, and the server closes at the second.
    assert!(closed >= 1, "{:?}", m.requests);
    let mux = m.multiplex.as_ref().unwrap();
    // A closed connection is replaced: -c 1 stays one at a time, and every
    // connection is closed at its second request or with it.
    assert!(mux.connections >= 2, "{mux:?}");
    assert_eq!(m.peak_concurrent_connections, 1, "-c 1: one connection at a time");
    assert!(
        m.requests.ok <= mux.connections,
        "one answer per connection at most: {mux:?}"
    );
}

#[test]
fn tls_1_2_only_is_refused_before_the_run() {
    let run = on_lab(None, &["-n", "1", "--tls-version", "1.2"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("TLS 1.3 only"), "{}", run.stderr());
}

#[test]
fn connection_churn_keeps_memory_flat() {
    // A QUIC socket per connection cost ~0.6 MB each until drained: 600
    // connections in a row reached 200 MB. One socket per worker stays flat.
    let run = on_lab(None, &["-n", "600", "-c", "4", "-t", "1", "--no-keepalive"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 600);
    assert_eq!(r.measurements.connections.ok, 600);
    let rss = r.generator.peak_rss_bytes;
    assert!(rss < 120 << 20, "peak memory {} MB", rss >> 20);
}

#[test]
fn storm_holds_quic_connections_with_and_without_a_request() {
    let (d, c) = common::certs();
    let server = Aioquic::start(&c, d.path(), 0);
    let ca = p(&c, "ca.pem");
    // 30 connections, all started within 0.3 s and each held 2 s: all 30
    // are open at once.
    for (request, requests) in [("GET /bytes/3", 30), ("none", 0)] {
        let run = common::storm(&[
            &server.url("/"),
            "--http3",
            "--cacert",
            &ca,
            "--request",
            request,
            "-n",
            "30",
            "--rate",
            "100",
            "--hold",
            "2s",
        ]);
        assert_eq!(run.code(), 0, "{request}: {}", run.stderr());
        let r = run.result();
        let m = &r.measurements;
        assert_books_balance(r);
        assert_eq!((m.connections.attempted, m.connections.ok), (30, 30), "{request}");
        assert_eq!((m.requests.attempted, m.requests.ok), (requests, requests), "{request}");
        assert_eq!(m.bytes.received_body, 3 * requests);
        assert_eq!(m.phases["tls"].count(), 30, "one QUIC handshake per connection");
        assert!(!m.phases.contains_key("connect"), "UDP has no connect phase");
        assert_eq!(m.peak_concurrent_connections, 30, "{request}");
        assert_eq!(m.closed_by_peer, 0, "{request}: held until the storm closed them");
        let x = m.multiplex.as_ref().expect("an HTTP/3 storm has multiplex figures");
        assert_eq!(x.protocols.get("h3"), Some(&30));
        assert_eq!((x.connections, x.requests), (30, requests));
        let text = common::output(throng().arg("report").arg(&run.json));
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains(&format!("h3 on 30 connections; {requests} carried a request")),
            "{text}"
        );
        match &r.plan {
            throng_result::Plan::Storm(p) => assert_eq!(p.http, throng_plan::HttpVersion::Http3),
            other => panic!("a storm plan, not {other:?}"),
        }
        let problems = common::schema_violations(&run.json);
        assert!(problems.is_empty(), "schema violations: {problems:#?}");
    }
    let stats = server.stop();
    assert_eq!(stats["connections"], 60, "{stats}");
    assert_eq!(stats["requests"], 30, "{stats}");
}

#[test]
fn storm_counts_held_quic_connections_the_server_closes() {
    let (d, c) = common::certs();
    let server = Aioquic::start(&c, d.path(), 0);
    // Once all 20 are held, the trigger stops the server, which closes
    // every connection (CONNECTION_CLOSE): each hold ends early.
    let kill = format!("kill -TERM {}", server.child.id());
    let run = common::storm(&[
        &server.url("/"),
        "--http3",
        "--cacert",
        &p(&c, "ca.pem"),
        "-n",
        "20",
        "--hold",
        "60s",
        "--trigger-after",
        "0s",
        "--trigger",
        &kill,
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!((m.connections.attempted, m.connections.ok), (20, 20));
    assert_eq!((m.requests.attempted, m.requests.ok), (20, 20));
    assert_eq!(m.closed_by_peer, 20, "every held connection was closed by the server");
}

#[test]
fn storm_over_http3_refuses_what_quic_cannot_do() {
    for (args, flag, says) in [
        (&["http://127.0.0.1:9/", "--http3"][..], "--http3", "https://"),
        (
            &["https://127.0.0.1:9/", "--http3", "--http2"][..],
            "--http2/--http3",
            "one of them",
        ),
        (
            &["https://127.0.0.1:9/", "--http3", "--source", "127.0.0.2-127.0.0.3"][..],
            "--source",
            "UDP socket",
        ),
        (
            &["https://127.0.0.1:9/", "--http3", "-x", "http://127.0.0.1:9"][..],
            "--http3",
            "proxy",
        ),
    ] {
        let run = common::storm(&[args, &["-n", "1"][..]].concat());
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(
            run.stderr().contains(flag) && run.stderr().contains(says),
            "{args:?}: {}",
            run.stderr()
        );
    }
}
