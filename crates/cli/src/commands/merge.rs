//! `throng merge`.

use std::process::ExitCode;

use super::{UsageError, read_result, write_result};
use crate::args::MergeCmd;

pub fn run(c: MergeCmd) -> anyhow::Result<ExitCode> {
    let results = c
        .results
        .iter()
        .map(|p| read_result(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let merged = throng_result::RunResult::merge(&results).map_err(|e| UsageError(e.to_string()))?;
    write_result(&c.output, &merged)?;
    let m = &merged.measurements;
    eprintln!(
        "throng: merged {} results into '{}': {} requests ({} ok), latency p99 {}",
        results.len(),
        c.output.display(),
        m.requests.ended(),
        m.requests.ok,
        m.phase("latency").map_or_else(
            || "-".to_string(),
            |h| throng_report::format::us(h.quantile(0.99) as f64)
        ),
    );
    Ok(ExitCode::SUCCESS)
}
