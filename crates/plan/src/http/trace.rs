//! `--trace-context`: a W3C Trace Context (level 1) `traceparent` header on
//! every request, its ids new for each one.
//!
//! The plan renders the header once with a placeholder value; the engine
//! copies each request into a buffer of the task's own and writes the ids
//! over the placeholder ([`traceparent_at`], [`write_ids`]) before sending
//! it: no allocation per request.

use serde::{Deserialize, Serialize};

use super::HttpArgs;
use crate::error::PlanError;

/// The header's name as sent.
pub const TRACEPARENT: &str = "traceparent";
/// The value the plan renders; its ids are overwritten per request (an
/// all-zero trace id is invalid, so no real header reads like this).
const PLACEHOLDER: &str = "00-00000000000000000000000000000000-0000000000000000-01";
/// Where the placeholder's line starts, as it is searched for in a request.
const LINE: &[u8] = b"\r\ntraceparent: 00-00000000000000000000000000000000-0000000000000000-";
/// Slowest requests kept when `--slowest` is not given.
pub const DEFAULT_SLOWEST: u32 = 10;
/// The most `--slowest` may ask for (each is a line in the result).
pub const MAX_SLOWEST: u32 = 1_000;

/// The `--trace-context` flag's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sampling {
    /// Flags `01`: the server is asked to record the trace.
    #[default]
    Sampled,
    /// Flags `00`: ids to correlate by, without asking for a recording.
    Unsampled,
}

/// A plan's trace context: every request carries a `traceparent` with a
/// new random trace id and parent id; the result keeps the slowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// The header's trace flags.
    pub sampling: Sampling,
    /// How many of the slowest requests the result keeps, with their ids.
    pub slowest: u32,
}

impl TraceContext {
    /// The trace flags as they are sent (two hex digits).
    pub fn flags(&self) -> &'static [u8; 2] {
        match self.sampling {
            Sampling::Sampled => b"01",
            Sampling::Unsampled => b"00",
        }
    }
}

/// The step: `--trace-context` and `--slowest`, checked against the
/// headers given.
pub(super) fn trace_context(args: &HttpArgs, headers: &[(String, String)]) -> Result<Option<TraceContext>, PlanError> {
    let Some(trace) = trace_context_of(args.trace_context, args.slowest)? else {
        return Ok(None);
    };
    if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(TRACEPARENT)) {
        return Err(PlanError::invalid(
            "--trace-context",
            "sets each request's traceparent header, and -H gives one too; drop -H traceparent (or leave \
             out --trace-context to send yours as it is)",
        ));
    }
    Ok(Some(trace))
}

/// `--trace-context` and `--slowest` as given (to `throng http` or
/// `throng run`): None without `--trace-context`.
pub fn trace_context_of(sampling: Option<Sampling>, slowest: Option<u32>) -> Result<Option<TraceContext>, PlanError> {
    let Some(sampling) = sampling else {
        if slowest.is_some() {
            return Err(PlanError::invalid(
                "--slowest",
                "keeps the slowest requests with their trace ids, so it needs --trace-context; add \
                 --trace-context, or leave out --slowest",
            ));
        }
        return Ok(None);
    };
    let slowest = slowest.unwrap_or(DEFAULT_SLOWEST);
    if slowest == 0 || slowest > MAX_SLOWEST {
        return Err(PlanError::invalid(
            "--slowest",
            format!("must be 1 to {MAX_SLOWEST}, not {slowest}"),
        ));
    }
    Ok(Some(TraceContext { sampling, slowest }))
}

/// Refuses a `traceparent` among `names` (the headers a scenario `file`
/// sets) when `--trace-context` sets each request's.
pub fn refuse_own_traceparent<'a>(file: &str, mut names: impl Iterator<Item = &'a str>) -> Result<(), PlanError> {
    if names.any(|n| n.eq_ignore_ascii_case(TRACEPARENT)) {
        return Err(PlanError::invalid(
            "--trace-context",
            format!(
                "sets each request's traceparent header, and {file} gives one too; remove that header from the file \
                 (or leave out --trace-context to send yours as it is)"
            ),
        ));
    }
    Ok(())
}

/// A `traceparent` value with these ids and flags (for requests rendered
/// one by one, as a scenario's are).
pub fn traceparent_value(trace_id: &[u8; 16], parent_id: &[u8; 8], flags: &[u8; 2]) -> String {
    let mut value = PLACEHOLDER.as_bytes().to_vec();
    write_ids(&mut value, "00-".len(), trace_id, parent_id, flags);
    // Hex digits and dashes: always UTF-8.
    String::from_utf8_lossy(&value).into_owned()
}

/// The placeholder header a plan with trace context renders.
pub(super) fn placeholder() -> (String, String) {
    (TRACEPARENT.to_string(), PLACEHOLDER.to_string())
}

/// The placeholder value a plan with trace context renders (HTTP/2 header
/// blocks carry it as a literal too).
pub fn placeholder_value() -> &'static str {
    PLACEHOLDER
}

/// Where the placeholder value's trace id starts in `block` (an HPACK
/// header block, whose literals are raw), or None.
pub fn placeholder_at(block: &[u8]) -> Option<usize> {
    let value = PLACEHOLDER.as_bytes();
    block
        .windows(value.len())
        .position(|w| w == value)
        .map(|i| i + "00-".len())
}

/// Where the placeholder's trace id starts in `request` (its 32 hex
/// digits, then `-`, the 16 of the parent id, `-`, the two of the flags),
/// or None when it has no placeholder. Searched in the head only.
pub fn traceparent_at(request: &[u8]) -> Option<usize> {
    let head_end = request.windows(4).position(|w| w == b"\r\n\r\n")?;
    request[..head_end + 2]
        .windows(LINE.len())
        .position(|w| w == LINE)
        .map(|i| i + b"\r\ntraceparent: 00-".len())
}

/// Writes `trace_id`, `parent_id` and `flags` over the value at `at` (from
/// [`traceparent_at`]) in `request`.
pub fn write_ids(request: &mut [u8], at: usize, trace_id: &[u8; 16], parent_id: &[u8; 8], flags: &[u8; 2]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let Some(out) = request.get_mut(at..at + 32 + 1 + 16 + 1 + 2) else {
        return;
    };
    let (trace, rest) = out.split_at_mut(32);
    for (pair, b) in trace.chunks_exact_mut(2).zip(trace_id) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    let (parent, rest) = rest[1..].split_at_mut(16);
    for (pair, b) in parent.chunks_exact_mut(2).zip(parent_id) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    rest[1..3].copy_from_slice(flags);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_land_on_the_placeholder() {
        let mut req = format!("GET / HTTP/1.1\r\nHost: a\r\n{TRACEPARENT}: {PLACEHOLDER}\r\n\r\nbody").into_bytes();
        let at = traceparent_at(&req).unwrap();
        write_ids(&mut req, at, &[0xab; 16], &[0x01; 8], b"00");
        let text = String::from_utf8(req).unwrap();
        assert_eq!(
            text,
            format!(
                "GET / HTTP/1.1\r\nHost: a\r\ntraceparent: 00-{}-{}-00\r\n\r\nbody",
                "ab".repeat(16),
                "01".repeat(8)
            )
        );
        assert_eq!(traceparent_at(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), None);
        assert_eq!(
            traceparent_value(&[0xab; 16], &[0x01; 8], b"01"),
            format!("00-{}-{}-01", "ab".repeat(16), "01".repeat(8))
        );
    }
}
