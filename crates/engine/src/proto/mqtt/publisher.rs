//! A pub/sub run's publisher: stamps each message (run id, publisher,
//! sequence number, send time) and publishes it, on a schedule (`--rate`:
//! open loop, a slot whose window is full is `dropped`) or as fast as its
//! window of unacknowledged QoS 1 and 2 messages allows (closed loop).
//! Each message is one request in the books: QoS 0 ends ok once written,
//! QoS 1 at its PUBACK (phase `puback`), QoS 2 at its PUBCOMP (phases
//! `pubrec`, `pubcomp`). What is unacknowledged --drain after the last is
//! `mqtt.ack_timeout` (`mqtt.unacknowledged` with `--drain 0s`, which waits
//! for none); every QoS 1 and 2 message ends acknowledged, refused or
//! unacknowledged (the books' `unacknowledged`).

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use throng_plan::PAYLOAD_HEADER;
use tokio::io::AsyncReadExt;
use tokio::time::Instant as TokioInstant;

use super::books::Stamp;
use super::client::{Client, Run};
use super::codec::{self, Next, Packet, Reader};
use super::{disconnect, io_fail, send};
use crate::worker::state::RunState;

/// A message awaiting its acknowledgement.
struct Flight {
    /// PUBLISH written (QoS 2: then PUBREL written).
    at: Instant,
    /// QoS 2: PUBREC came, PUBREL sent.
    released: bool,
}

/// One publisher's state while it runs.
struct Pub<'a> {
    run: &'a Run,
    flights: HashMap<u16, Flight>,
    next_id: u16,
    /// Messages the broker refused (PUBACK or PUBREC with a failure code):
    /// not published, so no subscriber expects them.
    refused: u64,
    /// Messages acknowledged (PUBACK, or PUBCOMP).
    acknowledged: u64,
}

impl Pub<'_> {
    /// A free packet identifier (the window is at most 65535).
    fn id(&mut self) -> u16 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.checked_add(1).unwrap_or(1);
            if !self.flights.contains_key(&id) {
                return id;
            }
        }
    }

    /// Appends publisher `p`'s message number `seq` (stamped as sent at
    /// `sent_at`) to `out`, counted as started: its packet identifier and
    /// size.
    fn stage(
        &mut self,
        out: &mut Vec<u8>,
        payload: &mut [u8],
        topic: &str,
        p: u64,
        seq: u64,
        sent_at: Instant,
    ) -> (u16, u64) {
        let run = self.run;
        let id = if run.plan.qos > 0 { self.id() } else { 0 };
        Stamp {
            run: run.id,
            publisher: u32::try_from(p).unwrap_or(u32::MAX),
            seq,
            sent_us: u64::try_from(sent_at.saturating_duration_since(run.origin).as_micros()).unwrap_or(u64::MAX),
        }
        .write(payload);
        let before = out.len();
        codec::publish(
            out,
            &codec::Publish {
                version: run.version,
                topic,
                qos: run.plan.qos,
                id,
                retain: run.plan.retain,
                dup: false,
                payload,
            },
        );
        run.rec.borrow_mut().request_started();
        (id, (out.len() - before) as u64)
    }

    /// The write of `batch` failed: each of its messages ends as `class`
    /// once (taken out of the flights first), then every other in flight.
    fn unwritten(&mut self, batch: &[(u16, u64)], class: ErrorClass) {
        let now = Instant::now();
        for &(id, _) in batch {
            self.flights.remove(&id);
            self.run.rec.borrow_mut().request_failed(now, class, 0);
        }
        self.fail_all(class);
    }

    /// `batch` is written: QoS 0 messages end ok, the others are in
    /// flight from now. Returns now.
    fn written(&mut self, batch: &[(u16, u64)]) -> Instant {
        let now = Instant::now();
        let mut rec = self.run.rec.borrow_mut();
        for &(id, len) in batch {
            rec.sent(now, len);
            if self.run.plan.qos == 0 {
                rec.exchanged(now, 0);
            } else {
                self.flights.insert(
                    id,
                    Flight {
                        at: now,
                        released: false,
                    },
                );
            }
        }
        now
    }

    /// Every message still in flight ends as `class`.
    fn fail_all(&mut self, class: ErrorClass) {
        let now = Instant::now();
        let mut rec = self.run.rec.borrow_mut();
        for _ in self.flights.drain() {
            rec.request_failed(now, class, 0);
        }
    }

    /// What publisher `publisher` did once over, having written `written`
    /// messages: each QoS 1 and 2 one acknowledged, refused, or neither.
    fn outcome(&self, publisher: u64, written: u64) -> Published {
        let unacknowledged = if self.run.plan.qos == 0 {
            0
        } else {
            written.saturating_sub(self.refused).saturating_sub(self.acknowledged)
        };
        Published {
            publisher,
            written,
            refused: self.refused,
            unacknowledged,
        }
    }

    /// An acknowledgement came: false when the connection must end.
    async fn ack(&mut self, stream: &mut crate::transport::Transport, kind: u8, id: u16, code: u8) -> bool {
        let now = Instant::now();
        let Some(f) = self.flights.get_mut(&id) else {
            // Not one in flight: the broker is confused; not ours to count.
            return true;
        };
        let run = self.run;
        let (phase, refused) = match (kind, f.released) {
            (codec::PUBACK, false) if run.plan.qos == 1 => (Phase::Puback, "puback.refused"),
            (codec::PUBREC, false) if run.plan.qos == 2 => (Phase::Pubrec, "pubrec.refused"),
            (codec::PUBCOMP, true) => (Phase::Pubcomp, "pubcomp.refused"),
            _ => {
                self.flights.remove(&id);
                run.rec
                    .borrow_mut()
                    .request_failed(now, ErrorClass::Mqtt("protocol"), 0);
                return true;
            }
        };
        run.rec.borrow_mut().phase(now, phase, now - f.at);
        if code >= 0x80 {
            self.flights.remove(&id);
            if phase != Phase::Pubcomp {
                self.refused += 1;
            }
            run.rec.borrow_mut().request_failed(now, ErrorClass::Mqtt(refused), 0);
            return true;
        }
        if phase == Phase::Pubrec {
            f.released = true;
            f.at = Instant::now();
            return send(stream, &codec::ack(codec::PUBREL, id)).await.is_ok();
        }
        self.flights.remove(&id);
        self.acknowledged += 1;
        run.acknowledged.set(run.acknowledged.get() + 1);
        run.rec.borrow_mut().exchanged(now, 0);
        true
    }
}

/// What a publisher did: its number, the messages it wrote, how many of
/// those the broker refused, and (QoS 1 and 2) how many had neither an
/// acknowledgement nor a refusal by the end.
pub(crate) struct Published {
    pub publisher: u64,
    pub written: u64,
    pub refused: u64,
    pub unacknowledged: u64,
}

/// Publishes publisher `p`'s messages from `start`.
pub(crate) async fn publish(run: Rc<Run>, p: u64, client: Client, start: Instant) -> Published {
    let Client { mut stream, opened, .. } = client;
    let plan = std::sync::Arc::clone(&run.plan);
    let topic = plan.topic_of(p);
    let quota = plan.messages_of(p);
    let until = plan.duration.map(|d| start + d);
    // Each publisher's share of --rate, its slots offset so that the
    // publishers take turns.
    let gap = plan
        .rate
        .map(|r| Duration::from_secs_f64((plan.publishers as f64 / r).min(3600.0)));
    let offset = gap.map(|g| g.mul_f64((p - 1) as f64 / plan.publishers as f64));
    let mut payload = vec![0u8; usize::try_from(plan.payload).unwrap_or(0)];
    if let Some(rest) = payload.get_mut(PAYLOAD_HEADER as usize..) {
        let n = plan.data_bytes.len().min(rest.len());
        rest[..n].copy_from_slice(&plan.data_bytes[..n]);
    }
    let window = usize::try_from(plan.window).unwrap_or(usize::MAX);
    let mut me = Pub {
        run: &run,
        flights: HashMap::new(),
        next_id: 1,
        refused: 0,
        acknowledged: 0,
    };
    let mut reader = Reader::default();
    let mut buf = vec![0u8; 16 * 1024];
    let mut out = Vec::with_capacity(payload.len() + topic.len() + 16);
    // The messages of one write: their packet ids and sizes.
    let mut batch: Vec<(u16, u64)> = Vec::new();
    let mut control = run.control.clone();
    let (mut slot, mut published) = (0u64, 0u64);
    let mut last_sent = Instant::now();
    let mut ack_deadline: Option<TokioInstant> = None;
    let every = run.keepalive();
    let closed_by_peer = loop {
        let state = *control.borrow_and_update();
        if state == RunState::Aborting {
            let n = me.flights.len() as u64;
            me.flights.clear();
            run.rec.borrow_mut().requests_interrupted(Instant::now(), n);
            break false;
        }
        let due = match gap {
            Some(g) => start + offset.unwrap_or_default() + g.mul_f64(slot as f64),
            None => Instant::now(),
        };
        let more = state == RunState::Running
            && quota.is_none_or(|q| slot < q)
            && until.is_none_or(|u| due < u && Instant::now() < u);
        if !more && me.flights.is_empty() {
            break false;
        }
        if !more && ack_deadline.is_none() {
            ack_deadline = Some(TokioInstant::now() + plan.drain);
        }
        // Closed loop: wait for room in the window; open loop: the slot
        // comes whatever the window holds.
        let room = plan.qos == 0 || me.flights.len() < window;
        let can_send = more && (gap.is_some() || room);
        let idle_ping = (!every.is_zero()).then(|| TokioInstant::from_std(last_sent + every));
        tokio::select! {
            biased;
            r = stream.read(&mut buf) => {
                let n = match r {
                    Ok(n) if n > 0 => n,
                    Ok(_) => { me.fail_all(ErrorClass::Eof); break true; }
                    Err(e) => { me.fail_all(io_fail(e)); break true; }
                };
                reader.push(&buf[..n]);
                if let Err(class) = take_acks(&mut me, &mut stream, &mut reader).await {
                    me.fail_all(class);
                    break true;
                }
            }
            Ok(()) = control.changed() => {}
            () = until_due(due), if can_send => {
                let now = Instant::now();
                slot += 1;
                if !room {
                    run.rec.borrow_mut().dropped(now);
                    continue;
                }
                let (sent_at, lag) = match gap {
                    Some(_) => (due, now.saturating_duration_since(due)),
                    None => (now, Duration::ZERO),
                };
                if gap.is_some() {
                    run.rec.borrow_mut().phase(now, Phase::ScheduleLag, lag);
                }
                // Closed loop at QoS 1 or 2: every free place of the window
                // in one write (a write per PUBLISH was most of the CPU).
                out.clear();
                batch.clear();
                loop {
                    let seq = published + batch.len() as u64;
                    let (id, len) = me.stage(&mut out, &mut payload, &topic, p, seq, sent_at);
                    batch.push((id, len));
                    // In flight: the window's earlier messages and every
                    // staged one but this (inserted below when another comes).
                    let another = gap.is_none()
                        && plan.qos > 0
                        && me.flights.len() + 1 < window
                        && quota.is_none_or(|q| slot < q)
                        && until.is_none_or(|u| Instant::now() < u)
                        && *control.borrow() == RunState::Running;
                    if !another {
                        break;
                    }
                    // Ids are reserved as they are staged: the next one
                    // must not repeat this one.
                    me.flights.insert(id, Flight { at: sent_at, released: false });
                    slot += 1;
                }
                if let Err(class) = send(&mut stream, &out).await {
                    me.unwritten(&batch, class);
                    break true;
                }
                published += batch.len() as u64;
                last_sent = me.written(&batch);
            }
            () = async { match idle_ping { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } } => {
                last_sent = Instant::now();
                if send(&mut stream, &codec::PINGREQ_BYTES).await.is_err() {
                    me.fail_all(ErrorClass::Eof);
                    break true;
                }
            }
            () = async { match ack_deadline { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } } => {
                // --drain 0s waits for no acknowledgement: those in flight
                // did not time out, they were not waited for.
                let class = if plan.drain.is_zero() { "unacknowledged" } else { "ack_timeout" };
                me.fail_all(ErrorClass::Mqtt(class));
                break false;
            }
        }
    };
    let now = Instant::now();
    if closed_by_peer {
        run.rec.borrow_mut().closed_by_peer(now);
    } else {
        disconnect(&mut stream).await;
    }
    run.rec.borrow_mut().connection_closed(Instant::now(), now - opened);
    me.outcome(p, published)
}

/// Waits until `due`; at once when it has passed (tokio's timer would
/// round a wait for now up to its next millisecond tick, and a closed
/// loop's next message is always due now).
async fn until_due(due: Instant) {
    if due > Instant::now() {
        tokio::time::sleep_until(TokioInstant::from_std(due)).await;
    }
}

/// Handles the acknowledgements `reader` holds; the class the messages in
/// flight fail as when the connection must end: bytes that are not MQTT,
/// the broker's DISCONNECT (by its reason code), a failed PUBREL.
async fn take_acks(
    me: &mut Pub<'_>,
    stream: &mut crate::transport::Transport,
    reader: &mut Reader,
) -> Result<(), ErrorClass> {
    let protocol = ErrorClass::Mqtt("protocol");
    loop {
        let (h, body) = match reader.next() {
            Ok(None) => return Ok(()),
            Ok(Some(Next::Skipped(_))) => continue,
            Ok(Some(Next::Packet(h, body))) => (h, body),
            Err(_) => return Err(protocol),
        };
        match Packet::parse(h, &body, me.run.version) {
            Ok(Packet::Ack { kind, id, code }) => {
                if !me.ack(stream, kind, id, code).await {
                    return Err(ErrorClass::Eof);
                }
            }
            Ok(Packet::Disconnect { code }) => {
                me.run.rec.borrow_mut().close_code(u16::from(code));
                return Err(ErrorClass::MqttDisconnected(code));
            }
            Ok(_) => {}
            Err(_) => return Err(protocol),
        }
    }
}
