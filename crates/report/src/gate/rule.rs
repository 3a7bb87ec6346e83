//! A `--fail-on` rule as written: what it names, how the change is
//! measured, the limit; parsed with the column of any mistake.

use throng_metrics::Hist;

use crate::compare::model::{self as compare, Unit};

/// A rule's comparison: the rule fails when `change OP limit` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// >
    Gt,
    /// >=
    Ge,
    /// <
    Lt,
    /// <=
    Le,
}

impl Op {
    pub(super) fn holds(self, x: f64, limit: f64) -> bool {
        match self {
            Op::Gt => x > limit,
            Op::Ge => x >= limit,
            Op::Lt => x < limit,
            Op::Le => x <= limit,
        }
    }

    /// As written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// How a duration figure's samples are reduced to one number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stat {
    /// A percentile (0–100); `med` is p(50).
    Quantile(f64),
    /// Mean.
    Mean,
    /// Smallest.
    Min,
    /// Largest.
    Max,
}

impl Stat {
    pub(super) fn of(self, h: &Hist) -> Option<f64> {
        if h.is_empty() {
            return None;
        }
        Some(match self {
            Stat::Quantile(p) => h.quantile(p / 100.0) as f64,
            Stat::Mean => h.mean(),
            Stat::Min => h.min() as f64,
            Stat::Max => h.max() as f64,
        })
    }

    /// As compare names it: `p99`, `p99.9`, `mean`.
    pub fn name(self) -> String {
        match self {
            Stat::Quantile(p) => format!("p{}", trim_number(p)),
            Stat::Mean => "mean".to_string(),
            Stat::Min => "min".to_string(),
            Stat::Max => "max".to_string(),
        }
    }
}

/// What a rule is about.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    /// A statistic of a phase's durations; `None`: the headline phase
    /// (`latency`; `connect` for storms). `response` with a tag filter is
    /// that tag's response times.
    Duration(Option<String>, Stat),
    /// Throughput: ok requests (established connections for storms) per
    /// second.
    Throughput,
    /// Failed units of work, percent of those that ended.
    Errors,
    /// Requests answered with a status their step does not expect, percent
    /// of requests (scenarios, and http runs with several targets).
    CheckFailed,
}

/// A rule's limit, in the unit that says how the change is measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// (B − A) / A, percent: `+10%`.
    Relative(f64),
    /// B − A of a percentage, in percentage points: `+1pt`.
    Points(f64),
    /// B − A of a duration, µs: `+5ms`.
    Micros(f64),
    /// B − A of a rate, per second: `-50/s`.
    PerSecond(f64),
}

impl Limit {
    pub(super) fn value(self) -> f64 {
        match self {
            Limit::Relative(v) | Limit::Points(v) | Limit::Micros(v) | Limit::PerSecond(v) => v,
        }
    }

    pub(super) fn unit_name(self) -> &'static str {
        match self {
            Limit::Relative(_) => "percent",
            Limit::Points(_) => "points",
            Limit::Micros(_) => "micros",
            Limit::PerSecond(_) => "per_second",
        }
    }

    /// A change measured as this limit is, for people.
    pub(super) fn show(self, v: f64) -> String {
        let sign = if v > 0.0 { "+" } else { "" };
        match self {
            Limit::Relative(_) if v.is_infinite() => format!("{}∞% (A was 0)", if v > 0.0 { "+" } else { "-" }),
            Limit::Relative(_) => format!("{sign}{v:.1}%"),
            Limit::Points(_) => format!("{sign}{v:.2}pt"),
            Limit::Micros(_) => compare::signed(Unit::Micros, v),
            Limit::PerSecond(_) => compare::signed(Unit::PerSecond, v),
        }
    }
}

/// One `--fail-on` rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// As written.
    pub text: String,
    /// The figure.
    pub subject: Subject,
    /// A tag filter (`target`, `/login`), for figures kept per tag.
    pub filter: Option<(String, String)>,
    /// The comparison.
    pub op: Op,
    /// The limit of the change.
    pub limit: Limit,
}

/// A rule that does not parse: what is wrong and at which column (1-based,
/// in characters) of the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// Where the problem starts.
    pub column: usize,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "'{}' (column {}): {}",
            throng_plan::one_line(&self.rule),
            self.column,
            self.message
        )
    }
}

impl std::error::Error for RuleError {}

/// The tags a request's figures are kept under.
const TAGS: [&str; 5] = ["target", "step", "group", "scenario", "stage"];

/// Statistics written alone (`p99 > +10%`) or after a metric's `:`.
const STATS_HELP: &str = "p50, p90, p99, p99.9, p(N), mean (avg), med, min or max";

fn phase_names() -> Vec<&'static str> {
    throng_metrics::Phase::ALL.iter().map(|p| p.name()).collect()
}

fn metrics_help() -> String {
    format!(
        "durations: {} (with a statistic, e.g. 'latency: p99 > +10%'); rps or throughput; errors; check_failed",
        phase_names().join(", ")
    )
}

impl Rule {
    /// Parses one rule: `p99 > +10%`, `rps < -20%`, `errors > +1pt`,
    /// `response{target:/login}: p(95) > +15%`, `connect: max > +5ms`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let err = |byte: usize, message: String| RuleError {
            rule: text.to_string(),
            column: text[..byte.min(text.len())].chars().count() + 1,
            message,
        };
        // The comparison: the first < or > outside a tag filter.
        let mut depth = 0i32;
        let mut op_at = None;
        for (i, ch) in text.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                '<' | '>' if depth <= 0 => {
                    op_at = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(at) = op_at else {
            let at = text.find(['=', '!']).unwrap_or(0);
            return Err(err(
                at,
                "no comparison: a rule is FIGURE OP CHANGE with OP one of >, >=, <, <=, e.g. 'p99 > +10%' or \
                 'rps < -20%'"
                    .into(),
            ));
        };
        let after = &text[at..];
        let (op, len) = if after.starts_with(">=") {
            (Op::Ge, 2)
        } else if after.starts_with("<=") {
            (Op::Le, 2)
        } else if after.starts_with('>') {
            (Op::Gt, 1)
        } else {
            (Op::Lt, 1)
        };
        let rhs_at = at + len;
        let rhs = &text[rhs_at..];
        if let Some(i) = rhs.find(['<', '>', '=', '!']) {
            return Err(err(
                rhs_at + i,
                "one comparison per rule: >, >=, < or <= (give several --fail-on rules for several limits)".into(),
            ));
        }
        let lhs = &text[..at];
        let (subject, filter) = parse_subject(lhs, &err)?;
        let lead = rhs.len() - rhs.trim_start().len();
        let limit = parse_limit(rhs.trim(), rhs_at + lead, &subject, &err)?;
        Ok(Rule {
            text: text.trim().to_string(),
            subject,
            filter,
            op,
            limit,
        })
    }
}

type ErrAt<'a> = &'a dyn Fn(usize, String) -> RuleError;

/// The figure: `p99`, `rps{target:/a}`, `errors`, `latency: p99`,
/// `response{target:/a}: p(95)`, `errors{step:login}: rate`.
fn parse_subject(lhs: &str, err: ErrAt<'_>) -> Result<(Subject, Option<(String, String)>), RuleError> {
    let start = lhs.len() - lhs.trim_start().len();
    if lhs.trim().is_empty() {
        return Err(err(
            start,
            format!("no figure before the comparison; {}", metrics_help()),
        ));
    }
    // `METRIC[{filter}]: STAT`: the colon after the filter, as --threshold.
    let from = lhs.find('}').map_or(0, |i| i + 1);
    let (metric_part, stat_part) = match lhs[from..].find(':') {
        Some(i) => (&lhs[..from + i], Some((from + i + 1, &lhs[from + i + 1..]))),
        None => (lhs, None),
    };
    let (name, filter) = parse_metric(metric_part, start, err)?;
    let stat = match stat_part {
        Some((at, s)) => {
            let lead = s.len() - s.trim_start().len();
            Some((at + lead, s.trim()))
        }
        None => None,
    };
    let tagged = |subject: Subject, filter: Option<(String, String)>| Ok((subject, filter));
    // A statistic alone: the headline phase.
    if let (Some(alone), None) = (parse_stat(&name), stat) {
        if filter.is_some() {
            return Err(err(
                start,
                format!(
                    "'{name}' alone is the headline phase, which is not kept per tag; write \
                     'response{{tag:value}}: {name} …'"
                ),
            ));
        }
        return tagged(Subject::Duration(None, alone), None);
    }
    match (name.as_str(), stat) {
        ("rps" | "throughput", None) => tagged(Subject::Throughput, filter),
        ("rps" | "throughput", Some((at, _))) => Err(err(
            at,
            format!("{name} takes no statistic: write e.g. '{name} < -20%'"),
        )),
        ("errors" | "check_failed", None) => tagged(rate_subject(&name), filter),
        ("errors" | "check_failed", Some((at, s))) => {
            if s != "rate" {
                return Err(err(
                    at,
                    format!("{name} is a rate: write '{name}: rate > +1pt' or just '{name} > +1pt'"),
                ));
            }
            tagged(rate_subject(&name), filter)
        }
        (phase, Some((at, s))) if phase_names().contains(&phase) => {
            let stat = parse_stat(s).ok_or_else(|| {
                err(
                    at,
                    format!("'{s}' is not a statistic of {phase}'s durations; use {STATS_HELP}"),
                )
            })?;
            if filter.is_some() && phase != "response" {
                return Err(err(
                    start,
                    format!(
                        "{phase} is not kept per tag; figures per target, step, group, scenario or stage are \
                         response, errors, check_failed and rps"
                    ),
                ));
            }
            tagged(Subject::Duration(Some(phase.to_string()), stat), filter)
        }
        (phase, None) if phase_names().contains(&phase) => Err(err(
            start + metric_part.trim().len(),
            format!("{phase} needs a statistic: e.g. '{phase}: p99 > +10%' ({STATS_HELP})"),
        )),
        (other, _) => Err(err(
            start,
            format!("'{other}' is not a figure a rule can name; {}", metrics_help()),
        )),
    }
}

fn rate_subject(name: &str) -> Subject {
    if name == "errors" {
        Subject::Errors
    } else {
        Subject::CheckFailed
    }
}

/// `name` or `name{tag:value}`.
fn parse_metric(text: &str, start: usize, err: ErrAt<'_>) -> Result<(String, Option<(String, String)>), RuleError> {
    let t = text.trim();
    let Some((m, rest)) = t.split_once('{') else {
        return Ok((t.to_string(), None));
    };
    let brace = start + m.len();
    let inner = rest.strip_suffix('}').ok_or_else(|| {
        err(
            brace,
            "a tag filter is written metric{tag:value}, e.g. response{target:/login}".into(),
        )
    })?;
    let (k, v) = inner.split_once(':').ok_or_else(|| {
        err(
            brace,
            "a tag filter is written metric{tag:value}, e.g. response{target:/login}".into(),
        )
    })?;
    let k = k.trim();
    if !TAGS.contains(&k) {
        return Err(err(brace + 1, format!("'{k}' is not a tag; use {}", TAGS.join(", "))));
    }
    if v.trim().is_empty() {
        return Err(err(brace + 1, format!("{k}: needs a name, e.g. {{{k}:/login}}")));
    }
    Ok((m.trim().to_string(), Some((k.to_string(), v.trim().to_string()))))
}

/// `p99`, `p99.9`, `p(95)`, `mean`/`avg`, `med`, `min`, `max`.
fn parse_stat(s: &str) -> Option<Stat> {
    let s = s.trim();
    match s {
        "mean" | "avg" => return Some(Stat::Mean),
        "med" | "median" => return Some(Stat::Quantile(50.0)),
        "min" => return Some(Stat::Min),
        "max" => return Some(Stat::Max),
        _ => {}
    }
    let n = s.strip_prefix("p(").and_then(|r| r.strip_suffix(')')).or_else(|| {
        s.strip_prefix('p')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    })?;
    let p: f64 = n.trim().parse().ok()?;
    (0.0..=100.0).contains(&p).then_some(Stat::Quantile(p))
}

/// `+10%`, `-20%`, `+1pt`, `+5ms`, `-50/s`: signed, in a unit that suits the
/// figure.
fn parse_limit(text: &str, at: usize, subject: &Subject, err: ErrAt<'_>) -> Result<Limit, RuleError> {
    let example = match subject {
        Subject::Duration(..) => "+10% (relative) or +5ms (absolute)",
        Subject::Throughput => "-20% (relative) or -50/s (absolute)",
        Subject::Errors | Subject::CheckFailed => "+1pt (percentage points) or +50% (relative)",
    };
    if text.is_empty() {
        return Err(err(
            at,
            format!("no change after the comparison; give one, e.g. {example}"),
        ));
    }
    let sign = match text.chars().next() {
        Some('+') => 1.0,
        Some('-') => -1.0,
        _ => {
            return Err(err(
                at,
                format!("the change needs its sign, + for a rise or - for a drop: e.g. {example}"),
            ));
        }
    };
    let body = text[1..].trim_start();
    let digits = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, unit) = body.split_at(digits);
    let unit_at = at + (text.len() - body.len()) + digits;
    let value: f64 = number.parse().ok().filter(|v: &f64| v.is_finite()).ok_or_else(|| {
        err(
            at + 1,
            format!("'{text}' is not a signed number with a unit, e.g. {example}"),
        )
    })?;
    let v = sign * value;
    let unit = unit.trim();
    let wrong = |what: &str| err(unit_at, format!("{what}; give e.g. {example}"));
    match (unit, subject) {
        ("%", _) => Ok(Limit::Relative(v)),
        ("pt" | "pts" | "pp", Subject::Errors | Subject::CheckFailed) => Ok(Limit::Points(v)),
        ("pt" | "pts" | "pp", _) => Err(wrong("percentage points (pt) are for error rates")),
        ("" | "/s", Subject::Throughput) => Ok(Limit::PerSecond(v)),
        (_, Subject::Throughput) => Err(wrong(&format!("'{unit}' is not a unit of throughput"))),
        ("", Subject::Duration(..)) => Err(wrong("a duration's change needs a unit (ms, s, us) or %")),
        (u, Subject::Duration(..)) => {
            let d = throng_plan::parse_duration(&format!("{number}{u}"))
                .map_err(|_| wrong(&format!("'{u}' is not a unit of time (us, ms, s, m)")))?;
            Ok(Limit::Micros(sign * d.as_secs_f64() * 1e6))
        }
        ("", _) => Err(wrong("an error rate's change needs a unit: pt or %")),
        (u, _) => Err(wrong(&format!("'{u}' is not a unit of an error rate"))),
    }
}

/// `95`, `99.9`: a number without trailing zeros.
fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
