//! throng's own report: what ran, how every request ended, a phase table.

use std::io::{self, Write};

use throng_metrics::Measurements;
use throng_plan::HttpPlan;
use throng_result::{Plan, RunResult};

use crate::format::pct;
use crate::sections::{write_data_and_connections, write_errors, write_redirects};
pub use crate::sections::{write_generator, write_phase_table, write_timestamps, write_tls};

/// Why an open loop's request was `dropped` (text and HTML reports).
pub(crate) const DROPPED_MEANING: &str = "no connection was free within --timeout of the intended start, \
     or -c starts were already waiting for one when it fell due";

/// The share of an open loop's schedule above which its reports warn that
/// the run did not make the load asked for (and the implied threshold
/// `dropped: rate <= 1%` fails).
pub const DROPPED_WARN_SHARE: f64 = 0.01;

/// What an open loop's schedule became: (scheduled, sent, dropped). None
/// for a closed loop, a storm or a scenario (its arrival-rate executors
/// count dropped iterations).
pub fn schedule(r: &RunResult) -> Option<(u64, u64, u64)> {
    match &r.plan {
        Plan::Http(p) if p.is_open_loop() => {
            let m = &r.measurements;
            let sent = m.requests.attempted;
            Some((sent.saturating_add(m.dropped), sent, m.dropped))
        }
        _ => None,
    }
}

/// "1500 scheduled, 300 sent, 1200 dropped (80.00%)".
pub fn schedule_line(scheduled: u64, sent: u64, dropped: u64) -> String {
    format!(
        "{scheduled} scheduled, {sent} sent, {dropped} dropped ({:.2}%)",
        pct(dropped, scheduled)
    )
}

/// The warning of an open loop that dropped more than
/// [`DROPPED_WARN_SHARE`] of its schedule, naming the rate and connections.
pub fn dropped_warning(r: &RunResult) -> Option<String> {
    let (scheduled, sent, dropped) = schedule(r)?;
    if scheduled == 0 || (dropped as f64) <= DROPPED_WARN_SHARE * scheduled as f64 {
        return None;
    }
    let asked = match &r.plan {
        Plan::Http(HttpPlan {
            load: throng_plan::Load::Open { rate },
            connections,
            ..
        }) => format!(
            "{} on up to {}",
            throng_plan::format_rate(*rate, "req"),
            throng_plan::count(*connections, "connection")
        ),
        _ => "its schedule".to_string(),
    };
    Some(format!(
        "{:.2}% of the schedule was dropped ({dropped} of {scheduled}): the run did not make the load asked for \
         ({asked}); the figures describe the {sent} requests sent. Raise -c, lower -r, or look at the server",
        pct(dropped, scheduled)
    ))
}

/// Writes the text report of any result: an HTTP run's here, a storm's and
/// a scenario run's by their modules. Each kind's writer takes its own plan,
/// so none can hand a result back to another.
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    match &r.plan {
        Plan::Http(p) => write_http(r, p, w),
        Plan::Storm(p) => crate::storm::report::write_storm(r, p, w),
        Plan::Run(p) => crate::scenario::report::write_run(r, p, w),
        Plan::Mqtt(p) => crate::mqtt::write_mqtt(r, p, w),
    }
}

/// The report of a `throng http` run.
fn write_http(r: &RunResult, p: &HttpPlan, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    match &p.grpc {
        Some(g) => writeln!(w, "throng grpc {} {} ({})", p.target.authority(), g.call, g.proto)?,
        None => writeln!(w, "throng http {} {}", p.method, p.target.url)?,
    }
    writeln!(w, "  {}", p.describe())?;
    if let Some(io) = crate::sections::io_line(r) {
        writeln!(w, "  I/O: {io}")?;
    }
    if !p.targets.is_empty() {
        writeln!(
            w,
            "  {} targets, taken {} (--targets-order)",
            p.targets.len(),
            p.targets_order.name()
        )?;
    }
    if let Some(b) = &p.body_lines {
        writeln!(
            w,
            "  {} bodies from {}, taken {} (--targets-order)",
            b.count,
            b.file,
            p.targets_order.name()
        )?;
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
    for (what, push) in r.pushes() {
        writeln!(w, "  {}", push.summary(what))?;
    }
    if let Some(warning) = dropped_warning(r) {
        writeln!(w, "  WARNING: {warning}")?;
    }
    let sched = schedule(r);
    if r.coordinated_omission_free && sched.is_some_and(|(_, _, dropped)| dropped > 0) {
        writeln!(
            w,
            "  latency is coordinated-omission-free for the requests sent (measured from each one's intended\n  \
             start); the dropped were never sent and have no latency"
        )?;
    } else if r.coordinated_omission_free {
        writeln!(
            w,
            "  latency is coordinated-omission-free: measured from each request's intended start on the schedule"
        )?;
    } else {
        writeln!(
            w,
            "  latency is NOT coordinated-omission-free: in a closed loop a stalled server also stalls the\n  \
             senders, hiding the wait; use -r RATE for an open-loop run"
        )?;
    }
    writeln!(w)?;

    let req = &m.requests;
    let ended = req.ended();
    if let Some((scheduled, sent, dropped)) = sched {
        writeln!(w, "  {:<14}{}", "schedule", schedule_line(scheduled, sent, dropped))?;
    }
    writeln!(
        w,
        "  {:<14}{} in {:.2}s, {:.1}/s",
        "requests",
        ended,
        r.duration_s,
        r.requests_per_second()
    )?;
    match sched {
        // Of what was sent, and of what was asked for.
        Some((scheduled, _, dropped)) if dropped > 0 => writeln!(
            w,
            "  {:<14}{} ({:.2}% of those sent, {:.2}% of the schedule)",
            "ok",
            req.ok,
            pct(req.ok, ended),
            pct(req.ok, scheduled)
        )?,
        _ => writeln!(w, "  {:<14}{} ({:.2}%)", "ok", req.ok, pct(req.ok, ended))?,
    }
    let failed = req.failed();
    writeln!(w, "  {:<14}{} ({:.2}%)", "errors", failed, pct(failed, ended))?;
    write_errors(w, &req.errors)?;
    if m.dropped > 0 {
        writeln!(
            w,
            "  {:<14}{} (scheduled, never sent: {DROPPED_MEANING})",
            "dropped", m.dropped
        )?;
    }
    write_redirects(w, m.redirects)?;
    crate::sections::write_streams(m, r.duration_s, w)?;
    if let Some(g) = &p.grpc {
        writeln!(w, "  {:<14}{}", "grpc-status", grpc_statuses(m))?;
        if g.client_streaming {
            writeln!(
                w,
                "  {:<14}{} sent ({} a call, --stream-messages)",
                "requested",
                m.messages_sent,
                g.stream_messages.unwrap_or(1)
            )?;
        }
        if g.server_streaming || g.client_streaming {
            let calls = m.status.values().sum::<u64>();
            let expect = g
                .expect_messages
                .map_or_else(String::new, |n| format!(", {n} expected (--expect-messages)"));
            // No call answered: no per-call figure (the messages came on
            // calls cut off by the deadline).
            let per_call = if calls == 0 {
                "no call answered".to_string()
            } else {
                format!("{:.1} per answered call", m.messages as f64 / calls as f64)
            };
            writeln!(w, "  {:<14}{} received, {per_call}{expect}", "messages", m.messages)?;
        }
    } else {
        write_statuses(m, p, w)?;
    }
    write_data_and_connections(r, w)?;
    write_tls(r, w, 14)?;
    writeln!(w)?;
    if let Some(s) = &m.scenario {
        crate::scenario::report::write_tags(s, w)?;
    }
    crate::scenario::report::write_thresholds(r, w)?;
    write_phase_table(m, w)?;
    writeln!(w)?;
    crate::sections::write_latency_bars(m, w)?;
    crate::sections::write_slowest(m, w)?;
    write_generator(r, ended, "requests", w, 14)
}

/// A gRPC run's statuses by name: `OK=980 UNAVAILABLE=20`.
pub(crate) fn grpc_statuses(m: &Measurements) -> String {
    if m.status.is_empty() {
        return "none (no call was answered)".to_string();
    }
    m.status
        .iter()
        .map(|(&code, n)| format!("{}={n}", throng_plan::grpc_code_name(code)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// HTTP statuses by code, as a scenario's report names them
/// (`200=980 503=20`), and those the plan does not expect (counted
/// `check_failed`).
fn write_statuses(m: &Measurements, p: &HttpPlan, w: &mut dyn Write) -> io::Result<()> {
    if m.status.is_empty() {
        return writeln!(w, "  {:<14}none (no response arrived)", "status");
    }
    writeln!(w, "  {:<14}{}", "status", codes(m.status.iter()))?;
    let unexpected = unexpected_statuses(m, p);
    if !unexpected.is_empty() {
        writeln!(
            w,
            "  {:<14}{} not expected (--expect-status {}): counted check_failed",
            "",
            codes(unexpected.iter().map(|(c, n)| (c, n))),
            p.expect_status.to_text()
        )?;
    }
    Ok(())
}

/// `200=980 503=20`.
pub(crate) fn codes<'a>(list: impl Iterator<Item = (&'a u16, &'a u64)>) -> String {
    list.map(|(code, n)| format!("{code}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The statuses of an HTTP run's responses that its plan does not expect,
/// by code.
pub fn unexpected_statuses(m: &Measurements, p: &HttpPlan) -> Vec<(u16, u64)> {
    m.status
        .iter()
        .filter(|(code, _)| !p.expect_status.contains(**code))
        .map(|(c, n)| (*c, *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use throng_metrics::Measurements;
    use throng_plan::{HttpArgs, HttpPlan};
    use throng_result::Plan;

    /// An open loop at 500/s on 5 connections that sent `sent` and dropped
    /// `dropped`, all answered 200 or 503 (every fifth).
    fn open_loop(sent: u64, dropped: u64) -> throng_result::RunResult {
        let mut m = Measurements::default();
        m.requests.attempted = sent;
        m.requests.ok = sent - sent / 5;
        m.requests.errors.insert("check_failed".into(), sent / 5);
        m.status.insert(200, sent - sent / 5);
        m.status.insert(503, sent / 5);
        m.dropped = dropped;
        let mut r = crate::testing::test_result(m);
        r.coordinated_omission_free = true;
        r.plan = Plan::Http(
            HttpPlan::from_args(HttpArgs {
                url: "http://127.0.0.1:8080/".into(),
                rate: Some(500.0),
                connections: Some(5),
                cores: 1,
                ..HttpArgs::default()
            })
            .expect("a valid plan"),
        );
        r
    }

    fn text(r: &throng_result::RunResult) -> String {
        let mut out = Vec::new();
        super::write(r, &mut out).expect("written");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn every_view_says_what_the_push_did() {
        let push = throng_result::PushRecord {
            endpoint: "http://127.0.0.1:9090/api/v1/write".into(),
            samples_sent: 40,
            samples_failed: 20,
            pushes_sent: 2,
            pushes_failed: 1,
            last_error: Some("HTTP 500".into()),
            ..throng_result::PushRecord::default()
        };
        let line = "remote write to http://127.0.0.1:9090/api/v1/write: 40 samples sent, 20 failed, 0 dropped \
                    (3 pushes, 1 failed); last error: HTTP 500\n";
        for make in [
            crate::testing::test_result,
            crate::testing::test_storm_result,
            crate::testing::test_run_result,
        ] {
            let mut r = make(Measurements::default());
            assert!(!text(&r).contains("remote write"));
            r.remote_write = Some(push.clone());
            let t = text(&r);
            assert!(t.contains(line), "{t}");
            assert!(!t.contains("OTLP"), "{t}");
            r.otlp = Some(throng_result::PushRecord {
                endpoint: "http://127.0.0.1:4318/v1/metrics".into(),
                samples_sent: 7,
                pushes_sent: 1,
                ..throng_result::PushRecord::default()
            });
            let t = text(&r);
            assert!(t.contains(line), "{t}");
            assert!(
                t.contains(
                    "OTLP push to http://127.0.0.1:4318/v1/metrics: 7 samples sent, 0 failed, 0 dropped \
                     (1 pushes, 0 failed)\n"
                ),
                "{t}"
            );
        }
    }

    #[test]
    fn an_open_loop_says_what_its_schedule_became() {
        let t = text(&open_loop(300, 1200));
        assert!(
            t.contains("schedule      1500 scheduled, 300 sent, 1200 dropped (80.00%)"),
            "{t}"
        );
        assert!(
            t.contains("WARNING: 80.00% of the schedule was dropped (1200 of 1500): the run did not make the load asked for (500 req/s on up to 5 connections)"),
            "{t}"
        );
        assert!(
            t.contains("ok            240 (80.00% of those sent, 16.00% of the schedule)"),
            "{t}"
        );
        assert!(t.contains("coordinated-omission-free for the requests sent"), "{t}");
        assert!(t.contains("status        200=240 503=60\n"), "{t}");
        assert!(
            t.contains("503=60 not expected (--expect-status 200-399): counted check_failed"),
            "{t}"
        );
        // 1% is the bound: at it, no warning; past it, one.
        assert_eq!(super::dropped_warning(&open_loop(990, 10)), None);
        assert!(super::dropped_warning(&open_loop(989, 11)).is_some());
        let t = text(&open_loop(1000, 0));
        assert!(t.contains("1000 scheduled, 1000 sent, 0 dropped (0.00%)"), "{t}");
        assert!(!t.contains("WARNING"), "{t}");
        assert!(
            t.contains("measured from each request's intended start on the schedule"),
            "{t}"
        );
        // A closed loop has no schedule.
        let closed = crate::testing::test_result(Measurements::default());
        assert_eq!(super::schedule(&closed), None);
        assert!(!text(&closed).contains("schedule "));
    }
}
