//! The raw file checked into a [`ScenarioPlan`]: every error names the
//! key's file:line:column and what to write instead.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use throng_plan::{HttpVersion, StatusSet, TlsGroup, TlsSettings, TlsVersion};

use super::raw::*;
use super::types::*;
use super::{ScenarioError, TargetInputs};
use crate::checks::{Capture, CaptureFrom, Check, CheckKind};
use crate::template::{Template, is_identifier};

mod control;
mod grpc;
mod grpc_messages;
mod js;
mod mqtt;
mod request;
mod scenario;
mod sse;
mod target;
mod thresholds;
mod vars;
mod websocket;

use request::json_pointer;
use vars::contains_request;
pub(super) use vars::tag_exists;

/// Template functions without arguments, listed as known variables.
const BUILT_INS: [&str; 6] = ["vu", "iter", "scenario", "uuid", "random_email", "now_ms"];

/// Names a variable cannot take: `{{NAME}}` would render the built-in.
const RESERVED: [&str; 8] = [
    "vu",
    "iter",
    "scenario",
    "uuid",
    "random_email",
    "now_ms",
    "random_int",
    "env",
];

pub(super) struct Validator<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a str,
    /// The descriptors the scenario being checked calls `grpc:` steps
    /// with (its own `proto:`, else the file's), and where they came from.
    proto: std::cell::RefCell<Option<Proto>>,
    /// Asks a server's reflection for descriptors (`throng run`).
    reflect: Option<&'a crate::grpc::Reflect<'a>>,
    /// Reads a file the scenario names, relative to it (bounded).
    read: &'a dyn Fn(&str) -> Result<String, String>,
    /// The top-level key the flow being checked sits under (`scenarios:`,
    /// or `setup:` / `teardown:`), where errors start looking for it.
    root: std::cell::Cell<&'static str>,
    /// The file's custom metrics (`metrics:`), which `add:` steps name.
    pub(super) metrics: std::cell::RefCell<Vec<CustomMetric>>,
    /// How deep the flow being checked sits in `if:`, loops and `choose:`.
    depth: std::cell::Cell<usize>,
    /// The flow whose `js:` steps are being checked (its top-level key
    /// and its own), and how many of them so far: where the next one's
    /// `js:` is.
    js_seen: std::cell::RefCell<(String, usize)>,
}

/// Where a scenario's `grpc:` steps find their methods.
#[derive(Clone)]
enum Proto {
    /// Compiled .proto files, and their names.
    Files(std::rc::Rc<prost_reflect::DescriptorPool>, String),
    /// The target's server reflection, asked once the file is checked.
    Reflection,
}

impl<'a> Validator<'a> {
    pub(super) fn new(
        text: &'a str,
        file: &'a str,
        reflect: Option<&'a crate::grpc::Reflect<'a>>,
        read: &'a dyn Fn(&str) -> Result<String, String>,
    ) -> Self {
        Validator {
            text,
            file,
            proto: std::cell::RefCell::new(None),
            reflect,
            read,
            root: std::cell::Cell::new("scenarios:"),
            metrics: std::cell::RefCell::new(Vec::new()),
            depth: std::cell::Cell::new(0),
            js_seen: std::cell::RefCell::new((String::new(), 0)),
        }
    }
}

impl Validator<'_> {
    /// An error at the first line holding every needle in turn (a path of
    /// keys such as ["scenarios:", "users:", "stages:"]); a needle not found
    /// is skipped. A needle that starts with a letter, digit or `_` only
    /// matches where a word starts, so `rate:` does not find `start_rate:`.
    fn err(&self, path: &[impl AsRef<str>], message: impl Into<String>) -> ScenarioError {
        let (line, column, _) = self.locate(path);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    /// An error at the first of `paths` whose needles are all found (the
    /// value as written, then a looser path), else as [`Self::err`] at the
    /// last.
    fn err_first(&self, paths: &[&[&str]], message: impl Into<String>) -> ScenarioError {
        let path = paths
            .iter()
            .find(|p| self.locate(p).2)
            .or(paths.last())
            .copied()
            .unwrap_or_default();
        self.err(path, message)
    }

    /// Line and column (from 1) of the path's last needle found, and
    /// whether every needle was.
    fn locate(&self, path: &[impl AsRef<str>]) -> (usize, usize, bool) {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let find = |l: &str, needle: &str| -> Option<usize> {
            if !needle.starts_with(word) {
                return l.find(needle);
            }
            l.match_indices(needle)
                .map(|(i, _)| i)
                .find(|&i| !l[..i].ends_with(word))
        };
        let (mut line, mut column, mut all) = (0, 1, true);
        let lines: Vec<&str> = self.text.lines().collect();
        let mut from = 0;
        for needle in path {
            let needle = needle.as_ref();
            match lines
                .iter()
                .skip(from)
                .enumerate()
                .find_map(|(i, l)| find(l, needle).map(|c| (i, c)))
            {
                Some((i, c)) => {
                    line = from + i + 1;
                    column = lines[from + i][..c].chars().count() + 1;
                    from += i + 1;
                }
                None => all = false,
            }
        }
        (line, column, all)
    }

    /// `scope` and the mapping key `key` after it, spelt as found: plain,
    /// double- or single-quoted; `scope` alone when it is not found.
    fn key_path(&self, scope: &[&str], key: &str) -> Vec<String> {
        let mut scope: Vec<String> = scope.iter().map(|s| s.to_string()).collect();
        let found = [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")]
            .into_iter()
            .find(|k| self.locate(&[&scope[..], std::slice::from_ref(k)].concat()).2);
        scope.extend(found);
        scope
    }

    /// An error at the first `{{var}}` (or `{{ var }}`) after `scope`, or
    /// at `scope` when neither is there.
    fn err_at_use(&self, scope: &[&str], var: &str, message: String) -> ScenarioError {
        let spellings = [format!("{{{{{var}"), format!("{{{{ {var}")];
        let found = spellings
            .iter()
            .map(|needle| [scope, &[needle.as_str()]].concat())
            .filter(|path| self.locate(path).2)
            .min_by_key(|path| self.locate(path).0);
        match found {
            Some(path) => self.err(&path, message),
            None => self.err(scope, message),
        }
    }

    /// Compiles a template; an error points at the text when it is found
    /// after `path` as written, else at `path`.
    fn template(&self, path: &[&str], text: &str) -> Result<Template, ScenarioError> {
        Template::compile(text).map_err(|e| {
            let first_line = text.lines().next().unwrap_or_default();
            self.err_first(&[&[path, &[first_line]].concat(), path], e.to_string())
        })
    }

    /// A header as written at `path`: a token name; no Content-Length or
    /// Transfer-Encoding (throng frames the rendered body itself, so a
    /// length written in the file could contradict it); no control
    /// character in the value as written (a rendered value is checked
    /// again when the request is sent).
    fn header(&self, path: &[&str], name: &str, value: &str) -> Result<(String, Template), ScenarioError> {
        let at_name = format!("{name}:");
        let here = [path, &[at_name.as_str()]].concat();
        let err = |m: String| self.err_first(&[&here[..], path], m);
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(err(format!(
                "header name '{}' has characters a header name cannot have; use letters, digits and -",
                name.escape_debug()
            )));
        }
        if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(err(format!(
                "{name}: throng computes Content-Length from each request's rendered body (and never chunks \
                 request bodies); remove this header"
            )));
        }
        if let Some(c) = value.chars().find(|&c| throng_plan::is_forbidden_in_value(c)) {
            return Err(err(format!(
                "the value of header {name} has the control character {}, which a header cannot carry",
                c.escape_debug()
            )));
        }
        Ok((name.to_string(), self.template(&here, value)?))
    }

    fn statuses(&self, path: &[&str], raw: &[RawStatus]) -> Result<StatusSet, ScenarioError> {
        if raw.is_empty() {
            return Err(self.err(
                path,
                "expect: is empty, so every response would count as failed; list the statuses counted ok, e.g. [200] or [2xx]",
            ));
        }
        let text: Vec<String> = raw
            .iter()
            .map(|s| match s {
                RawStatus::Code(c) => c.to_string(),
                RawStatus::Text(t) => t.clone(),
            })
            .collect();
        StatusSet::parse(&text.join(",")).map_err(|e| self.err(path, format!("expect: {e}")))
    }

    /// An error (its message to fill) at a `file:line:col` made by
    /// [`Self::request`].
    fn err_at(&self, at: &str) -> ScenarioError {
        let mut parts = at.rsplitn(3, ':');
        let column = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            message: String::new(),
        }
    }

    /// A `redirects:` count: at most [`throng_plan::MAX_REDIRECTS`].
    fn redirects(&self, path: &[&str], n: u32) -> Result<u32, ScenarioError> {
        if n > throng_plan::MAX_REDIRECTS {
            return Err(self.err(
                path,
                format!(
                    "redirects: {n} is over the limit of {}; give 0 (do not follow) to {}",
                    throng_plan::MAX_REDIRECTS,
                    throng_plan::MAX_REDIRECTS
                ),
            ));
        }
        Ok(n)
    }

    /// Validates the raw file into a plan, one step after another: the
    /// target and defaults, the data file, each scenario, TLS, the
    /// variables each scenario uses, the thresholds.
    pub(super) fn plan(
        &self,
        raw: RawFile,
        read: &dyn Fn(&str) -> Result<String, String>,
        given: &TargetInputs,
    ) -> Result<ScenarioPlan, ScenarioError> {
        let target = self.target_of(&["target:"], raw.target, None, given)?;
        let defaults = self.defaults(&raw.defaults)?;
        let data = self.data(raw.data, read)?;
        let metrics = self.custom_metrics(raw.metrics)?;
        self.metrics.replace(metrics.clone());
        let file_proto = match raw.proto {
            Some(p) => Some(self.proto(&["proto:"], p, read)?),
            None => None,
        };
        let mut scenarios = self.scenarios(raw.scenarios, file_proto.clone(), read, &defaults, &target, given)?;
        let mut setup = self.once("setup", raw.setup, file_proto.clone(), &defaults, &target)?;
        let mut teardown = self.once("teardown", raw.teardown, file_proto, &defaults, &target)?;
        // TLS settings serve every https:// target of the file.
        let any_https = target.https
            || scenarios.iter().any(|s| s.target.as_ref().is_some_and(|t| t.https))
            || scenarios
                .iter()
                .chain(&setup)
                .chain(&teardown)
                .any(|s| mqtts(&s.flow).iter().any(|m| m.tls));
        let tls = self.tls(any_https, raw.tls)?;
        self.resolve_reflected(&mut scenarios, &target, tls.as_ref())?;
        for once in [&mut setup, &mut teardown].into_iter().flatten() {
            self.resolve_reflected(std::slice::from_mut(once), &target, tls.as_ref())?;
        }
        self.quic_fits_tls(&target, &scenarios, tls.as_ref())?;
        {
            let keys: Vec<String> = scenarios.iter().map(|s| format!("{}:", s.name)).collect();
            let mut flows: Vec<(&str, &mut Vec<Step>)> = Vec::new();
            for (s, k) in scenarios.iter_mut().zip(&keys) {
                flows.push((k, &mut s.flow));
            }
            for (once, k) in [(&mut setup, "setup:"), (&mut teardown, "teardown:")] {
                if let Some(s) = once.as_mut() {
                    flows.push((k, &mut s.flow));
                }
            }
            self.mqtt_files(flows, read)?;
        }
        // Variables: data columns, and captures of the steps before, in the
        // order an iteration runs them (captures are cleared when it starts).
        let columns: BTreeSet<String> = data.iter().flat_map(|d| d.columns.iter().cloned()).collect();
        for s in &scenarios {
            let mut defined = columns.clone();
            self.variables_in_order(s, &defaults, &mut defined)?;
        }
        for (s, root) in [(&setup, "setup:"), (&teardown, "teardown:")] {
            if let Some(s) = s {
                self.root.set(root);
                let checked = self.variables_in_order(s, &defaults, &mut columns.clone());
                self.root.set("scenarios:");
                checked?;
            }
        }
        self.setup_reads(setup.as_ref(), scenarios.iter().chain(&teardown), &defaults)?;
        let thresholds = self.thresholds(
            raw.thresholds,
            &scenarios,
            setup.is_some(),
            teardown.is_some(),
            &metrics,
        )?;
        ScenarioPlan {
            file: self.file.to_string(),
            target,
            tls,
            defaults,
            data,
            scenarios,
            setup,
            teardown,
            metrics,
            thresholds,
            scale: 1.0,
            secret_headers: Vec::new(),
            segment: None,
            trace: None,
        }
        .with_secret_headers(&[])
        .map_err(|e| self.err(&["defaults:"], e.to_string()))
    }

    /// `defaults:`: the headers, timeout, body limit, redirects and
    /// statuses every request starts from.
    fn defaults(&self, raw: &RawDefaults) -> Result<Defaults, ScenarioError> {
        Ok(Defaults {
            headers: raw
                .headers
                .iter()
                .map(|(k, v)| self.header(&["defaults:", "headers:"], k, v))
                .collect::<Result<_, ScenarioError>>()?,
            timeout: raw.timeout.map_or(Duration::from_secs(10), |d| d.0),
            max_body: raw.max_body.map_or(DEFAULT_MAX_BODY, |m| m.0),
            redirects: match raw.redirects {
                Some(n) => self.redirects(&["defaults:", &format!("redirects: {n}")], n)?,
                None => super::DEFAULT_REDIRECTS,
            },
            expect: match &raw.expect {
                Some(e) => self.statuses(&["defaults:", "expect:"], e)?,
                None => StatusSet::default(),
            },
        })
    }

    /// `data:`: the CSV file read (through `read`) and parsed, none of its
    /// columns hidden by a built-in.
    fn data(
        &self,
        raw: Option<RawData>,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<Option<DataSpec>, ScenarioError> {
        let Some(d) = raw else {
            return Ok(None);
        };
        let (file, cursor) = match d {
            RawData::File(f) => (f, Cursor::default()),
            RawData::Full(RawDataFull { file, cursor }) => (file, cursor.unwrap_or_default()),
        };
        let text = read(&file).map_err(|e| self.err(&["data:"], format!("cannot read '{file}': {e}")))?;
        let (columns, rows) = crate::csv::parse(&text).map_err(|e| self.err(&["data:"], format!("'{file}': {e}")))?;
        if let Some(c) = columns.iter().find(|c| RESERVED.contains(&c.as_str())) {
            return Err(self.err(
                &["data:"],
                format!("'{file}': the column '{c}' is hidden by the built-in {{{{{c}}}}}; rename the column"),
            ));
        }
        Ok(Some(DataSpec {
            file,
            columns,
            cursor,
            row_count: rows.len(),
            rows,
        }))
    }

    /// `scenarios:`, at least one, each with the `proto:` its `grpc:` steps
    /// call (its own, else the file's).
    fn scenarios(
        &self,
        raw: BTreeMap<String, RawScenario>,
        file_proto: Option<Proto>,
        read: &dyn Fn(&str) -> Result<String, String>,
        defaults: &Defaults,
        target: &BaseUrl,
        given: &TargetInputs,
    ) -> Result<Vec<Scenario>, ScenarioError> {
        if raw.is_empty() {
            return Err(self.err(&["scenarios:"], "name at least one scenario"));
        }
        let mut scenarios = Vec::new();
        for (name, mut s) in raw {
            if name == "setup" || name == "teardown" {
                return Err(self.err(
                    &["scenarios:", &format!("{name}:")],
                    format!(
                        "a scenario cannot be named '{name}': that is the tag of the file's {name}: flow; rename \
                         the scenario, or move its steps to a top-level {name}: list to run them once"
                    ),
                ));
            }
            let own = match s.proto.take() {
                Some(p) => Some(self.proto(&["scenarios:", &format!("{name}:"), "proto:"], p, read)?),
                None => None,
            };
            self.proto.replace(own.or_else(|| file_proto.clone()));
            scenarios.push(self.scenario(&name, s, defaults, target, given)?);
            if let Some(sc) = scenarios.last() {
                self.grpc_over_http2(sc, target)?;
            }
        }
        Ok(scenarios)
    }

    /// `setup:` or `teardown:` (`name`): a flow run once by a VU of its
    /// own, checked as a scenario's flow (errors point under its key) and
    /// kept as a scenario of that name with one iteration, its time limit
    /// its `max_duration`.
    fn once(
        &self,
        name: &'static str,
        raw: Option<Vec<RawStep>>,
        proto: Option<Proto>,
        defaults: &Defaults,
        target: &BaseUrl,
    ) -> Result<Option<Scenario>, ScenarioError> {
        let Some(steps) = raw else {
            return Ok(None);
        };
        let root = if name == "setup" { "setup:" } else { "teardown:" };
        self.root.set(root);
        self.proto.replace(proto);
        let checked = self.once_flow(root, steps, defaults, target);
        self.root.set("scenarios:");
        let flow = checked?;
        let limit = if name == "setup" {
            super::types::SETUP_LIMIT
        } else {
            super::types::TEARDOWN_LIMIT
        };
        let s = Scenario {
            name: name.to_string(),
            executor: Executor::PerVuIterations {
                vus: 1,
                iterations: 1,
                max_duration: limit,
            },
            start_time: Duration::ZERO,
            graceful_stop: Duration::ZERO,
            target: None,
            cookies: Cookies::default(),
            flow,
        };
        self.grpc_over_http2(&s, target)?;
        Ok(Some(s))
    }

    fn once_flow(
        &self,
        root: &str,
        steps: Vec<RawStep>,
        defaults: &Defaults,
        target: &BaseUrl,
    ) -> Result<Vec<Step>, ScenarioError> {
        let flow = self.flow(root, steps, defaults)?;
        self.websocket_origins(root, &flow, target)?;
        self.request_protocols_fit(&flow, target)?;
        if !contains_request(&flow) {
            return Err(self.err(
                &[root],
                format!("{root} makes no request; give it at least one request, or remove it"),
            ));
        }
        Ok(flow)
    }

    /// Every `{{setup.NAME}}` of the scenarios and the teardown (`flows`)
    /// and of `defaults.headers` names a capture of the `setup:` flow, and
    /// the setup flow itself reads its captures as plain `{{NAME}}`.
    fn setup_reads<'s>(
        &self,
        setup: Option<&Scenario>,
        flows: impl Iterator<Item = &'s Scenario>,
        defaults: &Defaults,
    ) -> Result<(), ScenarioError> {
        let captured: Vec<&str> = setup.map(|s| super::types::capture_names(&s.flow)).unwrap_or_default();
        let known = || match captured.is_empty() {
            true => "the file's setup: flow captures nothing".to_string(),
            false => format!("the setup: flow captures {}", captured.join(", ")),
        };
        fn adds<'a>(flow: &'a [Step], out: &mut Vec<&'a Template>) {
            for step in flow {
                match step {
                    Step::Add(a) => {
                        if let AddValue::Template(t) = &a.value {
                            out.push(t);
                        }
                    }
                    nested => nested.nested().into_iter().for_each(|f| adds(f, out)),
                }
            }
        }
        fn in_flow(s: &Scenario) -> Vec<&Template> {
            let mut out: Vec<&Template> = super::types::requests(&s.flow)
                .into_iter()
                .flat_map(super::types::templates)
                .collect();
            out.extend(
                super::types::websockets(&s.flow)
                    .into_iter()
                    .flat_map(super::types::ws_templates),
            );
            adds(&s.flow, &mut out);
            out
        }
        if let Some(s) = setup
            && let Some(v) = in_flow(s).into_iter().flat_map(Template::setup_names).next()
        {
            return Err(self.err_at_use(
                &["setup:"],
                &format!("setup.{v}"),
                format!(
                    "{{{{setup.{v}}}}} is used inside the setup: flow, which runs before its captures are shared; \
                     within setup: write {{{{{v}}}}} (a capture of an earlier setup step)"
                ),
            ));
        }
        for (name, t) in &defaults.headers {
            if let Some(v) = t.setup_names().find(|v| !captured.contains(v)) {
                return Err(self.err_at_use(
                    &["defaults:"],
                    &format!("setup.{v}"),
                    format!(
                        "{{{{setup.{v}}}}} in defaults.headers.{name} is not captured by setup: {}",
                        known()
                    ),
                ));
            }
        }
        for s in flows {
            // No scenario is named teardown (refused above).
            let root = if s.name == "teardown" {
                vec!["teardown:".to_string()]
            } else {
                vec!["scenarios:".to_string(), format!("{}:", s.name)]
            };
            let scope: Vec<&str> = root.iter().map(String::as_str).collect();
            for t in in_flow(s) {
                if let Some(v) = t.setup_names().find(|v| !captured.contains(v)) {
                    return Err(self.err_at_use(
                        &scope,
                        &format!("setup.{v}"),
                        format!(
                            "{{{{setup.{v}}}}} is not captured by setup ({}); capture {v} in a step of the \
                             top-level setup: flow",
                            known()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `metrics:`: names (letters, digits and `_`, not a built-in metric's
    /// name), each once, at most [`MAX_CUSTOM_METRICS`], each a counter,
    /// trend, rate or gauge.
    fn custom_metrics(&self, raw: Ordered<String>) -> Result<Vec<CustomMetric>, ScenarioError> {
        if raw.0.len() > MAX_CUSTOM_METRICS {
            return Err(self.err(
                &["metrics:"],
                format!(
                    "{} custom metrics: at most {MAX_CUSTOM_METRICS} may be declared (each VU's worker keeps every \
                     one); merge some",
                    raw.0.len()
                ),
            ));
        }
        let mut out: Vec<CustomMetric> = Vec::new();
        for (name, kind) in raw.0 {
            let at = self.key_path(&["metrics:"], &name);
            if name.is_empty() || name.len() > MAX_METRIC_NAME || !is_identifier(&name) {
                return Err(self.err(
                    &at,
                    format!(
                        "'{}' is not a metric name: use letters, digits and _, not starting with a digit, at most \
                         {MAX_METRIC_NAME} characters",
                        name.escape_debug()
                    ),
                ));
            }
            if crate::threshold::is_builtin_metric(&name) {
                return Err(self.err(
                    &at,
                    format!("'{name}' is a built-in metric's name; give the custom metric another name"),
                ));
            }
            if out.iter().any(|m| m.name == name) {
                return Err(self.err(&at, format!("the metric '{name}' is declared twice")));
            }
            let kind = match kind.as_str() {
                "counter" => throng_metrics::CustomKind::Counter,
                "trend" => throng_metrics::CustomKind::Trend,
                "rate" => throng_metrics::CustomKind::Rate,
                "gauge" => throng_metrics::CustomKind::Gauge,
                other => {
                    return Err(self.err(
                        &at,
                        format!("{name}: '{other}' is not a kind of metric; write counter, trend, rate or gauge"),
                    ));
                }
            };
            out.push(CustomMetric { name, kind });
        }
        Ok(out)
    }

    /// An `add:` step: a declared metric, and a number, true/false or a
    /// template.
    fn add(&self, key: &str, a: RawAdd) -> Result<Add, ScenarioError> {
        let at = format!("metric: {}", a.metric);
        let here = [self.root.get(), key, "add:", at.as_str()];
        let Some(m) = self.metrics.borrow().iter().find(|m| m.name == a.metric).cloned() else {
            let known: Vec<String> = self.metrics.borrow().iter().map(|m| m.name.clone()).collect();
            return Err(self.err_first(
                &[&here, &here[..3]],
                format!(
                    "add: the metric '{}' is not declared; declare it under the top-level metrics: (e.g. metrics: \
                     {{ {}: counter }}){}",
                    a.metric,
                    a.metric,
                    match known.is_empty() {
                        true => String::new(),
                        false => format!("; declared: {}", known.join(", ")),
                    }
                ),
            ));
        };
        let value = match a.value {
            serde_yaml_ng::Value::Number(n) => AddValue::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_yaml_ng::Value::Bool(b) => AddValue::Number(f64::from(u8::from(b))),
            serde_yaml_ng::Value::String(t) => {
                let t = self.template(&here, &t)?;
                match t.is_literal().then(|| AddValue::read(t.source())).flatten() {
                    Some(v) => AddValue::Number(v),
                    None if t.is_literal() => {
                        return Err(self.err_first(
                            &[&here, &here[..3]],
                            format!(
                                "add: the value '{}' is not a number; write a number, true or false, or a template \
                                 that renders one",
                                t.source()
                            ),
                        ));
                    }
                    None => AddValue::Template(t),
                }
            }
            _ => {
                return Err(self.err_first(
                    &[&here, &here[..3]],
                    "add: value is a number, true or false, or a template such as \"{{count}}\"",
                ));
            }
        };
        if let AddValue::Number(v) = value
            && (!v.is_finite() || m.kind == throng_metrics::CustomKind::Trend && v < 0.0)
        {
            return Err(self.err_first(
                &[&here, &here[..3]],
                format!("add: {v} cannot be added to {}: a trend's values are 0 or more", m.name),
            ));
        }
        if a.tags.len() > MAX_ADD_TAGS {
            return Err(self.err_first(
                &[&here, &here[..3]],
                format!(
                    "add: {} tags; an add: step carries at most {MAX_ADD_TAGS}",
                    a.tags.len()
                ),
            ));
        }
        let tag_text = |t: &str| {
            !t.is_empty() && t.len() <= MAX_METRIC_NAME && t.chars().all(|c| c.is_alphanumeric() || "_-./#".contains(c))
        };
        if let Some((k, v)) = a.tags.iter().find(|(k, v)| !tag_text(k) || !tag_text(v)) {
            return Err(self.err_first(
                &[&[&here[..], &["tags:"]].concat(), &here, &here[..3]],
                format!(
                    "add: the tag '{}: {}' is not a tag: names and values are letters, digits, _ - . / or #, at \
                     most {MAX_METRIC_NAME} characters",
                    k.escape_debug(),
                    v.escape_debug()
                ),
            ));
        }
        Ok(Add {
            metric: m.name,
            kind: m.kind,
            value,
            tags: a.tags.into_iter().collect(),
        })
    }

    /// `tls:`, for a file with an https:// target only.
    fn tls(&self, any_https: bool, raw: Option<RawTls>) -> Result<Option<TlsSettings>, ScenarioError> {
        match (any_https, raw) {
            (true, t) => {
                let t = t.unwrap_or_default();
                let groups = t
                    .groups
                    .iter()
                    .map(|g| TlsGroup::parse(g).map_err(|e| self.err(&["tls:", "groups:"], format!("tls.groups: {e}"))))
                    .collect::<Result<_, _>>()?;
                let version = t
                    .version
                    .as_deref()
                    .map(|v| {
                        TlsVersion::parse(v).map_err(|e| self.err(&["tls:", "version:"], format!("tls.version: {e}")))
                    })
                    .transpose()?;
                Ok(Some(TlsSettings {
                    insecure: t.insecure,
                    cacert: t.cacert,
                    cert: t.cert,
                    key: t.key,
                    resume: t.resume,
                    groups,
                    version,
                    server_name: t.sni,
                }))
            }
            (false, Some(_)) => Err(self.err(
                &["tls:"],
                "tls: applies to https:// targets and mqtts:// or wss:// brokers",
            )),
            (false, None) => Ok(None),
        }
    }

    /// Refuses `tls.version: 1.2` in a file with an `http: 3` target or
    /// request: QUIC needs TLS 1.3.
    fn quic_fits_tls(
        &self,
        target: &BaseUrl,
        scenarios: &[Scenario],
        tls: Option<&TlsSettings>,
    ) -> Result<(), ScenarioError> {
        let any_h3 = std::iter::once(target)
            .chain(scenarios.iter().filter_map(|s| s.target.as_ref()))
            .any(|t| t.http == HttpVersion::Http3)
            || scenarios
                .iter()
                .any(|s| s.request_protocols().iter().any(|(h, _)| *h == HttpVersion::Http3));
        if any_h3 && tls.is_some_and(|t| t.version == Some(TlsVersion::Tls12)) {
            return Err(self.err(
                &["tls:", "version:"],
                "tls.version 1.2 cannot carry an http: 3 target: QUIC needs TLS 1.3; write version: \"1.3\" or leave it out",
            ));
        }
        Ok(())
    }
}
