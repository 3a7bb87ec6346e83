//! A scenario: its target, its executor (the fields of that executor only,
//! each checked), and its flow.

use std::time::Duration;

use super::super::raw::{Dur, ExecutorName, RawScenario, RawStage};
use super::super::types::{BaseUrl, Defaults, Executor, Scenario, Stage};
use super::{Validator, contains_request};
use crate::spec::{ScenarioError, TargetInputs};

impl Validator<'_> {
    /// The scenario `name` of the file, whose target is `file_target`
    /// unless it names its own.
    pub(super) fn scenario(
        &self,
        name: &str,
        mut s: RawScenario,
        defaults: &Defaults,
        file_target: &BaseUrl,
        given: &TargetInputs,
    ) -> Result<Scenario, ScenarioError> {
        let key = format!("{name}:");
        let target = match s.target.take() {
            Some(t) => Some(self.target_of(&["scenarios:", &key, "target:"], t, Some(file_target), given)?),
            None => None,
        };
        let fields = Fields {
            v: self,
            key: &key,
            exec: s.executor.name(),
        };
        fields.only_its_own(&s)?;
        let executor = fields.executor(&s)?;
        if s.flow.is_empty() {
            return Err(self.err(
                &["scenarios:", &key, "flow:"],
                "flow is empty; give at least one request",
            ));
        }
        let flow = self.flow(&key, s.flow, defaults)?;
        self.websocket_origins(&key, &flow, target.as_ref().unwrap_or(file_target))?;
        self.request_protocols_fit(&flow, target.as_ref().unwrap_or(file_target))?;
        if !contains_request(&flow) {
            return Err(self.err(&["scenarios:", &key, "flow:"], "the flow makes no request"));
        }
        Ok(Scenario {
            name: name.to_string(),
            executor,
            start_time: s.start_time.map_or(Duration::ZERO, |d| d.0),
            graceful_stop: s.graceful_stop.map_or(Duration::from_secs(30), |d| d.0),
            target,
            cookies: s.cookies,
            flow,
        })
    }
}

/// The executor fields of the scenario at `key:`, whose executor is `exec`:
/// each check names the field and says what to write.
struct Fields<'a, 'v> {
    v: &'a Validator<'v>,
    key: &'a str,
    exec: &'static str,
}

impl Fields<'_, '_> {
    /// An error at `field:` of the scenario.
    fn bad(&self, field: &str, message: String) -> ScenarioError {
        ScenarioError {
            message,
            ..self.v.err(&["scenarios:", self.key, &format!("{field}:")], "")
        }
    }

    /// The error of a field the executor needs and the scenario lacks.
    fn missing(&self, field: &str, example: &str) -> ScenarioError {
        self.v.err(
            &["scenarios:", self.key, "executor:"],
            format!("the {} executor needs {field}, e.g. {field}: {example}", self.exec),
        )
    }

    /// Refuses a field of another executor: it would be read and ignored,
    /// and the run would not be the one the author meant.
    fn only_its_own(&self, s: &RawScenario) -> Result<(), ScenarioError> {
        let given = [
            ("vus", s.vus.is_some()),
            ("duration", s.duration.is_some()),
            ("start_vus", s.start_vus.is_some()),
            ("stages", s.stages.is_some()),
            ("graceful_ramp_down", s.graceful_ramp_down.is_some()),
            ("iterations", s.iterations.is_some()),
            ("max_duration", s.max_duration.is_some()),
            ("rate", s.rate.is_some()),
            ("start_rate", s.start_rate.is_some()),
            ("time_unit", s.time_unit.is_some()),
            ("pre_allocated_vus", s.pre_allocated_vus.is_some()),
            ("max_vus", s.max_vus.is_some()),
        ];
        for (field, set) in given {
            if set && !s.executor.fields().contains(&field) {
                return Err(self.bad(
                    field,
                    format!(
                        "`{field}` is not a field of {}; it takes {} (and start_time, graceful_stop, flow)",
                        self.exec,
                        s.executor.fields().join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The executor with its fields checked.
    fn executor(&self, s: &RawScenario) -> Result<Executor, ScenarioError> {
        let time_unit = self
            .positive(s.time_unit, "time_unit", Some(Duration::from_secs(1)))
            .map_err(|e| ScenarioError {
                message: format!("{}: rates are iterations per time_unit", e.message),
                ..e
            })?;
        let max_duration = self.positive(s.max_duration, "max_duration", Some(Duration::from_secs(600)))?;
        Ok(match s.executor {
            ExecutorName::ConstantVus => Executor::ConstantVus {
                vus: self.vus(s.vus)?,
                duration: self.positive(s.duration, "duration", None)?,
            },
            ExecutorName::RampingVus => self.ramping_vus(s)?,
            ExecutorName::PerVuIterations => Executor::PerVuIterations {
                vus: self.vus(s.vus)?,
                iterations: self.iterations(s.iterations)?,
                max_duration,
            },
            ExecutorName::SharedIterations => Executor::SharedIterations {
                vus: self.vus(s.vus)?,
                iterations: self.iterations(s.iterations)?,
                max_duration,
            },
            ExecutorName::ConstantArrivalRate => self.constant_arrival_rate(s, time_unit)?,
            ExecutorName::RampingArrivalRate => self.ramping_arrival_rate(s, time_unit)?,
        })
    }

    fn ramping_vus(&self, s: &RawScenario) -> Result<Executor, ScenarioError> {
        let start_vus = s.start_vus.unwrap_or(0);
        let stages = self.stages(s.stages.as_deref())?;
        if start_vus == 0 && stages.iter().all(|st| st.target == 0.0) {
            return Err(self.bad(
                "stages",
                "start_vus and every stage's target are 0: no VU would ever run; give a stage a target above 0".into(),
            ));
        }
        Ok(Executor::RampingVus {
            start_vus,
            stages,
            graceful_ramp_down: s.graceful_ramp_down.map_or(Duration::from_secs(30), |d| d.0),
        })
    }

    fn constant_arrival_rate(&self, s: &RawScenario, time_unit: Duration) -> Result<Executor, ScenarioError> {
        let rate = match s.rate {
            None => return Err(self.missing("rate", "10 (iterations per time_unit)")),
            Some(r) if r.is_finite() && r > 0.0 => r,
            Some(_) => {
                return Err(self.bad(
                    "rate",
                    "rate must be greater than 0 (iterations per time_unit; fractions allowed)".into(),
                ));
            }
        };
        self.per_second("rate", rate, time_unit)?;
        let pre = self.pre_allocated(s.pre_allocated_vus)?;
        Ok(Executor::ConstantArrivalRate {
            rate,
            time_unit,
            duration: self.positive(s.duration, "duration", None)?,
            pre_allocated_vus: pre,
            max_vus: self.max_vus(s.max_vus, pre)?,
        })
    }

    fn ramping_arrival_rate(&self, s: &RawScenario, time_unit: Duration) -> Result<Executor, ScenarioError> {
        let start_rate = match s.start_rate {
            None => 0.0,
            Some(r) if r.is_finite() && r >= 0.0 => r,
            Some(_) => {
                return Err(self.bad(
                    "start_rate",
                    "start_rate cannot be negative (iterations per time_unit at the start; default 0)".into(),
                ));
            }
        };
        let stages = self.stages(s.stages.as_deref())?;
        if start_rate == 0.0 && stages.iter().all(|st| st.target == 0.0) {
            return Err(self.bad(
                "stages",
                "start_rate and every stage's target are 0: no iteration would ever start; give a stage a target above 0"
                    .into(),
            ));
        }
        self.per_second("start_rate", start_rate, time_unit)?;
        let top = stages.iter().map(|st| st.target).fold(0.0, f64::max);
        self.per_second("stages", top, time_unit)?;
        let pre = self.pre_allocated(s.pre_allocated_vus)?;
        Ok(Executor::RampingArrivalRate {
            start_rate,
            time_unit,
            stages,
            pre_allocated_vus: pre,
            max_vus: self.max_vus(s.max_vus, pre)?,
        })
    }

    /// A count the executor needs, at least 1.
    fn count(&self, v: Option<u64>, field: &str, example: &str, why: &str) -> Result<u64, ScenarioError> {
        match v {
            Some(0) => Err(self.bad(field, format!("{field} must be at least 1: {why}"))),
            Some(n) => Ok(n),
            None => Err(self.missing(field, example)),
        }
    }

    fn vus(&self, v: Option<u64>) -> Result<u64, ScenarioError> {
        self.count(v, "vus", "10", "with no VUs the scenario runs nothing")
    }

    fn iterations(&self, v: Option<u64>) -> Result<u64, ScenarioError> {
        self.count(v, "iterations", "100", "0 iterations run nothing")
    }

    fn pre_allocated(&self, v: Option<u64>) -> Result<u64, ScenarioError> {
        self.count(
            v,
            "pre_allocated_vus",
            "10",
            "an arrival-rate scenario needs a VU ready for its first iteration",
        )
    }

    /// `max_vus`, at least `pre` (`pre_allocated_vus`, its default).
    fn max_vus(&self, v: Option<u64>, pre: u64) -> Result<u64, ScenarioError> {
        match v {
            None => Ok(pre),
            Some(m) if m >= pre => Ok(m),
            Some(m) => Err(self.bad(
                "max_vus",
                format!(
                    "max_vus ({m}) is below pre_allocated_vus ({pre}); raise max_vus to {pre} or more, or leave it out (it defaults to pre_allocated_vus)"
                ),
            )),
        }
    }

    /// A duration longer than 0, or `default` (none: the field is needed).
    fn positive(&self, v: Option<Dur>, field: &str, default: Option<Duration>) -> Result<Duration, ScenarioError> {
        match (v, default) {
            (Some(d), _) if d.0.is_zero() => Err(self.bad(field, format!("{field} must be longer than 0"))),
            (Some(d), _) => Ok(d.0),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(self.missing(field, "30s")),
        }
    }

    /// `stages:`, at least one, lasting longer than 0 in all, no target
    /// negative.
    fn stages(&self, v: Option<&[RawStage]>) -> Result<Vec<Stage>, ScenarioError> {
        let list = v.ok_or_else(|| {
            self.v.err(
                &["scenarios:", self.key, "executor:"],
                format!(
                    "the {} executor needs stages, e.g. stages: [{{ duration: 30s, target: 10 }}]",
                    self.exec
                ),
            )
        })?;
        if list.is_empty() {
            return Err(self.bad("stages", "stages is empty; give at least one stage".into()));
        }
        if list.iter().all(|st| st.duration.0.is_zero()) {
            return Err(self.bad(
                "stages",
                "the stages last 0s in all, so the scenario would run nothing; give a stage a duration".into(),
            ));
        }
        list.iter()
            .map(|st| {
                if st.target < 0.0 || !st.target.is_finite() {
                    Err(self.bad("stages", "a stage's target cannot be negative".into()))
                } else {
                    Ok(Stage {
                        duration: st.duration.0,
                        target: st.target,
                    })
                }
            })
            .collect()
    }

    /// The limit of `-r`: a schedule no machine follows is refused, not
    /// run (the engine would spend the run counting dropped starts).
    fn per_second(&self, field: &str, r: f64, time_unit: Duration) -> Result<(), ScenarioError> {
        let per_s = r / time_unit.as_secs_f64();
        if per_s > throng_plan::MAX_RATE {
            return Err(self.bad(
                field,
                format!(
                    "{r} per {} is {per_s:.3e} per second: more than 100M per second is not a plan one \
                     machine can follow; lower it or lengthen time_unit",
                    throng_plan::format_duration(time_unit)
                ),
            ));
        }
        Ok(())
    }
}
