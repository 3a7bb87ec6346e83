//! Variables: every `{{NAME}}` a scenario renders is a data column or a
//! capture of a step before it; and the tags a flow's requests carry.

use super::*;

impl Validator<'_> {
    /// Checks that every `{{NAME}}` of the scenario is a data column or a
    /// capture of a step that runs before it. A capture of a later step is
    /// not enough: captures are cleared when an iteration starts, so the
    /// value would render empty.
    pub(super) fn variables_in_order(
        &self,
        s: &Scenario,
        defaults: &Defaults,
        defined: &mut BTreeSet<String>,
    ) -> Result<(), ScenarioError> {
        let all = units(&s.flow);
        for (i, r) in all.iter().enumerate() {
            // defaults.headers are sent with every request that does not
            // set the same header itself.
            let from_defaults = defaults
                .headers
                .iter()
                .filter(|(name, _)| !r.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
                .map(|(name, t)| (Some(name.as_str()), 0, Use::Template(t)));
            // Defaults go with the request's head, before any own use.
            let own = r.items.iter().enumerate().map(|(at, u)| (None, at, *u));
            for (default_header, at, item) in from_defaults.chain(own) {
                let t = match item {
                    Use::Template(t) => t,
                    Use::Capture(v) => {
                        defined.insert(v.to_string());
                        continue;
                    }
                };
                for v in t.variables() {
                    if defined.contains(v) {
                        continue;
                    }
                    let key = format!("{}:", s.name);
                    let scope = match default_header {
                        Some(_) => vec!["defaults:"],
                        None => vec![self.root.get(), &key],
                    };
                    let used_in = match default_header {
                        Some(h) => format!("defaults.headers.{h}, sent with step '{}',", r.name),
                        None => format!("step '{}'", r.name),
                    };
                    let captures = |u: &Unit<'_>| u.items.iter().any(|x| matches!(x, Use::Capture(c) if *c == v));
                    let itself = r.items.iter().skip(at).any(|x| matches!(x, Use::Capture(c) if *c == v));
                    let capturer = all[i + 1..].iter().find(|later| captures(later));
                    let message = match capturer {
                        _ if itself => format!(
                            "{{{{{v}}}}} is used in {used_in} which captures it itself, in scenario '{}': a capture is \
                             available to later steps only (and to a websocket: or mqtt: step's later messages); capture it \
                             in an earlier step",
                            s.name
                        ),
                        Some(c) => format!(
                            "{{{{{v}}}}} is used in {used_in} before step '{}' captures it, in scenario '{}': \
                             captures are cleared when an iteration starts, so it would be empty here; capture it \
                             in an earlier step or move this request after '{}'",
                            c.name, s.name, c.name
                        ),
                        None => {
                            let mut known: Vec<String> = defined.iter().cloned().collect();
                            known.extend(BUILT_INS.iter().map(|b| b.to_string()));
                            format!(
                                "{{{{{v}}}}} is not defined in scenario '{}': capture it in an earlier step or add \
                                 it as a data column; known: {}",
                                s.name,
                                known.join(", ")
                            )
                        }
                    };
                    return Err(self.err_at_use(&scope, v, message));
                }
            }
        }
        Ok(())
    }
}

/// What a step reads and captures, in the order it does.
#[derive(Clone, Copy)]
enum Use<'a> {
    Template(&'a Template),
    Capture(&'a str),
}

/// A step that renders templates: its name, own headers and uses.
struct Unit<'a> {
    name: &'a str,
    headers: &'a [(String, Template)],
    items: Vec<Use<'a>>,
}

/// The requests (`grpc:` steps' too) and `websocket:` steps of a flow, groups entered, in order.
fn units(flow: &[Step]) -> Vec<Unit<'_>> {
    let mut out = Vec::new();
    for s in flow {
        match s {
            Step::Request(_) | Step::Grpc(_) => {
                let r = match s {
                    Step::Grpc(g) => &g.request,
                    Step::Request(r) => r.as_ref(),
                    _ => continue,
                };
                let mut items: Vec<Use<'_>> = templates(r).into_iter().map(Use::Template).collect();
                if let Step::Grpc(g) = s {
                    // A list's messages: as the body's templates.
                    let mut list = Vec::new();
                    g.messages.iter().for_each(|j| json_templates(j, &mut list));
                    items.extend(list.into_iter().map(Use::Template));
                }
                items.extend(r.captures.iter().map(|c| Use::Capture(c.var.as_str())));
                out.push(Unit {
                    name: &r.name,
                    headers: &r.headers,
                    items,
                });
            }
            Step::WebSocket(w) => {
                let mut items = vec![Use::Template(&w.path)];
                items.extend(w.headers.iter().map(|(_, t)| Use::Template(t)));
                for m in &w.messages {
                    match m {
                        WsMessage::Send(t) => items.push(Use::Template(t)),
                        WsMessage::Expect { captures, .. } => {
                            items.extend(captures.iter().map(|c| Use::Capture(c.var.as_str())));
                        }
                        WsMessage::SendBinary(_) => {}
                    }
                }
                out.push(Unit {
                    name: &w.name,
                    headers: &w.headers,
                    items,
                });
            }
            Step::Mqtt(m) => {
                let mut items: Vec<Use<'_>> = vec![Use::Template(&m.client_id)];
                items.extend(m.user.iter().chain(&m.password).map(Use::Template));
                for msg in &m.messages {
                    match msg {
                        MqttMessage::Subscribe { filter, .. } => items.push(Use::Template(filter)),
                        MqttMessage::Publish { topic, payload, .. } => {
                            items.push(Use::Template(topic));
                            if let MqttPayload::Template(t) = payload {
                                items.push(Use::Template(t));
                            }
                        }
                        MqttMessage::Expect { topic, captures, .. } => {
                            items.extend(topic.iter().map(Use::Template));
                            items.extend(captures.iter().map(|c| Use::Capture(c.var.as_str())));
                        }
                    }
                }
                out.push(Unit {
                    name: &m.name,
                    headers: &[],
                    items,
                });
            }
            Step::Group { .. } | Step::If { .. } | Step::Repeat { .. } | Step::Until { .. } | Step::Choose { .. } => {
                s.nested().into_iter().for_each(|f| out.extend(units(f)));
            }
            Step::Add(a) => {
                if let AddValue::Template(t) = &a.value {
                    out.push(Unit {
                        name: &a.metric,
                        headers: &[],
                        items: vec![Use::Template(t)],
                    });
                }
            }
            Step::Js(j) => out.push(Unit {
                name: "js",
                headers: &[],
                items: j.sets.iter().map(|v| Use::Capture(v.as_str())).collect(),
            }),
            Step::Think(_) => {}
        }
    }
    out
}

pub(super) fn contains_request(flow: &[Step]) -> bool {
    flow.iter().any(|s| match s {
        Step::Request(_) | Step::Grpc(_) | Step::WebSocket(_) | Step::Mqtt(_) => true,
        Step::Think(_) | Step::Add(_) | Step::Js(_) => false,
        nested => nested.nested().into_iter().any(contains_request),
    })
}

pub(in crate::spec) fn tag_exists(scenarios: &[Scenario], tag: &str, value: &str) -> bool {
    fn in_flow(flow: &[Step], tag: &str, value: &str) -> bool {
        flow.iter().any(|s| match s {
            Step::Request(r) => {
                tag == "step" && r.name == value || tag == "check" && r.checks.iter().any(|c| c.name == value)
            }
            Step::Grpc(g) => {
                let r = &g.request;
                tag == "step" && r.name == value || tag == "check" && r.checks.iter().any(|c| c.name == value)
            }
            Step::WebSocket(w) => tag == "step" && w.name == value,
            Step::Mqtt(m) => tag == "step" && m.name == value,
            Step::Group { name, flow } => tag == "group" && name == value || in_flow(flow, tag, value),
            Step::Js(j) => tag == "check" && j.check_names().contains(&value),
            Step::Think(_) | Step::Add(_) => false,
            nested => nested.nested().into_iter().any(|f| in_flow(f, tag, value)),
        })
    }
    scenarios.iter().any(|s| {
        tag == "scenario" && s.name == value
            || tag == "stage" && stage_names(s).iter().any(|n| n == value)
            || in_flow(&s.flow, tag, value)
    })
}
