use super::*;

fn ok(text: &str) -> Rule {
    Rule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn bad(text: &str, column: usize, says: &str) {
    match Rule::parse(text) {
        Ok(r) => panic!("{text} accepted as {r:?}"),
        Err(e) => {
            assert!(e.message.contains(says), "{text}: {e}");
            assert_eq!(e.column, column, "{text}: {e}");
            assert!(e.to_string().contains(&format!("'{text}'")), "{e}");
        }
    }
}

#[test]
fn the_issues_examples_parse() {
    let r = ok("p99 > +10%");
    assert_eq!(r.subject, Subject::Duration(None, Stat::Quantile(99.0)));
    assert_eq!((r.op, r.limit), (Op::Gt, Limit::Relative(10.0)));
    let r = ok("rps < -20%");
    assert_eq!(
        (r.subject, r.op, r.limit),
        (Subject::Throughput, Op::Lt, Limit::Relative(-20.0))
    );
    let r = ok("errors > +1pt");
    assert_eq!((r.subject, r.limit), (Subject::Errors, Limit::Points(1.0)));
    let r = ok("response{target:/login}: p(95) > +15%");
    assert_eq!(
        r.subject,
        Subject::Duration(Some("response".into()), Stat::Quantile(95.0))
    );
    assert_eq!(r.filter, Some(("target".into(), "/login".into())));
    assert_eq!(r.limit, Limit::Relative(15.0));
    let r = ok("p99 > +5ms");
    assert_eq!(r.limit, Limit::Micros(5000.0));
}

#[test]
fn threshold_style_forms_parse() {
    assert_eq!(
        ok("latency: p99.9 >= +250us").subject,
        Subject::Duration(Some("latency".into()), Stat::Quantile(99.9))
    );
    assert_eq!(ok("latency: p99.9 >= +250us").limit, Limit::Micros(250.0));
    assert_eq!(ok("connect: max > +1s").limit, Limit::Micros(1e6));
    assert_eq!(
        ok("wait: avg > +3%").subject,
        Subject::Duration(Some("wait".into()), Stat::Mean)
    );
    assert_eq!(ok("med > +3%").subject, Subject::Duration(None, Stat::Quantile(50.0)));
    let r = ok("errors{step:login}: rate > +50%");
    assert_eq!(
        (r.subject, r.filter),
        (Subject::Errors, Some(("step".into(), "login".into())))
    );
    assert_eq!(ok("throughput <= -50/s").limit, Limit::PerSecond(-50.0));
    assert_eq!(ok("rps{target:/a} < -10").filter, Some(("target".into(), "/a".into())));
    assert_eq!(ok("check_failed > +0.5pt").subject, Subject::CheckFailed);
    // A target name may hold what the grammar uses.
    let r = ok("response{target:/a?x=<1>}: p50 > +1%");
    assert_eq!(r.filter, Some(("target".into(), "/a?x=<1>".into())));
}

#[test]
fn mistakes_name_their_column() {
    bad("p99 +10%", 1, "no comparison");
    bad("p99 == +10%", 5, "no comparison");
    bad("p99 > 10%", 7, "needs its sign");
    bad("p99 > +10", 10, "needs a unit");
    bad("p99 > +10pt", 10, "percentage points");
    bad("errors > +1", 12, "pt or %");
    bad("rps < -20ms", 10, "not a unit of throughput");
    bad("p99 > +10% < 3", 12, "one comparison");
    bad("latency > +10%", 8, "needs a statistic");
    bad("latency: p(101) > +1%", 10, "not a statistic");
    bad("nope: p99 > +1%", 1, "not a figure");
    bad("p98x > +1%", 1, "not a figure");
    bad("response{host:x}: p99 > +1%", 10, "not a tag");
    bad("latency{target:/a}: p99 > +1%", 1, "not kept per tag");
    bad("rps: p99 < -1%", 6, "takes no statistic");
    bad("errors: p99 > +1pt", 9, "is a rate");
    bad(" > +1%", 2, "no figure");
    bad("p99 >", 6, "no change");
    bad("p99 > +x%", 8, "not a signed number");
    bad("p99{target:/a} > +1%", 1, "not kept per tag");
}

use std::time::{Duration, Instant};
use throng_metrics::{ErrorClass, Phase, Recorder, Reply};

/// An http run of one second per entry of `ms`: `ok` requests spread
/// over the seconds, each taking its second's `ms` (plus a few µs so
/// that no two runs tie), and `failed` refused ones; open loop at `rate`
/// when given.
fn run_of(ms: &[u64], ok: u64, failed: u64, jitter_us: u64, rate: Option<f64>) -> RunResult {
    let t0 = Instant::now();
    let mut rec = Recorder::new(t0);
    let secs = ms.len() as u64;
    for i in 0..ok + failed {
        let ms_at = i * secs * 1000 / (ok + failed);
        let at = t0 + Duration::from_millis(ms_at);
        rec.request_started();
        if i < ok {
            let d = Duration::from_micros(ms[(ms_at / 1000) as usize] * 1000 + jitter_us + i % 7);
            rec.phase(at, Phase::Latency, d);
            let reply = Reply {
                status: 200,
                header_bytes: 10,
                body_bytes: 0,
            };
            rec.request_ok(at, reply, 10);
        } else {
            rec.request_failed(at, ErrorClass::Refused, 0);
        }
    }
    let mut r = crate::testing::test_result(rec.finish(t0 + Duration::from_secs(secs)));
    r.duration_s = secs as f64;
    if let Some(rate) = rate {
        r.plan = throng_result::Plan::Http(
            throng_plan::HttpPlan::from_args(throng_plan::HttpArgs {
                url: "http://127.0.0.1:8080/".to_string(),
                rate: Some(rate),
                cores: 1,
                ..throng_plan::HttpArgs::default()
            })
            .unwrap(),
        );
    }
    r
}

/// Three seconds of `ms` each.
fn run(ms: u64, ok: u64, failed: u64, jitter_us: u64, rate: Option<f64>) -> RunResult {
    run_of(&[ms; 3], ok, failed, jitter_us, rate)
}

fn side(label: &str, runs: Vec<RunResult>) -> Side {
    Side {
        label: label.to_string(),
        sources: vec![format!("{label}.json")],
        runs,
    }
}

fn comparison(a: Vec<RunResult>, b: Vec<RunResult>) -> Comparison {
    Comparison::new(side("base", a), side("new", b), crate::compare::Options::default()).unwrap()
}

fn judged(c: &Comparison, rule: &str) -> Judged {
    evaluate(c, &[ok(rule)], false).unwrap().rules.remove(0)
}

#[test]
fn a_significant_regression_past_the_limit_fails_and_a_lenient_rule_holds() {
    let c = comparison(
        (0..5).map(|i| run(10, 300, 0, i * 13, None)).collect(),
        (0..5).map(|i| run(20, 300, 0, i * 11, None)).collect(),
    );
    assert_eq!(c.basis, Basis::Runs);
    let r = judged(&c, "p99 > +10%");
    assert_eq!((r.status, r.figure.as_str()), (Status::Failed, "latency p99"), "{r:?}");
    assert!((90.0..110.0).contains(&r.change), "{}", r.change);
    assert_eq!(r.test.verdict, Verdict::Significant);
    // The same change within a lenient limit, or the other way: held.
    assert_eq!(judged(&c, "p99 > +150%").status, Status::Held);
    assert_eq!(judged(&c, "p99 < -10%").status, Status::Held);
    assert_eq!(judged(&c, "p99 > +5ms").status, Status::Failed);
    assert_eq!(judged(&c, "p99 > +15ms").status, Status::Held);
    // A statistic compare has no test of its own gets one.
    let p90 = judged(&c, "latency: p(90) > +10%");
    assert_eq!((p90.status, p90.test.basis), (Status::Failed, Some(Basis::Runs)));
    assert_eq!(p90.test.p_value.map(|p| p < 0.05), Some(true));
    let g = evaluate(&c, &[ok("p99 > +10%"), ok("rps < -20%")], false).unwrap();
    assert!(g.failed());
    assert!(
        g.headline().starts_with("GATE FAILED: 1 of 2 rules failed"),
        "{}",
        g.headline()
    );
    let mut text = Vec::new();
    write_text(&g, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.lines().nth(1).unwrap().trim_start().starts_with("FAILED"),
        "{text}"
    );
    // Every view puts the verdict first.
    let mut c = c;
    c.judge(&[ok("p99 > +10%"), ok("rps < -20%")], false).unwrap();
    let render = |f: fn(&Comparison, &mut dyn std::io::Write) -> std::io::Result<()>| {
        let mut out = Vec::new();
        f(&c, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    assert!(render(crate::compare::write_text).starts_with("GATE FAILED"));
    let md = render(crate::compare::write_markdown);
    assert!(md.lines().nth(2).unwrap().starts_with("**GATE FAILED**"), "{md}");
    let summary = render(crate::compare::write_summary);
    assert!(
        summary.starts_with("### throng compare: GATE FAILED (base vs new)"),
        "{summary}"
    );
    assert!(
        summary.contains("| **FAILED** | `p99 > +10%` | latency p99 |"),
        "{summary}"
    );
    let json = render(crate::compare::write_json);
    assert!(json.starts_with("{\n  \"schema\": \"throng.compare/v2\",\n  \"gate\": {\n    \"verdict\": \"failed\""));
    let junit = render(crate::junit::write_gate);
    assert!(junit.contains(r#"tests="2" failures="1""#), "{junit}");
    assert_eq!(junit.matches("<failure").count(), 1, "{junit}");
}

#[test]
fn a_change_past_the_limit_without_evidence_holds_and_says_so() {
    // One run a side whose seconds overlap: B's worst second is past
    // A's by more than 10%, but its others are not.
    let c = comparison(
        vec![run_of(&[10, 10, 11], 300, 0, 0, None)],
        vec![run_of(&[12, 10, 13], 300, 0, 0, None)],
    );
    assert_eq!(c.basis, Basis::Seconds);
    let g = evaluate(&c, &[ok("p99 > +10%")], false).unwrap();
    let r = &g.rules[0];
    assert!(r.exceeded, "{r:?}");
    assert_eq!(r.status, Status::NotSignificant, "{r:?} {:?}", c.tests);
    assert!(!g.failed());
    assert!(
        Gate::line(r).contains("exceeds the limit but not significant"),
        "{}",
        Gate::line(r)
    );
    assert!(g.headline().starts_with("GATE PASSED"), "{}", g.headline());
}

#[test]
fn error_rates_are_tested_as_two_proportions() {
    let c = comparison(vec![run(10, 1000, 0, 0, None)], vec![run(10, 900, 100, 0, None)]);
    let r = judged(&c, "errors > +1pt");
    assert_eq!((r.status, r.test.method), (Status::Failed, "two_proportion"), "{r:?}");
    assert!((r.change - 10.0).abs() < 1e-9, "{}", r.change);
    assert_eq!(judged(&c, "errors > +20pt").status, Status::Held);
    // From 0%: any relative rise is infinite, and the JSON says null.
    let rel = judged(&c, "errors > +50%");
    assert!(rel.change.is_infinite() && rel.status == Status::Failed, "{rel:?}");
    assert!(serde_json::to_string(&rel).unwrap().contains("\"change_pct\":null"));
    // 1 of 100 against 3 of 100: past +1pt, but noise.
    let c = comparison(vec![run(10, 99, 1, 0, None)], vec![run(10, 97, 3, 0, None)]);
    assert_eq!(judged(&c, "errors > +1pt").status, Status::NotSignificant);
}

#[test]
fn a_figure_a_side_lacks_is_an_error_not_a_pass() {
    let c = comparison(vec![run(10, 300, 0, 0, None)], vec![run(10, 300, 0, 0, None)]);
    for (rule, says) in [
        (
            "response{target:/x}: p(95) > +1%",
            "side A (base) has no target '/x'; it keeps no target: figures",
        ),
        (
            "tls: p99 > +1%",
            "side A (base) has no tls samples; its phases: latency",
        ),
        ("check_failed > +1pt", "no per-request checks"),
        ("rps{step:login} < -1%", "has no step 'login'"),
    ] {
        let e = evaluate(&c, &[ok(rule)], false).unwrap_err();
        assert!(e.to_string().contains(says), "{rule}: {e}");
    }
    // Nothing ended on a side: no error rate to judge.
    let c = comparison(vec![run(10, 300, 0, 0, None)], vec![run(10, 0, 0, 0, None)]);
    let e = evaluate(&c, &[ok("errors > +1pt")], false).unwrap_err();
    assert!(e.to_string().contains("side B ended no requests"), "{e}");
}

#[test]
fn different_rates_or_commands_are_mixed_plans() {
    let same = comparison(
        vec![run(10, 30, 0, 0, Some(100.0))],
        vec![run(10, 30, 0, 0, Some(100.0))],
    );
    assert!(same.mixed.is_empty(), "{:?}", same.mixed);
    let c = comparison(
        vec![run(10, 30, 0, 0, Some(100.0))],
        vec![run(10, 30, 0, 0, Some(200.0))],
    );
    assert_eq!(c.mixed, vec!["rate 100/s vs 200/s (base vs new)".to_string()]);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("different plans: rate 100/s vs 200/s"))
    );
    let c = comparison(vec![run(10, 30, 0, 0, Some(100.0))], vec![run(10, 30, 0, 0, None)]);
    assert!(
        c.mixed.iter().any(|m| m.contains("open loop vs closed loop")),
        "{:?}",
        c.mixed
    );
    let g = evaluate(&c, &[ok("p99 > +10%")], true).unwrap();
    assert!(g.allow_mixed);
}

/// A run with per-target figures: `/a` answers in `ms_a` with
/// `unexpected` of its 200 requests a status it does not expect, `/b`
/// always in 1 ms.
fn targets_run(ms_a: u64, unexpected: u64, jitter_us: u64) -> RunResult {
    let t0 = Instant::now();
    let mut rec = throng_metrics::ScenarioRecorder::new(t0);
    let (all, a, b) = (rec.tag(""), rec.tag("target:/a"), rec.tag("target:/b"));
    for i in 0..200u64 {
        let at = t0 + Duration::from_millis(i * 10);
        let d = Duration::from_micros(ms_a * 1000 + jitter_us + i % 5);
        let expected = i >= unexpected;
        rec.request(at, &[all, a], Some((d, expected)), !expected);
        rec.request(at, &[all, b], Some((Duration::from_millis(1), true)), false);
    }
    let mut r = run(1, 10, 0, 0, None);
    r.duration_s = 2.0;
    r.measurements.scenario = Some(rec.finish(t0 + Duration::from_secs(2)));
    r
}

#[test]
fn a_targets_figures_are_judged_on_their_own() {
    let c = comparison(
        (0..5).map(|i| targets_run(10, 0, i * 3)).collect(),
        (0..5).map(|i| targets_run(15, 40, i * 5)).collect(),
    );
    let r = judged(&c, "response{target:/a}: p(95) > +15%");
    assert_eq!(
        (r.status, r.figure.as_str()),
        (Status::Failed, "response{target:/a} p95"),
        "{r:?}"
    );
    assert_eq!(r.test.basis, Some(Basis::Runs));
    // /b did not change: held, whatever the limit.
    assert_eq!(judged(&c, "response{target:/b}: p(95) > +0%").status, Status::Held);
    // 20% of /a's requests got an unexpected status on B: 20 points.
    let r = judged(&c, "check_failed{target:/a} > +5pt");
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert!((r.change - 20.0).abs() < 1e-9, "{}", r.change);
    let r = judged(&c, "errors{target:/b} > +0pt");
    assert_eq!((r.status, r.change), (Status::Held, 0.0));
    // /a's ok requests per second fell by a fifth.
    let r = judged(&c, "rps{target:/a} < -10%");
    assert_eq!(
        (r.status, r.figure.as_str()),
        (Status::Failed, "rps{target:/a}"),
        "{r:?}"
    );
    assert_eq!(judged(&c, "rps{target:/a} < -30%").status, Status::Held);
    let e = evaluate(&c, &[ok("response{target:/c}: p50 > +1%")], false).unwrap_err();
    assert!(e.to_string().contains("has no target '/c'; its targets: /a, /b"), "{e}");
}
