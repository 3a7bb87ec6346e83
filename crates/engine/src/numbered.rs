//! The number of the storm connection a task opens: its start's, unique
//! over the run (the workers of every process interleave theirs), and kept
//! through the connection's reconnects, so that a protocol naming its
//! clients by it (MQTT's `{{conn}}` client identifier) reconnects as the
//! same client. A task-local: the storm sets it once per connection task,
//! a protocol's opening reads it; nothing between them carries it.

use std::future::Future;

tokio::task_local! {
    static NUMBER: u64;
}

/// Runs `f` as the storm connection numbered `n`.
pub(crate) fn scope<F: Future>(n: u64, f: F) -> impl Future<Output = F::Output> {
    NUMBER.scope(n, f)
}

/// The number of the storm connection this task opens, if it is one.
pub(crate) fn current() -> Option<u64> {
    NUMBER.try_with(|n| *n).ok()
}
