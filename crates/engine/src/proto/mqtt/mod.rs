//! MQTT on a storm's connections: CONNECT → CONNACK (the handshake), then
//! SUBSCRIBE → SUBACK when asked (the `subscribe` phase); while held, a
//! PINGREQ every keep-alive with its PINGRESP's round trip recorded (phase
//! `pong`), QoS 1 messages acknowledged, a broker's DISCONNECT counted by
//! reason; DISCONNECT before the close. Packets live in [`codec`], free of
//! I/O.
//!
//! ```text
//!  opening ─► handshake: CONNECT ─► CONNACK (refused: mqtt.connack.REASON)
//!                        [SUBSCRIBE ─► SUBACK (refused: mqtt.suback.REASON)]
//!  held    ─► hold: PINGREQ every keep-alive ─► PINGRESP (pong; none by
//!                    the next PINGREQ: mqtt.ping_timeout, closed)
//!  closing ─► disconnect: DISCONNECT
//! ```
//!
//! While connecting, packets are read exactly (header, then body), so
//! nothing the broker sends after CONNACK or SUBACK is read before the hold
//! starts its own reader.
//!
//! A storm's session is held without a task: the storm's holder keeps its
//! socket, [`held`]'s few bytes of state and, over TLS or WebSocket, the
//! layers `crate::transport::held` drives, and does [`hold`]'s work (the
//! same outcomes, counted the same) as its bytes come and its keep-alive
//! ticks; [`hold`] runs in the connection's task only when the holder
//! cannot take it (no epoll set, a stream it cannot take apart).
//!
//! `throng mqtt` (publish/subscribe load) is [`pubsub`]: its clients open
//! in `client.rs`, publish in `publisher.rs`, receive in `subscriber.rs`,
//! and keep their books in `books.rs` (I/O-free).

mod books;
pub(crate) mod client;
pub(crate) mod codec;
pub(crate) mod held;
mod publisher;
pub(crate) mod pubsub;
pub(crate) mod spec;
mod subscriber;
#[cfg(test)]
mod testing;

#[cfg(test)]
mod fuzz;

pub(crate) use spec::Spec;

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::proto::line::done::Done;
use crate::transport::Transport;
use codec::{Malformed, Next, Packet, Reader, Version};

/// Longest the DISCONNECT at the end of a hold may take to write.
const DISCONNECT_LIMIT: Duration = Duration::from_secs(1);

/// The WebSocket subprotocol MQTT asks for (MQTT 3.1.1 and 5, section 6).
pub(crate) const WS_PROTOCOL: &str = "mqtt";

/// The packet identifier of a storm's one SUBSCRIBE.
const SUBSCRIBE_ID: u16 = 1;

pub(crate) fn io_fail(e: io::Error) -> ErrorClass {
    classify(&e, Stage::Exchange)
}

fn malformed(_: Malformed) -> ErrorClass {
    ErrorClass::Mqtt("protocol")
}

/// A refused CONNECT's class, by its code's name.
pub(crate) fn connack_refused(version: Version, code: u8) -> ErrorClass {
    ErrorClass::Mqtt(match version {
        Version::V311 => codec::connack_311(code),
        Version::V5 => codec::connack_5(code),
    })
}

/// A refused SUBSCRIBE's class, by its code's name.
pub(crate) fn suback_refused(version: Version, code: u8) -> ErrorClass {
    ErrorClass::Mqtt(match version {
        // 3.1.1's SUBACK has one failure code, 0x80.
        Version::V311 => "suback.failure",
        Version::V5 => codec::suback_5(code),
    })
}

/// Reads one whole packet off the stream, no byte past it: the fixed
/// header a byte at a time after its first two, then the body.
async fn read_packet(stream: &mut Transport, version: Version) -> Result<Packet, ErrorClass> {
    let mut head = [0u8; 5];
    let mut have = 0;
    let h = loop {
        let want = if have < 2 {
            2 - have
        } else {
            codec::header_needs(&head[..have])
        };
        let n = stream.read(&mut head[have..have + want]).await.map_err(io_fail)?;
        if n == 0 {
            return Err(ErrorClass::Eof);
        }
        have += n;
        match codec::header(&head[..have]) {
            Ok(Some(h)) => break h,
            Ok(None) if have < head.len() => {}
            Ok(None) | Err(_) => return Err(ErrorClass::Mqtt("protocol")),
        }
    };
    if h.len > codec::MAX_PACKET {
        return Err(ErrorClass::Mqtt("packet_too_large"));
    }
    let mut body = vec![0u8; h.len];
    stream.read_exact(&mut body).await.map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => ErrorClass::Eof,
        _ => io_fail(e),
    })?;
    Packet::parse(h, &body, version).map_err(malformed)
}

async fn send<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> Result<(), ErrorClass> {
    stream.write_all(bytes).await.map_err(io_fail)?;
    stream.flush().await.map_err(io_fail)
}

/// MQTT over WebSocket: the upgrade to `path` asking for the subprotocol
/// `mqtt`, before `sleep` ends (else `timeout.handshake`). Returns the
/// stream that carries packets in binary messages, and the upgrade's time.
pub(crate) async fn ws_upgrade(
    stream: Transport,
    path: &str,
    host: &str,
    scratch: &RefCell<Box<[u8]>>,
    sleep: Pin<&mut Sleep>,
) -> Result<(Transport, Duration), ErrorClass> {
    let t = Instant::now();
    tokio::select! {
        biased;
        r = crate::proto::ws::upgrade_stream(stream, path, host, WS_PROTOCOL, scratch) => Ok((r?, t.elapsed())),
        () = sleep => Err(ErrorClass::TimeoutHandshake),
    }
}

/// Over WebSocket, the upgrade first; CONNECT → CONNACK within the
/// deadline `sleep` was armed with, then SUBSCRIBE → SUBACK (when the plan
/// subscribes) within `timeout` more. `conn` is the connection's number
/// (unique over the run): `{{conn}}`.
pub(crate) async fn handshake(
    spec: &Spec,
    mut stream: Transport,
    conn: u64,
    timeout: Duration,
    scratch: &RefCell<Box<[u8]>>,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Done, ErrorClass> {
    let mut upgrade = None;
    if let Some((path, host)) = &spec.websocket {
        let took;
        (stream, took) = ws_upgrade(stream, path, host, scratch, sleep.as_mut()).await?;
        upgrade = Some(took);
    }
    let v = spec.version;
    let client_id = spec::render(&spec.client_id, conn);
    let mut out = Vec::with_capacity(64);
    codec::connect(
        &mut out,
        &codec::Connect {
            version: v,
            client_id: &client_id,
            clean_start: spec.clean_start,
            keepalive_secs: spec.keepalive_secs(),
            session_expiry: spec.session_expiry,
            user: spec.user.as_deref(),
            password: spec.password.as_ref().map(|p| p.expose().as_bytes()),
        },
    );
    let t0 = Instant::now();
    let connack = async {
        send(&mut stream, &out).await?;
        match read_packet(&mut stream, v).await? {
            Packet::Connack { code, .. } => Ok(code),
            Packet::Disconnect { code } => Err(ErrorClass::MqttDisconnected(code)),
            _ => Err(ErrorClass::Mqtt("protocol")),
        }
    };
    let code = tokio::select! {
        biased;
        r = connack => r?,
        () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
    };
    if code != 0 {
        return Err(connack_refused(v, code));
    }
    let handshake = t0.elapsed();
    let mut subscribed = None;
    if let Some((filter, qos)) = &spec.subscribe {
        out.clear();
        codec::subscribe(&mut out, v, SUBSCRIBE_ID, &spec::render(filter, conn), *qos);
        let t1 = Instant::now();
        sleep.as_mut().reset((t1 + timeout).into());
        let suback = async {
            send(&mut stream, &out).await?;
            loop {
                match read_packet(&mut stream, v).await? {
                    Packet::Suback { id: SUBSCRIBE_ID, code } => return Ok(code),
                    // A retained message may come before the SUBACK.
                    Packet::Publish { qos: 1, id: Some(id) } => send(&mut stream, &codec::puback(id)).await?,
                    Packet::Publish { .. } | Packet::Pingresp | Packet::Ack { .. } | Packet::Other { .. } => {}
                    Packet::Disconnect { code } => return Err(ErrorClass::MqttDisconnected(code)),
                    Packet::Connack { .. } | Packet::Suback { .. } => return Err(ErrorClass::Mqtt("protocol")),
                }
            }
        };
        let code = tokio::select! {
            biased;
            r = suback => r?,
            () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
        };
        if code >= 0x80 {
            return Err(suback_refused(v, code));
        }
        subscribed = Some(t1.elapsed());
    }
    Ok(Done {
        stream,
        handshake,
        tls: None,
        exchanges: Vec::new(),
        subscribe: subscribed,
        upgrade,
    })
}

/// Reads once into `scratch` and hands the bytes to `take`; 0 at the end
/// of the stream.
pub(crate) async fn read_some(
    stream: &mut Transport,
    scratch: &RefCell<Box<[u8]>>,
    mut take: impl FnMut(&[u8]),
) -> io::Result<usize> {
    poll_fn(|cx| {
        let mut s = scratch.borrow_mut();
        let mut rb = ReadBuf::new(&mut s[..]);
        match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Ready(Ok(())) => {
                take(rb.filled());
                Poll::Ready(Ok(rb.filled().len()))
            }
        }
    })
    .await
}

/// While a connection is held: a PINGREQ every keep-alive, each PINGRESP's
/// round trip recorded (phase `pong`); QoS 1 messages acknowledged, all
/// messages dropped as they come (a packet over the limit skipped unread).
/// Returns when the broker ends the connection: its DISCONNECT (MQTT 5,
/// counted by reason code), the end of the stream, or bytes that are not
/// MQTT; or when a PINGREQ got no PINGRESP by the next one, a keep-alive
/// later (counted `mqtt.ping_timeout`; this side closes the connection).
pub(crate) async fn hold(ctx: &Ctx, stream: &mut Transport, spec: &Spec) {
    let mut reader = Reader::default();
    let every = spec.keepalive;
    let period = if every.is_zero() {
        Duration::from_secs(3600)
    } else {
        every
    };
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The PINGREQ waiting for its PINGRESP: when it went.
    let mut out: Option<Instant> = None;
    loop {
        tokio::select! {
            n = read_some(stream, &ctx.scratch, |b| reader.push(b)) => {
                if !matches!(n, Ok(n) if n > 0) {
                    return;
                }
                loop {
                    let (h, body) = match reader.next() {
                        Ok(None) => break,
                        Ok(Some(Next::Skipped(_))) => continue,
                        Ok(Some(Next::Packet(h, body))) => (h, body),
                        Err(_) => return,
                    };
                    match Packet::parse(h, &body, spec.version) {
                        Ok(Packet::Pingresp) => {
                            if let Some(at) = out.take() {
                                let now = Instant::now();
                                ctx.rec.borrow_mut().phase(now, Phase::Pong, now - at);
                            }
                        }
                        Ok(Packet::Publish { qos: 1, id: Some(id) }) => {
                            if send(stream, &codec::puback(id)).await.is_err() {
                                return;
                            }
                        }
                        Ok(Packet::Disconnect { code }) => {
                            ctx.rec.borrow_mut().close_code(u16::from(code));
                            return;
                        }
                        Ok(_) => {}
                        Err(_) => return,
                    }
                }
            }
            _ = tick.tick(), if !every.is_zero() => {
                if out.is_some() {
                    // The last PINGREQ went a keep-alive ago and got no
                    // PINGRESP: the broker is gone or stuck (MQTT 3.1.1
                    // 3.1.2.10: the client closes then).
                    ctx.rec.borrow_mut().hold_failed(&ErrorClass::Mqtt("ping_timeout"));
                    return;
                }
                out = Some(Instant::now());
                if send(stream, &codec::PINGREQ_BYTES).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// DISCONNECT before the socket closes (a broker then drops the session's
/// will and logs a clean disconnect), its write within [`DISCONNECT_LIMIT`].
pub(crate) async fn disconnect<S: AsyncWrite + Unpin>(stream: &mut S) {
    let _ = tokio::time::timeout(DISCONNECT_LIMIT, send(stream, &codec::DISCONNECT_BYTES)).await;
}
