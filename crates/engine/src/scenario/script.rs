//! A k6 script's iteration: the VU's [`ScriptVu`] resumed until it ends
//! its iteration; each request it yields sent as a `request:` step would
//! be (`request::request`: the VU's keep-alive connection, timing,
//! recording, tags), its response handed back; checks, groups and sleeps
//! recorded and waited here.

use std::time::Instant;

use throng_metrics::CustomKind;
use throng_scenario::{Body, CookieJar, Request, Template};
use throng_script::{Input, Response, ScriptVu, Stage, Yield};

use super::ops::{ReqOp, Scen, Vu, sleep_until, with_scen};
use super::request;
use crate::ctx::Ctx;
use crate::proto::http1::Keep;

/// Where `setup()`'s result (JSON) travels: a capture of the setup flow,
/// which every load VU and the teardown read (`Scen::setup`).
pub(crate) const SETUP_DATA: &str = "k6 setup data";

/// Distinct request names a worker keeps as `step:` tags; past it, a
/// script naming each request by a unique URL shares `step:(other)`.
const NAMES: usize = 1000;

/// The longest request name kept as a tag of its own; a longer one (a
/// URL with a huge query, say) shares `step:(other)`.
const NAME_BYTES: usize = 1024;

/// One iteration of the script; true when it ran to its end or failed
/// (the VU goes on), false when the run stopped it.
pub(super) async fn iteration(ctx: &Ctx, sc: &Scen, vu: &mut Vu, intended: Option<Instant>) -> bool {
    let started = intended.unwrap_or_else(Instant::now);
    vu.trace = ctx.spec.trace.as_ref().map(crate::trace::Tracer::trace_id);
    // k6 empties the jar at each iteration.
    vu.jar = CookieJar::new();
    let Some(script) = sc.script.as_ref() else {
        return false;
    };
    // Taken out while the iteration runs: dropped midway (cut off), it
    // ends its script (see ScriptVu's Drop) and the VU stops.
    let mut js = match vu.js.take() {
        Some(js) => js,
        None => match ScriptVu::new(
            script,
            vu.id,
            &sc.env,
            stage(sc, script),
            sc.setup.get(SETUP_DATA).map(|d| d.as_str().into()),
        ) {
            Ok(js) => Box::new(js),
            Err(_) => {
                with_scen(ctx, |r| {
                    r.iteration_failed(Instant::now(), "script.init", "the VU's stack could not be mapped")
                });
                return true;
            }
        },
    };
    let mut groups: Vec<(usize, usize, Instant)> = Vec::new();
    let mut origin = intended;
    let mut input = Input::Start;
    loop {
        if ctx.stopping.get() {
            return false;
        }
        tokio::task::coop::consume_budget().await;
        input = match js.resume(input) {
            Yield::Request(r) => send(ctx, sc, vu, &r, &groups, origin.take()).await,
            Yield::Sleep(d) => {
                if !sleep_until(ctx, Instant::now() + d).await {
                    return false;
                }
                Input::Resumed
            }
            Yield::Check { name, passed } => {
                with_scen(ctx, |r| {
                    let i = r.check_index(&name);
                    r.check(i, passed);
                });
                Input::Resumed
            }
            Yield::GroupStart(name) => {
                if let Some((g, t)) = with_scen(ctx, |r| (r.group_index(&name), r.tag(&format!("group:{name}")))) {
                    groups.push((g, t, Instant::now()));
                }
                Input::Resumed
            }
            Yield::CookieSet { url, set_cookie } => match jar_place(&url) {
                Ok((_, host, path)) => {
                    vu.jar.store(&host, &path, &set_cookie);
                    Input::Resumed
                }
                Err(m) => Input::Throw(m),
            },
            Yield::CookiesFor(url) => match jar_place(&url) {
                Ok((https, host, path)) => Input::Cookies(vu.jar.header(https, &host, &path).unwrap_or_default()),
                Err(m) => Input::Throw(m),
            },
            Yield::GroupEnd => {
                if let Some((g, _, t0)) = groups.pop() {
                    with_scen(ctx, |r| r.group(g, t0.elapsed()));
                }
                Input::Resumed
            }
            Yield::Add {
                metric,
                kind,
                value,
                tags,
            } => {
                let kind = [
                    CustomKind::Counter,
                    CustomKind::Gauge,
                    CustomKind::Rate,
                    CustomKind::Trend,
                ]
                .into_iter()
                .find(|k| k.name() == kind)
                .unwrap_or(CustomKind::Counter);
                with_scen(ctx, |r| {
                    let i = r.custom_index(&metric, kind);
                    r.custom(i, Some(value));
                    // Each tag also keeps the value under `name{tag:value}`,
                    // as a scenario file's `add:` tags do.
                    for (k, v) in &tags {
                        let i = r.custom_index(&format!("{metric}{{{k}:{v}}}"), kind);
                        r.custom(i, Some(value));
                    }
                });
                Input::Resumed
            }
            Yield::IterationDone => {
                let now = Instant::now();
                with_scen(ctx, |r| r.iteration(now, now.saturating_duration_since(started)));
                if let (Some(keep), Some(data)) = (&sc.keep, js.setup_data()) {
                    // setup()'s result, for the run to hand the load. A
                    // poisoned lock only means another VU panicked mid-copy.
                    let mut kept = keep.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    kept.insert(SETUP_DATA.to_string(), data);
                }
                break;
            }
            Yield::Failed { class, message } => {
                with_scen(ctx, |r| r.iteration_failed(Instant::now(), class, &message));
                break;
            }
            Yield::Ended => return false,
        };
    }
    vu.js = Some(js);
    true
}

/// A URL as the cookie jar reads it: https, host, path.
fn jar_place(url: &str) -> Result<(bool, String, String), String> {
    let u = url::Url::parse(url).map_err(|e| format!("cookie jar: invalid URL '{url}': {e}"))?;
    let host = u.host_str().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    Ok((u.scheme() == "https", host.to_ascii_lowercase(), u.path().to_string()))
}

/// What the scenario's VUs run: the run's `setup:` and `teardown:` flows
/// (scenario names a file cannot give its own) call the script's
/// `setup()` and `teardown(data)`; an `options.scenarios` scenario, its
/// `exec` function.
fn stage(sc: &Scen, script: &throng_script::Script) -> Stage {
    let scenario = || {
        let i = script.options.scenarios.iter().position(|s| s.name == sc.def.name)?;
        u16::try_from(i).ok().map(Stage::Scenario)
    };
    match sc.def.name.as_str() {
        "setup" => Stage::Setup,
        "teardown" => Stage::Teardown,
        _ => scenario().unwrap_or(Stage::Iterate),
    }
}

/// A request the script made, sent as a `request:` step to the scenario's
/// target; the response as the script reads it. A URL of another origin
/// is thrown back into the script (throng's script runs speak to one
/// target).
async fn send(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    r: &throng_script::Request,
    groups: &[(usize, usize, Instant)],
    origin: Option<Instant>,
) -> Input {
    let target = match same_origin(sc, &r.url) {
        Ok(t) => t,
        Err(message) => return Input::Throw(message),
    };
    let name = r
        .name
        .clone()
        .unwrap_or_else(|| r.url.split(['?', '#']).next().unwrap_or("").to_string());
    let step = step_tag(ctx, sc, &name);
    let mut tags = Vec::with_capacity(3 + groups.len());
    let base = sc
        .base_tags
        .get()
        .or_else(|| with_scen(ctx, |rec| [rec.tag(""), rec.tag(&format!("scenario:{}", sc.def.name))]));
    if let Some(b) = base {
        sc.base_tags.set(Some(b));
        tags.extend(b);
    }
    tags.push(step);
    tags.extend(groups.iter().map(|(_, t, _)| *t));
    let d = &sc.plan.defaults;
    let op = ReqOp {
        req: Request {
            name,
            method: r.method.clone(),
            path: Template::literal(&target),
            query: Vec::new(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Template::literal(v)))
                .collect(),
            body: r
                .body
                .as_deref()
                .map_or(Body::None, |b| Body::Raw(Template::literal(b))),
            expect: match r.expect.as_deref().map(throng_plan::StatusSet::parse) {
                None => d.expect,
                Some(Ok(set)) => set,
                Some(Err(e)) => return Input::Throw(format!("http.expectedStatuses: {e}")),
            },
            captures: Vec::new(),
            checks: Vec::new(),
            timeout: r.timeout.unwrap_or(d.timeout),
            max_body: d.max_body,
            redirects: d.redirects,
            http: None,
            http_at: String::new(),
            sse: None,
        },
        tags,
        checks: Vec::new(),
        keep: Keep {
            server: false,
            headers: true,
            // At most 64 MiB (checked when the plan was made).
            body: usize::try_from(d.max_body).unwrap_or(usize::MAX),
        },
        head: r.method.eq_ignore_ascii_case("HEAD"),
    };
    // A request that fails before its exchange leaves status 0.
    vu.session.own_connection(op.head);
    vu.session.reset(op.keep);
    let t0 = Instant::now();
    request::request(ctx, sc, vu, &op, origin).await;
    // A request that failed after its status line (a timeout mid-body, a
    // reset) has no response for the script, as in k6: status 0.
    let status = if vu.answered { vu.session.reply().status } else { 0 };
    Input::Response(Response {
        status,
        headers: if status == 0 {
            Vec::new()
        } else {
            vu.session.headers().to_vec()
        },
        body: if status == 0 {
            Vec::new()
        } else {
            vu.session.body().to_vec()
        },
        duration: t0.elapsed(),
        error: (status == 0).then(|| "request failed: no response (the report's errors say why)".to_string()),
    })
}

/// The request target (path and query) of `url` when it is the
/// scenario's origin; else what the script is told.
fn same_origin(sc: &Scen, url: &str) -> Result<String, String> {
    let u = url::Url::parse(url).map_err(|e| format!("invalid URL '{url}': {e}"))?;
    let https = match u.scheme() {
        "http" => false,
        "https" => true,
        s => return Err(format!("'{url}': scheme {s} is not http or https")),
    };
    let b = &sc.base;
    let host = u.host_str().unwrap_or("").trim_start_matches('[').trim_end_matches(']');
    if https != b.https
        || !host.eq_ignore_ascii_case(b.host.trim_start_matches('[').trim_end_matches(']'))
        || u.port_or_known_default() != Some(b.port)
    {
        return Err(format!(
            "'{url}' is not the run's target {}: throng runs a script's requests against one origin (its \
             --target); requests elsewhere are not made",
            b.url
        ));
    }
    let mut t = u.path().to_string();
    if let Some(q) = u.query() {
        t.push('?');
        t.push_str(q);
    }
    // The base path is prepended when rendered; the URL carries its own.
    Ok(t.strip_prefix(sc.plan.target.base_path.as_str())
        .map_or(t.clone(), str::to_string))
}

/// The `step:` tag of a request name, registered once per worker.
fn step_tag(ctx: &Ctx, sc: &Scen, name: &str) -> usize {
    if let Some(&t) = sc.names.borrow().get(name) {
        return t;
    }
    let mut names = sc.names.borrow_mut();
    if names.len() >= NAMES || name.len() > NAME_BYTES {
        return with_scen(ctx, |r| r.tag("step:(other)")).unwrap_or(0);
    }
    let t = with_scen(ctx, |r| r.tag(&format!("step:{name}"))).unwrap_or(0);
    names.insert(name.to_string(), t);
    t
}
