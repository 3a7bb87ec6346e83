//! A latency histogram: HdrHistogram, microseconds, three significant digits.
//!
//! Serialized as HdrHistogram's V2 compressed ("deflate") encoding in base64 —
//! the same bytes the HdrHistogram interval-log format carries — so a result
//! file's histograms can be decoded by any HdrHistogram implementation and
//! merged exactly by adding counts.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// Significant digits kept by every histogram: values are exact to 0.1%.
const SIGFIG: u8 = 3;

/// Why a serialized histogram could not be read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistError {
    /// The text is not base64.
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The bytes are not an HdrHistogram V2 encoding.
    #[error("histogram is not a valid HdrHistogram V2 encoding: {0}")]
    Decode(String),
    /// Two histograms could not be added.
    #[error("histograms cannot be added: {0}")]
    Add(String),
}

/// A histogram of durations in microseconds.
#[derive(Clone, Debug)]
pub struct Hist(Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Hist {
    fn eq(&self, other: &Self) -> bool {
        // Equal when every recorded value has the same count; the internal
        // array sizes (auto-resize) do not matter.
        self.0.len() == other.0.len()
            && self.0.max() == other.0.max()
            && self.0.iter_recorded().zip(other.0.iter_recorded()).all(|(a, b)| {
                a.value_iterated_to() == b.value_iterated_to() && a.count_at_value() == b.count_at_value()
            })
            && self.0.iter_recorded().count() == other.0.iter_recorded().count()
    }
}

impl Hist {
    /// An empty, auto-resizing histogram.
    pub fn new() -> Self {
        // Invariant: SIGFIG is within HdrHistogram's accepted 0..=5.
        #[allow(clippy::unwrap_used)]
        Hist(Histogram::new(SIGFIG).unwrap())
    }

    /// Records one duration (truncated to whole microseconds).
    #[inline]
    pub fn record(&mut self, d: Duration) {
        self.record_us(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    /// Records one value in microseconds.
    #[inline]
    pub fn record_us(&mut self, us: u64) {
        // `record` grows the histogram as needed (saturating_record would
        // clamp to the current top instead). It fails only for values past
        // what any histogram can hold; those are clamped.
        if self.0.record(us).is_err() {
            self.0.saturating_record(us);
        }
    }

    /// Records `n` samples of one value in microseconds.
    pub fn record_n_us(&mut self, us: u64, n: u64) {
        if n > 0 && self.0.record_n(us, n).is_err() {
            self.0.saturating_record_n(us, n);
        }
    }

    /// Adds every sample of `other` to this histogram.
    pub fn add(&mut self, other: &Hist) -> Result<(), HistError> {
        self.0.add(&other.0).map_err(|e| HistError::Add(format!("{e:?}")))
    }

    /// Forgets every sample, keeping the allocation.
    pub fn reset(&mut self) {
        self.0.reset();
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Smallest sample in µs (0 when empty).
    pub fn min(&self) -> u64 {
        if self.is_empty() { 0 } else { self.0.min() }
    }

    /// Largest sample in µs (0 when empty).
    pub fn max(&self) -> u64 {
        self.0.max()
    }

    /// Mean in µs (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.is_empty() { 0.0 } else { self.0.mean() }
    }

    /// Population standard deviation in µs (0 when empty).
    pub fn stddev(&self) -> f64 {
        if self.is_empty() { 0.0 } else { self.0.stdev() }
    }

    /// The value at quantile `q` (0.0..=1.0) in µs, HdrHistogram's
    /// definition: the smallest recorded value ≥ that fraction of samples.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.0.value_at_quantile(q.clamp(0.0, 1.0))
        }
    }

    /// The underlying HdrHistogram, for iteration (spectra, logs).
    pub fn inner(&self) -> &Histogram<u64> {
        &self.0
    }

    /// Summary figures in µs.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count(),
            min: self.min(),
            max: self.max(),
            mean: self.mean(),
            stddev: self.stddev(),
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
        }
    }

    /// HdrHistogram V2 deflate encoding, base64.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::new();
        // Serializing into a Vec cannot fail for I/O reasons; the only other
        // failure is a histogram too large to encode (> 2^31 counts slots),
        // which auto-resized latency histograms never reach.
        match V2DeflateSerializer::new().serialize(&self.0, &mut bytes) {
            Ok(_) => B64.encode(bytes),
            Err(_) => String::new(),
        }
    }

    /// Reads back what [`Hist::encode`] wrote (or any HdrHistogram V2
    /// encoding, compressed or not). The empty string is an empty histogram.
    pub fn decode(text: &str) -> Result<Hist, HistError> {
        if text.is_empty() {
            return Ok(Hist::new());
        }
        let bytes = B64.decode(text)?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| HistError::Decode(format!("{e:?}")))?;
        h.auto(true);
        Ok(Hist(h))
    }
}

/// The figures a report shows for one histogram, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Largest sample.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
}

/// On disk a histogram is its summary (for people and `jq`) plus the exact
/// encoding (for merging and re-reporting). Only `hdr` is read back.
#[derive(Serialize, Deserialize)]
struct HistDoc {
    #[serde(flatten)]
    summary: Summary,
    hdr: String,
}

impl Serialize for Hist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        HistDoc {
            summary: self.summary(),
            hdr: self.encode(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Hist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct OnlyHdr {
            hdr: String,
        }
        let doc = OnlyHdr::deserialize(d)?;
        Hist::decode(&doc.hdr).map_err(serde::de::Error::custom)
    }
}

/// A histogram kept in its encoded form (base64 HdrHistogram V2 deflate):
/// a few hundred bytes instead of tens of KB, for per-second series.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EncodedHist(String);

impl EncodedHist {
    /// Encodes `h`.
    pub fn new(h: &Hist) -> Self {
        EncodedHist(h.encode())
    }

    /// Decodes back into a histogram.
    pub fn decode(&self) -> Result<Hist, HistError> {
        Hist::decode(&self.0)
    }

    /// The base64 text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_histogram_reports_zeros_and_round_trips() {
        let h = Hist::new();
        assert_eq!(h.summary(), Summary::default());
        let back = Hist::decode(&h.encode()).unwrap();
        assert!(back.is_empty());
        assert_eq!(back, h);
    }

    #[test]
    fn large_values_grow_the_histogram_instead_of_clamping() {
        let mut h = Hist::new();
        h.record_us(2);
        h.record_us(3_000_000);
        assert_eq!(h.max(), h.inner().highest_equivalent(3_000_000));
        assert!(h.max() >= 3_000_000);
    }

    #[test]
    fn quantiles_follow_hdr_definition() {
        let mut h = Hist::new();
        for v in 1..=1000 {
            h.record_us(v);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.min(), 1);
        assert_eq!(h.max(), 1000);
        assert_eq!(h.quantile(0.5), 500);
        assert_eq!(h.quantile(0.99), 990);
        assert!((h.mean() - 500.5).abs() < 0.5);
    }

    #[test]
    fn json_round_trip_keeps_every_count() {
        let mut h = Hist::new();
        for v in [3, 30, 300, 3_000, 30_000, 3_000_000] {
            h.record_us(v);
        }
        let text = serde_json::to_string(&h).unwrap();
        assert!(text.contains("\"p99\""));
        let back: Hist = serde_json::from_str(&text).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn decode_rejects_garbage_with_a_reason() {
        assert!(matches!(Hist::decode("!!"), Err(HistError::Base64(_))));
        assert!(matches!(Hist::decode("AAAA"), Err(HistError::Decode(_))));
    }

    proptest! {
        /// Merging is addition: the merge of two histograms equals one
        /// histogram that recorded both sets of values.
        #[test]
        fn merge_equals_recording_both(a in prop::collection::vec(0u64..10_000_000, 0..200),
                                        b in prop::collection::vec(0u64..10_000_000, 0..200)) {
            let mut ha = Hist::new();
            let mut hb = Hist::new();
            let mut both = Hist::new();
            for &v in &a { ha.record_us(v); both.record_us(v); }
            for &v in &b { hb.record_us(v); both.record_us(v); }
            let mut ha = Hist::decode(&ha.encode()).unwrap();
            ha.add(&Hist::decode(&hb.encode()).unwrap()).unwrap();
            prop_assert_eq!(&ha, &both);
            prop_assert_eq!(ha.quantile(0.99), both.quantile(0.99));
        }
    }
}
