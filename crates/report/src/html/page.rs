//! The page being written: its frame, header, summary, charts and phases.

use std::fmt::Write as _;

use throng_metrics::Phase;
use throng_result::RunResult;

use crate::chart::{Axis, LineChart, PALETTE, RangeChart, RangeRow, Unit, escape};
use crate::format::{primary_phase, us};

use super::facts::{facts, figures, headline, plan_lines, side_by_side};
use super::lines::{Line, active_lines, chart_of, error_lines, latency_lines, line, spectrum, throughput_lines};

/// The page's Content-Security-Policy: nothing may be fetched; inline
/// styles and `data:` images are allowed.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// The HTML page being written.
pub(super) struct Page {
    pub(super) html: String,
}

pub(super) const STYLE: &str = "
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
    pub(super) fn new(title: &str) -> Page {
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

    pub(super) fn finish(mut self) -> String {
        let _ = write!(
            self.html,
            "<footer>Written by throng {}. Self-contained: no scripts, fonts or images are fetched.</footer>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION")
        );
        self.html
    }

    pub(super) fn h2(&mut self, id: &str, title: &str) {
        let _ = writeln!(self.html, "<h2 id=\"{id}\">{}</h2>", escape(title));
    }

    /// A table: `head` cells, then rows of already-escaped cells.
    pub(super) fn table(&mut self, class: &str, head: &[String], rows: &[Vec<String>]) {
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

    pub(super) fn header(&mut self, r: &RunResult) {
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

    pub(super) fn compare_header(&mut self, sides: &[(String, &RunResult)]) {
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

    pub(super) fn summary(&mut self, sides: &[(&str, &RunResult)]) {
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

    pub(super) fn charts(&mut self, sides: &[(String, &RunResult)]) {
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

    pub(super) fn phases(&mut self, sides: &[(String, &RunResult)]) {
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
}
