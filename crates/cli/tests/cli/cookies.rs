//! Cookies: `--cookie` on `throng http` and the scenario VUs' cookie jars,
//! against nginx, which answers 200 only when it received the cookies
//! expected (`$http_cookie`) and 403 otherwise. Cookie values are secrets:
//! never in a result or a report.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Nginx, assert_books_balance, http, output, schema_violations, throng};
use throng_result::RunResult;

const SECRET: &str = "s3cretCookieValue";

fn server() -> Nginx {
    Nginx::start(&format!(
        "location = /c {{ if ($http_cookie = \"a=v4lue1; b={SECRET}\") {{ return 200; }} return 403; }}\n\
         location = /login {{ add_header Set-Cookie \"sid={SECRET}; Path=/\"; return 200; }}\n\
         location = /scoped {{ add_header Set-Cookie \"deep=1; Path=/app\"; return 200; }}\n\
         location = /private {{ if ($http_cookie = \"sid={SECRET}\") {{ return 200; }} return 403; }}\n\
         location = /app/private {{ if ($http_cookie = \"deep=1; sid={SECRET}\") {{ return 200; }} return 403; }}\n\
         location = /logout {{ add_header Set-Cookie \"sid=; Path=/; Max-Age=0\"; return 200; }}\n\
         location = /redirect-login {{ add_header Set-Cookie \"sid={SECRET}; Path=/\"; return 302 /private; }}\n"
    ))
}

fn status(r: &RunResult, code: u16) -> u64 {
    r.measurements.status.get(&code).copied().unwrap_or(0)
}

#[test]
fn http_sends_the_cookies_given_and_never_shows_them() {
    let s = server();
    let run = http(&[
        &s.url("/c"),
        "-n",
        "10",
        "-c",
        "2",
        "-t",
        "1",
        "--cookie",
        "a=v4lue1",
        "--cookie",
        &format!("b={SECRET}"),
        "--expect-status",
        "200",
    ]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(status(r, 200), 10, "nginx received both cookies: {}", run.stdout());
    let json = std::fs::read_to_string(&run.json).unwrap();
    assert!(!json.contains(SECRET) && !run.stdout().contains(SECRET) && !run.stderr().contains(SECRET));
    assert!(json.contains("<redacted>"), "the Cookie header is shown redacted");
    assert!(schema_violations(&run.json).is_empty());

    // Without them, the server says no.
    let run = http(&[&s.url("/c"), "-n", "4", "-c", "1", "-t", "1"]);
    assert_eq!(status(run.result(), 403), 4);

    // A malformed cookie is a usage error that names the flag, not the value.
    let out = output(throng().args(["http", &s.url("/c"), "--cookie", &format!("bad;{SECRET}")]));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cookie") && !err.contains(SECRET), "{err}");
}

/// `throng run` on `yaml` with TARGET replaced; the result and stdout.
fn run_scenario(yaml: &str, target: &str) -> (RunResult, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml.replace("TARGET", target)).unwrap();
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json).arg("--quiet"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|_| panic!("no result: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    assert!(schema_violations(&json).is_empty());
    (RunResult::from_reader(text.as_bytes()).unwrap(), stdout, text)
}

/// A flow that asks for a private page first, then logs in: with a jar
/// emptied per iteration the private page never sees the cookie.
fn flow(cookies: &str) -> String {
    format!(
        "target: TARGET\n\
         scenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    {cookies}\n    flow:\n\
         \x20     - request: {{ name: before, path: /private, expect: [200, 403] }}\n\
         \x20     - request: {{ name: login, path: /login }}\n\
         \x20     - request: {{ name: after, path: /private, expect: [200, 403] }}\n"
    )
}

#[test]
fn scenario_jars_are_per_vu_and_emptied_per_iteration_unless_kept() {
    let s = server();
    let target = format!("http://127.0.0.1:{}", s.port);

    // Default: per-iteration. `before` never has the cookie, `after` always.
    let (r, stdout, json) = run_scenario(&flow(""), &target);
    assert_books_balance(&r);
    assert_eq!((status(&r, 403), status(&r, 200)), (3, 6), "{stdout}");
    assert!(!json.contains(SECRET) && !stdout.contains(SECRET));

    // keep: only the first iteration's `before` misses it.
    let (r, stdout, _) = run_scenario(&flow("cookies: keep"), &target);
    assert_eq!((status(&r, 403), status(&r, 200)), (1, 8), "{stdout}");

    // off: no jar at all.
    let (r, stdout, _) = run_scenario(&flow("cookies: off"), &target);
    assert_eq!((status(&r, 403), status(&r, 200)), (6, 3), "{stdout}");
}

#[test]
fn cookies_follow_paths_deletion_and_redirects() {
    let s = server();
    let target = format!("http://127.0.0.1:{}", s.port);
    let yaml = "target: TARGET\n\
         scenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 2\n    flow:\n\
         \x20     - request: { path: /login }\n\
         \x20     - request: { path: /scoped }\n\
         \x20     - request: { name: deep, path: /app/private, check: { both: { status: [200] } } }\n\
         \x20     - request: { name: shallow, path: /private, check: { sid only: { status: [200] } } }\n\
         \x20     - request: { path: /logout }\n\
         \x20     - request: { name: gone, path: /private, expect: [403] }\n\
         \x20     - request: { name: via redirect, path: /redirect-login, check: { set on the 302: { status: [200] } } }\n";
    let (r, stdout, json) = run_scenario(yaml, &target);
    assert_books_balance(&r);
    let st = r.measurements.scenario.as_ref().unwrap();
    for check in ["both", "sid only", "set on the 302"] {
        let c = &st.checks[check];
        assert_eq!((c.passes, c.fails), (4, 0), "{check}: {stdout}");
    }
    assert_eq!(r.measurements.requests.ok, 4 * 7, "{stdout}");
    assert!(!json.contains(SECRET));
}
