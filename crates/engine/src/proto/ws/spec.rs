//! A WebSocket storm's protocol as the plan compiled it (data only: the
//! upgrade and message steps run in `super`).

use std::time::Duration;

/// A WebSocket storm's protocol, ready to run.
#[derive(Debug)]
pub(crate) struct Spec {
    pub path: String,
    pub host: String,
    /// The upgrade's `Authorization` value (its `Debug` is redacted).
    pub authorization: Option<throng_plan::SecretText>,
    pub steps: Vec<Step>,
    pub step_timeout: Duration,
    pub ping_every: Option<Duration>,
}

/// One compiled message step.
#[derive(Debug)]
pub(crate) enum Step {
    Send { binary: bool, data: Vec<u8> },
    Expect(regex::bytes::Regex),
}
