//! The io_uring instance of one worker and its ring of provided receive
//! buffers (the kernel picks a buffer per multishot receive completion).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::BufRingEntry;
use io_uring::{IoUring, squeue, types};

/// The buffer group every receive of a worker picks from.
pub(super) const BGID: u16 = 0;
/// Bytes of one provided buffer: a response of up to 16 KiB fits in one; a
/// larger one takes several completions. What a buffer costs in memory is
/// the pages the kernel wrote into: one 4 KiB page for a small response, so
/// a ring of these holds no more than one of 4 KiB would, while a large
/// body takes a quarter of the completions.
pub(super) const BUF_SIZE: usize = 16384;
/// A memory page: what a buffer holds resident after a small response.
#[cfg(test)]
const PAGE: usize = 4096;

/// Memory from `mmap` (page-aligned, as the kernel wants a buffer ring),
/// unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Self> {
        // SAFETY: an anonymous private mapping of `len` bytes; no file, no
        // fixed address; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: ptr.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping we made, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A ring of `entries` buffers of [`BUF_SIZE`] bytes handed to the kernel.
/// A buffer the kernel filled is ours until [`BufRing::give_back`] returns
/// it; [`BufRing::publish`] makes returned buffers visible to the kernel.
pub(super) struct BufRing {
    ring: Mapping,
    bufs: Mapping,
    mask: u16,
    tail: u16,
}

impl BufRing {
    /// `entries` must be a power of two, at most 32768.
    fn new(entries: u16) -> io::Result<Self> {
        let n = usize::from(entries);
        let mut r = BufRing {
            ring: Mapping::new(n * std::mem::size_of::<BufRingEntry>())?,
            bufs: Mapping::new(n * BUF_SIZE)?,
            mask: entries - 1,
            tail: 0,
        };
        for bid in 0..entries {
            r.give_back(bid);
        }
        r.publish();
        Ok(r)
    }

    fn entries(&self) -> u16 {
        self.mask.wrapping_add(1)
    }

    /// Returns buffer `bid` to the ring (seen by the kernel at the next
    /// [`BufRing::publish`]).
    pub(super) fn give_back(&mut self, bid: u16) {
        let bid = bid & self.mask;
        let slot = usize::from(self.tail & self.mask);
        // SAFETY: `slot` < entries, inside the ring mapping; the kernel only
        // reads entries between its head and our published tail, and this
        // one is past the tail.
        let e = unsafe { &mut *self.ring.ptr.cast::<BufRingEntry>().add(slot) };
        // SAFETY: `bid` < entries: inside the buffer mapping.
        let addr = unsafe { self.bufs.ptr.add(usize::from(bid) * BUF_SIZE) };
        e.set_addr(addr as u64);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers given back so far visible to the kernel.
    pub(super) fn publish(&self) {
        // SAFETY: the ring's base is its first entry, initialised in new();
        // the tail field is a u16 the kernel reads atomically.
        let tail = unsafe { BufRingEntry::tail(self.ring.ptr.cast::<BufRingEntry>()) };
        // SAFETY: as above; an aligned u16 inside the mapping.
        let tail = unsafe { &*tail.cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which the kernel filled and
    /// handed to us in a completion.
    pub(super) fn data(&self, bid: u16, len: usize) -> &[u8] {
        let bid = usize::from(bid & self.mask);
        let len = len.min(BUF_SIZE);
        // SAFETY: inside the buffer mapping; the kernel wrote these bytes
        // before posting the completion and does not touch the buffer again
        // until it is given back.
        unsafe { std::slice::from_raw_parts(self.bufs.ptr.add(bid * BUF_SIZE), len) }
    }
}

/// How often a loop wakes with nothing completed: deadlines, the run's
/// state and the live figures are looked at this often at least.
pub(super) const TICK: Duration = Duration::from_millis(10);
/// Completions a wait asks for at most before waking: fewer wake-ups, each
/// reaping more. Receive times come from the kernel's stamps, so waiting
/// for a batch does not move them.
const BATCH: usize = 16;
/// How long a wait holds out for a batch before it takes what has come.
const BATCH_WAIT_US: u32 = 50;
/// A wait holds out for a batch only when the loop's next start is at
/// least this far off.
const BATCH_HOLD: Duration = Duration::from_micros(2 * BATCH_WAIT_US as u64);

/// One worker's ring and its receive buffers.
pub(super) struct Ring {
    pub(super) ring: IoUring,
    pub(super) bufs: BufRing,
}

impl Ring {
    /// A ring for about `connections` connections: submission entries for a
    /// few operations each (at most 4096; a fuller queue is submitted
    /// early), and a receive buffer per eight connections (64 to 512).
    pub(super) fn new(connections: usize) -> io::Result<Self> {
        let (sq, entries) = sizes(connections);
        let ring = build(sq)?;
        let bufs = BufRing::new(entries)?;
        // SAFETY: the ring memory lives in `bufs`, which outlives the
        // registration: Ring drops `ring` (field order) before `bufs`.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(bufs.ring.ptr as u64, bufs.entries(), BGID, 0)?;
        }
        Ok(Ring { ring, bufs })
    }

    /// Submits what is queued and waits for completions: a batch (half of
    /// `busy`, the operations in flight, at most [`BATCH`]) held out for
    /// [`BATCH_WAIT_US`] once the first has come, never past `due` (an
    /// open loop's next start: the wait never delays it) nor a [`TICK`].
    /// `batch` turns false for good on a kernel that takes no `min_wait`
    /// (before 6.12): then one completion at a time.
    pub(super) fn wait(&mut self, busy: usize, due: Option<Duration>, batch: &mut bool) -> io::Result<()> {
        let may_batch = due.is_none_or(|d| d >= BATCH_HOLD);
        let want = if *batch && may_batch {
            (busy / 2).clamp(1, BATCH)
        } else {
            1
        };
        let limit = types::Timespec::from(due.map_or(TICK, |d| d.min(TICK)));
        let args = types::SubmitArgs::new().timespec(&limit);
        let args = if want > 1 {
            args.min_wait_usec(BATCH_WAIT_US)
        } else {
            args
        };
        match self.ring.submitter().submit_with_args(want, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && want > 1 => {
                *batch = false;
                Ok(())
            }
            Err(e) => Err(io::Error::new(e.kind(), format!("--io uring: io_uring_enter: {e}"))),
        }
    }

    /// The completions the kernel posted since the last reap, as (user
    /// data, result, flags), into `cqes` (cleared first).
    pub(super) fn reap(&mut self, cqes: &mut Vec<(u64, i32, u32)>) {
        cqes.clear();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
    }

    /// Queues `sqe`, submitting what is queued first when the queue is full.
    /// `before_submit` runs just before such an early submission (the send
    /// times of what it carries).
    pub(super) fn push(&mut self, sqe: &squeue::Entry, before_submit: impl FnOnce()) -> io::Result<()> {
        // SAFETY: every buffer an entry points at (the plan's request, the
        // socket address) outlives the operation: they are the worker's for
        // the whole run, and the ring is dropped first.
        if unsafe { self.ring.submission().push(sqe) }.is_ok() {
            return Ok(());
        }
        before_submit();
        self.ring.submit()?;
        // SAFETY: as above.
        unsafe { self.ring.submission().push(sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue still full after a submit"))
    }
}

/// The submission entries and receive buffers of a ring for `connections`
/// connections (see [`Ring::new`]).
///
/// A buffer per connection is not needed: a buffer is the kernel's only
/// between a receive and the end of the batch that reads it, and in a
/// batch only the connections whose responses came in hold one. A closed
/// loop of 1,000 to 15,000 keep-alive connections against nginx never ran
/// out of buffers (ENOBUFS, the receive armed again after the batch) with
/// 512; responses
/// larger than what the buffers hold together run out and are re-armed
/// batch by batch, at fewer completions per byte than 4 KiB buffers made.
fn sizes(connections: usize) -> (u32, u16) {
    let sq = connections.saturating_mul(2).clamp(64, 4096).next_power_of_two() as u32;
    let entries = (connections / 8).clamp(64, 512).next_power_of_two() as u16;
    (sq, entries)
}

/// The bytes a ring for `connections` connections holds resident when its
/// responses are small: its submission entries (64 bytes each), completion
/// entries (16 bytes, four per submission entry), its buffer ring's entries,
/// and one page of each receive buffer (the kernel writes a small response
/// into the buffer's first page; the rest is mapped, never touched). Fixed
/// past 4,096 connections (about 2.4 MB), so what each connection costs
/// falls beyond that. For the memory bound's test.
#[cfg(test)]
pub(super) fn footprint(connections: usize) -> usize {
    let (sq, entries) = sizes(connections);
    let (sq, entries) = (sq as usize, usize::from(entries));
    sq * std::mem::size_of::<io_uring::squeue::Entry>()
        + 4 * sq * std::mem::size_of::<io_uring::cqueue::Entry>()
        + entries * (PAGE + std::mem::size_of::<BufRingEntry>())
}

/// A ring with `sq` entries, for one thread: completions are run only when
/// this thread asks for them (DEFER_TASKRUN), the cheapest mode; where the
/// kernel refuses that, a plain ring.
fn build(sq: u32) -> io::Result<IoUring> {
    let fast = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(sq * 4)
        .build(sq);
    match fast {
        Ok(r) => Ok(r),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::builder().setup_cqsize(sq * 4).build(sq),
        Err(e) => Err(e),
    }
}

/// Why this process cannot run io_uring. Forced (`--io uring`) it is a
/// usage error saying to run with epoll instead; under `--io auto` its
/// [`ProbeError::why`] is the one line saying why epoll ran.
/// The OS errors are kept as their text, so that probes compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProbeError {
    NoIoUring,
    NotPermitted,
    Setup(String),
    MissingOps,
    MapBuffers(String),
    RegisterBuffers(String),
}

impl ProbeError {
    /// Why, without the flag and the advice: "io_uring is not permitted
    /// here (EPERM: …)".
    pub(crate) fn why(&self) -> String {
        match self {
            ProbeError::NoIoUring => "this kernel has no io_uring (ENOSYS)".to_string(),
            ProbeError::NotPermitted => "io_uring is not permitted here (EPERM: kernel.io_uring_disabled, a seccomp \
                                         filter or a container's policy)"
                .to_string(),
            ProbeError::Setup(e) => format!("cannot set up an io_uring ({e})"),
            ProbeError::MissingOps => "this kernel's io_uring lacks an operation the transport needs (multishot \
                                       receive, connect; Linux 6.0 or later has them)"
                .to_string(),
            ProbeError::MapBuffers(e) => format!("cannot map io_uring receive buffers ({e})"),
            ProbeError::RegisterBuffers(e) => {
                format!("this kernel cannot register a ring of receive buffers ({e}; Linux 5.19 or later can)")
            }
        }
    }
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--io uring: {}; {EPOLL_INSTEAD}", self.why())
    }
}

impl std::error::Error for ProbeError {}

/// What every forced [`ProbeError`] tells the user to do.
const EPOLL_INSTEAD: &str = "run with --io epoll, or leave out --io (auto runs epoll where io_uring cannot)";

/// Checks that this process may use io_uring with what the transport needs
/// (multishot receive from a provided buffer ring); says why not and what
/// to do instead.
pub(crate) fn probe() -> Result<(), ProbeError> {
    let ring = match build(8) {
        Ok(r) => r,
        Err(e) => {
            return Err(match e.raw_os_error() {
                Some(libc::ENOSYS) => ProbeError::NoIoUring,
                Some(libc::EPERM) => ProbeError::NotPermitted,
                _ => ProbeError::Setup(e.to_string()),
            });
        }
    };
    let mut probe = io_uring::Probe::new();
    if ring.submitter().register_probe(&mut probe).is_err()
        || !probe.is_supported(io_uring::opcode::RecvMulti::CODE)
        || !probe.is_supported(io_uring::opcode::Connect::CODE)
    {
        return Err(ProbeError::MissingOps);
    }
    let bufs = BufRing::new(8).map_err(|e| ProbeError::MapBuffers(e.to_string()))?;
    // SAFETY: `bufs` outlives the registration, undone below.
    let registered = unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(bufs.ring.ptr as u64, 8, BGID, 0)
    };
    if let Err(e) = registered {
        return Err(ProbeError::RegisterBuffers(e.to_string()));
    }
    let _ = ring.submitter().unregister_buf_ring(BGID);
    drop(ring);
    drop(bufs);
    Ok(())
}

/// Closes `fd` (a socket the ring no longer uses).
pub(super) fn close_fd(fd: RawFd) {
    // SAFETY: a descriptor this worker opened and closes once.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
mod tests {
    use super::ProbeError;

    /// Forced, a probe error names the flag, why, and what to do.
    #[test]
    fn probe_errors_say_what_and_what_to_do() {
        assert_eq!(
            ProbeError::NotPermitted.to_string(),
            "--io uring: io_uring is not permitted here (EPERM: kernel.io_uring_disabled, a seccomp filter or a \
             container's policy); run with --io epoll, or leave out --io (auto runs epoll where io_uring \
             cannot)"
        );
        assert_eq!(
            ProbeError::MissingOps.to_string(),
            "--io uring: this kernel's io_uring lacks an operation the transport needs (multishot receive, \
             connect; Linux 6.0 or later has them); run with --io epoll, or leave out --io (auto runs epoll \
             where io_uring cannot)"
        );
        assert_eq!(
            ProbeError::RegisterBuffers("EINVAL".into()).to_string(),
            "--io uring: this kernel cannot register a ring of receive buffers (EINVAL; Linux 5.19 or later can); \
             run with --io epoll, or leave out --io (auto runs epoll where io_uring cannot)"
        );
    }
}
