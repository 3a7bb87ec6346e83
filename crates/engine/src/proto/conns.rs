//! A worker's connection state that outlives one task: HTTP/2's pool of
//! multiplexed connections, and the QUIC endpoint HTTP/3 connections share.
//! Made from the run's [`Wire`](super::wire::Wire) when the worker starts;
//! closed when its loops end (`crate::proto::close_all`).

use std::cell::RefCell;
use std::sync::Arc;

use super::http2;
use super::http3::socket::WireClock;
use super::wire::Wire;

/// One worker's shared connection state (in `crate::ctx::Ctx::conns`).
pub(crate) struct Conns {
    /// An HTTP/2 plan's connections (None: every other protocol).
    pub(crate) h2: Option<http2::Pool>,
    /// The worker's QUIC endpoint: one UDP socket carries all its HTTP/3
    /// connections (made at the first one; a scenario's VUs use it too),
    /// with its socket's clock (when datagrams arrived, sends went out).
    pub(crate) quic: RefCell<Option<(quinn::Endpoint, Arc<WireClock>)>>,
}

impl Conns {
    /// The state a worker speaking `wire` needs; `pick` shares HTTP/2's
    /// connections among the origins of several targets.
    pub(crate) fn new(wire: &Wire, pick: Option<&crate::targets::Pick>) -> Conns {
        let h2 = match wire {
            Wire::Http2(spec) => Some(http2::Pool::new((**spec).clone(), pick)),
            _ => None,
        };
        Conns {
            h2,
            quic: RefCell::new(None),
        }
    }

    /// None yet (a worker on io_uring: HTTP/1.1 only).
    pub(crate) fn none() -> Conns {
        Conns {
            h2: None,
            quic: RefCell::new(None),
        }
    }
}
