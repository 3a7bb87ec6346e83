//! The result document: one JSON file per run, versioned, with a JSON Schema
//! checked in at `schema/result.schema.json`.
//!
//! ```text
//!  engine ─► RunResult ─► to_writer ─► RESULT.json ─► from_reader ─► RunResult ─► reports
//!                                                        │
//!               RESULT-a.json, RESULT-b.json ─► merge ───┘  (histograms add: exact)
//! ```
//!
//! Every report is rendered from a [`RunResult`], so a run can be re-reported
//! or merged later without re-running it.
//!
//! Several runs of one plan in sequence (`--repeat N`) make a [`ResultSet`]
//! (schema `throng.result-set/v1`); [`runs_from_reader`] and [`load_runs`]
//! read either kind of document, so every command that reads results takes
//! both.
//!
//! Documents are read and written through `Read` and `Write`; [`load`] and
//! [`load_runs`] are the one place that opens a file (by path), for the
//! commands that read result files; the document is checked within
//! [`limits`] however it is read.
//! [`RunResult::unit`] says what a run counts (requests, or connections for
//! a storm) for every report.

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use throng_metrics::{HistError, Measurements};
use throng_plan::{HttpPlan, StormPlan};
use throng_scenario::{ScenarioPlan, Verdict};

pub mod history;
pub mod limits;

/// The schema identifier written into, and required of, every document.
pub const SCHEMA: &str = "throng.result/v1";

/// The schema identifier of a [`ResultSet`].
pub const SET_SCHEMA: &str = "throng.result-set/v1";

/// What went wrong reading, writing or merging results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultError {
    /// Not JSON, or not a throng result.
    #[error("not a throng result document: {}", short(&.0.to_string()))]
    Parse(#[from] serde_json::Error),
    /// Written by an incompatible throng.
    #[error(
        "schema '{}' is not supported; this throng reads '{SCHEMA}' and '{SET_SCHEMA}' (re-run with a matching throng version)",
        short(found)
    )]
    Schema {
        /// The document's schema.
        found: String,
    },
    /// JSON without a `schema` field: not a throng document at all.
    #[error("not a throng result document (it has no \"schema\" field); give a file written by --json")]
    NotAResult,
    /// A histogram in the document is damaged, or counts added up (a
    /// histogram's or a counter's, in a merge) pass 2^64.
    #[error("{}", hist_problem(.0))]
    Hist(#[from] HistError),
    /// Results of different kinds cannot be merged.
    #[error("cannot merge: {}", short(.0))]
    Incompatible(String),
    /// A number in the document is past a limit ([`limits`]).
    #[error(
        "'{}' {} (a result throng writes stays within the limits in docs/RESULTS.md; give an undamaged file written by --json)",
        short(field),
        short(problem)
    )]
    Limit {
        /// Where in the document, e.g. `measurements.series[3].second`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Reading or writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A [`HistError`] as a result error says it: an overflow names what
/// overflowed (counters overflow in a merge as well as histograms), anything
/// else is a damaged histogram.
fn hist_problem(e: &HistError) -> String {
    match e {
        HistError::Overflow(_) => e.to_string(),
        _ => format!("damaged histogram: {e}"),
    }
}

/// `text` on one line and at most [`SHORT_CHARS`] characters: error
/// messages quote what a file holds, and a file can hold anything.
pub fn short(text: &str) -> std::borrow::Cow<'_, str> {
    let one_line = !text.contains(['\n', '\r']);
    match text.char_indices().nth(SHORT_CHARS) {
        None if one_line => std::borrow::Cow::Borrowed(text),
        cut => {
            let end = cut.map_or(text.len(), |(i, _)| i);
            let mut s: String = text[..end].replace(['\n', '\r'], " ");
            if cut.is_some() {
                s.push('…');
            }
            std::borrow::Cow::Owned(s)
        }
    }
}

/// The most characters [`short`] keeps.
pub const SHORT_CHARS: usize = 300;

/// What produced the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "lowercase")]
pub enum Plan {
    /// `throng http`.
    Http(HttpPlan),
    /// `throng storm`.
    Storm(StormPlan),
    /// `throng run SCENARIO.yaml`.
    Run(Box<ScenarioPlan>),
}

/// What a run counts as its unit of work ([`RunResult::unit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// HTTP requests (`throng http`, `throng run`).
    Requests,
    /// Connections established (`throng storm`).
    Connections,
}

impl Unit {
    /// The unit in the plural, as reports say it: `requests`, `connections`.
    pub fn plural(self) -> &'static str {
        match self {
            Unit::Requests => "requests",
            Unit::Connections => "connections",
        }
    }

    /// The unit in the singular: `request`, `connection`.
    pub fn singular(self) -> &'static str {
        match self {
            Unit::Requests => "request",
            Unit::Connections => "connection",
        }
    }

    /// A second's count of this unit done well: requests ended ok, or
    /// connections established.
    pub fn per_second(self, p: &throng_metrics::SeriesPoint) -> u64 {
        match self {
            Unit::Requests => p.ok,
            Unit::Connections => p.connections_opened,
        }
    }
}

impl Plan {
    /// True when latency is measured from each request's intended start.
    pub fn is_open_loop(&self) -> bool {
        match self {
            Plan::Http(p) => p.is_open_loop(),
            Plan::Storm(p) => p.rate.is_some() || p.jitter.is_some(),
            // Only arrival-rate scenarios start iterations on a schedule.
            Plan::Run(p) => p.scenarios.iter().all(|s| s.executor.is_open()),
        }
    }

    /// The target as given.
    pub fn target_url(&self) -> &str {
        match self {
            Plan::Http(p) => &p.target.url,
            Plan::Storm(p) => &p.target.url,
            Plan::Run(p) => &p.target.url,
        }
    }

    /// `host:port` of the target.
    pub fn target_authority(&self) -> String {
        match self {
            Plan::Http(p) => format!("{}:{}", p.target.host, p.target.port),
            Plan::Storm(p) => format!("{}:{}", p.target.host, p.target.port),
            Plan::Run(p) => format!("{}:{}", p.target.host, p.target.port),
        }
    }

    /// The command that made it: `http`, `storm` or `run`.
    pub fn command(&self) -> &'static str {
        match self {
            Plan::Http(_) => "http",
            Plan::Storm(_) => "storm",
            Plan::Run(_) => "run",
        }
    }

    /// How `other` differs from this plan in what a report's labels say:
    /// the command, the target (scheme, host, port, path), the request
    /// method and whether the load is open or closed loop. Empty when they
    /// agree (execution segments, counts and rates may differ: parts of
    /// one test often split those).
    pub fn differences(&self, other: &Plan) -> Vec<String> {
        let mut out = Vec::new();
        if self.command() != other.command() {
            out.push(format!("command {} vs {}", self.command(), other.command()));
            return out;
        }
        let clip = |s: &str| short(s).chars().take(80).collect::<String>();
        if self.target_url() != other.target_url() {
            out.push(format!(
                "target {} vs {}",
                clip(self.target_url()),
                clip(other.target_url())
            ));
        }
        if let (Plan::Http(a), Plan::Http(b)) = (self, other)
            && a.method != b.method
        {
            out.push(format!("method {} vs {}", clip(&a.method), clip(&b.method)));
        }
        let shape = |p: &Plan| if p.is_open_loop() { "open loop" } else { "closed loop" };
        if self.is_open_loop() != other.is_open_loop() {
            out.push(format!("{} vs {}", shape(self), shape(other)));
        }
        out
    }

    /// The TLS settings, if the target speaks TLS.
    pub fn tls(&self) -> Option<&throng_plan::TlsSettings> {
        match self {
            Plan::Http(p) => p.tls.as_ref(),
            Plan::Storm(p) => p.tls.as_ref(),
            Plan::Run(p) => p.tls.as_ref(),
        }
    }
}

/// The machine and limits the run had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name.
    pub hostname: String,
    /// `uname -sr`.
    pub os: String,
    /// Logical cores.
    pub cores: u32,
    /// RLIMIT_NOFILE soft limit during the run (after raising it).
    pub fd_limit_soft: u64,
    /// RLIMIT_NOFILE hard limit.
    pub fd_limit_hard: u64,
}

/// What the run cost the generator itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// User CPU seconds over the run.
    pub cpu_user_s: f64,
    /// System CPU seconds over the run.
    pub cpu_system_s: f64,
    /// Peak resident memory of the process, bytes.
    pub peak_rss_bytes: u64,
    /// Worker threads.
    pub threads: u32,
    /// How response arrivals were timed; absent in results written before
    /// throng said so (they used the user-space clock at the read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<Timestamps>,
    /// The kernel's side of a storm's connections, sampled system-wide while
    /// it ran; absent for other runs and in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSockets>,
    /// A storm's largest proportional set size (PSS) summed over its
    /// processes, sampled while it ran, bytes: pages the processes share
    /// (the program's own) counted once, where `peak_rss_bytes`, a sum of
    /// each process's peak RSS, counts them once per process. Absent for
    /// other runs and in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_pss_bytes: Option<u64>,
}

/// What the kernel held for a storm's sockets: figures of the whole
/// machine (`/proc/net/sockstat` and `/proc/meminfo`), sampled a few times a
/// second while the storm ran. On loopback both ends of a connection count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSockets {
    /// TCP sockets in use when the storm started (sockstat `TCP: inuse`).
    pub tcp_sockets_before: u64,
    /// Most TCP sockets in use at once while it ran.
    pub tcp_sockets_peak: u64,
    /// Most memory in TCP socket buffers at once (sockstat `TCP: mem`,
    /// pages, as bytes): what queued data costs, not the sockets themselves.
    pub tcp_buffer_bytes_peak: u64,
    /// Growth of the kernel's slab memory (meminfo `Slab`) from the start to
    /// the sample with the most sockets: where socket, inode, file and epoll
    /// structures live. Anything else the machine did meanwhile counts too.
    pub slab_growth_bytes: u64,
}

impl KernelSockets {
    /// Sockets added at the peak over the start.
    pub fn added(&self) -> u64 {
        self.tcp_sockets_peak.saturating_sub(self.tcp_sockets_before)
    }

    /// Samples of one machine taken by runs at the same time: the largest
    /// of each figure (adding them would count the machine twice).
    pub fn merged(a: Option<&KernelSockets>, b: Option<&KernelSockets>) -> Option<KernelSockets> {
        match (a, b) {
            (None, x) | (x, None) => x.copied(),
            (Some(a), Some(b)) => Some(KernelSockets {
                tcp_sockets_before: a.tcp_sockets_before.min(b.tcp_sockets_before),
                tcp_sockets_peak: a.tcp_sockets_peak.max(b.tcp_sockets_peak),
                tcp_buffer_bytes_peak: a.tcp_buffer_bytes_peak.max(b.tcp_buffer_bytes_peak),
                slab_growth_bytes: a.slab_growth_bytes.max(b.slab_growth_bytes),
            }),
        }
    }
}

/// Which clocks timed the responses. Sends are always timed just before
/// the system call that writes the request's last bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamps {
    /// The receive clock asked for: `kernel` (the kernel's software receive
    /// timestamp, SO_TIMESTAMPING, read with the data) or `user` (the
    /// monotonic clock when the read returns; THRONG_TIMESTAMPS=user).
    /// `mixed` for a merge of both.
    pub receive: String,
    /// Responses whose arrival came from the kernel's stamp.
    pub kernel: u64,
    /// Responses timed by the user-space clock: asked for, or the fallback
    /// when a read brought no stamp or an implausible one (a clock step).
    pub user: u64,
}

impl Timestamps {
    /// Both clocks' counts added; the receive clock kept when both asked
    /// for the same one.
    pub fn merged(a: Option<&Timestamps>, b: Option<&Timestamps>) -> Option<Timestamps> {
        match (a, b) {
            (None, x) | (x, None) => x.cloned(),
            (Some(a), Some(b)) => Some(Timestamps {
                receive: if a.receive == b.receive {
                    a.receive.clone()
                } else {
                    "mixed".to_string()
                },
                kernel: a.kernel.saturating_add(b.kernel),
                user: a.user.saturating_add(b.user),
            }),
        }
    }
}

/// One run (or one piece of a merged result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// Seconds from the first request's start to the last one's end.
    pub duration_s: f64,
    /// Host it ran on.
    pub hostname: String,
    /// The generator's own cost.
    pub generator: Generator,
}

/// One run's result document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The throng that wrote it.
    pub throng_version: String,
    /// What was run.
    pub plan: Plan,
    /// Wall-clock start, RFC 3339 UTC.
    pub started_at: String,
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// Seconds from the start to the end of the last request (for merged
    /// results: from the earliest start to the latest end).
    pub duration_s: f64,
    /// True when latency is measured from intended start times.
    pub coordinated_omission_free: bool,
    /// True when the run was stopped early (signal).
    pub interrupted: bool,
    /// Where it ran.
    pub environment: Environment,
    /// The generator's cost (summed over parts for merged results).
    pub generator: Generator,
    /// What was measured.
    pub measurements: Measurements,
    /// The runs this document adds up (one for a plain run).
    pub parts: Vec<Part>,
    /// Things the reader should know (plan adjustments, warnings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The storm's `--trigger` command, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<TriggerRecord>,
    /// A scenario's thresholds, judged on the measurements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Verdict>,
    /// The execution segment this run was (`--segment`); None for a whole
    /// plan, and for a merge of segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<throng_plan::Segment>,
}

/// What happened to a storm's `--trigger` command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TriggerRecord {
    /// The shell command.
    pub command: String,
    /// When it ran, seconds after the run's start (None: it never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fired_at_s: Option<f64>,
    /// How long it took, seconds.
    #[serde(default)]
    pub duration_s: f64,
    /// Its exit status (None: killed by a signal, timed out, or never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of what it printed (stdout and stderr).
    #[serde(default)]
    pub output: String,
    /// Why it did not run or finish, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The threshold an open loop with thresholds is also judged by when none
/// of its own bounds `dropped`: [`IMPLIED_DROPPED`].
fn implied_dropped(m: &Measurements) -> Verdict {
    let t = match throng_scenario::Threshold::parse_line(IMPLIED_DROPPED) {
        Ok(t) => t,
        // The constant parses (a unit test says so); were it not to, the
        // verdict fails rather than vanishes.
        Err(e) => {
            return Verdict {
                threshold: IMPLIED_DROPPED.to_string(),
                passed: false,
                observed: None,
                detail: e,
            };
        }
    };
    let mut v = t.evaluate(m);
    v.detail = if v.passed {
        format!("{} (implied by an open loop's thresholds)", v.detail)
    } else {
        format!(
            "{} (implied: an open loop's thresholds judge the load it was asked for; give a dropped threshold \
             of your own, e.g. --threshold 'dropped: rate < 10%', to set another bound)",
            v.detail
        )
    };
    v
}

/// What an open loop's thresholds imply of its schedule. Why implied, and
/// only with thresholds: thresholds are the user's question "did the
/// server hold at this load?", and a run that sent a fifth of its schedule
/// cannot answer yes; without thresholds the exit code says only whether
/// the target worked (exit 1 is every request failing), and a run that
/// cannot keep its schedule warns instead, as k6 leaves dropped iterations
/// to a threshold.
pub const IMPLIED_DROPPED: &str = "dropped: rate <= 1%";

impl RunResult {
    /// The result with its scenario thresholds judged (again) on its
    /// measurements: a merged result is judged on the merged figures.
    pub fn judged(mut self) -> RunResult {
        match &self.plan {
            Plan::Run(p) => {
                self.thresholds = p.thresholds.iter().map(|t| t.evaluate(&self.measurements)).collect();
            }
            // `--threshold`s were checked when the run was planned; one a
            // hand-edited file garbles fails rather than vanishes.
            Plan::Http(p) if !p.thresholds.is_empty() => {
                let parsed: Vec<Result<throng_scenario::Threshold, String>> = p
                    .thresholds
                    .iter()
                    .map(|text| throng_scenario::Threshold::parse_line(text))
                    .collect();
                self.thresholds = parsed
                    .iter()
                    .zip(&p.thresholds)
                    .map(|(t, text)| match t {
                        Ok(t) => t.evaluate(&self.measurements),
                        Err(e) => throng_scenario::Verdict {
                            threshold: text.clone(),
                            passed: false,
                            observed: None,
                            detail: e.clone(),
                        },
                    })
                    .collect();
                // Thresholds judge the load that was asked for: an open loop
                // judged on a fraction of its schedule would pass by
                // accident, so unless the user bounded `dropped` themselves,
                // more than 1% dropped fails the run too.
                let bounded = parsed.iter().any(|t| t.as_ref().is_ok_and(|t| t.metric == "dropped"));
                if p.is_open_loop() && !bounded {
                    self.thresholds.push(implied_dropped(&self.measurements));
                }
            }
            _ => {}
        }
        self
    }

    /// Checks the books: every attempted request, connection and
    /// reconnection ended exactly once (`attempted = ok + Σ errors`, summed
    /// without overflow), and each second's failures by class add up to its
    /// failures. The first problem found, as a sentence.
    pub fn books(&self) -> Result<(), String> {
        let m = &self.measurements;
        for (name, o) in [
            ("requests", &m.requests),
            ("connections", &m.connections),
            ("reconnects", &m.reconnects),
        ] {
            match o.checked_ended() {
                None => return Err(format!("{name}: ok + Σ errors passes 2^64 - 1")),
                Some(ended) if ended != o.attempted => {
                    return Err(format!(
                        "{name}: {} attempted but {} ended ({} ok + {} failed)",
                        o.attempted,
                        ended,
                        o.ok,
                        ended - o.ok
                    ));
                }
                Some(_) => {}
            }
        }
        for p in &m.series {
            for (what, classes, total) in [
                ("request failures", &p.error_classes, p.errors),
                ("connection failures", &p.connection_error_classes, p.connection_errors),
            ] {
                // Older results kept no classes per second.
                if classes.is_empty() {
                    continue;
                }
                let by_class = classes.values().try_fold(0u64, |a, &n| a.checked_add(n));
                if by_class != Some(total) {
                    return Err(format!(
                        "second {}: {total} {what} but their classes add up to {}",
                        p.second,
                        by_class.map_or_else(|| "more than 2^64 - 1".to_string(), |n| n.to_string())
                    ));
                }
            }
        }
        Ok(())
    }

    /// True when every threshold held (or there were none).
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|v| v.passed)
    }

    /// What this run counts as its unit of work: connections for a storm,
    /// requests for an HTTP or scenario run. Reports say throughput,
    /// failures and per-second series in this unit.
    pub fn unit(&self) -> Unit {
        match self.plan {
            Plan::Storm(_) => Unit::Connections,
            Plan::Http(_) | Plan::Run(_) => Unit::Requests,
        }
    }

    /// The outcomes of this run's [`unit`](Self::unit).
    pub fn unit_outcomes(&self) -> &throng_metrics::Outcomes {
        match self.unit() {
            Unit::Connections => &self.measurements.connections,
            Unit::Requests => &self.measurements.requests,
        }
    }

    /// Requests that ended (ok or failed) per second of run time.
    pub fn requests_per_second(&self) -> f64 {
        per_second(self.measurements.requests.ended(), self.duration_s)
    }

    /// Writes pretty JSON.
    pub fn to_writer(&self, mut w: impl Write) -> Result<(), ResultError> {
        serde_json::to_writer_pretty(&mut w, self)?;
        w.write_all(b"\n")?;
        Ok(())
    }

    /// Reads a document, checking its schema and its numbers ([`limits`]).
    pub fn from_reader(r: impl Read) -> Result<RunResult, ResultError> {
        let value: serde_json::Value = serde_json::from_reader(r)?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {
                limits::check_histograms(&value)?;
                let run: RunResult = serde_json::from_value(value)?;
                limits::check_run(&run, "")?;
                Ok(run)
            }
            Some(other) => Err(ResultError::Schema {
                found: other.to_string(),
            }),
            None => Err(ResultError::Schema {
                found: "(none)".to_string(),
            }),
        }
    }

    /// Adds several results into one: counters and histograms add exactly;
    /// series line up by wall-clock second; the duration spans the earliest
    /// start to the latest end. The plan and environment are the first's.
    pub fn merge(results: &[RunResult]) -> Result<RunResult, ResultError> {
        let (first, rest) = results
            .split_first()
            .ok_or_else(|| ResultError::Incompatible("no results to merge".to_string()))?;
        for r in rest {
            if std::mem::discriminant(&r.plan) != std::mem::discriminant(&first.plan) {
                return Err(ResultError::Incompatible(
                    "results come from different commands".to_string(),
                ));
            }
        }
        let start = results.iter().map(|r| r.started_at_unix_ms).min().unwrap_or(0);
        let end_ms = results
            .iter()
            .map(|r| r.started_at_unix_ms as f64 + r.duration_s * 1000.0)
            .fold(0f64, f64::max);
        let span_s = (end_ms - start as f64).max(0.0) / 1000.0;
        if span_s > limits::MAX_DURATION_S {
            return Err(ResultError::Incompatible(format!(
                "the results span {:.0} days from the first start to the last end, more than the longest \
                 run a result may cover (366 days); merge parts that ran at the same time",
                span_s / 86_400.0
            )));
        }
        let mut merged = Measurements::default();
        let mut generator = Generator::default();
        let mut parts = Vec::new();
        let mut notes = Vec::new();
        let overflow = |what: &str| ResultError::Hist(HistError::Overflow(format!("the generator's {what}")));
        for r in results {
            let offset = std::time::Duration::from_millis(r.started_at_unix_ms - start);
            merged.merge(&r.measurements, offset)?;
            generator.cpu_user_s += r.generator.cpu_user_s;
            generator.cpu_system_s += r.generator.cpu_system_s;
            generator.peak_rss_bytes = generator
                .peak_rss_bytes
                .checked_add(r.generator.peak_rss_bytes)
                .ok_or_else(|| overflow("peak_rss_bytes"))?;
            generator.threads = generator
                .threads
                .checked_add(r.generator.threads)
                .ok_or_else(|| overflow("threads"))?;
            generator.timestamps = Timestamps::merged(generator.timestamps.as_ref(), r.generator.timestamps.as_ref());
            generator.kernel = KernelSockets::merged(generator.kernel.as_ref(), r.generator.kernel.as_ref());
            parts.extend(r.parts.iter().cloned());
            notes.extend(r.notes.iter().cloned());
        }
        // Known for the whole only when known for every part.
        if let Some(all) = results
            .iter()
            .map(|r| r.generator.peak_pss_bytes)
            .collect::<Option<Vec<u64>>>()
        {
            let sum = all.iter().try_fold(0u64, |a, &b| a.checked_add(b));
            generator.peak_pss_bytes = Some(sum.ok_or_else(|| overflow("peak_pss_bytes"))?);
        }
        notes.push(format!(
            "merged from {} results ({} runs); generator figures are sums over them",
            results.len(),
            parts.len()
        ));
        let earliest = results.iter().min_by_key(|r| r.started_at_unix_ms).unwrap_or(first);
        let merged = RunResult {
            schema: SCHEMA.to_string(),
            throng_version: first.throng_version.clone(),
            plan: first.plan.clone(),
            started_at: earliest.started_at.clone(),
            started_at_unix_ms: start,
            duration_s: span_s,
            coordinated_omission_free: results.iter().all(|r| r.coordinated_omission_free),
            interrupted: results.iter().any(|r| r.interrupted),
            environment: first.environment.clone(),
            generator,
            measurements: merged,
            parts,
            notes,
            trigger: results.iter().find_map(|r| r.trigger.clone()),
            thresholds: Vec::new(),
            segment: None,
        }
        .with_segment_notes(&segment_problems(results))
        .judged();
        // What a merge writes must read back.
        limits::check_run(&merged, "")?;
        Ok(merged)
    }

    fn with_segment_notes(mut self, problems: &[String]) -> RunResult {
        self.notes.extend(problems.iter().map(|p| format!("{SEGMENT_NOTE}{p}")));
        self
    }

    /// Marks a merge of processes that ran one segment together as that
    /// segment (their shares are not duplicates of each other).
    pub fn as_segment(mut self, segment: Option<throng_plan::Segment>) -> RunResult {
        self.notes.retain(|n| !n.starts_with(SEGMENT_NOTE));
        self.segment = segment;
        self
    }

    /// The problems [`segment_problems`] found when this result was merged.
    pub fn segment_notes(&self) -> impl Iterator<Item = &str> {
        self.notes.iter().filter_map(|n| n.strip_prefix(SEGMENT_NOTE))
    }

    /// Adds runs of one plan made one after another (`--repeat`): counters
    /// and histograms add as in [`RunResult::merge`], but the duration is the
    /// sum of the runs' durations (the pauses between them are not run time),
    /// and peak memory and threads are the largest run's, not their sum.
    pub fn merge_sequential(runs: &[RunResult]) -> Result<RunResult, ResultError> {
        if let [only] = runs {
            return Ok(only.clone());
        }
        let mut merged = RunResult::merge(runs)?;
        merged.duration_s = runs.iter().map(|r| r.duration_s).sum();
        merged.generator.peak_rss_bytes = runs.iter().map(|r| r.generator.peak_rss_bytes).max().unwrap_or(0);
        merged.generator.peak_pss_bytes = runs.iter().map(|r| r.generator.peak_pss_bytes).max().flatten();
        merged.generator.threads = runs.iter().map(|r| r.generator.threads).max().unwrap_or(0);
        merged
            .notes
            .retain(|n| !n.starts_with("merged from ") && !n.starts_with(SEGMENT_NOTE));
        // Repeats of one segment are that segment, not duplicates.
        merged.segment = runs.first().and_then(|r| r.segment.clone());
        merged.notes.push(format!(
            "{} runs in sequence, added up: counts and histograms add; the duration is the sum of the runs' \
             (pauses between runs excluded); CPU time is their sum, peak memory the largest run's",
            runs.len()
        ));
        limits::check_run(&merged, "")?;
        Ok(merged)
    }
}

/// How notes about a merge's segments begin.
const SEGMENT_NOTE: &str = "INCOMPLETE: ";

/// What is wrong with how `results` cover their execution-segment sequence:
/// missing segments, segments given twice, different sequences, or results
/// with and without segments mixed. Empty when none has a segment, or when
/// they cover their sequence exactly once.
pub fn segment_problems(results: &[RunResult]) -> Vec<String> {
    let with: Vec<&throng_plan::Segment> = results.iter().filter_map(|r| r.segment.as_ref()).collect();
    let Some(first) = with.first() else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    let without = results.len() - with.len();
    if without > 0 {
        problems.push(format!(
            "{without} of {} results ran the whole plan while the others ran segments of it; \
             the total counts the whole plan more than once",
            results.len()
        ));
    }
    if let Some(other) = with.iter().find(|s| s.sequence() != first.sequence()) {
        problems.push(format!(
            "segments come from different sequences ({} and {}); merge the results of one sequence",
            sequence_text(first),
            sequence_text(other)
        ));
        return problems;
    }
    let mut seen = vec![0usize; first.count()];
    for s in &with {
        seen[s.index()] += 1;
    }
    let all = first.siblings();
    let missing: Vec<String> = all.iter().filter(|s| seen[s.index()] == 0).map(|s| s.range()).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "missing segment{} {} of {}: the total is partial ({} of {} segments)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            sequence_text(first),
            first.count() - missing.len(),
            first.count()
        ));
    }
    for s in all.iter().filter(|s| seen[s.index()] > 1) {
        problems.push(format!(
            "segment {} given {} times: its share is counted more than once",
            s.range(),
            seen[s.index()]
        ));
    }
    problems
}

fn sequence_text(s: &throng_plan::Segment) -> String {
    s.sequence()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Several runs of the same plan, one after another (`--repeat N`): each
/// run's full result, in the order they ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultSet {
    /// Always [`SET_SCHEMA`].
    pub schema: String,
    /// The runs.
    pub runs: Vec<RunResult>,
}

impl ResultSet {
    /// A set of `runs`.
    pub fn new(runs: Vec<RunResult>) -> ResultSet {
        ResultSet {
            schema: SET_SCHEMA.to_string(),
            runs,
        }
    }

    /// Writes pretty JSON.
    pub fn to_writer(&self, mut w: impl Write) -> Result<(), ResultError> {
        serde_json::to_writer_pretty(&mut w, self)?;
        w.write_all(b"\n")?;
        Ok(())
    }

    /// The runs added up ([`RunResult::merge_sequential`]).
    pub fn merged(&self) -> Result<RunResult, ResultError> {
        RunResult::merge_sequential(&self.runs)
    }
}

/// What a result file holds: one run, or a set of runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Document {
    /// A result document (`throng.result/v1`).
    Single(Box<RunResult>),
    /// A result set (`throng.result-set/v1`).
    Set(ResultSet),
}

impl Document {
    /// Reads either kind, checking the schema of the document and of every
    /// run in a set, and every number against [`limits`]; a set must hold
    /// at least one run.
    pub fn from_reader(r: impl Read) -> Result<Document, ResultError> {
        let value: serde_json::Value = serde_json::from_reader(r)?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {
                limits::check_histograms(&value)?;
                let run: RunResult = serde_json::from_value(value)?;
                limits::check_run(&run, "")?;
                Ok(Document::Single(Box::new(run)))
            }
            Some(SET_SCHEMA) => {
                limits::check_histograms(&value)?;
                let set: ResultSet = serde_json::from_value(value)?;
                for (i, run) in set.runs.iter().enumerate() {
                    limits::check_run(run, &format!("runs[{i}]."))?;
                }
                if set.runs.is_empty() {
                    return Err(ResultError::Incompatible("the result set holds no runs".to_string()));
                }
                if let Some(bad) = set.runs.iter().find(|r| r.schema != SCHEMA) {
                    return Err(ResultError::Schema {
                        found: bad.schema.clone(),
                    });
                }
                Ok(Document::Set(set))
            }
            Some(other) => Err(ResultError::Schema {
                found: other.to_string(),
            }),
            None => Err(ResultError::NotAResult),
        }
    }

    /// Its runs: one for a single result.
    pub fn into_runs(self) -> Vec<RunResult> {
        match self {
            Document::Single(r) => vec![*r],
            Document::Set(s) => s.runs,
        }
    }
}

/// Reads a result document or a result set: its runs ([`Document`]).
pub fn runs_from_reader(r: impl Read) -> Result<Vec<RunResult>, ResultError> {
    Document::from_reader(r).map(Document::into_runs)
}

/// Reads the file at `path`: a result document or a result set
/// ([`runs_from_reader`]).
pub fn load_runs(path: &Path) -> Result<Vec<RunResult>, ResultError> {
    load(path).map(Document::into_runs)
}

/// Reads the file at `path` ([`Document::from_reader`]).
pub fn load(path: &Path) -> Result<Document, ResultError> {
    let file = std::fs::File::open(path)?;
    Document::from_reader(std::io::BufReader::new(file))
}

/// `count / seconds`, 0 when no time passed.
pub fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 { count as f64 / seconds } else { 0.0 }
}

/// Formats a Unix time in ms as RFC 3339 UTC with milliseconds.
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_without_a_clock_still_load_and_clocks_merge() {
        let old = r#"{"cpu_user_s":1.0,"cpu_system_s":0.5,"peak_rss_bytes":10,"threads":1}"#;
        let g: Generator = serde_json::from_str(old).unwrap();
        assert_eq!(g.timestamps, None);
        assert!(!serde_json::to_string(&g).unwrap().contains("timestamps"));
        let t = |receive: &str, kernel, user| Timestamps {
            receive: receive.to_string(),
            kernel,
            user,
        };
        let k = t("kernel", 10, 1);
        assert_eq!(Timestamps::merged(Some(&k), None), Some(k.clone()));
        assert_eq!(Timestamps::merged(Some(&k), Some(&k)), Some(t("kernel", 20, 2)));
        assert_eq!(
            Timestamps::merged(Some(&k), Some(&t("user", 0, 5))),
            Some(t("mixed", 10, 6))
        );
    }

    #[test]
    fn reader_tells_sets_and_strangers_apart() {
        let empty = format!(r#"{{"schema":"{SET_SCHEMA}","runs":[]}}"#);
        assert!(matches!(
            runs_from_reader(empty.as_bytes()),
            Err(ResultError::Incompatible(_))
        ));
        assert!(matches!(
            runs_from_reader(&br#"{"schema":"k6/summary"}"#[..]),
            Err(ResultError::Schema { found }) if found == "k6/summary"
        ));
        assert!(matches!(runs_from_reader(&b"[1, 2]"[..]), Err(ResultError::NotAResult)));
        assert!(matches!(runs_from_reader(&b"not json"[..]), Err(ResultError::Parse(_))));
    }

    fn result_of(plan: Plan) -> RunResult {
        let mut m = Measurements::default();
        m.requests.attempted = 3;
        m.requests.ok = 3;
        m.connections.attempted = 7;
        m.connections.ok = 5;
        m.connections.errors.insert("refused".into(), 2);
        RunResult {
            schema: SCHEMA.to_string(),
            throng_version: "0.0.0".to_string(),
            plan,
            started_at: rfc3339(0),
            started_at_unix_ms: 0,
            duration_s: 1.0,
            coordinated_omission_free: false,
            interrupted: false,
            environment: Environment::default(),
            generator: Generator::default(),
            measurements: m,
            parts: Vec::new(),
            notes: Vec::new(),
            trigger: None,
            thresholds: Vec::new(),
            segment: None,
        }
    }

    #[test]
    fn an_open_loops_thresholds_imply_a_bound_on_dropped() {
        assert!(throng_scenario::Threshold::parse_line(IMPLIED_DROPPED).is_ok());
        let plan = |rate: Option<f64>, thresholds: &[&str]| {
            Plan::Http(
                HttpPlan::from_args(throng_plan::HttpArgs {
                    url: "http://127.0.0.1:8080/".to_string(),
                    rate,
                    thresholds: thresholds.iter().map(|t| t.to_string()).collect(),
                    cores: 1,
                    ..throng_plan::HttpArgs::default()
                })
                .expect("a valid plan"),
            )
        };
        // 3 sent, 1 dropped: a quarter of the schedule.
        let judged = |plan: Plan| {
            let mut r = result_of(plan);
            r.measurements.dropped = 1;
            r.judged().thresholds
        };
        let v = judged(plan(Some(100.0), &["errors: rate < 1%"]));
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(
            (v[1].threshold.as_str(), v[1].passed, v[1].observed),
            (IMPLIED_DROPPED, false, Some(0.25))
        );
        assert!(v[1].detail.contains("implied"), "{}", v[1].detail);
        // The user's own bound replaces it; a closed loop and a run without
        // thresholds imply nothing.
        let v = judged(plan(Some(100.0), &["dropped: rate < 50%"]));
        assert_eq!((v.len(), v[0].passed), (1, true), "{v:?}");
        assert_eq!(judged(plan(None, &["errors: rate < 1%"])).len(), 1);
        assert!(judged(plan(Some(100.0), &[])).is_empty());
    }

    #[test]
    fn a_storm_counts_connections_and_the_rest_requests() {
        let http = HttpPlan::from_args(throng_plan::HttpArgs {
            url: "http://127.0.0.1:8080/".to_string(),
            ..throng_plan::HttpArgs::default()
        })
        .expect("a valid plan");
        let storm = StormPlan::from_args(throng_plan::StormArgs {
            target: "tcp://127.0.0.1:4222".to_string(),
            connections: Some(7),
            ..throng_plan::StormArgs::default()
        })
        .expect("a valid plan");
        let file = "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n    flow:\n      - request: { path: / }\n";
        let run = ScenarioPlan::parse(file, "t.yaml", &|f| Err(f.to_string())).expect("a valid plan");
        let point = throng_metrics::SeriesPoint {
            ok: 11,
            connections_opened: 13,
            ..Default::default()
        };
        for (plan, unit, ok, word) in [
            (Plan::Http(http), Unit::Requests, 3, "requests"),
            (Plan::Storm(storm), Unit::Connections, 5, "connections"),
            (Plan::Run(Box::new(run)), Unit::Requests, 3, "requests"),
        ] {
            let r = result_of(plan);
            assert_eq!(r.unit(), unit);
            assert_eq!(r.unit_outcomes().ok, ok);
            assert_eq!(unit.plural(), word);
            assert_eq!(format!("{}s", unit.singular()), word);
            assert_eq!(unit.per_second(&point), if unit == Unit::Connections { 13 } else { 11 });
        }
    }

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_795_000_000_000), "2026-11-18T11:06:40.000Z");
    }
}
