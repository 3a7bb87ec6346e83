//! The per-second series as CSV, in long ("tidy") form: one row per second
//! per metric.
//!
//! ```text
//! second,unix_ms,metric,value
//! 0,1767225600000,requests,9876
//! 0,1767225600000,latency.p99_us,412
//! ```
//!
//! Long form because the set of metrics depends on the run (phases that
//! occurred, scenarios' VUs): a fixed header would either lie or change
//! shape between runs. pandas turns it wide with
//! `df.pivot(index="second", columns="metric", values="value")`; a
//! spreadsheet with a pivot table. Metrics (each only where the run has it):
//!
//! - counts in the second: `requests` (ended: ok + errors), `ok`, `errors`,
//!   `replies`, `dropped`, `bytes_sent`, `bytes_received`,
//!   `connections_opened`, `connection_errors`;
//! - the failures by class: `errors.CLASS` and `connection_errors.CLASS`
//!   (e.g. `errors.timeout.response`), for every class the run saw;
//! - `connections_open_max`: most connections open at once in the second;
//! - scenario runs: `iterations`, `dropped_iterations`, `vus` and
//!   `vus.SCENARIO`;
//! - per phase (`schedule_lag`, `connect`, `tls`, `wait`, … see the README):
//!   `PHASE.count`, `PHASE.mean_us`, `PHASE.p50_us`, `PHASE.p90_us`,
//!   `PHASE.p99_us`, `PHASE.max_us`, from that second's HDR histogram
//!   (microseconds).

use std::collections::BTreeMap;
use std::io::{self, Write};

use throng_metrics::{Phase, ScenarioSecond, SeriesPoint};
use throng_result::{Plan, RunResult};

/// The header line's columns.
pub const SERIES_HEADER: &str = "second,unix_ms,metric,value";

/// Writes `result`'s per-second series as long-form CSV.
pub fn write_series(result: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "{SERIES_HEADER}")?;
    let scenario_names: Vec<&str> = match &result.plan {
        Plan::Run(p) => p.scenarios.iter().map(|s| s.name.as_str()).collect(),
        _ => Vec::new(),
    };
    let scenario: BTreeMap<u64, &ScenarioSecond> = result
        .measurements
        .scenario
        .as_ref()
        .map(|s| s.series.iter().map(|p| (p.second, p)).collect())
        .unwrap_or_default();
    let empty = SeriesPoint::default();
    let points: BTreeMap<u64, &SeriesPoint> = result.measurements.series.iter().map(|p| (p.second, p)).collect();
    let mut seconds: Vec<u64> = points.keys().chain(scenario.keys()).copied().collect();
    seconds.sort_unstable();
    seconds.dedup();
    let is_http = result.unit() == throng_result::Unit::Requests || !result.measurements.requests.is_empty();
    let classes = |of: fn(&SeriesPoint) -> &BTreeMap<String, u64>| {
        let mut all: Vec<&str> = points.values().flat_map(|p| of(p).keys().map(String::as_str)).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let request_classes = classes(|p| &p.error_classes);
    let connection_classes = classes(|p| &p.connection_error_classes);
    for second in seconds {
        let p = points.get(&second).copied().unwrap_or(&empty);
        let unix_ms = result.started_at_unix_ms + second * 1000;
        let mut row = |metric: &str, value: &dyn std::fmt::Display| writeln!(w, "{second},{unix_ms},{metric},{value}");
        if is_http {
            row("requests", &p.requests)?;
            row("ok", &p.ok)?;
            row("errors", &p.errors)?;
            for class in &request_classes {
                row(
                    &format!("errors.{class}"),
                    &p.error_classes.get(*class).copied().unwrap_or(0),
                )?;
            }
            row("replies", &p.replies)?;
            row("dropped", &p.dropped)?;
        }
        row("bytes_sent", &p.bytes_sent)?;
        row("bytes_received", &p.bytes_received)?;
        row("connections_opened", &p.connections_opened)?;
        row("connection_errors", &p.connection_errors)?;
        for class in &connection_classes {
            let n = p.connection_error_classes.get(*class).copied().unwrap_or(0);
            row(&format!("connection_errors.{class}"), &n)?;
        }
        row("connections_open_max", &p.concurrent_max)?;
        if result.measurements.scenario.is_some() {
            let s = scenario.get(&second);
            row("iterations", &s.map_or(0, |s| s.iterations))?;
            row("dropped_iterations", &s.map_or(0, |s| s.dropped_iterations))?;
            row("vus", &s.map_or(0, |s| s.vus))?;
            for (i, name) in scenario_names.iter().enumerate() {
                let vus = s.and_then(|s| s.vus_by_scenario.get(i)).copied().unwrap_or(0);
                row(&format!("vus.{}", field(name)), &vus)?;
            }
        }
        for phase in Phase::ALL {
            let Some(encoded) = p.phases.get(phase.name()) else {
                continue;
            };
            let h = encoded.decode().map_err(io::Error::other)?;
            let name = phase.name();
            row(&format!("{name}.count"), &h.count())?;
            row(&format!("{name}.mean_us"), &format_args!("{:.1}", h.mean()))?;
            row(&format!("{name}.p50_us"), &h.quantile(0.50))?;
            row(&format!("{name}.p90_us"), &h.quantile(0.90))?;
            row(&format!("{name}.p99_us"), &h.quantile(0.99))?;
            row(&format!("{name}.max_us"), &h.max())?;
        }
    }
    Ok(())
}

/// A CSV field: quoted (with doubled quotes) when it holds a comma, a
/// quote or a line break (RFC 4180).
pub fn field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        std::borrow::Cow::Owned(format!("\"{}\"", text.replace('"', "\"\"")))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_metrics::{EncodedHist, Hist, Measurements};

    fn result_with(series: Vec<SeriesPoint>) -> RunResult {
        crate::testing::test_result(Measurements {
            series,
            ..Measurements::default()
        })
    }

    #[test]
    fn one_row_per_second_per_metric_with_phase_percentiles() {
        let mut h = Hist::new();
        for v in 1..=100 {
            h.record_us(v);
        }
        let series = vec![
            SeriesPoint {
                second: 0,
                requests: 100,
                ok: 99,
                errors: 1,
                phases: [("latency".to_string(), EncodedHist::new(&h))].into(),
                ..SeriesPoint::default()
            },
            SeriesPoint {
                second: 1,
                requests: 5,
                ok: 5,
                ..SeriesPoint::default()
            },
        ];
        let mut out = Vec::new();
        write_series(&result_with(series), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], SERIES_HEADER);
        assert!(lines.contains(&"0,1000000,requests,100"));
        assert!(lines.contains(&"1,1001000,requests,5"));
        assert!(lines.contains(&"0,1000000,latency.p99_us,99"));
        assert!(lines.contains(&"0,1000000,latency.max_us,100"));
        assert!(lines.contains(&"0,1000000,latency.count,100"));
        assert!(!lines.iter().any(|l| l.starts_with("1,") && l.contains("latency")));
        assert!(lines.iter().skip(1).all(|l| l.split(',').count() == 4));
    }

    #[test]
    fn fields_with_commas_are_quoted() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
