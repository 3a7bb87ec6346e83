//! The controllers, one task per scenario on a worker: closed models
//! keep the worker's share of VUs at the plan's target; open models start
//! iterations on the schedule (see `mod.rs`'s sketch).

use std::rc::Rc;
use std::time::{Duration, Instant};

use throng_scenario::{Executor, share};

use super::ops::{Scen, Slot, sleep_until, with_scen};
use super::vu::vu;
use crate::ctx::{Ctx, TaskGuard};
use crate::pacer::Pacer;

/// How often a closed-model controller looks at its VU target.
const TICK: Duration = Duration::from_millis(10);

/// Keeps the worker's share of VUs at the plan's target, retiring the
/// excess gracefully and cutting off what outlives its graceful period.
pub(super) async fn closed_controller(guard: TaskGuard, sc: Rc<Scen>) {
    let ctx = &guard.0;
    if !sleep_until(ctx, sc.start).await {
        return;
    }
    let (ramp_down, stop) = match &sc.def.executor {
        Executor::RampingVus { graceful_ramp_down, .. } => (*graceful_ramp_down, sc.def.graceful_stop),
        _ => (sc.def.graceful_stop, sc.def.graceful_stop),
    };
    loop {
        let now = Instant::now();
        let ended = now >= sc.end || ctx.stopping.get();
        let total = if ended {
            0
        } else {
            sc.def.executor.segment_vus_at(now - sc.start, &sc.segment)
        };
        let mine = share(total, sc.worker, sc.workers);
        sc.target.set(mine);
        let graceful = if ended { stop } else { ramp_down };
        let mut start = Vec::new();
        let mut killed = false;
        {
            let mut slots = sc.slots.borrow_mut();
            if slots.len() < mine as usize {
                slots.resize_with(mine as usize, Slot::default);
            }
            for (i, s) in slots.iter_mut().enumerate() {
                if (i as u64) < mine {
                    s.retire_at = None;
                    if !s.alive && !s.finished {
                        start.push(i);
                    }
                } else if s.alive {
                    let at = *s.retire_at.get_or_insert(now + graceful);
                    if now >= at && !s.killed {
                        s.killed = true;
                        killed = true;
                    }
                }
            }
        }
        for slot in start {
            spawn_vu(&sc, ctx, slot, None);
        }
        if killed {
            sc.kill.notify_waiters();
        }
        let finished = sc.slots.borrow().iter().all(|s| s.finished || !s.alive) && !start_possible(&sc, now);
        if (ended || finished) && sc.active.get() == 0 {
            break;
        }
        // Stopping (Ctrl-C): VUs end at their next step; the coordinator
        // cuts off what is still in flight after its grace period.
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = ctx.stop_notify.notified(), if !ctx.stopping.get() => {}
        }
    }
}

/// True while a closed-model scenario may still start VUs.
fn start_possible(sc: &Scen, now: Instant) -> bool {
    if now >= sc.end {
        return false;
    }
    let slots = sc.slots.borrow();
    // Slots not yet created (a ramp still rising) or not finished.
    (slots.len() as u64) < share(sc.segment.share(sc.def.executor.max_vus()), sc.worker, sc.workers)
        || slots.iter().any(|s| !s.finished)
}

/// Starts iterations on the schedule: on the most recently idle VU, else on
/// a new one up to the worker's share of `max_vus`, else drops them.
pub(super) async fn open_controller(guard: TaskGuard, sc: Rc<Scen>) {
    let ctx = &guard.0;
    // The segment's share of the VUs, then this worker's share of that.
    let (pre, max) = sc.def.executor.segment_open_vus(&sc.segment);
    // No more workers take arrivals than there are VUs: a worker without
    // one would drop every arrival dealt to it.
    let workers = sc.workers.min(u32::try_from(max).unwrap_or(u32::MAX)).max(1);
    if sc.worker >= workers {
        sc.schedule_done.set(true);
        return;
    }
    let pre = share(pre, sc.worker, workers) as usize;
    let max = share(max, sc.worker, workers) as usize;
    // Pre-allocated VUs start idle, in line for the first arrival before
    // they first run; they connect on their first iteration.
    for slot in 0..pre {
        spawn_vu(&sc, ctx, slot, None);
        sc.slots.borrow_mut()[slot].queued = true;
        sc.idle.borrow_mut().push(slot);
    }
    let curve = sc.def.executor.arrivals();
    let count = curve.as_ref().map_or(0, throng_scenario::ArrivalCurve::count);
    let gap = Duration::from_secs_f64(
        sc.def.executor.length().as_secs_f64() * f64::from(workers) / (sc.segment.share(count).max(1) as f64),
    );
    let mut pacer = Pacer::new(gap);
    // The segment's arrivals of the whole schedule, every workers-th.
    let mut arrivals = curve
        .as_ref()
        .map(|c| throng_scenario::segment_arrivals(c, &sc.segment, sc.worker, workers));
    // After dropping, look again no sooner than this: the VUs need time to
    // come free.
    let mut not_before = sc.start;
    while let Some(a) = arrivals.as_mut() {
        let Some((_, offset)) = a.peek() else { break };
        let due = sc.start + offset;
        if !pacer.wait_until(ctx, due.max(not_before)).await {
            break;
        }
        // A schedule in the past never waits above: let the VUs and the
        // stop watcher run.
        tokio::task::coop::consume_budget().await;
        a.next();
        let idle = sc.idle.borrow_mut().pop();
        match idle {
            Some(slot) => {
                let waker = {
                    let mut slots = sc.slots.borrow_mut();
                    slots[slot].job = Some(due);
                    slots[slot].queued = false;
                    slots[slot].waker.take()
                };
                if let Some(w) = waker {
                    w.wake();
                }
            }
            None => {
                let alive = sc.active.get() as usize;
                if alive < max {
                    let free = sc.slots.borrow().iter().position(|s| !s.alive);
                    let slot = free.unwrap_or(sc.slots.borrow().len());
                    spawn_vu(&sc, ctx, slot, Some(due));
                } else {
                    // No VU free: this start and every one due by now are
                    // dropped, counted without walking them (a rate far
                    // beyond the VUs costs constant work per tick).
                    let now = Instant::now();
                    let n = 1 + a.skip_through(now.saturating_duration_since(sc.start));
                    with_scen(ctx, |r| r.dropped_iterations(now, n));
                    not_before = now + crate::pacer::DENSE_TICK;
                }
            }
        }
    }
    sc.schedule_done.set(true);
    sc.wake_idle();
    // Iterations still running get the graceful period, then are cut off.
    let hard = sc.end.max(Instant::now()) + sc.def.graceful_stop;
    while sc.active.get() > 0 {
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = tokio::time::sleep_until(hard.into()) => {
                sc.kill_all();
                break;
            }
        }
    }
}

/// Starts a VU task in `slot` (`job`: an open model's intended start).
fn spawn_vu(sc: &Rc<Scen>, ctx: &Rc<Ctx>, slot: usize, job: Option<Instant>) {
    {
        let mut slots = sc.slots.borrow_mut();
        if slots.len() <= slot {
            slots.resize_with(slot + 1, Slot::default);
        }
        let s = &mut slots[slot];
        s.alive = true;
        s.killed = false;
        s.retire_at = None;
        s.job = job;
        s.queued = false;
    }
    sc.active.set(sc.active.get() + 1);
    with_scen(ctx, |r| r.vus(Instant::now(), sc.index, sc.active.get()));
    tokio::task::spawn_local(vu(ctx.task(), Rc::clone(sc), slot));
}
