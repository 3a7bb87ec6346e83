//! Targets: a URL (or `{ url, http }`), `--target` and the environment
//! over the file's, and what each scenario's steps ask of its target
//! (WebSocket origins, HTTP/3 over https://, gRPC over HTTP/2).

use super::*;

impl Validator<'_> {
    fn base(&self, at: &[&str], real: &str) -> Result<BaseUrl, ScenarioError> {
        let bad = |m: String| self.err(at, m);
        // Credentials in the URL are refused below; no error quotes them.
        let url = throng_plan::mask_userinfo(real);
        let u = url::Url::parse(real).map_err(|e| {
            bad(format!(
                "'{url}' is not a URL ({e}); e.g. target: http://127.0.0.1:8080"
            ))
        })?;
        let https = match u.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(bad(format!("scheme '{other}': use http:// or https://"))),
        };
        if let Some(q) = u.query() {
            return Err(bad(format!(
                "'{url}' has a query string (?{q}); the target is scheme, host, port and base path: give query parameters per request, e.g. query: {{ page: 1 }}"
            )));
        }
        if let Some(f) = u.fragment() {
            return Err(bad(format!(
                "'{url}' has a fragment (#{f}), which is never sent to a server; remove it"
            )));
        }
        if !u.username().is_empty() || u.password().is_some() {
            return Err(bad(format!(
                "'{url}' has credentials (user@), which throng does not send; remove them and give an Authorization header in defaults.headers"
            )));
        }
        let host = match u.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => return Err(bad(format!("'{url}' has no host"))),
        };
        Ok(BaseUrl {
            url: real.to_string(),
            https,
            host,
            port: u.port_or_known_default().unwrap_or(if https { 443 } else { 80 }),
            base_path: u.path().trim_end_matches('/').to_string(),
            from: None,
            http: HttpVersion::Http1,
        })
    }

    /// A `target:` at `at`: a URL (HTTP/1.1), or `{ url, http }` whose
    /// left-out fields are `inherit`'s (a scenario's target inherits the
    /// file's; the file's needs its url).
    pub(super) fn target_of(
        &self,
        at: &[&str],
        raw: RawTarget,
        inherit: Option<&BaseUrl>,
        given: &TargetInputs,
    ) -> Result<BaseUrl, ScenarioError> {
        let url_at = [at, &["url:"]].concat();
        let (url, http, url_at) = match raw {
            RawTarget::Url(u) => (Some(u), Some(HttpVersion::Http1), at),
            RawTarget::Full(RawTargetFull { url, http }) => {
                // Not `http:`, which `url: http://` holds too.
                let http_at = [at, &["http: "]].concat();
                let http = http.map(|v| self.http_version(&http_at, &v)).transpose()?;
                (url, http, &url_at[..])
            }
        };
        let mut base = match (url, inherit) {
            (Some(u), _) => self.target(url_at, &u, given)?,
            (None, Some(file)) => file.clone(),
            (None, None) => {
                return Err(self.err(
                    at,
                    "target: needs url:, e.g. target: { url: https://127.0.0.1:8443, http: 2 }",
                ));
            }
        };
        base.http = http.or(inherit.map(|f| f.http)).unwrap_or_default();
        if base.http == HttpVersion::Http3 && !base.https {
            return Err(self.err_first(
                &[&[at, &["http: "]].concat(), at],
                format!(
                    "http: 3 needs an https:// URL ('{}' is http://): HTTP/3 runs over QUIC, which is always \
                     encrypted; use https://, or http: 2 for HTTP/2 in the clear (h2c)",
                    base.url
                ),
            ));
        }
        Ok(base)
    }

    /// `http: 1.1`, `2` or `3`.
    pub(super) fn http_version(&self, at: &[&str], v: &serde_yaml_ng::Value) -> Result<HttpVersion, ScenarioError> {
        let text = match v {
            serde_yaml_ng::Value::Number(n) => n.to_string(),
            serde_yaml_ng::Value::String(s) => s.trim().to_string(),
            _ => String::new(),
        };
        match text.as_str() {
            "1.1" => Ok(HttpVersion::Http1),
            "2" | "2.0" => Ok(HttpVersion::Http2),
            "3" | "3.0" => Ok(HttpVersion::Http3),
            _ => {
                let shown = if text.is_empty() {
                    "this value".to_string()
                } else {
                    format!("'{text}'")
                };
                Err(self.err(
                    at,
                    format!("http: {shown} is not an HTTP version throng speaks; write http: 1.1, 2 or 3"),
                ))
            }
        }
    }

    /// The target: `--target`, or the file's, filled in from the
    /// environment when it reads `{{env.NAME}}`.
    fn target(&self, at: &[&str], written: &str, given: &TargetInputs) -> Result<BaseUrl, ScenarioError> {
        if let Some(url) = given.url {
            let mut base = self.base(at, url).map_err(|e| ScenarioError {
                message: format!("--target replaces this target, but {}", e.message),
                ..e
            })?;
            base.from = Some("--target".to_string());
            return Ok(base);
        }
        if !written.contains("{{") {
            return self.base(at, written);
        }
        let bad = |m: String| self.err(at, format!("target: {m}"));
        let template = Template::compile(written).map_err(|e| bad(e.to_string()))?;
        let empty = std::collections::HashMap::new();
        let url = template
            .render_env(given.env.unwrap_or(&empty))
            .map_err(|e| bad(e.to_string()))?;
        let mut base = self.base(at, &url).map_err(|e| ScenarioError {
            message: format!("{written} from the environment: {}", e.message),
            ..e
        })?;
        base.from = Some(written.to_string());
        Ok(base)
    }

    /// The `websocket:` steps of a scenario whose target is `target`: an
    /// absolute URL has the target's own scheme (ws: http, wss: https),
    /// host and port; the target speaks HTTP/1.1 (no WebSocket over
    /// HTTP/2 or HTTP/3 here).
    pub(super) fn websocket_origins(&self, key: &str, flow: &[Step], target: &BaseUrl) -> Result<(), ScenarioError> {
        for w in websockets(flow) {
            let url_at = format!("url: {}", w.url);
            let here = [self.root.get(), key, "websocket:", &url_at];
            if target.http != HttpVersion::Http1 {
                return Err(self.err(
                    &here,
                    format!(
                        "websocket: steps need an HTTP/1.1 target (the upgrade is HTTP/1.1, and WebSocket over \
                         HTTP/2 or HTTP/3 is not supported); give this scenario its own target: {} (without http:)",
                        target.url
                    ),
                ));
            }
            if w.url.starts_with('/') {
                continue;
            }
            let https = w.url.starts_with("wss://");
            let scheme = if https { "https" } else { "http" };
            let rest = w.url.split_once("://").map_or("", |(_, r)| r);
            let authority = rest.split('/').next().unwrap_or_default();
            let same = url::Url::parse(&format!("{scheme}://{authority}/")).is_ok_and(|u| {
                let host = match u.host() {
                    Some(url::Host::Ipv6(a)) => a.to_string(),
                    Some(h) => h.to_string(),
                    None => String::new(),
                };
                https == target.https && host == target.host && u.port_or_known_default() == Some(target.port)
            });
            if !same {
                let ws = if target.https { "wss" } else { "ws" };
                return Err(self.err(
                    &here,
                    format!(
                        "url '{}' is not on the scenario's target {}: a websocket: step goes to its target; write a \
                         path (/chat) or {ws}://{}:{}/…, or give the scenario its own target:",
                        w.url, target.url, target.host, target.port
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A request's own `http: 3` needs its target to be https:// (QUIC is
    /// always encrypted), as a target's does.
    pub(super) fn request_protocols_fit(&self, flow: &[Step], target: &BaseUrl) -> Result<(), ScenarioError> {
        match requests(flow).into_iter().find(|r| r.http == Some(HttpVersion::Http3)) {
            Some(r) if !target.https => Err(ScenarioError {
                message: format!(
                    "http: 3 needs an https:// target ('{}' is http://): HTTP/3 runs over QUIC, which is always \
                     encrypted; give the scenario an https:// target, or write http: 2 for HTTP/2 in the clear (h2c)",
                    target.url
                ),
                ..self.err_at(&r.http_at)
            }),
            _ => Ok(()),
        }
    }

    /// gRPC runs over HTTP/2: a scenario with a `grpc:` step needs a target
    /// written `{ url, http: 2 }`.
    pub(super) fn grpc_over_http2(&self, sc: &Scenario, file: &BaseUrl) -> Result<(), ScenarioError> {
        fn first(flow: &[Step]) -> Option<&GrpcStep> {
            flow.iter().find_map(|s| match s {
                Step::Grpc(g) => Some(g.as_ref()),
                nested => nested.nested().into_iter().find_map(first),
            })
        }
        let target = sc.target(file);
        match first(&sc.flow) {
            Some(g) if target.http != HttpVersion::Http2 => Err(self.err(
                &["scenarios:", &format!("{}:", sc.name), "grpc:"],
                format!(
                    "grpc: {} needs an HTTP/2 target, and scenario {}'s target {} is HTTP/{}: write target: {{ url: \
                     {}, http: 2 }} (https:// for TLS with ALPN h2, http:// for h2c)",
                    g.call,
                    sc.name,
                    target.url,
                    match target.http {
                        HttpVersion::Http3 => "3",
                        _ => "1.1",
                    },
                    target.url
                ),
            )),
            _ => Ok(()),
        }
    }
}
