//! Hostile servers on demand: `throng serve --fault NAME` answers every
//! connection with one [`Fault`].
//!
//! ```text
//!  accept ─► Fault::kind()
//!              ├─ Http: (TLS accept if --tls) ─► read a request ─► misbehave
//!              ├─ Tls:  raw TCP, read the ClientHello ─► alert | garbage | silence
//!              ├─ Nats: raw TCP, speak (or fail to speak) the NATS greeting
//!              └─ H2:   HTTP/2 with prior knowledge (h2c), see crate::h2fault
//! ```
//!
//! Every fault is cheap and bounded: loops that write stop when a write
//! fails (the client went away), waits stop when the client closes, and no
//! connection is kept longer than [`HOLD_LIMIT`].

use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{Parsed, parse_request};
use crate::server::{LabStream, write_filler};

/// Longest a fault keeps one connection, whatever the client does.
pub const HOLD_LIMIT: Duration = Duration::from_secs(60);
/// Largest request a fault reads before misbehaving.
const MAX_REQUEST_HEAD: usize = 64 * 1024;
/// Headers sent by [`Fault::ManyHeaders`].
pub const MANY_HEADERS: usize = 100_000;
/// Body length advertised (and sent, as fast as the client reads) by
/// [`Fault::HugeBody`].
pub const HUGE_BODY: u64 = 1 << 30;
/// Pause between two bytes of [`Fault::Trickle`].
pub const TRICKLE_EVERY: Duration = Duration::from_millis(100);
/// How long [`Fault::CloseEveryOther`] holds the connections it closes.
pub const CLOSE_AFTER: Duration = Duration::from_secs(1);
/// Pause between two batches of an endless fault, so that one of them does
/// not take a whole core of a shared machine.
const ENDLESS_PAUSE: Duration = Duration::from_millis(1);

/// What the fault server does with each connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Reads the request, never answers.
    NeverAnswer,
    /// Sends a head announcing 1000 bytes of body, then nothing.
    StallBody,
    /// A valid response, one byte every 100 ms.
    Trickle,
    /// A chunked body that never ends.
    EndlessChunks,
    /// A head that never ends.
    EndlessHeaders,
    /// 100,000 headers, then an empty body.
    ManyHeaders,
    /// `Content-Length: 1073741824`, and the bytes, written as the client reads.
    HugeBody,
    /// Binary bytes that are not HTTP, then close.
    Garbage,
    /// An HTTP/0.9 answer: a body with no status line, then close.
    Http09,
    /// `Content-Length: -12`.
    BadContentLength,
    /// A chunked body whose chunk size is not hexadecimal.
    BadChunkSize,
    /// Reads the request, resets the connection (RST).
    RstBeforeResponse,
    /// Half a head, then RST.
    RstMidHeaders,
    /// The head and 100 of 1000 body bytes, then RST.
    RstMidBody,
    /// Reads the request, closes the connection (FIN).
    FinBeforeResponse,
    /// The head and 100 of 1000 body bytes, then FIN.
    FinMidBody,
    /// A valid 200 with `Connection: close`, then FIN, for every request.
    ConnectionCloseEverywhere,
    /// `100 Continue`, then a valid 200, for every request.
    Status100Then200,
    /// `101 Switching Protocols`; whatever the client sends afterwards is
    /// read and never answered (it is another protocol now).
    Status101,
    /// Accepts the connection and closes it at once, before reading.
    ListenerCloses,
    /// Reads and drops whatever comes, never answers; closes every second
    /// connection a server thread accepts (FIN) after [`CLOSE_AFTER`] and
    /// holds the others until the client closes them: held connections
    /// the server closes, in a number known in advance.
    CloseEveryOther,
    /// Reads the ClientHello, answers with a fatal `handshake_failure` alert.
    TlsAlert,
    /// Reads the ClientHello, answers with bytes that are not TLS.
    TlsGarbage,
    /// Reads the ClientHello, never answers.
    TlsStall,
    /// Greets a NATS client with a line that is not NATS.
    NatsGarbage,
    /// Accepts a NATS client and never sends INFO.
    NatsNoInfo,
    /// Sends INFO, then answers CONNECT with `-ERR 'Authorization Violation'`.
    NatsAuthError,
    /// Sends INFO; after CONNECT, a PING before the PONG that answers it —
    /// what a nats-server busy checking bcrypt passwords does.
    NatsEarlyPing,
    /// HTTP/2 (h2c): every second stream on a connection is reset with
    /// RST_STREAM INTERNAL_ERROR; the others are answered 200.
    H2RstStream,
    /// HTTP/2 (h2c): every second stream is refused (RST_STREAM
    /// REFUSED_STREAM); the others are answered 200.
    H2RefusedStream,
    /// HTTP/2 (h2c): answers [`crate::h2fault::GOAWAY_AFTER`] - 1 streams
    /// of a connection; on the next, GOAWAY (NO_ERROR) and the close: that
    /// stream and any opened after it are cut off.
    H2Goaway,
    /// HTTP/2 (h2c): a 16-byte initial stream window for request bodies,
    /// and 256 KiB response bodies (past the client's default window, which
    /// it must give back as it reads).
    H2TinyWindow,
    /// HTTP/2 (h2c): SETTINGS_MAX_CONCURRENT_STREAMS 1, each answer after
    /// 2 ms.
    H2MaxStreams1,
    /// HTTP/2 (h2c): SETTINGS_MAX_CONCURRENT_STREAMS 0, never raised: the
    /// server allows no stream at all.
    H2NoStreams,
    /// HTTP/2 (h2c): `content-length: 10`, then 3 bytes and END_STREAM.
    H2ShortBody,
    /// HTTP/2 (h2c): `content-length: 3`, then 10 bytes and END_STREAM.
    H2LongBody,
    /// HTTP/2 (h2c): `103 Early Hints`, then 200.
    H2EarlyHints,
    /// gRPC (h2c): each call answered OK with one message that is not
    /// protobuf (a field number 0).
    GrpcNotProtobuf,
    /// gRPC (h2c): each call answered 200 `content-type: text/html`.
    GrpcHtml,
    /// gRPC (h2c): a message prefix claiming 4 GiB, then 10 bytes, then OK.
    GrpcHugePrefix,
    /// gRPC (h2c): half a message (its prefix says 20 bytes, 8 come), then OK.
    GrpcHalfMessage,
    /// gRPC (h2c): a message flagged compressed, no `grpc-encoding`.
    GrpcCompressed,
    /// gRPC (h2c): a message prefix with reserved flag bits set (0x02).
    GrpcReservedFlags,
    /// gRPC (h2c): two messages, then OK (for a unary call).
    GrpcTwoMessages,
    /// gRPC (h2c): no message, then OK (for a unary call).
    GrpcNoMessage,
}

/// Which protocol a fault speaks (or breaks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// HTTP/1.1, inside TLS when the server has a certificate.
    Http,
    /// The TLS handshake itself (no certificate needed).
    Tls,
    /// The NATS greeting.
    Nats,
    /// HTTP/2 with prior knowledge (h2c).
    H2,
}

impl Fault {
    /// Every fault, in the order of the documentation.
    pub const ALL: [Fault; 45] = [
        Fault::NeverAnswer,
        Fault::StallBody,
        Fault::Trickle,
        Fault::EndlessChunks,
        Fault::EndlessHeaders,
        Fault::ManyHeaders,
        Fault::HugeBody,
        Fault::Garbage,
        Fault::Http09,
        Fault::BadContentLength,
        Fault::BadChunkSize,
        Fault::RstBeforeResponse,
        Fault::RstMidHeaders,
        Fault::RstMidBody,
        Fault::FinBeforeResponse,
        Fault::FinMidBody,
        Fault::ConnectionCloseEverywhere,
        Fault::Status100Then200,
        Fault::Status101,
        Fault::ListenerCloses,
        Fault::CloseEveryOther,
        Fault::TlsAlert,
        Fault::TlsGarbage,
        Fault::TlsStall,
        Fault::NatsGarbage,
        Fault::NatsNoInfo,
        Fault::NatsAuthError,
        Fault::NatsEarlyPing,
        Fault::H2RstStream,
        Fault::H2RefusedStream,
        Fault::H2Goaway,
        Fault::H2TinyWindow,
        Fault::H2MaxStreams1,
        Fault::H2NoStreams,
        Fault::H2ShortBody,
        Fault::H2LongBody,
        Fault::H2EarlyHints,
        Fault::GrpcNotProtobuf,
        Fault::GrpcHtml,
        Fault::GrpcHugePrefix,
        Fault::GrpcHalfMessage,
        Fault::GrpcCompressed,
        Fault::GrpcReservedFlags,
        Fault::GrpcTwoMessages,
        Fault::GrpcNoMessage,
    ];

    /// The name `--fault` takes.
    pub fn name(self) -> &'static str {
        match self {
            Fault::NeverAnswer => "never-answer",
            Fault::StallBody => "stall-body",
            Fault::Trickle => "trickle",
            Fault::EndlessChunks => "endless-chunks",
            Fault::EndlessHeaders => "endless-headers",
            Fault::ManyHeaders => "many-headers",
            Fault::HugeBody => "huge-body",
            Fault::Garbage => "garbage",
            Fault::Http09 => "http09",
            Fault::BadContentLength => "bad-content-length",
            Fault::BadChunkSize => "bad-chunk-size",
            Fault::RstBeforeResponse => "rst-before-response",
            Fault::RstMidHeaders => "rst-mid-headers",
            Fault::RstMidBody => "rst-mid-body",
            Fault::FinBeforeResponse => "fin-before-response",
            Fault::FinMidBody => "fin-mid-body",
            Fault::ConnectionCloseEverywhere => "connection-close-everywhere",
            Fault::Status100Then200 => "status-100-then-200",
            Fault::Status101 => "status-101",
            Fault::ListenerCloses => "listener-closes",
            Fault::CloseEveryOther => "close-every-other",
            Fault::TlsAlert => "tls-alert",
            Fault::TlsGarbage => "tls-garbage",
            Fault::TlsStall => "tls-stall",
            Fault::NatsGarbage => "nats-garbage",
            Fault::NatsNoInfo => "nats-no-info",
            Fault::NatsAuthError => "nats-auth-error",
            Fault::NatsEarlyPing => "nats-early-ping",
            Fault::H2RstStream => "h2-rst-stream",
            Fault::H2RefusedStream => "h2-refused-stream",
            Fault::H2Goaway => "h2-goaway",
            Fault::H2TinyWindow => "h2-tiny-window",
            Fault::H2MaxStreams1 => "h2-max-streams-1",
            Fault::H2NoStreams => "h2-no-streams",
            Fault::H2ShortBody => "h2-short-body",
            Fault::H2LongBody => "h2-long-body",
            Fault::H2EarlyHints => "h2-early-hints",
            Fault::GrpcNotProtobuf => "grpc-not-protobuf",
            Fault::GrpcHtml => "grpc-html",
            Fault::GrpcHugePrefix => "grpc-huge-prefix",
            Fault::GrpcHalfMessage => "grpc-half-message",
            Fault::GrpcCompressed => "grpc-compressed",
            Fault::GrpcReservedFlags => "grpc-reserved-flags",
            Fault::GrpcTwoMessages => "grpc-two-messages",
            Fault::GrpcNoMessage => "grpc-no-message",
        }
    }

    /// The protocol it speaks.
    pub fn kind(self) -> FaultKind {
        match self {
            Fault::TlsAlert | Fault::TlsGarbage | Fault::TlsStall => FaultKind::Tls,
            Fault::NatsGarbage | Fault::NatsNoInfo | Fault::NatsAuthError | Fault::NatsEarlyPing => FaultKind::Nats,
            Fault::H2RstStream
            | Fault::H2RefusedStream
            | Fault::H2Goaway
            | Fault::H2TinyWindow
            | Fault::H2MaxStreams1
            | Fault::H2NoStreams
            | Fault::H2ShortBody
            | Fault::H2LongBody
            | Fault::H2EarlyHints
            | Fault::GrpcNotProtobuf
            | Fault::GrpcHtml
            | Fault::GrpcHugePrefix
            | Fault::GrpcHalfMessage
            | Fault::GrpcCompressed
            | Fault::GrpcReservedFlags
            | Fault::GrpcTwoMessages
            | Fault::GrpcNoMessage => FaultKind::H2,
            _ => FaultKind::Http,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--fault` name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown fault '{given}': use one of {}", Fault::ALL.map(Fault::name).join(", "))]
pub struct UnknownFault {
    given: String,
}

impl FromStr for Fault {
    type Err = UnknownFault;

    fn from_str(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFault { given: s.to_string() })
    }
}

/// Serves one accepted connection with `fault`; `tls` wraps HTTP faults.
pub(crate) async fn connection(stream: TcpStream, fault: Fault, tls: Option<&tokio_rustls::TlsAcceptor>) {
    let work = async move {
        match fault.kind() {
            FaultKind::Tls => tls_fault(stream, fault).await,
            FaultKind::Nats => nats_fault(stream, fault).await,
            FaultKind::H2 => crate::h2fault::serve(stream, fault).await,
            FaultKind::Http if fault == Fault::ListenerCloses => {
                drop(stream);
                Ok(())
            }
            FaultKind::Http if fault == Fault::CloseEveryOther => close_every_other(stream).await,
            FaultKind::Http => match tls {
                None => http_fault(stream, fault).await,
                Some(acceptor) => http_fault(acceptor.accept(stream).await?, fault).await,
            },
        }
    };
    // Whatever the client does, the connection ends within the limit.
    let _ = tokio::time::timeout(HOLD_LIMIT, work).await;
}

/// [`Fault::CloseEveryOther`], on raw TCP (before any TLS).
async fn close_every_other(mut stream: TcpStream) -> io::Result<()> {
    thread_local! {
        static ACCEPTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let n = ACCEPTED.with(|a| a.replace(a.get() + 1));
    if n % 2 == 1 {
        // Whatever the client sent is read first, so that the close is a
        // FIN, not a RST.
        let _ = tokio::time::timeout(CLOSE_AFTER, drain(&mut stream)).await;
        return Ok(());
    }
    drain(&mut stream).await
}

async fn http_fault<S: LabStream>(mut s: S, fault: Fault) -> io::Result<()> {
    let mut buf = Vec::new();
    // Faults that answer every request on a kept-alive connection loop;
    // every other one misbehaves once and ends the connection.
    loop {
        if !read_request(&mut s, &mut buf).await? {
            return Ok(());
        }
        match fault {
            Fault::NeverAnswer => return drain(&mut s).await,
            Fault::StallBody => {
                send(
                    &mut s,
                    b"HTTP/1.1 200 OK\r\nServer: throng-lab\r\nContent-Length: 1000\r\n\r\n",
                )
                .await?;
                return drain(&mut s).await;
            }
            Fault::Trickle => {
                for &b in b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\ntrickled" {
                    send(&mut s, &[b]).await?;
                    tokio::time::sleep(TRICKLE_EVERY).await;
                }
            }
            Fault::EndlessChunks => {
                send(&mut s, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").await?;
                let mut batch = Vec::with_capacity(16 * 1030);
                for _ in 0..16 {
                    batch.extend_from_slice(b"400\r\n");
                    batch.resize(batch.len() + 0x400, b'c');
                    batch.extend_from_slice(b"\r\n");
                }
                endless(&mut s, &batch).await?;
            }
            Fault::EndlessHeaders => {
                send(&mut s, b"HTTP/1.1 200 OK\r\n").await?;
                endless(&mut s, &b"X-Endless: and-on-and-on-and-on\r\n".repeat(128)).await?;
            }
            Fault::ManyHeaders => {
                send(&mut s, b"HTTP/1.1 200 OK\r\n").await?;
                let batch = b"X-Many: 1\r\n".repeat(1000);
                for _ in 0..MANY_HEADERS / 1000 {
                    send(&mut s, &batch).await?;
                }
                send(&mut s, b"Content-Length: 0\r\n\r\n").await?;
            }
            Fault::HugeBody => {
                send(
                    &mut s,
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {HUGE_BODY}\r\n\r\n").as_bytes(),
                )
                .await?;
                write_filler(&mut s, HUGE_BODY).await?;
                s.flush().await?;
            }
            Fault::Garbage => return close(s, b"\x00\x01\x02\xff\xfeTHROWN\x7f\x80 NOT HTTP \r\n\r\n\x1b[0m").await,
            Fault::Http09 => return close(s, b"<html><body>HTTP/0.9 has no status line</body></html>\n").await,
            Fault::BadContentLength => return close(s, b"HTTP/1.1 200 OK\r\nContent-Length: -12\r\n\r\nbad").await,
            Fault::BadChunkSize => {
                let reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
                return close(s, reply).await;
            }
            Fault::RstBeforeResponse => return reset(s),
            Fault::RstMidHeaders => {
                send(&mut s, b"HTTP/1.1 200 OK\r\nServer: throng-lab\r\nContent-Len").await?;
                return reset(s);
            }
            Fault::RstMidBody => {
                send(&mut s, &mid_body()).await?;
                return reset(s);
            }
            Fault::FinBeforeResponse => return close(s, b"").await,
            Fault::FinMidBody => return close(s, &mid_body()).await,
            Fault::ConnectionCloseEverywhere => {
                return close(
                    s,
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
                )
                .await;
            }
            Fault::Status100Then200 => {
                send(
                    &mut s,
                    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                )
                .await?;
            }
            Fault::Status101 => {
                send(
                    &mut s,
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                )
                .await?;
                return drain(&mut s).await;
            }
            // Not HTTP faults: connection() never sends them here.
            _ => return Ok(()),
        }
    }
}

/// A head announcing 1000 bytes and the first 100 of them.
fn mid_body() -> Vec<u8> {
    let mut v = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec();
    v.resize(v.len() + 100, b'b');
    v
}

async fn tls_fault(mut s: TcpStream, fault: Fault) -> io::Result<()> {
    // The ClientHello (or its first part): answering before it arrives
    // would be a different fault.
    let mut hello = [0u8; 4096];
    if s.read(&mut hello).await? == 0 {
        return Ok(());
    }
    match fault {
        // A fatal alert record: TLS 1.2 framing, level 2 (fatal),
        // description 40 (handshake_failure).
        Fault::TlsAlert => send(&mut s, &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]).await?,
        // Content type 0x48 ('H') is no TLS record: a plain-HTTP server.
        Fault::TlsGarbage => send(&mut s, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await?,
        _ => {}
    }
    if fault != Fault::TlsStall {
        s.shutdown().await?;
    }
    drain(&mut s).await
}

async fn nats_fault(mut s: TcpStream, fault: Fault) -> io::Result<()> {
    match fault {
        Fault::NatsGarbage => send(&mut s, b"\x00\x01 GARBAGE, not a NATS greeting\r\n").await?,
        Fault::NatsAuthError | Fault::NatsEarlyPing => {
            let info: &[u8] = if fault == Fault::NatsAuthError {
                b"INFO {\"server_id\":\"throng-lab-fault\",\"server_name\":\"throng-lab\",\"version\":\"2.10.0\",\
                  \"proto\":1,\"host\":\"127.0.0.1\",\"max_payload\":1048576,\"auth_required\":true}\r\n"
            } else {
                b"INFO {\"server_id\":\"throng-lab-fault\",\"server_name\":\"throng-lab\",\"version\":\"2.10.0\",\
                  \"proto\":1,\"host\":\"127.0.0.1\",\"max_payload\":1048576}\r\n"
            };
            send(&mut s, info).await?;
            // Wait for CONNECT (and the PING that follows it).
            let mut line = Vec::new();
            let mut chunk = [0u8; 4096];
            while !line.contains(&b'\n') {
                let n = s.read(&mut chunk).await?;
                if n == 0 || line.len() > MAX_REQUEST_HEAD {
                    return Ok(());
                }
                line.extend_from_slice(&chunk[..n]);
            }
            if fault == Fault::NatsAuthError {
                send(&mut s, b"-ERR 'Authorization Violation'\r\n").await?;
                s.shutdown().await?;
            } else {
                // The server's first PING overtakes the PONG of CONNECT; then
                // the connection is held, as a real server holds it.
                send(&mut s, b"PING\r\nPONG\r\n").await?;
            }
        }
        _ => {}
    }
    drain(&mut s).await
}

/// Reads one complete request into `buf` and removes it; false when the
/// client closed first (or sent something that is not a request).
async fn read_request<S: LabStream>(s: &mut S, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 4096];
    loop {
        match parse_request(buf) {
            Parsed::Request(req) => {
                let used = req.len;
                buf.drain(..used);
                return Ok(true);
            }
            Parsed::Bad(_) => return Ok(false),
            Parsed::Partial if buf.len() > MAX_REQUEST_HEAD => return Ok(false),
            Parsed::Partial => {}
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Ok(false);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn send<S: AsyncWriteExt + Unpin>(s: &mut S, bytes: &[u8]) -> io::Result<()> {
    s.write_all(bytes).await?;
    s.flush().await
}

/// Writes `batch` again and again until the client goes away (a write
/// fails) or [`HOLD_LIMIT`] ends it.
async fn endless<S: LabStream>(s: &mut S, batch: &[u8]) -> io::Result<()> {
    loop {
        send(s, batch).await?;
        tokio::time::sleep(ENDLESS_PAUSE).await;
    }
}

/// Reads and discards until the client closes.
async fn drain<S: AsyncReadExt + Unpin>(s: &mut S) -> io::Result<()> {
    let mut sink = [0u8; 4096];
    while s.read(&mut sink).await? > 0 {}
    Ok(())
}

/// Writes `bytes`, then closes with a FIN (the request was read, so the
/// kernel has nothing unread that would turn the close into a RST).
async fn close<S: LabStream>(mut s: S, bytes: &[u8]) -> io::Result<()> {
    send(&mut s, bytes).await?;
    // A FIN on the socket itself: a TLS close_notify would be a clean end.
    socket2::SockRef::from(s.tcp()).shutdown(std::net::Shutdown::Write)?;
    Ok(())
}

/// Closes with a RST.
fn reset<S: LabStream>(s: S) -> io::Result<()> {
    socket2::SockRef::from(s.tcp()).set_linger(Some(Duration::ZERO))?;
    drop(s);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for f in Fault::ALL {
            assert_eq!(f.name().parse::<Fault>().unwrap(), f);
        }
        let mut names: Vec<_> = Fault::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len(), "names are unique");
        let e = "nope".parse::<Fault>().unwrap_err().to_string();
        assert!(e.starts_with("unknown fault 'nope': use one of never-answer, "), "{e}");
        assert!(!e.contains('\n'));
    }
}
