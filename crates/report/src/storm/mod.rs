//! The storm report: how many connections were attempted, established and
//! failed (and why), how fast, how long the whole crowd took, and what each
//! connection cost the generator.

use std::io::{self, Write};

use throng_result::RunResult;

pub(crate) mod report;
#[cfg(test)]
mod tests;

/// Writes the text report of `r`: a storm's as below, another kind's as
/// [`crate::text::write`] does.
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    crate::text::write(r, w)
}
