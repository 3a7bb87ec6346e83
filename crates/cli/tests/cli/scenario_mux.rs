//! Scenario files over HTTP/2 and HTTP/3 (`target: { url, http: 2 | 3 }`):
//! nginx with h2c (prior knowledge) and with TLS (ALPN h2), and aioquic's
//! HTTP/3 server (scripts/h3_server.py). Each VU holds its own connection;
//! captures, checks, cookies, expect and redirects work on its streams;
//! the books balance and the server saw the protocol.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{FaultServer, Nginx, access_log, assert_books_balance, output, scenario, schema_violations, throng};

/// A login that sets a cookie and returns a token, a page that wants both,
/// and a redirect to it.
fn locations(log: &Path) -> String {
    format!(
        r#"
    access_log {};
    location = /login {{
        if ($request_method != POST) {{ return 405; }}
        if ($http_content_type != "application/json") {{ return 415; }}
        add_header Set-Cookie "sid=s3cr3t; Path=/" always;
        default_type application/json;
        return 200 '{{"token":"t-42"}}';
    }}
    location = /me {{
        if ($http_cookie !~ "sid=s3cr3t") {{ return 403; }}
        if ($arg_token != "t-42") {{ return 401; }}
        default_type text/plain;
        return 200 "hello me";
    }}
    location = /moved {{ return 302 /me?token=t-42; }}
    location = /loop {{ return 302 /loop; }}
    location = /away {{ return 302 http://127.0.0.2:9/; }}
"#,
        log.display()
    )
}

/// The flow: login (JSON body, capture from JSON, check a header), then a
/// page wanting the captured token and the cookie (query template, body
/// check), then a redirect followed on the same connection.
const FLOW: &str = r#"
TLS
scenarios:
  s:
    executor: per-vu-iterations
    vus: 3
    iterations: 10
    max_duration: 60s
    flow:
      - request:
          name: login
          path: /login
          json: { user: "u{{vu}}" }
          expect: [200]
          capture:
            token: { json: /token }
          check:
            sets a cookie: { header: set-cookie, contains: sid= }
      - think: 1ms
      - request:
          name: me
          path: /me
          query: { token: "{{token}}" }
          expect: [200]
          check:
            says hello: { body_contains: hello }
      - request:
          name: moved
          path: /moved
          expect: [200]
thresholds:
  checks: [rate > 0.99]
"#;

/// What every run of FLOW shows: 3 VUs × 10 iterations × 3 steps, all ok,
/// every check passed, one connection per VU carrying its 100 streams.
fn assert_flow_ran(r: &common::Run, protocol: &str) {
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let violations = schema_violations(&r.json);
    assert!(violations.is_empty(), "schema violations: {violations:#?}");
    let m = &res.measurements;
    assert_eq!(m.requests.attempted, 90, "{:?}", m.requests);
    assert_eq!(m.requests.ok, 90, "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&90));
    // The redirect's 302 is a hop, not a request.
    assert_eq!(m.redirects, 30);
    let st = m.scenario.as_ref().unwrap();
    assert_eq!(st.iterations, 30);
    for step in ["login", "me", "moved"] {
        let t = &st.tags[&format!("step:{step}")];
        assert_eq!((t.requests, t.failed), (30, 0), "step {step}");
    }
    for (name, c) in &st.checks {
        assert_eq!((c.passes, c.fails), (30, 0), "check '{name}'");
    }
    assert_eq!(st.checks.len(), 2);
    // One connection per VU, kept for all its steps.
    assert_eq!(m.connections.ok, 3, "{:?}", m.connections);
    let x = m.multiplex.as_ref().expect("a multiplexed run has multiplex figures");
    assert_eq!(x.protocols.get(protocol), Some(&3), "{x:?}");
    assert_eq!(x.peak_streams_per_connection, 1, "a VU's steps are sequential");
    assert_eq!(x.connections, 3);
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (40, 40));
    assert!(res.thresholds_passed(), "{:?}", res.thresholds);
    for step in ["login", "me", "moved"] {
        assert!(r.stdout().contains(step), "no line for step {step}: {}", r.stdout());
    }
}

fn assert_nginx_saw_http2(lines: &[String]) {
    assert_eq!(lines.len(), 120, "90 requests and 30 redirect hops");
    assert!(lines.iter().all(|l| l.contains(" HTTP/2.0\" ")), "{lines:#?}");
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(count("\"POST /login HTTP/2.0\" 200"), 30);
    // The captured token went out in the query, with the cookie (else 401, 403).
    assert_eq!(count("\"GET /me?token=t-42 HTTP/2.0\" 200"), 60);
    assert_eq!(count("\"GET /moved HTTP/2.0\" 302"), 30);
}

#[test]
fn an_h2c_scenario_captures_checks_and_keeps_cookies_on_each_vus_connection() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = Nginx::start_listen("http2", "", &locations(&log));
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\n{}",
        nginx.url(""),
        FLOW.replace("TLS", "")
    );
    let r = scenario(&yaml);
    assert_flow_ran(&r, "h2");
    // No TLS: the h2 preface is the handshake.
    let m = &r.result().measurements;
    assert_eq!(m.phases["handshake"].count(), 3);
    assert!(m.tls.is_none());
    assert_nginx_saw_http2(&access_log(&log));
    assert!(
        r.stdout().contains(&format!("→ {} over HTTP/2", nginx.url(""))),
        "{}",
        r.stdout()
    );
    match &r.result().plan {
        throng_result::Plan::Run(p) => assert_eq!(p.target.http, throng_plan::HttpVersion::Http2),
        other => panic!("a scenario plan, not {other:?}"),
    }
}

#[test]
fn a_head_step_s_content_length_announces_no_body() {
    let nginx = Nginx::start_listen(
        "http2",
        "",
        r#"location = /hello { default_type text/plain; return 200 "hello"; }"#,
    );
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    flow:\n      - request: {{ name: head, method: HEAD, path: /hello, expect: [200] }}\n      - request: {{ name: get, path: /hello, expect: [200] }}\n",
        nginx.url("")
    );
    let r = scenario(&yaml);
    assert_books_balance(r.result());
    let m = &r.result().measurements;
    // The HEAD's `content-length: 5` is the GET's body, not one it owes.
    assert_eq!(m.requests.ok, 6, "{:?}", m.requests);
    assert_eq!(m.bytes.received_body, 3 * 5, "{:?}", m.bytes);
}

#[test]
fn a_tls_h2_scenario_negotiates_h2_by_alpn() {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let p = |name: &str| c.join(name).display().to_string();
    let nginx = common::nginx_tls(&c, "ssl http2", false, "", &locations(&log));
    let yaml = format!(
        "target:\n  url: {}\n  http: 2\n{}",
        nginx.https("localhost", ""),
        FLOW.replace("TLS", &format!("tls: {{ cacert: '{}' }}", p("ca.pem")))
    );
    let r = scenario(&yaml);
    assert_flow_ran(&r, "h2");
    let m = &r.result().measurements;
    assert_eq!(m.tls.as_ref().unwrap().handshakes, 3);
    assert_nginx_saw_http2(&access_log(&log));
}

#[test]
fn http2_against_a_server_without_it_is_refused_before_the_run() {
    let (_d, c) = common::certs();
    let p = |name: &str| c.join(name).display().to_string();
    // TLS without h2: ALPN says http/1.1 (or nothing).
    let nginx = common::nginx_tls(&c, "ssl", false, "", "location / { return 200; }");
    let yaml = format!(
        "target: {}\ntls: {{ cacert: '{}' }}\nscenarios:\n  plain:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow: [{{ request: {{ path: / }} }}]\n  fast:\n    target: {{ http: 2 }}\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow: [{{ request: {{ path: / }} }}]\n",
        nginx.https("localhost", "/"),
        p("ca.pem")
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 2, "a configuration error: {}{}", r.stdout(), r.stderr());
    assert!(r.result.is_none(), "nothing ran");
    assert!(
        r.stderr().contains("scenario fast's target") && r.stderr().contains("does not speak HTTP/2"),
        "{}",
        r.stderr()
    );
    assert!(r.stderr().contains("http: 1.1"), "says what to do: {}", r.stderr());
    // HTTP/1.1 in the clear is no h2c server either.
    let plain = Nginx::start("location / { return 200; }");
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow: [{{ request: {{ path: / }} }}]\n",
        plain.url("")
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 2, "{}{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("HTTP/1.x in the clear"), "{}", r.stderr());
}

#[test]
fn http3_against_a_server_without_it_is_refused_before_the_run() {
    let (_d, c) = common::certs();
    // nginx over TCP only: nothing answers QUIC on its port.
    let nginx = common::nginx_tls(&c, "ssl", false, "", "location / { return 200; }");
    let yaml = format!(
        "target: {}\ntls: {{ cacert: '{}' }}\ndefaults: {{ timeout: 300ms }}\nscenarios:\n  tcp:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow: [{{ request: {{ path: / }} }}]\n  quic:\n    target: {{ http: 3 }}\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow: [{{ request: {{ path: / }} }}]\n",
        nginx.https("localhost", "/"),
        c.join("ca.pem").display()
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 2, "a configuration error: {}{}", r.stdout(), r.stderr());
    assert!(r.result.is_none(), "nothing ran");
    let err = r.stderr();
    assert!(
        err.contains("scenario quic's target") && err.contains("does not speak HTTP/3"),
        "{err}"
    );
    assert!(
        err.contains("no QUIC handshake on UDP port"),
        "says what happened: {err}"
    );
    assert!(err.contains("http: 2 or http: 1.1"), "says what to do: {err}");
}

#[test]
fn scenarios_of_one_file_speak_their_own_protocols() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    // nginx's plain `http2` port speaks h2c only: an HTTP/1.1 request there
    // would fail, and the HTTP/1.1 server never sees HTTP/2.
    let h2c = Nginx::start_listen("http2", "", &locations(&log));
    let h1 = Nginx::start("location / { return 200 'one'; }");
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\nscenarios:\n  old:\n    target: {}\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 5\n    flow: [{{ request: {{ name: old, path: /, check: {{ one: {{ body_contains: one }} }} }} }}]\n  new:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 5\n    flow: [{{ request: {{ name: new, path: /moved, expect: [302], redirects: 0 }} }}]\n",
        h2c.url(""),
        h1.url("/"),
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    assert!(
        schema_violations(&r.json).is_empty(),
        "{:?}",
        schema_violations(&r.json)
    );
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (20, 20));
    assert_eq!((m.status.get(&200), m.status.get(&302)), (Some(&10), Some(&10)));
    // Four VUs, a connection each; two of them HTTP/2.
    assert_eq!(m.connections.ok, 4);
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.protocols.get("h2"), x.connections), (Some(&2), 2));
    let st = m.scenario.as_ref().unwrap();
    assert_eq!(st.checks["one"].passes, 10);
    assert!(
        r.stdout().contains(&format!("→ {} over HTTP/2", h2c.url("")))
            && r.stdout().contains(&format!(") → {}\n", h1.url("/")))
            && !r.stdout().contains(&format!("{} over", h1.url("/"))),
        "{}",
        r.stdout()
    );
    match &res.plan {
        throng_result::Plan::Run(p) => {
            let old = p.scenarios.iter().find(|s| s.name == "old").unwrap();
            assert_eq!(
                old.target.as_ref().map(|t| t.http),
                Some(throng_plan::HttpVersion::Http1)
            );
            assert_eq!(p.target.http, throng_plan::HttpVersion::Http2);
        }
        other => panic!("a scenario plan, not {other:?}"),
    }
    let lines = access_log(&log);
    assert_eq!(lines.len(), 10);
    assert!(
        lines.iter().all(|l| l.contains("\"GET /moved HTTP/2.0\" 302")),
        "{lines:#?}"
    );
}

#[test]
fn an_http3_scenario_runs_on_aioquic_with_captures_and_checks() {
    let (d, c) = common::certs();
    let server = common::Aioquic::start(&c, d.path(), 0);
    // aioquic answers "aioquic\n" (Server: aioquic), or N bytes at /bytes/N:
    // the length captured from the first answer's header picks the next
    // path (/bytes/80), and the bodies' sizes show it.
    let yaml = format!(
        r#"
target: {{ url: 'https://localhost:{}', http: 3 }}
tls: {{ cacert: '{}' }}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    flow:
      - request:
          name: hello
          method: POST
          path: /
          form: {{ who: "vu{{{{vu}}}}" }}
          capture:
            len: {{ header: content-length }}
            word: {{ regex: "(aio)quic" }}
          check:
            from aioquic: {{ header: Server, contains: aioquic }}
      - request:
          name: sized
          path: "/bytes/{{{{len}}}}0"
          expect: [200]
          check:
            eighty bytes: {{ body_contains: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx }}
      - request:
          name: word
          path: "/{{{{word}}}}"
          check:
            says aioquic: {{ body_contains: aioquic }}
"#,
        server.port,
        c.join("ca.pem").display()
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    assert!(
        schema_violations(&r.json).is_empty(),
        "{:?}",
        schema_violations(&r.json)
    );
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (30, 30), "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&30));
    // "aioquic\n", 80 bytes, "aioquic\n" per iteration.
    assert_eq!(m.bytes.received_body, 10 * (8 + 80 + 8));
    let st = m.scenario.as_ref().unwrap();
    assert_eq!(st.iterations, 10);
    for (name, ch) in &st.checks {
        assert_eq!((ch.passes, ch.fails), (10, 0), "check '{name}'");
    }
    assert_eq!(st.checks.len(), 3);
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.protocols.get("h3"), x.connections), (Some(&2), 2));
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (15, 15));
    assert_eq!(m.connections.ok, 2);
    assert!(r.stdout().contains("over HTTP/3"), "{}", r.stdout());
    let stats = server.stop();
    // The VUs' two, and the pre-run check's handshake (no request on it).
    assert_eq!(stats["connections"], 3, "{stats}");
    assert_eq!(stats["requests"], 30, "{stats}");
    assert_eq!(stats["max_concurrent"], 1, "one stream at a time per VU: {stats}");
}

#[test]
fn an_h2_vu_reconnects_when_the_server_ends_its_connection() {
    // nginx ends an HTTP/2 connection (GOAWAY) after 4 requests on it.
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = Nginx::start_listen("http2", "keepalive_requests 4;", &locations(&log));
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 10\n    flow:\n      - request: {{ name: one, path: /moved, expect: [302], redirects: 0 }}\n      - request: {{ name: two, path: /moved, expect: [302], redirects: 0 }}\n",
        nginx.url("")
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!(m.requests.attempted, 40);
    // A request the server's GOAWAY beat to the wire may fail with its
    // class; none is lost, and every VU goes on on a new connection.
    let goaway = m.requests.errors.get("h2.goaway").copied().unwrap_or(0)
        + m.requests.errors.get("h2.refused_stream").copied().unwrap_or(0);
    assert_eq!(m.requests.ok + goaway, 40, "{:?}", m.requests);
    assert!(m.requests.ok >= 30, "{:?}", m.requests);
    // 40 requests, at most 4 per connection.
    assert!(m.connections.ok >= 10, "{:?}", m.connections);
    let x = m.multiplex.as_ref().unwrap();
    assert!(x.max_requests_per_connection <= 4, "{x:?}");
    assert_eq!(x.connections, m.connections.ok);
    assert_eq!(access_log(&log).len() as u64, m.requests.ok);
}

/// One VU, `iterations` of one step with a check, against an HTTP/2 fault.
fn one_vu(fault: &str, iterations: u32) -> common::Run {
    let server = FaultServer::start(fault);
    let yaml = format!(
        "target: {{ url: 'http://127.0.0.1:{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: {iterations}\n    flow: [{{ request: {{ name: get, path: /, check: {{ answered: {{ status: [200] }} }} }} }}]\n",
        server.port
    );
    let r = scenario(&yaml);
    drop(server);
    assert!(!r.stderr().contains("panicked"), "{}", r.stderr());
    assert_books_balance(r.result());
    r
}

#[test]
fn a_reset_stream_fails_its_step_and_keeps_the_connection() {
    let r = one_vu("h2-rst-stream", 20);
    let m = &r.result().measurements;
    // The lab resets every second stream of a connection.
    assert_eq!(m.requests.ok, 10, "{:?}", m.requests);
    assert_eq!(m.requests.error("h2.rst_stream.internal_error"), 10);
    assert_eq!(m.requests.errors.len(), 1, "{:?}", m.requests);
    assert_eq!(m.connections.ok, 1, "a stream's reset leaves its connection");
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.checks["answered"].passes, st.checks["answered"].fails), (10, 10));
    assert_eq!(st.tags["step:get"].failed, 10);
}

#[test]
fn a_goaway_fails_the_step_it_cut_off_and_the_vu_reconnects() {
    let r = one_vu("h2-goaway", 40);
    let m = &r.result().measurements;
    let per = throng_lab::GOAWAY_AFTER;
    // Each connection answers per-1 streams; the next is cut off by GOAWAY.
    let conns = 40 / per;
    assert_eq!(m.requests.error("h2.goaway"), conns, "{:?}", m.requests);
    assert_eq!(m.requests.ok, 40 - conns);
    assert_eq!(m.connections.ok, conns);
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.connections, x.max_requests_per_connection), (conns, per));
}

/// One VU, 10 iterations of one step, against the lab's HTTP/3 `fault`.
fn one_h3_vu(fault: throng_lab::H3Fault) -> common::Run {
    let (_d, c) = common::certs();
    let p = |name: &str| c.join(name).display().to_string();
    let cert = (p("server.pem"), std::fs::read(c.join("server.pem")).unwrap());
    let key = (p("server.key"), std::fs::read(c.join("server.key")).unwrap());
    let tls = throng_tls::server_config(&cert, &key, None).unwrap();
    let server = throng_lab::H3Server::start("127.0.0.1:0".parse().unwrap(), &tls, Some(fault)).unwrap();
    let yaml = format!(
        "target: {{ url: 'https://localhost:{}', http: 3 }}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 10\n    flow: [{{ request: {{ name: get, path: / }} }}]\n",
        server.addr().port(),
        p("ca.pem")
    );
    let r = scenario(&yaml);
    assert!(!r.stderr().contains("panicked"), "{}", r.stderr());
    assert_books_balance(r.result());
    r
}

#[test]
fn an_h3_vu_reconnects_after_the_server_closes_its_connection() {
    let r = one_h3_vu(throng_lab::H3Fault::CloseConnection);
    let m = &r.result().measurements;
    // Each connection answers its first request and closes at the second.
    assert_eq!(m.requests.ok, 5, "{:?}", m.requests.errors);
    assert_eq!(m.requests.error("h3.closed.H3_EXCESSIVE_LOAD"), 5);
    assert_eq!(m.connections.ok, 5);
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.connections, x.max_requests_per_connection), (5, 2));
}

#[test]
fn an_h3_stream_reset_fails_its_step_and_keeps_the_connection() {
    let r = one_h3_vu(throng_lab::H3Fault::ResetStream);
    let m = &r.result().measurements;
    assert_eq!(
        m.requests.error("h3.stream_reset.H3_REQUEST_REJECTED"),
        10,
        "{:?}",
        m.requests.errors
    );
    assert_eq!(m.connections.attempted, 1);
    assert_eq!(m.scenario.as_ref().unwrap().tags["step:get"].failed, 10);
}

#[test]
fn a_short_h2_body_fails_its_step_as_eof_and_keeps_the_connection() {
    let r = one_vu("h2-short-body", 10);
    let m = &r.result().measurements;
    assert_eq!(m.requests.error("eof"), 10, "{:?}", m.requests);
    assert_eq!(m.connections.ok, 1, "a stream's short body leaves its connection");
    assert!(m.bytes.sent > 0 && m.bytes.received > 0, "{:?}", m.bytes);
}

#[test]
fn an_h2_server_allowing_no_stream_fails_each_step_within_its_timeout() {
    let server = FaultServer::start("h2-no-streams");
    let yaml = format!(
        "target: {{ url: 'http://127.0.0.1:{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    flow: [{{ request: {{ name: get, path: /, timeout: 500ms }} }}]\n",
        server.port
    );
    let r = scenario(&yaml);
    drop(server);
    assert!(!r.stderr().contains("panicked"), "{}", r.stderr());
    assert_books_balance(r.result());
    let m = &r.result().measurements;
    assert_eq!(m.requests.error("h2.stream_limit"), 3, "{:?}", m.requests);
    assert_eq!(m.connections.ok, 3, "each step's connection is replaced");
    assert_eq!(m.bytes.sent, 0);
}

#[test]
fn an_h3_step_skips_interim_responses() {
    let r = one_h3_vu(throng_lab::H3Fault::EarlyHints);
    let m = &r.result().measurements;
    assert_eq!(m.requests.ok, 10, "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&10), "{:?}", m.status);
}

#[test]
fn a_short_h3_body_fails_its_step_as_eof() {
    let r = one_h3_vu(throng_lab::H3Fault::ShortBody);
    let m = &r.result().measurements;
    assert_eq!(m.requests.error("eof"), 10, "{:?}", m.requests);
    assert_eq!(m.connections.ok, 1);
    assert!(m.bytes.sent > 0 && m.bytes.received > 0, "{:?}", m.bytes);
}

#[test]
fn an_h3_vu_out_of_stream_credit_gets_a_new_connection() {
    let (_d, c) = common::certs();
    let p = |name: &str| c.join(name).display().to_string();
    let cert = (p("server.pem"), std::fs::read(c.join("server.pem")).unwrap());
    let key = (p("server.key"), std::fs::read(c.join("server.key")).unwrap());
    let tls = throng_tls::server_config(&cert, &key, None).unwrap();
    let fault = Some(throng_lab::H3Fault::StreamsExhausted);
    let server = throng_lab::H3Server::start("127.0.0.1:0".parse().unwrap(), &tls, fault).unwrap();
    let yaml = format!(
        "target: {{ url: 'https://localhost:{}', http: 3 }}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 4\n    flow: [{{ request: {{ name: get, path: /, timeout: 500ms }} }}]\n",
        server.addr().port(),
        p("ca.pem")
    );
    let r = scenario(&yaml);
    assert!(!r.stderr().contains("panicked"), "{}", r.stderr());
    assert_books_balance(r.result());
    let m = &r.result().measurements;
    // Answered, then no credit: the step fails unsent, the next one goes
    // on a new connection.
    assert_eq!(m.requests.ok, 2, "{:?}", m.requests);
    assert_eq!(m.requests.error("h3.stream_limit"), 2, "{:?}", m.requests);
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
}

#[test]
fn one_file_over_http1_and_http2_compares() {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let p = |name: &str| c.join(name).display().to_string();
    // One TLS port for both: ALPN h2 for HTTP/2, none (HTTP/1.1) otherwise.
    let nginx = common::nginx_tls(&c, "ssl http2", false, "", &locations(&log));
    let file = |http: &str| {
        format!(
            "target: {{ url: '{}', http: {http} }}\n{}",
            nginx.https("localhost", ""),
            FLOW.replace("TLS", &format!("tls: {{ cacert: '{}' }}", p("ca.pem")))
        )
    };
    let a = scenario(&file("1.1"));
    let b = scenario(&file("2"));
    assert_flow_ran(&b, "h2");
    assert_eq!(a.code(), 0, "{}{}", a.stdout(), a.stderr());
    assert_books_balance(a.result());
    assert_eq!(a.result().measurements.requests.ok, 90);
    assert!(
        a.result().measurements.multiplex.is_none(),
        "HTTP/1.1 multiplexes nothing"
    );
    let lines = access_log(&log);
    let count = |v: &str| lines.iter().filter(|l| l.contains(&format!(" {v}\" "))).count();
    assert_eq!((count("HTTP/1.1"), count("HTTP/2.0")), (120, 120));
    let out = output(throng().arg("compare").arg(&a.json).arg(&b.json));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = nginx.https("localhost", "");
    assert!(text.contains(&format!("A: run {url}\n")), "{text}");
    assert!(text.contains(&format!("B: run {url} (HTTP/2)")), "{text}");
    assert!(text.contains("requests"), "{text}");
}

#[test]
fn h2_redirects_stop_at_the_limit_and_go_to_another_origin() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = Nginx::start_listen("http2", "", &locations(&log));
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    flow:\n      - request: {{ name: loop, path: /loop, redirects: 2 }}\n      - request: {{ name: away, path: /away }}\n",
        nginx.url("")
    );
    let r = scenario(&yaml);
    // Every request failed: the run failed.
    assert_eq!(r.code(), 1, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!(m.requests.attempted, 6);
    // Two hops, then the third 302 is one too many.
    assert_eq!(m.requests.error("redirect.too_many"), 3, "{:?}", m.requests);
    // Another origin: the hop goes there, on a connection of its own,
    // which nothing takes (scenario_redirect_mux has the ones that land).
    assert_eq!(m.requests.error("refused"), 3, "{:?}", m.requests);
    assert_eq!(m.redirects, 6 + 3);
    assert_eq!(m.requests.ok, 0);
    assert_eq!(access_log(&log).len(), 3 * 3 + 3);
}

#[test]
fn an_h3_step_past_its_timeout_fails_and_its_vu_keeps_the_connection() {
    let (d, c) = common::certs();
    // Every answer waits 400 ms; the step gives up after 100 ms.
    let server = common::Aioquic::start(&c, d.path(), 400);
    let yaml = format!(
        "target: {{ url: 'https://localhost:{}', http: 3 }}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 3\n    flow: [{{ request: {{ name: slow, path: /, timeout: 100ms, check: {{ answered: {{ status: [200] }} }} }} }}]\n",
        server.port,
        c.join("ca.pem").display()
    );
    let r = scenario(&yaml);
    // Every request failed: the run failed (exit 1), and says how.
    assert_eq!(r.code(), 1, "{}{}", r.stdout(), r.stderr());
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!(m.requests.error("timeout.response"), 3, "{:?}", m.requests);
    assert_eq!(m.requests.ok, 0);
    assert_eq!(m.connections.ok, 1, "a timed-out stream leaves its connection");
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.checks["answered"].passes, st.checks["answered"].fails), (0, 3));
    let stats = server.stop();
    // The VU's, and the pre-run check's handshake (no request on it).
    assert_eq!(stats["connections"], 2, "{stats}");
    assert_eq!(stats["requests"], 3, "{stats}");
}
