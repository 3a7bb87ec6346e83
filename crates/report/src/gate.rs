//! The gate of `throng compare --fail-on RULE`: rules on the change of a
//! compared figure, failing only when the change is also significant.
//!
//! ```text
//!  "p99 > +10%" ── Rule::parse ──► Rule ─┐
//!                                        ├─ evaluate ──► Gate { rules: [Judged], mixed }
//!  Comparison (any two sides) ───────────┘      │  figure A, B; change; test
//!                                               ▼
//!                       failed | held | not significant (crossed, but noise)
//! ```
//!
//! A rule names a figure, how its change is measured and the limit:
//! `METRIC[{tag:value}]: STAT OP CHANGE` as `--threshold` writes its metrics
//! (`response{target:/login}: p(95) > +15%`), or a short form: a statistic of
//! the headline phase (`p99 > +10%`), `rps`/`throughput` (`rps < -20%`),
//! `errors` or `check_failed` (`errors > +1pt`). The rule *fails* when the
//! change is OP the limit and the change is significant by compare's own
//! test: the bootstrap and Mann–Whitney test over runs or seconds for
//! durations and throughput (the existing tests where they exist), the
//! two-proportion z-test for error rates. A figure missing on either side
//! is an error ([`GateError`]): a gate never passes for want of data.

use serde::Serialize;
use throng_metrics::{Hist, TagStats};
use throng_result::RunResult;

use crate::compare::{self, Basis, Comparison, Side, Test, Unit, Verdict};
use crate::format::clip;
use crate::stats;

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
    fn holds(self, x: f64, limit: f64) -> bool {
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
    fn of(self, h: &Hist) -> Option<f64> {
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
    fn value(self) -> f64 {
        match self {
            Limit::Relative(v) | Limit::Points(v) | Limit::Micros(v) | Limit::PerSecond(v) => v,
        }
    }

    fn unit_name(self) -> &'static str {
        match self {
            Limit::Relative(_) => "percent",
            Limit::Points(_) => "points",
            Limit::Micros(_) => "micros",
            Limit::PerSecond(_) => "per_second",
        }
    }

    /// A change measured as this limit is, for people.
    fn show(self, v: f64) -> String {
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

/// A rule that cannot be judged on these two sides: a figure one side does
/// not have. Refused, never held.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateError {
    /// The figure is missing (no samples, no such target or step) on a side.
    Missing {
        /// The rule as written.
        rule: String,
        /// Which side lacks what, and what it has.
        why: String,
    },
}

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateError::Missing { rule, why } => write!(
                f,
                "'{}': {why}; a rule on a figure a side lacks can neither hold nor fail: fix the rule or the runs",
                throng_plan::one_line(rule)
            ),
        }
    }
}

impl std::error::Error for GateError {}

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

/// What a rule concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The change is beyond the limit and significant: the gate fails.
    Failed,
    /// The change is within the limit.
    Held,
    /// The change is beyond the limit but not significant (or significant
    /// the other way): held, and said.
    NotSignificant,
}

impl Status {
    /// As printed.
    pub fn name(self) -> &'static str {
        match self {
            Status::Failed => "failed",
            Status::Held => "held",
            Status::NotSignificant => "not significant",
        }
    }
}

/// How a rule's change was tested.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Significance {
    /// `bootstrap_mann_whitney` (medians over runs or seconds) or
    /// `two_proportion` (a z-test of the sides' counts).
    pub method: &'static str,
    /// What the bootstrap's values were (None for two proportions).
    pub basis: Option<Basis>,
    /// Two-sided p-value (None: a side had too few values).
    pub p_value: Option<f64>,
    /// Bootstrap interval of B − A, in the figure's unit.
    pub interval: Option<[f64; 2]>,
    /// The test's conclusion, as compare's tests say it.
    pub verdict: Verdict,
    /// True when the test's difference points the way the figure moved.
    pub same_direction: bool,
}

/// One rule, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judged {
    /// As written.
    pub rule: String,
    /// The figure, as the report names it (`latency p99`,
    /// `response{target:/login} p95`, `errors (%)`).
    pub figure: String,
    /// The figure's unit.
    pub unit: Unit,
    /// A's value.
    pub a: f64,
    /// B's value.
    pub b: f64,
    /// The change in the limit's unit; None when it has no finite value
    /// (relative to an A of 0).
    #[serde(serialize_with = "finite")]
    pub change: f64,
    /// The limit.
    pub limit: f64,
    /// How the change and the limit are measured: percent, points, micros,
    /// per_second.
    pub limit_unit: &'static str,
    /// The comparison, as written.
    pub op: &'static str,
    /// True when the change is OP the limit.
    pub exceeded: bool,
    /// The test of the change.
    pub test: Significance,
    /// The conclusion.
    pub status: Status,
    #[serde(skip)]
    change_text: String,
}

fn finite<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    (if v.is_finite() { Some(*v) } else { None }).serialize(s)
}

/// Every rule judged on one comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gate {
    /// `failed` when any rule failed, else `passed`.
    pub verdict: &'static str,
    /// The rules in the order given.
    pub rules: Vec<Judged>,
    /// How the sides' plans differ (empty: the same plan).
    pub mixed: Vec<String>,
    /// The sides' plans differ and `--allow-mixed` compared them anyway.
    pub allow_mixed: bool,
}

impl Gate {
    /// True when a rule failed.
    pub fn failed(&self) -> bool {
        self.rules.iter().any(|r| r.status == Status::Failed)
    }

    fn count(&self, s: Status) -> usize {
        self.rules.iter().filter(|r| r.status == s).count()
    }

    /// The verdict line: `GATE FAILED: 1 of 3 rules failed; 2 held (1 of
    /// them exceeds its limit but is not significant)`.
    pub fn headline(&self) -> String {
        let n = self.rules.len();
        let failed = self.count(Status::Failed);
        let noise = self.count(Status::NotSignificant);
        let held = n - failed;
        let noise_text = match noise {
            0 => String::new(),
            1 if held == 1 => " (it exceeds its limit but is not significant)".to_string(),
            1 => " (1 of them exceeds its limit but is not significant)".to_string(),
            k => format!(" ({k} of them exceed their limits but are not significant)"),
        };
        if failed > 0 {
            let rest = if held > 0 {
                format!("; {held} held{noise_text}")
            } else {
                String::new()
            };
            format!(
                "GATE FAILED: {failed} of {} failed{rest}",
                throng_plan::count(n as u64, "rule")
            )
        } else {
            format!(
                "GATE PASSED: {} held{noise_text}",
                if n == 1 {
                    "the rule".to_string()
                } else {
                    format!("all {n} rules")
                }
            )
        }
    }

    /// What the line of one rule says after its status: the figure, A → B,
    /// the change, the test.
    pub fn line(r: &Judged) -> String {
        let t = &r.test;
        let p = match t.p_value {
            Some(p) if p < 0.001 => "p < 0.001".to_string(),
            Some(p) => format!("p {p:.3}"),
            None => "too few values to test".to_string(),
        };
        let over = match t.basis {
            Some(Basis::Runs) => ", over runs",
            Some(Basis::Seconds) => ", over seconds",
            None => "",
        };
        let tested = match (r.status, t.verdict, t.same_direction) {
            (Status::NotSignificant, Verdict::Significant, false) => {
                format!("exceeds the limit, but the test finds the opposite direction ({p}{over})")
            }
            (Status::NotSignificant, Verdict::Negligible, _) => {
                format!("exceeds the limit but not significant: smaller than --min-effect ({p}{over})")
            }
            (Status::NotSignificant, ..) => format!("exceeds the limit but not significant ({p}{over})"),
            (_, v, _) => format!("{} ({p}{over})", v.name()),
        };
        format!(
            "{} {} → {}, {}: {tested}",
            r.figure,
            compare::value(r.unit, r.a),
            compare::value(r.unit, r.b),
            r.change_text,
        )
    }
}

/// How the sides' plans differ in what makes their figures comparable: the
/// command, target, method, open or closed loop ([`throng_result::Plan::differences`]),
/// and the rate, concurrency, streams, HTTP version, keep-alive, the
/// storm's shape and protocol, a scenario's file and executors. Counts and
/// durations may differ. Each side's runs are checked against A's first.
pub fn mixed_plans(a: &Side, b: &Side) -> Vec<String> {
    let Some(first) = a.runs.first() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (label, side) in [(&a.label, a), (&b.label, b)] {
        for r in &side.runs {
            for d in plan_differences(&first.plan, &r.plan) {
                let text = format!("{d} ({} vs {})", clip(&a.label, 40), clip(label, 40));
                if !out.contains(&text) {
                    out.push(text);
                }
            }
        }
    }
    out
}

fn plan_differences(a: &throng_result::Plan, b: &throng_result::Plan) -> Vec<String> {
    use throng_result::Plan;
    let mut out = a.differences(b);
    if a.command() != b.command() {
        return out;
    }
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what} {x} vs {y}"));
        }
    };
    match (a, b) {
        (Plan::Http(x), Plan::Http(y)) => {
            let rate = |p: &throng_plan::HttpPlan| match p.load {
                throng_plan::Load::Open { rate } => format!("{rate}/s"),
                throng_plan::Load::Closed => "none (closed loop)".to_string(),
            };
            if x.is_open_loop() && y.is_open_loop() {
                differ("rate", rate(x), rate(y));
            }
            differ("connections", x.connections.to_string(), y.connections.to_string());
            differ("HTTP version", x.http.label().to_string(), y.http.label().to_string());
            if !x.http.is_http1() || !y.http.is_http1() {
                differ("streams", x.streams.to_string(), y.streams.to_string());
            }
            differ(
                "keep-alive",
                if x.keepalive { "on" } else { "off" }.to_string(),
                if y.keepalive { "on" } else { "off" }.to_string(),
            );
            differ(
                "targets",
                x.targets.len().max(1).to_string(),
                y.targets.len().max(1).to_string(),
            );
            differ(
                "gRPC call",
                x.grpc.as_ref().map_or("none".to_string(), |g| g.call.clone()),
                y.grpc.as_ref().map_or("none".to_string(), |g| g.call.clone()),
            );
        }
        (Plan::Storm(x), Plan::Storm(y)) => {
            differ("connections", x.connections.to_string(), y.connections.to_string());
            let rate = |r: Option<f64>| r.map_or("unlimited".to_string(), |r| format!("{r}/s"));
            differ("connection rate", rate(x.rate), rate(y.rate));
            let most = |m: Option<u64>| m.map_or("unlimited".to_string(), |m| m.to_string());
            differ("at most at once", most(x.max_concurrent), most(y.max_concurrent));
            differ("hold", format!("{:?}", x.hold), format!("{:?}", y.hold));
            differ("HTTP version", x.http.label().to_string(), y.http.label().to_string());
            // The protocol's steps may hold credentials: say only that they differ.
            if x.protocol != y.protocol || x.request.is_some() != y.request.is_some() {
                out.push("the protocol spoken after connecting".to_string());
            }
        }
        (Plan::Run(x), Plan::Run(y)) => {
            differ("scenario file", x.file.clone(), y.file.clone());
            let names = |p: &throng_scenario::ScenarioPlan| {
                p.scenarios
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            differ("scenarios", names(x), names(y));
            differ(
                "HTTP version",
                x.target.http.label().to_string(),
                y.target.http.label().to_string(),
            );
            for (s, t) in x.scenarios.iter().zip(&y.scenarios) {
                if s.name == t.name && s.executor != t.executor {
                    out.push(format!("scenario {}'s executor (VUs, rate or stages)", s.name));
                }
            }
        }
        _ => {}
    }
    out
}

/// Judges every rule on `c`. A rule on a figure that either side lacks is
/// an error, never a held rule.
pub fn evaluate(c: &Comparison, rules: &[Rule], allow_mixed: bool) -> Result<Gate, GateError> {
    let rules = rules.iter().map(|r| judge(c, r)).collect::<Result<Vec<_>, _>>()?;
    let failed = rules.iter().any(|r| r.status == Status::Failed);
    Ok(Gate {
        verdict: if failed { "failed" } else { "passed" },
        rules,
        mixed: c.mixed.clone(),
        allow_mixed: allow_mixed && !c.mixed.is_empty(),
    })
}

/// A figure of both sides and how to test its change.
struct Found {
    figure: String,
    unit: Unit,
    a: f64,
    b: f64,
    test: Significance,
}

fn judge(c: &Comparison, rule: &Rule) -> Result<Judged, GateError> {
    let f = find(c, rule)?;
    let diff = f.b - f.a;
    let change = match rule.limit {
        Limit::Relative(_) => match (f.a == 0.0, diff == 0.0) {
            (_, true) => 0.0,
            (true, false) => diff.signum() * f64::INFINITY,
            (false, false) => diff / f.a * 100.0,
        },
        Limit::Points(_) | Limit::Micros(_) | Limit::PerSecond(_) => diff,
    };
    let limit = rule.limit.value();
    let exceeded = rule.op.holds(change, limit);
    let significant = f.test.verdict == Verdict::Significant && f.test.same_direction && diff != 0.0;
    let status = match (exceeded, significant) {
        (false, _) => Status::Held,
        (true, true) => Status::Failed,
        (true, false) => Status::NotSignificant,
    };
    Ok(Judged {
        rule: rule.text.clone(),
        figure: f.figure,
        unit: f.unit,
        a: f.a,
        b: f.b,
        change,
        limit,
        limit_unit: rule.limit.unit_name(),
        op: rule.op.symbol(),
        exceeded,
        test: f.test,
        status,
        change_text: rule.limit.show(change),
    })
}

fn missing(rule: &Rule, why: String) -> GateError {
    GateError::Missing {
        rule: rule.text.clone(),
        why,
    }
}

fn sides(c: &Comparison) -> [(&str, &Side, &RunResult); 2] {
    [("A", &c.a, &c.merged_a), ("B", &c.b, &c.merged_b)]
}

fn find(c: &Comparison, rule: &Rule) -> Result<Found, GateError> {
    let tag_key = rule.filter.as_ref().map(|(k, v)| format!("{k}:{v}"));
    match &rule.subject {
        Subject::Duration(phase, stat) => {
            let phase = match phase {
                Some(p) => p.clone(),
                None => headline(c).ok_or_else(|| {
                    missing(
                        rule,
                        "the sides have no headline phase in common (latency; connect for storms)".into(),
                    )
                })?,
            };
            // `response` of a tag, or of every request of a scenario.
            let tagged = tag_key
                .clone()
                .or_else(|| (phase == "response" && has_tag(c, "")).then(String::new));
            match tagged {
                Some(key) => duration_of_tag(c, rule, &key, *stat),
                None => duration_of_phase(c, rule, &phase, *stat),
            }
        }
        Subject::Throughput => match &tag_key {
            None => {
                let name = compare::throughput_name(&c.merged_a);
                let test = c
                    .tests
                    .iter()
                    .find(|t| t.name == name)
                    .cloned()
                    .unwrap_or_else(|| c.test_values(name, Unit::PerSecond, Vec::new(), Vec::new()));
                Ok(Found {
                    figure: name.to_string(),
                    unit: Unit::PerSecond,
                    a: compare::throughput(&c.merged_a),
                    b: compare::throughput(&c.merged_b),
                    test: bootstrap(&test, 0.0),
                })
            }
            Some(key) => {
                let [ta, tb] = tags_of(c, rule, key)?;
                let ok = |t: &TagStats| t.requests.saturating_sub(t.failed);
                let per_second = |t: &TagStats, r: &RunResult| throng_result::per_second(ok(t), r.duration_s);
                let (a, b) = (per_second(ta, &c.merged_a), per_second(tb, &c.merged_b));
                let values = |side: &Side| -> Vec<f64> {
                    side.runs
                        .iter()
                        .flat_map(|r| match c.basis {
                            Basis::Runs => tag(r, key).map(|t| per_second(t, r)).into_iter().collect::<Vec<_>>(),
                            Basis::Seconds => {
                                let limit = compare::full_second_limit(r);
                                tag(r, key)
                                    .map(|t| {
                                        t.series
                                            .iter()
                                            .filter(|s| s.second < limit)
                                            .map(|s| s.requests.saturating_sub(s.failed) as f64)
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            }
                        })
                        .collect()
                };
                let figure = format!("rps{{{}}}", key);
                let test = c.test_values(&figure, Unit::PerSecond, values(&c.a), values(&c.b));
                Ok(Found {
                    test: bootstrap(&test, b - a),
                    figure,
                    unit: Unit::PerSecond,
                    a,
                    b,
                })
            }
        },
        Subject::Errors | Subject::CheckFailed => {
            let errors = rule.subject == Subject::Errors;
            let counts: [(u64, u64); 2] = match (&tag_key, errors) {
                (None, true) => [&c.merged_a, &c.merged_b].map(|r| {
                    let o = r.unit_outcomes();
                    (o.failed(), o.ended())
                }),
                (key, _) => {
                    let key = key.clone().unwrap_or_default();
                    if key.is_empty() && !has_tag(c, "") {
                        return Err(missing(
                            rule,
                            "check_failed is kept for scenarios and http runs with several targets; these runs \
                             have no per-request checks"
                                .into(),
                        ));
                    }
                    let [ta, tb] = tags_of(c, rule, &key)?;
                    [ta, tb].map(|t| (if errors { t.failed } else { t.unexpected_status }, t.requests))
                }
            };
            for ((label, _, _), (_, n)) in sides(c).iter().zip(&counts) {
                if *n == 0 {
                    return Err(missing(
                        rule,
                        format!("side {label} ended no {}: it has no error rate", unit_name(c)),
                    ));
                }
            }
            let [(xa, na), (xb, nb)] = counts;
            let pct = |x: u64, n: u64| x as f64 / n as f64 * 100.0;
            let (a, b) = (pct(xa, na), pct(xb, nb));
            let p = stats::two_proportion(xa, na, xb, nb);
            let alpha = 1.0 - c.options.confidence;
            let rel = if a == 0.0 { None } else { Some((b - a) / a) };
            let verdict = match p {
                Some(p) if p < alpha && rel.is_none_or(|r| r.abs() >= c.options.min_effect) => Verdict::Significant,
                Some(p) if p < alpha => Verdict::Negligible,
                _ => Verdict::NotSignificant,
            };
            let name = if errors { "errors (%)" } else { "check_failed (%)" };
            Ok(Found {
                figure: match &tag_key {
                    Some(k) => format!("{}{{{k}}} (%)", name.trim_end_matches(" (%)")),
                    None => name.to_string(),
                },
                unit: Unit::Percent,
                a,
                b,
                test: Significance {
                    method: "two_proportion",
                    basis: None,
                    p_value: p,
                    interval: None,
                    verdict,
                    same_direction: true,
                },
            })
        }
    }
}

fn unit_name(c: &Comparison) -> &'static str {
    match c.merged_a.unit() {
        throng_result::Unit::Connections => "connections",
        throng_result::Unit::Requests => "requests",
    }
}

/// The first headline phase both sides have.
fn headline(c: &Comparison) -> Option<String> {
    let b = compare::headline_phases(&c.merged_b);
    compare::headline_phases(&c.merged_a)
        .into_iter()
        .find(|p| b.contains(p))
        .map(str::to_string)
}

fn tag<'a>(r: &'a RunResult, key: &str) -> Option<&'a TagStats> {
    r.measurements.scenario.as_ref()?.tags.get(key)
}

fn has_tag(c: &Comparison, key: &str) -> bool {
    tag(&c.merged_a, key).is_some() && tag(&c.merged_b, key).is_some()
}

/// Both sides' figures of a tag, or which side lacks it and what it has.
fn tags_of<'a>(c: &'a Comparison, rule: &Rule, key: &str) -> Result<[&'a TagStats; 2], GateError> {
    let one = |(label, side, merged): (&str, &Side, &'a RunResult)| -> Result<&'a TagStats, GateError> {
        tag(merged, key).ok_or_else(|| {
            let (kind, name) = key.split_once(':').unwrap_or((key, ""));
            let known: Vec<&str> = merged
                .measurements
                .scenario
                .iter()
                .flat_map(|s| s.tags.keys())
                .filter_map(|k| k.strip_prefix(kind).and_then(|r| r.strip_prefix(':')))
                .take(12)
                .collect();
            let has = if known.is_empty() {
                format!("it keeps no {kind}: figures")
            } else {
                format!("its {kind}s: {}", known.join(", "))
            };
            missing(
                rule,
                format!("side {label} ({}) has no {kind} '{name}'; {has}", clip(&side.label, 40)),
            )
        })
    };
    let [a, b] = sides(c);
    Ok([one(a)?, one(b)?])
}

fn duration_of_phase(c: &Comparison, rule: &Rule, phase: &str, stat: Stat) -> Result<Found, GateError> {
    let mut values = [0.0; 2];
    for (i, (label, side, merged)) in sides(c).into_iter().enumerate() {
        let v = merged.measurements.phase(phase).and_then(|h| stat.of(h));
        values[i] = v.ok_or_else(|| {
            let phases: Vec<&str> = merged
                .measurements
                .phases
                .iter()
                .filter(|(_, h)| !h.is_empty())
                .map(|(k, _)| k.as_str())
                .collect();
            missing(
                rule,
                format!(
                    "side {label} ({}) has no {phase} samples; its phases: {}",
                    clip(&side.label, 40),
                    if phases.is_empty() {
                        "none".to_string()
                    } else {
                        phases.join(", ")
                    }
                ),
            )
        })?;
    }
    let figure = format!("{phase} {}", stat.name());
    // The comparison's own test when it has one (headline p50 and p99).
    let test = match c.tests.iter().find(|t| t.name == figure) {
        Some(t) => t.clone(),
        None => {
            let per = |side: &Side| -> Vec<f64> {
                side.runs
                    .iter()
                    .flat_map(|r| match c.basis {
                        Basis::Runs => r
                            .measurements
                            .phase(phase)
                            .and_then(|h| stat.of(h))
                            .into_iter()
                            .collect(),
                        Basis::Seconds => compare::full_seconds(r)
                            .filter_map(|p| p.phase(phase).ok())
                            .filter_map(|h| stat.of(&h))
                            .collect::<Vec<_>>(),
                    })
                    .collect()
            };
            c.test_values(&figure, Unit::Micros, per(&c.a), per(&c.b))
        }
    };
    Ok(Found {
        test: bootstrap(&test, values[1] - values[0]),
        figure,
        unit: Unit::Micros,
        a: values[0],
        b: values[1],
    })
}

fn duration_of_tag(c: &Comparison, rule: &Rule, key: &str, stat: Stat) -> Result<Found, GateError> {
    let [ta, tb] = tags_of(c, rule, key)?;
    let mut values = [0.0; 2];
    for (i, ((label, side, _), t)) in sides(c).into_iter().zip([ta, tb]).enumerate() {
        values[i] = stat.of(&t.response).ok_or_else(|| {
            missing(
                rule,
                format!(
                    "side {label} ({}) has no response samples{}",
                    clip(&side.label, 40),
                    if key.is_empty() {
                        String::new()
                    } else {
                        format!(" for {key}")
                    }
                ),
            )
        })?;
    }
    let per = |side: &Side| -> Vec<f64> {
        side.runs
            .iter()
            .flat_map(|r| match c.basis {
                Basis::Runs => tag(r, key)
                    .and_then(|t| stat.of(&t.response))
                    .into_iter()
                    .collect::<Vec<_>>(),
                Basis::Seconds => {
                    let limit = compare::full_second_limit(r);
                    tag(r, key)
                        .map(|t| {
                            t.series
                                .iter()
                                .filter(|s| s.second < limit)
                                .filter_map(|s| s.response.decode().ok())
                                .filter_map(|h| stat.of(&h))
                                .collect()
                        })
                        .unwrap_or_default()
                }
            })
            .collect()
    };
    let figure = if key.is_empty() {
        format!("response {}", stat.name())
    } else {
        format!("response{{{key}}} {}", stat.name())
    };
    let test = c.test_values(&figure, Unit::Micros, per(&c.a), per(&c.b));
    Ok(Found {
        test: bootstrap(&test, values[1] - values[0]),
        figure,
        unit: Unit::Micros,
        a: values[0],
        b: values[1],
    })
}

/// A bootstrap test as a rule's significance; `diff` is the figure's own
/// change (0: take the test's).
fn bootstrap(t: &Test, diff: f64) -> Significance {
    let diff = if diff == 0.0 { t.diff } else { diff };
    Significance {
        method: "bootstrap_mann_whitney",
        basis: Some(t.basis),
        p_value: t.mann_whitney.map(|m| m.p_value),
        interval: t.interval.map(|i| [i.low, i.high]),
        verdict: t.verdict,
        same_direction: t.diff.signum() == diff.signum() && t.diff != 0.0,
    }
}

/// `95`, `99.9`: a number without trailing zeros.
fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Rule {
        Rule::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn bad(text: &str, column: usize, says: &str) {
        match Rule::parse(text) {
            Ok(r) => panic!("{text} accepted as {r:?}"),
            Err(e) => {
                assert!(e.message.contains(says), "{text}: {e}");
                assert_eq!(e.column, column, "{text}: {e}");
                assert!(e.to_string().contains(&format!("'{text}'")), "{e}");
            }
        }
    }

    #[test]
    fn the_issues_examples_parse() {
        let r = ok("p99 > +10%");
        assert_eq!(r.subject, Subject::Duration(None, Stat::Quantile(99.0)));
        assert_eq!((r.op, r.limit), (Op::Gt, Limit::Relative(10.0)));
        let r = ok("rps < -20%");
        assert_eq!(
            (r.subject, r.op, r.limit),
            (Subject::Throughput, Op::Lt, Limit::Relative(-20.0))
        );
        let r = ok("errors > +1pt");
        assert_eq!((r.subject, r.limit), (Subject::Errors, Limit::Points(1.0)));
        let r = ok("response{target:/login}: p(95) > +15%");
        assert_eq!(
            r.subject,
            Subject::Duration(Some("response".into()), Stat::Quantile(95.0))
        );
        assert_eq!(r.filter, Some(("target".into(), "/login".into())));
        assert_eq!(r.limit, Limit::Relative(15.0));
        let r = ok("p99 > +5ms");
        assert_eq!(r.limit, Limit::Micros(5000.0));
    }

    #[test]
    fn threshold_style_forms_parse() {
        assert_eq!(
            ok("latency: p99.9 >= +250us").subject,
            Subject::Duration(Some("latency".into()), Stat::Quantile(99.9))
        );
        assert_eq!(ok("latency: p99.9 >= +250us").limit, Limit::Micros(250.0));
        assert_eq!(ok("connect: max > +1s").limit, Limit::Micros(1e6));
        assert_eq!(
            ok("wait: avg > +3%").subject,
            Subject::Duration(Some("wait".into()), Stat::Mean)
        );
        assert_eq!(ok("med > +3%").subject, Subject::Duration(None, Stat::Quantile(50.0)));
        let r = ok("errors{step:login}: rate > +50%");
        assert_eq!(
            (r.subject, r.filter),
            (Subject::Errors, Some(("step".into(), "login".into())))
        );
        assert_eq!(ok("throughput <= -50/s").limit, Limit::PerSecond(-50.0));
        assert_eq!(ok("rps{target:/a} < -10").filter, Some(("target".into(), "/a".into())));
        assert_eq!(ok("check_failed > +0.5pt").subject, Subject::CheckFailed);
        // A target name may hold what the grammar uses.
        let r = ok("response{target:/a?x=<1>}: p50 > +1%");
        assert_eq!(r.filter, Some(("target".into(), "/a?x=<1>".into())));
    }

    #[test]
    fn mistakes_name_their_column() {
        bad("p99 +10%", 1, "no comparison");
        bad("p99 == +10%", 5, "no comparison");
        bad("p99 > 10%", 7, "needs its sign");
        bad("p99 > +10", 10, "needs a unit");
        bad("p99 > +10pt", 10, "percentage points");
        bad("errors > +1", 12, "pt or %");
        bad("rps < -20ms", 10, "not a unit of throughput");
        bad("p99 > +10% < 3", 12, "one comparison");
        bad("latency > +10%", 8, "needs a statistic");
        bad("latency: p(101) > +1%", 10, "not a statistic");
        bad("nope: p99 > +1%", 1, "not a figure");
        bad("p98x > +1%", 1, "not a figure");
        bad("response{host:x}: p99 > +1%", 10, "not a tag");
        bad("latency{target:/a}: p99 > +1%", 1, "not kept per tag");
        bad("rps: p99 < -1%", 6, "takes no statistic");
        bad("errors: p99 > +1pt", 9, "is a rate");
        bad(" > +1%", 2, "no figure");
        bad("p99 >", 6, "no change");
        bad("p99 > +x%", 8, "not a signed number");
        bad("p99{target:/a} > +1%", 1, "not kept per tag");
    }

    use std::time::{Duration, Instant};
    use throng_metrics::{ErrorClass, Phase, Recorder, Reply};

    /// An http run of one second per entry of `ms`: `ok` requests spread
    /// over the seconds, each taking its second's `ms` (plus a few µs so
    /// that no two runs tie), and `failed` refused ones; open loop at `rate`
    /// when given.
    fn run_of(ms: &[u64], ok: u64, failed: u64, jitter_us: u64, rate: Option<f64>) -> RunResult {
        let t0 = Instant::now();
        let mut rec = Recorder::new(t0);
        let secs = ms.len() as u64;
        for i in 0..ok + failed {
            let ms_at = i * secs * 1000 / (ok + failed);
            let at = t0 + Duration::from_millis(ms_at);
            rec.request_started();
            if i < ok {
                let d = Duration::from_micros(ms[(ms_at / 1000) as usize] * 1000 + jitter_us + i % 7);
                rec.phase(at, Phase::Latency, d);
                let reply = Reply {
                    status: 200,
                    header_bytes: 10,
                    body_bytes: 0,
                };
                rec.request_ok(at, reply, 10);
            } else {
                rec.request_failed(at, ErrorClass::Refused, 0);
            }
        }
        let mut r = crate::test_result(rec.finish(t0 + Duration::from_secs(secs)));
        r.duration_s = secs as f64;
        if let Some(rate) = rate {
            r.plan = throng_result::Plan::Http(
                throng_plan::HttpPlan::from_args(throng_plan::HttpArgs {
                    url: "http://127.0.0.1:8080/".to_string(),
                    rate: Some(rate),
                    cores: 1,
                    ..throng_plan::HttpArgs::default()
                })
                .unwrap(),
            );
        }
        r
    }

    /// Three seconds of `ms` each.
    fn run(ms: u64, ok: u64, failed: u64, jitter_us: u64, rate: Option<f64>) -> RunResult {
        run_of(&[ms; 3], ok, failed, jitter_us, rate)
    }

    fn side(label: &str, runs: Vec<RunResult>) -> Side {
        Side {
            label: label.to_string(),
            sources: vec![format!("{label}.json")],
            runs,
        }
    }

    fn comparison(a: Vec<RunResult>, b: Vec<RunResult>) -> Comparison {
        Comparison::new(side("base", a), side("new", b), crate::compare::Options::default()).unwrap()
    }

    fn judged(c: &Comparison, rule: &str) -> Judged {
        evaluate(c, &[ok(rule)], false).unwrap().rules.remove(0)
    }

    #[test]
    fn a_significant_regression_past_the_limit_fails_and_a_lenient_rule_holds() {
        let c = comparison(
            (0..5).map(|i| run(10, 300, 0, i * 13, None)).collect(),
            (0..5).map(|i| run(20, 300, 0, i * 11, None)).collect(),
        );
        assert_eq!(c.basis, Basis::Runs);
        let r = judged(&c, "p99 > +10%");
        assert_eq!((r.status, r.figure.as_str()), (Status::Failed, "latency p99"), "{r:?}");
        assert!((90.0..110.0).contains(&r.change), "{}", r.change);
        assert_eq!(r.test.verdict, Verdict::Significant);
        // The same change within a lenient limit, or the other way: held.
        assert_eq!(judged(&c, "p99 > +150%").status, Status::Held);
        assert_eq!(judged(&c, "p99 < -10%").status, Status::Held);
        assert_eq!(judged(&c, "p99 > +5ms").status, Status::Failed);
        assert_eq!(judged(&c, "p99 > +15ms").status, Status::Held);
        // A statistic compare has no test of its own gets one.
        let p90 = judged(&c, "latency: p(90) > +10%");
        assert_eq!((p90.status, p90.test.basis), (Status::Failed, Some(Basis::Runs)));
        assert_eq!(p90.test.p_value.map(|p| p < 0.05), Some(true));
        let g = evaluate(&c, &[ok("p99 > +10%"), ok("rps < -20%")], false).unwrap();
        assert!(g.failed());
        assert!(
            g.headline().starts_with("GATE FAILED: 1 of 2 rules failed"),
            "{}",
            g.headline()
        );
        let mut text = Vec::new();
        write_text(&g, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.lines().nth(1).unwrap().trim_start().starts_with("FAILED"),
            "{text}"
        );
        // Every view puts the verdict first.
        let mut c = c;
        c.judge(&[ok("p99 > +10%"), ok("rps < -20%")], false).unwrap();
        let render = |f: fn(&Comparison, &mut dyn std::io::Write) -> std::io::Result<()>| {
            let mut out = Vec::new();
            f(&c, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert!(render(crate::compare::write_text).starts_with("GATE FAILED"));
        let md = render(crate::compare::write_markdown);
        assert!(md.lines().nth(2).unwrap().starts_with("**GATE FAILED**"), "{md}");
        let summary = render(crate::compare::write_summary);
        assert!(
            summary.starts_with("### throng compare: GATE FAILED (base vs new)"),
            "{summary}"
        );
        assert!(
            summary.contains("| **FAILED** | `p99 > +10%` | latency p99 |"),
            "{summary}"
        );
        let json = render(crate::compare::write_json);
        assert!(
            json.starts_with("{\n  \"schema\": \"throng.compare/v1\",\n  \"gate\": {\n    \"verdict\": \"failed\"")
        );
        let junit = render(crate::junit::write_gate);
        assert!(junit.contains(r#"tests="2" failures="1""#), "{junit}");
        assert_eq!(junit.matches("<failure").count(), 1, "{junit}");
    }

    #[test]
    fn a_change_past_the_limit_without_evidence_holds_and_says_so() {
        // One run a side whose seconds overlap: B's worst second is past
        // A's by more than 10%, but its others are not.
        let c = comparison(
            vec![run_of(&[10, 10, 11], 300, 0, 0, None)],
            vec![run_of(&[12, 10, 13], 300, 0, 0, None)],
        );
        assert_eq!(c.basis, Basis::Seconds);
        let g = evaluate(&c, &[ok("p99 > +10%")], false).unwrap();
        let r = &g.rules[0];
        assert!(r.exceeded, "{r:?}");
        assert_eq!(r.status, Status::NotSignificant, "{r:?} {:?}", c.tests);
        assert!(!g.failed());
        assert!(
            Gate::line(r).contains("exceeds the limit but not significant"),
            "{}",
            Gate::line(r)
        );
        assert!(g.headline().starts_with("GATE PASSED"), "{}", g.headline());
    }

    #[test]
    fn error_rates_are_tested_as_two_proportions() {
        let c = comparison(vec![run(10, 1000, 0, 0, None)], vec![run(10, 900, 100, 0, None)]);
        let r = judged(&c, "errors > +1pt");
        assert_eq!((r.status, r.test.method), (Status::Failed, "two_proportion"), "{r:?}");
        assert!((r.change - 10.0).abs() < 1e-9, "{}", r.change);
        assert_eq!(judged(&c, "errors > +20pt").status, Status::Held);
        // From 0%: any relative rise is infinite, and the JSON says null.
        let rel = judged(&c, "errors > +50%");
        assert!(rel.change.is_infinite() && rel.status == Status::Failed, "{rel:?}");
        assert!(serde_json::to_string(&rel).unwrap().contains("\"change\":null"));
        // 1 of 100 against 3 of 100: past +1pt, but noise.
        let c = comparison(vec![run(10, 99, 1, 0, None)], vec![run(10, 97, 3, 0, None)]);
        assert_eq!(judged(&c, "errors > +1pt").status, Status::NotSignificant);
    }

    #[test]
    fn a_figure_a_side_lacks_is_an_error_not_a_pass() {
        let c = comparison(vec![run(10, 300, 0, 0, None)], vec![run(10, 300, 0, 0, None)]);
        for (rule, says) in [
            (
                "response{target:/x}: p(95) > +1%",
                "side A (base) has no target '/x'; it keeps no target: figures",
            ),
            (
                "tls: p99 > +1%",
                "side A (base) has no tls samples; its phases: latency",
            ),
            ("check_failed > +1pt", "no per-request checks"),
            ("rps{step:login} < -1%", "has no step 'login'"),
        ] {
            let e = evaluate(&c, &[ok(rule)], false).unwrap_err();
            assert!(e.to_string().contains(says), "{rule}: {e}");
        }
        // Nothing ended on a side: no error rate to judge.
        let c = comparison(vec![run(10, 300, 0, 0, None)], vec![run(10, 0, 0, 0, None)]);
        let e = evaluate(&c, &[ok("errors > +1pt")], false).unwrap_err();
        assert!(e.to_string().contains("side B ended no requests"), "{e}");
    }

    #[test]
    fn different_rates_or_commands_are_mixed_plans() {
        let same = comparison(
            vec![run(10, 30, 0, 0, Some(100.0))],
            vec![run(10, 30, 0, 0, Some(100.0))],
        );
        assert!(same.mixed.is_empty(), "{:?}", same.mixed);
        let c = comparison(
            vec![run(10, 30, 0, 0, Some(100.0))],
            vec![run(10, 30, 0, 0, Some(200.0))],
        );
        assert_eq!(c.mixed, vec!["rate 100/s vs 200/s (base vs new)".to_string()]);
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("different plans: rate 100/s vs 200/s"))
        );
        let c = comparison(vec![run(10, 30, 0, 0, Some(100.0))], vec![run(10, 30, 0, 0, None)]);
        assert!(
            c.mixed.iter().any(|m| m.contains("open loop vs closed loop")),
            "{:?}",
            c.mixed
        );
        let g = evaluate(&c, &[ok("p99 > +10%")], true).unwrap();
        assert!(g.allow_mixed);
    }

    /// A run with per-target figures: `/a` answers in `ms_a` with
    /// `unexpected` of its 200 requests a status it does not expect, `/b`
    /// always in 1 ms.
    fn targets_run(ms_a: u64, unexpected: u64, jitter_us: u64) -> RunResult {
        let t0 = Instant::now();
        let mut rec = throng_metrics::ScenarioRecorder::new(t0);
        let (all, a, b) = (rec.tag(""), rec.tag("target:/a"), rec.tag("target:/b"));
        for i in 0..200u64 {
            let at = t0 + Duration::from_millis(i * 10);
            let d = Duration::from_micros(ms_a * 1000 + jitter_us + i % 5);
            let expected = i >= unexpected;
            rec.request(at, &[all, a], Some((d, expected)), !expected);
            rec.request(at, &[all, b], Some((Duration::from_millis(1), true)), false);
        }
        let mut r = run(1, 10, 0, 0, None);
        r.duration_s = 2.0;
        r.measurements.scenario = Some(rec.finish(t0 + Duration::from_secs(2)));
        r
    }

    #[test]
    fn a_targets_figures_are_judged_on_their_own() {
        let c = comparison(
            (0..5).map(|i| targets_run(10, 0, i * 3)).collect(),
            (0..5).map(|i| targets_run(15, 40, i * 5)).collect(),
        );
        let r = judged(&c, "response{target:/a}: p(95) > +15%");
        assert_eq!(
            (r.status, r.figure.as_str()),
            (Status::Failed, "response{target:/a} p95"),
            "{r:?}"
        );
        assert_eq!(r.test.basis, Some(Basis::Runs));
        // /b did not change: held, whatever the limit.
        assert_eq!(judged(&c, "response{target:/b}: p(95) > +0%").status, Status::Held);
        // 20% of /a's requests got an unexpected status on B: 20 points.
        let r = judged(&c, "check_failed{target:/a} > +5pt");
        assert_eq!(r.status, Status::Failed, "{r:?}");
        assert!((r.change - 20.0).abs() < 1e-9, "{}", r.change);
        let r = judged(&c, "errors{target:/b} > +0pt");
        assert_eq!((r.status, r.change), (Status::Held, 0.0));
        // /a's ok requests per second fell by a fifth.
        let r = judged(&c, "rps{target:/a} < -10%");
        assert_eq!(
            (r.status, r.figure.as_str()),
            (Status::Failed, "rps{target:/a}"),
            "{r:?}"
        );
        assert_eq!(judged(&c, "rps{target:/a} < -30%").status, Status::Held);
        let e = evaluate(&c, &[ok("response{target:/c}: p50 > +1%")], false).unwrap_err();
        assert!(e.to_string().contains("has no target '/c'; its targets: /a, /b"), "{e}");
    }
}
