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
    assert!(!printed.contains(SECRET) && !text.contains(SECRET), "the header leaked");
}

#[test]
fn otlp_holds_exactly_the_merged_totals() {
    let lab = common::lab(None);
    let prom = crate::otlp::receiver();
    let (a, b) = agents();
    let url = crate::otlp::otlp_url(&prom);
    let auth = format!("Authorization: {SECRET}");
    let cmd = command(&lab);
    let (code, printed, text, r) = coordinate(
        (&a, &b),
        &["--otlp", &url, "--otlp-interval", "1s", "--otlp-header", &auth],
        &cmd.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(code, 0, "{printed}");
    assert_eq!(r.parts.len(), 2, "{:?}", r.notes);
    let m = &r.measurements;
    let push = r.otlp.as_ref().unwrap();
    assert_eq!((push.samples_failed, push.samples_dropped), (0, 0), "{push:?}");
    assert!(push.pushes_sent >= 2 && push.samples_sent > 0, "{push:?}");
    assert!(r.remote_write.is_none());
    crate::push_receiver::holds_the_counts(&prom, m, r#"run_id=~"[0-9a-f]+",agent="""#);
    assert!(!printed.contains(SECRET) && !text.contains(SECRET), "the header leaked");
}
