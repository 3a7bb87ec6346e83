//! NATS handshakes, reconnect waves and line protocols against real
//! servers: nats-server with bcrypt passwords, redis-server.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{NatsServer, assert_books_balance, free_port, throng, wait_listening};
use std::time::Duration;

fn bcrypt_user(cost: u32) -> String {
    let hash = bcrypt::hash("s3cret", cost).unwrap();
    // The server's own wait for CONNECT (2 s by default) outlasts its
    // bcrypt queue on a busy machine too.
    format!("authorization {{ timeout: 30, users = [ {{ user: throng, password: \"{hash}\" }} ] }}")
}

#[test]
fn bcrypt_cost_shows_in_the_handshake_and_wrong_passwords_fail() {
    let mut medians = Vec::new();
    // A cost-10 check takes nats-server tens of ms of CPU: 50 of them in 2 s
    // wanted more than a busy 2-core machine had, and handshakes timed out
    // (timeout.handshake). 12 of them, with time to spare, fit any machine.
    for (cost, n) in [(4, 50), (10, 12)] {
        let nats = NatsServer::start(&bcrypt_user(cost));
        let url = format!("nats://throng:s3cret@127.0.0.1:{}", nats.port);
        let count = n.to_string();
        let run = common::storm(&[&url, "-n", &count, "--jitter", "2s", "--hold", "1s", "--timeout", "60s"]);
        assert_eq!(run.code(), 0, "cost {cost}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let m = &r.measurements;
        assert_eq!(m.connections.ok, n, "cost {cost}: {:?}", m.connections.errors);
        let hs = &m.phases["handshake"];
        assert_eq!(hs.count(), n);
        medians.push(hs.quantile(0.5));
        assert!(m.total_connect_time().is_some());
        if cost == 4 {
            let problems = common::schema_violations(&run.json);
            assert!(problems.is_empty(), "schema violations: {problems:#?}");
            // The password never reaches the result file.
            let text = std::fs::read_to_string(&run.json).unwrap();
            assert!(!text.contains("s3cret"), "the secret leaked into the result");
        }

        let wrong = common::storm(&[
            &format!("nats://throng:nope@127.0.0.1:{}", nats.port),
            "-n",
            "12",
            "--timeout",
            "60s",
        ]);
        assert_eq!(wrong.code(), 1);
        let m = &wrong.result().measurements;
        assert_eq!(m.connections.error("auth_failed"), 12, "{:?}", m.connections.errors);
        assert!(wrong.stderr().contains("refused the credentials"), "{}", wrong.stderr());
    }
    assert!(
        medians[1] > medians[0] * 3,
        "bcrypt cost 10 must make the handshake slower than cost 4: medians {medians:?} µs"
    );
}

#[test]
fn a_restart_sends_every_connection_back_through_a_reconnect() {
    let nats = NatsServer::start(&bcrypt_user(4));
    let creds = nats.dir.path().join("creds");
    std::fs::write(&creds, "throng:s3cret\n").unwrap();
    let restart = nats.restart_command(1.0);
    let run = common::storm(&[
        &format!("nats://127.0.0.1:{}", nats.port),
        "--nats-creds",
        creds.to_str().unwrap(),
        "-n",
        "60",
        "--jitter",
        "1s",
        "--hold",
        "12s",
        "--reconnect",
        "--reconnect-wait",
        "500ms",
        "--trigger-after",
        "1s",
        "--trigger",
        &restart,
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let trigger = r.trigger.as_ref().unwrap();
    assert_eq!(trigger.exit_code, Some(0), "{trigger:?}");
    assert!(trigger.fired_at_s.is_some());
    assert_eq!(m.closed_by_peer, 60, "the restart dropped every held connection");
    let reconnect = &m.phases["reconnect"];
    assert_eq!(
        reconnect.count(),
        60,
        "every connection came back: {:?}",
        m.reconnect_gave_up
    );
    assert!(m.reconnect_gave_up.is_empty());
    // The wave cannot be shorter than the restart's 1 s gap.
    let wave = m.total_reconnect_time().unwrap();
    assert!(wave.as_secs_f64() >= 0.9, "total reconnect time {wave:?}");
    assert!(
        reconnect.none_below(500_000),
        "no reconnect before --reconnect-wait: {}",
        reconnect.min()
    );
    assert_eq!(
        m.phases["handshake"].count(),
        120,
        "every connect and reconnect shook hands"
    );
    // The clients' definition starts when the server accepts again, after
    // its 1 s gap: shorter than throng's, which starts at the first drop.
    let clients = m.client_reconnect_time().unwrap();
    assert!(clients < wave, "clients' {clients:?} vs throng's {wave:?}");
    assert!(
        wave - clients >= Duration::from_millis(900),
        "the server's downtime is in throng's time only: {wave:?} vs {clients:?}"
    );
    let text = run.stdout();
    assert!(text.contains("60 dropped, 60 came back, 0 never did"), "{text}");
    assert!(text.contains("throng's: first drop to last re-established"), "{text}");
    assert!(text.contains("the clients': server accepting again"), "{text}");
}

#[test]
fn line_protocols_against_redis() {
    let port = free_port();
    let mut redis = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-server is not installed: run ./scripts/test.sh (Debian package redis-server)");
    wait_listening(([127, 0, 0, 1], port).into());
    let target = format!("tcp://127.0.0.1:{port}");
    let ok = common::storm(&[
        &target,
        "-n",
        "200",
        "--send",
        "PING\\r\\n",
        "--expect",
        "^\\+PONG$",
        "--send",
        "ECHO hi\\r\\n",
        "--expect",
        "^\\$2$",
        "--expect",
        "^hi$",
    ]);
    assert_eq!(ok.code(), 0, "{}", ok.stderr());
    let m = &ok.result().measurements;
    assert_eq!(m.connections.ok, 200, "{:?}", m.connections.errors);
    assert_eq!(m.phases["handshake"].count(), 200);

    let bad = common::storm(&[&target, "-n", "10", "--send", "PING\\r\\n", "--expect", "^\\+PANG"]);
    assert_eq!(bad.code(), 1);
    assert_eq!(
        bad.result().measurements.connections.error("protocol.unexpected_reply"),
        10
    );

    let silent = common::storm(&[&target, "-n", "3", "--expect", "^hello", "--step-timeout", "300ms"]);
    assert_eq!(silent.result().measurements.connections.error("timeout.handshake"), 3);
    let _ = redis.kill();
    let _ = redis.wait();
}

#[test]
fn protocol_mistakes_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["tcp://127.0.0.1:9", "-n", "1", "--protocol", "smtp"], "--protocol"),
        (&["tcp://127.0.0.1:9", "-n", "1", "--send", "x\\q"], "--send"),
        (&["tcp://127.0.0.1:9", "-n", "1", "--expect", "(unclosed"], "--expect"),
        (&["nats://127.0.0.1:9", "-n", "1", "--send", "PING"], "--send/--expect"),
        (&["tcp://127.0.0.1:9", "-n", "1", "--reconnect"], "--hold"),
        (
            &["tcp://127.0.0.1:9", "-n", "1", "--reconnect-wait", "1s"],
            "--reconnect",
        ),
        (&["tcp://127.0.0.1:9", "-n", "1", "--trigger", "true"], "--hold"),
        (
            &["tcp://127.0.0.1:9", "-n", "1", "--nats-creds", "/nonexistent"],
            "--nats-creds",
        ),
    ];
    for (args, needle) in cases {
        let out = common::output(throng().arg("storm").args(*args));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?} should mention {needle}: {err}");
    }
}

#[test]
fn tls_upgrade_tokens_and_pings_while_holding() {
    // TLS required by the server: the client upgrades after INFO.
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("certs");
    let o = common::output(throng().args(["certs", "--out", c.to_str().unwrap()]));
    assert!(o.status.success());
    let p = |n: &str| c.join(n).display().to_string();
    let nats = NatsServer::start(&format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\" }}\nauthorization {{ token: \"t0ken\" }}\nping_interval: \"1s\"\nping_max: 2",
        p("server.pem"),
        p("server.key")
    ));
    let run = common::storm(&[
        &format!("nats://t0ken@localhost:{}", nats.port),
        "-n",
        "20",
        "--hold",
        "5s",
        "--cacert",
        &p("ca.pem"),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.connections.ok, 20, "{:?}", m.connections.errors);
    assert_eq!(
        m.tls.as_ref().map(|t| t.handshakes),
        Some(20),
        "every connection upgraded to TLS"
    );
    // The server pings every second and drops clients that miss two: held
    // 5 s, none was dropped, so every PING was answered.
    assert_eq!(m.closed_by_peer, 0, "PINGs answered while holding");
    let text = std::fs::read_to_string(&run.json).unwrap();
    assert!(!text.contains("t0ken"), "the token leaked into the result");

    // The TLS upgrade fails verification without the lab CA.
    let bad = common::storm(&[&format!("nats://t0ken@localhost:{}", nats.port), "-n", "3"]);
    assert_eq!(bad.result().measurements.connections.error("tls.unknown_ca"), 3);
}

/// A fake NATS server on loopback that answers each of the first `n`
/// connections with an INFO line of `len` bytes and no end, for at most
/// 30 s.
fn endless_info(n: usize, len: usize) -> std::net::SocketAddr {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut served = 0;
        while served < n && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    served += 1;
                    std::thread::spawn(move || {
                        conn.set_nonblocking(false).unwrap();
                        conn.set_write_timeout(Some(std::time::Duration::from_secs(10)))
                            .unwrap();
                        let mut line = b"INFO {\"server_id\":\"".to_vec();
                        line.resize(len, b'x');
                        // The client hangs up once it has seen enough.
                        let _ = conn.write_all(&line);
                    });
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    });
    addr
}

#[test]
fn an_oversized_info_line_is_a_protocol_error() {
    let addr = endless_info(3, 10 << 20);
    let run = common::storm(&[&format!("nats://{addr}"), "-n", "3", "--timeout", "20s"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.connections.error("protocol"), 3, "{:?}", m.connections.errors);
    assert!(
        run.stderr().contains("every connection failed (3 protocol)"),
        "{}",
        run.stderr()
    );
    assert!(
        run.stderr().contains("longer than"),
        "the hint names the limit: {}",
        run.stderr()
    );
}
