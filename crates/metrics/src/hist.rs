//! A latency histogram: HdrHistogram, microseconds, three significant digits.
//!
//! Serialized as HdrHistogram's V2 compressed ("deflate") encoding in base64 —
//! the same bytes the HdrHistogram interval-log format carries — so a result
//! file's histograms can be decoded by any HdrHistogram implementation and
//! merged exactly by adding counts.

use std::io::Read;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// Significant digits kept by every histogram: values are exact to 0.1%.
const SIGFIG: u8 = 3;

/// The most base64 text one serialized histogram may have (2 MiB). A
/// latency histogram throng writes is a few hundred bytes.
pub const MAX_ENCODED_CHARS: usize = 2 << 20;

/// The most bytes a histogram's compressed payload may inflate to (1 MiB):
/// inflating stops there, so a zlib bomb costs no more than this.
pub const MAX_DECODED_BYTES: usize = 1 << 20;

/// The most significant digits a histogram read back may have (throng
/// writes 3; HdrHistogram allows up to 5, which costs 100 times the memory).
pub const MAX_SIGFIG: u8 = SIGFIG;

/// The highest value (µs) a histogram read back may declare it tracks,
/// and the largest value recorded: 2^47 - 1 µs, about 4.5 years (the top
/// of HdrHistogram's bucket above 2^46, which an auto-resized histogram
/// declares once it holds a value past 2^46). Together with [`MAX_SIGFIG`]
/// this bounds one decoded histogram to about 320 KB.
pub const MAX_TRACKABLE_US: u64 = (1 << 47) - 1;

/// The V2 encoding's cookies (HdrHistogram's serialization format).
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Bytes of the V2 header before the counts.
const V2_HEADER: usize = 40;

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
    /// The encoding is well formed but past a limit (size, bounds,
    /// significant digits): reading it would take more memory than any
    /// histogram throng writes.
    #[error("histogram {0}")]
    Limit(String),
    /// Adding counts would pass 2^64.
    #[error("adding {0} passes 2^64 (18446744073709551615); the inputs' counts are not real")]
    Overflow(String),
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

    /// Records one value in microseconds (clamped to [`MAX_TRACKABLE_US`],
    /// about 4.5 years, so that every histogram throng writes reads back).
    #[inline]
    pub fn record_us(&mut self, us: u64) {
        let us = us.min(MAX_TRACKABLE_US);
        // `record` grows the histogram as needed (saturating_record would
        // clamp to the current top instead). It fails only for values past
        // what any histogram can hold; those are clamped.
        if self.0.record(us).is_err() {
            self.0.saturating_record(us);
        }
    }

    /// Records `n` samples of one value in microseconds (clamped as in
    /// [`Hist::record_us`]).
    pub fn record_n_us(&mut self, us: u64, n: u64) {
        let us = us.min(MAX_TRACKABLE_US);
        if n > 0 && self.0.record_n(us, n).is_err() {
            self.0.saturating_record_n(us, n);
        }
    }

    /// Adds every sample of `other` to this histogram.
    pub fn add(&mut self, other: &Hist) -> Result<(), HistError> {
        // Every bucket's count is at most the total, so a total that fits
        // means every bucket's sum fits.
        if self.count().checked_add(other.count()).is_none() {
            return Err(HistError::Overflow("histogram counts".to_string()));
        }
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

    /// True when no sample lies below `us` as far as the histogram can tell
    /// (to 0.1%): the smallest sample's bucket reaches `us`. [`Hist::min`] is
    /// the bottom of that bucket, up to 0.1% below the sample, so
    /// `min() >= us` fails for a sample just above `us`.
    pub fn none_below(&self, us: u64) -> bool {
        self.is_empty() || self.0.highest_equivalent(self.0.min()) >= us
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
    /// encoding, compressed or not, within the limits above). The empty
    /// string is an empty histogram.
    ///
    /// The memory it takes is bounded whatever the text says: the text's
    /// length, the inflated size (checked while inflating), the declared
    /// bounds and significant digits, and the counts (which must fit the
    /// bounds and add up to less than 2^64) are checked before
    /// HdrHistogram allocates anything.
    pub fn decode(text: &str) -> Result<Hist, HistError> {
        if text.is_empty() {
            return Ok(Hist::new());
        }
        let raw = raw_v2(text)?;
        let shape = Shape::of_raw(&raw)?;
        shape.check_counts(&raw)?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut raw.as_slice())
            .map_err(|e| HistError::Decode(format!("{e:?}")))?;
        h.auto(true);
        Ok(Hist(h))
    }

    /// Checks a serialized histogram as [`Hist::decode`] does — every
    /// limit, every count — without building it: the memory taken is the
    /// inflated bytes (at most [`MAX_DECODED_BYTES`]). Returns the bounds it
    /// declares, and so the memory decoding it would take. The empty string
    /// is an empty histogram.
    pub fn inspect(text: &str) -> Result<Shape, HistError> {
        if text.is_empty() {
            return Ok(Shape::of(1, 2, SIGFIG));
        }
        let raw = raw_v2(text)?;
        let shape = Shape::of_raw(&raw)?;
        shape.check_counts(&raw)?;
        Ok(shape)
    }
}

/// What a serialized histogram declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Lowest discernible value.
    pub low: u64,
    /// Highest trackable value.
    pub high: u64,
    /// Significant digits.
    pub sigfig: u8,
    /// Slots in the counts array HdrHistogram allocates for these bounds.
    pub slots: usize,
}

impl Shape {
    /// HdrHistogram's counts-array length for these bounds (its own
    /// arithmetic, so that the memory is known before it allocates).
    fn of(low: u64, high: u64, sigfig: u8) -> Shape {
        let largest_single_unit = 2 * 10u64.pow(u32::from(sigfig));
        let sub_bucket_count_magnitude = (largest_single_unit as f64).log2().ceil() as u32;
        let sub_bucket_count = 1u64 << sub_bucket_count_magnitude.max(1);
        let unit_magnitude = 63 - low.max(1).leading_zeros();
        let mut smallest_untrackable = sub_bucket_count.checked_shl(unit_magnitude).unwrap_or(u64::MAX);
        let mut buckets = 1u64;
        while smallest_untrackable <= high {
            if smallest_untrackable > u64::MAX / 2 {
                buckets += 1;
                break;
            }
            smallest_untrackable <<= 1;
            buckets += 1;
        }
        let slots = (buckets + 1) * (sub_bucket_count / 2);
        Shape {
            low,
            high,
            sigfig,
            slots: usize::try_from(slots).unwrap_or(usize::MAX),
        }
    }

    /// Bytes the decoded histogram's counts take.
    pub fn memory_bytes(&self) -> usize {
        self.slots.saturating_mul(std::mem::size_of::<u64>())
    }

    /// Reads and checks the uncompressed V2 header.
    fn of_raw(raw: &[u8]) -> Result<Shape, HistError> {
        let Some(header) = raw.get(..V2_HEADER) else {
            return Err(HistError::Decode(format!(
                "the encoding ends after {} bytes, inside its {V2_HEADER}-byte header",
                raw.len()
            )));
        };
        let u32_at = |i: usize| u32::from_be_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&header[i..i + 8]);
            u64::from_be_bytes(b)
        };
        if u32_at(0) != V2_COOKIE {
            return Err(HistError::Decode(format!("unknown cookie {:#010x}", u32_at(0))));
        }
        let sigfig = u32_at(12);
        let (low, high) = (u64_at(16), u64_at(24));
        if sigfig > u32::from(MAX_SIGFIG) {
            return Err(HistError::Limit(format!(
                "has {sigfig} significant digits; at most {MAX_SIGFIG} are read back"
            )));
        }
        if high > MAX_TRACKABLE_US {
            return Err(HistError::Limit(format!(
                "declares a highest value of {high} µs; at most {MAX_TRACKABLE_US} µs (2^47 - 1, about 4.5 years) is read back"
            )));
        }
        if low < 1 || low > high / 2 {
            return Err(HistError::Decode(format!(
                "bounds {low}..{high} are not valid (lowest ≥ 1, highest ≥ 2 × lowest)"
            )));
        }
        // Invariant: sigfig ≤ MAX_SIGFIG (3) was checked above.
        Ok(Shape::of(low, high, sigfig as u8))
    }

    /// Walks the counts (zig-zag LEB128 varints, negative = a run of empty
    /// slots) and checks they fit the slots and add up to less than 2^64.
    fn check_counts(&self, raw: &[u8]) -> Result<(), HistError> {
        let payload_len = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]) as usize;
        let Some(mut payload) = raw.get(V2_HEADER..V2_HEADER.saturating_add(payload_len)) else {
            return Err(HistError::Decode(format!(
                "its header says {payload_len} bytes of counts follow; {} do",
                raw.len() - V2_HEADER
            )));
        };
        let mut slot = 0u128;
        let mut total = 0u64;
        while !payload.is_empty() {
            let (n, used) = varint(payload)?;
            payload = &payload[used..];
            let v = ((n >> 1) as i64) ^ -((n & 1) as i64);
            if v == i64::MIN {
                return Err(HistError::Decode("holds a run of empty slots past 2^63".to_string()));
            } else if v < 0 {
                slot += u128::from(v.unsigned_abs());
            } else {
                if v > 0 && slot >= self.slots as u128 {
                    return Err(HistError::Decode(format!(
                        "holds counts past the {} slots its bounds give",
                        self.slots
                    )));
                }
                total = total
                    .checked_add(v as u64)
                    .ok_or_else(|| HistError::Overflow("a histogram's counts".to_string()))?;
                slot += 1;
            }
        }
        Ok(())
    }
}

/// One LEB128-64b9B varint (HdrHistogram's: the ninth byte counts whole).
fn varint(b: &[u8]) -> Result<(u64, usize), HistError> {
    let mut value = 0u64;
    for i in 0..9 {
        let Some(&byte) = b.get(i) else {
            return Err(HistError::Decode("the counts end inside a number".to_string()));
        };
        if i == 8 {
            return Ok((value | (u64::from(byte) << 56), 9));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Ok((value, 9))
}

/// The encoding's cookie and bytes, after the length check and base64.
fn cookie_of(text: &str) -> Result<(u32, Vec<u8>), HistError> {
    if text.len() > MAX_ENCODED_CHARS {
        return Err(HistError::Limit(format!(
            "is {} characters of base64; at most {MAX_ENCODED_CHARS} are read back",
            text.len()
        )));
    }
    let bytes = B64.decode(text)?;
    let Some(cookie) = bytes.get(..4) else {
        return Err(HistError::Decode(format!("{} bytes is too short", bytes.len())));
    };
    let cookie = u32::from_be_bytes([cookie[0], cookie[1], cookie[2], cookie[3]]);
    match cookie {
        V2_COOKIE | V2_COMPRESSED_COOKIE => Ok((cookie, bytes)),
        other => Err(HistError::Decode(format!("unknown cookie {other:#010x}"))),
    }
}

/// A reader inflating the compressed payload of `bytes` (cookie, length,
/// zlib stream).
fn zlib(bytes: &[u8]) -> Result<flate2::read::ZlibDecoder<&[u8]>, HistError> {
    let len = bytes
        .get(4..8)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| HistError::Decode("the encoding ends inside its header".to_string()))?;
    let rest = &bytes[8..];
    let Some(stream) = rest.get(..len) else {
        return Err(HistError::Decode(format!(
            "its header says {len} compressed bytes follow; {} do",
            rest.len()
        )));
    };
    Ok(flate2::read::ZlibDecoder::new(stream))
}

/// The uncompressed V2 bytes of `text`, inflating at most
/// [`MAX_DECODED_BYTES`] (the cap applies while inflating).
fn raw_v2(text: &str) -> Result<Vec<u8>, HistError> {
    let (cookie, bytes) = cookie_of(text)?;
    if cookie == V2_COOKIE {
        return Ok(bytes);
    }
    let mut raw = Vec::new();
    zlib(&bytes)?
        .take(MAX_DECODED_BYTES as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| HistError::Decode(format!("it does not inflate: {e}")))?;
    if raw.len() > MAX_DECODED_BYTES {
        return Err(HistError::Limit(format!(
            "inflates past {MAX_DECODED_BYTES} bytes (a histogram throng writes inflates to a few KB)"
        )));
    }
    Ok(raw)
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

/// On disk a histogram is its summary (for people and `jq`), each figure
/// named with its unit, plus the exact encoding (for merging and
/// re-reporting). Only `hdr` is read back: documents that named the figures
/// bare (`p99`, result schema v1) read the same.
#[derive(Serialize)]
struct HistDoc {
    count: u64,
    min_us: u64,
    max_us: u64,
    mean_us: f64,
    stddev_us: f64,
    p50_us: u64,
    p90_us: u64,
    p95_us: u64,
    p99_us: u64,
    p999_us: u64,
    hdr: String,
}

impl Serialize for Hist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.summary();
        HistDoc {
            count: m.count,
            min_us: m.min,
            max_us: m.max,
            mean_us: m.mean,
            stddev_us: m.stddev,
            p50_us: m.p50,
            p90_us: m.p90,
            p95_us: m.p95,
            p99_us: m.p99,
            p999_us: m.p999,
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
    fn none_below_reads_the_smallest_samples_bucket_not_its_bottom() {
        let mut h = Hist::new();
        assert!(h.none_below(u64::MAX), "empty");
        h.record_us(1_000_100);
        assert!(h.min() < 1_000_000, "min is the bucket's bottom: {}", h.min());
        assert!(h.none_below(1_000_000));
        h.record_us(990_000);
        assert!(!h.none_below(1_000_000));
        assert!(h.none_below(990_000));
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
        assert!(text.contains("\"p99_us\"") && !text.contains("\"p99\""), "{text}");
        let back: Hist = serde_json::from_str(&text).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn decode_rejects_garbage_with_a_reason() {
        assert!(matches!(Hist::decode("!!"), Err(HistError::Base64(_))));
        assert!(matches!(Hist::decode("AAAA"), Err(HistError::Decode(_))));
    }

    /// `h`'s V2 deflate encoding, base64 (whatever its bounds).
    fn encoded(h: &Histogram<u64>) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut bytes).unwrap();
        B64.encode(bytes)
    }

    /// A V2 compressed encoding whose payload is `raw`, compressed.
    fn compressed(raw: &[u8]) -> String {
        use std::io::Write as _;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(raw).unwrap();
        let body = z.finish().unwrap();
        let mut bytes = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        bytes.extend((body.len() as u32).to_be_bytes());
        bytes.extend(body);
        B64.encode(bytes)
    }

    /// A V2 header for these bounds, with `payload_len` bytes of counts said to follow.
    fn header(payload_len: u32, sigfig: u32, low: u64, high: u64) -> Vec<u8> {
        let mut h = V2_COOKIE.to_be_bytes().to_vec();
        h.extend(payload_len.to_be_bytes());
        h.extend(0u32.to_be_bytes());
        h.extend(sigfig.to_be_bytes());
        h.extend(low.to_be_bytes());
        h.extend(high.to_be_bytes());
        h.extend(1f64.to_be_bytes());
        h
    }

    #[test]
    fn huge_bounds_and_digits_are_refused_before_allocating() {
        let mut wide = Histogram::<u64>::new_with_bounds(1, 1 << 62, 5).unwrap();
        wide.record(7).unwrap();
        let e = Hist::decode(&encoded(&wide)).unwrap_err();
        assert!(matches!(e, HistError::Limit(_)), "{e}");
        assert!(e.to_string().contains("significant digits"), "{e}");
        let mut high = Histogram::<u64>::new_with_bounds(1, 1 << 62, 3).unwrap();
        high.record(7).unwrap();
        let e = Hist::decode(&encoded(&high)).unwrap_err();
        assert!(e.to_string().contains("highest value"), "{e}");
        // At the limits it reads, and says what it costs.
        let mut edge = Histogram::<u64>::new_with_bounds(1, MAX_TRACKABLE_US, MAX_SIGFIG).unwrap();
        edge.record(MAX_TRACKABLE_US).unwrap();
        let shape = Hist::inspect(&encoded(&edge)).unwrap();
        assert!(shape.memory_bytes() < 400_000, "{shape:?}");
        assert_eq!(shape.slots, edge.distinct_values());
        assert_eq!(Hist::decode(&encoded(&edge)).unwrap().count(), 1);
    }

    #[test]
    fn a_zlib_bomb_stops_at_the_cap() {
        // 64 MiB of zeros behind a valid header compresses to ~64 KB.
        let mut raw = header(64 << 20, 3, 1, 2048);
        raw.resize(raw.len() + (64 << 20), 0);
        let text = compressed(&raw);
        assert!(text.len() < 200_000);
        let e = Hist::decode(&text).unwrap_err();
        assert!(e.to_string().contains("inflates past"), "{e}");
        assert!(Hist::inspect(&text).is_err());
    }

    #[test]
    fn counts_that_overflow_or_overrun_are_refused() {
        // Two counts of 2^62 - 1 and one more past u64 when added.
        let big = |n: u64| {
            let zz = n << 1; // zig-zag of a positive number
            let mut out = Vec::new();
            let mut v = zz;
            for _ in 0..8 {
                out.push((v & 0x7f) as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
            out
        };
        let mut counts = Vec::new();
        for _ in 0..5 {
            counts.extend(big((1 << 62) - 1));
        }
        let mut raw = header(counts.len() as u32, 3, 1, 2048);
        raw.extend(&counts);
        let e = Hist::decode(&B64.encode(&raw)).unwrap_err();
        assert!(matches!(e, HistError::Overflow(_)), "{e}");
        // A run of i64::MIN empty slots (negating it would overflow).
        let mut raw = header(9, 3, 1, 2048);
        raw.extend([0xff; 8]);
        raw.push(0xff);
        assert!(Hist::decode(&B64.encode(&raw)).is_err());
        // A count past the slots the bounds give: skip them all, then 1.
        let slots = Shape::of(1, 2048, 3).slots as u64;
        let zz = (slots << 1) - 1; // zig-zag of -slots
        let mut counts = vec![(zz & 0x7f) as u8 | 0x80, ((zz >> 7) & 0x7f) as u8, 2];
        assert!(zz < 1 << 14);
        let mut raw = header(counts.len() as u32, 3, 1, 2048);
        raw.append(&mut counts);
        let e = Hist::decode(&B64.encode(&raw)).unwrap_err();
        assert!(e.to_string().contains("past the"), "{e}");
        // The header says more counts follow than do.
        let raw = header(100, 3, 1, 2048);
        assert!(Hist::decode(&B64.encode(&raw)).is_err());
    }

    #[test]
    fn what_is_recorded_reads_back() {
        let mut h = Hist::new();
        h.record_us(u64::MAX);
        h.record(Duration::MAX);
        assert_eq!(h.count(), 2);
        assert!(h.max() >= MAX_TRACKABLE_US);
        assert_eq!(Hist::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn adding_past_u64_is_an_error() {
        let mut a = Hist::new();
        a.record_n_us(5, u64::MAX - 1);
        let mut b = Hist::new();
        b.record_n_us(5, 2);
        assert!(matches!(a.add(&b), Err(HistError::Overflow(_))));
    }

    proptest! {
        /// The memory a shape declares is HdrHistogram's own counts length.
        #[test]
        fn shape_knows_hdrhistograms_size(low_exp in 0u32..20, span in 1u32..40, sigfig in 0u8..=3) {
            let low = 1u64 << low_exp;
            let high = (low * 2).saturating_mul(1u64 << span).min(MAX_TRACKABLE_US);
            prop_assume!(high >= 2 * low);
            let h = Histogram::<u64>::new_with_bounds(low, high, sigfig).unwrap();
            prop_assert_eq!(Shape::of(low, high, sigfig).slots, h.distinct_values());
        }

        /// Decoding never panics, whatever the bytes.
        #[test]
        fn decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200), cookie in 0usize..3) {
            let mut raw = match cookie {
                0 => Vec::new(),
                1 => V2_COOKIE.to_be_bytes().to_vec(),
                _ => header(bytes.len() as u32, 3, 1, 1 << 20),
            };
            raw.extend(&bytes);
            let _ = Hist::decode(&B64.encode(&raw));
            let _ = Hist::decode(&compressed(&raw));
        }
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
