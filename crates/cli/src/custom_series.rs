//! A scenario file's custom metrics as labelled series, one set of names
//! for `/metrics` (prometheus.rs) and the pushes (push/batch.rs).

use throng_metrics::ScenarioStats;

/// One series of a custom metric.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomSeries {
    /// The full name (`throng_custom_total`).
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
    /// A counter (only grows, unless a file adds negative values), not a
    /// gauge.
    pub counter: bool,
}

impl CustomSeries {
    fn new(name: &'static str, labels: Vec<(&'static str, String)>, value: f64, counter: bool) -> Self {
        CustomSeries {
            name,
            labels,
            value,
            counter,
        }
    }
}

/// The quantiles a custom trend is shown at.
const TREND_QUANTILES: [(&str, f64); 5] = [("0.5", 0.5), ("0.9", 0.9), ("0.95", 0.95), ("0.99", 0.99), ("1", 1.0)];

/// A scenario file's custom metrics, each under the `metric` label (and
/// `tags`, the filter of a tagged row: `shop:books`), one name per kind:
///
/// ```text
///  counter ─► throng_custom_total{metric}                    the sum
///  rate    ─► throng_custom_rate_total{metric,result}       true / false additions
///  gauge   ─► throng_custom_gauge{metric,stat}               last, min, max
///  trend   ─► throng_custom_trend{metric,quantile}           0.5 … 1 (the max)
///             throng_custom_trend_values_total{metric}       values added
/// ```
///
/// Series of one name come together, as the encoders want them.
pub fn custom(s: &ScenarioStats) -> Vec<CustomSeries> {
    use throng_metrics::CustomKind;
    let mut out = Vec::new();
    let labels = |key: &str, extra: Option<(&'static str, String)>| {
        let (metric, tags) = match key.split_once('{') {
            Some((m, rest)) => (m, rest.strip_suffix('}').unwrap_or(rest)),
            None => (key, ""),
        };
        let mut l = vec![("metric", metric.to_string())];
        if !tags.is_empty() {
            l.push(("tags", tags.to_string()));
        }
        l.extend(extra);
        l
    };
    let of = |kind| s.custom.iter().filter(move |(_, c)| c.kind == kind);
    for (key, c) in of(CustomKind::Counter) {
        out.push(CustomSeries::new("throng_custom_total", labels(key, None), c.sum, true));
    }
    for (key, c) in of(CustomKind::Rate) {
        for (result, n) in [("true", c.hits), ("false", c.count.saturating_sub(c.hits))] {
            let labels = labels(key, Some(("result", result.into())));
            out.push(CustomSeries::new("throng_custom_rate_total", labels, n as f64, true));
        }
    }
    for (key, c) in of(CustomKind::Gauge) {
        for (stat, v) in [("last", c.last), ("min", c.min), ("max", c.max)] {
            if let Some(value) = v {
                let labels = labels(key, Some(("stat", stat.into())));
                out.push(CustomSeries::new("throng_custom_gauge", labels, value, false));
            }
        }
    }
    for (key, c) in of(CustomKind::Trend).filter(|(_, c)| !c.values.is_empty()) {
        for (q, at) in TREND_QUANTILES {
            let labels = labels(key, Some(("quantile", q.into())));
            let value = c.values.quantile(at) as f64;
            out.push(CustomSeries::new("throng_custom_trend", labels, value, false));
        }
    }
    for (key, c) in of(CustomKind::Trend) {
        let n = c.values.count() as f64;
        out.push(CustomSeries::new(
            "throng_custom_trend_values_total",
            labels(key, None),
            n,
            true,
        ));
    }
    out
}
