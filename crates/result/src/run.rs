//! One run's result document, its books and its verdicts.

use std::io::Write;

use serde::{Deserialize, Serialize};
use throng_metrics::Measurements;
use throng_scenario::Verdict;

use crate::error::ResultError;
use crate::parts::{Environment, Generator, Part, TriggerRecord};
use crate::plan::{Plan, Unit};
use crate::time::per_second;

/// One run's result document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Always [`SCHEMA`](crate::SCHEMA).
    pub schema: String,
    /// The throng that wrote it.
    pub throng_version: String,
    /// What was run.
    pub plan: Plan,
    /// Wall-clock start, RFC 3339 UTC.
    pub started_at: String,
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// Seconds from the start to the end of the last request (for merged
    /// results: from the earliest start to the latest end).
    pub duration_s: f64,
    /// True when latency is measured from intended start times.
    pub coordinated_omission_free: bool,
    /// True when the run was stopped early (signal).
    pub interrupted: bool,
    /// Where it ran.
    pub environment: Environment,
    /// The generator's cost (summed over parts for merged results).
    pub generator: Generator,
    /// What was measured.
    pub measurements: Measurements,
    /// The runs this document adds up (one for a plain run).
    pub parts: Vec<Part>,
    /// Things the reader should know (plan adjustments, warnings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The storm's `--trigger` command, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<TriggerRecord>,
    /// A scenario's thresholds, judged on the measurements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Verdict>,
    /// The execution segment this run was (`--segment`); None for a whole
    /// plan, and for a merge of segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<throng_plan::Segment>,
    /// What `--remote-write` pushed (None: it was not asked for). Telemetry
    /// about the run, never part of its verdict or exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_write: Option<crate::PushRecord>,
    /// What `--otlp` pushed (None: it was not asked for); as `remote_write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp: Option<crate::PushRecord>,
}

/// The threshold an open loop with thresholds is also judged by when none
/// of its own bounds `dropped`: [`IMPLIED_DROPPED`].
fn implied_dropped(m: &Measurements) -> Verdict {
    let t = match throng_scenario::Threshold::parse_line(IMPLIED_DROPPED) {
        Ok(t) => t,
        // The constant parses (a unit test says so); were it not to, the
        // verdict fails rather than vanishes.
        Err(e) => {
            return Verdict {
                threshold: IMPLIED_DROPPED.to_string(),
                passed: false,
                observed: None,
                detail: e,
            };
        }
    };
    let mut v = t.evaluate(m);
    v.detail = if v.passed {
        format!("{} (implied by an open loop's thresholds)", v.detail)
    } else {
        format!(
            "{} (implied: an open loop's thresholds judge the load it was asked for; give a dropped threshold \
             of your own, e.g. --threshold 'dropped: rate < 10%', to set another bound)",
            v.detail
        )
    };
    v
}

/// What an open loop's thresholds imply of its schedule. Why implied, and
/// only with thresholds: thresholds are the user's question "did the
/// server hold at this load?", and a run that sent a fifth of its schedule
/// cannot answer yes; without thresholds the exit code says only whether
/// the target worked (exit 1 is every request failing), and a run that
/// cannot keep its schedule warns instead, as k6 leaves dropped iterations
/// to a threshold.
pub const IMPLIED_DROPPED: &str = "dropped: rate <= 1%";

impl RunResult {
    /// The pushes the run made, each with the words its report line uses.
    pub fn pushes(&self) -> impl Iterator<Item = (&'static str, &crate::PushRecord)> {
        [("remote write", &self.remote_write), ("OTLP push", &self.otlp)]
            .into_iter()
            .filter_map(|(what, r)| r.as_ref().map(|r| (what, r)))
    }

    /// The result with its scenario thresholds judged (again) on its
    /// measurements: a merged result is judged on the merged figures.
    pub fn judged(mut self) -> RunResult {
        match &self.plan {
            Plan::Run(p) => {
                self.thresholds = p.thresholds.iter().map(|t| t.evaluate(&self.measurements)).collect();
            }
            // `--threshold`s were checked when the run was planned; one a
            // hand-edited file garbles fails rather than vanishes.
            Plan::Http(_) | Plan::Mqtt(_) | Plan::Storm(_) if !self.plan_thresholds().is_empty() => {
                let lines = self.plan_thresholds().to_vec();
                // A storm drops nothing (a connection starts late rather
                // than never): no implied bound on what it cannot record.
                let open = self.plan.is_open_loop() && !matches!(self.plan, Plan::Storm(_));
                let parsed: Vec<Result<throng_scenario::Threshold, String>> = lines
                    .iter()
                    .map(|text| throng_scenario::Threshold::parse_line(text))
                    .collect();
                self.thresholds = parsed
                    .iter()
                    .zip(&lines)
                    .map(|(t, text)| match t {
                        Ok(t) => t.evaluate(&self.measurements),
                        Err(e) => throng_scenario::Verdict {
                            threshold: text.clone(),
                            passed: false,
                            observed: None,
                            detail: e.clone(),
                        },
                    })
                    .collect();
                // Thresholds judge the load that was asked for: an open loop
                // judged on a fraction of its schedule would pass by
                // accident, so unless the user bounded `dropped` themselves,
                // more than 1% dropped fails the run too.
                let bounded = parsed.iter().any(|t| t.as_ref().is_ok_and(|t| t.metric == "dropped"));
                if open && !bounded {
                    self.thresholds.push(implied_dropped(&self.measurements));
                }
            }
            _ => {}
        }
        self
    }

    /// The `--threshold`s an http, mqtt or storm run was given.
    fn plan_thresholds(&self) -> &[String] {
        match &self.plan {
            Plan::Http(p) => &p.thresholds,
            Plan::Mqtt(p) => &p.thresholds,
            Plan::Storm(p) => &p.thresholds,
            Plan::Run(_) => &[],
        }
    }

    /// Checks the books: every attempted request, connection and
    /// reconnection ended exactly once (`attempted = ok + Σ errors`, summed
    /// without overflow), and each second's failures by class add up to its
    /// failures. The first problem found, as a sentence.
    pub fn books(&self) -> Result<(), String> {
        let m = &self.measurements;
        for (name, o) in [
            ("requests", &m.requests),
            ("connections", &m.connections),
            ("reconnects", &m.reconnects),
        ] {
            match o.checked_ended() {
                None => return Err(format!("{name}: ok + Σ errors passes 2^64 - 1")),
                Some(ended) if ended != o.attempted => {
                    return Err(format!(
                        "{name}: {} attempted but {} ended ({} ok + {} failed)",
                        o.attempted,
                        ended,
                        o.ok,
                        ended - o.ok
                    ));
                }
                Some(_) => {}
            }
        }
        for p in &m.series {
            for (what, classes, total) in [
                ("request failures", &p.error_classes, p.errors),
                ("connection failures", &p.connection_error_classes, p.connection_errors),
            ] {
                // Older results kept no classes per second.
                if classes.is_empty() {
                    continue;
                }
                let by_class = classes.values().try_fold(0u64, |a, &n| a.checked_add(n));
                if by_class != Some(total) {
                    return Err(format!(
                        "second {}: {total} {what} but their classes add up to {}",
                        p.second,
                        by_class.map_or_else(|| "more than 2^64 - 1".to_string(), |n| n.to_string())
                    ));
                }
            }
        }
        Ok(())
    }

    /// True when every threshold held (or there were none).
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|v| v.passed)
    }

    /// What this run counts as its unit of work: connections for a storm,
    /// requests for an HTTP or scenario run. Reports say throughput,
    /// failures and per-second series in this unit.
    pub fn unit(&self) -> Unit {
        match self.plan {
            Plan::Storm(_) => Unit::Connections,
            Plan::Http(_) | Plan::Run(_) => Unit::Requests,
            Plan::Mqtt(_) => Unit::Messages,
        }
    }

    /// The outcomes of this run's [`unit`](Self::unit).
    pub fn unit_outcomes(&self) -> &throng_metrics::Outcomes {
        match self.unit() {
            Unit::Connections => &self.measurements.connections,
            Unit::Requests | Unit::Messages => &self.measurements.requests,
        }
    }

    /// Requests that ended (ok or failed) per second of run time.
    pub fn requests_per_second(&self) -> f64 {
        per_second(self.measurements.requests.ended(), self.duration_s)
    }

    /// Writes pretty JSON.
    pub fn to_writer(&self, mut w: impl Write) -> Result<(), ResultError> {
        serde_json::to_writer_pretty(&mut w, self)?;
        w.write_all(b"\n")?;
        Ok(())
    }
}
