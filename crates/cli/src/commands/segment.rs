//! `--segment`, `--segment-sequence` and `--start-at`: parsed here, at the
//! edge, because `--start-at` is checked against the clock and waited for.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use throng_engine::Control;
use throng_plan::Segment;

use crate::args::SegmentArgs;
use crate::exit::{Interrupted, UsageError};

/// Furthest ahead `--start-at` may be.
const MAX_AHEAD: Duration = Duration::from_secs(24 * 3600);
/// Furthest behind `--start-at` may be (agents started a little late still
/// join; later than this, the others have long begun).
const MAX_BEHIND: Duration = Duration::from_secs(10);
/// The engine's own start margin: the wait here ends this much before the
/// start, and the engine's clock waits out the rest exactly.
const ENGINE_MARGIN: Duration = Duration::from_millis(100);

/// The validated flags.
#[derive(Clone, Debug, Default)]
pub struct Segmenting {
    /// The segment (None: the whole plan).
    pub segment: Option<Segment>,
    /// When to start, ms since the Unix epoch.
    pub start_at_unix_ms: Option<u64>,
}

/// Parses and checks the flags.
pub fn parse(a: &SegmentArgs) -> Result<Segmenting, UsageError> {
    let segment = a
        .segment
        .as_deref()
        .map(|s| Segment::parse(s, a.sequence.as_deref()))
        .transpose()
        .map_err(|e| UsageError(e.to_string()))?
        .filter(|s| !s.is_whole());
    let start_at_unix_ms = a
        .start_at
        .as_deref()
        .map(|t| {
            let ms = throng_plan::parse_start_at(t).map_err(|e| UsageError(e.to_string()))?;
            check_start(t, ms, now_ms())?;
            Ok::<u64, UsageError>(ms)
        })
        .transpose()?;
    Ok(Segmenting {
        segment,
        start_at_unix_ms,
    })
}

/// `--start-at` names one instant; repeated runs cannot all start then.
pub fn refuse_start_at_with_repeat(s: &Segmenting, repeat: u32) -> Result<(), UsageError> {
    if s.start_at_unix_ms.is_some() && repeat > 1 {
        return Err(UsageError(
            "--start-at with --repeat: only one run can start at that time; drop one of them".to_string(),
        ));
    }
    Ok(())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn check_start(text: &str, ms: u64, now: u64) -> Result<(), UsageError> {
    if ms > now + MAX_AHEAD.as_millis() as u64 {
        return Err(UsageError(format!(
            "--start-at: {text} is {:.1} h ahead; give a time at most 24 h from now",
            (ms - now) as f64 / 3_600_000.0
        )));
    }
    if ms + (MAX_BEHIND.as_millis() as u64) < now {
        return Err(UsageError(format!(
            "--start-at: {text} was {:.1} s ago (more than 10 s); give a time in the future, and check the \
             clocks of the agents agree (NTP)",
            (now - ms) as f64 / 1000.0
        )));
    }
    Ok(())
}

/// Waits until just before `start_at` (ms since the Unix epoch), in short
/// sleeps so that a signal on `control` ends the wait (an error then).
pub fn wait_for_start(start_at: Option<u64>, control: &Control, quiet: bool) -> Result<(), Interrupted> {
    let Some(at) = start_at else { return Ok(()) };
    let target = UNIX_EPOCH + Duration::from_millis(at);
    if !quiet
        && let Ok(ahead) = target.duration_since(SystemTime::now())
        && ahead > Duration::from_secs(1)
    {
        say!(
            "throng: waiting {:.1} s for --start-at {} (Ctrl-C to give up)",
            ahead.as_secs_f64(),
            throng_result::rfc3339(at)
        );
    }
    loop {
        if control.was_interrupted() {
            return Err(Interrupted("while waiting for --start-at"));
        }
        let Ok(left) = target.duration_since(SystemTime::now()) else {
            return Ok(());
        };
        if left <= ENGINE_MARGIN {
            return Ok(());
        }
        std::thread::sleep((left - ENGINE_MARGIN).min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_bounds() {
        let now = 1_000_000_000_000;
        assert!(check_start("t", now + 3_600_000, now).is_ok());
        assert!(check_start("t", now - 5_000, now).is_ok());
        assert!(check_start("t", now + 25 * 3_600_000, now).is_err());
        assert!(check_start("t", now - 11_000, now).is_err());
    }
}
