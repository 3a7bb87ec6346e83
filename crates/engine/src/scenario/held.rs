//! What a step holds that owns a connection (a WebSocket's, an MQTT
//! session's): the connection's end is recorded however the step ends — a
//! VU cut off mid-step drops the guard, and the drop closes it.

use crate::conn::{Conn, close};
use crate::ctx::Ctx;

/// A value that owns one connection.
pub(super) trait OwnsConn {
    /// The connection, the rest of the value dropped.
    fn into_conn(self) -> Conn;
}

impl OwnsConn for Conn {
    fn into_conn(self) -> Conn {
        self
    }
}

/// `T` in a step's hands; closed (and counted) on drop unless taken back.
pub(super) struct Held<'a, T: OwnsConn> {
    ctx: &'a Ctx,
    /// Some until [`Held::take`] (which consumes the guard).
    v: Option<T>,
}

impl<'a, T: OwnsConn> Held<'a, T> {
    pub(super) fn new(ctx: &'a Ctx, v: T) -> Held<'a, T> {
        Held { ctx, v: Some(v) }
    }

    pub(super) fn get(&mut self) -> &mut T {
        // Invariant: `v` is Some until take consumes the guard.
        #[allow(clippy::unwrap_used)]
        self.v.as_mut().unwrap()
    }

    /// The value back, to keep for the VU's next step.
    pub(super) fn take(mut self) -> Option<T> {
        self.v.take()
    }
}

impl<T: OwnsConn> Drop for Held<'_, T> {
    fn drop(&mut self) {
        if let Some(v) = self.v.take() {
            close(self.ctx, Some(v.into_conn()));
        }
    }
}
