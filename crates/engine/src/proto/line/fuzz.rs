//! Fuzz targets (proptest) for the NATS and line-protocol readers: the real
//! handshake code reads what a loopback peer writes — arbitrary bytes, edits
//! of real greetings, any split into writes. It must end (within its
//! deadline), never panic, and end in `ok` or a taxonomy class.
//! `PROPTEST_CASES=N` runs longer (docs/FUZZING.md).

use std::cell::RefCell;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::spec::nats_connect;
use super::{ProtocolSpec, Step, handshake};
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

/// Runs `spec`'s handshake against a peer that writes `parts` (pausing
/// between them), then closes. Returns the outcome's class name.
fn run(spec: &ProtocolSpec, parts: Vec<Vec<u8>>) -> String {
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
            // Then a FIN, and read what the client sends until it closes:
            // closing with its bytes unread would turn the FIN into a RST.
            let _ = s.shutdown().await;
            let mut sink = [0u8; 1024];
            let drain = async { while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {} };
            let _ = tokio::time::timeout(DEADLINE, drain).await;
        });
        let stream = TcpStream::connect(addr).await.expect("connect");
        let scratch = RefCell::new(vec![0u8; 16 * 1024].into_boxed_slice());
        let sleep = std::pin::pin!(tokio::time::sleep(DEADLINE));
        let seen = std::cell::Cell::new(crate::proto::line::OutOfTurn::default());
        let outcome = tokio::time::timeout(
            DEADLINE * 2,
            handshake(
                spec,
                Transport::Plain(stream),
                None,
                &scratch,
                DEADLINE,
                sleep,
                &seen,
                0,
            ),
        )
        .await
        .expect("the handshake ended within its own deadline");
        // Drops the connection, so the peer's drain ends.
        let class = match &outcome {
            Ok(_) => "ok".to_string(),
            Err(class) => class.name().into_owned(),
        };
        drop(outcome);
        let _ = peer.await;
        class
    })
}

fn nats() -> ProtocolSpec {
    ProtocolSpec::Nats {
        connect: nats_connect(None, None, false, false),
        strict: false,
    }
}

fn redis_like() -> ProtocolSpec {
    ProtocolSpec::Lines {
        steps: vec![
            Step::Send(b"PING\r\n".to_vec()),
            Step::Expect(regex::bytes::Regex::new(r"^\+PONG$").expect("a regex")),
            Step::Send(b"QUIT\r\n".to_vec()),
            Step::Expect(regex::bytes::Regex::new(r"^\+OK").expect("a regex")),
        ],
        step_timeout: DEADLINE,
    }
}

/// Classes a handshake against a hostile peer may end in.
fn is_expected(class: &str) -> bool {
    matches!(
        class,
        "ok" | "eof" | "reset" | "auth_failed" | "timeout.handshake" | "protocol"
    ) || class.starts_with("protocol.")
}

const INFO: &[u8] = b"INFO {\"server_id\":\"x\",\"version\":\"2.10.0\",\"proto\":1,\"max_payload\":1048576}\r\n";

/// Cuts `bytes` at `cuts` (modulo its length) into writes.
fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect()
}

#[test]
fn real_greetings_complete_however_split() {
    let mut greeting = INFO.to_vec();
    greeting.extend_from_slice(b"+OK\r\nPING\r\nPONG\r\n");
    for cuts in [vec![], vec![1], vec![5, 6, 7, 30], (0..greeting.len()).collect()] {
        assert_eq!(run(&nats(), split(&greeting, &cuts)), "ok", "cuts {cuts:?}");
    }
    let redis = b"+PONG\r\n+OK\r\n";
    assert_eq!(run(&redis_like(), split(redis, &[3, 8])), "ok");
    assert_eq!(
        run(&redis_like(), vec![b"-ERR nope\r\n".to_vec()]),
        "protocol.unexpected_reply"
    );
}

#[test]
fn nats_errors_and_garbage_have_classes() {
    let auth = [INFO, b"-ERR 'Authorization Violation'\r\n"].concat();
    assert_eq!(run(&nats(), vec![auth]), "auth_failed");
    assert_eq!(
        run(&nats(), vec![b"\x00\x01 garbage\r\n".to_vec()]),
        "protocol.unexpected_reply"
    );
    assert_eq!(run(&nats(), vec![b"INFO {not json\r\n".to_vec()]), "protocol.bad_info");
    assert_eq!(run(&nats(), vec![]), "eof");
    assert_eq!(run(&nats(), vec![INFO.to_vec()]), "eof");
}

/// An INFO line past the line limit is a protocol error, not an OS error
/// (issue 11 §2).
#[test]
fn an_oversized_info_line_is_a_protocol_error() {
    let mut info = b"INFO {\"server_id\":\"".to_vec();
    info.resize(200 * 1024, b'x');
    info.extend_from_slice(b"\"}\r\n");
    let class = run(&nats(), vec![info]);
    assert!(class.starts_with("protocol"), "{class}");
}

fn greeting_edit() -> impl Strategy<Value = Vec<u8>> {
    let seeds: Vec<Vec<u8>> = vec![
        [INFO, b"PONG\r\n"].concat(),
        [INFO, b"+OK\r\nPING\r\nPONG\r\n"].concat(),
        [INFO, b"-ERR 'Maximum Connections Exceeded'\r\n"].concat(),
        b"INFO {\"tls_required\":true}\r\n".to_vec(),
        b"+PONG\r\n+OK\r\n".to_vec(),
    ];
    (
        prop::sample::select(seeds),
        prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        any::<usize>(),
    )
        .prop_map(|(mut s, flips, cut)| {
            for (i, b) in flips {
                let n = s.len();
                s[i % n] ^= b;
            }
            s.truncate(cut % (s.len() + 1) + s.len() / 2);
            s
        })
}

proptest! {
    #![proptest_config(config(96))]

    /// Arbitrary bytes and edited greetings, split anyhow: the NATS and the
    /// line handshakes end, without panic, in ok or a class from the
    /// taxonomy (never `other.*`).
    #[test]
    fn hostile_peers_end_in_a_class(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        edited in greeting_edit(),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        for input in [&bytes, &edited] {
            for spec in [nats(), redis_like()] {
                let class = run(&spec, split(input, &cuts));
                prop_assert!(is_expected(&class), "{class} for {:?}", String::from_utf8_lossy(input));
                if input.is_empty() {
                    prop_assert_eq!(class.as_str(), "eof");
                }
            }
        }
    }
}

/// A WebSocket upgrade with one message exchanged after it.
fn websocket() -> ProtocolSpec {
    ProtocolSpec::WebSocket(crate::proto::ws::Spec {
        path: "/chat".into(),
        host: "127.0.0.1".into(),
        authorization: None,
        steps: vec![
            crate::proto::ws::Step::Send {
                binary: false,
                data: b"hi".to_vec(),
            },
            crate::proto::ws::Step::Expect(regex::bytes::Regex::new("hi").expect("a regex")),
        ],
        step_timeout: DEADLINE,
        ping_every: None,
    })
}

/// Classes a WebSocket upgrade against a hostile peer may end in (the
/// peer cannot know the key, so never ok).
fn is_expected_ws(class: &str) -> bool {
    matches!(class, "eof" | "reset" | "timeout.handshake" | "ws.protocol") || class.starts_with("ws.upgrade_refused.")
}

#[test]
fn websocket_answers_have_classes() {
    let wrong_accept = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                         Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    assert_eq!(run(&websocket(), vec![wrong_accept.to_vec()]), "ws.protocol");
    assert_eq!(
        run(
            &websocket(),
            split(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", &[4, 13])
        ),
        "ws.upgrade_refused.403"
    );
    assert_eq!(run(&websocket(), vec![b"HTTP/1.1 101 Switching".to_vec()]), "eof");
    assert_eq!(run(&websocket(), vec![]), "eof");
    let mut endless = b"HTTP/1.1 101 Switching Protocols\r\nX: ".to_vec();
    endless.resize(64 * 1024, b'x');
    assert_eq!(run(&websocket(), vec![endless]), "ws.protocol");
}

proptest! {
    #![proptest_config(config(48))]

    /// Arbitrary bytes and edited answers to the upgrade, split anyhow: the
    /// WebSocket handshake ends, without panic, in a class of its own or
    /// TCP's (never `other.*`).
    #[test]
    fn hostile_upgrade_answers_end_in_a_class(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut edited = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                           Sec-WebSocket-Accept: x\r\n\r\n\x81\x02hi".to_vec();
        for (i, b) in flips {
            let n = edited.len();
            edited[i % n] ^= b;
        }
        for input in [&bytes, &edited] {
            let class = run(&websocket(), split(input, &cuts));
            prop_assert!(is_expected_ws(&class), "{class} for {:?}", String::from_utf8_lossy(input));
        }
    }
}
