//! Fuzz targets (proptest) for what a scenario file holds: the YAML →
//! plan parser, templates and threshold expressions. Each asserts no
//! panic, that errors are one line (with `file:line:column` for the
//! parser), and a property where one exists. The seeds in
//! `tests/corpus/scenario/` (the examples and the docs' snippets) run as an
//! ordinary test. `PROPTEST_CASES=N` runs longer (docs/FUZZING.md).

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use throng_metrics::Measurements;
use throng_plan::Rng;
use throng_scenario::{Context, ScenarioError, ScenarioPlan, Template, Threshold};

/// `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        // Next to this file: tests/fuzz.proptest-regressions.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

fn assert_one_line(what: &str, e: &str) {
    assert!(!e.is_empty(), "{what}: an empty error");
    assert!(
        !e.contains('\n') && !e.contains('\r'),
        "{what}: the error is not one line: {e:?}"
    );
}

fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "f.yaml", &|name| Err(format!("no file {name} here")))
}

/// Parses `text`; an error must be one line and point into the file.
fn parse_checked(text: &str) -> Option<ScenarioPlan> {
    match parse(text) {
        Ok(plan) => Some(plan),
        Err(e) => {
            let shown = e.to_string();
            assert_one_line(&format!("parse({text:?})"), &shown);
            assert!(shown.starts_with("f.yaml:"), "{shown}");
            // YAML also breaks lines at \r, NEL, LS and PS.
            let breaks = text
                .chars()
                .filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'))
                .count();
            assert!(
                e.line <= breaks + 2,
                "line {} of a file with {breaks} line breaks: {shown}",
                e.line
            );
            None
        }
    }
}

fn corpus() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/scenario");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus is in {}", dir.display());
    files
}

#[test]
fn corpus_seeds_parse_or_fail_in_one_line() {
    let mut ok = 0;
    for (name, text) in corpus() {
        let plan = parse_checked(&text);
        if name.starts_with("auth-stages") || name.starts_with("spec-good") {
            assert!(plan.is_some(), "{name} is a valid scenario: {:?}", parse(&text).err());
        }
        ok += usize::from(plan.is_some());
    }
    // The docs' snippets are mostly fragments: they seed the edits.
    assert!(ok >= 3, "only {ok} seeds parse");
}

/// One edit of a YAML file, by line, as a person's typo or a bad merge
/// would make it.
#[derive(Clone, Debug)]
enum Edit {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Indent(usize, usize),
    Dedent(usize),
    /// Replace the value after `key:` on a line.
    Value(usize, String),
    Insert(usize, usize, String),
    Truncate(usize),
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("1e308".to_string()),
        Just("18446744073709551616".to_string()),
        Just("NaN".to_string()),
        Just("~".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("\"{{\"".to_string()),
        Just("\"{{nope}}\"".to_string()),
        Just("[[[[[[[[[[[[".to_string()),
        Just("&a [*a]".to_string()),
        Just("!!binary aGk=".to_string()),
        Just("0s".to_string()),
        Just("1000000h".to_string()),
        Just("constant-vus".to_string()),
        Just("ramping-arrival-rate".to_string()),
        "[ -~]{0,12}",
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::DeleteLine),
        any::<usize>().prop_map(Edit::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<usize>(), 1usize..5).prop_map(|(a, n)| Edit::Indent(a, n)),
        any::<usize>().prop_map(Edit::Dedent),
        (any::<usize>(), scalar()).prop_map(|(a, v)| Edit::Value(a, v)),
        (any::<usize>(), any::<usize>(), "[ -~\t\u{feff}\u{85}\u{2028}]{1,6}")
            .prop_map(|(a, c, s)| Edit::Insert(a, c, s)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match e {
            Edit::DeleteLine(i) => {
                lines.remove(i % n);
            }
            Edit::DuplicateLine(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::SwapLines(a, b) => lines.swap(a % n, b % n),
            Edit::Indent(i, k) => lines[i % n].insert_str(0, &" ".repeat(*k)),
            Edit::Dedent(i) => {
                let l = &mut lines[i % n];
                let trimmed = l.strip_prefix("  ").map(str::to_string);
                if let Some(t) = trimmed {
                    *l = t;
                }
            }
            Edit::Value(i, v) => {
                let l = &mut lines[i % n];
                if let Some(at) = l.find(": ") {
                    l.truncate(at + 2);
                    l.push_str(v);
                }
            }
            Edit::Insert(i, c, s) => {
                let l = &mut lines[i % n];
                let mut at = c % (l.len() + 1);
                while !l.is_char_boundary(at) {
                    at -= 1;
                }
                l.insert_str(at, s);
            }
            Edit::Truncate(i) => lines.truncate(i % n),
        }
    }
    lines.join("\n")
}

fn vars() -> HashMap<String, String> {
    HashMap::from([("token".to_string(), "t0k".to_string())])
}

fn render(t: &Template, vars: &HashMap<String, String>) -> String {
    let mut rng = Rng::new(7);
    let env = HashMap::from([("RUN_ID".to_string(), "r1".to_string())]);
    let mut cx = Context {
        vu: 3,
        iter: 9,
        scenario: "s",
        rng: &mut rng,
        vars,
        env: &env,
        setup: &HashMap::new(),
        now_ms: 1_700_000_000_000,
        status: 200,
        failed: None,
    };
    t.render(&mut cx)
}

/// A piece of a template: text without `{{`, or a `{{…}}` part with what
/// it renders to (None: random).
fn piece() -> impl Strategy<Value = (String, Option<String>)> {
    prop_oneof![
        "[^{}]{0,12}".prop_map(|t| (t.clone(), Some(t))),
        Just(("{{vu}}".to_string(), Some("3".to_string()))),
        Just(("{{ iter }}".to_string(), Some("9".to_string()))),
        Just(("{{scenario}}".to_string(), Some("s".to_string()))),
        Just(("{{token}}".to_string(), Some("t0k".to_string()))),
        Just(("{{env.RUN_ID}}".to_string(), Some("r1".to_string()))),
        Just(("{{now_ms}}".to_string(), Some("1700000000000".to_string()))),
        Just(("{{uuid}}".to_string(), None)),
        Just(("{{random_email}}".to_string(), None)),
        (any::<i32>(), 0i64..1000).prop_map(|(a, d)| (format!("{{{{random_int {a} {}}}}}", i64::from(a) + d), None)),
    ]
}

/// A threshold expression assembled from the parts people write.
fn threshold_text() -> impl Strategy<Value = (String, String)> {
    let metric = prop::sample::select(vec![
        "response",
        "latency",
        "wait",
        "errors",
        "checks",
        "requests",
        "iterations",
        "response{step:register}",
        "response{group:x}",
        "nope",
        "response{",
        "{}",
        "",
    ]);
    let lhs = prop::sample::select(vec![
        "p(95)",
        "p(99.9)",
        "p(100)",
        "p(0)",
        "p(-1)",
        "p(101)",
        "p()",
        "avg",
        "min",
        "max",
        "med",
        "rate",
        "count",
        "rate(check_failed)",
        "rate(",
        "p(95",
        "",
    ]);
    let op = prop::sample::select(vec!["<", "<=", ">", ">=", "==", "!=", "=", "<>", ""]);
    let rhs = prop::sample::select(vec![
        "500ms", "2s", "0.01", "0", "1e308", "-1", "NaN", "inf", "1m", "10us", "abc", "", "500 ms", "1e-400",
    ]);
    let over = prop::sample::select(vec![
        "",
        " over 30s",
        " over 0s",
        " over 1.5s",
        " over 1e20s",
        " over x",
    ]);
    (metric, lhs, op, rhs, over).prop_map(|(m, l, o, r, w)| (m.to_string(), format!("{l} {o} {r}{w}")))
}

proptest! {
    #![proptest_config(config(256))]

    /// Seeds with line edits: the parser never panics, errors are one line
    /// and point into the file.
    #[test]
    fn edited_scenarios_never_panic(pick in any::<usize>(), edits in prop::collection::vec(edit(), 1..5)) {
        let seeds = corpus();
        let (_, seed) = &seeds[pick % seeds.len()];
        let text = apply(seed, &edits);
        parse_checked(&text);
    }

    /// Arbitrary text, and YAML-looking text.
    #[test]
    fn arbitrary_text_never_panics(s in any::<String>(), y in "[-:{}\\[\\], \n a-z0-9\"'&*!|>#]{0,200}") {
        parse_checked(&s);
        parse_checked(&y);
    }

    /// A template renders its text and parts in order; a text without
    /// `{{` renders to itself.
    #[test]
    fn templates_render_what_they_say(pieces in prop::collection::vec(piece(), 0..8)) {
        let source: String = pieces.iter().map(|(s, _)| s.as_str()).collect();
        let t = Template::compile(&source).unwrap();
        prop_assert_eq!(t.source(), source.as_str());
        let out = render(&t, &vars());
        if pieces.iter().all(|(_, r)| r.is_some()) {
            let expected: String = pieces.iter().map(|(_, r)| r.clone().unwrap()).collect();
            prop_assert_eq!(out, expected);
        }
        prop_assert_eq!(t.is_literal(), !source.contains("{{"));
    }

    /// Any text compiles or fails in one line; whatever compiles renders
    /// without panic.
    #[test]
    fn arbitrary_templates_never_panic(s in any::<String>(), t in "([a-z_ .0-9-]{0,6}(\\{\\{|\\}\\}|\\{|\\}))*[a-z_ .0-9-]{0,6}") {
        for text in [&s, &t] {
            match Template::compile(text) {
                Ok(tpl) => {
                    let _ = render(&tpl, &vars());
                }
                Err(e) => assert_one_line(&format!("Template::compile({text:?})"), &e.to_string()),
            }
        }
    }

    /// Threshold expressions: parse or fail in one line; whatever parses
    /// evaluates on empty measurements without panic.
    #[test]
    fn thresholds_parse_or_fail_in_one_line((key, expr) in threshold_text(), junk in any::<String>()) {
        for (k, e) in [(key.as_str(), expr.as_str()), ("response", junk.as_str()), (junk.as_str(), "p(95) < 1s")] {
            match Threshold::parse(k, e, false, Duration::ZERO) {
                Ok(t) => {
                    let v = t.evaluate(&Measurements::default());
                    assert_one_line("verdict", &v.detail);
                }
                Err(err) => assert_one_line(&format!("Threshold::parse({k:?}, {e:?})"), &err.to_string()),
            }
        }
    }
}

/// What random text rarely holds: line breaks and escapes inside the
/// parts that errors quote.
#[test]
fn errors_quoting_multi_line_input_stay_one_line() {
    for text in [
        "line one\n{{",
        "{{random_int\n2 1}}",
        "a\r\n{{random_int 2 1}}",
        "{{env.\u{1b}[31m}}",
    ] {
        let e = Template::compile(text).unwrap_err();
        assert_one_line(&format!("Template::compile({text:?})"), &e.to_string());
    }
    for (k, e) in [
        ("response", "p(95) <\n1 parsec"),
        ("resp\nonse", "p(95) < 1s"),
        ("response", "p(95) < 1s over 1\n"),
    ] {
        let err = Threshold::parse(k, e, false, Duration::ZERO).unwrap_err();
        assert_one_line(&format!("Threshold::parse({k:?}, {e:?})"), &err.to_string());
    }
    let yaml = "target: http://127.0.0.1:8080\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    \
                duration: 1s\n    flow:\n      - request:\n          path: /\n          body: |\n            one\n            {{nope\n";
    let e = parse(yaml).unwrap_err();
    assert_one_line("a block-scalar body with a bad template", &e.to_string());
}
