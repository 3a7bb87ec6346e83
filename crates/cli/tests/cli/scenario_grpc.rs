//! Scenario `grpc:` steps against the grpcio test server (`grpc/grpc_server.py`,
//! service `grpc/tester.proto`): unary calls counted by gRPC status, a
//! capture from a reply sent in the next call's message, metadata (secret
//! values redacted), unexpected statuses as `check_failed` by name,
//! deadlines, server streaming, thresholds on a step's tag, and the file's
//! errors (exit 2, file:line:col).

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::grpc::{GrpcServer, here};

use std::path::PathBuf;

use common::{assert_books_balance, output, schema_violations, throng};
use throng_result::RunResult;

struct Ran {
    dir: tempfile::TempDir,
    code: i32,
    stdout: String,
    stderr: String,
    result: Option<RunResult>,
    json: PathBuf,
}

impl Ran {
    fn result(&self) -> &RunResult {
        self.result
            .as_ref()
            .unwrap_or_else(|| panic!("no result; exit {}: {}{}", self.code, self.stdout, self.stderr))
    }
}

/// Runs `yaml` as `scenario.yaml` beside copies of tester.proto (in
/// `protos/`) and common.proto (in `include/`).
fn run_yaml(yaml: &str) -> Ran {
    run_yaml_in(tempfile::tempdir().unwrap(), yaml)
}

/// [`run_yaml`] in `dir`, which may hold files the scenario reads.
fn run_yaml_in(dir: tempfile::TempDir, yaml: &str) -> Ran {
    let d = dir.path();
    std::fs::create_dir_all(d.join("protos")).unwrap();
    std::fs::create_dir_all(d.join("include")).unwrap();
    std::fs::copy(here("tester.proto"), d.join("protos/tester.proto")).unwrap();
    std::fs::copy(here("common.proto"), d.join("include/common.proto")).unwrap();
    let file = d.join("scenario.yaml");
    std::fs::write(&file, yaml).unwrap();
    let json = d.join("result.json");
    let out = output(
        throng()
            .arg("run")
            .arg(&file)
            .arg("--json")
            .arg(&json)
            .args(["--threads", "1"]),
    );
    let result = common::read_result(&json);
    Ran {
        dir,
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        result,
        json,
    }
}

/// The file's head: the server as an h2c target, and the .proto files.
fn head(server: &GrpcServer) -> String {
    format!(
        "target: {{ url: 'http://{}', http: 2 }}\nproto: {{ files: [protos/tester.proto], import_paths: [include] }}\n",
        server.addr
    )
}

const CALLS: &str = r#"
scenarios:
  calls:
    executor: per-vu-iterations
    vus: 2
    iterations: 10
    max_duration: 60s
    flow:
      - grpc:
          name: hello
          call: throngtest.Tester/Call
          message: { name: "u{{vu}}", tag: { key: k, values: [a, b] } }
          capture:
            greeting: { json: /message }
          check:
            greets: { json: /message, exists: true }
      - grpc:
          name: again
          call: throngtest.Tester/Call
          # The server answers FAILED_PRECONDITION without the metadata.
          message: { name: "{{greeting}}", needMetadata: x-tenant }
          metadata: { x-tenant: "t-{{vu}}", authorization: "Bearer s3cr3t-token" }
          deadline: 5s
          check:
            echoes the capture: { body_contains: "hello hello u" }
            its reply: { json: /message, equals: "hello hello u1" }
thresholds:
  errors{step:again}: [rate == 0]
"#;

#[test]
fn unary_steps_count_calls_capture_replies_and_send_metadata() {
    let server = GrpcServer::start(None);
    let r = run_yaml(&format!("{}{CALLS}", head(&server)));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let res = r.result();
    assert_books_balance(res);
    let violations = schema_violations(&r.json);
    assert!(violations.is_empty(), "schema violations: {violations:#?}");
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (40, 40), "{:?}", m.requests);
    assert_eq!(m.status.get(&0), Some(&40), "{:?}", m.status);
    let st = m.scenario.as_ref().unwrap();
    assert_eq!(st.iterations, 20);
    for step in ["hello", "again"] {
        let t = &st.tags[&format!("step:{step}")];
        assert_eq!((t.requests, t.failed), (20, 0), "step {step}");
    }
    // The capture went out in the next message: the server echoed it.
    assert_eq!((st.checks["greets"].passes, st.checks["greets"].fails), (20, 0));
    assert_eq!(
        (
            st.checks["echoes the capture"].passes,
            st.checks["echoes the capture"].fails
        ),
        (20, 0)
    );
    // VU 1's reply only: the JSON check reads each VU's own reply.
    assert_eq!((st.checks["its reply"].passes, st.checks["its reply"].fails), (10, 10));
    assert!(res.thresholds_passed(), "{:?}", res.thresholds);
    // One HTTP/2 connection per VU, all its calls on it.
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
    assert!(r.stdout.contains("grpc-status   OK=40"), "{}", r.stdout);
    // The authorization metadata's value is a secret.
    let text = std::fs::read_to_string(&r.json).unwrap();
    assert!(!text.contains("s3cr3t-token"), "the secret reached the result");
    assert!(text.contains("<redacted>"));
    let plan: serde_json::Value = serde_json::from_str(&text).unwrap();
    let step = &plan["plan"]["scenarios"][0]["flow"][0]["grpc"];
    assert_eq!(step["call"], "throngtest.Tester/Call", "{step}");
    assert_eq!(step["expect"], serde_json::json!([0]));
}

#[test]
fn unexpected_statuses_are_check_failed_by_name_and_deadlines_expire() {
    let server = GrpcServer::start(None);
    let yaml = format!(
        r#"{}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 1
    iterations: 6
    max_duration: 60s
    flow:
      - grpc: {{ name: missing, call: throngtest.Tester/Call, message: {{ code: 5 }} }}
      - grpc: {{ name: expected, call: throngtest.Tester/Call, message: {{ code: 5 }}, expect: [OK, NOT_FOUND] }}
      - grpc: {{ name: by-number, call: throngtest.Tester/Call, message: {{ code: 14 }}, expect: [14] }}
      - grpc:
          name: slow
          call: throngtest.Tester/Call
          message: {{ sleepMs: 2000 }}
          deadline: 50ms
"#,
        head(&server)
    );
    let r = run_yaml(&yaml);
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!(m.requests.attempted, 24);
    assert_eq!(m.requests.ok, 12, "expected and by-number: {:?}", m.requests);
    assert_eq!(
        m.requests.errors.get("check_failed"),
        Some(&6),
        "{:?}",
        m.requests.errors
    );
    assert_eq!(
        m.requests.errors.get("grpc.deadline_exceeded"),
        Some(&6),
        "{:?}",
        m.requests.errors
    );
    assert_eq!(m.status.get(&5), Some(&12), "{:?}", m.status);
    assert_eq!(m.status.get(&14), Some(&6), "{:?}", m.status);
    let st = m.scenario.as_ref().unwrap();
    let tag = |s: &str| &st.tags[&format!("step:{s}")];
    assert_eq!((tag("missing").failed, tag("missing").unexpected_status), (6, 6));
    assert_eq!(tag("expected").failed, 0);
    assert_eq!(tag("by-number").failed, 0);
    assert_eq!((tag("slow").failed, tag("slow").unexpected_status), (6, 0));
    assert!(
        r.stdout.contains("grpc-status   NOT_FOUND=12 UNAVAILABLE=6"),
        "{}",
        r.stdout
    );
    // A deadline cuts one stream, not the connection.
    assert_eq!(m.connections.ok, 1, "{:?}", m.connections);
}

#[test]
fn server_streaming_steps_count_messages_and_read_the_last() {
    let server = GrpcServer::start(None);
    let yaml = format!(
        r#"{}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 1
    iterations: 5
    max_duration: 60s
    flow:
      - grpc:
          name: watch
          call: throngtest.Tester/Watch
          message: {{ name: w, count: 4 }}
          capture: {{ last: {{ json: /message }} }}
      - grpc:
          name: echo
          call: throngtest.Tester/Call
          message: {{ name: "{{{{last}}}}" }}
          check:
            saw the last: {{ json: /message, equals: "hello hello w #3" }}
"#,
        head(&server)
    );
    let r = run_yaml(&yaml);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (10, 10));
    assert_eq!(m.messages, 20, "4 replies per watch");
    assert!(
        r.stdout
            .contains("messages      20 received by server-streaming grpc: steps"),
        "{}",
        r.stdout
    );
    let st = m.scenario.as_ref().unwrap();
    assert_eq!(
        (st.checks["saw the last"].passes, st.checks["saw the last"].fails),
        (5, 0)
    );
}

#[test]
fn client_and_bidirectional_steps_send_their_messages_and_count_them() {
    let server = GrpcServer::counting(None);
    let yaml = format!(
        r#"{}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    max_duration: 60s
    flow:
      - grpc:
          name: upload
          call: throngtest.Tester/Upload
          message: {{ name: "u{{{{vu}}}}" }}
          stream_messages: 4
          check:
            all read: {{ json: /message, equals: "received 4" }}
      - grpc:
          name: chat
          call: throngtest.Tester/Chat
          message: {{ name: "c{{{{vu}}}}" }}
          stream_messages: 3
          stream_rate: 100
          check:
            last reply: {{ body_contains: "hello c" }}
"#,
        head(&server)
    );
    let r = run_yaml(&yaml);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let res = r.result();
    assert_books_balance(res);
    let violations = schema_violations(&r.json);
    assert!(violations.is_empty(), "schema violations: {violations:#?}");
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (20, 20), "{:?}", m.requests);
    // 10 uploads of 4 and 10 chats of 3; each chat's 3 replies, each
    // upload's one.
    assert_eq!(m.messages_sent, 70);
    assert_eq!(m.messages, 40);
    let log = server.log();
    assert_eq!(log.lines().filter(|l| *l == "upload 4").count(), 10, "{log}");
    assert_eq!(log.lines().filter(|l| *l == "chat 3").count(), 10, "{log}");
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.checks["all read"].passes, st.checks["all read"].fails), (10, 0));
    assert_eq!((st.checks["last reply"].passes, st.checks["last reply"].fails), (10, 0));
    // Two gaps between a chat's three replies.
    assert_eq!(m.phases["message_gap"].count(), 20);
    assert_eq!(m.phases["first_message"].count(), 10);
}

#[test]
fn message_lists_are_sent_in_order_and_cycled_to_stream_messages() {
    let server = GrpcServer::counting(None);
    let yaml = format!(
        r#"{}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    max_duration: 60s
    flow:
      - grpc:
          name: upload
          call: throngtest.Tester/Upload
          messages:
            - {{ name: a }}
            - {{ name: "b{{{{vu}}}}" }}
            - {{ name: c }}
          check:
            all read: {{ json: /message, equals: "received 3" }}
      - grpc:
          name: cycled
          call: throngtest.Tester/Upload
          messages: [{{ name: x }}, {{ name: y }}]
          stream_messages: 5
      - grpc:
          name: chat
          call: throngtest.Tester/Chat
          messages_file: chat.jsonl
          check:
            vu 1 last: {{ body_contains: "hello last1" }}
            vu 2 last: {{ body_contains: "hello last2" }}
"#,
        head(&server)
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("chat.jsonl"),
        "{\"name\": \"first\"}\n\n{\"name\": \"second\"}\n{\"name\": \"last{{vu}}\"}\n",
    )
    .unwrap();
    let r = run_yaml_in(dir, &yaml);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (30, 30), "{:?}", m.requests);
    // Each iteration: 3 + 5 + 3 messages sent; 1 + 1 + 3 replies.
    assert_eq!(m.messages_sent, 10 * 11);
    assert_eq!(m.messages, 10 * 5);
    let log = server.log();
    assert_eq!(log.lines().filter(|l| *l == "upload 3").count(), 10, "{log}");
    assert_eq!(log.lines().filter(|l| *l == "upload 5").count(), 10, "{log}");
    assert_eq!(log.lines().filter(|l| *l == "chat 3").count(), 10, "{log}");
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.checks["all read"].passes, st.checks["all read"].fails), (10, 0));
    // The file's last line rendered per VU, its reply the one checks read.
    for vu in ["vu 1 last", "vu 2 last"] {
        assert_eq!((st.checks[vu].passes, st.checks[vu].fails), (5, 5), "{vu}");
    }
}

#[test]
fn gzip_steps_send_compressed_messages_and_read_compressed_replies() {
    let server = GrpcServer::compressing_counting();
    let long = "z".repeat(4000);
    let yaml = format!(
        r#"{}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    max_duration: 60s
    flow:
      - grpc:
          name: upload
          call: throngtest.Tester/Upload
          encoding: gzip
          messages: [{{ name: "{long}" }}, {{ name: "{long}{{{{vu}}}}" }}, {{ name: "{long}" }}]
          check:
            all read: {{ json: /message, equals: "received 3" }}
      - grpc:
          name: chat
          call: throngtest.Tester/Chat
          encoding: gzip
          message: {{ name: "{long}" }}
          stream_messages: 2
          check:
            last reply: {{ body_contains: "hello zzz" }}
"#,
        head(&server)
    );
    let r = run_yaml(&yaml);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (20, 20), "{:?}", m.requests);
    assert_eq!((m.messages_sent, m.messages), (50, 30));
    // The server inflated every message it counted; 50 messages of 4000
    // bytes went as a few KB.
    let log = server.log();
    assert_eq!(log.lines().filter(|l| *l == "upload 3").count(), 10, "{log}");
    assert_eq!(log.lines().filter(|l| *l == "chat 2").count(), 10, "{log}");
    assert!(m.bytes.sent * 4 < 50 * 4000, "sent {}", m.bytes.sent);
    // Its replies were compressed, and inflated for the checks.
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.checks["all read"].passes, st.checks["all read"].fails), (10, 0));
    assert_eq!((st.checks["last reply"].passes, st.checks["last reply"].fails), (10, 0));
}

#[test]
fn a_gzip_step_against_a_server_without_gzip_fails_by_its_status() {
    let server = GrpcServer::without_gzip();
    let yaml = format!(
        r#"{}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 3
    max_duration: 60s
    flow:
      - grpc: {{ name: zipped, call: throngtest.Tester/Call, encoding: gzip, message: {{ name: z }} }}
      - grpc: {{ name: plain, call: throngtest.Tester/Call, message: {{ name: z }} }}
"#,
        head(&server)
    );
    let r = run_yaml(&yaml);
    let res = r.result();
    assert_books_balance(res);
    let m = &res.measurements;
    assert_eq!((m.requests.attempted, m.requests.ok), (12, 6), "{:?}", m.requests);
    assert_eq!(
        m.requests.errors.get("check_failed"),
        Some(&6),
        "{:?}",
        m.requests.errors
    );
    // UNIMPLEMENTED is gRPC's 12.
    assert_eq!(m.status.get(&12), Some(&6), "{:?}", m.status);
    let st = m.scenario.as_ref().unwrap();
    let tag = |s: &str| &st.tags[&format!("step:{s}")];
    assert_eq!((tag("zipped").failed, tag("zipped").unexpected_status), (6, 6));
    assert_eq!(tag("plain").failed, 0);
    assert!(r.stdout.contains("UNIMPLEMENTED=6"), "{}", r.stdout);
    // grpcio refused the compressed calls before its handler; the plain
    // ones went on the same connection.
    assert_eq!(server.calls(), 6, "{}", server.log());
    assert_eq!(m.connections.ok, 2, "{:?}", m.connections);
}

#[test]
fn over_tls_the_calls_speak_h2_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let o = output(throng().args(["certs", "--out", certs.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(0));
    let server = GrpcServer::start(Some(&certs));
    let flow = r#"
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    max_duration: 60s
    flow:
      - grpc: { call: throngtest.Tester/Call, message: { name: tls } }
"#;
    let yaml = format!(
        "{}tls: {{ cacert: '{}' }}
{flow}",
        head(&server).replace("http://", "https://"),
        certs.join("ca.pem").display()
    );
    let r = run_yaml(&yaml);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let m = &r.result().measurements;
    assert_books_balance(r.result());
    assert_eq!((m.requests.attempted, m.requests.ok), (10, 10));
    assert_eq!(m.status.get(&0), Some(&10));
    // One handshake per VU: each VU's calls share its connection.
    assert_eq!(m.phases["tls"].count(), 2);
}

#[test]
fn a_k8s_job_ships_the_proto_files_and_their_imports() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("protos")).unwrap();
    std::fs::create_dir_all(d.join("include")).unwrap();
    std::fs::copy(here("tester.proto"), d.join("protos/tester.proto")).unwrap();
    std::fs::copy(here("common.proto"), d.join("include/common.proto")).unwrap();
    let file = d.join("scenario.yaml");
    let yaml = "target: { url: 'http://svc:50051', http: 2 }\nproto: { files: [protos/tester.proto], import_paths: \
                [include] }\nscenarios:\n  s:\n    executor: constant-vus\n    vus: 2\n    duration: 10s\n    flow:\n      \
                - grpc: { call: throngtest.Tester/Call }\n";
    std::fs::write(&file, yaml).unwrap();
    let o = output(throng().args(["k8s", "job"]).arg(&file).args(["--parallelism", "2"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifests = String::from_utf8(o.stdout).unwrap();
    // Both files, at the paths the scenario reads them from.
    for (path, text) in [
        ("protos/tester.proto", "service Tester"),
        ("include/common.proto", "message Tag"),
    ] {
        assert!(manifests.contains(path), "{path} is not shipped: {manifests}");
        assert!(manifests.contains(text), "{path}'s contents are not shipped");
    }
}

#[test]
fn reflection_gives_the_methods_when_the_run_starts() {
    let server = GrpcServer::reflecting(None);
    let yaml = format!(
        r#"target: {{ url: 'http://{}', http: 2 }}
proto: {{ reflection: true }}
scenarios:
  s:
    executor: per-vu-iterations
    vus: 2
    iterations: 5
    max_duration: 60s
    flow:
      - grpc:
          name: call
          call: throngtest.Tester/Call
          message: {{ name: r, tag: {{ key: k }} }}
          capture: {{ greeting: {{ json: /message }} }}
      - grpc:
          name: watch
          call: throngtest.Tester/Watch
          message: {{ name: "{{{{greeting}}}}", count: 2 }}
          check: {{ last: {{ json: /message, equals: "hello hello r #1" }} }}
"#,
        server.addr
    );
    let r = run_yaml(&yaml);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let m = &r.result().measurements;
    assert_books_balance(r.result());
    assert_eq!((m.requests.attempted, m.requests.ok), (20, 20));
    assert_eq!(m.messages, 20, "2 replies per watch");
    let st = m.scenario.as_ref().unwrap();
    assert_eq!((st.checks["last"].passes, st.checks["last"].fails), (10, 0));
    // A method the server does not have: exit 2 at the call's line.
    let r = run_yaml(&yaml.replace("Tester/Call", "Tester/Nope"));
    let e = refused(&r);
    assert!(
        e.contains("scenario.yaml:12:11:") && e.contains("has no method Nope"),
        "{e}"
    );
    // A server without reflection: exit 2, and what to do instead.
    let plain = GrpcServer::start(None);
    let r = run_yaml(&yaml.replace(&server.addr, &plain.addr));
    let e = refused(&r);
    assert!(
        e.contains("offers no server reflection") && e.contains("proto: { files:"),
        "{e}"
    );
}

/// The error of a file that does not run: exit 2, nothing run.
fn refused(r: &Ran) -> &str {
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.result.is_none());
    &r.stderr
}

#[test]
fn the_files_mistakes_exit_2_with_where_they_are() {
    let at = |r: &Ran, line: usize| format!("{}:{line}:", r.dir.path().join("scenario.yaml").display());
    let flow = |step: &str| {
        format!(
            "target: {{ url: 'http://127.0.0.1:9', http: 2 }}\nproto: {{ files: [protos/tester.proto], \
             import_paths: [include] }}\nscenarios:\n  s:\n    executor: shared-iterations\n    vus: 1\n    \
             iterations: 1\n    flow:\n      - grpc:\n{step}"
        )
    };
    // An unknown method: the call's line, and the methods there are.
    let r = run_yaml(&flow("          call: throngtest.Tester/Nope\n"));
    let e = refused(&r);
    assert!(e.contains(&at(&r, 10)), "{e}");
    assert!(e.contains("has no method Nope (it has: Call, Watch"), "{e}");
    // A message that does not fit the input type (no template: checked now).
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Call\n          message: { nmae: x }\n",
    ));
    let e = refused(&r);
    assert!(e.contains(&at(&r, 11)), "{e}");
    assert!(
        e.contains("not a throngtest.CallRequest message") && e.contains("nmae"),
        "{e}"
    );
    // A status name gRPC does not have.
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Call\n          expect: [OK, NOTFOUND]\n",
    ));
    let e = refused(&r);
    assert!(
        e.contains(&at(&r, 11)) && e.contains("'NOTFOUND' is not a gRPC status code"),
        "{e}"
    );
    // stream_messages for a unary method; none at all.
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Call\n          stream_messages: 3\n",
    ));
    let e = refused(&r);
    assert!(
        e.contains(&at(&r, 11)) && e.contains("stream_messages: throngtest.Tester/Call takes one request message"),
        "{e}"
    );
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Upload\n          stream_messages: 0\n",
    ));
    assert!(
        refused(&r).contains("stream_messages: 0; give 1 to 100000"),
        "{}",
        r.stderr
    );
    // A list of messages for a unary method, or beside message:; a list
    // that is empty; an encoding throng does not have.
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Call\n          messages: [{ name: a }, { name: b }]\n",
    ));
    let e = refused(&r);
    assert!(
        e.contains(&at(&r, 11)) && e.contains("messages: throngtest.Tester/Call takes one request message"),
        "{e}"
    );
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Upload\n          message: {}\n          messages: [{}]\n",
    ));
    assert!(refused(&r).contains("give one of message:"), "{}", r.stderr);
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Upload\n          messages: []\n",
    ));
    assert!(refused(&r).contains("messages: has no message"), "{}", r.stderr);
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Upload\n          messages: [{ nmae: a }]\n",
    ));
    assert!(refused(&r).contains("message 1 of the list"), "{}", r.stderr);
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Upload\n          encoding: br\n",
    ));
    assert!(
        refused(&r).contains("encoding: br; throng compresses with gzip"),
        "{}",
        r.stderr
    );
    // messages_file: not JSON, a line past 4 MiB, a device.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.jsonl"), "{\"name\": \"a\"}\n{name: b}\n").unwrap();
    let step = "          call: throngtest.Tester/Upload\n          messages_file: bad.jsonl\n";
    let r = run_yaml_in(dir, &flow(step));
    let e = refused(&r);
    assert!(
        e.contains(&at(&r, 11)) && e.contains("'bad.jsonl' line 2: not JSON"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let huge = format!("{{\"name\": \"{}\"}}\n", "x".repeat(5 << 20));
    std::fs::write(dir.path().join("huge.jsonl"), huge).unwrap();
    let step = "          call: throngtest.Tester/Upload\n          messages_file: huge.jsonl\n";
    let r = run_yaml_in(dir, &flow(step));
    assert!(
        refused(&r).contains("'huge.jsonl' line 1 is 5242892 bytes; a message is at most 4 MiB"),
        "{}",
        r.stderr
    );
    let step = "          call: throngtest.Tester/Upload\n          messages_file: /dev/zero\n";
    let r = run_yaml(&flow(step));
    assert!(
        refused(&r).contains("messages_file: cannot read '/dev/zero'"),
        "{}",
        r.stderr
    );
    // An HTTP/1.1 target.
    let yaml = flow("          call: throngtest.Tester/Call\n").replace(", http: 2", "");
    let r = run_yaml(&yaml);
    let e = refused(&r);
    assert!(e.contains(&at(&r, 9)) && e.contains("needs an HTTP/2 target"), "{e}");
    // An import not found without its import path.
    let yaml = flow("          call: throngtest.Tester/Call\n").replace(", import_paths: [include]", "");
    let r = run_yaml(&yaml);
    let e = refused(&r);
    assert!(e.contains(&at(&r, 2)) && e.contains("common.proto"), "{e}");
    // No proto: at all.
    let yaml = flow("          call: throngtest.Tester/Call\n")
        .replace("proto: { files: [protos/tester.proto], import_paths: [include] }\n", "");
    let e = refused(&run_yaml(&yaml)).to_string();
    assert!(e.contains("needs the .proto files that define it"), "{e}");
    // Metadata that is the protocol's.
    let r = run_yaml(&flow(
        "          call: throngtest.Tester/Call\n          metadata: { grpc-timeout: 1S }\n",
    ));
    assert!(
        refused(&r).contains("metadata 'grpc-timeout' is the protocol's"),
        "{}",
        r.stderr
    );
}
