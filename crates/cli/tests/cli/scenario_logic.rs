//! Control flow in scenario files — `if:`/`then:`/`else:`, `repeat:`,
//! `until:` with its `max:`, `choose:` by weight — against nginx, whose
//! access log is the server's own count of every branch taken.

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
        "log_format logic '$request_method $uri';",
        "",
        &format!("access_log {} logic;", log.display()),
        "location = /bad { return 500; }\n\
         location = /job { default_type application/json; return 200 '{\"state\":\"done\"}'; }\n\
         location / { return 200 'ok'; }",
    );
    Server {
        nginx,
        log,
        _logs: logs,
    }
}

fn count(lines: &[String], path: &str) -> usize {
    lines.iter().filter(|l| *l == &format!("GET {path}")).count()
}

fn file(n: &Server, executor: &str, flow: &str) -> String {
    format!(
        "target: {}\nscenarios:\n  default:\n{executor}\n    flow:\n{flow}",
        n.nginx.url("")
    )
}

#[test]
fn if_else_and_repeat_take_the_branches_the_server_counts() {
    let n = server();
    let flow = r#"      - request: { name: first, path: /ok }
      - if: "status == 200"
        then:
          - request: { name: yes, path: /yes }
        else:
          - request: { name: no, path: /no }
      - request: { name: bad, path: /bad, expect: [500] }
      - if: "status == 200 || status >= 600"
        then:
          - request: { name: never, path: /never }
        else:
          - request: { name: otherwise, path: /otherwise }
      - request: { name: job, path: /job, capture: { state: { json: /state } } }
      - if: "state == 'done' && contains(lower('DONE'), state)"
        then:
          - repeat: 3
            steps:
              - group:
                  name: thrice
                  flow:
                    - request: { name: thrice, path: /thrice }
      - repeat: 2
        steps:
          - if: "iter % 2 == 0"
            then:
              - request: { name: even, path: /even }
"#;
    let executor = "    executor: per-vu-iterations\n    vus: 2\n    iterations: 5";
    let run = common::scenario(&file(&n, executor, flow));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = access_log(&n.log);
    for (path, want) in [
        ("/ok", 10),
        ("/yes", 10),
        ("/no", 0),
        ("/bad", 10),
        ("/never", 0),
        ("/otherwise", 10),
        ("/job", 10),
        ("/thrice", 30),
        // Iterations 0, 2 and 4 of each VU, twice each.
        ("/even", 2 * 3 * 2),
    ] {
        assert_eq!(count(&lines, path), want, "{path}: {lines:?}");
    }
    let r = run.result();
    assert_books_balance(r);
    let s = r.measurements.scenario.as_ref().unwrap();
    assert_eq!(s.tags["step:thrice"].requests, 30);
    assert_eq!(s.tags["group:thrice"].requests, 30);
    assert_eq!(s.groups["thrice"].count(), 30);
    assert_eq!(s.iterations, 10);
    assert!(s.failed_iterations.is_empty(), "{:?}", s.failed_iterations);
    // The plan in the result keeps the control steps, as the schema says.
    assert_eq!(common::schema_violations(&run.json), Vec::<String>::new());
}

#[test]
fn until_ends_when_its_condition_holds_or_at_max_and_its_check_says_which() {
    let n = server();
    let flow = r#"      - until: "status == 200"
        max: 4
        steps:
          - request: { name: poll_bad, path: /bad, expect: [500] }
      - until: "status < 300"
        max: 4
        steps:
          - request: { name: poll_ok, path: /ok }
"#;
    let executor = "    executor: shared-iterations\n    vus: 1\n    iterations: 5";
    let run = common::scenario(&file(&n, executor, flow));
    // The first loop's check fails every time: a check is not a threshold.
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = access_log(&n.log);
    assert_eq!(count(&lines, "/bad"), 5 * 4, "max passes each time");
    assert_eq!(count(&lines, "/ok"), 5, "one pass each time");
    let s = run.result().measurements.scenario.clone().unwrap();
    assert_eq!(
        (
            s.checks["until: status == 200"].passes,
            s.checks["until: status == 200"].fails
        ),
        (0, 5)
    );
    assert_eq!(
        (
            s.checks["until: status < 300"].passes,
            s.checks["until: status < 300"].fails
        ),
        (5, 0)
    );
}

#[test]
fn choose_takes_each_branch_by_its_weight() {
    let n = server();
    let flow = r#"      - choose:
          - weight: 60
            steps:
              - request: { name: browse, path: /browse }
          - weight: 40
            steps:
              - request: { name: buy, path: /buy }
              - request: { name: pay, path: /pay }
"#;
    let executor = "    executor: shared-iterations\n    vus: 4\n    iterations: 400";
    let run = common::scenario(&file(&n, executor, flow));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = access_log(&n.log);
    let (browse, buy, pay) = (count(&lines, "/browse"), count(&lines, "/buy"), count(&lines, "/pay"));
    assert_eq!(browse + buy, 400, "one branch per iteration");
    assert_eq!(buy, pay, "a branch runs whole");
    // 400 draws at 60%: the standard deviation is 9.8; 50 is five of them.
    assert!((190..=290).contains(&browse), "60% of 400 is 240, got {browse}");
    let s = run.result().measurements.scenario.clone().unwrap();
    assert_eq!(s.tags["step:browse"].requests as usize, browse);
}

#[test]
fn control_steps_are_checked_before_anything_runs() {
    let n = server();
    let cases = [
        (
            "      - until: \"status == 200\"\n        steps:\n          - request: { path: /x }\n",
            "until: needs max:",
        ),
        (
            "      - if: \"status == \"\n        then:\n          - request: { path: /x }\n",
            "at column",
        ),
        (
            "      - repeat: 0\n        steps:\n          - request: { path: /x }\n",
            "repeat: 0",
        ),
        (
            "      - choose:\n          - weight: 0\n            steps:\n              - request: { path: /x }\n",
            "every weight is at least 1",
        ),
        (
            "      - if: \"true\"\n        then:\n          - request: { path: /x }\n        max: 3\n",
            "max: does not go with if:",
        ),
        (
            "      - then:\n          - request: { path: /x }\n",
            "then: belongs to an if:",
        ),
    ];
    for (flow, want) in cases {
        let run = common::scenario(&file(
            &n,
            "    executor: shared-iterations\n    vus: 1\n    iterations: 1",
            flow,
        ));
        assert_eq!(run.code(), 2, "{flow}: {}", run.stderr());
        assert!(run.stderr().contains(want), "{flow}: {}", run.stderr());
        assert!(
            run.stderr().contains("scenario.yaml:"),
            "{flow}: where: {}",
            run.stderr()
        );
    }
    // Seventeen loops deep: past the nesting bound.
    let mut deep = String::new();
    for level in 0..17 {
        let pad = " ".repeat(6 + 4 * level);
        deep.push_str(&format!("{pad}- repeat: 1\n{pad}  steps:\n"));
    }
    deep.push_str(&format!("{}- request: {{ path: /x }}\n", " ".repeat(6 + 4 * 17)));
    let run = common::scenario(&file(
        &n,
        "    executor: shared-iterations\n    vus: 1\n    iterations: 1",
        &deep,
    ));
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("nest at most 16 deep"), "{}", run.stderr());
    assert!(access_log(&n.log).is_empty(), "nothing was sent");
}

/// The guide's example (`# logic.yaml`) against the lab: every branch and
/// loop counted as the guide says.
#[test]
fn the_guides_example_runs_against_the_lab() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/src/scenarios.md"),
    )
    .unwrap();
    let block = doc
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .find(|b| b.starts_with("# logic.yaml"))
        .expect("the guide's # logic.yaml block");
    let lab = common::FaultServer::serve(&[]);
    let run = common::scenario(&block.replace("http://127.0.0.1:8080", &format!("http://{}", lab.addr())));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let s = r.measurements.scenario.as_ref().unwrap();
    let n = |step: &str| s.tags.get(&format!("step:{step}")).map_or(0, |t| t.requests);
    assert_eq!(n("browse") + n("search"), 20, "one branch per pass");
    assert_eq!(n("retry"), n("search"), "if: status == 404 after each search only");
    assert_eq!(n("page"), 40);
    assert_eq!(n("poll"), 20, "the lab answers 200 at once: one pass each");
    assert_eq!(s.checks["until: status == 200"].passes, 20);
}

/// An expression that cannot be worked out while running fails its
/// iteration, counted as `expression` with its message; nothing after it
/// in that iteration is sent.
#[test]
fn an_expression_that_fails_while_running_fails_its_iteration() {
    let n = server();
    let flow = r#"      - request: { name: job, path: /job, capture: { state: { json: /state } } }
      - if: "number(state) > 1"
        then:
          - request: { name: never, path: /never }
      - request: { name: after, path: /after }
"#;
    let run = common::scenario(&file(
        &n,
        "    executor: shared-iterations\n    vus: 1\n    iterations: 3",
        flow,
    ));
    let lines = access_log(&n.log);
    assert_eq!(
        (count(&lines, "/job"), count(&lines, "/never"), count(&lines, "/after")),
        (3, 0, 0)
    );
    let s = run.result().measurements.scenario.clone().unwrap();
    assert_eq!(s.failed_iterations.get("expression"), Some(&3), "{}", run.stdout());
    assert!(
        s.failed_messages["expression"].contains("number(state) > 1"),
        "{:?}",
        s.failed_messages
    );
}

/// `{{ EXPR }}` in templates renders what the evaluator works out (the
/// server's log holds every path), `add:` values may be expressions, and a
/// check's `expr:` reads the response and the step's captures: each counted
/// exactly.
#[test]
fn templates_and_checks_evaluate_expressions() {
    let n = server();
    let flow = r#"      - request:
          name: job
          path: /job
          capture: { state: { json: /state } }
          check:
            done: { expr: "json('/state') == 'done' && status == 200 && state == 'done'" }
            pending: { expr: "json('/state') == 'pending'" }
            not a number: { expr: "number(json('/state')) > 0" }
            body: { expr: "contains(body, state) && duration_ms >= 0" }
      - request: { name: next, path: "/x/{{ upper(state) }}/{{ iter * 10 + vu }}/{{ pick('a', 'a') }}" }
      - add: { metric: letters, value: "{{ len(state) + 1 }}" }
"#;
    let text = format!(
        "target: {}\nmetrics:\n  letters: counter\nscenarios:\n  default:\n    executor: per-vu-iterations\n    \
         vus: 1\n    iterations: 3\n    flow:\n{flow}",
        n.nginx.url("")
    );
    let run = common::scenario(&text);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let lines = access_log(&n.log);
    assert_eq!(count(&lines, "/job"), 3);
    for want in ["/x/DONE/1/a", "/x/DONE/11/a", "/x/DONE/21/a"] {
        assert_eq!(count(&lines, want), 1, "{want} in {lines:?}");
    }
    let s = run.result().measurements.scenario.clone().unwrap();
    let c = |name: &str| (s.checks[name].passes, s.checks[name].fails);
    assert_eq!(
        (c("done"), c("pending"), c("not a number"), c("body")),
        ((3, 0), (0, 3), (0, 3), (3, 0))
    );
    assert_eq!(s.custom["letters"].sum, 15.0, "(len('done') + 1) × 3");
    assert!(s.failed_iterations.is_empty(), "{:?}", s.failed_iterations);
    assert_eq!(common::schema_violations(&run.json), Vec::<String>::new());
}

/// An expression in a template that cannot be worked out: the request is
/// never sent (nor counted), its iteration fails as `expression` with the
/// template in the message, and the flow after it does not run.
#[test]
fn a_template_expression_that_fails_sends_nothing_and_fails_its_iteration() {
    let n = server();
    let flow = r#"      - request: { name: job, path: /job, capture: { state: { json: /state } } }
      - request: { name: never, path: "/never/{{ number(state) * 2 }}" }
      - request: { name: after, path: /after }
"#;
    let run = common::scenario(&file(
        &n,
        "    executor: shared-iterations\n    vus: 1\n    iterations: 3",
        flow,
    ));
    let lines = access_log(&n.log);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(count(&lines, "/job"), 3);
    let r = run.result();
    assert_eq!(r.measurements.requests.attempted, 3, "only what was sent is counted");
    let s = r.measurements.scenario.clone().unwrap();
    assert_eq!(s.failed_iterations.get("expression"), Some(&3), "{}", run.stdout());
    assert!(
        s.failed_messages["expression"].contains("number(state) * 2")
            && s.failed_messages["expression"].contains("not a number"),
        "{:?}",
        s.failed_messages
    );
    assert_books_balance(r);
}

/// Mistakes in template expressions and `expr:` checks are refused when the
/// file is read, with their place.
#[test]
fn template_and_check_expressions_are_checked_before_anything_runs() {
    let n = server();
    for (flow, want) in [
        ("      - request: { name: a, path: \"/{{ 1 + }}\" }\n", "at column"),
        (
            "      - request: { name: a, path: \"/{{ json('/x') }}\" }\n",
            "only a check's expr:",
        ),
        (
            "      - request: { name: a, path: \"/{{ lower(nobody) }}\" }\n",
            "{{nobody}} is not defined",
        ),
        (
            "      - request: { name: a, path: /, check: { c: { expr: \"status ==\" } } }\n",
            "check 'c': expr 'status ==': at column",
        ),
        (
            "      - request: { name: a, path: /, check: { c: { expr: \"1\", status: [200] } } }\n",
            "give only one of",
        ),
    ] {
        let run = common::scenario(&file(
            &n,
            "    executor: shared-iterations\n    vus: 1\n    iterations: 1",
            flow,
        ));
        assert_eq!(run.code(), 2, "{flow}: {}", run.stderr());
        assert!(run.stderr().contains(want), "{flow}: {}", run.stderr());
    }
    assert!(access_log(&n.log).is_empty());
}

/// An expression that fails on a secret's value says so without the value:
/// the message (kept in the result and printed) names the template and
/// the value's length, never its text.
#[test]
fn a_failing_expression_never_shows_the_value_it_read() {
    let n = server();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    let flow = "      - request: { name: a, path: \"/{{ number(env.API_TOKEN) }}\", headers: { X-A: \"{{ matches('x', env.API_TOKEN) }}\" } }\n";
    std::fs::write(
        &path,
        file(
            &n,
            "    executor: shared-iterations\n    vus: 1\n    iterations: 2",
            flow,
        ),
    )
    .unwrap();
    let run = common::with_json(
        common::throng()
            .arg("run")
            .arg(&path)
            .args(["--threads", "1"])
            .env("API_TOKEN", "tok-(s3cr3t"),
    );
    let r = run.result();
    let s = r.measurements.scenario.clone().unwrap();
    assert_eq!(s.failed_iterations.get("expression"), Some(&2), "{}", run.stdout());
    assert!(s.failed_messages["expression"].contains("a text of 11 characters is not a number"));
    let json = std::fs::read_to_string(&run.json).unwrap();
    for text in [&json, &run.stdout(), &run.stderr()] {
        assert!(!text.contains("s3cr3t"), "{text}");
    }
}
