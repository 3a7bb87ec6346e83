//! The per-second phase histograms as an HdrHistogram interval log — the
//! format HdrHistogram's `HistogramLogProcessor`, HdrHistogramVisualizer
//! and hdr-plot read.
//!
//! ```text
//! #[throng 0.1.0 interval log: one interval per second per phase, tagged with the phase]
//! #[Values in microseconds; Interval_Max in milliseconds (max / 1000, the Java writer's convention)]
//! #[Histogram log format version 1.3]
//! #[StartTime: 1767225600.000 (seconds since epoch), 2026-01-01T00:00:00.000Z]
//! #[BaseTime: 1767225600.000 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! #[MaxValueDivisor: 1000.000]
//! Tag=connect,0.000,1.000,0.087,HISTFAAAAC14nJNpmSzMwMDAxQABzFCaEUzPmgJhAgA...
//! Tag=latency,0.000,1.000,3.525,HISTFAAAAMx4nC2QTUvDQBCGZ2Z...
//! ```
//!
//! Histogram values are microseconds (as every throng histogram). Interval
//! timestamps are seconds since BaseTime, the run's start. `Interval_Max`
//! is the interval's largest value divided by 1000 — milliseconds — as
//! Java's `HistogramLogWriter` divides nanoseconds by 10^6 to print
//! milliseconds. To read percentiles in milliseconds with
//! `HistogramLogProcessor`, pass `-outputValueUnitRatio 1000` and
//! `-tag PHASE`. Encoding: V2 compressed (deflate), base64.

use std::io::{self, Write};
use std::time::Duration;

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use throng_metrics::Phase;
use throng_result::RunResult;

/// Histogram values are µs; `Interval_Max` is printed in ms.
const MAX_VALUE_DIVISOR: f64 = 1000.0;

/// Writes every second's phase histograms of `result` as an interval log.
pub fn write(result: &RunResult, mut w: &mut dyn Write) -> io::Result<()> {
    let start_ms = result.started_at_unix_ms;
    let start_s = start_ms as f64 / 1000.0;
    writeln!(
        w,
        "#[throng {} interval log: one interval per second per phase, tagged with the phase]",
        result.throng_version
    )?;
    writeln!(
        w,
        "#[Values in microseconds; Interval_Max in milliseconds (max / 1000, the Java writer's convention)]"
    )?;
    writeln!(w, "#[Histogram log format version 1.3]")?;
    writeln!(
        w,
        "#[StartTime: {start_s:.3} (seconds since epoch), {}]",
        result.started_at
    )?;
    writeln!(w, "#[BaseTime: {start_s:.3} (seconds since epoch)]")?;
    writeln!(
        w,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )?;
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .with_max_value_divisor(MAX_VALUE_DIVISOR)
        .begin_log_with(&mut w, &mut serializer)?;
    // Interval timestamps are relative to BaseTime, the run's start.
    for point in &result.measurements.series {
        let start = Duration::from_secs(point.second);
        let length = interval_length(point.second, result.duration_s);
        for phase in Phase::ALL {
            let Some(encoded) = point.phases.get(phase.name()) else {
                continue;
            };
            let h = encoded.decode().map_err(io::Error::other)?;
            log.write_histogram(h.inner(), start, length, Tag::new(phase.name()))
                .map_err(|e| io::Error::other(e.to_string()))?;
        }
    }
    Ok(())
}

/// One second, except the run's last, partial second.
fn interval_length(second: u64, duration_s: f64) -> Duration {
    let left = duration_s - second as f64;
    if left > 0.0 && left < 1.0 {
        Duration::from_secs_f64(left)
    } else {
        Duration::from_secs(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use throng_metrics::{EncodedHist, Hist, Measurements, SeriesPoint};

    #[test]
    fn reads_back_with_the_hdrhistogram_reader() {
        let mut a = Hist::new();
        let mut b = Hist::new();
        for v in 1..=100 {
            a.record_us(v);
        }
        b.record_us(2_500);
        let series = vec![
            SeriesPoint {
                second: 0,
                phases: [
                    ("latency".to_string(), EncodedHist::new(&a)),
                    ("connect".to_string(), EncodedHist::new(&b)),
                ]
                .into(),
                ..SeriesPoint::default()
            },
            SeriesPoint {
                second: 1,
                phases: [("latency".to_string(), EncodedHist::new(&b))].into(),
                ..SeriesPoint::default()
            },
        ];
        let mut r = crate::testing::test_result(Measurements {
            series,
            ..Measurements::default()
        });
        r.duration_s = 1.5;
        let mut out = Vec::new();
        write(&r, &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains("\n\"StartTimestamp\",\"Interval_Length\""));
        assert!(text.contains("Tag=latency,0.000,1.000,0.100,HISTF"), "{text}");
        assert!(text.contains("Tag=latency,1.000,0.500,2.501,HISTF"), "{text}");

        let mut counts = std::collections::BTreeMap::new();
        let mut base = None;
        for entry in IntervalLogIterator::new(&out) {
            match entry.unwrap() {
                LogEntry::BaseTime(t) => base = Some(t),
                LogEntry::StartTime(_) => {}
                LogEntry::Interval(i) => {
                    let h = Hist::decode(i.encoded_histogram()).unwrap();
                    *counts.entry(i.tag().unwrap().as_str().to_string()).or_insert(0) += h.count();
                }
            }
        }
        assert_eq!(base, Some(Duration::from_millis(1_000_000)));
        assert_eq!(counts["latency"], 101);
        assert_eq!(counts["connect"], 1);
    }
}
