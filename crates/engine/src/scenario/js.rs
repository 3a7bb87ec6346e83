//! A `js:` step: its code compiled once per worker, run in the VU's own
//! JavaScript runtime (made at the VU's first `js:` step: a flow without
//! one costs no runtime), the variables it set kept as captures.

use std::collections::HashMap;

use throng_scenario::JsStep;
use throng_script::{StepCode, StepInput, StepNeeds, StepResponse, StepVu};

use super::ops::{JsFlow, JsOp, Op, Scen, Vu, with_scen};
use crate::ctx::Ctx;

/// A runtime's heap limit.
const MEMORY: usize = 16 * 1024 * 1024;

impl JsOp {
    pub(super) fn new(step: &JsStep, index: usize, file: &str) -> JsOp {
        JsOp {
            index,
            code: StepCode::compile(&step.code).map_err(|e| e.message),
            step: step.clone(),
            // The file's name, not its path: a failure's message is kept
            // to 300 characters, and the reason matters more.
            at: format!(
                "{}:{}",
                std::path::Path::new(file)
                    .file_name()
                    .map_or(file.into(), |n| n.to_string_lossy()),
                step.line
            ),
            reads_res: reads_res(&step.code),
        }
    }
}

/// Whether code names `res` (a word of its own): then the requests of the
/// flow keep their headers and body for it.
pub(super) fn reads_res(code: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    code.match_indices("res")
        .any(|(i, _)| !code[..i].ends_with(word) && !code[i + 3..].starts_with(word))
}

/// The number of `js:` steps in a compiled flow.
pub(super) fn count(ops: &[Op]) -> usize {
    ops.iter().filter(|o| matches!(o, Op::Js(_))).count()
}

/// What a VU's runtime needs for a flow's `js:` steps (compiled into
/// `ops`): their number, the built-ins they name, the environment they
/// read (the variables they read by name, all of `env` when one reads it
/// otherwise).
pub(super) fn flow(flow: &[throng_scenario::Step], ops: &[Op], env: &HashMap<String, String>) -> JsFlow {
    let steps = throng_scenario::js_steps(flow);
    if steps.is_empty() {
        return JsFlow::default();
    }
    let codes: Vec<&str> = steps.iter().map(|j| j.code.as_str()).collect();
    JsFlow {
        steps: count(ops),
        needs: StepNeeds::of(&codes),
        env: match throng_script::step_env_names(&codes) {
            None => env.clone(),
            Some(names) => names
                .into_iter()
                .filter_map(|n| env.get(&n).map(|v| (n, v.clone())))
                .collect(),
        },
    }
}

/// Runs the step for the VU, its checks recorded; Err: the iteration fails with this class and
/// message (which quotes no value the code read).
pub(super) fn run(ctx: &Ctx, sc: &Scen, vu: &mut Vu, op: &JsOp) -> Result<(), (&'static str, String)> {
    let code = op
        .code
        .as_ref()
        .map_err(|e| ("js.error", format!("js: step at {}: {e}", op.at)))?;
    if vu.steps.is_none() {
        let made =
            StepVu::new(sc.js.steps, sc.js.needs, MEMORY, (&sc.js.env, &sc.setup)).map_err(|e| ("js.init", e))?;
        vu.steps = Some(Box::new(made));
    }
    let Some(runtime) = vu.steps.as_mut() else {
        return Err(("js.init", "the VU's JavaScript runtime is missing".to_string()));
    };
    let res = (op.reads_res && vu.status != 0).then(|| StepResponse {
        status: vu.status,
        body: vu.session.body(),
        headers: vu.session.headers(),
    });
    let input = StepInput {
        vars: &vu.vars,
        res,
        vu: vu.id,
        iter: vu.iter,
        sets: &op.step.sets,
        timeout: op.step.timeout,
    };
    let ran = runtime.run(op.index, code, input);
    // Its checks and values count, whether it then failed or not.
    let recorded = runtime.take_recorded();
    record(ctx, sc, &recorded).map_err(|m| ("js.error", at(op, &m)))?;
    let set = ran.map_err(|e| (e.class, at(op, &e.message)))?;
    vu.vars.extend(set);
    Ok(())
}

/// A message of the step's as its failure says it: where the step is
/// first.
fn at(op: &JsOp, message: &str) -> String {
    format!("js: step at {}: {}", op.at, message.trim_start_matches("js: "))
}

/// Records a run's checks and values added; Err: a value added to a
/// metric `metrics:` does not declare (by a name the code computed: one
/// it writes as a literal was checked when the file was read).
fn record(ctx: &Ctx, sc: &Scen, recorded: &throng_script::Recorded) -> Result<(), String> {
    if recorded.checks.is_empty() && recorded.adds.is_empty() {
        return Ok(());
    }
    with_scen(ctx, |r| {
        for (name, passed) in &recorded.checks {
            let i = r.check_index(name);
            r.check(i, *passed);
        }
        for (metric, value) in &recorded.adds {
            let Some(m) = sc.plan.metrics.iter().find(|m| m.name == *metric) else {
                // The name was computed while running: not quoted (it may
                // come from what the code read).
                return Err(format!(
                    "js: add(NAME, …) with a name of {} characters that the file's metrics: does not declare; \
                     add only to declared metrics",
                    metric.chars().count()
                ));
            };
            let i = r.custom_index(&m.name, m.kind);
            r.custom(i, *value);
        }
        Ok(())
    })
    .unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn res_is_read_as_a_word_only() {
        assert!(reads_res("vars.s = String(res.status)"));
        assert!(reads_res("const b = JSON.parse(res.body)"));
        assert!(!reads_res("vars.result = 'x'; const address = 1;"));
        assert!(!reads_res("vars.t = ''"));
    }
}
