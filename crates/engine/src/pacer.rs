//! Waiting for scheduled instants (open loops, storms, scenarios).

use std::time::{Duration, Instant};

use crate::ctx::Ctx;
use crate::timer::PreciseTimer;

/// Below this gap between arrivals, the dispatcher ticks instead of arming
/// its timer once per arrival.
pub(crate) const DENSE_GAP: Duration = Duration::from_millis(1);
/// The tick of a dense schedule: how late an arrival can be dispatched.
pub(crate) const DENSE_TICK: Duration = Duration::from_micros(200);

/// Waits for scheduled instants with microsecond precision: a timerfd armed
/// per instant for sparse schedules, a periodic tick for dense ones.
pub(crate) struct Pacer {
    timer: Option<PreciseTimer>,
    dense: bool,
}

impl Pacer {
    /// A pacer for a schedule whose starts are `gap` apart on average.
    pub(crate) fn new(gap: Duration) -> Self {
        let mut timer = PreciseTimer::new().ok();
        let dense = gap < DENSE_GAP;
        if dense
            && let Some(t) = timer.as_mut()
            && t.start_ticking(DENSE_TICK).is_err()
        {
            timer = None;
        }
        Pacer { timer, dense }
    }

    /// Waits until `due`; false if the run is stopping.
    pub(crate) async fn wait_until(&mut self, ctx: &Ctx, due: Instant) -> bool {
        loop {
            if ctx.stopping.get() {
                return false;
            }
            if Instant::now() >= due {
                return true;
            }
            let dense = self.dense;
            let wait = async {
                match self.timer.as_mut() {
                    Some(t) if dense => {
                        if t.tick().await.is_err() {
                            tokio::time::sleep_until(due.into()).await;
                        }
                    }
                    Some(t) => {
                        if t.sleep_until(due).await.is_err() {
                            tokio::time::sleep_until(due.into()).await;
                        }
                    }
                    None => tokio::time::sleep_until(due.into()).await,
                }
            };
            tokio::select! {
                () = wait => {}
                () = ctx.stop_notify.notified() => return false,
            }
            // A tick may come before `due`: look again.
        }
    }
}
