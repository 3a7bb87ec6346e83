use std::collections::BTreeMap;

use super::*;
use throng_metrics::ScenarioRecorder;

fn th(key: &str, expr: &str) -> Threshold {
    Threshold::parse(key, expr, false, Duration::ZERO).unwrap()
}

#[test]
fn parses_what_k6_users_write() {
    let t = th("response{step:login}", "p(95) < 500ms over 30s");
    assert_eq!(t.tag, Some(("step".into(), "login".into())));
    assert_eq!(t.agg, Agg::P(95.0));
    assert_eq!(t.value, 500_000.0);
    assert_eq!(t.window_s, Some(30));
    let r = th("response", "rate(check_failed) < 0.01");
    assert_eq!((r.metric.as_str(), r.agg, r.value), ("check_failed", Agg::Rate, 0.01));
    assert_eq!(th("dropped_iterations", "count == 0").op, Op::Eq);
    assert_eq!(th("response", "avg < 200ms").value, 200_000.0);
    for (k, e, why) in [
        ("response", "p(95) 500ms", "no comparison"),
        ("nope", "avg < 1s", "not a metric"),
        ("response", "rate < 0.1", "is a duration"),
        ("check_failed", "p(95) < 1", "is a rate"),
        ("response{host:x}", "avg < 1s", "not a tag"),
        ("response", "p(95) < 1s over 1.5s", "whole seconds"),
        ("iteration", "avg < 1s over 10s", "no per-second"),
    ] {
        let e = Threshold::parse(k, e, false, Duration::ZERO).unwrap_err().to_string();
        assert!(e.contains(why), "{k} {e}");
    }
}

fn rejects(key: &str, expr: &str, why: &str) {
    match Threshold::parse(key, expr, false, Duration::ZERO) {
        Err(e) => assert!(e.to_string().contains(why), "{key}: {expr}: {e}"),
        Ok(t) => panic!("{key}: {expr} accepted as {t:?}"),
    }
}

#[test]
fn durations_need_a_unit() {
    for (key, expr) in [
        ("response", "avg < 200"),
        ("response", "p(95) < 0.5"),
        ("response", "p(95) < 500ms over 30"),
    ] {
        rejects(key, expr, "durations need a unit, e.g. 500ms, 30s, 2m");
    }
    // Rates and counts are numbers.
    assert_eq!(th("errors", "count < 5").value, 5.0);
    assert_eq!(th("errors", "rate < 0.5").value, 0.5);
}

#[test]
fn the_delay_keeps_its_milliseconds() {
    let t = Threshold::parse("errors", "rate < 1%", true, Duration::from_millis(1500)).unwrap();
    assert_eq!(t.delay_ms, 1500);
}

#[test]
fn a_metric_takes_only_the_tags_it_is_kept_under() {
    for (key, expr) in [
        ("response{step:a}", "p(95) < 1s"),
        ("response{group:a}", "p(95) < 1s"),
        ("response{scenario:a}", "p(95) < 1s"),
        ("response{stage:a#1}", "p(95) < 1s"),
        ("errors{step:a}", "rate < 1%"),
        ("check_failed{stage:a#2}", "rate < 1%"),
        ("requests{group:a}", "count > 1"),
        ("checks{check:a}", "rate > 0.9"),
        ("group_duration{group:a}", "p(95) < 1s"),
    ] {
        Threshold::parse(key, expr, false, Duration::ZERO).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    for (key, expr, why) in [
        (
            "response{check:a}",
            "p(95) < 1s",
            "response is kept per step, group, scenario or stage, not per check",
        ),
        ("errors{check:a}", "rate < 1%", "not per check"),
        ("checks{step:a}", "rate > 0.9", "checks is kept per check, not per step"),
        (
            "group_duration{step:a}",
            "p(95) < 1s",
            "group_duration is kept per group, not per step",
        ),
        ("group_duration{scenario:a}", "p(95) < 1s", "not per scenario"),
        ("iteration{group:a}", "p(95) < 1s", "iteration is not kept per tag"),
        ("iterations{scenario:a}", "count > 1", "iterations is not kept per tag"),
        ("dropped_iterations{scenario:a}", "count == 0", "is not kept per tag"),
        ("schedule_lag{scenario:a}", "p(95) < 1s", "is not kept per tag"),
        ("latency{step:a}", "p(95) < 1s", "is not kept per tag"),
    ] {
        rejects(key, expr, why);
    }
}

#[test]
fn a_line_splits_after_the_tag_filter() {
    let t = Threshold::parse_line("response{target:http://h:8080/a}: p(95) < 50ms").unwrap();
    assert_eq!(t.tag, Some(("target".to_string(), "http://h:8080/a".to_string())));
    assert_eq!(
        (t.metric.as_str(), t.agg, t.op, t.value),
        ("response", Agg::P(95.0), Op::Lt, 50_000.0)
    );
    let t = Threshold::parse_line("errors: rate < 1%").unwrap();
    assert_eq!((t.metric.as_str(), t.tag.is_none()), ("errors", true));
    assert!(Threshold::parse_line("errors{target:/a?b=1}: rate < 1%").is_ok());
    let e = Threshold::parse("response{target:/a}", "p(95) < 1s", false, Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(e.contains("target: tags are throng http's"), "{e}");
    let e = Threshold::parse_line("errors rate < 1%").unwrap_err();
    assert!(e.contains("has no ':'"), "{e}");
}

#[test]
fn the_metric_inside_keeps_the_keys_tag() {
    let t = th("response{step:login}", "rate(check_failed) < 0.01");
    assert_eq!(t.metric, "check_failed");
    assert_eq!(t.tag, Some(("step".into(), "login".into())));
    let t = th("response", "rate(check_failed{group:g}) < 0.01");
    assert_eq!(t.tag, Some(("group".into(), "g".into())));
    let t = th("response{step:a}", "count(errors{step:a}) < 5");
    assert_eq!(
        (t.metric.as_str(), t.tag),
        ("errors", Some(("step".into(), "a".into())))
    );
    rejects(
        "response{step:a}",
        "rate(errors{step:b}) < 0.01",
        "the filter {step:b} inside conflicts with the key's {step:a}",
    );
    // The key's tag must suit the metric inside.
    rejects(
        "checks{check:c}",
        "rate(check_failed) < 0.01",
        "check_failed is kept per step",
    );
    rejects(
        "group_duration{group:g}",
        "count(dropped_iterations) == 0",
        "is not kept per tag",
    );
    // The key is a metric too, even when the expression names another.
    rejects(
        "http_req_failed",
        "rate(check_failed) < 0.01",
        "'http_req_failed' is not a metric",
    );
}

#[test]
fn tagged_thresholds_find_their_samples() {
    let t0 = std::time::Instant::now();
    let mut r = ScenarioRecorder::new(t0);
    let (all, login, home) = (r.tag(""), r.tag("step:login"), r.tag("step:home"));
    let ok = r.check_index("ok");
    let g = r.group_index("g");
    for i in 0..10u64 {
        let at = t0 + Duration::from_millis(i * 10);
        // Every login has an unexpected status; home never does.
        r.request(at, &[all, login], Some((Duration::from_millis(5), false)), false);
        r.request(at, &[all, home], Some((Duration::from_millis(5), true)), false);
        r.check(ok, i < 8);
    }
    r.group(g, Duration::from_millis(30));
    let m = Measurements {
        scenario: Some(r.finish(t0 + Duration::from_secs(1))),
        ..Measurements::default()
    };
    let observed = |key: &str, expr: &str| th(key, expr).evaluate(&m).observed;
    assert_eq!(observed("response{step:login}", "rate(check_failed) < 0.01"), Some(1.0));
    assert_eq!(observed("response{step:home}", "rate(check_failed) < 0.01"), Some(0.0));
    assert_eq!(observed("check_failed", "rate < 0.01"), Some(0.5));
    assert_eq!(observed("requests{step:login}", "count > 1"), Some(10.0));
    assert_eq!(observed("checks{check:ok}", "rate > 0.9"), Some(0.8));
    assert_eq!(observed("checks", "count(checks{check:ok}) > 1"), Some(8.0));
    let slowest = observed("group_duration{group:g}", "max < 1s").unwrap_or_default();
    assert!((30_000.0..30_100.0).contains(&slowest), "{slowest} µs");
}

#[test]
fn a_sliding_window_catches_one_bad_window() {
    let t0 = std::time::Instant::now();
    let mut r = ScenarioRecorder::new(t0);
    let all = r.tag("");
    // 60 s of 10 ms responses, except seconds 30–34 at 900 ms.
    for s in 0..60u64 {
        for k in 0..10u64 {
            let d = if (30..35).contains(&s) { 900 } else { 10 };
            r.request(
                t0 + Duration::from_millis(s * 1000 + k * 50),
                &[all],
                Some((Duration::from_millis(d), true)),
                false,
            );
        }
    }
    let stats = r.finish(t0 + Duration::from_secs(60));
    let m = Measurements {
        scenario: Some(stats),
        series: (0..60)
            .map(|s| throng_metrics::SeriesPoint {
                second: s,
                ..Default::default()
            })
            .collect(),
        ..Measurements::default()
    };
    // Over the whole run p(90) is 10 ms: passes.
    assert!(th("response", "p(90) < 500ms").evaluate(&m).passed);
    // A 5 s window is all slow: fails, and says where.
    let v = th("response", "p(90) < 500ms over 5s").evaluate(&m);
    assert!(!v.passed, "{v:?}");
    assert!(v.detail.contains("window from 3"), "{}", v.detail);
    let _ = TagStats::default();
}

/// A `throng http` run of one target: 200 requests over two seconds,
/// every other one a 503 (check_failed), 40 more scheduled and
/// dropped; every phase timed; 10 connection attempts, 2 refused. No scenario figures, as the engine
/// leaves them for one target.
fn one_target_run() -> Measurements {
    let mut m = Measurements::default();
    m.requests.attempted = 200;
    m.requests.ok = 100;
    m.requests.errors.insert("check_failed".into(), 100);
    m.status.insert(200, 100);
    m.status.insert(503, 100);
    m.dropped = 40;
    let mut h = Hist::new();
    h.record_n_us(2_000, 100);
    let mut per_second = BTreeMap::new();
    for phase in TRENDS.iter().filter(|p| !SCENARIO_ONLY.contains(p)) {
        m.phases.insert((*phase).to_string(), h.clone());
        per_second.insert((*phase).to_string(), throng_metrics::EncodedHist::new(&h));
    }
    m.series = (0..2)
        .map(|second| throng_metrics::SeriesPoint {
            second,
            requests: 100,
            ok: 50,
            errors: 50,
            error_classes: BTreeMap::from([("check_failed".to_string(), 50)]),
            dropped: 20,
            phases: per_second.clone(),
            connections_opened: 4,
            connection_errors: 1,
            connection_error_classes: BTreeMap::from([("refused".to_string(), 1)]),
            ..Default::default()
        })
        .collect();
    m.connections.attempted = 10;
    m.connections.ok = 8;
    m.connections.errors.insert("refused".into(), 2);
    m
}

/// The same requests as a run of two targets (`target:/a`, `target:/b`)
/// or a scenario's steps records them: per tag, and under the
/// all-requests tag.
fn tagged_run(tags: [&str; 2], scenario: bool) -> Measurements {
    let mut m = one_target_run();
    let t0 = std::time::Instant::now();
    let mut r = ScenarioRecorder::new(t0);
    let (all, a, b) = (r.tag(""), r.tag(tags[0]), r.tag(tags[1]));
    let ok = r.check_index("ok");
    let g = r.group_index("g");
    for i in 0..200u64 {
        let at = t0 + Duration::from_millis(i * 10);
        let tag = if i % 2 == 0 { a } else { b };
        r.request(
            at,
            &[all, tag],
            Some((Duration::from_millis(2), i % 2 == 0)),
            i % 2 == 1,
        );
        if scenario {
            r.check(ok, i % 2 == 0);
            r.iteration(at, Duration::from_millis(3));
            r.group(g, Duration::from_millis(3));
        }
    }
    if scenario {
        r.dropped_iteration(t0);
        m.dropped = 0;
    }
    m.scenario = Some(r.finish(t0 + Duration::from_secs(2)));
    m
}

/// An expression for each metric, true on the runs above.
fn expression(metric: &str) -> &'static str {
    match kind(metric) {
        Some(Kind::Trend) => "p(95) < 10s",
        Some(Kind::Rate) => "rate <= 100%",
        _ => "count >= 0",
    }
}

#[test]
fn every_metric_is_judged_on_the_samples_each_kind_of_run_keeps() {
    let http_one = one_target_run();
    let http_targets = tagged_run(["target:/a", "target:/b"], false);
    let scenario = tagged_run(["step:a", "step:b"], true);
    let metrics: Vec<&str> = TRENDS.iter().chain(&RATES).chain(&COUNTERS).copied().collect();
    let mut judged = 0;
    for metric in &metrics {
        for window in ["", " over 1s"] {
            let expr = format!("{}{window}", expression(metric));
            let http = Threshold::parse_line(&format!("{metric}: {expr}"));
            let scen = Threshold::parse(metric, &expr, false, Duration::ZERO);
            // Each metric is one kind of run's, or both's.
            assert!(
                http.is_ok() || scen.is_ok() || !window.is_empty(),
                "{metric}: {http:?} {scen:?}"
            );
            let mut runs: Vec<(&str, &Threshold, &Measurements)> = Vec::new();
            if let Ok(t) = &http {
                runs.push(("http, one target", t, &http_one));
                runs.push(("http, two targets", t, &http_targets));
            }
            if let Ok(t) = &scen {
                runs.push(("scenario", t, &scenario));
            }
            for (run, t, m) in runs {
                let v = t.evaluate(m);
                assert!(v.passed && v.observed.is_some(), "{run}: {}: {v:?}", t.text);
                judged += 1;
            }
        }
    }
    // Every metric was judged on a run that keeps it.
    assert!(judged >= 2 * metrics.len(), "{judged}");
    // Per tag, too.
    for (key, m) in [("errors{target:/b}", &http_targets), ("errors{step:b}", &scenario)] {
        let t = if key.contains("target") {
            Threshold::parse_line(&format!("{key}: rate < 1%")).unwrap()
        } else {
            th(key, "rate < 1%")
        };
        let v = t.evaluate(m);
        assert_eq!((v.passed, v.observed), (false, Some(1.0)), "{key}");
    }
}

#[test]
fn a_one_target_run_is_judged_on_its_own_counts() {
    let m = one_target_run();
    let judge = |line: &str| Threshold::parse_line(line).unwrap().evaluate(&m);
    for (line, passed, observed) in [
        ("errors: rate < 1%", false, 0.5),
        ("errors: count == 0", false, 100.0),
        ("check_failed: rate < 1%", false, 0.5),
        ("requests: count >= 1000", false, 200.0),
        ("requests: count == 200", true, 200.0),
        ("errors: rate < 1% over 1s", false, 0.5),
        ("requests: count >= 1000 over 1s", false, 100.0),
        ("dropped: rate < 1%", false, 40.0 / 240.0),
        ("dropped: count == 40", true, 40.0),
        ("dropped: rate < 1% over 1s", false, 20.0 / 120.0),
        ("response: p(95) < 1ms", false, 2_000.0),
    ] {
        let v = judge(line);
        assert_eq!(v.passed, passed, "{line}: {v:?}");
        let seen = v.observed.unwrap_or(f64::NAN);
        assert!((seen - observed).abs() < 1e-6, "{line}: {v:?}");
    }
    // Requests cut off by the run's end say nothing about the target.
    let mut m = one_target_run();
    m.requests.attempted += 50;
    m.requests.errors.insert("interrupted".into(), 50);
    let v = Threshold::parse_line("errors: rate < 1%").unwrap().evaluate(&m);
    assert_eq!(v.observed, Some(0.5));
}

#[test]
fn no_samples_fails_unless_the_threshold_allows_it() {
    let nothing = Measurements::default();
    for line in [
        "errors: rate < 1%",
        "errors: count == 0",
        "check_failed: rate < 1%",
        "response: p(95) < 1s",
        "tls: max < 1s",
        "dropped: rate < 1%",
        "errors: rate < 1% over 10s",
        "response: p(95) < 1s over 1s",
    ] {
        let v = Threshold::parse_line(line).unwrap().evaluate(&nothing);
        assert!(!v.passed, "{line}: {v:?}");
        assert!(v.detail.starts_with("no samples: "), "{line}: {}", v.detail);
        assert!(v.detail.contains("'or no samples'"), "{line}: {}", v.detail);
        let allowed = Threshold::parse_line(&format!("{line} or no samples")).unwrap();
        assert!(allowed.pass_without_samples);
        assert_eq!(allowed.text, format!("{line} or no samples"));
        let v = allowed.evaluate(&nothing);
        assert!(v.passed, "{line}: {v:?}");
        assert!(v.detail.starts_with("no samples ("), "{}", v.detail);
        // Allowed or not, samples are judged as ever.
        let v = allowed.evaluate(&one_target_run());
        assert!(v.observed.is_some(), "{line}: {v:?}");
    }
    // A scenario's tag with no requests, a check that never ran.
    let m = tagged_run(["step:a", "step:b"], true);
    for (key, expr, why) in [
        ("checks{check:never}", "rate > 0.9", "the check 'never' never ran"),
        ("group_duration{group:h}", "p(95) < 1s", "the group 'h' never completed"),
        (
            "response{step:c}",
            "p(95) < 1s",
            "no response carrying step:c was timed",
        ),
    ] {
        let v = th(key, expr).evaluate(&m);
        assert!(!v.passed && v.detail.contains(why), "{key}: {v:?}");
        let v = th(key, &format!("{expr} {OR_NO_SAMPLES}")).evaluate(&m);
        assert!(v.passed, "{key}: {v:?}");
    }
    // The words are a suffix, not part of a bound.
    rejects("errors", "rate < 1%or no samples", "not a fraction");
    assert!(th("response", "p(95) < 1s over 5s or no samples").window_s == Some(5));
}

#[test]
fn each_kind_of_run_takes_only_its_own_metrics_and_filters() {
    for (line, why) in [
        ("iterations: count > 1", "a scenario's metric"),
        ("checks: rate > 0.9", "a scenario's metric"),
        ("group_duration: p(95) < 1s", "a scenario's metric"),
        ("errors{step:login}: rate < 1%", "step: filters are a scenario's"),
        ("latency{target:/a}: p(95) < 1s", "latency is not kept per target"),
        ("dropped{target:/a}: rate < 1%", "dropped is not kept per target"),
        // No figures are kept per status: such a filter would judge nothing.
        ("errors{status:503}: count == 0", "'status' is not a tag"),
    ] {
        match Threshold::parse_line(line) {
            Err(e) => assert!(e.contains(why), "{line}: {e}"),
            Ok(t) => panic!("{line} accepted as {t:?}"),
        }
    }
    rejects("dropped", "rate < 1%", "count dropped_iterations");
    rejects("response", "rate(dropped) < 1%", "count dropped_iterations");
}

#[test]
fn an_http_threshold_must_name_what_the_plan_has() {
    let names = vec!["/a".to_string(), "/b".to_string()];
    let check = |line: &str, names: &[String], open: bool| {
        Threshold::parse_line(line)
            .unwrap()
            .check_http(names, open)
            .map_err(|e| e.to_string())
    };
    assert!(check("errors{target:/a}: rate < 1%", &names, false).is_ok());
    let e = check("errors{target:/c}: rate < 1%", &names, false).unwrap_err();
    assert!(
        e.contains("no target is named '/c'; the targets are '/a' and '/b'"),
        "{e}"
    );
    assert!(e.contains("errors{target:/c}: rate < 1%"), "{e}");
    let e = check("errors{target:/a}: rate < 1%", &[], false).unwrap_err();
    assert!(e.contains("this run has one target"), "{e}");
    let e = check("dropped: rate < 1%", &[], false).unwrap_err();
    assert!(e.contains("only in an open loop"), "{e}");
    let e = check("schedule_lag: p(99) < 1s", &[], false).unwrap_err();
    assert!(e.contains("only in an open loop"), "{e}");
    assert!(check("dropped: rate < 1%", &[], true).is_ok());
    let many: Vec<String> = (0..12).map(|i| format!("/t{i}")).collect();
    let e = check("errors{target:/x}: rate < 1%", &many, false).unwrap_err();
    assert!(e.contains("'/t9' and 2 more"), "{e}");
}

/// The typed errors say what the strings said before them, byte for byte,
/// on one line.
#[test]
fn threshold_errors_keep_their_text() {
    let said = |k: &str, e: &str| Threshold::parse(k, e, false, Duration::ZERO).unwrap_err().to_string();
    assert_eq!(
        said("resp", "p(95) < 1s"),
        "'resp' is not a metric; trends: response, latency, wait, connect, tls, send, receive, schedule_lag, \
         iteration, group_duration, delivery, puback, pubrec, pubcomp, first_event, event_gap, stream, ttft, itl, \
         connection, handshake, reconnect, pong, upgrade, subscribe, first_message, last_message, message_gap; \
         rates: check_failed, errors, checks, dropped, connection_errors; counters: requests, iterations, \
         dropped_iterations, connections"
    );
    assert_eq!(
        said("response", "p(95) < 200"),
        "'p(95) < 200': durations need a unit, e.g. 500ms, 30s, 2m ('200' has none)"
    );
    assert_eq!(
        said("response", "p(95) < 1x"),
        "'p(95) < 1x': invalid duration '1x': unknown unit 'x'; expected a number with a unit (us, ms, s, m or h), \
         e.g. 500ms, 30s, 2m, 1m30s"
    );
    assert_eq!(said("errors", "rate < 2"), "'rate < 2': '2': a rate runs from 0 to 1");
    assert_eq!(
        said("response{step:a}", "rate(errors{step:b}) < 1%"),
        "'response{step:a}: rate(errors{step:b}) < 1%': the filter {step:b} inside conflicts with the key's \
         {step:a}; give one"
    );
    assert_eq!(
        said("checks{step:a}", "rate > 0.9"),
        "'checks{step:a}: rate > 0.9': checks is kept per check, not per step, so checks{step:a} would never have \
         samples"
    );
    assert_eq!(
        said("response", "mean\n < 1s"),
        "'mean\\n < 1s': 'mean' is not p(N), avg, med, min, max, rate or count"
    );
    assert_eq!(
        Threshold::parse_line("errors\u{1b} rate < 1%").unwrap_err(),
        "'errors\\u{1b} rate < 1%' has no ':' between the metric and the criterion; write e.g. 'response: p(95) < \
         500ms'"
    );
    assert_eq!(
        Threshold::read_line("errors rate < 1%").unwrap_err().fault,
        ThresholdFault::NoColon {
            line: "errors rate < 1%".into()
        }
    );
}

#[test]
fn every_recorded_phase_can_be_judged() {
    // A phase the engine records but thresholds do not know would be
    // refused as an unknown metric: the two lists may not drift apart.
    for phase in throng_metrics::Phase::ALL {
        assert!(
            TRENDS.contains(&phase.name()),
            "{} is not a threshold trend",
            phase.name()
        );
    }
}

#[test]
fn a_storm_refuses_what_it_never_records() {
    let closed = StormShape {
        rate: false,
        requests: false,
    };
    for text in [
        "dropped: rate < 1%",
        "schedule_lag: p(99) < 1ms",
        "response{target:/a}: p(95) < 1s",
        "errors: rate < 1%",
    ] {
        let t = Threshold::read_line(text).unwrap();
        let e = t.check_storm(closed).unwrap_err().to_string();
        assert!(e.contains("connection storm") && e.contains(text), "{e}");
    }
    for text in [
        "handshake: p(99) < 200ms",
        "pong: max < 1s",
        "connection_errors: rate < 1%",
        "connections: count > 9",
    ] {
        Threshold::read_line(text).unwrap().check_storm(closed).unwrap();
    }
    let open = StormShape {
        rate: true,
        requests: true,
    };
    for text in ["schedule_lag: p(99) < 1ms", "errors: rate < 1%"] {
        Threshold::read_line(text).unwrap().check_storm(open).unwrap();
    }
}

#[test]
fn connection_errors_are_the_failed_share_of_attempts_that_ended() {
    let mut m = Measurements::default();
    m.connections.attempted = 10;
    m.connections.ok = 6;
    m.connections.errors.insert("refused".into(), 3);
    m.connections.errors.insert("interrupted".into(), 1);
    m.series = vec![throng_metrics::SeriesPoint {
        second: 0,
        connections_opened: 6,
        connection_errors: 4,
        connection_error_classes: BTreeMap::from([("refused".to_string(), 3), ("interrupted".to_string(), 1)]),
        ..Default::default()
    }];
    let judge = |text: &str| Threshold::read_line(text).unwrap().evaluate(&m);
    let v = judge("connection_errors: rate < 30%");
    assert!(!v.passed && (v.observed.unwrap() - 3.0 / 9.0).abs() < 1e-9, "{v:?}");
    assert!(judge("connection_errors: rate < 34%").passed);
    assert_eq!(judge("connections: count == 9").observed, Some(9.0));
    assert!(judge("connections: count == 9").passed);
    let w = judge("connection_errors: rate < 30% over 1s");
    assert!(!w.passed && (w.observed.unwrap() - 3.0 / 9.0).abs() < 1e-9, "{w:?}");
}
