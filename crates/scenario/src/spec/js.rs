//! A `js:` step as validated: its code, the variables it may set, its
//! timeout, where its code starts in the file, the checks it names.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A `js:` step: JavaScript run in the VU's own runtime, which reads the
/// VU's variables (`vars`), its last response (`res`), `__VU`, `__ITER`
/// and the environment, and writes only the variables `sets:` names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsStep {
    /// The code, as written.
    pub code: String,
    /// The variables it may write (later steps read them as captures).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<String>,
    /// How long it may run before it is stopped (the iteration fails).
    pub timeout: Duration,
    /// Where its code's first line is in the file (line and column from
    /// 1), for the errors that name a line of the code.
    pub line: usize,
    pub column: usize,
}

impl JsStep {
    /// The check names its code writes as a literal (`check("name", …)`,
    /// with ' " or ` quotes and no escapes): what a threshold
    /// `checks{check:NAME}` may name.
    pub fn check_names(&self) -> Vec<&str> {
        self.literal_firsts("check")
    }

    /// The metrics its code adds to by a literal name (`add("name", …)`),
    /// which `metrics:` must declare.
    pub fn added_metrics(&self) -> Vec<&str> {
        self.literal_firsts("add")
    }

    /// The first arguments of the calls of `function` (not a method)
    /// written as a literal text without escapes.
    fn literal_firsts(&self, function: &str) -> Vec<&str> {
        let code = self.code.as_str();
        let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$' || c == '.';
        code.match_indices(function)
            .filter(|(i, _)| !code[..*i].ends_with(word))
            .filter_map(|(i, _)| {
                let rest = code[i + function.len()..].trim_start().strip_prefix('(')?.trim_start();
                let quote = rest.chars().next().filter(|q| matches!(q, '"' | '\'' | '`'))?;
                let (name, _) = rest[1..].split_once(quote)?;
                (!name.contains('\\')).then_some(name)
            })
            .collect()
    }
}

/// The largest `js:` step's code, in bytes.
pub const MAX_JS_CODE: usize = 64 * 1024;
/// Most variables a `js:` step's `sets:` names.
pub const MAX_JS_SETS: usize = 64;
/// A `js:` step's `timeout:` when it gives none.
pub const DEFAULT_JS_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest `timeout:` a `js:` step may give.
pub const MAX_JS_TIMEOUT: Duration = Duration::from_secs(60);
