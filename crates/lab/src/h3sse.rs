//! Event streams over HTTP/3: `GET /sse` and `POST /v1/chat/completions`,
//! the same events as over HTTP/1.1 and h2c (built by [`crate::sse`]),
//! served by [`crate::H3Server`] beside `/` and `/bytes/N`.
//!
//! ```text
//!  request stream: route ─► Stream::sse | Stream::chat ─► 200 head
//!                  ─► wait `first` ─► DATA (one event), wait `interval`, ...
//!                  └─ end: FIN | reset H3_INTERNAL_ERROR after half an event
//!                          (abrupt) | hold (stall) | big first event
//!                          | a line that never ends, then hold (endless)
//! ```
//!
//! DATA goes out as QUIC's flow control allows (quinn's write waits for
//! the peer's credit), so a client that stops reading holds at most its
//! window here. A stalled stream is held until its connection closes or
//! [`HOLD_LIMIT`] passes: h3 tells a server that sends nothing of no
//! STOP_SENDING.

use std::time::Duration;

use bytes::{Buf, Bytes};
use h3::error::{Code, StreamError};

use crate::fault::HOLD_LIMIT;
use crate::sse::{ENDLESS_CAP, End, Stream};

type RequestStream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Largest request body (a chat completion's JSON).
const MAX_BODY: usize = 1 << 20;
/// Longest wait for a request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// What a big event or an endless line is sent in.
static FILL: [u8; 16 * 1024] = [b'x'; 16 * 1024];

/// The codes of the STOP_SENDING frames that ended event streams, each
/// with how many it ended: a stream is seen stopped when its next event
/// cannot be sent.
#[derive(Debug, Default)]
pub(crate) struct Stops(std::sync::Mutex<std::collections::BTreeMap<u64, u64>>);

impl Stops {
    /// A peer stopped an event stream with `code`.
    fn stopped(&self, code: u64) {
        if let Ok(mut stops) = self.0.lock() {
            *stops.entry(code).or_default() += 1;
        }
    }

    /// The codes seen so far.
    pub(crate) fn codes(&self) -> std::collections::BTreeMap<u64, u64> {
        self.0.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// True for the paths answered here.
pub(crate) fn routes(path: &str) -> bool {
    matches!(path, "/sse" | "/v1/chat/completions")
}

/// Answers `req` (a path [`routes`] takes) on `stream`; `quic` is its
/// connection, which a stalled stream is held until it closes; `stops`
/// records the code of a STOP_SENDING that ends an event stream.
pub(crate) async fn answer(req: http::Request<()>, mut stream: RequestStream, quic: quinn::Connection, stops: &Stops) {
    let query = req.uri().query().unwrap_or("");
    let parsed = match (req.method().as_str(), req.uri().path()) {
        ("GET", "/sse") => Stream::sse(query).map(|s| (s, true)),
        ("POST", "/v1/chat/completions") => match read_body(&mut stream).await {
            Ok(body) => Stream::chat(query, &body),
            Err(why) => Err(why),
        },
        (method, path) => Err(format!("{method} {path}: use GET /sse or POST /v1/chat/completions")),
    };
    match parsed {
        Ok((s, true)) => events(&mut stream, &s, &quic, stops).await,
        Ok((s, false)) => {
            let body = crate::sse::completion(s.events);
            reply(&mut stream, 200, "application/json", Bytes::from(body)).await;
        }
        Err(why) => reply(&mut stream, 400, "text/plain", Bytes::from(format!("{why}\n"))).await,
    }
}

async fn read_body(stream: &mut RequestStream) -> Result<Vec<u8>, String> {
    let read = async {
        let mut out = Vec::new();
        while let Some(mut chunk) = stream
            .recv_data()
            .await
            .map_err(|e| format!("the request body broke off ({e})"))?
        {
            if out.len() + chunk.remaining() > MAX_BODY {
                return Err(format!("the request body is over {MAX_BODY} bytes"));
            }
            while chunk.has_remaining() {
                let piece = chunk.chunk();
                out.extend_from_slice(piece);
                let n = piece.len();
                chunk.advance(n);
            }
        }
        Ok(out)
    };
    tokio::time::timeout(BODY_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Err("the request body did not arrive in time".into()))
}

async fn reply(stream: &mut RequestStream, status: u16, kind: &str, body: Bytes) {
    let head = http::Response::builder()
        .status(status)
        .header("server", "throng-lab")
        .header("content-type", kind)
        .header("content-length", body.len())
        .body(());
    let Ok(head) = head else {
        return;
    };
    if stream.send_response(head).await.is_ok() && stream.send_data(body).await.is_ok() {
        let _ = stream.finish().await;
    }
}

/// Sends `stream`'s events, one DATA frame each, then its end. Every send
/// is bounded: a peer that gives no credit for [`HOLD_LIMIT`] ends it; one
/// that stops the stream (STOP_SENDING) ends it too, its code recorded in
/// `stops`.
async fn events(send: &mut RequestStream, stream: &Stream, quic: &quinn::Connection, stops: &Stops) {
    let sent = |r: Result<(), StreamError>| match r {
        Ok(()) => Some(()),
        Err(StreamError::RemoteTerminate { code, .. }) => {
            stops.stopped(code.value());
            None
        }
        Err(_) => None,
    };
    let head = http::Response::builder()
        .status(200)
        .header("server", "throng-lab")
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(());
    let Ok(head) = head else {
        return;
    };
    let sent = tokio::time::timeout(HOLD_LIMIT, async {
        send.send_response(head).await.ok()?;
        let start = tokio::time::Instant::now();
        let mut text = Vec::new();
        for i in 0..stream.events {
            let at = stream.first + stream.interval.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
            tokio::time::sleep_until(start + at).await;
            match stream.big() {
                Some(big) if i == 0 => {
                    sent(send.send_data(Bytes::from_static(b"id: 0\ndata: ")).await)?;
                    filler(send, big).await?;
                    sent(send.send_data(Bytes::from_static(b"\n\n")).await)?;
                }
                _ => {
                    text.clear();
                    stream.event(i, &mut text);
                    sent(send.send_data(Bytes::copy_from_slice(&text)).await)?;
                }
            }
        }
        match stream.end {
            End::Complete => {
                text.clear();
                stream.tail(&mut text);
                if !text.is_empty() {
                    sent(send.send_data(Bytes::from(text)).await)?;
                }
                send.finish().await.ok()?;
            }
            End::Abrupt => {
                send.send_data(Bytes::from_static(b"data: half an event")).await.ok()?;
                send.stop_stream(Code::H3_INTERNAL_ERROR);
            }
            End::Stall => return Some(true),
            End::Endless => {
                send.send_data(Bytes::from_static(b"data: ")).await.ok()?;
                filler(send, ENDLESS_CAP).await?;
                return Some(true);
            }
        }
        Some(false)
    })
    .await;
    match sent {
        // Held: nothing more is sent until the connection closes.
        Ok(Some(true)) => {
            let _ = tokio::time::timeout(HOLD_LIMIT, quic.closed()).await;
        }
        // Out of time: reset, as a drop would end the body cleanly.
        Err(_) => send.stop_stream(Code::H3_INTERNAL_ERROR),
        Ok(_) => {}
    }
}

/// Sends `n` filler bytes.
async fn filler(send: &mut RequestStream, mut n: u64) -> Option<()> {
    while n > 0 {
        let k = usize::try_from(n).unwrap_or(usize::MAX).min(FILL.len());
        send.send_data(Bytes::from_static(&FILL[..k])).await.ok()?;
        n -= k as u64;
    }
    Some(())
}
