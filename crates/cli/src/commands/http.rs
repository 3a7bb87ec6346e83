//! `throng http`.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use throng_plan::{
    HttpArgs, HttpPlan, MAX_BODY_BYTES, MAX_REQUEST_TABLE_BYTES, MAX_TARGETS_FILE_BYTES, RawTarget, TargetOrder,
};

use super::segment::refuse_start_at_with_repeat;
use super::shared::{finish_runs, repeated};
use crate::args::{HttpCmd, TargetsOrder};
use crate::exit::UsageError;
use crate::live::Watch;
use crate::progress::Display;

/// A checked `throng http` command: its plan and the flags the run itself
/// reads.
pub(super) struct Prepared {
    plan: HttpPlan,
    seg: super::segment::Segmenting,
    tls: Option<std::sync::Arc<throng_tls::rustls::ClientConfig>>,
    output: crate::args::OutputArgs<crate::args::Format>,
    live: crate::args::LiveArgs,
    repeat: crate::args::RepeatArgs,
}

pub fn run(c: HttpCmd) -> anyhow::Result<ExitCode> {
    let Prepared {
        plan,
        seg,
        tls,
        output,
        live,
        repeat,
    } = prepare(c)?;
    super::export::check_outputs(&[("--json", output.json.as_deref()), ("--html", output.html.as_deref())])?;
    let (exports, rows) = super::export::open_run(&output.export)?;

    super::export::refuse_rows_with_repeat(&output.export, repeat.count)?;
    if let Some(why) = throng_engine::auto_fallback(&plan, rows.is_some()) {
        say!("throng: {why}; running on epoll instead (--io epoll skips this check)");
    }
    let watch = Watch::start(
        &live,
        BTreeMap::new(),
        seg.segment.as_ref().map(throng_plan::Segment::range),
        seg.start_at_unix_ms,
    )?;
    let runs = repeated(repeat, output.quiet, |control| {
        super::segment::wait_for_start(plan.start_at_unix_ms, control, output.quiet)?;
        let display = Display::new(output.quiet);
        watch.prepare(control, display.is_shown());
        let result = throng_engine::run_http(&plan, tls.clone(), rows.as_ref(), control, &mut |p| {
            display.tick(p);
            watch.tick(p);
        });
        display.finish();
        let mut result = result.context("the run could not start")?;
        watch.finished(&mut result);
        Ok(result)
    })?;
    let (code, merged) = finish_runs(repeat, &runs, output.json.as_deref(), output.format)?;
    exports.write(&merged)?;
    if let Some(path) = &output.html {
        super::shared::write_html(path, &merged)?;
    }
    watch.linger();
    Ok(code.into())
}

/// Checks the command and makes its plan: everything `throng http` does
/// before it runs (`throng coordinate` checks a command with it once).
pub(super) fn prepare(c: HttpCmd) -> anyhow::Result<Prepared> {
    if c.data.as_deref() == Some("@-") && c.targets.as_deref() == Some(Path::new("-")) {
        return Err(UsageError("--data @- and --targets - both read stdin; give one of them a file".into()).into());
    }
    let model = c.model.as_deref().unwrap_or("default");
    if c.llm.is_none() {
        for (flag, given) in [("--prompts", c.prompts.is_some()), ("--model", c.model.is_some())] {
            if given {
                return Err(UsageError(format!("{flag} is for LLM streams; add --llm openai")).into());
            }
        }
    }
    let mut body = match (&c.body, &c.data) {
        (Some(path), _) => Some((path.display().to_string(), read_body(path)?)),
        (None, Some(data)) => Some(read_data(data)?),
        (None, None) => None,
    };
    let prompts = match &c.prompts {
        Some(path) => {
            let file = path.display().to_string();
            let text = read_bounded(path, "--prompts", MAX_TARGETS_FILE_BYTES)?;
            Some((file.clone(), super::llm::prompts(&file, &text, model)?))
        }
        None => None,
    };
    let mut content_type = c.content_type;
    if c.llm.is_some() {
        if body.is_none() && prompts.is_none() && c.body_lines.is_none() {
            body = Some(("--llm".to_string(), super::llm::default_body(model)));
        }
        content_type.get_or_insert_with(|| "application/json".to_string());
    }
    let mut targets: Vec<RawTarget> = c
        .more_urls
        .iter()
        .enumerate()
        .map(|(i, url)| RawTarget {
            at: format!("URL {}", i + 2),
            url: url.clone(),
            ..RawTarget::default()
        })
        .collect();
    if let Some(path) = &c.targets {
        targets.extend(read_targets(path)?);
    }
    let body_lines = match &c.body_lines {
        Some(path) => Some((
            path.display().to_string(),
            read_bounded(path, "--body-lines", MAX_TARGETS_FILE_BYTES)?,
        )),
        None => prompts,
    };
    for t in &c.thresholds {
        throng_scenario::Threshold::read_line(t).map_err(|e| UsageError(format!("--threshold: {e}")))?;
    }
    let seg = super::segment::parse(&c.segments)?;
    refuse_start_at_with_repeat(&seg, c.repeat.count)?;
    let (mut headers, header_lines) = super::reach::split_headers(c.headers)?;
    // An event-stream client says what it reads (the WHATWG EventSource
    // does), unless the user said otherwise.
    let names_accept = |h: &str| {
        h.split(':')
            .next()
            .is_some_and(|n| n.trim().eq_ignore_ascii_case("accept"))
    };
    if (c.sse || c.llm.is_some())
        && !headers.iter().any(|h| names_accept(h))
        && !header_lines.iter().any(|(_, h)| names_accept(h))
    {
        headers.push("Accept: text/event-stream".to_string());
    }
    let bearer = c.bearer_file.as_deref().map(super::reach::bearer).transpose()?;
    let plan = HttpPlan::from_args(HttpArgs {
        url: c.url.unwrap_or_default(),
        connections: c.connections,
        requests: c.requests,
        duration: c.duration,
        rate: c.rate,
        threads: c.threads,
        method: c.method,
        headers,
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
        basic_auth: c.basic_auth,
        bearer,
        header_lines,
        reach: super::reach::args(&c.reach),
        targets,
        targets_order: match c.targets_order {
            TargetsOrder::RoundRobin => TargetOrder::RoundRobin,
            TargetsOrder::Sequential => TargetOrder::Sequential,
            TargetsOrder::Random => TargetOrder::Random,
        },
        body_lines,
        content_type,
        thresholds: c.thresholds,
        redirects: c.redirects,
        cookies: c.cookies,
        trace_context: c.trace_context.map(sampling),
        slowest: c.slowest,
        stream: throng_plan::StreamArgs {
            sse: c.sse,
            llm: c.llm.map(|_| "openai".to_string()),
            events: c.sse_events,
            duration: c.sse_duration,
            slo: c.slo,
        },
        io: match c.io {
            crate::args::IoArg::Auto => throng_plan::IoModel::Auto,
            crate::args::IoArg::Epoll => throng_plan::IoModel::Epoll,
            crate::args::IoArg::Uring => throng_plan::IoModel::Uring,
        },
    })?;
    // A threshold that could only judge nothing in this plan (a target it
    // does not have, dropped in a closed loop) is refused before the run.
    let target_names = plan.target_names();
    for t in &plan.thresholds {
        let said = |e: &dyn std::fmt::Display| UsageError(format!("--threshold: {e}"));
        throng_scenario::Threshold::read_line(t)
            .map_err(|e| said(&e))?
            .check_http(&target_names, plan.is_open_loop())
            .map_err(|e| said(&e))?;
    }
    let tls = match &plan.tls {
        Some(settings) => Some(super::tls::client_config(
            settings,
            Path::new(""),
            &[plan.http.alpn().as_bytes()],
        )?),
        None => None,
    };
    Ok(Prepared {
        plan,
        seg,
        tls,
        output: c.output,
        live: c.live,
        repeat: c.repeat,
    })
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
    let size = std::fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len());
    match throng_plan::input::read_limited(path, MAX_BODY_BYTES) {
        Ok(bytes) => Ok(bytes),
        Err(throng_plan::input::ReadError::Io(e)) => Err(cannot(e)),
        Err(_) => Err(too_big(size.map_or_else(
            || format!("more than {MAX_BODY_BYTES} bytes (it is not a regular file, or it grew)"),
            |n| format!("{n} bytes"),
        ))),
    }
}

/// `--data`: TEXT as given, `@FILE` read (at most [`MAX_BODY_BYTES`]), or
/// `@-` read from stdin (likewise). Returns where the body came from and
/// its bytes.
pub(super) fn read_data(data: &str) -> Result<(String, Vec<u8>), UsageError> {
    match data.strip_prefix('@') {
        None => Ok(("--data".to_string(), data.as_bytes().to_vec())),
        Some("-") => Ok((
            "stdin".to_string(),
            read_stdin(
                "--data @-",
                "while reading --data @- from stdin",
                MAX_BODY_BYTES,
                "the limit of a request body",
            )?,
        )),
        Some(path) => {
            let path = Path::new(path);
            let bytes = read_bounded(path, "--data", MAX_BODY_BYTES)?;
            Ok((path.display().to_string(), bytes))
        }
    }
}

/// Reads stdin for `flag`, never past `limit` + 1 bytes; a silent stdin
/// does not hold off Ctrl-C.
fn read_stdin(flag: &str, during: &'static str, limit: u64, what: &str) -> Result<Vec<u8>, UsageError> {
    crate::signals::exit_until_run(during);
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| UsageError(format!("{flag}: cannot read stdin: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(UsageError(format!(
            "{flag}: stdin holds more than {limit} bytes ({} MiB), {what}; send less",
            limit >> 20
        )));
    }
    Ok(bytes)
}

/// Reads `path` for `flag`, never past `limit` + 1 bytes.
fn read_bounded(path: &Path, flag: &str, limit: u64) -> Result<Vec<u8>, UsageError> {
    let cannot = |e: std::io::Error| {
        UsageError(format!(
            "{flag} {}: cannot read it: {e}; give a readable file",
            path.display()
        ))
    };
    match throng_plan::input::read_limited(path, limit) {
        Ok(bytes) => Ok(bytes),
        Err(throng_plan::input::ReadError::Io(e)) => Err(cannot(e)),
        Err(_) => Err(UsageError(format!(
            "{flag} {}: the file is over the limit of {limit} bytes ({} MiB); use a smaller file",
            path.display(),
            limit >> 20
        ))),
    }
}

/// The body files of a `--targets` file together come to more than the
/// request table holds.
#[derive(Debug, thiserror::Error)]
#[error("the bodies read so far come to more than {limit_mib} MiB; use fewer or smaller body files")]
struct BodiesTooLarge {
    limit_mib: usize,
}

/// Reads and parses `--targets` (at most [`MAX_TARGETS_FILE_BYTES`]; `-`
/// reads stdin, as vegeta's users pipe targets in); a relative `@body` path
/// is read from the file's directory (the working directory for stdin), each body at
/// most [`MAX_BODY_BYTES`] and all of them together at most
/// [`MAX_REQUEST_TABLE_BYTES`].
fn read_targets(path: &Path) -> anyhow::Result<Vec<RawTarget>> {
    let stdin = path == Path::new("-");
    let name = if stdin {
        "stdin".to_string()
    } else {
        path.display().to_string()
    };
    let bytes = if stdin {
        read_stdin(
            "--targets -",
            "while reading --targets - from stdin",
            MAX_TARGETS_FILE_BYTES,
            "the limit of a targets file",
        )?
    } else {
        read_bounded(path, "--targets", MAX_TARGETS_FILE_BYTES)?
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
        UsageError(format!(
            "--targets: {name}:{line}: not UTF-8 text; save the file as UTF-8"
        ))
    })?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut total: u64 = 0;
    let mut read = |p: &str| -> Result<Vec<u8>, throng_plan::BodyReadError> {
        let file = dir.join(p);
        let bytes = read_bounded(&file, "body", MAX_BODY_BYTES)?;
        total += bytes.len() as u64;
        if total > MAX_REQUEST_TABLE_BYTES as u64 {
            return Err(Box::new(BodiesTooLarge {
                limit_mib: MAX_REQUEST_TABLE_BYTES >> 20,
            }));
        }
        Ok(bytes)
    };
    Ok(throng_plan::parse_targets_file(&name, &text, &mut read)?)
}

/// `--trace-context`'s value as the plan takes it.
pub(super) fn sampling(t: crate::args::TraceArg) -> throng_plan::Sampling {
    match t {
        crate::args::TraceArg::Sampled => throng_plan::Sampling::Sampled,
        crate::args::TraceArg::Unsampled => throng_plan::Sampling::Unsampled,
    }
}
