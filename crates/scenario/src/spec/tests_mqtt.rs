//! `mqtt:` steps: what the file says, validated; mistakes at their line.

use std::time::Duration;

use super::*;

const MQTT: &str = r#"
target: http://127.0.0.1:8080
scenarios:
  sensors:
    executor: per-vu-iterations
    vus: 1
    iterations: 1
    flow:
      - mqtt:
          url: mqtt://127.0.0.1:1883
          version: 5
          user: alice
          password: "{{env.MQTT_PASSWORD}}"
          keepalive: 30s
          keep: true
          messages:
            - subscribe: 'sensors/{{vu}}/#'
              qos: 1
            - publish: 'sensors/{{vu}}/temp'
              payload: '{"id": "{{vu}}-{{iter}}", "t": 21}'
              qos: 1
              retain: false
            - expect: { topic: 'sensors/+/temp', payload: '"t": 21' }
              capture: { id: { json: /id } }
      - request: { path: '/seen/{{id}}' }
"#;

fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "t.yaml", &|f| match f {
        "body.json" => Ok("{\"from\": \"file\"}".to_string()),
        "big.bin" => Ok("x".repeat(MAX_MQTT_PAYLOAD + 1)),
        _ => Err(format!("no file {f} in tests")),
    })
}

fn mqtt(plan: &ScenarioPlan, i: usize) -> &MqttStep {
    match &plan.scenarios[0].flow[i] {
        Step::Mqtt(m) => m,
        other => panic!("not an mqtt step: {other:?}"),
    }
}

fn with_step(step: &str) -> String {
    let body: String = step.lines().map(|l| format!("      {l}\n")).collect();
    format!(
        "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    \
         iterations: 1\n    flow:\n{body}"
    )
}

#[test]
fn an_mqtt_step_validates_with_its_defaults() {
    let plan = parse(MQTT).unwrap();
    let m = mqtt(&plan, 0);
    assert_eq!(m.name, "MQTT mqtt://127.0.0.1:1883");
    assert_eq!((m.host.as_str(), m.port, m.tls), ("127.0.0.1", 1883, false));
    assert_eq!(m.version, MqttVersion::V5);
    assert_eq!(m.keepalive, Duration::from_secs(30));
    assert!(m.clean_start && m.keep);
    assert_eq!(m.client_id.source(), "throng-{{scenario}}-{{vu}}");
    assert_eq!(m.messages.len(), 3);
    assert!(matches!(&m.messages[0], MqttMessage::Subscribe { qos: 1, .. }));
    assert!(matches!(
        &m.messages[1],
        MqttMessage::Publish {
            qos: 1,
            retain: false,
            ..
        }
    ));
    let MqttMessage::Expect { topic, regex, captures } = &m.messages[2] else {
        panic!("an expect");
    };
    assert_eq!(topic.as_ref().map(|t| t.source()), Some("sensors/+/temp"));
    assert!(regex.is_some());
    assert_eq!(captures[0].var, "id");
    assert_eq!(plan.env_names(), vec!["MQTT_PASSWORD".to_string()]);
}

#[test]
fn the_password_is_redacted_in_results() {
    let text = with_step(
        "- mqtt:\n    url: mqtt://localhost\n    user: u\n    password: hunter2-secret\n    messages: [{ publish: t, payload: x }]",
    );
    let plan = parse(&text).unwrap();
    assert_eq!(mqtt(&plan, 0).port, 1883);
    let shown = serde_json::to_string(&plan.redacted()).unwrap();
    assert!(!shown.contains("hunter2-secret"), "{shown}");
    assert!(shown.contains("redacted"), "{shown}");
}

#[test]
fn a_payload_file_is_read_once_and_bounded() {
    let plan = parse(&with_step(
        "- mqtt:\n    url: mqtts://broker:8884\n    messages: [{ publish: t, payload_file: body.json, qos: 2 }]",
    ))
    .unwrap();
    let m = mqtt(&plan, 0);
    assert!(m.tls);
    let MqttMessage::Publish {
        payload: MqttPayload::File { data, .. },
        ..
    } = &m.messages[0]
    else {
        panic!("a file payload");
    };
    assert_eq!(data, b"{\"from\": \"file\"}");
    let e = parse(&with_step(
        "- mqtt:\n    url: mqtt://b\n    messages: [{ publish: t, payload_file: big.bin }]",
    ))
    .unwrap_err();
    assert!(e.message.contains("at most"), "{e}");
    let e = parse(&with_step(
        "- mqtt:\n    url: mqtt://b\n    messages: [{ publish: t, payload_file: none.bin }]",
    ))
    .unwrap_err();
    assert!(e.message.contains("cannot read 'none.bin'"), "{e}");
}

#[test]
fn a_broker_over_websocket_keeps_its_path_and_default_port() {
    for (url, tls, host, port, path) in [
        ("ws://127.0.0.1:8080/mqtt", false, "127.0.0.1", 8080, "/mqtt"),
        ("wss://broker/mqtt?v=1", true, "broker", 443, "/mqtt?v=1"),
        ("ws://[::1]", false, "::1", 80, "/"),
        ("ws://b?x=1", false, "b", 80, "/?x=1"),
    ] {
        let plan = parse(&with_step(&format!("- mqtt: {{ url: '{url}' }}"))).unwrap();
        let m = mqtt(&plan, 0);
        assert_eq!(
            (m.tls, m.host.as_str(), m.port, m.websocket.as_deref()),
            (tls, host, port, Some(path)),
            "{url}"
        );
    }
    assert_eq!(mqtt(&parse(MQTT).unwrap(), 0).websocket, None);
}

#[test]
fn mistakes_are_said_at_their_place() {
    let cases = [
        ("- mqtt: { url: 'http://b' }", "not mqtt://, mqtts://, ws:// or wss://"),
        ("- mqtt: { url: 'ws://u:pw@b/mqtt' }", "has credentials"),
        ("- mqtt: { url: 'wss://b/mqtt#top' }", "a fragment"),
        ("- mqtt: { url: 'ws://:80/mqtt' }", "the host is missing"),
        ("- mqtt: { url: 'mqtt://u:pw@b' }", "has credentials"),
        ("- mqtt: { url: 'mqtt://b:0' }", "the port is 1 to 65535"),
        ("- mqtt: { url: 'mqtt://b/x' }", "no path"),
        ("- mqtt: { url: 'mqtt://b', version: 4.5 }", "not an MQTT version"),
        ("- mqtt: { url: 'mqtt://b', keepalive: 1.5s }", "whole seconds"),
        ("- mqtt: { url: 'mqtt://b', password: x }", "goes with user:"),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - publish: a/+\n",
            "without wildcards",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - publish: a\n        qos: 3\n",
            "qos is 0, 1 or 2",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - subscribe: a\n        retain: true\n",
            "retain: goes with publish:",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - expect: { topic: a }\n        qos: 1\n",
            "qos: goes with",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - expect: {}\n",
            "needs topic:",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - expect: { payload: '(' }\n",
            "is a regex",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - publish: a\n        subscribe: b\n",
            "exactly one of",
        ),
        (
            "- mqtt:\n    url: mqtt://b\n    messages:\n      - publish: 'x/{{later}}'\n",
            "not defined",
        ),
    ];
    for (step, want) in cases {
        let e = parse(&with_step(step)).unwrap_err();
        assert!(e.message.contains(want), "{step}: {e}");
        assert!(e.line >= 8, "{step}: at the step, not the top: {e}");
    }
}

#[test]
fn an_mqtt_capture_feeds_only_later_steps() {
    let text = with_step(
        "- request: { path: '/x/{{id}}' }\n- mqtt:\n    url: mqtt://b\n    messages:\n      - expect: { topic: t }\n        capture: { id: { regex: '(\\d+)' } }",
    );
    let e = parse(&text).unwrap_err();
    assert!(e.message.contains("before step 'MQTT mqtt://b' captures it"), "{e}");
}
