//! ApacheBench's report layout, with ab's field meanings:
//! Connect = connect time (0 for a request on a reused connection),
//! Processing = first request byte → last response byte, Waiting = TTFB,
//! Total = the request's whole latency; percentiles are over Total.

use std::io::{self, Write};

use throng_metrics::{Hist, Outcomes};
use throng_result::{Plan, RunResult};

/// Writes the ab-style report.
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let m = &r.measurements;
    let Plan::Http(p) = &r.plan else {
        return crate::text::write(r, w);
    };
    let first = m.first_reply.clone().unwrap_or_default();
    let req = &m.requests;
    let done = req.ended();
    let secs = r.duration_s;
    let open_rate = match p.load {
        throng_plan::Load::Open { rate } => Some(rate),
        throng_plan::Load::Closed => None,
    };

    writeln!(w, "throng {} — report in ApacheBench's layout", r.throng_version)?;
    writeln!(w)?;
    writeln!(w, "Server Software:        {}", first.server.as_deref().unwrap_or(""))?;
    writeln!(w, "Server Hostname:        {}", p.target.host)?;
    writeln!(w, "Server Port:            {}", p.target.port)?;
    writeln!(w)?;
    writeln!(w, "Document Path:          {}", p.target.path)?;
    writeln!(w, "Document Length:        {} bytes", first.body_bytes)?;
    writeln!(w)?;
    match open_rate {
        // ab's concurrency is its -c requests always in flight; an open
        // loop has no such number, only a rate and the connections it used.
        Some(rate) => writeln!(
            w,
            "Concurrency Level:      none: open loop at {} (at most {} connections open at once, of up to {})",
            throng_plan::format_rate(rate, "req"),
            m.peak_concurrent_connections,
            p.connections
        )?,
        None => writeln!(w, "Concurrency Level:      {}", p.connections)?,
    }
    writeln!(w, "Time taken for tests:   {secs:.3} seconds")?;
    writeln!(w, "Complete requests:      {done}")?;
    let (connect, receive, exceptions) = ab_failures(req);
    let failed = crate::format::total([connect, receive, exceptions]);
    writeln!(w, "Failed requests:        {failed}")?;
    if failed > 0 {
        writeln!(
            w,
            "   (Connect: {connect}, Receive: {receive}, Length: 0, Exceptions: {exceptions})"
        )?;
    }
    let non_2xx: u64 = m
        .status
        .iter()
        // A gRPC run's statuses are gRPC codes: not OK (0) is ab's non-2xx.
        .filter(|(c, _)| {
            if p.grpc.is_some() {
                **c != 0
            } else {
                !(200..300).contains(*c)
            }
        })
        .map(|(_, n)| *n)
        .fold(0u64, u64::saturating_add);
    if non_2xx > 0 {
        writeln!(w, "Non-2xx responses:      {non_2xx}")?;
    }
    if let Some((scheduled, _, dropped)) = crate::text::schedule(r) {
        writeln!(
            w,
            "Dropped requests:       {dropped} of {scheduled} scheduled ({:.2}%, never sent)",
            crate::format::pct(dropped, scheduled)
        )?;
    }
    if p.keepalive {
        let reused = m.replies().saturating_sub(m.connections.ok);
        writeln!(w, "Keep-Alive requests:    {reused}")?;
    }
    writeln!(w, "Total transferred:      {} bytes", m.bytes.received)?;
    if p.body_bytes > 0 {
        writeln!(w, "Total body sent:        {}", m.bytes.sent)?;
    }
    writeln!(w, "HTML transferred:       {} bytes", m.bytes.received_body)?;
    let rps = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    writeln!(w, "Requests per second:    {rps:.2} [#/sec] (mean)")?;
    let per = if done > 0 { secs * 1000.0 / done as f64 } else { 0.0 };
    match open_rate {
        // ab's "time per request" is concurrency × time / requests: by
        // Little's law the mean latency of a closed loop. In an open loop
        // that product means nothing; the mean latency is measured.
        Some(_) => writeln!(
            w,
            "Time per request:       {:.3} [ms] (mean latency from the intended start; open loop, so not \
             concurrency x time / requests as in ab)",
            m.phases.get("latency").map_or(0.0, |h| h.mean() / 1000.0)
        )?,
        None => writeln!(
            w,
            "Time per request:       {:.3} [ms] (mean)",
            per * f64::from(p.connections)
        )?,
    }
    writeln!(
        w,
        "Time per request:       {per:.3} [ms] (mean, across all concurrent requests)"
    )?;
    let kb = |b: u64| if secs > 0.0 { b as f64 / 1024.0 / secs } else { 0.0 };
    writeln!(
        w,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        kb(m.bytes.received)
    )?;
    if p.body_bytes > 0 {
        writeln!(w, "                        {:.2} kb/s sent", kb(m.bytes.sent))?;
        writeln!(
            w,
            "                        {:.2} kb/s total",
            kb(m.bytes.sent.saturating_add(m.bytes.received))
        )?;
    }
    writeln!(w)?;

    let empty = Hist::new();
    let hist = |name: &str| m.phases.get(name).unwrap_or(&empty);
    // ab gives every request a connect time: 0 when the connection was reused.
    let mut connect_per_request = hist("connect").clone();
    let requests_timed = hist("latency").count();
    connect_per_request.record_n_us(0, requests_timed.saturating_sub(connect_per_request.count()));
    writeln!(w, "Connection Times (ms)")?;
    writeln!(w, "              min  mean[+/-sd] median   max")?;
    row(w, "Connect:", &connect_per_request)?;
    row(w, "Processing:", hist("response"))?;
    row(w, "Waiting:", hist("wait"))?;
    row(w, "Total:", hist("latency"))?;
    writeln!(w)?;

    let total = hist("latency");
    if !total.is_empty() {
        writeln!(w, "Percentage of the requests served within a certain time (ms)")?;
        for q in [50, 66, 75, 80, 90, 95, 98, 99] {
            writeln!(w, "  {q}%  {:>5}", ms(total.quantile(f64::from(q) / 100.0) as f64))?;
        }
        writeln!(w, " 100%  {:>5} (longest request)", ms(total.max() as f64))?;
    }
    Ok(())
}

/// ab's failure columns: Connect, Receive, Exceptions (a status the plan
/// did not expect is not a failure in ab; see "Non-2xx responses").
fn ab_failures(o: &Outcomes) -> (u64, u64, u64) {
    let mut out = (0u64, 0u64, 0u64);
    for (name, &n) in &o.errors {
        match name.as_str() {
            "refused" | "timeout.connect" | "fd_unavailable" | "addr_unavailable" => out.0 = out.0.saturating_add(n),
            "reset" | "eof" | "timeout.response" | "protocol" => out.1 = out.1.saturating_add(n),
            "check_failed" => {}
            _ => out.2 = out.2.saturating_add(n),
        }
    }
    out
}

fn ms(us: f64) -> String {
    format!("{:.0}", us / 1000.0)
}

fn row(w: &mut dyn Write, label: &str, h: &Hist) -> io::Result<()> {
    let s = h.summary();
    writeln!(
        w,
        // ab 2.3: a 12-column label, then "%5 %4 %5.1f %6 %7".
        "{label:<12}{:>5} {:>4} {:>5.1} {:>6} {:>7}",
        ms(s.min as f64),
        ms(s.mean),
        s.stddev / 1000.0,
        ms(s.p50 as f64),
        ms(s.max as f64)
    )
}

#[cfg(test)]
mod tests {
    use throng_metrics::{FirstReply, Hist, Measurements};
    use throng_plan::{HttpArgs, HttpPlan};
    use throng_result::Plan;

    /// `ab -n 200 -c 4 http://127.0.0.1:18931/x` against nginx 1.22.1
    /// (`return 200 "hello from nginx\n"`), ab 2.3 as Debian ships it.
    const AB: &str = include_str!("../fixtures/ab-2.3-nginx.txt");

    /// 200 samples: `slow` of them at 3 ms, the rest at 0 (the capture's
    /// min, mean, sd, median and max for that row).
    fn hist(slow: u64) -> Hist {
        let mut h = Hist::new();
        h.record_n_us(0, 200 - slow);
        h.record_n_us(3000, slow);
        h
    }

    #[test]
    fn an_open_loop_has_no_concurrency_level_and_a_measured_time_per_request() {
        let mut m = Measurements::default();
        m.requests.attempted = 200;
        m.requests.ok = 200;
        m.dropped = 50;
        m.peak_concurrent_connections = 3;
        m.phases.insert("latency".into(), hist(100));
        let mut r = crate::testing::test_result(m);
        r.plan = Plan::Http(
            HttpPlan::from_args(HttpArgs {
                url: "http://127.0.0.1:8080/".into(),
                rate: Some(100.0),
                connections: Some(8),
                cores: 1,
                ..HttpArgs::default()
            })
            .expect("a valid plan"),
        );
        let mut out = Vec::new();
        super::write(&r, &mut out).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.contains(
                "Concurrency Level:      none: open loop at 100 req/s (at most 3 connections open at once, of up to 8)"
            ),
            "{text}"
        );
        // Half the requests at 3 ms: a mean of 1.5 ms.
        assert!(
            text.contains("Time per request:       1.500 [ms] (mean latency from the intended start"),
            "{text}"
        );
        assert!(
            text.contains("Dropped requests:       50 of 250 scheduled (20.00%, never sent)"),
            "{text}"
        );
    }

    #[test]
    fn the_ab_layout_is_byte_for_byte_ab_23s_for_the_same_figures() {
        let mut m = Measurements::default();
        m.requests.attempted = 200;
        m.requests.ok = 200;
        m.connections.attempted = 200;
        m.connections.ok = 200;
        m.status.insert(200, 200);
        m.bytes.received = 32000;
        m.bytes.received_body = 3400;
        m.first_reply = Some(FirstReply {
            status: 200,
            server: Some("nginx/1.22.1".into()),
            header_bytes: 143,
            body_bytes: 17,
        });
        m.phases.insert("connect".into(), hist(2));
        m.phases.insert("response".into(), hist(12));
        m.phases.insert("wait".into(), hist(6));
        m.phases.insert("latency".into(), hist(12));
        let mut r = crate::testing::test_result(m);
        r.plan = Plan::Http(
            HttpPlan::from_args(HttpArgs {
                url: "http://127.0.0.1:18931/x".into(),
                connections: Some(4),
                requests: Some(200),
                no_keepalive: true,
                cores: 1,
                ..HttpArgs::default()
            })
            .expect("a valid plan"),
        );
        r.duration_s = 200.0 / 8386.45;
        let mut out = Vec::new();
        super::write(&r, &mut out).expect("written");
        let ours = String::from_utf8(out).expect("UTF-8");
        // ab's banner and progress lines are its own; the report starts at "Server Software:".
        let theirs = &AB[AB.find("Server Software:").expect("a captured report")..];
        let ours = &ours[ours.find("Server Software:").expect("a report")..];
        for (i, (a, b)) in theirs.lines().zip(ours.lines()).enumerate() {
            assert_eq!(b, a, "line {} after Server Software:", i + 1);
        }
        assert_eq!(ours.lines().count(), theirs.lines().count());
    }
}
