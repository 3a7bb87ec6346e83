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

use crate::transport::TlsClient;

/// What a worker is given: the table, the order, the targets' names
/// (empty: no per-target figures, as with one target and `--body-lines`),
/// and where each origin is when the targets are on several.
#[derive(Debug)]
pub(crate) struct TargetSpec {
    pub table: Arc<Requests>,
    pub order: TargetOrder,
    pub names: Vec<String>,
    /// One per origin when there are several (empty: the spec's `addr`).
    pub origins: Vec<Dest>,
}

/// Where one origin's connections go.
#[derive(Debug)]
pub(crate) struct Dest {
    pub route: crate::reach::Route,
    pub tls: Option<TlsClient>,
}

/// A connection's own place in the list (`sequential`), and the origin it
/// serves when the targets are on several: every connection serves one
/// origin, so that it can stay open (keep-alive) for all its requests.
#[derive(Default)]
pub(crate) struct Cursor {
    at: usize,
    origin: Option<usize>,
    /// `--trace-context`: this task's copy of the request it sends, with
    /// the request's own ids (crate::trace); boxed: every task holds a
    /// cursor, and most runs trace nothing.
    pub(crate) traced: Option<Box<crate::trace::Traced>>,
}

/// One worker's picking state and per-target tags.
pub(crate) struct Pick {
    spec: Arc<TargetSpec>,
    /// The worker's place (`round-robin`); one per origin with several.
    shared: Vec<Cell<usize>>,
    /// The entries of each origin, when there are several.
    by_origin: Vec<Vec<usize>>,
    /// Connections given an origin so far, and this worker's number of how
    /// many: connection k of worker w serves origin (k·workers + w) mod O.
    conns: Cell<u64>,
    worker: u64,
    workers: u64,
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
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seed = now ^ worker.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let in_flight = RefCell::new(vec![0; spec.names.len()]);
        let by_origin: Vec<Vec<usize>> = if spec.origins.len() > 1 {
            let mut by = vec![Vec::new(); spec.origins.len()];
            for i in 0..spec.table.len() {
                if let Some(list) = by.get_mut(spec.table.origin(i)) {
                    list.push(i);
                }
            }
            by
        } else {
            Vec::new()
        };
        let shared = if by_origin.is_empty() {
            vec![Cell::new(start)]
        } else {
            by_origin
                .iter()
                .map(|l| {
                    Cell::new(usize::try_from(worker.saturating_mul(l.len() as u64) / workers.max(1)).unwrap_or(0))
                })
                .collect()
        };
        (
            Pick {
                spec,
                shared,
                by_origin,
                conns: Cell::new(0),
                worker,
                workers: workers.max(1),
                rng: Cell::new(seed | 1),
                tags,
                in_flight,
            },
            rec,
        )
    }

    /// The picking state of worker `worker` of `workers` among the several
    /// requests of `targets` (None with one), and the recorder of their
    /// targets' tags, from `origin`.
    pub(crate) fn of(
        targets: Option<&(Arc<TargetSpec>, u64, u64)>,
        origin: Instant,
    ) -> (Option<Pick>, Option<ScenarioRecorder>) {
        match targets {
            Some((t, worker, workers)) => {
                let (pick, tags) = Pick::new(Arc::clone(t), *worker, *workers, origin);
                (Some(pick), tags)
            }
            None => (None, None),
        }
    }

    /// The origin the connection at `cursor` serves (given on first use),
    /// when the targets are on several.
    pub(crate) fn dest(&self, cursor: &mut Cursor) -> Option<&Dest> {
        if self.by_origin.is_empty() {
            return None;
        }
        let o = self.origin(cursor);
        self.spec.origins.get(o)
    }

    fn origin(&self, cursor: &mut Cursor) -> usize {
        *cursor.origin.get_or_insert_with(|| {
            let k = self.conns.get();
            self.conns.set(k + 1);
            let n = self.by_origin.len().max(1) as u64;
            ((k * self.workers + self.worker) % n) as usize
        })
    }

    /// HTTP/2: binds the stream slot at `cursor` to the origin a connection
    /// of HTTP/1.1's would serve, counting connections modulo `conns` (the
    /// worker's): the slots of a worker serve only the origins its
    /// connections do, in their proportions. Returns the origin (0 with one).
    pub(crate) fn bind(&self, cursor: &mut Cursor, conns: u64) -> usize {
        if self.by_origin.is_empty() {
            return 0;
        }
        *cursor.origin.get_or_insert_with(|| {
            let k = self.conns.get();
            self.conns.set(k + 1);
            self.origin_of_conn(k % conns.max(1))
        })
    }

    fn origin_of_conn(&self, k: u64) -> usize {
        let n = self.by_origin.len().max(1) as u64;
        ((k * self.workers + self.worker) % n) as usize
    }

    /// How many of the worker's `conns` connections serve each origin (one
    /// entry with one origin): the shares [`Pick::bind`] gives slots.
    pub(crate) fn shares(&self, conns: u64) -> Vec<u64> {
        let n = self.by_origin.len();
        if n == 0 {
            return vec![conns];
        }
        // Connection k's origin repeats every n / gcd(workers, n)
        // connections, each origin at most once a period: count one
        // period, then the remainder (bounded by n, not by conns).
        let gcd = |mut a: u64, mut b: u64| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        let period = n as u64 / gcd(self.workers, n as u64).max(1);
        let mut shares = vec![0u64; n];
        for k in 0..period.min(conns) {
            shares[self.origin_of_conn(k)] += conns / period;
            if k < conns % period {
                shares[self.origin_of_conn(k)] += 1;
            }
        }
        shares
    }

    /// Where origin `o`'s connections go, when the targets are on several.
    pub(crate) fn origin_dest(&self, o: usize) -> Option<&Dest> {
        if self.by_origin.is_empty() {
            return None;
        }
        self.spec.origins.get(o)
    }

    /// Entry `i` as shared bytes (HTTP/2 and HTTP/3 send its body from them).
    pub(crate) fn request_shared(&self, i: usize) -> bytes::Bytes {
        self.spec.table.bytes(i)
    }

    /// The entry the next request of the connection at `cursor` sends.
    #[inline]
    pub(crate) fn next(&self, cursor: &mut Cursor) -> usize {
        if self.by_origin.is_empty() {
            return self.pick(cursor, 0, self.spec.table.len().max(1));
        }
        let o = self.origin(cursor);
        let list = &self.by_origin[o];
        // Every origin has a target, so its list is never empty.
        let i = self.pick(cursor, o, list.len().max(1));
        list.get(i).copied().unwrap_or(0)
    }

    /// The next of `n` (in the list of origin `o`).
    #[inline]
    fn pick(&self, cursor: &mut Cursor, o: usize, n: usize) -> usize {
        match self.spec.order {
            TargetOrder::RoundRobin => {
                let shared = &self.shared[o];
                let i = shared.get() % n;
                shared.set(i + 1);
                i
            }
            TargetOrder::Sequential => {
                let i = cursor.at % n;
                cursor.at = i + 1;
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

    /// The length of the longest entry.
    pub(crate) fn longest(&self) -> usize {
        let table = &self.spec.table;
        (0..table.len()).map(|i| table.get(i).len()).max().unwrap_or(0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use throng_plan::{HttpArgs, HttpPlan, RawTarget};

    /// A worker's picker over one target on each of `origins` origins.
    fn pick(origins: u16, worker: u64, workers: u64) -> Pick {
        let urls: Vec<String> = (0..origins)
            .map(|o| format!("http://127.0.0.1:{}/", 8000 + o))
            .collect();
        pick_of(&urls, worker, workers)
    }

    fn pick_of(urls: &[String], worker: u64, workers: u64) -> Pick {
        let origins = urls.len() as u32;
        let plan = HttpPlan::from_args(HttpArgs {
            url: urls[0].clone(),
            cores: 2,
            connections: Some(origins),
            targets: urls
                .iter()
                .enumerate()
                .map(|(i, u)| RawTarget {
                    at: format!("URL {}", i + 1),
                    url: u.clone(),
                    ..RawTarget::default()
                })
                .collect(),
            ..HttpArgs::default()
        })
        .unwrap();
        let dest = |o: &throng_plan::Target| Dest {
            route: crate::reach::Route {
                addrs: vec![std::net::SocketAddr::from(([127, 0, 0, 1], o.port))],
                tunnel: None,
                proxied: false,
            },
            tls: None,
        };
        let spec = TargetSpec {
            table: plan.request_table().unwrap(),
            order: TargetOrder::RoundRobin,
            names: Vec::new(),
            origins: plan.origins().iter().map(dest).collect(),
        };
        Pick::new(Arc::new(spec), worker, workers, Instant::now()).0
    }

    #[test]
    fn slots_serve_the_origins_their_workers_connections_would() {
        for origins in [2u16, 3, 5] {
            for workers in 1..=4u64 {
                for worker in 0..workers {
                    for conns in [1u64, 2, 3, 7, 10] {
                        let p = pick(origins, worker, workers);
                        // HTTP/1.1's connection k of this worker.
                        let mut want = vec![0u64; usize::from(origins)];
                        for k in 0..conns {
                            want[((k * workers + worker) % u64::from(origins)) as usize] += 1;
                        }
                        assert_eq!(
                            p.shares(conns),
                            want,
                            "{origins} origins, worker {worker}/{workers}, -c {conns}"
                        );
                        // Stream slots (3 per connection) bind in the same proportions.
                        let mut bound = vec![0u64; usize::from(origins)];
                        for _ in 0..conns * 3 {
                            let mut c = Cursor::default();
                            let o = p.bind(&mut c, conns);
                            bound[o] += 1;
                            // Its requests stay on its origin.
                            let i = p.next(&mut c);
                            assert_eq!(p.spec.table.origin(i), o);
                        }
                        assert_eq!(bound, want.iter().map(|n| n * 3).collect::<Vec<_>>());
                    }
                }
            }
        }
        // One origin: one share, every slot on it.
        let one = pick_of(&["http://h/a".to_string(), "http://h/b".to_string()], 0, 1);
        assert_eq!(one.shares(4), [4]);
        assert_eq!(one.bind(&mut Cursor::default(), 4), 0);
    }
}
