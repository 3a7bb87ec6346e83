use super::facts::side_by_side;
use super::lines::spectrum;
use super::*;
use crate::chart::PALETTE;
use throng_metrics::{EncodedHist, Hist, Measurements, SeriesPoint};
use throng_result::Plan;

fn run(url: &str, seconds: u64) -> RunResult {
    let mut doc: serde_json::Value = serde_json::json!({
        "schema": throng_result::SCHEMA,
        "throng_version": "0.1.0",
        "plan": null,
        "started_at": "2026-01-01T00:00:00.000Z",
        "started_at_unix_ms": 0,
        "duration_s": seconds as f64,
        "coordinated_omission_free": false,
        "interrupted": false,
        "environment": {"hostname": "h<o>st", "os": "Linux", "cores": 2, "fd_limit_soft": 1024, "fd_limit_hard": 4096},
        "generator": {"cpu_user_s": 0.1, "cpu_system_s": 0.2, "peak_rss_bytes": 1000000, "threads": 1},
        "measurements": serde_json::to_value(Measurements::default()).unwrap(),
        "parts": []
    });
    doc["plan"] = serde_json::to_value(Plan::Http(
        throng_plan::HttpPlan::from_args(throng_plan::HttpArgs {
            url: url.to_string(),
            headers: vec!["X-Test: <script>alert(1)</script>".to_string()],
            cores: 1,
            ..Default::default()
        })
        .unwrap(),
    ))
    .unwrap();
    let mut r: RunResult = serde_json::from_value(doc).unwrap();
    let mut total = Hist::new();
    for s in 0..seconds {
        let mut h = Hist::new();
        for v in 1..=100 {
            h.record_us(v * (s + 1) * 10);
        }
        total.add(&h).unwrap();
        r.measurements.series.push(SeriesPoint {
            second: s,
            requests: 100,
            ok: 99,
            errors: 1,
            concurrent_max: 4,
            phases: [("latency".to_string(), EncodedHist::new(&h))].into(),
            ..SeriesPoint::default()
        });
    }
    r.measurements.phases.insert("latency".into(), total);
    r.measurements.requests.attempted = 100 * seconds;
    r.measurements.requests.ok = 99 * seconds;
    r.measurements.requests.errors.insert("reset".into(), seconds);
    r.measurements.status.insert(200, 99 * seconds);
    r
}

/// Each chart's `data-points` values, by `data-chart`.
fn points(html: &str) -> Vec<(String, Vec<usize>)> {
    html.split("<svg class=\"chart\" data-chart=\"")
        .skip(1)
        .map(|part| {
            let id = part.split('"').next().unwrap_or_default().to_string();
            let body = part.split("</svg>").next().unwrap_or_default();
            let n = body
                .split("data-points=\"")
                .skip(1)
                .filter_map(|p| p.split('"').next()?.parse().ok())
                .collect();
            (id, n)
        })
        .collect()
}

#[test]
fn one_run_has_every_chart_with_a_point_per_second() {
    let html = render(&run("http://127.0.0.1:1/?a=1&b=<2>", 5));
    let charts = points(&html);
    let ids: Vec<&str> = charts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["throughput", "errors", "active", "latency", "spectrum", "phases"]);
    for (id, n) in &charts[..4] {
        assert!(!n.is_empty() && n.iter().all(|&n| n == 5), "{id}: {n:?}");
    }
    // 500 samples: two decades of spectrum at 20 points each, and the max.
    assert_eq!(charts[4].1, [55]);
    assert_eq!(html.matches("<g class=\"range\"").count(), 1);
}

#[test]
fn user_text_is_escaped_and_nothing_is_fetched() {
    let html = render(&run("http://127.0.0.1:1/?a=1&b=<2>", 2));
    assert!(!html.contains("<script"), "the header value must be escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("?a=1&amp;b=&lt;2&gt;"));
    assert!(html.contains("h&lt;o&gt;st"));
    assert!(html.contains(CSP));
    for attr in [" src=", " href=", "url(", "@import", "<link", "<img"] {
        assert!(!html.contains(attr), "{attr} in the page");
    }
}

#[test]
fn compare_overlays_the_sides() {
    let (a, b) = (run("http://127.0.0.1:1/", 3), run("http://127.0.0.1:2/", 4));
    let html = render_compare(&[("direct".to_string(), &a), ("nat".to_string(), &b)]);
    let charts = points(&html);
    let throughput = &charts.iter().find(|(id, _)| id == "throughput").unwrap().1;
    assert_eq!(throughput, &[3, 3, 4, 4]);
    let spectrum = &charts.iter().find(|(id, _)| id == "spectrum").unwrap().1;
    assert_eq!(spectrum.len(), 2);
    assert!(html.contains("data-series=\"direct · requests\""));
    assert!(html.contains(PALETTE[1]), "the second side has its own colour");
    assert_eq!(html.matches("<g class=\"range\"").count(), 2);
}

#[test]
fn a_trend_has_a_point_per_run_on_every_chart() {
    let runs = [
        run("http://127.0.0.1:1/", 2),
        run("http://127.0.0.1:1/", 3),
        run("http://127.0.0.1:1/", 4),
    ];
    let labels = ["v1", "<v2>", "v3"];
    let t = crate::trend::Trend {
        plan: "http GET http://127.0.0.1:1/".into(),
        fingerprint: "0123456789abcdef".into(),
        unit: "requests".into(),
        notes: vec!["1 entry of another plan skipped".into()],
        points: labels
            .iter()
            .zip(&runs)
            .map(|(l, r)| crate::trend::Point::of(l, r))
            .collect(),
    };
    assert_eq!(t.points[2].ended, 400);
    assert_eq!(t.points[2].failed, 4);
    let html = render_trend(&t);
    let charts = points(&html);
    let ids: Vec<&str> = charts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["trend-latency", "trend-throughput", "trend-errors"]);
    assert_eq!(charts[0].1, [3, 3], "p50 and p99, a point per run");
    assert_eq!(charts[1].1, [3]);
    assert_eq!(charts[2].1, [3]);
    assert!(html.contains("&lt;v2&gt;") && !html.contains("<v2>"));
    assert!(html.contains("1 entry of another plan skipped"));
    assert_eq!(html.matches("<tr><td>").count(), 3, "a table row per run");
    assert!(html.contains(CSP));
}

#[test]
fn side_by_side_lines_up_figures_by_name() {
    let a = vec![("x".to_string(), "1".to_string()), ("y".to_string(), "2".to_string())];
    let b = vec![("y".to_string(), "3".to_string()), ("z<".to_string(), "4".to_string())];
    assert_eq!(
        side_by_side(&[a, b]),
        [vec!["x", "1", ""], vec!["y", "2", "3"], vec!["z&lt;", "", "4"]]
    );
}

#[test]
fn spectrum_runs_from_zero_percent_to_the_max() {
    let mut h = Hist::new();
    for v in 1..=1000 {
        h.record_us(v);
    }
    let s = spectrum(&h);
    assert_eq!(s.first(), Some(&(1.0, 1.0)));
    assert_eq!(s.last(), Some(&(1000.0, 1000.0)));
    assert!(s.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
}

#[test]
fn stream_counts_are_a_table_of_their_own() {
    let mut r = run("http://127.0.0.1:1/sse", 2);
    assert!(!render(&r).contains("<table class=\"streams\">"));
    let mut s = throng_metrics::StreamCounts {
        streams: 40,
        events: 400,
        event_bytes: 2048,
        tokens: 100,
        slo_judged: 40,
        slo_met: 30,
        ..Default::default()
    };
    s.ended.insert("completed".into(), 30);
    s.ended.insert("sse.stalled".into(), 9);
    s.ended.insert("<b>x</b>".into(), 1);
    r.measurements.streams = Some(s);
    let html = render(&r);
    let table = html
        .split("<table class=\"streams\">")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("a streams table");
    for cell in [
        "<td>streams</td><td>40</td>",
        "<td>events</td><td>400 (2.0 kB)</td>",
        "<td>ended: completed</td><td>30 (75.00%)</td>",
        "<td>ended: sse.stalled</td><td>9 (22.50%)</td>",
        "<td>ended: &lt;b&gt;x&lt;/b&gt;</td><td>1 (2.50%)</td>",
        "<td>tokens</td><td>100 (50.0/s)</td>",
        "<td>goodput</td><td>75.00% (30 of 40)</td>",
    ] {
        assert!(table.contains(cell), "{cell} not in {table}");
    }
    assert!(!table.contains("<b>"), "{table}");
}
