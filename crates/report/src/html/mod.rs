//! The HTML report: one self-contained page per run (or per comparison),
//! readable offline and attachable to a ticket.
//!
//! ```text
//!  RunResult ──────────────┬─► figures, tables (outcomes, statuses, phases, scenario)
//!                          ├─► series over time ─► chart::LineChart (throughput, errors,
//!                          │                        connections/VUs, latency p50/p90/p99/max)
//!                          ├─► histogram ───────► percentile spectrum (log x: 1/(1-q))
//!                          └─► phases ──────────► chart::RangeChart (box per phase)
//!  [(label, RunResult)] ───► the same charts, the sides overlaid (render_compare)
//! ```
//!
//! The page fetches nothing: CSS is inline, charts are inline SVG drawn in
//! Rust, there is no script, and a Content-Security-Policy meta tag forbids
//! every fetch (`default-src 'none'`) so that a mistake would be blocked
//! rather than leak. Every piece of text from the run (URLs, header values,
//! step and check names) is escaped.

use std::fmt::Write as _;

use throng_result::RunResult;

use crate::chart::{Axis, LineChart, Unit, escape};
use crate::format::us;

mod facts;
mod lines;
mod outcomes;
mod page;
mod scenario;
#[cfg(test)]
mod tests;

use self::facts::headline;
use self::lines::{chart_of, line};
pub use self::page::CSP;
use self::page::Page;

/// Renders one run as a self-contained HTML page.
pub fn render(result: &RunResult) -> String {
    let mut page = Page::new(&format!("throng — {}", headline(result)));
    page.header(result);
    page.summary(&[("", result)]);
    page.charts(&[(String::new(), result)]);
    page.phases(&[(String::new(), result)]);
    page.outcomes(&[(String::new(), result)]);
    page.scenario(result);
    page.text_report(result);
    page.finish()
}

/// Renders several runs side by side: a table per figure with one column
/// per side, and every chart with the sides overlaid (one colour each).
/// `sides` holds each side's label (`A`, `direct`, …) and result.
pub fn render_compare(sides: &[(String, &RunResult)]) -> String {
    // Labels are shown clipped (a label of any length makes a readable page).
    let clipped: Vec<(String, &RunResult)> = sides
        .iter()
        .map(|(l, r)| (crate::format::clip(l, crate::format::LABEL_CHARS).into_owned(), *r))
        .collect();
    let sides = clipped.as_slice();
    let labels: Vec<String> = sides.iter().map(|(l, _)| l.clone()).collect();
    let mut page = Page::new(&format!("throng compare — {}", labels.join(" vs ")));
    page.compare_header(sides);
    let named: Vec<(&str, &RunResult)> = sides.iter().map(|(l, r)| (l.as_str(), *r)).collect();
    page.summary(&named);
    let owned: Vec<(String, &RunResult)> = sides.iter().map(|(l, r)| (l.clone(), *r)).collect();
    page.charts(&owned);
    page.phases(&owned);
    page.outcomes(&owned);
    page.finish()
}

/// Renders a plan's runs over time (`throng history report`): p50 and p99
/// of its headline phase, throughput and error rate, one point per run
/// with the run's label on the x axis, and a table of the same figures.
pub fn render_trend(t: &crate::trend::Trend) -> String {
    let mut page = Page::new(&format!("throng history — {}", t.plan));
    let _ = writeln!(page.html, "<header><h1>throng history: {}</h1>", escape(&t.plan));
    let _ = writeln!(
        page.html,
        "<p class=\"plan\">{} of plan {}, oldest first.</p>",
        escape(&throng_plan::count(t.points.len() as u64, "run")),
        escape(&t.fingerprint)
    );
    for n in &t.notes {
        let _ = writeln!(page.html, "<p class=\"note\">Note: {}</p>", escape(n));
    }
    page.html.push_str("</header>\n");
    let labels: Vec<String> = t
        .points
        .iter()
        .map(|p| crate::format::clip(&p.label, 24).into_owned())
        .collect();
    let runs = || Axis::linear("run", Unit::Categories(labels.clone()));
    let at = |f: &dyn Fn(&crate::trend::Point) -> Option<f64>| -> Vec<(f64, f64)> {
        t.points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| f(p).map(|v| (i as f64, v)))
            .collect()
    };
    page.h2("trend", "Over the runs");
    let phase = t
        .points
        .iter()
        .find_map(|p| p.phase.as_ref().map(|(name, _, _)| name.clone()));
    if let Some(phase) = &phase {
        let of = |p: &crate::trend::Point, q: usize| {
            p.phase
                .as_ref()
                .filter(|(name, _, _)| name == phase)
                .map(|(_, p50, p99)| if q == 50 { *p50 as f64 } else { *p99 as f64 })
        };
        let chart = chart_of(
            LineChart::new(
                "trend-latency",
                format!("{phase}: p50 and p99 by run"),
                runs(),
                Axis::linear(phase.as_str(), Unit::Micros),
            ),
            &[(
                String::new(),
                vec![line("p50", at(&|p| of(p, 50))), line("p99", at(&|p| of(p, 99)))],
            )],
        );
        page.html.push_str(&chart.svg());
        page.html.push('\n');
    }
    let unit = t.unit.as_str();
    for (id, title, axis, f) in [
        (
            "trend-throughput",
            format!("Throughput: {unit} ok per second, by run"),
            Axis::linear("per second", Unit::Number),
            (|p| Some(p.throughput)) as fn(&crate::trend::Point) -> Option<f64>,
        ),
        (
            "trend-errors",
            format!("Error rate: % of {unit} failed, by run"),
            Axis::linear("% failed", Unit::Number),
            |p| Some(p.error_pct),
        ),
    ] {
        let name = if id == "trend-errors" { "failed %" } else { "ok/s" };
        let chart = chart_of(
            LineChart::new(id, title, runs(), axis),
            &[(String::new(), vec![line(name, at(&f))])],
        );
        page.html.push_str(&chart.svg());
        page.html.push('\n');
    }
    page.h2("runs", "Runs");
    let mut head: Vec<String> = ["#", "label", "started", unit, "ok/s", "failed"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(phase) = &phase {
        head.push(format!("{phase} p50"));
        head.push(format!("{phase} p99"));
    }
    let rows: Vec<Vec<String>> = t
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut row = vec![
                (i + 1).to_string(),
                escape(&crate::format::clip(&p.label, 60)),
                escape(&p.started_at),
                p.ended.to_string(),
                format!("{:.1}", p.throughput),
                format!("{} ({:.2}%)", p.failed, p.error_pct),
            ];
            if phase.is_some() {
                let (p50, p99) = p.phase.as_ref().map_or((String::new(), String::new()), |(_, a, b)| {
                    (us(*a as f64), us(*b as f64))
                });
                row.push(escape(&p50));
                row.push(escape(&p99));
            }
            row
        })
        .collect();
    page.table("runs", &head, &rows);
    page.finish()
}
