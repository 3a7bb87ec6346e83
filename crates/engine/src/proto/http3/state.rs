//! What one connection's request loops share, and what one exchange
//! hands back (a leaf: the stream, its redirects and the slots all use it).

use std::cell::Cell;
use std::time::Instant;

use throng_metrics::{ErrorClass, Reply};

/// State the request loops of one connection share.
#[derive(Default)]
pub(super) struct ConnState {
    /// A connection-level error ended it: no loop starts another request.
    pub(super) dead: Cell<bool>,
    /// Wakes the loops waiting for a start when it dies.
    pub(super) died: tokio::sync::Notify,
    pub(super) in_flight: Cell<u64>,
    pub(super) carried: Cell<u64>,
}

/// When the parts of one exchange happened, and what came back.
pub(super) struct Done {
    /// The request's first byte on the wire: the first send of the
    /// worker's socket after the stream was asked for (None: not known,
    /// the exchange's start counts).
    pub(super) began: Option<Instant>,
    /// The request's last byte: the first send after it was handed over.
    pub(super) sent: Instant,
    pub(super) first: Instant,
    pub(super) done: Instant,
    /// `done` came from the kernel's receive stamp.
    pub(super) kernel: bool,
    pub(super) reply: Reply,
    pub(super) server: Option<String>,
    /// A redirect's `Location`, when the run follows redirects.
    pub(super) location: Option<String>,
    /// An event stream's end before the server ended it, and why.
    pub(super) early: Option<&'static str>,
}

/// A failed exchange: its class, and whether the whole connection failed.
pub(super) type Broke = (ErrorClass, bool);

/// What an exchange got done, kept however it ends (a timeout drops it
/// midway): whether its stream opened, the request bytes written and the
/// response bytes read, as `sent` and `received` count them.
#[derive(Default)]
pub(super) struct Progress {
    pub(super) opened: Cell<bool>,
    pub(super) written: Cell<u64>,
    pub(super) read: Cell<u64>,
}

impl Progress {
    pub(super) fn begin(&self) {
        self.opened.set(false);
        self.written.set(0);
        self.read.set(0);
    }
}

/// What an exchange keeps of the response besides its status and sizes,
/// and the request's size as counted in `sent`.
#[derive(Clone, Copy)]
pub(super) struct Want {
    pub(super) server: bool,
    pub(super) location: bool,
    pub(super) request_len: u64,
}
