//! `GET /ws`: a WebSocket echo endpoint (RFC 6455), so that storms of
//! WebSocket connections can be held against the lab at any scale
//! (`throng serve --procs N`), not only against a Python server.
//!
//! ```text
//!  GET /ws + Upgrade: websocket ─► 101 with Sec-WebSocket-Accept
//!     └─ frames in (masked) ─► text/binary echoed as they came (unmasked),
//!                              ping ─► pong, close ─► close with its code, end
//! ```
//!
//! A held socket costs the socket and a task; the read buffer exists only
//! while a frame is being read.

use std::io;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::stream::LabStream;

/// RFC 6455's GUID, appended to the key before hashing.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest frame payload echoed; a larger one is closed with 1009
/// (message too big).
const MAX_PAYLOAD: u64 = 1 << 20;

/// The `Sec-WebSocket-Accept` for `key`.
pub(crate) fn accept_for(key: &str) -> String {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.trim().as_bytes());
    ctx.update(GUID.as_bytes());
    STANDARD.encode(ctx.finish().as_ref())
}

/// Writes the `101 Switching Protocols` answering `key` into `out`.
pub(crate) fn switching(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n");
    out.extend_from_slice(b"Sec-WebSocket-Accept: ");
    out.extend_from_slice(accept_for(key).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
}

/// One frame read from the client.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub fin: bool,
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// What the front of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A frame and the bytes it used.
    Frame(Frame, usize),
    /// Not enough bytes yet.
    Partial,
    /// A frame the server must refuse: the close code to send.
    Refuse(u16),
}

/// Parses one client frame from the front of `buf` (client frames are
/// masked; an unmasked one is a protocol error, 1002).
pub(crate) fn parse(buf: &[u8]) -> Parsed {
    if buf.len() < 2 {
        return Parsed::Partial;
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0f;
    if buf[0] & 0x70 != 0 || buf[1] & 0x80 == 0 || ![0, 1, 2, 8, 9, 10].contains(&opcode) {
        return Parsed::Refuse(1002);
    }
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            (u64::from_be_bytes(b), 10)
        }
        126 | 127 => return Parsed::Partial,
        n => (u64::from(n), 2),
    };
    if opcode >= 8 && (len > 125 || !fin) {
        return Parsed::Refuse(1002);
    }
    if len > MAX_PAYLOAD {
        return Parsed::Refuse(1009);
    }
    // Bounded by MAX_PAYLOAD above.
    let len = len as usize;
    if buf.len() < at + 4 + len {
        return Parsed::Partial;
    }
    let mask = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
    at += 4;
    let payload = buf[at..at + len]
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    Parsed::Frame(Frame { fin, opcode, payload }, at + len)
}

/// Appends a server frame (unmasked) to `out`.
pub(crate) fn frame(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8]) {
    out.push(if fin { 0x80 } else { 0 } | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// Echoes frames on an upgraded connection until the client closes it
/// (its close answered with the same code) or goes away. `leftover`: bytes
/// read after the upgrade request.
pub(crate) async fn echo<S: LabStream>(stream: &mut S, leftover: &[u8]) -> io::Result<()> {
    let mut buf = leftover.to_vec();
    let mut out = Vec::new();
    loop {
        loop {
            out.clear();
            match parse(&buf) {
                Parsed::Partial => break,
                Parsed::Refuse(code) => {
                    frame(&mut out, true, 8, &code.to_be_bytes());
                    stream.write_all(&out).await?;
                    return Ok(());
                }
                Parsed::Frame(f, used) => {
                    buf.drain(..used);
                    match f.opcode {
                        0..=2 => frame(&mut out, f.fin, f.opcode, &f.payload),
                        9 => frame(&mut out, true, 10, &f.payload),
                        10 => {}
                        _ => {
                            // Close: answer with its code (the first two
                            // bytes), then end the connection.
                            let code = f.payload.get(..2).unwrap_or(&[]);
                            frame(&mut out, true, 8, code);
                            stream.write_all(&out).await?;
                            return Ok(());
                        }
                    }
                    if !out.is_empty() {
                        stream.write_all(&out).await?;
                    }
                }
            }
        }
        if buf.is_empty() {
            // Hold without a buffer until the client says something.
            buf = Vec::new();
            if !stream.is_tls() {
                stream.tcp().readable().await?;
            }
        }
        let at = buf.len();
        buf.resize(at + 4096, 0);
        let n = stream.read(&mut buf[at..]).await?;
        buf.truncate(at + n);
        if n == 0 {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut v = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            n if n < 126 => v.push(0x80 | n as u8),
            n if n <= 65535 => {
                v.push(0x80 | 126);
                v.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                v.push(0x80 | 127);
                v.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        v.extend_from_slice(&mask);
        v.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        v
    }

    #[test]
    fn accept_is_rfc_6455s_example() {
        assert_eq!(accept_for("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn frames_unmask_at_every_length_encoding() {
        for n in [0usize, 5, 125, 126, 65535, 65536] {
            let payload: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let wire = masked(true, 2, &payload);
            for cut in [1, wire.len() / 2, wire.len() - 1] {
                assert_eq!(parse(&wire[..cut]), Parsed::Partial, "{n} cut at {cut}");
            }
            match parse(&wire) {
                Parsed::Frame(f, used) => {
                    assert_eq!((f.fin, f.opcode, used), (true, 2, wire.len()));
                    assert_eq!(f.payload, payload);
                }
                other => panic!("{n}: {other:?}"),
            }
        }
    }

    #[test]
    fn hostile_frames_are_refused_not_buffered() {
        // Unmasked, reserved bits, unknown opcode, long or fragmented control.
        assert_eq!(parse(&[0x81, 0x00]), Parsed::Refuse(1002));
        assert_eq!(
            parse(
                &masked(true, 1, b"x")
                    .iter()
                    .enumerate()
                    .map(|(i, b)| if i == 0 { b | 0x40 } else { *b })
                    .collect::<Vec<_>>()
            ),
            Parsed::Refuse(1002)
        );
        assert_eq!(parse(&masked(true, 3, b"")), Parsed::Refuse(1002));
        assert_eq!(parse(&masked(true, 9, &[0; 126])), Parsed::Refuse(1002));
        assert_eq!(parse(&masked(false, 8, b"")), Parsed::Refuse(1002));
        // A 2^63-byte claim is refused from its header alone.
        let mut huge = vec![0x82, 0x80 | 127];
        huge.extend_from_slice(&(1u64 << 63).to_be_bytes());
        assert_eq!(parse(&huge), Parsed::Refuse(1009));
    }

    #[test]
    fn server_frames_use_the_shortest_length() {
        let mut out = Vec::new();
        frame(&mut out, true, 1, b"hi");
        assert_eq!(out, b"\x81\x02hi");
        out.clear();
        frame(&mut out, true, 2, &[0; 300]);
        assert_eq!(&out[..4], &[0x82, 126, 1, 44]);
    }
}
