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

use std::rc::Rc;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase};
use throng_plan::PAYLOAD_HEADER;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::Instant as TokioInstant;

use super::books::Stamp;
use super::client::{AckNow, Client, Run};
use super::codec::{self, Next, Packet, Reader};
use super::{disconnect, io_fail, send};
use crate::worker::state::RunState;

/// Bytes one read takes at most (acknowledgements are 4 bytes each).
const READ: usize = 16 * 1024;

/// A message awaiting its acknowledgement.
struct Flight {
    /// PUBLISH written (QoS 2: then PUBREL written).
    at: Instant,
    /// QoS 2: PUBREC came, PUBREL sent.
    released: bool,
}

/// The messages awaiting their acknowledgement, by packet identifier:
/// identifier n is slot n - 1, a freed one reused first (a lookup is an
/// index; the identifiers in use stay within the window).
#[derive(Default)]
struct Flights {
    slots: Vec<Option<Flight>>,
    free: Vec<u16>,
    len: usize,
}

impl Flights {
    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `f` in flight under a free identifier; None when all 65535 are.
    fn add(&mut self, f: Flight) -> Option<u16> {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = u16::try_from(self.slots.len() + 1).ok()?;
                self.slots.push(None);
                id
            }
        };
        let slot = self.slots.get_mut(usize::from(id).checked_sub(1)?)?;
        *slot = Some(f);
        self.len += 1;
        Some(id)
    }

    fn get_mut(&mut self, id: u16) -> Option<&mut Flight> {
        let i = usize::from(id).checked_sub(1)?;
        self.slots.get_mut(i)?.as_mut()
    }

    fn remove(&mut self, id: u16) -> Option<Flight> {
        let i = usize::from(id).checked_sub(1)?;
        let f = self.slots.get_mut(i)?.take()?;
        self.free.push(id);
        self.len -= 1;
        Some(f)
    }

    /// Ends every flight: how many there were.
    fn clear(&mut self) -> usize {
        let n = self.len;
        self.slots.clear();
        self.free.clear();
        self.len = 0;
        n
    }
}

/// One publisher's state while it runs.
struct Pub<'a> {
    run: &'a Run,
    /// Most QoS 1 and 2 messages in flight (closed loop): --window, or the
    /// broker's Receive Maximum when lower.
    window: usize,
    flights: Flights,
    /// Messages the broker refused (PUBACK or PUBREC with a failure code):
    /// not published, so no subscriber expects them.
    refused: u64,
    /// Messages acknowledged (PUBACK, or PUBCOMP).
    acknowledged: u64,
}

impl Pub<'_> {
    /// Appends publisher `p`'s message number `seq` (stamped as sent at
    /// `sent_at`) to `out`, counted as started (QoS 1 and 2: in flight
    /// from `sent_at`): its packet identifier and size. None when no
    /// identifier is free (never within a window of at most 65535).
    fn stage(
        &mut self,
        out: &mut Vec<u8>,
        payload: &mut [u8],
        topic: &str,
        p: u64,
        seq: u64,
        sent_at: Instant,
    ) -> Option<(u16, u64)> {
        let run = self.run;
        let id = if run.plan.qos > 0 {
            self.flights.add(Flight {
                at: sent_at,
                released: false,
            })?
        } else {
            0
        };
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
        Some((id, (out.len() - before) as u64))
    }

    /// The write of `batch` failed: each of its messages ends as `class`
    /// once (taken out of the flights first), then every other in flight.
    fn unwritten(&mut self, batch: &[(u16, u64)], class: ErrorClass) {
        let now = Instant::now();
        for &(id, _) in batch {
            self.flights.remove(id);
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
            } else if let Some(f) = self.flights.get_mut(id) {
                f.at = now;
            }
        }
        now
    }

    /// Every message still in flight ends as `class`.
    fn fail_all(&mut self, class: ErrorClass) {
        let now = Instant::now();
        let mut rec = self.run.rec.borrow_mut();
        for _ in 0..self.flights.clear() {
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

    /// An acknowledgement came (read at `now`); a PUBREC's PUBREL goes
    /// into `rels`, to write.
    fn ack(&mut self, now: Instant, kind: u8, id: u16, code: u8, rels: &mut Vec<u8>) {
        let Some(f) = self.flights.get_mut(id) else {
            // Not one in flight: the broker is confused; not ours to count.
            return;
        };
        let run = self.run;
        let (phase, refused) = match (kind, f.released) {
            (codec::PUBACK, false) if run.plan.qos == 1 => (Phase::Puback, "puback.refused"),
            (codec::PUBREC, false) if run.plan.qos == 2 => (Phase::Pubrec, "pubrec.refused"),
            (codec::PUBCOMP, true) => (Phase::Pubcomp, "pubcomp.refused"),
            _ => {
                self.flights.remove(id);
                run.rec
                    .borrow_mut()
                    .request_failed(now, ErrorClass::Mqtt("protocol"), 0);
                return;
            }
        };
        run.rec.borrow_mut().phase(now, phase, now - f.at);
        if code >= 0x80 {
            self.flights.remove(id);
            if phase != Phase::Pubcomp {
                self.refused += 1;
            }
            run.rec.borrow_mut().request_failed(now, ErrorClass::Mqtt(refused), 0);
            return;
        }
        if phase == Phase::Pubrec {
            f.released = true;
            f.at = now;
            rels.extend_from_slice(&codec::ack(codec::PUBREL, id));
            return;
        }
        self.flights.remove(id);
        self.acknowledged += 1;
        run.acknowledged.set(run.acknowledged.get() + 1);
        run.rec.borrow_mut().exchanged(now, 0);
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

/// Most bytes of QoS 0 messages one write takes (they are written, not
/// acknowledged: no window bounds them).
const QOS0_WRITE: usize = 16 * 1024;

/// What a publisher writes: its number, topic and payload (stamped anew
/// for each message), and the bytes and messages of one write.
struct Batch {
    p: u64,
    topic: String,
    payload: Vec<u8>,
    out: Vec<u8>,
    /// The messages in `out`: their packet ids and sizes.
    staged: Vec<(u16, u64)>,
}

impl Batch {
    /// Publisher `p`'s batch: its topic, and its payload (the data after
    /// the header's room), nothing staged yet.
    fn new(plan: &throng_plan::MqttPlan, p: u64) -> Batch {
        let mut payload = vec![0u8; usize::try_from(plan.payload).unwrap_or(0)];
        if let Some(rest) = payload.get_mut(PAYLOAD_HEADER as usize..) {
            let n = plan.data_bytes.len().min(rest.len());
            rest[..n].copy_from_slice(&plan.data_bytes[..n]);
        }
        Batch {
            p,
            topic: plan.topic_of(p),
            payload,
            out: Vec::new(),
            staged: Vec::new(),
        }
    }
}

impl Pub<'_> {
    /// Stages, into an empty `b`, message `seq` and the ones after it while
    /// `another(k)` says the k-th more may go (closed loop: until the
    /// window is full; QoS 0: up to [`QOS0_WRITE`] bytes), all as sent at
    /// `sent_at`: one write for them all (a write per PUBLISH was most of
    /// the CPU). Returns how many.
    fn fill(&mut self, b: &mut Batch, seq: u64, sent_at: Instant, another: impl Fn(u64) -> bool) -> u64 {
        b.out.clear();
        b.staged.clear();
        let window = self.window;
        loop {
            let k = b.staged.len() as u64;
            let Some(m) = self.stage(&mut b.out, &mut b.payload, &b.topic, b.p, seq + k, sent_at) else {
                break;
            };
            b.staged.push(m);
            let room = match self.run.plan.qos {
                0 => b.out.len() < QOS0_WRITE,
                _ => self.flights.len() < window,
            };
            if !(room && another(k + 1)) {
                break;
            }
        }
        b.staged.len() as u64
    }
}

/// Publishes publisher `p`'s messages from `start`.
pub(crate) async fn publish(run: Rc<Run>, p: u64, client: Client, start: Instant) -> Published {
    let Client {
        mut stream,
        opened,
        receive_max,
        ..
    } = client;
    let window = window_of(&run.plan, receive_max);
    publish_on(&run, p, &mut stream, window, opened, start).await
}

/// A publisher's window: --window, or the broker's Receive Maximum when
/// lower (more in flight would be a protocol error the broker may end the
/// connection for).
fn window_of(plan: &throng_plan::MqttPlan, receive_max: Option<u16>) -> usize {
    let window = usize::try_from(plan.window).unwrap_or(usize::MAX);
    receive_max.map_or(window, |r| window.min(usize::from(r)))
}

/// Publishes publisher `p`'s messages from `start` on `stream` (opened at
/// `opened`), at most `window` QoS 1 and 2 messages in flight.
async fn publish_on<S: AsyncRead + AsyncWrite + AckNow + Unpin>(
    run: &Run,
    p: u64,
    stream: &mut S,
    window: usize,
    opened: Instant,
    start: Instant,
) -> Published {
    let plan = std::sync::Arc::clone(&run.plan);
    let quota = plan.messages_of(p);
    let until = plan.duration.map(|d| start + d);
    let (gap, offset) = pacing(&plan, p);
    let mut me = Pub {
        run,
        window,
        flights: Flights::default(),
        refused: 0,
        acknowledged: 0,
    };
    let mut reader = Reader::default();
    let mut buf = vec![0u8; READ];
    let mut b = Batch::new(&plan, p);
    let mut control = run.control.clone();
    let (mut slot, mut published) = (0u64, 0u64);
    let mut last_sent = Instant::now();
    let every = run.keepalive();
    // One timer for the keep-alive and the drain, set again only when it
    // fires early (not one armed and dropped per turn of the loop).
    let mut ack_deadline: Option<TokioInstant> = None;
    // The next PINGREQ when nothing is written before it (none: an hour on).
    let ping_at = |last: Instant| match every.is_zero() {
        true => TokioInstant::now() + Duration::from_secs(3600),
        false => TokioInstant::from_std(last + every),
    };
    let mut ack_owed = false;
    let timer = tokio::time::sleep_until(ping_at(last_sent));
    tokio::pin!(timer);
    let closed_by_peer = loop {
        let state = *control.borrow_and_update();
        if state == RunState::Aborting {
            let n = me.flights.clear() as u64;
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
            let at = TokioInstant::now() + plan.drain;
            ack_deadline = Some(at);
            if at < timer.deadline() {
                timer.as_mut().reset(at);
            }
        }
        // Closed loop: wait until enough of the window is free; open loop:
        // the slot comes whatever the window holds.
        let free = window.saturating_sub(me.flights.len());
        let room = plan.qos == 0 || free > 0;
        let can_send = more && (gap.is_some() || plan.qos == 0 || free >= refill(window, quota, slot));
        tokio::select! {
            biased;
            r = stream.read(&mut buf) => {
                if let Err(class) = take_read(&mut me, r, &buf, &mut reader, &mut b.out, stream).await {
                    me.fail_all(class);
                    break true;
                }
                // Nothing to write: no data of ours carries TCP's ACK of
                // this read, and a broker with Nagle on (mosquitto) holds
                // its next answers for it (40 ms or more, delayed). Owed:
                // asked for once a scheduler turn brings nothing to read.
                let free = window.saturating_sub(me.flights.len());
                let writes_next = more && gap.is_none() && free >= refill(window, quota, slot);
                ack_owed = plan.qos > 0 && !me.flights.is_empty() && !writes_next;
            }
            Ok(()) = control.changed() => {}
            () = tokio::task::yield_now(), if ack_owed => {
                stream.ack_now();
                ack_owed = false;
            }
            () = until_due(due), if can_send => {
                let now = Instant::now();
                slot += 1;
                if !room {
                    run.rec.borrow_mut().dropped(now);
                    continue;
                }
                let sent_at = match gap {
                    Some(_) => {
                        run.rec.borrow_mut().phase(now, Phase::ScheduleLag, now.saturating_duration_since(due));
                        due
                    }
                    None => now,
                };
                // Closed loop: every message the window (QoS 0: the write)
                // has room for, while the quota, the duration and the run last.
                let go_on = gap.is_none() && until.is_none_or(|u| now < u) && *control.borrow() == RunState::Running;
                let n = me.fill(&mut b, published, sent_at, |k| go_on && quota.is_none_or(|q| slot + k <= q));
                if n == 0 {
                    // No identifier free: never within the window.
                    run.rec.borrow_mut().dropped(now);
                    continue;
                }
                slot += n - 1;
                if let Err(class) = send(stream, &b.out).await {
                    me.unwritten(&b.staged, class);
                    break true;
                }
                published += n;
                ack_owed = false;
                last_sent = me.written(&b.staged);
            }
            () = timer.as_mut() => {
                let now = TokioInstant::now();
                if ack_deadline.is_some_and(|at| at <= now) {
                    // --drain 0s waits for no acknowledgement: those in flight
                    // did not time out, they were not waited for.
                    let class = if plan.drain.is_zero() { "unacknowledged" } else { "ack_timeout" };
                    me.fail_all(ErrorClass::Mqtt(class));
                    break false;
                }
                let ping = TokioInstant::from_std(last_sent + every);
                if !every.is_zero() && ping <= now {
                    last_sent = Instant::now();
                    if send(stream, &codec::PINGREQ_BYTES).await.is_err() {
                        me.fail_all(ErrorClass::Eof);
                        break true;
                    }
                }
                let next = ping_at(last_sent);
                timer.as_mut().reset(ack_deadline.map_or(next, |at| at.min(next)));
            }
        }
    };
    let now = Instant::now();
    if closed_by_peer {
        run.rec.borrow_mut().closed_by_peer(now);
    } else {
        disconnect(stream).await;
    }
    run.rec.borrow_mut().connection_closed(Instant::now(), now - opened);
    me.outcome(p, published)
}

/// Publisher `p`'s share of --rate (the gap between its slots), and its
/// slots' offset so that the publishers take turns; none in a closed loop.
fn pacing(plan: &throng_plan::MqttPlan, p: u64) -> (Option<Duration>, Option<Duration>) {
    let gap = plan
        .rate
        .map(|r| Duration::from_secs_f64((plan.publishers as f64 / r).min(3600.0)));
    (gap, gap.map(|g| g.mul_f64((p - 1) as f64 / plan.publishers as f64)))
}

/// How many places of a closed loop's `window` must be free before the
/// next write, `slot` messages of `quota` published: half the window
/// (rounded up), or what is left to publish when less. A write per freed
/// place, as the broker's acknowledgements trickle in one or two a read,
/// carried two messages a write on average and made the writes most of
/// the generator's system time; waiting for half the window makes each
/// write carry at least that many while the other half stays in flight
/// (TCP's answer to the silly window syndrome).
fn refill(window: usize, quota: Option<u64>, slot: u64) -> usize {
    let half = window.div_ceil(2);
    let left = quota.map_or(usize::MAX, |q| {
        usize::try_from(q.saturating_sub(slot)).unwrap_or(usize::MAX)
    });
    half.min(left).max(1)
}

/// Waits until `due`; at once when it has passed (tokio's timer would
/// round a wait for now up to its next millisecond tick, and a closed
/// loop's next message is always due now).
async fn until_due(due: Instant) {
    if due > Instant::now() {
        tokio::time::sleep_until(TokioInstant::from_std(due)).await;
    }
}

/// Takes a read of `buf`'s first `r` bytes into `reader` and handles
/// the acknowledgements in it, the PUBRELs they call for written in one
/// write (`out`); the class the messages in flight fail as when the
/// connection must end.
async fn take_read<S: AsyncWrite + Unpin>(
    me: &mut Pub<'_>,
    r: std::io::Result<usize>,
    buf: &[u8],
    reader: &mut Reader,
    out: &mut Vec<u8>,
    stream: &mut S,
) -> Result<(), ErrorClass> {
    let n = match r {
        Ok(n) if n > 0 => n,
        Ok(_) => return Err(ErrorClass::Eof),
        Err(e) => return Err(io_fail(e)),
    };
    reader.push(buf.get(..n).unwrap_or(buf));
    out.clear();
    take_acks(me, reader, Instant::now(), out)?;
    if !out.is_empty() && send(stream, out).await.is_err() {
        return Err(ErrorClass::Eof);
    }
    Ok(())
}

/// Handles the acknowledgements `reader` holds (read at `now`), the
/// PUBRELs they call for appended to `rels`; the class the messages in
/// flight fail as when the connection must end: bytes that are not MQTT,
/// the broker's DISCONNECT (by its reason code).
fn take_acks(me: &mut Pub<'_>, reader: &mut Reader, now: Instant, rels: &mut Vec<u8>) -> Result<(), ErrorClass> {
    let protocol = ErrorClass::Mqtt("protocol");
    loop {
        let (h, body) = match reader.next_ref() {
            Ok(None) => return Ok(()),
            Ok(Some(Next::Skipped(_))) => continue,
            Ok(Some(Next::Packet(h, body))) => (h, body),
            Err(_) => return Err(protocol),
        };
        match Packet::parse(h, body, me.run.version) {
            Ok(Packet::Ack { kind, id, code }) => me.ack(now, kind, id, code, rels),
            Ok(Packet::Disconnect { code }) => {
                me.run.rec.borrow_mut().close_code(u16::from(code));
                return Err(ErrorClass::MqttDisconnected(code));
            }
            Ok(_) => {}
            Err(_) => return Err(protocol),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Took, broker, nagle_broker, pair, run, trickling_broker};
    use super::*;

    /// How the test broker answers.
    #[derive(Clone, Copy)]
    enum Answers {
        /// Each read's answers in one write.
        AtOnce,
        /// Each answer its own write.
        Trickle,
        /// Each answer its own write, behind Nagle.
        Nagle,
    }

    /// What the publisher did to its connection.
    struct Seen {
        writes: u64,
        /// Times it asked TCP to acknowledge at once.
        quick_acks: u64,
    }

    /// Publishes `messages` at `qos` against the test broker: what the
    /// broker took, the publisher's writes, its outcome and the run's
    /// acknowledged count.
    fn publish_all(qos: u8, messages: u64, window: u64) -> (Took, Seen, Published, u64) {
        publish_to(qos, messages, window, Answers::AtOnce)
    }

    /// As [`publish_all`], against a broker that answers as `answers` says;
    /// a publisher that stalls for 10 s fails the test.
    fn publish_to(qos: u8, messages: u64, window: u64, answers: Answers) -> (Took, Seen, Published, u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let run = run(qos, messages, window);
            let (mut client, server) = pair();
            let (writes, quick_acks) = (Rc::clone(&client.writes), Rc::clone(&client.quick_acks));
            let took = match answers {
                Answers::AtOnce => tokio::task::spawn_local(broker(server)),
                Answers::Trickle => tokio::task::spawn_local(trickling_broker(server)),
                Answers::Nagle => tokio::task::spawn_local(nagle_broker(server, Rc::clone(&client.acked))),
            };
            let now = Instant::now();
            let publishing = publish_on(&run, 1, &mut client, window_of(&run.plan, None), now, now);
            let done = tokio::time::timeout(Duration::from_secs(10), publishing)
                .await
                .expect("the publisher stalled: a broker's answers waited for an ACK it never asked for");
            drop(client);
            let took = took.await.expect("the broker ends");
            let seen = Seen {
                writes: writes.get(),
                quick_acks: quick_acks.get(),
            };
            (took, seen, done, run.acknowledged.get())
        })
    }

    #[test]
    fn qos1_writes_each_freed_window_in_one_write() {
        // The broker answers each read at once: 16 PUBLISHes a write, then
        // 16 PUBACKs free the window for the next 16 (a write per PUBLISH
        // was most of the CPU).
        let (took, seen, done, acknowledged) = publish_all(1, 160, 16);
        assert_eq!(
            took,
            Took {
                publishes: 160,
                pubrels: 0,
                disconnected: true
            }
        );
        assert_eq!(
            (done.written, done.refused, done.unacknowledged, acknowledged),
            (160, 0, 0, 160)
        );
        assert_eq!(seen.writes, 160 / 16 + 1, "a write per window, and the DISCONNECT");
    }

    #[test]
    fn qos1_waits_for_half_the_window_before_writing() {
        // The broker's PUBACKs come one a read: a write per freed place
        // would carry one message each (161 writes); half the window freed
        // a write: the first 16, then 8 a write.
        let (took, seen, done, acknowledged) = publish_to(1, 160, 16, Answers::Trickle);
        assert_eq!(
            took,
            Took {
                publishes: 160,
                pubrels: 0,
                disconnected: true
            }
        );
        assert_eq!(
            (done.written, done.refused, done.unacknowledged, acknowledged),
            (160, 0, 0, 160)
        );
        assert_eq!(
            seen.writes,
            1 + (160 - 16) / 8 + 1,
            "the window, 8 a write, and the DISCONNECT"
        );
        // Each next answer was already there when it looked: no ACK asked.
        assert_eq!(seen.quick_acks, 0);
    }

    #[test]
    fn qos1_asks_for_the_ack_a_nagle_broker_waits_for() {
        // mosquitto writes each PUBACK with Nagle on: after the first of a
        // window the others wait for TCP's ACK. A publisher that holds its
        // next write until half its window is free must ask for that ACK,
        // or wait for a delayed-ACK timeout every window (here: for ever).
        let (took, seen, done, acknowledged) = publish_to(1, 160, 16, Answers::Nagle);
        assert_eq!(took.publishes, 160);
        assert_eq!((done.written, done.unacknowledged, acknowledged), (160, 0, 160));
        assert_eq!(
            (seen.writes, seen.quick_acks),
            (160 / 16 + 1, 160 / 16),
            "a write a window and the DISCONNECT; an ACK asked for after each window's first PUBACK"
        );
    }

    #[test]
    fn a_broker_answering_every_read_needs_no_quick_acks() {
        // Each read frees the whole window and the publisher writes at once;
        // only the last window's PUBACKs are waited for with nothing to send.
        let (_, seen, done, _) = publish_all(1, 160, 16);
        assert_eq!(done.unacknowledged, 0);
        assert_eq!(seen.quick_acks, 0);
    }

    #[test]
    fn the_last_messages_need_no_half_window() {
        // 20 messages, window 16: 16, then the 4 left once 4 are free.
        let (took, seen, done, acknowledged) = publish_to(1, 20, 16, Answers::Trickle);
        assert_eq!(took.publishes, 20);
        assert_eq!((done.written, done.unacknowledged, acknowledged), (20, 0, 20));
        assert_eq!(seen.writes, 3, "the window, the 4 left, and the DISCONNECT");
    }

    #[test]
    fn refill_is_half_the_window_or_what_is_left() {
        assert_eq!(refill(16, None, 0), 8);
        assert_eq!(refill(100, Some(1000), 10), 50);
        assert_eq!(refill(1, None, 0), 1);
        assert_eq!(refill(15, None, 0), 8);
        assert_eq!(refill(16, Some(20), 17), 3);
        assert_eq!(refill(16, Some(20), 20), 1);
    }

    #[test]
    fn qos2_writes_each_reads_pubrels_in_one_write() {
        let (took, seen, done, acknowledged) = publish_all(2, 160, 16);
        assert_eq!(
            took,
            Took {
                publishes: 160,
                pubrels: 160,
                disconnected: true
            }
        );
        assert_eq!((done.written, done.unacknowledged, acknowledged), (160, 0, 160));
        assert_eq!(
            seen.writes,
            2 * 160 / 16 + 1,
            "PUBLISHes and PUBRELs a window a write, and the DISCONNECT"
        );
    }

    #[test]
    fn qos0_writes_many_messages_at_once() {
        // 64-byte payloads: 77 bytes a PUBLISH, 213 to a 16 KiB write.
        let (took, seen, done, _) = publish_all(0, 1000, 16);
        assert_eq!(
            took,
            Took {
                publishes: 1000,
                pubrels: 0,
                disconnected: true
            }
        );
        assert_eq!((done.written, done.unacknowledged), (1000, 0));
        assert!(
            seen.writes <= 1000 / 200 + 1 + 1,
            "{} writes for 1000 messages",
            seen.writes
        );
    }
}
