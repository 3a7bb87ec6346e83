//! Where a protocol's own request loops get their requests: the closed
//! loop's budget or the open loop's schedule, whichever protocol drives
//! the connections (HTTP/3's connection slots today).

use std::time::Instant;

/// Where a connection's request loops get their next request: the closed
/// loop's budget, or the open loop's schedule.
pub(crate) trait Starts {
    /// A new identity for one request loop (its idle slot in an open loop).
    fn slot(&self) -> usize {
        0
    }
    /// The next request to make, with its intended start when it has one
    /// (open loop: latency counts from there); None: no more for this loop.
    async fn next(&self, slot: usize) -> Option<Option<Instant>>;
    /// The request loop `slot` stopped waiting in [`Starts::next`] (its
    /// connection died meanwhile): forget it as idle.
    fn cancel(&self, _slot: usize) {}
    /// A connection slot's task ends.
    fn done(&self) {}
}
