//! Custom metrics: `metrics:` declared, `add:` steps naming them,
//! thresholds on them.

use super::*;
use throng_metrics::{CustomKind, CustomStats, Measurements, ScenarioStats};

const METRICS: &str = r#"
target: http://127.0.0.1:8080
metrics:
  orders: counter
  basket: trend
  paid: rate
  queue: gauge
scenarios:
  shop:
    executor: constant-vus
    vus: 2
    duration: 5s
    flow:
      - request:
          path: /buy
          capture:
            items: { json: /items }
      - add: { metric: orders, value: 1, tags: { shop: books } }
      - add: { metric: basket, value: "{{items}}" }
      - add: { metric: paid, value: true }
      - add: { metric: queue, value: 3.5 }
thresholds:
  orders: [count > 10]
  orders{shop:books}: [count > 10]
  basket: [p(95) < 200]
  paid: [rate > 0.9]
  queue: [value < 5]
"#;

#[track_caller]
fn metrics_rejects(from: &str, to: &str, at: &str, message: &str) {
    assert!(METRICS.contains(from), "METRICS has no '{from}'");
    let text = METRICS.replacen(from, to, 1);
    let e = parse(&text).expect_err(to);
    assert!(e.message.contains(message), "{to}: '{e}' does not say '{message}'");
    let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
    assert!(
        e.line > 0 && line.contains(at),
        "{to}: {e} points at '{line}', not at '{at}'"
    );
}

#[test]
fn metrics_and_add_steps_are_read() {
    let p = parse(METRICS).unwrap();
    assert_eq!(
        p.metrics.iter().map(|m| (m.name.as_str(), m.kind)).collect::<Vec<_>>(),
        [
            ("orders", CustomKind::Counter),
            ("basket", CustomKind::Trend),
            ("paid", CustomKind::Rate),
            ("queue", CustomKind::Gauge)
        ]
    );
    let adds: Vec<&Add> = p.scenarios[0]
        .flow
        .iter()
        .filter_map(|s| match s {
            Step::Add(a) => Some(a.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(adds.len(), 4);
    assert_eq!(adds[0].value, AddValue::Number(1.0));
    assert_eq!(adds[0].keys(), ["orders", "orders{shop:books}"]);
    assert!(matches!(&adds[1].value, AddValue::Template(t) if t.source() == "{{items}}"));
    assert_eq!(adds[2].value, AddValue::Number(1.0));
    assert_eq!(p.thresholds.iter().filter(|t| t.custom.is_some()).count(), 5);
    assert_eq!(p.thresholds[1].tag, Some(("shop".into(), "books".into())));
    assert_eq!(AddValue::read(" 12.5 "), Some(12.5));
    assert_eq!(AddValue::read("false"), Some(0.0));
    assert_eq!(AddValue::read("twelve"), None);
}

#[test]
fn bad_metrics_and_adds_are_refused_where_written() {
    metrics_rejects(
        "  queue: gauge",
        "  queue: histogram",
        "queue: histogram",
        "not a kind of metric",
    );
    metrics_rejects("  queue: gauge", "  9queue: gauge", "9queue", "is not a metric name");
    metrics_rejects(
        "  queue: gauge",
        "  response: gauge",
        "response: gauge",
        "is a built-in metric's name",
    );
    metrics_rejects(
        "{ metric: orders, value: 1,",
        "{ metric: order, value: 1,",
        "metric: order,",
        "the metric 'order' is not declared",
    );
    metrics_rejects(
        "{ metric: queue, value: 3.5 }",
        "{ metric: queue, value: lots }",
        "metric: queue",
        "is not a number",
    );
    metrics_rejects(
        "{ metric: basket, value: \"{{items}}\" }",
        "{ metric: basket, value: \"{{itms}}\" }",
        "{{itms}}",
        "{{itms}} is not defined",
    );
    metrics_rejects(
        "orders: [count > 10]",
        "orders: [p(95) < 10]",
        "orders:",
        "orders is a counter",
    );
    metrics_rejects("paid: [rate > 0.9]", "paid: [rate > lots]", "paid:", "is not a number");
    metrics_rejects(
        "queue: [value < 5]",
        "queue: [value < 5 over 10s]",
        "queue:",
        "not over windows",
    );
    metrics_rejects(
        "queue: [value < 5]",
        "queues: [value < 5]",
        "queues:",
        "'queues' is not a metric",
    );
    metrics_rejects(
        "orders{shop:books}: [count > 10]",
        "orders{shop:games}: [count > 10]",
        "orders{shop:games}",
        "no add: step of orders carries the tag shop:games",
    );
    metrics_rejects(
        "tags: { shop: books }",
        "tags: { shop: \"a b\" }",
        "shop:",
        "is not a tag",
    );
    let many: String = (0..65).map(|i| format!("  m{i}: counter\n")).collect();
    metrics_rejects(
        "  orders: counter\n",
        &format!("  orders: counter\n{many}"),
        "metrics:",
        "at most 64",
    );
}

#[test]
fn custom_thresholds_judge_their_metric() {
    let p = parse(METRICS).unwrap();
    let mut s = ScenarioStats::default();
    let mut add = |name: &str, kind, values: &[f64]| {
        let mut c = CustomStats::new(kind);
        values.iter().for_each(|v| c.record(Some(*v)));
        s.custom.insert(name.to_string(), c);
    };
    add("orders", CustomKind::Counter, &[5.0, 6.0]);
    add("orders{shop:books}", CustomKind::Counter, &[4.0]);
    add(
        "basket",
        CustomKind::Trend,
        &(1..=300).map(f64::from).collect::<Vec<_>>(),
    );
    add("paid", CustomKind::Rate, &[1.0, 1.0, 1.0, 0.0]);
    add("queue", CustomKind::Gauge, &[9.0, 4.0]);
    let m = Measurements {
        scenario: Some(s),
        ..Measurements::default()
    };
    let verdicts: Vec<(bool, Option<f64>)> = p
        .thresholds
        .iter()
        .map(|t| t.evaluate(&m))
        .map(|v| (v.passed, v.observed))
        .collect();
    assert_eq!(
        verdicts,
        [
            (true, Some(11.0)),
            (false, Some(4.0)),
            (false, Some(285.0)),
            (false, Some(0.75)),
            (true, Some(4.0))
        ]
    );
    // Nothing added: no samples, a failure.
    let empty = Measurements::default();
    assert!(!p.thresholds[0].evaluate(&empty).passed);
    assert!(
        p.thresholds[0]
            .evaluate(&empty)
            .detail
            .contains("no add: step recorded a value into orders")
    );
}
