//! The progress line on stderr while a run lasts.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use throng_engine::Progress;

/// A progress display, or nothing when stderr is not a terminal or
/// `--quiet` was given.
pub struct Display {
    bar: Option<ProgressBar>,
}

impl Display {
    /// A display for a run.
    pub fn new(quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Display { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr_with_hz(10));
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        Display { bar: Some(bar) }
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
        bar.set_message(format!(
            "{} requests, {:.0}/s, {} errors, {} open, {:.1}s{}",
            p.live.requests, rate, p.live.errors, p.live.open_connections, secs, remaining
        ));
    }

    /// Updates the line for a storm (connections, not requests).
    pub fn tick_storm(&self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        let done = p.live.connections_ok + p.live.connection_errors;
        if let Some(total) = p.total_requests.filter(|t| *t > 0) {
            bar.set_position((done as f64 / total as f64).clamp(0.0, 1.0).mul_add(1000.0, 0.0) as u64);
        }
        bar.set_message(format!(
            "{} established, {} failed, {} open, {:.1}s",
            p.live.connections_ok,
            p.live.connection_errors,
            p.live.open_connections,
            p.elapsed.as_secs_f64()
        ));
    }

    /// Removes the line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
