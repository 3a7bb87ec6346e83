//! The scenario file's JSON Schema (`schema/scenario.schema.json`) and its
//! reference (`docs/guide/src/scenarios.md`) against the parser: files the parser
//! accepts validate, files it rejects do not, and every complete example in
//! the reference passes both.
//!
//! The parser refuses everything the schema refuses (`bad_files_fail_both`);
//! it also knows rules a JSON Schema cannot state, such as variables
//! defined by an earlier step (`rules_only_the_parser_knows`).

#![allow(clippy::unwrap_used)]

use throng_scenario::{ScenarioError, ScenarioPlan, Step};

mod bad;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// What every test's data file holds.
const CSV: &str = "email,password\na@x,pw\n";

fn schema() -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{ROOT}/schema/scenario.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).unwrap()
}

/// The YAML as an editor's language server sees it: parsed to JSON.
fn as_json(yaml: &str) -> serde_json::Value {
    serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("not YAML ({e}):\n{yaml}"))
}

fn violations(v: &jsonschema::Validator, yaml: &str) -> Vec<String> {
    v.iter_errors(&as_json(yaml))
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// The data file is [`CSV`]; a `.proto` file is read from the repository
/// (paths as from its root, where the reference's examples run).
fn parse(yaml: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(yaml, "x.yaml", &|f| match f.ends_with(".proto") {
        true => std::fs::read_to_string(format!("{ROOT}/{f}")).map_err(|e| e.to_string()),
        false => Ok(CSV.to_string()),
    })
}

/// Sign-up and log-in under a ramp: every capture and check kind, groups
/// within groups, think ranges, every tag in thresholds, a data file.
const LOGIN: &str = r#"
target: http://127.0.0.1:8080/api
data: users.csv
defaults:
  headers:
    User-Agent: throng-test
    Accept: application/json
  timeout: 5s
scenarios:
  steady:
    executor: constant-vus
    vus: 10
    duration: 1m
    flow:
      - request:
          path: /health
  signup:
    executor: ramping-vus
    start_vus: 0
    stages:
      - { duration: 30s, target: 10 }
      - { duration: 1m, target: 10 }
      - { duration: 0s, target: 50 }
      - { duration: 10s, target: 0 }
    graceful_ramp_down: 10s
    flow:
      - request:
          name: register
          path: /auth/register
          json:
            email: "{{email}}"
            password: "{{password}}"
            profile: { age: 30, tags: [a, b], admin: false, note: null }
          expect: [201, 409]
          capture:
            user_id: { json: /id }
            session: { header: Set-Cookie }
            greeting: { regex: '"message":"([^"]+)"' }
          check:
            created: { status: [201] }
            says hello: { body_contains: hello }
            has an id: { json: /id }
            id exists: { json: /id, exists: true }
            is active: { json: /state, equals: active }
            json reply: { header: Content-Type, contains: json }
            has a date: { header: Date }
            fast: { duration_under: 200ms }
      - request:
          name: wrong password
          path: /auth/login
          json: { email: "{{email}}", password: wrong }
          expect: [401]
      - think: { min: 1s, max: 3s }
      - group:
          name: session
          flow:
            - request:
                name: login
                method: POST
                path: /auth/login
                json: { email: "{{email}}", password: "{{password}}" }
                capture:
                  token: { json: /token }
            - think: 500ms
            - group:
                name: profile
                flow:
                  - request:
                      path: /users/{{user_id}}
                      headers: { Authorization: "Bearer {{token}}", Cookie: "{{session}}" }
                      timeout: 2s
                      check:
                        is me: { json: /email, exists: true }
thresholds:
  response:
    - p(95) < 500ms
    - p(99.9) <= 2s over 30s
  response{step:login}:
    - threshold: p(99) < 1s
      abort_on_fail: true
      delay: 10s
  response{group:session}: [avg < 300ms]
  response{scenario:signup}: [med < 200ms]
  response{stage:signup#2}: ["max < 3s"]
  checks{check:created}: [rate > 0.99]
  group_duration{group:profile}: [p(90) < 1s]
"#;

/// Closed-model iteration counts: per-vu and shared, a shared data cursor,
/// form and raw bodies, query parameters, classes of statuses, start times.
const ITERATIONS: &str = r#"
target: http://localhost
data:
  file: users.csv
  cursor: shared
defaults:
  expect: [2xx, "301-302", "404,410"]
  timeout: 30s
scenarios:
  each:
    executor: per-vu-iterations
    vus: 5
    iterations: 20
    max_duration: 2m
    flow:
      - request:
          path: /search
          query: { q: "{{email}}", page: 1, exact: true }
      - think: 500ms
      - request:
          name: subscribe
          method: PUT
          path: /subscriptions
          form: { email: "{{email}}", weekly: 1 }
          expect: [204]
  shared:
    executor: shared-iterations
    vus: 3
    iterations: 100
    start_time: 1m30s
    graceful_stop: 5s
    flow:
      - request:
          path: /upload
          headers: { Content-Type: text/plain }
          body: "line for {{email}}"
      - request:
          method: DELETE
          path: /upload
thresholds:
  iterations: [count >= 100]
  requests{scenario:shared}: [count == 200]
  errors: [rate < 1%, count < 5]
  iteration: [p(95) < 5s]
"#;

/// The open model over TLS: constant and ramping arrival rates, their VU
/// pools, time units, and what is measured when VUs run out.
const OPEN: &str = r#"
target: https://localhost:8443
tls:
  cacert: lab/ca.pem
  cert: lab/client.pem
  key: lab/client.key
  resume: true
  groups: [x25519, p256]
  version: "1.3"
  sni: localhost
scenarios:
  browse:
    executor: constant-arrival-rate
    rate: 600
    time_unit: 1m
    duration: 5m
    pre_allocated_vus: 10
    max_vus: 50
    flow:
      - request:
          path: /products
          query: { page: "{{random_int 1 20}}" }
  spike:
    executor: ramping-arrival-rate
    start_rate: 10
    time_unit: 1s
    pre_allocated_vus: 20
    max_vus: 200
    start_time: 30s
    graceful_stop: 10s
    stages:
      - { duration: 1m, target: 100 }
      - { duration: 0s, target: 500 }
      - { duration: 20s, target: 500 }
      - { duration: 1m, target: 10 }
    flow:
      - request: { path: /cart, method: GET }
thresholds:
  dropped_iterations: [count == 0, "count < 10 over 10s"]
  schedule_lag: [p(99) < 10ms over 5s]
  tls: [p(95) < 20ms]
  connect: [max < 1s]
  latency: [p(99) < 1s]
  wait: [avg < 100ms]
  send: [max < 10ms]
  receive: [p(99) < 50ms]
  response{stage:spike#2}: [p(95) < 800ms]
  check_failed: [rate < 0.001]
"#;

/// Every template function and both kinds of variable in every place a
/// template may stand; thresholds with the metric inside the aggregation.
const TEMPLATES: &str = r#"
target: http://127.0.0.1:8080
data: users.csv
defaults:
  headers:
    X-Run: "{{env.RUN_ID}}"
    X-Request: "{{uuid}}"
scenarios:
  all:
    executor: constant-vus
    vus: 2
    duration: 10s
    flow:
      - request:
          name: order
          path: "/vu/{{vu}}/iter/{{iter}}"
          query: { scenario: "{{scenario}}", at: "{{now_ms}}", n: "{{ random_int -5 5 }}" }
          headers: { X-Email: "{{random_email}}", X-User: "{{email}}" }
          json: ["{{uuid}}", { nested: "{{password}}" }, 3]
          capture:
            order: { json: /order/id }
            whole: { json: "" }
      - request:
          path: "/orders/{{order}}"
          method: PATCH
          body: "{{whole}}"
      - group:
          name: empty
          flow: []
thresholds:
  check_failed{step:order}: [rate < 0.05, count < 10]
  checks: [rate(checks) >= 0.9]
  errors{scenario:all}: [rate <= 0.5%]
"#;

#[test]
fn the_schema_is_a_valid_json_schema() {
    let schema = schema();
    if let Err(e) = jsonschema::meta::validate(&schema) {
        panic!(
            "schema/scenario.schema.json is not a valid JSON Schema: {e} at {}",
            e.instance_path
        );
    }
    // It compiles (its regular expressions too), in the same draft as the
    // result schema.
    validator();
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{ROOT}/schema/result.schema.json")).unwrap()).unwrap();
    assert_eq!(schema["$schema"], result["$schema"]);
}

#[test]
fn every_property_has_a_description() {
    fn walk(v: &serde_json::Value, at: &str, missing: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for key in ["properties", "patternProperties"] {
                    if let Some(serde_json::Value::Object(props)) = m.get(key) {
                        for (name, p) in props {
                            if p.get("description").is_none() {
                                missing.push(format!("{at}/{key}/{name}"));
                            }
                        }
                    }
                }
                if let Some(a @ serde_json::Value::Object(_)) = m.get("additionalProperties")
                    && a.get("description").is_none()
                {
                    missing.push(format!("{at}/additionalProperties"));
                }
                for (k, x) in m {
                    walk(x, &format!("{at}/{k}"), missing);
                }
            }
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, &format!("{at}/{i}"), missing)),
            _ => {}
        }
    }
    let mut missing = Vec::new();
    walk(&schema(), "#", &mut missing);
    // Properties inside `if` only select a branch; the object's own
    // properties carry the descriptions.
    missing.retain(|p| !p.contains("/if/"));
    assert!(missing.is_empty(), "properties without a description: {missing:#?}");
}

#[test]
fn good_files_pass_both() {
    let v = validator();
    for (name, yaml) in [
        ("LOGIN", LOGIN),
        ("ITERATIONS", ITERATIONS),
        ("OPEN", OPEN),
        ("TEMPLATES", TEMPLATES),
    ] {
        let problems = violations(&v, yaml);
        assert!(problems.is_empty(), "{name}: schema violations: {problems:#?}");
        if let Err(e) = parse(yaml) {
            panic!("{name}: the parser rejects it: {e}");
        }
    }
    // Between them they use every executor, step kind, body kind, capture
    // and check kind: the files are as broad as the schema.
    let plans: Vec<ScenarioPlan> = [LOGIN, ITERATIONS, OPEN, TEMPLATES]
        .iter()
        .map(|y| parse(y).unwrap())
        .collect();
    let text = serde_json::to_string(&plans).unwrap();
    for needle in [
        "\"constant-vus\"",
        "\"ramping-vus\"",
        "\"per-vu-iterations\"",
        "\"shared-iterations\"",
        "\"constant-arrival-rate\"",
        "\"ramping-arrival-rate\"",
        "\"json\":",
        "\"header\":",
        "\"regex\":",
        "\"status\":",
        "\"body_contains\":",
        "\"json_exists\":",
        "\"json_equals\":",
        "\"duration_under\":",
        "\"range\":",
        "\"fixed\":",
        "\"group\":",
    ] {
        assert!(text.contains(needle), "no good file has {needle}");
    }
    let login = parse(LOGIN).unwrap();
    let signup = login.scenarios.iter().find(|s| s.name == "signup").unwrap();
    let Step::Request(register) = &signup.flow[0] else {
        panic!("signup starts with a request")
    };
    assert_eq!((register.name.as_str(), register.method.as_str()), ("register", "POST"));
    assert_eq!(login.thresholds.len(), 8);
}

#[test]
fn target_objects_pass_both() {
    let v = validator();
    for yaml in [
        edit(
            "target: http://127.0.0.1:8080",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
        ),
        edit(
            "target: http://127.0.0.1:8080",
            "target:\n  url: https://127.0.0.1:8443\n  http: 3",
        ),
        edit(
            "target: http://127.0.0.1:8080",
            "target: { url: http://127.0.0.1:8080, http: '1.1' }",
        ),
        edit("vus: 1", "vus: 1\n    target: { http: 2 }"),
        edit("vus: 1", "vus: 1\n    target: https://127.0.0.1:8443").replacen(
            "scenarios:",
            "tls: { insecure: true }\nscenarios:",
            1,
        ),
        edit("vus: 1", "vus: 1\n    target: { url: https://127.0.0.1:8443, http: 3 }").replacen(
            "scenarios:",
            "tls: { insecure: true }\nscenarios:",
            1,
        ),
    ] {
        let problems = violations(&v, &yaml);
        assert!(problems.is_empty(), "{yaml}: schema violations: {problems:#?}");
        if let Err(e) = parse(&yaml) {
            panic!("{yaml}: the parser rejects it: {e}");
        }
    }
}

/// A small file the parser accepts, to break one thing at a time.
const MINIMAL: &str = r#"
target: http://127.0.0.1:8080
scenarios:
  s:
    executor: constant-vus
    vus: 1
    duration: 10s
    flow:
      - request:
          name: home
          path: /
          expect: [200]
thresholds:
  response{step:home}: [p(95) < 500ms]
"#;

fn edit(from: &str, to: &str) -> String {
    assert!(MINIMAL.contains(from), "MINIMAL has no '{from}'");
    MINIMAL.replacen(from, to, 1)
}

/// gRPC calls over HTTP/2, with the test server's .proto files.
const GRPC: &str = r#"
target: { url: http://127.0.0.1:50051, http: 2 }
proto:
  files: [crates/cli/tests/cli/grpc/tester.proto]
  import_paths: [crates/cli/tests/cli/grpc]
scenarios:
  calls:
    executor: constant-vus
    vus: 2
    duration: 10s
    flow:
      - grpc:
          name: call
          call: throngtest.Tester/Call
          message: { name: "u{{vu}}", tag: { key: k, values: [a] } }
          metadata: { x-tenant: "t-{{vu}}", authorization: Bearer x }
          deadline: 2s
          timeout: 5s
          expect: [OK, NOT_FOUND, 14]
          max_body: 64KiB
          capture: { greeting: { json: /message } }
          check:
            greets: { json: /message, exists: true }
            quick: { duration_under: 1s }
      - group:
          name: g
          flow:
            - grpc: { call: throngtest.Tester/Watch, message: { name: "{{greeting}}", count: 3 } }
thresholds:
  errors{step:call}: [rate < 1%]
"#;

#[test]
fn grpc_steps_pass_both_and_their_mistakes_fail_both() {
    let v = validator();
    let problems = violations(&v, GRPC);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
    let plan = parse(GRPC).unwrap_or_else(|e| panic!("the parser rejects it: {e}"));
    let Step::Grpc(call) = &plan.scenarios[0].flow[0] else {
        panic!("not a grpc step: {:?}", plan.scenarios[0].flow[0]);
    };
    assert_eq!(call.expect, [0, 5, 14]);
    assert!(!call.server_streaming);
    // No template in the message: encoded once, now. With one: per call.
    assert!(call.framed.is_none());
    assert_eq!(plan.secret_headers, ["authorization"]);
    let redacted = serde_json::to_string(&plan.redacted()).unwrap();
    assert!(
        !redacted.contains("Bearer x") && redacted.contains("<redacted>"),
        "{redacted}"
    );
    let cases = [
        (
            "an unknown grpc key",
            GRPC.replace("deadline: 2s", "deadlin: 2s"),
            "unknown field `deadlin`",
        ),
        (
            "a status gRPC lacks",
            GRPC.replace("NOT_FOUND", "NOTFOUND"),
            "'NOTFOUND' is not a gRPC status code",
        ),
        (
            "no call",
            GRPC.replace("call: throngtest.Tester/Call", "cal: x"),
            "unknown field `cal`",
        ),
        (
            "a proto without files",
            GRPC.replace("files: [crates/cli/tests/cli/grpc/tester.proto]", "files: []"),
            "files is empty",
        ),
        (
            "reflection with files",
            GRPC.replace("import_paths:", "reflection: true\n  import_paths:"),
            "leave out files",
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
    // Reflection instead of files: the schema takes it; the parser asks
    // the server only when given a way to (throng run), else says so.
    let reflecting = GRPC.replace(
        "proto:\n  files: [crates/cli/tests/cli/grpc/tester.proto]\n  import_paths: [crates/cli/tests/cli/grpc]",
        "proto: { reflection: true }",
    );
    assert!(reflecting.contains("reflection: true"));
    assert!(violations(&v, &reflecting).is_empty());
    let e = parse(&reflecting).unwrap_err();
    assert!(
        e.message.contains("reflection asks the server when throng run starts"),
        "{e}"
    );
}

/// MQTT sessions: subscribe, publish (a template and a file), expect with
/// a capture that a later request reads.
const MQTT: &str = r#"
target: http://127.0.0.1:8080
scenarios:
  sensors:
    executor: constant-vus
    vus: 2
    duration: 10s
    flow:
      - mqtt:
          name: sensor
          url: mqtt://127.0.0.1:1883
          version: 5
          client_id: "sensor-{{vu}}"
          user: dev
          password: "{{env.MQTT_PASSWORD}}"
          keepalive: 30s
          clean_start: true
          timeout: 5s
          keep: true
          messages:
            - subscribe: "sensors/{{vu}}/#"
              qos: 1
            - publish: "sensors/{{vu}}/temp"
              payload: '{"id": "{{vu}}-{{iter}}"}'
              qos: 2
              retain: false
            - publish: sensors/all
              payload_file: reading.json
            - expect: { topic: "sensors/+/temp", payload: '"id"' }
              capture: { id: { json: /id } }
      - request: { path: "/seen/{{id}}" }
"#;

#[test]
fn mqtt_steps_pass_both_and_their_mistakes_fail_both() {
    let v = validator();
    let problems = violations(&v, MQTT);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
    let plan = parse(MQTT).unwrap_or_else(|e| panic!("the parser rejects it: {e}"));
    let Step::Mqtt(m) = &plan.scenarios[0].flow[0] else {
        panic!("not an mqtt step: {:?}", plan.scenarios[0].flow[0]);
    };
    assert_eq!(m.messages.len(), 4);
    // Over WebSocket: the path (and query) allowed, as the parser allows.
    for url in [
        "ws://127.0.0.1:8080/mqtt",
        "wss://broker/mqtt?v=1",
        "ws://127.0.0.1:8080",
    ] {
        let yaml = MQTT.replace("mqtt://127.0.0.1:1883", url);
        assert_ne!(yaml, MQTT);
        assert!(violations(&v, &yaml).is_empty(), "{url}: {:#?}", violations(&v, &yaml));
        parse(&yaml).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
    let cases = [
        (
            "a path on mqtt://",
            MQTT.replace("mqtt://127.0.0.1:1883", "mqtt://127.0.0.1:1883/mqtt"),
            "no path",
        ),
        (
            "an unknown mqtt key",
            MQTT.replace("keepalive: 30s", "keepalives: 30s"),
            "unknown field `keepalives`",
        ),
        (
            "credentials in the URL",
            MQTT.replace("mqtt://127", "mqtt://u:p@127"),
            "has credentials",
        ),
        (
            "not a broker URL",
            MQTT.replace("mqtt://127", "http://127"),
            "not mqtt://, mqtts://, ws:// or wss://",
        ),
        ("a QoS of 3", MQTT.replace("qos: 2", "qos: 3"), "qos is 0, 1 or 2"),
        (
            "two kinds in one message",
            MQTT.replace("qos: 1", "publish: x"),
            "exactly one of",
        ),
        (
            "retain on a subscribe",
            MQTT.replace("qos: 1", "retain: true"),
            "retain: goes with publish:",
        ),
        (
            "capture on a publish",
            MQTT.replace("retain: false", "capture: { x: { regex: a } }"),
            "capture: goes with expect:",
        ),
        (
            "an empty expect",
            MQTT.replace("{ topic: \"sensors/+/temp\", payload: '\"id\"' }", "{}"),
            "needs topic:",
        ),
        (
            "an unknown version",
            MQTT.replace("version: 5", "version: \"4.5\""),
            "not an MQTT version",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, yaml, message) in &cases {
        assert_ne!(yaml, MQTT, "{what}: the case changes nothing");
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

/// Rules a JSON Schema cannot state: the parser alone enforces them (an
/// editor shows nothing; `throng run` stops at the line).
#[test]
fn rules_only_the_parser_knows() {
    let cases = [
        (
            "an unknown variable",
            edit("path: /", "path: /{{user}}"),
            "{{user}} is not defined",
        ),
        (
            "a variable captured by a later step",
            edit(
                "expect: [200]",
                "expect: [200]\n          headers: { X-T: \"{{t}}\" }\n      - request:\n          path: /t\n          capture: { t: { header: X-T } }",
            ),
            "{{t}} is used in step 'home' before step 'GET /t' captures it",
        ),
        (
            "an unknown template function",
            edit("path: /", "path: /{{random_float 1 2}}"),
            "not a function or a variable name",
        ),
        (
            "an environment variable without a name",
            edit("path: /", "path: /{{env.}}"),
            "{{env.}} names no variable",
        ),
        (
            "a random_int range upside down",
            edit("path: /", "path: /{{random_int 9 1}}"),
            "A <= B",
        ),
        (
            "a capture's regex that does not compile",
            edit("expect: [200]", "capture:\n            t: { regex: '(' }"),
            "regex",
        ),
        (
            "a think range upside down",
            edit(
                "      - request:",
                "      - think: { min: 2s, max: 1s }\n      - request:",
            ),
            "min is above max",
        ),
        (
            "a zero duration",
            edit("duration: 10s", "duration: 0s"),
            "must be longer than 0",
        ),
        (
            "a status range upside down",
            edit("expect: [200]", "expect: [\"300-200\"]"),
            "low to high",
        ),
        (
            "fewer VUs at most than at the start",
            edit(
                "constant-vus\n    vus: 1",
                "constant-arrival-rate\n    rate: 1\n    pre_allocated_vus: 5\n    max_vus: 2",
            ),
            "max_vus (2) is below pre_allocated_vus (5)",
        ),
        (
            "a ramp that never leaves zero",
            edit(
                "constant-vus\n    vus: 1\n    duration: 10s",
                "ramping-vus\n    stages: [{duration: 10s, target: 0}]",
            ),
            "no VU would ever run",
        ),
        (
            "a ramp that lasts no time",
            edit(
                "constant-vus\n    vus: 1\n    duration: 10s",
                "ramping-vus\n    stages: [{duration: 0s, target: 5}]",
            ),
            "the stages last 0s in all",
        ),
        (
            "a tag no request carries",
            edit("response{step:home}", "response{step:homepage}"),
            "no request carries the tag step:homepage",
        ),
        (
            "a rate of durations",
            edit("p(95) < 500ms", "rate < 0.1"),
            "is a duration",
        ),
        (
            "a window of a fraction of a second",
            edit("p(95) < 500ms", "p(95) < 500ms over 1.5s"),
            "whole seconds",
        ),
        (
            "a window on iteration times",
            edit(
                "response{step:home}: [p(95) < 500ms]",
                "iteration: [p(95) < 1s over 10s]",
            ),
            "no per-second figures",
        ),
        (
            "a filter inside that conflicts with the key's",
            edit("p(95) < 500ms", "\"rate(check_failed{step:other}) < 0.01\""),
            "conflicts with the key's {step:home}",
        ),
        (
            "a target from an environment variable no one set",
            edit(
                "target: http://127.0.0.1:8080",
                "target: \"{{env.THRONG_SCHEMA_TEST_BASE}}\"",
            ),
            "{{env.THRONG_SCHEMA_TEST_BASE}} is not set",
        ),
        (
            "a flow without a request",
            edit(
                "      - request:\n          name: home\n          path: /\n          expect: [200]",
                "      - think: 1s",
            ),
            "makes no request",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, yaml, message) in &cases {
        match parse(yaml) {
            Err(e) if e.message.contains(message) => {}
            Err(e) => wrong.push(format!("{what}: the parser says '{e}', expected '{message}'")),
            Ok(_) => wrong.push(format!("{what}: the parser accepts it")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A fragment of the reference placed where it belongs in a file, for the
/// schema; None for outlines (with `...`).
fn in_a_file(fragment: &str) -> Option<String> {
    const HEAD: &str = "target: https://127.0.0.1:8443\n";
    const SCENARIO: &str = "scenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n";
    const FLOW: &str = "    flow: [{ request: { path: / } }]\n";
    let indent = |n: usize| -> String { fragment.lines().map(|l| format!("{:n$}{l}\n", "")).collect() };
    let first = fragment.lines().find(|l| !l.trim().is_empty() && !l.starts_with('#'))?;
    if fragment.contains("...") {
        return None;
    }
    Some(if first.starts_with("target:") {
        format!("{fragment}{SCENARIO}{FLOW}")
    } else if first.starts_with("executor:") {
        format!("{HEAD}scenarios:\n  s:\n{}{FLOW}", indent(4))
    } else if first.starts_with("flow:") {
        format!("{HEAD}{SCENARIO}{}", indent(4))
    } else if first.starts_with("- ") {
        format!("{HEAD}{SCENARIO}    flow:\n{}", indent(6))
    } else if first.starts_with("check:") || first.starts_with("capture:") {
        format!(
            "{HEAD}{SCENARIO}    flow:\n      - request:\n          path: /\n{}",
            indent(10)
        )
    } else {
        format!("{HEAD}{fragment}{SCENARIO}{FLOW}")
    })
}

/// The complete files in the reference (```yaml blocks with `target:` and
/// `scenarios:`) pass both; the fragments, put in a file, pass the schema.
#[test]
fn the_reference_examples_pass() {
    let doc = std::fs::read_to_string(format!("{ROOT}/docs/guide/src/scenarios.md")).unwrap();
    let v = validator();
    let (mut complete, mut fragments) = (0, 0);
    for block in doc.split("```yaml\n").skip(1) {
        let yaml = block.split("```").next().unwrap_or_default();
        let top = |key: &str| yaml.lines().any(|l| l.starts_with(key));
        if top("target:") && top("scenarios:") {
            complete += 1;
            let problems = violations(&v, yaml);
            assert!(
                problems.is_empty(),
                "docs/guide/src/scenarios.md example:\n{yaml}\nschema violations: {problems:#?}"
            );
            if let Err(e) = parse(yaml) {
                panic!("docs/guide/src/scenarios.md example:\n{yaml}\nthe parser rejects it: {e}");
            }
        } else if let Some(file) = in_a_file(yaml) {
            fragments += 1;
            let problems = violations(&v, &file);
            assert!(
                problems.is_empty(),
                "docs/guide/src/scenarios.md fragment:\n{yaml}\nas:\n{file}\nschema violations: {problems:#?}"
            );
        }
    }
    assert!(
        complete >= 1 && fragments >= 15,
        "docs/guide/src/scenarios.md: {complete} complete examples, {fragments} fragments"
    );
}
