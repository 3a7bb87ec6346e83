//! The sweep's table: one row per cell, in text, markdown or CSV.

use std::io::{self, Write};

use throng_result::RunResult;

use crate::figure::Figure;
use crate::spec::{Cell, Sweep};

/// How a cell went: its runs' results, or why it failed.
#[derive(Clone, Debug)]
pub struct CellOutcome {
    /// The cell.
    pub cell: Cell,
    /// Results of the runs that succeeded.
    pub runs: Vec<RunResult>,
    /// Why a run (or the setup) failed, if one did.
    pub problem: Option<String>,
}

/// Table layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for a terminal.
    Text,
    /// A markdown table.
    Markdown,
    /// Comma-separated values.
    Csv,
}

/// The median of a figure over a cell's runs.
fn median(f: &Figure, runs: &[RunResult]) -> Option<f64> {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| f.value(r)).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn number(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.2}"),
    }
}

/// Writes the table: parameters, runs, each figure (the median over a
/// cell's runs), and a note for failed cells.
pub fn table(sweep: &Sweep, outcomes: &[CellOutcome], format: Format, w: &mut dyn Write) -> io::Result<()> {
    let mut header: Vec<String> = sweep.params.iter().map(|(n, _)| n.clone()).collect();
    if sweep.repeat > 1 {
        header.push("runs".into());
    }
    header.extend(sweep.figures.iter().map(Figure::header));
    header.push("note".into());
    let rows: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| {
            let mut row: Vec<String> = o.cell.values.iter().map(|(_, v)| v.clone()).collect();
            if sweep.repeat > 1 {
                row.push(o.runs.len().to_string());
            }
            row.extend(sweep.figures.iter().map(|f| number(median(f, &o.runs))));
            row.push(o.problem.clone().unwrap_or_default());
            row
        })
        .collect();
    match format {
        Format::Csv => {
            let esc = |s: &str| {
                if s.contains([',', '"', '\n']) {
                    format!("\"{}\"", s.replace('"', "\"\""))
                } else {
                    s.to_string()
                }
            };
            writeln!(w, "{}", header.iter().map(|h| esc(h)).collect::<Vec<_>>().join(","))?;
            for r in &rows {
                writeln!(w, "{}", r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(","))?;
            }
        }
        Format::Markdown => {
            writeln!(w, "| {} |", header.join(" | "))?;
            writeln!(w, "|{}|", header.iter().map(|_| "---").collect::<Vec<_>>().join("|"))?;
            for r in &rows {
                writeln!(
                    w,
                    "| {} |",
                    r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | ")
                )?;
            }
        }
        Format::Text => {
            let widths: Vec<usize> = (0..header.len())
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].len())
                        .chain([header[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cells: &[String]| {
                cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:>w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
            };
            writeln!(w, "{}", line(&header))?;
            for r in &rows {
                writeln!(w, "{}", line(r))?;
            }
        }
    }
    Ok(())
}
