//! A pub/sub run's shared state ([`Run`]: the plan, the one recorder, the
//! end signal) and how each client opens: connect, CONNECT → CONNACK,
//! SUBSCRIBE → SUBACK for each topic (subscribers).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Phase, Recorder};
use throng_plan::MqttPlan;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::codec::{self, Packet, Version};
use super::{connack_refused, read_packet, send, suback_refused};
use crate::Control;
use crate::errors::{Stage, classify};
use crate::transport::Transport;
use crate::worker::state::RunState;

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

/// An open client: its stream, when its connect() was issued, the
/// messages the broker delivered before its last SUBACK (retained ones of
/// earlier runs: this run publishes only once every subscriber is
/// subscribed), foreign to its books, and the broker's limit on messages
/// in flight.
pub(crate) struct Client {
    pub stream: Transport,
    pub opened: Instant,
    pub early: u64,
    /// The broker's Receive Maximum (MQTT 5): most QoS 1 and 2 messages
    /// it takes unacknowledged at once.
    pub receive_max: Option<u16>,
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
        if let Some(ws) = &run.plan.session.websocket {
            let t = Instant::now();
            // Only the upgrade's answer goes through it.
            let scratch = std::cell::RefCell::new(vec![0u8; 4096].into_boxed_slice());
            stream = crate::proto::ws::upgrade_stream(stream, &ws.path, &ws.host, super::WS_PROTOCOL, &scratch).await?;
            let now = Instant::now();
            run.rec.borrow_mut().phase(now, Phase::Upgrade, now - t);
        }
        let (early, receive_max) = handshake(run, &mut stream, client_id, topics).await?;
        Ok::<_, ErrorClass>((stream, early, receive_max))
    };
    let r = tokio::time::timeout(run.plan.timeout, attempt).await;
    let now = Instant::now();
    let mut rec = run.rec.borrow_mut();
    match r {
        Ok(Ok((stream, early, receive_max))) => {
            rec.connection_established(now, false);
            Some(Client {
                stream,
                opened: t0,
                early,
                receive_max,
            })
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
/// their SUBACKs (phase `subscribe`: the first sent → the last read); the
/// messages delivered before the last SUBACK, counted, and the broker's
/// Receive Maximum.
async fn handshake(
    run: &Run,
    stream: &mut Transport,
    client_id: &str,
    topics: &[String],
) -> Result<(u64, Option<u16>), ErrorClass> {
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
    let (code, receive_max) = match read_packet(stream, v).await? {
        Packet::Connack { code, receive_max, .. } => (code, receive_max),
        Packet::Disconnect { code } => return Err(ErrorClass::MqttDisconnected(code)),
        _ => return Err(ErrorClass::Mqtt("protocol")),
    };
    if code != 0 {
        return Err(connack_refused(v, code));
    }
    let now = Instant::now();
    run.rec.borrow_mut().phase(now, Phase::Handshake, now - t0);
    if topics.is_empty() {
        return Ok((0, receive_max));
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
    let mut early = 0u64;
    while waiting > 0 {
        let packet = read_packet(stream, v).await?;
        if matches!(packet, Packet::Publish { .. }) {
            // A retained message of an earlier run may come first:
            // acknowledged, and counted foreign.
            early += 1;
        }
        match packet {
            Packet::Suback { code, .. } if code >= 0x80 => return Err(suback_refused(v, code)),
            Packet::Suback { .. } => waiting -= 1,
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
    Ok((early, receive_max))
}

/// A connection whose TCP can be told to acknowledge what it has received
/// now rather than wait for data of ours to carry the ACK.
pub(crate) trait AckNow {
    /// The ACK owed for what was read goes now (TCP_QUICKACK, value 2);
    /// later ones are delayed as before, so this is asked each time.
    fn ack_now(&self);
}

impl AckNow for Transport {
    fn ack_now(&self) {
        use std::os::fd::AsRawFd;
        // 2: the ACK owed goes now, and later ones are delayed again (1
        // would leave delayed ACKs off, and each read would send one).
        let two: libc::c_int = 2;
        // SAFETY: setsockopt reads an int we own, of the size we pass. Only
        // a hint: without it the broker's answers come later, not never.
        unsafe {
            libc::setsockopt(
                self.tcp().as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_QUICKACK,
                (&raw const two).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}
