//! Scenario `mqtt:` steps against mosquitto, with the lab for the HTTP
//! steps a capture feeds: requests (one per expect), classes, phases and
//! connections counted exactly; the password in no output.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::mqtt::Mosquitto;
use std::path::Path;

use common::{assert_books_balance, lab, output, schema_violations, throng};
use throng_result::RunResult;

/// `throng run` on `yaml` with TARGET and BROKER replaced: exit code,
/// result, stdout and stderr, the result file's text.
fn run(yaml: &str, target: &str, broker: &str) -> (i32, RunResult, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml.replace("TARGET", target).replace("BROKER", broker)).unwrap();
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json));
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no result: {shown}"));
    assert_eq!(schema_violations(&json), Vec::<String>::new());
    let r = RunResult::from_reader(text.as_bytes()).unwrap();
    (out.status.code().unwrap_or(-1), r, shown, text)
}

/// (requests, failed) of a tag.
fn tag(r: &RunResult, key: &str) -> (u64, u64) {
    let s = r.measurements.scenario.as_ref().unwrap();
    s.tags.get(key).map_or((0, 0), |t| (t.requests, t.failed))
}

fn phase(r: &RunResult, name: &str) -> u64 {
    r.measurements.phases.get(name).map_or(0, |h| h.count())
}

const ROUND_TRIP: &str = r#"
target: TARGET
scenarios:
  sensors:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    flow:
      - mqtt:
          url: BROKER
          name: sensor
          version: VERSION
          client_id: 'sensor-{{vu}}'
          keep: KEEP
          timeout: 5s
          messages:
            - subscribe: 'sensors/{{vu}}/#'
              qos: QOS
            - publish: 'sensors/{{vu}}/temp'
              payload: '{"code": 20{{vu}}, "iter": {{iter}}}'
              qos: QOS
            - expect: { topic: 'sensors/{{vu}}/+', payload: '"code": 20\d' }
              capture: { code: { json: /code } }
      - request: { path: '/status/{{code}}', name: status, expect: [201, 202] }
"#;

#[test]
fn a_vu_expects_its_own_message_and_its_capture_feeds_the_next_request() {
    let server = lab(None);
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    for (version, qos, keep) in [("5", "1", "true"), ("3.1.1", "2", "false")] {
        let yaml = ROUND_TRIP
            .replace("VERSION", version)
            .replace("QOS", qos)
            .replace("KEEP", keep);
        let (code, r, shown, _) = run(&yaml, &format!("http://{}", server.addr()), &url);
        let at = format!("{version} qos {qos} keep {keep}: {shown}");
        assert_eq!(code, 0, "{at}");
        assert_books_balance(&r);
        let m = &r.measurements;
        // 6 iterations: the expect (the mqtt step's one request) and the
        // HTTP request its capture names.
        assert_eq!((m.requests.attempted, m.requests.ok), (12, 12), "{at}");
        assert_eq!(tag(&r, "step:sensor"), (6, 0), "{at}");
        assert_eq!(tag(&r, "step:status"), (6, 0), "{at}");
        // Each VU's own code came back through the broker.
        assert_eq!(m.status.get(&201), Some(&3), "{at}");
        assert_eq!(m.status.get(&202), Some(&3), "{at}");
        assert_eq!(phase(&r, "subscribe"), 6, "{at}");
        // Every expect's round trip is the step's figure, besides the
        // HTTP requests'.
        assert_eq!(phase(&r, "response"), 12, "{at}");
        assert_eq!(
            m.scenario.as_ref().unwrap().tags["step:sensor"].response.count(),
            6,
            "{at}"
        );
        let sessions = if keep == "true" { 2 } else { 6 };
        assert_eq!(phase(&r, "handshake"), sessions, "{at}");
        // The broker's sessions and each VU's keep-alive HTTP connection.
        assert_eq!(m.connections.attempted, sessions + 2, "{at}");
        if qos == "1" {
            assert_eq!((phase(&r, "puback"), phase(&r, "pubrec")), (6, 0), "{at}");
        } else {
            assert_eq!(
                (phase(&r, "pubrec"), phase(&r, "pubcomp"), phase(&r, "puback")),
                (6, 6, 0),
                "{at}"
            );
        }
    }
}

#[test]
fn an_expectation_that_never_arrives_is_a_timeout_and_the_books_balance() {
    let server = lab(None);
    let broker = Mosquitto::start("");
    let yaml = r#"
target: TARGET
scenarios:
  quiet:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - mqtt:
          url: BROKER
          name: quiet
          timeout: 300ms
          messages:
            - subscribe: 'quiet/{{vu}}'
            - publish: 'elsewhere/{{vu}}'
              payload: nobody listens
            - expect: { topic: 'quiet/{{vu}}' }
            - publish: 'after/{{vu}}'
      - request: { path: /, name: home }
"#;
    let (_, r, shown, _) = run(
        yaml,
        &format!("http://{}", server.addr()),
        &format!("mqtt://127.0.0.1:{}", broker.port),
    );
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted, 8, "{shown}");
    assert_eq!(m.requests.errors.get("timeout.response"), Some(&4), "{shown}");
    assert_eq!(m.requests.ok, 4, "{shown}");
    assert_eq!(tag(&r, "step:quiet"), (4, 4), "{shown}");
    assert_eq!(tag(&r, "step:home"), (4, 0), "{shown}");
    // Each session connected and ended: none left open.
    assert_eq!(phase(&r, "handshake"), 4, "{shown}");
    // The HTTP requests only: no expect matched.
    assert_eq!(phase(&r, "response"), 4, "{shown}");
}

#[test]
fn a_wrong_password_is_the_connack_class_and_never_shows() {
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = Mosquitto::password_file(dir.path(), "dev", "s3cret-pw");
    let broker = Mosquitto::start(&format!("allow_anonymous false\npassword_file {}", file.display()));
    let yaml = r#"
target: TARGET
scenarios:
  login:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - mqtt:
          url: BROKER
          name: login
          version: VERSION
          user: dev
          password: PASSWORD
          messages:
            - publish: 'in/{{vu}}'
              payload: hello
              qos: 1
"#;
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let target = format!("http://{}", server.addr());
    for version in ["3.1.1", "5"] {
        let wrong = yaml.replace("VERSION", version).replace("PASSWORD", "nope-pw");
        let (_, r, shown, text) = run(&wrong, &target, &url);
        assert_books_balance(&r);
        let m = &r.measurements;
        assert_eq!(m.requests.attempted, 4, "{version}: {shown}");
        assert_eq!(
            m.requests.errors.get("mqtt.connack.not_authorized"),
            Some(&4),
            "{version}: {shown}"
        );
        assert_eq!(tag(&r, "step:login"), (4, 4), "{version}: {shown}");
        assert_eq!(phase(&r, "puback"), 0, "{version}: {shown}");
        for out in [&shown, &text] {
            assert!(!out.contains("nope-pw"), "{version}: the password reached an output");
        }
        assert!(text.contains("<redacted>"), "{version}");

        let right = yaml.replace("VERSION", version).replace("PASSWORD", "s3cret-pw");
        let (code, r, shown, text) = run(&right, &target, &url);
        assert_eq!(code, 0, "{version}: {shown}");
        assert_eq!(
            (r.measurements.requests.attempted, r.measurements.requests.ok),
            (4, 4),
            "{shown}"
        );
        assert_eq!(phase(&r, "puback"), 4, "{version}: {shown}");
        assert!(!shown.contains("s3cret-pw") && !text.contains("s3cret-pw"));
    }
}

#[test]
fn an_mqtts_broker_is_reached_with_the_files_tls_settings() {
    let server = lab(None);
    let (_certs_dir, certs) = common::certs();
    let c = |f: &str| certs.join(f).display().to_string();
    let broker = Mosquitto::start(&format!(
        "cafile {}\ncertfile {}\nkeyfile {}",
        c("ca.pem"),
        c("server.pem"),
        c("server.key")
    ));
    let yaml = format!(
        r#"
target: TARGET
tls: {{ cacert: {} }}
scenarios:
  secure:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - mqtt:
          url: BROKER
          name: secure
          keep: true
          messages:
            - subscribe: 'tls/{{{{vu}}}}'
            - publish: 'tls/{{{{vu}}}}'
              payload: 'over tls {{{{iter}}}}'
              qos: 1
            - expect: {{ payload: 'over tls' }}
"#,
        c("ca.pem")
    );
    let url = format!("mqtts://localhost:{}", broker.port);
    let (code, r, shown, _) = run(&yaml, &format!("http://{}", server.addr()), &url);
    assert_eq!(code, 0, "{shown}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (4, 4), "{shown}");
    // One session per VU, kept: TLS and CONNECT once each.
    assert_eq!((phase(&r, "tls"), phase(&r, "handshake")), (2, 2), "{shown}");
    assert_eq!(phase(&r, "puback"), 4, "{shown}");
}

/// Over WebSocket: rumqttd's WebSocket listener (ws://), and through
/// nginx's TLS (wss://, with the file's `tls:`): the upgrade once per kept
/// session, a round trip each iteration, and pings through the binary
/// messages while the VU thinks past 1.5 × its keep-alive. A path nginx
/// does not proxy is its 404, in the step's class.
#[test]
fn a_broker_over_websocket_is_reached_by_ws_and_wss() {
    let server = lab(None);
    let broker = crate::rumqttd::Rumqttd::start();
    let (_certs_dir, certs) = common::certs();
    let nginx = common::nginx_wss(&certs, broker.ws);
    let ca = certs.join("ca.pem").display().to_string();
    let yaml = r#"
target: TARGET
TLS
scenarios:
  web:
    executor: per-vu-iterations
    vus: 2
    iterations: 2
    flow:
      - mqtt:
          url: BROKER
          name: web
          client_id: 'web-{{vu}}'
          keepalive: 1s
          keep: true
          messages:
            - subscribe: 'web/{{vu}}'
              qos: 1
            - publish: 'web/{{vu}}'
              payload: 'over websocket {{iter}}'
              qos: 1
            - expect: { topic: 'web/{{vu}}', payload: 'over websocket' }
      - think: 2s
"#;
    let target = format!("http://{}", server.addr());
    for url in [
        format!("ws://127.0.0.1:{}/mqtt", broker.ws),
        format!("wss://localhost:{}/ws", nginx.port),
    ] {
        let tls = if url.starts_with("wss") {
            format!("tls: {{ cacert: {ca} }}")
        } else {
            String::new()
        };
        let (code, r, shown, _) = run(&yaml.replace("TLS", &tls), &target, &url);
        assert_eq!(code, 0, "{url}: {shown}");
        assert_books_balance(&r);
        let m = &r.measurements;
        assert_eq!((m.requests.attempted, m.requests.ok), (4, 4), "{url}: {shown}");
        // One session a VU, kept through a think of 2 s: one upgrade and
        // one CONNECT each.
        assert_eq!((phase(&r, "upgrade"), phase(&r, "handshake")), (2, 2), "{url}: {shown}");
        assert_eq!(phase(&r, "tls"), if url.starts_with("wss") { 2 } else { 0 }, "{url}");
        assert_eq!(phase(&r, "puback"), 4, "{url}: {shown}");
    }
    let elsewhere = format!("wss://localhost:{}/mqtt", nginx.port);
    let tls = format!("tls: {{ cacert: {ca} }}");
    let (code, r, shown, _) = run(&yaml.replace("TLS", &tls), &target, &elsewhere);
    assert_eq!(code, 1, "{shown}");
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.error("ws.upgrade_refused.404"), 4, "{shown}");
}

#[test]
fn the_docs_sensors_example_runs_as_written_against_mosquitto_and_the_lab() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"))
        .unwrap();
    let yaml = doc
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.starts_with("# sensors.yaml"))
        .expect("a ```yaml block starting with # sensors.yaml in docs/guide/src/scenarios.md")
        .replace("http://127.0.0.1:8080", "TARGET")
        .replace("mqtt://127.0.0.1:1883", "BROKER")
        .replace("{{env.MQTT_PASSWORD}}", "docs-pw");
    assert!(yaml.contains("TARGET") && yaml.contains("BROKER") && yaml.contains("docs-pw"));
    let server = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let file = Mosquitto::password_file(dir.path(), "sensor", "docs-pw");
    let broker = Mosquitto::start(&format!("allow_anonymous false\npassword_file {}", file.display()));
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let (code, r, shown, text) = run(&yaml, &format!("http://{}", server.addr()), &url);
    // Its thresholds judge a duration (exit 1 if a busy machine breaks one):
    // only that they were judged is asserted.
    assert!(code == 0 || code == 1, "{shown}");
    assert_eq!(r.thresholds.len(), 2);
    assert_books_balance(&r);
    // 10 VUs × 20 iterations: one expect and one request each.
    assert_eq!(tag(&r, "step:reading"), (200, 0), "{shown}");
    assert_eq!(tag(&r, "step:seen"), (200, 0), "{shown}");
    assert_eq!(r.measurements.status.get(&200), Some(&200), "{shown}");
    // Kept sessions: one CONNECT per VU.
    assert_eq!(phase(&r, "handshake"), 10, "{shown}");
    assert!(!text.contains("docs-pw") && !shown.contains("docs-pw"));
}

/// A kept session with a 1 s keep-alive, idle on the broker for about
/// 3.5 s (a 1.5 s HTTP request, then a 2 s think): mosquitto closes a
/// client silent for 1.5 × its keep-alive, so without PINGREQs between
/// steps the second step would find the session gone (`eof`).
#[test]
fn a_kept_session_pings_through_the_steps_between_and_stays_open() {
    let server = lab(None);
    let mut broker = Mosquitto::start("");
    let yaml = r#"
target: TARGET
scenarios:
  idle:
    executor: per-vu-iterations
    vus: 2
    iterations: 1
    flow:
      - mqtt:
          url: BROKER
          name: hello
          client_id: 'idle-{{vu}}'
          keepalive: 1s
          keep: true
          messages:
            - subscribe: 'idle/{{vu}}'
              qos: 1
      - request: { path: '/delay/1500', name: slow }
      - think: 2s
      - mqtt:
          url: BROKER
          name: back
          keep: true
          messages:
            - publish: 'idle/{{vu}}'
              payload: 'still here'
              qos: 1
            - expect: { topic: 'idle/{{vu}}', payload: 'still here' }
"#;
    let (code, r, shown, _) = run(
        yaml,
        &format!("http://{}", server.addr()),
        &format!("mqtt://127.0.0.1:{}", broker.port),
    );
    assert_eq!(code, 0, "{shown}");
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (6, 6), "{shown}");
    assert_eq!(tag(&r, "step:back"), (2, 0), "{shown}");
    // One CONNECT a VU: the session was kept, not opened again.
    assert_eq!(phase(&r, "handshake"), 2, "{shown}");
    assert_pinged(&mut broker, &["idle-1", "idle-2"]);
}

/// mosquitto closed no client for silence, and each of `clients` sent it
/// at least 2 PINGREQs.
fn assert_pinged(broker: &mut Mosquitto, clients: &[&str]) {
    let log = broker.stop();
    assert!(!log.contains("exceeded timeout"), "{log}");
    for id in clients {
        let pings = log
            .lines()
            .filter(|l| l.contains(&format!("Received PINGREQ from {id}")))
            .count();
        assert!(pings >= 2, "{id}: {pings} PINGREQs:\n{log}");
    }
}

/// An open model's VU kept alive while it waits for its next iteration:
/// one iteration every 3 s, a 1 s keep-alive, the session kept across.
#[test]
fn a_kept_session_pings_while_its_vu_waits_for_the_next_arrival() {
    let server = lab(None);
    let mut broker = Mosquitto::start("");
    let yaml = r#"
target: TARGET
scenarios:
  arrivals:
    executor: constant-arrival-rate
    rate: 1
    time_unit: 3s
    duration: 5s
    pre_allocated_vus: 1
    flow:
      - mqtt:
          url: BROKER
          name: beat
          client_id: 'arrival-{{vu}}'
          keepalive: 1s
          keep: true
          messages:
            - subscribe: 'beat/{{vu}}'
              qos: 1
            - publish: 'beat/{{vu}}'
              payload: 'beat {{iter}}'
              qos: 1
            - expect: { topic: 'beat/{{vu}}' }
"#;
    let (code, r, shown, _) = run(
        yaml,
        &format!("http://{}", server.addr()),
        &format!("mqtt://127.0.0.1:{}", broker.port),
    );
    assert_eq!(code, 0, "{shown}");
    assert_books_balance(&r);
    assert_eq!(tag(&r, "step:beat"), (2, 0), "{shown}");
    assert_eq!(phase(&r, "handshake"), 1, "{shown}");
    assert_pinged(&mut broker, &["arrival-1"]);
}

#[test]
fn a_step_cut_off_by_the_end_of_the_run_is_interrupted_and_its_session_closed() {
    let server = lab(None);
    let broker = Mosquitto::start("");
    let yaml = r#"
target: TARGET
scenarios:
  waiting:
    executor: constant-vus
    vus: 2
    duration: 500ms
    graceful_stop: 200ms
    flow:
      - mqtt:
          url: BROKER
          name: wait
          timeout: 30s
          messages:
            - subscribe: 'never/{{vu}}'
            - expect: { topic: 'never/{{vu}}' }
"#;
    let (_, r, shown, _) = run(
        yaml,
        &format!("http://{}", server.addr()),
        &format!("mqtt://127.0.0.1:{}", broker.port),
    );
    assert_books_balance(&r);
    let m = &r.measurements;
    // Each VU's one step waited past the graceful stop: cut off.
    assert_eq!(m.requests.attempted, 2, "{shown}");
    assert_eq!(m.requests.errors.get("interrupted"), Some(&2), "{shown}");
    assert_eq!(m.connections.ok, 2, "{shown}");
    // Both sessions' ends are on the books.
    assert_eq!(phase(&r, "connection"), 2, "{shown}");
}

#[test]
fn a_mistaken_step_is_a_usage_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    let cases = [
        (
            "url: 'mqtt://dev:s3cret-pw@127.0.0.1:1883'",
            "has credentials",
            "s.yaml:9:",
        ),
        (
            "url: mqtt://127.0.0.1:1883\n          password: s3cret-pw",
            "goes with user:",
            "s.yaml:10:",
        ),
        (
            "url: mqtt://127.0.0.1:1883\n          messages:\n            - publish: 'a/#'",
            "without wildcards",
            "s.yaml:11:",
        ),
    ];
    for (step, what, at) in cases {
        let yaml = format!(
            "target: http://127.0.0.1:1\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - mqtt:\n          {step}\n"
        );
        std::fs::write(&file, &yaml).unwrap();
        let out = output(throng().arg("run").arg(&file));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{yaml}\n{err}");
        assert!(err.contains(what), "{yaml}\n{err}");
        assert!(err.contains(at), "{at}: {err}");
        assert!(!err.contains("s3cret-pw"), "{err}");
    }
}
