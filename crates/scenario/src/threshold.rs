//! Thresholds: pass/fail criteria on a run's metrics, optionally over
//! sliding windows (`p(95) < 500ms over 30s` fails if any 30-second window
//! breaks it).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use throng_metrics::{Hist, Measurements, ScenarioStats, TagSecond, TagStats};

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

const TRENDS: [&str; 10] = [
    "response",
    "latency",
    "wait",
    "connect",
    "tls",
    "send",
    "receive",
    "schedule_lag",
    "iteration",
    "group_duration",
];
const RATES: [&str; 4] = ["check_failed", "errors", "checks", "dropped"];
const COUNTERS: [&str; 3] = ["requests", "iterations", "dropped_iterations"];

/// Metrics only a scenario records: `throng http` refuses them before the
/// run rather than judge figures it never keeps.
const SCENARIO_ONLY: [&str; 5] = [
    "iteration",
    "group_duration",
    "checks",
    "iterations",
    "dropped_iterations",
];

/// The suffix that lets a threshold pass when nothing was measured:
/// `response{target:/rare}: p(95) < 500ms or no samples`.
pub const OR_NO_SAMPLES: &str = "or no samples";

/// The tag kinds a metric is kept under: what [`Threshold::evaluate`] can
/// look up. Requests are kept per tag in `ScenarioStats::tags` (`step:`,
/// `group:`, `scenario:`, `stage:` keys), checks per check name, group
/// durations per group name; the rest only as a whole.
fn tag_kinds(metric: &str) -> &'static [&'static str] {
    match metric {
        "response" | "errors" | "check_failed" | "requests" => &["step", "group", "scenario", "stage", "target"],
        "checks" => &["check"],
        "group_duration" => &["group"],
        _ => &[],
    }
}

fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn not_a_metric(metric: &str) -> String {
    format!(
        "'{metric}' is not a metric; trends: {}; rates: {}; counters: {}",
        TRENDS.join(", "),
        RATES.join(", "),
        COUNTERS.join(", ")
    )
}

/// A `throng http` threshold names what an HTTP run records.
fn refuse_in_http(key: &str, metric: &str, tag: Option<&(String, String)>) -> Result<(), String> {
    if SCENARIO_ONLY.contains(&metric) {
        return Err(format!(
            "'{key}': {metric} is a scenario's metric (throng run), never recorded by throng http; judge \
             response, latency, errors, check_failed, requests, dropped or a phase"
        ));
    }
    if let Some((t, _)) = tag.filter(|(t, _)| t != "target") {
        return Err(format!(
            "'{key}': {t}: filters are a scenario's; throng http keeps figures per target (target:NAME, with \
             several targets)"
        ));
    }
    Ok(())
}

/// A scenario's threshold names what a scenario records.
fn refuse_in_scenario(key: &str, metric: &str, tag: Option<&(String, String)>) -> Result<(), String> {
    if metric == "dropped" {
        return Err(format!(
            "'{key}': dropped is throng http's (requests an open loop could not send); a scenario's \
             arrival-rate executors count dropped_iterations, e.g. dropped_iterations: count == 0"
        ));
    }
    if tag.is_some_and(|(k, _)| k == "target") {
        return Err(format!(
            "'{key}': target: tags are throng http's (--threshold with several targets); a scenario's requests \
             are tagged by step, group, scenario and stage"
        ));
    }
    Ok(())
}

/// `'a', 'b' and 'c'`, at most ten names and how many more.
fn quoted_list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let quoted: Vec<String> = names.iter().take(SHOWN).map(|n| format!("'{n}'")).collect();
    let more = names.len().saturating_sub(SHOWN);
    match quoted.as_slice() {
        _ if more > 0 => format!("{} and {more} more", quoted.join(", ")),
        [init @ .., last] if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => quoted.join(""),
    }
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
    pub fn parse(key: &str, expr: &str, abort_on_fail: bool, delay: Duration) -> Result<Threshold, String> {
        // Errors quote the key and expression: one line whatever they hold.
        Threshold::parse_raw(key, expr, abort_on_fail, delay, false).map_err(|e| throng_plan::one_line(&e).into_owned())
    }

    /// Parses one line `key: expr` (`throng http --threshold`), e.g.
    /// `response{target:/a}: p(95) < 50ms`: the key ends at the first `:`
    /// after its tag filter.
    pub fn parse_line(text: &str) -> Result<Threshold, String> {
        let from = text.find('}').map_or(0, |i| i + 1);
        let Some(at) = text[from..].find(':').map(|i| from + i) else {
            return Err(format!(
                "'{}' has no ':' between the metric and the criterion; write e.g. 'response: p(95) < 500ms'",
                throng_plan::one_line(text)
            ));
        };
        Threshold::parse_raw(&text[..at], &text[at + 1..], false, Duration::ZERO, true)
            .map_err(|e| throng_plan::one_line(&e).into_owned())
    }

    /// `http`: a `throng http` threshold (`target:` tags, `dropped`), not a
    /// scenario's (steps, groups, checks, iterations).
    fn parse_raw(key: &str, expr: &str, abort_on_fail: bool, delay: Duration, http: bool) -> Result<Threshold, String> {
        let (key_metric, key_tag) = parse_metric(key)?;
        if kind(&key_metric).is_none() {
            return Err(not_a_metric(&key_metric));
        }
        let (mut metric, mut tag) = (key_metric, key_tag.clone());
        let e = expr.trim();
        let (e_judged, pass_without_samples) = match e.strip_suffix(OR_NO_SAMPLES) {
            Some(rest) if rest.ends_with(char::is_whitespace) => (rest.trim_end(), true),
            _ => (e, false),
        };
        let (body, window_s) = match e_judged.rsplit_once(" over ") {
            Some((b, w)) => {
                let d = parse_unit_duration(w.trim()).map_err(|x| format!("'{expr}': {x}"))?;
                if d.as_secs() == 0 || d.subsec_nanos() != 0 {
                    return Err(format!("'{expr}': windows are whole seconds, e.g. over 30s"));
                }
                (b.trim(), Some(d.as_secs()))
            }
            None => (e_judged, None),
        };
        let op_at = body
            .find(['<', '>', '=', '!'])
            .ok_or_else(|| format!("'{expr}' has no comparison; write e.g. p(95) < 500ms"))?;
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
        .ok_or_else(|| format!("'{expr}': the comparison must be <, <=, >, >=, == or !="))?;
        let lhs = lhs.trim();
        let agg = if let Some(p) = lhs.strip_prefix("p(").and_then(|r| r.strip_suffix(')')) {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("'{expr}': p(N) takes a number, e.g. p(95)"))?;
            if !(0.0..=100.0).contains(&p) {
                return Err(format!("'{expr}': percentiles run from 0 to 100"));
            }
            Agg::P(p)
        } else {
            let (name, inner) = match lhs.split_once('(') {
                Some((n, r)) => (
                    n.trim(),
                    Some(r.strip_suffix(')').ok_or_else(|| format!("'{expr}': unbalanced ( )"))?),
                ),
                None => (lhs, None),
            };
            if let Some(inner) = inner {
                // rate(check_failed), count(dropped_iterations): the metric
                // inside wins; the key's tag filter still applies to it.
                let (m, t) = parse_metric(inner)?;
                tag = match (t, &key_tag) {
                    (Some(a), Some(b)) if a != *b => {
                        return Err(format!(
                            "'{key}: {expr}': the filter {{{}:{}}} inside conflicts with the key's {{{}:{}}}; give one",
                            a.0, a.1, b.0, b.1
                        ));
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
                    return Err(format!(
                        "'{expr}': '{other}' is not p(N), avg, med, min, max, rate or count"
                    ));
                }
            }
        };
        let k = kind(&metric).ok_or_else(|| not_a_metric(&metric))?;
        let value = match (k, agg) {
            (Kind::Trend, Agg::Rate | Agg::Count) => {
                return Err(format!(
                    "'{expr}': {metric} is a duration; use p(N), avg, med, min or max"
                ));
            }
            (Kind::Trend, _) => {
                let d = parse_unit_duration(rhs).map_err(|x| format!("'{expr}': {x}"))?;
                d.as_secs_f64() * 1e6
            }
            (Kind::Rate, Agg::Rate) => parse_fraction(rhs).map_err(|x| format!("'{expr}': {x}"))?,
            (Kind::Rate | Kind::Counter, Agg::Count) => rhs
                .parse::<f64>()
                .map_err(|_| format!("'{expr}': count compares with a number"))?,
            (Kind::Rate, _) => return Err(format!("'{expr}': {metric} is a rate; use rate or count")),
            (Kind::Counter, _) => return Err(format!("'{expr}': {metric} is a counter; use count")),
        };
        if http {
            refuse_in_http(key, &metric, tag.as_ref())?;
        } else {
            refuse_in_scenario(key, &metric, tag.as_ref())?;
        }
        if window_s.is_some() && metric == "iteration"
            || window_s.is_some() && metric == "group_duration"
            || window_s.is_some() && metric == "checks"
        {
            return Err(format!(
                "'{expr}': {metric} has no per-second figures to slide a window over"
            ));
        }
        if let Some((t, v)) = &tag {
            let kinds = tag_kinds(&metric);
            if kinds.is_empty() {
                return Err(if http {
                    format!(
                        "'{key}': {metric} is not kept per target; target: filters apply to response, errors, \
                         check_failed and requests"
                    )
                } else {
                    format!(
                        "'{key}': {metric} is not kept per tag; tags apply to response, errors, check_failed and \
                         requests (step, group, scenario, stage), checks (check) and group_duration (group)"
                    )
                });
            }
            if !kinds.contains(&t.as_str()) {
                return Err(format!(
                    "'{key}: {expr}': {metric} is kept per {}, not per {t}, so {metric}{{{t}:{v}}} would never \
                     have samples",
                    // `target:` tags are throng http's; a scenario's user is told of its own.
                    or_list(&kinds.iter().copied().filter(|k| *k != "target").collect::<Vec<_>>())
                ));
            }
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
        })
    }

    /// Refuses, before a `throng http` run, a threshold that could only
    /// ever judge nothing in this plan: a `target:` filter naming no target
    /// (`targets`: the plan's target names; empty for a run of one target),
    /// `dropped` in a closed loop, `schedule_lag` in a closed loop.
    pub fn check_http(&self, targets: &[String], open_loop: bool) -> Result<(), String> {
        if let Some((_, name)) = self.tag.as_ref().filter(|(k, _)| k == "target") {
            if targets.is_empty() {
                return Err(format!(
                    "'{}': this run has one target, so no figures are kept per target; judge the whole run \
                     ('{}: ...') or give several URLs",
                    self.text, self.metric
                ));
            }
            if !targets.iter().any(|t| t == name) {
                return Err(format!(
                    "'{}': no target is named '{name}'; the targets are {}",
                    self.text,
                    quoted_list(targets)
                ));
            }
        }
        if !open_loop && (self.metric == "dropped" || self.metric == "schedule_lag") {
            return Err(format!(
                "'{}': {} is measured only in an open loop (-r RATE), and this run is a closed loop, so it \
                 would never have samples; give -r or remove the threshold",
                self.text, self.metric
            ));
        }
        Ok(())
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
            match kind(&self.metric) {
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
        let filter = self
            .tag
            .as_ref()
            .map_or_else(String::new, |(k, v)| format!(" carrying {k}:{v}"));
        match self.metric.as_str() {
            "errors" | "check_failed" | "requests" => format!("no request{filter} ended"),
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

fn parse_metric(text: &str) -> Result<(String, Option<(String, String)>), String> {
    let t = text.trim();
    match t.split_once('{') {
        None => Ok((t.to_string(), None)),
        Some((m, rest)) => {
            let inner = rest
                .strip_suffix('}')
                .ok_or_else(|| format!("'{text}': a tag filter is written metric{{tag:value}}"))?;
            let (k, v) = inner
                .split_once(':')
                .ok_or_else(|| format!("'{text}': a tag filter is written metric{{tag:value}}"))?;
            let k = k.trim();
            if !["step", "group", "scenario", "stage", "check", "target"].contains(&k) {
                return Err(format!(
                    "'{text}': '{k}' is not a tag; use step, group, scenario, stage, check or target"
                ));
            }
            Ok((m.trim().to_string(), Some((k.to_string(), v.trim().to_string()))))
        }
    }
}

/// A duration with its unit. A bare number is refused: `200` reads as
/// seconds to some and as milliseconds (k6's threshold bounds) to others.
pub(crate) fn parse_unit_duration(text: &str) -> Result<Duration, String> {
    if text.trim().parse::<f64>().is_ok() {
        return Err(format!(
            "durations need a unit, e.g. 500ms, 30s, 2m ('{}' has none)",
            text.trim()
        ));
    }
    throng_plan::parse_duration(text)
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    let v = match text.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("'{text}' is not a fraction such as 0.01 or 1%"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("'{text}': a rate runs from 0 to 1"))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use throng_metrics::ScenarioRecorder;

    fn th(key: &str, expr: &str) -> Threshold {
        Threshold::parse(key, expr, false, Duration::ZERO).unwrap()
    }

    #[test]
    fn parses_what_k6_users_write() {
        let t = th("response{step:login}", "p(95) < 500ms over 30s");
        assert_eq!(t.tag, Some(("step".into(), "login".into())));
        assert_eq!(t.agg, Agg::P(95.0));
        assert_eq!(t.value, 500_000.0);
        assert_eq!(t.window_s, Some(30));
        let r = th("response", "rate(check_failed) < 0.01");
        assert_eq!((r.metric.as_str(), r.agg, r.value), ("check_failed", Agg::Rate, 0.01));
        assert_eq!(th("dropped_iterations", "count == 0").op, Op::Eq);
        assert_eq!(th("response", "avg < 200ms").value, 200_000.0);
        for (k, e, why) in [
            ("response", "p(95) 500ms", "no comparison"),
            ("nope", "avg < 1s", "not a metric"),
            ("response", "rate < 0.1", "is a duration"),
            ("check_failed", "p(95) < 1", "is a rate"),
            ("response{host:x}", "avg < 1s", "not a tag"),
            ("response", "p(95) < 1s over 1.5s", "whole seconds"),
            ("iteration", "avg < 1s over 10s", "no per-second"),
        ] {
            let e = Threshold::parse(k, e, false, Duration::ZERO).unwrap_err();
            assert!(e.contains(why), "{k} {e}");
        }
    }

    fn rejects(key: &str, expr: &str, why: &str) {
        match Threshold::parse(key, expr, false, Duration::ZERO) {
            Err(e) => assert!(e.contains(why), "{key}: {expr}: {e}"),
            Ok(t) => panic!("{key}: {expr} accepted as {t:?}"),
        }
    }

    #[test]
    fn durations_need_a_unit() {
        for (key, expr) in [
            ("response", "avg < 200"),
            ("response", "p(95) < 0.5"),
            ("response", "p(95) < 500ms over 30"),
        ] {
            rejects(key, expr, "durations need a unit, e.g. 500ms, 30s, 2m");
        }
        // Rates and counts are numbers.
        assert_eq!(th("errors", "count < 5").value, 5.0);
        assert_eq!(th("errors", "rate < 0.5").value, 0.5);
    }

    #[test]
    fn the_delay_keeps_its_milliseconds() {
        let t = Threshold::parse("errors", "rate < 1%", true, Duration::from_millis(1500)).unwrap();
        assert_eq!(t.delay_ms, 1500);
    }

    #[test]
    fn a_metric_takes_only_the_tags_it_is_kept_under() {
        for (key, expr) in [
            ("response{step:a}", "p(95) < 1s"),
            ("response{group:a}", "p(95) < 1s"),
            ("response{scenario:a}", "p(95) < 1s"),
            ("response{stage:a#1}", "p(95) < 1s"),
            ("errors{step:a}", "rate < 1%"),
            ("check_failed{stage:a#2}", "rate < 1%"),
            ("requests{group:a}", "count > 1"),
            ("checks{check:a}", "rate > 0.9"),
            ("group_duration{group:a}", "p(95) < 1s"),
        ] {
            Threshold::parse(key, expr, false, Duration::ZERO).unwrap_or_else(|e| panic!("{key}: {e}"));
        }
        for (key, expr, why) in [
            (
                "response{check:a}",
                "p(95) < 1s",
                "response is kept per step, group, scenario or stage, not per check",
            ),
            ("errors{check:a}", "rate < 1%", "not per check"),
            ("checks{step:a}", "rate > 0.9", "checks is kept per check, not per step"),
            (
                "group_duration{step:a}",
                "p(95) < 1s",
                "group_duration is kept per group, not per step",
            ),
            ("group_duration{scenario:a}", "p(95) < 1s", "not per scenario"),
            ("iteration{group:a}", "p(95) < 1s", "iteration is not kept per tag"),
            ("iterations{scenario:a}", "count > 1", "iterations is not kept per tag"),
            ("dropped_iterations{scenario:a}", "count == 0", "is not kept per tag"),
            ("schedule_lag{scenario:a}", "p(95) < 1s", "is not kept per tag"),
            ("latency{step:a}", "p(95) < 1s", "is not kept per tag"),
        ] {
            rejects(key, expr, why);
        }
    }

    #[test]
    fn a_line_splits_after_the_tag_filter() {
        let t = Threshold::parse_line("response{target:http://h:8080/a}: p(95) < 50ms").unwrap();
        assert_eq!(t.tag, Some(("target".to_string(), "http://h:8080/a".to_string())));
        assert_eq!(
            (t.metric.as_str(), t.agg, t.op, t.value),
            ("response", Agg::P(95.0), Op::Lt, 50_000.0)
        );
        let t = Threshold::parse_line("errors: rate < 1%").unwrap();
        assert_eq!((t.metric.as_str(), t.tag.is_none()), ("errors", true));
        assert!(Threshold::parse_line("errors{target:/a?b=1}: rate < 1%").is_ok());
        let e = Threshold::parse("response{target:/a}", "p(95) < 1s", false, Duration::ZERO).unwrap_err();
        assert!(e.contains("target: tags are throng http's"), "{e}");
        let e = Threshold::parse_line("errors rate < 1%").unwrap_err();
        assert!(e.contains("has no ':'"), "{e}");
    }

    #[test]
    fn the_metric_inside_keeps_the_keys_tag() {
        let t = th("response{step:login}", "rate(check_failed) < 0.01");
        assert_eq!(t.metric, "check_failed");
        assert_eq!(t.tag, Some(("step".into(), "login".into())));
        let t = th("response", "rate(check_failed{group:g}) < 0.01");
        assert_eq!(t.tag, Some(("group".into(), "g".into())));
        let t = th("response{step:a}", "count(errors{step:a}) < 5");
        assert_eq!(
            (t.metric.as_str(), t.tag),
            ("errors", Some(("step".into(), "a".into())))
        );
        rejects(
            "response{step:a}",
            "rate(errors{step:b}) < 0.01",
            "the filter {step:b} inside conflicts with the key's {step:a}",
        );
        // The key's tag must suit the metric inside.
        rejects(
            "checks{check:c}",
            "rate(check_failed) < 0.01",
            "check_failed is kept per step",
        );
        rejects(
            "group_duration{group:g}",
            "count(dropped_iterations) == 0",
            "is not kept per tag",
        );
        // The key is a metric too, even when the expression names another.
        rejects(
            "http_req_failed",
            "rate(check_failed) < 0.01",
            "'http_req_failed' is not a metric",
        );
    }

    #[test]
    fn tagged_thresholds_find_their_samples() {
        let t0 = std::time::Instant::now();
        let mut r = ScenarioRecorder::new(t0);
        let (all, login, home) = (r.tag(""), r.tag("step:login"), r.tag("step:home"));
        let ok = r.check_index("ok");
        let g = r.group_index("g");
        for i in 0..10u64 {
            let at = t0 + Duration::from_millis(i * 10);
            // Every login has an unexpected status; home never does.
            r.request(at, &[all, login], Some((Duration::from_millis(5), false)), false);
            r.request(at, &[all, home], Some((Duration::from_millis(5), true)), false);
            r.check(ok, i < 8);
        }
        r.group(g, Duration::from_millis(30));
        let m = Measurements {
            scenario: Some(r.finish(t0 + Duration::from_secs(1))),
            ..Measurements::default()
        };
        let observed = |key: &str, expr: &str| th(key, expr).evaluate(&m).observed;
        assert_eq!(observed("response{step:login}", "rate(check_failed) < 0.01"), Some(1.0));
        assert_eq!(observed("response{step:home}", "rate(check_failed) < 0.01"), Some(0.0));
        assert_eq!(observed("check_failed", "rate < 0.01"), Some(0.5));
        assert_eq!(observed("requests{step:login}", "count > 1"), Some(10.0));
        assert_eq!(observed("checks{check:ok}", "rate > 0.9"), Some(0.8));
        assert_eq!(observed("checks", "count(checks{check:ok}) > 1"), Some(8.0));
        let slowest = observed("group_duration{group:g}", "max < 1s").unwrap_or_default();
        assert!((30_000.0..30_100.0).contains(&slowest), "{slowest} µs");
    }

    #[test]
    fn a_sliding_window_catches_one_bad_window() {
        let t0 = std::time::Instant::now();
        let mut r = ScenarioRecorder::new(t0);
        let all = r.tag("");
        // 60 s of 10 ms responses, except seconds 30–34 at 900 ms.
        for s in 0..60u64 {
            for k in 0..10u64 {
                let d = if (30..35).contains(&s) { 900 } else { 10 };
                r.request(
                    t0 + Duration::from_millis(s * 1000 + k * 50),
                    &[all],
                    Some((Duration::from_millis(d), true)),
                    false,
                );
            }
        }
        let stats = r.finish(t0 + Duration::from_secs(60));
        let m = Measurements {
            scenario: Some(stats),
            series: (0..60)
                .map(|s| throng_metrics::SeriesPoint {
                    second: s,
                    ..Default::default()
                })
                .collect(),
            ..Measurements::default()
        };
        // Over the whole run p(90) is 10 ms: passes.
        assert!(th("response", "p(90) < 500ms").evaluate(&m).passed);
        // A 5 s window is all slow: fails, and says where.
        let v = th("response", "p(90) < 500ms over 5s").evaluate(&m);
        assert!(!v.passed, "{v:?}");
        assert!(v.detail.contains("window from 3"), "{}", v.detail);
        let _ = TagStats::default();
    }

    /// A `throng http` run of one target: 200 requests over two seconds,
    /// every other one a 503 (check_failed), 40 more scheduled and
    /// dropped; every phase timed. No scenario figures, as the engine
    /// leaves them for one target.
    fn one_target_run() -> Measurements {
        let mut m = Measurements::default();
        m.requests.attempted = 200;
        m.requests.ok = 100;
        m.requests.errors.insert("check_failed".into(), 100);
        m.status.insert(200, 100);
        m.status.insert(503, 100);
        m.dropped = 40;
        let mut h = Hist::new();
        h.record_n_us(2_000, 100);
        let mut per_second = BTreeMap::new();
        for phase in TRENDS.iter().filter(|p| !SCENARIO_ONLY.contains(p)) {
            m.phases.insert((*phase).to_string(), h.clone());
            per_second.insert((*phase).to_string(), throng_metrics::EncodedHist::new(&h));
        }
        m.series = (0..2)
            .map(|second| throng_metrics::SeriesPoint {
                second,
                requests: 100,
                ok: 50,
                errors: 50,
                error_classes: BTreeMap::from([("check_failed".to_string(), 50)]),
                dropped: 20,
                phases: per_second.clone(),
                ..Default::default()
            })
            .collect();
        m
    }

    /// The same requests as a run of two targets (`target:/a`, `target:/b`)
    /// or a scenario's steps records them: per tag, and under the
    /// all-requests tag.
    fn tagged_run(tags: [&str; 2], scenario: bool) -> Measurements {
        let mut m = one_target_run();
        let t0 = std::time::Instant::now();
        let mut r = ScenarioRecorder::new(t0);
        let (all, a, b) = (r.tag(""), r.tag(tags[0]), r.tag(tags[1]));
        let ok = r.check_index("ok");
        let g = r.group_index("g");
        for i in 0..200u64 {
            let at = t0 + Duration::from_millis(i * 10);
            let tag = if i % 2 == 0 { a } else { b };
            r.request(
                at,
                &[all, tag],
                Some((Duration::from_millis(2), i % 2 == 0)),
                i % 2 == 1,
            );
            if scenario {
                r.check(ok, i % 2 == 0);
                r.iteration(at, Duration::from_millis(3));
                r.group(g, Duration::from_millis(3));
            }
        }
        if scenario {
            r.dropped_iteration(t0);
            m.dropped = 0;
        }
        m.scenario = Some(r.finish(t0 + Duration::from_secs(2)));
        m
    }

    /// An expression for each metric, true on the runs above.
    fn expression(metric: &str) -> &'static str {
        match kind(metric) {
            Some(Kind::Trend) => "p(95) < 10s",
            Some(Kind::Rate) => "rate <= 100%",
            _ => "count >= 0",
        }
    }

    #[test]
    fn every_metric_is_judged_on_the_samples_each_kind_of_run_keeps() {
        let http_one = one_target_run();
        let http_targets = tagged_run(["target:/a", "target:/b"], false);
        let scenario = tagged_run(["step:a", "step:b"], true);
        let metrics: Vec<&str> = TRENDS.iter().chain(&RATES).chain(&COUNTERS).copied().collect();
        let mut judged = 0;
        for metric in &metrics {
            for window in ["", " over 1s"] {
                let expr = format!("{}{window}", expression(metric));
                let http = Threshold::parse_line(&format!("{metric}: {expr}"));
                let scen = Threshold::parse(metric, &expr, false, Duration::ZERO);
                // Each metric is one kind of run's, or both's.
                assert!(
                    http.is_ok() || scen.is_ok() || !window.is_empty(),
                    "{metric}: {http:?} {scen:?}"
                );
                let mut runs: Vec<(&str, &Threshold, &Measurements)> = Vec::new();
                if let Ok(t) = &http {
                    runs.push(("http, one target", t, &http_one));
                    runs.push(("http, two targets", t, &http_targets));
                }
                if let Ok(t) = &scen {
                    runs.push(("scenario", t, &scenario));
                }
                for (run, t, m) in runs {
                    let v = t.evaluate(m);
                    assert!(v.passed && v.observed.is_some(), "{run}: {}: {v:?}", t.text);
                    judged += 1;
                }
            }
        }
        // Every metric was judged on a run that keeps it.
        assert!(judged >= 2 * metrics.len(), "{judged}");
        // Per tag, too.
        for (key, m) in [("errors{target:/b}", &http_targets), ("errors{step:b}", &scenario)] {
            let t = if key.contains("target") {
                Threshold::parse_line(&format!("{key}: rate < 1%")).unwrap()
            } else {
                th(key, "rate < 1%")
            };
            let v = t.evaluate(m);
            assert_eq!((v.passed, v.observed), (false, Some(1.0)), "{key}");
        }
    }

    #[test]
    fn a_one_target_run_is_judged_on_its_own_counts() {
        let m = one_target_run();
        let judge = |line: &str| Threshold::parse_line(line).unwrap().evaluate(&m);
        for (line, passed, observed) in [
            ("errors: rate < 1%", false, 0.5),
            ("errors: count == 0", false, 100.0),
            ("check_failed: rate < 1%", false, 0.5),
            ("requests: count >= 1000", false, 200.0),
            ("requests: count == 200", true, 200.0),
            ("errors: rate < 1% over 1s", false, 0.5),
            ("requests: count >= 1000 over 1s", false, 100.0),
            ("dropped: rate < 1%", false, 40.0 / 240.0),
            ("dropped: count == 40", true, 40.0),
            ("dropped: rate < 1% over 1s", false, 20.0 / 120.0),
            ("response: p(95) < 1ms", false, 2_000.0),
        ] {
            let v = judge(line);
            assert_eq!(v.passed, passed, "{line}: {v:?}");
            let seen = v.observed.unwrap_or(f64::NAN);
            assert!((seen - observed).abs() < 1e-6, "{line}: {v:?}");
        }
        // Requests cut off by the run's end say nothing about the target.
        let mut m = one_target_run();
        m.requests.attempted += 50;
        m.requests.errors.insert("interrupted".into(), 50);
        let v = Threshold::parse_line("errors: rate < 1%").unwrap().evaluate(&m);
        assert_eq!(v.observed, Some(0.5));
    }

    #[test]
    fn no_samples_fails_unless_the_threshold_allows_it() {
        let nothing = Measurements::default();
        for line in [
            "errors: rate < 1%",
            "errors: count == 0",
            "check_failed: rate < 1%",
            "response: p(95) < 1s",
            "tls: max < 1s",
            "dropped: rate < 1%",
            "errors: rate < 1% over 10s",
            "response: p(95) < 1s over 1s",
        ] {
            let v = Threshold::parse_line(line).unwrap().evaluate(&nothing);
            assert!(!v.passed, "{line}: {v:?}");
            assert!(v.detail.starts_with("no samples: "), "{line}: {}", v.detail);
            assert!(v.detail.contains("'or no samples'"), "{line}: {}", v.detail);
            let allowed = Threshold::parse_line(&format!("{line} or no samples")).unwrap();
            assert!(allowed.pass_without_samples);
            assert_eq!(allowed.text, format!("{line} or no samples"));
            let v = allowed.evaluate(&nothing);
            assert!(v.passed, "{line}: {v:?}");
            assert!(v.detail.starts_with("no samples ("), "{}", v.detail);
            // Allowed or not, samples are judged as ever.
            let v = allowed.evaluate(&one_target_run());
            assert!(v.observed.is_some(), "{line}: {v:?}");
        }
        // A scenario's tag with no requests, a check that never ran.
        let m = tagged_run(["step:a", "step:b"], true);
        for (key, expr, why) in [
            ("checks{check:never}", "rate > 0.9", "the check 'never' never ran"),
            ("group_duration{group:h}", "p(95) < 1s", "the group 'h' never completed"),
            (
                "response{step:c}",
                "p(95) < 1s",
                "no response carrying step:c was timed",
            ),
        ] {
            let v = th(key, expr).evaluate(&m);
            assert!(!v.passed && v.detail.contains(why), "{key}: {v:?}");
            let v = th(key, &format!("{expr} {OR_NO_SAMPLES}")).evaluate(&m);
            assert!(v.passed, "{key}: {v:?}");
        }
        // The words are a suffix, not part of a bound.
        rejects("errors", "rate < 1%or no samples", "not a fraction");
        assert!(th("response", "p(95) < 1s over 5s or no samples").window_s == Some(5));
    }

    #[test]
    fn each_kind_of_run_takes_only_its_own_metrics_and_filters() {
        for (line, why) in [
            ("iterations: count > 1", "a scenario's metric"),
            ("checks: rate > 0.9", "a scenario's metric"),
            ("group_duration: p(95) < 1s", "a scenario's metric"),
            ("errors{step:login}: rate < 1%", "step: filters are a scenario's"),
            ("latency{target:/a}: p(95) < 1s", "latency is not kept per target"),
            ("dropped{target:/a}: rate < 1%", "dropped is not kept per target"),
            // No figures are kept per status: such a filter would judge nothing.
            ("errors{status:503}: count == 0", "'status' is not a tag"),
        ] {
            match Threshold::parse_line(line) {
                Err(e) => assert!(e.contains(why), "{line}: {e}"),
                Ok(t) => panic!("{line} accepted as {t:?}"),
            }
        }
        rejects("dropped", "rate < 1%", "count dropped_iterations");
        rejects("response", "rate(dropped) < 1%", "count dropped_iterations");
    }

    #[test]
    fn an_http_threshold_must_name_what_the_plan_has() {
        let names = vec!["/a".to_string(), "/b".to_string()];
        let check =
            |line: &str, names: &[String], open: bool| Threshold::parse_line(line).unwrap().check_http(names, open);
        assert!(check("errors{target:/a}: rate < 1%", &names, false).is_ok());
        let e = check("errors{target:/c}: rate < 1%", &names, false).unwrap_err();
        assert!(
            e.contains("no target is named '/c'; the targets are '/a' and '/b'"),
            "{e}"
        );
        assert!(e.contains("errors{target:/c}: rate < 1%"), "{e}");
        let e = check("errors{target:/a}: rate < 1%", &[], false).unwrap_err();
        assert!(e.contains("this run has one target"), "{e}");
        let e = check("dropped: rate < 1%", &[], false).unwrap_err();
        assert!(e.contains("only in an open loop"), "{e}");
        let e = check("schedule_lag: p(99) < 1s", &[], false).unwrap_err();
        assert!(e.contains("only in an open loop"), "{e}");
        assert!(check("dropped: rate < 1%", &[], true).is_ok());
        let many: Vec<String> = (0..12).map(|i| format!("/t{i}")).collect();
        let e = check("errors{target:/x}: rate < 1%", &many, false).unwrap_err();
        assert!(e.contains("'/t9' and 2 more"), "{e}");
    }
}
