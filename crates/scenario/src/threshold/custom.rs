//! Thresholds on a file's custom metrics (`metrics:`): `orders: count > 10`,
//! `basket: p(95) < 200`, `paid: rate > 0.9`, `queue: value < 5`. The bound
//! is a plain number in the metric's own unit; a tag filter names a tag of
//! its `add:` steps (`orders{shop:books}: count > 3`); no window.

use throng_metrics::{CustomKind, ScenarioStats};

use super::error::ThresholdFault;
use super::{Agg, OR_NO_SAMPLES, Op, Threshold};

/// The aggregations each kind answers, as written.
fn allowed(kind: CustomKind) -> &'static str {
    match kind {
        CustomKind::Counter => "count (the sum of its values)",
        CustomKind::Trend => "p(N), avg, med, min, max or count",
        CustomKind::Rate => "rate (the share of true values)",
        CustomKind::Gauge => "value (the last), min or max",
    }
}

impl Threshold {
    /// Parses `expr` on the custom metric `key` of `kind`.
    pub fn parse_custom(
        key: &str,
        expr: &str,
        kind: CustomKind,
        abort_on_fail: bool,
        delay: std::time::Duration,
    ) -> Result<Threshold, ThresholdFault> {
        let bad = |reason: String| ThresholdFault::Custom {
            threshold: format!("{key}: {expr}"),
            reason,
        };
        let (name, tag) = match key.trim().split_once('{') {
            None => (key.trim(), None),
            Some((m, rest)) => {
                let Some((k, v)) = rest.strip_suffix('}').and_then(|r| r.split_once(':')) else {
                    return Err(bad("a tag filter is written metric{tag:value}".to_string()));
                };
                (m.trim(), Some((k.trim().to_string(), v.trim().to_string())))
            }
        };
        let e = expr.trim();
        let (judged, pass_without_samples) = match e.strip_suffix(OR_NO_SAMPLES) {
            Some(rest) if rest.ends_with(char::is_whitespace) => (rest.trim_end(), true),
            _ => (e, false),
        };
        if judged.contains(" over ") {
            return Err(bad(format!(
                "a custom metric is judged on the whole run, not over windows; remove 'over ...' from {judged}"
            )));
        }
        let at = judged
            .find(['<', '>', '=', '!'])
            .ok_or_else(|| bad("no comparison: write e.g. count > 10".to_string()))?;
        let (lhs, rest) = judged.split_at(at);
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
        .ok_or_else(|| bad("the comparison is one of <, <=, >, >=, ==, !=".to_string()))?;
        let lhs = lhs.trim();
        let agg = match lhs {
            "avg" => Agg::Avg,
            "med" => Agg::Med,
            "min" => Agg::Min,
            "max" => Agg::Max,
            "rate" => Agg::Rate,
            "count" => Agg::Count,
            "value" => Agg::Value,
            p => match p.strip_prefix("p(").and_then(|r| r.strip_suffix(')')) {
                Some(n) => match n.trim().parse::<f64>() {
                    Ok(n) if (0.0..=100.0).contains(&n) => Agg::P(n),
                    _ => return Err(bad(format!("'{p}': a percentile is p(N) with N from 0 to 100"))),
                },
                None => {
                    return Err(bad(format!(
                        "'{p}' is not an aggregation; {key} takes {}",
                        allowed(kind)
                    )));
                }
            },
        };
        let fits = match kind {
            CustomKind::Counter => agg == Agg::Count,
            CustomKind::Trend => matches!(agg, Agg::P(_) | Agg::Avg | Agg::Med | Agg::Min | Agg::Max | Agg::Count),
            CustomKind::Rate => agg == Agg::Rate,
            CustomKind::Gauge => matches!(agg, Agg::Value | Agg::Min | Agg::Max),
        };
        if !fits {
            return Err(bad(format!(
                "{key} is a {}: it takes {}, not {lhs}",
                kind.name(),
                allowed(kind)
            )));
        }
        let value = match rhs.strip_suffix('%') {
            Some(pct) if agg == Agg::Rate => pct.trim().parse::<f64>().map(|v| v / 100.0),
            _ => rhs.parse::<f64>(),
        }
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| {
            bad(format!(
                "'{rhs}' is not a number; a custom metric's bound is a plain number in its own unit"
            ))
        })?;
        Ok(Threshold {
            text: format!("{key}: {e}"),
            metric: name.to_string(),
            tag,
            agg,
            op,
            value,
            window_s: None,
            abort_on_fail,
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            pass_without_samples,
            custom: Some(kind),
        })
    }

    /// The custom metric's figure this threshold judges; None when nothing
    /// was added to it.
    pub(super) fn custom_total(&self, s: &ScenarioStats) -> Option<f64> {
        let key = match &self.tag {
            Some((k, v)) => format!("{}{{{k}:{v}}}", self.metric),
            None => self.metric.clone(),
        };
        let c = s.custom.get(&key).filter(|c| c.count > 0)?;
        Some(match self.agg {
            Agg::Count if c.kind == throng_metrics::CustomKind::Counter => c.sum,
            Agg::Count => c.count as f64,
            Agg::Rate => c.hits as f64 / c.count as f64,
            Agg::Value => c.last?,
            Agg::Min if c.kind == throng_metrics::CustomKind::Gauge => c.min?,
            Agg::Max if c.kind == throng_metrics::CustomKind::Gauge => c.max?,
            _ => self.reduce(&c.values)?,
        })
    }
}
