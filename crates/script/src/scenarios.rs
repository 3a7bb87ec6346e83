//! `options.scenarios`: k6's scenarios as throng's, one for one — the six
//! executors both have, their fields renamed (`preAllocatedVUs` →
//! `pre_allocated_vus`), durations in milliseconds — each running the
//! function its `exec` names (the default function without one).

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use crate::error::ScriptError;

/// One k6 scenario, as a scenario file's executor lines.
#[derive(Clone, Debug, PartialEq)]
pub struct K6Scenario {
    pub name: String,
    /// Its executor and fields, as a scenario file's lines (indented for a
    /// scenario's body).
    pub(crate) yaml: String,
    /// The function it runs (None: the default function).
    pub exec: Option<String>,
}

/// What each field becomes, and how it is read.
#[derive(Clone, Copy)]
enum Kind {
    Count,
    Duration,
    Stages,
}

/// k6's field → throng's, and its kind; `executor`, `exec`, `startTime`
/// and `gracefulStop` are read for every executor.
const FIELDS: [(&str, &str, Kind, &[&str]); 12] = [
    (
        "vus",
        "vus",
        Kind::Count,
        &["constant-vus", "per-vu-iterations", "shared-iterations"],
    ),
    (
        "iterations",
        "iterations",
        Kind::Count,
        &["per-vu-iterations", "shared-iterations"],
    ),
    (
        "duration",
        "duration",
        Kind::Duration,
        &["constant-vus", "constant-arrival-rate"],
    ),
    (
        "maxDuration",
        "max_duration",
        Kind::Duration,
        &["per-vu-iterations", "shared-iterations"],
    ),
    ("startVUs", "start_vus", Kind::Count, &["ramping-vus"]),
    (
        "stages",
        "stages",
        Kind::Stages,
        &["ramping-vus", "ramping-arrival-rate"],
    ),
    (
        "gracefulRampDown",
        "graceful_ramp_down",
        Kind::Duration,
        &["ramping-vus"],
    ),
    ("rate", "rate", Kind::Count, &["constant-arrival-rate"]),
    ("startRate", "start_rate", Kind::Count, &["ramping-arrival-rate"]),
    (
        "timeUnit",
        "time_unit",
        Kind::Duration,
        &["constant-arrival-rate", "ramping-arrival-rate"],
    ),
    (
        "preAllocatedVUs",
        "pre_allocated_vus",
        Kind::Count,
        &["constant-arrival-rate", "ramping-arrival-rate"],
    ),
    (
        "maxVUs",
        "max_vus",
        Kind::Count,
        &["constant-arrival-rate", "ramping-arrival-rate"],
    ),
];

const EXECUTORS: [&str; 6] = [
    "constant-vus",
    "ramping-vus",
    "per-vu-iterations",
    "shared-iterations",
    "constant-arrival-rate",
    "ramping-arrival-rate",
];

/// Most scenarios a script may declare.
const MAX_SCENARIOS: usize = 64;

/// `options.scenarios` read; `at(key, message)` places an error at the
/// key's first appearance in the main file.
pub(crate) fn read(val: &Value, at: &dyn Fn(&str, String) -> ScriptError) -> Result<Vec<K6Scenario>, ScriptError> {
    let Some(map) = val.as_object() else {
        return Err(at(
            "scenarios",
            format!("options.scenarios: {val} is not an object of named scenarios"),
        ));
    };
    if map.len() > MAX_SCENARIOS {
        return Err(at(
            "scenarios",
            format!("options.scenarios: more than {MAX_SCENARIOS} scenarios"),
        ));
    }
    let mut out = Vec::new();
    for (name, s) in map {
        let bad = |key: &str, m: String| at(key, format!("options.scenarios.{name}: {m}"));
        if name.is_empty() || name.len() > 128 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c)) {
            return Err(bad(
                name,
                "a scenario's name is 1 to 128 letters, digits, _ or -".into(),
            ));
        }
        if name == "setup" || name == "teardown" {
            return Err(bad(
                name,
                format!("'{name}' is the name of the script's {name}() in throng; rename it"),
            ));
        }
        let Some(fields) = s.as_object() else {
            return Err(bad(name, format!("{s} is not an object")));
        };
        let executor = fields.get("executor").and_then(Value::as_str).unwrap_or_default();
        if !EXECUTORS.contains(&executor) {
            return Err(bad(
                "executor",
                format!(
                    "executor '{executor}' is not supported by throng (supported: {})",
                    EXECUTORS.join(", ")
                ),
            ));
        }
        let mut yaml = format!("    executor: {executor}\n");
        let mut exec = None;
        for (k, v) in fields {
            match k.as_str() {
                "executor" => {}
                "exec" => match v.as_str() {
                    Some(f) if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphanumeric() || "_$".contains(c)) => {
                        exec = Some(f.to_string());
                    }
                    _ => return Err(bad(k, format!("exec: {v} is not the name of an exported function"))),
                },
                "startTime" | "gracefulStop" => {
                    let d = ms(v).ok_or_else(|| bad(k, format!("{k}: {v} is not a duration (\"30s\", \"500ms\")")))?;
                    let key = if k == "startTime" {
                        "start_time"
                    } else {
                        "graceful_stop"
                    };
                    let _ = writeln!(yaml, "    {key}: {d}ms");
                }
                _ => {
                    let Some((_, key, kind, executors)) = FIELDS.iter().find(|f| f.0 == k) else {
                        return Err(bad(
                            k,
                            format!("{k} is not supported by throng (env, tags and options are not)"),
                        ));
                    };
                    if !executors.contains(&executor) {
                        return Err(bad(k, format!("{k} does not go with executor {executor}")));
                    }
                    field(&mut yaml, key, *kind, v).map_err(|m| bad(k, format!("{k}: {m}")))?;
                }
            }
        }
        out.push(K6Scenario {
            name: name.clone(),
            yaml,
            exec,
        });
    }
    Ok(out)
}

/// One field's scenario-file line(s).
fn field(yaml: &mut String, key: &str, kind: Kind, v: &Value) -> Result<(), String> {
    match kind {
        Kind::Count => {
            let n = v.as_u64().ok_or_else(|| format!("{v} is not a whole number"))?;
            let _ = writeln!(yaml, "    {key}: {n}");
        }
        Kind::Duration => {
            let d = ms(v).ok_or_else(|| format!("{v} is not a duration (\"30s\", \"1m30s\", \"500ms\")"))?;
            let _ = writeln!(yaml, "    {key}: {d}ms");
        }
        Kind::Stages => {
            let stages = v.as_array().ok_or_else(|| format!("{v} is not a list of stages"))?;
            let _ = writeln!(yaml, "    {key}:");
            for s in stages {
                let d = s
                    .get("duration")
                    .and_then(ms)
                    .ok_or_else(|| format!("{s}: a stage needs a duration"))?;
                let t = s
                    .get("target")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("{s}: a stage needs a whole number target"))?;
                let _ = writeln!(yaml, "      - {{ duration: {d}ms, target: {t} }}");
            }
        }
    }
    Ok(())
}

/// A k6 duration in milliseconds.
fn ms(v: &Value) -> Option<u128> {
    duration(v).map(|d| d.as_millis())
}

/// k6's durations: "30s", "1m30s", "1h", "500ms", or milliseconds.
pub(crate) fn duration(v: &Value) -> Option<Duration> {
    if let Some(ms) = v.as_u64() {
        return Some(Duration::from_millis(ms));
    }
    let s = v.as_str()?.trim();
    let mut total = 0f64;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let n: f64 = num.parse().ok()?;
        num.clear();
        let unit = match c {
            'h' => 3_600_000.0,
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1.0
            }
            'm' => 60_000.0,
            's' => 1000.0,
            _ => return None,
        };
        total += n * unit;
        any = true;
    }
    if !num.is_empty() {
        return None;
    }
    (any && total.is_finite()).then(|| Duration::from_micros((total * 1000.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(key: &str, message: String) -> ScriptError {
        ScriptError::at("t.js", 0, 0, &format!("{key}: {message}"))
    }

    #[test]
    fn k6_scenarios_become_throng_scenarios() {
        let v: Value = serde_json::json!({
            "browse": { "executor": "constant-arrival-rate", "rate": 50, "timeUnit": "1s", "duration": "30s",
                        "preAllocatedVUs": 10, "maxVUs": 20, "exec": "browse", "startTime": "5s" },
            "ramp": { "executor": "ramping-vus", "startVUs": 0, "stages": [{ "duration": "10s", "target": 5 }],
                      "gracefulRampDown": "0s" },
        });
        let s = read(&v, &at).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "browse");
        assert_eq!(s[0].exec.as_deref(), Some("browse"));
        assert!(
            s[0].yaml.starts_with("    executor: constant-arrival-rate\n"),
            "{}",
            s[0].yaml
        );
        for line in [
            "rate: 50",
            "time_unit: 1000ms",
            "duration: 30000ms",
            "pre_allocated_vus: 10",
            "max_vus: 20",
            "start_time: 5000ms",
        ] {
            assert!(s[0].yaml.contains(line), "{line}: {}", s[0].yaml);
        }
        assert!(s[1].yaml.contains("start_vus: 0\n") && s[1].yaml.contains("- { duration: 10000ms, target: 5 }"));
        assert_eq!(s[1].exec, None);
    }

    #[test]
    fn what_does_not_translate_is_refused() {
        for (v, want) in [
            (
                serde_json::json!({ "a": { "executor": "externally-controlled" } }),
                "not supported by throng",
            ),
            (
                serde_json::json!({ "a": { "executor": "constant-vus", "rate": 5 } }),
                "does not go with",
            ),
            (
                serde_json::json!({ "a": { "executor": "constant-vus", "env": {} } }),
                "env, tags",
            ),
            (
                serde_json::json!({ "a": { "executor": "constant-vus", "vus": -1 } }),
                "whole number",
            ),
            (
                serde_json::json!({ "setup": { "executor": "constant-vus" } }),
                "rename it",
            ),
            (
                serde_json::json!({ "a b": { "executor": "constant-vus" } }),
                "letters, digits",
            ),
            (
                serde_json::json!({ "a": { "executor": "constant-vus", "exec": "x y" } }),
                "exported function",
            ),
        ] {
            let e = read(&v, &at).unwrap_err();
            assert!(e.message.contains(want), "{v}: {e}");
        }
    }
}
