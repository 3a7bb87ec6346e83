//! Held storm connections without a task each.
//!
//! A storm connection that only waits for its hold to end (plain TCP, TLS
//! once its session is shed, a line protocol that answers nothing) needs
//! no task and no registration with tokio: its socket goes into this
//! worker's [`Holder`], a compact record (descriptor, open time, source)
//! in a slab, its deadline in a heap, the socket in the holder's own epoll
//! set. One task watches that epoll descriptor (registered with tokio
//! through `AsyncFd`) and the earliest deadline:
//!
//! ```text
//!  connection task ──hold()──► slab[i] = {fd, opened, source}, heap += (deadline, i)
//!                                  │  epoll: EPOLLIN | EPOLLRDHUP, edge-triggered
//!  holder task: ┬─ epoll ready ──► read and drop; EOF, RST, HUP: closed by the server
//!               │                    └─ reconnect policy: a task reconnects (as before)
//!               ├─ deadline ─────► closed at hold end
//!               └─ stop ─────────► every held socket closed
//! ```
//!
//! A protocol that talks while held and whose talk the holder can do on the
//! socket (MQTT: [`HeldTalk`]) is held here too, over TLS and WebSocket as
//! well (their layers, `crate::transport::held`, in the slot: the rustls
//! session, the frames' masks): its slot keeps the protocol's few bytes of
//! state, the heap its next keep-alive
//! tick (or its deadline, whichever comes first), and its bytes are read
//! and understood as they come, its packets written with a non-blocking
//! send:
//!
//! ```text
//!  holder task: ┬─ epoll ready ──► read, HeldTalk::read (a PINGRESP timed, a
//!               │                    DISCONNECT counted; the session over:
//!               │                    closed by the server, as above)
//!               ├─ tick ─────────► HeldTalk::tick (a PINGREQ; heap += next tick)
//!               └─ deadline, stop ► HeldTalk::goodbye (DISCONNECT), closed
//! ```
//!
//! Every outcome is recorded as the task-per-connection hold records it
//! (`closed_by_peer`, a `connection` sample at the close, the slot freed),
//! so reports cannot tell the two apart; only memory does: ~100 bytes per
//! held connection here instead of a task (~1 KB) and tokio's registration.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::Shared;
use crate::conn::Conn;
use crate::ctx::{Ctx, TaskGuard};
use crate::proto::link::{Flow, HeldState, HeldTalk};
use crate::transport::Transport;
use crate::transport::held::{self as layered, Layers, send_now};

/// Events taken from the epoll set per system call.
const BATCH: usize = 256;
/// Reads of whatever a server sends on a held socket, per readiness: past
/// them the rest stays in the kernel's receive buffer (bounded by it) until
/// the socket closes; a socket whose bytes are understood ([`HeldTalk::listens`])
/// is read again on the holder's next turn.
const READS_PER_EVENT: usize = 4;

/// A held connection's number when its task had none.
const NO_NUMBER: u64 = u64::MAX;

/// One held connection: what its close must record, and where a
/// reconnect starts from.
struct Held {
    fd: OwnedFd,
    opened: Instant,
    /// The hold's end: a reconnect holds until then.
    deadline: Instant,
    source: Option<IpAddr>,
    /// The storm connection's number (see `crate::numbered`), kept through
    /// a reconnect; [`NO_NUMBER`] when it has none.
    number: u64,
    /// What the protocol keeps while it talks (empty when quiet).
    state: HeldState,
    /// TLS and WebSocket framing over the socket (None: plain TCP).
    layers: Option<Box<Layers>>,
}

/// A slab entry; `era` tells a live deadline or event from a stale one.
struct Slot {
    era: u32,
    held: Option<Held>,
}

/// This worker's held connections (see the module's documentation).
pub(super) struct Holder {
    epoll: AsyncFd<OwnedFd>,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<u32>>,
    deadlines: RefCell<BinaryHeap<Reverse<(Instant, u32, u32)>>>,
    /// The watching task runs (it ends when nothing is held).
    running: Cell<bool>,
    /// What every held connection of this worker says while held.
    talk: HeldTalk,
}

impl Holder {
    /// A holder with its own epoll set, or None when the system refuses one
    /// (connections are then held by their tasks, as before).
    pub(super) fn new(talk: HeldTalk) -> Option<Holder> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an OwnedFd's descriptor stays open, and the same, as long
        // as the AsyncFd that owns it.
        let epoll = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()?;
        Some(Holder {
            epoll,
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            deadlines: RefCell::new(BinaryHeap::new()),
            running: Cell::new(false),
            talk,
        })
    }

    /// Takes `conn` until `deadline`, or gives it back when it is not a
    /// plain socket or the epoll set refuses it (the caller holds it then).
    pub(super) fn hold(
        ctx: &Rc<Ctx>,
        shared: &Rc<Shared>,
        conn: Conn,
        deadline: Instant,
        source: Option<IpAddr>,
    ) -> Result<(), Conn> {
        let Some(holder) = shared.holder.as_ref() else {
            return Err(conn);
        };
        let Conn {
            stream,
            opened,
            id,
            unreported,
        } = conn;
        // A quiet connection's TLS was shed: only a talking one has layers.
        let parts = match stream {
            Transport::Plain(_) => layered::unwrap(stream),
            stream if holder.talk.listens() => layered::unwrap(stream),
            stream => Err(stream),
        };
        let (tcp, layers, pending) = match parts {
            Ok(parts) => parts,
            Err(stream) => {
                return Err(Conn {
                    stream,
                    opened,
                    id,
                    unreported,
                });
            }
        };
        let (index, era) = holder.vacant();
        if let Err(e) = epoll_add(holder.epoll.as_raw_fd(), tcp.as_raw_fd(), token(index, era)) {
            holder.free.borrow_mut().push(index);
            // Taken apart, a layered stream cannot be given back: it ends
            // as a hold that could not go on (the system's epoll refusing
            // a descriptor is all but unheard of).
            if layers.is_some() {
                drop((tcp, e));
                let now = Instant::now();
                ctx.rec.borrow_mut().connection_closed(now, now - opened);
                super::release(shared);
                return Ok(());
            }
            return Err(Conn {
                stream: Transport::Plain(tcp),
                opened,
                id,
                unreported,
            });
        }
        // Leaves tokio's epoll set; the descriptor stays open. Deregistering
        // fails only if tokio's epoll_ctl(DEL) does, and then the socket is
        // closed by the error's drop: counted as closed now, as a hold that
        // could not go on.
        let fd: OwnedFd = match tcp.into_std() {
            Ok(s) => s.into(),
            Err(_) => {
                holder.free.borrow_mut().push(index);
                let now = Instant::now();
                ctx.rec.borrow_mut().connection_closed(now, now - opened);
                super::release(shared);
                return Ok(());
            }
        };
        {
            let mut slots = holder.slots.borrow_mut();
            let slot = &mut slots[index as usize];
            slot.held = Some(Held {
                fd,
                opened,
                deadline,
                source,
                number: crate::numbered::current().unwrap_or(NO_NUMBER),
                state: HeldState::default(),
                layers,
            });
        }
        // One heap entry per held connection: its next tick, or its
        // deadline when that comes first.
        let first = holder
            .talk
            .period()
            .map_or(deadline, |p| (Instant::now() + p).min(deadline));
        holder.deadlines.borrow_mut().push(Reverse((first, index, era)));
        if !holder.running.replace(true) {
            tokio::task::spawn_local(watch(ctx.task(), Rc::clone(shared)));
        }
        // What the layers took off the socket before the hand-over (bytes
        // of a WebSocket message, records rustls read ahead) is read now:
        // the socket may never be readable again for it.
        if has_layers(holder, index, era) {
            let flow = holder.with_held(index, era, |held| {
                let fd = held.fd.as_raw_fd();
                let mut rec = ctx.rec.borrow_mut();
                let open = holder
                    .talk
                    .read(&mut held.state, &pending, held.opened, &mut rec, &mut |b| {
                        send_via(&mut held.layers, fd, b)
                    })
                    == Flow::Open;
                drop(rec);
                if open {
                    take_in(ctx, holder.talk, held, &[])
                } else {
                    Flow::Closed
                }
            });
            if flow == Some(Flow::Closed)
                && let Some(held) = holder.take(index, era)
            {
                closed_by_server(ctx, shared, held);
            }
        }
        Ok(())
    }

    /// A free slot's index and its generation (the slot stays vacant until
    /// filled).
    fn vacant(&self) -> (u32, u32) {
        let mut slots = self.slots.borrow_mut();
        if let Some(i) = self.free.borrow_mut().pop() {
            let slot = &mut slots[i as usize];
            slot.era = slot.era.wrapping_add(1);
            return (i, slot.era);
        }
        // A worker holds at most its descriptor limit (far below 2^32).
        let i = u32::try_from(slots.len()).unwrap_or(u32::MAX);
        slots.push(Slot { era: 0, held: None });
        (i, 0)
    }

    /// Takes the connection out of slot `index` if it is still the one of
    /// generation `era`.
    fn take(&self, index: u32, era: u32) -> Option<Held> {
        let mut slots = self.slots.borrow_mut();
        let slot = slots.get_mut(index as usize)?;
        if slot.era != era {
            return None;
        }
        let held = slot.held.take()?;
        self.free.borrow_mut().push(index);
        Some(held)
    }

    /// The descriptor of slot `index` at generation `era`, if still held.
    fn fd(&self, index: u32, era: u32) -> Option<RawFd> {
        self.with_held(index, era, |h| h.fd.as_raw_fd())
    }

    /// `f` on the connection in slot `index`, if still the one of
    /// generation `era`.
    fn with_held<R>(&self, index: u32, era: u32, f: impl FnOnce(&mut Held) -> R) -> Option<R> {
        let mut slots = self.slots.borrow_mut();
        let slot = slots.get_mut(index as usize)?;
        if slot.era != era {
            return None;
        }
        slot.held.as_mut().map(f)
    }

    /// The earliest deadline still held (stale entries dropped on the way).
    fn next_deadline(&self) -> Option<Instant> {
        let mut heap = self.deadlines.borrow_mut();
        while let Some(&Reverse((at, index, era))) = heap.peek() {
            if self.fd(index, era).is_some() {
                return Some(at);
            }
            heap.pop();
        }
        None
    }
}

fn token(index: u32, era: u32) -> u64 {
    (u64::from(era) << 32) | u64::from(index)
}

fn untoken(t: u64) -> (u32, u32) {
    // Truncation intended: the token packs two u32.
    (t as u32, (t >> 32) as u32)
}

fn epoll_add(epoll: RawFd, fd: RawFd, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
        u64: token,
    };
    // SAFETY: both descriptors are open; the kernel copies `ev`.
    let rc = unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &raw mut ev) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What one non-blocking read found.
enum Recv {
    Bytes(usize),
    /// Nothing more for now.
    Drained,
    /// The end of the stream, or an error.
    Closed,
}

fn recv(fd: RawFd, buf: &mut [u8]) -> Recv {
    loop {
        // SAFETY: `buf` is ours and writable for its length; `fd` is open.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        match usize::try_from(n) {
            Ok(0) => return Recv::Closed,
            Ok(n) => return Recv::Bytes(n),
            Err(_) => match io::Error::last_os_error().kind() {
                io::ErrorKind::WouldBlock => return Recv::Drained,
                io::ErrorKind::Interrupted => {}
                _ => return Recv::Closed,
            },
        }
    }
}

/// Reads and drops what the server sent: true when the socket is closed
/// (EOF, an error), false when it is drained or the reads ran out.
fn drain(fd: RawFd, buf: &mut [u8]) -> bool {
    for _ in 0..READS_PER_EVENT {
        match recv(fd, buf) {
            Recv::Bytes(_) => {}
            Recv::Drained => return false,
            Recv::Closed => return true,
        }
    }
    false
}

/// True when the connection in slot `index` has layers (TLS, WebSocket).
fn has_layers(holder: &Holder, index: u32, era: u32) -> bool {
    holder.with_held(index, era, |h| h.layers.is_some()) == Some(true)
}

/// Sends a packet through the connection's layers, whole now or not at
/// all (see [`send_now`]).
fn send_via(layers: &mut Option<Box<Layers>>, fd: RawFd, bytes: &[u8]) -> bool {
    match layers {
        Some(l) => l.send(fd, bytes),
        None => send_now(fd, bytes),
    }
}

/// Bytes read off a held connection that talks, through its layers to
/// the protocol ([`HeldTalk::read`]).
fn take_in(ctx: &Ctx, talk: HeldTalk, held: &mut Held, bytes: &[u8]) -> Flow {
    let fd = held.fd.as_raw_fd();
    let (opened, state) = (held.opened, &mut held.state);
    let mut rec = ctx.rec.borrow_mut();
    let Some(layers) = held.layers.as_deref_mut() else {
        return talk.read(state, bytes, opened, &mut rec, &mut |b| send_now(fd, b));
    };
    let open = layers.read(fd, bytes, &mut |plain, send| {
        talk.read(state, plain, opened, &mut rec, &mut |b| send(b)) == Flow::Open
    });
    if open { Flow::Open } else { Flow::Closed }
}

/// Reads and understands what the server sent on a held connection that
/// talks (see [`HeldTalk::read`]); a session the server ended is closed as
/// the server's close. True when the reads ran out before the socket was
/// drained: read it again on the next turn.
fn listen(ctx: &Rc<Ctx>, shared: &Rc<Shared>, holder: &Holder, index: u32, era: u32) -> bool {
    let mut more = false;
    let talk = holder.talk;
    let flow = holder.with_held(index, era, |held| {
        let fd = held.fd.as_raw_fd();
        let mut buf = ctx.scratch.borrow_mut();
        for _ in 0..READS_PER_EVENT {
            match recv(fd, &mut buf[..]) {
                Recv::Bytes(n) => {
                    if take_in(ctx, talk, held, &buf[..n]) == Flow::Closed {
                        return Flow::Closed;
                    }
                }
                Recv::Drained => return Flow::Open,
                Recv::Closed => return Flow::Closed,
            }
        }
        more = true;
        Flow::Open
    });
    if flow == Some(Flow::Closed)
        && let Some(held) = holder.take(index, era)
    {
        closed_by_server(ctx, shared, held);
        return false;
    }
    more
}

/// The heap entry `(at, index, era)` came due: the hold's end (the
/// connection closed, its goodbye sent), or a keep-alive tick (the next
/// one scheduled; the session over when the protocol says so).
fn due(ctx: &Rc<Ctx>, shared: &Rc<Shared>, holder: &Holder, at: Instant, index: u32, era: u32) {
    let talk = holder.talk;
    let ticked = holder.with_held(index, era, |held| {
        let period = talk.period().filter(|_| at < held.deadline)?;
        let fd = held.fd.as_raw_fd();
        let now = Instant::now();
        let layers = &mut held.layers;
        let flow = talk.tick(&mut held.state, held.opened, now, &mut ctx.rec.borrow_mut(), &mut |b| {
            send_via(layers, fd, b)
        });
        if flow == Flow::Open {
            // Missed ticks are not made up (as tokio's `Delay`).
            let next = if now >= at + period { now + period } else { at + period };
            holder
                .deadlines
                .borrow_mut()
                .push(Reverse((next.min(held.deadline), index, era)));
        }
        Some(flow)
    });
    match ticked {
        None => {}
        Some(Some(Flow::Open)) => {}
        Some(Some(Flow::Closed)) => {
            if let Some(held) = holder.take(index, era) {
                closed_by_server(ctx, shared, held);
            }
        }
        Some(None) => {
            if let Some(held) = holder.take(index, era) {
                close(ctx, shared, held, talk.goodbye());
            }
        }
    }
}

/// The holder's task: watches every held socket and the earliest
/// deadline, until nothing is held.
async fn watch(guard: TaskGuard, shared: Rc<Shared>) {
    let ctx = &guard.0;
    let Some(holder) = shared.holder.as_ref() else { return };
    let mut events: Vec<libc::epoll_event> = vec![libc::epoll_event { events: 0, u64: 0 }; BATCH];
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    // Talking connections whose reads ran out before they were drained.
    let mut again: Vec<(u32, u32)> = Vec::new();
    loop {
        let stop = ctx.stop_notify.notified();
        let mut stop = pin!(stop);
        stop.as_mut().enable();
        if ctx.stopping.get() {
            close_all(ctx, &shared, holder);
        }
        let Some(next) = holder.next_deadline() else {
            // Nothing held: the next hold starts the task again.
            holder.running.set(false);
            return;
        };
        sleep.as_mut().reset(next.into());
        tokio::select! {
            // Deadlines before readiness: a flood of bytes from the
            // servers cannot keep the holds from ending.
            biased;
            () = stop => {}
            () = sleep.as_mut() => {
                let now = Instant::now();
                loop {
                    let top = holder.deadlines.borrow().peek().map(|r| r.0);
                    let Some((at, index, era)) = top else { break };
                    if at > now {
                        break;
                    }
                    holder.deadlines.borrow_mut().pop();
                    due(ctx, &shared, holder, at, index, era);
                }
            }
            ready = holder.epoll.readable() => {
                let Ok(mut ready) = ready else {
                    // The reactor is gone (the worker is ending).
                    close_all(ctx, &shared, holder);
                    continue;
                };
                let n = wait(holder.epoll.as_raw_fd(), &mut events);
                if n < events.len() {
                    ready.clear_ready();
                }
                let before = std::mem::take(&mut again);
                for ev in &events[..n] {
                    let (flags, t) = (ev.events, ev.u64);
                    let (index, era) = untoken(t);
                    if holder.talk.listens() {
                        // A hang-up's flags come with the bytes sent
                        // before it (a DISCONNECT): read to the end.
                        if listen(ctx, &shared, holder, index, era) {
                            again.push((index, era));
                        }
                        continue;
                    }
                    let Some(fd) = holder.fd(index, era) else { continue };
                    let hup = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
                    let closed = flags & hup != 0 || drain(fd, &mut ctx.scratch.borrow_mut()[..]);
                    if closed && let Some(held) = holder.take(index, era) {
                        closed_by_server(ctx, &shared, held);
                    }
                }
                for (index, era) in before {
                    if listen(ctx, &shared, holder, index, era) {
                        again.push((index, era));
                    }
                }
                // Many closes at once: let the reconnects and the
                // dispatcher run between batches.
                tokio::task::coop::consume_budget().await;
            }
            () = std::future::ready(()), if !again.is_empty() => {
                for (index, era) in std::mem::take(&mut again) {
                    if listen(ctx, &shared, holder, index, era) {
                        again.push((index, era));
                    }
                }
                tokio::task::coop::consume_budget().await;
            }
        }
    }
}

/// Takes up to `events.len()` ready events without waiting.
fn wait(epoll: RawFd, events: &mut [libc::epoll_event]) -> usize {
    let max = i32::try_from(events.len()).unwrap_or(i32::MAX);
    // SAFETY: `events` is ours, writable for `max` entries.
    let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), max, 0) };
    usize::try_from(n).unwrap_or(0)
}

/// Closes a held connection (hold end, stop) after its `goodbye` (sent if
/// the socket takes it now): its `connection` sample, its slot freed.
fn close(ctx: &Ctx, shared: &Shared, mut held: Held, goodbye: &[u8]) {
    if !goodbye.is_empty() {
        send_via(&mut held.layers, held.fd.as_raw_fd(), goodbye);
    }
    drop(held.fd);
    let now = Instant::now();
    ctx.rec.borrow_mut().connection_closed(now, now - held.opened);
    super::release(shared);
}

/// The server closed a held connection: counted as the task's hold counts
/// it; with a reconnect policy a task takes over, as it would have.
fn closed_by_server(ctx: &Rc<Ctx>, shared: &Rc<Shared>, held: Held) {
    let dropped = Instant::now();
    ctx.rec.borrow_mut().closed_by_peer(dropped);
    drop(held.fd);
    ctx.rec.borrow_mut().connection_closed(dropped, dropped - held.opened);
    if shared.reconnect.is_some() {
        let resume = super::resume(ctx.task(), Rc::clone(shared), held.deadline, held.source, dropped);
        // The reconnect is the same connection: same number (MQTT's client
        // identifier names it).
        if held.number == NO_NUMBER {
            tokio::task::spawn_local(resume);
        } else {
            tokio::task::spawn_local(crate::numbered::scope(held.number, resume));
        }
    } else {
        super::release(shared);
    }
}

/// Stop: every held connection closed now (counted as a hold cut short by
/// the stop is today).
fn close_all(ctx: &Ctx, shared: &Shared, holder: &Holder) {
    let all: Vec<(u32, u32)> = holder
        .deadlines
        .borrow_mut()
        .drain()
        .map(|Reverse((_, i, g))| (i, g))
        .collect();
    for (index, era) in all {
        if let Some(held) = holder.take(index, era) {
            close(ctx, shared, held, holder.talk.goodbye());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one held connection costs here, beside the kernel's socket:
    /// its slab entry and its heap entry (the point of the holder).
    #[test]
    fn a_held_connection_is_tens_of_bytes() {
        let each = std::mem::size_of::<Slot>() + std::mem::size_of::<Reverse<(Instant, u32, u32)>>();
        // 120 on 64-bit Linux: 88 before MQTT's 16 bytes of state and the
        // connection's number, 112 before the layers' pointer (TLS,
        // WebSocket; null for plain TCP).
        assert!(each <= 120, "a held connection costs {each} bytes");
    }

    #[test]
    fn tokens_carry_index_and_era() {
        assert_eq!(untoken(token(7, u32::MAX)), (7, u32::MAX));
        assert_eq!(untoken(token(u32::MAX, 0)), (u32::MAX, 0));
    }
}
