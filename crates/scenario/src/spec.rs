//! The scenario file: YAML as written (raw), validated into a
//! [`ScenarioPlan`]. Errors carry file, line and column.

use std::collections::HashMap;

use raw::RawFile;
use validate::Validator;

pub use raw::{DEFAULT_MAX_BODY, MAX_MAX_BODY};
pub use types::{
    BaseUrl, Body, Cursor, DataSpec, Defaults, Executor, JsonTemplate, Request, Scenario, ScenarioPlan, Stage, Step,
    Think, stage_names,
};

mod raw;
#[cfg(test)]
mod tests;
mod types;
mod validate;

/// Why a scenario file cannot run.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
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

impl ScenarioPlan {
    /// Parses `text` (from `file`); `read` reads a file named in it (the
    /// data file), relative to the scenario's directory.
    pub fn parse(
        text: &str,
        file: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
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
        Validator { text, file }.plan(raw, read)
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
