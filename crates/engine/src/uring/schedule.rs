//! The open loop's starts on the ring, counted as the epoll open loop
//! (crate::open) counts them: arrivals due become starts in a queue that
//! holds at most one per connection (past that, the arrivals due are
//! `dropped`, by arithmetic), free slots take them first in, first out,
//! and a start that waited longer than the timeout is `dropped` instead
//! of sent. Every start sent records its lateness as `schedule_lag`.
//!
//! No I/O here: the ring loop asks when the next start is due (its wait
//! wakes for it) and which slot takes the next queued start. A dense
//! schedule (starts under a millisecond apart) starts on a 200 µs grid, as
//! the epoll loop's pacer ticks, however often the loop wakes: what fell
//! due between two ticks starts together at the second, at most a tick late (fewer wake-ups; on HTTP/2, one send for
//! several streams' HEADERS).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use throng_metrics::{Phase, Recorder};
use throng_plan::Arrivals;

use crate::open::Growth;
use crate::pacer::{DENSE_GAP, DENSE_TICK};

/// What starts a loop's next request.
pub(super) enum Starts {
    /// The closed loop: at once, while the budget (None: until stopped)
    /// lasts.
    Budget(Option<u64>),
    /// The open loop: a start on the schedule, when one is due.
    Schedule(Schedule),
}

impl Starts {
    /// When the next request starts (latency's origin): now while the
    /// closed loop's budget lasts, or the open loop's next queued start
    /// (its lateness recorded). None: the budget is spent, or no start is
    /// queued.
    pub(super) fn take(&mut self, now: Instant, timeout: Duration, rec: &mut Recorder) -> Option<Instant> {
        match self {
            Starts::Budget(None) => Some(now),
            Starts::Budget(Some(0)) => None,
            Starts::Budget(Some(n)) => {
                *n -= 1;
                Some(now)
            }
            Starts::Schedule(s) => s.take(now, timeout, rec),
        }
    }

    /// How long until an open loop's next start is due (None: a closed
    /// loop, or nothing more to start): a loop's wait ends by then.
    pub(super) fn due_in(&self) -> Option<Duration> {
        match self {
            Starts::Schedule(s) => s.next_due().map(|d| d.saturating_duration_since(Instant::now())),
            Starts::Budget(_) => None,
        }
    }
}

/// One worker's schedule on the ring.
pub(super) struct Schedule {
    arrivals: Arrivals,
    origin: Instant,
    /// Slots (connections) the loop may use, at most.
    cap: usize,
    /// Starts due and not yet taken.
    queue: VecDeque<Instant>,
    /// Slots with no request, most recently freed last: the next start
    /// goes to the connection that finished last, as the epoll loop's
    /// idle pool does, so a few hot connections carry a steady load.
    idle: Vec<usize>,
    growth: Growth,
    /// After dropping, look again no sooner than this: the slots need
    /// time to take what is queued (as the epoll dispatcher).
    not_before: Instant,
    stopped: bool,
    /// Wakes on the DENSE_TICK grid from the origin.
    dense: bool,
}

impl Schedule {
    /// `arrivals` from `origin`, `gap` apart on average, on at most `cap`
    /// slots.
    pub(super) fn new(arrivals: Arrivals, origin: Instant, cap: usize, gap: Duration) -> Self {
        Schedule {
            arrivals,
            origin,
            cap: cap.max(1),
            queue: VecDeque::new(),
            idle: Vec::new(),
            growth: Growth::new(origin),
            not_before: origin,
            stopped: false,
            dense: gap < DENSE_GAP,
        }
    }

    /// Queues the arrivals due by `now`; when the queue holds one start
    /// per slot, every arrival due by now is `dropped` at once.
    pub(super) fn dispatch(&mut self, now: Instant, rec: &mut Recorder) {
        if self.stopped {
            return;
        }
        // A dense schedule's starts go at its ticks, whenever the loop wakes.
        let now = if self.dense { self.tick_at_or_before(now) } else { now };
        while let Some(offset) = self.arrivals.peek() {
            let due = self.origin + offset;
            if due.max(self.not_before) > now {
                break;
            }
            self.arrivals.next();
            if self.queue.len() >= self.cap {
                let n = 1 + self.arrivals.skip_through(now.saturating_duration_since(self.origin));
                rec.dropped_many(now, n);
                self.not_before = now + DENSE_TICK;
                continue;
            }
            self.queue.push_back(due);
        }
    }

    /// The intended start of the next queued start a free slot takes at
    /// `now` (its lateness recorded); starts that waited past `timeout`
    /// are `dropped`, never sent. None: nothing queued.
    pub(super) fn take(&mut self, now: Instant, timeout: Duration, rec: &mut Recorder) -> Option<Instant> {
        while let Some(intended) = self.queue.pop_front() {
            let lag = now.saturating_duration_since(intended);
            if lag > timeout {
                rec.dropped(now);
                continue;
            }
            rec.phase(now, Phase::ScheduleLag, lag);
            return Some(intended);
        }
        None
    }

    /// When the loop must wake for the next arrival (None: the schedule
    /// ended or stopped).
    pub(super) fn next_due(&self) -> Option<Instant> {
        if self.stopped {
            return None;
        }
        let due = self.arrivals.peek().map(|o| (self.origin + o).max(self.not_before))?;
        if !self.dense {
            return Some(due);
        }
        // The first tick at or after it.
        let tick = DENSE_TICK.as_nanos();
        let ticks = due.saturating_duration_since(self.origin).as_nanos().div_ceil(tick);
        Some(self.origin + nanos(ticks.saturating_mul(tick)))
    }

    /// The last tick of the grid at or before `now` (the origin before it).
    fn tick_at_or_before(&self, now: Instant) -> Instant {
        let tick = DENSE_TICK.as_nanos();
        let ticks = now.saturating_duration_since(self.origin).as_nanos() / tick;
        self.origin + nanos(ticks.saturating_mul(tick))
    }

    /// Starts are queued, waiting for a slot.
    pub(super) fn waiting(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Slot `i` has no request and none is queued.
    pub(super) fn idle(&mut self, i: usize) {
        self.idle.push(i);
    }

    /// The slot that went idle last.
    pub(super) fn pop_idle(&mut self) -> Option<usize> {
        self.idle.pop()
    }

    /// With `slots` in use and none free, whether one more may connect
    /// now (the cap, and the epoll loop's limit on connections opened in a
    /// burst).
    pub(super) fn may_grow(&mut self, slots: usize, now: Instant) -> bool {
        slots < self.cap && self.growth.allow(now)
    }

    /// Nothing more will start: the schedule ended (or stopped) and no
    /// start waits.
    pub(super) fn finished(&self) -> bool {
        self.queue.is_empty() && (self.stopped || self.arrivals.peek().is_none())
    }

    /// The run stops: no more arrivals; the starts still queued were never
    /// sent (`dropped`, as the epoll loop counts them).
    pub(super) fn stop(&mut self, now: Instant, rec: &mut Recorder) {
        self.stopped = true;
        let queued = self.queue.len() as u64;
        self.queue.clear();
        if queued > 0 {
            rec.dropped_many(now, queued);
        }
    }
}

/// `n` nanoseconds (saturating: a run lasts less than 584 years).
fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn arrivals_due_queue_and_wake_the_loop_at_the_next() {
        let origin = Instant::now();
        let mut rec = Recorder::new(origin);
        // 1,000 per second: one every millisecond, 10 in all.
        let mut s = Schedule::new(Arrivals::new(1000.0, 10, 0, 1), origin, 100, ms(1));
        assert_eq!(s.next_due(), Some(origin));
        s.dispatch(origin + Duration::from_micros(2500), &mut rec);
        assert!(s.waiting());
        assert_eq!(s.next_due(), Some(origin + ms(3)), "the loop wakes for the fourth");
        // Taken first in, first out, each with its lateness.
        let now = origin + ms(3);
        assert_eq!(s.take(now, ms(100), &mut rec), Some(origin));
        assert_eq!(s.take(now, ms(100), &mut rec), Some(origin + ms(1)));
        assert_eq!(s.take(now, ms(100), &mut rec), Some(origin + ms(2)));
        assert_eq!(s.take(now, ms(100), &mut rec), None);
        s.dispatch(origin + ms(20), &mut rec);
        assert_eq!(s.next_due(), None);
        assert!(!s.finished(), "seven queued");
        let m = rec.finish(origin + ms(20));
        assert_eq!(m.phases["schedule_lag"].count(), 3);
        assert_eq!(m.dropped, 0);
    }

    #[test]
    fn a_dense_schedule_starts_on_the_tick_grid() {
        let origin = Instant::now();
        let mut rec = Recorder::new(origin);
        // 20,000 per second: one every 50 µs, woken every 200 µs.
        let mut s = Schedule::new(
            Arrivals::new(20_000.0, 100, 0, 1),
            origin,
            100,
            Duration::from_micros(50),
        );
        assert_eq!(s.next_due(), Some(origin), "the first at the origin, on the grid");
        s.dispatch(origin, &mut rec);
        assert_eq!(
            s.next_due(),
            Some(origin + Duration::from_micros(200)),
            "the second (50 µs) at the next tick"
        );
        // Woken in between (a response came): nothing more starts before the tick.
        s.dispatch(origin + Duration::from_micros(190), &mut rec);
        assert_eq!(
            s.take(origin + Duration::from_micros(190), ms(100), &mut rec),
            Some(origin)
        );
        assert_eq!(s.take(origin + Duration::from_micros(190), ms(100), &mut rec), None);
        // At that tick, what fell due by then (50, 100, 150, 200 µs) starts together.
        s.dispatch(origin + Duration::from_micros(200), &mut rec);
        let mut n = 0;
        while s.take(origin + Duration::from_micros(200), ms(100), &mut rec).is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
        assert_eq!(s.next_due(), Some(origin + Duration::from_micros(400)));
    }

    #[test]
    fn a_full_queue_drops_what_is_due_and_so_does_a_stop() {
        let origin = Instant::now();
        let mut rec = Recorder::new(origin);
        // 1,000 per second, 1,000 in all, on 4 slots.
        let mut s = Schedule::new(Arrivals::new(1000.0, 1000, 0, 1), origin, 4, ms(1));
        // 100 ms late: 4 queued, the other 97 due dropped at once.
        s.dispatch(origin + ms(100), &mut rec);
        // A start that waited past the timeout is dropped, not sent.
        assert_eq!(s.take(origin + ms(100), ms(99), &mut rec), Some(origin + ms(1)));
        assert!(s.waiting(), "two left");
        assert_eq!(s.next_due(), Some(origin + ms(101)), "the first arrival not dropped");
        s.stop(origin + ms(101), &mut rec);
        assert!(s.finished() && !s.waiting());
        assert_eq!(s.next_due(), None);
        s.dispatch(origin + ms(200), &mut rec);
        let m = rec.finish(origin + ms(200));
        // 97 past the full queue, 1 past the timeout, 2 queued at the stop;
        // nothing after the stop.
        assert_eq!(m.dropped, 97 + 1 + 2);
        assert_eq!(m.phases["schedule_lag"].count(), 1);
    }
}
