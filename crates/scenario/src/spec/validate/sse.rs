//! An `sse:` step: a request (its keys checked as a `request:`'s) whose
//! response is read as an event stream: `llm:`, `events:`, `duration:`
//! and the `expect_event:` it waits for.

use super::super::raw::{RawExpectEvent, RawRequest, RawSse};
use super::super::sse::{ExpectEvent, SseSpec};
use super::*;

impl Validator<'_> {
    /// An `sse:` step, as the request it sends with its stream's reading.
    pub(super) fn sse(&self, key: &str, s: RawSse, defaults: &Defaults) -> Result<Request, ScenarioError> {
        let path_at = format!("path: {}", s.path);
        let here: [&str; 3] = [self.root.get(), key, &path_at];
        let at = |field: &'static str| -> [&str; 4] { [here[0], here[1], here[2], field] };
        let llm = match s.llm.as_deref() {
            None => None,
            Some("openai") => Some(throng_plan::LlmApi::OpenAi),
            Some(other) => {
                return Err(self.err(
                    &at("llm:"),
                    format!("llm: '{other}' is not an API throng reads; write llm: openai (OpenAI-compatible chat completions)"),
                ));
            }
        };
        if s.events == Some(0) {
            return Err(self.err(
                &at("events:"),
                "events: 0 would end the stream before its first event; give 1 or more, or leave it out",
            ));
        }
        if s.duration.as_ref().is_some_and(|d| d.0.is_zero()) {
            return Err(self.err(
                &at("duration:"),
                "duration: 0s would end the stream at once; give a time such as 5s, or leave it out",
            ));
        }
        let timeout = s.timeout.as_ref().map_or(defaults.timeout, |d| d.0);
        let expect = match s.expect_event {
            None => None,
            Some(e) => Some(self.expect_event(&at("expect_event:"), e, timeout)?),
        };
        let (line, column, _) = self.locate(&here);
        let sse = SseSpec {
            at: format!("{}:{line}:{column}", self.file),
            llm,
            events: s.events,
            duration: s.duration.map(|d| d.0),
            expect,
        };
        let raw = RawRequest {
            name: Some(s.name.unwrap_or_else(|| format!("SSE {}", s.path))),
            method: s.method,
            path: s.path,
            headers: s.headers,
            query: s.query,
            json: s.json,
            form: None,
            body: s.body,
            expect: s.expect,
            max_body: None,
            capture: s.capture,
            check: s.check,
            timeout: s.timeout,
            redirects: Some(0),
            http: s.http,
        };
        let mut req = self.request(key, raw, defaults)?;
        req.sse = Some(Box::new(sse));
        Ok(req)
    }

    /// `expect_event:`: a type and/or a data regex, within a time (the
    /// step's `timeout:` when not given).
    fn expect_event(&self, here: &[&str], e: RawExpectEvent, timeout: Duration) -> Result<ExpectEvent, ScenarioError> {
        if e.event.is_none() && e.data.is_none() {
            return Err(self.err(
                here,
                "expect_event: names no event; give event: (its type, e.g. update) and/or data: (a regex its data \
                 matches)",
            ));
        }
        let data = match e.data {
            None => None,
            Some(re) => Some(regex::Regex::new(&re).map_err(|err| {
                self.err(
                    &[here, &["data:"]].concat(),
                    format!("expect_event: data: is a regex: {err}"),
                )
            })?),
        };
        let within = e.within.map_or(timeout, |d| d.0);
        if within.is_zero() {
            return Err(self.err(
                &[here, &["within:"]].concat(),
                "expect_event: within: 0s leaves no time for the event; give a time such as 5s",
            ));
        }
        Ok(ExpectEvent {
            event: e.event,
            data,
            within,
        })
    }
}
