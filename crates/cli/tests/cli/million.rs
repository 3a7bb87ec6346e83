//! Issue 16's million held connections, at test scale: 60,000 connections
//! held at once over several storm processes and source addresses against
//! `throng serve --procs`, counted on the server's side by `ss` (not by
//! throng), with the merged result's books balanced and the kernel's side
//! of the sockets in it. `examples/million/run.sh` is the full-size run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_books_balance, free_port, throng, wait_listening};
use throng_result::RunResult;

/// Established TCP connections whose local port is `port` (the server's
/// ends), as `ss` counts them.
fn established_on(port: u16) -> u64 {
    let out = Command::new("ss")
        .args(["-Htn", "state", "established", &format!("( sport = :{port} )")])
        .output()
        .expect("ss (iproute2) is installed");
    assert!(out.status.success(), "ss: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The lab server with `procs` processes; stopped (with its children) on drop.
struct Serve(std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

#[test]
fn sixty_thousand_held_are_what_ss_counts_on_the_server() {
    // Alone: 120,000 sockets across a dozen processes.
    let _alone = common::heavy();
    let n: u64 = 60_000;
    // Long enough, with --timeout, that a busy machine (others' storms
    // filling the listeners' queues, SYNs retried) still holds every one at once.
    let hold = Duration::from_secs(60);
    let port = free_port();
    let _server = Serve(
        throng()
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--threads",
                "1",
                "--procs",
                "5",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(([127, 0, 0, 1], port).into());
    // wait_listening's own probe connection must be gone before counting.
    let deadline = Instant::now() + Duration::from_secs(10);
    while established_on(port) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("result.json");
    let mut storm = throng()
        .args([
            "storm",
            &format!("tcp://127.0.0.1:{port}"),
            "-n",
            &n.to_string(),
            "--rate",
            "15000",
            "--hold",
            &format!("{}s", hold.as_secs()),
            "--workers",
            "1",
            // Six addresses, 10,000 connections each.
            "--source",
            "127.0.0.2-127.0.0.7",
            "--timeout",
            "45s",
            "--quiet",
            "--json",
        ])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Count the server's ends until all are there or the storm ends.
    let started = Instant::now();
    let mut most = 0;
    while storm.try_wait().unwrap().is_none() && started.elapsed() < hold + Duration::from_secs(60) {
        most = most.max(established_on(port));
        if most == n {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Then the storm ends by itself after its hold (or is stopped).
    let limit = started + hold + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = storm.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > limit {
            let _ = storm.kill();
            let _ = storm.wait();
            panic!("the storm did not end after its hold");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    if let Some(mut e) = storm.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut stderr).unwrap();
    }
    assert!(status.success(), "{status}: {stderr}");
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, n);
    assert_eq!(m.connections.ok, n, "{:?}", m.connections.errors);
    assert!(r.parts.len() >= 4, "60,000 need several processes: {}", r.parts.len());
    assert_eq!(m.phases["connect"].count(), n, "merged histograms hold every sample");
    assert_eq!(m.peak_concurrent_connections, n, "the storm held all at once");
    assert_eq!(most, n, "the server's side, counted by ss, held what the storm says");
    // The kernel's side: both ends of every connection were TCP sockets at
    // once. (The peak, not the growth over the count at the start: that
    // count includes other tests' sockets, which may close meanwhile.)
    let k = r.generator.kernel.expect("a storm samples the kernel");
    assert!(k.tcp_sockets_peak >= 2 * n, "{k:?}");
    assert!(k.slab_growth_bytes > 0, "{k:?}");
    // Nothing left behind: every connection closed after the hold.
    let deadline = Instant::now() + Duration::from_secs(20);
    while established_on(port) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(established_on(port), 0, "the server's ends closed with the storm");
}
