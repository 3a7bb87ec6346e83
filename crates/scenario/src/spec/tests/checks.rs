//! Checks, captures, variables, data columns and thresholds.

use super::*;

#[test]
fn check_modifiers_belong_to_their_kind() {
    let check = "is ok: { status: [200] }";
    for (to, message) in [
        (
            "is ok: { status: [200], contains: OK }",
            "check 'is ok': contains: goes with header:, not with status:",
        ),
        (
            "is ok: { body_contains: OK, equals: 1 }",
            "check 'is ok': equals: goes with json:, not with body_contains:",
        ),
        (
            "is ok: { header: X-A, exists: true }",
            "check 'is ok': exists: goes with json:, not with header:",
        ),
        (
            "is ok: { duration_under: 1s, contains: x }",
            "contains: goes with header:, not with duration_under:",
        ),
        (
            "is ok: { json: /a, contains: x }",
            "contains: goes with header:, not with json:",
        ),
        (
            "is ok: { status: [200], header: X-A }",
            "check 'is ok': it has status: and header:; give only one of",
        ),
        ("is ok: { contains: x }", "check 'is ok': give one of status:"),
        ("is ok: { json: /a, exists: false }", "equals: VALUE or exists: true"),
    ] {
        rejects(check, to, "is ok:", message);
    }
    let plan = parse(&GOOD.replacen(check, "is ok: { header: X-A, contains: b }", 1)).unwrap();
    let Step::Group { flow, .. } = &plan.scenarios[0].flow[2] else {
        panic!("a group")
    };
    let Step::Request(me) = &flow[0] else {
        panic!("a request")
    };
    assert_eq!(me.checks[0].kind, CheckKind::Header("X-A".into(), Some("b".into())));
}

#[test]
fn json_pointers_start_with_a_slash() {
    for (to, at, message) in [
        (
            "is ok: { json: data.token }",
            "is ok:",
            "check 'is ok': json 'data.token' is a JSON pointer and starts with /, e.g. /data/token",
        ),
        (
            "is ok: { json: '$.items[0].id', equals: 3 }",
            "is ok:",
            "json '$.items[0].id' is a JSON pointer and starts with /, e.g. /items/0/id",
        ),
        (
            "is ok: { json: /a~b }",
            "is ok:",
            "~ starts an escape: write ~0 for ~ and ~1 for /",
        ),
    ] {
        rejects("is ok: { status: [200] }", to, at, message);
    }
    rejects(
        "token: { json: /token }",
        "token: { json: token }",
        "token: { json: token }",
        "capture token: json 'token' is a JSON pointer and starts with /, e.g. /token",
    );
    rejects(
        "token: { json: /token }",
        "token: { json: /a~2 }",
        "token: { json",
        "~ starts an escape",
    );
    for ok in ["\"\"", "/", "/a~0b/c~1d/0"] {
        let text = GOOD.replacen("json: /token", &format!("json: {ok}"), 1);
        assert!(parse(&text).is_ok(), "{ok}");
    }
}

#[test]
fn variables_are_captured_before_they_are_used() {
    // A step before the one that captures it.
    let e = rejects(
        "    flow:\n      - request:\n          name: register",
        "    flow:\n      - request: { name: early, path: \"/x/{{token}}\" }\n      - request:\n          name: register",
        "{{token}}",
        "{{token}} is used in step 'early' before step 'register' captures it, in scenario 'signup': captures are cleared",
    );
    assert!(e.message.contains("move this request after 'register'"), "{e}");
    // The step that captures it.
    rejects(
        "path: /auth/register",
        "path: /auth/register/{{token}}",
        "{{token}}",
        "{{token}} is used in step 'register' which captures it itself",
    );
    // A default header goes with every request, the first one too...
    rejects(
        "User-Agent: throng-test",
        "Authorization: \"Bearer {{token}}\"",
        "{{token}}",
        "{{token}} is used in defaults.headers.Authorization, sent with step 'register', which captures it itself",
    );
    // ...unless the request sets that header itself (in any case).
    let text = GOOD
        .replacen("User-Agent: throng-test", "Authorization: \"Bearer {{token}}\"", 1)
        .replacen(
            "expect: [200]",
            "expect: [200]\n          headers: { authorization: none }",
            1,
        );
    parse(&text).unwrap();
    // Spaces inside the braces: still found, still pointed at.
    rejects(
        "path: /auth/register",
        "path: /auth/register/{{ token }}",
        "{{ token }}",
        "captures it itself",
    );
    // Never captured: the known names are those defined at that point.
    let e = rejects(
        "Bearer {{token}}",
        "Bearer {{tokn}}",
        "{{tokn}}",
        "{{tokn}} is not defined",
    );
    assert!(e.message.contains("known: token, vu, iter"), "{e}");
}

#[test]
fn capture_names_are_identifiers_and_not_built_ins() {
    for (name, message) in [
        (
            "user-id",
            "capture 'user-id': a variable name is letters, digits and _, not starting with a digit, e.g. user_id",
        ),
        ("2fa", "e.g. _2fa"),
        ("a.b", "e.g. a_b"),
        ("\"my token\"", "e.g. my_token"),
        ("vu", "capture 'vu': {{vu}} is built in"),
        ("env", "capture 'env': {{env}} is built in"),
        ("random_int", "give the variable another name, e.g. my_random_int"),
    ] {
        rejects(
            "token: { json: /token }",
            &format!("{name}: {{ json: /token }}"),
            "{ json: /token }",
            message,
        );
    }
    let read: &dyn Fn(&str) -> Result<String, String> = &|_| Ok("email,iter\na@x,1\n".into());
    let text = GOOD.replacen("scenarios:", "data: users.csv\nscenarios:", 1);
    let e = ScenarioPlan::parse(&text, "t.yaml", read).unwrap_err();
    assert!(
        e.message
            .contains("the column 'iter' is hidden by the built-in {{iter}}"),
        "{e}"
    );
    assert!(parse(&GOOD.replace("token", "_Token_2")).is_ok());
}

#[test]
fn env_names_lists_every_variable_once() {
    let text = GOOD
        .replacen("User-Agent: throng-test", "User-Agent: \"{{env.UA}}\"", 1)
        .replacen(
            "path: /me",
            "path: /me/{{env.TENANT}}\n                query: { k: \"{{env.API_KEY}}\" }",
            1,
        )
        .replacen(
            "password: \"pw-{{vu}}\"",
            "password: \"{{env.TENANT}}-{{env.PASSWORD}}\"",
            1,
        );
    let plan = parse(&text).unwrap();
    assert_eq!(plan.env_names(), ["API_KEY", "PASSWORD", "TENANT", "UA"]);
    assert!(parse(GOOD).unwrap().env_names().is_empty());
    rejects("pw-{{vu}}", "pw-{{env.}}", "{{env.}}", "{{env.}} names no variable");
    rejects(
        "pw-{{vu}}",
        "pw-{{env.PASS-WORD}}",
        "{{env.PASS-WORD}}",
        "'PASS-WORD' is not an environment variable name",
    );
}

#[test]
fn data_columns_are_variables() {
    let text = GOOD
        .replacen("scenarios:", "data: users.csv\nscenarios:", 1)
        .replacen("{{token}}", "{{email}}", 1);
    let plan = ScenarioPlan::parse(&text, "t.yaml", &|_| Ok("email,password\na@x,1\nb@x,2\n".into())).unwrap();
    let data = plan.data.unwrap();
    assert_eq!(data.columns, ["email", "password"]);
    assert_eq!(data.row_count, 2);
    assert_eq!(data.cursor, Cursor::PerVu);
}

#[test]
fn thresholds_keep_the_files_order() {
    let text = GOOD.replacen(
        "thresholds:\n",
        "thresholds:\n  errors: [rate < 1%]\n  checks{check:is ok}: [rate > 0.9]\n",
        1,
    ) + "  iterations: [count > 0]\n  connect: [max < 1s]\n";
    let plan = parse(&text).unwrap();
    let keys: Vec<&str> = plan
        .thresholds
        .iter()
        .map(|t| t.text.split(": ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        keys,
        [
            "errors",
            "checks{check:is ok}",
            "response{step:register}",
            "response{step:register}",
            "iterations",
            "connect"
        ]
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  errors: []\n",
        "errors: []",
        "errors: the list is empty, so nothing is judged",
    );
    let text = GOOD.to_string() + "  response{step:register}: [p(99) < 1s]\n";
    let e = parse(&text).unwrap_err();
    assert!(e.message.contains("appears twice"), "{e}");
    assert_eq!(e.line, text.lines().count(), "{e}");
}

#[test]
fn a_threshold_may_pass_without_samples_only_when_it_says_so() {
    let text = GOOD.replacen(
        "thresholds:\n",
        "thresholds:\n  errors:\n    - rate < 1%\n    - rate < 2% or no samples\n    - threshold: rate < 3%\n      \
         no_samples: pass\n    - threshold: rate < 4%\n      no_samples: fail\n",
        1,
    );
    let plan = parse(&text).unwrap();
    let allowed: Vec<(&str, bool)> = plan
        .thresholds
        .iter()
        .filter(|t| t.metric == "errors")
        .map(|t| (t.text.as_str(), t.pass_without_samples))
        .collect();
    assert_eq!(
        allowed,
        [
            ("errors: rate < 1%", false),
            ("errors: rate < 2% or no samples", true),
            ("errors: rate < 3%", true),
            ("errors: rate < 4%", false),
        ]
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  errors:\n    - threshold: rate < 1% or no samples\n      no_samples: fail\n",
        "errors:",
        "ends 'or no samples' but no_samples: fail",
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  errors:\n    - threshold: rate < 1%\n      no_samples: maybe\n",
        "no_samples",
        "unknown variant",
    );
    rejects(
        "thresholds:\n",
        "thresholds:\n  dropped: [rate < 1%]\n",
        "dropped",
        "count dropped_iterations",
    );
}
