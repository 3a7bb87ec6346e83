//! A scenario's executor: how it starts iterations, and its ramp stages.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A ramp stage: reach `target` linearly over `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// How long.
    #[serde(with = "throng_plan::serde_duration")]
    pub duration: Duration,
    /// VUs (ramping-vus) or iterations per time unit (ramping-arrival-rate).
    pub target: f64,
}

/// How a scenario starts iterations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "executor", rename_all = "kebab-case")]
pub enum Executor {
    /// `vus` VUs loop the flow for `duration`.
    ConstantVus {
        /// VUs.
        vus: u64,
        /// How long.
        #[serde(with = "throng_plan::serde_duration")]
        duration: Duration,
    },
    /// VUs follow the stages linearly from `start_vus`.
    RampingVus {
        /// VUs at the start.
        start_vus: u64,
        /// The ramp.
        stages: Vec<Stage>,
        /// How long VUs above the target may finish their iteration.
        #[serde(with = "throng_plan::serde_duration")]
        graceful_ramp_down: Duration,
    },
    /// Each of `vus` VUs runs the flow `iterations` times.
    PerVuIterations {
        /// VUs.
        vus: u64,
        /// Iterations per VU.
        iterations: u64,
        /// Give up after this long.
        #[serde(with = "throng_plan::serde_duration")]
        max_duration: Duration,
    },
    /// `vus` VUs share `iterations` iterations.
    SharedIterations {
        /// VUs.
        vus: u64,
        /// Iterations in all.
        iterations: u64,
        /// Give up after this long.
        #[serde(with = "throng_plan::serde_duration")]
        max_duration: Duration,
    },
    /// `rate` iterations start per `time_unit`, whatever the responses do.
    ConstantArrivalRate {
        /// Iterations per time unit.
        rate: f64,
        /// The time unit.
        #[serde(with = "throng_plan::serde_duration")]
        time_unit: Duration,
        /// How long.
        #[serde(with = "throng_plan::serde_duration")]
        duration: Duration,
        /// VUs ready at the start.
        pre_allocated_vus: u64,
        /// VUs at most.
        max_vus: u64,
    },
    /// The arrival rate follows the stages linearly from `start_rate`.
    RampingArrivalRate {
        /// Iterations per time unit at the start.
        start_rate: f64,
        /// The time unit.
        #[serde(with = "throng_plan::serde_duration")]
        time_unit: Duration,
        /// The ramp (targets are rates).
        stages: Vec<Stage>,
        /// VUs ready at the start.
        pre_allocated_vus: u64,
        /// VUs at most.
        max_vus: u64,
    },
}

impl Executor {
    /// How long the executor schedules iterations (without graceful stops).
    pub fn length(&self) -> Duration {
        match self {
            Executor::ConstantVus { duration, .. } | Executor::ConstantArrivalRate { duration, .. } => *duration,
            Executor::RampingVus { stages, .. } | Executor::RampingArrivalRate { stages, .. } => {
                stages.iter().map(|s| s.duration).sum()
            }
            Executor::PerVuIterations { max_duration, .. } | Executor::SharedIterations { max_duration, .. } => {
                *max_duration
            }
        }
    }

    /// True for the arrival-rate (open-model) executors.
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            Executor::ConstantArrivalRate { .. } | Executor::RampingArrivalRate { .. }
        )
    }

    /// The stages, for those that have them.
    pub fn stages(&self) -> &[Stage] {
        match self {
            Executor::RampingVus { stages, .. } | Executor::RampingArrivalRate { stages, .. } => stages,
            _ => &[],
        }
    }
}
