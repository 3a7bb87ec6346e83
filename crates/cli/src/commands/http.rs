//! `throng http`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use throng_plan::{HttpArgs, HttpPlan};

use super::segment::refuse_start_at_with_repeat;
use super::{UsageError, finish_runs, repeated};
use crate::args::HttpCmd;
use crate::live::Watch;
use crate::progress::Display;

pub fn run(c: HttpCmd) -> anyhow::Result<ExitCode> {
    let body = match &c.body {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|e| {
                UsageError(format!(
                    "--body {}: cannot read it: {e}; give a readable file",
                    path.display()
                ))
            })?;
            Some((path.display().to_string(), bytes))
        }
        None => None,
    };
    let seg = super::segment::parse(&c.segments)?;
    refuse_start_at_with_repeat(&seg, c.repeat.count)?;
    let plan = HttpPlan::from_args(HttpArgs {
        url: c.url,
        connections: c.connections,
        requests: c.requests,
        duration: c.duration,
        rate: c.rate,
        threads: c.threads,
        method: c.method,
        headers: c.headers,
        body,
        timeout: c.timeout,
        no_keepalive: c.no_keepalive,
        expect_status: c.expect_status,
        tls: super::tls::settings(&c.tls),
        cores: throng_engine::sys::cores(),
        segment: seg.segment.clone(),
        start_at_unix_ms: seg.start_at_unix_ms,
    })?;
    let tls = match plan.tls {
        Some(_) => Some(super::tls::client_config(&c.tls, &[b"http/1.1"])?),
        None => None,
    };
    super::export::check_outputs(&[("--json", c.json.as_deref()), ("--html", c.html.as_deref())])?;
    let (exports, rows) = super::export::open_run(&c.export)?;

    super::export::refuse_rows_with_repeat(&c.export, c.repeat.count)?;
    let watch = Watch::start(&c.live, BTreeMap::new())?;
    let runs = repeated(c.repeat, c.quiet, |control| {
        super::segment::wait_for_start(plan.start_at_unix_ms, control, c.quiet)?;
        let display = Display::new(c.quiet);
        watch.prepare(control, display.is_shown());
        let result = throng_engine::run_http(&plan, tls.clone(), rows.as_ref(), control, &mut |p| {
            display.tick(p);
            watch.tick(p);
        });
        display.finish();
        let result = result.context("the run could not start")?;
        watch.finished(&result.measurements);
        Ok(result)
    })?;
    let (code, merged) = finish_runs(c.repeat, &runs, c.json.as_deref(), c.format)?;
    exports.write(&merged)?;
    if let Some(path) = &c.html {
        super::write_html(path, &merged)?;
    }
    watch.linger();
    Ok(code.into())
}
