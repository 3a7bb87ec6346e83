//! `--csv`, `--csv-requests`, `--hdr-log` and `--summary-md`: files for
//! other tools.
//!
//! Every path is opened before the run, so a mistyped directory fails at
//! once (exit 2, one line naming the path), not after a long run.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use throng_engine::RequestLog;
use throng_result::RunResult;

use crate::args::ExportArgs;
use crate::exit::UsageError;

/// Export files opened before the run, written after it.
#[derive(Debug, Default)]
pub struct Exports {
    csv: Option<(PathBuf, File)>,
    hdr_log: Option<(PathBuf, File)>,
    /// Checked before the run, written (replaced) after it: a file such as
    /// `$GITHUB_STEP_SUMMARY` is not emptied when the run cannot start.
    summary_md: Option<PathBuf>,
}

/// Creates `path` for writing, or says which flag and path cannot be.
fn create(flag: &str, path: &Path) -> Result<File, UsageError> {
    File::create(path).map_err(|e| {
        UsageError(format!(
            "{flag}: cannot write '{}': {e} (check the directory exists and is writable)",
            path.display()
        ))
    })
}

/// Checks, before a run, that every output named by a flag can be written
/// (its directory exists, it is not a directory, this process may write it),
/// so a typo fails at once instead of after the run. Creates nothing:
/// a file made for the check is removed, an existing one is not truncated.
pub fn check_outputs(outputs: &[(&str, Option<&Path>)]) -> Result<(), UsageError> {
    for (flag, path) in outputs {
        let Some(path) = path else { continue };
        if *flag == "--json" && super::shared::is_stdout(path) {
            continue;
        }
        let bad = |why: String| UsageError(format!("{flag} {}: {why}", path.display()));
        if path.is_dir() {
            return Err(bad("is a directory; give a file name".into()));
        }
        let existed = path.symlink_metadata().is_ok();
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| {
                bad(format!(
                    "cannot write there: {e} (check the directory exists and is writable)"
                ))
            })?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// Opens the series exports (`--csv`, `--hdr-log`).
pub fn open(csv: Option<&Path>, hdr_log: Option<&Path>) -> Result<Exports, UsageError> {
    Ok(Exports {
        csv: csv
            .map(|p| create("--csv", p).map(|f| (p.to_path_buf(), f)))
            .transpose()?,
        hdr_log: hdr_log
            .map(|p| create("--hdr-log", p).map(|f| (p.to_path_buf(), f)))
            .transpose()?,
        summary_md: None,
    })
}

/// Opens every export a run command asks for; the request log's file is
/// checked here and written by the engine.
pub fn open_run(e: &ExportArgs) -> Result<(Exports, Option<RequestLog>), UsageError> {
    check_outputs(&[("--summary-md", e.summary_md.as_deref())])?;
    let exports = Exports {
        summary_md: e.summary_md.clone(),
        ..open(e.csv.as_deref(), e.hdr_log.as_deref())?
    };
    let log = match &e.csv_requests {
        Some(path) => {
            create("--csv-requests", path)?;
            if e.csv_requests_max == 0 {
                return Err(UsageError(
                    "--csv-requests-max 0: give at least 1 (or leave out --csv-requests)".into(),
                ));
            }
            Some(RequestLog {
                path: path.clone(),
                max_rows: e.csv_requests_max,
            })
        }
        None => None,
    };
    Ok((exports, log))
}

/// `--csv-requests` streams one run's requests; repeated runs would write
/// over each other's rows.
pub fn refuse_rows_with_repeat(e: &ExportArgs, repeat: u32) -> Result<(), UsageError> {
    match (&e.csv_requests, repeat) {
        (Some(_), 2..) => Err(UsageError(format!(
            "--csv-requests with --repeat {repeat}: the request log holds one run; drop --repeat, or repeat the \
             command with a different --csv-requests file each time"
        ))),
        _ => Ok(()),
    }
}

impl Exports {
    /// Writes the series exports of `result`.
    pub fn write(self, result: &RunResult) -> anyhow::Result<()> {
        if let Some((path, file)) = self.csv {
            let mut w = BufWriter::new(file);
            throng_report::csv::write_series(result, &mut w)
                .and_then(|()| w.flush())
                .with_context(|| format!("--csv: writing '{}'", path.display()))?;
        }
        if let Some((path, file)) = self.hdr_log {
            let mut w = BufWriter::new(file);
            throng_report::interval_log::write(result, &mut w)
                .and_then(|()| w.flush())
                .with_context(|| format!("--hdr-log: writing '{}'", path.display()))?;
        }
        if let Some(path) = self.summary_md {
            let mut text = Vec::new();
            throng_report::summary_md::write(result, &mut text).context("rendering the markdown summary")?;
            // Appended, as compare's is: a job summary ($GITHUB_STEP_SUMMARY)
            // gathers what every command of a step writes.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| std::io::Write::write_all(&mut f, &text))
                .with_context(|| {
                    format!(
                        "--summary-md: cannot write '{}' (check the directory exists and is writable)",
                        path.display()
                    )
                })?;
        }
        Ok(())
    }
}

/// Joins request-row files written by separate processes into `out`: one
/// header, then each part's rows in order. The parts are removed.
pub fn join_request_parts(parts: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    let file = create("--csv-requests", out)?;
    let mut w = BufWriter::new(file);
    writeln!(w, "{}", throng_engine::REQUESTS_CSV_HEADER)?;
    for part in parts {
        let Ok(f) = File::open(part) else {
            continue;
        };
        let mut r = BufReader::new(f);
        let mut header = String::new();
        r.read_line(&mut header)
            .with_context(|| format!("reading '{}'", part.display()))?;
        std::io::copy(&mut r, &mut w).with_context(|| format!("--csv-requests: writing '{}'", out.display()))?;
        let _ = std::fs::remove_file(part);
    }
    w.flush()
        .with_context(|| format!("--csv-requests: writing '{}'", out.display()))
}
