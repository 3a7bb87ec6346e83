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
    exporter: Option<Exporter>,
    thresholds: Vec<(String, Threshold)>,
    shown: bool,
    started: Instant,
    /// Something new since the last tick.
    dirty: bool,
}

impl LiveView {
    pub fn new(
        agents: usize,
        prometheus: Option<SocketAddr>,
        thresholds: &[String],
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
            .iter()
            .map(|t| {
                Threshold::read_line(t)
                    .map(|th| (t.clone(), th))
                    .map_err(|e| UsageError(format!("--threshold: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(LiveView {
            latest: (0..agents).map(|_| None).collect(),
            exporter,
            thresholds,
            shown: !quiet && std::io::stderr().is_terminal(),
            started: Instant::now(),
            dirty: false,
        })
    }

    /// Agent `i`'s figures, numbered `seq`; an older or unreadable one is
    /// dropped (the next replaces it whole).
    pub fn update(&mut self, i: usize, seq: u64, figures: &str) {
        let Some(slot) = self.latest.get_mut(i) else { return };
        if slot.as_ref().is_some_and(|(s, _)| *s >= seq) {
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

    /// Once a second: shows the merged figures and judges them. Returns the
    /// first threshold that fails on them (one judged on no samples yet
    /// waits for them).
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
                self.started.elapsed().as_secs_f64(),
                live,
                m.requests.ended(),
                m.requests.ok,
            );
        }
        let failed = self.thresholds.iter().find_map(|(text, t)| {
            let v = t.evaluate(&m);
            (!v.passed && v.observed.is_some()).then(|| format!("{text} ({})", v.detail))
        });
        if let Some(e) = &self.exporter {
            e.update(Some(&Arc::new(m)), open, vus);
        }
        failed
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
