//! The HTTP/2 check before a run (does the server speak h2?) is bounded as
//! a whole and stops on a signal: a relay in front of nginx passes the
//! server's handshake bytes one every 0.3 s, which no per-read timeout
//! notices (the 771-byte flight took minutes to hours). `http --http2`,
//! `storm --http2` and `throng grpc` over TLS share the check.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Nginx, output, throng};

/// Pause between two bytes the relay passes from the server.
const TRICKLE: Duration = Duration::from_millis(300);
/// The relay serves for this long at most, whatever happens.
const RELAY_LIMIT: Duration = Duration::from_secs(90);

/// A relay on a loopback port to `upstream`: the client's bytes go through
/// at once, the server's one every [`TRICKLE`]. Each accepted connection is
/// said on the returned channel.
fn trickle_relay(upstream: u16) -> (u16, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let until = Instant::now() + RELAY_LIMIT;
        while Instant::now() < until {
            let Ok((client, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let _ = tx.send(());
            client.set_nonblocking(false).unwrap();
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 || s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_out.shutdown(Shutdown::Write);
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut byte_until = Instant::now() + RELAY_LIMIT;
                while let Ok(n) = s_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    for b in &buf[..n] {
                        if c_out.write_all(&[*b]).is_err() || Instant::now() > byte_until {
                            byte_until = Instant::now();
                            break;
                        }
                        std::thread::sleep(TRICKLE);
                    }
                    if Instant::now() >= byte_until {
                        break;
                    }
                }
                let _ = c_out.shutdown(Shutdown::Both);
            });
        }
    });
    (port, rx)
}

/// nginx speaking h2 over TLS with the lab certificates in `c`.
fn h2_nginx(c: &std::path::Path) -> Nginx {
    common::nginx_tls(c, "ssl http2", false, "", "location / { return 200 \"h2\"; }")
}

#[test]
fn a_trickling_handshake_ends_the_check_within_its_bound() {
    let (_d, c) = common::certs();
    let nginx = h2_nginx(&c);
    let (port, _accepted) = trickle_relay(nginx.port);
    let ca = c.join("ca.pem").display().to_string();
    let url = format!("https://localhost:{port}/");
    let addr = format!("localhost:{port}");
    let runs: [Vec<&str>; 3] = [
        vec![
            "http",
            &url,
            "--http2",
            "--cacert",
            &ca,
            "--timeout",
            "1s",
            "-n",
            "1",
            "-q",
        ],
        vec![
            "storm",
            &url,
            "--http2",
            "--cacert",
            &ca,
            "--timeout",
            "1s",
            "--count",
            "1",
        ],
        vec![
            "grpc",
            &addr,
            "--cacert",
            &ca,
            "--timeout",
            "1s",
            "--proto",
            "tests/cli/grpc/tester.proto",
            "--call",
            "throngtest.Tester/Call",
            "-n",
            "1",
        ],
    ];
    // A scenario whose target has http: 2.
    let yaml = format!(
        "target: {{ url: '{url}', http: 2 }}\ntls: {{ cacert: '{ca}' }}\ndefaults: {{ timeout: 1s }}\nscenarios:\n  \
         s:\n    executor: shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - request: {{ path: / }}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h2.yaml");
    std::fs::write(&file, yaml).unwrap();
    let file = file.display().to_string();
    let runs = runs
        .into_iter()
        .chain(std::iter::once(vec!["run", file.as_str(), "-q"]));
    for args in runs {
        // A hang fails at common::RUN_LIMIT.
        let out = output(throng().args(&args).current_dir(env!("CARGO_MANIFEST_DIR")));
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains("the HTTP/2 check of 127.0.0.1:") && e.contains("did not finish within 1s"),
            "{args:?}: {e}"
        );
    }
    // Straight to nginx, the same check passes.
    let out = output(throng().args([
        "http",
        &format!("https://localhost:{}/", nginx.port),
        "--http2",
        "--cacert",
        &ca,
        "--timeout",
        "1s",
        "-n",
        "2",
        "-q",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_signal_stops_the_check() {
    let (_d, c) = common::certs();
    let nginx = h2_nginx(&c);
    let (port, accepted) = trickle_relay(nginx.port);
    let ca = c.join("ca.pem").display().to_string();
    for signal in ["-INT", "-TERM"] {
        let mut child = throng()
            .args([
                "http",
                &format!("https://localhost:{port}/"),
                "--http2",
                "--cacert",
                &ca,
            ])
            .args(["--timeout", "60s", "-n", "1", "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The check is under way once the relay has its connection.
        accepted
            .recv_timeout(Duration::from_secs(30))
            .expect("the check never connected");
        std::thread::sleep(Duration::from_millis(300));
        let kill = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        // Generous; had the signal been ignored, the check would end at its
        // own bound (10 s) with exit code 1, not 130.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{signal}: throng did not end after the signal");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut e = String::new();
        child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
        assert_eq!(status.code(), Some(130), "{signal}: {e}");
        assert!(e.contains("interrupted during the HTTP/2 check"), "{signal}: {e}");
    }
}
