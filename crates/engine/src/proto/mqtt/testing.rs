//! Test helpers for the pub/sub clients: a run on a plan made from flags,
//! an in-memory stream that counts its writes, and a broker that answers
//! each read's packets in one write.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use throng_plan::{MqttPlan, PubSubArgs};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::sync::Notify;

use super::client::Run;
use super::codec::{self, Next, Reader, Version};
use crate::Control;

/// A run of one publisher and one subscriber publishing `messages` at
/// `qos`, `window` in flight.
pub(super) fn run(qos: u8, messages: u64, window: u64) -> Rc<Run> {
    let plan = MqttPlan::from_args(PubSubArgs {
        target: "mqtt://127.0.0.1:1883".to_string(),
        publishers: Some(1),
        subscribers: Some(1),
        qos: Some(qos),
        messages: Some(messages),
        window: Some(window),
        ..PubSubArgs::default()
    })
    .expect("a valid plan");
    let addr = "127.0.0.1:1883".parse().expect("an address");
    Rc::new(Run::new(Arc::new(plan), addr, &Control::new(), Instant::now()))
}

/// One end of an in-memory connection, counting the writes made to it.
pub(super) struct Counted {
    inner: DuplexStream,
    pub writes: Rc<Cell<u64>>,
    /// Times the publisher asked TCP to acknowledge at once.
    pub quick_acks: Rc<Cell<u64>>,
    /// Told of each such ask (the Nagle broker's ACK).
    pub acked: Rc<Notify>,
}

/// A client's end (counted) and the broker's, each holding up to 1 MiB
/// unread.
pub(super) fn pair() -> (Counted, DuplexStream) {
    let (a, b) = tokio::io::duplex(1 << 20);
    (
        Counted {
            inner: a,
            writes: Rc::default(),
            quick_acks: Rc::default(),
            acked: Rc::default(),
        },
        b,
    )
}

impl super::client::AckNow for Counted {
    fn ack_now(&self) {
        self.quick_acks.set(self.quick_acks.get() + 1);
        self.acked.notify_one();
    }
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(_))) {
            self.writes.set(self.writes.get() + 1);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What the broker took from a publisher.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Took {
    pub publishes: u64,
    pub pubrels: u64,
    pub disconnected: bool,
}

/// A broker for one publisher: each read's PUBLISHes answered (QoS 1:
/// PUBACK; QoS 2: PUBREC) and PUBRELs (PUBCOMP), all in one write; until
/// the DISCONNECT or the end of the stream.
pub(super) async fn broker(s: DuplexStream) -> Took {
    serve(s, false).await
}

/// The broker of [`broker`] answering as mosquitto does: each answer its
/// own write, the client let run between two (so it reads them one by one).
pub(super) async fn trickling_broker(s: DuplexStream) -> Took {
    serve(s, true).await
}

/// The broker of [`trickling_broker`] behind TCP with Nagle on (as
/// mosquitto's sockets are): once it has written, the next answers wait
/// until the client's ACK comes, with its next data or when it asks for
/// one (`acked`); a client that waits for them without either waits for
/// ever (a real one: for a delayed-ACK timeout, 40 ms or more).
pub(super) async fn nagle_broker(mut s: DuplexStream, acked: Rc<Notify>) -> Took {
    let (mut reader, mut buf, mut held) = (Reader::default(), vec![0u8; 64 * 1024], Vec::new());
    let mut took = Took::default();
    loop {
        let n = tokio::select! {
            n = s.read(&mut buf) => n.unwrap_or(0),
            () = acked.notified() => {
                // The ACK came: what waited goes in one segment.
                if !held.is_empty() {
                    s.write_all(&held).await.expect("the client reads");
                    held.clear();
                }
                continue;
            }
        };
        if n == 0 {
            return took;
        }
        // Data from the client carries its ACK: the first answer goes at
        // once, the rest wait for the next ACK.
        let mut unacked = false;
        reader.push(&buf[..n]);
        while let Some(Next::Packet(h, body)) = reader.next_ref().expect("MQTT") {
            answer(h, body, &mut took, &mut held);
            if !unacked && !held.is_empty() {
                s.write_all(&held).await.expect("the client reads");
                held.clear();
                unacked = true;
            }
        }
        if took.disconnected {
            return took;
        }
    }
}

/// What `serve` and `nagle_broker` answer to one packet, appended to
/// `out`.
fn answer(h: codec::Header, body: &[u8], took: &mut Took, out: &mut Vec<u8>) {
    match h.kind {
        codec::PUBLISH => {
            took.publishes += 1;
            let d = codec::delivery(h, body, Version::V311).expect("a PUBLISH");
            match (d.qos, d.id) {
                (1, Some(id)) => out.extend_from_slice(&codec::puback(id)),
                (2, Some(id)) => out.extend_from_slice(&codec::ack(codec::PUBREC, id)),
                _ => {}
            }
        }
        codec::PUBREL => {
            took.pubrels += 1;
            out.extend_from_slice(&codec::ack(codec::PUBCOMP, u16::from_be_bytes([body[0], body[1]])));
        }
        codec::DISCONNECT => took.disconnected = true,
        _ => {}
    }
}

async fn serve(mut s: DuplexStream, trickle: bool) -> Took {
    let (mut reader, mut buf, mut out) = (Reader::default(), vec![0u8; 64 * 1024], Vec::new());
    let mut took = Took::default();
    loop {
        let n = s.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return took;
        }
        reader.push(&buf[..n]);
        out.clear();
        while let Some(Next::Packet(h, body)) = reader.next_ref().expect("MQTT") {
            answer(h, body, &mut took, &mut out);
            if trickle && !out.is_empty() {
                s.write_all(&out).await.expect("the client reads");
                out.clear();
                tokio::task::yield_now().await;
            }
        }
        if !out.is_empty() {
            s.write_all(&out).await.expect("the client reads");
        }
        if took.disconnected {
            return took;
        }
    }
}
