//! `throng run`: a scenario file's scenarios, each a flow of steps run by
//! virtual users under its executor, thresholds judged at the end (and
//! while it runs, for those with abort_on_fail).
//!
//! ```text
//!  setup: (once, one VU) ─► its captures ─► the load (every VU reads
//!  them as {{setup.NAME}}) ─► teardown: (once, one VU; also after Ctrl-C)
//! ```
//!
//! Setup and teardown are runs of their own (one worker, one VU, one
//! iteration): their requests count in the result under the tags
//! `scenario:setup` and `scenario:teardown` only, never in the load's
//! totals.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use throng_metrics::{Measurements, ScenarioStats, TagStats};
use throng_plan::HttpVersion;
use throng_result::{Plan, RunResult};
use throng_scenario::{BaseUrl, Scenario, ScenarioPlan};
use throng_tls::rustls::ClientConfig;

use super::{connections_per_process, plan_tls};
use crate::coordinate::{Clock, Judge, Launch, TICK, coordinate};
use crate::error::{EngineError, TlsSetup};
use crate::load::{self, WorkerLoad, WorkerSpec};
use crate::preflight::{self, Asked, Speak};
use crate::proto::{http3, vu};
use crate::rows::RequestLog;
use crate::worker::state::RunState;
use crate::{Control, Progress, reach, stamps, sys, targets};

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
    /// A k6 script: the scenario's VUs run it instead of the file's flow.
    pub script: Option<Arc<throng_script::Script>>,
    /// What a `setup:` flow run elsewhere captured (`throng coordinate` runs
    /// it once for every agent): this run runs neither `setup:` nor
    /// `teardown:`, and its VUs read these.
    pub setup_given: Option<Arc<HashMap<String, String>>>,
}

/// A `setup:` or `teardown:` flow run on its own: its tag's row, what its
/// `add:` steps recorded, its VU's variables (the setup's captures), and
/// the note the result gets.
pub struct OnceRun {
    pub tag: &'static str,
    pub row: TagStats,
    pub custom: std::collections::BTreeMap<String, throng_metrics::CustomStats>,
    pub vars: Arc<HashMap<String, String>>,
    pub note: String,
}

impl std::fmt::Debug for OnceRun {
    // Never the variables: the setup's captures may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnceRun")
            .field("tag", &self.tag)
            .field("note", &self.note)
            .finish_non_exhaustive()
    }
}

/// Runs a scenario file's scenarios to completion and returns the result,
/// its thresholds judged: its `setup:` flow first (a failure stops the run
/// before any load), its `teardown:` flow last, whatever the load did.
pub fn run_scenario(
    plan: &ScenarioPlan,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
) -> Result<RunResult, EngineError> {
    let mut once_rows = Vec::new();
    let mut notes = Vec::new();
    let setup = match &options.setup_given {
        Some(given) => Arc::clone(given),
        None => match run_setup_flow(plan, tls.clone(), options, control)? {
            Some(once) => {
                let vars = Arc::clone(&once.vars);
                notes.push(once.note.clone());
                once_rows.push(once);
                vars
            }
            None => Arc::default(),
        },
    };
    let load = run_load(plan, tls.clone(), options, control, on_tick, Arc::clone(&setup), None);
    if options.setup_given.is_none() {
        match run_teardown_flow(plan, tls, options, control, setup) {
            Ok(Some(once)) => {
                notes.push(once.note.clone());
                once_rows.push(once);
            }
            Ok(None) => {}
            Err(note) => notes.push(note),
        }
    }
    splice_rows(plan, options, true, &mut notes);
    let (mut result, left_out) = add_once_rows(load?, once_rows);
    result.notes.extend(notes);
    result.notes.extend(left_out);
    Ok(result)
}

/// Runs the plan's `setup:` flow, if it has one (a failure, or Ctrl-C, is
/// the error: no load may follow).
pub fn run_setup_flow(
    plan: &ScenarioPlan,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
) -> Result<Option<OnceRun>, EngineError> {
    let Some(s) = &plan.setup else {
        return Ok(None);
    };
    let once = run_once(plan, s, tls, options, control, Arc::default());
    if !once.as_ref().is_ok_and(|o| o.failure.is_none()) || control.was_interrupted() {
        // No load follows: the file holds the setup's rows alone.
        splice_rows(plan, options, false, &mut Vec::new());
    }
    let once = once?;
    if control.was_interrupted() {
        return Err(EngineError::Interrupted(
            "during the setup: flow, before the load started",
        ));
    }
    if let Some(why) = once.failure {
        return Err(EngineError::SetupFailed {
            file: plan.file.clone(),
            why,
        });
    }
    let note = format!(
        "setup: ran once before the load ({}, not in the load's figures){}",
        throng_plan::count(once.row.requests, "request"),
        match once.captured.is_empty() {
            true => String::new(),
            false => format!("; captured {}", once.captured.join(", ")),
        }
    );
    Ok(Some(OnceRun {
        tag: "scenario:setup",
        row: once.row,
        custom: once.custom,
        vars: Arc::new(once.vars),
        note,
    }))
}

/// Runs the plan's `teardown:` flow, if it has one, with the setup's
/// captures; a teardown that could not run is the note, as the error.
pub fn run_teardown_flow(
    plan: &ScenarioPlan,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
    setup: Arc<HashMap<String, String>>,
) -> Result<Option<OnceRun>, String> {
    let Some(t) = &plan.teardown else {
        return Ok(None);
    };
    let once =
        run_teardown(plan, t, tls, options, control, setup).map_err(|e| format!("teardown could not run: {e}"))?;
    let note = match &once.failure {
        None => format!(
            "teardown: ran once after the load ({})",
            throng_plan::count(once.row.requests, "request")
        ),
        Some(why) => format!("teardown failed (the run's verdict stands): {why}"),
    };
    Ok(Some(OnceRun {
        tag: "scenario:teardown",
        row: once.row,
        custom: once.custom,
        vars: Arc::default(),
        note,
    }))
}

/// Adds the rows of `setup:` and `teardown:` flows to a load's result and
/// judges its thresholds again (one may name them); the notes of what was
/// left out (their own notes are the caller's to place).
pub fn add_once_rows(mut result: RunResult, rows: Vec<OnceRun>) -> (RunResult, Vec<String>) {
    if rows.is_empty() {
        return (result, Vec::new());
    }
    let mut notes = Vec::new();
    let stats = result.measurements.scenario.get_or_insert_with(ScenarioStats::default);
    for once in rows {
        stats.tags.insert(once.tag.to_string(), once.row);
        // What their add: steps recorded counts with the load's.
        for (name, c) in once.custom {
            match stats.custom.get_mut(&name) {
                Some(mine) => {
                    if let Err(e) = mine.merge(&c) {
                        notes.push(format!("{}: its values of {name} were left out: {e}", once.tag));
                    }
                }
                None => {
                    stats.custom.insert(name, c);
                }
            }
        }
    }
    // Judged again: a threshold may name scenario:setup or teardown.
    (result.judged(), notes)
}

/// `--csv-requests`: the rows of the `setup:` flow (and, with `teardown`,
/// the `teardown:` flow's) join the load's in the final file.
fn splice_rows(plan: &ScenarioPlan, options: &ScenarioOptions, teardown: bool, notes: &mut Vec<String>) {
    let Some(log) = &options.requests_csv else {
        return;
    };
    let side = |s: Option<&Scenario>| s.map(|s| crate::rows::once_path(&log.path, &s.name));
    let before = side(plan.setup.as_ref());
    let after = side(plan.teardown.as_ref().filter(|_| teardown));
    if let Err(e) = crate::rows::splice_once(log, before.as_deref(), after.as_deref()) {
        notes.push(format!("--csv-requests: the setup:/teardown: rows were left out: {e}"));
    }
}

/// What a `setup:` or `teardown:` run left: its figures (the row of its
/// scenario tag), its VU's variables, and why it failed, if it did.
struct Once {
    row: TagStats,
    /// What its `add:` steps recorded.
    custom: std::collections::BTreeMap<String, throng_metrics::CustomStats>,
    vars: HashMap<String, String>,
    /// The names it captured (never their values: they may be secrets).
    captured: Vec<String>,
    failure: Option<String>,
}

/// Runs the flow `s` (`setup` or `teardown`, one VU, one iteration) on
/// one worker, with the rest of the plan (target, defaults, data, TLS).
fn run_once(
    plan: &ScenarioPlan,
    s: &Scenario,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
    setup: Arc<HashMap<String, String>>,
) -> Result<Once, EngineError> {
    let once_plan = ScenarioPlan {
        scenarios: vec![s.clone()],
        setup: None,
        teardown: None,
        thresholds: Vec::new(),
        segment: None,
        trace: None,
        ..plan.clone()
    };
    let opts = ScenarioOptions {
        threads: 1,
        // Its rows go to a side file, spliced into the final one at the end.
        requests_csv: options.requests_csv.as_ref().map(|log| RequestLog {
            path: crate::rows::once_path(&log.path, &s.name),
            max_rows: log.max_rows,
        }),
        start_at_unix_ms: None,
        ..options.clone()
    };
    let keep = Arc::new(Mutex::new(HashMap::new()));
    let result = run_load(
        &once_plan,
        tls,
        &opts,
        control,
        &mut |_| {},
        setup,
        Some(Arc::clone(&keep)),
    )?;
    let vars = std::mem::take(&mut *keep.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let stats = result.measurements.scenario.unwrap_or_default();
    let row = stats
        .tags
        .get(&format!("scenario:{}", s.name))
        .cloned()
        .unwrap_or_default();
    let wanted = throng_scenario::capture_names(&s.flow);
    let mut why = Vec::new();
    if stats.iterations == 0 {
        why.push(format!(
            "its flow did not run to its end (limit {}, or the run was stopped)",
            throng_plan::format_duration(s.executor.length())
        ));
    }
    // A k6 script's setup() fails as k6's does: by throwing (below), not
    // by a request's status or a check.
    let script = options.script.is_some();
    for (tag, t) in stats.tags.iter().filter(|_| !script) {
        if let Some(step) = tag.strip_prefix("step:")
            && (t.failed > 0 || t.interrupted > 0)
        {
            why.push(format!("step '{step}' failed"));
        }
    }
    let classes: Vec<String> = result
        .measurements
        .requests
        .errors
        .iter()
        .map(|(class, n)| format!("{class}: {n}"))
        .collect();
    if !classes.is_empty() && !script {
        why.push(format!("errors {}", classes.join(", ")));
    }
    let statuses: Vec<String> = result.measurements.status.keys().map(u16::to_string).collect();
    if row.unexpected_status > 0 && !script {
        why.push(format!("unexpected status (statuses seen: {})", statuses.join(", ")));
    }
    for (check, c) in stats.checks.iter().filter(|_| !script) {
        if c.fails > 0 {
            why.push(format!("check '{check}' failed"));
        }
    }
    // A script's setup() that threw: its message.
    for (class, message) in &stats.failed_messages {
        why.push(format!("{class}: {message}"));
    }
    let missing: Vec<&str> = wanted.iter().copied().filter(|v| !vars.contains_key(*v)).collect();
    if !missing.is_empty() && stats.iterations > 0 {
        why.push(format!("captured nothing for {}", missing.join(", ")));
    }
    Ok(Once {
        custom: stats.custom.clone(),
        row: TagStats {
            series: Vec::new(),
            ..row
        },
        captured: wanted
            .iter()
            .filter(|v| vars.contains_key(**v))
            .map(|v| v.to_string())
            .collect(),
        vars,
        failure: (!why.is_empty()).then(|| why.join("; ")),
    })
}

/// The `teardown:` flow, with a control of its own: the load's may be
/// stopping already (Ctrl-C), and the teardown runs anyway, within its
/// limit; a second Ctrl-C (the load's control aborting) stops it too.
fn run_teardown(
    plan: &ScenarioPlan,
    t: &Scenario,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
    setup: Arc<HashMap<String, String>>,
) -> Result<Once, EngineError> {
    let own = Control::new();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Bounded: the teardown's own limit ends it and sets `done`.
            while !done.load(Ordering::SeqCst) {
                if control.state() == RunState::Aborting {
                    own.abort();
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let once = run_once(plan, t, tls, options, &own, setup);
        done.store(true, Ordering::SeqCst);
        once
    })
}

/// Runs the plan's scenarios (the load, or one `setup:`/`teardown:` flow
/// made a plan of its own) with what setup captured; `keep` takes the VUs'
/// variables (setup).
fn run_load(
    plan: &ScenarioPlan,
    tls: Option<Arc<ClientConfig>>,
    options: &ScenarioOptions,
    control: &Control,
    on_tick: &mut dyn FnMut(&Progress),
    setup: Arc<HashMap<String, String>>,
    keep: Option<Arc<Mutex<HashMap<String, String>>>>,
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
        return Err(EngineError::VuLimit { vus, fit });
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
            wire: crate::proto::Wire::Http1,
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
                setup: Arc::clone(&setup),
                keep: keep.clone(),
                script: options.script.clone(),
            }),
            rows: None,
            targets: None,
            follow: None,
            stream: None,
            trace: plan.trace.map(|t| crate::trace::Tracer::new(t, &[])),
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
        stop_at_planned_end: false,
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

/// Stops the run when a threshold with `abort_on_fail` fails on what was
/// measured so far, once its delay has passed.
fn abort_judge(plan: &ScenarioPlan) -> Option<Judge> {
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
/// `http:`. A target (or request) with `http: 2` or `http: 3` whose server
/// does not speak it is refused here, before the run, as `throng http
/// --http2` refuses it.
fn scenario_dests(
    plan: &ScenarioPlan,
    tls: Option<&Arc<ClientConfig>>,
    reach: &throng_plan::Reach,
    control: &Control,
) -> Result<Arc<[Arc<vu::dest::Dest>]>, EngineError> {
    type Made<'a> = (&'a BaseUrl, Vec<(HttpVersion, &'a str)>, Arc<vu::dest::Dest>);
    let mut made: Vec<Made<'_>> = Vec::new();
    let mut out = Vec::with_capacity(plan.scenarios.len());
    for s in &plan.scenarios {
        let target = s.target(&plan.target);
        let asked = s.request_protocols();
        // Scenarios with the same target and request protocols share one.
        let brokers = throng_scenario::mqtts(&s.flow);
        let found = made
            .iter()
            .find(|(t, a, d)| *t == target && *a == asked && brokers.iter().all(|m| d.mqtt_for(&m.url).is_some()));
        if let Some((_, _, d)) = found {
            out.push(Arc::clone(d));
            continue;
        }
        let d = scenario_dest(plan, s, target, &asked, tls, reach)?;
        preflight::check(checks(plan, s, target, &asked, &d), plan.defaults.timeout, control)?;
        let d = Arc::new(d);
        made.push((target, asked, Arc::clone(&d)));
        out.push(d);
    }
    Ok(out.into())
}

/// How refusals name a scenario's target.
fn which(s: &Scenario) -> String {
    if s.target.is_some() {
        format!("scenario {}'s target", s.name)
    } else {
        "target".to_string()
    }
}

/// One scenario's destination: routes, TLS and QUIC clients for its
/// target's protocol and each its requests ask for.
fn scenario_dest(
    plan: &ScenarioPlan,
    s: &Scenario,
    target: &BaseUrl,
    asked: &[(HttpVersion, &str)],
    tls: Option<&Arc<ClientConfig>>,
    reach: &throng_plan::Reach,
) -> Result<vu::dest::Dest, EngineError> {
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
    let main = conn(target.http)?;
    let mut also = Vec::new();
    for &(http, _) in asked {
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
                return Err(TlsSetup::NoClientConfig { what }.into());
            };
            let client = http3::quic_client(c).map_err(|e| EngineError::Unbuildable {
                what: format!("{}: {} (http: 3)", plan.file, which(s)),
                reason: e.into(),
            })?;
            let name = settings.server_name.clone().unwrap_or_else(|| target.host.clone());
            Some((client, name))
        }
        false => None,
    };
    let mut mqtt: Vec<(String, targets::Dest)> = Vec::new();
    for m in throng_scenario::mqtts(&s.flow) {
        if mqtt.iter().any(|(u, _)| *u == m.url) {
            continue;
        }
        let route = reach::route(&m.host, m.port, reach, false)?;
        let tls_client = match m.tls {
            true => plan_tls(
                plan.tls.as_ref(),
                tls.cloned(),
                &m.host,
                &format!("the broker {}", m.url),
            )?,
            false => None,
        };
        mqtt.push((m.url.clone(), targets::Dest { route, tls: tls_client }));
    }
    Ok(vu::dest::Dest {
        http: target.http,
        conn: main,
        quic,
        also,
        mqtt,
    })
}

/// What to check before the run: the target's protocol when it is HTTP/2
/// or HTTP/3, then HTTP/2 and HTTP/3 when a request asks for it and the
/// target speaks another.
fn checks<'a>(
    plan: &ScenarioPlan,
    s: &Scenario,
    target: &BaseUrl,
    asked: &[(HttpVersion, &str)],
    d: &'a vu::dest::Dest,
) -> Vec<preflight::Dest<'a>> {
    let route = &d.conn.route;
    let mut out = Vec::new();
    let on_target = |http: u8| Asked::ScenarioTarget {
        file: plan.file.to_string(),
        which: which(s),
        url: target.url.clone(),
        http,
    };
    let by_request = |at: &str, http: u8| Asked::ScenarioRequest {
        at: at.to_string(),
        scenario: s.name.to_string(),
        url: target.url.clone(),
        http,
    };
    let request_asks = |http: HttpVersion| {
        asked
            .iter()
            .find(|(h, _)| *h == http && target.http != http)
            .map(|&(_, at)| at)
    };
    let quic = d.quic.as_ref().map(|(client, name)| Speak::Http3 {
        client,
        name: name.as_str(),
    });
    let h2 = |tls| Speak::Http2 { tls };
    if target.http == HttpVersion::Http2 {
        out.push(preflight::Dest {
            route,
            speak: h2(d.conn.tls.as_ref()),
            asked: on_target(2),
        });
    }
    if target.http == HttpVersion::Http3
        && let Some(speak) = quic
    {
        out.push(preflight::Dest {
            route,
            speak,
            asked: on_target(3),
        });
    }
    if let Some(at) = request_asks(HttpVersion::Http2) {
        out.push(preflight::Dest {
            route,
            speak: h2(d.conn_for(HttpVersion::Http2).tls.as_ref()),
            asked: by_request(at, 2),
        });
    }
    if let Some(at) = request_asks(HttpVersion::Http3)
        && let Some(speak) = quic
    {
        out.push(preflight::Dest {
            route,
            speak,
            asked: by_request(at, 3),
        });
    }
    out
}
