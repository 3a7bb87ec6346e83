//! A request of the flow under way and how it ends: answered (captures,
//! checks), unanswered, or never sent; one dropped midway is counted
//! `interrupted`, so nothing leaves the books.

use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, SlowEnd};
use throng_scenario::ResponseView;

use super::ops::{ReqOp, Scen, Vu, with_scen};
use super::render::VuReads;
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::proto::session::Session;
use crate::rows::{Labels, Row, RowGuard};

/// A request under way: if it is dropped before it ends (cut off, run
/// aborted), the destructor counts it `interrupted` in both recorders.
pub(super) struct InFlight<'a> {
    ctx: &'a Ctx,
    tags: &'a [usize],
    stage: Option<usize>,
    armed: bool,
    /// `--trace-context`: the trace id it carries and its latency's origin.
    trace: Option<([u8; 16], Instant)>,
}

impl<'a> InFlight<'a> {
    pub(super) fn new(ctx: &'a Ctx, tags: &'a [usize], stage: Option<usize>) -> Self {
        ctx.rec.borrow_mut().request_started();
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        InFlight {
            ctx,
            tags,
            stage,
            armed: true,
            trace: None,
        }
    }

    /// It carries the iteration's trace id `id` (None: no trace context),
    /// its latency measured from `origin`; its row shows the id.
    pub(super) fn traced(&mut self, id: Option<[u8; 16]>, origin: Instant, row: Option<&mut Row<'_>>) {
        if let (Some(id), Some(_)) = (id, &self.ctx.spec.trace) {
            self.trace = Some((id, origin));
            if let Some(r) = row {
                r.trace(id);
            }
        }
    }

    /// A traced request ended at `end`, `how`: offered to the slowest.
    pub(super) fn slow(&self, end: Instant, how: SlowEnd) {
        if let (Some((id, origin)), Some(t)) = (self.trace, &self.ctx.spec.trace) {
            t.offer(&mut self.ctx.rec.borrow_mut(), origin, end, how, id);
        }
    }

    /// A traced request's exchange ended with `outcome` (the status in
    /// `session`): offered to the slowest.
    pub(super) fn settled(&self, outcome: &Result<Timing, Failed>, session: &Session) {
        if self.trace.is_some() {
            match outcome {
                Ok(t) => self.slow(t.done, SlowEnd::Status(session.reply().status)),
                Err(f) => self.slow(Instant::now(), SlowEnd::Error(f.class)),
            }
        }
    }

    /// The request ended: `response` is (response time, expected status).
    pub(super) fn end(mut self, now: Instant, response: Option<(Duration, bool)>, failed: bool) {
        self.armed = false;
        self.ctx.in_flight.set(self.ctx.in_flight.get() - 1);
        self.tagged(now, response, failed);
    }

    pub(super) fn cut_off(&self) {
        with_scen(self.ctx, |r| {
            r.interrupted(self.tags);
            if let Some(s) = self.stage {
                r.interrupted(&[s]);
            }
        });
    }

    pub(super) fn tagged(&self, now: Instant, response: Option<(Duration, bool)>, failed: bool) {
        with_scen(self.ctx, |r| {
            r.request(now, self.tags, response, failed);
            if let Some(s) = self.stage {
                r.request(now, &[s], response, failed);
            }
        });
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.armed {
            let now = Instant::now();
            self.ctx.in_flight.set(self.ctx.in_flight.get() - 1);
            self.ctx
                .rec
                .borrow_mut()
                .request_failed(now, ErrorClass::Interrupted, 0);
            self.cut_off();
        }
    }
}

/// A request answered (`expected`: its status was): the scenario's figures,
/// then its captures and checks on the response `session` holds.
#[allow(clippy::too_many_arguments)]
pub(super) fn answered(
    ctx: &Ctx,
    op: &ReqOp,
    vu: VuReads<'_>,
    session: &Session,
    flight: InFlight<'_>,
    done: Instant,
    response: Duration,
    expected: bool,
) {
    flight.end(done, Some((response, expected)), !expected);
    if session.body_truncated() {
        with_scen(ctx, |r| r.body_truncated());
    }
    let view = ResponseView {
        status: session.reply().status,
        headers: session.headers(),
        body: session.body(),
        duration: response,
    };
    captures_and_checks(ctx, op, vu, &view);
}

/// A step's captures into the VU's variables, then its checks (which read
/// them) on the response.
pub(super) fn captures_and_checks(ctx: &Ctx, op: &ReqOp, vu: VuReads<'_>, view: &ResponseView<'_>) {
    for cap in &op.req.captures {
        if let Some(v) = cap.extract(view) {
            vu.vars.insert(cap.var.clone(), v);
        }
    }
    if !op.checks.is_empty() {
        let mut cx = vu.into_context();
        with_scen(ctx, |r| {
            for (check, &i) in op.req.checks.iter().zip(&op.checks) {
                r.check(i, check.passes(view, &mut cx));
            }
        });
    }
}

/// A request that got no response: its checks fail.
pub(super) fn unanswered(ctx: &Ctx, op: &ReqOp, flight: InFlight<'_>) {
    flight.end(Instant::now(), None, true);
    if !op.checks.is_empty() {
        with_scen(ctx, |r| op.checks.iter().for_each(|&i| r.check(i, false)));
    }
}

/// Fails a request before it was sent (no connection, or it cannot be
/// framed): counted with `class` in both recorders and its row.
pub(super) fn not_sent(ctx: &Ctx, op: &ReqOp, flight: InFlight<'_>, mut row: RowGuard<'_>, class: ErrorClass) {
    let now = Instant::now();
    ctx.rec.borrow_mut().request_failed(now, class, 0);
    if let Some(r) = row.row() {
        r.failed(class);
    }
    drop(row);
    flight.slow(now, SlowEnd::Error(class));
    unanswered(ctx, op, flight);
}

/// A unit of a step starting now: its request counted in flight (under
/// the stage it starts in) and its row, labelled with the scenario, the
/// step `name`, the VU and its iteration (written when it drops).
pub(super) fn begin<'a>(
    ctx: &'a Ctx,
    sc: &'a Scen,
    vu: &Vu,
    tags: &'a [usize],
    name: &'a str,
) -> (Instant, InFlight<'a>, RowGuard<'a>) {
    let started = Instant::now();
    let flight = InFlight::new(ctx, tags, sc.stage_tag(started));
    let row = ctx.labelled_row(
        started,
        Labels {
            scenario: &sc.def.name,
            step: name,
            vu: vu.id,
            iteration: vu.iter,
        },
    );
    (started, flight, row)
}

/// One unit of a message step under way (a `websocket:` or `mqtt:` step's
/// expect, or the whole step when it expects nothing): its guard
/// (interrupted if dropped) and its row.
pub(super) struct Unit<'a> {
    pub(super) flight: InFlight<'a>,
    pub(super) row: RowGuard<'a>,
}

impl<'a> Unit<'a> {
    /// Opens one unit (a request) of the step `name` tagged `tags`.
    pub(super) fn begin(ctx: &'a Ctx, sc: &'a Scen, vu: &Vu, tags: &'a [usize], name: &'a str) -> Unit<'a> {
        let (_, flight, row) = begin(ctx, sc, vu, tags, name);
        Unit { flight, row }
    }

    /// Ends it ok with `received` bytes read; `rtt`: the awaited message's
    /// round trip (its `response`), None for a step that awaited none.
    pub(super) fn ok(mut self, ctx: &Ctx, received: u64, rtt: Option<Duration>) {
        let now = Instant::now();
        let mut rec = ctx.rec.borrow_mut();
        if let Some(rtt) = rtt {
            rec.phase(now, throng_metrics::Phase::Response, rtt);
        }
        rec.exchanged(now, received);
        drop(rec);
        if let Some(r) = self.row.row() {
            if let Some(rtt) = rtt {
                r.phase(throng_metrics::Phase::Response, rtt);
            }
            r.ok();
        }
        drop(self.row);
        self.flight.end(now, rtt.map(|d| (d, true)), false);
    }
}

/// The unit under way (if any) ends in `class`, `wire_bytes` read for it.
pub(super) fn fail_unit(ctx: &Ctx, unit: Option<Unit<'_>>, class: ErrorClass, wire_bytes: u64) {
    let Some(mut u) = unit else {
        return;
    };
    let now = Instant::now();
    ctx.rec.borrow_mut().request_failed(now, class, wire_bytes);
    if let Some(r) = u.row.row() {
        r.failed(class);
    }
    drop(u.row);
    u.flight.end(now, None, true);
}

/// An awaited message arrived (`body`, counted `status` for checks): its
/// captures go into the VU's variables and the unit under way ends ok,
/// timed from `last_send`, with the bytes `received` since.
#[allow(clippy::too_many_arguments)]
pub(super) fn message_answered(
    ctx: &Ctx,
    vu: &mut Vu,
    captures: &[throng_scenario::Capture],
    (status, body): (u16, &[u8]),
    last_send: Instant,
    received: &mut u64,
    unit: &mut Option<Unit<'_>>,
) {
    let rtt = Instant::now().saturating_duration_since(last_send);
    let view = ResponseView {
        status,
        headers: &[],
        body,
        duration: rtt,
    };
    for cap in captures {
        if let Some(v) = cap.extract(&view) {
            vu.vars.insert(cap.var.clone(), v);
        }
    }
    let bytes = std::mem::take(received);
    match unit.take() {
        Some(u) => u.ok(ctx, bytes, Some(rtt)),
        None => {
            let now = Instant::now();
            ctx.rec.borrow_mut().phase(now, throng_metrics::Phase::Response, rtt);
            ctx.rec.borrow_mut().exchanged(now, bytes);
        }
    }
}
