//! `throng mqtt`: publishers and subscribers on one broker, run on the
//! caller's thread (the pub/sub driver is `proto/mqtt/pubsub.rs`); its
//! books go into the result's `measurements.pubsub`.

use std::rc::Rc;
use std::sync::Arc;

use throng_plan::MqttPlan;
use throng_result::{Plan, RunResult};

use super::{check_fds, resolve};
use crate::coordinate::{Clock, Finished};
use crate::error::{EngineError, WorkerFailure};
use crate::proto::mqtt::client::Run;
use crate::proto::mqtt::pubsub::drive;
use crate::{Control, Progress, sys};

/// Runs a pub/sub plan and returns its result.
pub fn run_mqtt(
    plan: &MqttPlan,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<RunResult, EngineError> {
    let addr = resolve(&plan.target.host, plan.target.port)?;
    check_fds(plan.publishers.saturating_add(plan.subscribers), 1)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|reason| WorkerFailure::Io { worker: 0, reason })?;
    let cpu0 = sys::thread_cpu();
    let clock = Clock::now();
    let run = Rc::new(Run::new(Arc::new(plan.clone()), addr, control, clock.origin));
    let total_requests = plan.messages;
    let duration = plan.duration;
    let mut tick = |elapsed, rec: &throng_metrics::Recorder| {
        on_tick(&Progress {
            elapsed,
            live: rec.live(),
            total_requests,
            duration,
            snapshot: None,
        });
    };
    let local = tokio::task::LocalSet::new();
    let (books, notes) = local.block_on(&rt, drive(Rc::clone(&run), &mut tick));
    drop(local);
    let Ok(run) = Rc::try_unwrap(run) else {
        // Every task holding the run ended with the LocalSet.
        return Err(WorkerFailure::Panicked.into());
    };
    let mut measurements = run.rec.into_inner().finish(std::time::Instant::now());
    measurements.pubsub = Some(books);
    let cpu1 = sys::thread_cpu();
    let cpu = (cpu1.0.saturating_sub(cpu0.0), cpu1.1.saturating_sub(cpu0.1));
    let finished = Finished::single(measurements, clock, cpu, notes);
    let mut plan = plan.clone();
    plan.data_bytes = Vec::new();
    Ok(finished.into_result(Plan::Mqtt(Box::new(plan.clone())), plan.rate.is_some(), control))
}
