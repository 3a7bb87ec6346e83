//! Several requests in one HTTP run (targets, `--body-lines` bodies): which
//! one a request sends, and each target's figures under its `target:` tag.
//!
//! The requests were rendered once by the plan ([`throng_plan::Requests`]);
//! choosing the next is an index into that table, so the hot path stays
//! free of allocations. The figures per target go into the worker's
//! `ScenarioRecorder` (the same per-tag figures a scenario's steps have),
//! so reports, merges and thresholds treat `target:NAME` as they treat
//! `step:NAME`.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_metrics::ScenarioRecorder;
use throng_plan::{Requests, TargetOrder};

/// What a worker is given: the table, the order, and the targets' names
/// (empty: no per-target figures, as with one target and `--body-lines`).
#[derive(Debug)]
pub(crate) struct TargetSpec {
    pub table: Arc<Requests>,
    pub order: TargetOrder,
    pub names: Vec<String>,
}

/// A connection's own place in the list (`sequential`).
#[derive(Default)]
pub(crate) struct Cursor(usize);

/// One worker's picking state and per-target tags.
pub(crate) struct Pick {
    spec: Arc<TargetSpec>,
    /// The worker's place (`round-robin`).
    shared: Cell<usize>,
    /// xorshift64 state (`random`), never 0.
    rng: Cell<u64>,
    /// Per target: its tag and the all-requests tag (empty: none kept).
    tags: Vec<[usize; 2]>,
    /// Requests in flight, per target (counted `interrupted` at the end).
    in_flight: RefCell<Vec<u64>>,
}

impl Pick {
    /// The picking state of worker `worker` of `workers`, and the recorder
    /// its tags live in (None without names).
    pub(crate) fn new(
        spec: Arc<TargetSpec>,
        worker: u64,
        workers: u64,
        origin: Instant,
    ) -> (Pick, Option<ScenarioRecorder>) {
        let n = spec.table.len().max(1) as u64;
        let start = usize::try_from(worker.saturating_mul(n) / workers.max(1)).unwrap_or(0);
        let (tags, rec) = if spec.names.is_empty() {
            (Vec::new(), None)
        } else {
            let mut rec = ScenarioRecorder::new(origin);
            let all = rec.tag("");
            let tags = spec
                .names
                .iter()
                .map(|name| [rec.tag(&format!("target:{name}")), all])
                .collect();
            (tags, Some(rec))
        };
        // Seeded per worker and run: different workers draw different orders.
        let seed = origin.elapsed().as_nanos() as u64 ^ (worker.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let in_flight = RefCell::new(vec![0; spec.names.len()]);
        (
            Pick {
                spec,
                shared: Cell::new(start),
                rng: Cell::new(seed | 1),
                tags,
                in_flight,
            },
            rec,
        )
    }

    /// The entry the next request of the connection at `cursor` sends.
    #[inline]
    pub(crate) fn next(&self, cursor: &mut Cursor) -> usize {
        let n = self.spec.table.len().max(1);
        match self.spec.order {
            TargetOrder::RoundRobin => {
                let i = self.shared.get() % n;
                self.shared.set(i + 1);
                i
            }
            TargetOrder::Sequential => {
                let i = cursor.0 % n;
                cursor.0 = i + 1;
                i
            }
            TargetOrder::Random => {
                let mut x = self.rng.get();
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.rng.set(x);
                // Multiply-shift: uniform enough for n far below 2^32.
                ((u128::from(x) * n as u128) >> 64) as usize
            }
        }
    }

    /// The bytes of entry `i`.
    #[inline]
    pub(crate) fn request(&self, i: usize) -> &[u8] {
        self.spec.table.get(i)
    }

    /// The tags of entry `i`'s target (empty when none are kept).
    #[inline]
    fn tags(&self, i: usize) -> &[usize] {
        self.tags.get(self.spec.table.target(i)).map_or(&[], |t| &t[..])
    }

    /// A request of entry `i` started.
    #[inline]
    pub(crate) fn started(&self, i: usize) {
        if let Some(n) = self.in_flight.borrow_mut().get_mut(self.spec.table.target(i)) {
            *n += 1;
        }
    }

    /// A request of entry `i` ended: `response` its response time and
    /// whether its status was expected, when one came.
    #[inline]
    pub(crate) fn ended(
        &self,
        scenario: &RefCell<Option<ScenarioRecorder>>,
        i: usize,
        now: Instant,
        response: Option<(Duration, bool)>,
    ) {
        if let Some(n) = self.in_flight.borrow_mut().get_mut(self.spec.table.target(i)) {
            *n = n.saturating_sub(1);
        }
        let tags = self.tags(i);
        if tags.is_empty() {
            return;
        }
        if let Some(rec) = scenario.borrow_mut().as_mut() {
            let failed = !matches!(response, Some((_, true)));
            rec.request(now, tags, response, failed);
        }
    }

    /// Counts what is still in flight as `interrupted`, per target.
    pub(crate) fn interrupted(&self, scenario: &RefCell<Option<ScenarioRecorder>>) {
        let mut guard = scenario.borrow_mut();
        let Some(rec) = guard.as_mut() else { return };
        for (t, &n) in self.in_flight.borrow().iter().enumerate() {
            if let Some(tags) = self.tags.get(t) {
                for _ in 0..n {
                    rec.interrupted(tags);
                }
            }
        }
    }
}
