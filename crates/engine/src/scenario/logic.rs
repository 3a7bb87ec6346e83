//! Control flow in a VU's ops: `if:`, `repeat:`, `until:` and `choose:`
//! compiled to jumps (see `compile` in mod.rs), run here against the VU's
//! state; its expressions read what a template reads (the VU's variables,
//! `status`, `vu`, `iter`, `env.NAME`, `setup.NAME`: `render::context`).

use super::ops::{Op, Scen, Vu, with_scen};
use crate::ctx::Ctx;

/// Control op `op` at the VU's state: the op to go to (None: the next),
/// or the expression's error (the iteration fails with it).
pub(super) fn next(ctx: &Ctx, sc: &Scen, vu: &mut Vu, op: &Op) -> Result<Option<usize>, String> {
    match op {
        Op::Jump(to) => Ok(Some(*to)),
        Op::Branch { cond, to } => {
            let holds = eval(sc, vu, &cond.expr).map_err(|e| format!("if: {}: {e}", cond.text))?;
            Ok((!holds).then_some(*to))
        }
        Op::LoopStart => {
            vu.loops.push(0);
            Ok(None)
        }
        Op::Repeat { start, times } => {
            let Some(n) = vu.loops.last_mut() else {
                return Ok(None);
            };
            *n += 1;
            if *n < *times {
                return Ok(Some(*start));
            }
            vu.loops.pop();
            Ok(None)
        }
        Op::Until(u) => {
            let holds = eval(sc, vu, &u.cond.expr).map_err(|e| format!("until: {}: {e}", u.cond.text))?;
            let Some(n) = vu.loops.last_mut() else {
                return Ok(None);
            };
            *n += 1;
            if !holds && *n < u.max {
                return Ok(Some(u.start));
            }
            vu.loops.pop();
            // Held: its check passes; ran out of passes: it fails, visibly.
            with_scen(ctx, |r| r.check(u.check, holds));
            Ok(None)
        }
        Op::Choose { cumulative, to } => {
            let total = cumulative.last().copied().unwrap_or(1).max(1);
            // A draw in [0, total): the branch whose cumulative weight
            // first exceeds it.
            let draw = ((vu.rng.next_f64() * total as f64) as u64).min(total - 1);
            let i = cumulative.partition_point(|&c| c <= draw);
            Ok(to.get(i).copied())
        }
        _ => Ok(None),
    }
}

/// `expr`'s truth at the VU's state.
fn eval(sc: &Scen, vu: &mut Vu, expr: &throng_scenario::expr::Expr) -> Result<bool, String> {
    let mut cx = super::render::context(sc, vu);
    expr.eval(&mut cx).map(|v| v.truthy()).map_err(|e| e.to_string())
}
