//! The scenario file: YAML as written (raw), validated into a
//! [`ScenarioPlan`]. Errors carry file, line and column.

use std::collections::HashMap;

use raw::RawFile;
use validate::Validator;

pub use sse::{ExpectEvent, SseSpec};
pub use types::GrpcStep;
pub use types::{
    Add, AddValue, BaseUrl, Body, Branch, Condition, Cookies, Cursor, CustomMetric, DEFAULT_REDIRECTS, DataSpec,
    Defaults, Executor, JsonTemplate, Request, Scenario, ScenarioPlan, Stage, Step, Think, WebSocket, WsMessage,
    stage_names,
};
pub use types::{DEFAULT_JS_TIMEOUT, JsStep, MAX_JS_CODE, MAX_JS_SETS, MAX_JS_TIMEOUT, js_steps};
pub use types::{DEFAULT_MAX_BODY, MAX_MAX_BODY, SETUP_LIMIT, TEARDOWN_LIMIT, capture_names};
pub use types::{MAX_MQTT_PAYLOAD, MqttMessage, MqttPayload, MqttStep, MqttVersion, mqtts, topic_matches};

mod executor;
mod js;
mod mqtt;
mod raw;
mod sse;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_mqtt;
#[cfg(test)]
mod tests_proto;
#[cfg(test)]
mod tests_sse;
#[cfg(test)]
mod tests_ws;
mod types;
mod validate;

/// Why a scenario file cannot run. It displays on one line of at most
/// about 300 characters, whatever the file holds: a quoted key or value
/// longer than 60 characters is cut with an ellipsis.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {}", shown(.message))]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// Line, from 1 (0 when unknown).
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

/// The most characters of a quoted key or value an error shows.
const QUOTED_CHARS: usize = 60;
/// The most characters of an error's message.
const MESSAGE_CHARS: usize = 300;

/// `message` as an error shows it: control characters as spaces, each
/// quoted span ('…', "…" or `…`) clipped to [`QUOTED_CHARS`], the whole to
/// [`MESSAGE_CHARS`]. A file's key can be 70,000 characters long; the
/// message that names it should still fit a terminal line or two.
fn shown(message: &str) -> String {
    let clip = |s: &str, max: usize| match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    };
    let mut out = String::new();
    let mut rest = message;
    while let Some(open) = rest.find(['\'', '"', '`']) {
        let quote = &rest[open..open + 1];
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(quote) else {
            break;
        };
        out.push_str(&clip(&rest[..close], QUOTED_CHARS));
        out.push_str(quote);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    let out: String = out.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    clip(&out, MESSAGE_CHARS)
}

/// What can give a scenario's target besides its file: `throng run --target
/// URL`, and the environment a `target: "{{env.BASE}}"` reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct TargetInputs<'a> {
    /// Replaces the file's target (`--target`).
    pub url: Option<&'a str>,
    /// The environment for `{{env.NAME}}` in the file's target (none: every
    /// variable is unset).
    pub env: Option<&'a HashMap<String, String>>,
}

impl ScenarioPlan {
    /// Parses `text` (from `file`); `read` reads a file named in it (the
    /// data file), relative to the scenario's directory. A target that
    /// reads the environment is refused: see [`ScenarioPlan::parse_with`].
    pub fn parse(
        text: &str,
        file: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<ScenarioPlan, ScenarioError> {
        Self::parse_with(text, file, read, &TargetInputs::default())
    }

    /// [`ScenarioPlan::parse`], the target given by `target` when it says
    /// so (`--target`, the environment of `{{env.NAME}}`).
    pub fn parse_with(
        text: &str,
        file: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
        target: &TargetInputs,
    ) -> Result<ScenarioPlan, ScenarioError> {
        Self::parse_reflecting(text, file, read, target, None)
    }

    /// [`ScenarioPlan::parse_with`]; `reflect` asks a target's server
    /// reflection for the descriptors of `proto: { reflection: true }`
    /// (without it such a file is refused).
    pub fn parse_reflecting(
        text: &str,
        file: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
        target: &TargetInputs,
        reflect: Option<&crate::grpc::Reflect<'_>>,
    ) -> Result<ScenarioPlan, ScenarioError> {
        let text = throng_plan::input::strip_bom(text);
        throng_plan::input::check_yaml_nesting(text).map_err(|e| ScenarioError {
            file: file.to_string(),
            line: e.line,
            column: e.column,
            message: e.message,
        })?;
        let raw: RawFile = serde_yaml_ng::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            let mut message = e.to_string().split(" at line ").next().unwrap_or_default().to_string();
            if message.starts_with("invalid type:") && message.ends_with("expected struct RawFile") {
                let read = message.replace("expected struct RawFile", "expected a mapping");
                message = format!("{} ({read})", not_a_scenario(file));
            }
            let (line, column) = refine_location(text, line, column, &message);
            ScenarioError {
                file: file.to_string(),
                line,
                column,
                message: throng_plan::input::plain_types(&message),
            }
        })?;
        Validator::new(text, file, reflect, read).plan(raw, read, target)
    }
}

/// What a file that is not a YAML mapping is, and what to give instead.
fn not_a_scenario(file: &str) -> String {
    let script = [".js", ".mjs", ".cjs", ".ts"]
        .iter()
        .any(|x| file.to_ascii_lowercase().ends_with(x));
    if script {
        "this is a script, not a scenario file: `throng run` runs k6 scripts named .js or .mjs \
         (CommonJS and TypeScript are not run yet) and otherwise reads a YAML file with target: and \
         scenarios: (see docs/scenarios.md, which maps k6's options and calls to it). To start a \
         scenario from what you have, `throng import curl|har|postman|openapi FILE` writes one"
            .to_string()
    } else {
        "not a scenario file: it should be a YAML mapping with target: and scenarios: (see \
         docs/scenarios.md)"
            .to_string()
    }
}

/// serde reports errors inside an executor (an internally tagged enum, read
/// whole before it is decoded) at the executor's first key. When the message
/// quotes the offending value, the first place at or after the reported
/// position where that value stands as a key's whole value is where the user
/// has to look; for a duration, the first under a key that takes one (so
/// `duration: 2` is found after `vus: 2`).
fn refine_location(text: &str, line: usize, column: usize, message: &str) -> (usize, usize) {
    let quoted = ['\'', '`', '"'].iter().find_map(|&q| {
        let start = message.find(q)? + 1;
        let len = message[start..].find(q)?;
        Some(&message[start..start + len]).filter(|v| !v.is_empty())
    });
    let Some(value) = quoted else {
        return (line, column);
    };
    let from = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>()
        + column.saturating_sub(1);
    let Some(rest) = text.get(from..) else {
        return (line, column);
    };
    let wants_duration = message.contains("duration");
    // Every place the value stands, with the key it is the whole value of
    // (None: inside other text, or an item of a list).
    let places: Vec<(usize, Option<&str>)> = rest
        .match_indices(value)
        .map(|(i, _)| (from + i, key_of(text, from + i, value.len())))
        .collect();
    let found = places
        .iter()
        .find(|(_, key)| key.is_some_and(|k| !wants_duration || DURATION_KEYS.contains(&k)))
        .or_else(|| places.iter().find(|(_, key)| key.is_some()))
        .or(places.first())
        .map(|(at, _)| *at);
    let Some(found) = found else {
        return (line, column);
    };
    let before = &text[..found];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The keys whose values are durations in a scenario file.
const DURATION_KEYS: [&str; 13] = [
    "duration",
    "timeout",
    "graceful_ramp_down",
    "max_duration",
    "time_unit",
    "start_time",
    "graceful_stop",
    "deadline",
    "min",
    "max",
    "duration_under",
    "delay",
    "think",
];

/// The key of a `key: value` line when the `len` bytes at `at` are that
/// whole value (quoted or not; a comment, `,` or `}` after it allowed).
fn key_of(text: &str, at: usize, len: usize) -> Option<&str> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let before = text[line_start..at].trim_end_matches(['"', '\'']).trim_end();
    let after = text
        .get(at + len..line_end)?
        .trim_start_matches(['"', '\''])
        .trim_start();
    if !(after.is_empty() || after.starts_with('#') || after.starts_with(',') || after.starts_with('}')) {
        return None;
    }
    let key = before.strip_suffix(':')?;
    let key = key.rsplit(['{', ',', ' ', '-']).next()?.trim_matches(['"', '\'']);
    (!key.is_empty()).then_some(key)
}

/// The environment for `{{env.NAME}}`: the process's, overridden by `--env`.
pub fn environment(overrides: &[(String, String)]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    env.extend(overrides.iter().cloned());
    env
}
