//! Recording one exchange's outcome (phases, bytes, ok, rejected or the
//! error) in the worker's recorder and its row: the one place every loop and
//! protocol records a request, below the exchanges and redirects that call it.

use std::time::Instant;

use throng_metrics::{ErrorClass, Phase};
use throng_plan::StatusSet;

use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::proto::session::Session;
use crate::rows::Row;

/// Records one exchange's outcome in the worker's recorder and in `row`:
/// the bytes sent, the five request phases (send, wait, receive, response,
/// latency from `origin`), and ok, rejected (status not in `expect`) or the
/// error. With `first_reply`, the response is kept as the run's first.
/// Some(whether the status was expected) when a response arrived.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_exchange(
    ctx: &Ctx,
    session: &mut Session,
    outcome: &Result<Timing, Failed>,
    request_len: usize,
    t_send: Instant,
    origin: Instant,
    expect: &StatusSet,
    first_reply: bool,
    row: Option<&mut Row<'_>>,
) -> Option<bool> {
    let mut rec = ctx.rec.borrow_mut();
    match *outcome {
        Ok(Timing {
            sent,
            first,
            done,
            kernel,
            ..
        }) => {
            ctx.count_stamp(kernel);
            rec.sent(sent, request_len as u64);
            rec.phase(done, Phase::Send, sent - t_send);
            rec.phase(done, Phase::Wait, first.saturating_duration_since(sent));
            rec.phase(done, Phase::Receive, done - first);
            rec.phase(done, Phase::Response, done - t_send);
            rec.phase(done, Phase::Latency, done.saturating_duration_since(origin));
            let reply = session.reply();
            let wire_bytes = session.wire_bytes();
            if first_reply {
                rec.first_reply(reply, session.take_server());
            }
            let ok = expect.contains(reply.status);
            if ok {
                rec.request_ok(done, reply, wire_bytes);
            } else {
                rec.request_rejected(done, reply, wire_bytes);
            }
            if let Some(r) = row {
                r.phase(Phase::Send, sent - t_send);
                r.phase(Phase::Wait, first.saturating_duration_since(sent));
                r.phase(Phase::Receive, done - first);
                r.phase(Phase::Response, done - t_send);
                r.phase(Phase::Latency, done.saturating_duration_since(origin));
                r.reply(reply.status, request_len as u64, wire_bytes);
                if ok {
                    r.ok();
                } else {
                    r.failed(ErrorClass::CheckFailed);
                }
            }
            Some(ok)
        }
        Err(f) => {
            let now = Instant::now();
            let wire_bytes = session.wire_bytes();
            rec.sent(now, f.written as u64);
            rec.request_failed(now, f.class, wire_bytes);
            if let Some(r) = row {
                r.reply(0, f.written as u64, wire_bytes);
                r.failed(f.class);
            }
            None
        }
    }
}
