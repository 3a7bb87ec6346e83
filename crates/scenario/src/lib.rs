//! throng's scenarios: a YAML file of scenarios, each an executor (how
//! iterations start: closed-model VUs or open-model arrival rates) and a
//! flow (the requests, pauses and groups of one iteration), with templates,
//! captures, checks and thresholds.
//!
//! ```text
//!  SCENARIO.yaml ── spec::ScenarioPlan::parse ──► ScenarioPlan (validated;
//!                   (parse_with: the target from   errors carry file:line:column)
//!                    --target or {{env.NAME}})
//!                   spec/raw.rs (serde types, as written) ─ spec/validate/ ─►
//!                   spec/types.rs (the validated types)
//!  ScenarioPlan  ── throng-engine ──► requests, rendered from template::Template,
//!                   responses read by checks::{Capture, Check}
//!  Measurements  ── threshold::Threshold::evaluate ──► Verdict
//! ```
//!
//! `grpc:` steps carry their method (grpc.rs: `.proto` files compiled with
//! protox, or descriptors from server reflection through the caller), so
//! the engine only encodes messages and decodes replies.
//!
//! Nothing here does I/O except reading the data and `.proto` files (and
//! asking server reflection) through the caller.

mod base_url;
pub mod checks;
pub mod cookies;
pub mod csv;
pub mod expr;
pub mod grpc;
pub mod schedule;
pub mod spec;
pub mod template;
pub mod threshold;

pub use checks::{Capture, CaptureFrom, Check, CheckKind, ResponseView};
pub use cookies::CookieJar;
pub use schedule::{ArrivalCurve, SegmentArrivals, segment_arrivals, share};
pub use spec::GrpcStep;
pub use spec::{Add, AddValue, Branch, Condition, CustomMetric, SETUP_LIMIT, TEARDOWN_LIMIT};
pub use spec::{
    BaseUrl, Body, Cookies, Cursor, DEFAULT_REDIRECTS, DataSpec, Defaults, Executor, JsonTemplate, Request, Scenario,
    ScenarioError, ScenarioPlan, Stage, Step, TargetInputs, Think, WebSocket, WsMessage, capture_names, environment,
    stage_names,
};
pub use spec::{ExpectEvent, SseSpec};
pub use spec::{JsStep, js_steps};
pub use spec::{MAX_MQTT_PAYLOAD, MqttMessage, MqttPayload, MqttStep, MqttVersion, mqtts, topic_matches};
pub use template::{Context, EnvRenderError, Template, TemplateError, TemplateFault};
pub use threshold::{StormShape, Threshold, Verdict};
