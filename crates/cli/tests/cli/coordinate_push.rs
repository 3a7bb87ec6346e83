//! `throng coordinate --remote-write/--otlp`: the merged live series of two
//! agents pushed to the receivers the run's push tests use; what they hold
//! at the end is exactly the merged result. A header's value never shows.
#![allow(clippy::unwrap_used)]

use crate::common;
use crate::coordinate::Agent;

use common::{output, throng};
use throng_result::RunResult;

/// What a push header carries in these tests; it must show nowhere.
const SECRET: &str = "Bearer c00rd-s3cr3t-9191";

/// Two agents on port 0 (no token: loopback only).
fn agents() -> (Agent, Agent) {
    (Agent::start_with(&[]), Agent::start_with(&[]))
}

/// `throng coordinate --agents A,B --json FILE EXTRA -- COMMAND`: exit
/// code, stdout + stderr, the result file's text and the result.
fn coordinate(agents: (&Agent, &Agent), extra: &[&str], command: &[&str]) -> (i32, String, String, RunResult) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("all.json");
    let out = output(
        throng()
            .args([
                "coordinate",
                "--agents",
                &format!("{},{}", agents.0.addr, agents.1.addr),
            ])
            .args(extra)
            .arg("--json")
            .arg(&json)
            .arg("--")
            .args(command),
    );
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let r = RunResult::from_reader(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {printed}"));
    assert_eq!(common::schema_violations(&json), Vec::<String>::new());
    (out.status.code().unwrap_or(-1), printed, text, r)
}

/// The run both tests coordinate: 3 s against the lab, split over two agents.
fn command(lab: &throng_lab::LabServer) -> Vec<String> {
    [
        "http",
        &format!("http://{}/", lab.addr()),
        "-c",
        "2",
        "-t",
        "1",
        "-d",
        "3s",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn remote_write_holds_exactly_the_merged_totals() {
    let lab = common::lab(None);
    let prom = crate::remote_write::receiver();
    let (a, b) = agents();
    let url = format!("http://{}/api/v1/write", prom.addr);
    let auth = format!("Authorization: {SECRET}");
    let cmd = command(&lab);
    let (code, printed, text, r) = coordinate(
        (&a, &b),
        &[
            "--remote-write",
            &url,
            "--remote-write-interval",
            "1s",
            "--remote-write-header",
            &auth,
        ],
        &cmd.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(code, 0, "{printed}");
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    let m = &r.measurements;
    assert!(m.requests.ok > 0);
    let push = r.remote_write.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    // Pushed while the run lasted (1 s interval over 3 s) and once at the end.
    assert!(push.pushes_sent >= 2 && push.samples_sent > 0, "{push:?}");
    assert!(printed.contains("remote write to http://127.0.0.1:"), "{printed}");
    // The run is named as the agents' own pushes name it; the merged series
    // carry no agent label.
    crate::push_receiver::holds_the_counts(&prom, m, r#"job="throng",run_id=~"[0-9a-f]+",agent="""#);
    // Each agent's own series only on demand (--per-agent).
    assert!(prom.query(r#"{__name__=~"throng_.+",agent!=""}"#).is_empty());
    assert!(!printed.contains(SECRET) && !text.contains(SECRET), "the header leaked");
}

/// The sum of every sample of `name` in a scrape whose line holds `has`.
fn scraped_sum(scrape: &str, name: &str, has: &str) -> (usize, f64) {
    let values: Vec<f64> = scrape
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(has))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (values.len(), values.iter().sum())
}

/// `--per-agent`: each agent's series beside the merged ones, on /metrics
/// and over OTLP; each agent's count is its part's, and they add up to the
/// merged count exactly.
#[test]
fn otlp_and_metrics_hold_the_merged_totals_and_each_agent_s() {
    let lab = common::lab(None);
    let prom = crate::otlp::receiver();
    let (a, b) = agents();
    let url = crate::otlp::otlp_url(&prom);
    let auth = format!("Authorization: {SECRET}");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("all.json");
    let exporter: std::net::SocketAddr = format!("127.0.0.1:{}", common::free_port()).parse().unwrap();
    let log = dir.path().join("coordinate.log");
    let mut child = throng()
        .args([
            "coordinate",
            "--agents",
            &format!("{},{}", a.addr, b.addr),
            "--per-agent",
        ])
        .args(["--otlp", &url, "--otlp-interval", "1s", "--otlp-header", &auth])
        .args(["--prometheus", &exporter.to_string(), "--prometheus-linger", "100s"])
        .arg("--json")
        .arg(&json)
        .arg("--")
        .args(command(&lab))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let r = crate::coordinate::wait_for_result(&json, &mut child);
    // Written before the linger: the endpoint shows the final totals.
    let (status, scrape) = crate::prometheus::get(exporter, "/metrics").unwrap();
    // SIGINT ends the linger; the result stands.
    // SAFETY: kill takes no pointers; the child is ours and not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let code = crate::coordinate::wait_end(&mut child);
    let printed = std::fs::read_to_string(&log).unwrap();
    assert_eq!(code, 0, "{printed}");
    assert_eq!(status, 200);
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    let m = &r.measurements;
    let ok = m.requests.ok;
    assert!(ok > 0);
    let push = r.otlp.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");

    // /metrics: the merged line, and one per agent adding up to it.
    let merged = format!("throng_requests_total{{outcome=\"ok\"}} {ok}\n");
    assert!(scrape.contains(&merged), "{scrape}");
    for (i, agent) in [&a, &b].iter().enumerate() {
        let label = format!("agent=\"{} {}\"", i + 1, agent.addr);
        let (n, v) = scraped_sum(&scrape, "throng_requests_total{", &format!("{label},outcome=\"ok\""));
        assert_eq!(n, 1, "{label}: {scrape}");
        // The merged result's note of that agent's part: "... N requests (M ok)".
        let seg = ["0:1/2", "1/2:1"][i];
        let note = r
            .notes
            .iter()
            .find_map(|n| n.strip_prefix(&format!("agent {}: segment {seg}: ", agent.addr)))
            .unwrap_or_else(|| panic!("no note of {label}: {:?}", r.notes));
        let part_ok: f64 = note
            .split('(')
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            v > 0.0 && v == part_ok,
            "{label}: {v} on /metrics, {note} in the result"
        );
    }
    let (n, sum) = scraped_sum(&scrape, "throng_requests_total{agent=", "outcome=\"ok\"");
    assert_eq!((n, sum), (2, ok as f64), "{scrape}");
    let latency = m.phases["latency"].count();
    let (n, sum) = scraped_sum(
        &scrape,
        "throng_phase_duration_seconds_count{agent=",
        "phase=\"latency\"",
    );
    assert_eq!((n, sum), (2, latency as f64), "{scrape}");

    // The receiver: the merged series exactly, each agent's adding up to it.
    crate::push_receiver::holds_the_counts(&prom, m, r#"run_id=~"[0-9a-f]+",agent="""#);
    assert_eq!(
        prom.wait_for(
            r#"sum(throng_requests_total{outcome="ok",agent=~"[12] 127.0.0.1:.+"})"#,
            ok
        ),
        Some(ok as f64)
    );
    assert_eq!(
        prom.wait_for(r#"count(throng_requests_total{outcome="ok",agent!=""})"#, 2),
        Some(2.0)
    );
    assert_eq!(
        prom.wait_for(
            r#"sum(histogram_count(throng_phase_duration_seconds{phase="latency",agent!=""}))"#,
            latency
        ),
        Some(latency as f64)
    );
    assert!(
        !printed.contains(SECRET) && !scrape.contains(SECRET),
        "the header leaked"
    );
}

/// `--per-agent` with nothing to show it on, and a push URL the
/// coordinator cannot use, are usage errors before any agent is asked; a
/// header's value never shows.
#[test]
fn per_agent_alone_or_a_bad_push_url_is_a_usage_error() {
    let coordinate = |extra: &[&str]| {
        let out = output(
            throng()
                .args(["coordinate", "--agents", "127.0.0.1:9"])
                .args(extra)
                .args(["--", "http", "http://127.0.0.1:9/", "-n", "1"]),
        );
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, stderr) = coordinate(&["--per-agent"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--per-agent") && stderr.contains("give --prometheus, --remote-write or --otlp"),
        "{stderr}"
    );
    let auth = format!("Authorization {SECRET}");
    let (code, stderr) = coordinate(&["--otlp", "ftp://127.0.0.1:9/v1/metrics", "--otlp-header", &auth]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--otlp ftp://"), "{stderr}");
    let (code, stderr) = coordinate(&["--remote-write", "http://127.0.0.1:9/w", "--remote-write-header", &auth]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--remote-write-header (#1)"), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
    assert!(!stderr.contains("cannot connect"), "an agent was asked: {stderr}");
}
