//! When a run gives up early, and when it must not: a target nobody answers
//! (refused) is given up after the first few attempts; a server that
//! answers, however badly (here a TLS certificate throng does not trust),
//! gets every request or connection the run asked for, on any machine.
//! (The give-up was judged on a 100 ms tick over every failure, so how many
//! attempts such a run made depended on the machine's speed.)

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::tls::nginx_tls;
use common::certs_with as certs;

use common::{assert_books_balance, http};

fn stopped_early(r: &throng_result::RunResult) -> bool {
    r.notes.iter().any(|n| n.contains("stopped early"))
}

#[test]
fn an_answering_server_gets_every_request() {
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    // One connection at a time: 500 handshakes take far longer than the
    // tick, which used to stop the run after its first few.
    let run = http(&[&nginx.https("localhost", "/"), "-n", "500", "-c", "1"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.requests.attempted, 500, "{:?}", r.notes);
    assert_eq!(m.requests.error("tls.unknown_ca"), 500, "{:?}", m.requests.errors);
    assert_eq!(m.connections.error("tls.unknown_ca"), 500);
    assert!(!stopped_early(r), "{:?}", r.notes);
}

#[test]
fn an_answering_server_gets_every_storm_connection() {
    let (_d, c) = certs(&[]);
    let nginx = nginx_tls(&c, false);
    // --rate spreads the 50 over half a second: five ticks.
    let target = format!("tls://localhost:{}", nginx.port);
    let run = common::storm(&[&target, "-n", "50", "--rate", "100"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.attempted, 50, "{:?}", r.notes);
    assert_eq!(m.connections.error("tls.unknown_ca"), 50, "{:?}", m.connections.errors);
    assert!(!stopped_early(r), "{:?}", r.notes);
}

#[test]
fn nobody_answering_is_given_up_early() {
    let port = common::free_port();
    // 50 at 100/s: the first ten refusals stop it before the half second.
    let run = common::storm(&[&format!("tcp://127.0.0.1:{port}"), "-n", "50", "--rate", "100"]);
    assert_eq!(run.code(), 1, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(m.connections.ok, 0);
    assert_eq!(m.connections.error("refused"), m.connections.attempted);
    assert!(m.connections.attempted >= 10, "{:?}", m.connections);
    if m.connections.attempted < 50 {
        assert!(stopped_early(r), "{:?}", r.notes);
    }
}
