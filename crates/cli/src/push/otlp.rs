//! OpenTelemetry metrics over OTLP/HTTP: a [`Batch`] as a protobuf
//! `ExportMetricsServiceRequest` (opentelemetry-proto's
//! metrics_service.proto, metrics.proto, common.proto, resource.proto),
//! declared here with prost's derive (no protoc at build time); only the
//! fields throng writes.
//!
//! ```text
//!  Batch ─► one ResourceMetrics (service.name=throng, service.instance.id, run_id, agent)
//!             └─ one ScopeMetrics (throng) ─► a Metric per name, a data point per label set
//!  Counter   ─► Sum { monotonic, cumulative }        (sfixed64 as_int)
//!  Gauge     ─► Gauge                                (sfixed64 as_int)
//!  Real      ─► Sum { not monotonic } or Gauge       (double as_double)
//!  Histogram ─► ExponentialHistogram { cumulative }  (scale 8, dense buckets)
//! ```
//!
//! The names are the remote write ones: Prometheus' OTLP receiver keeps
//! them as they are (`_total` on a monotonic sum, `seconds` for unit `s`
//! are there already), so one dashboard reads either push.
//!
//! Bucket indexes: OTLP's bucket `k` holds (base^k, base^(k+1)], Prometheus'
//! bucket `i` holds (base^(i-1), base^i]; the same bucket is `k = i - 1`.

use super::batch::{Batch, Exponential, Point, SCHEMA, ZERO_THRESHOLD};

/// `opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// `opentelemetry.proto.metrics.v1.ResourceMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `opentelemetry.proto.metrics.v1.ScopeMetrics`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

/// `opentelemetry.proto.common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `opentelemetry.proto.common.v1.KeyValue` (throng's values are strings).
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `opentelemetry.proto.common.v1.AnyValue`: only `string_value` of its oneof.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(string, tag = "1")]
    pub string_value: String,
}

/// `opentelemetry.proto.metrics.v1.Metric`: one of gauge (5), sum (7),
/// exponential_histogram (10).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(oneof = "Data", tags = "5, 7, 10")]
    pub data: Option<Data>,
}

/// The `data` oneof of a [`Metric`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Data {
    #[prost(message, tag = "5")]
    Gauge(Gauge),
    #[prost(message, tag = "7")]
    Sum(Sum),
    #[prost(message, tag = "10")]
    ExponentialHistogram(ExponentialHistogram),
}

/// `AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE`: every point
/// holds the totals since `start_time_unix_nano`.
pub const CUMULATIVE: i32 = 2;

/// `opentelemetry.proto.metrics.v1.Gauge`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

/// `opentelemetry.proto.metrics.v1.Sum`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

/// `opentelemetry.proto.metrics.v1.NumberDataPoint`: its value `as_int`,
/// or `as_double` (a custom metric's).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(oneof = "Number", tags = "4, 6")]
    pub value: Option<Number>,
}

/// `NumberDataPoint.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Number {
    #[prost(double, tag = "4")]
    AsDouble(f64),
    #[prost(sfixed64, tag = "6")]
    AsInt(i64),
}

/// `opentelemetry.proto.metrics.v1.ExponentialHistogram`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExponentialHistogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<ExponentialHistogramDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
}

/// `opentelemetry.proto.metrics.v1.ExponentialHistogramDataPoint` (no
/// negative buckets: latencies are positive).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExponentialHistogramDataPoint {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    pub count: u64,
    #[prost(double, optional, tag = "5")]
    pub sum: Option<f64>,
    #[prost(sint32, tag = "6")]
    pub scale: i32,
    #[prost(fixed64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, optional, tag = "8")]
    pub positive: Option<Buckets>,
    #[prost(double, tag = "14")]
    pub zero_threshold: f64,
}

/// `ExponentialHistogramDataPoint.Buckets`: counts of consecutive buckets
/// from `offset` on.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Buckets {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint64, repeated, tag = "2")]
    pub bucket_counts: Vec<u64>,
}

/// The headers OTLP/HTTP with a binary protobuf body asks for, besides
/// Content-Length.
pub const HEADERS: &[(&str, &str)] = &[("Content-Type", "application/x-protobuf")];

/// `batch` as a request body: the protobuf, uncompressed.
pub fn encode(batch: &Batch) -> Vec<u8> {
    prost::Message::encode_to_vec(&export_request(batch))
}

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            string_value: value.to_string(),
        }),
    }
}

/// The resource's attributes from the batch's common labels: `job` is
/// `service.name`; `run_id` and `agent` stay as they are (a receiver that
/// promotes them gets the remote write labels); `service.instance.id` tells
/// the agents of one test apart (Prometheus makes it `instance`).
fn resource(common: &[(&'static str, String)]) -> Resource {
    let get = |k: &str| common.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
    let mut attributes = vec![kv("service.name", get("job").unwrap_or("throng"))];
    let mut instance = get("run_id").unwrap_or_default().to_string();
    if let Some(a) = get("agent") {
        instance = format!("{instance}/{a}");
    }
    attributes.push(kv("service.instance.id", &instance));
    attributes.extend(common.iter().filter(|(n, _)| *n != "job").map(|(n, v)| kv(n, v)));
    Resource { attributes }
}

/// The protobuf message for `batch`.
pub fn export_request(batch: &Batch) -> ExportMetricsServiceRequest {
    let ns = |ms: i64| u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000);
    let (start, time) = (ns(batch.start_unix_ms), ns(batch.unix_ms));
    let mut metrics: Vec<Metric> = Vec::new();
    for s in &batch.series {
        let attributes: Vec<KeyValue> = s.labels.iter().map(|(n, v)| kv(n, v)).collect();
        let number = |n: u64| NumberDataPoint {
            attributes: attributes.clone(),
            start_time_unix_nano: start,
            time_unix_nano: time,
            value: Some(Number::AsInt(i64::try_from(n).unwrap_or(i64::MAX))),
        };
        let real = |value: f64| NumberDataPoint {
            attributes: attributes.clone(),
            start_time_unix_nano: start,
            time_unix_nano: time,
            value: Some(Number::AsDouble(value)),
        };
        // Series of one name come together (batch::collect pushes them so);
        // a name seen before gets its point added to its metric.
        let metric = match metrics.iter_mut().rfind(|m| m.name == s.name) {
            Some(m) => m,
            None => {
                metrics.push(Metric {
                    name: s.name.to_string(),
                    description: String::new(),
                    unit: if matches!(s.point, Point::Histogram(_)) {
                        "s"
                    } else {
                        ""
                    }
                    .to_string(),
                    data: None,
                });
                // Just pushed.
                let last = metrics.len() - 1;
                &mut metrics[last]
            }
        };
        match (&s.point, &mut metric.data) {
            (Point::Counter(n), Some(Data::Sum(sum))) => sum.data_points.push(number(*n)),
            (Point::Counter(n), data) => {
                *data = Some(Data::Sum(Sum {
                    data_points: vec![number(*n)],
                    aggregation_temporality: CUMULATIVE,
                    is_monotonic: true,
                }));
            }
            (Point::Real { value, counter: true }, Some(Data::Sum(sum))) => sum.data_points.push(real(*value)),
            (Point::Real { value, counter: true }, data) => {
                *data = Some(Data::Sum(Sum {
                    data_points: vec![real(*value)],
                    aggregation_temporality: CUMULATIVE,
                    is_monotonic: false,
                }));
            }
            (Point::Real { value, .. }, Some(Data::Gauge(g))) => g.data_points.push(real(*value)),
            (Point::Real { value, .. }, data) => {
                *data = Some(Data::Gauge(Gauge {
                    data_points: vec![real(*value)],
                }));
            }
            (Point::Gauge(n), Some(Data::Gauge(g))) => g.data_points.push(number(*n)),
            (Point::Gauge(n), data) => {
                *data = Some(Data::Gauge(Gauge {
                    data_points: vec![number(*n)],
                }));
            }
            (Point::Histogram(e), Some(Data::ExponentialHistogram(h))) => {
                h.data_points.push(histogram(e, attributes, start, time));
            }
            (Point::Histogram(e), data) => {
                *data = Some(Data::ExponentialHistogram(ExponentialHistogram {
                    data_points: vec![histogram(e, attributes, start, time)],
                    aggregation_temporality: CUMULATIVE,
                }));
            }
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource(&batch.common)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "throng".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                metrics,
            }],
        }],
    }
}

/// An exponential histogram point: OTLP's buckets are dense from the first
/// one with samples to the last (the empty ones between count 0).
fn histogram(e: &Exponential, attributes: Vec<KeyValue>, start: u64, time: u64) -> ExponentialHistogramDataPoint {
    let positive = match (e.buckets.keys().next(), e.buckets.keys().next_back()) {
        (Some(&first), Some(&last)) => {
            // Indexes of seconds between 1 µs and hours: a few thousand at most.
            let mut counts = vec![0u64; usize::try_from(last - first).unwrap_or(0) + 1];
            for (&i, &n) in &e.buckets {
                if let Some(c) = usize::try_from(i - first).ok().and_then(|k| counts.get_mut(k)) {
                    *c = n;
                }
            }
            Some(Buckets {
                offset: first - 1,
                bucket_counts: counts,
            })
        }
        _ => None,
    };
    ExponentialHistogramDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: time,
        count: e.count,
        sum: Some(e.sum),
        scale: SCHEMA,
        zero_count: e.zero_count,
        positive,
        zero_threshold: ZERO_THRESHOLD,
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
        e.buckets.insert(1, 3);
        Batch {
            start_unix_ms: 1_699_999_999_000,
            unix_ms: 1_700_000_000_000,
            common: vec![
                ("job", "throng".into()),
                ("run_id", "r1".into()),
                ("agent", "1/2".into()),
            ],
            series: vec![
                Series {
                    name: "throng_requests_total",
                    labels: vec![("outcome", "ok".into())],
                    point: Point::Counter(42),
                },
                Series {
                    name: "throng_requests_total",
                    labels: vec![("outcome", "refused".into())],
                    point: Point::Counter(3),
                },
                Series {
                    name: "throng_vus",
                    labels: vec![],
                    point: Point::Gauge(9),
                },
                Series {
                    name: "throng_phase_duration_seconds",
                    labels: vec![("phase", "latency".into())],
                    point: Point::Histogram(e),
                },
            ],
        }
    }

    fn attr(kvs: &[KeyValue], key: &str) -> Option<String> {
        kvs.iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .map(|v| v.string_value.clone())
    }

    #[test]
    fn decodes_back_to_what_was_collected() {
        let body = encode(&batch());
        let req: ExportMetricsServiceRequest = prost::Message::decode(body.as_slice()).unwrap();
        let rm = &req.resource_metrics[0];
        let res = &rm.resource.as_ref().unwrap().attributes;
        assert_eq!(attr(res, "service.name").as_deref(), Some("throng"));
        assert_eq!(attr(res, "service.instance.id").as_deref(), Some("r1/1/2"));
        assert_eq!(attr(res, "run_id").as_deref(), Some("r1"));
        assert_eq!(attr(res, "agent").as_deref(), Some("1/2"));
        assert_eq!(attr(res, "job"), None);
        let metrics = &rm.scope_metrics[0].metrics;
        let names: Vec<_> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["throng_requests_total", "throng_vus", "throng_phase_duration_seconds"],
            "one metric per name"
        );
        let Some(Data::Sum(sum)) = &metrics[0].data else {
            panic!("{:?}", metrics[0])
        };
        assert!(sum.is_monotonic);
        assert_eq!(sum.aggregation_temporality, CUMULATIVE);
        let points: Vec<_> = sum
            .data_points
            .iter()
            .map(|p| (attr(&p.attributes, "outcome").unwrap(), p.value.clone()))
            .collect();
        assert_eq!(
            points,
            [
                ("ok".to_string(), Some(Number::AsInt(42))),
                ("refused".to_string(), Some(Number::AsInt(3)))
            ]
        );
        assert_eq!(sum.data_points[0].time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(sum.data_points[0].start_time_unix_nano, 1_699_999_999_000_000_000);
        let Some(Data::Gauge(g)) = &metrics[1].data else {
            panic!("{:?}", metrics[1])
        };
        assert_eq!(g.data_points[0].value, Some(Number::AsInt(9)));
        assert_eq!(metrics[2].unit, "s");
        let Some(Data::ExponentialHistogram(h)) = &metrics[2].data else {
            panic!("{:?}", metrics[2])
        };
        assert_eq!(h.aggregation_temporality, CUMULATIVE);
        let p = &h.data_points[0];
        assert_eq!((p.count, p.zero_count, p.scale, p.sum), (7, 1, 8, Some(1.5)));
        // Prometheus' buckets -3, -2 and 1 are OTLP's -4, -3 and 0, dense.
        let b = p.positive.as_ref().unwrap();
        assert_eq!(b.offset, -4);
        assert_eq!(b.bucket_counts, [2, 1, 0, 0, 3]);
        assert_eq!(p.zero_count + b.bucket_counts.iter().sum::<u64>(), p.count);
    }

    #[test]
    fn the_same_bucket_has_the_same_bounds_in_both_indexings() {
        // A value of exactly 1 s: Prometheus' bucket 0 is (2^(-1/256), 1],
        // OTLP's bucket -1 is (base^-1, base^0] = the same.
        let mut h = throng_metrics::Hist::new();
        h.record_us(500_000);
        let e = crate::push::batch::exponential(&h);
        let (&i, _) = e.buckets.iter().next().unwrap();
        let p = histogram(&e, vec![], 0, 0);
        let k = p.positive.unwrap().offset;
        assert_eq!(k, i - 1);
        let base = 2f64.powf(2f64.powi(-SCHEMA));
        let v = 0.5;
        assert!(base.powi(k) < v * (1.0 + 1e-3) && v <= base.powi(k + 1) * (1.0 + 1e-3));
    }

    #[test]
    fn an_empty_histogram_has_no_buckets() {
        let p = histogram(&Exponential::default(), vec![], 0, 0);
        assert_eq!((p.count, p.positive), (0, None));
    }
}
