//! `throng mqtt` with independent clients on the same mosquitto: what throng
//! publishes is received by `mosquitto_sub`, what `mosquitto_pub` sends on
//! throng's topics is counted by throng's subscribers as foreign (not theirs,
//! never mixed into their books), and publishing with no subscriber at all.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::{self, assert_books_balance};
use crate::mqtt::Mosquitto;

fn mqtt(url: &str, args: &[&str]) -> common::Run {
    let mut all = vec![url];
    all.extend_from_slice(args);
    common::command("mqtt", &all)
}

#[test]
fn mosquitto_sub_receives_every_message_throng_publishes() {
    let broker = Mosquitto::start("");
    let port = broker.port.to_string();
    // -d prints the SUBACK (so the run starts only once it is subscribed);
    // -F '%t %l': one line per message, its topic and payload length;
    // -C: exits after that many messages, -W: after 30 s whatever happens.
    // stdbuf: mosquitto_sub's stdout to a pipe is otherwise block-buffered.
    let mut sub = Command::new("stdbuf")
        .args([
            "-oL",
            "mosquitto_sub",
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-q",
            "1",
            "-t",
            "bench/#",
            "-d",
        ])
        .args(["-F", "%t %l", "-C", "300", "-W", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mosquitto_sub (Debian package mosquitto-clients)");
    let (tx, rx) = mpsc::channel();
    let out = sub.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("mosquitto_sub's SUBACK");
        if line.contains("SUBACK") {
            break;
        }
    }
    let url = format!("mqtt://127.0.0.1:{port}");
    let args = ["--publishers", "3", "--subscribers", "1", "--topic", "bench/{{n}}"];
    let run = mqtt(
        &url,
        &[&args[..], &["-n", "300", "--qos", "1", "--payload", "50"]].concat(),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let b = run.result().measurements.pubsub.as_ref().unwrap();
    assert_eq!(
        (b.published, b.acknowledged, b.received, b.foreign),
        (300, 300, 300, 0),
        "{b:?}"
    );
    assert!(
        sub.wait().unwrap().success(),
        "mosquitto_sub timed out before 300 messages"
    );
    reader.join().unwrap();
    let lines: Vec<String> = rx.try_iter().collect();
    let mut per_topic = [0u64; 3];
    for line in &lines {
        for (i, n) in per_topic.iter_mut().enumerate() {
            if *line == format!("bench/{} 50", i + 1) {
                *n += 1;
            }
        }
    }
    // -n 300 shared by 3 publishers: 100 each, on its own topic.
    assert_eq!(per_topic, [100, 100, 100], "{lines:?}");
}

#[test]
fn what_mosquitto_pub_sends_on_throngs_topics_is_foreign_to_its_books() {
    let broker = Mosquitto::start("");
    let port = broker.port.to_string();
    // Retained, so that each subscriber gets it on subscribing, whenever that is.
    let out = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &port, "-q", "1", "-r", "-t", "ingest"])
        .args(["-m", "not one of throng's messages"])
        .output()
        .expect("mosquitto_pub (Debian package mosquitto-clients)");
    assert!(out.status.success(), "{out:?}");
    let url = format!("mqtt://127.0.0.1:{port}");
    let args = [
        "--publishers",
        "3",
        "--subscribers",
        "2",
        "--fan",
        "in",
        "--topic",
        "ingest",
    ];
    let run = mqtt(&url, &[&args[..], &["-n", "90", "--qos", "1"]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    let b = r.measurements.pubsub.as_ref().unwrap();
    assert_eq!(b.foreign, 2, "{b:?}");
    assert_eq!(
        (b.published, b.expected, b.received, b.lost, b.duplicated),
        (90, 180, 180, 0, 0),
        "{b:?}"
    );
    assert_eq!(r.measurements.phase("delivery").unwrap().count(), 180);
    assert_books_balance(r);
}

#[test]
fn retained_messages_before_the_last_suback_are_foreign_too() {
    // Each subscriber subscribes to three topics, each holding a retained
    // message: the broker may deliver the first ones before the last
    // SUBACK; all six (3 topics x 2 subscribers) are counted foreign.
    let broker = Mosquitto::start("");
    let port = broker.port.to_string();
    for n in 1..=3 {
        let out = Command::new("mosquitto_pub")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-q",
                "1",
                "-r",
                "-t",
                &format!("fo/{n}"),
            ])
            .args(["-m", "not one of throng's messages"])
            .output()
            .expect("mosquitto_pub (Debian package mosquitto-clients)");
        assert!(out.status.success(), "{out:?}");
    }
    let url = format!("mqtt://127.0.0.1:{port}");
    let args = [
        "--publishers",
        "3",
        "--subscribers",
        "2",
        "--fan",
        "out",
        "--topic",
        "fo/{{n}}",
    ];
    let run = mqtt(&url, &[&args[..], &["-n", "30", "--qos", "1"]].concat());
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    let b = r.measurements.pubsub.as_ref().unwrap();
    assert_eq!(b.foreign, 6, "{b:?}");
    assert_eq!((b.published, b.expected, b.received, b.lost), (30, 60, 60, 0), "{b:?}");
    assert_books_balance(r);
}

#[test]
fn publishing_with_no_subscribers_counts_what_the_broker_acknowledged() {
    let broker = Mosquitto::start("");
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let run = mqtt(
        &url,
        &["--publishers", "2", "--subscribers", "0", "-n", "200", "--qos", "1"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    let b = r.measurements.pubsub.as_ref().unwrap();
    assert_eq!(
        (b.published, b.acknowledged, b.expected, b.received),
        (200, 200, 0, 0),
        "{b:?}"
    );
    assert!(b.subscribers.is_empty());
    assert_eq!(
        (r.measurements.connections.attempted, r.measurements.connections.ok),
        (2, 2)
    );
    assert_books_balance(r);
}
