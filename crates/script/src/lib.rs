//! k6 scripts, run as they are: a QuickJS runtime per virtual user on a
//! coroutine of its own, suspended inside each `http.*` call while the
//! engine performs the request. I/O-free: the engine resumes a
//! [`ScriptVu`] and performs what it yields.
//!
//! ```text
//!  script.js (+ the files it imports, read by the caller, bounded)
//!     │ scan: imports and members throng does not provide → ScriptError (file:line:col)
//!     │ options: the module evaluated once, `options` read → Options
//!     ▼
//!  Script (shared by the workers) ── Options::scenario_yaml → a scenario file's text
//!     │ per VU
//!     ▼
//!  ScriptVu::resume(Input) → Yield::Request | Sleep | Check | Group* | IterationDone | Failed
//! ```

use std::collections::HashMap;
use std::sync::Arc;

pub use error::ScriptError;
pub use options::{Executor, Options, k6_name};
pub use vu::{Input, Limits, Request, Response, ScriptVu, Yield};

mod error;
mod modules;
mod options;
mod scan;
mod vu;

#[cfg(test)]
mod tests;

use modules::Sources;
use vu::Intrinsics;

/// A loaded script: its sources, what its VUs need, its options.
#[derive(Debug)]
pub struct Script {
    /// The main module's name (the file's name, as given).
    pub(crate) main: String,
    pub(crate) sources: Sources,
    pub(crate) intrinsics: Intrinsics,
    /// The `__ENV` names the script reads (None: it reads `__ENV` by
    /// computed names, so it gets the whole environment).
    pub(crate) env_names: Option<Vec<String>>,
    pub(crate) limits: Limits,
    /// What `export const options` said.
    pub options: Options,
}

impl Script {
    /// Loads `main` (its text `source`); `read` reads a file the script
    /// imports by its path relative to the script's folder (bounded by
    /// the caller). Refuses what throng does not run, before any VU runs.
    pub fn load(
        main: &str,
        source: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
        env: &HashMap<String, String>,
        limits: Limits,
    ) -> Result<Script, ScriptError> {
        let mut files: HashMap<String, Arc<str>> = HashMap::new();
        let mut pending = vec![(main.to_string(), source.to_string())];
        let mut full = false;
        let mut env_names: Option<Vec<String>> = Some(Vec::new());
        while let Some((name, text)) = pending.pop() {
            if files.contains_key(&name) {
                continue;
            }
            let found = scan::scan(&name, &text)?;
            full |= found.full_intrinsics;
            match (&mut env_names, found.env_names) {
                (Some(all), Some(mine)) => all.extend(mine),
                _ => env_names = None,
            }
            for (spec, line, column) in found.files {
                let path = modules::join(&name, &spec);
                if files.contains_key(&path) || pending.iter().any(|(n, _)| *n == path) {
                    continue;
                }
                if files.len() >= 256 {
                    return Err(ScriptError::at(&name, line, column, "more than 256 files imported"));
                }
                let text = read(&path).map_err(|e| ScriptError::at(&name, line, column, &format!("'{spec}': {e}")))?;
                pending.push((path, text));
            }
            files.insert(name, Arc::from(text));
        }
        let mut script = Script {
            main: main.to_string(),
            sources: Sources { files: Arc::new(files) },
            intrinsics: if full { Intrinsics::Full } else { Intrinsics::Small },
            env_names,
            limits,
            options: Options::default(),
        };
        let json = options::probe(&script, env)?;
        script.options = Options::from_json(&json, main, source)?;
        Ok(script)
    }
}
