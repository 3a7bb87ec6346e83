//! Fuzz targets (proptest) for the MQTT reader: what a broker sends —
//! arbitrary bytes, edits of real packets, any split into reads — must
//! never panic, never hold more than a packet's worth, and read as packets
//! or as `Malformed`; the real handshake against a loopback peer writing
//! them ends within its deadline in ok or a class of the taxonomy.
//! `PROPTEST_CASES=N` runs longer (docs/FUZZING.md).

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::codec::{self, MAX_PACKET, Malformed, Next, Packet, Reader, Version};
use super::{Spec, handshake};
use crate::transport::Transport;

/// Longest one handshake may take here; the peer closes long before.
const DEADLINE: Duration = Duration::from_secs(5);

fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

/// Real packets a broker sends, to edit.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        vec![0x20, 2, 0, 0],
        vec![0x20, 2, 0, 5],
        vec![0x20, 8, 1, 0x86, 5, 0x12, 0, 2, b'a', b'b'],
        vec![0x90, 3, 0, 1, 1],
        vec![0x90, 4, 0, 1, 0, 0x80],
        vec![0xd0, 0],
        vec![0xe0, 1, 0x8b],
        vec![0x32, 7, 0, 1, b't', 0, 9, b'h', b'i'],
        vec![0x30, 0xff, 0xff, 0xff, 0x7f],
        vec![0x40, 2, 0, 7],
        vec![0x50, 3, 0, 7, 0x10],
        vec![0x62, 2, 0, 7],
        vec![0x70, 4, 0, 7, 0x92, 0],
        vec![0x34, 10, 0, 1, b't', 0, 9, 2, 0x23, 0, 5, b'x'],
    ]
}

/// Feeds `parts` to a reader, reading every packet it gives as `version`.
/// Returns false when the reader holds more than it may.
fn feed(parts: &[Vec<u8>], version: Version) -> bool {
    let mut r = Reader::default();
    for p in parts {
        r.push(p);
        loop {
            match r.next() {
                Ok(Some(Next::Packet(h, body))) => {
                    let parsed = Packet::parse(h, &body, version);
                    match parsed {
                        Ok(Packet::Publish { qos, id }) => assert!(qos < 3 && id.is_some() == (qos > 0)),
                        // PUBACK, PUBREC, PUBREL, PUBCOMP, and nothing else.
                        Ok(Packet::Ack { kind, .. }) => assert!((4..=7).contains(&kind) && kind == h.kind),
                        _ => {}
                    }
                    if let Ok(d) = codec::delivery(h, &body, version) {
                        assert!(d.qos < 3 && d.topic.len() + d.payload.len() <= body.len());
                        assert_eq!(d.id.is_some(), d.qos > 0);
                    }
                }
                Ok(Some(Next::Skipped(_))) => {}
                Ok(None) => break,
                Err(Malformed) => return true,
            }
        }
        if r.buffered() > MAX_PACKET + 5 + p.len() {
            return false;
        }
    }
    true
}

fn split(bytes: Vec<u8>, cuts: Vec<usize>) -> Vec<Vec<u8>> {
    let mut parts = Vec::new();
    let mut at = 0;
    for c in cuts {
        let end = (at + c).min(bytes.len());
        parts.push(bytes[at..end].to_vec());
        at = end;
    }
    parts.push(bytes[at..].to_vec());
    parts
}

/// Runs an MQTT handshake (CONNECT, then SUBSCRIBE when `subscribe`)
/// against a peer that writes `parts`, then closes. The outcome's class
/// name.
fn run(parts: Vec<Vec<u8>>, version: Version, subscribe: bool) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let peer = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            for p in parts {
                if s.write_all(&p).await.is_err() {
                    return;
                }
                tokio::task::yield_now().await;
            }
            // A FIN, then what the client sends read until it closes (its
            // bytes unread would turn the FIN into a RST).
            let _ = s.shutdown().await;
            let mut sink = [0u8; 1024];
            let drain = async { while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {} };
            let _ = tokio::time::timeout(DEADLINE, drain).await;
        });
        let stream = TcpStream::connect(addr).await.expect("connect");
        let spec = Spec {
            version,
            client_id: "fuzz-{{conn}}".into(),
            clean_start: true,
            keepalive: Duration::from_secs(30),
            session_expiry: None,
            user: None,
            password: None,
            subscribe: subscribe.then(|| ("t/{{conn}}".to_string(), 1)),
            websocket: None,
        };
        let scratch = std::cell::RefCell::new(vec![0u8; 4096].into_boxed_slice());
        let sleep = std::pin::pin!(tokio::time::sleep(DEADLINE));
        let outcome = tokio::time::timeout(
            DEADLINE * 3,
            handshake(&spec, Transport::Plain(stream), 7, DEADLINE, &scratch, sleep),
        )
        .await
        .expect("the handshake ended within its own deadlines");
        let class = match &outcome {
            Ok(_) => "ok".to_string(),
            Err(class) => class.name().into_owned(),
        };
        drop(outcome);
        let _ = peer.await;
        class
    })
}

/// Classes a handshake against a hostile peer may end in.
fn is_expected(class: &str) -> bool {
    matches!(class, "ok" | "eof" | "reset" | "timeout.handshake") || class.starts_with("mqtt.")
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_any_split(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                 cuts in proptest::collection::vec(0usize..64, 0..12),
                                 v5 in any::<bool>()) {
        let version = if v5 { Version::V5 } else { Version::V311 };
        let _ = codec::header(&bytes);
        prop_assert!(feed(&split(bytes, cuts), version));
    }

    #[test]
    fn edited_real_packets(pick in 0usize..64, at in 0usize..12, byte in any::<u8>(),
                           cut in 0usize..8, v5 in any::<bool>()) {
        let seeds = seeds();
        // Every seed can be edited, the PUBLISHes and acks at the end too.
        let pick = pick % seeds.len();
        let mut stream: Vec<u8> = seeds.concat();
        let base = seeds[..pick].iter().map(Vec::len).sum::<usize>();
        if let Some(b) = stream.get_mut(base + at) {
            *b = byte;
        }
        let version = if v5 { Version::V5 } else { Version::V311 };
        prop_assert!(feed(&split(stream, vec![cut, cut * 3]), version));
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn the_handshake_reads_hostile_brokers_into_classes(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        pick in 0usize..64,
        at in 0usize..12,
        byte in any::<u8>(),
        cut in 0usize..8,
        v5 in any::<bool>(),
        subscribe in any::<bool>(),
        edited in any::<bool>(),
    ) {
        let version = if v5 { Version::V5 } else { Version::V311 };
        let stream = if edited {
            let seeds = seeds();
            let mut s: Vec<u8> = seeds[pick % seeds.len()..].concat();
            if let Some(b) = s.get_mut(at) {
                *b = byte;
            }
            s
        } else {
            bytes
        };
        let class = run(split(stream, vec![cut]), version, subscribe);
        prop_assert!(is_expected(&class), "{class}");
    }
}

#[test]
fn real_answers_complete_however_split() {
    for version in [Version::V311, Version::V5] {
        let connack: Vec<u8> = if version == Version::V5 {
            vec![0x20, 3, 0, 0, 0]
        } else {
            vec![0x20, 2, 0, 0]
        };
        let suback: Vec<u8> = if version == Version::V5 {
            vec![0x90, 4, 0, 1, 0, 1]
        } else {
            vec![0x90, 3, 0, 1, 1]
        };
        let whole = [connack.clone(), suback].concat();
        for cut in 0..whole.len() {
            assert_eq!(
                run(split(whole.clone(), vec![cut]), version, true),
                "ok",
                "{version:?} cut at {cut}"
            );
        }
        assert_eq!(run(vec![connack], version, false), "ok");
    }
    // A refused CONNECT, by version.
    assert_eq!(
        run(vec![vec![0x20, 2, 0, 5]], Version::V311, false),
        "mqtt.connack.not_authorized"
    );
    assert_eq!(
        run(vec![vec![0x20, 3, 0, 0x8a, 0]], Version::V5, false),
        "mqtt.connack.banned"
    );
    assert_eq!(
        run(
            vec![vec![0x20, 2, 0, 0], vec![0x90, 3, 0, 1, 0x80]],
            Version::V311,
            true
        ),
        "mqtt.suback.failure"
    );
}
