//! `throng merge`.

use std::process::ExitCode;

use throng_result::RunResult;

use super::shared::{read_document, write_result};
use crate::args::MergeCmd;
use crate::exit::UsageError;

pub fn run(c: MergeCmd) -> anyhow::Result<ExitCode> {
    // Files are parts that ran side by side; a set's runs ran one after
    // another, so each set is first added up in sequence.
    super::export::check_outputs(&[("--output", Some(&c.output))])?;
    let mut results = Vec::new();
    for path in &c.results {
        let runs = read_document(path)?.into_runs();
        for (i, run) in runs.iter().enumerate() {
            run.books().map_err(|problem| {
                let which = if runs.len() > 1 {
                    format!(" (run {})", i + 1)
                } else {
                    String::new()
                };
                UsageError(format!(
                    "'{}'{which}: the books do not balance: {problem}; merge only undamaged results",
                    path.display()
                ))
            })?;
        }
        let one = RunResult::merge_sequential(&runs).map_err(|e| UsageError(format!("'{}': {e}", path.display())))?;
        results.push(one);
    }
    let mixed = mixed_plans(&c, &results)?;
    let mut merged = RunResult::merge(&results).map_err(|e| {
        let files: Vec<String> = c.results.iter().map(|p| format!("'{}'", p.display())).collect();
        UsageError(format!("{}: {e}", files.join(", ")))
    })?;
    merged.notes.extend(mixed);
    write_result(&c.output, &merged)?;
    let m = &merged.measurements;
    say!(
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
            say!("throng: merge: {} (--allow-partial: exit 0)", problems.join("; "));
        } else {
            say!(
                "throng: merge: {}; the merged file says so; --allow-partial accepts it",
                problems.join("; ")
            );
            return Ok(crate::exit::Outcome::Failed.into());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How each file's plan differs from the first's: an error without
/// `--allow-mixed`, else the notes the merged result carries.
fn mixed_plans(c: &MergeCmd, results: &[RunResult]) -> anyhow::Result<Vec<String>> {
    let (Some(first), Some(first_path)) = (results.first(), c.results.first()) else {
        return Ok(Vec::new());
    };
    let mut notes = Vec::new();
    for (r, path) in results.iter().zip(&c.results).skip(1) {
        let differences = first.plan.differences(&r.plan);
        if differences.is_empty() {
            continue;
        }
        let what = differences.join(", ");
        if first.plan.command() != r.plan.command() {
            return Err(UsageError(format!(
                "'{}' and '{}' come from different commands ({what}): their counts mean different things and cannot be added, even with --allow-mixed",
                first_path.display(),
                path.display()
            ))
            .into());
        }
        if !c.allow_mixed {
            return Err(UsageError(format!(
                "'{}' and '{}' ran different plans ({what}); merge parts of one test, or give --allow-mixed to add them up anyway",
                first_path.display(),
                path.display()
            ))
            .into());
        }
        notes.push(format!(
            "MIXED PLANS (--allow-mixed): '{}' ran a different plan than '{}' ({what}); the plan shown is the first file's",
            path.display(),
            first_path.display()
        ));
    }
    Ok(notes)
}
