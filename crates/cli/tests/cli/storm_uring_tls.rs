//! TLS storms (tls://, https://, mTLS) on the ring against nginx and the
//! lab's TLS faults: each case run under `--io epoll` and `--io uring` and
//! compared (connections, handshakes, the `tls` samples, classes, closes),
//! the result naming the transport that ran; no descriptor left behind;
//! held TLS connections bounded in memory.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::storm_uring::{IO, outcome, run_io};

use common::{FaultServer, assert_books_balance, certs_with as certs, p};
use throng_result::{Io, RunResult};

/// What the TLS side of a storm did, compared between the transports.
fn handshakes(r: &RunResult) -> String {
    let m = &r.measurements;
    let t = m.tls.as_ref();
    format!(
        "handshakes {:?} resumed {:?} versions {:?} groups {:?}; tls samples {}",
        t.map(|t| t.handshakes),
        t.map(|t| t.resumed),
        t.map(|t| t.versions.clone()),
        t.map(|t| t.groups.clone()),
        m.phases.get("tls").map_or(0, |h| h.count()),
    )
}

#[test]
fn tls_and_https_storms_count_and_handshake_as_epoll_does() {
    let (_d, c) = certs(&["--rsa"]);
    let nginx = crate::tls::nginx_tls(&c, false);
    let mtls = crate::tls::nginx_tls(&c, true);
    let ca = p(&c, "ca.pem");
    let (cert, key) = (p(&c, "client.pem"), p(&c, "client.key"));
    let tls = format!("tls://localhost:{}", nginx.port);
    let https = nginx.https("localhost", "/");
    let mtls_url = mtls.https("localhost", "/");
    let cases: [(&str, Vec<&str>); 5] = [
        (
            "tls, held",
            vec![
                &tls, "--cacert", &ca, "-n", "300", "-c", "100", "--hold", "300ms", "-t", "2",
            ],
        ),
        (
            "https, paced",
            vec![&https, "--cacert", &ca, "-n", "300", "--rate", "1500", "-t", "2"],
        ),
        (
            "https, held, TLS 1.2",
            vec![
                &https,
                "--cacert",
                &ca,
                "--tls-version",
                "1.2",
                "-n",
                "200",
                "-c",
                "50",
                "--hold",
                "200ms",
                "-t",
                "1",
            ],
        ),
        (
            "mtls https",
            vec![
                &mtls_url, "--cacert", &ca, "--cert", &cert, "--key", &key, "-n", "200", "-c", "20", "-t", "1",
            ],
        ),
        ("insecure tls", vec![&tls, "-k", "-n", "200", "-c", "20", "-t", "1"]),
    ];
    for (what, args) in cases {
        let mut seen = Vec::new();
        for io in IO {
            let (run, r) = run_io(io, &args);
            assert_eq!(run.code(), 0, "{what} {io}: {}", run.stderr());
            let m = &r.measurements;
            let n = m.connections.attempted;
            assert!(n == 300 || n == 200, "{what} {io}");
            assert_eq!(m.connections.ok, n, "{what} {io}: {}", outcome(&r));
            let t = m.tls.as_ref().unwrap();
            assert_eq!(t.handshakes, n, "{what} {io}: {}", handshakes(&r));
            assert_eq!(m.phases["tls"].count(), n, "{what} {io}: one tls sample each");
            assert_eq!(m.phases["connect"].count(), n, "{what} {io}");
            assert_eq!(m.phases["connection"].count(), n, "{what} {io}: each closed once");
            let version = if what.contains("1.2") { "TLSv1_2" } else { "TLSv1_3" };
            assert_eq!(t.versions.get(version), Some(&n), "{what} {io}: {}", handshakes(&r));
            if what.starts_with("https") || what.starts_with("mtls") {
                assert_eq!((m.requests.attempted, m.requests.ok), (n, n), "{what} {io}");
                assert_eq!(m.status.get(&200), Some(&n), "{what} {io}: {:?}", m.status);
                assert_eq!(m.bytes.received_body, 3 * n, "{what} {io}");
            } else {
                assert_eq!(m.requests.attempted, 0, "{what} {io}");
            }
            if what.contains("held") {
                assert!(m.phases["connection"].none_below(200_000), "{what} {io}: held");
            }
            if what.starts_with("mtls") {
                assert!(run.stdout().contains("client certificate (mTLS)"), "{what} {io}");
            }
            seen.push((outcome(&r), handshakes(&r)));
        }
        assert_eq!(seen[0], seen[1], "{what}: the same outcome either way");
    }
}

#[test]
fn tls_handshake_failures_fail_in_the_same_classes_on_the_ring() {
    let (_d, c) = certs(&[]);
    let ca = p(&c, "ca.pem");
    let nginx = crate::tls::nginx_tls(&c, false);
    let only12 = common::nginx_tls(&c, "ssl", false, "ssl_protocols TLSv1.2;", "location / { return 200; }");
    let unknown = format!("tls://localhost:{}", nginx.port);
    let too_new = format!("tls://localhost:{}", only12.port);
    let alert = FaultServer::start("tls-alert");
    let garbage = FaultServer::start("tls-garbage");
    let stall = FaultServer::start("tls-stall");
    // Servers that take the ClientHello and reset, or close.
    let rst = Resetter::start();
    let fin = FaultServer::start("fin-before-response");
    let closed = common::free_port();
    let refused = format!("tls://127.0.0.1:{closed}");
    let url = |s: &FaultServer| s.url("https");
    let r = format!("tls://127.0.0.1:{}", rst.port);
    let (a, g, s, f) = (url(&alert), url(&garbage), url(&stall), url(&fin));
    let cases: [(&str, Vec<&str>, &str); 8] = [
        ("unknown CA", vec![&unknown], "tls.unknown_ca"),
        (
            "version mismatch",
            vec![&too_new, "--cacert", &ca, "--tls-version", "1.3"],
            "tls.protocol_version",
        ),
        ("alert", vec![&a, "-k"], "tls.handshake_failure"),
        ("garbage", vec![&g, "-k"], "tls.invalid_message"),
        ("stall", vec![&s, "-k", "--timeout", "300ms"], "tls.handshake_timeout"),
        ("reset mid-handshake", vec![&r, "-k"], "reset"),
        ("closed mid-handshake", vec![&f, "-k"], "tls.handshake_eof"),
        ("refused", vec![&refused, "-k"], "refused"),
    ];
    for (what, args, class) in cases {
        let mut seen = Vec::new();
        for io in IO {
            let mut all = args.clone();
            all.extend_from_slice(&["-n", "20", "-c", "5", "-t", "1"]);
            let (run, r) = run_io(io, &all);
            assert_eq!(run.code(), 1, "{what} {io}: {}", run.stderr());
            let m = &r.measurements;
            assert_eq!(m.connections.attempted, 20, "{what} {io}: {}", outcome(&r));
            assert_eq!(m.connections.error(class), 20, "{what} {io}: {}", outcome(&r));
            assert_eq!(m.phases.get("tls").map_or(0, |h| h.count()), 0, "{what} {io}");
            if what.contains("https") {
                assert_eq!(m.requests.error(class), 20, "{what} {io}: {}", outcome(&r));
            }
            seen.push(outcome(&r));
        }
        assert_eq!(seen[0], seen[1], "{what}");
    }
}

/// A server that reads each connection's first bytes (a ClientHello) and
/// resets it (SO_LINGER 0), for 40 connections or 60 s at most.
struct Resetter {
    child: std::process::Child,
    port: u16,
}

impl Resetter {
    fn start() -> Resetter {
        let script = "import socket,struct,sys\n\
            s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(64); s.settimeout(60)\n\
            print(s.getsockname()[1], flush=True)\n\
            for _ in range(40):\n\
            \x20   c,_=s.accept(); c.settimeout(5)\n\
            \x20   try: c.recv(4096)\n\
            \x20   except OSError: pass\n\
            \x20   c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii',1,0)); c.close()\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        Resetter {
            port: line.trim().parse().unwrap(),
            child,
        }
    }
}

impl Drop for Resetter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn tls_storms_leak_no_descriptor_on_the_ring() {
    // 64 descriptors for 1,000 connections each: completed handshakes with
    // a request, and handshakes the server closes. A socket left open per
    // connection would run out (fd_unavailable) after a few dozen.
    let (_d, c) = certs(&[]);
    let nginx = crate::tls::nginx_tls(&c, false);
    let fin = FaultServer::start("fin-before-response");
    let dir = tempfile::tempdir().unwrap();
    for (what, url) in [("nginx", nginx.https("localhost", "/")), ("closed", fin.url("https"))] {
        let json = dir.path().join(format!("{what}.json"));
        let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
            "ulimit -n 64 && exec {} storm {url} -k -n 1000 -c 16 -t 1 --io uring -q --json {}",
            env!("CARGO_BIN_EXE_throng"),
            json.display()
        )));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let r = common::read_result(&json).expect("a result");
        assert_books_balance(&r);
        assert_eq!(r.generator.io, Some(Io::Uring), "{what}");
        let m = &r.measurements;
        assert_eq!(m.connections.attempted, 1000, "{what}: {}", outcome(&r));
        assert_eq!(m.connections.error("fd_unavailable"), 0, "{what}: {}", outcome(&r));
        match what {
            "nginx" => assert_eq!(m.requests.ok, 1000, "{what}: {}", outcome(&r)),
            _ => assert_eq!(
                m.connections.error("tls.handshake_eof"),
                1000,
                "{what}: {}",
                outcome(&r)
            ),
        }
    }
}
