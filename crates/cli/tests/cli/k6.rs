//! `throng run script.js`: k6 scripts run as they are, against nginx in
//! front of the lab's auth service (nginx's access log is the server's own
//! count); what throng does not run is refused before the run at its line;
//! hostile scripts fail their iterations with a class, bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use crate::common;

use common::{assert_books_balance, output, schema_violations, throng};
use throng_result::RunResult;

/// Runs `throng run FILE` (the script written as `file` in a temporary
/// folder, with `files` beside it): exit code, stdout+stderr, result.
fn run(script: &str, files: &[(&str, &str)], args: &[&str]) -> (i32, String, Option<RunResult>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("script.js");
    std::fs::write(&file, script).unwrap();
    for (name, text) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let json = dir.path().join("out.json");
    let out = output(
        throng()
            .arg("run")
            .arg(&file)
            .args(["--json", json.to_str().unwrap()])
            .args(args),
    );
    let result = common::read_result(&json);
    let violations = if result.is_some() {
        schema_violations(&json)
    } else {
        Vec::new()
    };
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        result,
        violations,
    )
}

/// nginx passing `/auth/` to the lab, logging `$request_method $uri
/// $status`.
fn front(lab: std::net::SocketAddr, log: &Path) -> common::Nginx {
    common::Nginx::start_http(
        "log_format s '$request_method $uri $status';",
        &format!(
            "access_log {} s;\nlocation /auth/ {{ proxy_pass http://{lab}; }}\nlocation / {{ return 200 'hello'; }}",
            log.display()
        ),
    )
}

const LOGIN: &str = r#"
import http from 'k6/http';
import { check, group, sleep } from 'k6';
import { json } from './lib/headers.js';

export const options = {
  vus: 3,
  iterations: 9,
  thresholds: { http_req_duration: ['p(95)<5000'], checks: ['rate>0.99'], http_req_failed: ['rate<0.01'] },
};

const BASE = 'BASE_URL';

export default function () {
  const email = `u${__VU}-${__ITER}-${Math.random()}@example.test`;
  const reg = http.post(`${BASE}/auth/register`, JSON.stringify({ email, password: 'pw-k6' }), json('register'));
  check(reg, { registered: (r) => r.status === 200 && r.json('otp') !== undefined });
  http.post(`${BASE}/auth/verify-otp`, JSON.stringify({ email, otp: reg.json('otp') }), json('verify'));
  const login = http.post(`${BASE}/auth/login`, JSON.stringify({ email, password: 'pw-k6' }), json('login'));
  const token = login.json('access_token');
  check(login, { 'has token': () => typeof token === 'string' && token.length > 0 });
  group('api', () => {
    for (let i = 0; i < 2; i++) {
      const me = http.get(`${BASE}/auth/me`, { headers: { Authorization: `Bearer ${token}` }, tags: { name: 'me' } });
      check(me, { 'is me': (r) => r.status === 200 && r.json('email') === email });
    }
  });
  sleep(0.01);
}
"#;

const HEADERS: &str = r#"
export function json(name) {
  return { headers: { 'Content-Type': 'application/json' }, tags: { name } };
}
"#;

#[test]
fn a_login_script_runs_as_it_is_and_nginx_counts_what_throng_counts() {
    let lab = common::auth_lab();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = front(lab.addr(), &log);
    let script = LOGIN.replace("BASE_URL", &nginx.url(""));
    let (code, out, r, violations) = run(&script, &[("lib/headers.js", HEADERS)], &["--threads", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(violations.is_empty(), "{violations:#?}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.iterations, 9, "{out}");
    assert!(s.failed_iterations.is_empty(), "{:?}", s.failed_iterations);
    for (step, n) in [("register", 9), ("verify", 9), ("login", 9), ("me", 18)] {
        let t = &s.tags[&format!("step:{step}")];
        assert_eq!((t.requests, t.failed), (n, 0), "step:{step}");
    }
    assert_eq!(s.tags["group:api"].requests, 18);
    assert_eq!(s.checks["registered"].passes, 9);
    assert_eq!(s.checks["has token"].passes, 9);
    assert_eq!(s.checks["is me"].passes, 18);
    assert_eq!(s.checks["is me"].fails, 0);
    assert_eq!(r.measurements.requests.ok, 45);
    // nginx's own count: every request throng counted, each answered 200.
    let lines = common::access_log(&log);
    for (line, n) in [
        ("POST /auth/register 200", 9),
        ("POST /auth/verify-otp 200", 9),
        ("POST /auth/login 200", 9),
        ("GET /auth/me 200", 18),
    ] {
        assert_eq!(lines.iter().filter(|l| *l == line).count(), n, "{line}: {lines:?}");
    }
    assert_eq!(lines.len(), 45, "{lines:?}");
    assert!(
        out.contains("http_req_duration = response"),
        "k6 names beside throng's: {out}"
    );
    assert!(out.contains("response: p(95)<5000ms"), "{out}");
}

#[test]
fn a_wrong_token_fails_its_checks_and_the_threshold_on_k6s_checks() {
    let lab = common::auth_lab();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = front(lab.addr(), &log);
    let script = LOGIN
        .replace("BASE_URL", &nginx.url(""))
        .replace("login.json('access_token')", "login.json('no_such_field')");
    let (code, out, r, _) = run(&script, &[("lib/headers.js", HEADERS)], &[]);
    assert_eq!(code, 99, "a failed threshold exits 99: {out}");
    let r = r.unwrap();
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.checks["is me"].fails, 18);
    assert_eq!(s.tags["step:me"].failed, 18, "401s are not the expected status");
    let lines = common::access_log(&log);
    assert_eq!(
        lines.iter().filter(|l| *l == "GET /auth/me 401").count(),
        18,
        "{lines:?}"
    );
}

#[test]
fn what_throng_does_not_run_is_refused_before_the_run_at_its_line() {
    let nginx = common::Nginx::start("location / { return 200; }");
    let base = nginx.url("/");
    for (script, want) in [
        (
            format!(
                "import http from 'k6/http';\nimport ws from 'k6/ws';\nexport default function () {{ http.get('{base}'); }}\n"
            ),
            "script.js:2:17: module 'k6/ws' is not supported",
        ),
        (
            format!(
                "import http from 'k6/http';\nexport default function () {{\n  http.file('x');\n  http.get('{base}');\n}}\n"
            ),
            "script.js:3:8: 'file' from 'k6/http' is not supported",
        ),
        (
            format!(
                "import http from 'k6/http';\nexport function handleSummary() {{}}\nexport default function () {{ http.get('{base}'); }}\n"
            ),
            "script.js:2:17: handleSummary() is not supported",
        ),
        (
            format!(
                "import http from 'k6/http';\nexport const options = {{\n  scenarios: {{ a: {{ executor: 'externally-controlled' }} }},\n}};\nexport default function () {{ http.get('{base}'); }}\n"
            ),
            "script.js:3:21: options.scenarios.a: executor 'externally-controlled' is not supported",
        ),
        (
            format!(
                "import http from 'k6/http';\nexport const options = {{ thresholds: {{ my_trend: ['avg<1'] }} }};\nexport default function () {{ http.get('{base}'); }}\n"
            ),
            "threshold on 'my_trend'",
        ),
    ] {
        let (code, out, r, _) = run(&script, &[], &[]);
        assert_eq!(code, 2, "{out}");
        assert!(out.contains(want), "want '{want}' in: {out}");
        assert!(r.is_none(), "nothing ran");
    }
}

#[test]
fn a_request_to_another_origin_fails_its_iteration_with_what_to_do() {
    let nginx = common::Nginx::start("location / { return 200; }");
    let script = format!(
        "import http from 'k6/http';\nexport const options = {{ iterations: 2 }};\nexport default function () {{\n  \
         http.get('{}');\n  http.get('http://127.0.0.1:1/elsewhere');\n}}\n",
        nginx.url("/")
    );
    let (code, out, r, _) = run(&script, &[], &[]);
    assert_eq!(code, 0, "{out}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.iterations, 0);
    assert_eq!(s.failed_iterations.get("script.error"), Some(&2));
    let said = &s.failed_messages["script.error"];
    assert!(
        said.contains("is not the run's target") && said.contains("script.js:5"),
        "{said}"
    );
    assert_eq!(r.measurements.requests.ok, 2, "only the target's requests are made");
}

const HOSTILE: &str = r#"
import http from 'k6/http';
export const options = { vus: 2, iterations: 9 };
function deep(n) { return deep(n + 1) + 1; }
export default function () {
  http.get('BASE_URL');
  if (__ITER % 3 === 0) { while (true) {} }
  if (__ITER % 3 === 1) { deep(0); }
  const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length);
}
"#;

#[test]
fn hostile_scripts_fail_their_iterations_with_a_class_and_the_run_goes_on() {
    let nginx = common::Nginx::start("location / { return 200; }");
    let (code, out, r, violations) = run(&HOSTILE.replace("BASE_URL", &nginx.url("/")), &[], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(violations.is_empty(), "{violations:#?}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.iterations, 0);
    let total: u64 = s.failed_iterations.values().sum();
    assert_eq!(total, 9, "{:?}", s.failed_iterations);
    for class in ["script.timeout", "script.stack", "script.memory"] {
        assert!(
            s.failed_iterations.get(class).is_some_and(|n| *n >= 2),
            "{class}: {:?}",
            s.failed_iterations
        );
    }
    assert_eq!(r.measurements.requests.ok, 9, "each iteration's request was made first");
    assert!(out.contains("failed        9"), "{out}");
    assert!(
        s.failed_messages["script.timeout"].contains("more than 1s"),
        "{:?}",
        s.failed_messages
    );
}

/// The guide's script ("Run the script as it is") runs with the guide's
/// second command against the lab: its ten iterations, its check and its
/// two thresholds (written with k6's names) held.
#[test]
fn the_guides_script_runs_as_the_guide_says() {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"))
        .unwrap();
    let section = &page[page.find("### Run the script as it is").unwrap()..];
    let script = section.split("```js\n").nth(1).unwrap().split("```").next().unwrap();
    let command = section
        .split("```sh,norun\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let second = command.lines().nth(1).unwrap();
    assert_eq!(
        second, "throng run script.js --target http://127.0.0.1:8080 --env BASE=http://127.0.0.1:8080",
        "the guide's command changed: change this test with it"
    );
    let lab = common::FaultServer::serve(&[]);
    let base = format!("http://{}", lab.addr());
    let (code, out, result, violations) = run(script, &[], &["--target", &base, "--env", &format!("BASE={base}")]);
    assert_eq!(code, 0, "{out}");
    assert!(violations.is_empty(), "{violations:?}");
    let r = result.unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 10, "{out}");
    assert_eq!(r.measurements.status.get(&200), Some(&10));
    assert!(out.contains("status is 200") && out.contains("2 of 2 held"), "{out}");
}

/// A response cut after its status line (the lab resets the connection
/// mid-body) is no response for the script, as in k6: status 0 and an
/// error, though the status line had arrived; the request counts failed.
#[test]
fn a_response_cut_mid_body_is_status_zero_for_the_script() {
    let lab = common::FaultServer::serve(&["--fault", "rst-mid-body"]);
    let base = format!("http://{}", lab.addr());
    let script = "import http from 'k6/http';\nimport { check } from 'k6';\n\
                  export const options = { vus: 1, iterations: 3 };\n\
                  export default function () {\n\
                    const r = http.get(`${__ENV.BASE}/`);\n\
                    check(r, { 'no response': (r) => r.status === 0 && !!r.error });\n\
                  }\n";
    let (code, out, result, _) = run(script, &[], &["--target", &base, "--env", &format!("BASE={base}")]);
    assert_ne!(code, 2, "{out}");
    let r = result.unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.attempted, 3, "{out}");
    assert_eq!(r.measurements.requests.ok, 0, "{out}");
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.checks["no response"].passes, 3, "{out}");
    assert_eq!(s.checks["no response"].fails, 0, "{out}");
}

/// `k6/metrics`: the metrics a script declares are the scenario's custom
/// metrics — counted exactly, a tag keeping its own series, thresholds
/// on them judged (one held, one failed: exit 99).
#[test]
fn k6_metrics_count_exactly_and_thresholds_judge_them() {
    let lab = common::FaultServer::serve(&[]);
    let base = format!("http://{}", lab.addr());
    let script = "import http from 'k6/http';\n\
                  import { Counter, Trend, Rate, Gauge } from 'k6/metrics';\n\
                  const orders = new Counter('orders');\n\
                  const size = new Trend('size');\n\
                  const ok = new Rate('ok');\n\
                  const last = new Gauge('last');\n\
                  export const options = { vus: 2, iterations: 10,\n\
                    thresholds: { orders: ['count > 9'], ok: ['rate < 0.5'] } };\n\
                  export default function () {\n\
                    const r = http.get(`${__ENV.BASE}/`);\n\
                    orders.add(2, { shop: 'books' });\n\
                    size.add(7);\n\
                    ok.add(r.status === 200);\n\
                    last.add(5);\n\
                  }\n";
    let (code, out, result, violations) = run(script, &[], &["--target", &base, "--env", &format!("BASE={base}")]);
    assert_eq!(code, 99, "the rate threshold fails: {out}");
    assert!(violations.is_empty(), "{violations:?}");
    let r = result.unwrap();
    assert_books_balance(&r);
    let c = &r.measurements.scenario.as_ref().unwrap().custom;
    assert_eq!((c["orders"].count, c["orders"].sum), (10, 20.0), "{out}");
    assert_eq!((c["orders{shop:books}"].count, c["orders{shop:books}"].sum), (10, 20.0));
    assert_eq!((c["size"].values.count(), c["size"].values.max()), (10, 7));
    assert_eq!((c["ok"].count, c["ok"].hits), (10, 10));
    assert_eq!(
        (c["last"].last, c["last"].min, c["last"].max),
        (Some(5.0), Some(5.0), Some(5.0))
    );
    assert!(out.contains("1 of 2 held"), "{out}");

    // Declared outside the init context: the iteration fails with k6's rule.
    let late = "import http from 'k6/http';\nimport { Counter } from 'k6/metrics';\n\
                export const options = { iterations: 1 };\n\
                export default function () { new Counter('late'); http.get(`${__ENV.BASE}/`); }\n";
    let (_, out, result, _) = run(late, &[], &["--target", &base, "--env", &format!("BASE={base}")]);
    let s = result.unwrap().measurements.scenario.unwrap();
    assert_eq!(s.failed_iterations.get("script.error"), Some(&1), "{out}");
    assert!(out.contains("init context"), "{out}");
}

/// Names a script makes are bounded: a 70,000-character metric name is
/// refused at load with what to do; an add() with a huge tag, a check with
/// a huge name, fail their iteration with the bound; nothing panics.
#[test]
fn huge_names_from_a_script_are_refused_not_kept() {
    let lab = common::FaultServer::serve(&[]);
    let base = format!("http://{}", lab.addr());
    let args = ["--target", base.as_str()];
    let huge = "x".repeat(70_000);
    let declared = format!(
        "import http from 'k6/http';\nimport {{ Counter }} from 'k6/metrics';\nconst c = new Counter('{huge}');\n\
         export default function () {{ http.get('{base}/'); }}\n"
    );
    let (code, out, _, _) = run(&declared, &[], &args);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("must be 1 to 64 letters") && out.len() < 4_000,
        "{}",
        &out[..out.len().min(500)]
    );
    let used = format!(
        "import http from 'k6/http';\nimport {{ check }} from 'k6';\nimport {{ Counter }} from 'k6/metrics';\n\
         const c = new Counter('orders');\nexport const options = {{ iterations: 4 }};\n\
         export default function () {{\n  const r = http.get('{base}/');\n  if (__ITER % 2 == 0) {{ c.add(1, {{ id: 'y'.repeat(70000) }}); }}\n  \
         else {{ check(r, {{ ['z'.repeat(70000)]: () => true }}); }}\n}}\n"
    );
    let (_, out, result, _) = run(&used, &[], &args);
    let s = result.unwrap().measurements.scenario.unwrap();
    assert_eq!(s.failed_iterations.get("script.error"), Some(&4), "{out}");
    assert!(
        s.custom.keys().all(|k| k.len() < 200),
        "{:?}",
        s.custom.keys().collect::<Vec<_>>()
    );
    assert!(
        s.checks.is_empty(),
        "{:?}",
        s.checks.keys().map(|k| k.len()).collect::<Vec<_>>()
    );
}

const SETUP: &str = r#"
import http from 'k6/http';
import { check } from 'k6';

export const options = { vus: 4, iterations: 12 };
const BASE = 'BASE_URL';
const json = { headers: { 'Content-Type': 'application/json' } };

export function setup() {
  const email = `setup-${Math.random()}@example.test`;
  const reg = http.post(`${BASE}/auth/register`, JSON.stringify({ email, password: 'pw-k6' }), json);
  http.post(`${BASE}/auth/verify-otp`, JSON.stringify({ email, otp: reg.json('otp') }), json);
  const login = http.post(`${BASE}/auth/login`, JSON.stringify({ email, password: 'pw-k6' }), json);
  return { token: login.json('access_token'), email };
}

export default function (data) {
  const me = http.get(`${BASE}/auth/me`, { headers: { Authorization: `Bearer ${data.token}` }, tags: { name: 'me' } });
  check(me, { 'is the setup user': (r) => r.status === 200 && r.json('email') === data.email });
}

export function teardown(data) {
  http.get(`${BASE}/auth/me`, { headers: { Authorization: `Bearer ${data.token}` }, tags: { name: 'bye' } });
}
"#;

/// `setup()` runs once before the load and `teardown(data)` once after it,
/// as in k6: nginx counts one login, every VU's requests carry the token
/// setup returned, and their requests are kept apart in the result.
#[test]
fn setup_runs_once_and_every_vu_gets_its_data() {
    let lab = common::auth_lab();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = front(lab.addr(), &log);
    let script = SETUP.replace("BASE_URL", &nginx.url(""));
    let (code, out, r, violations) = run(&script, &[], &["--threads", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(violations.is_empty(), "{violations:#?}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(
        (
            s.checks["is the setup user"].passes,
            s.checks["is the setup user"].fails
        ),
        (12, 0)
    );
    assert_eq!(s.tags["scenario:setup"].requests, 3);
    assert_eq!(s.tags["scenario:teardown"].requests, 1);
    assert_eq!(
        r.measurements.requests.attempted, 12,
        "setup and teardown are not the load's"
    );
    let lines = common::access_log(&log);
    for (line, n) in [
        ("POST /auth/register 200", 1),
        ("POST /auth/login 200", 1),
        ("GET /auth/me 200", 13),
    ] {
        assert_eq!(lines.iter().filter(|l| *l == line).count(), n, "{line}: {lines:?}");
    }
    assert!(out.contains("setup: ran once before the load"), "{out}");

    // A setup() that throws stops the run before any load, with its message.
    let failing = script.replace("return { token", "throw new Error('no tenant today'); return { token");
    let (code, out, _, _) = run(&failing, &[], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no tenant today"), "{out}");
    assert_eq!(
        common::access_log(&log)
            .iter()
            .filter(|l| l.starts_with("GET /auth/me"))
            .count(),
        13,
        "no load ran"
    );
}

/// `http.batch` in its array and object forms: every request sent and
/// counted, the responses in the shape asked for.
#[test]
fn a_batch_sends_every_request_and_answers_in_its_shape() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format s '$request_method $uri $status';",
        &format!("access_log {} s;\nlocation / {{ return 200 '$uri'; }}", log.display()),
    );
    let base = nginx.url("");
    let script = format!(
        r#"
import http from 'k6/http';
import {{ check }} from 'k6';
export const options = {{ vus: 2, iterations: 4 }};
export default function () {{
  const list = http.batch(['{base}/a', ['POST', '{base}/b', 'x=1', {{ tags: {{ name: 'b' }} }}], {{ method: 'GET', url: '{base}/c' }}]);
  const named = http.batch({{ d: '{base}/d', e: ['GET', '{base}/e'] }});
  check(list, {{ 'list in order': (l) => l.length === 3 && l[0].body === '/a' && l[1].body === '/b' && l[2].body === '/c' }});
  check(named, {{ 'by name': (n) => n.d.body === '/d' && n.e.status === 200 }});
}}
"#
    );
    let (code, out, r, _) = run(&script, &[], &[]);
    assert_eq!(code, 0, "{out}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!((s.checks["list in order"].passes, s.checks["by name"].passes), (4, 4));
    assert_eq!(r.measurements.requests.ok, 20);
    let lines = common::access_log(&log);
    for (line, n) in [
        ("GET /a 200", 4),
        ("POST /b 200", 4),
        ("GET /c 200", 4),
        ("GET /d 200", 4),
        ("GET /e 200", 4),
    ] {
        assert_eq!(lines.iter().filter(|l| *l == line).count(), n, "{line}: {lines:?}");
    }
}

/// A users file read with `open()` into a `SharedArray`, each VU taking its
/// own user: nginx sees every user's requests, as many as their VU made.
#[test]
fn shared_arrays_from_open_feed_every_vu() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format s '$request_method $uri $status';",
        &format!("access_log {} s;\nlocation / {{ return 200 'ok'; }}", log.display()),
    );
    let script = format!(
        r#"
import http from 'k6/http';
import {{ SharedArray }} from 'k6/data';
const users = new SharedArray('users', () => JSON.parse(open('./data/users.json')));
export const options = {{ vus: 3, iterations: 9 }};
export default function () {{
  const u = users[(__VU - 1) % users.length];
  http.get('{}/users/' + u.name, {{ tags: {{ name: 'user' }} }});
}}
"#,
        nginx.url("")
    );
    let users = r#"[{"name":"ada"},{"name":"bob"},{"name":"cy"}]"#;
    let (code, out, r, _) = run(&script, &[("data/users.json", users)], &[]);
    assert_eq!(code, 0, "{out}");
    let r = r.unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.scenario.as_ref().unwrap().tags["step:user"].requests, 9);
    let lines = common::access_log(&log);
    assert_eq!(lines.len(), 9, "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| ["GET /users/ada 200", "GET /users/bob 200", "GET /users/cy 200"].contains(&l.as_str())),
        "{lines:?}"
    );

    // /dev/zero as the data file: refused at load, bounded, at its line.
    let zero = script.replace("./data/users.json", "/dev/zero");
    let (code, out, _, _) = run(&zero, &[], &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("script.js:4:") && out.contains("/dev/zero"), "{out}");
}

/// `http.cookieJar()` is the VU's jar: it reads what the server set, and a
/// cookie set into it goes out with the next request (nginx echoes them).
#[test]
fn the_cookie_jar_reads_and_sets_the_vus_cookies() {
    let nginx = common::Nginx::start(
        "location = /set { add_header Set-Cookie 'sid=abc; Path=/'; return 200 'set'; }\n\
         location / { return 200 'cookies:$http_cookie'; }",
    );
    let base = nginx.url("");
    let script = format!(
        r#"
import http from 'k6/http';
import {{ check }} from 'k6';
export const options = {{ vus: 1, iterations: 3 }};
export default function () {{
  const jar = http.cookieJar();
  http.get('{base}/set');
  const seen = jar.cookiesForURL('{base}/');
  jar.set('{base}/', 'lang', 'en');
  const r = http.get('{base}/echo');
  check(r, {{
    'seen': () => seen.sid !== undefined && seen.sid[0] === 'abc',
    'both sent': (res) => res.body.includes('sid=abc') && res.body.includes('lang=en'),
  }});
}}
"#
    );
    let (code, out, r, _) = run(&script, &[], &[]);
    assert_eq!(code, 0, "{out}");
    let s = r.unwrap().measurements.scenario.unwrap();
    assert_eq!((s.checks["seen"].passes, s.checks["both sent"].passes), (3, 3), "{out}");
}

/// `responseCallback: http.expectedStatuses(...)` and
/// `http.setResponseCallback` decide which statuses count as failed, per
/// request, as in k6.
#[test]
fn expected_statuses_decide_what_counts_as_failed() {
    let nginx = common::Nginx::start("location = /missing { return 404; }\nlocation / { return 200; }");
    let base = nginx.url("");
    let script = format!(
        r#"
import http from 'k6/http';
export const options = {{ vus: 1, iterations: 2 }};
export default function () {{
  http.get('{base}/missing', {{ tags: {{ name: 'plain' }} }});
  http.get('{base}/missing', {{ tags: {{ name: 'expected' }}, responseCallback: http.expectedStatuses(200, {{ min: 400, max: 404 }}) }});
  http.get('{base}/', {{ tags: {{ name: 'not200' }}, responseCallback: http.expectedStatuses(404) }});
  http.setResponseCallback(http.expectedStatuses({{ min: 200, max: 499 }}));
  http.get('{base}/missing', {{ tags: {{ name: 'default' }} }});
  http.setResponseCallback(null);
  http.get('{base}/missing', {{ tags: {{ name: 'none' }} }});
  http.setResponseCallback(http.expectedStatuses({{ min: 200, max: 399 }}));
}}
"#
    );
    let (code, out, r, _) = run(&script, &[], &[]);
    assert_eq!(code, 0, "{out}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    let failed = |n: &str| s.tags[&format!("step:{n}")].failed;
    assert_eq!(
        (
            failed("plain"),
            failed("expected"),
            failed("not200"),
            failed("default"),
            failed("none")
        ),
        (2, 0, 2, 0, 0)
    );
}

/// `options.scenarios`: each k6 scenario is a throng scenario with the same
/// executor, running the function its `exec` names; nginx counts each.
#[test]
fn k6_scenarios_run_their_exec_functions() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format s '$request_method $uri $status';",
        &format!("access_log {} s;\nlocation / {{ return 200; }}", log.display()),
    );
    let base = nginx.url("");
    let script = format!(
        r#"
import http from 'k6/http';
export const options = {{
  scenarios: {{
    admins: {{ executor: 'per-vu-iterations', vus: 2, iterations: 3, exec: 'admin', maxDuration: '30s' }},
    shoppers: {{ executor: 'shared-iterations', vus: 1, iterations: 4, startTime: '100ms' }},
    rate: {{ executor: 'constant-arrival-rate', rate: 20, timeUnit: '1s', duration: '1s', preAllocatedVUs: 2, exec: 'admin' }},
  }},
}};
export function admin() {{ http.get('{base}/admin', {{ tags: {{ name: 'admin' }} }}); }}
export default function () {{ http.get('{base}/shop', {{ tags: {{ name: 'shop' }} }}); }}
"#
    );
    let (code, out, r, violations) = run(&script, &[], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(violations.is_empty(), "{violations:#?}");
    let r = r.unwrap();
    assert_books_balance(&r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.tags["scenario:shoppers"].requests, 4);
    // 20 starts due in the second at 20/s: each made, or counted dropped.
    let rate = s.tags["scenario:rate"].requests;
    assert_eq!(rate + s.dropped_iterations, 20, "{out}");
    assert_eq!(s.tags["scenario:admins"].requests, 6);
    let lines = common::access_log(&log);
    let count = |l: &str| lines.iter().filter(|x| *x == l).count() as u64;
    assert_eq!((count("GET /admin 200"), count("GET /shop 200")), (6 + rate, 4));

    // An exec that names no exported function is refused before the run.
    let bad = script.replace("exec: 'admin', maxDuration", "exec: 'nobody', maxDuration");
    let (code, out, _, _) = run(&bad, &[], &[]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("exec 'nobody' is not a function the script exports"),
        "{out}"
    );
}
