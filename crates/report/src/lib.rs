//! Reports: every view of a run is rendered from its [`RunResult`], so any
//! result file can be re-reported later in any view.
//!
//! ```text
//!  RunResult ─┬─ text::write     (any result, routed by kind: an HTTP run's
//!             │                   phase table, outcomes, generator cost here;
//!             │                   storm.rs: connection storms; scenario.rs:
//!             │                   throng run's steps, stages, checks, thresholds)
//!             ├─ ab::write       (ApacheBench's layout and field meanings)
//!             ├─ httperf::write  (httperf's layout and error classes)
//!             ├─ junit::write    (threshold verdicts for CI)
//!             ├─ summary_md::write (verdict first, key figures: a PR comment,
//!             │                   a CI job summary)
//!             ├─ runs::write_set (a result set: runs added up, plus a table per run)
//!             └─ html::render    (one self-contained page; html::render_compare
//!                                 overlays several runs; charts from chart.rs)
//!
//!  [RunResult] ─ trend::Point::of ─ html::render_trend (a plan's runs over
//!                                    time: `throng history report`)
//!
//!  Side A, Side B ─ compare::Comparison ─ compare::write_{text,markdown,json,columns}
//!                     (figures side by side; stats: bootstrap, Mann–Whitney)
//! ```
//!
//! Writers take `impl Write` (or return a `String`) and never touch the
//! terminal or files. What a run counts (requests, or connections for a
//! storm) comes from [`RunResult::unit`], not from matching on the plan.
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
pub mod gate;
pub mod html;
pub mod httperf;
pub mod interval_log;
pub mod junit;
pub mod runs;
pub mod scenario;
mod sections;
pub mod stats;
pub mod storm;
pub mod summary_md;
pub mod text;
pub mod trend;

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
    test_result_of(Plan::Http(plan), m)
}

/// A `throng storm` result around `m`, as [`test_result`].
#[cfg(test)]
pub(crate) fn test_storm_result(m: throng_metrics::Measurements) -> RunResult {
    let plan = throng_plan::StormPlan::from_args(throng_plan::StormArgs {
        target: "tcp://127.0.0.1:4222".to_string(),
        connections: Some(10),
        ..throng_plan::StormArgs::default()
    })
    .expect("a valid plan");
    test_result_of(Plan::Storm(plan), m)
}

/// A `throng run` result around `m`, as [`test_result`].
#[cfg(test)]
pub(crate) fn test_run_result(m: throng_metrics::Measurements) -> RunResult {
    let file = "target: http://127.0.0.1:8080\nscenarios:\n  browse:\n    executor: constant-vus\n    vus: 2\n    duration: 10s\n    flow:\n      - request: { name: home, path: / }\n";
    let plan = throng_scenario::ScenarioPlan::parse(file, "t.yaml", &|f| Err(format!("no {f}"))).expect("a valid plan");
    test_result_of(Plan::Run(Box::new(plan)), m)
}

#[cfg(test)]
fn test_result_of(plan: Plan, m: throng_metrics::Measurements) -> RunResult {
    RunResult {
        schema: throng_result::SCHEMA.to_string(),
        throng_version: "0.0.0".to_string(),
        plan,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind's text report through every text writer: the same report,
    /// written once (the writers used to hand a scenario result back and
    /// forth without end).
    #[test]
    fn every_text_writer_is_total_and_routes_by_kind() {
        let results = [
            (
                "throng http GET http://127.0.0.1:8080/",
                test_result(Default::default()),
            ),
            (
                "throng storm tcp://127.0.0.1:4222",
                test_storm_result(Default::default()),
            ),
            (
                "throng run t.yaml → http://127.0.0.1:8080",
                test_run_result(Default::default()),
            ),
        ];
        type Writer = fn(&RunResult, &mut dyn Write) -> io::Result<()>;
        let writers: [Writer; 3] = [text::write, storm::write, scenario::write];
        for (first_line, r) in &results {
            let mut reports = Vec::new();
            for writer in writers {
                let mut out = Vec::new();
                writer(r, &mut out).expect("written");
                reports.push(String::from_utf8(out).expect("utf-8"));
            }
            let mut out = Vec::new();
            write(View::Text, r, &mut out).expect("written");
            reports.push(String::from_utf8(out).expect("utf-8"));
            assert!(reports[0].starts_with(first_line), "{}", reports[0]);
            assert_eq!(reports[0].matches(first_line).count(), 1, "{}", reports[0]);
            assert!(reports.iter().all(|x| *x == reports[0]));
        }
    }
}
