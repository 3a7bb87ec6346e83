//! `export const options`: read by evaluating the module once (k6's init
//! context), then turned into a scenario file's text that throng's own
//! validator reads (executors, thresholds with k6's metric names mapped).

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use crate::error::ScriptError;
use crate::scan::line_col;
use crate::scenarios::duration;

/// What `options` said, in throng's terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    pub vus: Option<u64>,
    pub duration: Option<Duration>,
    pub iterations: Option<u64>,
    /// `stages`: (duration, target VUs).
    pub stages: Vec<(Duration, u64)>,
    /// throng's metric key (tag filter mapped) → its expressions.
    pub thresholds: Vec<(String, Vec<String>)>,
    /// The `k6/metrics` metrics the script declares: name, kind.
    pub metrics: Vec<(String, &'static str)>,
    /// The module exports `setup` (run once before the load) and
    /// `teardown` (once after it).
    pub setup: bool,
    pub teardown: bool,
    /// `scenarios`: each k6 scenario as throng's (empty: the shortcuts,
    /// `vus`, `duration`, `iterations`, `stages`, make one).
    pub scenarios: Vec<crate::scenarios::K6Scenario>,
}

/// The executor `options` amount to (k6's shortcuts).
#[derive(Clone, Debug, PartialEq)]
pub enum Executor {
    ConstantVus { vus: u64, duration: Duration },
    RampingVus { start: u64, stages: Vec<(Duration, u64)> },
    SharedIterations { vus: u64, iterations: u64, max: Duration },
}

const KEYS: [&str; 6] = ["vus", "duration", "iterations", "stages", "scenarios", "thresholds"];

/// k6's built-in metric names and throng's.
const METRICS: [(&str, &str); 13] = [
    ("http_req_duration", "response"),
    ("http_req_failed", "errors"),
    ("http_reqs", "requests"),
    ("http_req_waiting", "wait"),
    ("http_req_connecting", "connect"),
    ("http_req_tls_handshaking", "tls"),
    ("http_req_sending", "send"),
    ("http_req_receiving", "receive"),
    ("iteration_duration", "iteration"),
    ("iterations", "iterations"),
    ("checks", "checks"),
    ("group_duration", "group_duration"),
    ("dropped_iterations", "dropped_iterations"),
];

/// The k6 name of a throng metric, where k6 has one.
pub fn k6_name(throng: &str) -> Option<&'static str> {
    METRICS.iter().find(|(_, t)| *t == throng).map(|(k, _)| *k)
}

impl Options {
    /// From `options` as JSON; `source` (the main file) gives the lines.
    pub(crate) fn from_json(
        json: &str,
        file: &str,
        source: &str,
        metrics: Vec<(String, &'static str)>,
    ) -> Result<Options, ScriptError> {
        let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
        let mut o = Options {
            metrics,
            ..Options::default()
        };
        let Some(map) = v.as_object() else {
            return Ok(o);
        };
        let at = |key: &str, message: String| {
            let (line, column) = source.find(key).map_or((0, 0), |i| line_col(source, i));
            ScriptError::at(file, line, column, &message)
        };
        for (k, val) in map {
            if !KEYS.contains(&k.as_str()) {
                return Err(at(
                    k,
                    format!(
                        "options.{k} is not supported by throng yet (supported: {})",
                        KEYS.join(", ")
                    ),
                ));
            }
            let count = |val: &Value| {
                val.as_u64()
                    .ok_or_else(|| at(k, format!("options.{k}: {val} is not a whole number")))
            };
            match k.as_str() {
                "scenarios" => o.scenarios = crate::scenarios::read(val, &at)?,
                "vus" => o.vus = Some(count(val)?),
                "iterations" => o.iterations = Some(count(val)?),
                "duration" => o.duration = Some(duration(val).ok_or_else(|| at(k, bad_duration("duration", val)))?),
                "stages" => {
                    for s in val.as_array().into_iter().flatten() {
                        let d = s
                            .get("duration")
                            .and_then(duration)
                            .ok_or_else(|| at(k, bad_duration("stages[].duration", s)))?;
                        let t = s
                            .get("target")
                            .and_then(Value::as_u64)
                            .ok_or_else(|| at(k, format!("options.stages: {s} needs a whole number target")))?;
                        o.stages.push((d, t));
                    }
                }
                _ => {
                    for (metric, list) in val.as_object().into_iter().flatten() {
                        let custom = o
                            .metrics
                            .iter()
                            .any(|(n, _)| metric.split('{').next() == Some(n.as_str()));
                        let key = if custom {
                            Some(metric.clone())
                        } else {
                            map_metric(metric)
                        };
                        let key = key.ok_or_else(|| {
                            at(
                                metric,
                                format!(
                                    "threshold on '{metric}': throng knows k6's {} and the metrics the script declares \
                                     with k6/metrics",
                                    METRICS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
                                ),
                            )
                        })?;
                        let trend = [
                            "response",
                            "wait",
                            "connect",
                            "tls",
                            "send",
                            "receive",
                            "iteration",
                            "group_duration",
                        ]
                        .contains(&key.split('{').next().unwrap_or(""));
                        let mut exprs = Vec::new();
                        let items: Vec<&Value> = match list {
                            Value::Array(a) => a.iter().collect(),
                            other => vec![other],
                        };
                        for item in items {
                            let text = match item {
                                Value::String(s) => s.clone(),
                                Value::Object(m) => match m.get("threshold").and_then(Value::as_str) {
                                    Some(s) => s.to_string(),
                                    None => {
                                        return Err(at(
                                            metric,
                                            format!("threshold on '{metric}': {item} has no threshold"),
                                        ));
                                    }
                                },
                                _ => {
                                    return Err(at(
                                        metric,
                                        format!("threshold on '{metric}': {item} is not an expression"),
                                    ));
                                }
                            };
                            exprs.push(if trend { with_ms(&text) } else { text });
                        }
                        o.thresholds.push((key, exprs));
                    }
                }
            }
        }
        if !o.scenarios.is_empty()
            && (o.vus.is_some() || o.duration.is_some() || o.iterations.is_some() || !o.stages.is_empty())
        {
            return Err(at(
                "scenarios",
                "options.scenarios and the shortcuts (vus, duration, iterations, stages) both given: give one or the \
                 other"
                    .into(),
            ));
        }
        Ok(o)
    }

    /// The function scenario `name` runs (None: the default function).
    pub fn exec_of(&self, name: &str) -> Option<&str> {
        self.scenarios
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.exec.as_deref())
    }

    /// The executor, as k6 reads these options.
    pub fn executor(&self) -> Executor {
        let vus = self.vus.unwrap_or(1).max(1);
        if !self.stages.is_empty() {
            return Executor::RampingVus {
                start: self.vus.unwrap_or(1),
                stages: self.stages.clone(),
            };
        }
        match (self.iterations, self.duration) {
            (Some(iterations), d) => Executor::SharedIterations {
                vus,
                iterations,
                max: d.unwrap_or(Duration::from_secs(600)),
            },
            (None, Some(duration)) => Executor::ConstantVus { vus, duration },
            (None, None) => Executor::SharedIterations {
                vus,
                iterations: 1,
                max: Duration::from_secs(600),
            },
        }
    }

    /// A scenario file's text for these options: one scenario, `default`,
    /// against `target` (an origin), with a placeholder flow (the script
    /// is the flow).
    pub fn scenario_yaml(&self, target: &str) -> String {
        let mut y = String::new();
        let _ = writeln!(y, "target: {}", quote(target));
        y.push_str("defaults:\n  timeout: 60s\nscenarios:\n");
        // The script is the flow: a scenario's step is never run (the
        // engine runs the script's VUs instead), only validated. So are
        // setup's and teardown's: their VUs call setup() and teardown().
        const FLOW: &str = "    flow:\n      - request: { name: script, path: / }\n";
        for s in &self.scenarios {
            let _ = write!(y, "  {}:\n{}{FLOW}", quote(&s.name), s.yaml);
        }
        if self.scenarios.is_empty() {
            y.push_str("  default:\n");
        }
        match self.executor() {
            _ if !self.scenarios.is_empty() => {}
            Executor::ConstantVus { vus, duration } => {
                let _ = writeln!(
                    y,
                    "    executor: constant-vus\n    vus: {vus}\n    duration: {}ms",
                    duration.as_millis()
                );
            }
            Executor::RampingVus { start, stages } => {
                let _ = writeln!(y, "    executor: ramping-vus\n    start_vus: {start}\n    stages:");
                for (d, t) in stages {
                    let _ = writeln!(y, "      - {{ duration: {}ms, target: {t} }}", d.as_millis());
                }
            }
            Executor::SharedIterations { vus, iterations, max } => {
                let _ = writeln!(
                    y,
                    "    executor: shared-iterations\n    vus: {vus}\n    iterations: {iterations}\n    max_duration: {}ms",
                    max.as_millis()
                );
            }
        }
        if self.scenarios.is_empty() {
            y.push_str(FLOW);
        }
        if self.setup {
            y.push_str("setup:\n  - request: { name: setup, path: / }\n");
        }
        if self.teardown {
            y.push_str("teardown:\n  - request: { name: teardown, path: / }\n");
        }
        if !self.metrics.is_empty() {
            y.push_str("metrics:\n");
            for (name, kind) in &self.metrics {
                let _ = writeln!(y, "  {}: {kind}", quote(name));
            }
        }
        if !self.thresholds.is_empty() {
            y.push_str("thresholds:\n");
            for (k, exprs) in &self.thresholds {
                let _ = writeln!(y, "  {}:", quote(k));
                for e in exprs {
                    let _ = writeln!(y, "    - {}", quote(e));
                }
            }
        }
        y
    }
}

fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn bad_duration(key: &str, v: &Value) -> String {
    format!("options.{key}: {v} is not a duration (write \"30s\", \"1m30s\", \"500ms\")")
}

/// A k6 metric key (`http_req_duration{name:login}`) as throng's.
fn map_metric(k6: &str) -> Option<String> {
    let (name, filter) = match k6.split_once('{') {
        Some((n, f)) => (n.trim(), Some(f.trim_end_matches('}'))),
        None => (k6.trim(), None),
    };
    let throng = METRICS.iter().find(|(k, _)| *k == name)?.1;
    Some(match filter {
        None => throng.to_string(),
        Some(f) => {
            let (tag, value) = f.split_once(':')?;
            let value = value.trim();
            let tag = match tag.trim() {
                "name" => "step",
                // k6 writes groups as `::name`.
                "group" => return Some(format!("{throng}{{group:{}}}", value.trim_start_matches("::"))),
                "scenario" => "scenario",
                "check" => "check",
                _ => return None,
            };
            format!("{throng}{{{tag}:{value}}}")
        }
    })
}

/// `p(95)<500` → `p(95) < 500ms`: k6's trends are in milliseconds.
fn with_ms(expr: &str) -> String {
    let t = expr.trim();
    let end = t.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if end.len() < t.len() {
        format!("{}ms", t)
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_k6_writes_them() {
        let d = |s: &str| duration(&Value::String(s.into()));
        assert_eq!(d("30s"), Some(Duration::from_secs(30)));
        assert_eq!(d("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(d("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(d("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(d("10"), None);
        assert_eq!(d("x"), None);
    }

    #[test]
    fn metrics_and_filters_map_to_throngs() {
        assert_eq!(map_metric("http_req_duration").as_deref(), Some("response"));
        assert_eq!(
            map_metric("http_req_duration{name:login}").as_deref(),
            Some("response{step:login}")
        );
        assert_eq!(
            map_metric("group_duration{group:::auth}").as_deref(),
            Some("group_duration{group:auth}")
        );
        assert_eq!(map_metric("my_counter"), None);
        assert_eq!(with_ms("p(95)<500"), "p(95)<500ms");
        assert_eq!(with_ms("avg < 2s"), "avg < 2s");
    }

    #[test]
    fn options_become_executors() {
        let o = Options::from_json(r#"{"vus": 5, "duration": "10s"}"#, "t.js", "", Vec::new()).unwrap();
        assert_eq!(
            o.executor(),
            Executor::ConstantVus {
                vus: 5,
                duration: Duration::from_secs(10)
            }
        );
        let o = Options::from_json(r#"{"iterations": 7}"#, "t.js", "", Vec::new()).unwrap();
        assert!(matches!(
            o.executor(),
            Executor::SharedIterations {
                vus: 1,
                iterations: 7,
                ..
            }
        ));
        let o = Options::from_json(
            r#"{"stages": [{"duration": "1s", "target": 3}]}"#,
            "t.js",
            "",
            Vec::new(),
        )
        .unwrap();
        assert!(matches!(o.executor(), Executor::RampingVus { start: 1, .. }));
        let e = Options::from_json(
            r#"{"scenarios": {"a": {"executor": "constant-vus", "vus": 1, "duration": "1s"}}, "vus": 2}"#,
            "t.js",
            "export const options = {\n  scenarios: {},\n};",
            Vec::new(),
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (2, 3), "{e}");
        assert!(e.message.contains("give one or the other"), "{e}");
        let e = Options::from_json(
            r#"{"thresholdz": {}}"#,
            "t.js",
            "export const options = {\n  thresholdz: {},\n};",
            Vec::new(),
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (2, 3), "{e}");
        assert!(e.message.contains("options.thresholdz"), "{e}");
    }
}
