//! Prometheus remote write 1.0: a [`Batch`] as a protobuf `WriteRequest`,
//! snappy block-compressed. The messages are Prometheus' `prompb` ones
//! (types.proto, remote.proto), declared here with prost's derive (no protoc
//! at build time); only the fields throng writes.
//!
//! A histogram goes as a native histogram: schema, zero threshold and count,
//! positive spans (runs of consecutive bucket indexes; a span's offset is the
//! gap after the previous one) and deltas (each bucket's count minus the one
//! before it).

use super::batch::{Batch, Exponential, Point, SCHEMA, ZERO_THRESHOLD};

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// Sorted by name, `__name__` among them.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub histograms: Vec<Histogram>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `prometheus.Histogram`. throng writes integer histograms: the float
/// variants of the `count` and `zero_count` oneofs (tags 2 and 7) are left
/// out, and the negative buckets and float counts stay empty (latencies are
/// positive counts).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    #[prost(uint64, tag = "1")]
    pub count_int: u64,
    #[prost(double, tag = "3")]
    pub sum: f64,
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    #[prost(double, tag = "5")]
    pub zero_threshold: f64,
    #[prost(uint64, tag = "6")]
    pub zero_count_int: u64,
    #[prost(message, repeated, tag = "8")]
    pub negative_spans: Vec<BucketSpan>,
    #[prost(sint64, repeated, tag = "9")]
    pub negative_deltas: Vec<i64>,
    #[prost(double, repeated, tag = "10")]
    pub negative_counts: Vec<f64>,
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    #[prost(sint64, repeated, tag = "12")]
    pub positive_deltas: Vec<i64>,
    #[prost(double, repeated, tag = "13")]
    pub positive_counts: Vec<f64>,
    /// `ResetHint`: 0 unknown (Prometheus then detects resets itself).
    #[prost(int32, tag = "14")]
    pub reset_hint: i32,
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
}

/// `prometheus.BucketSpan`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BucketSpan {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// The headers remote write 1.0 asks for, besides Content-Length.
pub const HEADERS: &[(&str, &str)] = &[
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

/// `batch` as a request body: the protobuf, snappy block-compressed.
pub fn encode(batch: &Batch) -> Vec<u8> {
    let req = write_request(batch);
    let raw = prost::Message::encode_to_vec(&req);
    // Compressing a buffer in memory fails only past snappy's maximum input
    // (about 4 GiB); a batch is kilobytes. An empty body then fails the push
    // (the receiver refuses it), which is counted.
    snap::raw::Encoder::new().compress_vec(&raw).unwrap_or_default()
}

/// The protobuf message for `batch`.
pub fn write_request(batch: &Batch) -> WriteRequest {
    let timeseries = batch
        .series
        .iter()
        .map(|s| {
            let mut labels: Vec<Label> = std::iter::once(("__name__", s.name.to_string()))
                .chain(batch.common.iter().cloned())
                .chain(s.labels.iter().cloned())
                .map(|(name, value)| Label {
                    name: name.to_string(),
                    value,
                })
                .collect();
            labels.sort_by(|a, b| a.name.cmp(&b.name));
            labels.dedup_by(|a, b| a.name == b.name);
            let (samples, histograms) = match &s.point {
                Point::Counter(n) | Point::Gauge(n) => (
                    vec![Sample {
                        value: *n as f64,
                        timestamp: batch.unix_ms,
                    }],
                    vec![],
                ),
                Point::Real { value, .. } => (
                    vec![Sample {
                        value: *value,
                        timestamp: batch.unix_ms,
                    }],
                    vec![],
                ),
                Point::Histogram(e) => (vec![], vec![histogram(e, batch.unix_ms)]),
            };
            TimeSeries {
                labels,
                samples,
                histograms,
            }
        })
        .collect();
    WriteRequest { timeseries }
}

/// A native histogram: spans over runs of consecutive indexes, deltas
/// between consecutive buckets.
fn histogram(e: &Exponential, timestamp: i64) -> Histogram {
    let mut spans: Vec<BucketSpan> = Vec::new();
    let mut deltas = Vec::with_capacity(e.buckets.len());
    let mut prev: Option<(i32, u64)> = None;
    for (&i, &n) in &e.buckets {
        match prev {
            Some((p, _)) if i == p + 1 => {
                if let Some(last) = spans.last_mut() {
                    last.length += 1;
                }
            }
            Some((p, _)) => spans.push(BucketSpan {
                offset: i - p - 1,
                length: 1,
            }),
            None => spans.push(BucketSpan { offset: i, length: 1 }),
        }
        let before = prev.map_or(0, |(_, c)| c);
        deltas.push(n as i64 - before as i64);
        prev = Some((i, n));
    }
    Histogram {
        count_int: e.count,
        sum: e.sum,
        schema: SCHEMA,
        zero_threshold: ZERO_THRESHOLD,
        zero_count_int: e.zero_count,
        negative_spans: Vec::new(),
        negative_deltas: Vec::new(),
        negative_counts: Vec::new(),
        positive_spans: spans,
        positive_deltas: deltas,
        positive_counts: Vec::new(),
        reset_hint: 0,
        timestamp,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::push::batch::Series;

    fn batch() -> Batch {
        let mut e = Exponential {
            count: 7,
            sum: 1.5,
            zero_count: 1,
            ..Exponential::default()
        };
        e.buckets.insert(-3, 2);
        e.buckets.insert(-2, 1);
        e.buckets.insert(5, 3);
        Batch {
            start_unix_ms: 1_699_999_999_000,
            unix_ms: 1_700_000_000_000,
            common: vec![("job", "throng".into()), ("run_id", "r1".into())],
            series: vec![
                Series {
                    name: "throng_requests_total",
                    labels: vec![("outcome", "ok".into())],
                    point: Point::Counter(42),
                },
                Series {
                    name: "throng_phase_duration_seconds",
                    labels: vec![("phase", "latency".into())],
                    point: Point::Histogram(e),
                },
            ],
        }
    }

    #[test]
    fn decodes_back_to_what_was_collected() {
        let body = encode(&batch());
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let req: WriteRequest = prost::Message::decode(raw.as_slice()).unwrap();
        assert_eq!(req.timeseries.len(), 2);
        let names: Vec<_> = req.timeseries[0].labels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["__name__", "job", "outcome", "run_id"]);
        assert_eq!(req.timeseries[0].samples[0].value, 42.0);
        let h = &req.timeseries[1].histograms[0];
        assert_eq!((h.count_int, h.zero_count_int, h.schema), (7, 1, 8));
        assert_eq!(
            h.positive_spans,
            [
                BucketSpan { offset: -3, length: 2 },
                BucketSpan { offset: 6, length: 1 }
            ]
        );
        assert_eq!(h.positive_deltas, [2, -1, 2]);
        // Spans and deltas give back the buckets.
        let mut index = 0;
        let mut count = 0i64;
        let mut back = Vec::new();
        let mut d = h.positive_deltas.iter();
        for (k, s) in h.positive_spans.iter().enumerate() {
            index += s.offset + i32::from(k > 0);
            for j in 0..s.length as i32 {
                count += d.next().unwrap();
                back.push((index + j, count as u64));
            }
            index += s.length as i32 - 1;
        }
        assert_eq!(back, [(-3, 2), (-2, 1), (5, 3)]);
    }
}
