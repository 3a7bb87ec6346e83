//! A VU task: iteration after iteration while its slot is wanted, each
//! step of the flow in turn; its connections closed at its end.

use std::collections::HashMap;
use std::future::poll_fn;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use throng_metrics::Phase;
use throng_plan::Rng;
use throng_scenario::{AddValue, CookieJar, Cookies, Cursor, Executor, Think};

use super::ops::{Op, Scen, Vu, sleep_until, with_scen};
use super::{grpc, js, logic, mqtt, render, request, script, ws};
use crate::conn::close;
use crate::ctx::{Ctx, TaskGuard};
use crate::proto::session::Session;
use crate::proto::vu::Conns;

/// A VU: runs iterations while its slot is wanted.
pub(super) async fn vu(guard: TaskGuard, sc: Rc<Scen>, slot: usize) {
    let ctx = &guard.0;
    let id = sc.vu_id(slot);
    let mut vu = Vu {
        id,
        iter: 0,
        trace: None,
        rng: Rng::new(sc.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (sc.index as u64) << 56),
        vars: HashMap::new(),
        jar: CookieJar::new(),
        conn: None,
        conns: Conns::default(),
        session: Session::new(false),
        ws: None,
        mqtt: None,
        answered: false,
        status: 0,
        loops: Vec::new(),
        fault: None,
        js: None,
        steps: None,
    };
    let open = sc.def.executor.is_open();
    loop {
        tokio::task::coop::consume_budget().await;
        if ctx.stopping.get() || sc.killed(slot) {
            break;
        }
        let intended = if open {
            // Idle until then: a session the VU kept is kept alive.
            match mqtt::keeping_alive(ctx, &mut vu, async |_| next_job(&sc, ctx, slot).await).await {
                Some(due) => {
                    let now = Instant::now();
                    ctx.rec
                        .borrow_mut()
                        .phase(now, Phase::ScheduleLag, now.saturating_duration_since(due));
                    Some(due)
                }
                None => break,
            }
        } else {
            if (slot as u64) >= sc.target.get() || Instant::now() >= sc.end {
                break;
            }
            let more = match &sc.def.executor {
                Executor::PerVuIterations { iterations, .. } => vu.iter < *iterations,
                Executor::SharedIterations { iterations, .. } => {
                    let mine = sc.def.executor.segment_iterations(&sc.segment).unwrap_or(*iterations);
                    sc.shared.taken[sc.index].fetch_add(1, Ordering::Relaxed) < mine
                }
                _ => true,
            };
            if !more {
                if let Some(s) = sc.slots.borrow_mut().get_mut(slot) {
                    s.finished = true;
                }
                break;
            }
            None
        };
        let completed = {
            let run = pin!(iteration(ctx, &sc, &mut vu, intended));
            let cut = pin!(cut_off(&sc, slot));
            tokio::select! {
                biased;
                done = run => done,
                () = cut => false,
            }
        };
        if sc.killed(slot) {
            // The iteration was abandoned mid-request: its connection may
            // hold half a response.
            close(ctx, vu.conn.take());
            vu.conns.close_all(ctx);
            ws::drop_kept(ctx, vu.ws.take());
            mqtt::drop_kept(ctx, vu.mqtt.take());
            break;
        }
        if completed {
            vu.iter += 1;
        }
    }
    close(ctx, vu.conn.take());
    vu.conns.close_all(ctx);
    if ctx.stopping.get() {
        ws::drop_kept(ctx, vu.ws.take());
        mqtt::drop_kept(ctx, vu.mqtt.take());
    } else {
        ws::close_kept(ctx, vu.ws.take()).await;
        mqtt::close_kept(ctx, vu.mqtt.take()).await;
    }
    if let Some(s) = sc.slots.borrow_mut().get_mut(slot) {
        s.alive = false;
        s.waker = None;
    }
    sc.active.set(sc.active.get() - 1);
    with_scen(ctx, |r| r.vus(Instant::now(), sc.index, sc.active.get()));
}

/// Resolves when the VU's slot is cut off.
async fn cut_off(sc: &Scen, slot: usize) {
    loop {
        let mut notified = pin!(sc.kill.notified());
        notified.as_mut().enable();
        if sc.killed(slot) {
            return;
        }
        notified.await;
    }
}

/// Open models: waits idle for the next intended start; None when the
/// schedule is over.
async fn next_job(sc: &Scen, ctx: &Ctx, slot: usize) -> Option<Instant> {
    if let Some(s) = sc.slots.borrow_mut().get_mut(slot) {
        if let Some(due) = s.job.take() {
            return Some(due);
        }
        // In line once: a pre-allocated VU was put there before it ran.
        if !std::mem::replace(&mut s.queued, true) {
            sc.idle.borrow_mut().push(slot);
        }
    }
    poll_fn(|cx| {
        let mut slots = sc.slots.borrow_mut();
        let Some(s) = slots.get_mut(slot) else {
            return Poll::Ready(None);
        };
        if let Some(due) = s.job.take() {
            return Poll::Ready(Some(due));
        }
        if sc.schedule_done.get() || ctx.stopping.get() || s.killed {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// One iteration of the flow; true when it ran to its end.
async fn iteration(ctx: &Ctx, sc: &Scen, vu: &mut Vu, intended: Option<Instant>) -> bool {
    if sc.script.is_some() {
        // Boxed: flow VUs keep their smaller future.
        return Box::pin(script::iteration(ctx, sc, vu, intended)).await;
    }
    let started = intended.unwrap_or_else(Instant::now);
    vu.vars.clear();
    vu.trace = ctx.spec.trace.as_ref().map(crate::trace::Tracer::trace_id);
    if sc.def.cookies == Cookies::PerIteration {
        vu.jar.clear();
    }
    if let Some(data) = &sc.plan.data
        && data.row_count > 0
    {
        let n = match data.cursor {
            Cursor::PerVu => (vu.id - 1).wrapping_add(vu.iter),
            Cursor::Shared => sc.shared.cursor.fetch_add(1, Ordering::Relaxed),
        };
        // Invariant: row_count > 0, and the remainder is below it.
        let row = &data.rows[(n % data.row_count as u64) as usize];
        for (c, v) in data.columns.iter().zip(row) {
            vu.vars.insert(c.clone(), v.clone());
        }
    }
    let mut groups: Vec<Instant> = Vec::new();
    let mut origin = intended;
    vu.loops.clear();
    let mut pc = 0;
    while let Some(op) = sc.ops.get(pc) {
        if ctx.stopping.get() {
            return false;
        }
        pc += 1;
        match op {
            // A session a VU kept from an `mqtt:` step is kept alive
            // through the steps that are not its own.
            Op::Request(r) if vu.mqtt.is_none() => request::request(ctx, sc, vu, r, origin.take()).await,
            // Boxed: HTTP/1.1 VUs keep their smaller future.
            Op::Request(r) => {
                let origin = origin.take();
                Box::pin(mqtt::keeping_alive(ctx, vu, async |vu| {
                    request::request(ctx, sc, vu, r, origin).await;
                }))
                .await;
            }
            Op::Grpc(g) => {
                let origin = origin.take();
                Box::pin(mqtt::keeping_alive(ctx, vu, async |vu| {
                    grpc::call(ctx, sc, vu, g, origin).await
                }))
                .await;
            }
            Op::WebSocket(w) => {
                let origin = origin.take();
                Box::pin(mqtt::keeping_alive(ctx, vu, async |vu| {
                    ws::step(ctx, sc, vu, w, origin).await
                }))
                .await;
            }
            Op::Mqtt(m) => Box::pin(mqtt::step(ctx, sc, vu, m, origin.take())).await,
            Op::Think(t) => {
                let d = match *t {
                    Think::Fixed(d) => d,
                    Think::Range(a, b) => a + (b - a).mul_f64(vu.rng.next_f64()),
                };
                let at = Instant::now() + d;
                if !mqtt::keeping_alive(ctx, vu, async |_| sleep_until(ctx, at).await).await {
                    return false;
                }
            }
            Op::Add(a) => {
                let value = match &a.value {
                    AddValue::Number(v) => Ok(Some(*v)),
                    AddValue::Template(t) => render::text(sc, vu, t).map(|text| AddValue::read(&text)),
                };
                match value {
                    Ok(value) => {
                        with_scen(ctx, |r| a.metric.iter().for_each(|&i| r.custom(i, value)));
                    }
                    Err(message) => vu.fault = Some(message),
                }
            }
            Op::Js(j) => {
                if let Err((class, message)) = js::run(ctx, sc, vu, j) {
                    with_scen(ctx, |r| r.iteration_failed(Instant::now(), class, &message));
                    return true;
                }
            }
            Op::GroupStart => groups.push(Instant::now()),
            Op::GroupEnd(g) => {
                if let Some(t0) = groups.pop() {
                    with_scen(ctx, |r| r.group(*g, t0.elapsed()));
                }
            }
            control => match logic::next(ctx, sc, vu, control) {
                Ok(None) => {}
                Ok(Some(to)) => {
                    if to < pc {
                        // A loop's next pass: let the worker's other tasks run.
                        tokio::task::coop::consume_budget().await;
                    }
                    pc = to;
                }
                Err(message) => vu.fault = Some(message),
            },
        }
        if let Some(message) = vu.fault.take() {
            with_scen(ctx, |r| r.iteration_failed(Instant::now(), "expression", &message));
            return true;
        }
    }
    let now = Instant::now();
    with_scen(ctx, |r| r.iteration(now, now.saturating_duration_since(started)));
    if let Some(keep) = &sc.keep {
        // A poisoned lock only means another VU panicked mid-copy: its
        // map is still a map.
        let mut kept = keep.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.clone_from(&vu.vars);
    }
    true
}
