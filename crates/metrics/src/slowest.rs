//! The slowest requests of a run with `--trace-context`: each with the trace
//! id it carried, so a server's trace can be found for it.
//!
//! ```text
//!  worker: SlowTally (the N slowest so far, fixed room, no allocation once full)
//!     │ finish
//!     ▼
//!  Slowest { keep: N, requests } ── merge: union, slowest first, cut to N
//! ```
//!
//! The N slowest of a union are among the N slowest of each part, so a
//! merge over workers, processes or result files is exact.

use serde::{Deserialize, Serialize};

use crate::ErrorClass;

/// How a slow request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlowEnd {
    /// A response with this status.
    Status(u16),
    /// No response: this error class.
    Error(ErrorClass),
}

/// One request of a worker's tally (the id as bytes: no text per request).
#[derive(Clone, Copy, Debug)]
struct Entry {
    latency_us: u64,
    start_us: u64,
    end: SlowEnd,
    trace_id: [u8; 16],
}

/// A worker's N slowest requests so far.
#[derive(Clone, Debug)]
pub(crate) struct SlowTally {
    keep: usize,
    entries: Vec<Entry>,
    /// Index of the fastest kept entry (the one a slower request replaces).
    fastest: usize,
}

impl SlowTally {
    pub(crate) fn new(keep: usize) -> Self {
        SlowTally {
            keep,
            entries: Vec::with_capacity(keep),
            fastest: 0,
        }
    }

    /// Keeps this request when it is among the N slowest so far.
    pub(crate) fn offer(&mut self, latency_us: u64, start_us: u64, end: SlowEnd, trace_id: [u8; 16]) {
        let e = Entry {
            latency_us,
            start_us,
            end,
            trace_id,
        };
        if self.entries.len() < self.keep {
            self.entries.push(e);
        } else if self
            .entries
            .get(self.fastest)
            .is_some_and(|f| f.latency_us < latency_us)
        {
            self.entries[self.fastest] = e;
        } else {
            return;
        }
        self.fastest = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.latency_us)
            .map_or(0, |(i, _)| i);
    }

    pub(crate) fn to_slowest(&self) -> Slowest {
        let mut s = Slowest {
            keep: self.keep as u64,
            requests: self
                .entries
                .iter()
                .map(|e| {
                    let (status, error) = match e.end {
                        SlowEnd::Status(s) => (Some(s), None),
                        SlowEnd::Error(c) => (None, Some(c.name().into_owned())),
                    };
                    SlowRequest {
                        latency_us: e.latency_us,
                        start_us: e.start_us,
                        status,
                        error,
                        trace_id: hex(&e.trace_id),
                    }
                })
                .collect(),
        };
        s.order();
        s
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// The slowest requests of a run (`--trace-context`), slowest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slowest {
    /// How many are kept at most (`--slowest`).
    pub keep: u64,
    /// At most `keep`, by latency, slowest first.
    pub requests: Vec<SlowRequest>,
}

/// One slow request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowRequest {
    /// Its latency (as the `latency` phase measures it), µs.
    pub latency_us: u64,
    /// When it started (its intended start in an open loop), µs after the
    /// run's start.
    pub start_us: u64,
    /// The response's status, when one arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The error class, when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The W3C trace id its `traceparent` header carried (32 hex digits).
    pub trace_id: String,
}

impl Slowest {
    /// Adds `o`'s requests (their starts shifted by `shift_us`) and keeps
    /// the slowest `max(keep)`.
    pub fn merge(&mut self, o: &Slowest, shift_us: u64) {
        self.keep = self.keep.max(o.keep);
        self.requests.extend(o.requests.iter().map(|r| SlowRequest {
            start_us: r.start_us.saturating_add(shift_us),
            ..r.clone()
        }));
        self.order();
    }

    /// Slowest first (ties: earlier start, then trace id), cut to `keep`.
    fn order(&mut self) {
        self.requests.sort_by(|a, b| {
            b.latency_us
                .cmp(&a.latency_us)
                .then(a.start_us.cmp(&b.start_us))
                .then_with(|| a.trace_id.cmp(&b.trace_id))
        });
        self.requests.truncate(usize::try_from(self.keep).unwrap_or(usize::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> [u8; 16] {
        [n; 16]
    }

    #[test]
    fn a_tally_keeps_the_n_slowest_in_order() {
        let mut t = SlowTally::new(3);
        for (i, lat) in [5u64, 1, 9, 3, 7, 2, 8].into_iter().enumerate() {
            t.offer(lat, i as u64, SlowEnd::Status(200), id(i as u8));
        }
        let s = t.to_slowest();
        let lat: Vec<u64> = s.requests.iter().map(|r| r.latency_us).collect();
        assert_eq!(lat, [9, 8, 7]);
        assert_eq!(s.requests[0].trace_id, "02".repeat(16));
        assert_eq!(s.requests[0].status, Some(200));
    }

    #[test]
    fn a_merge_is_the_top_n_of_the_union() {
        let mut a = SlowTally::new(2);
        let mut b = SlowTally::new(2);
        a.offer(10, 0, SlowEnd::Status(200), id(1));
        a.offer(4, 0, SlowEnd::Status(200), id(2));
        b.offer(8, 0, SlowEnd::Error(ErrorClass::TimeoutResponse), id(3));
        b.offer(12, 5, SlowEnd::Status(500), id(4));
        let mut m = a.to_slowest();
        m.merge(&b.to_slowest(), 1_000);
        let lat: Vec<u64> = m.requests.iter().map(|r| r.latency_us).collect();
        assert_eq!(lat, [12, 10]);
        assert_eq!(m.requests[0].start_us, 1_005, "shifted by the part's offset");
        let mut empty = Slowest::default();
        empty.merge(&m, 0);
        assert_eq!(empty, m, "merging into nothing keeps the same list");
    }

    #[test]
    fn hex_is_lower_case_and_two_digits_a_byte() {
        assert_eq!(hex(&[0x0a, 0xff, 0x00]), "0aff00");
    }
}
