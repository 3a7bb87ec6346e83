//! The data model of a comparison: sides, options, figures, tests and
//! their verdicts, and how a figure's value reads.

use serde::Serialize;
use throng_result::{Plan, ResultError, RunResult};

use crate::format::{bytes, us};
use crate::stats::{Interval, MannWhitney, Spread};

/// Schema identifier of the JSON comparison (`--format json`).
/// Version 2 names every value in a figure's unit with that unit
/// (`diff_us`, `median_a_per_s`, see [`Unit::suffix`]); version 1 named
/// them bare (`diff`, `median_a`). Nothing reads these documents back.
pub const SCHEMA: &str = "throng.compare/v2";

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

impl Unit {
    /// The suffix of a value's key in this unit in the JSON document
    /// (`diff_us`, `a_per_s`).
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Count => "count",
            Unit::PerSecond => "per_s",
            Unit::Micros => "us",
            Unit::Seconds => "s",
            Unit::Bytes => "bytes",
            Unit::BytesPerSecond => "bytes_per_s",
            Unit::Percent => "pct",
        }
    }

    /// `name` with this unit's suffix: `diff` in micros is `diff_us`.
    pub fn key(self, name: &str) -> String {
        format!("{name}_{}", self.suffix())
    }
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

pub(super) fn relative(diff: f64, base: f64) -> Option<f64> {
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

/// A statistical test of one figure (in the JSON document, its values'
/// keys name their unit: `median_a_us`, `diff_per_s`).
#[derive(Clone, Debug, PartialEq)]
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
    pub interval: Option<Interval>,
    /// Mann–Whitney U test.
    pub mann_whitney: Option<MannWhitney>,
    /// A's own spread.
    pub spread_a: Spread,
    /// B's own spread.
    pub spread_b: Spread,
    /// The conclusion.
    pub verdict: Verdict,
}

impl Serialize for Test {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let u = self.unit;
        let mut m = s.serialize_map(Some(14))?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("unit", &u)?;
        m.serialize_entry("basis", &self.basis)?;
        m.serialize_entry(&u.key("a"), &self.a)?;
        m.serialize_entry(&u.key("b"), &self.b)?;
        m.serialize_entry(&u.key("median_a"), &self.median_a)?;
        m.serialize_entry(&u.key("median_b"), &self.median_b)?;
        m.serialize_entry(&u.key("diff"), &self.diff)?;
        m.serialize_entry("relative", &self.relative)?;
        m.serialize_entry(&u.key("interval"), &self.interval.map(|i| [i.low, i.high]))?;
        m.serialize_entry("mann_whitney", &Mw(self.mann_whitney))?;
        m.serialize_entry("spread_a", &Sp(self.spread_a))?;
        m.serialize_entry("spread_b", &Sp(self.spread_b))?;
        m.serialize_entry("verdict", &self.verdict)?;
        m.end()
    }
}

/// A test's Mann–Whitney U, as the document writes it.
struct Mw(Option<MannWhitney>);

impl Serialize for Mw {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_mw(&self.0, s)
    }
}

/// A side's spread, as the document writes it.
struct Sp(Spread);

impl Serialize for Sp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_spread(&self.0, s)
    }
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
        Plan::Mqtt(_) => "mqtt",
    }
}

/// The unit of work a run counts throughput in: ok requests, or established
/// connections for storms.
pub fn throughput(r: &RunResult) -> f64 {
    throng_result::per_second(work(r), r.duration_s)
}

pub(super) fn work(r: &RunResult) -> u64 {
    r.unit_outcomes().ok
}

/// The name of [`throughput`] in reports.
pub fn throughput_name(r: &RunResult) -> &'static str {
    match r.unit() {
        throng_result::Unit::Connections => "established/s",
        throng_result::Unit::Requests => "throughput (ok/s)",
        throng_result::Unit::Messages => "published (ok/s)",
    }
}

/// The phases whose p50 and p99 are tested: a request's `latency`, or for
/// storms the steps of establishing a connection.
pub fn headline_phases(r: &RunResult) -> Vec<&'static str> {
    let wanted: &[&'static str] = match r.unit() {
        throng_result::Unit::Connections => &["connect", "tls", "handshake"],
        throng_result::Unit::Requests => &["latency"],
        throng_result::Unit::Messages => &["delivery"],
    };
    wanted
        .iter()
        .copied()
        .filter(|p| r.measurements.phase(p).is_some())
        .collect()
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
