//! A history of runs: one entry per run, each a short head line (label,
//! plan fingerprint, when it was added) and the compact result document,
//! so that a later run is compared with the last runs *of the same plan*
//! and a trend is drawn over them.
//!
//! ```text
//!  RunResult ─► fingerprint(plan) ─► Head { label, fingerprint, … }
//!                                        │ write_entry
//!                                        ▼
//!            ENTRY file:  line 1  head (JSON, at most MAX_HEAD_BYTES)
//!                         line 2  the result document (compact JSON)
//!                                        │ read_head (cheap: one short line)
//!                                        │ read_run  (checked as every result is: limits)
//!                                        ▼
//!                               compare --baseline, history report
//! ```
//!
//! The head is read alone first, so a directory of other plans' entries is
//! skipped without parsing their results, and a head that is not a short
//! line is refused after [`MAX_HEAD_BYTES`]. This module reads and writes
//! through `Read` and `Write`; the cli owns the directory.

use std::io::{BufRead, Read, Write};

use serde::{Deserialize, Serialize};

use crate::{Document, Plan, ResultError, RunResult, short};

/// The schema identifier of an entry's head line.
pub const HEAD_SCHEMA: &str = "throng.history-entry/v1";

/// The longest head line read: a label and a few fields.
pub const MAX_HEAD_BYTES: u64 = 16 << 10;

/// The longest label kept, in characters.
pub const MAX_LABEL_CHARS: usize = 200;

/// Top-level plan fields that do not define the load: how many threads or
/// processes carried it (the machine's cores and limits decide those), the
/// execution segment and start instant, random seeds drawn from the clock,
/// the file's path (its content counts), and the thresholds (changing a
/// limit does not change what was measured).
const NOT_THE_LOAD: [&str; 8] = [
    "threads",
    "workers",
    "procs",
    "segment",
    "start_at_unix_ms",
    "seed",
    "file",
    "thresholds",
];

/// The plan's fingerprint: 16 hex digits of a hash of every field that
/// defines the load (the command, targets, method, headers, body size,
/// protocol, connections, rate, duration or count, timeouts, the scenario's
/// content), and of none of [`NOT_THE_LOAD`]. Runs of one plan on other
/// machines share it. The hash is FNV-1a 64 over the plan's JSON form
/// (stable: fields are written in a fixed order).
pub fn fingerprint(plan: &Plan) -> String {
    // A plan always serializes (it is written into every result file);
    // were it ever to fail, every such plan would share one fingerprint
    // rather than stop a report.
    let mut value = serde_json::to_value(plan).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        for key in NOT_THE_LOAD {
            map.remove(key);
        }
    }
    let text = value.to_string();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What an entry says about itself, on its first line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// Always [`HEAD_SCHEMA`].
    pub schema: String,
    /// The user's name for the run (a commit, a build number), or its start.
    pub label: String,
    /// [`fingerprint`] of the run's plan.
    pub fingerprint: String,
    /// When it was added, ms since the Unix epoch.
    pub added_unix_ms: u64,
    /// The run's start, RFC 3339 UTC.
    pub started_at: String,
    /// The run's command and target, to name the plan: `http GET URL`.
    pub plan: String,
}

impl Head {
    /// The head of `run` added at `now_unix_ms` as `label` (clipped to
    /// [`MAX_LABEL_CHARS`], on one line; empty: the run's start).
    pub fn new(run: &RunResult, label: Option<&str>, now_unix_ms: u64) -> Head {
        let label = match label.map(str::trim) {
            Some(l) if !l.is_empty() => one_line(l, MAX_LABEL_CHARS),
            _ => run.started_at.clone(),
        };
        Head {
            schema: HEAD_SCHEMA.to_string(),
            label,
            fingerprint: fingerprint(&run.plan),
            added_unix_ms: now_unix_ms,
            started_at: run.started_at.clone(),
            plan: plan_name(&run.plan),
        }
    }
}

/// `http GET URL`, `storm URL`, `run FILE → URL`: what a person recognizes
/// a plan by (the fingerprint tells plans apart).
pub fn plan_name(plan: &Plan) -> String {
    let text = match plan {
        Plan::Http(p) if p.grpc.is_some() => format!("grpc {}", p.target.url),
        Plan::Http(p) => format!("http {} {}", p.method, p.target.url),
        Plan::Storm(p) => format!("storm {}", p.target.url),
        Plan::Run(p) => format!("run {} → {}", p.file, p.target.url),
        Plan::Mqtt(p) => format!("mqtt {} {}", p.target.url, p.topic),
    };
    one_line(&text, 120)
}

fn one_line(text: &str, max: usize) -> String {
    let mut s: String = short(text).chars().filter(|c| !c.is_control()).take(max + 1).collect();
    if s.chars().count() > max {
        s = s.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
    }
    s
}

/// Writes an entry: the head line, then `run` as compact JSON.
pub fn write_entry(head: &Head, run: &RunResult, mut w: impl Write) -> Result<(), ResultError> {
    serde_json::to_writer(&mut w, head)?;
    w.write_all(b"\n")?;
    serde_json::to_writer(&mut w, run)?;
    w.write_all(b"\n")?;
    w.flush()?;
    Ok(())
}

/// What is wrong with an entry's head.
fn bad_head(problem: impl Into<String>) -> ResultError {
    ResultError::Limit {
        field: "history entry head".to_string(),
        problem: problem.into(),
    }
}

/// Reads an entry's head line: at most [`MAX_HEAD_BYTES`], checked.
pub fn read_head(r: &mut impl BufRead) -> Result<Head, ResultError> {
    let mut line = Vec::new();
    r.by_ref().take(MAX_HEAD_BYTES + 1).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        return Err(bad_head(if line.len() as u64 > MAX_HEAD_BYTES {
            format!("is longer than {MAX_HEAD_BYTES} bytes")
        } else {
            "is not a line (the file ends before the result)".to_string()
        }));
    }
    let head: Head = serde_json::from_slice(&line)?;
    if head.schema != HEAD_SCHEMA {
        return Err(ResultError::Schema { found: head.schema });
    }
    let hex = head.fingerprint.len() == 16 && head.fingerprint.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex {
        return Err(bad_head(format!(
            "has the fingerprint '{}', not 16 hex digits",
            short(&head.fingerprint)
        )));
    }
    Ok(Head {
        label: one_line(&head.label, MAX_LABEL_CHARS),
        plan: one_line(&head.plan, 120),
        ..head
    })
}

/// Reads the result after the head (a single run; checked within
/// [`crate::limits`] as every result is), and checks that its plan has the
/// head's fingerprint.
pub fn read_run(head: &Head, r: impl Read) -> Result<RunResult, ResultError> {
    let run = match Document::from_reader(r)? {
        Document::Single(run) => *run,
        Document::Set(_) => {
            return Err(ResultError::Incompatible(
                "a history entry holds one run, not a set".into(),
            ));
        }
    };
    let actual = fingerprint(&run.plan);
    if actual != head.fingerprint {
        return Err(bad_head(format!(
            "says fingerprint {} but the run's plan has {actual}",
            head.fingerprint
        )));
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(args: throng_plan::HttpArgs) -> Plan {
        Plan::Http(throng_plan::HttpPlan::from_args(args).expect("a valid plan"))
    }

    fn args(url: &str) -> throng_plan::HttpArgs {
        throng_plan::HttpArgs {
            url: url.to_string(),
            cores: 2,
            requests: Some(100),
            ..throng_plan::HttpArgs::default()
        }
    }

    #[test]
    fn the_fingerprint_follows_the_load_not_the_machine() {
        let base = fingerprint(&http(args("http://127.0.0.1:8080/")));
        assert_eq!(base.len(), 16);
        assert_eq!(base, fingerprint(&http(args("http://127.0.0.1:8080/"))));
        // Other cores (so other threads), thresholds and a start instant:
        // the same load.
        let same = http(throng_plan::HttpArgs {
            cores: 8,
            thresholds: vec!["latency: p(99) < 1s".to_string()],
            ..args("http://127.0.0.1:8080/")
        });
        assert_eq!(fingerprint(&same), base);
        // Another path, method, count, connection count or protocol: another load.
        for other in [
            args("http://127.0.0.1:8080/other"),
            throng_plan::HttpArgs {
                method: Some("POST".to_string()),
                ..args("http://127.0.0.1:8080/")
            },
            throng_plan::HttpArgs {
                requests: Some(101),
                ..args("http://127.0.0.1:8080/")
            },
            throng_plan::HttpArgs {
                connections: Some(3),
                ..args("http://127.0.0.1:8080/")
            },
            throng_plan::HttpArgs {
                http2: true,
                ..args("http://127.0.0.1:8080/")
            },
        ] {
            assert_ne!(fingerprint(&http(other)), base);
        }
    }

    fn run_of(plan: Plan) -> RunResult {
        RunResult {
            schema: crate::SCHEMA.to_string(),
            throng_version: "0.0.0".to_string(),
            plan,
            started_at: crate::rfc3339(5_000),
            started_at_unix_ms: 5_000,
            duration_s: 1.0,
            coordinated_omission_free: false,
            interrupted: false,
            environment: crate::Environment::default(),
            generator: crate::Generator::default(),
            measurements: throng_metrics::Measurements::default(),
            parts: Vec::new(),
            notes: Vec::new(),
            trigger: None,
            thresholds: Vec::new(),
            segment: None,
            remote_write: None,
            otlp: None,
        }
    }

    #[test]
    fn an_entry_reads_back_and_a_lying_or_long_head_is_refused() {
        let run = run_of(http(args("http://127.0.0.1:8080/")));
        let head = Head::new(&run, Some("  abc1234\nx  "), 7);
        assert_eq!(head.label, "abc1234 x");
        assert_eq!(head.plan, "http GET http://127.0.0.1:8080/");
        let mut bytes = Vec::new();
        write_entry(&head, &run, &mut bytes).unwrap();
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 2, "two lines");
        let mut r = &bytes[..];
        let back = read_head(&mut r).unwrap();
        assert_eq!(back, head);
        assert_eq!(read_run(&back, r).unwrap(), run);

        // A head naming another plan than its run's.
        let lying = Head {
            fingerprint: "0123456789abcdef".to_string(),
            ..head.clone()
        };
        let mut bytes = Vec::new();
        write_entry(&lying, &run, &mut bytes).unwrap();
        let mut r = &bytes[..];
        let back = read_head(&mut r).unwrap();
        assert!(read_run(&back, r).unwrap_err().to_string().contains("fingerprint"));

        // A first line without end: refused after MAX_HEAD_BYTES.
        let endless = vec![b'x'; MAX_HEAD_BYTES as usize * 4];
        let e = read_head(&mut &endless[..]).unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
        let e = read_head(&mut &b"{\"schema\":\"x\"}\n"[..]).unwrap_err().to_string();
        assert!(e.contains("not a throng result") || e.contains("schema"), "{e}");
        let other = Head {
            fingerprint: "../../etc".to_string(),
            ..head
        };
        let line = format!("{}\n", serde_json::to_string(&other).unwrap());
        assert!(read_head(&mut line.as_bytes()).is_err());
    }

    #[test]
    fn no_label_is_the_start_and_a_long_one_is_clipped() {
        let run = run_of(http(args("http://127.0.0.1:8080/")));
        assert_eq!(Head::new(&run, None, 0).label, run.started_at);
        assert_eq!(Head::new(&run, Some(" "), 0).label, run.started_at);
        let long = "é".repeat(10_000);
        let l = Head::new(&run, Some(&long), 0).label;
        assert_eq!(l.chars().count(), MAX_LABEL_CHARS);
        assert!(l.ends_with('…'));
    }
}
