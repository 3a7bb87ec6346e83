//! Opening a QUIC connection and its HTTP/3 session, on the worker's one
//! endpoint.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use throng_metrics::{ErrorClass, Handshake};

use super::errors::{connection_class, h3_connection_class};
use super::socket::WireClock;
use super::{H3Spec, MAX_HEADER_SECTION, SendRequest};
use crate::ctx::Ctx;

pub(super) type Driver = h3::client::Connection<h3_quinn::Connection, Bytes>;

/// Where a connection slot's connections go.
pub(super) struct To {
    pub(super) addr: SocketAddr,
    pub(super) server_name: String,
}

/// The worker's QUIC endpoint (one UDP socket for all its connections),
/// made at the first connection, and its socket's clock. One socket per
/// connection would cost a receive buffer each (quinn sizes it for GRO
/// batches, over half a MB), kept until the closed connection has drained.
pub(super) fn endpoint(ctx: &Ctx, to: SocketAddr) -> Result<(quinn::Endpoint, Arc<WireClock>), ErrorClass> {
    if let Some((e, c)) = ctx.conns.quic.borrow().as_ref() {
        return Ok((e.clone(), Arc::clone(c)));
    }
    let bind: SocketAddr = if to.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let (e, c) = super::socket::endpoint(bind, ctx.stamp)
        .map_err(|e| crate::errors::classify(&e, crate::errors::Stage::Connect))?;
    *ctx.conns.quic.borrow_mut() = Some((e.clone(), Arc::clone(&c)));
    Ok((e, c))
}

/// `f` of the worker's socket clock, once its endpoint exists (it does for
/// any stream: its connection was opened on it).
pub(super) fn with_clock<T>(ctx: &Ctx, f: impl FnOnce(&WireClock) -> T) -> Option<T> {
    ctx.conns.quic.borrow().as_ref().map(|(_, c)| f(c))
}

/// Where QUIC goes: the route's first address (after -4/-6,
/// --connect-to, --resolve; a plan through a proxy is refused for HTTP/3).
pub(super) fn target_addr(ctx: &Ctx) -> SocketAddr {
    // Invariant: a route has at least one address (an empty resolution is
    // refused before the run); the fallback only keeps this total.
    ctx.spec
        .route
        .addrs
        .first()
        .copied()
        .unwrap_or((Ipv4Addr::LOCALHOST, 0).into())
}

/// Opens a QUIC connection and its HTTP/3 session, recording the attempt,
/// its `tls` sample (the QUIC handshake) and its outcome.
pub(super) async fn open(ctx: &Ctx, h3: &H3Spec) -> Result<(quinn::Connection, Driver, SendRequest), ErrorClass> {
    open_to(ctx, &h3.client, &h3.server_name, target_addr(ctx), h3.streams).await
}

/// [`open`] to `addr` with `client` (its ALPN `h3`) and `server_name`;
/// `streams`: the requests it may carry at once, for the report.
pub(super) async fn open_to(
    ctx: &Ctx,
    client: &quinn::ClientConfig,
    server_name: &str,
    addr: SocketAddr,
    streams: u32,
) -> Result<(quinn::Connection, Driver, SendRequest), ErrorClass> {
    let spec = &ctx.spec;
    let started = Instant::now();
    ctx.rec.borrow_mut().connection_started(started, false);
    ctx.connecting.set(ctx.connecting.get() + 1);
    let result = async {
        let (endpoint, _) = endpoint(ctx, addr)?;
        let connecting = endpoint
            .connect_with(client.clone(), addr, server_name)
            .map_err(|_| ErrorClass::Quic("connect_error"))?;
        let deadline = started + spec.timeout;
        let quic = match tokio::time::timeout_at(deadline.into(), connecting).await {
            Err(_) => return Err(ErrorClass::Quic("handshake_timeout")),
            Ok(Err(e)) => return Err(connection_class(&e, true)),
            Ok(Ok(c)) => c,
        };
        let handshake = Instant::now();
        let (driver, send) = match tokio::time::timeout_at(
            deadline.into(),
            h3::client::builder()
                .max_field_section_size(MAX_HEADER_SECTION)
                .build(h3_quinn::Connection::new(quic.clone())),
        )
        .await
        {
            Err(_) => return Err(ErrorClass::Quic("handshake_timeout")),
            Ok(Err(e)) => return Err(h3_connection_class(&e)),
            Ok(Ok(pair)) => pair,
        };
        Ok((quic, driver, send, handshake))
    }
    .await;
    ctx.connecting.set(ctx.connecting.get() - 1);
    let mut rec = ctx.rec.borrow_mut();
    match result {
        Ok((quic, driver, send, handshake)) => {
            // QUIC carries TLS 1.3 (RFC 9001); quinn does not say which
            // group and suite were chosen.
            let h = Handshake {
                version: "TLSv1_3",
                group: "",
                cipher: "",
                resumed: false,
                hello_retry: false,
            };
            rec.tls_handshake(handshake, handshake - started, h);
            rec.connection_established(handshake, false);
            // quinn does not tell the peer's MAX_STREAMS: opening a stream
            // past it waits, so the peak per connection shows the cap.
            rec.mux_connection("h3", u64::from(streams), None);
            Ok((quic, driver, send))
        }
        Err(class) => {
            rec.connection_failed(Instant::now(), class, false);
            Err(class)
        }
    }
}
