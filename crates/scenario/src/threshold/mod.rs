//! Thresholds: pass/fail criteria on a run's metrics, optionally over
//! sliding windows (`p(95) < 500ms over 30s` fails if any 30-second window
//! breaks it).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use throng_metrics::{Hist, Measurements, ScenarioStats, TagSecond, TagStats};

pub use error::{FractionError, NeverJudged, ThresholdError, ThresholdFault, UnitDurationError};
use names::{COUNTERS, RATES, SCENARIO_ONLY, TRENDS, tag_kinds};

mod custom;
mod error;
mod names;

/// How a metric's samples are reduced to one number.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Agg {
    /// A percentile (0–100).
    P(f64),
    /// Mean.
    Avg,
    /// Median.
    Med,
    /// Smallest.
    Min,
    /// Largest.
    Max,
    /// The fraction of events that were hits (0–1).
    Rate,
    /// How many.
    Count,
    /// A gauge's last value (custom metrics).
    Value,
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
    /// ==
    Eq,
    /// !=
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => (a - b).abs() < 1e-9,
            Op::Ne => (a - b).abs() >= 1e-9,
        }
    }
}

/// Which numbers a metric name stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Durations (histograms).
    Trend,
    /// A fraction of events.
    Rate,
    /// A count.
    Counter,
}

/// The suffix that lets a threshold pass when nothing was measured:
/// `response{target:/rare}: p(95) < 500ms or no samples`.
pub const OR_NO_SAMPLES: &str = "or no samples";

/// A `throng http` threshold names what an HTTP run records.
fn refuse_in_http(key: &str, metric: &str, tag: Option<&(String, String)>) -> Result<(), ThresholdFault> {
    if SCENARIO_ONLY.contains(&metric) {
        return Err(ThresholdFault::ScenarioMetricInHttp {
            key: key.to_string(),
            metric: metric.to_string(),
        });
    }
    if let Some((t, _)) = tag.filter(|(t, _)| t != "target") {
        return Err(ThresholdFault::TagInHttp {
            key: key.to_string(),
            tag: t.clone(),
        });
    }
    Ok(())
}

/// A scenario's threshold names what a scenario records.
fn refuse_in_scenario(key: &str, metric: &str, tag: Option<&(String, String)>) -> Result<(), ThresholdFault> {
    if metric == "dropped" {
        return Err(ThresholdFault::DroppedInScenario { key: key.to_string() });
    }
    if tag.is_some_and(|(k, _)| k == "target") {
        return Err(ThresholdFault::TargetTagInScenario { key: key.to_string() });
    }
    Ok(())
}

/// True for the name of a metric throng records itself (a custom metric
/// may not take it).
pub fn is_builtin_metric(name: &str) -> bool {
    kind(name).is_some()
}

fn kind(metric: &str) -> Option<Kind> {
    if TRENDS.contains(&metric) {
        Some(Kind::Trend)
    } else if RATES.contains(&metric) {
        Some(Kind::Rate)
    } else if COUNTERS.contains(&metric) {
        Some(Kind::Counter)
    } else {
        None
    }
}

/// What a storm records, for [`Threshold::check_storm`].
#[derive(Clone, Copy, Debug)]
pub struct StormShape {
    /// It was given `--rate`: its starts are a schedule.
    pub rate: bool,
    /// Each connection sends a request (http://, https://, `--request`).
    pub requests: bool,
}

/// One pass/fail criterion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    /// As written: `response{step:login}: p(95) < 500ms over 30s`.
    pub text: String,
    /// The metric.
    pub metric: String,
    /// An optional tag filter (`step`, `login`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<(String, String)>,
    /// The aggregation.
    pub agg: Agg,
    /// The comparison.
    pub op: Op,
    /// The bound: µs for trends, a fraction for rates, a count.
    pub value: f64,
    /// Sliding window, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<u64>,
    /// Stop the run as soon as it fails (after `delay`).
    #[serde(default)]
    pub abort_on_fail: bool,
    /// Milliseconds from the start before `abort_on_fail` may act.
    #[serde(default)]
    pub delay_ms: u64,
    /// Holds when nothing was measured (`... or no samples`, or
    /// `no_samples: pass` in a scenario file); by default a threshold over
    /// no samples fails.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pass_without_samples: bool,
    /// The kind of the file's custom metric it judges (`metrics:`), when
    /// it judges one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<throng_metrics::CustomKind>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Whether a threshold held, and what was observed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The threshold as written.
    pub threshold: String,
    /// True when it held.
    pub passed: bool,
    /// The observed value (µs for trends), or the worst window's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<f64>,
    /// Human-readable detail: the value with units, the worst window.
    pub detail: String,
}

impl Threshold {
    /// Parses `key` (`metric` or `metric{tag:value}`) and `expr`
    /// (`p(95) < 500ms`, `rate < 0.01`, `rate(check_failed) < 0.01`,
    /// `count == 0`, `max < 2s over 30s`).
    pub fn parse(key: &str, expr: &str, abort_on_fail: bool, delay: Duration) -> Result<Threshold, ThresholdError> {
        // Errors quote the key and expression: one line whatever they hold
        // (ThresholdError's Display).
        Ok(Threshold::parse_raw(key, expr, abort_on_fail, delay, false)?)
    }

    /// Parses one line `key: expr` (`throng http --threshold`), e.g.
    /// `response{target:/a}: p(95) < 50ms`: the key ends at the first `:`
    /// after its tag filter.
    ///
    /// Its error is the text of a [`ThresholdError`] (`throng-result`
    /// keeps the reason a stored threshold no longer reads as text);
    /// [`Threshold::read_line`] is the same with the typed error.
    pub fn parse_line(text: &str) -> Result<Threshold, String> {
        Threshold::read_line(text).map_err(|e| e.to_string())
    }

    /// [`Threshold::parse_line`] with its typed error.
    pub fn read_line(text: &str) -> Result<Threshold, ThresholdError> {
        let from = text.find('}').map_or(0, |i| i + 1);
        let Some(at) = text[from..].find(':').map(|i| from + i) else {
            return Err(ThresholdFault::NoColon { line: text.to_string() }.into());
        };
        Ok(Threshold::parse_raw(
            &text[..at],
            &text[at + 1..],
            false,
            Duration::ZERO,
            true,
        )?)
    }

    /// `http`: a `throng http` threshold (`target:` tags, `dropped`), not a
    /// scenario's (steps, groups, checks, iterations).
    fn parse_raw(
        key: &str,
        expr: &str,
        abort_on_fail: bool,
        delay: Duration,
        http: bool,
    ) -> Result<Threshold, ThresholdFault> {
        let (key_metric, key_tag) = parse_metric(key)?;
        if kind(&key_metric).is_none() {
            return Err(ThresholdFault::NotAMetric { metric: key_metric });
        }
        let at_expr = || expr.to_string();
        let (mut metric, mut tag) = (key_metric, key_tag.clone());
        let e = expr.trim();
        let (e_judged, pass_without_samples) = match e.strip_suffix(OR_NO_SAMPLES) {
            Some(rest) if rest.ends_with(char::is_whitespace) => (rest.trim_end(), true),
            _ => (e, false),
        };
        let (body, window_s) = match e_judged.rsplit_once(" over ") {
            Some((b, w)) => {
                let d = parse_unit_duration(w.trim()).map_err(|reason| ThresholdFault::Duration {
                    expr: at_expr(),
                    reason,
                })?;
                if d.as_secs() == 0 || d.subsec_nanos() != 0 {
                    return Err(ThresholdFault::WindowNotWhole { expr: at_expr() });
                }
                (b.trim(), Some(d.as_secs()))
            }
            None => (e_judged, None),
        };
        let op_at = body
            .find(['<', '>', '=', '!'])
            .ok_or_else(|| ThresholdFault::NoComparison { expr: at_expr() })?;
        let (lhs, rest) = body.split_at(op_at);
        let (op, rhs) = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find_map(|(s, op)| rest.strip_prefix(s).map(|r| (op, r.trim())))
        .ok_or_else(|| ThresholdFault::BadComparison { expr: at_expr() })?;
        let lhs = lhs.trim();
        let agg = if let Some(p) = lhs.strip_prefix("p(").and_then(|r| r.strip_suffix(')')) {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| ThresholdFault::PercentileNotNumber { expr: at_expr() })?;
            if !(0.0..=100.0).contains(&p) {
                return Err(ThresholdFault::PercentileRange { expr: at_expr() });
            }
            Agg::P(p)
        } else {
            let (name, inner) = match lhs.split_once('(') {
                Some((n, r)) => (
                    n.trim(),
                    Some(
                        r.strip_suffix(')')
                            .ok_or_else(|| ThresholdFault::Unbalanced { expr: at_expr() })?,
                    ),
                ),
                None => (lhs, None),
            };
            if let Some(inner) = inner {
                // rate(check_failed), count(dropped_iterations): the metric
                // inside wins; the key's tag filter still applies to it.
                let (m, t) = parse_metric(inner)?;
                tag = match (t, &key_tag) {
                    (Some(a), Some(b)) if a != *b => {
                        return Err(ThresholdFault::FilterConflict {
                            threshold: format!("{key}: {expr}"),
                            inner: format!("{}:{}", a.0, a.1),
                            outer: format!("{}:{}", b.0, b.1),
                        });
                    }
                    (Some(a), _) => Some(a),
                    (None, k) => k.clone(),
                };
                metric = m;
            }
            match name {
                "avg" => Agg::Avg,
                "med" => Agg::Med,
                "min" => Agg::Min,
                "max" => Agg::Max,
                "rate" => Agg::Rate,
                "count" => Agg::Count,
                other => {
                    return Err(ThresholdFault::NotAnAggregation {
                        expr: at_expr(),
                        name: other.to_string(),
                    });
                }
            }
        };
        let k = kind(&metric).ok_or_else(|| ThresholdFault::NotAMetric { metric: metric.clone() })?;
        let value = bound(expr, &metric, k, agg, rhs)?;
        if http {
            refuse_in_http(key, &metric, tag.as_ref())?;
        } else {
            refuse_in_scenario(key, &metric, tag.as_ref())?;
        }
        if window_s.is_some() && metric == "iteration"
            || window_s.is_some() && metric == "group_duration"
            || window_s.is_some() && metric == "checks"
        {
            return Err(ThresholdFault::NoWindow {
                expr: at_expr(),
                metric,
            });
        }
        if let Some(tag) = &tag {
            tag_is_kept(key, expr, &metric, tag, http)?;
        }
        Ok(Threshold {
            text: format!("{key}: {e}"),
            metric,
            tag,
            agg,
            op,
            value,
            window_s,
            abort_on_fail,
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            pass_without_samples,
            custom: None,
        })
    }

    /// Refuses, before a `throng http` run, a threshold that could only
    /// ever judge nothing in this plan: a `target:` filter naming no target
    /// (`targets`: the plan's target names; empty for a run of one target),
    /// `dropped` in a closed loop, `schedule_lag` in a closed loop.
    pub fn check_http(&self, targets: &[String], open_loop: bool) -> Result<(), NeverJudged> {
        if let Some((_, name)) = self.tag.as_ref().filter(|(k, _)| k == "target") {
            if targets.is_empty() {
                return Err(NeverJudged::OneTarget {
                    text: self.text.clone(),
                    metric: self.metric.clone(),
                });
            }
            if !targets.iter().any(|t| t == name) {
                return Err(NeverJudged::NoSuchTarget {
                    text: self.text.clone(),
                    name: name.clone(),
                    targets: targets.to_vec(),
                });
            }
        }
        if !open_loop && (self.metric == "dropped" || self.metric == "schedule_lag") {
            return Err(NeverJudged::ClosedLoop {
                text: self.text.clone(),
                metric: self.metric.clone(),
            });
        }
        Ok(())
    }

    /// Refuses, before a `throng storm`, a threshold that could only ever
    /// judge nothing in this storm.
    pub fn check_storm(&self, storm: StormShape) -> Result<(), NeverJudged> {
        let why = if self.tag.is_some() {
            "keeps no figures per tag (one target)".to_string()
        } else if self.metric == "dropped" {
            "records nothing dropped (every connection is started, late rather than never)".to_string()
        } else if self.metric == "schedule_lag" && !storm.rate {
            "without --rate has no schedule to lag behind".to_string()
        } else if !storm.requests && matches!(self.metric.as_str(), "errors" | "requests" | "check_failed") {
            format!(
                "that sends no request records no {} (its connections are 'connections' and \
                 'connection_errors')",
                self.metric
            )
        } else {
            return Ok(());
        };
        Err(NeverJudged::NotInStorm {
            text: self.text.clone(),
            why,
        })
    }

    /// Evaluates the threshold on a run's measurements. A threshold over
    /// no samples fails (saying so), unless it was written `... or no
    /// samples`: nothing measured is never evidence that a bound held.
    pub fn evaluate(&self, m: &Measurements) -> Verdict {
        let mut s = m.scenario.clone().unwrap_or_default();
        if !s.tags.contains_key("") {
            // A run that keeps no all-requests tag (throng http with one
            // target) is judged on its own counts, phases and seconds.
            s.tags.insert(String::new(), whole_run(m));
        }
        let unit = |v: f64| -> String {
            match kind(&self.metric).filter(|_| self.custom.is_none()) {
                None if self.agg == Agg::Rate => format!("{:.2}%", v * 100.0),
                None if self.custom.is_some() => format!("{v}"),
                Some(Kind::Trend) => format_us(v),
                Some(Kind::Rate) if self.agg == Agg::Rate => format!("{:.2}%", v * 100.0),
                _ => format!("{v:.0}"),
            }
        };
        let verdict = |passed: bool, observed: Option<f64>, detail: String| Verdict {
            threshold: self.text.clone(),
            passed,
            observed,
            detail,
        };
        let none = || {
            if self.pass_without_samples {
                verdict(
                    true,
                    None,
                    format!("no samples ({}; allowed: {OR_NO_SAMPLES})", self.why_none()),
                )
            } else {
                verdict(
                    false,
                    None,
                    format!(
                        "no samples: {}, so nothing shows the bound held; add '{OR_NO_SAMPLES}' to the \
                         threshold if that may pass",
                        self.why_none()
                    ),
                )
            }
        };
        if self.custom.is_some() {
            return match self.custom_total(&s) {
                Some(v) => verdict(self.op.holds(v, self.value), Some(v), unit(v)),
                None => none(),
            };
        }
        match self.window_s {
            None => match self.total(m, &s) {
                Some(v) => verdict(self.op.holds(v, self.value), Some(v), unit(v)),
                None => none(),
            },
            Some(w) => {
                let windows = self.windows(m, &s, w);
                let worst = windows
                    .iter()
                    .filter(|(_, v)| !self.op.holds(*v, self.value))
                    .max_by(|a, b| {
                        let (x, y) = (a.1, b.1);
                        match self.op {
                            Op::Lt | Op::Le => x.total_cmp(&y),
                            _ => y.total_cmp(&x),
                        }
                    });
                match worst {
                    Some((start, v)) => verdict(
                        false,
                        Some(*v),
                        format!(
                            "{} in the {w}s window from {start}s ({})",
                            unit(*v),
                            throng_plan::count(windows.len() as u64, "window")
                        ),
                    ),
                    None => {
                        let extreme = windows.iter().map(|(_, v)| *v).fold(None, |acc: Option<f64>, v| {
                            Some(acc.map_or(v, |a| match self.op {
                                Op::Lt | Op::Le => a.max(v),
                                _ => a.min(v),
                            }))
                        });
                        match extreme {
                            Some(v) => verdict(
                                true,
                                Some(v),
                                format!(
                                    "worst window {} ({})",
                                    unit(v),
                                    throng_plan::count(windows.len() as u64, "window")
                                ),
                            ),
                            None => none(),
                        }
                    }
                }
            }
        }
    }

    /// Why this threshold found nothing to judge, in the user's words.
    fn why_none(&self) -> String {
        if self.custom.is_some() {
            return format!("no add: step recorded a value into {}", self.metric);
        }
        let filter = self
            .tag
            .as_ref()
            .map_or_else(String::new, |(k, v)| format!(" carrying {k}:{v}"));
        match self.metric.as_str() {
            "errors" | "check_failed" | "requests" => format!("no request{filter} ended"),
            "connections" | "connection_errors" => "no connection attempt ended".to_string(),
            "response" => format!("no response{filter} was timed"),
            "checks" => match &self.tag {
                Some((_, name)) => format!("the check '{name}' never ran"),
                None => "no check ran".to_string(),
            },
            "dropped" => "nothing was scheduled".to_string(),
            "group_duration" => match &self.tag {
                Some((_, name)) => format!("the group '{name}' never completed"),
                None => "no group completed".to_string(),
            },
            "iteration" => "no iteration completed".to_string(),
            phase => format!("no {phase} time was recorded"),
        }
    }

    fn tag_key(&self) -> String {
        self.tag.as_ref().map_or_else(String::new, |(k, v)| format!("{k}:{v}"))
    }

    fn reduce(&self, h: &Hist) -> Option<f64> {
        if h.is_empty() {
            return None;
        }
        Some(match self.agg {
            Agg::P(p) => h.quantile(p / 100.0) as f64,
            Agg::Avg => h.mean(),
            Agg::Med => h.quantile(0.5) as f64,
            Agg::Min => h.min() as f64,
            Agg::Max => h.max() as f64,
            Agg::Rate | Agg::Count => h.count() as f64,
            Agg::Value => return None,
        })
    }

    /// `hits` of `total` events as the threshold's rate or count; None
    /// over no events (a count of errors among no requests shows nothing).
    fn ratio(&self, hits: u64, total: u64) -> Option<f64> {
        match self.agg {
            _ if total == 0 => None,
            Agg::Count => Some(hits as f64),
            _ => Some(hits as f64 / total as f64),
        }
    }

    fn total(&self, m: &Measurements, s: &ScenarioStats) -> Option<f64> {
        let tag = s.tags.get(&self.tag_key());
        match self.metric.as_str() {
            "response" => self.reduce(&tag?.response),
            "iteration" => self.reduce(&s.iteration),
            "group_duration" => match &self.tag {
                Some((_, g)) => self.reduce(s.groups.get(g)?),
                None => {
                    let mut all = Hist::new();
                    for h in s.groups.values() {
                        all.add(h).ok()?;
                    }
                    self.reduce(&all)
                }
            },
            "check_failed" => tag.and_then(|t| self.ratio(t.unexpected_status, t.requests)),
            "errors" => tag.and_then(|t| self.ratio(t.failed, t.requests)),
            "checks" => {
                let (pass, fail) = s
                    .checks
                    .iter()
                    .filter(|(n, _)| self.tag.as_ref().is_none_or(|(_, v)| *n == v))
                    .fold((0, 0), |(p, f), (_, c)| (p + c.passes, f + c.fails));
                // The rate of checks is the fraction that passed.
                self.ratio(pass, pass + fail)
            }
            "requests" => tag.map(|t| t.requests as f64),
            // Connection attempts that ended (cut off by the run's end left
            // out), and the share of them that failed.
            "connections" | "connection_errors" => {
                let cut = m.connections.error("interrupted");
                let ended = m.connections.ended().saturating_sub(cut);
                if self.metric == "connections" {
                    Some(ended as f64)
                } else {
                    self.ratio(m.connections.failed().saturating_sub(cut), ended)
                }
            }
            // Of the schedule (sent or dropped), the share never sent.
            "dropped" => self.ratio(m.dropped, m.requests.attempted.saturating_add(m.dropped)),
            "iterations" => Some(s.iterations as f64),
            "dropped_iterations" => Some(s.dropped_iterations as f64),
            phase => self.reduce(m.phase(phase)?),
        }
    }

    /// (window start second, value) for every `w`-second window with data.
    fn windows(&self, m: &Measurements, s: &ScenarioStats, w: u64) -> Vec<(u64, f64)> {
        let tag = s.tags.get(&self.tag_key());
        let last = m.series.iter().map(|p| p.second).max().unwrap_or(0);
        let mut out = Vec::new();
        let starts: Vec<u64> = if last + 1 >= w {
            (0..=last + 1 - w).collect()
        } else {
            vec![0]
        };
        for start in starts {
            let range = start..start + w;
            let value = match self.metric.as_str() {
                "response" => tag.and_then(|t| {
                    let mut h = Hist::new();
                    for sec in t.series.iter().filter(|x| range.contains(&x.second)) {
                        h.add(&sec.response.decode().ok()?).ok()?;
                    }
                    self.reduce(&h)
                }),
                "check_failed" | "errors" | "requests" => tag.and_then(|t| {
                    let (mut hits, mut total) = (0, 0);
                    for sec in t.series.iter().filter(|x| range.contains(&x.second)) {
                        total += sec.requests;
                        hits += if self.metric == "check_failed" {
                            sec.unexpected_status
                        } else {
                            sec.failed
                        };
                    }
                    if self.metric == "requests" {
                        Some(total as f64)
                    } else {
                        self.ratio(hits, total)
                    }
                }),
                "connections" | "connection_errors" => {
                    let (mut failed, mut ended) = (0u64, 0u64);
                    for p in m.series.iter().filter(|x| range.contains(&x.second)) {
                        let cut = p.connection_error_classes.get("interrupted").copied().unwrap_or(0);
                        let errors = p.connection_errors.saturating_sub(cut);
                        failed = failed.saturating_add(errors);
                        ended = ended.saturating_add(p.connections_opened).saturating_add(errors);
                    }
                    if self.metric == "connections" {
                        Some(ended as f64)
                    } else {
                        self.ratio(failed, ended)
                    }
                }
                "dropped" => {
                    // A second's schedule: what ended in it, and what it dropped.
                    let (mut dropped, mut total) = (0u64, 0u64);
                    for p in m.series.iter().filter(|x| range.contains(&x.second)) {
                        dropped = dropped.saturating_add(p.dropped);
                        total = total.saturating_add(p.requests).saturating_add(p.dropped);
                    }
                    self.ratio(dropped, total)
                }
                "iterations" | "dropped_iterations" => {
                    let n: u64 = s
                        .series
                        .iter()
                        .filter(|x| range.contains(&x.second))
                        .map(|x| {
                            if self.metric == "iterations" {
                                x.iterations
                            } else {
                                x.dropped_iterations
                            }
                        })
                        .sum();
                    Some(n as f64)
                }
                phase => {
                    let mut h = Hist::new();
                    for p in m.series.iter().filter(|x| range.contains(&x.second)) {
                        if let Ok(x) = p.phase(phase) {
                            let _ = h.add(&x);
                        }
                    }
                    self.reduce(&h)
                }
            };
            if let Some(v) = value {
                out.push((start, v));
            }
        }
        out
    }
}

/// The all-requests figures of a run that keeps no tags (throng http with
/// one target), from its outcomes, statuses and phases. As in a tag,
/// requests cut off by the run's end (`interrupted`) are left out: they say
/// nothing about the target.
fn whole_run(m: &Measurements) -> TagStats {
    let interrupted = m.requests.error("interrupted");
    let mut t = TagStats {
        requests: m.requests.ended().saturating_sub(interrupted),
        failed: m.requests.failed().saturating_sub(interrupted),
        interrupted,
        unexpected_status: m.requests.error("check_failed"),
        response: m.phase("response").cloned().unwrap_or_default(),
        expected: Hist::new(),
        series: Vec::new(),
    };
    let empty = throng_metrics::EncodedHist::new(&Hist::new());
    t.series = m
        .series
        .iter()
        .map(|p| {
            let cut = p.error_classes.get("interrupted").copied().unwrap_or(0);
            TagSecond {
                second: p.second,
                requests: p.requests.saturating_sub(cut),
                failed: p.errors.saturating_sub(cut),
                unexpected_status: p.error_classes.get("check_failed").copied().unwrap_or(0),
                response: p.phases.get("response").unwrap_or(&empty).clone(),
            }
        })
        .collect();
    t
}

fn parse_metric(text: &str) -> Result<(String, Option<(String, String)>), ThresholdFault> {
    let t = text.trim();
    match t.split_once('{') {
        None => Ok((t.to_string(), None)),
        Some((m, rest)) => {
            let syntax = || ThresholdFault::FilterSyntax { text: text.to_string() };
            let inner = rest.strip_suffix('}').ok_or_else(syntax)?;
            let (k, v) = inner.split_once(':').ok_or_else(syntax)?;
            let k = k.trim();
            if !["step", "group", "scenario", "stage", "check", "target"].contains(&k) {
                return Err(ThresholdFault::NotATag {
                    text: text.to_string(),
                    tag: k.to_string(),
                });
            }
            Ok((m.trim().to_string(), Some((k.to_string(), v.trim().to_string()))))
        }
    }
}

/// A duration with its unit. A bare number is refused: `200` reads as
/// seconds to some and as milliseconds (k6's threshold bounds) to others.
pub(crate) fn parse_unit_duration(text: &str) -> Result<Duration, UnitDurationError> {
    if text.trim().parse::<f64>().is_ok() {
        return Err(UnitDurationError::NoUnit(text.trim().to_string()));
    }
    throng_plan::parse_duration(text).map_err(UnitDurationError::Duration)
}

fn parse_fraction(text: &str) -> Result<f64, FractionError> {
    let v = match text.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| FractionError::NotAFraction(text.to_string()))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(FractionError::Range(text.to_string()))
    }
}

fn format_us(v: f64) -> String {
    if v < 1000.0 {
        format!("{v:.0}µs")
    } else if v < 1e6 {
        format!("{:.2}ms", v / 1000.0)
    } else {
        format!("{:.2}s", v / 1e6)
    }
}

/// The bound `rhs` of `expr` as `metric` (of kind `k`) and `agg` read it:
/// a duration in microseconds, a fraction, or a count.
fn bound(expr: &str, metric: &str, k: Kind, agg: Agg, rhs: &str) -> Result<f64, ThresholdFault> {
    let (expr, metric) = (expr.to_string(), metric.to_string());
    match (k, agg) {
        (Kind::Trend, Agg::Rate | Agg::Count) => Err(ThresholdFault::NotForDurations { expr, metric }),
        (Kind::Trend, _) => {
            let d = parse_unit_duration(rhs).map_err(|reason| ThresholdFault::Duration { expr, reason })?;
            Ok(d.as_secs_f64() * 1e6)
        }
        (Kind::Rate, Agg::Rate) => parse_fraction(rhs).map_err(|reason| ThresholdFault::Fraction { expr, reason }),
        (Kind::Rate | Kind::Counter, Agg::Count) => {
            rhs.parse::<f64>().map_err(|_| ThresholdFault::CountNotNumber { expr })
        }
        (Kind::Rate, _) => Err(ThresholdFault::NotForRates { expr, metric }),
        (Kind::Counter, _) => Err(ThresholdFault::NotForCounters { expr, metric }),
    }
}

/// Refuses a tag filter `{t:v}` on a metric not kept per that tag: it
/// would never have samples.
fn tag_is_kept(
    key: &str,
    expr: &str,
    metric: &str,
    (t, v): &(String, String),
    http: bool,
) -> Result<(), ThresholdFault> {
    let kinds = tag_kinds(metric);
    if kinds.is_empty() {
        let (key, metric) = (key.to_string(), metric.to_string());
        return Err(if http {
            ThresholdFault::NotKeptPerTarget { key, metric }
        } else {
            ThresholdFault::NotKeptPerTag { key, metric }
        });
    }
    if !kinds.contains(&t.as_str()) {
        return Err(ThresholdFault::NotKeptPerThisTag {
            threshold: format!("{key}: {expr}"),
            metric: metric.to_string(),
            tag: t.clone(),
            value: v.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
