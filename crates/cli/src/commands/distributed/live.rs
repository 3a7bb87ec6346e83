//! The coordinator's live view: every agent's latest figures added up
//! exactly, each second shown (progress line, `--prometheus`), pushed
//! (`--remote-write`, `--otlp`, sharing the run's push code) and judged
//! (the command's thresholds, for `--abort-on-fail`).

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_metrics::Measurements;
use throng_scenario::Threshold;

use crate::args::CoordinateCmd;
use crate::exit::UsageError;
use crate::figures::AgentFigures;
use crate::live::{LiveFigures, Pushes};
use crate::prometheus::Exporter;
use crate::push::batch::Gauges;

pub struct LiveView {
    /// Each agent's latest figures and their sequence number.
    latest: Vec<Option<(u64, AgentFigures)>>,
    /// Each agent's `agent` label (by index).
    labels: Vec<String>,
    /// --per-agent: each agent's figures shown and pushed beside the merged ones.
    per_agent: bool,
    /// Per agent, the last sequence a coordinator before this one saw
    /// (`--resume`): older figures are not taken again.
    floors: Vec<u64>,
    exporter: Option<Exporter>,
    pushes: Pushes,
    /// Each threshold, and whether its failure stops the run.
    thresholds: Vec<(Threshold, bool)>,
    /// --abort-on-fail: every threshold stops the run.
    abort_all: bool,
    shown: bool,
    started: Instant,
    /// Something new since the last tick.
    dirty: bool,
}

impl LiveView {
    /// The view of `c`'s agents: its endpoint listening and its pushes
    /// checked and started. `thresholds` are judged every second on the
    /// merged figures: with `abort_all` (--abort-on-fail) every one stops
    /// the run when it fails, otherwise those written with `abort_on_fail`
    /// (once their delay passed).
    pub fn new(c: &CoordinateCmd, thresholds: Vec<Threshold>, abort_all: bool) -> anyhow::Result<LiveView> {
        let exporter = c
            .prometheus
            .map(|addr| {
                Exporter::start(addr, std::collections::BTreeMap::new()).map_err(|e| {
                    UsageError(format!(
                        "--prometheus {addr}: cannot listen there ({e}); pick a free address, e.g. 127.0.0.1:9464"
                    ))
                })
            })
            .transpose()?;
        // Named again when the agents' start is agreed (their own pushes'
        // run_id).
        let pushes = Pushes::start(
            &c.push,
            &std::collections::BTreeMap::new(),
            None,
            crate::push::local_run_id(),
        )?;
        let thresholds = thresholds
            .into_iter()
            .map(|t| {
                let abort = abort_all || t.abort_on_fail;
                (t, abort)
            })
            .collect();
        Ok(LiveView {
            latest: c.agents.iter().map(|_| None).collect(),
            labels: c
                .agents
                .iter()
                .enumerate()
                .map(|(i, a)| AgentFigures::label(i, a))
                .collect(),
            per_agent: c.per_agent,
            floors: vec![0; c.agents.len()],
            exporter,
            pushes,
            thresholds,
            abort_all,
            shown: !c.quiet && std::io::stderr().is_terminal(),
            started: Instant::now(),
            dirty: false,
        })
    }

    /// Agent `i`'s figures, numbered `seq`; an older or unreadable one is
    /// dropped (the next replaces it whole).
    pub fn update(&mut self, i: usize, seq: u64, figures: &str) {
        let Some(slot) = self.latest.get_mut(i) else { return };
        if slot.as_ref().is_some_and(|(s, _)| *s >= seq) || self.floors.get(i).is_some_and(|f| *f >= seq) {
            return;
        }
        // Another process's histograms: checked before any is decoded.
        let Ok(value) = serde_json::from_str::<serde_json::Value>(figures) else {
            return;
        };
        if throng_result::limits::check_histograms_in(&value).is_err() {
            return;
        }
        if let Ok(f) = serde_json::from_value::<LiveFigures<Measurements>>(value) {
            let figures = AgentFigures {
                agent: self.labels.get(i).cloned().unwrap_or_default(),
                measurements: Arc::new(f.measurements),
                open_connections: f.open_connections,
                vus: f.vus,
                running: true,
            };
            *slot = Some((seq, figures));
            self.dirty = true;
        }
    }

    /// Agent `i`'s figures numbered `seq` or before were seen already (by
    /// the coordinator whose journal this one resumes).
    pub fn seen_before(&mut self, i: usize, seq: u64) {
        if let Some(f) = self.floors.get_mut(i) {
            *f = seq;
        }
    }

    /// The sequence of agent `i`'s latest figures (0: none yet).
    pub fn seq_of(&self, i: usize) -> u64 {
        let floor = self.floors.get(i).copied().unwrap_or(0);
        self.latest
            .get(i)
            .and_then(|l| l.as_ref())
            .map_or(floor, |(s, _)| (*s).max(floor))
    }

    /// Agent `i`'s latest requests so far: (ended, ok).
    pub fn last_of(&self, i: usize) -> Option<(u64, u64)> {
        let (_, f) = self.latest.get(i)?.as_ref()?;
        Some((f.measurements.requests.ended(), f.measurements.requests.ok))
    }

    /// Every agent's latest figures added up, and the gauges summed.
    fn merged(&self) -> (Measurements, u64, u64) {
        let mut m = Measurements::default();
        let (mut open, mut vus) = (0u64, 0u64);
        for (_, f) in self.latest.iter().flatten() {
            // The agents started at one instant: their seconds line up.
            let _ = m.merge(&f.measurements, Duration::ZERO);
            open = open.saturating_add(f.open_connections);
            vus = vus.saturating_add(f.vus);
        }
        (m, open, vus)
    }

    /// What made a failing threshold stop the run.
    pub fn abort_flag(&self) -> &'static str {
        if self.abort_all {
            "--abort-on-fail"
        } else {
            "abort_on_fail"
        }
    }

    /// The agents start at `at` (`unix_ms`): a threshold's delay counts
    /// from then, and the pushes name the test after it, as the agents'
    /// own pushes do.
    pub fn starts_at(&mut self, at: Instant, unix_ms: u64) {
        self.started = at;
        self.pushes.name_run(&format!("{unix_ms:x}"));
    }

    /// Once a second: shows the merged figures and judges them. Returns the
    /// first threshold that fails on them and stops the run (one judged on
    /// no samples yet waits for them).
    pub fn tick(&mut self) -> Option<String> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let (m, open, vus) = self.merged();
        let live = self.latest.iter().flatten().count();
        if self.shown {
            let p99 = m.phase("latency").map_or_else(
                || "-".to_string(),
                |h| throng_report::format::us(h.quantile(0.99) as f64),
            );
            say_part!(
                "\r{:>5.0} s  {} agents reporting  {} requests ({} ok)  p99 {p99}   ",
                Instant::now().saturating_duration_since(self.started).as_secs_f64(),
                live,
                m.requests.ended(),
                m.requests.ok,
            );
        }
        let elapsed = Instant::now().saturating_duration_since(self.started);
        let failed = self
            .thresholds
            .iter()
            .filter(|(t, abort)| *abort && elapsed >= Duration::from_millis(t.delay_ms))
            .find_map(|(t, _)| {
                let v = t.evaluate(&m);
                (!v.passed && v.observed.is_some()).then(|| format!("'{}' ({})", t.text, v.detail))
            });
        let m = Arc::new(m);
        let agents: Vec<AgentFigures> = if self.per_agent {
            self.latest.iter().flatten().map(|(_, f)| f.clone()).collect()
        } else {
            Vec::new()
        };
        if let Some(e) = &self.exporter {
            e.update(Some(&m), open, vus, &agents);
        }
        let gauges = Gauges {
            active_connections: open,
            vus,
            running: true,
        };
        self.pushes.tick(Some(&m), gauges, &agents);
        failed
    }

    /// The run ended with these merged measurements, and `results` of the
    /// agents (by index) that returned one: the endpoint shows exactly them
    /// from now on, the pushes send them (waited for, bounded). An agent
    /// without a result is left out, as the merged result leaves it out.
    /// What each push did, for the merged result.
    pub fn finished(
        &self,
        m: &Measurements,
        results: &[(usize, &Measurements)],
    ) -> (Option<throng_result::PushRecord>, Option<throng_result::PushRecord>) {
        if self.shown {
            say!();
        }
        let agents: Vec<AgentFigures> = if self.per_agent {
            results
                .iter()
                .map(|&(i, r)| AgentFigures {
                    agent: self.labels.get(i).cloned().unwrap_or_default(),
                    measurements: Arc::new(r.clone()),
                    open_connections: 0,
                    vus: 0,
                    running: false,
                })
                .collect()
        } else {
            Vec::new()
        };
        if let Some(e) = &self.exporter {
            e.finished(m, &agents);
        }
        self.pushes.finished(m, &agents)
    }

    /// Keeps serving the endpoint for `linger`, unless `cut_short`.
    pub fn linger(self, linger: Duration, cut_short: impl Fn() -> bool) {
        if self.exporter.is_none() {
            return;
        }
        let until = Instant::now() + linger;
        while Instant::now() < until && !cut_short() {
            std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
        }
    }
}
