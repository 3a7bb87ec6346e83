//! An `mqtt:` step: its broker URL (mqtt://, mqtts://, or over WebSocket
//! ws:// and wss://; no credentials),
//! the session (version, client id, user, password, keep-alive, clean
//! start), and messages, each one of subscribe:, publish: or expect: (with
//! its captures). A `payload_file:` is read once the flows are checked.

use super::super::raw::{RawMqtt, RawMqttMessage};
use super::super::types::{Defaults, MAX_MQTT_PAYLOAD, MqttMessage, MqttPayload, MqttStep, MqttVersion, Step};
use super::Validator;
use crate::spec::ScenarioError;
use crate::template::Template;

/// Keep-alive when the step gives none.
const DEFAULT_KEEPALIVE: u64 = 60;

impl Validator<'_> {
    /// An `mqtt:` step of scenario `key`.
    pub(super) fn mqtt(&self, key: &str, m: RawMqtt, defaults: &Defaults) -> Result<MqttStep, ScenarioError> {
        let url_at = format!("url: {}", m.url);
        // At the url: line whether it is quoted or not (then the step's
        // first url: after its key).
        let (tls, host, port, websocket) = self.mqtt_url(&m.url).map_err(|message| {
            self.err_first(
                &[
                    &[self.root.get(), key, "mqtt:", &url_at],
                    &[self.root.get(), key, "mqtt:", "url:"],
                ],
                message,
            )
        })?;
        let version = match &m.version {
            None => MqttVersion::V311,
            Some(v) => {
                let text = match v {
                    serde_yaml_ng::Value::String(s) => s.clone(),
                    serde_yaml_ng::Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                match text.as_str() {
                    "3.1.1" | "4" => MqttVersion::V311,
                    "5" | "5.0" => MqttVersion::V5,
                    _ => {
                        let at = [self.root.get(), key, &url_at, "version:"];
                        return Err(self.err(&at, format!("version '{text}' is not an MQTT version; give 3.1.1 or 5")));
                    }
                }
            }
        };
        let keepalive = match m.keepalive {
            None => std::time::Duration::from_secs(DEFAULT_KEEPALIVE),
            Some(d) if d.0.subsec_nanos() == 0 && d.0.as_secs() <= u64::from(u16::MAX) => d.0,
            Some(_) => {
                let at = [self.root.get(), key, &url_at, "keepalive:"];
                return Err(self.err(&at, "keepalive is whole seconds from 0s to 65535s (0s: none), e.g. 30s"));
            }
        };
        if m.password.is_some() && m.user.is_none() {
            let at = [self.root.get(), key, &url_at, "password:"];
            return Err(self.err(
                &at,
                "password: goes with user: (MQTT sends no password without a user name)",
            ));
        }
        let field = |name: &str, text: &str| {
            let at = [self.root.get(), key, &url_at, name];
            self.template(&at, text)
        };
        let client_id = field(
            "client_id:",
            m.client_id.as_deref().unwrap_or("throng-{{scenario}}-{{vu}}"),
        )?;
        let user = m.user.as_deref().map(|u| field("user:", u)).transpose()?;
        let password = m.password.as_deref().map(|p| field("password:", p)).transpose()?;
        let mut messages = Vec::new();
        for (i, raw) in m.messages.into_iter().enumerate() {
            messages.push(self.mqtt_message(key, &url_at, i + 1, raw)?);
        }
        Ok(MqttStep {
            name: m.name.unwrap_or_else(|| format!("MQTT {}", m.url)),
            url: m.url,
            host,
            port,
            tls,
            websocket,
            version,
            client_id,
            user,
            password,
            keepalive,
            clean_start: m.clean_start.unwrap_or(true),
            messages,
            timeout: m.timeout.map_or(defaults.timeout, |d| d.0),
            keep: m.keep,
        })
    }

    /// `mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]` (1883 and 8883 by
    /// default), without credentials or a path; or over WebSocket
    /// `ws://HOST[:PORT][/PATH]` or `wss://…` (80 and 443), whose path and
    /// query (`/` when none) the upgrade asks for. Returns (TLS, host,
    /// port, the WebSocket path).
    fn mqtt_url(&self, url: &str) -> Result<(bool, String, u16, Option<String>), String> {
        let schemes = [
            ("mqtt://", false, false, 1883),
            ("mqtts://", true, false, 8883),
            ("ws://", false, true, 80),
            ("wss://", true, true, 443),
        ];
        let Some((rest, tls, ws, default_port)) = schemes
            .iter()
            .find_map(|&(scheme, tls, ws, port)| url.strip_prefix(scheme).map(|r| (r, tls, ws, port)))
        else {
            return Err(format!(
                "url '{url}' is not mqtt://, mqtts://, ws:// or wss:// (e.g. mqtt://127.0.0.1:1883, or ws://127.0.0.1:8080/mqtt over WebSocket)"
            ));
        };
        let (authority, path) = match ws {
            true => match rest.find(['/', '?']) {
                Some(i) => (&rest[..i], Some(rest[i..].to_string())),
                None => (rest, None),
            },
            false => (rest.strip_suffix('/').unwrap_or(rest), None),
        };
        if authority.contains('@') {
            // The URL names the step in reports: a password there would
            // be in every output.
            return Err(format!(
                "url '{}' has credentials (user@), which would show in every report; remove them and give user: \
                 and password: (redacted in results)",
                throng_plan::mask_userinfo(url)
            ));
        }
        let form = if ws { "ws://HOST:PORT/PATH" } else { "mqtt://HOST:PORT" };
        let bad = |why: &str| format!("url '{url}': {why}; write {form}");
        if authority.contains(['/', '?', '#']) {
            return Err(bad(
                "an MQTT broker URL has no path or query (only over WebSocket: ws://, wss://)",
            ));
        }
        if path
            .as_deref()
            .is_some_and(|p| p.contains('#') || p.chars().any(char::is_whitespace))
        {
            return Err(bad("the WebSocket path has a fragment (#) or a space"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && (!h.starts_with('[') || h.ends_with(']')) => (
                h,
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| bad("the port is 1 to 65535"))?,
            ),
            _ => (authority, default_port),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("the host is missing"));
        }
        let websocket = ws.then(|| match path {
            Some(p) if p.starts_with('/') => p,
            Some(query) => format!("/{query}"),
            None => "/".to_string(),
        });
        Ok((tls, host.to_string(), port, websocket))
    }

    /// An error at message `n` of an `mqtt:` step: at the message's own
    /// line (a block sequence), else at the step's `messages:`.
    fn mqtt_err(&self, key: &str, url_at: &str, n: usize, needle: Option<&str>, message: String) -> ScenarioError {
        let seq = [
            &[self.root.get(), key, url_at, "messages:"][..],
            &[self.root.get(), key, "mqtt:", "messages:"][..],
        ];
        match seq.iter().find_map(|p| self.seq_item(p, n, needle)) {
            Some((line, column)) => ScenarioError {
                file: self.file.to_string(),
                line,
                column,
                message,
            },
            None => self.err(seq[1], message),
        }
    }

    /// Message `n` (from 1): exactly one of subscribe:, publish: or
    /// expect:, with only the fields that kind reads.
    fn mqtt_message(&self, key: &str, url_at: &str, n: usize, m: RawMqttMessage) -> Result<MqttMessage, ScenarioError> {
        let err_at = |needle: Option<&str>, message: String| self.mqtt_err(key, url_at, n, needle, message);
        let given = [
            ("subscribe:", m.subscribe.is_some()),
            ("publish:", m.publish.is_some()),
            ("expect:", m.expect.is_some()),
        ];
        let kinds: Vec<&str> = given.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect();
        let [kind] = kinds[..] else {
            return Err(err_at(
                kinds.first().copied(),
                format!(
                    "message {n} has {}; give exactly one of subscribe:, publish: or expect:",
                    if kinds.is_empty() {
                        "none of them".to_string()
                    } else {
                        kinds.join(" and ")
                    }
                ),
            ));
        };
        // The fields each kind reads; any other is a mistake said so.
        let fields: [(&str, bool, &[&str]); 5] = [
            ("payload:", m.payload.is_some(), &["publish:"]),
            ("payload_file:", m.payload_file.is_some(), &["publish:"]),
            ("retain:", m.retain.is_some(), &["publish:"]),
            ("capture:", !m.capture.is_empty(), &["expect:"]),
            ("qos:", m.qos.is_some(), &["subscribe:", "publish:"]),
        ];
        if let Some((f, _, with)) = fields.iter().find(|(_, set, with)| *set && !with.contains(&kind)) {
            return Err(err_at(
                Some(f),
                format!("message {n}: {f} goes with {}, not {kind}", with.join(" or ")),
            ));
        }
        let qos = m.qos.unwrap_or(0);
        if qos > 2 {
            return Err(err_at(
                Some("qos:"),
                format!("message {n}: qos is 0, 1 or 2, not {qos}"),
            ));
        }
        let compile = |needle: &str, text: &str| {
            Template::compile(text).map_err(|e| err_at(Some(needle), format!("message {n}: {e}")))
        };
        let outside = |text: &str| -> String {
            // The text outside {{ }}: what a wildcard check reads.
            let mut out = String::new();
            let mut rest = text;
            while let Some(i) = rest.find("{{") {
                out.push_str(&rest[..i]);
                rest = rest[i..].find("}}").map_or("", |j| &rest[i + j + 2..]);
            }
            out + rest
        };
        Ok(match (m.subscribe, m.publish, m.expect) {
            (Some(filter), None, None) => {
                if filter.is_empty() {
                    return Err(err_at(
                        Some("subscribe:"),
                        format!("message {n}: subscribe: names a topic filter, e.g. sensors/+/temp"),
                    ));
                }
                MqttMessage::Subscribe {
                    filter: compile("subscribe:", &filter)?,
                    qos,
                }
            }
            (None, Some(topic), None) => {
                if topic.is_empty() || outside(&topic).contains(['+', '#']) {
                    return Err(err_at(
                        Some("publish:"),
                        format!(
                            "message {n}: publish: names a topic without wildcards (+ and # are for subscribe: and expect:)"
                        ),
                    ));
                }
                let payload = match (m.payload, m.payload_file) {
                    (Some(_), Some(_)) => {
                        return Err(err_at(
                            Some("payload_file:"),
                            format!("message {n}: give payload: or payload_file:, not both"),
                        ));
                    }
                    (None, Some(file)) => MqttPayload::File { file, data: Vec::new() },
                    (p, None) => MqttPayload::Template(compile("payload:", p.as_deref().unwrap_or(""))?),
                };
                MqttMessage::Publish {
                    topic: compile("publish:", &topic)?,
                    payload,
                    qos,
                    retain: m.retain.unwrap_or(false),
                }
            }
            (None, None, Some(e)) => {
                if e.topic.is_none() && e.payload.is_none() {
                    return Err(err_at(
                        Some("expect:"),
                        format!("message {n}: expect: needs topic: (a filter), payload: (a regex) or both"),
                    ));
                }
                let regex = e.payload.map(|re| regex::Regex::new(&re)).transpose().map_err(|x| {
                    err_at(
                        Some("payload:"),
                        format!("message {n}: expect's payload: is a regex: {x}"),
                    )
                })?;
                let captures = self.message_captures(m.capture, |var, msg| err_at(Some(var), msg))?;
                MqttMessage::Expect {
                    topic: e.topic.map(|t| compile("topic:", &t)).transpose()?,
                    regex,
                    captures,
                }
            }
            // Exactly one was counted above.
            _ => {
                return Err(err_at(
                    None,
                    format!("message {n}: give one of subscribe:, publish: or expect:"),
                ));
            }
        })
    }

    /// Reads every `payload_file:` of the flows' `mqtt:` steps (through
    /// `read`, bounded), at most [`MAX_MQTT_PAYLOAD`] bytes each.
    pub(super) fn mqtt_files(
        &self,
        flows: Vec<(&str, &mut Vec<Step>)>,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<(), ScenarioError> {
        fn walk(
            v: &Validator<'_>,
            key: &str,
            flow: &mut [Step],
            read: &dyn Fn(&str) -> Result<String, String>,
        ) -> Result<(), ScenarioError> {
            for step in flow {
                if let Step::Mqtt(m) = step {
                    let url_at = format!("url: {}", m.url);
                    for msg in &mut m.messages {
                        if let MqttMessage::Publish {
                            payload: MqttPayload::File { file, data },
                            ..
                        } = msg
                        {
                            let at = [key, &url_at, "payload_file:"];
                            let text = read(file).map_err(|e| v.err(&at, format!("cannot read '{file}': {e}")))?;
                            if text.len() > MAX_MQTT_PAYLOAD {
                                return Err(v.err(
                                    &at,
                                    format!(
                                        "'{file}' is {} bytes; a payload is at most {MAX_MQTT_PAYLOAD} bytes",
                                        text.len()
                                    ),
                                ));
                            }
                            *data = text.into_bytes();
                        }
                    }
                } else {
                    for f in step.nested_mut() {
                        walk(v, key, f, read)?;
                    }
                }
            }
            Ok(())
        }
        for (key, flow) in flows {
            walk(self, key, flow, read)?;
        }
        Ok(())
    }
}
