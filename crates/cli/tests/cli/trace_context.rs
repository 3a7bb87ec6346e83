//! `--trace-context`: every request carries a W3C traceparent of its own,
//! checked in nginx's access log (`$http_traceparent`); the result's slowest
//! requests and the `--csv-requests` rows name trace ids nginx received; a
//! merge keeps the N slowest of all parts; usage errors exit 2.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{assert_books_balance, http, output, schema_violations, throng};

/// nginx logging each request's traceparent header (`-` when none) to
/// `access.log` in `logs`.
fn logging_nginx() -> (common::Nginx, tempfile::TempDir) {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format tp '$http_traceparent';",
        &format!("location / {{ access_log {} tp; return 200 'ok'; }}", log.display()),
    );
    (nginx, logs)
}

/// nginx's access log once it holds `want` lines (nginx writes a line
/// after the response went out, so the last may land after throng exits),
/// waiting at most 5 s.
fn log_of(logs: &tempfile::TempDir, want: usize) -> Vec<String> {
    let path = logs.path().join("access.log");
    for _ in 0..50 {
        let lines = common::access_log(&path);
        if lines.len() >= want {
            return lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    common::access_log(&path)
}

/// A traceparent as W3C Trace Context level 1 writes it, with `flags`:
/// (trace id, parent id), or None when malformed.
fn parse(tp: &str, flags: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = tp.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (parts.len() == 4
        && parts[0] == "00"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && parts[3] == flags
        && parts[1] != "0".repeat(32)
        && parts[2] != "0".repeat(16))
    .then(|| (parts[1].to_string(), parts[2].to_string()))
}

/// The `trace_id` column of a `--csv-requests` file.
fn csv_trace_ids(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == "trace_id").unwrap();
    lines.map(|l| l.split(',').nth(at).unwrap().to_string()).collect()
}

#[test]
fn every_request_carries_its_own_traceparent_and_the_slowest_name_what_nginx_received() {
    let (nginx, logs) = logging_nginx();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    let run = http(&[
        &nginx.url("/"),
        "-n",
        "300",
        "-c",
        "4",
        "-t",
        "2",
        "--trace-context",
        "--csv-requests",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 300);

    let logged = log_of(&logs, 300);
    assert_eq!(logged.len(), 300, "nginx logged every request once");
    let mut traces = BTreeSet::new();
    let mut parents = BTreeSet::new();
    for line in &logged {
        let (trace, parent) = parse(line, "01").unwrap_or_else(|| panic!("malformed traceparent {line:?}"));
        traces.insert(trace);
        parents.insert(parent);
    }
    assert_eq!(traces.len(), 300, "a new trace id on every request");
    assert_eq!(parents.len(), 300, "a new parent id on every request");

    let slowest = r.measurements.slowest.as_ref().expect("the result keeps the slowest");
    assert_eq!(slowest.keep, 10);
    assert_eq!(slowest.requests.len(), 10);
    assert!(
        slowest.requests.windows(2).all(|w| w[0].latency_us >= w[1].latency_us),
        "slowest first: {slowest:?}"
    );
    for s in &slowest.requests {
        assert!(traces.contains(&s.trace_id), "{} was not received by nginx", s.trace_id);
        assert_eq!(s.status, Some(200));
    }
    // The slowest is the largest latency the histogram saw (same µs, same
    // 3 significant digits).
    let max = r.measurements.phases["latency"].summary().max as f64;
    let top = slowest.requests[0].latency_us as f64;
    assert!(
        (top - max).abs() <= max * 0.001 + 1.0,
        "slowest {top} µs against max {max} µs"
    );

    let rows = csv_trace_ids(&csv);
    assert_eq!(rows.len(), 300);
    assert_eq!(rows.iter().collect::<BTreeSet<_>>().len(), 300);
    for id in &rows {
        assert!(traces.contains(id), "CSV trace id {id} was not received by nginx");
    }
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );

    let text = output(throng().args(["report", run.json.to_str().unwrap()]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("slowest requests"), "{text}");
    assert!(text.contains(&slowest.requests[0].trace_id), "{text}");
}

#[test]
fn without_the_flag_no_traceparent_is_sent_and_no_slowest_kept() {
    let (nginx, logs) = logging_nginx();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    let run = http(&[
        &nginx.url("/"),
        "-n",
        "50",
        "-c",
        "2",
        "--csv-requests",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let logged = common::access_log(&logs.path().join("access.log"));
    assert_eq!(logged.len(), 50);
    assert!(logged.iter().all(|l| l == "-"), "{logged:?}");
    assert!(run.result().measurements.slowest.is_none());
    assert!(csv_trace_ids(&csv).iter().all(String::is_empty));
}

#[test]
fn an_open_loop_unsampled_run_and_a_merge_keep_the_n_slowest_of_all() {
    let (nginx, logs) = logging_nginx();
    let a = http(&[
        &nginx.url("/"),
        "-r",
        "200",
        "-n",
        "60",
        "-c",
        "4",
        "--trace-context=unsampled",
        "--slowest",
        "3",
    ]);
    assert_eq!(a.code(), 0, "{}", a.stderr());
    let b = http(&[
        &nginx.url("/"),
        "-n",
        "40",
        "-c",
        "2",
        "--trace-context",
        "--slowest",
        "5",
    ]);
    assert_eq!(b.code(), 0, "{}", b.stderr());
    // The open loop may drop starts on a busy machine (no free connection
    // when one is due): nginx saw each of those it answered, at least.
    let a_ok = a.result().measurements.requests.ok;
    assert!(a_ok > 0);
    let logged = log_of(&logs, usize::try_from(a_ok).unwrap() + 40);
    let unsampled = logged.iter().filter(|l| parse(l, "00").is_some()).count() as u64;
    assert!(
        (a_ok..=60).contains(&unsampled),
        "--trace-context=unsampled: flags 00 on {unsampled} lines, {a_ok} answered"
    );
    assert_eq!(logged.iter().filter(|l| parse(l, "01").is_some()).count(), 40);
    assert_eq!(
        logged.len() as u64,
        unsampled + 40,
        "every line carries a traceparent: {logged:?}"
    );
    let sa = a.result().measurements.slowest.clone().unwrap();
    let sb = b.result().measurements.slowest.clone().unwrap();
    assert_eq!(sa.requests.len(), 3);

    let dir = tempfile::tempdir().unwrap();
    let merged = dir.path().join("merged.json");
    let o = output(
        throng()
            .args(["merge", "--allow-mixed", "-o", merged.to_str().unwrap()])
            .arg(&a.json)
            .arg(&b.json),
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let m = common::read_result(&merged).unwrap().measurements.slowest.unwrap();
    assert_eq!(m.keep, 5, "the larger N of the parts");
    let mut all: Vec<(u64, String)> = sa
        .requests
        .iter()
        .chain(&sb.requests)
        .map(|r| (r.latency_us, r.trace_id.clone()))
        .collect();
    all.sort_by_key(|x| std::cmp::Reverse(x.0));
    let want: Vec<u64> = all.iter().take(5).map(|x| x.0).collect();
    let got: Vec<u64> = m.requests.iter().map(|r| r.latency_us).collect();
    assert_eq!(got, want, "the 5 slowest of both parts");
    assert!(
        schema_violations(&merged).is_empty(),
        "{:?}",
        schema_violations(&merged)
    );

    // A file claiming more than a result keeps is refused when read back.
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    doc["measurements"]["slowest"]["keep"] = serde_json::json!(1_000_000);
    let edited = dir.path().join("edited.json");
    std::fs::write(&edited, serde_json::to_vec(&doc).unwrap()).unwrap();
    let o = output(throng().arg("report").arg(&edited));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("slowest") && err.contains("edited.json"), "{err}");
}

#[test]
fn a_given_traceparent_or_a_slowest_without_trace_context_is_a_usage_error() {
    let url = "http://127.0.0.1:9/";
    let o = output(throng().args(["http", url, "-n", "1", "--trace-context", "-H", "traceparent: 00-x"]));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--trace-context") && err.contains("drop -H traceparent"),
        "{err}"
    );
    let o = output(throng().args(["http", url, "-n", "1", "--slowest", "3"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs --trace-context"));
    let o = output(throng().args(["http", url, "-n", "1", "--trace-context", "--slowest", "0"]));
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn several_targets_each_carry_their_own_traceparent() {
    let (nginx, logs) = logging_nginx();
    let run = http(&[
        &nginx.url("/a"),
        &nginx.url("/b?x=1"),
        "-n",
        "60",
        "-c",
        "3",
        "--trace-context",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 60);
    let logged = log_of(&logs, 60);
    assert_eq!(logged.len(), 60);
    let ids: BTreeSet<String> = logged
        .iter()
        .map(|l| {
            parse(l, "01")
                .unwrap_or_else(|| panic!("malformed traceparent {l:?}"))
                .0
        })
        .collect();
    assert_eq!(ids.len(), 60, "a new trace id on every request of every target");
    let slowest = run.result().measurements.slowest.as_ref().unwrap();
    assert!(slowest.requests.iter().all(|s| ids.contains(&s.trace_id)));
}

#[test]
fn requests_that_fail_are_among_the_slowest_with_their_error_class() {
    let url = format!("http://127.0.0.1:{}/", common::free_port());
    let run = http(&[&url, "-n", "5", "-c", "1", "-t", "1", "--trace-context"]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(
        r.measurements.requests.error("refused"),
        5,
        "{:?}",
        r.measurements.requests
    );
    let slowest = r.measurements.slowest.as_ref().unwrap();
    assert_eq!(slowest.requests.len(), 5);
    assert!(
        slowest
            .requests
            .iter()
            .all(|s| s.error.as_deref() == Some("refused") && s.status.is_none()),
        "{slowest:?}"
    );
    assert_eq!(
        slowest
            .requests
            .iter()
            .map(|s| &s.trace_id)
            .collect::<BTreeSet<_>>()
            .len(),
        5
    );
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );
}

#[test]
fn a_targets_file_or_a_scenario_giving_a_traceparent_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.txt");
    std::fs::write(
        &targets,
        "GET http://127.0.0.1:9/a\n\nGET http://127.0.0.1:9/b\nTraceparent: 00-x\n",
    )
    .unwrap();
    let o = output(throng().args([
        "http",
        "--targets",
        targets.to_str().unwrap(),
        "-n",
        "1",
        "--trace-context",
    ]));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("targets.txt:3") && err.contains("drop that traceparent"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let file = dir.path().join("s.yaml");
    std::fs::write(
        &file,
        "target: http://127.0.0.1:9\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 1\n    \
         iterations: 1\n    flow:\n      - request: { path: /, headers: { traceparent: 00-x } }\n",
    )
    .unwrap();
    let o = output(throng().arg("run").arg(&file).arg("--trace-context"));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("s.yaml") && err.contains("remove that header"), "{err}");
    let o = output(throng().arg("run").arg(&file).args(["--slowest", "3"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs --trace-context"));
}

/// nginx logging each request's path and traceparent header.
fn logging_nginx_paths() -> (common::Nginx, tempfile::TempDir) {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let nginx = common::Nginx::start_http(
        "log_format tp '$uri $http_traceparent';",
        &format!("location / {{ access_log {} tp; return 200 'ok'; }}", log.display()),
    );
    (nginx, logs)
}

#[test]
fn a_scenario_iteration_shares_one_trace_id_and_each_request_has_its_own_span() {
    let (nginx, logs) = logging_nginx_paths();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    let csv = dir.path().join("rows.csv");
    std::fs::write(
        &file,
        format!(
            "target: {}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    iterations: 4\n    \
             flow:\n      - request: {{ path: /a }}\n      - request: {{ path: /b }}\n      - request: {{ path: /c }}\n",
            nginx.url("")
        ),
    )
    .unwrap();
    let run = common::with_json(throng().arg("run").arg(&file).args([
        "--threads",
        "1",
        "--quiet",
        "--trace-context=unsampled",
        "--slowest",
        "30",
        "--csv-requests",
        csv.to_str().unwrap(),
    ]));
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 24);

    // nginx: 8 iterations, each one trace id on its 3 requests (/a, /b, /c);
    // 24 distinct span ids.
    let logged = log_of(&logs, 24);
    assert_eq!(logged.len(), 24, "{logged:?}");
    let mut by_trace: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut spans = BTreeSet::new();
    for line in &logged {
        let (path, tp) = line.split_once(' ').unwrap();
        let (trace, span) = parse(tp, "00").unwrap_or_else(|| panic!("malformed traceparent {line:?}"));
        by_trace.entry(trace).or_default().push(path.to_string());
        spans.insert(span);
    }
    assert_eq!(by_trace.len(), 8, "one trace per iteration: {by_trace:?}");
    for paths in by_trace.values_mut() {
        paths.sort();
        assert_eq!(paths, &["/a", "/b", "/c"]);
    }
    assert_eq!(spans.len(), 24, "a new span id on every request");

    // The CSV rows: one trace id per (vu, iteration), those nginx received.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (vu, iteration, trace) = (col("vu"), col("iteration"), col("trace_id"));
    let mut per_iteration: std::collections::BTreeMap<(String, String), BTreeSet<String>> = Default::default();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        per_iteration
            .entry((f[vu].to_string(), f[iteration].to_string()))
            .or_default()
            .insert(f[trace].to_string());
    }
    assert_eq!(per_iteration.len(), 8, "{per_iteration:?}");
    let csv_ids: BTreeSet<String> = per_iteration
        .values()
        .map(|ids| {
            assert_eq!(
                ids.len(),
                1,
                "an iteration's requests share its trace id: {per_iteration:?}"
            );
            ids.iter().next().unwrap().clone()
        })
        .collect();
    assert_eq!(csv_ids, by_trace.keys().cloned().collect::<BTreeSet<_>>());

    // The slowest: per request, each under its iteration's trace id.
    let slowest = r.measurements.slowest.as_ref().expect("the result keeps the slowest");
    assert_eq!((slowest.keep, slowest.requests.len()), (30, 24));
    for s in &slowest.requests {
        assert_eq!(by_trace.get(&s.trace_id).map(Vec::len), Some(3), "{}", s.trace_id);
        assert_eq!(s.status, Some(200));
    }
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&run.json).unwrap()).unwrap();
    assert_eq!(
        json["plan"]["trace"]["sampling"], "unsampled",
        "the plan names its trace context"
    );
    let text = output(throng().args(["report", run.json.to_str().unwrap()]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("slowest requests") && text.contains(&slowest.requests[0].trace_id),
        "the run's report lists the slowest: {text}"
    );
}

#[test]
fn each_redirect_hop_carries_the_request_trace_id_with_a_span_of_its_own() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let logged_at = |rest: &str| format!("{{ access_log {} tp; {rest} }}", log.display());
    let nginx = common::Nginx::start_http(
        "log_format tp '$uri $http_traceparent';",
        &format!(
            "location = /start {}\nlocation = /middle {}\nlocation = /end {}\n",
            logged_at("return 302 /middle;"),
            logged_at("return 307 http://127.0.0.1:$server_port/end;"),
            logged_at("return 200 'ok';")
        ),
    );
    let run = http(&[
        &nginx.url("/start"),
        "-n",
        "20",
        "-c",
        "2",
        "-t",
        "1",
        "--redirects",
        "5",
        "--trace-context",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!((r.measurements.requests.ok, r.measurements.redirects), (20, 40));
    let logged = log_of(&logs, 60);
    assert_eq!(logged.len(), 60, "{logged:?}");
    let mut by_trace: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut spans = BTreeSet::new();
    for line in &logged {
        let (path, tp) = line.split_once(' ').unwrap();
        let (trace, span) = parse(tp, "01").unwrap_or_else(|| panic!("malformed traceparent {line:?}"));
        by_trace.entry(trace).or_default().push(path.to_string());
        spans.insert(span);
    }
    assert_eq!(by_trace.len(), 20, "one trace per request, its hops included");
    for paths in by_trace.values_mut() {
        paths.sort();
        assert_eq!(paths, &["/end", "/middle", "/start"]);
    }
    assert_eq!(spans.len(), 60, "a new span id on every hop");
    let slowest = r.measurements.slowest.as_ref().unwrap();
    assert_eq!(slowest.requests.len(), 10);
    for s in &slowest.requests {
        assert!(by_trace.contains_key(&s.trace_id), "{}", s.trace_id);
        assert_eq!(s.status, Some(200));
    }
}

/// nginx listening with `listen` (`http2`: h2c; `ssl http2`: h2 with the
/// lab certificates in `certs`), logging each request's protocol and
/// traceparent.
fn logging_h2_nginx(listen: &str, certs: Option<&Path>) -> (common::Nginx, tempfile::TempDir) {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let tls = certs.map_or_else(String::new, |c| {
        format!(
            "ssl_certificate {}; ssl_certificate_key {};",
            c.join("server.pem").display(),
            c.join("server.key").display()
        )
    });
    let nginx = common::Nginx::start_listen_http(
        "log_format tp '$server_protocol $http_traceparent';",
        listen,
        &tls,
        &format!("location / {{ access_log {} tp; return 200 'ok'; }}", log.display()),
    );
    (nginx, logs)
}

/// nginx's lines (`PROTOCOL TRACEPARENT`) as HTTP/2 requests' trace ids,
/// each checked well-formed with `flags`, and their parent ids.
fn h2_ids(logged: &[String], flags: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut traces = BTreeSet::new();
    let mut parents = BTreeSet::new();
    for line in logged {
        let (protocol, tp) = line.split_once(' ').unwrap();
        assert_eq!(protocol, "HTTP/2.0", "{line}");
        let (trace, parent) = parse(tp, flags).unwrap_or_else(|| panic!("malformed traceparent {line:?}"));
        traces.insert(trace);
        parents.insert(parent);
    }
    (traces, parents)
}

#[test]
fn http2_requests_carry_their_own_traceparent_over_h2c_and_h2() {
    // h2c, the plan's one request: the task's copy of the header block.
    let (nginx, logs) = logging_h2_nginx("http2", None);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    let run = http(&[
        &nginx.url("/"),
        "--http2",
        "-n",
        "200",
        "-c",
        "2",
        "--streams",
        "4",
        "-t",
        "1",
        "--trace-context=unsampled",
        "--csv-requests",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_books_balance(run.result());
    assert_eq!(run.result().measurements.requests.ok, 200);
    let logged = log_of(&logs, 200);
    assert_eq!(logged.len(), 200);
    let (traces, parents) = h2_ids(&logged, "00");
    assert_eq!((traces.len(), parents.len()), (200, 200), "new ids on every stream");
    let rows = csv_trace_ids(&csv);
    assert_eq!(rows.iter().collect::<BTreeSet<_>>().len(), 200);
    assert!(rows.iter().all(|id| traces.contains(id)));
    let slowest = run.result().measurements.slowest.as_ref().unwrap();
    assert_eq!(slowest.requests.len(), 10);
    assert!(
        slowest
            .requests
            .iter()
            .all(|s| traces.contains(&s.trace_id) && s.status == Some(200))
    );

    // h2 over TLS, several targets: each target's own block, patched.
    let (_cdir, certs) = common::certs();
    let (nginx, logs) = logging_h2_nginx("ssl http2", Some(&certs));
    let ca = certs.join("ca.pem");
    let run = http(&[
        &nginx.https("localhost", "/a"),
        &nginx.https("localhost", "/b"),
        "--cacert",
        ca.to_str().unwrap(),
        "--http2",
        "-n",
        "60",
        "-c",
        "2",
        "-t",
        "1",
        "--trace-context",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 60);
    let logged = log_of(&logs, 60);
    assert_eq!(logged.len(), 60);
    let (traces, parents) = h2_ids(&logged, "01");
    assert_eq!((traces.len(), parents.len()), (60, 60));
    let slowest = run.result().measurements.slowest.as_ref().unwrap();
    assert!(slowest.requests.iter().all(|s| traces.contains(&s.trace_id)));
}

/// HTTP/2 `--trace-context` rides either transport, h2c and h2 over TLS:
/// every stream nginx logs carries its own trace and span, the slowest
/// name traces nginx received, and a refused connection's requests are
/// among the slowest with their class; the run says which transport ran.
#[test]
fn http2_streams_carry_their_own_traceparent_on_epoll_and_on_the_ring() {
    let (_cdir, certs) = common::certs();
    let ca = certs.join("ca.pem");
    let ca = ca.to_str().unwrap();
    for io in ["epoll", "uring"] {
        for (listen, tls) in [("http2", None), ("ssl http2", Some(certs.as_path()))] {
            let what = format!("{io} {listen:?}");
            let (nginx, logs) = logging_h2_nginx(listen, tls);
            let url = if tls.is_some() {
                nginx.https("localhost", "/")
            } else {
                nginx.url("/")
            };
            let mut args = vec![
                url.as_str(),
                "--http2",
                "-c",
                "2",
                "--streams",
                "4",
                "-n",
                "200",
                "-t",
                "2",
                "--trace-context",
                "--io",
                io,
            ];
            if tls.is_some() {
                args.extend_from_slice(&["--cacert", ca]);
            }
            let (run, r) = crate::uring::ran_on(io, http(&args));
            assert_eq!(run.code(), 0, "{what}: {}", run.stderr());
            assert_eq!(r.measurements.requests.ok, 200, "{what}");
            let logged = log_of(&logs, 200);
            assert_eq!(logged.len(), 200, "{what}: nginx logged every stream once");
            let (traces, parents) = h2_ids(&logged, "01");
            assert_eq!(
                (traces.len(), parents.len()),
                (200, 200),
                "{what}: new ids on every stream"
            );
            let slowest = r.measurements.slowest.as_ref().unwrap();
            assert_eq!(slowest.requests.len(), 10, "{what}");
            assert!(
                slowest
                    .requests
                    .iter()
                    .all(|s| traces.contains(&s.trace_id) && s.status == Some(200)),
                "{what}: the slowest are requests nginx received"
            );
        }
        // A closed port: every request fails and is among the slowest
        // with its class.
        let url = format!("http://127.0.0.1:{}/", common::free_port());
        let (_run, r) = crate::uring::ran_on(
            io,
            http(&[
                &url,
                "--http2",
                "-c",
                "2",
                "-n",
                "6",
                "-t",
                "1",
                "--trace-context",
                "--io",
                io,
            ]),
        );
        assert_eq!(r.measurements.requests.attempted, 6, "{io}");
        assert_eq!(r.measurements.requests.error("refused"), 6, "{io}");
        let slowest = r.measurements.slowest.as_ref().unwrap();
        assert_eq!(slowest.requests.len(), 6, "{io}");
        assert!(
            slowest.requests.iter().all(|s| s.error.as_deref() == Some("refused")),
            "{io}: {:?}",
            slowest.requests
        );
    }
}

#[test]
fn http2_redirect_hops_and_h2c_scenario_requests_carry_their_trace() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let logged_at = |rest: &str| format!("{{ access_log {} tp; {rest} }}", log.display());
    let nginx = common::Nginx::start_listen_http(
        "log_format tp '$uri $server_protocol $http_traceparent';",
        "http2",
        "",
        &format!(
            "location = /start {}\nlocation = /middle {}\nlocation / {}\n",
            logged_at("return 302 /middle;"),
            logged_at("return 307 http://127.0.0.1:$server_port/end;"),
            logged_at("return 200 'ok';")
        ),
    );
    // Lines as (path, trace id, span id), each HTTP/2 and well-formed.
    let read = |want: usize, flags: &str| -> Vec<(String, String, String)> {
        let logged = log_of(&logs, want);
        assert_eq!(logged.len(), want, "{logged:?}");
        std::fs::write(&log, "").unwrap();
        logged
            .iter()
            .map(|line| {
                let mut f = line.split(' ');
                let (path, protocol, tp) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                assert_eq!(protocol, "HTTP/2.0", "{line}");
                let (trace, span) = parse(tp, flags).unwrap_or_else(|| panic!("malformed traceparent {line:?}"));
                (path.to_string(), trace, span)
            })
            .collect()
    };
    let by_trace = |lines: &[(String, String, String)]| {
        let mut out: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (path, trace, _) in lines {
            out.entry(trace.clone()).or_default().push(path.clone());
        }
        for paths in out.values_mut() {
            paths.sort();
        }
        out
    };

    // throng http --http2 --redirects: one trace per request, a span per hop.
    let run = http(&[
        &nginx.url("/start"),
        "--http2",
        "-n",
        "12",
        "-c",
        "1",
        "-t",
        "1",
        "--redirects",
        "5",
        "--trace-context",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 12);
    let lines = read(36, "01");
    let traces = by_trace(&lines);
    assert_eq!(traces.len(), 12, "{traces:?}");
    assert!(
        traces.values().all(|p| p == &["/end", "/middle", "/start"]),
        "{traces:?}"
    );
    assert_eq!(lines.iter().map(|l| &l.2).collect::<BTreeSet<_>>().len(), 36);
    let slowest = run.result().measurements.slowest.as_ref().unwrap();
    assert!(slowest.requests.iter().all(|s| traces.contains_key(&s.trace_id)));

    // A scenario over h2c: a trace per iteration, a span per request.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(
        &file,
        format!(
            "target: {{ url: '{}', http: 2 }}\nscenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n    \
             iterations: 3\n    flow:\n      - request: {{ path: /a }}\n      - request: {{ path: /b }}\n",
            nginx.url("")
        ),
    )
    .unwrap();
    let run = common::with_json(
        throng()
            .arg("run")
            .arg(&file)
            .args(["--threads", "1", "--quiet", "--trace-context"]),
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.result().measurements.requests.ok, 12);
    let lines = read(12, "01");
    let traces = by_trace(&lines);
    assert_eq!(traces.len(), 6, "{traces:?}");
    assert!(traces.values().all(|p| p == &["/a", "/b"]), "{traces:?}");
    assert_eq!(lines.iter().map(|l| &l.2).collect::<BTreeSet<_>>().len(), 12);
}

#[test]
fn http3_requests_and_their_redirect_hops_carry_their_trace() {
    let (_cdir, certs) = common::certs();
    let stats = tempfile::tempdir().unwrap();
    let server = common::Aioquic::start(&certs, stats.path(), 0);
    let ca = certs.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let plain = http(&[
        &server.url("/"),
        "--http3",
        "--cacert",
        ca,
        "-n",
        "50",
        "-c",
        "2",
        "--streams",
        "2",
        "--trace-context",
    ]);
    assert_eq!(plain.code(), 0, "{}", plain.stderr());
    assert_eq!(plain.result().measurements.requests.ok, 50);
    // /302loop redirects to itself: 3 hops, then redirect.too_many.
    let looped = http(&[
        &server.url("/302loop"),
        "--http3",
        "--cacert",
        ca,
        "-n",
        "5",
        "-c",
        "1",
        "--redirects",
        "3",
        "--trace-context=unsampled",
    ]);
    let stats = server.stop();
    let r = looped.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.redirects, 15, "{:?}", r.measurements.requests);
    let lines: Vec<&str> = stats["traceparents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(lines.len(), 50 + 5 * 4, "{lines:?}");
    let mut plain_traces = BTreeSet::new();
    let mut loop_traces: std::collections::BTreeMap<String, usize> = Default::default();
    let mut spans = BTreeSet::new();
    for line in &lines {
        let (path, tp) = line.split_once(' ').unwrap();
        if path == "/" {
            let (trace, span) = parse(tp, "01").unwrap_or_else(|| panic!("malformed {line:?}"));
            plain_traces.insert(trace);
            spans.insert(span);
        } else {
            let (trace, span) = parse(tp, "00").unwrap_or_else(|| panic!("malformed {line:?}"));
            *loop_traces.entry(trace).or_default() += 1;
            spans.insert(span);
        }
    }
    assert_eq!(plain_traces.len(), 50, "a new trace on every HTTP/3 request");
    assert_eq!(loop_traces.len(), 5, "one trace per request, its hops included");
    assert!(loop_traces.values().all(|&n| n == 4), "{loop_traces:?}");
    assert_eq!(spans.len(), 70, "a new span on every request and hop");
    let slowest = plain.result().measurements.slowest.as_ref().unwrap();
    assert!(slowest.requests.iter().all(|s| plain_traces.contains(&s.trace_id)));
    let slowest = r.measurements.slowest.as_ref().unwrap();
    assert_eq!(slowest.requests.len(), 5);
    assert!(slowest.requests.iter().all(|s| loop_traces.contains_key(&s.trace_id)));
}

/// `--trace-context` rides either transport, plain and over TLS, closed
/// and open loop: every request nginx logs carries its own trace and span,
/// the slowest name traces nginx received, and the run says which
/// transport carried it (a silent fall back to epoll fails here).
#[test]
fn each_request_carries_its_own_traceparent_on_epoll_and_on_the_ring() {
    let (_cdir, certs) = common::certs();
    let ca = certs.join("ca.pem");
    let ca = ca.to_str().unwrap();
    for io in ["epoll", "uring"] {
        for (listen, tls) in [("", None), ("ssl", Some(certs.as_path()))] {
            for open in [false, true] {
                let what = format!("{io} {listen:?} open loop {open}");
                let (nginx, logs) = logging_h2_nginx(listen, tls);
                let url = if tls.is_some() {
                    nginx.https("localhost", "/")
                } else {
                    nginx.url("/")
                };
                let mut args = vec![url.as_str(), "-c", "4", "-t", "2", "--trace-context", "--io", io];
                args.extend_from_slice(if open {
                    &["-r", "1000", "-d", "0.2s"]
                } else {
                    &["-n", "200"]
                });
                if tls.is_some() {
                    args.extend_from_slice(&["--cacert", ca]);
                }
                let (run, r) = crate::uring::ran_on(io, http(&args));
                assert_eq!(run.code(), 0, "{what}: {}", run.stderr());
                let ok = r.measurements.requests.ok;
                assert_eq!(ok, r.measurements.requests.attempted, "{what}: every request answered");
                assert!(if open { ok > 20 } else { ok == 200 }, "{what}: {ok} answered");

                let logged = log_of(&logs, ok as usize);
                assert_eq!(logged.len() as u64, ok, "{what}: nginx logged every request once");
                let mut traces = BTreeSet::new();
                let mut parents = BTreeSet::new();
                for line in &logged {
                    let (protocol, tp) = line.split_once(' ').unwrap();
                    assert_eq!(protocol, "HTTP/1.1", "{what}: {line}");
                    let (trace, parent) = parse(tp, "01").unwrap_or_else(|| panic!("{what}: malformed {line:?}"));
                    traces.insert(trace);
                    parents.insert(parent);
                }
                assert_eq!(traces.len() as u64, ok, "{what}: a new trace id on every request");
                assert_eq!(parents.len() as u64, ok, "{what}: a new parent id on every request");
                let slowest = r.measurements.slowest.as_ref().expect("the result keeps the slowest");
                assert_eq!(slowest.requests.len(), 10, "{what}");
                for s in &slowest.requests {
                    assert!(
                        traces.contains(&s.trace_id),
                        "{what}: {} was not received by nginx",
                        s.trace_id
                    );
                    assert_eq!(s.status, Some(200), "{what}");
                }
            }
        }
    }
}

/// A request the ring could not connect for is among the slowest with its
/// class and a trace id of its own, as on epoll.
#[test]
fn refused_requests_are_among_the_slowest_on_both_transports() {
    let url = format!("http://127.0.0.1:{}/", common::free_port());
    for io in ["epoll", "uring"] {
        let (_run, r) = crate::uring::ran_on(
            io,
            http(&[&url, "-n", "5", "-c", "1", "-t", "1", "--trace-context", "--io", io]),
        );
        assert_eq!(
            r.measurements.requests.error("refused"),
            5,
            "{io}: {:?}",
            r.measurements.requests
        );
        let slowest = r.measurements.slowest.as_ref().unwrap();
        assert_eq!(slowest.requests.len(), 5, "{io}");
        assert!(
            slowest.requests.iter().all(|s| s.error.as_deref() == Some("refused")),
            "{io}: {slowest:?}"
        );
        let ids: BTreeSet<_> = slowest.requests.iter().map(|s| &s.trace_id).collect();
        assert_eq!(ids.len(), 5, "{io}");
    }
}
