//! A slot of the ring's loop: one connection and its request in flight,
//! and the user data that ties a completion to its slot, connection and
//! operation.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Instant;

use socket2::{Domain, Protocol, Socket, Type};

use throng_metrics::ErrorClass;

use crate::proto::session::Session;

/// What an operation's completion belongs to: its slot, the slot's
/// connection generation (completions of a closed connection are stale),
/// and the kind of operation.
pub(super) const OP_CONNECT: u8 = 1;
pub(super) const OP_SEND: u8 = 2;
pub(super) const OP_RECV: u8 = 3;
/// Bits of the generation kept in user data.
pub(super) const GENERATION: u32 = 0x00ff_ffff;

pub(super) fn user_data(slot: usize, generation: u32, op: u8) -> u64 {
    ((slot as u64) << 32) | (u64::from(generation & GENERATION) << 8) | u64::from(op)
}

pub(super) fn parse_user_data(ud: u64) -> (usize, u32, u8) {
    ((ud >> 32) as usize, ((ud >> 8) & 0x00ff_ffff) as u32, (ud & 0xff) as u8)
}

/// Where a slot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// No request in flight (a connection may be open).
    Idle,
    /// Connecting before the open loop's schedule starts, for no request
    /// yet (a warm connection, as the epoll open loop opens them).
    Warming,
    /// Connecting for a request that waits to be sent.
    Connecting,
    /// A request sent or queued; its response not complete.
    Exchanging,
    /// Will start no more requests.
    Done,
}

/// How a response ended while its request was still being sent (a server
/// answering or failing before it read the whole body). The exchange ends
/// when the send does, as on epoll, which reads only once it has written
/// the whole request: the next request never goes out behind the rest of
/// a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Early {
    /// Nothing yet.
    None,
    /// Complete at `at` (the kernel's stamp: `kernel`); `extra`: bytes
    /// after it or the peer's close (the connection is not reused).
    Answered { at: Instant, extra: bool, kernel: bool },
    /// Failed: the class, unless the send fails too (then its own, as
    /// epoll's write would).
    Failed(ErrorClass),
}

/// One connection and its request in flight.
pub(super) struct Slot {
    pub(super) phase: Phase,
    /// The open socket (-1: none).
    pub(super) fd: RawFd,
    /// Bumped at every close: completions of older sockets are stale.
    pub(super) generation: u32,
    pub(super) session: Session,
    /// The current connection: connect() issued, its number, the address
    /// being tried (index into the route).
    pub(super) opened: Instant,
    pub(super) conn_id: u64,
    pub(super) addr: usize,
    /// Addresses tried for this connection.
    pub(super) tries: usize,
    /// The multishot receive is armed.
    pub(super) recv_armed: bool,
    /// The request in flight: started (latency's origin), queued for
    /// submission at `t_send`, its last byte out at `t_sent`, bytes
    /// acknowledged, first response byte.
    pub(super) start: Instant,
    pub(super) t_send: Instant,
    pub(super) t_sent: Instant,
    pub(super) written: usize,
    pub(super) first: Option<Instant>,
    pub(super) keep_server: bool,
    /// A large request's send is in the kernel (its completion tracked).
    pub(super) sending: bool,
    /// What the response did while the request was still being sent.
    pub(super) early: Early,
    /// Connect or response deadline.
    pub(super) deadline: Instant,
}

impl Slot {
    /// A slot with no connection.
    pub(super) fn new(head: bool, now: Instant) -> Self {
        Slot {
            phase: Phase::Idle,
            fd: -1,
            generation: 0,
            session: Session::new(head),
            opened: now,
            conn_id: 0,
            addr: 0,
            tries: 0,
            recv_armed: false,
            start: now,
            t_send: now,
            t_sent: now,
            written: 0,
            first: None,
            keep_server: false,
            sending: false,
            early: Early::None,
            deadline: now,
        }
    }
}

impl Early {
    /// The connection is not reused after this exchange (bytes after the
    /// response, or the peer's close).
    pub(super) fn no_reuse(&mut self) {
        if let Early::Answered { extra, .. } = self {
            *extra = true;
        }
    }
}

impl Slot {
    /// The slot's queued send is submitted at `now`: the request's send
    /// time, its deadline; a small request (`len` bytes) is sent whole
    /// unless a failure's completion says otherwise, a large one's bytes
    /// are counted as its completions come.
    pub(super) fn queued_out(&mut self, now: Instant, timeout: std::time::Duration, len: usize) {
        self.t_send = now;
        self.deadline = now + timeout;
        if !self.sending {
            self.t_sent = now;
            self.written = len;
        }
    }
}

/// A blocking TCP socket for `addr` (the ring waits, not the socket), with
/// TCP_NODELAY when the request takes several segments.
pub(super) fn new_socket(addr: SocketAddr, nodelay: bool) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if nodelay {
        socket.set_tcp_nodelay(true)?;
    }
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_names_slot_generation_and_operation() {
        for (slot, generation, op) in [(0, 0, OP_CONNECT), (7, 1, OP_SEND), (1 << 24, GENERATION, OP_RECV)] {
            assert_eq!(parse_user_data(user_data(slot, generation, op)), (slot, generation, op));
        }
        // A generation past the kept bits wraps, as the comparison does.
        let (_, g, _) = parse_user_data(user_data(3, GENERATION + 2, OP_SEND));
        assert_eq!(g, (GENERATION + 2) & GENERATION);
    }
}
