use throng_metrics::Measurements;
use throng_plan::{HttpPlan, StormPlan};
use throng_scenario::ScenarioPlan;

use super::*;

#[test]
fn generators_without_a_clock_still_load_and_clocks_merge() {
    let old = r#"{"cpu_user_s":1.0,"cpu_system_s":0.5,"peak_rss_bytes":10,"threads":1}"#;
    let g: Generator = serde_json::from_str(old).unwrap();
    assert_eq!(g.timestamps, None);
    assert!(!serde_json::to_string(&g).unwrap().contains("timestamps"));
    let t = |receive: &str, kernel, user| Timestamps {
        receive: receive.to_string(),
        kernel,
        user,
    };
    let k = t("kernel", 10, 1);
    assert_eq!(Timestamps::merged(Some(&k), None), Some(k.clone()));
    assert_eq!(Timestamps::merged(Some(&k), Some(&k)), Some(t("kernel", 20, 2)));
    assert_eq!(
        Timestamps::merged(Some(&k), Some(&t("user", 0, 5))),
        Some(t("mixed", 10, 6))
    );
}

#[test]
fn reader_tells_sets_and_strangers_apart() {
    let empty = format!(r#"{{"schema":"{SET_SCHEMA}","runs":[]}}"#);
    assert!(matches!(
        runs_from_reader(empty.as_bytes()),
        Err(ResultError::Incompatible(_))
    ));
    assert!(matches!(
        runs_from_reader(&br#"{"schema":"k6/summary"}"#[..]),
        Err(ResultError::Schema { found }) if found == "k6/summary"
    ));
    assert!(matches!(runs_from_reader(&b"[1, 2]"[..]), Err(ResultError::NotAResult)));
    assert!(matches!(runs_from_reader(&b"not json"[..]), Err(ResultError::Parse(_))));
}

fn result_of(plan: Plan) -> RunResult {
    let mut m = Measurements::default();
    m.requests.attempted = 3;
    m.requests.ok = 3;
    m.connections.attempted = 7;
    m.connections.ok = 5;
    m.connections.errors.insert("refused".into(), 2);
    RunResult {
        schema: SCHEMA.to_string(),
        throng_version: "0.0.0".to_string(),
        plan,
        started_at: rfc3339(0),
        started_at_unix_ms: 0,
        duration_s: 1.0,
        coordinated_omission_free: false,
        interrupted: false,
        environment: Environment::default(),
        generator: Generator::default(),
        measurements: m,
        parts: Vec::new(),
        notes: Vec::new(),
        trigger: None,
        thresholds: Vec::new(),
        segment: None,
        remote_write: None,
        otlp: None,
    }
}

#[test]
fn an_open_loops_thresholds_imply_a_bound_on_dropped() {
    assert!(throng_scenario::Threshold::parse_line(IMPLIED_DROPPED).is_ok());
    let plan = |rate: Option<f64>, thresholds: &[&str]| {
        Plan::Http(
            HttpPlan::from_args(throng_plan::HttpArgs {
                url: "http://127.0.0.1:8080/".to_string(),
                rate,
                thresholds: thresholds.iter().map(|t| t.to_string()).collect(),
                cores: 1,
                ..throng_plan::HttpArgs::default()
            })
            .expect("a valid plan"),
        )
    };
    // 3 sent, 1 dropped: a quarter of the schedule.
    let judged = |plan: Plan| {
        let mut r = result_of(plan);
        r.measurements.dropped = 1;
        r.judged().thresholds
    };
    let v = judged(plan(Some(100.0), &["errors: rate < 1%"]));
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(
        (v[1].threshold.as_str(), v[1].passed, v[1].observed),
        (IMPLIED_DROPPED, false, Some(0.25))
    );
    assert!(v[1].detail.contains("implied"), "{}", v[1].detail);
    // The user's own bound replaces it; a closed loop and a run without
    // thresholds imply nothing.
    let v = judged(plan(Some(100.0), &["dropped: rate < 50%"]));
    assert_eq!((v.len(), v[0].passed), (1, true), "{v:?}");
    assert_eq!(judged(plan(None, &["errors: rate < 1%"])).len(), 1);
    assert!(judged(plan(Some(100.0), &[])).is_empty());
}

#[test]
fn a_storm_counts_connections_and_the_rest_requests() {
    let http = HttpPlan::from_args(throng_plan::HttpArgs {
        url: "http://127.0.0.1:8080/".to_string(),
        ..throng_plan::HttpArgs::default()
    })
    .expect("a valid plan");
    let storm = StormPlan::from_args(throng_plan::StormArgs {
        target: "tcp://127.0.0.1:4222".to_string(),
        connections: Some(7),
        ..throng_plan::StormArgs::default()
    })
    .expect("a valid plan");
    let file = "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n    flow:\n      - request: { path: / }\n";
    let run = ScenarioPlan::parse(file, "t.yaml", &|f| Err(f.to_string())).expect("a valid plan");
    let point = throng_metrics::SeriesPoint {
        ok: 11,
        connections_opened: 13,
        ..Default::default()
    };
    for (plan, unit, ok, word) in [
        (Plan::Http(http), Unit::Requests, 3, "requests"),
        (Plan::Storm(storm), Unit::Connections, 5, "connections"),
        (Plan::Run(Box::new(run)), Unit::Requests, 3, "requests"),
    ] {
        let r = result_of(plan);
        assert_eq!(r.unit(), unit);
        assert_eq!(r.unit_outcomes().ok, ok);
        assert_eq!(unit.plural(), word);
        assert_eq!(format!("{}s", unit.singular()), word);
        assert_eq!(unit.per_second(&point), if unit == Unit::Connections { 13 } else { 11 });
    }
}

#[test]
fn rfc3339_formats_known_instants() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
    assert_eq!(rfc3339(1_795_000_000_000), "2026-11-18T11:06:40.000Z");
}

#[test]
fn pushes_add_up_when_runs_merge_and_round_trip() {
    let plan = Plan::Http(
        HttpPlan::from_args(throng_plan::HttpArgs {
            url: "http://127.0.0.1:8080/".to_string(),
            cores: 1,
            ..throng_plan::HttpArgs::default()
        })
        .expect("a valid plan"),
    );
    let push = |sent, failed, error: Option<&str>| PushRecord {
        endpoint: "http://127.0.0.1:9090/api/v1/write".into(),
        samples_sent: sent,
        samples_failed: failed,
        samples_dropped: 1,
        pushes_sent: 2,
        pushes_failed: u64::from(failed > 0),
        last_error: error.map(str::to_string),
    };
    let mut a = result_of(plan.clone());
    a.remote_write = Some(push(10, 0, None));
    let mut b = result_of(plan.clone());
    b.remote_write = Some(push(5, 4, Some("HTTP 500")));
    let merged = RunResult::merge(&[a.clone(), b.clone()]).unwrap();
    // The OTLP record adds up the same way, apart from remote write's.
    let mut c = result_of(plan.clone());
    c.otlp = Some(push(3, 0, None));
    let mut d = b.clone();
    d.otlp = Some(push(4, 2, Some("HTTP 503")));
    let both = RunResult::merge(&[c, d]).unwrap();
    let o = both.otlp.as_ref().unwrap();
    assert_eq!((o.samples_sent, o.samples_failed, o.pushes_failed), (7, 2, 1));
    assert_eq!(o.last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(both.remote_write.as_ref().unwrap().samples_sent, 5);
    let text = serde_json::to_string(&both).unwrap();
    let back: RunResult = serde_json::from_str(&text).unwrap();
    assert_eq!(back.otlp, both.otlp);
    let m = merged.remote_write.unwrap();
    assert_eq!(
        (
            m.samples_sent,
            m.samples_failed,
            m.samples_dropped,
            m.pushes_sent,
            m.pushes_failed
        ),
        (15, 4, 2, 4, 1)
    );
    assert_eq!(m.last_error.as_deref(), Some("HTTP 500"));
    assert!(
        m.summary("remote write")
            .contains("15 samples sent, 4 failed, 2 dropped"),
        "{}",
        m.summary("remote write")
    );
    assert_eq!(merged.otlp, None, "no part pushed over OTLP");
    // Without a push, no field; with one, it reads back.
    assert!(
        !serde_json::to_string(&result_of(plan))
            .unwrap()
            .contains("remote_write")
    );
    let text = serde_json::to_string(&a).unwrap();
    let back: RunResult = serde_json::from_str(&text).unwrap();
    assert_eq!(back.remote_write, a.remote_write);
    // What a file holds is shown on one line, clipped.
    let hostile = PushRecord {
        endpoint: "x".repeat(10_000),
        last_error: Some("a\nb".repeat(5_000)),
        ..PushRecord::default()
    };
    let line = hostile.summary("remote write");
    assert!(!line.contains('\n') && line.chars().count() < 800, "{line}");
}
