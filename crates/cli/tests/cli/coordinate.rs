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

const TOKEN: &str = "tok-coordinate-7c1e";

/// `throng agent` on a free loopback port, stopped on drop.
struct Agent {
    child: Child,
    addr: String,
}

impl Agent {
    fn start(token_file: &Path) -> Agent {
        let port = common::free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = throng()
            .args(["agent", "--listen", &addr, "--token-file"])
            .arg(token_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let agent = Agent { child, addr };
        common::wait_listening(agent.addr.parse::<SocketAddr>().unwrap());
        agent
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn token_file(dir: &Path, token: &str) -> PathBuf {
    let path = dir.join(format!("token-{}", token.len()));
    std::fs::write(&path, format!("{token}\n")).unwrap();
    path
}

/// nginx answering every request, one access-log line each.
fn nginx(log: &Path) -> common::Nginx {
    common::Nginx::start(&format!(
        "location / {{ access_log {}; return 200 \"ok\\n\"; }}",
        log.display()
    ))
}

/// `throng coordinate --agents A,B --token-file F [extra] -- COMMAND`:
/// (exit code, stderr).
fn coordinate(agents: &[&Agent], token: &Path, extra: &[&str], command: &[&str]) -> (i32, String) {
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
    // The command is checked once, here, before any agent is asked.
    let out = common::output(throng().args(["coordinate", "--agents", &closed, "--", "http", "nope", "-n", "10"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the command after --: URL: 'nope' is not a valid URL"),
        "{stderr}"
    );
}
