//! `throng report`.

use std::process::ExitCode;

use super::{print_report, read_result, view, write_html};
use crate::args::ReportCmd;

pub fn run(c: ReportCmd) -> anyhow::Result<ExitCode> {
    let result = read_result(&c.result)?;
    if let Some(path) = &c.html {
        write_html(path, &result)?;
        return Ok(ExitCode::SUCCESS);
    }
    print_report(view(c.format), &result)?;
    Ok(ExitCode::SUCCESS)
}
