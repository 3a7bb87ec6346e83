//! `throng coordinate --resume JOURNAL`: a new coordinator process picks
//! up the run of a dead one. It reconnects to the journal's agents under
//! the journal's run id (each still running its part, or keeping its
//! result), follows them as the first one did, and merges their own
//! results, as `throng merge` does: nothing the dead coordinator saw is
//! counted again, since only the agents' final results are added up.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::coordinate::{
    Access, Agent, Given, Part, Parts, client_tls, collected, finish, follow, greet, points, prepared,
};
use super::journal::Journal;
use super::{RECONNECT, now_ms, read_token};
use crate::args::CoordinateCmd;
use crate::exit::UsageError;

/// Resumes the run of the journal of `--resume`: `c` gives the token,
/// the TLS and, if it names them, the outputs (else the journal's).
pub fn run(mut c: CoordinateCmd) -> anyhow::Result<ExitCode> {
    let given = Given::default();
    let Some(path) = c.resume.take() else {
        return Err(UsageError("--resume: give the journal of the run to finish".into()).into());
    };
    let path = path.as_path();
    let journal = Journal::read(path)?;
    let resumed_ms = now_ms();
    c.agents.clone_from(&journal.agents);
    c.command.clone_from(&journal.command);
    if c.json.is_none() {
        c.json.clone_from(&journal.json);
    }
    if c.html.is_none() {
        c.html.clone_from(&journal.html);
    }
    // As the first coordinator was started (a journal of an older throng
    // may still hold --abort-on-fail in its command), or as given now.
    let before = c.command.len();
    c.command.retain(|a| a != "--abort-on-fail");
    let abort = c.abort_on_fail || journal.started_with.abort_on_fail || c.command.len() != before;
    c.allow_missing |= journal.started_with.allow_missing;
    // The command as the first coordinator checked it: its thresholds
    // judge the live figures again.
    let (thresholds, _, scenario) =
        prepared(&c.command).map_err(|e| e.context(format!("--resume {}", path.display())))?;
    crate::commands::export::check_outputs(&[("--json", c.json.as_deref()), ("--html", c.html.as_deref())])?;
    let access = Access {
        token: match given.token {
            Some(t) => t,
            None => read_token(c.token_file.as_deref())?,
        },
        tls: client_tls(&c)?,
        sni: c.sni.clone(),
    };
    let n = journal.agents.len();
    let mut view = super::live::LiveView::new(&c, thresholds, abort)?;
    for (i, &seq) in journal.seqs.iter().enumerate() {
        view.seen_before(i, seq);
    }
    let since_start = Duration::from_millis(resumed_ms.saturating_sub(journal.start_at_unix_ms));
    view.starts_at(
        Instant::now().checked_sub(since_start).unwrap_or_else(Instant::now),
        journal.start_at_unix_ms,
    );
    let control = given.control.unwrap_or_else(|| {
        let control = throng_engine::Control::new();
        crate::signals::forward_to(&control);
        control
    });
    let away_s = resumed_ms.saturating_sub(journal.written_unix_ms) as f64 / 1000.0;
    let flags: Vec<&str> = [(abort, "--abort-on-fail"), (c.allow_missing, "--allow-missing")]
        .into_iter()
        .filter_map(|(on, flag)| on.then_some(flag))
        .collect();
    say!(
        "throng: coordinate: resuming the run of '{}' (its coordinator was last heard of {away_s:.1} s ago; its \
         command{}{}): reconnecting to {}",
        path.display(),
        if flags.is_empty() { "" } else { ", " },
        flags.join(", "),
        journal.agents.join(", ")
    );
    let (run_id, written_ms) = (journal.run_id.clone(), journal.written_unix_ms);
    let (mut agents, lost) = rejoin_all(&journal, &access)?;
    say!(
        "throng: coordinate: {} of {n} agents reconnected; following the run to its end",
        agents.len()
    );
    let mut journaled = (path.to_path_buf(), journal);
    let (mut parts, aborted) = follow(
        &mut agents,
        &mut view,
        &control,
        (&access, &run_id),
        Some(&mut journaled),
    )?;
    let mut notes = vec![format!(
        "the coordinator was restarted: its journal was last written at {}, the run resumed at {} ({away_s:.1} s \
         away); the merged result is the agents' own results, each counted once",
        throng_result::rfc3339(written_ms),
        throng_result::rfc3339(resumed_ms)
    )];
    if scenario.is_some() {
        notes.push(
            "the scenario's teardown (if it has one) was not run: the coordinator that ran its setup is gone".into(),
        );
    }
    // A segment whose agent was not reached is missing, as one lost
    // during a run is.
    parts.extend(lost);
    parts.sort_by_key(|(seat, _)| *seat);
    let signalled = control.was_interrupted();
    let code = finish(&c, &agents, &points(n), parts, aborted, (Vec::new(), notes), &view)?;
    collected(&mut agents, Some(&mut journaled));
    view.linger(c.prometheus_linger, || !signalled && control.was_interrupted());
    Ok(code)
}

/// The journal's agents, each reconnected to and its run resumed there
/// (Alive every second until it is followed), and the segments of those not
/// reached: missing, saying why and what the journal knows of them. None
/// reached, or one that refuses for another reason than not knowing the
/// run (a wrong token, another version): the error.
fn rejoin_all(journal: &Journal, access: &Access) -> anyhow::Result<(Vec<Agent>, Parts)> {
    let n = journal.agents.len();
    let mut beat = super::heartbeat::Heartbeat::start(n);
    let (mut agents, mut lost, mut first) = (Vec::new(), Vec::new(), None);
    for (i, addr) in journal.agents.iter().enumerate() {
        match rejoin(addr, access, n, &journal.run_id) {
            Ok(mut a) => {
                a.seat = i;
                beat.add(i, &a.stream);
                agents.push(a);
            }
            Err(Rejoin::Refused(e)) => return Err(e),
            Err(Rejoin::Lost(why, e)) => {
                let why = format!(
                    "the resumed coordinator could not rejoin it: {}; {}",
                    super::shown(&why),
                    journal.known_of(i)
                );
                say!("throng: coordinate: agent {addr}: {why}");
                lost.push((i, Part::Missing(why)));
                first.get_or_insert(e);
            }
        }
    }
    beat.stop();
    match first {
        Some(e) if agents.is_empty() => Err(e),
        _ => Ok((agents, lost)),
    }
}

/// Why an agent was not rejoined.
enum Rejoin {
    /// It refused the coordinator itself (token, version): the resume's
    /// error.
    Refused(anyhow::Error),
    /// Not reached, or it does not know the run (it restarted, or dropped
    /// the part's result): its segment is missing, for this reason; the
    /// error when no agent was reached.
    Lost(String, anyhow::Error),
}

/// Connects to the agent at `addr` again and resumes `run_id` there,
/// trying for [`RECONNECT`] while it does not answer; its refusal (another
/// run, no result kept) is the error, saying what to do.
fn rejoin(addr: &str, access: &Access, n: usize, run_id: &str) -> Result<Agent, Rejoin> {
    let deadline = Instant::now() + RECONNECT;
    loop {
        match greet(addr, access, None, n, Some(run_id)) {
            Ok(a) => return Ok(a),
            Err(e) if e.downcast_ref::<UsageError>().is_some() => {
                let why = format!("{e:#}");
                let e = UsageError(format!(
                    "--resume: {e:#}; this journal's run cannot be finished there (the other agents keep their \
                     parts' results for {} s after their end: resume again once this agent is back, or start a new \
                     run)",
                    super::KEEP_RESULT.as_secs()
                ));
                return Err(if why.contains(super::NO_SUCH_RUN) {
                    Rejoin::Lost(why, e.into())
                } else {
                    Rejoin::Refused(e.into())
                });
            }
            Err(e) if Instant::now() >= deadline => {
                let why = format!("{e:#} (tried for {} s)", RECONNECT.as_secs());
                return Err(Rejoin::Lost(
                    why,
                    anyhow::anyhow!(
                        "--resume: {e:#} (tried for {} s); the other agents keep their parts' results for {} s after \
                     their end: resume again once this agent answers",
                        RECONNECT.as_secs(),
                        super::KEEP_RESULT.as_secs()
                    ),
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}
