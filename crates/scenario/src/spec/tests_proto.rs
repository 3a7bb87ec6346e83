//! A request's own `http:`: parsed as a target's, kept with where it is
//! written, and its mistakes refused at their line.

use super::types::requests;
use super::*;
use throng_plan::HttpVersion;

const FILE: &str = r#"
target: https://127.0.0.1:8443/api
scenarios:
  s:
    executor: per-vu-iterations
    vus: 1
    iterations: 1
    flow:
      - request: { name: one, path: /one, http: 1.1 }
      - group:
          name: g
          flow:
            - request:
                name: two
                path: /two
                http: "2"
      - request: { name: three, path: /three, http: 3 }
      - request: { name: plain, path: /plain }
"#;

fn parse(text: &str) -> Result<ScenarioPlan, ScenarioError> {
    ScenarioPlan::parse(text, "t.yaml", &|f| Err(format!("no file {f} in tests")))
}

fn rejects(text: &str, line: usize, message: &str) {
    let e = match parse(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e,
    };
    assert!(e.message.contains(message), "'{e}' does not say '{message}'");
    assert_eq!(e.line, line, "{e}");
}

#[test]
fn a_requests_http_is_its_own_protocol_and_remembers_its_line() {
    let plan = parse(FILE).unwrap();
    let s = &plan.scenarios[0];
    let got: Vec<(&str, Option<HttpVersion>, &str)> = requests(&s.flow)
        .iter()
        .map(|r| (r.name.as_str(), r.http, r.http_at.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("one", Some(HttpVersion::Http1), "t.yaml:9:43"),
            ("two", Some(HttpVersion::Http2), "t.yaml:16:17"),
            ("three", Some(HttpVersion::Http3), "t.yaml:17:47"),
            ("plain", None, ""),
        ]
    );
    assert_eq!(
        s.request_protocols(),
        [
            (HttpVersion::Http1, "t.yaml:9:43"),
            (HttpVersion::Http2, "t.yaml:16:17"),
            (HttpVersion::Http3, "t.yaml:17:47"),
        ]
    );
    // The plan a result keeps says it; a request without one says nothing.
    let json = serde_json::to_value(&plan).unwrap();
    let flow = &json["scenarios"][0]["flow"];
    assert_eq!(flow[0]["request"]["http"], "http/1.1", "{flow}");
    assert_eq!(flow[2]["request"]["http"], "h3", "{flow}");
    assert!(flow[3]["request"].get("http").is_none(), "{flow}");
}

#[test]
fn a_requests_http_mistakes_point_at_their_line() {
    rejects(
        &FILE.replace("http: \"2\"", "http: 4"),
        16,
        "http: '4' is not an HTTP version throng speaks; write http: 1.1, 2 or 3",
    );
    // HTTP/3 is QUIC, always encrypted: not on an http:// target.
    rejects(
        &FILE.replace("https://127.0.0.1:8443", "http://127.0.0.1:8080"),
        17,
        "http: 3 needs an https:// target",
    );
    // QUIC needs TLS 1.3, wherever http: 3 is written.
    rejects(
        &FILE.replace("scenarios:", "tls:\n  version: \"1.2\"\nscenarios:"),
        4,
        "QUIC needs TLS 1.3",
    );
}
