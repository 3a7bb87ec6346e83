//! A scenario's `js:` steps: each step's code compiled once into bytecode
//! (a module whose default export is the step as a function), and a VU's
//! own small runtime that runs them, synchronously (a step makes no
//! requests, so it needs no coroutine).
//!
//! ```text
//!  js: code ── StepCode::compile ──► bytecode (syntax errors: line, column of the code)
//!  per VU, at its first js: step: StepVu::new (runtime, context, __ENV)
//!  StepVu::run(step, code, StepInput { vars, res, __VU, __ITER, sets, timeout })
//!     ──► the variables it set (only names in sets:) | StepError (no values quoted)
//! ```
//!
//! Bounded: an interrupt handler stops a step past its timeout, the
//! runtime's heap has a limit, its stack too.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::context::intrinsic;
use rquickjs::convert::Coerced;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Module, Object, Persistent, Runtime, Value};

/// What the step's code is wrapped in: its first line, so the code's
/// line N is the module's line N + 1.
const HEAD: &str = "export default function (vars, res, __VU, __ITER, __ENV, env, setup, check, add) {\n";
/// The module's name in errors' stacks.
const NAME: &str = "js";
/// QuickJS's stack bound.
const STACK: usize = 256 * 1024;
/// The largest value a step may set, in bytes.
pub const MAX_SET_VALUE: usize = 1024 * 1024;
/// Most `check(...)` calls, and most `add(...)` calls, in one run of a
/// step.
pub const MAX_CHECKS: usize = 64;
/// The most characters of a check's name.
const CHECK_NAME: usize = 128;
/// The most characters of a name an error shows.
const NAME_CHARS: usize = 60;

/// What a flow's `js:` steps need of JavaScript's built-ins besides
/// `JSON` and `Math`: each costs every VU memory (a context with all of
/// them is 40 KB more than one without).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepNeeds {
    /// `RegExp`, or a regular expression literal.
    regex: bool,
    /// `Date`, `Map` or `Set`.
    dates: bool,
    /// Typed arrays, `Proxy`, `BigInt`, weak references…: everything.
    full: bool,
}

impl StepNeeds {
    /// What `codes` name (a false positive only costs memory).
    pub fn of(codes: &[&str]) -> StepNeeds {
        let word = |code: &str, w: &str| {
            let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
            code.match_indices(w)
                .any(|(i, _)| !code[..i].ends_with(ident) && !code[i + w.len()..].starts_with(ident))
        };
        let any = |words: &[&str]| codes.iter().any(|c| words.iter().any(|w| word(c, w)));
        StepNeeds {
            // Any `/`: a literal the scan misses (`s => /a/.test(s)`)
            // would be a TypeError in a context without RegExp, and a
            // division or a comment costs only memory.
            regex: codes.iter().any(|c| c.contains('/') || crate::scan::uses_regex(c)),
            dates: any(&["Date", "Map", "Set"]),
            full: codes.iter().any(|c| crate::scan::uses_full(c)),
        }
    }
}

/// A `js:` step's code, compiled.
#[derive(Clone, Debug)]
pub struct StepCode {
    bytecode: std::sync::Arc<[u8]>,
    /// The variable names the code writes as written (`vars.NAME`,
    /// `vars["NAME"]`): an error may quote these, not a name the code
    /// computed (which may come from what it read).
    written: std::sync::Arc<[String]>,
}

/// A syntax error in a step's code: its line in the code (from 1; 0 when
/// unknown) and what. (QuickJS's columns do not point at the token, so
/// none is given.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepSyntaxError {
    pub line: usize,
    pub message: String,
}

/// Why a step failed: a class (`js.error`, `js.timeout`, `js.memory`,
/// `js.sets`) and a message that quotes no value the code read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepError {
    pub class: &'static str,
    pub message: String,
}

/// The last response, as a step's `res` shows it.
#[derive(Clone, Copy, Debug)]
pub struct StepResponse<'a> {
    pub status: u16,
    pub body: &'a [u8],
    pub headers: &'a [(String, String)],
}

/// What a step runs with.
#[derive(Clone, Copy, Debug)]
pub struct StepInput<'a> {
    /// The VU's variables (captures and data columns).
    pub vars: &'a HashMap<String, String>,
    /// Its last response, when there was one.
    pub res: Option<StepResponse<'a>>,
    pub vu: u64,
    pub iter: u64,
    /// The variables it may set.
    pub sets: &'a [String],
    /// How long it may run.
    pub timeout: Duration,
}

impl StepCode {
    /// Compiles `code`, without its source text (QuickJS would keep it per
    /// VU); a syntax error names the code's own line and column.
    pub fn compile(code: &str) -> Result<StepCode, StepSyntaxError> {
        let failed = |e: rquickjs::Error| StepSyntaxError {
            line: 0,
            message: format!("cannot compile the step: {e}"),
        };
        let rt = Runtime::new().map_err(failed)?;
        // Full: the parser compiles regular expression literals (BigInt
        // ones too) only with their intrinsics.
        let cx = Context::full(&rt).map_err(failed)?;
        // The parser recurses: bounded from here on this thread's stack
        // (deeply nested code is a syntax error, not a crash).
        // SAFETY: a live runtime, on the thread that runs it.
        unsafe { rquickjs::qjs::JS_UpdateStackTop(cx.get_runtime_ptr()) };
        rt.set_max_stack_size(STACK);
        let source = format!("{HEAD}{code}\n}}\n");
        cx.with(|ctx| {
            let options = rquickjs::module::WriteOptions {
                strip_source: true,
                ..Default::default()
            };
            Module::declare(ctx.clone(), NAME, source)
                .and_then(|m| m.write(options))
                .catch(&ctx)
                .map(|b| StepCode {
                    bytecode: b.into(),
                    written: written_names(code).into(),
                })
                .map_err(|e| syntax(&e))
        })
    }
}

/// The environment variables `codes` read (`env.NAME`, `__ENV.NAME`,
/// `env["NAME"]`): what a VU's `__ENV` needs to hold; None when a code
/// reads it otherwise (`Object.keys(env)`, `env[name]`), so it gets all.
pub fn env_names(codes: &[&str]) -> Option<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut names: Vec<String> = Vec::new();
    for code in codes {
        for word in ["__ENV", "env"] {
            for (i, _) in code.match_indices(word) {
                let before = code[..i].chars().next_back();
                let rest = &code[i + word.len()..];
                if before.is_some_and(|c| ident(c) || c == '.') || rest.starts_with(ident) {
                    continue;
                }
                let rest = rest.trim_start();
                let name = if let Some(r) = rest.strip_prefix('.') {
                    let r = r.trim_start();
                    let end = r.find(|c: char| !ident(c)).unwrap_or(r.len());
                    Some(&r[..end]).filter(|n| !n.is_empty())
                } else if let Some(r) = rest.strip_prefix('[') {
                    let r = r.trim_start();
                    r.chars()
                        .next()
                        .filter(|q| matches!(q, '"' | '\''))
                        .and_then(|q| r[1..].split_once(q))
                        .filter(|(n, after)| !n.contains('\\') && after.trim_start().starts_with(']'))
                        .map(|(n, _)| n)
                } else {
                    None
                };
                match name {
                    Some(n) if !names.iter().any(|x| x == n) => names.push(n.to_string()),
                    Some(_) => {}
                    None => return None,
                }
            }
        }
    }
    Some(names)
}

/// The names `code` writes after `vars.` or in `vars["…"]`.
fn written_names(code: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut out: Vec<String> = Vec::new();
    for (i, _) in code.match_indices("vars") {
        if code[..i].ends_with(|c: char| ident(c) || c == '.') {
            continue;
        }
        let rest = code[i + 4..].trim_start();
        let name = if let Some(r) = rest.strip_prefix('.') {
            let r = r.trim_start();
            Some(&r[..r.find(|c: char| !ident(c)).unwrap_or(r.len())])
        } else if let Some(r) = rest.strip_prefix('[') {
            let r = r.trim_start();
            r.chars()
                .next()
                .filter(|q| matches!(q, '"' | '\'' | '`'))
                .and_then(|q| r[1..].split_once(q))
                .map(|(n, _)| n)
        } else {
            None
        };
        if let Some(n) = name.filter(|n| !n.is_empty() && !out.iter().any(|o| o == n)) {
            out.push(n.to_string());
        }
    }
    out
}

/// A compile error's message and its line in the code.
fn syntax(e: &CaughtError<'_>) -> StepSyntaxError {
    let (message, stack) = match e {
        CaughtError::Exception(x) => (x.message().unwrap_or_default(), x.stack().unwrap_or_default()),
        other => (other.to_string(), String::new()),
    };
    // "    at js:LINE:COLUMN" (the module's line: one below the code's).
    let line = stack
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("at ")?.trim_start_matches('(');
            let rest = rest.strip_prefix(NAME)?.strip_prefix(':')?;
            let line: usize = rest.split(':').next()?.parse().ok()?;
            Some(line.saturating_sub(1).max(1))
        })
        .unwrap_or(0);
    StepSyntaxError { line, message }
}

/// What the interrupt handler, the heap and `check` set.
struct Clock {
    deadline: Cell<Instant>,
    timed_out: Cell<bool>,
    /// What the run under way counted: checks, values added.
    recorded: std::cell::RefCell<Recorded>,
    /// The heap refused an allocation (see `heap.rs`).
    full: Rc<Cell<bool>>,
}

/// What a step's function is given besides its input: `__ENV` (`env`),
/// `setup`, `check(name, passed)` and `add(metric, value)`.
struct Hosts {
    env: Persistent<Object<'static>>,
    setup: Persistent<Object<'static>>,
    check: Persistent<Function<'static>>,
    add: Persistent<Function<'static>>,
}

/// What a run of a step counted, for the engine to record: checks (name,
/// passed) and values added to custom metrics (metric, value: None when
/// not a finite number or true/false).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    pub checks: Vec<(String, bool)>,
    pub adds: Vec<(String, Option<f64>)>,
}

/// The error `check` or `add` throws past [`MAX_CHECKS`] calls.
fn too_many(ctx: &Ctx<'_>, what: &str) -> rquickjs::Error {
    rquickjs::Exception::throw_range(
        ctx,
        &format!("more than {MAX_CHECKS} {what}() calls in one run of a js: step"),
    )
}

/// A VU's runtime for its `js:` steps, made at its first one.
pub struct StepVu {
    /// Each step's function, loaded at its first run (by step index).
    steps: Vec<Option<Persistent<Function<'static>>>>,
    hosts: Hosts,
    clock: Rc<Clock>,
    // Dropped after what they hold.
    cx: Context,
    rt: Runtime,
}

impl std::fmt::Debug for StepVu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepVu").field("steps", &self.steps.len()).finish()
    }
}

impl StepVu {
    /// A runtime whose heap holds at most `memory` bytes, for `steps`
    /// steps that need `needs`; `env` is what `__ENV` and `env` show,
    /// `setup` what `setup` does (the `setup:` flow's variables).
    pub fn new(
        steps: usize,
        needs: StepNeeds,
        memory: usize,
        (env, setup): (&HashMap<String, String>, &HashMap<String, String>),
    ) -> Result<StepVu, String> {
        let failed = |e: rquickjs::Error| format!("the JavaScript runtime could not start: {e}");
        let clock = Rc::new(Clock {
            deadline: Cell::new(Instant::now()),
            timed_out: Cell::new(false),
            recorded: std::cell::RefCell::new(Recorded::default()),
            full: Rc::new(Cell::new(false)),
        });
        let heap = crate::heap::Bounded::new(memory, Rc::clone(&clock.full));
        let rt = Runtime::new_with_alloc(heap).map_err(failed)?;
        rt.set_max_stack_size(STACK);
        let c = Rc::clone(&clock);
        rt.set_interrupt_handler(Some(Box::new(move || {
            let over = Instant::now() >= c.deadline.get();
            c.timed_out.set(over);
            over
        })));
        // Eval, to load the bytecode; Promise: a module's evaluation
        // settles one.
        type Base = (intrinsic::Eval, intrinsic::Json, intrinsic::Promise);
        type Regex = (intrinsic::RegExpCompiler, intrinsic::RegExp);
        type Dates = (intrinsic::Date, intrinsic::MapSet);
        let cx = match (needs.full, needs.regex, needs.dates) {
            (true, _, _) => Context::full(&rt),
            (false, false, false) => Context::custom::<Base>(&rt),
            (false, true, false) => Context::custom::<(Base, Regex)>(&rt),
            (false, false, true) => Context::custom::<(Base, Dates)>(&rt),
            (false, true, true) => Context::custom::<(Base, Regex, Dates)>(&rt),
        }
        .map_err(failed)?;
        let hosts = cx
            .with(|ctx| {
                let object = |map: &HashMap<String, String>| {
                    let o = Object::new(ctx.clone())?;
                    for (k, v) in map {
                        o.set(k.as_str(), v.as_str())?;
                    }
                    Ok::<_, rquickjs::Error>(o)
                };
                let (o, setup) = (object(env)?, object(setup)?);
                let c = Rc::clone(&clock);
                let check = Function::new(
                    ctx.clone(),
                    move |ctx: Ctx<'_>, name: Coerced<String>, passed: Coerced<bool>| {
                        let checks = &mut c.recorded.borrow_mut().checks;
                        if checks.len() >= MAX_CHECKS {
                            return Err(too_many(&ctx, "check"));
                        }
                        checks.push((name.0.chars().take(CHECK_NAME).collect(), passed.0));
                        Ok(passed.0)
                    },
                )?;
                let c = Rc::clone(&clock);
                let add = Function::new(
                    ctx.clone(),
                    move |ctx: Ctx<'_>, metric: Coerced<String>, value: Value<'_>| {
                        let adds = &mut c.recorded.borrow_mut().adds;
                        if adds.len() >= MAX_CHECKS {
                            return Err(too_many(&ctx, "add"));
                        }
                        let value = match value.type_of() {
                            rquickjs::Type::Int | rquickjs::Type::Float | rquickjs::Type::Bool => {
                                value.get::<Coerced<f64>>().ok().map(|v| v.0).filter(|v| v.is_finite())
                            }
                            _ => None,
                        };
                        adds.push((metric.0.chars().take(CHECK_NAME).collect(), value));
                        Ok(())
                    },
                )?;
                Ok(Hosts {
                    env: Persistent::save(&ctx, o),
                    setup: Persistent::save(&ctx, setup),
                    check: Persistent::save(&ctx, check),
                    add: Persistent::save(&ctx, add),
                })
            })
            .map_err(failed)?;
        Ok(StepVu {
            steps: vec![None; steps],
            hosts,
            clock,
            cx,
            rt,
        })
    }

    /// What the last run counted (checks, values added), whether it
    /// failed or not.
    pub fn take_recorded(&mut self) -> Recorded {
        std::mem::take(&mut *self.clock.recorded.borrow_mut())
    }

    /// Runs step `index` (its code `code`): the variables it set, each
    /// named in `input.sets`.
    pub fn run(
        &mut self,
        index: usize,
        code: &StepCode,
        input: StepInput<'_>,
    ) -> Result<Vec<(String, String)>, StepError> {
        self.clock.deadline.set(Instant::now() + input.timeout);
        self.clock.timed_out.set(false);
        self.clock.full.set(false);
        *self.clock.recorded.borrow_mut() = Recorded::default();
        // The runtime measures its stack from here (this call's depth on
        // the worker's stack may differ from the last one's).
        // SAFETY: a live runtime, on the thread that runs it.
        unsafe { rquickjs::qjs::JS_UpdateStackTop(self.cx.get_runtime_ptr()) };
        self.rt.set_max_stack_size(STACK);
        let Some(slot) = self.steps.get_mut(index) else {
            return Err(StepError {
                class: "js.error",
                message: format!("no js: step {index}"),
            });
        };
        let clock = &self.clock;
        let hosts = &self.hosts;
        let out = self.cx.with(|ctx| {
            let f = match slot {
                Some(f) => f.clone().restore(&ctx).catch(&ctx),
                None => load(&ctx, code).inspect(|f| *slot = Some(Persistent::save(&ctx, f.clone()))),
            };
            let f = f.map_err(|e| failure(clock, e))?;
            call(&ctx, &f, hosts, &code.written, input).map_err(|e| match e {
                Failed::Js(e) => failure(clock, e),
                Failed::Step(e) => e,
            })
        });
        // What the step left behind (its garbage) is freed now, not when
        // the heap is next full.
        self.rt.run_gc();
        out
    }
}

/// Step `code`'s function, from its bytecode.
fn load<'js>(ctx: &Ctx<'js>, code: &StepCode) -> Result<Function<'js>, CaughtError<'js>> {
    // SAFETY: bytes this process wrote with Module::write from the same
    // QuickJS build (StepCode::compile), never read from outside.
    let m = unsafe { Module::load(ctx.clone(), &code.bytecode) }.catch(ctx)?;
    let (m, promise) = m.eval().catch(ctx)?;
    while ctx.execute_pending_job() {}
    promise.finish::<()>().catch(ctx)?;
    m.get::<_, Function>("default").catch(ctx)
}

enum Failed<'js> {
    Js(CaughtError<'js>),
    Step(StepError),
}

/// Calls the step's function; the variables it set.
fn call<'js>(
    ctx: &Ctx<'js>,
    f: &Function<'js>,
    hosts: &Hosts,
    written: &[String],
    input: StepInput<'_>,
) -> Result<Vec<(String, String)>, Failed<'js>> {
    let vars = js(ctx, Object::new(ctx.clone()))?;
    for (k, v) in input.vars {
        js(ctx, vars.set(k.as_str(), v.as_str()))?;
    }
    let res = match input.res {
        None => Value::new_undefined(ctx.clone()),
        Some(r) => js(ctx, response(ctx, r))?.into_value(),
    };
    let env = js(ctx, hosts.env.clone().restore(ctx))?;
    let check = js(ctx, hosts.check.clone().restore(ctx))?;
    let add = js(ctx, hosts.add.clone().restore(ctx))?;
    // In HEAD's order.
    let setup = js(ctx, hosts.setup.clone().restore(ctx))?;
    let mut args = rquickjs::function::Args::new(ctx.clone(), 9);
    js(ctx, args.push_arg(vars.clone()))?;
    js(ctx, args.push_arg(res))?;
    js(ctx, args.push_arg(input.vu))?;
    js(ctx, args.push_arg(input.iter))?;
    js(ctx, args.push_arg(env.clone()))?;
    js(ctx, args.push_arg(env))?;
    js(ctx, args.push_arg(setup))?;
    js(ctx, args.push_arg(check))?;
    js(ctx, args.push_arg(add))?;
    js(ctx, f.call_arg::<Value>(args))?;
    let mut out = Vec::new();
    for prop in vars.props::<String, Value>() {
        let (name, value) = js(ctx, prop)?;
        let text = match value.type_of() {
            rquickjs::Type::String => js(ctx, value.get::<String>())?,
            rquickjs::Type::Int | rquickjs::Type::Float | rquickjs::Type::Bool => {
                js(ctx, value.get::<Coerced<String>>())?.0
            }
            _ if !input.sets.contains(&name) => {
                return Err(Failed::Step(not_set(&name, written, input.sets)));
            }
            other => {
                return Err(Failed::Step(StepError {
                    class: "js.sets",
                    message: format!(
                        "js: vars.{} is {other}, not text: a variable holds text (JSON.stringify an object)",
                        clip(&name)
                    ),
                }));
            }
        };
        if input.vars.get(&name) == Some(&text) {
            continue;
        }
        if !input.sets.contains(&name) {
            return Err(Failed::Step(not_set(&name, written, input.sets)));
        }
        if text.len() > MAX_SET_VALUE {
            return Err(Failed::Step(StepError {
                class: "js.sets",
                message: format!(
                    "js: vars.{} is {} bytes long; a variable a js: step sets holds at most {MAX_SET_VALUE}",
                    clip(&name),
                    text.len()
                ),
            }));
        }
        out.push((name, text));
    }
    Ok(out)
}

/// An rquickjs result as a step's.
fn js<'js, T>(ctx: &Ctx<'js>, r: rquickjs::Result<T>) -> Result<T, Failed<'js>> {
    r.catch(ctx).map_err(Failed::Js)
}

/// The error for a variable written that `sets:` does not name: its name
/// when the code writes it as written, else only its length.
fn not_set(name: &str, written: &[String], sets: &[String]) -> StepError {
    let which = match written.iter().any(|w| w == name) {
        true => format!("vars.{}", clip(name)),
        false => format!(
            "a variable whose name ({} characters) it computed",
            name.chars().count()
        ),
    };
    StepError {
        class: "js.sets",
        message: format!(
            "js: the step changed {which}, which its sets: does not name ({}); add it to sets:",
            match sets.is_empty() {
                true => "it sets nothing".to_string(),
                false => format!("it sets {}", sets.join(", ")),
            }
        ),
    }
}

/// `res`: status, body (as text), headers (names in lower case).
fn response<'js>(ctx: &Ctx<'js>, r: StepResponse<'_>) -> rquickjs::Result<Object<'js>> {
    let o = Object::new(ctx.clone())?;
    o.set("status", r.status)?;
    o.set("body", String::from_utf8_lossy(r.body).as_ref())?;
    let h = Object::new(ctx.clone())?;
    for (k, v) in r.headers {
        h.set(k.to_ascii_lowercase(), v.as_str())?;
    }
    o.set("headers", h)?;
    Ok(o)
}

/// A JavaScript failure as a step error: its kind and where in the code,
/// not its message (which may quote what the code read: a response, a
/// variable, a secret from the environment).
fn failure(clock: &Clock, e: CaughtError<'_>) -> StepError {
    if clock.timed_out.get() {
        return StepError {
            class: "js.timeout",
            message: "js: the step ran past its timeout (an endless loop?); it was stopped".to_string(),
        };
    }
    if clock.full.get() {
        return memory();
    }
    match e {
        CaughtError::Error(rquickjs::Error::Allocation) => memory(),
        CaughtError::Exception(x) => {
            let stack = x.stack().unwrap_or_default();
            let message = x.message().unwrap_or_default();
            if message.contains("out of memory") {
                return memory();
            }
            let kind = x
                .as_object()
                .get::<_, Object>("constructor")
                .and_then(|c| c.get::<_, String>("name"))
                .unwrap_or_else(|_| "Error".to_string());
            let at = where_in_code(&stack).map_or(String::new(), |l| format!(" at line {l} of the code"));
            // QuickJS's own messages, which quote nothing the code read.
            if message.contains("stack overflow") || message.contains("call stack size") {
                return StepError {
                    class: "js.stack",
                    message: format!("js: the step ran past its stack (endless recursion?){at}"),
                };
            }
            StepError {
                class: "js.error",
                message: format!(
                    "js: the step threw {}{at} (its message is not shown: it may quote what the code read)",
                    clip(&kind)
                ),
            }
        }
        CaughtError::Value(v) => StepError {
            class: "js.error",
            message: format!("js: the step threw a value of type {}", v.type_name()),
        },
        CaughtError::Error(e) => StepError {
            class: "js.error",
            message: format!("js: {e}"),
        },
    }
}

fn memory() -> StepError {
    StepError {
        class: "js.memory",
        message: "js: the step ran out of memory (the runtime's limit)".to_string(),
    }
}

/// The code's line of the innermost frame in the step's module.
fn where_in_code(stack: &str) -> Option<usize> {
    stack.lines().find_map(|l| {
        let i = l.find("js:")?;
        let line: usize = l[i + 3..].split(':').next()?.trim_end_matches(')').parse().ok()?;
        Some(line.saturating_sub(1).max(1))
    })
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(NAME_CHARS) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn input<'a>(vars: &'a HashMap<String, String>, sets: &'a [String]) -> StepInput<'a> {
        StepInput {
            vars,
            res: None,
            vu: 3,
            iter: 4,
            sets,
            timeout: Duration::from_millis(100),
        }
    }

    fn vu() -> StepVu {
        let env = HashMap::from([("REGION".to_string(), "eu".to_string())]);
        StepVu::new(
            2,
            StepNeeds::default(),
            4 * 1024 * 1024,
            (&env, &HashMap::from([("token".to_string(), "t1".to_string())])),
        )
        .unwrap()
    }

    #[test]
    fn the_environment_a_step_reads_is_found_by_name() {
        let codes = [
            "vars.a = env.A + __ENV.B + env[\"C\"] + env [ 'D' ]; vars.env = x.env;",
            "env.A",
        ];
        assert_eq!(
            env_names(&codes),
            Some(vec!["B".to_string(), "A".into(), "C".into(), "D".into()])
        );
        assert_eq!(env_names(&["vars.n = String(Object.keys(env).length)"]), None);
        assert_eq!(env_names(&["vars.n = __ENV[name]"]), None);
        assert_eq!(env_names(&["vars.environment = 'x'"]), Some(vec![]));
    }

    #[test]
    fn a_step_gets_the_built_ins_its_code_names() {
        let vars = HashMap::new();
        let sets = ["n".to_string()];
        let code = "vars.n = String(/a+/.test('aa')) + new Date(0).getTime() + new Map([[1, 2]]).size;";
        let needs = StepNeeds::of(&[code]);
        assert_eq!(
            needs,
            StepNeeds {
                regex: true,
                dates: true,
                full: false
            }
        );
        let mut vu = StepVu::new(1, needs, 4 << 20, (&HashMap::new(), &HashMap::new())).unwrap();
        let c = StepCode::compile(code).unwrap();
        assert_eq!(
            vu.run(0, &c, input(&vars, &sets)).unwrap(),
            [("n".into(), "true01".into())]
        );
        assert_eq!(
            StepNeeds::of(&["vars.n = JSON.stringify({date: 1})"]),
            StepNeeds::default()
        );
        assert!(StepNeeds::of(&["const a = new Uint8Array(2)"]).full);
        // A literal after an arrow, which the script scan misses.
        let arrow = "const f = s => /a+/.test(s); vars.n = String(f('aa'));";
        let mut vu = StepVu::new(1, StepNeeds::of(&[arrow]), 4 << 20, (&HashMap::new(), &HashMap::new())).unwrap();
        let c = StepCode::compile(arrow).unwrap();
        assert_eq!(
            vu.run(0, &c, input(&vars, &sets)).unwrap(),
            [("n".into(), "true".into())]
        );
    }

    #[test]
    fn a_syntax_error_names_the_line_and_column_of_the_code() {
        let e = StepCode::compile("const a = 1;\nvars.x = (a +;\n").unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        assert!(e.message.contains("unexpected token"), "{e:?}");
        assert!(StepCode::compile("vars.x = '1'").is_ok());
    }

    #[test]
    fn hostile_code_is_an_error_not_a_crash() {
        // Nested past the parser's stack bound: refused, on a small stack too.
        let deep = format!("vars.x = {}1{};", "(".repeat(30_000), ")".repeat(30_000));
        let small = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || StepCode::compile(&deep).map(|_| ()))
            .unwrap();
        let e = small.join().unwrap().unwrap_err();
        assert!(e.message.to_lowercase().contains("stack"), "{e:?}");
        // A response nested past the stack bound, parsed.
        let small = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(|| {
                let code = StepCode::compile("vars.n = String(JSON.parse(res.body).length);").unwrap();
                let body = "[".repeat(200_000);
                let vars = HashMap::new();
                let sets = ["n".to_string()];
                let mut i = input(&vars, &sets);
                i.res = Some(StepResponse {
                    status: 200,
                    body: body.as_bytes(),
                    headers: &[],
                });
                vu().run(0, &code, i).unwrap_err().class
            })
            .unwrap();
        assert!(["js.stack", "js.error"].contains(&small.join().unwrap()));
    }

    #[test]
    fn a_step_sets_what_its_sets_names_from_what_it_reads() {
        let code =
            StepCode::compile("vars.t = vars.a + __VU + __ITER + env.REGION + __ENV.REGION + setup.token; vars.n = 2;")
                .unwrap();
        let vars = HashMap::from([("a".to_string(), "x".to_string())]);
        let sets = ["t".to_string(), "n".to_string()];
        let mut vu = vu();
        let mut out = vu.run(0, &code, input(&vars, &sets)).unwrap();
        out.sort();
        assert_eq!(out, [("n".into(), "2".into()), ("t".into(), "x34eueut1".into())]);
        // Again, from its compiled function.
        assert_eq!(vu.run(0, &code, input(&vars, &sets)).unwrap().len(), 2);
    }

    #[test]
    fn a_step_checks_and_adds_and_they_count_even_when_it_fails() {
        let code = StepCode::compile(
            "check('one', 1 + 1 === 2); check('two', ''); add('orders', 2.5); add('orders', 'x'); add('paid', true); \
             if (vars.a) throw 1;",
        )
        .unwrap();
        let vars = HashMap::from([("a".to_string(), "x".to_string())]);
        let mut vu = vu();
        assert_eq!(vu.run(0, &code, input(&vars, &[])).unwrap_err().class, "js.error");
        let r = vu.take_recorded();
        assert_eq!(r.checks, [("one".to_string(), true), ("two".to_string(), false)]);
        assert_eq!(
            r.adds,
            [
                ("orders".to_string(), Some(2.5)),
                ("orders".into(), None),
                ("paid".into(), Some(1.0))
            ]
        );
        assert_eq!(vu.take_recorded(), Recorded::default());
        let many = StepCode::compile("for (let i = 0; i < 100; i++) check('c', true);").unwrap();
        let e = vu.run(1, &many, input(&vars, &[])).unwrap_err();
        assert!(e.message.contains("RangeError"), "{e:?}");
        assert_eq!(vu.take_recorded().checks.len(), MAX_CHECKS);
    }

    #[test]
    fn a_step_reads_the_last_response() {
        let code =
            StepCode::compile("vars.s = res.status + res.headers['content-type'] + JSON.parse(res.body).a;").unwrap();
        let vars = HashMap::new();
        let sets = ["s".to_string()];
        let headers = [("Content-Type".to_string(), "text/x".to_string())];
        let mut i = input(&vars, &sets);
        i.res = Some(StepResponse {
            status: 201,
            body: br#"{"a":"b"}"#,
            headers: &headers,
        });
        assert_eq!(vu().run(0, &code, i).unwrap(), [("s".into(), "201text/xb".into())]);
    }

    #[test]
    fn a_step_fails_without_quoting_what_it_read() {
        let vars = HashMap::from([("token".to_string(), "s3cr3t".to_string())]);
        let sets = ["ok".to_string()];
        let mut vu = vu();
        let other = StepCode::compile("vars.other = vars.token;").unwrap();
        let e = vu.run(0, &other, input(&vars, &sets)).unwrap_err();
        assert_eq!(e.class, "js.sets");
        assert!(
            e.message.contains("vars.other") && e.message.contains("it sets ok"),
            "{e:?}"
        );
        let thrown = StepCode::compile("\nthrow new TypeError('bad ' + vars.token);").unwrap();
        let e = vu.run(1, &thrown, input(&vars, &sets)).unwrap_err();
        assert_eq!(e.class, "js.error");
        assert!(e.message.contains("TypeError at line 2"), "{e:?}");
        assert!(!e.message.contains("s3cr3t"), "{e:?}");
        let computed = StepCode::compile("vars[vars.token] = '1';").unwrap();
        let e = self::vu().run(0, &computed, input(&vars, &sets)).unwrap_err();
        assert!(e.message.contains("a variable whose name (6 characters)"), "{e:?}");
        assert!(!e.message.contains("s3cr3t"), "{e:?}");
        let object = StepCode::compile("vars.ok = {a: 1};").unwrap();
        let e = self::vu().run(0, &object, input(&vars, &sets)).unwrap_err();
        assert!(e.message.contains("not text"), "{e:?}");
    }

    #[test]
    fn a_step_that_never_ends_or_fills_its_heap_is_stopped_and_the_runtime_goes_on() {
        let vars = HashMap::new();
        let sets = ["n".to_string()];
        let mut vu = vu();
        let forever = StepCode::compile("while (true) {}").unwrap();
        assert_eq!(
            vu.run(0, &forever, input(&vars, &sets)).unwrap_err().class,
            "js.timeout"
        );
        // Out of memory, whatever QuickJS throws then.
        for _ in 0..10 {
            let hog = StepCode::compile("const a = []; while (true) a.push('x'.repeat(1000) + a.length);").unwrap();
            let mut i = input(&vars, &sets);
            i.timeout = Duration::from_secs(20);
            let e = self::vu().run(0, &hog, i).unwrap_err();
            assert_eq!(e.class, "js.memory", "{e:?}");
        }
        // Endless recursion: QuickJS's stack bound, not the thread's.
        let deep = StepCode::compile("function f(n) { return f(n + 1) + 1; } vars.n = String(f(0));").unwrap();
        let e = self::vu().run(0, &deep, input(&vars, &sets)).unwrap_err();
        assert_eq!(e.class, "js.stack", "{e:?}");
        // The runtime still runs its steps.
        let fine = StepCode::compile("vars.n = 1").unwrap();
        assert_eq!(
            vu.run(1, &fine, input(&vars, &sets)).unwrap(),
            [("n".into(), "1".into())]
        );
        assert_eq!(
            vu.run(0, &forever, input(&vars, &sets)).unwrap_err().class,
            "js.timeout"
        );
    }
}
