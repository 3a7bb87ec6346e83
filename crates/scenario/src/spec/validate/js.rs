//! A `js:` step: its code (bounded), the `sets:` variables it may write
//! and its `timeout:`; where its code starts in the file, so that the
//! engine, which compiles the code, can name the file's line of a syntax
//! error.

use super::*;

impl Validator<'_> {
    /// `st` as a `js:` step, when it is one (None: another kind).
    pub(super) fn js(&self, key: &str, st: &mut RawStep) -> Result<Option<Step>, ScenarioError> {
        let Some(code) = st.js.take() else {
            for (k, set) in [("sets:", st.sets.is_some()), ("timeout:", st.timeout.is_some())] {
                if set {
                    return Err(self.err(
                        &[self.root.get(), key, k],
                        format!("{k} belongs to a js: step, and this step has none"),
                    ));
                }
            }
            return Ok(None);
        };
        // The n-th js: step of this flow: its `js:` is the n-th after the
        // flow's key.
        let n = {
            let mut seen = self.js_seen.borrow_mut();
            let flow = format!("{}{key}", self.root.get());
            if seen.0 != flow {
                *seen = (flow, 0);
            }
            seen.1 += 1;
            seen.1
        };
        let mut here: Vec<&str> = vec![self.root.get(), key];
        here.extend(std::iter::repeat_n("js:", n));
        let others = st.request.is_some()
            || st.think.is_some()
            || st.group.is_some()
            || st.grpc.is_some()
            || st.websocket.is_some()
            || st.sse.is_some()
            || st.mqtt.is_some()
            || st.add.is_some()
            || st.when.is_some()
            || st.then.is_some()
            || st.otherwise.is_some()
            || st.repeat.is_some()
            || st.until.is_some()
            || st.max.is_some()
            || st.steps.is_some()
            || st.choose.is_some();
        if others {
            return Err(self.err(
                &here,
                "js: is a step of its own (with its sets: and timeout:): put the other step in a list item of its own",
            ));
        }
        if code.trim().is_empty() {
            return Err(self.err(&here, "js: is empty: write the JavaScript the step runs"));
        }
        if code.len() > MAX_JS_CODE {
            return Err(self.err(
                &here,
                format!(
                    "js: {} bytes of code; a js: step holds at most {MAX_JS_CODE} (put the logic in a k6 script \
                     instead)",
                    code.len()
                ),
            ));
        }
        let sets = st.sets.take().unwrap_or_default();
        self.js_sets(&here, &sets)?;
        let timeout = match st.timeout.take() {
            None => DEFAULT_JS_TIMEOUT,
            Some(Dur(t)) if t >= Duration::from_millis(1) && t <= MAX_JS_TIMEOUT => t,
            Some(Dur(t)) => {
                return Err(self.err(
                    &[&here[..], &["timeout:"]].concat(),
                    format!(
                        "timeout: {t:?}: a js: step may run 1ms to {}s (default {}s)",
                        MAX_JS_TIMEOUT.as_secs(),
                        DEFAULT_JS_TIMEOUT.as_secs()
                    ),
                ));
            }
        };
        let (line, column) = self.js_start(&here);
        let step = JsStep {
            code,
            sets,
            timeout,
            line,
            column,
        };
        self.js_metrics(&here, &step)?;
        Ok(Some(Step::Js(Box::new(step))))
    }

    /// `sets:`: at most [`MAX_JS_SETS`] variable names, none built in,
    /// none twice.
    fn js_sets(&self, here: &[&str], sets: &[String]) -> Result<(), ScenarioError> {
        if sets.len() > MAX_JS_SETS {
            return Err(self.err(
                &[here, &["sets:"]].concat(),
                format!("sets: {} names; a js: step sets at most {MAX_JS_SETS}", sets.len()),
            ));
        }
        for (i, var) in sets.iter().enumerate() {
            let at = [here, &["sets:"]].concat();
            if !is_identifier(var) {
                return Err(self.err(
                    &at,
                    format!(
                        "sets: '{var}': a variable name is letters, digits and _, not starting with a digit (the \
                         code writes it as vars.NAME)"
                    ),
                ));
            }
            if RESERVED.contains(&var.as_str()) {
                return Err(self.err(
                    &at,
                    format!(
                        "sets: '{var}': {{{{{var}}}}} is built in ({}); give the variable another name, e.g. my_{var}",
                        RESERVED.join(", ")
                    ),
                ));
            }
            if sets[..i].contains(var) {
                return Err(self.err(&at, format!("sets: '{var}' is named twice")));
            }
        }
        Ok(())
    }

    /// The metrics the code adds to by a literal name: declared under
    /// `metrics:`.
    fn js_metrics(&self, here: &[&str], step: &JsStep) -> Result<(), ScenarioError> {
        let metrics = self.metrics.borrow();
        if let Some(m) = step
            .added_metrics()
            .into_iter()
            .find(|m| !metrics.iter().any(|d| d.name == *m))
        {
            let declared: Vec<&str> = metrics.iter().map(|d| d.name.as_str()).collect();
            return Err(self.err(
                here,
                format!(
                    "js: add('{m}', …): the metric is not declared; declare it under the top-level metrics: (e.g. \
                     metrics: {{ {m}: counter }}){}",
                    match declared.is_empty() {
                        true => String::new(),
                        false => format!("; declared: {}", declared.join(", ")),
                    }
                ),
            ));
        }
        Ok(())
    }

    /// Where the code of the `js:` key at `path` starts: the line after a
    /// block scalar's `|` or `>` (at its indentation), else after the key
    /// on its own line (after an opening quote).
    fn js_start(&self, path: &[&str]) -> (usize, usize) {
        let (line, column, _) = self.locate(path);
        let lines: Vec<&str> = self.text.lines().collect();
        let Some(l) = line.checked_sub(1).and_then(|i| lines.get(i)) else {
            return (line, column);
        };
        let key_end = l.char_indices().nth(column - 1).map_or(l.len(), |(i, _)| i) + "js:".len();
        let rest = l.get(key_end..).unwrap_or_default();
        let value = rest.trim_start();
        if value.starts_with(['|', '>']) {
            let next = lines.iter().enumerate().skip(line).find(|(_, t)| !t.trim().is_empty());
            return match next {
                Some((i, t)) => (i + 1, t.chars().take_while(|c| *c == ' ').count() + 1),
                None => (line, column),
            };
        }
        let quote = usize::from(value.starts_with(['"', '\'']));
        let at = l[..key_end].chars().count() + (rest.chars().count() - value.chars().count()) + quote + 1;
        (line, at)
    }
}
