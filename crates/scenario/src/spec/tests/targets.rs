//! Targets: where requests go, HTTP versions, per-scenario targets, --target.

use super::*;

#[test]
fn the_target_is_only_where_requests_go() {
    let target = "target: http://127.0.0.1:8080/api";
    for (to, message) in [
        ("target: http://127.0.0.1:8080/api?key=1", "has a query string (?key=1)"),
        ("target: http://127.0.0.1:8080/api?", "has a query string (?)"),
        ("target: http://127.0.0.1:8080/api#top", "has a fragment (#top)"),
        ("target: http://me:pw@127.0.0.1:8080/api", "has credentials (user@)"),
    ] {
        let e = rejects(target, to, "target:", message);
        assert_eq!(e.column, 1, "{e}");
    }
    let plan = parse(&GOOD.replacen(target, "target: http://127.0.0.1:8080/api/@me/", 1)).unwrap();
    assert_eq!(plan.target.base_path, "/api/@me");
}

#[test]
fn a_target_object_names_the_http_version() {
    let target = "target: http://127.0.0.1:8080/api";
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.target.http, throng_plan::HttpVersion::Http1);
    for (written, http) in [
        (
            "{ url: http://127.0.0.1:8080/api, http: 2 }",
            throng_plan::HttpVersion::Http2,
        ),
        (
            "{ url: 'http://127.0.0.1:8080/api', http: '2' }",
            throng_plan::HttpVersion::Http2,
        ),
        (
            "{ url: https://127.0.0.1:8443/api, http: 3 }",
            throng_plan::HttpVersion::Http3,
        ),
        (
            "{ url: http://127.0.0.1:8080/api, http: 1.1 }",
            throng_plan::HttpVersion::Http1,
        ),
        ("{ url: http://127.0.0.1:8080/api }", throng_plan::HttpVersion::Http1),
    ] {
        let plan = parse(&GOOD.replacen(target, &format!("target: {written}"), 1)).unwrap();
        assert_eq!(plan.target.http, http, "{written}");
        assert_eq!(plan.target.base_path, "/api", "{written}");
        assert!(plan.scenarios[0].target.is_none());
    }
    // The block form, and `http:` left out of the result when it is 1.1.
    let plan = parse(&GOOD.replacen(target, "target:\n  url: https://127.0.0.1:8443\n  http: 2", 1)).unwrap();
    assert_eq!(
        (plan.target.https, plan.target.http),
        (true, throng_plan::HttpVersion::Http2)
    );
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["target"]["http"], "h2");
    assert!(
        serde_json::to_value(parse(GOOD).unwrap()).unwrap()["target"]
            .get("http")
            .is_none()
    );
}

#[test]
fn a_target_objects_mistakes_point_at_their_line() {
    let target = "target: http://127.0.0.1:8080/api";
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  http: 4",
        "http: 4",
        "http: '4' is not an HTTP version throng speaks; write http: 1.1, 2 or 3",
    );
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  http: [2]",
        "http: [2]",
        "write http: 1.1, 2 or 3",
    );
    rejects(
        target,
        "target:\n  url: ws://127.0.0.1:8080\n  http: 2",
        "url: ws://",
        "scheme 'ws': use http:// or https://",
    );
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  http: 3",
        "http: 3",
        "http: 3 needs an https:// URL",
    );
    rejects(
        target,
        "target:\n  url: http://127.0.0.1:8080\n  protocol: h2",
        "protocol",
        "unknown field `protocol`, expected `url` or `http`",
    );
    rejects(target, "target: { http: 2 }", "target:", "target: needs url:");
    rejects(
        target,
        "target: { url: https://127.0.0.1:8443, http: 3 }\ntls:\n  version: \"1.2\"",
        "version:",
        "QUIC needs TLS 1.3",
    );
    rejects(
        target,
        "target: 8080",
        "target: 8080",
        "expected a URL, or a mapping with url: and http:",
    );
}

#[test]
fn a_scenarios_target_replaces_the_files() {
    let at = "    executor: ramping-vus";
    let plan = parse(&GOOD.replacen(at, &format!("    target: {{ http: 2 }}\n{at}"), 1)).unwrap();
    let own = plan.scenarios[0].target.as_ref().expect("its own target");
    // The file's URL, its own protocol.
    assert_eq!(
        (own.url.as_str(), own.http),
        ("http://127.0.0.1:8080/api", throng_plan::HttpVersion::Http2)
    );
    assert_eq!(
        plan.scenarios[0].target(&plan.target).http,
        throng_plan::HttpVersion::Http2
    );
    assert_eq!(plan.target.http, throng_plan::HttpVersion::Http1);
    // Its own URL; a plain string is HTTP/1.1 whatever the file speaks.
    let text = GOOD
        .replacen(
            "target: http://127.0.0.1:8080/api",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
            1,
        )
        .replacen(at, &format!("    target: https://127.0.0.1:8443/v2\n{at}"), 1);
    let plan = parse(&text).unwrap();
    let own = plan.scenarios[0].target(&plan.target);
    assert_eq!((own.https, own.port, own.base_path.as_str()), (true, 8443, "/v2"));
    assert_eq!(own.http, throng_plan::HttpVersion::Http1);
    // An object without http: keeps the file's protocol.
    let text = GOOD
        .replacen(
            "target: http://127.0.0.1:8080/api",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
            1,
        )
        .replacen(at, &format!("    target: {{ url: http://127.0.0.1:9090 }}\n{at}"), 1);
    let plan = parse(&text).unwrap();
    assert_eq!(
        plan.scenarios[0].target(&plan.target).http,
        throng_plan::HttpVersion::Http2
    );
    // tls: serves a scenario's https target too.
    let text = GOOD
        .replacen("defaults:", "tls: { insecure: true }\ndefaults:", 1)
        .replacen(
            at,
            &format!("    target: {{ url: https://127.0.0.1:8443, http: 3 }}\n{at}"),
            1,
        );
    assert!(parse(&text).unwrap().tls.is_some_and(|t| t.insecure));
    // Mistakes point into the scenario.
    let e = rejects(
        at,
        &format!("    target: {{ http: 5 }}\n{at}"),
        "http: 5",
        "http: '5' is not an HTTP version",
    );
    assert!(e.line > 1, "{e}");
    rejects(
        at,
        &format!("    target: {{ url: 'http://x:1/', http: 3 }}\n{at}"),
        "http: 3",
        "http: 3 needs an https:// URL",
    );
    rejects(
        at,
        &format!("    target: {{ url: http://x:1/, htp: 2 }}\n{at}"),
        "htp",
        "unknown field `htp`",
    );
}

#[test]
fn target_flag_replaces_every_url_and_keeps_the_protocols() {
    let at = "    executor: ramping-vus";
    let text = GOOD
        .replacen(
            "target: http://127.0.0.1:8080/api",
            "target: { url: http://127.0.0.1:8080, http: 2 }",
            1,
        )
        .replacen(
            at,
            &format!("    target: {{ url: http://127.0.0.1:9090, http: 1.1 }}\n{at}"),
            1,
        );
    let given = TargetInputs {
        url: Some("http://10.0.0.1:7000"),
        env: None,
    };
    let plan = ScenarioPlan::parse_with(&text, "t.yaml", &|f| Err(format!("no file {f}")), &given).unwrap();
    assert_eq!(
        (plan.target.port, plan.target.http),
        (7000, throng_plan::HttpVersion::Http2)
    );
    let own = plan.scenarios[0].target(&plan.target);
    assert_eq!((own.port, own.http), (7000, throng_plan::HttpVersion::Http1));
}
