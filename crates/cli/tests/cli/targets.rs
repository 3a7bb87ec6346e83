//! Several targets and bodies in one `throng http` run, against nginx whose
//! access log says what it received: each target and body the right number
//! of times, the per-target figures of the result, the orders, thresholds
//! per target, and the bounds on what users hand throng.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::{assert_books_balance, free_port, http, output, schema_violations, throng};
use throng_result::RunResult;

/// nginx logging `METHOD URI CONTENT_TYPE X_TARGET BODY` per request to
/// `access.log`. Bodies are read (and so logged) by proxying to a location
/// of its own; /status/404 answers 404.
struct LoggingNginx {
    nginx: common::Nginx,
    logs: tempfile::TempDir,
}

impl LoggingNginx {
    fn start() -> LoggingNginx {
        let logs = tempfile::tempdir().unwrap();
        let log = logs.path().join("access.log");
        let log = log.display();
        let nginx = common::Nginx::start_http(
            "log_format t '$request_method $uri $content_type|$http_x_target|$request_body';",
            &format!(
                "location = /sink {{ return 200; }}\n\
                 location /status/404 {{ access_log {log} t; return 404; }}\n\
                 location / {{ access_log {log} t; set $s /sink; proxy_pass http://127.0.0.1:$server_port$s; }}"
            ),
        );
        LoggingNginx { nginx, logs }
    }

    fn url(&self, path: &str) -> String {
        self.nginx.url(path)
    }

    /// Each logged line, with how many times nginx logged it.
    fn seen(&self) -> BTreeMap<String, u64> {
        let text = std::fs::read_to_string(self.logs.path().join("access.log")).unwrap_or_default();
        let mut out = BTreeMap::new();
        for line in text.lines() {
            *out.entry(line.to_string()).or_default() += 1;
        }
        out
    }

    /// Requests logged for `path`, whatever their method and body.
    fn count_path(&self, path: &str) -> u64 {
        self.seen()
            .iter()
            .filter(|(l, _)| l.split(' ').nth(1) == Some(path))
            .map(|(_, n)| n)
            .sum()
    }
}

/// Requests a result counted under `target:NAME`, by name.
fn per_target(r: &RunResult) -> BTreeMap<String, u64> {
    r.measurements
        .scenario
        .as_ref()
        .map(|s| {
            s.tags
                .iter()
                .filter_map(|(k, t)| k.strip_prefix("target:").map(|n| (n.to_string(), t.requests)))
                .collect()
        })
        .unwrap_or_default()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn several_urls_each_get_their_share_and_the_server_saw_them() {
    let n = LoggingNginx::start();
    let run = http(&[
        &n.url("/a"),
        &n.url("/b"),
        &n.url("/c"),
        "-n",
        "30",
        "-c",
        "3",
        "-t",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 30);
    let want: BTreeMap<String, u64> = [("/a", 10), ("/b", 10), ("/c", 10)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(per_target(r), want);
    for p in ["/a", "/b", "/c"] {
        assert_eq!(n.count_path(p), 10, "nginx saw {:?}", n.seen());
    }
    let all = r.measurements.scenario.as_ref().unwrap().all().unwrap();
    assert_eq!(all.requests, 30);
    assert_eq!(all.response.count(), 30);
    assert!(
        schema_violations(&run.json).is_empty(),
        "{:?}",
        schema_violations(&run.json)
    );
    // The text report has a row per target.
    let text = output(throng().args(["report", run.json.to_str().unwrap()]));
    let text = String::from_utf8_lossy(&text.stdout);
    for row in ["target:/a", "target:/b", "target:/c", "3 targets, taken round-robin"] {
        assert!(text.contains(row), "{text}");
    }
}

#[test]
fn a_targets_file_in_vegeta_http_format_sends_methods_headers_and_bodies() {
    let n = LoggingNginx::start();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "new.json", "{\"thing\":1}");
    let file = write(
        dir.path(),
        "targets.txt",
        &format!(
            "# two targets\nGET {}\nX-Target: first\n\nPOST {}\nX-Target: second\nContent-Type: application/json\n@new.json\n",
            n.url("/get"),
            n.url("/post")
        ),
    );
    let run = http(&["--targets", file.to_str().unwrap(), "-n", "8", "-c", "2", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seen = n.seen();
    assert_eq!(seen.get("GET /get -|first|-"), Some(&4), "{seen:?}");
    assert_eq!(
        seen.get("POST /post application/json|second|{\\x22thing\\x22:1}"),
        Some(&4),
        "{seen:?}"
    );
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(per_target(r).values().sum::<u64>(), 8);
    let p = match &r.plan {
        throng_result::Plan::Http(p) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!(p.targets.len(), 2);
    assert_eq!((p.targets[1].method.as_str(), p.targets[1].body_bytes), ("POST", 11));
    assert_eq!(
        (p.targets[0].name.as_str(), p.targets[1].name.as_str()),
        ("GET /get", "POST /post")
    );
}

#[test]
fn json_lines_targets_carry_base64_bodies_and_headers() {
    let n = LoggingNginx::start();
    let dir = tempfile::tempdir().unwrap();
    // "hello" and "world" in base64, as vegeta encodes bodies.
    let file = write(
        dir.path(),
        "targets.jsonl",
        &format!(
            "{{\"method\":\"PUT\",\"url\":\"{}\",\"header\":{{\"X-Target\":[\"j1\"]}},\"body\":\"aGVsbG8=\"}}\n\
             {{\"method\":\"POST\",\"url\":\"{}\",\"body\":\"d29ybGQ=\"}}\n",
            n.url("/one"),
            n.url("/two")
        ),
    );
    let run = http(&["--targets", file.to_str().unwrap(), "-n", "6", "-c", "1", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seen = n.seen();
    assert_eq!(seen.get("PUT /one -|j1|hello"), Some(&3), "{seen:?}");
    assert_eq!(seen.get("POST /two -|-|world"), Some(&3), "{seen:?}");
}

#[test]
fn body_lines_are_cycled_one_per_request() {
    let n = LoggingNginx::start();
    let dir = tempfile::tempdir().unwrap();
    let lines = write(dir.path(), "bodies.txt", "{\"id\":1}\n\n{\"id\":2}\r\n{\"id\":3}\n");
    let run = http(&[
        &n.url("/api"),
        "--body-lines",
        lines.to_str().unwrap(),
        "-T",
        "application/json",
        "-n",
        "9",
        "-c",
        "3",
        "-t",
        "1",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let seen = n.seen();
    for id in 1..=3 {
        let line = format!("POST /api application/json|-|{{\\x22id\\x22:{id}}}");
        assert_eq!(seen.get(&line), Some(&3), "{line}: {seen:?}");
    }
    assert_eq!(seen.values().sum::<u64>(), 9);
    let r = run.result();
    assert_books_balance(r);
    // One target: no per-target table.
    assert!(per_target(r).is_empty());
}

#[test]
fn data_is_text_a_file_or_stdin_with_its_content_type() {
    let n = LoggingNginx::start();
    let run = http(&[
        &n.url("/d"),
        "--data",
        "a=1&b=2",
        "-T",
        "application/x-www-form-urlencoded",
        "-n",
        "2",
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        n.seen().get("POST /d application/x-www-form-urlencoded|-|a=1&b=2"),
        Some(&2),
        "{:?}",
        n.seen()
    );

    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "body.txt", "from-file");
    let at = format!("@{}", f.display());
    let run = http(&[&n.url("/f"), "--data", &at, "-m", "PUT", "-n", "2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(n.seen().get("PUT /f -|-|from-file"), Some(&2), "{:?}", n.seen());

    let json = dir.path().join("stdin.json");
    let mut child = throng()
        .args(["http", &n.url("/s"), "--data", "@-", "-n", "2", "--quiet", "--json"])
        .arg(&json)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"from-stdin").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert_eq!(n.seen().get("POST /s -|-|from-stdin"), Some(&2), "{:?}", n.seen());

    // --targets - reads the targets from stdin, as vegeta's users pipe them.
    let mut child = throng()
        .args(["http", "--targets", "-", "-n", "4", "-c", "1", "--quiet", "--json"])
        .arg(&json)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let piped = format!("GET {}\nPOST {}\n", n.url("/piped-a"), n.url("/piped-b"));
    child.stdin.take().unwrap().write_all(piped.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(n.seen().get("GET /piped-a -|-|-"), Some(&2), "{:?}", n.seen());
    assert_eq!(n.seen().get("POST /piped-b -|-|"), Some(&2), "{:?}", n.seen());
    // Both from stdin: refused, exit 2.
    let run = http(&["--targets", "-", "--data", "@-", "-n", "1"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("both read stdin"), "{}", run.stderr());

    // -T and a Content-Type header both: refused, exit 2.
    let run = http(&[&n.url("/x"), "-T", "a/b", "-H", "Content-Type: c/d", "-n", "1"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("-T/--content-type"), "{}", run.stderr());
}

#[test]
fn the_orders_differ_as_documented() {
    let n = LoggingNginx::start();
    let urls: Vec<String> = (1..=4).map(|i| n.url(&format!("/t{i}"))).collect();
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.extend(["-n", "4", "-c", "2", "-t", "1"]);

    // round-robin: the worker's requests take the targets in turn.
    let run = http(&args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    for i in 1..=4 {
        assert_eq!(n.count_path(&format!("/t{i}")), 1, "{:?}", n.seen());
    }

    // sequential: each of the two connections starts at the first target.
    let mut seq = args.clone();
    seq.extend(["--targets-order", "sequential"]);
    let run = http(&seq);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_eq!(per_target(r).get("/t1"), Some(&2), "{:?}", per_target(r));
    assert_eq!(per_target(r).get("/t4").copied().unwrap_or(0), 0);
    assert_eq!(n.count_path("/t1"), 1 + 2);
    assert_eq!(n.count_path("/t4"), 1);

    // random: every target drawn, the counts add up.
    let mut rnd: Vec<&str> = urls.iter().map(String::as_str).collect();
    rnd.extend(["-n", "400", "-c", "4", "-t", "1", "--targets-order", "random"]);
    let run = http(&rnd);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let counts = per_target(run.result());
    assert_eq!(counts.len(), 4, "{counts:?}");
    assert!(counts.values().all(|&c| c > 0), "{counts:?}");
    assert_eq!(counts.values().sum::<u64>(), 400);
    assert_books_balance(run.result());
}

#[test]
fn thresholds_are_judged_per_target() {
    let n = LoggingNginx::start();
    let run = http(&[
        &n.url("/ok"),
        &n.url("/status/404"),
        "-n",
        "20",
        "-c",
        "2",
        "-t",
        "1",
        "--threshold",
        "errors{target:/ok}: rate < 1%",
        "--threshold",
        "errors{target:/status/404}: rate < 1%",
        "--threshold",
        "requests{target:/ok}: count == 10",
    ]);
    assert_eq!(run.code(), 99, "{}", run.stderr());
    let r = run.result();
    let verdicts: Vec<(String, bool)> = r.thresholds.iter().map(|v| (v.threshold.clone(), v.passed)).collect();
    assert_eq!(
        verdicts,
        [
            ("errors{target:/ok}: rate < 1%".to_string(), true),
            ("errors{target:/status/404}: rate < 1%".to_string(), false),
            ("requests{target:/ok}: count == 10".to_string(), true),
        ]
    );
    assert_eq!(r.thresholds[1].observed, Some(1.0));
    assert_eq!(n.count_path("/status/404"), 10);

    // A threshold that does not parse: exit 2 before any request.
    let run = http(&[&n.url("/ok"), "-n", "1", "--threshold", "errors{target:/ok} rate < 1%"]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("--threshold"), "{}", run.stderr());
    assert_eq!(n.count_path("/ok"), 20 / 2);
}

#[test]
fn bad_and_huge_inputs_are_refused_with_where_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "--targets".into(),
                write(dir.path(), "bad.txt", &format!("{url}a\nGET\n"))
                    .display()
                    .to_string(),
            ],
            "bad.txt:2: 'GET' is neither",
        ),
        (
            vec![
                "--targets".into(),
                write(
                    dir.path(),
                    "bad.jsonl",
                    "{\"method\":\"GET\",\"url\":\"http://127.0.0.1:9/\"}\n{\"url\":1}\n",
                )
                .display()
                .to_string(),
            ],
            "bad.jsonl:2: not a target",
        ),
        (
            vec![
                "--targets".into(),
                write(dir.path(), "huge.txt", &format!("{url}\n").repeat(100_001))
                    .display()
                    .to_string(),
            ],
            "huge.txt:100001: more than 100000 targets",
        ),
        (
            vec![format!("{url}{}", "a".repeat(70_000))],
            "over the limit of 65536 bytes",
        ),
        (
            vec![
                "--targets".into(),
                write(dir.path(), "long.txt", &format!("{url}\n{url}{}\n", "b".repeat(70_000)))
                    .display()
                    .to_string(),
            ],
            "long.txt:2: the URL is 70019 bytes",
        ),
        (
            vec![url.into(), "https://127.0.0.1:9/".into()],
            "URL 2: https://127.0.0.1:9/ is https but",
        ),
        (
            vec![url.into(), "http://127.0.0.2:9/".into(), "-c".into(), "1".into()],
            "-c 1 is fewer than the 2 origins",
        ),
        (
            vec![
                url.into(),
                "--body-lines".into(),
                write(dir.path(), "many.txt", &"x\n".repeat(1_000_001))
                    .display()
                    .to_string(),
            ],
            "many.txt:1000001: more than 1000000 bodies",
        ),
        (
            vec![
                url.into(),
                "http://127.0.0.1:9/b".into(),
                "--body-lines".into(),
                write(dir.path(), "two.txt", "x\n").display().to_string(),
            ],
            "with several targets",
        ),
        (
            vec![
                "--targets".into(),
                write(dir.path(), "nobody.txt", &format!("POST {url}\n@missing.bin\n"))
                    .display()
                    .to_string(),
            ],
            "nobody.txt:2: body",
        ),
    ];
    // A targets file past 64 MiB (sparse: nothing is written) is refused by its size.
    let big = dir.path().join("big.txt");
    std::fs::File::create(&big).unwrap().set_len((64 << 20) + 1).unwrap();
    let mut cases = cases;
    cases.push((
        vec!["--targets".into(), big.display().to_string()],
        "big.txt: the file is over the limit of 67108864 bytes (64 MiB)",
    ));
    for (args, want) in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["-n", "1"]);
        let run = http(&all);
        assert_eq!(run.code(), 2, "{want}: {}", run.stderr());
        let err = run.stderr();
        assert!(err.contains(want), "want {want:?} in: {}", &err[..err.len().min(600)]);
        assert!(err.len() < 2000, "the error stays short: {} bytes", err.len());
    }
}

#[test]
fn targets_on_two_origins_each_keep_their_connections() {
    let (n1, n2) = (LoggingNginx::start(), LoggingNginx::start());
    let (a, b) = (n1.url("/a"), n2.url("/b"));
    let run = http(&[&a, &b, "-n", "40", "-c", "4", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.ok, 40);
    // Names carry the origin when the targets are on several.
    let counts = per_target(r);
    let (ca, cb) = (counts[&a], counts[&b]);
    assert!(ca > 0 && cb > 0, "{counts:?}");
    assert_eq!(ca + cb, 40);
    assert_eq!((n1.count_path("/a"), n2.count_path("/b")), (ca, cb));
    // Two connections per origin, each kept open for all its requests.
    assert_eq!(r.measurements.connections.attempted, 4);
    assert_eq!(r.measurements.connections.ok, 4);
    // A threshold on a target of the second origin.
    let t = format!("requests{{target:{b}}}: count == 0");
    let run = http(&[&a, &b, "-n", "40", "-c", "2", "-t", "1", "--threshold", &t]);
    assert_eq!(run.code(), 99, "{}", run.stderr());
    let v = &run.result().thresholds;
    assert_eq!(v.len(), 1);
    let cb2 = per_target(run.result())[&b];
    assert_eq!(v[0].observed, Some(cb2 as f64));
    assert_eq!(n2.count_path("/b"), cb + cb2);
}

#[test]
fn an_open_loop_takes_the_targets_in_turn_too() {
    let n = LoggingNginx::start();
    let (a, b) = (n.url("/open-a"), n.url("/open-b"));
    let run = http(&[&a, &b, "-r", "400", "-n", "40", "-t", "1", "-c", "8"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert_eq!(r.measurements.requests.attempted + r.measurements.dropped, 40);
    let counts = per_target(r);
    let sent = r.measurements.requests.attempted;
    // Round-robin over the worker's requests, in the order they start.
    assert_eq!((counts["/open-a"], counts["/open-b"]), (sent.div_ceil(2), sent / 2));
    assert_eq!(n.count_path("/open-a"), counts["/open-a"]);
    assert_eq!(n.count_path("/open-b"), counts["/open-b"]);
}

/// The same over TLS, on two origins: each connection's handshake names its
/// own host, and each target's count matches the statuses the servers sent.
#[test]
fn https_targets_on_two_origins() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("certs");
    let o = output(throng().args(["certs", "--out", c.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let pem = |n: &str| c.join(n).display().to_string();
    let tls = format!(
        "ssl_certificate {}; ssl_certificate_key {};",
        pem("server.pem"),
        pem("server.key")
    );
    let n1 = common::Nginx::start_tls(&tls, "location / { return 200; }");
    let n2 = common::Nginx::start_tls(&tls, "location / { return 204; }");
    let (a, b) = (n1.https("localhost", "/a"), n2.https("127.0.0.1", "/b"));
    let run = http(&[&a, &b, "-n", "30", "-c", "2", "-t", "1", "--cacert", &pem("ca.pem")]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    let counts = per_target(r);
    assert_eq!(counts.values().sum::<u64>(), 30);
    assert_eq!(r.measurements.status.get(&200).copied().unwrap_or(0), counts[&a]);
    assert_eq!(r.measurements.status.get(&204).copied().unwrap_or(0), counts[&b]);
    assert!(counts[&a] > 0 && counts[&b] > 0, "{counts:?}");
    assert_eq!(r.measurements.connections.ok, 2);
}

/// `--prometheus` exports each target's requests as the result counts them.
#[test]
fn prometheus_exports_each_target() {
    use std::io::{Read as _, Write as _};
    let n = LoggingNginx::start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let exporter = format!("127.0.0.1:{}", free_port());
    let mut child = throng()
        .args([
            "http",
            &n.url("/p"),
            &n.url("/q"),
            "-n",
            "20",
            "-c",
            "2",
            "-t",
            "1",
            "--quiet",
        ])
        .args(["--prometheus", &exporter, "--prometheus-linger", "5s", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The result is written before the exporter lingers.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !json.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut body = String::new();
    if let Ok(mut s) = std::net::TcpStream::connect(&exporter) {
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let _ = s.read_to_string(&mut body);
    }
    let _ = child.kill();
    let _ = child.wait();
    let r = RunResult::from_reader(std::fs::File::open(&json).unwrap()).unwrap();
    for (name, count) in per_target(&r) {
        let line = format!("throng_target_requests_total{{target=\"{name}\",result=\"ok\"}} {count}");
        assert!(body.contains(&line), "{line} in:\n{body}");
    }
    assert!(!body.contains("throng_iterations_total"), "{body}");
}

/// Past 256 targets, figures per target are not kept (each costs histograms
/// per worker): the run says so, and a threshold on a target is refused.
#[test]
fn many_targets_keep_the_whole_runs_figures_only() {
    let n = LoggingNginx::start();
    let dir = tempfile::tempdir().unwrap();
    let list: String = (0..300).map(|i| format!("{}\n", n.url(&format!("/m{i}")))).collect();
    let file = write(dir.path(), "many.txt", &list);
    let run = http(&["--targets", file.to_str().unwrap(), "-n", "300", "-c", "2", "-t", "1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let r = run.result();
    assert_books_balance(r);
    assert!(per_target(r).is_empty());
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("300 targets: figures per target are kept for at most 256")),
        "{:?}",
        r.notes
    );
    assert_eq!((n.count_path("/m0"), n.count_path("/m299")), (1, 1));
    let run = http(&[
        "--targets",
        file.to_str().unwrap(),
        "-n",
        "1",
        "--threshold",
        "errors{target:/m0}: rate < 1%",
    ]);
    assert_eq!(run.code(), 2, "{}", run.stderr());
    assert!(run.stderr().contains("at most 256 targets"), "{}", run.stderr());
}

/// Several targets on one origin ride either transport with the same books:
/// each target's share counted by nginx and by the result, requests of
/// different lengths (a large body among small ones, which the ring sends
/// with its completion tracked) each whole, and the run saying which
/// transport carried it (a silent fall back to epoll fails here).
#[test]
fn targets_on_one_origin_count_the_same_on_epoll_and_on_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    // 40,000 bytes: above the size the ring sends without a completion.
    let big = "x".repeat(40_000);
    write(dir.path(), "big.txt", &big);
    for io in ["epoll", "uring"] {
        let n = LoggingNginx::start();
        let file = write(
            dir.path(),
            "targets.txt",
            &format!(
                "GET {}\nX-Target: small\n\nPOST {}\nX-Target: big\nContent-Type: text/plain\n@big.txt\n\nGET {}\n",
                n.url("/small"),
                n.url("/big"),
                n.url("/third"),
            ),
        );
        let args = [
            "--targets",
            file.to_str().unwrap(),
            "-n",
            "90",
            "-c",
            "3",
            "-t",
            "1",
            "--io",
            io,
        ];
        let (run, r) = crate::uring::ran_on(io, http(&args));
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        assert_eq!(r.measurements.requests.ok, 90, "{io}");
        let counts = per_target(&r);
        assert_eq!(counts.values().sum::<u64>(), 90, "{io}: {counts:?}");
        let seen = n.seen();
        assert_eq!(seen.get("GET /small -|small|-"), Some(&30), "{io}: {:?}", seen.keys());
        assert_eq!(seen.get("GET /third -|-|-"), Some(&30), "{io}");
        let big_lines: u64 = seen
            .iter()
            .filter(|(l, _)| l.starts_with("POST /big text/plain|big|"))
            .map(|(_, c)| c)
            .sum();
        // nginx proxies each body to its sink: one cut short would have
        // timed out, not answered 200 (nginx logs a body this large as `-`,
        // from its file).
        assert_eq!(big_lines, 30, "{io}: the large body arrived each time");
        assert_eq!(seen.values().sum::<u64>(), 90, "{io}");

        // An open loop with trace context over several URLs.
        let n = LoggingNginx::start();
        let (a, b) = (n.url("/open-a"), n.url("/open-b"));
        let args = [
            &a,
            &b,
            "-r",
            "400",
            "-n",
            "40",
            "-t",
            "1",
            "-c",
            "8",
            "--trace-context",
            "--io",
            io,
        ];
        let (run, r) = crate::uring::ran_on(io, http(&args));
        assert_eq!(run.code(), 0, "{io}: {}", run.stderr());
        let counts = per_target(&r);
        let sent = r.measurements.requests.attempted;
        assert_eq!(sent + r.measurements.dropped, 40, "{io}");
        assert_eq!(
            (counts["/open-a"], counts["/open-b"]),
            (sent.div_ceil(2), sent / 2),
            "{io}"
        );
        assert_eq!(n.count_path("/open-a"), counts["/open-a"], "{io}");
        assert_eq!(n.count_path("/open-b"), counts["/open-b"], "{io}");
        let slowest = r
            .measurements
            .slowest
            .as_ref()
            .expect("trace context keeps the slowest");
        assert_eq!(slowest.requests.len() as u64, sent.min(10), "{io}");
    }
}
