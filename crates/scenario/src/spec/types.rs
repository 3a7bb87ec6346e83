//! The validated scenario file: what the engine runs and a result keeps.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use throng_plan::{HttpVersion, StatusSet, TlsSettings};

pub use super::executor::{Executor, Stage};
pub use super::js::{DEFAULT_JS_TIMEOUT, JsStep, MAX_JS_CODE, MAX_JS_SETS, MAX_JS_TIMEOUT};
pub use super::mqtt::{MAX_MQTT_PAYLOAD, MqttMessage, MqttPayload, MqttStep, MqttVersion, topic_matches};
pub use crate::base_url::BaseUrl;
use crate::checks::{Capture, Check};
pub use crate::expr::Condition;
use crate::template::Template;
use crate::threshold::Threshold;

/// Default `max_body`: the bytes of a response body that checks and
/// captures see.
pub const DEFAULT_MAX_BODY: u64 = 1 << 20;
/// Largest `max_body`: each VU holds up to this much of a response.
pub const MAX_MAX_BODY: u64 = 64 << 20;

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
    /// Redirects a request follows (0: a 3xx is its final response).
    #[serde(default = "default_redirects")]
    pub redirects: u32,
}

fn default_max_body() -> u64 {
    DEFAULT_MAX_BODY
}

/// Redirects a scenario request follows unless told otherwise (as k6).
pub const DEFAULT_REDIRECTS: u32 = 10;

fn default_redirects() -> u32 {
    DEFAULT_REDIRECTS
}

/// How long a VU's cookie jar keeps what `Set-Cookie` put in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cookies {
    /// Emptied when each iteration starts (as k6).
    #[default]
    PerIteration,
    /// Kept across the VU's iterations.
    Keep,
    /// No jar: `Set-Cookie` is ignored (a `Cookie` header still goes as written).
    Off,
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
    /// Redirects it follows (0: a 3xx is its final response).
    #[serde(default = "default_redirects")]
    pub redirects: u32,
    /// Its own protocol (`http:` on the request), replacing its
    /// scenario target's for this request; same origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpVersion>,
    /// Where that `http:` is written (`file:line:col`), for errors found
    /// before the run.
    #[serde(skip)]
    pub http_at: String,
    /// An `sse:` step: the response is read as an event stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse: Option<Box<super::sse::SseSpec>>,
}

/// A gRPC call of a flow: an HTTP/2 request (its path the method's, its
/// headers the metadata, its JSON body the message) with gRPC's own
/// statuses and deadline. Captures and checks read the reply message as
/// JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrpcStep {
    /// `pkg.Service/Method`.
    pub call: String,
    /// gRPC status codes counted ok (0: OK).
    pub expect: Vec<u16>,
    /// Sent as `grpc-timeout`; the wait ends then too, counted
    /// `grpc.deadline_exceeded`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "throng_plan::serde_opt_duration"
    )]
    pub deadline: Option<Duration>,
    /// The method streams its replies (captures and checks read the last).
    #[serde(default)]
    pub server_streaming: bool,
    /// The method streams its requests: `stream_messages` messages (each
    /// rendered once a call), paced by `stream_rate`, then a half-close.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_streaming: bool,
    /// Messages a client-streaming call sends (unless given: 1, or as many
    /// as `messages`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_messages: Option<u64>,
    /// Messages per second within a client-streaming call (none: as fast
    /// as flow control allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_rate: Option<u32>,
    /// The call as a request: `name`, metadata in `headers`, the message
    /// in `body` (JSON), `captures`, `checks`, `timeout`, `max_body`
    /// (`method`, `path` and `expect` are not used).
    pub request: Request,
    /// The method's descriptors (not in results).
    #[serde(skip)]
    pub method: Option<crate::grpc::Method>,
    /// The framed message (or each of `messages`, in order), when none
    /// has a template (encoded once).
    #[serde(skip)]
    pub framed: Option<Vec<u8>>,
    /// `messages:` (or `messages_file:`'s lines), sent in order by a
    /// client-streaming call, cycled to `stream_messages`; empty: the one
    /// message of `request.body`. Not in results.
    #[serde(skip)]
    pub messages: Vec<JsonTemplate>,
    /// `encoding: gzip`: request messages compressed (`grpc-encoding`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gzip: bool,
}

/// One message of a `websocket:` step, in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WsMessage {
    /// A text message (templated).
    Send(Template),
    /// A binary message (written base64 in the file).
    SendBinary(Vec<u8>),
    /// Waits for a text or binary message the regex matches (others are
    /// passed over), within the step's timeout; its captures read it.
    Expect {
        /// The pattern.
        #[serde(with = "crate::checks::regex_serde")]
        regex: regex::Regex,
        /// Values taken from the matching message (json: or regex:).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        captures: Vec<Capture>,
    },
}

impl PartialEq for WsMessage {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (WsMessage::Send(a), WsMessage::Send(b)) => a == b,
            (WsMessage::SendBinary(a), WsMessage::SendBinary(b)) => a == b,
            (WsMessage::Expect { regex: a, captures: x }, WsMessage::Expect { regex: b, captures: y }) => {
                a.as_str() == b.as_str() && x == y
            }
            _ => false,
        }
    }
}

/// A `websocket:` step: the upgrade (or the VU's kept socket), then its
/// messages in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WebSocket {
    /// Its `step` tag (default: `WS url`).
    pub name: String,
    /// As written: a path on the target, or `ws://` / `wss://`.
    pub url: String,
    /// The path: after the target's base path when `url` is a path, else
    /// from the root (query and templates included).
    pub path: Template,
    /// Headers of the upgrade request (`defaults.headers` too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, Template)>,
    /// The messages, in order.
    pub messages: Vec<WsMessage>,
    /// Limit on the connect and upgrade, and on each expect.
    #[serde(with = "throng_plan::serde_duration")]
    pub timeout: Duration,
    /// Keep the socket open for the VU's next `websocket:` step to the same
    /// URL (else: the close handshake at the end of the step).
    #[serde(default)]
    pub keep: bool,
}

/// A custom metric the file declares (`metrics:`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CustomMetric {
    /// Its name (thresholds and reports use it).
    pub name: String,
    /// What it keeps.
    pub kind: throng_metrics::CustomKind,
}

/// Most custom metrics a file may declare.
pub const MAX_CUSTOM_METRICS: usize = 64;
/// Longest custom metric name.
pub const MAX_METRIC_NAME: usize = 64;

/// What an `add:` step records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AddValue {
    /// A number written in the file (true: 1, false: 0).
    Number(f64),
    /// A template rendered per iteration, then read as a number (or
    /// `true`/`false`).
    Template(Template),
}

impl AddValue {
    /// A rendered value as a number: a decimal number, or `true`/`false`
    /// (1 and 0); None for anything else.
    pub fn read(text: &str) -> Option<f64> {
        match text.trim() {
            "true" => Some(1.0),
            "false" => Some(0.0),
            t => t.parse::<f64>().ok().filter(|v| v.is_finite()),
        }
    }
}

/// An `add:` step: a value into a custom metric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Add {
    /// The metric's name.
    pub metric: String,
    /// Its kind.
    pub kind: throng_metrics::CustomKind,
    /// The value.
    pub value: AddValue,
    /// Tags the value is also kept under, each as `metric{tag:value}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<(String, String)>,
}

/// Most tags an `add:` step may carry.
pub const MAX_ADD_TAGS: usize = 8;

impl Add {
    /// The keys its value is kept under: the metric, then `metric{tag:value}`
    /// for each tag.
    pub fn keys(&self) -> Vec<String> {
        std::iter::once(self.metric.clone())
            .chain(self.tags.iter().map(|(k, v)| format!("{}{{{k}:{v}}}", self.metric)))
            .collect()
    }
}

/// A `choose:` branch: its weight and its steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    pub weight: u32,
    pub flow: Vec<Step>,
}

/// One step of a flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// An HTTP request.
    Request(Box<Request>),
    /// A WebSocket session's messages.
    WebSocket(Box<WebSocket>),
    /// An MQTT session's messages.
    Mqtt(Box<MqttStep>),
    /// A pause.
    Think(Think),
    /// A named sub-flow, timed as a whole.
    Group {
        /// Its `group` tag.
        name: String,
        /// Its steps.
        flow: Vec<Step>,
    },
    /// A gRPC call.
    Grpc(Box<GrpcStep>),
    /// `if:` a condition holds (after the steps before it), its `then:`
    /// steps, else its `else:` steps.
    If {
        cond: Condition,
        then: Vec<Step>,
        #[serde(rename = "else")]
        otherwise: Vec<Step>,
    },
    /// `repeat:` its steps this many times.
    Repeat { times: u32, flow: Vec<Step> },
    /// `until:` its steps run until the condition holds after them, at most
    /// `max` times (reaching `max` fails the loop's check).
    Until { cond: Condition, max: u32, flow: Vec<Step> },
    /// `choose:` one branch per pass, by weight.
    Choose { branches: Vec<Branch> },
    /// A value recorded into a custom metric.
    Add(Box<Add>),
    /// JavaScript run in the VU's own runtime.
    Js(Box<JsStep>),
}

impl Step {
    /// The flows nested in this step (a group's, a branch's, a loop's):
    /// what a walk over every step of a flow descends into.
    pub fn nested(&self) -> Vec<&[Step]> {
        match self {
            Step::Group { flow, .. } | Step::Repeat { flow, .. } | Step::Until { flow, .. } => vec![flow],
            Step::If { then, otherwise, .. } => vec![then, otherwise],
            Step::Choose { branches } => branches.iter().map(|b| b.flow.as_slice()).collect(),
            Step::Request(_)
            | Step::WebSocket(_)
            | Step::Mqtt(_)
            | Step::Think(_)
            | Step::Grpc(_)
            | Step::Add(_)
            | Step::Js(_) => Vec::new(),
        }
    }

    /// [`Step::nested`], to change them.
    pub fn nested_mut(&mut self) -> Vec<&mut Vec<Step>> {
        match self {
            Step::Group { flow, .. } | Step::Repeat { flow, .. } | Step::Until { flow, .. } => vec![flow],
            Step::If { then, otherwise, .. } => vec![then, otherwise],
            Step::Choose { branches } => branches.iter_mut().map(|b| &mut b.flow).collect(),
            Step::Request(_)
            | Step::WebSocket(_)
            | Step::Mqtt(_)
            | Step::Think(_)
            | Step::Grpc(_)
            | Step::Add(_)
            | Step::Js(_) => Vec::new(),
        }
    }
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
    /// Its own `target:`, replacing the file's (None: the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<BaseUrl>,
    /// The VUs' cookie jars.
    #[serde(default)]
    pub cookies: Cookies,
    /// One iteration.
    pub flow: Vec<Step>,
}

impl Scenario {
    /// Where its requests go: its own target, else the file's (`file`).
    pub fn target<'a>(&'a self, file: &'a BaseUrl) -> &'a BaseUrl {
        self.target.as_ref().unwrap_or(file)
    }

    /// The protocols its requests name with their own `http:`, each once,
    /// with where the first request naming it writes it (`file:line:col`).
    pub fn request_protocols(&self) -> Vec<(HttpVersion, &str)> {
        let mut out: Vec<(HttpVersion, &str)> = Vec::new();
        for r in requests(&self.flow) {
            if let Some(h) = r.http
                && !out.iter().any(|(v, _)| *v == h)
            {
                out.push((h, r.http_at.as_str()));
            }
        }
        out
    }

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
    /// `setup:`: a flow run once before the scenarios start, as one VU
    /// (a scenario named `setup`, one iteration); every VU reads its
    /// captures as `{{setup.NAME}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<Scenario>,
    /// `teardown:`: a flow run once after the scenarios end, also when the
    /// run was stopped (a scenario named `teardown`, one iteration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<Scenario>,
    /// Custom metrics (`metrics:`), in the file's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<CustomMetric>,
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
    /// `--trace-context`: each iteration draws a trace id, and each of its
    /// `request:` and `grpc:` steps carries a `traceparent` with that trace
    /// id and a span id of its own; the result keeps the slowest requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<throng_plan::TraceContext>,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    (*v - 1.0).abs() < f64::EPSILON
}

/// How long the `setup:` flow may take before the run gives up on it.
pub const SETUP_LIMIT: Duration = Duration::from_secs(60);
/// How long the `teardown:` flow may take (also after Ctrl-C).
pub const TEARDOWN_LIMIT: Duration = Duration::from_secs(30);

impl ScenarioPlan {
    /// The scenarios, then the `setup:` and `teardown:` flows: every flow
    /// the file holds.
    pub fn all_flows(&self) -> impl Iterator<Item = &Scenario> {
        self.scenarios.iter().chain(&self.setup).chain(&self.teardown)
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
    /// `defaults.headers`, in any request, and in the target when it filled
    /// it in), sorted, each once: the CLI can refuse to start when one is
    /// unset instead of sending it empty, and warn of an `--env` nothing reads.
    pub fn env_names(&self) -> Vec<String> {
        let requests = self.all_flows().flat_map(|s| requests(&s.flow));
        // The targets', when the environment filled them in.
        let targets: Vec<Template> = std::iter::once(&self.target)
            .chain(self.scenarios.iter().filter_map(|s| s.target.as_ref()))
            .filter_map(|t| t.from.as_deref().and_then(|t| Template::compile(t).ok()))
            .collect();
        let names: BTreeSet<&str> = self
            .defaults
            .headers
            .iter()
            .map(|(_, t)| t)
            .chain(requests.flat_map(templates))
            .chain(
                self.all_flows()
                    .flat_map(|s| websockets(&s.flow))
                    .flat_map(ws_templates),
            )
            .chain(
                self.all_flows()
                    .flat_map(|s| mqtts(&s.flow))
                    .flat_map(MqttStep::templates),
            )
            .chain(self.all_flows().flat_map(|s| grpc_lists(&s.flow)))
            .chain(&targets)
            .flat_map(Template::env_names)
            .collect();
        names.into_iter().map(str::to_string).collect()
    }

    /// Every header name the file sets (defaults and requests).
    fn header_names(&self) -> Vec<&str> {
        let requests = self.all_flows().flat_map(|s| requests(&s.flow));
        self.defaults
            .headers
            .iter()
            .map(|(n, _)| n.as_str())
            .chain(requests.flat_map(|r| r.headers.iter().map(|(n, _)| n.as_str())))
            .chain(
                self.all_flows()
                    .flat_map(|s| websockets(&s.flow))
                    .flat_map(|w| w.headers.iter().map(|(n, _)| n.as_str())),
            )
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

    /// Sends a `traceparent` on every request (`throng run
    /// --trace-context`); refused when the file sets that header itself.
    pub fn with_trace_context(
        mut self,
        trace: Option<throng_plan::TraceContext>,
    ) -> Result<ScenarioPlan, throng_plan::PlanError> {
        if trace.is_some() {
            throng_plan::refuse_own_traceparent(&self.file, self.header_names().into_iter())?;
        }
        self.trace = trace;
        Ok(self)
    }

    /// The plan as results and reports keep it: the values of secret
    /// headers read `<redacted>`.
    pub fn redacted(&self) -> ScenarioPlan {
        fn flow(steps: &mut [Step], secret: &[String], with: &Template) {
            for step in steps {
                match step {
                    Step::Request(r) => headers(&mut r.headers, secret, with),
                    Step::Grpc(g) => headers(&mut g.request.headers, secret, with),
                    Step::WebSocket(w) => headers(&mut w.headers, secret, with),
                    Step::Mqtt(m) => {
                        if m.password.is_some() {
                            m.password = Some(with.clone());
                        }
                    }
                    Step::Think(_) | Step::Add(_) | Step::Js(_) => {}
                    nested => nested.nested_mut().into_iter().for_each(|f| flow(f, secret, with)),
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
        for s in plan
            .scenarios
            .iter_mut()
            .chain(plan.setup.as_mut())
            .chain(plan.teardown.as_mut())
        {
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

/// The variable names a flow's steps capture, groups entered, in order
/// (a name captured twice, once).
pub fn capture_names(flow: &[Step]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in requests(flow) {
        for c in &r.captures {
            if !out.contains(&c.var.as_str()) {
                out.push(c.var.as_str());
            }
        }
    }
    for w in websockets(flow) {
        for m in &w.messages {
            if let WsMessage::Expect { captures, .. } = m {
                for c in captures {
                    if !out.contains(&c.var.as_str()) {
                        out.push(c.var.as_str());
                    }
                }
            }
        }
    }
    for m in mqtts(flow) {
        for msg in &m.messages {
            if let MqttMessage::Expect { captures, .. } = msg {
                for c in captures {
                    if !out.contains(&c.var.as_str()) {
                        out.push(c.var.as_str());
                    }
                }
            }
        }
    }
    for j in js_steps(flow) {
        for v in &j.sets {
            if !out.contains(&v.as_str()) {
                out.push(v.as_str());
            }
        }
    }
    out
}

/// Every request of a flow, groups entered, in the order an iteration
/// makes them.
pub(super) fn requests(flow: &[Step]) -> Vec<&Request> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::Request(r) => out.push(r.as_ref()),
            Step::Grpc(g) => out.push(&g.request),
            Step::Think(_) | Step::WebSocket(_) | Step::Mqtt(_) | Step::Add(_) | Step::Js(_) => {}
            nested => nested.nested().into_iter().for_each(|f| out.extend(requests(f))),
        }
    }
    out
}

/// Every `js:` step of a flow, groups entered, in order.
pub fn js_steps(flow: &[Step]) -> Vec<&JsStep> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::Js(j) => out.push(j.as_ref()),
            Step::Think(_) | Step::Request(_) | Step::Grpc(_) | Step::Add(_) | Step::WebSocket(_) | Step::Mqtt(_) => {}
            nested => nested.nested().into_iter().for_each(|f| out.extend(js_steps(f))),
        }
    }
    out
}

/// Every `websocket:` step of a flow, groups entered, in order.
pub(super) fn websockets(flow: &[Step]) -> Vec<&WebSocket> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::WebSocket(w) => out.push(w.as_ref()),
            Step::Think(_) | Step::Request(_) | Step::Grpc(_) | Step::Add(_) | Step::Js(_) | Step::Mqtt(_) => {}
            nested => nested.nested().into_iter().for_each(|f| out.extend(websockets(f))),
        }
    }
    out
}

/// Every `mqtt:` step of a flow, groups entered, in order.
pub fn mqtts(flow: &[Step]) -> Vec<&MqttStep> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::Mqtt(m) => out.push(m.as_ref()),
            Step::Think(_) | Step::Request(_) | Step::Grpc(_) | Step::Add(_) | Step::Js(_) | Step::WebSocket(_) => {}
            nested => nested.nested().into_iter().for_each(|f| out.extend(mqtts(f))),
        }
    }
    out
}

/// The templates a `websocket:` step renders (not `defaults.headers`).
pub(super) fn ws_templates(w: &WebSocket) -> Vec<&Template> {
    let mut out = vec![&w.path];
    out.extend(w.headers.iter().map(|(_, t)| t));
    out.extend(w.messages.iter().filter_map(|m| match m {
        WsMessage::Send(t) => Some(t),
        _ => None,
    }));
    out
}

/// The templates in a JSON template, in order.
pub(super) fn json_templates<'a>(j: &'a JsonTemplate, out: &mut Vec<&'a Template>) {
    match j {
        JsonTemplate::Text(t) => out.push(t),
        JsonTemplate::Array(a) => a.iter().for_each(|x| json_templates(x, out)),
        JsonTemplate::Object(o) => o.iter().for_each(|(_, x)| json_templates(x, out)),
        JsonTemplate::Value(_) => {}
    }
}

/// The templates of the `grpc:` steps' lists of messages in a flow,
/// groups entered.
pub(super) fn grpc_lists(flow: &[Step]) -> Vec<&Template> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::Grpc(g) => g.messages.iter().for_each(|j| json_templates(j, &mut out)),
            s => s.nested().into_iter().for_each(|f| out.extend(grpc_lists(f))),
        }
    }
    out
}

/// The templates a request renders itself (not `defaults.headers`).
pub(super) fn templates(r: &Request) -> Vec<&Template> {
    let json = json_templates;
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
