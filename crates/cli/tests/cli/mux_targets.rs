//! `--http2`/`--http3` with several targets and with `--redirects`, against
//! nginx (h2c and TLS h2, two server processes for two origins) and
//! aioquic: counts per target, connections per origin, redirect chains
//! counted as one request, loops as HTTP/1.1's class.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{Nginx, assert_books_balance, http};
use throng_result::RunResult;

/// Requests a result counted under `target:NAME`, by name.
fn per_target(r: &RunResult) -> BTreeMap<String, u64> {
    r.measurements
        .scenario
        .as_ref()
        .map(|s| {
            s.tags
                .iter()
                .filter_map(|(k, t)| k.strip_prefix("target:").map(|n| (n.to_string(), t.requests)))
                .collect()
        })
        .unwrap_or_default()
}

fn status(r: &RunResult, code: u16) -> u64 {
    r.measurements.status.get(&code).copied().unwrap_or(0)
}

/// nginx speaking h2c with prior knowledge.
fn h2c(locations: &str) -> Nginx {
    Nginx::start_listen("http2", "http2_max_concurrent_streams 100;", locations)
}

/// nginx speaking h2 over TLS (ALPN), with the `throng certs` files in `c`.
fn h2_tls(c: &Path, locations: &str) -> Nginx {
    common::nginx_tls(c, "ssl http2", false, "", locations)
}

#[test]
fn h2c_targets_on_two_origins_each_go_to_their_own_connection() {
    let n1 = h2c(r#"location /a { default_type text/plain; return 200 "a"; }"#);
    let n2 = h2c(r#"location /b { default_type text/plain; return 200 "bb"; }"#);
    let (a, b) = (n1.url("/a"), n2.url("/b"));
    let run = http(&[&a, &b, "--http2", "-c", "2", "--streams", "4", "-n", "400", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok, status(r, 200)), (400, 400, 400));
    let counts = per_target(r);
    let (ca, cb) = (counts[&a], counts[&b]);
    assert!(ca > 0 && cb > 0, "{counts:?}");
    assert_eq!(ca + cb, 400);
    // Each target's answer came from its own server: "a" is 1 byte, "bb" 2.
    assert_eq!(m.bytes.received_body, ca + 2 * cb);
    // -c 2 over two origins: one connection each, every request on them.
    assert_eq!((m.connections.attempted, m.connections.ok), (2, 2));
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.protocols.get("h2"), x.connections, x.requests), (Some(&2), 2, 400));
    assert!(x.peak_streams_per_connection <= 4, "{x:?}");
    let out = run.stdout();
    assert!(
        out.contains(&format!("target:{a}")) && out.contains(&format!("target:{b}")),
        "{out}"
    );

    // An open loop: every scheduled start sent or dropped, each on its
    // target's origin, on at most -c connections.
    let run = http(&[
        &a,
        &b,
        "--http2",
        "-r",
        "400",
        "-n",
        "60",
        "-c",
        "4",
        "--streams",
        "2",
        "-t",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted + m.dropped, 60);
    let counts = per_target(r);
    assert_eq!(counts.values().sum::<u64>(), m.requests.attempted);
    assert_eq!(m.bytes.received_body, counts[&a] + 2 * counts[&b]);
    assert!(m.connections.attempted <= 4, "{:?}", m.connections);

    // Without keep-alive: a connection per request, to its target's origin.
    let run = http(&[&a, &b, "--http2", "--no-keepalive", "-c", "2", "-n", "20", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let counts = per_target(r);
    assert_eq!((m.requests.ok, m.connections.ok), (20, 20));
    assert_eq!(m.bytes.received_body, counts[&a] + 2 * counts[&b]);
}

#[test]
fn tls_h2_targets_on_two_origins_are_counted_per_target() {
    let (_d, c) = common::certs();
    let n1 = h2_tls(&c, "location / { return 200; }");
    let n2 = h2_tls(&c, "location / { return 204; }");
    let (a, b) = (n1.https("localhost", "/a"), n2.https("127.0.0.1", "/b"));
    let ca_pem = c.join("ca.pem");
    let run = http(&[
        &a,
        &b,
        "--http2",
        "-c",
        "4",
        "--streams",
        "2",
        "-n",
        "200",
        "-t",
        "2",
        "--cacert",
        ca_pem.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let counts = per_target(r);
    assert_eq!(counts.values().sum::<u64>(), 200);
    assert!(counts[&a] > 0 && counts[&b] > 0, "{counts:?}");
    assert_eq!(status(r, 200), counts[&a]);
    assert_eq!(status(r, 204), counts[&b]);
    // Four connections in all, two per origin (one per worker each).
    let m = &r.measurements;
    assert_eq!((m.connections.attempted, m.connections.ok), (4, 4));
    assert_eq!(m.tls.as_ref().map_or(0, |t| t.handshakes), 4);
}

#[test]
fn an_h2_origin_that_speaks_no_http2_is_refused_before_the_run() {
    let n1 = h2c("location / { return 200; }");
    let n2 = Nginx::start("location / { return 200; }");
    let run = http(&[&n1.url("/a"), &n2.url("/b"), "--http2", "-c", "2", "-n", "10"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let err = run.stderr();
    assert!(
        err.contains(&n2.url("/b")) && err.contains("does not speak HTTP/2"),
        "{err}"
    );
}

/// nginx with a redirect chain, a loop and a hop to `other` (h2c all).
fn redirecting(other: u16) -> Nginx {
    h2c(&format!(
        "location = /start {{ return 301 /end; }}\n\
         location = /end {{ default_type text/plain; return 200 \"end\"; }}\n\
         location = /loop {{ return 302 /loop; }}\n\
         location = /cross {{ return 302 http://127.0.0.1:{other}/there; }}\n\
         location = /post303 {{ return 303 /must-get; }}\n\
         location = /must-get {{ set $m \"$request_method:$http_content_length\"; \
             if ($m = \"GET:\") {{ return 200; }} return 405; }}\n\
         location = /tohttps {{ return 302 https://127.0.0.1:$server_port/end; }}\n"
    ))
}

#[test]
fn h2_redirects_are_followed_on_streams_and_counted_as_one_request() {
    let o = h2c(r#"location = /there { default_type text/plain; return 200 "there"; }"#);
    let s = redirecting(o.port);
    // 301 → 200: one ok request, one redirect, on the one connection.
    let run = http(&[
        &s.url("/start"),
        "--http2",
        "--redirects",
        "3",
        "-c",
        "1",
        "--streams",
        "2",
        "-n",
        "50",
        "-t",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        (m.requests.attempted, m.requests.ok, status(r, 200), status(r, 301)),
        (50, 50, 50, 0)
    );
    assert_eq!(m.redirects, 50);
    assert_eq!(m.bytes.received_body, 50 * 3, "the final answers' bodies");
    assert_eq!((m.connections.attempted, m.connections.ok), (1, 1));
    assert_eq!(m.multiplex.as_ref().unwrap().requests, 100, "two streams per request");

    // A loop: the limit's class, as HTTP/1.1.
    let run = http(&[
        &s.url("/loop"),
        "--http2",
        "--redirects",
        "2",
        "-c",
        "1",
        "-n",
        "10",
        "-t",
        "1",
    ]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.requests.error("redirect.too_many"),
        10,
        "{}",
        run.stdout()
    );
    assert_eq!(r.measurements.redirects, 20);
    assert_eq!(run.code(), 1);

    // 303 turns a POST into a GET without its body.
    let run = http(&[
        &s.url("/post303"),
        "--http2",
        "--redirects",
        "1",
        "-m",
        "POST",
        "--data",
        "hello",
        "-c",
        "1",
        "-n",
        "5",
        "-t",
        "1",
    ]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!((status(r, 200), r.measurements.redirects), (5, 5), "{}", run.stdout());

    // To another origin: a connection of its own (h2c) for each chain.
    let run = http(&[
        &s.url("/cross"),
        "--http2",
        "--redirects",
        "2",
        "-c",
        "1",
        "-n",
        "8",
        "-t",
        "1",
    ]);
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        (m.requests.ok, m.redirects, m.bytes.received_body),
        (8, 8, 8 * 5),
        "{}",
        run.stdout()
    );
    assert_eq!(m.connections.ok, 1 + 8);

    // An h2c run has no TLS to follow a redirect to https with.
    let run = http(&[
        &s.url("/tohttps"),
        "--http2",
        "--redirects",
        "2",
        "-c",
        "1",
        "-n",
        "4",
        "-t",
        "1",
    ]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.error("redirect.scheme"), 4, "{}", run.stdout());
}

#[test]
fn h3_targets_on_two_origins_each_go_to_their_own_connection() {
    let (d, c) = common::certs();
    let d2 = tempfile::tempdir().unwrap();
    let s1 = common::Aioquic::start(&c, d.path(), 0);
    let s2 = common::Aioquic::start(&c, d2.path(), 0);
    let (a, b) = (s1.url("/bytes/1"), s2.url("/bytes/2"));
    let ca_pem = c.join("ca.pem");
    let run = http(&[
        &a,
        &b,
        "--http3",
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "200",
        "-t",
        "1",
        "--cacert",
        ca_pem.to_str().unwrap(),
    ]);
    let (st1, st2) = (s1.stop(), s2.stop());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (200, 200));
    let counts = per_target(r);
    let (ca, cb) = (counts[&a], counts[&b]);
    assert!(ca > 0 && cb > 0, "{counts:?}");
    assert_eq!(ca + cb, 200);
    assert_eq!(m.bytes.received_body, ca + 2 * cb);
    // Each server saw its target's requests, on one connection each.
    assert_eq!(
        (st1["requests"].as_u64(), st2["requests"].as_u64()),
        (Some(ca), Some(cb))
    );
    assert_eq!(
        (st1["connections"].as_u64(), st2["connections"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(m.connections.ok, 2);
}

#[test]
fn h3_redirects_are_followed_and_loops_hit_the_limit() {
    let (d, c) = common::certs();
    let d2 = tempfile::tempdir().unwrap();
    let s = common::Aioquic::start(&c, d.path(), 0);
    let o = common::Aioquic::start(&c, d2.path(), 0);
    let ca_pem = c.join("ca.pem");
    let ca = ca_pem.to_str().unwrap();
    let run_to = |url: &str, n: &str| {
        http(&[
            url,
            "--http3",
            "--redirects",
            "2",
            "-c",
            "1",
            "-n",
            n,
            "-t",
            "1",
            "--cacert",
            ca,
        ])
    };
    // 301 → 200 on the same connection: one ok request, one redirect.
    let run = run_to(&s.url("/301?/bytes/3"), "20");
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        (m.requests.ok, status(r, 200), status(r, 301), m.redirects),
        (20, 20, 0, 20)
    );
    assert_eq!(m.bytes.received_body, 20 * 3);
    assert_eq!(m.connections.ok, 1);
    // A loop: the limit's class, as HTTP/1.1.
    let run = run_to(&s.url("/302loop"), "5");
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.requests.error("redirect.too_many"),
        5,
        "{}",
        run.stdout()
    );
    assert_eq!(r.measurements.redirects, 10);
    // To another origin: an HTTP/3 connection of its own per chain.
    let run = run_to(&s.url(&format!("/301?{}", o.url("/bytes/4"))), "6");
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        (m.requests.ok, m.redirects, m.bytes.received_body),
        (6, 6, 24),
        "{}",
        run.stdout()
    );
    assert_eq!(m.connections.ok, 1 + 6);
    // To http://: HTTP/3 needs TLS, so the hop cannot be made.
    let run = run_to(&s.url("/301?http://127.0.0.1:9/x"), "3");
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.error("redirect.scheme"), 3, "{}", run.stdout());
    let (st, so) = (s.stop(), o.stop());
    assert_eq!(st["requests"].as_u64(), Some(20 * 2 + 5 * 3 + 6 + 3));
    assert_eq!(so["requests"].as_u64(), Some(6));
}

/// An HTTP/2 server that says its SETTINGS (and acknowledges the
/// client's) on every connection, then never answers a stream; the
/// receiver hears of every HEADERS frame it gets.
fn silent_h2() -> (u16, std::sync::mpsc::Receiver<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        // Bounded: the test makes one connection; the reads time out.
        for s in l.incoming().take(4) {
            let Ok(mut s) = s else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let _ = s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0]);
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(60)));
                let mut preface = [0u8; 24];
                if s.read_exact(&mut preface).is_err() {
                    return;
                }
                let mut head = [0u8; 9];
                while s.read_exact(&mut head).is_ok() {
                    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                    let mut payload = vec![0u8; len];
                    if s.read_exact(&mut payload).is_err() {
                        return;
                    }
                    if head[3] == 1 {
                        let _ = tx.send(());
                    }
                }
            });
        }
    });
    (port, rx)
}

#[test]
fn a_request_cut_off_on_its_hop_elsewhere_closes_that_connection() {
    use std::os::unix::process::CommandExt;
    let (port, hop_sent) = silent_h2();
    let s = redirecting(port);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let child = common::throng()
        .args([
            "http",
            &s.url("/cross"),
            "--http2",
            "--redirects",
            "2",
            "-c",
            "1",
            "-d",
            "60s",
            "-t",
            "1",
            "-q",
        ])
        .arg("--json")
        .arg(&json)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let kill = |sig: &str| {
        let _ = std::process::Command::new("kill")
            .args([sig, "--", &format!("-{pid}")])
            .status();
    };
    if hop_sent.recv_timeout(std::time::Duration::from_secs(30)).is_err() {
        kill("-KILL");
        panic!("the hop never reached the other origin");
    }
    // Ctrl-C twice: stop, then stop at once — the hop is cut off.
    kill("-INT");
    std::thread::sleep(std::time::Duration::from_millis(200));
    kill("-INT");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(Ok(out)) = rx.recv_timeout(std::time::Duration::from_secs(60)) else {
        kill("-KILL");
        panic!("throng did not end within 60 s of the second Ctrl-C");
    };
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (1, 0), "{:?}", m.requests);
    assert_eq!(m.redirects, 1);
    assert_eq!(
        (m.connections.attempted, m.connections.ok),
        (2, 2),
        "{:?}",
        m.connections
    );
    assert_eq!(m.phases["connection"].count(), 2, "a connection's lifetime unrecorded");
}
