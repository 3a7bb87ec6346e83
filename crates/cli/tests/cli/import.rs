//! `throng import`: tests people already have, run as scenarios.
//!
//! - curl commands against nginx, which logs what it received: the
//!   imported scenario sends the same methods, paths, queries, headers and
//!   bodies, with the credentials coming from `--env` (the file holds none).
//! - A HAR recorded by headless chromium loading a page that signs up, logs
//!   in and reads the profile through nginx in front of the lab's auth
//!   service; the imported scenario then runs against a *fresh* lab server,
//!   where the recorded one-time code and token are worthless: it passes only
//!   because the importer captured them from the responses.
//! - Hostile and wrong inputs: refused with what, where and what to do.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{assert_books_balance, output, throng};
use throng_result::RunResult;

/// `throng import ARGS`: (exit code, stdout, stderr).
fn import(args: &[&str]) -> (i32, String, String) {
    let o = output(throng().arg("import").args(args));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `throng run FILE ARGS --json`: its exit code and result.
fn run(file: &Path, args: &[&str]) -> (i32, String, RunResult) {
    let json = file.with_extension("json");
    let o = output(
        throng()
            .arg("run")
            .arg(file)
            .arg("--json")
            .arg(&json)
            .arg("--quiet")
            .args(args),
    );
    let r = common::read_result(&json).unwrap_or_else(|| panic!("no result: {}", String::from_utf8_lossy(&o.stderr)));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        r,
    )
}

/// Requests of step `name` that ended, and of those failed.
fn step(r: &RunResult, name: &str) -> (u64, u64) {
    let s = r.measurements.scenario.as_ref().expect("scenario figures");
    let t = s
        .tags
        .get(&format!("step:{name}"))
        .unwrap_or_else(|| panic!("no step {name}: {:?}", s.tags.keys()));
    (t.requests, t.failed)
}

#[test]
fn curl_commands_send_what_they_say_with_credentials_from_the_environment() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format c '$request_method $uri q=$args auth=$http_authorization key=$http_x_api_key ct=$content_type body=$request_body';",
        &format!(
            "location = /sink {{ return 200; }}\n\
             location / {{ access_log {} c; set $s /sink; proxy_pass http://127.0.0.1:$server_port$s; }}",
            log.display()
        ),
    );
    let base = nginx.url("");
    let host = base.trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().unwrap();
    let cmds = dir.path().join("runbook.sh");
    std::fs::write(
        &cmds,
        format!(
            "# the runbook's checks\n\
             curl -s -X POST {base}/login \\\n  -d user=ops -d password=hunter2-secret\n\
             curl {base}/items -G -d page=2 --data-urlencode 'q=a b' -H 'X-Api-Key: key-0123456789'\n\
             curl -X PUT {base}/items/7 --json '{{\"name\":\"box\",\"token\":\"tok-secret-42\"}}' && \
             curl -u admin:pa55word {base}/admin -I\n\
             curl 'http://viewer:pw-in-url@{host}/report?api_key=key-in-query&page=1'\n"
        ),
    )
    .unwrap();
    let yaml = dir.path().join("runbook.yaml");
    let (code, stdout, stderr) = import(&["curl", cmds.to_str().unwrap(), "--out", yaml.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty(), "--out writes the file, not stdout: {stdout}");
    assert!(stderr.contains("imported 5 requests"), "{stderr}");
    let text = std::fs::read_to_string(&yaml).unwrap();
    for secret in [
        "hunter2-secret",
        "key-0123456789",
        "tok-secret-42",
        "pa55word",
        "YWRtaW46cGE1NXdvcmQ=",
        "pw-in-url",
        "key-in-query",
        "dmlld2VyOnB3LWluLXVybA==",
    ] {
        assert!(!text.contains(secret), "{secret} copied into the scenario:\n{text}");
        assert!(!stderr.contains(secret), "{secret} on stderr: {stderr}");
    }
    for name in [
        "PASSWORD",
        "X_API_KEY",
        "TOKEN",
        "BASIC_AUTH",
        "BASIC_AUTH_2",
        "API_KEY",
    ] {
        assert!(stderr.contains(&format!("  {name}: ")), "{name} not listed: {stderr}");
    }
    assert!(
        text.contains(&format!("# curl command 2 (line 4): GET {base}/items?page=2&q=a b\n")),
        "a comment says where each came from:\n{text}"
    );

    let basic = "YWRtaW46cGE1NXdvcmQ="; // base64("admin:pa55word")
    let env = [
        "--env",
        "PASSWORD=hunter2-secret",
        "--env",
        "X_API_KEY=key-0123456789",
        "--env",
        "TOKEN=tok-secret-42",
        "--env",
        &format!("BASIC_AUTH={basic}"),
        "--env",
        "BASIC_AUTH_2=dmlld2VyOnB3LWluLXVybA==",
        "--env",
        "API_KEY=key-in-query",
    ];
    let (code, stderr, r) = run(&yaml, &env);
    assert_eq!(code, 0, "{stderr}");
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 5);
    let mut lines = common::access_log(&log);
    // A form's fields in any order.
    let (head, fields) = lines[0].split_once("body=").unwrap();
    let mut fields: Vec<&str> = fields.split('&').collect();
    fields.sort_unstable();
    lines[0] = format!("{head}body={}", fields.join("&"));
    let want = [
        "POST /login q=- auth=- key=- ct=application/x-www-form-urlencoded body=password=hunter2-secret&user=ops",
        "GET /items q=page=2&q=a%20b auth=- key=key-0123456789 ct=- body=-",
        "PUT /items/7 q=- auth=- key=- ct=application/json body={\\x22name\\x22:\\x22box\\x22,\\x22token\\x22:\\x22tok-secret-42\\x22}",
        &format!("HEAD /admin q=- auth=Basic {basic} key=- ct=- body=-"),
        "GET /report q=api_key=key-in-query&page=1 auth=Basic dmlld2VyOnB3LWluLXVybA== key=- ct=- body=-",
    ];
    assert_eq!(lines, want, "nginx received what the commands send");
}

/// nginx serving `www` and passing `/auth/` to the lab at `lab`, logging
/// `$request_method $uri $status`.
fn shop(www: &Path, lab: std::net::SocketAddr, log: &Path) -> common::Nginx {
    common::Nginx::start_http(
        "log_format s '$request_method $uri $status';",
        &format!(
            "access_log {} s;\nlocation / {{ root {}; }}\nlocation /auth/ {{ proxy_pass http://{lab}; }}",
            log.display(),
            www.display()
        ),
    )
}

const PAGE: &str = r#"<!doctype html><html><head><title>shop</title><link rel="icon" href="data:,"></head><body>
<script>
async function post(path, body) {
  const r = await fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
  return r.json();
}
(async () => {
  const email = 'shopper-' + Date.now() + '@example.test';
  const reg = await post('/auth/register', {email, password: 'pw-recorded-secret'});
  await post('/auth/verify-otp', {email, otp: reg.otp});
  const login = await post('/auth/login', {email, password: 'pw-recorded-secret'});
  const me = await fetch('/auth/me', {headers: {Authorization: 'Bearer ' + login.access_token}});
  document.title = 'done ' + me.status;
  window.__done = true;
})();
</script></body></html>"#;

fn recorder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/har_record.py")
}

#[test]
#[ignore = "needs chromium (scripts/test.sh installs it and runs this)"]
fn a_browser_recording_replays_against_a_fresh_server_with_its_code_and_token_captured() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    std::fs::write(www.join("index.html"), PAGE).unwrap();
    let har = dir.path().join("shop.har");
    {
        let lab = common::auth_lab();
        let log = dir.path().join("recorded.log");
        let nginx = shop(&www, lab.addr(), &log);
        let rec = Command::new("timeout")
            .args(["90", "python3"])
            .arg(recorder())
            .arg(nginx.url("/"))
            .arg(&har)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            rec.status.success(),
            "recording failed: {}",
            String::from_utf8_lossy(&rec.stderr)
        );
        let seen = common::access_log(&log);
        assert!(
            seen.contains(&"GET /auth/me 200".to_string()),
            "the page ran its flow: {seen:?}"
        );
    }
    let yaml = dir.path().join("shop.yaml");
    let (code, _, stderr) = import(&["har", har.to_str().unwrap(), "--out", yaml.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&yaml).unwrap();
    assert!(!text.contains("pw-recorded-secret"), "{text}");
    assert!(
        text.contains("password: \"{{env.PASSWORD}}\"") || text.contains("\"password\": \"{{env.PASSWORD}}\""),
        "{text}"
    );
    for inferred in [
        "otp: { json: /otp }",
        "access_token: { json: /access_token }",
        "Bearer {{access_token}}",
        "\"{{otp}}\"",
    ] {
        assert!(text.contains(inferred), "{inferred} not in:\n{text}");
    }
    assert!(!text.contains("Sec-Fetch") && !text.contains("sec-ch-ua"), "{text}");

    // A fresh lab: the recording's code and token mean nothing there.
    let lab = common::auth_lab();
    let log = dir.path().join("replayed.log");
    let nginx = shop(&www, lab.addr(), &log);
    let target = nginx.url("");
    let (code, stderr, r) = run(&yaml, &["--target", &target, "--env", "PASSWORD=pw-recorded-secret"]);
    assert_eq!(code, 0, "{stderr}");
    assert_books_balance(&r);
    for name in [
        "GET /",
        "POST /auth/register",
        "POST /auth/verify-otp",
        "POST /auth/login",
        "GET /auth/me",
    ] {
        assert_eq!(step(&r, name), (1, 0), "{name}");
    }
    let seen = common::access_log(&log);
    assert_eq!(
        seen,
        [
            "GET /index.html 200",
            "POST /auth/register 200",
            "POST /auth/verify-otp 200",
            "POST /auth/login 200",
            "GET /auth/me 200"
        ],
        "the fresh server saw the flow succeed"
    );
}

#[test]
fn wrong_and_hostile_inputs_are_refused_saying_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let long = format!("curl http://127.0.0.1:9/{}", "a".repeat(70_000));
    let mut bomb = String::from("openapi: 3.0.0\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![format!("*a{p}"); 10].join(", ")));
    }
    let schema = "https://schema.getpostman.com/json/collection/v2.1.0/collection.json";
    let mut folder = serde_json::json!({"name": "r", "request": {"method": "GET", "url": "http://127.0.0.1:9/"}});
    for _ in 0..40 {
        folder = serde_json::json!({"name": "f", "item": [folder]});
    }
    let deep = serde_json::json!({"info": {"schema": schema}, "item": [folder]}).to_string();
    let multipart = serde_json::json!({"info": {"schema": schema}, "item": [{"name": "up", "request": {
        "method": "POST", "url": "http://127.0.0.1:9/up", "body": {"mode": "formdata", "formdata": []}}}]})
    .to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["curl".into(), "/dev/zero".into()], "over the limit of 256 MiB"),
        (
            vec!["curl".into(), write("bin", b"curl \xff\xfe")],
            "not UTF-8 text (byte 5)",
        ),
        (
            vec!["curl".into(), write("wget", b"\n\nwget http://127.0.0.1:9/")],
            "line 3: `wget` is not a curl command",
        ),
        (
            vec!["curl".into(), write("proxy", b"curl -x http://p:1 http://127.0.0.1:9/")],
            "-x is not imported",
        ),
        (
            vec!["curl".into(), write("empty", b"# nothing\n")],
            "no curl command found",
        ),
        (
            vec!["har".into(), write("notjson.har", b"{\"log\":")],
            "not a HAR file: not JSON",
        ),
        (vec!["har".into(), write("nolog.har", b"{}")], "no log.entries"),
        (
            vec!["curl".into(), dir.path().join("missing").to_str().unwrap().into()],
            "cannot read",
        ),
        (
            vec!["postman".into(), write("v1.json", b"{\"info\":{\"schema\":\"v1\"}}")],
            "not a Postman collection v2.0 or v2.1",
        ),
        (
            vec!["postman".into(), write("deep.json", deep.as_bytes())],
            "folders nested deeper than 32",
        ),
        (
            vec!["openapi".into(), write("swagger.yaml", b"swagger: '2.0'\n")],
            "convert it to OpenAPI 3 first",
        ),
        (
            vec!["openapi".into(), write("noserver.yaml", b"openapi: 3.1.0\npaths: {}\n")],
            "names no server: give the target with --origin URL",
        ),
        (
            vec!["openapi".into(), write("bomb.yaml", bomb.as_bytes())],
            "not YAML (repetition limit exceeded)",
        ),
        (
            vec!["postman".into(), write("multipart.json", multipart.as_bytes())],
            "a formdata body is not imported yet",
        ),
        (
            vec![
                "curl".into(),
                write("two", b"curl http://127.0.0.1:9/a"),
                "--origin".into(),
                "http://127.0.0.1:8/".into(),
            ],
            "no request goes to http://127.0.0.1:8",
        ),
        (
            vec![
                "curl".into(),
                write("name", b"curl http://127.0.0.1:9/"),
                "--name".into(),
                "x".repeat(70_000),
            ],
            "--name",
        ),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = import(&args);
        assert_eq!(code, 2, "{:?}: {stderr}", &args[..1]);
        assert!(stderr.contains(want), "{:?}: wanted {want:?} in {stderr}", &args[..1]);
        assert!(stdout.is_empty(), "{stdout}");
        assert!(stderr.len() < 2_000, "the error stays short: {} bytes", stderr.len());
    }
    // A 70,000-character path imports, and the scenario loads.
    let file = write("long", long.as_bytes());
    let (code, stdout, stderr) = import(&["curl", &file]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(&"a".repeat(70_000)));
}

/// The guide's runbook (docs/guide/src/import.md), imported and run against
/// the lab server as the page shows.
#[test]
fn the_guides_runbook_imports_and_runs() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/import.md")).unwrap();
    let block = page
        .split("```sh,norun\n# runbook.sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the guide's runbook block");
    let server = common::FaultServer::serve(&[]);
    let dir = tempfile::tempdir().unwrap();
    let runbook = dir.path().join("runbook.sh");
    std::fs::write(&runbook, block.replace("127.0.0.1:8080", &server.addr())).unwrap();
    let yaml = dir.path().join("runbook.yaml");
    let (code, _, stderr) = import(&["curl", runbook.to_str().unwrap(), "--out", yaml.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("imported 3 requests") && stderr.contains("  BEARER_TOKEN: "),
        "{stderr}"
    );
    assert!(!std::fs::read_to_string(&yaml).unwrap().contains("lab-token-123"));
    let (code, stderr, r) = run(&yaml, &["--env", "BEARER_TOKEN=lab-token-123"]);
    assert_eq!(code, 0, "{stderr}");
    assert_books_balance(&r);
    for name in ["GET /bytes/512", "POST /echo", "GET /status/204"] {
        assert_eq!(step(&r, name), (1, 0), "{name}");
    }
    assert_eq!(
        r.measurements.status.get(&204).copied(),
        Some(1),
        "{:?}",
        r.measurements.status
    );
}

/// A Postman collection (v2.1): folders as groups, collection variables
/// put in (the password as a placeholder), values its test scripts set
/// from responses as captures, status tests as `expect`; run against the
/// lab's auth service, every step passes, the failing login included.
#[test]
fn a_postman_collection_runs_with_its_script_variables_as_captures() {
    let lab = common::auth_lab();
    let base = format!("http://{}", lab.addr());
    let json_body =
        |raw: &str| serde_json::json!({"mode": "raw", "raw": raw, "options": {"raw": {"language": "json"}}});
    let post = |name: &str, path: &str, raw: &str, exec: &[&str]| {
        serde_json::json!({
            "name": name,
            "request": {"method": "POST", "header": [{"key": "Content-Type", "value": "application/json"}],
                        "url": {"raw": format!("{{{{baseUrl}}}}{path}"), "host": ["{{baseUrl}}"]},
                        "body": json_body(raw)},
            "event": [{"listen": "test", "script": {"type": "text/javascript", "exec": exec}}]
        })
    };
    let collection = serde_json::json!({
        "info": {"name": "shop", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"},
        "variable": [
            {"key": "baseUrl", "value": base},
            {"key": "email", "value": "pm-user@example.test"},
            {"key": "password", "value": "pm-secret-pass"}
        ],
        "item": [
            {"name": "signup", "item": [
                post("register", "/auth/register", "{\"email\": \"{{email}}\", \"password\": \"{{password}}\"}",
                     &["pm.test(\"registered\", function () {", "    pm.response.to.have.status(200);", "});",
                       "pm.environment.set(\"otp\", pm.response.json().otp);"]),
                post("verify", "/auth/verify-otp", "{\"email\": \"{{email}}\", \"otp\": \"{{otp}}\"}", &[])
            ]},
            {"name": "session", "item": [
                post("login", "/auth/login", "{\"email\": \"{{email}}\", \"password\": \"{{password}}\"}",
                     &["var data = pm.response.json();", "pm.collectionVariables.set(\"token\", data.access_token);"]),
                {"name": "me", "request": {"method": "GET", "url": "{{baseUrl}}/auth/me",
                    "auth": {"type": "bearer", "bearer": [{"key": "token", "value": "{{token}}", "type": "string"}]}}},
                post("wrong password", "/auth/login", "{\"email\": \"{{email}}\", \"password\": \"nope\"}",
                     &["pm.response.to.have.status(401);"])
            ]}
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.postman_collection.json");
    std::fs::write(&file, collection.to_string()).unwrap();
    let yaml = dir.path().join("shop.yaml");
    let (code, _, stderr) = import(&["postman", file.to_str().unwrap(), "--out", yaml.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&yaml).unwrap();
    assert!(
        !text.contains("pm-secret-pass") && !stderr.contains("pm-secret-pass"),
        "{text}\n{stderr}"
    );
    // Each password value is a variable: the wrong one too.
    assert!(
        stderr.contains("  PASSWORD: ") && stderr.contains("  PASSWORD_2: "),
        "{stderr}"
    );
    for want in [
        "otp: { json: /otp }",
        "token: { json: /access_token }",
        "Bearer {{token}}",
        "expect: [401]",
    ] {
        assert!(text.contains(want), "{want} not in:\n{text}");
    }
    let (code, stderr, r) = run(&yaml, &["--env", "PASSWORD=pm-secret-pass", "--env", "PASSWORD_2=nope"]);
    assert_eq!(code, 0, "{stderr}");
    assert_books_balance(&r);
    for name in ["register", "verify", "login", "me", "wrong password"] {
        assert_eq!(step(&r, name), (1, 0), "{name}");
    }
    let tags = &r.measurements.scenario.as_ref().unwrap().tags;
    assert_eq!(tags["group:signup"].requests, 2);
    assert_eq!(tags["group:session"].requests, 3);
}

const OPENAPI: &str = r##"openapi: 3.0.3
info: { title: shop, version: "1" }
servers: [{ url: "http://127.0.0.1:1/api" }]
security: [{ bearer: [] }]
components:
  securitySchemes:
    bearer: { type: http, scheme: bearer }
    key: { type: apiKey, in: header, name: X-Api-Key }
  schemas:
    Item:
      type: object
      required: [name]
      properties:
        id: { type: integer, readOnly: true }
        name: { type: string, example: box }
        qty: { type: integer, minimum: 1 }
        tags: { type: array, items: { type: string, enum: [new, sale] } }
paths:
  /items:
    get:
      operationId: listItems
      tags: [items]
      parameters:
        - { name: page, in: query, required: true, schema: { type: integer, default: 2 } }
        - { name: sort, in: query, schema: { type: string } }
      responses: { "200": { description: ok } }
    post:
      operationId: createItem
      tags: [items]
      requestBody:
        content:
          application/json:
            schema: { $ref: "#/components/schemas/Item" }
      responses: { "201": { description: created } }
  /items/{id}:
    parameters: [{ name: id, in: path, required: true, schema: { type: integer, example: 42 } }]
    get:
      operationId: getItem
      tags: [items]
      security: [{ key: [] }]
      responses: { "200": { description: ok } }
    delete:
      operationId: deleteItem
      tags: [items]
      responses: { "204": { description: gone } }
  /login:
    post:
      operationId: login
      security: []
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                user: { type: string, example: ops }
                password: { type: string, format: password }
      responses: { "200": { description: ok } }
"##;

/// An OpenAPI 3 document (YAML): one request per operation with example
/// values from its schemas, `$ref`s followed, security as placeholders;
/// nginx receives exactly those requests.
#[test]
fn an_openapi_document_sends_one_request_per_operation_with_schema_examples() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format o '$request_method $uri q=$args auth=$http_authorization key=$http_x_api_key body=$request_body';",
        &format!(
            "location = /sink {{ return 200; }}\n\
             location /api/ {{ access_log {} o; set $s /sink; proxy_pass http://127.0.0.1:$server_port$s; }}",
            log.display()
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("openapi.yaml");
    std::fs::write(&doc, OPENAPI).unwrap();
    let yaml = dir.path().join("api.yaml");
    let target = nginx.url("/api");
    let (code, _, stderr) = import(&[
        "openapi",
        doc.to_str().unwrap(),
        "--origin",
        &target,
        "--out",
        yaml.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("imported 5 requests"), "{stderr}");
    assert!(
        stderr.contains("1 DELETE operation(s)"),
        "the DELETE is pointed out: {stderr}"
    );
    for name in ["BEARER_TOKEN", "X_API_KEY", "PASSWORD"] {
        assert!(stderr.contains(&format!("  {name}: ")), "{name}: {stderr}");
    }
    let env = [
        "--env",
        "BEARER_TOKEN=tok-1",
        "--env",
        "X_API_KEY=key-1",
        "--env",
        "PASSWORD=pw-1",
    ];
    let (code, stderr, r) = run(&yaml, &env);
    assert_eq!(code, 0, "{stderr}");
    assert_books_balance(&r);
    for name in ["listItems", "createItem", "getItem", "deleteItem", "login"] {
        assert_eq!(step(&r, name), (1, 0), "{name}");
    }
    assert_eq!(
        r.measurements.scenario.as_ref().unwrap().tags["group:items"].requests,
        4
    );
    let mut lines = common::access_log(&log);
    let last = lines.len() - 1;
    let (head, fields) = lines[last].split_once("body=").unwrap();
    let mut fields: Vec<&str> = fields.split('&').collect();
    fields.sort_unstable();
    lines[last] = format!("{head}body={}", fields.join("&"));
    assert_eq!(
        lines,
        [
            "GET /api/items q=page=2 auth=Bearer tok-1 key=- body=-",
            "POST /api/items q=- auth=Bearer tok-1 key=- body={\\x22name\\x22:\\x22box\\x22,\\x22qty\\x22:1,\\x22tags\\x22:[\\x22new\\x22]}",
            "GET /api/items/42 q=- auth=- key=key-1 body=-",
            "DELETE /api/items/42 q=- auth=Bearer tok-1 key=- body=-",
            "POST /api/login q=- auth=- key=- body=password=pw-1&user=ops",
        ]
    );
}

/// `curl -k` against an https:// server: the scenario does not verify the
/// server's certificate either, and runs (without -k it would fail: the
/// lab CA is not among the system's).
#[test]
fn curl_k_makes_an_https_scenario_that_does_not_verify() {
    let (_cdir, certs) = common::certs();
    let nginx = common::nginx_tls(&certs, "ssl", false, "", "location / { return 200 'ok'; }");
    let url = nginx.https("127.0.0.1", "/health");
    let dir = tempfile::tempdir().unwrap();
    for (name, insecure) in [("k.sh", true), ("strict.sh", false)] {
        let cmds = dir.path().join(name);
        std::fs::write(&cmds, format!("curl {} {url}\n", if insecure { "-k" } else { "-s" })).unwrap();
        let yaml = cmds.with_extension("yaml");
        let (code, _, stderr) = import(&["curl", cmds.to_str().unwrap(), "--out", yaml.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(
            std::fs::read_to_string(&yaml).unwrap().contains("insecure: true"),
            insecure
        );
        let (_, _, r) = run(&yaml, &[]);
        let want = if insecure { (1, 0) } else { (1, 1) };
        assert_eq!(
            step(&r, "GET /health"),
            want,
            "-k {insecure}: {:?}",
            r.measurements.requests
        );
    }
}

/// A value holding `{{` would be read as a template: a curl command with
/// one is refused by its line, a HAR entry with one is left out and named.
#[test]
fn literal_braces_are_refused_or_left_out_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cmds = dir.path().join("c.sh");
    std::fs::write(
        &cmds,
        "curl http://127.0.0.1:9/a\ncurl http://127.0.0.1:9/b -d 'tpl={{name}}'\n",
    )
    .unwrap();
    let (code, _, stderr) = import(&["curl", cmds.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("curl command 2 (line 2): a value holds `{{`"),
        "{stderr}"
    );
    let har = serde_json::json!({"log": {"entries": [
        {"request": {"method": "GET", "url": "http://127.0.0.1:9/a", "headers": []}},
        {"request": {"method": "POST", "url": "http://127.0.0.1:9/b", "headers": [],
                     "postData": {"mimeType": "text/plain", "text": "<p>{{ vue }}</p>"}}}
    ]}});
    let file = dir.path().join("b.har");
    std::fs::write(&file, har.to_string()).unwrap();
    let (code, stdout, stderr) = import(&["har", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("imported 1 request ") && stderr.contains("holds `{{`") && stderr.contains(": 2"),
        "{stderr}"
    );
    assert!(!stdout.contains("vue"), "{stdout}");
}
