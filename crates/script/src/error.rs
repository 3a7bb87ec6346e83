//! What a script can get wrong before its run, at file:line:column.

use std::fmt;

/// A script throng refuses, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct ScriptError {
    pub file: String,
    /// From 1; 0 when the place is the whole file.
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ScriptError {
    pub(crate) fn at(file: &str, line: usize, column: usize, message: &str) -> ScriptError {
        ScriptError {
            file: file.to_string(),
            line,
            column,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        }
    }
}
