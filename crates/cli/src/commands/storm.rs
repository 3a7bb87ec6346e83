//! `throng storm`, in one process or spread over several.
//!
//! A storm whose connections open at once would exceed one process's
//! descriptor limit runs as N child processes of this binary, each with its
//! own limit and a share of the connections, all starting at the same
//! wall-clock instant; their result documents are merged exactly.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use throng_engine::{Control, StormPart};
use throng_plan::{Procs, Protocol, StepArg, StormArgs, StormPlan};
use throng_result::RunResult;

use crate::args::{ExportArgs, SegmentArgs, StormCmd};
use crate::exit::UsageError;
use crate::live::Watch;
use crate::progress::{Display, Kind};
use crate::signals;

/// How long children get to exec and set up before they start together.
const CHILD_STARTUP: Duration = Duration::from_millis(500);
/// Memory a held connection costs beyond the generator (both sockets'
/// kernel structures on loopback, conservatively).
const KERNEL_BYTES_PER_CONNECTION: u64 = 8 * 1024;

/// The whole check `throng storm` makes before it runs (segment, plan, TLS
/// files, --trigger with --procs): `throng coordinate` makes it once too.
pub fn prepare(
    c: &StormCmd,
) -> anyhow::Result<(
    super::segment::Segmenting,
    StormPlan,
    Option<std::sync::Arc<throng_tls::rustls::ClientConfig>>,
)> {
    let seed = c.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let seg = super::segment::parse(&c.segments)?;
    super::segment::refuse_start_at_with_repeat(&seg, c.repeat.count)?;
    let plan = StormPlan::from_args(StormArgs {
        target: c.target.clone(),
        connections: c.connections,
        rate: c.rate,
        max_concurrent: c.max_concurrent,
        workers: c.workers,
        jitter: c.jitter,
        hold: c.hold,
        request: c.request.clone(),
        timeout: c.timeout,
        procs: c.procs.clone(),
        source: c.source.clone(),
        tls: super::tls::settings(&c.tls),
        seed,
        protocol: c.protocol.clone(),
        nats_creds: c
            .nats_creds
            .as_ref()
            .map(|p| {
                throng_plan::input::read_limited_text(p, throng_plan::input::MAX_PEM_BYTES)
                    .map(|t| (p.display().to_string(), t))
                    .map_err(|e| {
                        UsageError(match e {
                            Err(e) => format!("--nats-creds {}: {e}; give a NATS .creds file", p.display()),
                            Ok(at) => format!(
                                "--nats-creds {}: not UTF-8 text (byte {at}); give a NATS .creds file",
                                p.display()
                            ),
                        })
                    })
            })
            .transpose()?,
        steps: read_binaries(&c.steps)?,
        step_timeout: c.step_timeout,
        ping_every: c.ping_every,
        client: c.client.clone(),
        reconnect: c.reconnect,
        reconnect_wait: c.reconnect_wait,
        reconnect_jitter: c.reconnect_jitter,
        max_reconnects: c.max_reconnects,
        trigger_after: c.trigger_after,
        trigger: c.trigger.clone(),
        trigger_timeout: c.trigger_timeout,
        cores: throng_engine::sys::cores(),
        segment: seg.segment.clone(),
        reach: super::reach::args(&c.reach),
        http2: c.http2,
        http3: c.http3,
        io: match c.io {
            crate::args::IoArg::Auto => throng_plan::IoModel::Auto,
            crate::args::IoArg::Epoll => throng_plan::IoModel::Epoll,
            crate::args::IoArg::Uring => throng_plan::IoModel::Uring,
        },
        mqtt: throng_plan::MqttArgs {
            version: c.mqtt_version.clone(),
            client_id: c.client_id.clone(),
            keepalive: c.keepalive,
            clean_start: c.clean_start,
            session_expiry: c.session_expiry,
            subscribe: c.subscribe.clone(),
            qos: c.qos,
        },
        thresholds: c.thresholds.clone(),
    })?;
    // A threshold that could only ever judge nothing in a storm is refused
    // before it runs, as for throng http.
    thresholds(&plan)?;
    let tls = match plan.tls {
        // nats:// needs TLS only if the server's INFO asks for it: without
        // TLS flags, a missing system trust store is not an error (yet).
        Some(ref settings) if plan.target.scheme == throng_plan::StormScheme::Nats && !settings.any() => {
            super::tls::client_config(settings, Path::new(""), &[]).ok()
        }
        Some(ref settings) => Some(super::tls::client_config(settings, Path::new(""), &alpn(&plan))?),
        None => None,
    };
    if plan.trigger.is_some() && matches!(plan.procs, Procs::Count(n) if n > 1) {
        return Err(UsageError(
            "--trigger watches every connection from one process; use --procs 1 (or auto, when they fit)".into(),
        )
        .into());
    }

    Ok((seg, plan, tls))
}

/// The storm's `--threshold`s, read and checked.
pub fn thresholds(plan: &StormPlan) -> Result<Vec<throng_scenario::Threshold>, UsageError> {
    let shape = throng_scenario::StormShape {
        rate: plan.rate.is_some(),
        requests: plan.request.is_some(),
    };
    plan.thresholds
        .iter()
        .map(|t| {
            let said = |e: &dyn std::fmt::Display| UsageError(format!("--threshold: {e}"));
            let t = throng_scenario::Threshold::read_line(t).map_err(|e| said(&e))?;
            t.check_storm(shape).map_err(|e| said(&e))?;
            Ok(t)
        })
        .collect()
}

pub fn run(c: StormCmd) -> anyhow::Result<ExitCode> {
    let (seg, plan, tls) = prepare(&c)?;
    super::export::check_outputs(&[
        ("--json", c.output.json.as_deref()),
        ("--html", c.output.html.as_deref()),
    ])?;
    let (exports, rows) = super::export::open_run(&c.output.export)?;

    // This process's segment's peak, not the whole storm's.
    let peak = plan.segment().share(throng_engine::storm_peak_estimate(&plan)).max(1);
    let per_process = throng_engine::connections_per_process(plan.workers);
    let procs = match plan.procs {
        Procs::Count(n) => n,
        Procs::Auto => u32::try_from(peak.div_ceil(per_process.max(1)).max(1)).unwrap_or(u32::MAX),
    };
    check_system(&plan, peak, procs, per_process)?;

    super::export::refuse_rows_with_repeat(&c.output.export, c.repeat.count)?;
    if let Some(why) = throng_engine::storm_auto_fallback(&plan, rows.is_some()) {
        say!("throng: {why}; running on epoll instead (--io epoll skips this check)");
    }
    let watch = Watch::start(
        &c.live,
        BTreeMap::new(),
        seg.segment.as_ref().map(throng_plan::Segment::range),
        seg.start_at_unix_ms,
    )?;
    let runs = super::shared::repeated(c.repeat, c.output.quiet, |control| {
        // Machine-wide, so one watch covers every worker process.
        let kernel = throng_engine::sys::KernelWatch::start();
        let memory = throng_engine::sys::MemoryWatch::start();
        let mut result = if procs <= 1 {
            super::segment::wait_for_start(seg.start_at_unix_ms, control, c.output.quiet)?;
            let part = StormPart {
                start_at_unix_ms: seg.start_at_unix_ms,
                ..StormPart::WHOLE
            };
            let display = Display::of(c.output.quiet, Kind::Connections);
            watch.prepare(control, display.is_shown());
            let r = throng_engine::run_storm(&plan, part, tls.clone(), rows.as_ref(), control, &mut |p| {
                display.tick_storm(p);
                watch.tick(p);
            });
            display.finish();
            r.context("the storm could not start")?
        } else {
            // Child processes measure; this one sees their results when
            // they end, so /metrics shows the storm then.
            run_children(&c, &plan, procs, seg.start_at_unix_ms, rows.as_ref(), control)?
        };
        result.generator.kernel = kernel.and_then(throng_engine::sys::KernelWatch::finish);
        result.generator.peak_pss_bytes = memory.and_then(throng_engine::sys::MemoryWatch::finish);
        watch.finished(&mut result);
        if plan.source.is_empty() && result.measurements.peak_concurrent_connections > CROWDED_PORTS {
            result.notes.push(format!(
                "{} connections were open at once from one source address: connect() slows down as the local \
                 port range fills (and fails past ~28K); --source 127.0.0.2-127.0.0.200 spreads them",
                result.measurements.peak_concurrent_connections
            ));
        }
        Ok(result)
    })?;
    let (code, merged) = super::shared::finish_runs(c.repeat, &runs, c.output.json.as_deref(), c.output.format.into())?;
    exports.write(&merged)?;
    if let Some(path) = &c.output.html {
        super::shared::write_html(path, &merged)?;
    }
    watch.linger();
    Ok(code.into())
}

/// The ALPN protocols a storm's TLS connections offer: `h2` alone under
/// `--http2` (a server that will not speak it fails the handshake), none
/// otherwise.
fn alpn(plan: &StormPlan) -> Vec<&'static [u8]> {
    if plan.http.is_multiplexed() {
        vec![plan.http.alpn().as_bytes()]
    } else {
        Vec::new()
    }
}

/// What a held HTTP/2 connection adds to a bare TCP one: its driver task
/// and throng-http2's state (measured at 3,000 held h2c connections, debug
/// build: about 3.3 KB; doubled for safety).
const H2_BYTES_PER_CONNECTION: u64 = 6 * 1024;

/// What a held HTTP/3 connection adds: quinn's connection state and the
/// h3 driver (measured at 1,000 held, debug build: about 65 KB).
const H3_BYTES_PER_CONNECTION: u64 = 72 * 1024;

/// Open connections from one source address past which the kernel's search
/// for a free local port gets noticeably slower.
const CROWDED_PORTS: u64 = 10_000;

/// Most worker processes one storm starts: at the descriptor limit each
/// (about 20,000 here) that is millions of connections, past what one
/// machine's kernel memory holds; more is a typo or hostile input, not a plan.
const MAX_PROCS: u32 = 256;

/// Says before starting when the machine cannot hold the storm, with numbers.
fn check_system(plan: &StormPlan, peak: u64, procs: u32, per_process: u64) -> Result<(), UsageError> {
    let needed = peak.div_ceil(per_process.max(1));
    if plan.procs == Procs::Auto && needed > u64::from(MAX_PROCS) {
        return Err(UsageError(format!(
            "about {peak} connections may be open at once: at {per_process} per process (descriptor limit) that \
             takes {needed} processes, more than the {MAX_PROCS} one storm starts; lower --count or \
             --max-concurrent, or split the storm over machines (--segment)"
        )));
    }
    if procs > MAX_PROCS {
        return Err(UsageError(format!(
            "--procs {procs}: at most {MAX_PROCS} processes; use --procs auto (it starts as many as the \
             connections open at once need)"
        )));
    }
    let share = peak.div_ceil(u64::from(procs.max(1)));
    if share > per_process {
        return Err(UsageError(format!(
            "--procs {procs}: about {peak} connections may be open at once, {share} per process, but a process may \
             open {per_process} (descriptor limit); use --procs auto or --procs {}",
            peak.div_ceil(per_process.max(1))
        )));
    }
    if let Some((allocated, max)) = file_table() {
        let free = max.saturating_sub(allocated);
        if peak > free {
            return Err(UsageError(format!(
                "about {peak} connections may be open at once, but the system file table has room for {free} more \
                 (fs.file-max {max}, {allocated} in use); lower --count or --max-concurrent, or raise fs.file-max"
            )));
        }
    }
    if let Some(available) = mem_available() {
        let per_connection = if plan.target.scheme.is_tls() {
            8 * 1024
        } else {
            2 * 1024
        } + KERNEL_BYTES_PER_CONNECTION
            + match plan.http {
                throng_plan::HttpVersion::Http2 => H2_BYTES_PER_CONNECTION,
                throng_plan::HttpVersion::Http3 => H3_BYTES_PER_CONNECTION,
                throng_plan::HttpVersion::Http1 => 0,
            };
        let needed = peak * per_connection;
        if needed > available {
            return Err(UsageError(format!(
                "about {peak} connections may be open at once, needing about {} MB of memory (generator and kernel), \
                 but {} MB is available; lower --count or --max-concurrent",
                needed >> 20,
                available >> 20
            )));
        }
    }
    Ok(())
}

fn file_table() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/sys/fs/file-nr").ok()?;
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    let allocated = f.next()??;
    let _unused = f.next()??;
    let max = f.next()??;
    Some((allocated, max))
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// What a child process of a multi-process storm is told, as JSON on its
/// stdin: the validated plan itself (so no flag can be lost on the way),
/// what the plan does not serialize (the NATS secret, the `--send-secret`
/// texts, a WebSocket upgrade's Authorization, an MQTT password, the
/// segment), and its part.
#[derive(Debug, Serialize, Deserialize)]
struct ChildOrder {
    plan: StormPlan,
    /// `NatsAuth::secret`, which result documents never hold.
    #[serde(default)]
    nats_secret: Option<String>,
    /// The `--send-secret` texts, in order ([`StormPlan::line_secrets`]).
    #[serde(default)]
    line_secrets: Vec<String>,
    /// `Proxy::authorization`, which result documents never hold either.
    #[serde(default)]
    proxy_secret: Option<String>,
    /// A WebSocket upgrade's `Authorization` ([`StormPlan::ws_authorization`]).
    #[serde(default)]
    ws_authorization: Option<String>,
    /// An MQTT CONNECT's password ([`StormPlan::mqtt_password`]).
    #[serde(default)]
    mqtt_password: Option<String>,
    /// `--segment` and `--segment-sequence` as typed (parsed again, as the parent did).
    #[serde(default)]
    segment: Option<String>,
    #[serde(default)]
    segment_sequence: Option<String>,
    index: u32,
    count: u32,
    start_at_unix_ms: u64,
    /// `--csv-requests` of this child, and its share of `--csv-requests-max`.
    #[serde(default)]
    csv_requests: Option<(PathBuf, u64)>,
}

/// Reads the files of `--send-binary @FILE` (at most MAX_BINARY bytes each).
fn read_binaries(steps: &[StepArg]) -> Result<Vec<StepArg>, UsageError> {
    steps
        .iter()
        .map(|s| match s {
            StepArg::SendBinary { path, .. } => {
                let Some(file) = path.strip_prefix('@') else {
                    return Err(UsageError(format!(
                        "--send-binary '{path}': give a file as @FILE, e.g. --send-binary @frame.bin"
                    )));
                };
                let bytes = throng_plan::input::read_limited(Path::new(file), throng_plan::MAX_BINARY as u64)
                    .map_err(|e| UsageError(format!("--send-binary {path}: {e}; give a smaller file")))?;
                Ok(StepArg::SendBinary {
                    path: path.clone(),
                    bytes,
                })
            }
            other => Ok(other.clone()),
        })
        .collect()
}

impl ChildOrder {
    fn new(c: &StormCmd, plan: &StormPlan, index: u32, count: u32, start_at_unix_ms: u64) -> ChildOrder {
        let nats_secret = match &plan.protocol {
            Some(Protocol::Nats(auth)) => auth.secret.clone(),
            _ => None,
        };
        let mut plan = plan.clone();
        // As the result of each part has always said: one of `count` processes.
        plan.procs = Procs::Count(count);
        ChildOrder {
            line_secrets: plan.line_secrets(),
            proxy_secret: plan.reach.proxy.as_ref().and_then(|p| p.authorization.clone()),
            ws_authorization: plan.ws_authorization(),
            mqtt_password: plan.mqtt_password(),
            plan,
            nats_secret,
            segment: c.segments.segment.clone(),
            segment_sequence: c.segments.sequence.clone(),
            index,
            count,
            start_at_unix_ms,
            csv_requests: None,
        }
    }

    /// The plan as the parent validated it, secret and segment restored.
    fn plan(&self) -> Result<StormPlan, UsageError> {
        let mut plan = self.plan.clone();
        if let Some(Protocol::Nats(auth)) = &mut plan.protocol {
            auth.secret.clone_from(&self.nats_secret);
        }
        plan.restore_line_secrets(&self.line_secrets)
            .map_err(|e| UsageError(format!("storm-part: the orders do not fit their plan: {e}")))?;
        if let Some(p) = &mut plan.reach.proxy {
            p.authorization.clone_from(&self.proxy_secret);
        }
        plan.restore_ws_authorization(self.ws_authorization.as_deref());
        plan.restore_mqtt_password(self.mqtt_password.as_deref());
        plan.segment = super::segment::parse(&SegmentArgs {
            segment: self.segment.clone(),
            sequence: self.segment_sequence.clone(),
            start_at: None,
        })?
        .segment;
        Ok(plan)
    }
}

/// `throng storm-part` (hidden): one child of a multi-process storm. Reads
/// its [`ChildOrder`] from stdin, runs its part, prints the result document.
pub fn run_part() -> anyhow::Result<ExitCode> {
    let mut text = Vec::new();
    std::io::stdin()
        .take(MAX_ORDER_BYTES)
        .read_to_end(&mut text)
        .context("reading the storm part's orders from stdin")?;
    let order: ChildOrder = serde_json::from_slice(&text).map_err(|e| {
        UsageError(format!(
            "storm-part: stdin is not a storm part's orders ({e}); throng storm --procs N starts these"
        ))
    })?;
    if order.index >= order.count {
        return Err(UsageError(format!(
            "storm-part: part {} of {} does not exist",
            order.index, order.count
        ))
        .into());
    }
    let plan = order.plan()?;
    let tls = match &plan.tls {
        Some(settings) if plan.target.scheme == throng_plan::StormScheme::Nats && !settings.any() => {
            super::tls::client_config(settings, Path::new(""), &[]).ok()
        }
        Some(settings) => Some(super::tls::client_config(settings, Path::new(""), &alpn(&plan))?),
        None => None,
    };
    let export = ExportArgs {
        csv_requests: order.csv_requests.as_ref().map(|(path, _)| path.clone()),
        csv_requests_max: order.csv_requests.as_ref().map_or(1, |(_, max)| *max),
        ..ExportArgs::default()
    };
    let (_, rows) = super::export::open_run(&export)?;
    let control = Control::new();
    signals::forward_to(&control);
    let part = StormPart {
        index: order.index,
        count: order.count,
        start_at_unix_ms: Some(order.start_at_unix_ms),
    };
    super::segment::wait_for_start(Some(order.start_at_unix_ms), &control, true)?;
    let result = throng_engine::run_storm(&plan, part, tls, rows.as_ref(), &control, &mut |_| {})
        .context("the storm part could not start")?;
    super::shared::print_report(throng_report::View::Json, &result)?;
    Ok(ExitCode::SUCCESS)
}

/// Orders are a plan: a few KB, far less than this.
const MAX_ORDER_BYTES: u64 = 16 << 20;

/// Runs the storm as `procs` child processes and merges their results.
fn run_children(
    c: &StormCmd,
    plan: &StormPlan,
    procs: u32,
    start_at: Option<u64>,
    rows: Option<&throng_engine::RequestLog>,
    control: &Control,
) -> anyhow::Result<RunResult> {
    let exe = std::env::current_exe().context("cannot find this program to start worker processes")?;
    // --csv-requests: each child writes its own file, joined at the end.
    let row_parts = rows.map(|log| ChildRows::new(log, procs)).transpose()?;
    // --start-at, or as soon as the children can be ready (never sooner).
    let soonest = (SystemTime::now() + CHILD_STARTUP)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let start_at = start_at.map_or(soonest, |t| t.max(soonest));
    let mut children: Vec<Child> = Vec::new();
    for i in 0..procs {
        let mut order = ChildOrder::new(c, plan, i, procs, start_at);
        order.csv_requests = row_parts.as_ref().map(|parts| parts.order(i));
        let order = serde_json::to_vec(&order).context("writing a storm part's orders")?;
        let mut cmd = Command::new(&exe);
        cmd.arg("storm-part");
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Own process group: a terminal's Ctrl-C reaches only this process,
        // which forwards it once (a second signal would abort the child).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        super::shared::die_with_this_process(&mut cmd);
        // The orders fit the pipe's buffer many times over (a plan is a few
        // KB), yet a thread writes them so that no child can block this one.
        match cmd.spawn() {
            Ok(mut child) => {
                if let Some(mut stdin) = child.stdin.take() {
                    std::thread::spawn(move || {
                        // A child that died early is reported by its exit.
                        let _ = stdin.write_all(&order);
                    });
                }
                children.push(child);
            }
            Err(e) => {
                for mut ch in children {
                    let _ = ch.kill();
                    let _ = ch.wait();
                }
                return Err(anyhow::anyhow!("cannot start worker process {} of {procs}: {e}", i + 1));
            }
        }
    }
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    signals::forward_to_children(control, pids);
    if !c.output.quiet {
        say!(
            "throng: storm of {} connections over {procs} processes (about {} open at once each)",
            plan.connections,
            throng_engine::storm_peak_estimate(plan).div_ceil(u64::from(procs))
        );
    }

    // Read every child's output on its own thread: a child blocked on a
    // full pipe would never finish.
    let readers: Vec<_> = children
        .iter_mut()
        .map(|ch| {
            let mut out = ch.stdout.take();
            let mut err = ch.stderr.take();
            std::thread::spawn(move || {
                let mut o = Vec::new();
                let mut e = Vec::new();
                if let Some(s) = out.as_mut() {
                    let _ = s.read_to_end(&mut o);
                }
                if let Some(s) = err.as_mut() {
                    let _ = s.read_to_end(&mut e);
                }
                (o, e)
            })
        })
        .collect();
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for (i, (mut child, reader)) in children.into_iter().zip(readers).enumerate() {
        let status = child.wait().context("waiting for a worker process")?;
        let (out, err) = reader.join().unwrap_or_default();
        match RunResult::from_reader(out.as_slice()) {
            Ok(r) => results.push(r),
            Err(e) => failures.push(format!(
                "process {} of {procs} ({status}): {}",
                i + 1,
                String::from_utf8_lossy(&err)
                    .trim()
                    .lines()
                    .last()
                    .map_or_else(|| e.to_string(), str::to_string)
            )),
        }
    }
    if !failures.is_empty() {
        return Err(anyhow::anyhow!(
            "{} of {procs} worker processes failed: {}",
            failures.len(),
            failures.join("; ")
        ));
    }
    if let (Some(parts), Some(log)) = (&row_parts, rows) {
        parts.join(&log.path)?;
    }
    let mut merged = RunResult::merge(&results)
        .context("merging the worker processes' results")?
        .as_segment(plan.segment.clone());
    merged.plan = throng_result::Plan::Storm(plan.clone());
    merged.notes.retain(|n| !n.starts_with("process "));
    merged.notes.insert(
        0,
        format!("ran as {procs} processes (each under its own descriptor limit); results merged exactly"),
    );
    merged.interrupted = merged.interrupted || control.was_interrupted();
    Ok(merged)
}

/// Where each child process of a storm writes its `--csv-requests` rows.
struct ChildRows {
    dir: std::path::PathBuf,
    /// Each child's share of --csv-requests-max.
    shares: Vec<u64>,
}

impl ChildRows {
    fn new(log: &throng_engine::RequestLog, procs: u32) -> anyhow::Result<ChildRows> {
        let name = log
            .path
            .file_name()
            .map_or_else(|| "requests".into(), |n| n.to_string_lossy());
        let parent = log
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        let dir = parent.join(format!(".{name}.procs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| {
            UsageError(format!(
                "--csv-requests: cannot write '{}': {e} (check the directory is writable)",
                dir.display()
            ))
        })?;
        Ok(ChildRows {
            dir,
            shares: throng_plan::split_evenly(log.max_rows, procs),
        })
    }

    fn path(&self, index: u32) -> std::path::PathBuf {
        self.dir.join(format!("proc-{index}.csv"))
    }

    /// Child `index`'s file and its share of `--csv-requests-max`.
    fn order(&self, index: u32) -> (PathBuf, u64) {
        (
            self.path(index),
            self.shares.get(index as usize).copied().unwrap_or(1).max(1),
        )
    }

    fn join(&self, out: &std::path::Path) -> anyhow::Result<()> {
        let parts: Vec<_> = (0..self.shares.len() as u32).map(|i| self.path(i)).collect();
        super::export::join_request_parts(&parts, out)?;
        let _ = std::fs::remove_dir(&self.dir);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use throng_plan::{Procs, Protocol, StormArgs, StormPlan};

    use super::ChildOrder;
    use crate::args::{Cli, Command};

    /// A child's orders carry what the plan never serializes: the NATS
    /// password and the segment come back, and nothing else differs.
    #[test]
    fn orders_round_trip_the_plan_with_its_secret_and_segment() {
        use clap::Parser;
        let cli = Cli::try_parse_from([
            "throng",
            "storm",
            "nats://alice:s3cret@127.0.0.1:4222",
            "-n",
            "100",
            "--segment",
            "1/4:1/2",
            "--segment-sequence",
            "0,1/4,1/2,1",
        ])
        .unwrap();
        let Command::Storm(c) = cli.command else {
            panic!("a storm")
        };
        let segment = super::super::segment::parse(&c.segments).unwrap().segment;
        let plan = StormPlan::from_args(StormArgs {
            target: c.target.clone(),
            connections: c.connections,
            cores: 2,
            segment: segment.clone(),
            ..StormArgs::default()
        })
        .unwrap();
        let Some(Protocol::Nats(auth)) = &plan.protocol else {
            panic!("{:?}", plan.protocol)
        };
        assert_eq!(auth.secret.as_deref(), Some("s3cret"));
        let json = serde_json::to_string(&ChildOrder::new(&c, &plan, 1, 3, 42)).unwrap();
        let order: ChildOrder = serde_json::from_str(&json).unwrap();
        let back = order.plan().unwrap();
        assert_eq!((order.index, order.count, order.start_at_unix_ms), (1, 3, 42));
        assert_eq!(back.procs, Procs::Count(3));
        assert_eq!(
            StormPlan {
                procs: plan.procs,
                ..back
            },
            plan
        );
        assert!(segment.is_some());
    }

    /// A WebSocket upgrade's Authorization (from the URL) reaches a child
    /// through its orders, not through the plan's JSON.
    #[test]
    fn orders_carry_the_websocket_authorization() {
        use clap::Parser;
        let cli =
            Cli::try_parse_from(["throng", "storm", "ws://alice:s3cret@127.0.0.1:9000/chat", "-n", "10"]).unwrap();
        let Command::Storm(c) = cli.command else {
            panic!("a storm")
        };
        let plan = StormPlan::from_args(StormArgs {
            target: c.target.clone(),
            connections: c.connections,
            cores: 2,
            ..StormArgs::default()
        })
        .unwrap();
        let basic = throng_plan::basic_authorization("alice", "s3cret");
        assert_eq!(plan.ws_authorization().as_deref(), Some(basic.as_str()));
        let json = serde_json::to_string(&ChildOrder::new(&c, &plan, 0, 2, 0)).unwrap();
        assert!(
            !serde_json::to_string(&plan).unwrap().contains(&basic),
            "the plan itself"
        );
        let back = serde_json::from_str::<ChildOrder>(&json).unwrap().plan().unwrap();
        assert_eq!(back.ws_authorization().as_deref(), Some(basic.as_str()));
    }

    /// An MQTT password (from the URL) reaches a child through its orders,
    /// not through the plan's JSON, with every MQTT flag.
    #[test]
    fn orders_carry_the_mqtt_password_and_flags() {
        use clap::Parser;
        let cli = Cli::try_parse_from([
            "throng",
            "storm",
            "mqtt://dev:s3cret@127.0.0.1:1883",
            "-n",
            "10",
            "--mqtt-version",
            "5",
            "--subscribe",
            "d/{{conn}}",
            "--qos",
            "1",
            "--keepalive",
            "5s",
        ])
        .unwrap();
        let Command::Storm(c) = cli.command else {
            panic!("a storm")
        };
        let plan = StormPlan::from_args(StormArgs {
            target: c.target.clone(),
            connections: c.connections,
            cores: 2,
            mqtt: throng_plan::MqttArgs {
                version: c.mqtt_version.clone(),
                keepalive: c.keepalive,
                subscribe: c.subscribe.clone(),
                qos: c.qos,
                ..throng_plan::MqttArgs::default()
            },
            ..StormArgs::default()
        })
        .unwrap();
        assert_eq!(plan.mqtt_password().as_deref(), Some("s3cret"));
        assert!(
            !serde_json::to_string(&plan).unwrap().contains("s3cret"),
            "the plan itself"
        );
        let json = serde_json::to_string(&ChildOrder::new(&c, &plan, 0, 2, 0)).unwrap();
        let back = serde_json::from_str::<ChildOrder>(&json).unwrap().plan().unwrap();
        assert_eq!(back.mqtt_password().as_deref(), Some("s3cret"));
        assert_eq!(
            StormPlan {
                procs: plan.procs,
                ..back
            },
            plan
        );
    }
}
