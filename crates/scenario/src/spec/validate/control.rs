//! Control steps: `if:` with `then:`/`else:`, `repeat:` and `until:` with
//! `steps:` (`until:` with its required `max:`), `choose:` with weighted
//! branches; nested at most [`MAX_NESTING`] deep.

use super::*;

/// Deepest nesting of control steps and groups.
pub(crate) const MAX_NESTING: usize = 16;

/// Most passes of a `repeat:` or an `until:`.
pub(crate) const MAX_PASSES: u32 = 1_000_000;

/// The largest sum of a `choose:`'s weights.
pub(crate) const MAX_WEIGHTS: u64 = 1_000_000;

impl Validator<'_> {
    /// `st` as a control step, when it is one (None: another kind).
    pub(super) fn control(
        &self,
        key: &str,
        st: &mut RawStep,
        defaults: &Defaults,
    ) -> Result<Option<Step>, ScenarioError> {
        let kinds = [
            ("if:", st.when.is_some()),
            ("repeat:", st.repeat.is_some()),
            ("until:", st.until.is_some()),
            ("choose:", st.choose.is_some()),
        ];
        let Some(&(kind, _)) = kinds.iter().find(|(_, set)| *set) else {
            for (k, set) in [
                ("then:", st.then.is_some()),
                ("else:", st.otherwise.is_some()),
                ("max:", st.max.is_some()),
                ("steps:", st.steps.is_some()),
            ] {
                if set {
                    return Err(self.err(
                        &[self.root.get(), key, k],
                        format!("{k} belongs to an if:, repeat: or until: step, and this step has none"),
                    ));
                }
            }
            return Ok(None);
        };
        let here = |k: &str| vec![self.root.get().to_string(), key.to_string(), k.to_string()];
        let others = st.request.is_some()
            || st.think.is_some()
            || st.group.is_some()
            || st.grpc.is_some()
            || st.websocket.is_some()
            || st.sse.is_some()
            || st.mqtt.is_some()
            || st.add.is_some()
            || st.js.is_some()
            || kinds.iter().filter(|(_, set)| *set).count() > 1;
        if others {
            return Err(self.err(
                &here(kind),
                format!("{kind} is a step of its own: put the other step in a list item of its own"),
            ));
        }
        let depth = self.depth.get();
        if depth >= MAX_NESTING {
            return Err(self.err(
                &here(kind),
                format!("control steps and groups nest at most {MAX_NESTING} deep"),
            ));
        }
        self.depth.set(depth + 1);
        let step = self.control_step(key, kind, st, defaults);
        self.depth.set(depth);
        step.map(Some)
    }

    fn control_step(
        &self,
        key: &str,
        kind: &'static str,
        st: &mut RawStep,
        defaults: &Defaults,
    ) -> Result<Step, ScenarioError> {
        let here = |k: &str| vec![self.root.get().to_string(), key.to_string(), k.to_string()];
        let refuse = |k: &str, set: bool| -> Result<(), ScenarioError> {
            if set {
                return Err(self.err(&here(k), format!("{k} does not go with {kind}")));
            }
            Ok(())
        };
        let steps = |st: &mut RawStep| -> Result<Vec<Step>, ScenarioError> {
            match st.steps.take() {
                Some(s) if !s.is_empty() => self.flow(key, s, defaults),
                _ => Err(self.err(&here(kind), format!("{kind} needs its steps: (a list of steps)"))),
            }
        };
        let cond = |text: &str| {
            Condition::parse(text).map_err(|e| {
                self.err(
                    &here(kind),
                    format!("{kind} '{text}': at column {} of the expression: {}", e.col, e.msg),
                )
            })
        };
        match kind {
            "if:" => {
                refuse("max:", st.max.is_some())?;
                refuse("steps:", st.steps.is_some())?;
                let text = st.when.take().unwrap_or_default();
                let cond = cond(&text)?;
                let then = match st.then.take() {
                    Some(s) => self.flow(key, s, defaults)?,
                    None => return Err(self.err(&here(kind), "if: needs its then: steps (and may have else:)")),
                };
                let otherwise = match st.otherwise.take() {
                    Some(s) => self.flow(key, s, defaults)?,
                    None => Vec::new(),
                };
                Ok(Step::If { cond, then, otherwise })
            }
            "repeat:" => {
                refuse("then:", st.then.is_some())?;
                refuse("else:", st.otherwise.is_some())?;
                refuse("max:", st.max.is_some())?;
                let times = st.repeat.unwrap_or(0);
                if !(1..=MAX_PASSES).contains(&times) {
                    return Err(self.err(&here(kind), format!("repeat: {times}: give 1 to {MAX_PASSES}")));
                }
                Ok(Step::Repeat {
                    times,
                    flow: steps(st)?,
                })
            }
            "until:" => {
                refuse("then:", st.then.is_some())?;
                refuse("else:", st.otherwise.is_some())?;
                let text = st.until.take().unwrap_or_default();
                let cond = cond(&text)?;
                let max = match st.max {
                    Some(m) if (1..=MAX_PASSES).contains(&m) => m,
                    Some(m) => return Err(self.err(&here("max:"), format!("max: {m}: give 1 to {MAX_PASSES}"))),
                    None => {
                        return Err(self.err(
                            &here(kind),
                            "until: needs max: (the most passes before the loop gives up, e.g. max: 10)",
                        ));
                    }
                };
                Ok(Step::Until {
                    cond,
                    max,
                    flow: steps(st)?,
                })
            }
            _ => {
                refuse("then:", st.then.is_some())?;
                refuse("else:", st.otherwise.is_some())?;
                refuse("max:", st.max.is_some())?;
                refuse("steps:", st.steps.is_some())?;
                let raw = st.choose.take().unwrap_or_default();
                if raw.is_empty() {
                    return Err(self.err(
                        &here(kind),
                        "choose: needs at least one branch (- weight: N, steps: [...])",
                    ));
                }
                let total: u64 = raw.iter().map(|b| u64::from(b.weight)).sum();
                if raw.iter().any(|b| b.weight == 0) || total > MAX_WEIGHTS {
                    return Err(self.err(
                        &here(kind),
                        format!("choose: every weight is at least 1 and they add up to at most {MAX_WEIGHTS}"),
                    ));
                }
                let mut branches = Vec::with_capacity(raw.len());
                for b in raw {
                    branches.push(Branch {
                        weight: b.weight,
                        flow: self.flow(key, b.steps, defaults)?,
                    });
                }
                Ok(Step::Choose { branches })
            }
        }
    }
}
