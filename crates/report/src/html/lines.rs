//! The lines the page's charts draw: throughput, errors, active
//! connections or VUs, latency, and the percentile spectrum.

use std::collections::BTreeMap;

use throng_metrics::{Hist, Measurements};
use throng_result::{Plan, RunResult};

use crate::chart::{DASHES, LineChart, PALETTE, Series};

/// One line of a chart before it gets its colour.
pub(super) struct Line {
    pub(super) label: String,
    pub(super) points: Vec<(f64, f64)>,
}

pub(super) fn line(label: &str, points: Vec<(f64, f64)>) -> Line {
    Line {
        label: label.to_string(),
        points,
    }
}

pub(super) fn per_second_line(m: &Measurements, label: &str, f: impl Fn(&throng_metrics::SeriesPoint) -> u64) -> Line {
    line(label, m.series.iter().map(|p| (p.second as f64, f(p) as f64)).collect())
}

pub(super) fn scenario_line(
    s: &throng_metrics::ScenarioStats,
    label: &str,
    f: impl Fn(&throng_metrics::ScenarioSecond) -> u64,
) -> Line {
    line(label, s.series.iter().map(|p| (p.second as f64, f(p) as f64)).collect())
}

pub(super) fn throughput_lines(r: &RunResult) -> Vec<Line> {
    let m = &r.measurements;
    match &r.plan {
        Plan::Storm(_) => vec![per_second_line(m, "established", |p| p.connections_opened)],
        Plan::Http(_) | Plan::Mqtt(_) => vec![
            per_second_line(m, "requests", |p| p.requests),
            per_second_line(m, "ok", |p| p.ok),
        ],
        Plan::Run(_) => {
            let mut v = vec![
                per_second_line(m, "requests", |p| p.requests),
                per_second_line(m, "ok", |p| p.ok),
            ];
            if let Some(s) = &m.scenario {
                v.push(scenario_line(s, "iterations", |p| p.iterations));
            }
            v
        }
    }
}

/// The error classes of a series, most frequent first (at most `max`).
pub(super) fn top_classes<'a>(
    m: &'a Measurements,
    of: impl Fn(&'a throng_metrics::SeriesPoint) -> &'a BTreeMap<String, u64>,
    max: usize,
) -> Vec<String> {
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for p in &m.series {
        for (class, n) in of(p) {
            let t = totals.entry(class).or_default();
            *t = t.saturating_add(*n);
        }
    }
    let mut classes: Vec<(&str, u64)> = totals.into_iter().collect();
    classes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    classes.into_iter().take(max).map(|(c, _)| c.to_string()).collect()
}

/// A total line, and one line per error class when there are several (the
/// classes of one total alone are named in its label).
pub(super) fn errors_by_class<'a>(
    v: &mut Vec<Line>,
    m: &'a Measurements,
    label: &str,
    total: impl Fn(&throng_metrics::SeriesPoint) -> u64,
    of: impl Fn(&'a throng_metrics::SeriesPoint) -> &'a BTreeMap<String, u64> + Copy,
) {
    let classes = top_classes(m, of, 5);
    match classes.as_slice() {
        [one] => v.push(per_second_line(m, &format!("{label}: {one}"), total)),
        _ => {
            v.push(per_second_line(m, label, total));
            for class in classes {
                let named = format!("{label}: {class}");
                v.push(line(
                    &named,
                    m.series
                        .iter()
                        .map(|p| (p.second as f64, of(p).get(&class).copied().unwrap_or(0) as f64))
                        .collect(),
                ));
            }
        }
    }
}

pub(super) fn error_lines(r: &RunResult) -> Vec<Line> {
    let m = &r.measurements;
    let mut v = Vec::new();
    let unit = r.unit();
    if unit == throng_result::Unit::Requests {
        errors_by_class(&mut v, m, "failed requests", |p| p.errors, |p| &p.error_classes);
    }
    if unit == throng_result::Unit::Connections || m.series.iter().any(|p| p.connection_errors > 0) {
        errors_by_class(
            &mut v,
            m,
            "failed connections",
            |p| p.connection_errors,
            |p| &p.connection_error_classes,
        );
    }
    if m.series.iter().any(|p| p.dropped > 0) {
        v.push(per_second_line(m, "dropped", |p| p.dropped));
    }
    if let Some(s) = m.scenario.as_ref().filter(|s| s.dropped_iterations > 0) {
        v.push(scenario_line(s, "dropped iterations", |p| p.dropped_iterations));
    }
    v
}

pub(super) fn active_lines(r: &RunResult) -> Vec<Line> {
    let m = &r.measurements;
    let mut v = Vec::new();
    if let (Plan::Run(p), Some(s)) = (&r.plan, &m.scenario) {
        v.push(scenario_line(s, "VUs", |x| x.vus));
        if p.scenarios.len() > 1 {
            for (i, sc) in p.scenarios.iter().enumerate() {
                v.push(scenario_line(s, &format!("VUs {}", sc.name), |x| {
                    x.vus_by_scenario.get(i).copied().unwrap_or(0)
                }));
            }
        }
    }
    v.push(per_second_line(m, "open connections", |p| p.concurrent_max));
    v
}

/// p50, p90, p99 and max of `phase`, per second with samples. Each
/// second's histogram is decoded, read and dropped in turn: the memory is
/// one histogram plus four numbers per second, never every second's
/// histogram at once.
pub(super) fn latency_lines(m: &Measurements, phase: &str) -> Vec<Line> {
    let mut at: [Vec<(f64, f64)>; 4] = Default::default();
    for p in &m.series {
        let Ok(h) = p.phase(phase) else { continue };
        if h.is_empty() {
            continue;
        }
        let x = p.second as f64;
        at[0].push((x, h.quantile(0.50) as f64));
        at[1].push((x, h.quantile(0.90) as f64));
        at[2].push((x, h.quantile(0.99) as f64));
        at[3].push((x, h.max() as f64));
    }
    let [p50, p90, p99, max] = at;
    vec![line("p50", p50), line("p90", p90), line("p99", p99), line("max", max)]
}

/// Points per decade of the percentile spectrum.
pub(super) const SPECTRUM_STEPS: f64 = 20.0;

/// HdrHistogram's percentile spectrum: x = 1/(1-q) (log-scaled, labelled
/// as the percentile), y = the value at q, up to the highest percentile
/// the sample count resolves, ending at the max.
pub(super) fn spectrum(h: &Hist) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let top = (h.count() as f64).clamp(10.0, 1e7);
    let mut out = Vec::new();
    let mut i = 0.0;
    loop {
        let x = 10f64.powf(i / SPECTRUM_STEPS);
        if x >= top {
            break;
        }
        out.push((x, h.quantile(1.0 - 1.0 / x) as f64));
        i += 1.0;
    }
    out.push((top, h.max() as f64));
    out
}

/// Colours each side's lines: one run gets a colour per line; several
/// sides get a colour per side and a dash pattern per line.
pub(super) fn chart_of(mut chart: LineChart, sides: &[(String, Vec<Line>)]) -> LineChart {
    let compare = sides.len() > 1;
    for (si, (side, lines)) in sides.iter().enumerate() {
        for (li, l) in lines.iter().enumerate() {
            let s = if compare {
                let label = if lines.len() > 1 {
                    format!("{side} · {}", l.label)
                } else {
                    side.clone()
                };
                Series::new(label, PALETTE[si % PALETTE.len()], l.points.clone()).dashed(DASHES[li % DASHES.len()])
            } else {
                Series::new(l.label.clone(), PALETTE[li % PALETTE.len()], l.points.clone())
            };
            chart = chart.with(s);
        }
    }
    chart
}
