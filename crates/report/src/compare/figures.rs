//! The figures of a comparison, section by section, read from each side's
//! runs added up.

use throng_metrics::Hist;
use throng_result::RunResult;

use super::model::{Figure, Unit, throughput, throughput_name, work};

pub(super) fn figures(runs_a: &[RunResult], runs_b: &[RunResult], a: &RunResult, b: &RunResult) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut add = |section: &str, name: &str, unit: Unit, va: f64, vb: f64| {
        out.push(Figure {
            section: section.to_string(),
            name: name.to_string(),
            unit,
            a: va,
            b: vb,
        });
    };
    summary(runs_a, runs_b, a, b, &mut add);
    concurrency(a, b, &mut add);
    phases(a, b, &mut add);
    outcomes(a, b, &mut add);
    statuses(a, b, &mut add);
    generator(runs_a, runs_b, a, b, &mut add);
    out
}

/// The summary: runs, duration, throughput, and what each unit's outcome was.
fn summary(runs_a: &[RunResult], runs_b: &[RunResult], a: &RunResult, b: &RunResult, add: &mut Add<'_>) {
    let (ma, mb) = (&a.measurements, &b.measurements);
    let storm = a.unit() == throng_result::Unit::Connections;
    let s = "summary";
    add(s, "runs", Unit::Count, runs_a.len() as f64, runs_b.len() as f64);
    add(s, "duration", Unit::Seconds, a.duration_s, b.duration_s);
    add(s, throughput_name(a), Unit::PerSecond, throughput(a), throughput(b));
    if storm {
        let (ca, cb) = (&ma.connections, &mb.connections);
        add(
            s,
            "connections attempted",
            Unit::Count,
            ca.attempted as f64,
            cb.attempted as f64,
        );
        add(s, "established", Unit::Count, ca.ok as f64, cb.ok as f64);
        add(s, "failed", Unit::Count, ca.failed() as f64, cb.failed() as f64);
        add(
            s,
            "failed (%)",
            Unit::Percent,
            pct(ca.failed(), ca.attempted),
            pct(cb.failed(), cb.attempted),
        );
        if let (Some(ta), Some(tb)) = (ma.total_connect_time(), mb.total_connect_time()) {
            add(
                s,
                "total connect time",
                Unit::Seconds,
                ta.as_secs_f64(),
                tb.as_secs_f64(),
            );
        }
        if ma.out_of_turn_total() + mb.out_of_turn_total() > 0 {
            add(
                s,
                "out-of-turn handshakes",
                Unit::Count,
                ma.out_of_turn_total() as f64,
                mb.out_of_turn_total() as f64,
            );
        }
        if let (Some(ta), Some(tb)) = (ma.total_reconnect_time(), mb.total_reconnect_time()) {
            add(
                s,
                "reconnect time (throng's: first drop to last back)",
                Unit::Seconds,
                ta.as_secs_f64(),
                tb.as_secs_f64(),
            );
        }
        if let (Some(ta), Some(tb)) = (ma.client_reconnect_time(), mb.client_reconnect_time()) {
            add(
                s,
                "reconnect time (the clients': server accepting to last back)",
                Unit::Seconds,
                ta.as_secs_f64(),
                tb.as_secs_f64(),
            );
        }
    } else {
        let (ra, rb) = (&ma.requests, &mb.requests);
        add(s, "requests", Unit::Count, ra.ended() as f64, rb.ended() as f64);
        add(
            s,
            "requests/s",
            Unit::PerSecond,
            a.requests_per_second(),
            b.requests_per_second(),
        );
        add(s, "ok", Unit::Count, ra.ok as f64, rb.ok as f64);
        add(s, "errors", Unit::Count, ra.failed() as f64, rb.failed() as f64);
        add(
            s,
            "errors (%)",
            Unit::Percent,
            pct(ra.failed(), ra.ended()),
            pct(rb.failed(), rb.ended()),
        );
        if ma.dropped > 0 || mb.dropped > 0 {
            add(s, "dropped", Unit::Count, ma.dropped as f64, mb.dropped as f64);
        }
    }
    add(
        s,
        "received",
        Unit::BytesPerSecond,
        throng_result::per_second(ma.bytes.received, a.duration_s),
        throng_result::per_second(mb.bytes.received, b.duration_s),
    );
}

/// Connections open at the peak, opened, and opened per second.
fn concurrency(a: &RunResult, b: &RunResult, add: &mut Add<'_>) {
    let (ma, mb) = (&a.measurements, &b.measurements);
    let c = "concurrency";
    add(
        c,
        "peak connections open",
        Unit::Count,
        ma.peak_concurrent_connections as f64,
        mb.peak_concurrent_connections as f64,
    );
    add(
        c,
        "connections opened",
        Unit::Count,
        ma.connections.ok as f64,
        mb.connections.ok as f64,
    );
    add(
        c,
        "connections/s",
        Unit::PerSecond,
        throng_result::per_second(ma.connections.ok, a.duration_s),
        throng_result::per_second(mb.connections.ok, b.duration_s),
    );
}

/// Each phase's mean, percentiles, max and count, in report order, then the rest by name.
fn phases(a: &RunResult, b: &RunResult, add: &mut Add<'_>) {
    let (ma, mb) = (&a.measurements, &b.measurements);
    // Report order first, then any other phase by name.
    let known: Vec<&str> = throng_metrics::Phase::ALL.iter().map(|p| p.name()).collect();
    let mut names: Vec<&str> = known.iter().copied().filter(|n| ma.phases.contains_key(*n)).collect();
    names.extend(ma.phases.keys().map(String::as_str).filter(|n| !known.contains(n)));
    for name in names {
        let (Some(ha), Some(hb)) = (ma.phase(name), mb.phase(name)) else {
            continue;
        };
        let section = format!("phase {name}");
        let q = |h: &Hist, q: f64| h.quantile(q) as f64;
        add(&section, "mean", Unit::Micros, ha.mean(), hb.mean());
        for (p, label) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")] {
            add(&section, label, Unit::Micros, q(ha, p), q(hb, p));
        }
        add(&section, "max", Unit::Micros, ha.max() as f64, hb.max() as f64);
        add(&section, "count", Unit::Count, ha.count() as f64, hb.count() as f64);
    }
}

/// Outcomes by class, for requests and for connections.
fn outcomes(a: &RunResult, b: &RunResult, add: &mut Add<'_>) {
    let (ma, mb) = (&a.measurements, &b.measurements);
    for (unit_name, oa, ob) in [
        ("requests", &ma.requests, &mb.requests),
        ("connections", &ma.connections, &mb.connections),
    ] {
        if oa.is_empty() && ob.is_empty() {
            continue;
        }
        let section = format!("outcomes: {unit_name}");
        add(&section, "ok", Unit::Count, oa.ok as f64, ob.ok as f64);
        let mut classes: Vec<&String> = oa.errors.keys().chain(ob.errors.keys()).collect();
        classes.sort();
        classes.dedup();
        for class in classes {
            add(
                &section,
                class,
                Unit::Count,
                oa.error(class) as f64,
                ob.error(class) as f64,
            );
        }
    }
}

/// Responses by status code.
fn statuses(a: &RunResult, b: &RunResult, add: &mut Add<'_>) {
    let (ma, mb) = (&a.measurements, &b.measurements);
    let mut codes: Vec<u16> = ma.status.keys().chain(mb.status.keys()).copied().collect();
    codes.sort_unstable();
    codes.dedup();
    for code in codes {
        let n = |m: &throng_metrics::Measurements| m.status.get(&code).copied().unwrap_or(0) as f64;
        add("status", &code.to_string(), Unit::Count, n(ma), n(mb));
    }
}

/// The generator's own cost: CPU, work per CPU-second, peak memory.
fn generator(runs_a: &[RunResult], runs_b: &[RunResult], a: &RunResult, b: &RunResult, add: &mut Add<'_>) {
    let storm = a.unit() == throng_result::Unit::Connections;
    let g = "generator";
    let cpu = |runs: &[RunResult]| -> f64 {
        runs.iter()
            .map(|r| r.generator.cpu_user_s + r.generator.cpu_system_s)
            .sum()
    };
    let (cpu_a, cpu_b) = (cpu(runs_a), cpu(runs_b));
    add(g, "CPU seconds", Unit::Seconds, cpu_a, cpu_b);
    let per_cpu = |r: &RunResult, c: f64| if c > 0.0 { work(r) as f64 / c } else { 0.0 };
    add(
        g,
        if storm {
            "connections per CPU-second"
        } else {
            "requests per CPU-second"
        },
        Unit::PerSecond,
        per_cpu(a, cpu_a),
        per_cpu(b, cpu_b),
    );
    let rss = |runs: &[RunResult]| runs.iter().map(|r| r.generator.peak_rss_bytes).max().unwrap_or(0) as f64;
    add(g, "peak memory", Unit::Bytes, rss(runs_a), rss(runs_b));
}

/// Adds one figure: section, name, unit, A's value, B's.
type Add<'a> = dyn FnMut(&str, &str, Unit, f64, f64) + 'a;

fn pct(part: u64, whole: u64) -> f64 {
    crate::format::pct(part, whole)
}
