//! The sweep file: parsing, validation, expansion into cells.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use crate::figure::Figure;

/// Why a sweep file cannot run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// Not YAML, or not the expected shape.
    #[error("{file}{location}: {message}")]
    Yaml {
        /// The file.
        file: String,
        /// ":line:column" when known.
        location: String,
        /// What was expected.
        message: String,
    },
    /// A field's value is wrong.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The field.
        field: String,
        /// What is wrong and what to do.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    parameters: serde_yaml_ng::Mapping,
    run: String,
    #[serde(default)]
    setup: Option<String>,
    #[serde(default)]
    teardown: Option<String>,
    #[serde(default)]
    repeat: Option<u32>,
    #[serde(default)]
    figures: Option<Vec<String>>,
    #[serde(default)]
    chart: Option<RawChart>,
    #[serde(default)]
    cell_timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChart {
    figure: String,
    x: String,
    #[serde(default)]
    lines: Option<String>,
}

/// Which figure to chart against which parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartSpec {
    /// The figure on the y axis.
    pub figure: Figure,
    /// The parameter on the x axis.
    pub x: String,
    /// One line per value of this parameter.
    pub lines: Option<String>,
}

/// A validated sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// Parameters in file order, with their values as text.
    pub params: Vec<(String, Vec<String>)>,
    /// The throng command per cell (without `throng`), with `{{name}}`s.
    pub run: String,
    /// A shell command before each cell's run.
    pub setup: Option<String>,
    /// A shell command after each cell's run (also after a failure).
    pub teardown: Option<String>,
    /// Runs per cell.
    pub repeat: u32,
    /// Columns of the table.
    pub figures: Vec<Figure>,
    /// The chart, if asked for.
    pub chart: Option<ChartSpec>,
    /// Longest a cell's run may take.
    pub cell_timeout: Duration,
}

/// One combination of parameter values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// (name, value) in parameter order.
    pub values: Vec<(String, String)>,
}

impl Cell {
    /// The value of one parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// `cost=4 clients=50`.
    pub fn label(&self) -> String {
        self.values
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Figures tabulated when the file names none (seed 000's columns).
pub const DEFAULT_FIGURES: [&str; 8] = [
    "established",
    "failures",
    "total_connect_time",
    "total_reconnect_time",
    "connect.p50",
    "connect.p99",
    "handshake.p50",
    "handshake.p99",
];

impl Sweep {
    /// Parses and validates a sweep file; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Sweep, SweepError> {
        let text = throng_plan::input::strip_bom(text);
        throng_plan::input::check_yaml_nesting(text).map_err(|e| SweepError::Yaml {
            file: file.to_string(),
            location: format!(":{}:{}", e.line, e.column),
            message: e.message,
        })?;
        let raw: Raw = serde_yaml_ng::from_str(text).map_err(|e| SweepError::Yaml {
            file: file.to_string(),
            location: e
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default(),
            message: throng_plan::input::plain_types(e.to_string().split(" at line ").next().unwrap_or_default()),
        })?;
        let invalid = |field: &str, message: String| SweepError::Invalid {
            file: file.to_string(),
            field: field.to_string(),
            message,
        };
        let mut params = Vec::new();
        for (k, v) in &raw.parameters {
            let name = scalar(k).ok_or_else(|| invalid("parameters", "parameter names must be plain words".into()))?;
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(invalid(
                    "parameters",
                    format!("'{name}' is not a name of letters, digits and _"),
                ));
            }
            let values = match v {
                serde_yaml_ng::Value::Sequence(seq) => seq
                    .iter()
                    .map(|x| {
                        scalar(x).ok_or_else(|| {
                            invalid(
                                &format!("parameters.{name}"),
                                "values must be numbers or strings".into(),
                            )
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                other => vec![scalar(other).ok_or_else(|| {
                    invalid(
                        &format!("parameters.{name}"),
                        "give a list of values, e.g. [50, 100, 150]".into(),
                    )
                })?],
            };
            if values.is_empty() {
                return Err(invalid(&format!("parameters.{name}"), "has no values".into()));
            }
            params.push((name, values));
        }
        if params.is_empty() {
            return Err(invalid(
                "parameters",
                "name at least one, e.g. clients: [50, 100]".into(),
            ));
        }
        let known: BTreeSet<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        for (field, template) in [
            ("run", Some(&raw.run)),
            ("setup", raw.setup.as_ref()),
            ("teardown", raw.teardown.as_ref()),
        ] {
            let Some(t) = template else { continue };
            for name in placeholders(t) {
                if !known.contains(name.as_str()) && name != "repeat" && name != "sweep_dir" {
                    return Err(invalid(
                        field,
                        format!(
                            "{{{{{name}}}}} is not a parameter; known: {}",
                            known
                                .iter()
                                .map(|k| format!("{{{{{k}}}}}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
            }
        }
        let first = raw.run.split_whitespace().next().unwrap_or("");
        if !["http", "storm"].contains(&first) {
            return Err(invalid(
                "run",
                format!("starts with '{first}'; it is a throng command such as 'storm nats://…' or 'http http://…'"),
            ));
        }
        if raw
            .run
            .split_whitespace()
            .any(|w| w == "--json" || w == "--format" || w.starts_with("--json="))
        {
            return Err(invalid(
                "run",
                "the sweep collects each run's result itself; remove --json and --format".into(),
            ));
        }
        let figures = match &raw.figures {
            Some(list) => list
                .iter()
                .map(|f| Figure::parse(f).map_err(|e| invalid("figures", e)))
                .collect::<Result<Vec<_>, _>>()?,
            None => DEFAULT_FIGURES.iter().filter_map(|f| Figure::parse(f).ok()).collect(),
        };
        let chart = match raw.chart {
            Some(c) => {
                let figure = Figure::parse(&c.figure).map_err(|e| invalid("chart.figure", e))?;
                if !known.contains(c.x.as_str()) {
                    return Err(invalid("chart.x", format!("'{}' is not a parameter", c.x)));
                }
                if let Some(l) = &c.lines
                    && (!known.contains(l.as_str()) || *l == c.x)
                {
                    return Err(invalid("chart.lines", format!("'{l}' is not another parameter")));
                }
                Some(ChartSpec {
                    figure,
                    x: c.x,
                    lines: c.lines,
                })
            }
            None => None,
        };
        let repeat = raw.repeat.unwrap_or(1);
        if repeat == 0 {
            return Err(invalid("repeat", "must be at least 1".into()));
        }
        let cell_timeout = match raw.cell_timeout {
            Some(t) => {
                parse_secs(&t).ok_or_else(|| invalid("cell_timeout", format!("'{t}' is not a duration such as 10m")))?
            }
            None => Duration::from_secs(3600),
        };
        Ok(Sweep {
            params,
            run: raw.run,
            setup: raw.setup,
            teardown: raw.teardown,
            repeat,
            figures,
            chart,
            cell_timeout,
        })
    }

    /// Every combination, first parameter outermost.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = vec![Cell { values: Vec::new() }];
        for (name, values) in &self.params {
            cells = cells
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut next = c.clone();
                        next.values.push((name.clone(), v.clone()));
                        next
                    })
                })
                .collect();
        }
        cells
    }

    /// `template` with every `{{name}}` replaced by the cell's value (and
    /// `{{repeat}}` by the run's index from 1).
    pub fn render(template: &str, cell: &Cell, repeat: u32) -> String {
        let mut out = template.to_string();
        for (n, v) in &cell.values {
            out = out.replace(&format!("{{{{{n}}}}}"), v);
        }
        out.replace("{{repeat}}", &repeat.to_string())
    }
}

fn scalar(v: &serde_yaml_ng::Value) -> Option<String> {
    match v {
        serde_yaml_ng::Value::String(s) => Some(s.clone()),
        serde_yaml_ng::Value::Number(n) => Some(n.to_string()),
        serde_yaml_ng::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn placeholders(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find("{{") {
        let after = &rest[i + 2..];
        match after.find("}}") {
            Some(j) => {
                out.push(after[..j].trim().to_string());
                rest = &after[j + 2..];
            }
            None => break,
        }
    }
    out
}

fn parse_secs(t: &str) -> Option<Duration> {
    let t = t.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then(|| Duration::from_secs_f64(v * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
parameters:
  cost: [4, 10]
  clients: [50, 100]
setup: "start --cost {{cost}}"
run: "storm nats://127.0.0.1:4222 --count {{clients}}"
chart: { figure: total_connect_time, x: cost, lines: clients }
"#;

    #[test]
    fn expands_the_matrix_in_order() {
        let s = Sweep::parse(FILE, "s.yaml").unwrap();
        let cells = s.cells();
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[1].label(), "cost=4 clients=100");
        assert_eq!(cells[2].get("cost"), Some("10"));
        assert_eq!(
            Sweep::render(&s.run, &cells[3], 1),
            "storm nats://127.0.0.1:4222 --count 100"
        );
        assert_eq!(s.figures.len(), DEFAULT_FIGURES.len());
        assert_eq!(s.chart.unwrap().x, "cost");
    }

    #[test]
    fn errors_say_where_and_what() {
        let e = Sweep::parse("parameters: {a: [1]}\nrun: storm x\nbogus: 1\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("s.yaml:3:1:") && e.contains("unknown field `bogus`"),
            "{e}"
        );
        let e = Sweep::parse("parameters: {a: [1]}\nrun: storm {{b}}\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("{{b}} is not a parameter; known: {{a}}"), "{e}");
        let e = Sweep::parse("parameters: {a: [1]}\nrun: rm -rf /\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("throng command"), "{e}");
        let e = Sweep::parse("parameters: {a: [1]}\nrun: storm x\nfigures: [nope.p50]\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("figures"), "{e}");
        let e = Sweep::parse("parameters: [1, 2]\nrun: storm x\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.yaml:1:"), "{e}");
    }
}
