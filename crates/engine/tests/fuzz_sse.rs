//! Fuzz target (proptest) for the event-stream reader (`throng_engine::sse`).
//! `PROPTEST_CASES=N` runs longer; docs/FUZZING.md lists it.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use throng_engine::sse::{Limits, Reader, TooLarge};

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

const LIMITS: Limits = Limits { line: 64, event: 96 };

/// The events read, as (kind, data, id), and how the reading ended.
type Read = (Vec<(String, String, String)>, Result<(), TooLarge>);

/// Feeds `input` cut at `cuts`.
fn read(input: &[u8], cuts: &[usize]) -> Read {
    let mut reader = Reader::new(LIMITS);
    let mut events = Vec::new();
    let mut at = 0;
    let mut cuts = cuts.to_vec();
    cuts.sort_unstable();
    for cut in cuts.into_iter().chain(std::iter::once(input.len())) {
        let cut = cut.clamp(at, input.len());
        let fed = reader.feed(&input[at..cut], &mut |e| {
            // An event never holds more than its limit.
            assert!(e.data.len() <= LIMITS.event, "{}", e.data.len());
            assert!(e.kind.len() <= LIMITS.line && e.id.len() <= LIMITS.line);
            events.push((e.kind.to_string(), e.data.to_string(), e.id.to_string()));
        });
        at = cut;
        if fed.is_err() {
            return (events, fed);
        }
    }
    reader.finish();
    (events, Ok(()))
}

/// Text made of what the reader looks for.
fn tokens() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            Just(&b"data:"[..]),
            Just(&b"data: "[..]),
            Just(&b"event:"[..]),
            Just(&b"id:"[..]),
            Just(&b"retry:"[..]),
            Just(&b":"[..]),
            Just(&b"\n"[..]),
            Just(&b"\r"[..]),
            Just(&b"\r\n"[..]),
            Just(&b"\0"[..]),
            Just(&b"\xEF\xBB\xBF"[..]),
            Just(&b"\xFF"[..]),
            Just(&b"0123456789abcdef"[..]),
        ],
        0..64,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_never_panic_and_read_the_same_however_split(
        input in proptest::collection::vec(any::<u8>(), 0..512),
        cuts in proptest::collection::vec(0usize..512, 0..16),
    ) {
        let whole = read(&input, &[]);
        let split = read(&input, &cuts);
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn format_tokens_read_the_same_in_one_read_and_byte_by_byte(input in tokens()) {
        let whole = read(&input, &[]);
        let bytewise: Vec<usize> = (0..input.len()).collect();
        prop_assert_eq!(whole, read(&input, &bytewise));
    }
}

#[test]
fn an_endless_line_is_refused_at_its_limit() {
    let mut reader = Reader::new(LIMITS);
    let chunk = [b'x'; 32];
    let mut result = Ok(());
    for _ in 0..1_000 {
        result = reader.feed(&chunk, &mut |_| {});
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(TooLarge::Line(64)));
}
