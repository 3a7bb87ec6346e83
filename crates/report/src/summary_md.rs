//! A run as a short markdown summary, for a pull request comment or a CI
//! job's summary page (GitHub's `$GITHUB_STEP_SUMMARY`): the verdict on the
//! first line, each threshold's verdict, then the key figures in a table.
//!
//! ```text
//!  RunResult ─► ## ✅/❌ verdict          (thresholds, interruption, every unit failed)
//!               `throng http GET URL`    (the plan, as code: never a link)
//!               - ✅/❌ threshold: detail
//!               | figure | value |        (units of work, throughput, errors, phase percentiles)
//! ```
//!
//! Text from the run (URLs, threshold text and details, error classes) is
//! written inside code spans, so a renderer makes no links, images or markup
//! of it, and `|` is escaped in table cells.

use std::io::{self, Write};

use throng_result::{Plan, RunResult, per_second};

use crate::format::{pct, us};

/// How the run ended, as the summary's first line says it.
fn verdict(r: &RunResult) -> (bool, String) {
    let (o, unit) = (r.unit_outcomes(), r.unit().plural());
    let failed = r.thresholds.iter().filter(|v| !v.passed).count();
    let total = r.thresholds.len();
    if r.interrupted {
        (false, "interrupted before its end".to_string())
    } else if failed > 0 {
        (false, format!("{failed} of {total} thresholds failed"))
    } else if o.attempted > 0 && o.ok == 0 {
        (false, format!("every one of {} {unit} failed", o.attempted))
    } else if total > 0 {
        (true, format!("{total} of {total} thresholds held"))
    } else {
        (true, "ran to its end (no thresholds)".to_string())
    }
}

/// `text` inside a code span: one line, backticks turned to quotes, at most
/// `max` characters.
fn code(text: &str, max: usize) -> String {
    let clipped = crate::format::clip(text, max);
    let one: String = clipped
        .chars()
        .map(|c| match c {
            '`' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    format!("`{one}`")
}

/// [`code`] for a table cell: a `|` would end the cell, even in a code
/// span, unless escaped (GitHub's tables read `\|` there as `|`).
fn cell_code(text: &str, max: usize) -> String {
    code(text, max).replace('|', "\\|")
}

/// The command as a person would type it, without flags.
fn command(r: &RunResult) -> String {
    match &r.plan {
        Plan::Http(p) if p.grpc.is_some() => format!(
            "throng grpc {} {}",
            p.target.url,
            p.grpc.as_ref().map_or("", |g| g.call.as_str())
        ),
        Plan::Http(p) => format!("throng http {} {}", p.method, p.target.url),
        Plan::Storm(p) => format!("throng storm {}", p.target.url),
        Plan::Run(p) => format!("throng run {} → {}", p.file, p.target.url),
        Plan::Mqtt(p) => format!("throng mqtt {} --topic {}", p.target.url, p.topic),
    }
}

/// Writes the summary of `r`.
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let (ok, line) = verdict(r);
    writeln!(w, "### {} throng: {line}", if ok { "✅" } else { "❌" })?;
    writeln!(w)?;
    for v in &r.thresholds {
        writeln!(
            w,
            "- {} {} — {}",
            if v.passed { "✅" } else { "❌" },
            code(&v.threshold, 120),
            code(&v.detail, 200)
        )?;
    }
    if !r.thresholds.is_empty() {
        writeln!(w)?;
    }
    writeln!(w, "{}", code(&command(r), 200))?;
    writeln!(w)?;
    writeln!(w, "| figure | value |")?;
    writeln!(w, "|---|---:|")?;
    let (o, unit) = (r.unit_outcomes(), r.unit().plural());
    writeln!(w, "| {unit} | {} |", o.ended())?;
    writeln!(w, "| throughput | {:.1} ok/s |", per_second(o.ok, r.duration_s))?;
    writeln!(w, "| failed | {} ({:.2}%) |", o.failed(), pct(o.failed(), o.ended()))?;
    let mut classes: Vec<(&String, &u64)> = o.errors.iter().filter(|(_, n)| **n > 0).collect();
    classes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (class, n) in classes.iter().take(5) {
        writeln!(w, "| failed: {} | {n} |", cell_code(class, 60))?;
    }
    if classes.len() > 5 {
        let rest = crate::format::total(classes[5..].iter().map(|(_, n)| **n));
        writeln!(w, "| failed: {} other classes | {rest} |", classes.len() - 5)?;
    }
    if r.measurements.dropped > 0 {
        writeln!(w, "| dropped (scheduled, never sent) | {} |", r.measurements.dropped)?;
    }
    if let Some(phase) = crate::format::primary_phase(&r.measurements)
        && let Some(h) = r.measurements.phase(phase)
    {
        let s = h.summary();
        for (q, v) in [("p50", s.p50), ("p90", s.p90), ("p99", s.p99), ("max", s.max)] {
            writeln!(w, "| {phase} {q} | {} |", us(v as f64))?;
        }
    }
    if let Some(sc) = &r.measurements.scenario {
        writeln!(
            w,
            "| iterations | {} ({} dropped) |",
            sc.iterations, sc.dropped_iterations
        )?;
        if !sc.checks.is_empty() {
            let passes = crate::format::total(sc.checks.values().map(|c| c.passes));
            let fails = crate::format::total(sc.checks.values().map(|c| c.fails));
            writeln!(w, "| checks | {passes} passed, {fails} failed |")?;
        }
    }
    if let Some(s) = &r.measurements.streams {
        let data = crate::format::bytes(s.event_bytes as f64);
        writeln!(w, "| events | {} ({data} of data) |", s.events)?;
        let ended: Vec<String> = s.ended.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(
            w,
            "| streams | {} ended: {} |",
            s.streams,
            cell_code(&ended.join(" "), 200)
        )?;
        if s.tokens > 0 {
            let rate = per_second(s.tokens, r.duration_s);
            writeln!(w, "| tokens | {} output, {rate:.1}/s |", s.tokens)?;
        }
        if let Some(g) = s.goodput() {
            writeln!(
                w,
                "| goodput | {:.2}% ({} of {} streams met the --slo) |",
                g * 100.0,
                s.slo_met,
                s.slo_judged
            )?;
        }
    }
    writeln!(w, "| duration | {:.2}s |", r.duration_s)?;
    if !r.coordinated_omission_free && r.unit() == throng_result::Unit::Requests {
        writeln!(w)?;
        writeln!(
            w,
            "Closed loop: latency is not coordinated-omission-free (a slow server also slowed the senders)."
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use throng_metrics::{Hist, Measurements};

    fn measured() -> Measurements {
        let mut m = Measurements::default();
        m.requests.attempted = 1000;
        m.requests.ok = 990;
        m.requests.errors.insert("reset".into(), 6);
        m.requests.errors.insert("timeout.response".into(), 4);
        let mut h = Hist::new();
        for v in 1..=1000 {
            h.record_us(v * 10);
        }
        m.phases.insert("latency".into(), h);
        m
    }

    fn lines(r: &RunResult) -> Vec<String> {
        let mut out = Vec::new();
        write(r, &mut out).unwrap();
        String::from_utf8(out).unwrap().lines().map(str::to_string).collect()
    }

    #[test]
    fn thresholds_come_first_then_the_figures() {
        let mut r = crate::testing::test_result(measured());
        r.thresholds = vec![
            throng_scenario::Verdict {
                threshold: "latency: p(99) < 5ms".into(),
                passed: false,
                observed: Some(9_900.0),
                detail: "p(99) = 9.90ms".into(),
            },
            throng_scenario::Verdict {
                threshold: "rate(reset) < 0.01".into(),
                passed: true,
                observed: Some(0.006),
                detail: "rate = 0.006 (6 of 1000)".into(),
            },
        ];
        assert_eq!(
            lines(&r),
            [
                "### ❌ throng: 1 of 2 thresholds failed",
                "",
                "- ❌ `latency: p(99) < 5ms` — `p(99) = 9.90ms`",
                "- ✅ `rate(reset) < 0.01` — `rate = 0.006 (6 of 1000)`",
                "",
                "`throng http GET http://127.0.0.1:8080/`",
                "",
                "| figure | value |",
                "|---|---:|",
                "| requests | 1000 |",
                "| throughput | 495.0 ok/s |",
                "| failed | 10 (1.00%) |",
                "| failed: `reset` | 6 |",
                "| failed: `timeout.response` | 4 |",
                "| latency p50 | 5.00ms |",
                "| latency p90 | 9.01ms |",
                "| latency p99 | 9.90ms |",
                "| latency max | 10.01ms |",
                "| duration | 2.00s |",
                "",
                "Closed loop: latency is not coordinated-omission-free (a slow server also slowed the senders).",
            ]
        );
    }

    #[test]
    fn the_verdict_line_without_thresholds_and_when_all_failed() {
        let r = crate::testing::test_result(measured());
        assert_eq!(lines(&r)[0], "### ✅ throng: ran to its end (no thresholds)");
        assert_eq!(lines(&r)[2], "`throng http GET http://127.0.0.1:8080/`");
        let mut m = Measurements::default();
        m.connections.attempted = 10;
        m.connections.errors.insert("refused".into(), 10);
        let storm = crate::testing::test_storm_result(m);
        let l = lines(&storm);
        assert_eq!(l[0], "### ❌ throng: every one of 10 connections failed");
        assert!(l.contains(&"| connections | 10 |".to_string()), "{l:#?}");
        assert!(l.contains(&"| failed: `refused` | 10 |".to_string()), "{l:#?}");
        let mut stopped = crate::testing::test_result(measured());
        stopped.interrupted = true;
        assert_eq!(lines(&stopped)[0], "### ❌ throng: interrupted before its end");
    }

    #[test]
    fn stream_counts_are_figures_too() {
        let mut m = measured();
        let mut s = throng_metrics::StreamCounts {
            streams: 40,
            events: 400,
            event_bytes: 2048,
            tokens: 100,
            slo_judged: 40,
            slo_met: 30,
            ..Default::default()
        };
        s.ended.insert("completed".into(), 30);
        s.ended.insert("sse.stalled".into(), 10);
        m.streams = Some(s);
        let l = lines(&crate::testing::test_result(m));
        let at = l.iter().position(|x| x.starts_with("| events")).expect("an events row");
        assert_eq!(
            l[at..at + 4],
            [
                "| events | 400 (2.0 kB of data) |",
                "| streams | 40 ended: `completed=30 sse.stalled=10` |",
                "| tokens | 100 output, 50.0/s |",
                "| goodput | 75.00% (30 of 40 streams met the --slo) |",
            ]
        );
        assert!(
            !lines(&crate::testing::test_result(measured()))
                .iter()
                .any(|x| x.starts_with("| events"))
        );
    }

    #[test]
    fn run_text_makes_no_links_or_columns() {
        let mut m = measured();
        m.requests.errors.insert("x|[a](http://evil/)![i](j)".into(), 1);
        m.requests.attempted += 1;
        let mut r = crate::testing::test_result(m);
        r.thresholds = vec![throng_scenario::Verdict {
            threshold: "a`b\nc".into(),
            passed: true,
            observed: None,
            detail: "<b>x</b>".into(),
        }];
        let text = lines(&r).join("\n");
        assert!(text.contains("- ✅ `a'b c` — `<b>x</b>`"), "{text}");
        assert!(
            text.contains("| failed: `x\\|[a](http://evil/)![i](j)` | 1 |"),
            "{text}"
        );
        for line in text.lines().filter(|l| l.starts_with('|')) {
            assert_eq!(line.replace("\\|", "").matches('|').count(), 3, "{line}");
        }
    }
}
