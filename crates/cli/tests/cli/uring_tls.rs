//! `throng http https://…` on both transports: the io_uring loop drives
//! rustls' records through the ring, and must count what epoll counts —
//! handshakes, the `tls` phase, the TLS line, resumption, TLS 1.2, mTLS,
//! certificate failures, the lab's TLS faults, HTTP faults inside TLS —
//! with every run's result saying which transport ran (a silent fall back
//! to epoll fails here), and no descriptor left behind under faults.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::tls::nginx_tls;

use common::{FaultServer, assert_books_balance, certs_with as certs, http, p, throng};
use throng_result::{Io, RunResult};

const IO: [&str; 2] = ["epoll", "uring"];

/// `throng http ARGS --io IO`: its result, books checked, and the
/// transport that ran asserted to be the one asked for.
fn run_io(io: &str, args: &[&str]) -> (common::Run, RunResult) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--io", io]);
    crate::uring::ran_on(io, http(&all))
}

/// Requests and connections by outcome, as compared between transports.
fn outcome(r: &RunResult) -> String {
    let m = &r.measurements;
    let errors: Vec<_> = m.requests.errors.iter().filter(|(_, n)| **n > 0).collect();
    let conn_errors: Vec<_> = m.connections.errors.iter().filter(|(_, n)| **n > 0).collect();
    format!(
        "attempted {} ok {} errors {:?} status {:?} connections ok {} failed {:?}",
        m.requests.attempted, m.requests.ok, errors, m.status, m.connections.ok, conn_errors
    )
}

#[test]
fn handshakes_and_keepalive_count_as_on_epoll() {
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    let ca = p(&c, "ca.pem");
    let url = nginx.https("localhost", "/");
    // (what, flags, requests, handshakes)
    let cases: [(&str, &[&str], u64, u64); 2] = [
        ("a connection per request", &["--no-keepalive"], 300, 300),
        ("keep-alive", &[], 2000, 4),
    ];
    for (what, extra, n, handshakes) in cases {
        let n_text = n.to_string();
        let mut seen = Vec::new();
        for io in IO {
            let mut args = vec![url.as_str(), "--cacert", &ca, "-n", &n_text, "-c", "4", "-t", "1"];
            args.extend_from_slice(extra);
            let (run, r) = run_io(io, &args);
            assert_eq!(run.code(), 0, "{what} {io}: {}", run.stderr());
            let m = &r.measurements;
            assert_eq!((m.requests.attempted, m.requests.ok), (n, n), "{what} {io}");
            assert_eq!(m.status.get(&200), Some(&n), "{what} {io}");
            assert_eq!(m.bytes.received_body, 3 * n, "{what} {io}: every body \"tls\"");
            let t = m.tls.as_ref().expect("a TLS line");
            assert_eq!((t.handshakes, t.resumed), (handshakes, 0), "{what} {io}: {t:?}");
            assert_eq!(t.versions.get("TLSv1_3"), Some(&handshakes), "{what} {io}: {t:?}");
            assert_eq!(
                m.phases["tls"].count(),
                handshakes,
                "{what} {io}: one tls sample per handshake"
            );
            assert_eq!(m.phases["connect"].count(), handshakes, "{what} {io}");
            assert_eq!(m.connections.ok, handshakes, "{what} {io}: {}", outcome(&r));
            assert_eq!(m.phases["connection"].count(), handshakes, "{what} {io}: each closed");
            for phase in ["wait", "response", "latency"] {
                assert_eq!(m.phases[phase].count(), n, "{what} {io} {phase}");
            }
            assert!(run.stdout().contains("TLS 1.3"), "{what} {io}: {}", run.stdout());
            assert!(common::schema_violations(&run.json).is_empty(), "{what} {io}");
            seen.push((m.bytes.sent, m.bytes.received, outcome(&r)));
        }
        assert_eq!(seen[0], seen[1], "{what}: the same bytes and outcome either way");
    }
}

#[test]
fn resumption_tls12_and_client_certificates_ride_the_ring() {
    let (_d, c) = certs(&["--rsa"]);
    let nginx = nginx_tls(&c, true);
    let ca = p(&c, "ca.pem");
    let (cert, key) = (p(&c, "client.pem"), p(&c, "client.key"));
    let url = nginx.https("localhost", "/");
    let mtls = ["--cert", cert.as_str(), "--key", key.as_str()];

    // Sessions resumed from the worker's ClientConfig, as on epoll.
    let mut args = vec![url.as_str(), "--cacert", &ca, "-n", "100", "-c", "1", "--no-keepalive"];
    args.extend_from_slice(&mtls);
    args.push("--tls-resume");
    let (run, r) = run_io("uring", &args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let t = r.measurements.tls.clone().unwrap();
    assert_eq!((r.measurements.requests.ok, t.handshakes), (100, 100));
    assert!(t.resumed >= 80, "most handshakes resume a session: {t:?}");
    assert!(run.stdout().contains("client certificate (mTLS)"), "{}", run.stdout());

    // TLS 1.2 (the client's flight goes before the server's Finished)
    // with a chosen group.
    let mut args = vec![url.as_str(), "--cacert", &ca, "-n", "20", "-c", "2"];
    args.extend_from_slice(&mtls);
    args.extend_from_slice(&["--tls-version", "1.2", "--tls-groups", "p256"]);
    let (run, r) = run_io("uring", &args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let t = r.measurements.tls.clone().unwrap();
    assert_eq!(r.measurements.requests.ok, 20);
    assert_eq!(t.versions.get("TLSv1_2"), Some(&2), "{t:?}");
    assert_eq!(t.groups.get("secp256r1"), Some(&2), "{t:?}");

    // Without a client certificate nginx completes the handshake and
    // answers 400, on both transports alike.
    for io in IO {
        let (run, r) = run_io(io, &[&url, "--cacert", &ca, "-n", "10", "-c", "1"]);
        assert_eq!(run.code(), 1, "{io}");
        let m = &r.measurements;
        assert_eq!(m.requests.error("check_failed"), 10, "{io}: {}", outcome(&r));
        assert_eq!(m.status.get(&400), Some(&10), "{io}");
    }

    // The lab server's mTLS refuses in the handshake: tls.certificate_required.
    let lab = FaultServer::serve(&["--tls", c.to_str().unwrap(), "--mtls"]);
    let lab_url = format!("https://localhost:{}/", lab.port);
    let mut seen = Vec::new();
    for io in IO {
        let (run, r) = run_io(io, &[&lab_url, "--cacert", &ca, "-n", "8", "-c", "2"]);
        assert_eq!(run.code(), 1, "{io}");
        let m = &r.measurements;
        assert_eq!(m.requests.error("tls.certificate_required"), 8, "{io}: {}", outcome(&r));
        seen.push(outcome(&r));
    }
    assert_eq!(seen[0], seen[1], "epoll vs uring");
}

#[test]
fn a_hello_retry_request_takes_a_second_client_flight() {
    // nginx wants P-256, the client's key shares are X25519MLKEM768 and
    // X25519: the server asks again, and the ring sends the second
    // ClientHello from the session before the handshake ends.
    let (_d, c) = certs(&[]);
    let nginx = common::nginx_tls(
        &c,
        "ssl",
        false,
        "ssl_protocols TLSv1.3; ssl_ecdh_curve prime256v1;",
        "location / { return 200 \"tls\"; }",
    );
    let url = nginx.https("localhost", "/");
    let ca = p(&c, "ca.pem");
    let mut seen = Vec::new();
    for io in IO {
        let (run, r) = run_io(io, &[&url, "--cacert", &ca, "-n", "40", "-c", "2", "--no-keepalive"]);
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let t = r.measurements.tls.clone().unwrap();
        assert_eq!((t.handshakes, t.hello_retry), (40, 40), "{io}: {t:?}");
        assert_eq!(t.groups.get("secp256r1"), Some(&40), "{io}: {t:?}");
        seen.push(outcome(&r));
    }
    assert_eq!(seen[0], seen[1], "epoll vs uring");
}

#[test]
fn tls_falls_back_to_epoll_where_io_uring_is_not_permitted() {
    // A seccomp filter refuses io_uring_setup (as a container's policy or
    // kernel.io_uring_disabled would): auto runs TLS on epoll and says why;
    // forced, the ring's refusal is a usage error.
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    let url = nginx.https("localhost", "/");
    let ca = p(&c, "ca.pem");
    let denied = |args: &[&str]| {
        common::with_json(crate::uring::deny_io_uring(
            throng().arg("http").arg(&url).args(["--cacert", &ca]).args(args),
        ))
    };
    let run = denied(&["-n", "200", "-c", "4", "--no-keepalive"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 200);
    assert_eq!(r.measurements.tls.as_ref().map(|t| t.handshakes), Some(200));
    assert_eq!(r.generator.io, Some(Io::Epoll));
    let why = r.generator.io_fallback.as_deref().unwrap_or_default();
    assert!(why.contains("not permitted") && why.contains("EPERM"), "{why}");
    assert!(
        run.stdout().contains("I/O: epoll (io_uring is not permitted"),
        "{}",
        run.stdout()
    );

    let run = denied(&["-n", "10", "--io", "uring"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("EPERM") && run.stderr().contains("--io epoll"),
        "{}",
        run.stderr()
    );
}

#[test]
fn certificate_failures_fail_in_epolls_classes() {
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    let ca = p(&c, "ca.pem");
    let url = nginx.https("127.0.0.1", "/");
    let (_e, expired) = certs(&["--expired"]);
    let old = nginx_tls(&expired, false);
    let old_url = old.https("localhost", "/");
    let old_ca = p(&expired, "ca.pem");
    let cases: [(&str, Vec<&str>, &str); 3] = [
        (
            "a name not on the certificate",
            vec![&url, "--cacert", &ca, "--sni", "other.example"],
            "tls.certificate_name_mismatch",
        ),
        ("an unknown issuer", vec![&url], "tls.unknown_ca"),
        (
            "an expired certificate",
            vec![&old_url, "--cacert", &old_ca],
            "tls.certificate_expired",
        ),
    ];
    for (what, args, class) in cases {
        let mut seen = Vec::new();
        for io in IO {
            let mut all = args.clone();
            all.extend_from_slice(&["-n", "6", "-c", "2"]);
            let (run, r) = run_io(io, &all);
            assert_eq!(run.code(), 1, "{what} {io}");
            let m = &r.measurements;
            assert_eq!(m.requests.error(class), 6, "{what} {io}: {}", outcome(&r));
            assert_eq!(m.connections.error(class), m.connections.attempted, "{what} {io}");
            assert_eq!(
                m.phases.get("tls").map_or(0, |h| h.count()),
                0,
                "{what} {io}: none completed"
            );
            seen.push(outcome(&r));
        }
        assert_eq!(seen[0], seen[1], "{what}: epoll vs uring");
    }
    // -k accepts what verification refused, and says so.
    let (run, r) = run_io("uring", &[&url, "-k", "--sni", "other.example", "-n", "20", "-c", "2"]);
    assert_eq!((run.code(), r.measurements.requests.ok), (0, 20), "{}", run.stderr());
    assert!(run.stdout().contains("NOT verified (--insecure)"), "{}", run.stdout());
}

#[test]
fn lab_tls_faults_fail_in_the_same_classes() {
    let (_d, certs) = common::certs();
    let certs = certs.to_str().unwrap();
    // (fault, served over TLS, timeout, class of every request, handshakes)
    let cases = [
        ("tls-alert", false, "5s", "tls.handshake_failure", 0),
        ("tls-garbage", false, "5s", "tls.invalid_message", 0),
        ("tls-stall", false, "300ms", "tls.handshake_timeout", 0),
        ("garbage", true, "5s", "protocol", 6),
        ("rst-mid-body", true, "5s", "reset", 6),
        ("fin-mid-body", true, "5s", "eof", 6),
        ("never-answer", true, "300ms", "timeout.response", 6),
    ];
    for (fault, tls, timeout, class, handshakes) in cases {
        let server = if tls {
            FaultServer::start_with(fault, &["--tls", certs])
        } else {
            FaultServer::start(fault)
        };
        let url = server.url("https");
        let mut seen = Vec::new();
        for io in IO {
            let (run, r) = run_io(io, &[&url, "-k", "-n", "6", "-c", "2", "-t", "1", "--timeout", timeout]);
            assert_eq!(run.code(), 1, "{fault} {io}: every request failed");
            let m = &r.measurements;
            assert_eq!(m.requests.error(class), 6, "{fault} {io}: {}", outcome(&r));
            let t = m.tls.as_ref().map_or(0, |t| t.handshakes);
            assert_eq!(t, handshakes, "{fault} {io}");
            if handshakes == 0 {
                assert_eq!(m.connections.error(class), m.connections.attempted, "{fault} {io}");
            }
            seen.push(outcome(&r));
        }
        assert_eq!(seen[0], seen[1], "{fault}: epoll vs uring");
    }
}

#[test]
fn tls_on_the_ring_leaks_no_descriptor_under_faults() {
    // 64 descriptors for hundreds of TLS connections: an open loop on a
    // new connection per request to nginx, then closed loops against the
    // lab's failing handshakes and a reset inside TLS. A socket (or a
    // session's send) left behind per connection would run out
    // (fd_unavailable) after a few dozen.
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    let ca = p(&c, "ca.pem");
    let alert = FaultServer::start("tls-alert");
    let stall = FaultServer::start("tls-stall");
    let rst = FaultServer::start_with("rst-mid-body", &["--tls", c.to_str().unwrap()]);
    let dir = tempfile::tempdir().unwrap();
    let open_loop = format!(
        "{} --cacert {ca} -r 300 -n 300 -c 16 --no-keepalive",
        nginx.https("localhost", "/")
    );
    let cases = [
        ("open loop", open_loop, 300, ""),
        (
            "alert",
            format!("{} -k -n 300 -c 4", alert.url("https")),
            300,
            "tls.handshake_failure",
        ),
        (
            "stall",
            format!("{} -k -n 40 -c 8 --timeout 100ms", stall.url("https")),
            40,
            "tls.handshake_timeout",
        ),
        ("reset", format!("{} -k -n 300 -c 4", rst.url("https")), 300, "reset"),
    ];
    for (what, args, n, class) in cases {
        let json = dir.path().join(format!("{}.json", what.replace(' ', "-")));
        let out = common::output(std::process::Command::new("sh").arg("-c").arg(format!(
            "ulimit -n 64 && exec {} http {args} -t 1 --io uring -q --json {}",
            env!("CARGO_BIN_EXE_throng"),
            json.display()
        )));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let r = common::read_result(&json).expect("a result");
        assert_books_balance(&r);
        assert_eq!(r.generator.io, Some(Io::Uring), "{what}");
        let m = &r.measurements;
        assert_eq!(m.requests.error("fd_unavailable"), 0, "{what}: {}", outcome(&r));
        assert_eq!(m.requests.attempted + m.dropped, n, "{what}: {}", outcome(&r));
        if class.is_empty() {
            assert!(m.requests.attempted >= 100, "{what}: {}", outcome(&r));
            assert_eq!(m.requests.ok, m.requests.attempted, "{what}: {}", outcome(&r));
            assert_eq!(m.phases["connection"].count(), m.connections.ok, "{what}: each closed");
        } else {
            assert_eq!(m.requests.error(class), n, "{what}: {}", outcome(&r));
        }
    }
}
