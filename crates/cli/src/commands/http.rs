//! `throng http`.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use throng_plan::{HttpArgs, HttpPlan, MAX_BODY_BYTES};

use super::segment::refuse_start_at_with_repeat;
use super::{UsageError, finish_runs, repeated};
use crate::args::HttpCmd;
use crate::live::Watch;
use crate::progress::Display;

pub fn run(c: HttpCmd) -> anyhow::Result<ExitCode> {
    let body = match &c.body {
        Some(path) => Some((path.display().to_string(), read_body(path)?)),
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
        secret_headers: c.secret_headers,
        timeout: c.timeout,
        no_keepalive: c.no_keepalive,
        http2: c.http2,
        http3: c.http3,
        streams: c.streams,
        expect_status: c.expect_status,
        tls: super::tls::settings(&c.tls),
        cores: throng_engine::sys::cores(),
        segment: seg.segment.clone(),
        start_at_unix_ms: seg.start_at_unix_ms,
    })?;
    let tls = match &plan.tls {
        Some(settings) => Some(super::tls::client_config(
            settings,
            Path::new(""),
            &[plan.http.alpn().as_bytes()],
        )?),
        None => None,
    };
    super::export::check_outputs(&[
        ("--json", c.output.json.as_deref()),
        ("--html", c.output.html.as_deref()),
    ])?;
    let (exports, rows) = super::export::open_run(&c.output.export)?;

    super::export::refuse_rows_with_repeat(&c.output.export, c.repeat.count)?;
    let watch = Watch::start(&c.live, BTreeMap::new())?;
    let runs = repeated(c.repeat, c.output.quiet, |control| {
        super::segment::wait_for_start(plan.start_at_unix_ms, control, c.output.quiet)?;
        let display = Display::new(c.output.quiet);
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
    let (code, merged) = finish_runs(c.repeat, &runs, c.output.json.as_deref(), c.output.format)?;
    exports.write(&merged)?;
    if let Some(path) = &c.output.html {
        super::write_html(path, &merged)?;
    }
    watch.linger();
    Ok(code.into())
}

/// Reads `--body`, never past [`MAX_BODY_BYTES`] + 1 bytes: `/dev/zero`, a
/// growing file or an endless pipe is refused after at most that much.
fn read_body(path: &Path) -> Result<Vec<u8>, UsageError> {
    let cannot = |e: std::io::Error| {
        UsageError(format!(
            "--body {}: cannot read it: {e}; give a readable file",
            path.display()
        ))
    };
    let too_big = |size: String| {
        UsageError(format!(
            "--body {}: the file is {size}, over the limit of {MAX_BODY_BYTES} bytes (64 MiB) a request body \
             may have; send a smaller file",
            path.display()
        ))
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if meta.is_file() && meta.len() > MAX_BODY_BYTES {
        return Err(too_big(format!("{} bytes", meta.len())));
    }
    // Room for the request head too: the plan puts it in front of the body
    // in this same buffer.
    let mut bytes = Vec::with_capacity(if meta.is_file() {
        meta.len() as usize + (16 << 10)
    } else {
        0
    });
    file.take(MAX_BODY_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_BODY_BYTES {
        return Err(too_big(format!(
            "more than {MAX_BODY_BYTES} bytes (it is not a regular file, or it grew)"
        )));
    }
    Ok(bytes)
}
