//! `--data @-` reads stdin before the run; Ctrl-C (or SIGTERM) during
//! that read ends the command at once with the interrupted code (130),
//! whether stdin is a silent pipe or the parent ignored SIGINT.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::process::CommandExt as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{free_port, throng};

/// True when the process `pid` has a thread named `name` (bounded wait).
fn has_thread(pid: u32, name: &str, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                if std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name) {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn ctrl_c_while_reading_stdin_exits_interrupted_at_once() {
    let url = format!("http://127.0.0.1:{}/", free_port());
    for (signal, ignored) in [(libc::SIGINT, false), (libc::SIGINT, true), (libc::SIGTERM, false)] {
        let mut cmd = throng();
        cmd.args(["http", &url, "--data", "@-", "-n", "1", "-q"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: signal is async-signal-safe and takes no pointers; the
        // closure runs in the child between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let how = if ignored { libc::SIG_IGN } else { libc::SIG_DFL };
                libc::signal(libc::SIGINT, how);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        // Its stdin stays open and silent (held here) until the end.
        let _stdin = child.stdin.take();
        let pid = child.id();
        assert!(
            has_thread(pid, "throng-prerun", Duration::from_secs(20)),
            "the signal watch never started"
        );
        // SAFETY: kill takes no pointers; pid is our child, not yet waited for.
        unsafe { libc::kill(i32::try_from(pid).unwrap(), signal) };
        let until = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let status =
            status.unwrap_or_else(|| panic!("signal {signal} (SIGINT ignored: {ignored}) did not end the read"));
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(130), "signal {signal}: {status:?} {stderr}");
        assert!(stderr.contains("interrupted while reading --data @-"), "{stderr}");
    }
}
