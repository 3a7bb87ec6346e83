//! What a worker's scenario runner shares between its parts: the flow
//! compiled into steps ([`Op`]), one scenario on one worker ([`Scen`]) and
//! its VU slots, a VU's state ([`Vu`]). A leaf of `scenario/`: the
//! controllers, the VU task and each kind of step import it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use bytes::Bytes;
use throng_metrics::ScenarioRecorder;
use throng_plan::{Authority, Rng, StatusSet};
use throng_scenario::{
    BaseUrl, Condition, CookieJar, GrpcStep, MqttStep, Request, Scenario, ScenarioPlan, Think, WebSocket,
};
use tokio::sync::Notify;

use crate::conn::Conn;
use crate::ctx::Ctx;
use crate::load::SharedCounters;
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::proto::vu::Conns;
use crate::proto::vu::dest::Dest;
use crate::proto::ws::frame::Reader;

/// A request of the flow, with what recording it needs.
pub(super) struct ReqOp {
    pub(super) req: Request,
    /// Recorder tag indices: all, scenario, step, enclosing groups.
    pub(super) tags: Vec<usize>,
    /// Recorder check indices, one per check of the request.
    pub(super) checks: Vec<usize>,
    pub(super) keep: Keep,
    pub(super) head: bool,
}

/// An `add:` step: its custom metric's recorder index and its value.
pub(super) struct AddOp {
    /// The metric's index, then one per tag (`metric{tag:value}`).
    pub(super) metric: Vec<usize>,
    pub(super) value: throng_scenario::AddValue,
}

/// A compiled `js:` step.
pub(super) struct JsOp {
    /// Its number among the scenario's `js:` steps (the VU's runtime
    /// keeps its function under it).
    pub(super) index: usize,
    /// Its bytecode, or why it does not compile (checked when the file
    /// was loaded, so not expected).
    pub(super) code: Result<throng_script::StepCode, String>,
    pub(super) step: throng_scenario::JsStep,
    /// Where it is in the file, for its errors (`FILE:LINE`).
    pub(super) at: String,
    /// Its code names `res`: the requests before it keep their responses.
    pub(super) reads_res: bool,
}

/// What a VU's runtime needs for a flow's `js:` steps.
#[derive(Default)]
pub(super) struct JsFlow {
    /// How many `ops` holds (the runtime keeps a function per step).
    pub(super) steps: usize,
    /// The built-ins they name.
    pub(super) needs: throng_script::StepNeeds,
    /// What their `__ENV` holds.
    pub(super) env: HashMap<String, String>,
}

/// The flow, flattened: groups become start/end markers.
pub(super) enum Op {
    Request(Box<ReqOp>),
    Grpc(Box<GrpcOp>),
    WebSocket(Box<WsOp>),
    Mqtt(Box<MqttOp>),
    Think(Think),
    GroupStart,
    GroupEnd(usize),
    Add(Box<AddOp>),
    Js(Box<JsOp>),
    /// `if:`: on to the next op when the condition holds, else to `to`.
    Branch {
        cond: Box<Condition>,
        to: usize,
    },
    /// On to op `to`.
    Jump(usize),
    /// A loop's first op: its pass counter pushed.
    LoopStart,
    /// `repeat:`'s last op: back to `start` until `times` passes, then its
    /// counter popped.
    Repeat {
        start: usize,
        times: u32,
    },
    /// `until:`'s last op: its condition read after each pass, back to
    /// `start` until it holds (its check passed) or `max` passes (failed).
    Until(Box<UntilOp>),
    /// `choose:`: to the branch whose cumulative weight first exceeds a
    /// draw in [0, total).
    Choose {
        cumulative: Vec<u64>,
        to: Vec<usize>,
    },
}

/// A compiled `until:` loop's end.
pub(super) struct UntilOp {
    pub(super) start: usize,
    pub(super) cond: Condition,
    pub(super) max: u32,
    /// Its check (`until: TEXT`): passed when the condition held, failed
    /// when `max` passes ran out.
    pub(super) check: usize,
}

/// A `grpc:` step, ready to run.
pub(super) struct GrpcOp {
    /// The call as a request (its tags, checks, what its reply keeps).
    pub(super) op: ReqOp,
    pub(super) step: GrpcStep,
    /// The message, framed, when it has no template.
    pub(super) framed: Option<Bytes>,
    pub(super) expect: StatusSet,
    /// `grpc-timeout`'s value.
    pub(super) timeout_header: Option<String>,
    /// Captures or checks read the reply's message.
    pub(super) decode: bool,
}

/// A compiled `websocket:` step.
pub(super) struct WsOp {
    pub(super) ws: WebSocket,
    /// Recorder tag indices: all, scenario, step, enclosing groups.
    pub(super) tags: Vec<usize>,
}

/// A compiled `mqtt:` step.
pub(super) struct MqttOp {
    pub(super) step: MqttStep,
    /// Recorder tag indices: all, scenario, step, enclosing groups.
    pub(super) tags: Vec<usize>,
}

/// A VU's MQTT session, kept for its next `mqtt:` step to the same URL.
pub(super) struct MqttKept {
    pub(super) conn: Conn,
    pub(super) reader: crate::proto::mqtt::codec::Reader,
    pub(super) url: String,
    pub(super) version: crate::proto::mqtt::codec::Version,
    /// The last packet identifier used (0: none yet).
    pub(super) next_id: u16,
    /// The keep-alive announced in CONNECT, in seconds (0: none), and when
    /// a packet last went, in milliseconds after the connection opened
    /// (`u32::MAX`: 49 days or more): a kept session idle for a keep-alive
    /// sends a PINGREQ. Small, as every VU carries a session's room.
    pub(super) keepalive_secs: u16,
    pub(super) sent_ms: u32,
    /// Deliveries read while an acknowledgement was awaited, for the
    /// expects after it.
    pub(super) held: std::collections::VecDeque<Delivered>,
}

/// A message a broker delivered to an `mqtt:` step's session.
pub(super) struct Delivered {
    pub(super) topic: String,
    pub(super) payload: Vec<u8>,
}

/// A VU's socket kept for its next `websocket:` step to the same target.
pub(super) struct Kept {
    pub(super) conn: Conn,
    pub(super) reader: Reader,
    pub(super) target: String,
}

/// A VU slot of the worker's share of a scenario.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) alive: bool,
    /// Will never run again (its iterations are done).
    pub(super) finished: bool,
    /// Must stop by then (above the target: graceful period running).
    pub(super) retire_at: Option<Instant>,
    /// Cut off: abandon the iteration now.
    pub(super) killed: bool,
    /// Open models: the intended start handed to this VU.
    pub(super) job: Option<Instant>,
    /// Open models: in the idle list, waiting for a job.
    pub(super) queued: bool,
    pub(super) waker: Option<Waker>,
}

/// One scenario on one worker.
pub(super) struct Scen {
    pub(super) index: usize,
    pub(super) def: Scenario,
    pub(super) plan: Arc<ScenarioPlan>,
    pub(super) env: Arc<HashMap<String, String>>,
    /// What the `setup:` flow captured.
    pub(super) setup: Arc<HashMap<String, String>>,
    /// Where a `setup:` run's VU leaves its variables.
    pub(super) keep: Option<Arc<std::sync::Mutex<HashMap<String, String>>>>,
    pub(super) shared: Arc<SharedCounters>,
    pub(super) worker: u32,
    pub(super) workers: u32,
    /// This process's execution segment (the whole without one).
    pub(super) segment: throng_plan::Segment,
    pub(super) seed: u64,
    pub(super) ops: Vec<Op>,
    /// What a VU's runtime needs for the flow's `js:` steps.
    pub(super) js: JsFlow,
    /// Recorder tag index per stage (ramping executors).
    pub(super) stage_tags: Vec<usize>,
    pub(super) start: Instant,
    pub(super) end: Instant,
    pub(super) slots: RefCell<Vec<Slot>>,
    /// Closed models: VUs in slots below this may start iterations.
    pub(super) target: Cell<u64>,
    pub(super) active: Cell<u64>,
    pub(super) kill: Notify,
    /// Open models: idle VUs, most recent last.
    pub(super) idle: RefCell<Vec<usize>>,
    pub(super) schedule_done: Cell<bool>,
    /// Its target (its own, else the file's) and how to reach it.
    pub(super) base: BaseUrl,
    pub(super) dest: Arc<Dest>,
    pub(super) authority: Authority,
    /// A k6 script the VUs run instead of `ops` (`script.rs`).
    pub(super) script: Option<Arc<throng_script::Script>>,
    /// A script's request names and their `step:` tags.
    pub(super) names: RefCell<HashMap<String, usize>>,
    /// A script's requests' first tags (all, `scenario:NAME`), once known.
    pub(super) base_tags: Cell<Option<[usize; 2]>>,
}

impl Scen {
    pub(super) fn killed(&self, slot: usize) -> bool {
        self.slots.borrow().get(slot).is_some_and(|s| s.killed)
    }

    pub(super) fn kill_all(&self) {
        for s in self.slots.borrow_mut().iter_mut().filter(|s| s.alive) {
            s.killed = true;
        }
        self.kill.notify_waiters();
        self.wake_idle();
    }

    pub(super) fn wake_idle(&self) {
        let wakers: Vec<Waker> = self
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|s| s.waker.take())
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// The VU's number across the whole run (all segments), from 1.
    pub(super) fn vu_id(&self, slot: usize) -> u64 {
        self.segment
            .nth(slot as u64 * u64::from(self.workers) + u64::from(self.worker))
            + 1
    }

    pub(super) fn stage_tag(&self, now: Instant) -> Option<usize> {
        let since = now.saturating_duration_since(self.start) + self.def.start_time;
        let stage = self.def.stage_at(since)?;
        self.stage_tags.get(stage - 1).copied()
    }
}

/// What one VU keeps between requests and iterations.
pub(super) struct Vu {
    pub(super) id: u64,
    pub(super) iter: u64,
    /// `--trace-context`: the iteration's trace id, which every request
    /// of it carries.
    pub(super) trace: Option<[u8; 16]>,
    pub(super) rng: Rng,
    pub(super) vars: HashMap<String, String>,
    /// What `Set-Cookie` stored (see the scenario's `cookies:`).
    pub(super) jar: CookieJar,
    pub(super) conn: Option<Conn>,
    /// Its HTTP/2 and HTTP/3 connections, one per protocol its requests
    /// speak, opened at first use.
    pub(super) conns: Conns,
    pub(super) session: Session,
    /// A socket a `websocket:` step kept (`keep: true`).
    pub(super) ws: Option<Kept>,
    /// A session an `mqtt:` step kept (`keep: true`).
    pub(super) mqtt: Option<MqttKept>,
    /// A k6 script's VU (its runtime and coroutine), made at its first
    /// iteration.
    pub(super) js: Option<Box<throng_script::ScriptVu>>,
    /// The runtime of its flow's `js:` steps, made at its first one.
    pub(super) steps: Option<Box<throng_script::StepVu>>,
    /// Whether its last request got a whole response (whatever its status):
    /// a script sees the status only then.
    pub(super) answered: bool,
    /// Its last response's status (0: none), which expressions read.
    pub(super) status: u16,
    /// Its loops' pass counters, innermost last (cleared per iteration).
    pub(super) loops: Vec<u32>,
    /// An expression of a step's templates that failed (its message): the
    /// iteration ends failed with it after that step.
    pub(super) fault: Option<String>,
}

pub(super) fn with_scen<T>(ctx: &Ctx, f: impl FnOnce(&mut ScenarioRecorder) -> T) -> Option<T> {
    ctx.scenario.borrow_mut().as_mut().map(f)
}

/// Waits until `at`; false if the run is stopping first.
pub(super) async fn sleep_until(ctx: &Ctx, at: Instant) -> bool {
    if ctx.stopping.get() {
        return false;
    }
    tokio::select! {
        () = tokio::time::sleep_until(at.into()) => !ctx.stopping.get(),
        () = ctx.stop_notify.notified() => false,
    }
}
