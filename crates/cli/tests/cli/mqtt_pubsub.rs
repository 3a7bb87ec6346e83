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
