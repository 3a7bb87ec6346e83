//! The one place where a result document's numbers are checked when it is
//! read (and when a merge makes one): every number that a report would turn
//! into an allocation, a loop or a sum is held to a limit here, so that a
//! damaged or hostile file is refused with one line naming the field — not
//! a panic, an abort or gigabytes of memory.
//!
//! ```text
//!  JSON ─► check_histograms (every `hdr`, every per-second histogram) ─► typed RunResult ─► check_run ─► reports
//! ```
//!
//! The limits are documented for users in `docs/RESULTS.md`.

use serde_json::Value;
use throng_metrics::{Hist, Measurements, Outcomes};

use crate::error::ResultError;
use crate::run::RunResult;

/// The longest run (and the widest span of a merge) a result may cover:
/// 366 days, in seconds.
pub const MAX_DURATION_S: f64 = 31_622_400.0;

/// The latest start a result may have: 3000-01-01T00:00:00Z, ms since the
/// Unix epoch.
pub const MAX_UNIX_MS: u64 = 32_503_680_000_000;

/// The most memory the histograms one document holds decoded may take
/// together: 256 MiB (a long scenario run with hundreds of tags takes a few
/// tens of MB). Per-second histograms stay encoded and are decoded one at a
/// time, so they are checked one by one but do not count here.
pub const MAX_HISTOGRAM_MEMORY: usize = 256 << 20;

/// The most seconds a series may reach (the longest run).
const MAX_SECOND: u64 = MAX_DURATION_S as u64;

/// A limit broken at `field`.
fn limit(field: impl Into<String>, problem: impl Into<String>) -> ResultError {
    ResultError::Limit {
        field: field.into(),
        problem: problem.into(),
    }
}

/// Checks every histogram in a document (a result or a result set) before
/// any is decoded: each one's encoding, bounds and counts
/// ([`Hist::inspect`]), and that those decoded with the document
/// together stay within [`MAX_HISTOGRAM_MEMORY`].
pub(crate) fn check_histograms(doc: &Value) -> Result<(), ResultError> {
    let mut memory = 0usize;
    walk(doc, &mut String::new(), &mut memory)
}

/// Checks any other JSON that holds histograms (a distributed run's live
/// figures, [`Measurements`] from another process) as [`check_histograms`]
/// checks a document, before any is decoded.
pub fn check_histograms_in(doc: &Value) -> Result<(), ResultError> {
    check_histograms(doc)
}

fn walk(v: &Value, path: &mut String, memory: &mut usize) -> Result<(), ResultError> {
    match v {
        Value::Object(map) => {
            for (key, child) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match (key.as_str(), child) {
                    // A decoded histogram: {"count": …, "hdr": "…"}.
                    ("hdr", Value::String(text)) => {
                        let shape = Hist::inspect(text).map_err(|e| limit(path.as_str(), e.to_string()))?;
                        *memory = memory.saturating_add(shape.memory_bytes());
                        if *memory > MAX_HISTOGRAM_MEMORY {
                            return Err(limit(
                                path.as_str(),
                                format!(
                                    "brings the document's histograms past {} MiB decoded; \
                                     a result throng writes stays far below",
                                    MAX_HISTOGRAM_MEMORY >> 20
                                ),
                            ));
                        }
                    }
                    // Per-second histograms, kept encoded: a series point's
                    // `phases` and a tag second's `response`.
                    ("phases", Value::Object(phases)) if phases.values().all(Value::is_string) => {
                        for (name, text) in phases {
                            if let Value::String(text) = text {
                                Hist::inspect(text).map_err(|e| limit(format!("{path}.{name}"), e.to_string()))?;
                            }
                        }
                    }
                    ("response", Value::String(text)) => {
                        Hist::inspect(text).map_err(|e| limit(path.as_str(), e.to_string()))?;
                    }
                    _ => walk(child, path, memory)?,
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(child, path, memory)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks a typed result's numbers: times, durations, series seconds, and
/// that every sum a report takes fits in 64 bits. `at` prefixes field names
/// (`runs[2].` in a set).
pub(crate) fn check_run(r: &RunResult, at: &str) -> Result<(), ResultError> {
    start(r.started_at_unix_ms, &format!("{at}started_at_unix_ms"))?;
    duration(r.duration_s, &format!("{at}duration_s"))?;
    cpu(r.generator.cpu_user_s, &format!("{at}generator.cpu_user_s"))?;
    cpu(r.generator.cpu_system_s, &format!("{at}generator.cpu_system_s"))?;
    for (i, p) in r.parts.iter().enumerate() {
        start(p.started_at_unix_ms, &format!("{at}parts[{i}].started_at_unix_ms"))?;
        duration(p.duration_s, &format!("{at}parts[{i}].duration_s"))?;
        cpu(p.generator.cpu_user_s, &format!("{at}parts[{i}].generator.cpu_user_s"))?;
        cpu(
            p.generator.cpu_system_s,
            &format!("{at}parts[{i}].generator.cpu_system_s"),
        )?;
    }
    if let Some(t) = &r.trigger {
        if let Some(f) = t.fired_at_s {
            duration(f, &format!("{at}trigger.fired_at_s"))?;
        }
        duration(t.duration_s, &format!("{at}trigger.duration_s"))?;
    }
    measurements(&r.measurements, &format!("{at}measurements."))
}

fn start(ms: u64, field: &str) -> Result<(), ResultError> {
    if ms > MAX_UNIX_MS {
        return Err(limit(
            field,
            format!("is {ms}, after the year 3000 (at most {MAX_UNIX_MS} ms since 1970)"),
        ));
    }
    Ok(())
}

fn duration(s: f64, field: &str) -> Result<(), ResultError> {
    if !(0.0..=MAX_DURATION_S).contains(&s) {
        return Err(limit(
            field,
            format!("is {} s; a result covers 0 to {MAX_DURATION_S} s (366 days)", number(s)),
        ));
    }
    Ok(())
}

fn cpu(s: f64, field: &str) -> Result<(), ResultError> {
    // CPU time may exceed wall time (many cores), not by more than a
    // machine's worth of cores over the longest run.
    if !(0.0..=MAX_DURATION_S * 65_536.0).contains(&s) {
        return Err(limit(
            field,
            format!("is {} s of CPU, more than any run can take", number(s)),
        ));
    }
    Ok(())
}

/// A number as short text: `1e308`, not 309 digits.
fn number(v: f64) -> String {
    if v.abs() >= 1e9 {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// `Σ values`, or an error naming `field` when it passes 2^64 - 1.
fn sum(values: impl IntoIterator<Item = u64>, field: &str) -> Result<u64, ResultError> {
    values
        .into_iter()
        .try_fold(0u64, |a, n| a.checked_add(n))
        .ok_or_else(|| {
            limit(
                field,
                "adds up past 2^64 - 1 (18446744073709551615); the counts are not real",
            )
        })
}

fn outcomes(o: &Outcomes, field: &str) -> Result<(), ResultError> {
    if o.checked_ended().is_none() {
        return Err(limit(
            field,
            "ok + Σ errors passes 2^64 - 1 (18446744073709551615); the counts are not real",
        ));
    }
    Ok(())
}

fn micros(v: Option<u64>, field: &str) -> Result<(), ResultError> {
    match v {
        Some(us) if us > MAX_SECOND.saturating_mul(1_000_000) => {
            Err(limit(field, format!("is {us} µs, past the longest run (366 days)")))
        }
        _ => Ok(()),
    }
}

/// Seconds strictly increasing (as the recorder writes them) and within
/// the longest run.
fn seconds(values: impl IntoIterator<Item = u64>, field: &str) -> Result<(), ResultError> {
    let mut last: Option<u64> = None;
    for (i, s) in values.into_iter().enumerate() {
        if s > MAX_SECOND {
            return Err(limit(
                format!("{field}[{i}].second"),
                format!("is {s}; a series covers seconds 0 to {MAX_SECOND} (366 days)"),
            ));
        }
        if last.is_some_and(|l| s <= l) {
            return Err(limit(
                format!("{field}[{i}].second"),
                format!("is {s}, not after the point before it; a series' seconds ascend"),
            ));
        }
        last = Some(s);
    }
    Ok(())
}

fn measurements(m: &Measurements, at: &str) -> Result<(), ResultError> {
    outcomes(&m.requests, &format!("{at}requests"))?;
    outcomes(&m.connections, &format!("{at}connections"))?;
    outcomes(&m.reconnects, &format!("{at}reconnects"))?;
    sum(m.status.values().copied(), &format!("{at}status"))?;
    sum(m.reconnect_gave_up.values().copied(), &format!("{at}reconnect_gave_up"))?;
    sum(
        m.handshake_out_of_turn.values().copied(),
        &format!("{at}handshake_out_of_turn"),
    )?;
    for (v, name) in [
        (m.first_attempt_us, "first_attempt_us"),
        (m.last_established_us, "last_established_us"),
        (m.first_drop_us, "first_drop_us"),
        (m.last_reconnected_us, "last_reconnected_us"),
        (m.first_reaccepted_us, "first_reaccepted_us"),
    ] {
        micros(v, &format!("{at}{name}"))?;
    }
    if let Some(slow) = &m.slowest {
        let max = u64::from(throng_plan::MAX_SLOWEST);
        if slow.keep > max || slow.requests.len() as u64 > slow.keep {
            return Err(limit(
                format!("{at}slowest"),
                format!(
                    "keeps {} of at most {} requests; a result keeps at most {max} (--slowest)",
                    slow.requests.len(),
                    slow.keep
                ),
            ));
        }
        for (i, r) in slow.requests.iter().enumerate() {
            micros(Some(r.start_us), &format!("{at}slowest.requests[{i}].start_us"))?;
        }
    }
    let series = format!("{at}series");
    seconds(m.series.iter().map(|p| p.second), &series)?;
    // Reports add these up over the series.
    type Field = fn(&throng_metrics::SeriesPoint) -> u64;
    let fields: [(&str, Field); 9] = [
        ("requests", |p| p.requests),
        ("ok", |p| p.ok),
        ("errors", |p| p.errors),
        ("replies", |p| p.replies),
        ("dropped", |p| p.dropped),
        ("bytes_sent", |p| p.bytes_sent),
        ("bytes_received", |p| p.bytes_received),
        ("connections_opened", |p| p.connections_opened),
        ("connection_errors", |p| p.connection_errors),
    ];
    for (name, f) in fields {
        sum(m.series.iter().map(f), &format!("{series}[].{name}"))?;
    }
    for (i, p) in m.series.iter().enumerate() {
        sum(
            p.error_classes.values().copied(),
            &format!("{series}[{i}].error_classes"),
        )?;
        sum(
            p.connection_error_classes.values().copied(),
            &format!("{series}[{i}].connection_error_classes"),
        )?;
    }
    if let Some(s) = &m.scenario {
        let at = format!("{at}scenario.");
        seconds(s.series.iter().map(|p| p.second), &format!("{at}series"))?;
        for (name, f) in [
            (
                "iterations",
                (|p| p.iterations) as fn(&throng_metrics::ScenarioSecond) -> u64,
            ),
            ("dropped_iterations", |p| p.dropped_iterations),
        ] {
            sum(s.series.iter().map(f), &format!("{at}series[].{name}"))?;
        }
        for (tag, t) in &s.tags {
            let field = format!("{at}tags.{tag}");
            seconds(t.series.iter().map(|p| p.second), &format!("{field}.series"))?;
            sum([t.requests, t.interrupted], &field)?;
            sum(
                t.series.iter().map(|p| p.requests),
                &format!("{field}.series[].requests"),
            )?;
        }
        for (name, c) in &s.checks {
            sum([c.passes, c.fails], &format!("{at}checks.{name}"))?;
        }
    }
    Ok(())
}
