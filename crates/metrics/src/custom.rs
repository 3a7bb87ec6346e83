//! Custom metrics: what a scenario file declares under `metrics:` and its
//! `add:` steps record — counters, trends, rates and gauges — kept per
//! worker and merged exactly, as the built-in figures are.

use serde::{Deserialize, Serialize};

use crate::hist::{Hist, HistError};
use crate::outcome::add;

/// What a custom metric keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CustomKind {
    /// A sum of the values added.
    Counter,
    /// Every value, in an HDR histogram (whole numbers, 3 significant
    /// digits, as the built-in latencies).
    Trend,
    /// The share of additions whose value was true (non-zero).
    Rate,
    /// The last value added, and the smallest and largest.
    Gauge,
}

impl CustomKind {
    /// As written in the file.
    pub fn name(self) -> &'static str {
        match self {
            CustomKind::Counter => "counter",
            CustomKind::Trend => "trend",
            CustomKind::Rate => "rate",
            CustomKind::Gauge => "gauge",
        }
    }
}

/// One custom metric's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CustomStats {
    /// Its kind.
    pub kind: CustomKind,
    /// Values added.
    pub count: u64,
    /// Counter: their sum.
    #[serde(default)]
    pub sum: f64,
    /// Rate: how many were true.
    #[serde(default)]
    pub hits: u64,
    /// Gauge: the last value (of the last part, once merged), the smallest
    /// and the largest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<f64>,
    /// Gauge: the smallest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Gauge: the largest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Trend: the values.
    #[serde(default)]
    pub values: Hist,
    /// Additions whose value was not a number (a template that rendered
    /// text), or a negative value for a trend: counted here, not recorded.
    #[serde(default)]
    pub invalid: u64,
}

impl CustomStats {
    /// No value yet.
    pub fn new(kind: CustomKind) -> Self {
        CustomStats {
            kind,
            count: 0,
            sum: 0.0,
            hits: 0,
            last: None,
            min: None,
            max: None,
            values: Hist::new(),
            invalid: 0,
        }
    }

    /// Adds one value (`None`: it was not a number).
    pub fn record(&mut self, value: Option<f64>) {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            self.invalid += 1;
            return;
        };
        match self.kind {
            CustomKind::Counter => self.sum += v,
            CustomKind::Rate => self.hits += u64::from(v != 0.0),
            CustomKind::Gauge => {
                self.last = Some(v);
                self.min = Some(self.min.map_or(v, |m| m.min(v)));
                self.max = Some(self.max.map_or(v, |m| m.max(v)));
            }
            CustomKind::Trend if v < 0.0 => {
                self.invalid += 1;
                return;
            }
            // Rounded: the histogram holds whole numbers.
            CustomKind::Trend => self.values.record_us(v.round() as u64),
        }
        self.count += 1;
    }

    /// Adds `o` (another worker's or process's) into these: counts and
    /// sums add, histograms add, a gauge takes `o`'s last value.
    pub fn merge(&mut self, o: &CustomStats) -> Result<(), HistError> {
        add(&mut self.count, o.count, "custom.count")?;
        add(&mut self.hits, o.hits, "custom.hits")?;
        add(&mut self.invalid, o.invalid, "custom.invalid")?;
        self.sum += o.sum;
        self.values.add(&o.values)?;
        if o.last.is_some() {
            self.last = o.last;
        }
        self.min = match (self.min, o.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = match (self.max, o.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_keeps_its_figures_and_merges_exactly() {
        let mut c = CustomStats::new(CustomKind::Counter);
        for v in [1.0, 2.5, 3.0] {
            c.record(Some(v));
        }
        c.record(None);
        assert_eq!((c.count, c.sum, c.invalid), (3, 6.5, 1));
        let mut t = CustomStats::new(CustomKind::Trend);
        for v in 1..=100 {
            t.record(Some(f64::from(v)));
        }
        t.record(Some(-1.0));
        assert_eq!((t.count, t.invalid, t.values.quantile(0.95)), (100, 1, 95));
        let mut r = CustomStats::new(CustomKind::Rate);
        for v in [1.0, 0.0, 1.0, 1.0] {
            r.record(Some(v));
        }
        assert_eq!((r.hits, r.count), (3, 4));
        let mut g = CustomStats::new(CustomKind::Gauge);
        for v in [5.0, -2.0, 7.0, 3.0] {
            g.record(Some(v));
        }
        assert_eq!((g.last, g.min, g.max), (Some(3.0), Some(-2.0), Some(7.0)));
        let mut g2 = CustomStats::new(CustomKind::Gauge);
        g2.record(Some(9.0));
        g.merge(&g2).unwrap();
        assert_eq!((g.last, g.min, g.max, g.count), (Some(9.0), Some(-2.0), Some(9.0), 5));
        let whole = t.clone();
        t.merge(&whole).unwrap();
        assert_eq!((t.count, t.values.count(), t.values.quantile(0.5)), (200, 200, 50));
    }
}
