//! `throng agent` and `throng coordinate` on loopback: agents as local
//! processes, real nginx as the target.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{assert_books_balance, throng};
use throng_result::RunResult;

pub(crate) const TOKEN: &str = "tok-coordinate-7c1e";

/// `throng agent` on a free loopback port, stopped on drop.
pub(crate) struct Agent {
    child: Child,
    pub(crate) addr: String,
    /// Everything it wrote to stderr so far.
    said: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Agent {
    pub(crate) fn start(token_file: &Path) -> Agent {
        Agent::start_with(&[std::ffi::OsStr::new("--token-file"), token_file.as_os_str()])
    }

    /// `throng agent --listen 127.0.0.1:0 ARGS`, stopped on drop.
    pub(crate) fn start_with(args: &[&std::ffi::OsStr]) -> Agent {
        // Port 0, the address read from the agent's first line: a port
        // picked free beforehand could be taken by another test's agent
        // meanwhile, and this test would talk to that one.
        let mut child = throng()
            .args(["agent", "--listen", "127.0.0.1:0"])
            .args(args)
            // Nothing of the coordinator's directory is reachable from here.
            .current_dir("/")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = std::sync::Arc::clone(&said);
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            let mut lines = std::io::BufReader::new(stderr).lines();
            if let Some(Ok(first)) = lines.next() {
                kept.lock().unwrap().push_str(&format!("{first}\n"));
                let _ = tx.send(first);
            }
            // Drained to the end, so that the agent never blocks on a full pipe.
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        let first = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the agent said where it listens within 10 s");
        let addr = first
            .strip_prefix("throng: agent listening on ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("not the agent's first line: {first}"))
            .to_string();
        let agent = Agent { child, addr, said };
        common::wait_listening(agent.addr.parse::<SocketAddr>().unwrap());
        agent
    }

    /// What it wrote to stderr so far.
    pub(crate) fn said(&self) -> String {
        self.said.lock().unwrap().clone()
    }

    /// Waits (bounded, 10 s) until it said `what`; all it said.
    pub(crate) fn wait_said(&self, what: &str) -> String {
        for _ in 0..200 {
            let said = self.said();
            if said.contains(what) {
                return said;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the agent never said '{what}': {}", self.said());
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn token_file(dir: &Path, token: &str) -> PathBuf {
    let path = dir.join(format!("token-{}", token.len()));
    std::fs::write(&path, format!("{token}\n")).unwrap();
    path
}

/// nginx answering every request, one access-log line each.
pub(crate) fn nginx(log: &Path) -> common::Nginx {
    common::Nginx::start(&format!(
        "location / {{ access_log {}; return 200 \"ok\\n\"; }}",
        log.display()
    ))
}

/// `throng coordinate --agents A,B --token-file F [extra] -- COMMAND`:
/// (exit code, stderr).
pub(crate) fn coordinate(agents: &[&Agent], token: &Path, extra: &[&str], command: &[&str]) -> (i32, String) {
    let list: Vec<&str> = agents.iter().map(|a| a.addr.as_str()).collect();
    let out = common::output(
        throng()
            .args(["coordinate", "--agents", &list.join(","), "--token-file"])
            .arg(token)
            .args(extra)
            .arg("--")
            .args(command),
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn two_agents_split_the_plan_and_the_merged_result_counts_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("all.json");
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &["http", &server.url("/"), "-n", "2000", "-c", "4"],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 2000);
    assert_eq!(r.measurements.requests.attempted, 2000);
    assert_eq!(common::access_log(&log).len(), 2000, "nginx's count");
    assert_eq!(r.parts.len(), 2);
    assert_eq!(r.segment_notes().count(), 0, "{:?}", r.notes);
    for (agent, seg) in [(&a, "0:1/2"), (&b, "1/2:1")] {
        let named = format!("agent {}: segment {seg}: 1000 requests (1000 ok)", agent.addr);
        assert!(r.notes.contains(&named), "{named} not in {:?}", r.notes);
    }
    assert!(
        stderr.contains(&format!(
            "merged the results of 2 of 2 agents into '{}': 2000 requests (2000 ok)",
            json.display()
        )),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains(TOKEN) && !stderr.contains(TOKEN), "the token leaked");
}

#[test]
fn a_wrong_token_or_garbage_is_refused_and_the_agent_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let wrong = token_file(dir.path(), "wrong-token");
    let a = Agent::start(&token);
    let command = ["http", &server.url("/"), "-n", "10", "-c", "1"];
    let (code, stderr) = coordinate(&[&a], &wrong, &[], &command);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("agent {} refused: wrong token", a.addr)),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN) && !stderr.contains("wrong-token"), "{stderr}");
    assert!(common::access_log(&log).is_empty());
    // A huge length, then bytes that are no message: refused, bounded.
    for garbage in [
        &u32::MAX.to_be_bytes()[..],
        b"\0\0\0\x05hello",
        b"GET / HTTP/1.1\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(&a.addr).unwrap();
        s.write_all(garbage).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut sink);
    }
    // A peer that connects and says nothing holds up no one.
    let _silent = TcpStream::connect(&a.addr).unwrap();
    let (code, stderr) = coordinate(&[&a], &token, &[], &command);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(common::access_log(&log).len(), 10);
}

#[test]
fn a_closed_agent_port_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), TOKEN);
    let a = Agent::start(&token);
    let closed = format!("127.0.0.1:{}", common::free_port());
    let out = common::output(
        throng()
            .args([
                "coordinate",
                "--agents",
                &format!("{},{closed}", a.addr),
                "--token-file",
            ])
            .arg(&token)
            .args(["--", "http", "http://127.0.0.1:9/", "-n", "10"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("agent {closed}: cannot connect")) && stderr.contains("throng agent --listen"),
        "{stderr}"
    );
    let out = common::output(throng().args([
        "coordinate",
        "--agents",
        &format!("{closed},{closed}"),
        "--",
        "http",
        "http://127.0.0.1:9/",
    ]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is listed twice"));
    // A 70,000-byte name is refused by its length, never echoed back whole.
    let huge = format!("{}:1", "a".repeat(70_000));
    let out = common::output(throng().args(["coordinate", "--agents", &huge, "--", "http", "http://127.0.0.1:9/"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", &stderr[..stderr.len().min(300)]);
    assert!(stderr.contains("an address of 70002 bytes") && stderr.len() < 1000);
    // The command is checked once, here, before any agent is asked.
    let out = common::output(throng().args(["coordinate", "--agents", &closed, "--", "http", "nope", "-n", "10"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the command after --: URL: 'nope' is not a valid URL"),
        "{stderr}"
    );
}

/// A throng child stopped on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (bounded) until `path` holds a result document.
pub(crate) fn wait_for_result(path: &Path, child: &mut Child) -> RunResult {
    let deadline = std::time::Instant::now() + common::RUN_LIMIT;
    while std::time::Instant::now() < deadline {
        if let Some(r) = std::fs::File::open(path)
            .ok()
            .and_then(|f| RunResult::from_reader(f).ok())
        {
            return r;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "coordinate ended before writing {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "no result in {} after {} s",
        path.display(),
        common::RUN_LIMIT.as_secs()
    );
}

/// Waits (bounded) for `child` to end: its exit code.
pub(crate) fn wait_end(child: &mut Child) -> i32 {
    let deadline = std::time::Instant::now() + common::RUN_LIMIT;
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("still running after {} s", common::RUN_LIMIT.as_secs());
}

/// The value of the sample `name` (labels included) in a scrape.
fn sample(scrape: &str, name: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn prometheus_on_the_coordinator_shows_the_merged_counts_of_every_agent() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("all.json");
    let exporter: SocketAddr = format!("127.0.0.1:{}", common::free_port()).parse().unwrap();
    let mut run = Running(
        throng()
            .args([
                "coordinate",
                "--agents",
                &format!("{},{}", a.addr, b.addr),
                "--token-file",
            ])
            .arg(&token)
            .args([
                "--prometheus",
                &exporter.to_string(),
                "--prometheus-linger",
                "100s",
                "--json",
            ])
            .arg(&json)
            .args(["--", "http", &server.url("/"), "-r", "200", "-d", "6s", "-c", "4"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // While the run lasts, the endpoint shows the agents' live figures.
    let deadline = std::time::Instant::now() + common::RUN_LIMIT;
    let live = loop {
        let scrape = crate::prometheus::get(exporter, "/metrics").map(|(_, body)| body);
        let ok = scrape.and_then(|s| sample(&s, "throng_requests_total{outcome=\"ok\"}"));
        if ok.is_some_and(|n| n > 0.0) || json.exists() || std::time::Instant::now() > deadline {
            break ok;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        !json.exists() && live.is_some_and(|n| n > 0.0),
        "no live figures during the run: {live:?}"
    );
    let r = wait_for_result(&json, &mut run.0);
    // Written before the linger: the endpoint now shows the final totals.
    let (status, scrape) = crate::prometheus::get(exporter, "/metrics").unwrap();
    assert_eq!(status, 200);
    let ok = r.measurements.requests.ok;
    assert!(ok > 0 && r.parts.len() == 2, "{:?}", r.notes);
    assert_eq!(
        sample(&scrape, "throng_requests_total{outcome=\"ok\"}"),
        Some(ok as f64),
        "{scrape}"
    );
    assert_eq!(common::access_log(&log).len() as u64, ok);
    // SIGINT ends the linger; the result stands.
    // SAFETY: kill takes no pointers; the child is ours and not reaped yet.
    unsafe { libc::kill(run.0.id() as i32, libc::SIGINT) };
    assert_eq!(wait_end(&mut run.0), 0);
}

#[test]
fn an_agent_killed_mid_run_is_a_named_missing_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, mut b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("all.json");
    let mut run = Running(
        throng()
            .args([
                "coordinate",
                "--agents",
                &format!("{},{}", a.addr, b.addr),
                "--token-file",
            ])
            .arg(&token)
            .arg("--json")
            .arg(&json)
            .args(["--", "http", &server.url("/"), "-r", "100", "-n", "2000", "-c", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Once requests arrive (and live figures, each second), the run is
    // under way: kill the second agent.
    let deadline = std::time::Instant::now() + common::RUN_LIMIT;
    while common::access_log(&log).len() < 300 {
        assert!(std::time::Instant::now() < deadline, "no requests arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    b.child.kill().unwrap();
    let code = wait_end(&mut run.0);
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("agent {}: segment 1/2:1 is missing", b.addr)),
        "{stderr}"
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 1);
    assert!(r.segment_notes().count() > 0, "{:?}", r.notes);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with(&format!("agent {}: segment 1/2:1 MISSING", b.addr))
                && n.contains("did not come back within 15 s")
                && n.contains("its last live figures: ")),
        "{:?}",
        r.notes
    );
    // Agent a ran its whole segment: 1000 of the 2000 planned, each sent or
    // (on a busy machine) dropped.
    let m = &r.measurements;
    assert_eq!(
        m.requests.attempted + m.dropped,
        1000,
        "{:?} dropped {}",
        m.requests,
        m.dropped
    );
    assert!(m.requests.ok > 0);
}

#[test]
fn ctrl_c_on_the_coordinator_stops_every_agent_and_still_writes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("all.json");
    let mut run = Running(
        throng()
            .args([
                "coordinate",
                "--agents",
                &format!("{},{}", a.addr, b.addr),
                "--token-file",
            ])
            .arg(&token)
            .arg("--json")
            .arg(&json)
            .args(["--", "http", &server.url("/"), "-r", "100", "-d", "60s", "-c", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + common::RUN_LIMIT;
    while common::access_log(&log).len() < 20 {
        assert!(std::time::Instant::now() < deadline, "no requests arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A second coordinator meanwhile is told the agent is busy.
    let (code, stderr) = coordinate(&[&a], &token, &[], &["http", &server.url("/"), "-n", "10"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("agent {} refused: busy", a.addr)), "{stderr}");
    // SAFETY: kill takes no pointers; the child is ours and not reaped yet.
    unsafe { libc::kill(run.0.id() as i32, libc::SIGINT) };
    assert_eq!(wait_end(&mut run.0), 130);
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert!(r.interrupted);
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    let ended = r.measurements.requests.ended();
    assert!(ended > 0 && ended < 3000, "{ended} of 6000 planned");
    assert_eq!(common::access_log(&log).len() as u64, r.measurements.requests.ok);
}

#[test]
fn the_files_a_command_reads_are_shipped_to_the_agents() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    // 200 only for the bearer token and the body of the files.
    let server = common::Nginx::start(&format!(
        "location / {{ access_log {}; if ($http_authorization != \"Bearer tok-file-9\") {{ return 401; }} \
         if ($content_length != 11) {{ return 400; }} return 200 \"ok\\n\"; }}",
        log.display()
    ));
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    std::fs::write(dir.path().join("bearer.txt"), "tok-file-9\n").unwrap();
    std::fs::write(dir.path().join("body.json"), "{\"a\":12345}").unwrap();
    // Relative paths: the agents (started in /) could not read them.
    let out = common::output(
        throng()
            .current_dir(dir.path())
            .args([
                "coordinate",
                "--agents",
                &format!("{},{}", a.addr, b.addr),
                "--token-file",
            ])
            .arg(&token)
            .args([
                "--json",
                "all.json",
                "--",
                "http",
                &server.url("/"),
                "-n",
                "40",
                "-c",
                "2",
                "-m",
                "POST",
            ])
            .args(["--bearer-file", "bearer.txt", "--body=body.json"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(dir.path().join("all.json")).unwrap()).unwrap();
    assert_eq!(r.measurements.requests.ok, 40, "{:?}", r.measurements.status);
    assert_eq!(common::access_log(&log).len(), 40);
    let text = std::fs::read_to_string(dir.path().join("all.json")).unwrap();
    assert!(
        !stderr.contains("tok-file-9") && !text.contains("tok-file-9"),
        "the bearer token leaked"
    );
    // --targets (its lines name more files) is refused before any agent is asked.
    std::fs::write(dir.path().join("targets.txt"), format!("GET {}\n", server.url("/"))).unwrap();
    let out = common::output(
        throng()
            .current_dir(dir.path())
            .args(["coordinate", "--agents", &a.addr, "--token-file"])
            .arg(&token)
            .args(["--", "http", "--targets", "targets.txt", "-n", "4"]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--targets cannot be shipped to the agents yet"),
        "{stderr}"
    );
}

/// A fake agent on a free port: challenges, reads one frame (the hello) and
/// answers `answer` (raw bytes), then closes.
fn fake_agent(answer: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(&frame(
            &serde_json::json!({"type": "challenge", "protocol": 2, "nonce": "00"}),
        ))
        .unwrap();
        let mut head = [0u8; 4];
        std::io::Read::read_exact(&mut s, &mut head).unwrap();
        let mut hello = vec![0u8; u32::from_be_bytes(head) as usize];
        std::io::Read::read_exact(&mut s, &mut hello).unwrap();
        let _ = s.write_all(&answer);
    });
    (addr, handle)
}

fn frame(json: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(json).unwrap();
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&body);
    f
}

#[test]
fn every_agent_is_checked_and_a_garbage_peer_is_refused() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let welcome = |version: &str, unix_ms: u64, nofile: u64| {
        frame(&serde_json::json!({"type": "welcome", "version": version, "unix_ms": unix_ms, "nofile": nofile}))
    };
    let ours = env!("CARGO_PKG_VERSION");
    let cases = [
        (
            welcome("0.0.0-other", now, 1 << 20),
            2,
            "runs throng 0.0.0-other, this is",
        ),
        (welcome(ours, now + 3_600_000, 1 << 20), 2, "ms off this one's"),
        (
            welcome(ours, now, 100),
            2,
            "may open 100 files, too few for its share of 1000 connections",
        ),
        (
            u32::MAX.to_be_bytes().to_vec(),
            1,
            "over the limit (not a throng peer?)",
        ),
        (b"\0\0\0\x02{}".to_vec(), 1, "not a throng message"),
        (Vec::new(), 1, "the connection closed"),
    ];
    for (answer, want_code, want) in cases {
        let (addr, fake) = fake_agent(answer);
        let out = common::output(throng().args([
            "coordinate",
            "--agents",
            &addr,
            "--",
            "http",
            "http://127.0.0.1:9/",
            "-n",
            "1000",
            "-c",
            "1000",
        ]));
        fake.join().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(want_code), "{want}: {stderr}");
        assert!(
            stderr.contains(&format!("agent {addr}")) && stderr.contains(want),
            "{want}: {stderr}"
        );
    }
}

#[test]
fn an_agent_whose_coordinator_dies_stops_its_run_and_serves_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let a = Agent::start(&token);
    let mut run = Running(
        throng()
            .args(["coordinate", "--agents", &a.addr, "--token-file"])
            .arg(&token)
            .args(["--", "http", &server.url("/"), "-r", "50", "-n", "5000", "-c", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + common::RUN_LIMIT;
    while common::access_log(&log).len() < 10 {
        assert!(std::time::Instant::now() < deadline, "no requests arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    run.0.kill().unwrap();
    run.0.wait().unwrap();
    // The agent stops the orphaned run and is free again (busy until then).
    let command = ["http", &server.url("/ok"), "-n", "10", "-c", "1"];
    let mut tries = 0;
    let (code, stderr) = loop {
        let (code, stderr) = coordinate(&[&a], &token, &[], &command);
        tries += 1;
        if !stderr.contains("refused: busy") || tries == 100 {
            break (code, stderr);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, 0, "{stderr}");
    let lines = common::access_log(&log);
    assert_eq!(lines.iter().filter(|l| l.contains("GET /ok ")).count(), 10);
    // The orphaned run stopped: far fewer than its 5000 requests.
    assert!(lines.len() < 2500, "{} requests", lines.len());
}

/// A TLS storm with a client certificate split over two agents: the CA,
/// certificate and key are shipped (the agents run in `/`, where none of
/// them is), and the merged result counts every connection and handshake
/// exactly, as nginx's log does.
#[test]
fn a_storm_is_split_over_two_agents_with_its_tls_files_shipped() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("certs");
    let o = common::output(throng().args(["certs", "--out", c.to_str().unwrap()]));
    assert!(o.status.success());
    let p = |n: &str| c.join(n).display().to_string();
    let log = dir.path().join("access.log");
    let nginx = common::Nginx::start_tls(
        &format!(
            "ssl_certificate {}; ssl_certificate_key {}; ssl_client_certificate {}; ssl_verify_client on;",
            p("server.pem"),
            p("server.key"),
            p("ca.pem")
        ),
        &format!("location / {{ access_log {}; return 200 \"ok\\n\"; }}", log.display()),
    );
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("storm.json");
    let target = format!("https://localhost:{}/", nginx.port);
    let (ca, cert, key) = (p("ca.pem"), p("client.pem"), p("client.key"));
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &[
            "storm",
            &target,
            "-n",
            "300",
            "--max-concurrent",
            "20",
            "--cacert",
            &ca,
            "--cert",
            &cert,
            "--key",
            &key,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, 300);
    assert_eq!(m.connections.ok, 300, "{:?}", m.connections.errors);
    assert_eq!(m.tls.as_ref().unwrap().handshakes, 300);
    assert_eq!(common::access_log(&log).len(), 300, "nginx's count");
    assert_eq!(r.parts.len(), 2);
    assert_eq!(r.segment_notes().count(), 0, "{:?}", r.notes);
    assert!(stderr.contains("merged the results of 2 of 2 agents"), "{stderr}");

    // A storm's --trigger would run on every agent: refused before any is asked.
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &[],
        &["storm", &target, "-n", "10", "--trigger", "true"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--trigger would run its command on every agent"),
        "{stderr}"
    );
}

/// A scenario split over two agents: the scenario and the CSV it names (in
/// a directory below it) are shipped, the agents (run in `/`) have no copy;
/// shared-iterations adds up to exactly the plan's, nginx's log sees each
/// CSV row's path.
#[test]
fn a_scenario_is_split_over_two_agents_with_the_files_it_names_shipped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let plan = dir.path().join("plan");
    std::fs::create_dir_all(plan.join("data")).unwrap();
    std::fs::write(plan.join("data/users.csv"), "name\nada\nbob\n").unwrap();
    let scenario = plan.join("load.yaml");
    std::fs::write(
        &scenario,
        format!(
            "target: {}\ndata: {{ file: data/users.csv, cursor: shared }}\nscenarios:\n  shared:\n    executor: \
             shared-iterations\n    vus: 4\n    iterations: 101\n    flow:\n      - request: {{ name: s, path: \
             \"/u/{{{{name}}}}\" }}\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("run.json");
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &["run", scenario.to_str().unwrap(), "--threads", "1"],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 101);
    assert_eq!(r.measurements.scenario.as_ref().unwrap().iterations, 101);
    assert_eq!(r.parts.len(), 2);
    let lines = common::access_log(&log);
    assert_eq!(lines.len(), 101, "nginx's count");
    let rows = lines
        .iter()
        .filter(|l| l.contains("/u/ada") || l.contains("/u/bob"))
        .count();
    assert_eq!(rows, 101, "every request named a row of the shipped CSV");

    // A file outside the scenario's directory cannot be shipped: exit 2,
    // before any agent runs anything.
    std::fs::write(dir.path().join("outside.csv"), "name\nada\n").unwrap();
    let text = std::fs::read_to_string(&scenario)
        .unwrap()
        .replace("data/users.csv", "../outside.csv");
    std::fs::write(&scenario, text).unwrap();
    let (code, stderr) = coordinate(&[&a, &b], &token, &[], &["run", scenario.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("'../outside.csv' is outside the scenario's directory"),
        "{stderr}"
    );
}

/// A k6 script split over two agents: its import (`./lib/paths.js`) and the
/// file it open()s (`./data/names.json`) are shipped beside it; the
/// script's iterations add up exactly, each request a name from the file.
#[test]
fn a_k6_script_is_split_over_two_agents_with_its_imports_and_open_files_shipped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let plan = dir.path().join("k6");
    std::fs::create_dir_all(plan.join("lib")).unwrap();
    std::fs::create_dir_all(plan.join("data")).unwrap();
    std::fs::write(plan.join("data/names.json"), r#"["ada", "bob"]"#).unwrap();
    std::fs::write(
        plan.join("lib/paths.js"),
        "export function path(n) { return `/k6/${n}`; }\n",
    )
    .unwrap();
    let script = plan.join("load.js");
    std::fs::write(
        &script,
        format!(
            "import http from 'k6/http';\nimport {{ path }} from './lib/paths.js';\n\
             const names = JSON.parse(open('./data/names.json'));\n\
             export const options = {{ vus: 2, iterations: 40 }};\n\
             export default function () {{ http.get(`{}${{path(names[__ITER % 2])}}`); }}\n",
            server.url("")
        ),
    )
    .unwrap();
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("k6.json");
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &["run", script.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 40);
    let lines = common::access_log(&log);
    assert_eq!(lines.len(), 40, "nginx's count");
    let named = lines
        .iter()
        .filter(|l| l.contains("/k6/ada") || l.contains("/k6/bob"))
        .count();
    assert_eq!(named, 40, "every request took a name from the shipped file");
}

/// The coordinator makes `throng run`'s whole check once: a scenario that
/// uses an unset `{{env.NAME}}` is exit 2 naming it, before any agent runs.
#[test]
fn a_scenario_with_an_unset_env_name_is_refused_before_any_agent_runs() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("env.yaml");
    std::fs::write(
        &scenario,
        "target: http://127.0.0.1:9\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: \
         1\n    flow:\n      - request: { path: \"/{{env.THRONG_COORD_UNSET_NAME}}\" }\n",
    )
    .unwrap();
    let token = token_file(dir.path(), TOKEN);
    let a = Agent::start(&token);
    let (code, stderr) = coordinate(&[&a], &token, &[], &["run", scenario.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("THRONG_COORD_UNSET_NAME"), "{stderr}");
    assert!(stderr.contains("--env"), "{stderr}");
}

/// A scenario's setup: runs once for the whole coordinated run (by the
/// coordinator), its capture reaches every agent's VUs, and its teardown
/// runs once after them: nginx sees one setup and one teardown request, and
/// the load's 101 requests each carry the captured value; the merged
/// result has the setup's row once, and the token never reaches it.
#[test]
fn a_scenarios_setup_runs_once_and_its_capture_reaches_every_agent() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = common::Nginx::start(&format!(
        "location /setup {{ access_log {l}; return 200 '{{\"token\":\"tok-9f3a\"}}'; }}\n\
         location / {{ access_log {l}; return 200 \"ok\\n\"; }}",
        l = log.display()
    ));
    let scenario = dir.path().join("once.yaml");
    std::fs::write(
        &scenario,
        format!(
            "target: {}\nsetup:\n  - request:\n      name: login\n      path: /setup\n      capture:\n        token: {{ \
             json: /token }}\nscenarios:\n  shared:\n    executor: shared-iterations\n    vus: 4\n    iterations: \
             101\n    flow:\n      - request: {{ name: s, path: \"/load/{{{{setup.token}}}}\" }}\nteardown:\n  - \
             request: {{ name: bye, path: \"/teardown/{{{{setup.token}}}}\" }}\nthresholds:\n  \
             requests{{scenario:setup}}: [count == 1]\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("once.json");
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &["run", scenario.to_str().unwrap(), "--threads", "1"],
    );
    assert_eq!(code, 0, "{stderr}");
    let lines = common::access_log(&log);
    let count = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(count("/setup"), 1, "the setup ran once: {lines:?}");
    assert_eq!(count("/load/tok-9f3a"), 101, "every load request read the capture");
    assert_eq!(count("/teardown/tok-9f3a"), 1, "the teardown ran once");
    assert_eq!(lines.len(), 103);
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 101);
    let tags = &r.measurements.scenario.as_ref().unwrap().tags;
    assert_eq!(tags["scenario:setup"].requests, 1);
    assert_eq!(tags["scenario:teardown"].requests, 1);
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(
        !text.contains("tok-9f3a") && !stderr.contains("tok-9f3a"),
        "the capture leaked"
    );
}

/// A setup: that fails stops the coordinated run before any agent is
/// asked: exit 1 naming the failure, no load request, no teardown.
#[test]
fn a_failed_setup_stops_the_coordinated_run_before_any_agent_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = common::Nginx::start(&format!(
        "location /setup {{ access_log {l}; return 500; }}\nlocation / {{ access_log {l}; return 200; }}",
        l = log.display()
    ));
    let scenario = dir.path().join("fails.yaml");
    std::fs::write(
        &scenario,
        format!(
            "target: {}\nsetup:\n  - request: {{ name: login, path: /setup }}\nscenarios:\n  s:\n    executor: \
             per-vu-iterations\n    vus: 1\n    iterations: 5\n    flow:\n      - request: {{ path: /load }}\nteardown:\n  \
             - request: {{ path: /teardown }}\n",
            server.url("").trim_end_matches('/')
        ),
    )
    .unwrap();
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let (code, stderr) = coordinate(&[&a, &b], &token, &[], &["run", scenario.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("setup"), "{stderr}");
    let lines = common::access_log(&log);
    assert_eq!(lines.len(), 1, "the setup's request alone: {lines:?}");
    assert!(lines[0].contains("/setup"), "{lines:?}");
}
