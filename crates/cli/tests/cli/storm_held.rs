//! Held storm connections given to the worker's holder (one epoll set and
//! one task per worker instead of a task per connection): every outcome
//! counted exactly as before — the server's closes during the hold, the
//! closes at the hold's end, reconnects — against `throng serve --fault
//! close-every-other`, which closes every second connection it accepts.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::process::{Child, Stdio};

use common::{assert_books_balance, free_port, storm, throng, wait_listening};
use throng_result::RunResult;

/// `throng serve` on one thread (so "every second connection" is exact),
/// stopped on drop.
struct Serve(Child);

impl Serve {
    fn start(port: u16) -> Serve {
        Serve::with(port, &["--fault", "close-every-other"])
    }

    fn with(port: u16, extra: &[&str]) -> Serve {
        let serve = Serve(
            throng()
                .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--threads", "1"])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_listening(([127, 0, 0, 1], port).into());
        serve
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

#[test]
fn five_thousand_held_half_closed_by_the_server_half_at_the_hold_end() {
    // Alone: 10,000 sockets held at once.
    let _alone = common::heavy();
    let port = free_port();
    let _serve = Serve::start(port);
    // The server closes its half 1 s after accepting; the hold outlasts
    // that by far, so every close it makes falls inside a hold.
    let run = storm(&[
        &format!("tcp://127.0.0.1:{port}"),
        "-n",
        "5000",
        "--rate",
        "5000",
        "--hold",
        "8s",
        "--timeout",
        "30s",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, 5000);
    assert_eq!(m.connections.ok, 5000, "{:?}", m.connections);
    // The probe of wait_listening was one accept: whichever parity it
    // took, 5,000 more accepts close exactly 2,500.
    assert_eq!(m.closed_by_peer, 2500, "every second connection closed by the server");
    assert!(m.first_drop_us.is_some());
    assert_eq!(
        m.phases["connection"].count(),
        5000,
        "2,500 closed by the server and 2,500 at the hold's end, each closed and timed once"
    );
    // Those held to the end lasted the hold (8 s); those the server closed, ~1 s.
    assert!(m.phases["connection"].max() >= 8_000_000);
    assert!(m.phases["connection"].min() < 8_000_000);
    assert!(m.reconnect_gave_up.is_empty());
    assert_eq!(m.reconnects.attempted, 0, "no reconnect without --reconnect");
}

#[test]
fn connections_the_server_closes_come_back_with_reconnect() {
    let _alone = common::heavy();
    let port = free_port();
    let _serve = Serve::start(port);
    let run = storm(&[
        &format!("tcp://127.0.0.1:{port}"),
        "-n",
        "2000",
        "--rate",
        "4000",
        "--hold",
        "6s",
        "--reconnect",
        "--reconnect-wait",
        "200ms",
        "--reconnect-jitter",
        "0s",
        "--timeout",
        "30s",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 2000, "{:?}", m.connections);
    assert!(m.closed_by_peer >= 1000, "closed by the server: {}", m.closed_by_peer);
    // Every close by the server led to exactly one of: a reconnect (the
    // lab accepts them all), or giving up because the hold was ending.
    assert_eq!(m.reconnects.attempted, m.reconnects.ok, "{:?}", m.reconnects);
    assert!(m.reconnects.ok >= 1000, "{:?}", m.reconnects);
    let gave_up: u64 = m.reconnect_gave_up.values().sum();
    assert_eq!(
        m.reconnect_gave_up.keys().collect::<Vec<_>>(),
        if gave_up > 0 { vec!["hold_ended"] } else { vec![] }
    );
    assert_eq!(m.closed_by_peer, m.reconnects.ok + gave_up);
    assert_eq!(m.phases["reconnect"].count(), m.reconnects.ok);
    // Every connection established, first or again, closed and timed once.
    assert_eq!(m.phases["connection"].count(), m.connections.ok + m.reconnects.ok);
}

#[test]
fn a_stop_closes_every_held_connection_and_counts_it() {
    let _alone = common::heavy();
    let port = free_port();
    // The lab holds every connection until the client closes it.
    let _serve = Serve::with(port, &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let child = throng()
        .args([
            "storm",
            &format!("tcp://127.0.0.1:{port}"),
            "-n",
            "1000",
            "--hold",
            "100s",
        ])
        .args(["--procs", "1", "--timeout", "30s", "-q", "--json"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Counted on the server's side.
    common::wait_established(port, 1000);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // The stop closes the held connections at once; the test's own limit
    // would catch a hang.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert!(r.interrupted);
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 1000, "{:?}", m.connections);
    assert_eq!(m.closed_by_peer, 0);
    assert_eq!(
        m.phases["connection"].count(),
        1000,
        "every held connection closed at the stop, and timed"
    );
    assert!(r.duration_s < 60.0, "the stop ended the 100 s hold");
}
