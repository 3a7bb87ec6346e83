//! The gate's text and markdown.

use super::verdict::{Gate, Status};
use crate::compare::model as compare;

/// The rules' lines as text: the verdict, then one line per rule, then the
/// mixed-plan warning.
pub fn write_text(g: &Gate, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(w, "{}", g.headline())?;
    let width = g
        .rules
        .iter()
        .map(|r| r.rule.chars().count())
        .max()
        .unwrap_or(0)
        .min(48);
    for r in &g.rules {
        writeln!(
            w,
            "  {:<15} {:<width$}  {}",
            r.status.name().to_uppercase(),
            r.rule,
            Gate::line(r)
        )?;
    }
    if g.allow_mixed {
        writeln!(
            w,
            "  warning: the sides ran different plans ({}); --allow-mixed judged them anyway",
            g.mixed.join("; ")
        )?;
    }
    Ok(())
}

/// Escapes a cell of a markdown table.
pub(crate) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The rules as a markdown table, after a bold verdict line.
pub fn write_markdown(g: &Gate, w: &mut dyn std::io::Write) -> std::io::Result<()> {
    let head = g.headline();
    let (verdict, rest) = head.split_once(": ").unwrap_or((&head, ""));
    writeln!(w, "**{verdict}**: {rest}")?;
    writeln!(w)?;
    writeln!(w, "| result | rule | figure | A | B | change | test |")?;
    writeln!(w, "|---|---|---|---:|---:|---:|---|")?;
    for r in &g.rules {
        let status = match r.status {
            Status::Failed => "**FAILED**".to_string(),
            Status::Held => "held".to_string(),
            Status::NotSignificant => "held: exceeds the limit but not significant".to_string(),
        };
        let p = r.test.p_value.map_or("too few values".to_string(), |p| {
            if p < 0.001 {
                "p < 0.001".into()
            } else {
                format!("p {p:.3}")
            }
        });
        writeln!(
            w,
            "| {status} | `{}` | {} | {} | {} | {} | {}, {p} |",
            cell(&r.rule).replace('`', "'"),
            cell(&r.figure),
            compare::value(r.unit, r.a),
            compare::value(r.unit, r.b),
            cell(&r.change_text),
            r.test.verdict.name()
        )?;
    }
    if g.allow_mixed {
        writeln!(w)?;
        writeln!(
            w,
            "> **warning**: the sides ran different plans ({}); `--allow-mixed` judged them anyway",
            cell(&g.mixed.join("; "))
        )?;
    }
    Ok(())
}
