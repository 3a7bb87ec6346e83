//! Scenario requests over HTTP/2 and HTTP/3 that a redirect sends to
//! another origin (issue 13): the hop goes on a connection of its own
//! (HTTP/1.1 to http://; to https://, HTTP/2 or HTTP/1.1 as ALPN chose), a
//! hop back to the target's origin on the VU's own connection. Two nginx:
//! A, the target (h2c, or TLS with ALPN h2), and B, the other origin, whose
//! bodies tell what B was sent; aioquic's HTTP/3 server as a target that
//! redirects to B.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{Nginx, assert_books_balance, scenario};

/// B's locations, the other origin: a landing page that sets a cookie and says which
/// credentials and cookies it was sent; a redirect back to A (whose origin
/// comes as `home`) for the A → B → A loop; a middle hop that tells A, in
/// the query, which `Authorization` it got.
fn other_locations(log: &Path) -> String {
    format!(
        r#"
    location = /landing {{
        access_log {log};
        add_header Set-Cookie "b=2; Path=/" always;
        default_type text/plain;
        return 200 "landed auth=[$http_authorization] cookie=[$http_cookie]";
    }}
    location = /back {{
        access_log {log};
        return 302 $arg_home/loop;
    }}
    location = /mid {{
        access_log {log};
        return 302 $arg_home/end?b_saw=$http_authorization;
    }}
"#,
        log = log.display()
    )
}

/// A's locations: redirects to B (`scheme://host:port` in `b`), and the end
/// of the A → B → A chain, which says what A and B were sent.
fn target_locations(b: &str, log: &Path) -> String {
    format!(
        r#"
    access_log {log};
    location = /start {{ return 302 {b}/landing; }}
    location = /loop {{ return 302 {b}/back?home=$scheme://$host:$server_port; }}
    location = /there-and-back {{ return 302 {b}/mid?home=$scheme://$host:$server_port; }}
    location = /to-https {{ return 302 https://$host:$server_port/end; }}
    location = /end {{
        default_type text/plain;
        return 200 "home auth=[$http_authorization] b_saw=[$arg_b_saw]";
    }}
"#,
        log = log.display()
    )
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn count(lines: &[String], needle: &str) -> usize {
    lines.iter().filter(|l| l.contains(needle)).count()
}

/// 2 VUs × 5 iterations of: /start (A → B, a credential along), again (B
/// now gets the cookie it set), /there-and-back (A → B → A).
fn flow(target: &str, extra: &str) -> String {
    format!(
        r#"target: {target}
{extra}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    max_duration: 60s
    flow:
      - request:
          name: away
          path: /start
          redirects: 3
          headers: {{ Authorization: "Bearer s3cret" }}
          expect: [200]
          check:
            landed without the credential: {{ body_contains: "landed auth=[] " }}
      - request:
          name: again
          path: /start
          redirects: 3
          expect: [200]
          check:
            the hop's cookie came back: {{ body_contains: "b=2" }}
      - request:
          name: round trip
          path: /there-and-back
          redirects: 3
          headers: {{ Authorization: "Bearer s3cret" }}
          expect: [200]
          check:
            home got the credential, B did not: {{ body_contains: "home auth=[Bearer s3cret] b_saw=[]" }}
"#
    )
}

/// What every run of `flow` shows: 30 requests ok with 200, 40 hops (one
/// per /start, two per round trip), the checks all passed, a connection per
/// VU to A and one per request to B, which `b_speaks` (`HTTP/1.1`).
fn assert_flow_ran(r: &common::Run, b: &[String], b_speaks: &str) {
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (30, 30), "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&30), "{:?}", m.status);
    assert_eq!(m.redirects, 10 + 10 + 20);
    let st = m.scenario.as_ref().unwrap();
    for step in ["away", "again", "round trip"] {
        let t = &st.tags[&format!("step:{step}")];
        assert_eq!((t.requests, t.failed), (10, 0), "step {step}");
        assert!(r.stdout().contains(step), "no line for step {step}: {}", r.stdout());
    }
    assert_eq!(st.checks.len(), 3);
    for (name, c) in &st.checks {
        assert_eq!((c.passes, c.fails), (10, 0), "check '{name}'");
    }
    // A: one connection per VU, kept; B: one per request that went there.
    assert_eq!(m.connections.ok, 2 + 30, "{:?}", m.connections);
    assert_eq!(b.len(), 30, "{b:#?}");
    assert_eq!(count(b, &format!("\"GET /landing {b_speaks}\" 200")), 20, "{b:#?}");
    assert_eq!(count(b, "\"GET /mid?home="), 10, "{b:#?}");
    assert!(r.stdout().contains("redirects"), "{}", r.stdout());
}

/// A (h2c) whose redirects go to B (HTTP/1.1), each logging to a file:
/// the logs' directory, A's and B's log, A and B.
fn h2c_and_http1() -> (tempfile::TempDir, PathBuf, PathBuf, Nginx, Nginx) {
    let logs = tempfile::tempdir().unwrap();
    let (a_log, b_log) = (logs.path().join("a.log"), logs.path().join("b.log"));
    let b = Nginx::start(&other_locations(&b_log));
    let a = Nginx::start_listen(
        "http2",
        "",
        &target_locations(&format!("http://127.0.0.1:{}", b.port), &a_log),
    );
    (logs, a_log, b_log, a, b)
}

#[test]
fn h2c_steps_follow_redirects_to_another_origin_and_back() {
    let (_logs, a_log, b_log, a, _b) = h2c_and_http1();
    let r = scenario(&flow(&format!("{{ url: '{}', http: 2 }}", a.url("")), ""));
    assert_flow_ran(&r, &lines(&b_log), "HTTP/1.1");
    // Every request to A came over HTTP/2: the first of each step, and
    // the round trip's hop back.
    let a_lines = lines(&a_log);
    assert_eq!(a_lines.len(), 40, "{a_lines:#?}");
    assert_eq!(count(&a_lines, " HTTP/2.0\" "), 40, "{a_lines:#?}");
    assert_eq!(count(&a_lines, "\"GET /end?b_saw= HTTP/2.0\" 200"), 10, "{a_lines:#?}");
    let x = r.result().measurements.multiplex.as_ref().unwrap();
    assert_eq!(x.connections, 2);
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (20, 20));
}

/// A (TLS, h2) and B over TLS listening with `b_listen`; `yaml(A's URL,
/// tls settings)` run against them: the run, and A's and B's access logs.
fn run_over_tls(b_listen: &str, yaml: impl Fn(&str, &str) -> String) -> (common::Run, Vec<String>, Vec<String>) {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let (a_log, b_log) = (logs.path().join("a.log"), logs.path().join("b.log"));
    let p = |name: &str| c.join(name).display().to_string();
    let certs = format!(
        "ssl_certificate {}; ssl_certificate_key {};",
        p("server.pem"),
        p("server.key")
    );
    let b = Nginx::start_listen(b_listen, &certs, &other_locations(&b_log));
    let a = Nginx::start_listen(
        "ssl http2",
        &certs,
        &target_locations(&format!("https://localhost:{}", b.port), &a_log),
    );
    let r = scenario(&yaml(
        &a.https("localhost", ""),
        &format!("tls: {{ cacert: '{}' }}", p("ca.pem")),
    ));
    let (a_lines, b_lines) = (lines(&a_log), lines(&b_log));
    (r, a_lines, b_lines)
}

#[test]
fn a_tls_h2_target_redirects_to_an_https_origin_in_the_protocol_it_chose() {
    // B chooses h2 by ALPN: the hops to it are streams.
    let (r, a_lines, b_lines) = run_over_tls("ssl http2", |a, tls| flow(&format!("{{ url: '{a}', http: 2 }}"), tls));
    assert_flow_ran(&r, &b_lines, "HTTP/2.0");
    let m = &r.result().measurements;
    // A TLS handshake per connection: 2 to A, 30 to B.
    assert_eq!(m.tls.as_ref().unwrap().handshakes, 32);
    assert_eq!(count(&a_lines, " HTTP/2.0\" "), 40);
    assert_eq!(count(&b_lines, " HTTP/2.0\" "), 30, "{b_lines:#?}");
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!(x.connections, 2 + 30, "{x:?}");
}

#[test]
fn a_scenarios_own_tls_h2_target_redirects_over_http1_where_the_origin_speaks_only_that() {
    // The file's target is plain http (and unused); B offers no h2.
    let (r, a_lines, b_lines) = run_over_tls("ssl", |a, tls| {
        flow("'http://127.0.0.1:9'", tls).replace("  s:\n", &format!("  s:\n    target: {{ url: '{a}', http: 2 }}\n"))
    });
    assert_flow_ran(&r, &b_lines, "HTTP/1.1");
    let m = &r.result().measurements;
    assert_eq!(m.tls.as_ref().unwrap().handshakes, 32);
    assert_eq!(count(&a_lines, " HTTP/2.0\" "), 40);
    assert_eq!(count(&b_lines, " HTTP/1.1\" "), 30, "{b_lines:#?}");
    assert_eq!(m.multiplex.as_ref().unwrap().connections, 2);
}

#[test]
fn an_http1_step_of_an_h2_scenario_offers_no_h2_to_the_origin_it_is_sent_to() {
    // The step's own http: 1.1 follows its redirect over HTTP/1.1 (crate
    // redirect::follow), with the TLS client of the file: not the
    // scenario's target's, which offers only h2.
    let (r, _, b_lines) = run_over_tls("ssl http2", |a, tls| {
        format!(
            "target: 'http://127.0.0.1:9'\n{tls}\nscenarios:\n  s:\n    target: {{ url: '{a}', http: 2 }}\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    flow:\n      - request: {{ name: old, path: /start, http: 1.1, check: {{ landed: {{ body_contains: landed }} }} }}\n"
        )
    });
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let m = &r.result().measurements;
    assert_eq!(
        (m.requests.attempted, m.requests.ok, m.redirects),
        (3, 3, 3),
        "{:?}",
        m.requests
    );
    assert_eq!(count(&b_lines, "\"GET /landing HTTP/1.1\" 200"), 3, "{b_lines:#?}");
}

/// `throng run` of `yaml` as `scenario`, with `--csv-requests`: the run,
/// and each request's row as (step, outcome, status, redirects).
fn scenario_rows(yaml: &str) -> (common::Run, Vec<(String, String, String, u32)>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scenario.yaml");
    std::fs::write(&file, yaml).unwrap();
    let (json, csv) = (dir.path().join("result.json"), dir.path().join("rows.csv"));
    let out = common::output(
        common::throng()
            .arg("run")
            .arg(&file)
            .arg("--json")
            .arg(&json)
            .arg("--csv-requests")
            .arg(&csv)
            .args(["--threads", "1"]),
    );
    let text = std::fs::read_to_string(&csv).unwrap_or_default();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (step, outcome, status, redirects) = (col("step"), col("outcome"), col("status"), col("redirects"));
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[step].to_string(),
                f[outcome].to_string(),
                f[status].to_string(),
                f[redirects].parse().unwrap(),
            )
        })
        .collect();
    let result = common::read_result(&json);
    (common::Run::new(out, result, json, dir), rows)
}

#[test]
fn an_h2_loop_between_two_origins_ends_at_the_limit() {
    let (_logs, a_log, b_log, a, _b) = h2c_and_http1();
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 4\n    max_duration: 60s\n    flow:\n      - request: {{ name: loop, path: /loop, redirects: 3 }}\n      - request: {{ name: fine, path: /start }}\n      - request: {{ name: tls-less, path: /to-https }}\n",
        a.url("")
    );
    let (r, rows) = scenario_rows(&yaml);
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!(m.requests.attempted, 24, "{:?}", m.requests);
    // A → B → A → B, and B's redirect is one past the 3 allowed.
    assert_eq!(m.requests.error("redirect.too_many"), 8, "{:?}", m.requests);
    assert_eq!(m.requests.ok, 8, "{:?}", m.requests);
    // To https, and the file has no TLS: not followed.
    assert_eq!(m.requests.error("redirect.scheme"), 8, "{:?}", m.requests);
    // The hop to https counts: it was followed as far as it could go.
    assert_eq!(m.redirects, 8 * 3 + 8 + 8);
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.tags["step:loop"].requests, st.tags["step:loop"].failed), (8, 8));
    // Each loop went to B twice on one connection, to A twice on the VU's.
    let b_lines = lines(&b_log);
    assert_eq!(count(&b_lines, "\"GET /back?home="), 16, "{b_lines:#?}");
    let a_lines = lines(&a_log);
    assert_eq!(count(&a_lines, "\"GET /loop HTTP/2.0\" 302"), 16, "{a_lines:#?}");
    assert_eq!(m.connections.ok, 2 + 8 + 8, "{:?}", m.connections);
    assert!(r.stdout().contains("redirect.too_many"), "{}", r.stdout());
    // A row per request, its hops in `redirects` (no status: it ended in
    // an error, not a response).
    let mut seen: Vec<(String, String, String, u32)> = rows;
    seen.sort();
    seen.dedup();
    let row = |step: &str, outcome: &str, status: &str, hops: u32| (step.into(), outcome.into(), status.into(), hops);
    assert_eq!(
        seen,
        [
            row("fine", "ok", "200", 1),
            row("loop", "redirect.too_many", "", 3),
            row("tls-less", "redirect.scheme", "", 1),
        ]
    );
}

#[test]
fn an_h3_step_follows_a_redirect_to_an_http1_origin() {
    let (d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let b_log = logs.path().join("b.log");
    let b = Nginx::start(&other_locations(&b_log));
    let server = common::Aioquic::start(&c, d.path(), 0);
    let yaml = format!(
        "target: {{ url: '{}', http: 3 }}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 4\n    max_duration: 60s\n    flow:\n      - request:\n          name: away\n          path: '/301?http://127.0.0.1:{}/landing'\n          headers: {{ Authorization: 'Bearer s3cret' }}\n          check:\n            landed: {{ body_contains: 'landed auth=[] ' }}\n",
        server.url(""),
        c.join("ca.pem").display(),
        b.port
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (4, 4), "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&4));
    assert_eq!(m.redirects, 4);
    let st = m.scenario.as_ref().unwrap();
    assert_eq!(st.checks["landed"].passes, 4);
    assert_eq!(count(&lines(&b_log), "\"GET /landing HTTP/1.1\" 200"), 4);
    let stats = server.stop();
    assert_eq!(stats["requests"], 4, "{stats}");
}

#[test]
fn a_step_cut_off_on_its_hop_elsewhere_closes_that_connection() {
    // B takes connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let logs = tempfile::tempdir().unwrap();
    let locations = target_locations(&format!("http://127.0.0.1:{port}"), &logs.path().join("a.log"));
    // Over HTTP/2, and over HTTP/1.1 (crate::redirect::follow's hops).
    for (listen, http) in [("http2", "2"), ("", "1.1")] {
        let a = Nginx::start_listen(listen, "", &locations);
        let yaml = format!(
            "target: {{ url: '{}', http: {http} }}\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 1\n    duration: 300ms\n    graceful_stop: 0s\n    flow:\n      - request: {{ name: hang, path: /start, timeout: 60s }}\n",
            a.url("")
        );
        let r = scenario(&yaml);
        let res = r.result();
        assert_books_balance(res);
        let m = &res.measurements;
        assert_eq!(m.requests.attempted, 1, "http: {http}: {:?}", m.requests);
        assert_eq!(m.requests.error("interrupted"), 1, "http: {http}: {:?}", m.requests);
        assert_eq!(m.redirects, 1, "http: {http}");
        // The VU's connection to A and the hop's to B both opened and closed.
        assert_eq!(m.connections.ok, 2, "http: {http}: {:?}", m.connections);
        assert_eq!(
            m.phases["connection"].count(),
            2,
            "http: {http}: a connection's lifetime unrecorded"
        );
    }
    drop(silent);
}
