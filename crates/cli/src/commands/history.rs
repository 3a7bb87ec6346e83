//! `throng history add | report | list`, and the baseline side of
//! `throng compare --baseline DIR --last N`.
//!
//! A history directory holds one file per run, `NNNNNN-FINGERPRINT.json`
//! (the number counts up as runs are added; the fingerprint is the plan's,
//! [`throng_result::history::fingerprint`]). The file names are the index:
//! runs of other plans are skipped without being opened, and only the
//! entries asked for are read, one at a time, each within
//! [`MAX_ENTRY_BYTES`] and checked as every result is. A directory past
//! [`MAX_ENTRIES`] names is refused rather than listed without end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use throng_report::trend::{Point, Trend};
use throng_result::RunResult;
use throng_result::history::{self, Head};

use super::shared::read_document;
use crate::args::{HistoryAddCmd, HistoryCmd, HistoryCommand, HistoryListCmd, HistoryReportCmd};
use crate::exit::UsageError;

/// The most names a history directory may hold.
const MAX_ENTRIES: usize = 100_000;

/// The largest entry read (a result with its per-second histograms).
const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// The most runs a trend page draws (the newest).
const MAX_TREND_RUNS: usize = 1000;

/// The most runs a baseline adds up.
const MAX_BASELINE_RUNS: usize = 1000;

pub fn run(c: HistoryCmd) -> anyhow::Result<ExitCode> {
    match c.command {
        HistoryCommand::Add(c) => add(c),
        HistoryCommand::Report(c) => report(c),
        HistoryCommand::List(c) => list(c),
    }
}

/// An entry's place in the directory, from its file name.
#[derive(Clone, Debug)]
struct Name {
    number: u64,
    fingerprint: String,
    path: PathBuf,
}

/// `NNNNNN-FINGERPRINT.json` → (number, fingerprint).
fn parse_name(name: &str) -> Option<(u64, String)> {
    let stem = name.strip_suffix(".json")?;
    let (number, fp) = stem.split_once('-')?;
    let ok = !number.is_empty()
        && number.len() <= 19
        && number.bytes().all(|b| b.is_ascii_digit())
        && fp.len() == 16
        && fp.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    ok.then(|| number.parse().ok().map(|n| (n, fp.to_string())))?
}

/// The entries of `dir`, oldest first. `flag` names the directory in errors.
fn entries(dir: &Path, flag: &str) -> Result<Vec<Name>, UsageError> {
    let cannot = |e: std::io::Error| {
        UsageError(format!(
            "{flag} {}: cannot read the history directory: {e}; add runs to it with `throng history add RESULT --dir {}`",
            dir.display(),
            dir.display()
        ))
    };
    let mut out = Vec::new();
    for (seen, item) in std::fs::read_dir(dir).map_err(cannot)?.enumerate() {
        if seen >= MAX_ENTRIES {
            return Err(UsageError(format!(
                "{flag} {}: the directory holds more than {MAX_ENTRIES} names; a history directory holds one file \
                 per run: start a new one, or remove old entries",
                dir.display()
            )));
        }
        let item = item.map_err(cannot)?;
        // Regular files only: a FIFO or a device under an entry's name
        // would block or never end.
        if !item.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let Some((number, fingerprint)) = item.file_name().to_str().and_then(parse_name) else {
            continue;
        };
        out.push(Name {
            number,
            fingerprint,
            path: item.path(),
        });
    }
    out.sort_by_key(|n| n.number);
    Ok(out)
}

/// Opens an entry and reads its head; the rest of the reader is the result.
fn open(name: &Name) -> Result<(Head, BufReader<std::io::Take<File>>), Unreadable> {
    let file = File::open(&name.path).map_err(Unreadable::Io)?;
    let len = file.metadata().map_err(Unreadable::Io)?.len();
    if len > MAX_ENTRY_BYTES {
        return Err(Unreadable::TooLarge { len });
    }
    let mut r = BufReader::new(file.take(MAX_ENTRY_BYTES));
    let head = history::read_head(&mut r).map_err(Unreadable::Entry)?;
    if head.fingerprint != name.fingerprint {
        return Err(Unreadable::Renamed {
            named: name.fingerprint.clone(),
            head: head.fingerprint,
        });
    }
    Ok((head, r))
}

/// Reads a whole entry.
fn read(name: &Name) -> Result<(Head, RunResult), Unreadable> {
    let (head, r) = open(name)?;
    let run = history::read_run(&head, r).map_err(Unreadable::Entry)?;
    Ok((head, run))
}

/// Why a history entry cannot be read (the caller says which).
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    /// The OS's error opening it.
    #[error("{0}")]
    Io(std::io::Error),
    /// Larger than an entry may be.
    #[error("{len} bytes, over the limit of {} MiB", MAX_ENTRY_BYTES >> 20)]
    TooLarge { len: u64 },
    /// Its head or its result does not read.
    #[error("{0}")]
    Entry(throng_result::ResultError),
    /// Its file name and its head name different plans.
    #[error("its name says plan {named} but its head says {head}")]
    Renamed { named: String, head: String },
}

/// `1 entry`, `3 entries`.
fn entries_text(n: u64) -> String {
    if n == 1 {
        "1 entry".to_string()
    } else {
        format!("{n} entries")
    }
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn add(c: HistoryAddCmd) -> anyhow::Result<ExitCode> {
    let runs = read_document(&c.result)?.into_runs();
    if let Some(i) = runs.iter().position(|r| r.interrupted) {
        return Err(UsageError(format!(
            "{}: run {} of {} was interrupted; a history holds complete runs (a baseline of a cut-short run \
             would be wrong): run it again to its end",
            c.result.display(),
            i + 1,
            runs.len()
        ))
        .into());
    }
    std::fs::create_dir_all(&c.dir).map_err(|e| {
        UsageError(format!(
            "--dir {}: cannot create the history directory: {e}",
            c.dir.display()
        ))
    })?;
    for run in &runs {
        let head = Head::new(run, c.label.as_deref(), now_unix_ms());
        let name = put(&c.dir, &head, run)?;
        let same = entries(&c.dir, "--dir")?
            .iter()
            .filter(|n| n.fingerprint == head.fingerprint)
            .count();
        say!(
            "throng: added {} as '{}' (plan {}: {}); the history holds {} of this plan",
            name.display(),
            head.label,
            head.fingerprint,
            head.plan,
            throng_plan::count(same as u64, "run")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes an entry under the next free number: written whole to a
/// temporary file first, then linked under its name (which fails, rather
/// than replaces, when another `history add` took the number meanwhile).
fn put(dir: &Path, head: &Head, run: &RunResult) -> anyhow::Result<PathBuf> {
    let tmp = dir.join(format!(".adding-{}-{}", std::process::id(), now_unix_ms()));
    let written = File::create(&tmp)
        .map_err(anyhow::Error::from)
        .and_then(|f| {
            let mut w = std::io::BufWriter::new(f);
            history::write_entry(head, run, &mut w)?;
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            Ok(())
        })
        .with_context(|| format!("cannot write into the history directory '{}'", dir.display()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let mut number = entries(dir, "--dir")?.last().map_or(1, |n| n.number.saturating_add(1));
    let mut result = Err(anyhow::anyhow!("no free entry number"));
    for _ in 0..100 {
        let path = dir.join(format!("{number:06}-{}.json", head.fingerprint));
        match std::fs::hard_link(&tmp, &path) {
            Ok(()) => {
                result = Ok(path);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => number = number.saturating_add(1),
            // A file system without hard links (some mounted caches): a
            // rename, which replaces, after looking that the name is free.
            Err(_) if !path.exists() && std::fs::rename(&tmp, &path).is_ok() => {
                result = Ok(path);
                break;
            }
            Err(e) => {
                result = Err(anyhow::Error::from(e).context(format!(
                    "cannot add the entry to the history directory '{}'",
                    dir.display()
                )));
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&tmp);
    result
}

/// What the directory holds, for an error that found nothing to use: each
/// plan's fingerprint, its number of runs and its name (from its newest
/// entry's head; at most 10 plans).
fn holdings(names: &[Name]) -> String {
    if names.is_empty() {
        return "it holds no runs".to_string();
    }
    let mut by_plan: BTreeMap<&str, (usize, &Name)> = BTreeMap::new();
    for n in names {
        let e = by_plan.entry(&n.fingerprint).or_insert((0, n));
        e.0 += 1;
        e.1 = n;
    }
    let mut plans: Vec<(&str, (usize, &Name))> = by_plan.into_iter().collect();
    plans.sort_by_key(|p| std::cmp::Reverse(p.1.1.number));
    let shown: Vec<String> = plans
        .iter()
        .take(10)
        .map(|(fp, (count, newest))| {
            let what = open(newest).map_or_else(|e| format!("unreadable: {e}"), |(h, _)| h.plan);
            format!("{fp} ({}: {what})", throng_plan::count(*count as u64, "run"))
        })
        .collect();
    let more = if plans.len() > 10 {
        format!(" and {} more plans", plans.len() - 10)
    } else {
        String::new()
    };
    format!("it holds {}{more}", shown.join(", "))
}

/// Entries of other plans, as a note: "3 entries of 2 other plans skipped".
fn others(names: &[Name], fingerprint: &str) -> Option<String> {
    let other: Vec<&Name> = names.iter().filter(|n| n.fingerprint != fingerprint).collect();
    if other.is_empty() {
        return None;
    }
    let mut plans: Vec<&str> = other.iter().map(|n| n.fingerprint.as_str()).collect();
    plans.sort_unstable();
    plans.dedup();
    Some(format!(
        "{} of {} skipped (a baseline and a trend take runs of one plan only)",
        entries_text(other.len() as u64),
        if plans.len() == 1 {
            "another plan".to_string()
        } else {
            format!("{} other plans", plans.len())
        }
    ))
}

/// The baseline side of `compare --baseline DIR --last N NEW`: the last
/// `last` runs of `new`'s plan (oldest first), not counting `new` itself
/// when it was added already; their entry files; and what was skipped.
pub fn baseline(dir: &Path, last: usize, new: &[RunResult]) -> anyhow::Result<(Vec<RunResult>, Vec<String>)> {
    if last == 0 || last > MAX_BASELINE_RUNS {
        return Err(UsageError(format!(
            "--last {last}: give how many runs make the baseline, 1 to {MAX_BASELINE_RUNS}"
        ))
        .into());
    }
    let Some(first) = new.first() else {
        return Err(UsageError("the new result holds no runs".to_string()).into());
    };
    let fp = history::fingerprint(&first.plan);
    if new.iter().any(|r| history::fingerprint(&r.plan) != fp) {
        return Err(UsageError(
            "the new result's runs are of different plans; compare one plan's runs with its baseline".to_string(),
        )
        .into());
    }
    let names = entries(dir, "--baseline")?;
    let mut notes: Vec<String> = others(&names, &fp).into_iter().collect();
    let mut runs = Vec::new();
    let mut sources = Vec::new();
    let mut labels = Vec::new();
    let (mut itself, mut damaged) = (0u64, 0u64);
    for name in names.iter().rev().filter(|n| n.fingerprint == fp) {
        if runs.len() == last {
            break;
        }
        match read(name) {
            Ok((head, run)) => {
                // The new run, added before the comparison, is not its own baseline.
                let same = new.iter().any(|n| {
                    n.started_at_unix_ms == run.started_at_unix_ms
                        && n.environment.hostname == run.environment.hostname
                        && n.measurements.requests == run.measurements.requests
                        && n.measurements.connections == run.measurements.connections
                });
                if same {
                    itself += 1;
                    continue;
                }
                labels.push(head.label);
                sources.push(name.path.display().to_string());
                runs.push(run);
            }
            Err(e) => {
                damaged += 1;
                say!("throng: --baseline: skipping {}: {e}", name.path.display());
            }
        }
    }
    if runs.is_empty() {
        return Err(UsageError(format!(
            "--baseline {}: no run of the new result's plan ({fp}: {}){}; {}. Add runs of this plan with \
             `throng history add RESULT --dir {}`",
            dir.display(),
            history::plan_name(&first.plan),
            match (itself, damaged) {
                (0, 0) => String::new(),
                (i, 0) => format!(" other than the new run itself ({})", entries_text(i)),
                (0, d) => format!(" that is undamaged ({} damaged)", entries_text(d)),
                (i, d) => format!(
                    " other than the new run itself ({}) and damaged ones ({})",
                    entries_text(i),
                    entries_text(d)
                ),
            },
            holdings(&names),
            dir.display()
        ))
        .into());
    }
    if itself > 0 {
        notes.push("the new run itself, already in the history, left out".to_string());
    }
    if damaged > 0 {
        notes.push(format!("{} damaged skipped", entries_text(damaged)));
    }
    runs.reverse();
    labels.reverse();
    sources.reverse();
    say!(
        "throng: baseline: the last {} of plan {fp} in {} ({}){}",
        throng_plan::count(runs.len() as u64, "run"),
        dir.display(),
        labels.join(", "),
        if notes.is_empty() {
            String::new()
        } else {
            format!("; {}", notes.join("; "))
        }
    );
    if runs.len() < last {
        say!(
            "throng: baseline: --last {last} asked for more runs than the history holds of this plan ({})",
            runs.len()
        );
    }
    Ok((runs, sources))
}

fn report(c: HistoryReportCmd) -> anyhow::Result<ExitCode> {
    super::export::check_outputs(&[("--html", Some(&c.html))])?;
    let names = entries(&c.dir, "--dir")?;
    let fp = match &c.plan {
        Some(fp) => fp.to_ascii_lowercase(),
        None => match names.last() {
            Some(n) => n.fingerprint.clone(),
            None => {
                return Err(UsageError(format!(
                    "--dir {}: the history holds no runs; add some with `throng history add RESULT --dir {}`",
                    c.dir.display(),
                    c.dir.display()
                ))
                .into());
            }
        },
    };
    let limit = c.last.unwrap_or(MAX_TREND_RUNS);
    if limit == 0 || limit > MAX_TREND_RUNS {
        return Err(UsageError(format!("--last {limit}: give 1 to {MAX_TREND_RUNS} runs")).into());
    }
    let mine: Vec<&Name> = names.iter().filter(|n| n.fingerprint == fp).collect();
    if mine.is_empty() {
        return Err(UsageError(format!(
            "--plan {fp}: the history in {} has no run of this plan; {}",
            c.dir.display(),
            holdings(&names)
        ))
        .into());
    }
    let mut notes: Vec<String> = others(&names, &fp).into_iter().collect();
    if mine.len() > limit {
        notes.push(format!("the last {limit} of the plan's {} runs drawn", mine.len()));
    }
    let mut points = Vec::new();
    let mut plan = String::new();
    let mut unit = String::new();
    let mut damaged = 0u64;
    for name in &mine[mine.len().saturating_sub(limit)..] {
        // One result at a time: only its figures stay.
        match read(name) {
            Ok((head, run)) => {
                plan = head.plan.clone();
                unit = run.unit().plural().to_string();
                points.push(Point::of(&head.label, &run));
            }
            Err(e) => {
                damaged += 1;
                say!("throng: skipping {}: {e}", name.path.display());
            }
        }
    }
    if damaged > 0 {
        notes.push(format!("{} damaged skipped", entries_text(damaged)));
    }
    if points.is_empty() {
        return Err(UsageError(format!(
            "--dir {}: every entry of plan {fp} is damaged (see above); add runs again",
            c.dir.display()
        ))
        .into());
    }
    for n in &notes {
        say!("throng: {n}");
    }
    let page = throng_report::html::render_trend(&Trend {
        plan,
        fingerprint: fp,
        unit,
        notes,
        points,
    });
    std::fs::write(&c.html, page).with_context(|| {
        format!(
            "cannot write the trend page to '{}' (check the directory exists and is writable)",
            c.html.display()
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

fn list(c: HistoryListCmd) -> anyhow::Result<ExitCode> {
    let names = entries(&c.dir, "--dir")?;
    let mut out = Vec::new();
    use std::io::Write as _;
    writeln!(
        out,
        "{:>6}  {:<16}  {:<24}  {:<24}  plan",
        "#", "fingerprint", "label", "started"
    )?;
    for n in &names {
        match open(n) {
            Ok((h, _)) => writeln!(
                out,
                "{:>6}  {:<16}  {:<24}  {:<24}  {}",
                n.number,
                n.fingerprint,
                throng_report::format::clip(&h.label, 24),
                h.started_at.chars().take(24).collect::<String>(),
                h.plan
            )?,
            Err(e) => writeln!(out, "{:>6}  {:<16}  (damaged: {e})", n.number, n.fingerprint)?,
        }
    }
    super::shared::print_bytes(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_a_number_and_a_fingerprint() {
        assert_eq!(
            parse_name("000012-0123456789abcdef.json"),
            Some((12, "0123456789abcdef".to_string()))
        );
        for bad in [
            "000012-0123456789ABCDEF.json",
            "000012-0123456789abcde.json",
            "-0123456789abcdef.json",
            "x-0123456789abcdef.json",
            "000012-0123456789abcdef.json.tmp",
            ".adding-1-2",
            "99999999999999999999-0123456789abcdef.json",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
