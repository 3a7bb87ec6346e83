//! The comparison's views: text, markdown, the step summary, JSON and two
//! columns in ab's or httperf's layout.

use std::io::{self, Write};

use serde::Serialize;
use throng_result::{Plan, RunResult};

use super::Comparison;
use super::model::{Basis, Figure, Options, SCHEMA, Side, Test, kind, signed, value};
use crate::format::{LABEL_CHARS, chars, clip, name};

pub(super) fn rel_text(r: Option<f64>) -> String {
    match r {
        Some(r) => format!("{:+.1}%", r * 100.0),
        None => "-".to_string(),
    }
}

fn interval_text(t: &Test) -> String {
    match t.interval {
        Some(i) => format!("[{}, {}]", signed(t.unit, i.low), signed(t.unit, i.high)),
        None => "-".to_string(),
    }
}

fn p_text(t: &Test) -> String {
    match t.mann_whitney {
        Some(m) if m.p_value < 0.001 => "<0.001".to_string(),
        Some(m) => format!("{:.3}", m.p_value),
        None => "-".to_string(),
    }
}

fn describe(r: &RunResult) -> String {
    match &r.plan {
        Plan::Http(p) => match &p.grpc {
            Some(g) => format!("grpc {} {} ({})", p.target.authority(), g.call, p.describe()),
            None => format!("http {} {} ({})", p.method, p.target.url, p.describe()),
        },
        Plan::Storm(p) => format!("storm {} ({})", p.target.url, p.describe()),
        Plan::Run(p) if p.target.http.is_multiplexed() => format!("run {} ({})", p.target.url, p.target.http.label()),
        Plan::Run(p) => format!("run {}", p.target.url),
        Plan::Mqtt(p) => format!("mqtt {} ({})", p.target.url, p.describe()),
    }
}

fn side_header(s: &Side) -> String {
    let files = if s.sources.len() == 1 {
        s.sources[0].clone()
    } else {
        format!("{} files", s.sources.len())
    };
    format!(
        "{} run{} from {files}",
        s.runs.len(),
        if s.runs.len() == 1 { "" } else { "s" }
    )
}

/// What the tests are over, how they are computed, and what "significant"
/// means: three lines.
fn basis_lines(c: &Comparison) -> [String; 3] {
    let o = &c.options;
    let over = match c.basis {
        Basis::Runs => format!(
            "over each run's figure ({} of A, {} of B)",
            throng_plan::count(c.a.runs.len() as u64, "run"),
            c.b.runs.len()
        ),
        Basis::Seconds => "over each full second of the runs (per-second series: weaker than repeated runs, the \
                           seconds of a run are not independent)"
            .to_string(),
    };
    [
        over,
        format!(
            "difference of medians (B − A), its {:.0}% bootstrap interval ({} resamples, seed {}), two-sided \
             Mann–Whitney U p",
            o.confidence * 100.0,
            o.resamples,
            o.seed
        ),
        format!(
            "significant: the interval excludes 0, p < {:.2} and |B − A| >= {}% of A (smaller: negligible)",
            1.0 - o.confidence,
            o.min_effect * 100.0
        ),
    ]
}

/// The sides' labels as shown: at most [`LABEL_CHARS`] characters.
fn labels(c: &Comparison) -> (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>) {
    (clip(&c.a.label, LABEL_CHARS), clip(&c.b.label, LABEL_CHARS))
}

/// The comparison as aligned text.
pub fn write_text(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    if let Some(g) = &c.gate {
        crate::gate::write::write_text(g, w)?;
        writeln!(w)?;
    }
    let (la, lb) = labels(c);
    writeln!(
        w,
        "throng compare: A = {la} ({}), B = {lb} ({})",
        side_header(&c.a),
        side_header(&c.b)
    )?;
    writeln!(w, "  A: {}", describe(&c.merged_a))?;
    writeln!(w, "  B: {}", describe(&c.merged_b))?;
    writeln!(w)?;
    let width = 28;
    let col = chars(&la).max(chars(&lb)).max(12);
    let mut section = "";
    for f in &c.figures {
        if f.section != section {
            section = &f.section;
            let head = if section == "summary" {
                format!(
                    "  {section:<width$} {la:>col$} {lb:>col$} {:>12} {:>9}",
                    "B−A", "(B−A)/A"
                )
            } else {
                format!("  {section}")
            };
            writeln!(w, "{head}")?;
        }
        writeln!(
            w,
            "    {:<w2$} {:>col$} {:>col$} {:>12} {:>9}",
            name(&f.name),
            value(f.unit, f.a),
            value(f.unit, f.b),
            signed(f.unit, f.diff()),
            rel_text(f.relative()),
            w2 = width - 2
        )?;
    }
    writeln!(w)?;
    let [over, how, rule] = basis_lines(c);
    writeln!(w, "  statistics {over}")?;
    writeln!(w, "    {how}")?;
    writeln!(w, "    {rule}")?;
    writeln!(
        w,
        "    {:<22} {:>12} {:>12} {:>12} {:>9} {:>28} {:>7}  verdict",
        "figure", "median A", "median B", "B−A", "(B−A)/A", "interval", "p"
    )?;
    for t in &c.tests {
        let [a, b, diff, rel, interval, p] = test_cells(t);
        writeln!(
            w,
            "    {:<22} {a:>12} {b:>12} {diff:>12} {rel:>9} {interval:>28} {p:>7}  {}",
            name(&t.name),
            t.verdict.name()
        )?;
    }
    if !c.warnings.is_empty() {
        writeln!(w)?;
        for warning in &c.warnings {
            writeln!(w, "  warning: {warning}")?;
        }
    }
    Ok(())
}

/// A test's figures as text, in table order: median A, median B, B−A,
/// (B−A)/A, interval, p.
fn test_cells(t: &Test) -> [String; 6] {
    [
        value(t.unit, t.median_a),
        value(t.unit, t.median_b),
        signed(t.unit, t.diff),
        rel_text(t.relative),
        interval_text(t),
        p_text(t),
    ]
}

/// The comparison as markdown tables.
pub fn write_markdown(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let (la, lb) = labels(c);
    writeln!(w, "## throng compare: {la} vs {lb}")?;
    writeln!(w)?;
    if let Some(g) = &c.gate {
        crate::gate::write::write_markdown(g, w)?;
        writeln!(w)?;
    }
    writeln!(w, "- **A = {la}**: {}; {}", side_header(&c.a), describe(&c.merged_a))?;
    writeln!(w, "- **B = {lb}**: {}; {}", side_header(&c.b), describe(&c.merged_b))?;
    writeln!(w)?;
    writeln!(w, "| section | figure | {la} | {lb} | B−A | (B−A)/A |")?;
    writeln!(w, "|---|---|---:|---:|---:|---:|")?;
    for f in &c.figures {
        writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} |",
            f.section,
            name(&f.name),
            value(f.unit, f.a),
            value(f.unit, f.b),
            signed(f.unit, f.diff()),
            rel_text(f.relative())
        )?;
    }
    writeln!(w)?;
    writeln!(w, "Statistics {}.", basis_lines(c).join("; "))?;
    writeln!(w)?;
    writeln!(
        w,
        "| figure | median {la} | median {lb} | B−A | (B−A)/A | interval | p | verdict |"
    )?;
    writeln!(w, "|---|---:|---:|---:|---:|---:|---:|---|")?;
    for t in &c.tests {
        let [a, b, diff, rel, interval, p] = test_cells(t);
        writeln!(
            w,
            "| {} | {a} | {b} | {diff} | {rel} | {interval} | {p} | **{}** |",
            name(&t.name),
            t.verdict.name()
        )?;
    }
    if !c.warnings.is_empty() {
        writeln!(w)?;
        for warning in &c.warnings {
            writeln!(w, "> **warning**: {warning}")?;
        }
    }
    Ok(())
}

/// A short markdown summary for a pull request comment or a CI job summary
/// (`$GITHUB_STEP_SUMMARY`): the verdict on its first lines (when rules
/// were given), the sides, the tested figures and the error rate, and the
/// warnings; no links.
pub fn write_summary(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let (la, lb) = labels(c);
    let cell = crate::gate::write::cell;
    match &c.gate {
        Some(g) => {
            let verdict = if g.failed() { "GATE FAILED" } else { "GATE PASSED" };
            writeln!(w, "### throng compare: {verdict} ({} vs {})", cell(&la), cell(&lb))?;
            writeln!(w)?;
            crate::gate::write::write_markdown(g, w)?;
        }
        None => writeln!(w, "### throng compare: {} vs {}", cell(&la), cell(&lb))?,
    }
    writeln!(w)?;
    writeln!(
        w,
        "A = {}: {}; `{}`  ",
        cell(&la),
        side_header(&c.a),
        describe(&c.merged_a).replace('`', "'")
    )?;
    writeln!(
        w,
        "B = {}: {}; `{}`",
        cell(&lb),
        side_header(&c.b),
        describe(&c.merged_b).replace('`', "'")
    )?;
    writeln!(w)?;
    writeln!(w, "| figure | {} | {} | B−A | (B−A)/A | test |", cell(&la), cell(&lb))?;
    writeln!(w, "|---|---:|---:|---:|---:|---|")?;
    for t in &c.tests {
        let [a, b, diff, rel, _, p] = test_cells(t);
        writeln!(
            w,
            "| {} (median of {}) | {a} | {b} | {diff} | {rel} | {}, p {p} |",
            cell(&name(&t.name)),
            match t.basis {
                Basis::Runs => "runs",
                Basis::Seconds => "seconds",
            },
            t.verdict.name()
        )?;
    }
    for f in c
        .figures
        .iter()
        .filter(|f| f.section == "summary" && (f.name == "errors (%)" || f.name == "failed (%)"))
    {
        writeln!(
            w,
            "| {} | {} | {} | {} | {} | |",
            f.name,
            value(f.unit, f.a),
            value(f.unit, f.b),
            signed(f.unit, f.diff()),
            rel_text(f.relative())
        )?;
    }
    if !c.warnings.is_empty() {
        writeln!(w)?;
        for warning in &c.warnings {
            writeln!(w, "> **warning**: {}", cell(warning))?;
        }
    }
    Ok(())
}

/// The comparison as a JSON document (schema [`SCHEMA`]).
pub fn write_json(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    #[derive(Serialize)]
    struct SideDoc<'a> {
        label: &'a str,
        sources: &'a [String],
        runs: usize,
        kind: &'static str,
        target: &'a str,
    }
    /// A figure, its values' keys naming their unit (`a_us`, `diff_us`).
    struct FigureDoc<'a> {
        figure: &'a Figure,
        diff: f64,
        relative: Option<f64>,
    }
    impl Serialize for FigureDoc<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let (f, u) = (self.figure, self.figure.unit);
            let mut m = s.serialize_map(Some(7))?;
            m.serialize_entry("section", &f.section)?;
            m.serialize_entry("name", &f.name)?;
            m.serialize_entry("unit", &u)?;
            m.serialize_entry(&u.key("a"), &f.a)?;
            m.serialize_entry(&u.key("b"), &f.b)?;
            m.serialize_entry(&u.key("diff"), &self.diff)?;
            m.serialize_entry("relative", &self.relative)?;
            m.end()
        }
    }
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        gate: Option<&'a crate::gate::verdict::Gate>,
        a: SideDoc<'a>,
        b: SideDoc<'a>,
        options: &'a Options,
        basis: Basis,
        figures: Vec<FigureDoc<'a>>,
        tests: &'a [Test],
        warnings: &'a [String],
    }
    fn side<'a>(s: &'a Side, m: &'a RunResult) -> SideDoc<'a> {
        SideDoc {
            label: &s.label,
            sources: &s.sources,
            runs: s.runs.len(),
            kind: kind(m),
            target: m.plan.target_url(),
        }
    }
    let doc = Doc {
        schema: SCHEMA,
        gate: c.gate.as_ref(),
        a: side(&c.a, &c.merged_a),
        b: side(&c.b, &c.merged_b),
        options: &c.options,
        basis: c.basis,
        figures: c
            .figures
            .iter()
            .map(|f| FigureDoc {
                figure: f,
                diff: f.diff(),
                relative: f.relative(),
            })
            .collect(),
        tests: &c.tests,
        warnings: &c.warnings,
    };
    serde_json::to_writer_pretty(&mut *w, &doc).map_err(io::Error::other)?;
    writeln!(w)
}

/// Both sides in ab's or httperf's layout, in two columns (A | B), line by
/// line. Check [`crate::view::supports`] for both sides first.
pub fn write_columns(view: crate::view::View, c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    let render = |r: &RunResult| -> io::Result<Vec<String>> {
        let mut buf = Vec::new();
        crate::view::write(view, r, &mut buf)?;
        Ok(String::from_utf8_lossy(&buf).lines().map(str::to_string).collect())
    };
    let (left, right) = (render(&c.merged_a)?, render(&c.merged_b)?);
    if let Some(g) = &c.gate {
        crate::gate::write::write_text(g, w)?;
        writeln!(w)?;
    }
    let (la, lb) = labels(c);
    let head_a = format!("A: {la}");
    let head_b = format!("B: {lb}");
    let width_of = |lines: &[String], head: &str| {
        lines
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .max(head.chars().count())
    };
    let (width, width_b) = (width_of(&left, &head_a), width_of(&right, &head_b));
    let pad = |s: &str| format!("{s}{}", " ".repeat(width.saturating_sub(s.chars().count())));
    writeln!(w, "{} | {head_b}", pad(&head_a))?;
    writeln!(w, "{}-+-{}", "-".repeat(width), "-".repeat(width_b))?;
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map_or("", String::as_str);
        let r = right.get(i).map_or("", String::as_str);
        writeln!(w, "{} | {r}", pad(l))?;
    }
    if c.a.runs.len() > 1 || c.b.runs.len() > 1 {
        writeln!(w)?;
        writeln!(
            w,
            "({} of A and {} of B, each side's runs added up; `--format text` has the statistics)",
            throng_plan::count(c.a.runs.len() as u64, "run"),
            c.b.runs.len()
        )?;
    }
    Ok(())
}
