//! The scenario report's sections, from what ran to the threshold verdicts.

use std::io::{self, Write};
use std::time::Duration;

use throng_metrics::{Hist, ScenarioStats, TagStats};
use throng_plan::count;
use throng_result::{RunResult, per_second};
use throng_scenario::{Executor, Scenario, ScenarioPlan};

use crate::format::{self, pct, us};
use crate::sections::{write_errors, write_generator, write_phase_table, write_tls};

/// ` over HTTP/2` (or 3) for a target that is not HTTP/1.1.
fn over(t: &throng_scenario::BaseUrl) -> String {
    if t.http.is_http1() {
        String::new()
    } else {
        format!(" over {}", t.http.label())
    }
}

/// The report of a scenario run.
pub(crate) fn write_run(r: &RunResult, p: &ScenarioPlan, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    let s = m.scenario.clone().unwrap_or_default();
    writeln!(w, "throng run {} → {}{}", p.file, p.target.url, over(&p.target))?;
    for sc in &p.scenarios {
        let own = sc
            .target
            .as_ref()
            .map_or_else(String::new, |t| format!(" → {}{}", t.url, over(t)));
        writeln!(w, "  scenario {}: {}{own}", format::name(&sc.name), describe(sc))?;
    }
    if (p.scale - 1.0).abs() > f64::EPSILON {
        writeln!(w, "  schedule scaled by {} (--scale)", p.scale)?;
    }
    if r.interrupted {
        writeln!(w, "  interrupted: the run was stopped before its end")?;
    }
    if let Some(s) = &r.segment {
        writeln!(w, "  segment {s}")?;
    }
    for note in &r.notes {
        writeln!(w, "  note: {note}")?;
    }
    if is_script(&p.file) {
        writeln!(
            w,
            "  k6 names: http_req_duration = response, http_req_failed = errors, http_reqs = requests, \
             iteration_duration = iteration, checks = checks, group_duration = group_duration"
        )?;
    }
    for (what, push) in r.pushes() {
        writeln!(w, "  {}", push.summary(what))?;
    }
    writeln!(w)?;

    let req = &m.requests;
    let ended = req.ended();
    writeln!(
        w,
        "  {:<14}{} completed ({:.2}/s), {} dropped, at most {}",
        "iterations",
        s.iterations,
        per_second(s.iterations, r.duration_s),
        s.dropped_iterations,
        throng_plan::count(s.vus_max, "VU")
    )?;
    if !s.failed_iterations.is_empty() {
        let total: u64 = s.failed_iterations.values().sum();
        let list: Vec<String> = s.failed_iterations.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(
            w,
            "  {:<14}{total} ({}): the script threw, not counted as completed",
            "failed",
            list.join(", ")
        )?;
        for (class, message) in &s.failed_messages {
            writeln!(w, "  {:<14}{class}, first: {message}", "")?;
        }
    }
    if !s.iteration.is_empty() {
        let i = s.iteration.summary();
        writeln!(
            w,
            "  {:<14}avg {}, med {}, p95 {}, max {}",
            "iteration",
            us(i.mean),
            us(i.p50 as f64),
            us(i.p95 as f64),
            us(i.max as f64)
        )?;
    }
    writeln!(
        w,
        "  {:<14}{} in {:.2}s, {:.2}/s",
        "requests",
        ended,
        r.duration_s,
        r.requests_per_second()
    )?;
    // Requests cut off by the plan's own end or a stop say nothing about
    // the target: shown apart, and not in the error rate.
    let interrupted = req.errors.get("interrupted").copied().unwrap_or(0);
    let judged = ended - interrupted;
    writeln!(
        w,
        "  {:<14}{} ({:.2}%) with a status their step expects",
        "ok",
        req.ok,
        pct(req.ok, judged)
    )?;
    let failed = req.failed() - interrupted;
    writeln!(w, "  {:<14}{} ({:.2}%)", "errors", failed, pct(failed, judged))?;
    crate::sections::write_redirects(w, m.redirects)?;
    let mut classes = req.errors.clone();
    classes.remove("interrupted");
    write_errors(w, &classes)?;
    if interrupted > 0 {
        writeln!(
            w,
            "  {:<14}{} (in flight when a graceful period ran out or the run stopped; not errors)",
            "interrupted", interrupted
        )?;
    }
    // gRPC statuses (0-16, of grpc: steps) share the map with HTTP's (100-599).
    let (grpc, http): (Vec<_>, Vec<_>) = m.status.iter().partition(|(code, _)| **code < 100);
    let statuses: Vec<String> = http.iter().map(|(code, n)| format!("{code}={n}")).collect();
    if !statuses.is_empty() {
        writeln!(w, "  {:<14}{}", "status", statuses.join(" "))?;
    }
    if !grpc.is_empty() {
        let names: Vec<String> = grpc
            .iter()
            .map(|(code, n)| format!("{}={n}", throng_plan::grpc_code_name(**code)))
            .collect();
        writeln!(w, "  {:<14}{}", "grpc-status", names.join(" "))?;
    }
    if m.messages > 0 {
        writeln!(
            w,
            "  {:<14}{} received by server-streaming grpc: steps",
            "messages", m.messages
        )?;
    }
    if s.ws_sent > 0 || s.ws_received > 0 {
        writeln!(
            w,
            "  {:<14}{} messages sent, {} received (websocket: steps; each expect met is an ok request)",
            "websocket", s.ws_sent, s.ws_received
        )?;
    }
    // sse: steps' streams, as --sse reports them.
    crate::sections::write_streams(m, r.duration_s, w)?;
    crate::sections::write_data_and_connections(r, w)?;
    write_tls(r, w, 14)?;
    writeln!(w)?;

    if let Some(all) = s.all() {
        write_latency(all, w)?;
        writeln!(w)?;
    }
    write_tags(&s, w)?;
    write_stages(&s, p, w)?;
    write_checks(&s, w)?;
    write_custom(&s, w)?;
    write_thresholds(r, w)?;
    write_phase_table(m, w)?;
    writeln!(w)?;
    crate::sections::write_slowest(m, w)?;
    write_generator(r, ended, "requests", w, 14)
}

/// An executor in one line.
pub fn describe(sc: &Scenario) -> String {
    let d = |d: &Duration| throng_plan::format_duration(*d);
    let ramp = |start: f64, stages: &[throng_scenario::Stage]| {
        let mut s = format!("{start}");
        for st in stages {
            s.push_str(&format!("→{} ({})", st.target, d(&st.duration)));
        }
        s
    };
    let mut text = match &sc.executor {
        Executor::ConstantVus { vus, duration } => format!("constant-vus, {} for {}", count(*vus, "VU"), d(duration)),
        Executor::RampingVus {
            start_vus,
            stages,
            graceful_ramp_down,
        } => format!(
            "ramping-vus, VUs {} (graceful ramp-down {})",
            ramp(*start_vus as f64, stages),
            d(graceful_ramp_down)
        ),
        Executor::PerVuIterations {
            vus,
            iterations,
            max_duration,
        } => format!(
            "per-vu-iterations, {} × {} (at most {})",
            count(*vus, "VU"),
            count(*iterations, "iteration"),
            d(max_duration)
        ),
        Executor::SharedIterations {
            vus,
            iterations,
            max_duration,
        } => format!(
            "shared-iterations, {} over {} (at most {})",
            count(*iterations, "iteration"),
            count(*vus, "VU"),
            d(max_duration)
        ),
        Executor::ConstantArrivalRate {
            rate,
            time_unit,
            duration,
            pre_allocated_vus,
            max_vus,
        } => format!(
            "constant-arrival-rate, {rate} iterations per {} for {}, VUs {pre_allocated_vus}–{max_vus}",
            d(time_unit),
            d(duration)
        ),
        Executor::RampingArrivalRate {
            start_rate,
            time_unit,
            stages,
            pre_allocated_vus,
            max_vus,
        } => format!(
            "ramping-arrival-rate, iterations per {} {}, VUs {pre_allocated_vus}–{max_vus}",
            d(time_unit),
            ramp(*start_rate, stages)
        ),
    };
    if !sc.start_time.is_zero() {
        text.push_str(&format!(", starting at {}", d(&sc.start_time)));
    }
    text
}

/// avg, min, med, p90, p95, p99 and max of `h` (all `-` when empty).
pub(crate) fn row(h: &Hist) -> [String; 7] {
    if h.is_empty() {
        return std::array::from_fn(|_| "-".to_string());
    }
    let s = h.summary();
    [
        us(s.mean),
        us(s.min as f64),
        us(s.p50 as f64),
        us(s.p90 as f64),
        us(s.p95 as f64),
        us(s.p99 as f64),
        us(s.max as f64),
    ]
}

/// All requests beside only those whose status their step expects (seed
/// 004's "All Requests" and "Successful Requests").
fn write_latency(all: &TagStats, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "  {:<14}{:>18}{:>24}",
        "response time", "all requests", "expected status only"
    )?;
    let a = row(&all.response);
    let e = row(&all.expected);
    for (i, name) in ["avg", "min", "med", "p90", "p95", "p99", "max"].iter().enumerate() {
        writeln!(w, "  {:<14}{:>18}{:>24}", name, a[i], e[i])?;
    }
    writeln!(
        w,
        "  {:<14}{:>18}{:>24}",
        "count",
        all.response.count(),
        all.expected.count()
    )
}

/// The tagged figures in report order: every step, then every group, then
/// every scenario, as (kind, name, figures).
pub(crate) fn tag_rows(s: &ScenarioStats) -> Vec<(&'static str, &str, &TagStats)> {
    ["step", "group", "scenario", "target"]
        .iter()
        .flat_map(|kind| {
            s.tags
                .iter()
                .filter_map(move |(k, t)| k.strip_prefix(&format!("{kind}:")).map(|name| (*kind, name, t)))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One row per step, group and scenario (and per target of `throng http`).
pub(crate) fn write_tags(s: &ScenarioStats, w: &mut dyn Write) -> io::Result<()> {
    let rows = tag_rows(s);
    if rows.is_empty() {
        return Ok(());
    }
    let width = rows
        .iter()
        .map(|(k, n, _)| format::chars(k) + format::chars(&format::name(n)) + 1)
        .max()
        .unwrap_or(0)
        .max(12)
        + 2;
    writeln!(
        w,
        "  {:<width$}{:>9}{:>9}{:>8}{:>11}{:>11}{:>11}{:>11}{:>11}",
        "tag", "requests", "errors", "status✗", "avg", "med", "p95", "p99", "max"
    )?;
    for (kind, name, t) in rows {
        let h = row(&t.response);
        writeln!(
            w,
            "  {:<width$}{:>9}{:>9}{:>8}{:>11}{:>11}{:>11}{:>11}{:>11}",
            format!("{kind}:{}", format::name(name)),
            t.requests,
            t.failed,
            t.unexpected_status,
            h[0],
            h[2],
            h[4],
            h[5],
            h[6]
        )?;
    }
    let groups: Vec<_> = s.groups.iter().filter(|(_, h)| !h.is_empty()).collect();
    for (name, h) in groups {
        let r = row(h);
        writeln!(
            w,
            "  {:<width$}{:>9}{:>9}{:>8}{:>11}{:>11}{:>11}{:>11}{:>11}",
            format!("group:{} (whole)", format::name(name)),
            h.count(),
            "",
            "",
            r[0],
            r[2],
            r[4],
            r[5],
            r[6]
        )?;
    }
    writeln!(
        w,
        "  (status✗: responses with a status not expected, counted as check_failed)"
    )?;
    writeln!(w)
}

/// The load-level table (see [`stage_rows`]).
fn write_stages(s: &ScenarioStats, p: &ScenarioPlan, w: &mut dyn Write) -> io::Result<()> {
    let rows = stage_rows(s, p);
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(w, "  load levels (per stage)")?;
    writeln!(
        w,
        "  {:<16}{:>16}{:>14}{:>10}{:>10}{:>11}{:>11}{:>9}",
        "stage", "span", "planned", "VUs max", "req/s", "med", "p95", "errors"
    )?;
    let shared = rows.iter().any(|r| !r.vus.exact);
    for r in rows {
        writeln!(
            w,
            "  {:<16}{:>16}{:>14}{:>10}{:>10}{:>11}{:>11}{:>9}",
            format::name(&r.name),
            r.span,
            r.planned,
            r.vus,
            r.rate,
            r.med,
            r.p95,
            r.errors
        )?;
    }
    if shared {
        writeln!(
            w,
            "  ≤N: the stage lies inside no whole second; N is the most VUs of the seconds it shares with others"
        )?;
    }
    writeln!(w)
}

/// One stage of a ramp, its figures formatted for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StageRow {
    /// `SCENARIO#N`.
    pub name: String,
    /// `0s–30s`.
    pub span: String,
    /// The planned VUs or rate (`10→50 VUs`).
    pub planned: String,
    /// Most VUs seen during it.
    pub vus: StageVus,
    /// Requests per second.
    pub rate: String,
    /// Median response time.
    pub med: String,
    /// 95th percentile response time.
    pub p95: String,
    /// Failed share of requests.
    pub errors: String,
}

/// The most VUs of a stage, from the per-second series: over the seconds
/// wholly inside the stage, so that a neighbouring stage's VUs never count;
/// a stage inside no whole second has only the seconds it overlaps, whose
/// figure is an upper bound, written `≤N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StageVus {
    pub max: u64,
    /// False when the figure comes from seconds shared with other stages.
    pub exact: bool,
}

impl std::fmt::Display for StageVus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = if self.exact {
            self.max.to_string()
        } else {
            format!("≤{}", self.max)
        };
        f.pad(&text)
    }
}

/// [`StageVus`] of scenario `index` over `[at, end)`.
pub(super) fn stage_vus(s: &ScenarioStats, index: usize, at: Duration, end: Duration) -> StageVus {
    let vus_in = |lo: u64, hi: u64| {
        s.series
            .iter()
            .filter(|x| x.second >= lo && x.second < hi)
            .map(|x| x.vus_by_scenario.get(index).copied().unwrap_or(0))
            .max()
    };
    // Seconds [first_whole, after_whole) lie wholly inside [at, end).
    let first_whole = at.as_secs() + u64::from(at.subsec_nanos() > 0);
    let after_whole = end.as_secs();
    if first_whole < after_whole {
        return StageVus {
            max: vus_in(first_whole, after_whole).unwrap_or(0),
            exact: true,
        };
    }
    let after_touched = (end.as_secs() + u64::from(end.subsec_nanos() > 0)).max(at.as_secs() + 1);
    StageVus {
        max: vus_in(at.as_secs(), after_touched).unwrap_or(0),
        exact: false,
    }
}

/// For each stage of each ramp: the planned VUs or rate, throughput, p95
/// and error rate — how the service degrades as load grows.
pub(crate) fn stage_rows(s: &ScenarioStats, p: &ScenarioPlan) -> Vec<StageRow> {
    let mut rows = Vec::new();
    for (index, sc) in p.scenarios.iter().enumerate() {
        let (unit, start) = match &sc.executor {
            Executor::RampingVus { start_vus, .. } => ("VUs", *start_vus as f64),
            Executor::RampingArrivalRate { start_rate, .. } => ("/unit", *start_rate),
            _ => ("", 0.0),
        };
        let mut from = start;
        let mut at = sc.start_time;
        for (i, st) in sc.executor.stages().iter().enumerate() {
            let name = format!("{}#{}", sc.name, i + 1);
            let end = at.saturating_add(st.duration);
            let t = s.tags.get(&format!("stage:{name}"));
            let vus = stage_vus(s, index, at, end);
            let planned = if (from - st.target).abs() < f64::EPSILON {
                format!("{} {unit}", st.target)
            } else {
                format!("{}→{} {unit}", from, st.target)
            };
            let (rate, med, p95, errors) = match t {
                Some(t) if t.requests > 0 => {
                    let h = row(&t.response);
                    (
                        format!("{:.2}", t.requests as f64 / st.duration.as_secs_f64().max(1e-9)),
                        h[2].clone(),
                        h[4].clone(),
                        format!("{:.2}%", pct(t.failed, t.requests)),
                    )
                }
                _ => ("0".into(), "-".into(), "-".into(), "-".into()),
            };
            rows.push(StageRow {
                name,
                span: format!(
                    "{}–{}",
                    throng_plan::format_duration(at),
                    throng_plan::format_duration(end)
                ),
                planned,
                vus,
                rate,
                med,
                p95,
                errors,
            });
            from = st.target;
            at = end;
        }
    }
    rows
}

/// The file's custom metrics (`metrics:`): name, kind, what they hold,
/// values added.
pub(crate) fn custom_rows(s: &ScenarioStats) -> Vec<[String; 4]> {
    use throng_metrics::CustomKind;
    let n = |v: f64| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{v:.0}")
        } else {
            format!("{v:.3}")
        }
    };
    s.custom
        .iter()
        .map(|(name, c)| {
            let mut what = match c.kind {
                CustomKind::Counter => format!("sum {}", n(c.sum)),
                CustomKind::Rate => format!("{:.2}% ({} of {})", pct(c.hits, c.count), c.hits, c.count),
                CustomKind::Gauge => match (c.last, c.min, c.max) {
                    (Some(l), Some(lo), Some(hi)) => format!("last {}, min {}, max {}", n(l), n(lo), n(hi)),
                    _ => "no value".to_string(),
                },
                CustomKind::Trend if c.values.is_empty() => "no value".to_string(),
                CustomKind::Trend => format!(
                    "avg {:.2}, med {}, p95 {}, p99 {}, max {}",
                    c.values.mean(),
                    c.values.quantile(0.5),
                    c.values.quantile(0.95),
                    c.values.quantile(0.99),
                    c.values.max()
                ),
            };
            if c.invalid > 0 {
                what.push_str(&format!("; {} values not numbers (not recorded)", c.invalid));
            }
            [
                format::name(name).into_owned(),
                c.kind.name().to_string(),
                what,
                c.count.to_string(),
            ]
        })
        .collect()
}

fn write_custom(s: &ScenarioStats, w: &mut dyn Write) -> io::Result<()> {
    let rows = custom_rows(s);
    if rows.is_empty() {
        return Ok(());
    }
    let width = rows.iter().map(|r| format::chars(&r[0])).max().unwrap_or(0).max(6) + 2;
    writeln!(w, "  {:<width$}{:<9}{:>8}  value", "metric", "kind", "adds")?;
    for [name, kind, what, count] in &rows {
        writeln!(w, "  {name:<width$}{kind:<9}{count:>8}  {what}")?;
    }
    writeln!(w)
}

fn write_checks(s: &ScenarioStats, w: &mut dyn Write) -> io::Result<()> {
    if s.checks.is_empty() {
        return Ok(());
    }
    let width = s
        .checks
        .keys()
        .map(|k| format::chars(&format::name(k)))
        .max()
        .unwrap_or(0)
        .max(10)
        + 2;
    writeln!(w, "  {:<width$}{:>10}{:>10}{:>9}", "check", "passes", "fails", "pass")?;
    for (name, c) in &s.checks {
        writeln!(
            w,
            "  {}{:<width$}{:>10}{:>10}{:>8.2}%",
            if c.fails == 0 { "✓ " } else { "✗ " },
            format::name(name),
            c.passes,
            c.fails,
            pct(c.passes, c.passes.saturating_add(c.fails)),
            width = width - 2
        )?;
    }
    writeln!(w)
}

pub(crate) fn write_thresholds(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    if r.thresholds.is_empty() {
        return Ok(());
    }
    let failed = r.thresholds.iter().filter(|v| !v.passed).count();
    writeln!(
        w,
        "  thresholds: {} of {} held{}",
        r.thresholds.len() - failed,
        r.thresholds.len(),
        match (failed, r.interrupted) {
            (0, _) => "",
            // An interrupted run exits 130, and its thresholds judged a part.
            (_, true) => " — not met by the part that ran (interrupted)",
            (_, false) => " — FAILED (exit code 99)",
        }
    )?;
    let width = r
        .thresholds
        .iter()
        .map(|v| format::chars(&format::name(&v.threshold)))
        .max()
        .unwrap_or(0)
        + 2;
    for v in &r.thresholds {
        writeln!(
            w,
            "  {} {:<width$}{}",
            if v.passed { "✓" } else { "✗" },
            format::name(&v.threshold),
            v.detail
        )?;
    }
    writeln!(w)
}

/// The plan came from a k6 script (`throng run script.js`).
fn is_script(file: &str) -> bool {
    let f = file.to_ascii_lowercase();
    f.ends_with(".js") || f.ends_with(".mjs")
}
