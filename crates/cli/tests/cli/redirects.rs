//! Redirects: `--redirects N` on `throng http` and `redirects:` in
//! scenarios, against nginx (`return 301 …`). Assertions are on counts:
//! final statuses, hops, error classes, connections.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Nginx, assert_books_balance, http, output, schema_violations, throng};
use throng_result::RunResult;

/// nginx with a redirect chain, a loop, a redirect without a Location,
/// method-checking ends and a hop to `other` (another origin).
fn server(other: u16) -> Nginx {
    Nginx::start(&format!(
        "location = /start {{ return 301 /middle; }}\n\
         location = /middle {{ return 302 http://127.0.0.1:$server_port/end; }}\n\
         location = /end {{ return 200 \"end\"; }}\n\
         location = /loop {{ return 302 /loop; }}\n\
         location = /nolocation {{ return 302; }}\n\
         location = /garbage {{ return 302 \"ftp://nowhere/x\"; }}\n\
         location = /tohttps {{ return 302 https://127.0.0.1:$server_port/end; }}\n\
         location = /cross {{ return 302 http://127.0.0.1:{other}/there; }}\n\
         location = /named {{ return 302 http://other.invalid/there; }}\n\
         location = /post303 {{ return 303 /must-get; }}\n\
         location = /post307 {{ return 307 /must-post; }}\n\
         location = /must-get {{ set $m \"$request_method:$http_content_length\"; \
             if ($m = \"GET:\") {{ return 200; }} return 405; }}\n\
         location = /must-post {{ set $m \"$request_method:$http_content_length\"; \
             if ($m = \"POST:5\") {{ return 200; }} return 405; }}\n"
    ))
}

fn other() -> Nginx {
    // 403 when credentials followed the request to another origin.
    Nginx::start(
        "location = /there { set $c \"$http_authorization$http_cookie\"; \
         if ($c) { return 403; } return 200 \"there\"; }\n",
    )
}

fn status(r: &RunResult, code: u16) -> u64 {
    r.measurements.status.get(&code).copied().unwrap_or(0)
}

#[test]
fn http_follows_only_when_asked_and_counts_the_final_status() {
    let o = other();
    let s = server(o.port);
    let url = s.url("/start");

    // Default 0, as ab: the 301 is the final response (ok under 200-399).
    let run = http(&[&url, "-n", "20", "-c", "2", "-t", "1"]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        (r.measurements.requests.ok, status(r, 301)),
        (20, 20),
        "{}",
        run.stdout()
    );
    assert_eq!(r.measurements.redirects, 0);
    assert!(!run.stdout().contains("redirects"), "{}", run.stdout());

    // Two hops (relative, then absolute) to a 200.
    let run = http(&[&url, "-n", "20", "-c", "2", "-t", "1", "--redirects", "5"]);
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (20, 20), "{}", run.stdout());
    assert_eq!(
        m.status.values().sum::<u64>(),
        20,
        "one status per request: the final one"
    );
    assert_eq!(status(r, 200), 20);
    assert_eq!(m.redirects, 40, "two hops each");
    // Same origin, keep-alive: the hops reuse the two connections.
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
    assert!(run.stdout().contains("redirects     40 followed"), "{}", run.stdout());
    assert!(run.stdout().contains("following up to 5 redirects"), "{}", run.stdout());
    // Every hop's bytes counted: three requests' worth per request.
    assert!(m.bytes.sent > 3 * 20 * 40, "{:?}", m.bytes);
    assert!(schema_violations(&run.json).is_empty());
    // Each request's row says how many hops it took.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    let run = http(&[
        &url,
        "-n",
        "6",
        "-c",
        "1",
        "-t",
        "1",
        "--redirects",
        "5",
        "--csv-requests",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(run.result().measurements.redirects, 12);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().ends_with(",iteration,redirects,trace_id"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 6, "{text}");
    assert!(
        rows.iter().all(|r| r.ends_with(",2,") && r.contains(",ok,200,")),
        "{text}"
    );
    // Exactly enough hops is not too many.
    let r = http(&[&url, "-n", "5", "-c", "1", "-t", "1", "--redirects", "2"]);
    assert_eq!(status(r.result(), 200), 5);
}

#[test]
fn loops_and_bad_locations_are_error_classes() {
    let o = other();
    let s = server(o.port);
    let run = http(&[&s.url("/loop"), "-n", "10", "-c", "1", "-t", "1", "--redirects", "3"]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.requests.error("redirect.too_many"),
        10,
        "{}",
        run.stdout()
    );
    assert_eq!(r.measurements.redirects, 30, "3 hops followed, the 4th refused");
    assert!(run.stdout().contains("redirect.too_many"), "{}", run.stdout());
    assert_eq!(run.code(), 1, "a run whose requests all failed exits 1");

    for path in ["/nolocation", "/garbage"] {
        let run = http(&[&s.url(path), "-n", "6", "-c", "2", "-t", "1", "--redirects", "2"]);
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(
            r.measurements.requests.error("redirect.bad_location"),
            6,
            "{path}: {}",
            run.stdout()
        );
        assert_eq!(r.measurements.redirects, 0);
    }
    // An http run has no TLS to follow a redirect to https with.
    let run = http(&[&s.url("/tohttps"), "-n", "4", "-c", "1", "-t", "1", "--redirects", "2"]);
    assert_eq!(
        run.result().measurements.requests.error("redirect.scheme"),
        4,
        "{}",
        run.stdout()
    );
    assert_books_balance(run.result());
}

#[test]
fn another_origin_gets_its_own_connection() {
    let o = other();
    let s = server(o.port);
    let run = http(&[
        &s.url("/cross"),
        "-n",
        "10",
        "-c",
        "1",
        "-t",
        "1",
        "--redirects",
        "1",
        "-H",
        "Authorization: Bearer t0ken",
        "--cookie",
        "sid=1",
    ]);
    let r = run.result();
    assert_books_balance(r);
    let m = &r.measurements;
    assert_eq!(
        status(r, 200),
        10,
        "no credentials went to the other origin: {}",
        run.stdout()
    );
    assert_eq!(m.redirects, 10);
    // One to the target, kept; one per request to the other origin.
    assert_eq!(m.connections.ok, 11, "{:?}", m.connections);
}

#[test]
fn hops_to_another_origin_take_the_runs_connect_to_and_resolve() {
    let o = other();
    let s = server(o.port);
    let run_with = |extra: &[&str]| {
        let url = s.url("/named");
        let mut args = vec![url.as_str(), "-n", "4", "-c", "1", "-t", "1", "--redirects", "1"];
        args.extend_from_slice(extra);
        let run = http(&args);
        assert_books_balance(run.result());
        run
    };
    // other.invalid resolves nowhere: the Location is unusable.
    let r = run_with(&[]);
    assert_eq!(
        r.result().measurements.requests.error("redirect.bad_location"),
        4,
        "{}",
        r.stdout()
    );
    // --connect-to sends the hop to the other nginx.
    let rule = format!("other.invalid:80:127.0.0.1:{}", o.port);
    let r = run_with(&["--connect-to", &rule]);
    assert_eq!(status(r.result(), 200), 4, "{}", r.stdout());
    assert_eq!(r.result().measurements.redirects, 4);
    // --resolve gives the name an address (port 80 there: nothing listens).
    let r = run_with(&["--resolve", "other.invalid:80:127.0.0.1"]);
    assert_eq!(r.result().measurements.requests.error("refused"), 4, "{}", r.stdout());
    // -4 keeps no IPv6 address of the rule's: none left.
    let v6 = format!("other.invalid:80:[::1]:{}", o.port);
    let r = run_with(&["--connect-to", &v6, "-4"]);
    let m = &r.result().measurements;
    assert_eq!(m.requests.error("redirect.bad_location"), 4, "{:?}", m.requests);
}

#[test]
fn methods_and_bodies_follow_the_status() {
    let o = other();
    let s = server(o.port);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, "hello").unwrap();
    let body = body.to_str().unwrap();
    // 303: GET without a body; 307: POST with it. The ends answer 405 otherwise.
    for path in ["/post303", "/post307"] {
        let run = http(&[
            &s.url(path),
            "-n",
            "8",
            "-c",
            "2",
            "-t",
            "1",
            "-m",
            "POST",
            "--body",
            body,
            "--redirects",
            "1",
        ]);
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(
            (status(r, 200), r.measurements.redirects),
            (8, 8),
            "{path}: {}",
            run.stdout()
        );
    }
}

#[test]
fn bad_redirects_flag_exits_2() {
    let out = output(throng().args(["http", "http://127.0.0.1:9/", "--redirects", "101"]));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--redirects") && err.contains("100"), "{err}");
}

/// `throng run` on a scenario written to a temporary file.
fn run_scenario(yaml: &str) -> (RunResult, String, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, yaml).unwrap();
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json).arg("--quiet"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = RunResult::from_reader(
        std::fs::File::open(&json)
            .unwrap_or_else(|_| panic!("no result: {stdout}{}", String::from_utf8_lossy(&out.stderr))),
    )
    .unwrap();
    (r, stdout, json, dir)
}

#[test]
fn scenario_requests_follow_ten_by_default_and_redirects_zero_stops() {
    let o = other();
    let s = server(o.port);
    let yaml = format!(
        "target: http://127.0.0.1:{port}\n\
         scenarios:\n  one:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 3\n    flow:\n\
         \x20     - request: {{ name: followed, path: /start, check: {{ final: {{ status: [200] }} }} }}\n\
         \x20     - request: {{ name: kept, path: /start, redirects: 0, check: {{ raw: {{ status: [301] }} }} }}\n\
         \x20     - request: {{ name: cross, path: /cross, check: {{ there: {{ body_contains: there }} }} }}\n\
         \x20     - request: {{ name: loop, path: /loop, redirects: 2 }}\n",
        port = s.port
    );
    let (r, stdout, json, _dir) = run_scenario(&yaml);
    assert_books_balance(&r);
    let v = schema_violations(&json);
    assert!(v.is_empty(), "{v:#?}");
    let m = &r.measurements;
    let st = m.scenario.as_ref().unwrap();
    for check in ["final", "raw", "there"] {
        let c = &st.checks[check];
        assert_eq!((c.passes, c.fails), (6, 0), "{check}: {stdout}");
    }
    assert_eq!(m.requests.error("redirect.too_many"), 6, "{stdout}");
    // 2 hops for /start, 1 for /cross, 2 for the loop before it is refused.
    assert_eq!(m.redirects, 6 * (2 + 1 + 2), "{stdout}");
    assert_eq!(status(&r, 301), 6, "only the request told not to follow ends on a 301");
    assert!(stdout.contains("redirect.too_many"), "{stdout}");

    // A defaults: redirects: 0 turns following off for every request.
    let yaml = yaml.replace("scenarios:", "defaults:\n  redirects: 0\nscenarios:");
    let (r, stdout, _, _dir) = run_scenario(&yaml);
    assert_eq!(
        r.measurements.redirects,
        6 * 2,
        "only the loop's own redirects: 2 follows: {stdout}"
    );
    assert_eq!(status(&r, 301), 12, "{stdout}");
}
