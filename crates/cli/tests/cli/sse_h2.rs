//! `throng http --sse` and `--llm openai` over HTTP/2 against the lab's
//! h2c event streams: events and tokens counted exactly with several
//! streams per connection, streams ended early reset while their
//! connection goes on, a stall ending as its class, the books balanced.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_books_balance, http, schema_violations};

fn h2c_lab() -> throng_lab::LabServer {
    throng_lab::LabServer::start_h2c(
        &throng_lab::LabConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            stall: None,
            tls: None,
        },
        &throng_lab::AuthConfig::default(),
    )
    .unwrap()
}

fn url(server: &throng_lab::LabServer, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

fn count(m: &throng_metrics::Measurements, phase: &str) -> u64 {
    m.phases.get(phase).map_or(0, |h| h.count())
}

#[test]
fn every_event_is_counted_on_multiplexed_streams() {
    let server = h2c_lab();
    let run = http(&[
        &url(&server, "/sse?events=5&interval=2"),
        "--sse",
        "--http2",
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "24",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().expect("a stream run reports its streams");
    assert_eq!((s.streams, s.events), (24, 120), "{s:?}");
    assert_eq!(s.ended.get("completed"), Some(&24), "{:?}", s.ended);
    assert_eq!(count(m, "first_event"), 24);
    assert_eq!(count(m, "event_gap"), 96);
    assert_eq!(count(m, "stream"), 24);
    assert_eq!((m.requests.ok, m.connections.ok), (24, 2));
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );
}

#[test]
fn sse_events_resets_the_stream_and_the_connection_goes_on() {
    let server = h2c_lab();
    let run = http(&[
        &url(&server, "/sse?events=50&interval=1"),
        "--sse",
        "--http2",
        "--sse-events",
        "3",
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "16",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.events), (16, 48), "{s:?}");
    assert_eq!(s.ended.get("events"), Some(&16), "{s:?}");
    assert_eq!(m.requests.ok, 16);
    // Each stream ended by a RST_STREAM(CANCEL): the same two connections
    // carry all sixteen.
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
}

#[test]
fn llm_tokens_are_counted_over_http2() {
    let server = h2c_lab();
    let run = http(&[
        &url(&server, "/v1/chat/completions?tokens=7&interval=1"),
        "--llm",
        "openai",
        "--http2",
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "10",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.tokens, 70, "{s:?}");
    assert_eq!((count(m, "ttft"), count(m, "itl")), (10, 60));
    assert_eq!(s.ended.get("completed"), Some(&10), "{s:?}");
    assert_eq!(m.requests.ok, 10);
}

#[test]
fn a_stall_is_sse_stalled_and_the_connection_stays() {
    let server = h2c_lab();
    let run = http(&[
        &url(&server, "/sse?events=5&stall=2&interval=1"),
        "--sse",
        "--http2",
        "-c",
        "1",
        "--streams",
        "2",
        "-n",
        "4",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.requests.error("sse.stalled"), 4, "{:?}", m.requests.errors);
    assert_eq!(m.requests.ended(), 4, "every request counted once");
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.ended.get("sse.stalled")), (4, Some(&4)), "{s:?}");
    assert_eq!(s.events, 8, "{s:?}");
    // A stalled stream is cancelled, not its connection.
    assert_eq!(m.connections.ok, 1, "{:?}", m.connections);
}

#[test]
fn several_targets_stream_over_http2_as_over_http1() {
    let server = h2c_lab();
    let (three, five) = (
        url(&server, "/sse?events=3&interval=1"),
        url(&server, "/sse?events=5&interval=1"),
    );
    for version in [None, Some("--http2")] {
        let mut args = vec![three.as_str(), five.as_str(), "--sse", "-c", "1", "-n", "8"];
        args.extend(version);
        let run = http(&args);
        assert_eq!(run.code(), 0, "{version:?}: stderr {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let s = r.measurements.streams.as_ref().unwrap();
        // One thread, round-robin: four streams of each target.
        assert_eq!((s.streams, s.events), (8, 32), "{version:?}: {s:?}");
        assert_eq!(s.ended.get("completed"), Some(&8), "{version:?}: {s:?}");
    }
}

#[test]
fn streams_read_over_tls_alpn_h2_from_nginx() {
    let (_d, c) = common::certs();
    // Three events a response, in one DATA frame or several.
    let nginx = common::nginx_tls(
        &c,
        "ssl http2",
        false,
        "",
        "location = /sse { default_type text/event-stream;\n\
         return 200 \"data: a\n\ndata: b\n\nevent: x\ndata: c\n\n\"; }",
    );
    let ca = c.join("ca.pem");
    let url = nginx.https("localhost", "/sse");
    let base = [url.as_str(), "--cacert", ca.to_str().unwrap(), "--sse", "--http2"];
    let mut args = base.to_vec();
    args.extend(["-c", "1", "--streams", "3", "-n", "6"]);
    let run = http(&args);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let s = r.measurements.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.events), (6, 18), "{s:?}");
    assert_eq!(s.ended.get("completed"), Some(&6), "{s:?}");

    let mut args = base.to_vec();
    args.extend(["-c", "1", "--streams", "3", "-n", "6", "--sse-events", "2"]);
    let run = http(&args);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let s = r.measurements.streams.as_ref().unwrap();
    assert_eq!((s.streams, s.events), (6, 12), "{s:?}");
    assert_eq!(s.ended.get("events"), Some(&6), "{s:?}");
    assert_eq!(r.measurements.connections.ok, 1);
}
