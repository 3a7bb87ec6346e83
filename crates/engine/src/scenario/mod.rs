//! Scenario runs: virtual users as tasks, not threads or interpreters.
//!
//! ```text
//!  per worker, per scenario: one controller task
//!    closed models (constant-vus, ramping-vus, per-vu-iterations, shared-iterations)
//!      every TICK: the worker's share of the VUs the plan wants now
//!        → start VU tasks up to it; VUs above it finish their iteration,
//!          and are cut off after the graceful period
//!    open models (constant-arrival-rate, ramping-arrival-rate)
//!      each scheduled start → the most recently idle VU, else a new VU
//!        (up to max_vus), else a dropped iteration
//!  VU task: iteration after iteration, each step in turn:
//!    render the request ─► its own keep-alive connection ─► exchange ─►
//!    Recorder (phases, outcomes) + ScenarioRecorder (tags, checks) ─► captures
//! ```
//!
//! A VU owns its variables, its connection and its response reader; the
//! compiled flow, the data rows and the recorders are shared by the worker's
//! VUs. A request cut off (graceful period over, run aborted) is counted
//! `interrupted` by a guard's destructor, so nothing leaves the books.
//!
//! A scenario's target says its protocol (`http: 1.1 | 2 | 3`): an HTTP/1.1
//! VU holds a keep-alive connection (crate::conn); an HTTP/2 or HTTP/3 VU
//! holds its own multiplexed connection (the scenario VU connection role,
//! `crate::proto::vu::Conns`) and sends its steps as streams on it, one at
//! a time (a VU's steps are sequential). Either reconnects when its
//! connection is lost. A request's own `http:` replaces its target's for
//! it: a VU then holds one connection per protocol it speaks, each opened
//! at first use. The runner asks for a connection by the protocol a
//! request speaks and never matches on it.
//!
//! Its parts, each importing only the ones below it:
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | `start`: the worker's scenarios set up, the flow compiled into steps |
//! | `control.rs` | the controllers (closed and open models) |
//! | `vu.rs` | a VU task and its iterations |
//! | `request.rs`, `stream.rs` | a `request:` step in HTTP/1.1; as a stream in HTTP/2 or HTTP/3 |
//! | `grpc.rs`, `ws.rs` | a `grpc:` step; a `websocket:` step |
//! | `js.rs` | a `js:` step: its code compiled once per worker, run in the VU's own runtime |
//! | `script.rs` | a k6 script's iteration: its VU resumed, each request it makes sent as a `request:` step |
//! | `render.rs` | a step's request rendered from its templates |
//! | `flight.rs` | a request under way and how it ends (answered, unanswered, never sent) |
//! | `ops.rs` | the compiled steps, a scenario on a worker, a VU's state |

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use throng_metrics::ScenarioRecorder;
use throng_plan::Authority;
use throng_scenario::{CaptureFrom, CheckKind, Cookies, Step};
use tokio::sync::Notify;

use crate::ctx::Ctx;
use crate::load::ScenarioLoad;
use crate::proto::http1::Keep;
use control::{closed_controller, open_controller};
use ops::{AddOp, GrpcOp, MqttOp, Op, ReqOp, Scen, UntilOp, WsOp};

mod control;
mod flight;
mod grpc;
mod h1;
mod held;
mod js;
mod logic;
mod mqtt;
mod ops;
mod render;
mod request;
mod script;
mod sse;
mod stream;
mod vu;
mod ws;

/// Sets up the worker's scenarios and starts their controllers.
pub(crate) fn start(ctx: &Rc<Ctx>, load: ScenarioLoad) {
    let mut rec = ScenarioRecorder::new(ctx.spec.origin);
    let all = rec.tag("");
    // Every declared metric is reported, values added or not.
    for m in &load.plan.metrics {
        rec.custom_index(&m.name, m.kind);
    }
    let mut scens = Vec::new();
    for (index, def) in load.plan.scenarios.iter().enumerate() {
        let target = def.target(&load.plan.target);
        let authority = Authority::new(&target.host, target.port, if target.https { 443 } else { 80 });
        let Some(dest) = load.dests.get(index) else {
            // Invariant: run_scenario makes one per scenario.
            continue;
        };
        let scenario_tag = rec.tag(&format!("scenario:{}", def.name));
        let mut ops = Vec::new();
        let keep = Keeps {
            jar: def.cookies != Cookies::Off,
            res: throng_scenario::js_steps(&def.flow)
                .iter()
                .any(|j| js::reads_res(&j.code)),
            file: &load.plan.file,
        };
        if load.script.is_none() {
            compile(&def.flow, &[all, scenario_tag], &keep, &mut rec, &mut ops);
        }
        let js = js::flow(&def.flow, &ops, &load.env);
        let stage_tags = throng_scenario::stage_names(def)
            .iter()
            .map(|n| rec.tag(&format!("stage:{n}")))
            .collect();
        let start = ctx.spec.origin + def.start_time;
        scens.push(Rc::new(Scen {
            index,
            def: def.clone(),
            plan: Arc::clone(&load.plan),
            env: Arc::clone(&load.env),
            setup: Arc::clone(&load.setup),
            keep: load.keep.clone(),
            shared: Arc::clone(&load.shared),
            worker: load.worker,
            workers: load.workers,
            segment: load.plan.segment(),
            seed: load.seed,
            ops,
            js,
            stage_tags,
            start,
            end: start + def.executor.length(),
            slots: RefCell::new(Vec::new()),
            target: Cell::new(0),
            active: Cell::new(0),
            kill: Notify::new(),
            idle: RefCell::new(Vec::new()),
            schedule_done: Cell::new(false),
            base: target.clone(),
            dest: Arc::clone(dest),
            authority,
            script: load.script.clone(),
            names: RefCell::new(std::collections::HashMap::new()),
            base_tags: Cell::new(None),
        }));
    }
    *ctx.scenario.borrow_mut() = Some(rec);
    for sc in scens {
        if sc.def.executor.is_open() {
            tokio::task::spawn_local(open_controller(ctx.task(), sc));
        } else {
            tokio::task::spawn_local(closed_controller(ctx.task(), sc));
        }
    }
}

/// What the requests of a flow keep of their responses besides what their
/// own captures and checks read.
struct Keeps<'a> {
    /// Headers, for the VUs' cookie jars.
    jar: bool,
    /// Headers and body, for the `js:` steps that read `res`.
    res: bool,
    /// The scenario file, which a `js:` step's errors name.
    file: &'a str,
}

fn compile(flow: &[Step], tags: &[usize], keeps: &Keeps, rec: &mut ScenarioRecorder, out: &mut Vec<Op>) {
    for step in flow {
        match step {
            Step::Request(r) => {
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("step:{}", r.name)));
                let keep = Keep {
                    server: false,
                    // Location and Set-Cookie are headers too.
                    headers: keeps.jar
                        || keeps.res
                        || r.redirects > 0
                        || r.captures.iter().any(|c| matches!(c.from, CaptureFrom::Header(_)))
                        || r.checks.iter().any(|c| matches!(c.kind, CheckKind::Header(..))),
                    // An sse: step's body is its stream: read, never kept.
                    body: if r.sse.is_none()
                        && (keeps.res
                            || r.captures.iter().any(|c| !matches!(c.from, CaptureFrom::Header(_)))
                            || r.checks.iter().any(|c| c.kind.reads_body()))
                    {
                        // At most 64 MiB (checked when the file was read).
                        usize::try_from(r.max_body).unwrap_or(usize::MAX)
                    } else {
                        0
                    },
                };
                out.push(Op::Request(Box::new(ReqOp {
                    checks: r.checks.iter().map(|c| rec.check_index(&c.name)).collect(),
                    tags: t,
                    keep,
                    head: r.method.eq_ignore_ascii_case("HEAD"),
                    req: (**r).clone(),
                })));
            }
            Step::Grpc(g) => out.push(Op::Grpc(Box::new(GrpcOp::new(g, tags, rec)))),
            Step::WebSocket(w) => {
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("step:{}", w.name)));
                out.push(Op::WebSocket(Box::new(WsOp {
                    ws: (**w).clone(),
                    tags: t,
                })));
            }
            Step::Mqtt(m) => {
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("step:{}", m.name)));
                out.push(Op::Mqtt(Box::new(MqttOp {
                    step: (**m).clone(),
                    tags: t,
                })));
            }
            Step::Think(t) => out.push(Op::Think(*t)),
            Step::Add(a) => out.push(Op::Add(Box::new(AddOp {
                metric: a.keys().iter().map(|k| rec.custom_index(k, a.kind)).collect(),
                value: a.value.clone(),
            }))),
            Step::Js(j) => out.push(Op::Js(Box::new(ops::JsOp::new(j, js::count(out), keeps.file)))),
            Step::Group { name, flow } => {
                let g = rec.group_index(name);
                let mut t = tags.to_vec();
                t.push(rec.tag(&format!("group:{name}")));
                out.push(Op::GroupStart);
                compile(flow, &t, keeps, rec, out);
                out.push(Op::GroupEnd(g));
            }
            Step::If { cond, then, otherwise } => {
                let branch = out.len();
                out.push(Op::Jump(0));
                compile(then, tags, keeps, rec, out);
                let skip = (!otherwise.is_empty()).then(|| {
                    out.push(Op::Jump(0));
                    out.len() - 1
                });
                let to = out.len();
                out[branch] = Op::Branch {
                    cond: Box::new(cond.clone()),
                    to,
                };
                compile(otherwise, tags, keeps, rec, out);
                if let Some(skip) = skip {
                    out[skip] = Op::Jump(out.len());
                }
            }
            Step::Repeat { times, flow } => {
                out.push(Op::LoopStart);
                let start = out.len();
                compile(flow, tags, keeps, rec, out);
                out.push(Op::Repeat { start, times: *times });
            }
            Step::Until { cond, max, flow } => {
                out.push(Op::LoopStart);
                let start = out.len();
                compile(flow, tags, keeps, rec, out);
                out.push(Op::Until(Box::new(UntilOp {
                    start,
                    cond: cond.clone(),
                    max: *max,
                    check: rec.check_index(&format!("until: {}", cond.text)),
                })));
            }
            Step::Choose { branches } => {
                let choose = out.len();
                out.push(Op::Jump(0));
                let (mut cumulative, mut to, mut ends) = (Vec::new(), Vec::new(), Vec::new());
                let mut total = 0u64;
                for b in branches {
                    total += u64::from(b.weight);
                    cumulative.push(total);
                    to.push(out.len());
                    compile(&b.flow, tags, keeps, rec, out);
                    ends.push(out.len());
                    out.push(Op::Jump(0));
                }
                let end = out.len();
                for e in ends {
                    out[e] = Op::Jump(end);
                }
                out[choose] = Op::Choose { cumulative, to };
            }
        }
    }
}
