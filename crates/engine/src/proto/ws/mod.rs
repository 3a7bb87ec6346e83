//! WebSocket on a storm's connections: the upgrade and the message steps
//! (the handshake), the hold (pings answered, `--ping-every` pings sent and
//! their round trips recorded), and the close handshake at the end.
//! Framing lives in [`frame`], free of I/O.

pub(crate) mod frame;
pub(crate) mod spec;

pub(crate) use spec::{Spec, Step};

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::time::Sleep;

use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::proto::line::done::Done;
use crate::transport::Transport;
use crate::transport::ws::WsStream;
use frame::{Event, Masks, Reader, Upgrade};

/// Longest the close handshake at the end of a hold may take.
const CLOSE_LIMIT: Duration = Duration::from_secs(1);

/// 8 random bytes (the key's nonce, the masks' seed); the clock's if the
/// system's randomness fails.
pub(crate) fn random() -> [u8; 16] {
    let mut b = [0u8; 16];
    if aws_lc_rs::rand::fill(&mut b).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b = nanos.to_le_bytes();
    }
    b
}

pub(crate) fn seed() -> u64 {
    let [a, b, c, d, e, f, g, h, ..] = random();
    u64::from_le_bytes([a, b, c, d, e, f, g, h])
}

pub(crate) fn io_fail(e: io::Error) -> ErrorClass {
    classify(&e, Stage::Exchange)
}

/// A socket's frames in and out over a borrowed transport.
pub(crate) struct Socket<'a> {
    pub(crate) stream: &'a mut Transport,
    pub(crate) reader: Reader,
    pub(crate) masks: Masks,
    pub(crate) out: Vec<u8>,
}

impl<'a> Socket<'a> {
    pub(crate) fn new(stream: &'a mut Transport) -> Socket<'a> {
        Socket {
            stream,
            reader: Reader::default(),
            masks: Masks::new(seed()),
            out: Vec::new(),
        }
    }

    pub(crate) async fn send(&mut self, opcode: u8, payload: &[u8]) -> io::Result<()> {
        self.out.clear();
        let mask = self.masks.next();
        frame::encode(&mut self.out, true, opcode, payload, mask);
        self.stream.write_all(&self.out).await?;
        self.stream.flush().await
    }

    /// The next event. Cancel-safe: bytes read are kept in the reader.
    pub(crate) async fn event(&mut self, scratch: &RefCell<Box<[u8]>>) -> Result<Event, ErrorClass> {
        loop {
            if let Some(e) = self.reader.next().map_err(|_| ErrorClass::WsProtocol)? {
                return Ok(e);
            }
            let reader = &mut self.reader;
            let stream = &mut *self.stream;
            let n = read_some(stream, scratch, |b| reader.push(b)).await.map_err(io_fail)?;
            if n == 0 {
                return Err(ErrorClass::Eof);
            }
        }
    }
}

/// Reads the server's answer to the upgrade `key` was sent with (asking
/// for the subprotocol `protocol`, when there is one): what follows the
/// 101's head (frames the server sent at once), or the class of the
/// refusal. The caller bounds the wait.
pub(crate) async fn read_upgrade(
    stream: &mut Transport,
    scratch: &RefCell<Box<[u8]>>,
    key: &str,
    protocol: Option<&str>,
) -> Result<Vec<u8>, ErrorClass> {
    let mut head = Vec::new();
    loop {
        let n = read_some(stream, scratch, |b| head.extend_from_slice(b))
            .await
            .map_err(io_fail)?;
        match frame::check_upgrade(&head, key, protocol) {
            Upgrade::Partial if n == 0 => return Err(ErrorClass::Eof),
            Upgrade::Partial => {}
            Upgrade::Accepted(size) => return Ok(head.split_off(size)),
            Upgrade::Refused(status) => return Err(ErrorClass::WsUpgradeRefused(status)),
            Upgrade::Malformed => return Err(ErrorClass::WsProtocol),
            Upgrade::WrongProtocol => return Err(ErrorClass::WsSubprotocol),
        }
    }
}

/// A byte protocol over WebSocket (MQTT's): the upgrade of `stream` to
/// `path` on `host`, asking for the subprotocol `protocol`; then the
/// stream carries bytes in binary messages ([`crate::transport::ws`]).
/// The caller bounds the wait.
pub(crate) async fn upgrade_stream(
    mut stream: Transport,
    path: &str,
    host: &str,
    protocol: &str,
    scratch: &RefCell<Box<[u8]>>,
) -> Result<Transport, ErrorClass> {
    let key = frame::key(random());
    let request = frame::upgrade_request(path, host, None, &key, Some(protocol));
    stream.write_all(&request).await.map_err(io_fail)?;
    stream.flush().await.map_err(io_fail)?;
    let rest = read_upgrade(&mut stream, scratch, &key, Some(protocol)).await?;
    Ok(Transport::Ws(Box::new(WsStream::new(stream, &rest, seed()))))
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

/// The upgrade (within the deadline `sleep` was armed with), then the
/// steps (each expectation within the step timeout). `Done::handshake` is
/// the upgrade's time (request written → 101 read); `Done::exchanges` the
/// round trip of each expectation (the last message sent before it → the
/// message that met it).
pub(crate) async fn handshake(
    spec: &Spec,
    mut stream: Transport,
    scratch: &RefCell<Box<[u8]>>,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Done, ErrorClass> {
    let key = frame::key(random());
    let t0 = Instant::now();
    let upgrade = async {
        stream
            .write_all(&frame::upgrade_request(
                &spec.path,
                &spec.host,
                spec.authorization.as_ref().map(|a| a.expose()),
                &key,
                None,
            ))
            .await
            .map_err(io_fail)?;
        stream.flush().await.map_err(io_fail)?;
        read_upgrade(&mut stream, scratch, &key, None).await
    };
    let rest = tokio::select! {
        biased;
        r = upgrade => r?,
        () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
    };
    let handshake = t0.elapsed();
    let mut exchanges = Vec::new();
    {
        let mut sock = Socket::new(&mut stream);
        sock.reader.push(&rest);
        let mut sent = Instant::now();
        for step in &spec.steps {
            match step {
                Step::Send { binary, data } => {
                    sent = Instant::now();
                    let op = if *binary { frame::BINARY } else { frame::TEXT };
                    // A server that does not read: the write waits no
                    // longer than a step may.
                    sleep.as_mut().reset((sent + spec.step_timeout).into());
                    tokio::select! {
                        biased;
                        r = sock.send(op, data) => r.map_err(io_fail)?,
                        () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
                    }
                }
                Step::Expect(re) => {
                    sleep.as_mut().reset((Instant::now() + spec.step_timeout).into());
                    loop {
                        let event = tokio::select! {
                            biased;
                            e = sock.event(scratch) => e?,
                            () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
                        };
                        match event {
                            Event::Message { data, .. } => {
                                if !re.is_match(&data) {
                                    return Err(ErrorClass::ProtocolError("unexpected_reply"));
                                }
                                exchanges.push(sent.elapsed());
                                break;
                            }
                            // Within the step's deadline too: a server that
                            // pings and never reads fills the socket's buffers.
                            Event::Ping(p) => tokio::select! {
                                biased;
                                r = sock.send(frame::PONG, &p) => r.map_err(io_fail)?,
                                () = sleep.as_mut() => return Err(ErrorClass::TimeoutHandshake),
                            },
                            Event::Pong(_) => {}
                            Event::Close(code) => {
                                // Answer it, as the close handshake asks.
                                let payload = frame::close_payload(code);
                                let _ = tokio::time::timeout(CLOSE_LIMIT, sock.send(frame::CLOSE, &payload)).await;
                                return Err(ErrorClass::WsClosed(code));
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(Done {
        stream,
        handshake,
        tls: None,
        exchanges,
        subscribe: None,
        upgrade: None,
    })
}

/// While a socket is held: answers pings, sends `ping_every` pings and
/// records each pong's round trip (phase `pong`), drops messages as they
/// stream in (a held socket's memory stays bounded). Returns
/// when the server closes (a close frame, answered; or the end of the
/// stream) or breaks the framing. Bytes the server sent right after the
/// handshake's last expectation are read afresh here (frames whole).
pub(crate) async fn hold(ctx: &Ctx, stream: &mut Transport, ping_every: Option<Duration>) {
    let mut sock = Socket::new(stream);
    sock.reader = Reader::discarding();
    let every = ping_every.unwrap_or(Duration::from_secs(3600));
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent: u64 = 0;
    let mut outstanding: Option<(u64, Instant)> = None;
    loop {
        tokio::select! {
            e = sock.event(&ctx.scratch) => match e {
                Ok(Event::Ping(p)) => {
                    if sock.send(frame::PONG, &p).await.is_err() {
                        return;
                    }
                }
                Ok(Event::Pong(p)) => {
                    if let Some((n, at)) = outstanding
                        && p == n.to_be_bytes()
                    {
                        let now = Instant::now();
                        ctx.rec.borrow_mut().phase(now, Phase::Pong, now - at);
                        outstanding = None;
                    }
                }
                Ok(Event::Message { .. }) => {}
                Ok(Event::Close(code)) => {
                    ctx.rec.borrow_mut().close_code(code);
                    let _ = sock.send(frame::CLOSE, &frame::close_payload(code)).await;
                    return;
                }
                Err(_) => return,
            },
            _ = tick.tick(), if ping_every.is_some() => {
                sent += 1;
                // A pong answers the latest ping (RFC 6455, 5.5.3): one
                // still out is forgotten.
                outstanding = Some((sent, Instant::now()));
                if sock.send(frame::PING, &sent.to_be_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The close handshake at the end of a hold: a close frame (1000, normal),
/// then the server's close frame or the end of its stream, all within
/// [`CLOSE_LIMIT`] (a server that does not read never takes the close
/// frame: its write waits no longer either).
pub(crate) async fn close(stream: &mut Transport, scratch: &RefCell<Box<[u8]>>) {
    let mut sock = Socket::new(stream);
    sock.reader = Reader::discarding();
    let handshake = async {
        if sock.send(frame::CLOSE, &frame::close_payload(1000)).await.is_err() {
            return;
        }
        loop {
            match sock.event(scratch).await {
                Ok(Event::Close(_)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_LIMIT, handshake).await;
}
