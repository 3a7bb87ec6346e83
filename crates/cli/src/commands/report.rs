//! `throng report`.

use std::process::ExitCode;

use super::{print_report, read_result, view};
use crate::args::ReportCmd;

pub fn run(c: ReportCmd) -> anyhow::Result<ExitCode> {
    let result = read_result(&c.result)?;
    super::export::open(c.csv.as_deref(), c.hdr_log.as_deref())?.write(&result)?;
    print_report(view(c.format), &result)?;
    Ok(ExitCode::SUCCESS)
}
