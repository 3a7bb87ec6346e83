//! `throng http`.

use std::process::ExitCode;

use anyhow::Context as _;
use throng_engine::Control;
use throng_plan::{HttpArgs, HttpPlan};

use super::{UsageError, print_report, run_exit_code, view, write_html, write_result};
use crate::args::HttpCmd;
use crate::progress::Display;
use crate::signals;

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
    })?;
    let tls = match plan.tls {
        Some(_) => Some(super::tls::client_config(&c.tls, &[b"http/1.1"])?),
        None => None,
    };

    let control = Control::new();
    signals::forward_to(&control);
    let display = Display::new(c.quiet);
    let result = throng_engine::run_http(&plan, tls, &control, &mut |p| display.tick(p));
    display.finish();
    let result = result.context("the run could not start")?;

    if let Some(path) = &c.json {
        write_result(path, &result)?;
    }
    if let Some(path) = &c.html {
        write_html(path, &result)?;
    }
    print_report(view(c.format), &result)?;
    Ok(run_exit_code(&result))
}
