//! Processes throng starts end with it: a storm's worker processes and
//! `serve --procs` children die with a SIGKILLed parent, and a `--trigger`
//! command is bounded by `--trigger-timeout` and killed, with its whole
//! process group, on timeout and on Ctrl-C. Every wait is bounded; nothing asserts how long
//! anything took.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, throng, wait_listening};

/// Live (not zombie) processes whose parent is `ppid`.
fn children_of(ppid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((state, parent)) = stat(pid)
            && parent == ppid
            && state != 'Z'
        {
            out.push(pid);
        }
    }
    out
}

/// A process's state letter and parent, from /proc/PID/stat (None: gone).
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Waits (at most `limit`) until `done` holds; returns whether it did.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// A `throng serve` process, stopped on drop.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve() -> (Serve, u16) {
    let port = free_port();
    let child = throng()
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(([127, 0, 0, 1], port).into());
    (Serve(child), port)
}

/// Starts `parent`, waits for its `kids` child processes, SIGKILLs it and
/// asserts every child is gone soon after (killing survivors first).
fn children_die_with_a_killed_parent(mut parent: Command, kids: usize) {
    let mut parent = parent.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let pid = parent.id();
    let mut found = Vec::new();
    let started = wait_until(Duration::from_secs(30), || {
        found = children_of(pid);
        found.len() >= kids
    });
    if !started {
        let _ = parent.kill();
        let _ = parent.wait();
        for k in &found {
            // SAFETY: kill takes no pointers.
            unsafe { libc::kill(*k as i32, libc::SIGKILL) };
        }
        panic!("the parent did not start {kids} child processes: {found:?}");
    }
    parent.kill().unwrap();
    parent.wait().unwrap();
    let gone = wait_until(Duration::from_secs(20), || found.iter().all(|&k| !alive(k)));
    let left: Vec<u32> = found.iter().copied().filter(|&k| alive(k)).collect();
    for k in &left {
        // Clean up before failing.
        // SAFETY: kill takes no pointers.
        unsafe { libc::kill(*k as i32, libc::SIGKILL) };
    }
    assert!(gone, "child processes outlived their SIGKILLed parent: {left:?}");
}

#[test]
fn storm_worker_processes_die_with_a_killed_parent() {
    let (_server, port) = serve();
    let mut storm = throng();
    storm
        .args([
            "storm",
            &format!("tcp://127.0.0.1:{port}"),
            "-n",
            "20",
            "--hold",
            "120s",
        ])
        .args(["--procs", "2", "--workers", "1", "-q"]);
    children_die_with_a_killed_parent(storm, 2);
}

#[test]
fn serve_processes_die_with_a_killed_parent() {
    let port = free_port();
    let mut serve = throng();
    serve.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--threads",
        "1",
        "--hash-threads",
        "1",
        "--procs",
        "3",
    ]);
    children_die_with_a_killed_parent(serve, 2);
}

/// Processes running `sleep SECONDS` (the trigger's command), anywhere.
fn sleepers(seconds: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.len() >= 2 && args[0].ends_with(b"sleep") && args[1] == seconds.as_bytes() && alive(pid) {
            out.push(pid);
        }
    }
    out
}

fn storm_with_trigger(port: u16, json: &std::path::Path, hold: &str, trigger: &str, extra: &[&str]) -> Command {
    let mut cmd = throng();
    cmd.args(["storm", &format!("tcp://127.0.0.1:{port}"), "-n", "5", "--hold", hold])
        .args(["--procs", "1", "--workers", "1", "--trigger", trigger])
        .args(extra)
        .arg("--json")
        .arg(json);
    cmd
}

#[test]
fn a_trigger_past_its_timeout_is_killed_and_reported() {
    let (_server, port) = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // A unique duration to find its sleep by; a shell that runs it as a
    // child (not exec) so that only killing the group ends both.
    let out = common::output(&mut storm_with_trigger(
        port,
        &json,
        "3s",
        "sleep 1001; echo never",
        &["--trigger-timeout", "1s"],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = throng_result::RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    let violations = common::schema_violations(&json);
    assert!(violations.is_empty(), "schema violations: {violations:#?}");
    let t = r.trigger.as_ref().expect("a trigger record");
    assert!(t.fired_at_s.is_some(), "{t:?}");
    assert_eq!(t.exit_code, None, "{t:?}");
    let problem = t.problem.as_deref().unwrap_or_default();
    assert!(problem.contains("timed out after 1s"), "{t:?}");
    assert!(stdout.contains("timed out after 1s"), "{stdout}");
    assert!(
        wait_until(Duration::from_secs(10), || sleepers("1001").is_empty()),
        "the trigger's sleep survived: {:?}",
        sleepers("1001")
    );
}

#[test]
fn sigint_during_a_trigger_ends_the_run_and_the_trigger() {
    let (_server, port) = serve();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = storm_with_trigger(port, &json, "60s", "sleep 1002; echo never", &["-q"]);
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    // Wait for the trigger to run, then interrupt throng (not its group).
    let fired = wait_until(Duration::from_secs(30), || !sleepers("1002").is_empty());
    // SAFETY: kill takes no pointers; the child has not been reaped.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let ended = wait_until(Duration::from_secs(60), || waiter.is_finished());
    if !ended {
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let out = waiter.join().unwrap();
    for k in sleepers("1002") {
        // SAFETY: as above; clean up before failing.
        unsafe { libc::kill(k as i32, libc::SIGKILL) };
    }
    assert!(fired, "the trigger never ran");
    assert!(ended, "throng did not end within 60 s of SIGINT");
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = throng_result::RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert!(r.interrupted);
    let t = r.trigger.as_ref().expect("a trigger record");
    assert!(
        t.problem.as_deref().unwrap_or_default().contains("interrupted"),
        "{t:?}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || sleepers("1002").is_empty()),
        "the trigger's sleep survived SIGINT"
    );
}
