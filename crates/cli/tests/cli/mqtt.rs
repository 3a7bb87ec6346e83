//! MQTT connection storms against mosquitto (plain, a password file, TLS
//! with client certificates; 3.1.1 and 5), counted on the broker's side by
//! its `$SYS` topics and its log, and the lab's MQTT faults a broker will
//! not produce on demand: each asserts its class and the books.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, FaultServer, assert_books_balance, free_port, wait_listening};

/// mosquitto on a free loopback port with its own config and log file.
pub struct Mosquitto {
    child: Option<Child>,
    pub port: u16,
    log: PathBuf,
    conf: PathBuf,
    /// Written by a broker a restart started (`-d`), to stop it too.
    pid_file: PathBuf,
    /// Its config and log, removed when it is dropped.
    _dir: tempfile::TempDir,
}

impl Mosquitto {
    /// Starts mosquitto with `extra` lines for its listener (after
    /// `listener PORT 127.0.0.1`); anonymous clients allowed unless `extra`
    /// says otherwise.
    pub fn start(extra: &str) -> Mosquitto {
        let bin = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("mosquitto is not installed: run ./scripts/test.sh, which installs it (Debian package mosquitto)");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = dir.path().join("mosquitto.log");
        let conf = dir.path().join("mosquitto.conf");
        let pid_file = dir.path().join("mosquitto.pid");
        let anonymous = if extra.contains("allow_anonymous") {
            ""
        } else {
            "allow_anonymous true\n"
        };
        // `user root`: started as root, mosquitto would otherwise become the
        // user mosquitto, who cannot read this test's files (ignored when
        // not started as root). TCP_NODELAY: without it, a CONNACK after TLS's
        // session tickets waits for a delayed ACK.
        std::fs::write(
            &conf,
            format!(
                "per_listener_settings true\nuser root\npersistence false\nsys_interval 1\nlog_dest file {}\n\
                 pid_file {}\nlog_type all\nmax_keepalive 65535\nlistener {port} 127.0.0.1\nset_tcp_nodelay true\n\
                 {anonymous}{extra}\n",
                log.display(),
                pid_file.display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start mosquitto");
        let broker = Mosquitto {
            child: Some(child),
            port,
            log,
            conf,
            pid_file,
            _dir: dir,
        };
        wait_listening(SocketAddr::from(([127, 0, 0, 1], port)));
        broker
    }

    /// A password file in the broker's directory holding `user:password`.
    pub fn password_file(dir: &Path, user: &str, password: &str) -> PathBuf {
        let file = dir.join("passwords");
        let o = Command::new("mosquitto_passwd")
            .args(["-b", "-c"])
            .arg(&file)
            .args([user, password])
            .output()
            .expect("mosquitto_passwd (Debian package mosquitto)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        file
    }

    /// The broker's count of connected clients, the reader itself
    /// included: `$SYS` publishes it (retained) every second when it
    /// changes, so the second value read is the one after the reader
    /// connected.
    fn connected(&self) -> Option<u64> {
        let o = Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-t", "$SYS/broker/clients/connected", "-C", "2", "-W", "5"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&o.stdout).lines().last()?.trim().parse().ok()
    }

    /// A shell command that stops this broker and starts it again (as a
    /// daemon, its pid in `pid_file`) after `gap_s` seconds (for --trigger).
    fn restart_command(&self, gap_s: f64) -> String {
        let pid = self.child.as_ref().map_or(0, Child::id);
        format!("kill {pid}; sleep {gap_s}; mosquitto -c {} -d", self.conf.display())
    }

    /// Stops the broker (SIGTERM: its log is complete) and reads its log.
    pub fn stop(&mut self) -> String {
        self.stop_restarted();
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn url(&self, userinfo: &str) -> String {
        format!("mqtt://{userinfo}127.0.0.1:{}", self.port)
    }
}

impl Mosquitto {
    /// Stops a broker a restart started, and waits (bounded) for it to end.
    fn stop_restarted(&self) {
        let Some(pid) = std::fs::read_to_string(&self.pid_file).ok() else {
            return;
        };
        let pid = pid.trim().to_string();
        let _ = Command::new("kill").arg(&pid).status();
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while proc.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.stop_restarted();
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Lines of `log` containing `what`.
fn count(log: &str, what: &str) -> usize {
    log.lines().filter(|l| l.contains(what)).count()
}

/// Distinct client identifiers the broker logged as connected.
pub fn client_ids(log: &str) -> std::collections::BTreeSet<String> {
    log.lines()
        .filter(|l| l.contains("New client connected"))
        .filter_map(|l| l.split(" as ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn held_connections_are_counted_by_the_broker_and_each_says_disconnect() {
    let mut broker = Mosquitto::start("");
    let url = broker.url("");
    let storm = std::thread::spawn(move || {
        common::storm(&[
            &url,
            "-n",
            "40",
            "--rate",
            "200",
            "--hold",
            "10s",
            "--client-id",
            "dev-{{conn}}",
        ])
    });
    common::wait_established(broker.port, 40);
    // $SYS refreshes every second: wait (bounded) until it shows them all.
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut seen = broker.connected();
    while seen < Some(41) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        seen = broker.connected();
    }
    // 40 held, and the reader of $SYS itself.
    assert_eq!(seen, Some(41));
    let run = storm.join().unwrap();
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 40, "{:?}", m.connections.errors);
    assert_eq!(m.phases["handshake"].count(), 40);
    let problems = common::schema_violations(&run.json);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
    let log = broker.stop();
    // The $SYS reader's own id is mosquitto_sub's "auto-…".
    let ids: Vec<String> = client_ids(&log)
        .into_iter()
        .filter(|id| id.starts_with("dev-"))
        .collect();
    assert_eq!(ids.len(), 40, "every connection its own client id: {ids:?}");
    assert!(
        ids.iter().any(|i| i == "dev-0") && ids.iter().any(|i| i == "dev-39"),
        "{ids:?}"
    );
    assert_eq!(count(&log, "Received DISCONNECT from dev-"), 40, "{log}");
}

#[test]
fn a_wrong_password_is_refused_in_connack_and_the_password_never_shows() {
    let dir = tempfile::tempdir().unwrap();
    let file = Mosquitto::password_file(dir.path(), "dev", "s3cret-pw");
    let broker = Mosquitto::start(&format!("allow_anonymous false\npassword_file {}", file.display()));
    for version in ["3.1.1", "5"] {
        let wrong = common::storm(&[&broker.url("dev:nope-pw@"), "-n", "12", "--mqtt-version", version]);
        assert_eq!(wrong.code(), 1, "{version}: {}", wrong.stderr());
        let r = wrong.result();
        assert_books_balance(r);
        let m = &r.measurements.connections;
        // mosquitto answers a wrong password "not authorized" (5; 0x87 in
        // MQTT 5), not "bad user name or password": see the lab's
        // mqtt-bad-password for that one.
        assert_eq!(m.error("mqtt.connack.not_authorized"), 12, "{version}: {:?}", m.errors);
        assert_eq!((m.attempted, m.ok), (12, 0));

        let right = common::storm(&[
            &broker.url("dev:s3cret-pw@"),
            "-n",
            "12",
            "--mqtt-version",
            version,
            "--hold",
            "500ms",
        ]);
        assert_eq!(right.code(), 0, "{version}: {}", right.stderr());
        assert_books_balance(right.result());
        assert_eq!(right.result().measurements.connections.ok, 12);
        for run in [&wrong, &right] {
            let text = std::fs::read_to_string(&run.json).unwrap();
            for secret in ["s3cret-pw", "nope-pw"] {
                assert!(!text.contains(secret), "the password reached the result");
                assert!(!run.stdout().contains(secret) && !run.stderr().contains(secret));
            }
        }
    }
}

#[test]
fn subscribe_and_keepalive_pings_are_phases_in_both_versions() {
    for (version, level) in [("3.1.1", "p2"), ("5", "p5")] {
        let mut broker = Mosquitto::start("");
        let run = common::storm(&[
            &broker.url(""),
            "-n",
            "10",
            "--mqtt-version",
            version,
            "--hold",
            "3500ms",
            "--keepalive",
            "1s",
            "--subscribe",
            "devices/{{conn}}/cmd",
            "--qos",
            "1",
        ]);
        assert_eq!(run.code(), 0, "{version}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let m = &r.measurements;
        assert_eq!(m.connections.ok, 10, "{version}: {:?}", m.connections.errors);
        assert_eq!(m.phases["subscribe"].count(), 10, "{version}: one SUBACK each");
        let pongs = m.phases["pong"].count();
        let log = broker.stop();
        let answered = count(&log, "Sending PINGRESP to throng-");
        // A PINGREQ every second over a 3.5 s hold: 3 each, and every
        // PINGRESP timed is one the broker sent.
        assert!(
            pongs >= 20 && pongs <= answered as u64,
            "{version}: {pongs} pongs, {answered} PINGRESPs"
        );
        assert_eq!(count(&log, "Received PINGREQ from throng-"), answered, "{version}");
        assert_eq!(count(&log, "Received SUBSCRIBE from throng-"), 10, "{version}");
        assert_eq!(
            count(&log, "devices/7/cmd (QoS 1)"),
            1,
            "{version}: the topic names the connection"
        );
        assert_eq!(
            count(&log, &format!("({level}, c1, k1)")),
            10,
            "{version}: the protocol level, clean start and keep-alive in CONNECT"
        );
    }
}

#[test]
fn session_expiry_keeps_the_session_in_mqtt_5() {
    let mut broker = Mosquitto::start("");
    let run = common::storm(&[
        &broker.url(""),
        "-n",
        "4",
        "--mqtt-version",
        "5",
        "--session-expiry",
        "1h",
        "--client-id",
        "kept-{{conn}}",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_books_balance(run.result());
    let log = broker.stop();
    // Clean start off (c0), as --session-expiry asks.
    assert_eq!(count(&log, "(p5, c0, k60)"), 4, "{log}");
}

#[test]
fn mqtts_with_client_certificates() {
    let (_certs_dir, certs) = common::certs();
    let c = |f: &str| certs.join(f).display().to_string();
    let broker = Mosquitto::start(&format!(
        "cafile {}\ncertfile {}\nkeyfile {}\nrequire_certificate true",
        c("ca.pem"),
        c("server.pem"),
        c("server.key")
    ));
    let url = format!("mqtts://localhost:{}", broker.port);
    let run = common::storm(&[
        &url,
        "-n",
        "8",
        "--hold",
        "1s",
        "--keepalive",
        "1s",
        "--cacert",
        &c("ca.pem"),
        "--cert",
        &c("client.pem"),
        "--key",
        &c("client.key"),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 8, "{:?}", m.connections.errors);
    assert_eq!(m.phases["tls"].count(), 8);
    assert_eq!(m.phases["handshake"].count(), 8);
    // Without a client certificate, the broker refuses the handshake.
    let refused = common::storm(&[&url, "-n", "3", "--cacert", &c("ca.pem")]);
    assert_eq!(refused.code(), 1, "{}", refused.stderr());
    let m = &refused.result().measurements.connections;
    assert_books_balance(refused.result());
    assert_eq!(m.error("tls.certificate_required"), 3, "{:?}", m.errors);
}

/// MQTT over TLS held by the storm's holder (no task each): every
/// keep-alive's PINGREQ goes through the TLS session and its PINGRESP
/// comes back through it (3 a session in 3.5 s at 1 s), nothing is
/// closed by the broker, and each session ends with a DISCONNECT the
/// broker reads.
#[test]
fn held_mqtts_sessions_ping_through_tls_and_say_disconnect() {
    let (_certs_dir, certs) = common::certs();
    let c = |f: &str| certs.join(f).display().to_string();
    let mut broker = Mosquitto::start(&format!(
        "cafile {}\ncertfile {}\nkeyfile {}",
        c("ca.pem"),
        c("server.pem"),
        c("server.key")
    ));
    let url = format!("mqtts://localhost:{}", broker.port);
    let run = common::storm(&[
        &url,
        "-n",
        "10",
        "--hold",
        "3.5s",
        "--keepalive",
        "1s",
        "--cacert",
        &c("ca.pem"),
        "--client-id",
        "tls-{{conn}}",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 10, "{:?}", m.connections.errors);
    assert_eq!(m.closed_by_peer, 0);
    assert_eq!(m.phases["pong"].count(), 30, "3 PINGRESPs a session");
    let log = broker.stop();
    assert_eq!(count(&log, "Received DISCONNECT from tls-"), 10, "{log}");
}

#[test]
fn client_ids_stay_unique_over_processes() {
    let mut broker = Mosquitto::start("");
    let run = common::storm(&[
        &broker.url(""),
        "-n",
        "24",
        "--procs",
        "2",
        "--hold",
        "1s",
        "--source",
        "127.0.0.2-127.0.0.4",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_books_balance(run.result());
    assert_eq!(run.result().measurements.connections.ok, 24);
    let log = broker.stop();
    let ids = client_ids(&log);
    assert_eq!(ids.len(), 24, "{ids:?}");
    // No connection took over another's session.
    assert_eq!(count(&log, "already connected"), 0, "{log}");
    // --source rotates over its three addresses.
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        assert_eq!(
            count(&log, &format!("New client connected from {source}:")),
            8,
            "{source}"
        );
    }
}

#[test]
fn a_broker_restart_sends_every_session_back_through_a_reconnect() {
    let mut broker = Mosquitto::start("");
    let restart = broker.restart_command(1.0);
    let run = common::storm(&[
        &broker.url(""),
        "-n",
        "30",
        "--mqtt-version",
        "5",
        "--hold",
        "8s",
        "--keepalive",
        "2s",
        "--reconnect",
        "--reconnect-wait",
        "500ms",
        "--trigger-after",
        "1s",
        "--trigger",
        &restart,
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    let trigger = r.trigger.as_ref().unwrap();
    assert_eq!(trigger.exit_code, Some(0), "{trigger:?}");
    assert_eq!(m.closed_by_peer, 30, "the restart dropped every session");
    assert_eq!(m.phases["reconnect"].count(), 30, "{:?}", m.reconnect_gave_up);
    assert!(m.reconnect_gave_up.is_empty());
    assert_eq!(
        m.phases["handshake"].count(),
        60,
        "every connect and reconnect sent CONNECT"
    );
    let log = broker.stop();
    // Each client connected twice, once to each broker, under the same
    // client id: a reconnect keeps its connection's number.
    assert_eq!(count(&log, "New client connected"), 60, "{log}");
    let ids = client_ids(&log);
    assert_eq!(ids.len(), 30, "{ids:?}");
    for id in &ids {
        assert_eq!(count(&log, &format!(" as {id} (")), 2, "{id}");
    }
}

/// `throng storm mqtt://…` against the lab's MQTT fault `fault`: every
/// connection fails with `class`, and the books balance.
fn lab_fails_as(fault: &str, version: &str, class: &str) {
    let lab = FaultServer::start(fault);
    let url = format!("mqtt://u:p@127.0.0.1:{}", lab.port);
    let run = common::storm(&[
        &url,
        "-n",
        "10",
        "-c",
        "5",
        "-t",
        "1",
        "--timeout",
        "500ms",
        "--mqtt-version",
        version,
    ]);
    assert!(!run.stderr().contains("panicked"), "{fault}: {}", run.stderr());
    assert_eq!(run.code(), 1, "{fault}: {}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements.connections;
    assert_eq!(
        (m.attempted, m.error(class)),
        (10, 10),
        "{fault} ({version}): {:?}",
        m.errors
    );
    assert!(run.stderr().contains(class), "{fault}: {}", run.stderr());
    // A packet claiming 200 MiB is refused, not read.
    assert!(
        r.generator.peak_rss_bytes < 150 << 20,
        "{fault}: peak {} bytes",
        r.generator.peak_rss_bytes
    );
}

#[test]
fn lab_faults_end_in_their_classes() {
    for version in ["3.1.1", "5"] {
        lab_fails_as("mqtt-no-connack", version, "timeout.handshake");
        lab_fails_as("mqtt-connack-refused", version, "mqtt.connack.server_unavailable");
        lab_fails_as("mqtt-bad-password", version, "mqtt.connack.bad_username_or_password");
        lab_fails_as("mqtt-bad-length", version, "mqtt.protocol");
        lab_fails_as("mqtt-oversized", version, "mqtt.packet_too_large");
    }
    lab_fails_as("mqtt-disconnect-at-connect", "5", "mqtt.disconnected.139");
    // A 3.1.1 broker never sends DISCONNECT: one that does breaks the protocol.
    lab_fails_as("mqtt-disconnect-at-connect", "3.1.1", "mqtt.protocol");
}

#[test]
fn a_disconnect_mid_hold_is_counted_by_reason() {
    let lab = FaultServer::start("mqtt-disconnect");
    let url = format!("mqtt://127.0.0.1:{}", lab.port);
    let run = common::storm(&[&url, "-n", "6", "--hold", "5s", "--mqtt-version", "5", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 6, "{:?}", m.connections.errors);
    assert_eq!(m.closed_by_peer, 6);
    assert_eq!(m.close_codes.get("139"), Some(&6), "{:?}", m.close_codes);
}

#[test]
fn mqtt_flags_are_checked_before_anything_runs() {
    for (args, flag) in [
        (&["tcp://127.0.0.1:1", "--subscribe", "t"][..], "--subscribe"),
        (&["mqtt://127.0.0.1:1", "--subscribe", "t", "--qos", "2"][..], "--qos"),
        (&["mqtt://127.0.0.1:1", "--mqtt-version", "4.0"][..], "--mqtt-version"),
        (&["mqtt://127.0.0.1:1", "--send", "x"][..], "--send"),
        (
            &["mqtt://127.0.0.1:1", "--clean-start", "--session-expiry", "1m"][..],
            "--clean-start",
        ),
        (&["mqtt://127.0.0.1:1", "--io", "uring"][..], "MQTT"),
    ] {
        let run = common::storm(&[args, &["-n", "1"][..]].concat());
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains(flag), "{args:?}: {}", run.stderr());
        assert!(run.result.is_none());
    }
}

/// The `throng` commands of the guide's MQTT page (its ```sh,norun,mosquitto
/// block: the guide's own example runner has only the lab server) run
/// against mosquitto with a password file holding `dev:secret`, and exit as
/// the page says; counts cut to 50 and holds to 1 s.
#[test]
fn the_guide_examples_run_against_mosquitto() {
    let dir = tempfile::tempdir().unwrap();
    let file = Mosquitto::password_file(dir.path(), "dev", "secret");
    let broker = Mosquitto::start(&format!("password_file {}", file.display()));
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/mqtt.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let mut inside = false;
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            inside = !inside && info.split(',').any(|t| t.trim() == "mosquitto");
            continue;
        }
        if !inside {
            continue;
        }
        let line = line.trim();
        match line.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                commands.push(std::mem::take(&mut pending));
            }
        }
    }
    assert!(commands.len() >= 3, "{commands:?}");
    let addr = format!("127.0.0.1:{}", broker.port);
    for command in commands {
        let (command, comment) = command.split_once('#').unwrap_or((&command, ""));
        let expected: i32 = comment
            .trim()
            .strip_prefix("exit ")
            .map_or(0, |c| c.trim().parse().unwrap());
        // Words, single quotes kept together.
        let mut words: Vec<String> = Vec::new();
        for (i, part) in command.split('\'').enumerate() {
            if i % 2 == 1 {
                words.push(part.to_string());
            } else {
                words.extend(part.split_whitespace().map(str::to_string));
            }
        }
        assert_eq!(words.first().map(String::as_str), Some("throng"), "{command}");
        let mut args: Vec<String> = Vec::new();
        for w in &words[1..] {
            let w = w.replace("127.0.0.1:1883", &addr);
            let prev = args.last().map(String::as_str);
            args.push(match prev {
                Some("--count" | "-n") if w.parse::<u64>().is_ok_and(|n| n > 50) => "50".into(),
                Some("--hold") => "1s".into(),
                _ => w,
            });
        }
        let run = common::command(&args[0], &args[1..].iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(run.code(), expected, "{command}: {}", run.stderr());
        assert_books_balance(run.result());
    }
}
