//! A storm's `--trigger`: a shell command run once every connection is
//! established and held (e.g. restart the server to start a reconnect
//! wave), with its status and output kept for the report.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use throng_plan::Trigger;
use throng_result::TriggerRecord;

/// Longest a trigger command may run.
const LIMIT: Duration = Duration::from_secs(300);
/// Output kept from the command's end.
const KEEP: usize = 4096;

/// A trigger waiting for its moment, running, or done.
pub(crate) struct Pending {
    trigger: Trigger,
    wave: u64,
    all_up: Option<Instant>,
    running: Option<(JoinHandle<()>, Arc<Mutex<TriggerRecord>>)>,
}

impl Pending {
    /// A trigger that fires `trigger.after` once `wave` connections resolved.
    pub(crate) fn new(trigger: Trigger, wave: u64) -> Self {
        Pending {
            trigger,
            wave,
            all_up: None,
            running: None,
        }
    }

    /// Called every coordinator tick with the connections resolved so far.
    pub(crate) fn tick(&mut self, now: Instant, origin: Instant, resolved: u64) {
        if self.running.is_some() {
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
        let handle = std::thread::Builder::new()
            .name("throng-trigger".into())
            .spawn(move || run(&command, &slot))
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

    /// The record, after waiting (bounded) for a command still running.
    pub(crate) fn finish(self) -> TriggerRecord {
        match self.running {
            Some((handle, record)) => {
                let _ = handle.join();
                record.lock().map(|r| r.clone()).unwrap_or_default()
            }
            None => TriggerRecord {
                command: self.trigger.command,
                problem: Some(if self.all_up.is_some() {
                    "the run ended before --trigger-after had passed".into()
                } else {
                    "never ran: the run ended before every connection was established".into()
                }),
                ..TriggerRecord::default()
            },
        }
    }
}

/// Runs `sh -c command` with a time limit, filling `slot`.
fn run(command: &str, slot: &Mutex<TriggerRecord>) {
    let started = Instant::now();
    let child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
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
    let mut problem = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() > LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                problem = Some(format!("killed after {} s", LIMIT.as_secs()));
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                problem = Some(format!("waiting for it: {e}"));
                break None;
            }
        }
    };
    let text = rx.recv_timeout(Duration::from_secs(1)).unwrap_or_else(|_| {
        b"(output not read: a process it started still holds its stdout or stderr; redirect it)".to_vec()
    });
    let tail = &text[text.len().saturating_sub(KEEP)..];
    if let Ok(mut r) = slot.lock() {
        r.duration_s = started.elapsed().as_secs_f64();
        r.exit_code = status.and_then(|s| s.code());
        r.output = String::from_utf8_lossy(tail).into_owned();
        r.problem = problem;
    }
}
