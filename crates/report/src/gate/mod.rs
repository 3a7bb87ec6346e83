//! The gate of `throng compare --fail-on RULE`: rules on the change of a
//! compared figure, failing only when the change is also significant.
//!
//! ```text
//!  "p99 > +10%" ── Rule::parse ──► Rule ─┐
//!                                        ├─ evaluate ──► Gate { rules: [Judged], mixed }
//!  Comparison (any two sides) ───────────┘      │  figure A, B; change; test
//!                                               ▼
//!                       failed | held | not significant (crossed, but noise)
//! ```
//!
//! A rule names a figure, how its change is measured and the limit:
//! `METRIC[{tag:value}]: STAT OP CHANGE` as `--threshold` writes its metrics
//! (`response{target:/login}: p(95) > +15%`), or a short form: a statistic of
//! the headline phase (`p99 > +10%`), `rps`/`throughput` (`rps < -20%`),
//! `errors` or `check_failed` (`errors > +1pt`). The rule *fails* when the
//! change is OP the limit and the change is significant by compare's own
//! test: the bootstrap and Mann–Whitney test over runs or seconds for
//! durations and throughput (the existing tests where they exist), the
//! two-proportion z-test for error rates. A figure missing on either side
//! is an error ([`GateError`]): a gate never passes for want of data.

use throng_metrics::TagStats;
use throng_result::RunResult;

use crate::compare::{self, Basis, Comparison, Side, Test, Unit, Verdict};
use crate::format::clip;
use crate::stats;

pub(crate) mod mixed;
mod rule;
#[cfg(test)]
mod tests;
pub(crate) mod verdict;
pub(crate) mod write;

pub use self::mixed::mixed_plans;
pub use self::rule::{Limit, Op, Rule, RuleError, Stat, Subject};
pub use self::verdict::{Gate, Judged, Significance, Status};
pub use self::write::{write_markdown, write_text};

/// A rule that cannot be judged on these two sides: a figure one side does
/// not have. Refused, never held.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateError {
    /// The figure is missing (no samples, no such target or step) on a side.
    Missing {
        /// The rule as written.
        rule: String,
        /// Which side lacks what, and what it has.
        why: String,
    },
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::Missing { rule, why } => write!(
                f,
                "'{}': {why}; a rule on a figure a side lacks can neither hold nor fail: fix the rule or the runs",
                throng_plan::one_line(rule)
            ),
        }
    }
}

impl std::error::Error for GateError {}

impl Comparison {
    /// Judges `rules` on this comparison and keeps the verdict for the
    /// views; a rule on a figure a side lacks is an error.
    pub fn judge(&mut self, rules: &[Rule], allow_mixed: bool) -> Result<(), GateError> {
        self.gate = Some(evaluate(self, rules, allow_mixed)?);
        Ok(())
    }
}

/// Judges every rule on `c`. A rule on a figure that either side lacks is
/// an error, never a held rule.
pub fn evaluate(c: &Comparison, rules: &[Rule], allow_mixed: bool) -> Result<Gate, GateError> {
    let rules = rules.iter().map(|r| judge(c, r)).collect::<Result<Vec<_>, _>>()?;
    let failed = rules.iter().any(|r| r.status == Status::Failed);
    Ok(Gate {
        verdict: if failed { "failed" } else { "passed" },
        rules,
        mixed: c.mixed.clone(),
        allow_mixed: allow_mixed && !c.mixed.is_empty(),
    })
}

/// A figure of both sides and how to test its change.
struct Found {
    figure: String,
    unit: Unit,
    a: f64,
    b: f64,
    test: Significance,
}

fn judge(c: &Comparison, rule: &Rule) -> Result<Judged, GateError> {
    let f = find(c, rule)?;
    let diff = f.b - f.a;
    let change = match rule.limit {
        Limit::Relative(_) => match (f.a == 0.0, diff == 0.0) {
            (_, true) => 0.0,
            (true, false) => diff.signum() * f64::INFINITY,
            (false, false) => diff / f.a * 100.0,
        },
        Limit::Points(_) | Limit::Micros(_) | Limit::PerSecond(_) => diff,
    };
    let limit = rule.limit.value();
    let exceeded = rule.op.holds(change, limit);
    let significant = f.test.verdict == Verdict::Significant && f.test.same_direction && diff != 0.0;
    let status = match (exceeded, significant) {
        (false, _) => Status::Held,
        (true, true) => Status::Failed,
        (true, false) => Status::NotSignificant,
    };
    Ok(Judged {
        rule: rule.text.clone(),
        figure: f.figure,
        unit: f.unit,
        a: f.a,
        b: f.b,
        change,
        limit,
        limit_unit: rule.limit.unit_name(),
        op: rule.op.symbol(),
        exceeded,
        test: f.test,
        status,
        change_text: rule.limit.show(change),
    })
}

fn missing(rule: &Rule, why: String) -> GateError {
    GateError::Missing {
        rule: rule.text.clone(),
        why,
    }
}

fn sides(c: &Comparison) -> [(&str, &Side, &RunResult); 2] {
    [("A", &c.a, &c.merged_a), ("B", &c.b, &c.merged_b)]
}

fn find(c: &Comparison, rule: &Rule) -> Result<Found, GateError> {
    let tag_key = rule.filter.as_ref().map(|(k, v)| format!("{k}:{v}"));
    match &rule.subject {
        Subject::Duration(phase, stat) => {
            let phase = match phase {
                Some(p) => p.clone(),
                None => headline(c).ok_or_else(|| {
                    missing(
                        rule,
                        "the sides have no headline phase in common (latency; connect for storms)".into(),
                    )
                })?,
            };
            // `response` of a tag, or of every request of a scenario.
            let tagged = tag_key
                .clone()
                .or_else(|| (phase == "response" && has_tag(c, "")).then(String::new));
            match tagged {
                Some(key) => duration_of_tag(c, rule, &key, *stat),
                None => duration_of_phase(c, rule, &phase, *stat),
            }
        }
        Subject::Throughput => match &tag_key {
            None => {
                let name = compare::throughput_name(&c.merged_a);
                let test = c
                    .tests
                    .iter()
                    .find(|t| t.name == name)
                    .cloned()
                    .unwrap_or_else(|| c.test_values(name, Unit::PerSecond, Vec::new(), Vec::new()));
                Ok(Found {
                    figure: name.to_string(),
                    unit: Unit::PerSecond,
                    a: compare::throughput(&c.merged_a),
                    b: compare::throughput(&c.merged_b),
                    test: bootstrap(&test, 0.0),
                })
            }
            Some(key) => {
                let [ta, tb] = tags_of(c, rule, key)?;
                let ok = |t: &TagStats| t.requests.saturating_sub(t.failed);
                let per_second = |t: &TagStats, r: &RunResult| throng_result::per_second(ok(t), r.duration_s);
                let (a, b) = (per_second(ta, &c.merged_a), per_second(tb, &c.merged_b));
                let values = |side: &Side| -> Vec<f64> {
                    side.runs
                        .iter()
                        .flat_map(|r| match c.basis {
                            Basis::Runs => tag(r, key).map(|t| per_second(t, r)).into_iter().collect::<Vec<_>>(),
                            Basis::Seconds => {
                                let limit = compare::full_second_limit(r);
                                tag(r, key)
                                    .map(|t| {
                                        t.series
                                            .iter()
                                            .filter(|s| s.second < limit)
                                            .map(|s| s.requests.saturating_sub(s.failed) as f64)
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            }
                        })
                        .collect()
                };
                let figure = format!("rps{{{}}}", key);
                let test = c.test_values(&figure, Unit::PerSecond, values(&c.a), values(&c.b));
                Ok(Found {
                    test: bootstrap(&test, b - a),
                    figure,
                    unit: Unit::PerSecond,
                    a,
                    b,
                })
            }
        },
        Subject::Errors | Subject::CheckFailed => {
            let errors = rule.subject == Subject::Errors;
            let counts: [(u64, u64); 2] = match (&tag_key, errors) {
                (None, true) => [&c.merged_a, &c.merged_b].map(|r| {
                    let o = r.unit_outcomes();
                    (o.failed(), o.ended())
                }),
                (key, _) => {
                    let key = key.clone().unwrap_or_default();
                    if key.is_empty() && !has_tag(c, "") {
                        return Err(missing(
                            rule,
                            "check_failed is kept for scenarios and http runs with several targets; these runs \
                             have no per-request checks"
                                .into(),
                        ));
                    }
                    let [ta, tb] = tags_of(c, rule, &key)?;
                    [ta, tb].map(|t| (if errors { t.failed } else { t.unexpected_status }, t.requests))
                }
            };
            for ((label, _, _), (_, n)) in sides(c).iter().zip(&counts) {
                if *n == 0 {
                    return Err(missing(
                        rule,
                        format!("side {label} ended no {}: it has no error rate", unit_name(c)),
                    ));
                }
            }
            let [(xa, na), (xb, nb)] = counts;
            let pct = |x: u64, n: u64| x as f64 / n as f64 * 100.0;
            let (a, b) = (pct(xa, na), pct(xb, nb));
            let p = stats::two_proportion(xa, na, xb, nb);
            let alpha = 1.0 - c.options.confidence;
            let rel = if a == 0.0 { None } else { Some((b - a) / a) };
            let verdict = match p {
                Some(p) if p < alpha && rel.is_none_or(|r| r.abs() >= c.options.min_effect) => Verdict::Significant,
                Some(p) if p < alpha => Verdict::Negligible,
                _ => Verdict::NotSignificant,
            };
            let name = if errors { "errors (%)" } else { "check_failed (%)" };
            Ok(Found {
                figure: match &tag_key {
                    Some(k) => format!("{}{{{k}}} (%)", name.trim_end_matches(" (%)")),
                    None => name.to_string(),
                },
                unit: Unit::Percent,
                a,
                b,
                test: Significance {
                    method: "two_proportion",
                    basis: None,
                    p_value: p,
                    interval: None,
                    verdict,
                    same_direction: true,
                },
            })
        }
    }
}

fn unit_name(c: &Comparison) -> &'static str {
    match c.merged_a.unit() {
        throng_result::Unit::Connections => "connections",
        throng_result::Unit::Requests => "requests",
        throng_result::Unit::Messages => "messages",
    }
}

/// The first headline phase both sides have.
fn headline(c: &Comparison) -> Option<String> {
    let b = compare::headline_phases(&c.merged_b);
    compare::headline_phases(&c.merged_a)
        .into_iter()
        .find(|p| b.contains(p))
        .map(str::to_string)
}

fn tag<'a>(r: &'a RunResult, key: &str) -> Option<&'a TagStats> {
    r.measurements.scenario.as_ref()?.tags.get(key)
}

fn has_tag(c: &Comparison, key: &str) -> bool {
    tag(&c.merged_a, key).is_some() && tag(&c.merged_b, key).is_some()
}

/// Both sides' figures of a tag, or which side lacks it and what it has.
fn tags_of<'a>(c: &'a Comparison, rule: &Rule, key: &str) -> Result<[&'a TagStats; 2], GateError> {
    let one = |(label, side, merged): (&str, &Side, &'a RunResult)| -> Result<&'a TagStats, GateError> {
        tag(merged, key).ok_or_else(|| {
            let (kind, name) = key.split_once(':').unwrap_or((key, ""));
            let known: Vec<&str> = merged
                .measurements
                .scenario
                .iter()
                .flat_map(|s| s.tags.keys())
                .filter_map(|k| k.strip_prefix(kind).and_then(|r| r.strip_prefix(':')))
                .take(12)
                .collect();
            let has = if known.is_empty() {
                format!("it keeps no {kind}: figures")
            } else {
                format!("its {kind}s: {}", known.join(", "))
            };
            missing(
                rule,
                format!("side {label} ({}) has no {kind} '{name}'; {has}", clip(&side.label, 40)),
            )
        })
    };
    let [a, b] = sides(c);
    Ok([one(a)?, one(b)?])
}

fn duration_of_phase(c: &Comparison, rule: &Rule, phase: &str, stat: Stat) -> Result<Found, GateError> {
    let mut values = [0.0; 2];
    for (i, (label, side, merged)) in sides(c).into_iter().enumerate() {
        let v = merged.measurements.phase(phase).and_then(|h| stat.of(h));
        values[i] = v.ok_or_else(|| {
            let phases: Vec<&str> = merged
                .measurements
                .phases
                .iter()
                .filter(|(_, h)| !h.is_empty())
                .map(|(k, _)| k.as_str())
                .collect();
            missing(
                rule,
                format!(
                    "side {label} ({}) has no {phase} samples; its phases: {}",
                    clip(&side.label, 40),
                    if phases.is_empty() {
                        "none".to_string()
                    } else {
                        phases.join(", ")
                    }
                ),
            )
        })?;
    }
    let figure = format!("{phase} {}", stat.name());
    // The comparison's own test when it has one (headline p50 and p99).
    let test = match c.tests.iter().find(|t| t.name == figure) {
        Some(t) => t.clone(),
        None => {
            let per = |side: &Side| -> Vec<f64> {
                side.runs
                    .iter()
                    .flat_map(|r| match c.basis {
                        Basis::Runs => r
                            .measurements
                            .phase(phase)
                            .and_then(|h| stat.of(h))
                            .into_iter()
                            .collect(),
                        Basis::Seconds => compare::full_seconds(r)
                            .filter_map(|p| p.phase(phase).ok())
                            .filter_map(|h| stat.of(&h))
                            .collect::<Vec<_>>(),
                    })
                    .collect()
            };
            c.test_values(&figure, Unit::Micros, per(&c.a), per(&c.b))
        }
    };
    Ok(Found {
        test: bootstrap(&test, values[1] - values[0]),
        figure,
        unit: Unit::Micros,
        a: values[0],
        b: values[1],
    })
}

fn duration_of_tag(c: &Comparison, rule: &Rule, key: &str, stat: Stat) -> Result<Found, GateError> {
    let [ta, tb] = tags_of(c, rule, key)?;
    let mut values = [0.0; 2];
    for (i, ((label, side, _), t)) in sides(c).into_iter().zip([ta, tb]).enumerate() {
        values[i] = stat.of(&t.response).ok_or_else(|| {
            missing(
                rule,
                format!(
                    "side {label} ({}) has no response samples{}",
                    clip(&side.label, 40),
                    if key.is_empty() {
                        String::new()
                    } else {
                        format!(" for {key}")
                    }
                ),
            )
        })?;
    }
    let per = |side: &Side| -> Vec<f64> {
        side.runs
            .iter()
            .flat_map(|r| match c.basis {
                Basis::Runs => tag(r, key)
                    .and_then(|t| stat.of(&t.response))
                    .into_iter()
                    .collect::<Vec<_>>(),
                Basis::Seconds => {
                    let limit = compare::full_second_limit(r);
                    tag(r, key)
                        .map(|t| {
                            t.series
                                .iter()
                                .filter(|s| s.second < limit)
                                .filter_map(|s| s.response.decode().ok())
                                .filter_map(|h| stat.of(&h))
                                .collect()
                        })
                        .unwrap_or_default()
                }
            })
            .collect()
    };
    let figure = if key.is_empty() {
        format!("response {}", stat.name())
    } else {
        format!("response{{{key}}} {}", stat.name())
    };
    let test = c.test_values(&figure, Unit::Micros, per(&c.a), per(&c.b));
    Ok(Found {
        test: bootstrap(&test, values[1] - values[0]),
        figure,
        unit: Unit::Micros,
        a: values[0],
        b: values[1],
    })
}

/// A bootstrap test as a rule's significance; `diff` is the figure's own
/// change (0: take the test's).
fn bootstrap(t: &Test, diff: f64) -> Significance {
    let diff = if diff == 0.0 { t.diff } else { diff };
    Significance {
        method: "bootstrap_mann_whitney",
        basis: Some(t.basis),
        p_value: t.mann_whitney.map(|m| m.p_value),
        interval: t.interval.map(|i| [i.low, i.high]),
        verdict: t.verdict,
        same_direction: t.diff.signum() == diff.signum() && t.diff != 0.0,
    }
}
