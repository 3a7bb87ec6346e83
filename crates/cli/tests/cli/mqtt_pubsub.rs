//! `throng mqtt`: publishers and subscribers on a real broker (mosquitto),
//! each run's books checked: every message published to a topic a
//! subscriber matches is received by it (or counted lost), and the
//! delivery histogram holds one sample per message received.

#![allow(clippy::unwrap_used)]

use throng_result::{Plan, RunResult};

use crate::common::{self, assert_books_balance};
use crate::mqtt::Mosquitto;

/// Runs `throng mqtt URL ARGS` and returns its exit code and result.
fn mqtt(url: &str, args: &[&str]) -> common::Run {
    let mut all = vec![url];
    all.extend_from_slice(args);
    common::command("mqtt", &all)
}

/// The books of a run that should have lost nothing: `per_subscriber`
/// messages each for `subscribers` subscribers.
pub fn assert_all_delivered(r: &RunResult, published: u64, subscribers: u64, per_subscriber: u64) {
    assert_books_balance(r);
    let m = &r.measurements;
    let b = m.pubsub.as_ref().expect("measurements.pubsub");
    assert_eq!(b.published, published, "{b:?}");
    assert_eq!(m.requests.attempted, published);
    assert_eq!(m.requests.ok, published, "{:?}", m.requests.errors);
    assert_eq!(b.expected, subscribers * per_subscriber, "{b:?}");
    assert_eq!((b.received, b.lost, b.duplicated), (b.expected, 0, 0), "{b:?}");
    assert_eq!(b.subscribers.len() as u64, subscribers);
    assert!(b.balanced());
    for s in &b.subscribers {
        assert_eq!(
            (s.expected, s.received, s.lost),
            (per_subscriber, per_subscriber, 0),
            "{s:?}"
        );
    }
    let delivery = m.phase("delivery").expect("a delivery phase");
    assert_eq!(delivery.count(), b.received);
    assert!(matches!(r.plan, Plan::Mqtt(_)));
}

#[test]
fn fan_out_at_qos_1_delivers_every_message_to_every_subscriber() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let run = mqtt(
        &url,
        &[
            "--publishers",
            "2",
            "--subscribers",
            "4",
            "--topic",
            "bench/{{n}}",
            "-n",
            "200",
            "--qos",
            "1",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_all_delivered(r, 200, 4, 200);
    let m = &r.measurements;
    assert_eq!(m.pubsub.as_ref().unwrap().acknowledged, 200);
    assert_eq!(m.phase("puback").unwrap().count(), 200);
    assert_eq!((m.connections.attempted, m.connections.ok), (6, 6));
    assert_eq!(m.phase("subscribe").unwrap().count(), 4);
    let text = run.stdout();
    assert!(text.contains("800 expected, 800 received, 0 lost"), "{text}");
    assert_schema_valid(&run);
}

#[test]
fn pairs_at_qos_0_deliver_each_publishers_messages_to_its_own_subscriber() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let run = mqtt(
        &url,
        &["--publishers", "3", "--fan", "pairs", "-n", "300", "--payload", "100"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // Each subscriber hears only its pair: 100 messages each.
    assert_all_delivered(run.result(), 300, 3, 100);
    assert!(run.result().measurements.phase("puback").is_none());
}

/// The run's result document validates against schema/result.schema.json.
fn assert_schema_valid(run: &common::Run) {
    let schema_text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../schema/result.schema.json")).unwrap();
    let schema: serde_json::Value = serde_json::from_str(&schema_text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&run.json).unwrap()).unwrap();
    let problems: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
}

#[test]
fn fan_in_at_qos_2_on_a_schedule_completes_every_handshake() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let run = mqtt(
        &url,
        &[
            "--publishers",
            "3",
            "--subscribers",
            "2",
            "--fan",
            "in",
            "--topic",
            "ingest",
            "--qos",
            "2",
            "--rate",
            "300",
            "-n",
            "150",
            "--mqtt-version",
            "5",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let b = m.pubsub.as_ref().unwrap();
    // Every slot of the schedule was published or dropped (a window full
    // when it fell due), never both.
    assert_eq!(b.published + m.dropped, 150, "{b:?}");
    assert_eq!(b.expected, 2 * b.published);
    assert_eq!((b.received, b.lost, b.duplicated), (b.expected, 0, 0), "{b:?}");
    assert_eq!(b.acknowledged, b.published);
    assert_eq!(m.phase("pubrec").unwrap().count(), b.published);
    assert_eq!(m.phase("pubcomp").unwrap().count(), b.published);
    assert_eq!(m.phase("schedule_lag").unwrap().count(), b.published);
    assert_eq!(m.phase("delivery").unwrap().count(), b.received);
    assert!(r.coordinated_omission_free);
    assert_schema_valid(&run);
}

#[test]
fn a_retained_message_of_an_earlier_run_is_foreign_not_received() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.txt");
    std::fs::write(&data, "sensor reading 42").unwrap();
    let data_arg = format!("@{}", data.display());
    let args = [
        "--publishers",
        "1",
        "--subscribers",
        "2",
        "--topic",
        "kept",
        "--retain",
        "--data",
        &data_arg,
        "-d",
        "1s",
        "--rate",
        "50",
        "--qos",
        "1",
    ];
    let first = mqtt(&url, &args);
    assert_eq!(first.code(), 0, "{}", first.stderr());
    let Plan::Mqtt(p) = &first.result().plan else {
        panic!("an mqtt plan")
    };
    assert_eq!(p.payload, 26 + 17);
    let b = first.result().measurements.pubsub.as_ref().unwrap();
    assert!(b.published > 0);
    assert_eq!((b.received, b.lost, b.foreign), (2 * b.published, 0, 0), "{b:?}");
    // The broker kept the first run's last message: each subscriber of the
    // second run gets it on subscribing, and it is not counted as received.
    let second = mqtt(&url, &args);
    assert_eq!(second.code(), 0, "{}", second.stderr());
    let b = second.result().measurements.pubsub.as_ref().unwrap();
    assert_eq!(b.foreign, 2, "{b:?}");
    assert_eq!((b.received, b.lost), (2 * b.published, 0), "{b:?}");
    assert_books_balance(second.result());
}

#[test]
fn a_wrong_password_fails_every_connection_in_connack_and_never_shows() {
    let dir = tempfile::tempdir().unwrap();
    let file = Mosquitto::password_file(dir.path(), "dev", "s3cret-pw");
    let broker = Mosquitto::start(&format!("allow_anonymous false\npassword_file {}", file.display()));
    let wrong = mqtt(
        &format!("mqtt://dev:nope-pw@127.0.0.1:{}", broker.port),
        &["--publishers", "2", "--subscribers", "3", "-n", "10"],
    );
    assert_eq!(wrong.code(), 1, "{}", wrong.stderr());
    let r = wrong.result();
    assert_books_balance(r);
    let c = &r.measurements.connections;
    // The subscribers connect first; with none, nothing is published.
    assert_eq!(c.error("mqtt.connack.not_authorized"), 3, "{:?}", c.errors);
    assert_eq!((c.attempted, c.ok, r.measurements.requests.attempted), (3, 0, 0));
    let text = std::fs::read_to_string(&wrong.json).unwrap();
    for shown in [text, wrong.stdout(), wrong.stderr()] {
        assert!(!shown.contains("nope-pw") && !shown.contains("s3cret-pw"), "{shown}");
    }
    let right = mqtt(
        &format!("mqtt://dev:s3cret-pw@127.0.0.1:{}", broker.port),
        &["--publishers", "2", "--subscribers", "3", "-n", "10", "--qos", "1"],
    );
    assert_eq!(right.code(), 0, "{}", right.stderr());
    assert_all_delivered(right.result(), 10, 3, 10);
}

#[test]
fn wrong_flags_and_endless_data_are_refused_before_anything_runs() {
    for (args, said) in [
        (vec!["--data", "@/dev/zero"], "--data @/dev/zero: holds more than"),
        (vec!["--qos", "3"], "--qos: 3 is not 0, 1 or 2"),
        (vec!["--publishers", "2", "--topic", "one"], "put {{n}} in it"),
        (vec!["--payload", "8"], "26 bytes of header"),
        (
            vec!["--fan", "pairs", "--publishers", "2", "--subscribers", "3"],
            "as many subscribers as publishers",
        ),
        (
            vec!["--csv-requests", "rows.csv"],
            "--csv-requests: throng mqtt does not log",
        ),
        (vec!["--format", "ab"], "an MQTT run is shown as text or json"),
        (vec!["--data", "@-"], "--data @-: throng mqtt does not read stdin"),
        (vec!["--threshold", "dropped: rate < 1%"], "--threshold"),
    ] {
        let mut all = vec!["mqtt://127.0.0.1:1"];
        all.extend(args);
        let run = common::command("mqtt", &all);
        assert_eq!(run.code(), 2, "{all:?}: {}", run.stderr());
        assert!(run.stderr().contains(said), "{all:?}: {}", run.stderr());
    }
}

#[test]
fn thresholds_judge_the_delivery_phase_and_no_data_fails() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let run = mqtt(
        &url,
        &[
            "--publishers",
            "1",
            "--subscribers",
            "1",
            "-n",
            "50",
            "--qos",
            "1",
            "--threshold",
            "delivery: p(50) < 10s",
            "--threshold",
            "delivery: max < 1us",
            "--threshold",
            "pubrec: p(99) < 10s",
        ],
    );
    assert_eq!(run.code(), 99, "{}", run.stderr());
    let verdicts: Vec<(&str, bool)> = run
        .result()
        .thresholds
        .iter()
        .map(|v| (v.threshold.as_str(), v.passed))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("delivery: p(50) < 10s", true),
            ("delivery: max < 1us", false),
            ("pubrec: p(99) < 10s", false)
        ]
    );
}

#[test]
fn brokers_that_misbehave_at_connect_fail_every_subscriber_in_its_class() {
    for (fault, class) in [
        ("mqtt-no-connack", "timeout.handshake"),
        ("mqtt-bad-password", "mqtt.connack.bad_username_or_password"),
        ("mqtt-bad-length", "mqtt.protocol"),
        ("mqtt-oversized", "mqtt.packet_too_large"),
    ] {
        let lab = common::FaultServer::start(fault);
        let run = mqtt(
            &format!("mqtt://u:p@127.0.0.1:{}", lab.port),
            &[
                "--publishers",
                "2",
                "--subscribers",
                "3",
                "-n",
                "10",
                "--timeout",
                "500ms",
            ],
        );
        assert!(!run.stderr().contains("panicked"), "{fault}: {}", run.stderr());
        assert_eq!(run.code(), 1, "{fault}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let c = &r.measurements.connections;
        assert_eq!((c.attempted, c.error(class)), (3, 3), "{fault}: {:?}", c.errors);
        assert!(run.stderr().contains(class), "{fault}: {}", run.stderr());
    }
}

/// mosquitto lets everyone read `throng/#` but write only `throng/1`:
/// publisher 2's messages never reach a subscriber. In 3.1.1 the broker
/// acknowledges them all the same, and every subscriber counts them lost;
/// in MQTT 5 it refuses them in PUBACK, and no subscriber expects them.
#[test]
fn messages_a_broker_drops_are_lost_and_ones_it_refuses_are_not_expected() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    std::fs::write(&acl, "topic read throng/#\ntopic write throng/1\n").unwrap();
    let broker = Mosquitto::start(&format!("acl_file {}", acl.display()));
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let args = [
        "--publishers",
        "2",
        "--subscribers",
        "3",
        "-n",
        "100",
        "--qos",
        "1",
        "--drain",
        "500ms",
    ];
    let mut v311 = args.to_vec();
    v311.extend(["--mqtt-version", "3.1.1"]);
    let run = mqtt(&url, &v311);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_books_balance(run.result());
    let b = run.result().measurements.pubsub.as_ref().unwrap();
    assert_eq!((b.published, b.refused, b.expected), (100, 0, 300), "{b:?}");
    assert_eq!((b.received, b.lost), (150, 150), "{b:?}");
    assert!(b.balanced());
    for s in &b.subscribers {
        assert_eq!((s.expected, s.received, s.lost), (100, 50, 50), "{s:?}");
    }
    assert_eq!(run.result().measurements.phase("delivery").unwrap().count(), 150);
    assert!(
        run.stdout().contains("300 expected, 150 received, 150 lost"),
        "{}",
        run.stdout()
    );

    let mut v5 = args.to_vec();
    v5.extend(["--mqtt-version", "5"]);
    let run = mqtt(&url, &v5);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let b = r.measurements.pubsub.as_ref().unwrap();
    assert_eq!((b.published, b.refused, b.expected), (100, 50, 150), "{b:?}");
    assert_eq!((b.received, b.lost), (150, 0), "{b:?}");
    assert_eq!(r.measurements.requests.error("mqtt.puback.refused"), 50);
    assert_eq!(r.measurements.requests.ok, 50);
    assert_schema_valid(&run);
}

/// `--drain 0s` waits for no acknowledgement: the QoS 1 messages whose
/// PUBACK was still in flight when publishing stopped are counted
/// unacknowledged, by name, and every message is in exactly one of
/// acknowledged, refused and unacknowledged.
#[test]
fn with_drain_0s_every_qos_1_message_is_acknowledged_or_counted_unacknowledged() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    for _ in 0..3 {
        let run = mqtt(
            &url,
            &[
                "--publishers",
                "2",
                "--subscribers",
                "2",
                "-n",
                "3000",
                "--qos",
                "1",
                "--window",
                "64",
                "--drain",
                "0s",
            ],
        );
        assert!(run.code() <= 1, "{}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let m = &r.measurements;
        let b = m.pubsub.as_ref().unwrap();
        assert_eq!(m.requests.attempted, b.published);
        assert_eq!(b.published, 3000, "{b:?}");
        assert_eq!(b.acknowledged + b.refused + b.unacknowledged, b.published, "{b:?}");
        assert_eq!(m.requests.ok, b.acknowledged, "{:?}", m.requests.errors);
        assert_eq!(
            m.requests.error("mqtt.unacknowledged"),
            b.unacknowledged,
            "{:?}",
            m.requests.errors
        );
        assert_eq!(m.requests.failed(), b.unacknowledged, "{:?}", m.requests.errors);
        assert_eq!(m.phase("puback").unwrap().count(), b.acknowledged);
        if b.unacknowledged > 0 {
            assert!(run.stdout().contains("mqtt.unacknowledged"), "{}", run.stdout());
            assert!(
                run.stdout().contains("unacknowledged (no acknowledgement by the end)"),
                "{}",
                run.stdout()
            );
        }
        assert_schema_valid(&run);
    }
}

#[test]
fn a_v5_brokers_receive_maximum_bounds_the_window() {
    // mosquitto tells MQTT 5 clients its max_inflight_messages as the
    // CONNACK's Receive Maximum; more unacknowledged is a protocol error.
    let broker = Mosquitto::start("max_inflight_messages 5\n");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let run = mqtt(
        &url,
        &[
            "--publishers",
            "2",
            "--subscribers",
            "1",
            "-n",
            "400",
            "--qos",
            "1",
            "--window",
            "100",
            "--mqtt-version",
            "5",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_all_delivered(run.result(), 400, 1, 400);
    assert_eq!(run.result().measurements.pubsub.as_ref().unwrap().acknowledged, 400);
    let text = run.stdout();
    assert!(
        text.contains("the broker takes at most 5 unacknowledged messages a client (its Receive Maximum): publishers kept 5 in flight, not --window 100"),
        "{text}"
    );
    assert!(run.result().notes.iter().any(|n| n.contains("Receive Maximum")));
}
