//! What a storm's connections speak after connecting: NATS, lines of
//! `--send`/`--expect`, or WebSocket, from the target's scheme and
//! `--protocol`.

use std::time::Duration;

use crate::error::PlanError;
use crate::head::Authority;

use super::target::target_path;
use super::userinfo::percent_decode;
use super::*;

/// The protocol from the target's scheme, `--protocol`, and the line steps.
pub(super) fn parse_protocol(
    a: &StormArgs,
    target: &StormTarget,
    timeout: Duration,
) -> Result<Option<Protocol>, PlanError> {
    let named = a.protocol.as_deref().map(str::trim);
    if let Some(m) = super::mqtt::parse_mqtt(a, target)? {
        return Ok(Some(Protocol::Mqtt(m)));
    }
    if matches!(target.scheme, StormScheme::Ws | StormScheme::Wss) {
        return parse_websocket(a, target, timeout).map(Some);
    }
    if a.ping_every.is_some() {
        return Err(PlanError::invalid(
            "--ping-every",
            "applies to WebSocket storms (ws:// or wss:// targets)",
        ));
    }
    let nats = target.scheme == StormScheme::Nats || named == Some("nats");
    if let Some(other) = named.filter(|n| !["nats", "lines", "none"].contains(n)) {
        return Err(PlanError::invalid(
            "--protocol",
            format!("'{other}' is not nats, lines or none"),
        ));
    }
    if named == Some("nats") && !matches!(target.scheme, StormScheme::Tcp | StormScheme::Tls | StormScheme::Nats) {
        return Err(PlanError::invalid(
            "--protocol",
            "nats runs over tcp://, tls:// or nats:// targets",
        ));
    }
    if nats {
        if !a.steps.is_empty() {
            return Err(PlanError::invalid(
                "--send/--expect",
                "line steps do not apply to NATS (it has its own handshake)",
            ));
        }
        let url = url::Url::parse(&a.target).ok();
        let url_user = url.as_ref().map(|u| u.username().to_string()).filter(|u| !u.is_empty());
        let url_pass = url.as_ref().and_then(|u| u.password().map(str::to_string));
        let mut auth = NatsAuth::default();
        match (url_user, url_pass, &a.nats_creds) {
            (Some(_), _, Some(_)) => {
                return Err(PlanError::invalid(
                    "--nats-creds",
                    "give credentials in the URL or in --nats-creds, not both",
                ));
            }
            (Some(user), Some(pass), None) => {
                auth.user = Some(percent_decode(&user));
                auth.password = true;
                auth.secret = Some(percent_decode(&pass));
            }
            (Some(token), None, None) => {
                auth.token = true;
                auth.secret = Some(percent_decode(&token));
            }
            (None, _, Some((path, text))) => {
                let (user, pass) = parse_creds(text).ok_or_else(|| {
                    PlanError::invalid(
                        "--nats-creds",
                        format!("{path}: expected 'user:password' or the user and the password on two lines"),
                    )
                })?;
                auth.user = Some(user);
                auth.password = true;
                auth.secret = Some(pass);
            }
            (None, _, None) => {}
        }
        return Ok(Some(Protocol::Nats(auth)));
    }
    if a.nats_creds.is_some() {
        return Err(PlanError::invalid(
            "--nats-creds",
            "applies to nats:// targets or --protocol nats",
        ));
    }
    if a.steps.is_empty() {
        if named == Some("lines") {
            return Err(PlanError::invalid(
                "--protocol",
                "lines needs steps: --send 'PING\\r\\n' --expect '^\\+PONG'",
            ));
        }
        return Ok(None);
    }
    let mut steps = Vec::new();
    for step in &a.steps {
        steps.push(match step {
            StepArg::Send(text) => {
                LineStep::Send(unescape(text).map_err(|e| PlanError::invalid("--send", e.to_string()))?)
            }
            // The error may quote the text: say where, not what.
            StepArg::SendSecret(text) => LineStep::SendSecret(SecretText::new(unescape(text).map_err(|_| {
                PlanError::invalid(
                    "--send-secret",
                    "has a bad escape; write \\r \\n \\t \\\\ \\0 or \\xHH (two hex digits)",
                )
            })?)),
            StepArg::Expect(text) => {
                LineStep::Expect(Pattern::new(text).map_err(|e| PlanError::invalid("--expect", e.to_string()))?)
            }
            StepArg::SendBinary { .. } => {
                return Err(PlanError::invalid(
                    "--send-binary",
                    "applies to WebSocket storms (ws:// or wss:// targets); use --send with \\xHH escapes",
                ));
            }
        });
    }
    let step_timeout = a.step_timeout.unwrap_or(timeout);
    if step_timeout.is_zero() {
        return Err(PlanError::invalid(
            "--step-timeout",
            "must be longer than 0, e.g. --step-timeout 2s",
        ));
    }
    Ok(Some(Protocol::Lines { steps, step_timeout }))
}

/// A WebSocket storm's upgrade and message steps.
fn parse_websocket(a: &StormArgs, target: &StormTarget, timeout: Duration) -> Result<Protocol, PlanError> {
    if let Some(named) = a.protocol.as_deref().map(str::trim).filter(|n| *n != "websocket") {
        return Err(PlanError::invalid(
            "--protocol",
            format!(
                "'{named}' does not apply to {}: it speaks WebSocket (or MQTT over it: --protocol mqtt)",
                target.url
            ),
        ));
    }
    if a.nats_creds.is_some() {
        return Err(PlanError::invalid("--nats-creds", "applies to nats:// targets"));
    }
    if a.request.is_some() {
        return Err(PlanError::invalid(
            "--request",
            "a WebSocket storm's request is its upgrade (GET of the target's path); leave --request out",
        ));
    }
    let mut steps = Vec::new();
    for step in &a.steps {
        steps.push(match step {
            StepArg::Send(text) => {
                WsStep::Text(unescape(text).map_err(|e| PlanError::invalid("--send", e.to_string()))?)
            }
            StepArg::SendSecret(_) => {
                return Err(PlanError::invalid(
                    "--send-secret",
                    "is not supported for WebSocket storms yet; use --send",
                ));
            }
            StepArg::Expect(text) => {
                WsStep::Expect(Pattern::new(text).map_err(|e| PlanError::invalid("--expect", e.to_string()))?)
            }
            StepArg::SendBinary { path, bytes } => {
                if bytes.len() > MAX_BINARY {
                    return Err(PlanError::invalid(
                        "--send-binary",
                        format!(
                            "{path} holds {} bytes; at most {MAX_BINARY} are sent as one message",
                            bytes.len()
                        ),
                    ));
                }
                WsStep::Binary {
                    file: path.clone(),
                    bytes: bytes.clone(),
                }
            }
        });
    }
    let step_timeout = a.step_timeout.unwrap_or(timeout);
    if step_timeout.is_zero() {
        return Err(PlanError::invalid(
            "--step-timeout",
            "must be longer than 0, e.g. --step-timeout 2s",
        ));
    }
    if a.ping_every.is_some_and(|p| p.is_zero()) {
        return Err(PlanError::invalid(
            "--ping-every",
            "must be longer than 0, e.g. --ping-every 5s",
        ));
    }
    let default_port = if target.scheme.is_tls() { 443 } else { 80 };
    // The target's user:password@ goes out as HTTP's does: `Basic` on the
    // upgrade (the target parsed when it was validated).
    let authorization = url::Url::parse(&a.target)
        .ok()
        .and_then(|u| crate::reach::url_authorization(&u))
        .map(SecretText::new);
    Ok(Protocol::WebSocket(WsSpec {
        path: target_path(&a.target),
        host: Authority::new(&target.host, target.port, default_port).to_string(),
        authorization,
        steps,
        step_timeout,
        ping_every: a.ping_every,
    }))
}

/// Decodes `\r`, `\n`, `\t`, `\\`, `\0` and `\xHH` in a `--send` text.
pub fn unescape(text: &str) -> Result<String, EscapeError> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('0') => out.push('\0'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let b = u8::from_str_radix(&hex, 16).map_err(|_| EscapeError::NotHex {
                    hex: hex.clone(),
                    text: text.to_string(),
                })?;
                out.push(char::from(b));
            }
            Some(o) => {
                return Err(EscapeError::Unknown {
                    escape: o,
                    text: text.to_string(),
                });
            }
            None => {
                return Err(EscapeError::LoneBackslash { text: text.to_string() });
            }
        }
    }
    Ok(out)
}

/// Why a `--send` text's escapes cannot be decoded (it quotes the text:
/// a `--send-secret` says only where).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EscapeError {
    /// `\x` not followed by two hex digits.
    #[error("'\\x{hex}' is not a hex byte in '{text}'")]
    NotHex {
        /// What followed `\x`.
        hex: String,
        /// The whole text.
        text: String,
    },
    /// A backslash before a character that is no escape.
    #[error("'\\{escape}' is not an escape in '{text}'; use \\r, \\n, \\t, \\\\, \\0 or \\xHH")]
    Unknown {
        /// The character after the backslash.
        escape: char,
        /// The whole text.
        text: String,
    },
    /// The text ends with a backslash.
    #[error("'{text}' ends with a lone backslash")]
    LoneBackslash {
        /// The whole text.
        text: String,
    },
}

fn parse_creds(text: &str) -> Option<(String, String)> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    match lines.as_slice() {
        [one] => one.split_once(':').map(|(u, p)| (u.to_string(), p.to_string())),
        [user, pass] => Some((user.to_string(), pass.to_string())),
        _ => None,
    }
}
