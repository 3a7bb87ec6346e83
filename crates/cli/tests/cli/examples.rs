//! The examples on real components, end to end through their scripts:
//! `examples/nat-ab/run.sh --short` (three network namespaces and an
//! nftables NAT; needs root), a small `examples/waf-ab/run.sh` (nginx
//! with and without ModSecurity and the OWASP CRS) and a small
//! `examples/mtls-5m/run.sh` (nginx requiring a client certificate).
//! Assertions are on counts and on what the server saw, never on how long
//! anything took.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_books_balance, output};
use throng_result::{Document, RunResult};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .join("run.sh")
}

fn runs(path: &Path) -> Vec<RunResult> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Document::from_reader(std::io::BufReader::new(file))
        .unwrap()
        .into_runs()
}

/// Runs `examples/NAME/run.sh ARGS` with this build's throng, results in a
/// fresh directory; asserts it succeeded and returns that directory and
/// its stdout.
fn run_example(name: &str, args: &[&str], env: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let out = tempfile::tempdir().unwrap();
    let run = output(
        Command::new("bash")
            .arg(script(name))
            .args(args)
            .env("THRONG", env!("CARGO_BIN_EXE_throng"))
            .env("OUT", out.path())
            .env(
                "PATH",
                format!("{}:/usr/sbin:/sbin", std::env::var("PATH").unwrap_or_default()),
            )
            .envs(env.iter().copied()),
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{name}: {stdout}{stderr}");
    (out, stdout.into_owned())
}

fn is_root() -> bool {
    output(Command::new("id").arg("-u")).stdout == b"0\n"
}

#[test]
#[ignore = "needs root: the NAT example makes network namespaces (scripts/test.sh runs it as root)"]
fn nat_ab_short_reaches_the_server_directly_and_through_the_nat() {
    // Alone: network namespaces and nftables rules of its own.
    let _alone = common::heavy();
    assert!(
        is_root(),
        "the NAT example makes network namespaces: run as root (scripts/test.sh does)"
    );
    let (out, _) = run_example("nat-ab", &["--short"], &[]);
    // Every planned connection on each side got its reply...
    for side in ["direct", "nat"] {
        let r = runs(&out.path().join(format!("{side}.json")));
        assert_eq!(r.len(), 1);
        let req = &r[0].measurements.requests;
        assert_eq!((req.attempted, req.ok), (500, 500), "{side}: {req:?}");
        assert_eq!(r[0].measurements.connections.ok, 500, "{side}");
        let text = std::fs::read_to_string(out.path().join(format!("{side}.txt"))).unwrap();
        assert!(
            text.contains("Total: connections 500 requests 500 replies 500"),
            "{text}"
        );
    }
    // ...and the server saw the client's address on one side and the
    // router's on the other: the NAT really was in the path.
    let sources = std::fs::read_to_string(out.path().join("sources.txt")).unwrap();
    assert_eq!(
        sources.trim(),
        "server saw 500 requests from the client (direct) and 500 from the router (NAT)"
    );
    let compare = std::fs::read_to_string(out.path().join("compare.txt")).unwrap();
    assert!(
        compare.contains("A = direct") && compare.contains("B = nat"),
        "{compare}"
    );
    let columns = std::fs::read_to_string(out.path().join("compare-httperf.txt")).unwrap();
    assert!(
        columns.lines().any(|l| l.matches("Connection rate:").count() == 2),
        "{columns}"
    );
    // Nothing left behind.
    let left = output(Command::new("ip").args(["netns", "list"]));
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("nat-ab-"),
        "namespaces left behind"
    );
}

#[test]
#[ignore = "needs nginx's ModSecurity module and the CRS rules (scripts/test.sh installs them)"]
fn waf_ab_compares_nginx_with_and_without_modsecurity() {
    // Alone: ModSecurity costs nginx ~2 ms of CPU a request.
    let _alone = common::heavy();
    let module = Path::new("/usr/lib/nginx/modules/ngx_http_modsecurity_module.so");
    assert!(
        module.exists() || is_root(),
        "ModSecurity is not installed and installing it needs root: run scripts/test.sh (it installs it)"
    );
    // The WAF costs ~2 ms of nginx's CPU per request; on a busy machine a
    // 10 s timeout can cut the slowest off.
    let env = [
        ("RUNS", "2"),
        ("REQUESTS", "1000"),
        ("CONCURRENCY", "20"),
        ("TIMEOUT", "120s"),
    ];
    let (out, stdout) = run_example("waf-ab", &[], &env);
    // The script refuses to compare unless the WAF blocks an XSS probe.
    assert!(stdout.contains("an XSS probe gets 403"), "{stdout}");
    for side in ["plain", "modsecurity"] {
        let r = runs(&out.path().join(format!("{side}.json")));
        assert_eq!(r.len(), 2, "{side}: --repeat 2 writes both runs");
        for run in &r {
            let req = &run.measurements.requests;
            // The seed's query string is benign: the WAF lets every request through.
            assert_eq!((req.attempted, req.ok), (1000, 1000), "{side}: {req:?}");
        }
        let text = std::fs::read_to_string(out.path().join(format!("{side}.txt"))).unwrap();
        assert!(text.contains("Complete requests:      2000"), "{side}: {text}");
    }
    let compare = std::fs::read_to_string(out.path().join("compare.txt")).unwrap();
    assert!(
        compare.contains("A = plain") && compare.contains("B = modsecurity"),
        "{compare}"
    );
    let columns = std::fs::read_to_string(out.path().join("compare-ab.txt")).unwrap();
    assert!(
        columns.lines().any(|l| l.matches("Requests per second:").count() == 2),
        "{columns}"
    );
}

#[test]
#[ignore = "needs root: the segments rehearsal makes network namespaces (scripts/test.sh runs it as root)"]
fn segments_local_agents_merge_into_exactly_what_they_recorded() {
    // Alone: network namespaces and nftables rules of its own.
    let _alone = common::heavy();
    assert!(
        is_root(),
        "the segments rehearsal makes network namespaces: run as root (scripts/test.sh does)"
    );
    let (out, _) = run_example("segments-local", &["3", "--short"], &[]);
    let segments: Vec<RunResult> = (0..3)
        .map(|i| runs(&out.path().join(format!("segment-{i}.json"))).remove(0))
        .collect();
    let merged = runs(&out.path().join("merged.json")).remove(0);
    // Each agent ran its own third, from its own address...
    let shares: Vec<String> = segments
        .iter()
        .map(|r| r.segment.as_ref().expect("a segment").range())
        .collect();
    assert_eq!(shares, ["0:1/3", "1/3:2/3", "2/3:1"]);
    // ...and the merge is exactly what they recorded: counts add up, every
    // phase's histogram is the sum of theirs, throughput is the sum.
    let sum = |f: &dyn Fn(&RunResult) -> u64| segments.iter().map(f).sum::<u64>();
    let m = &merged.measurements;
    assert_eq!(m.requests.attempted, sum(&|r| r.measurements.requests.attempted));
    assert_eq!(m.requests.ok, sum(&|r| r.measurements.requests.ok));
    assert_eq!(
        m.requests.attempted + m.dropped,
        6000,
        "2000 req/s for 3 s in all: {:?}",
        m.requests
    );
    for (phase, hist) in &m.phases {
        let mut expected = throng_metrics::Hist::new();
        for r in &segments {
            if let Some(h) = r.measurements.phases.get(phase) {
                expected.add(h).unwrap();
            }
        }
        assert!(
            *hist == expected,
            "{phase}: the merged histogram is not the sum of the segments'"
        );
    }
    let rate = |r: &RunResult| r.measurements.requests.ok as f64 / r.duration_s;
    let total: f64 = segments.iter().map(rate).sum();
    assert!(
        (rate(&merged) - total).abs() <= total * 0.01,
        "merged {} vs sum {total}",
        rate(&merged)
    );
    let left = output(Command::new("ip").args(["netns", "list"]));
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("seg-"),
        "namespaces left behind"
    );
}

#[test]
#[ignore = "needs root: the live segments rehearsal makes network namespaces (scripts/test.sh runs it as root)"]
fn segments_local_live_agents_in_namespaces_merge_into_the_whole_plan() {
    // Alone: network namespaces of its own.
    let _alone = common::heavy();
    assert!(
        is_root(),
        "the live rehearsal makes network namespaces: run as root (scripts/test.sh does)"
    );
    let (out, _) = run_example("segments-local", &["3", "--short", "--live"], &[]);
    let merged = runs(&out.path().join("merged.json")).remove(0);
    // One agent per namespace, each named with its share; together the
    // whole plan: 2000 req/s for 3 s, every intended start sent or dropped.
    assert_eq!(merged.parts.len(), 3, "{:?}", merged.notes);
    for (i, share) in ["0:1/3", "1/3:2/3", "2/3:1"].iter().enumerate() {
        let agent = format!("agent 10.78.0.{}:7700: segment {share}: ", 10 + i);
        assert!(
            merged.notes.iter().any(|n| n.starts_with(&agent)),
            "{agent} not in {:?}",
            merged.notes
        );
    }
    let m = &merged.measurements;
    assert_eq!(m.requests.attempted + m.dropped, 6000, "{:?}", m.requests);
    assert_books_balance(&merged);
    // The shared token reaches no output.
    let token = std::fs::read_to_string(out.path().join("token")).unwrap();
    assert_eq!(token.len(), 64);
    for f in [
        "merged.json",
        "merged.txt",
        "coordinate.txt",
        "agent-0.txt",
        "agent-1.txt",
        "agent-2.txt",
    ] {
        let text = std::fs::read_to_string(out.path().join(f)).unwrap();
        assert!(!text.contains(&token), "the token is in {f}");
    }
    let left = output(Command::new("ip").args(["netns", "list"]));
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("seg-"),
        "namespaces left behind"
    );
}

#[test]
fn mtls_5m_small_nginx_serves_exactly_the_connections_throng_counts() {
    // Alone: two full TLS handshakes' worth of CPU per connection, nginx
    // pinned to one core and throng to the other.
    let _alone = common::heavy();
    // A generous timeout: this is a debug build on a machine shared with
    // other tests; a timed-out connection would fail the 0.1% bound.
    let env = [("CONNECTIONS", "2000"), ("CONCURRENT", "16"), ("TIMEOUT", "60s")];
    let (out, stdout) = run_example("mtls-5m", &[], &env);
    // The script refuses to measure unless nginx turns away a client
    // without a certificate.
    assert!(
        stdout.contains("nginx refuses a client without a certificate"),
        "{stdout}"
    );
    let r = runs(&out.path().join("storm.json"));
    assert_eq!(r.len(), 1);
    // The default --io: the TLS storm on io_uring, where the kernel allows
    // it (this suite's machines do).
    assert_eq!(r[0].generator.io, Some(throng_result::Io::Uring), "{stdout}");
    assert!(stdout.contains("throng:  I/O io_uring"), "{stdout}");
    let m = &r[0].measurements;
    assert_eq!(
        (m.connections.attempted, m.connections.ok),
        (2000, 2000),
        "{:?}",
        m.connections
    );
    assert_eq!((m.requests.attempted, m.requests.ok), (2000, 2000), "{:?}", m.requests);
    // Every connection was a full TLS 1.3 handshake, on throng's side...
    let tls = m.tls.as_ref().expect("TLS counts");
    assert_eq!((tls.handshakes, tls.resumed), (2000, 0), "{tls:?}");
    assert_eq!(tls.versions.get("TLSv1_3"), Some(&2000), "{tls:?}");
    // ...and on nginx's: one access-log line per request, each 200 with
    // the client certificate verified and the session not reused.
    let log = std::fs::read_to_string(out.path().join("access.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2000, "nginx logged {} requests", lines.len());
    assert!(
        lines.iter().all(|l| l.starts_with("200 SUCCESS . TLSv1.3")),
        "{:?}",
        lines.iter().find(|l| !l.starts_with("200 SUCCESS . TLSv1.3"))
    );
    // The script's own line, from which the lead reads the 5M figure.
    let summary = std::fs::read_to_string(out.path().join("summary.txt")).unwrap();
    assert!(
        summary.contains("| 2,000 | 2,000 | 1 thread, 16 at once | 100.00% |"),
        "{summary}"
    );
    assert!(
        summary.contains(
            "nginx:   2000 requests served with 200 and client certificate SUCCESS (0 other lines, 0 resumed sessions)"
        ),
        "{summary}"
    );
}
