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
//!
//! A scenario file's `js:` steps use a smaller part of it (`step.rs`):
//!
//! ```text
//!  js: code ── StepCode::compile (once per worker) ──► bytecode | StepSyntaxError (line of the code)
//!  StepVu (per VU, at its first js: step) ── run(step, StepInput) ──► variables set | StepError
//! ```

pub use error::ScriptError;
pub use options::{Executor, Options, k6_name};
pub use scenarios::K6Scenario;
pub use script::{Limits, Script};
pub use step::{
    Recorded, StepCode, StepError, StepInput, StepNeeds, StepResponse, StepSyntaxError, StepVu,
    env_names as step_env_names,
};
pub use vu::{Input, Request, Response, ScriptVu, Stage, Yield};

mod crypto;
mod data;
mod error;
mod heap;
mod load;
mod modules;
mod options;
mod scan;
mod scenarios;
mod script;
mod step;
mod typescript;
mod vu;

#[cfg(test)]
mod tests;
