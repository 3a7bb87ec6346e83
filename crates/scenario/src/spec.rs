//! The scenario file: YAML as written (raw), validated into a
//! [`ScenarioPlan`]. Errors carry file, line and column.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use throng_plan::{StatusSet, TlsSettings};

use crate::checks::{Capture, CaptureFrom, Check, CheckKind};
use crate::template::{Template, is_identifier};
use crate::threshold::{Threshold, parse_unit_duration};

/// Why a scenario file cannot run.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// Line, from 1 (0 when unknown).
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

// ---------------------------------------------------------------- raw ----

/// A duration as people type it, checked while the YAML is read (so an
/// error points at the value). The unit is required: `30` reads as seconds
/// to some and as milliseconds (k6's threshold bounds) to others.
#[derive(Clone, Copy, Debug)]
struct Dur(Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_yaml_ng::Value::deserialize(d)?;
        let text = match v {
            serde_yaml_ng::Value::String(s) => s,
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            _ => return Err(serde::de::Error::custom("expected a duration such as 500ms, 30s or 2m")),
        };
        parse_unit_duration(&text).map(Dur).map_err(serde::de::Error::custom)
    }
}

/// A response body size limit as people type it (`max_body: 4MiB`),
/// checked while the YAML is read.
#[derive(Debug, Clone, Copy)]
struct Size(u64);

/// Default `max_body`: the bytes of a response body that checks and
/// captures see.
pub const DEFAULT_MAX_BODY: u64 = 1 << 20;
/// Largest `max_body`: each VU holds up to this much of a response.
pub const MAX_MAX_BODY: u64 = 64 << 20;

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_yaml_ng::Value::deserialize(d)?;
        let text = match v {
            serde_yaml_ng::Value::String(s) => s,
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            _ => {
                return Err(serde::de::Error::custom(
                    "expected a size such as 1MiB, 256KiB or 65536",
                ));
            }
        };
        parse_size(&text).map(Size).map_err(serde::de::Error::custom)
    }
}

/// `65536`, `64KiB`, `4MiB`, `1MB` (powers of 1000 for kB/MB, of 1024 for
/// KiB/MiB), between 1 byte and [`MAX_MAX_BODY`].
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let unit_bytes: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" | "KB" => 1000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        _ => {
            return Err(format!(
                "'{t}' is not a size; write bytes or a number with KiB, MiB, kB or MB, e.g. 4MiB"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{t}' is not a size; write bytes or a number with KiB, MiB, kB or MB, e.g. 4MiB"))?;
    match n.checked_mul(unit_bytes) {
        Some(b) if (1..=MAX_MAX_BODY).contains(&b) => Ok(b),
        _ => Err(format!(
            "'{t}' is out of range: max_body is between 1 byte and 64MiB (each VU may hold that much)"
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    target: String,
    #[serde(default)]
    tls: Option<RawTls>,
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    data: Option<RawData>,
    scenarios: BTreeMap<String, RawScenario>,
    #[serde(default)]
    thresholds: Ordered<Vec<RawThreshold>>,
}

/// A mapping kept in the file's order (verdict tables follow the file),
/// duplicate keys included: the validator reports them at the second.
#[derive(Debug)]
struct Ordered<V>(Vec<(String, V)>);

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visit<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Ordered<V>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cacert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    resume: bool,
    #[serde(default)]
    groups: Vec<String>,
    version: Option<String>,
    sni: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout: Option<Dur>,
    expect: Option<Vec<RawStatus>>,
    max_body: Option<Size>,
}

/// `data: FILE` or `data: { file, cursor }`.
#[derive(Debug)]
enum RawData {
    File(String),
    Full(RawDataFull),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataFull {
    file: String,
    cursor: Option<Cursor>,
}

impl ScalarOrMap for RawData {
    const EXPECTING: &'static str = "a CSV file name, or a mapping with file: and cursor:";
    type Map = RawDataFull;
    fn scalar<E: serde::de::Error>(v: serde_yaml_ng::Value) -> Result<Self, E> {
        match v {
            serde_yaml_ng::Value::String(s) => Ok(RawData::File(s)),
            _ => Err(E::custom(format!("expected {}", Self::EXPECTING))),
        }
    }
    fn map(m: RawDataFull) -> Self {
        RawData::Full(m)
    }
}

/// A value written either as a scalar or as a mapping of named fields.
///
/// serde's untagged enums would do, but they try each form in turn and,
/// when none fits, report "did not match any variant": a misspelt key in
/// the mapping form is either swallowed or never named. Here the form is
/// chosen by the YAML node's kind and the mapping is read by a struct that
/// denies unknown fields, so the error names the key, lists the accepted
/// ones, and points at the key's line.
trait ScalarOrMap: Sized {
    /// What the value is, for errors.
    const EXPECTING: &'static str;
    /// The mapping form.
    type Map: for<'de> Deserialize<'de>;
    /// The scalar form (a string, number or boolean).
    fn scalar<E: serde::de::Error>(v: serde_yaml_ng::Value) -> Result<Self, E>;
    /// The mapping form, read.
    fn map(m: Self::Map) -> Self;
}

struct ScalarOrMapVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: ScalarOrMap> serde::de::Visitor<'de> for ScalarOrMapVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        T::scalar(serde_yaml_ng::Value::String(v.to_string()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        T::scalar(serde_yaml_ng::Value::Number(v.into()))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        T::scalar(serde_yaml_ng::Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<T, E> {
        T::scalar(serde_yaml_ng::Value::Number(v.into()))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<T, E> {
        T::scalar(serde_yaml_ng::Value::Bool(v))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::Map::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(T::map)
    }
}

macro_rules! deserialize_scalar_or_map {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(ScalarOrMapVisitor(std::marker::PhantomData))
            }
        }
    )*};
}

deserialize_scalar_or_map!(RawData, RawThink, RawThreshold);

/// How VUs walk the data file's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cursor {
    /// Each VU has its own cursor, starting at its own row (VU n at row n).
    #[default]
    PerVu,
    /// One cursor shared by every VU of the worker: each iteration takes
    /// the next row.
    Shared,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum ExecutorName {
    ConstantVus,
    RampingVus,
    PerVuIterations,
    SharedIterations,
    ConstantArrivalRate,
    RampingArrivalRate,
}

impl ExecutorName {
    /// As written in the file.
    fn name(self) -> &'static str {
        match self {
            ExecutorName::ConstantVus => "constant-vus",
            ExecutorName::RampingVus => "ramping-vus",
            ExecutorName::PerVuIterations => "per-vu-iterations",
            ExecutorName::SharedIterations => "shared-iterations",
            ExecutorName::ConstantArrivalRate => "constant-arrival-rate",
            ExecutorName::RampingArrivalRate => "ramping-arrival-rate",
        }
    }

    /// Its own fields, besides those every executor takes (start_time,
    /// graceful_stop, flow).
    fn fields(self) -> &'static [&'static str] {
        match self {
            ExecutorName::ConstantVus => &["vus", "duration"],
            ExecutorName::RampingVus => &["start_vus", "stages", "graceful_ramp_down"],
            ExecutorName::PerVuIterations | ExecutorName::SharedIterations => &["vus", "iterations", "max_duration"],
            ExecutorName::ConstantArrivalRate => &["rate", "time_unit", "duration", "pre_allocated_vus", "max_vus"],
            ExecutorName::RampingArrivalRate => &["start_rate", "time_unit", "stages", "pre_allocated_vus", "max_vus"],
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    executor: ExecutorName,
    vus: Option<u64>,
    duration: Option<Dur>,
    start_vus: Option<u64>,
    stages: Option<Vec<RawStage>>,
    graceful_ramp_down: Option<Dur>,
    iterations: Option<u64>,
    max_duration: Option<Dur>,
    rate: Option<f64>,
    start_rate: Option<f64>,
    time_unit: Option<Dur>,
    pre_allocated_vus: Option<u64>,
    max_vus: Option<u64>,
    start_time: Option<Dur>,
    graceful_stop: Option<Dur>,
    flow: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    duration: Dur,
    target: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    request: Option<RawRequest>,
    think: Option<RawThink>,
    group: Option<RawGroup>,
}

/// `think: 2s` or `think: { min, max }`.
#[derive(Debug)]
enum RawThink {
    Fixed(Dur),
    Range(RawThinkRange),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThinkRange {
    min: Dur,
    max: Dur,
}

impl ScalarOrMap for RawThink {
    const EXPECTING: &'static str = "a duration such as 2s, or a mapping with min: and max:";
    type Map = RawThinkRange;
    fn scalar<E: serde::de::Error>(v: serde_yaml_ng::Value) -> Result<Self, E> {
        Dur::deserialize(v).map(RawThink::Fixed).map_err(E::custom)
    }
    fn map(m: RawThinkRange) -> Self {
        RawThink::Range(m)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    flow: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawStatus {
    Code(u16),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    name: Option<String>,
    method: Option<String>,
    path: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    query: BTreeMap<String, serde_yaml_ng::Value>,
    json: Option<serde_yaml_ng::Value>,
    form: Option<BTreeMap<String, serde_yaml_ng::Value>>,
    body: Option<String>,
    expect: Option<Vec<RawStatus>>,
    max_body: Option<Size>,
    #[serde(default)]
    capture: BTreeMap<String, RawCapture>,
    #[serde(default)]
    check: BTreeMap<String, RawCheck>,
    timeout: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapture {
    json: Option<String>,
    header: Option<String>,
    regex: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    status: Option<Vec<u16>>,
    body_contains: Option<String>,
    json: Option<String>,
    equals: Option<serde_yaml_ng::Value>,
    exists: Option<bool>,
    header: Option<String>,
    contains: Option<String>,
    duration_under: Option<Dur>,
}

/// `- EXPRESSION` or `- { threshold, abort_on_fail, delay }`.
#[derive(Debug)]
enum RawThreshold {
    Text(String),
    Full(RawThresholdFull),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThresholdFull {
    threshold: String,
    #[serde(default)]
    abort_on_fail: bool,
    delay: Option<Dur>,
}

impl ScalarOrMap for RawThreshold {
    const EXPECTING: &'static str =
        "an expression such as p(95) < 500ms, or a mapping with threshold:, abort_on_fail: and delay:";
    type Map = RawThresholdFull;
    fn scalar<E: serde::de::Error>(v: serde_yaml_ng::Value) -> Result<Self, E> {
        match v {
            serde_yaml_ng::Value::String(s) => Ok(RawThreshold::Text(s)),
            _ => Err(E::custom(format!("expected {}", Self::EXPECTING))),
        }
    }
    fn map(m: RawThresholdFull) -> Self {
        RawThreshold::Full(m)
    }
}

// ----------------------------------------------------------- validated ----

/// Where requests go: scheme, host, port and a base path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseUrl {
    /// As written.
    pub url: String,
    /// `http` or `https`.
    pub https: bool,
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Prefix of every request's path (no trailing slash).
    pub base_path: String,
}

/// Settings every request starts from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Defaults {
    /// Headers on every request (a request's own win).
    pub headers: Vec<(String, Template)>,
    /// Limit on connect and each response.
    #[serde(with = "throng_plan::serde_duration")]
    pub timeout: Duration,
    /// Statuses counted ok.
    pub expect: StatusSet,
    /// Bytes of a response body that checks and captures see.
    #[serde(default = "default_max_body")]
    pub max_body: u64,
}

fn default_max_body() -> u64 {
    DEFAULT_MAX_BODY
}

/// A CSV data file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataSpec {
    /// As written.
    pub file: String,
    /// Column names (available as `{{name}}`).
    pub columns: Vec<String>,
    /// How VUs walk the rows.
    pub cursor: Cursor,
    /// Rows (not stored in results).
    #[serde(skip)]
    pub rows: Vec<Vec<String>>,
    /// How many rows.
    pub row_count: usize,
}

/// A ramp stage: reach `target` linearly over `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// How long.
    #[serde(with = "throng_plan::serde_duration")]
    pub duration: Duration,
    /// VUs (ramping-vus) or iterations per time unit (ramping-arrival-rate).
    pub target: f64,
}

/// How a scenario starts iterations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "executor", rename_all = "kebab-case")]
pub enum Executor {
    /// `vus` VUs loop the flow for `duration`.
    ConstantVus {
        /// VUs.
        vus: u64,
        /// How long.
        #[serde(with = "throng_plan::serde_duration")]
        duration: Duration,
    },
    /// VUs follow the stages linearly from `start_vus`.
    RampingVus {
        /// VUs at the start.
        start_vus: u64,
        /// The ramp.
        stages: Vec<Stage>,
        /// How long VUs above the target may finish their iteration.
        #[serde(with = "throng_plan::serde_duration")]
        graceful_ramp_down: Duration,
    },
    /// Each of `vus` VUs runs the flow `iterations` times.
    PerVuIterations {
        /// VUs.
        vus: u64,
        /// Iterations per VU.
        iterations: u64,
        /// Give up after this long.
        #[serde(with = "throng_plan::serde_duration")]
        max_duration: Duration,
    },
    /// `vus` VUs share `iterations` iterations.
    SharedIterations {
        /// VUs.
        vus: u64,
        /// Iterations in all.
        iterations: u64,
        /// Give up after this long.
        #[serde(with = "throng_plan::serde_duration")]
        max_duration: Duration,
    },
    /// `rate` iterations start per `time_unit`, whatever the responses do.
    ConstantArrivalRate {
        /// Iterations per time unit.
        rate: f64,
        /// The time unit.
        #[serde(with = "throng_plan::serde_duration")]
        time_unit: Duration,
        /// How long.
        #[serde(with = "throng_plan::serde_duration")]
        duration: Duration,
        /// VUs ready at the start.
        pre_allocated_vus: u64,
        /// VUs at most.
        max_vus: u64,
    },
    /// The arrival rate follows the stages linearly from `start_rate`.
    RampingArrivalRate {
        /// Iterations per time unit at the start.
        start_rate: f64,
        /// The time unit.
        #[serde(with = "throng_plan::serde_duration")]
        time_unit: Duration,
        /// The ramp (targets are rates).
        stages: Vec<Stage>,
        /// VUs ready at the start.
        pre_allocated_vus: u64,
        /// VUs at most.
        max_vus: u64,
    },
}

impl Executor {
    /// How long the executor schedules iterations (without graceful stops).
    pub fn length(&self) -> Duration {
        match self {
            Executor::ConstantVus { duration, .. } | Executor::ConstantArrivalRate { duration, .. } => *duration,
            Executor::RampingVus { stages, .. } | Executor::RampingArrivalRate { stages, .. } => {
                stages.iter().map(|s| s.duration).sum()
            }
            Executor::PerVuIterations { max_duration, .. } | Executor::SharedIterations { max_duration, .. } => {
                *max_duration
            }
        }
    }

    /// True for the arrival-rate (open-model) executors.
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            Executor::ConstantArrivalRate { .. } | Executor::RampingArrivalRate { .. }
        )
    }

    /// The stages, for those that have them.
    pub fn stages(&self) -> &[Stage] {
        match self {
            Executor::RampingVus { stages, .. } | Executor::RampingArrivalRate { stages, .. } => stages,
            _ => &[],
        }
    }
}

/// A pause.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Think {
    /// This long.
    Fixed(#[serde(with = "throng_plan::serde_duration")] Duration),
    /// Uniformly between the two.
    Range(
        #[serde(with = "throng_plan::serde_duration")] Duration,
        #[serde(with = "throng_plan::serde_duration")] Duration,
    ),
}

/// A JSON body with templates in its strings.
#[derive(Clone, Debug, PartialEq)]
pub enum JsonTemplate {
    /// A value without templates.
    Value(serde_json::Value),
    /// A string with templates.
    Text(Template),
    /// An array.
    Array(Vec<JsonTemplate>),
    /// An object.
    Object(Vec<(String, JsonTemplate)>),
}

/// A request body.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Body {
    /// None.
    #[default]
    None,
    /// JSON (`Content-Type: application/json`).
    Json(JsonTemplate),
    /// A form (`application/x-www-form-urlencoded`).
    Form(Vec<(String, Template)>),
    /// Raw text.
    Raw(Template),
}

/// One HTTP request of a flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Its `step` tag (default: `METHOD path`).
    pub name: String,
    /// Method.
    pub method: String,
    /// Path (appended to the base path).
    pub path: Template,
    /// Query parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<(String, Template)>,
    /// Headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, Template)>,
    /// Body.
    #[serde(skip)]
    pub body: Body,
    /// Statuses counted ok.
    pub expect: StatusSet,
    /// Values taken into variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub captures: Vec<Capture>,
    /// Named assertions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// Limit on the response.
    #[serde(with = "throng_plan::serde_duration")]
    pub timeout: Duration,
    /// Bytes of the response body its checks and captures see (the rest is
    /// read and counted, not kept).
    #[serde(default = "default_max_body")]
    pub max_body: u64,
}

/// One step of a flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// An HTTP request.
    Request(Box<Request>),
    /// A pause.
    Think(Think),
    /// A named sub-flow, timed as a whole.
    Group {
        /// Its `group` tag.
        name: String,
        /// Its steps.
        flow: Vec<Step>,
    },
}

/// A scenario: an executor and the flow of one iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Its `scenario` tag.
    pub name: String,
    /// How iterations start.
    #[serde(flatten)]
    pub executor: Executor,
    /// Offset from the run's start.
    #[serde(with = "throng_plan::serde_duration")]
    pub start_time: Duration,
    /// How long iterations in flight may finish after the executor's end.
    #[serde(with = "throng_plan::serde_duration")]
    pub graceful_stop: Duration,
    /// One iteration.
    pub flow: Vec<Step>,
}

impl Scenario {
    /// When the scenario's schedule ends (start time + executor length).
    pub fn end(&self) -> Duration {
        self.start_time + self.executor.length()
    }

    /// The stage a moment belongs to (1-based), for stage tags.
    pub fn stage_at(&self, since_start: Duration) -> Option<usize> {
        let mut t = self.start_time;
        for (i, s) in self.executor.stages().iter().enumerate() {
            t += s.duration;
            if since_start < t {
                return Some(i + 1);
            }
        }
        (!self.executor.stages().is_empty()).then_some(self.executor.stages().len())
    }
}

/// A validated scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioPlan {
    /// The file.
    pub file: String,
    /// Where requests go.
    pub target: BaseUrl,
    /// TLS settings (https targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
    /// Request defaults.
    pub defaults: Defaults,
    /// The data file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSpec>,
    /// The scenarios, run at the same time.
    pub scenarios: Vec<Scenario>,
    /// Pass/fail criteria.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Threshold>,
    /// Durations were multiplied by this (`--scale`).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub scale: f64,
    /// Names of the headers whose values are secret (lowercase): the
    /// always-sensitive ones the file sets and those marked
    /// `--secret-header`. Results hold [`ScenarioPlan::redacted`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_headers: Vec<String>,
    /// The execution segment this process runs (None: all of it). The
    /// scenarios keep the whole plan's numbers; the executors take the
    /// segment's share of VUs, iterations and arrivals (see
    /// [`crate::schedule`]). Recorded in the result, not here.
    #[serde(skip)]
    pub segment: Option<throng_plan::Segment>,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    (*v - 1.0).abs() < f64::EPSILON
}

impl ScenarioPlan {
    /// Parses `text` (from `file`); `read` reads a file named in it (the
    /// data file), relative to the scenario's directory.
    pub fn parse(
        text: &str,
        file: &str,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<ScenarioPlan, ScenarioError> {
        let text = throng_plan::input::strip_bom(text);
        throng_plan::input::check_yaml_nesting(text).map_err(|e| ScenarioError {
            file: file.to_string(),
            line: e.line,
            column: e.column,
            message: e.message,
        })?;
        let raw: RawFile = serde_yaml_ng::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            let message = e.to_string().split(" at line ").next().unwrap_or_default().to_string();
            let (line, column) = refine_location(text, line, column, &message);
            ScenarioError {
                file: file.to_string(),
                line,
                column,
                message: throng_plan::input::plain_types(&message),
            }
        })?;
        Validator { text, file }.plan(raw, read)
    }

    /// The schedule of every executor (durations, stages, `max_duration`,
    /// start times) multiplied by `factor`: the same shape, faster.
    ///
    /// `graceful_stop` and `graceful_ramp_down` stay as written: they are
    /// how long an iteration in flight may take to finish, and response
    /// times do not scale with the schedule.
    pub fn scaled(mut self, factor: f64) -> ScenarioPlan {
        let f = |d: &mut Duration| *d = d.mul_f64(factor);
        for s in &mut self.scenarios {
            f(&mut s.start_time);
            match &mut s.executor {
                Executor::ConstantVus { duration, .. } | Executor::ConstantArrivalRate { duration, .. } => f(duration),
                Executor::RampingVus { stages, .. } => {
                    stages.iter_mut().for_each(|st| f(&mut st.duration));
                }
                Executor::RampingArrivalRate { stages, .. } => stages.iter_mut().for_each(|st| f(&mut st.duration)),
                Executor::PerVuIterations { max_duration, .. } | Executor::SharedIterations { max_duration, .. } => {
                    f(max_duration)
                }
            }
        }
        self.scale *= factor;
        self
    }

    /// The plan as this process runs it: `segment`'s share of every
    /// scenario (VUs, iterations, arrivals), the rest of the sequence's
    /// segments running elsewhere.
    pub fn segmented(mut self, segment: &throng_plan::Segment) -> ScenarioPlan {
        self.segment = (!segment.is_whole()).then(|| segment.clone());
        self
    }

    /// This process's segment: the plan's, or the whole.
    pub fn segment(&self) -> throng_plan::Segment {
        self.segment.clone().unwrap_or_else(throng_plan::Segment::whole)
    }

    /// Every environment variable the file reads (`{{env.NAME}}`, in
    /// `defaults.headers` and in any request), sorted, each once: the CLI
    /// can refuse to start when one is unset instead of sending it empty.
    pub fn env_names(&self) -> Vec<String> {
        let requests = self.scenarios.iter().flat_map(|s| requests(&s.flow));
        let names: BTreeSet<&str> = self
            .defaults
            .headers
            .iter()
            .map(|(_, t)| t)
            .chain(requests.flat_map(templates))
            .flat_map(Template::env_names)
            .collect();
        names.into_iter().map(str::to_string).collect()
    }

    /// Every header name the file sets (defaults and requests).
    fn header_names(&self) -> Vec<&str> {
        let requests = self.scenarios.iter().flat_map(|s| requests(&s.flow));
        self.defaults
            .headers
            .iter()
            .map(|(n, _)| n.as_str())
            .chain(requests.flat_map(|r| r.headers.iter().map(|(n, _)| n.as_str())))
            .collect()
    }

    /// Marks more headers secret (`throng run --secret-header NAME`), besides
    /// Authorization, Proxy-Authorization, Cookie and Set-Cookie.
    pub fn with_secret_headers(mut self, marked: &[String]) -> Result<ScenarioPlan, throng_plan::PlanError> {
        let mut all = marked.to_vec();
        all.extend(self.secret_headers.iter().cloned());
        self.secret_headers = throng_plan::secret_names(&all, self.header_names().into_iter())?;
        Ok(self)
    }

    /// The plan as results and reports keep it: the values of secret
    /// headers read `<redacted>`.
    pub fn redacted(&self) -> ScenarioPlan {
        fn flow(steps: &mut [Step], secret: &[String], with: &Template) {
            for step in steps {
                match step {
                    Step::Request(r) => headers(&mut r.headers, secret, with),
                    Step::Group { flow: f, .. } => flow(f, secret, with),
                    Step::Think(_) => {}
                }
            }
        }
        fn headers(h: &mut [(String, Template)], secret: &[String], with: &Template) {
            for (name, value) in h {
                if throng_plan::is_secret(secret, name) {
                    *value = with.clone();
                }
            }
        }
        let mut plan = self.clone();
        let with = Template::literal(throng_plan::REDACTED);
        headers(&mut plan.defaults.headers, &self.secret_headers, &with);
        for s in &mut plan.scenarios {
            flow(&mut s.flow, &self.secret_headers, &with);
        }
        plan
    }

    /// Says which headers' values a result holds redacted, if any.
    pub fn redaction_note(&self) -> Option<String> {
        throng_plan::redaction_note(self.header_names().into_iter(), &self.secret_headers)
    }

    /// When the last scenario's schedule ends.
    pub fn end(&self) -> Duration {
        self.scenarios.iter().map(Scenario::end).max().unwrap_or_default()
    }
}

/// serde reports errors inside an executor (an internally tagged enum, read
/// whole before it is decoded) at the executor's first key. When the message
/// quotes the offending value, the first place that value appears at or after
/// the reported position is where the user has to look.
fn refine_location(text: &str, line: usize, column: usize, message: &str) -> (usize, usize) {
    let quoted = ['\'', '`', '"'].iter().find_map(|&q| {
        let start = message.find(q)? + 1;
        let len = message[start..].find(q)?;
        Some(&message[start..start + len]).filter(|v| !v.is_empty())
    });
    let Some(value) = quoted else {
        return (line, column);
    };
    let from = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>()
        + column.saturating_sub(1);
    let Some(found) = text.get(from..).and_then(|rest| rest.find(value)).map(|i| from + i) else {
        return (line, column);
    };
    let before = &text[..found];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

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

struct Validator<'a> {
    text: &'a str,
    file: &'a str,
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
            self.err_first(&[&[path, &[first_line]].concat(), path], e)
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

    fn plan(&self, raw: RawFile, read: &dyn Fn(&str) -> Result<String, String>) -> Result<ScenarioPlan, ScenarioError> {
        let target = self.base(&raw.target)?;
        let tls = match (target.https, raw.tls) {
            (true, t) => {
                let t = t.unwrap_or_default();
                Some(TlsSettings {
                    insecure: t.insecure,
                    cacert: t.cacert,
                    cert: t.cert,
                    key: t.key,
                    resume: t.resume,
                    groups: t.groups,
                    version: t.version,
                    server_name: t.sni,
                })
            }
            (false, Some(_)) => return Err(self.err(&["tls:"], "tls: applies to https:// targets")),
            (false, None) => None,
        };
        let defaults = Defaults {
            headers: raw
                .defaults
                .headers
                .iter()
                .map(|(k, v)| self.header(&["defaults:", "headers:"], k, v))
                .collect::<Result<_, ScenarioError>>()?,
            timeout: raw.defaults.timeout.map_or(Duration::from_secs(10), |d| d.0),
            max_body: raw.defaults.max_body.map_or(DEFAULT_MAX_BODY, |m| m.0),
            expect: match &raw.defaults.expect {
                Some(e) => self.statuses(&["defaults:", "expect:"], e)?,
                None => StatusSet::default(),
            },
        };
        let data = match raw.data {
            None => None,
            Some(d) => {
                let (file, cursor) = match d {
                    RawData::File(f) => (f, Cursor::default()),
                    RawData::Full(RawDataFull { file, cursor }) => (file, cursor.unwrap_or_default()),
                };
                let text = read(&file).map_err(|e| self.err(&["data:"], format!("cannot read '{file}': {e}")))?;
                let (columns, rows) =
                    crate::csv::parse(&text).map_err(|e| self.err(&["data:"], format!("'{file}': {e}")))?;
                if let Some(c) = columns.iter().find(|c| RESERVED.contains(&c.as_str())) {
                    return Err(self.err(
                        &["data:"],
                        format!("'{file}': the column '{c}' is hidden by the built-in {{{{{c}}}}}; rename the column"),
                    ));
                }
                Some(DataSpec {
                    file,
                    columns,
                    cursor,
                    row_count: rows.len(),
                    rows,
                })
            }
        };
        if raw.scenarios.is_empty() {
            return Err(self.err(&["scenarios:"], "name at least one scenario"));
        }
        let mut scenarios = Vec::new();
        for (name, s) in raw.scenarios {
            scenarios.push(self.scenario(&name, s, &defaults)?);
        }
        // Variables: data columns, and captures of the steps before, in the
        // order an iteration runs them (captures are cleared when it starts).
        let columns: BTreeSet<String> = data.iter().flat_map(|d| d.columns.iter().cloned()).collect();
        for s in &scenarios {
            let mut defined = columns.clone();
            self.variables_in_order(s, &defaults, &mut defined)?;
        }
        let mut thresholds = Vec::new();
        for (i, (key, _)) in raw.thresholds.0.iter().enumerate() {
            if raw.thresholds.0[..i].iter().any(|(k, _)| k == key) {
                return Err(self.err(
                    &["thresholds:", key, key],
                    format!("{key} appears twice; put all its expressions in one list"),
                ));
            }
        }
        for (key, list) in raw.thresholds.0 {
            if list.is_empty() {
                return Err(self.err(
                    &["thresholds:", &key],
                    format!("{key}: the list is empty, so nothing is judged; give an expression, e.g. {key}: [p(95) < 500ms] or [rate < 1%], or remove the key"),
                ));
            }
            for t in list {
                let (expr, abort, delay) = match t {
                    RawThreshold::Text(e) => (e, false, Duration::ZERO),
                    RawThreshold::Full(RawThresholdFull {
                        threshold,
                        abort_on_fail,
                        delay,
                    }) => (threshold, abort_on_fail, delay.map_or(Duration::ZERO, |d| d.0)),
                };
                let th =
                    Threshold::parse(&key, &expr, abort, delay).map_err(|e| self.err(&["thresholds:", &key], e))?;
                if let Some((tag, value)) = &th.tag
                    && !tag_exists(&scenarios, tag, value)
                {
                    return Err(self.err(
                        &["thresholds:", &key],
                        format!("no request carries the tag {tag}:{value}; check the step, group or scenario name"),
                    ));
                }
                thresholds.push(th);
            }
        }
        ScenarioPlan {
            file: self.file.to_string(),
            target,
            tls,
            defaults,
            data,
            scenarios,
            thresholds,
            scale: 1.0,
            secret_headers: Vec::new(),
            segment: None,
        }
        .with_secret_headers(&[])
        .map_err(|e| self.err(&["defaults:"], e.to_string()))
    }

    fn base(&self, url: &str) -> Result<BaseUrl, ScenarioError> {
        let bad = |m: String| self.err(&["target:"], m);
        let u = url::Url::parse(url).map_err(|e| {
            bad(format!(
                "'{url}' is not a URL ({e}); e.g. target: http://127.0.0.1:8080"
            ))
        })?;
        let https = match u.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(bad(format!("scheme '{other}': use http:// or https://"))),
        };
        if let Some(q) = u.query() {
            return Err(bad(format!(
                "'{url}' has a query string (?{q}); the target is scheme, host, port and base path: give query parameters per request, e.g. query: {{ page: 1 }}"
            )));
        }
        if let Some(f) = u.fragment() {
            return Err(bad(format!(
                "'{url}' has a fragment (#{f}), which is never sent to a server; remove it"
            )));
        }
        if !u.username().is_empty() || u.password().is_some() {
            return Err(bad(format!(
                "'{url}' has credentials (user@), which throng does not send; remove them and give an Authorization header in defaults.headers"
            )));
        }
        let host = match u.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => return Err(bad(format!("'{url}' has no host"))),
        };
        Ok(BaseUrl {
            url: url.to_string(),
            https,
            host,
            port: u.port_or_known_default().unwrap_or(if https { 443 } else { 80 }),
            base_path: u.path().trim_end_matches('/').to_string(),
        })
    }

    fn scenario(&self, name: &str, s: RawScenario, defaults: &Defaults) -> Result<Scenario, ScenarioError> {
        let key = format!("{name}:");
        let exec = s.executor.name();
        let at = |field: &str| self.err(&["scenarios:", &key, &format!("{field}:")], "");
        let bad = |field: &str, message: String| ScenarioError { message, ..at(field) };
        let missing = |field: &str, example: &str| {
            self.err(
                &["scenarios:", &key, "executor:"],
                format!("the {exec} executor needs {field}, e.g. {field}: {example}"),
            )
        };
        // A field of another executor would be read and ignored: the run
        // would not be the one the author meant.
        let given = [
            ("vus", s.vus.is_some()),
            ("duration", s.duration.is_some()),
            ("start_vus", s.start_vus.is_some()),
            ("stages", s.stages.is_some()),
            ("graceful_ramp_down", s.graceful_ramp_down.is_some()),
            ("iterations", s.iterations.is_some()),
            ("max_duration", s.max_duration.is_some()),
            ("rate", s.rate.is_some()),
            ("start_rate", s.start_rate.is_some()),
            ("time_unit", s.time_unit.is_some()),
            ("pre_allocated_vus", s.pre_allocated_vus.is_some()),
            ("max_vus", s.max_vus.is_some()),
        ];
        for (field, set) in given {
            if set && !s.executor.fields().contains(&field) {
                return Err(bad(
                    field,
                    format!(
                        "`{field}` is not a field of {exec}; it takes {} (and start_time, graceful_stop, flow)",
                        s.executor.fields().join(", ")
                    ),
                ));
            }
        }
        let count = |v: Option<u64>, field: &str, example: &str, why: &str| -> Result<u64, ScenarioError> {
            match v {
                Some(0) => Err(bad(field, format!("{field} must be at least 1: {why}"))),
                Some(n) => Ok(n),
                None => Err(missing(field, example)),
            }
        };
        let vus = |v: Option<u64>| count(v, "vus", "10", "with no VUs the scenario runs nothing");
        let iterations = |v: Option<u64>| count(v, "iterations", "100", "0 iterations run nothing");
        let pre_allocated = |v: Option<u64>| {
            count(
                v,
                "pre_allocated_vus",
                "10",
                "an arrival-rate scenario needs a VU ready for its first iteration",
            )
        };
        let max_vus = |v: Option<u64>, pre: u64| match v {
            None => Ok(pre),
            Some(m) if m >= pre => Ok(m),
            Some(m) => Err(bad(
                "max_vus",
                format!(
                    "max_vus ({m}) is below pre_allocated_vus ({pre}); raise max_vus to {pre} or more, or leave it out (it defaults to pre_allocated_vus)"
                ),
            )),
        };
        let positive = |v: Option<Dur>, field: &str, default: Option<Duration>| -> Result<Duration, ScenarioError> {
            match (v, default) {
                (Some(d), _) if d.0.is_zero() => Err(bad(field, format!("{field} must be longer than 0"))),
                (Some(d), _) => Ok(d.0),
                (None, Some(d)) => Ok(d),
                (None, None) => Err(missing(field, "30s")),
            }
        };
        let stages = |v: Option<Vec<RawStage>>| -> Result<Vec<Stage>, ScenarioError> {
            let list = v.ok_or_else(|| {
                self.err(
                    &["scenarios:", &key, "executor:"],
                    format!("the {exec} executor needs stages, e.g. stages: [{{ duration: 30s, target: 10 }}]"),
                )
            })?;
            if list.is_empty() {
                return Err(bad("stages", "stages is empty; give at least one stage".into()));
            }
            if list.iter().all(|st| st.duration.0.is_zero()) {
                return Err(bad(
                    "stages",
                    "the stages last 0s in all, so the scenario would run nothing; give a stage a duration".into(),
                ));
            }
            list.into_iter()
                .map(|st| {
                    if st.target < 0.0 || !st.target.is_finite() {
                        Err(bad("stages", "a stage's target cannot be negative".into()))
                    } else {
                        Ok(Stage {
                            duration: st.duration.0,
                            target: st.target,
                        })
                    }
                })
                .collect()
        };
        let time_unit =
            positive(s.time_unit, "time_unit", Some(Duration::from_secs(1))).map_err(|e| ScenarioError {
                message: format!("{}: rates are iterations per time_unit", e.message),
                ..e
            })?;
        let max_duration = positive(s.max_duration, "max_duration", Some(Duration::from_secs(600)))?;
        // The limit of `-r`: a schedule no machine follows is refused, not
        // run (the engine would spend the run counting dropped starts).
        let per_second = |field: &str, r: f64| -> Result<(), ScenarioError> {
            let per_s = r / time_unit.as_secs_f64();
            if per_s > throng_plan::MAX_RATE {
                return Err(bad(
                    field,
                    format!(
                        "{r} per {} is {per_s:.3e} per second: more than 100M per second is not a plan one \
                         machine can follow; lower it or lengthen time_unit",
                        throng_plan::format_duration(time_unit)
                    ),
                ));
            }
            Ok(())
        };
        let executor = match s.executor {
            ExecutorName::ConstantVus => Executor::ConstantVus {
                vus: vus(s.vus)?,
                duration: positive(s.duration, "duration", None)?,
            },
            ExecutorName::RampingVus => {
                let start_vus = s.start_vus.unwrap_or(0);
                let stages = stages(s.stages)?;
                if start_vus == 0 && stages.iter().all(|st| st.target == 0.0) {
                    return Err(bad(
                        "stages",
                        "start_vus and every stage's target are 0: no VU would ever run; give a stage a target above 0"
                            .into(),
                    ));
                }
                Executor::RampingVus {
                    start_vus,
                    stages,
                    graceful_ramp_down: s.graceful_ramp_down.map_or(Duration::from_secs(30), |d| d.0),
                }
            }
            ExecutorName::PerVuIterations => Executor::PerVuIterations {
                vus: vus(s.vus)?,
                iterations: iterations(s.iterations)?,
                max_duration,
            },
            ExecutorName::SharedIterations => Executor::SharedIterations {
                vus: vus(s.vus)?,
                iterations: iterations(s.iterations)?,
                max_duration,
            },
            ExecutorName::ConstantArrivalRate => {
                let rate = match s.rate {
                    None => return Err(missing("rate", "10 (iterations per time_unit)")),
                    Some(r) if r.is_finite() && r > 0.0 => r,
                    Some(_) => {
                        return Err(bad(
                            "rate",
                            "rate must be greater than 0 (iterations per time_unit; fractions allowed)".into(),
                        ));
                    }
                };
                per_second("rate", rate)?;
                let pre = pre_allocated(s.pre_allocated_vus)?;
                Executor::ConstantArrivalRate {
                    rate,
                    time_unit,
                    duration: positive(s.duration, "duration", None)?,
                    pre_allocated_vus: pre,
                    max_vus: max_vus(s.max_vus, pre)?,
                }
            }
            ExecutorName::RampingArrivalRate => {
                let start_rate = match s.start_rate {
                    None => 0.0,
                    Some(r) if r.is_finite() && r >= 0.0 => r,
                    Some(_) => {
                        return Err(bad(
                            "start_rate",
                            "start_rate cannot be negative (iterations per time_unit at the start; default 0)".into(),
                        ));
                    }
                };
                let stages = stages(s.stages)?;
                if start_rate == 0.0 && stages.iter().all(|st| st.target == 0.0) {
                    return Err(bad(
                        "stages",
                        "start_rate and every stage's target are 0: no iteration would ever start; give a stage a target above 0"
                            .into(),
                    ));
                }
                per_second("start_rate", start_rate)?;
                let top = stages.iter().map(|st| st.target).fold(0.0, f64::max);
                per_second("stages", top)?;
                let pre = pre_allocated(s.pre_allocated_vus)?;
                Executor::RampingArrivalRate {
                    start_rate,
                    time_unit,
                    stages,
                    pre_allocated_vus: pre,
                    max_vus: max_vus(s.max_vus, pre)?,
                }
            }
        };
        if s.flow.is_empty() {
            return Err(self.err(
                &["scenarios:", &key, "flow:"],
                "flow is empty; give at least one request",
            ));
        }
        let flow = self.flow(&key, s.flow, defaults)?;
        if !contains_request(&flow) {
            return Err(self.err(&["scenarios:", &key, "flow:"], "the flow makes no request"));
        }
        Ok(Scenario {
            name: name.to_string(),
            executor,
            start_time: s.start_time.map_or(Duration::ZERO, |d| d.0),
            graceful_stop: s.graceful_stop.map_or(Duration::from_secs(30), |d| d.0),
            flow,
        })
    }

    fn flow(&self, key: &str, steps: Vec<RawStep>, defaults: &Defaults) -> Result<Vec<Step>, ScenarioError> {
        let mut out = Vec::new();
        for st in steps {
            let step = match (st.request, st.think, st.group) {
                (Some(r), None, None) => Step::Request(Box::new(self.request(key, r, defaults)?)),
                (None, Some(t), None) => Step::Think(match t {
                    RawThink::Fixed(d) => Think::Fixed(d.0),
                    RawThink::Range(RawThinkRange { min, max }) => {
                        if max.0 < min.0 {
                            return Err(self.err(&["scenarios:", key, "think:"], "think: min is above max"));
                        }
                        Think::Range(min.0, max.0)
                    }
                }),
                (None, None, Some(g)) => Step::Group {
                    flow: self.flow(key, g.flow, defaults)?,
                    name: g.name,
                },
                _ => {
                    return Err(self.err(
                        &["scenarios:", key, "flow:"],
                        "each step is exactly one of request:, think: or group:",
                    ));
                }
            };
            out.push(step);
        }
        Ok(out)
    }

    fn request(&self, key: &str, r: RawRequest, defaults: &Defaults) -> Result<Request, ScenarioError> {
        let at = |f: &str| ["scenarios:".to_string(), key.to_string(), f.to_string()];
        let path_at = at(&format!("path: {}", r.path));
        let here: Vec<&str> = path_at.iter().map(String::as_str).collect();
        let method = match &r.method {
            Some(m) => method(m).map_err(|e| {
                let written = format!("method: {m}");
                self.err_first(
                    &[
                        &[&here[..2], &[&written]].concat(),
                        &[&here[..], &["method:"]].concat(),
                        &here,
                    ],
                    e,
                )
            })?,
            None if r.json.is_some() || r.form.is_some() || r.body.is_some() => "POST".to_string(),
            None => "GET".to_string(),
        };
        if !r.path.starts_with('/') && !r.path.starts_with("{{") {
            return Err(self.err(&here, format!("path '{}' must start with /", r.path)));
        }
        let scalar = |v: &serde_yaml_ng::Value| -> Option<String> {
            match v {
                serde_yaml_ng::Value::String(s) => Some(s.clone()),
                serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
                serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
                _ => None,
            }
        };
        let pairs = |m: &BTreeMap<String, serde_yaml_ng::Value>,
                     what: &str|
         -> Result<Vec<(String, Template)>, ScenarioError> {
            m.iter()
                .map(|(k, v)| {
                    let text =
                        scalar(v).ok_or_else(|| self.err(&here, format!("{what} '{k}' must be a string or number")))?;
                    Ok((k.clone(), self.template(&here, &text)?))
                })
                .collect()
        };
        let body = match (r.json, r.form, r.body) {
            (Some(j), None, None) => Body::Json(self.json(&here, j)?),
            (None, Some(f), None) => Body::Form(pairs(&f, "form field")?),
            (None, None, Some(b)) => Body::Raw(self.template(&here, &b)?),
            (None, None, None) => Body::None,
            _ => return Err(self.err(&here, "give one of json:, form: or body:")),
        };
        let mut captures = Vec::new();
        for (var, c) in r.capture {
            let at = self.key_path(&[&here[..], &["capture:"]].concat(), &var);
            if !is_identifier(&var) {
                let suggestion: String = var
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                let suggestion = if suggestion.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("_{suggestion}")
                } else {
                    suggestion
                };
                return Err(self.err(
                    &at,
                    format!(
                        "capture '{var}': a variable name is letters, digits and _, not starting with a digit, e.g. {suggestion}"
                    ),
                ));
            }
            if RESERVED.contains(&var.as_str()) {
                return Err(self.err(
                    &at,
                    format!(
                        "capture '{var}': {{{{{var}}}}} is built in ({}); give the variable another name, e.g. my_{var}",
                        RESERVED.join(", ")
                    ),
                ));
            }
            let from = match (c.json, c.header, c.regex) {
                (Some(p), None, None) => {
                    json_pointer(&p).map_err(|e| self.err(&at, format!("capture {var}: {e}")))?;
                    CaptureFrom::Json(p)
                }
                (None, Some(h), None) => CaptureFrom::Header(h),
                (None, None, Some(re)) => CaptureFrom::Regex(
                    regex::Regex::new(&re).map_err(|e| self.err(&at, format!("capture {var}: regex: {e}")))?,
                ),
                _ => {
                    return Err(self.err(
                        &at,
                        format!("capture {var}: give exactly one of json:, header: or regex:"),
                    ));
                }
            };
            captures.push(Capture { var, from });
        }
        let mut checks = Vec::new();
        for (name, c) in r.check {
            let at = self.key_path(&[&here[..], &["check:"]].concat(), &name);
            let bad = |m: String| self.err(&at, format!("check '{name}': {m}"));
            // One kind, and only that kind's modifiers: a modifier on another
            // kind would be read and ignored, and the check pass regardless.
            let kinds = [
                ("status:", c.status.is_some()),
                ("body_contains:", c.body_contains.is_some()),
                ("json:", c.json.is_some()),
                ("header:", c.header.is_some()),
                ("duration_under:", c.duration_under.is_some()),
            ];
            let given: Vec<&str> = kinds.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect();
            const KINDS: &str =
                "status:, body_contains:, json: (with equals: or exists:), header: (with contains:) or duration_under:";
            let kind = match given.as_slice() {
                [] => return Err(bad(format!("give one of {KINDS}"))),
                [kind] => *kind,
                several => {
                    return Err(bad(format!(
                        "it has {}; give only one of {KINDS}",
                        several.join(" and ")
                    )));
                }
            };
            for (modifier, set, belongs) in [
                ("equals:", c.equals.is_some(), "json:"),
                ("exists:", c.exists.is_some(), "json:"),
                ("contains:", c.contains.is_some(), "header:"),
            ] {
                if set && kind != belongs {
                    return Err(bad(format!(
                        "{modifier} goes with {belongs}, not with {kind}; \
                         e.g. {{ json: /state, equals: active }} or {{ header: Content-Type, contains: json }}"
                    )));
                }
            }
            let kind = match c {
                RawCheck { status: Some(s), .. } => {
                    if s.is_empty() {
                        return Err(bad("status: is empty; list the codes that pass, e.g. [200]".into()));
                    }
                    if let Some(code) = s.iter().find(|c| !(100..=599).contains(*c)) {
                        return Err(bad(format!("status {code}: codes run from 100 to 599")));
                    }
                    CheckKind::Status(s)
                }
                RawCheck {
                    body_contains: Some(t), ..
                } => CheckKind::BodyContains(t),
                RawCheck {
                    json: Some(p),
                    equals,
                    exists,
                    ..
                } => {
                    json_pointer(&p).map_err(&bad)?;
                    match (equals, exists) {
                        (Some(v), None) => {
                            CheckKind::JsonEquals(p, serde_json::to_value(&v).map_err(|e| bad(e.to_string()))?)
                        }
                        (None, Some(true) | None) => CheckKind::JsonExists(p),
                        _ => return Err(bad("json takes equals: VALUE or exists: true".into())),
                    }
                }
                RawCheck {
                    header: Some(h),
                    contains,
                    ..
                } => CheckKind::Header(h, contains),
                RawCheck {
                    duration_under: Some(d),
                    ..
                } => CheckKind::DurationUnder(d.0),
                // The kinds were counted above: exactly one is set.
                _ => return Err(bad(format!("give one of {KINDS}"))),
            };
            checks.push(Check { name, kind });
        }
        let name = r.name.unwrap_or_else(|| format!("{method} {}", r.path));
        Ok(Request {
            path: self.template(&here, &r.path)?,
            query: pairs(&r.query, "query parameter")?,
            headers: r
                .headers
                .iter()
                .map(|(k, v)| self.header(&here, k, v))
                .collect::<Result<_, ScenarioError>>()?,
            body,
            expect: match &r.expect {
                Some(e) => self.statuses(&[&here[..], &["expect:"]].concat(), e)?,
                None => defaults.expect,
            },
            captures,
            checks,
            timeout: r.timeout.map_or(defaults.timeout, |d| d.0),
            max_body: r.max_body.map_or(defaults.max_body, |m| m.0),
            name,
            method,
        })
    }

    /// Checks that every `{{NAME}}` of the scenario is a data column or a
    /// capture of a step that runs before it. A capture of a later step is
    /// not enough: captures are cleared when an iteration starts, so the
    /// value would render empty.
    fn variables_in_order(
        &self,
        s: &Scenario,
        defaults: &Defaults,
        defined: &mut BTreeSet<String>,
    ) -> Result<(), ScenarioError> {
        let all = requests(&s.flow);
        for (i, r) in all.iter().enumerate() {
            // defaults.headers are sent with every request that does not
            // set the same header itself.
            let from_defaults = defaults
                .headers
                .iter()
                .filter(|(name, _)| !r.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
                .map(|(name, t)| (Some(name.as_str()), t));
            let own = templates(r).into_iter().map(|t| (None, t));
            for (default_header, t) in own.chain(from_defaults) {
                for v in t.variables() {
                    if defined.contains(v) {
                        continue;
                    }
                    let key = format!("{}:", s.name);
                    let scope = match default_header {
                        Some(_) => vec!["defaults:"],
                        None => vec!["scenarios:", &key],
                    };
                    let used_in = match default_header {
                        Some(h) => format!("defaults.headers.{h}, sent with step '{}',", r.name),
                        None => format!("step '{}'", r.name),
                    };
                    let capturer = all[i..].iter().find(|later| later.captures.iter().any(|c| c.var == v));
                    let message = match capturer {
                        Some(c) if std::ptr::eq(*c, *r) => format!(
                            "{{{{{v}}}}} is used in {used_in} which captures it itself, in scenario '{}': a capture is \
                             available to later steps only; capture it in an earlier step",
                            s.name
                        ),
                        Some(c) => format!(
                            "{{{{{v}}}}} is used in {used_in} before step '{}' captures it, in scenario '{}': \
                             captures are cleared when an iteration starts, so it would be empty here; capture it \
                             in an earlier step or move this request after '{}'",
                            c.name, s.name, c.name
                        ),
                        None => {
                            let mut known: Vec<String> = defined.iter().cloned().collect();
                            known.extend(BUILT_INS.iter().map(|b| b.to_string()));
                            format!(
                                "{{{{{v}}}}} is not defined in scenario '{}': capture it in an earlier step or add \
                                 it as a data column; known: {}",
                                s.name,
                                known.join(", ")
                            )
                        }
                    };
                    return Err(self.err_at_use(&scope, v, message));
                }
            }
            defined.extend(r.captures.iter().map(|c| c.var.clone()));
        }
        Ok(())
    }

    fn json(&self, here: &[&str], v: serde_yaml_ng::Value) -> Result<JsonTemplate, ScenarioError> {
        use serde_yaml_ng::Value as Y;
        if let Some(var) = unquoted_template(&v) {
            return Err(self.err_at_use(
                here,
                &var,
                format!(
                    "{{{{{var}}}}} is not in quotes, so YAML reads it as a mapping and the body would send an \
                     object; write it as a string: \"{{{{{var}}}}}\""
                ),
            ));
        }
        Ok(match v {
            Y::String(s) => {
                let t = self.template(here, &s)?;
                if t.is_literal() {
                    JsonTemplate::Value(serde_json::Value::String(s))
                } else {
                    JsonTemplate::Text(t)
                }
            }
            Y::Sequence(items) => JsonTemplate::Array(
                items
                    .into_iter()
                    .map(|i| self.json(here, i))
                    .collect::<Result<_, _>>()?,
            ),
            Y::Mapping(m) => JsonTemplate::Object(
                m.into_iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Y::String(s) => s,
                            other => serde_yaml_ng::to_string(&other).unwrap_or_default().trim().to_string(),
                        };
                        Ok((key, self.json(here, v)?))
                    })
                    .collect::<Result<_, ScenarioError>>()?,
            ),
            other => JsonTemplate::Value(
                serde_json::to_value(&other).map_err(|e| self.err(here, format!("json body: {e}")))?,
            ),
        })
    }
}

/// The variable of `{{var}}` written without quotes: YAML reads it as a
/// flow mapping whose one key is the mapping `{var: null}`, with no value.
fn unquoted_template(v: &serde_yaml_ng::Value) -> Option<String> {
    use serde_yaml_ng::Value as Y;
    let Y::Mapping(outer) = v else { return None };
    let (Some((Y::Mapping(inner), Y::Null)), 1) = (outer.iter().next(), outer.len()) else {
        return None;
    };
    match (inner.iter().next(), inner.len()) {
        (Some((Y::String(var), Y::Null)), 1) => Some(var.trim().to_string()),
        _ => None,
    }
}

/// Methods whose names servers know in capitals only: written in any case,
/// sent in capitals.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// A method as written: a standard one in any case becomes its capitals
/// (`get` → `GET`); another token (`PURGE`, `PROPFIND`) is sent as written,
/// since methods are case-sensitive (RFC 9110 §9.1).
fn method(m: &str) -> Result<String, String> {
    if let Some(standard) = METHODS.iter().find(|s| s.eq_ignore_ascii_case(m)) {
        return Ok(standard.to_string());
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if m.is_empty() || !m.bytes().all(token) {
        return Err(format!(
            "'{m}' is not an HTTP method: write one of {} (in any case), or another token of letters, digits and !#$%&'*+-.^_`|~",
            METHODS.join(", ")
        ));
    }
    Ok(m.to_string())
}

/// Checks a JSON pointer (RFC 6901): empty (the whole document) or `/`
/// then keys separated by `/`, with `~0` for `~` and `~1` for `/` in a key.
fn json_pointer(p: &str) -> Result<(), String> {
    if !p.is_empty() && !p.starts_with('/') {
        // `data.token`, `$.data.token`, `data[0].id`: a path as JSONPath or
        // k6's res.json() write it.
        let keys = p
            .trim_start_matches('$')
            .trim_start_matches('.')
            .replace('[', ".")
            .replace(']', "");
        let suggestion: String = keys
            .split('.')
            .filter(|k| !k.is_empty())
            .map(|k| format!("/{k}"))
            .collect();
        return Err(format!(
            "json '{p}' is a JSON pointer and starts with /, e.g. {}",
            if suggestion.is_empty() {
                "/data/token".to_string()
            } else {
                suggestion
            }
        ));
    }
    let mut rest = p;
    while let Some(i) = rest.find('~') {
        rest = &rest[i + 1..];
        if !rest.starts_with(['0', '1']) {
            return Err(format!(
                "json '{p}': in a JSON pointer ~ starts an escape: write ~0 for ~ and ~1 for / inside a key"
            ));
        }
    }
    Ok(())
}

fn contains_request(flow: &[Step]) -> bool {
    flow.iter().any(|s| match s {
        Step::Request(_) => true,
        Step::Group { flow, .. } => contains_request(flow),
        Step::Think(_) => false,
    })
}

/// Every request of a flow, groups entered, in the order an iteration
/// makes them.
fn requests(flow: &[Step]) -> Vec<&Request> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::Request(r) => out.push(r.as_ref()),
            Step::Group { flow, .. } => out.extend(requests(flow)),
            Step::Think(_) => {}
        }
    }
    out
}

/// The templates a request renders itself (not `defaults.headers`).
fn templates(r: &Request) -> Vec<&Template> {
    fn json<'a>(j: &'a JsonTemplate, out: &mut Vec<&'a Template>) {
        match j {
            JsonTemplate::Text(t) => out.push(t),
            JsonTemplate::Array(a) => a.iter().for_each(|x| json(x, out)),
            JsonTemplate::Object(o) => o.iter().for_each(|(_, x)| json(x, out)),
            JsonTemplate::Value(_) => {}
        }
    }
    let mut out = vec![&r.path];
    out.extend(r.query.iter().chain(&r.headers).map(|(_, t)| t));
    match &r.body {
        Body::Json(j) => json(j, &mut out),
        Body::Form(f) => out.extend(f.iter().map(|(_, t)| t)),
        Body::Raw(t) => out.push(t),
        Body::None => {}
    }
    out
}

fn tag_exists(scenarios: &[Scenario], tag: &str, value: &str) -> bool {
    fn in_flow(flow: &[Step], tag: &str, value: &str) -> bool {
        flow.iter().any(|s| match s {
            Step::Request(r) => {
                tag == "step" && r.name == value || tag == "check" && r.checks.iter().any(|c| c.name == value)
            }
            Step::Group { name, flow } => tag == "group" && name == value || in_flow(flow, tag, value),
            Step::Think(_) => false,
        })
    }
    scenarios.iter().any(|s| {
        tag == "scenario" && s.name == value
            || tag == "stage" && stage_names(s).iter().any(|n| n == value)
            || in_flow(&s.flow, tag, value)
    })
}

/// Stage tag values of a scenario: `NAME#1`, `NAME#2`, …
pub fn stage_names(s: &Scenario) -> Vec<String> {
    (1..=s.executor.stages().len())
        .map(|i| format!("{}#{i}", s.name))
        .collect()
}

impl Serialize for Template {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.source())
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Template::compile(&text).map_err(serde::de::Error::custom)
    }
}

/// The environment for `{{env.NAME}}`: the process's, overridden by `--env`.
pub fn environment(overrides: &[(String, String)]) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    env.extend(overrides.iter().cloned());
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
target: http://127.0.0.1:8080/api
defaults:
  headers:
    User-Agent: throng-test
  timeout: 5s
scenarios:
  signup:
    executor: ramping-vus
    start_vus: 0
    stages:
      - { duration: 30s, target: 10 }
      - { duration: 1m, target: 50 }
    flow:
      - request:
          name: register
          path: /auth/register
          json: { email: "{{random_email}}", password: "pw-{{vu}}" }
          expect: [200]
          capture:
            token: { json: /token }
      - think: { min: 1s, max: 2s }
      - group:
          name: session
          flow:
            - request:
                path: /me
                headers: { Authorization: "Bearer {{token}}" }
                check:
                  is ok: { status: [200] }
thresholds:
  response{step:register}:
    - p(95) < 500ms
    - threshold: "p(99) < 2s over 10s"
      abort_on_fail: true
      delay: 5s
"#;

    fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
        ScenarioPlan::parse(text, "t.yaml", &|f| Err(format!("no file {f} in tests")))
    }

    #[test]
    fn a_full_file_validates() {
        let plan = parse(GOOD).unwrap();
        assert_eq!(plan.target.port, 8080);
        assert_eq!(plan.target.base_path, "/api");
        assert_eq!(plan.defaults.timeout, Duration::from_secs(5));
        let s = &plan.scenarios[0];
        assert_eq!(s.name, "signup");
        assert_eq!(s.executor.length(), Duration::from_secs(90));
        assert_eq!(s.stage_at(Duration::from_secs(31)), Some(2));
        assert_eq!(stage_names(s), ["signup#1", "signup#2"]);
        let Step::Request(r) = &s.flow[0] else {
            panic!("first step is a request")
        };
        assert_eq!(r.method, "POST");
        assert!(matches!(r.body, Body::Json(_)));
        assert!(matches!(s.flow[1], Step::Think(Think::Range(..))));
        let Step::Group { flow, .. } = &s.flow[2] else {
            panic!("third step is a group")
        };
        let Step::Request(me) = &flow[0] else {
            panic!("a request")
        };
        assert_eq!(me.name, "GET /me");
        assert_eq!(me.timeout, Duration::from_secs(5));
        assert_eq!(plan.thresholds.len(), 2);
        assert!(plan.thresholds[1].abort_on_fail);
        assert_eq!(plan.thresholds[1].window_s, Some(10));
        let fast = plan.clone().scaled(0.1);
        assert_eq!(fast.scenarios[0].executor.length(), Duration::from_secs(9));
        assert_eq!(fast.end(), Duration::from_secs(9));
        assert_eq!(fast.scale, 0.1);
    }

    #[test]
    fn mistakes_point_at_their_line() {
        let cases: [(&str, &str, usize, &str); 6] = [
            ("  timeout: 5s", "  retries: 3", 0, "unknown field `retries`"),
            ("start_vus: 0", "start_vus: many", 0, "invalid type"),
            (
                "duration: 30s, target: 10",
                "duration: 30 parsecs, target: 10",
                0,
                "duration",
            ),
            ("Bearer {{token}}", "Bearer {{tokn}}", 0, "{{tokn}} is not defined"),
            (
                "executor: ramping-vus",
                "executor: ramping-users",
                0,
                "unknown variant `ramping-users`",
            ),
            (
                "response{step:register}",
                "response{step:regster}",
                0,
                "no request carries the tag step:regster",
            ),
        ];
        for (from, to, _, message) in cases {
            let text = GOOD.replacen(from, to, 1);
            let e = parse(&text).unwrap_err();
            let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
            assert!(e.message.contains(message), "{to}: {e}");
            assert!(e.line > 0 && e.column > 0, "{to}: {e}");
            // The line named holds the mistake.
            let needle = to
                .lines()
                .last()
                .unwrap_or(to)
                .split(':')
                .next()
                .unwrap_or_default()
                .trim();
            assert!(line.contains(needle), "{to}: {e} points at '{line}'");
            assert!(e.to_string().starts_with("t.yaml:"), "{e}");
        }
    }

    #[test]
    fn an_unquoted_template_in_a_json_body_is_refused_where_it_is() {
        let from = r#"json: { email: "{{random_email}}", password: "pw-{{vu}}" }"#;
        for (to, var) in [
            (
                r#"json: { email: {{random_email}}, password: "pw-{{vu}}" }"#,
                "random_email",
            ),
            (r#"json: { email: "a", tags: [ {{ vu }} ] }"#, "vu"),
            (r#"json: { user: { id: {{vu}} } }"#, "vu"),
        ] {
            let e = rejects(from, to, "json:", "is not in quotes");
            assert!(e.message.contains(&format!("\"{{{{{var}}}}}\"")), "{e}");
            assert!(e.column > 10, "points into the line, at the template: {e}");
        }
        // Quoted, it is a string template; a real nested mapping stays an object.
        let ok = GOOD.replacen(
            from,
            r#"json: { email: "{{random_email}}", user: { id: 1, tags: [a] } }"#,
            1,
        );
        assert!(parse(&ok).is_ok());
    }

    /// Parses `GOOD` with `from` replaced by `to` and expects an error
    /// containing `message`, on a line that holds `at`.
    #[track_caller]
    fn rejects(from: &str, to: &str, at: &str, message: &str) -> ScenarioError {
        assert!(GOOD.contains(from), "GOOD has no '{from}'");
        let text = GOOD.replacen(from, to, 1);
        let e = match parse(&text) {
            Ok(_) => panic!("accepted: {to}"),
            Err(e) => e,
        };
        assert!(e.message.contains(message), "{to}: '{e}' does not say '{message}'");
        let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
        assert!(
            e.line > 0 && line.contains(at),
            "{to}: {e} points at '{line}', not at '{at}'"
        );
        e
    }

    #[test]
    fn framing_headers_and_control_characters_are_refused_where_written() {
        rejects(
            "User-Agent: throng-test",
            "User-Agent: throng-test\n    Content-Length: 5",
            "Content-Length: 5",
            "throng computes Content-Length",
        );
        rejects(
            "headers: { Authorization: \"Bearer {{token}}\" }",
            "headers: { Transfer-Encoding: chunked }",
            "Transfer-Encoding",
            "never chunks",
        );
        rejects(
            "User-Agent: throng-test",
            "User-Agent: \"throng\\vtest\"",
            "User-Agent",
            "control character \\u{b}",
        );
    }

    #[test]
    fn max_body_is_a_size_with_a_default_and_a_limit() {
        let plan = parse(GOOD).unwrap();
        assert_eq!(plan.defaults.max_body, DEFAULT_MAX_BODY);
        let text = GOOD
            .replacen("timeout: 5s", "timeout: 5s\n  max_body: 4MiB", 1)
            .replacen("path: /me", "path: /me\n                max_body: 100", 1);
        let plan = parse(&text).unwrap();
        assert_eq!(plan.defaults.max_body, 4 << 20);
        let reqs = requests(&plan.scenarios[0].flow);
        assert_eq!((reqs[0].max_body, reqs[1].max_body), (4 << 20, 100));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size(" 2 MB "), Ok(2_000_000));
        for bad in ["0", "65MiB", "1GiB", "x", "-1", "99999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        rejects("timeout: 5s", "timeout: 5s\n  max_body: 1GiB", "max_body", "not a size");
    }

    #[test]
    fn secret_headers_are_redacted_in_the_plan_a_result_keeps() {
        let text = GOOD.replacen(
            "User-Agent: throng-test",
            "User-Agent: throng-test\n    X-Api-Key: k3y-s3cret",
            1,
        );
        let plan = parse(&text).unwrap();
        assert_eq!(plan.secret_headers, ["authorization"]);
        let plan = plan.with_secret_headers(&["X-API-KEY".to_string()]).unwrap();
        assert_eq!(plan.secret_headers, ["authorization", "x-api-key"]);
        let json = serde_json::to_string(&plan.redacted()).unwrap();
        assert!(!json.contains("k3y-s3cret") && !json.contains("Bearer"), "{json}");
        assert!(json.contains("throng-test"), "{json}");
        let note = plan.redaction_note().unwrap();
        assert!(note.contains("Authorization, X-Api-Key"), "{note}");
        // What is sent is untouched.
        assert_eq!(plan.defaults.headers[1].1.source(), "k3y-s3cret");
    }

    #[test]
    fn durations_need_a_unit() {
        for (from, to, at) in [
            ("timeout: 5s", "timeout: 5", "timeout: 5"),
            ("duration: 30s, target", "duration: 30, target", "duration: 30,"),
            ("duration: 30s, target", "duration: 0, target", "duration: 0,"),
            ("duration: 30s, target", "duration: '30', target", "duration: '30',"),
            ("start_vus: 0", "start_vus: 0\n    start_time: 1", "start_time: 1"),
            ("start_vus: 0", "start_vus: 0\n    graceful_stop: 2.5", "graceful_stop"),
            ("status: [200]", "duration_under: 1", "duration_under"),
            ("expect: [200]", "expect: [200]\n          timeout: 3", "timeout: 3"),
        ] {
            let e = rejects(from, to, at, "durations need a unit, e.g. 500ms, 30s, 2m");
            assert!(e.message.contains("has none"), "{e}");
        }
        let plan = parse(&GOOD.replacen("duration: 30s, target", "duration: 0s, target", 1)).unwrap();
        assert_eq!(plan.scenarios[0].executor.stages()[0].duration, Duration::ZERO);
    }

    #[test]
    fn unknown_keys_in_short_or_long_forms_are_named() {
        rejects(
            "think: { min: 1s, max: 2s }",
            "think: { min: 1s, max: 2s, mean: 1s }",
            "mean",
            "unknown field `mean`, expected `min` or `max`",
        );
        rejects(
            "think: { min: 1s, max: 2s }",
            "think: { min: 1s }",
            "think",
            "missing field `max`",
        );
        rejects(
            "think: { min: 1s, max: 2s }",
            "think: 2",
            "think: 2",
            "durations need a unit",
        );
        rejects(
            "      abort_on_fail: true",
            "      abortOnFail: true",
            "abortOnFail",
            "unknown field `abortOnFail`, expected one of `threshold`, `abort_on_fail`, `delay`",
        );
        rejects("      delay: 5s", "      delay: 5", "delay: 5", "durations need a unit");
        rejects(
            "    - p(95) < 500ms",
            "    - 500",
            "500",
            "expected an expression such as p(95) < 500ms",
        );
        rejects(
            "scenarios:",
            "data: { file: users.csv, cursr: shared }\nscenarios:",
            "cursr",
            "unknown field `cursr`, expected `file` or `cursor`",
        );
        rejects(
            "scenarios:",
            "data: { file: users.csv, cursor: random }\nscenarios:",
            "random",
            "unknown variant `random`, expected `per-vu` or `shared`",
        );
        let read: &dyn Fn(&str) -> Result<String, String> = &|_| Ok("email\na@x\n".into());
        let text = GOOD.replacen("scenarios:", "data: { file: users.csv, cursor: shared }\nscenarios:", 1);
        let plan = ScenarioPlan::parse(&text, "t.yaml", read).unwrap();
        assert_eq!(plan.data.map(|d| d.cursor), Some(Cursor::Shared));
        let Step::Think(Think::Range(min, max)) = plan.scenarios[0].flow[1] else {
            panic!("a think range")
        };
        assert_eq!((min, max), (Duration::from_secs(1), Duration::from_secs(2)));
        assert_eq!(plan.thresholds[1].delay_ms, 5000);
    }

    /// GOOD's ramping-vus scenario header, to swap for another executor.
    const RAMP: &str = "executor: ramping-vus\n    start_vus: 0\n    stages:\n      - { duration: 30s, target: 10 }\n      - { duration: 1m, target: 50 }\n";

    #[test]
    fn executors_need_their_fields() {
        // Named as written in the file (kebab-case), pointing at the executor.
        rejects(
            RAMP,
            "executor: constant-vus\n    duration: 1m\n",
            "executor: constant-vus",
            "the constant-vus executor needs vus, e.g. vus: 10",
        );
        rejects(
            RAMP,
            "executor: constant-arrival-rate\n    rate: 10\n    duration: 1m\n",
            "executor: constant-arrival-rate",
            "the constant-arrival-rate executor needs pre_allocated_vus",
        );
        rejects(
            RAMP,
            "executor: constant-arrival-rate\n    duration: 1m\n    pre_allocated_vus: 2\n",
            "executor: constant-arrival-rate",
            "the constant-arrival-rate executor needs rate",
        );
        rejects(
            RAMP,
            "executor: ramping-arrival-rate\n    pre_allocated_vus: 2\n",
            "executor: ramping-arrival-rate",
            "the ramping-arrival-rate executor needs stages",
        );
        rejects(
            RAMP,
            "executor: per-vu-iterations\n    vus: 2\n",
            "executor: per-vu-iterations",
            "the per-vu-iterations executor needs iterations",
        );
    }

    #[test]
    fn fields_of_another_executor_are_refused() {
        let e = rejects(
            RAMP,
            "executor: constant-vus\n    vus: 5\n    duration: 1m\n    rate: 10\n",
            "rate: 10",
            "`rate` is not a field of constant-vus; it takes vus, duration (and start_time, graceful_stop, flow)",
        );
        assert_eq!(e.column, 5, "{e}");
        rejects(
            RAMP,
            "executor: per-vu-iterations\n    vus: 5\n    iterations: 2\n    stages: [{ duration: 1s, target: 1 }]\n",
            "stages:",
            "`stages` is not a field of per-vu-iterations; it takes vus, iterations, max_duration",
        );
        rejects(
            "start_vus: 0",
            "start_vus: 0\n    time_unit: 1s",
            "time_unit",
            "`time_unit` is not a field of ramping-vus",
        );
        // `rate:` is found as a key, not inside `start_rate:` above it.
        rejects(
            RAMP,
            "executor: ramping-arrival-rate\n    start_rate: 1\n    rate: 5\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 1 }]\n",
            "    rate: 5",
            "`rate` is not a field of ramping-arrival-rate",
        );
    }

    #[test]
    fn counts_and_rates_that_run_nothing_are_refused() {
        let arrival = |extra: &str| {
            format!(
                "executor: constant-arrival-rate\n    rate: 10\n    duration: 1m\n    pre_allocated_vus: 5\n{extra}"
            )
        };
        rejects(
            RAMP,
            &arrival("    time_unit: 0s\n"),
            "time_unit: 0s",
            "time_unit must be longer than 0: rates are iterations per time_unit",
        );
        rejects(
            RAMP,
            &arrival("    max_vus: 2\n"),
            "max_vus: 2",
            "max_vus (2) is below pre_allocated_vus (5)",
        );
        rejects(
            RAMP,
            &arrival("").replace("rate: 10", "rate: 0"),
            "rate: 0",
            "rate must be greater than 0",
        );
        rejects(
            RAMP,
            &arrival("").replace("rate: 10", "rate: 1e15"),
            "rate: 1e15",
            "1000000000000000 per 1s is 1.000e15 per second: more than 100M per second is not a plan",
        );
        // Per time_unit: 6e9 a minute is 1e8 a second, the limit itself.
        assert!(
            parse(&GOOD.replacen(
                RAMP,
                &arrival("    time_unit: 1m\n").replace("rate: 10", "rate: 6e9"),
                1
            ))
            .is_ok()
        );
        rejects(
            RAMP,
            &arrival("    time_unit: 1m\n").replace("rate: 10", "rate: 6.1e9"),
            "rate: 6.1e9",
            "lower it or lengthen time_unit",
        );
        rejects(
            RAMP,
            "executor: ramping-arrival-rate\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 2e8 }]\n",
            "stages:",
            "more than 100M per second",
        );
        rejects(
            RAMP,
            &arrival("").replace("pre_allocated_vus: 5", "pre_allocated_vus: 0"),
            "pre_allocated_vus: 0",
            "pre_allocated_vus must be at least 1: an arrival-rate scenario needs a VU ready",
        );
        rejects(
            RAMP,
            "executor: ramping-arrival-rate\n    start_rate: -5\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 1 }]\n",
            "start_rate: -5",
            "start_rate cannot be negative",
        );
        rejects(
            RAMP,
            "executor: ramping-arrival-rate\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 0 }]\n",
            "stages:",
            "start_rate and every stage's target are 0: no iteration would ever start",
        );
        rejects(
            RAMP,
            "executor: constant-vus\n    vus: 0\n    duration: 1m\n",
            "vus: 0",
            "vus must be at least 1: with no VUs the scenario runs nothing",
        );
        rejects(
            RAMP,
            "executor: shared-iterations\n    vus: 2\n    iterations: 0\n",
            "iterations: 0",
            "iterations must be at least 1",
        );
        rejects(
            RAMP,
            "executor: shared-iterations\n    vus: 2\n    iterations: 5\n    max_duration: 0s\n",
            "max_duration: 0s",
            "max_duration must be longer than 0",
        );
        rejects(
            "target: 10 }\n      - { duration: 1m, target: 50 }",
            "target: 0 }\n      - { duration: 1m, target: 0 }",
            "stages:",
            "start_vus and every stage's target are 0: no VU would ever run",
        );
        rejects("target: 50 }", "target: -1 }", "stages:", "cannot be negative");
        let text = GOOD
            .replacen("duration: 30s, target", "duration: 0s, target", 1)
            .replacen("duration: 1m, target", "duration: 0s, target", 1);
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains("the stages last 0s in all"), "{e}");
        // Equal is fine, and max_vus defaults to pre_allocated_vus.
        let plan = parse(&GOOD.replacen(RAMP, &arrival("    max_vus: 5\n"), 1)).unwrap();
        let Executor::ConstantArrivalRate { max_vus, .. } = plan.scenarios[0].executor else {
            panic!("constant-arrival-rate")
        };
        assert_eq!(max_vus, 5);
        let plan = parse(&GOOD.replacen(RAMP, &arrival(""), 1)).unwrap();
        assert!(matches!(
            plan.scenarios[0].executor,
            Executor::ConstantArrivalRate { max_vus: 5, .. }
        ));
    }

    #[test]
    fn check_modifiers_belong_to_their_kind() {
        let check = "is ok: { status: [200] }";
        for (to, message) in [
            (
                "is ok: { status: [200], contains: OK }",
                "check 'is ok': contains: goes with header:, not with status:",
            ),
            (
                "is ok: { body_contains: OK, equals: 1 }",
                "check 'is ok': equals: goes with json:, not with body_contains:",
            ),
            (
                "is ok: { header: X-A, exists: true }",
                "check 'is ok': exists: goes with json:, not with header:",
            ),
            (
                "is ok: { duration_under: 1s, contains: x }",
                "contains: goes with header:, not with duration_under:",
            ),
            (
                "is ok: { json: /a, contains: x }",
                "contains: goes with header:, not with json:",
            ),
            (
                "is ok: { status: [200], header: X-A }",
                "check 'is ok': it has status: and header:; give only one of",
            ),
            ("is ok: { contains: x }", "check 'is ok': give one of status:"),
            ("is ok: { json: /a, exists: false }", "equals: VALUE or exists: true"),
        ] {
            rejects(check, to, "is ok:", message);
        }
        let plan = parse(&GOOD.replacen(check, "is ok: { header: X-A, contains: b }", 1)).unwrap();
        let Step::Group { flow, .. } = &plan.scenarios[0].flow[2] else {
            panic!("a group")
        };
        let Step::Request(me) = &flow[0] else {
            panic!("a request")
        };
        assert_eq!(me.checks[0].kind, CheckKind::Header("X-A".into(), Some("b".into())));
    }

    #[test]
    fn json_pointers_start_with_a_slash() {
        for (to, at, message) in [
            (
                "is ok: { json: data.token }",
                "is ok:",
                "check 'is ok': json 'data.token' is a JSON pointer and starts with /, e.g. /data/token",
            ),
            (
                "is ok: { json: '$.items[0].id', equals: 3 }",
                "is ok:",
                "json '$.items[0].id' is a JSON pointer and starts with /, e.g. /items/0/id",
            ),
            (
                "is ok: { json: /a~b }",
                "is ok:",
                "~ starts an escape: write ~0 for ~ and ~1 for /",
            ),
        ] {
            rejects("is ok: { status: [200] }", to, at, message);
        }
        rejects(
            "token: { json: /token }",
            "token: { json: token }",
            "token: { json: token }",
            "capture token: json 'token' is a JSON pointer and starts with /, e.g. /token",
        );
        rejects(
            "token: { json: /token }",
            "token: { json: /a~2 }",
            "token: { json",
            "~ starts an escape",
        );
        for ok in ["\"\"", "/", "/a~0b/c~1d/0"] {
            let text = GOOD.replacen("json: /token", &format!("json: {ok}"), 1);
            assert!(parse(&text).is_ok(), "{ok}");
        }
    }

    #[test]
    fn statuses_are_real_and_listed() {
        for (to, at, message) in [
            (
                "expect: []",
                "expect: []",
                "expect: is empty, so every response would count as failed",
            ),
            ("expect: [600]", "expect: [600]", "statuses run from 100 to 599"),
            ("expect: [99]", "expect: [99]", "statuses run from 100 to 599"),
            ("expect: [\"300-200\"]", "expect:", "low to high"),
            ("expect: [6xx]", "expect:", "statuses run from 100 to 599"),
        ] {
            rejects("expect: [200]", to, at, message);
        }
        rejects(
            "  timeout: 5s",
            "  timeout: 5s\n  expect: []",
            "expect: []",
            "expect: is empty",
        );
        let check = "is ok: { status: [200] }";
        rejects(
            check,
            "is ok: { status: [] }",
            "is ok:",
            "check 'is ok': status: is empty",
        );
        rejects(
            check,
            "is ok: { status: [200, 999] }",
            "is ok:",
            "check 'is ok': status 999: codes run from 100 to 599",
        );
        rejects(check, "is ok: { status: [70000] }", "is ok:", "invalid value");
    }

    #[test]
    fn variables_are_captured_before_they_are_used() {
        // A step before the one that captures it.
        let e = rejects(
            "    flow:\n      - request:\n          name: register",
            "    flow:\n      - request: { name: early, path: \"/x/{{token}}\" }\n      - request:\n          name: register",
            "{{token}}",
            "{{token}} is used in step 'early' before step 'register' captures it, in scenario 'signup': captures are cleared",
        );
        assert!(e.message.contains("move this request after 'register'"), "{e}");
        // The step that captures it.
        rejects(
            "path: /auth/register",
            "path: /auth/register/{{token}}",
            "{{token}}",
            "{{token}} is used in step 'register' which captures it itself",
        );
        // A default header goes with every request, the first one too...
        rejects(
            "User-Agent: throng-test",
            "Authorization: \"Bearer {{token}}\"",
            "{{token}}",
            "{{token}} is used in defaults.headers.Authorization, sent with step 'register', which captures it itself",
        );
        // ...unless the request sets that header itself (in any case).
        let text = GOOD
            .replacen("User-Agent: throng-test", "Authorization: \"Bearer {{token}}\"", 1)
            .replacen(
                "expect: [200]",
                "expect: [200]\n          headers: { authorization: none }",
                1,
            );
        parse(&text).unwrap();
        // Spaces inside the braces: still found, still pointed at.
        rejects(
            "path: /auth/register",
            "path: /auth/register/{{ token }}",
            "{{ token }}",
            "captures it itself",
        );
        // Never captured: the known names are those defined at that point.
        let e = rejects(
            "Bearer {{token}}",
            "Bearer {{tokn}}",
            "{{tokn}}",
            "{{tokn}} is not defined",
        );
        assert!(e.message.contains("known: token, vu, iter"), "{e}");
    }

    #[test]
    fn standard_methods_are_capitalised() {
        let me = |plan: &ScenarioPlan| -> Request {
            let Step::Group { flow, .. } = &plan.scenarios[0].flow[2] else {
                panic!("a group")
            };
            let Step::Request(r) = &flow[0] else {
                panic!("a request")
            };
            (**r).clone()
        };
        for (written, sent) in [
            ("get", "GET"),
            ("Patch", "PATCH"),
            ("delete", "DELETE"),
            ("PURGE", "PURGE"),
            ("propfind", "propfind"),
        ] {
            let plan = parse(&GOOD.replacen("path: /me", &format!("path: /me\n                method: {written}"), 1))
                .unwrap();
            let r = me(&plan);
            assert_eq!(r.method, sent);
            assert_eq!(r.name, format!("{sent} /me"));
        }
        for bad in ["GE T", "\"\"", "GET/1", "\"PÖST\""] {
            let e = rejects(
                "path: /me",
                &format!("path: /me\n                method: {bad}"),
                "method:",
                "is not an HTTP method: write one of GET, HEAD, POST",
            );
            assert_eq!(e.column, 17, "{e}");
        }
    }

    #[test]
    fn the_target_is_only_where_requests_go() {
        let target = "target: http://127.0.0.1:8080/api";
        for (to, message) in [
            ("target: http://127.0.0.1:8080/api?key=1", "has a query string (?key=1)"),
            ("target: http://127.0.0.1:8080/api?", "has a query string (?)"),
            ("target: http://127.0.0.1:8080/api#top", "has a fragment (#top)"),
            ("target: http://me:pw@127.0.0.1:8080/api", "has credentials (user@)"),
        ] {
            let e = rejects(target, to, "target:", message);
            assert_eq!(e.column, 1, "{e}");
        }
        let plan = parse(&GOOD.replacen(target, "target: http://127.0.0.1:8080/api/@me/", 1)).unwrap();
        assert_eq!(plan.target.base_path, "/api/@me");
    }

    #[test]
    fn env_names_lists_every_variable_once() {
        let text = GOOD
            .replacen("User-Agent: throng-test", "User-Agent: \"{{env.UA}}\"", 1)
            .replacen(
                "path: /me",
                "path: /me/{{env.TENANT}}\n                query: { k: \"{{env.API_KEY}}\" }",
                1,
            )
            .replacen(
                "password: \"pw-{{vu}}\"",
                "password: \"{{env.TENANT}}-{{env.PASSWORD}}\"",
                1,
            );
        let plan = parse(&text).unwrap();
        assert_eq!(plan.env_names(), ["API_KEY", "PASSWORD", "TENANT", "UA"]);
        assert!(parse(GOOD).unwrap().env_names().is_empty());
        rejects("pw-{{vu}}", "pw-{{env.}}", "{{env.}}", "{{env.}} names no variable");
        rejects(
            "pw-{{vu}}",
            "pw-{{env.PASS-WORD}}",
            "{{env.PASS-WORD}}",
            "'PASS-WORD' is not an environment variable name",
        );
    }

    #[test]
    fn capture_names_are_identifiers_and_not_built_ins() {
        for (name, message) in [
            (
                "user-id",
                "capture 'user-id': a variable name is letters, digits and _, not starting with a digit, e.g. user_id",
            ),
            ("2fa", "e.g. _2fa"),
            ("a.b", "e.g. a_b"),
            ("\"my token\"", "e.g. my_token"),
            ("vu", "capture 'vu': {{vu}} is built in"),
            ("env", "capture 'env': {{env}} is built in"),
            ("random_int", "give the variable another name, e.g. my_random_int"),
        ] {
            rejects(
                "token: { json: /token }",
                &format!("{name}: {{ json: /token }}"),
                "{ json: /token }",
                message,
            );
        }
        let read: &dyn Fn(&str) -> Result<String, String> = &|_| Ok("email,iter\na@x,1\n".into());
        let text = GOOD.replacen("scenarios:", "data: users.csv\nscenarios:", 1);
        let e = ScenarioPlan::parse(&text, "t.yaml", read).unwrap_err();
        assert!(
            e.message
                .contains("the column 'iter' is hidden by the built-in {{iter}}"),
            "{e}"
        );
        assert!(parse(&GOOD.replace("token", "_Token_2")).is_ok());
    }

    #[test]
    fn thresholds_keep_the_files_order() {
        let text = GOOD.replacen(
            "thresholds:\n",
            "thresholds:\n  errors: [rate < 1%]\n  checks{check:is ok}: [rate > 0.9]\n",
            1,
        ) + "  iterations: [count > 0]\n  connect: [max < 1s]\n";
        let plan = parse(&text).unwrap();
        let keys: Vec<&str> = plan
            .thresholds
            .iter()
            .map(|t| t.text.split(": ").next().unwrap_or_default())
            .collect();
        assert_eq!(
            keys,
            [
                "errors",
                "checks{check:is ok}",
                "response{step:register}",
                "response{step:register}",
                "iterations",
                "connect"
            ]
        );
        rejects(
            "thresholds:\n",
            "thresholds:\n  errors: []\n",
            "errors: []",
            "errors: the list is empty, so nothing is judged",
        );
        let text = GOOD.to_string() + "  response{step:register}: [p(99) < 1s]\n";
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains("appears twice"), "{e}");
        assert_eq!(e.line, text.lines().count(), "{e}");
    }

    #[test]
    fn scaling_keeps_the_graceful_periods() {
        let text = GOOD.replacen(
            "start_vus: 0",
            "start_vus: 0\n    start_time: 10s\n    graceful_stop: 20s\n    graceful_ramp_down: 40s",
            1,
        );
        let s = parse(&text).unwrap().scaled(0.5).scenarios.remove(0);
        assert_eq!(s.start_time, Duration::from_secs(5));
        assert_eq!(s.executor.length(), Duration::from_secs(45));
        assert_eq!(s.graceful_stop, Duration::from_secs(20));
        let Executor::RampingVus { graceful_ramp_down, .. } = s.executor else {
            panic!("ramping-vus")
        };
        assert_eq!(graceful_ramp_down, Duration::from_secs(40));
        let text = GOOD.replacen(
            RAMP,
            "executor: shared-iterations\n    vus: 2\n    iterations: 5\n    max_duration: 1m\n",
            1,
        );
        let s = parse(&text).unwrap().scaled(0.5).scenarios.remove(0);
        assert_eq!(s.executor.length(), Duration::from_secs(30));
        assert_eq!(s.graceful_stop, Duration::from_secs(30));
    }

    #[test]
    fn data_columns_are_variables() {
        let text = GOOD
            .replacen("scenarios:", "data: users.csv\nscenarios:", 1)
            .replacen("{{token}}", "{{email}}", 1);
        let plan = ScenarioPlan::parse(&text, "t.yaml", &|_| Ok("email,password\na@x,1\nb@x,2\n".into())).unwrap();
        let data = plan.data.unwrap();
        assert_eq!(data.columns, ["email", "password"]);
        assert_eq!(data.row_count, 2);
        assert_eq!(data.cursor, Cursor::PerVu);
    }
}
