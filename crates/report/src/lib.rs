//! Reports: every view of a run is rendered from its [`RunResult`], so any
//! result file can be re-reported later in any view.
//!
//! ```text
//!  RunResult ─┬─ text::write     (k6-like phase table, outcomes, generator cost)
//!             ├─ ab::write       (ApacheBench's layout and field meanings)
//!             └─ httperf::write  (httperf's layout and error classes)
//! ```
//!
//! Writers take `impl Write` and never touch the terminal or files.

pub mod ab;
pub mod format;
pub mod httperf;
pub mod text;

use std::io::{self, Write};

use throng_result::RunResult;

/// A report layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// throng's own summary.
    Text,
    /// ApacheBench's report.
    Ab,
    /// httperf's report.
    Httperf,
    /// The result document itself.
    Json,
}

/// Renders `result` in `view`.
pub fn write(view: View, result: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    match view {
        View::Text => text::write(result, w),
        View::Ab => ab::write(result, w),
        View::Httperf => httperf::write(result, w),
        View::Json => result.to_writer(&mut *w).map_err(io::Error::other),
    }
}
