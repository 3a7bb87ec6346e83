//! Results for the writers' unit tests.

use throng_result::{Plan, RunResult};

/// A `throng http` result around `m`, started at Unix ms 1,000,000 (for
/// the writers' unit tests).
pub(crate) fn test_result(m: throng_metrics::Measurements) -> RunResult {
    let plan = throng_plan::HttpPlan::from_args(throng_plan::HttpArgs {
        url: "http://127.0.0.1:8080/".to_string(),
        cores: 1,
        ..throng_plan::HttpArgs::default()
    })
    .expect("a valid plan");
    test_result_of(Plan::Http(plan), m)
}

/// A `throng storm` result around `m`, as [`test_result`].
pub(crate) fn test_storm_result(m: throng_metrics::Measurements) -> RunResult {
    let plan = throng_plan::StormPlan::from_args(throng_plan::StormArgs {
        target: "tcp://127.0.0.1:4222".to_string(),
        connections: Some(10),
        ..throng_plan::StormArgs::default()
    })
    .expect("a valid plan");
    test_result_of(Plan::Storm(plan), m)
}

/// A `throng run` result around `m`, as [`test_result`].
pub(crate) fn test_run_result(m: throng_metrics::Measurements) -> RunResult {
    let file = "target: http://127.0.0.1:8080\nscenarios:\n  browse:\n    executor: constant-vus\n    vus: 2\n    duration: 10s\n    flow:\n      - request: { name: home, path: / }\n";
    let plan = throng_scenario::ScenarioPlan::parse(file, "t.yaml", &|f| Err(format!("no {f}"))).expect("a valid plan");
    test_result_of(Plan::Run(Box::new(plan)), m)
}

fn test_result_of(plan: Plan, m: throng_metrics::Measurements) -> RunResult {
    RunResult {
        schema: throng_result::SCHEMA.to_string(),
        throng_version: "0.0.0".to_string(),
        plan,
        started_at: throng_result::rfc3339(1_000_000),
        started_at_unix_ms: 1_000_000,
        duration_s: 2.0,
        coordinated_omission_free: false,
        interrupted: false,
        environment: throng_result::Environment::default(),
        generator: throng_result::Generator::default(),
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
