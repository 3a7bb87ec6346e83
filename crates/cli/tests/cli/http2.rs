//! `throng http --http2` against real nginx (h2c with prior knowledge, and
//! TLS with ALPN h2) and the lab's HTTP/2 faults: counts, streams in flight
//! against the server's cap, requests per connection, the accounting under
//! every fault, and the views of an HTTP/2 result. h2c closed and open
//! loops run on both transports (`--io epoll` and `--io uring`), each run
//! checked to have run on the one asked for (`uring::ran_on`).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{FaultServer, Nginx, assert_books_balance, http, throng};

const LOCATIONS: &str = r#"
    location = / { return 200; }
    location = /hello { default_type text/plain; return 200 "hello"; }
"#;

/// The transports an HTTP/2 loop runs on.
const IO: [&str; 2] = ["epoll", "uring"];

/// `throng http ARGS --io IO`, checked to have run on `io` (books too).
fn http_io(io: &str, args: &[&str]) -> common::Run {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--io", io]);
    crate::uring::ran_on(io, http(&all)).0
}

/// nginx speaking h2c (prior knowledge) with at most `streams` concurrent
/// streams per connection.
fn h2c_nginx(streams: u32) -> Nginx {
    Nginx::start_listen("http2", &format!("http2_max_concurrent_streams {streams};"), LOCATIONS)
}

/// nginx over TLS; `listen` is `ssl http2` or `ssl` (HTTP/1.1 only).
fn tls_nginx(c: &Path, listen: &str, streams: u32) -> Nginx {
    let caps = format!("http2_max_concurrent_streams {streams};");
    common::nginx_tls(c, listen, false, &caps, LOCATIONS)
}

#[test]
fn h2c_closed_loop_multiplexes_streams_on_each_connection() {
    for io in IO {
        h2c_closed_loop_on(io);
    }
}

fn h2c_closed_loop_on(io: &str) {
    let nginx = h2c_nginx(100);
    let run = http_io(
        io,
        &[
            &nginx.url("/hello"),
            "--http2",
            "-c",
            "2",
            "--streams",
            "4",
            "-n",
            "2000",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.attempted, 2000);
    assert_eq!(m.requests.ok, 2000);
    assert_eq!(m.status.get(&200), Some(&2000));
    assert_eq!(m.bytes.received_body, 5 * 2000);
    // Two connections, each with one h2 preface round trip.
    assert_eq!(m.connections.ok, 2);
    assert_eq!(m.phases["connect"].count(), 2);
    assert_eq!(m.phases["handshake"].count(), 2);
    for phase in ["send", "wait", "receive", "response", "latency"] {
        assert_eq!(m.phases[phase].count(), 2000, "{phase}");
    }
    let x = m.multiplex.as_ref().expect("an HTTP/2 result has multiplex figures");
    assert_eq!(x.protocols.get("h2"), Some(&2));
    assert_eq!(x.streams_requested, 4);
    assert_eq!(x.server_max_streams, Some(100));
    // Closed loop: every connection keeps its 4 streams busy.
    assert_eq!(x.peak_streams_per_connection, 4);
    assert!(x.peak_streams <= 8 && x.peak_streams >= 4, "{x:?}");
    assert_eq!(x.connections, 2);
    assert_eq!(x.requests, 2000);
    assert!(
        x.min_requests_per_connection >= 1 && x.max_requests_per_connection <= 2000,
        "{x:?}"
    );
    assert!(m.series.iter().all(|p| p.streams_max <= 8));
    assert!(m.series.iter().any(|p| p.streams_max > 0));
    match &r.plan {
        throng_result::Plan::Http(p) => {
            assert_eq!((p.http, p.streams), (throng_plan::HttpVersion::Http2, 4));
        }
        other => panic!("an http plan, not {other:?}"),
    }
    let out = run.stdout();
    assert!(out.contains("streams       h2 on 2"), "{out}");
    assert!(
        common::schema_violations(&run.json).is_empty(),
        "{:?}",
        common::schema_violations(&run.json)
    );
}

#[test]
fn tls_alpn_h2_streams_are_capped_by_the_server() {
    let (_d, c) = common::certs();
    let nginx = tls_nginx(&c, "ssl http2", 3);
    for io in IO {
        tls_alpn_h2_on(io, &nginx, &c);
    }
}

fn tls_alpn_h2_on(io: &str, nginx: &Nginx, c: &Path) {
    let ca = c.join("ca.pem");
    let run = http_io(
        io,
        &[
            &nginx.https("localhost", "/hello"),
            "--cacert",
            ca.to_str().unwrap(),
            "--http2",
            "-c",
            "2",
            "--streams",
            "10",
            "-n",
            "600",
            "-t",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!(m.requests.ok, 600);
    assert_eq!(m.tls.as_ref().unwrap().handshakes, m.connections.ok);
    assert_eq!(m.phases["tls"].count(), m.connections.ok);
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!(x.server_max_streams, Some(3));
    assert_eq!(x.streams_requested, 10);
    // Never more streams on a connection than the server allows.
    assert_eq!(x.peak_streams_per_connection, 3);
    assert!(x.peak_streams <= 6, "{x:?}");
    assert_eq!(x.requests, 600);
    let out = run.stdout();
    assert!(out.contains("capped at 3 by the server"), "{out}");
}

#[test]
fn a_server_without_h2_is_refused_before_the_run() {
    let (_d, c) = common::certs();
    let nginx = tls_nginx(&c, "ssl", 100);
    let ca = c.join("ca.pem");
    let run = http(&[
        &nginx.https("localhost", "/"),
        "--cacert",
        ca.to_str().unwrap(),
        "--http2",
        "-n",
        "10",
    ]);
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(run.stderr().contains("does not speak HTTP/2"), "{}", run.stderr());
    assert!(run.result.is_none(), "no run, no result");

    let plain = Nginx::start(LOCATIONS);
    let run = http(&[&plain.url("/"), "--http2", "-n", "10"]);
    assert_eq!(run.code(), 2, "stderr: {}", run.stderr());
    assert!(run.stderr().contains("HTTP/1.x in the clear"), "{}", run.stderr());
}

#[test]
fn flags_that_do_not_fit_are_refused() {
    for (args, flag) in [
        (&["--streams", "4"][..], "--streams"),
        (&["--http2", "--streams", "0"][..], "--streams"),
        (&["--http2", "--streams", "10001"][..], "--streams"),
        (&["--http3"][..], "--http3"),
        (&["--http2", "--http3"][..], "--http2/--http3"),
    ] {
        let o = common::output(
            throng()
                .args(["http", "http://127.0.0.1:9/", "-n", "1", "-q"])
                .args(args),
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

#[test]
fn open_loop_spreads_requests_over_streams_of_capped_connections() {
    let nginx = h2c_nginx(100);
    for io in IO {
        let run = http_io(
            io,
            &[
                &nginx.url("/"),
                "--http2",
                "-r",
                "400",
                "-d",
                "2s",
                "-c",
                "2",
                "--streams",
                "4",
                "-t",
                "1",
            ],
        );
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let r = run.result();
        let m = &r.measurements;
        // Every scheduled request was sent or counted dropped.
        assert_eq!(m.requests.attempted + m.dropped, 800, "{io}");
        assert_eq!(m.requests.ok, m.requests.attempted, "{io}: {:?}", m.requests);
        assert!(m.requests.ok > 0, "{io}");
        assert!((1..=2).contains(&m.connections.ok), "{io}: {:?}", m.connections);
        let x = m.multiplex.as_ref().unwrap();
        assert!(x.peak_streams_per_connection <= 4, "{io}: {x:?}");
        assert!(x.peak_streams <= 8, "{io}: {x:?}");
        // Each request's lateness, and its latency from the intended start.
        for phase in ["schedule_lag", "response", "latency"] {
            assert_eq!(m.phases[phase].count(), m.requests.attempted, "{io} {phase}");
        }
        assert_eq!(m.phases["handshake"].count(), m.connections.ok, "{io}");
        assert!(r.coordinated_omission_free, "{io}");
    }
}

/// `throng http --http2 -c 8 --streams 2 -n 2000 EXTRA --io IO` against
/// `server` with 64 descriptors (`ulimit -n`), never panicking: its result.
fn with_64_descriptors(server: &FaultServer, io: &str, extra: &[&str]) -> throng_result::RunResult {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
        "ulimit -n 64 && exec {} http {} --http2 -c 8 --streams 2 {} -n 2000 -t 1 --timeout 10s --io {io} -q --json {}",
        env!("CARGO_BIN_EXE_throng"),
        server.url("http"),
        extra.join(" "),
        json.display()
    )));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{io}: {stderr}");
    common::read_result(&json).expect("a result")
}

#[test]
fn an_open_loop_reconnecting_after_goaway_leaks_no_descriptor() {
    // As the closed loop below, on the schedule: 64 descriptors for 2,000
    // starts on connections the server ends every few streams; every
    // start sent or dropped, every one sent answered or cut off by GOAWAY.
    let server = FaultServer::start("h2-goaway");
    for io in IO {
        let r = with_64_descriptors(&server, io, &["-r", "2000"]);
        assert_books_balance(&r);
        let m = &r.measurements;
        assert_eq!(m.requests.error("fd_unavailable"), 0, "{io}: {:?}", m.requests);
        assert_eq!(m.connections.failed(), 0, "{io}: {:?}", m.connections);
        assert_eq!(m.requests.attempted + m.dropped, 2000, "{io}: {:?}", m.requests);
        assert!(m.requests.attempted >= 500, "{io}: dropped {}", m.dropped);
        assert_eq!(
            m.requests.ok + m.requests.error("h2.goaway"),
            m.requests.attempted,
            "{io}: {:?}",
            m.requests
        );
        assert_eq!(m.phases["schedule_lag"].count(), m.requests.attempted, "{io}");
        let ran = if io == "uring" {
            throng_result::Io::Uring
        } else {
            throng_result::Io::Epoll
        };
        assert_eq!(r.generator.io, Some(ran), "{io}");
    }
}

#[test]
fn no_keepalive_opens_a_connection_per_request() {
    let nginx = h2c_nginx(100);
    for io in IO {
        let run = http_io(
            io,
            &[
                &nginx.url("/"),
                "--http2",
                "--no-keepalive",
                "-c",
                "3",
                "-n",
                "30",
                "-t",
                "1",
            ],
        );
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 30, "{io}");
        assert_eq!(m.connections.ok, 30, "{io}");
        assert_eq!(m.phases["handshake"].count(), 30, "{io}");
        assert_eq!(m.phases["connection"].count(), 30, "{io}");
        let x = m.multiplex.as_ref().unwrap();
        assert_eq!((x.connections, x.max_requests_per_connection), (30, 1), "{io}");
        // On the schedule, with several streams a connection: still one
        // connection per request sent.
        let run = http_io(
            io,
            &[
                &nginx.url("/"),
                "--http2",
                "--no-keepalive",
                "--streams",
                "4",
                "-c",
                "2",
                "-r",
                "200",
                "-n",
                "100",
                "-t",
                "1",
            ],
        );
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &run.result().measurements;
        assert_eq!(m.requests.attempted + m.dropped, 100, "{io}");
        assert_eq!(m.requests.ok, m.requests.attempted, "{io}: {:?}", m.requests);
        assert_eq!(m.connections.ok, m.requests.ok, "{io}: {:?}", m.connections);
        let x = m.multiplex.as_ref().unwrap();
        assert_eq!(x.max_requests_per_connection, 1, "{io}");
    }
}

/// One connection with at most `streams` at a time, `n` requests against
/// `fault`.
fn one_conn(fault: &str, n: &str, streams: &str, extra: &[&str]) -> common::Run {
    one_conn_on("epoll", fault, n, streams, extra)
}

/// [`one_conn`] on transport `io` (checked to have run on it).
fn one_conn_on(io: &str, fault: &str, n: &str, streams: &str, extra: &[&str]) -> common::Run {
    let server = FaultServer::start(fault);
    let mut args = vec![server.url("http")];
    args.extend(
        [
            "--http2",
            "-c",
            "1",
            "--streams",
            streams,
            "-n",
            n,
            "-t",
            "1",
            "--timeout",
            "10s",
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = http_io(io, &args);
    drop(server);
    assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
    assert_books_balance(run.result());
    run
}

// RST_STREAM's class, every second stream on the one connection:
// matrix::h2_plain::fault.

#[test]
fn refused_streams_are_their_own_class() {
    for io in IO {
        let run = one_conn_on(io, "h2-refused-stream", "20", "1", &[]);
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 10);
        assert_eq!(m.requests.error("h2.refused_stream"), 10);
        assert_eq!(m.connections.ok, 1);
    }
}

#[test]
fn goaway_cuts_off_a_stream_per_connection_and_the_client_reconnects() {
    for io in IO {
        let run = one_conn_on(io, "h2-goaway", "40", "1", &[]);
        let m = &run.result().measurements;
        let per = throng_lab::GOAWAY_AFTER;
        // Each connection answers per-1 streams; the next is cut off by GOAWAY.
        let conns = 40 / per;
        assert_eq!(m.requests.error("h2.goaway"), conns, "{:?}", m.requests);
        assert_eq!(m.requests.ok, 40 - conns);
        assert_eq!(m.connections.ok, conns);
        let x = m.multiplex.as_ref().unwrap();
        assert_eq!(
            (x.min_requests_per_connection, x.max_requests_per_connection),
            (per, per)
        );
    }
}

#[test]
fn goaway_with_many_streams_keeps_the_books() {
    for io in IO {
        let server = FaultServer::start("h2-goaway");
        let run = http_io(
            io,
            &[
                &server.url("http"),
                "--http2",
                "-c",
                "2",
                "--streams",
                "4",
                "-n",
                "200",
                "-t",
                "1",
            ],
        );
        let m = &run.result().measurements;
        assert_books_balance(run.result());
        assert_eq!(m.requests.attempted, 200);
        assert!(m.requests.error("h2.goaway") > 0, "{:?}", m.requests);
        assert_eq!(m.requests.ok + m.requests.error("h2.goaway"), 200, "{:?}", m.requests);
        assert!(m.connections.ok > 2);
    }
}

#[test]
fn reconnecting_after_goaway_leaks_no_descriptor() {
    // 64 descriptors for 2,000 requests on connections the server ends
    // every few streams (about 400 of them): one socket left open per
    // connection would run out (fd_unavailable) after a few dozen.
    let server = FaultServer::start("h2-goaway");
    for io in IO {
        let r = with_64_descriptors(&server, io, &[]);
        assert_books_balance(&r);
        let m = &r.measurements;
        assert_eq!(m.requests.error("fd_unavailable"), 0, "{io}: {:?}", m.requests);
        assert_eq!(m.connections.failed(), 0, "{io}: {:?}", m.connections);
        assert_eq!(m.requests.attempted, 2000, "{io}");
        assert_eq!(
            m.requests.ok + m.requests.error("h2.goaway"),
            2000,
            "{io}: {:?}",
            m.requests
        );
        assert!(
            m.connections.ok >= 2000 / throng_lab::GOAWAY_AFTER / 2,
            "{io}: {:?}",
            m.connections
        );
        let ran = if io == "uring" {
            throng_result::Io::Uring
        } else {
            throng_result::Io::Epoll
        };
        assert_eq!(r.generator.io, Some(ran), "{io}");
    }
}

#[test]
fn a_stalled_stream_times_out_and_the_connection_goes_on() {
    // Every second stream is never answered: it fails at --timeout, is
    // reset (CANCEL), and the next streams go on the same connection.
    let server = FaultServer::start("h2-stall");
    for io in IO {
        let run = http_io(
            io,
            &[
                &server.url("http"),
                "--http2",
                "-c",
                "1",
                "--streams",
                "1",
                "-n",
                "8",
                "-t",
                "1",
                "--timeout",
                "300ms",
            ],
        );
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 4, "{io}: {:?}", m.requests);
        assert_eq!(m.requests.error("timeout.response"), 4, "{io}: {:?}", m.requests);
        assert_eq!(m.connections.attempted, 1, "{io}: the connection went on");
    }
}

#[test]
fn a_huge_header_block_is_protocol_and_the_connection_is_replaced() {
    // Every second stream's header block is past the 256 KiB header list
    // throng allows: the connection fails (h2.protocol) and a new one
    // carries the next request.
    for io in IO {
        let run = one_conn_on(io, "h2-huge-headers", "10", "1", &[]);
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 5, "{io}: {:?}", m.requests);
        assert_eq!(m.requests.error("h2.protocol"), 5, "{io}: {:?}", m.requests);
        assert_eq!(m.connections.ok, 5, "{io}: {:?}", m.connections);
        const { assert!(throng_lab::HUGE_HEADERS > 256 << 10) };
    }
}

#[test]
fn a_tiny_window_and_large_bodies_flow() {
    for io in IO {
        let dir = tempfile::tempdir().unwrap();
        let body = dir.path().join("body");
        std::fs::write(&body, vec![b'b'; 1000]).unwrap();
        let run = one_conn_on(io, "h2-tiny-window", "20", "4", &["--body", body.to_str().unwrap()]);
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 20, "{:?}", m.requests);
        assert_eq!(m.bytes.received_body, 20 * throng_lab::TINY_WINDOW_BODY as u64);
    }
}

#[test]
fn max_concurrent_streams_1_is_never_exceeded() {
    for io in IO {
        let run = one_conn_on(io, "h2-max-streams-1", "100", "8", &[]);
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 100);
        let x = m.multiplex.as_ref().unwrap();
        assert_eq!(x.server_max_streams, Some(1));
        assert_eq!(x.peak_streams_per_connection, 1);
        assert_eq!(x.peak_streams, 1);
        assert!(run.stdout().contains("capped at 1 by the server"), "{}", run.stdout());
    }
}

/// `one_conn` with `--csv-requests`: the run and its rows.
fn one_conn_rows(fault: &str, n: &str) -> (common::Run, Vec<(String, u64, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.csv");
    let run = one_conn(fault, n, "1", &["--csv-requests", rows.to_str().unwrap()]);
    let rows = common::request_rows(&rows);
    (run, rows)
}

#[test]
fn a_failed_stream_counts_the_bytes_it_wrote() {
    let (run, rows) = one_conn_rows("h2-rst-stream", "20");
    let m = &run.result().measurements;
    assert_eq!(m.requests.error("h2.rst_stream.internal_error"), 10, "{:?}", m.requests);
    // Every request is the same and was sent, reset or not.
    assert_eq!(rows.len(), 20);
    let each = rows[0].1;
    assert!(each > 0);
    for (outcome, sent, received) in &rows {
        assert_eq!(*sent, each, "{outcome}");
        if outcome != "ok" {
            assert_eq!(*received, 0, "reset before any response byte");
        }
    }
    assert_eq!(m.bytes.sent, 20 * each, "{:?}", m.bytes);
}

#[test]
fn a_body_short_of_its_content_length_is_eof() {
    let (run, rows) = one_conn_rows("h2-short-body", "20");
    let m = &run.result().measurements;
    // HTTP/1.1's class for a body cut short; the connection goes on.
    assert_eq!(m.requests.error("eof"), 20, "{:?}", m.requests);
    assert_eq!(m.requests.ok, 0);
    assert_eq!(
        m.connections.attempted, 1,
        "a stream's short body leaves its connection"
    );
    // What was written and read counts for each failed request.
    let (sent, received) = (rows[0].1, rows[0].2);
    assert!(sent > 0 && received > throng_lab::SHORT_BODY.0 as u64, "{rows:?}");
    assert!(
        rows.iter().all(|r| (r.0.as_str(), r.1, r.2) == ("eof", sent, received)),
        "{rows:?}"
    );
    assert_eq!((m.bytes.sent, m.bytes.received), (20 * sent, 20 * received));
}

#[test]
fn a_body_past_its_content_length_is_protocol() {
    for io in IO {
        let run = one_conn_on(io, "h2-long-body", "20", "1", &[]);
        let m = &run.result().measurements;
        assert_eq!(m.requests.error("protocol"), 20, "{:?}", m.requests);
        assert_eq!(m.requests.ok, 0);
        assert_eq!(m.connections.attempted, 1, "{:?}", m.connections);
        assert!(m.bytes.sent > 0 && m.bytes.received > 0, "{:?}", m.bytes);
    }
}

#[test]
fn interim_responses_are_skipped() {
    for io in IO {
        let run = one_conn_on(io, "h2-early-hints", "20", "2", &[]);
        let m = &run.result().measurements;
        assert_eq!(m.requests.ok, 20, "{:?}", m.requests);
        assert_eq!(m.status.get(&200), Some(&20), "{:?}", m.status);
        assert_eq!(m.status.len(), 1, "the 103 is no response of its own: {:?}", m.status);
    }
}

#[test]
fn a_server_allowing_no_stream_is_waited_for_and_counted() {
    for io in IO {
        let server = FaultServer::start("h2-no-streams");
        let run = http_io(
            io,
            &[
                &server.url("http"),
                "--http2",
                "-c",
                "2",
                "-d",
                "3s",
                "-t",
                "1",
                "--timeout",
                "1s",
            ],
        );
        drop(server);
        assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
        let m = &run.result().measurements;
        assert_books_balance(run.result());
        // Each of the 2 slots waits out --timeout per request, and its
        // connection is replaced: a handful, not a connection per loop turn
        // (14,075 in 3 s before).
        let n = m.requests.attempted;
        assert!((2..=10).contains(&n), "{:?}", m.requests);
        assert_eq!(m.requests.error("h2.stream_limit"), n, "{:?}", m.requests);
        assert_eq!(m.connections.ok, n, "one connection per request waited out");
        assert_eq!(m.bytes.sent, 0, "no request was sent");
        assert_eq!(m.multiplex.as_ref().unwrap().server_max_streams, Some(0));
    }
}

#[test]
fn a_storm_s_request_keeps_the_same_classes() {
    for (fault, class) in [("h2-short-body", "eof"), ("h2-no-streams", "h2.stream_limit")] {
        let server = FaultServer::start(fault);
        let run = common::storm(&[&server.url("http"), "--http2", "-n", "4", "-c", "2", "--timeout", "1s"]);
        drop(server);
        assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
        let m = &run.result().measurements;
        assert_books_balance(run.result());
        assert_eq!(m.requests.error(class), 4, "{fault}: {:?}", m.requests);
        assert_eq!(m.connections.ok, 4, "{fault}: the preface was spoken");
        if fault == "h2-short-body" {
            assert!(m.bytes.sent > 0 && m.bytes.received > 0, "{:?}", m.bytes);
        }
    }
}

#[test]
fn views_and_compare_work_on_an_h2_result() {
    let nginx = h2c_nginx(100);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("series.csv");
    let html = dir.path().join("report.html");
    let h2 = http(&[
        &nginx.url("/hello"),
        "--http2",
        "--streams",
        "2",
        "-c",
        "2",
        "-n",
        "200",
        "-t",
        "1",
        "--csv",
        csv.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(h2.code(), 0, "{}", h2.stderr());
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.lines().count() >= 2, "{csv}");
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("HTTP/2"), "the plan's description names the protocol");
    for (format, marker) in [("ab", "Complete requests:"), ("httperf", "Total: connections")] {
        let o = common::output(throng().args(["report", h2.json.to_str().unwrap(), "--format", format]));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(marker), "{format}: {out}");
    }
    // The A side over HTTP/1.1 (the h2c port speaks only HTTP/2).
    let h1_nginx = Nginx::start(LOCATIONS);
    let h1 = http(&[&h1_nginx.url("/hello"), "-c", "2", "-n", "200", "-t", "1"]);
    let o = common::output(throng().args(["compare", h1.json.to_str().unwrap(), h2.json.to_str().unwrap()]));
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!String::from_utf8_lossy(&o.stdout).is_empty());
}
