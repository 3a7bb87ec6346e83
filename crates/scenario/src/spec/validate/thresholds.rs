//! `thresholds:`: each metric's expressions parsed, once per metric, with
//! their options, and every tag they name carried by some request.

use std::time::Duration;

use super::super::raw::{NoSamples, Ordered, RawThreshold, RawThresholdFull};
use super::super::types::{CustomMetric, Scenario, Step};
use super::{Validator, tag_exists};
use crate::spec::ScenarioError;
use crate::threshold::Threshold;

/// True when an `add:` step of some scenario records into `metric` with
/// the tag `k: v`.
fn add_tagged(scenarios: &[Scenario], metric: &str, k: &str, v: &str) -> bool {
    fn in_flow(flow: &[Step], metric: &str, k: &str, v: &str) -> bool {
        flow.iter().any(|s| match s {
            Step::Add(a) => a.metric == metric && a.tags.iter().any(|(x, y)| x == k && y == v),
            nested => nested.nested().into_iter().any(|f| in_flow(f, metric, k, v)),
        })
    }
    scenarios.iter().any(|s| in_flow(&s.flow, metric, k, v))
}

impl Validator<'_> {
    /// The file's `thresholds:`, each metric at most once and with at
    /// least one expression.
    pub(super) fn thresholds(
        &self,
        raw: Ordered<Vec<RawThreshold>>,
        scenarios: &[Scenario],
        setup: bool,
        teardown: bool,
        custom: &[CustomMetric],
    ) -> Result<Vec<Threshold>, ScenarioError> {
        for (i, (key, _)) in raw.0.iter().enumerate() {
            if raw.0[..i].iter().any(|(k, _)| k == key) {
                return Err(self.err(
                    &["thresholds:", key, key],
                    format!("{key} appears twice; put all its expressions in one list"),
                ));
            }
        }
        let mut thresholds = Vec::new();
        for (key, list) in raw.0 {
            if list.is_empty() {
                return Err(self.err(
                    &["thresholds:", &key],
                    format!("{key}: the list is empty, so nothing is judged; give an expression, e.g. {key}: [p(95) < 500ms] or [rate < 1%], or remove the key"),
                ));
            }
            for t in list {
                let base = key.split('{').next().unwrap_or_default().trim();
                if let Some(m) = custom.iter().find(|m| m.name == base) {
                    let th = self.custom_threshold(&key, t, m)?;
                    if let Some((k, v)) = &th.tag
                        && !add_tagged(scenarios, &m.name, k, v)
                    {
                        return Err(self.err(
                            &["thresholds:", &key],
                            format!(
                                "no add: step of {} carries the tag {k}:{v}; check the add: steps' tags",
                                m.name
                            ),
                        ));
                    }
                    thresholds.push(th);
                    continue;
                }
                thresholds.push(self.threshold(&key, t, scenarios, (setup, teardown))?);
            }
        }
        Ok(thresholds)
    }

    /// One expression of metric `key`, with its options.
    /// One expression on the custom metric `m` (`metrics:`).
    fn custom_threshold(&self, key: &str, t: RawThreshold, m: &CustomMetric) -> Result<Threshold, ScenarioError> {
        let (expr, abort, delay, no_samples) = match t {
            RawThreshold::Text(e) => (e, false, Duration::ZERO, None),
            RawThreshold::Full(f) => (
                f.threshold,
                f.abort_on_fail,
                f.delay.map_or(Duration::ZERO, |d| d.0),
                f.no_samples,
            ),
        };
        let mut th = Threshold::parse_custom(key, &expr, m.kind, abort, delay).map_err(|e| {
            self.err(
                &["thresholds:", key],
                crate::threshold::ThresholdError::from(e).to_string(),
            )
        })?;
        if no_samples == Some(NoSamples::Pass) {
            th.pass_without_samples = true;
        }
        Ok(th)
    }

    /// `once`: whether the file has a `setup:` and a `teardown:` flow,
    /// whose requests carry the tags `scenario:setup` and
    /// `scenario:teardown` (and only those).
    fn threshold(
        &self,
        key: &str,
        t: RawThreshold,
        scenarios: &[Scenario],
        once: (bool, bool),
    ) -> Result<Threshold, ScenarioError> {
        let (expr, abort, delay, no_samples) = match t {
            RawThreshold::Text(e) => (e, false, Duration::ZERO, None),
            RawThreshold::Full(RawThresholdFull {
                threshold,
                abort_on_fail,
                delay,
                no_samples,
            }) => (
                threshold,
                abort_on_fail,
                delay.map_or(Duration::ZERO, |d| d.0),
                no_samples,
            ),
        };
        let mut th = Threshold::parse(key, &expr, abort, delay).map_err(|e| {
            let mut message = e.to_string();
            if matches!(e.fault, crate::threshold::ThresholdFault::NotAMetric { .. }) {
                let declared = self.metrics.borrow();
                let custom: Vec<&str> = declared.iter().map(|m| m.name.as_str()).collect();
                message.push_str(&match custom.is_empty() {
                    true => {
                        "; or declare a custom metric under metrics: (e.g. metrics: { orders: counter })".to_string()
                    }
                    false => format!("; custom (metrics:): {}", custom.join(", ")),
                });
            }
            self.err(&["thresholds:", key], message)
        })?;
        match no_samples {
            Some(NoSamples::Pass) => th.pass_without_samples = true,
            Some(NoSamples::Fail) if th.pass_without_samples => {
                return Err(self.err(
                    &["thresholds:", key],
                    format!(
                        "'{expr}' ends '{}' but no_samples: fail; give one of them",
                        crate::threshold::OR_NO_SAMPLES
                    ),
                ));
            }
            _ => {}
        }
        let of_once =
            |tag: &str, value: &str| tag == "scenario" && (value == "setup" && once.0 || value == "teardown" && once.1);
        if let Some((tag, value)) = &th.tag
            && !tag_exists(scenarios, tag, value)
            && !of_once(tag, value)
        {
            return Err(self.err(
                &["thresholds:", key],
                format!("no request carries the tag {tag}:{value}; check the step, group or scenario name"),
            ));
        }
        Ok(th)
    }
}
