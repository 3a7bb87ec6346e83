//! Why a threshold cannot be read, or cannot judge the run it is given:
//! the parts of the key and expression at fault, said as the user wrote
//! them. It names only the leaf `names`, never the parser.

use std::fmt;

use super::names::{COUNTERS, RATES, TRENDS, or_list, quoted_list, tag_kinds};

/// Why a threshold cannot be read (`key: expr`). Its message quotes the
/// key or expression on one line (control characters escaped).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ThresholdError {
    /// What is wrong, with the parts at fault.
    pub fault: ThresholdFault,
}

impl fmt::Display for ThresholdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&throng_plan::one_line(&self.fault.to_string()))
    }
}

impl std::error::Error for ThresholdError {}

impl From<ThresholdFault> for ThresholdError {
    fn from(fault: ThresholdFault) -> Self {
        ThresholdError { fault }
    }
}

/// What is wrong in a threshold. `key` is the metric with its filter as
/// written, `expr` the criterion.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ThresholdFault {
    /// A `--threshold` line without `:` after its key.
    #[error("'{line}' has no ':' between the metric and the criterion; write e.g. 'response: p(95) < 500ms'")]
    NoColon {
        /// The line.
        line: String,
    },
    /// A threshold on a custom metric that cannot judge it.
    #[error("'{threshold}': {reason}")]
    Custom {
        /// The key and expression.
        threshold: String,
        /// What is wrong, and what to write.
        reason: String,
    },
    /// A name that is no metric.
    #[error(
        "'{metric}' is not a metric; trends: {}; rates: {}; counters: {}",
        TRENDS.join(", "),
        RATES.join(", "),
        COUNTERS.join(", ")
    )]
    NotAMetric {
        /// The name.
        metric: String,
    },
    /// A tag filter not written `metric{tag:value}`.
    #[error("'{text}': a tag filter is written metric{{tag:value}}")]
    FilterSyntax {
        /// The metric and filter as written.
        text: String,
    },
    /// A filter on a tag that does not exist.
    #[error("'{text}': '{tag}' is not a tag; use step, group, scenario, stage, check or target")]
    NotATag {
        /// The metric and filter as written.
        text: String,
        /// The tag.
        tag: String,
    },
    /// The window (`over D`) or a bound is not a duration with a unit.
    #[error("'{expr}': {reason}")]
    Duration {
        /// The expression.
        expr: String,
        /// Why the duration does not read.
        reason: UnitDurationError,
    },
    /// A window that is not whole seconds.
    #[error("'{expr}': windows are whole seconds, e.g. over 30s")]
    WindowNotWhole {
        /// The expression.
        expr: String,
    },
    /// No `<`, `>`, `=` or `!`.
    #[error("'{expr}' has no comparison; write e.g. p(95) < 500ms")]
    NoComparison {
        /// The expression.
        expr: String,
    },
    /// A comparison other than the six.
    #[error("'{expr}': the comparison must be <, <=, >, >=, == or !=")]
    BadComparison {
        /// The expression.
        expr: String,
    },
    /// `p(N)` without a number.
    #[error("'{expr}': p(N) takes a number, e.g. p(95)")]
    PercentileNotNumber {
        /// The expression.
        expr: String,
    },
    /// `p(N)` outside 0-100.
    #[error("'{expr}': percentiles run from 0 to 100")]
    PercentileRange {
        /// The expression.
        expr: String,
    },
    /// `name(` without `)`.
    #[error("'{expr}': unbalanced ( )")]
    Unbalanced {
        /// The expression.
        expr: String,
    },
    /// A filter inside `rate(...)` that contradicts the key's.
    #[error("'{threshold}': the filter {{{inner}}} inside conflicts with the key's {{{outer}}}; give one")]
    FilterConflict {
        /// The key and expression, `key: expr`.
        threshold: String,
        /// The filter inside the aggregation, `tag:value`.
        inner: String,
        /// The key's filter, `tag:value`.
        outer: String,
    },
    /// An aggregation that does not exist.
    #[error("'{expr}': '{name}' is not p(N), avg, med, min, max, rate or count")]
    NotAnAggregation {
        /// The expression.
        expr: String,
        /// The name as written.
        name: String,
    },
    /// `rate` or `count` of a duration.
    #[error("'{expr}': {metric} is a duration; use p(N), avg, med, min or max")]
    NotForDurations {
        /// The expression.
        expr: String,
        /// The metric.
        metric: String,
    },
    /// A rate's bound that is no fraction.
    #[error("'{expr}': {reason}")]
    Fraction {
        /// The expression.
        expr: String,
        /// Why.
        reason: FractionError,
    },
    /// `count` compared with something other than a number.
    #[error("'{expr}': count compares with a number")]
    CountNotNumber {
        /// The expression.
        expr: String,
    },
    /// A rate judged other than by `rate` or `count`.
    #[error("'{expr}': {metric} is a rate; use rate or count")]
    NotForRates {
        /// The expression.
        expr: String,
        /// The metric.
        metric: String,
    },
    /// A counter judged other than by `count`.
    #[error("'{expr}': {metric} is a counter; use count")]
    NotForCounters {
        /// The expression.
        expr: String,
        /// The metric.
        metric: String,
    },
    /// A scenario's metric in a `throng http` threshold.
    #[error(
        "'{key}': {metric} is a scenario's metric (throng run), never recorded by throng http; judge response, \
         latency, errors, check_failed, requests, dropped or a phase"
    )]
    ScenarioMetricInHttp {
        /// The key.
        key: String,
        /// The metric.
        metric: String,
    },
    /// A tag other than `target:` in a `throng http` threshold.
    #[error(
        "'{key}': {tag}: filters are a scenario's; throng http keeps figures per target (target:NAME, with several \
         targets)"
    )]
    TagInHttp {
        /// The key.
        key: String,
        /// The tag.
        tag: String,
    },
    /// `dropped` in a scenario's threshold.
    #[error(
        "'{key}': dropped is throng http's (requests an open loop could not send); a scenario's arrival-rate \
         executors count dropped_iterations, e.g. dropped_iterations: count == 0"
    )]
    DroppedInScenario {
        /// The key.
        key: String,
    },
    /// A `target:` filter in a scenario's threshold.
    #[error(
        "'{key}': target: tags are throng http's (--threshold with several targets); a scenario's requests are \
         tagged by step, group, scenario and stage"
    )]
    TargetTagInScenario {
        /// The key.
        key: String,
    },
    /// A window over a metric that has no per-second figures.
    #[error("'{expr}': {metric} has no per-second figures to slide a window over")]
    NoWindow {
        /// The expression.
        expr: String,
        /// The metric.
        metric: String,
    },
    /// A filter on a metric a `throng http` run keeps only for the whole run.
    #[error(
        "'{key}': {metric} is not kept per target; target: filters apply to response, errors, check_failed and \
         requests"
    )]
    NotKeptPerTarget {
        /// The key.
        key: String,
        /// The metric.
        metric: String,
    },
    /// A filter on a metric a scenario keeps only for the whole run.
    #[error(
        "'{key}': {metric} is not kept per tag; tags apply to response, errors, check_failed and requests (step, \
         group, scenario, stage), checks (check) and group_duration (group)"
    )]
    NotKeptPerTag {
        /// The key.
        key: String,
        /// The metric.
        metric: String,
    },
    /// A filter on a tag the metric is not kept per.
    #[error(
        "'{threshold}': {metric} is kept per {}, not per {tag}, so {metric}{{{tag}:{value}}} would never have \
         samples",
        // `target:` tags are throng http's; a scenario's user is told of its own.
        or_list(&tag_kinds(metric).iter().copied().filter(|k| *k != "target").collect::<Vec<_>>())
    )]
    NotKeptPerThisTag {
        /// The key and expression, `key: expr`.
        threshold: String,
        /// The metric.
        metric: String,
        /// The filter's tag.
        tag: String,
        /// The filter's value.
        value: String,
    },
}

/// Why a duration in a threshold (a bound, a window) does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnitDurationError {
    /// A bare number: `200` reads as seconds to some and as milliseconds
    /// (k6's threshold bounds) to others.
    #[error("durations need a unit, e.g. 500ms, 30s, 2m ('{0}' has none)")]
    NoUnit(String),
    /// Not a duration at all.
    #[error(transparent)]
    Duration(throng_plan::DurationError),
}

/// Why a rate's bound is not a fraction.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FractionError {
    /// Not `0.01` or `1%`.
    #[error("'{0}' is not a fraction such as 0.01 or 1%")]
    NotAFraction(String),
    /// Outside 0-1.
    #[error("'{0}': a rate runs from 0 to 1")]
    Range(String),
}

/// Why a `throng http` threshold could only ever judge nothing in its plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NeverJudged {
    /// A `target:` filter in a run of one target.
    #[error(
        "'{text}': this run has one target, so no figures are kept per target; judge the whole run ('{metric}: \
         ...') or give several URLs"
    )]
    OneTarget {
        /// The threshold as written.
        text: String,
        /// Its metric.
        metric: String,
    },
    /// A `target:` filter naming no target.
    #[error("'{text}': no target is named '{name}'; the targets are {}", quoted_list(targets))]
    NoSuchTarget {
        /// The threshold as written.
        text: String,
        /// The name it filters on.
        name: String,
        /// The plan's target names.
        targets: Vec<String>,
    },
    /// `dropped` or `schedule_lag` in a closed loop.
    #[error(
        "'{text}': {metric} is measured only in an open loop (-r RATE), and this run is a closed loop, so it would \
         never have samples; give -r or remove the threshold"
    )]
    ClosedLoop {
        /// The threshold as written.
        text: String,
        /// Its metric.
        metric: String,
    },
    /// What a connection storm never records: `dropped`, `schedule_lag`
    /// (a storm starts every connection, late rather than never), or a
    /// `target:` filter.
    #[error(
        "'{text}': a connection storm {why}, so this threshold would never have samples; judge its phases \
         (connect, tls, handshake, pong, ...) or its connections ('connection_errors: rate < 1%')"
    )]
    NotInStorm {
        /// The threshold as written.
        text: String,
        /// What the storm does not keep.
        why: String,
    },
}
