//! The worker's QUIC socket, timed at the wire: quinn's UDP socket with the
//! kernel's receive stamp of each datagram and the instant of each send.
//!
//! ```text
//!  quinn's endpoint driver ── poll_recv ──► recvmmsg (GRO, ECN, destination,
//!                                            SCM_TIMESTAMPING per datagram)
//!                                             └─ the latest datagram's stamp ─┐
//!  quinn's connection      ── try_send ───► clock read, then sendmsg (GSO)   │
//!                                             └─ its instant, in a ring ──────┤
//!  a stream's exchange (send.rs): marks the sends at its handoff; at its     │
//!  response, the first send after the mark and the latest stamp ◄────────────┘
//! ```
//!
//! quinn-udp reads the control messages it knows (GRO's segment size, ECN,
//! the destination address) into a buffer with no room for a timestamp, and
//! drops the rest: the receive here is its own `recvmmsg`, with room for
//! the stamp as well, and decodes what quinn needs from it. Sends go
//! through quinn-udp (GSO kept), timed just before the system call, as TCP
//! writes are.
//!
//! What a stamp means here: the socket is the worker's, shared by all its
//! connections, and the datagrams are encrypted, so a stream cannot tell
//! which datagram completed it. It reads the stamp of the latest datagram
//! read before it saw its response: the response's own when it was the last
//! one read (one connection, one stream in flight), else a later one's —
//! never earlier than the response's arrival, never later than the user
//! clock would be. A GRO batch (several datagrams in one buffer) has one
//! stamp, its first segment's; over loopback a GSO send arrives whole,
//! stamped once. Likewise the send: the first send after the stream handed
//! its request over, which carries it unless another connection's packet
//! went out first (then a little earlier than its own).

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use quinn::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::Interest;

/// Sends remembered: a stream reads the first send after its handoff while
/// fewer than this many went out since (else it keeps its handoff's clock).
const SENDS: usize = 256;

/// Datagrams one receive reads at most (quinn hands over as many buffers).
const BATCH: usize = quinn::udp::BATCH_SIZE;

/// Control-message room per datagram, in u64s (aligned for `cmsghdr`):
/// GRO's segment size (24 bytes), the TOS byte (24), the destination
/// (IPv6's 36), SCM_TIMESTAMPING's three timespecs (64), and slack.
const CONTROL_WORDS: usize = 24;

/// When datagrams arrived and when sends went out, as the socket saw
/// them; read by the streams of the worker that owns the socket.
#[derive(Debug)]
pub(crate) struct WireClock {
    /// The instant the send ring's entries count from.
    base: Instant,
    /// The kernel's receive stamp of the latest datagram read
    /// ([`crate::stamps::Stamp::to_nanos`]; 0: none, or it came unstamped).
    received: AtomicU64,
    /// Send system calls made.
    sends: AtomicU64,
    /// Send `k` went out `sent_at[k % SENDS] - 1` ns after `base`.
    sent_at: [AtomicU64; SENDS],
}

impl WireClock {
    fn new() -> WireClock {
        WireClock {
            base: Instant::now(),
            received: AtomicU64::new(0),
            sends: AtomicU64::new(0),
            sent_at: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The mark a stream takes when it hands its request over: the number
    /// of the next send.
    pub(crate) fn mark(&self) -> u64 {
        self.sends.load(Ordering::Relaxed)
    }

    /// The first send after `mark`, while it is still remembered.
    pub(crate) fn sent_after(&self, mark: u64) -> Option<Instant> {
        let sends = self.sends.load(Ordering::Relaxed);
        if sends <= mark || sends - mark > SENDS as u64 {
            return None;
        }
        let ns = self.sent_at[(mark % SENDS as u64) as usize].load(Ordering::Relaxed);
        (ns != 0).then(|| self.base + Duration::from_nanos(ns - 1))
    }

    /// The arrival of the latest datagram read, on the monotonic clock,
    /// for a stream that sees its response at `now` and sent its request
    /// at `floor`; None when there is no stamp or it is implausible
    /// (`crate::stamps::arrival`): the caller uses `now`.
    pub(crate) fn received(&self, now: Instant, floor: Instant) -> Option<Instant> {
        let stamp = crate::stamps::Stamp::from_nanos(self.received.load(Ordering::Relaxed))?;
        crate::stamps::arrival(stamp, now, floor)
    }

    fn sent(&self, at: Instant) {
        let k = self.sends.load(Ordering::Relaxed);
        let ns = u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX - 1);
        self.sent_at[(k % SENDS as u64) as usize].store(ns + 1, Ordering::Relaxed);
        self.sends.store(k + 1, Ordering::Relaxed);
    }
}

/// quinn's UDP socket on tokio, with the kernel's receive stamps and the
/// send instants kept in its [`WireClock`].
pub(crate) struct StampedSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    clock: Arc<WireClock>,
}

impl fmt::Debug for StampedSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StampedSocket")
            .field("io", &self.io)
            .finish_non_exhaustive()
    }
}

/// A client endpoint bound to `bind` on a [`StampedSocket`] (receive stamps
/// asked for when `stamp`), and the socket's clock.
pub(crate) fn endpoint(bind: SocketAddr, stamp: bool) -> io::Result<(quinn::Endpoint, Arc<WireClock>)> {
    let socket = std::net::UdpSocket::bind(bind)?;
    if stamp {
        // Refused (an old kernel): every datagram comes unstamped, and the
        // streams fall back to the user clock.
        crate::stamps::enable(std::os::fd::AsRawFd::as_raw_fd(&socket));
    }
    let state = UdpSocketState::new((&socket).into())?;
    socket.set_nonblocking(true)?;
    let clock = Arc::new(WireClock::new());
    let socket = StampedSocket {
        io: tokio::net::UdpSocket::from_std(socket)?,
        state,
        clock: Arc::clone(&clock),
    };
    let endpoint = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        Arc::new(socket),
        Arc::new(quinn::TokioRuntime),
    )?;
    Ok((endpoint, clock))
}

impl AsyncUdpSocket for StampedSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Writable {
            socket: self,
            waiting: None,
        })
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        let at = Instant::now();
        self.io
            .try_io(Interest::WRITABLE, || self.state.send((&self.io).into(), transmit))?;
        self.clock.sent(at);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.io.poll_recv_ready(cx))?;
            // WouldBlock clears the readiness (then wait again); another
            // error (an ICMP error queued on the socket) is consumed by the
            // receive that reported it: read again, as quinn's own socket does.
            if let Ok(n) = self.io.try_io(Interest::READABLE, || self.recv(bufs, meta)) {
                return Poll::Ready(Ok(n));
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }
}

impl StampedSocket {
    /// One `recvmmsg` into `bufs`: the datagrams read, each described in
    /// `meta`; the last one's stamp kept in the clock.
    fn recv(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let count = bufs.len().min(meta.len()).min(BATCH);
        if count == 0 {
            return Ok(0);
        }
        // SAFETY: sockaddr_storage and mmsghdr are plain old data; all-zero
        // is a valid value of each.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        let mut controls = [[0u64; CONTROL_WORDS]; BATCH];
        let mut iovs: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..count {
            iovs[i] = libc::iovec {
                iov_base: bufs[i].as_mut_ptr().cast(),
                iov_len: bufs[i].len(),
            };
            let h = &mut hdrs[i].msg_hdr;
            h.msg_name = (&raw mut names[i]).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &raw mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = controls[i].as_mut_ptr().cast();
            h.msg_controllen = std::mem::size_of::<[u64; CONTROL_WORDS]>() as _;
        }
        let n = loop {
            // SAFETY: the first `count` headers point at a name, one iovec
            // over a buffer quinn lent us, and a control area, each alive
            // and writable for the call with its true length.
            let n = unsafe {
                libc::recvmmsg(
                    self.io.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    count as libc::c_uint,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut last = None;
        for i in 0..n {
            let (m, stamp) = decode(&names[i], &hdrs[i].msg_hdr, hdrs[i].msg_len as usize);
            meta[i] = m;
            last = Some(stamp);
        }
        if let Some(stamp) = last {
            let word = stamp.map_or(0, crate::stamps::Stamp::to_nanos);
            self.clock.received.store(word, Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// One received datagram's description for quinn, and its kernel stamp.
fn decode(name: &libc::sockaddr_storage, hdr: &libc::msghdr, len: usize) -> (RecvMeta, Option<crate::stamps::Stamp>) {
    let mut meta = RecvMeta {
        addr: peer(name),
        len,
        stride: len,
        ecn: None,
        dst_ip: None,
    };
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays inside msg_control/msg_controllen,
    // which the kernel set to what it wrote; each header's data is read
    // unaligned, as the type its level and type say it is.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPING) => {
                    let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                    stamp = crate::stamps::Stamp::from_timespec(&ts);
                }
                (libc::IPPROTO_IP, libc::IP_TOS | libc::IP_RECVTOS) => {
                    meta.ecn = EcnCodepoint::from_bits(*data & 0b11);
                }
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    let tclass = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    meta.ecn = EcnCodepoint::from_bits((tclass & 0b11) as u8);
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                    meta.dst_ip = Some(IpAddr::V4(Ipv4Addr::from(info.ipi_addr.s_addr.to_ne_bytes())));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                    meta.dst_ip = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let size = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                    if let Ok(size) = usize::try_from(size)
                        && size > 0
                    {
                        meta.stride = size;
                    }
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    (meta, stamp)
}

/// The sender's address a receive wrote into `name`.
fn peer(name: &libc::sockaddr_storage) -> SocketAddr {
    match libc::c_int::from(name.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in,
            // which it is large and aligned enough for.
            let a = unsafe { &*(std::ptr::from_ref(name).cast::<libc::sockaddr_in>()) };
            SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: likewise, a sockaddr_in6.
            let a = unsafe { &*(std::ptr::from_ref(name).cast::<libc::sockaddr_in6>()) };
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            ))
        }
        // A UDP socket of either family receives from one of these; an
        // unknown peer is one quinn drops.
        _ => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
    }
}

/// Waits for the socket to take sends again; one per quinn task that
/// asks (each keeps its own waker, as tokio's `writable` does).
struct Writable {
    socket: Arc<StampedSocket>,
    waiting: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>>,
}

impl fmt::Debug for Writable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writable").finish_non_exhaustive()
    }
}

impl UdpPoller for Writable {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let socket = &this.socket;
        let waiting = this.waiting.get_or_insert_with(|| {
            let socket = Arc::clone(socket);
            // Allocated only when a send found the socket's buffer full.
            Box::pin(async move { socket.io.writable().await })
        });
        let ready = waiting.as_mut().poll(cx);
        if ready.is_ready() {
            this.waiting = None;
        }
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_found_after_its_mark_while_remembered() {
        let c = WireClock::new();
        let m = c.mark();
        assert_eq!(c.sent_after(m), None, "nothing sent yet");
        let at = c.base + Duration::from_micros(7);
        c.sent(at);
        c.sent(at + Duration::from_micros(5));
        assert_eq!(c.sent_after(m), Some(at), "the first send after the mark");
        assert_eq!(c.sent_after(m + 1), Some(at + Duration::from_micros(5)));
        for _ in 0..SENDS {
            c.sent(at);
        }
        assert_eq!(c.sent_after(m), None, "overwritten: the caller keeps its own clock");
    }

    #[test]
    fn no_stamp_reads_as_none() {
        let c = WireClock::new();
        let now = Instant::now();
        assert_eq!(c.received(now, now), None);
    }
}
