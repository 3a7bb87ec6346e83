//! The sweep's table: one row per cell, in text, markdown or CSV.

use std::io::{self, Write};

use throng_report::format::{chars, clip, name};
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

/// The most characters a failed cell's note takes in the text table; the
/// markdown and CSV tables keep it whole.
const NOTE_CHARS: usize = 300;

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
            // Widths come from the data, and a width past 65,535 panics in
            // `format!`: cells are clipped (parameter values as names, the
            // note to NOTE_CHARS) before they are measured.
            let text = |cells: &[String]| -> Vec<String> {
                let last = cells.len().saturating_sub(1);
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| if i == last { clip(c, NOTE_CHARS) } else { name(c) }.into_owned())
                    .collect()
            };
            let header = text(&header);
            let rows: Vec<Vec<String>> = rows.iter().map(|r| text(r)).collect();
            let widths: Vec<usize> = (0..header.len())
                .map(|i| {
                    rows.iter()
                        .map(|r| chars(&r[i]))
                        .chain([chars(&header[i])])
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(value: &str) -> (Sweep, Vec<CellOutcome>) {
        let file =
            format!("parameters:\n  size: [\"{value}\", 2]\nrun: \"http http://127.0.0.1:1/ -n {{{{size}}}}\"\n");
        let sweep = Sweep::parse(&file, "s.yaml").expect("a valid sweep");
        let outcomes = sweep
            .cells()
            .into_iter()
            .map(|cell| CellOutcome {
                cell,
                runs: Vec::new(),
                problem: Some("x".repeat(70_000)),
            })
            .collect();
        (sweep, outcomes)
    }

    #[test]
    fn a_huge_cell_is_clipped_in_the_text_table_and_kept_in_csv() {
        let (s, outcomes) = sweep(&"v".repeat(70_000));
        let mut out = Vec::new();
        table(&s, &outcomes, Format::Text, &mut out).expect("written");
        let out = String::from_utf8(out).expect("utf-8");
        assert_eq!(out.lines().count(), 3, "{out}");
        for line in out.lines() {
            assert!(chars(line) < 2_000, "{} chars", chars(line));
        }
        assert!(
            out.contains(&format!("{}…", "v".repeat(59))),
            "the value is cut with an ellipsis"
        );
        assert!(
            out.contains(&format!("{}…", "x".repeat(299))),
            "the note is cut with an ellipsis"
        );

        let mut csv = Vec::new();
        table(&s, &outcomes, Format::Csv, &mut csv).expect("written");
        let csv = String::from_utf8(csv).expect("utf-8");
        assert!(csv.contains(&"v".repeat(70_000)) && csv.contains(&"x".repeat(70_000)));
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_in_characters() {
        let (s, mut outcomes) = sweep("éééééé");
        for o in &mut outcomes {
            o.problem = None;
        }
        let mut out = Vec::new();
        table(&s, &outcomes, Format::Text, &mut out).expect("written");
        let out = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("  size  "), "{out}");
        assert!(lines[1].starts_with("éééééé  "), "{out}");
        assert!(lines[2].starts_with("     2  "), "{out}");
    }
}
