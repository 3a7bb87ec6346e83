//! `throng http` and `throng grpc`: a plan of requests in closed or open
//! loops, over HTTP/1.1, HTTP/2 or HTTP/3, to one target or several.

use std::sync::Arc;

use throng_plan::{HttpPlan, HttpWorkerLoad, StatusSet, Stop};
use throng_result::{Plan, RunResult};
use throng_tls::rustls::ClientConfig;

use super::{check_fds, plan_tls};
use crate::coordinate::{Clock, Launch, coordinate};
use crate::error::EngineError;
use crate::load::{WorkerLoad, WorkerSpec};
use crate::preflight::{self, Asked, Speak};
use crate::proto::Wire;
use crate::rows::RequestLog;
use crate::transport::TlsClient;
use crate::{Control, Progress, io_model, mux, reach, redirect, stamps, targets};

/// Origins of an HTTP/2 run checked for HTTP/2 before it (the rest are
/// told by their failures): each check is a connection and a handshake.
const MAX_PREFLIGHTS: usize = 16;

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
    let io = io_model::choose(plan, rows.is_some())?;
    let https = plan.target.scheme == throng_plan::Scheme::Https;
    let route = Arc::new(reach::route(&plan.target.host, plan.target.port, &plan.reach, https)?);
    let tls_config = tls.clone();
    let h3 = Wire::http3_of(plan, tls.as_deref())?;
    let tls = plan_tls(plan.tls.as_ref(), tls, &plan.target.host, "an https plan")?;

    let h2 = plan.http == throng_plan::HttpVersion::Http2;
    if h2 {
        let asked = match plan.grpc {
            Some(_) => Asked::GrpcTarget {
                authority: plan.target.authority().to_string(),
            },
            None => Asked::HttpTarget {
                url: plan.target.url.to_string(),
            },
        };
        let speak = Speak::Http2 { tls: tls.as_ref() };
        preflight::check(
            [preflight::Dest {
                route: &route,
                speak,
                asked,
            }],
            plan.timeout,
            control,
        )?;
    }
    // One copy of the request (and its body) for every worker: a 64 MiB
    // body stays 64 MiB however many threads send it.
    let request = plan.request_bytes();
    let follow = redirect::FollowSpec::of(plan);
    let wire = Wire::for_http(plan, h3)?;
    // Before the clock starts: the first responses should be stamped too.
    let _primer = stamps::Primer::start();
    let clock = plan.start_at_unix_ms.map_or_else(Clock::start, Clock::at);
    let origin = clock.origin;
    let targets = targets(plan, tls_config, https, control)?;
    let common = Common {
        route,
        reach: Arc::new(plan.reach.clone()),
        request,
        tls,
        follow,
        wire,
        targets,
        origin,
        threads,
        io: io.model,
    };
    let specs = loads
        .workers
        .into_iter()
        .enumerate()
        .map(|(worker, load)| worker_spec(plan, &common, worker, load))
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
        // An open loop's event streams end with its -d (a closed loop's
        // workers stop at their own deadline).
        stop_at_planned_end: plan.stream.is_some() && matches!(plan.stop, Stop::Duration(_)),
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
    for g in std::iter::once(&mut result.generator).chain(result.parts.iter_mut().map(|p| &mut p.generator)) {
        g.io = Some(io.io());
        g.io_fallback.clone_from(&io.fallback);
        g.io_not_carried.clone_from(&io.not_carried);
    }
    Ok(result)
}

/// Several requests: rendered once by the plan, shared by the workers;
/// with several targets each one's figures are kept under target:NAME.
/// Targets on several origins: each resolved, with its TLS server name,
/// and (HTTP/2) each further origin checked to speak it too (the first,
/// the target, was checked before).
fn targets(
    plan: &HttpPlan,
    tls: Option<Arc<ClientConfig>>,
    https: bool,
    control: &Control,
) -> Result<Option<Arc<targets::TargetSpec>>, EngineError> {
    let named = plan.origins();
    let origins = named
        .iter()
        .map(|o| {
            Ok(targets::Dest {
                route: reach::route(&o.host, o.port, &plan.reach, https)?,
                tls: plan_tls(plan.tls.as_ref(), tls.clone(), &o.host, "an https plan")?,
            })
        })
        .collect::<Result<Vec<_>, EngineError>>()?;
    // HTTP/2 and HTTP/3 send every one of the several requests as a
    // stream: each converted once here, so none fails at run time.
    if !plan.http.is_http1()
        && let Some(table) = plan.request_table()
    {
        mux::check_table(&table, &plan.target_names(), https).map_err(|e| EngineError::Unbuildable {
            what: plan.http.label().to_string(),
            reason: e.into(),
        })?;
    }
    if plan.http == throng_plan::HttpVersion::Http2 {
        let further = named.iter().zip(&origins).skip(1).take(MAX_PREFLIGHTS);
        let dests = further.map(|(o, d)| preflight::Dest {
            route: &d.route,
            speak: Speak::Http2 { tls: d.tls.as_ref() },
            asked: Asked::HttpOrigin { url: o.url.to_string() },
        });
        preflight::check(dests, plan.timeout, control)?;
    }
    Ok(plan.request_table().map(|table| {
        Arc::new(targets::TargetSpec {
            table,
            order: plan.targets_order,
            names: plan.target_names(),
            origins,
        })
    }))
}

/// What every worker of an HTTP run shares.
struct Common {
    route: Arc<reach::Route>,
    reach: Arc<throng_plan::Reach>,
    request: bytes::Bytes,
    tls: Option<TlsClient>,
    follow: Option<Arc<redirect::FollowSpec>>,
    wire: Wire,
    targets: Option<Arc<targets::TargetSpec>>,
    origin: std::time::Instant,
    threads: u32,
    /// Epoll or io_uring, as chosen for this run.
    io: throng_plan::IoModel,
}

/// One worker's spec: its share of the load, and what all share.
fn worker_spec(plan: &HttpPlan, common: &Common, worker: usize, load: HttpWorkerLoad) -> WorkerSpec {
    let origin = common.origin;
    // A multiplexed protocol's loops run one task per stream slot, on at
    // most the worker's connections.
    let streams = common.wire.task_slots();
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
                // Multiplexed connections open with the first requests.
                warm: if common.wire.warms() { warm } else { 0 },
            },
            cap,
        ),
    };
    WorkerSpec {
        route: Arc::clone(&common.route),
        reach: Arc::clone(&common.reach),
        request: common.request.clone(),
        head_request: plan.method.eq_ignore_ascii_case("HEAD"),
        timeout: plan.timeout,
        keepalive: plan.keepalive,
        io: common.io,
        // gRPC runs count gRPC status codes (0-16) instead.
        expect: plan
            .grpc
            .as_ref()
            .map_or(plan.expect_status, |g| StatusSet::from_codes(&g.expect)),
        tls: common.tls.clone(),
        wire: common.wire.for_worker(conns),
        source: Arc::from(Vec::new()),
        origin,
        load,
        rows: None,
        targets: common
            .targets
            .clone()
            .map(|t| (t, worker as u64, u64::from(common.threads))),
        follow: common.follow.clone(),
        trace: plan.trace.map(|t| crate::trace::Tracer::new(t, &common.request)),
        stream: plan.stream.as_deref().cloned().map(Arc::new),
    }
}
