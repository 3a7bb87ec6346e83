//! An MQTT session held by the storm's holder, without a task of its own:
//! what one held session keeps (the PINGREQ waiting for its PINGRESP, a
//! packet a read cut short), what the bytes read off it mean, and what a
//! keep-alive tick does. The holder does the I/O (its reads, and
//! non-blocking sends through `send`); this is [`super::hold`]'s logic
//! without the task:
//!
//! ```text
//!  bytes ─► read: PINGRESP ─► pong phase; PUBLISH QoS 1 ─► PUBACK;
//!                 DISCONNECT ─► close code, Closed; not MQTT ─► Closed
//!  tick  ─► PINGREQ (none answered since the last: mqtt.ping_timeout, Closed)
//! ```
//!
//! Between whole packets a session keeps 16 bytes; a packet cut by a read
//! (or an oversized one being skipped) gets a boxed [`Reader`] until it is
//! whole.

use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase, Recorder};

use super::codec::{self, MAX_PACKET, Next, Packet, Reader, Version};

/// Whether a held session goes on after what it just read or did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Open,
    /// The session is over (the broker ended it, or it went silent): the
    /// holder closes it as a connection the server closed.
    Closed,
}

/// One held session's state.
#[derive(Default)]
pub(crate) struct Session {
    /// When the PINGREQ waiting for its PINGRESP went, in nanoseconds
    /// after the connection opened (never 0 then); 0: none is waiting.
    ping_out: u64,
    /// A packet a read cut short, or an oversized one being skipped.
    partial: Option<Box<Reader>>,
}

impl Session {
    /// Handles bytes read off the session; `send` writes a whole packet
    /// now or returns false (the connection cannot go on).
    pub(crate) fn read(
        &mut self,
        mut bytes: &[u8],
        version: Version,
        opened: Instant,
        rec: &mut Recorder,
        send: &mut impl FnMut(&[u8]) -> bool,
    ) -> Flow {
        if self.partial.is_none() {
            // Whole packets straight from the read, no copy.
            loop {
                if bytes.is_empty() {
                    return Flow::Open;
                }
                match codec::header(bytes) {
                    Err(_) => return Flow::Closed,
                    Ok(Some(h)) if h.len <= MAX_PACKET && h.size + h.len <= bytes.len() => {
                        let body = &bytes[h.size..h.size + h.len];
                        if packet(
                            Packet::parse(h, body, version).ok(),
                            &mut self.ping_out,
                            opened,
                            rec,
                            send,
                        ) == Flow::Closed
                        {
                            return Flow::Closed;
                        }
                        bytes = &bytes[h.size + h.len..];
                    }
                    // Cut short, or too large to keep: the reader takes it.
                    _ => break,
                }
            }
        }
        let reader = self.partial.get_or_insert_with(Box::default);
        reader.push(bytes);
        loop {
            let (h, body) = match reader.next() {
                Ok(None) => break,
                Ok(Some(Next::Skipped(_))) => continue,
                Ok(Some(Next::Packet(h, body))) => (h, body),
                Err(_) => return Flow::Closed,
            };
            if packet(
                Packet::parse(h, &body, version).ok(),
                &mut self.ping_out,
                opened,
                rec,
                send,
            ) == Flow::Closed
            {
                return Flow::Closed;
            }
        }
        if reader.idle() {
            self.partial = None;
        }
        Flow::Open
    }

    /// A keep-alive tick at `now`: a PINGREQ, unless the last one is still
    /// unanswered a keep-alive later (the broker is gone or stuck: MQTT
    /// 3.1.1 3.1.2.10, the client closes then).
    pub(crate) fn tick(
        &mut self,
        opened: Instant,
        now: Instant,
        rec: &mut Recorder,
        send: &mut impl FnMut(&[u8]) -> bool,
    ) -> Flow {
        if self.ping_out != 0 {
            rec.hold_failed(&ErrorClass::Mqtt("ping_timeout"));
            return Flow::Closed;
        }
        let since = u64::try_from(now.saturating_duration_since(opened).as_nanos()).unwrap_or(u64::MAX);
        self.ping_out = since.max(1);
        if send(&codec::PINGREQ_BYTES) {
            Flow::Open
        } else {
            Flow::Closed
        }
    }
}

/// What one packet does to a held session (None: not MQTT).
fn packet(
    p: Option<Packet>,
    ping_out: &mut u64,
    opened: Instant,
    rec: &mut Recorder,
    send: &mut impl FnMut(&[u8]) -> bool,
) -> Flow {
    match p {
        Some(Packet::Pingresp) => {
            if *ping_out != 0 {
                let at = opened + Duration::from_nanos(std::mem::take(ping_out));
                let now = Instant::now();
                rec.phase(now, Phase::Pong, now.saturating_duration_since(at));
            }
            Flow::Open
        }
        Some(Packet::Publish { qos: 1, id: Some(id) }) if !send(&codec::puback(id)) => Flow::Closed,
        Some(Packet::Disconnect { code }) => {
            rec.close_code(u16::from(code));
            Flow::Closed
        }
        Some(_) => Flow::Open,
        None => Flow::Closed,
    }
}

/// The packet a held session ends with (the broker then drops its will
/// and logs a clean disconnect).
pub(crate) const GOODBYE: &[u8] = &codec::DISCONNECT_BYTES;

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> Recorder {
        Recorder::new(Instant::now())
    }

    fn pongs(r: &Recorder) -> u64 {
        r.snapshot(Instant::now()).phases.get("pong").map_or(0, |h| h.count())
    }

    /// Between whole packets a held session is a few bytes: the point of
    /// holding it without a task.
    #[test]
    fn a_held_session_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Session>(), 16);
    }

    #[test]
    fn a_pingresp_answers_the_pingreq_and_is_timed() {
        let (mut s, mut r, opened) = (Session::default(), rec(), Instant::now());
        let mut sent = Vec::new();
        let mut send = |b: &[u8]| {
            sent.extend_from_slice(b);
            true
        };
        assert_eq!(s.tick(opened, Instant::now(), &mut r, &mut send), Flow::Open);
        assert_eq!(s.read(&[0xd0, 0], Version::V5, opened, &mut r, &mut send), Flow::Open);
        assert_eq!(s.tick(opened, Instant::now(), &mut r, &mut send), Flow::Open);
        assert_eq!(sent, [0xc0, 0, 0xc0, 0]);
        assert_eq!(pongs(&r), 1);
    }

    #[test]
    fn an_unanswered_pingreq_ends_the_session_at_the_next_tick() {
        let (mut s, mut r, opened) = (Session::default(), rec(), Instant::now());
        let mut send = |_: &[u8]| true;
        assert_eq!(s.tick(opened, Instant::now(), &mut r, &mut send), Flow::Open);
        assert_eq!(s.tick(opened, Instant::now(), &mut r, &mut send), Flow::Closed);
        assert_eq!(
            r.snapshot(Instant::now())
                .hold_failures
                .get("mqtt.ping_timeout")
                .copied(),
            Some(1)
        );
    }

    /// Packets cut anywhere by reads come out whole; a QoS 1 PUBLISH is
    /// acknowledged once; the reader goes away once nothing is cut.
    #[test]
    fn packets_cut_by_reads_are_put_back_together() {
        // PUBLISH QoS 1, topic "t", id 7, payload "hi"; then PINGRESP.
        let wire = [0x32, 7, 0, 1, b't', 0, 7, b'h', b'i', 0xd0, 0];
        for cut in 0..=wire.len() {
            let (mut s, mut r, opened) = (Session::default(), rec(), Instant::now());
            let mut sent = Vec::new();
            let mut send = |b: &[u8]| {
                sent.extend_from_slice(b);
                true
            };
            s.tick(opened, Instant::now(), &mut r, &mut send);
            assert_eq!(
                s.read(&wire[..cut], Version::V311, opened, &mut r, &mut send),
                Flow::Open
            );
            assert_eq!(
                s.read(&wire[cut..], Version::V311, opened, &mut r, &mut send),
                Flow::Open
            );
            assert!(s.partial.is_none(), "cut at {cut}");
            assert_eq!(sent, [0xc0, 0, 0x40, 2, 0, 7], "cut at {cut}");
            assert_eq!(pongs(&r), 1, "cut at {cut}");
        }
    }

    #[test]
    fn a_disconnect_is_counted_by_its_reason() {
        let (mut s, mut r, opened) = (Session::default(), rec(), Instant::now());
        let mut send = |_: &[u8]| true;
        let flow = s.read(&[0xe0, 1, 0x8b], Version::V5, opened, &mut r, &mut send);
        assert_eq!(flow, Flow::Closed);
        assert_eq!(r.snapshot(Instant::now()).close_codes.get("139").copied(), Some(1));
    }

    #[test]
    fn bytes_that_are_not_mqtt_end_the_session() {
        let (mut s, mut r, opened) = (Session::default(), rec(), Instant::now());
        let mut send = |_: &[u8]| true;
        // Packet type 15 is reserved; so is 0.
        assert_eq!(s.read(&[0xf0, 0], Version::V5, opened, &mut r, &mut send), Flow::Closed);
        let mut s = Session::default();
        // A remaining length longer than four bytes.
        let bad = [0x30, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert_eq!(s.read(&bad, Version::V5, opened, &mut r, &mut send), Flow::Closed);
    }

    /// An oversized packet is skipped as it streams in, never buffered.
    #[test]
    fn an_oversized_packet_is_skipped_not_kept() {
        let (mut s, mut r, opened) = (Session::default(), rec(), Instant::now());
        let mut send = |_: &[u8]| true;
        // PUBLISH QoS 0 with a remaining length of 1 MiB (0x80 0x80 0x40).
        assert_eq!(
            s.read(&[0x30, 0x80, 0x80, 0x40], Version::V5, opened, &mut r, &mut send),
            Flow::Open
        );
        let chunk = vec![0u8; 64 * 1024];
        for _ in 0..16 {
            assert_eq!(s.read(&chunk, Version::V5, opened, &mut r, &mut send), Flow::Open);
        }
        assert!(s.partial.is_none(), "the skip is over");
        assert_eq!(s.read(&[0xd0, 0], Version::V5, opened, &mut r, &mut send), Flow::Open);
    }
}
