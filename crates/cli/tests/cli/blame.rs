//! Failures blamed on what failed: the hint after "every request failed"
//! names the protocol the run spoke, a silent or garbling proxy rather
//! than the target behind it, and a redirect's bad Location rather than
//! the first origin.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Nginx, assert_books_balance, free_port, http};

/// A loopback listener that does one thing to every connection, on its
/// own thread, for at most 60 s or until dropped.
struct Peer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone, Copy)]
enum Does {
    /// Accepts, reads what comes, and never answers.
    Silent,
    /// Answers what is not HTTP, then closes.
    Garbles,
    /// Closes at once.
    Closes,
}

impl Peer {
    fn start(does: Does) -> Peer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(60);
            let mut held = Vec::new();
            while !flag.load(Ordering::Relaxed) && Instant::now() < until && held.len() < 1000 {
                match listener.accept() {
                    Ok((mut s, _)) => match does {
                        Does::Silent => held.push(s),
                        Does::Garbles => {
                            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
                            let _ = s.read(&mut [0u8; 4096]);
                            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\x00\x01\x02 not http\r\n\r\n");
                        }
                        Does::Closes => drop(s),
                    },
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Peer {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The line that says every request failed, and why.
fn verdict(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.contains("every request failed"))
        .unwrap_or_else(|| panic!("no verdict: {stderr}"))
}

#[test]
fn a_silent_or_garbling_proxy_is_named_not_the_target() {
    let nginx = Nginx::start("location / { return 200 'ok'; }");
    for does in [Does::Silent, Does::Garbles, Does::Closes] {
        let proxy = Peer::start(does);
        let run = http(&[
            &nginx.url("/"),
            "-x",
            &proxy.url(),
            "-n",
            "3",
            "-c",
            "1",
            "--timeout",
            "1s",
        ]);
        assert_eq!(run.code(), 1, "{}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(r.measurements.requests.ok, 0);
        let line = verdict(&run.stderr()).to_string();
        assert!(
            line.contains(&format!("proxy {}", proxy.url())) && line.contains("(--proxy)"),
            "{line}"
        );
        assert!(
            !line.contains(&format!("is {} ", nginx.url("").trim_start_matches("http://"))),
            "{line}"
        );
    }

    // Through a tunnel (https), a proxy that takes the connection and says
    // nothing is proxy.timeout, not the target's timeout.connect.
    let (_dir, certs) = common::certs();
    let proxy = Peer::start(Does::Silent);
    let port = free_port();
    let run = http(&[
        &format!("https://localhost:{port}/"),
        "--cacert",
        certs.join("ca.pem").to_str().unwrap(),
        "-x",
        &proxy.url(),
        "-n",
        "2",
        "-c",
        "1",
        "--timeout",
        "1s",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.requests.error("proxy.timeout"), 2, "{:?}", m.requests.errors);
    let line = verdict(&run.stderr()).to_string();
    assert!(line.contains(&format!("the proxy {} (--proxy)", proxy.url())), "{line}");

    // Nobody answered: a timed run stops after its first attempts, as it
    // does when the target's connect times out, instead of going on for
    // its whole duration.
    let run = http(&[
        &format!("https://localhost:{port}/"),
        "--cacert",
        certs.join("ca.pem").to_str().unwrap(),
        "-x",
        &proxy.url(),
        "-d",
        "30s",
        "-c",
        "1",
        "--timeout",
        "1s",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert!(
        (1..=2).contains(&m.requests.error("proxy.timeout")),
        "stopped early: {:?}",
        m.requests
    );
}

#[test]
fn a_redirect_to_port_zero_blames_its_location() {
    let nginx = Nginx::start("location / { return 302 http://127.0.0.1:0/x; }");
    let run = http(&[&nginx.url("/"), "-n", "4", "-c", "1", "--redirects", "3"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.requests.error("redirect.bad_location"), 4, "{:?}", m.requests.errors);
    let line = verdict(&run.stderr()).to_string();
    assert!(line.contains("Location") && !line.contains("listening"), "{line}");
}

#[test]
fn the_hint_names_the_protocol_the_run_spoke() {
    // h2c to a server that closes every connection: the pre-run check
    // cannot tell, so the run counts the failures.
    let closes = Peer::start(Does::Closes);
    let run = http(&[&closes.url(), "--http2", "-n", "3", "-c", "1", "--timeout", "2s"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_books_balance(run.result());
    let line = verdict(&run.stderr()).to_string();
    assert!(line.contains("speaking HTTP/2?"), "{line}");

    let o = common::output(
        common::throng()
            .args(["grpc", &format!("127.0.0.1:{}", closes.port), "--plaintext", "--proto"])
            .arg(crate::grpc::here("tester.proto"))
            .args(["--call", "throngtest.Tester/Call", "-n", "3", "--timeout", "2s", "-q"]),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(verdict(&stderr).contains("speaking gRPC (HTTP/2)?"), "{stderr}");

    // A scenario's websocket: steps to a server that answers the upgrade
    // with 200.
    let nginx = Nginx::start("location / { return 200 'no'; }");
    let run = common::scenario(&format!(
        "target: {}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    iterations: 3\n    flow:\n      \
         - websocket:\n          url: /chat\n          messages: [{{ send: hi }}]\n",
        nginx.url("")
    ));
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let line = verdict(&run.stderr()).to_string();
    assert!(line.contains("speaking WebSocket?"), "{line}");

    // A WebSocket storm to the same server.
    let run = common::storm(&[&nginx.url("/").replace("http://", "ws://"), "-n", "3"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    assert_books_balance(run.result());
    let line = run
        .stderr()
        .lines()
        .find(|l| l.contains("every connection failed"))
        .unwrap_or_else(|| panic!("no verdict: {}", run.stderr()))
        .to_string();
    assert!(line.contains("speaking WebSocket?"), "{line}");
}

/// A gRPC server (grpcio) whose reflection service answers every request
/// with an empty message: a gRPC reply, but no reflection response.
const NOT_REFLECTION: &str = r#"
import sys, time, grpc
from concurrent import futures
def info(requests, context):
    for _ in requests:
        yield b""
handler = grpc.method_handlers_generic_handler("grpc.reflection.v1alpha.ServerReflection", {
    "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(info),
})
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
server.add_generic_rpc_handlers((handler,))
server.add_insecure_port("127.0.0.1:" + sys.argv[1])
server.start()
time.sleep(60)
"#;

#[test]
fn an_answer_that_is_not_reflection_is_a_usage_error() {
    let port = free_port();
    let mut server = std::process::Command::new("python3")
        .args(["-c", NOT_REFLECTION, &port.to_string()])
        .env("GRPC_VERBOSITY", "NONE")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs (scripts/test.sh installs grpcio)");
    common::wait_listening(([127, 0, 0, 1], port).into());
    let o = common::output(common::throng().args([
        "grpc",
        &format!("127.0.0.1:{port}"),
        "--plaintext",
        "--call",
        "throngtest.Tester/Call",
        "-n",
        "1",
        "-q",
    ]));
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a reflection response"), "{stderr}");
}
