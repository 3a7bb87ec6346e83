//! The MQTT faults: a broker that reads CONNECT and then misbehaves in one
//! way a real broker will not on demand; and `mqtt-broker`, one that
//! behaves (CONNACK, PINGRESP), cheap enough to hold many sessions.
//!
//! ```text
//!  CONNECT ─► fault: silence | CONNACK refused | bad bytes | DISCONNECT
//!                   | CONNACK 0, then a 256 MiB PUBLISH
//!          └► mqtt-broker / mqtt-no-pingresp: CONNACK 0 ─► packets, each
//!             skipped unread but PINGREQ (PINGRESP, or nothing) and
//!             DISCONNECT (the close)
//! ```

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Fault, send};
use crate::stream::write_filler;

/// How long [`Fault::MqttDisconnect`] holds a connection before its DISCONNECT.
pub const DISCONNECT_AFTER: Duration = Duration::from_millis(500);

/// The remaining length of [`Fault::MqttHugePublish`]'s PUBLISH: the
/// largest MQTT allows.
const HUGE_PUBLISH: u64 = 268_435_455;

/// Largest CONNECT read.
const MAX_CONNECT: usize = 64 * 1024;

/// Reads CONNECT: its protocol level (4: 3.1.1, 5), or None when the
/// client sent something else or went away.
async fn read_connect(s: &mut TcpStream) -> io::Result<Option<u8>> {
    let mut buf = Vec::new();
    // Small: a held session's task keeps this much while it waits.
    let mut chunk = [0u8; 256];
    loop {
        // Fixed header (type 1), remaining length, then "MQTT" and the level.
        if buf.first().is_some_and(|&b| (b >> 4) != 1u8) {
            return Ok(None);
        }
        let mut len = 0usize;
        let mut size = None;
        for i in 0..4 {
            let Some(&b) = buf.get(1 + i) else { break };
            len |= usize::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                size = Some(2 + i);
                break;
            }
        }
        if let Some(size) = size {
            if len > MAX_CONNECT {
                return Ok(None);
            }
            if buf.len() >= size + len {
                return Ok(buf.get(size + 6).copied());
            }
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 || buf.len() > MAX_CONNECT {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// CONNACK, accepted, no session present (no properties in MQTT 5).
fn connack_ok(v5: bool) -> &'static [u8] {
    if v5 { &[0x20, 3, 0, 0, 0] } else { &[0x20, 2, 0, 0] }
}

/// Where [`session`] is in the client's byte stream.
#[derive(Debug, PartialEq, Eq)]
enum At {
    /// At a fixed header: its first byte, and the length bytes read so far
    /// (`len` built from them, `shift` for the next).
    Header { first: Option<u8>, len: usize, shift: u32 },
    /// Inside a body: bytes of it still to skip.
    Body(usize),
}

/// What one byte of the stream asks of the broker.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Nothing,
    Pingreq,
    Disconnect,
    /// A remaining length running past four bytes: not MQTT.
    Malformed,
}

impl At {
    const START: At = At::Header {
        first: None,
        len: 0,
        shift: 0,
    };

    /// Feeds `buf`, calling `on` for each packet that asks something; stops
    /// at the first step that ends the session.
    fn feed(&mut self, buf: &[u8], mut on: impl FnMut(&Step)) -> Step {
        let mut i = 0;
        while i < buf.len() {
            match self {
                At::Body(left) => {
                    let take = (*left).min(buf.len() - i);
                    *left -= take;
                    i += take;
                    if *left == 0 {
                        *self = At::START;
                    }
                }
                At::Header { first: None, .. } => {
                    *self = At::Header {
                        first: Some(buf[i]),
                        len: 0,
                        shift: 0,
                    };
                    i += 1;
                }
                At::Header {
                    first: Some(first),
                    len,
                    shift,
                } => {
                    let b = buf[i];
                    i += 1;
                    *len |= usize::from(b & 0x7f) << *shift;
                    if b & 0x80 != 0 {
                        *shift += 7;
                        if *shift >= 28 {
                            return Step::Malformed;
                        }
                        continue;
                    }
                    let step = match (*first >> 4, *len) {
                        (12, 0) => Step::Pingreq,
                        (14, _) => Step::Disconnect,
                        _ => Step::Nothing,
                    };
                    *self = if *len == 0 { At::START } else { At::Body(*len) };
                    match step {
                        Step::Nothing => {}
                        Step::Pingreq => on(&step),
                        Step::Disconnect | Step::Malformed => return step,
                    }
                }
            }
        }
        Step::Nothing
    }
}

/// After CONNACK: every packet skipped unread (nothing buffered past a
/// small read), PINGREQ answered when `pong`, the close at DISCONNECT, at
/// bytes that are not MQTT, or when the client goes.
async fn session(s: &mut TcpStream, pong: bool) -> io::Result<()> {
    let mut at = At::START;
    let mut buf = [0u8; 256];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let mut pings = 0usize;
        let step = at.feed(&buf[..n], |_| pings += 1);
        if pong {
            for _ in 0..pings {
                send(s, &[0xd0, 0]).await?;
            }
        }
        if step != Step::Nothing {
            return Ok(());
        }
    }
}

/// Reads and discards until the client closes (a small buffer: see
/// [`session`]).
async fn drain(s: &mut TcpStream) -> io::Result<()> {
    let mut sink = [0u8; 256];
    while s.read(&mut sink).await? > 0 {}
    Ok(())
}

/// Serves one connection with an MQTT fault.
pub(super) async fn serve(mut s: TcpStream, fault: Fault) -> io::Result<()> {
    let Some(level) = read_connect(&mut s).await? else {
        return Ok(());
    };
    let v5 = level == 5;
    match fault {
        Fault::MqttNoConnack => {}
        // Server unavailable: 3 in 3.1.1, 0x88 in 5 (no properties).
        Fault::MqttConnackRefused if v5 => send(&mut s, &[0x20, 3, 0, 0x88, 0]).await?,
        Fault::MqttConnackRefused => send(&mut s, &[0x20, 2, 0, 3]).await?,
        Fault::MqttBadPassword if v5 => send(&mut s, &[0x20, 3, 0, 0x86, 0]).await?,
        Fault::MqttBadPassword => send(&mut s, &[0x20, 2, 0, 4]).await?,
        Fault::MqttNotAuthorized if v5 => send(&mut s, &[0x20, 3, 0, 0x87, 0]).await?,
        Fault::MqttNotAuthorized => send(&mut s, &[0x20, 2, 0, 5]).await?,
        // A packet of the reserved type 0, and text that is not MQTT either.
        Fault::MqttGarbage => send(&mut s, b"\x00\x0cnot MQTT \xde\xad\xbe\xef").await?,
        Fault::MqttHugePublish => {
            send(&mut s, connack_ok(v5)).await?;
            send(&mut s, &[0x30, 0xff, 0xff, 0xff, 0x7f]).await?;
            write_filler(&mut s, HUGE_PUBLISH).await?;
        }
        Fault::MqttBroker | Fault::MqttNoPingresp => {
            send(&mut s, connack_ok(v5)).await?;
            return session(&mut s, fault == Fault::MqttBroker).await;
        }
        // A remaining length running into a fifth byte.
        Fault::MqttBadLength => send(&mut s, &[0x20, 0xff, 0xff, 0xff, 0xff, 0x01]).await?,
        // A CONNACK claiming 200 MiB, and a few of its bytes.
        Fault::MqttOversized => send(&mut s, &[0x20, 0x80, 0x80, 0x80, 0x64, 0, 0, 0, 0]).await?,
        // DISCONNECT, server shutting down (0x8B), where CONNACK belongs.
        Fault::MqttDisconnectAtConnect => send(&mut s, &[0xe0, 1, 0x8b]).await?,
        Fault::MqttDisconnect => {
            send(&mut s, connack_ok(v5)).await?;
            // Read what the client sends meanwhile (its PINGREQs go unanswered).
            let _ = tokio::time::timeout(DISCONNECT_AFTER, drain(&mut s)).await;
            if v5 {
                send(&mut s, &[0xe0, 1, 0x8b]).await?;
            }
            s.shutdown().await?;
        }
        _ => {}
    }
    drain(&mut s).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(chunks: &[&[u8]]) -> (usize, Step) {
        let mut at = At::START;
        let mut pings = 0;
        for c in chunks {
            let step = at.feed(c, |_| pings += 1);
            if step != Step::Nothing {
                return (pings, step);
            }
        }
        (pings, Step::Nothing)
    }

    #[test]
    fn pings_are_found_between_skipped_packets_however_the_bytes_are_cut() {
        // PINGREQ, a PUBLISH of 200 bytes (two length bytes), PINGREQ, DISCONNECT.
        let mut bytes = vec![0xc0, 0, 0x30, 0xc8, 0x01];
        bytes.extend(std::iter::repeat_n(0xc0, 200));
        bytes.extend([0xc0, 0, 0xe0, 0, 0xc0, 0]);
        assert_eq!(steps(&[&bytes]), (2, Step::Disconnect));
        let ones: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(steps(&ones), (2, Step::Disconnect));
        let threes: Vec<&[u8]> = bytes.chunks(3).collect();
        assert_eq!(steps(&threes), (2, Step::Disconnect));
    }

    #[test]
    fn a_length_past_four_bytes_ends_the_session_and_a_huge_one_is_skipped() {
        assert_eq!(steps(&[&[0x30, 0xff, 0xff, 0xff, 0xff, 0x01]]), (0, Step::Malformed));
        // 256 MiB announced: skipped as it comes, never buffered.
        let mut at = At::START;
        assert_eq!(at.feed(&[0x30, 0xff, 0xff, 0xff, 0x7f, 1, 2], |_| {}), Step::Nothing);
        assert_eq!(at, At::Body((1 << 28) - 1 - 2));
    }
}
