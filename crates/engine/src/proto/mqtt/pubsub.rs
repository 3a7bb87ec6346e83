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

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase, PubSub, Recorder};
use throng_plan::MqttPlan;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::codec::{self, Packet, Version};
use super::subscriber::Books;
use super::{connack_refused, read_packet, send, suback_refused};
use crate::Control;
use crate::errors::{Stage, classify};
use crate::transport::Transport;
use crate::worker::state::RunState;

/// How often the progress display hears from the run.
const TICK: Duration = Duration::from_millis(100);

/// How often the drain looks whether every subscriber has all it should.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// What every client of a run shares.
pub(crate) struct Run {
    pub plan: Arc<MqttPlan>,
    pub addr: SocketAddr,
    pub origin: Instant,
    /// This run's id in every payload (another run's messages are foreign).
    pub id: u32,
    pub version: Version,
    pub rec: RefCell<Recorder>,
    /// QoS 1 and 2 messages acknowledged.
    pub acknowledged: Cell<u64>,
    /// Set once publishing and draining are over: clients disconnect.
    pub done: watch::Sender<bool>,
    /// The user's stop (Ctrl-C): publishers start nothing new.
    pub control: watch::Receiver<RunState>,
}

impl Run {
    pub(crate) fn new(plan: Arc<MqttPlan>, addr: SocketAddr, control: &Control, origin: Instant) -> Run {
        let id = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()))
            ^ std::process::id().rotate_left(16);
        let version = match plan.session.version {
            throng_plan::MqttVersion::V5 => Version::V5,
            _ => Version::V311,
        };
        Run {
            plan,
            addr,
            origin,
            id,
            version,
            rec: RefCell::new(Recorder::new(origin)),
            acknowledged: Cell::new(0),
            done: watch::Sender::new(false),
            control: control.subscribe(),
        }
    }

    /// The keep-alive announced, in seconds (the plan checked the range).
    pub(crate) fn keepalive(&self) -> Duration {
        self.plan.session.keepalive
    }

    pub(crate) fn client_id(&self, role: char, n: u64) -> String {
        format!("throng-{:08x}-{role}{n}", self.id)
    }
}

/// An open client: its stream and when its connect() was issued.
pub(crate) struct Client {
    pub stream: Transport,
    pub opened: Instant,
}

/// Connects, CONNECT → CONNACK, then SUBSCRIBE → SUBACK for each of
/// `topics`, within the plan's timeout; the failure is recorded under its
/// class.
pub(crate) async fn open(run: &Run, client_id: &str, topics: &[String]) -> Option<Client> {
    let t0 = Instant::now();
    run.rec.borrow_mut().connection_started(t0, false);
    let tcp_done = Cell::new(false);
    let attempt = async {
        let tcp = TcpStream::connect(run.addr)
            .await
            .map_err(|e| classify(&e, Stage::Connect))?;
        let now = Instant::now();
        tcp_done.set(true);
        {
            let mut rec = run.rec.borrow_mut();
            rec.connected(now, now - t0);
            rec.reached(run.addr);
        }
        let _ = tcp.set_nodelay(true);
        let mut stream = Transport::Plain(tcp);
        handshake(run, &mut stream, client_id, topics).await?;
        Ok::<_, ErrorClass>(stream)
    };
    let r = tokio::time::timeout(run.plan.timeout, attempt).await;
    let now = Instant::now();
    let mut rec = run.rec.borrow_mut();
    match r {
        Ok(Ok(stream)) => {
            rec.connection_established(now, false);
            Some(Client { stream, opened: t0 })
        }
        Ok(Err(class)) => {
            rec.connection_failed(now, class, false);
            None
        }
        Err(_) => {
            let class = if tcp_done.get() {
                ErrorClass::TimeoutHandshake
            } else {
                ErrorClass::TimeoutConnect
            };
            rec.connection_failed(now, class, false);
            None
        }
    }
}

/// CONNECT → CONNACK (phase `handshake`), then one SUBSCRIBE per topic and
/// their SUBACKs (phase `subscribe`: the first sent → the last read).
async fn handshake(run: &Run, stream: &mut Transport, client_id: &str, topics: &[String]) -> Result<(), ErrorClass> {
    let v = run.version;
    let s = &run.plan.session;
    let mut out = Vec::with_capacity(64);
    codec::connect(
        &mut out,
        &codec::Connect {
            version: v,
            client_id,
            clean_start: true,
            keepalive_secs: u16::try_from(s.keepalive.as_secs()).unwrap_or(u16::MAX),
            session_expiry: None,
            user: s.user.as_deref(),
            password: s.password.as_ref().map(|p| p.expose().as_bytes()),
        },
    );
    let t0 = Instant::now();
    send(stream, &out).await?;
    let code = match read_packet(stream, v).await? {
        Packet::Connack { code, .. } => code,
        Packet::Disconnect { code } => return Err(ErrorClass::MqttDisconnected(code)),
        _ => return Err(ErrorClass::Mqtt("protocol")),
    };
    if code != 0 {
        return Err(connack_refused(v, code));
    }
    let now = Instant::now();
    run.rec.borrow_mut().phase(now, Phase::Handshake, now - t0);
    if topics.is_empty() {
        return Ok(());
    }
    out.clear();
    for (i, topic) in topics.iter().enumerate() {
        // Identifiers 1 to 65535; the plan keeps topics per client fewer.
        let id = u16::try_from(i + 1).unwrap_or(u16::MAX);
        codec::subscribe(&mut out, v, id, topic, run.plan.qos);
    }
    let t1 = Instant::now();
    send(stream, &out).await?;
    let mut waiting = topics.len();
    while waiting > 0 {
        match read_packet(stream, v).await? {
            Packet::Suback { code, .. } if code >= 0x80 => return Err(suback_refused(v, code)),
            Packet::Suback { .. } => waiting -= 1,
            // A retained message of an earlier run may come first: acknowledged, not counted.
            Packet::Publish { qos: 1, id: Some(id) } => send(stream, &codec::puback(id)).await?,
            Packet::Publish { qos: 2, id: Some(id) } => send(stream, &codec::ack(codec::PUBREC, id)).await?,
            Packet::Ack {
                kind: codec::PUBREL,
                id,
                ..
            } => send(stream, &codec::ack(codec::PUBCOMP, id)).await?,
            Packet::Disconnect { code } => return Err(ErrorClass::MqttDisconnected(code)),
            Packet::Connack { .. } => return Err(ErrorClass::Mqtt("protocol")),
            _ => {}
        }
    }
    let now = Instant::now();
    run.rec.borrow_mut().phase(now, Phase::Subscribe, now - t1);
    Ok(())
}

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
    let pubs = if subs.is_empty() {
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
    let mut published = vec![0u64; usize::try_from(plan.publishers).unwrap_or(0)];
    let mut tick = tokio::time::interval(TICK);
    for mut t in publishing {
        loop {
            tokio::select! {
                r = &mut t => {
                    if let Ok((p, n)) = r
                        && let Some(slot) = usize::try_from(p).ok().and_then(|p| published.get_mut(p - 1))
                    {
                        *slot = n;
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
        published: published.iter().sum(),
        acknowledged: run.acknowledged.get(),
        ..PubSub::default()
    };
    for b in &books {
        let b = b.borrow();
        total.foreign = total.foreign.saturating_add(b.foreign);
        total.add_subscriber(b.finish());
    }
    (total, notes)
}
