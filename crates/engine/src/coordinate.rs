//! The coordinator: on the caller's thread, it starts one OS thread per
//! worker, wakes every [`TICK`] to report progress, stop a run nobody
//! answers, judge thresholds with abort_on_fail and enforce grace periods,
//! then merges what the workers measured into a [`RunResult`].
//!
//! ```text
//!  Launch ─► spawn (one thread per WorkerSpec) ─► Crew
//!             │ every TICK: live figures summed, trigger, judge
//!             │ (snapshots merged once a second), on_tick(Progress),
//!             │ early stop, grace → abort
//!             ▼
//!  WorkerDone per worker ─► gather (rows, CPU, merge) ─► Finished ─► RunResult
//! ```

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use throng_metrics::{Live, Measurements};
use throng_plan::split_evenly;
use throng_result::{Generator, Part, Plan, RunResult, SCHEMA, TriggerRecord, rfc3339};

use crate::error::{EngineError, WorkerFailure};
use crate::load::{self, WorkerSpec};
use crate::rows::{self, RequestLog, RowCounts};
use crate::worker::{self, RunState, WorkerDone};
use crate::{Control, Progress, stamps, sys, trigger};

/// How long workers get to build their runtimes before the first request.
const STARTUP: Duration = Duration::from_millis(20);
/// How often the coordinator wakes to report progress and check limits.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// How often the coordinator merges the workers' snapshots (for a judge of
/// thresholds with abort_on_fail, live metrics, the live view).
const JUDGE_EVERY: Duration = Duration::from_secs(1);
/// Seconds of the per-second series a live snapshot carries (besides the
/// second in progress), when no threshold needs all of them.
const SNAPSHOT_SECONDS: usize = 3;
/// How long workers get to stop after an abort before the run gives up on them.
const ABORT_GRACE: Duration = Duration::from_secs(5);

/// The run's clocks, read together so that wall-clock and monotonic times
/// agree: workers start `STARTUP` from now.
pub(crate) struct Clock {
    pub origin: Instant,
    wall_start: SystemTime,
}

impl Clock {
    /// A clock whose origin is now: a run on the caller's thread
    /// (`throng mqtt`) starts at once.
    pub(crate) fn now() -> Self {
        Clock {
            origin: Instant::now(),
            wall_start: SystemTime::now(),
        }
    }

    pub(crate) fn start() -> Self {
        Clock {
            origin: Instant::now() + STARTUP,
            wall_start: SystemTime::now() + STARTUP,
        }
    }

    /// A clock whose origin is a wall-clock instant (`--start-at`), so that
    /// processes started apart begin together. A process that comes late
    /// (the CLI allows a few seconds) keeps the shared origin: its schedule
    /// is the others', and what it starts late is recorded as schedule_lag.
    pub(crate) fn at(wall_ms: u64) -> Self {
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
pub(crate) struct Launch {
    pub specs: Vec<WorkerSpec>,
    pub clock: Clock,
    pub total_requests: Option<u64>,
    pub duration: Option<Duration>,
    pub planned_end: Option<Instant>,
    pub grace: Duration,
    /// Stop the run at its planned end rather than give what is in flight
    /// the grace (event streams of an open loop's `-d`: a stream the server
    /// never ends would be cut off as interrupted, its events lost).
    pub stop_at_planned_end: bool,
    /// Stop early when this many connection attempts failed and nothing
    /// succeeded (0: never).
    pub judge_after: u64,
    /// A command to run once `first_wave` connections have resolved.
    pub trigger: Option<(throng_plan::Trigger, u64)>,
    /// Judges everything measured so far, about once a second; a reason
    /// stops the run (thresholds with abort_on_fail).
    pub judge: Option<Judge>,
    /// `--csv-requests`, and the number of this process's first worker in
    /// the rows.
    pub rows: Option<(RequestLog, u64)>,
}

/// Judges a run while it lasts: measurements so far and time since the
/// start in, a reason to stop out.
pub(crate) type Judge = Box<dyn FnMut(&Measurements, Duration) -> Option<String>>;

/// What the workers left behind, merged.
pub(crate) struct Finished {
    measurements: Measurements,
    clock: Clock,
    finished: Instant,
    cpu: (Duration, Duration),
    threads: u32,
    stamps: stamps::Counts,
    pub notes: Vec<String>,
    trigger: Option<TriggerRecord>,
}

impl Finished {
    /// What a run on one thread (the caller's) measured, ending now.
    pub(crate) fn single(
        measurements: Measurements,
        clock: Clock,
        cpu: (Duration, Duration),
        notes: Vec<String>,
    ) -> Self {
        Finished {
            measurements,
            clock,
            finished: Instant::now(),
            cpu,
            threads: 1,
            stamps: stamps::Counts::default(),
            notes,
            trigger: None,
        }
    }

    pub(crate) fn into_result(self, plan: Plan, co_free: bool, control: &Control) -> RunResult {
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
            // Storms and scenarios run on epoll; an HTTP run says what it chose.
            io: Some(throng_result::Io::Epoll),
            io_fallback: None,
            io_not_carried: None,
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
            remote_write: None,
            otlp: None,
        }
        .judged()
    }
}

/// Starts one thread per worker spec, reports progress, enforces stops and
/// grace periods, and merges what the workers measured.
pub(crate) fn coordinate(
    launch: Launch,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<Finished, EngineError> {
    let Launch {
        mut specs,
        clock,
        total_requests,
        duration,
        planned_end,
        grace,
        stop_at_planned_end,
        judge_after,
        trigger,
        judge,
        rows,
    } = launch;
    let rows = rows
        .map(|(log, first)| Rows::prepare(log, first, &mut specs))
        .transpose()?;
    let coordinator_cpu = sys::thread_cpu();
    let want_snapshots = judge.is_some() || control.snapshots_wanted();
    let crew = spawn(specs, control, want_snapshots, judge.is_some())?;
    let mut watch = Watch {
        control,
        origin: clock.origin,
        total_requests,
        duration,
        planned_end,
        grace,
        stop_at_planned_end,
        judge_after,
        judge,
        trigger: trigger.map(|(t, wave)| trigger::Pending::new(t, wave)),
        want_snapshots,
        notes: Vec::new(),
        stop_seen: None,
        abort_seen: None,
        next_judgement: clock.origin + JUDGE_EVERY,
        merged: None,
    };
    let done = watch.run(&crew.lives, &crew.snapshots, &crew.done, on_tick)?;
    let mut failure = done.failure;
    for h in crew.handles {
        if h.join().is_err() && failure.is_none() {
            failure = Some(WorkerFailure::Panicked);
        }
    }
    if let Some(f) = failure {
        return Err(EngineError::Worker(f));
    }
    let coordinator_after = sys::thread_cpu();
    let cpu = (
        coordinator_after.0.saturating_sub(coordinator_cpu.0),
        coordinator_after.1.saturating_sub(coordinator_cpu.1),
    );
    let trigger = watch.trigger.take().map(|t| t.finish(control.was_interrupted()));
    let mut notes = watch.notes;
    if let Some(rows) = &rows {
        rows.finish(&done.done, &mut notes);
    }
    gather(done.done, clock, cpu, notes, trigger)
}

/// `--csv-requests` in a run: the directory of the workers' parts and each
/// worker's number in the rows.
struct Rows {
    log: RequestLog,
    dir: PathBuf,
    workers: Vec<u64>,
}

impl Rows {
    /// Makes the parts' directory and gives each worker its share of the
    /// rows' budget; `first` is this process's first worker's number.
    fn prepare(log: RequestLog, first: u64, specs: &mut [WorkerSpec]) -> Result<Rows, EngineError> {
        let dir = rows::prepare(&log)?;
        let workers: Vec<u64> = (0..specs.len() as u64).map(|w| first + w).collect();
        // Invariant: one worker per thread, far below u32::MAX.
        let budgets = split_evenly(log.max_rows, specs.len() as u32);
        for ((spec, &worker), budget) in specs.iter_mut().zip(&workers).zip(budgets) {
            spec.rows = Some(load::RowSpec {
                dir: dir.clone(),
                worker,
                budget,
            });
        }
        Ok(Rows { log, dir, workers })
    }

    /// Assembles the workers' parts into the one file; what went wrong and
    /// what was cut short become notes.
    fn finish(&self, done: &[Option<WorkerDone>], notes: &mut Vec<String>) {
        let mut counts = RowCounts::default();
        for d in done.iter().flatten() {
            match &d.rows {
                Some(Ok(c)) => counts.add(*c),
                Some(Err(e)) => notes.push(format!("--csv-requests: writing rows failed: {e}")),
                None => {}
            }
        }
        match rows::assemble(&self.log, &self.dir, &self.workers) {
            Ok(()) => notes.extend(counts.note(&self.log)),
            Err(e) => notes.push(e.to_string()),
        }
    }
}

/// A worker's end as its thread reports it.
type Report = (usize, std::io::Result<WorkerDone>);

/// The running workers, as the coordinator sees them.
struct Crew {
    /// Each worker's live figures (published ten times a second).
    lives: Vec<Arc<Mutex<Live>>>,
    /// Each worker's copy of its measurements (when snapshots are wanted).
    snapshots: Vec<Arc<Mutex<Option<Measurements>>>>,
    handles: Vec<JoinHandle<()>>,
    done: mpsc::Receiver<Report>,
}

/// Starts one thread per spec. `keep_all`: snapshots carry the whole
/// per-second series (a judge's windows look back), not the last seconds.
fn spawn(specs: Vec<WorkerSpec>, control: &Control, want_snapshots: bool, keep_all: bool) -> Result<Crew, EngineError> {
    let (done_tx, done) = mpsc::channel::<Report>();
    let mut crew = Crew {
        lives: Vec::new(),
        snapshots: Vec::new(),
        handles: Vec::new(),
        done,
    };
    for (w, spec) in specs.into_iter().enumerate() {
        let live = Arc::new(Mutex::new(Live::default()));
        crew.lives.push(Arc::clone(&live));
        let snapshot = want_snapshots.then(|| worker::Snapshots {
            slot: Arc::new(Mutex::new(None)),
            // Thresholds judge windows of the series; live figures read
            // its last complete second.
            keep: if keep_all { None } else { Some(SNAPSHOT_SECONDS) },
        });
        crew.snapshots.extend(snapshot.as_ref().map(|s| Arc::clone(&s.slot)));
        let state = control.subscribe();
        let tx = done_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("throng-worker-{w}"))
            .spawn(move || {
                let out = worker::run(spec, state, live, snapshot);
                let _ = tx.send((w, out));
            })
            .map_err(WorkerFailure::Spawn)?;
        crew.handles.push(handle);
    }
    Ok(crew)
}

/// The coordinator's state while the workers run.
struct Watch<'a> {
    control: &'a Control,
    origin: Instant,
    total_requests: Option<u64>,
    duration: Option<Duration>,
    planned_end: Option<Instant>,
    grace: Duration,
    stop_at_planned_end: bool,
    judge_after: u64,
    judge: Option<Judge>,
    trigger: Option<trigger::Pending>,
    want_snapshots: bool,
    notes: Vec<String>,
    stop_seen: Option<Instant>,
    abort_seen: Option<Instant>,
    next_judgement: Instant,
    merged: Option<Arc<Measurements>>,
}

/// What the workers reported: each one's end (None when it failed), and
/// the first failure.
struct Done {
    done: Vec<Option<WorkerDone>>,
    failure: Option<WorkerFailure>,
}

impl Watch<'_> {
    /// Waits for every worker, ticking meanwhile.
    fn run(
        &mut self,
        lives: &[Arc<Mutex<Live>>],
        snapshots: &[Arc<Mutex<Option<Measurements>>>],
        reports: &mpsc::Receiver<Report>,
        on_tick: &mut dyn FnMut(&Progress),
    ) -> Result<Done, EngineError> {
        let mut out = Done {
            done: (0..lives.len()).map(|_| None).collect(),
            failure: None,
        };
        let mut remaining = lives.len();
        while remaining > 0 {
            match reports.recv_timeout(TICK) {
                Ok((w, Ok(d))) => {
                    out.done[w] = Some(d);
                    remaining -= 1;
                    continue;
                }
                Ok((w, Err(reason))) => {
                    out.failure.get_or_insert(WorkerFailure::Io { worker: w, reason });
                    self.control.abort();
                    remaining -= 1;
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            self.tick(Instant::now(), lives, snapshots, on_tick, remaining)?;
        }
        Ok(out)
    }

    /// One wake-up while workers run.
    fn tick(
        &mut self,
        now: Instant,
        lives: &[Arc<Mutex<Live>>],
        snapshots: &[Arc<Mutex<Option<Measurements>>>],
        on_tick: &mut dyn FnMut(&Progress),
        remaining: usize,
    ) -> Result<(), EngineError> {
        let live = sum_live(lives);
        if let Some(t) = self.trigger.as_mut() {
            if self.control.was_interrupted() {
                // Ctrl-C ends the trigger's command too, not only the run.
                t.interrupt();
            }
            t.tick(now, self.origin, live.first_wave);
        }
        if self.want_snapshots && now >= self.next_judgement {
            self.next_judgement = now + JUDGE_EVERY;
            self.judge_snapshots(now, snapshots);
        }
        on_tick(&Progress {
            elapsed: now.saturating_duration_since(self.origin),
            live,
            total_requests: self.total_requests,
            duration: self.duration,
            snapshot: self.merged.clone(),
        });
        self.stop_if_unanswered(&live);
        self.enforce_grace(now, remaining)
    }

    /// Merges the workers' snapshots (for the live view) and asks the judge
    /// whether to stop.
    fn judge_snapshots(&mut self, now: Instant, snapshots: &[Arc<Mutex<Option<Measurements>>>]) {
        let mut so_far = Measurements::default();
        for s in snapshots {
            if let Ok(s) = s.lock()
                && let Some(m) = s.as_ref()
            {
                let _ = so_far.merge(m, Duration::ZERO);
            }
        }
        if let Some(judge) = self.judge.as_mut()
            && self.control.state() == RunState::Running
            && let Some(reason) = judge(&so_far, now.saturating_duration_since(self.origin))
        {
            self.notes.push(reason);
            self.control.stop();
        }
        self.merged = Some(Arc::new(so_far));
    }

    /// Nothing listens there: stop rather than spin on refusals. Only
    /// attempts nobody answered count: a server that answers (a TLS alert,
    /// a failed --expect) gets the count the run was asked for, however
    /// fast this tick comes round (it came after 7 of 10 on a busy machine,
    /// and after all 10 on a quiet one).
    fn stop_if_unanswered(&mut self, live: &Live) {
        if self.judge_after > 0
            && live.ok == 0
            && live.connections_ok == 0
            && live.unanswered >= self.judge_after
            && live.unanswered == live.connection_errors
        {
            if self.control.state() == RunState::Running {
                self.notes.push(format!(
                    "stopped early: the first {} connection attempts all failed and none succeeded",
                    live.connection_errors
                ));
            }
            self.control.stop();
        }
    }

    /// Aborts a run past its planned end or its stop's grace; gives up on
    /// workers that do not stop after an abort.
    fn enforce_grace(&mut self, now: Instant, remaining: usize) -> Result<(), EngineError> {
        match self.control.state() {
            RunState::Running => {
                if self.planned_end.is_some_and(|end| now > end + self.grace + TICK) {
                    self.control.abort();
                } else if self.stop_at_planned_end && self.planned_end.is_some_and(|end| now >= end) {
                    self.control.stop();
                }
            }
            RunState::Stopping => {
                let since = *self.stop_seen.get_or_insert(now);
                if now > since + self.grace + TICK {
                    self.control.abort();
                }
            }
            RunState::Aborting => {
                // Workers drop their tasks at once on abort; if one does not,
                // report that rather than wait forever.
                let since = *self.abort_seen.get_or_insert(now);
                if now > since + ABORT_GRACE {
                    return Err(EngineError::Worker(WorkerFailure::Stuck {
                        remaining,
                        grace_s: ABORT_GRACE.as_secs(),
                    }));
                }
            }
        }
        Ok(())
    }
}

/// The workers' live figures, summed.
fn sum_live(lives: &[Arc<Mutex<Live>>]) -> Live {
    let mut live = Live::default();
    for l in lives {
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
    live
}

/// Merges what the workers measured, their CPU and their stamps.
fn gather(
    done: Vec<Option<WorkerDone>>,
    clock: Clock,
    coordinator_cpu: (Duration, Duration),
    notes: Vec<String>,
    trigger: Option<TriggerRecord>,
) -> Result<Finished, EngineError> {
    let threads = done.len();
    let mut cpu = coordinator_cpu;
    let mut measurements = Measurements::default();
    let mut finished = clock.origin;
    let mut stamps = stamps::Counts::default();
    for d in done.into_iter().flatten() {
        finished = finished.max(d.finished);
        cpu.0 += d.cpu.0;
        cpu.1 += d.cpu.1;
        stamps.kernel += d.stamps.kernel;
        stamps.user += d.stamps.user;
        measurements
            .merge(&d.measurements, Duration::ZERO)
            .map_err(WorkerFailure::Merge)?;
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
        trigger,
    })
}
