//! A virtual user: its own QuickJS runtime on a coroutine of its own.
//!
//! ```text
//!  engine                          ScriptVu (coroutine, own stack)
//!  resume(Start) ───────────────►  default() runs … http.get(url)
//!                ◄─────────────── Yield::Request(spec)   (suspended inside http.get)
//!  the request on the wire
//!  resume(Response) ────────────►  http.get returns a Response … check(…)
//!                ◄─────────────── Yield::Check { name, passed }
//!  resume(Resumed) ─────────────►  … default() returns
//!                ◄─────────────── Yield::IterationDone
//! ```
//!
//! Each VU has its own runtime because QuickJS keeps one stack frame chain
//! per runtime: two VUs interleaving on one runtime would corrupt it (and
//! rquickjs refuses a second entry while one is suspended). The coroutine's
//! stack is mapped, not touched: only what a script uses is resident.
//! Limits: QuickJS's stack is bounded below the coroutine's (deep
//! recursion is a JS exception, not a fault), the heap by
//! [`Limits::memory`], an iteration's time on the CPU by [`Limits::cpu`]
//! (an interrupt handler stops the script past it).

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use rquickjs::context::intrinsic;
use rquickjs::function::Opt;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Object, Runtime, Value};

use crate::script::{Intrinsics, Script};

/// What a VU runs at each `Start`: the default function (a load VU),
/// `setup()` (once, before the load: its result is the data every VU is
/// given) or `teardown(data)` (once, after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Iterate,
    /// A VU of the `options.scenarios` scenario at this index: it runs the
    /// function the scenario's `exec` names (else the default function).
    Scenario(u16),
    Setup,
    Teardown,
}

/// What the engine hands a VU when it resumes it.
#[derive(Debug)]
pub enum Input {
    /// Run an iteration (the first, or the next after `IterationDone` or
    /// `Failed`).
    Start,
    /// The response to the last `Yield::Request`.
    Response(Response),
    /// The sleep, check or group event was taken.
    Resumed,
    /// The VU stops: its iteration is abandoned.
    Abort,
    /// The last request cannot be made: the call throws this message.
    Throw(String),
    /// The `Cookie` header the VU's jar sends to the URL asked for (empty:
    /// none).
    Cookies(String),
}

/// A request the script made, to be performed by the engine.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// `params.tags.name`.
    pub name: Option<String>,
    /// `params.timeout` (None: the plan's).
    pub timeout: Option<Duration>,
    /// `params.responseCallback` (or `http.setResponseCallback`'s): the
    /// statuses that count as expected, as text (`200,300-399`; None: the
    /// plan's, 200–399).
    pub expect: Option<String>,
}

/// The engine's answer to a [`Request`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Response {
    /// 0 when no response arrived (`error` says why).
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// At most the plan's bound on a body.
    pub body: Vec<u8>,
    /// First request byte written to last response byte.
    pub duration: Duration,
    /// The error class of a request that got no response.
    pub error: Option<String>,
}

/// Where a VU stopped.
#[derive(Clone, Debug, PartialEq)]
pub enum Yield {
    Request(Request),
    Sleep(Duration),
    Check {
        name: String,
        passed: bool,
    },
    GroupStart(String),
    GroupEnd,
    /// `jar.set(url, name, value, options)`: a cookie into the VU's jar,
    /// as the `Set-Cookie` header `set_cookie` would store it.
    CookieSet {
        url: String,
        set_cookie: String,
    },
    /// `jar.cookiesForURL(url)`: the cookies the jar sends there
    /// (answered with `Input::Cookies`).
    CookiesFor(String),
    /// A `k6/metrics` metric's `add(value, tags)` (`kind`: counter, gauge,
    /// rate or trend; a rate's value 1 or 0).
    Add {
        metric: String,
        kind: &'static str,
        value: f64,
        tags: Vec<(String, String)>,
    },
    IterationDone,
    /// The iteration ended with an exception (`class`: `script.error`,
    /// `script.timeout`, `script.memory`, `script.stack`, `script.init`).
    Failed {
        class: &'static str,
        message: String,
    },
    /// The VU ended (after `Abort`).
    Ended,
}

/// `k6/metrics` kinds, as the scenario file names them.
const METRIC_KINDS: [&str; 4] = ["counter", "gauge", "rate", "trend"];

/// Metrics a script may declare (a scenario file's bound).
const MAX_METRICS: usize = 64;

/// Tags one `add()` may carry, and the longest tag name or value: each
/// tag keeps a series of its own, named after them.
const MAX_TAGS: usize = 8;
const MAX_TAG_CHARS: usize = 128;

/// The longest check or group name: the report keeps each (up to 1,000).
const MAX_NAME_CHARS: usize = 1024;

/// Stack kept free below QuickJS's limit for the host functions it calls
/// and the coroutine's switch.
const STACK_MARGIN: usize = 64 * 1024;

/// The VU's state the host functions and the engine share.
struct Shared {
    yielder: Cell<*const Yielder<Input, Yield>>,
    /// When the engine last resumed the VU.
    resumed: Cell<Instant>,
    /// The probe's `options` (VU 0), or `setup()`'s result, as JSON.
    probed: std::cell::RefCell<Option<String>>,
    /// The probe: the functions the module exports.
    exports: std::cell::RefCell<Vec<String>>,
    /// The expected statuses the next request carries (set just before it).
    expect: std::cell::RefCell<Option<String>>,
    /// Past it, the interrupt handler stops the script.
    deadline: Cell<Instant>,
    /// Time the iteration has run so far, before the current resume.
    used: Cell<Duration>,
    cpu: Duration,
    aborted: Cell<bool>,
    timed_out: Cell<bool>,
    /// The module is being evaluated (the init context): no requests.
    init: Cell<bool>,
    /// The `k6/metrics` metrics the init context declared, with their kind.
    metrics: std::cell::RefCell<Vec<(String, &'static str)>>,
}

impl Shared {
    /// Suspends with `y` (a sleep, check, group or jar event) and reads the
    /// engine's answer: taken, thrown back into the script, or the VU is
    /// stopping.
    fn taken(&self, ctx: &Ctx<'_>, y: Yield) -> rquickjs::Result<()> {
        match self.suspend(y) {
            Input::Resumed => Ok(()),
            Input::Throw(m) => Err(rquickjs::Exception::throw_message(ctx, &m)),
            _ => Err(rquickjs::Exception::throw_internal(ctx, "the VU is stopping")),
        }
    }

    /// Suspends the coroutine with `y`; what the engine resumes it with.
    fn suspend(&self, y: Yield) -> Input {
        let p = self.yielder.get();
        // Invariant: set to the coroutine's yielder before any JavaScript
        // runs, on the coroutine's own stack, and the host functions run
        // only inside the coroutine, which outlives nothing it points to.
        let yielder = unsafe { &*p };
        let now = Instant::now();
        self.used
            .set(self.used.get() + now.saturating_duration_since(self.resumed.get()));
        yielder.suspend(y)
    }
}

/// A VU: resume it with [`Input`]s, it answers [`Yield`]s.
pub struct ScriptVu {
    co: Coroutine<Input, Yield, (), DefaultStack>,
    shared: Rc<Shared>,
    ended: bool,
}

impl std::fmt::Debug for ScriptVu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptVu").field("ended", &self.ended).finish()
    }
}

impl ScriptVu {
    /// A VU numbered `vu` (from 1) running `script`'s `stage`; `env` is
    /// `__ENV`, `data` what `setup()` returned, as JSON (given to the
    /// default function and `teardown`). Its runtime is made at the first
    /// resume, on its own stack.
    pub fn new(
        script: &Arc<Script>,
        vu: u64,
        env: &HashMap<String, String>,
        stage: Stage,
        data: Option<Arc<str>>,
    ) -> std::io::Result<ScriptVu> {
        let limits = script.limits;
        let stack = DefaultStack::new(limits.stack)?;
        let shared = Rc::new(Shared {
            yielder: Cell::new(std::ptr::null()),
            resumed: Cell::new(Instant::now()),
            probed: std::cell::RefCell::new(None),
            exports: std::cell::RefCell::new(Vec::new()),
            expect: std::cell::RefCell::new(None),
            metrics: std::cell::RefCell::new(Vec::new()),
            deadline: Cell::new(Instant::now() + limits.cpu),
            used: Cell::new(Duration::ZERO),
            cpu: limits.cpu,
            aborted: Cell::new(false),
            timed_out: Cell::new(false),
            init: Cell::new(true),
        });
        let env: Vec<(String, String)> = match &script.env_names {
            Some(names) => names
                .iter()
                .filter_map(|n| env.get(n).map(|v| (n.clone(), v.clone())))
                .collect(),
            None => env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let s = Arc::clone(script);
        let sh = Rc::clone(&shared);
        let co = Coroutine::with_stack(stack, move |y: &Yielder<Input, Yield>, first: Input| {
            sh.yielder.set(y as *const _);
            body(&s, &sh, Run { vu, stage, data }, env, first);
        });
        Ok(ScriptVu {
            co,
            shared,
            ended: false,
        })
    }

    /// Runs the VU until it stops again.
    pub fn resume(&mut self, input: Input) -> Yield {
        if self.ended {
            return Yield::Ended;
        }
        if matches!(input, Input::Start) {
            self.shared.used.set(Duration::ZERO);
            self.shared.timed_out.set(false);
        }
        if matches!(input, Input::Abort) {
            self.shared.aborted.set(true);
        }
        let now = Instant::now();
        self.shared.resumed.set(now);
        self.shared
            .deadline
            .set(now + self.shared.cpu.saturating_sub(self.shared.used.get()));
        match self.co.resume(input) {
            CoroutineResult::Yield(y) => y,
            CoroutineResult::Return(()) => {
                self.ended = true;
                Yield::Ended
            }
        }
    }
}

impl ScriptVu {
    /// The probe's `options` as JSON (VU 0 only).
    pub(crate) fn declared(&self) -> Vec<(String, &'static str)> {
        self.shared.metrics.borrow().clone()
    }

    pub(crate) fn probed(&self) -> Option<String> {
        self.shared.probed.borrow().clone()
    }

    /// The probe: the functions the module exports.
    pub(crate) fn exports(&self) -> Vec<String> {
        self.shared.exports.borrow().clone()
    }

    /// What `setup()` returned, as JSON (`null` for nothing), once its
    /// `Stage::Setup` iteration is done.
    pub fn setup_data(&self) -> Option<String> {
        self.shared.probed.borrow().clone()
    }
}

impl Drop for ScriptVu {
    fn drop(&mut self) {
        if !self.co.started() || self.co.done() {
            return;
        }
        // Unwinding the coroutine would cross QuickJS's C frames: ask the
        // script to end instead (every host function throws, the interrupt
        // handler stops any loop), bounded.
        for _ in 0..64 {
            if self.co.done() {
                return;
            }
            self.resume(Input::Abort);
        }
        if !self.co.done() {
            // A script that will not end (it cannot: the interrupt handler
            // stops it): its stack and runtime are leaked, not unwound.
            // SAFETY: nothing on the coroutine's stack is used again.
            unsafe { self.co.force_reset() };
        }
    }
}

/// What a VU's coroutine runs: its number, stage and setup data.
struct Run {
    vu: u64,
    stage: Stage,
    data: Option<Arc<str>>,
}

/// The coroutine: makes the runtime, evaluates the module, then runs an
/// iteration per `Start` until `Abort`.
fn body(script: &Script, sh: &Rc<Shared>, run: Run, env: Vec<(String, String)>, first: Input) {
    let vu = run.vu;
    let made = Runtime::new().and_then(|rt| {
        rt.set_max_stack_size(script.limits.stack.saturating_sub(STACK_MARGIN));
        rt.set_memory_limit(script.limits.memory);
        let h = Rc::clone(sh);
        rt.set_interrupt_handler(Some(Box::new(move || {
            if h.aborted.get() || Instant::now() >= h.deadline.get() {
                h.timed_out.set(!h.aborted.get());
                return true;
            }
            false
        })));
        rt.set_loader(script.sources.clone(), script.sources.clone());
        let cx = match script.intrinsics {
            // Promise: module evaluation settles one.
            Intrinsics::Small => Context::custom::<(intrinsic::Eval, intrinsic::Json, intrinsic::Promise)>(&rt),
            Intrinsics::Regex => Context::custom::<(
                intrinsic::Eval,
                intrinsic::Json,
                intrinsic::Promise,
                intrinsic::RegExpCompiler,
                intrinsic::RegExp,
            )>(&rt),
            Intrinsics::Full => Context::full(&rt),
        }?;
        // The runtime measures its stack from here, the coroutine's stack
        // (before any JavaScript runs), and bounds it below the stack's end.
        // SAFETY: a live runtime; called on the stack it will run on.
        unsafe { rquickjs::qjs::JS_UpdateStackTop(cx.get_runtime_ptr()) };
        rt.set_max_stack_size(script.limits.stack.saturating_sub(STACK_MARGIN));
        Ok((rt, cx))
    });
    let (rt, cx) = match made {
        Ok(m) => m,
        Err(e) => {
            fail_forever(
                sh,
                "script.init",
                format!("the JavaScript runtime could not start: {e}"),
                first,
            );
            return;
        }
    };
    cx.with(|ctx| {
        let (ns, default) = match init(&ctx, script, sh, vu, &env) {
            Ok((ns, _)) if vu == 0 => {
                // The probe: the options, and no iteration.
                let json = ns
                    .get::<_, Value>("options")
                    .ok()
                    .and_then(|o| ctx.json_stringify(o).ok().flatten())
                    .and_then(|s| s.to_string().ok());
                *sh.probed.borrow_mut() = json;
                let names = ns.keys::<String>().filter_map(Result::ok);
                let functions = names.filter(|n| ns.get::<_, Value>(n.as_str()).is_ok_and(|v| v.is_function()));
                *sh.exports.borrow_mut() = functions.collect();
                return;
            }
            Ok(found) => found,
            Err(e) => {
                let (class, message) = describe(&ctx, sh, e);
                let class = if class == "script.error" { "script.init" } else { class };
                fail_forever(sh, class, message, first);
                return;
            }
        };
        sh.init.set(false);
        // The function each Start calls, and its argument: the setup data,
        // parsed once per VU (each VU has its own copy, as in k6).
        let (call, data) = match stage_call(&ctx, script, &ns, default, &run) {
            Ok(c) => c,
            Err(e) => {
                let (_, message) = describe(&ctx, sh, e);
                fail_forever(sh, "script.init", message, first);
                return;
            }
        };
        let mut input = first;
        let mut iter: u64 = 0;
        loop {
            match input {
                Input::Abort => return,
                Input::Start => {}
                // Out of turn: the engine starts iterations.
                _ => {
                    input = sh.suspend(Yield::IterationDone);
                    continue;
                }
            }
            let _ = ctx.globals().set("__ITER", iter);
            iter += 1;
            let ran = call.call::<_, Value>((data.clone(),)).catch(&ctx);
            let ran = match (run.stage, ran) {
                // setup()'s result goes to every VU as JSON.
                (Stage::Setup, Ok(v)) => match ctx.json_stringify(v).catch(&ctx) {
                    Ok(json) => {
                        let json = json.and_then(|s| s.to_string().ok()).unwrap_or_else(|| "null".into());
                        *sh.probed.borrow_mut() = Some(json);
                        Ok(Value::new_undefined(ctx.clone()))
                    }
                    Err(e) => Err(e),
                },
                (_, ran) => ran,
            };
            // Promises a script left (async functions) run now, bounded by the same limits.
            while ctx.execute_pending_job() {}
            if sh.aborted.get() {
                return;
            }
            let y = match ran {
                Ok(_) => Yield::IterationDone,
                Err(e) => {
                    let (class, message) = describe(&ctx, sh, e);
                    // A failed iteration may leave cycles (or a heap at its
                    // limit): collected now. A completed one leaves them to
                    // QuickJS's own threshold (reference counts free the rest).
                    ctx.run_gc();
                    Yield::Failed { class, message }
                }
            };
            input = sh.suspend(y);
        }
    });
    drop(cx);
    drop(rt);
}

/// What a stage calls at each Start (the default function, `setup` or
/// `teardown`) and its argument (the setup data, `undefined` without).
fn stage_call<'js>(
    ctx: &Ctx<'js>,
    script: &Script,
    ns: &Object<'js>,
    default: Function<'js>,
    run: &Run,
) -> Result<(Function<'js>, Value<'js>), CaughtError<'js>> {
    let data = match (&run.data, run.stage) {
        (Some(json), Stage::Iterate | Stage::Scenario(_) | Stage::Teardown) => {
            ctx.json_parse(json.as_bytes().to_vec()).catch(ctx)?
        }
        _ => Value::new_undefined(ctx.clone()),
    };
    let exec = match run.stage {
        Stage::Scenario(i) => script
            .options
            .scenarios
            .get(usize::from(i))
            .and_then(|s| s.exec.as_deref()),
        _ => None,
    };
    let call = match (run.stage, exec) {
        (Stage::Iterate, _) | (Stage::Scenario(_), None) => default,
        (stage, exec) => {
            let name = match stage {
                Stage::Setup => "setup",
                Stage::Teardown => "teardown",
                _ => exec.unwrap_or("default"),
            };
            match ns.get::<_, Value>(name).catch(ctx)?.into_function() {
                Some(f) => f,
                None => {
                    return Err(CaughtError::Error(rquickjs::Error::new_from_js_message(
                        "module",
                        "function",
                        "the script exports no such function",
                    )));
                }
            }
        }
    };
    Ok((call, data))
}

/// A VU whose runtime or module failed: each iteration fails the same way.
fn fail_forever(sh: &Shared, class: &'static str, message: String, first: Input) {
    let mut input = first;
    loop {
        if matches!(input, Input::Abort) {
            return;
        }
        input = sh.suspend(Yield::Failed {
            class,
            message: message.clone(),
        });
    }
}

/// The module evaluated with the host functions and globals in place;
/// its default function.
fn init<'js>(
    ctx: &Ctx<'js>,
    script: &Script,
    sh: &Rc<Shared>,
    vu: u64,
    env: &[(String, String)],
) -> Result<(Object<'js>, Function<'js>), CaughtError<'js>> {
    let g = ctx.globals();
    host(ctx, sh, &script.data, script.crypto).catch(ctx)?;
    g.set("__VU", vu).catch(ctx)?;
    g.set("__ITER", 0).catch(ctx)?;
    let e = Object::new(ctx.clone()).catch(ctx)?;
    for (k, v) in env {
        e.set(k.as_str(), v.as_str()).catch(ctx)?;
    }
    g.set("__ENV", e).catch(ctx)?;
    let ns = evaluate(ctx, script)?;
    match ns.get::<_, Value>("default").catch(ctx)?.into_function() {
        Some(f) => Ok((ns, f)),
        None => Err(CaughtError::Error(rquickjs::Error::new_from_js_message(
            "module",
            "function",
            "the script has no `export default function`: k6 runs it once per iteration",
        ))),
    }
}

/// Evaluates the main module; its namespace.
pub(crate) fn evaluate<'js>(ctx: &Ctx<'js>, script: &Script) -> Result<Object<'js>, CaughtError<'js>> {
    let m = script.sources.module(ctx, &script.main).catch(ctx)?;
    let (m, promise) = m.eval().catch(ctx)?;
    while ctx.execute_pending_job() {}
    promise.finish::<()>().catch(ctx)?;
    m.namespace().catch(ctx)
}

/// The host functions as `globalThis.__throng`.
fn host<'js>(ctx: &Ctx<'js>, sh: &Rc<Shared>, data: &Arc<crate::data::Shared>, crypto: bool) -> rquickjs::Result<()> {
    let o = Object::new(ctx.clone())?;
    let h = Rc::clone(sh);
    o.set(
        "request",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  method: String,
                  url: String,
                  body: Opt<Option<String>>,
                  headers: Vec<String>,
                  name: Opt<Option<String>>,
                  timeout: Opt<f64>|
                  -> rquickjs::Result<Object<'js>> {
                if h.init.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "http requests cannot be made in the init context (at the top of the script); make them \
                         in the default function",
                    ));
                }
                if h.aborted.get() {
                    return Err(rquickjs::Exception::throw_internal(&ctx, "the VU is stopping"));
                }
                let headers = headers.chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect();
                let timeout = timeout
                    .0
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .map(|ms| Duration::from_secs_f64(ms.min(1e12) / 1000.0));
                let req = Request {
                    method,
                    url,
                    headers,
                    body: body.0.flatten(),
                    name: name.0.flatten(),
                    timeout,
                    expect: h.expect.borrow_mut().take(),
                };
                let r = match h.suspend(Yield::Request(req)) {
                    Input::Response(r) => r,
                    Input::Throw(m) => return Err(rquickjs::Exception::throw_message(&ctx, &m)),
                    _ => return Err(rquickjs::Exception::throw_internal(&ctx, "the VU is stopping")),
                };
                response(&ctx, r)
            },
        )?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "sleep",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, s: f64| -> rquickjs::Result<()> {
            if h.init.get() || h.aborted.get() {
                return Err(rquickjs::Exception::throw_message(
                    &ctx,
                    "sleep() cannot run in the init context",
                ));
            }
            let d = if s.is_finite() && s > 0.0 {
                Duration::from_secs_f64(s.min(1e9))
            } else {
                Duration::ZERO
            };
            h.taken(&ctx, Yield::Sleep(d))
        })?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "check",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: String, passed: bool| -> rquickjs::Result<()> {
                if h.init.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "check() cannot run in the init context",
                    ));
                }
                if name.chars().count() > MAX_NAME_CHARS {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!("check(): a check's name is at most {MAX_NAME_CHARS} characters"),
                    ));
                }
                h.taken(&ctx, Yield::Check { name, passed })
            },
        )?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "groupStart",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: String| -> rquickjs::Result<()> {
                if h.init.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "group() cannot run in the init context",
                    ));
                }
                if name.chars().count() > MAX_NAME_CHARS {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!("group(): a group's name is at most {MAX_NAME_CHARS} characters"),
                    ));
                }
                h.taken(&ctx, Yield::GroupStart(name))
            },
        )?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "metric",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: String, kind: String| -> rquickjs::Result<()> {
                if !h.init.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "k6/metrics: a metric is declared in the init context (the script's top level), as k6 requires",
                    ));
                }
                let Some(kind) = METRIC_KINDS.iter().find(|k| **k == kind) else {
                    return Err(rquickjs::Exception::throw_message(&ctx, "k6/metrics: unknown kind"));
                };
                let valid = (1..=64).contains(&name.len())
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    let shown: String = name.chars().take(40).collect();
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!(
                            "k6/metrics: the metric name '{shown}{}' must be 1 to 64 letters, digits or _, not \
                             starting with a digit",
                            if name.chars().count() > 40 { "…" } else { "" }
                        ),
                    ));
                }
                let mut declared = h.metrics.borrow_mut();
                match declared.iter().find(|(n, _)| *n == name) {
                    Some((_, k)) if k != kind => Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!("k6/metrics: '{name}' is declared twice, as a {k} and as a {kind}"),
                    )),
                    Some(_) => Ok(()),
                    None if declared.len() >= MAX_METRICS => Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!("k6/metrics: more than {MAX_METRICS} metrics declared"),
                    )),
                    None => {
                        declared.push((name, kind));
                        Ok(())
                    }
                }
            },
        )?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "add",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, metric: String, kind: String, value: f64, tags: Vec<String>| -> rquickjs::Result<()> {
                if h.init.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "k6/metrics: add() cannot run in the init context",
                    ));
                }
                let kind = METRIC_KINDS.iter().find(|k| **k == kind).copied().unwrap_or("counter");
                if tags.len() > 2 * MAX_TAGS || tags.iter().any(|t| t.chars().count() > MAX_TAG_CHARS) {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        &format!(
                            "k6/metrics: add() takes at most {MAX_TAGS} tags, each name and value at most \
                             {MAX_TAG_CHARS} characters"
                        ),
                    ));
                }
                let tags = tags
                    .chunks(2)
                    .filter_map(|p| Some((p.first()?.clone(), p.get(1)?.clone())))
                    .collect();
                h.taken(
                    &ctx,
                    Yield::Add {
                        metric,
                        kind,
                        value,
                        tags,
                    },
                )
            },
        )?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "groupEnd",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>| -> rquickjs::Result<()> {
            h.taken(&ctx, Yield::GroupEnd)
        })?,
    )?;
    o.set(
        "b64encode",
        Function::new(ctx.clone(), |s: String, enc: String| -> String {
            engine(&enc).encode(s.as_bytes())
        })?,
    )?;
    o.set(
        "b64decode",
        Function::new(ctx.clone(), |s: String, enc: String| -> Option<String> {
            engine(&enc)
                .decode(s.trim().as_bytes())
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        })?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "expect",
        Function::new(ctx.clone(), move |statuses: Option<String>| {
            *h.expect.borrow_mut() = statuses;
        })?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "cookieSet",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, url: String, set_cookie: String| -> rquickjs::Result<()> {
                if h.init.get() || h.aborted.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "the cookie jar cannot be used in the init context",
                    ));
                }
                h.taken(&ctx, Yield::CookieSet { url, set_cookie })
            },
        )?,
    )?;
    let h = Rc::clone(sh);
    o.set(
        "cookiesFor",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, url: String| -> rquickjs::Result<String> {
                if h.init.get() || h.aborted.get() {
                    return Err(rquickjs::Exception::throw_message(
                        &ctx,
                        "the cookie jar cannot be used in the init context",
                    ));
                }
                match h.suspend(Yield::CookiesFor(url)) {
                    Input::Cookies(header) => Ok(header),
                    Input::Throw(m) => Err(rquickjs::Exception::throw_message(&ctx, &m)),
                    _ => Err(rquickjs::Exception::throw_internal(&ctx, "the VU is stopping")),
                }
            },
        )?,
    )?;
    if crypto {
        crate::crypto::install(ctx, &o)?;
    }
    let h = Rc::clone(sh);
    crate::data::install(ctx, &o, data, move || h.init.get())?;
    ctx.globals().set("__throng", o)
}

fn engine(enc: &str) -> base64::engine::GeneralPurpose {
    use base64::engine::general_purpose as gp;
    match enc {
        "rawstd" => gp::STANDARD_NO_PAD,
        "url" => gp::URL_SAFE,
        "rawurl" => gp::URL_SAFE_NO_PAD,
        _ => gp::STANDARD,
    }
}

/// A response as the object `k6/http` wraps in `Response`.
fn response<'js>(ctx: &Ctx<'js>, r: Response) -> rquickjs::Result<Object<'js>> {
    let o = Object::new(ctx.clone())?;
    o.set("status", r.status)?;
    o.set("body", String::from_utf8_lossy(&r.body).as_ref())?;
    // k6's canonical names: `content-type` is `Content-Type`.
    let hs = Object::new(ctx.clone())?;
    let mut name = String::new();
    for (k, v) in r.headers {
        name.clear();
        for (i, part) in k.split('-').enumerate() {
            if i > 0 {
                name.push('-');
            }
            let mut cs = part.chars();
            if let Some(c) = cs.next() {
                name.push(c.to_ascii_uppercase());
                name.extend(cs.map(|c| c.to_ascii_lowercase()));
            }
        }
        hs.set(name.as_str(), v)?;
    }
    o.set("headers", hs)?;
    let t = Object::new(ctx.clone())?;
    t.set("duration", r.duration.as_secs_f64() * 1000.0)?;
    o.set("timings", t)?;
    match r.error {
        Some(e) => {
            o.set("error", e.as_str())?;
            o.set("error_code", 1)?;
        }
        None => {
            o.set("error", "")?;
            o.set("error_code", 0)?;
        }
    }
    Ok(o)
}

/// An exception's class and message (with where it was thrown).
fn describe<'js>(_ctx: &Ctx<'js>, sh: &Shared, e: CaughtError<'js>) -> (&'static str, String) {
    if sh.timed_out.get() {
        return (
            "script.timeout",
            format!(
                "the iteration ran JavaScript for more than {:?} (an endless loop?); it was stopped",
                sh.cpu
            ),
        );
    }
    let text = match &e {
        CaughtError::Exception(x) => {
            let msg = x.message().unwrap_or_default();
            let stack = x.stack().unwrap_or_default();
            // The script's own frame, not the k6 modules' wrappers.
            let at = stack
                .lines()
                .find(|l| l.contains(':') && !l.contains("(k6:") && !l.contains("(k6/"))
                .map(str::trim)
                .unwrap_or("");
            if at.is_empty() { msg } else { format!("{msg} ({at})") }
        }
        CaughtError::Value(v) => format!("thrown: {v:?}"),
        CaughtError::Error(e) => e.to_string(),
    };
    let lower = text.to_ascii_lowercase();
    let class = if lower.contains("out of memory") || matches!(e, CaughtError::Error(rquickjs::Error::Allocation)) {
        "script.memory"
    } else if lower.contains("stack overflow") || lower.contains("call stack size") {
        "script.stack"
    } else {
        "script.error"
    };
    (class, text)
}
