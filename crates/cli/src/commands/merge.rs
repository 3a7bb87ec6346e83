//! `throng merge`.

use std::process::ExitCode;

use throng_result::RunResult;

use super::{UsageError, read_document, write_result};
use crate::args::MergeCmd;

pub fn run(c: MergeCmd) -> anyhow::Result<ExitCode> {
    // Files are parts that ran side by side; a set's runs ran one after
    // another, so each set is first added up in sequence.
    super::export::check_outputs(&[("--output", Some(&c.output))])?;
    let mut results = Vec::new();
    for path in &c.results {
        let runs = read_document(path)?.into_runs();
        let one = RunResult::merge_sequential(&runs).map_err(|e| UsageError(format!("'{}': {e}", path.display())))?;
        results.push(one);
    }
    let merged = RunResult::merge(&results).map_err(|e| UsageError(e.to_string()))?;
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
    // Never a silently partial total: the file is written (with the
    // notes), but the exit status says what is missing.
    let problems: Vec<&str> = merged.segment_notes().collect();
    if !problems.is_empty() {
        if c.allow_partial {
            eprintln!("throng: merge: {} (--allow-partial: exit 0)", problems.join("; "));
        } else {
            eprintln!(
                "throng: merge: {}; the merged file says so; --allow-partial accepts it",
                problems.join("; ")
            );
            return Ok(crate::exit::Outcome::Failed.into());
        }
    }
    Ok(ExitCode::SUCCESS)
}
