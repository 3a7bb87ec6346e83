//! MQTT connection storms against a second broker, rumqttd (multi-threaded,
//! Rust, from crates.io; `scripts/test.sh` installs it), so results are not
//! one broker's quirks: sessions held in both protocol versions counted on
//! the broker's side by its log, subscriptions acknowledged, and what
//! rumqttd does with a wrong password (it closes without a CONNACK); and
//! MQTT over WebSocket (its `[ws]` listener: Debian's mosquitto has none).

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::common::{self, assert_books_balance, free_port, wait_listening};

/// rumqttd on two free loopback ports: MQTT 3.1.1 with a user `throng`
/// (password `secret`), and MQTT 5 without authentication.
pub(crate) struct Rumqttd {
    child: Child,
    v4: u16,
    v5: u16,
    /// MQTT 3.1.1 over WebSocket.
    pub(crate) ws: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Rumqttd {
    pub(crate) fn start() -> Rumqttd {
        let bin = std::env::var_os("THRONG_RUMQTTD").map_or_else(|| PathBuf::from("rumqttd"), PathBuf::from);
        let dir = tempfile::tempdir().unwrap();
        let (v4, v5, ws) = (free_port(), free_port(), free_port());
        let conf = dir.path().join("rumqttd.toml");
        let log = dir.path().join("rumqttd.log");
        // next_connection_delay_ms = 0: rumqttd's sample config accepts one
        // connection a millisecond, which would pace a storm.
        std::fs::write(
            &conf,
            format!(
                r#"id = 0
[router]
id = 0
max_connections = 20000
max_outgoing_packet_count = 200
max_segment_size = 104857600
max_segment_count = 10

[v4.1]
name = "v4"
listen = "127.0.0.1:{v4}"
next_connection_delay_ms = 0
    [v4.1.connections]
    connection_timeout_ms = 60000
    max_payload_size = 20480
    max_inflight_count = 100
    dynamic_filters = true
    [v4.1.connections.auth]
    throng = "secret"

[v5.1]
name = "v5"
listen = "127.0.0.1:{v5}"
next_connection_delay_ms = 0
    [v5.1.connections]
    connection_timeout_ms = 60000
    max_payload_size = 20480
    max_inflight_count = 100

[ws.1]
name = "ws"
listen = "127.0.0.1:{ws}"
next_connection_delay_ms = 0
    [ws.1.connections]
    connection_timeout_ms = 60000
    max_client_id_len = 256
    throttle_delay_ms = 0
    max_payload_size = 20480
    max_inflight_count = 100
    max_inflight_size = 1024
"#
            ),
        )
        .unwrap();
        let child = Command::new(&bin)
            .arg("-c")
            .arg(&conf)
            .arg("-v")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {}: {e}; run ./scripts/test.sh, which installs it (cargo install --locked rumqttd \
                     --version 0.20.0), or set THRONG_RUMQTTD",
                    bin.display()
                )
            });
        wait_listening(SocketAddr::from(([127, 0, 0, 1], v4)));
        wait_listening(SocketAddr::from(([127, 0, 0, 1], v5)));
        wait_listening(SocketAddr::from(([127, 0, 0, 1], ws)));
        Rumqttd {
            child,
            v4,
            v5,
            ws,
            log,
            _dir: dir,
        }
    }

    /// How many sessions rumqttd has registered so far, by its log.
    fn registered(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches("Client connection registered")
            .count()
    }
}

impl Drop for Rumqttd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn held_sessions_are_counted_by_rumqttd_in_both_versions() {
    let broker = Rumqttd::start();
    let url = format!("mqtt://throng:secret@127.0.0.1:{}", broker.v4);
    let run = common::storm(&[&url, "--count", "300", "--hold", "2s", "--timeout", "30s"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.connections.ok, 300);
    assert_eq!(r.measurements.phases["handshake"].count(), 300, "a CONNACK each");
    assert_eq!(broker.registered(), 300, "rumqttd's own count");
    assert!(!run.stdout().contains("secret") && !run.stderr().contains("secret"));

    let url = format!("mqtt://127.0.0.1:{}", broker.v5);
    let run = common::storm(&[
        &url,
        "--mqtt-version",
        "5",
        "--count",
        "100",
        "--hold",
        "1s",
        "--subscribe",
        "dev/{{conn}}/cmd",
        "--qos",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.connections.ok, 100);
    assert_eq!(r.measurements.phases["subscribe"].count(), 100, "a SUBACK each");
    assert_eq!(broker.registered(), 400);
}

/// rumqttd answers a wrong password by closing the connection, without the
/// CONNACK (return code 4) mosquitto sends: throng counts what happened,
/// `eof`, and the password still never shows.
#[test]
fn a_wrong_password_is_a_close_without_connack() {
    let broker = Rumqttd::start();
    let url = format!("mqtt://throng:wrong-pw-4711@127.0.0.1:{}", broker.v4);
    let run = common::storm(&[&url, "--count", "20"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.connections.errors.get("eof"),
        Some(&20),
        "{:?}",
        r.measurements.connections
    );
    assert_eq!(broker.registered(), 0);
    let json = std::fs::read_to_string(&run.json).unwrap();
    assert!(!json.contains("wrong-pw-4711"));
    assert!(!run.stdout().contains("wrong-pw-4711") && !run.stderr().contains("wrong-pw-4711"));
}

#[test]
fn throng_mqtt_delivers_every_message_through_rumqttd_in_both_versions() {
    let broker = Rumqttd::start();
    for (url, version) in [
        (format!("mqtt://throng:secret@127.0.0.1:{}", broker.v4), "3.1.1"),
        (format!("mqtt://127.0.0.1:{}", broker.v5), "5"),
    ] {
        let run = common::command(
            "mqtt",
            &[
                &url,
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
                "--mqtt-version",
                version,
            ],
        );
        assert_eq!(run.code(), 0, "{version}: {}", run.stderr());
        crate::mqtt_pubsub::assert_all_delivered(run.result(), 200, 4, 200);
        assert_eq!(
            run.result().measurements.phase("puback").unwrap().count(),
            200,
            "{version}"
        );
    }
}

#[test]
fn a_storm_over_websocket_is_counted_by_connack_and_by_rumqttd() {
    let broker = Rumqttd::start();
    let url = format!("ws://127.0.0.1:{}/mqtt", broker.ws);
    let run = common::storm(&[
        &url,
        "--protocol",
        "mqtt",
        "--count",
        "60",
        "--hold",
        "1s",
        "--subscribe",
        "dev/{{conn}}/cmd",
        "--qos",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        (m.connections.attempted, m.connections.ok),
        (60, 60),
        "{:?}",
        m.connections.errors
    );
    assert_eq!(m.phases["upgrade"].count(), 60, "a 101 each");
    assert_eq!(m.phases["handshake"].count(), 60, "a CONNACK each");
    assert_eq!(m.phases["subscribe"].count(), 60, "a SUBACK each");
    assert_eq!(broker.registered(), 60, "rumqttd's own count");
    let problems = common::schema_violations(&run.json);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
}

/// MQTT over WebSocket held by the storm's holder (no task each): every
/// keep-alive's PINGREQ goes out in a binary frame and its PINGRESP comes
/// back in one (3 a session in 3.5 s at 1 s), and rumqttd closes none.
#[test]
fn held_websocket_sessions_ping_in_binary_frames() {
    let broker = Rumqttd::start();
    let url = format!("ws://127.0.0.1:{}/mqtt", broker.ws);
    let run = common::storm(&[
        &url,
        "--protocol",
        "mqtt",
        "-n",
        "10",
        "--hold",
        "3.5s",
        "--keepalive",
        "1s",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 10, "{:?}", m.connections.errors);
    assert_eq!(m.closed_by_peer, 0);
    assert_eq!(m.phases["pong"].count(), 30, "3 PINGRESPs a session");
    assert_eq!(broker.registered(), 10);
}

#[test]
fn throng_mqtt_over_websocket_delivers_every_message_through_rumqttd() {
    let broker = Rumqttd::start();
    let url = format!("ws://127.0.0.1:{}/mqtt", broker.ws);
    let run = common::command(
        "mqtt",
        &[
            &url,
            "--publishers",
            "2",
            "--subscribers",
            "3",
            "--topic",
            "bench/{{n}}",
            "-n",
            "300",
            "--qos",
            "1",
            "--payload",
            "2000",
        ],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    crate::mqtt_pubsub::assert_all_delivered(run.result(), 300, 3, 300);
    let m = &run.result().measurements;
    assert_eq!(m.phase("puback").unwrap().count(), 300);
    assert_eq!(m.phase("upgrade").unwrap().count(), 5, "one upgrade per client");
    assert_eq!(broker.registered(), 5);
    let problems = common::schema_violations(&run.json);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
}

/// A server that refuses the upgrade, or upgrades without the `mqtt`
/// subprotocol, is counted by class: no CONNECT goes out.
#[test]
fn a_refused_upgrade_or_a_missing_subprotocol_is_counted_by_class() {
    for (mode, class) in [("refuse", "ws.upgrade_refused.403"), ("echo", "ws.subprotocol_refused")] {
        let server = common::WsServer::start(mode);
        let run = common::storm(&[&server.url("/mqtt"), "--protocol", "mqtt", "-n", "5"]);
        assert_eq!(run.code(), 1, "{mode}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(
            r.measurements.connections.error(class),
            5,
            "{mode}: {:?}",
            r.measurements.connections.errors
        );
        assert!(run.stdout().contains(class), "{}", run.stdout());
    }
}

/// wss://: nginx takes TLS and proxies the upgrade (with its
/// `Sec-WebSocket-Protocol`) to rumqttd's WebSocket listener; a path nginx
/// does not proxy is its 404, counted by class.
#[test]
fn a_storm_over_wss_through_nginx_reaches_rumqttd() {
    let broker = Rumqttd::start();
    let (_d, c) = common::certs();
    let nginx = common::nginx_wss(&c, broker.ws);
    let ca = common::p(&c, "ca.pem");
    let url = format!("wss://localhost:{}/ws", nginx.port);
    let run = common::storm(&[
        &url,
        "--protocol",
        "mqtt",
        "--cacert",
        &ca,
        "-n",
        "20",
        "--hold",
        "500ms",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 20, "{:?}", m.connections.errors);
    for phase in ["tls", "upgrade", "handshake"] {
        assert_eq!(m.phases[phase].count(), 20, "{phase}");
    }
    assert_eq!(broker.registered(), 20);

    let elsewhere = format!("wss://localhost:{}/mqtt", nginx.port);
    let run = common::storm(&[&elsewhere, "--protocol", "mqtt", "--cacert", &ca, "-n", "4"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.connections.error("ws.upgrade_refused.404"), 4);
    assert_eq!(broker.registered(), 20);
}
