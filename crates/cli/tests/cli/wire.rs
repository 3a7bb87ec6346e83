//! What throng writes on the wire and to disk: request framing (one
//! Content-Length, never a contradicting one), no request after a 101, no
//! control character in a header, bounded `--body`, and secret header values
//! that never reach a result file, a report or a manifest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Nginx, assert_books_balance, http, lab, output, schema_violations, throng};
use throng_result::RunResult;

/// nginx answers with the request's Content-Length and Authorization as it
/// parsed them (a request with two Content-Length headers gets a 400).
const ECHO_HEADERS: &str = "location / { client_max_body_size 100m; \
                            return 200 \"len=$content_length auth=$http_authorization key=$http_x_key\"; }";

fn errors(r: &RunResult, class: &str) -> u64 {
    r.measurements.requests.errors.get(class).copied().unwrap_or(0)
}

fn file_with(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn a_content_length_that_agrees_is_sent_once_and_one_that_does_not_is_refused() {
    let nginx = Nginx::start(ECHO_HEADERS);
    let dir = tempfile::tempdir().unwrap();
    let body = file_with(dir.path(), "body", b"0123456789");
    let body = body.to_str().unwrap();

    // Agrees: sent once (nginx answers 400 to a duplicate), the body whole.
    let run = http(&[
        &nginx.url("/"),
        "-n",
        "40",
        "-c",
        "2",
        "-H",
        "Content-Length: 10",
        "--body",
        body,
    ]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 40, "{}", run.stderr());
    let each = "len=10 auth= key=".len() as u64;
    assert_eq!(r.measurements.bytes.received_body, 40 * each);

    // Contradicts, or asks for chunking: refused before anything is sent.
    for header in ["Content-Length: 1", "content-length: 11", "Transfer-Encoding: chunked"] {
        let run = http(&[&nginx.url("/"), "-n", "5", "-H", header, "--body", body]);
        assert_eq!(run.code(), 2, "{header}: {}", run.stderr());
        assert!(run.stderr().contains("-H/--header"), "{}", run.stderr());
        assert!(run.result.is_none());
    }
    let run = http(&[&nginx.url("/"), "-n", "5", "-H", "Content-Length: 1", "--body", body]);
    assert!(run.stderr().contains("contradicts --body"), "{}", run.stderr());
}

#[test]
fn scenario_requests_carry_one_computed_content_length() {
    let nginx = Nginx::start(ECHO_HEADERS);
    let dir = tempfile::tempdir().unwrap();
    let yaml = |extra: &str| {
        format!(
            "target: {}\ndefaults:\n  headers:\n    Accept: '*/*'{extra}\nscenarios:\n  s:\n    executor: shared-iterations\n    \
             vus: 2\n    iterations: 20\n    flow:\n      - request:\n          path: /\n          body: \"v-{{{{vu}}}}-xx\"\n          \
             check:\n            length: {{ body_contains: \"len=6 \" }}\n",
            nginx.url("")
        )
    };
    let file = file_with(dir.path(), "ok.yaml", yaml("").as_bytes());
    let json = dir.path().join("r.json");
    let out = output(throng().arg("run").arg(&file).arg("--json").arg(&json).arg("-q"));
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    // nginx answers 400 to two Content-Length headers; this one is the
    // rendered body's ("v-1-xx", "v-2-xx").
    assert_eq!(
        r.measurements.requests.ok,
        20,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checks = &r.measurements.scenario.as_ref().unwrap().checks["length"];
    assert_eq!((checks.passes, checks.fails), (20, 0));

    // A Content-Length or Transfer-Encoding in the file: refused at its line.
    for header in ["Content-Length: '12'", "Transfer-Encoding: chunked"] {
        let file = file_with(dir.path(), "bad.yaml", yaml(&format!("\n    {header}")).as_bytes());
        let out = output(throng().arg("run").arg(&file).arg("-q"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("bad.yaml:5:"), "points at the header's line: {err}");
    }
}

#[test]
fn control_characters_never_reach_the_wire() {
    let nginx = Nginx::start(ECHO_HEADERS);
    for header in ["X-Key: a\u{b}b", "X-Key: a\u{c}", "X\u{b}Key: v", "X-Key: \u{7f}"] {
        let run = http(&[&nginx.url("/"), "-n", "1", "-H", header]);
        assert_eq!(run.code(), 2, "{header:?}: {}", run.stderr());
        assert!(run.stderr().contains("-H/--header"), "{}", run.stderr());
    }
    // A rendered value with one (here from --env): the request is not sent
    // and counts as protocol.
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "target: {}\ndefaults:\n  headers:\n    X-Key: \"{{{{env.KEY}}}}\"\nscenarios:\n  s:\n    executor: shared-iterations\n    \
         vus: 1\n    iterations: 6\n    flow:\n      - request: {{ path: / }}\n",
        nginx.url("")
    );
    let file = file_with(dir.path(), "s.yaml", yaml.as_bytes());
    let json = dir.path().join("r.json");
    output(
        throng()
            .arg("run")
            .arg(&file)
            .args(["--env", "KEY=a\u{b}b\r\nX-Smuggled: 1", "--json"])
            .arg(&json)
            .arg("-q"),
    );
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(errors(&r, "protocol"), 6);
    assert_eq!(r.measurements.bytes.sent, 0, "nothing of them was sent");
}

/// A server that answers `101 Switching Protocols` to every request and
/// counts, per connection, the bytes that arrive after it.
struct Upgrader {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    after_101: Arc<Mutex<Vec<usize>>>,
}

fn upgrader() -> Upgrader {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let after_101 = Arc::new(Mutex::new(Vec::new()));
    let (count, after) = (connections.clone(), after_101.clone());
    std::thread::spawn(move || {
        // Bounded: at most 200 connections, each at most 5 s.
        for stream in listener.incoming().take(200) {
            let Ok(mut s) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let after = after.clone();
            std::thread::spawn(move || {
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                let mut extra = head.len() - end;
                let _ =
                    s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-test\r\nConnection: Upgrade\r\n\r\n");
                let deadline = Instant::now() + Duration::from_secs(5);
                while Instant::now() < deadline {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => extra += n,
                    }
                }
                after.lock().unwrap().push(extra);
            });
        }
    });
    Upgrader {
        addr,
        connections,
        after_101,
    }
}

#[test]
fn a_101_ends_the_connection_and_counts_by_expect_status() {
    for (expect, ok) in [(None, 0), (Some("101"), 12)] {
        let up = upgrader();
        let url = format!("http://{}/", up.addr);
        let mut args = vec![url.as_str(), "-n", "12", "-c", "2", "-t", "1", "--timeout", "3s"];
        if let Some(e) = expect {
            args.extend(["--expect-status", e]);
        }
        let run = http(&args);
        let r = run.result();
        assert_books_balance(r);
        assert_eq!(r.measurements.requests.ok, ok, "{}", run.stdout());
        assert_eq!(errors(r, "check_failed"), 12 - ok);
        assert_eq!(r.measurements.status.get(&101).copied(), Some(12));
        // One request per connection: throng closed each after its 101.
        assert_eq!(up.connections.load(Ordering::SeqCst), 12);
        let deadline = Instant::now() + Duration::from_secs(10);
        while up.after_101.lock().unwrap().len() < 12 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let after = up.after_101.lock().unwrap().clone();
        assert_eq!(after, vec![0; 12], "bytes sent into upgraded connections");
    }
}

#[test]
fn body_over_the_limit_is_refused_without_reading_it_and_one_at_the_limit_is_sent() {
    let nginx = Nginx::start(ECHO_HEADERS);
    let started = Instant::now();
    let run = http(&[&nginx.url("/"), "-n", "1", "--body", "/dev/zero"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(
        run.stderr().contains("--body /dev/zero") && run.stderr().contains("67108864"),
        "{}",
        run.stderr()
    );
    // Not a timing assertion: a run that read /dev/zero to the end would never finish.
    assert!(started.elapsed() < common::RUN_LIMIT);

    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(64 << 20).unwrap();
    let run = http(&[
        &nginx.url("/"),
        "-n",
        "4",
        "-c",
        "2",
        "-t",
        "2",
        "--body",
        big.to_str().unwrap(),
    ]);
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 4, "{}\n{}", run.stderr(), run.stdout());
    assert!(r.measurements.bytes.sent >= 4 * (64 << 20));
    // The body is held once, inside the one request both workers share
    // (about 64 MiB + 20 MiB of everything else here); a second copy would
    // pass 128 MiB.
    let rss = r.generator.peak_rss_bytes;
    assert!(rss < 112 << 20, "peak RSS {rss} bytes for a 64 MiB body");

    f.set_len((64 << 20) + 1).unwrap();
    let run = http(&[&nginx.url("/"), "-n", "1", "--body", big.to_str().unwrap()]);
    assert_eq!(run.code(), 2);
    assert!(run.stderr().contains("67108865 bytes"), "{}", run.stderr());
}

/// Every file under `dir` and the given outputs: none may hold `secret`.
pub(crate) fn assert_nowhere(dir: &Path, texts: &[&str], secrets: &[&str]) {
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for s in secrets {
            assert!(!text.contains(s), "{} holds {s}", path.display());
        }
        files += 1;
    }
    assert!(files >= 4, "only {files} files written");
    for t in texts {
        for s in secrets {
            assert!(!t.contains(s), "output holds {s}: {t}");
        }
    }
}

#[test]
fn secret_headers_never_reach_a_result_or_report() {
    let nginx = Nginx::start(ECHO_HEADERS);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let p = |name: &str| out.join(name).display().to_string();
    let o = output(throng().args([
        "http",
        &nginx.url("/"),
        "-n",
        "30",
        "-c",
        "2",
        "-H",
        "Authorization: Bearer SECRET-TOKEN-1",
        "-H",
        "X-Key: SECRET-KEY-2",
        "--secret-header",
        "x-key",
        "-H",
        "Cookie: session=SECRET-COOKIE-3",
        "--json",
        &p("r.json"),
        "--html",
        &p("r.html"),
        "--csv",
        &p("r.csv"),
        "--csv-requests",
        &p("rows.csv"),
        "--hdr-log",
        &p("r.hlog"),
        "--format",
        "json",
        "-q",
    ]));
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let r = RunResult::from_reader(std::fs::File::open(out.join("r.json")).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 30, "{stderr}");
    // They were sent: nginx echoed them.
    let each = "len= auth=Bearer SECRET-TOKEN-1 key=SECRET-KEY-2".len() as u64;
    assert_eq!(r.measurements.bytes.received_body, 30 * each);
    // Text and ab reports of the result, too.
    let text = output(throng().args(["report", &p("r.json")]));
    let ab = output(throng().args(["report", &p("r.json"), "--format", "ab"]));
    let (text, ab) = (
        String::from_utf8_lossy(&text.stdout),
        String::from_utf8_lossy(&ab.stdout),
    );
    assert_nowhere(
        out,
        &[&stdout, &stderr, &text, &ab],
        &["SECRET-TOKEN-1", "SECRET-KEY-2", "SECRET-COOKIE-3"],
    );
    // The reader learns which were redacted.
    assert!(text.contains("Authorization, Cookie, X-Key"), "{text}");
    assert_eq!(schema_violations(&out.join("r.json")), Vec::<String>::new());
    let html = std::fs::read_to_string(out.join("r.html")).unwrap();
    assert!(
        html.contains("header Authorization: &lt;redacted&gt;"),
        "the HTML shows the header, redacted"
    );
}

#[test]
fn secret_headers_of_a_scenario_never_reach_a_result_or_report() {
    let nginx = Nginx::start(ECHO_HEADERS);
    let dir = tempfile::tempdir().unwrap();
    let scen = tempfile::tempdir().unwrap();
    let yaml = format!(
        "target: {}\ndefaults:\n  headers:\n    Authorization: Bearer SECRET-TOKEN-1\nscenarios:\n  s:\n    \
         executor: shared-iterations\n    vus: 2\n    iterations: 10\n    flow:\n      - request:\n          \
         path: /\n          headers: {{ X-Key: \"SECRET-{{{{env.KEY}}}}\" }}\n",
        nginx.url("")
    );
    let file = file_with(scen.path(), "s.yaml", yaml.as_bytes());
    let p = |name: &str| dir.path().join(name).display().to_string();
    let o = output(throng().arg("run").arg(&file).args([
        "--env",
        "KEY=KEY-2",
        "--secret-header",
        "X-Key",
        "--json",
        &p("r.json"),
        "--html",
        &p("r.html"),
        "--junit",
        &p("junit.xml"),
        "--csv",
        &p("r.csv"),
        "--format",
        "json",
        "-q",
    ]));
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let r = RunResult::from_reader(std::fs::File::open(dir.path().join("r.json")).unwrap()).unwrap();
    assert_books_balance(&r);
    assert_eq!(r.measurements.requests.ok, 10, "{stderr}");
    // They were sent: nginx echoed them.
    let each = "len= auth=Bearer SECRET-TOKEN-1 key=SECRET-KEY-2".len() as u64;
    assert_eq!(r.measurements.bytes.received_body, 10 * each);
    let text = output(throng().args(["report", &p("r.json")]));
    let text = String::from_utf8_lossy(&text.stdout);
    // The template's literal part and the rendered value are both secret.
    assert_nowhere(dir.path(), &[&stdout, &stderr, &text], &["SECRET-TOKEN-1", "SECRET-"]);
    assert!(text.contains("Authorization, X-Key"), "{text}");
    assert_eq!(schema_violations(&dir.path().join("r.json")), Vec::<String>::new());
}

#[test]
fn k8s_manifests_keep_secrets_in_the_secret() {
    let docs = |args: &[&str]| -> Vec<serde_yaml_ng::Value> {
        let o = output(throng().args(["k8s", "job", "--parallelism", "2", "--"]).args(args));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let yaml = String::from_utf8(o.stdout).unwrap();
        serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect()
    };
    for (args, secret) in [
        (
            vec!["http", "http://svc:8080/", "-H", "Authorization: Bearer SECRET-TOKEN-1"],
            "SECRET-TOKEN-1",
        ),
        (
            vec![
                "http",
                "http://svc:8080/",
                "-H",
                "X-Key: SECRET-KEY-2",
                "--secret-header",
                "X-Key",
            ],
            "SECRET-KEY-2",
        ),
        (
            vec!["storm", "nats://user:SECRET-PASS-4@svc:4222", "-n", "10"],
            "SECRET-PASS-4",
        ),
    ] {
        let d = docs(&args);
        let kinds: Vec<&str> = d.iter().map(|x| x["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret", "Job"], "{args:?}");
        for x in [&d[0], &d[2]] {
            assert!(!serde_yaml_ng::to_string(x).unwrap().contains(secret), "{args:?}");
        }
        // The agents get the real value, from the Secret.
        assert!(d[1]["stringData"]["args"].as_str().unwrap().contains(secret));
    }
    // Nothing secret: no Secret.
    let d = docs(&["http", "http://svc:8080/", "-H", "Accept: */*"]);
    assert_eq!(d.len(), 2);
}

#[test]
fn checks_on_a_truncated_body_are_counted_and_said() {
    let lab = lab(None);
    let dir = tempfile::tempdir().unwrap();
    let yaml = |max: &str| {
        format!(
            "target: http://{}\ndefaults:\n  max_body: {max}\nscenarios:\n  s:\n    executor: shared-iterations\n    \
             vus: 1\n    iterations: 5\n    flow:\n      - request:\n          path: /bytes/3000\n          \
             check:\n            some: {{ body_contains: \"x\" }}\n      - request:\n          path: /bytes/10\n          \
             check:\n            small: {{ body_contains: \"x\" }}\n",
            lab.addr()
        )
    };
    for (max, truncated) in [("1KiB", 5), ("4KiB", 0)] {
        let file = file_with(dir.path(), "s.yaml", yaml(max).as_bytes());
        let json = dir.path().join("r.json");
        let o = output(throng().arg("run").arg(&file).arg("--json").arg(&json));
        let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
        assert_books_balance(&r);
        assert_eq!(r.measurements.requests.ok, 10, "{}", String::from_utf8_lossy(&o.stderr));
        let s = r.measurements.scenario.as_ref().unwrap();
        assert_eq!(s.truncated_bodies, truncated, "max_body {max}");
        let said = String::from_utf8_lossy(&o.stdout).contains("longer than their step's max_body");
        assert_eq!(said, truncated > 0, "{}", String::from_utf8_lossy(&o.stdout));
        assert_eq!(schema_violations(&json), Vec::<String>::new());
    }
}

#[test]
fn a_nats_password_never_reaches_a_result_or_report() {
    let nats = common::NatsServer::start("authorization { user: throng, password: \"SECRET-PASS-4\" }");
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    let url = format!("nats://throng:SECRET-PASS-4@127.0.0.1:{}", nats.port);
    let o = output(throng().args([
        "storm",
        &url,
        "-n",
        "10",
        "--json",
        &p("r.json"),
        "--html",
        &p("r.html"),
        "--csv",
        &p("r.csv"),
        "--csv-requests",
        &p("rows.csv"),
        "--hdr-log",
        &p("r.hlog"),
        "-q",
    ]));
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let r = RunResult::from_reader(std::fs::File::open(dir.path().join("r.json")).unwrap()).unwrap();
    assert_books_balance(&r);
    // The password was sent: nats-server let every connection in.
    assert_eq!(r.measurements.connections.ok, 10, "{stderr}");
    let text = output(throng().args(["report", &p("r.json")]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert_nowhere(dir.path(), &[&stdout, &stderr, &text], &["SECRET-PASS-4"]);
}

#[test]
fn a_sweep_keeps_no_secret_of_its_run_line() {
    let nginx = Nginx::start(ECHO_HEADERS);
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let file = file_with(
        dir.path(),
        "sweep.yaml",
        format!(
            "parameters:\n  c: [1, 2]\nrun: >-\n  http {} -n 10 -c {{{{c}}}} -H 'Authorization: Bearer SECRET-TOKEN-1'\n  \
             -H \"X-Key: SECRET-KEY-2\" --secret-header X-Key\nfigures: [requests_per_second]\n",
            nginx.url("/")
        )
        .as_bytes(),
    );
    let o = output(
        throng()
            .arg("sweep")
            .arg(&file)
            .arg("--json")
            .arg(out.path().join("sweep.json")),
    );
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let json = std::fs::read_to_string(out.path().join("sweep.json")).unwrap();
    assert!(json.contains("Authorization: <redacted>"), "{json}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert!(c["problem"].is_null(), "{c}");
    }
    let secrets = ["SECRET-TOKEN-1", "SECRET-KEY-2"];
    for t in [&json, &stdout.to_string(), &stderr.to_string()] {
        for s in secrets {
            assert!(!t.contains(s), "{s} in {t}");
        }
    }
}
