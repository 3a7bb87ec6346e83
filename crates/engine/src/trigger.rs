//! A storm's `--trigger`: a shell command run once every connection is
//! established and held (e.g. restart the server to start a reconnect
//! wave), with its status and output kept for the report.
//!
//! The command runs in its own process group, so that whatever it starts
//! can be ended with it: past `--trigger-timeout`, or when the run is
//! interrupted, the group gets SIGTERM, then SIGKILL after a grace period.
//! A command that ends by itself is left alone, and so is anything it left
//! running (a restarted server must outlive its trigger).

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use throng_plan::{Trigger, format_duration};
use throng_result::TriggerRecord;

/// Output kept from the command's end.
const KEEP: usize = 4096;
/// How long the group has between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// How often the runner looks at the command.
const POLL: Duration = Duration::from_millis(20);

/// A trigger waiting for its moment, running, or done.
pub(crate) struct Pending {
    trigger: Trigger,
    wave: u64,
    all_up: Option<Instant>,
    running: Option<(JoinHandle<()>, Arc<Mutex<TriggerRecord>>)>,
    /// Set when the run is interrupted: the command is killed, or never runs.
    interrupted: Arc<AtomicBool>,
}

impl Pending {
    /// A trigger that fires `trigger.after` once `wave` connections resolved.
    pub(crate) fn new(trigger: Trigger, wave: u64) -> Self {
        Pending {
            trigger,
            wave,
            all_up: None,
            running: None,
            interrupted: Arc::default(),
        }
    }

    /// The run was interrupted: end the command (its whole group) now.
    pub(crate) fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
    }

    /// Called every coordinator tick with the connections resolved so far.
    pub(crate) fn tick(&mut self, now: Instant, origin: Instant, resolved: u64) {
        if self.running.is_some() || self.interrupted.load(Ordering::SeqCst) {
            return;
        }
        if self.all_up.is_none() && resolved >= self.wave {
            self.all_up = Some(now);
        }
        let Some(up) = self.all_up else { return };
        if now < up + self.trigger.after {
            return;
        }
        let record = Arc::new(Mutex::new(TriggerRecord {
            command: self.trigger.command.clone(),
            fired_at_s: Some(now.saturating_duration_since(origin).as_secs_f64()),
            ..TriggerRecord::default()
        }));
        let slot = Arc::clone(&record);
        let command = self.trigger.command.clone();
        let timeout = self.trigger.timeout;
        let interrupted = Arc::clone(&self.interrupted);
        let handle = std::thread::Builder::new()
            .name("throng-trigger".into())
            .spawn(move || run(&command, timeout, &interrupted, &slot))
            .ok();
        match handle {
            Some(h) => self.running = Some((h, record)),
            None => {
                if let Ok(mut r) = record.lock() {
                    r.problem = Some("could not start a thread to run it".into());
                }
            }
        }
    }

    /// The record, after waiting for a command still running: at most its
    /// timeout and the kill grace, or only the grace when `interrupted`.
    pub(crate) fn finish(self, interrupted: bool) -> TriggerRecord {
        if interrupted {
            self.interrupt();
        }
        match self.running {
            Some((handle, record)) => {
                let _ = handle.join();
                record.lock().map(|r| r.clone()).unwrap_or_default()
            }
            None => TriggerRecord {
                command: self.trigger.command,
                problem: Some(if interrupted {
                    "never ran: the run was interrupted first".into()
                } else if self.all_up.is_some() {
                    "the run ended before --trigger-after had passed".into()
                } else {
                    "never ran: the run ended before every connection was established".into()
                }),
                ..TriggerRecord::default()
            },
        }
    }
}

/// Why the runner ended the command.
enum Ended {
    /// It exited or was killed by someone else.
    Itself(ExitStatus),
    /// It ran past its timeout.
    TimedOut,
    /// The run was interrupted.
    Interrupted,
}

/// Runs `sh -c command` in its own process group, bounded by `timeout` and
/// by `interrupted`, filling `slot`.
fn run(command: &str, timeout: Duration, interrupted: &AtomicBool, slot: &Mutex<TriggerRecord>) {
    let started = Instant::now();
    let child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: killing the group ends whatever the shell started.
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            if let Ok(mut r) = slot.lock() {
                r.problem = Some(format!("cannot run sh: {e}"));
            }
            return;
        }
    };
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    // A command that starts a server in the background may leave it
    // holding the pipes: read on a thread and stop waiting soon after the
    // shell itself exits.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut text);
        }
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut text);
        }
        let _ = tx.send(text);
    });
    let ended = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(Ended::Itself(s)),
            Ok(None) if interrupted.load(Ordering::SeqCst) => break Ok(Ended::Interrupted),
            Ok(None) if started.elapsed() >= timeout => break Ok(Ended::TimedOut),
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => break Err(format!("waiting for it: {e}")),
        }
    };
    let (exit_code, problem) = match ended {
        Ok(Ended::Itself(s)) => (
            s.code(),
            s.signal().map(|sig| format!("killed by {}", signal_name(sig))),
        ),
        Ok(Ended::TimedOut) => {
            let how = kill_group(&mut child);
            (
                None,
                Some(format!("timed out after {}: {how}", format_duration(timeout))),
            )
        }
        Ok(Ended::Interrupted) => {
            let how = kill_group(&mut child);
            let ran = format_duration(Duration::from_millis(started.elapsed().as_millis() as u64));
            (None, Some(format!("interrupted with the run after {ran}: {how}")))
        }
        Err(e) => {
            kill_group(&mut child);
            (None, Some(e))
        }
    };
    let text = rx.recv_timeout(Duration::from_secs(1)).unwrap_or_else(|_| {
        b"(output not read: a process it started still holds its stdout or stderr; redirect it)".to_vec()
    });
    let tail = &text[text.len().saturating_sub(KEEP)..];
    if let Ok(mut r) = slot.lock() {
        r.duration_s = started.elapsed().as_secs_f64();
        r.exit_code = exit_code;
        r.output = String::from_utf8_lossy(tail).into_owned();
        r.problem = problem;
    }
}

/// Ends the command's process group: SIGTERM, then SIGKILL if the shell
/// has not exited after [`TERM_GRACE`]. Says what it took.
fn kill_group(child: &mut Child) -> String {
    let Ok(pgid) = i32::try_from(child.id()) else {
        let _ = child.kill();
        let _ = child.wait();
        return "killed".into();
    };
    signal_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + TERM_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            // The shell is gone; its group may not be: make sure.
            signal_group(pgid, libc::SIGKILL);
            return "its process group was sent SIGTERM".into();
        }
        std::thread::sleep(POLL);
    }
    signal_group(pgid, libc::SIGKILL);
    let _ = child.wait();
    format!(
        "its process group was sent SIGTERM, then SIGKILL {} later",
        format_duration(TERM_GRACE)
    )
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill takes no pointers; the group is the one the child leads
    // (process_group(0)), and the child is not reaped before the SIGTERM.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// `SIGTERM (15)` and the like, for the report.
fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    format!("{name} (signal {sig})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(command: &str, timeout: Duration) -> Trigger {
        Trigger {
            after: Duration::ZERO,
            command: command.into(),
            timeout,
        }
    }

    /// Fires the trigger and returns its record once it ended by itself.
    fn fire(command: &str, timeout: Duration) -> TriggerRecord {
        let mut p = Pending::new(trigger(command, timeout), 0);
        let now = Instant::now();
        p.tick(now, now, 0);
        p.finish(false)
    }

    #[test]
    fn a_command_that_exits_reports_its_code_and_output() {
        let r = fire("echo hello; exit 3", Duration::from_secs(30));
        assert_eq!(r.exit_code, Some(3), "{r:?}");
        assert_eq!(r.problem, None);
        assert_eq!(r.output.trim(), "hello");
    }

    #[test]
    fn a_command_killed_by_a_signal_says_which() {
        let r = fire("kill -TERM $$", Duration::from_secs(30));
        assert_eq!(r.exit_code, None, "{r:?}");
        assert_eq!(r.problem.as_deref(), Some("killed by SIGTERM (signal 15)"));
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_its_group() {
        // The shell ignores SIGTERM; its child does not: SIGKILL ends the shell.
        let r = fire("trap '' TERM; sleep 1003 & wait; wait", Duration::from_millis(200));
        assert_eq!(r.exit_code, None, "{r:?}");
        let problem = r.problem.unwrap_or_default();
        assert!(problem.starts_with("timed out after 200ms: "), "{problem}");
        assert!(problem.contains("then SIGKILL 2s later"), "{problem}");
    }

    #[test]
    fn an_interrupt_ends_the_command_and_a_pending_trigger_never_runs() {
        let mut p = Pending::new(trigger("sleep 1004", Duration::from_secs(600)), 0);
        let now = Instant::now();
        p.tick(now, now, 0);
        std::thread::sleep(Duration::from_millis(100));
        let r = p.finish(true);
        let problem = r.problem.unwrap_or_default();
        assert!(problem.starts_with("interrupted with the run after "), "{problem}");
        assert!(problem.ends_with("its process group was sent SIGTERM"), "{problem}");

        let waiting = Pending::new(trigger("true", Duration::from_secs(1)), 10);
        let r = waiting.finish(true);
        assert_eq!(r.fired_at_s, None);
        assert_eq!(r.problem.as_deref(), Some("never ran: the run was interrupted first"));
    }
}
