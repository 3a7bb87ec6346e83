//! The report of `throng run`: what ran, iterations and VUs, how requests
//! ended, latency of all requests beside those with an expected status,
//! per-step, group and scenario tables, the load-level (per-stage) table,
//! checks, and threshold verdicts.

use std::io::{self, Write};

use throng_result::RunResult;

pub(crate) mod report;
#[cfg(test)]
mod tests;

pub use self::report::describe;

/// Writes the text report of `r`: a scenario run's as below, another
/// kind's as [`crate::text::write`] does.
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    crate::text::write(r, w)
}
