//! Fuzz targets (proptest) for the MQTT reader: what a broker sends —
//! arbitrary bytes, edits of real packets, any split into reads — must
//! never panic, never hold more than a packet's worth, and read as packets
//! or as `Malformed`. `PROPTEST_CASES=N` runs longer (docs/FUZZING.md).

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use super::codec::{self, MAX_PACKET, Malformed, Next, Packet, Reader, Version};

fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}

/// Real packets a broker sends, to edit.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        vec![0x20, 2, 0, 0],
        vec![0x20, 2, 0, 5],
        vec![0x20, 8, 1, 0x86, 5, 0x12, 0, 2, b'a', b'b'],
        vec![0x90, 3, 0, 1, 1],
        vec![0x90, 4, 0, 1, 0, 0x80],
        vec![0xd0, 0],
        vec![0xe0, 1, 0x8b],
        vec![0x32, 7, 0, 1, b't', 0, 9, b'h', b'i'],
        vec![0x30, 0xff, 0xff, 0xff, 0x7f],
    ]
}

/// Feeds `parts` to a reader, reading every packet it gives as `version`.
/// Returns false when the reader holds more than it may.
fn feed(parts: &[Vec<u8>], version: Version) -> bool {
    let mut r = Reader::default();
    for p in parts {
        r.push(p);
        loop {
            match r.next() {
                Ok(Some(Next::Packet(h, body))) => {
                    let parsed = Packet::parse(h, &body, version);
                    if let Ok(Packet::Publish { qos, .. }) = parsed {
                        assert!(qos < 3);
                    }
                }
                Ok(Some(Next::Skipped(_))) => {}
                Ok(None) => break,
                Err(Malformed) => return true,
            }
        }
        if r.buffered() > MAX_PACKET + 5 + p.len() {
            return false;
        }
    }
    true
}

fn split(bytes: Vec<u8>, cuts: Vec<usize>) -> Vec<Vec<u8>> {
    let mut parts = Vec::new();
    let mut at = 0;
    for c in cuts {
        let end = (at + c).min(bytes.len());
        parts.push(bytes[at..end].to_vec());
        at = end;
    }
    parts.push(bytes[at..].to_vec());
    parts
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_any_split(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                 cuts in proptest::collection::vec(0usize..64, 0..12),
                                 v5 in any::<bool>()) {
        let version = if v5 { Version::V5 } else { Version::V311 };
        let _ = codec::header(&bytes);
        prop_assert!(feed(&split(bytes, cuts), version));
    }

    #[test]
    fn edited_real_packets(pick in 0usize..9, at in 0usize..12, byte in any::<u8>(),
                           cut in 0usize..8, v5 in any::<bool>()) {
        let seeds = seeds();
        let mut stream: Vec<u8> = seeds.concat();
        let base = seeds[..pick].iter().map(Vec::len).sum::<usize>();
        if let Some(b) = stream.get_mut(base + at) {
            *b = byte;
        }
        let version = if v5 { Version::V5 } else { Version::V311 };
        prop_assert!(feed(&split(stream, vec![cut, cut * 3]), version));
    }
}
