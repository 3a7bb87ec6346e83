//! RFC 7541 Appendix C, every example, plus hostile blocks.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn decode_all(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
    let mut got = Vec::new();
    d.decode(block, 1 << 20, &mut |n, v| {
        got.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ))
    })?;
    Ok(got)
}

fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

/// The dynamic table, newest first, as (name, value).
fn table(d: &Decoder) -> Vec<(String, String)> {
    d.table
        .entries
        .iter()
        .map(|e| {
            (
                String::from_utf8(e.name().to_vec()).unwrap(),
                String::from_utf8(e.value().to_vec()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn c1_integers() {
    let mut out = Vec::new();
    encode_int(&mut out, 0, 5, 10);
    assert_eq!(out, [0b0000_1010]);
    out.clear();
    encode_int(&mut out, 0, 5, 1337);
    assert_eq!(out, [0b0001_1111, 0b1001_1010, 0b0000_1010]);
    assert_eq!(decode_int(&out, &mut 0, 5), Ok(1337));
    out.clear();
    encode_int(&mut out, 0, 8, 42);
    assert_eq!(out, [42]);
    assert_eq!(decode_int(&out, &mut 0, 8), Ok(42));
}

#[test]
fn c2_single_representations() {
    // C.2.1 literal with indexing.
    let mut d = Decoder::new(4096);
    let got = decode_all(
        &mut d,
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
    )
    .unwrap();
    assert_eq!(got, fields(&[("custom-key", "custom-header")]));
    assert_eq!(d.table_size(), 55);
    assert_eq!(table(&d), fields(&[("custom-key", "custom-header")]));
    // C.2.2 literal without indexing.
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, &hex("040c 2f73 616d 706c 652f 7061 7468")).unwrap();
    assert_eq!(got, fields(&[(":path", "/sample/path")]));
    assert_eq!(d.table_len(), 0);
    // C.2.3 literal never indexed.
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, &hex("1008 7061 7373 776f 7264 0673 6563 7265 74")).unwrap();
    assert_eq!(got, fields(&[("password", "secret")]));
    assert_eq!(d.table_len(), 0);
    // C.2.4 indexed.
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, &hex("82")).unwrap();
    assert_eq!(got, fields(&[(":method", "GET")]));
    assert_eq!(d.table_len(), 0);
}

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, &hex(blocks[0])).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com")
        ])
    );
    assert_eq!(table(&d), fields(&[(":authority", "www.example.com")]));
    assert_eq!(d.table_size(), 57);
    let got = decode_all(&mut d, &hex(blocks[1])).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache")
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[("cache-control", "no-cache"), (":authority", "www.example.com")])
    );
    assert_eq!(d.table_size(), 110);
    let got = decode_all(&mut d, &hex(blocks[2])).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value")
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com")
        ])
    );
    assert_eq!(d.table_size(), 164);
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
    let date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
    let loc = "https://www.example.com";
    let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    let got = decode_all(&mut d, &hex(blocks[0])).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", loc)
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            ("location", loc),
            ("date", date1),
            ("cache-control", "private"),
            (":status", "302")
        ])
    );
    assert_eq!(d.table_size(), 222);
    let got = decode_all(&mut d, &hex(blocks[1])).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", loc)
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            (":status", "307"),
            ("location", loc),
            ("date", date1),
            ("cache-control", "private")
        ])
    );
    assert_eq!(d.table_size(), 222);
    let got = decode_all(&mut d, &hex(blocks[2])).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", date2),
            ("location", loc),
            ("content-encoding", "gzip"),
            ("set-cookie", cookie)
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[("set-cookie", cookie), ("content-encoding", "gzip"), ("date", date2)])
    );
    assert_eq!(d.table_size(), 215);
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn encoder_output_decodes_to_the_same_fields() {
    let mut block = Vec::new();
    let extra: [(&[u8], &[u8]); 4] = [
        (b"User-Agent", b"throng"),
        (b"accept-encoding", b"gzip, deflate"),
        (b"x-custom", b"1"),
        (b"authorization", b"Bearer s3cret"),
    ];
    encode_request(&mut block, b"GET", b"http", b"127.0.0.1:8080", b"/", &extra);
    // :method GET, :scheme http, :path / are whole static entries: one byte each.
    assert_eq!(block[0], 0x82);
    assert_eq!(block[1], 0x86);
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, &block).unwrap();
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "127.0.0.1:8080"),
            (":path", "/"),
            ("user-agent", "throng"),
            ("accept-encoding", "gzip, deflate"),
            ("x-custom", "1"),
            ("authorization", "Bearer s3cret"),
        ])
    );
    // The encoder never indexes: the decoder's table stays empty.
    assert_eq!(d.table_len(), 0);
    // Long values take multi-byte lengths.
    let long = vec![b'x'; 1000];
    let mut block = Vec::new();
    encode_field(&mut block, b"x-long", &long);
    let got = decode_all(&mut Decoder::new(4096), &block).unwrap();
    assert_eq!(got[0].1.len(), 1000);
}

#[test]
fn size_updates_evict_and_are_bounded() {
    let mut d = Decoder::new(256);
    decode_all(
        &mut d,
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
    )
    .unwrap();
    assert_eq!(d.table_len(), 1);
    // Size update to 0 (0x20) empties the table.
    decode_all(&mut d, &[0x20]).unwrap();
    assert_eq!(d.table_len(), 0);
    // Above the limit: refused.
    let mut big = Vec::new();
    encode_int(&mut big, 0x20, 5, 257);
    assert_eq!(
        decode_all(&mut d, &big),
        Err(HpackError::TableSizeTooLarge { size: 257, max: 256 })
    );
    // A table size bomb: 2^32 - 1.
    let mut bomb = Vec::new();
    encode_int(&mut bomb, 0x20, 5, u32::MAX as usize);
    assert!(matches!(
        decode_all(&mut d, &bomb),
        Err(HpackError::TableSizeTooLarge { .. })
    ));
    // An update after a field.
    assert_eq!(decode_all(&mut d, &[0x82, 0x20]), Err(HpackError::LateSizeUpdate));
    // A lowered limit evicts at once; a size update is welcome but not required.
    let mut d = Decoder::new(4096);
    decode_all(
        &mut d,
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
    )
    .unwrap();
    d.set_limit(40);
    assert_eq!(d.table_len(), 0);
    assert_eq!(decode_all(&mut d, &[0xbe]), Err(HpackError::BadIndex(62)));
    assert_eq!(decode_all(&mut d, &[0x82]).unwrap(), fields(&[(":method", "GET")]));
    assert!(matches!(
        decode_all(&mut d, &[0x3f, 0x45]),
        Err(HpackError::TableSizeTooLarge { size: 100, max: 40 })
    ));
}

#[test]
fn entries_larger_than_the_table_empty_it() {
    let mut d = Decoder::new(64);
    // A field of 10 + 13 + 32 = 55 bytes fits; a second one evicts the first.
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    decode_all(&mut d, &block).unwrap();
    decode_all(&mut d, &block).unwrap();
    assert_eq!((d.table_len(), d.table_size()), (1, 55));
    // Literal with indexing of a 100-byte value: larger than 64, empties the table.
    let mut b = vec![0x40, 0x01, b'x'];
    encode_int(&mut b, 0, 7, 100);
    b.extend_from_slice(&[b'v'; 100]);
    let got = decode_all(&mut d, &b).unwrap();
    assert_eq!(got[0].1.len(), 100);
    assert_eq!((d.table_len(), d.table_size()), (0, 0));
}

#[test]
fn hostile_blocks_are_errors() {
    let mut d = Decoder::new(4096);
    // Integer overflow: a continuation that never ends, and one past u32.
    assert_eq!(
        decode_all(&mut d, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        Err(HpackError::IntegerOverflow)
    );
    assert_eq!(
        decode_all(&mut d, &[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
        Err(HpackError::IntegerOverflow)
    );
    assert_eq!(
        decode_all(&mut d, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(HpackError::IntegerOverflow)
    );
    // Index 0 and an index past both tables.
    assert_eq!(decode_all(&mut d, &[0x80]), Err(HpackError::BadIndex(0)));
    assert_eq!(decode_all(&mut d, &[0xbf]), Err(HpackError::BadIndex(63)));
    // A string longer than the block (2^31 bytes claimed).
    let mut b = vec![0x00];
    encode_int(&mut b, 0, 7, 1 << 31);
    assert_eq!(decode_all(&mut d, &b), Err(HpackError::Truncated));
    // A block cut inside a field.
    assert_eq!(decode_all(&mut d, &[0x40, 0x05, b'a']), Err(HpackError::Truncated));
    assert_eq!(decode_all(&mut d, &[0x1f]), Err(HpackError::Truncated));
    // Huffman with bad padding inside a field.
    assert_eq!(decode_all(&mut d, &[0x04, 0x81, 0x00]), Err(HpackError::BadHuffman));
}

#[test]
fn header_lists_over_the_limit_stop_decoding() {
    let mut d = Decoder::new(4096);
    let mut block = Vec::new();
    for _ in 0..1000 {
        encode_field(&mut block, b"x-a", b"0123456789");
    }
    let mut seen = 0;
    let r = d.decode(&block, 1000, &mut |_, _| seen += 1);
    assert_eq!(r, Err(HpackError::HeaderListTooLarge { max: 1000 }));
    // Each field counts 3 + 10 + 32 = 45: 22 fit in 1000.
    assert_eq!(seen, 22);
}

#[test]
fn random_blocks_never_panic() {
    let mut s = 0x1234_5678_9abc_def1_u64;
    for _ in 0..20_000 {
        let mut buf = [0u8; 32];
        for b in buf.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = s as u8;
        }
        let mut d = Decoder::new(256);
        let _ = d.decode(&buf, 4096, &mut |_, _| {});
        assert!(d.table_size() <= 256);
    }
}

#[test]
fn repeated_huffman_strings_decode_the_same_from_memory() {
    // Literals without indexing (name from the static table), their values
    // Huffman-coded: more distinct values than the decoder keeps, longer
    // ones than it keeps, and each sent again in another order.
    let literal = |value: &str| {
        let mut coded = Vec::new();
        huffman::encode(value.as_bytes(), &mut coded);
        let mut b = vec![0x0f, 0x0d]; // index 28 (content-length) with the 4-bit prefix
        encode_int(&mut b, 0x80, 7, coded.len());
        b.extend_from_slice(&coded);
        b
    };
    let long = "x".repeat(200);
    let values: Vec<String> = (0..9)
        .map(|i| format!("value-{i}-{}", "ab".repeat(i)))
        .chain([long])
        .collect();
    let mut d = Decoder::new(4096);
    for round in 0..3 {
        for i in 0..values.len() {
            let v = &values[(i * 7 + round) % values.len()];
            assert_eq!(
                decode_all(&mut d, &literal(v)).unwrap(),
                fields(&[("content-length", v)]),
                "round {round}"
            );
        }
    }
    // A corrupt string is an error even after its good twin was kept.
    let good = literal("value-1-ab");
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] = 0x00; // padding that is not all ones
    assert!(decode_all(&mut d, &good).is_ok());
    assert!(decode_all(&mut d, &bad).is_err());
    assert_eq!(d.table_len(), 0, "no literal here is indexed");
}
