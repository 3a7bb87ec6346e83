//! `throng compare`: reads each side's files (results or result sets), or
//! side A from a history (`--baseline DIR --last N`), builds the
//! comparison, prints it in the asked layout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use throng_report::View;
use throng_report::compare::{Comparison, Options, Side};
use throng_report::gate::Rule;

use super::shared::{print_bytes, read_document};
use crate::args::{CompareCmd, CompareFormat};
use crate::exit::UsageError;

pub fn run(mut c: CompareCmd) -> anyhow::Result<ExitCode> {
    let (files_a, files_b) = side_files(&mut c)?;
    let rules = parse_rules(&c.fail_on)?;
    super::export::check_outputs(&[
        ("--html", c.html.as_deref()),
        ("--summary-md", c.summary_md.as_deref()),
        ("--junit", c.junit.as_deref()),
    ])?;
    let (mut label_a, mut label_b) = match &c.baseline {
        Some(_) => (
            "baseline".to_string(),
            files_b
                .first()
                .and_then(|p| p.file_stem())
                .map_or_else(|| "new".to_string(), |s| s.to_string_lossy().into_owned()),
        ),
        None => default_labels(&files_a, &files_b),
    };
    for l in &c.labels {
        match l.split_once('=') {
            Some((side, name)) if side.eq_ignore_ascii_case("a") && !name.is_empty() => label_a = name.to_string(),
            Some((side, name)) if side.eq_ignore_ascii_case("b") && !name.is_empty() => label_b = name.to_string(),
            _ => return Err(UsageError(format!("--label '{l}': expected A=NAME or B=NAME")).into()),
        }
    }
    if !(50.0..100.0).contains(&c.confidence) {
        return Err(UsageError(format!(
            "--confidence {}: give a percentage from 50 to 99.9",
            c.confidence
        ))
        .into());
    }
    if !(0.0..=1000.0).contains(&c.min_effect) {
        return Err(UsageError(format!("--min-effect {}: give a percentage, e.g. 1", c.min_effect)).into());
    }
    let b = side(label_b, &files_b)?;
    let a = match &c.baseline {
        Some(dir) => {
            let (runs, sources) = super::history::baseline(dir, c.last, &b.runs)?;
            Side {
                label: label_a,
                sources,
                runs,
            }
        }
        None => side(label_a, &files_a)?,
    };
    let options = Options {
        confidence: c.confidence / 100.0,
        min_effect: c.min_effect / 100.0,
        seed: c.seed,
        ..Options::default()
    };
    let mut cmp = Comparison::new(a, b, options).map_err(|e| UsageError(e.to_string()))?;
    if !rules.is_empty() {
        if !cmp.mixed.is_empty() && !c.allow_mixed {
            return Err(UsageError(format!(
                "--fail-on: the sides ran different plans ({}); a gate compares one test before and after a \
                 change: run both sides with the same plan, or give --allow-mixed to judge them anyway",
                cmp.mixed.join("; ")
            ))
            .into());
        }
        cmp.judge(&rules, c.allow_mixed)
            .map_err(|e| UsageError(format!("--fail-on {e}")))?;
    }
    let out = render(&c, &cmp)?;
    if let Some(path) = &c.html {
        let page = throng_report::html::render_compare(&[
            (cmp.a.label.clone(), &cmp.merged_a),
            (cmp.b.label.clone(), &cmp.merged_b),
        ]);
        std::fs::write(path, page).with_context(|| {
            format!(
                "cannot write the HTML report to '{}' (check the directory exists and is writable)",
                path.display()
            )
        })?;
    }
    if let Some(path) = &c.summary_md {
        let mut md = Vec::new();
        throng_report::compare::write_summary(&cmp, &mut md).context("rendering the markdown summary")?;
        write_file(path, &md, "the markdown summary", true)?;
    }
    if let Some(path) = &c.junit {
        let mut xml = Vec::new();
        throng_report::junit::write_gate(&cmp, &mut xml).context("rendering JUnit XML")?;
        write_file(path, &xml, "JUnit XML", false)?;
    }
    print_bytes(&out)?;
    if cmp.gate.as_ref().is_some_and(|g| g.failed()) {
        return Ok(crate::exit::Outcome::Thresholds.into());
    }
    Ok(ExitCode::SUCCESS)
}

/// Side A's and side B's files: `A B`, `A... --vs B...`, or `--baseline DIR
/// NEW`. Files that `--fail-on` took (it takes every value up to the next
/// flag) go back to the files.
fn side_files(c: &mut CompareCmd) -> anyhow::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    // `--fail-on R A.json B.json`: the files went to --fail-on, which takes
    // every value up to the next flag. A rule has a < or >; a file is a file.
    let (rules, stray): (Vec<String>, Vec<String>) = std::mem::take(&mut c.fail_on)
        .into_iter()
        .partition(|t| t.contains(['<', '>']) || !Path::new(t).is_file());
    c.fail_on = rules;
    if let Some(file) = stray.first()
        && !c.vs.is_empty()
    {
        return Err(UsageError(format!(
            "--fail-on took '{file}', a file: give --fail-on after the result files (its rules take every value up \
             to the next flag)"
        ))
        .into());
    }
    c.files.extend(stray.into_iter().map(PathBuf::from));
    Ok(if c.baseline.is_some() {
        match c.files.as_slice() {
            [new] => (Vec::new(), vec![new.clone()]),
            files => {
                return Err(UsageError(format!(
                    "--baseline: give one file, the new run (or a result set of it); got {}",
                    files.len()
                ))
                .into());
            }
        }
    } else if c.vs.is_empty() {
        match c.files.as_slice() {
            [a, b] => (vec![a.clone()], vec![b.clone()]),
            files => {
                return Err(UsageError(format!(
                    "give two files (A then B), or side A's files then --vs and side B's; got {} file(s) and no --vs",
                    files.len()
                ))
                .into());
            }
        }
    } else {
        (c.files.clone(), c.vs.clone())
    })
}

/// The comparison in the layout `--format` asks for.
fn render(c: &CompareCmd, cmp: &Comparison) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    match c.format {
        CompareFormat::Text => throng_report::compare::write_text(cmp, &mut out),
        CompareFormat::Markdown => throng_report::compare::write_markdown(cmp, &mut out),
        CompareFormat::Json => throng_report::compare::write_json(cmp, &mut out),
        CompareFormat::Ab | CompareFormat::Httperf => {
            let view = if c.format == CompareFormat::Ab {
                View::Ab
            } else {
                View::Httperf
            };
            for (label, r) in [(&cmp.a.label, &cmp.merged_a), (&cmp.b.label, &cmp.merged_b)] {
                throng_report::supports(view, r).map_err(|e| UsageError(format!("side {label}: {e}")))?;
            }
            throng_report::compare::write_columns(view, cmp, &mut out)
        }
    }
    .context("rendering the comparison")?;
    Ok(out)
}

/// Every `--fail-on` rule, parsed before any file is read. A rule that
/// names a file (given before the files, it took their place) says so.
fn parse_rules(texts: &[String]) -> anyhow::Result<Vec<Rule>> {
    texts
        .iter()
        .map(|t| {
            Rule::parse(t).map_err(|e| {
                let hint = if Path::new(t).is_file() {
                    " (this is a file: give --fail-on after the result files, its rules take every value up to the next flag)"
                } else {
                    ""
                };
                UsageError(format!("--fail-on {e}{hint}")).into()
            })
        })
        .collect()
}

/// Writes `bytes` to `path`, after what it holds when `append` (`what`
/// names it in the error).
fn write_file(path: &Path, bytes: &[u8], what: &str, append: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    // A job summary ($GITHUB_STEP_SUMMARY) gathers what every command of a step appends.
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .with_context(|| {
            format!(
                "cannot write {what} to '{}' (check the directory exists and is writable)",
                path.display()
            )
        })
}

/// A side's runs: every run of every file, in order.
fn side(label: String, files: &[PathBuf]) -> anyhow::Result<Side> {
    let mut runs = Vec::new();
    for f in files {
        runs.extend(read_document(f)?.into_runs());
    }
    Ok(Side {
        label,
        sources: files.iter().map(|f| f.display().to_string()).collect(),
        runs,
    })
}

/// The files' names when each side is one file and the names differ, else
/// A and B.
fn default_labels(a: &[PathBuf], b: &[PathBuf]) -> (String, String) {
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
    if let ([a], [b]) = (a, b)
        && let (Some(sa), Some(sb)) = (stem(a), stem(b))
        && sa != sb
    {
        return (sa, sb);
    }
    ("A".to_string(), "B".to_string())
}
