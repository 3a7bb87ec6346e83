//! `throng compare`: two sides of an A/B, each one or more runs, figure by
//! figure, with statistics that say how far the difference can be trusted.
//!
//! ```text
//!  Side A (label, runs) ─┐                     ┌─ write_text / write_markdown
//!                        ├─ Comparison::new ───┼─ write_json   (throng.compare/v2)
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

use throng_metrics::SeriesPoint;
use throng_result::RunResult;

use crate::format::{LABEL_CHARS, clip};
use crate::stats;

mod figures;
pub(crate) mod model;
#[cfg(test)]
mod tests;
mod write;

use self::figures::figures;
use self::model::relative;
pub use self::model::{
    Basis, CompareError, DEFAULT_SEED, Figure, Options, SCHEMA, Side, Test, Unit, Verdict, headline_phases, kind,
    signed, throughput, throughput_name, value,
};
pub use self::write::{write_columns, write_json, write_markdown, write_summary, write_text};

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
    /// protocol…; [`crate::gate::mixed::mixed_plans`]); empty when they ran the same.
    pub mixed: Vec<String>,
    /// The `--fail-on` rules judged ([`Comparison::judge`]); the views print
    /// the verdict first.
    pub gate: Option<crate::gate::verdict::Gate>,
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
        c.mixed = crate::gate::mixed::mixed_plans(&c.a, &c.b);
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
        if let (Some(x), Some(y)) = (self.merged_a.generator.io, self.merged_b.generator.io)
            && x != y
        {
            w.push(format!(
                "{la} ran on {} and {lb} on {}: a difference in the generator, not the server, may account for \
                 part of theirs; pass the same --io to both",
                x.label(),
                y.label()
            ));
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
