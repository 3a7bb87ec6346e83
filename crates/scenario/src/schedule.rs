//! When executors start iterations: VUs over time for the closed models,
//! iteration start times for the open ones. Pure functions of the plan, so
//! every worker computes the same schedule and takes its share.

use std::time::Duration;

use throng_plan::Segment;

use crate::spec::{Executor, Stage};

/// The share of `total` that worker `worker` of `workers` takes: VU ids and
/// arrivals are dealt round-robin, so worker `w` owns global index `i` when
/// `i % workers == w`.
pub fn share(total: u64, worker: u32, workers: u32) -> u64 {
    let (w, n) = (u64::from(worker), u64::from(workers.max(1)));
    total / n + u64::from(w < total % n)
}

/// Execution segments: a segment owns VU index `i` and arrival `k` of the
/// whole scenario as [`Segment::owns`] says, so its VUs at any moment are
/// its owned indices below the whole target, and its arrivals the owned
/// subsequence of the whole schedule; the process's workers then deal
/// those round-robin.
impl Executor {
    /// VUs `segment` should have `t` after the start (closed models).
    pub fn segment_vus_at(&self, t: Duration, segment: &Segment) -> u64 {
        segment.share(self.vus_at(t))
    }

    /// `segment`'s share of `shared-iterations`' iterations (None for the
    /// other executors: per-vu-iterations gives each owned VU all of them).
    pub fn segment_iterations(&self, segment: &Segment) -> Option<u64> {
        match self {
            Executor::SharedIterations { iterations, .. } => Some(segment.share(*iterations)),
            _ => None,
        }
    }

    /// `segment`'s share of the open models' `(pre_allocated_vus,
    /// max_vus)`; at least one VU at most when the segment owns arrivals.
    pub fn segment_open_vus(&self, segment: &Segment) -> (u64, u64) {
        let (pre, max) = match self {
            Executor::ConstantArrivalRate {
                pre_allocated_vus,
                max_vus,
                ..
            }
            | Executor::RampingArrivalRate {
                pre_allocated_vus,
                max_vus,
                ..
            } => (*pre_allocated_vus, *max_vus),
            _ => (1, 1),
        };
        (segment.share(pre), segment.share(max).max(1))
    }
}

/// Worker `worker` of `workers`' arrivals of `segment` on `curve`: the
/// segment's `m`-th arrival (m = worker, worker + workers, …) is the whole
/// schedule's arrival `segment.nth(m)`. Yields (global index, offset).
pub fn segment_arrivals<'a>(
    curve: &'a ArrivalCurve,
    segment: &'a Segment,
    worker: u32,
    workers: u32,
) -> SegmentArrivals<'a> {
    SegmentArrivals {
        curve,
        segment,
        next: u64::from(worker),
        stride: u64::from(workers.max(1)),
        end: segment.share(curve.count()),
    }
}

/// One worker's arrivals of a segment (see [`segment_arrivals`]).
#[derive(Clone, Debug)]
pub struct SegmentArrivals<'a> {
    curve: &'a ArrivalCurve,
    segment: &'a Segment,
    /// The next of the segment's own arrivals to make.
    next: u64,
    stride: u64,
    /// The segment's arrivals in all.
    end: u64,
}

impl SegmentArrivals<'_> {
    /// The next arrival (global index, offset), without taking it.
    pub fn peek(&self) -> Option<(u64, Duration)> {
        if self.next >= self.end {
            return None;
        }
        let k = self.segment.nth(self.next);
        self.curve.offset(k).map(|at| (k, at))
    }

    /// Skips the arrivals due at or before `t` and returns how many, by
    /// arithmetic: a schedule far beyond what the VUs can take is counted,
    /// not walked.
    pub fn skip_through(&mut self, t: Duration) -> u64 {
        let owned = self.segment.share(self.curve.count_through(t)).min(self.end);
        if owned <= self.next {
            return 0;
        }
        let n = (owned - self.next).div_ceil(self.stride);
        self.next += n * self.stride;
        n
    }
}

impl Iterator for SegmentArrivals<'_> {
    type Item = (u64, Duration);

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.peek();
        self.next = match item {
            Some(_) => self.next + self.stride,
            None => self.end,
        };
        item
    }
}

/// A value that moves linearly through stages from `start`.
fn along(start: f64, stages: &[Stage], t: Duration) -> Option<f64> {
    let mut from = start;
    let mut at = Duration::ZERO;
    for s in stages {
        if t < at + s.duration {
            let into = (t - at).as_secs_f64() / s.duration.as_secs_f64();
            return Some(from + (s.target - from) * into);
        }
        at += s.duration;
        from = s.target;
    }
    None
}

impl Executor {
    /// VUs the whole scenario should have `t` after its start (closed
    /// models; 0 once the schedule ended). Ramps round down, so a ramp from
    /// 0 to 10 over 10 s adds a VU every second.
    pub fn vus_at(&self, t: Duration) -> u64 {
        match self {
            Executor::ConstantVus { vus, duration } => {
                if t < *duration {
                    *vus
                } else {
                    0
                }
            }
            Executor::RampingVus { start_vus, stages, .. } => {
                along(*start_vus as f64, stages, t).map_or(0, |v| (v + 1e-9).floor().max(0.0) as u64)
            }
            Executor::PerVuIterations { vus, max_duration, .. }
            | Executor::SharedIterations { vus, max_duration, .. } => {
                if t < *max_duration {
                    *vus
                } else {
                    0
                }
            }
            Executor::ConstantArrivalRate { .. } | Executor::RampingArrivalRate { .. } => 0,
        }
    }

    /// The most VUs the scenario can have at once (each may hold a connection).
    pub fn max_vus(&self) -> u64 {
        match self {
            Executor::ConstantVus { vus, .. }
            | Executor::PerVuIterations { vus, .. }
            | Executor::SharedIterations { vus, .. } => *vus,
            Executor::RampingVus { start_vus, stages, .. } => {
                stages.iter().map(|s| s.target.ceil() as u64).fold(*start_vus, u64::max)
            }
            Executor::ConstantArrivalRate { max_vus, .. } | Executor::RampingArrivalRate { max_vus, .. } => *max_vus,
        }
    }

    /// The arrival schedule of an open-model executor (None for the closed ones).
    pub fn arrivals(&self) -> Option<ArrivalCurve> {
        match self {
            Executor::ConstantArrivalRate {
                rate,
                time_unit,
                duration,
                ..
            } => {
                let r = rate / time_unit.as_secs_f64();
                Some(ArrivalCurve::new(r, &[(*duration, r)]))
            }
            Executor::RampingArrivalRate {
                start_rate,
                time_unit,
                stages,
                ..
            } => {
                let per_s = |v: f64| v / time_unit.as_secs_f64();
                let segments: Vec<(Duration, f64)> = stages.iter().map(|s| (s.duration, per_s(s.target))).collect();
                Some(ArrivalCurve::new(per_s(*start_rate), &segments))
            }
            _ => None,
        }
    }
}

/// Iteration start times under a piecewise-linear rate: arrival `k` (from
/// 0) starts when the rate's integral reaches `k`. Exact for any ramp, so
/// workers that each take every n-th arrival together follow the plan.
#[derive(Clone, Debug)]
pub struct ArrivalCurve {
    /// (start offset, length, rate at start, rate at end, arrivals before it), rates per second.
    segments: Vec<(f64, f64, f64, f64, f64)>,
    total: f64,
}

impl ArrivalCurve {
    /// A curve starting at `start` per second, then moving linearly to each
    /// segment's rate over its duration.
    pub fn new(start: f64, segments: &[(Duration, f64)]) -> Self {
        let mut out = Vec::new();
        let (mut at, mut from, mut before) = (0.0, start.max(0.0), 0.0);
        for (d, to) in segments {
            let len = d.as_secs_f64();
            let to = to.max(0.0);
            out.push((at, len, from, to, before));
            before += (from + to) / 2.0 * len;
            at += len;
            from = to;
        }
        ArrivalCurve {
            segments: out,
            total: before,
        }
    }

    /// Arrivals in the whole schedule (a fractional last one does not start).
    pub fn count(&self) -> u64 {
        // Arrival k starts when the integral reaches k, k = 0, 1, ...: those
        // with k strictly below the total fit (k = 0 only if any rate at all).
        // The margin absorbs float error in the total; relative, because
        // above ~1e7 subtracting 1e-9 changes nothing (and 1e8 a second for
        // 1 s would count one arrival that never comes).
        if self.total <= 0.0 {
            0
        } else {
            (self.total - (self.total * 1e-12).max(1e-9)).floor() as u64 + 1
        }
    }

    /// How many arrivals start at or before `t` (arrival `k` starts when
    /// the rate's integral reaches `k`).
    pub fn count_through(&self, t: Duration) -> u64 {
        if self.total <= 0.0 {
            return 0;
        }
        let t = t.as_secs_f64();
        let mut integral = self.total;
        for &(at, len, r0, r1, before) in &self.segments {
            if t < at + len {
                let x = (t - at).max(0.0);
                integral = before + r0 * x + (r1 - r0) * x * x / (2.0 * len);
                break;
            }
        }
        let through = integral.max(0.0).floor();
        if through >= u64::MAX as f64 {
            self.count()
        } else {
            (through as u64 + 1).min(self.count())
        }
    }

    /// When arrival `k` starts, from the schedule's start; None past its end.
    pub fn offset(&self, k: u64) -> Option<Duration> {
        let n = k as f64;
        if n >= self.total && !(k == 0 && self.total > 0.0) {
            return None;
        }
        for &(at, len, r0, r1, before) in &self.segments {
            let here = (r0 + r1) / 2.0 * len;
            if n > before + here || (here <= 0.0 && n >= before) {
                continue;
            }
            let m = n - before;
            // r0·t + (r1 − r0)·t² / (2·len) = m
            let a = (r1 - r0) / (2.0 * len);
            let t = if a.abs() < 1e-12 {
                if r0 <= 0.0 {
                    continue;
                }
                m / r0
            } else {
                let disc = (r0 * r0 + 4.0 * a * m).max(0.0);
                (-r0 + disc.sqrt()) / (2.0 * a)
            };
            return Some(Duration::from_secs_f64(at + t.clamp(0.0, len)));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every segment of a random sequence of `den`ths.
    fn segments(den: u64, cuts: Vec<u64>) -> Vec<Segment> {
        let mut points: Vec<u64> = cuts.into_iter().filter(|c| *c < den).collect();
        points.extend([0, den]);
        points.sort_unstable();
        points.dedup();
        let seq = points
            .iter()
            .map(|p| format!("{p}/{den}"))
            .collect::<Vec<_>>()
            .join(",");
        Segment::parse(&format!("0:{}/{den}", points[1]), Some(&seq))
            .expect("a valid sequence")
            .siblings()
    }

    proptest! {
        /// Segments' VUs add up to the whole target at every moment of a
        /// random ramp; shared iterations and open-model VU counts add up.
        #[test]
        fn segment_vus_and_iterations_add_up(
            start_vus in 0u64..50,
            targets in proptest::collection::vec((1u64..20, 0u64..200), 1..4),
            iterations in 0u64..10_000,
            den in 1u64..30,
            cuts in proptest::collection::vec(1u64..30, 0..6),
        ) {
            let segs = segments(den, cuts);
            let e = Executor::RampingVus {
                start_vus,
                stages: targets.iter().map(|&(s, t)| stage(s, t as f64)).collect(),
                graceful_ramp_down: Duration::ZERO,
            };
            let len: u64 = targets.iter().map(|t| t.0).sum::<u64>() * 1000;
            for ms in (0..=len).step_by(250) {
                let t = Duration::from_millis(ms);
                prop_assert_eq!(segs.iter().map(|s| e.segment_vus_at(t, s)).sum::<u64>(), e.vus_at(t));
            }
            let shared = Executor::SharedIterations { vus: 7, iterations, max_duration: Duration::from_secs(1) };
            let sum: u64 = segs.iter().map(|s| shared.segment_iterations(s).unwrap_or(0)).sum();
            prop_assert_eq!(sum, iterations);
        }

        /// Segments × workers make every arrival of a random ramp exactly
        /// once, at the whole schedule's offset.
        #[test]
        fn segment_arrivals_partition_the_curve(
            start in 0u64..100,
            targets in proptest::collection::vec((1u64..5, 0u64..300), 1..4),
            workers in 1u32..4,
            den in 1u64..30,
            cuts in proptest::collection::vec(1u64..30, 0..6),
        ) {
            let stages: Vec<(Duration, f64)> =
                targets.iter().map(|&(s, r)| (Duration::from_secs(s), r as f64)).collect();
            let curve = ArrivalCurve::new(start as f64, &stages);
            let mut seen = vec![false; curve.count() as usize];
            for seg in segments(den, cuts) {
                for w in 0..workers {
                    for (k, at) in segment_arrivals(&curve, &seg, w, workers) {
                        prop_assert!(!seen[k as usize], "arrival {} twice", k);
                        seen[k as usize] = true;
                        prop_assert_eq!(Some(at), curve.offset(k));
                    }
                }
            }
            prop_assert!(seen.iter().all(|s| *s), "an arrival was not made");
        }
    }

    proptest! {
        /// Skipping to any instant leaves exactly the arrivals after it (to
        /// a float edge of one), on a random ramp, per worker and segment.
        #[test]
        fn skip_through_agrees_with_iteration(
            start in 0u64..100,
            targets in proptest::collection::vec((1u64..5, 0u64..300), 1..4),
            workers in 1u32..4,
            worker in 0u32..4,
            to in 1u64..4,
            ms in 0u64..20_000,
        ) {
            let worker = worker % workers;
            let stages: Vec<(Duration, f64)> =
                targets.iter().map(|&(s, r)| (Duration::from_secs(s), r as f64)).collect();
            let curve = ArrivalCurve::new(start as f64, &stages);
            let seg = Segment::parse(&format!("0:{to}/4"), None).expect("valid");
            let t = Duration::from_millis(ms);
            let all: Vec<_> = segment_arrivals(&curve, &seg, worker, workers).collect();
            let mut a = segment_arrivals(&curve, &seg, worker, workers);
            let n = a.skip_through(t) as usize;
            let due = all.iter().filter(|(_, at)| *at <= t).count();
            prop_assert!(n.abs_diff(due) <= 1, "skipped {} of {} due", n, due);
            let rest: Vec<_> = a.collect();
            prop_assert_eq!(&rest[..], &all[n..]);
        }
    }

    #[test]
    fn an_absurd_rate_is_skipped_by_arithmetic() {
        let c = ArrivalCurve::new(1e15, &[(Duration::from_secs(1), 1e15)]);
        let whole = Segment::whole();
        let mut a = segment_arrivals(&c, &whole, 0, 2);
        let n = a.skip_through(Duration::from_millis(500));
        assert!((n as f64 - 0.25e15).abs() < 1e6, "{n}");
        assert!(a.peek().is_some_and(|(_, at)| at >= Duration::from_millis(499)));
        let left = a.skip_through(Duration::from_secs(2));
        assert_eq!(n + left, share(c.count(), 0, 2));
        assert_eq!(a.next(), None);
    }

    fn stage(secs: u64, target: f64) -> Stage {
        Stage {
            duration: Duration::from_secs(secs),
            target,
        }
    }

    #[test]
    fn shares_add_up_and_deal_round_robin() {
        for total in 0..20 {
            for workers in 1..5 {
                let sum: u64 = (0..workers).map(|w| share(total, w, workers)).sum();
                assert_eq!(sum, total);
                // Worker w owns global indices w, w + n, ...: as many as share says.
                for w in 0..workers {
                    let owned = (0..total).filter(|i| i % u64::from(workers) == u64::from(w)).count() as u64;
                    assert_eq!(owned, share(total, w, workers));
                }
            }
        }
    }

    #[test]
    fn ramping_vus_follow_the_stages() {
        let e = Executor::RampingVus {
            start_vus: 0,
            stages: vec![stage(10, 10.0), stage(10, 10.0), stage(5, 0.0)],
            graceful_ramp_down: Duration::from_secs(30),
        };
        let at = |ms: u64| e.vus_at(Duration::from_millis(ms));
        assert_eq!(at(0), 0);
        assert_eq!(at(999), 0);
        assert_eq!(at(1000), 1);
        assert_eq!(at(5500), 5);
        assert_eq!(at(10_000), 10);
        assert_eq!(at(19_999), 10);
        assert_eq!(at(22_500), 5);
        assert_eq!(at(25_000), 0);
        assert_eq!(e.max_vus(), 10);
    }

    #[test]
    fn constant_arrivals_are_evenly_spaced() {
        let e = Executor::ConstantArrivalRate {
            rate: 20.0,
            time_unit: Duration::from_secs(2),
            duration: Duration::from_secs(3),
            pre_allocated_vus: 1,
            max_vus: 1,
        };
        let c = e.arrivals().unwrap();
        assert_eq!(c.count(), 30);
        assert_eq!(c.offset(0), Some(Duration::ZERO));
        assert_eq!(c.offset(10), Some(Duration::from_secs(1)));
        assert!(c.offset(29).is_some());
        assert_eq!(c.offset(30), None);
    }

    #[test]
    fn ramping_arrivals_integrate_the_rate() {
        // 0 → 10/s over 10 s: 50 arrivals; arrival k at sqrt(2k) seconds.
        let c = ArrivalCurve::new(0.0, &[(Duration::from_secs(10), 10.0), (Duration::from_secs(10), 0.0)]);
        assert_eq!(c.count(), 100);
        for k in [0u64, 1, 8, 32, 49] {
            let t = c.offset(k).unwrap().as_secs_f64();
            assert!((t - (2.0 * k as f64).sqrt()).abs() < 1e-6, "arrival {k} at {t}");
        }
        // The ramp down mirrors the ramp up.
        let up = c.offset(10).unwrap().as_secs_f64();
        let down = c.offset(90).unwrap().as_secs_f64();
        assert!((up + down - 20.0).abs() < 0.5, "{up} {down}");
        let mut last = Duration::ZERO;
        for k in 0..c.count() {
            let t = c.offset(k).unwrap();
            assert!(t >= last);
            last = t;
        }
        assert_eq!(c.offset(100), None);
        // Large totals count exactly too: 1e8 a second for 1 s.
        let fast = ArrivalCurve::new(1e8, &[(Duration::from_secs(1), 1e8)]);
        assert_eq!(fast.count(), 100_000_000);
        assert!(fast.offset(fast.count() - 1).is_some());
        assert_eq!(fast.offset(fast.count()), None);
        // A pause (rate 0) between two ramps is skipped over.
        let gap = ArrivalCurve::new(
            5.0,
            &[
                (Duration::from_secs(2), 5.0),
                (Duration::from_secs(3), 0.0),
                (Duration::from_secs(1), 0.0),
            ],
        );
        assert_eq!(gap.count(), 18);
        assert!(gap.offset(17).unwrap() < Duration::from_secs(5));
    }
}
