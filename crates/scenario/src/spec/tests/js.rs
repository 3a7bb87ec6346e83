//! `js:` steps: their code, `sets:` and `timeout:`, and where their code
//! starts in the file.

use super::*;

const JS: &str = r#"
target: http://127.0.0.1:8080
scenarios:
  shop:
    executor: constant-vus
    vus: 1
    duration: 5s
    flow:
      - request:
          path: /cart
          capture:
            cart: { json: /items }
      - js: |
          const items = JSON.parse(vars.cart);
          vars.total = String(items.length);
        sets: [total]
      - js: vars.first = "1"
        sets: [first]
        timeout: 250ms
      - request:
          path: /pay/{{total}}/{{first}}
"#;

fn js(plan: &ScenarioPlan) -> Vec<&JsStep> {
    js_steps(&plan.scenarios[0].flow)
}

#[test]
fn a_js_step_keeps_its_code_sets_timeout_and_where_its_code_starts() {
    let plan = parse(JS).expect("valid");
    let steps = js(&plan);
    assert_eq!(steps.len(), 2);
    assert!(steps[0].code.starts_with("const items = JSON.parse(vars.cart);\n"));
    assert_eq!(steps[0].sets, ["total"]);
    assert_eq!(steps[0].timeout, DEFAULT_JS_TIMEOUT);
    // The block scalar's first line, at its indentation.
    assert_eq!((steps[0].line, steps[0].column), (14, 11));
    assert_eq!(steps[1].code, r#"vars.first = "1""#);
    assert_eq!(steps[1].timeout, Duration::from_millis(250));
    // On the key's own line, after `js: `.
    assert_eq!((steps[1].line, steps[1].column), (17, 13));
    // Its sets are captures for the steps after it, and the setup's.
    assert_eq!(capture_names(&plan.scenarios[0].flow), ["cart", "total", "first"]);
}

#[track_caller]
fn js_rejects(from: &str, to: &str, line: usize, message: &str) {
    assert!(JS.contains(from), "JS has no '{from}'");
    let text = JS.replacen(from, to, 1);
    let e = parse(&text).expect_err(to);
    assert!(e.message.contains(message), "{to}: {e}");
    assert_eq!(e.line, line, "{to}: {e}");
}

#[test]
fn a_js_step_is_checked_at_load() {
    js_rejects("sets: [total]", "sets: [total, total]", 16, "'total' is named twice");
    js_rejects("sets: [total]", "sets: [\"to tal\"]", 16, "letters, digits and _");
    js_rejects("sets: [total]", "sets: [vu]", 16, "built in");
    js_rejects("timeout: 250ms", "timeout: 2m", 19, "1ms to 60s");
    // The second js: step's own line, not the first's.
    js_rejects("js: vars.first = \"1\"", "js: \"  \"", 17, "js: is empty");
    js_rejects(
        "        sets: [first]\n",
        "        sets: [first]\n        think: 1s\n",
        17,
        "a step of its own",
    );
    // sets: without js:
    let first =
        "      - js: |\n          const items = JSON.parse(vars.cart);\n          vars.total = String(items.length);\n";
    js_rejects(first, "      - think: 1s\n", 14, "belongs to a js: step");
}

#[test]
fn a_variable_a_js_step_sets_is_read_after_it_only() {
    let text = JS.replacen("path: /cart", "path: /cart/{{total}}", 1);
    let e = parse(&text).expect_err("read before set");
    assert!(e.message.contains("before step 'js' captures it"), "{e}");
}

#[test]
fn a_js_step_holds_bounded_code() {
    let big = format!("      - js: \"{}\"\n", "x".repeat(MAX_JS_CODE + 1));
    let text = JS.replacen("      - js: vars.first = \"1\"\n", &big, 1);
    let e = parse(&text).expect_err("too big");
    assert!(e.message.contains("at most 65536"), "{e}");
}

#[test]
fn a_threshold_may_name_a_check_a_js_step_makes() {
    let text = JS.replacen(
        "          vars.total = String(items.length);\n",
        "          vars.total = String(items.length);\n          check(\"has items\", items.length > 0);\n          x.check('not one', true);\n",
        1,
    );
    let with = |name: &str| format!("{text}thresholds:\n  checks{{check:{name}}}: [rate == 1]\n");
    let plan = parse(&with("has items")).expect("a check the step makes");
    assert_eq!(js(&plan)[0].check_names(), ["has items"]);
    let e = parse(&with("not one")).expect_err("a method of another object");
    assert!(e.message.contains("not one"), "{e}");
}

#[test]
fn a_js_step_adds_to_declared_metrics_only() {
    let text = JS.replacen(
        "          vars.total = String(items.length);\n",
        "          vars.total = String(items.length);\n          add(\"orders\", 1);\n          s.add('x');\n",
        1,
    );
    let e = parse(&text).expect_err("orders is not declared");
    assert!(
        e.message.contains("add('orders', …): the metric is not declared"),
        "{e}"
    );
    assert_eq!(e.line, 13, "{e}");
    let declared = text.replacen("scenarios:", "metrics:\n  orders: counter\nscenarios:", 1);
    let plan = parse(&declared).expect("declared");
    assert_eq!(js(&plan)[0].added_metrics(), ["orders"]);
}
