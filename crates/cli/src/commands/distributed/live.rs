//! The coordinator's live view: every agent's latest figures added up
//! exactly, each second shown (progress line, `--prometheus`) and judged
//! (the command's thresholds, for `--abort-on-fail`).

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_metrics::Measurements;
use throng_scenario::Threshold;

use crate::exit::UsageError;
use crate::live::LiveFigures;
use crate::prometheus::Exporter;

pub struct LiveView {
    /// Each agent's latest figures and their sequence number.
    latest: Vec<Option<(u64, LiveFigures<Measurements>)>>,
    /// Per agent, the last sequence a coordinator before this one saw
    /// (`--resume`): older figures are not taken again.
    floors: Vec<u64>,
    exporter: Option<Exporter>,
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
    /// `thresholds` are judged every second on the merged figures: with
    /// `abort_all` (--abort-on-fail) every one stops the run when it fails,
    /// otherwise those written with `abort_on_fail` (once their delay
    /// passed).
    pub fn new(
        agents: usize,
        prometheus: Option<SocketAddr>,
        thresholds: Vec<Threshold>,
        abort_all: bool,
        quiet: bool,
    ) -> Result<LiveView, UsageError> {
        let exporter = prometheus
            .map(|addr| {
                Exporter::start(addr, std::collections::BTreeMap::new()).map_err(|e| {
                    UsageError(format!(
                        "--prometheus {addr}: cannot listen there ({e}); pick a free address, e.g. 127.0.0.1:9464"
                    ))
                })
            })
            .transpose()?;
        let thresholds = thresholds
            .into_iter()
            .map(|t| {
                let abort = abort_all || t.abort_on_fail;
                (t, abort)
            })
            .collect();
        Ok(LiveView {
            latest: (0..agents).map(|_| None).collect(),
            floors: vec![0; agents],
            exporter,
            thresholds,
            abort_all,
            shown: !quiet && std::io::stderr().is_terminal(),
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
            *slot = Some((seq, f));
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

    /// The agents start at `at`: a threshold's delay counts from then.
    pub fn starts_at(&mut self, at: Instant) {
        self.started = at;
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
        if let Some(e) = &self.exporter {
            e.update(Some(&Arc::new(m)), open, vus);
        }
        failed
    }

    /// The run ended with these merged measurements: the endpoint shows
    /// exactly them from now on (before the agents hear that their results
    /// were collected, and the linger of [`LiveView::finish`]).
    pub fn settle(&self, m: &Measurements) {
        if let Some(e) = &self.exporter {
            e.finished(m);
        }
    }

    /// The run ended with these merged measurements: the endpoint shows
    /// exactly them from now on; then it keeps serving for `linger`.
    pub fn finish(self, m: &Measurements, linger: Duration, cut_short: impl Fn() -> bool) {
        if self.shown {
            say!();
        }
        let Some(e) = &self.exporter else { return };
        e.finished(m);
        let until = Instant::now() + linger;
        while Instant::now() < until && !cut_short() {
            std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
        }
    }
}
