//! A result set (`--repeat N`, or several runs in one file): the runs added
//! up in any view, and in the text view a table with one line per run, so
//! the run-to-run spread is visible beside the totals.

use std::io::{self, Write};

use throng_result::{RunResult, Unit, rfc3339};

use crate::compare::{headline_phases, throughput, throughput_name};
use crate::format::us;
use crate::stats;
use crate::view::View;

/// One run's line as printed while a `--repeat` goes on: `run 2/5: …`.
pub fn run_line(r: &RunResult, index: usize, count: usize) -> String {
    let mut parts = vec![format!(
        "run {index}/{count}: {:.1} {}",
        throughput(r),
        match r.unit() {
            Unit::Connections => "established/s",
            Unit::Requests => "ok/s",
            Unit::Messages => "published/s",
        }
    )];
    for phase in headline_phases(r) {
        if let Some(h) = r.measurements.phase(phase) {
            parts.push(format!(
                "{phase} p50 {} p99 {}",
                us(h.quantile(0.5) as f64),
                us(h.quantile(0.99) as f64)
            ));
        }
    }
    let (unit, o) = (r.unit().plural(), r.unit_outcomes());
    parts.push(format!("{} {unit}, {} failed", o.ended(), o.failed()));
    parts.join(", ")
}

/// Renders `runs` (check [`crate::view::supports`] on the first): one run as
/// [`crate::view::write`] does; several added up
/// ([`RunResult::merge_sequential`]) and, in the text view, followed by the
/// per-run table. The JSON view writes the added-up result document.
pub fn write_set(view: View, runs: &[RunResult], w: &mut dyn Write) -> io::Result<()> {
    match runs {
        [] => Ok(()),
        [one] => crate::view::write(view, one, w),
        _ => {
            let merged = RunResult::merge_sequential(runs).map_err(io::Error::other)?;
            crate::view::write(view, &merged, w)?;
            if view == View::Text {
                writeln!(w)?;
                write_table(runs, w)?;
            }
            Ok(())
        }
    }
}

/// The per-run table: throughput and the headline phases' p50 and p99 for
/// each run, then their median and spread.
pub fn write_table(runs: &[RunResult], w: &mut dyn Write) -> io::Result<()> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    let phases = headline_phases(first);
    let mut head = format!(
        "  {:<5} {:<25} {:>9} {:>16}",
        "run",
        "started",
        "duration",
        throughput_name(first)
    );
    for p in &phases {
        head.push_str(&format!(" {:>12} {:>12}", format!("{p} p50"), format!("{p} p99")));
    }
    head.push_str(&format!(" {:>10}", "failed"));
    writeln!(w, "{head}")?;
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); 1 + 2 * phases.len()];
    for (i, r) in runs.iter().enumerate() {
        let o = r.unit_outcomes();
        let tp = throughput(r);
        columns[0].push(tp);
        let mut line = format!(
            "  {:<5} {:<25} {:>8.2}s {:>16.1}",
            i + 1,
            rfc3339(r.started_at_unix_ms),
            r.duration_s,
            tp
        );
        for (j, p) in phases.iter().enumerate() {
            let (p50, p99) = r
                .measurements
                .phase(p)
                .map_or((0.0, 0.0), |h| (h.quantile(0.5) as f64, h.quantile(0.99) as f64));
            columns[1 + 2 * j].push(p50);
            columns[2 + 2 * j].push(p99);
            line.push_str(&format!(" {:>12} {:>12}", us(p50), us(p99)));
        }
        line.push_str(&format!(" {:>10}", o.failed()));
        writeln!(w, "{line}")?;
    }
    for (label, f) in [
        ("median", stats::median as fn(&[f64]) -> f64),
        ("spread", |v: &[f64]| stats::spread(v).width),
    ] {
        let kind = stats::spread(&columns[0]).kind.name();
        let mut line = format!(
            "  {:<5} {:<25} {:>9} {:>16.1}",
            label,
            if label == "spread" { kind } else { "" },
            "",
            f(&columns[0])
        );
        for c in &columns[1..] {
            line.push_str(&format!(" {:>12}", us(f(c))));
        }
        writeln!(w, "{line}")?;
    }
    Ok(())
}
