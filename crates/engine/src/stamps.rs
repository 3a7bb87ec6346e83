//! When response bytes arrived, as the kernel saw them.
//!
//! ```text
//!  packet on lo ── netif_rx: kernel stamps it (CLOCK_REALTIME) ──► socket queue
//!        … the worker wakes, polls, reads (tens of µs later under load) …
//!  recvmsg ──► data + SCM_TIMESTAMPING ──► arrival = now − (realtime now − stamp)
//! ```
//!
//! A latency taken when the worker gets round to reading includes its own
//! wake-up and bookkeeping; the kernel's receive timestamp does not. The
//! stamp is on CLOCK_REALTIME while every other instant is monotonic, so
//! only the stamp's age is used: the realtime at the read's monotonic
//! `now` (from a pair of readings of both clocks a worker reuses for
//! 100 ms), minus the stamp. An age that is negative or older than the
//! request (a clock step, or not this response's stamp) is checked against
//! a fresh pair, then given up: the read falls back to the user-space
//! clock (`now`), as does any read that brought no stamp.
//!
//! `THRONG_TIMESTAMPS=user` turns the kernel stamps off (the read's own
//! clock is used, as before they existed).

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that chooses the receive clock.
pub const ENV: &str = "THRONG_TIMESTAMPS";

/// Where response arrival times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The kernel's software receive timestamp (SO_TIMESTAMPING), with the
    /// user-space clock as the fallback.
    Kernel,
    /// The user-space monotonic clock when the read returns.
    User,
}

impl Clock {
    /// The name written into results: "kernel" or "user".
    pub fn name(self) -> &'static str {
        match self {
            Clock::Kernel => "kernel",
            Clock::User => "user",
        }
    }
}

/// The clock this process uses: `THRONG_TIMESTAMPS` (`kernel`, the
/// default, or `user`), read once. Anything else is the default.
pub fn clock() -> Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    *CLOCK.get_or_init(|| match std::env::var(ENV).as_deref() {
        Ok("user") => Clock::User,
        _ => Clock::Kernel,
    })
}

/// Holds the kernel's receive timestamping on for a run.
///
/// Linux stamps incoming packets only while some socket wants stamps, and
/// turns that on from a work queue, not in the setsockopt: the first
/// packets after the first socket asks (after every socket of a previous
/// run closed) come unstamped, for as long as a busy machine takes to run
/// the work — tens of thousands of responses were seen. A primer asks
/// first, before the run's clock starts, waits (briefly, bounded) until a
/// packet to itself comes back stamped, and keeps asking until dropped.
#[derive(Debug)]
pub(crate) struct Primer {
    _socket: std::net::UdpSocket,
}

/// How long a primer waits for the first stamped packet, at most.
const PRIME_FOR: Duration = Duration::from_millis(100);

impl Primer {
    /// A primer when the kernel clock is chosen and loopback UDP works;
    /// None otherwise (the reads then fall back, and say so).
    pub(crate) fn start() -> Option<Primer> {
        use std::os::fd::AsRawFd;
        if clock() != Clock::Kernel {
            return None;
        }
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        let fd = socket.as_raw_fd();
        if !enable(fd) {
            return None;
        }
        socket.connect(socket.local_addr().ok()?).ok()?;
        socket.set_read_timeout(Some(Duration::from_millis(5))).ok()?;
        let deadline = Instant::now() + PRIME_FOR;
        let mut buf = [0u8; 8];
        while Instant::now() < deadline {
            if socket.send(b"stamp?").is_err() {
                break;
            }
            match recv(fd, &mut buf) {
                Ok((_, Some(_))) => break,
                Ok((_, None)) => std::thread::sleep(Duration::from_millis(1)),
                // Timed out (lost?): try again until the deadline.
                Err(_) => {}
            }
        }
        Some(Primer { _socket: socket })
    }
}

/// A kernel receive timestamp (CLOCK_REALTIME).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    sec: i64,
    nsec: i64,
}

impl Stamp {
    /// SCM_TIMESTAMPING's software stamp (its first timespec); None when
    /// zero (the kernel filled only another of its three).
    pub(crate) fn from_timespec(ts: &libc::timespec) -> Option<Stamp> {
        (ts.tv_sec != 0 || ts.tv_nsec != 0).then_some(Stamp {
            sec: ts.tv_sec,
            nsec: ts.tv_nsec,
        })
    }

    /// The stamp in one word, nanoseconds since the epoch (for an atomic
    /// slot; a stamp before the epoch has no word and reads as none).
    pub(crate) fn to_nanos(self) -> u64 {
        u64::try_from(self.sec)
            .ok()
            .and_then(|s| s.checked_mul(1_000_000_000))
            .and_then(|s| s.checked_add(u64::try_from(self.nsec).ok()?))
            .unwrap_or(0)
    }

    /// The stamp of [`Stamp::to_nanos`]'s word; None for 0 (no stamp).
    pub(crate) fn from_nanos(ns: u64) -> Option<Stamp> {
        (ns != 0).then_some(Stamp {
            sec: (ns / 1_000_000_000) as i64,
            nsec: (ns % 1_000_000_000) as i64,
        })
    }
}

/// How many responses were timed by each clock (one worker's, or summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub kernel: u64,
    pub user: u64,
}

/// Asks the kernel to stamp what arrives on `fd` (software receive
/// timestamps, reported with the data). False when it refuses.
pub(crate) fn enable(fd: RawFd) -> bool {
    let flags: libc::c_uint = libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
    // SAFETY: setsockopt reads an unsigned int we own, of the size we pass.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            (&raw const flags).cast(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// Control-message room: one SCM_TIMESTAMPING (three timespecs) with its
/// header, and slack; u64s keep it aligned for `cmsghdr`.
const CONTROL_WORDS: usize = 16;

/// `recvmsg` into `buf`: bytes read, and the kernel's stamp of the last
/// segment they came in, when there is one.
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<Stamp>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at one iovec over `buf` and at `control`, both
    // alive and writable for the call, with their true lengths.
    let n = unsafe { libc::recvmsg(fd, &raw mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays inside msg_control/msg_controllen, which
    // the kernel set to what it wrote; each header is read in place and its
    // data (three timespecs for SCM_TIMESTAMPING) read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
                // ts[0] is the software stamp; [1] is deprecated, [2] hardware.
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                    stamp = Some(Stamp {
                        sec: ts.tv_sec,
                        nsec: ts.tv_nsec,
                    });
                }
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    Ok((usize::try_from(n).unwrap_or(0), stamp))
}

/// The kernel's receive stamp among control messages the kernel wrote
/// (`control`: a `msg_control` area, as an io_uring multishot `recvmsg`
/// puts it in its buffer), when there is one.
pub(crate) fn from_control(control: &[u8]) -> Option<Stamp> {
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_ptr().cast_mut().cast();
    msg.msg_controllen = control.len() as _;
    let mut stamp = None;
    // SAFETY: the CMSG_* walk stays inside `control` (CMSG_NXTHDR checks
    // each header against msg_controllen); headers and data are read
    // unaligned, never written.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            let h = std::ptr::read_unaligned(c);
            if h.cmsg_level == libc::SOL_SOCKET
                && h.cmsg_type == libc::SCM_TIMESTAMPING
                && h.cmsg_len as usize >= libc::CMSG_LEN(std::mem::size_of::<libc::timespec>() as u32) as usize
            {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                    stamp = Some(Stamp {
                        sec: ts.tv_sec,
                        nsec: ts.tv_nsec,
                    });
                }
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    stamp
}

/// CLOCK_REALTIME now.
fn realtime() -> Stamp {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_REALTIME
    // always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &raw mut ts) };
    Stamp {
        sec: ts.tv_sec,
        nsec: ts.tv_nsec,
    }
}

/// One instant on both clocks: a monotonic instant and the realtime at it.
/// NTP slews both clocks alike, so only a step moves one against the
/// other; a pair is reused for [`PAIR_FOR`], and taken afresh when a stamp
/// looks wrong against it.
#[derive(Clone, Copy, Debug)]
struct Pair {
    mono: Instant,
    real: Stamp,
}

/// How long a worker reuses its pair of clock readings.
const PAIR_FOR: Duration = Duration::from_millis(100);

/// How far apart the monotonic reads around the realtime read may be: a
/// few clock reads take well under a microsecond; more means the thread
/// was descheduled between them, and the pair would be off by as much.
const PAIR_SLACK: Duration = Duration::from_micros(2);

/// Attempts at a tight pair before giving up (the read falls back).
const PAIR_TRIES: usize = 3;

thread_local! {
    /// This worker thread's pair (each worker is one thread).
    static PAIR: std::cell::Cell<Option<Pair>> = const { std::cell::Cell::new(None) };
}

fn fresh_pair() -> Option<Pair> {
    for _ in 0..PAIR_TRIES {
        let before = Instant::now();
        let real = realtime();
        let after = Instant::now();
        let gap = after.saturating_duration_since(before);
        if gap <= PAIR_SLACK {
            let pair = Pair {
                mono: before + gap / 2,
                real,
            };
            PAIR.with(|p| p.set(Some(pair)));
            return Some(pair);
        }
    }
    None
}

/// The realtime at `now` by `pair`.
fn real_at(pair: Pair, now: Instant) -> Stamp {
    let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let delta = if now >= pair.mono {
        ns(now - pair.mono)
    } else {
        -ns(pair.mono - now)
    };
    Stamp {
        sec: pair.real.sec,
        nsec: pair.real.nsec.saturating_add(delta),
    }
}

/// The monotonic instant of `stamp`, for a read that returned at `now`
/// and whose data cannot have arrived before `floor` (the request's
/// send). None when the stamp's age is negative or reaches past `floor`
/// even against a fresh pair of clock readings (the clock stepped, or the
/// stamp is not this response's), or when no tight pair could be read:
/// the caller uses `now`.
pub(crate) fn arrival(stamp: Stamp, now: Instant, floor: Instant) -> Option<Instant> {
    let limit = now.saturating_duration_since(floor);
    let cached = PAIR
        .with(std::cell::Cell::get)
        .filter(|p| now.saturating_duration_since(p.mono) < PAIR_FOR);
    if let Some(pair) = cached
        && let Some(a) = age(stamp, real_at(pair, now), limit)
    {
        return now.checked_sub(a);
    }
    let pair = fresh_pair()?;
    age(stamp, real_at(pair, now), limit).and_then(|a| now.checked_sub(a))
}

/// `real_now − stamp`, when it lies in `0..=limit`.
fn age(stamp: Stamp, real_now: Stamp, limit: Duration) -> Option<Duration> {
    let ns = (i128::from(real_now.sec) - i128::from(stamp.sec)) * 1_000_000_000 + i128::from(real_now.nsec)
        - i128::from(stamp.nsec);
    let ns = u64::try_from(ns).ok()?;
    let age = Duration::from_nanos(ns);
    (age <= limit).then_some(age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    fn at(sec: i64, nsec: i64) -> Stamp {
        Stamp { sec, nsec }
    }

    #[test]
    fn ages_inside_the_window_are_kept_and_steps_fall_back() {
        let limit = Duration::from_millis(5);
        assert_eq!(
            age(at(10, 999_999_000), at(11, 1_000), limit),
            Some(Duration::from_micros(2))
        );
        assert_eq!(age(at(10, 5), at(10, 5), limit), Some(Duration::ZERO));
        // The clock stepped back between the arrival and the read.
        assert_eq!(age(at(11, 0), at(10, 0), limit), None);
        // Older than the request: stepped forward, or not this response's.
        assert_eq!(age(at(10, 0), at(10, 5_000_001), limit), None);
        assert_eq!(age(at(i64::MIN, 0), at(i64::MAX, 0), limit), None);
    }

    #[test]
    fn stamps_pack_into_one_word_and_back() {
        let s = at(1_764_300_000, 999_999_999);
        assert_eq!(Stamp::from_nanos(s.to_nanos()), Some(s));
        assert_eq!(Stamp::from_nanos(0), None);
        assert_eq!(at(-1, 0).to_nanos(), 0);
    }

    #[test]
    fn loopback_reads_carry_a_stamp_that_converts() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert!(enable(client.as_raw_fd()));
        // The kernel turns stamping on from a work queue: the first packets
        // may come unstamped. Bounded: 2 s at most.
        for _ in 0..400 {
            let sent = Instant::now();
            server.write_all(b"hello").unwrap();
            let mut buf = [0u8; 16];
            let (n, stamp) = recv(client.as_raw_fd(), &mut buf).unwrap();
            let now = Instant::now();
            assert_eq!(&buf[..n], b"hello");
            if let Some(stamp) = stamp {
                let arrived = arrival(stamp, now, sent).expect("a stamp between the send and the read");
                assert!(arrived >= sent && arrived <= now + PAIR_SLACK);
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("no read brought a kernel receive stamp");
    }
}
