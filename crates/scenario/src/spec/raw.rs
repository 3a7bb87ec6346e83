//! The scenario file as written: the types serde reads the YAML into,
//! before any check but a value's own form (durations, sizes).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::types::{Cursor, MAX_MAX_BODY};
use crate::threshold::parse_unit_duration;

/// A duration as people type it, checked while the YAML is read (so an
/// error points at the value). The unit is required: `30` reads as seconds
/// to some and as milliseconds (k6's threshold bounds) to others.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dur(pub(super) Duration);

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
pub(super) struct Size(pub(super) u64);

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
pub(super) fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let not_a_size = || SizeError::NotASize(t.to_string());
    let unit_bytes: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" | "KB" => 1000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        _ => return Err(not_a_size()),
    };
    let n: u64 = digits.parse().map_err(|_| not_a_size())?;
    match n.checked_mul(unit_bytes) {
        Some(b) if (1..=MAX_MAX_BODY).contains(&b) => Ok(b),
        _ => Err(SizeError::OutOfRange(t.to_string())),
    }
}

/// Why a `max_body:` is not a size a VU may hold (the text, trimmed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum SizeError {
    /// Not bytes, nor a number with a unit.
    #[error("'{0}' is not a size; write bytes or a number with KiB, MiB, kB or MB, e.g. 4MiB")]
    NotASize(String),
    /// Zero, or more than [`MAX_MAX_BODY`].
    #[error("'{0}' is out of range: max_body is between 1 byte and 64MiB (each VU may hold that much)")]
    OutOfRange(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) target: RawTarget,
    #[serde(default)]
    pub(super) tls: Option<RawTls>,
    #[serde(default)]
    pub(super) defaults: RawDefaults,
    #[serde(default)]
    pub(super) data: Option<RawData>,
    pub(super) scenarios: BTreeMap<String, RawScenario>,
    /// Steps run once before the scenarios start, by a VU of their own.
    pub(super) setup: Option<Vec<RawStep>>,
    /// Steps run once after the scenarios end (or are stopped).
    pub(super) teardown: Option<Vec<RawStep>>,
    /// Custom metrics: name → `counter`, `trend`, `rate` or `gauge`.
    #[serde(default)]
    pub(super) metrics: Ordered<String>,
    #[serde(default)]
    pub(super) thresholds: Ordered<Vec<RawThreshold>>,
    /// The .proto files of the `grpc:` steps.
    pub(super) proto: Option<RawProto>,
}

/// `proto: { files: [...], import_paths: [...] }` or `proto: { reflection: true }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProto {
    #[serde(default)]
    pub(super) files: Vec<String>,
    #[serde(default)]
    pub(super) import_paths: Vec<String>,
    #[serde(default)]
    pub(super) reflection: bool,
}

/// A mapping kept in the file's order (verdict tables follow the file),
/// duplicate keys included: the validator reports them at the second.
#[derive(Debug)]
pub(super) struct Ordered<V>(pub(super) Vec<(String, V)>);

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
pub(super) struct RawTls {
    pub(super) cacert: Option<String>,
    pub(super) cert: Option<String>,
    pub(super) key: Option<String>,
    #[serde(default)]
    pub(super) insecure: bool,
    #[serde(default)]
    pub(super) resume: bool,
    #[serde(default)]
    pub(super) groups: Vec<String>,
    pub(super) version: Option<String>,
    pub(super) sni: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) timeout: Option<Dur>,
    pub(super) expect: Option<Vec<RawStatus>>,
    pub(super) max_body: Option<Size>,
    pub(super) redirects: Option<u32>,
}

/// `target: URL` or `target: { url, http }`.
#[derive(Debug)]
pub(super) enum RawTarget {
    Url(String),
    Full(RawTargetFull),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTargetFull {
    /// Left out in a scenario's target: the file's.
    pub(super) url: Option<String>,
    /// `1.1`, `2` or `3` (read as a number or a string).
    pub(super) http: Option<serde_yaml_ng::Value>,
}

impl ScalarOrMap for RawTarget {
    const EXPECTING: &'static str = "a URL, or a mapping with url: and http:";
    type Map = RawTargetFull;
    fn scalar<E: serde::de::Error>(v: serde_yaml_ng::Value) -> Result<Self, E> {
        match v {
            serde_yaml_ng::Value::String(s) => Ok(RawTarget::Url(s)),
            _ => Err(E::custom(format!("expected {}", Self::EXPECTING))),
        }
    }
    fn map(m: RawTargetFull) -> Self {
        RawTarget::Full(m)
    }
}

/// `data: FILE` or `data: { file, cursor }`.
#[derive(Debug)]
pub(super) enum RawData {
    File(String),
    Full(RawDataFull),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDataFull {
    pub(super) file: String,
    pub(super) cursor: Option<Cursor>,
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
pub(super) trait ScalarOrMap: Sized {
    /// What the value is, for errors.
    const EXPECTING: &'static str;
    /// The mapping form.
    type Map: for<'de> Deserialize<'de>;
    /// The scalar form (a string, number or boolean).
    fn scalar<E: serde::de::Error>(v: serde_yaml_ng::Value) -> Result<Self, E>;
    /// The mapping form, read.
    fn map(m: Self::Map) -> Self;
}

pub(super) struct ScalarOrMapVisitor<T>(pub(super) std::marker::PhantomData<T>);

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

deserialize_scalar_or_map!(RawData, RawThink, RawThreshold, RawTarget);

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(super) enum ExecutorName {
    ConstantVus,
    RampingVus,
    PerVuIterations,
    SharedIterations,
    ConstantArrivalRate,
    RampingArrivalRate,
}

impl ExecutorName {
    /// As written in the file.
    pub(super) fn name(self) -> &'static str {
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
    pub(super) fn fields(self) -> &'static [&'static str] {
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
pub(super) struct RawScenario {
    pub(super) executor: ExecutorName,
    /// Its own target, replacing the file's.
    pub(super) target: Option<RawTarget>,
    pub(super) vus: Option<u64>,
    pub(super) duration: Option<Dur>,
    pub(super) start_vus: Option<u64>,
    pub(super) stages: Option<Vec<RawStage>>,
    pub(super) graceful_ramp_down: Option<Dur>,
    pub(super) iterations: Option<u64>,
    pub(super) max_duration: Option<Dur>,
    pub(super) rate: Option<f64>,
    pub(super) start_rate: Option<f64>,
    pub(super) time_unit: Option<Dur>,
    pub(super) pre_allocated_vus: Option<u64>,
    pub(super) max_vus: Option<u64>,
    pub(super) start_time: Option<Dur>,
    pub(super) graceful_stop: Option<Dur>,
    #[serde(default)]
    pub(super) cookies: super::types::Cookies,
    pub(super) flow: Vec<RawStep>,
    /// Its own .proto files, replacing the file's.
    pub(super) proto: Option<RawProto>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStage {
    pub(super) duration: Dur,
    pub(super) target: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub(super) request: Option<RawRequest>,
    pub(super) think: Option<RawThink>,
    pub(super) group: Option<RawGroup>,
    pub(super) grpc: Option<RawGrpc>,
    pub(super) websocket: Option<RawWebSocket>,
    pub(super) sse: Option<RawSse>,
    pub(super) mqtt: Option<RawMqtt>,
    pub(super) add: Option<RawAdd>,
    /// `js:` JavaScript, with the `sets:` captures it may write and its
    /// `timeout:`.
    pub(super) js: Option<String>,
    pub(super) sets: Option<Vec<String>>,
    pub(super) timeout: Option<Dur>,
    /// `if:` an expression, with `then:` and `else:` steps.
    #[serde(rename = "if")]
    pub(super) when: Option<String>,
    pub(super) then: Option<Vec<RawStep>>,
    #[serde(rename = "else")]
    pub(super) otherwise: Option<Vec<RawStep>>,
    /// `repeat:` a count, with `steps:`.
    pub(super) repeat: Option<u32>,
    /// `until:` an expression, with `max:` and `steps:`.
    pub(super) until: Option<String>,
    pub(super) max: Option<u32>,
    pub(super) steps: Option<Vec<RawStep>>,
    /// `choose:` weighted branches.
    pub(super) choose: Option<Vec<RawBranch>>,
}

/// A `choose:` branch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBranch {
    pub(super) weight: u32,
    pub(super) steps: Vec<RawStep>,
}

/// An `add:` step: a value recorded into a custom metric.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdd {
    pub(super) metric: String,
    /// A number, true/false, or a template that renders one.
    pub(super) value: serde_yaml_ng::Value,
    /// Tags the value is also kept under (`metric{tag:value}`).
    #[serde(default)]
    pub(super) tags: BTreeMap<String, String>,
}

/// A `grpc:` step: a unary or server-streaming call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGrpc {
    pub(super) name: Option<String>,
    pub(super) call: String,
    pub(super) message: Option<serde_yaml_ng::Value>,
    pub(super) messages: Option<Vec<serde_yaml_ng::Value>>,
    pub(super) messages_file: Option<String>,
    pub(super) encoding: Option<String>,
    #[serde(default)]
    pub(super) metadata: BTreeMap<String, String>,
    pub(super) deadline: Option<Dur>,
    pub(super) timeout: Option<Dur>,
    pub(super) expect: Option<Vec<RawStatus>>,
    pub(super) max_body: Option<Size>,
    pub(super) stream_messages: Option<u64>,
    pub(super) stream_rate: Option<u32>,
    #[serde(default)]
    pub(super) capture: BTreeMap<String, RawCapture>,
    #[serde(default)]
    pub(super) check: BTreeMap<String, RawCheck>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebSocket {
    pub(super) name: Option<String>,
    pub(super) url: String,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) messages: Vec<RawWsMessage>,
    pub(super) timeout: Option<Dur>,
    #[serde(default)]
    pub(super) keep: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWsMessage {
    pub(super) send: Option<String>,
    pub(super) send_binary: Option<String>,
    pub(super) expect: Option<String>,
    #[serde(default)]
    pub(super) capture: BTreeMap<String, RawCapture>,
}

/// An `mqtt:` step: the broker, the session, the messages.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMqtt {
    pub(super) name: Option<String>,
    pub(super) url: String,
    /// `3.1.1` or `5` (read as a number or a string).
    pub(super) version: Option<serde_yaml_ng::Value>,
    pub(super) client_id: Option<String>,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    pub(super) keepalive: Option<Dur>,
    pub(super) clean_start: Option<bool>,
    #[serde(default)]
    pub(super) messages: Vec<RawMqttMessage>,
    pub(super) timeout: Option<Dur>,
    #[serde(default)]
    pub(super) keep: bool,
}

/// One message of an `mqtt:` step: subscribe:, publish: or expect:.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMqttMessage {
    pub(super) subscribe: Option<String>,
    pub(super) publish: Option<String>,
    pub(super) expect: Option<RawMqttExpect>,
    pub(super) payload: Option<String>,
    pub(super) payload_file: Option<String>,
    pub(super) qos: Option<u8>,
    pub(super) retain: Option<bool>,
    #[serde(default)]
    pub(super) capture: BTreeMap<String, RawCapture>,
}

/// `expect: { topic, payload }`: either may be left out.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMqttExpect {
    pub(super) topic: Option<String>,
    pub(super) payload: Option<String>,
}

/// `think: 2s` or `think: { min, max }`.
#[derive(Debug)]
pub(super) enum RawThink {
    Fixed(Dur),
    Range(RawThinkRange),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThinkRange {
    pub(super) min: Dur,
    pub(super) max: Dur,
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
pub(super) struct RawGroup {
    pub(super) name: String,
    pub(super) flow: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawStatus {
    Code(u16),
    Text(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequest {
    pub(super) name: Option<String>,
    pub(super) method: Option<String>,
    pub(super) path: String,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) query: BTreeMap<String, serde_yaml_ng::Value>,
    pub(super) json: Option<serde_yaml_ng::Value>,
    pub(super) form: Option<BTreeMap<String, serde_yaml_ng::Value>>,
    pub(super) body: Option<String>,
    pub(super) expect: Option<Vec<RawStatus>>,
    pub(super) max_body: Option<Size>,
    #[serde(default)]
    pub(super) capture: BTreeMap<String, RawCapture>,
    #[serde(default)]
    pub(super) check: BTreeMap<String, RawCheck>,
    pub(super) timeout: Option<Dur>,
    pub(super) redirects: Option<u32>,
    /// Its own protocol (`1.1`, `2`, `3`), replacing its target's.
    pub(super) http: Option<serde_yaml_ng::Value>,
}

/// An `sse:` step: a request's keys (no form:, no redirects) and how
/// its event stream is read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSse {
    pub(super) name: Option<String>,
    pub(super) method: Option<String>,
    pub(super) path: String,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) query: BTreeMap<String, serde_yaml_ng::Value>,
    pub(super) json: Option<serde_yaml_ng::Value>,
    pub(super) body: Option<String>,
    pub(super) expect: Option<Vec<RawStatus>>,
    #[serde(default)]
    pub(super) capture: BTreeMap<String, RawCapture>,
    #[serde(default)]
    pub(super) check: BTreeMap<String, RawCheck>,
    pub(super) timeout: Option<Dur>,
    pub(super) http: Option<serde_yaml_ng::Value>,
    pub(super) llm: Option<String>,
    pub(super) events: Option<u64>,
    pub(super) duration: Option<Dur>,
    pub(super) expect_event: Option<RawExpectEvent>,
}

/// An `sse:` step's `expect_event:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpectEvent {
    pub(super) event: Option<String>,
    pub(super) data: Option<String>,
    pub(super) within: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapture {
    pub(super) json: Option<String>,
    pub(super) header: Option<String>,
    pub(super) regex: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    pub(super) status: Option<Vec<u16>>,
    pub(super) body_contains: Option<String>,
    pub(super) json: Option<String>,
    pub(super) equals: Option<serde_yaml_ng::Value>,
    pub(super) exists: Option<bool>,
    pub(super) header: Option<String>,
    pub(super) contains: Option<String>,
    pub(super) duration_under: Option<Dur>,
    pub(super) expr: Option<String>,
}

/// `- EXPRESSION` or `- { threshold, abort_on_fail, delay, no_samples }`.
#[derive(Debug)]
pub(super) enum RawThreshold {
    Text(String),
    Full(RawThresholdFull),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThresholdFull {
    pub(super) threshold: String,
    #[serde(default)]
    pub(super) abort_on_fail: bool,
    pub(super) delay: Option<Dur>,
    /// What a threshold over no samples is: `fail` (the default) or `pass`.
    pub(super) no_samples: Option<NoSamples>,
}

/// `no_samples: pass | fail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum NoSamples {
    Pass,
    Fail,
}

impl ScalarOrMap for RawThreshold {
    const EXPECTING: &'static str =
        "an expression such as p(95) < 500ms, or a mapping with threshold:, abort_on_fail:, delay: and no_samples:";
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed errors say what the strings said, byte for byte.
    #[test]
    fn size_errors_keep_their_text() {
        assert_eq!(
            parse_size(" 4 GB ").unwrap_err().to_string(),
            "'4 GB' is not a size; write bytes or a number with KiB, MiB, kB or MB, e.g. 4MiB"
        );
        assert_eq!(
            parse_size("KiB").unwrap_err().to_string(),
            "'KiB' is not a size; write bytes or a number with KiB, MiB, kB or MB, e.g. 4MiB"
        );
        assert_eq!(
            parse_size("65MiB").unwrap_err().to_string(),
            "'65MiB' is out of range: max_body is between 1 byte and 64MiB (each VU may hold that much)"
        );
        assert_eq!(parse_size("0"), Err(SizeError::OutOfRange("0".into())));
    }
}
