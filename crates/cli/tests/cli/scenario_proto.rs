//! A protocol per request in scenario files (`request: { http: 1.1 | 2 | 3 }`,
//! issue 13): a request's own `http:` replaces its target's for it, a VU
//! holds one connection per protocol it uses (opened at first use, kept
//! after), and each protocol the file uses is checked against the target
//! before the run (exit 2 naming the request's line).

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use common::{Nginx, assert_books_balance, scenario, schema_violations};

/// nginx with TLS speaking h2 and http/1.1 (by ALPN) on one port, logging
/// each request's protocol to `log`.
fn nginx_h1_and_h2(certs: &Path, log: &Path) -> Nginx {
    common::nginx_tls(
        certs,
        "ssl http2",
        false,
        "",
        &format!(
            "access_log {};\n    location / {{ default_type text/plain; return 200 \"$server_protocol\"; }}",
            log.display()
        ),
    )
}

#[test]
fn a_vu_holds_one_connection_per_protocol_its_requests_name() {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = nginx_h1_and_h2(&c, &log);
    // The target says nothing (HTTP/1.1); one request asks for 1.1 by name,
    // one for 2, and one takes the target's.
    let yaml = format!(
        r#"target: {}
tls: {{ cacert: '{}' }}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 3
    iterations: 4
    flow:
      - request:
          name: one
          path: /one
          http: 1.1
          check:
            answered in 1.1: {{ body_contains: HTTP/1.1 }}
      - request: {{ name: two, path: /two, http: 2, check: {{ answered in 2: {{ body_contains: HTTP/2.0 }} }} }}
      - request:
          name: default
          path: /default
"#,
        nginx.https("localhost", ""),
        c.join("ca.pem").display()
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r
        .result
        .as_ref()
        .unwrap_or_else(|| panic!("no result: {}{}", r.stdout(), r.stderr()));
    assert_books_balance(res);
    let violations = schema_violations(&r.json);
    assert!(violations.is_empty(), "schema violations: {violations:#?}");
    let m = &res.measurements;
    // 3 VUs × 4 iterations × 3 requests, all ok.
    assert_eq!((m.requests.attempted, m.requests.ok), (36, 36), "{:?}", m.requests);
    assert_eq!(m.status.get(&200), Some(&36));
    let st = m.scenario.as_ref().unwrap();
    for step in ["one", "two", "default"] {
        let t = &st.tags[&format!("step:{step}")];
        assert_eq!((t.requests, t.failed), (12, 0), "step {step}");
    }
    for (name, c) in &st.checks {
        assert_eq!((c.passes, c.fails), (12, 0), "check '{name}'");
    }
    // Per VU: one HTTP/1.1 connection (for one and default) and one h2
    // connection carrying its 4 streams.
    assert_eq!(m.connections.ok, 6, "{:?}", m.connections);
    assert_eq!(m.tls.as_ref().unwrap().handshakes, 6);
    let x = m.multiplex.as_ref().expect("h2 requests make multiplex figures");
    assert_eq!(x.protocols.get("h2"), Some(&3), "{x:?}");
    assert_eq!(x.connections, 3, "{x:?}");
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (4, 4));
    // And nginx saw each request in its protocol.
    let lines = std::fs::read_to_string(&log).unwrap();
    let count = |needle: &str| lines.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(lines.lines().count(), 36);
    assert_eq!(count("\"GET /one HTTP/1.1\" 200"), 12);
    assert_eq!(count("\"GET /default HTTP/1.1\" 200"), 12);
    assert_eq!(count("\"GET /two HTTP/2.0\" 200"), 12);
}

#[test]
fn a_request_in_a_protocol_the_target_does_not_speak_is_refused_before_the_run() {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    // TCP only: no HTTP/3 (nothing answers on UDP).
    let nginx = nginx_h1_and_h2(&c, &log);
    let yaml = format!(
        "target: {}\ntls: {{ cacert: '{}' }}\ndefaults: {{ timeout: 1s }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - request: {{ path: /a }}\n      - request:\n          path: /b\n          http: 3\n",
        nginx.https("localhost", ""),
        c.join("ca.pem").display()
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 2, "a configuration error: {}{}", r.stdout(), r.stderr());
    assert!(r.result.is_none(), "nothing ran");
    assert!(
        r.stderr().contains("scenario.yaml:13:11"),
        "names the line: {}",
        r.stderr()
    );
    assert!(r.stderr().contains("does not speak HTTP/3"), "{}", r.stderr());
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        "",
        "no request was sent"
    );

    // An HTTP/1.1-only server and a request's http: 2, written in a flow
    // mapping: its line, and what the server spoke.
    let p = |name: &str| c.join(name).display().to_string();
    let h1 = common::nginx_tls(&c, "ssl", false, "", "location / { return 200; }");
    let yaml = format!(
        "target: {}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n      - request: {{ path: /a }}\n      - request: {{ path: /b, http: 2 }}\n",
        h1.https("localhost", ""),
        p("ca.pem")
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 2, "{}{}", r.stdout(), r.stderr());
    assert!(r.result.is_none(), "nothing ran");
    assert!(
        r.stderr().contains("scenario.yaml:10:"),
        "names the line: {}",
        r.stderr()
    );
    assert!(
        r.stderr().contains("does not speak HTTP/2") && r.stderr().contains("ALPN"),
        "{}",
        r.stderr()
    );
}

#[test]
fn http_3_requests_go_over_quic_to_the_same_port_beside_h1_and_h2() {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    // nginx on TCP port P (HTTP/1.1 and h2), the lab's HTTP/3 server on
    // UDP port P: one origin speaking all three.
    let nginx = nginx_h1_and_h2(&c, &log);
    let p = |name: &str| c.join(name).display().to_string();
    let cert = (p("server.pem"), std::fs::read(c.join("server.pem")).unwrap());
    let key = (p("server.key"), std::fs::read(c.join("server.key")).unwrap());
    let tls = throng_tls::server_config(&cert, &key, None).unwrap();
    let addr = format!("127.0.0.1:{}", nginx.port).parse().unwrap();
    let _h3 = throng_lab::H3Server::start(addr, &tls, None).unwrap();
    let yaml = format!(
        "target: {}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 3\n    flow:\n      - request: {{ name: one, path: /one }}\n      - request: {{ name: two, path: /two, http: 2 }}\n      - request: {{ name: three, path: /bytes/3, http: 3, check: {{ from the lab: {{ header: server, contains: throng-lab }} }} }}\n",
        nginx.https("localhost", ""),
        p("ca.pem")
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result.as_ref().unwrap();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (18, 18), "{:?}", m.requests);
    let st = m.scenario.as_ref().unwrap();
    for step in ["one", "two", "three"] {
        let t = &st.tags[&format!("step:{step}")];
        assert_eq!((t.requests, t.failed), (6, 0), "step {step}");
    }
    // The lab answered the HTTP/3 requests (nginx would not say throng-lab).
    assert_eq!(st.checks.len(), 1);
    for (name, c) in &st.checks {
        assert_eq!((c.passes, c.fails), (6, 0), "check '{name}'");
    }
    // Per VU: an HTTP/1.1, an h2 and an h3 connection, each multiplexed
    // one carrying its 3 streams.
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!(x.protocols.get("h2"), Some(&2), "{x:?}");
    assert_eq!(x.protocols.get("h3"), Some(&2), "{x:?}");
    assert_eq!(x.connections, 4, "{x:?}");
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (3, 3));
    assert_eq!(m.connections.ok, 6, "{:?}", m.connections);
    // nginx saw only the HTTP/1.1 and h2 requests.
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 12, "{lines}");
    assert!(!lines.contains("/bytes/3"), "{lines}");
}

#[test]
fn an_http_2_target_sends_a_requests_http_1_1_on_its_own_connection() {
    let (_d, c) = common::certs();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = nginx_h1_and_h2(&c, &log);
    // The 1.1 request comes between two h2 requests: each protocol keeps
    // its own connection across the other's.
    let yaml = format!(
        "target: {{ url: '{}', http: 2 }}\ntls: {{ cacert: '{}' }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 5\n    flow:\n      - request: {{ name: a, path: /a }}\n      - request: {{ name: old, path: /old, http: 1.1, check: {{ in 1.1: {{ body_contains: HTTP/1.1 }} }} }}\n      - request: {{ name: b, path: /b, check: {{ in 2: {{ body_contains: HTTP/2.0 }} }} }}\n",
        nginx.https("localhost", ""),
        c.join("ca.pem").display()
    );
    let r = scenario(&yaml);
    assert_eq!(r.code(), 0, "{}{}", r.stdout(), r.stderr());
    let res = r.result.as_ref().unwrap();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (30, 30), "{:?}", m.requests);
    let st = m.scenario.as_ref().unwrap();
    for (name, c) in &st.checks {
        assert_eq!((c.passes, c.fails), (10, 0), "check '{name}'");
    }
    // Per VU: one h2 connection carrying its 10 streams, one HTTP/1.1.
    let x = m.multiplex.as_ref().unwrap();
    assert_eq!((x.connections, x.protocols.get("h2")), (2, Some(&2)), "{x:?}");
    assert_eq!((x.min_requests_per_connection, x.max_requests_per_connection), (10, 10));
    assert_eq!(m.connections.ok, 4, "{:?}", m.connections);
    let lines = std::fs::read_to_string(&log).unwrap();
    let count = |needle: &str| lines.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("\"GET /old HTTP/1.1\" 200"), 10, "{lines}");
    assert_eq!(count(" HTTP/2.0\" 200"), 20, "{lines}");
}
