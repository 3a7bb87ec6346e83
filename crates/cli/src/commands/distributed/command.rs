//! The command a coordinator ships: parsed as `throng` would, and checked
//! for what the coordinator owns or cannot ship.

use crate::args::{Command, HttpCmd, LiveArgs, OutputArgs, RepeatArgs, RunCmd, SegmentArgs, StormCmd};
use crate::exit::UsageError;

/// A command a coordinator can split over agents.
pub enum Coordinated {
    Http(Box<HttpCmd>),
    Storm(Box<StormCmd>),
    Run(Box<RunCmd>),
}

/// Parses a shipped command as `throng` would and refuses what the
/// coordinator owns (segments, start, outputs) or cannot ship yet (files on
/// the coordinator's disk, a --trigger).
pub fn check_command(command: &[String]) -> Result<Coordinated, UsageError> {
    let cli = crate::args::parse_shipped(command).map_err(|e| UsageError(format!("the command after --: {e}")))?;
    let (c, unshipped) = match cli.command {
        Command::Http(c) => {
            owned(&c.segments, &c.output, &c.repeat, &c.live)?;
            let unshipped = [
                ("--targets", c.targets.is_some()),
                ("--data @-", c.data.as_deref() == Some("@-")),
            ];
            (Coordinated::Http(c), unshipped)
        }
        Command::Storm(c) => {
            owned(&c.segments, &c.output, &c.repeat, &c.live)?;
            if c.trigger.is_some() {
                return Err(UsageError(
                    "the command after --: --trigger would run its command on every agent; run it yourself \
                     while the coordinated storm holds its connections, or run the storm alone"
                        .into(),
                ));
            }
            let unshipped = [
                ("--send-binary @-", c.send_binary.iter().any(|b| b == "@-")),
                ("--targets", false),
            ];
            (Coordinated::Storm(c), unshipped)
        }
        Command::Run(c) => {
            owned(&c.segments, &c.output, &c.repeat, &c.live)?;
            if c.setup_captures.is_some() {
                return Err(UsageError(
                    "the command after --: --setup-captures is the coordinator's to give; drop it".into(),
                ));
            }
            if c.junit.is_some() {
                return Err(UsageError(
                    "the command after --: --junit is not written for a coordinated run (each agent has a \
                     segment); drop it, the merged --json holds every threshold's verdict"
                        .into(),
                ));
            }
            (Coordinated::Run(c), [("--targets", false), ("--data @-", false)])
        }
        _ => {
            return Err(UsageError(format!(
                "the command after --: '{}' cannot be coordinated yet; give an http, storm or run command (-- \
                 http URL ..., -- storm TARGET ..., -- run FILE ...)",
                command.first().map_or("", String::as_str)
            )));
        }
    };
    if let Some((flag, _)) = unshipped.iter().find(|(_, given)| *given) {
        return Err(UsageError(format!(
            "the command after --: {flag} cannot be shipped to the agents yet; give the requests another way \
             (--body FILE, --data), or run the segments by hand (--segment, see 'Distributed runs')"
        )));
    }
    Ok(c)
}

/// Refuses a flag the coordinator sets itself.
fn owned<F: clap::ValueEnum + Clone + Send + Sync + 'static>(
    segments: &SegmentArgs,
    output: &OutputArgs<F>,
    repeat: &RepeatArgs,
    live: &LiveArgs,
) -> Result<(), UsageError> {
    let owned = [
        ("--segment", segments.segment.is_some()),
        ("--start-at", segments.start_at.is_some()),
        ("--json", output.json.is_some()),
        ("--html", output.html.is_some()),
        ("--repeat", repeat.count > 1),
        ("--prometheus", live.prometheus.is_some()),
        ("--csv", output.export.csv.is_some()),
        ("--csv-requests", output.export.csv_requests.is_some()),
    ];
    if let Some((flag, _)) = owned.iter().find(|(_, given)| *given) {
        return Err(UsageError(format!(
            "the command after --: {flag} is the coordinator's to set (each agent's segment, one start, one \
             merged result); drop it from the command, and give --json/--html to `throng coordinate` itself"
        )));
    }
    Ok(())
}
