//! The scenario file: YAML as written (raw), validated into a
//! [`ScenarioPlan`]. Errors carry file, line and column.

use std::collections::HashMap;

use raw::RawFile;
use validate::Validator;

pub use types::GrpcStep;
pub use types::{
    BaseUrl, Body, Cookies, Cursor, DEFAULT_REDIRECTS, DataSpec, Defaults, Executor, JsonTemplate, Request, Scenario,
    ScenarioPlan, Stage, Step, Think, WebSocket, WsMessage, stage_names,
};
pub use types::{DEFAULT_MAX_BODY, MAX_MAX_BODY};

mod raw;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_proto;
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
            let message = e.to_string().split(" at line ").next().unwrap_or_default().to_string();
            let (line, column) = refine_location(text, line, column, &message);
            ScenarioError {
                file: file.to_string(),
                line,
                column,
                message: throng_plan::input::plain_types(&message),
            }
        })?;
        Validator::new(text, file, reflect).plan(raw, read, target)
    }
}

/// serde reports errors inside an executor (an internally tagged enum, read
/// whole before it is decoded) at the executor's first key. When the message
/// quotes the offending value, the first place that value appears at or after
/// the reported position is where the user has to look.
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
    let Some(found) = text.get(from..).and_then(|rest| rest.find(value)).map(|i| from + i) else {
        return (line, column);
    };
    let before = &text[..found];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The environment for `{{env.NAME}}`: the process's, overridden by `--env`.
pub fn environment(overrides: &[(String, String)]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    env.extend(overrides.iter().cloned());
    env
}
