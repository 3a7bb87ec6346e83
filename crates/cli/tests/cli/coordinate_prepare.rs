//! A coordinator slow to prepare its run (a journal on a slow disk, a
//! starved machine, many agents to greet): the agents it greeted wait for
//! their runs while it says it is alive.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::coordinate::{Agent, TOKEN, coordinate, nginx, token_file};

use std::io::Read as _;
use std::time::Duration;

use common::assert_books_balance;
use throng_result::RunResult;

/// The journal's first write blocks for 12 s (the file it is written to
/// first is a FIFO nobody reads until then), longer than an agent once
/// waited for its run after its welcome (10 s): the agents wait, the run
/// goes on, both segments are merged.
#[test]
fn agents_wait_for_a_coordinator_slow_to_prepare_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (Agent::start(&token), Agent::start(&token));
    let json = dir.path().join("run.json");
    let slow = dir.path().join("run.json.journal.tmp");
    let made = std::process::Command::new("mkfifo").arg(&slow).status().unwrap();
    assert!(made.success());
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(12));
        let mut text = String::new();
        std::fs::File::open(&slow).unwrap().read_to_string(&mut text).unwrap();
        text
    });
    let (code, stderr) = coordinate(
        &[&a, &b],
        &token,
        &["--json", json.to_str().unwrap()],
        &["http", &server.url("/"), "-n", "40", "-c", "2"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        reader.join().unwrap().contains("\"run_id\""),
        "the journal went through the FIFO"
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    assert_eq!(r.measurements.requests.ok, 40);
    assert_eq!(common::access_log(&log).len(), 40, "nginx's count");
    for agent in [&a, &b] {
        assert!(!agent.said().contains("said nothing"), "{}", agent.said());
    }
}

/// One frame of the agent protocol: a 4-byte length, then the JSON.
fn read_frame(s: &mut std::net::TcpStream) -> serde_json::Value {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(head) as usize];
    s.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// A coordinator that is welcomed and then says nothing (neither its run
/// nor that it is alive): the agent gives up on it after 10 s, its log
/// names that wait, and it serves the next coordinator.
#[test]
fn an_agent_names_the_wait_a_silent_coordinator_ran_out() {
    use std::io::Write as _;
    let agent = Agent::start_with(&[]);
    let mut s = std::net::TcpStream::connect(&agent.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(read_frame(&mut s)["type"], "challenge");
    let body = serde_json::to_vec(&serde_json::json!({"type": "hello", "protocol": 2, "proof": ""})).unwrap();
    s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
    assert_eq!(read_frame(&mut s)["type"], "welcome");
    // Silent: the agent closes the connection once its wait ran out.
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let said = agent.wait_said("the coordinator said nothing for 10 s after this agent's welcome");
    assert!(said.contains("waiting for the next one"), "{said}");
    let mut again = std::net::TcpStream::connect(&agent.addr).unwrap();
    again.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(read_frame(&mut again)["type"], "challenge", "it serves the next");
}
