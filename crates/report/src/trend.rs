//! A plan's runs over time (`throng history report`): each run reduced to a
//! few figures ([`Point`]), drawn by [`crate::html::render_trend`] as lines
//! over the runs, one point per run, x = the run's label.
//!
//! ```text
//!  history entry ─► RunResult ─► Point::of ─► (the result is dropped)
//!  [Point] ─► html::render_trend ─► p50/p99, throughput, error rate by run
//! ```
//!
//! A point keeps only numbers and two short strings, so a trend over many
//! runs holds one run's result at a time, never all of them.

use throng_result::{RunResult, per_second};

use crate::format::pct;

/// One run's figures in a trend.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The entry's label (a commit, a build).
    pub label: String,
    /// The run's start, RFC 3339.
    pub started_at: String,
    /// Units of work ended (requests, or connections for a storm).
    pub ended: u64,
    /// Of which ok.
    pub ok: u64,
    /// Of which failed.
    pub failed: u64,
    /// ok per second of the run.
    pub throughput: f64,
    /// failed as a percentage of ended.
    pub error_pct: f64,
    /// The headline phase (`latency`, `connect`, …) and its p50 and p99,
    /// µs; None when the run recorded none.
    pub phase: Option<(String, u64, u64)>,
}

impl Point {
    /// The figures of `r`, labelled `label`.
    pub fn of(label: &str, r: &RunResult) -> Point {
        let o = r.unit_outcomes();
        let phase = crate::format::primary_phase(&r.measurements).and_then(|name| {
            let h = r.measurements.phase(name)?;
            (!h.is_empty()).then(|| (name.to_string(), h.quantile(0.50), h.quantile(0.99)))
        });
        Point {
            label: label.to_string(),
            started_at: r.started_at.clone(),
            ended: o.ended(),
            ok: o.ok,
            failed: o.failed(),
            throughput: per_second(o.ok, r.duration_s),
            error_pct: pct(o.failed(), o.ended()),
            phase,
        }
    }
}

/// What a trend page is about.
#[derive(Clone, Debug, PartialEq)]
pub struct Trend {
    /// The plan, as people name it: `http GET URL`.
    pub plan: String,
    /// The plan's fingerprint.
    pub fingerprint: String,
    /// What the runs count: `requests` or `connections`.
    pub unit: String,
    /// Lines for the reader: entries skipped and why.
    pub notes: Vec<String>,
    /// The runs, oldest first.
    pub points: Vec<Point>,
}
