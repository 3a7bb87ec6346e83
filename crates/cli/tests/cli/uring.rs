//! `throng http --io uring` against nginx and the lab's hostile servers: the
//! same outcomes as the epoll path (counts, conservation, status classes,
//! error classes, timeouts, servers that close connections), each case run
//! over both transports and compared; what `--io uring` refuses (exit 2);
//! and `--io auto`, the default: io_uring where the kernel allows it, epoll
//! (saying why) where a seccomp filter refuses it.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{FaultServer, Nginx, assert_books_balance, free_port, http, throng};
use throng_result::{Io, RunResult};

const IO: [&str; 2] = ["epoll", "uring"];

const LOCATIONS: &str = r#"
    location = / { return 200; }
    location = /hello { default_type text/plain; return 200 "hello"; }
    location = /missing { return 404; }
"#;

/// `throng http ARGS --io IO`, with its result (books checked).
fn run_io(io: &str, args: &[&str]) -> (common::Run, RunResult) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--io", io]);
    let run = http(&all);
    assert!(!run.stderr().contains("panicked"), "{io}: {}", run.stderr());
    let r = run.result().clone();
    assert_books_balance(&r);
    (run, r)
}

/// The outcome of a run, as compared between the transports: requests
/// attempted, ok, failed by class, statuses, connections opened and failed.
fn outcome(r: &RunResult) -> String {
    let m = &r.measurements;
    let errors: Vec<_> = m.requests.errors.iter().filter(|(_, n)| **n > 0).collect();
    format!(
        "attempted {} ok {} errors {:?} status {:?} connections ok {} failed {}",
        m.requests.attempted,
        m.requests.ok,
        errors,
        m.status,
        m.connections.ok,
        m.connections.failed()
    )
}

#[test]
fn keepalive_against_nginx_counts_as_epoll_does() {
    let nginx = Nginx::start(LOCATIONS);
    let mut seen = Vec::new();
    for io in IO {
        let (run, r) = run_io(io, &[&nginx.url("/hello"), "-n", "3000", "-c", "20", "-t", "2"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!((m.requests.attempted, m.requests.ok), (3000, 3000), "{io}");
        assert_eq!(m.status.get(&200), Some(&3000), "{io}");
        // Keep-alive: one connection per slot, its connect timed once.
        assert_eq!(m.connections.ok, 20, "{io}");
        assert_eq!(m.phases["connect"].count(), 20, "{io}");
        for phase in ["wait", "receive", "response", "latency"] {
            assert_eq!(m.phases[phase].count(), 3000, "{io} {phase}");
        }
        assert_eq!(
            m.phases["connection"].count(),
            20,
            "{io}: every connection closed at the end"
        );
        assert_eq!(m.bytes.received_body, 5 * 3000, "{io}");
        assert_eq!(
            m.bytes.received,
            m.bytes.received_headers + m.bytes.received_body,
            "{io}"
        );
        assert_eq!(m.bytes.sent % 3000, 0, "{io}: every request whole");
        let server = m
            .first_reply
            .as_ref()
            .and_then(|f| f.server.clone())
            .unwrap_or_default();
        assert!(server.starts_with("nginx"), "{io}: {server}");
        let (lat, resp, wait) = (&m.phases["latency"], &m.phases["response"], &m.phases["wait"]);
        assert!(lat.quantile(0.5) >= resp.quantile(0.5) && resp.quantile(0.5) >= wait.quantile(0.5));
        // The result says which transport ran, and was asked for.
        let text = std::fs::read_to_string(&run.json).unwrap();
        assert_eq!(text.contains(r#""io": "uring""#), io == "uring", "{io}");
        let ran = if io == "uring" { Io::Uring } else { Io::Epoll };
        assert_eq!(
            (r.generator.io, r.generator.io_fallback.as_deref()),
            (Some(ran), None),
            "{io}"
        );
        assert!(common::schema_violations(&run.json).is_empty(), "{io}");
        // Responses timed by the kernel's receive stamps (uring: carried by
        // the multishot recvmsg's control messages), each by one clock.
        let t = r.generator.timestamps.as_ref().expect("the result names its clock");
        assert_eq!((t.receive.as_str(), t.kernel + t.user), ("kernel", 3000), "{io}: {t:?}");
        assert!(t.kernel * 2 >= 3000, "{io}: most responses stamped: {t:?}");
        seen.push((m.bytes.sent, m.bytes.received));
    }
    assert_eq!(seen[0], seen[1], "the same bytes on the wire either way");
}

#[test]
fn a_connection_per_request_and_rejected_statuses_as_epoll() {
    let nginx = Nginx::start(LOCATIONS);
    for io in IO {
        let (run, r) = run_io(io, &[&nginx.url("/"), "-n", "600", "-c", "10", "--no-keepalive"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!(
            (m.requests.ok, m.connections.attempted, m.connections.ok),
            (600, 600, 600),
            "{io}"
        );
        assert_eq!(m.phases["connect"].count(), 600, "{io}");
        assert_eq!(
            m.phases["connection"].count(),
            600,
            "{io}: every connection closed and timed"
        );

        let (run, r) = run_io(io, &[&nginx.url("/missing"), "-n", "200", "-c", "4"]);
        assert_eq!(run.code(), 1, "{io}: every request failed → exit 1");
        let m = &r.measurements;
        assert_eq!(m.requests.error("check_failed"), 200, "{io}");
        assert_eq!(m.status.get(&404), Some(&200), "{io}");
        let (run, r) = run_io(
            io,
            &[&nginx.url("/missing"), "-n", "200", "-c", "4", "--expect-status", "404"],
        );
        assert_eq!((run.code(), r.measurements.requests.ok), (0, 200), "{io}");
    }
}

#[test]
fn nginx_ending_keepalive_connections_costs_no_request() {
    // nginx closes a connection after 10 requests (Connection: close).
    let nginx = Nginx::start(&format!("keepalive_requests 10;\n{LOCATIONS}"));
    for io in IO {
        let (run, r) = run_io(io, &[&nginx.url("/hello"), "-n", "1000", "-c", "5", "-t", "1"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!((m.requests.ok, m.requests.failed()), (1000, 0), "{io}: {}", outcome(&r));
        // 10 requests per connection; each of the 5 may end on a partly used one.
        assert!((100..=105).contains(&m.connections.ok), "{io}: {}", outcome(&r));
        assert_eq!(m.connections.failed(), 0, "{io}");
    }
}

#[test]
fn large_responses_span_many_receive_buffers() {
    // 1 MiB bodies on 40 connections: far more than the ring's buffers at
    // once, so receives run out of buffers and are armed again.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big"), vec![b'x'; 1 << 20]).unwrap();
    let nginx = Nginx::start(&format!(
        "location = /big {{ root {}; default_type application/octet-stream; }}\n{LOCATIONS}",
        dir.path().display()
    ));
    for io in IO {
        let (run, r) = run_io(io, &[&nginx.url("/big"), "-n", "400", "-c", "40", "-t", "1"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!(m.requests.ok, 400, "{io}: {}", outcome(&r));
        assert_eq!(m.bytes.received_body, 400 << 20, "{io}");
        assert_eq!(m.connections.ok, 40, "{io}");
    }
}

#[test]
fn large_bodies_end_when_both_sent_and_answered_as_on_epoll() {
    // nginx's `return 200` answers before it reads a body: every request's
    // response comes while the rest of its 4 MiB body is still going out,
    // and the next request on the connection must wait for that send to
    // end (it went out behind the body's rest, a 400 every second request,
    // when the ring did not track large sends).
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'b'; 4 << 20]).unwrap();
    let body = body.to_str().unwrap();
    let nginx = Nginx::start(&format!(
        "location = /body {{ client_max_body_size 100m; return 200; }}\n{LOCATIONS}"
    ));
    let mut outcomes = Vec::new();
    for io in IO {
        let (run, r) = run_io(
            io,
            &[&nginx.url("/body"), "-n", "20", "-c", "2", "-t", "1", "--body", body],
        );
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!(r.generator.io.map(|i| i == Io::Uring), Some(io == "uring"), "{io}");
        assert_eq!(
            (m.requests.ok, m.status.get(&200).copied()),
            (20, Some(20)),
            "{io}: {}",
            outcome(&r)
        );
        assert!(m.bytes.sent >= 20 * (4 << 20), "{io}: {} bytes sent", m.bytes.sent);
        outcomes.push(outcome(&r));
    }
    assert_eq!(outcomes[0], outcomes[1], "epoll vs uring");
    // Servers that answer a part, reset, or never read the body: each
    // request ends in the same class on both transports, the books balance.
    let deaf = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let deaf_url = format!("http://{}/", deaf.local_addr().unwrap());
    let stall = FaultServer::start("stall-body");
    let rst = FaultServer::start("rst-before-response");
    for (what, url, timeout, class) in [
        // Never accepted: the kernel takes a socket buffer of the body,
        // then the send stalls until the deadline.
        (
            "a listener that never accepts",
            deaf_url.clone(),
            "300ms",
            "timeout.response",
        ),
        // The lab reads a request's head, not a body it does not expect:
        // its close with the body unread resets the connection, a head
        // sent first or not.
        ("stall-body", format!("http://127.0.0.1:{}/", stall.port), "5s", "reset"),
        (
            "rst-before-response",
            format!("http://127.0.0.1:{}/", rst.port),
            "5s",
            "reset",
        ),
    ] {
        let mut outcomes = Vec::new();
        for io in IO {
            let (run, r) = run_io(
                io,
                &[
                    &url,
                    "-n",
                    "4",
                    "-c",
                    "2",
                    "-t",
                    "1",
                    "--timeout",
                    timeout,
                    "--body",
                    body,
                ],
            );
            assert_eq!(r.measurements.requests.attempted, 4, "{what} {io}: {}", outcome(&r));
            if ends_in_class(&run, &r, (what, io), 4, timeout, class) {
                outcomes.push(outcome(&r));
            }
            if url == deaf_url {
                let sent = r.measurements.bytes.sent;
                assert!(
                    sent < 4 * (4 << 20),
                    "{io}: {sent} bytes counted sent to a server that read none"
                );
            }
        }
        if let [epoll, uring] = &outcomes[..] {
            assert_eq!(epoll, uring, "{what}: epoll vs uring");
        }
    }
}

#[test]
fn large_bodies_leak_no_descriptor_answered_early_or_reset() {
    // 64 descriptors for 300 requests with 256 KiB bodies: an open loop on
    // a new connection per request to nginx's early answer, then a closed
    // loop whose every request the lab resets mid-body. A socket left open
    // per request (a send or an early answer never ended) would run out
    // (fd_unavailable) after a few dozen.
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'b'; 256 << 10]).unwrap();
    let nginx = Nginx::start(&format!(
        "location = /body {{ client_max_body_size 100m; return 200; }}\n{LOCATIONS}"
    ));
    let rst = FaultServer::start("rst-before-response");
    let rst_url = format!("http://127.0.0.1:{}/", rst.port);
    let open_loop = format!("{} -r 300 -n 300 -c 16 --no-keepalive", nginx.url("/body"));
    let closed_loop = format!("{rst_url} -n 300 -c 4");
    for (what, args) in [("open loop", &open_loop), ("reset", &closed_loop)] {
        for io in IO {
            let json = dir.path().join(format!("{io}.json"));
            let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
                "ulimit -n 64 && exec {} http {args} -t 1 --body {} --io {io} -q --json {}",
                env!("CARGO_BIN_EXE_throng"),
                body.display(),
                json.display()
            )));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!stderr.contains("panicked"), "{what} {io}: {stderr}");
            let r = common::read_result(&json).expect("a result");
            assert_books_balance(&r);
            let m = &r.measurements;
            assert_eq!(m.requests.error("fd_unavailable"), 0, "{what} {io}: {}", outcome(&r));
            assert_eq!(
                m.requests.attempted + m.dropped,
                300,
                "{what} {io}: {}",
                requests_outcome(&r)
            );
            if what == "reset" {
                assert_eq!(m.requests.error("reset"), 300, "{what} {io}: {}", outcome(&r));
            } else {
                assert!(m.requests.attempted >= 100, "{what} {io}: {}", requests_outcome(&r));
                assert_eq!(m.requests.ok, m.requests.attempted, "{what} {io}: {}", outcome(&r));
                assert_eq!(m.phases["connection"].count(), m.connections.ok, "{what} {io}");
            }
        }
    }
}

#[test]
fn a_duration_run_stops_gracefully_with_its_books_balanced() {
    let nginx = Nginx::start(LOCATIONS);
    let (run, r) = run_io("uring", &[&nginx.url("/"), "-d", "1s", "-c", "8", "-t", "2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &r.measurements;
    assert!(m.requests.ok > 100, "{}", outcome(&r));
    // On this shared machine a loopback SYN is now and then lost and the
    // connect waits for retransmits, past --timeout at worst (measured: 3
    // of 25 runs of 8 connections with epoll, 2 of 25 with uring); nothing
    // else fails.
    let slow = m.requests.error("timeout.connect");
    assert!(slow <= 1 && m.requests.failed() == slow, "{}", outcome(&r));
    assert_eq!(m.connections.ok + slow, 8, "{}", outcome(&r));
    assert_eq!(
        m.phases["connection"].count(),
        m.connections.ok,
        "every connection closed at the end"
    );
}

#[test]
fn hostile_servers_fail_requests_in_the_same_classes() {
    // (fault, requests, timeout, the one class every request ends in; "" ok)
    let cases = [
        ("never-answer", 4, "300ms", "timeout.response"),
        ("stall-body", 4, "300ms", "timeout.response"),
        ("endless-chunks", 2, "500ms", "timeout.response"),
        ("garbage", 20, "5s", "protocol"),
        ("http09", 20, "5s", "protocol"),
        ("bad-content-length", 20, "5s", "protocol"),
        ("bad-chunk-size", 20, "5s", "protocol"),
        ("endless-headers", 6, "5s", "protocol"),
        ("rst-before-response", 20, "5s", "reset"),
        ("rst-mid-body", 20, "5s", "reset"),
        ("fin-before-response", 20, "5s", "eof"),
        ("fin-mid-body", 20, "5s", "eof"),
        ("connection-close-everywhere", 60, "5s", ""),
        ("status-100-then-200", 200, "5s", ""),
    ];
    for (fault, n, timeout, class) in cases {
        let server = FaultServer::start(fault);
        let url = format!("http://127.0.0.1:{}/", server.port);
        let n_text = n.to_string();
        let mut outcomes = Vec::new();
        for io in IO {
            let (run, r) = run_io(io, &[&url, "-n", &n_text, "-c", "2", "-t", "1", "--timeout", timeout]);
            assert_eq!(r.measurements.requests.attempted, n, "{fault} {io}: {}", outcome(&r));
            if ends_in_class(&run, &r, (fault, io), n, timeout, class) {
                outcomes.push(outcome(&r));
            }
        }
        if let [epoll, uring] = &outcomes[..] {
            assert_eq!(epoll, uring, "{fault}: epoll vs uring");
        }
    }
}

/// Judges a run against a lab fault: every one of its `n` requests ended in
/// `class` ("": ok) with the exit code that implies. Under a short timeout a
/// lost loopback SYN (seen on both transports on this shared machine) makes
/// a request timeout.connect instead; such a run's outcome is not compared
/// between the transports, so this returns whether it may be (false).
fn ends_in_class(
    run: &common::Run,
    r: &RunResult,
    (fault, io): (&str, &str),
    n: u64,
    timeout: &str,
    class: &str,
) -> bool {
    let m = &r.measurements;
    let short = timeout.ends_with("ms");
    let slow_connects = if short { m.requests.error("timeout.connect") } else { 0 };
    if class.is_empty() {
        assert_eq!((run.code(), m.requests.ok), (0, n), "{fault} {io}: {}", outcome(r));
    } else {
        assert_eq!(run.code(), 1, "{fault} {io}: every request failed → exit 1");
        assert_eq!(
            m.requests.error(class) + slow_connects,
            n,
            "{fault} {io}: {}",
            outcome(r)
        );
        assert!(m.requests.error(class) > 0, "{fault} {io}: {}", outcome(r));
    }
    !short
}

#[test]
fn a_refused_port_is_refused_as_with_epoll() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    for io in IO {
        let (run, r) = run_io(io, &[&url, "-n", "50", "-c", "2", "-t", "1"]);
        assert_eq!(run.code(), 1, "{io}");
        let m = &r.measurements;
        assert!(m.requests.attempted > 0, "{io}");
        assert_eq!(
            m.requests.error("refused"),
            m.requests.attempted,
            "{io}: {}",
            outcome(&r)
        );
        assert_eq!(m.connections.error("refused"), m.connections.attempted, "{io}");
    }
}

#[test]
fn what_uring_cannot_run_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.csv");
    let rows = rows.to_str().unwrap();
    for (args, what) in [
        (
            vec!["http://127.0.0.1:1/a", "http://127.0.0.1:1/b", "--http2"],
            "several targets with --http2",
        ),
        (vec!["http://127.0.0.1:1/", "--redirects", "3"], "--redirects"),
        (vec!["http://127.0.0.1:1/", "-x", "http://127.0.0.1:2"], "proxy"),
        (vec!["http://127.0.0.1:1/", "--csv-requests", rows], "--csv-requests"),
    ] {
        let out = common::output(throng().arg("http").args(&args).args(["--io", "uring", "-n", "1"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(what) && stderr.contains("--io epoll"),
            "{args:?}: {stderr}"
        );
    }
}

/// The requests' side of a run, as compared between the transports in an
/// open loop (where the connections opened depend on timing): requests
/// attempted, ok, failed by class, statuses, and starts dropped.
fn requests_outcome(r: &RunResult) -> String {
    let m = &r.measurements;
    let errors: Vec<_> = m.requests.errors.iter().filter(|(_, n)| **n > 0).collect();
    format!(
        "attempted {} ok {} errors {:?} status {:?} dropped {}",
        m.requests.attempted, m.requests.ok, errors, m.status, m.dropped
    )
}

#[test]
fn an_open_loop_sends_every_scheduled_request_as_epoll() {
    let nginx = Nginx::start(LOCATIONS);
    let mut seen = Vec::new();
    for io in IO {
        let (run, r) = run_io(
            io,
            &[&nginx.url("/hello"), "-r", "1000", "-n", "2000", "-c", "200", "-t", "2"],
        );
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        assert!(r.coordinated_omission_free, "{io}");
        let m = &r.measurements;
        // Every start on the schedule sent or counted dropped, and (nginx
        // answering in well under a millisecond, 100 connections a worker)
        // nearly all sent: only a machine that stalls the generator for
        // longer than its connections can absorb drops a few, as epoll does.
        let sent = m.requests.attempted;
        assert_eq!(
            (sent + m.dropped, m.requests.ok),
            (2000, sent),
            "{io}: {}",
            requests_outcome(&r)
        );
        assert!(m.dropped <= 200, "{io}: {}", requests_outcome(&r));
        assert_eq!(m.status.get(&200), Some(&sent), "{io}");
        // Each request's lateness, and its latency from the intended start.
        for phase in ["schedule_lag", "wait", "response", "latency"] {
            assert_eq!(m.phases[phase].count(), sent, "{io} {phase}");
        }
        // Connections up to the cap, each closed and timed at the end.
        assert!((1..=200).contains(&m.connections.ok), "{io}: {}", outcome(&r));
        assert_eq!(m.connections.failed(), 0, "{io}");
        assert_eq!(m.phases["connection"].count(), m.connections.ok, "{io}");
        assert_eq!(m.bytes.received_body, 5 * sent, "{io}");
        let text = std::fs::read_to_string(&run.json).unwrap();
        assert_eq!(text.contains(r#""io": "uring""#), io == "uring", "{io}");
        assert!(common::schema_violations(&run.json).is_empty(), "{io}");
        seen.push((m.bytes.sent / sent, m.bytes.received / sent));
    }
    assert_eq!(seen[0], seen[1], "the same bytes per request on the wire either way");
}

#[test]
fn an_open_loop_on_new_connections_leaks_no_descriptor() {
    // 64 descriptors for 1,500 requests, each on a connection of its own:
    // one socket left open per request would run out (fd_unavailable)
    // after a few dozen.
    let nginx = Nginx::start(LOCATIONS);
    for io in IO {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
            "ulimit -n 64 && exec {} http {} -r 1000 -n 1500 -c 16 -t 1 --no-keepalive --io {io} -q --json {}",
            env!("CARGO_BIN_EXE_throng"),
            nginx.url("/"),
            json.display()
        )));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{io}: {stderr}");
        let r = common::read_result(&json).expect("a result");
        assert_books_balance(&r);
        let m = &r.measurements;
        assert_eq!(m.requests.error("fd_unavailable"), 0, "{io}: {}", outcome(&r));
        assert_eq!(m.requests.attempted + m.dropped, 1500, "{io}: {}", requests_outcome(&r));
        // Under load a start may wait for one of the 16 slots (or be
        // dropped), never fail; a leak would fail all but a few dozen.
        assert!(m.requests.attempted >= 500, "{io}: {}", requests_outcome(&r));
        assert_eq!(m.requests.ok, m.requests.attempted, "{io}: {}", outcome(&r));
        assert_eq!(out.status.code(), Some(0), "{io}: {stderr}");
        // A connection per request (and the warm ones), each closed.
        assert!(m.connections.ok >= m.requests.ok, "{io}: {}", outcome(&r));
        assert_eq!(m.phases["connection"].count(), m.connections.ok, "{io}");
    }
}

#[test]
fn an_open_loop_fails_requests_in_the_same_classes() {
    // (fault, requests, timeout, the one class every request ends in; "" ok)
    let cases = [
        ("never-answer", 4, "400ms", "timeout.response"),
        ("garbage", 20, "5s", "protocol"),
        ("bad-content-length", 20, "5s", "protocol"),
        ("rst-before-response", 20, "5s", "reset"),
        ("rst-mid-body", 20, "5s", "reset"),
        ("fin-before-response", 20, "5s", "eof"),
        ("fin-mid-body", 20, "5s", "eof"),
        ("connection-close-everywhere", 60, "5s", ""),
        ("status-100-then-200", 100, "5s", ""),
    ];
    for (fault, n, timeout, class) in cases {
        let server = FaultServer::start(fault);
        let url = format!("http://127.0.0.1:{}/", server.port);
        let n_text = n.to_string();
        let mut outcomes = Vec::new();
        for io in IO {
            let (run, r) = run_io(
                io,
                &[
                    &url,
                    "-r",
                    "200",
                    "-n",
                    &n_text,
                    "-c",
                    "40",
                    "-t",
                    "1",
                    "--timeout",
                    timeout,
                ],
            );
            let m = &r.measurements;
            assert_eq!(
                (m.requests.attempted, m.dropped),
                (n, 0),
                "{fault} {io}: {}",
                requests_outcome(&r)
            );
            if ends_in_class(&run, &r, (fault, io), n, timeout, class) {
                outcomes.push(requests_outcome(&r));
            }
        }
        if let [epoll, uring] = &outcomes[..] {
            assert_eq!(epoll, uring, "{fault}: epoll vs uring");
        }
    }
}

#[test]
fn a_rate_beyond_the_server_is_dropped_and_counted_as_epoll() {
    // 5 connections to answers 100 ms late carry 50 a second; the schedule
    // asks 300 in one second. The starts no connection could take are
    // dropped, never sent late in a burst; the rest waited (schedule_lag).
    let server = FaultServer::serve(&[]);
    let url = format!("http://127.0.0.1:{}/delay/100", server.port);
    for io in IO {
        let (run, r) = run_io(io, &[&url, "-r", "300", "-n", "300", "-c", "5", "-t", "1"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!(m.requests.attempted + m.dropped, 300, "{io}: {}", requests_outcome(&r));
        assert_eq!(m.requests.ok, m.requests.attempted, "{io}: {}", outcome(&r));
        // At most 5 in flight for ~1.2 s (the schedule, then the queue of 5
        // drained) at 100 ms each: well under half of the schedule sent.
        assert!(
            (5..=150).contains(&m.requests.attempted) && m.dropped >= 150,
            "{io}: {}",
            requests_outcome(&r)
        );
        assert_eq!(m.phases["schedule_lag"].count(), m.requests.attempted, "{io}");
        assert!(m.connections.ok <= 5, "{io}: {}", outcome(&r));
    }
}

#[test]
fn an_open_loop_stops_at_its_duration_and_at_ctrl_c_with_its_books_balanced() {
    let nginx = Nginx::start(LOCATIONS);
    // The duration: 500 a second for 1 s is 500 starts, each sent or dropped.
    let (run, r) = run_io(
        "uring",
        &[&nginx.url("/"), "-r", "500", "-d", "1s", "-c", "20", "-t", "2"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &r.measurements;
    assert_eq!(m.requests.attempted + m.dropped, 500, "{}", requests_outcome(&r));
    assert_eq!(m.requests.ok, m.requests.attempted, "{}", outcome(&r));
    assert_eq!(m.phases["connection"].count(), m.connections.ok);

    // Ctrl-C a minute-long schedule: what ran is written, the books balance
    // and every connection is closed and counted.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = crate::exit_codes::interrupt(
        throng()
            .args(["http", &nginx.url("/"), "-r", "500", "-d", "60s", "-c", "20", "-t", "2"])
            .args(["--io", "uring", "-q", "--json"])
            .arg(&json),
        std::time::Duration::from_millis(1500),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let r = common::read_result(&json).expect("the interrupted run's result");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert!(m.requests.ok > 0, "{}", outcome(&r));
    assert!(m.requests.attempted + m.dropped < 30_000, "{}", requests_outcome(&r));
    // A request in flight at the stop ends (ok) or is interrupted; none fails otherwise.
    assert_eq!(
        m.requests.ok + m.requests.error("interrupted"),
        m.requests.attempted,
        "{}",
        outcome(&r)
    );
    assert_eq!(m.connections.failed(), 0, "{}", outcome(&r));
    assert_eq!(m.phases["connection"].count(), m.connections.ok);
}

/// What every run asked for one transport checks (`uring_tls::`,
/// `storm_uring::`): no panic, balanced books, the transport that ran the
/// one asked for, in the result and the report (a silent fallback to epoll
/// fails). Returns the run and its result.
pub(crate) fn ran_on(io: &str, run: common::Run) -> (common::Run, RunResult) {
    assert!(!run.stderr().contains("panicked"), "{io}: {}", run.stderr());
    let r = run.result().clone();
    assert_books_balance(&r);
    let ran = if io == "uring" { Io::Uring } else { Io::Epoll };
    assert_eq!(
        (r.generator.io, r.generator.io_fallback.as_deref()),
        (Some(ran), None),
        "{io}: the result names the transport that ran"
    );
    assert_eq!(
        run.stdout().contains("I/O: io_uring"),
        io == "uring",
        "{io}: {}",
        run.stdout()
    );
    (run, r)
}

/// `cmd` with `io_uring_setup` failing with EPERM in the child, as a
/// container's seccomp policy or kernel.io_uring_disabled refuses it: a
/// seccomp filter installed between fork and exec. Every other system call
/// (and any of another architecture's calling convention) is allowed.
pub(crate) fn deny_io_uring(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    // struct seccomp_data: int nr; __u32 arch; …
    const NR_OFFSET: u32 = 0;
    const ARCH_OFFSET: u32 = 4;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let ret = libc::BPF_RET | libc::BPF_K;
    let filter = [
        stmt(load, ARCH_OFFSET),
        jeq(AUDIT_ARCH, 1, 0),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
        stmt(load, NR_OFFSET),
        jeq(libc::SYS_io_uring_setup as u32, 0, 1),
        stmt(ret, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(ret, libc::SECCOMP_RET_ALLOW),
    ];
    // SAFETY: the closure runs in the forked child before exec and only
    // makes two prctl calls on memory it owns (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_NO_NEW_PRIVS,
                1 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

#[test]
fn auto_runs_epoll_and_says_why_when_io_uring_is_not_permitted() {
    let nginx = Nginx::start(LOCATIONS);
    let url = nginx.url("/hello");
    let denied = |args: &[&str]| common::with_json(deny_io_uring(throng().arg("http").arg(&url).args(args)));

    // The default: the plan is one the ring carries, the kernel refuses it.
    let run = denied(&["-n", "2000", "-c", "10", "-t", "2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (2000, 2000));
    assert_eq!(m.status.get(&200), Some(&2000));
    assert_eq!(r.generator.io, Some(Io::Epoll));
    let why = r.generator.io_fallback.as_deref().unwrap_or_default();
    assert!(why.contains("not permitted") && why.contains("EPERM"), "{why}");
    // One line on stderr names why and that epoll ran; the report says so.
    let lines: Vec<_> = run
        .stderr()
        .lines()
        .filter(|l| l.contains("EPERM"))
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr());
    assert!(
        lines[0].contains("io_uring is not permitted") && lines[0].contains("epoll"),
        "{}",
        lines[0]
    );
    assert!(
        run.stdout().contains("I/O: epoll (io_uring is not permitted"),
        "{}",
        run.stdout()
    );
    assert!(common::schema_violations(&run.json).is_empty());

    // A plan the ring does not carry runs on epoll without a word, as
    // does --io epoll: neither asks the kernel.
    for args in [["--redirects", "1", "-n", "200"], ["--io", "epoll", "-n", "200"]] {
        let run = denied(&args);
        assert_eq!(run.code(), 0, "{args:?}: {}", run.stderr());
        assert_eq!(run.result().measurements.requests.ok, 200, "{args:?}");
        assert_eq!(run.result().generator.io, Some(Io::Epoll), "{args:?}");
        assert_eq!(run.result().generator.io_fallback, None, "{args:?}");
        assert!(!run.stderr().contains("io_uring"), "{args:?}: {}", run.stderr());
    }

    // Forced, the refusal is a usage error naming EPERM and what to do.
    let run = denied(&["-n", "10", "--io", "uring"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("EPERM") && run.stderr().contains("--io epoll"),
        "{}",
        run.stderr()
    );
}

#[test]
fn the_default_runs_on_io_uring_where_the_kernel_allows_it() {
    let nginx = Nginx::start(LOCATIONS);
    let run = http(&[&nginx.url("/hello"), "-n", "2000", "-c", "10", "-t", "2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 2000);
    if let Some(why) = &r.generator.io_fallback {
        println!("skipped: this host refuses io_uring ({why}); the default ran epoll");
        assert_eq!(r.generator.io, Some(Io::Epoll));
        return;
    }
    assert_eq!(r.generator.io, Some(Io::Uring), "{}", run.stderr());
    assert!(run.stdout().contains("I/O: io_uring"), "{}", run.stdout());
    assert_eq!(r.generator.io_not_carried, None);

    // A plan the ring does not carry runs on epoll, and the result and the
    // report say what kept the ring out; forced epoll says nothing.
    let run = http(&[&nginx.url("/hello"), "-n", "200", "--redirects", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_eq!(r.generator.io, Some(Io::Epoll));
    assert_eq!(r.generator.io_not_carried.as_deref(), Some("--redirects"));
    assert!(
        run.stdout()
            .contains("I/O: epoll (io_uring does not carry --redirects yet)"),
        "{}",
        run.stdout()
    );
    assert!(common::schema_violations(&run.json).is_empty());
    let run = http(&[&nginx.url("/hello"), "-n", "200", "--io", "epoll"]);
    assert_eq!(run.result().generator.io_not_carried, None);
    assert!(run.stdout().contains("I/O: epoll\n"), "{}", run.stdout());
}
