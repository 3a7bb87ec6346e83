//! An `sse:` step's stream: a request whose response is read as Server-Sent
//! Events (optionally an LLM API's token chunks), ended by a count, a
//! duration, the event it waits for, or the server.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use throng_plan::LlmApi;

/// How an `sse:` step reads its response (the request itself is the
/// step's [`crate::Request`], whose `sse` this is).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SseSpec {
    /// `llm: openai`: the events are chat completion chunks (tokens,
    /// `ttft`, `itl`; `[DONE]` ends the stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmApi>,
    /// `events: N`: the stream ends (ok) after N events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    /// `duration:`: the stream ends (ok) this long after its request.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "throng_plan::serde_opt_duration"
    )]
    pub duration: Option<Duration>,
    /// `expect_event:`: the event the step waits for; the stream ends
    /// (ok) when it arrives, and fails when it does not in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<ExpectEvent>,
    /// Where the step is written (`file:line:col`), for errors found once
    /// its target is known.
    #[serde(skip)]
    pub at: String,
}

/// The event an `sse:` step waits for: its type and/or a regex on its
/// data, within a time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExpectEvent {
    /// The event's type (`event:` field; `message` when it sets none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// A regex its data matches.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::checks::regex_serde_opt"
    )]
    pub data: Option<regex::Regex>,
    /// How long after the request it may arrive.
    #[serde(with = "throng_plan::serde_duration")]
    pub within: Duration,
}

impl ExpectEvent {
    /// Whether an event of type `kind` with `data` is the one awaited.
    pub fn matches(&self, kind: &str, data: &str) -> bool {
        self.event.as_deref().is_none_or(|k| k == kind) && self.data.as_ref().is_none_or(|re| re.is_match(data))
    }
}

impl PartialEq for ExpectEvent {
    fn eq(&self, other: &Self) -> bool {
        self.event == other.event
            && self.within == other.within
            && self.data.as_ref().map(regex::Regex::as_str) == other.data.as_ref().map(regex::Regex::as_str)
    }
}
