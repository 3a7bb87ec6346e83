//! Hostile peers of `throng agent` and `throng coordinate`: raw TCP peers
//! that drip bytes, flood, or say too much are refused within a bound, and
//! what they say is not echoed back whole.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::throng;

fn frame(json: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(json).unwrap();
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&body);
    f
}

fn read_frame(s: &mut TcpStream) -> serde_json::Value {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(head) as usize];
    s.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// A peer that begins a hello and then drips it a byte at a time is cut
/// off by the agent long before the hello could be whole, and the agent
/// serves the next peer.
#[test]
fn an_agent_cuts_off_a_peer_that_drips_its_hello() {
    // The shared agent: port 0, the address it prints.
    let agent = crate::coordinate::Agent::start_with(&[]);
    let addr: SocketAddr = agent.addr.parse().unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let challenge = read_frame(&mut s);
    assert_eq!(challenge["type"], "challenge", "{challenge}");
    assert_eq!(challenge["nonce"].as_str().unwrap().len(), 64, "{challenge}");
    // 400 bytes announced, one every 100 ms: 40 s to be whole, well past
    // the agent's 10 s for a hello.
    s.write_all(&400u32.to_be_bytes()).unwrap();
    let mut sent = 0;
    let started = Instant::now();
    while sent < 400 && started.elapsed() < Duration::from_secs(60) {
        if s.write_all(b" ").is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(sent < 400, "the agent waited for all of a dripped hello");
    let said = agent.wait_said("no message within");
    assert!(said.contains("no message within 10s"), "{said}");
    // Still serving: the next peer is challenged.
    let mut next = TcpStream::connect(addr).unwrap();
    next.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(read_frame(&mut next)["type"], "challenge");
}

/// A fake agent that challenges and reads the hello (with `after_run`,
/// also welcomes, reads the run and says started), then sends `tail` (raw
/// bytes; with `endless`, again and again until the coordinator closes).
fn fake_agent(after_run: bool, tail: Vec<u8>, endless: bool) -> (String, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(&frame(
            &serde_json::json!({"type": "challenge", "protocol": 2, "nonce": "00"}),
        ))
        .unwrap();
        read_frame(&mut s);
        if after_run {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            let welcome = serde_json::json!({"type": "welcome", "version": env!("CARGO_PKG_VERSION"),
                "unix_ms": now, "nofile": 1 << 20});
            s.write_all(&frame(&welcome)).unwrap();
            assert_eq!(read_frame(&mut s)["type"], "run");
            s.write_all(&frame(&serde_json::json!({"type": "started"}))).unwrap();
        }
        // Bounded: at most 4 GiB, and the coordinator closes long before.
        for _ in 0..(if endless { 1 << 20 } else { 1 }) {
            if s.write_all(&tail).is_err() {
                return;
            }
        }
        let mut sink = [0u8; 4096];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    (addr, handle)
}

fn coordinate(addr: &str) -> (i32, String) {
    let out = common::output(throng().args([
        "coordinate",
        "--agents",
        addr,
        "--",
        "http",
        "http://127.0.0.1:9/",
        "-n",
        "10",
    ]));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_coordinator_refuses_an_agent_that_floods_or_says_too_much() {
    // A refusal of 60,000 characters is shown cut short, one line.
    let reason = format!("{}\n{}", "r".repeat(30_000), "s".repeat(30_000));
    let (addr, fake) = fake_agent(
        false,
        frame(&serde_json::json!({"type": "refused", "reason": reason})),
        false,
    );
    let (code, stderr) = coordinate(&addr);
    fake.join().unwrap();
    assert_eq!(code, 2, "{}", &stderr[..stderr.len().min(500)]);
    assert!(
        stderr.contains(&format!("agent {addr} refused: rrrr")),
        "{}",
        &stderr[..stderr.len().min(500)]
    );
    assert!(stderr.len() < 4000, "{} bytes of stderr", stderr.len());
    // A welcome larger than a welcome may be.
    let mut huge = (1u32 << 20).to_be_bytes().to_vec();
    huge.extend(std::iter::repeat_n(b' ', 1 << 20));
    let (addr, fake) = fake_agent(false, huge, false);
    let (code, stderr) = coordinate(&addr);
    fake.join().unwrap();
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("over the limit (not a throng peer?)"), "{stderr}");
    // An endless line once the run started: a missing segment, named.
    let (addr, fake) = fake_agent(
        true,
        b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".repeat(64),
        true,
    );
    let (code, stderr) = coordinate(&addr);
    fake.join().unwrap();
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("agent {addr}: segment 0:1 is missing")) && stderr.contains("over the limit"),
        "{stderr}"
    );
}
