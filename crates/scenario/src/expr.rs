//! The expression language of scenario files: parsed once at load into a
//! compact tree, evaluated per use against a small context. Hostile input is
//! bounded: nesting depth is capped, regexes carry size limits, and no input
//! panics (division by zero is an error value, not a crash).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Deepest nesting of parentheses, unary operators and calls accepted.
pub const MAX_DEPTH: usize = 64;
/// Longest expression accepted, in bytes.
pub const MAX_LEN: usize = 64 * 1024;
/// Most tokens accepted: bounds the tree (and so the evaluator's recursion).
pub const MAX_TOKENS: usize = 512;

/// A value an expression yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
}

impl Value {
    /// Truthiness: null, false, 0 and "" are false.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Num(n) => *n != 0.0,
            Value::Str(s) => !s.is_empty(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => Ok(()),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => write!(f, "{}", *n as i64),
            Value::Num(n) => write!(f, "{n}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

/// A parse error: what is wrong, at which column (1-based, in characters of
/// the expression) and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("column {col}: {msg}")]
pub struct ParseError {
    pub col: usize,
    pub msg: String,
}

/// An evaluation error (a type mismatch, division by zero): counted by the
/// caller as a failed step, never a panic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Value),
    /// A variable: a capture, a CSV column, `status`, `vu`, `iter`, or `env.NAME`.
    Var(String),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    if src.len() > MAX_LEN {
        return Err(ParseError {
            col: 1,
            msg: format!(
                "expression is {} bytes, longer than the {MAX_LEN} allowed; shorten it",
                src.len()
            ),
        });
    }
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let n = text.parse().map_err(|_| ParseError {
                col,
                msg: format!("`{text}` is not a number; write digits with at most one `.`"),
            })?;
            out.push((Tok::Num(n), col));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), col));
        } else if c == '"' || c == '\'' {
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => {
                        return Err(ParseError {
                            col,
                            msg: format!("string opened with {c} is not closed; add the closing {c}"),
                        });
                    }
                    Some('\\') => {
                        match chars.get(i + 1) {
                            Some(&e) => s.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                o => o,
                            }),
                            None => {
                                return Err(ParseError {
                                    col,
                                    msg: "string ends in a lone `\\`; close the string".into(),
                                });
                            }
                        }
                        i += 2;
                    }
                    Some(&q) if q == c => {
                        i += 1;
                        break;
                    }
                    Some(&o) => {
                        s.push(o);
                        i += 1;
                    }
                }
            }
            out.push((Tok::Str(s), col));
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let op = ["&&", "||", "==", "!=", "<=", ">="].into_iter().find(|o| *o == two);
            if let Some(op) = op {
                out.push((Tok::Op(op), col));
                i += 2;
            } else if let Some(op) = ["!", "<", ">", "+", "-", "*", "/", "%", "(", ")", ","]
                .into_iter()
                .find(|o| o.starts_with(c))
            {
                out.push((Tok::Op(op), col));
                i += 1;
            } else {
                return Err(ParseError {
                    col,
                    msg: format!("unexpected character `{c}`; operators are && || ! == != < <= > >= + - * / %"),
                });
            }
        }
    }
    if out.len() > MAX_TOKENS {
        return Err(ParseError {
            col: 1,
            msg: format!(
                "expression has {} tokens, more than the {MAX_TOKENS} allowed; split it",
                out.len()
            ),
        });
    }
    Ok(out)
}

const FUNCS: &[(&str, usize, usize)] = &[
    ("len", 1, 1),
    ("lower", 1, 1),
    ("upper", 1, 1),
    ("contains", 2, 2),
    ("starts_with", 2, 2),
    ("ends_with", 2, 2),
    ("matches", 2, 2),
    ("substr", 2, 3),
    ("number", 1, 1),
    ("string", 1, 1),
    ("random_int", 2, 2),
    ("pick", 1, 64),
    ("json", 1, 1),
];

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end_col: usize,
}

impl Parser {
    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end_col, |t| t.1)
    }
    fn err<T>(&self, msg: String) -> Result<T, ParseError> {
        Err(ParseError { col: self.col(), msg })
    }
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.toks.get(self.pos), Some((Tok::Op(o), _)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn binary(&mut self, level: usize, depth: usize) -> Result<Expr, ParseError> {
        const LEVELS: &[&[(&str, BinOp)]] = &[
            &[("||", BinOp::Or)],
            &[("&&", BinOp::And)],
            &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
            &[("<", BinOp::Lt), ("<=", BinOp::Le), (">", BinOp::Gt), (">=", BinOp::Ge)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
        ];
        if level == LEVELS.len() {
            return self.unary(depth);
        }
        let mut lhs = self.binary(level + 1, depth)?;
        'outer: loop {
            for (s, op) in LEVELS[level] {
                if self.eat(s) {
                    let rhs = self.binary(level + 1, depth)?;
                    lhs = Expr::Bin(*op, Box::new(lhs), Box::new(rhs));
                    continue 'outer;
                }
            }
            return Ok(lhs);
        }
    }
    fn unary(&mut self, depth: usize) -> Result<Expr, ParseError> {
        if depth >= MAX_DEPTH {
            return self.err(format!("expression nests deeper than {MAX_DEPTH} levels; split it"));
        }
        if self.eat("!") {
            return Ok(Expr::Not(Box::new(self.unary(depth + 1)?)));
        }
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary(depth + 1)?)));
        }
        let col = self.col();
        let Some((tok, _)) = self.toks.get(self.pos).cloned() else {
            return self.err("expression ends where a value was expected; add a value".into());
        };
        self.pos += 1;
        match tok {
            Tok::Num(n) => Ok(Expr::Lit(Value::Num(n))),
            Tok::Str(s) => Ok(Expr::Lit(Value::Str(s))),
            Tok::Op("(") => {
                let e = self.binary(0, depth + 1)?;
                if !self.eat(")") {
                    return self.err("missing `)`; close the parenthesis".into());
                }
                Ok(e)
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => Ok(Expr::Lit(Value::Bool(true))),
                "false" => Ok(Expr::Lit(Value::Bool(false))),
                "null" => Ok(Expr::Lit(Value::Null)),
                _ if self.eat("(") => {
                    let Some(&(_, lo, hi)) = FUNCS.iter().find(|f| f.0 == name) else {
                        let names: Vec<&str> = FUNCS.iter().map(|f| f.0).collect();
                        return Err(ParseError {
                            col,
                            msg: format!("unknown function `{name}`; the functions are {}", names.join(", ")),
                        });
                    };
                    let mut args = Vec::new();
                    if !self.eat(")") {
                        loop {
                            args.push(self.binary(0, depth + 1)?);
                            if self.eat(")") {
                                break;
                            }
                            if !self.eat(",") {
                                return self.err(format!("expected `,` or `)` in the arguments of `{name}`"));
                            }
                        }
                    }
                    if args.len() < lo || args.len() > hi {
                        return Err(ParseError {
                            col,
                            msg: format!("`{name}` takes {lo}..={hi} arguments, not {}", args.len()),
                        });
                    }
                    if let ("matches", Some(Expr::Lit(Value::Str(re)))) = (name.as_str(), args.get(1)) {
                        compile_regex(re).map_err(|e| ParseError { col, msg: e.0 })?;
                    }
                    Ok(Expr::Call(name, args))
                }
                _ => Ok(Expr::Var(name)),
            },
            Tok::Op(o) => Err(ParseError {
                col,
                msg: format!("`{o}` where a value was expected; put a value before it"),
            }),
        }
    }
}

fn compile_regex(re: &str) -> Result<regex::Regex, EvalError> {
    regex::RegexBuilder::new(re)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(|e| EvalError(format!("bad regex in matches(): {e}")))
}

/// Parse an expression once, at load.
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        end_col: src.chars().count() + 1,
    };
    let e = p.binary(0, 0)?;
    if p.pos < p.toks.len() {
        return p.err("unexpected text after the expression; join it with an operator".into());
    }
    Ok(e)
}

/// An expression as written (`if:`, `until:`, a check's `expr:`), parsed
/// once at load; it travels (to `--procs` children) as its text and is
/// parsed again.
#[derive(Clone, Debug)]
pub struct Condition {
    /// As written.
    pub text: String,
    /// Parsed.
    pub expr: Expr,
}

impl Condition {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Condition, ParseError> {
        Ok(Condition {
            text: text.to_string(),
            expr: parse(text)?,
        })
    }
}

impl PartialEq for Condition {
    fn eq(&self, o: &Self) -> bool {
        self.text == o.text
    }
}

impl Serialize for Condition {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Condition::parse(&text).map_err(|e| serde::de::Error::custom(format!("expression '{text}': {e}")))
    }
}

/// What an expression can read while it is evaluated.
pub trait Context {
    /// A variable's value (a capture, CSV column, `status`, `vu`, `iter`, `env.NAME`); None if unset.
    fn var(&self, name: &str) -> Option<Value>;
    /// A random integer in [lo, hi], from the VU's seeded generator.
    fn random(&mut self, lo: i64, hi: i64) -> i64;
    /// The value at a JSON pointer into the response a check reads; None
    /// elsewhere (load refuses `json()` outside a check's `expr:`).
    fn json(&self, _pointer: &str) -> Option<Value> {
        None
    }
}

fn num(v: &Value) -> Result<f64, EvalError> {
    match v {
        Value::Num(n) => Ok(*n),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        Value::Str(s) => s
            .trim()
            .parse()
            // Its length, not the text: the value may be a secret
            // (`env.TOKEN`), and this message goes into the result.
            .map_err(|_| EvalError(format!("a text of {} characters is not a number", s.chars().count()))),
        Value::Null => Err(EvalError("null is not a number".into())),
    }
}

impl Expr {
    /// Evaluate against a context.
    pub fn eval(&self, cx: &mut dyn Context) -> Result<Value, EvalError> {
        Ok(match self {
            Expr::Lit(v) => v.clone(),
            Expr::Var(n) => cx.var(n).unwrap_or(Value::Null),
            Expr::Not(e) => Value::Bool(!e.eval(cx)?.truthy()),
            Expr::Neg(e) => Value::Num(-num(&e.eval(cx)?)?),
            Expr::Bin(BinOp::And, a, b) => Value::Bool(a.eval(cx)?.truthy() && b.eval(cx)?.truthy()),
            Expr::Bin(BinOp::Or, a, b) => Value::Bool(a.eval(cx)?.truthy() || b.eval(cx)?.truthy()),
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(cx)?, b.eval(cx)?);
                binop(*op, a, b)?
            }
            Expr::Call(f, args) => {
                let mut v = Vec::with_capacity(args.len());
                for a in args {
                    v.push(a.eval(cx)?);
                }
                call(f, v, cx)?
            }
        })
    }
}

fn binop(op: BinOp, a: Value, b: Value) -> Result<Value, EvalError> {
    use std::cmp::Ordering;
    let ord = || -> Result<Ordering, EvalError> {
        match (&a, &b) {
            (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
            _ => num(&a)?
                .partial_cmp(&num(&b)?)
                .ok_or_else(|| EvalError("cannot compare NaN".into())),
        }
    };
    let eq = || match (&a, &b) {
        (Value::Num(_), Value::Str(_)) | (Value::Str(_), Value::Num(_)) => {
            num(&a).ok() == num(&b).ok() && num(&a).is_ok()
        }
        _ => a == b,
    };
    Ok(match op {
        BinOp::Eq => Value::Bool(eq()),
        BinOp::Ne => Value::Bool(!eq()),
        BinOp::Lt => Value::Bool(ord()? == Ordering::Less),
        BinOp::Le => Value::Bool(ord()? != Ordering::Greater),
        BinOp::Gt => Value::Bool(ord()? == Ordering::Greater),
        BinOp::Ge => Value::Bool(ord()? != Ordering::Less),
        BinOp::Add => match (&a, &b) {
            (Value::Str(x), y) | (y, Value::Str(x))
                if !matches!(y, Value::Num(_)) || num(&Value::Str(x.clone())).is_err() =>
            {
                Value::Str(format!("{a}{b}"))
            }
            _ => Value::Num(num(&a)? + num(&b)?),
        },
        BinOp::Sub => Value::Num(num(&a)? - num(&b)?),
        BinOp::Mul => Value::Num(num(&a)? * num(&b)?),
        BinOp::Div | BinOp::Rem => {
            let (x, y) = (num(&a)?, num(&b)?);
            if y == 0.0 {
                return Err(EvalError("division by zero".into()));
            }
            Value::Num(if op == BinOp::Div { x / y } else { x % y })
        }
        BinOp::And | BinOp::Or => unreachable!("short-circuit operators are handled in eval"),
    })
}

fn call(f: &str, a: Vec<Value>, cx: &mut dyn Context) -> Result<Value, EvalError> {
    let s = |i: usize| a[i].to_string();
    Ok(match f {
        "len" => Value::Num(s(0).chars().count() as f64),
        "lower" => Value::Str(s(0).to_lowercase()),
        "upper" => Value::Str(s(0).to_uppercase()),
        "contains" => Value::Bool(s(0).contains(&s(1))),
        "starts_with" => Value::Bool(s(0).starts_with(&s(1))),
        "ends_with" => Value::Bool(s(0).ends_with(&s(1))),
        "matches" => {
            // A pattern read while running may hold a variable's value: the
            // error says what, not the pattern (a literal was checked at load).
            let re = compile_regex(&s(1)).map_err(|_| {
                EvalError("matches(): the pattern is not a regular expression throng can run (or is too large)".into())
            })?;
            Value::Bool(re.is_match(&s(0)))
        }
        "substr" => {
            let text = s(0);
            let start = num(&a[1])?.max(0.0) as usize;
            let n = match a.get(2) {
                Some(v) => num(v)?.max(0.0) as usize,
                None => usize::MAX,
            };
            Value::Str(text.chars().skip(start).take(n).collect())
        }
        "number" => Value::Num(num(&a[0])?),
        "string" => Value::Str(s(0)),
        "random_int" => {
            let (lo, hi) = (num(&a[0])? as i64, num(&a[1])? as i64);
            if lo > hi {
                return Err(EvalError("random_int(lo, hi): the low bound is above the high".into()));
            }
            Value::Num(cx.random(lo, hi) as f64)
        }
        "pick" => {
            let i = cx.random(0, a.len() as i64 - 1) as usize;
            a.into_iter().nth(i).unwrap_or(Value::Null)
        }
        "json" => cx.json(&s(0)).unwrap_or(Value::Null),
        _ => return Err(EvalError(format!("unknown function `{f}`"))),
    })
}

impl Expr {
    /// Every variable the expression reads, in order of appearance.
    pub fn variables(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Var(n) = e {
                out.push(n.as_str());
            }
        });
        out
    }

    /// True when it calls the function `name` anywhere.
    pub fn calls(&self, name: &str) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e, Expr::Call(f, _) if f == name));
        found
    }

    fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Lit(_) | Expr::Var(_) => {}
            Expr::Not(e) | Expr::Neg(e) => e.walk(f),
            Expr::Bin(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.walk(f)),
        }
    }
}

/// A JSON value as an expression reads it: strings, numbers, booleans and
/// null as themselves, arrays and objects as their JSON text.
pub fn from_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n.as_f64().map_or_else(|| Value::Str(n.to_string()), Value::Num),
        serde_json::Value::String(s) => Value::Str(s.clone()),
        other => Value::Str(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cx;
    impl Context for Cx {
        fn var(&self, name: &str) -> Option<Value> {
            match name {
                "status" => Some(Value::Num(404.0)),
                "token" => Some(Value::Str("Abc".into())),
                "env.HOME_X" => Some(Value::Str("/h".into())),
                _ => None,
            }
        }
        fn random(&mut self, lo: i64, _hi: i64) -> i64 {
            lo
        }
    }

    fn ev(s: &str) -> Result<Value, EvalError> {
        parse(s).expect("parses").eval(&mut Cx)
    }

    #[test]
    fn precedence_and_arithmetic() {
        assert_eq!(ev("1 + 2 * 3").unwrap(), Value::Num(7.0));
        assert_eq!(ev("(1 + 2) * 3").unwrap(), Value::Num(9.0));
        assert_eq!(ev("1 < 2 && 3 > 4 || true").unwrap(), Value::Bool(true));
        assert_eq!(ev("!false && 7 % 4 == 3").unwrap(), Value::Bool(true));
        assert_eq!(ev("-2 - -3").unwrap(), Value::Num(1.0));
        assert_eq!(ev("status-4").unwrap(), Value::Num(400.0));
    }

    #[test]
    fn variables_and_functions() {
        assert_eq!(ev("status >= 400 && status < 500").unwrap(), Value::Bool(true));
        assert_eq!(ev("lower(token) == 'abc'").unwrap(), Value::Bool(true));
        assert_eq!(ev("len(env.HOME_X) + len(missing)").unwrap(), Value::Num(2.0));
        assert_eq!(ev("matches(token, '^A[a-z]+$')").unwrap(), Value::Bool(true));
        assert_eq!(ev("substr('hello', 1, 3)").unwrap(), Value::Str("ell".into()));
        assert_eq!(ev("number('12') + 1").unwrap(), Value::Num(13.0));
        assert_eq!(ev("random_int(5, 9)").unwrap(), Value::Num(5.0));
        assert_eq!(ev("pick('a', 'b')").unwrap(), Value::Str("a".into()));
        assert_eq!(ev("'a' + 1").unwrap(), Value::Str("a1".into()));
    }

    #[test]
    fn errors_say_where() {
        assert_eq!(parse("1 +").unwrap_err().col, 4);
        assert_eq!(parse("foo(1)").unwrap_err().col, 1);
        assert_eq!(parse("(1").unwrap_err().col, 3);
        assert!(parse("'open").unwrap_err().msg.contains("not closed"));
        assert!(parse("1 $ 2").unwrap_err().msg.contains("unexpected character"));
        assert!(parse("matches(a, '(')").is_err());
        assert!(parse("len(1, 2)").is_err());
        assert_eq!(ev("1 / 0").unwrap_err(), EvalError("division by zero".into()));
        assert!(ev("random_int(3, 1)").is_err());
    }

    #[test]
    fn hostile_inputs_are_bounded() {
        assert!(parse(&"(".repeat(70_000)).unwrap_err().msg.contains("longer than"));
        assert!(parse(&"(".repeat(300)).unwrap_err().msg.contains("nests deeper"));
        assert!(parse(&"1+".repeat(300)).unwrap_err().msg.contains("tokens"));
        let long = "1+".repeat(35_000) + "1";
        assert!(parse(&long).is_err() || long.len() <= MAX_LEN);
        let bangs = "!".repeat(1000) + "true";
        assert!(parse(&bangs).is_err());
        let wide = vec!["1"; 200].join(" + ");
        assert_eq!(
            parse(&wide).expect("flat sums parse").eval(&mut Cx).unwrap(),
            Value::Num(200.0)
        );
    }
}
