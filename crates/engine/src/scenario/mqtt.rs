//! A scenario's `mqtt:` step: CONNECT → CONNACK on a connection of its own
//! (or the VU's session kept from an earlier step to the same broker),
//! then its messages in order.
//!
//! ```text
//!  render client id, user, password ─► kept session for that URL? ─┬─ yes ──────────┐
//!                                      └─ connect, CONNECT → CONNACK (handshake) ───┤
//!  subscribe ─► SUBSCRIBE → SUBACK (subscribe)                                      │
//!  publish   ─► PUBLISH [→ PUBACK (puback) | → PUBREC (pubrec) → PUBCOMP (pubcomp)] │
//!  expect    ─► held or new deliveries until topic and payload match (response)     │
//!  each expect: a request (ok, round trip = last send → match) ◄────────────────────┘
//!  end: keep ─► Vu::mqtt; else DISCONNECT, closed
//! ```
//!
//! Units of work are the `websocket:` step's: every expect is one request
//! (`requests{step:NAME}`), a step without an expect is one (the connect
//! and its messages). A failure ends the step and its session: the request
//! under way takes its class (`mqtt.connack.*`, `mqtt.suback.*`,
//! `mqtt.puback.refused`, `mqtt.protocol`, `timeout.*`), the messages after
//! it are not sent, so `attempted = ok + Σ errors` holds.
//! Messages delivered while an acknowledgement is awaited are held (at most
//! [`HELD`] and [`HELD_BYTES`], oldest dropped) for the expects after it: a broker may deliver
//! a VU's own message before its PUBACK.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use throng_scenario::{MqttMessage, MqttPayload, MqttStep, MqttVersion, topic_matches};
use tokio::io::AsyncWriteExt;

use super::flight::{Unit, fail_unit, message_answered};
use super::held::{Held, OwnsConn};
use super::ops::{Delivered, MqttKept, MqttOp, Scen, Vu};
use super::render::context;
use crate::conn::{Conn, close, open_connection_to};
use crate::ctx::Ctx;
use crate::proto::mqtt::codec::{self, Next, Packet, Version};
use crate::proto::mqtt::{connack_refused, io_fail, read_some, suback_refused};

/// Deliveries held for later expects, at most (the oldest dropped), and
/// their payloads' bytes: a VU holds little whatever a broker sends.
const HELD: usize = 64;
const HELD_BYTES: usize = 1024 * 1024;

/// Longest the DISCONNECT at a session's end may take to write.
const DISCONNECT_LIMIT: Duration = Duration::from_secs(1);

fn version(v: MqttVersion) -> Version {
    match v {
        MqttVersion::V311 => Version::V311,
        MqttVersion::V5 => Version::V5,
    }
}

fn begin<'a>(ctx: &'a Ctx, sc: &'a Scen, op: &'a MqttOp, vu: &Vu) -> Unit<'a> {
    Unit::begin(ctx, sc, vu, &op.tags, &op.step.name)
}

/// Writes `bytes` within `limit` (a broker that stops reading is
/// `timeout.response`), counted sent.
async fn send(ctx: &Ctx, s: &mut MqttKept, bytes: &[u8], limit: Duration) -> Result<(), ErrorClass> {
    let write = async {
        s.conn.stream.write_all(bytes).await.map_err(io_fail)?;
        s.conn.stream.flush().await.map_err(io_fail)
    };
    match tokio::time::timeout(limit, write).await {
        Ok(r) => r?,
        Err(_) => return Err(ErrorClass::TimeoutResponse),
    }
    let now = Instant::now();
    s.sent_ms = u32::try_from(now.duration_since(s.conn.opened).as_millis()).unwrap_or(u32::MAX);
    ctx.rec.borrow_mut().sent(now, bytes.len() as u64);
    Ok(())
}

/// Runs `work` on the VU (a step other than `mqtt:`, a think time, an open
/// model's wait for its next iteration) while a session the VU kept stays
/// alive: a PINGREQ whenever nothing went on it for its keep-alive, as MQTT
/// asks of a client (a broker closes one silent for 1.5 × its keep-alive).
/// The work waits while the two bytes are written; a write held past 1 s
/// (the broker reads nothing) ends the pings, and the session's next step
/// finds what is wrong. The PINGRESPs are read, and passed over, by that
/// step. A VU cut off meanwhile closes the session.
pub(super) async fn keeping_alive<T>(ctx: &Ctx, vu: &mut Vu, work: impl AsyncFnOnce(&mut Vu) -> T) -> T {
    if vu.mqtt.is_none() {
        return work(vu).await;
    }
    // Boxed: a VU without a kept session keeps its smaller future.
    Box::pin(pinging(ctx, vu, work)).await
}

/// [`keeping_alive`] with a kept session.
async fn pinging<T>(ctx: &Ctx, vu: &mut Vu, work: impl AsyncFnOnce(&mut Vu) -> T) -> T {
    let Some(kept) = vu.mqtt.take() else {
        return work(vu).await;
    };
    let mut held = Held::new(ctx, kept);
    let s = held.get();
    let out = {
        let mut work = std::pin::pin!(work(vu));
        let every = Duration::from_secs(u64::from(s.keepalive_secs));
        let mut pinging = !every.is_zero();
        loop {
            let due = match s.sent_ms {
                u32::MAX => Instant::now(),
                ms => s.conn.opened + Duration::from_millis(u64::from(ms)),
            } + every;
            tokio::select! {
                biased;
                out = work.as_mut() => break out,
                () = tokio::time::sleep_until(due.into()), if pinging => {
                    pinging = send(ctx, s, &codec::PINGREQ_BYTES, DISCONNECT_LIMIT).await.is_ok();
                }
            }
        }
    };
    vu.mqtt = held.take();
    out
}

/// What reading a session yields besides the deliveries it acknowledges.
enum Read {
    Delivered(Delivered),
    Packet(Packet),
}

/// The next packet (no time limit: callers bound it). Deliveries are
/// acknowledged (QoS 1: PUBACK; QoS 2: PUBREC, then PUBCOMP for the
/// PUBREL); a broker's DISCONNECT, the end of the stream or bytes that are
/// not MQTT end the session in their class. `received` counts the bytes.
async fn read(ctx: &Ctx, s: &mut MqttKept, received: &mut u64) -> Result<Read, ErrorClass> {
    loop {
        let (h, body) = match s.reader.next() {
            Ok(Some(Next::Packet(h, body))) => (h, body),
            // Over the packet limit: skipped unread.
            Ok(Some(Next::Skipped(_))) => continue,
            Err(_) => return Err(ErrorClass::Mqtt("protocol")),
            Ok(None) => {
                let reader = &mut s.reader;
                let n = read_some(&mut s.conn.stream, &ctx.scratch, |b| reader.push(b))
                    .await
                    .map_err(io_fail)?;
                if n == 0 {
                    return Err(ErrorClass::Eof);
                }
                *received += n as u64;
                continue;
            }
        };
        if h.kind == codec::PUBLISH {
            let d = codec::delivery(h, &body, s.version).map_err(|_| ErrorClass::Mqtt("protocol"))?;
            let message = Delivered {
                topic: String::from_utf8_lossy(d.topic).into_owned(),
                payload: d.payload.to_vec(),
            };
            match (d.qos, d.id) {
                (1, Some(id)) => send(ctx, s, &codec::puback(id), DISCONNECT_LIMIT).await?,
                (2, Some(id)) => send(ctx, s, &codec::ack(codec::PUBREC, id), DISCONNECT_LIMIT).await?,
                _ => {}
            }
            return Ok(Read::Delivered(message));
        }
        match Packet::parse(h, &body, s.version).map_err(|_| ErrorClass::Mqtt("protocol"))? {
            Packet::Ack {
                kind: codec::PUBREL,
                id,
                ..
            } => send(ctx, s, &codec::ack(codec::PUBCOMP, id), DISCONNECT_LIMIT).await?,
            Packet::Disconnect { code } => return Err(ErrorClass::MqttDisconnected(code)),
            Packet::Pingresp => {}
            p => return Ok(Read::Packet(p)),
        }
    }
}

/// Reads until `wanted` picks a packet (its code), holding the deliveries
/// on the way for later expects, within `limit`.
async fn await_packet(
    ctx: &Ctx,
    s: &mut MqttKept,
    limit: Duration,
    received: &mut u64,
    wanted: impl Fn(&Packet) -> Option<u8>,
) -> Result<u8, ErrorClass> {
    let wait = async {
        loop {
            match read(ctx, s, received).await? {
                Read::Delivered(d) => {
                    s.held.push_back(d);
                    while s.held.len() > HELD || s.held.iter().map(|d| d.payload.len()).sum::<usize>() > HELD_BYTES {
                        s.held.pop_front();
                    }
                }
                Read::Packet(p) => match wanted(&p) {
                    Some(code) => return Ok(code),
                    // An acknowledgement of no message of ours, or a
                    // CONNACK or SUBACK out of turn.
                    None if matches!(p, Packet::Connack { .. } | Packet::Suback { .. }) => {
                        return Err(ErrorClass::Mqtt("protocol"));
                    }
                    None => {}
                },
            }
        }
    };
    tokio::time::timeout(limit, wait)
        .await
        .unwrap_or(Err(ErrorClass::TimeoutResponse))
}

/// The next packet identifier (1 to 65535).
fn next_id(s: &mut MqttKept) -> u16 {
    s.next_id = s.next_id.checked_add(1).unwrap_or(1);
    s.next_id
}

impl OwnsConn for MqttKept {
    fn into_conn(self) -> Conn {
        self.conn
    }
}

/// The session's start: what CONNECT carries, rendered.
struct Hello {
    client_id: String,
    user: Option<String>,
    password: Option<String>,
}

/// Connects and sends CONNECT, reading CONNACK, within the step's timeout;
/// the exchange's time is the `handshake` phase.
async fn open<'a>(
    ctx: &'a Ctx,
    sc: &Scen,
    step: &MqttStep,
    hello: &Hello,
    mut row: Option<&mut crate::rows::Row<'_>>,
    received: &mut u64,
) -> Result<Held<'a, MqttKept>, ErrorClass> {
    // Invariant: the run made a destination for every mqtt: step's URL.
    let dest = sc.dest.mqtt_for(&step.url).ok_or(ErrorClass::Protocol)?;
    let mut sleep = std::pin::pin!(tokio::time::sleep(step.timeout));
    let opening = open_connection_to(
        ctx,
        &dest.route,
        dest.tls.as_ref(),
        &[],
        None,
        false,
        sleep.as_mut(),
        row.as_deref_mut(),
    );
    let mut conn = Box::pin(opening).await?.conn;
    if let Some(path) = &step.websocket {
        conn = upgrade(ctx, conn, step, path, sleep.as_mut(), row.as_deref_mut()).await?;
    }
    let mut held = Held::new(
        ctx,
        MqttKept {
            conn,
            reader: codec::Reader::default(),
            url: step.url.clone(),
            version: version(step.version),
            next_id: 0,
            held: VecDeque::new(),
            keepalive_secs: u16::try_from(step.keepalive.as_secs()).unwrap_or(u16::MAX),
            sent_ms: 0,
        },
    );
    let s = held.get();
    let mut out = Vec::with_capacity(64);
    codec::connect(
        &mut out,
        &codec::Connect {
            version: s.version,
            client_id: &hello.client_id,
            clean_start: step.clean_start,
            keepalive_secs: s.keepalive_secs,
            session_expiry: None,
            user: hello.user.as_deref(),
            password: hello.password.as_ref().map(|p| p.as_bytes()),
        },
    );
    let t0 = Instant::now();
    sleep.as_mut().reset((t0 + step.timeout).into());
    let exchange = async {
        send(ctx, s, &out, step.timeout).await?;
        match read(ctx, s, received).await? {
            Read::Packet(Packet::Connack { code, .. }) => Ok(code),
            Read::Packet(_) | Read::Delivered(_) => Err(ErrorClass::Mqtt("protocol")),
        }
    };
    let answer = tokio::select! {
        biased;
        r = exchange => r,
        () = sleep.as_mut() => Err(ErrorClass::TimeoutHandshake),
    };
    let refused = match answer {
        Ok(0) => None,
        Ok(code) => Some(connack_refused(s.version, code)),
        Err(class) => Some(class),
    };
    if let Some(class) = refused {
        // Closed as the guard drops.
        return Err(class);
    }
    let now = Instant::now();
    ctx.rec.borrow_mut().phase(now, Phase::Handshake, now - t0);
    if let Some(r) = row {
        r.conn(held.get().conn.id);
        r.phase(Phase::Handshake, now - t0);
    }
    Ok(held)
}

/// MQTT over WebSocket: the upgrade (asking for the subprotocol `mqtt`)
/// on `conn`, before `sleep` ends, is the `upgrade` phase; then packets go
/// in binary messages. A failed upgrade closes the connection.
async fn upgrade(
    ctx: &Ctx,
    conn: Conn,
    step: &MqttStep,
    path: &str,
    sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    row: Option<&mut crate::rows::Row<'_>>,
) -> Result<Conn, ErrorClass> {
    let Conn {
        stream,
        opened,
        id,
        unreported,
    } = conn;
    let host = throng_plan::Authority::new(&step.host, step.port, if step.tls { 443 } else { 80 }).to_string();
    let upgraded = crate::proto::mqtt::ws_upgrade(stream, path, &host, &ctx.scratch, sleep).await;
    let now = Instant::now();
    match upgraded {
        Ok((stream, took)) => {
            ctx.rec.borrow_mut().phase(now, Phase::Upgrade, took);
            if let Some(r) = row {
                r.phase(Phase::Upgrade, took);
            }
            Ok(Conn {
                stream,
                opened,
                id,
                unreported,
            })
        }
        Err(class) => {
            // The stream went with the upgrade: its end is counted here.
            ctx.rec.borrow_mut().connection_closed(now, now - opened);
            Err(class)
        }
    }
}

/// DISCONNECT (bounded), then the connection's end recorded (as the
/// guard drops, whenever that is).
async fn disconnect(mut held: Held<'_, MqttKept>) {
    let s = held.get();
    let _ = tokio::time::timeout(DISCONNECT_LIMIT, s.conn.stream.write_all(&codec::DISCONNECT_BYTES)).await;
}

/// Ends a kept session properly (the VU's end).
pub(super) async fn close_kept(ctx: &Ctx, kept: Option<MqttKept>) {
    if let Some(s) = kept {
        disconnect(Held::new(ctx, s)).await;
    }
}

/// Drops a kept session without a DISCONNECT (the VU was cut off).
pub(super) fn drop_kept(ctx: &Ctx, kept: Option<MqttKept>) {
    if let Some(s) = kept {
        close(ctx, Some(s.conn));
    }
}

/// Renders what CONNECT carries; Err: the failed expression's message.
fn render_hello(sc: &Scen, vu: &mut Vu, step: &MqttStep) -> Result<Hello, String> {
    let mut cx = context(sc, vu);
    let hello = Hello {
        client_id: step.client_id.render(&mut cx),
        user: step.user.as_ref().map(|t| t.render(&mut cx)),
        password: step.password.as_ref().map(|t| t.render(&mut cx)),
    };
    match cx.failed {
        Some(e) => Err(e),
        None => Ok(hello),
    }
}

/// Runs one `mqtt:` step.
pub(super) async fn step(ctx: &Ctx, sc: &Scen, vu: &mut Vu, op: &MqttOp, origin: Option<Instant>) {
    let step = &op.step;
    let hello = match render_hello(sc, vu, step) {
        Ok(h) => h,
        Err(message) => {
            // Never begun: the iteration ends failed with the message.
            vu.fault = Some(message);
            return;
        }
    };
    let mut unit = Some(begin(ctx, sc, op, vu));
    if let (Some(due), Some(u)) = (origin, unit.as_mut())
        && let Some(r) = u.row.row()
    {
        r.phase(Phase::ScheduleLag, Instant::now().saturating_duration_since(due));
    }
    // The kept session, if it is this broker's; another one is ended.
    let kept = match vu.mqtt.take() {
        Some(k) if k.url == step.url => Some(k),
        other => {
            close_kept(ctx, other).await;
            None
        }
    };
    // Bytes read for the unit under way (CONNACK's with the first).
    let mut received = 0u64;
    let mut held = match kept {
        Some(k) => Held::new(ctx, k),
        None => {
            let row = unit.as_mut().and_then(|u| u.row.row());
            match open(ctx, sc, step, &hello, row, &mut received).await {
                Ok(s) => s,
                Err(class) => return fail_unit(ctx, unit, class, received),
            }
        }
    };
    drop(hello);
    let outcome = messages(ctx, sc, vu, op, held.get(), &mut unit, &mut received).await;
    if let Err(class) = outcome {
        // A session that failed is not kept: a broker's refusal or a wait
        // that ran out leaves it sound, so it ends with DISCONNECT.
        let sound = matches!(
            class,
            ErrorClass::TimeoutResponse | ErrorClass::Mqtt(_) | ErrorClass::Protocol
        );
        if sound {
            disconnect(held).await;
        } else {
            drop(held);
        }
        let unit = unit.or_else(|| Some(begin(ctx, sc, op, vu)));
        return fail_unit(ctx, unit, class, received);
    }
    // A step without an expect: its one request, ok once its messages went.
    if let Some(u) = unit.take() {
        u.ok(ctx, received, None);
    }
    if step.keep {
        vu.mqtt = held.take();
    } else {
        disconnect(held).await;
    }
}

/// The step's messages in order; Err: the class the unit under way ends in.
async fn messages<'a>(
    ctx: &'a Ctx,
    sc: &'a Scen,
    vu: &mut Vu,
    op: &'a MqttOp,
    s: &mut MqttKept,
    unit: &mut Option<Unit<'a>>,
    received: &mut u64,
) -> Result<(), ErrorClass> {
    let step = &op.step;
    // Messages after the last expect belong to no request (unless they fail).
    let last_expect = step
        .messages
        .iter()
        .rposition(|m| matches!(m, MqttMessage::Expect { .. }));
    let mut last_send = Instant::now();
    for (i, m) in step.messages.iter().enumerate() {
        if unit.is_none() && last_expect.is_some_and(|l| i <= l) {
            *unit = Some(begin(ctx, sc, op, vu));
        }
        match m {
            MqttMessage::Subscribe { filter, qos } => {
                let filter = render(sc, vu, filter)?;
                let id = next_id(s);
                let mut out = Vec::new();
                codec::subscribe(&mut out, s.version, id, &filter, *qos);
                let t0 = Instant::now();
                last_send = t0;
                send(ctx, s, &out, step.timeout).await?;
                let code = await_packet(ctx, s, step.timeout, received, |p| match p {
                    Packet::Suback { id: got, code } if *got == id => Some(*code),
                    _ => None,
                })
                .await?;
                if code >= 0x80 {
                    return Err(suback_refused(s.version, code));
                }
                let now = Instant::now();
                ctx.rec.borrow_mut().phase(now, Phase::Subscribe, now - t0);
            }
            MqttMessage::Publish {
                topic,
                payload,
                qos,
                retain,
            } => {
                last_send = Instant::now();
                publish(ctx, sc, vu, step, s, (topic, payload, *qos, *retain), received).await?;
            }
            MqttMessage::Expect { topic, regex, captures } => {
                let filter = topic.as_ref().map(|t| render(sc, vu, t)).transpose()?;
                let d = expect(ctx, s, filter.as_deref(), regex.as_ref(), step.timeout, received).await?;
                message_answered(ctx, vu, captures, (0, &d.payload), last_send, received, unit);
            }
        }
    }
    Ok(())
}

/// A template rendered; a failed expression fails the iteration with its
/// message, and the message under way as one throng could not make.
fn render(sc: &Scen, vu: &mut Vu, t: &throng_scenario::Template) -> Result<String, ErrorClass> {
    let mut cx = context(sc, vu);
    let text = t.render(&mut cx);
    match cx.failed {
        Some(message) => {
            vu.fault = Some(message);
            Err(ErrorClass::Protocol)
        }
        None => Ok(text),
    }
}

/// PUBLISH, and its acknowledgements: PUBACK (QoS 1), or PUBREC, PUBREL
/// and PUBCOMP (QoS 2); a refusal is `mqtt.puback.refused` (or
/// `pubrec.`/`pubcomp.`).
async fn publish(
    ctx: &Ctx,
    sc: &Scen,
    vu: &mut Vu,
    step: &MqttStep,
    s: &mut MqttKept,
    (topic, payload, qos, retain): (&throng_scenario::Template, &MqttPayload, u8, bool),
    received: &mut u64,
) -> Result<(), ErrorClass> {
    let topic = render(sc, vu, topic)?;
    let text;
    let body: &[u8] = match payload {
        MqttPayload::Template(t) => {
            text = render(sc, vu, t)?;
            text.as_bytes()
        }
        MqttPayload::File { data, .. } => data,
    };
    let id = if qos > 0 { next_id(s) } else { 0 };
    let mut out = Vec::with_capacity(body.len() + topic.len() + 16);
    codec::publish(
        &mut out,
        &codec::Publish {
            version: s.version,
            topic: &topic,
            qos,
            id,
            retain,
            dup: false,
            payload: body,
        },
    );
    let t0 = Instant::now();
    send(ctx, s, &out, step.timeout).await?;
    let ack = |kind: u8| {
        move |p: &Packet| match p {
            Packet::Ack { kind: k, id: got, code } if *k == kind && *got == id => Some(*code),
            _ => None,
        }
    };
    let (first, phase, refused) = match qos {
        0 => return Ok(()),
        1 => (codec::PUBACK, Phase::Puback, "puback.refused"),
        _ => (codec::PUBREC, Phase::Pubrec, "pubrec.refused"),
    };
    let code = await_packet(ctx, s, step.timeout, received, ack(first)).await?;
    let now = Instant::now();
    ctx.rec.borrow_mut().phase(now, phase, now - t0);
    if code >= 0x80 {
        return Err(ErrorClass::Mqtt(refused));
    }
    if qos == 2 {
        let t1 = Instant::now();
        send(ctx, s, &codec::ack(codec::PUBREL, id), step.timeout).await?;
        let code = await_packet(ctx, s, step.timeout, received, ack(codec::PUBCOMP)).await?;
        let now = Instant::now();
        ctx.rec.borrow_mut().phase(now, Phase::Pubcomp, now - t1);
        if code >= 0x80 {
            return Err(ErrorClass::Mqtt("pubcomp.refused"));
        }
    }
    Ok(())
}

/// The first delivery whose topic `filter` matches and whose payload
/// `regex` matches: a held one, else the next read within `limit` (others
/// are passed over).
async fn expect(
    ctx: &Ctx,
    s: &mut MqttKept,
    filter: Option<&str>,
    regex: Option<&regex::Regex>,
    limit: Duration,
    received: &mut u64,
) -> Result<Delivered, ErrorClass> {
    let fits = |d: &Delivered| {
        filter.is_none_or(|f| topic_matches(f, &d.topic))
            && regex.is_none_or(|r| r.is_match(&String::from_utf8_lossy(&d.payload)))
    };
    if let Some(i) = s.held.iter().position(fits) {
        // Found just now: the position is in the queue.
        if let Some(d) = s.held.remove(i) {
            return Ok(d);
        }
    }
    s.held.clear();
    let wait = async {
        loop {
            match read(ctx, s, received).await? {
                Read::Delivered(d) if fits(&d) => return Ok(d),
                Read::Delivered(_) => {}
                Read::Packet(Packet::Connack { .. } | Packet::Suback { .. }) => {
                    return Err(ErrorClass::Mqtt("protocol"));
                }
                Read::Packet(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, wait)
        .await
        .unwrap_or(Err(ErrorClass::TimeoutResponse))
}
