//! The state machine against a scripted server: frames built with this
//! crate's encoders, fed whole, cut, and byte by byte.

use super::*;
use crate::frame::{Frame, Parsed};

/// Events as owned values, for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Response(u32, u16, Vec<(String, String)>),
    Data(u32, Vec<u8>),
    Trailers(u32, Vec<(String, String)>),
    End(u32),
    Reset(u32, ErrorCode, bool),
    GoAway(u32, ErrorCode),
    CutOff(u32),
    Settings,
    SettingsAcked,
    PingAck([u8; 8]),
    Window(u32),
}

fn owned(h: &Headers<'_>) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

fn feed(c: &mut Conn, bytes: &[u8]) -> Result<Vec<Ev>, ConnError> {
    let mut evs = Vec::new();
    c.receive(bytes, &mut |e| {
        evs.push(match e {
            Event::Response {
                stream,
                status,
                headers,
            } => Ev::Response(stream, status, owned(&headers)),
            Event::Data { stream, data } => Ev::Data(stream, data.to_vec()),
            Event::Trailers { stream, headers } => Ev::Trailers(stream, owned(&headers)),
            Event::StreamEnd { stream } => Ev::End(stream),
            Event::StreamReset { stream, code, by_peer } => Ev::Reset(stream, code, by_peer),
            Event::GoAway { last_stream, code, .. } => Ev::GoAway(last_stream, code),
            Event::CutOff { stream } => Ev::CutOff(stream),
            Event::Settings(_) => Ev::Settings,
            Event::SettingsAcked => Ev::SettingsAcked,
            Event::PingAck { data } => Ev::PingAck(data),
            Event::WindowUpdate { stream } => Ev::Window(stream),
        })
    })?;
    Ok(evs)
}

/// The frames of the client's pending output (after the preface), as
/// owned (type, flags-ish summary) and drained.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    Settings(Vec<(u16, u32)>),
    SettingsAck,
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        len: usize,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
    },
    Data {
        stream: u32,
        len: usize,
        end_stream: bool,
    },
    Window(u32, u32),
    Ping(bool, [u8; 8]),
    Rst(u32, ErrorCode),
    GoAway(u32, ErrorCode),
}

fn drain(c: &mut Conn) -> Vec<Out> {
    let mut buf = c.pending_output().to_vec();
    c.consume_output(buf.len());
    if buf.starts_with(PREFACE) {
        buf.drain(..PREFACE.len());
    }
    let mut at = 0;
    let mut out = Vec::new();
    while at < buf.len() {
        let Ok(Parsed::Frame(f, n)) = frame::parse(&buf[at..], frame::MAX_MAX_FRAME_SIZE) else {
            panic!("client wrote a bad frame at {at}")
        };
        at += n;
        out.push(match f {
            Frame::Settings { ack: false, params } => Out::Settings(frame::settings_iter(params).collect()),
            Frame::Settings { ack: true, .. } => Out::SettingsAck,
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                block,
                ..
            } => Out::Headers {
                stream,
                end_stream,
                end_headers,
                len: block.len(),
            },
            Frame::Continuation {
                stream, end_headers, ..
            } => Out::Continuation { stream, end_headers },
            Frame::Data {
                stream,
                data,
                end_stream,
                ..
            } => Out::Data {
                stream,
                len: data.len(),
                end_stream,
            },
            Frame::WindowUpdate { stream, increment } => Out::Window(stream, increment),
            Frame::Ping { ack, data } => Out::Ping(ack, data),
            Frame::RstStream { stream, code } => Out::Rst(stream, ErrorCode(code)),
            Frame::GoAway { last_stream, code, .. } => Out::GoAway(last_stream, ErrorCode(code)),
            other => panic!("unexpected client frame {other:?}"),
        });
    }
    out
}

fn server_settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::encode_settings(&mut b, params);
    b
}

fn response(stream: u32, status: &str, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
    let mut block = Vec::new();
    hpack::encode_field(&mut block, b":status", status.as_bytes());
    for (n, v) in fields {
        hpack::encode_field(&mut block, n.as_bytes(), v.as_bytes());
    }
    let mut b = Vec::new();
    frame::encode_headers(&mut b, stream, &block, end_stream, frame::DEFAULT_MAX_FRAME_SIZE);
    b
}

fn data(stream: u32, bytes: &[u8], end_stream: bool) -> Vec<u8> {
    let mut b = Vec::new();
    frame::encode_data(&mut b, stream, bytes, end_stream);
    b
}

fn get_block() -> Vec<u8> {
    let mut b = Vec::new();
    hpack::encode_request(&mut b, b"GET", b"http", b"localhost", b"/", &[]);
    b
}

/// A connection past the SETTINGS exchange, its output drained.
fn ready(ours: Settings, peer: &[(u16, u32)]) -> Conn {
    let mut c = Conn::new(ours);
    let mut input = server_settings(peer);
    frame::encode_settings_ack(&mut input);
    assert_eq!(feed(&mut c, &input).unwrap(), [Ev::Settings, Ev::SettingsAcked]);
    drain(&mut c);
    c
}

#[test]
fn preface_settings_and_ack() {
    let mut c = Conn::new(Settings {
        connection_window: 1 << 20,
        ..Settings::default()
    });
    assert!(c.pending_output().starts_with(PREFACE));
    let out = drain(&mut c);
    assert_eq!(
        out,
        [
            Out::Settings(vec![
                (setting::ENABLE_PUSH, 0),
                (setting::HEADER_TABLE_SIZE, 4096),
                (setting::INITIAL_WINDOW_SIZE, 65_535),
                (setting::MAX_FRAME_SIZE, 16_384),
                (setting::MAX_HEADER_LIST_SIZE, 16_384),
            ]),
            Out::Window(0, (1 << 20) - 65_535),
        ]
    );
    let evs = feed(
        &mut c,
        &server_settings(&[(setting::MAX_CONCURRENT_STREAMS, 7), (0x99, 1)]),
    )
    .unwrap();
    assert_eq!(evs, [Ev::Settings]);
    assert_eq!(c.peer_settings().max_concurrent_streams, 7);
    assert_eq!(c.max_streams(), 7);
    assert_eq!(drain(&mut c), [Out::SettingsAck]);
}

#[test]
fn first_frame_must_be_settings() {
    let mut c = Conn::new(Settings::default());
    drain(&mut c);
    let mut ping = Vec::new();
    frame::encode_ping(&mut ping, [0; 8], false);
    let e = feed(&mut c, &ping).unwrap_err();
    assert_eq!(e.code(), ErrorCode::PROTOCOL_ERROR);
    assert!(c.is_closed());
    assert_eq!(drain(&mut c), [Out::GoAway(0, ErrorCode::PROTOCOL_ERROR)]);
    assert_eq!(feed(&mut c, &ping), Err(ConnError::Closed));
    assert_eq!(c.start_request(&get_block(), true), Err(SendError::Closed));
}

#[test]
fn a_get_and_its_response_whole_and_byte_by_byte() {
    let mut input = response(1, "200", &[("content-type", "text/plain")], false);
    input.extend(data(1, b"hel", false));
    input.extend(data(1, b"lo", true));
    let want = vec![
        Ev::Response(
            1,
            200,
            vec![
                (":status".into(), "200".into()),
                ("content-type".into(), "text/plain".into()),
            ],
        ),
        Ev::Data(1, b"hel".to_vec()),
        Ev::Data(1, b"lo".to_vec()),
        Ev::End(1),
    ];
    for step in [input.len(), 1, 2, 7, 10] {
        let mut c = ready(Settings::default(), &[]);
        let id = c.start_request(&get_block(), true).unwrap();
        assert_eq!(id, 1);
        let out = drain(&mut c);
        assert!(matches!(
            out[..],
            [Out::Headers {
                stream: 1,
                end_stream: true,
                end_headers: true,
                ..
            }]
        ));
        assert_eq!(c.open_streams(), 1);
        let mut evs = Vec::new();
        for chunk in input.chunks(step) {
            evs.extend(feed(&mut c, chunk).unwrap());
        }
        assert_eq!(evs, want, "step {step}");
        assert_eq!(c.open_streams(), 0);
        c.shrink();
        assert_eq!(c.start_request(&get_block(), true), Ok(3));
    }
}

#[test]
fn concurrency_follows_the_servers_limit() {
    let mut c = ready(Settings::default(), &[(setting::MAX_CONCURRENT_STREAMS, 2)]);
    assert_eq!(c.start_request(&get_block(), true), Ok(1));
    assert_eq!(c.start_request(&get_block(), true), Ok(3));
    assert!(!c.can_start_request());
    assert_eq!(c.start_request(&get_block(), true), Err(SendError::StreamLimit(2)));
    feed(&mut c, &response(1, "204", &[], true)).unwrap();
    assert!(c.can_start_request());
    assert_eq!(c.start_request(&get_block(), true), Ok(5));
    // Our own cap applies as well.
    let mut c = ready(
        Settings {
            max_concurrent_streams: 1,
            ..Settings::default()
        },
        &[],
    );
    c.start_request(&get_block(), true).unwrap();
    assert_eq!(c.start_request(&get_block(), true), Err(SendError::StreamLimit(1)));
}

#[test]
fn request_bodies_wait_for_window() {
    let mut c = ready(Settings::default(), &[(setting::INITIAL_WINDOW_SIZE, 100)]);
    let id = c.start_request(&get_block(), false).unwrap();
    let body = vec![b'x'; 1000];
    assert_eq!(c.send_capacity(id), 100);
    assert_eq!(c.send_data(id, &body, true), Ok(100));
    assert_eq!(c.send_data(id, &body[100..], true), Ok(0));
    let out = drain(&mut c);
    assert_eq!(
        out[1],
        Out::Data {
            stream: 1,
            len: 100,
            end_stream: false
        }
    );
    let mut wu = Vec::new();
    frame::encode_window_update(&mut wu, id, 10_000);
    assert_eq!(feed(&mut c, &wu).unwrap(), [Ev::Window(1)]);
    assert_eq!(c.send_data(id, &body[100..], true), Ok(900));
    assert_eq!(
        drain(&mut c),
        [Out::Data {
            stream: 1,
            len: 900,
            end_stream: true
        }]
    );
    assert_eq!(c.send_data(id, b"more", false), Err(SendError::NotSendable(1)));
    // A SETTINGS change moves open streams' windows.
    let id = c.start_request(&get_block(), false).unwrap();
    feed(&mut c, &server_settings(&[(setting::INITIAL_WINDOW_SIZE, 50)])).unwrap();
    assert_eq!(c.send_capacity(id), 50);
    // Frames follow the server's max frame size; the connection window caps all.
    let mut c = ready(Settings::default(), &[(setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
    let id = c.start_request(&get_block(), false).unwrap();
    let body = vec![0u8; 100_000];
    assert_eq!(c.send_data(id, &body, true), Ok(65_535));
    let out = drain(&mut c);
    let sizes: Vec<usize> = out
        .iter()
        .filter_map(|o| {
            if let Out::Data { len, .. } = o {
                Some(*len)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(sizes, [16_384, 16_384, 16_384, 16_383]);
    // An empty end of stream needs no window.
    assert_eq!(c.send_data(id, &[], true), Ok(0));
    assert_eq!(
        drain(&mut c),
        [Out::Data {
            stream: 1,
            len: 0,
            end_stream: true
        }]
    );
}

#[test]
fn long_downloads_give_credit_back() {
    let mut c = ready(Settings::default(), &[]);
    let id = c.start_request(&get_block(), true).unwrap();
    drain(&mut c);
    feed(&mut c, &response(id, "200", &[], false)).unwrap();
    let chunk = vec![7u8; 16_384];
    let mut got = 0;
    let (mut conn_credit, mut stream_credit) = (0u64, 0u64);
    // 1 MiB: sixteen times the initial windows, so a client that never gave
    // credit back would stall (here: fail with FLOW_CONTROL_ERROR).
    for _ in 0..64 {
        for e in feed(&mut c, &data(id, &chunk, false)).unwrap() {
            if let Ev::Data(_, d) = e {
                got += d.len();
            }
        }
        for o in drain(&mut c) {
            match o {
                Out::Window(0, n) => conn_credit += n as u64,
                Out::Window(s, n) if s == id => stream_credit += n as u64,
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(got, 1 << 20);
    // Credit comes back in half-window steps: all but the last partial step.
    assert!(conn_credit > (1 << 20) - 65_535, "{conn_credit}");
    assert!(stream_credit > (1 << 20) - 65_535, "{stream_credit}");
    assert_eq!(feed(&mut c, &data(id, b"", true)).unwrap(), [Ev::End(id)]);
}

#[test]
fn flow_control_violations() {
    // A stream window of 1000: 2000 bytes reset the stream, not the connection.
    let mut c = ready(
        Settings {
            initial_window_size: 1000,
            ..Settings::default()
        },
        &[],
    );
    let id = c.start_request(&get_block(), true).unwrap();
    drain(&mut c);
    feed(&mut c, &response(id, "200", &[], false)).unwrap();
    let evs = feed(&mut c, &data(id, &[0; 2000], false)).unwrap();
    assert_eq!(evs, [Ev::Reset(id, ErrorCode::FLOW_CONTROL_ERROR, false)]);
    assert_eq!(drain(&mut c), [Out::Rst(id, ErrorCode::FLOW_CONTROL_ERROR)]);
    // Window overflow from the server's WINDOW_UPDATE on the connection.
    let mut wu = Vec::new();
    frame::encode_window_update(&mut wu, 0, frame::MAX_WINDOW);
    assert_eq!(feed(&mut c, &wu).unwrap_err().code(), ErrorCode::FLOW_CONTROL_ERROR);
    // DATA beyond the connection window: credit goes back as data arrives, so
    // only one frame larger than the whole window (65,535) can overflow it.
    let ours = Settings {
        initial_window_size: frame::MAX_WINDOW,
        max_frame_size: 100_000,
        ..Settings::default()
    };
    let mut c = ready(ours, &[]);
    let id = c.start_request(&get_block(), true).unwrap();
    feed(&mut c, &response(id, "200", &[], false)).unwrap();
    let mut big = Vec::new();
    frame::encode_header(&mut big, 65_535, frame::TYPE_DATA, 0, id);
    big.resize(9 + 65_535, 0);
    assert_eq!(feed(&mut c, &big).unwrap(), [Ev::Data(id, vec![0; 65_535])]);
    // Padding counts: 8 bytes of data and 65,528 of padding break the window too.
    let mut padded = Vec::new();
    frame::encode_header(&mut padded, 65_537, frame::TYPE_DATA, frame::FLAG_PADDED, id);
    padded.push(255);
    padded.resize(9 + 65_537, 0);
    let evs = feed(&mut c, &padded[..9 + 30_000]).unwrap();
    assert_eq!(evs, []);
    assert_eq!(
        feed(&mut c, &padded[9 + 30_000..]).unwrap_err().code(),
        ErrorCode::FLOW_CONTROL_ERROR
    );
}

#[test]
fn pings_both_ways() {
    let mut c = ready(Settings::default(), &[]);
    let mut ping = Vec::new();
    frame::encode_ping(&mut ping, *b"serverPI", false);
    assert_eq!(feed(&mut c, &ping).unwrap(), []);
    assert_eq!(drain(&mut c), [Out::Ping(true, *b"serverPI")]);
    c.ping(*b"clientPI");
    assert_eq!(drain(&mut c), [Out::Ping(false, *b"clientPI")]);
    let mut ack = Vec::new();
    frame::encode_ping(&mut ack, *b"someelse", true);
    assert_eq!(feed(&mut c, &ack).unwrap(), []);
    ack.clear();
    frame::encode_ping(&mut ack, *b"clientPI", true);
    assert_eq!(feed(&mut c, &ack).unwrap(), [Ev::PingAck(*b"clientPI")]);
    // Answered once only.
    assert_eq!(feed(&mut c, &ack).unwrap(), []);
}

#[test]
fn ping_floods_without_writes_close_the_connection() {
    let mut c = ready(Settings::default(), &[]);
    let mut ping = Vec::new();
    frame::encode_ping(&mut ping, [1; 8], false);
    let flood = ping.repeat(5000);
    assert_eq!(feed(&mut c, &flood).unwrap_err().code(), ErrorCode::ENHANCE_YOUR_CALM);
}

#[test]
fn goaway_reports_cut_off_streams() {
    let mut c = ready(Settings::default(), &[]);
    for _ in 0..3 {
        c.start_request(&get_block(), true).unwrap();
    }
    let mut g = Vec::new();
    frame::encode_goaway(&mut g, 3, 0, b"shutting down");
    let evs = feed(&mut c, &g).unwrap();
    assert_eq!(evs, [Ev::GoAway(3, ErrorCode::NO_ERROR), Ev::CutOff(5)]);
    assert_eq!(c.open_streams(), 2);
    let mut open: Vec<_> = c.streams().collect();
    open.sort_unstable();
    assert_eq!(open, [1, 3]);
    assert_eq!(c.start_request(&get_block(), true), Err(SendError::GoingAway));
    // Streams up to 3 still complete.
    let evs = feed(&mut c, &response(3, "200", &[], true)).unwrap();
    assert_eq!(
        evs,
        [Ev::Response(3, 200, vec![(":status".into(), "200".into())]), Ev::End(3)]
    );
}

#[test]
fn resets_both_ways() {
    let mut c = ready(Settings::default(), &[]);
    let a = c.start_request(&get_block(), true).unwrap();
    let b = c.start_request(&get_block(), true).unwrap();
    let mut r = Vec::new();
    frame::encode_rst_stream(&mut r, a, ErrorCode::REFUSED_STREAM.0);
    assert_eq!(
        feed(&mut c, &r).unwrap(),
        [Ev::Reset(a, ErrorCode::REFUSED_STREAM, true)]
    );
    c.reset_stream(b, ErrorCode::CANCEL);
    let out = drain(&mut c);
    assert_eq!(out.last(), Some(&Out::Rst(b, ErrorCode::CANCEL)));
    assert_eq!(c.open_streams(), 0);
    // Late frames for reset streams are dropped; the HPACK state still advances.
    let mut late = response(b, "200", &[("x-a", "1")], false);
    late.extend(data(b, b"late", true));
    assert_eq!(feed(&mut c, &late).unwrap(), []);
    // RST_STREAM on a stream never opened is a connection error.
    r.clear();
    frame::encode_rst_stream(&mut r, 99, 0);
    assert_eq!(feed(&mut c, &r).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn continuation_trailers_and_interim_responses() {
    let mut c = ready(Settings::default(), &[]);
    let id = c.start_request(&get_block(), true).unwrap();
    // 100 Continue is skipped.
    assert_eq!(feed(&mut c, &response(id, "100", &[], false)).unwrap(), []);
    // A header block in three pieces.
    let mut block = Vec::new();
    hpack::encode_field(&mut block, b":status", b"200");
    hpack::encode_field(&mut block, b"x-long", &[b'v'; 100]);
    let mut input = Vec::new();
    Frame::Headers {
        stream: id,
        end_stream: false,
        end_headers: false,
        priority: None,
        block: &block[..10],
    }
    .encode(&mut input);
    Frame::Continuation {
        stream: id,
        end_headers: false,
        block: &block[10..50],
    }
    .encode(&mut input);
    Frame::Continuation {
        stream: id,
        end_headers: true,
        block: &block[50..],
    }
    .encode(&mut input);
    let evs = feed(&mut c, &input).unwrap();
    assert!(
        matches!(&evs[..], [Ev::Response(1, 200, h)] if h[1].1.len() == 100),
        "{evs:?}"
    );
    // Trailers end the stream.
    let mut t = Vec::new();
    hpack::encode_field(&mut t, b"grpc-status", b"0");
    let mut input = Vec::new();
    frame::encode_headers(&mut input, id, &t, true, frame::DEFAULT_MAX_FRAME_SIZE);
    let evs = feed(&mut c, &input).unwrap();
    assert_eq!(
        evs,
        [Ev::Trailers(id, vec![("grpc-status".into(), "0".into())]), Ev::End(id)]
    );
}

#[test]
fn continuation_abuse_is_a_connection_error() {
    // A flood of empty CONTINUATION frames.
    let mut c = ready(Settings::default(), &[]);
    let id = c.start_request(&get_block(), true).unwrap();
    let mut input = Vec::new();
    Frame::Headers {
        stream: id,
        end_stream: false,
        end_headers: false,
        priority: None,
        block: b"\x88",
    }
    .encode(&mut input);
    for _ in 0..1000 {
        Frame::Continuation {
            stream: id,
            end_headers: false,
            block: b"",
        }
        .encode(&mut input);
    }
    assert_eq!(feed(&mut c, &input).unwrap_err().code(), ErrorCode::ENHANCE_YOUR_CALM);
    // A block growing past the header list bound.
    let mut c = ready(
        Settings {
            max_header_list_size: 1000,
            ..Settings::default()
        },
        &[],
    );
    let id = c.start_request(&get_block(), true).unwrap();
    let mut input = Vec::new();
    Frame::Headers {
        stream: id,
        end_stream: false,
        end_headers: false,
        priority: None,
        block: &[0; 16_000],
    }
    .encode(&mut input);
    Frame::Continuation {
        stream: id,
        end_headers: false,
        block: &[0; 16_000],
    }
    .encode(&mut input);
    assert_eq!(feed(&mut c, &input).unwrap_err().code(), ErrorCode::ENHANCE_YOUR_CALM);
    // Another frame in the middle of a block.
    let mut c = ready(Settings::default(), &[]);
    let id = c.start_request(&get_block(), true).unwrap();
    let mut input = Vec::new();
    Frame::Headers {
        stream: id,
        end_stream: false,
        end_headers: false,
        priority: None,
        block: b"\x88",
    }
    .encode(&mut input);
    frame::encode_ping(&mut input, [0; 8], false);
    assert_eq!(feed(&mut c, &input).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
    // CONTINUATION with nothing to continue.
    let mut c = ready(Settings::default(), &[]);
    let mut input = Vec::new();
    Frame::Continuation {
        stream: 1,
        end_headers: true,
        block: b"",
    }
    .encode(&mut input);
    assert_eq!(feed(&mut c, &input).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn header_lists_over_our_limit_close_the_connection() {
    let mut c = ready(
        Settings {
            max_header_list_size: 200,
            ..Settings::default()
        },
        &[],
    );
    let id = c.start_request(&get_block(), true).unwrap();
    let big = "v".repeat(300);
    drain(&mut c);
    let err = feed(&mut c, &response(id, "200", &[("x-big", &big)], true)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(drain(&mut c), [Out::GoAway(0, ErrorCode::ENHANCE_YOUR_CALM)]);
}

#[test]
fn stream_rule_breaks_reset_the_stream() {
    let mut c = ready(Settings::default(), &[]);
    // No :status.
    let id = c.start_request(&get_block(), true).unwrap();
    let mut block = Vec::new();
    hpack::encode_field(&mut block, b"server", b"x");
    let mut input = Vec::new();
    frame::encode_headers(&mut input, id, &block, true, frame::DEFAULT_MAX_FRAME_SIZE);
    assert_eq!(
        feed(&mut c, &input).unwrap(),
        [Ev::Reset(id, ErrorCode::PROTOCOL_ERROR, false)]
    );
    // DATA before HEADERS.
    let id = c.start_request(&get_block(), true).unwrap();
    assert_eq!(
        feed(&mut c, &data(id, b"x", true)).unwrap(),
        [Ev::Reset(id, ErrorCode::PROTOCOL_ERROR, false)]
    );
    // A bad status.
    let id = c.start_request(&get_block(), true).unwrap();
    assert_eq!(
        feed(&mut c, &response(id, "20x", &[], true)).unwrap(),
        [Ev::Reset(id, ErrorCode::PROTOCOL_ERROR, false)]
    );
    // Server-initiated streams and push are connection errors.
    assert_eq!(
        feed(&mut c, &response(2, "200", &[], true)).unwrap_err().code(),
        ErrorCode::PROTOCOL_ERROR
    );
    let mut c = ready(Settings::default(), &[]);
    let mut p = Vec::new();
    Frame::PushPromise {
        stream: 1,
        end_headers: true,
        promised: 2,
        block: b"\x82",
    }
    .encode(&mut p);
    c.start_request(&get_block(), true).unwrap();
    assert_eq!(feed(&mut c, &p).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
    let mut c = Conn::new(Settings::default());
    let bad = server_settings(&[(setting::ENABLE_PUSH, 1)]);
    assert_eq!(feed(&mut c, &bad).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
    let mut c = Conn::new(Settings::default());
    let bad = server_settings(&[(setting::MAX_FRAME_SIZE, 100)]);
    assert_eq!(feed(&mut c, &bad).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn random_input_never_panics_and_stays_bounded() {
    let mut s = 0xdead_beef_cafe_f00d_u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for round in 0..2_000 {
        let mut c = ready(Settings::default(), &[]);
        c.start_request(&get_block(), true).unwrap();
        c.start_request(&get_block(), false).unwrap();
        let mut input = Vec::new();
        // A few plausible frame headers with random payloads.
        for _ in 0..4 {
            let len = (next() % 40) as usize;
            let kind = (next() % 11) as u8;
            let flags = next() as u8;
            let stream = (next() % 6) as u32;
            frame::encode_header(&mut input, len, kind, flags, stream);
            input.extend((0..len).map(|_| next() as u8));
        }
        let cut = (next() as usize) % (input.len() + 1);
        let _ = feed(&mut c, &input[..cut]);
        let _ = feed(&mut c, &input[cut..]);
        assert!(c.pending_output().len() < 4096, "round {round}");
    }
}

#[test]
fn stream_ids_run_out_cleanly() {
    let mut c = ready(Settings::default(), &[]);
    c.next_stream = frame::MAX_WINDOW;
    assert_eq!(c.start_request(&get_block(), true), Ok(frame::MAX_WINDOW));
    assert!(!c.can_start_request());
    assert_eq!(c.start_request(&get_block(), true), Err(SendError::StreamIdsExhausted));
}

#[test]
fn window_settings_out_of_range() {
    // INITIAL_WINDOW_SIZE above 2^31-1.
    let mut c = ready(Settings::default(), &[]);
    let bad = server_settings(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]);
    assert_eq!(feed(&mut c, &bad).unwrap_err().code(), ErrorCode::FLOW_CONTROL_ERROR);
    // A raise that pushes an open stream's window past 2^31-1.
    let mut c = ready(Settings::default(), &[]);
    let id = c.start_request(&get_block(), false).unwrap();
    let mut wu = Vec::new();
    frame::encode_window_update(&mut wu, id, frame::MAX_WINDOW - 65_535);
    feed(&mut c, &wu).unwrap();
    assert_eq!(c.send_capacity(id), 65_535, "capped by the connection window");
    let raise = server_settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]);
    assert_eq!(feed(&mut c, &raise).unwrap_err().code(), ErrorCode::FLOW_CONTROL_ERROR);
    // A stream WINDOW_UPDATE past 2^31-1 resets that stream only.
    let mut c = ready(Settings::default(), &[]);
    let id = c.start_request(&get_block(), false).unwrap();
    drain(&mut c);
    wu.clear();
    frame::encode_window_update(&mut wu, id, frame::MAX_WINDOW);
    assert_eq!(
        feed(&mut c, &wu).unwrap(),
        [Ev::Reset(id, ErrorCode::FLOW_CONTROL_ERROR, false)]
    );
    assert_eq!(drain(&mut c), [Out::Rst(id, ErrorCode::FLOW_CONTROL_ERROR)]);
    // WINDOW_UPDATE of 0: on the connection a connection error.
    wu.clear();
    frame::encode_window_update(&mut wu, 0, 0);
    assert_eq!(feed(&mut c, &wu).unwrap_err().code(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn a_repeated_header_block_decodes_as_the_table_says() {
    // :status 200 (static 8), then a literal with incremental indexing.
    let indexing = |name: &str, value: &str| {
        let mut b = vec![0x88, 0x40, name.len() as u8];
        b.extend_from_slice(name.as_bytes());
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
        b
    };
    // :status 200, then the newest dynamic entry (index 62).
    let newest = vec![0x88, 0xbe];
    let headers = |stream: u32, block: &[u8]| {
        let mut b = Vec::new();
        frame::encode_headers(&mut b, stream, block, true, frame::DEFAULT_MAX_FRAME_SIZE);
        b
    };
    let field = |n: &str, v: &str| {
        vec![
            (":status".to_string(), "200".to_string()),
            (n.to_string(), v.to_string()),
        ]
    };
    let mut c = ready(Settings::default(), &[]);
    let blocks = [
        (indexing("x-a", "1"), field("x-a", "1"), 1),
        // The same block again adds the entry again: not merely repeated.
        (indexing("x-a", "1"), field("x-a", "1"), 2),
        (newest.clone(), field("x-a", "1"), 2),
        (newest.clone(), field("x-a", "1"), 2),
        (indexing("x-b", "2"), field("x-b", "2"), 3),
        // The same bytes as before, another table: another field.
        (newest.clone(), field("x-b", "2"), 3),
    ];
    for (block, want, entries) in blocks {
        let id = c.start_request(&get_block(), true).unwrap();
        drain(&mut c);
        assert_eq!(
            feed(&mut c, &headers(id, &block)).unwrap(),
            [Ev::Response(id, 200, want), Ev::End(id)],
            "stream {id}"
        );
        assert_eq!(c.decoder.table_len(), entries, "stream {id}");
    }
}

#[test]
fn a_repeated_header_block_fails_once_its_entry_is_evicted() {
    let mut c = Conn::new(Settings {
        header_table_size: 0,
        ..Settings::default()
    });
    // The server's SETTINGS, not yet its ACK of ours: its encoder may use
    // the default 4096-byte table meanwhile.
    assert_eq!(feed(&mut c, &server_settings(&[])).unwrap(), [Ev::Settings]);
    let headers = |stream: u32, block: &[u8]| {
        let mut b = Vec::new();
        frame::encode_headers(&mut b, stream, block, true, frame::DEFAULT_MAX_FRAME_SIZE);
        b
    };
    let mut indexing = vec![0x88, 0x40, 3];
    indexing.extend_from_slice(b"x-a");
    indexing.extend_from_slice(&[1, b'1']);
    let newest = [0x88, 0xbe];
    let want = vec![
        (":status".to_string(), "200".to_string()),
        ("x-a".to_string(), "1".to_string()),
    ];
    for block in [&indexing[..], &newest, &newest] {
        let id = c.start_request(&get_block(), true).unwrap();
        assert_eq!(
            feed(&mut c, &headers(id, block)).unwrap(),
            [Ev::Response(id, 200, want.clone()), Ev::End(id)]
        );
    }
    // Our SETTINGS acknowledged: the table shrinks to 0 and the entry goes.
    let mut ack = Vec::new();
    frame::encode_settings_ack(&mut ack);
    assert_eq!(feed(&mut c, &ack).unwrap(), [Ev::SettingsAcked]);
    let id = c.start_request(&get_block(), true).unwrap();
    assert!(feed(&mut c, &headers(id, &newest)).is_err());
}
