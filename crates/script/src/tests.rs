//! A VU driven by a fake request performer: what it yields, in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::{Input, Limits, Response, Script, ScriptVu, Stage, Yield};

fn load(src: &str) -> Arc<Script> {
    load_with(src, Limits::default())
}

fn load_with(src: &str, limits: Limits) -> Arc<Script> {
    let read = |name: &str| match name {
        "lib/util.js" => Ok("export function who() { return 'lib'; }".to_string()),
        _ => Err("no such file".to_string()),
    };
    Arc::new(Script::load("main.js", src, &read, &HashMap::new(), limits).unwrap())
}

/// Runs one iteration, answering each request with `answer`; every yield.
fn iteration(vu: &mut ScriptVu, answer: &dyn Fn(&crate::Request) -> Response) -> Vec<Yield> {
    let mut out = Vec::new();
    let mut y = vu.resume(Input::Start);
    for _ in 0..1000 {
        out.push(y.clone());
        y = match &y {
            Yield::Request(r) => vu.resume(Input::Response(answer(r))),
            Yield::Sleep(_) | Yield::Check { .. } | Yield::GroupStart(_) | Yield::GroupEnd => vu.resume(Input::Resumed),
            _ => return out,
        };
    }
    panic!("no end: {out:?}");
}

const LOGIN: &str = r#"
import http from 'k6/http';
import { check, group, sleep } from 'k6';
import { who } from './lib/util.js';
export const options = { vus: 3, duration: '2s', thresholds: { http_req_duration: ['p(95)<500'] } };
export default function () {
  const res = http.post('http://127.0.0.1:1/auth/login', JSON.stringify({ user: 'u' + __VU }),
    { headers: { 'Content-Type': 'application/json' }, tags: { name: 'login' } });
  const token = res.json('token');
  check(res, { 'logged in': (r) => r.status === 200, 'has token': () => token === 't' + __ITER });
  group('api', () => {
    const me = http.get('http://127.0.0.1:1/me?x=1', { headers: { Authorization: 'Bearer ' + token }, timeout: '2s' });
    check(me, { 'me': (r) => r.headers['Content-Type'] === 'text/plain' && r.body === who() });
  });
  sleep(0.25);
}
"#;

#[test]
fn a_script_yields_its_requests_checks_and_groups() {
    let s = load(LOGIN);
    assert_eq!(s.options.vus, Some(3));
    assert_eq!(
        s.options.thresholds,
        vec![("response".to_string(), vec!["p(95)<500ms".to_string()])]
    );
    let mut vu = ScriptVu::new(&s, 7, &HashMap::new(), Stage::Iterate, None).unwrap();
    for iter in 0..3u64 {
        let ys = iteration(&mut vu, &|r| {
            if r.url.ends_with("/login") {
                Response {
                    status: 200,
                    body: format!("{{\"token\":\"t{iter}\"}}").into_bytes(),
                    ..Response::default()
                }
            } else {
                Response {
                    status: 200,
                    headers: vec![("content-type".into(), "text/plain".into())],
                    body: b"lib".to_vec(),
                    ..Response::default()
                }
            }
        });
        let Yield::Request(login) = &ys[0] else {
            panic!("{ys:?}")
        };
        assert_eq!(login.method, "POST");
        assert_eq!(login.body.as_deref(), Some("{\"user\":\"u7\"}"));
        assert_eq!(login.name.as_deref(), Some("login"));
        assert_eq!(
            login.headers,
            vec![("Content-Type".to_string(), "application/json".to_string())]
        );
        assert_eq!(
            ys[1],
            Yield::Check {
                name: "logged in".into(),
                passed: true
            }
        );
        assert_eq!(
            ys[2],
            Yield::Check {
                name: "has token".into(),
                passed: true
            }
        );
        assert_eq!(ys[3], Yield::GroupStart("api".into()));
        let Yield::Request(me) = &ys[4] else { panic!("{ys:?}") };
        assert_eq!(
            me.headers,
            vec![("Authorization".to_string(), format!("Bearer t{iter}"))]
        );
        assert_eq!(me.timeout, Some(Duration::from_secs(2)));
        assert_eq!(
            ys[5],
            Yield::Check {
                name: "me".into(),
                passed: true
            }
        );
        assert_eq!(ys[6], Yield::GroupEnd);
        assert_eq!(ys[7], Yield::Sleep(Duration::from_millis(250)));
        assert_eq!(ys[8], Yield::IterationDone);
    }
}

#[test]
fn a_failed_request_is_status_zero_and_an_object_body_is_a_form() {
    let s = load(
        "import http from 'k6/http';\nimport { check } from 'k6';\nexport default function () {\n  const r = \
         http.post('http://h/', { a: 'x y', b: 1 });\n  check(r, { 'failed': (r) => r.status === 0 && r.error === \
         'refused' });\n}\n",
    );
    let mut vu = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Iterate, None).unwrap();
    let ys = iteration(&mut vu, &|_| Response {
        error: Some("refused".into()),
        ..Response::default()
    });
    let Yield::Request(r) = &ys[0] else { panic!("{ys:?}") };
    assert_eq!(r.body.as_deref(), Some("a=x%20y&b=1"));
    assert!(
        r.headers
            .iter()
            .any(|(k, v)| k == "Content-Type" && v == "application/x-www-form-urlencoded")
    );
    assert_eq!(
        ys[1],
        Yield::Check {
            name: "failed".into(),
            passed: true
        }
    );
}

fn failed_class(src: &str, limits: Limits) -> (&'static str, String) {
    let s = load_with(src, limits);
    let mut vu = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Iterate, None).unwrap();
    let ys = iteration(&mut vu, &|_| Response::default());
    match ys.last() {
        Some(Yield::Failed { class, message }) => {
            // The VU runs again after a failed iteration.
            let again = iteration(&mut vu, &|_| Response::default());
            assert!(matches!(again.last(), Some(Yield::Failed { .. })), "{again:?}");
            (class, message.clone())
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_scripts_fail_their_iteration_with_a_class() {
    let quick = Limits {
        cpu: Duration::from_millis(200),
        ..Limits::default()
    };
    let (c, m) = failed_class("export default function () { while (true) {} }", quick);
    assert_eq!(c, "script.timeout", "{m}");
    let (c, m) = failed_class(
        "function f(n) { return f(n + 1) + 1; }\nexport default function () { f(0); }",
        quick,
    );
    assert_eq!(c, "script.stack", "{m}");
    let (c, m) = failed_class(
        "export default function () { let a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length); }",
        Limits {
            memory: 16 << 20,
            cpu: Duration::from_secs(10),
            ..Limits::default()
        },
    );
    assert_eq!(c, "script.memory", "{m}");
    let (c, m) = failed_class("export default function () {\n  null.x;\n}", quick);
    assert_eq!(c, "script.error");
    assert!(m.contains("main.js:2"), "{m}");
}

#[test]
fn an_aborted_vu_ends_even_inside_a_request() {
    let s = load(
        "import http from 'k6/http';\nexport default function () { try { http.get('http://h/'); } catch (e) {} for (;;) {} }",
    );
    let mut vu = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Iterate, None).unwrap();
    assert!(matches!(vu.resume(Input::Start), Yield::Request(_)));
    assert_eq!(vu.resume(Input::Abort), Yield::Ended);
    // And one dropped while suspended ends in its destructor.
    let mut vu = ScriptVu::new(&s, 2, &HashMap::new(), Stage::Iterate, None).unwrap();
    assert!(matches!(vu.resume(Input::Start), Yield::Request(_)));
    drop(vu);
}

#[test]
fn init_errors_and_init_requests_are_refused_at_load() {
    let read = |_: &str| Err("no".to_string());
    let e = Script::load(
        "main.js",
        "export default function () {}\nnull.x;\n",
        &read,
        &HashMap::new(),
        Limits::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("main.js:2"), "{e}");
    let e = Script::load(
        "main.js",
        "import http from 'k6/http';\nhttp.get('http://h/');\nexport default function () {}\n",
        &read,
        &HashMap::new(),
        Limits::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("init context"), "{e}");
    let e = Script::load(
        "main.js",
        "export const options = {};\n",
        &read,
        &HashMap::new(),
        Limits::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("export default function"), "{e}");
}

#[test]
fn env_and_encoding_reach_the_script() {
    let src = "import { check } from 'k6';\nimport encoding from 'k6/encoding';\nexport default function () {\n  \
               check(null, { env: __ENV.WHO === 'me', b64: encoding.b64encode('a:b') === 'YTpi' && \
               encoding.b64decode('YTpi') === 'a:b' });\n}\n";
    let s = load(src);
    let env: HashMap<String, String> = [("WHO".to_string(), "me".to_string()), ("OTHER".into(), "x".into())].into();
    let mut vu = ScriptVu::new(&s, 1, &env, Stage::Iterate, None).unwrap();
    let ys = iteration(&mut vu, &|_| Response::default());
    assert_eq!(
        ys[0],
        Yield::Check {
            name: "env".into(),
            passed: true
        }
    );
    assert_eq!(
        ys[1],
        Yield::Check {
            name: "b64".into(),
            passed: true
        }
    );
    assert_eq!(s.env_names, Some(vec!["WHO".to_string()]));
}

#[test]
fn a_request_the_engine_refuses_throws_at_the_scripts_line() {
    let s = load("import http from 'k6/http';\nexport default function () {\n  http.get('http://elsewhere/');\n}\n");
    let mut vu = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Iterate, None).unwrap();
    assert!(matches!(vu.resume(Input::Start), Yield::Request(_)));
    match vu.resume(Input::Throw("not the target".into())) {
        Yield::Failed { class, message } => {
            assert_eq!(class, "script.error");
            assert!(
                message.contains("not the target") && message.contains("main.js:3"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Resident memory per VU, each suspended inside `sleep` after a request:
/// `cargo test --release -p throng-script -- --ignored --nocapture rss`.
#[test]
#[ignore = "a measurement: run by hand (see docs/PERFORMANCE.md)"]
fn rss_per_suspended_vu() {
    fn rss_kb() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4
    }
    let n: usize = std::env::var("VUS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    for (what, src) in [
        (
            "k6 only",
            "import { sleep } from 'k6';\nexport default function () { sleep(1); }\n",
        ),
        (
            "a GET, a check, a sleep",
            "import http from 'k6/http';\nimport { check, sleep } from 'k6';\nexport default function () {\n  const r = \
             http.get('http://h/');\n  check(r, { ok: (r) => r.status === 200 });\n  sleep(1);\n}\n",
        ),
    ] {
        let s = load(src);
        let before = rss_kb();
        let mut vus = Vec::with_capacity(n);
        for i in 0..n {
            let mut vu = ScriptVu::new(&s, i as u64 + 1, &HashMap::new(), Stage::Iterate, None).unwrap();
            let mut y = vu.resume(Input::Start);
            // Two iterations: to the second's sleep.
            for _ in 0..2 {
                while !matches!(y, Yield::Sleep(_)) {
                    y = match y {
                        Yield::Request(_) => vu.resume(Input::Response(Response {
                            status: 200,
                            body: b"hello".to_vec(),
                            ..Response::default()
                        })),
                        Yield::IterationDone => vu.resume(Input::Start),
                        Yield::Check { .. } => vu.resume(Input::Resumed),
                        other => panic!("{other:?}"),
                    };
                }
                if vus.len() == i {
                    y = vu.resume(Input::Resumed);
                    if matches!(y, Yield::IterationDone) {
                        y = vu.resume(Input::Start);
                    }
                }
            }
            vus.push(vu);
        }
        let after = rss_kb();
        println!("{what}: {n} VUs, {:.1} KB per VU", (after - before) as f64 / n as f64);
        drop(vus);
    }
}

/// `setup()` runs in a VU of its own; what it returns reaches the default
/// function and `teardown` of every VU as a copy of its own.
#[test]
fn setup_data_reaches_every_vu_and_teardown() {
    let s = load(
        r#"
import http from 'k6/http';
import { check } from 'k6';
export function setup() {
  const r = http.get('http://127.0.0.1:1/token');
  return { token: r.body, n: 3, list: [1, 2] };
}
export default function (data) {
  check(null, { 'has data': () => data.token === 'tok' && data.n === 3 && data.list.length === 2 });
  data.n = 99;
}
export function teardown(data) {
  check(null, { 'teardown data': () => data.token === 'tok' && data.n === 3 });
}
"#,
    );
    assert!(s.options.setup && s.options.teardown);
    assert!(s.options.scenario_yaml("http://127.0.0.1:1").contains("\nsetup:\n"));
    let answer = |_: &crate::Request| Response {
        status: 200,
        body: b"tok".to_vec(),
        ..Response::default()
    };
    let mut setup = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Setup, None).unwrap();
    let ys = iteration(&mut setup, &answer);
    assert!(matches!(ys.last(), Some(Yield::IterationDone)), "{ys:?}");
    let data = setup.setup_data().unwrap();
    assert_eq!(data, r#"{"token":"tok","n":3,"list":[1,2]}"#);
    let data: Arc<str> = data.into();
    for id in 1..=2 {
        let mut vu = ScriptVu::new(&s, id, &HashMap::new(), Stage::Iterate, Some(Arc::clone(&data))).unwrap();
        let ys = iteration(&mut vu, &answer);
        let passed = Yield::Check {
            name: "has data".into(),
            passed: true,
        };
        assert!(ys.contains(&passed), "VU {id}: {ys:?}");
    }
    let mut teardown = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Teardown, Some(data)).unwrap();
    let ys = iteration(&mut teardown, &answer);
    assert!(
        ys.contains(&Yield::Check {
            name: "teardown data".into(),
            passed: true
        }),
        "{ys:?}"
    );
    // A script without setup() gives its VUs `undefined`.
    let plain = load("export default function (data) { if (data !== undefined) throw new Error('x'); }");
    assert!(!plain.options.setup && !plain.options.teardown);
    let mut vu = ScriptVu::new(&plain, 1, &HashMap::new(), Stage::Iterate, None).unwrap();
    assert_eq!(iteration(&mut vu, &answer), vec![Yield::IterationDone]);
}

/// `k6/crypto`: the digests and HMACs k6 scripts sign requests with, as
/// hex and base64 text; what throng does not compute throws a TypeError.
#[test]
fn crypto_hashes_and_hmacs_match_their_known_values() {
    let s = load(
        r#"
import crypto from 'k6/crypto';
import { sha256, hmac, createHash } from 'k6/crypto';
import { check } from 'k6';
export default function () {
  check(null, {
    md5: () => crypto.md5('hello', 'hex') === '5d41402abc4b2a76b9719d911017c592',
    sha1: () => crypto.sha1('hello', 'hex') === 'aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d',
    sha256: () => sha256('hello', 'hex') === '2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824',
    b64: () => sha256('hello', 'base64') === 'LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=',
    hmac: () => hmac('sha256', 'key', 'The quick brown fox jumps over the lazy dog', 'hex')
      === 'f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8',
    stream: () => createHash('sha256').update('hel').update('lo').digest('hex') === sha256('hello', 'hex'),
    binary: () => sha256('hello', 'binary').byteLength === 32 && crypto.md5('hello').byteLength === 16,
    random: () => crypto.randomBytes(16).byteLength === 16,
  });
  crypto.randomBytes(0);
}
"#,
    );
    let mut vu = ScriptVu::new(&s, 1, &HashMap::new(), Stage::Iterate, None).unwrap();
    let ys = iteration(&mut vu, &|_| Response::default());
    for name in ["md5", "sha1", "sha256", "b64", "hmac", "stream", "binary", "random"] {
        let passed = Yield::Check {
            name: name.into(),
            passed: true,
        };
        assert!(ys.contains(&passed), "{name}: {ys:?}");
    }
    match ys.last() {
        Some(Yield::Failed { class, message }) => {
            assert_eq!(*class, "script.error");
            assert!(
                message.contains("randomBytes: give a whole number") && message.contains("main.js:"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `open()` reads its file once, at load; a `SharedArray` is built once
/// per run (the first VU to ask: here the options probe) and every VU
/// reads it, element by element, read-only.
#[test]
fn open_and_shared_arrays_are_read_once_and_shared() {
    let src = r#"
import { SharedArray } from 'k6/data';
import { check } from 'k6';
const users = new SharedArray('users', function () {
  if (__VU !== 0) throw new Error('built again by VU ' + __VU);
  return JSON.parse(open('./users.json'));
});
const raw = open('./users.json');
export default function () {
  check(null, {
    len: () => users.length === 3,
    idx: () => users[1].name === 'b' && users[3] === undefined,
    iter: () => { let s = ''; for (const u of users) s += u.name; return s === 'abc'; },
    map: () => users.map((u) => u.id).join(',') === '1,2,3',
    raw: () => raw.startsWith('[{'),
    ro: () => { try { users[0] = 1; return false; } catch (e) { return true; } },
  });
  open('./users.json');
}
"#;
    let read = |name: &str| match name {
        "users.json" => Ok(r#"[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"}]"#.to_string()),
        _ => Err("no such file".to_string()),
    };
    let s = Arc::new(Script::load("main.js", src, &read, &HashMap::new(), Limits::default()).unwrap());
    for id in 1..=2 {
        let mut vu = ScriptVu::new(&s, id, &HashMap::new(), Stage::Iterate, None).unwrap();
        let ys = iteration(&mut vu, &|_| Response::default());
        for name in ["len", "idx", "iter", "map", "raw", "ro"] {
            let passed = Yield::Check {
                name: name.into(),
                passed: true,
            };
            assert!(ys.contains(&passed), "VU {id}, {name}: {ys:?}");
        }
        match ys.last() {
            Some(Yield::Failed { message, .. }) => assert!(message.contains("init context"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
    // A file that is not there is refused at load, at its line.
    let e = Script::load(
        "main.js",
        "const d = open('./nope.json');\nexport default function () {}\n",
        &read,
        &HashMap::new(),
        Limits::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (1, 11), "{e}");
    assert!(e.message.contains("open('./nope.json')"), "{e}");
}
