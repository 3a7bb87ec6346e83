//! The HPACK Huffman code (RFC 7541 Appendix B), built at compile time from
//! its code lengths alone: the code is canonical, so within one length the
//! codes are consecutive in symbol order and each length's first code is
//! the previous length's end shifted left.
//!
//! Decoding is table-driven: a 256-entry table answers every code of at
//! most 8 bits (all of the common header characters) from the next byte of
//! input; longer codes are found by canonical decoding, one comparison per
//! length.

use crate::error::HpackError;

/// The code length of each symbol 0..=255 and of EOS (256), from RFC 7541
/// Appendix B.
#[rustfmt::skip]
const LENGTHS: [u8; 257] = [
    // 0..=31: control characters
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    // 32..=63: ' ' ! " # $ % & ' ( ) * + , - . /  0-9 : ; < = > ?
     6, 10, 10, 12, 13,  6,  8, 11, 10, 10,  8, 11,  8,  6,  6,  6,
     5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8, 15,  6, 12, 10,
    // 64..=95: @ A-Z [ \ ] ^ _
    13,  6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,
     7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8, 13, 19, 13, 14,  6,
    // 96..=127: ` a-z { | } ~ DEL
    15,  5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,
     6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7, 15, 11, 14, 13, 28,
    // 128..=255
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    // EOS
    30,
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// Everything decoding and encoding need, derived from `LENGTHS`.
struct Tables {
    /// The code of each symbol, right-aligned.
    codes: [u32; 257],
    /// Symbols ordered by (length, symbol): canonical order.
    sorted: [u16; 257],
    /// For each length: its first code, its number of codes, and the index
    /// in `sorted` of its first symbol.
    first: [u32; MAX_LEN + 1],
    count: [u32; MAX_LEN + 1],
    offset: [u32; MAX_LEN + 1],
    /// For each byte: the symbol whose code (of at most 8 bits) starts the
    /// byte, and that code's length; length 0 when the code is longer.
    fast: [(u16, u8); 256],
}

const fn build() -> Tables {
    let mut t = Tables {
        codes: [0; 257],
        sorted: [0; 257],
        first: [0; MAX_LEN + 1],
        count: [0; MAX_LEN + 1],
        offset: [0; MAX_LEN + 1],
        fast: [(0, 0); 256],
    };
    let mut n = 0;
    let mut len = 1;
    let mut code: u32 = 0;
    while len <= MAX_LEN {
        t.first[len] = code;
        t.offset[len] = n as u32;
        let mut sym = 0;
        while sym < 257 {
            if LENGTHS[sym] as usize == len {
                t.codes[sym] = code;
                t.sorted[n] = sym as u16;
                n += 1;
                t.count[len] += 1;
                code += 1;
            }
            sym += 1;
        }
        code <<= 1;
        len += 1;
    }
    // Short codes: every byte that starts with the code maps to its symbol.
    let mut sym = 0;
    while sym < 257 {
        let len = LENGTHS[sym] as usize;
        if len <= 8 {
            let base = (t.codes[sym] << (8 - len)) as usize;
            let mut i = 0;
            while i < (1 << (8 - len)) {
                t.fast[base + i] = (sym as u16, len as u8);
                i += 1;
            }
        }
        sym += 1;
    }
    t
}

static TABLES: Tables = build();

/// Decodes a Huffman-coded string, appending the bytes to `out`.
///
/// Rejects the EOS symbol inside the string, padding longer than 7 bits and
/// padding that is not the most significant bits of EOS (all ones).
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let t = &TABLES;
    let mut acc: u64 = 0;
    let mut bits: usize = 0;
    for &b in input {
        acc = (acc << 8) | b as u64;
        bits += 8;
        while bits >= MAX_LEN {
            let sym = next_symbol(t, acc, bits).ok_or(HpackError::BadHuffman)?;
            bits -= sym.1;
            push(out, sym.0)?;
        }
    }
    while bits >= 5 {
        match next_symbol(t, acc, bits) {
            Some((sym, len)) => {
                bits -= len;
                push(out, sym)?;
            }
            None => break,
        }
    }
    let mask = (1u64 << bits) - 1;
    if bits > 7 || acc & mask != mask {
        return Err(HpackError::BadHuffman);
    }
    Ok(())
}

fn push(out: &mut Vec<u8>, sym: u16) -> Result<(), HpackError> {
    if sym == EOS {
        return Err(HpackError::BadHuffman);
    }
    out.push(sym as u8);
    Ok(())
}

/// The symbol whose code starts the low `bits` bits of `acc`, and its
/// length; `None` when the code is longer than the bits available.
fn next_symbol(t: &Tables, acc: u64, bits: usize) -> Option<(u16, usize)> {
    let n = bits.min(MAX_LEN);
    // The next `n` bits, left-aligned in a MAX_LEN-bit window, zero-filled.
    let window = ((acc >> (bits - n)) & ((1u64 << n) - 1)) << (MAX_LEN - n);
    let (sym, len) = t.fast[(window >> (MAX_LEN - 8)) as usize];
    if len != 0 {
        return (len as usize <= n).then_some((sym, len as usize));
    }
    for len in 9..=MAX_LEN {
        let code = (window >> (MAX_LEN - len)) as u32;
        let rel = code.wrapping_sub(t.first[len]);
        if code >= t.first[len] && rel < t.count[len] {
            if len > n {
                return None;
            }
            return Some((t.sorted[(t.offset[len] + rel) as usize], len));
        }
    }
    None
}

/// Appends the Huffman coding of `input` to `out` (padded with ones).
/// The encoder of this crate sends strings raw; this serves tests and
/// callers that want the smaller form for a pre-encoded header block.
pub fn encode(input: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits = 0;
    for &b in input {
        let len = LENGTHS[b as usize] as usize;
        acc = (acc << len) | TABLES.codes[b as usize] as u64;
        bits += len;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1 << pad) - 1)) as u8);
    }
}

/// The length in bytes of `input` Huffman-coded.
pub fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_codes_match_the_rfc_table() {
        // Spot checks against RFC 7541 Appendix B's "code as hex" column.
        let want: [(usize, u32); 12] = [
            (0, 0x1ff8),
            (1, 0x7fffd8),
            (10, 0x3ffffffc),
            (b' ' as usize, 0x14),
            (b'/' as usize, 0x18),
            (b'0' as usize, 0x0),
            (b'a' as usize, 0x3),
            (b'z' as usize, 0x7b),
            (b'~' as usize, 0x1ffd),
            (231, 0x7ffff3),
            (255, 0x3ffffee),
            (256, 0x3fffffff),
        ];
        for (sym, code) in want {
            assert_eq!(TABLES.codes[sym], code, "symbol {sym}");
        }
        // The code is complete: the Kraft sum is exactly 1.
        let kraft: u64 = LENGTHS.iter().map(|&l| 1u64 << (30 - l)).sum();
        assert_eq!(kraft, 1 << 30);
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        for chunk in [&all[..], b"www.example.com", b"", b"\xff\x00\x0a\x0d\x16"] {
            let mut enc = Vec::new();
            encode(chunk, &mut enc);
            assert_eq!(enc.len(), encoded_len(chunk));
            let mut dec = Vec::new();
            decode(&enc, &mut dec).unwrap();
            assert_eq!(dec, chunk);
        }
    }

    #[test]
    fn bad_padding_and_eos_are_errors() {
        // 'a' (00011) padded with 0s instead of 1s.
        assert_eq!(decode(&[0b0001_1000], &mut Vec::new()), Err(HpackError::BadHuffman));
        // A full byte of padding (8 ones) after a byte-aligned code.
        assert_eq!(decode(&[0xff], &mut Vec::new()), Err(HpackError::BadHuffman));
        // EOS itself: 30 ones, then 2 ones of padding.
        assert_eq!(decode(&[0xff; 4], &mut Vec::new()), Err(HpackError::BadHuffman));
        // Valid: 'a' then 3 ones.
        let mut out = Vec::new();
        decode(&[0b0001_1111], &mut out).unwrap();
        assert_eq!(out, b"a");
    }

    #[test]
    fn random_input_never_panics() {
        let mut s = 0x9e37_79b9_7f4a_7c15_u64;
        let mut out = Vec::new();
        for _ in 0..5_000 {
            let mut buf = [0u8; 24];
            for b in buf.iter_mut() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *b = s as u8;
            }
            out.clear();
            let _ = decode(&buf, &mut out);
            assert!(out.len() <= buf.len() * 8 / 5);
        }
    }
}
