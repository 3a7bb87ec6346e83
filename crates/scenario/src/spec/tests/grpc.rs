//! `grpc:` steps.

use super::*;

/// A file of grpc steps, with a .proto file read through `read`.
fn parse_grpc(flow: &str) -> Result<ScenarioPlan, ScenarioError> {
    const PROTO: &str = r#"syntax = "proto3"; package p;
        message In { string name = 1; int32 n = 2; } message Out { string message = 1; }
        service S { rpc Call(In) returns (Out); rpc Many(In) returns (stream Out);
        rpc Up(stream In) returns (Out); }"#;
    let text = format!(
        "target: {{ url: http://127.0.0.1:1, http: 2 }}\nproto: {{ files: [p.proto] }}\nscenarios:\n  s:\n    \
         executor: shared-iterations\n    vus: 1\n    iterations: 1\n    flow:\n{flow}"
    );
    ScenarioPlan::parse(&text, "g.yaml", &|f| match f {
        "p.proto" => Ok(PROTO.to_string()),
        "up.jsonl" => Ok("{\"n\": 1}\n\n{\"name\": \"{{vu}}\"}\n".to_string()),
        "bad.jsonl" => Ok("{\"n\": 1}\n{\"n\": \"x\"}\n".to_string()),
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

#[test]
fn message_lists_are_framed_in_order_and_refused_where_they_cannot_go() {
    let plan = parse_grpc(
        "      - grpc: { call: p.S/Up, messages: [{ n: 1 }, { n: 2 }], encoding: gzip }\n      \
         - grpc: { call: p.S/Up, messages_file: up.jsonl, stream_messages: 5 }\n",
    )
    .unwrap();
    let Step::Grpc(first) = &plan.scenarios[0].flow[0] else {
        panic!("not a grpc step");
    };
    // No template: both encoded once, in order; compressed when the call runs.
    assert_eq!(
        first.framed.as_deref(),
        Some(&[0, 0, 0, 0, 2, 0x10, 1, 0, 0, 0, 0, 2, 0x10, 2][..])
    );
    assert!(first.gzip && first.client_streaming && first.messages.len() == 2);
    let Step::Grpc(second) = &plan.scenarios[0].flow[1] else {
        panic!("not a grpc step");
    };
    // A file's line with a template: rendered per call; blank lines skipped.
    assert_eq!((second.messages.len(), second.framed.is_none()), (2, true));
    let refused = |step: &str| parse_grpc(&format!("      - grpc: {step}\n")).unwrap_err().message;
    let e = refused("{ call: p.S/Call, messages: [{ n: 1 }] }");
    assert!(e.contains("messages: p.S/Call takes one request message a call"), "{e}");
    let e = refused("{ call: p.S/Many, messages_file: up.jsonl }");
    assert!(e.contains("messages_file: p.S/Many takes one request message"), "{e}");
    let e = refused("{ call: p.S/Up, message: {}, messages_file: up.jsonl }");
    assert!(e.contains("give one of message:"), "{e}");
    let e = refused("{ call: p.S/Up, messages: [{ n: 1 }, { n: x }] }");
    assert!(e.contains("message 2 of the list: not a p.In message"), "{e}");
    let e = refused("{ call: p.S/Up, messages_file: bad.jsonl }");
    assert!(e.contains("message 2 of the list"), "{e}");
    let e = refused("{ call: p.S/Up, messages_file: none.jsonl }");
    assert!(
        e.contains("messages_file: cannot read 'none.jsonl': no none.jsonl"),
        "{e}"
    );
    let e = refused("{ call: p.S/Up, encoding: deflate }");
    assert!(e.contains("encoding: deflate; throng compresses with gzip"), "{e}");
    // A list's environment variables are the file's.
    let plan = parse_grpc("      - grpc: { call: p.S/Up, messages: [{ name: \"{{env.TOKEN}}\" }] }\n").unwrap();
    assert_eq!(plan.env_names(), ["TOKEN"]);
    // A list's captures must come from steps before it.
    let e = refused("{ call: p.S/Up, messages: [{ name: \"{{later}}\" }] }");
    assert!(e.contains("{{later}}"), "{e}");
}
