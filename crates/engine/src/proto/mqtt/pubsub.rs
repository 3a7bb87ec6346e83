//! `throng mqtt`: publishers and subscribers on one broker, on one
//! thread (tokio's current-thread runtime and a LocalSet; every client a
//! task sharing one [`Recorder`]).
//!
//! ```text
//!  subscribers: connect ─► CONNECT/CONNACK ─► SUBSCRIBE/SUBACK (each topic)
//!  publishers:  connect ─► CONNECT/CONNACK            (once all subscribed)
//!  publish (publisher.rs) ──► broker ──► deliveries (subscriber.rs: books)
//!  publishers done ─► expected per subscriber ─► drain (until all came,
//!  or --drain) ─► DISCONNECT ─► books: received, lost, duplicated, late
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_metrics::{PubSub, Recorder};

use super::client::{Client, Run, open};
use super::subscriber::Books;
use crate::worker::state::RunState;

/// How often the progress display hears from the run.
const TICK: Duration = Duration::from_millis(100);

/// How often the drain looks whether every subscriber has all it should.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// Opens `count` clients at once (`role` names them), each subscribed to
/// `topics(n)`; the ones that opened, by number from 1.
async fn open_all(run: &Rc<Run>, role: char, count: u64, topics: impl Fn(u64) -> Vec<String>) -> Vec<(u64, Client)> {
    let tasks: Vec<_> = (1..=count)
        .map(|n| {
            let run = Rc::clone(run);
            let topics = topics(n);
            tokio::task::spawn_local(async move {
                let id = run.client_id(role, n);
                open(&run, &id, &topics).await.map(|c| (n, c))
            })
        })
        .collect();
    let mut open = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Ok(Some(c)) = t.await {
            open.push(c);
        }
    }
    open
}

/// Runs the plan; the books, and notes for the result.
pub(crate) async fn drive(run: Rc<Run>, on_tick: &mut dyn FnMut(Duration, &Recorder)) -> (PubSub, Vec<String>) {
    let plan = Arc::clone(&run.plan);
    let mut notes = Vec::new();
    let subs = open_all(&run, 's', plan.subscribers, |s| plan.subscriptions_of(s)).await;
    let books: Vec<Rc<RefCell<Books>>> = subs
        .iter()
        .map(|(s, _)| Rc::new(RefCell::new(Books::new(*s, plan.sources_of(*s)))))
        .collect();
    // With subscribers planned and none connected, publishing would prove nothing;
    // with none planned (publish-only load), the publishers run alone.
    let pubs = if subs.is_empty() && plan.subscribers > 0 {
        notes.push("no subscriber connected: nothing was published".to_string());
        Vec::new()
    } else {
        open_all(&run, 'p', plan.publishers, |_| Vec::new()).await
    };
    if (subs.len() as u64) < plan.subscribers {
        notes.push(format!(
            "{} of {} subscribers connected; the books count those",
            subs.len(),
            plan.subscribers
        ));
    }
    if (!subs.is_empty() || plan.subscribers == 0) && (pubs.len() as u64) < plan.publishers {
        notes.push(format!(
            "{} of {} publishers connected; subscribers expected what those published",
            pubs.len(),
            plan.publishers
        ));
    }
    let lowest = pubs.iter().filter_map(|(_, c)| c.receive_max).min();
    if let Some(r) = lowest.filter(|&r| plan.qos > 0 && u64::from(r) < plan.window) {
        notes.push(format!(
            "the broker takes at most {r} unacknowledged messages a client (its Receive Maximum): publishers kept {r} in flight, not --window {}",
            plan.window
        ));
    }
    let listening: Vec<_> = subs
        .into_iter()
        .zip(&books)
        .map(|((_, c), b)| tokio::task::spawn_local(super::subscriber::listen(Rc::clone(&run), c, Rc::clone(b))))
        .collect();
    let start = Instant::now();
    let publishing: Vec<_> = pubs
        .into_iter()
        .map(|(p, c)| tokio::task::spawn_local(super::publisher::publish(Rc::clone(&run), p, c, start)))
        .collect();
    // Per publisher: the messages it published that the broker took.
    let mut published = vec![0u64; usize::try_from(plan.publishers).unwrap_or(0)];
    let (mut written, mut refused, mut unacknowledged) = (0u64, 0u64, 0u64);
    let mut tick = tokio::time::interval(TICK);
    for mut t in publishing {
        loop {
            tokio::select! {
                r = &mut t => {
                    if let Ok(done) = r {
                        written += done.written;
                        refused += done.refused;
                        unacknowledged += done.unacknowledged;
                        let at = usize::try_from(done.publisher).ok().and_then(|p| p.checked_sub(1));
                        if let Some(slot) = at.and_then(|i| published.get_mut(i)) {
                            *slot = done.written.saturating_sub(done.refused);
                        }
                    }
                    break;
                }
                _ = tick.tick() => on_tick(run.origin.elapsed(), &run.rec.borrow()),
            }
        }
    }
    for b in &books {
        b.borrow_mut().expect(&published);
    }
    // The drain: until every subscriber has all it should, or --drain.
    let deadline = tokio::time::Instant::now() + plan.drain;
    let mut control = run.control.clone();
    while !books.iter().all(|b| b.borrow().complete()) && *control.borrow_and_update() != RunState::Aborting {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => break,
            _ = tick.tick() => on_tick(run.origin.elapsed(), &run.rec.borrow()),
            _ = tokio::time::sleep(DRAIN_POLL) => {}
        }
    }
    run.done.send_replace(true);
    for t in listening {
        let abort = t.abort_handle();
        if tokio::time::timeout(super::DISCONNECT_LIMIT * 2, t).await.is_err() {
            abort.abort();
        }
    }
    let mut total = PubSub {
        published: written,
        refused,
        acknowledged: run.acknowledged.get(),
        unacknowledged,
        ..PubSub::default()
    };
    for b in &books {
        let b = b.borrow();
        total.foreign = total.foreign.saturating_add(b.foreign);
        total.add_subscriber(b.finish());
    }
    (total, notes)
}
