//! `throng compare`: two sides of an A/B, each one or more runs, figure by
//! figure, with statistics that say how far the difference can be trusted.
//!
//! ```text
//!  Side A (label, runs) ─┐                     ┌─ write_text / write_markdown
//!                        ├─ Comparison::new ───┼─ write_json   (throng.compare/v1)
//!  Side B (label, runs) ─┘   figures, tests,   └─ write_columns (ab | httperf, A | B)
//!                            warnings
//! ```
//!
//! **Figures** are read from each side's runs added up
//! ([`RunResult::merge_sequential`]): percentiles are those of all samples.
//!
//! **Tests** (throughput and the headline phases' p50 and p99) need several
//! values per side. With at least two runs on each side the values are the
//! runs' own figures ([`Basis::Runs`]); with fewer they are the seconds of
//! the runs' per-second series ([`Basis::Seconds`]), which is weaker: the
//! seconds of one run share its conditions and are not independent. Each
//! test gives the difference of medians (B − A), its percentile-bootstrap
//! interval ([`crate::stats::bootstrap_median_diff`], seeded, so the output
//! is reproducible), and the two-sided Mann–Whitney U p-value. A difference
//! is *significant* when the interval excludes 0, p is below 1 − confidence,
//! and it is at least [`Options::min_effect`] of A's median; detectable but
//! smaller than that it is *negligible*.
//!
//! The data model ([`Comparison`], [`Side`], [`Figure`], [`Test`]) is public
//! so other views (HTML) can draw the same comparison.

use std::io::{self, Write};

use serde::Serialize;
use throng_metrics::{Hist, SeriesPoint};
use throng_result::{Plan, ResultError, RunResult};

use crate::format::{LABEL_CHARS, bytes, chars, clip, name, us};
use crate::stats::{self, Interval, MannWhitney, Spread};

/// Schema identifier of the JSON comparison (`--format json`).
pub const SCHEMA: &str = "throng.compare/v1";

/// One side of a comparison: a label and the runs it is made of.
#[derive(Clone, Debug)]
pub struct Side {
    /// How the report names this side (`direct`, `nat`, `A`).
    pub label: String,
    /// Where the runs came from (file names), for the report's header.
    pub sources: Vec<String>,
    /// Every run, in order (a result set contributes all of its runs).
    pub runs: Vec<RunResult>,
}

/// Settings of the statistics.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Confidence of the bootstrap interval, e.g. 0.95; the Mann–Whitney
    /// test's threshold is 1 − confidence.
    pub confidence: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Seed of the bootstrap's generator.
    pub seed: u64,
    /// Smallest relative difference (of A's median) worth calling
    /// significant, e.g. 0.01 for 1%; 0 calls every detectable one.
    pub min_effect: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            confidence: 0.95,
            resamples: 10_000,
            seed: DEFAULT_SEED,
            min_effect: 0.01,
        }
    }
}

/// The bootstrap's seed unless one is given ("throng" in ASCII).
pub const DEFAULT_SEED: u64 = 0x7468_726f_6e67;

/// What the tests' values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Each run's figure (two or more runs per side).
    Runs,
    /// Each full second's figure from the per-second series (fewer runs):
    /// weaker, the seconds of one run are not independent.
    Seconds,
}

/// The unit of a figure, which decides how it is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A count.
    Count,
    /// Per second.
    PerSecond,
    /// Microseconds.
    Micros,
    /// Seconds.
    Seconds,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    BytesPerSecond,
    /// A percentage (0–100).
    Percent,
}

/// One figure both sides have.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// The group it is shown in (`summary`, `phase latency`, `outcomes`, …).
    pub section: String,
    /// Its name within the group (`throughput (ok/s)`, `p99`, `refused`).
    pub name: String,
    /// Its unit.
    pub unit: Unit,
    /// Side A's value.
    pub a: f64,
    /// Side B's value.
    pub b: f64,
}

impl Figure {
    /// B − A.
    pub fn diff(&self) -> f64 {
        self.b - self.a
    }

    /// (B − A) / A; None when A is 0.
    pub fn relative(&self) -> Option<f64> {
        relative(self.diff(), self.a)
    }
}

fn relative(diff: f64, base: f64) -> Option<f64> {
    if base == 0.0 { None } else { Some(diff / base) }
}

/// What a test concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The interval excludes 0, p is below the threshold, and the
    /// difference is at least the minimum effect.
    Significant,
    /// Detectable, but smaller than the minimum effect.
    Negligible,
    /// Not distinguishable from noise with these values.
    NotSignificant,
}

impl Verdict {
    /// As printed.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Significant => "significant",
            Verdict::Negligible => "negligible",
            Verdict::NotSignificant => "not significant",
        }
    }
}

/// A statistical test of one figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Test {
    /// The figure (`throughput (ok/s)`, `latency p50`).
    pub name: String,
    /// Its unit.
    pub unit: Unit,
    /// What the values are.
    pub basis: Basis,
    /// Side A's values (one per run or per second).
    pub a: Vec<f64>,
    /// Side B's values.
    pub b: Vec<f64>,
    /// Median of A's values.
    pub median_a: f64,
    /// Median of B's values.
    pub median_b: f64,
    /// median_b − median_a.
    pub diff: f64,
    /// (median_b − median_a) / median_a; None when A's median is 0.
    pub relative: Option<f64>,
    /// Bootstrap interval of the difference.
    #[serde(serialize_with = "ser_interval")]
    pub interval: Option<Interval>,
    /// Mann–Whitney U test.
    #[serde(serialize_with = "ser_mw")]
    pub mann_whitney: Option<MannWhitney>,
    /// A's own spread.
    #[serde(serialize_with = "ser_spread")]
    pub spread_a: Spread,
    /// B's own spread.
    #[serde(serialize_with = "ser_spread")]
    pub spread_b: Spread,
    /// The conclusion.
    pub verdict: Verdict,
}

fn ser_interval<S: serde::Serializer>(v: &Option<Interval>, s: S) -> Result<S::Ok, S::Error> {
    v.map(|i| [i.low, i.high]).serialize(s)
}

fn ser_mw<S: serde::Serializer>(v: &Option<MannWhitney>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Mw {
        u: f64,
        p_value: f64,
        exact: bool,
    }
    v.map(|m| Mw {
        u: m.u,
        p_value: m.p_value,
        exact: m.exact,
    })
    .serialize(s)
}

fn ser_spread<S: serde::Serializer>(v: &Spread, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Sp {
        width: f64,
        kind: &'static str,
    }
    Sp {
        width: v.width,
        kind: v.kind.name(),
    }
    .serialize(s)
}

/// Why two sides cannot be compared.
#[derive(Debug)]
#[non_exhaustive]
pub enum CompareError {
    /// A side has no runs.
    Empty(String),
    /// A side mixes results of different commands.
    MixedSide(String),
    /// The sides' results are of kinds whose figures mean different things.
    Kinds {
        /// A's kind.
        a: &'static str,
        /// B's kind.
        b: &'static str,
    },
    /// Adding a side's runs up failed.
    Merge(String, ResultError),
}

impl std::fmt::Display for CompareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompareError::Empty(l) => write!(f, "side {l} has no runs"),
            CompareError::MixedSide(l) => write!(
                f,
                "side {l} mixes results of different commands (http, storm, run); give one kind per side"
            ),
            CompareError::Kinds { a, b } => write!(
                f,
                "A is {} result and B {} result: their figures measure different things; compare results of the \
                 same kind",
                article(a),
                article(b)
            ),
            CompareError::Merge(l, e) => write!(f, "side {l}: {e}"),
        }
    }
}

impl std::error::Error for CompareError {}

fn article(kind: &str) -> String {
    match kind {
        "http" => "an http".to_string(),
        "run" => "a scenario (run)".to_string(),
        k => format!("a {k}"),
    }
}

/// The command that produced a result: `http`, `storm` or `run`.
pub fn kind(r: &RunResult) -> &'static str {
    match r.plan {
        Plan::Http(_) => "http",
        Plan::Storm(_) => "storm",
        Plan::Run(_) => "run",
    }
}

/// The unit of work a run counts throughput in: ok requests, or established
/// connections for storms.
pub fn throughput(r: &RunResult) -> f64 {
    throng_result::per_second(work(r), r.duration_s)
}

fn work(r: &RunResult) -> u64 {
    r.unit_outcomes().ok
}

/// The name of [`throughput`] in reports.
pub fn throughput_name(r: &RunResult) -> &'static str {
    match r.unit() {
        throng_result::Unit::Connections => "established/s",
        throng_result::Unit::Requests => "throughput (ok/s)",
    }
}

/// The phases whose p50 and p99 are tested: a request's `latency`, or for
/// storms the steps of establishing a connection.
pub fn headline_phases(r: &RunResult) -> Vec<&'static str> {
    let wanted: &[&'static str] = match r.unit() {
        throng_result::Unit::Connections => &["connect", "tls", "handshake"],
        throng_result::Unit::Requests => &["latency"],
    };
    wanted
        .iter()
        .copied()
        .filter(|p| r.measurements.phase(p).is_some())
        .collect()
}

/// Two sides, figure by figure, with tests and warnings.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Side A.
    pub a: Side,
    /// Side B.
    pub b: Side,
    /// A's runs added up.
    pub merged_a: RunResult,
    /// B's runs added up.
    pub merged_b: RunResult,
    /// The statistics' settings.
    pub options: Options,
    /// What the tests' values are.
    pub basis: Basis,
    /// Every figure both sides have.
    pub figures: Vec<Figure>,
    /// Throughput and headline percentiles, tested.
    pub tests: Vec<Test>,
    /// What the reader must know before trusting the tests.
    pub warnings: Vec<String>,
    /// How the sides' plans differ (command, target, rate, concurrency,
    /// protocol…; [`crate::gate::mixed_plans`]); empty when they ran the same.
    pub mixed: Vec<String>,
    /// The `--fail-on` rules judged ([`Comparison::judge`]); the views print
    /// the verdict first.
    pub gate: Option<crate::gate::Gate>,
}

impl Comparison {
    /// Compares `a` with `b`.
    pub fn new(a: Side, b: Side, options: Options) -> Result<Comparison, CompareError> {
        for side in [&a, &b] {
            let first = side
                .runs
                .first()
                .ok_or_else(|| CompareError::Empty(side.label.clone()))?;
            if side.runs.iter().any(|r| kind(r) != kind(first)) {
                return Err(CompareError::MixedSide(side.label.clone()));
            }
        }
        let (ka, kb) = (kind(&a.runs[0]), kind(&b.runs[0]));
        if (ka == "storm") != (kb == "storm") {
            return Err(CompareError::Kinds { a: ka, b: kb });
        }
        let merged_a = RunResult::merge_sequential(&a.runs).map_err(|e| CompareError::Merge(a.label.clone(), e))?;
        let merged_b = RunResult::merge_sequential(&b.runs).map_err(|e| CompareError::Merge(b.label.clone(), e))?;
        let basis = if a.runs.len() >= 2 && b.runs.len() >= 2 {
            Basis::Runs
        } else {
            Basis::Seconds
        };
        let mut c = Comparison {
            figures: figures(&a.runs, &b.runs, &merged_a, &merged_b),
            a,
            b,
            merged_a,
            merged_b,
            options,
            basis,
            tests: Vec::new(),
            warnings: Vec::new(),
            mixed: Vec::new(),
            gate: None,
        };
        c.mixed = crate::gate::mixed_plans(&c.a, &c.b);
        c.tests = c.run_tests();
        c.warnings = c.warn();
        Ok(c)
    }

    fn run_tests(&self) -> Vec<Test> {
        let mut tests = Vec::new();
        let values =
            |side: &Side, f: &dyn Fn(&RunResult) -> Vec<f64>| -> Vec<f64> { side.runs.iter().flat_map(f).collect() };
        let basis = self.basis;
        let tp = values(&self.a, &|r| per_unit_throughput(r, basis));
        let tp_b = values(&self.b, &|r| per_unit_throughput(r, basis));
        tests.push(self.test(throughput_name(&self.merged_a), Unit::PerSecond, tp, tp_b));
        let phases_b = headline_phases(&self.merged_b);
        for phase in headline_phases(&self.merged_a)
            .into_iter()
            .filter(|p| phases_b.contains(p))
        {
            for (q, label) in [(0.5, "p50"), (0.99, "p99")] {
                let a = values(&self.a, &|r| per_unit_quantile(r, phase, q, basis));
                let b = values(&self.b, &|r| per_unit_quantile(r, phase, q, basis));
                if !a.is_empty() && !b.is_empty() {
                    tests.push(self.test(&format!("{phase} {label}"), Unit::Micros, a, b));
                }
            }
        }
        tests
    }

    /// Judges `rules` on this comparison and keeps the verdict for the
    /// views; a rule on a figure a side lacks is an error.
    pub fn judge(&mut self, rules: &[crate::gate::Rule], allow_mixed: bool) -> Result<(), crate::gate::GateError> {
        self.gate = Some(crate::gate::evaluate(self, rules, allow_mixed)?);
        Ok(())
    }

    /// Tests one figure's values as compare tests its own (bootstrap
    /// interval, Mann–Whitney, the minimum effect).
    pub fn test_values(&self, name: &str, unit: Unit, a: Vec<f64>, b: Vec<f64>) -> Test {
        self.test(name, unit, a, b)
    }

    fn test(&self, name: &str, unit: Unit, a: Vec<f64>, b: Vec<f64>) -> Test {
        let o = &self.options;
        let (median_a, median_b) = (stats::median(&a), stats::median(&b));
        let diff = median_b - median_a;
        let interval = stats::bootstrap_median_diff(&a, &b, o.resamples, o.confidence, o.seed);
        let mann_whitney = stats::mann_whitney(&a, &b);
        let detectable = interval.is_some_and(|i| !i.contains_zero())
            && mann_whitney.is_some_and(|m| m.p_value < 1.0 - o.confidence);
        let relative = relative(diff, median_a);
        let big_enough = relative.is_none_or(|r| r.abs() >= o.min_effect);
        let verdict = match (detectable, big_enough) {
            (true, true) => Verdict::Significant,
            (true, false) => Verdict::Negligible,
            _ => Verdict::NotSignificant,
        };
        Test {
            name: name.to_string(),
            unit,
            basis: self.basis,
            spread_a: stats::spread(&a),
            spread_b: stats::spread(&b),
            median_a,
            median_b,
            diff,
            relative,
            interval,
            mann_whitney,
            verdict,
            a,
            b,
        }
    }

    fn warn(&self) -> Vec<String> {
        let mut w = Vec::new();
        let (la, lb) = (clip(&self.a.label, LABEL_CHARS), clip(&self.b.label, LABEL_CHARS));
        let alpha = 1.0 - self.options.confidence;
        match self.basis {
            Basis::Seconds => w.push(format!(
                "{} run(s) of {la} and {} of {lb}: the tests use each full second of the runs (per-second \
                 series), which is weaker evidence than repeated runs — seconds of one run share its conditions \
                 and are not independent; repeat each side (--repeat 5, or several files per side) for tests over runs",
                self.a.runs.len(),
                self.b.runs.len()
            )),
            Basis::Runs => {}
        }
        let unit = match self.basis {
            Basis::Runs => "runs",
            Basis::Seconds => "seconds",
        };
        if let Some(t) = self.tests.first() {
            let smallest = stats::smallest_p(t.a.len(), t.b.len());
            if smallest >= alpha {
                w.push(format!(
                    "with {} {unit} of {la} and {} of {lb} the Mann–Whitney test cannot go below p = {smallest:.3}, \
                     so no difference can be marked significant at p < {alpha:.2}; 4 or more {unit} per side are needed",
                    t.a.len(),
                    t.b.len()
                ));
            }
        }
        let what = match self.basis {
            Basis::Runs => "run-to-run",
            Basis::Seconds => "second-to-second",
        };
        for t in &self.tests {
            for (label, s) in [(&la, &t.spread_a), (&lb, &t.spread_b)] {
                if s.width > t.diff.abs() {
                    w.push(format!(
                        "{label}'s {what} spread of {}, {} {}, is larger than the difference of medians, {}",
                        t.name,
                        s.kind.name(),
                        value(t.unit, s.width),
                        signed(t.unit, t.diff)
                    ));
                }
            }
        }
        if !self.mixed.is_empty() {
            w.push(format!(
                "the sides ran different plans: {}; their figures may differ for that reason alone",
                self.mixed.join("; ")
            ));
        }
        if self.merged_a.coordinated_omission_free != self.merged_b.coordinated_omission_free {
            w.push(
                "one side ran an open loop and the other a closed loop: latency is measured from different starts \
                 (intended vs actual), so latency figures are not like for like"
                    .to_string(),
            );
        }
        for (label, side) in [(&la, &self.a), (&lb, &self.b)] {
            if side.runs.iter().any(|r| r.interrupted) {
                w.push(format!("{label} includes an interrupted run"));
            }
        }
        w
    }
}

/// A run's throughput values: one (the run's) or one per full second.
fn per_unit_throughput(r: &RunResult, basis: Basis) -> Vec<f64> {
    match basis {
        Basis::Runs => vec![throughput(r)],
        Basis::Seconds => {
            let unit = r.unit();
            full_seconds(r).map(|p| unit.per_second(p) as f64).collect()
        }
    }
}

/// A run's quantile values of one phase: the run's, or each full second's
/// (seconds without samples are skipped).
fn per_unit_quantile(r: &RunResult, phase: &str, q: f64, basis: Basis) -> Vec<f64> {
    match basis {
        Basis::Runs => r
            .measurements
            .phase(phase)
            .map(|h| vec![h.quantile(q) as f64])
            .unwrap_or_default(),
        Basis::Seconds => full_seconds(r)
            .filter_map(|p| p.phase(phase).ok())
            .filter(|h| !h.is_empty())
            .map(|h| h.quantile(q) as f64)
            .collect(),
    }
}

/// The series points of the seconds the run covered (at least 90% of
/// them: the last, partial second would read as a drop in throughput);
/// every point when fewer than two qualify. The points are the series'
/// (the recorder writes one for every second), so the work follows the
/// data, not the duration a file states.
pub(crate) fn full_seconds(r: &RunResult) -> impl Iterator<Item = &SeriesPoint> {
    let limit = full_second_limit(r);
    r.measurements.series.iter().filter(move |p| p.second < limit)
}

/// The first second [`full_seconds`] leaves out (u64::MAX: none).
pub(crate) fn full_second_limit(r: &RunResult) -> u64 {
    // `as` saturates (and NaN becomes 0).
    let covered = (r.duration_s + 0.1).floor().max(0.0) as u64;
    let qualifying = r.measurements.series.iter().filter(|p| p.second < covered).count();
    if covered >= 2 && qualifying >= 2 {
        covered
    } else {
        u64::MAX
    }
}

fn figures(runs_a: &[RunResult], runs_b: &[RunResult], a: &RunResult, b: &RunResult) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut add = |section: &str, name: &str, unit: Unit, va: f64, vb: f64| {
        out.push(Figure {
            section: section.to_string(),
            name: name.to_string(),
            unit,
            a: va,
            b: vb,
        });
    };
    let (ma, mb) = (&a.measurements, &b.measurements);
    let storm = a.unit() == throng_result::Unit::Connections;
    let s = "summary";
    add(s, "runs", Unit::Count, runs_a.len() as f64, runs_b.len() as f64);
    add(s, "duration", Unit::Seconds, a.duration_s, b.duration_s);
    add(s, throughput_name(a), Unit::PerSecond, throughput(a), throughput(b));
    if storm {
        let (ca, cb) = (&ma.connections, &mb.connections);
        add(
            s,
            "connections attempted",
            Unit::Count,
            ca.attempted as f64,
            cb.attempted as f64,
        );
        add(s, "established", Unit::Count, ca.ok as f64, cb.ok as f64);
        add(s, "failed", Unit::Count, ca.failed() as f64, cb.failed() as f64);
        add(
            s,
            "failed (%)",
            Unit::Percent,
            pct(ca.failed(), ca.attempted),
            pct(cb.failed(), cb.attempted),
        );
        if let (Some(ta), Some(tb)) = (ma.total_connect_time(), mb.total_connect_time()) {
            add(
                s,
                "total connect time",
                Unit::Seconds,
                ta.as_secs_f64(),
                tb.as_secs_f64(),
            );
        }
        if ma.out_of_turn_total() + mb.out_of_turn_total() > 0 {
            add(
                s,
                "out-of-turn handshakes",
                Unit::Count,
                ma.out_of_turn_total() as f64,
                mb.out_of_turn_total() as f64,
            );
        }
        if let (Some(ta), Some(tb)) = (ma.total_reconnect_time(), mb.total_reconnect_time()) {
            add(
                s,
                "reconnect time (throng's: first drop to last back)",
                Unit::Seconds,
                ta.as_secs_f64(),
                tb.as_secs_f64(),
            );
        }
        if let (Some(ta), Some(tb)) = (ma.client_reconnect_time(), mb.client_reconnect_time()) {
            add(
                s,
                "reconnect time (the clients': server accepting to last back)",
                Unit::Seconds,
                ta.as_secs_f64(),
                tb.as_secs_f64(),
            );
        }
    } else {
        let (ra, rb) = (&ma.requests, &mb.requests);
        add(s, "requests", Unit::Count, ra.ended() as f64, rb.ended() as f64);
        add(
            s,
            "requests/s",
            Unit::PerSecond,
            a.requests_per_second(),
            b.requests_per_second(),
        );
        add(s, "ok", Unit::Count, ra.ok as f64, rb.ok as f64);
        add(s, "errors", Unit::Count, ra.failed() as f64, rb.failed() as f64);
        add(
            s,
            "errors (%)",
            Unit::Percent,
            pct(ra.failed(), ra.ended()),
            pct(rb.failed(), rb.ended()),
        );
        if ma.dropped > 0 || mb.dropped > 0 {
            add(s, "dropped", Unit::Count, ma.dropped as f64, mb.dropped as f64);
        }
    }
    add(
        s,
        "received",
        Unit::BytesPerSecond,
        throng_result::per_second(ma.bytes.received, a.duration_s),
        throng_result::per_second(mb.bytes.received, b.duration_s),
    );

    let c = "concurrency";
    add(
        c,
        "peak connections open",
        Unit::Count,
        ma.peak_concurrent_connections as f64,
        mb.peak_concurrent_connections as f64,
    );
    add(
        c,
        "connections opened",
        Unit::Count,
        ma.connections.ok as f64,
        mb.connections.ok as f64,
    );
    add(
        c,
        "connections/s",
        Unit::PerSecond,
        throng_result::per_second(ma.connections.ok, a.duration_s),
        throng_result::per_second(mb.connections.ok, b.duration_s),
    );

    // Report order first, then any other phase by name.
    let known: Vec<&str> = throng_metrics::Phase::ALL.iter().map(|p| p.name()).collect();
    let mut names: Vec<&str> = known.iter().copied().filter(|n| ma.phases.contains_key(*n)).collect();
    names.extend(ma.phases.keys().map(String::as_str).filter(|n| !known.contains(n)));
    for name in names {
        let (Some(ha), Some(hb)) = (ma.phase(name), mb.phase(name)) else {
            continue;
        };
        let section = format!("phase {name}");
        let q = |h: &Hist, q: f64| h.quantile(q) as f64;
        add(&section, "mean", Unit::Micros, ha.mean(), hb.mean());
        for (p, label) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")] {
            add(&section, label, Unit::Micros, q(ha, p), q(hb, p));
        }
        add(&section, "max", Unit::Micros, ha.max() as f64, hb.max() as f64);
        add(&section, "count", Unit::Count, ha.count() as f64, hb.count() as f64);
    }

    for (unit_name, oa, ob) in [
        ("requests", &ma.requests, &mb.requests),
        ("connections", &ma.connections, &mb.connections),
    ] {
        if oa.is_empty() && ob.is_empty() {
            continue;
        }
        let section = format!("outcomes: {unit_name}");
        add(&section, "ok", Unit::Count, oa.ok as f64, ob.ok as f64);
        let mut classes: Vec<&String> = oa.errors.keys().chain(ob.errors.keys()).collect();
        classes.sort();
        classes.dedup();
        for class in classes {
            add(
                &section,
                class,
                Unit::Count,
                oa.error(class) as f64,
                ob.error(class) as f64,
            );
        }
    }

    let mut codes: Vec<u16> = ma.status.keys().chain(mb.status.keys()).copied().collect();
    codes.sort_unstable();
    codes.dedup();
    for code in codes {
        let n = |m: &throng_metrics::Measurements| m.status.get(&code).copied().unwrap_or(0) as f64;
        add("status", &code.to_string(), Unit::Count, n(ma), n(mb));
    }

    let g = "generator";
    let cpu = |runs: &[RunResult]| -> f64 {
        runs.iter()
            .map(|r| r.generator.cpu_user_s + r.generator.cpu_system_s)
            .sum()
    };
    let (cpu_a, cpu_b) = (cpu(runs_a), cpu(runs_b));
    add(g, "CPU seconds", Unit::Seconds, cpu_a, cpu_b);
    let per_cpu = |r: &RunResult, c: f64| if c > 0.0 { work(r) as f64 / c } else { 0.0 };
    add(
        g,
        if storm {
            "connections per CPU-second"
        } else {
            "requests per CPU-second"
        },
        Unit::PerSecond,
        per_cpu(a, cpu_a),
        per_cpu(b, cpu_b),
    );
    let rss = |runs: &[RunResult]| runs.iter().map(|r| r.generator.peak_rss_bytes).max().unwrap_or(0) as f64;
    add(g, "peak memory", Unit::Bytes, rss(runs_a), rss(runs_b));
    out
}

fn pct(part: u64, whole: u64) -> f64 {
    crate::format::pct(part, whole)
}

/// A value in its unit, for people.
pub fn value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Count => format!("{v:.0}"),
        Unit::PerSecond => format!("{v:.1}/s"),
        Unit::Micros => us(v),
        Unit::Seconds => format!("{v:.3}s"),
        Unit::Bytes => bytes(v),
        Unit::BytesPerSecond => format!("{}/s", bytes(v)),
        Unit::Percent => format!("{v:.2}%"),
    }
}

/// A difference in its unit, with its sign.
pub fn signed(unit: Unit, v: f64) -> String {
    let text = value(unit, v.abs());
    // A difference that rounds to zero gets no sign.
    let zero = !text.chars().any(|c| c.is_ascii_digit() && c != '0');
    let sign = match () {
        _ if zero => "",
        _ if v > 0.0 => "+",
        _ if v < 0.0 => "-",
        _ => "",
    };
    format!("{sign}{text}")
}

fn rel_text(r: Option<f64>) -> String {
    match r {
        Some(r) => format!("{:+.1}%", r * 100.0),
        None => "-".to_string(),
    }
}

fn interval_text(t: &Test) -> String {
    match t.interval {
        Some(i) => format!("[{}, {}]", signed(t.unit, i.low), signed(t.unit, i.high)),
        None => "-".to_string(),
    }
}

fn p_text(t: &Test) -> String {
    match t.mann_whitney {
        Some(m) if m.p_value < 0.001 => "<0.001".to_string(),
        Some(m) => format!("{:.3}", m.p_value),
        None => "-".to_string(),
    }
}

fn describe(r: &RunResult) -> String {
    match &r.plan {
        Plan::Http(p) => match &p.grpc {
            Some(g) => format!("grpc {} {} ({})", p.target.authority(), g.call, p.describe()),
            None => format!("http {} {} ({})", p.method, p.target.url, p.describe()),
        },
        Plan::Storm(p) => format!("storm {} ({})", p.target.url, p.describe()),
        Plan::Run(p) if p.target.http.is_multiplexed() => format!("run {} ({})", p.target.url, p.target.http.label()),
        Plan::Run(p) => format!("run {}", p.target.url),
    }
}

fn side_header(s: &Side) -> String {
    let files = if s.sources.len() == 1 {
        s.sources[0].clone()
    } else {
        format!("{} files", s.sources.len())
    };
    format!(
        "{} run{} from {files}",
        s.runs.len(),
        if s.runs.len() == 1 { "" } else { "s" }
    )
}

/// What the tests are over, how they are computed, and what "significant"
/// means: three lines.
fn basis_lines(c: &Comparison) -> [String; 3] {
    let o = &c.options;
    let over = match c.basis {
        Basis::Runs => format!(
            "over each run's figure ({} of A, {} of B)",
            throng_plan::count(c.a.runs.len() as u64, "run"),
            c.b.runs.len()
        ),
        Basis::Seconds => "over each full second of the runs (per-second series: weaker than repeated runs, the \
                           seconds of a run are not independent)"
            .to_string(),
    };
    [
        over,
        format!(
            "difference of medians (B − A), its {:.0}% bootstrap interval ({} resamples, seed {}), two-sided \
             Mann–Whitney U p",
            o.confidence * 100.0,
            o.resamples,
            o.seed
        ),
        format!(
            "significant: the interval excludes 0, p < {:.2} and |B − A| >= {}% of A (smaller: negligible)",
            1.0 - o.confidence,
            o.min_effect * 100.0
        ),
    ]
}

/// The sides' labels as shown: at most [`LABEL_CHARS`] characters.
fn labels(c: &Comparison) -> (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>) {
    (clip(&c.a.label, LABEL_CHARS), clip(&c.b.label, LABEL_CHARS))
}

/// The comparison as aligned text.
pub fn write_text(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    if let Some(g) = &c.gate {
        crate::gate::write_text(g, w)?;
        writeln!(w)?;
    }
    let (la, lb) = labels(c);
    writeln!(
        w,
        "throng compare: A = {la} ({}), B = {lb} ({})",
        side_header(&c.a),
        side_header(&c.b)
    )?;
    writeln!(w, "  A: {}", describe(&c.merged_a))?;
    writeln!(w, "  B: {}", describe(&c.merged_b))?;
    writeln!(w)?;
    let width = 28;
    let col = chars(&la).max(chars(&lb)).max(12);
    let mut section = "";
    for f in &c.figures {
        if f.section != section {
            section = &f.section;
            let head = if section == "summary" {
                format!(
                    "  {section:<width$} {la:>col$} {lb:>col$} {:>12} {:>9}",
                    "B−A", "(B−A)/A"
                )
            } else {
                format!("  {section}")
            };
            writeln!(w, "{head}")?;
        }
        writeln!(
            w,
            "    {:<w2$} {:>col$} {:>col$} {:>12} {:>9}",
            name(&f.name),
            value(f.unit, f.a),
            value(f.unit, f.b),
            signed(f.unit, f.diff()),
            rel_text(f.relative()),
            w2 = width - 2
        )?;
    }
    writeln!(w)?;
    let [over, how, rule] = basis_lines(c);
    writeln!(w, "  statistics {over}")?;
    writeln!(w, "    {how}")?;
    writeln!(w, "    {rule}")?;
    writeln!(
        w,
        "    {:<22} {:>12} {:>12} {:>12} {:>9} {:>28} {:>7}  verdict",
        "figure", "median A", "median B", "B−A", "(B−A)/A", "interval", "p"
    )?;
    for t in &c.tests {
        let [a, b, diff, rel, interval, p] = test_cells(t);
        writeln!(
            w,
            "    {:<22} {a:>12} {b:>12} {diff:>12} {rel:>9} {interval:>28} {p:>7}  {}",
            name(&t.name),
            t.verdict.name()
        )?;
    }
    if !c.warnings.is_empty() {
        writeln!(w)?;
        for warning in &c.warnings {
            writeln!(w, "  warning: {warning}")?;
        }
    }
    Ok(())
}

/// A test's figures as text, in table order: median A, median B, B−A,
/// (B−A)/A, interval, p.
fn test_cells(t: &Test) -> [String; 6] {
    [
        value(t.unit, t.median_a),
        value(t.unit, t.median_b),
        signed(t.unit, t.diff),
        rel_text(t.relative),
        interval_text(t),
        p_text(t),
    ]
}

/// The comparison as markdown tables.
pub fn write_markdown(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let (la, lb) = labels(c);
    writeln!(w, "## throng compare: {la} vs {lb}")?;
    writeln!(w)?;
    if let Some(g) = &c.gate {
        crate::gate::write_markdown(g, w)?;
        writeln!(w)?;
    }
    writeln!(w, "- **A = {la}**: {}; {}", side_header(&c.a), describe(&c.merged_a))?;
    writeln!(w, "- **B = {lb}**: {}; {}", side_header(&c.b), describe(&c.merged_b))?;
    writeln!(w)?;
    writeln!(w, "| section | figure | {la} | {lb} | B−A | (B−A)/A |")?;
    writeln!(w, "|---|---|---:|---:|---:|---:|")?;
    for f in &c.figures {
        writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            f.section,
            name(&f.name),
            value(f.unit, f.a),
            value(f.unit, f.b),
            signed(f.unit, f.diff()),
            rel_text(f.relative())
        )?;
    }
    writeln!(w)?;
    writeln!(w, "Statistics {}.", basis_lines(c).join("; "))?;
    writeln!(w)?;
    writeln!(
        w,
        "| figure | median {la} | median {lb} | B−A | (B−A)/A | interval | p | verdict |"
    )?;
    writeln!(w, "|---|---:|---:|---:|---:|---:|---:|---|")?;
    for t in &c.tests {
        let [a, b, diff, rel, interval, p] = test_cells(t);
        writeln!(
            w,
            "| {} | {a} | {b} | {diff} | {rel} | {interval} | {p} | **{}** |",
            name(&t.name),
            t.verdict.name()
        )?;
    }
    if !c.warnings.is_empty() {
        writeln!(w)?;
        for warning in &c.warnings {
            writeln!(w, "> **warning**: {warning}")?;
        }
    }
    Ok(())
}

/// A short markdown summary for a pull request comment or a CI job summary
/// (`$GITHUB_STEP_SUMMARY`): the verdict on its first lines (when rules
/// were given), the sides, the tested figures and the error rate, and the
/// warnings; no links.
pub fn write_summary(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let (la, lb) = labels(c);
    let cell = crate::gate::cell;
    match &c.gate {
        Some(g) => {
            let verdict = if g.failed() { "GATE FAILED" } else { "GATE PASSED" };
            writeln!(w, "### throng compare: {verdict} ({} vs {})", cell(&la), cell(&lb))?;
            writeln!(w)?;
            crate::gate::write_markdown(g, w)?;
        }
        None => writeln!(w, "### throng compare: {} vs {}", cell(&la), cell(&lb))?,
    }
    writeln!(w)?;
    writeln!(
        w,
        "A = {}: {}; `{}`  ",
        cell(&la),
        side_header(&c.a),
        describe(&c.merged_a).replace('`', "'")
    )?;
    writeln!(
        w,
        "B = {}: {}; `{}`",
        cell(&lb),
        side_header(&c.b),
        describe(&c.merged_b).replace('`', "'")
    )?;
    writeln!(w)?;
    writeln!(w, "| figure | {} | {} | B−A | (B−A)/A | test |", cell(&la), cell(&lb))?;
    writeln!(w, "|---|---:|---:|---:|---:|---|")?;
    for t in &c.tests {
        let [a, b, diff, rel, _, p] = test_cells(t);
        writeln!(
            w,
            "| {} (median of {}) | {a} | {b} | {diff} | {rel} | {}, p {p} |",
            cell(&name(&t.name)),
            match t.basis {
                Basis::Runs => "runs",
                Basis::Seconds => "seconds",
            },
            t.verdict.name()
        )?;
    }
    for f in c
        .figures
        .iter()
        .filter(|f| f.section == "summary" && (f.name == "errors (%)" || f.name == "failed (%)"))
    {
        writeln!(
            w,
            "| {} | {} | {} | {} | {} | |",
            f.name,
            value(f.unit, f.a),
            value(f.unit, f.b),
            signed(f.unit, f.diff()),
            rel_text(f.relative())
        )?;
    }
    if !c.warnings.is_empty() {
        writeln!(w)?;
        for warning in &c.warnings {
            writeln!(w, "> **warning**: {}", cell(warning))?;
        }
    }
    Ok(())
}

/// The comparison as a JSON document (schema [`SCHEMA`]).
pub fn write_json(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    #[derive(Serialize)]
    struct SideDoc<'a> {
        label: &'a str,
        sources: &'a [String],
        runs: usize,
        kind: &'static str,
        target: &'a str,
    }
    #[derive(Serialize)]
    struct FigureDoc<'a> {
        #[serde(flatten)]
        figure: &'a Figure,
        diff: f64,
        relative: Option<f64>,
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        gate: Option<&'a crate::gate::Gate>,
        a: SideDoc<'a>,
        b: SideDoc<'a>,
        options: &'a Options,
        basis: Basis,
        figures: Vec<FigureDoc<'a>>,
        tests: &'a [Test],
        warnings: &'a [String],
    }
    fn side<'a>(s: &'a Side, m: &'a RunResult) -> SideDoc<'a> {
        SideDoc {
            label: &s.label,
            sources: &s.sources,
            runs: s.runs.len(),
            kind: kind(m),
            target: m.plan.target_url(),
        }
    }
    let doc = Doc {
        schema: SCHEMA,
        gate: c.gate.as_ref(),
        a: side(&c.a, &c.merged_a),
        b: side(&c.b, &c.merged_b),
        options: &c.options,
        basis: c.basis,
        figures: c
            .figures
            .iter()
            .map(|f| FigureDoc {
                figure: f,
                diff: f.diff(),
                relative: f.relative(),
            })
            .collect(),
        tests: &c.tests,
        warnings: &c.warnings,
    };
    serde_json::to_writer_pretty(&mut *w, &doc).map_err(io::Error::other)?;
    writeln!(w)
}

/// Both sides in ab's or httperf's layout, in two columns (A | B), line by
/// line. Check [`crate::supports`] for both sides first.
pub fn write_columns(view: crate::View, c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let render = |r: &RunResult| -> io::Result<Vec<String>> {
        let mut buf = Vec::new();
        crate::write(view, r, &mut buf)?;
        Ok(String::from_utf8_lossy(&buf).lines().map(str::to_string).collect())
    };
    let (left, right) = (render(&c.merged_a)?, render(&c.merged_b)?);
    if let Some(g) = &c.gate {
        crate::gate::write_text(g, w)?;
        writeln!(w)?;
    }
    let (la, lb) = labels(c);
    let head_a = format!("A: {la}");
    let head_b = format!("B: {lb}");
    let width_of = |lines: &[String], head: &str| {
        lines
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .max(head.chars().count())
    };
    let (width, width_b) = (width_of(&left, &head_a), width_of(&right, &head_b));
    let pad = |s: &str| format!("{s}{}", " ".repeat(width.saturating_sub(s.chars().count())));
    writeln!(w, "{} | {head_b}", pad(&head_a))?;
    writeln!(w, "{}-+-{}", "-".repeat(width), "-".repeat(width_b))?;
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map_or("", String::as_str);
        let r = right.get(i).map_or("", String::as_str);
        writeln!(w, "{} | {r}", pad(l))?;
    }
    if c.a.runs.len() > 1 || c.b.runs.len() > 1 {
        writeln!(w)?;
        writeln!(
            w,
            "({} of A and {} of B, each side's runs added up; `--format text` has the statistics)",
            throng_plan::count(c.a.runs.len() as u64, "run"),
            c.b.runs.len()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_carry_their_sign_unless_they_round_to_zero() {
        assert_eq!(signed(Unit::Micros, 20_500.0), "+20.50ms");
        assert_eq!(signed(Unit::Micros, -0.4), "0µs");
        assert_eq!(signed(Unit::PerSecond, -2.35), "-2.4/s");
        assert_eq!(signed(Unit::Count, 0.0), "0");
        assert_eq!(rel_text(Some(0.123)), "+12.3%");
        assert_eq!(rel_text(None), "-");
    }

    #[test]
    fn relative_difference_needs_a_base() {
        let f = Figure {
            section: "summary".into(),
            name: "errors".into(),
            unit: Unit::Count,
            a: 0.0,
            b: 3.0,
        };
        assert_eq!((f.diff(), f.relative()), (3.0, None));
    }
}
