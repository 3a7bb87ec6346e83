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
//!             └─ html::render    (one self-contained page; html::render_compare
//!                                 overlays several runs; charts from chart.rs)
//! ```
//!
//! Writers take `impl Write` (or return a `String`) and never touch the
//! terminal or files.

pub mod ab;
pub mod chart;
pub mod format;
pub mod html;
pub mod httperf;
pub mod junit;
pub mod scenario;
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
