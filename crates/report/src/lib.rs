//! Reports: every view of a run is rendered from its [`RunResult`], so any
//! result file can be re-reported later in any view.
//!
//! ```text
//!  RunResult ─┬─ text::write     (k6-like phase table, outcomes, generator cost)
//!             ├─ ab::write       (ApacheBench's layout and field meanings)
//!             ├─ httperf::write  (httperf's layout and error classes)
//!             ├─ storm::write    (connection storms)
//!             ├─ scenario::write (throng run: steps, stages, checks, thresholds)
//!             ├─ junit::write    (threshold verdicts for CI)
//!             ├─ runs::write_set (a result set: runs added up, plus a table per run)
//!             └─ html::render    (one self-contained page; html::render_compare
//!                                 overlays several runs; charts from chart.rs)
//!
//!  Side A, Side B ─ compare::Comparison ─ compare::write_{text,markdown,json,columns}
//!                     (figures side by side; stats: bootstrap, Mann–Whitney)
//! ```
//!
//! Writers take `impl Write` (or return a `String`) and never touch the
//! terminal or files.
//!
//! Exports for other tools, from the same document:
//! `csv::write_series` (the per-second series, long-form CSV) and
//! `interval_log::write` (HdrHistogram interval log, one interval per
//! second per phase).

pub mod ab;
pub mod chart;
pub mod compare;
pub mod csv;
pub mod format;
pub mod html;
pub mod httperf;
pub mod interval_log;
pub mod junit;
pub mod runs;
pub mod scenario;
pub mod stats;
pub mod storm;
pub mod text;

use std::io::{self, Write};

use throng_result::{Plan, RunResult};

/// A report layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// throng's own summary.
    Text,
    /// ApacheBench's report.
    Ab,
    /// httperf's report.
    Httperf,
    /// The result document itself.
    Json,
}

/// Whether `view` can show `result`: the ab and httperf layouts describe
/// HTTP runs.
pub fn supports(view: View, result: &RunResult) -> Result<(), String> {
    match (view, &result.plan) {
        (View::Ab | View::Httperf, Plan::Storm(_) | Plan::Run(_)) => Err(format!(
            "the {} view shows `throng http` runs and this result is a {}; use --format text or json",
            if view == View::Ab { "ab" } else { "httperf" },
            if matches!(result.plan, Plan::Storm(_)) {
                "storm"
            } else {
                "scenario run"
            }
        )),
        _ => Ok(()),
    }
}

/// Renders `result` in `view` (check [`supports`] first; an unsupported
/// view falls back to text).
pub fn write(view: View, result: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    match (view, &result.plan) {
        (View::Json, _) => result.to_writer(&mut *w).map_err(io::Error::other),
        (_, Plan::Storm(_)) => storm::write(result, w),
        (_, Plan::Run(_)) => scenario::write(result, w),
        (View::Text, Plan::Http(_)) => text::write(result, w),
        (View::Ab, Plan::Http(_)) => ab::write(result, w),
        (View::Httperf, Plan::Http(_)) => httperf::write(result, w),
    }
}

/// A `throng http` result around `m`, started at Unix ms 1,000,000 (for
/// the writers' unit tests).
#[cfg(test)]
pub(crate) fn test_result(m: throng_metrics::Measurements) -> RunResult {
    let plan = throng_plan::HttpPlan::from_args(throng_plan::HttpArgs {
        url: "http://127.0.0.1:8080/".to_string(),
        cores: 1,
        ..throng_plan::HttpArgs::default()
    })
    .expect("a valid plan");
    RunResult {
        schema: throng_result::SCHEMA.to_string(),
        throng_version: "0.0.0".to_string(),
        plan: Plan::Http(plan),
        started_at: throng_result::rfc3339(1_000_000),
        started_at_unix_ms: 1_000_000,
        duration_s: 2.0,
        coordinated_omission_free: false,
        interrupted: false,
        environment: throng_result::Environment::default(),
        generator: throng_result::Generator::default(),
        measurements: m,
        parts: Vec::new(),
        notes: Vec::new(),
        trigger: None,
        thresholds: Vec::new(),
        segment: None,
    }
}
