use throng_metrics::{Hist, Measurements, Phase};
use throng_plan::{StormArgs, StormPlan};
use throng_result::Plan;

#[test]
fn labels_are_the_readmes_and_their_values_line_up() {
    let mut m = Measurements::default();
    m.connections.attempted = 1000;
    m.connections.ok = 1000;
    m.first_attempt_us = Some(0);
    m.last_established_us = Some(500_000);
    m.peak_concurrent_connections = 1000;
    m.closed_by_peer = 10;
    m.first_drop_us = Some(1_000_000);
    m.last_reconnected_us = Some(3_000_000);
    m.reconnects.attempted = 1;
    m.reconnects.ok = 1;
    m.reconnect_gave_up.insert("hold_ended".into(), 9);
    let mut back = Hist::new();
    back.record_us(2_000_000);
    m.phases.insert(Phase::Reconnect.name().into(), back);
    let mut r = crate::testing::test_result(m);
    r.plan = Plan::Storm(
        StormPlan::from_args(StormArgs {
            target: "tcp://127.0.0.1:4222".into(),
            connections: Some(1000),
            rate: Some(1.0 / 6.0),
            workers: Some(1),
            reconnect: true,
            hold: Some(std::time::Duration::from_secs(30)),
            cores: 1,
            ..StormArgs::default()
        })
        .expect("a valid plan"),
    );
    let mut out = Vec::new();
    crate::text::write(&r, &mut out).expect("written");
    let text = String::from_utf8(out).expect("UTF-8");
    assert!(text.contains("1000 connections, 10/min, held 30s, 1 worker"), "{text}");
    assert!(text.contains("1 attempt, 0 failed"), "{text}");
    assert!(
        text.contains("hold ended before a reconnect"),
        "hold_ended is described: {text}"
    );
    let labels = [
        "connections",
        "throughput",
        "total connect",
        "peak",
        "closed early",
        "reconnects",
        "total reconnect",
        "generator",
    ];
    for label in labels {
        let line = text
            .lines()
            .find(|l| l.get(2..2 + label.len()) == Some(label) && l.as_bytes().get(2 + label.len()) == Some(&b' '))
            .unwrap_or_else(|| panic!("no '{label}' line in\n{text}"));
        // Two spaces, the label padded to 16, then the value.
        assert_eq!(line[2..18].trim_end(), label, "{line}");
        assert_ne!(line.as_bytes()[18], b' ', "value of '{label}' not at column 18: {line}");
    }
}

#[test]
fn the_kernel_line_gives_sockets_slab_and_buffers() {
    let mut m = Measurements::default();
    m.connections.attempted = 1000;
    m.connections.ok = 1000;
    m.peak_concurrent_connections = 1000;
    let mut r = crate::testing::test_result(m);
    let mut out = Vec::new();
    super::report::write_kernel(&r, &mut out).expect("written");
    assert!(out.is_empty(), "no line without samples");
    r.generator.kernel = Some(throng_result::KernelSockets {
        tcp_sockets_before: 10,
        tcp_sockets_peak: 2010,
        tcp_buffer_bytes_peak: 4096,
        slab_growth_bytes: 4_096_000,
    });
    super::report::write_kernel(&r, &mut out).expect("written");
    let text = String::from_utf8(out).expect("UTF-8");
    assert!(
        text.starts_with("  kernel          2010 TCP sockets at the peak (2000 more"),
        "{text}"
    );
    assert!(text.contains("(2.0 kB per added socket)"), "{text}");
}
