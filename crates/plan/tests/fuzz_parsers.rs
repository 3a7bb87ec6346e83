//! Fuzz targets (proptest) for what people type into flags: durations,
//! rates, execution segments and start times. Each asserts no panic, that
//! an error is one line, and a round trip where one exists. The seed corpus
//! in `tests/corpus/flags.txt` runs as an ordinary test. `PROPTEST_CASES=N`
//! runs longer (docs/FUZZING.md).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use throng_plan::{Fraction, Segment, format_duration, parse_duration, parse_rate, parse_start_at};

/// `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        // Next to this file: tests/NAME.proptest-regressions.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

fn assert_one_line(what: &str, input: &str, e: &str) {
    assert!(!e.is_empty(), "{what}({input:?}): an empty error");
    assert!(
        !e.contains('\n') && !e.contains('\r'),
        "{what}({input:?}): the error is not one line: {e:?}"
    );
}

/// Runs every parser on `s`; none may panic, every error is one line.
fn parse_everything(s: &str) {
    if let Err(e) = parse_duration(s) {
        assert_one_line("parse_duration", s, &e.to_string());
    }
    if let Err(e) = parse_rate(s) {
        assert_one_line("parse_rate", s, &e.to_string());
    }
    if let Err(e) = parse_start_at(s) {
        assert_one_line("parse_start_at", s, &e.to_string());
    }
    let _ = Fraction::parse(s);
    if let Err(e) = Segment::parse(s, None) {
        assert_one_line("Segment::parse", s, &e.to_string());
    }
    if let Err(e) = Segment::parse("0:1", Some(s)) {
        assert_one_line("Segment::parse sequence", s, &e.to_string());
    }
    if let Some((a, b)) = s.split_once(' ')
        && let Err(e) = Segment::parse(a, Some(b))
    {
        assert_one_line("Segment::parse", s, &e.to_string());
    }
}

/// Text that looks like what the parsers take, to get past their first
/// checks more often than random text does.
fn flag_like() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[0-9]{1,25}",
            Just(".".to_string()),
            Just("/".to_string()),
            Just(":".to_string()),
            Just(",".to_string()),
            Just("%".to_string()),
            Just("-".to_string()),
            Just("+".to_string()),
            Just("e".to_string()),
            Just("T".to_string()),
            Just("Z".to_string()),
            prop::sample::select(vec![
                "us", "µs", "ms", "s", "m", "h", "/s", "/m", "/h", "inf", "NaN", " "
            ])
            .prop_map(str::to_string),
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

#[test]
fn corpus_inputs_never_panic_and_fail_in_one_line() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/flags.txt")).unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        parse_everything(line);
        n += 1;
    }
    assert!(n >= 40, "the corpus has {n} lines");
    // And with the characters a line cannot hold.
    for s in ["1s\n", "\n", "10\r\n/s", "1/4\n:1/2", "2026-11-22T10:00:00Z\n"] {
        parse_everything(s);
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_text_never_panics(s in any::<String>()) {
        parse_everything(&s);
    }

    #[test]
    fn flag_like_text_never_panics(s in flag_like()) {
        parse_everything(&s);
    }

    /// parse(format(d)) == d: exactly to the microsecond below a second,
    /// and to the millisecond above (the format keeps three decimals).
    #[test]
    fn durations_round_trip(us in 0u64..1_000_000, ms in 0u64..1_000_000_000) {
        let d = Duration::from_micros(us);
        prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{}", format_duration(d));
        let d = Duration::from_millis(ms);
        prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d), "{}", format_duration(d));
    }

    /// Units add up: `XhYmZs` is X hours, Y minutes and Z seconds.
    #[test]
    fn compound_durations_add_up(h in 0u64..1000, m in 0u64..600, s in 0u64..600, ms in 0u64..1000) {
        let text = format!("{h}h{m}m{s}s{ms}ms");
        let expected = Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms);
        prop_assert_eq!(parse_duration(&text), Ok(expected));
    }

    /// A rate per minute or hour is the same rate per second.
    #[test]
    fn rates_agree_across_units(n in 1u64..1_000_000_000) {
        let per_s = parse_rate(&format!("{n}/s"));
        let per_m = parse_rate(&format!("{}/m", n * 60));
        let per_h = parse_rate(&format!("{}/h", n * 3600));
        if n as f64 > 1e8 {
            prop_assert!(per_s.is_err() && per_m.is_err() && per_h.is_err());
        } else {
            let r = per_s.unwrap();
            prop_assert_eq!(r, n as f64);
            prop_assert!((per_m.unwrap() - r).abs() <= r * 1e-12);
            prop_assert!((per_h.unwrap() - r).abs() <= r * 1e-12);
        }
    }

    /// A segment printed and parsed again is the same segment, and the
    /// segments of a sequence own every iteration exactly once.
    #[test]
    fn segments_round_trip_and_partition(cuts in prop::collection::btree_set(1u64..1000, 1..6), den in 1000u64..1001, pick in any::<usize>()) {
        let points: Vec<String> = std::iter::once("0".to_string())
            .chain(cuts.iter().map(|c| format!("{c}/{den}")))
            .chain(std::iter::once("1".to_string()))
            .collect();
        let seq = points.join(",");
        let i = pick % (points.len() - 1);
        let seg = Segment::parse(&format!("{}:{}", points[i], points[i + 1]), Some(&seq)).unwrap();
        let printed = seg.sequence().iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        let again = Segment::parse(&format!("{}:{}", seg.from(), seg.to()), Some(&printed)).unwrap();
        prop_assert_eq!(&again, &seg);
        let siblings = seg.siblings();
        prop_assert_eq!(siblings.len(), points.len() - 1);
        for it in 0..200u64 {
            prop_assert_eq!(siblings.iter().filter(|s| s.owns(it)).count(), 1, "iteration {}", it);
        }
    }

    /// Unix milliseconds are read as they are.
    #[test]
    fn unix_milliseconds_are_read_back(ms in 1_000_000_000_000u64..4_000_000_000_000) {
        prop_assert_eq!(parse_start_at(&ms.to_string()).unwrap(), ms);
    }
}
