//! What `--sse` and `--llm` read of one response: its body, decoded, goes
//! through the event-stream reader ([`crate::proto::sse`]); each event is
//! timed (`first_event`, `event_gap`) and, for an LLM stream, read as a
//! chat completion chunk (`ttft`, `itl`, tokens). I/O-free: bytes and the
//! instant they arrived go in, phases go to the recorder, and the caller
//! asks whether the stream should end.
//!
//! ```text
//!  body bytes ─► sse::Reader ─► event ─► first_event | event_gap
//!                                  └─ (llm) JSON chunk ─► token? ─► ttft | itl
//!                                                    └─ [DONE] ─► ended
//! ```

use std::time::{Duration, Instant};

use throng_metrics::{Phase, Recorder, StreamSeen};
use throng_plan::{LlmApi, StreamSpec};

use super::sse::{Event, Limits, Reader, TooLarge};

/// One stream being read.
#[derive(Debug)]
pub(crate) struct Watch {
    reader: Reader,
    tally: Tally,
}

/// Everything but the reader (borrowed apart from it in the reader's
/// callback).
#[derive(Debug)]
struct Tally {
    llm: Option<LlmApi>,
    max_events: Option<u64>,
    /// Where `first_event` and `ttft` are measured from.
    origin: Instant,
    events: u64,
    event_bytes: u64,
    last_event: Option<Instant>,
    tokens: u64,
    usage_tokens: Option<u64>,
    first_token: Option<Instant>,
    last_token: Option<Instant>,
    longest_gap: Option<Duration>,
    /// `--sse-events` reached, an LLM stream's `[DONE]` read, or the
    /// awaited event arrived.
    end: Option<&'static str>,
    /// A scenario `sse:` step's `expect_event:`: the event that ends it.
    awaited: Option<throng_scenario::ExpectEvent>,
    /// The awaited event arrived.
    matched: bool,
    /// Keep the data of the awaited event (of the last one, with none
    /// awaited) in `kept`, for a step's captures and checks.
    keep: bool,
    kept: String,
}

impl Watch {
    /// A stream of `spec` whose request started (or was meant to start,
    /// in an open loop) at `origin`.
    pub(crate) fn new(spec: &StreamSpec, origin: Instant) -> Watch {
        Watch {
            reader: Reader::new(Limits::default()),
            tally: Tally {
                llm: spec.llm,
                max_events: spec.events,
                origin,
                events: 0,
                event_bytes: 0,
                last_event: None,
                tokens: 0,
                usage_tokens: None,
                first_token: None,
                last_token: None,
                longest_gap: None,
                end: None,
                awaited: None,
                matched: false,
                keep: false,
                kept: String::new(),
            },
        }
    }

    /// A scenario `sse:` step's stream: it ends, `expected`, when the
    /// `awaited` event arrives; with `keep`, the data of that event (of
    /// the last, with none awaited) is kept for its captures and checks.
    pub(crate) fn awaiting(mut self, awaited: Option<throng_scenario::ExpectEvent>, keep: bool) -> Watch {
        self.tally.awaited = awaited;
        self.tally.keep = keep;
        self
    }

    /// Whether the awaited event arrived.
    pub(crate) fn matched(&self) -> bool {
        self.tally.matched
    }

    /// The data kept (see [`Watch::awaiting`]); empty when none was.
    pub(crate) fn kept(&self) -> &str {
        &self.tally.kept
    }

    /// Reads body bytes that arrived at `at`, recording each event's
    /// phases in `rec`. Events after the stream ended are not read.
    pub(crate) fn feed(&mut self, bytes: &[u8], at: Instant, rec: &mut Recorder) -> Result<(), TooLarge> {
        let tally = &mut self.tally;
        if tally.end.is_some() {
            return Ok(());
        }
        self.reader.feed(bytes, &mut |e| tally.event(e, at, rec))
    }

    /// Why the stream should end now, before the server ends it: `events`
    /// (`--sse-events` reached) or `completed` (an LLM stream's `[DONE]`).
    pub(crate) fn ended(&self) -> Option<&'static str> {
        self.tally.end
    }

    /// The last event (or the start, before any) — a stall is measured
    /// from here.
    pub(crate) fn last_progress(&self) -> Instant {
        self.tally.last_event.unwrap_or(self.tally.origin)
    }

    /// What the stream saw, once it ended at `done` after its request
    /// started at `t_send`; `slo` judges an LLM stream that `ok` ended well.
    pub(crate) fn seen(&self, t_send: Instant, done: Instant, ok: bool, spec: &StreamSpec) -> StreamSeen {
        let t = &self.tally;
        let tokens = t.usage_tokens.unwrap_or(t.tokens);
        let took = done.saturating_duration_since(t_send).as_secs_f64();
        let ttft = t.first_token.map(|f| f.saturating_duration_since(t.origin));
        StreamSeen {
            events: t.events,
            event_bytes: t.event_bytes,
            tokens,
            tokens_per_second: (t.llm.is_some() && tokens > 0 && took > 0.0).then(|| tokens as f64 / took),
            slo_met: match (&spec.slo, t.llm) {
                (Some(slo), Some(_)) => Some(ok && slo.met(ttft, t.longest_gap)),
                _ => None,
            },
        }
    }
}

impl Tally {
    fn event(&mut self, e: Event<'_>, at: Instant, rec: &mut Recorder) {
        if self.end.is_some() {
            return;
        }
        self.events += 1;
        self.event_bytes += e.data.len() as u64;
        match self.last_event {
            None => rec.phase(at, Phase::FirstEvent, at.saturating_duration_since(self.origin)),
            Some(last) => rec.phase(at, Phase::EventGap, at.saturating_duration_since(last)),
        }
        self.last_event = Some(at);
        if self.llm.is_some() {
            self.chunk(e.data, at, rec);
        }
        let matched = self.awaited.as_ref().is_some_and(|a| a.matches(e.kind, e.data));
        // An LLM stream's `[DONE]` is its end, not an event worth reading.
        let done = self.llm.is_some() && e.data.trim() == "[DONE]";
        if self.keep && (matched || self.awaited.is_none() && !done) {
            // Bounded: an event's data is at most the reader's limit.
            self.kept.clear();
            self.kept.push_str(e.data);
        }
        if matched {
            self.matched = true;
            self.end = Some("expected");
        } else if self.max_events.is_some_and(|n| self.events >= n) {
            self.end = Some("events");
        }
    }

    /// An OpenAI chat completion chunk: a token when a choice's delta has
    /// content, the usage's count when sent, `[DONE]` the end. A chunk that
    /// is not JSON carries no token.
    fn chunk(&mut self, data: &str, at: Instant, rec: &mut Recorder) {
        if data.trim() == "[DONE]" {
            self.end = Some("completed");
            return;
        }
        let Ok(chunk) = serde_json::from_str::<serde_json::Value>(data) else {
            return;
        };
        if let Some(n) = chunk.pointer("/usage/completion_tokens").and_then(|n| n.as_u64()) {
            self.usage_tokens = Some(n);
        }
        let token = chunk.get("choices").and_then(|c| c.as_array()).is_some_and(|choices| {
            choices.iter().any(|c| {
                c.pointer("/delta/content")
                    .and_then(|s| s.as_str())
                    .is_some_and(|s| !s.is_empty())
            })
        });
        if !token {
            return;
        }
        self.tokens += 1;
        match self.last_token {
            None => {
                rec.phase(at, Phase::Ttft, at.saturating_duration_since(self.origin));
                self.first_token = Some(at);
            }
            Some(last) => {
                let gap = at.saturating_duration_since(last);
                rec.phase(at, Phase::Itl, gap);
                self.longest_gap = Some(self.longest_gap.map_or(gap, |g| g.max(gap)));
            }
        }
        self.last_token = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(llm: bool, events: Option<u64>) -> StreamSpec {
        StreamSpec {
            llm: llm.then_some(LlmApi::OpenAi),
            events,
            duration: None,
            slo: throng_plan::Slo::parse("ttft < 1s, itl < 1s").ok().filter(|_| llm),
        }
    }

    fn count(m: &throng_metrics::Measurements, phase: &str) -> u64 {
        m.phases.get(phase).map_or(0, |h| h.count())
    }

    #[test]
    fn events_are_timed_and_counted_whatever_the_splits() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(t0);
        let mut w = Watch::new(&spec(false, None), t0);
        let text = b"data: a\n\n: comment\n\ndata: bb\n\nid: 3\ndata: c";
        for (i, part) in text.chunks(5).enumerate() {
            w.feed(part, t0 + Duration::from_millis(i as u64), &mut rec).unwrap();
        }
        assert_eq!(w.ended(), None);
        let seen = w.seen(t0, t0 + Duration::from_millis(50), true, &spec(false, None));
        assert_eq!(
            (seen.events, seen.event_bytes, seen.tokens, seen.slo_met),
            (2, 3, 0, None)
        );
        let m = rec.finish(t0 + Duration::from_secs(1));
        assert_eq!((count(&m, "first_event"), count(&m, "event_gap")), (1, 1));
    }

    #[test]
    fn the_awaited_event_ends_the_stream_and_its_data_is_kept() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(t0);
        let awaited = throng_scenario::ExpectEvent {
            event: Some("tick".into()),
            data: Some(regex::Regex::new("^2").unwrap()),
            within: Duration::from_secs(1),
        };
        let mut w = Watch::new(&spec(false, Some(10)), t0).awaiting(Some(awaited), true);
        w.feed(b"data: 2 not a tick\n\nevent: tick\ndata: 1\n\n", t0, &mut rec)
            .unwrap();
        assert_eq!((w.ended(), w.matched(), w.kept()), (None, false, ""));
        w.feed(b"event: tick\ndata: 2!\n\nevent: tick\ndata: 2?\n\n", t0, &mut rec)
            .unwrap();
        assert_eq!((w.ended(), w.matched(), w.kept()), (Some("expected"), true, "2!"));
        assert_eq!(w.seen(t0, t0, true, &spec(false, Some(10))).events, 3);

        // None awaited: the last event's data is kept.
        let mut w = Watch::new(&spec(false, None), t0).awaiting(None, true);
        w.feed(b"data: a\n\ndata: b\n\n", t0, &mut rec).unwrap();
        assert_eq!((w.ended(), w.kept()), (None, "b"));
    }

    #[test]
    fn sse_events_ends_the_stream_at_its_count() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(t0);
        let mut w = Watch::new(&spec(false, Some(2)), t0);
        w.feed(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", t0, &mut rec).unwrap();
        assert_eq!(w.ended(), Some("events"));
        assert_eq!(w.seen(t0, t0, true, &spec(false, Some(2))).events, 2);
    }

    #[test]
    fn chat_chunks_give_tokens_ttft_itl_and_done() {
        let t0 = Instant::now();
        let s = spec(true, None);
        let mut rec = Recorder::new(t0);
        let mut w = Watch::new(&s, t0);
        let at = |ms| t0 + Duration::from_millis(ms);
        let role = r#"data: {"choices":[{"delta":{"role":"assistant","content":""}}]}"#;
        w.feed(format!("{role}\n\n").as_bytes(), at(100), &mut rec).unwrap();
        for i in 0..3 {
            let tok = format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"t{i}\"}}}}]}}\n\n");
            w.feed(tok.as_bytes(), at(200 + 10 * i), &mut rec).unwrap();
        }
        w.feed(b"data: not json\n\n", at(240), &mut rec).unwrap();
        assert_eq!(w.ended(), None);
        w.feed(
            b"data: [DONE]\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n\n",
            at(250),
            &mut rec,
        )
        .unwrap();
        assert_eq!(w.ended(), Some("completed"));
        let seen = w.seen(t0, at(500), true, &s);
        assert_eq!((seen.events, seen.tokens, seen.slo_met), (6, 3, Some(true)));
        assert_eq!(seen.tokens_per_second, Some(6.0));
        assert_eq!(w.seen(t0, at(500), false, &s).slo_met, Some(false));
        let m = rec.finish(at(1000));
        assert_eq!((count(&m, "ttft"), count(&m, "itl")), (1, 2));
        assert_eq!(m.phases["ttft"].max() / 1000, 200);

        let mut rec = Recorder::new(t0);
        let mut w = Watch::new(&s, t0);
        let usage = r#"data: {"choices":[],"usage":{"completion_tokens":42}}"#;
        w.feed(format!("{usage}\n\n").as_bytes(), at(1), &mut rec).unwrap();
        assert_eq!(w.seen(t0, at(2), true, &s).tokens, 42);
    }

    #[test]
    fn an_endless_line_is_refused_at_the_limit() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(t0);
        let mut w = Watch::new(&spec(false, None), t0);
        let block = vec![b'x'; 64 * 1024];
        let mut failed = None;
        for _ in 0..40 {
            if let Err(e) = w.feed(&block, t0, &mut rec) {
                failed = Some(e);
                break;
            }
        }
        assert_eq!(failed, Some(TooLarge::Line(1 << 20)));
    }
}
