//! The raw file checked into a [`ScenarioPlan`]: every error names the
//! key's file:line:column and what to write instead.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use throng_plan::{HttpVersion, StatusSet, TlsGroup, TlsSettings, TlsVersion};

use super::raw::*;
use super::types::*;
use super::{ScenarioError, TargetInputs};
use crate::checks::{Capture, CaptureFrom, Check, CheckKind};
use crate::template::{Template, is_identifier};
use crate::threshold::Threshold;

/// Template functions without arguments, listed as known variables.
const BUILT_INS: [&str; 6] = ["vu", "iter", "scenario", "uuid", "random_email", "now_ms"];

/// Names a variable cannot take: `{{NAME}}` would render the built-in.
const RESERVED: [&str; 8] = [
    "vu",
    "iter",
    "scenario",
    "uuid",
    "random_email",
    "now_ms",
    "random_int",
    "env",
];

pub(super) struct Validator<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a str,
    /// The descriptors the scenario being checked calls `grpc:` steps
    /// with (its own `proto:`, else the file's), and where they came from.
    proto: std::cell::RefCell<Option<Proto>>,
    /// Asks a server's reflection for descriptors (`throng run`).
    reflect: Option<&'a crate::grpc::Reflect<'a>>,
}

/// Where a scenario's `grpc:` steps find their methods.
#[derive(Clone)]
enum Proto {
    /// Compiled .proto files, and their names.
    Files(std::rc::Rc<prost_reflect::DescriptorPool>, String),
    /// The target's server reflection, asked once the file is checked.
    Reflection,
}

impl<'a> Validator<'a> {
    pub(super) fn new(text: &'a str, file: &'a str, reflect: Option<&'a crate::grpc::Reflect<'a>>) -> Self {
        Validator {
            text,
            file,
            proto: std::cell::RefCell::new(None),
            reflect,
        }
    }
}

impl Validator<'_> {
    /// An error at the first line holding every needle in turn (a path of
    /// keys such as ["scenarios:", "users:", "stages:"]); a needle not found
    /// is skipped. A needle that starts with a letter, digit or `_` only
    /// matches where a word starts, so `rate:` does not find `start_rate:`.
    fn err(&self, path: &[impl AsRef<str>], message: impl Into<String>) -> ScenarioError {
        let (line, column, _) = self.locate(path);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    /// An error at the first of `paths` whose needles are all found (the
    /// value as written, then a looser path), else as [`Self::err`] at the
    /// last.
    fn err_first(&self, paths: &[&[&str]], message: impl Into<String>) -> ScenarioError {
        let path = paths
            .iter()
            .find(|p| self.locate(p).2)
            .or(paths.last())
            .copied()
            .unwrap_or_default();
        self.err(path, message)
    }

    /// Line and column (from 1) of the path's last needle found, and
    /// whether every needle was.
    fn locate(&self, path: &[impl AsRef<str>]) -> (usize, usize, bool) {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let find = |l: &str, needle: &str| -> Option<usize> {
            if !needle.starts_with(word) {
                return l.find(needle);
            }
            l.match_indices(needle)
                .map(|(i, _)| i)
                .find(|&i| !l[..i].ends_with(word))
        };
        let (mut line, mut column, mut all) = (0, 1, true);
        let lines: Vec<&str> = self.text.lines().collect();
        let mut from = 0;
        for needle in path {
            let needle = needle.as_ref();
            match lines
                .iter()
                .skip(from)
                .enumerate()
                .find_map(|(i, l)| find(l, needle).map(|c| (i, c)))
            {
                Some((i, c)) => {
                    line = from + i + 1;
                    column = lines[from + i][..c].chars().count() + 1;
                    from += i + 1;
                }
                None => all = false,
            }
        }
        (line, column, all)
    }

    /// `scope` and the mapping key `key` after it, spelt as found: plain,
    /// double- or single-quoted; `scope` alone when it is not found.
    fn key_path(&self, scope: &[&str], key: &str) -> Vec<String> {
        let mut scope: Vec<String> = scope.iter().map(|s| s.to_string()).collect();
        let found = [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")]
            .into_iter()
            .find(|k| self.locate(&[&scope[..], std::slice::from_ref(k)].concat()).2);
        scope.extend(found);
        scope
    }

    /// An error at the first `{{var}}` (or `{{ var }}`) after `scope`, or
    /// at `scope` when neither is there.
    fn err_at_use(&self, scope: &[&str], var: &str, message: String) -> ScenarioError {
        let spellings = [format!("{{{{{var}"), format!("{{{{ {var}")];
        let found = spellings
            .iter()
            .map(|needle| [scope, &[needle.as_str()]].concat())
            .filter(|path| self.locate(path).2)
            .min_by_key(|path| self.locate(path).0);
        match found {
            Some(path) => self.err(&path, message),
            None => self.err(scope, message),
        }
    }

    /// Compiles a template; an error points at the text when it is found
    /// after `path` as written, else at `path`.
    fn template(&self, path: &[&str], text: &str) -> Result<Template, ScenarioError> {
        Template::compile(text).map_err(|e| {
            let first_line = text.lines().next().unwrap_or_default();
            self.err_first(&[&[path, &[first_line]].concat(), path], e)
        })
    }

    /// A header as written at `path`: a token name; no Content-Length or
    /// Transfer-Encoding (throng frames the rendered body itself, so a
    /// length written in the file could contradict it); no control
    /// character in the value as written (a rendered value is checked
    /// again when the request is sent).
    fn header(&self, path: &[&str], name: &str, value: &str) -> Result<(String, Template), ScenarioError> {
        let at_name = format!("{name}:");
        let here = [path, &[at_name.as_str()]].concat();
        let err = |m: String| self.err_first(&[&here[..], path], m);
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(err(format!(
                "header name '{}' has characters a header name cannot have; use letters, digits and -",
                name.escape_debug()
            )));
        }
        if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(err(format!(
                "{name}: throng computes Content-Length from each request's rendered body (and never chunks \
                 request bodies); remove this header"
            )));
        }
        if let Some(c) = value.chars().find(|&c| throng_plan::is_forbidden_in_value(c)) {
            return Err(err(format!(
                "the value of header {name} has the control character {}, which a header cannot carry",
                c.escape_debug()
            )));
        }
        Ok((name.to_string(), self.template(&here, value)?))
    }

    fn statuses(&self, path: &[&str], raw: &[RawStatus]) -> Result<StatusSet, ScenarioError> {
        if raw.is_empty() {
            return Err(self.err(
                path,
                "expect: is empty, so every response would count as failed; list the statuses counted ok, e.g. [200] or [2xx]",
            ));
        }
        let text: Vec<String> = raw
            .iter()
            .map(|s| match s {
                RawStatus::Code(c) => c.to_string(),
                RawStatus::Text(t) => t.clone(),
            })
            .collect();
        StatusSet::parse(&text.join(",")).map_err(|e| self.err(path, format!("expect: {e}")))
    }

    pub(super) fn plan(
        &self,
        raw: RawFile,
        read: &dyn Fn(&str) -> Result<String, String>,
        given: &TargetInputs,
    ) -> Result<ScenarioPlan, ScenarioError> {
        let target = self.target_of(&["target:"], raw.target, None, given)?;
        let raw_tls = raw.tls;
        let defaults = Defaults {
            headers: raw
                .defaults
                .headers
                .iter()
                .map(|(k, v)| self.header(&["defaults:", "headers:"], k, v))
                .collect::<Result<_, ScenarioError>>()?,
            timeout: raw.defaults.timeout.map_or(Duration::from_secs(10), |d| d.0),
            max_body: raw.defaults.max_body.map_or(DEFAULT_MAX_BODY, |m| m.0),
            redirects: match raw.defaults.redirects {
                Some(n) => self.redirects(&["defaults:", &format!("redirects: {n}")], n)?,
                None => super::DEFAULT_REDIRECTS,
            },
            expect: match &raw.defaults.expect {
                Some(e) => self.statuses(&["defaults:", "expect:"], e)?,
                None => StatusSet::default(),
            },
        };
        let data = match raw.data {
            None => None,
            Some(d) => {
                let (file, cursor) = match d {
                    RawData::File(f) => (f, Cursor::default()),
                    RawData::Full(RawDataFull { file, cursor }) => (file, cursor.unwrap_or_default()),
                };
                let text = read(&file).map_err(|e| self.err(&["data:"], format!("cannot read '{file}': {e}")))?;
                let (columns, rows) =
                    crate::csv::parse(&text).map_err(|e| self.err(&["data:"], format!("'{file}': {e}")))?;
                if let Some(c) = columns.iter().find(|c| RESERVED.contains(&c.as_str())) {
                    return Err(self.err(
                        &["data:"],
                        format!("'{file}': the column '{c}' is hidden by the built-in {{{{{c}}}}}; rename the column"),
                    ));
                }
                Some(DataSpec {
                    file,
                    columns,
                    cursor,
                    row_count: rows.len(),
                    rows,
                })
            }
        };
        if raw.scenarios.is_empty() {
            return Err(self.err(&["scenarios:"], "name at least one scenario"));
        }
        let mut scenarios = Vec::new();
        let file_proto = match raw.proto {
            Some(p) => Some(self.proto(&["proto:"], p, read)?),
            None => None,
        };
        for (name, mut s) in raw.scenarios {
            let own = match s.proto.take() {
                Some(p) => Some(self.proto(&["scenarios:", &format!("{name}:"), "proto:"], p, read)?),
                None => None,
            };
            self.proto.replace(own.or_else(|| file_proto.clone()));
            scenarios.push(self.scenario(&name, s, &defaults, &target, given)?);
            if let Some(sc) = scenarios.last() {
                self.grpc_over_http2(sc, &target)?;
            }
        }
        // TLS settings serve every https:// target of the file.
        let any_https = target.https || scenarios.iter().any(|s| s.target.as_ref().is_some_and(|t| t.https));
        let tls = match (any_https, raw_tls) {
            (true, t) => {
                let t = t.unwrap_or_default();
                let groups = t
                    .groups
                    .iter()
                    .map(|g| TlsGroup::parse(g).map_err(|e| self.err(&["tls:", "groups:"], format!("tls.groups: {e}"))))
                    .collect::<Result<_, _>>()?;
                let version = t
                    .version
                    .as_deref()
                    .map(|v| {
                        TlsVersion::parse(v).map_err(|e| self.err(&["tls:", "version:"], format!("tls.version: {e}")))
                    })
                    .transpose()?;
                Some(TlsSettings {
                    insecure: t.insecure,
                    cacert: t.cacert,
                    cert: t.cert,
                    key: t.key,
                    resume: t.resume,
                    groups,
                    version,
                    server_name: t.sni,
                })
            }
            (false, Some(_)) => return Err(self.err(&["tls:"], "tls: applies to https:// targets")),
            (false, None) => None,
        };
        self.resolve_reflected(&mut scenarios, &target, tls.as_ref())?;
        let any_h3 = std::iter::once(&target)
            .chain(scenarios.iter().filter_map(|s| s.target.as_ref()))
            .any(|t| t.http == HttpVersion::Http3)
            || scenarios
                .iter()
                .any(|s| s.request_protocols().iter().any(|(h, _)| *h == HttpVersion::Http3));
        if any_h3 && tls.as_ref().is_some_and(|t| t.version == Some(TlsVersion::Tls12)) {
            return Err(self.err(
                &["tls:", "version:"],
                "tls.version 1.2 cannot carry an http: 3 target: QUIC needs TLS 1.3; write version: \"1.3\" or leave it out",
            ));
        }
        // Variables: data columns, and captures of the steps before, in the
        // order an iteration runs them (captures are cleared when it starts).
        let columns: BTreeSet<String> = data.iter().flat_map(|d| d.columns.iter().cloned()).collect();
        for s in &scenarios {
            let mut defined = columns.clone();
            self.variables_in_order(s, &defaults, &mut defined)?;
        }
        let mut thresholds = Vec::new();
        for (i, (key, _)) in raw.thresholds.0.iter().enumerate() {
            if raw.thresholds.0[..i].iter().any(|(k, _)| k == key) {
                return Err(self.err(
                    &["thresholds:", key, key],
                    format!("{key} appears twice; put all its expressions in one list"),
                ));
            }
        }
        for (key, list) in raw.thresholds.0 {
            if list.is_empty() {
                return Err(self.err(
                    &["thresholds:", &key],
                    format!("{key}: the list is empty, so nothing is judged; give an expression, e.g. {key}: [p(95) < 500ms] or [rate < 1%], or remove the key"),
                ));
            }
            for t in list {
                let (expr, abort, delay, no_samples) = match t {
                    RawThreshold::Text(e) => (e, false, Duration::ZERO, None),
                    RawThreshold::Full(RawThresholdFull {
                        threshold,
                        abort_on_fail,
                        delay,
                        no_samples,
                    }) => (
                        threshold,
                        abort_on_fail,
                        delay.map_or(Duration::ZERO, |d| d.0),
                        no_samples,
                    ),
                };
                let mut th =
                    Threshold::parse(&key, &expr, abort, delay).map_err(|e| self.err(&["thresholds:", &key], e))?;
                match no_samples {
                    Some(NoSamples::Pass) => th.pass_without_samples = true,
                    Some(NoSamples::Fail) if th.pass_without_samples => {
                        return Err(self.err(
                            &["thresholds:", &key],
                            format!(
                                "'{expr}' ends '{}' but no_samples: fail; give one of them",
                                crate::threshold::OR_NO_SAMPLES
                            ),
                        ));
                    }
                    _ => {}
                }
                if let Some((tag, value)) = &th.tag
                    && !tag_exists(&scenarios, tag, value)
                {
                    return Err(self.err(
                        &["thresholds:", &key],
                        format!("no request carries the tag {tag}:{value}; check the step, group or scenario name"),
                    ));
                }
                thresholds.push(th);
            }
        }
        ScenarioPlan {
            file: self.file.to_string(),
            target,
            tls,
            defaults,
            data,
            scenarios,
            thresholds,
            scale: 1.0,
            secret_headers: Vec::new(),
            segment: None,
        }
        .with_secret_headers(&[])
        .map_err(|e| self.err(&["defaults:"], e.to_string()))
    }

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
    fn target_of(
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
    fn http_version(&self, at: &[&str], v: &serde_yaml_ng::Value) -> Result<HttpVersion, ScenarioError> {
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
        let template = Template::compile(written).map_err(bad)?;
        let empty = std::collections::HashMap::new();
        let url = template.render_env(given.env.unwrap_or(&empty)).map_err(bad)?;
        let mut base = self.base(at, &url).map_err(|e| ScenarioError {
            message: format!("{written} from the environment: {}", e.message),
            ..e
        })?;
        base.from = Some(written.to_string());
        Ok(base)
    }

    fn scenario(
        &self,
        name: &str,
        s: RawScenario,
        defaults: &Defaults,
        file_target: &BaseUrl,
        given: &TargetInputs,
    ) -> Result<Scenario, ScenarioError> {
        let key = format!("{name}:");
        let target = match s.target {
            Some(t) => Some(self.target_of(&["scenarios:", &key, "target:"], t, Some(file_target), given)?),
            None => None,
        };
        let exec = s.executor.name();
        let at = |field: &str| self.err(&["scenarios:", &key, &format!("{field}:")], "");
        let bad = |field: &str, message: String| ScenarioError { message, ..at(field) };
        let missing = |field: &str, example: &str| {
            self.err(
                &["scenarios:", &key, "executor:"],
                format!("the {exec} executor needs {field}, e.g. {field}: {example}"),
            )
        };
        // A field of another executor would be read and ignored: the run
        // would not be the one the author meant.
        let given = [
            ("vus", s.vus.is_some()),
            ("duration", s.duration.is_some()),
            ("start_vus", s.start_vus.is_some()),
            ("stages", s.stages.is_some()),
            ("graceful_ramp_down", s.graceful_ramp_down.is_some()),
            ("iterations", s.iterations.is_some()),
            ("max_duration", s.max_duration.is_some()),
            ("rate", s.rate.is_some()),
            ("start_rate", s.start_rate.is_some()),
            ("time_unit", s.time_unit.is_some()),
            ("pre_allocated_vus", s.pre_allocated_vus.is_some()),
            ("max_vus", s.max_vus.is_some()),
        ];
        for (field, set) in given {
            if set && !s.executor.fields().contains(&field) {
                return Err(bad(
                    field,
                    format!(
                        "`{field}` is not a field of {exec}; it takes {} (and start_time, graceful_stop, flow)",
                        s.executor.fields().join(", ")
                    ),
                ));
            }
        }
        let count = |v: Option<u64>, field: &str, example: &str, why: &str| -> Result<u64, ScenarioError> {
            match v {
                Some(0) => Err(bad(field, format!("{field} must be at least 1: {why}"))),
                Some(n) => Ok(n),
                None => Err(missing(field, example)),
            }
        };
        let vus = |v: Option<u64>| count(v, "vus", "10", "with no VUs the scenario runs nothing");
        let iterations = |v: Option<u64>| count(v, "iterations", "100", "0 iterations run nothing");
        let pre_allocated = |v: Option<u64>| {
            count(
                v,
                "pre_allocated_vus",
                "10",
                "an arrival-rate scenario needs a VU ready for its first iteration",
            )
        };
        let max_vus = |v: Option<u64>, pre: u64| match v {
            None => Ok(pre),
            Some(m) if m >= pre => Ok(m),
            Some(m) => Err(bad(
                "max_vus",
                format!(
                    "max_vus ({m}) is below pre_allocated_vus ({pre}); raise max_vus to {pre} or more, or leave it out (it defaults to pre_allocated_vus)"
                ),
            )),
        };
        let positive = |v: Option<Dur>, field: &str, default: Option<Duration>| -> Result<Duration, ScenarioError> {
            match (v, default) {
                (Some(d), _) if d.0.is_zero() => Err(bad(field, format!("{field} must be longer than 0"))),
                (Some(d), _) => Ok(d.0),
                (None, Some(d)) => Ok(d),
                (None, None) => Err(missing(field, "30s")),
            }
        };
        let stages = |v: Option<Vec<RawStage>>| -> Result<Vec<Stage>, ScenarioError> {
            let list = v.ok_or_else(|| {
                self.err(
                    &["scenarios:", &key, "executor:"],
                    format!("the {exec} executor needs stages, e.g. stages: [{{ duration: 30s, target: 10 }}]"),
                )
            })?;
            if list.is_empty() {
                return Err(bad("stages", "stages is empty; give at least one stage".into()));
            }
            if list.iter().all(|st| st.duration.0.is_zero()) {
                return Err(bad(
                    "stages",
                    "the stages last 0s in all, so the scenario would run nothing; give a stage a duration".into(),
                ));
            }
            list.into_iter()
                .map(|st| {
                    if st.target < 0.0 || !st.target.is_finite() {
                        Err(bad("stages", "a stage's target cannot be negative".into()))
                    } else {
                        Ok(Stage {
                            duration: st.duration.0,
                            target: st.target,
                        })
                    }
                })
                .collect()
        };
        let time_unit =
            positive(s.time_unit, "time_unit", Some(Duration::from_secs(1))).map_err(|e| ScenarioError {
                message: format!("{}: rates are iterations per time_unit", e.message),
                ..e
            })?;
        let max_duration = positive(s.max_duration, "max_duration", Some(Duration::from_secs(600)))?;
        // The limit of `-r`: a schedule no machine follows is refused, not
        // run (the engine would spend the run counting dropped starts).
        let per_second = |field: &str, r: f64| -> Result<(), ScenarioError> {
            let per_s = r / time_unit.as_secs_f64();
            if per_s > throng_plan::MAX_RATE {
                return Err(bad(
                    field,
                    format!(
                        "{r} per {} is {per_s:.3e} per second: more than 100M per second is not a plan one \
                         machine can follow; lower it or lengthen time_unit",
                        throng_plan::format_duration(time_unit)
                    ),
                ));
            }
            Ok(())
        };
        let executor = match s.executor {
            ExecutorName::ConstantVus => Executor::ConstantVus {
                vus: vus(s.vus)?,
                duration: positive(s.duration, "duration", None)?,
            },
            ExecutorName::RampingVus => {
                let start_vus = s.start_vus.unwrap_or(0);
                let stages = stages(s.stages)?;
                if start_vus == 0 && stages.iter().all(|st| st.target == 0.0) {
                    return Err(bad(
                        "stages",
                        "start_vus and every stage's target are 0: no VU would ever run; give a stage a target above 0"
                            .into(),
                    ));
                }
                Executor::RampingVus {
                    start_vus,
                    stages,
                    graceful_ramp_down: s.graceful_ramp_down.map_or(Duration::from_secs(30), |d| d.0),
                }
            }
            ExecutorName::PerVuIterations => Executor::PerVuIterations {
                vus: vus(s.vus)?,
                iterations: iterations(s.iterations)?,
                max_duration,
            },
            ExecutorName::SharedIterations => Executor::SharedIterations {
                vus: vus(s.vus)?,
                iterations: iterations(s.iterations)?,
                max_duration,
            },
            ExecutorName::ConstantArrivalRate => {
                let rate = match s.rate {
                    None => return Err(missing("rate", "10 (iterations per time_unit)")),
                    Some(r) if r.is_finite() && r > 0.0 => r,
                    Some(_) => {
                        return Err(bad(
                            "rate",
                            "rate must be greater than 0 (iterations per time_unit; fractions allowed)".into(),
                        ));
                    }
                };
                per_second("rate", rate)?;
                let pre = pre_allocated(s.pre_allocated_vus)?;
                Executor::ConstantArrivalRate {
                    rate,
                    time_unit,
                    duration: positive(s.duration, "duration", None)?,
                    pre_allocated_vus: pre,
                    max_vus: max_vus(s.max_vus, pre)?,
                }
            }
            ExecutorName::RampingArrivalRate => {
                let start_rate = match s.start_rate {
                    None => 0.0,
                    Some(r) if r.is_finite() && r >= 0.0 => r,
                    Some(_) => {
                        return Err(bad(
                            "start_rate",
                            "start_rate cannot be negative (iterations per time_unit at the start; default 0)".into(),
                        ));
                    }
                };
                let stages = stages(s.stages)?;
                if start_rate == 0.0 && stages.iter().all(|st| st.target == 0.0) {
                    return Err(bad(
                        "stages",
                        "start_rate and every stage's target are 0: no iteration would ever start; give a stage a target above 0"
                            .into(),
                    ));
                }
                per_second("start_rate", start_rate)?;
                let top = stages.iter().map(|st| st.target).fold(0.0, f64::max);
                per_second("stages", top)?;
                let pre = pre_allocated(s.pre_allocated_vus)?;
                Executor::RampingArrivalRate {
                    start_rate,
                    time_unit,
                    stages,
                    pre_allocated_vus: pre,
                    max_vus: max_vus(s.max_vus, pre)?,
                }
            }
        };
        if s.flow.is_empty() {
            return Err(self.err(
                &["scenarios:", &key, "flow:"],
                "flow is empty; give at least one request",
            ));
        }
        let flow = self.flow(&key, s.flow, defaults)?;
        self.websocket_origins(&key, &flow, target.as_ref().unwrap_or(file_target))?;
        self.request_protocols_fit(&flow, target.as_ref().unwrap_or(file_target))?;
        if !contains_request(&flow) {
            return Err(self.err(&["scenarios:", &key, "flow:"], "the flow makes no request"));
        }
        Ok(Scenario {
            name: name.to_string(),
            executor,
            start_time: s.start_time.map_or(Duration::ZERO, |d| d.0),
            graceful_stop: s.graceful_stop.map_or(Duration::from_secs(30), |d| d.0),
            target,
            cookies: s.cookies,
            flow,
        })
    }

    fn flow(&self, key: &str, steps: Vec<RawStep>, defaults: &Defaults) -> Result<Vec<Step>, ScenarioError> {
        let mut out = Vec::new();
        for mut st in steps {
            let many = "each step is exactly one of request:, grpc:, websocket:, think: or group:";
            if let Some(g) = st.grpc.take() {
                if st.request.is_some() || st.think.is_some() || st.group.is_some() || st.websocket.is_some() {
                    return Err(self.err(&["scenarios:", key, "grpc:"], many));
                }
                out.push(Step::Grpc(Box::new(self.grpc(key, g, defaults)?)));
                continue;
            }
            if let Some(w) = st.websocket.take() {
                if st.request.is_some() || st.think.is_some() || st.group.is_some() {
                    return Err(self.err(&["scenarios:", key, "websocket:"], many));
                }
                out.push(Step::WebSocket(Box::new(self.websocket(key, w, defaults)?)));
                continue;
            }
            let step = match (st.request, st.think, st.group) {
                (Some(r), None, None) => Step::Request(Box::new(self.request(key, r, defaults)?)),
                (None, Some(t), None) => Step::Think(match t {
                    RawThink::Fixed(d) => Think::Fixed(d.0),
                    RawThink::Range(RawThinkRange { min, max }) => {
                        if max.0 < min.0 {
                            return Err(self.err(&["scenarios:", key, "think:"], "think: min is above max"));
                        }
                        Think::Range(min.0, max.0)
                    }
                }),
                (None, None, Some(g)) => Step::Group {
                    flow: self.flow(key, g.flow, defaults)?,
                    name: g.name,
                },
                _ => {
                    return Err(self.err(
                        &["scenarios:", key, "flow:"],
                        "each step is exactly one of request:, grpc:, websocket:, think: or group:",
                    ));
                }
            };
            out.push(step);
        }
        Ok(out)
    }

    fn request(&self, key: &str, r: RawRequest, defaults: &Defaults) -> Result<Request, ScenarioError> {
        let at = |f: &str| ["scenarios:".to_string(), key.to_string(), f.to_string()];
        let path_at = at(&format!("path: {}", r.path));
        let here: Vec<&str> = path_at.iter().map(String::as_str).collect();
        let method = match &r.method {
            Some(m) => method(m).map_err(|e| {
                let written = format!("method: {m}");
                self.err_first(
                    &[
                        &[&here[..2], &[&written]].concat(),
                        &[&here[..], &["method:"]].concat(),
                        &here,
                    ],
                    e,
                )
            })?,
            None if r.json.is_some() || r.form.is_some() || r.body.is_some() => "POST".to_string(),
            None => "GET".to_string(),
        };
        if !r.path.starts_with('/') && !r.path.starts_with("{{") {
            return Err(self.err(&here, format!("path '{}' must start with /", r.path)));
        }
        let scalar = |v: &serde_yaml_ng::Value| -> Option<String> {
            match v {
                serde_yaml_ng::Value::String(s) => Some(s.clone()),
                serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
                serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
                _ => None,
            }
        };
        let pairs = |m: &BTreeMap<String, serde_yaml_ng::Value>,
                     what: &str|
         -> Result<Vec<(String, Template)>, ScenarioError> {
            m.iter()
                .map(|(k, v)| {
                    let text =
                        scalar(v).ok_or_else(|| self.err(&here, format!("{what} '{k}' must be a string or number")))?;
                    Ok((k.clone(), self.template(&here, &text)?))
                })
                .collect()
        };
        let body = match (r.json, r.form, r.body) {
            (Some(j), None, None) => Body::Json(self.json(&here, j)?),
            (None, Some(f), None) => Body::Form(pairs(&f, "form field")?),
            (None, None, Some(b)) => Body::Raw(self.template(&here, &b)?),
            (None, None, None) => Body::None,
            _ => return Err(self.err(&here, "give one of json:, form: or body:")),
        };
        let (captures, checks) = self.captures_and_checks(&here, r.capture, r.check)?;
        let name = r.name.unwrap_or_else(|| format!("{method} {}", r.path));
        let (http, http_at) = match &r.http {
            Some(v) => {
                let (line, column) = self.request_http_at(&here);
                let version = self
                    .http_version(&here, v)
                    .map_err(|e| ScenarioError { line, column, ..e })?;
                (Some(version), format!("{}:{line}:{column}", self.file))
            }
            None => (None, String::new()),
        };
        Ok(Request {
            http,
            http_at,
            path: self.template(&here, &r.path)?,
            query: pairs(&r.query, "query parameter")?,
            headers: r
                .headers
                .iter()
                .map(|(k, v)| self.header(&here, k, v))
                .collect::<Result<_, ScenarioError>>()?,
            body,
            expect: match &r.expect {
                Some(e) => self.statuses(&[&here[..], &["expect:"]].concat(), e)?,
                None => defaults.expect,
            },
            captures,
            checks,
            timeout: r.timeout.map_or(defaults.timeout, |d| d.0),
            max_body: r.max_body.map_or(defaults.max_body, |m| m.0),
            redirects: match r.redirects {
                Some(n) => self.redirects(&[&here[..], &[&format!("redirects: {n}")]].concat(), n)?,
                None => defaults.redirects,
            },
            name,
            method,
        })
    }

    /// Line and column of a request's `http:` (`here` is its path): on the
    /// path's own line when the request is a flow mapping, else on a line
    /// after it (its path's when it cannot be found).
    fn request_http_at(&self, here: &[&str]) -> (usize, usize) {
        let (line, column, found) = self.locate(here);
        let on_path_line = self
            .text
            .lines()
            .nth(line.saturating_sub(1))
            .and_then(|l| l.find("http:").map(|c| l[..c].chars().count() + 1));
        match (found, on_path_line) {
            (true, Some(c)) => (line, c),
            _ => match self.locate(&[here, &["http:"]].concat()) {
                (l, c, true) => (l, c),
                _ => (line, column),
            },
        }
    }

    /// A step's `capture:` and `check:` (request and grpc steps write them
    /// alike), at `here`.
    fn captures_and_checks(
        &self,
        here: &[&str],
        capture: BTreeMap<String, RawCapture>,
        check: BTreeMap<String, RawCheck>,
    ) -> Result<(Vec<Capture>, Vec<Check>), ScenarioError> {
        let mut captures = Vec::new();
        for (var, c) in capture {
            let at = self.key_path(&[here, &["capture:"]].concat(), &var);
            if !is_identifier(&var) {
                let suggestion: String = var
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                let suggestion = if suggestion.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("_{suggestion}")
                } else {
                    suggestion
                };
                return Err(self.err(
                    &at,
                    format!(
                        "capture '{var}': a variable name is letters, digits and _, not starting with a digit, e.g. {suggestion}"
                    ),
                ));
            }
            if RESERVED.contains(&var.as_str()) {
                return Err(self.err(
                    &at,
                    format!(
                        "capture '{var}': {{{{{var}}}}} is built in ({}); give the variable another name, e.g. my_{var}",
                        RESERVED.join(", ")
                    ),
                ));
            }
            let from = match (c.json, c.header, c.regex) {
                (Some(p), None, None) => {
                    json_pointer(&p).map_err(|e| self.err(&at, format!("capture {var}: {e}")))?;
                    CaptureFrom::Json(p)
                }
                (None, Some(h), None) => CaptureFrom::Header(h),
                (None, None, Some(re)) => CaptureFrom::Regex(
                    regex::Regex::new(&re).map_err(|e| self.err(&at, format!("capture {var}: regex: {e}")))?,
                ),
                _ => {
                    return Err(self.err(
                        &at,
                        format!("capture {var}: give exactly one of json:, header: or regex:"),
                    ));
                }
            };
            captures.push(Capture { var, from });
        }
        let mut checks = Vec::new();
        for (name, c) in check {
            let at = self.key_path(&[here, &["check:"]].concat(), &name);
            let bad = |m: String| self.err(&at, format!("check '{name}': {m}"));
            // One kind, and only that kind's modifiers: a modifier on another
            // kind would be read and ignored, and the check pass regardless.
            let kinds = [
                ("status:", c.status.is_some()),
                ("body_contains:", c.body_contains.is_some()),
                ("json:", c.json.is_some()),
                ("header:", c.header.is_some()),
                ("duration_under:", c.duration_under.is_some()),
            ];
            let given: Vec<&str> = kinds.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect();
            const KINDS: &str =
                "status:, body_contains:, json: (with equals: or exists:), header: (with contains:) or duration_under:";
            let kind = match given.as_slice() {
                [] => return Err(bad(format!("give one of {KINDS}"))),
                [kind] => *kind,
                several => {
                    return Err(bad(format!(
                        "it has {}; give only one of {KINDS}",
                        several.join(" and ")
                    )));
                }
            };
            for (modifier, set, belongs) in [
                ("equals:", c.equals.is_some(), "json:"),
                ("exists:", c.exists.is_some(), "json:"),
                ("contains:", c.contains.is_some(), "header:"),
            ] {
                if set && kind != belongs {
                    return Err(bad(format!(
                        "{modifier} goes with {belongs}, not with {kind}; \
                         e.g. {{ json: /state, equals: active }} or {{ header: Content-Type, contains: json }}"
                    )));
                }
            }
            let kind = match c {
                RawCheck { status: Some(s), .. } => {
                    if s.is_empty() {
                        return Err(bad("status: is empty; list the codes that pass, e.g. [200]".into()));
                    }
                    if let Some(code) = s.iter().find(|c| !(100..=599).contains(*c)) {
                        return Err(bad(format!("status {code}: codes run from 100 to 599")));
                    }
                    CheckKind::Status(s)
                }
                RawCheck {
                    body_contains: Some(t), ..
                } => CheckKind::BodyContains(t),
                RawCheck {
                    json: Some(p),
                    equals,
                    exists,
                    ..
                } => {
                    json_pointer(&p).map_err(&bad)?;
                    match (equals, exists) {
                        (Some(v), None) => {
                            CheckKind::JsonEquals(p, serde_json::to_value(&v).map_err(|e| bad(e.to_string()))?)
                        }
                        (None, Some(true) | None) => CheckKind::JsonExists(p),
                        _ => return Err(bad("json takes equals: VALUE or exists: true".into())),
                    }
                }
                RawCheck {
                    header: Some(h),
                    contains,
                    ..
                } => CheckKind::Header(h, contains),
                RawCheck {
                    duration_under: Some(d),
                    ..
                } => CheckKind::DurationUnder(d.0),
                // The kinds were counted above: exactly one is set.
                _ => return Err(bad(format!("give one of {KINDS}"))),
            };
            checks.push(Check { name, kind });
        }
        Ok((captures, checks))
    }

    /// A `proto:` at `at`: its files compiled (read through `read`).
    fn proto(
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
    fn grpc(&self, key: &str, g: RawGrpc, defaults: &Defaults) -> Result<GrpcStep, ScenarioError> {
        let call_at = format!("call: {}", g.call);
        let here: Vec<&str> = vec!["scenarios:", key, "grpc:", &call_at];
        // The field's key after the call's line, for errors.
        let at = |field: &str| self.key_path(&here, field);
        let (message_at, metadata_at) = (at("message"), at("metadata"));
        let message_at: Vec<&str> = message_at.iter().map(String::as_str).collect();
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
        let body = match g.message {
            Some(m) => Body::Json(self.json(&message_at, m)?),
            None => Body::None,
        };
        let framed = match &method {
            Some(m) => self.framed(m, &body, &message_at)?,
            None => None,
        };
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
        let expect = match &g.expect {
            None => vec![0],
            Some(list) if list.is_empty() => {
                return Err(self.err(
                    &at("expect"),
                    "expect: is empty, so every call would count as failed; list the codes counted ok, e.g. [OK]",
                ));
            }
            Some(list) => list
                .iter()
                .map(|s| match s {
                    RawStatus::Code(c) => crate::grpc::parse_code(&c.to_string()),
                    RawStatus::Text(t) => crate::grpc::parse_code(t),
                })
                .collect::<Result<Vec<u16>, String>>()
                .map_err(|e| self.err(&at("expect"), format!("expect: {e}")))?,
        };
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
        let (captures, checks) = self.captures_and_checks(&here, g.capture, g.check)?;
        let call = method
            .as_ref()
            .map_or_else(|| g.call.clone(), crate::grpc::Method::call);
        let path = format!("/{call}");
        Ok(GrpcStep {
            expect,
            deadline,
            server_streaming: method.as_ref().is_some_and(crate::grpc::Method::server_streaming),
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
            },
            call,
            method,
            framed,
        })
    }

    /// A message without templates, encoded now: once for the run, and an
    /// error is the file's (at `at`), not a failed call.
    fn framed(&self, method: &crate::grpc::Method, body: &Body, at: &[&str]) -> Result<Option<Vec<u8>>, ScenarioError> {
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

    /// Looks up the methods of `grpc:` steps whose scenario asks its
    /// target's server reflection, once the target's TLS settings are
    /// known: one question per target and service.
    fn resolve_reflected(
        &self,
        scenarios: &mut [Scenario],
        file: &BaseUrl,
        tls: Option<&TlsSettings>,
    ) -> Result<(), ScenarioError> {
        fn pending<'s>(flow: &'s mut [Step], out: &mut Vec<&'s mut GrpcStep>) {
            for s in flow {
                match s {
                    Step::Grpc(g) if g.method.is_none() => out.push(g),
                    Step::Group { flow, .. } => pending(flow, out),
                    _ => {}
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
                let here = ["scenarios:", key.as_str(), "grpc:", call_at.as_str()];
                let Some(reflect) = self.reflect else {
                    return Err(self.err(
                        &here,
                        "proto: reflection asks the server when throng run starts, which this command does not; \
                         give proto: { files: [FILE.proto] }",
                    ));
                };
                let (service, _) = crate::grpc::split_call(&g.call).map_err(|e| self.err(&here, e))?;
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
                g.framed = self.framed(&method, &g.request.body, &here)?;
                g.server_streaming = method.server_streaming();
                g.method = Some(method);
            }
        }
        Ok(())
    }

    /// A `websocket:` step. Its URL is a path on the target (`/chat`) or
    /// `ws://` / `wss://` with the target's own host and port (checked in
    /// [`Self::websocket_origins`], where the target is known).
    fn websocket(&self, key: &str, w: RawWebSocket, defaults: &Defaults) -> Result<WebSocket, ScenarioError> {
        let url_at = format!("url: {}", w.url);
        let here: Vec<&str> = vec!["scenarios:", key, "websocket:", &url_at];
        let path = if w.url.starts_with('/') {
            w.url.as_str()
        } else if let Some(rest) = w.url.strip_prefix("ws://").or_else(|| w.url.strip_prefix("wss://")) {
            let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
            if authority.contains('@') {
                // The URL names the step in reports: a password there would
                // be in every output. Refused as a target's is, unquoted.
                return Err(self.err(
                    &here,
                    format!(
                        "url '{}' has credentials (user@), which throng does not send; remove them and give an \
                         Authorization header in defaults.headers (redacted in results)",
                        throng_plan::mask_userinfo(&w.url)
                    ),
                ));
            }
            rest.find('/').map_or("/", |i| &rest[i..])
        } else {
            return Err(self.err(
                &here,
                format!(
                    "url '{}' is neither a path on the target (/chat) nor ws:// or wss:// (ws://127.0.0.1:8080/chat)",
                    w.url
                ),
            ));
        };
        if w.messages.is_empty() {
            return Err(self.err_first(
                &[
                    &["scenarios:", key, &url_at, "messages:"],
                    &["scenarios:", key, "websocket:", "messages:"],
                ],
                "messages is empty; give at least one, e.g. messages: [{ send: hello }, { expect: hello }]",
            ));
        }
        let mut messages = Vec::new();
        for (i, m) in w.messages.into_iter().enumerate() {
            let n = i + 1;
            // At the message's own line (a block sequence), else at the
            // first `needle` after `messages:`.
            let err_at = |needle: Option<&str>, message: String| -> ScenarioError {
                let seq = [
                    &["scenarios:", key, url_at.as_str(), "messages:"][..],
                    &["scenarios:", key, "websocket:", "messages:"][..],
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
            };
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
            let msg = match (m.send, m.send_binary, m.expect) {
                (Some(t), None, None) => WsMessage::Send(
                    Template::compile(&t).map_err(|e| err_at(Some("send:"), format!("message {n}: {e}")))?,
                ),
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
                    let mut captures = Vec::new();
                    for (var, c) in m.capture {
                        let cat = |m: String| err_at(Some(&var), m);
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
                            (None, None, Some(re)) => CaptureFrom::Regex(
                                regex::Regex::new(&re).map_err(|e| cat(format!("capture {var}: regex: {e}")))?,
                            ),
                            _ => {
                                return Err(cat(format!(
                                    "capture {var}: give exactly one of json: or regex: (a message has no headers)"
                                )));
                            }
                        };
                        captures.push(Capture { var, from });
                    }
                    WsMessage::Expect { regex, captures }
                }
                // Exactly one was counted above.
                _ => {
                    return Err(err_at(
                        None,
                        format!("message {n}: give one of send:, send_binary: or expect:"),
                    ));
                }
            };
            messages.push(msg);
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

    /// Line and column (from 1) of the `n`-th item (from 1) of the block
    /// sequence under the key the `path` ends at — of `needle` in it when
    /// the item has it; None for a flow sequence (`[…]`) or when not found.
    fn seq_item(&self, path: &[&str], n: usize, needle: Option<&str>) -> Option<(usize, usize)> {
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

    /// The `websocket:` steps of a scenario whose target is `target`: an
    /// absolute URL has the target's own scheme (ws: http, wss: https),
    /// host and port; the target speaks HTTP/1.1 (no WebSocket over
    /// HTTP/2 or HTTP/3 here).
    fn websocket_origins(&self, key: &str, flow: &[Step], target: &BaseUrl) -> Result<(), ScenarioError> {
        for w in websockets(flow) {
            let url_at = format!("url: {}", w.url);
            let here = ["scenarios:", key, "websocket:", &url_at];
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
    fn request_protocols_fit(&self, flow: &[Step], target: &BaseUrl) -> Result<(), ScenarioError> {
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

    /// An error (its message to fill) at a `file:line:col` made by
    /// [`Self::request`].
    fn err_at(&self, at: &str) -> ScenarioError {
        let mut parts = at.rsplitn(3, ':');
        let column = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            message: String::new(),
        }
    }

    /// gRPC runs over HTTP/2: a scenario with a `grpc:` step needs a target
    /// written `{ url, http: 2 }`.
    fn grpc_over_http2(&self, sc: &Scenario, file: &BaseUrl) -> Result<(), ScenarioError> {
        fn first(flow: &[Step]) -> Option<&GrpcStep> {
            flow.iter().find_map(|s| match s {
                Step::Grpc(g) => Some(g.as_ref()),
                Step::Group { flow, .. } => first(flow),
                _ => None,
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

    /// A `redirects:` count: at most [`throng_plan::MAX_REDIRECTS`].
    fn redirects(&self, path: &[&str], n: u32) -> Result<u32, ScenarioError> {
        if n > throng_plan::MAX_REDIRECTS {
            return Err(self.err(
                path,
                format!(
                    "redirects: {n} is over the limit of {}; give 0 (do not follow) to {}",
                    throng_plan::MAX_REDIRECTS,
                    throng_plan::MAX_REDIRECTS
                ),
            ));
        }
        Ok(n)
    }

    /// Checks that every `{{NAME}}` of the scenario is a data column or a
    /// capture of a step that runs before it. A capture of a later step is
    /// not enough: captures are cleared when an iteration starts, so the
    /// value would render empty.
    fn variables_in_order(
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
                        None => vec!["scenarios:", &key],
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
                             available to later steps only (and to a websocket: step's later messages); capture it \
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

    fn json(&self, here: &[&str], v: serde_yaml_ng::Value) -> Result<JsonTemplate, ScenarioError> {
        use serde_yaml_ng::Value as Y;
        if let Some(var) = unquoted_template(&v) {
            return Err(self.err_at_use(
                here,
                &var,
                format!(
                    "{{{{{var}}}}} is not in quotes, so YAML reads it as a mapping and the body would send an \
                     object; write it as a string: \"{{{{{var}}}}}\""
                ),
            ));
        }
        Ok(match v {
            Y::String(s) => {
                let t = self.template(here, &s)?;
                if t.is_literal() {
                    JsonTemplate::Value(serde_json::Value::String(s))
                } else {
                    JsonTemplate::Text(t)
                }
            }
            Y::Sequence(items) => JsonTemplate::Array(
                items
                    .into_iter()
                    .map(|i| self.json(here, i))
                    .collect::<Result<_, _>>()?,
            ),
            Y::Mapping(m) => JsonTemplate::Object(
                m.into_iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Y::String(s) => s,
                            other => serde_yaml_ng::to_string(&other).unwrap_or_default().trim().to_string(),
                        };
                        Ok((key, self.json(here, v)?))
                    })
                    .collect::<Result<_, ScenarioError>>()?,
            ),
            other => JsonTemplate::Value(
                serde_json::to_value(&other).map_err(|e| self.err(here, format!("json body: {e}")))?,
            ),
        })
    }
}

/// The JSON of a body without templates; None when it has one.
fn literal_json(j: &JsonTemplate) -> Option<serde_json::Value> {
    Some(match j {
        JsonTemplate::Value(v) => v.clone(),
        JsonTemplate::Text(_) => return None,
        JsonTemplate::Array(a) => serde_json::Value::Array(a.iter().map(literal_json).collect::<Option<_>>()?),
        JsonTemplate::Object(o) => serde_json::Value::Object(
            o.iter()
                .map(|(k, v)| Some((k.clone(), literal_json(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

/// The variable of `{{var}}` written without quotes: YAML reads it as a
/// flow mapping whose one key is the mapping `{var: null}`, with no value.
fn unquoted_template(v: &serde_yaml_ng::Value) -> Option<String> {
    use serde_yaml_ng::Value as Y;
    let Y::Mapping(outer) = v else { return None };
    let (Some((Y::Mapping(inner), Y::Null)), 1) = (outer.iter().next(), outer.len()) else {
        return None;
    };
    match (inner.iter().next(), inner.len()) {
        (Some((Y::String(var), Y::Null)), 1) => Some(var.trim().to_string()),
        _ => None,
    }
}

/// Methods whose names servers know in capitals only: written in any case,
/// sent in capitals.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// A method as written: a standard one in any case becomes its capitals
/// (`get` → `GET`); another token (`PURGE`, `PROPFIND`) is sent as written,
/// since methods are case-sensitive (RFC 9110 §9.1).
pub(super) fn method(m: &str) -> Result<String, String> {
    if let Some(standard) = METHODS.iter().find(|s| s.eq_ignore_ascii_case(m)) {
        return Ok(standard.to_string());
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if m.is_empty() || !m.bytes().all(token) {
        return Err(format!(
            "'{m}' is not an HTTP method: write one of {} (in any case), or another token of letters, digits and !#$%&'*+-.^_`|~",
            METHODS.join(", ")
        ));
    }
    Ok(m.to_string())
}

/// Checks a JSON pointer (RFC 6901): empty (the whole document) or `/`
/// then keys separated by `/`, with `~0` for `~` and `~1` for `/` in a key.
pub(super) fn json_pointer(p: &str) -> Result<(), String> {
    if !p.is_empty() && !p.starts_with('/') {
        // `data.token`, `$.data.token`, `data[0].id`: a path as JSONPath or
        // k6's res.json() write it.
        let keys = p
            .trim_start_matches('$')
            .trim_start_matches('.')
            .replace('[', ".")
            .replace(']', "");
        let suggestion: String = keys
            .split('.')
            .filter(|k| !k.is_empty())
            .map(|k| format!("/{k}"))
            .collect();
        return Err(format!(
            "json '{p}' is a JSON pointer and starts with /, e.g. {}",
            if suggestion.is_empty() {
                "/data/token".to_string()
            } else {
                suggestion
            }
        ));
    }
    let mut rest = p;
    while let Some(i) = rest.find('~') {
        rest = &rest[i + 1..];
        if !rest.starts_with(['0', '1']) {
            return Err(format!(
                "json '{p}': in a JSON pointer ~ starts an escape: write ~0 for ~ and ~1 for / inside a key"
            ));
        }
    }
    Ok(())
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
            Step::Group { flow, .. } => out.extend(units(flow)),
            Step::Think(_) => {}
        }
    }
    out
}

pub(super) fn contains_request(flow: &[Step]) -> bool {
    flow.iter().any(|s| match s {
        Step::Request(_) | Step::Grpc(_) | Step::WebSocket(_) => true,
        Step::Group { flow, .. } => contains_request(flow),
        Step::Think(_) => false,
    })
}

pub(super) fn tag_exists(scenarios: &[Scenario], tag: &str, value: &str) -> bool {
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
            Step::Group { name, flow } => tag == "group" && name == value || in_flow(flow, tag, value),
            Step::Think(_) => false,
        })
    }
    scenarios.iter().any(|s| {
        tag == "scenario" && s.name == value
            || tag == "stage" && stage_names(s).iter().any(|n| n == value)
            || in_flow(&s.flow, tag, value)
    })
}
