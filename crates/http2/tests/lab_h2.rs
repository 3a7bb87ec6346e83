//! throng-http2 against a second real peer: the `h2` crate's server inside
//! throng's lab server (`throng serve --fault h2-*`), which indexes response
//! fields in the HPACK dynamic table and Huffman-codes them, and which
//! resets, refuses, goes away, shrinks windows and limits streams on demand.
//! Every count is exact: one connection, streams numbered as accepted.

mod common;

use std::net::SocketAddr;

use common::{Client, block};
use throng_http2::{ErrorCode, Settings, StreamId};
use throng_lab::{Fault, GOAWAY_AFTER, LabConfig, LabServer, TINY_WINDOW_BODY};

fn lab(fault: Fault) -> LabServer {
    let config = LabConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        threads: 1,
        stall: None,
        tls: None,
    };
    LabServer::start_fault(&config, fault).expect("start the lab server")
}

/// `n` GETs one after another on one connection; the stream ids in order.
fn sequential(c: &mut Client, n: usize) -> Vec<StreamId> {
    let get = block(b"GET", b"127.0.0.1", b"/", &[]);
    let mut ids = Vec::new();
    for _ in 0..n {
        if !c.conn.can_start_request() {
            break;
        }
        let id = c.conn.start_request(&get, true).expect("a stream opens");
        ids.push(id);
        c.run_until(|c| c.done(id));
        if c.eof {
            break;
        }
    }
    ids
}

#[test]
fn every_second_stream_reset_or_refused() {
    for (fault, code) in [
        (Fault::H2RstStream, ErrorCode::INTERNAL_ERROR),
        (Fault::H2RefusedStream, ErrorCode::REFUSED_STREAM),
    ] {
        let server = lab(fault);
        let mut c = Client::connect(server.addr(), Settings::default());
        let ids = sequential(&mut c, 10);
        assert_eq!(ids.len(), 10);
        let ok = ids.iter().filter(|&&s| c.ok(s, 200, b"ok")).count();
        let reset = ids.iter().filter(|&&s| c.responses[&s].reset == Some(code)).count();
        assert_eq!((ok, reset), (5, 5), "{fault:?}");
        // The second, fourth, ... stream: ids 3, 7, 11, 15, 19.
        for (i, s) in ids.iter().enumerate() {
            assert_eq!(c.responses[s].reset.is_some(), i % 2 == 1, "{fault:?} stream {s}");
        }
        // The h2 server sends `server: throng-lab` indexed in its dynamic
        // table from the second response on: decoded the same every time.
        let servers: Vec<_> = ids
            .iter()
            .filter(|&&s| c.ok(s, 200, b"ok"))
            .map(|s| {
                c.responses[s]
                    .headers
                    .iter()
                    .find(|(n, _)| n == "server")
                    .map(|(_, v)| v.clone())
            })
            .collect();
        assert_eq!(servers, vec![Some("throng-lab".to_string()); 5]);
        assert!(
            c.conn.hpack_table_size() > 0,
            "the h2 server indexed nothing: the dynamic table went untested"
        );
        assert_eq!(c.conn.open_streams(), 0);
        server.stop();
    }
}

#[test]
fn goaway_leaves_the_unanswered_stream_open_for_the_driver() {
    let server = lab(Fault::H2Goaway);
    let mut c = Client::connect(server.addr(), Settings::default());
    let ids = sequential(&mut c, 10);
    let answered = GOAWAY_AFTER as usize - 1;
    assert_eq!(ids.len(), answered + 1, "requests stop at the GOAWAY");
    assert_eq!(ids.iter().filter(|&&s| c.ok(s, 200, b"ok")).count(), answered);
    let last = ids[answered];
    // The server accepted the fifth stream and names it as the last it
    // processed, but closes without answering it: no cut-off event (its id
    // is not above last_stream), and it is still open at EOF for the driver
    // to count.
    assert_eq!(c.goaway, Some((last, ErrorCode::NO_ERROR)));
    assert!(c.cut_off.is_empty());
    c.run_until(|_| false);
    assert!(c.eof);
    assert_eq!(c.conn.streams().collect::<Vec<_>>(), [last]);
    assert!(!c.conn.can_start_request());
    server.stop();
}

#[test]
fn tiny_send_window_and_large_responses() {
    let server = lab(Fault::H2TinyWindow);
    let mut c = Client::connect(server.addr(), Settings::default());
    c.run_until(|c| c.settings_seen);
    assert_eq!(c.conn.peer_settings().initial_window_size, 16);
    // A 10,000-byte body through a 16-byte window: the server's credit,
    // given back as it reads, carries it.
    let body: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    let post = block(b"POST", b"127.0.0.1", b"/", &[(b"content-length", b"10000")]);
    let id = c.conn.start_request(&post, false).unwrap();
    let mut sent = 0;
    let mut most_at_once = 0;
    while !c.done(id) {
        if sent < body.len() {
            let n = c.conn.send_data(id, &body[sent..], true).unwrap();
            most_at_once = most_at_once.max(n);
            sent += n;
        }
        c.flush();
        c.read();
    }
    assert_eq!(sent, body.len());
    assert!(c.window_updates > 0);
    assert!(most_at_once < body.len(), "the window never held the body back");
    let r = &c.responses[&id];
    assert_eq!((r.status, r.reset, r.body.len()), (200, None, TINY_WINDOW_BODY));
    assert!(r.body.iter().all(|&b| b == b'w'));
    server.stop();
}

#[test]
fn one_stream_at_a_time_when_the_server_says_so() {
    let server = lab(Fault::H2MaxStreams1);
    let mut c = Client::connect(server.addr(), Settings::default());
    c.run_until(|c| c.settings_seen);
    assert_eq!(c.conn.max_streams(), 1);
    let get = block(b"GET", b"127.0.0.1", b"/", &[]);
    let mut ids = Vec::new();
    let mut most_open = 0;
    while ids.len() < 20 || c.conn.open_streams() > 0 {
        while ids.len() < 20 && c.conn.can_start_request() {
            ids.push(c.conn.start_request(&get, true).unwrap());
        }
        most_open = most_open.max(c.conn.open_streams());
        c.flush();
        c.read();
    }
    assert_eq!(most_open, 1);
    assert_eq!(ids.iter().filter(|&&s| c.ok(s, 200, b"ok")).count(), 20);
    server.stop();
}
