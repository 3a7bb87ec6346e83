//! The outcomes section: every unit's outcome by class, the open loop's
//! schedule, out-of-turn handshakes, reconnect time and statuses.

use throng_metrics::{ErrorClass, Measurements};
use throng_result::{Plan, RunResult};

use crate::chart::escape;
use crate::format::pct;

use super::page::Page;

/// Picks one kind of outcomes out of the measurements.
type OutcomesOf = fn(&Measurements) -> &throng_metrics::Outcomes;

impl Page {
    pub(super) fn outcomes(&mut self, sides: &[(String, &RunResult)]) {
        self.h2("outcomes", "Outcomes");
        self.outcome_tables(sides);
        self.schedule_table(sides);
        self.out_of_turn_table(sides);
        self.reconnect_table(sides);
        self.status_table(sides);
        self.streams_table(sides);
    }

    /// Requests', connections' and reconnects' outcomes, attempted to each error class.
    fn outcome_tables(&mut self, sides: &[(String, &RunResult)]) {
        let compare = sides.len() > 1;
        let kinds: [(&str, OutcomesOf); 3] = [
            ("requests", |m| &m.requests),
            ("connections", |m| &m.connections),
            ("reconnects", |m| &m.reconnects),
        ];
        for (kind, get) in kinds {
            if sides.iter().all(|(_, r)| get(&r.measurements).is_empty()) {
                continue;
            }
            let mut names: Vec<String> = vec!["attempted".into(), "ok".into()];
            for (_, r) in sides {
                for k in get(&r.measurements).errors.keys() {
                    if !names.contains(k) {
                        names.push(k.clone());
                    }
                }
            }
            let mut head = vec![kind.to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "count".into() }),
            );
            head.push("meaning".into());
            let rows: Vec<Vec<String>> = names
                .iter()
                .map(|name| {
                    let mut row = vec![escape(name)];
                    for (_, r) in sides {
                        let o = get(&r.measurements);
                        let n = match name.as_str() {
                            "attempted" => o.attempted,
                            "ok" => o.ok,
                            k => o.errors.get(k).copied().unwrap_or(0),
                        };
                        row.push(if name == "attempted" {
                            n.to_string()
                        } else {
                            format!("{n} ({:.2}%)", pct(n, o.attempted))
                        });
                    }
                    let meaning = match name.as_str() {
                        "attempted" => "started",
                        "ok" => "ended well",
                        k => ErrorClass::describe(k),
                    };
                    row.push(format!("<span class=\"text\">{}</span>", escape(meaning)));
                    row
                })
                .collect();
            self.table(&format!("outcomes {kind}"), &head, &rows);
        }
    }

    /// The open loop's schedule: scheduled, sent, dropped.
    fn schedule_table(&mut self, sides: &[(String, &RunResult)]) {
        let compare = sides.len() > 1;
        if sides.iter().any(|(_, r)| crate::text::schedule(r).is_some()) {
            let mut head = vec!["schedule".to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "count".into() }),
            );
            head.push("meaning".into());
            type Part = fn((u64, u64, u64)) -> (u64, u64);
            let parts: [(&str, Part, &str); 3] = [
                ("scheduled", |(s, _, _)| (s, s), "starts the open loop's rate asked for"),
                (
                    "sent",
                    |(s, n, _)| (n, s),
                    "requests started on time or late (schedule_lag)",
                ),
                ("dropped", |(s, _, d)| (d, s), crate::text::DROPPED_MEANING),
            ];
            let rows: Vec<Vec<String>> = parts
                .iter()
                .map(|(name, part, meaning)| {
                    let mut row = vec![(*name).to_string()];
                    row.extend(sides.iter().map(|(_, r)| match crate::text::schedule(r) {
                        Some(s) if *name == "scheduled" => part(s).0.to_string(),
                        Some(s) => {
                            let (n, of) = part(s);
                            format!("{n} ({:.2}%)", pct(n, of))
                        }
                        None => "–".to_string(),
                    }));
                    row.push(format!("<span class=\"text\">{}</span>", escape(meaning)));
                    row
                })
                .collect();
            self.table("dropped", &head, &rows);
        }
    }

    /// Handshake messages a storm saw out of turn.
    fn out_of_turn_table(&mut self, sides: &[(String, &RunResult)]) {
        if sides
            .iter()
            .any(|(_, r)| !r.measurements.handshake_out_of_turn.is_empty())
        {
            let rows: Vec<Vec<String>> = crate::storm::report::OUT_OF_TURN
                .iter()
                .filter(|(k, _)| {
                    sides
                        .iter()
                        .any(|(_, r)| r.measurements.handshake_out_of_turn.contains_key(*k))
                })
                .map(|(kind, meaning)| {
                    let mut row = vec![(*kind).to_string()];
                    row.extend(sides.iter().map(|(_, r)| {
                        r.measurements
                            .handshake_out_of_turn
                            .get(*kind)
                            .copied()
                            .unwrap_or(0)
                            .to_string()
                    }));
                    row.push(format!("<span class=\"text\">{}</span>", escape(meaning)));
                    row
                })
                .collect();
            self.table("out-of-turn", &heads(sides, "out of turn"), &rows);
        }
    }

    /// How long the reconnecting crowd was down: throng's view and the clients'.
    fn reconnect_table(&mut self, sides: &[(String, &RunResult)]) {
        let compare = sides.len() > 1;
        if sides
            .iter()
            .any(|(_, r)| r.measurements.total_reconnect_time().is_some())
        {
            let ms = |d: Option<std::time::Duration>| {
                d.map_or("–".to_string(), |d| format!("{:.0} ms", d.as_secs_f64() * 1000.0))
            };
            let mut throngs = vec!["throng's".to_string()];
            throngs.extend(sides.iter().map(|(_, r)| ms(r.measurements.total_reconnect_time())));
            throngs.push("<span class=\"text\">first drop to last re-established (the outage users see)</span>".into());
            let mut clients = vec!["the clients'".to_string()];
            clients.extend(sides.iter().map(|(_, r)| ms(r.measurements.client_reconnect_time())));
            clients.push("<span class=\"text\">server accepting again to last re-established</span>".into());
            let mut head = heads(sides, "reconnect time");
            if !compare {
                head[1] = "time".into();
            }
            self.table("reconnect-time", &head, &[throngs, clients]);
        }
    }

    /// Responses by status; a status the plan does not expect is marked.
    fn status_table(&mut self, sides: &[(String, &RunResult)]) {
        let compare = sides.len() > 1;
        let mut codes: Vec<u16> = sides
            .iter()
            .flat_map(|(_, r)| r.measurements.status.keys().copied())
            .collect();
        codes.sort_unstable();
        codes.dedup();
        if !codes.is_empty() {
            let mut head = vec!["status".to_string()];
            head.extend(
                sides
                    .iter()
                    .map(|(l, _)| if compare { l.clone() } else { "responses".into() }),
            );
            // A status an HTTP run's plan does not expect is check_failed.
            let unexpected = |code: u16| {
                sides.iter().any(
                    |(_, r)| matches!(&r.plan, Plan::Http(p) if p.grpc.is_none() && !p.expect_status.contains(code)),
                )
            };
            let rows: Vec<Vec<String>> = codes
                .iter()
                .map(|code| {
                    let mut row = vec![if unexpected(*code) {
                        format!("{code} (not expected: check_failed)")
                    } else {
                        code.to_string()
                    }];
                    for (_, r) in sides {
                        let n = r.measurements.status.get(code).copied().unwrap_or(0);
                        row.push(format!("{n} ({:.2}%)", pct(n, r.measurements.replies())));
                    }
                    row
                })
                .collect();
            self.table("status", &head, &rows);
        }
    }
}

impl Page {
    /// Event streams (`--sse`, `--llm`, `sse:` steps): events, how each
    /// stream ended, tokens and the goodput, as the text report's lines.
    fn streams_table(&mut self, sides: &[(String, &RunResult)]) {
        if sides.iter().all(|(_, r)| r.measurements.streams.is_none()) {
            return;
        }
        let mut ended: Vec<&String> = sides
            .iter()
            .filter_map(|(_, r)| r.measurements.streams.as_ref())
            .flat_map(|s| s.ended.keys())
            .collect();
        ended.sort();
        ended.dedup();
        type Cell = Box<dyn Fn(&throng_metrics::StreamCounts, f64) -> String>;
        let mut rows: Vec<(String, Cell, &str)> = vec![
            (
                "streams".into(),
                Box::new(|s, _| s.streams.to_string()),
                "streams that ended, each once",
            ),
            (
                "events".into(),
                Box::new(|s, _| format!("{} ({})", s.events, crate::format::bytes(s.event_bytes as f64))),
                "events read whole (the bytes of their data)",
            ),
        ];
        for (i, how) in ended.into_iter().enumerate() {
            let key = how.clone();
            rows.push((
                format!("ended: {}", escape(how)),
                Box::new(move |s, _| {
                    let n = s.ended.get(&key).copied().unwrap_or(0);
                    format!("{n} ({:.2}%)", pct(n, s.streams))
                }),
                if i == 0 {
                    "how streams ended: completed (by the server), events, duration, expected, stopped, or an error class"
                } else {
                    ""
                },
            ));
        }
        if sides
            .iter()
            .any(|(_, r)| r.measurements.streams.as_ref().is_some_and(|s| s.tokens > 0))
        {
            rows.push((
                "tokens".into(),
                Box::new(|s, d| format!("{} ({:.1}/s)", s.tokens, throng_result::per_second(s.tokens, d))),
                "LLM output tokens (per second over the run)",
            ));
        }
        if sides
            .iter()
            .any(|(_, r)| r.measurements.streams.as_ref().is_some_and(|s| s.goodput().is_some()))
        {
            rows.push((
                "goodput".into(),
                Box::new(|s, _| {
                    s.goodput().map_or("–".into(), |g| {
                        format!("{:.2}% ({} of {})", g * 100.0, s.slo_met, s.slo_judged)
                    })
                }),
                "streams that met the --slo",
            ));
        }
        let rows: Vec<Vec<String>> = rows
            .iter()
            .map(|(name, cell, meaning)| {
                let mut row = vec![name.clone()];
                for (_, r) in sides {
                    row.push(
                        r.measurements
                            .streams
                            .as_ref()
                            .map_or("–".into(), |s| cell(s, r.duration_s)),
                    );
                }
                row.push(format!("<span class=\"text\">{meaning}</span>"));
                row
            })
            .collect();
        self.table("streams", &heads(sides, "streams"), &rows);
    }
}

/// A table head: `first`, one column per side (or "count"), "meaning".
fn heads(sides: &[(String, &RunResult)], first: &str) -> Vec<String> {
    let compare = sides.len() > 1;
    let mut head = vec![first.to_string()];
    head.extend(
        sides
            .iter()
            .map(|(l, _)| if compare { l.clone() } else { "count".into() }),
    );
    head.push("meaning".into());
    head
}
