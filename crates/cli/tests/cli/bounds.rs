//! Schedules beyond what a machine can follow: an open loop at the highest
//! rate `-r` accepts with one connection, and scenarios at the highest
//! arrival rate. What cannot start is counted dropped in constant memory,
//! the run ends and reports, and signals still work. Assertions are on
//! counts and memory, never on how long anything took (the harness only
//! bounds the wait).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{assert_books_balance, http, lab, output, throng};
use throng_result::RunResult;

/// Peak memory a run may reach here; the unbounded queue reached 2 GB.
const MEMORY_BOUND: u64 = 200 << 20;

#[test]
fn an_open_loop_far_beyond_its_connections_drops_in_constant_memory() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    let r = http(&[
        &url,
        "-r",
        "100000000",
        "-d",
        "2s",
        "-c",
        "1",
        "--timeout",
        "1s",
        "-t",
        "1",
    ]);
    // Requests succeed: exit 0 by the README's rule, whatever was dropped.
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!(
        m.requests.attempted + m.dropped,
        200_000_000,
        "every scheduled start was sent or dropped"
    );
    assert!(m.requests.ok > 0, "the one connection carried requests");
    assert!(m.dropped > 190_000_000, "dropped {}", m.dropped);
    // The report's meaning of `dropped` names this cause, not only --timeout.
    assert!(r.stdout().contains("-c starts were already waiting"), "{}", r.stdout());
    assert_eq!(m.connections.attempted, 1, "-c 1 opens one connection");
    // Latency is measured from the intended start of what started.
    assert_eq!(m.phases["latency"].count(), m.requests.ok);
    assert!(
        res.generator.peak_rss_bytes < MEMORY_BOUND,
        "peak memory {} bytes",
        res.generator.peak_rss_bytes
    );
}

/// A scenario at `rate` per second for `duration`, one VU at most.
fn arrival_scenario(dir: &Path, target: &str, rate: &str, duration: &str) -> std::path::PathBuf {
    let file = dir.join("scenario.yaml");
    let yaml = format!(
        "target: {target}\nscenarios:\n  flood:\n    executor: constant-arrival-rate\n    rate: {rate}\n    \
         duration: {duration}\n    pre_allocated_vus: 1\n    max_vus: 1\n    graceful_stop: 1s\n    flow:\n      \
         - request: {{ name: hit, path: / }}\n"
    );
    std::fs::write(&file, yaml).unwrap();
    file
}

fn read(json: &Path) -> RunResult {
    RunResult::from_reader(std::fs::File::open(json).unwrap()).unwrap()
}

/// Iterations the scenario started (ended or cut off) and dropped.
fn started_and_dropped(r: &RunResult) -> (u64, u64) {
    let s = r.measurements.scenario.as_ref().expect("scenario figures");
    let hit = &s.tags["step:hit"];
    (hit.requests + hit.interrupted, s.dropped_iterations)
}

#[test]
fn a_scenario_at_the_highest_rate_drops_in_constant_memory() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = arrival_scenario(dir.path(), &format!("http://{}", server.addr()), "1e8", "1s");
    let json = dir.path().join("r.json");
    let out = output(
        throng()
            .arg("run")
            .arg(&file)
            .arg("--json")
            .arg(&json)
            .args(["-q", "-t", "2"]),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = read(&json);
    assert_books_balance(&r);
    let (started, dropped) = started_and_dropped(&r);
    assert_eq!(started + dropped, 100_000_000, "started + dropped = scheduled");
    assert!(
        started > 0 && dropped > 99_000_000,
        "started {started}, dropped {dropped}"
    );
    assert!(
        r.generator.peak_rss_bytes < MEMORY_BOUND,
        "peak memory {} bytes",
        r.generator.peak_rss_bytes
    );
}

#[test]
fn a_scenario_rate_above_the_limit_is_refused_like_dash_r() {
    let dir = tempfile::tempdir().unwrap();
    let file = arrival_scenario(dir.path(), "http://127.0.0.1:9", "1e15", "1s");
    let out = output(throng().arg("run").arg(&file).arg("-q"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("more than 100M per second"), "{err}");
    assert!(err.contains("scenario.yaml:5:"), "names the line of `rate:`: {err}");
}

/// Starts `cmd`, sends `signal` once `ready` returns, and waits (at most
/// 60 s) for it to end. `ready` waits for a state (connections up), not a
/// time: a busy machine can spend any fixed time starting the binary.
pub fn signal_after(cmd: &mut Command, ready: impl FnOnce(), signal: i32) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    ready();
    // SAFETY: kill takes no pointers; the child has not been reaped yet.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = waiter.join();
            panic!("{cmd:?} did not end within 60 s of signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    waiter.join().unwrap()
}

#[test]
fn sigterm_during_the_highest_scenario_rate_still_reports() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = arrival_scenario(dir.path(), &format!("http://{}", server.addr()), "1e8", "60s");
    let json = dir.path().join("r.json");
    let out = signal_after(
        throng()
            .arg("run")
            .arg(&file)
            .arg("--json")
            .arg(&json)
            .args(["-q", "-t", "2"]),
        // Requests under way (and, at this rate, starts dropped).
        || common::wait_established(server.addr().port(), 1),
        libc::SIGTERM,
    );
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = read(&json);
    assert!(r.interrupted);
    assert_books_balance(&r);
    let (started, dropped) = started_and_dropped(&r);
    assert!(started > 0 && dropped > 0, "started {started}, dropped {dropped}");
    assert!(
        r.generator.peak_rss_bytes < MEMORY_BOUND,
        "peak memory {} bytes",
        r.generator.peak_rss_bytes
    );
}
