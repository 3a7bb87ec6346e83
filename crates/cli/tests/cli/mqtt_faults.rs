//! `throng storm mqtt://…` against the lab's MQTT mode (`throng serve
//! --fault mqtt-*`): the faults mosquitto will not produce on demand (a
//! refusal by "not authorized", bytes that are not MQTT, PINGREQs never
//! answered, a 256 MiB PUBLISH mid-hold, a 3.1.1 close mid-session) and
//! `mqtt-broker`, the lab as a minimal broker holding many sessions. Each
//! test asserts the class, the books and, where a huge packet is
//! announced, the generator's peak memory. (The faults at CONNECT that
//! `mqtt.rs` covers are not repeated here.)

#![allow(clippy::unwrap_used)]

use crate::common::{self, FaultServer, assert_books_balance};

/// `throng storm` against `lab` with `extra` flags after the URL.
fn storm(lab: &FaultServer, version: &str, extra: &[&str]) -> common::Run {
    let url = format!("mqtt://u:p@127.0.0.1:{}", lab.port);
    let args = [&[&url[..], "--mqtt-version", version, "-t", "1"][..], extra].concat();
    let run = common::storm(&args);
    assert!(!run.stderr().contains("panicked"), "{}", run.stderr());
    run
}

/// Every one of 10 connections fails with `class`; the books balance.
fn fails_as(fault: &str, version: &str, class: &str) {
    let lab = FaultServer::start(fault);
    let run = storm(&lab, version, &["-n", "10", "-c", "5", "--timeout", "500ms"]);
    assert_eq!(run.code(), 1, "{fault} ({version}): {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements.connections;
    assert_eq!(
        (m.attempted, m.ok, m.error(class)),
        (10, 0, 10),
        "{fault} ({version}): {:?}",
        m.errors
    );
    assert!(run.stderr().contains(class), "{fault} ({version}): {}", run.stderr());
}

#[test]
fn a_refusal_by_not_authorized_and_garbage_at_connect_have_their_classes() {
    for version in ["3.1.1", "5"] {
        fails_as("mqtt-not-authorized", version, "mqtt.connack.not_authorized");
        // A packet of the reserved type 0 where CONNACK belongs.
        fails_as("mqtt-garbage", version, "mqtt.protocol");
    }
}

/// 10 sessions held 3.5 s with a PINGREQ every second against `fault`:
/// all connect; the run.
fn held_with_pings(fault: &str, version: &str) -> common::Run {
    let lab = FaultServer::start(fault);
    let run = storm(&lab, version, &["-n", "10", "--hold", "3500ms", "--keepalive", "1s"]);
    assert_eq!(run.code(), 0, "{fault} ({version}): {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 10, "{fault} ({version}): {:?}", m.connections.errors);
    assert_eq!(m.phases["handshake"].count(), 10, "{fault} ({version})");
    run
}

#[test]
fn the_lab_broker_answers_pings_and_a_silent_one_ends_each_session_by_ping_timeout() {
    for version in ["3.1.1", "5"] {
        // Three PINGREQs each over the hold: every one answered.
        let run = held_with_pings("mqtt-broker", version);
        let m = &run.result().measurements;
        assert_eq!(m.closed_by_peer, 0, "{version}");
        assert!(m.hold_failures.is_empty(), "{version}: {:?}", m.hold_failures);
        let pongs = m.phases.get("pong").map_or(0, |p| p.count());
        assert!(pongs >= 20, "{version}: {pongs} pongs");
        // The same pings, never answered: each session ends when its next
        // PINGREQ is due, counted by class, with no round trip.
        let run = held_with_pings("mqtt-no-pingresp", version);
        let m = &run.result().measurements;
        assert_eq!(m.phases.get("pong").map_or(0, |p| p.count()), 0, "{version}");
        assert_eq!(m.closed_by_peer, 10, "{version}");
        assert_eq!(
            m.hold_failures.get("mqtt.ping_timeout"),
            Some(&10),
            "{version}: {:?}",
            m.hold_failures
        );
        assert!(m.close_codes.is_empty(), "{version}: {:?}", m.close_codes);
        assert!(run.stdout().contains("mqtt.ping_timeout=10"), "{}", run.stdout());
        let problems = common::schema_violations(&run.json);
        assert!(problems.is_empty(), "schema violations: {problems:#?}");
    }
}

#[test]
fn a_close_mid_session_in_3_1_1_is_counted_with_no_reason() {
    // MQTT 3.1.1 has no server DISCONNECT: the lab closes the socket.
    let lab = FaultServer::start("mqtt-disconnect");
    let run = storm(&lab, "3.1.1", &["-n", "6", "--hold", "5s"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 6, "{:?}", m.connections.errors);
    assert_eq!(m.closed_by_peer, 6);
    assert!(m.close_codes.is_empty(), "{:?}", m.close_codes);
}

#[test]
fn a_256_mib_publish_mid_hold_is_skipped_not_buffered() {
    let lab = FaultServer::start("mqtt-huge-publish");
    let run = storm(&lab, "5", &["-n", "4", "--hold", "2s"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.connections.ok, 4,
        "{:?}",
        r.measurements.connections.errors
    );
    // Loopback carries hundreds of MiB in 2 s: a client that kept the
    // packet would hold far more than this.
    let peak = r.generator.peak_rss_bytes;
    assert!(peak > 0 && peak < 100 << 20, "peak {peak} bytes");
}

#[test]
fn the_lab_broker_holds_a_thousand_sessions() {
    let lab = FaultServer::start("mqtt-broker");
    let run = storm(&lab, "5", &["-n", "1000", "--hold", "1s"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 1000, "{:?}", m.connections.errors);
    assert_eq!(m.closed_by_peer, 0);
}
