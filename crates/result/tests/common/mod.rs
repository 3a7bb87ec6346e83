//! What every reader of results does with a document: load it, then (when
//! it loads) render every report, compare it and merge it. Used by the
//! corpus test and the fuzz test: neither may ever see a panic, and every
//! refusal is one line.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use throng_report::compare::{Comparison, Options, Side};
use throng_report::{View, html};
use throng_result::{Document, RunResult};

/// The corpus directory.
pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// The corpus files whose names start with `prefix`, sorted.
pub fn files(prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json") && p.file_name().unwrap().to_str().unwrap().starts_with(prefix)
        })
        .collect();
    v.sort();
    v
}

/// Loads `bytes` as the CLI does, and on success runs every report, a
/// comparison with `other` (under a 70,000-character label), and merges. Returns the
/// load error's message, if any. Refusals anywhere must be one line.
pub fn exercise(bytes: &[u8], other: &RunResult) -> Result<(), String> {
    let runs = match Document::from_reader(bytes) {
        Ok(doc) => doc.into_runs(),
        Err(e) => {
            let msg = e.to_string();
            assert_one_line(&msg);
            return Err(msg);
        }
    };
    let mut sink = Vec::new();
    for r in &runs {
        for view in [View::Text, View::Ab, View::Httperf, View::Json] {
            if throng_report::supports(view, r).is_ok() {
                sink.clear();
                if let Err(e) = throng_report::write(view, r, &mut sink) {
                    assert_one_line(&e.to_string());
                }
            }
        }
        let _ = html::render(r);
        let _ = throng_report::csv::write_series(r, &mut sink);
        let _ = throng_report::interval_log::write(r, &mut sink);
        let _ = throng_report::junit::write(r, &mut sink);
        for merged in [
            RunResult::merge(&[r.clone(), other.clone()]),
            RunResult::merge(&[r.clone(), r.clone()]),
            RunResult::merge_sequential(&[r.clone(), other.clone()]),
        ] {
            match merged {
                Ok(m) => {
                    let _ = throng_report::write(View::Text, &m, &mut sink);
                }
                Err(e) => assert_one_line(&e.to_string()),
            }
        }
        let _ = r.books();
        let _ = r.plan.differences(&other.plan);
        compare(r, other, &mut sink);
    }
    if runs.len() > 1 {
        let _ = throng_report::runs::write_set(View::Text, &runs, &mut sink);
    }
    Ok(())
}

fn compare(a: &RunResult, b: &RunResult, sink: &mut Vec<u8>) {
    let side = |label: &str, r: &RunResult| Side {
        label: label.to_string(),
        sources: vec![label.to_string()],
        runs: vec![r.clone()],
    };
    let options = Options {
        resamples: 200,
        ..Options::default()
    };
    match Comparison::new(side("A", a), side(&"B".repeat(70_000), b), options) {
        Ok(c) => {
            let _ = throng_report::compare::write_text(&c, sink);
            let _ = throng_report::compare::write_markdown(&c, sink);
            let _ = throng_report::compare::write_json(&c, sink);
            for view in [View::Ab, View::Httperf] {
                if throng_report::supports(view, a).is_ok() && throng_report::supports(view, b).is_ok() {
                    let _ = throng_report::compare::write_columns(view, &c, sink);
                }
            }
            let _ = html::render_compare(&[("A".to_string(), a), ("B".to_string(), b)]);
        }
        Err(e) => assert_one_line(&e.to_string()),
    }
}

#[track_caller]
pub fn assert_one_line(msg: &str) {
    assert!(!msg.trim_end().contains('\n'), "an error is one line: {msg}");
    assert!(
        msg.len() < 2_000,
        "an error is short: {} bytes: {}",
        msg.len(),
        &msg[..200]
    );
}

/// The first valid corpus result (an HTTP run), as the other side.
pub fn reference() -> RunResult {
    throng_result::load_runs(&corpus().join("valid-http-closed.json"))
        .unwrap()
        .remove(0)
}
