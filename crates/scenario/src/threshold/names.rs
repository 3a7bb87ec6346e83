//! The metric and tag names thresholds know, and how lists of them read
//! in a message. A leaf: the parser and its errors both use it.

pub(super) const TRENDS: [&str; 28] = [
    "response",
    "latency",
    "wait",
    "connect",
    "tls",
    "send",
    "receive",
    "schedule_lag",
    "iteration",
    "group_duration",
    // throng mqtt's phases.
    "delivery",
    "puback",
    "pubrec",
    "pubcomp",
    // Event streams (`throng http --sse`, `--llm`).
    "first_event",
    "event_gap",
    "stream",
    "ttft",
    "itl",
    // Connection storms' phases.
    "connection",
    "handshake",
    "reconnect",
    "pong",
    "upgrade",
    "subscribe",
    "first_message",
    "last_message",
    "message_gap",
];
pub(super) const RATES: [&str; 5] = ["check_failed", "errors", "checks", "dropped", "connection_errors"];
pub(super) const COUNTERS: [&str; 4] = ["requests", "iterations", "dropped_iterations", "connections"];

/// Metrics only a scenario records: `throng http` refuses them before the
/// run rather than judge figures it never keeps.
pub(super) const SCENARIO_ONLY: [&str; 5] = [
    "iteration",
    "group_duration",
    "checks",
    "iterations",
    "dropped_iterations",
];

/// The tag kinds a metric is kept under: what `Threshold::evaluate` can
/// look up. Requests are kept per tag in `ScenarioStats::tags` (`step:`,
/// `group:`, `scenario:`, `stage:` keys), checks per check name, group
/// durations per group name; the rest only as a whole.
pub(super) fn tag_kinds(metric: &str) -> &'static [&'static str] {
    match metric {
        "response" | "errors" | "check_failed" | "requests" => &["step", "group", "scenario", "stage", "target"],
        "checks" => &["check"],
        "group_duration" => &["group"],
        _ => &[],
    }
}

/// `a`, `a or b`, `a, b or c`.
pub(super) fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// `'a', 'b' and 'c'`, at most ten names and how many more.
pub(super) fn quoted_list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let quoted: Vec<String> = names.iter().take(SHOWN).map(|n| format!("'{n}'")).collect();
    let more = names.len().saturating_sub(SHOWN);
    match quoted.as_slice() {
        _ if more > 0 => format!("{} and {more} more", quoted.join(", ")),
        [init @ .., last] if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => quoted.join(""),
    }
}
