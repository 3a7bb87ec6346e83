//! The scenario section (tags, stages, checks, thresholds) and the text
//! report at the end of the page.

use std::fmt::Write as _;

use throng_result::{Plan, RunResult};

use crate::chart::escape;
use crate::format::pct;

use super::page::Page;

impl Page {
    pub(super) fn scenario(&mut self, r: &RunResult) {
        let (Plan::Run(p), Some(s)) = (&r.plan, &r.measurements.scenario) else {
            return;
        };
        self.h2("scenario", "Steps, groups and scenarios");
        let head: Vec<String> = [
            "tag",
            "requests",
            "errors",
            "status✗",
            "avg",
            "med",
            "p90",
            "p95",
            "p99",
            "max",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut rows: Vec<Vec<String>> = crate::scenario::report::tag_rows(s)
            .into_iter()
            .map(|(kind, name, t)| {
                let h = crate::scenario::report::row(&t.response);
                let mut row = vec![
                    escape(&format!("{kind}:{}", crate::format::name(name))),
                    t.requests.to_string(),
                    t.failed.to_string(),
                    t.unexpected_status.to_string(),
                ];
                row.extend([0, 2, 3, 4, 5, 6].iter().map(|&i| escape(&h[i])));
                row
            })
            .collect();
        for (name, h) in s.groups.iter().filter(|(_, h)| !h.is_empty()) {
            let c = crate::scenario::report::row(h);
            let mut row = vec![
                escape(&format!("group:{} (whole)", crate::format::name(name))),
                h.count().to_string(),
                String::new(),
                String::new(),
            ];
            row.extend([0, 2, 3, 4, 5, 6].iter().map(|&i| escape(&c[i])));
            rows.push(row);
        }
        if !rows.is_empty() {
            self.table("tags", &head, &rows);
            self.html.push_str(
                "<p class=\"plan\">status✗: responses whose status the step does not expect (counted as check_failed).</p>\n",
            );
        }
        let stages = crate::scenario::report::stage_rows(s, p);
        if !stages.is_empty() {
            self.h2("stages", "Load levels (per stage)");
            let head: Vec<String> = ["stage", "span", "planned", "VUs max", "req/s", "med", "p95", "errors"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = stages
                .iter()
                .map(|st| {
                    vec![
                        escape(&crate::format::name(&st.name)),
                        escape(&st.span),
                        escape(&st.planned),
                        st.vus.to_string(),
                        escape(&st.rate),
                        escape(&st.med),
                        escape(&st.p95),
                        escape(&st.errors),
                    ]
                })
                .collect();
            self.table("stages", &head, &rows);
        }
        if !s.checks.is_empty() {
            self.h2("checks", "Checks");
            let head: Vec<String> = ["check", "passes", "fails", "pass"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = s
                .checks
                .iter()
                .map(|(name, c)| {
                    let class = if c.fails == 0 { "pass" } else { "fail" };
                    vec![
                        format!(
                            "<span class=\"{class}\">{}</span> {}",
                            if c.fails == 0 { "✓" } else { "✗" },
                            escape(&crate::format::name(name))
                        ),
                        c.passes.to_string(),
                        c.fails.to_string(),
                        format!("{:.2}%", pct(c.passes, c.passes.saturating_add(c.fails))),
                    ]
                })
                .collect();
            self.table("checks", &head, &rows);
        }
        let custom = crate::scenario::report::custom_rows(s);
        if !custom.is_empty() {
            self.h2("custom-metrics", "Custom metrics");
            let head: Vec<String> = ["metric", "kind", "adds", "value"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = custom
                .into_iter()
                .map(|[name, kind, what, count]| vec![escape(&name), kind, count, escape(&what)])
                .collect();
            self.table("custom-metrics", &head, &rows);
        }
        if !r.thresholds.is_empty() {
            let failed = r.thresholds.iter().filter(|v| !v.passed).count();
            self.h2(
                "thresholds",
                &format!(
                    "Thresholds: {} of {} held{}",
                    r.thresholds.len() - failed,
                    r.thresholds.len(),
                    if failed > 0 { " — FAILED" } else { "" }
                ),
            );
            let head: Vec<String> = ["threshold", "verdict", "detail"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let rows: Vec<Vec<String>> = r
                .thresholds
                .iter()
                .map(|v| {
                    let (class, word) = if v.passed {
                        ("pass", "✓ held")
                    } else {
                        ("fail", "✗ failed")
                    };
                    vec![
                        escape(&crate::format::name(&v.threshold)),
                        format!("<span class=\"{class}\">{word}</span>"),
                        format!("<span class=\"text\">{}</span>", escape(&v.detail)),
                    ]
                })
                .collect();
            self.table("thresholds", &head, &rows);
        }
    }

    /// The text report, for copying into a ticket.
    pub(super) fn text_report(&mut self, r: &RunResult) {
        let mut text = Vec::new();
        if crate::view::write(crate::view::View::Text, r, &mut text).is_err() {
            return;
        }
        self.h2("text", "Text report");
        let _ = writeln!(
            self.html,
            "<details><summary>as <code>throng report</code> prints it</summary><pre>{}</pre></details>",
            escape(&String::from_utf8_lossy(&text))
        );
    }
}
