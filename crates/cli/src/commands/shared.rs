//! What the subcommands share: printing and writing results and reports,
//! reading the files a user names, repeated runs and their outcome, the
//! hints a failed run prints. Below every subcommand; `super` only
//! dispatches.

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use throng_engine::Control;
use throng_report::View;
use throng_result::{ResultSet, RunResult};

use crate::args::{Format, RepeatArgs};
use crate::exit::{Outcome, UsageError};

/// The error and its causes on one line.
pub fn one_line(e: &anyhow::Error) -> String {
    e.chain().map(ToString::to_string).collect::<Vec<_>>().join(": ")
}

pub(super) fn view(f: Format) -> View {
    match f {
        Format::Text => View::Text,
        Format::Ab => View::Ab,
        Format::Httperf => View::Httperf,
        Format::Json => View::Json,
    }
}

/// Writes a report to stdout; a closed pipe (`| head`) is not an error.
pub(super) fn print_report(v: View, result: &RunResult) -> anyhow::Result<()> {
    throng_report::supports(v, result).map_err(UsageError)?;
    let mut buf = Vec::new();
    throng_report::write(v, result, &mut buf).context("rendering the report")?;
    print_bytes(&buf)
}

pub(super) fn print_bytes(buf: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(buf).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

/// Writes the result document to `path`.
pub(super) fn write_result(path: &Path, result: &RunResult) -> anyhow::Result<()> {
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
pub(super) fn write_html(path: &Path, result: &RunResult) -> anyhow::Result<()> {
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
pub(super) fn read_plan_file(path: &Path, what: &str) -> Result<String, UsageError> {
    use throng_plan::input::ReadError;
    let limit = throng_plan::input::MAX_FILE_BYTES;
    throng_plan::input::read_limited_text(path, limit).map_err(|e| {
        UsageError(match e {
            Err(ReadError::Io(e)) => format!("cannot read the {what} '{}': {e}", path.display()),
            Err(_) => format!(
                "the {what} '{}' is larger than the limit of {} MiB; a {what} describes a run in a few kilobytes",
                path.display(),
                limit >> 20
            ),
            Ok(at) => format!(
                "the {what} '{}' is not UTF-8 text (byte {at}); save it as UTF-8",
                path.display()
            ),
        })
    })
}

/// Files a scenario file names (its data CSV, its .proto files), read
/// whole: at most this many bytes, so that a device or an endless file
/// (`/dev/zero`, a FIFO) is refused instead of filling the memory.
pub(super) const MAX_SIDE_FILE_BYTES: u64 = 256 << 20;

/// Compiles every `js:` step of `plan`: a syntax error names the file's
/// line of the code that does not parse (at the code's column).
pub(super) fn check_js_steps(plan: &throng_scenario::ScenarioPlan) -> Result<(), UsageError> {
    let flows = plan
        .scenarios
        .iter()
        .chain(plan.setup.as_ref())
        .chain(plan.teardown.as_ref());
    for step in flows.flat_map(|s| throng_scenario::js_steps(&s.flow)) {
        if let Err(e) = throng_script::StepCode::compile(&step.code) {
            // The code's line in the file (a block's lines all start at
            // its indentation).
            let (line, of_code) = match e.line {
                0 => (step.line, String::new()),
                l => (step.line + l - 1, format!(" (line {l} of the step's code)")),
            };
            let error = throng_scenario::ScenarioError {
                file: plan.file.clone(),
                line,
                column: step.column,
                message: format!("js: {}{of_code}; fix the step's JavaScript", e.message),
            };
            return Err(UsageError(error.to_string()));
        }
    }
    Ok(())
}

/// Reads a file a scenario file names, bounded by [`MAX_SIDE_FILE_BYTES`];
/// the error says what is wrong (the caller says which file).
pub(super) fn read_side_file(path: &Path) -> Result<String, SideFileError> {
    read_side_file_within(path, MAX_SIDE_FILE_BYTES)
}

/// [`read_side_file`] with the limit of the file's kind (a certificate's,
/// [`throng_plan::input::MAX_PEM_BYTES`]).
pub(super) fn read_side_file_within(path: &Path, limit: u64) -> Result<String, SideFileError> {
    use throng_plan::input::ReadError;
    throng_plan::input::read_limited_text(path, limit).map_err(|e| match e {
        Err(ReadError::Io(e)) => SideFileError::Io(e),
        Err(_) => SideFileError::TooLarge { limit },
        Ok(at) => SideFileError::NotUtf8 { at },
    })
}

/// Why a file a scenario file names cannot be used (the caller says which).
#[derive(Debug, thiserror::Error)]
pub(super) enum SideFileError {
    /// The OS's reason.
    #[error("{0}")]
    Io(std::io::Error),
    /// Over the limit of its kind.
    #[error(
        "larger than the limit of {}; give a smaller file (split a data file across runs)",
        throng_plan::input::size(*limit)
    )]
    TooLarge { limit: u64 },
    /// Not UTF-8 from this byte on.
    #[error("not UTF-8 text (byte {at}); save it as UTF-8")]
    NotUtf8 { at: usize },
}

/// Reads a result document or a result set (streamed, at most
/// [`throng_plan::input::MAX_RESULT_BYTES`]).
pub(super) fn read_document(path: &Path) -> anyhow::Result<throng_result::Document> {
    let file = throng_plan::input::open_limited(path, throng_plan::input::MAX_RESULT_BYTES).map_err(|e| {
        UsageError(match e {
            throng_plan::input::ReadError::Io(e) => format!("cannot read '{}': {e}", path.display()),
            e => format!(
                "'{}': {e} (a result file); give a result file throng wrote",
                path.display()
            ),
        })
    })?;
    throng_result::Document::from_reader(std::io::BufReader::new(file))
        .map_err(|e| UsageError(format!("'{}': {e}", path.display())).into())
}

/// Writes a result set (every run of a `--repeat`) to `path`.
pub(super) fn write_set(path: &Path, runs: &[RunResult]) -> anyhow::Result<()> {
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
pub(super) fn print_runs(v: View, runs: &[RunResult], as_set: bool, to_stderr: bool) -> anyhow::Result<()> {
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
pub(super) fn repeated(
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
            say!("throng: {}", throng_report::runs::run_line(&r, i + 1, n));
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
pub(super) fn settle(d: std::time::Duration, control: &Control) {
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
pub(super) fn finish_runs(
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
pub(super) fn run_outcome(r: &RunResult) -> Outcome {
    if r.interrupted {
        return Outcome::Interrupted;
    }
    let every_failed = every_unit_failed(r);
    if let Some(warning) = throng_report::text::dropped_warning(r) {
        let judged = if r.thresholds.is_empty() {
            "; to fail such a run, judge it: --threshold 'dropped: rate < 1%'"
        } else {
            ""
        };
        say!("throng: warning: {warning}{judged}");
    }
    if !r.thresholds_passed() {
        let failed = r.thresholds.iter().filter(|v| !v.passed).count();
        say!("throng: {failed} of {} thresholds failed", r.thresholds.len());
        return Outcome::Thresholds;
    }
    if every_failed { Outcome::Failed } else { Outcome::Ok }
}

/// True when every unit of work failed, said on stderr with the likely cause.
pub(super) fn every_unit_failed(r: &RunResult) -> bool {
    let m = &r.measurements;
    let all_failed = |o: &throng_metrics::Outcomes| o.attempted > 0 && o.ok == 0;
    let (req, unit) = match r.unit() {
        throng_result::Unit::Connections if all_failed(&m.connections) || !all_failed(&m.requests) => {
            (&m.connections, "connection")
        }
        // A pub/sub run whose clients all failed to connect published nothing.
        throng_result::Unit::Messages if all_failed(&m.connections) => (&m.connections, "connection"),
        throng_result::Unit::Messages => (&m.requests, "message"),
        _ => (&m.requests, "request"),
    };
    if req.attempted > 0 && req.ok == 0 {
        let mut classes: Vec<(&String, &u64)> = req.errors.iter().collect();
        classes.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = classes.iter().take(3).map(|(k, v)| format!("{v} {k}")).collect();
        let target = r.plan.target_authority();
        let first = classes.first().map(|(k, _)| k.as_str()).unwrap_or("");
        let hint = match first {
            // Plain http through a proxy: every request and every byte of
            // its answer go by the proxy, so a silence, a close or
            // something not HTTP came from it (tunnels say proxy.*).
            "timeout.connect" | "timeout.response" | "eof" | "reset" | "protocol" if plain_proxy(&r.plan).is_some() => {
                let p = plain_proxy(&r.plan).map_or_else(String::new, |p| format!("{} ({})", p.url, p.from));
                let what = match first {
                    "timeout.connect" => "did not take the connection within --timeout",
                    "timeout.response" => "did not answer within --timeout",
                    "protocol" => "answered with something that is not HTTP",
                    _ => "closed the connection without a whole answer",
                };
                format!(
                    "every request went to the proxy {p}, which {what}; is it up, is it an HTTP proxy, and can it \
                     reach {target}?"
                )
            }
            "redirect.bad_location" => format!(
                "{target} answered with redirects throng cannot follow: their Location is missing or not an \
                 http(s) URL with a host and a port from 1 to 65535 (look at it: curl -si URL)"
            ),
            "redirect.too_many" => format!(
                "{target}'s redirects went on past --redirects (redirects: in a scenario); a loop, or give more"
            ),
            "redirect.scheme" => {
                "the redirects lead to https://, and the run has no TLS set up (an http:// target); start at the \
                 https:// URL"
                    .to_string()
            }
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
            "check_failed" => match &r.plan {
                throng_result::Plan::Http(p) if !throng_report::text::unexpected_statuses(m, p).is_empty() => format!(
                    "the server answered every request with a status the plan does not expect ({}); --expect-status \
                     is {}",
                    throng_report::text::unexpected_statuses(m, p)
                        .iter()
                        .map(|(code, n)| format!("{code}={n}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    p.expect_status.to_text()
                ),
                _ => "the server answered, with statuses the plan does not expect; see --expect-status".to_string(),
            },
            "grpc.deadline_exceeded" => {
                format!("{target} answered no call within --deadline; give a longer one, or look at the server")
            }
            k if k.starts_with("grpc.") => format!(
                "{target} answered with replies a gRPC client rejects ({}); is it the gRPC server, and the \
                 method, you meant?",
                throng_metrics::ErrorClass::describe(k)
            ),
            "timeout.handshake" => {
                format!("{target} accepted connections but did not finish the protocol handshake in time")
            }
            k if k.starts_with("timeout.") => format!("{target} did not answer within --timeout"),
            "auth_failed" => {
                "the server refused the credentials; check user:password in the URL or --nats-creds".to_string()
            }
            k if k.starts_with("protocol.") => "the server answered the protocol handshake with an error".to_string(),
            k if k.starts_with("proxy.") => format!(
                "the proxy{} did not open the way to {target}: {}",
                proxy_of(&r.plan).map_or_else(String::new, |p| format!(" {} ({})", p.url, p.from)),
                throng_metrics::ErrorClass::describe(k)
            ),
            "protocol" => format!(
                "{target} answered with something that breaks the protocol (malformed, or a line longer than the \
                 limit; see the README's error classes)"
            ),
            k if k.starts_with("tls.") => tls_hint(k, &r.plan, &target),
            _ => match spoken(&r.plan) {
                Some(protocols) => format!("is {target} up and speaking {protocols}?"),
                None => format!("is {target} up and accepting connections?"),
            },
        };
        say!("throng: every {unit} failed ({}); {hint}", top.join(", "));
        return true;
    }
    false
}

/// The proxy a run went through, if any.
pub(super) fn proxy_of(plan: &throng_result::Plan) -> Option<&throng_plan::Proxy> {
    match plan {
        throng_result::Plan::Http(p) => p.reach.proxy.as_ref(),
        throng_result::Plan::Storm(p) => p.reach.proxy.as_ref(),
        throng_result::Plan::Run(_) | throng_result::Plan::Mqtt(_) => None,
    }
}

/// The proxy of a plain-http `throng http` run: its requests go to the
/// proxy whole (no tunnel), and so do the answers.
pub(super) fn plain_proxy(plan: &throng_result::Plan) -> Option<&throng_plan::Proxy> {
    match plan {
        throng_result::Plan::Http(p) if p.target.scheme == throng_plan::Scheme::Http => p.reach.proxy.as_ref(),
        _ => None,
    }
}

/// The protocols a run spoke, for a failure's hint: `HTTP/2`, `gRPC
/// (HTTP/2)`, a scenario's `HTTP/1.1 and WebSocket`, a storm's
/// `WebSocket`; None for a storm that only connects (or speaks lines).
pub(super) fn spoken(plan: &throng_result::Plan) -> Option<String> {
    fn version(v: throng_plan::HttpVersion) -> &'static str {
        match v {
            throng_plan::HttpVersion::Http1 => "HTTP/1.1",
            throng_plan::HttpVersion::Http2 => "HTTP/2",
            throng_plan::HttpVersion::Http3 => "HTTP/3",
        }
    }
    /// (has requests, has websocket: steps, has grpc: steps, has mqtt:
    /// steps) of a flow.
    fn kinds(flow: &[throng_scenario::Step], out: &mut (bool, bool, bool, bool)) {
        for step in flow {
            match step {
                throng_scenario::Step::Request(_) => out.0 = true,
                throng_scenario::Step::WebSocket(_) => out.1 = true,
                throng_scenario::Step::Grpc(_) => out.2 = true,
                throng_scenario::Step::Mqtt(_) => out.3 = true,
                throng_scenario::Step::Think(_) | throng_scenario::Step::Add(_) | throng_scenario::Step::Js(_) => {}
                nested => nested.nested().into_iter().for_each(|f| kinds(f, out)),
            }
        }
    }
    match plan {
        throng_result::Plan::Http(p) if p.grpc.is_some() => Some("gRPC (HTTP/2)".to_string()),
        throng_result::Plan::Http(p) => Some(version(p.http).to_string()),
        throng_result::Plan::Storm(p) => match &p.protocol {
            Some(throng_plan::Protocol::WebSocket(_)) => Some("WebSocket".to_string()),
            Some(throng_plan::Protocol::Nats(_)) => Some("NATS".to_string()),
            Some(throng_plan::Protocol::Mqtt(m)) => Some(format!("MQTT {}", m.version.name())),
            _ if p.request.is_some() => Some("HTTP/1.1".to_string()),
            _ => None,
        },
        throng_result::Plan::Run(p) => {
            let mut names: Vec<&str> = Vec::new();
            for s in &p.scenarios {
                let mut k = (false, false, false, false);
                kinds(&s.flow, &mut k);
                if k.0 {
                    names.push(version(s.target(&p.target).http));
                    names.extend(s.request_protocols().into_iter().map(|(v, _)| version(v)));
                }
                if k.1 {
                    names.push("WebSocket");
                }
                if k.2 {
                    names.push("gRPC");
                }
                if k.3 {
                    names.push("MQTT");
                }
            }
            if names.is_empty() {
                names.push(version(p.target.http));
            }
            let mut once: Vec<&str> = Vec::new();
            for n in names {
                if !once.contains(&n) {
                    once.push(n);
                }
            }
            Some(once.join(" and "))
        }
        throng_result::Plan::Mqtt(p) => Some(format!("MQTT {}", p.session.version.name())),
    }
}

/// What to do about a TLS failure `class` (`tls.…`), from what the run was
/// given: it never tells the user to pass a flag they already passed.
pub(super) fn tls_hint(class: &str, plan: &throng_result::Plan, target: &str) -> String {
    let tls = match plan {
        throng_result::Plan::Http(p) => p.tls.as_ref(),
        throng_result::Plan::Storm(p) => p.tls.as_ref(),
        throng_result::Plan::Run(p) => p.tls.as_ref(),
        throng_result::Plan::Mqtt(_) => None,
    };
    let (flag, sni) = match plan {
        throng_result::Plan::Run(_) => ("the tls: block's cacert", "server_name"),
        _ => ("--cacert", "--sni"),
    };
    let cacert = tls.and_then(|t| t.cacert.as_deref());
    let why = throng_metrics::ErrorClass::describe(class);
    let todo = match (class, cacert) {
        ("tls.unknown_ca", Some(file)) => format!(
            "the CA that signed it is not in {file}: give {flag} the CA (or the self-signed certificate) the \
             server's certificate comes from"
        ),
        ("tls.unknown_ca" | "tls.ca_used_as_end_entity", None) => format!(
            "give {flag} FILE with the CA (or the self-signed certificate) the server's certificate comes from, \
             or --insecure to skip verification"
        ),
        ("tls.ca_used_as_end_entity", Some(file)) => {
            format!("give {flag} the server's own certificate (it is not in {file}), or serve one a CA issued")
        }
        ("tls.certificate_name_mismatch", _) => format!(
            "ask {target} by a name its certificate was issued for (or give that name to {sni}), or serve a \
             certificate for this name"
        ),
        ("tls.bad_certificate_signature", Some(file)) => format!(
            "a CA in {file} has the name of the certificate's issuer but not its key (a CA made again under the \
             same name is another CA): give {flag} the CA that signed it"
        ),
        ("tls.certificate_expired" | "tls.certificate_not_yet_valid", _) => {
            "renew the server's certificate (or check this machine's clock)".to_string()
        }
        ("tls.certificate_required" | "tls.bad_certificate" | "tls.certificate_unknown", _)
            if tls.is_some_and(|t| t.cert.is_some()) =>
        {
            "the server refused the client certificate (--cert/--key): give one its CA issued".to_string()
        }
        ("tls.certificate_required" | "tls.bad_certificate" | "tls.certificate_unknown", _) => {
            "the server wants a client certificate: give --cert FILE --key FILE".to_string()
        }
        (k, _) if k.starts_with("tls.certificate_") || k.starts_with("tls.bad_certificate") => {
            "serve a certificate this side can verify, or --insecure to skip verification".to_string()
        }
        _ => "the TLS handshake failed; see the error classes in the README".to_string(),
    };
    format!("TLS: {why}; {todo}")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn http(args: throng_plan::HttpArgs) -> throng_result::Plan {
        throng_result::Plan::Http(throng_plan::HttpPlan::from_args(args).unwrap())
    }

    fn scenario(flow: &str) -> throng_result::Plan {
        let text = format!(
            "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    \
             iterations: 1\n    flow:\n{flow}"
        );
        let plan = throng_scenario::ScenarioPlan::parse(&text, "t.yaml", &|f| Err(format!("no file {f}"))).unwrap();
        throng_result::Plan::Run(Box::new(plan))
    }

    #[test]
    fn the_hint_names_the_protocol_spoken() {
        let url = |u: &str| throng_plan::HttpArgs {
            url: u.to_string(),
            cores: 1,
            ..throng_plan::HttpArgs::default()
        };
        assert_eq!(spoken(&http(url("http://h/"))).as_deref(), Some("HTTP/1.1"));
        let h2 = throng_plan::HttpArgs {
            http2: true,
            ..url("http://h/")
        };
        assert_eq!(spoken(&http(h2)).as_deref(), Some("HTTP/2"));
        let h3 = throng_plan::HttpArgs {
            http3: true,
            ..url("https://h/")
        };
        assert_eq!(spoken(&http(h3)).as_deref(), Some("HTTP/3"));
        let ws = "      - request: { path: / }\n      - websocket:\n          url: /chat\n          messages: [{ send: hi }]\n";
        assert_eq!(spoken(&scenario(ws)).as_deref(), Some("HTTP/1.1 and WebSocket"));
        let ws_only = "      - websocket:\n          url: /chat\n          messages: [{ send: hi }]\n";
        assert_eq!(spoken(&scenario(ws_only)).as_deref(), Some("WebSocket"));
        let mqtt = "      - request: { path: / }\n      - mqtt:\n          url: mqtt://b\n          messages: [{ publish: t }]\n";
        assert_eq!(spoken(&scenario(mqtt)).as_deref(), Some("HTTP/1.1 and MQTT"));
        let h2_request = "      - request: { path: /, http: 2 }\n";
        assert_eq!(spoken(&scenario(h2_request)).as_deref(), Some("HTTP/1.1 and HTTP/2"));
    }

    #[test]
    fn only_a_plain_http_run_blames_its_proxy_for_silence() {
        let proxied = |u: &str| throng_plan::HttpArgs {
            url: u.to_string(),
            cores: 1,
            reach: throng_plan::ReachArgs {
                proxy: Some("http://127.0.0.1:3128".into()),
                ..throng_plan::ReachArgs::default()
            },
            ..throng_plan::HttpArgs::default()
        };
        assert_eq!(plain_proxy(&http(proxied("http://h/"))).map(|p| p.port), Some(3128));
        // Through a tunnel the proxy's failures are proxy.* classes; what
        // comes after the tunnel is the target's.
        assert!(plain_proxy(&http(proxied("https://h/"))).is_none());
    }
}
