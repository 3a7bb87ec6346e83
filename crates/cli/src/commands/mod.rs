//! One function per subcommand; each returns the process's exit code.

mod certs;
mod compare;
mod demo;
mod export;
mod http;
mod k8s;
mod merge;
mod report;
mod run;
mod segment;
mod serve;
mod storm;
mod sweep;
mod tls;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use throng_engine::Control;
use throng_report::View;
use throng_result::{ResultSet, RunResult};

use crate::args::{Cli, Command, Format, RepeatArgs};

/// Exit code: the run happened but failed (every request failed, target unreachable).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad usage or configuration.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the run finished but a threshold failed (as k6).
pub const EXIT_THRESHOLDS: u8 = 99;
/// Exit code: interrupted by a signal.
pub const EXIT_INTERRUPTED: u8 = 130;

/// A mistake in what the user asked for (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs the command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Http(c) => http::run(*c),
        Command::Storm(c) => storm::run(*c),
        Command::Serve(c) => serve::run(c),
        Command::Demo(c) => demo::run(c),
        Command::Report(c) => report::run(c),
        Command::Merge(c) => merge::run(c),
        Command::Compare(c) => compare::run(c),
        Command::Certs(c) => certs::run(c),
        Command::Sweep(c) => sweep::run(c),
        Command::Run(c) => run::run(*c),
        Command::K8s(c) => k8s::run(c),
    }
}

/// The error and its causes on one line.
pub fn one_line(e: &anyhow::Error) -> String {
    e.chain().map(ToString::to_string).collect::<Vec<_>>().join(": ")
}

/// 2 for usage and configuration errors, 1 for everything else.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    let usage = e.chain().any(|c| {
        c.is::<UsageError>()
            || c.is::<throng_plan::PlanError>()
            || matches!(
                c.downcast_ref::<throng_engine::EngineError>(),
                Some(throng_engine::EngineError::FdLimit { .. })
            )
    });
    if usage { EXIT_USAGE } else { EXIT_FAILED }
}

fn view(f: Format) -> View {
    match f {
        Format::Text => View::Text,
        Format::Ab => View::Ab,
        Format::Httperf => View::Httperf,
        Format::Json => View::Json,
    }
}

/// Writes a report to stdout; a closed pipe (`| head`) is not an error.
fn print_report(v: View, result: &RunResult) -> anyhow::Result<()> {
    throng_report::supports(v, result).map_err(UsageError)?;
    let mut buf = Vec::new();
    throng_report::write(v, result, &mut buf).context("rendering the report")?;
    print_bytes(&buf)
}

fn print_bytes(buf: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(buf).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// Writes the result document to `path`.
fn write_result(path: &Path, result: &RunResult) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).with_context(|| {
        format!(
            "cannot write the result to '{}' (check the directory exists and is writable)",
            path.display()
        )
    })?;
    result
        .to_writer(std::io::BufWriter::new(file))
        .with_context(|| format!("writing '{}'", path.display()))
}

/// Writes the HTML report of `result` to `path`.
fn write_html(path: &Path, result: &RunResult) -> anyhow::Result<()> {
    std::fs::write(path, throng_report::html::render(result)).with_context(|| {
        format!(
            "cannot write the HTML report to '{}' (check the directory exists and is writable)",
            path.display()
        )
    })
}

/// Reads a result document or a result set.
fn read_document(path: &Path) -> anyhow::Result<throng_result::Document> {
    let file = std::fs::File::open(path).map_err(|e| UsageError(format!("cannot read '{}': {e}", path.display())))?;
    throng_result::Document::from_reader(std::io::BufReader::new(file))
        .map_err(|e| UsageError(format!("'{}': {e}", path.display())).into())
}

/// Writes a result set (every run of a `--repeat`) to `path`.
fn write_set(path: &Path, runs: &[RunResult]) -> anyhow::Result<()> {
    let file = std::fs::File::create(path).with_context(|| {
        format!(
            "cannot write the result set to '{}' (check the directory exists and is writable)",
            path.display()
        )
    })?;
    ResultSet::new(runs.to_vec())
        .to_writer(std::io::BufWriter::new(file))
        .with_context(|| format!("writing '{}'", path.display()))
}

/// Writes the report of several runs to stdout (one run: as
/// [`print_report`]; several: added up, plus a table per run in text; the
/// JSON view prints the result set).
fn print_runs(v: View, runs: &[RunResult], as_set: bool) -> anyhow::Result<()> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    if !as_set {
        return print_report(v, first);
    }
    throng_report::supports(v, first).map_err(UsageError)?;
    let mut buf = Vec::new();
    if v == View::Json {
        ResultSet::new(runs.to_vec())
            .to_writer(&mut buf)
            .context("rendering the result set")?;
    } else {
        throng_report::runs::write_set(v, runs, &mut buf).context("rendering the report")?;
    }
    print_bytes(&buf)
}

/// Runs `once` `repeat.count` times in a row, `repeat.settle` apart, each
/// with its own [`Control`] (a signal stops the current run and skips the
/// rest). With more than one run, says each run's figures on stderr as it
/// ends (unless `quiet`).
fn repeated(
    repeat: RepeatArgs,
    quiet: bool,
    mut once: impl FnMut(&Control) -> anyhow::Result<RunResult>,
) -> anyhow::Result<Vec<RunResult>> {
    let n = repeat.count.max(1) as usize;
    let controls: Vec<Control> = (0..n).map(|_| Control::new()).collect();
    crate::signals::forward_to_all(&controls);
    let mut runs = Vec::with_capacity(n);
    for (i, control) in controls.iter().enumerate() {
        if i > 0 {
            settle(repeat.settle, control);
        }
        if control.was_interrupted() {
            break;
        }
        let r = once(control)?;
        if n > 1 && !quiet {
            eprintln!("throng: {}", throng_report::runs::run_line(&r, i + 1, n));
        }
        let stop = r.interrupted;
        runs.push(r);
        if stop {
            break;
        }
    }
    Ok(runs)
}

/// Sleeps `d`, waking early when `control` is interrupted.
fn settle(d: std::time::Duration, control: &Control) {
    let until = std::time::Instant::now() + d;
    while !control.was_interrupted() {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
    }
}

/// Writes `--json` (one result, or a set when `--repeat` asked for more than
/// one run), prints the report, and returns the exit code the runs deserve.
fn finish_runs(
    repeat: RepeatArgs,
    runs: &[RunResult],
    json: Option<&Path>,
    format: Format,
) -> anyhow::Result<(ExitCode, RunResult)> {
    let as_set = repeat.count > 1;
    if let Some(path) = json {
        match runs {
            [one] if !as_set => write_result(path, one)?,
            _ => write_set(path, runs)?,
        }
    }
    print_runs(view(format), runs, as_set)?;
    let merged = RunResult::merge_sequential(runs).context("adding up the runs")?;
    Ok((run_exit_code(&merged), merged))
}

/// The exit code a finished run deserves, with a line on stderr when it
/// failed.
fn run_exit_code(r: &RunResult) -> ExitCode {
    if r.interrupted {
        return ExitCode::from(EXIT_INTERRUPTED);
    }
    // The unit of work: requests for http, connections for storms.
    let (req, unit) = match &r.plan {
        throng_result::Plan::Http(_) => (&r.measurements.requests, "request"),
        throng_result::Plan::Storm(_) => (&r.measurements.connections, "connection"),
        throng_result::Plan::Run(_) => (&r.measurements.requests, "request"),
    };
    if req.attempted > 0 && req.ok == 0 {
        let mut classes: Vec<(&String, &u64)> = req.errors.iter().collect();
        classes.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = classes.iter().take(3).map(|(k, v)| format!("{v} {k}")).collect();
        let target = r.plan.target_authority();
        let hint = match classes.first().map(|(k, _)| k.as_str()).unwrap_or("") {
            "refused" => format!("is anything listening on {target}?"),
            "check_failed" if matches!(r.plan, throng_result::Plan::Run(_)) => {
                "the server answered, with statuses the steps do not expect; see each request's expect:".to_string()
            }
            "check_failed" => {
                "the server answered, with statuses the plan does not expect; see --expect-status".to_string()
            }
            k if k.starts_with("timeout.") => format!("{target} did not answer within --timeout"),
            "auth_failed" => {
                "the server refused the credentials; check user:password in the URL or --nats-creds".to_string()
            }
            "timeout.handshake" => {
                format!("{target} accepted connections but did not finish the protocol handshake in time")
            }
            k if k.starts_with("protocol.") => "the server answered the protocol handshake with an error".to_string(),
            k if k.starts_with("tls.") => {
                "the TLS handshake failed; check --cacert, --cert/--key and --sni (or --insecure)".to_string()
            }
            _ => match &r.plan {
                throng_result::Plan::Http(_) | throng_result::Plan::Run(_) => {
                    format!("is {target} up and speaking HTTP/1.1?")
                }
                throng_result::Plan::Storm(_) => format!("is {target} up and accepting connections?"),
            },
        };
        eprintln!("throng: every {unit} failed ({}); {hint}", top.join(", "));
        return ExitCode::from(EXIT_FAILED);
    }
    ExitCode::SUCCESS
}

impl std::error::Error for UsageError {}

/// Makes a child process die with this one (SIGKILL when it goes, however
/// it goes): a storm's worker processes would otherwise hold their
/// connections, and `serve --procs` children their port, orphaned, after a
/// `kill -9` of the parent.
pub(crate) fn die_with_this_process(cmd: &mut std::process::Command) {
    let parent = std::process::id();
    let arm = move || {
        // SAFETY: prctl and getppid take no pointers; both are
        // async-signal-safe, as code between fork and exec must be.
        unsafe {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl: then no signal
            // will come, and the child must not start.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    };
    // SAFETY: the closure runs in the child after fork, before exec; it
    // allocates nothing, takes no lock and calls only async-signal-safe
    // functions. The death signal is tied to the forking thread, which is
    // the thread that waits for the children to the end (storm's run_children,
    // serve's main thread).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, arm);
    }
}
