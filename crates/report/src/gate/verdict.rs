//! What the gate concluded: each rule judged, and the gate's verdict.

use serde::Serialize;

use crate::compare::model::{self as compare, Basis, Unit, Verdict};

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

/// How a rule's change was tested (in the JSON document, `interval` is
/// named with the figure's unit: `interval_us`).
#[derive(Clone, Debug, PartialEq)]
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

/// One rule, judged (in the JSON document, `a` and `b` are named with the
/// figure's unit, `change` and `limit` with the limit's: `a_us`,
/// `change_pct`).
#[derive(Clone, Debug, PartialEq)]
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
    pub(super) change_text: String,
}

/// The suffix of a value in a rule's limit unit (`percent`, `points`,
/// `micros`, `per_second`) in the JSON document's keys.
fn limit_suffix(limit_unit: &str) -> &'static str {
    match limit_unit {
        "percent" => "pct",
        "points" => "points",
        "micros" => "us",
        "per_second" => "per_s",
        _ => "value",
    }
}

impl Serialize for Judged {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (u, l) = (self.unit, limit_suffix(self.limit_unit));
        let finite = |v: f64| v.is_finite().then_some(v);
        let mut m = s.serialize_map(Some(12))?;
        m.serialize_entry("rule", &self.rule)?;
        m.serialize_entry("figure", &self.figure)?;
        m.serialize_entry("unit", &u)?;
        m.serialize_entry(&u.key("a"), &self.a)?;
        m.serialize_entry(&u.key("b"), &self.b)?;
        m.serialize_entry(&format!("change_{l}"), &finite(self.change))?;
        m.serialize_entry(&format!("limit_{l}"), &self.limit)?;
        m.serialize_entry("limit_unit", self.limit_unit)?;
        m.serialize_entry("op", self.op)?;
        m.serialize_entry("exceeded", &self.exceeded)?;
        m.serialize_entry("test", &Tested(&self.test, u))?;
        m.serialize_entry("status", &self.status)?;
        m.end()
    }
}

/// A rule's test, its interval named with the figure's unit.
struct Tested<'a>(&'a Significance, Unit);

impl Serialize for Tested<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let t = self.0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("method", t.method)?;
        m.serialize_entry("basis", &t.basis)?;
        m.serialize_entry("p_value", &t.p_value)?;
        m.serialize_entry(&self.1.key("interval"), &t.interval)?;
        m.serialize_entry("verdict", &t.verdict)?;
        m.serialize_entry("same_direction", &t.same_direction)?;
        m.end()
    }
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
