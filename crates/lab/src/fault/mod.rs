//! Hostile servers on demand: `throng serve --fault NAME` answers every
//! connection with one [`Fault`].
//!
//! ```text
//!  accept ─► Fault::kind()
//!              ├─ Http: (TLS accept if --tls) ─► read a request ─► misbehave
//!              ├─ Tls:  raw TCP, read the ClientHello ─► alert | garbage | silence
//!              ├─ Nats: raw TCP, speak (or fail to speak) the NATS greeting
//!              ├─ Mqtt: raw TCP, read CONNECT ─► no CONNACK | a refusal | bad bytes | DISCONNECT
//!              │        | a session (unanswered pings, a huge PUBLISH) | mqtt-broker
//!              └─ H2:   HTTP/2 with prior knowledge (h2c), see crate::h2fault
//! ```
//!
//! Every fault is cheap and bounded: loops that write stop when a write
//! fails (the client went away), waits stop when the client closes, and no
//! connection is kept longer than [`HOLD_LIMIT`] (an MQTT broker session:
//! [`SESSION_LIMIT`]).

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{Parsed, parse_request};
use crate::stream::{LabStream, write_filler};

pub(crate) mod kind;
mod mqtt;

use self::kind::{CLOSE_AFTER, HUGE_BODY, MANY_HEADERS, TRICKLE_EVERY};
pub use self::kind::{Fault, FaultKind, HOLD_LIMIT, SESSION_LIMIT, UnknownFault};

/// Largest request a fault reads before misbehaving.
const MAX_REQUEST_HEAD: usize = 64 * 1024;
/// Pause between two batches of an endless fault, so that one of them does
/// not take a whole core of a shared machine.
const ENDLESS_PAUSE: Duration = Duration::from_millis(1);

/// Serves one accepted connection with `fault`; `tls` wraps HTTP faults.
pub(crate) async fn connection(stream: TcpStream, fault: Fault, tls: Option<&tokio_rustls::TlsAcceptor>) {
    // The other kinds are boxed: this future is as large as its largest
    // branch, and an MQTT session (`mqtt-broker`, many held at once) keeps
    // it for as long as it lasts.
    let work = async move {
        match fault.kind() {
            FaultKind::Tls => Box::pin(tls_fault(stream, fault)).await,
            FaultKind::Nats => Box::pin(nats_fault(stream, fault)).await,
            FaultKind::Mqtt => mqtt::serve(stream, fault).await,
            FaultKind::H2 => Box::pin(crate::h2fault::serve(stream, fault)).await,
            FaultKind::Http if fault == Fault::ListenerCloses => {
                drop(stream);
                Ok(())
            }
            FaultKind::Http if fault == Fault::CloseEveryOther => Box::pin(close_every_other(stream)).await,
            FaultKind::Http => match tls {
                None => Box::pin(http_fault(stream, fault)).await,
                Some(acceptor) => {
                    Box::pin(async move { http_fault(acceptor.accept(stream).await?, fault).await }).await
                }
            },
        }
    };
    // Whatever the client does, the connection ends within the limit.
    let _ = tokio::time::timeout(fault.hold_limit(), work).await;
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
    #![allow(clippy::unwrap_used)]

    /// A held `mqtt-broker` session keeps this future (boxed by the server)
    /// for its whole life: it stays under 1 KiB, not the ~8 KiB of the
    /// largest fault: 100,000 held sessions cost the lab ~100 MB of tasks,
    /// not ~850 MB.
    #[tokio::test]
    async fn an_mqtt_session_is_small() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = tokio::net::TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let f = super::connection(c, super::Fault::MqttBroker, None);
        assert!(std::mem::size_of_val(&f) < 1024, "{}", std::mem::size_of_val(&f));
    }
}
