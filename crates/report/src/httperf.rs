//! httperf's report layout, with httperf's field meanings and its error
//! classes mapped from throng's taxonomy.

use std::collections::BTreeMap;
use std::io::{self, Write};

use throng_metrics::Hist;
use throng_result::{Plan, RunResult, per_second};

/// httperf samples the reply rate once every this many seconds.
const SAMPLE_SECONDS: usize = 5;

/// Writes the httperf-style report.
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    let Plan::Http(p) = &r.plan else {
        return crate::text::write(r, w);
    };
    let secs = r.duration_s;
    let conns = m.connections.attempted;
    let requests = m.requests.attempted;
    let replies = m.replies();
    let empty = Hist::new();
    let hist = |name: &str| m.phases.get(name).unwrap_or(&empty);
    let ms = |us: f64| us / 1000.0;

    writeln!(w, "throng {} — report in httperf's layout", r.throng_version)?;
    writeln!(w)?;
    writeln!(
        w,
        "Total: connections {conns} requests {requests} replies {replies} test-duration {secs:.3} s"
    )?;
    writeln!(w)?;
    let conn_rate = per_second(conns, secs);
    writeln!(
        w,
        "Connection rate: {conn_rate:.1} conn/s ({:.1} ms/conn, <={} concurrent connections)",
        if conn_rate > 0.0 { 1000.0 / conn_rate } else { 0.0 },
        m.peak_concurrent_connections
    )?;
    let life = hist("connection").summary();
    writeln!(
        w,
        "Connection time [ms]: min {:.1} avg {:.1} max {:.1} median {:.1} stddev {:.1}",
        ms(life.min as f64),
        ms(life.mean),
        ms(life.max as f64),
        ms(life.p50 as f64),
        ms(life.stddev)
    )?;
    writeln!(w, "Connection time [ms]: connect {:.1}", ms(hist("connect").mean()))?;
    let closed = hist("connection").count();
    writeln!(
        w,
        "Connection length [replies/conn]: {:.3}",
        if closed > 0 {
            replies as f64 / closed as f64
        } else {
            0.0
        }
    )?;
    writeln!(w)?;
    let req_rate = per_second(requests, secs);
    writeln!(
        w,
        "Request rate: {req_rate:.1} req/s ({:.1} ms/req)",
        if req_rate > 0.0 { 1000.0 / req_rate } else { 0.0 }
    )?;
    writeln!(
        w,
        "Request size [B]: {:.1}",
        if requests > 0 {
            m.bytes.sent as f64 / requests as f64
        } else {
            p.request_bytes().len() as f64
        }
    )?;
    writeln!(w)?;

    let samples = reply_rate_samples(r);
    let (min, avg, max, sd) = stats(&samples);
    writeln!(
        w,
        "Reply rate [replies/s]: min {min:.1} avg {avg:.1} max {max:.1} stddev {sd:.1} ({} samples)",
        samples.len()
    )?;
    // httperf's "response" runs from the request's first byte to the reply's
    // first byte; "transfer" from the reply's first byte to its last.
    let response = hist("wait").mean() + hist("send").mean();
    writeln!(
        w,
        "Reply time [ms]: response {:.1} transfer {:.1}",
        ms(response),
        ms(hist("receive").mean())
    )?;
    let per_reply = |b: u64| if replies > 0 { b as f64 / replies as f64 } else { 0.0 };
    let header = per_reply(m.bytes.received_headers);
    let content = per_reply(m.bytes.received_body);
    writeln!(
        w,
        "Reply size [B]: header {header:.1} content {content:.1} footer 0.0 (total {:.1})",
        header + content
    )?;
    let c = m.status_classes();
    writeln!(
        w,
        "Reply status: 1xx={} 2xx={} 3xx={} 4xx={} 5xx={}",
        c[0], c[1], c[2], c[3], c[4]
    )?;
    writeln!(w)?;
    let g = &r.generator;
    let share = |s: f64| if secs > 0.0 { s * 100.0 / secs } else { 0.0 };
    writeln!(
        w,
        "CPU time [s]: user {:.2} system {:.2} (user {:.1}% system {:.1}% total {:.1}%)",
        g.cpu_user_s,
        g.cpu_system_s,
        share(g.cpu_user_s),
        share(g.cpu_system_s),
        share(g.cpu_user_s + g.cpu_system_s)
    )?;
    let io_bytes = per_second(m.bytes.sent.saturating_add(m.bytes.received), secs);
    let bps = io_bytes * 8.0;
    let exp = if bps > 0.0 { bps.log10().floor() as i32 } else { 0 };
    writeln!(
        w,
        "Net I/O: {:.1} KB/s ({:.1}*10^{exp} bps)",
        io_bytes / 1024.0,
        bps / 10f64.powi(exp)
    )?;
    writeln!(w)?;

    let e = |names: &[&str]| -> u64 {
        m.requests
            .errors
            .iter()
            .filter(|(k, _)| names.contains(&k.as_str()) || names.iter().any(|n| n.ends_with('.') && k.starts_with(n)))
            .map(|(_, v)| *v)
            .fold(0u64, u64::saturating_add)
    };
    let client_timo = e(&["timeout."]);
    let refused = e(&["refused"]);
    let reset = e(&["reset", "eof"]);
    let fd = e(&["fd_unavailable"]);
    let addr = e(&["addr_unavailable"]);
    let counted = crate::format::total([client_timo, refused, reset, fd, addr, e(&["check_failed"])]);
    let other = m.requests.failed().saturating_sub(counted);
    let total = crate::format::total([client_timo, refused, reset, fd, addr, other]);
    writeln!(
        w,
        "Errors: total {total} client-timo {client_timo} socket-timo 0 connrefused {refused} connreset {reset}"
    )?;
    writeln!(
        w,
        "Errors: fd-unavail {fd} addrunavail {addr} ftab-full 0 other {other}"
    )?;
    Ok(())
}

/// Replies per second over each complete 5-second window (as httperf).
struct Samples {
    /// The rates of the windows the series has points in, in order.
    with_points: Vec<f64>,
    /// Complete windows the series has no point in (each a rate of 0).
    empty: u64,
}

impl Samples {
    fn len(&self) -> u64 {
        (self.with_points.len() as u64).saturating_add(self.empty)
    }
}

/// The windows are counted from the duration but only those with points
/// are kept: the memory follows the series, not the duration a file says.
fn reply_rate_samples(r: &RunResult) -> Samples {
    let full = (r.duration_s / SAMPLE_SECONDS as f64).floor();
    // `as` saturates; NaN becomes 0.
    let full = full.max(0.0) as u64;
    let mut by_window: BTreeMap<u64, u64> = BTreeMap::new();
    for p in &r.measurements.series {
        let window = p.second / SAMPLE_SECONDS as u64;
        if window < full {
            let n = by_window.entry(window).or_default();
            *n = n.saturating_add(p.replies);
        }
    }
    Samples {
        empty: full - by_window.len() as u64,
        with_points: by_window
            .into_values()
            .map(|n| n as f64 / SAMPLE_SECONDS as f64)
            .collect(),
    }
}

/// (min, mean, max, sample standard deviation) of the samples.
fn stats(s: &Samples) -> (f64, f64, f64, f64) {
    let v = &s.with_points;
    if s.len() == 0 {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let zeros = s.empty as f64;
    let n = s.len() as f64;
    let avg = v.iter().sum::<f64>() / n;
    let floor = if s.empty > 0 { 0.0 } else { f64::INFINITY };
    let min = v.iter().copied().fold(floor, f64::min);
    let max = v
        .iter()
        .copied()
        .fold(if s.empty > 0 { 0.0 } else { f64::NEG_INFINITY }, f64::max);
    let var = if s.len() > 1 {
        (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() + zeros * avg * avg) / (n - 1.0)
    } else {
        0.0
    };
    (min, avg, max, var.sqrt())
}
