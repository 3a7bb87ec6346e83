//! Files the schema and the parser both refuse.

use super::*;

#[test]
fn bad_files_fail_both() {
    let v = validator();
    assert!(violations(&v, MINIMAL).is_empty());
    parse(MINIMAL).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "an unknown top-level key",
            edit("scenarios:", "options: {}\nscenarios:"),
            "unknown field `options`",
        ),
        (
            "an unknown request key",
            edit("path: /", "path: /\n          params: {}"),
            "unknown field `params`",
        ),
        (
            "an unknown scenario key",
            edit("vus: 1", "vus: 1\n    startVUs: 1"),
            "unknown field `startVUs`",
        ),
        (
            "an HTTP version throng does not speak",
            edit(
                "target: http://127.0.0.1:8080",
                "target: { url: http://127.0.0.1:8080, http: 4 }",
            ),
            "is not an HTTP version",
        ),
        (
            "an unknown key in the target",
            edit(
                "target: http://127.0.0.1:8080",
                "target: { url: http://127.0.0.1:8080, alpn: h2 }",
            ),
            "unknown field `alpn`",
        ),
        (
            "a file's target without its url",
            edit("target: http://127.0.0.1:8080", "target: { http: 2 }"),
            "target: needs url:",
        ),
        (
            "an unknown key in a scenario's target",
            edit("vus: 1", "vus: 1\n    target: { htp: 2 }"),
            "unknown field `htp`",
        ),
        (
            "tls for http targets only",
            edit("vus: 1", "vus: 1\n    target: { url: http://127.0.0.1:9090, http: 2 }").replacen(
                "scenarios:",
                "tls: { insecure: true }\nscenarios:",
                1,
            ),
            "tls: applies to https://",
        ),
        ("a word for a number", edit("vus: 1", "vus: many"), "invalid type"),
        ("a fraction of a VU", edit("vus: 1", "vus: 1.5"), "invalid type"),
        ("no VUs", edit("vus: 1", "vus: 0"), "at least 1"),
        (
            "an unknown executor",
            edit("constant-vus", "ramping-users"),
            "unknown variant `ramping-users`",
        ),
        ("an executor without its fields", edit("    vus: 1\n", ""), "needs vus"),
        (
            "an arrival rate without pre-allocated VUs",
            edit("constant-vus\n    vus: 1", "constant-arrival-rate\n    rate: 10"),
            "pre_allocated_vus",
        ),
        ("a duration in parsecs", edit("10s", "30 parsecs"), "invalid duration"),
        (
            "a duration without a unit",
            edit("duration: 10s", "duration: 10"),
            "durations need a unit",
        ),
        (
            "a duration with a space",
            edit("duration: 10s", "duration: 10 s"),
            "invalid duration",
        ),
        (
            "a stage list that is not a list",
            edit("vus: 1", "vus: 1\n    stages: 5"),
            "invalid type",
        ),
        (
            "no target",
            edit("target: http://127.0.0.1:8080\n", ""),
            "missing field `target`",
        ),
        (
            "a target that is not http",
            edit("http://", "ftp://"),
            "use http:// or https://",
        ),
        (
            "a target with a query string",
            edit("http://127.0.0.1:8080", "http://127.0.0.1:8080/?key=1"),
            "has a query string (?key=1)",
        ),
        (
            "a target with credentials",
            edit("http://127.0.0.1:8080", "http://me:pw@127.0.0.1:8080"),
            "has credentials",
        ),
        (
            "tls for an http target",
            edit("scenarios:", "tls: { insecure: true }\nscenarios:"),
            "tls: applies to https://",
        ),
        (
            "no scenarios",
            "target: http://127.0.0.1:8080\nscenarios: {}\n".to_string(),
            "name at least one scenario",
        ),
        (
            "an empty flow",
            format!(
                "{}      []\n",
                MINIMAL.split("      - request:").next().unwrap_or_default()
            ),
            "flow is empty",
        ),
        (
            "two kinds in one step",
            edit("      - request:", "      - think: 1s\n        request:"),
            "exactly one of request:, sse:, grpc:, websocket:, mqtt:, think: or group:",
        ),
        (
            "an sse: step ended before its first event",
            edit("      - request:", "      - sse:\n          events: 0"),
            "events: 0 would end the stream",
        ),
        (
            "an sse: step awaiting no event",
            edit(
                "      - request:",
                "      - sse:\n          expect_event: { within: 2s }",
            ),
            "expect_event: names no event",
        ),
        (
            "an sse: step with a form",
            edit("      - request:", "      - sse:\n          form: { a: b }"),
            "unknown field `form`",
        ),
        (
            "a step of no kind",
            edit("      - request:", "      - wait: 1s\n        request:"),
            "unknown field `wait`",
        ),
        (
            "two bodies",
            edit("path: /", "path: /\n          json: {a: 1}\n          body: x"),
            "give one of json:, form: or body:",
        ),
        ("a path without /", edit("path: /", "path: home"), "must start with /"),
        (
            "a method with a space",
            edit("path: /", "path: /\n          method: GE T"),
            "not an HTTP method",
        ),
        (
            "a list as a query value",
            edit("path: /", "path: /\n          query: { ids: [1, 2] }"),
            "must be a string or number",
        ),
        (
            "a status of 600",
            edit("expect: [200]", "expect: [600]"),
            "statuses run from 100 to 599",
        ),
        (
            "a status that is a word",
            edit("expect: [200]", "expect: [ok]"),
            "is not a status",
        ),
        (
            "one status, not a list",
            edit("expect: [200]", "expect: 200"),
            "expected a sequence",
        ),
        ("no statuses", edit("expect: [200]", "expect: []"), "expect: is empty"),
        (
            "a capture from two places",
            edit("expect: [200]", "capture:\n            t: { json: /t, header: X-T }"),
            "exactly one of json:, header: or regex:",
        ),
        (
            "a capture with a dotted path",
            edit("expect: [200]", "capture:\n            t: { json: data.token }"),
            "is a JSON pointer and starts with /",
        ),
        (
            "a check of two kinds",
            edit(
                "expect: [200]",
                "check:\n            c: { status: [200], body_contains: ok }",
            ),
            "it has status: and body_contains:; give only one of",
        ),
        (
            "a check json with exists: false",
            edit("expect: [200]", "check:\n            c: { json: /a, exists: false }"),
            "equals: VALUE or exists: true",
        ),
        (
            "a check status as text",
            edit("expect: [200]", "check:\n            c: { status: ['200'] }"),
            "expected a whole number",
        ),
        (
            "a threshold on a k6 metric name",
            edit("response{step:home}", "http_req_duration"),
            "is not a metric",
        ),
        (
            "a tag on a metric not kept per tag",
            edit("response{step:home}", "latency{step:home}"),
            "is not kept per tag",
        ),
        (
            "an unknown tag",
            edit("response{step:home}", "response{url:home}"),
            "is not a tag",
        ),
        (
            "a threshold key that is not a metric, the metric inside",
            edit(
                "response{step:home}: [p(95) < 500ms]",
                "http_req_failed: [rate(check_failed) < 0.01]",
            ),
            "'http_req_failed' is not a metric",
        ),
        (
            "a request tag on checks",
            edit(
                "response{step:home}: [p(95) < 500ms]",
                "checks{step:home}: [rate > 0.9]",
            ),
            "checks is kept per check, not per step",
        ),
        (
            "a check tag on response",
            edit("response{step:home}", "response{check:home}"),
            "response is kept per step, group, scenario or stage, not per check",
        ),
        (
            "a step tag on group durations",
            edit("response{step:home}", "group_duration{step:home}"),
            "group_duration is kept per group, not per step",
        ),
        (
            "a duration bound without a unit",
            edit("p(95) < 500ms", "p(95) < 500"),
            "durations need a unit",
        ),
        (
            "a window without a unit",
            edit("p(95) < 500ms", "p(95) < 500ms over 30"),
            "durations need a unit",
        ),
        (
            "a threshold without a comparison",
            edit("p(95) < 500ms", "p(95) 500ms"),
            "has no comparison",
        ),
        (
            "an unknown aggregation",
            edit("p(95) < 500ms", "p95 < 500ms"),
            "is not p(N), avg, med, min, max, rate or count",
        ),
        (
            "a threshold with no expressions",
            edit("[p(95) < 500ms]", "[]"),
            "the list is empty, so nothing is judged",
        ),
        (
            "a threshold that is not a list",
            edit("[p(95) < 500ms]", "p(95) < 500ms"),
            "expected a sequence",
        ),
        (
            "a threshold object without its expression",
            edit("[p(95) < 500ms]", "[{ abort_on_fail: true }]"),
            "missing field `threshold`",
        ),
        (
            "a modifier on the wrong kind of check",
            edit(
                "expect: [200]",
                "check:\n            c: { status: [200], contains: ok }",
            ),
            "contains: goes with header:, not with status:",
        ),
        (
            "a check json that is not a pointer",
            edit("expect: [200]", "check:\n            c: { json: data.token }"),
            "is a JSON pointer and starts with /, e.g. /data/token",
        ),
        (
            "a JSON pointer with a stray ~",
            edit("expect: [200]", "capture:\n            t: { json: /a~b }"),
            "write ~0 for ~ and ~1 for /",
        ),
        (
            "a capture named like a built-in",
            edit("expect: [200]", "capture:\n            vu: { header: X-VU }"),
            "{{vu}} is built in",
        ),
        (
            "a capture name with a dash",
            edit("expect: [200]", "capture:\n            user-id: { header: X-Id }"),
            "e.g. user_id",
        ),
        (
            "a check status out of range",
            edit("expect: [200]", "check:\n            c: { status: [999] }"),
            "status 999: codes run from 100 to 599",
        ),
        (
            "a check with no status",
            edit("expect: [200]", "check:\n            c: { status: [] }"),
            "status: is empty",
        ),
        (
            "a field of another executor",
            edit("vus: 1", "vus: 1\n    rate: 50"),
            "`rate` is not a field of constant-vus",
        ),
        (
            "a negative start rate",
            edit(
                "constant-vus\n    vus: 1\n    duration: 10s",
                "ramping-arrival-rate\n    start_rate: -5\n    pre_allocated_vus: 1\n    stages: [{duration: 10s, target: 1}]",
            ),
            "start_rate cannot be negative",
        ),
        (
            "a time unit of zero",
            edit(
                "constant-vus\n    vus: 1",
                "constant-arrival-rate\n    rate: 1\n    time_unit: 0ms\n    pre_allocated_vus: 1",
            ),
            "time_unit must be longer than 0",
        ),
        (
            "a max_duration of zero",
            edit(
                "constant-vus\n    vus: 1\n    duration: 10s",
                "shared-iterations\n    vus: 1\n    iterations: 1\n    max_duration: 0s",
            ),
            "max_duration must be longer than 0",
        ),
        (
            "no max_vus",
            edit(
                "constant-vus\n    vus: 1",
                "constant-arrival-rate\n    rate: 1\n    pre_allocated_vus: 1\n    max_vus: 0",
            ),
            "max_vus (0) is below pre_allocated_vus (1)",
        ),
        (
            "a misspelt key in a data object",
            edit("scenarios:", "data: { file: users.csv, cursr: shared }\nscenarios:"),
            "unknown field `cursr`, expected `file` or `cursor`",
        ),
        (
            "a misspelt key in a think range",
            edit(
                "      - request:",
                "      - think: { min: 1s, max: 2s, mean: 1s }\n      - request:",
            ),
            "unknown field `mean`, expected `min` or `max`",
        ),
        (
            "a misspelt key in a threshold object",
            edit("[p(95) < 500ms]", "[{ threshold: p(95) < 500ms, abortOnFail: true }]"),
            "unknown field `abortOnFail`",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, yaml, message) in &cases {
        let schema_ok = violations(&v, yaml).is_empty();
        let parsed = parse(yaml);
        match (&parsed, schema_ok) {
            (Err(e), false) if e.message.contains(message) => {}
            (Err(e), false) => wrong.push(format!("{what}: the parser says '{e}', expected '{message}'")),
            (Err(_), true) => wrong.push(format!("{what}: the schema accepts it")),
            (Ok(_), _) => wrong.push(format!("{what}: the parser accepts it")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn js_steps_pass_both_and_their_mistakes_fail_both() {
    let v = validator();
    let js = edit(
        "          expect: [200]\n",
        "          expect: [200]\n      - js: |\n          vars.n = String(__ITER);\n        sets: [n]\n        timeout: 500ms\n      - js: \"if (!vars.n) throw new Error('no n')\"\n",
    );
    assert!(violations(&v, &js).is_empty(), "{:#?}", violations(&v, &js));
    let plan = parse(&js).unwrap_or_else(|e| panic!("the parser rejects it: {e}"));
    assert_eq!(throng_scenario::js_steps(&plan.scenarios[0].flow).len(), 2);
    let cases = [
        (
            "sets: without js:",
            js.replacen(
                "      - js: |\n          vars.n = String(__ITER);\n",
                "      - think: 1s\n",
                1,
            ),
            "belongs to a js: step",
        ),
        (
            "js: beside a request",
            js.replacen("        sets: [n]\n", "        sets: [n]\n        think: 1s\n", 1),
            "a step of its own",
        ),
        (
            "a name that is not one",
            js.replacen("sets: [n]", "sets: [\"n-1\"]", 1),
            "letters, digits and _",
        ),
        (
            "a name twice",
            js.replacen("sets: [n]", "sets: [n, n]", 1),
            "named twice",
        ),
        (
            "an unknown key",
            js.replacen("timeout: 500ms", "timout: 500ms", 1),
            "unknown field `timout`",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, yaml, message) in &cases {
        let schema_ok = violations(&v, yaml).is_empty();
        match (parse(yaml), schema_ok) {
            (Err(e), false) if e.message.contains(message) => {}
            (Err(e), false) => wrong.push(format!("{what}: the parser says '{e}', expected '{message}'")),
            (Err(_), true) => wrong.push(format!("{what}: the schema accepts it")),
            (Ok(_), _) => wrong.push(format!("{what}: the parser accepts it")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
