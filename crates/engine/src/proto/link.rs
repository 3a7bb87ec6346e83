//! The storm connection role: a storm's open connection in whichever
//! protocol it speaks ([`Link`]), how a multiplexed one is established and
//! held, what a held byte stream answers ([`answer_while_holding`]) and
//! its goodbye ([`goodbye`]); the opening on a new connection is
//! `super::opening`'s. `crate::storm` calls these and names no protocol.

use std::pin::Pin;
use std::time::{Duration, Instant};

use throng_metrics::{ErrorClass, Recorder};
use tokio::time::Sleep;

use super::line::{self, ProtocolSpec};
use super::wire::Wire;
use super::{http2, http3, mqtt, ws};
use crate::conn::{Conn, close};
use crate::ctx::Ctx;
use crate::rows::Row;
use crate::transport::Transport;

/// A storm's open connection: a byte stream (TCP, TLS, a line protocol,
/// NATS, WebSocket, HTTP/1.1), an HTTP/2 connection driven by its own
/// task, or a QUIC connection speaking HTTP/3.
pub(crate) enum Link {
    Bytes(Conn),
    Http2(http2::Held),
    Http3(Box<http3::Held>),
}

/// What [`establish_own`] gives: the connection and when it was ready, or
/// Err as `crate::storm`'s establish (the connection's failure class, or
/// None when its request ended it; both recorded).
pub(crate) type Established = Result<(Link, Instant), Option<ErrorClass>>;

impl Link {
    /// Closes the connection and records its end.
    pub(crate) fn close(self, ctx: &Ctx) {
        match self {
            Link::Bytes(c) => close(ctx, Some(c)),
            Link::Http2(h) => h.close(ctx),
            Link::Http3(h) => h.close(ctx),
        }
    }

    /// Holds a connection its protocol keeps alive itself (HTTP/2's driver
    /// answers PINGs and SETTINGS, quinn answers QUIC's) until `deadline`
    /// or a stop (false), or until the server ends it (true). A byte stream
    /// comes back as Err: the storm holds it.
    pub(crate) async fn hold_own(
        self,
        ctx: &Ctx,
        deadline: Instant,
        sleep: Pin<&mut Sleep>,
    ) -> Result<(Link, bool), Conn> {
        match self {
            Link::Bytes(c) => Err(c),
            Link::Http2(h) => {
                let closed = Box::pin(h.hold(ctx, deadline, sleep)).await;
                Ok((Link::Http2(h), closed))
            }
            Link::Http3(mut h) => {
                let closed = h.hold(ctx, deadline, sleep).await;
                Ok((Link::Http3(h), closed))
            }
        }
    }
}

/// Opens a storm connection of a protocol that opens its own (HTTP/2's
/// preface on the storm's transport, a QUIC connection) and makes the
/// plan's request on it when `with_request`. None when the worker's
/// protocol speaks on a byte stream the storm opens itself.
pub(crate) async fn establish_own(
    ctx: &Ctx,
    with_request: bool,
    source: Option<std::net::IpAddr>,
    origin: Instant,
    reconnect: bool,
    sleep: Pin<&mut Sleep>,
    row: Option<&mut Row<'_>>,
) -> Option<Established> {
    match &ctx.spec.wire {
        Wire::Http3(h3) => Some(
            Box::pin(http3::storm_establish(ctx, h3, with_request, origin, row))
                .await
                .map(|(held, ready)| (Link::Http3(Box::new(held)), ready)),
        ),
        Wire::Http2(_) => Some(
            Box::pin(http2::storm_establish(
                ctx,
                with_request,
                source,
                origin,
                reconnect,
                sleep,
                row,
            ))
            .await
            .map(|(held, ready)| (Link::Http2(held), ready)),
        ),
        Wire::Http1 | Wire::Line { .. } => None,
    }
}

/// Answers the server on a held byte stream (NATS PINGs; WebSocket's
/// pings, and its own every `ping_every`; MQTT's PINGREQ every keep-alive)
/// until the server closes it.
pub(crate) async fn answer_while_holding(ctx: &Ctx, stream: &mut Transport) {
    let Wire::Line { spec, .. } = &ctx.spec.wire else {
        return line::answer_pings(stream, &ctx.scratch).await;
    };
    match &**spec {
        ProtocolSpec::WebSocket(w) => ws::hold(ctx, stream, w.ping_every).await,
        ProtocolSpec::Mqtt(m) => mqtt::hold(ctx, stream, m).await,
        ProtocolSpec::Nats { .. } | ProtocolSpec::Lines { .. } => line::answer_pings(stream, &ctx.scratch).await,
    }
}

/// The protocol's goodbye before the socket closes: WebSocket's close
/// handshake, MQTT's DISCONNECT.
pub(crate) async fn goodbye(ctx: &Ctx, link: &mut Link) {
    let Link::Bytes(conn) = link else { return };
    let Wire::Line { spec, .. } = &ctx.spec.wire else {
        return;
    };
    match &**spec {
        ProtocolSpec::WebSocket(_) => ws::close(&mut conn.stream, &ctx.scratch).await,
        ProtocolSpec::Mqtt(_) => mqtt::disconnect(&mut conn.stream).await,
        ProtocolSpec::Nats { .. } | ProtocolSpec::Lines { .. } => {}
    }
}

/// What a byte stream held in the storm's holder (no task of its own, see
/// `crate::storm`'s holder) says while held. The holder reads and writes;
/// this says what the bytes mean.
#[derive(Clone, Copy)]
pub(crate) enum HeldTalk {
    /// Nothing is sent or expected: what the server sends is dropped.
    Quiet,
    /// MQTT (over TCP, TLS or WebSocket): a PINGREQ every keep-alive (none when zero),
    /// its PINGRESP timed, QoS 1 PUBLISHes acknowledged, a DISCONNECT
    /// counted by reason, DISCONNECT at the hold's end.
    Mqtt {
        keepalive: Duration,
        version: mqtt::codec::Version,
    },
}

/// A held connection's state in the holder, for the protocols that talk
/// while held (MQTT's; a quiet connection leaves it empty).
pub(crate) type HeldState = mqtt::held::Session;

/// Whether a held connection goes on.
pub(crate) use mqtt::held::Flow;

impl HeldTalk {
    /// What this worker's held storm connections say in the holder, or None
    /// when they must keep a task (they answer in ways the holder does not:
    /// NATS, WebSocket, line steps).
    pub(crate) fn of(wire: &Wire) -> Option<HeldTalk> {
        if !wire.answers_while_holding() {
            return Some(HeldTalk::Quiet);
        }
        let Wire::Line { spec, .. } = wire else { return None };
        match &**spec {
            ProtocolSpec::Mqtt(m) => Some(HeldTalk::Mqtt {
                keepalive: m.keepalive,
                version: m.version,
            }),
            ProtocolSpec::WebSocket(_) | ProtocolSpec::Nats { .. } | ProtocolSpec::Lines { .. } => None,
        }
    }

    /// How often a held connection speaks first (None: never).
    pub(crate) fn period(self) -> Option<Duration> {
        match self {
            HeldTalk::Quiet => None,
            HeldTalk::Mqtt { keepalive, .. } => (!keepalive.is_zero()).then_some(keepalive),
        }
    }

    /// True when what the server sends must be read and understood (not
    /// left in the kernel's buffer past a few reads).
    pub(crate) fn listens(self) -> bool {
        !matches!(self, HeldTalk::Quiet)
    }

    /// Bytes read off a held connection.
    pub(crate) fn read(
        self,
        state: &mut HeldState,
        bytes: &[u8],
        opened: Instant,
        rec: &mut Recorder,
        send: &mut impl FnMut(&[u8]) -> bool,
    ) -> Flow {
        match self {
            HeldTalk::Quiet => Flow::Open,
            HeldTalk::Mqtt { version, .. } => state.read(bytes, version, opened, rec, send),
        }
    }

    /// A held connection's [`Self::period`] came round.
    pub(crate) fn tick(
        self,
        state: &mut HeldState,
        opened: Instant,
        now: Instant,
        rec: &mut Recorder,
        send: &mut impl FnMut(&[u8]) -> bool,
    ) -> Flow {
        match self {
            HeldTalk::Quiet => Flow::Open,
            HeldTalk::Mqtt { .. } => state.tick(opened, now, rec, send),
        }
    }

    /// What a held connection sends before its close at the hold's end.
    pub(crate) fn goodbye(self) -> &'static [u8] {
        match self {
            HeldTalk::Quiet => &[],
            HeldTalk::Mqtt { .. } => mqtt::held::GOODBYE,
        }
    }
}
