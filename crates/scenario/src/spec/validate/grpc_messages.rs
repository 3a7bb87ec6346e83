//! A `grpc:` step's request messages: one `message:`, or a list sent in
//! order on a client-streaming call (`messages:`, or `messages_file:`, one
//! JSON message a line), and `encoding:`.
//!
//! ```text
//!  message: | messages: [..] | messages_file: FILE.jsonl  (at most one)
//!     └─► JSON templates ── none templated: encoded and framed once
//! ```

use super::request::literal_json;
use super::*;

/// Longest line of a `messages_file:` (4 MiB: the largest message a gRPC
/// server takes by default).
pub(super) const MAX_MESSAGE_LINE: usize = 4 << 20;

/// A step's request messages, as its file gives them.
pub(super) struct Given {
    pub(super) message: Option<serde_yaml_ng::Value>,
    pub(super) messages: Option<Vec<serde_yaml_ng::Value>>,
    pub(super) file: Option<String>,
}

/// What a step sends: its one message (the request's body) or its list.
pub(super) struct Sent {
    pub(super) body: Body,
    pub(super) list: Vec<JsonTemplate>,
    /// `messages` or `messages_file`, when a list was given.
    pub(super) field: Option<&'static str>,
}

impl Validator<'_> {
    /// The step's messages; `at` finds a field's key after the call's line.
    pub(super) fn grpc_messages(&self, at: &dyn Fn(&str) -> Vec<String>, g: Given) -> Result<Sent, ScenarioError> {
        let given = [g.message.is_some(), g.messages.is_some(), g.file.is_some()];
        if given.iter().filter(|&&b| b).count() > 1 {
            let field = if g.message.is_some() { "message" } else { "messages" };
            return Err(self.err(
                &strs(&at(field)),
                "give one of message: (the message of each call), messages: (a list, sent in order on a \
                 client-streaming call) or messages_file: (a file of JSON lines, one message a line)",
            ));
        }
        if let Some(m) = g.message {
            return Ok(Sent {
                body: Body::Json(self.json(&strs(&at("message")), m)?),
                list: Vec::new(),
                field: None,
            });
        }
        let (field, values) = match (g.messages, g.file) {
            (Some(list), _) => ("messages", list),
            (None, Some(file)) => ("messages_file", self.message_lines(&at("messages_file"), &file)?),
            (None, None) => {
                return Ok(Sent {
                    body: Body::None,
                    list: Vec::new(),
                    field: None,
                });
            }
        };
        let where_ = at(field);
        if values.is_empty() {
            return Err(self.err(
                &strs(&where_),
                format!("{field}: has no message; give at least one, or use message: for a single one"),
            ));
        }
        if values.len() as u64 > crate::grpc::MAX_STREAM_MESSAGES {
            return Err(self.err(
                &strs(&where_),
                format!(
                    "{field}: {} messages; give at most {} a call",
                    values.len(),
                    crate::grpc::MAX_STREAM_MESSAGES
                ),
            ));
        }
        let list = values
            .into_iter()
            .map(|v| self.json(&strs(&where_), v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sent {
            body: Body::None,
            list,
            field: Some(field),
        })
    }

    /// The non-empty lines of `file`, each a JSON value.
    fn message_lines(&self, at: &[String], file: &str) -> Result<Vec<serde_yaml_ng::Value>, ScenarioError> {
        let at = strs(at);
        let text = (self.read)(file).map_err(|e| self.err(&at, format!("messages_file: cannot read '{file}': {e}")))?;
        if text.len() as u64 > throng_plan::MAX_BODY_BYTES {
            return Err(self.err(
                &at,
                format!(
                    "messages_file: '{file}' is {} bytes, more than a call carries (64 MiB); give fewer or smaller \
                     messages",
                    text.len()
                ),
            ));
        }
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            if line.len() > MAX_MESSAGE_LINE {
                return Err(self.err(
                    &at,
                    format!(
                        "messages_file: '{file}' line {n} is {} bytes; a message is at most 4 MiB (one JSON message \
                         a line)",
                        line.len()
                    ),
                ));
            }
            if out.len() as u64 >= crate::grpc::MAX_STREAM_MESSAGES {
                return Err(self.err(
                    &at,
                    format!(
                        "messages_file: '{file}' has more than {} messages; give at most that many a call",
                        crate::grpc::MAX_STREAM_MESSAGES
                    ),
                ));
            }
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                self.err(
                    &at,
                    format!("messages_file: '{file}' line {n}: not JSON ({e}); give one JSON message a line"),
                )
            })?;
            let v = serde_yaml_ng::to_value(v)
                .map_err(|e| self.err(&at, format!("messages_file: '{file}' line {n}: {e}")))?;
            out.push(v);
        }
        Ok(out)
    }

    /// The step's messages encoded and framed, one after another, when
    /// none has a template: once for the run, an error the file's (at
    /// `at`), not a failed call.
    pub(super) fn framed_list(
        &self,
        method: &crate::grpc::Method,
        body: &Body,
        list: &[JsonTemplate],
        at: &[&str],
    ) -> Result<Option<Vec<u8>>, ScenarioError> {
        if list.is_empty() {
            return self.framed_one(method, body, at);
        }
        let mut out = Vec::new();
        for (i, j) in list.iter().enumerate() {
            let Some(v) = literal_json(j) else {
                return Ok(None);
            };
            let framed = method.encode(&v.to_string()).map_err(|e| {
                self.err(
                    at,
                    format!("message {} of the list: {e}; give it in protobuf's JSON mapping", i + 1),
                )
            })?;
            out.extend_from_slice(&framed);
        }
        Ok(Some(out))
    }

    /// A message without templates, encoded now.
    fn framed_one(
        &self,
        method: &crate::grpc::Method,
        body: &Body,
        at: &[&str],
    ) -> Result<Option<Vec<u8>>, ScenarioError> {
        let json = match body {
            Body::None => serde_json::json!({}),
            Body::Json(j) => match literal_json(j) {
                Some(v) => v,
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        method
            .encode(&json.to_string())
            .map(Some)
            .map_err(|e| self.err(at, format!("message: {e}; give it in protobuf's JSON mapping")))
    }

    /// `encoding:`: gzip or identity.
    pub(super) fn grpc_encoding(&self, at: &[String], e: Option<&str>) -> Result<bool, ScenarioError> {
        match e {
            None | Some("identity") => Ok(false),
            Some("gzip") => Ok(true),
            Some(other) => Err(self.err(
                &strs(at),
                format!("encoding: {other}; throng compresses with gzip (encoding: gzip), or not at all (identity)"),
            )),
        }
    }

    /// The bytes a call sends: the framed messages cycled to `n`; past
    /// 64 MiB is refused.
    pub(super) fn call_fits(&self, at: &[String], framed: &[u8], n: Option<u64>) -> Result<(), ScenarioError> {
        let mut lens = Vec::new();
        let mut rest = framed;
        while let Some(p) = rest.get(..5) {
            let len = 5 + u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
            lens.push(len as u64);
            rest = rest.get(len..).unwrap_or_default();
        }
        let n = n.unwrap_or(lens.len() as u64);
        let total: u64 = lens.iter().cycle().take(usize::try_from(n).unwrap_or(usize::MAX)).sum();
        if total > throng_plan::MAX_BODY_BYTES {
            return Err(self.err(
                &strs(at),
                format!("{n} messages come to {total} bytes, more than 64 MiB a call; send fewer or smaller ones"),
            ));
        }
        Ok(())
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
