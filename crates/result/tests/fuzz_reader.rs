//! Fuzzing the result reader (proptest): valid results from the corpus,
//! changed in one to four places — numbers replaced by extremes (0, -1,
//! ±1e308, 2^64 - 1, a tiny float, "NaN" as a string), strings by 70,000
//! characters, arrays grown to thousands of copies, histograms by random
//! bytes (bare, behind a V2 cookie, or compressed) — are loaded, reported,
//! compared and merged. Nothing may panic; every refusal is one line.
//!
//! `PROPTEST_CASES=20000 cargo test -p throng-result --release --test
//! fuzz_reader` fuzzes longer (docs/RESULTS.md says how long it ran and what
//! it found).

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write as _;

use base64::Engine as _;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

use common::{exercise, files, reference};

/// What one change does.
#[derive(Clone, Debug)]
enum Change {
    /// A number becomes this.
    Number(Value),
    /// A string becomes 70,000 characters.
    LongString,
    /// A string (a histogram, usually) becomes base64 of these bytes,
    /// `framing` 0: bare, 1: behind the V2 cookie, 2: V2 compressed.
    Bytes(Vec<u8>, u8),
    /// An array becomes `n` copies of its first element (or of 0).
    Grow(usize),
    /// Any node becomes this.
    Replace(Value),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => prop_oneof![
            Just(Value::from(0)),
            Just(Value::from(-1)),
            Just(Value::from(1e308)),
            Just(Value::from(-1e308)),
            Just(Value::from(u64::MAX)),
            Just(Value::from(i64::MIN)),
            Just(Value::from(5e-324)),
            Just(Value::from(1u64 << 53)),
            Just(Value::from("NaN")),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ]
        .prop_map(Change::Number),
        1 => Just(Change::LongString),
        3 => (prop::collection::vec(any::<u8>(), 0..120), 0u8..3).prop_map(|(b, f)| Change::Bytes(b, f)),
        1 => (0usize..2_000).prop_map(Change::Grow),
        1 => prop_oneof![
            Just(Value::Null),
            Just(Value::Bool(true)),
            Just(Value::Object(Default::default())),
            Just(Value::Array(Vec::new())),
        ]
        .prop_map(Change::Replace),
    ]
}

/// JSON pointers of every node of `v` for which `keep` holds.
fn pointers(v: &Value, keep: &dyn Fn(&Value) -> bool) -> Vec<String> {
    fn walk(v: &Value, at: String, keep: &dyn Fn(&Value) -> bool, out: &mut Vec<String>) {
        if keep(v) && !at.is_empty() {
            out.push(at.clone());
        }
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    walk(
                        c,
                        format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                        keep,
                        out,
                    );
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    walk(c, format!("{at}/{i}"), keep, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, String::new(), keep, &mut out);
    out
}

fn bytes_text(bytes: &[u8], framing: u8) -> String {
    let framed = match framing {
        0 => bytes.to_vec(),
        1 => [&0x1c84_9313u32.to_be_bytes()[..], bytes].concat(),
        _ => {
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(&0x1c84_9313u32.to_be_bytes()).unwrap();
            z.write_all(bytes).unwrap();
            let body = z.finish().unwrap();
            [
                &0x1c84_9314u32.to_be_bytes()[..],
                &(body.len() as u32).to_be_bytes(),
                &body,
            ]
            .concat()
        }
    };
    base64::engine::general_purpose::STANDARD.encode(framed)
}

/// Applies `c` at the node `pick` chooses among those it can change.
fn apply(doc: &mut Value, pick: &Index, c: &Change) {
    let keep: &dyn Fn(&Value) -> bool = match c {
        Change::Number(_) => &Value::is_number,
        Change::LongString | Change::Bytes(..) => &Value::is_string,
        Change::Grow(_) => &Value::is_array,
        Change::Replace(_) => &|_| true,
    };
    let at = pointers(doc, keep);
    if at.is_empty() {
        return;
    }
    let node = doc.pointer_mut(pick.get(&at).as_str()).unwrap();
    *node = match c {
        Change::Number(v) | Change::Replace(v) => v.clone(),
        Change::LongString => Value::from("n".repeat(70_000)),
        Change::Bytes(b, f) => Value::from(bytes_text(b, *f)),
        Change::Grow(n) => {
            let first = node
                .as_array()
                .and_then(|a| a.first().cloned())
                .unwrap_or(Value::from(0));
            Value::Array(vec![first; *n])
        }
    };
}

fn seeds() -> Vec<Value> {
    files("valid-")
        .iter()
        .map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn changed_results_never_panic_and_refusals_are_one_line(
        seed in any::<Index>(),
        changes in prop::collection::vec((any::<Index>(), change()), 1..5),
        as_set in any::<bool>(),
    ) {
        let seeds = seeds();
        let mut doc = seed.get(&seeds).clone();
        for (pick, c) in &changes {
            apply(&mut doc, pick, c);
        }
        if as_set {
            doc = serde_json::json!({"schema": "throng.result-set/v1", "runs": [seeds[0].clone(), doc]});
        }
        let _ = exercise(&serde_json::to_vec(&doc).unwrap(), &reference());
    }

    #[test]
    fn histograms_of_random_bytes_are_refused_or_read(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        framing in 0u8..3,
        which in any::<Index>(),
    ) {
        let mut doc = seeds()[0].clone();
        let hdrs = pointers(&doc, &|v| v.get("hdr").is_some_and(Value::is_string));
        let at = format!("{}/hdr", which.get(&hdrs).as_str());
        *doc.pointer_mut(&at).unwrap() = Value::from(bytes_text(&bytes, framing));
        let _ = exercise(&serde_json::to_vec(&doc).unwrap(), &reference());
    }
}
