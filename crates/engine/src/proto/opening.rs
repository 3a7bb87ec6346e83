//! A protocol's opening on a new connection, for every load shape that
//! opens one through `crate::conn`: a line protocol's or NATS's handshake,
//! WebSocket's upgrade and steps (storms today). A leaf below `conn`: it
//! takes the stream, not the connection.

use std::pin::Pin;
use std::time::Instant;

use throng_metrics::{ErrorClass, Phase};
use tokio::time::Sleep;

use super::line;
use super::wire::Wire;
use crate::ctx::Ctx;
use crate::rows::Row;
use crate::transport::Transport;

/// The protocol's opening on a connection whose transport is up at
/// `ready` (a line protocol's or NATS's handshake, WebSocket's upgrade and
/// steps, each within the plan's timeout), recorded (its TLS upgrade, the
/// handshake phase, the exchanges' responses, lines out of turn; in `row`
/// too). The stream as it now is and when it was ready; the stream
/// unchanged when the protocol has no opening. Err: the connection's
/// failure class (not yet counted). `id` is the connection's number in
/// this worker (`Ctx::next_conn`).
pub(crate) async fn opening(
    ctx: &Ctx,
    stream: Transport,
    ready: Instant,
    id: u64,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<(Transport, Instant), ErrorClass> {
    let spec = &ctx.spec;
    let Wire::Line {
        spec: protocol,
        upgrade_tls,
    } = &spec.wire
    else {
        return Ok((stream, ready));
    };
    sleep.as_mut().reset((ready + spec.timeout).into());
    let seen = std::cell::Cell::new(line::OutOfTurn::default());
    // Boxed: only line protocols and NATS pay for its state.
    let done = Box::pin(line::handshake(
        protocol,
        stream,
        upgrade_tls.as_ref(),
        &ctx.scratch,
        spec.timeout,
        sleep,
        &seen,
        run_wide(ctx, id),
    ))
    .await;
    for kind in seen.get().kinds() {
        ctx.rec.borrow_mut().out_of_turn(kind);
    }
    let done = done?;
    let now = Instant::now();
    let mut rec = ctx.rec.borrow_mut();
    if let Some((d, h, at)) = done.tls {
        rec.tls_handshake(at, d, h);
        if let Some(r) = row.as_deref_mut() {
            r.phase(Phase::Tls, d);
        }
    }
    if let Some(d) = done.upgrade {
        rec.phase(now, Phase::Upgrade, d);
    }
    rec.phase(now, Phase::Handshake, done.handshake);
    if let Some(d) = done.subscribe {
        rec.phase(now, Phase::Subscribe, d);
    }
    for d in &done.exchanges {
        rec.phase(now, Phase::Response, *d);
    }
    if let Some(r) = row {
        r.phase(Phase::Handshake, done.handshake);
    }
    Ok((done.stream, now))
}

/// The connection's number over the run: its storm connection's (kept
/// through reconnects), else the worker's count made unique over the run
/// (the storm's workers, of every process, interleave theirs).
fn run_wide(ctx: &Ctx, id: u64) -> u64 {
    if let Some(n) = crate::numbered::current() {
        return n;
    }
    match &ctx.spec.load {
        crate::load::WorkerLoad::Storm(s) => id.saturating_mul(s.workers.max(1)).saturating_add(s.worker),
        _ => id,
    }
}
