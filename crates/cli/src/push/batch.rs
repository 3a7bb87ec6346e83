//! The collection side of a push: a run's measurements become a [`Batch`] of
//! labelled series (counters, gauges, exponential histograms) that knows no
//! wire format. Encoders (Prometheus remote write, OTLP) read a batch;
//! nothing here names one.
//!
//! ```text
//!  Measurements (cumulative, merged) ─► collect() ─► Batch { series: [name, labels, Point] }
//!  Hist (HDR, µs, 3 digits) ──────────► Exponential (schema 8, seconds)
//! ```
//!
//! The names are those `/metrics` shows (crates/cli/src/prometheus.rs) where
//! they mean the same thing; histograms keep the base name
//! (`throng_phase_duration_seconds`), as native histograms do.

use std::collections::BTreeMap;

use throng_metrics::{Hist, Measurements, ScenarioStats};

use crate::figures::AgentFigures;

/// The exponential schema: bucket boundaries are powers of 2^(2^-8), each
/// bucket 0.27 % wide, the finest Prometheus (and OTLP's scale 8) allows.
pub const SCHEMA: i32 = 8;

/// Samples at or below this many seconds go to the zero bucket: only 0 µs
/// (an HDR histogram at microsecond resolution has nothing between 0 and 1 µs).
pub const ZERO_THRESHOLD: f64 = 1e-7;

/// Every metric name a push may carry, for the dashboard test and the guide.
#[cfg(test)]
pub const NAMES: &[&str] = &[
    "throng_requests_total",
    "throng_responses_total",
    "throng_connections_total",
    "throng_dropped_total",
    "throng_bytes_sent_total",
    "throng_bytes_received_total",
    "throng_active_connections",
    "throng_vus",
    "throng_running",
    "throng_phase_duration_seconds",
    "throng_target_requests_total",
    "throng_target_response_seconds",
    "throng_iterations_total",
    "throng_dropped_iterations_total",
    "throng_checks_total",
    "throng_step_requests_total",
    "throng_step_response_seconds",
    "throng_custom_total",
    "throng_custom_rate_total",
    "throng_custom_gauge",
    "throng_custom_trend",
    "throng_custom_trend_values_total",
];

/// A histogram with exponential buckets, in seconds: bucket `i` holds the
/// samples in (2^((i-1)/256), 2^(i/256)] (Prometheus' indexing; OTLP's
/// index is `i - 1`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exponential {
    /// Samples in all (zero bucket included): the HDR histogram's count, exactly.
    pub count: u64,
    /// Sum of the samples, seconds (each HDR bucket at its median value).
    pub sum: f64,
    /// Samples of 0 µs.
    pub zero_count: u64,
    /// Positive buckets by index, only those with samples.
    pub buckets: BTreeMap<i32, u64>,
}

/// One value of a series.
#[derive(Clone, Debug, PartialEq)]
pub enum Point {
    /// Only ever grows (across `--repeat` runs too).
    Counter(u64),
    /// A value now.
    Gauge(u64),
    /// A cumulative distribution.
    Histogram(Exponential),
    /// A value that need not be whole (a custom metric's): a counter's
    /// running sum when `counter`, else a value now.
    Real {
        /// The value.
        value: f64,
        /// A counter (a sum of what was added), not a gauge.
        counter: bool,
    },
}

/// A labelled series: `name{labels} point`.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The full metric name (`throng_requests_total`).
    pub name: &'static str,
    /// Label pairs besides the common ones, in the order given.
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub point: Point,
}

/// Everything measured at one instant, with the labels every series carries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    /// When the cumulative counts began (the push's start), ms since the
    /// Unix epoch; before `unix_ms`.
    pub start_unix_ms: i64,
    /// When, ms since the Unix epoch.
    pub unix_ms: i64,
    /// Labels on every series (`job`, `run_id`, `agent`).
    pub common: Vec<(&'static str, String)>,
    /// The series.
    pub series: Vec<Series>,
}

impl Batch {
    /// Samples it holds (one per series).
    pub fn samples(&self) -> u64 {
        self.series.len() as u64
    }
}

/// Gauges read at the moment of a batch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gauges {
    /// Connections open now.
    pub active_connections: u64,
    /// VUs active now.
    pub vus: u64,
    /// True while a run lasts.
    pub running: bool,
}

/// Converts an HDR histogram in microseconds to exponential buckets in
/// seconds. Each HDR bucket (3 significant digits: at most 1/1024 of its
/// value wide) goes whole into the exponential bucket holding its median
/// value, so counts are exact and a bucket boundary moves by at most one
/// HDR bucket; a quantile read from the result is within one exponential
/// bucket (0.27 %) of the HDR histogram's.
pub fn exponential(h: &Hist) -> Exponential {
    let mut e = Exponential::default();
    if h.is_empty() {
        return e;
    }
    let inner = h.inner();
    let scale = f64::from(1u32 << SCHEMA);
    for v in inner.iter_recorded() {
        let n = v.count_at_value();
        let us = inner.median_equivalent(v.value_iterated_to());
        e.count = e.count.saturating_add(n);
        if us == 0 {
            e.zero_count = e.zero_count.saturating_add(n);
            continue;
        }
        let s = us as f64 / 1e6;
        e.sum += s * n as f64;
        // log2 of a value between 1e-6 and 2^47/1e6 times 256 is well within i32.
        let index = (s.log2() * scale).ceil() as i32;
        *e.buckets.entry(index).or_default() += n;
    }
    e
}

/// The series of `m` (everything measured so far, added up over runs).
pub fn collect(m: &Measurements, gauges: Gauges, step_scenarios: &BTreeMap<String, String>) -> Vec<Series> {
    let mut out = Vec::new();
    let mut push = |name, labels: Vec<(&'static str, String)>, point| out.push(Series { name, labels, point });

    push(
        "throng_requests_total",
        vec![("outcome", "ok".into())],
        Point::Counter(m.requests.ok),
    );
    for (class, &n) in &m.requests.errors {
        push(
            "throng_requests_total",
            vec![("outcome", class.clone())],
            Point::Counter(n),
        );
    }
    for (&n, class) in m
        .status_classes()
        .iter()
        .zip(["1xx", "2xx", "3xx", "4xx", "5xx", "other"])
    {
        push(
            "throng_responses_total",
            vec![("class", class.into())],
            Point::Counter(n),
        );
    }
    push(
        "throng_connections_total",
        vec![("outcome", "ok".into())],
        Point::Counter(m.connections.ok),
    );
    for (class, &n) in &m.connections.errors {
        push(
            "throng_connections_total",
            vec![("outcome", class.clone())],
            Point::Counter(n),
        );
    }
    push("throng_dropped_total", vec![], Point::Counter(m.dropped));
    push("throng_bytes_sent_total", vec![], Point::Counter(m.bytes.sent));
    push("throng_bytes_received_total", vec![], Point::Counter(m.bytes.received));
    push(
        "throng_active_connections",
        vec![],
        Point::Gauge(gauges.active_connections),
    );
    push("throng_vus", vec![], Point::Gauge(gauges.vus));
    push("throng_running", vec![], Point::Gauge(u64::from(gauges.running)));
    for (phase, h) in &m.phases {
        push(
            "throng_phase_duration_seconds",
            vec![("phase", phase.clone())],
            Point::Histogram(exponential(h)),
        );
    }
    if let Some(s) = &m.scenario {
        if s.tags.keys().any(|k| k.starts_with("target:")) {
            targets(&mut out, s);
        } else {
            scenario(&mut out, s, step_scenarios);
        }
        out.extend(crate::custom_series::custom(s).into_iter().map(|c| Series {
            name: c.name,
            labels: c.labels,
            point: Point::Real {
                value: c.value,
                counter: c.counter,
            },
        }));
    }
    out
}

/// One agent's own series (`throng coordinate --per-agent`): each with an
/// `agent` label first.
pub fn collect_agent(a: &AgentFigures, step_scenarios: &BTreeMap<String, String>) -> Vec<Series> {
    let gauges = Gauges {
        active_connections: a.open_connections,
        vus: a.vus,
        running: a.running,
    };
    let mut out = collect(&a.measurements, gauges, step_scenarios);
    for s in &mut out {
        s.labels.insert(0, ("agent", a.agent.clone()));
    }
    out
}

/// An http run's targets (several): requests by result, response time.
fn targets(out: &mut Vec<Series>, s: &ScenarioStats) {
    for (key, t) in &s.tags {
        let Some(target) = key.strip_prefix("target:") else {
            continue;
        };
        for (result, n) in [
            ("ok", t.requests.saturating_sub(t.failed)),
            ("failed", t.failed),
            ("interrupted", t.interrupted),
        ] {
            out.push(Series {
                name: "throng_target_requests_total",
                labels: vec![("target", target.into()), ("result", result.into())],
                point: Point::Counter(n),
            });
        }
        out.push(Series {
            name: "throng_target_response_seconds",
            labels: vec![("target", target.into())],
            point: Point::Histogram(exponential(&t.response)),
        });
    }
}

/// A scenario run: iterations, checks, each step's requests and response time.
fn scenario(out: &mut Vec<Series>, s: &ScenarioStats, step_scenarios: &BTreeMap<String, String>) {
    out.push(Series {
        name: "throng_iterations_total",
        labels: vec![],
        point: Point::Counter(s.iterations),
    });
    out.push(Series {
        name: "throng_dropped_iterations_total",
        labels: vec![],
        point: Point::Counter(s.dropped_iterations),
    });
    for (check, c) in &s.checks {
        for (result, n) in [("pass", c.passes), ("fail", c.fails)] {
            out.push(Series {
                name: "throng_checks_total",
                labels: vec![("check", check.clone()), ("result", result.into())],
                point: Point::Counter(n),
            });
        }
    }
    for (key, t) in &s.tags {
        let Some(step) = key.strip_prefix("step:") else {
            continue;
        };
        let sc = step_scenarios.get(step).cloned().unwrap_or_default();
        for (result, n) in [
            ("ok", t.requests.saturating_sub(t.failed)),
            ("failed", t.failed),
            ("interrupted", t.interrupted),
        ] {
            out.push(Series {
                name: "throng_step_requests_total",
                labels: vec![
                    ("scenario", sc.clone()),
                    ("step", step.into()),
                    ("result", result.into()),
                ],
                point: Point::Counter(n),
            });
        }
        out.push(Series {
            name: "throng_step_response_seconds",
            labels: vec![("scenario", sc.clone()), ("step", step.into())],
            point: Point::Histogram(exponential(&t.response)),
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn counts_are_exact_and_buckets_hold_their_values() {
        let mut h = Hist::new();
        for us in 1..20_000u64 {
            h.record_us(us * 7);
        }
        h.record_us(0);
        h.record_us(1_000_000);
        let e = exponential(&h);
        assert_eq!(e.count, h.count());
        assert_eq!(e.zero_count, 1);
        assert_eq!(e.zero_count + e.buckets.values().sum::<u64>(), e.count);
        // One second is 2^0, the upper bound of bucket 0; HDR holds it in a
        // bucket 512 µs wide whose median, 1.000192 s, is in bucket 1.
        assert_eq!(
            e.buckets.range(-3..3).collect::<Vec<_>>(),
            [(&1, &1)],
            "the samples near 1 s"
        );
        // Every bucket's index brackets the values that went into it, within
        // one HDR bucket (1/1024 of the value).
        let base = 2f64.powf(2f64.powi(-SCHEMA));
        for v in h.inner().iter_recorded().filter(|v| v.value_iterated_to() > 0) {
            let us = h.inner().median_equivalent(v.value_iterated_to()) as f64 / 1e6;
            let i = (us.log2() * 256.0).ceil() as i32;
            assert!(base.powi(i - 1) < us * (1.0 + 1e-9) && us <= base.powi(i) * (1.0 + 1e-9));
        }
        let mean = e.sum / e.count as f64;
        assert!(
            (mean * 1e6 - h.mean()).abs() / h.mean() < 1e-3,
            "{mean} vs {}",
            h.mean()
        );
    }

    #[test]
    fn the_remote_write_dashboard_asks_only_for_metrics_throng_pushes() {
        crate::prometheus::tests::check_dashboard("throng-remote-write.json", NAMES);
    }

    #[test]
    fn an_empty_histogram_is_zero() {
        assert_eq!(exponential(&Hist::new()), Exponential::default());
    }

    #[test]
    fn names_are_those_of_the_scrape_where_they_mean_the_same() {
        let mut m = Measurements::default();
        m.requests.ok = 3;
        m.phases.insert("latency".into(), Hist::new());
        let series = collect(&m, Gauges::default(), &BTreeMap::new());
        for s in &series {
            assert!(NAMES.contains(&s.name), "{} is not in NAMES", s.name);
            let scraped = match s.point {
                Point::Histogram(_) => format!("{}_count", s.name),
                _ => s.name.to_string(),
            };
            assert!(
                crate::prometheus::NAMES.contains(&scraped.as_str()),
                "{scraped}: /metrics has no such name"
            );
        }
        assert!(series.contains(&Series {
            name: "throng_requests_total",
            labels: vec![("outcome", "ok".into())],
            point: Point::Counter(3)
        }));
    }
}
