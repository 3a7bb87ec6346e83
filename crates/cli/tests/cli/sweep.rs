//! `throng sweep`: the bcrypt × clients matrix of seed 000, small, end to
//! end against a real nats-server driven by the example's own script.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{free_port, throng};

/// A sweep's CSV table: its text, header and rows.
struct Table {
    stdout: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// The column whose header starts with `name`.
    fn col(&self, name: &str) -> usize {
        self.header.iter().position(|h| h.starts_with(name)).unwrap()
    }
}

/// Runs `throng sweep FILE --format csv EXTRA…`, which must exit 0, and
/// reads its table.
fn sweep_csv(file: &std::path::Path, extra: &[&std::ffi::OsStr]) -> Table {
    let out = common::output(throng().arg("sweep").arg(file).args(["--format", "csv"]).args(extra));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let split = |l: &str| l.split(',').map(str::to_string).collect::<Vec<_>>();
    let header = stdout.lines().next().map(split).unwrap_or_default();
    let rows = stdout.lines().skip(1).map(split).collect();
    Table { stdout, header, rows }
}

#[test]
fn a_small_bcrypt_sweep_fills_its_table_and_chart() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/nats-bcrypt/nats.sh");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let state = dir.path().join("state");
    let file = dir.path().join("sweep.yaml");
    std::fs::write(
        &file,
        format!(
            r#"
parameters:
  cost: [4, 9]
  clients: [10, 30]
setup: "THRONG_NATS_DIR={state} {script} start {{{{cost}}}} {port}"
run: >-
  storm nats://throng:secret@127.0.0.1:{port} --count {{{{clients}}}} --jitter 500ms --hold 12s --timeout 30s
  --reconnect --reconnect-wait 200ms --trigger-after 500ms --trigger 'THRONG_NATS_DIR={state} {script} restart 0.5'
teardown: "THRONG_NATS_DIR={state} {script} stop"
figures: [established, failures, total_connect_time, total_reconnect_time, handshake.p50]
chart: {{ figure: handshake.p50, x: cost, lines: clients }}
"#,
            state = state.display()
        ),
    )
    .unwrap();
    let json = dir.path().join("sweep.json");
    let chart = dir.path().join("chart.svg");
    let table = sweep_csv(
        &file,
        &[
            "--json".as_ref(),
            json.as_os_str(),
            "--chart".as_ref(),
            chart.as_os_str(),
        ],
    );
    let (stdout, rows, col) = (&table.stdout, &table.rows, |n: &str| table.col(n));
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in rows {
        let clients = &row[col("clients")];
        assert_eq!(&row[col("established")], clients, "every client connected: {row:?}");
        assert_eq!(row[col("failures")], "0", "{row:?}");
        let connect: f64 = row[col("total connect")].parse().unwrap();
        let reconnect: f64 = row[col("total reconnect")].parse().unwrap();
        assert!(
            connect > 0.0 && reconnect >= 500.0,
            "figures present and plausible: {row:?}"
        );
    }
    // The bcrypt cost shows in the handshake.
    let hs = |cost: &str| -> f64 {
        rows.iter().find(|r| r[col("cost")] == cost).unwrap()[col("handshake p50")]
            .parse()
            .unwrap()
    };
    assert!(hs("9") > hs("4"), "cost 9 slower than cost 4: {stdout}");

    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(doc["schema"], "throng.sweep/v1");
    assert_eq!(doc["cells"].as_array().unwrap().len(), 4);
    assert_eq!(doc["cells"][0]["runs"][0]["schema"], "throng.result/v2");
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("clients=10") && svg.contains("clients=30"),
        "chart: {svg:.200}"
    );
    assert!(svg.matches("<circle").count() >= 4, "a point per cell");
}

/// The MQTT example's matrix, small, against a real mosquitto driven by
/// the example's own script: every client connects and reconnects, and the
/// PBKDF2 iterations show in the CONNECT→CONNACK handshake.
#[test]
fn a_small_pbkdf2_sweep_against_mosquitto_fills_its_table() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/mqtt-pbkdf2/mosquitto.sh");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let state = dir.path().join("state");
    let file = dir.path().join("sweep.yaml");
    std::fs::write(
        &file,
        format!(
            r#"
parameters:
  iterations: [101, 50000]
  clients: [10, 20]
setup: "THRONG_MOSQUITTO_DIR={state} {script} start {{{{iterations}}}} {port}"
run: >-
  storm mqtt://throng:secret@127.0.0.1:{port} --count {{{{clients}}}} --jitter 500ms --hold 12s --timeout 30s
  --reconnect --reconnect-wait 200ms --trigger-after 500ms --trigger 'THRONG_MOSQUITTO_DIR={state} {script} restart 0.5'
teardown: "THRONG_MOSQUITTO_DIR={state} {script} stop"
figures: [established, failures, total_connect_time, total_reconnect_time, handshake.p50, reconnect.max]
"#,
            state = state.display()
        ),
    )
    .unwrap();
    let table = sweep_csv(&file, &[]);
    let (stdout, rows, col) = (&table.stdout, &table.rows, |n: &str| table.col(n));
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in rows {
        assert_eq!(&row[col("established")], &row[col("clients")], "{row:?}");
        assert_eq!(row[col("failures")], "0", "{row:?}");
        let reconnect: f64 = row[col("total reconnect")].parse().unwrap();
        assert!(reconnect >= 500.0, "the restart's gap is in it: {row:?}");
    }
    let hs = |n: &str| -> f64 {
        rows.iter().find(|r| r[col("iterations")] == n).unwrap()[col("handshake p50")]
            .parse()
            .unwrap()
    };
    // 50,000 PBKDF2-SHA512 iterations are tens of milliseconds a check.
    assert!(hs("50000") > 10.0 * hs("101").max(0.5), "{stdout}");
    assert!(!stdout.contains("secret"), "{stdout}");
}

#[test]
fn failing_cells_are_reported_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.yaml");
    let dead = free_port();
    std::fs::write(
        &file,
        format!(
            "parameters:\n  n: [5, 6]\nsetup: \"test {{{{n}}}} -eq 5\"\nrun: storm tcp://127.0.0.1:{dead} --count {{{{n}}}}\n"
        ),
    )
    .unwrap();
    let out = common::output(throng().args(["sweep", file.to_str().unwrap()]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.lines().count(), 3, "both cells reported: {stdout}");
    assert!(stdout.contains("run: exit 1"), "the refused cell ran: {stdout}");
    assert!(
        stdout.contains("setup failed: exit 1"),
        "the second cell's setup failed: {stdout}"
    );
}

#[test]
fn bad_sweep_files_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "parameters: {a: [1]}\nrun: storm tcp://x:1 -n {{a}}\ncolour: red\n",
            ":3:1: unknown field `colour`",
        ),
        (
            "parameters: {a: [1]}\nrun: storm tcp://x:1 -n {{b}}\n",
            "{{b}} is not a parameter",
        ),
        ("parameters: {a: [1]}\nrun: storm x --json y\n", "remove --json"),
        (
            "parameters: {a: [1]}\nrun: storm x\nchart: {figure: connect.p50, x: zz}\n",
            "chart.x",
        ),
        ("parameters: {a: [1]\n", "sweep.yaml:"),
    ];
    for (text, needle) in cases {
        let file = dir.path().join("sweep.yaml");
        std::fs::write(&file, text).unwrap();
        let out = common::output(throng().args(["sweep", file.to_str().unwrap()]));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(needle), "{text}: expected '{needle}' in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
