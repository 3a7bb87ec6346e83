//! A `websocket:` step: its URL (a path on the target, or the target's own
//! origin), headers, and messages, each one of send:, send_binary: or
//! expect: (with its captures).

use std::collections::BTreeMap;

use super::super::raw::{RawCapture, RawWebSocket, RawWsMessage};
use super::super::types::{Defaults, WebSocket, WsMessage};
use super::{RESERVED, Validator, json_pointer};
use crate::checks::{Capture, CaptureFrom};
use crate::spec::ScenarioError;
use crate::template::{Template, is_identifier};

impl Validator<'_> {
    /// A `websocket:` step. Its URL is a path on the target (`/chat`) or
    /// `ws://` / `wss://` with the target's own host and port (checked in
    /// [`Self::websocket_origins`], where the target is known).
    pub(super) fn websocket(
        &self,
        key: &str,
        w: RawWebSocket,
        defaults: &Defaults,
    ) -> Result<WebSocket, ScenarioError> {
        let url_at = format!("url: {}", w.url);
        let here: Vec<&str> = vec![self.root.get(), key, "websocket:", &url_at];
        let path = self.ws_path(&here, &w.url)?;
        if w.messages.is_empty() {
            return Err(self.err_first(
                &[
                    &[self.root.get(), key, &url_at, "messages:"],
                    &[self.root.get(), key, "websocket:", "messages:"],
                ],
                "messages is empty; give at least one, e.g. messages: [{ send: hello }, { expect: hello }]",
            ));
        }
        let at = WsAt { key, url_at: &url_at };
        let mut messages = Vec::new();
        for (i, m) in w.messages.into_iter().enumerate() {
            messages.push(self.ws_message(&at, i + 1, m)?);
        }
        Ok(WebSocket {
            name: w.name.unwrap_or_else(|| format!("WS {}", w.url)),
            path: self.template(&here, path)?,
            headers: w
                .headers
                .iter()
                .map(|(k, v)| self.header(&here, k, v))
                .collect::<Result<_, ScenarioError>>()?,
            messages,
            timeout: w.timeout.map_or(defaults.timeout, |d| d.0),
            keep: w.keep,
            url: w.url,
        })
    }

    /// The path a step's `url` asks for: the URL when it is a path, its
    /// path when it is a `ws://` or `wss://` URL without credentials.
    fn ws_path<'u>(&self, here: &[&str], url: &'u str) -> Result<&'u str, ScenarioError> {
        if url.starts_with('/') {
            return Ok(url);
        }
        let Some(rest) = url.strip_prefix("ws://").or_else(|| url.strip_prefix("wss://")) else {
            return Err(self.err(
                here,
                format!(
                    "url '{url}' is neither a path on the target (/chat) nor ws:// or wss:// (ws://127.0.0.1:8080/chat)"
                ),
            ));
        };
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if authority.contains('@') {
            // The URL names the step in reports: a password there would
            // be in every output. Refused as a target's is, unquoted.
            return Err(self.err(
                here,
                format!(
                    "url '{}' has credentials (user@), which throng does not send; remove them and give an \
                     Authorization header in defaults.headers (redacted in results)",
                    throng_plan::mask_userinfo(url)
                ),
            ));
        }
        Ok(rest.find('/').map_or("/", |i| &rest[i..]))
    }

    /// An error at message `n` of the step `at`: at the message's own line
    /// (a block sequence), else at the first `needle` after `messages:`.
    fn ws_err(&self, at: &WsAt<'_>, n: usize, needle: Option<&str>, message: String) -> ScenarioError {
        let seq = [
            &[self.root.get(), at.key, at.url_at, "messages:"][..],
            &[self.root.get(), at.key, "websocket:", "messages:"][..],
        ];
        let item = seq.iter().find_map(|p| self.seq_item(p, n, needle));
        match item {
            Some((line, column)) => ScenarioError {
                file: self.file.to_string(),
                line,
                column,
                message,
            },
            None => {
                let mut p: Vec<&str> = seq[1].to_vec();
                p.extend(needle);
                self.err(&p, message)
            }
        }
    }

    /// Message `n` (from 1) of the step `at`: exactly one of send:,
    /// send_binary: or expect:, and captures with expect: only.
    fn ws_message(&self, at: &WsAt<'_>, n: usize, m: RawWsMessage) -> Result<WsMessage, ScenarioError> {
        let err_at = |needle: Option<&str>, message: String| self.ws_err(at, n, needle, message);
        let given = [
            ("send:", m.send.is_some()),
            ("send_binary:", m.send_binary.is_some()),
            ("expect:", m.expect.is_some()),
        ];
        let kinds: Vec<&str> = given.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect();
        let [kind] = kinds[..] else {
            let key = kinds.first().copied().or((!m.capture.is_empty()).then_some("capture:"));
            return Err(err_at(
                key,
                format!(
                    "message {n} has {}; give exactly one of send:, send_binary: or expect:",
                    if kinds.is_empty() {
                        "none of them".to_string()
                    } else {
                        kinds.join(" and ")
                    }
                ),
            ));
        };
        if !m.capture.is_empty() && kind != "expect:" {
            return Err(err_at(
                Some("capture:"),
                format!("message {n}: capture: reads a received message, so it goes with expect:, not {kind}"),
            ));
        }
        Ok(match (m.send, m.send_binary, m.expect) {
            (Some(t), None, None) => {
                WsMessage::Send(Template::compile(&t).map_err(|e| err_at(Some("send:"), format!("message {n}: {e}")))?)
            }
            (None, Some(b), None) => {
                use base64::Engine as _;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(b.trim())
                    .map_err(|e| {
                        err_at(
                            Some("send_binary:"),
                            format!("message {n}: send_binary is base64 (e.g. AAEC/w==): {e}"),
                        )
                    })?;
                WsMessage::SendBinary(data)
            }
            (None, None, Some(re)) => {
                let regex = regex::Regex::new(&re)
                    .map_err(|e| err_at(Some("expect:"), format!("message {n}: expect: is a regex: {e}")))?;
                let captures = self.ws_captures(at, n, m.capture)?;
                WsMessage::Expect { regex, captures }
            }
            // Exactly one was counted above.
            _ => {
                return Err(err_at(
                    None,
                    format!("message {n}: give one of send:, send_binary: or expect:"),
                ));
            }
        })
    }

    /// The captures of message `n`'s `expect:`: json: or regex: each.
    fn ws_captures(
        &self,
        at: &WsAt<'_>,
        n: usize,
        capture: BTreeMap<String, RawCapture>,
    ) -> Result<Vec<Capture>, ScenarioError> {
        self.message_captures(capture, |var, m| self.ws_err(at, n, Some(var), m))
    }

    /// The captures of a received message (a `websocket:` or `mqtt:`
    /// step's `expect:`): json: or regex: each; `err` places an error at
    /// the variable's capture.
    pub(super) fn message_captures(
        &self,
        capture: BTreeMap<String, RawCapture>,
        err: impl Fn(&str, String) -> ScenarioError,
    ) -> Result<Vec<Capture>, ScenarioError> {
        let mut captures = Vec::new();
        for (var, c) in capture {
            let cat = |m: String| err(&var, m);
            if !is_identifier(&var) || RESERVED.contains(&var.as_str()) {
                return Err(cat(format!(
                    "capture '{var}': a variable name is letters, digits and _, not starting with a \
                         digit, and not one of the built-ins ({})",
                    RESERVED.join(", ")
                )));
            }
            let from = match (c.json, c.header, c.regex) {
                (Some(p), None, None) => {
                    json_pointer(&p).map_err(|e| cat(format!("capture {var}: {e}")))?;
                    CaptureFrom::Json(p)
                }
                (None, None, Some(re)) => {
                    CaptureFrom::Regex(regex::Regex::new(&re).map_err(|e| cat(format!("capture {var}: regex: {e}")))?)
                }
                _ => {
                    return Err(cat(format!(
                        "capture {var}: give exactly one of json: or regex: (a message has no headers)"
                    )));
                }
            };
            captures.push(Capture { var, from });
        }
        Ok(captures)
    }

    /// Line and column (from 1) of the `n`-th item (from 1) of the block
    /// sequence under the key the `path` ends at — of `needle` in it when
    /// the item has it; None for a flow sequence (`[…]`) or when not found.
    pub(super) fn seq_item(&self, path: &[&str], n: usize, needle: Option<&str>) -> Option<(usize, usize)> {
        let (line, _, all) = self.locate(path);
        let lines: Vec<&str> = self.text.lines().collect();
        let head = lines.get(line.checked_sub(1)?)?;
        if !all || !head.trim_end().ends_with(':') {
            return None;
        }
        let indent = |l: &str| l.len() - l.trim_start().len();
        let column = |l: &str, byte: usize| l[..byte].chars().count() + 1;
        let mut dash: Option<usize> = None;
        let mut count = 0;
        let mut item: Option<usize> = None;
        for (i, l) in lines.iter().enumerate().skip(line) {
            let t = l.trim_start();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let d = indent(l);
            let at = *dash.get_or_insert(d);
            if d < at || d == at && !t.starts_with('-') {
                break;
            }
            if d == at {
                if item.is_some() {
                    break;
                }
                count += 1;
                if count == n {
                    item = Some(i);
                }
            }
            if item.is_some()
                && let Some(c) = needle.and_then(|nd| l.find(nd))
            {
                return Some((i + 1, column(l, c)));
            }
        }
        item.map(|i| (i + 1, column(lines[i], indent(lines[i]) + 2)))
    }
}

/// Where a `websocket:` step is written: its scenario's key and its
/// `url: …` line.
struct WsAt<'a> {
    key: &'a str,
    url_at: &'a str,
}
