//! The sections the text views share: the phase table, errors by class,
//! data and connections, TLS, the generator's own cost, timestamps.

use std::io::{self, Write};

use throng_metrics::{ErrorClass, Measurements, Phase};
use throng_result::{Plan, RunResult, per_second};

use crate::format::{bytes, us};

/// Phases shown in the table, in order (those with samples).
/// The redirects followed, when any were (http and scenario reports).
pub(crate) fn write_redirects(w: &mut dyn Write, redirects: u64) -> io::Result<()> {
    if redirects > 0 {
        writeln!(
            w,
            "  {:<14}{} followed (hops; each request counts once, at its final response)",
            "redirects", redirects
        )?;
    }
    Ok(())
}

pub(crate) const TABLE: [Phase; 25] = [
    Phase::ScheduleLag,
    Phase::Connect,
    Phase::Tls,
    Phase::Upgrade,
    Phase::Handshake,
    Phase::Subscribe,
    Phase::Wait,
    Phase::Receive,
    Phase::Response,
    Phase::Latency,
    Phase::Connection,
    Phase::Reconnect,
    Phase::Pong,
    Phase::FirstMessage,
    Phase::LastMessage,
    Phase::MessageGap,
    Phase::Puback,
    Phase::Pubrec,
    Phase::Pubcomp,
    Phase::Delivery,
    Phase::FirstEvent,
    Phase::EventGap,
    Phase::Stream,
    Phase::Ttft,
    Phase::Itl,
];

/// Event streams (`--sse`, `--llm`): events, how the streams ended, and
/// for LLM streams tokens, tokens per second and the goodput of `--slo`.
pub(crate) fn write_streams(m: &Measurements, duration_s: f64, w: &mut dyn Write) -> io::Result<()> {
    let Some(s) = &m.streams else {
        return Ok(());
    };
    let per_stream = if s.streams == 0 {
        String::new()
    } else {
        format!(", {:.1} per stream", s.events as f64 / s.streams as f64)
    };
    writeln!(
        w,
        "  {:<14}{} read ({} of data){per_stream}",
        "events",
        s.events,
        bytes(s.event_bytes as f64)
    )?;
    let ended: Vec<String> = s.ended.iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(w, "  {:<14}{} ended: {}", "streams", s.streams, ended.join(" "))?;
    if s.tokens > 0 || s.tokens_per_second_milli.is_some() {
        let per_stream = s.tokens_per_second_milli.as_ref().map_or_else(String::new, |h| {
            format!(
                "; per stream {:.1}/s mean, {:.1}/s p50",
                h.mean() / 1000.0,
                h.quantile(0.5) as f64 / 1000.0
            )
        });
        writeln!(
            w,
            "  {:<14}{} output, {:.1}/s in total{per_stream}",
            "tokens",
            s.tokens,
            per_second(s.tokens, duration_s)
        )?;
    }
    if let Some(g) = s.goodput() {
        writeln!(
            w,
            "  {:<14}{:.2}% ({} of {} streams met the --slo)",
            "goodput",
            g * 100.0,
            s.slo_met,
            s.slo_judged
        )?;
    }
    Ok(())
}

/// The bytes moved and the connections opened (with their failures by
/// class): the same two lines in the http and the scenario reports.
pub(crate) fn write_data_and_connections(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    writeln!(
        w,
        "  {:<14}received {} ({}/s), sent {} ({}/s)",
        "data",
        bytes(m.bytes.received as f64),
        bytes(per_second(m.bytes.received, r.duration_s)),
        bytes(m.bytes.sent as f64),
        bytes(per_second(m.bytes.sent, r.duration_s)),
    )?;
    let conns = &m.connections;
    writeln!(
        w,
        "  {:<14}{} opened, {} failed, at most {} open at once",
        "connections",
        conns.ok,
        conns.failed(),
        m.peak_concurrent_connections
    )?;
    if conns.failed() > 0 {
        write_errors(w, &conns.errors)?;
    }
    if let Some(x) = &m.multiplex {
        write_multiplex(x, w)?;
    }
    write_addresses(r, w, 14)
}

/// The addresses connections reached (every address a name resolves to is
/// tried in order), and the network settings that chose them (proxy,
/// `--connect-to`, `-4`/`-6`). `width`: as [`write_tls`]'s.
pub(crate) fn write_addresses(r: &RunResult, w: &mut dyn Write, width: usize) -> io::Result<()> {
    let m = &r.measurements;
    let reach = match &r.plan {
        Plan::Http(p) => p.reach.describe(),
        Plan::Storm(p) => p.reach.describe(),
        Plan::Run(_) | Plan::Mqtt(_) => None,
    };
    if !m.addresses.is_empty() {
        let list: Vec<String> = m
            .addresses
            .iter()
            .map(|(a, n)| format!("{a} ({})", throng_plan::count(*n, "connection")))
            .collect();
        writeln!(w, "  {:<width$}{}", "addresses", list.join(", "))?;
    }
    if let Some(reach) = reach {
        writeln!(w, "  {:<width$}{reach}", "network")?;
    }
    Ok(())
}

/// The streams line of a multiplexed run (HTTP/2): the protocol the
/// connections negotiated, the streams asked for and allowed, how many were
/// in flight at most, and how many requests each connection carried.
fn write_multiplex(x: &throng_metrics::Multiplex, w: &mut dyn Write) -> io::Result<()> {
    let protocols = x
        .protocols
        .iter()
        .map(|(p, n)| format!("{p} on {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let cap = match x.server_max_streams {
        Some(s) if s < x.streams_requested => {
            format!(", capped at {s} by the server (SETTINGS_MAX_CONCURRENT_STREAMS)")
        }
        Some(s) => format!(", the server allows {s}"),
        None => String::new(),
    };
    writeln!(
        w,
        "  {:<14}{protocols}; {} per connection asked{cap}; at most {} in flight on one connection, {} in all",
        "streams", x.streams_requested, x.peak_streams_per_connection, x.peak_streams
    )?;
    if let Some(avg) = x.requests_per_connection() {
        writeln!(
            w,
            "  {:<14}{avg:.1} requests per connection on average (min {}, max {}, over {} closed)",
            "", x.min_requests_per_connection, x.max_requests_per_connection, x.connections
        )?;
    }
    Ok(())
}

/// The TLS line: handshakes, what they negotiated, how certificates were
/// treated.
/// `width` is the report's label column (14 in http and scenario reports,
/// 16 in a storm's, whose labels are longer).
/// A TLS version, key exchange group or cipher suite as people write it
/// (the result keeps rustls' names: `TLSv1_3` is TLS 1.3 here).
fn tls_name(name: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let known = match name {
        "TLSv1_3" => "TLS 1.3",
        "TLSv1_2" => "TLS 1.2",
        "TLS13_AES_128_GCM_SHA256" => "AES-128-GCM",
        "TLS13_AES_256_GCM_SHA384" => "AES-256-GCM",
        "TLS13_CHACHA20_POLY1305_SHA256" => "ChaCha20-Poly1305",
        "secp256r1" => "P-256",
        "secp384r1" => "P-384",
        "secp521r1" => "P-521",
        _ => "",
    };
    if !known.is_empty() {
        return Cow::Borrowed(known);
    }
    // TLS 1.2 suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 → ECDHE-RSA AES-128-GCM.
    if let Some((kx, cipher)) = name.strip_prefix("TLS_").and_then(|r| r.split_once("_WITH_")) {
        let cipher = cipher.rsplit_once('_').map_or(cipher, |(c, _)| c);
        return Cow::Owned(format!(
            "{} {}",
            kx.replace('_', "-"),
            cipher.replace("AES_", "AES-").replace('_', "-")
        ));
    }
    Cow::Borrowed(name)
}

pub fn write_tls(r: &RunResult, w: &mut dyn Write, width: usize) -> io::Result<()> {
    let m = &r.measurements;
    if let Some(settings) = r.plan.tls() {
        // nats:// carries TLS settings for an upgrade the server may not ask for.
        if m.tls.is_none() && matches!(&r.plan, Plan::Storm(p) if p.target.scheme == throng_plan::StormScheme::Nats) {
            return Ok(());
        }
        let t = m.tls.clone().unwrap_or_default();
        let top = |m: &std::collections::BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| {
                    let k = tls_name(k);
                    if m.len() > 1 {
                        format!("{k} ({v})")
                    } else {
                        k.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            w,
            "  {:<width$}{} ({} resumed{}): {} {} {}",
            "tls",
            throng_plan::count(t.handshakes, "handshake"),
            t.resumed,
            if t.hello_retry > 0 {
                format!(", {} with HelloRetryRequest", t.hello_retry)
            } else {
                String::new()
            },
            top(&t.versions),
            top(&t.groups),
            top(&t.ciphers),
        )?;
        writeln!(w, "  {:<width$}{}", "", settings.describe())?;
    }
    Ok(())
}

/// Which I/O carried the run, as the run header says it: "io_uring",
/// "epoll", "epoll (io_uring is not permitted here (EPERM: …))" when auto
/// fell back, "epoll (io_uring does not carry --redirects yet)" when auto
/// chose epoll for the plan, "mixed (io_uring in 2 of 4 runs)" for a merge
/// of both. None for results from before throng said.
pub fn io_line(r: &RunResult) -> Option<String> {
    let g = &r.generator;
    let io = g.io?;
    Some(match (io, &g.io_fallback) {
        (throng_result::Io::Epoll, Some(why)) => format!("epoll ({why})"),
        (throng_result::Io::Epoll, None) if g.io_not_carried.is_some() => format!(
            "epoll (io_uring does not carry {} yet)",
            g.io_not_carried.as_deref().unwrap_or_default()
        ),
        (throng_result::Io::Mixed, _) => format!(
            "mixed (io_uring in {} of {} runs)",
            r.parts
                .iter()
                .filter(|p| p.generator.io == Some(throng_result::Io::Uring))
                .count(),
            r.parts.len()
        ),
        (io, _) => io.label().to_string(),
    })
}

/// The generator's CPU time as a percentage of one core over the run, as
/// " (N% of one core)". Empty for runs under 0.1 s: the CPU time includes
/// starting up, which would dwarf so short a run and read as 300%.
pub(crate) fn cpu_share(r: &RunResult) -> String {
    let cpu = r.generator.cpu_user_s + r.generator.cpu_system_s;
    if r.duration_s >= 0.1 {
        format!(" ({:.0}% of one core)", cpu * 100.0 / r.duration_s)
    } else {
        String::new()
    }
}

/// The generator's own cost, with `units` of `unit` (e.g. "requests")
/// per CPU-second, labelled in a column `width` wide.
pub fn write_generator(r: &RunResult, units: u64, unit: &str, w: &mut dyn Write, width: usize) -> io::Result<()> {
    let ended = units;
    let g = &r.generator;
    let cpu = g.cpu_user_s + g.cpu_system_s;
    writeln!(
        w,
        "  {:<width$}CPU {:.2}s user + {:.2}s system{}, peak memory {}{}",
        "generator",
        g.cpu_user_s,
        g.cpu_system_s,
        cpu_share(r),
        bytes(g.peak_rss_bytes as f64),
        if cpu > 0.0 {
            format!(", {:.0} {unit} per CPU-second", ended as f64 / cpu)
        } else {
            String::new()
        },
    )?;
    write_parts(r, w, width)?;
    write_timestamps(r, w)
}

/// The most pieces of a merged result listed one by one.
const PARTS_SHOWN: usize = 16;

/// Each piece of a merged result (an agent, a segment, a process) with its
/// own CPU and memory, so that a generator that was itself the bottleneck
/// shows; nothing for a result of one piece.
fn write_parts(r: &RunResult, w: &mut dyn Write, width: usize) -> io::Result<()> {
    if r.parts.len() < 2 {
        return Ok(());
    }
    for (i, p) in r.parts.iter().enumerate().take(PARTS_SHOWN) {
        let g = &p.generator;
        let cpu = g.cpu_user_s + g.cpu_system_s;
        let share = if p.duration_s >= 0.1 {
            format!(" ({:.0}% of one core)", cpu * 100.0 / p.duration_s)
        } else {
            String::new()
        };
        writeln!(
            w,
            "  {:<width$}part {i} ({}): CPU {:.2}s user + {:.2}s system{share}, peak memory {}",
            "",
            crate::format::clip(&p.hostname, 40),
            g.cpu_user_s,
            g.cpu_system_s,
            bytes(g.peak_rss_bytes as f64),
        )?;
    }
    if r.parts.len() > PARTS_SHOWN {
        writeln!(w, "  {:<width$}… and {} more parts", "", r.parts.len() - PARTS_SHOWN)?;
    }
    Ok(())
}

/// Which clocks timed the responses: "timestamps  kernel receive
/// (SO_TIMESTAMPING), send at the system call" (HTTP/2: the system call
/// that writes the stream's HEADERS; HTTP/3: the first send of the QUIC
/// socket after the stream is handed to its connection), with the
/// fallbacks when there were any. Nothing for runs that timed no response, or results
/// from before throng said.
pub fn write_timestamps(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let Some(t) = &r.generator.timestamps else {
        return Ok(());
    };
    let total = t.kernel.saturating_add(t.user);
    if total == 0 {
        return Ok(());
    }
    const KERNEL: &str = "kernel receive (SO_TIMESTAMPING)";
    const USER: &str = "user clock at the read";
    let receive = if t.user == 0 {
        KERNEL.to_string()
    } else if t.kernel == 0 {
        if t.receive == "user" {
            format!("{USER} (THRONG_TIMESTAMPS=user)")
        } else {
            format!("{USER} (no kernel timestamps)")
        }
    } else {
        format!(
            "{KERNEL} for all but {} of {total} responses ({USER}: no or implausible kernel timestamp)",
            t.user
        )
    };
    // HTTP/2's driver stamps the streams whose HEADERS its write carries;
    // HTTP/3's streams are handed to quinn, and stamped at its next send.
    let send = match &r.measurements.multiplex {
        Some(m) if m.protocols.contains_key("h3") => "send at the system call that carries it",
        Some(_) => "send at the system call that writes its HEADERS",
        None => "send at the system call",
    };
    writeln!(w, "  {:<14}{receive}, {send}", "timestamps")
}

pub(crate) fn write_errors(w: &mut dyn Write, errors: &std::collections::BTreeMap<String, u64>) -> io::Result<()> {
    for (name, n) in errors {
        writeln!(w, "    {name:<24}{n:>10}  {}", ErrorClass::describe(name))?;
    }
    Ok(())
}

/// The phase table: one row per phase with samples, its quantiles in
/// increasing order (max last).
pub fn write_phase_table(m: &Measurements, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "  {:<14}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "phase", "avg", "min", "med", "p90", "p95", "p99", "p99.9", "max", "count"
    )?;
    for phase in TABLE {
        let Some(h) = m.phase(phase.name()) else { continue };
        let s = h.summary();
        writeln!(
            w,
            "  {:<14}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            phase.name(),
            us(s.mean),
            us(s.min as f64),
            us(s.p50 as f64),
            us(s.p90 as f64),
            us(s.p95 as f64),
            us(s.p99 as f64),
            us(s.p999 as f64),
            us(s.max as f64),
            s.count
        )?;
    }
    Ok(())
}

/// The slowest requests with their trace ids (`--trace-context`), when
/// the result has them: a short table, slowest first.
pub(crate) fn write_slowest(m: &Measurements, w: &mut dyn Write) -> io::Result<()> {
    let Some(s) = m.slowest.as_ref().filter(|s| !s.requests.is_empty()) else {
        return Ok(());
    };
    writeln!(w, "  slowest requests (trace ids sent in traceparent)")?;
    writeln!(w, "  {:>10}  {:>10}  {:<16}  trace id", "latency", "start", "outcome")?;
    for r in &s.requests {
        let outcome = match (r.status, &r.error) {
            (Some(code), _) => code.to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => "-".to_string(),
        };
        writeln!(
            w,
            "  {:>10}  {:>10}  {:<16}  {}",
            us(r.latency_us as f64),
            us(r.start_us as f64),
            crate::format::clip(&outcome, 16),
            r.trace_id
        )?;
    }
    writeln!(w)
}

/// The latency distribution as bars, as hey and oha print it: ten equal
/// spans from the fastest request to p99.9, and the slowest 0.1% in a row
/// of their own (so one outlier does not squeeze the rest into one bar).
/// Nothing when the run has fewer than two distinct latencies; a blank
/// line after the bars.
pub fn write_latency_bars(m: &Measurements, w: &mut dyn Write) -> io::Result<()> {
    const SPANS: u64 = 10;
    const WIDTH: u64 = 40;
    let Some(h) = m.phase(Phase::Latency.name()) else {
        return Ok(());
    };
    let (low, top, max) = (h.min(), h.quantile(0.999), h.max());
    if h.count() < 2 || top <= low {
        return Ok(());
    }
    let step = (top - low).div_ceil(SPANS).max(1);
    let mut rows: Vec<(u64, u64, u64)> = (0..SPANS)
        .map(|i| {
            let from = low + i * step;
            let to = (from + step - 1).min(top);
            (from, to, h.inner().count_between(from, to))
        })
        .filter(|&(from, _, _)| from <= top)
        .collect();
    if max > top {
        rows.push((top + 1, max, h.inner().count_between(top + 1, max)));
    }
    let most = rows.iter().map(|r| r.2).max().unwrap_or(1).max(1);
    writeln!(w, "  latency distribution (requests per span)")?;
    for (from, to, n) in rows {
        let bar = "■".repeat(usize::try_from(n * WIDTH / most).unwrap_or(0));
        let line = format!("  {:>10} – {:<10}{n:>10}  {bar}", us(from as f64), us(to as f64));
        writeln!(w, "{}", line.trim_end())?;
    }
    writeln!(w)
}

#[cfg(test)]
mod tls_name_tests {
    #[test]
    fn tls_names_read_as_people_write_them() {
        for (rustls, human) in [
            ("TLSv1_3", "TLS 1.3"),
            ("TLS13_AES_128_GCM_SHA256", "AES-128-GCM"),
            ("secp256r1", "P-256"),
            ("X25519", "X25519"),
            ("X25519MLKEM768", "X25519MLKEM768"),
            ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA AES-128-GCM"),
            (
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                "ECDHE-ECDSA CHACHA20-POLY1305",
            ),
        ] {
            assert_eq!(super::tls_name(rustls), human);
        }
    }
}

#[cfg(test)]
mod phase_table_tests {
    /// Quantiles read left to right in increasing order, max last (k6 puts
    /// max in the middle, where it reads as a quantile).
    #[test]
    fn quantiles_increase_to_the_max() {
        let mut m = throng_metrics::Measurements::default();
        let mut h = throng_metrics::Hist::new();
        for us in 1..=1000u64 {
            h.record(std::time::Duration::from_micros(us));
        }
        m.phases.insert("latency".to_string(), h);
        let mut out = Vec::new();
        super::write_phase_table(&m, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let head: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            head,
            [
                "phase", "avg", "min", "med", "p90", "p95", "p99", "p99.9", "max", "count"
            ]
        );
        let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[0], "latency");
        assert_eq!(row[8], "1.00ms", "{text}");
    }

    /// Every request is in one bar, the bars run from the fastest to the
    /// slowest, and the slowest 0.1% has a row of its own.
    #[test]
    fn latency_bars_hold_every_request_once() {
        let mut m = throng_metrics::Measurements::default();
        let mut h = throng_metrics::Hist::new();
        for us in 1..=10_000u64 {
            h.record(std::time::Duration::from_micros(100 + us % 100));
        }
        h.record(std::time::Duration::from_millis(50));
        m.phases.insert("latency".to_string(), h);
        let mut out = Vec::new();
        super::write_latency_bars(&m, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let counts: Vec<u64> = text
            .lines()
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 10_001, "{text}");
        assert!(counts.len() >= 10, "{text}");
        assert_eq!(*counts.last().unwrap(), 1, "the 50 ms outlier alone:\n{text}");
        assert!(text.lines().nth(1).unwrap().trim_start().starts_with("100µs"), "{text}");
        // One latency, or none: no bars.
        let mut one = throng_metrics::Measurements::default();
        let mut h = throng_metrics::Hist::new();
        h.record(std::time::Duration::from_micros(5));
        one.phases.insert("latency".to_string(), h);
        let mut out = Vec::new();
        super::write_latency_bars(&one, &mut out).unwrap();
        assert!(out.is_empty());
    }
}

#[cfg(test)]
mod parts_tests {
    use throng_result::{Generator, Part};

    fn part(host: &str, user: f64, rss: u64) -> Part {
        Part {
            started_at_unix_ms: 1_000_000,
            duration_s: 2.0,
            hostname: host.to_string(),
            generator: Generator {
                cpu_user_s: user,
                peak_rss_bytes: rss,
                ..Generator::default()
            },
        }
    }

    fn written(parts: Vec<Part>) -> String {
        let mut r = crate::testing::test_result(throng_metrics::Measurements::default());
        r.parts = parts;
        let mut out = Vec::new();
        super::write_generator(&r, 100, "requests", &mut out, 14).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A merged result names each piece's own CPU and memory, so that one
    /// agent at its limit shows; a long host name is cut; a result of one
    /// piece has no such lines; past 16 pieces the rest are counted.
    #[test]
    fn each_part_of_a_merge_shows_its_own_cost() {
        let text = written(vec![
            part("agent-a", 1.9, 50 << 20),
            part(&"h".repeat(70_000), 0.2, 10 << 20),
        ]);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("part ")).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("part 0 (agent-a): CPU 1.90s user") && lines[0].contains("(95% of one core)"));
        assert!(lines[1].contains("part 1 (hhh") && lines[1].len() < 200, "{}", lines[1]);
        assert!(!written(vec![part("solo", 1.0, 1)]).contains("part 0"));
        let many = written((0..20).map(|i| part(&format!("a{i}"), 0.1, 1)).collect());
        assert_eq!(many.lines().filter(|l| l.contains("part ")).count(), 16, "{many}");
        assert!(many.contains("… and 4 more parts"), "{many}");
    }
}
