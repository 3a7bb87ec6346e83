//! throng's engine: runs a plan and returns its result document.
//!
//! ```text
//!  run_http(plan) ── coordinator (caller's thread: progress, stop, grace)
//!        │ spawns one OS thread per worker
//!        ▼
//!  worker.rs: current-thread tokio runtime + LocalSet, one Ctx (ctx.rs)
//!        ├─ closed.rs: one task per connection, request after request
//!        ├─ open.rs: dispatcher (pacer.rs) ─► queue ─► connection tasks
//!        ├─ storm.rs: connect, at most one request, hold, close
//!        └─ scenario.rs: virtual users running flows
//!        │   each loop: conn.rs (open_connection: TCP, TLS, protocol
//!        │   handshake) ─► exchange.rs (Session: write, read, parse;
//!        │   record_exchange) ─► Recorder
//!        ▼
//!  Measurements per worker ── merge ──► RunResult
//! ```
//!
//! Workers share nothing on the per-request path: each owns its sockets,
//! read buffer and [`throng_metrics::Recorder`]. The coordinator only reads
//! live figures each worker publishes ten times a second, and, when asked
//! ([`Control::want_snapshots`], or a threshold with abort_on_fail), a copy
//! of everything each worker measured so far, once a second, which it merges
//! for [`Progress::snapshot`].
//!
//! The four loops depend on `ctx`, `conn`, `exchange` and `pacer`, never on
//! each other; what a worker is given (`load`) and the context depend on no
//! loop. A new protocol is a variant of `exchange::Session` beside HTTP/1.1.

mod closed;
mod conn;
mod ctx;
mod errors;
mod exchange;
mod load;
mod mux;
mod open;
mod pacer;
mod proto;
mod reach;
mod redirect;
mod rows;
mod scenario;
mod stamps;
mod storm;
pub mod sys;
mod targets;
mod timer;
mod tls_stream;
mod transport;
mod trigger;
mod uring;
mod worker;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use throng_metrics::{Live, Measurements};
use throng_plan::{HttpPlan, HttpWorkerLoad, StatusSet, Stop, StormPlan, split_evenly};
use throng_result::{Generator, Part, Plan, RunResult, SCHEMA, TriggerRecord, rfc3339};
use throng_tls::rustls::ClientConfig;
use throng_tls::rustls::pki_types::ServerName;
use tokio::sync::watch;

pub use errors::errno_name;
use load::{StormLoad, WorkerLoad, WorkerSpec};
pub use proto::grpc::call as grpc_call;
pub use proto::http1;
use proto::{http2, http3, line as protocol, ws};
pub use rows::{HEADER as REQUESTS_CSV_HEADER, RequestLog, RowCounts};
use transport::TlsClient;
use worker::{RunState, WorkerDone};

/// How long workers get to build their runtimes before the first request.
const STARTUP: Duration = Duration::from_millis(20);
/// How often the coordinator wakes to report progress and check limits.
const TICK: Duration = Duration::from_millis(100);
/// How often the coordinator merges the workers' snapshots (for a judge of
/// thresholds with abort_on_fail, live metrics, the live view).
const JUDGE_EVERY: Duration = Duration::from_secs(1);
/// Seconds of the per-second series a live snapshot carries (besides the
/// second in progress), when no threshold needs all of them.
const SNAPSHOT_SECONDS: usize = 3;
/// How long workers get to stop after an abort before the run gives up on them.
const ABORT_GRACE: Duration = Duration::from_secs(5);
/// Descriptors a process needs besides its connections (runtimes, stdio).
const FD_RESERVE_PER_WORKER: u64 = 8;
const FD_RESERVE: u64 = 32;

/// Why a run could not happen at all. (A run whose requests all failed is
/// still a run: its result says how they failed.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The target's host name did not resolve.
    #[error("cannot resolve host '{host}': {reason}; check that host name (or pass --resolve HOST:PORT:ADDR)")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        reason: String,
    },
    /// The plan needs more descriptors than this process may open.
    #[error(
        "this plan needs about {needed} file descriptors, but this process may open at most {soft} \
         (hard limit {hard}); lower -c to about {fit}, or raise the hard limit (as root: ulimit -Hn, \
         or LimitNOFILE= for a service)"
    )]
    FdLimit {
        /// Descriptors the plan needs.
        needed: u64,
        /// The soft limit after raising it.
        soft: u64,
        /// The hard limit.
        hard: u64,
        /// Connections that would fit.
        fit: u64,
    },
    /// TLS could not be set up.
    #[error("{0}")]
    Tls(String),
    /// The plan cannot run as given (a flag's value the plan could not check).
    #[error("{0}")]
    Config(String),
    /// A worker thread could not start or died.
    #[error("worker failed: {0}")]
    Worker(String),
    /// A check before the run got no complete answer within its bound (a
    /// server that answers too slowly or not at all): a failed run.
    #[error("{0}")]
    Unanswered(String),
    /// A signal stopped the command before the run started.
    #[error("interrupted {0}")]
    Interrupted(&'static str),
}

impl EngineError {
    /// True when the plan asks for something this process cannot do (a
    /// server name TLS cannot send, more descriptors or VUs than fit, a
    /// value only the engine could check): the user's to fix, not a failed
    /// run. A host that does not resolve is a failed run (the target is
    /// unreachable from here).
    pub fn is_usage(&self) -> bool {
        match self {
            EngineError::FdLimit { .. } | EngineError::Tls(_) | EngineError::Config(_) => true,
            EngineError::Resolve { .. }
            | EngineError::Worker(_)
            | EngineError::Unanswered(_)
            | EngineError::Interrupted(_) => false,
        }
    }
}

/// Lets another thread (a signal handler) stop a run.
#[derive(Clone, Debug)]
pub struct Control {
    state: Arc<watch::Sender<RunState>>,
    interrupted: Arc<std::sync::atomic::AtomicBool>,
    snapshots: Arc<std::sync::atomic::AtomicBool>,
}

impl Default for Control {
    fn default() -> Self {
        Self::new()
    }
}

impl Control {
    /// A control for one run.
    pub fn new() -> Self {
        Control {
            state: Arc::new(watch::Sender::new(RunState::Running)),
            interrupted: Arc::default(),
            snapshots: Arc::default(),
        }
    }

    /// Asks the run (call it before the run starts) to merge everything
    /// measured so far about once a second and hand it to `on_tick` in
    /// [`Progress::snapshot`] (live metrics, the live view). Each worker then
    /// copies its recorder once a second, off the per-request path; without
    /// this call, runs copy nothing.
    pub fn want_snapshots(&self) {
        self.snapshots.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn snapshots_wanted(&self) -> bool {
        self.snapshots.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The user asked to stop (Ctrl-C, SIGTERM): start nothing new, wait up
    /// to the timeout for what is in flight. A second call aborts at once.
    pub fn interrupt(&self) {
        let first = !self.interrupted.swap(true, std::sync::atomic::Ordering::SeqCst);
        if first {
            self.stop();
        } else {
            self.state.send_replace(RunState::Aborting);
        }
    }

    /// True once [`Control::interrupt`] was called.
    pub fn was_interrupted(&self) -> bool {
        self.interrupted.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn stop(&self) {
        self.state.send_if_modified(|s| {
            if *s == RunState::Running {
                *s = RunState::Stopping;
                true
            } else {
                false
            }
        });
    }

    fn state(&self) -> RunState {
        *self.state.borrow()
    }
}

/// What a progress display gets ten times a second.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Since the run started.
    pub elapsed: Duration,
    /// Totals over all workers.
    pub live: Live,
    /// Requests the plan will make (when it is a count).
    pub total_requests: Option<u64>,
    /// How long the plan runs (when it is a duration).
    pub duration: Option<Duration>,
    /// Everything measured so far, merged over the workers: refreshed about
    /// once a second (the same `Arc` until then), None until the first
    /// merge or when nobody asked ([`Control::want_snapshots`]). Totals,
    /// counters and histograms are complete; the per-second series holds
    /// only the last few seconds (the last point is the second in progress)
    /// unless a threshold with abort_on_fail needs all of it.
    pub snapshot: Option<Arc<Measurements>>,
}

/// Resolves a host to its first address.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, EngineError> {
    let fail = |reason: String| EngineError::Resolve {
        host: host.to_string(),
        reason,
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("no addresses".to_string()))
}

/// Builds the TLS client for a target, or says why the name cannot be used.
/// The TLS client a plan needs: none for a plain target, the given
/// configuration with the plan's server name (or `host`) for a TLS one.
fn plan_tls(
    settings: Option<&throng_plan::TlsSettings>,
    config: Option<Arc<ClientConfig>>,
    host: &str,
    what: &str,
) -> Result<Option<TlsClient>, EngineError> {
    match (settings, config) {
        (Some(settings), Some(config)) => Ok(Some(tls_client(
            config,
            settings.server_name.as_deref().unwrap_or(host),
        )?)),
        (Some(_), None) => Err(EngineError::Tls(format!("{what} needs a TLS client configuration"))),
        (None, _) => Ok(None),
    }
}

fn tls_client(config: Arc<ClientConfig>, name: &str) -> Result<TlsClient, EngineError> {
    let server_name = ServerName::try_from(name.to_string()).map_err(|e| {
        EngineError::Tls(format!(
            "'{name}' cannot be sent as a TLS server name ({e}); pass --sni NAME"
        ))
    })?;
    Ok(TlsClient { config, server_name })
}

/// Fails before starting when `connections` open at once would not fit the
/// descriptor limit (raised to the hard limit first).
fn check_fds(connections: u64, threads: u32) -> Result<(), EngineError> {
    let (soft, hard) = sys::raise_fd_limit();
    let reserve = FD_RESERVE_PER_WORKER * u64::from(threads) + FD_RESERVE;
    let needed = connections + reserve;
    if needed > soft {
        return Err(EngineError::FdLimit {
            needed,
            soft,
            hard,
            fit: soft.saturating_sub(reserve),
        });
    }
    Ok(())
}

/// Descriptors one process can spend on connections after its reserve.
pub fn connections_per_process(threads: u32) -> u64 {
    let (soft, _) = sys::raise_fd_limit();
    soft.saturating_sub(FD_RESERVE_PER_WORKER * u64::from(threads) + FD_RESERVE)
}

/// Runs an HTTP/1.1 plan to completion and returns its result. `on_tick`
/// is called about ten times a second with live figures; with `rows`, one
/// CSV row per request is streamed to its file.
pub fn run_http(
    plan: &HttpPlan,
    tls: Option<Arc<ClientConfig>>,
    rows: Option<&RequestLog>,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<RunResult, EngineError> {
    let threads = plan.threads.max(1);
    // This process's segment of the plan (the whole without one), divided
    // among the workers: the descriptor check counts the segment's share.
    let loads = plan.worker_loads(threads);
    check_fds(loads.connections, threads)?;
    if plan.io == throng_plan::IoModel::Uring {
        if rows.is_some() {
            return Err(EngineError::Config(
                "--io uring does not write --csv-requests rows yet; leave out --csv-requests, or run with --io epoll"
                    .into(),
            ));
        }
        uring::probe().map_err(EngineError::Config)?;
    }
    let https = plan.target.scheme == throng_plan::Scheme::Https;
    let route = Arc::new(reach::route(&plan.target.host, plan.target.port, &plan.reach, https)?);
    let reach = Arc::new(plan.reach.clone());
    let tls_config = tls.clone();
    let h3 = http3_spec(plan, tls.as_deref())?;
    let tls = plan_tls(plan.tls.as_ref(), tls, &plan.target.host, "an https plan")?;

    let h2 = plan.http == throng_plan::HttpVersion::Http2;
    // The check speaks to the first address directly (not through a proxy's tunnel).
    if h2
        && !route.proxied
        && let Some(&addr) = route.addrs.first()
        && let Some(spoke) = http2::preflight(addr, tls.as_ref(), plan.timeout, control)?
    {
        if plan.grpc.is_some() {
            return Err(EngineError::Config(format!(
                "throng grpc: {} does not speak HTTP/2 (it answered with {spoke}); gRPC needs HTTP/2: point at \
                 a gRPC server (add --plaintext for one without TLS, leave it out for one with TLS)",
                plan.target.authority()
            )));
        }
        return Err(EngineError::Config(format!(
            "--http2: {} does not speak HTTP/2 (it answered with {spoke}); leave out --http2 to run over \
             HTTP/1.1, or point at a server with HTTP/2 enabled",
            plan.target.url
        )));
    }
    // One copy of the request (and its body) for every worker: a 64 MiB
    // body stays 64 MiB however many threads send it.
    let request = plan.request_bytes();
    let follow = redirect::FollowSpec::of(plan);
    let h2_spec = match h2 {
        true => Some(http2::Spec::from_plan(plan, 1).map_err(EngineError::Config)?),
        false => None,
    };
    // Before the clock starts: the first responses should be stamped too.
    let _primer = stamps::Primer::start();
    let clock = plan.start_at_unix_ms.map_or_else(Clock::start, Clock::at);
    let origin = clock.origin;
    // Several requests: rendered once by the plan, shared by the workers;
    // with several targets each one's figures are kept under target:NAME.
    // Targets on several origins: each resolved, with its TLS server name.
    let origins = plan
        .origins()
        .iter()
        .map(|o| {
            Ok(targets::Dest {
                route: reach::route(&o.host, o.port, &plan.reach, https)?,
                tls: plan_tls(plan.tls.as_ref(), tls_config.clone(), &o.host, "an https plan")?,
            })
        })
        .collect::<Result<Vec<_>, EngineError>>()?;
    // HTTP/2 and HTTP/3 send every one of the several requests as a
    // stream: each converted once here, so none fails at run time.
    if !plan.http.is_http1()
        && let Some(table) = plan.request_table()
    {
        mux::check_table(&table, &plan.target_names(), https)
            .map_err(|e| EngineError::Config(format!("{}: {e}", plan.http.label())))?;
    }
    // Each further origin speaks HTTP/2 too (the first was checked above).
    if h2 {
        for (o, d) in plan.origins().iter().zip(&origins).skip(1).take(MAX_PREFLIGHTS) {
            if !d.route.proxied
                && let Some(&addr) = d.route.addrs.first()
                && let Some(spoke) = http2::preflight(addr, d.tls.as_ref(), plan.timeout, control)?
            {
                return Err(EngineError::Config(format!(
                    "--http2: the target origin {} does not speak HTTP/2 (it answered with {spoke}); leave out \
                     --http2 to run over HTTP/1.1, or point every target at a server with HTTP/2 enabled",
                    o.url
                )));
            }
        }
    }
    let targets = plan.request_table().map(|table| {
        Arc::new(targets::TargetSpec {
            table,
            order: plan.targets_order,
            names: plan.target_names(),
            origins,
        })
    });
    let specs = loads
        .workers
        .into_iter()
        .enumerate()
        .map(|(worker, load)| {
            // HTTP/2: the loops run one task per stream slot, on at most
            // the worker's connections (see http2).
            let streams = if h2 { u64::from(plan.streams) } else { 1 };
            let (load, conns) = match load {
                HttpWorkerLoad::Closed {
                    connections,
                    budget,
                    until,
                } => (
                    WorkerLoad::Closed {
                        connections: connections.saturating_mul(streams),
                        budget,
                        until: until.map(|d| origin + d),
                    },
                    connections,
                ),
                HttpWorkerLoad::Open {
                    arrivals,
                    cap,
                    gap,
                    warm,
                } => (
                    WorkerLoad::Open {
                        arrivals,
                        cap: cap.saturating_mul(streams),
                        gap,
                        // HTTP/2 connections open with the first requests.
                        warm: if h2 { 0 } else { warm },
                    },
                    cap,
                ),
            };
            let h2 = h2_spec.as_ref().map(|s| http2::Spec {
                connections: conns.max(1),
                ..s.clone()
            });
            WorkerSpec {
                route: Arc::clone(&route),
                reach: Arc::clone(&reach),
                request: request.clone(),
                head_request: plan.method.eq_ignore_ascii_case("HEAD"),
                timeout: plan.timeout,
                keepalive: plan.keepalive,
                io: plan.io,
                // gRPC runs count gRPC status codes (0-16) instead.
                expect: plan
                    .grpc
                    .as_ref()
                    .map_or(plan.expect_status, |g| StatusSet::from_codes(&g.expect)),
                tls: tls.clone(),
                protocol: None,
                upgrade_tls: None,
                source: Arc::from(Vec::new()),
                origin,
                load,
                rows: None,
                targets: targets.clone().map(|t| (t, worker as u64, u64::from(threads))),
                follow: follow.clone(),
                h2,
                h3: h3.clone(),
            }
        })
        .collect();

    let launch = Launch {
        specs,
        clock,
        total_requests: loads.total_requests,
        duration: match plan.stop {
            Stop::Duration(d) => Some(d),
            Stop::Requests(_) => None,
        },
        // When the schedule ends; what is in flight then gets the timeout.
        planned_end: loads.planned_end.map(|d| origin + d),
        grace: plan.timeout,
        judge_after: u64::from(plan.connections).min(10),
        trigger: None,
        judge: None,
        rows: rows.map(|r| (r.clone(), 0)),
    };
    let finished = coordinate(launch, control, on_tick)?;
    let mut result = finished.into_result(Plan::Http(plan.redacted()), plan.is_open_loop(), control);
    result.notes.extend(plan.redaction_note());
    result.notes.extend(plan.targets_note());
    result.segment = plan.segment.clone();
    Ok(result)
}

/// Origins of an HTTP/2 run checked for HTTP/2 before it (the rest are
/// told by their failures): each check is a connection and a handshake.
const MAX_PREFLIGHTS: usize = 16;

/// The HTTP/3 client of an HTTP/3 plan (None for any other). The plan
/// made sure it is https and a closed loop.
fn http3_spec(plan: &HttpPlan, tls: Option<&ClientConfig>) -> Result<Option<Arc<http3::H3Spec>>, EngineError> {
    if plan.http != throng_plan::HttpVersion::Http3 {
        return Ok(None);
    }
    let (Some(settings), Some(tls)) = (plan.tls.as_ref(), tls) else {
        return Err(EngineError::Tls("--http3 needs a TLS client configuration".into()));
    };
    let name = settings.server_name.clone().unwrap_or_else(|| plan.target.host.clone());
    http3::H3Spec::new(plan, tls, name, plan.streams)
        .map(|s| Some(Arc::new(s)))
        .map_err(EngineError::Config)
}

/// The run's clocks, read together so that wall-clock and monotonic times
/// agree: workers start `STARTUP` from now.
struct Clock {
    origin: Instant,
    wall_start: SystemTime,
}

impl Clock {
    fn start() -> Self {
        Clock {
            origin: Instant::now() + STARTUP,
            wall_start: SystemTime::now() + STARTUP,
        }
    }

    /// A clock whose origin is a wall-clock instant (`--start-at`), so that
    /// processes started apart begin together. A process that comes late
    /// (the CLI allows a few seconds) keeps the shared origin: its schedule
    /// is the others', and what it starts late is recorded as schedule_lag.
    fn at(wall_ms: u64) -> Self {
        let wall = UNIX_EPOCH + Duration::from_millis(wall_ms);
        let now_wall = SystemTime::now();
        let now = Instant::now();
        let origin = match wall.duration_since(now_wall) {
            Ok(ahead) => Some(now + ahead),
            Err(e) => now.checked_sub(e.duration()),
        };
        match origin {
            Some(origin) => Clock {
                origin,
                wall_start: wall,
            },
            None => Clock {
                origin: now,
                wall_start: now_wall,
            },
        }
    }
}

/// Everything the coordinator needs to run workers.
struct Launch {
    specs: Vec<WorkerSpec>,
    clock: Clock,
    total_requests: Option<u64>,
    duration: Option<Duration>,
    planned_end: Option<Instant>,
    grace: Duration,
    /// Stop early when this many connection attempts failed and nothing
    /// succeeded (0: never).
    judge_after: u64,
    /// A command to run once `first_wave` connections have resolved.
    trigger: Option<(throng_plan::Trigger, u64)>,
    /// Judges everything measured so far, about once a second; a reason
    /// stops the run (thresholds with abort_on_fail).
    judge: Option<Judge>,
    /// `--csv-requests`, and the number of this process's first worker in
    /// the rows.
    rows: Option<(RequestLog, u64)>,
}

/// Judges a run while it lasts: measurements so far and time since the
/// start in, a reason to stop out.
type Judge = Box<dyn FnMut(&Measurements, Duration) -> Option<String>>;

/// What the workers left behind, merged.
struct Finished {
    measurements: Measurements,
    clock: Clock,
    finished: Instant,
    cpu: (Duration, Duration),
    threads: u32,
    stamps: stamps::Counts,
    notes: Vec<String>,
    trigger: Option<TriggerRecord>,
}

impl Finished {
    fn into_result(self, plan: Plan, co_free: bool, control: &Control) -> RunResult {
        let wall_ms = self
            .clock
            .wall_start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let duration_s = self.finished.saturating_duration_since(self.clock.origin).as_secs_f64();
        let env = sys::environment();
        let generator = Generator {
            // The generator's own threads only: a lab server or anything else
            // in this process is not counted.
            cpu_user_s: self.cpu.0.as_secs_f64(),
            cpu_system_s: self.cpu.1.as_secs_f64(),
            peak_rss_bytes: sys::usage().max_rss,
            threads: self.threads,
            timestamps: Some(throng_result::Timestamps {
                receive: stamps::clock().name().to_string(),
                kernel: self.stamps.kernel,
                user: self.stamps.user,
            }),
            // The cli samples the kernel around a storm (it may span processes).
            kernel: None,
            // Likewise the storm's processes' PSS.
            peak_pss_bytes: None,
        };
        RunResult {
            schema: SCHEMA.to_string(),
            throng_version: env!("CARGO_PKG_VERSION").to_string(),
            plan,
            started_at: rfc3339(wall_ms),
            started_at_unix_ms: wall_ms,
            duration_s,
            coordinated_omission_free: co_free,
            interrupted: control.was_interrupted(),
            parts: vec![Part {
                started_at_unix_ms: wall_ms,
                duration_s,
                hostname: env.hostname.clone(),
                generator: generator.clone(),
            }],
            environment: env,
            generator,
            measurements: self.measurements,
            notes: self.notes,
            trigger: self.trigger,
            thresholds: Vec::new(),
            segment: None,
        }
        .judged()
    }
}

/// Starts one thread per worker spec, reports progress, enforces stops and
/// grace periods, and merges what the workers measured.
fn coordinate(launch: Launch, control: &Control, on_tick: &mut dyn FnMut(&Progress)) -> Result<Finished, EngineError> {
    let Launch {
        specs,
        clock,
        total_requests,
        duration,
        planned_end,
        grace,
        judge_after,
        trigger,
        mut judge,
        rows,
    } = launch;
    let rows_dir = match &rows {
        Some((log, _)) => Some(rows::prepare(log).map_err(EngineError::Config)?),
        None => None,
    };
    let row_workers: Vec<u64> = match &rows {
        Some((_, first)) => (0..specs.len() as u64).map(|w| first + w).collect(),
        None => Vec::new(),
    };
    let mut specs = specs;
    if let (Some((log, _)), Some(dir)) = (&rows, &rows_dir) {
        // Invariant: one worker per thread, far below u32::MAX.
        let budgets = split_evenly(log.max_rows, specs.len() as u32);
        for ((spec, &worker), budget) in specs.iter_mut().zip(&row_workers).zip(budgets) {
            spec.rows = Some(load::RowSpec {
                dir: dir.clone(),
                worker,
                budget,
            });
        }
    }
    let mut trigger_run = trigger.map(|(t, wave)| trigger::Pending::new(t, wave));
    let origin = clock.origin;
    let threads = specs.len();
    let coordinator_cpu = sys::thread_cpu();
    let (done_tx, done_rx) = mpsc::channel::<(usize, std::io::Result<WorkerDone>)>();
    let want_snapshots = judge.is_some() || control.snapshots_wanted();
    let mut lives = Vec::new();
    let mut snapshots = Vec::new();
    let mut handles = Vec::new();
    for (w, spec) in specs.into_iter().enumerate() {
        let live = Arc::new(Mutex::new(Live::default()));
        lives.push(Arc::clone(&live));
        let snapshot = want_snapshots.then(|| worker::Snapshots {
            slot: Arc::new(Mutex::new(None)),
            // Thresholds judge windows of the series; live figures read
            // its last complete second.
            keep: if judge.is_some() { None } else { Some(SNAPSHOT_SECONDS) },
        });
        snapshots.extend(snapshot.as_ref().map(|s| Arc::clone(&s.slot)));
        let state = control.state.subscribe();
        let tx = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("throng-worker-{w}"))
            .spawn(move || {
                let out = worker::run(spec, state, live, snapshot);
                let _ = tx.send((w, out));
            })
            .map_err(|e| EngineError::Worker(format!("cannot start a worker thread: {e}")))?;
        handles.push(handle);
    }
    drop(done_tx);

    let mut notes = Vec::new();
    let mut done: Vec<Option<WorkerDone>> = (0..threads).map(|_| None).collect();
    let mut remaining = threads;
    let mut stop_seen: Option<Instant> = None;
    let mut abort_seen: Option<Instant> = None;
    let mut failure: Option<String> = None;
    let mut next_judgement = origin + JUDGE_EVERY;
    let mut merged: Option<Arc<Measurements>> = None;
    while remaining > 0 {
        match done_rx.recv_timeout(TICK) {
            Ok((w, Ok(d))) => {
                done[w] = Some(d);
                remaining -= 1;
                continue;
            }
            Ok((w, Err(e))) => {
                failure.get_or_insert(format!("worker {w}: {e}"));
                control.state.send_replace(RunState::Aborting);
                remaining -= 1;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        let mut live = Live::default();
        for l in &lives {
            if let Ok(l) = l.lock() {
                live.requests += l.requests;
                live.ok += l.ok;
                live.errors += l.errors;
                live.dropped += l.dropped;
                live.open_connections += l.open_connections;
                live.connections_ok += l.connections_ok;
                live.connection_errors += l.connection_errors;
                live.unanswered += l.unanswered;
                live.first_wave += l.first_wave;
                live.bytes_received += l.bytes_received;
            }
        }

        if let Some(t) = trigger_run.as_mut() {
            if control.was_interrupted() {
                // Ctrl-C ends the trigger's command too, not only the run.
                t.interrupt();
            }
            t.tick(now, origin, live.first_wave);
        }

        if want_snapshots && now >= next_judgement {
            next_judgement = now + JUDGE_EVERY;
            let mut so_far = Measurements::default();
            for s in &snapshots {
                if let Ok(s) = s.lock()
                    && let Some(m) = s.as_ref()
                {
                    let _ = so_far.merge(m, Duration::ZERO);
                }
            }
            if let Some(judge) = judge.as_mut()
                && control.state() == RunState::Running
                && let Some(reason) = judge(&so_far, now.saturating_duration_since(origin))
            {
                notes.push(reason);
                control.stop();
            }
            merged = Some(Arc::new(so_far));
        }

        on_tick(&Progress {
            elapsed: now.saturating_duration_since(origin),
            live,
            total_requests,
            duration,
            snapshot: merged.clone(),
        });

        // Nothing listens there: stop rather than spin on refusals. Only
        // attempts nobody answered count: a server that answers (a TLS
        // alert, a failed --expect) gets the count the run was asked for,
        // however fast this tick comes round (it came after 7 of 10 on a
        // busy machine, and after all 10 on a quiet one).
        if judge_after > 0
            && live.ok == 0
            && live.connections_ok == 0
            && live.unanswered >= judge_after
            && live.unanswered == live.connection_errors
        {
            if control.state() == RunState::Running {
                notes.push(format!(
                    "stopped early: the first {} connection attempts all failed and none succeeded",
                    live.connection_errors
                ));
            }
            control.stop();
        }

        match control.state() {
            RunState::Running => {
                if planned_end.is_some_and(|end| now > end + grace + TICK) {
                    control.state.send_replace(RunState::Aborting);
                }
            }
            RunState::Stopping => {
                let since = *stop_seen.get_or_insert(now);
                if now > since + grace + TICK {
                    control.state.send_replace(RunState::Aborting);
                }
            }
            RunState::Aborting => {
                // Workers drop their tasks at once on abort; if one does not,
                // report that rather than wait forever.
                let since = *abort_seen.get_or_insert(now);
                if now > since + ABORT_GRACE {
                    return Err(EngineError::Worker(format!(
                        "{remaining} worker(s) did not stop within {} s of being told to; this is a bug in throng",
                        ABORT_GRACE.as_secs()
                    )));
                }
            }
        }
    }
    for h in handles {
        if h.join().is_err() && failure.is_none() {
            failure = Some("a worker thread panicked".to_string());
        }
    }
    if let Some(f) = failure {
        return Err(EngineError::Worker(f));
    }

    let coordinator_after = sys::thread_cpu();
    let mut cpu = (
        coordinator_after.0.saturating_sub(coordinator_cpu.0),
        coordinator_after.1.saturating_sub(coordinator_cpu.1),
    );
    let mut measurements = Measurements::default();
    let mut finished = origin;
    let mut row_counts = RowCounts::default();
    for d in done.iter().flatten() {
        match &d.rows {
            Some(Ok(c)) => row_counts.add(*c),
            Some(Err(e)) => notes.push(e.clone()),
            None => {}
        }
    }
    if let (Some((log, _)), Some(dir)) = (&rows, &rows_dir) {
        match rows::assemble(log, dir, &row_workers) {
            Ok(()) => notes.extend(row_counts.note(log)),
            Err(e) => notes.push(e),
        }
    }
    let mut stamps = stamps::Counts::default();
    for d in done.into_iter().flatten() {
        finished = finished.max(d.finished);
        cpu.0 += d.cpu.0;
        cpu.1 += d.cpu.1;
        stamps.kernel += d.stamps.kernel;
        stamps.user += d.stamps.user;
        measurements
            .merge(&d.measurements, Duration::ZERO)
            .map_err(|e| EngineError::Worker(format!("merging worker results: {e}")))?;
    }
    Ok(Finished {
        measurements,
        clock,
        finished,
        cpu,
        // Invariant: one thread per worker, far below u32::MAX.
        threads: threads as u32,
        stamps,
        notes,
        trigger: trigger_run.map(|t| t.finish(control.was_interrupted())),
    })
}

/// Compiles a plan's protocol: the NATS CONNECT line, the line steps'
/// regular expressions.
fn protocol_spec(
    p: &throng_plan::Protocol,
    tls: bool,
    client: throng_plan::ClientProfile,
) -> Result<protocol::ProtocolSpec, EngineError> {
    Ok(match p {
        throng_plan::Protocol::Nats(auth) => protocol::ProtocolSpec::Nats {
            connect: protocol::nats_connect(auth.user.as_deref(), auth.secret.as_deref(), auth.token, tls),
            strict: client == throng_plan::ClientProfile::NatsGo,
        },
        throng_plan::Protocol::Lines { steps, step_timeout } => protocol::ProtocolSpec::Lines {
            steps: steps
                .iter()
                .map(|s| match s {
                    throng_plan::LineStep::Send(t) => protocol::Step::Send(t.as_bytes().to_vec()),
                    throng_plan::LineStep::SendSecret(t) => protocol::Step::Send(t.expose().as_bytes().to_vec()),
                    // Compiled when the plan was validated.
                    throng_plan::LineStep::Expect(re) => protocol::Step::Expect(re.regex().clone()),
                })
                .collect(),
            step_timeout: *step_timeout,
        },
        throng_plan::Protocol::WebSocket(ws) => protocol::ProtocolSpec::WebSocket(crate::ws::Spec {
            path: ws.path.clone(),
            host: ws.host.clone(),
            steps: ws
                .steps
                .iter()
                .map(|s| match s {
                    throng_plan::WsStep::Text(t) => crate::ws::Step::Send {
                        binary: false,
                        data: t.as_bytes().to_vec(),
                    },
                    throng_plan::WsStep::Binary { bytes, .. } => crate::ws::Step::Send {
                        binary: true,
                        data: bytes.clone(),
                    },
                    // Compiled when the plan was validated.
                    throng_plan::WsStep::Expect(re) => crate::ws::Step::Expect(re.regex().clone()),
                })
                .collect(),
            step_timeout: ws.step_timeout,
            ping_every: ws.ping_every,
        }),
    })
}

/// Which share of a storm this process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StormPart {
    /// This process's index, from 0.
    pub index: u32,
    /// Processes in the storm.
    pub count: u32,
    /// Start at this wall-clock instant (ms since the Unix epoch), so that
    /// processes begin together.
    pub start_at_unix_ms: Option<u64>,
}

impl StormPart {
    /// The whole storm in this process.
    pub const WHOLE: StormPart = StormPart {
        index: 0,
        count: 1,
        start_at_unix_ms: None,
    };
}

/// Most connections a storm may have open at once, from its plan: the cap,
/// or what its rate and hold allow, or all of them.
pub fn storm_peak_estimate(plan: &StormPlan) -> u64 {
    plan.peak_estimate()
}

/// Runs this process's share of a storm and returns its result.
pub fn run_storm(
    plan: &StormPlan,
    part: StormPart,
    tls: Option<Arc<ClientConfig>>,
    rows: Option<&RequestLog>,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<RunResult, EngineError> {
    let workers = plan.workers.max(1);
    let count = part.count.max(1);
    // This process's share of its segment, striped over the workers of all
    // its processes.
    let loads = plan.worker_loads(part.index, count);
    let http3 = plan.http == throng_plan::HttpVersion::Http3;
    // QUIC connections share their worker's one UDP socket.
    check_fds(if http3 { 0 } else { loads.peak }, workers)?;
    // Through a proxy, every storm connection is a CONNECT tunnel.
    let route = Arc::new(reach::route(&plan.target.host, plan.target.port, &plan.reach, true)?);
    let reach = Arc::new(plan.reach.clone());
    let client = plan_tls(plan.tls.as_ref(), tls, &plan.target.host, "a TLS storm")?;
    // tls:// and https:// speak TLS from the first byte; nats:// starts
    // plain and upgrades when the server's INFO asks for it.
    let (tls, upgrade_tls) = if plan.target.scheme.is_tls() {
        (client, None)
    } else {
        (None, client)
    };
    let protocol = plan
        .protocol
        .as_ref()
        .map(|p| protocol_spec(p, tls.is_some(), plan.client))
        .transpose()?
        .map(Arc::new);
    let request = bytes::Bytes::from(plan.request_bytes().unwrap_or_default());
    // HTTP/2: each connection speaks the preface; its request (when the
    // storm makes one: `request` not empty) is one stream.
    let h2 = match plan.http {
        throng_plan::HttpVersion::Http2 => {
            if !route.proxied
                && let Some(&addr) = route.addrs.first()
                && let Some(spoke) = http2::preflight(addr, tls.as_ref(), plan.timeout, control)?
            {
                return Err(EngineError::Config(format!(
                    "--http2: {} does not speak HTTP/2 (it answered with {spoke}); leave out --http2 to storm \
                     over HTTP/1.1, or point at a server with HTTP/2 enabled",
                    plan.target.url
                )));
            }
            Some(http2::Spec::for_storm(plan).map_err(EngineError::Config)?)
        }
        _ => None,
    };
    let h3 = match (http3, tls.as_ref()) {
        (false, _) => None,
        (true, Some(tls)) => Some(Arc::new(
            http3::H3Spec::for_storm(plan, &tls.config).map_err(EngineError::Config)?,
        )),
        (true, None) => return Err(EngineError::Tls("--http3 needs a TLS client configuration".into())),
    };
    let source: Arc<[std::net::IpAddr]> = Arc::from(plan.source.clone());
    // A storm that makes requests times their responses (see run_http).
    let _primer = if request.is_empty() {
        None
    } else {
        stamps::Primer::start()
    };
    let clock = part.start_at_unix_ms.map_or_else(Clock::start, Clock::at);
    let origin = clock.origin;
    let mine = loads.connections;
    let specs = loads
        .workers
        .into_iter()
        .map(|w| WorkerSpec {
            route: Arc::clone(&route),
            reach: Arc::clone(&reach),
            request: request.clone(),
            head_request: false,
            timeout: plan.timeout,
            keepalive: true,
            io: throng_plan::IoModel::Epoll,
            expect: StatusSet::default(),
            tls: tls.clone(),
            protocol: protocol.clone(),
            upgrade_tls: upgrade_tls.clone(),
            source: Arc::clone(&source),
            origin,
            load: WorkerLoad::Storm(StormLoad {
                starts: w.starts,
                cap: w.cap,
                hold: plan.hold,
                scheduled: plan.rate.is_some() || plan.jitter.is_some(),
                gap: w.gap,
                worker: w.worker,
                workers: w.workers,
                reconnect: plan.reconnect,
                seed: plan.seed,
                nats_go: plan.client == throng_plan::ClientProfile::NatsGo,
            }),
            rows: None,
            targets: None,
            follow: None,
            h2: h2.clone(),
            h3: h3.clone(),
        })
        .collect();
    let launch = Launch {
        specs,
        clock,
        total_requests: Some(mine),
        duration: None,
        planned_end: None,
        grace: plan.timeout,
        judge_after: plan.connections.min(10),
        trigger: plan.trigger.clone().map(|t| (t, mine)),
        judge: None,
        rows: rows.map(|r| (r.clone(), u64::from(part.index) * u64::from(workers))),
    };
    let mut finished = coordinate(launch, control, on_tick)?;
    if count > 1 {
        finished.notes.push(format!(
            "process {} of {count}: connections {} of {}",
            part.index + 1,
            mine,
            plan.connections
        ));
    }
    let co_free = plan.rate.is_some() || plan.jitter.is_some();
    let mut result = finished.into_result(Plan::Storm(plan.clone()), co_free, control);
    result.segment = plan.segment.clone();
    Ok(result)
}

/// Stops the run when a threshold with `abort_on_fail` fails on what was
/// measured so far, once its delay has passed.
fn abort_judge(plan: &throng_scenario::ScenarioPlan) -> Option<Judge> {
    let watched: Vec<throng_scenario::Threshold> =
        plan.thresholds.iter().filter(|t| t.abort_on_fail).cloned().collect();
    if watched.is_empty() {
        return None;
    }
    Some(Box::new(move |m: &Measurements, elapsed: Duration| {
        watched
            .iter()
            .filter(|t| elapsed >= Duration::from_millis(t.delay_ms))
            .map(|t| t.evaluate(m))
            // Nothing measured yet is no reason to stop: such a threshold
            // fails at the end, when nothing was measured at all.
            .find(|v| !v.passed && v.observed.is_some())
            .map(|v| {
                format!(
                    "stopped at {:.0}s: threshold '{}' failed ({}) and has abort_on_fail",
                    elapsed.as_secs_f64(),
                    v.threshold,
                    v.detail
                )
            })
    }))
}

/// Where each scenario's VUs connect and in which protocols: its target's
/// route, TLS client (ALPN `h2` for HTTP/2) or QUIC client (HTTP/3), and
/// the same for each other protocol its requests name with their own
/// `http:`. An HTTP/2 target (or request) whose server does not speak
/// HTTP/2 is refused here, before the run, as `throng http --http2`
/// refuses it.
fn scenario_dests(
    plan: &throng_scenario::ScenarioPlan,
    tls: Option<&Arc<ClientConfig>>,
    reach: &throng_plan::Reach,
    control: &Control,
) -> Result<Arc<[Arc<scenario::Dest>]>, EngineError> {
    use throng_plan::HttpVersion;
    type Made<'a> = (
        &'a throng_scenario::BaseUrl,
        Vec<(HttpVersion, &'a str)>,
        Arc<scenario::Dest>,
    );
    let mut made: Vec<Made<'_>> = Vec::new();
    let mut out = Vec::with_capacity(plan.scenarios.len());
    for s in &plan.scenarios {
        let target = s.target(&plan.target);
        let asked = s.request_protocols();
        // Scenarios with the same target and request protocols share one.
        if let Some((_, _, d)) = made.iter().find(|(t, a, _)| *t == target && *a == asked) {
            out.push(Arc::clone(d));
            continue;
        }
        let what = format!("the https target {}", target.url);
        // The route and TLS client (ALPN by protocol) for `http`.
        let conn = |http: HttpVersion| -> Result<targets::Dest, EngineError> {
            let route = reach::route(&target.host, target.port, reach, false)?;
            let config = match (target.https, http) {
                (false, _) => None,
                (true, HttpVersion::Http2) => tls.map(|c| {
                    let mut c = ClientConfig::clone(c);
                    c.alpn_protocols = vec![b"h2".to_vec()];
                    Arc::new(c)
                }),
                (true, _) => tls.cloned(),
            };
            let tls_client = if target.https {
                plan_tls(plan.tls.as_ref(), config, &target.host, &what)?
            } else {
                None
            };
            Ok(targets::Dest { route, tls: tls_client })
        };
        let which = if s.target.is_some() {
            format!("scenario {}'s target", s.name)
        } else {
            "target".to_string()
        };
        let main = conn(target.http)?;
        let mut also = Vec::new();
        for &(http, _) in &asked {
            if http != target.http && http != HttpVersion::Http3 && !also.iter().any(|(h, _)| *h == http) {
                also.push((http, conn(http)?));
            }
        }
        let quic = match std::iter::once(target.http)
            .chain(asked.iter().map(|(h, _)| *h))
            .any(|h| h == HttpVersion::Http3)
        {
            true => {
                let (Some(settings), Some(c)) = (plan.tls.as_ref(), tls) else {
                    return Err(EngineError::Tls(format!("{what} needs a TLS client configuration")));
                };
                let client = http3::quic_client(c)
                    .map_err(|e| EngineError::Config(format!("{}: {which} (http: 3): {e}", plan.file)))?;
                let name = settings.server_name.clone().unwrap_or_else(|| target.host.clone());
                Some((client, name))
            }
            false => None,
        };
        let d = scenario::Dest {
            http: target.http,
            conn: main,
            quic,
            also,
        };
        if target.http == HttpVersion::Http2
            && let Some(&addr) = d.conn.route.addrs.first()
            && let Some(spoke) = http2::preflight(addr, d.conn.tls.as_ref(), plan.defaults.timeout, control)?
        {
            return Err(EngineError::Config(format!(
                "{}: {which} {} has http: 2, but the server does not speak HTTP/2 (it answered with {spoke}); \
                 write http: 1.1 (or leave http: out) to run over HTTP/1.1, or point at a server with HTTP/2 enabled",
                plan.file, target.url
            )));
        }
        if target.http == HttpVersion::Http3
            && let Some(&addr) = d.conn.route.addrs.first()
            && let Some((client, name)) = d.quic.as_ref()
            && let Some(spoke) = http3::preflight(addr, client, name, plan.defaults.timeout)
        {
            return Err(EngineError::Config(format!(
                "{}: {which} {} has http: 3, but the server does not speak HTTP/3 (it answered with {spoke}); \
                 write http: 2 or http: 1.1 to run over TCP, or point at a server with HTTP/3 enabled",
                plan.file, target.url
            )));
        }
        if let Some(&(_, at)) = asked
            .iter()
            .find(|(h, _)| *h == HttpVersion::Http2 && target.http != HttpVersion::Http2)
            && let Some(&addr) = d.conn.route.addrs.first()
            && let Some(spoke) = http2::preflight(
                addr,
                d.conn_for(HttpVersion::Http2).tls.as_ref(),
                plan.defaults.timeout,
                control,
            )?
        {
            return Err(EngineError::Config(format!(
                "{at}: this request has http: 2, but scenario {}'s target {} does not speak HTTP/2 (it answered with \
                 {spoke}); leave http: out to use the target's protocol, or point at a server with HTTP/2 enabled",
                s.name, target.url
            )));
        }
        if let Some(&(_, at)) = asked
            .iter()
            .find(|(h, _)| *h == HttpVersion::Http3 && target.http != HttpVersion::Http3)
            && let Some(&addr) = d.conn.route.addrs.first()
            && let Some((client, name)) = d.quic.as_ref()
            && let Some(spoke) = http3::preflight(addr, client, name, plan.defaults.timeout)
        {
            return Err(EngineError::Config(format!(
                "{at}: this request has http: 3, but scenario {}'s target {} does not speak HTTP/3 (it answered with \
                 {spoke}); leave http: out to use the target's protocol, or point at a server with HTTP/3 enabled",
                s.name, target.url
            )));
        }
        let d = Arc::new(d);
        made.push((target, asked, Arc::clone(&d)));
        out.push(d);
    }
    Ok(out.into())
}

/// How to run a scenario file besides the file itself.
#[derive(Clone, Debug, Default)]
pub struct ScenarioOptions {
    /// Worker threads (0: one per core).
    pub threads: u32,
    /// The environment `{{env.NAME}}` reads.
    pub env: std::collections::HashMap<String, String>,
    /// Seed of every VU's random generator (`{{uuid}}`, think ranges).
    pub seed: u64,
    /// `--csv-requests`: one row per request.
    pub requests_csv: Option<RequestLog>,
    /// `--start-at`: start at this wall-clock instant (ms since the Unix epoch).
    pub start_at_unix_ms: Option<u64>,
    /// `-4`/`-6`, `--connect-to`, `--resolve` (no proxy: scenarios build
    /// their own requests, in origin form).
    pub reach: throng_plan::Reach,
}

/// Runs a scenario file's scenarios to completion and returns the result,
/// its thresholds judged.
pub fn run_scenario(
    plan: &throng_scenario::ScenarioPlan,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<RunResult, EngineError> {
    let threads = if options.threads == 0 {
        sys::cores()
    } else {
        options.threads
    }
    .max(1);
    // Every VU may hold a connection at once (this segment's VUs).
    let segment = plan.segment();
    let vus: u64 = plan.scenarios.iter().map(|s| segment.share(s.executor.max_vus())).sum();
    let fit = connections_per_process(threads);
    if vus > fit {
        return Err(EngineError::Config(format!(
            "the scenarios may run {vus} VUs at once, each with its own connection, but this process may \
             open about {fit}; lower vus, max_vus or the stages' targets, or raise the descriptor limit"
        )));
    }
    let route = Arc::new(reach::route(
        &plan.target.host,
        plan.target.port,
        &options.reach,
        false,
    )?);
    let dests = scenario_dests(plan, tls.as_ref(), &options.reach, control)?;
    let reach = Arc::new(options.reach.clone());
    // The file's TLS client (or a scenario's, when only scenarios are
    // https): a redirect to another https origin starts from it.
    let tls = match plan.target.https {
        true => plan_tls(plan.tls.as_ref(), tls, &plan.target.host, "an https target")?,
        false => dests.iter().find_map(|d| d.conn.tls.clone()).map(|mut t| {
            // Without an HTTP/2 target's ALPN `h2`: a hop elsewhere speaks HTTP/1.1.
            if !t.config.alpn_protocols.is_empty() {
                let mut c = ClientConfig::clone(&t.config);
                c.alpn_protocols.clear();
                t.config = Arc::new(c);
            }
            t
        }),
    };
    // See run_http.
    let _primer = stamps::Primer::start();
    let clock = options.start_at_unix_ms.map_or_else(Clock::start, Clock::at);
    let origin = clock.origin;
    let shared_plan = Arc::new(plan.clone());
    let env = Arc::new(options.env.clone());
    let shared = Arc::new(load::SharedCounters::new(plan.scenarios.len()));
    let specs = (0..threads)
        .map(|w| WorkerSpec {
            route: Arc::clone(&route),
            reach: Arc::clone(&reach),
            request: bytes::Bytes::new(),
            head_request: false,
            timeout: plan.defaults.timeout,
            keepalive: true,
            io: throng_plan::IoModel::Epoll,
            expect: plan.defaults.expect,
            tls: tls.clone(),
            protocol: None,
            upgrade_tls: None,
            source: Arc::from(Vec::new()),
            origin,
            load: WorkerLoad::Scenario(load::ScenarioLoad {
                plan: Arc::clone(&shared_plan),
                env: Arc::clone(&env),
                worker: w,
                workers: threads,
                shared: Arc::clone(&shared),
                seed: options.seed,
                dests: Arc::clone(&dests),
            }),
            rows: None,
            targets: None,
            follow: None,
            h2: None,
            h3: None,
        })
        .collect();
    // Workers cut off what outlives each scenario's graceful stop; the
    // coordinator's own limit only guards against a worker that does not.
    let last = plan
        .scenarios
        .iter()
        .map(|s| s.end() + s.graceful_stop)
        .max()
        .unwrap_or_default();
    let launch = Launch {
        specs,
        clock,
        total_requests: None,
        duration: Some(plan.end()),
        planned_end: Some(origin + last),
        grace: plan.defaults.timeout + TICK,
        judge_after: vus.min(10),
        trigger: None,
        judge: abort_judge(plan),
        rows: options.requests_csv.clone().map(|r| (r, 0)),
    };
    let finished = coordinate(launch, control, on_tick)?;
    let co_free = plan.scenarios.iter().all(|s| s.executor.is_open());
    let mut result = finished.into_result(Plan::Run(Box::new(plan.redacted())), co_free, control);
    result.notes.extend(plan.redaction_note());
    if let Some(s) = &result.measurements.scenario
        && s.truncated_bodies > 0
    {
        result.notes.push(format!(
            "{} responses were longer than their step's max_body (default 1 MiB): their checks and captures saw \
             only the first max_body bytes; raise max_body in defaults or the step",
            s.truncated_bodies
        ));
    }
    result.segment = plan.segment.clone();
    Ok(result)
}
