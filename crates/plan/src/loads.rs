//! How a plan divides among workers (threads, and for storms processes):
//! each worker's share of connections, requests, arrivals and caps, within
//! this process's execution segment. Pure arithmetic; the engine runs the
//! shares it is given.
//!
//! ```text
//!  HttpPlan  ─ worker_loads(threads) ───────────► HttpLoads  { per worker: Closed | Open }
//!  StormPlan ─ worker_loads(process, processes) ► StormLoads { per worker: starts, cap, gap }
//! ```

use std::time::Duration;

use crate::http::{HttpPlan, Load, Stop};
use crate::schedule::{Arrivals, StormStarts, arrival_offset, split_evenly};
use crate::storm::StormPlan;

/// One worker's share of an HTTP plan.
#[derive(Clone, Debug)]
pub enum HttpWorkerLoad {
    /// `connections` loops, each sending request after request; `budget`
    /// requests in all (None: until `until`, an offset from the start).
    Closed {
        /// Connections this worker keeps busy.
        connections: u64,
        /// Requests this worker sends (`-n`), or None.
        budget: Option<u64>,
        /// When this worker stops (`-d`), from the run's start.
        until: Option<Duration>,
    },
    /// Requests start on `arrivals`, on at most `cap` connections.
    Open {
        /// This worker's arrivals: every threads-th of the segment's.
        arrivals: Arrivals,
        /// Connections at most.
        cap: u64,
        /// Average gap between this worker's arrivals.
        gap: Duration,
        /// Connections to open before the schedule starts (keep-alive only).
        warm: u64,
    },
}

/// An HTTP plan divided among one process's workers.
#[derive(Clone, Debug)]
pub struct HttpLoads {
    /// One load per worker thread.
    pub workers: Vec<HttpWorkerLoad>,
    /// Connections this process (its segment) may open at once.
    pub connections: u64,
    /// Requests this process will start, when known in advance.
    pub total_requests: Option<u64>,
    /// When the schedule ends, from the run's start (what is in flight then
    /// gets the timeout).
    pub planned_end: Option<Duration>,
}

/// Connections an open-loop worker opens before its schedule starts: about
/// 2 ms of arrivals plus a few, within its cap.
fn warm_connections(rate: f64, cap: u64) -> u64 {
    ((rate * 0.002).ceil() as u64 + 4).min(cap)
}

impl HttpPlan {
    /// This process's segment of the plan divided among `threads` workers:
    /// connections and request budgets split evenly, arrivals striped.
    pub fn worker_loads(&self, threads: u32) -> HttpLoads {
        let threads = threads.max(1);
        let segment = self.segment();
        let connections = segment.share(u64::from(self.connections)).max(1);
        let conns = split_evenly(connections, threads);
        let (budgets, until, total_arrivals) = match (self.load, self.stop) {
            (_, Stop::Requests(n)) => (Some(split_evenly(segment.share(n), threads)), None, n),
            (Load::Closed, Stop::Duration(d)) => (None, Some(d), 0),
            (Load::Open { rate }, Stop::Duration(d)) => (None, None, Arrivals::count_within(rate, d)),
        };
        let my_rate = |rate: f64| rate * segment.width();
        let workers = (0..threads as usize)
            .map(|w| match self.load {
                Load::Closed => HttpWorkerLoad::Closed {
                    connections: conns[w],
                    budget: budgets.as_ref().map(|b| b[w]),
                    until,
                },
                Load::Open { rate } => HttpWorkerLoad::Open {
                    arrivals: Arrivals::segmented(rate, total_arrivals, &segment, w as u64, u64::from(threads)),
                    cap: conns[w],
                    gap: Duration::from_secs_f64(f64::from(threads) / my_rate(rate)),
                    warm: if self.keepalive {
                        warm_connections(my_rate(rate) / f64::from(threads), conns[w])
                    } else {
                        0
                    },
                },
            })
            .collect();
        HttpLoads {
            workers,
            connections,
            total_requests: match self.stop {
                Stop::Requests(n) => Some(segment.share(n)),
                Stop::Duration(_) if self.is_open_loop() => Some(segment.share(total_arrivals)),
                Stop::Duration(_) => None,
            },
            planned_end: match (self.load, self.stop) {
                (Load::Closed, Stop::Duration(d)) => Some(d),
                (Load::Open { rate }, _) => Some(arrival_offset(total_arrivals, rate)),
                _ => None,
            },
        }
    }
}

/// One worker's share of a storm.
#[derive(Clone, Debug)]
pub struct StormWorkerLoad {
    /// When this worker's connections start.
    pub starts: StormStarts,
    /// Connections open or opening at once, at most (`--max-concurrent`'s share).
    pub cap: Option<u64>,
    /// Average gap between this worker's starts.
    pub gap: Duration,
    /// This worker's index among all processes' workers.
    pub worker: u64,
    /// Workers in all processes.
    pub workers: u64,
}

/// A storm's segment divided among one process's workers.
#[derive(Clone, Debug)]
pub struct StormLoads {
    /// One load per worker thread of this process.
    pub workers: Vec<StormWorkerLoad>,
    /// Connections this process opens in all.
    pub connections: u64,
    /// Connections this process may hold at once (for the descriptor check).
    pub peak: u64,
}

impl StormPlan {
    /// Connections open at once at the peak, estimated from the pace, the
    /// hold and the timeout, for the whole storm (every segment).
    pub fn peak_estimate(&self) -> u64 {
        let n = self.connections;
        let per_connection = (self.hold + self.timeout).as_secs_f64();
        let by_pace = match (self.rate, self.jitter) {
            (Some(r), _) => (r * per_connection).ceil() as u64,
            (None, Some(j)) => (n as f64 * (per_connection / j.as_secs_f64()).min(1.0)).ceil() as u64,
            (None, None) => n,
        };
        self.max_concurrent.unwrap_or(n).min(by_pace.max(1)).min(n)
    }

    /// Process `process` of `processes`' share of this storm's segment,
    /// divided among its `self.workers` threads: connections striped over
    /// all processes' workers, the cap split evenly.
    pub fn worker_loads(&self, process: u32, processes: u32) -> StormLoads {
        let workers = u64::from(self.workers.max(1));
        let processes = u64::from(processes.max(1));
        let all_workers = workers * processes;
        // Invariant for the casts below: fewer workers than u32::MAX
        // (threads per process and processes are each a u32 the user gave;
        // their product saturates).
        let all_u32 = u32::try_from(all_workers).unwrap_or(u32::MAX);
        let segment = self.segment();
        let caps = self
            .max_concurrent
            .map(|m| split_evenly(segment.share(m).max(1), all_u32));
        let shares = split_evenly(segment.share(self.connections), all_u32);
        let globals = (0..workers).map(|w| u64::from(process) * workers + w);
        let loads: Vec<StormWorkerLoad> = globals
            .clone()
            .map(|global| {
                let starts = StormStarts::segmented(
                    self.connections,
                    self.rate,
                    self.jitter,
                    &segment,
                    global as u32,
                    all_u32,
                    self.seed,
                );
                let share = starts.remaining().max(1);
                let gap = match (self.rate, self.jitter) {
                    (Some(r), _) => Duration::from_secs_f64(all_workers as f64 / (r * segment.width())),
                    (None, Some(j)) => j / u32::try_from(share).unwrap_or(u32::MAX),
                    (None, None) => Duration::ZERO,
                };
                StormWorkerLoad {
                    starts,
                    // Each worker's share of the cap; at least one.
                    cap: caps
                        .as_ref()
                        .map(|c| c.get(global as usize).copied().unwrap_or(1).max(1)),
                    gap,
                    worker: global,
                    workers: all_workers,
                }
            })
            .collect();
        StormLoads {
            workers: loads,
            connections: globals.map(|g| shares.get(g as usize).copied().unwrap_or(0)).sum(),
            peak: segment.share(self.peak_estimate()).max(1).div_ceil(processes),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::http::HttpArgs;
    use crate::segment::Segment;
    use crate::storm::StormArgs;

    const QUARTERS: &str = "0,1/4,1/2,3/4,1";
    const SEGMENTS: [&str; 4] = ["0:1/4", "1/4:1/2", "1/2:3/4", "3/4:1"];

    fn quarter(i: usize) -> Segment {
        Segment::parse(SEGMENTS[i], Some(QUARTERS)).expect("a valid segment")
    }

    fn http(c: u32, n: Option<u64>, rate: Option<f64>, segment: Option<Segment>) -> HttpPlan {
        HttpPlan::from_args(HttpArgs {
            url: "http://127.0.0.1:8080/".into(),
            connections: Some(c),
            requests: n,
            duration: n.is_none().then(|| Duration::from_secs(3)),
            rate,
            cores: 2,
            segment,
            ..HttpArgs::default()
        })
        .expect("a valid plan")
    }

    fn storm(
        n: u64,
        rate: Option<f64>,
        jitter_ms: Option<u64>,
        cap: Option<u64>,
        workers: u32,
        segment: Option<Segment>,
    ) -> StormPlan {
        StormPlan::from_args(StormArgs {
            target: "tcp://127.0.0.1:9".into(),
            connections: Some(n),
            rate,
            jitter: jitter_ms.map(Duration::from_millis),
            max_concurrent: cap,
            workers: Some(workers),
            cores: 2,
            segment,
            ..StormArgs::default()
        })
        .expect("a valid plan")
    }

    fn spread(v: &[u64]) -> u64 {
        v.iter().max().unwrap_or(&0) - v.iter().min().unwrap_or(&0)
    }

    #[test]
    fn the_descriptor_check_counts_the_segments_connections() {
        // 24000 connections in all; a quarter of them here.
        let p = http(24_000, Some(1_000_000), None, Some(quarter(1)));
        assert_eq!(p.worker_loads(2).connections, 6_000);
        let s = storm(40_000, None, None, None, 2, Some(quarter(2)));
        assert_eq!(s.worker_loads(0, 1).peak, 10_000);
        assert_eq!(s.worker_loads(0, 2).peak, 5_000);
    }

    proptest! {
        /// Closed loop: connections and request budgets add up to the
        /// segment's share, no worker more than one above another, and
        /// the four quarters' requests add up to the plan's.
        #[test]
        fn closed_loop_shares_add_up(c in 4u32..5_000, n in 1u64..100_000, threads in 1u32..9) {
            let mut requests = 0;
            for i in 0..4 {
                let p = http(c, Some(n), None, Some(quarter(i)));
                let loads = p.worker_loads(threads);
                prop_assert_eq!(loads.workers.len(), threads as usize);
                let (mut conns, mut budgets) = (Vec::new(), Vec::new());
                for w in &loads.workers {
                    let HttpWorkerLoad::Closed { connections, budget, until } = w else {
                        panic!("closed: {w:?}")
                    };
                    prop_assert!(until.is_none());
                    conns.push(*connections);
                    budgets.push(budget.expect("-n gives budgets"));
                }
                prop_assert_eq!(conns.iter().sum::<u64>(), loads.connections);
                prop_assert_eq!(loads.connections, p.segment().share(u64::from(p.connections)).max(1));
                prop_assert_eq!(Some(budgets.iter().sum::<u64>()), loads.total_requests);
                prop_assert!(spread(&conns) <= 1 && spread(&budgets) <= 1, "{:?} {:?}", conns, budgets);
                requests += budgets.iter().sum::<u64>();
            }
            prop_assert_eq!(requests, n);
        }

        /// Open loop: the workers' arrivals are the segment's, striped
        /// evenly; the quarters' arrivals are the plan's.
        #[test]
        fn open_loop_arrivals_add_up(rate in 1.0f64..20_000.0, n in 1u64..50_000, threads in 1u32..9) {
            let mut all = 0;
            for i in 0..4 {
                let loads = http(1000, Some(n), Some(rate), Some(quarter(i))).worker_loads(threads);
                let counts: Vec<u64> = loads
                    .workers
                    .iter()
                    .map(|w| match w {
                        HttpWorkerLoad::Open { arrivals, warm, cap, .. } => {
                            assert!(warm <= cap);
                            arrivals.remaining()
                        }
                        HttpWorkerLoad::Closed { .. } => panic!("open: {w:?}"),
                    })
                    .collect();
                prop_assert_eq!(Some(counts.iter().sum::<u64>()), loads.total_requests);
                prop_assert!(spread(&counts) <= 1, "{:?}", counts);
                prop_assert!(loads.planned_end.is_some());
                all += counts.iter().sum::<u64>();
            }
            prop_assert_eq!(all, n);
        }

        /// Storms: every process's workers' starts add up to the segment's
        /// connections, evenly; caps too; the quarters add up to the plan.
        #[test]
        fn storm_shares_add_up(
            n in 4u64..20_000, // each of the four quarters needs a connection
            pace in 0u8..3,
            cap in proptest::option::of(1u64..5_000),
            workers in 1u32..5,
            processes in 1u32..4,
        ) {
            let (rate, jitter) = match pace {
                0 => (None, None),
                1 => (Some(5_000.0), None),
                _ => (None, Some(500)),
            };
            let mut all = 0;
            for i in 0..4 {
                let plan = storm(n, rate, jitter, cap, workers, Some(quarter(i)));
                let mut starts = Vec::new();
                let mut caps = Vec::new();
                let mut total = 0;
                for process in 0..processes {
                    let loads = plan.worker_loads(process, processes);
                    prop_assert_eq!(loads.workers.len(), workers as usize);
                    let mine: Vec<u64> = loads.workers.iter().map(|w| w.starts.remaining()).collect();
                    prop_assert_eq!(mine.iter().sum::<u64>(), loads.connections);
                    total += loads.connections;
                    starts.extend(mine);
                    caps.extend(loads.workers.iter().filter_map(|w| w.cap));
                }
                prop_assert_eq!(total, plan.segment().share(n));
                prop_assert!(spread(&starts) <= 1, "{:?}", starts);
                prop_assert!(spread(&caps) <= 1, "{:?}", caps);
                all += total;
            }
            prop_assert_eq!(all, n);
        }
    }
}
