//! The books of a publish/subscribe run (`throng mqtt`): what publishers
//! sent and what each subscriber received of what it should have.
//!
//! Per subscriber, `expected` is every message published to a topic it
//! matches; `received` counts distinct ones, so `received + lost ==
//! expected` always holds. Duplicates and out-of-order arrivals are
//! counted apart (they are also received once).

use serde::{Deserialize, Serialize};

use crate::hist::HistError;
use crate::outcome::add;

/// Subscribers listed one by one at most (the totals count them all).
pub const LISTED_SUBSCRIBERS: usize = 1000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One subscriber's books.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriberBooks {
    /// The subscriber's number, from 1.
    pub subscriber: u64,
    /// Messages published to the topics it matches.
    pub expected: u64,
    /// Distinct messages of this run it received.
    pub received: u64,
    /// `expected - received`: never delivered before the drain ended.
    pub lost: u64,
    /// Messages received again (QoS 1 redeliveries).
    pub duplicated: u64,
    /// Messages received after a later one of the same publisher.
    pub out_of_order: u64,
}

/// A publish/subscribe run's books, summed over subscribers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PubSub {
    /// PUBLISH packets written (each message once).
    pub published: u64,
    /// Of those, QoS 1 and 2 messages the broker refused (PUBACK or PUBREC
    /// with a failure code, e.g. not authorized): no subscriber expects
    /// them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: u64,
    /// Of those, QoS 1 and 2 messages whose acknowledgement (PUBACK, or
    /// PUBCOMP) came back.
    pub acknowledged: u64,
    /// Of those, QoS 1 and 2 messages with neither an acknowledgement nor
    /// a refusal by the end: in flight when the drain ended (`--drain 0s`
    /// waits for none), the connection dropped, or the run was stopped.
    /// At QoS 1 and 2, `acknowledged + refused + unacknowledged ==
    /// published`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unacknowledged: u64,
    /// Sum over subscribers of the messages each should receive.
    pub expected: u64,
    /// Sum over subscribers of the distinct messages each received.
    pub received: u64,
    /// `expected - received`.
    pub lost: u64,
    /// Deliveries of a message a subscriber already had.
    pub duplicated: u64,
    /// Deliveries older than one already seen from the same publisher.
    pub out_of_order: u64,
    /// Deliveries that were not this run's messages (a retained message of
    /// an earlier run, another client's traffic): not in `received`.
    pub foreign: u64,
    /// The first [`LISTED_SUBSCRIBERS`] subscribers' own books.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscribers: Vec<SubscriberBooks>,
}

impl PubSub {
    /// Adds `o`'s counts; an error when a sum passes 2^64 - 1.
    pub fn merge(&mut self, o: &PubSub) -> Result<(), HistError> {
        add(&mut self.published, o.published, "pubsub.published")?;
        add(&mut self.refused, o.refused, "pubsub.refused")?;
        add(&mut self.acknowledged, o.acknowledged, "pubsub.acknowledged")?;
        add(&mut self.unacknowledged, o.unacknowledged, "pubsub.unacknowledged")?;
        add(&mut self.expected, o.expected, "pubsub.expected")?;
        add(&mut self.received, o.received, "pubsub.received")?;
        add(&mut self.lost, o.lost, "pubsub.lost")?;
        add(&mut self.duplicated, o.duplicated, "pubsub.duplicated")?;
        add(&mut self.out_of_order, o.out_of_order, "pubsub.out_of_order")?;
        add(&mut self.foreign, o.foreign, "pubsub.foreign")?;
        let room = LISTED_SUBSCRIBERS.saturating_sub(self.subscribers.len());
        self.subscribers.extend(o.subscribers.iter().take(room).cloned());
        Ok(())
    }

    /// Adds one subscriber's books to the totals (and the list while it
    /// has room).
    pub fn add_subscriber(&mut self, s: SubscriberBooks) {
        self.expected = self.expected.saturating_add(s.expected);
        self.received = self.received.saturating_add(s.received);
        self.lost = self.lost.saturating_add(s.lost);
        self.duplicated = self.duplicated.saturating_add(s.duplicated);
        self.out_of_order = self.out_of_order.saturating_add(s.out_of_order);
        if self.subscribers.len() < LISTED_SUBSCRIBERS {
            self.subscribers.push(s);
        }
    }

    /// True when every subscriber's books balance: received and lost add
    /// up to what it should have received.
    pub fn balanced(&self) -> bool {
        self.received.checked_add(self.lost) == Some(self.expected)
            && self
                .subscribers
                .iter()
                .all(|s| s.received.checked_add(s.lost) == Some(s.expected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_add_up_and_merge() {
        let mut a = PubSub::default();
        a.add_subscriber(SubscriberBooks {
            subscriber: 1,
            expected: 10,
            received: 9,
            lost: 1,
            duplicated: 2,
            out_of_order: 0,
        });
        assert!(a.balanced());
        let mut b = a.clone();
        b.merge(&a).unwrap();
        assert_eq!((b.expected, b.received, b.lost, b.duplicated), (20, 18, 2, 4));
        assert_eq!(b.subscribers.len(), 2);
        b.lost = 0;
        assert!(!b.balanced());
    }
}
