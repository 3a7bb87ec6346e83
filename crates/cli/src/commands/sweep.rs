//! `throng sweep`: runs every cell of a parameter matrix (setup, the throng
//! run, teardown), tabulates the figures, and writes the chart and the full
//! results. A failing cell is reported and the sweep goes on.

use std::io::Read;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use throng_result::RunResult;
use throng_sweep::{CellOutcome, Format, Sweep};

use super::shared::print_bytes;
use crate::args::{SweepCmd, SweepFormat};
use crate::exit::Outcome;
use crate::exit::UsageError;

/// Longest a setup or teardown command may run.
const HOOK_LIMIT: Duration = Duration::from_secs(120);

pub fn run(c: SweepCmd) -> anyhow::Result<ExitCode> {
    let file = c.file.display().to_string();
    let text = super::shared::read_plan_file(&c.file, "sweep file")?;
    let sweep = Sweep::parse(&text, &file).map_err(|e| UsageError(e.to_string()))?;
    let sweep_dir = std::fs::canonicalize(&c.file)
        .ok()
        .and_then(|p| p.parent().map(|d| d.display().to_string()))
        .unwrap_or_else(|| ".".to_string());
    let render =
        |t: &str, cell: &throng_sweep::Cell, r: u32| Sweep::render(t, cell, r).replace("{{sweep_dir}}", &sweep_dir);
    if c.chart.is_some() && sweep.chart.is_none() {
        return Err(UsageError(format!("--chart: '{file}' has no chart: section (figure, x, lines)")).into());
    }
    super::export::check_outputs(&[("--json", c.json.as_deref()), ("--chart", c.chart.as_deref())])?;
    let exe = std::env::current_exe().context("cannot find this program to run the cells")?;
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(Arc::clone(&stop));
    let dir = tempfile_dir()?;

    let cells = sweep.cells();
    let total = cells.len() as u32 * sweep.repeat;
    let mut outcomes: Vec<CellOutcome> = Vec::new();
    let mut n = 0;
    'cells: for cell in cells {
        let mut outcome = CellOutcome {
            cell: cell.clone(),
            runs: Vec::new(),
            problem: None,
        };
        for r in 1..=sweep.repeat {
            if stop.load(Ordering::SeqCst) {
                outcomes.push(outcome);
                break 'cells;
            }
            n += 1;
            let started = Instant::now();
            let mut problem = None;
            if let Some(setup) = &sweep.setup
                && let Err(e) = shell(&render(setup, &cell, r), HOOK_LIMIT)
            {
                problem = Some(format!("setup failed: {e}"));
            }
            if problem.is_none() {
                let json = dir.join(format!("cell-{n}.json"));
                let cmd = format!(
                    "{} {} --json {} --quiet",
                    shell_quote(&exe.display().to_string()),
                    render(&sweep.run, &cell, r),
                    shell_quote(&json.display().to_string())
                );
                let ran = shell(&cmd, sweep.cell_timeout);
                match std::fs::File::open(&json).ok().map(RunResult::from_reader) {
                    Some(Ok(result)) => {
                        // Exit 1: the run happened but every unit failed.
                        if let Err(e) = ran {
                            problem = Some(format!("run: {e}"));
                        }
                        outcome.runs.push(result);
                    }
                    _ => {
                        problem = Some(format!(
                            "run failed: {}",
                            ran.err().map_or_else(|| "no result".into(), |e| e.to_string())
                        ))
                    }
                }
                let _ = std::fs::remove_file(&json);
            }
            if let Some(teardown) = &sweep.teardown
                && let Err(e) = shell(&render(teardown, &cell, r), HOOK_LIMIT)
            {
                problem.get_or_insert(format!("teardown failed: {e}"));
            }
            say!(
                "throng sweep: {n}/{total} {}{}: {} ({:.1}s)",
                cell.label(),
                if sweep.repeat > 1 {
                    format!(" run {r}")
                } else {
                    String::new()
                },
                problem.as_deref().unwrap_or("ok"),
                started.elapsed().as_secs_f64()
            );
            if problem.is_some() {
                outcome.problem = problem;
            }
        }
        outcomes.push(outcome);
    }

    let format = match c.format {
        SweepFormat::Text => Format::Text,
        SweepFormat::Markdown => Format::Markdown,
        SweepFormat::Csv => Format::Csv,
    };
    let mut out = Vec::new();
    throng_sweep::table(&sweep, &outcomes, format, &mut out).context("rendering the table")?;
    print_bytes(&out)?;
    if let Some(path) = &c.json {
        let doc = serde_json::json!({
            "schema": "throng.sweep/v1",
            "file": file,
            "parameters": sweep.params.iter().map(|(n, v)| serde_json::json!({"name": n, "values": v})).collect::<Vec<_>>(),
            "run": throng_plan::redact_command(&sweep.run),
            "repeat": sweep.repeat,
            "figures": sweep.figures.iter().map(throng_sweep::Figure::header).collect::<Vec<_>>(),
            "cells": outcomes.iter().map(|o| serde_json::json!({
                "values": o.cell.values.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                "problem": o.problem,
                "runs": o.runs,
            })).collect::<Vec<_>>(),
        });
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot write '{}' (check the directory exists)", path.display()))?;
        serde_json::to_writer_pretty(std::io::BufWriter::new(f), &doc).context("writing the sweep's JSON")?;
    }
    if let Some(path) = &c.chart {
        match throng_sweep::chart_svg(&sweep, &outcomes) {
            Some(svg) => std::fs::write(path, svg).with_context(|| format!("cannot write '{}'", path.display()))?,
            None => say!("throng sweep: no chart written: no cell has the chart's figure"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if stop.load(Ordering::SeqCst) {
        return Ok(Outcome::Interrupted.into());
    }
    if outcomes.iter().any(|o| o.problem.is_some()) {
        return Ok(Outcome::Failed.into());
    }
    Ok(ExitCode::SUCCESS)
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("throng-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    Ok(dir)
}

/// `'text'` for sh, with embedded quotes escaped.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Runs `sh -c cmd`, waiting at most `limit`; Err says how it ended (with
/// the last line it printed to stderr) when not with exit 0.
fn shell(cmd: &str, limit: Duration) -> Result<(), HookFailed> {
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(HookFailed::Spawn)?;
    let mut err = child.stderr.take();
    let mut out = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut text);
        }
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut Vec::new());
        }
        let _ = tx.send(text);
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HookFailed::Killed {
                    after_s: limit.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(HookFailed::Wait(e)),
        }
    };
    if status.success() {
        return Ok(());
    }
    // A background server started by a hook may hold stderr: don't wait long.
    let text = rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
    let last = String::from_utf8_lossy(&text)
        .trim()
        .lines()
        .last()
        .unwrap_or("")
        .to_string();
    Err(HookFailed::Exit {
        code: status.code(),
        last,
    })
}

/// How a `sh -c` of a sweep's hook or run ended when not with exit 0.
#[derive(Debug, thiserror::Error)]
enum HookFailed {
    /// `sh` could not start.
    #[error("cannot run sh: {0}")]
    Spawn(std::io::Error),
    /// Still running at its limit.
    #[error("killed after {after_s} s")]
    Killed { after_s: u64 },
    /// Waiting for it failed.
    #[error("{0}")]
    Wait(std::io::Error),
    /// It exited with a code other than 0 (None: by a signal), the last
    /// line it printed to stderr after it.
    #[error("exit {}{}", code.map_or_else(|| "by signal".to_string(), |c| c.to_string()), said(last))]
    Exit { code: Option<i32>, last: String },
}

/// `: LINE`, or nothing for an empty line.
fn said(last: &str) -> String {
    if last.is_empty() {
        String::new()
    } else {
        format!(": {last}")
    }
}

/// Ctrl-C or SIGTERM: finish the current cell (it gets the signal too, as
/// part of the terminal's process group) and stop.
fn watch_signals(stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("throng-signals".into())
        .spawn(move || {
            crate::signals::wait_for_stop();
            stop.store(true, Ordering::SeqCst);
            say!("\nthrong sweep: stopping after the current cell");
        });
}
