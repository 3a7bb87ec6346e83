//! Requests: headers, bodies, redirects and cookies, secrets, methods, statuses.

use super::*;

#[test]
fn framing_headers_and_control_characters_are_refused_where_written() {
    rejects(
        "User-Agent: throng-test",
        "User-Agent: throng-test\n    Content-Length: 5",
        "Content-Length: 5",
        "throng computes Content-Length",
    );
    rejects(
        "headers: { Authorization: \"Bearer {{token}}\" }",
        "headers: { Transfer-Encoding: chunked }",
        "Transfer-Encoding",
        "never chunks",
    );
    rejects(
        "User-Agent: throng-test",
        "User-Agent: \"throng\\vtest\"",
        "User-Agent",
        "control character \\u{b}",
    );
}

#[test]
fn max_body_is_a_size_with_a_default_and_a_limit() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.defaults.max_body, DEFAULT_MAX_BODY);
    let text = GOOD
        .replacen("timeout: 5s", "timeout: 5s\n  max_body: 4MiB", 1)
        .replacen("path: /me", "path: /me\n                max_body: 100", 1);
    let plan = parse(&text).unwrap();
    assert_eq!(plan.defaults.max_body, 4 << 20);
    let reqs = requests(&plan.scenarios[0].flow);
    assert_eq!((reqs[0].max_body, reqs[1].max_body), (4 << 20, 100));
    assert_eq!(parse_size("64KiB"), Ok(64 << 10));
    assert_eq!(parse_size(" 2 MB "), Ok(2_000_000));
    for bad in ["0", "65MiB", "1GiB", "x", "-1", "99999999999999999999"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    rejects("timeout: 5s", "timeout: 5s\n  max_body: 1GiB", "max_body", "not a size");
}

#[test]
fn redirects_and_cookies_have_defaults_and_limits() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.defaults.redirects, DEFAULT_REDIRECTS);
    assert_eq!(plan.scenarios[0].cookies, Cookies::PerIteration);
    let text = GOOD
        .replacen("timeout: 5s", "timeout: 5s\n  redirects: 3", 1)
        .replacen("path: /me", "path: /me\n                redirects: 0", 1)
        .replacen("executor: ramping-vus", "executor: ramping-vus\n    cookies: keep", 1);
    let plan = parse(&text).unwrap();
    let reqs = requests(&plan.scenarios[0].flow);
    assert_eq!(
        (plan.defaults.redirects, reqs[0].redirects, reqs[1].redirects),
        (3, 3, 0)
    );
    assert_eq!(plan.scenarios[0].cookies, Cookies::Keep);
    rejects(
        "timeout: 5s",
        "timeout: 5s\n  redirects: 101",
        "redirects: 101",
        "over the limit of 100",
    );
    rejects(
        "path: /me",
        "path: /me\n                redirects: 1000",
        "redirects: 1000",
        "over the limit of 100",
    );
    rejects(
        "executor: ramping-vus",
        "executor: ramping-vus\n    cookies: sometimes",
        "cookies",
        "per-iteration",
    );
}

#[test]
fn secret_headers_are_redacted_in_the_plan_a_result_keeps() {
    let text = GOOD.replacen(
        "User-Agent: throng-test",
        "User-Agent: throng-test\n    X-Api-Key: k3y-s3cret",
        1,
    );
    let plan = parse(&text).unwrap();
    assert_eq!(plan.secret_headers, ["authorization"]);
    let plan = plan.with_secret_headers(&["X-API-KEY".to_string()]).unwrap();
    assert_eq!(plan.secret_headers, ["authorization", "x-api-key"]);
    let json = serde_json::to_string(&plan.redacted()).unwrap();
    assert!(!json.contains("k3y-s3cret") && !json.contains("Bearer"), "{json}");
    assert!(json.contains("throng-test"), "{json}");
    let note = plan.redaction_note().unwrap();
    assert!(note.contains("Authorization, X-Api-Key"), "{note}");
    // What is sent is untouched.
    assert_eq!(plan.defaults.headers[1].1.source(), "k3y-s3cret");
}

#[test]
fn standard_methods_are_capitalised() {
    let me = |plan: &ScenarioPlan| -> Request {
        let Step::Group { flow, .. } = &plan.scenarios[0].flow[2] else {
            panic!("a group")
        };
        let Step::Request(r) = &flow[0] else {
            panic!("a request")
        };
        (**r).clone()
    };
    for (written, sent) in [
        ("get", "GET"),
        ("Patch", "PATCH"),
        ("delete", "DELETE"),
        ("PURGE", "PURGE"),
        ("propfind", "propfind"),
    ] {
        let plan =
            parse(&GOOD.replacen("path: /me", &format!("path: /me\n                method: {written}"), 1)).unwrap();
        let r = me(&plan);
        assert_eq!(r.method, sent);
        assert_eq!(r.name, format!("{sent} /me"));
    }
    for bad in ["GE T", "\"\"", "GET/1", "\"PÖST\""] {
        let e = rejects(
            "path: /me",
            &format!("path: /me\n                method: {bad}"),
            "method:",
            "is not an HTTP method: write one of GET, HEAD, POST",
        );
        assert_eq!(e.column, 17, "{e}");
    }
    let e = rejects(
        "path: /me",
        &format!("path: /me\n                method: {}", "M".repeat(70_000)),
        "method:",
        "a method of 70000 bytes is no HTTP method",
    );
    assert!(e.to_string().len() < 300, "{e}");
}

#[test]
fn statuses_are_real_and_listed() {
    for (to, at, message) in [
        (
            "expect: []",
            "expect: []",
            "expect: is empty, so every response would count as failed",
        ),
        ("expect: [600]", "expect: [600]", "statuses run from 100 to 599"),
        ("expect: [99]", "expect: [99]", "statuses run from 100 to 599"),
        ("expect: [\"300-200\"]", "expect:", "low to high"),
        ("expect: [6xx]", "expect:", "statuses run from 100 to 599"),
    ] {
        rejects("expect: [200]", to, at, message);
    }
    rejects(
        "  timeout: 5s",
        "  timeout: 5s\n  expect: []",
        "expect: []",
        "expect: is empty",
    );
    let check = "is ok: { status: [200] }";
    rejects(
        check,
        "is ok: { status: [] }",
        "is ok:",
        "check 'is ok': status: is empty",
    );
    rejects(
        check,
        "is ok: { status: [200, 999] }",
        "is ok:",
        "check 'is ok': status 999: codes run from 100 to 599",
    );
    rejects(check, "is ok: { status: [70000] }", "is ok:", "invalid value");
}
