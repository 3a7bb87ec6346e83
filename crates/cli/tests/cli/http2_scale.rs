//! `throng http --http2` with thousands of connections on one worker
//! thread against real nginx (h2c): every connection is opened, speaks
//! its preface and carries its requests, the books balance, and what each
//! connection costs in memory stays small (the `h2` crate's fixed buffers
//! made it about 40 KB; throng's own client keeps an idle connection's
//! buffers at none).

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Nginx, assert_books_balance, http};

#[test]
fn two_thousand_h2c_connections_on_one_thread_each_carry_their_requests() {
    let _alone = common::heavy();
    let nginx = Nginx::start_listen(
        "http2",
        "http2_max_concurrent_streams 8;",
        "location = / { default_type text/plain; return 200 \"hi\"; }",
    );
    let run_with = |connections: &str| {
        http(&[
            &nginx.url("/"),
            "--http2",
            "-c",
            connections,
            "--streams",
            "1",
            "-n",
            "6000",
            "-t",
            "1",
            "--timeout",
            "30s",
        ])
    };
    let one = run_with("1");
    assert_eq!(one.code(), 0, "stderr: {}", one.stderr());
    let run = run_with("2000");
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let r = run.result();
    let m = &r.measurements;
    assert_books_balance(r);
    assert_eq!((m.requests.attempted, m.requests.ok), (6000, 6000), "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&6000));
    assert_eq!(m.bytes.received_body, 2 * 6000);
    assert_eq!(m.connections.ok, 2000);
    assert_eq!(m.phases["handshake"].count(), 2000);
    let x = m.multiplex.as_ref().expect("an HTTP/2 result has multiplex figures");
    assert_eq!(x.protocols.get("h2"), Some(&2000));
    assert_eq!((x.connections, x.requests), (2000, 6000), "{x:?}");
    assert_eq!(x.server_max_streams, Some(8));
    // One stream per connection at most, and every connection carried one.
    assert_eq!(x.peak_streams_per_connection, 1);
    assert!(x.min_requests_per_connection >= 1, "{x:?}");
    // Memory per connection: the peak over the same run on one connection,
    // shared by 2,000. The h2 crate took about 26 KB here (this build, not
    // optimized); throng's client about 7 KB.
    let base = one.result().generator.peak_rss_bytes;
    let peak = r.generator.peak_rss_bytes;
    let per_conn = peak.saturating_sub(base) / 2000;
    assert!(
        per_conn < 16_000,
        "{per_conn} bytes per connection ({base} for one, {peak} for 2,000)"
    );
}
