//! Templates: strings with `{{…}}` parts, compiled once, rendered per
//! request without parsing again.
//!
//! `{{vu}}`, `{{iter}}`, `{{scenario}}`, `{{uuid}}`, `{{random_int A B}}`,
//! `{{random_email}}`, `{{now_ms}}`, `{{env.NAME}}`, `{{setup.NAME}}` (a
//! capture of the file's `setup:` flow), any other name: a variable
//! captured earlier in the iteration, or a column of the data file; and
//! anything else an expression (`{{ number(page) + 1 }}`), evaluated by the
//! same evaluator as `if:`, `until:` and checks.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use throng_plan::{Rng, one_line};

use crate::expr::{self, Expr, Value};

/// One piece of a template.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    Text(String),
    Vu,
    Iter,
    Scenario,
    Uuid,
    RandomInt(i64, i64),
    RandomEmail,
    NowMs,
    Env(String),
    Setup(String),
    Var(String),
    Expr(Box<Expr>),
}

/// A compiled template.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
    source: String,
}

/// What a template reads when rendered.
#[derive(Debug)]
pub struct Context<'a> {
    /// The VU's number, from 1.
    pub vu: u64,
    /// The VU's iteration, from 0.
    pub iter: u64,
    /// The scenario's name.
    pub scenario: &'a str,
    /// The VU's random generator.
    pub rng: &'a mut Rng,
    /// Captured variables and the data row's columns.
    pub vars: &'a HashMap<String, String>,
    /// The environment (for `{{env.NAME}}`).
    pub env: &'a HashMap<String, String>,
    /// What the file's `setup:` flow captured (for `{{setup.NAME}}`).
    pub setup: &'a HashMap<String, String>,
    /// Milliseconds since the Unix epoch, now.
    pub now_ms: u64,
    /// The VU's last response's status (0: none yet), which expressions
    /// read as `status`.
    pub status: u16,
    /// The first expression that failed while rendering (it rendered as
    /// nothing): the caller fails the iteration with it.
    pub failed: Option<String>,
}

impl Template {
    /// Compiles `text`; an error says which `{{…}}` is malformed.
    pub fn compile(text: &str) -> Result<Template, TemplateError> {
        let bad = |fault| TemplateError {
            text: text.to_string(),
            fault,
        };
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find("{{") {
            if i > 0 {
                parts.push(Part::Text(rest[..i].to_string()));
            }
            let after = &rest[i + 2..];
            let end = after.find("}}").ok_or_else(|| bad(TemplateFault::NotClosed))?;
            parts.push(parse_part(after[..end].trim()).map_err(bad)?);
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template {
            parts,
            source: text.to_string(),
        })
    }

    /// A template that renders `text` as it is, `{{` included.
    pub fn literal(text: &str) -> Template {
        Template {
            parts: vec![Part::Text(text.to_string())],
            source: text.to_string(),
        }
    }

    /// The text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// True when the template has no `{{…}}` (renders to itself).
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// Names of variables the template reads (captures or data columns).
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.reads().filter(|n| !is_built_in(n))
    }

    /// Every name the template reads: its variables, and what its
    /// expressions read (built-ins, `env.NAME` and `setup.NAME` included).
    fn reads(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().flat_map(|p| match p {
            Part::Var(n) => vec![n.as_str()],
            Part::Expr(e) => e.variables(),
            _ => Vec::new(),
        })
    }

    /// Renders a template that may read only the environment, once, before
    /// a run (a scenario's target); an error says which part it may not
    /// have, or which variable is not set.
    pub fn render_env(&self, env: &HashMap<String, String>) -> Result<String, EnvRenderError> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Env(n) => match env.get(n) {
                    Some(v) => out.push_str(v),
                    None => return Err(EnvRenderError::Unset { name: n.clone() }),
                },
                _ => {
                    return Err(EnvRenderError::NotEnv {
                        text: self.source.clone(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Names of environment variables the template reads (`{{env.NAME}}`).
    pub fn env_names(&self) -> impl Iterator<Item = &str> {
        let own = self.parts.iter().filter_map(|p| match p {
            Part::Env(n) => Some(n.as_str()),
            _ => None,
        });
        own.chain(self.reads().filter_map(|n| n.strip_prefix("env.")))
    }

    /// Names of the `setup:` flow's captures the template reads
    /// (`{{setup.NAME}}`).
    pub fn setup_names(&self) -> impl Iterator<Item = &str> {
        let own = self.parts.iter().filter_map(|p| match p {
            Part::Setup(n) => Some(n.as_str()),
            _ => None,
        });
        own.chain(self.reads().filter_map(|n| n.strip_prefix("setup.")))
    }

    /// Appends the rendered text to `out`. A variable not set yet renders
    /// as nothing (the plan checked it is defined somewhere before).
    pub fn render_into(&self, cx: &mut Context<'_>, out: &mut String) {
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Vu => {
                    let _ = write!(out, "{}", cx.vu);
                }
                Part::Iter => {
                    let _ = write!(out, "{}", cx.iter);
                }
                Part::Scenario => out.push_str(cx.scenario),
                Part::Uuid => uuid(cx.rng, out),
                Part::RandomInt(a, b) => {
                    let span = (b - a) as u64 + 1;
                    let _ = write!(out, "{}", a + (cx.rng.next_u64() % span) as i64);
                }
                Part::RandomEmail => {
                    let _ = write!(out, "user{:016x}@example.test", cx.rng.next_u64());
                }
                Part::NowMs => {
                    let _ = write!(out, "{}", cx.now_ms);
                }
                Part::Env(n) => out.push_str(cx.env.get(n).map_or("", String::as_str)),
                Part::Setup(n) => out.push_str(cx.setup.get(n).map_or("", String::as_str)),
                Part::Var(n) => out.push_str(cx.vars.get(n).map_or("", String::as_str)),
                Part::Expr(e) => match e.eval(cx) {
                    Ok(v) => {
                        let _ = write!(out, "{v}");
                    }
                    Err(err) => {
                        if cx.failed.is_none() {
                            cx.failed = Some(format!("{{{{{}}}}}: {err}", one_line(&self.source)));
                        }
                    }
                },
            }
        }
    }

    /// The rendered text.
    pub fn render(&self, cx: &mut Context<'_>) -> String {
        let mut s = String::new();
        self.render_into(cx, &mut s);
        s
    }
}

/// A `{{…}}`'s inside: one of the named forms, else an expression.
fn parse_part(inner: &str) -> Result<Part, TemplateFault> {
    match named_part(inner) {
        Ok(p) => Ok(p),
        // `{{vu + 1}}` and `{{ lower(name) }}` are expressions; `{{vu 3}}`
        // or `{{a b}}`, with nothing of one, keep what they said before.
        Err(fault @ (TemplateFault::TakesNoArguments(_) | TemplateFault::Unknown(_))) => {
            const OF_AN_EXPRESSION: [char; 14] =
                ['(', '+', '-', '*', '/', '%', '<', '>', '=', '!', '&', '|', '"', '\''];
            let e = expr::parse(inner).map_err(|e| {
                if inner.contains(OF_AN_EXPRESSION) {
                    TemplateFault::Expression { col: e.col, msg: e.msg }
                } else {
                    fault
                }
            })?;
            if e.calls("json") {
                return Err(TemplateFault::Json);
            }
            Ok(Part::Expr(Box::new(e)))
        }
        Err(other) => Err(other),
    }
}

/// The named forms of a `{{…}}`.
fn named_part(inner: &str) -> Result<Part, TemplateFault> {
    let mut words = inner.split_whitespace();
    let head = words.next().ok_or(TemplateFault::Empty)?;
    let args: Vec<&str> = words.collect();
    let no_args = |p: Part| {
        if args.is_empty() {
            Ok(p)
        } else {
            Err(TemplateFault::TakesNoArguments(head.to_string()))
        }
    };
    match head {
        "vu" => no_args(Part::Vu),
        "iter" => no_args(Part::Iter),
        "scenario" => no_args(Part::Scenario),
        "uuid" => no_args(Part::Uuid),
        "random_email" => no_args(Part::RandomEmail),
        "now_ms" => no_args(Part::NowMs),
        "random_int" => {
            let bad = || TemplateFault::RandomInt;
            let [a, b] = args.as_slice() else { return Err(bad()) };
            let (a, b): (i64, i64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a > b || b.checked_sub(a).is_none_or(|d| d == i64::MAX) {
                return Err(bad());
            }
            Ok(Part::RandomInt(a, b))
        }
        env if env.starts_with("env.") && args.is_empty() => {
            let name = &env[4..];
            if name.is_empty() {
                return Err(TemplateFault::EnvUnnamed);
            }
            if !is_identifier(name) {
                return Err(TemplateFault::EnvName(name.to_string()));
            }
            Ok(Part::Env(name.to_string()))
        }
        setup if setup.starts_with("setup.") && args.is_empty() => {
            let name = &setup[6..];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(TemplateFault::SetupName(name.to_string()));
            }
            Ok(Part::Setup(name.to_string()))
        }
        name if args.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => {
            Ok(Part::Var(name.to_string()))
        }
        other => Err(TemplateFault::Unknown(other.to_string())),
    }
}

/// Why a text is not a template: the text (quoted on one line, control
/// characters escaped) and what is wrong in it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TemplateError {
    /// The template as written.
    pub text: String,
    /// What is wrong in it.
    pub fault: TemplateFault,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&one_line(&format!("'{}': {}", self.text, self.fault)))
    }
}

impl std::error::Error for TemplateError {}

/// What is wrong in a template.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateFault {
    /// A `{{` without `}}`.
    #[error("a {{{{ is not closed by }}}}")]
    NotClosed,
    /// `{{}}`.
    #[error("{{{{}}}} is empty")]
    Empty,
    /// A function that takes no arguments (`vu`, `uuid`, ...) given some.
    #[error("{{{{{0}}}}} takes no arguments")]
    TakesNoArguments(String),
    /// `random_int` without two integers A <= B.
    #[error("{{{{random_int A B}}}} takes two integers, A <= B, e.g. {{{{random_int 1 100}}}}")]
    RandomInt,
    /// `{{env.}}`.
    #[error("{{{{env.}}}} names no variable; write {{{{env.NAME}}}}, e.g. {{{{env.RUN_ID}}}}")]
    EnvUnnamed,
    /// `{{env.NAME}}` with a NAME a shell cannot set.
    #[error(
        "{{{{env.{0}}}}}: '{0}' is not an environment variable name; use letters, digits and _, not starting \
         with a digit, e.g. {{{{env.RUN_ID}}}}"
    )]
    EnvName(String),
    /// `{{setup.NAME}}` with a NAME no capture can have.
    #[error(
        "{{{{setup.{0}}}}}: '{0}' is not a capture name; write {{{{setup.NAME}}}} with the name a step of the \
         setup: flow captures, e.g. {{{{setup.token}}}}"
    )]
    SetupName(String),
    /// Neither a function nor a variable name.
    #[error("{{{{{0}…}}}} is not a function or a variable name")]
    Unknown(String),
    /// An expression that does not parse.
    #[error("at column {col} of the expression: {msg}")]
    Expression {
        /// Where, in characters from 1.
        col: usize,
        /// What is wrong and what to do.
        msg: String,
    },
    /// `json()` in a template.
    #[error("json() reads a response, so only a check's expr: may call it; capture the value and use its name here")]
    Json,
}

/// Why a target's template cannot be filled in from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvRenderError {
    /// `{{env.NAME}}` with NAME not set.
    Unset {
        /// The variable.
        name: String,
    },
    /// A part other than `{{env.NAME}}` (the template as written).
    NotEnv {
        /// The template as written.
        text: String,
    },
}

impl fmt::Display for EnvRenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvRenderError::Unset { name: n } => write!(
                f,
                "{{{{env.{n}}}}} is not set: export {n}=URL, pass --env {n}=URL, or give --target URL"
            ),
            EnvRenderError::NotEnv { text } => write!(
                f,
                "'{}' reads more than the environment: the target is fixed before the first VU starts, so only \
                 {{{{env.NAME}}}} may fill it in",
                one_line(text)
            ),
        }
    }
}

impl std::error::Error for EnvRenderError {}

/// What an expression reads from a VU (in a template, `if:`, `until:`, a
/// check): its variables and the built-ins.
impl expr::Context for Context<'_> {
    fn var(&self, name: &str) -> Option<Value> {
        let cx = self;
        let text = |v: Option<&String>| v.map(|s| Value::Str(s.clone()));
        match name {
            "status" => Some(Value::Num(f64::from(cx.status))),
            "vu" => Some(Value::Num(cx.vu as f64)),
            "iter" => Some(Value::Num(cx.iter as f64)),
            "now_ms" => Some(Value::Num(cx.now_ms as f64)),
            "scenario" => Some(Value::Str(cx.scenario.to_string())),
            _ => match (name.strip_prefix("env."), name.strip_prefix("setup.")) {
                (Some(n), _) => text(cx.env.get(n)),
                (_, Some(n)) => text(cx.setup.get(n)),
                _ => text(cx.vars.get(name)),
            },
        }
    }

    fn random(&mut self, lo: i64, hi: i64) -> i64 {
        // Invariant (the evaluator's): lo <= hi. Spans past 2^53 lose
        // evenness, not bounds.
        let span = (hi as f64 - lo as f64 + 1.0).max(1.0);
        let r = lo as f64 + (self.rng.next_f64() * span).floor();
        (r as i64).clamp(lo, hi)
    }
}

/// Names an expression reads that no capture or column defines.
fn is_built_in(name: &str) -> bool {
    matches!(name, "status" | "vu" | "iter" | "now_ms" | "scenario")
        || name.starts_with("env.")
        || name.starts_with("setup.")
}

/// True for `[A-Za-z_][A-Za-z0-9_]*`: a name a shell can set and export.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A version-4 UUID from `rng`.
fn uuid(rng: &mut Rng, out: &mut String) {
    let (a, b) = (rng.next_u64(), rng.next_u64());
    let a = (a & 0xFFFF_FFFF_FFFF_0FFF) | 0x4000;
    let b = (b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    let _ = write!(
        out,
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFFF,
        b >> 48,
        b & 0xFFFF_FFFF_FFFF
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &str, vars: &[(&str, &str)]) -> String {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let env: HashMap<String, String> = [("HOST".to_string(), "h".to_string())].into();
        let setup: HashMap<String, String> = [("token".to_string(), "t0".to_string())].into();
        let mut rng = Rng::new(1);
        let mut cx = Context {
            vu: 7,
            iter: 3,
            scenario: "s",
            rng: &mut rng,
            vars: &vars,
            env: &env,
            setup: &setup,
            now_ms: 42,
            status: 201,
            failed: None,
        };
        let out = Template::compile(t).unwrap().render(&mut cx);
        match cx.failed {
            Some(e) => format!("failed: {e}"),
            None => out,
        }
    }

    #[test]
    fn expressions_render_and_say_what_they_read() {
        assert_eq!(render("/p/{{ number(page) + 1 }}", &[("page", "4")]), "/p/5");
        assert_eq!(render("{{ upper(name) }}-{{vu * 10}}", &[("name", "ab")]), "AB-70");
        assert_eq!(render("{{ status == 201 }}:{{ iter + vu }}", &[]), "true:10");
        assert_eq!(render("{{ setup.token + '/' + env.HOST }}", &[]), "t0/h");
        assert_eq!(render("{{ missing + 'x' }}", &[]), "x", "unset reads as null");
        // A failing expression renders nothing and says so; what follows renders.
        assert_eq!(
            render("a{{ number(name) }}b", &[("name", "ab")]),
            "failed: {{a{{ number(name) }}b}}: a text of 2 characters is not a number"
        );
        let t = Template::compile("{{ lower(user) + env.SUFFIX + setup.tenant + vu }}").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["user"]);
        assert_eq!(t.env_names().collect::<Vec<_>>(), ["SUFFIX"]);
        assert_eq!(t.setup_names().collect::<Vec<_>>(), ["tenant"]);
        assert!(!t.is_literal());
        for (t, why) in [
            ("{{ 1 + }}", "at column"),
            ("{{ nope(1) }}", "unknown function `nope`"),
            ("{{ 'open }}", "not closed"),
            ("{{ json('/a') }}", "only a check's expr:"),
        ] {
            let e = Template::compile(t).unwrap_err().to_string();
            assert!(e.contains(why), "{t}: {e}");
        }
    }

    #[test]
    fn renders_every_function() {
        assert_eq!(
            render("/u/{{vu}}/{{iter}}/{{scenario}}/{{env.HOST}}/{{now_ms}}", &[]),
            "/u/7/3/s/h/42"
        );
        assert_eq!(render("Bearer {{token}}", &[("token", "abc")]), "Bearer abc");
        assert_eq!(
            render("{{setup.token}}/{{ setup.token }}", &[("token", "abc")]),
            "t0/t0"
        );
        assert_eq!(
            Template::compile("{{setup.a}}{{setup.b}}")
                .unwrap()
                .setup_names()
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(matches!(
            Template::compile("{{setup.}}").unwrap_err().fault,
            TemplateFault::SetupName(_)
        ));
        let n: i64 = render("{{random_int 5 9}}", &[]).parse().unwrap();
        assert!((5..=9).contains(&n));
        let id = render("{{uuid}}", &[]);
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4", "version 4: {id}");
        assert!(render("{{random_email}}", &[]).ends_with("@example.test"));
        assert!(Template::compile("plain").unwrap().is_literal());
        let t = Template::compile("{{env.A}}-{{vu}}-{{ env._b2 }}-{{env.A}}").unwrap();
        assert_eq!(t.env_names().collect::<Vec<_>>(), ["A", "_b2", "A"]);
    }

    #[test]
    fn env_only_templates_render_once_or_say_what_is_missing() {
        let env: HashMap<String, String> = [("BASE".to_string(), "http://127.0.0.1:8080".to_string())].into();
        let t = Template::compile("{{env.BASE}}/api").unwrap();
        assert_eq!(t.render_env(&env).unwrap(), "http://127.0.0.1:8080/api");
        let e = Template::compile("{{ env.HOST }}")
            .unwrap()
            .render_env(&env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("{{env.HOST}} is not set") && e.contains("--env HOST=URL"),
            "{e}"
        );
        let e = Template::compile("http://h/{{vu}}")
            .unwrap()
            .render_env(&env)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "'http://h/{{vu}}' reads more than the environment: the target is fixed before the first VU starts, \
             so only {{env.NAME}} may fill it in"
        );
    }

    #[test]
    fn malformed_templates_say_why() {
        for (t, why) in [
            ("{{vu", "not closed"),
            ("{{}}", "empty"),
            ("{{random_int 9 1}}", "A <= B"),
            ("{{vu 1}}", "no arguments"),
            ("{{a b}}", "not a function"),
            ("{{env.}}", "{{env.}} names no variable"),
            ("{{ env. }}", "names no variable"),
            ("{{env.MY-VAR}}", "'MY-VAR' is not an environment variable name"),
            ("{{env.1X}}", "not starting with a digit"),
            ("{{env.A.B}}", "'A.B' is not"),
        ] {
            let e = Template::compile(t).unwrap_err().to_string();
            assert!(e.contains(why), "{t}: {e}");
        }
    }

    /// The typed errors say what the strings said, byte for byte, on one line.
    #[test]
    fn template_errors_keep_their_text() {
        let said = |t: &str| Template::compile(t).unwrap_err().to_string();
        assert_eq!(said("a {{vu"), "'a {{vu': a {{ is not closed by }}");
        assert_eq!(said("{{}}"), "'{{}}': {{}} is empty");
        assert_eq!(said("{{vu 1}}"), "'{{vu 1}}': {{vu}} takes no arguments");
        assert_eq!(
            said("{{random_int 9 1}}"),
            "'{{random_int 9 1}}': {{random_int A B}} takes two integers, A <= B, e.g. {{random_int 1 100}}"
        );
        assert_eq!(
            said("{{env.}}"),
            "'{{env.}}': {{env.}} names no variable; write {{env.NAME}}, e.g. {{env.RUN_ID}}"
        );
        assert_eq!(
            said("{{env.1X}}"),
            "'{{env.1X}}': {{env.1X}}: '1X' is not an environment variable name; use letters, digits and _, not \
             starting with a digit, e.g. {{env.RUN_ID}}"
        );
        assert_eq!(
            said("x\n{{a b}}"),
            "'x\\n{{a b}}': {{a…}} is not a function or a variable name"
        );
        assert_eq!(
            Template::compile("{{a\u{1b} b}}").unwrap_err().fault,
            TemplateFault::Unknown("a\u{1b}".into())
        );
        assert_eq!(
            said("{{a\u{1b} b}}"),
            "'{{a\\u{1b} b}}': {{a\\u{1b}…}} is not a function or a variable name"
        );
    }
}
