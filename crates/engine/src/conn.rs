//! Opening a connection: connect (and write the first request in the same
//! breath on loopback), TLS, and the connection a loop then holds. What is
//! said on it is the protocol's (crate::proto::http1).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use throng_metrics::{ErrorClass, Phase};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::ctx::Ctx;
use crate::errors::{Stage, classify};
use crate::reach::Route;
use crate::rows::Row;
use crate::transport::{self, Transport};

/// A request above this size is written in several segments, where Nagle's
/// algorithm could hold back the last one: only then is TCP_NODELAY worth
/// its system call. A smaller request always goes out in one segment.
const NODELAY_ABOVE: usize = 1400;

/// A connection just opened, with how much of the first message it carried.
pub(crate) struct Opened {
    pub stream: TcpStream,
    /// Bytes of `first` already written.
    pub written: usize,
    /// When the connection was known to be established.
    pub established: Instant,
    /// Just before the system call that wrote `first`'s bytes (when some
    /// were; else `established`).
    pub sent: Instant,
}

/// Opens a TCP connection to `addr` and writes as much of `first` as the
/// socket takes at once, or says why not, within `timeout`.
///
/// On loopback the handshake completes inside `connect()`, so the request
/// goes out in the next system call, with no wait for readiness and no
/// `getsockopt(SO_ERROR)`; elsewhere the connection is awaited as usual.
/// With `stamp`, the socket is asked for the kernel's receive timestamps
/// (see crate::stamps) before anything can arrive.
pub(crate) async fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    stamp: bool,
    first: &[u8],
    timeout: Duration,
    mut sleep: Pin<&mut Sleep>,
) -> Result<Opened, ErrorClass> {
    let fail = |e: &io::Error| classify(e, Stage::Connect);
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )
    .map_err(|e| fail(&e))?;
    if first.len() > NODELAY_ABOVE {
        socket.set_tcp_nodelay(true).map_err(|e| fail(&e))?;
    }
    if let Some(ip) = source {
        bind_source(&socket, ip).map_err(|e| fail(&e))?;
    }
    if stamp {
        // Refused (never on Linux ≥ 2.6.30): the reads fall back to the
        // user-space clock, and the result counts them.
        crate::stamps::enable(std::os::fd::AsRawFd::as_raw_fd(&socket));
    }
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(fail(&e)),
    }
    // Writing to a socket still connecting fails with EAGAIN; any other
    // error means the connection failed (e.g. ECONNREFUSED on loopback).
    let before_send = Instant::now();
    let written = if first.is_empty() {
        // Nothing to send (TLS writes its ClientHello itself): one
        // getpeername() tells whether the handshake already completed.
        socket.peer_addr().ok().map(|_| 0)
    } else {
        match socket.send(first) {
            Ok(n) => Some(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) => return Err(fail(&e)),
        }
    };
    let stream = TcpStream::from_std(socket.into()).map_err(|e| fail(&e))?;
    if let Some(written) = written {
        let established = Instant::now();
        return Ok(Opened {
            stream,
            written,
            established,
            sent: if written > 0 { before_send } else { established },
        });
    }
    sleep.as_mut().reset((Instant::now() + timeout).into());
    tokio::select! {
        biased;
        r = stream.writable() => r.map_err(|e| fail(&e))?,
        () = sleep => return Err(ErrorClass::TimeoutConnect),
    }
    if let Some(e) = stream.take_error().map_err(|e| fail(&e))? {
        return Err(fail(&e));
    }
    let established = Instant::now();
    Ok(Opened {
        stream,
        written: 0,
        established,
        sent: established,
    })
}

/// Binds `socket` to a local address without choosing a port yet
/// (IP_BIND_ADDRESS_NO_PORT): the port is picked at connect() time, per
/// destination, so one source address serves ~28K connections to each
/// target instead of ~28K in all.
pub(crate) fn bind_source(socket: &Socket, ip: IpAddr) -> io::Result<()> {
    if ip.is_ipv4() {
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads an int we own, of the size we pass.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(socket),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&raw const on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    socket.bind(&SocketAddr::new(ip, 0).into())
}

/// When the parts of one exchange happened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// Last request byte written: just before the system call that wrote it
    /// (the packet leaves inside that call).
    pub sent: Instant,
    /// First response byte: its arrival by the kernel's receive stamp, or
    /// when the read returned.
    pub first: Instant,
    /// Last response byte, likewise.
    pub done: Instant,
    /// Bytes after the response (the connection cannot be reused).
    pub extra: bool,
    /// `done` came from the kernel's receive stamp.
    pub kernel: bool,
}

/// Why an exchange failed, with the request bytes that got out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failed {
    pub class: ErrorClass,
    pub written: usize,
}

/// An open connection and when its connect() was issued.
pub(crate) struct Conn {
    pub(crate) stream: Transport,
    pub(crate) opened: Instant,
    /// Its number among this worker's connection attempts (in rows).
    pub(crate) id: u64,
    /// `connect` and `tls` µs (0: none) of a connection opened with no row
    /// to write them in (an open loop's warm connection), for the row of
    /// its first request, as a closed loop's first request carries them.
    /// Zero once given, and when no rows are written.
    pub(crate) unreported: [u32; 2],
}

impl Conn {
    /// Puts the connection's `connect` and `tls` samples on its first row.
    pub(crate) fn report_setup(&mut self, row: &mut Row<'_>) {
        let [connect, tls] = std::mem::take(&mut self.unreported);
        if connect > 0 {
            row.phase(Phase::Connect, Duration::from_micros(u64::from(connect)));
        }
        if tls > 0 {
            row.phase(Phase::Tls, Duration::from_micros(u64::from(tls)));
        }
    }
}

pub(crate) fn close(ctx: &Ctx, conn: Option<Conn>) {
    if let Some(c) = conn {
        drop(c.stream);
        let now = Instant::now();
        ctx.rec.borrow_mut().connection_closed(now, now - c.opened);
    }
}

/// A connection ready for requests.
pub(crate) struct Ready {
    pub(crate) conn: Conn,
    /// Bytes of `first` already written.
    pub(crate) written: usize,
    /// When it became ready (TCP connected, TLS handshake done).
    pub(crate) ready: Instant,
    /// Just before the system call that wrote the first `written` bytes;
    /// `ready` when none were.
    pub(crate) sent: Instant,
}

/// Opens a TCP connection to the first of the route's addresses that
/// takes it, starting with the one that worked last on this worker
/// (try-in-order; see crate::reach), through the proxy's CONNECT tunnel
/// when the route has one. The timeout covers every address and the
/// tunnel. Through a tunnel `first` is not sent (`written` is 0).
async fn connect_route(
    ctx: &Ctx,
    route: &Route,
    source: Option<IpAddr>,
    first: &[u8],
    mut sleep: Pin<&mut Sleep>,
) -> Result<(Opened, SocketAddr), ErrorClass> {
    let start = Instant::now();
    let n = route.addrs.len().max(1);
    let prefer = ctx.prefer.get();
    let first = if route.tunnel.is_some() { &[][..] } else { first };
    let mut last = ErrorClass::Refused;
    for k in 0..n {
        let i = (prefer + k) % n;
        let Some(&addr) = route.addrs.get(i) else { break };
        let left = ctx.spec.timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(ErrorClass::TimeoutConnect);
        }
        match connect(addr, source, ctx.stamp, first, left, sleep.as_mut()).await {
            Ok(mut o) => {
                ctx.prefer.set(i);
                if let Some(req) = &route.tunnel {
                    sleep.as_mut().reset((start + ctx.spec.timeout).into());
                    // Boxed: only proxied connections pay for its state.
                    Box::pin(crate::reach::connect_tunnel(&mut o.stream, req, sleep.as_mut())).await?;
                    o.established = Instant::now();
                    o.sent = o.established;
                }
                return Ok((o, addr));
            }
            Err(class) if crate::reach::try_next(class) => last = class,
            Err(class) => return Err(proxy_unreachable(route.proxied, class)),
        }
    }
    Err(proxy_unreachable(route.proxied, last))
}

/// A proxy that refuses the TCP connection is `proxy.unreachable`, not the target's `refused`.
fn proxy_unreachable(proxied: bool, class: ErrorClass) -> ErrorClass {
    if proxied && crate::reach::try_next(class) {
        ErrorClass::Proxy("unreachable")
    } else {
        class
    }
}

/// Opens a connection to the target (TCP, then TLS if the plan says so),
/// recording the attempt, its `connect` and `tls` samples and its outcome
/// (and, in `row`, the attempt's number and samples; the caller records a
/// failure there).
pub(crate) async fn open_connection(
    ctx: &Ctx,
    first: &[u8],
    source: Option<std::net::IpAddr>,
    reconnect: bool,
    sleep: Pin<&mut Sleep>,
    row: Option<&mut Row<'_>>,
) -> Result<Ready, ErrorClass> {
    let spec = &ctx.spec;
    open_connection_to(
        ctx,
        &spec.route,
        spec.tls.as_ref(),
        first,
        source,
        reconnect,
        sleep,
        row,
    )
    .await
}

/// [`open_connection`] by `route` (with `tls`): one of a plan's several
/// origins (crate::targets).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn open_connection_to(
    ctx: &Ctx,
    route: &Route,
    tls: Option<&crate::transport::TlsClient>,
    first: &[u8],
    source: Option<std::net::IpAddr>,
    reconnect: bool,
    sleep: Pin<&mut Sleep>,
    row: Option<&mut Row<'_>>,
) -> Result<Ready, ErrorClass> {
    let (stream, opening) = open_transport(ctx, route, tls, first, source, reconnect, sleep, row).await?;
    Ok(opening.established(ctx, stream))
}

/// A connection whose transport (and protocol handshake) is up but whose
/// outcome is not counted yet: a handshake on top of it (HTTP/2's preface
/// in a storm) decides, then [`Opening::established`] or
/// [`Opening::failed`] counts it, exactly once.
pub(crate) struct Opening {
    pub(crate) opened: Instant,
    pub(crate) id: u64,
    unreported: [u32; 2],
    written: usize,
    ready: Instant,
    sent: Instant,
    reconnect: bool,
}

impl Opening {
    fn resolve(&self, ctx: &Ctx) {
        let counter = if self.reconnect {
            &ctx.reconnecting
        } else {
            &ctx.connecting
        };
        counter.set(counter.get() - 1);
    }

    /// Counts the connection established at `at` (its outcome only: the
    /// stream went to the protocol that made it ready).
    pub(crate) fn counted(&self, ctx: &Ctx, at: Instant) {
        self.resolve(ctx);
        ctx.rec.borrow_mut().connection_established(at, self.reconnect);
    }

    /// Counts the connection established (at `ready`) and hands it over.
    pub(crate) fn established(self, ctx: &Ctx, stream: Transport) -> Ready {
        self.counted(ctx, self.ready);
        Ready {
            conn: Conn {
                stream,
                opened: self.opened,
                id: self.id,
                unreported: self.unreported,
            },
            written: self.written,
            ready: self.ready,
            sent: if self.written > 0 { self.sent } else { self.ready },
        }
    }

    /// Counts the connection failed with `class`.
    pub(crate) fn failed(&self, ctx: &Ctx, class: ErrorClass) {
        self.resolve(ctx);
        ctx.rec
            .borrow_mut()
            .connection_failed(Instant::now(), class, self.reconnect);
    }
}

/// [`open_connection_to`] up to the transport and the protocol handshake,
/// its outcome left to the caller ([`Opening`]); a failure here is counted.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn open_transport(
    ctx: &Ctx,
    route: &Route,
    tls: Option<&crate::transport::TlsClient>,
    first: &[u8],
    source: Option<std::net::IpAddr>,
    reconnect: bool,
    mut sleep: Pin<&mut Sleep>,
    mut row: Option<&mut Row<'_>>,
) -> Result<(Transport, Opening), ErrorClass> {
    let spec = &ctx.spec;
    let tls = tls.map(|t| (&t.config, t.server_name.clone()));
    let opened = Instant::now();
    // With rows written but none for this connection, its samples wait for its first request's.
    let hold_back = row.is_none() && ctx.rows.is_some();
    let mut unreported = [0u32; 2];
    // At least 1 µs, so that 0 keeps meaning "none".
    let micros = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX).max(1);
    let id = ctx.next_conn.get();
    ctx.next_conn.set(id + 1);
    if let Some(r) = row.as_deref_mut() {
        r.conn(id);
    }
    ctx.rec.borrow_mut().connection_started(opened, reconnect);
    let counter = if reconnect { &ctx.reconnecting } else { &ctx.connecting };
    counter.set(counter.get() + 1);
    // Resolved (established or failed) exactly once, below.
    let resolved = || counter.set(counter.get() - 1);
    let fail = |class| {
        resolved();
        ctx.rec.borrow_mut().connection_failed(Instant::now(), class, reconnect);
        class
    };
    // TCP is up: the `connect` sample (in the row, or held back for the
    // first request's), and for a reconnect the server accepting again.
    let connected = |established: Instant, row: Option<&mut Row<'_>>, unreported: &mut [u32; 2]| {
        let mut rec = ctx.rec.borrow_mut();
        rec.connected(established, established - opened);
        if reconnect {
            rec.reconnect_accepted(established);
        }
        if let Some(r) = row {
            r.phase(Phase::Connect, established - opened);
        } else if hold_back {
            unreported[0] = micros(established - opened);
        }
    };
    let (stream, written, ready, sent) = match tls {
        None => {
            let (o, addr) = connect_route(ctx, route, source, first, sleep.as_mut())
                .await
                .map_err(fail)?;
            ctx.rec.borrow_mut().reached(addr);
            connected(o.established, row.as_deref_mut(), &mut unreported);
            (Transport::Plain(o.stream), o.written, o.established, o.sent)
        }
        Some((config, server_name)) => {
            // The ClientHello goes out with the connect (see conn::connect).
            let (session, hello) = crate::tls_stream::start(Arc::clone(config), server_name)
                .map_err(|_| fail(ErrorClass::Tls("client_setup")))?;
            // Boxed while TCP connects: every connection's opening future
            // (plain ones too) would otherwise hold its kilobyte.
            let session = Box::new(session);
            let (o, addr) = connect_route(ctx, route, source, &hello, sleep.as_mut())
                .await
                .map_err(fail)?;
            ctx.rec.borrow_mut().reached(addr);
            connected(o.established, row.as_deref_mut(), &mut unreported);
            sleep.as_mut().reset((o.established + spec.timeout).into());
            // The client's Finished waits for the first thing the client
            // sends (the request, a line protocol's first send); otherwise
            // it leaves now.
            let flush = !ctx.client_speaks_first;
            // Boxed likewise: its state holds the TLS session.
            let (mut stream, h, done) = Box::pin(transport::handshake(
                o.stream,
                *session,
                &hello,
                o.written,
                flush,
                sleep.as_mut(),
            ))
            .await
            .map_err(fail)?;
            if ctx.stamp {
                stream.keep_stamps();
            }
            ctx.rec.borrow_mut().tls_handshake(done, done - o.established, h);
            if let Some(r) = row.as_deref_mut() {
                r.phase(Phase::Tls, done - o.established);
            } else if hold_back {
                unreported[1] = micros(done - o.established);
            }
            // The request has not been written: nothing of it went with the connect.
            (stream, 0, done, done)
        }
    };
    // The protocol's opening, if it has one (a line protocol's handshake).
    let (stream, ready) = crate::proto::opening::opening(ctx, stream, ready, id, sleep, row)
        .await
        .map_err(fail)?;
    Ok((
        stream,
        Opening {
            opened,
            id,
            unreported,
            written,
            ready,
            sent,
            reconnect,
        },
    ))
}
