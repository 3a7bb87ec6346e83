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

use std::collections::BTreeMap;
use std::fmt::Write as _;

use throng_metrics::{ErrorClass, Hist, Measurements, Phase};
use throng_result::{Plan, RunResult, per_second};

use crate::chart::{Axis, DASHES, LineChart, PALETTE, RangeChart, RangeRow, Series, Unit, escape};
use crate::format::{bytes, pct, primary_phase, us};

/// Picks one kind of outcomes out of the measurements.
type OutcomesOf = fn(&Measurements) -> &throng_metrics::Outcomes;

/// The page's Content-Security-Policy: nothing may be fetched; inline
/// styles and `data:` images are allowed.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

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

/// `throng http GET URL`, `throng storm URL`, `throng run FILE → URL`.
fn headline(r: &RunResult) -> String {
    match &r.plan {
        Plan::Http(p) => format!("throng http {} {}", p.method, p.target.url),
        Plan::Storm(p) => format!("throng storm {}", p.target.url),
        Plan::Run(p) => format!("throng run {} → {}", p.file, p.target.url),
    }
}

/// What the plan did, in the text report's words.
fn plan_lines(r: &RunResult) -> Vec<String> {
    match &r.plan {
        Plan::Http(p) => {
            let mut v = vec![p.describe()];
            v.extend(p.headers.iter().map(|(k, val)| format!("header {k}: {val}")));
            v
        }
        Plan::Storm(p) => vec![p.describe()],
        Plan::Run(p) => {
            let mut v: Vec<String> = p
                .scenarios
                .iter()
                .map(|sc| format!("scenario {}: {}", sc.name, crate::scenario::report::describe(sc)))
                .collect();
            if (p.scale - 1.0).abs() > f64::EPSILON {
                v.push(format!("schedule scaled by {} (--scale)", p.scale));
            }
            v
        }
    }
}

/// The unit of work a run counts: requests, or connections for storms.
fn unit(r: &RunResult) -> (&throng_metrics::Outcomes, &'static str) {
    (r.unit_outcomes(), r.unit().plural())
}

/// One line of a chart before it gets its colour.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
}

fn line(label: &str, points: Vec<(f64, f64)>) -> Line {
    Line {
        label: label.to_string(),
        points,
    }
}

fn per_second_line(m: &Measurements, label: &str, f: impl Fn(&throng_metrics::SeriesPoint) -> u64) -> Line {
    line(label, m.series.iter().map(|p| (p.second as f64, f(p) as f64)).collect())
}

fn scenario_line(
    s: &throng_metrics::ScenarioStats,
    label: &str,
    f: impl Fn(&throng_metrics::ScenarioSecond) -> u64,
) -> Line {
    line(label, s.series.iter().map(|p| (p.second as f64, f(p) as f64)).collect())
}

fn throughput_lines(r: &RunResult) -> Vec<Line> {
    let m = &r.measurements;
    match &r.plan {
        Plan::Storm(_) => vec![per_second_line(m, "established", |p| p.connections_opened)],
        Plan::Http(_) => vec![
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
fn top_classes<'a>(
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
fn errors_by_class<'a>(
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

fn error_lines(r: &RunResult) -> Vec<Line> {
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

fn active_lines(r: &RunResult) -> Vec<Line> {
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
fn latency_lines(m: &Measurements, phase: &str) -> Vec<Line> {
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
const SPECTRUM_STEPS: f64 = 20.0;

/// HdrHistogram's percentile spectrum: x = 1/(1-q) (log-scaled, labelled
/// as the percentile), y = the value at q, up to the highest percentile
/// the sample count resolves, ending at the max.
fn spectrum(h: &Hist) -> Vec<(f64, f64)> {
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
fn chart_of(mut chart: LineChart, sides: &[(String, Vec<Line>)]) -> LineChart {
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

/// The HTML page being written.
struct Page {
    html: String,
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;padding:16px 24px;max-width:960px;color:#222;background:#fafafa}
h1{font-size:20px;margin:8px 0}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
p.plan{margin:2px 0;color:#444}p.note{margin:2px 0;color:#8a5a00}p.warn{margin:2px 0;color:#a00}
table{border-collapse:collapse;font-size:13px;margin:6px 0;background:#fff}
th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}td.text{text-align:left;white-space:normal;color:#555}
thead th{border-bottom:2px solid #ccc}
.facts td{text-align:left;white-space:normal;overflow-wrap:anywhere}.facts td:first-child{color:#666;white-space:nowrap;overflow-wrap:normal}
.figures{display:flex;flex-wrap:wrap;gap:8px}
.figure{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:8px 12px;min-width:120px}
.figure .v{display:block;font-size:18px;font-weight:600}.figure .k{display:block;font-size:12px;color:#666}
.figure .s{display:block;font-size:11px;color:#888}
svg.chart{display:block;max-width:100%;height:auto;margin:10px 0;border:1px solid #e3e3e3;border-radius:6px}
.pass{color:#1a7f37}.fail{color:#c00}
pre{background:#fff;border:1px solid #e3e3e3;padding:8px;font-size:12px;overflow-x:auto}
footer{margin-top:32px;font-size:11px;color:#888}
";

impl Page {
    fn new(title: &str) -> Page {
        let mut html = String::with_capacity(256 * 1024);
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"throng {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            env!("CARGO_PKG_VERSION"),
            escape(title)
        );
        Page { html }
    }

    fn finish(mut self) -> String {
        let _ = write!(
            self.html,
            "<footer>Written by throng {}. Self-contained: no scripts, fonts or images are fetched.</footer>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION")
        );
        self.html
    }

    fn h2(&mut self, id: &str, title: &str) {
        let _ = writeln!(self.html, "<h2 id=\"{id}\">{}</h2>", escape(title));
    }

    /// A table: `head` cells, then rows of already-escaped cells.
    fn table(&mut self, class: &str, head: &[String], rows: &[Vec<String>]) {
        let _ = write!(self.html, "<table class=\"{class}\"><thead><tr>");
        for h in head {
            let _ = write!(self.html, "<th>{}</th>", escape(h));
        }
        self.html.push_str("</tr></thead><tbody>");
        for r in rows {
            self.html.push_str("<tr>");
            for c in r {
                let _ = write!(self.html, "<td>{c}</td>");
            }
            self.html.push_str("</tr>");
        }
        self.html.push_str("</tbody></table>\n");
    }

    fn header(&mut self, r: &RunResult) {
        let _ = writeln!(self.html, "<header><h1>{}</h1>", escape(&headline(r)));
        for l in plan_lines(r) {
            let _ = writeln!(self.html, "<p class=\"plan\">{}</p>", escape(&l));
        }
        if r.interrupted {
            self.html
                .push_str("<p class=\"warn\">Interrupted: the run was stopped before its end.</p>\n");
        }
        for n in &r.notes {
            let _ = writeln!(self.html, "<p class=\"note\">Note: {}</p>", escape(n));
        }
        if let Some(warning) = crate::text::dropped_warning(r) {
            let _ = writeln!(self.html, "<p class=\"warn\">Warning: {}.</p>", escape(&warning));
        }
        let dropped_any = crate::text::schedule(r).is_some_and(|(_, _, d)| d > 0);
        let co = if r.coordinated_omission_free && dropped_any {
            "Latency is coordinated-omission-free for the requests sent (measured from each one's intended start); \
             the dropped were never sent and have no latency."
        } else if r.coordinated_omission_free {
            "Latency is coordinated-omission-free: measured from each request's intended start on the schedule."
        } else {
            "Latency is NOT coordinated-omission-free: in a closed loop a stalled server also stalls the senders, \
             hiding the wait."
        };
        let _ = writeln!(self.html, "<p class=\"plan\">{co}</p></header>");
        self.h2("environment", "Run and environment");
        let rows: Vec<Vec<String>> = facts(r).into_iter().map(|(k, v)| vec![escape(k), escape(&v)]).collect();
        self.table("facts", &["".into(), "".into()], &rows);
    }

    fn compare_header(&mut self, sides: &[(String, &RunResult)]) {
        let labels: Vec<&str> = sides.iter().map(|(l, _)| l.as_str()).collect();
        let _ = writeln!(
            self.html,
            "<header><h1>throng compare: {}</h1></header>",
            escape(&labels.join(" vs "))
        );
        self.h2("sides", "Sides");
        let mut head = vec![String::new()];
        head.extend(labels.iter().map(|l| l.to_string()));
        let per_side: Vec<Vec<(&str, String)>> = sides
            .iter()
            .map(|(_, r)| {
                let mut f = vec![("command", headline(r)), ("plan", plan_lines(r).join("; "))];
                f.extend(facts(r));
                f
            })
            .collect();
        let rows = side_by_side(
            &per_side
                .iter()
                .map(|f| f.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
                .collect::<Vec<_>>(),
        );
        self.table("facts", &head, &rows);
    }

    fn summary(&mut self, sides: &[(&str, &RunResult)]) {
        self.h2("summary", "Summary");
        if let [(_, r)] = sides {
            self.html.push_str("<div class=\"figures\">");
            for (k, v, sub) in figures(r) {
                let _ = write!(
                    self.html,
                    "<div class=\"figure\"><span class=\"v\">{}</span><span class=\"k\">{}</span><span class=\"s\">{}</span></div>",
                    escape(&v),
                    escape(&k),
                    escape(&sub)
                );
            }
            self.html.push_str("</div>\n");
            return;
        }
        let mut head = vec!["figure".to_string()];
        head.extend(sides.iter().map(|(l, _)| l.to_string()));
        let all: Vec<Vec<(String, String)>> = sides
            .iter()
            .map(|(_, r)| figures(r).into_iter().map(|(k, v, _)| (k, v)).collect())
            .collect();
        let rows = side_by_side(&all);
        self.table("summary", &head, &rows);
    }

    fn charts(&mut self, sides: &[(String, &RunResult)]) {
        self.h2("over-time", "Over time (per second)");
        let time = || Axis::linear("seconds since the start", Unit::Seconds);
        let collect = |f: &dyn Fn(&RunResult) -> Vec<Line>| -> Vec<(String, Vec<Line>)> {
            sides.iter().map(|(l, r)| (l.clone(), f(r))).collect()
        };
        let throughput_title = match sides.first().map(|(_, r)| r.unit()) {
            Some(throng_result::Unit::Connections) => "Connections established per second",
            _ => "Throughput: requests ended per second",
        };
        let charts = [
            chart_of(
                LineChart::new(
                    "throughput",
                    throughput_title,
                    time(),
                    Axis::linear("per second", Unit::Count),
                ),
                &collect(&throughput_lines),
            ),
            chart_of(
                LineChart::new(
                    "errors",
                    "Errors per second",
                    time(),
                    Axis::linear("per second", Unit::Count),
                ),
                &collect(&error_lines),
            ),
            chart_of(
                LineChart::new(
                    "active",
                    "Active: most connections (and VUs) at once in each second",
                    time(),
                    Axis::linear("at once", Unit::Count),
                ),
                &collect(&active_lines),
            ),
        ];
        for c in charts {
            self.html.push_str(&c.svg());
            self.html.push('\n');
        }
        // One phase for every side, so the lines compare like with like.
        let phase = sides.iter().find_map(|(_, r)| primary_phase(&r.measurements));
        let Some(phase) = phase else { return };
        let lat = LineChart::new(
            "latency",
            format!("{phase}: p50, p90, p99 and max per second"),
            time(),
            Axis::linear(phase, Unit::Micros),
        );
        let lat = chart_of(lat, &collect(&|r: &RunResult| latency_lines(&r.measurements, phase)));
        self.html.push_str(&lat.svg());
        self.html.push('\n');

        self.h2("distribution", &format!("Distribution of {phase}"));
        let _ = writeln!(
            self.html,
            "<p class=\"plan\">The {} percentile spectrum, as HdrHistogram plots it: the value below which each \
             percentile of samples fell; the x axis stretches the tail (90%, 99%, 99.9%, …).</p>",
            escape(phase)
        );
        let spec = LineChart::new(
            "spectrum",
            format!("{phase} by percentile"),
            Axis::log("percentile", Unit::Percentile),
            Axis::linear(phase, Unit::Micros),
        );
        let spec = chart_of(
            spec,
            &collect(&|r: &RunResult| {
                r.measurements
                    .phase(phase)
                    .map(|h| vec![line(phase, spectrum(h))])
                    .unwrap_or_default()
            }),
        );
        self.html.push_str(&spec.svg());
        self.html.push('\n');
    }

    fn phases(&mut self, sides: &[(String, &RunResult)]) {
        let present: Vec<Phase> = Phase::ALL
            .into_iter()
            .filter(|p| sides.iter().any(|(_, r)| r.measurements.phase(p.name()).is_some()))
            .collect();
        if present.is_empty() {
            return;
        }
        self.h2("phases", "Phases");
        let compare = sides.len() > 1;
        let mut head: Vec<String> = vec!["phase".into()];
        if compare {
            head.push("side".into());
        }
        head.extend(
            ["count", "avg", "min", "p50", "p90", "p99", "p99.9", "max"]
                .iter()
                .map(|s| s.to_string()),
        );
        let mut rows = Vec::new();
        let mut boxes = Vec::new();
        for p in &present {
            for (si, (side, r)) in sides.iter().enumerate() {
                let Some(h) = r.measurements.phase(p.name()) else {
                    continue;
                };
                let s = h.summary();
                let mut row = vec![escape(p.name())];
                if compare {
                    row.push(escape(side));
                }
                row.push(s.count.to_string());
                row.extend(
                    [
                        s.mean,
                        s.min as f64,
                        s.p50 as f64,
                        s.p90 as f64,
                        s.p99 as f64,
                        s.p999 as f64,
                        s.max as f64,
                    ]
                    .iter()
                    .map(|v| escape(&us(*v))),
                );
                rows.push(row);
                boxes.push(RangeRow {
                    label: p.name().to_string(),
                    side: side.clone(),
                    color: PALETTE[si % PALETTE.len()].to_string(),
                    min: s.min as f64,
                    p25: h.quantile(0.25) as f64,
                    p50: s.p50 as f64,
                    p75: h.quantile(0.75) as f64,
                    p99: s.p99 as f64,
                    max: s.max as f64,
                });
            }
        }
        self.table("phases", &head, &rows);
        let chart = RangeChart {
            id: "phases".into(),
            title: "Phases: box p25–p75, thick line the median, whiskers min to p99, dot the max".into(),
            axis: Axis::log("time (log scale)", Unit::Micros),
            rows: boxes,
        };
        self.html.push_str(&chart.svg());
        self.html.push('\n');
    }

    fn outcomes(&mut self, sides: &[(String, &RunResult)]) {
        self.h2("outcomes", "Outcomes");
        let compare = sides.len() > 1;
        let kinds: [(&str, OutcomesOf); 3] = [
            ("requests", |m| &m.requests),
            ("connections", |m| &m.connections),
            ("reconnects", |m| &m.reconnects),
        ];
        for (kind, get) in kinds {
            if sides.iter().all(|(_, r)| get(&r.measurements).is_empty()) {
                continue;
            }
            let mut names: Vec<String> = vec!["attempted".into(), "ok".into()];
            for (_, r) in sides {
                for k in get(&r.measurements).errors.keys() {
                    if !names.contains(k) {
                        names.push(k.clone());
                    }
                }
            }
            let mut head = vec![kind.to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "count".into() }),
            );
            head.push("meaning".into());
            let rows: Vec<Vec<String>> = names
                .iter()
                .map(|name| {
                    let mut row = vec![escape(name)];
                    for (_, r) in sides {
                        let o = get(&r.measurements);
                        let n = match name.as_str() {
                            "attempted" => o.attempted,
                            "ok" => o.ok,
                            k => o.errors.get(k).copied().unwrap_or(0),
                        };
                        row.push(if name == "attempted" {
                            n.to_string()
                        } else {
                            format!("{n} ({:.2}%)", pct(n, o.attempted))
                        });
                    }
                    let meaning = match name.as_str() {
                        "attempted" => "started",
                        "ok" => "ended well",
                        k => ErrorClass::describe(k),
                    };
                    row.push(format!("<span class=\"text\">{}</span>", escape(meaning)));
                    row
                })
                .collect();
            self.table(&format!("outcomes {kind}"), &head, &rows);
        }
        if sides.iter().any(|(_, r)| crate::text::schedule(r).is_some()) {
            let mut head = vec!["schedule".to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "count".into() }),
            );
            head.push("meaning".into());
            type Part = fn((u64, u64, u64)) -> (u64, u64);
            let parts: [(&str, Part, &str); 3] = [
                ("scheduled", |(s, _, _)| (s, s), "starts the open loop's rate asked for"),
                (
                    "sent",
                    |(s, n, _)| (n, s),
                    "requests started on time or late (schedule_lag)",
                ),
                ("dropped", |(s, _, d)| (d, s), crate::text::DROPPED_MEANING),
            ];
            let rows: Vec<Vec<String>> = parts
                .iter()
                .map(|(name, part, meaning)| {
                    let mut row = vec![(*name).to_string()];
                    row.extend(sides.iter().map(|(_, r)| match crate::text::schedule(r) {
                        Some(s) if *name == "scheduled" => part(s).0.to_string(),
                        Some(s) => {
                            let (n, of) = part(s);
                            format!("{n} ({:.2}%)", pct(n, of))
                        }
                        None => "–".to_string(),
                    }));
                    row.push(format!("<span class=\"text\">{}</span>", escape(meaning)));
                    row
                })
                .collect();
            self.table("dropped", &head, &rows);
        }
        let heads = |first: &str| {
            let mut head = vec![first.to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "count".into() }),
            );
            head.push("meaning".into());
            head
        };
        if sides
            .iter()
            .any(|(_, r)| !r.measurements.handshake_out_of_turn.is_empty())
        {
            let rows: Vec<Vec<String>> = crate::storm::report::OUT_OF_TURN
                .iter()
                .filter(|(k, _)| {
                    sides
                        .iter()
                        .any(|(_, r)| r.measurements.handshake_out_of_turn.contains_key(*k))
                })
                .map(|(kind, meaning)| {
                    let mut row = vec![(*kind).to_string()];
                    row.extend(sides.iter().map(|(_, r)| {
                        r.measurements
                            .handshake_out_of_turn
                            .get(*kind)
                            .copied()
                            .unwrap_or(0)
                            .to_string()
                    }));
                    row.push(format!("<span class=\"text\">{}</span>", escape(meaning)));
                    row
                })
                .collect();
            self.table("out-of-turn", &heads("out of turn"), &rows);
        }
        if sides
            .iter()
            .any(|(_, r)| r.measurements.total_reconnect_time().is_some())
        {
            let ms = |d: Option<std::time::Duration>| {
                d.map_or("–".to_string(), |d| format!("{:.0} ms", d.as_secs_f64() * 1000.0))
            };
            let mut throngs = vec!["throng's".to_string()];
            throngs.extend(sides.iter().map(|(_, r)| ms(r.measurements.total_reconnect_time())));
            throngs.push("<span class=\"text\">first drop to last re-established (the outage users see)</span>".into());
            let mut clients = vec!["the clients'".to_string()];
            clients.extend(sides.iter().map(|(_, r)| ms(r.measurements.client_reconnect_time())));
            clients.push("<span class=\"text\">server accepting again to last re-established</span>".into());
            let mut head = heads("reconnect time");
            if !compare {
                head[1] = "time".into();
            }
            self.table("reconnect-time", &head, &[throngs, clients]);
        }
        let mut codes: Vec<u16> = sides
            .iter()
            .flat_map(|(_, r)| r.measurements.status.keys().copied())
            .collect();
        codes.sort_unstable();
        codes.dedup();
        if !codes.is_empty() {
            let mut head = vec!["status".to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "responses".into() }),
            );
            // A status an HTTP run's plan does not expect is check_failed.
            let unexpected = |code: u16| {
                sides.iter().any(
                    |(_, r)| matches!(&r.plan, Plan::Http(p) if p.grpc.is_none() && !p.expect_status.contains(code)),
                )
            };
            let rows: Vec<Vec<String>> = codes
                .iter()
                .map(|code| {
                    let mut row = vec![if unexpected(*code) {
                        format!("{code} (not expected: check_failed)")
                    } else {
                        code.to_string()
                    }];
                    for (_, r) in sides {
                        let n = r.measurements.status.get(code).copied().unwrap_or(0);
                        row.push(format!("{n} ({:.2}%)", pct(n, r.measurements.replies())));
                    }
                    row
                })
                .collect();
            self.table("status", &head, &rows);
        }
    }

    fn scenario(&mut self, r: &RunResult) {
        let (Plan::Run(p), Some(s)) = (&r.plan, &r.measurements.scenario) else {
            return;
        };
        self.h2("scenario", "Steps, groups and scenarios");
        let head: Vec<String> = [
            "tag",
            "requests",
            "errors",
            "status✗",
            "avg",
            "med",
            "p90",
            "p95",
            "p99",
            "max",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut rows: Vec<Vec<String>> = crate::scenario::report::tag_rows(s)
            .into_iter()
            .map(|(kind, name, t)| {
                let h = crate::scenario::report::row(&t.response);
                let mut row = vec![
                    escape(&format!("{kind}:{}", crate::format::name(name))),
                    t.requests.to_string(),
                    t.failed.to_string(),
                    t.unexpected_status.to_string(),
                ];
                row.extend([0, 2, 3, 4, 5, 6].iter().map(|&i| escape(&h[i])));
                row
            })
            .collect();
        for (name, h) in s.groups.iter().filter(|(_, h)| !h.is_empty()) {
            let c = crate::scenario::report::row(h);
            let mut row = vec![
                escape(&format!("group:{} (whole)", crate::format::name(name))),
                h.count().to_string(),
                String::new(),
                String::new(),
            ];
            row.extend([0, 2, 3, 4, 5, 6].iter().map(|&i| escape(&c[i])));
            rows.push(row);
        }
        if !rows.is_empty() {
            self.table("tags", &head, &rows);
            self.html.push_str(
                "<p class=\"plan\">status✗: responses whose status the step does not expect (counted as check_failed).</p>\n",
            );
        }
        let stages = crate::scenario::report::stage_rows(s, p);
        if !stages.is_empty() {
            self.h2("stages", "Load levels (per stage)");
            let head: Vec<String> = ["stage", "span", "planned", "VUs max", "req/s", "med", "p95", "errors"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = stages
                .iter()
                .map(|st| {
                    vec![
                        escape(&crate::format::name(&st.name)),
                        escape(&st.span),
                        escape(&st.planned),
                        st.vus.to_string(),
                        escape(&st.rate),
                        escape(&st.med),
                        escape(&st.p95),
                        escape(&st.errors),
                    ]
                })
                .collect();
            self.table("stages", &head, &rows);
        }
        if !s.checks.is_empty() {
            self.h2("checks", "Checks");
            let head: Vec<String> = ["check", "passes", "fails", "pass"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = s
                .checks
                .iter()
                .map(|(name, c)| {
                    let class = if c.fails == 0 { "pass" } else { "fail" };
                    vec![
                        format!(
                            "<span class=\"{class}\">{}</span> {}",
                            if c.fails == 0 { "✓" } else { "✗" },
                            escape(&crate::format::name(name))
                        ),
                        c.passes.to_string(),
                        c.fails.to_string(),
                        format!("{:.2}%", pct(c.passes, c.passes.saturating_add(c.fails))),
                    ]
                })
                .collect();
            self.table("checks", &head, &rows);
        }
        if !r.thresholds.is_empty() {
            let failed = r.thresholds.iter().filter(|v| !v.passed).count();
            self.h2(
                "thresholds",
                &format!(
                    "Thresholds: {} of {} held{}",
                    r.thresholds.len() - failed,
                    r.thresholds.len(),
                    if failed > 0 { " — FAILED" } else { "" }
                ),
            );
            let head: Vec<String> = ["threshold", "verdict", "detail"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = r
                .thresholds
                .iter()
                .map(|v| {
                    let (class, word) = if v.passed {
                        ("pass", "✓ held")
                    } else {
                        ("fail", "✗ failed")
                    };
                    vec![
                        escape(&crate::format::name(&v.threshold)),
                        format!("<span class=\"{class}\">{word}</span>"),
                        format!("<span class=\"text\">{}</span>", escape(&v.detail)),
                    ]
                })
                .collect();
            self.table("thresholds", &head, &rows);
        }
    }

    /// The text report, for copying into a ticket.
    fn text_report(&mut self, r: &RunResult) {
        let mut text = Vec::new();
        if crate::write(crate::View::Text, r, &mut text).is_err() {
            return;
        }
        self.h2("text", "Text report");
        let _ = writeln!(
            self.html,
            "<details><summary>as <code>throng report</code> prints it</summary><pre>{}</pre></details>",
            escape(&String::from_utf8_lossy(&text))
        );
    }
}

/// Rows of a table with one column per side: every name any side has (in
/// order of first appearance), escaped, with each side's value or nothing.
fn side_by_side(per_side: &[Vec<(String, String)>]) -> Vec<Vec<String>> {
    let mut names: Vec<&str> = Vec::new();
    for (k, _) in per_side.iter().flatten() {
        if !names.contains(&k.as_str()) {
            names.push(k);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mut row = vec![escape(name)];
            row.extend(
                per_side
                    .iter()
                    .map(|f| escape(f.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str()))),
            );
            row
        })
        .collect()
}

/// The run and the machine: (name, value).
fn facts(r: &RunResult) -> Vec<(&'static str, String)> {
    let e = &r.environment;
    let g = &r.generator;
    let mut v = vec![
        ("target", r.plan.target_url().to_string()),
        ("started", r.started_at.clone()),
        ("duration", format!("{:.2}s", r.duration_s)),
        ("throng", r.throng_version.clone()),
        ("host", e.hostname.clone()),
        ("system", e.os.clone()),
        ("cores", e.cores.to_string()),
        (
            "descriptors",
            format!("{} (hard limit {})", e.fd_limit_soft, e.fd_limit_hard),
        ),
        ("worker threads", g.threads.to_string()),
        (
            "generator CPU",
            format!(
                "{:.2}s user + {:.2}s system{}",
                g.cpu_user_s,
                g.cpu_system_s,
                crate::sections::cpu_share(r)
            ),
        ),
        ("peak memory", bytes(g.peak_rss_bytes as f64)),
    ];
    if let Some(settings) = r.plan.tls() {
        v.push(("TLS", settings.describe()));
    }
    if let Some(t) = &r.measurements.tls {
        let keys = |m: &std::collections::BTreeMap<String, u64>| m.keys().cloned().collect::<Vec<_>>().join(", ");
        v.push((
            "handshakes",
            format!(
                "{} ({} resumed): {} {} {}",
                t.handshakes,
                t.resumed,
                keys(&t.versions),
                keys(&t.groups),
                keys(&t.ciphers)
            ),
        ));
    }
    if r.parts.len() > 1 {
        v.push(("merged from", throng_plan::count(r.parts.len() as u64, "run")));
    }
    v
}

/// The headline figures: (name, value, detail).
fn figures(r: &RunResult) -> Vec<(String, String, String)> {
    let m = &r.measurements;
    let (o, what) = unit(r);
    let mut v = Vec::new();
    if let Some((scheduled, sent, dropped)) = crate::text::schedule(r) {
        v.push((
            "scheduled".to_string(),
            scheduled.to_string(),
            format!("{sent} sent, {dropped} dropped ({:.2}%)", pct(dropped, scheduled)),
        ));
    }
    v.extend([
        (
            what.to_string(),
            o.ended().to_string(),
            format!("in {:.2}s", r.duration_s),
        ),
        (
            format!("{what} per second"),
            format!("{:.1}", per_second(o.ok, r.duration_s)),
            "ok only".to_string(),
        ),
        (
            "ok".to_string(),
            format!("{:.2}%", pct(o.ok, o.ended())),
            o.ok.to_string(),
        ),
        (
            "errors".to_string(),
            o.failed().to_string(),
            format!("{:.2}%", pct(o.failed(), o.ended())),
        ),
    ]);
    if let Some(phase) = primary_phase(m)
        && let Some(h) = m.phase(phase)
    {
        let s = h.summary();
        v.push((format!("{phase} p50"), us(s.p50 as f64), String::new()));
        v.push((
            format!("{phase} p99"),
            us(s.p99 as f64),
            format!("max {}", us(s.max as f64)),
        ));
    }
    v.push((
        "peak connections".to_string(),
        m.peak_concurrent_connections.to_string(),
        "open at once".to_string(),
    ));
    if let Some(s) = &m.scenario {
        v.push(("peak VUs".to_string(), s.vus_max.to_string(), String::new()));
        v.push((
            "iterations".to_string(),
            s.iterations.to_string(),
            format!("{} dropped", s.dropped_iterations),
        ));
    }
    v.push((
        "received".to_string(),
        bytes(m.bytes.received as f64),
        format!("sent {}", bytes(m.bytes.sent as f64)),
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_metrics::{EncodedHist, SeriesPoint};

    fn run(url: &str, seconds: u64) -> RunResult {
        let mut doc: serde_json::Value = serde_json::json!({
            "schema": throng_result::SCHEMA,
            "throng_version": "0.1.0",
            "plan": null,
            "started_at": "2026-01-01T00:00:00.000Z",
            "started_at_unix_ms": 0,
            "duration_s": seconds as f64,
            "coordinated_omission_free": false,
            "interrupted": false,
            "environment": {"hostname": "h<o>st", "os": "Linux", "cores": 2, "fd_limit_soft": 1024, "fd_limit_hard": 4096},
            "generator": {"cpu_user_s": 0.1, "cpu_system_s": 0.2, "peak_rss_bytes": 1000000, "threads": 1},
            "measurements": serde_json::to_value(Measurements::default()).unwrap(),
            "parts": []
        });
        doc["plan"] = serde_json::to_value(Plan::Http(
            throng_plan::HttpPlan::from_args(throng_plan::HttpArgs {
                url: url.to_string(),
                headers: vec!["X-Test: <script>alert(1)</script>".to_string()],
                cores: 1,
                ..Default::default()
            })
            .unwrap(),
        ))
        .unwrap();
        let mut r: RunResult = serde_json::from_value(doc).unwrap();
        let mut total = Hist::new();
        for s in 0..seconds {
            let mut h = Hist::new();
            for v in 1..=100 {
                h.record_us(v * (s + 1) * 10);
            }
            total.add(&h).unwrap();
            r.measurements.series.push(SeriesPoint {
                second: s,
                requests: 100,
                ok: 99,
                errors: 1,
                concurrent_max: 4,
                phases: [("latency".to_string(), EncodedHist::new(&h))].into(),
                ..SeriesPoint::default()
            });
        }
        r.measurements.phases.insert("latency".into(), total);
        r.measurements.requests.attempted = 100 * seconds;
        r.measurements.requests.ok = 99 * seconds;
        r.measurements.requests.errors.insert("reset".into(), seconds);
        r.measurements.status.insert(200, 99 * seconds);
        r
    }

    /// Each chart's `data-points` values, by `data-chart`.
    fn points(html: &str) -> Vec<(String, Vec<usize>)> {
        html.split("<svg class=\"chart\" data-chart=\"")
            .skip(1)
            .map(|part| {
                let id = part.split('"').next().unwrap_or_default().to_string();
                let body = part.split("</svg>").next().unwrap_or_default();
                let n = body
                    .split("data-points=\"")
                    .skip(1)
                    .filter_map(|p| p.split('"').next()?.parse().ok())
                    .collect();
                (id, n)
            })
            .collect()
    }

    #[test]
    fn one_run_has_every_chart_with_a_point_per_second() {
        let html = render(&run("http://127.0.0.1:1/?a=1&b=<2>", 5));
        let charts = points(&html);
        let ids: Vec<&str> = charts.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["throughput", "errors", "active", "latency", "spectrum", "phases"]);
        for (id, n) in &charts[..4] {
            assert!(!n.is_empty() && n.iter().all(|&n| n == 5), "{id}: {n:?}");
        }
        // 500 samples: two decades of spectrum at 20 points each, and the max.
        assert_eq!(charts[4].1, [55]);
        assert_eq!(html.matches("<g class=\"range\"").count(), 1);
    }

    #[test]
    fn user_text_is_escaped_and_nothing_is_fetched() {
        let html = render(&run("http://127.0.0.1:1/?a=1&b=<2>", 2));
        assert!(!html.contains("<script"), "the header value must be escaped");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("?a=1&amp;b=&lt;2&gt;"));
        assert!(html.contains("h&lt;o&gt;st"));
        assert!(html.contains(CSP));
        for attr in [" src=", " href=", "url(", "@import", "<link", "<img"] {
            assert!(!html.contains(attr), "{attr} in the page");
        }
    }

    #[test]
    fn compare_overlays_the_sides() {
        let (a, b) = (run("http://127.0.0.1:1/", 3), run("http://127.0.0.1:2/", 4));
        let html = render_compare(&[("direct".to_string(), &a), ("nat".to_string(), &b)]);
        let charts = points(&html);
        let throughput = &charts.iter().find(|(id, _)| id == "throughput").unwrap().1;
        assert_eq!(throughput, &[3, 3, 4, 4]);
        let spectrum = &charts.iter().find(|(id, _)| id == "spectrum").unwrap().1;
        assert_eq!(spectrum.len(), 2);
        assert!(html.contains("data-series=\"direct · requests\""));
        assert!(html.contains(PALETTE[1]), "the second side has its own colour");
        assert_eq!(html.matches("<g class=\"range\"").count(), 2);
    }

    #[test]
    fn a_trend_has_a_point_per_run_on_every_chart() {
        let runs = [
            run("http://127.0.0.1:1/", 2),
            run("http://127.0.0.1:1/", 3),
            run("http://127.0.0.1:1/", 4),
        ];
        let labels = ["v1", "<v2>", "v3"];
        let t = crate::trend::Trend {
            plan: "http GET http://127.0.0.1:1/".into(),
            fingerprint: "0123456789abcdef".into(),
            unit: "requests".into(),
            notes: vec!["1 entry of another plan skipped".into()],
            points: labels
                .iter()
                .zip(&runs)
                .map(|(l, r)| crate::trend::Point::of(l, r))
                .collect(),
        };
        assert_eq!(t.points[2].ended, 400);
        assert_eq!(t.points[2].failed, 4);
        let html = render_trend(&t);
        let charts = points(&html);
        let ids: Vec<&str> = charts.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["trend-latency", "trend-throughput", "trend-errors"]);
        assert_eq!(charts[0].1, [3, 3], "p50 and p99, a point per run");
        assert_eq!(charts[1].1, [3]);
        assert_eq!(charts[2].1, [3]);
        assert!(html.contains("&lt;v2&gt;") && !html.contains("<v2>"));
        assert!(html.contains("1 entry of another plan skipped"));
        assert_eq!(html.matches("<tr><td>").count(), 3, "a table row per run");
        assert!(html.contains(CSP));
    }

    #[test]
    fn side_by_side_lines_up_figures_by_name() {
        let a = vec![("x".to_string(), "1".to_string()), ("y".to_string(), "2".to_string())];
        let b = vec![("y".to_string(), "3".to_string()), ("z<".to_string(), "4".to_string())];
        assert_eq!(
            side_by_side(&[a, b]),
            [vec!["x", "1", ""], vec!["y", "2", "3"], vec!["z&lt;", "", "4"]]
        );
    }

    #[test]
    fn spectrum_runs_from_zero_percent_to_the_max() {
        let mut h = Hist::new();
        for v in 1..=1000 {
            h.record_us(v);
        }
        let s = spectrum(&h);
        assert_eq!(s.first(), Some(&(1.0, 1.0)));
        assert_eq!(s.last(), Some(&(1000.0, 1000.0)));
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
}
