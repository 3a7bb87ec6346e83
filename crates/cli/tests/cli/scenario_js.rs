//! `js:` steps in scenario files against nginx, whose access log shows
//! what the requests after a step carried: the values the step computed
//! from a response and the VU's variables; a step that never ends is
//! stopped, one that writes a variable its `sets:` does not name fails,
//! and neither shows a value it read.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Nginx, access_log, assert_books_balance};

struct Server {
    nginx: Nginx,
    log: std::path::PathBuf,
    _logs: tempfile::TempDir,
}

fn server() -> Server {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = Nginx::start_listen_http(
        "log_format js '$request_method $uri $http_x_total';",
        "",
        &format!("access_log {} js;", log.display()),
        "location = /cart { default_type application/json; \
         return 200 '[{\"id\":\"a7\",\"price\":3},{\"id\":\"b2\",\"price\":4.5}]'; }\n\
         location / { return 200 'ok'; }",
    );
    Server {
        nginx,
        log,
        _logs: logs,
    }
}

fn file(n: &Server, executor: &str, flow: &str) -> String {
    format!(
        "target: {}\nscenarios:\n  default:\n{executor}\n    flow:\n{flow}",
        n.nginx.url("")
    )
}

fn run_with_env(yaml: &str, name: &str, value: &str) -> common::Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, yaml).unwrap();
    common::with_json(
        common::throng()
            .arg("run")
            .arg(&path)
            .args(["--threads", "1"])
            .env(name, value),
    )
}

#[test]
fn a_js_step_computes_values_the_next_request_sends() {
    let n = server();
    let flow = r#"      - request: { name: cart, path: /cart, capture: { first: { json: /0/id } } }
      - js: |
          const items = JSON.parse(res.body);
          vars.total = String(items.reduce((s, i) => s + i.price, 0));
          const json = /^application\/json/.test(res.headers["content-type"]) ? "json" : "other";
          vars.tagged = [vars.first, __VU, __ITER, res.status, json, env.SHOP_REGION].join("-");
          check("two items", items.length === 2);
          check("odd iteration", __ITER % 2 === 1);
          add("cart_total", items.reduce((s, i) => s + i.price, 0));
          add("odd", __ITER % 2 === 1);
        sets: [total, tagged]
      - request: { name: pay, path: "/pay/{{tagged}}", headers: { X-Total: "{{total}}" } }
"#;
    let executor = "    executor: per-vu-iterations\n    vus: 2\n    iterations: 3";
    let yaml = format!(
        "metrics:\n  cart_total: counter\n  odd: rate\n{}thresholds:\n  checks{{check:two items}}: [rate == 1]\n",
        file(&n, executor, flow)
    );
    let run = run_with_env(&yaml, "SHOP_REGION", "eu");
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = access_log(&n.log);
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("GET /cart ")).count(),
        6,
        "{lines:?}"
    );
    for vu in 1..=2 {
        for iter in 0..3 {
            let want = format!("GET /pay/a7-{vu}-{iter}-200-json-eu 7.5");
            assert_eq!(lines.iter().filter(|l| **l == want).count(), 1, "{want}: {lines:?}");
        }
    }
    let r = run.result();
    assert_books_balance(r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.iterations, 6);
    assert!(s.failed_iterations.is_empty(), "{:?}", s.failed_messages);
    // check(name, passed) counts as a request's checks do.
    let checks = &s.checks;
    assert_eq!(
        (checks["two items"].passes, checks["two items"].fails),
        (6, 0),
        "{checks:?}"
    );
    // Iterations 0, 1, 2 of each VU: 1 is odd.
    assert_eq!(
        (checks["odd iteration"].passes, checks["odd iteration"].fails),
        (2, 4),
        "{checks:?}"
    );
    assert_eq!(r.thresholds.len(), 1);
    assert!(r.thresholds[0].passed, "{:?}", r.thresholds);
    // add(metric, value) records as an add: step does.
    let total = &s.custom["cart_total"];
    assert_eq!((total.count, total.sum, total.invalid), (6, 45.0, 0), "{total:?}");
    let odd = &s.custom["odd"];
    assert_eq!((odd.count, odd.hits), (6, 2), "{odd:?}");
    // The plan in the result keeps the js: step, as the schema says.
    assert_eq!(common::schema_violations(&run.json), Vec::<String>::new());
}

#[test]
fn a_js_step_that_never_ends_is_stopped_and_its_iteration_fails() {
    let n = server();
    let flow = r#"      - request: { name: before, path: /before }
      - js: "while (true) {}"
        timeout: 50ms
      - request: { name: after, path: /after }
"#;
    let executor = "    executor: per-vu-iterations\n    vus: 2\n    iterations: 3";
    let run = common::scenario(&file(&n, executor, flow));
    let r = run.result();
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(
        s.failed_iterations.get("js.timeout"),
        Some(&6),
        "{:?}",
        s.failed_messages
    );
    assert!(
        s.failed_messages["js.timeout"].contains("past its timeout"),
        "{:?}",
        s.failed_messages
    );
    assert_eq!(s.iterations, 0);
    let lines = access_log(&n.log);
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("GET /before ")).count(),
        6,
        "{lines:?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("GET /after ")).count(),
        0,
        "{lines:?}"
    );
    assert_books_balance(r);
}

#[test]
fn a_js_step_may_write_only_what_its_sets_names_and_never_shows_a_value() {
    let n = server();
    let flow = r#"      - request: { name: cart, path: /cart, capture: { first: { json: /0/id } } }
      - if: "iter == 0"
        then:
          - js: |
              vars.total = "1";
              vars.other = env.API_TOKEN;
            sets: [total]
      - if: "iter == 1"
        then:
          - js: |
              throw new Error("token " + env.API_TOKEN + " " + res.body);
      - request: { name: after, path: /after }
"#;
    let executor = "    executor: per-vu-iterations\n    vus: 1\n    iterations: 2";
    let run = run_with_env(&file(&n, executor, flow), "API_TOKEN", "tok-s3cr3t");
    let r = run.result();
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.failed_iterations.get("js.sets"), Some(&1), "{:?}", s.failed_messages);
    // Where the step is, by the file's name and the line its code starts.
    assert!(
        s.failed_messages["js.sets"].starts_with("js: step at s.yaml:12: "),
        "{:?}",
        s.failed_messages
    );
    assert!(
        s.failed_messages["js.sets"].contains("vars.other"),
        "{:?}",
        s.failed_messages
    );
    assert!(
        s.failed_messages["js.sets"].contains("it sets total"),
        "{:?}",
        s.failed_messages
    );
    assert_eq!(s.failed_iterations.get("js.error"), Some(&1), "{:?}", s.failed_messages);
    assert!(
        s.failed_messages["js.error"].contains("threw Error at line 1 of the code"),
        "{:?}",
        s.failed_messages
    );
    let lines = access_log(&n.log);
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("GET /after ")).count(),
        0,
        "{lines:?}"
    );
    let json = std::fs::read_to_string(&run.json).unwrap();
    for text in [&json, &run.stdout(), &run.stderr()] {
        assert!(!text.contains("s3cr3t") && !text.contains("price"), "{text}");
    }
    // A metric's name computed from a secret, not declared: not quoted.
    let flow = "      - request: { name: cart, path: /cart }\n      - js: add(env.API_TOKEN, 1)\n";
    let run = run_with_env(&file(&n, executor, flow), "API_TOKEN", "tok-s3cr3t");
    let s = run.result().measurements.scenario.clone().unwrap();
    assert_eq!(s.failed_iterations.get("js.error"), Some(&2), "{:?}", s.failed_messages);
    assert!(
        s.failed_messages["js.error"].contains("a name of 10 characters"),
        "{:?}",
        s.failed_messages
    );
    let json = std::fs::read_to_string(&run.json).unwrap();
    for text in [&json, &run.stdout(), &run.stderr()] {
        assert!(!text.contains("s3cr3t"), "{text}");
    }
}

#[test]
fn a_js_syntax_error_is_refused_at_load_at_its_line_in_the_file() {
    let n = server();
    let flow = "      - request: { name: a, path: /a }\n      - js: |\n          const a = 1;\n          vars.x = (a +;\n        sets: [x]\n";
    let yaml = file(
        &n,
        "    executor: shared-iterations\n    vus: 1\n    iterations: 1",
        flow,
    );
    let line = yaml.lines().position(|l| l.contains("vars.x = (a +;")).unwrap() + 1;
    let run = common::scenario(&yaml);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let err = run.stderr();
    // At the code's column: the block's indentation.
    assert!(
        err.contains(&format!("scenario.yaml:{line}:11: js: ")),
        "line {line}: {err}"
    );
    assert!(err.contains("line 2 of the step's code"), "{err}");
    assert!(access_log(&n.log).is_empty());
}

/// The guide's `js:` example, against the lab server (POST /echo answers
/// with the body it got): every check passes, so the value the step
/// computed from the first response reached the second request.
#[test]
fn the_guides_js_example_runs_against_the_lab() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"),
    )
    .unwrap();
    let block = doc
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.starts_with("# cart.yaml"))
        .expect("the guide's # cart.yaml block");
    let lab = common::lab(None);
    let yaml = block.replace("http://127.0.0.1:8080", &format!("http://{}", lab.addr()));
    let run = common::scenario(&yaml);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.iterations, 10);
    assert!(s.failed_iterations.is_empty(), "{:?}", s.failed_messages);
    assert_eq!(s.tags["step:pay"].requests, 10);
    assert!(r.thresholds.iter().all(|v| v.passed), "{:?}", r.thresholds);
    assert_eq!(r.thresholds.len(), 1);
}

/// A `setup:` flow's `js:` step sets what the load's `js:` steps read as
/// `setup.NAME`.
#[test]
fn a_setup_js_step_feeds_the_loads_js_steps() {
    let n = server();
    let yaml = format!(
        "target: {}\nsetup:\n  - request: {{ name: seed, path: /cart }}\n  - js: vars.token = JSON.parse(res.body)[0].id.toUpperCase()\n    sets: [token]\nscenarios:\n  default:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 1\n    flow:\n      - js: vars.t = setup.token + '-' + __VU\n        sets: [t]\n      - request: {{ name: use, path: \"/t/{{{{t}}}}\" }}\n",
        n.nginx.url("")
    );
    let run = common::scenario(&yaml);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = access_log(&n.log);
    for want in ["GET /t/A7-1 -", "GET /t/A7-2 -"] {
        assert_eq!(lines.iter().filter(|l| **l == want).count(), 1, "{want}: {lines:?}");
    }
}
