//! What produced a run (its plan) and what it counts.

use serde::{Deserialize, Serialize};
use throng_plan::{HttpPlan, MqttPlan, StormPlan};
use throng_scenario::ScenarioPlan;

use crate::error::short;

/// What produced the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "lowercase")]
pub enum Plan {
    /// `throng http`.
    Http(HttpPlan),
    /// `throng storm`.
    Storm(StormPlan),
    /// `throng run SCENARIO.yaml`.
    Run(Box<ScenarioPlan>),
    /// `throng mqtt`: publishers and subscribers on a broker.
    Mqtt(Box<MqttPlan>),
}

/// What a run counts as its unit of work ([`RunResult::unit`](crate::RunResult::unit)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// HTTP requests (`throng http`, `throng run`).
    Requests,
    /// Connections established (`throng storm`).
    Connections,
    /// Messages published (`throng mqtt`).
    Messages,
}

impl Unit {
    /// The unit in the plural, as reports say it: `requests`, `connections`.
    pub fn plural(self) -> &'static str {
        match self {
            Unit::Requests => "requests",
            Unit::Connections => "connections",
            Unit::Messages => "messages",
        }
    }

    /// The unit in the singular: `request`, `connection`.
    pub fn singular(self) -> &'static str {
        match self {
            Unit::Requests => "request",
            Unit::Connections => "connection",
            Unit::Messages => "message",
        }
    }

    /// A second's count of this unit done well: requests ended ok, or
    /// connections established.
    pub fn per_second(self, p: &throng_metrics::SeriesPoint) -> u64 {
        match self {
            Unit::Requests | Unit::Messages => p.ok,
            Unit::Connections => p.connections_opened,
        }
    }
}

impl Plan {
    /// True when latency is measured from each request's intended start.
    pub fn is_open_loop(&self) -> bool {
        match self {
            Plan::Http(p) => p.is_open_loop(),
            Plan::Storm(p) => p.rate.is_some() || p.jitter.is_some(),
            // Only arrival-rate scenarios start iterations on a schedule.
            Plan::Run(p) => p.scenarios.iter().all(|s| s.executor.is_open()),
            Plan::Mqtt(p) => p.rate.is_some(),
        }
    }

    /// The target as given.
    pub fn target_url(&self) -> &str {
        match self {
            Plan::Http(p) => &p.target.url,
            Plan::Storm(p) => &p.target.url,
            Plan::Run(p) => &p.target.url,
            Plan::Mqtt(p) => &p.target.url,
        }
    }

    /// `host:port` of the target.
    pub fn target_authority(&self) -> String {
        match self {
            Plan::Http(p) => format!("{}:{}", p.target.host, p.target.port),
            Plan::Storm(p) => format!("{}:{}", p.target.host, p.target.port),
            Plan::Run(p) => format!("{}:{}", p.target.host, p.target.port),
            Plan::Mqtt(p) => p.authority(),
        }
    }

    /// The command that made it: `http`, `storm`, `run` or `mqtt`.
    pub fn command(&self) -> &'static str {
        match self {
            Plan::Http(_) => "http",
            Plan::Storm(_) => "storm",
            Plan::Run(_) => "run",
            Plan::Mqtt(_) => "mqtt",
        }
    }

    /// How `other` differs from this plan in what a report's labels say:
    /// the command, the target (scheme, host, port, path), the request
    /// method and whether the load is open or closed loop. Empty when they
    /// agree (execution segments, counts and rates may differ: parts of
    /// one test often split those).
    pub fn differences(&self, other: &Plan) -> Vec<String> {
        let mut out = Vec::new();
        if self.command() != other.command() {
            out.push(format!("command {} vs {}", self.command(), other.command()));
            return out;
        }
        let clip = |s: &str| short(s).chars().take(80).collect::<String>();
        if self.target_url() != other.target_url() {
            out.push(format!(
                "target {} vs {}",
                clip(self.target_url()),
                clip(other.target_url())
            ));
        }
        if let (Plan::Http(a), Plan::Http(b)) = (self, other)
            && a.method != b.method
        {
            out.push(format!("method {} vs {}", clip(&a.method), clip(&b.method)));
        }
        let shape = |p: &Plan| if p.is_open_loop() { "open loop" } else { "closed loop" };
        if self.is_open_loop() != other.is_open_loop() {
            out.push(format!("{} vs {}", shape(self), shape(other)));
        }
        out
    }

    /// The TLS settings, if the target speaks TLS.
    pub fn tls(&self) -> Option<&throng_plan::TlsSettings> {
        match self {
            Plan::Http(p) => p.tls.as_ref(),
            Plan::Storm(p) => p.tls.as_ref(),
            Plan::Run(p) => p.tls.as_ref(),
            Plan::Mqtt(_) => None,
        }
    }
}
