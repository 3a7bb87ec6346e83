//! Event streams over HTTP/2 (h2c, prior knowledge): `GET /sse` and
//! `POST /v1/chat/completions`, the same events as over HTTP/1.1, served
//! by [`crate::LabServer::start_h2c`] beside HTTP/1.1 on one port.
//!
//! ```text
//!  connection: preface seen ─► h2 handshake (the bytes already read replayed)
//!     └─ per stream: route ─► Stream::sse | Stream::chat ─► 200 head
//!                    ─► wait `first` ─► DATA (one event), wait `interval`, ...
//!                    └─ end: END_STREAM | RST_STREAM (abrupt) | hold (stall)
//! ```
//!
//! DATA is sent only as the peer's window allows, so a client that stops
//! reading holds at most a window's worth here. `big=` and `endless=` are
//! HTTP/1.1 only (answered 400).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::sse::{End, Stream};

/// What a client sends first on an HTTP/2 connection without TLS.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Streams one connection may have open at once.
const MAX_STREAMS: u32 = 256;
/// Largest request body (a chat completion's JSON).
const MAX_BODY: usize = 1 << 20;
/// Longest wait for a request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stalled stream is held (as over HTTP/1.1).
const HOLD_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait for the peer's window to open.
const WINDOW_TIMEOUT: Duration = Duration::from_secs(60);

/// True while `seen` may still become the HTTP/2 preface.
pub(crate) fn may_be_preface(seen: &[u8]) -> bool {
    let n = seen.len().min(PREFACE.len());
    seen[..n] == PREFACE[..n]
}

/// Serves one h2c connection whose first bytes (`seen`, the preface and
/// what followed) were already read.
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(stream: S, seen: Vec<u8>) -> io::Result<()> {
    let io = Rewind {
        seen,
        at: 0,
        inner: stream,
    };
    let mut builder = h2::server::Builder::new();
    builder.max_concurrent_streams(MAX_STREAMS);
    let mut conn = builder.handshake::<_, Bytes>(io).await.map_err(io::Error::other)?;
    while let Some(accepted) = conn.accept().await {
        let Ok((request, respond)) = accepted else {
            break;
        };
        tokio::task::spawn_local(answer(request, respond));
    }
    Ok(())
}

async fn answer(request: http::Request<RecvStream>, respond: SendResponse<Bytes>) {
    let (parts, body) = request.into_parts();
    let query = parts.uri.query().unwrap_or("");
    let parsed = match (parts.method.as_str(), parts.uri.path()) {
        ("GET", "/sse") => Stream::sse(query).and_then(h2_only),
        ("POST", "/v1/chat/completions") => match read_body(body).await {
            Ok(body) => Stream::chat(query, &body).and_then(|(s, streaming)| {
                if streaming {
                    Ok(s)
                } else {
                    Err("over HTTP/2 the lab answers only streamed completions: send \"stream\": true".into())
                }
            }),
            Err(why) => Err(why),
        },
        (_, path) => {
            let why =
                format!("not found: over HTTP/2 the lab answers GET /sse and POST /v1/chat/completions, not {path}\n");
            reply(respond, 404, why);
            return;
        }
    };
    match parsed {
        Ok(stream) => events(respond, &stream).await,
        Err(why) => reply(respond, 400, format!("{why}\n")),
    }
}

/// Refuses what the HTTP/2 path does not send.
fn h2_only(stream: Stream) -> Result<Stream, String> {
    if stream.big().is_some() || stream.end == End::Endless {
        return Err("big= and endless= are served over HTTP/1.1 only; leave them out over HTTP/2".into());
    }
    Ok(stream)
}

async fn read_body(mut body: RecvStream) -> Result<Vec<u8>, String> {
    let read = async {
        let mut out = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(|e| format!("the request body broke off ({e})"))?;
            let _ = body.flow_control().release_capacity(chunk.len());
            if out.len() + chunk.len() > MAX_BODY {
                return Err(format!("the request body is over {MAX_BODY} bytes"));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    };
    tokio::time::timeout(BODY_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Err("the request body did not arrive in time".into()))
}

fn reply(mut respond: SendResponse<Bytes>, status: u16, text: String) {
    let head = http::Response::builder()
        .status(status)
        .header("server", "throng-lab")
        .header("content-type", "text/plain")
        .body(());
    let Ok(head) = head else {
        return;
    };
    if let Ok(mut send) = respond.send_response(head, false) {
        let _ = send.send_data(Bytes::from(text), true);
    }
}

/// Sends `stream`'s events, one DATA frame (or more, as the window allows)
/// each, then its end.
async fn events(mut respond: SendResponse<Bytes>, stream: &Stream) {
    let head = http::Response::builder()
        .status(200)
        .header("server", "throng-lab")
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(());
    let Ok(head) = head else {
        return;
    };
    let Ok(mut send) = respond.send_response(head, false) else {
        return;
    };
    let start = tokio::time::Instant::now();
    for i in 0..stream.events {
        let at = stream.first + stream.interval.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
        tokio::time::sleep_until(start + at).await;
        let mut text = Vec::new();
        stream.event(i, &mut text);
        if send_all(&mut send, Bytes::from(text)).await.is_err() {
            return;
        }
    }
    match stream.end {
        End::Complete => {
            let mut tail = Vec::new();
            stream.tail(&mut tail);
            if send_all(&mut send, Bytes::from(tail)).await.is_ok() {
                let _ = send.send_data(Bytes::new(), true);
            }
        }
        End::Abrupt => {
            if send_all(&mut send, Bytes::from_static(b"data: half an event"))
                .await
                .is_ok()
            {
                send.send_reset(Reason::INTERNAL_ERROR);
            }
        }
        // Held until the client resets the stream, or the limit.
        End::Stall | End::Endless => {
            let reset = std::future::poll_fn(|cx| send.poll_reset(cx));
            let _ = tokio::time::timeout(HOLD_LIMIT, reset).await;
        }
    }
}

/// Sends `data` as the peer's window opens (never more buffered here).
async fn send_all(send: &mut SendStream<Bytes>, mut data: Bytes) -> Result<(), ()> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let wait = async {
            loop {
                if send.capacity() > 0 {
                    return Ok(send.capacity());
                }
                match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                    Some(Ok(_)) => {}
                    _ => return Err(()),
                }
            }
        };
        let granted = tokio::time::timeout(WINDOW_TIMEOUT, wait).await.map_err(|_| ())??;
        let piece = data.split_to(granted.min(data.len()));
        send.send_data(piece, false).map_err(|_| ())?;
    }
    Ok(())
}

/// A stream whose first bytes were already read: they are read again
/// first.
struct Rewind<S> {
    seen: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.seen.len() {
            let n = (this.seen.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.seen[this.at..this.at + n]);
            this.at += n;
            if this.at == this.seen.len() {
                this.seen = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GETs `path` over h2c from a lab on loopback: (status, body, whether
    /// the stream ended with END_STREAM rather than a reset).
    async fn get(client: &mut h2::client::SendRequest<Bytes>, path: &str) -> (u16, Vec<u8>, bool) {
        send(client, "GET", path, None).await
    }

    async fn send(
        client: &mut h2::client::SendRequest<Bytes>,
        method: &str,
        path: &str,
        body: Option<&'static str>,
    ) -> (u16, Vec<u8>, bool) {
        let request = http::Request::builder()
            .method(method)
            .uri(format!("http://lab{path}"))
            .body(())
            .unwrap();
        let (response, mut upload) = client.send_request(request, body.is_none()).unwrap();
        if let Some(body) = body {
            upload.send_data(Bytes::from_static(body.as_bytes()), true).unwrap();
        }
        let response = tokio::time::timeout(Duration::from_secs(10), response)
            .await
            .unwrap()
            .unwrap();
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut out = Vec::new();
        let mut complete = true;
        while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), body.data())
            .await
            .unwrap()
        {
            match chunk {
                Ok(chunk) => {
                    let _ = body.flow_control().release_capacity(chunk.len());
                    out.extend_from_slice(&chunk);
                }
                Err(_) => {
                    complete = false;
                    break;
                }
            }
        }
        (status, out, complete)
    }

    #[test]
    fn a_plain_lab_answers_the_http2_preface_in_http1() {
        let server = crate::LabServer::start(&crate::LabConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            stall: None,
            tls: None,
        })
        .unwrap();
        let mut tcp = std::net::TcpStream::connect(server.addr()).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        std::io::Write::write_all(&mut tcp, PREFACE).unwrap();
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut tcp, &mut text);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    }

    #[test]
    fn the_lab_streams_events_over_h2c_beside_http1() {
        let server = crate::LabServer::start_h2c(
            &crate::LabConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                threads: 1,
                stall: None,
                tls: None,
            },
            &crate::AuthConfig::default(),
        )
        .unwrap();
        let addr = server.addr();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut client, conn) = h2::client::handshake(tcp).await.unwrap();
            tokio::spawn(conn);
            // Two streams on one connection, at once.
            let mut other = client.clone();
            let (a, b) = tokio::join!(
                get(&mut client, "/sse?events=3&interval=5"),
                get(&mut other, "/sse?events=2")
            );
            assert_eq!((a.0, a.2), (200, true));
            assert_eq!(
                String::from_utf8(a.1).unwrap(),
                "id: 0\ndata: 0\n\nid: 1\ndata: 1\n\nid: 2\ndata: 2\n\n"
            );
            assert_eq!(b.1, b"id: 0\ndata: 0\n\nid: 1\ndata: 1\n\n");
            // An abrupt end is a reset after half an event (the h2 client
            // may drop the half it had buffered when the reset comes).
            let (status, _, complete) = get(&mut client, "/sse?events=1&end=abrupt").await;
            assert_eq!((status, complete), (200, false));
            // What HTTP/2 does not serve says so.
            let (status, body, _) = get(&mut client, "/sse?big=10").await;
            assert_eq!(status, 400);
            assert!(String::from_utf8_lossy(&body).contains("HTTP/1.1 only"));
            // A streamed chat completion: two tokens, a usage chunk, [DONE].
            let chat = r#"{"messages":[{"role":"user","content":"one two"}],"stream":true}"#;
            let (status, body, complete) =
                send(&mut client, "POST", "/v1/chat/completions?tokens=2&usage=1", Some(chat)).await;
            let text = String::from_utf8(body).unwrap();
            assert_eq!((status, complete), (200, true));
            assert_eq!(text.matches("\"content\":\"tok").count(), 2, "{text}");
            assert!(text.contains("\"prompt_tokens\":2,\"completion_tokens\":2"), "{text}");
            assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
            let (status, _, _) = get(&mut client, "/bytes/3").await;
            assert_eq!(status, 404);
        });
        // HTTP/1.1 on the same port is unchanged.
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(
            &mut tcp,
            b"GET /sse?events=1 HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut tcp, &mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("id: 0\ndata: 0\n\n"), "{text}");
    }
}
