//! A pub/sub run's subscriber: reads deliveries, acknowledges them (QoS 1:
//! PUBACK; QoS 2: PUBREC, then PUBCOMP for the broker's PUBREL), times
//! each (phase `delivery`, from the send time in its payload) and keeps
//! its books per publisher.

use std::cell::RefCell;
use std::ops::RangeInclusive;
use std::rc::Rc;
use std::time::{Duration, Instant};

use throng_metrics::{Phase, SubscriberBooks};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::books::{Arrival, Seen, Stamp};
use super::client::{Client, Run};
use super::codec::{self, Next, Packet, Reader};
use super::{disconnect, send};

/// Bytes one read takes at most.
const READ: usize = 64 * 1024;

/// One subscriber's books.
pub(crate) struct Books {
    subscriber: u64,
    /// The publishers it hears, from 1.
    sources: RangeInclusive<u64>,
    /// Per publisher in `sources`.
    seen: Vec<Seen>,
    /// Messages published to its topics (known once publishers are done).
    expected: Option<u64>,
    received: u64,
    /// Deliveries not of this run (or of a publisher it does not hear).
    pub foreign: u64,
}

impl Books {
    pub(crate) fn new(subscriber: u64, sources: RangeInclusive<u64>) -> Books {
        let n = sources.end().saturating_sub(*sources.start()).saturating_add(1);
        Books {
            subscriber,
            seen: vec![Seen::default(); usize::try_from(n).unwrap_or(0)],
            sources,
            expected: None,
            received: 0,
            foreign: 0,
        }
    }

    /// Sets what it should receive from what each publisher (from 1) published.
    pub(crate) fn expect(&mut self, published: &[u64]) {
        let from = usize::try_from(*self.sources.start()).unwrap_or(usize::MAX);
        let n = self.seen.len();
        let sum = published.iter().skip(from.saturating_sub(1)).take(n).sum();
        self.expected = Some(sum);
    }

    /// True once all it should receive came.
    pub(crate) fn complete(&self) -> bool {
        self.expected.is_some_and(|e| self.received >= e)
    }

    /// Takes a delivery's stamp: what it was.
    fn take(&mut self, stamp: Stamp) -> Option<Arrival> {
        let p = u64::from(stamp.publisher);
        if !self.sources.contains(&p) {
            self.foreign += 1;
            return None;
        }
        let i = usize::try_from(p - self.sources.start()).ok()?;
        let a = self.seen.get_mut(i)?.take(stamp.seq);
        if a != Arrival::Again {
            self.received += 1;
        }
        Some(a)
    }

    /// Its books: distinct messages received (at most what it should have;
    /// any more counted duplicated), and the rest lost.
    pub(crate) fn finish(&self) -> SubscriberBooks {
        let expected = self.expected.unwrap_or(0);
        let (mut duplicated, mut out_of_order) = (0u64, 0u64);
        for s in &self.seen {
            duplicated = duplicated.saturating_add(s.duplicated);
            out_of_order = out_of_order.saturating_add(s.out_of_order);
        }
        let received = self.received.min(expected);
        duplicated = duplicated.saturating_add(self.received - received);
        SubscriberBooks {
            subscriber: self.subscriber,
            expected,
            received,
            lost: expected - received,
            duplicated,
            out_of_order,
        }
    }
}

/// Reads deliveries until the run is done (then DISCONNECT) or the broker
/// ends the connection.
pub(crate) async fn listen(run: Rc<Run>, client: Client, books: Rc<RefCell<Books>>) {
    let Client {
        mut stream,
        opened,
        early,
        ..
    } = client;
    books.borrow_mut().foreign += early;
    listen_on(&run, &mut stream, opened, &books).await;
}

/// Reads deliveries on `stream` (opened at `opened`) until the run is done
/// or the broker ends the connection.
async fn listen_on<S: AsyncRead + AsyncWrite + Unpin>(
    run: &Run,
    stream: &mut S,
    opened: Instant,
    books: &RefCell<Books>,
) {
    let mut done = run.done.subscribe();
    let mut reader = Reader::default();
    let mut buf = vec![0u8; READ];
    let mut acks = Vec::new();
    let every = run.keepalive();
    let period = if every.is_zero() {
        Duration::from_secs(3600)
    } else {
        every
    };
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    let ended_by_us = loop {
        tokio::select! {
            r = stream.read(&mut buf) => {
                let n = match r {
                    Ok(n) if n > 0 => n,
                    _ => break false,
                };
                reader.push(&buf[..n]);
                acks.clear();
                let go_on = take_packets(run, &mut reader, books, &mut acks);
                // Every acknowledgement one read called for, in one write.
                let sent = acks.is_empty() || send(stream, &acks).await.is_ok();
                if !(go_on && sent) {
                    break false;
                }
            }
            _ = done.changed() => break true,
            _ = ping.tick(), if !every.is_zero() => {
                if send(stream, &codec::PINGREQ_BYTES).await.is_err() {
                    break false;
                }
            }
        }
    };
    let now = Instant::now();
    if ended_by_us {
        disconnect(stream).await;
    } else if !*run.done.borrow() {
        run.rec.borrow_mut().closed_by_peer(now);
    }
    run.rec.borrow_mut().connection_closed(now, now - opened);
}

/// Handles every whole packet `reader` holds, appending the
/// acknowledgements they call for to `acks`: false when the connection
/// must end (the broker's DISCONNECT, bytes that are not MQTT).
fn take_packets(run: &Run, reader: &mut Reader, books: &RefCell<Books>, acks: &mut Vec<u8>) -> bool {
    let mut now = None;
    loop {
        let (h, body) = match reader.next_ref() {
            Ok(None) => return true,
            Ok(Some(Next::Skipped(_))) => continue,
            Ok(Some(Next::Packet(h, body))) => (h, body),
            Err(_) => return false,
        };
        if h.kind == codec::PUBLISH {
            let Ok(d) = codec::delivery(h, body, run.version) else {
                return false;
            };
            match Stamp::read(d.payload, run.id) {
                Some(stamp) => {
                    let arrival = books.borrow_mut().take(stamp);
                    if matches!(arrival, Some(Arrival::New | Arrival::Late)) {
                        // One clock read for every delivery of a read: they
                        // arrived together.
                        let now = *now.get_or_insert_with(Instant::now);
                        let sent = run.origin + Duration::from_micros(stamp.sent_us);
                        run.rec
                            .borrow_mut()
                            .phase(now, Phase::Delivery, now.saturating_duration_since(sent));
                    }
                }
                None => books.borrow_mut().foreign += 1,
            }
            match (d.qos, d.id) {
                (1, Some(id)) => acks.extend_from_slice(&codec::puback(id)),
                (2, Some(id)) => acks.extend_from_slice(&codec::ack(codec::PUBREC, id)),
                _ => {}
            }
            continue;
        }
        match Packet::parse(h, body, run.version) {
            Ok(Packet::Ack {
                kind: codec::PUBREL,
                id,
                ..
            }) => acks.extend_from_slice(&codec::ack(codec::PUBCOMP, id)),
            Ok(Packet::Disconnect { code }) => {
                run.rec.borrow_mut().close_code(u16::from(code));
                return false;
            }
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{pair, run};
    use super::*;
    use throng_plan::PAYLOAD_HEADER;
    use tokio::io::AsyncWriteExt;

    /// `n` deliveries at `qos` from publisher 1 of `run` written to a
    /// subscriber at once: its writes, what it wrote back, and its books.
    fn deliver(qos: u8, n: u16) -> (u64, Vec<u8>, SubscriberBooks) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let run = run(qos, u64::from(n), 16);
            let (mut client, mut broker) = pair();
            let writes = Rc::clone(&client.writes);
            let books = Rc::new(RefCell::new(Books::new(1, 1..=1)));
            let listening = {
                let (run, books) = (Rc::clone(&run), Rc::clone(&books));
                tokio::task::spawn_local(async move { listen_on(&run, &mut client, Instant::now(), &books).await })
            };
            let mut out = Vec::new();
            let mut payload = vec![0u8; PAYLOAD_HEADER as usize];
            for seq in 0..n {
                let stamp = Stamp {
                    run: run.id,
                    publisher: 1,
                    seq: u64::from(seq),
                    sent_us: 0,
                };
                stamp.write(&mut payload);
                let p = codec::Publish {
                    version: codec::Version::V311,
                    topic: "t",
                    qos,
                    id: seq + 1,
                    retain: false,
                    dup: false,
                    payload: &payload,
                };
                codec::publish(&mut out, &p);
            }
            broker.write_all(&out).await.expect("the subscriber reads");
            // Its acknowledgements (4 bytes each), then (QoS 2) PUBRELs
            // for all, answered by PUBCOMPs.
            let mut back = vec![0u8; 4 * usize::from(n)];
            broker.read_exact(&mut back).await.expect("the acknowledgements");
            if qos == 2 {
                let rels: Vec<u8> = (1..=n).flat_map(|id| codec::ack(codec::PUBREL, id)).collect();
                broker.write_all(&rels).await.expect("the subscriber reads");
                let mut comps = vec![0u8; 4 * usize::from(n)];
                broker.read_exact(&mut comps).await.expect("the PUBCOMPs");
                back.extend_from_slice(&comps);
            }
            run.done.send_replace(true);
            listening.await.expect("the subscriber ends");
            books.borrow_mut().expect(&[u64::from(n)]);
            let b = books.borrow().finish();
            (writes.get(), back, b)
        })
    }

    #[test]
    fn a_reads_deliveries_are_acknowledged_in_one_write() {
        let (writes, back, b) = deliver(1, 100);
        let want: Vec<u8> = (1..=100).flat_map(codec::puback).collect();
        assert_eq!(back, want, "a PUBACK for each, in order");
        assert_eq!((b.expected, b.received, b.lost, b.duplicated), (100, 100, 0, 0));
        assert_eq!(writes, 1 + 1, "the PUBACKs in one write, and the DISCONNECT");
    }

    #[test]
    fn qos2_pubrecs_and_pubcomps_go_a_read_a_write() {
        let (writes, back, b) = deliver(2, 100);
        let recs = (1..=100).flat_map(|id| codec::ack(codec::PUBREC, id));
        let comps = (1..=100).flat_map(|id| codec::ack(codec::PUBCOMP, id));
        assert_eq!(back, recs.chain(comps).collect::<Vec<u8>>());
        assert_eq!((b.expected, b.received, b.lost), (100, 100, 0));
        assert_eq!(writes, 2 + 1, "the PUBRECs, the PUBCOMPs, and the DISCONNECT");
    }

    fn stamp(publisher: u32, seq: u64) -> Stamp {
        Stamp {
            run: 1,
            publisher,
            seq,
            sent_us: 0,
        }
    }

    #[test]
    fn books_expect_what_their_publishers_published_and_balance() {
        // Subscriber 2 of pairs hears publisher 2 only.
        let mut b = Books::new(2, 2..=2);
        for seq in [0, 1, 1, 3, 2] {
            b.take(stamp(2, seq));
        }
        assert_eq!(b.take(stamp(1, 0)), None, "publisher 1 is not its pair");
        assert!(!b.complete(), "nothing is expected before publishers are done");
        b.expect(&[7, 5, 9]);
        let s = b.finish();
        assert_eq!(
            (s.expected, s.received, s.lost, s.duplicated, s.out_of_order),
            (5, 4, 1, 1, 1)
        );
        assert_eq!(b.foreign, 1);
        b.take(stamp(2, 4));
        assert!(b.complete());
    }

    #[test]
    fn more_received_than_expected_counts_as_duplicated_and_books_still_balance() {
        // A sequence number far behind the window is counted received again.
        let mut b = Books::new(1, 1..=2);
        b.take(stamp(1, 0));
        b.take(stamp(1, 5000));
        b.take(stamp(1, 0));
        b.expect(&[2, 0]);
        let s = b.finish();
        assert_eq!((s.expected, s.received, s.lost, s.duplicated), (2, 2, 0, 1));
    }
}
