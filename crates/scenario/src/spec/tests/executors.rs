//! Executors: their fields, what runs nothing, scaling.

use super::*;

/// GOOD's ramping-vus scenario header, to swap for another executor.
pub(super) const RAMP: &str = "executor: ramping-vus\n    start_vus: 0\n    stages:\n      - { duration: 30s, target: 10 }\n      - { duration: 1m, target: 50 }\n";

#[test]
fn executors_need_their_fields() {
    // Named as written in the file (kebab-case), pointing at the executor.
    rejects(
        RAMP,
        "executor: constant-vus\n    duration: 1m\n",
        "executor: constant-vus",
        "the constant-vus executor needs vus, e.g. vus: 10",
    );
    rejects(
        RAMP,
        "executor: constant-arrival-rate\n    rate: 10\n    duration: 1m\n",
        "executor: constant-arrival-rate",
        "the constant-arrival-rate executor needs pre_allocated_vus",
    );
    rejects(
        RAMP,
        "executor: constant-arrival-rate\n    duration: 1m\n    pre_allocated_vus: 2\n",
        "executor: constant-arrival-rate",
        "the constant-arrival-rate executor needs rate",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    pre_allocated_vus: 2\n",
        "executor: ramping-arrival-rate",
        "the ramping-arrival-rate executor needs stages",
    );
    rejects(
        RAMP,
        "executor: per-vu-iterations\n    vus: 2\n",
        "executor: per-vu-iterations",
        "the per-vu-iterations executor needs iterations",
    );
}

#[test]
fn fields_of_another_executor_are_refused() {
    let e = rejects(
        RAMP,
        "executor: constant-vus\n    vus: 5\n    duration: 1m\n    rate: 10\n",
        "rate: 10",
        "`rate` is not a field of constant-vus; it takes vus, duration (and start_time, graceful_stop, flow)",
    );
    assert_eq!(e.column, 5, "{e}");
    rejects(
        RAMP,
        "executor: per-vu-iterations\n    vus: 5\n    iterations: 2\n    stages: [{ duration: 1s, target: 1 }]\n",
        "stages:",
        "`stages` is not a field of per-vu-iterations; it takes vus, iterations, max_duration",
    );
    rejects(
        "start_vus: 0",
        "start_vus: 0\n    time_unit: 1s",
        "time_unit",
        "`time_unit` is not a field of ramping-vus",
    );
    // `rate:` is found as a key, not inside `start_rate:` above it.
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    start_rate: 1\n    rate: 5\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 1 }]\n",
        "    rate: 5",
        "`rate` is not a field of ramping-arrival-rate",
    );
}

#[test]
fn counts_and_rates_that_run_nothing_are_refused() {
    let arrival = |extra: &str| {
        format!("executor: constant-arrival-rate\n    rate: 10\n    duration: 1m\n    pre_allocated_vus: 5\n{extra}")
    };
    rejects(
        RAMP,
        &arrival("    time_unit: 0s\n"),
        "time_unit: 0s",
        "time_unit must be longer than 0: rates are iterations per time_unit",
    );
    rejects(
        RAMP,
        &arrival("    max_vus: 2\n"),
        "max_vus: 2",
        "max_vus (2) is below pre_allocated_vus (5)",
    );
    rejects(
        RAMP,
        &arrival("").replace("rate: 10", "rate: 0"),
        "rate: 0",
        "rate must be greater than 0",
    );
    rejects(
        RAMP,
        &arrival("").replace("rate: 10", "rate: 1e15"),
        "rate: 1e15",
        "1000000000000000 per 1s is 1.000e15 per second: more than 100M per second is not a plan",
    );
    // Per time_unit: 6e9 a minute is 1e8 a second, the limit itself.
    assert!(
        parse(&GOOD.replacen(
            RAMP,
            &arrival("    time_unit: 1m\n").replace("rate: 10", "rate: 6e9"),
            1
        ))
        .is_ok()
    );
    rejects(
        RAMP,
        &arrival("    time_unit: 1m\n").replace("rate: 10", "rate: 6.1e9"),
        "rate: 6.1e9",
        "lower it or lengthen time_unit",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 2e8 }]\n",
        "stages:",
        "more than 100M per second",
    );
    rejects(
        RAMP,
        &arrival("").replace("pre_allocated_vus: 5", "pre_allocated_vus: 0"),
        "pre_allocated_vus: 0",
        "pre_allocated_vus must be at least 1: an arrival-rate scenario needs a VU ready",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    start_rate: -5\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 1 }]\n",
        "start_rate: -5",
        "start_rate cannot be negative",
    );
    rejects(
        RAMP,
        "executor: ramping-arrival-rate\n    pre_allocated_vus: 1\n    stages: [{ duration: 1s, target: 0 }]\n",
        "stages:",
        "start_rate and every stage's target are 0: no iteration would ever start",
    );
    rejects(
        RAMP,
        "executor: constant-vus\n    vus: 0\n    duration: 1m\n",
        "vus: 0",
        "vus must be at least 1: with no VUs the scenario runs nothing",
    );
    rejects(
        RAMP,
        "executor: shared-iterations\n    vus: 2\n    iterations: 0\n",
        "iterations: 0",
        "iterations must be at least 1",
    );
    rejects(
        RAMP,
        "executor: shared-iterations\n    vus: 2\n    iterations: 5\n    max_duration: 0s\n",
        "max_duration: 0s",
        "max_duration must be longer than 0",
    );
    rejects(
        "target: 10 }\n      - { duration: 1m, target: 50 }",
        "target: 0 }\n      - { duration: 1m, target: 0 }",
        "stages:",
        "start_vus and every stage's target are 0: no VU would ever run",
    );
    rejects("target: 50 }", "target: -1 }", "stages:", "cannot be negative");
    let text = GOOD
        .replacen("duration: 30s, target", "duration: 0s, target", 1)
        .replacen("duration: 1m, target", "duration: 0s, target", 1);
    let e = parse(&text).unwrap_err();
    assert!(e.message.contains("the stages last 0s in all"), "{e}");
    // Equal is fine, and max_vus defaults to pre_allocated_vus.
    let plan = parse(&GOOD.replacen(RAMP, &arrival("    max_vus: 5\n"), 1)).unwrap();
    let Executor::ConstantArrivalRate { max_vus, .. } = plan.scenarios[0].executor else {
        panic!("constant-arrival-rate")
    };
    assert_eq!(max_vus, 5);
    let plan = parse(&GOOD.replacen(RAMP, &arrival(""), 1)).unwrap();
    assert!(matches!(
        plan.scenarios[0].executor,
        Executor::ConstantArrivalRate { max_vus: 5, .. }
    ));
}

#[test]
fn scaling_keeps_the_graceful_periods() {
    let text = GOOD.replacen(
        "start_vus: 0",
        "start_vus: 0\n    start_time: 10s\n    graceful_stop: 20s\n    graceful_ramp_down: 40s",
        1,
    );
    let s = parse(&text).unwrap().scaled(0.5).scenarios.remove(0);
    assert_eq!(s.start_time, Duration::from_secs(5));
    assert_eq!(s.executor.length(), Duration::from_secs(45));
    assert_eq!(s.graceful_stop, Duration::from_secs(20));
    let Executor::RampingVus { graceful_ramp_down, .. } = s.executor else {
        panic!("ramping-vus")
    };
    assert_eq!(graceful_ramp_down, Duration::from_secs(40));
    let text = GOOD.replacen(
        RAMP,
        "executor: shared-iterations\n    vus: 2\n    iterations: 5\n    max_duration: 1m\n",
        1,
    );
    let s = parse(&text).unwrap().scaled(0.5).scenarios.remove(0);
    assert_eq!(s.executor.length(), Duration::from_secs(30));
    assert_eq!(s.graceful_stop, Duration::from_secs(30));
}
