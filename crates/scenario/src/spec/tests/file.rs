//! A whole file: what validates, where mistakes point, unknown keys, durations.

use super::*;

#[test]
fn a_full_file_validates() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.target.port, 8080);
    assert_eq!(plan.target.base_path, "/api");
    assert_eq!(plan.defaults.timeout, Duration::from_secs(5));
    let s = &plan.scenarios[0];
    assert_eq!(s.name, "signup");
    assert_eq!(s.executor.length(), Duration::from_secs(90));
    assert_eq!(s.stage_at(Duration::from_secs(31)), Some(2));
    assert_eq!(stage_names(s), ["signup#1", "signup#2"]);
    let Step::Request(r) = &s.flow[0] else {
        panic!("first step is a request")
    };
    assert_eq!(r.method, "POST");
    assert!(matches!(r.body, Body::Json(_)));
    assert!(matches!(s.flow[1], Step::Think(Think::Range(..))));
    let Step::Group { flow, .. } = &s.flow[2] else {
        panic!("third step is a group")
    };
    let Step::Request(me) = &flow[0] else {
        panic!("a request")
    };
    assert_eq!(me.name, "GET /me");
    assert_eq!(me.timeout, Duration::from_secs(5));
    assert_eq!(plan.thresholds.len(), 2);
    assert!(plan.thresholds[1].abort_on_fail);
    assert_eq!(plan.thresholds[1].window_s, Some(10));
    let fast = plan.clone().scaled(0.1);
    assert_eq!(fast.scenarios[0].executor.length(), Duration::from_secs(9));
    assert_eq!(fast.end(), Duration::from_secs(9));
    assert_eq!(fast.scale, 0.1);
}

#[test]
fn tls_groups_and_version_are_parsed_where_they_are_written() {
    use throng_plan::{TlsGroup, TlsVersion};
    let https = GOOD.replacen("http://", "https://", 1);
    let with = |block: &str| parse(&format!("{https}\ntls:\n{block}"));
    let p = with("  groups: [X25519, P-256]\n  version: \"1.3\"\n").unwrap();
    let tls = p.tls.unwrap();
    assert_eq!(tls.groups, [TlsGroup::X25519, TlsGroup::Secp256r1]);
    assert_eq!(tls.version, Some(TlsVersion::Tls13));
    let lines = https.lines().count();
    let e = with("  insecure: true\n  groups: [x448]\n").unwrap_err();
    assert!(
        e.message.contains("tls.groups: 'x448' is not a key-exchange group"),
        "{e}"
    );
    assert_eq!(e.line, lines + 4, "{e}");
    let e = with("  version: \"1.1\"\n").unwrap_err();
    assert!(e.message.contains("tls.version: '1.1' is not a TLS version"), "{e}");
    assert_eq!(e.line, lines + 3, "{e}");
}

#[test]
fn mistakes_point_at_their_line() {
    let cases: [(&str, &str, usize, &str); 6] = [
        ("  timeout: 5s", "  retries: 3", 0, "unknown field `retries`"),
        ("start_vus: 0", "start_vus: many", 0, "invalid type"),
        (
            "duration: 30s, target: 10",
            "duration: 30 parsecs, target: 10",
            0,
            "duration",
        ),
        ("Bearer {{token}}", "Bearer {{tokn}}", 0, "{{tokn}} is not defined"),
        (
            "executor: ramping-vus",
            "executor: ramping-users",
            0,
            "unknown variant `ramping-users`",
        ),
        (
            "response{step:register}",
            "response{step:regster}",
            0,
            "no request carries the tag step:regster",
        ),
    ];
    for (from, to, _, message) in cases {
        let text = GOOD.replacen(from, to, 1);
        let e = parse(&text).unwrap_err();
        let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or_default();
        assert!(e.message.contains(message), "{to}: {e}");
        assert!(e.line > 0 && e.column > 0, "{to}: {e}");
        // The line named holds the mistake.
        let needle = to
            .lines()
            .last()
            .unwrap_or(to)
            .split(':')
            .next()
            .unwrap_or_default()
            .trim();
        assert!(line.contains(needle), "{to}: {e} points at '{line}'");
        assert!(e.to_string().starts_with("t.yaml:"), "{e}");
    }
}

#[test]
fn an_unquoted_template_in_a_json_body_is_refused_where_it_is() {
    let from = r#"json: { email: "{{random_email}}", password: "pw-{{vu}}" }"#;
    for (to, var) in [
        (
            r#"json: { email: {{random_email}}, password: "pw-{{vu}}" }"#,
            "random_email",
        ),
        (r#"json: { email: "a", tags: [ {{ vu }} ] }"#, "vu"),
        (r#"json: { user: { id: {{vu}} } }"#, "vu"),
    ] {
        let e = rejects(from, to, "json:", "is not in quotes");
        assert!(e.message.contains(&format!("\"{{{{{var}}}}}\"")), "{e}");
        assert!(e.column > 10, "points into the line, at the template: {e}");
    }
    // Quoted, it is a string template; a real nested mapping stays an object.
    let ok = GOOD.replacen(
        from,
        r#"json: { email: "{{random_email}}", user: { id: 1, tags: [a] } }"#,
        1,
    );
    assert!(parse(&ok).is_ok());
}

#[test]
fn unknown_keys_in_short_or_long_forms_are_named() {
    rejects(
        "think: { min: 1s, max: 2s }",
        "think: { min: 1s, max: 2s, mean: 1s }",
        "mean",
        "unknown field `mean`, expected `min` or `max`",
    );
    rejects(
        "think: { min: 1s, max: 2s }",
        "think: { min: 1s }",
        "think",
        "missing field `max`",
    );
    rejects(
        "think: { min: 1s, max: 2s }",
        "think: 2",
        "think: 2",
        "durations need a unit",
    );
    rejects(
        "      abort_on_fail: true",
        "      abortOnFail: true",
        "abortOnFail",
        "unknown field `abortOnFail`, expected one of `threshold`, `abort_on_fail`, `delay`",
    );
    rejects("      delay: 5s", "      delay: 5", "delay: 5", "durations need a unit");
    // serde reports an executor's field at the executor (it reads the
    // tagged mapping whole), and '0' stands first as start_vus: the error
    // names the duration's line, not the first '0' after the executor.
    rejects(
        "    start_vus: 0\n",
        "    start_vus: 0\n    graceful_ramp_down: 0\n",
        "graceful_ramp_down: 0",
        "durations need a unit",
    );
    rejects(
        "    - p(95) < 500ms",
        "    - 500",
        "500",
        "expected an expression such as p(95) < 500ms",
    );
    rejects(
        "scenarios:",
        "data: { file: users.csv, cursr: shared }\nscenarios:",
        "cursr",
        "unknown field `cursr`, expected `file` or `cursor`",
    );
    rejects(
        "scenarios:",
        "data: { file: users.csv, cursor: random }\nscenarios:",
        "random",
        "unknown variant `random`, expected `per-vu` or `shared`",
    );
    let read: &dyn Fn(&str) -> Result<String, String> = &|_| Ok("email\na@x\n".into());
    let text = GOOD.replacen("scenarios:", "data: { file: users.csv, cursor: shared }\nscenarios:", 1);
    let plan = ScenarioPlan::parse(&text, "t.yaml", read).unwrap();
    assert_eq!(plan.data.map(|d| d.cursor), Some(Cursor::Shared));
    let Step::Think(Think::Range(min, max)) = plan.scenarios[0].flow[1] else {
        panic!("a think range")
    };
    assert_eq!((min, max), (Duration::from_secs(1), Duration::from_secs(2)));
    assert_eq!(plan.thresholds[1].delay_ms, 5000);
}

#[test]
fn an_error_quoting_a_huge_key_or_value_fits_one_line() {
    let key = "k".repeat(70_000);
    let files = [
        format!("{key}: 1\n"),
        GOOD.replacen("scenarios:", &format!("scenarios:\n  {key}: {{}}"), 1),
        GOOD.replacen("path: /me", &format!("path: \"/{{{{{key}}}}}\""), 1),
    ];
    for file in &files {
        let e = parse(file).expect_err("refused");
        assert!(
            e.message.contains(&key),
            "the message itself is whole: {}",
            &e.message[..200]
        );
        let shown = e.to_string();
        assert!(
            shown.chars().count() <= 320,
            "{} chars: {}",
            shown.chars().count(),
            &shown[..400]
        );
        assert!(!shown.contains('\n'));
        assert!(shown.contains(&format!("{}…", "k".repeat(60))), "{shown}");
        assert!(shown.starts_with("t.yaml:"), "{shown}");
    }
}

#[test]
fn shown_clips_quoted_spans_and_keeps_short_messages() {
    assert_eq!(
        shown("unknown field `a`, expected `b`"),
        "unknown field `a`, expected `b`"
    );
    assert_eq!(shown("don't say 'x'"), "don't say 'x'");
    let long = format!("key '{}' and \"{}\"", "a".repeat(100), "b".repeat(61));
    assert_eq!(
        shown(&long),
        format!("key '{}…' and \"{}…\"", "a".repeat(60), "b".repeat(60))
    );
    assert_eq!(shown("two\nlines"), "two lines");
    assert_eq!(shown(&"x ".repeat(400)).chars().count(), 301);
}

#[test]
fn durations_need_a_unit() {
    for (from, to, at) in [
        ("timeout: 5s", "timeout: 5", "timeout: 5"),
        ("duration: 30s, target", "duration: 30, target", "duration: 30,"),
        ("duration: 30s, target", "duration: 0, target", "duration: 0,"),
        ("duration: 30s, target", "duration: '30', target", "duration: '30',"),
        ("start_vus: 0", "start_vus: 0\n    start_time: 1", "start_time: 1"),
        ("start_vus: 0", "start_vus: 0\n    graceful_stop: 2.5", "graceful_stop"),
        ("status: [200]", "duration_under: 1", "duration_under"),
        ("expect: [200]", "expect: [200]\n          timeout: 3", "timeout: 3"),
    ] {
        let e = rejects(from, to, at, "durations need a unit, e.g. 500ms, 30s, 2m");
        assert!(e.message.contains("has none"), "{e}");
    }
    let plan = parse(&GOOD.replacen("duration: 30s, target", "duration: 0s, target", 1)).unwrap();
    assert_eq!(plan.scenarios[0].executor.stages()[0].duration, Duration::ZERO);
}

#[test]
fn a_script_or_a_plain_text_is_not_a_scenario_and_says_so() {
    let no_file = |f: &str| Err(format!("no file {f} in tests"));
    let script = "import http from 'k6/http';\nexport default function () { http.get('http://127.0.0.1/'); }\n";
    let e = ScenarioPlan::parse(script, "load.js", &no_file).unwrap_err();
    assert_eq!((e.line, e.column), (1, 1), "{e}");
    assert!(e.message.starts_with("this is a script, not a scenario file"), "{e}");
    assert!(e.message.contains("throng import"), "{e}");
    assert!(!e.message.contains("RawFile"), "{e}");
    let e = ScenarioPlan::parse("hello\n", "notes.yaml", &no_file).unwrap_err();
    assert!(
        e.message
            .starts_with("not a scenario file: it should be a YAML mapping"),
        "{e}"
    );
}
