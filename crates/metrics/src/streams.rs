//! Event streams (`throng http --sse`, `--llm`): events, tokens, how each
//! stream ended, and the goodput of an `--slo`. Kept per worker, merged
//! exactly (counts add, the tokens-per-second histogram adds).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hist::{Hist, HistError};
use crate::outcome::{add, add_all};

/// What one stream saw, reported when it ends.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StreamSeen {
    /// Events read whole.
    pub events: u64,
    /// Bytes of the events' data.
    pub event_bytes: u64,
    /// Output tokens (LLM streams).
    pub tokens: u64,
    /// Output tokens per second of this stream, when it had tokens and took
    /// time.
    pub tokens_per_second: Option<f64>,
    /// Met the `--slo` (None: no SLO to judge).
    pub slo_met: Option<bool>,
}

/// The recorder's running stream counts.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamTally {
    streams: u64,
    events: u64,
    event_bytes: u64,
    tokens: u64,
    ended: BTreeMap<String, u64>,
    /// Tokens per second, ×1000 (recorded as if µs: 3 significant digits).
    tokens_per_second: Option<Hist>,
    slo_judged: u64,
    slo_met: u64,
}

impl StreamTally {
    pub(crate) fn ended(&mut self, how: &str, seen: &StreamSeen) {
        self.streams += 1;
        self.events += seen.events;
        self.event_bytes += seen.event_bytes;
        self.tokens += seen.tokens;
        match self.ended.get_mut(how) {
            Some(n) => *n += 1,
            None => {
                self.ended.insert(how.to_string(), 1);
            }
        }
        if let Some(tps) = seen.tokens_per_second.filter(|t| t.is_finite() && *t >= 0.0) {
            // Invariant: finite and not negative; `as` saturates.
            let milli = (tps * 1000.0).round() as u64;
            self.tokens_per_second.get_or_insert_with(Hist::new).record_us(milli);
        }
        if let Some(met) = seen.slo_met {
            self.slo_judged += 1;
            self.slo_met += u64::from(met);
        }
    }

    pub(crate) fn to_counts(&self) -> StreamCounts {
        StreamCounts {
            streams: self.streams,
            events: self.events,
            event_bytes: self.event_bytes,
            tokens: self.tokens,
            ended: self.ended.clone(),
            tokens_per_second_milli: self.tokens_per_second.clone(),
            slo_judged: self.slo_judged,
            slo_met: self.slo_met,
            goodput: None,
        }
        .with_goodput()
    }
}

/// Event streams, over the run (`--sse`, `--llm`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamCounts {
    /// Streams that ended, each once (the requests that got a stream, or
    /// failed trying).
    pub streams: u64,
    /// Events read whole, over all streams.
    pub events: u64,
    /// Bytes of the events' data.
    pub event_bytes: u64,
    /// LLM output tokens, over all streams.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens: u64,
    /// How the streams ended, by name: `completed` (the server ended it, or
    /// an LLM stream's `data: [DONE]`), `events` (`--sse-events` reached),
    /// `duration` (`--sse-duration` reached), or the request's error class
    /// (`sse.stalled`, `sse.too_large`, `eof`, `check_failed`, ...).
    pub ended: BTreeMap<String, u64>,
    /// Output tokens per second of each stream, ×1000 (an HDR histogram).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_second_milli: Option<Hist>,
    /// Streams judged against the `--slo`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slo_judged: u64,
    /// Of those, the ones that met it (the goodput's numerator).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slo_met: u64,
    /// `slo_met / slo_judged`: the share of streams that met the `--slo`
    /// (derived; recomputed on merge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StreamCounts {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &StreamCounts) -> Result<(), HistError> {
        add(&mut self.streams, other.streams, "streams.streams")?;
        add(&mut self.events, other.events, "streams.events")?;
        add(&mut self.event_bytes, other.event_bytes, "streams.event_bytes")?;
        add(&mut self.tokens, other.tokens, "streams.tokens")?;
        add_all(&mut self.ended, &other.ended, "streams.ended")?;
        add(&mut self.slo_judged, other.slo_judged, "streams.slo_judged")?;
        add(&mut self.slo_met, other.slo_met, "streams.slo_met")?;
        if let Some(h) = &other.tokens_per_second_milli {
            self.tokens_per_second_milli.get_or_insert_with(Hist::new).add(h)?;
        }
        self.goodput = self.goodput();
        Ok(())
    }

    fn with_goodput(mut self) -> StreamCounts {
        self.goodput = self.goodput();
        self
    }

    /// The share of judged streams that met the `--slo` (None: none judged).
    pub fn goodput(&self) -> Option<f64> {
        (self.slo_judged > 0).then(|| self.slo_met as f64 / self.slo_judged as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_count_once_and_merge() {
        let mut a = StreamTally::default();
        let seen = StreamSeen {
            events: 5,
            event_bytes: 50,
            tokens: 4,
            tokens_per_second: Some(12.5),
            slo_met: Some(true),
        };
        a.ended("completed", &seen);
        a.ended(
            "sse.stalled",
            &StreamSeen {
                events: 2,
                slo_met: Some(false),
                ..StreamSeen::default()
            },
        );
        let mut m = a.to_counts();
        assert_eq!((m.streams, m.events, m.event_bytes, m.tokens), (2, 7, 50, 4));
        assert_eq!(m.ended.get("completed"), Some(&1));
        assert_eq!((m.goodput(), m.goodput), (Some(0.5), Some(0.5)));
        let h = m.tokens_per_second_milli.as_ref().unwrap();
        assert_eq!((h.count(), h.max() / 10), (1, 1250));
        let other = m.clone();
        m.merge(&other).unwrap();
        assert_eq!((m.streams, m.events, m.ended["sse.stalled"]), (4, 14, 2));
        assert_eq!(m.goodput, Some(0.5));
        assert_eq!(m.tokens_per_second_milli.unwrap().count(), 2);
        let back: StreamCounts = serde_json::from_str(&serde_json::to_string(&other).unwrap()).unwrap();
        assert_eq!(back, other);
    }
}
