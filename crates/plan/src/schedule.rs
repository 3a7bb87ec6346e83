//! Open-loop arrival schedules: when each request is meant to start.
//!
//! The global schedule puts arrival `k` at `k / rate` seconds. Worker `w` of
//! `n` takes arrivals `w, w+n, w+2n, …`, so together the workers follow the
//! single schedule exactly, whatever `n` is.

use std::time::Duration;

use crate::segment::Segment;

/// When arrival `index` is due at `rate` per second, from the run's start.
pub fn arrival_offset(index: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(index as f64 / rate)
}

/// Splits `total` into `parts` shares that differ by at most one and add up
/// to `total` exactly (earlier shares get the remainder).
pub fn split_evenly(total: u64, parts: u32) -> Vec<u64> {
    let parts = u64::from(parts.max(1));
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

/// One worker's share of an arrival schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrivals {
    rate: f64,
    /// Next index within the segment's owned arrivals.
    next: u64,
    stride: u64,
    /// Arrivals the segment owns.
    end: u64,
    /// Which global arrivals are this process's (None: all of them).
    segment: Option<Segment>,
}

impl Arrivals {
    /// Worker `worker` of `workers`' share of `total` arrivals at `rate`.
    pub fn new(rate: f64, total: u64, worker: u32, workers: u32) -> Self {
        Self::segmented(rate, total, &Segment::whole(), u64::from(worker), u64::from(workers))
    }

    /// Worker `worker` of `workers`' share of `segment`'s arrivals among
    /// `total` at `rate`: the segment owns a subsequence of the global
    /// schedule (at the global offsets), which the workers stripe.
    pub fn segmented(rate: f64, total: u64, segment: &Segment, worker: u64, workers: u64) -> Self {
        Arrivals {
            rate,
            next: worker,
            stride: workers.max(1),
            end: segment.share(total),
            segment: (!segment.is_whole()).then(|| segment.clone()),
        }
    }

    /// How many arrivals at `rate` fall before `duration` (offsets in
    /// `[0, duration)`).
    pub fn count_within(rate: f64, duration: Duration) -> u64 {
        let mut n = (duration.as_secs_f64() * rate).ceil() as u64;
        // Guard the float edge: arrival n-1 must be strictly before the end.
        while n > 0 && arrival_offset(n - 1, rate) >= duration {
            n -= 1;
        }
        n
    }

    /// The next arrival's offset, without taking it.
    pub fn peek(&self) -> Option<Duration> {
        (self.next < self.end).then(|| arrival_offset(self.global(self.next), self.rate))
    }

    /// The global index of this segment's `m`-th arrival.
    fn global(&self, m: u64) -> u64 {
        self.segment.as_ref().map_or(m, |s| s.nth(m))
    }

    /// Arrivals this share still has to make.
    pub fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.next).div_ceil(self.stride)
    }

    /// Skips this share's arrivals due at or before `t` and returns how many
    /// it skipped, by arithmetic: an engine far behind its schedule counts
    /// the starts it cannot make without generating them one by one.
    pub fn skip_through(&mut self, t: Duration) -> u64 {
        // Global arrivals with offset <= t: indices 0..=floor(t × rate).
        let global = (t.as_secs_f64() * self.rate).floor();
        let below = if global >= u64::MAX as f64 {
            u64::MAX
        } else {
            global as u64 + 1
        };
        // The segment's indices below that, as positions among its own.
        let owned = self.segment.as_ref().map_or(below, |s| s.share(below)).min(self.end);
        if owned <= self.next {
            return 0;
        }
        let n = (owned - self.next).div_ceil(self.stride);
        self.next += n * self.stride;
        n
    }
}

impl Iterator for Arrivals {
    /// (global index, offset from the run's start)
    type Item = (u64, Duration);

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.peek()?;
        let index = self.global(self.next);
        self.next += self.stride;
        Some((index, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn split_adds_up() {
        assert_eq!(split_evenly(10, 3), vec![4, 3, 3]);
        assert_eq!(split_evenly(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split_evenly(7, 0), vec![7]);
    }

    #[test]
    fn count_within_is_exact_at_edges() {
        assert_eq!(Arrivals::count_within(1000.0, Duration::from_secs(10)), 10_000);
        assert_eq!(Arrivals::count_within(3.0, Duration::from_secs(1)), 3);
        assert_eq!(Arrivals::count_within(0.5, Duration::from_secs(3)), 2);
    }

    #[test]
    fn skipping_counts_what_iterating_would_make() {
        let d = Duration::from_millis(1500);
        let mut a = Arrivals::new(1000.0, 10_000, 1, 3);
        let by_hand = Arrivals::new(1000.0, 10_000, 1, 3)
            .take_while(|(_, at)| *at <= d)
            .count() as u64;
        assert_eq!(a.skip_through(d), by_hand);
        assert!(a.peek().is_some_and(|at| at > d));
        assert_eq!(a.skip_through(d), 0, "nothing twice");
        // Far past the end: the rest, and no more.
        let left = a.remaining();
        assert_eq!(a.skip_through(Duration::from_secs(1_000_000)), left);
        assert_eq!(a.peek(), None);
        // An absurd rate costs nothing to skip.
        let mut fast = Arrivals::new(1e8, 1_000_000_000, 0, 1);
        assert_eq!(fast.skip_through(Duration::from_secs(3)), 300_000_001);
    }

    proptest! {
        /// Skipping to any instant leaves exactly the arrivals after it,
        /// in a segment striped over workers too.
        #[test]
        fn skip_through_agrees_with_iteration(
            rate in 0.1f64..100_000.0,
            total in 0u64..3_000,
            workers in 1u64..5,
            worker in 0u64..5,
            to in 1u64..4,
            ms in 0u64..40_000,
        ) {
            let worker = worker % workers;
            let seg = Segment::parse(&format!("0:{to}/4"), None).expect("valid");
            let t = Duration::from_millis(ms);
            let all: Vec<_> = Arrivals::segmented(rate, total, &seg, worker, workers).collect();
            let mut a = Arrivals::segmented(rate, total, &seg, worker, workers);
            let n = a.skip_through(t) as usize;
            // Float edges may put an arrival due exactly at t on either side.
            let due = all.iter().filter(|(_, at)| *at <= t).count();
            prop_assert!(n.abs_diff(due) <= 1, "skipped {} of {} due", n, due);
            let rest: Vec<_> = a.collect();
            prop_assert_eq!(&rest[..], &all[n..]);
        }

        /// Workers' shares partition the global schedule: every index once,
        /// at its global offset, in increasing time within each share.
        #[test]
        fn shares_partition_the_schedule(rate in 0.1f64..100_000.0, total in 0u64..5_000, workers in 1u32..9) {
            let mut seen = vec![false; total as usize];
            for w in 0..workers {
                let share = Arrivals::new(rate, total, w, workers);
                let expected = share.remaining();
                let mut last = None;
                let mut n = 0;
                for (i, at) in share {
                    prop_assert!(!seen[i as usize]);
                    seen[i as usize] = true;
                    prop_assert_eq!(at, arrival_offset(i, rate));
                    prop_assert!(last.is_none_or(|l| l <= at));
                    last = Some(at);
                    n += 1;
                }
                prop_assert_eq!(n, expected);
            }
            prop_assert!(seen.into_iter().all(|s| s));
        }

        /// Segments × workers partition the global schedule too: each
        /// arrival is made once, by one worker of one segment, at its
        /// global offset.
        #[test]
        fn segments_partition_the_schedule(
            rate in 0.1f64..100_000.0,
            total in 0u64..3_000,
            workers in 1u64..5,
            den in 1u64..40,
            cuts in proptest::collection::vec(1u64..40, 0..6),
        ) {
            let mut points: Vec<u64> = cuts.into_iter().filter(|c| *c < den).collect();
            points.extend([0, den]);
            points.sort_unstable();
            points.dedup();
            let seq = points.iter().map(|p| format!("{p}/{den}")).collect::<Vec<_>>().join(",");
            let first = Segment::parse(&format!("0:{}/{den}", points[1]), Some(&seq)).expect("valid");
            let mut seen = vec![false; total as usize];
            for seg in first.siblings() {
                for w in 0..workers {
                    let share = Arrivals::segmented(rate, total, &seg, w, workers);
                    let expected = share.remaining();
                    let mut n = 0;
                    for (i, at) in share {
                        prop_assert!(seg.owns(i));
                        prop_assert!(!seen[i as usize], "arrival {} made twice", i);
                        seen[i as usize] = true;
                        prop_assert_eq!(at, arrival_offset(i, rate));
                        n += 1;
                    }
                    prop_assert_eq!(n, expected);
                }
            }
            prop_assert!(seen.into_iter().all(|s| s), "an arrival was not made");
        }
    }
}

/// A small, fast, seedable generator (SplitMix64): jitter needs
/// reproducibility (`--seed`), not cryptographic strength.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` (`n` > 0), by Lemire's multiply-shift (the
    /// bias is below 2^-32 for the sample sizes throng draws).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// When one worker's storm connections start, in nondecreasing order.
///
/// Connection `i` of the storm belongs to worker `i % workers`. Its start is
/// `i / rate` with a rate, plus a uniform random wait in `[0, jitter)` with
/// a jitter (seed 000's "each client starts after a random 0–2 s wait"), or
/// 0 with neither. Jitter alone is generated in order without storing the
/// starts (order statistics of uniforms), so a million-connection storm
/// costs no memory for its schedule.
#[derive(Clone, Debug)]
pub enum StormStarts {
    /// `i / rate`, striped.
    Rate(Arrivals),
    /// Sorted uniforms on `[0, jitter)`, generated ascending.
    Jitter {
        /// Starts left to make.
        left: u64,
        /// The last start, as a fraction of the jitter.
        last: f64,
        /// The jitter window.
        jitter: Duration,
        /// Randomness.
        rng: Rng,
    },
    /// Rate and jitter together: precomputed and sorted (descending, popped).
    Sorted(Vec<Duration>),
    /// All at once.
    Now(u64),
}

impl StormStarts {
    /// Worker `worker` of `workers`' share of `total` connections.
    pub fn new(total: u64, rate: Option<f64>, jitter: Option<Duration>, worker: u32, workers: u32, seed: u64) -> Self {
        Self::segmented(total, rate, jitter, &Segment::whole(), worker, workers, seed)
    }

    /// Worker `worker` of `workers`' share of `segment`'s connections among
    /// `total`: with a rate, the segment's connections are its owned
    /// subsequence of the global schedule; with jitter alone, its share of
    /// uniform starts (seeded apart per segment).
    pub fn segmented(
        total: u64,
        rate: Option<f64>,
        jitter: Option<Duration>,
        segment: &Segment,
        worker: u32,
        workers: u32,
        seed: u64,
    ) -> Self {
        let mine = segment.share(total);
        let share = split_evenly(mine, workers).get(worker as usize).copied().unwrap_or(0);
        let seed = seed ^ (segment.index() as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        let mut rng = Rng::new(seed ^ (u64::from(worker) + 1).wrapping_mul(0xA24B_AED4_963E_E407));
        let arrivals = |r| Arrivals::segmented(r, total, segment, u64::from(worker), u64::from(workers));
        match (rate, jitter) {
            (Some(r), None) => StormStarts::Rate(arrivals(r)),
            (None, Some(j)) => StormStarts::Jitter {
                left: share,
                last: 0.0,
                jitter: j,
                rng,
            },
            (Some(r), Some(j)) => {
                let mut v: Vec<Duration> = arrivals(r).map(|(_, at)| at + j.mul_f64(rng.next_f64())).collect();
                v.sort_unstable_by(|a, b| b.cmp(a));
                StormStarts::Sorted(v)
            }
            (None, None) => StormStarts::Now(share),
        }
    }

    /// Starts left.
    pub fn remaining(&self) -> u64 {
        match self {
            StormStarts::Rate(a) => a.remaining(),
            StormStarts::Jitter { left, .. } => *left,
            StormStarts::Sorted(v) => v.len() as u64,
            StormStarts::Now(n) => *n,
        }
    }
}

impl Iterator for StormStarts {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        match self {
            StormStarts::Rate(a) => a.next().map(|(_, at)| at),
            StormStarts::Jitter {
                left,
                last,
                jitter,
                rng,
            } => {
                if *left == 0 {
                    return None;
                }
                // The smallest of `left` uniforms on [last, 1).
                let v = rng.next_f64();
                *last += (1.0 - *last) * (1.0 - (1.0 - v).powf(1.0 / *left as f64));
                *left -= 1;
                Some(jitter.mul_f64(last.clamp(0.0, 1.0)))
            }
            StormStarts::Sorted(v) => v.pop(),
            StormStarts::Now(n) => {
                if *n == 0 {
                    return None;
                }
                *n -= 1;
                Some(Duration::ZERO)
            }
        }
    }
}

#[cfg(test)]
mod storm_tests {
    use super::*;

    #[test]
    fn jitter_starts_are_sorted_uniform_and_complete() {
        let j = Duration::from_secs(2);
        let starts: Vec<Duration> = StormStarts::new(20_000, None, Some(j), 0, 1, 7).collect();
        assert_eq!(starts.len(), 20_000);
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
        assert!(starts.iter().all(|s| *s < j));
        // Uniform: each quarter of the window holds about a quarter.
        for q in 0..4 {
            let lo = j.mul_f64(q as f64 / 4.0);
            let hi = j.mul_f64((q + 1) as f64 / 4.0);
            let n = starts.iter().filter(|s| **s >= lo && **s < hi).count();
            assert!((4_500..=5_500).contains(&n), "quarter {q}: {n}");
        }
    }

    #[test]
    fn shares_add_up_in_every_mode() {
        let modes = [
            (Some(100.0), None),
            (None, Some(Duration::from_secs(1))),
            (Some(100.0), Some(Duration::from_millis(50))),
            (None, None),
        ];
        for (rate, jitter) in modes {
            let total: u64 = (0..3)
                .map(|w| StormStarts::new(1001, rate, jitter, w, 3, 1).count() as u64)
                .sum();
            assert_eq!(total, 1001, "{rate:?} {jitter:?}");
            for w in 0..3 {
                let s: Vec<_> = StormStarts::new(1001, rate, jitter, w, 3, 1).collect();
                assert!(s.windows(2).all(|p| p[0] <= p[1]));
            }
        }
    }
}
