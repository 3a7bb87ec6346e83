//! WebSocket storms against real servers: the `websockets` package from
//! PyPI (crates/cli/tests/servers/ws_server.py: echo, push, refuse, close)
//! and nginx proxying WebSocket to it for wss://.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{WsServer, assert_books_balance};

/// A `ws_server.py` in one mode, killed on drop.

#[test]
fn messages_are_echoed_in_order_and_every_socket_closes_with_1000() {
    let server = WsServer::start("echo");
    let bin = server.dir.path().join("frame.bin");
    std::fs::write(&bin, b"\x00\xffbinary\x01").unwrap();
    let at_bin = format!("@{}", bin.display());
    let run = common::storm(&[
        &server.url("/chat?room=1"),
        "-n",
        "20",
        "--hold",
        "500ms",
        "--send",
        "hello",
        "--expect",
        "^hello$",
        "--send-binary",
        &at_bin,
        "--expect",
        "binary",
        "--send",
        "bye\\n",
        "--expect",
        "^bye\\n$",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, 20);
    assert_eq!(m.connections.ok, 20, "{:?}", m.connections.errors);
    assert_eq!(m.phases["handshake"].count(), 20, "one upgrade each");
    assert_eq!(m.phases["response"].count(), 60, "three round trips each");
    assert_eq!(m.closed_by_peer, 0);
    // Our close frame (1000) came first on every socket, and the server
    // saw it as such.
    let closes = server.closes(20);
    assert_eq!(closes.len(), 20, "{closes:?}");
    assert!(closes.iter().all(|c| c == "1000"), "{closes:?}");
    let problems = common::schema_violations(&run.json);
    assert!(problems.is_empty(), "schema violations: {problems:#?}");
}

#[test]
fn a_wrong_message_a_refused_upgrade_and_a_close_are_counted_by_class() {
    let echo = WsServer::start("echo");
    let run = common::storm(&[&echo.url("/"), "-n", "8", "--send", "ping", "--expect", "^pong$"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(
        m.connections.error("protocol.unexpected_reply"),
        8,
        "{:?}",
        m.connections.errors
    );

    let refuse = WsServer::start("refuse");
    let run = common::storm(&[&refuse.url("/"), "-n", "7"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(
        m.connections.error("ws.upgrade_refused.403"),
        7,
        "{:?}",
        m.connections.errors
    );
    assert!(run.stdout().contains("ws.upgrade_refused.403"), "{}", run.stdout());

    let close = WsServer::start("close");
    let run = common::storm(&[&close.url("/"), "-n", "6", "--send", "hi", "--expect", "."]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.connections.error("ws.closed.1008"), 6, "{:?}", m.connections.errors);

    // Nothing listening there: TCP's class, as for every storm.
    let port = common::free_port();
    let run = common::storm(&[&format!("ws://127.0.0.1:{port}/"), "-n", "3"]);
    assert_eq!(run.result().measurements.connections.error("refused"), 3);
}

#[test]
fn held_sockets_read_pushes_and_time_their_pings() {
    let server = WsServer::start("push");
    let run = common::storm(&[
        &server.url("/feed"),
        "-n",
        "10",
        "--hold",
        "2500ms",
        "--expect",
        "^push 1$",
        "--ping-every",
        "500ms",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 10, "{:?}", m.connections.errors);
    // One expectation, no send before it: its round trip still counts.
    assert_eq!(m.phases["response"].count(), 10);
    // 2.5 s at one ping per 500 ms: at most 5 each; a loaded machine may
    // answer late, but each socket sees at least one.
    let pongs = m.phases["pong"].count();
    assert!((10..=50).contains(&pongs), "pongs: {pongs}");
    assert!(run.stdout().contains("pong"), "{}", run.stdout());
    let closes = server.closes(10);
    assert!(closes.iter().all(|c| c == "1000"), "{closes:?}");
}

#[test]
fn a_server_going_away_sends_every_socket_back_through_a_reconnect() {
    let server = WsServer::start("echo");
    let signal = format!("kill -USR1 {}", server.child.id());
    let run = common::storm(&[
        &server.url("/"),
        "-n",
        "12",
        "--hold",
        "6s",
        "--send",
        "again",
        "--expect",
        "again",
        "--reconnect",
        "--reconnect-wait",
        "300ms",
        "--trigger-after",
        "500ms",
        "--trigger",
        &signal,
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 12, "{:?}", m.connections.errors);
    assert_eq!(m.closed_by_peer, 12, "the server closed every held socket (1001)");
    assert_eq!(m.close_codes.get("1001"), Some(&12), "{:?}", m.close_codes);
    assert!(run.stdout().contains("by close code: 1001=12"), "{}", run.stdout());
    assert_eq!(m.phases["reconnect"].count(), 12, "{:?}", m.reconnect_gave_up);
    assert_eq!(
        m.phases["handshake"].count(),
        24,
        "every connect and reconnect upgraded"
    );
    assert_eq!(m.phases["response"].count(), 24, "and exchanged its message");
    let closes = server.closes(24);
    assert_eq!(closes.iter().filter(|c| *c == "1001").count(), 12, "{closes:?}");
    assert_eq!(closes.iter().filter(|c| *c == "1000").count(), 12, "{closes:?}");
}

#[test]
fn wss_through_nginx_proxying_websocket() {
    let server = WsServer::start("echo");
    let (_d, c) = common::certs();
    let nginx = common::nginx_wss(&c, server.port);
    let url = format!("wss://localhost:{}/ws", nginx.port);
    let ca = common::p(&c, "ca.pem");
    let run = common::storm(&[
        &url, "--cacert", &ca, "-n", "15", "--hold", "300ms", "--send", "über", "--expect", "^über$",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let m = &run.result().measurements;
    assert_books_balance(run.result());
    assert_eq!(m.connections.ok, 15, "{:?}", m.connections.errors);
    assert_eq!(m.phases["tls"].count(), 15);
    assert_eq!(m.phases["response"].count(), 15);
    let closes = server.closes(15);
    assert_eq!(closes.len(), 15, "{closes:?}");
    assert!(
        closes.iter().all(|c| c == "1000"),
        "nginx passed our close frames on: {closes:?}"
    );
    // A path nginx does not proxy (its 404): matrix::ws_tls::fault.
}

#[test]
fn flags_that_do_not_fit_are_usage_errors() {
    for (args, flag) in [
        (
            &["tcp://127.0.0.1:9", "-n", "1", "--ping-every", "1s"][..],
            "--ping-every",
        ),
        (
            &["tcp://127.0.0.1:9", "-n", "1", "--send-binary", "@/dev/null"][..],
            "--send-binary",
        ),
        (&["ws://127.0.0.1:9/", "-n", "1", "--request", "GET /"][..], "--request"),
        (
            &["ws://127.0.0.1:9/", "-n", "1", "--send-binary", "frame.bin"][..],
            "@FILE",
        ),
        (
            &["ws://127.0.0.1:9/", "-n", "1", "--send-binary", "@/nonexistent/x"][..],
            "cannot read",
        ),
        (
            &["ws://127.0.0.1:9/", "-n", "1", "--ping-every", "0s"][..],
            "--ping-every",
        ),
    ] {
        let run = common::storm(args);
        assert_eq!(run.code(), 2, "{args:?}: {}", run.stderr());
        assert!(run.stderr().contains(flag), "{args:?}: {}", run.stderr());
    }
}

#[test]
fn the_lab_server_echoes_and_holds_websockets_over_two_processes() {
    // The lab's GET /ws: what bench/storm.py holds 100,000 of.
    let lab = common::lab(None);
    let url = format!("ws://{}/ws", lab.addr());
    let run = common::storm(&[
        &url,
        "-n",
        "200",
        "--procs",
        "2",
        "--hold",
        "1500ms",
        "--send",
        "hello",
        "--expect",
        "^hello$",
        "--ping-every",
        "500ms",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        (m.connections.attempted, m.connections.ok),
        (200, 200),
        "{:?}",
        m.connections.errors
    );
    assert_eq!(m.phases["handshake"].count(), 200, "one upgrade each");
    assert_eq!(m.phases["response"].count(), 200, "one echo each");
    let pongs = m.phases["pong"].count();
    assert!((200..=800).contains(&pongs), "each socket's pings answered: {pongs}");
    assert_eq!(m.closed_by_peer, 0);
    // A plain GET /ws is told what the endpoint wants.
    let plain = common::http(&[&format!("http://{}/ws", lab.addr()), "-n", "1"]);
    assert_eq!(plain.result().measurements.status.get(&400), Some(&1));
}

#[test]
fn a_server_that_floods_pings_and_never_reads_cannot_hold_a_storm_past_its_deadlines() {
    let server = WsServer::start("flood");
    // Waiting for a message that never comes while the pings pile up: the
    // pongs fill both buffers, and the step's deadline (--timeout) ends it.
    let run = common::storm(&[
        &server.url("/"),
        "-n",
        "4",
        "--send",
        "hi",
        "--expect",
        "^never$",
        "--timeout",
        "1s",
        "--hold",
        "1s",
    ]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, 4);
    assert_eq!(
        m.connections.error("timeout.handshake"),
        4,
        "{:?}",
        m.connections.errors
    );
    // Held sockets: the hold ends at --hold, and the close frame no one
    // reads is given up on.
    let run = common::storm(&[&server.url("/"), "-n", "4", "--hold", "1s"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.connections.ok, 4,
        "{:?}",
        r.measurements.connections.errors
    );
}

#[test]
fn a_large_message_to_a_server_that_never_reads_times_out() {
    let server = WsServer::start("deaf");
    // Messages of 1 MiB (the most --send-binary sends), 16 of them: more
    // than the socket's buffers take.
    let big = server.dir.path().join("big.bin");
    std::fs::write(&big, vec![7u8; 1 << 20]).unwrap();
    let at_big = format!("@{}", big.display());
    let mut args = vec![server.url("/"), "-n".into(), "2".into()];
    for _ in 0..16 {
        args.extend(["--send-binary".to_string(), at_big.clone()]);
    }
    args.extend(["--expect", ".", "--timeout", "1s"].map(String::from));
    let run = common::storm(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, 2);
    assert_eq!(
        m.connections.error("timeout.handshake"),
        2,
        "{:?}",
        m.connections.errors
    );
}

/// URL credentials go out as `Authorization: Basic base64(user:password)`
/// on every upgrade (percent-decoded, as `throng http` sends them), in one
/// process and over a storm's processes, and show in no output. The server
/// refuses any other upgrade with 401, so a storm that does not send them
/// fails here.
#[test]
fn url_credentials_are_sent_as_basic_authorization_on_the_upgrade() {
    use base64::Engine as _;
    let secret = "s3cr:et-ws-9d1e";
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("al@ce:{secret}"));
    let server = WsServer::requiring("echo", &format!("Basic {encoded}"));
    // Without credentials the server refuses: it does check.
    let bare = common::storm(&[&server.url("/"), "-n", "5", "--send", "hi", "--expect", "^hi$"]);
    assert_eq!(bare.code(), 1, "{}", bare.stderr());
    let m = &bare.result().measurements;
    assert_eq!(
        m.connections.error("ws.upgrade_refused.401"),
        5,
        "{:?}",
        m.connections.errors
    );
    let url = format!("ws://al%40ce:s3cr%3Aet-ws-9d1e@127.0.0.1:{}/chat", server.port);
    for procs in ["1", "2"] {
        let run = common::storm(&[&url, "-n", "10", "--procs", procs, "--send", "hi", "--expect", "^hi$"]);
        assert_eq!(run.code(), 0, "--procs {procs}: {}", run.stderr());
        let r = run.result();
        assert_books_balance(r);
        let m = &r.measurements;
        assert_eq!(
            (m.connections.attempted, m.connections.ok),
            (10, 10),
            "--procs {procs}: {:?}",
            m.connections.errors
        );
        let result = std::fs::read_to_string(&run.json).unwrap();
        for (what, text) in [
            ("the result", result),
            ("stdout", run.stdout()),
            ("stderr", run.stderr()),
        ] {
            assert!(
                !text.contains("s3cr") && !text.contains(&encoded),
                "--procs {procs}: {what} holds the secret: {text}"
            );
        }
    }
}
