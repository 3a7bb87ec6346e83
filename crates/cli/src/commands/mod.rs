//! One function per subcommand; each returns the process's exit code.

mod certs;
mod compare;
mod completions;
mod demo;
mod export;
mod grpc;
mod grpc_reflect;
mod history;
mod http;
mod k8s;
mod merge;
mod reach;
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

use crate::exit::Outcome;
pub use crate::exit::{Interrupted, UsageError};

/// Runs the command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Http(c) => http::run(*c),
        Command::Grpc(c) => grpc::run(*c),
        Command::Storm(c) => storm::run(*c),
        Command::Serve(c) => serve::run(c),
        Command::Demo(c) => demo::run(c),
        Command::Report(c) => report::run(c),
        Command::Merge(c) => merge::run(c),
        Command::Compare(c) => compare::run(c),
        Command::History(c) => history::run(c),
        Command::Certs(c) => certs::run(c),
        Command::Sweep(c) => sweep::run(c),
        Command::Run(c) => run::run(*c),
        Command::StormPart => storm::run_part(),
        Command::K8s(c) => k8s::run(c),
        Command::Completions(c) => completions::completions(c),
        Command::Man(c) => completions::man(c),
    }
}

/// The error and its causes on one line.
pub fn one_line(e: &anyhow::Error) -> String {
    e.chain().map(ToString::to_string).collect::<Vec<_>>().join(": ")
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

/// Reads a scenario or sweep file (`what` names it in errors), refusing one
/// larger than [`throng_plan::input::MAX_FILE_BYTES`] without reading more
/// than that.
fn read_plan_file(path: &Path, what: &str) -> Result<String, UsageError> {
    use std::io::Read as _;
    let cannot = |e: std::io::Error| UsageError(format!("cannot read the {what} '{}': {e}", path.display()));
    let limit = throng_plan::input::MAX_FILE_BYTES;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(UsageError(format!(
            "the {what} '{}' is larger than the limit of {} MiB; a {what} describes a run in a few kilobytes",
            path.display(),
            limit >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        UsageError(format!(
            "the {what} '{}' is not UTF-8 text (byte {}); save it as UTF-8",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Files a scenario file names (its data CSV, its .proto files), read
/// whole: at most this many bytes, so that a device or an endless file
/// (`/dev/zero`, a FIFO) is refused instead of filling the memory.
const MAX_SIDE_FILE_BYTES: u64 = 256 << 20;

/// Reads a file a scenario file names, bounded by [`MAX_SIDE_FILE_BYTES`];
/// the error says what is wrong (the caller says which file).
fn read_side_file(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SIDE_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_SIDE_FILE_BYTES {
        return Err(format!(
            "larger than the limit of {} MiB; give a smaller file (split a data file across runs)",
            MAX_SIDE_FILE_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (byte {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
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

/// Writes the report of several runs to stdout, or to stderr when stdout
/// carries the result document (`--json -`). One run: as [`print_report`];
/// several: added up, plus a table per run in text; the JSON view prints the
/// result set.
fn print_runs(v: View, runs: &[RunResult], as_set: bool, to_stderr: bool) -> anyhow::Result<()> {
    let Some(first) = runs.first() else {
        return Ok(());
    };
    throng_report::supports(v, first).map_err(UsageError)?;
    let mut buf = Vec::new();
    if !as_set {
        throng_report::write(v, first, &mut buf).context("rendering the report")?;
    } else if v == View::Json {
        ResultSet::new(runs.to_vec())
            .to_writer(&mut buf)
            .context("rendering the result set")?;
    } else {
        throng_report::runs::write_set(v, runs, &mut buf).context("rendering the report")?;
    }
    if to_stderr {
        // The report is for the person at the terminal; a closed stderr is no error.
        let _ = std::io::stderr().lock().write_all(&buf);
        return Ok(());
    }
    print_bytes(&buf)
}

/// `--json -`: the result document goes to stdout.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
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
/// one run; `-` is stdout, and the report then goes to stderr), prints the
/// report, and returns how the runs ended.
fn finish_runs(
    repeat: RepeatArgs,
    runs: &[RunResult],
    json: Option<&Path>,
    format: Format,
) -> anyhow::Result<(Outcome, RunResult)> {
    let as_set = repeat.count > 1;
    let json_to_stdout = json.is_some_and(is_stdout);
    if json_to_stdout {
        let mut buf = Vec::new();
        match runs {
            [one] if !as_set => one.to_writer(&mut buf).context("rendering the result")?,
            _ => ResultSet::new(runs.to_vec())
                .to_writer(&mut buf)
                .context("rendering the result set")?,
        }
        print_bytes(&buf)?;
    } else if let Some(path) = json {
        match runs {
            [one] if !as_set => write_result(path, one)?,
            _ => write_set(path, runs)?,
        }
    }
    print_runs(view(format), runs, as_set, json_to_stdout)?;
    let merged = RunResult::merge_sequential(runs).context("adding up the runs")?;
    Ok((run_outcome(&merged), merged))
}

/// How a finished run ended: interrupted, thresholds failed, failed (every
/// unit of work failed: requests for http and scenarios, connections — and
/// then requests, when it sends any — for storms), or ok. Each failure is
/// said on stderr, also when a higher one decides the code.
fn run_outcome(r: &RunResult) -> Outcome {
    if r.interrupted {
        return Outcome::Interrupted;
    }
    let every_failed = every_unit_failed(r);
    if !r.thresholds_passed() {
        let failed = r.thresholds.iter().filter(|v| !v.passed).count();
        eprintln!("throng: {failed} of {} thresholds failed", r.thresholds.len());
        return Outcome::Thresholds;
    }
    if every_failed { Outcome::Failed } else { Outcome::Ok }
}

/// True when every unit of work failed, said on stderr with the likely cause.
fn every_unit_failed(r: &RunResult) -> bool {
    let m = &r.measurements;
    let all_failed = |o: &throng_metrics::Outcomes| o.attempted > 0 && o.ok == 0;
    let (req, unit) = match r.unit() {
        throng_result::Unit::Connections if all_failed(&m.connections) || !all_failed(&m.requests) => {
            (&m.connections, "connection")
        }
        _ => (&m.requests, "request"),
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
            "check_failed" if matches!(r.plan, throng_result::Plan::Storm(_)) => {
                "the server answered every request with a status outside 200-399".to_string()
            }
            "check_failed"
                if matches!(&r.plan, throng_result::Plan::Http(p)
                    if p.grpc.as_ref().is_some_and(|g| g.expect_messages.is_some())) =>
            {
                "every call ended with a gRPC status or a number of messages the run does not expect (see \
                 grpc-status and messages); see --expect-code and --expect-messages"
                    .to_string()
            }
            "check_failed" if matches!(&r.plan, throng_result::Plan::Http(p) if p.grpc.is_some()) => {
                "the server answered every call with a gRPC status the run does not expect (see grpc-status); \
                 see --expect-code"
                    .to_string()
            }
            "check_failed" => {
                "the server answered, with statuses the plan does not expect; see --expect-status".to_string()
            }
            "grpc.deadline_exceeded" => {
                format!("{target} answered no call within --deadline; give a longer one, or look at the server")
            }
            "timeout.handshake" => {
                format!("{target} accepted connections but did not finish the protocol handshake in time")
            }
            k if k.starts_with("timeout.") => format!("{target} did not answer within --timeout"),
            "auth_failed" => {
                "the server refused the credentials; check user:password in the URL or --nats-creds".to_string()
            }
            k if k.starts_with("protocol.") => "the server answered the protocol handshake with an error".to_string(),
            k if k.starts_with("proxy.") => format!(
                "the proxy did not open the way to {target}: {}",
                throng_metrics::ErrorClass::describe(k)
            ),
            "protocol" => format!(
                "{target} answered with something that breaks the protocol (malformed, or a line longer than the \
                 limit; see the README's error classes)"
            ),
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
        return true;
    }
    false
}

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
