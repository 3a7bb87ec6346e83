//! The progress display on stderr while a run lasts: one line at first, then,
//! once the run has lasted [`LIVE_AFTER`] and a merged snapshot exists, a
//! compact live view (rate, errors by class, connections/VUs, p50/p99 of the
//! last second, stages). Nothing at all when stderr is not a terminal or
//! `--quiet` was given.

use std::cell::Cell;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use throng_engine::Progress;
use throng_metrics::Measurements;

/// How long a run goes before the single line becomes the live view.
pub const LIVE_AFTER: Duration = Duration::from_secs(2);

/// What a run counts: requests (http, run) or connections (storm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HTTP requests.
    Requests,
    /// Connections of a storm.
    Connections,
}

/// One scenario's stages on the run's clock, for the live view.
#[derive(Clone, Debug, PartialEq)]
pub struct StageClock {
    /// The scenario.
    pub scenario: String,
    /// When it starts, from the run's start.
    pub start: Duration,
    /// Each stage's length.
    pub stages: Vec<Duration>,
}

/// A progress display, or nothing when stderr is not a terminal or
/// `--quiet` was given.
pub struct Display {
    bar: Option<ProgressBar>,
    kind: Kind,
    stages: Vec<StageClock>,
    live: Cell<bool>,
}

impl Display {
    /// A display for a run of requests.
    pub fn new(quiet: bool) -> Self {
        Self::of(quiet, Kind::Requests)
    }

    /// A display for a run counting `kind`.
    pub fn of(quiet: bool, kind: Kind) -> Self {
        let mut d = Display {
            bar: None,
            kind,
            stages: Vec::new(),
            live: Cell::new(false),
        };
        if quiet || !std::io::stderr().is_terminal() {
            return d;
        }
        let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr_with_hz(10));
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        d.bar = Some(bar);
        d
    }

    /// Shows progress through these stages in the live view.
    pub fn with_stages(mut self, stages: Vec<StageClock>) -> Self {
        self.stages = stages;
        self
    }

    /// True when the display is shown (and so would use merged snapshots).
    pub fn is_shown(&self) -> bool {
        self.bar.is_some()
    }

    /// Updates the line.
    pub fn tick(&self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        let secs = p.elapsed.as_secs_f64();
        let rate = if secs > 0.0 { p.live.requests as f64 / secs } else { 0.0 };
        let fraction = match (p.total_requests, p.duration) {
            (Some(total), _) if total > 0 => p.live.requests as f64 / total as f64,
            (_, Some(d)) if !d.is_zero() => secs / d.as_secs_f64(),
            _ => 0.0,
        };
        bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
        let remaining = match p.duration {
            Some(d) => format!(", {:.0}s left", d.saturating_sub(p.elapsed).as_secs_f64()),
            None => String::new(),
        };
        let line = format!(
            "{} requests, {:.0}/s, {} errors, {} open, {:.1}s{}",
            p.live.requests, rate, p.live.errors, p.live.open_connections, secs, remaining
        );
        self.show(bar, p, line);
    }

    /// Updates the line for a storm (connections, not requests).
    pub fn tick_storm(&self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        let done = p.live.connections_ok + p.live.connection_errors;
        if let Some(total) = p.total_requests.filter(|t| *t > 0) {
            bar.set_position((done as f64 / total as f64).clamp(0.0, 1.0).mul_add(1000.0, 0.0) as u64);
        }
        let line = format!(
            "{} established, {} failed, {} open, {:.1}s",
            p.live.connections_ok,
            p.live.connection_errors,
            p.live.open_connections,
            p.elapsed.as_secs_f64()
        );
        self.show(bar, p, line);
    }

    fn show(&self, bar: &ProgressBar, p: &Progress, line: String) {
        let live = self.live.get() || (p.elapsed >= LIVE_AFTER && p.snapshot.is_some());
        self.live.set(live);
        match (&p.snapshot, live) {
            (Some(m), true) => {
                let mut msg = line;
                for l in live_lines(p, m, self.kind, &self.stages) {
                    msg.push_str("\n  ");
                    msg.push_str(&l);
                }
                bar.set_message(msg);
            }
            _ => bar.set_message(line),
        }
    }

    /// Removes the display.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The live view's lines under the progress line, from a merged snapshot:
/// the last complete second's rate and p50/p99, errors by class, open
/// connections and VUs, and where each scenario is in its stages.
pub fn live_lines(p: &Progress, m: &Measurements, kind: Kind, stages: &[StageClock]) -> Vec<String> {
    let mut lines = Vec::new();
    // The snapshot's last point is the second in progress; the one before
    // it is the last complete second.
    let last = m.series.len().checked_sub(2).and_then(|i| m.series.get(i));
    let (what, phases): (&str, &[&str]) = match kind {
        Kind::Requests => ("req/s", &["latency", "response"]),
        Kind::Connections => ("conn/s", &["connect", "tls"]),
    };
    let mut line = String::from("last second: ");
    match last {
        Some(s) => {
            let n = match kind {
                Kind::Requests => s.requests,
                Kind::Connections => s.connections_opened,
            };
            let _ = write!(line, "{n} {what}");
            let (failed, classes) = match kind {
                Kind::Requests => (s.errors, &s.error_classes),
                Kind::Connections => (s.connection_errors, &s.connection_error_classes),
            };
            if failed > 0 {
                let mut top: Vec<(&String, &u64)> = classes.iter().collect();
                top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let named: Vec<String> = top.iter().take(3).map(|(c, n)| format!("{c} {n}")).collect();
                let _ = write!(line, " ({failed} failed: {})", named.join(", "));
            }
            let hist = phases
                .iter()
                .find_map(|ph| s.phases.get(*ph).and_then(|e| e.decode().ok()).map(|h| (*ph, h)));
            if let Some((ph, h)) = hist.filter(|(_, h)| !h.is_empty()) {
                let _ = write!(line, ", {ph} p50 {} p99 {}", us(h.quantile(0.5)), us(h.quantile(0.99)));
            }
        }
        None => line.push_str("(not yet complete)"),
    }
    lines.push(line);

    let errors = match kind {
        Kind::Requests => &m.requests.errors,
        Kind::Connections => &m.connections.errors,
    };
    let mut classes: Vec<(&String, &u64)> = errors.iter().filter(|(_, n)| **n > 0).collect();
    classes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    // Classes and statuses are kept per run, not per second: say so. They
    // come from the merged snapshot, up to a second older than the counters
    // on the progress line above: say when it was taken, with its own count,
    // so that the two lines never seem to disagree.
    let (ended, noun) = match kind {
        Kind::Requests => (m.requests.ended(), "request"),
        Kind::Connections => (m.connections.ended(), "connection"),
    };
    let mut line = match m.series.last() {
        Some(s) => format!("so far (merged at {}s): ", s.second),
        None => String::from("so far: "),
    };
    let _ = write!(line, "{}, errors ", throng_plan::count(ended, noun));
    if classes.is_empty() {
        line.push_str("none");
    } else {
        let shown: Vec<String> = classes.iter().take(4).map(|(c, n)| format!("{c} {n}")).collect();
        line.push_str(&shown.join(", "));
        if classes.len() > 4 {
            let _ = write!(line, ", {} more classes", classes.len() - 4);
        }
    }
    let (_, c2, _, c4, c5, _) = {
        let c = m.status_classes();
        (c[0], c[1], c[2], c[3], c[4], c[5])
    };
    if c2 + c4 + c5 > 0 {
        let _ = write!(line, "   status 2xx {c2} 4xx {c4} 5xx {c5}");
    }
    lines.push(line);

    let mut line = format!("open connections: {}", p.live.open_connections);
    // An http run with several targets keeps per-target tags there too, but has no VUs.
    if m.scenario
        .as_ref()
        .is_some_and(|s| !s.tags.keys().any(|k| k.starts_with("target:")))
    {
        let _ = write!(line, ", VUs: {}", vus(m));
    }
    lines.push(line);

    for st in stages {
        lines.push(stage_line(st, p.elapsed));
    }
    lines
}

/// VUs of a merged snapshot: the most active in its last complete second,
/// summed over the workers. (The second in progress is not used: each
/// worker's copy was taken at its own instant, so not every worker's copy
/// reaches into it yet.)
pub fn vus(m: &Measurements) -> u64 {
    let Some(s) = &m.scenario else { return 0 };
    let n = s.series.len();
    s.series.get(n.saturating_sub(2)).map_or(0, |x| x.vus)
}

/// Where one scenario is in its stages at `elapsed`.
fn stage_line(st: &StageClock, elapsed: Duration) -> String {
    let n = st.stages.len();
    let Some(into) = elapsed.checked_sub(st.start) else {
        return format!(
            "{}: starts in {:.0}s",
            st.scenario,
            st.start.saturating_sub(elapsed).as_secs_f64()
        );
    };
    let mut end = Duration::ZERO;
    for (i, d) in st.stages.iter().enumerate() {
        let begin = end;
        end += *d;
        if into < end {
            let pct = if d.is_zero() {
                100.0
            } else {
                (into - begin).as_secs_f64() / d.as_secs_f64() * 100.0
            };
            return format!("{}: stage {}/{n}, {pct:.0}% through it", st.scenario, i + 1);
        }
    }
    format!("{}: stages done", st.scenario)
}

/// Microseconds as a short duration.
fn us(v: u64) -> String {
    match v {
        0..1_000 => format!("{v}µs"),
        1_000..1_000_000 => format!("{:.1}ms", v as f64 / 1e3),
        _ => format!("{:.2}s", v as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use throng_metrics::{EncodedHist, Hist, Live, SeriesPoint};

    use super::*;

    fn progress(m: Measurements) -> Progress {
        Progress {
            elapsed: Duration::from_secs(5),
            live: Live {
                open_connections: 7,
                ..Live::default()
            },
            total_requests: None,
            duration: Some(Duration::from_secs(10)),
            snapshot: Some(Arc::new(m)),
        }
    }

    fn snapshot() -> Measurements {
        let mut h = Hist::new();
        for us in 1..=100 {
            h.record_us(us * 100);
        }
        let mut m = Measurements::default();
        m.requests.errors.insert("refused".into(), 3);
        m.requests.errors.insert("timeout.response".into(), 9);
        m.status.insert(200, 90);
        m.status.insert(503, 2);
        let mut full = SeriesPoint {
            second: 3,
            requests: 120,
            errors: 4,
            ..SeriesPoint::default()
        };
        full.phases.insert("latency".into(), EncodedHist::new(&h));
        full.error_classes.insert("timeout.response".into(), 3);
        full.error_classes.insert("refused".into(), 1);
        m.series = vec![
            full,
            SeriesPoint {
                second: 4,
                requests: 7,
                ..SeriesPoint::default()
            },
        ];
        m
    }

    #[test]
    fn the_live_view_shows_the_last_complete_second() {
        let p = progress(snapshot());
        let lines = live_lines(&p, p.snapshot.as_deref().unwrap(), Kind::Requests, &[]);
        assert_eq!(
            lines[0],
            "last second: 120 req/s (4 failed: timeout.response 3, refused 1), latency p50 5.0ms p99 9.9ms"
        );
        assert_eq!(
            lines[1],
            "so far (merged at 4s): 12 requests, errors timeout.response 9, refused 3   status 2xx 90 4xx 0 5xx 2"
        );
        assert_eq!(lines[2], "open connections: 7");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn a_first_second_is_not_yet_complete() {
        let p = progress(Measurements::default());
        let lines = live_lines(&p, &Measurements::default(), Kind::Connections, &[]);
        assert_eq!(lines[0], "last second: (not yet complete)");
        assert_eq!(lines[1], "so far: 0 connections, errors none");
    }

    #[test]
    fn stages_say_where_each_scenario_is() {
        let st = StageClock {
            scenario: "browse".into(),
            start: Duration::from_secs(1),
            stages: vec![Duration::from_secs(2), Duration::from_secs(4)],
        };
        assert_eq!(stage_line(&st, Duration::ZERO), "browse: starts in 1s");
        assert_eq!(
            stage_line(&st, Duration::from_secs(2)),
            "browse: stage 1/2, 50% through it"
        );
        assert_eq!(
            stage_line(&st, Duration::from_secs(4)),
            "browse: stage 2/2, 25% through it"
        );
        assert_eq!(stage_line(&st, Duration::from_secs(9)), "browse: stages done");
    }

    #[test]
    fn no_terminal_no_display() {
        // Tests run without a terminal on stderr.
        if !std::io::stderr().is_terminal() {
            assert!(!Display::new(false).is_shown());
        }
        assert!(!Display::new(true).is_shown());
    }
}
