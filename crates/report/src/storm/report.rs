//! The storm report's sections, from the plan line to the generator's cost.

use std::io::{self, Write};

use throng_metrics::Phase;
use throng_plan::{ClientProfile, StormPlan};
use throng_result::{RunResult, per_second};

use crate::format::{bytes, pct, us};
use crate::sections::{write_errors, write_generator, write_phase_table, write_tls};

/// Seconds of per-second figures shown one by one; longer storms get a
/// summary (min, median, max).
const SERIES_SHOWN: usize = 20;

/// What each kind of out-of-turn talk is, and which real clients fail at it.
pub(crate) const OUT_OF_TURN: [(&str, &str); 3] = [
    (
        "ping_before_pong",
        "a PING before the PONG of CONNECT; nats.go (v1.53.1) fails: nats: expected 'PONG', got 'PING'; \
         async-nats (0.49.1) counts itself connected, before the server has judged its credentials",
    ),
    (
        "info_before_pong",
        "an INFO update before the PONG of CONNECT; nats.go fails: nats: expected 'PONG', got 'INFO …'; \
         async-nats counts itself connected",
    ),
    (
        "err_then_pong",
        "an -ERR, then PONG; nats.go and async-nats fail at the -ERR",
    ),
];

/// The handshakes in which the server spoke out of turn, with what real
/// clients do there.
fn write_out_of_turn(client: ClientProfile, m: &throng_metrics::Measurements, w: &mut dyn Write) -> io::Result<()> {
    if m.handshake_out_of_turn.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "  {:<16}handshakes in which the server spoke before the PONG of CONNECT:",
        "out of turn"
    )?;
    for (kind, n) in &m.handshake_out_of_turn {
        let meaning = OUT_OF_TURN.iter().find(|(k, _)| k == kind).map_or("", |(_, m)| m);
        writeln!(w, "    {kind:<32}{n:>8}  {meaning}")?;
    }
    let verdict = match client {
        ClientProfile::Lenient => {
            "throng answered and waited (--client lenient); nats.go clients would have failed these: \
             rerun with --client nats.go to count them as it does"
        }
        ClientProfile::NatsGo => "failed here as nats.go fails them (--client nats.go)",
    };
    writeln!(w, "  {:<16}{verdict}", "")
}

/// The report of a storm.
pub(crate) fn write_storm(r: &RunResult, p: &StormPlan, w: &mut dyn Write) -> io::Result<()> {
    write_head(r, p, w)?;
    write_connections(r, p, w)?;
    write_held(r, w)?;
    write_reconnects(r, p, w)?;
    write_trigger(r, w)?;
    write_requests(r, w)?;
    write_phases_and_cost(r, w)?;
    write_kernel(r, w)
}

/// What ran: the target, the plan, interruptions, the segment, notes.
fn write_head(r: &RunResult, p: &StormPlan, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "throng storm {}", p.target.url)?;
    writeln!(w, "  {}", p.describe())?;
    if let Some(io) = crate::sections::io_line(r) {
        writeln!(w, "  I/O: {io}")?;
    }
    if r.interrupted {
        writeln!(w, "  interrupted: the storm was stopped before its end")?;
    }
    if let Some(s) = &r.segment {
        writeln!(w, "  segment {s}")?;
    }
    for note in &r.notes {
        writeln!(w, "  note: {note}")?;
    }
    for (what, push) in r.pushes() {
        writeln!(w, "  {}", push.summary(what))?;
    }
    writeln!(w)?;
    Ok(())
}

/// Connections: attempted, established, failed by class, hints, throughput, peak.
fn write_connections(r: &RunResult, p: &StormPlan, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    let c = &m.connections;
    writeln!(
        w,
        "  {:<16}{} attempted, {} established, {} failed ({:.2}%)",
        "connections",
        c.attempted,
        c.ok,
        c.failed(),
        pct(c.failed(), c.attempted)
    )?;
    write_errors(w, &c.errors)?;
    crate::sections::write_addresses(r, w, 16)?;
    if c.error("addr_unavailable") > 0 && p.source.is_empty() {
        writeln!(
            w,
            "  {:<16}out of local ports to {}:{}: spread connections over more source addresses, e.g. --source 127.0.0.2-127.0.0.200",
            "hint", p.target.host, p.target.port
        )?;
    }
    if c.error("fd_unavailable") > 0 {
        writeln!(
            w,
            "  {:<16}out of file descriptors: lower --max-concurrent or use --procs",
            "hint"
        )?;
    }
    write_out_of_turn(p.client, m, w)?;
    let per_sec: Vec<u64> = m.series.iter().map(|s| s.connections_opened).collect();
    let shown = if per_sec.len() <= SERIES_SHOWN {
        per_sec.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
    } else {
        let mut sorted = per_sec.clone();
        sorted.sort_unstable();
        format!(
            "min {}, median {}, max {} over {} seconds",
            sorted.first().unwrap_or(&0),
            sorted[sorted.len() / 2],
            sorted.last().unwrap_or(&0),
            sorted.len()
        )
    };
    writeln!(
        w,
        "  {:<16}{:.1} established/s over {:.2}s; per second: {shown}",
        "throughput",
        per_second(c.ok, r.duration_s),
        r.duration_s
    )?;
    if let Some(t) = m.total_connect_time() {
        writeln!(
            w,
            "  {:<16}{} (first attempt to last established)",
            "total connect",
            us(t.as_micros() as f64)
        )?;
    }
    writeln!(
        w,
        "  {:<16}{} established at once",
        "peak", m.peak_concurrent_connections
    )?;
    Ok(())
}

/// What the held connections carried and how the server closed them.
fn write_held(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    if let Some(x) = &m.multiplex {
        // HTTP/2 and HTTP/3 storms: each connection carries at most its one
        // request, as one stream.
        let protocols = x
            .protocols
            .iter()
            .map(|(p, n)| format!("{p} on {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(
            w,
            "  {:<16}{protocols} connections; {} carried a request (one stream each)",
            "multiplexed", x.requests
        )?;
    }
    if m.closed_by_peer > 0 {
        writeln!(
            w,
            "  {:<16}{} held connections closed by the server",
            "closed early", m.closed_by_peer
        )?;
    }
    if !m.close_codes.is_empty() {
        let codes: Vec<String> = m.close_codes.iter().map(|(c, n)| format!("{c}={n}")).collect();
        writeln!(w, "  {:<16}by close code: {}", "", codes.join(", "))?;
    }
    if !m.hold_failures.is_empty() {
        let classes: Vec<String> = m.hold_failures.iter().map(|(c, n)| format!("{c}={n}")).collect();
        writeln!(w, "  {:<16}ended by this side: {}", "", classes.join(", "))?;
    }
    Ok(())
}

/// Connections the server dropped and how they came back.
fn write_reconnects(r: &RunResult, p: &StormPlan, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    if p.reconnect.is_some() && m.closed_by_peer > 0 {
        let back = m.phases.get(Phase::Reconnect.name()).map_or(0, |h| h.count());
        let gave_up = crate::format::total(m.reconnect_gave_up.values().copied());
        writeln!(
            w,
            "  {:<16}{} dropped, {} came back, {} never did; {}, {} failed",
            "reconnects",
            m.closed_by_peer,
            back,
            gave_up,
            throng_plan::count(m.reconnects.attempted, "attempt"),
            m.reconnects.failed()
        )?;
        write_errors(w, &m.reconnects.errors)?;
        if gave_up > 0 {
            writeln!(w, "  {:<16}why they never came back:", "")?;
            write_errors(w, &m.reconnect_gave_up)?;
        }
        if let Some(t) = m.total_reconnect_time() {
            writeln!(
                w,
                "  {:<16}{} throng's: first drop to last re-established (the outage users see)",
                "total reconnect",
                us(t.as_micros() as f64)
            )?;
        }
        if let Some(t) = m.client_reconnect_time() {
            writeln!(
                w,
                "  {:<16}{} the clients': server accepting again to last re-established",
                "",
                us(t.as_micros() as f64)
            )?;
        }
    }
    Ok(())
}

/// What the storm's `--trigger` command did.
fn write_trigger(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    if let Some(t) = &r.trigger {
        let when = t
            .fired_at_s
            .map_or_else(|| "never".to_string(), |s| format!("at {s:.2}s"));
        let status = match (t.exit_code, &t.problem) {
            (_, Some(p)) => p.clone(),
            (Some(c), None) => format!("exit {c}"),
            (None, None) => "killed by a signal".to_string(),
        };
        writeln!(
            w,
            "  {:<16}`{}` ran {when} for {:.2}s: {status}",
            "trigger", t.command, t.duration_s
        )?;
        for line in t.output.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev() {
            writeln!(w, "  {:<16}| {line}", "")?;
        }
    }
    Ok(())
}

/// The requests a storm's connections sent.
fn write_requests(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    if m.requests.attempted > 0 {
        let rq = &m.requests;
        let classes = m.status_classes();
        writeln!(
            w,
            "  {:<16}{} attempted, {} ok, {} failed; status 2xx={} 3xx={} 4xx={} 5xx={}",
            "requests",
            rq.attempted,
            rq.ok,
            rq.failed(),
            classes[1],
            classes[2],
            classes[3],
            classes[4]
        )?;
        write_errors(w, &rq.errors)?;
    }
    Ok(())
}

/// TLS, the phase table, and the generator's cost per connection.
fn write_phases_and_cost(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    let c = &m.connections;
    write_tls(r, w, 16)?;
    writeln!(w)?;
    write_phase_table(m, w)?;
    if let Some(h) = m.phase(Phase::Tls.name()) {
        writeln!(w, "  {:<16}{} on average", "handshakes", us(h.mean()))?;
    }
    writeln!(w)?;
    write_generator(r, c.attempted, "connections", w, 16)?;
    // Per-connection memory means something only with many open at once.
    if m.peak_concurrent_connections >= 100 {
        writeln!(
            w,
            "  {:<16}{} of peak memory per connection open at the peak",
            "",
            bytes(r.generator.peak_rss_bytes as f64 / m.peak_concurrent_connections as f64)
        )?;
        // RSS summed over processes counts their shared pages once each.
        if let Some(pss) = r.generator.peak_pss_bytes {
            writeln!(
                w,
                "  {:<16}PSS {} at most (summed over the processes, shared pages once): {} per connection",
                "",
                bytes(pss as f64),
                bytes(pss as f64 / m.peak_concurrent_connections as f64)
            )?;
        }
    }
    Ok(())
}

/// The kernel's side, beside the generator's: TCP sockets at the peak, the
/// slab memory they added and the socket buffers (machine-wide figures).
pub(super) fn write_kernel(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let Some(k) = &r.generator.kernel else {
        return Ok(());
    };
    let added = k.added();
    let per_socket = if added >= 100 {
        format!(
            " ({} per added socket)",
            bytes(k.slab_growth_bytes as f64 / added as f64)
        )
    } else {
        String::new()
    };
    writeln!(
        w,
        "  {:<16}{} TCP sockets at the peak ({added} more than at the start; machine-wide, both ends on loopback), \
         slab +{}{per_socket}, socket buffers {}",
        "kernel",
        k.tcp_sockets_peak,
        bytes(k.slab_growth_bytes as f64),
        bytes(k.tcp_buffer_bytes_peak as f64),
    )
}
