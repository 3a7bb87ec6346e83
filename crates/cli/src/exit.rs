//! How a command ended, and the one table from that to the exit code.
//!
//! Every command says how it ended as an [`Outcome`]; every error is
//! classified by [`Outcome::of_error`]. Nothing else picks an exit code.

use std::process::ExitCode;

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It did what was asked.
    Ok,
    /// The run happened but failed: the target was unreachable, or every
    /// request (every connection, for a storm) failed; a sweep cell or a
    /// merge that did not add up.
    Failed,
    /// What the user asked for cannot be done: a bad flag, file or
    /// configuration, including what the engine finds at start (TLS server
    /// name, descriptor limit, VU limit, a regular expression).
    Usage,
    /// The run finished but a threshold failed (as k6).
    Thresholds,
    /// Stopped by SIGINT or SIGTERM.
    Interrupted,
}

impl Outcome {
    /// The table (README, "Exit codes").
    pub const fn code(self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Failed => 1,
            Outcome::Usage => 2,
            Outcome::Thresholds => 99,
            Outcome::Interrupted => 130,
        }
    }

    /// The outcome an error stands for: usage when any error in its chain
    /// is the user's to fix, interrupted when a signal ended it, otherwise
    /// a failed run.
    pub fn of_error(e: &anyhow::Error) -> Outcome {
        if e.chain().any(|c| {
            c.is::<Interrupted>()
                || matches!(
                    c.downcast_ref::<throng_engine::EngineError>(),
                    Some(throng_engine::EngineError::Interrupted(_))
                )
        }) {
            return Outcome::Interrupted;
        }
        let usage = e.chain().any(|c| {
            c.is::<UsageError>()
                || c.is::<throng_plan::PlanError>()
                || c.downcast_ref::<throng_engine::EngineError>()
                    .is_some_and(throng_engine::EngineError::is_usage)
        });
        if usage { Outcome::Usage } else { Outcome::Failed }
    }
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> ExitCode {
        ExitCode::from(o.code())
    }
}

/// A mistake in what the user asked for ([`Outcome::Usage`]).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A signal ended the command before it had anything to report
/// ([`Outcome::Interrupted`]).
#[derive(Debug)]
pub struct Interrupted(pub &'static str);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_their_codes() {
        let usage = anyhow::Error::new(UsageError("--rate: no".into())).context("outer");
        assert_eq!(Outcome::of_error(&usage).code(), 2);
        let engine = anyhow::Error::new(throng_engine::EngineError::Plan("vus".into()));
        assert_eq!(Outcome::of_error(&engine).code(), 2);
        let unbuilt = anyhow::Error::new(throng_engine::EngineError::Unbuildable {
            what: "HTTP/3".into(),
            reason: "the TLS settings cannot carry QUIC".into(),
        })
        .context("outer");
        assert_eq!(Outcome::of_error(&unbuilt).code(), 2);
        let resolve = anyhow::Error::new(throng_engine::EngineError::Resolve {
            host: "h".into(),
            reason: "r".into(),
        });
        assert_eq!(Outcome::of_error(&resolve).code(), 1);
        let signal = anyhow::Error::new(Interrupted("while waiting for --start-at"));
        assert_eq!(Outcome::of_error(&signal).code(), 130);
        let check = anyhow::Error::new(throng_engine::EngineError::Interrupted("during the HTTP/2 check"));
        assert_eq!(Outcome::of_error(&check).code(), 130);
        let late = anyhow::Error::new(throng_engine::EngineError::from(
            throng_engine::Unanswered::Http2Check {
                addr: std::net::SocketAddr::from(([127, 0, 0, 1], 9)),
                what: "the server's first HTTP/2 frame",
                bound: std::time::Duration::from_secs(1),
                limit_s: 10,
            },
        ));
        assert_eq!(Outcome::of_error(&late).code(), 1);
        assert_eq!(Outcome::of_error(&anyhow::anyhow!("disk full")).code(), 1);
    }
}
