//! The shape of the code, held as docs/ARCHITECTURE.md states it: each
//! crate's files import each other down a tree (no import circle, checked
//! by `scripts/circles.py`), no source file over 1,000 lines, no function
//! over 150 lines in the engine, plan and scenario crates.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `crates/*/src`.
fn sources(crates: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("a source folder reads").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("crates"))
        .expect("crates/ reads")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if crates.is_empty() || crates.contains(&name.as_str()) {
            walk(&e.path().join("src"), &mut out);
        }
    }
    out.sort();
    out
}

fn circles(dir: &Path) -> std::process::Output {
    Command::new("python3")
        .arg(root().join("scripts/circles.py"))
        .arg(dir)
        .output()
        .expect("python3 runs scripts/circles.py")
}

#[test]
fn every_crate_s_files_import_down_a_tree() {
    let srcs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    assert!(srcs.len() >= 12, "the workspace's crates: {srcs:?}");
    for src in srcs {
        let out = circles(&src);
        assert!(
            out.status.success(),
            "{}: an import circle (move the shared item down into a leaf module):\n{}{}",
            src.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct B(crate::c::C);\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "pub struct C;\nfn f() -> crate::a::A { crate::a::A }\n",
    )
    .unwrap();
    let out = circles(&src);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for f in ["a/mod.rs", "b.rs", "c.rs"] {
        assert!(said.contains(f), "{f} in {said}");
    }
    // Broken at one edge, it is a tree again.
    std::fs::write(src.join("c.rs"), "pub struct C;\n").unwrap();
    assert!(circles(&src).status.success());
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    let files = sources(&[]);
    assert!(files.len() > 100, "{} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 1000).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "split by concern: {long:?}");
}

/// The functions of `text` longer than `limit` lines: a `fn` line and the
/// `}` at its indentation that closes it.
fn long_functions(text: &str, limit: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let words: Vec<&str> = body.split_whitespace().take(6).collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let before_ok = words[..at]
            .iter()
            .all(|w| w.starts_with("pub") || matches!(*w, "async" | "const" | "unsafe" | "extern"));
        if !before_ok || body.starts_with("//") {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(len) = lines[i + 1..].iter().position(|l| *l == close) {
            let name = body
                .split("fn ")
                .nth(1)
                .unwrap_or("")
                .split(['(', '<'])
                .next()
                .unwrap_or("");
            if len + 2 > limit {
                out.push((name.to_string(), len + 2));
            }
        }
    }
    out
}

#[test]
fn no_function_in_engine_plan_or_scenario_is_over_150_lines() {
    let sample = format!(
        "fn short() {{\n    1;\n}}\n\npub(crate) async fn long() {{\n{}}}\n",
        "    x;\n".repeat(149)
    );
    assert_eq!(long_functions(&sample, 150), [("long".to_string(), 151)]);
    let files = sources(&["engine", "plan", "scenario"]);
    assert!(files.len() > 50, "{} files", files.len());
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            long_functions(&std::fs::read_to_string(f).unwrap(), 150)
                .into_iter()
                .map(move |(name, n)| format!("{}: {name} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "make each a list of steps: {long:?}");
}
