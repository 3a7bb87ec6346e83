//! Threshold verdicts as JUnit XML, the format CI systems (GitLab, Jenkins,
//! GitHub test reporters) read: one test case per threshold, failed ones
//! with what was observed.

use std::io::{self, Write};

use throng_result::RunResult;

use crate::chart::escape;

/// Writes the verdicts of `r`'s thresholds (none: an empty suite).
pub fn write(r: &RunResult, w: &mut dyn Write) -> io::Result<()> {
    let tests = r.thresholds.len();
    let failures = r.thresholds.iter().filter(|v| !v.passed).count();
    let name = match &r.plan {
        throng_result::Plan::Run(p) => p.file.clone(),
        _ => "throng".to_string(),
    };
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="throng" tests="{tests}" failures="{failures}" time="{:.3}">"#,
        r.duration_s
    )?;
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="{tests}" failures="{failures}" errors="0" time="{:.3}" timestamp="{}">"#,
        escape(&format!("thresholds of {name}")),
        r.duration_s,
        escape(r.started_at.trim_end_matches('Z')),
    )?;
    for v in &r.thresholds {
        let case = format!(
            r#"    <testcase classname="throng.thresholds" name="{}" time="0""#,
            escape(&v.threshold)
        );
        if v.passed {
            writeln!(w, "{case}/>")?;
        } else {
            writeln!(w, "{case}>")?;
            writeln!(
                w,
                r#"      <failure message="{}" type="threshold">{}</failure>"#,
                escape(&format!("failed: {}", v.detail)),
                escape(&format!("{} did not hold: {}", v.threshold, v.detail))
            )?;
            writeln!(w, "    </testcase>")?;
        }
    }
    writeln!(w, "  </testsuite>")?;
    writeln!(w, "</testsuites>")
}

/// Writes the `--fail-on` rules of a comparison: one test case per rule, a
/// failure for each failed rule; a rule past its limit without a
/// significant change passes and says so in its output (no rules: an empty
/// suite).
pub fn write_gate(c: &crate::compare::Comparison, w: &mut dyn Write) -> io::Result<()> {
    use crate::gate::verdict::{Gate, Status};
    let rules = c.gate.as_ref().map_or(&[][..], |g| g.rules.as_slice());
    let tests = rules.len();
    let failures = rules.iter().filter(|r| r.status == Status::Failed).count();
    let name = format!("compare {} vs {}", c.a.label, c.b.label);
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="throng" tests="{tests}" failures="{failures}" time="0">"#
    )?;
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="{tests}" failures="{failures}" errors="0" time="0">"#,
        escape(&format!("gate of {name}"))
    )?;
    for r in rules {
        writeln!(
            w,
            r#"    <testcase classname="throng.compare" name="{}" time="0">"#,
            escape(&r.rule)
        )?;
        let line = Gate::line(r);
        if r.status == Status::Failed {
            writeln!(
                w,
                r#"      <failure message="{}" type="compare">{}</failure>"#,
                escape(&format!("failed: {line}")),
                escape(&format!("{} failed: {line}", r.rule))
            )?;
        } else {
            writeln!(
                w,
                "      <system-out>{}</system-out>",
                escape(&format!("{}: {line}", r.status.name()))
            )?;
        }
        writeln!(w, "    </testcase>")?;
    }
    writeln!(w, "  </testsuite>")?;
    writeln!(w, "</testsuites>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"p(95) < 500ms & "x" 'y'"#),
            "p(95) &lt; 500ms &amp; &quot;x&quot; &#39;y&#39;"
        );
        assert_eq!(escape("a\u{1}b"), "ab");
    }
}
