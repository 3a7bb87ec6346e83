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
