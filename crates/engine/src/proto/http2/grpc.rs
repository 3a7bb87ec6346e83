//! A stream as a gRPC call: its status, its deadline, its messages; and
//! one call outside a run (crate::proto::grpc::call).

use std::cell::Cell;
use std::pin::Pin;
use std::time::Instant;

use bytes::Bytes;
use throng_metrics::{ErrorClass, Phase};
use throng_plan::StatusSet;
use tokio::time::Sleep;

use super::Slot;
use super::driver::{H2Conn, handshake};
use super::stream::{encode_head, send_on};
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::proto::session::Session;
use crate::transport::Transport;

/// A streaming call's messages: those received and sent counted whatever
/// the outcome, the replies timed (`first_message`, `last_message` from
/// the first request byte, and with `gaps` every `message_gap` between
/// them) when the call ended with its trailers; a client-streaming call's
/// one reply (not `streamed`) is timed by the call's phases alone.
pub(super) fn record_messages(
    ctx: &Ctx,
    slot: &Slot,
    outcome: &Result<Timing, Failed>,
    t_send: Instant,
    streamed: bool,
    gaps: bool,
) {
    let mut rec = ctx.rec.borrow_mut();
    rec.messages(slot.messages);
    rec.messages_sent(slot.sent_messages);
    if !streamed {
        return;
    }
    if let (Ok(t), Some(first), Some(last)) = (outcome, slot.first_message, slot.last_message) {
        rec.phase(t.done, Phase::FirstMessage, first.saturating_duration_since(t_send));
        rec.phase(t.done, Phase::LastMessage, last.saturating_duration_since(t_send));
        if gaps {
            for &us in &slot.gaps {
                rec.phase(
                    t.done,
                    Phase::MessageGap,
                    std::time::Duration::from_micros(u64::from(us)),
                );
            }
        }
    }
}

/// gRPC's view of a call's end: a wait cut by `--deadline`, or a
/// DEADLINE_EXCEEDED status the run does not expect, is
/// `grpc.deadline_exceeded` (the server and the client race to end the
/// call at the deadline; either way it is one class).
pub(super) fn grpc_outcome(
    outcome: &mut Result<Timing, Failed>,
    session: &Session,
    deadline: bool,
    expect: &StatusSet,
    request_len: usize,
) {
    let (expired, written) = match outcome {
        Err(f) => (deadline && f.class == ErrorClass::TimeoutResponse, f.written),
        Ok(_) => (
            matches!(session, Session::Http2(slot) if slot.status == GRPC_DEADLINE_EXCEEDED)
                && !expect.contains(GRPC_DEADLINE_EXCEEDED),
            request_len,
        ),
    };
    if expired {
        *outcome = Err(Failed {
            class: ErrorClass::Grpc("deadline_exceeded"),
            written,
        });
    }
}

pub(super) const GRPC_DEADLINE_EXCEEDED: u16 = 4;

/// One request outside the workers (crate::proto::grpc::call) on a
/// connection of its own over `stream`: the preface, `request` with
/// `body`, the response into `slot` (`grpc`: its status is the call's
/// `grpc-status`), all within the deadline `sleep` was armed with; then
/// the connection closes.
pub(crate) async fn call_once(
    stream: Transport,
    request: &http::Request<()>,
    body: &Bytes,
    grpc: bool,
    slot: &mut Slot,
    mut sleep: Pin<&mut Sleep>,
) -> Result<(), ErrorClass> {
    let (shared, driver) = handshake(1, stream, sleep.as_mut()).await?;
    let c = H2Conn {
        shared,
        opened: Instant::now(),
        id: 0,
        limit: 1,
        in_flight: Cell::new(0),
        carried: Cell::new(0),
        driver,
    };
    let block = encode_head(request.method(), request.uri(), request.headers());
    slot.for_method(request.method());
    // Any number of messages: a reflection call answers each of its asks.
    let outcome = send_on(&c, &block, body, grpc, true, 0, slot, sleep).await;
    c.driver.abort();
    outcome.map(|_| ()).map_err(|f| f.class)
}
