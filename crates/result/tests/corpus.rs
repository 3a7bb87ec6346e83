//! The corpus of result files (tests/corpus/): the valid ones load and
//! report; each hostile one is refused with one line naming the field, and
//! nothing panics. `make_hostile.py` there writes the hostile files from
//! the valid ones.

#![allow(clippy::unwrap_used)]

mod common;

use common::{exercise, files, reference};

#[test]
fn valid_results_load_and_every_report_renders() {
    let files = files("valid-");
    assert_eq!(files.len(), 4, "{files:?}");
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        exercise(&bytes, &reference()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}

#[test]
fn names_of_70000_characters_load_and_render_clipped() {
    let f = common::corpus().join("odd-long-names.json");
    exercise(&std::fs::read(&f).unwrap(), &reference()).unwrap();
    let r = throng_result::load_runs(&f).unwrap().remove(0);
    let mut text = Vec::new();
    throng_report::write(throng_report::View::Text, &r, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains(&format!("step:{}…", "x".repeat(59))), "{text}");
    assert!(!text.contains(&"x".repeat(61)));
}

/// Each hostile file and the words its refusal must hold (the field).
const REFUSALS: &[(&str, &[&str])] = &[
    ("count-negative", &["invalid value"]),
    ("count-overflow", &["'measurements.requests'", "2^64"]),
    ("duration-1e12", &["'duration_s'", "1e12"]),
    ("duration-1e308", &["'duration_s'", "1e308"]),
    ("duration-nan-string", &["invalid type"]),
    ("duration-negative", &["'duration_s'", "-1"]),
    ("hdr-high-2-62", &["'measurements.phases.latency.hdr'", "highest value"]),
    ("hdr-not-base64", &["'measurements.phases.latency.hdr'", "base64"]),
    ("hdr-payload-len-lies", &["'measurements.phases.latency.hdr'"]),
    ("hdr-random", &["'measurements.phases.latency.hdr'", "cookie"]),
    ("hdr-raw-high", &["'measurements.phases.wait.hdr'", "highest value"]),
    (
        "hdr-sigfig-5",
        &["'measurements.phases.latency.hdr'", "significant digits"],
    ),
    ("hdr-zlib-bomb", &["'measurements.phases.latency.hdr'", "inflates past"]),
    ("no-schema", &["schema"]),
    (
        "out-of-turn-overflow",
        &["'measurements.handshake_out_of_turn'", "2^64"],
    ),
    ("part-duration", &["'parts[0].duration_s'"]),
    (
        "scenario-check-overflow",
        &["'measurements.scenario.checks.big'", "2^64"],
    ),
    (
        "scenario-tag-hdr",
        &["'measurements.scenario.tags..response.hdr'", "significant digits"],
    ),
    ("series-duplicates", &["second'", "ascend"]),
    ("series-hdr-sigfig-5", &["'measurements.series[0].phases.latency'"]),
    ("series-second", &["'measurements.series[0].second'"]),
    ("series-unsorted", &["second'", "ascend"]),
    ("set-bad-run", &["'runs[0].duration_s'"]),
    ("set-empty", &["no runs"]),
    ("start-far", &["'started_at_unix_ms'", "3000"]),
    ("status-overflow", &["'measurements.status'", "2^64"]),
    ("truncated", &["EOF"]),
];

#[test]
fn every_hostile_file_is_refused_in_one_line_naming_the_field() {
    let files = files("hostile-");
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .trim_start_matches("hostile-")
                .to_string()
        })
        .collect();
    let expected: Vec<&str> = REFUSALS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected, "every corpus file has its expectation");
    for (f, (_, words)) in files.iter().zip(REFUSALS) {
        let bytes = std::fs::read(f).unwrap();
        let e = exercise(&bytes, &reference()).expect_err(&format!("{} must be refused", f.display()));
        for w in *words {
            assert!(e.contains(w), "{}: '{w}' not in: {e}", f.display());
        }
    }
}

/// The corpus was written by schema v1 (figures named bare: `p99`): it
/// reads as a v2 document, which names each figure with its unit and holds
/// the same numbers, since only the exact encoding (`hdr`) is read back.
#[test]
fn a_version_1_result_reads_and_is_written_as_version_2_with_the_same_figures() {
    let f = common::corpus().join("valid-http-closed.json");
    let v1: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
    assert_eq!(v1["schema"], "throng.result/v1");
    let run = throng_result::load_runs(&f).unwrap().remove(0);
    assert_eq!(run.schema, throng_result::SCHEMA);
    let v2 = serde_json::to_value(&run).unwrap();
    assert_eq!(v2["schema"], "throng.result/v2");
    let (old, new) = (
        &v1["measurements"]["phases"]["latency"],
        &v2["measurements"]["phases"]["latency"],
    );
    assert!(old["count"].as_u64().unwrap() > 0);
    assert_eq!(new["count"], old["count"]);
    for figure in ["min", "max", "mean", "stddev", "p50", "p90", "p95", "p99", "p999"] {
        assert_eq!(new[format!("{figure}_us")], old[figure], "{figure}");
        assert!(new.get(figure).is_none(), "{figure} is written with its unit");
    }
    assert_eq!(new["hdr"], old["hdr"]);
}
