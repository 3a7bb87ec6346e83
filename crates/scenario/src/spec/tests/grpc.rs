//! `grpc:` steps.

use super::*;

/// A file of grpc steps, with a .proto file read through `read`.
fn parse_grpc(flow: &str) -> Result<ScenarioPlan, ScenarioError> {
    const PROTO: &str = r#"syntax = "proto3"; package p;
        message In { string name = 1; int32 n = 2; } message Out { string message = 1; }
        service S { rpc Call(In) returns (Out); rpc Many(In) returns (stream Out); }"#;
    let text = format!(
        "target: {{ url: http://127.0.0.1:1, http: 2 }}\nproto: {{ files: [p.proto] }}\nscenarios:\n  s:\n    \
         executor: shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n{flow}"
    );
    ScenarioPlan::parse(&text, "g.yaml", &|f| match f {
        "p.proto" => Ok(PROTO.to_string()),
        _ => Err(format!("no {f}")),
    })
}

#[test]
fn grpc_steps_capture_for_later_steps_and_are_tagged() {
    let plan = parse_grpc(
        "      - grpc: { name: first, call: p.S/Call, message: { n: 3 }, capture: { m: { json: /message } } }\n      \
         - grpc: { call: p.S/Many, message: { name: \"{{m}}\" }, check: { ok: { json: /message } } }\n",
    )
    .unwrap();
    let Step::Grpc(first) = &plan.scenarios[0].flow[0] else {
        panic!("not a grpc step");
    };
    // No template: encoded once, framed (a 5-byte prefix, then field 2 = 3).
    assert_eq!(first.framed.as_deref(), Some(&[0, 0, 0, 0, 2, 0x10, 3][..]));
    assert_eq!(first.call, "p.S/Call");
    let Step::Grpc(second) = &plan.scenarios[0].flow[1] else {
        panic!("not a grpc step");
    };
    assert!(second.server_streaming && second.framed.is_none());
    // Named by its call when it has no name; tags and checks are known.
    assert_eq!(second.request.name, "p.S/Many");
    assert!(super::validate::tag_exists(&plan.scenarios, "step", "first"));
    assert!(super::validate::tag_exists(&plan.scenarios, "check", "ok"));
    // A capture used before the step that makes it.
    let e = parse_grpc(
        "      - grpc: { call: p.S/Call, message: { name: \"{{m}}\" } }\n      \
         - grpc: { call: p.S/Call, capture: { m: { json: /message } } }\n",
    )
    .unwrap_err();
    assert!(e.message.contains("{{m}} is used in step 'p.S/Call' before"), "{e}");
    // A message that does not fit, at its line; a status check refused.
    let e = parse_grpc("      - grpc:\n          call: p.S/Call\n          message: { n: \"x\" }\n").unwrap_err();
    assert_eq!((e.line, e.message.contains("not a p.In message")), (11, true), "{e}");
    let e = parse_grpc("      - grpc: { call: p.S/Call, check: { c: { status: [200] } } }\n").unwrap_err();
    assert!(e.message.contains("take no status:"), "{e}");
    let e = parse_grpc("      - grpc: { call: p.S/Call }\n        think: 1s\n").unwrap_err();
    assert!(
        e.message
            .contains("exactly one of request:, sse:, grpc:, websocket:, mqtt:, think: or group:"),
        "{e}"
    );
}
