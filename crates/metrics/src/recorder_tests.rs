//! The recorder's unit tests (beside it, so that recorder.rs stays one concern).

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn streams_are_counted_per_connection_and_per_second() {
    let t0 = Instant::now();
    let mut r = Recorder::new(t0);
    assert!(r.clone().finish(t0).multiplex.is_none(), "HTTP/1.1 results have none");
    r.mux_connection("h2", 10, Some(4));
    r.mux_connection("h2", 10, Some(3));
    for i in 1..=4 {
        r.stream_opened(t0 + ms(10), i);
    }
    for _ in 0..3 {
        r.stream_closed();
    }
    // One stream stays in flight through seconds 1 and 2.
    r.phase(t0 + ms(2500), Phase::Wait, ms(1));
    r.stream_closed();
    r.mux_connection_closed(7);
    r.mux_connection_closed(2);
    let m = r.finish(t0 + ms(2600));
    let x = m.multiplex.unwrap();
    assert_eq!(x.protocols.get("h2"), Some(&2));
    assert_eq!((x.streams_requested, x.server_max_streams), (10, Some(3)));
    assert_eq!((x.peak_streams_per_connection, x.peak_streams), (4, 4));
    assert_eq!((x.connections, x.requests), (2, 9));
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (2, 7));
    let per_second: Vec<u64> = m.series.iter().map(|p| p.streams_max).collect();
    assert_eq!(per_second, [4, 1, 1]);

    let mut a = x.clone();
    a.merge(&x).unwrap();
    assert_eq!((a.connections, a.requests, a.peak_streams), (4, 18, 8));
    assert_eq!((a.min_requests_per_connection, a.max_requests_per_connection), (2, 7));
    let mut empty = crate::Multiplex::default();
    empty.merge(&x).unwrap();
    assert_eq!(
        empty.min_requests_per_connection, 2,
        "an empty side does not pull the minimum to 0"
    );
}

#[test]
fn a_recent_snapshot_has_every_total_and_the_last_seconds() {
    let t0 = Instant::now();
    let mut r = Recorder::new(t0);
    for i in 0..50u64 {
        let now = t0 + ms(i * 100); // seconds 0..=4
        r.request_started();
        r.phase(now, Phase::Latency, ms(1 + i));
        let reply = Reply {
            status: 200,
            header_bytes: 10,
            body_bytes: 0,
        };
        r.request_ok(now, reply, 10);
    }
    let now = t0 + ms(4950);
    let full = r.snapshot(now);
    let recent = r.snapshot_recent(now, 2);
    assert_eq!(recent.requests, full.requests);
    assert_eq!(recent.phases["latency"].count(), 50);
    let seconds: Vec<u64> = recent.series.iter().map(|p| p.second).collect();
    assert_eq!(seconds, [2, 3, 4]);
    assert_eq!(recent.series[..], full.series[2..]);
    // The recorder is as it was.
    assert_eq!(r.snapshot(now).series, full.series);
}

#[test]
fn events_land_in_their_second_and_totals_add_up() {
    let t0 = Instant::now();
    let mut r = Recorder::new(t0);
    r.connection_started(t0, false);
    r.connected(t0 + ms(1), ms(1));
    r.connection_established(t0 + ms(1), false);
    for i in 0..10 {
        let now = t0 + ms(100 + i * 300); // 100..2800 ms: seconds 0,0,0,1,1,1,1,2,2,2
        r.request_started();
        r.sent(now, 50);
        r.phase(now, Phase::Latency, ms(5));
        let reply = Reply {
            status: 200,
            header_bytes: 100,
            body_bytes: 10,
        };
        r.request_ok(now, reply, 110);
    }
    r.request_started();
    r.request_failed(t0 + ms(3500), ErrorClass::Reset, 0);
    r.connection_closed(t0 + ms(3500), ms(3499));
    let m = r.finish(t0 + ms(3600));

    assert!(m.requests.is_balanced());
    assert_eq!(m.requests.attempted, 11);
    assert_eq!(m.requests.ok, 10);
    assert_eq!(m.requests.error("reset"), 1);
    assert!(m.connections.is_balanced());
    assert_eq!(m.status[&200], 10);
    assert_eq!(m.bytes.sent, 500);
    assert_eq!(m.bytes.received, 1100);
    assert_eq!(m.bytes.received_body, 100);
    assert_eq!(m.phases["latency"].count(), 10);
    assert_eq!(m.phases["connection"].count(), 1);

    let per_second: Vec<u64> = m.series.iter().map(|p| p.ok).collect();
    assert_eq!(per_second, vec![3, 4, 3, 0]);
    assert_eq!(m.series[3].errors, 1);
    let series_samples: u64 = m.series.iter().map(|p| p.phase("latency").unwrap().count()).sum();
    assert_eq!(series_samples, 10);
    assert_eq!(m.peak_concurrent_connections, 1);
    assert_eq!(
        m.series[1].concurrent_max, 1,
        "open connection carries into later seconds"
    );
}

#[test]
fn idle_gaps_become_empty_seconds() {
    let t0 = Instant::now();
    let mut r = Recorder::new(t0);
    r.request_started();
    r.request_failed(t0 + ms(10), ErrorClass::Refused, 0);
    r.request_started();
    r.request_failed(t0 + ms(5010), ErrorClass::Refused, 0);
    let m = r.finish(t0 + ms(5020));
    assert_eq!(m.series.len(), 6);
    assert_eq!(
        m.series.iter().map(|p| p.second).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4, 5]
    );
    assert_eq!(m.series.iter().map(|p| p.errors).sum::<u64>(), 2);
}

#[test]
fn each_second_counts_its_errors_by_class() {
    let t0 = Instant::now();
    let mut r = Recorder::new(t0);
    let s1 = t0 + Duration::from_millis(1500);
    r.request_failed(t0, ErrorClass::Refused, 0);
    r.request_failed(t0, ErrorClass::Refused, 0);
    r.request_rejected(t0, Reply::default(), 0);
    r.connection_failed(t0, ErrorClass::Refused, false);
    // Time only moves forward: what follows belongs to second 1.
    r.request_failed(s1, ErrorClass::Reset, 0);
    r.requests_interrupted(s1, 2);
    r.connections_interrupted(s1, 1, false);
    let m = r.finish(s1);
    let classes = |i: usize| m.series[i].error_classes.clone().into_iter().collect::<Vec<_>>();
    assert_eq!(
        classes(0),
        [("check_failed".to_string(), 1), ("refused".to_string(), 2)]
    );
    assert_eq!(classes(1), [("interrupted".to_string(), 2), ("reset".to_string(), 1)]);
    for p in &m.series {
        assert_eq!(p.error_classes.values().sum::<u64>(), p.errors, "second {}", p.second);
        assert_eq!(
            p.connection_error_classes.values().sum::<u64>(),
            p.connection_errors,
            "second {}",
            p.second
        );
    }
    assert_eq!(m.series[0].connection_error_classes.get("refused"), Some(&1));
    assert_eq!(m.series[1].connection_error_classes.get("interrupted"), Some(&1));
}

#[test]
fn interrupted_requests_balance_the_books() {
    let t0 = Instant::now();
    let mut r = Recorder::new(t0);
    for _ in 0..3 {
        r.request_started();
    }
    r.request_ok(
        t0,
        Reply {
            status: 204,
            ..Reply::default()
        },
        0,
    );
    r.requests_interrupted(t0, 2);
    let m = r.finish(t0);
    assert!(m.requests.is_balanced());
    assert_eq!(m.requests.error("interrupted"), 2);
}
