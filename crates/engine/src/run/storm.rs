//! `throng storm`: connections opened on a schedule, each with at most one
//! request or a handshake (NATS, line protocols, WebSocket), held, closed.

use std::sync::Arc;

use throng_plan::{StatusSet, StormPlan};
use throng_result::{Plan, RunResult};
use throng_tls::rustls::ClientConfig;

use super::{check_fds, plan_tls};
use crate::coordinate::{Clock, Launch, coordinate};
use crate::error::EngineError;
use crate::load::{StormLoad, WorkerLoad, WorkerSpec};
use crate::proto::Wire;
use crate::rows::RequestLog;
use crate::{Control, Progress, io_model, reach, stamps};

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
    // QUIC connections share their worker's one UDP socket.
    check_fds(
        if Wire::socket_per_connection(plan) {
            loads.peak
        } else {
            0
        },
        workers,
    )?;
    let io = io_model::choose_storm(plan, rows.is_some())?;
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
    let wire = Wire::for_storm(plan, &route, tls.as_ref(), upgrade_tls, control)?;
    let request = bytes::Bytes::from(plan.request_bytes().unwrap_or_default());
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
            io: io.model,
            expect: StatusSet::default(),
            tls: tls.clone(),
            wire: wire.clone(),
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
            stream: None,
            trace: None,
        })
        .collect();
    let launch = Launch {
        specs,
        clock,
        total_requests: Some(mine),
        duration: None,
        planned_end: None,
        grace: plan.timeout,
        stop_at_planned_end: false,
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
    for g in std::iter::once(&mut result.generator).chain(result.parts.iter_mut().map(|p| &mut p.generator)) {
        g.io = Some(io.io());
        g.io_fallback.clone_from(&io.fallback);
        g.io_not_carried.clone_from(&io.not_carried);
    }
    Ok(result)
}
