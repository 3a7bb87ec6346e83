//! `throng storm --io uring` against nginx and the lab: the same outcomes
//! as the epoll storm (connections, the one request, its classes, the
//! server's closes during the hold, reconnects, a stop), each case run on
//! both and compared, and the result saying which ran (a silent fallback
//! fails); what the ring does not carry refused (exit 2) or left to epoll
//! by `--io auto`; no descriptor left behind; auto's fallback where
//! io_uring is not permitted.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::process::Stdio;

use common::{FaultServer, Nginx, assert_books_balance, free_port, storm, throng};
use throng_result::{Io, RunResult};

pub(crate) const IO: [&str; 2] = ["epoll", "uring"];

/// `throng storm ARGS --io IO`: its result, books checked, and the I/O
/// that ran checked against the one asked for.
pub(crate) fn run_io(io: &str, args: &[&str]) -> (common::Run, RunResult) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--io", io]);
    crate::uring::ran_on(io, storm(&all))
}

/// A storm's outcome, as compared between the transports: connections and
/// requests by outcome and class, statuses, closes and their samples.
pub(crate) fn outcome(r: &RunResult) -> String {
    let m = &r.measurements;
    let conn_errors: Vec<_> = m.connections.errors.iter().filter(|(_, n)| **n > 0).collect();
    let req_errors: Vec<_> = m.requests.errors.iter().filter(|(_, n)| **n > 0).collect();
    format!(
        "connections {} ok {} {:?}; requests {} ok {} {:?}; status {:?}; closed by peer {}; connection samples {}",
        m.connections.attempted,
        m.connections.ok,
        conn_errors,
        m.requests.attempted,
        m.requests.ok,
        req_errors,
        m.status,
        m.closed_by_peer,
        m.phases.get("connection").map_or(0, |h| h.count()),
    )
}

#[test]
fn plain_and_http_storms_count_as_epoll_does() {
    let nginx = Nginx::start("location = / { return 200; }\nlocation = /hello { return 200 \"hello\"; }");
    let tcp = nginx.url("/").replacen("http://", "tcp://", 1);
    let tcp = tcp.trim_end_matches('/').to_string();
    let hello = nginx.url("/hello");
    let cases: [(&str, Vec<&str>); 3] = [
        (
            "tcp, held",
            vec![&tcp, "-n", "600", "-c", "150", "--hold", "300ms", "-t", "2"],
        ),
        (
            "http, paced",
            vec![&hello, "-n", "600", "--rate", "3000", "--hold", "100ms", "-t", "2"],
        ),
        ("http, closed at once", vec![&hello, "-n", "600", "-c", "50", "-t", "1"]),
    ];
    for (what, args) in cases {
        let mut seen = Vec::new();
        for io in IO {
            let (run, r) = run_io(io, &args);
            assert_eq!(run.code(), 0, "{what} {io}: {}", run.stderr());
            let m = &r.measurements;
            assert_eq!((m.connections.attempted, m.connections.ok), (600, 600), "{what} {io}");
            assert_eq!(m.phases["connect"].count(), 600, "{what} {io}");
            assert_eq!(m.phases["connection"].count(), 600, "{what} {io}: each closed once");
            assert_eq!(m.closed_by_peer, 0, "{what} {io}");
            if what.starts_with("http") {
                assert_eq!((m.requests.attempted, m.requests.ok), (600, 600), "{what} {io}");
                assert_eq!(m.status.get(&200), Some(&600), "{what} {io}");
                assert_eq!(m.bytes.received_body, 5 * 600, "{what} {io}");
                assert_eq!(m.phases["response"].count(), 600, "{what} {io}");
            } else {
                assert_eq!(m.requests.attempted, 0, "{what} {io}");
            }
            if what == "tcp, held" {
                assert!(m.peak_concurrent_connections <= 150, "{what} {io}");
                assert!(m.phases["connection"].none_below(300_000), "{what} {io}: held 300 ms");
            }
            if what == "http, paced" {
                assert_eq!(m.phases["schedule_lag"].count(), 600, "{what} {io}");
            }
            let text = std::fs::read_to_string(&run.json).unwrap();
            assert!(
                text.contains(&format!(r#""io": "{io}""#)),
                "{what} {io}: the plan records --io"
            );
            assert!(common::schema_violations(&run.json).is_empty(), "{what} {io}");
            let label = if io == "uring" { "I/O: io_uring" } else { "I/O: epoll" };
            let report = common::output(throng().args(["report"]).arg(&run.json));
            assert!(String::from_utf8_lossy(&report.stdout).contains(label), "{what} {io}");
            seen.push((outcome(&r), m.bytes.sent, m.bytes.received));
        }
        assert_eq!(seen[0], seen[1], "{what}: the same outcome and bytes either way");
    }
}

#[test]
fn refused_ports_and_hostile_servers_fail_in_the_same_classes() {
    let port = free_port();
    let refused = format!("tcp://127.0.0.1:{port}");
    let mut seen = Vec::new();
    for io in IO {
        let (run, r) = run_io(io, &[&refused, "-n", "50", "-c", "5", "-t", "1"]);
        assert_eq!(run.code(), 1, "{io}: {}", run.stderr());
        let m = &r.measurements;
        assert_eq!(m.connections.attempted, 50, "{io}: {}", outcome(&r));
        assert_eq!(m.connections.error("refused"), 50, "{io}: {}", outcome(&r));
        seen.push(outcome(&r));
    }
    assert_eq!(seen[0], seen[1]);

    // The one request per connection: its classes, the connections ok.
    for (fault, class) in [
        ("garbage", "protocol"),
        ("rst-mid-body", "reset"),
        ("rst-before-response", "reset"),
        ("fin-before-response", "eof"),
        ("stall-body", "timeout.response"),
        ("never-answer", "timeout.response"),
        ("status-100-then-200", ""),
    ] {
        let server = FaultServer::start(fault);
        let url = server.url("http");
        let mut seen = Vec::new();
        for io in IO {
            let (_, r) = run_io(io, &[&url, "-n", "20", "-c", "5", "-t", "1", "--timeout", "500ms"]);
            let m = &r.measurements;
            assert_eq!(m.connections.ok, 20, "{fault} {io}: {}", outcome(&r));
            assert_eq!(m.requests.attempted, 20, "{fault} {io}: {}", outcome(&r));
            if class.is_empty() {
                assert_eq!(m.requests.ok, 20, "{fault} {io}: {}", outcome(&r));
            } else {
                assert_eq!(m.requests.error(class), 20, "{fault} {io}: {}", outcome(&r));
            }
            assert_eq!(m.phases["connection"].count(), 20, "{fault} {io}: each closed once");
            seen.push(outcome(&r));
        }
        assert_eq!(seen[0], seen[1], "{fault}");
    }
}

#[test]
fn a_server_that_never_accepts_times_connects_out_as_on_epoll() {
    // A listening socket with the shortest backlog that never accepts:
    // the kernel completes a handshake or two, drops the other SYNs, and
    // those connects time out (timeout.connect) on both.
    let (_listener, port) = unaccepting_listener();
    let url = format!("tcp://127.0.0.1:{port}");
    for io in IO {
        let (_, r) = run_io(io, &[&url, "-n", "40", "-c", "40", "-t", "1", "--timeout", "300ms"]);
        let m = &r.measurements;
        assert_eq!(m.connections.attempted, 40, "{io}: {}", outcome(&r));
        assert!(m.connections.error("timeout.connect") >= 30, "{io}: {}", outcome(&r));
        assert_eq!(
            m.connections.ok + m.connections.error("timeout.connect"),
            40,
            "{io}: {}",
            outcome(&r)
        );
    }
}

/// A TCP socket listening on a free loopback port with a backlog of 0,
/// never accepting; closed on drop.
fn unaccepting_listener() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor this function owns; the
    // address structures are ours and sized as passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&raw const addr).cast(), len), 0);
        assert_eq!(libc::listen(fd, 0), 0);
        let mut bound: libc::sockaddr_in = std::mem::zeroed();
        let mut blen = len;
        assert_eq!(libc::getsockname(fd, (&raw mut bound).cast(), &raw mut blen), 0);
        (owned, u16::from_be(bound.sin_port))
    }
}

/// `throng serve` on one thread with `extra`, stopped on drop.
struct Serve(std::process::Child);

impl Serve {
    fn start(port: u16, extra: &[&str]) -> Serve {
        let serve = Serve(
            throng()
                .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--threads", "1"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        common::wait_listening(([127, 0, 0, 1], port).into());
        serve
    }
}

impl Serve {
    /// Kills the server at once (SIGKILL): the kernel closes every
    /// connection it holds, whatever its own shutdown would do.
    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        // Reaped: Drop must not signal its (now reusable) process id.
        std::mem::forget(self);
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

#[test]
fn held_connections_the_server_closes_are_counted_and_reconnected_on_the_ring() {
    let _alone = common::heavy();
    let port = free_port();
    // The lab closes every second connection it accepts, 1 s after.
    let _serve = Serve::start(port, &["--fault", "close-every-other"]);
    let url = format!("tcp://127.0.0.1:{port}");
    let (run, r) = run_io(
        "uring",
        &[&url, "-n", "1000", "--rate", "2000", "--hold", "4s", "--timeout", "30s"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 1000, "{}", outcome(&r));
    // The probe of wait_listening took one accept: 1,000 more close 500.
    assert_eq!(m.closed_by_peer, 500, "{}", outcome(&r));
    assert_eq!(m.phases["connection"].count(), 1000, "each closed and timed once");
    assert!(m.phases["connection"].max() >= 4_000_000);
    assert!(m.phases["connection"].min() < 4_000_000);
    assert_eq!(m.reconnects.attempted, 0, "no reconnect without --reconnect");

    let (run, r) = run_io(
        "uring",
        &[
            &url,
            "-n",
            "1000",
            "--rate",
            "2000",
            "--hold",
            "4s",
            "--reconnect",
            "--reconnect-wait",
            "200ms",
            "--reconnect-jitter",
            "0s",
            "--timeout",
            "30s",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 1000, "{}", outcome(&r));
    assert!(m.closed_by_peer >= 500, "{}", outcome(&r));
    // Every close by the server: a reconnect (the lab accepts them all),
    // or giving up because the hold was ending.
    assert_eq!(m.reconnects.attempted, m.reconnects.ok, "{:?}", m.reconnects);
    assert!(m.reconnects.ok >= 500, "{:?}", m.reconnects);
    let gave_up: u64 = m.reconnect_gave_up.values().sum();
    assert_eq!(m.closed_by_peer, m.reconnects.ok + gave_up, "{:?}", m.reconnect_gave_up);
    assert_eq!(m.phases["reconnect"].count(), m.reconnects.ok);
    assert_eq!(m.phases["connection"].count(), m.connections.ok + m.reconnects.ok);
}

#[test]
fn reconnects_that_fail_give_up_with_the_last_class_as_on_epoll() {
    let _alone = common::heavy();
    let mut seen = Vec::new();
    for io in IO {
        let port = free_port();
        // The lab holds every connection until it goes.
        let serve = Serve::start(port, &[]);
        let url = format!("tcp://127.0.0.1:{port}");
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let child = throng()
            .args(["storm", &url, "-n", "200", "--hold", "6s", "--reconnect"])
            .args([
                "--reconnect-wait",
                "100ms",
                "--reconnect-jitter",
                "0s",
                "--max-reconnects",
                "3",
            ])
            .args(["--io", io, "--timeout", "2s", "-q", "--json"])
            .arg(&json)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Every connection is up; the server goes, and the reconnects are refused.
        common::wait_established(port, 200);
        serve.kill();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{io}: {stderr}");
        let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
        assert_books_balance(&r);
        let ran = if io == "uring" { Io::Uring } else { Io::Epoll };
        assert_eq!(r.generator.io, Some(ran));
        let m = &r.measurements;
        assert_eq!(m.connections.ok, 200, "{io}: {}", outcome(&r));
        assert_eq!(
            m.closed_by_peer,
            200,
            "{io}: the server's exit closed them all: {}",
            outcome(&r)
        );
        // Three refused attempts each, unless the run stopped first (a storm
        // whose attempts all fail may stop early): then it gave up as the
        // hold ended.
        assert_eq!(m.reconnects.ok, 0, "{io}: {:?}", m.reconnects);
        assert!(
            m.reconnects.attempted > 0 && m.reconnects.attempted <= 600,
            "{io}: {:?}",
            m.reconnects
        );
        assert_eq!(
            m.reconnects.error("refused"),
            m.reconnects.attempted,
            "{io}: {:?}",
            m.reconnects
        );
        assert_eq!(
            m.reconnect_gave_up.values().sum::<u64>(),
            200,
            "{io}: {:?}",
            m.reconnect_gave_up
        );
        assert!(
            m.reconnect_gave_up.keys().all(|k| k == "refused" || k == "hold_ended"),
            "{io}: {:?}",
            m.reconnect_gave_up
        );
        let refused = m.reconnect_gave_up.get("refused").copied().unwrap_or(0);
        assert!(m.reconnects.attempted >= 3 * refused, "{io}: {:?}", m.reconnects);
        seen.push(outcome(&r));
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn a_stop_closes_every_held_connection_on_the_ring() {
    let _alone = common::heavy();
    let port = free_port();
    let _serve = Serve::start(port, &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let child = throng()
        .args([
            "storm",
            &format!("tcp://127.0.0.1:{port}"),
            "-n",
            "1000",
            "--hold",
            "100s",
        ])
        .args(["--io", "uring", "--procs", "1", "--timeout", "30s", "-q", "--json"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_established(port, 1000);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert!(r.interrupted);
    assert_books_balance(&r);
    assert_eq!(r.generator.io, Some(Io::Uring));
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 1000, "{}", outcome(&r));
    assert_eq!(m.closed_by_peer, 0);
    assert_eq!(
        m.phases["connection"].count(),
        1000,
        "every held connection closed at the stop"
    );
    assert!(r.duration_s < 60.0, "the stop ended the 100 s hold");
}

#[test]
fn storms_leak_no_descriptor_on_the_ring() {
    // 64 descriptors for 1,500 connections each: against nginx with a
    // request, and against a server that resets it. A socket left open per
    // connection would run out (fd_unavailable) after a few dozen. (A
    // refused port is no test of it: a storm whose every connection fails
    // may stop early.)
    let nginx = Nginx::start("location = / { return 200; }");
    let rst = FaultServer::start("rst-before-response");
    let dir = tempfile::tempdir().unwrap();
    for (what, url) in [("nginx", nginx.url("/")), ("reset", rst.url("http"))] {
        let json = dir.path().join(format!("{what}.json"));
        let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
            "ulimit -n 64 && exec {} storm {url} -n 1500 -c 16 -t 1 --io uring -q --json {}",
            env!("CARGO_BIN_EXE_throng"),
            json.display()
        )));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let r = common::read_result(&json).expect("a result");
        assert_books_balance(&r);
        assert_eq!(r.generator.io, Some(Io::Uring), "{what}");
        let m = &r.measurements;
        assert_eq!(m.connections.attempted, 1500, "{what}: {}", outcome(&r));
        assert_eq!(m.connections.error("fd_unavailable"), 0, "{what}: {}", outcome(&r));
        match what {
            "nginx" => assert_eq!(m.requests.ok, 1500, "{what}: {}", outcome(&r)),
            _ => assert_eq!(m.requests.error("reset"), 1500, "{what}: {}", outcome(&r)),
        }
    }
}

#[test]
fn what_the_ring_does_not_carry_is_refused_or_left_to_epoll() {
    let closed = free_port();
    let cases: [(Vec<String>, &str); 4] = [
        (vec![format!("nats://127.0.0.1:{closed}")], "NATS"),
        (vec![format!("ws://127.0.0.1:{closed}/")], "WebSocket"),
        (vec![format!("http://127.0.0.1:{closed}/"), "--http2".into()], "HTTP/2"),
        (
            vec![
                format!("http://127.0.0.1:{closed}/"),
                "-x".into(),
                format!("http://127.0.0.1:{closed}"),
            ],
            "proxy",
        ),
    ];
    for (args, what) in &cases {
        let out = common::output(throng().arg("storm").args(args).args(["--io", "uring", "-n", "1"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.contains(what) && stderr.contains("--io uring") && stderr.contains("--io epoll"),
            "{args:?}: {stderr}"
        );
        // Left to auto, the same storm runs on epoll without a word.
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut all = args.clone();
        all.extend_from_slice(&["-n", "2", "--timeout", "1s"]);
        let run = storm(&all);
        assert!(!run.stderr().contains("panicked"), "{args:?}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(
            (r.generator.io, r.generator.io_fallback.as_deref()),
            (Some(Io::Epoll), None),
            "{args:?}"
        );
        assert!(!run.stderr().contains("io_uring"), "{args:?}: {}", run.stderr());
        // The result and the report say what kept the ring out (here, where
        // the ring runs).
        let not_carried = r.generator.io_not_carried.as_deref().unwrap_or_default();
        assert!(not_carried.contains(what), "{args:?}: {not_carried:?}");
        assert!(
            run.stdout()
                .contains(&format!("I/O: epoll (io_uring does not carry {not_carried} yet)")),
            "{args:?}: {}",
            run.stdout()
        );
    }
}

#[test]
fn auto_runs_a_storm_on_epoll_and_says_why_when_io_uring_is_not_permitted() {
    let nginx = Nginx::start("location = / { return 200; }");
    let url = nginx.url("/");
    let denied =
        |args: &[&str]| common::with_json(crate::uring::deny_io_uring(throng().arg("storm").arg(&url).args(args)));
    let run = denied(&["-n", "300", "-c", "20"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 300);
    assert_eq!(r.generator.io, Some(Io::Epoll));
    let why = r.generator.io_fallback.as_deref().unwrap_or_default();
    assert!(why.contains("not permitted") && why.contains("EPERM"), "{why}");
    let lines = run.stderr().lines().filter(|l| l.contains("EPERM")).count();
    assert_eq!(lines, 1, "{}", run.stderr());
    let report = common::output(throng().args(["report"]).arg(&run.json));
    assert!(
        String::from_utf8_lossy(&report.stdout).contains("I/O: epoll (io_uring is not permitted"),
        "{}",
        String::from_utf8_lossy(&report.stdout)
    );
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
fn the_default_storm_runs_on_io_uring_where_the_kernel_allows_it() {
    let nginx = Nginx::start("location = / { return 200; }");
    let run = storm(&[&nginx.url("/"), "-n", "300", "-c", "20"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 300);
    if let Some(why) = &r.generator.io_fallback {
        println!("skipped: this host refuses io_uring ({why}); the default ran epoll");
        assert_eq!(r.generator.io, Some(Io::Epoll));
        return;
    }
    assert_eq!(r.generator.io, Some(Io::Uring), "{}", run.stderr());
}

/// The TCP connections (IPv4) as (local, remote) addresses, those in
/// TIME_WAIT only or in any state, from /proc/net/tcp.
fn sockets(time_wait_only: bool) -> std::collections::HashSet<(String, String)> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 3 && (!time_wait_only || f[3] == "06")).then(|| (f[1].to_string(), f[2].to_string()))
        })
        .collect()
}

/// The port of an address as /proc/net/tcp writes it (`0100007F:1F90`).
fn proc_port(addr: &str) -> u16 {
    u16::from_str_radix(addr.rsplit(':').next().unwrap(), 16).unwrap()
}

#[test]
fn http_storms_without_a_hold_let_the_server_close_first() {
    for io in IO {
        // A server of its own per transport: its port names its sockets.
        let nginx = Nginx::start("location = / { return 200 \"ok\"; }");
        // Every socket there is now (the server's readiness probe may still
        // be closing: its TIME_WAIT is not the storm's).
        let before = sockets(false);
        let (run, r) = run_io(io, &[&nginx.url("/"), "-n", "300", "-c", "30"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        assert_eq!(r.measurements.requests.ok, 300, "{io}: {}", outcome(&r));
        assert_eq!(r.measurements.connections.ok, 300, "{io}");
        assert_eq!(
            r.measurements.phases["connection"].count(),
            300,
            "{io}: each closed once"
        );
        assert_eq!(
            r.measurements.closed_by_peer, 0,
            "{io}: the close it asked for is no drop"
        );
        let new: Vec<_> = sockets(true).difference(&before).cloned().collect();
        // The request asks the server to close, and the storm waits for
        // that close: the TIME_WAITs are the server's (local port: its
        // port), none the generator's (remote port: the server's).
        let generator = new.iter().filter(|(_, remote)| proc_port(remote) == nginx.port).count();
        let server = new.iter().filter(|(local, _)| proc_port(local) == nginx.port).count();
        assert_eq!(
            generator, 0,
            "{io}: the generator closed first on {generator} connections"
        );
        assert!(server > 0, "{io}: no server TIME_WAIT: {new:?}");
    }
}
