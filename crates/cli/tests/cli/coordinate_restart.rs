//! A coordinator killed (kill -9) while its agents run: `throng coordinate
//! --resume JOURNAL` reconnects to them and finishes the run, every request
//! counted once, whether the agents were still running or had ended.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::coordinate::{Agent, nginx, token_file};

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{assert_books_balance, throng};
use throng_result::RunResult;

const TOKEN: &str = "tok-restart-51a9";

/// A running `throng coordinate`, its stderr kept in a file beside the
/// result so that a wait that fails says what the coordinator said.
struct Coordinator {
    child: Child,
    stderr: PathBuf,
}

impl Coordinator {
    /// Waits (bounded) until `ready` holds while the coordinator runs: one
    /// that ended first, or a wait past the limit, fails with its exit and
    /// what it said.
    fn wait_until(&mut self, what: &str, mut ready: impl FnMut() -> bool) {
        let deadline = Instant::now() + common::RUN_LIMIT;
        while !ready() {
            let ended = self.child.try_wait().unwrap();
            if ended.is_some() || Instant::now() >= deadline {
                let said = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                let state = ended.map_or("still running".to_string(), |s| format!("ended first ({s})"));
                panic!("{what}: the coordinator {state}; it said:\n{said}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded) until the journal holds live figures of every agent.
    fn wait_for_live_figures(&mut self, journal: &Path) {
        self.wait_until("no live figures in the journal", || live_figures_in(journal));
    }

    /// kill -9, and the exit collected.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// `throng coordinate --agents A,B --token-file F --json JSON -- COMMAND`,
/// running.
fn start(agents: &[&Agent], token: &Path, json: &Path, command: &[&str]) -> Coordinator {
    start_with(agents, token, json, &[], command)
}

/// [`start`] with the coordinator's `flags`.
fn start_with(agents: &[&Agent], token: &Path, json: &Path, flags: &[&str], command: &[&str]) -> Coordinator {
    let list: Vec<&str> = agents.iter().map(|a| a.addr.as_str()).collect();
    let stderr = json.with_extension("stderr");
    let child = throng()
        .args(["coordinate", "--agents", &list.join(","), "--token-file"])
        .arg(token)
        .arg("--json")
        .arg(json)
        .args(flags)
        .arg("--")
        .args(command)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    Coordinator { child, stderr }
}

/// Whether the journal holds live figures of every agent.
fn live_figures_in(journal: &Path) -> bool {
    std::fs::read(journal)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|j| {
            j["seqs"]
                .as_array()
                .is_some_and(|s| s.iter().all(|n| n.as_u64() > Some(0)))
        })
}

/// Waits (bounded) until `ready` holds.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + common::RUN_LIMIT;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `throng coordinate --resume JOURNAL --token-file F`: (exit code, stderr).
fn resume(journal: &Path, token: &Path) -> (i32, String) {
    let out = common::output(
        throng()
            .args(["coordinate", "--resume"])
            .arg(journal)
            .arg("--token-file")
            .arg(token),
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The merged result counts exactly what nginx answered, both parts, and
/// says the coordinator was restarted.
fn check_merged(json: &Path, log: &Path, agents: &[&Agent]) -> RunResult {
    let r = RunResult::from_reader(std::fs::File::open(json).unwrap()).unwrap();
    assert_books_balance(&r);
    let ok = r.measurements.requests.ok;
    assert_eq!(r.measurements.requests.attempted, ok, "{:?}", r.notes);
    assert_eq!(common::access_log(log).len() as u64, ok, "nginx's count");
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    assert_eq!(r.segment_notes().count(), 0, "{:?}", r.notes);
    for (agent, seg) in [(agents[0], "0:1/2"), (agents[1], "1/2:1")] {
        let named = format!("agent {}: segment {seg}: ", agent.addr);
        assert!(
            r.notes.iter().any(|n| n.starts_with(&named)),
            "{named} not in {:?}",
            r.notes
        );
    }
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("the coordinator was restarted: ") && n.contains(" s away)")),
        "{:?}",
        r.notes
    );
    r
}

fn said(agent: &Agent, what: &str) -> bool {
    agent.said().contains(what)
}

#[test]
fn a_coordinator_killed_mid_run_is_resumed_and_every_request_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
    );
    let json = dir.path().join("all.json");
    // The journal's default place: beside --json.
    let journal = dir.path().join("all.json.journal");
    let mut run = start(
        &[&a, &b],
        &token,
        &json,
        &["http", &server.url("/"), "-r", "100", "-d", "15s", "-c", "2"],
    );
    // Under way, with live figures of both agents in the journal: kill -9.
    run.wait_until("no live figures in the journal, or under 150 requests logged", || {
        live_figures_in(&journal) && common::access_log(&log).len() >= 150
    });
    run.kill();
    assert!(!json.exists(), "the killed coordinator wrote no result");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(!text.contains(TOKEN), "the token is not in the journal: {text}");
    let (code, stderr) = resume(&journal, &token);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("resuming the run of"), "{stderr}");
    let r = check_merged(&json, &log, &[&a, &b]);
    assert!(
        r.measurements.requests.ok > 150,
        "the run went on: {:?}",
        r.measurements.requests
    );
    for agent in [&a, &b] {
        assert!(said(agent, "the run goes on to its end"), "{:?}", agent.said());
    }
    // Merged: nothing left to resume.
    let (code, stderr) = resume(&journal, &token);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("this run was already merged into"), "{stderr}");
}

#[test]
fn a_resume_after_the_run_ended_still_collects_both_parts() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
    );
    let json = dir.path().join("all.json");
    let journal = dir.path().join("all.json.journal");
    let mut run = start(
        &[&a, &b],
        &token,
        &json,
        &["http", &server.url("/"), "-r", "50", "-n", "300", "-c", "8"],
    );
    run.wait_until("no requests arrived", || common::access_log(&log).len() >= 30);
    run.kill();
    // Both parts end without a coordinator, and keep their results.
    wait_until("the agents did not keep their results", || {
        said(&a, "keeping its result") && said(&b, "keeping its result")
    });
    let before = std::fs::read_to_string(&journal).unwrap();
    let (code, stderr) = resume(&journal, &token);
    assert_eq!(code, 0, "{stderr}");
    let r = check_merged(&json, &log, &[&a, &b]);
    let m = &r.measurements;
    assert_eq!(
        m.requests.attempted + m.dropped,
        300,
        "{:?} dropped {}",
        m.requests,
        m.dropped
    );
    // A journal of a run the agents do not know: refused, saying what to do.
    let mut other: serde_json::Value = serde_json::from_str(&before).unwrap();
    other["run_id"] = serde_json::Value::from("f".repeat(64));
    let forged = dir.path().join("other.journal");
    std::fs::write(&forged, other.to_string()).unwrap();
    let (code, stderr) = resume(&forged, &token);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("agent {} refused: no such run here", a.addr)) && stderr.contains("start a new run"),
        "{stderr}"
    );
}

/// A run started with `--abort-on-fail` and a threshold that fails only
/// after the coordinator was killed: the resumed coordinator (not given the
/// flag again) stops every agent as the first would have. 20 requests/s
/// for 60 s, 1200 planned; `count < 300` fails after about 15 s.
#[test]
fn a_resumed_coordinator_aborts_on_a_failed_threshold_as_the_first_would() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
    );
    let json = dir.path().join("all.json");
    let journal = dir.path().join("all.json.journal");
    let mut run = start_with(
        &[&a, &b],
        &token,
        &json,
        &["--abort-on-fail"],
        &[
            "http",
            &server.url("/"),
            "-r",
            "20",
            "-d",
            "60s",
            "-c",
            "2",
            "--threshold",
            "requests: count < 300",
        ],
    );
    run.wait_for_live_figures(&journal);
    run.kill();
    assert!(!json.exists(), "the killed coordinator wrote no result");
    let (code, stderr) = resume(&journal, &token);
    assert_eq!(code, 99, "{stderr}");
    assert!(stderr.contains("its command, --abort-on-fail)"), "{stderr}");
    assert!(stderr.contains("stopping every agent (--abort-on-fail)"), "{stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    assert!(!r.thresholds_passed());
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("stopped early (--abort-on-fail): threshold")),
        "{:?}",
        r.notes
    );
    let ended = r.measurements.requests.ended();
    assert!((300..1200).contains(&ended), "{ended} of 1200 planned");
    assert_eq!(common::access_log(&log).len() as u64, r.measurements.requests.ok);
}

/// A run of two agents (the coordinator given `flags`) whose coordinator is
/// killed mid-run, then its second agent: (that agent's address, the
/// journal, the first agent, what the run keeps).
fn kill_coordinator_then_agent_b(flags: &[&str]) -> (String, std::path::PathBuf, Agent, LostRun) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let server = nginx(&log);
    let token = token_file(dir.path(), TOKEN);
    let (a, b) = (
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
        Agent::start_with(&["--token-file".as_ref(), token.as_os_str()]),
    );
    let json = dir.path().join("all.json");
    let journal = dir.path().join("all.json.journal");
    let mut run = start_with(
        &[&a, &b],
        &token,
        &json,
        flags,
        &["http", &server.url("/"), "-r", "50", "-d", "6s", "-c", "2"],
    );
    run.wait_for_live_figures(&journal);
    run.kill();
    let b_addr = b.addr.clone();
    drop(b);
    (
        b_addr,
        journal,
        a,
        LostRun {
            json,
            token,
            _server: server,
            _dir: dir,
        },
    )
}

/// What [`kill_coordinator_then_agent_b`] keeps alive.
struct LostRun {
    json: std::path::PathBuf,
    token: std::path::PathBuf,
    _server: common::Nginx,
    _dir: tempfile::TempDir,
}

/// The merged result of a resume that could not reach agent B: A's part
/// only, B's segment named missing with what the journal knew of it.
fn check_b_missing(json: &Path, a: &Agent, b_addr: &str) -> RunResult {
    let r = RunResult::from_reader(std::fs::File::open(json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.parts.len(), 1, "{:?}", r.notes);
    let named = format!("agent {}: segment 0:1/2: ", a.addr);
    assert!(r.notes.iter().any(|n| n.starts_with(&named)), "{:?}", r.notes);
    let missing = format!("agent {b_addr}: segment 1/2:1 MISSING: the resumed coordinator could not rejoin it: ");
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with(&missing) && n.contains("its last live figures in the journal (of ")),
        "{missing} not in {:?}",
        r.notes
    );
    r
}

/// `--allow-missing` given to the first coordinator holds for its resume:
/// an agent gone with it is a named missing segment, exit 0.
#[test]
fn a_resume_that_cannot_reach_an_agent_names_its_segment_missing_as_the_run_allowed() {
    let (b_addr, journal, a, run) = kill_coordinator_then_agent_b(&["--allow-missing"]);
    let (code, stderr) = resume(&journal, &run.token);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("its command, --allow-missing)"), "{stderr}");
    assert!(
        stderr.contains(&format!("agent {b_addr}: segment 1/2:1 is missing: ")) && stderr.contains("(--allow-missing"),
        "{stderr}"
    );
    check_b_missing(&run.json, &a, &b_addr);
}

/// Without `--allow-missing`: the same missing segment, the result still
/// written, exit 1 as in a run that lost an agent.
#[test]
fn a_resume_that_cannot_reach_an_agent_fails_without_allow_missing() {
    let (b_addr, journal, a, run) = kill_coordinator_then_agent_b(&[]);
    let (code, stderr) = resume(&journal, &run.token);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--allow-missing accepts it"), "{stderr}");
    check_b_missing(&run.json, &a, &b_addr);
}
