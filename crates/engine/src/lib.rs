//! throng's engine: runs a plan and returns its result document.
//!
//! ```text
//!  run_http(plan) ── coordinator (caller's thread: progress, stop, grace)
//!        │ spawns one OS thread per worker
//!        ▼
//!  worker: current-thread tokio runtime + LocalSet
//!        ├─ closed loop: one task per connection, request after request
//!        └─ open loop: dispatcher (timerfd) ─► queue ─► connection tasks
//!        │   each task: connect ─► exchange (write, read, parse) ─► Recorder
//!        ▼
//!  Measurements per worker ── merge ──► RunResult
//! ```
//!
//! Workers share nothing on the per-request path: each owns its sockets,
//! read buffer and [`throng_metrics::Recorder`]. The coordinator only reads
//! live figures each worker publishes ten times a second.

mod conn;
mod errors;
pub mod http1;
pub mod sys;
mod timer;
mod transport;
mod worker;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use throng_metrics::{Live, Measurements};
use throng_plan::{Arrivals, HttpPlan, Load, Stop, split_evenly};
use throng_result::{Generator, Part, Plan, RunResult, SCHEMA, rfc3339};
use tokio::sync::watch;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::pki_types::ServerName;

pub use errors::errno_name;
use transport::TlsClient;
use worker::{RunState, WorkerDone, WorkerLoad, WorkerSpec};

/// How long workers get to build their runtimes before the first request.
const STARTUP: Duration = Duration::from_millis(20);
/// How often the coordinator wakes to report progress and check limits.
const TICK: Duration = Duration::from_millis(100);
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
    #[error("cannot resolve host '{host}': {reason}; check the host name in the URL")]
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
    /// A worker thread could not start or died.
    #[error("worker failed: {0}")]
    Worker(String),
}

/// Lets another thread (a signal handler) stop a run.
#[derive(Clone, Debug)]
pub struct Control {
    state: Arc<watch::Sender<RunState>>,
    interrupted: Arc<std::sync::atomic::AtomicBool>,
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
        }
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
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Since the run started.
    pub elapsed: Duration,
    /// Totals over all workers.
    pub live: Live,
    /// Requests the plan will make (when it is a count).
    pub total_requests: Option<u64>,
    /// How long the plan runs (when it is a duration).
    pub duration: Option<Duration>,
}

/// Connections an open-loop worker opens before its schedule starts: enough
/// for 2 ms of arrivals, plus a few; never more than its cap.
fn warm_connections(rate: f64, cap: u64) -> u64 {
    ((rate * 0.002).ceil() as u64 + 4).min(cap)
}

/// Resolves the plan's host to its first address.
pub fn resolve(plan: &HttpPlan) -> Result<SocketAddr, EngineError> {
    let host = plan.target.host.as_str();
    let fail = |reason: String| EngineError::Resolve {
        host: host.to_string(),
        reason,
    };
    (host, plan.target.port)
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("no addresses".to_string()))
}

/// Runs an HTTP/1.1 plan to completion and returns its result. `on_tick`
/// is called about ten times a second with live figures.
pub fn run_http(
    plan: &HttpPlan,
    tls: Option<Arc<ClientConfig>>,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<RunResult, EngineError> {
    let threads = plan.threads.max(1);
    let (soft, hard) = sys::raise_fd_limit();
    let needed = u64::from(plan.connections) + FD_RESERVE_PER_WORKER * u64::from(threads) + FD_RESERVE;
    if needed > soft {
        return Err(EngineError::FdLimit {
            needed,
            soft,
            hard,
            fit: soft.saturating_sub(needed - u64::from(plan.connections)),
        });
    }
    let addr = resolve(plan)?;
    let tls = match (&plan.tls, tls) {
        (Some(settings), Some(config)) => {
            let name = settings.server_name.as_deref().unwrap_or(&plan.target.host);
            let server_name = ServerName::try_from(name.to_string()).map_err(|e| EngineError::Tls(format!(
                "'{name}' cannot be sent as a TLS server name ({e}); pass --sni NAME"
            )))?;
            Some(TlsClient {
                connector: tokio_rustls::TlsConnector::from(config),
                server_name,
            })
        }
        (Some(_), None) => return Err(EngineError::Tls("an https plan needs a TLS client configuration".into())),
        (None, _) => None,
    };

    let request: Box<[u8]> = plan.request_bytes().into_boxed_slice();
    let coordinator_cpu = sys::thread_cpu();
    let wall_start = SystemTime::now() + STARTUP;
    let origin = Instant::now() + STARTUP;

    let conns = split_evenly(u64::from(plan.connections), threads);
    let (budgets, until, total_arrivals) = match (plan.load, plan.stop) {
        (_, Stop::Requests(n)) => (Some(split_evenly(n, threads)), None, n),
        (Load::Closed, Stop::Duration(d)) => (None, Some(origin + d), 0),
        (Load::Open { rate }, Stop::Duration(d)) => (None, None, Arrivals::count_within(rate, d)),
    };

    let (done_tx, done_rx) = mpsc::channel::<(usize, std::io::Result<WorkerDone>)>();
    let mut lives = Vec::new();
    let mut handles = Vec::new();
    for w in 0..threads as usize {
        let load = match plan.load {
            Load::Closed => WorkerLoad::Closed {
                connections: conns[w],
                budget: budgets.as_ref().map(|b| b[w]),
                until,
            },
            Load::Open { rate } => WorkerLoad::Open {
                // Invariant: w < threads, which fits u32.
                arrivals: Arrivals::new(rate, total_arrivals, w as u32, threads),
                cap: conns[w],
                // This worker's share of the schedule: every threads-th arrival.
                gap: Duration::from_secs_f64(f64::from(threads) / rate),
                warm: if plan.keepalive { warm_connections(rate / f64::from(threads), conns[w]) } else { 0 },
            },
        };
        let spec = WorkerSpec {
            addr,
            request: request.clone(),
            head_request: plan.method.eq_ignore_ascii_case("HEAD"),
            timeout: plan.timeout,
            keepalive: plan.keepalive,
            expect: plan.expect_status,
            tls: tls.clone(),
            origin,
            load,
        };
        let live = Arc::new(Mutex::new(Live::default()));
        lives.push(Arc::clone(&live));
        let state = control.state.subscribe();
        let tx = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("throng-worker-{w}"))
            .spawn(move || {
                let out = worker::run(spec, state, live);
                let _ = tx.send((w, out));
            })
            .map_err(|e| EngineError::Worker(format!("cannot start a worker thread: {e}")))?;
        handles.push(handle);
    }
    drop(done_tx);

    let total_requests = match plan.stop {
        Stop::Requests(n) => Some(n),
        Stop::Duration(_) if plan.is_open_loop() => Some(total_arrivals),
        Stop::Duration(_) => None,
    };
    let duration = match plan.stop {
        Stop::Duration(d) => Some(d),
        Stop::Requests(_) => None,
    };
    // When the schedule ends, plus the grace for what is in flight.
    let planned_end = match (plan.load, plan.stop) {
        (Load::Closed, Stop::Duration(d)) => Some(origin + d),
        (Load::Open { rate }, _) => Some(origin + throng_plan::arrival_offset(total_arrivals, rate)),
        _ => None,
    };

    let mut notes = Vec::new();
    let mut done: Vec<Option<WorkerDone>> = (0..threads).map(|_| None).collect();
    let mut remaining = threads as usize;
    let mut stop_seen: Option<Instant> = None;
    let mut abort_seen: Option<Instant> = None;
    let mut failure: Option<String> = None;
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
                live.connection_errors += l.connection_errors;
                live.bytes_received += l.bytes_received;
            }
        }
        on_tick(&Progress {
            elapsed: now.saturating_duration_since(origin),
            live,
            total_requests,
            duration,
        });

        // Nothing listens there: stop rather than spin on refusals.
        let attempts_to_judge = u64::from(plan.connections).min(10);
        if live.ok == 0 && live.requests == live.errors && live.connection_errors >= attempts_to_judge {
            if control.state() == RunState::Running {
                notes.push(format!(
                    "stopped early: the first {} connection attempts all failed and no request succeeded",
                    live.connection_errors
                ));
            }
            control.stop();
        }

        match control.state() {
            RunState::Running => {
                if planned_end.is_some_and(|end| now > end + plan.timeout + TICK) {
                    control.state.send_replace(RunState::Aborting);
                }
            }
            RunState::Stopping => {
                let since = *stop_seen.get_or_insert(now);
                if now > since + plan.timeout + TICK {
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

    let usage_after = sys::usage();
    let coordinator_after = sys::thread_cpu();
    let (mut cpu_user, mut cpu_system) = (
        coordinator_after.0.saturating_sub(coordinator_cpu.0),
        coordinator_after.1.saturating_sub(coordinator_cpu.1),
    );
    let mut measurements = Measurements::default();
    let mut finished = origin;
    for d in done.into_iter().flatten() {
        finished = finished.max(d.finished);
        cpu_user += d.cpu.0;
        cpu_system += d.cpu.1;
        measurements
            .merge(&d.measurements, 0)
            .map_err(|e| EngineError::Worker(format!("merging worker results: {e}")))?;
    }
    let wall_ms = wall_start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let duration_s = finished.saturating_duration_since(origin).as_secs_f64();
    let env = sys::environment();
    let generator = Generator {
        // The generator's own threads only: a lab server or anything else
        // in this process is not counted.
        cpu_user_s: cpu_user.as_secs_f64(),
        cpu_system_s: cpu_system.as_secs_f64(),
        peak_rss_bytes: usage_after.max_rss,
        threads,
    };
    Ok(RunResult {
        schema: SCHEMA.to_string(),
        throng_version: env!("CARGO_PKG_VERSION").to_string(),
        plan: Plan::Http(plan.clone()),
        started_at: rfc3339(wall_ms),
        started_at_unix_ms: wall_ms,
        duration_s,
        coordinated_omission_free: plan.is_open_loop(),
        interrupted: control.was_interrupted(),
        parts: vec![Part {
            started_at_unix_ms: wall_ms,
            duration_s,
            hostname: env.hostname.clone(),
            generator: generator.clone(),
        }],
        environment: env,
        generator,
        measurements,
        notes,
    })
}
