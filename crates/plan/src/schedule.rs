//! Open-loop arrival schedules: when each request is meant to start.
//!
//! The global schedule puts arrival `k` at `k / rate` seconds. Worker `w` of
//! `n` takes arrivals `w, w+n, w+2n, …`, so together the workers follow the
//! single schedule exactly, whatever `n` is.

use std::time::Duration;

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
    next: u64,
    stride: u64,
    end: u64,
}

impl Arrivals {
    /// Worker `worker` of `workers`' share of `total` arrivals at `rate`.
    pub fn new(rate: f64, total: u64, worker: u32, workers: u32) -> Self {
        Arrivals {
            rate,
            next: u64::from(worker),
            stride: u64::from(workers.max(1)),
            end: total,
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
        (self.next < self.end).then(|| arrival_offset(self.next, self.rate))
    }

    /// Arrivals this share still has to make.
    pub fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.next).div_ceil(self.stride)
    }
}

impl Iterator for Arrivals {
    /// (global index, offset from the run's start)
    type Item = (u64, Duration);

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.peek()?;
        let index = self.next;
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

    proptest! {
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
    }
}
