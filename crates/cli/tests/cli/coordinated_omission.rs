//! The coordinated-omission claim, demonstrated: against a server silent for
//! 1 s of every 5 s, an open loop at 1000 req/s must report what the stall
//! model predicts (p90 ≈ 0.5 s, p99 ≈ 0.95 s), while a closed loop reports
//! far lower figures and says they are not CO-free.
//!
//! These are properties of the stall model, not of machine speed: the
//! tolerances absorb scheduling noise of tens of milliseconds.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{FaultServer, assert_books_balance, http};

/// The lab server, silent for 1 s of every 5 s.
fn serve_with_stalls() -> FaultServer {
    FaultServer::serve(&["--stall-every", "5s", "--stall-for", "1s"])
}

#[test]
fn open_loop_sees_the_stall_closed_loop_hides_it() {
    // Alone: the quantiles are checked against the stall model.
    let _alone = common::heavy();
    let server = serve_with_stalls();
    let url = server.url("http");

    let open = http(&[&url, "-r", "1000", "-d", "10s", "-c", "1500", "-t", "1"]);
    assert_eq!(open.code(), 0, "{}", open.stderr());
    let r = open.result();
    assert_books_balance(r);
    assert!(r.coordinated_omission_free);
    let m = &r.measurements;
    assert_eq!(
        m.requests.attempted + m.dropped,
        10_000,
        "every scheduled request accounted for"
    );
    assert_eq!(m.dropped, 0, "1.5K connections cover a 1 s stall at 1000/s");
    let lat = &m.phases["latency"];
    let (p90, p99) = (lat.quantile(0.90), lat.quantile(0.99));
    assert!(
        (400_000..=600_000).contains(&p90),
        "open-loop p90 {p90} µs, model 500 ms"
    );
    assert!(
        (850_000..=1_050_000).contains(&p99),
        "open-loop p99 {p99} µs, model 950 ms"
    );
    // About a fifth of requests arrived during a stall.
    let stalled = lat.inner().count_between(50_000, 1_100_000);
    assert!(
        (1_500..=2_500).contains(&stalled),
        "{stalled} of 10000 requests waited, model 2000"
    );

    let closed = http(&[&url, "-c", "10", "-d", "10s", "-t", "1"]);
    assert_eq!(closed.code(), 0, "{}", closed.stderr());
    let r = closed.result();
    assert_books_balance(r);
    assert!(!r.coordinated_omission_free);
    let closed_p99 = r.measurements.phases["latency"].quantile(0.99);
    assert!(
        closed_p99 * 4 < p99,
        "closed-loop p99 {closed_p99} µs should be far below the open loop's {p99} µs"
    );
    assert!(closed.stdout().contains("NOT coordinated-omission-free"));
}

#[test]
fn lab_server_stalls_answer_late_not_never() {
    // Alone: the quantiles are checked against the stall model.
    let _alone = common::heavy();
    let server = serve_with_stalls();
    // During a stall a request waits at most the stall's length.
    let run = http(&[&server.url("http"), "-c", "2", "-d", "6s", "-t", "1"]);
    let lat = &run.result().measurements.phases["latency"];
    assert!(
        lat.max() <= Duration::from_millis(1_100).as_micros() as u64,
        "max {}",
        lat.max()
    );
    assert!(
        lat.max() >= Duration::from_millis(500).as_micros() as u64,
        "a stall must show: max {}",
        lat.max()
    );
}
