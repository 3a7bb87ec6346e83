//! What the page says about a run in words: its headline, plan, facts
//! and figures.

use throng_result::{Plan, RunResult, per_second};

use crate::chart::escape;
use crate::format::{bytes, pct, primary_phase, us};

/// `throng http GET URL`, `throng storm URL`, `throng run FILE → URL`.
pub(super) fn headline(r: &RunResult) -> String {
    match &r.plan {
        Plan::Http(p) => format!("throng http {} {}", p.method, p.target.url),
        Plan::Storm(p) => format!("throng storm {}", p.target.url),
        Plan::Run(p) => format!("throng run {} → {}", p.file, p.target.url),
        Plan::Mqtt(p) => format!("throng mqtt {} {}", p.target.url, p.topic),
    }
}

/// What the plan did, in the text report's words.
pub(super) fn plan_lines(r: &RunResult) -> Vec<String> {
    match &r.plan {
        Plan::Http(p) => {
            let mut v = vec![p.describe()];
            v.extend(p.headers.iter().map(|(k, val)| format!("header {k}: {val}")));
            v
        }
        Plan::Storm(p) => vec![p.describe()],
        Plan::Mqtt(p) => vec![p.describe()],
        Plan::Run(p) => {
            let mut v: Vec<String> = p
                .scenarios
                .iter()
                .map(|sc| format!("scenario {}: {}", sc.name, crate::scenario::report::describe(sc)))
                .collect();
            if (p.scale - 1.0).abs() > f64::EPSILON {
                v.push(format!("schedule scaled by {} (--scale)", p.scale));
            }
            v
        }
    }
}

/// The unit of work a run counts: requests, or connections for storms.
pub(super) fn unit(r: &RunResult) -> (&throng_metrics::Outcomes, &'static str) {
    (r.unit_outcomes(), r.unit().plural())
}

/// Rows of a table with one column per side: every name any side has (in
/// order of first appearance), escaped, with each side's value or nothing.
pub(super) fn side_by_side(per_side: &[Vec<(String, String)>]) -> Vec<Vec<String>> {
    let mut names: Vec<&str> = Vec::new();
    for (k, _) in per_side.iter().flatten() {
        if !names.contains(&k.as_str()) {
            names.push(k);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mut row = vec![escape(name)];
            row.extend(
                per_side
                    .iter()
                    .map(|f| escape(f.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str()))),
            );
            row
        })
        .collect()
}

/// The run and the machine: (name, value).
pub(super) fn facts(r: &RunResult) -> Vec<(&'static str, String)> {
    let e = &r.environment;
    let g = &r.generator;
    let mut v = vec![
        ("target", r.plan.target_url().to_string()),
        ("started", r.started_at.clone()),
        ("duration", format!("{:.2}s", r.duration_s)),
        ("throng", r.throng_version.clone()),
        ("host", e.hostname.clone()),
        ("system", e.os.clone()),
        ("cores", e.cores.to_string()),
        (
            "descriptors",
            format!("{} (hard limit {})", e.fd_limit_soft, e.fd_limit_hard),
        ),
        ("worker threads", g.threads.to_string()),
        (
            "I/O",
            crate::sections::io_line(r).unwrap_or_else(|| "not recorded".to_string()),
        ),
        (
            "generator CPU",
            format!(
                "{:.2}s user + {:.2}s system{}",
                g.cpu_user_s,
                g.cpu_system_s,
                crate::sections::cpu_share(r)
            ),
        ),
        ("peak memory", bytes(g.peak_rss_bytes as f64)),
    ];
    if let Some(settings) = r.plan.tls() {
        v.push(("TLS", settings.describe()));
    }
    if let Some(t) = &r.measurements.tls {
        let keys = |m: &std::collections::BTreeMap<String, u64>| m.keys().cloned().collect::<Vec<_>>().join(", ");
        v.push((
            "handshakes",
            format!(
                "{} ({} resumed): {} {} {}",
                t.handshakes,
                t.resumed,
                keys(&t.versions),
                keys(&t.groups),
                keys(&t.ciphers)
            ),
        ));
    }
    if r.parts.len() > 1 {
        v.push(("merged from", throng_plan::count(r.parts.len() as u64, "run")));
    }
    v
}

/// The headline figures: (name, value, detail).
pub(super) fn figures(r: &RunResult) -> Vec<(String, String, String)> {
    let m = &r.measurements;
    let (o, what) = unit(r);
    let mut v = Vec::new();
    if let Some((scheduled, sent, dropped)) = crate::text::schedule(r) {
        v.push((
            "scheduled".to_string(),
            scheduled.to_string(),
            format!("{sent} sent, {dropped} dropped ({:.2}%)", pct(dropped, scheduled)),
        ));
    }
    v.extend([
        (
            what.to_string(),
            o.ended().to_string(),
            format!("in {:.2}s", r.duration_s),
        ),
        (
            format!("{what} per second"),
            format!("{:.1}", per_second(o.ok, r.duration_s)),
            "ok only".to_string(),
        ),
        (
            "ok".to_string(),
            format!("{:.2}%", pct(o.ok, o.ended())),
            o.ok.to_string(),
        ),
        (
            "errors".to_string(),
            o.failed().to_string(),
            format!("{:.2}%", pct(o.failed(), o.ended())),
        ),
    ]);
    if let Some(phase) = primary_phase(m)
        && let Some(h) = m.phase(phase)
    {
        let s = h.summary();
        v.push((format!("{phase} p50"), us(s.p50 as f64), String::new()));
        v.push((
            format!("{phase} p99"),
            us(s.p99 as f64),
            format!("max {}", us(s.max as f64)),
        ));
    }
    v.push((
        "peak connections".to_string(),
        m.peak_concurrent_connections.to_string(),
        "open at once".to_string(),
    ));
    if let Some(s) = &m.scenario {
        v.push(("peak VUs".to_string(), s.vus_max.to_string(), String::new()));
        v.push((
            "iterations".to_string(),
            s.iterations.to_string(),
            format!("{} dropped", s.dropped_iterations),
        ));
    }
    v.push((
        "received".to_string(),
        bytes(m.bytes.received as f64),
        format!("sent {}", bytes(m.bytes.sent as f64)),
    ));
    v
}
