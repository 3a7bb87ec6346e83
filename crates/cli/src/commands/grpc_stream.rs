//! `throng grpc`'s request messages: one, or on a client-streaming or
//! bidirectional method those each call sends, as one body of framed
//! messages (gzip-compressed with `--grpc-encoding gzip`).
//!
//! ```text
//!  --data JSON          ── one message ──┐
//!  --data @FILE.jsonl   ── one a line ───┴─► messages, cycled to
//!                                            --stream-messages N ──► body
//! ```
//!
//! The engine sends the body's messages in order (paced by
//! `--stream-rate`), then half-closes the request.

use prost::Message as _;
use prost_reflect::{DynamicMessage, MethodDescriptor};
use throng_plan::MAX_BODY_BYTES;

use crate::exit::UsageError;

/// Most messages one call may send: each costs the engine an offset.
pub(super) const MAX_STREAM_MESSAGES: u64 = 100_000;

/// The framed messages each call of `method` sends, and how many: the
/// `--data` message (or JSON lines) cycled to `n` (default: the number
/// given).
pub(super) fn body(
    method: &MethodDescriptor,
    json: Option<(&str, &str)>,
    n: Option<u64>,
    rate: Option<u32>,
) -> Result<(Vec<u8>, u64), UsageError> {
    if rate == Some(0) {
        return Err(UsageError(
            "--stream-rate 0: give at least 1 message per second, or leave it out to send as fast as flow \
             control allows"
                .into(),
        ));
    }
    let messages = match json {
        Some((from, text)) if is_json_lines(text) => lines(method, from, text)?,
        json => vec![encode(method, json)?],
    };
    let n = n.unwrap_or(messages.len() as u64);
    if n == 0 || n > MAX_STREAM_MESSAGES {
        return Err(UsageError(format!(
            "--stream-messages {n}: give 1 to {MAX_STREAM_MESSAGES} messages a call"
        )));
    }
    let total: u64 = messages.iter().cycle().take(n as usize).map(|m| m.len() as u64).sum();
    if total > MAX_BODY_BYTES {
        return Err(UsageError(format!(
            "--stream-messages {n}: the messages of a call come to {total} bytes, more than 64 MiB; send fewer \
             or smaller ones"
        )));
    }
    let mut body = Vec::with_capacity(total as usize);
    for m in messages.iter().cycle().take(n as usize) {
        body.extend_from_slice(m);
    }
    Ok((body, n))
}

/// The request message from JSON (empty: the default message), encoded
/// and framed as a gRPC message (uncompressed flag, 4-byte length).
pub(super) fn encode(method: &MethodDescriptor, json: Option<(&str, &str)>) -> Result<Vec<u8>, UsageError> {
    let input = method.input();
    let message = match json {
        None => DynamicMessage::new(input),
        Some((from, text)) => {
            let mut de = serde_json::Deserializer::from_str(text);
            DynamicMessage::deserialize(input.clone(), &mut de)
                .and_then(|m| de.end().map(|()| m))
                .map_err(|e| {
                    let at = if from == "--data" {
                        format!("--data (line {}, column {})", e.line(), e.column())
                    } else {
                        format!("--data @{from}:{}:{}", e.line(), e.column())
                    };
                    UsageError(format!(
                        "{at}: not a {} message: {e}; give the message in protobuf's JSON mapping",
                        input.full_name()
                    ))
                })?
        }
    };
    let bytes = message.encode_to_vec();
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&n| u64::from(n) + 5 <= MAX_BODY_BYTES)
        .ok_or_else(|| UsageError("--data: the encoded message is larger than 64 MiB; send less".into()))?;
    let mut framed = Vec::with_capacity(bytes.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(&bytes);
    Ok(framed)
}

/// `--grpc-encoding gzip`: each framed message of `body` compressed, its
/// flag set.
pub(super) fn gzip_messages(body: &[u8]) -> Result<Vec<u8>, UsageError> {
    use std::io::Write as _;
    let mut out = Vec::with_capacity(body.len() / 2);
    let mut rest = body;
    while let Some(prefix) = rest.get(..5) {
        // The body is throng's own, framed whole by encode.
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        let message = rest.get(5..5 + len).unwrap_or_default();
        rest = rest.get(5 + len..).unwrap_or_default();
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let packed = e
            .write_all(message)
            .and_then(|()| e.finish())
            .map_err(|err| UsageError(format!("--grpc-encoding gzip: cannot compress the message: {err}")))?;
        out.push(1);
        out.extend_from_slice(&(packed.len() as u32).to_be_bytes());
        out.extend_from_slice(&packed);
        if out.len() as u64 > MAX_BODY_BYTES {
            return Err(UsageError(
                "--grpc-encoding gzip: the compressed messages of a call come to more than 64 MiB; send fewer or \
                 smaller ones"
                    .into(),
            ));
        }
    }
    Ok(out)
}

/// `--stream-messages` and `--stream-rate` are for client streams only.
pub(super) fn refuse_flags(call: &str, n: Option<u64>, rate: Option<u32>) -> Result<(), UsageError> {
    let flag = match (n, rate) {
        (Some(_), _) => "--stream-messages",
        (None, Some(_)) => "--stream-rate",
        (None, None) => return Ok(()),
    };
    Err(UsageError(format!(
        "{flag}: {call} takes one request message a call (not client-streaming); leave {flag} out"
    )))
}

/// More than one non-empty line, the first a JSON value of its own: one
/// message a line (a message spread over lines is one message).
fn is_json_lines(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match (lines.next(), lines.next()) {
        (Some(first), Some(_)) => serde_json::from_str::<serde::de::IgnoredAny>(first).is_ok(),
        _ => false,
    }
}

/// Each non-empty line of `text` as a framed message, its errors at its
/// line.
fn lines(method: &MethodDescriptor, from: &str, text: &str) -> Result<Vec<Vec<u8>>, UsageError> {
    let mut messages = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        messages.push(encode(method, Some((from, line))).map_err(|e| {
            // encode says line 1 (of the line alone); the line is the text's.
            let (one, this) = if from == "--data" {
                ("--data (line 1,".to_string(), format!("--data (line {n},"))
            } else {
                (format!("--data @{from}:1:"), format!("--data @{from}:{n}:"))
            };
            UsageError(e.0.replacen(&one, &this, 1))
        })?);
    }
    Ok(messages)
}
