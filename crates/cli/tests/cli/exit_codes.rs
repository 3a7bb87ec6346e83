//! One exit-code rule for every command (README, "Exit codes"): 0 ok, 1 the
//! run failed, 2 usage or configuration, 99 thresholds failed, 130
//! interrupted. Each command is driven into each outcome it can have,
//! against the lab server on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{free_port, lab, output, throng};

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `throng ARGS`, and asserts its exit code (and, for errors, that
/// stderr holds `needle`).
fn expect(args: &[&str], want: i32, needle: &str) -> Output {
    let out = output(throng().args(args));
    assert_eq!(
        code(&out),
        want,
        "throng {args:?}\nstdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(needle),
        "throng {args:?}: '{needle}' not in {}",
        stderr(&out)
    );
    out
}

/// Waits (at most 60 s) until process `pid` has a SIGINT handler: its
/// `SigCgt` mask in /proc has bit 1 (SIGINT is signal 2).
fn catches_sigint(pid: u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0);
        if caught {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{pid} caught no SIGINT within 60 s:\n{status}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `cmd` in a process group of its own, sends the group SIGINT after
/// `after` (as Ctrl-C in a terminal does; an early signal still interrupts
/// it: the signal handler is installed before any wait), and waits at most
/// a minute for it to end.
pub(crate) fn interrupt(cmd: &mut Command, after: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    let child = cmd
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `after` counts from when throng catches SIGINT: a busy machine can
    // spend any fixed time starting it, and a signal before then kills it.
    catches_sigint(child.id());
    std::thread::sleep(after);
    let sent = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(sent.success());
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            panic!("{cmd:?} did not end within 60 s of SIGINT");
        }
    }
}

/// A time 60 s ahead, for `--start-at`.
fn a_minute_ahead() -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() + 60_000;
    ms.to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn http() {
    let lab = lab(None);
    let ok = format!("http://{}/", lab.addr());
    let bad_status = format!("http://{}/status/400", lab.addr());
    let dead = format!("http://127.0.0.1:{}/", free_port());
    expect(&["http", &ok, "-n", "20", "-c", "2", "-q"], 0, "");
    expect(
        &["http", &dead, "-n", "5", "-c", "1", "-q"],
        1,
        "every request failed (5 refused)",
    );
    expect(
        &["http", &bad_status, "-n", "5", "-c", "1", "-q"],
        1,
        "every request failed (5 check_failed)",
    );
    // Usage: flags, a server name TLS cannot send (found by the engine).
    expect(&["http", &ok, "-r", "0", "-q"], 2, "--rate");
    let https = format!("https://{}/", lab.addr());
    expect(
        &["http", &https, "--sni", "not a name", "--insecure", "-n", "1", "-q"],
        2,
        "cannot be sent as a TLS server name",
    );
    expect(
        &["http", &ok, "-n", "1", "-q", "--json", "/nonexistent-dir/r.json"],
        2,
        "--json /nonexistent-dir/r.json",
    );
    // Ctrl-C while waiting for --start-at.
    let out = interrupt(
        throng().args(["http", &ok, "-n", "1", "-q", "--start-at", &a_minute_ahead()]),
        Duration::from_millis(700),
    );
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted while waiting for --start-at"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn storm() {
    let lab = lab(None);
    let ok = format!("http://{}/", lab.addr());
    let bad_status = format!("http://{}/status/400", lab.addr());
    let dead = format!("tcp://127.0.0.1:{}", free_port());
    expect(&["storm", &ok, "-n", "10", "-q"], 0, "");
    expect(
        &["storm", &dead, "-n", "5", "-q"],
        1,
        "every connection failed (5 refused)",
    );
    // Every connection is established, every request gets a 400: as http.
    expect(
        &["storm", &bad_status, "-n", "5", "-q"],
        1,
        "every request failed (5 check_failed)",
    );
    // A pattern that is not a regular expression, found at plan validation.
    let tcp = format!("tcp://{}", lab.addr());
    let out = expect(
        &["storm", &tcp, "-n", "1", "-q", "--send", "x", "--expect", "*"],
        2,
        "--expect: '*' is not a regular expression",
    );
    assert!(!stderr(&out).contains("could not start"), "{}", stderr(&out));
    expect(
        &["storm", &ok, "-n", "1", "-q", "--html", "/nonexistent-dir/r.html"],
        2,
        "--html",
    );
    let out = interrupt(
        throng().args(["storm", &ok, "-n", "1", "-q", "--start-at", &a_minute_ahead()]),
        Duration::from_millis(700),
    );
    assert_eq!(code(&out), 130, "{}", stderr(&out));
}

const SCENARIO: &str = "target: TARGET\nscenarios:\n  s:\n    executor: EXECUTOR\n    flow:\n      - request: { name: r, path: PATH }\nTHRESHOLDS";

fn scenario(dir: &Path, target: &str, executor: &str, path: &str, thresholds: &str) -> String {
    let text = SCENARIO
        .replace("TARGET", target)
        .replace("EXECUTOR", executor)
        .replace("PATH", path)
        .replace("THRESHOLDS", thresholds);
    write(dir, "s.yaml", &text).display().to_string()
}

#[test]
fn run() {
    let lab = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let target = format!("http://{}", lab.addr());
    let few = "shared-iterations\n    vus: 2\n    iterations: 10";
    let f = scenario(d, &target, few, "/", "");
    expect(&["run", &f, "-q"], 0, "");
    let f = scenario(d, &target, few, "/status/400", "");
    expect(&["run", &f, "-q"], 1, "every request failed (10 check_failed)");
    let dead = format!("http://127.0.0.1:{}", free_port());
    let f = scenario(d, &dead, few, "/", "");
    expect(&["run", &f, "-q"], 1, "every request failed");
    let never = "thresholds:\n  requests:\n    - count > 1000000000\n";
    let f = scenario(d, &target, few, "/", never);
    let out = expect(&["run", &f, "-q"], 99, "1 of 1 thresholds failed");
    assert!(stdout(&out).contains("FAILED (exit code 99)"), "{}", stdout(&out));
    // Both said, 99 decides (README: 2, 130, 99, 1 in that order).
    let f = scenario(d, &dead, few, "/", never);
    let out = expect(&["run", &f, "-q"], 99, "1 of 1 thresholds failed");
    assert!(stderr(&out).contains("every request failed"), "{}", stderr(&out));
    // More VUs than descriptors: found by the engine at start, a usage error.
    let f = scenario(d, &target, "constant-vus\n    vus: 1000000\n    duration: 1s", "/", "");
    let out = expect(&["run", &f, "-q"], 2, "VUs at once");
    // The file is named once, by the command (the engine's message does not repeat it).
    assert_eq!(stderr(&out).matches(f.as_str()).count(), 1, "{}", stderr(&out));
    expect(
        &["run", "/nonexistent-dir/s.yaml", "-q"],
        2,
        "cannot read the scenario file",
    );
    let f = scenario(d, &target, few, "/", "");
    expect(
        &["run", &f, "-q", "--junit", "/nonexistent-dir/j.xml"],
        2,
        "--junit /nonexistent-dir/j.xml",
    );
    // Interrupted: 130, and the failed thresholds do not claim exit 99.
    let long = "constant-vus\n    vus: 2\n    duration: 60s";
    let f = scenario(d, &target, long, "/", never);
    let out = interrupt(throng().args(["run", &f, "-q"]), Duration::from_millis(1500));
    assert_eq!(code(&out), 130, "{}{}", stdout(&out), stderr(&out));
    assert!(!stdout(&out).contains("exit code 99"), "{}", stdout(&out));
    assert!(stdout(&out).contains("interrupted"), "{}", stdout(&out));
    assert!(!stderr(&out).contains("thresholds failed"), "{}", stderr(&out));
}

#[test]
fn sweep() {
    let lab = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = write(
        d,
        "ok.yaml",
        &format!(
            "parameters:\n  n: [2, 3]\nrun: storm tcp://{} --count {{{{n}}}}\n",
            lab.addr()
        ),
    );
    expect(&["sweep", ok.to_str().unwrap()], 0, "");
    let dead = write(
        d,
        "dead.yaml",
        &format!(
            "parameters:\n  n: [2]\nrun: storm tcp://127.0.0.1:{} --count {{{{n}}}}\n",
            free_port()
        ),
    );
    expect(&["sweep", dead.to_str().unwrap()], 1, "");
    let bad = write(d, "bad.yaml", "parameters: {n: [1]}\nrun: storm tcp://x:1 -n {{m}}\n");
    expect(&["sweep", bad.to_str().unwrap()], 2, "{{m}} is not a parameter");
    expect(
        &["sweep", ok.to_str().unwrap(), "--json", "/nonexistent-dir/s.json"],
        2,
        "--json",
    );
    // Ctrl-C during a cell: the cell's run and the sweep both stop.
    let long = write(
        d,
        "long.yaml",
        &format!(
            "parameters:\n  n: [2, 3]\nrun: storm tcp://{} --count {{{{n}}}} --hold 60s\n",
            lab.addr()
        ),
    );
    let out = interrupt(
        throng().args(["sweep", long.to_str().unwrap()]),
        Duration::from_millis(1500),
    );
    assert_eq!(code(&out), 130, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("stopping after the current cell"),
        "{}",
        stderr(&out)
    );
}

/// A result file of a small http run against `lab`.
fn result(dir: &Path, name: &str, url: &str, extra: &[&str]) -> String {
    let path = dir.join(name);
    let out = output(
        throng()
            .args(["http", url, "-n", "20", "-c", "2", "-q", "--json"])
            .arg(&path)
            .args(extra),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    path.display().to_string()
}

#[test]
fn merge_report_compare() {
    let lab = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = format!("http://{}/", lab.addr());
    let a = result(d, "a.json", &url, &[]);
    let b = result(d, "b.json", &url, &[]);
    let half = result(d, "half.json", &url, &["--segment", "0:1/2"]);
    let merged = d.join("m.json").display().to_string();
    let not_json = write(d, "x.json", "not json").display().to_string();

    expect(&["merge", &a, &b, "-o", &merged], 0, "merged 2 results");
    // A segment missing: the file is written, the exit says it is partial.
    expect(&["merge", &half, "-o", &merged], 1, "--allow-partial");
    expect(&["merge", &a, &not_json, "-o", &merged], 2, "x.json");
    expect(
        &["merge", &a, "-o", "/nonexistent-dir/m.json"],
        2,
        "--output /nonexistent-dir/m.json",
    );

    expect(&["report", &a], 0, "");
    expect(&["report", "/nonexistent-dir/a.json"], 2, "cannot read");
    expect(&["report", &not_json], 2, "x.json");
    expect(&["report", &a, "--html", "/nonexistent-dir/r.html"], 2, "--html");

    expect(&["compare", &a, &b], 0, "");
    expect(&["compare", &a], 2, "give two files");
    expect(&["compare", &a, &not_json], 2, "x.json");
    expect(&["compare", &a, &b, "--html", "/nonexistent-dir/c.html"], 2, "--html");
}

/// Every output path is checked before anything runs: a mistyped directory
/// costs no run (no connection reaches the target).
#[test]
fn outputs_are_checked_before_the_run() {
    // Never accepts: a connection throng made would wait in the backlog.
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", target.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/out");
    let m = missing.to_str().unwrap();
    for flag in ["--json", "--html", "--csv", "--csv-requests", "--hdr-log"] {
        let out = expect(&["http", &url, "-d", "30s", "-c", "1", "-q", flag, m], 2, flag);
        assert!(stderr(&out).contains(m), "{flag}: {}", stderr(&out));
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
        let accepted = target.accept();
        assert!(
            matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{flag}: the run started before the check: {accepted:?}"
        );
    }
    // The check creates nothing and truncates nothing.
    assert!(!missing.exists());
    let existing = dir.path().join("keep.json");
    std::fs::write(&existing, "keep").unwrap();
    let e = existing.to_str().unwrap();
    let out = output(throng().args(["http", &url, "-n", "1", "-q", "--timeout", "1s", "--json", e]));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        std::fs::read_to_string(&existing).unwrap().starts_with('{'),
        "the run wrote its result"
    );
    expect(
        &["http", &url, "-n", "1", "-q", "--html", dir.path().to_str().unwrap()],
        2,
        "is a directory",
    );
}

/// Runs `throng ARGS` with stdout and stderr both pipes that nobody reads,
/// closed before throng writes (as `throng … 2>&1 | head -1` leaves them):
/// its exit code.
fn with_closed_pipes(args: &[&str]) -> i32 {
    let mut child = throng()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("throng {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A closed pipe is not an error: the report and every warning, hint and
/// error line are lost, and the exit code is the one the run earned (a
/// panic on the first line written to a closed stderr made it 101).
#[test]
fn closed_pipes_change_no_exit_code() {
    let server = lab(None);
    let url = format!("http://{}/", server.addr());
    // A warning after the report: an open loop that dropped its schedule.
    let slow = format!("{url}delay/50");
    assert_eq!(
        with_closed_pipes(&["http", &slow, "-r", "200", "-c", "1", "-d", "1s"]),
        0
    );
    // A failed threshold, said on stderr.
    assert_eq!(
        with_closed_pipes(&["http", &url, "-n", "20", "--threshold", "latency: p(99) < 1us"]),
        99
    );
    // Every request refused, with the hint on stderr.
    let closed = format!("http://127.0.0.1:{}/", free_port());
    assert_eq!(with_closed_pipes(&["http", &closed, "-n", "5"]), 1);
    // A usage error's one line.
    assert_eq!(with_closed_pipes(&["http", "not a url"]), 2);
}

/// `--expect-status` lists that are no statuses are usage errors (2) that
/// say why; a class past 5xx overflowed a u16 (a panic, 101, in debug
/// builds). No server: the flag is refused before any traffic.
#[test]
fn expect_status_lists_past_the_statuses_are_usage_errors() {
    let target = format!("http://127.0.0.1:{}/", free_port());
    let long = "9".repeat(70_000);
    let cases: &[(&str, &str)] = &[
        (
            "700xx",
            "'700xx' is not a status class: statuses run from 100 to 599, so classes from 1xx to 5xx",
        ),
        (
            "999xx",
            "'999xx' is not a status class: statuses run from 100 to 599, so classes from 1xx to 5xx",
        ),
        ("9xx99", "'9xx99' is not a status, range or class"),
        ("65536", "'65536': statuses run from 100 to 599"),
        ("200,,300", "an item of the list is empty"),
        (&long, "statuses run from 100 to 599"),
    ];
    for (list, needle) in cases {
        let out = expect(&["http", &target, "-n", "1", "-q", "--expect-status", list], 2, needle);
        let err = stderr(&out);
        assert!(err.contains("--expect-status") && !err.contains("panicked"), "{err}");
    }
}

/// Another tool's habit gets throng's equivalent, exit 2, and never clap's
/// "to pass '-z' as a value, use '-- -z'" tip.
#[test]
fn other_tools_flags_name_throngs_equivalent() {
    let url = "http://127.0.0.1:9/";
    let cases: [(&[&str], &str); 9] = [
        (&["http", url, "-q", "100"], "-r 100"),
        (&["http", url, "-z", "3s"], "throng's is -d"),
        (&["http", url, "-d", "name=x"], "--data"),
        (&["http", url, "-k", "-n", "1"], "--no-keepalive"),
        (&["http", url, "--latency"], "always prints the latency"),
        (&["http", url, "--no-tui"], "-q hides it"),
        (&["http", url, "-o", "json"], "--json FILE"),
        (&["run", "x.yaml", "--vus", "10"], "--scale"),
        (&["grpc", url, "-z", "3s"], "throng's is -d"),
    ];
    for (args, needle) in cases {
        let out = expect(args, 2, needle);
        assert!(!stderr(&out).contains("use '--"), "throng {args:?}: {}", stderr(&out));
    }
    // Not a habit: a real typo keeps clap's suggestion.
    expect(&["http", url, "--ratee", "5"], 2, "a similar argument exists: '--rate'");
}

/// A 70,000-character value echoed by an error (clap's own, a flag's
/// parser, an SLO, a stray word after a switch) is cut to a readable line
/// that still names the flag and ends with the advice. No server.
#[test]
fn a_70000_character_value_is_cut_in_every_usage_error() {
    let target = format!("http://127.0.0.1:{}/", free_port());
    let long = "a".repeat(70_000);
    let cases: [(&[&str], &str, &str); 5] = [
        (&["http", &target, "--rate", &long], "--rate", "help')"),
        (&["http", &target, "--duration", &long], "--duration", "help')"),
        (
            &["http", &target, "--llm", "openai", "--slo", &long],
            "--slo",
            "itl < 50ms'",
        ),
        (&["storm", &target, "--keepalive", &long], "--keepalive", "help')"),
        (&["grpc", &target, "--plaintext", &long], "throng grpc --help", "help')"),
    ];
    for (args, needle, advice) in cases {
        let out = expect(args, 2, needle);
        let err = stderr(&out);
        assert!(err.len() < 2_000, "{} bytes: {}", err.len(), &err[..2_000]);
        assert!(err.contains("more characters]"), "{err}");
        assert!(err.trim_end().ends_with(advice), "{err}");
    }
    let out = expect(&["http", &target, "-n", "1", "--method", &long], 2, "--method");
    let err = stderr(&out);
    assert!(
        err.contains("a method of 70000 bytes is no HTTP method") && err.len() < 300,
        "{err}"
    );
}
