//! A plan of several requests (several targets, or `--body-lines`
//! bodies): each rendered once into the plan's request table, its headers
//! and body checked, and the limits of such a plan.

use crate::error::PlanError;
use crate::head::RequestHead;
use crate::targets::{MAX_TAGGED_TARGETS, RawTarget, Requests, TargetInfo, names, split_body_lines};

use super::headers::{framing_headers, parse_header};
use super::target::{at_error, parse_target_at, target_method};
use super::{BodyLines, HttpArgs, HttpPlan, Load, MAX_BODY_BYTES, RequestTable, Scheme, Target, Wire, secret_names};

/// The error of a table past [`crate::targets::MAX_REQUEST_TABLE_BYTES`].
fn table_full() -> PlanError {
    PlanError::invalid(
        "--targets/--body-lines",
        format!(
            "the requests to send come to more than {} MiB; every request is rendered once before the \
             run, so use fewer targets, bodies or smaller bodies",
            crate::targets::MAX_REQUEST_TABLE_BYTES >> 20
        ),
    )
}

/// Where a table's requests go: each origin (host and port) once, in the
/// order first seen.
#[derive(Default)]
struct Origins(Vec<Target>);

impl Origins {
    /// The index of `target`'s origin, added when it is new.
    fn index(&mut self, target: &Target) -> usize {
        match self
            .0
            .iter()
            .position(|o| (&o.host, o.port) == (&target.host, target.port))
        {
            Some(o) => o,
            None => {
                self.0.push(target.clone());
                self.0.len() - 1
            }
        }
    }
}

impl HttpPlan {
    /// Renders every request of a plan with several (targets, or
    /// `--body-lines` bodies) into its table, each target's headers and
    /// body checked; `body` is the `--body`/`--data` every target without
    /// its own sends.
    pub(super) fn render_table(&mut self, args: &HttpArgs, raw: &[RawTarget], body: Vec<u8>) -> Result<(), PlanError> {
        let global = self.headers.clone();
        let mut table = Requests::builder();
        let mut named = Vec::with_capacity(raw.len());
        let mut infos = Vec::with_capacity(raw.len());
        let mut origins = Origins::default();
        let body_file = self.body_file.clone();
        for (i, r) in raw.iter().enumerate() {
            let (target, url_auth) = parse_target_at(r)?;
            self.same_scheme(r, &target)?;
            table.origin(origins.index(&target));
            let (body_name, body): (Option<&str>, &[u8]) = match &r.body {
                Some((name, b)) => (Some(name), b),
                None => (body_file.as_deref(), &body),
            };
            if body.len() as u64 > MAX_BODY_BYTES {
                return Err(PlanError::invalid(
                    "--targets",
                    format!(
                        "{}: the body is {} bytes, over the limit of {MAX_BODY_BYTES} bytes (64 MiB)",
                        r.at,
                        body.len()
                    ),
                ));
            }
            let method = target_method(
                r,
                args,
                r.body.is_some() || self.body_file.is_some() || args.body_lines.is_some(),
            )?;
            let headers = self.target_headers(&global, r, i, url_auth)?;
            let entry = Entry {
                index: i,
                raw: r,
                method: &method,
                target: &target,
                headers,
            };
            match &args.body_lines {
                Some((file, bytes)) => {
                    let count = self.push_body_lines(&mut table, &entry, file, bytes)?;
                    self.body_lines = Some(BodyLines {
                        file: file.clone(),
                        count,
                    });
                }
                None => self.push_one(&mut table, entry, body_name, body)?,
            }
            infos.push(TargetInfo {
                name: String::new(),
                method: method.clone(),
                url: target.url.clone(),
                body_bytes: body.len() as u64,
            });
            named.push((method, target));
        }
        for (info, name) in infos.iter_mut().zip(names(&named)) {
            info.name = name;
        }
        self.check_table(args, raw, &origins)?;
        let table = table.finish();
        // The first request stands for the plan where one is asked for.
        self.wire = Wire(table.bytes(0));
        self.body_bytes = infos[0].body_bytes;
        self.method = infos[0].method.clone();
        self.check_tagged(raw)?;
        if raw.len() > 1 {
            self.targets = infos;
        }
        let mut table = table;
        if origins.0.len() > 1 {
            table.origins = origins.0;
        }
        self.requests = RequestTable(std::sync::Arc::new(table));
        Ok(())
    }

    /// Refuses a target whose scheme is not the first target's.
    fn same_scheme(&self, r: &RawTarget, target: &Target) -> Result<(), PlanError> {
        if target.scheme == self.target.scheme {
            return Ok(());
        }
        Err(PlanError::invalid(
            if r.at.starts_with("URL") { "URL" } else { "--targets" },
            format!(
                "{}: {} is {} but {} is not; one run's targets are all http:// or all https:// \
                 (run one throng per scheme)",
                r.at,
                target.url,
                if target.scheme == Scheme::Https {
                    "https"
                } else {
                    "http"
                },
                self.target.url,
            ),
        ))
    }

    /// The `i`th target's headers: the run's (`global`), its own over
    /// them, and its own `user:pass@` over the run's credentials; the
    /// secret ones among them join the plan's.
    fn target_headers(
        &mut self,
        global: &[(String, String)],
        r: &RawTarget,
        i: usize,
        url_auth: Option<String>,
    ) -> Result<Vec<(String, String)>, PlanError> {
        let mut headers = global.to_vec();
        for h in &r.headers {
            let (name, value) = parse_header(h).map_err(|e| at_error(r, e))?;
            if self.trace.is_some() && name.eq_ignore_ascii_case(super::TRACEPARENT) {
                return Err(at_error(
                    r,
                    PlanError::invalid(
                        "--trace-context",
                        "gives a traceparent header, and --trace-context sets each request's; drop that \
                         traceparent (or leave out --trace-context to send yours as it is)",
                    ),
                ));
            }
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
            headers.push((name, value));
        }
        // Its own user:pass@ over the run's credentials (the first
        // target's are among them already).
        if let Some(auth) = url_auth.filter(|_| i > 0) {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".to_string(), auth));
        }
        let secret = secret_names(&[], headers.iter().map(|(n, _)| n.as_str()))?;
        for name in secret {
            if !self.secret_headers.contains(&name) {
                self.secret_headers.push(name);
            }
        }
        self.secret_headers.sort();
        Ok(headers)
    }

    /// Renders `entry`'s request with `body` into `out`.
    fn render_entry(&self, out: &mut Vec<u8>, entry: &Entry<'_>, headers: &[(String, String)], body: &[u8]) {
        // Through a proxy, plain http names the whole URL (absolute form).
        let target = entry.target;
        let request_target = match (&self.reach.proxy, target.scheme) {
            (Some(_), Scheme::Http) => format!("http://{}{}", target.host_authority(), target.path),
            _ => target.path.clone(),
        };
        RequestHead {
            method: entry.method,
            target: &request_target,
            authority: &target.host_authority(),
            headers,
            body_len: body.len(),
            close: !self.keepalive,
        }
        .write(out);
        out.extend_from_slice(body);
    }

    /// Pushes one request of `entry` per line of the `--body-lines` file;
    /// returns how many.
    fn push_body_lines(
        &self,
        table: &mut crate::targets::RequestsBuilder,
        entry: &Entry<'_>,
        file: &str,
        bytes: &[u8],
    ) -> Result<u64, PlanError> {
        let lines = split_body_lines(file, bytes)?;
        let mut headers = entry.headers.clone();
        for line in &lines {
            let b = &bytes[line.clone()];
            framing_headers(&mut headers, b.len() as u64, Some(file))?;
            if !table.push(entry.index, |out| self.render_entry(out, entry, &headers, b)) {
                return Err(table_full());
            }
        }
        Ok(lines.len() as u64)
    }

    /// Pushes `entry`'s one request, with `body` (from `body_name`).
    fn push_one(
        &self,
        table: &mut crate::targets::RequestsBuilder,
        mut entry: Entry<'_>,
        body_name: Option<&str>,
        body: &[u8],
    ) -> Result<(), PlanError> {
        let mut headers = std::mem::take(&mut entry.headers);
        framing_headers(&mut headers, body.len() as u64, body_name)
            .map_err(|e| if entry.index == 0 { e } else { at_error(entry.raw, e) })?;
        if !table.push(entry.index, |out| self.render_entry(out, &entry, &headers, body)) {
            return Err(table_full());
        }
        Ok(())
    }

    /// Refuses `--body-lines` with several targets, and a closed loop with
    /// fewer connections than origins.
    fn check_table(&self, args: &HttpArgs, raw: &[RawTarget], origins: &Origins) -> Result<(), PlanError> {
        if raw.len() > 1 && args.body_lines.is_some() {
            return Err(PlanError::invalid(
                "--body-lines",
                "cycles the bodies of one target; with several targets give each its body in the \
                 --targets file (an @file line, or \"body\" in JSON lines)",
            ));
        }
        // Every connection serves one origin (see the engine's targets):
        // a closed loop needs one per origin at least.
        let origins = origins.0.len();
        if origins > 1 && self.load == Load::Closed && (self.connections as usize) < origins {
            return Err(PlanError::invalid(
                "-c/--connections",
                format!(
                    "-c {} is fewer than the {origins} origins (host:port) the targets are on; each connection \
                     serves one origin, so give at least -c {origins}",
                    self.connections,
                ),
            ));
        }
        Ok(())
    }

    /// Refuses thresholds per target past [`MAX_TAGGED_TARGETS`] targets.
    fn check_tagged(&self, raw: &[RawTarget]) -> Result<(), PlanError> {
        if raw.len() > MAX_TAGGED_TARGETS
            && let Some(t) = self.thresholds.iter().find(|t| t.contains("{target:"))
        {
            return Err(PlanError::invalid(
                "--threshold",
                format!(
                    "'{t}': figures per target are kept for at most {MAX_TAGGED_TARGETS} targets and this run has \
                     {}; judge the whole run (e.g. 'response: p(95) < 500ms') or use fewer targets",
                    raw.len()
                ),
            ));
        }
        Ok(())
    }
}

/// One target's request(s) as the table renders them.
struct Entry<'a> {
    /// Its index among the targets.
    index: usize,
    /// As written (for errors).
    raw: &'a RawTarget,
    method: &'a str,
    target: &'a Target,
    /// Its headers, framing headers not yet checked.
    headers: Vec<(String, String)>,
}
