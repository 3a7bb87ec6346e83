//! `throng http --sse` and `--llm openai` against the lab's event streams
//! (`GET /sse`, `POST /v1/chat/completions`): events, phases and tokens
//! counted exactly, every fault ending as its class, the books balanced.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{assert_books_balance, http, lab, schema_violations};

fn url(server: &throng_lab::LabServer, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

fn count(m: &throng_metrics::Measurements, phase: &str) -> u64 {
    m.phases.get(phase).map_or(0, |h| h.count())
}

#[test]
fn every_event_and_gap_is_counted() {
    let server = lab(None);
    let run = http(&[
        &url(&server, "/sse?events=5&interval=2"),
        "--sse",
        "-n",
        "20",
        "-c",
        "4",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().expect("a stream run reports its streams");
    assert_eq!((s.streams, s.events), (20, 100));
    assert_eq!(s.ended.get("completed"), Some(&20), "{:?}", s.ended);
    assert_eq!(count(m, "first_event"), 20);
    assert_eq!(count(m, "event_gap"), 80);
    assert_eq!(count(m, "stream"), 20);
    assert_eq!(m.requests.ok, 20);
    assert_eq!(r.generator.io, Some(throng_result::Io::Epoll));
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );
}

#[test]
fn sse_events_and_sse_duration_end_streams_early_and_ok() {
    let server = lab(None);
    let run = http(&[
        &url(&server, "/sse?events=50&interval=1"),
        "--sse",
        "--sse-events",
        "3",
        "-n",
        "6",
        "-c",
        "2",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.events, s.ended.get("events")), (18, Some(&6)), "{s:?}");
    // The rest of each body is unread: the connection is not reused.
    assert_eq!(m.connections.ok, 6);

    let run = http(&[
        &url(&server, "/sse?events=1000&interval=20"),
        "--sse",
        "--sse-duration",
        "150ms",
        "-n",
        "4",
        "-c",
        "2",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let s = run.result().measurements.streams.clone().unwrap();
    assert_eq!(s.ended.get("duration"), Some(&4), "{s:?}");
    assert!(s.events >= 4 && s.events < 4 * 1000, "{s:?}");

    // --sse-duration counts once the response started: a server slower to
    // answer than it is no timeout (that is --timeout's).
    let run = http(&[
        &url(&server, "/delay/300"),
        "--sse",
        "--sse-duration",
        "50ms",
        "-n",
        "2",
        "-c",
        "2",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.requests.ok, 2, "{:?}", m.requests.errors);
    assert_eq!(m.streams.as_ref().unwrap().ended.get("completed"), Some(&2));
}

#[test]
fn a_duration_run_ends_its_endless_streams_as_stopped_with_their_events() {
    // Streams the server never ends, a run of 1 s: each ends when the run
    // stops (not --timeout later, as interrupted), its events counted.
    let server = lab(None);
    let run = http(&[
        &url(&server, "/sse?events=1000000&interval=50"),
        "--sse",
        "-d",
        "1s",
        "-c",
        "3",
        "--timeout",
        "30s",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.ended.get("stopped"), Some(&3), "{s:?}");
    assert_eq!((s.streams, m.requests.ok), (3, 3), "{s:?}");
    assert_eq!(m.requests.failed(), 0, "{:?}", m.requests.errors);
    assert!(s.events >= 3, "each stream read its first event: {s:?}");
    assert_eq!(count(m, "event_gap"), s.events - 3, "{s:?}");
    assert_eq!(count(m, "stream"), 3);

    // On a schedule: the streams still open when its -d is over end then.
    let run = http(&[
        &url(&server, "/sse?events=1000000&interval=50"),
        "--sse",
        "-r",
        "5",
        "-d",
        "1s",
        "--timeout",
        "30s",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!(m.requests.failed(), 0, "{:?}", m.requests.errors);
    assert_eq!(s.ended.get("stopped"), Some(&m.requests.ok), "{s:?}");
    assert_eq!(s.streams, m.requests.attempted, "every stream sent ended once: {s:?}");
    assert!(s.streams >= 1, "{s:?}");
}

#[test]
fn faults_end_as_their_classes_with_the_books_balanced() {
    let server = lab(None);
    for (query, class, events_each) in [
        ("events=5&stall=2&interval=1", "sse.stalled", 2),
        ("events=5&end=abrupt&interval=1", "eof", 5),
        ("events=3&big=3000000", "sse.too_large", 0),
        ("events=2&endless=1&interval=1", "sse.too_large", 2),
    ] {
        let run = http(&[
            &url(&server, &format!("/sse?{query}")),
            "--sse",
            "-n",
            "4",
            "-c",
            "2",
            "--timeout",
            "300ms",
        ]);
        assert_eq!(run.code(), 1, "{query}: stderr {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let m = &r.measurements;
        assert_eq!(m.requests.error(class), 4, "{query}: {:?}", m.requests.errors);
        assert_eq!(m.requests.ended(), 4, "{query}: every request counted once");
        let s = m.streams.as_ref().unwrap();
        assert_eq!((s.streams, s.ended.get(class)), (4, Some(&4)), "{query}: {s:?}");
        assert_eq!(s.events, 4 * events_each, "{query}: {s:?}");
        assert_eq!(
            count(m, "stream"),
            0,
            "{query}: only streams that ended well have a stream phase"
        );
    }
}

#[test]
fn llm_tokens_ttft_itl_and_goodput() {
    let server = lab(None);
    let run = http(&[
        &url(&server, "/v1/chat/completions?tokens=7&interval=1"),
        "--llm",
        "openai",
        "--slo",
        "ttft < 10s, itl < 10s",
        "-n",
        "10",
        "-c",
        "2",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.tokens, 70, "{s:?}");
    assert_eq!(count(m, "ttft"), 10);
    assert_eq!(count(m, "itl"), 60);
    assert_eq!((s.slo_judged, s.slo_met, s.goodput), (10, 10, Some(1.0)));
    assert_eq!(s.tokens_per_second_milli.as_ref().map(|h| h.count()), Some(10));
    assert_eq!(s.ended.get("completed"), Some(&10), "{s:?}");
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );

    // The usage chunk's count wins; an SLO no stream can meet gives 0%.
    let run = http(&[
        &url(&server, "/v1/chat/completions?tokens=3&usage=1"),
        "--llm",
        "openai",
        "--slo",
        "ttft < 1us",
        "-n",
        "4",
        "-c",
        "1",
    ]);
    let s = run.result().measurements.streams.clone().unwrap();
    assert_eq!((s.tokens, s.slo_judged, s.slo_met), (12, 4, 0), "{s:?}");
}

#[test]
fn prompts_are_cycled_and_mistakes_are_usage_errors() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.txt");
    std::fs::write(
        &prompts,
        "one two three\n{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}\n",
    )
    .unwrap();
    let run = http(&[
        &url(&server, "/v1/chat/completions?tokens=2"),
        "--llm",
        "openai",
        "--prompts",
        prompts.to_str().unwrap(),
        "-n",
        "4",
        "-c",
        "1",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.streams.as_ref().unwrap().tokens, 8);

    let zero = http(&[
        &url(&server, "/v1/chat/completions"),
        "--llm",
        "openai",
        "--prompts",
        "/dev/zero",
        "-n",
        "1",
    ]);
    assert_eq!(zero.code(), 2, "{}", zero.stderr());
    assert!(zero.stderr().contains("--prompts /dev/zero"), "{}", zero.stderr());
    for (args, says) in [
        (
            &["--sse-events", "3"][..],
            "--sse-events: reads event streams only; add --sse",
        ),
        (
            &["--sse", "--slo", "ttft < 1s"][..],
            "--slo: judges token streams; add --llm openai",
        ),
        (
            &["--llm", "openai", "--slo", "tpot < 1s"][..],
            "--slo: 'tpot' is not a metric",
        ),
        (&["--prompts", "x.txt"][..], "--prompts is for LLM streams"),
    ] {
        let mut all = vec![url(&server, "/sse")];
        all.extend(args.iter().map(|a| a.to_string()));
        all.extend(["-n", "1"].map(String::from));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let run = http(&refs);
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains(says), "{args:?}: {}", run.stderr());
    }
}

#[test]
fn thresholds_judge_the_stream_phases() {
    let server = lab(None);
    let run = http(&[
        // 50 ms between events: the gap threshold could pass only if every
        // one of the 8 gaps coalesced into one read, so it fails for certain.
        &url(&server, "/sse?events=3&interval=50"),
        "--sse",
        "-n",
        "4",
        "--threshold",
        "first_event: p(99) < 60s",
        "--threshold",
        "event_gap: max < 1ms",
    ]);
    assert_eq!(run.code(), 99, "stderr: {}", run.stderr());
    let verdicts = &run.result().thresholds;
    let passed: Vec<bool> = verdicts.iter().map(|v| v.passed).collect();
    assert_eq!(passed, [true, false], "{verdicts:?}");
}

/// sse-starlette on uvicorn (PyPI), tests/servers/sse_server.py: a real
/// event-stream server that is not throng's (CRLF line ends, chunked by
/// uvicorn); stopped on drop.
struct Starlette {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Starlette {
    fn start() -> Starlette {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/sse_server.py");
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = std::process::Command::new("python3")
            .arg(&script)
            .arg(&port_file)
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start python3");
        let mut server = Starlette {
            child,
            port: 0,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                server.port = text.trim().parse().unwrap();
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(server._dir.path().join("log")).unwrap_or_default();
                panic!(
                    "sse_server.py exited ({status}); are the PyPI packages sse-starlette and uvicorn \
                     installed? run ./scripts/test.sh, which installs them\n{log}"
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("sse_server.py did not listen within 20 s");
    }
}

impl Drop for Starlette {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_sse_server_sse_starlette_on_uvicorn() {
    let server = Starlette::start();
    let run = http(&[
        &format!("http://127.0.0.1:{}/events?n=5&interval_ms=1", server.port),
        "--sse",
        "-n",
        "10",
        "-c",
        "2",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!((s.events, s.event_bytes), (50, 50), "{s:?}");
    assert_eq!(s.ended.get("completed"), Some(&10), "{s:?}");
    assert_eq!((count(m, "first_event"), count(m, "event_gap")), (10, 40));
}

#[test]
fn a_stream_that_never_connects_is_counted_and_misses_the_slo() {
    let port = common::free_port();
    let run = http(&[
        &format!("http://127.0.0.1:{port}/v1/chat/completions"),
        "--llm",
        "openai",
        "--slo",
        "ttft < 1s",
        "-n",
        "3",
        "-c",
        "1",
    ]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let s = m.streams.as_ref().unwrap();
    assert_eq!(s.streams, m.requests.ended(), "{s:?}");
    assert_eq!(s.ended.get("refused"), Some(&s.streams), "{s:?}");
    assert_eq!((s.slo_met, s.goodput), (0, Some(0.0)), "{s:?}");
}

/// Starts a one-connection server that answers one event and keeps each
/// request head it read; returns its address and the heads.
fn head_catcher() -> (std::net::SocketAddr, std::sync::mpsc::Receiver<String>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 && s.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
        let _ =
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: x\n\n");
    });
    (addr, rx)
}

#[test]
fn a_stream_request_accepts_text_event_stream_unless_told_otherwise() {
    for (extra, accept) in [
        (None, "accept: text/event-stream"),
        (Some("Accept: application/x-ndjson"), "accept: application/x-ndjson"),
    ] {
        let (addr, heads) = head_catcher();
        let url = format!("http://{addr}/");
        let mut args = vec![url.as_str(), "--sse", "-n", "1", "-c", "1"];
        if let Some(h) = extra {
            args.extend(["-H", h]);
        }
        let run = http(&args);
        assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
        assert_eq!(run.result().measurements.streams.as_ref().unwrap().events, 1);
        let head = heads
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap()
            .to_ascii_lowercase();
        assert_eq!(head.matches("accept:").count(), 1, "{head}");
        assert!(head.contains(accept), "{head}");
    }
}

#[test]
fn streams_read_the_same_over_tls() {
    let (_dir, c) = common::certs();
    let read = |n: &str| (n.to_string(), std::fs::read(c.join(n)).unwrap());
    let config = throng_tls::server_config(&read("server.pem"), &read("server.key"), None).unwrap();
    let server = throng_lab::LabServer::start(&throng_lab::LabConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        stall: None,
        tls: Some(config),
    })
    .unwrap();
    let ca = common::p(&c, "ca.pem");
    let base = format!("https://localhost:{}", server.addr().port());
    let run = http(&[
        &format!("{base}/v1/chat/completions?tokens=7&interval=1"),
        "--cacert",
        &ca,
        "--llm",
        "openai",
        "-n",
        "4",
        "-c",
        "2",
    ]);
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let m = &run.result().measurements;
    assert_eq!(m.streams.as_ref().unwrap().tokens, 28);
    assert_eq!((count(m, "ttft"), count(m, "itl")), (4, 24));
    let run = http(&[
        &format!("{base}/sse?events=5&stall=2&interval=1"),
        "--cacert",
        &ca,
        "--sse",
        "-n",
        "2",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(run.code(), 1, "stderr: {}", run.stderr());
    assert_eq!(run.result().measurements.requests.error("sse.stalled"), 2);
    assert_books_balance(run.result());
}
