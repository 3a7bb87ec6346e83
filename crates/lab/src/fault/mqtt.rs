//! The MQTT faults: a broker that reads CONNECT and then misbehaves in one
//! way a real broker will not on demand.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Fault, drain, send};

/// How long [`Fault::MqttDisconnect`] holds a connection before its DISCONNECT.
pub const DISCONNECT_AFTER: Duration = Duration::from_millis(500);

/// Largest CONNECT read.
const MAX_CONNECT: usize = 64 * 1024;

/// Reads CONNECT: its protocol level (4: 3.1.1, 5), or None when the
/// client sent something else or went away.
async fn read_connect(s: &mut TcpStream) -> io::Result<Option<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
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
        // A remaining length running into a fifth byte.
        Fault::MqttBadLength => send(&mut s, &[0x20, 0xff, 0xff, 0xff, 0xff, 0x01]).await?,
        // A CONNACK claiming 200 MiB, and a few of its bytes.
        Fault::MqttOversized => send(&mut s, &[0x20, 0x80, 0x80, 0x80, 0x64, 0, 0, 0, 0]).await?,
        // DISCONNECT, server shutting down (0x8B), where CONNACK belongs.
        Fault::MqttDisconnectAtConnect => send(&mut s, &[0xe0, 1, 0x8b]).await?,
        Fault::MqttDisconnect => {
            let ok: &[u8] = if v5 { &[0x20, 3, 0, 0, 0] } else { &[0x20, 2, 0, 0] };
            send(&mut s, ok).await?;
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
