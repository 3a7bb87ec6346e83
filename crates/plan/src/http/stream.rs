//! `--sse` and `--llm`: each response is an event stream, read event by
//! event (`text/event-stream`), with `--sse-events`, `--sse-duration` and
//! `--slo`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::parse_duration;
use crate::error::PlanError;

/// The most events `--sse-events` may ask for.
pub const MAX_STREAM_EVENTS: u64 = 1 << 40;

/// How an LLM API streams its tokens (`--llm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmApi {
    /// OpenAI-compatible chat completions: `data:` chunks with
    /// `choices[].delta.content`, an optional `usage` chunk, `data: [DONE]`.
    OpenAi,
}

/// `--slo`: what a stream must meet to count in the goodput.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slo {
    /// Time to first token under this.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub ttft: Option<Duration>,
    /// Every gap between two tokens under this.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub itl: Option<Duration>,
}

impl Slo {
    /// Reads `ttft < 500ms, itl < 50ms` (either or both).
    pub fn parse(text: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, bound)) = part.split_once('<') else {
                return Err(format!(
                    "'{part}' is not 'METRIC < DURATION'; write e.g. 'ttft < 500ms, itl < 50ms'"
                ));
            };
            let bound = parse_duration(bound.trim()).map_err(|e| format!("'{part}': {e}"))?;
            let slot = match name.trim() {
                "ttft" => &mut slo.ttft,
                "itl" => &mut slo.itl,
                other => {
                    return Err(format!("'{other}' is not a metric an SLO takes; use ttft or itl"));
                }
            };
            *slot = Some(bound);
        }
        if slo == Slo::default() {
            return Err("no bound given; write e.g. 'ttft < 500ms, itl < 50ms'".to_string());
        }
        Ok(slo)
    }

    /// True when a stream whose first token came after `ttft` and whose
    /// longest gap between tokens was `itl` meets it.
    pub fn met(&self, ttft: Option<Duration>, itl: Option<Duration>) -> bool {
        let under = |bound: Option<Duration>, d: Option<Duration>| match bound {
            None => true,
            Some(b) => d.is_some_and(|d| d < b),
        };
        // A stream without a token never meets a time-to-first-token bound;
        // one with a single token has no gap and meets any gap bound.
        under(self.ttft, ttft) && (self.itl.is_none() || under(self.itl, itl.or(Some(Duration::ZERO))))
    }
}

/// What an HTTP plan reads of each response's event stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSpec {
    /// `--llm`: the events are an LLM API's token chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmApi>,
    /// `--sse-events`: a stream ends (ok) after this many events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
    /// `--sse-duration`: a stream ends (ok) this long after its request
    /// started.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::duration::serde_opt_duration"
    )]
    pub duration: Option<Duration>,
    /// `--slo` (with `--llm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
}

/// The stream flags as typed.
#[derive(Clone, Debug, Default)]
pub struct StreamArgs {
    /// `--sse`.
    pub sse: bool,
    /// `--llm`, as typed.
    pub llm: Option<String>,
    /// `--sse-events`.
    pub events: Option<u64>,
    /// `--sse-duration`.
    pub duration: Option<Duration>,
    /// `--slo`, as typed.
    pub slo: Option<String>,
}

/// Validates the stream flags (None: responses are not read as streams);
/// streams are read over every HTTP version.
pub(super) fn stream_spec(args: &StreamArgs, redirects: u32) -> Result<Option<Box<StreamSpec>>, PlanError> {
    let llm = match args.llm.as_deref() {
        None => None,
        Some("openai") => Some(LlmApi::OpenAi),
        Some(other) => {
            return Err(PlanError::invalid(
                "--llm",
                format!("'{other}' is not an API throng reads; use --llm openai (OpenAI-compatible chat completions)"),
            ));
        }
    };
    if !args.sse && llm.is_none() {
        for (flag, given) in [
            ("--sse-events", args.events.is_some()),
            ("--sse-duration", args.duration.is_some()),
            ("--slo", args.slo.is_some()),
        ] {
            if given {
                return Err(PlanError::invalid(
                    flag,
                    "reads event streams only; add --sse (or --llm openai for token streams)",
                ));
            }
        }
        return Ok(None);
    }
    let flag = if llm.is_some() { "--llm" } else { "--sse" };
    if redirects > 0 {
        return Err(PlanError::invalid(
            flag,
            "does not follow redirects; leave out --redirects",
        ));
    }
    if let Some(n) = args.events
        && !(1..=MAX_STREAM_EVENTS).contains(&n)
    {
        return Err(PlanError::invalid(
            "--sse-events",
            format!("{n} events: give a number from 1 to {MAX_STREAM_EVENTS}"),
        ));
    }
    if args.duration.is_some_and(|d| d.is_zero()) {
        return Err(PlanError::invalid(
            "--sse-duration",
            "0 ends every stream at once; give e.g. 30s",
        ));
    }
    let slo = match &args.slo {
        None => None,
        Some(_) if llm.is_none() => {
            return Err(PlanError::invalid("--slo", "judges token streams; add --llm openai"));
        }
        Some(text) => Some(Slo::parse(text).map_err(|e| PlanError::invalid("--slo", e))?),
    };
    Ok(Some(Box::new(StreamSpec {
        llm,
        events: args.events,
        duration: args.duration,
        slo,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: StreamArgs) -> Result<Option<Box<StreamSpec>>, PlanError> {
        stream_spec(&args, 0)
    }

    #[test]
    fn slo_reads_bounds_and_judges_streams() {
        let slo = Slo::parse("ttft < 500ms, itl < 50ms").unwrap();
        assert_eq!(slo.ttft, Some(Duration::from_millis(500)));
        assert_eq!(slo.itl, Some(Duration::from_millis(50)));
        let ms = |n| Some(Duration::from_millis(n));
        assert!(slo.met(ms(100), ms(10)));
        assert!(slo.met(ms(100), None));
        assert!(!slo.met(ms(500), ms(10)));
        assert!(!slo.met(ms(100), ms(50)));
        assert!(!slo.met(None, None));
        assert!(Slo::parse("itl<5ms").unwrap().met(None, ms(1)));
        for bad in ["", "ttft > 5ms", "tpot < 5ms", "ttft < soon"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn stream_flags_need_a_stream_and_http1() {
        assert_eq!(spec(StreamArgs::default()), Ok(None));
        let e = spec(StreamArgs {
            events: Some(3),
            ..StreamArgs::default()
        })
        .unwrap_err();
        assert!(
            e.to_string().starts_with("--sse-events: ") && e.to_string().contains("add --sse"),
            "{e}"
        );
        let e = spec(StreamArgs {
            sse: true,
            slo: Some("ttft < 1s".into()),
            ..StreamArgs::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("--llm openai"), "{e}");
        let e = spec(StreamArgs {
            llm: Some("claude".into()),
            ..StreamArgs::default()
        })
        .unwrap_err();
        assert!(e.to_string().starts_with("--llm: 'claude'"), "{e}");
        let sse = StreamArgs {
            sse: true,
            ..StreamArgs::default()
        };
        assert!(stream_spec(&sse, 0).is_ok());
        assert!(stream_spec(&sse, 2).is_err());
        let zero = StreamArgs {
            sse: true,
            events: Some(0),
            ..StreamArgs::default()
        };
        assert!(spec(zero).is_err());
        let llm = spec(StreamArgs {
            llm: Some("openai".into()),
            slo: Some("ttft < 2s".into()),
            duration: Some(Duration::from_secs(5)),
            ..StreamArgs::default()
        })
        .unwrap()
        .unwrap();
        assert_eq!(llm.llm, Some(LlmApi::OpenAi));
        assert_eq!(llm.slo.unwrap().ttft, Some(Duration::from_secs(2)));
    }
}
