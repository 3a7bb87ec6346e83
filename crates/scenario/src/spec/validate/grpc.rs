//! A `grpc:` step: the `proto:` its method comes from (files, or the
//! server's reflection, asked once the file is checked) and its message.

use super::grpc_messages::Given;
use super::*;

impl Validator<'_> {
    /// A `proto:` at `at`: its files compiled (read through `read`).
    pub(super) fn proto(
        &self,
        at: &[&str],
        p: RawProto,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<Proto, ScenarioError> {
        match (p.reflection, p.files.is_empty()) {
            (true, true) if p.import_paths.is_empty() => return Ok(Proto::Reflection),
            (true, _) => {
                return Err(self.err(
                    at,
                    "proto: reflection: true asks the server for the descriptors; leave out files and \
                     import_paths, or reflection",
                ));
            }
            (false, true) => {
                return Err(self.err(
                    at,
                    "proto: files is empty; list the .proto files that define the services, e.g. files: \
                     [greeter.proto], or ask the server: reflection: true",
                ));
            }
            (false, false) => {}
        }
        let pool =
            crate::grpc::compile(&p.files, &p.import_paths, read).map_err(|e| self.err(at, format!("proto: {e}")))?;
        Ok(Proto::Files(std::rc::Rc::new(pool), p.files.join(", ")))
    }

    /// A `grpc:` step of scenario `key`, its method looked up in the
    /// scenario's descriptors.
    pub(super) fn grpc(&self, key: &str, g: RawGrpc, defaults: &Defaults) -> Result<GrpcStep, ScenarioError> {
        let call_at = format!("call: {}", g.call);
        let here: Vec<&str> = vec![self.root.get(), key, "grpc:", &call_at];
        // The field's key after the call's line, for errors.
        let at = |field: &str| self.key_path(&here, field);
        let metadata_at = at("metadata");
        let metadata_at: Vec<&str> = metadata_at.iter().map(String::as_str).collect();
        let proto = self.proto.borrow().clone();
        let Some(proto) = proto else {
            return Err(self.err(
                &here,
                format!(
                    "grpc: {} needs the .proto files that define it: add proto: {{ files: [FILE.proto], \
                     import_paths: [DIR] }} at the top of the file or in scenario {}",
                    g.call,
                    key.trim_end_matches(':')
                ),
            ));
        };
        let method = match proto {
            Proto::Files(pool, files) => Some(
                crate::grpc::find_method(&pool, &g.call)
                    .map_err(|e| self.err(&here, format!("call: {e} (proto: {files})")))?,
            ),
            // Looked up once the file is checked (see resolve_reflected).
            Proto::Reflection => {
                crate::grpc::split_call(&g.call).map_err(|e| self.err(&here, format!("call: {e}")))?;
                None
            }
        };
        let sent = self.grpc_messages(
            &at,
            Given {
                message: g.message,
                messages: g.messages,
                file: g.messages_file,
            },
        )?;
        let list_at = sent.field.map_or_else(|| at("message"), &at);
        let list_at: Vec<&str> = list_at.iter().map(String::as_str).collect();
        let body = sent.body;
        let framed = match &method {
            Some(m) => self.framed_list(m, &body, &sent.list, &list_at)?,
            None => None,
        };
        let gzip = self.grpc_encoding(&at("encoding"), g.encoding.as_deref())?;
        let mut headers = Vec::new();
        for (k, v) in &g.metadata {
            let lower = k.to_ascii_lowercase();
            if lower.starts_with("grpc-") || ["content-type", "te", "host"].contains(&lower.as_str()) {
                return Err(self.err(
                    &metadata_at,
                    format!(
                        "metadata '{k}' is the protocol's (grpc-*, content-type, te and host are set by throng); use \
                         another key, and deadline: for grpc-timeout"
                    ),
                ));
            }
            headers.push(self.header(&metadata_at, k, v)?);
        }
        let expect = self.grpc_expect(&at("expect"), g.expect.as_deref())?;
        let deadline = match g.deadline {
            Some(d) if d.0.is_zero() => {
                return Err(self.err(&at("deadline"), "deadline: give at least 1ms, or leave it out"));
            }
            Some(d) => Some(d.0),
            None => None,
        };
        if g.check.values().any(|c| c.status.is_some()) {
            return Err(self.err(
                &at("check"),
                "a grpc step's checks take no status: (its gRPC status is judged by expect:, e.g. expect: [OK, \
                 NOT_FOUND]); use json:, body_contains:, header: or duration_under:",
            ));
        }
        match (g.stream_messages, g.stream_rate) {
            (Some(n), _) if n == 0 || n > crate::grpc::MAX_STREAM_MESSAGES => {
                return Err(self.err(
                    &at("stream_messages"),
                    format!(
                        "stream_messages: {n}; give 1 to {} messages a call",
                        crate::grpc::MAX_STREAM_MESSAGES
                    ),
                ));
            }
            (_, Some(0)) => {
                return Err(self.err(
                    &at("stream_rate"),
                    "stream_rate: 0; give at least 1 message per second, or leave it out to send as fast as flow \
                     control allows",
                ));
            }
            _ => {}
        }
        if let Some(m) = &method {
            self.streams_fit(&here, m, (g.stream_messages, g.stream_rate), sent.field)?;
        }
        let (captures, checks) = self.captures_and_checks(&here, g.capture, g.check)?;
        if let Some(f) = &framed {
            let field = if g.stream_messages.is_some() {
                "stream_messages"
            } else {
                sent.field.unwrap_or("message")
            };
            self.call_fits(&at(field), f, g.stream_messages.or(sent.field.is_none().then_some(1)))?;
        }
        let call = method
            .as_ref()
            .map_or_else(|| g.call.clone(), crate::grpc::Method::call);
        let path = format!("/{call}");
        Ok(GrpcStep {
            expect,
            deadline,
            server_streaming: method.as_ref().is_some_and(crate::grpc::Method::server_streaming),
            client_streaming: method.as_ref().is_some_and(crate::grpc::Method::client_streaming),
            stream_messages: g.stream_messages,
            stream_rate: g.stream_rate,
            request: Request {
                name: g.name.unwrap_or_else(|| call.clone()),
                method: "POST".to_string(),
                path: Template::literal(&path),
                query: Vec::new(),
                headers,
                body,
                expect: StatusSet::default(),
                captures,
                checks,
                timeout: g.timeout.map_or(defaults.timeout, |d| d.0),
                max_body: g.max_body.map_or(defaults.max_body, |m| m.0),
                redirects: 0,
                http: None,
                http_at: String::new(),
                sse: None,
            },
            call,
            method,
            framed,
            messages: sent.list,
            gzip,
        })
    }

    /// A `grpc:` step's `expect:`: the codes counted ok (OK when none is
    /// given), each a number or a name.
    fn grpc_expect(&self, at: &[String], expect: Option<&[RawStatus]>) -> Result<Vec<u16>, ScenarioError> {
        match expect {
            None => Ok(vec![0]),
            Some([]) => Err(self.err(
                at,
                "expect: is empty, so every call would count as failed; list the codes counted ok, e.g. [OK]",
            )),
            Some(list) => list
                .iter()
                .map(|s| match s {
                    RawStatus::Code(c) => crate::grpc::parse_code(&c.to_string()),
                    RawStatus::Text(t) => crate::grpc::parse_code(t),
                })
                .collect::<Result<Vec<u16>, crate::grpc::NotACode>>()
                .map_err(|e| self.err(at, format!("expect: {e}"))),
        }
    }

    /// `stream_messages:`, `stream_rate:` and a list of messages (`list`:
    /// its field) are for a client-streaming method only.
    fn streams_fit(
        &self,
        here: &[&str],
        method: &crate::grpc::Method,
        (n, rate): (Option<u64>, Option<u32>),
        list: Option<&str>,
    ) -> Result<(), ScenarioError> {
        if method.client_streaming() {
            return Ok(());
        }
        let field = match (list, n, rate) {
            (Some(f), _, _) => {
                return Err(self.err(
                    &self.key_path(here, f).iter().map(String::as_str).collect::<Vec<_>>(),
                    format!(
                        "{f}: {} takes one request message a call (not client-streaming); give message: instead",
                        method.call()
                    ),
                ));
            }
            (None, Some(_), _) => "stream_messages",
            (None, None, Some(_)) => "stream_rate",
            (None, None, None) => return Ok(()),
        };
        Err(self.err(
            &self
                .key_path(here, field)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            format!(
                "{field}: {} takes one request message a call (not client-streaming); leave {field} out",
                method.call()
            ),
        ))
    }

    /// Looks up the methods of `grpc:` steps whose scenario asks its
    /// target's server reflection, once the target's TLS settings are
    /// known: one question per target and service.
    pub(super) fn resolve_reflected(
        &self,
        scenarios: &mut [Scenario],
        file: &BaseUrl,
        tls: Option<&TlsSettings>,
    ) -> Result<(), ScenarioError> {
        fn pending<'s>(flow: &'s mut [Step], out: &mut Vec<&'s mut GrpcStep>) {
            for s in flow {
                if let Step::Grpc(g) = s {
                    if g.method.is_none() {
                        out.push(g);
                    }
                } else {
                    s.nested_mut().into_iter().for_each(|f| pending(f, out));
                }
            }
        }
        let mut pools: BTreeMap<(String, String), std::rc::Rc<prost_reflect::DescriptorPool>> = BTreeMap::new();
        for sc in scenarios {
            let target = sc.target(file).clone();
            let key = format!("{}:", sc.name);
            let mut steps = Vec::new();
            pending(&mut sc.flow, &mut steps);
            for g in steps {
                let call_at = format!("call: {}", g.call);
                let here = [self.root.get(), key.as_str(), "grpc:", call_at.as_str()];
                let Some(reflect) = self.reflect else {
                    return Err(self.err(
                        &here,
                        "proto: reflection asks the server when throng run starts, which this command does not; \
                         give proto: { files: [FILE.proto] }",
                    ));
                };
                let (service, _) = crate::grpc::split_call(&g.call).map_err(|e| self.err(&here, e.to_string()))?;
                let found = pools.get(&(target.url.clone(), service.to_string())).cloned();
                let pool = match found {
                    Some(p) => p,
                    None => {
                        let p = reflect(&target, tls, service)
                            .map_err(|e| self.err(&here, format!("proto: reflection: {e}")))?;
                        let p = std::rc::Rc::new(p);
                        pools.insert((target.url.clone(), service.to_string()), std::rc::Rc::clone(&p));
                        p
                    }
                };
                let method = crate::grpc::find_method(&pool, &g.call)
                    .map_err(|e| self.err(&here, format!("call: {e} (from {}'s server reflection)", target.url)))?;
                g.framed = self.framed_list(&method, &g.request.body, &g.messages, &here)?;
                g.server_streaming = method.server_streaming();
                g.client_streaming = method.client_streaming();
                let list = (!g.messages.is_empty()).then_some("messages");
                self.streams_fit(&here, &method, (g.stream_messages, g.stream_rate), list)?;
                if let Some(f) = &g.framed {
                    let n = g.stream_messages.or(list.is_none().then_some(1));
                    self.call_fits(&here.iter().map(|s| s.to_string()).collect::<Vec<_>>(), f, n)?;
                }
                g.method = Some(method);
            }
        }
        Ok(())
    }
}
