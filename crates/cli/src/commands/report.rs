//! `throng report`: one result, or a result set (its runs added up, and in
//! the text view one line per run).

use std::process::ExitCode;

use anyhow::Context;
use throng_result::{Document, RunResult};

use super::shared::{print_runs, read_document, view};
use crate::args::ReportCmd;

pub fn run(c: ReportCmd) -> anyhow::Result<ExitCode> {
    // A set prints as a set even when it holds one run (an interrupted
    // --repeat), as the run that wrote it did.
    let (runs, as_set) = match read_document(&c.result)? {
        Document::Single(r) => (vec![*r], false),
        Document::Set(s) => (s.runs, true),
    };
    super::export::check_outputs(&[("--html", c.html.as_deref())])?;
    if c.csv.is_some() || c.hdr_log.is_some() || c.html.is_some() {
        let merged = RunResult::merge_sequential(&runs).context("adding up the runs")?;
        super::export::open(c.csv.as_deref(), c.hdr_log.as_deref())?.write(&merged)?;
        if let Some(path) = &c.html {
            // The page is the report: nothing else on stdout.
            super::shared::write_html(path, &merged)?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    print_runs(view(c.format), &runs, as_set, false)?;
    Ok(ExitCode::SUCCESS)
}
