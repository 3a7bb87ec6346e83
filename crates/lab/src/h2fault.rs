//! HTTP/2 faults (h2c, prior knowledge): what nginx will not do on demand.
//!
//! ```text
//!  accept ─► h2 handshake (SETTINGS per fault) ─► per stream, by its number
//!            on the connection: answer 200 | RST_STREAM | GOAWAY
//! ```
//!
//! Streams are numbered 1, 2, 3… in the order the connection accepts them,
//! so the counts a client sees are exact: with one connection and one
//! stream at a time, `h2-rst-stream` resets exactly every second request.
//! The h2 crate sends what it is told: a `content-length` the body does not
//! match (`h2-short-body`, `h2-long-body`) goes out as it is.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use h2::server::SendResponse;
use tokio::net::TcpStream;

use crate::fault::kind::Fault;

/// `h2-goaway` answers one stream fewer than this on a connection; the
/// next one gets GOAWAY and the close instead of an answer.
pub const GOAWAY_AFTER: u64 = 5;
/// Response body of `h2-tiny-window` (past the 64 KiB default window).
pub const TINY_WINDOW_BODY: usize = 256 << 10;
/// `h2-short-body`: (body bytes sent, `content-length` announced).
pub const SHORT_BODY: (usize, usize) = (3, 10);
/// `h2-long-body`: (body bytes sent, `content-length` announced).
pub const LONG_BODY: (usize, usize) = (10, 3);
/// Initial stream window `h2-tiny-window` announces for request bodies.
const TINY_WINDOW: u32 = 16;
/// How long `h2-max-streams-1` takes to answer, so that a client which
/// ignored the limit would have streams overlap.
const SLOW_ANSWER: Duration = Duration::from_millis(2);

/// Serves one connection with an HTTP/2 `fault`.
pub(crate) async fn serve(stream: TcpStream, fault: Fault) -> io::Result<()> {
    let mut builder = h2::server::Builder::new();
    match fault {
        Fault::H2MaxStreams1 => {
            builder.max_concurrent_streams(1);
        }
        Fault::H2TinyWindow => {
            builder.initial_window_size(TINY_WINDOW);
        }
        Fault::H2NoStreams => {
            builder.max_concurrent_streams(0);
        }
        _ => {}
    }
    // A second handle on the socket: when h2 is done with the connection,
    // this one says FIN and reads what the client still sent, so that the
    // close is not a reset that would discard the GOAWAY before the client
    // reads it.
    let std = stream.into_std()?;
    let keep = TcpStream::from_std(std.try_clone()?)?;
    let stream = TcpStream::from_std(std)?;
    let mut conn = builder.handshake::<_, Bytes>(stream).await.map_err(io::Error::other)?;
    let mut n = 0u64;
    let mut cut = None;
    // `h2-stall`'s streams, held unanswered until the connection ends.
    let mut held = Vec::new();
    while let Some(accepted) = conn.accept().await {
        let Ok((request, mut respond)) = accepted else {
            break;
        };
        n += 1;
        match fault {
            Fault::H2RstStream if n.is_multiple_of(2) => respond.send_reset(Reason::INTERNAL_ERROR),
            Fault::H2RefusedStream if n.is_multiple_of(2) => respond.send_reset(Reason::REFUSED_STREAM),
            Fault::H2Goaway if n == GOAWAY_AFTER => {
                // Accepted, never answered: GOAWAY (naming this stream as
                // the last processed), then the connection closes — it
                // and any stream the client opened meanwhile are cut off.
                cut = Some(respond);
                conn.abrupt_shutdown(Reason::NO_ERROR);
            }
            Fault::H2Stall if n.is_multiple_of(2) => held.push(respond),
            _ if grpc_reply(fault).is_some() => {
                tokio::task::spawn_local(answer_grpc(request.into_body(), respond, fault));
            }
            _ => {
                let body = match fault {
                    Fault::H2TinyWindow => Bytes::from(vec![b'w'; TINY_WINDOW_BODY]),
                    Fault::H2ShortBody => Bytes::from(vec![b's'; SHORT_BODY.0]),
                    Fault::H2LongBody => Bytes::from(vec![b'l'; LONG_BODY.0]),
                    _ => Bytes::from_static(b"ok"),
                };
                let answer = Answer {
                    body,
                    delay: (fault == Fault::H2MaxStreams1).then_some(SLOW_ANSWER),
                    // The length a body breaks, and an interim response first.
                    length: match fault {
                        Fault::H2ShortBody => Some(SHORT_BODY.1),
                        Fault::H2LongBody => Some(LONG_BODY.1),
                        _ => None,
                    },
                    early_hints: fault == Fault::H2EarlyHints,
                    huge_headers: fault == Fault::H2HugeHeaders && n.is_multiple_of(2),
                };
                tokio::task::spawn_local(answer.send(request.into_body(), respond));
            }
        }
    }
    drop(conn);
    drop(cut);
    drop(held);
    linger(keep).await;
    Ok(())
}

/// Longest the server waits for the client to close after its FIN.
const LINGER: Duration = Duration::from_secs(2);

/// Ends the connection gently: FIN, then read until the client closes too.
async fn linger(mut keep: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = keep.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = keep.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// How a stream is answered: 200 with `body`, after `delay` if given,
/// with a `content-length` of `length` (whatever the body's) if given,
/// after a `103 Early Hints` with `early_hints`, with [`HUGE_HEADERS`]
/// bytes of header fields with `huge_headers`.
struct Answer {
    body: Bytes,
    delay: Option<Duration>,
    length: Option<usize>,
    early_hints: bool,
    huge_headers: bool,
}

/// Bytes of header fields `h2-huge-headers` sends (in fields of 1 KiB).
pub const HUGE_HEADERS: usize = 300 << 10;

impl Answer {
    /// Reads the request body (giving its window back), then answers.
    async fn send(self, mut request: h2::RecvStream, mut respond: SendResponse<Bytes>) {
        while let Some(Ok(chunk)) = request.data().await {
            let _ = request.flow_control().release_capacity(chunk.len());
        }
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        if self.early_hints {
            let mut hints = http::Response::new(());
            *hints.status_mut() = http::StatusCode::EARLY_HINTS;
            hints.headers_mut().insert(
                http::header::LINK,
                http::HeaderValue::from_static("</style.css>; rel=preload"),
            );
            let _ = respond.send_informational(hints);
        }
        let mut response = http::Response::new(());
        let headers = response.headers_mut();
        headers.insert(http::header::SERVER, http::HeaderValue::from_static("throng-lab"));
        if let Some(n) = self.length {
            headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(n));
        }
        if self.huge_headers {
            let value = http::HeaderValue::from_str(&"h".repeat(1024)).unwrap_or(http::HeaderValue::from_static("h"));
            for i in 0..HUGE_HEADERS / 1024 {
                if let Ok(name) = http::HeaderName::from_bytes(format!("x-huge-{i}").as_bytes()) {
                    headers.insert(name, value.clone());
                }
            }
        }
        if let Ok(mut send) = respond.send_response(response, false) {
            let _ = send.send_data(self.body, true);
        }
    }
}

/// A gRPC fault's answer: its content type and its body (the trailers
/// then say OK); None for a fault that is not gRPC.
fn grpc_reply(fault: Fault) -> Option<(&'static str, Vec<u8>)> {
    // CallReply{message: "hi"}, framed.
    let good = [0u8, 0, 0, 0, 4, 0x0a, 2, b'h', b'i'];
    let grpc = "application/grpc";
    Some(match fault {
        // Field number 0: no protobuf message has it.
        Fault::GrpcNotProtobuf => (grpc, vec![0, 0, 0, 0, 3, 0x00, 0x01, 0x02]),
        Fault::GrpcHtml => ("text/html", b"<html>not gRPC</html>".to_vec()),
        Fault::GrpcHugePrefix => (grpc, [&[0u8, 0xff, 0xff, 0xff, 0xff][..], &[0x08; 10]].concat()),
        Fault::GrpcHalfMessage => (grpc, [&[0u8, 0, 0, 0, 20][..], &[0x08; 8]].concat()),
        Fault::GrpcCompressed => (grpc, [&[1u8][..], &good[1..]].concat()),
        Fault::GrpcReservedFlags => (grpc, [&[2u8][..], &good[1..]].concat()),
        Fault::GrpcTwoMessages => (grpc, [good, good].concat()),
        Fault::GrpcNoMessage => (grpc, Vec::new()),
        _ => return None,
    })
}

/// Reads the request body, then answers 200 with `fault`'s reply and
/// trailers saying OK.
async fn answer_grpc(mut request: h2::RecvStream, mut respond: SendResponse<Bytes>, fault: Fault) {
    while let Some(Ok(chunk)) = request.data().await {
        let _ = request.flow_control().release_capacity(chunk.len());
    }
    let Some((content_type, body)) = grpc_reply(fault) else {
        return;
    };
    let mut response = http::Response::new(());
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    let Ok(mut send) = respond.send_response(response, false) else {
        return;
    };
    if !body.is_empty() && send.send_data(Bytes::from(body), false).is_err() {
        return;
    }
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let _ = send.send_trailers(trailers);
}
