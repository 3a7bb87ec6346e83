//! A pub/sub run's messages and books, free of I/O: the header each
//! payload starts with (stamped by its publisher), and what one subscriber
//! saw of each publisher's sequence.
//!
//! ```text
//!  payload: "th" | run id (u32) | publisher (u32) | sequence (u64) | sent µs (u64) | padding
//!  Seen (per subscriber, per publisher): the last WINDOW sequence numbers
//!  as a ring of bits → received, duplicated, out of order
//! ```

use throng_plan::PAYLOAD_HEADER;

/// The mark a payload starts with.
const MARK: &[u8; 2] = b"th";

/// Sequence numbers a subscriber remembers per publisher, behind the
/// highest seen: a duplicate older than that is counted out of order and
/// received (bounded memory, whatever the broker sends).
pub(crate) const WINDOW: u64 = 1024;

/// What a payload's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub run: u32,
    /// The publisher, from 1.
    pub publisher: u32,
    /// The message's number, from 0, per publisher.
    pub seq: u64,
    /// When it was sent, µs after the run's start.
    pub sent_us: u64,
}

impl Stamp {
    /// Writes the header over the front of `payload` (at least
    /// [`PAYLOAD_HEADER`] bytes long).
    pub(crate) fn write(&self, payload: &mut [u8]) {
        let Some(head) = payload.get_mut(..PAYLOAD_HEADER as usize) else {
            return;
        };
        head[..2].copy_from_slice(MARK);
        head[2..6].copy_from_slice(&self.run.to_be_bytes());
        head[6..10].copy_from_slice(&self.publisher.to_be_bytes());
        head[10..18].copy_from_slice(&self.seq.to_be_bytes());
        head[18..26].copy_from_slice(&self.sent_us.to_be_bytes());
    }

    /// Reads a payload's header: None when it is not one of ours.
    pub(crate) fn read(payload: &[u8], run: u32) -> Option<Stamp> {
        let head = payload.get(..PAYLOAD_HEADER as usize)?;
        let u32_at = |at: usize| {
            head.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
        };
        let u64_at = |at: usize| {
            head.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
        };
        if &head[..2] != MARK || u32_at(2)? != run {
            return None;
        }
        Some(Stamp {
            run,
            publisher: u32_at(6)?,
            seq: u64_at(10)?,
            sent_us: u64_at(18)?,
        })
    }
}

/// What a delivery was, to its subscriber's books.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// First time, in order.
    New,
    /// First time, after a later message of the same publisher.
    Late,
    /// Seen before.
    Again,
}

/// One subscriber's view of one publisher's sequence.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    /// One past the highest sequence number seen (0: none yet).
    next: u64,
    /// Bit `seq % WINDOW`: `seq` (within WINDOW of `next`) was seen.
    /// Allocated at the first delivery.
    bits: Vec<u64>,
    /// Distinct messages received.
    pub received: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
}

impl Seen {
    fn slot(seq: u64) -> (usize, u64) {
        let at = seq % WINDOW;
        ((at / 64) as usize, at % 64)
    }

    fn get(&self, seq: u64) -> bool {
        let (w, b) = Self::slot(seq);
        self.bits.get(w).is_some_and(|x| x >> b & 1 == 1)
    }

    fn put(&mut self, seq: u64, on: bool) {
        if self.bits.is_empty() {
            self.bits = vec![0; (WINDOW / 64) as usize];
        }
        let (w, b) = Self::slot(seq);
        if let Some(x) = self.bits.get_mut(w) {
            if on {
                *x |= 1 << b;
            } else {
                *x &= !(1 << b);
            }
        }
    }

    /// Takes sequence number `seq`.
    pub(crate) fn take(&mut self, seq: u64) -> Arrival {
        if seq >= self.next {
            // Forget what falls out of the window: the slots of
            // next..=seq (all of them after a jump past it).
            if seq - self.next >= WINDOW {
                self.bits.iter_mut().for_each(|x| *x = 0);
            } else {
                for old in self.next..seq {
                    self.put(old, false);
                }
            }
            self.next = seq.saturating_add(1);
            self.put(seq, true);
            self.received += 1;
            return Arrival::New;
        }
        if self.next - 1 - seq >= WINDOW {
            // Too old to tell: counted once more, late.
            self.received += 1;
            self.out_of_order += 1;
            return Arrival::Late;
        }
        if self.get(seq) {
            self.duplicated += 1;
            return Arrival::Again;
        }
        self.put(seq, true);
        self.received += 1;
        self.out_of_order += 1;
        Arrival::Late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_round_trips_and_other_payloads_are_not_ours() {
        let s = Stamp {
            run: 7,
            publisher: 3,
            seq: 1 << 40,
            sent_us: 12_345,
        };
        let mut p = vec![0u8; 40];
        s.write(&mut p);
        assert_eq!(Stamp::read(&p, 7), Some(s));
        assert_eq!(Stamp::read(&p, 8), None);
        assert_eq!(Stamp::read(&p[..25], 7), None);
        assert_eq!(Stamp::read(b"hello, this is not a throng message", 7), None);
    }

    #[test]
    fn in_order_late_and_again() {
        let mut s = Seen::default();
        for seq in [0, 1, 2, 4, 3, 3, 0, 5] {
            s.take(seq);
        }
        assert_eq!((s.received, s.duplicated, s.out_of_order), (6, 2, 1));
        assert_eq!(s.take(6), Arrival::New);
        assert_eq!(s.take(6), Arrival::Again);
    }

    #[test]
    fn the_window_stays_bounded_and_remembers_across_word_boundaries() {
        let mut s = Seen::default();
        for seq in (0..200_000).step_by(3) {
            assert_eq!(s.take(seq), Arrival::New);
            assert_eq!(s.bits.len(), (WINDOW / 64) as usize);
        }
        // 199_998 was the last; 199_998 - 3 * 50 was seen, 199_998 - 100 was not.
        assert_eq!(s.take(199_998 - 150), Arrival::Again);
        assert_eq!(s.take(199_998 - 100), Arrival::Late);
        assert_eq!(s.take(199_998 - 100), Arrival::Again);
        // Far behind the window: late, counted.
        assert_eq!(s.take(5), Arrival::Late);
        // A jump past the window forgets everything behind it.
        assert_eq!(s.take(10_000_000), Arrival::New);
        assert_eq!(s.take(10_000_000 - 1), Arrival::Late);
    }
}
