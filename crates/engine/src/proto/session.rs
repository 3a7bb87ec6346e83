//! The protocol interface a loop's task holds for its requests: a
//! [`Session`] (HTTP/1.1 on the task's own connection, HTTP/2 as a stream
//! slot on the worker's pool), its state between exchanges (the response
//! being read).
//!
//! An enum, not a trait object: the one match per call compiles to a
//! direct call, and every loop stays monomorphic.

use std::cell::RefCell;
use std::pin::Pin;
use std::time::Instant;

use throng_metrics::{ErrorClass, Reply};
use tokio::time::Sleep;

use super::http1::{self, Keep, ResponseReader};
use super::http2;
use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::transport::Transport;

/// The protocol spoken on one connection, with its state between
/// exchanges (the response being read).
pub(crate) enum Session {
    /// HTTP/1.1: one request, then its response.
    Http1(ResponseReader),
    /// HTTP/2: a stream slot; it borrows a stream of one of the worker's
    /// pooled connections per request (see crate::proto::http2). A scenario VU
    /// speaking HTTP/2 or HTTP/3 reads its responses into one too (its own
    /// connection is http2::Own or crate::proto::http3::Own). Boxed: a
    /// slot is twice a response reader's size, and every HTTP/1.1
    /// connection's task holds a `Session`.
    Http2(Box<http2::Slot>),
}

impl Session {
    /// A session in the protocol the plan speaks (HTTP/1.1 today) whose
    /// requests are `HEAD` (responses without a body) or not.
    pub(crate) fn new(head_request: bool) -> Self {
        Session::Http1(ResponseReader::new(head_request))
    }

    /// A session in the protocol the worker's plan speaks: HTTP/2 stream
    /// slots when it has an HTTP/2 pool, else HTTP/1.1.
    pub(crate) fn for_worker(ctx: &Ctx) -> Self {
        match ctx.conns.h2 {
            Some(_) => Session::Http2(Box::new(http2::Slot::new(ctx.spec.head_request))),
            None => Session::new(ctx.spec.head_request),
        }
    }

    /// Makes this a session for one request at a time on a connection of
    /// its own (a scenario VU's keep-alive connection) whose requests are
    /// `HEAD` or not, keeping the one it is when it already is that.
    pub(crate) fn own_connection(&mut self, head_request: bool) {
        if !matches!(self, Session::Http1(_)) || self.head_request() != head_request {
            *self = Session::new(head_request);
        }
    }

    /// True when its requests are `HEAD`.
    pub(crate) fn head_request(&self) -> bool {
        match self {
            Session::Http1(r) => r.head_request(),
            Session::Http2(s) => s.head_request(),
        }
    }

    /// Prepares for the next response, keeping what `keep` asks for.
    #[inline]
    pub(crate) fn reset(&mut self, keep: Keep) {
        match self {
            Session::Http1(r) => r.reset(keep),
            Session::Http2(s) => s.reset(keep),
        }
    }

    /// Writes `request` (its first `written` bytes are already out, the last
    /// of them at `t_send`) and reads its response, within the deadline
    /// `sleep` was armed with; `stamped`: arrivals by the kernel's stamps.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) async fn exchange(
        &mut self,
        stream: &mut Transport,
        request: &[u8],
        written: usize,
        t_send: Instant,
        stamped: bool,
        scratch: &RefCell<Box<[u8]>>,
        sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        match self {
            Session::Http1(r) => http1::exchange(stream, request, written, t_send, stamped, r, scratch, sleep).await,
            // HTTP/2 slots exchange through http2::one_request; a
            // caller that asks here gets a protocol failure, not a hang.
            Session::Http2(_) => Err(Failed {
                class: ErrorClass::Protocol,
                written,
            }),
        }
    }

    /// [`Session::exchange`] for a response that is an event stream
    /// (`--sse`, `--llm`), read into `watch` (see `http1::exchange_stream`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn exchange_stream(
        &mut self,
        stream: &mut Transport,
        request: &[u8],
        written: usize,
        t_send: Instant,
        watch: &mut super::events::Watch,
        rec: &RefCell<throng_metrics::Recorder>,
        scratch: &RefCell<Box<[u8]>>,
        (timeout, until): (std::time::Duration, Option<Instant>),
        sleep: Pin<&mut Sleep>,
        stop: (&std::cell::Cell<bool>, Pin<&mut tokio::sync::futures::Notified<'_>>),
    ) -> Result<(Timing, http1::EndedEarly), Failed> {
        match self {
            Session::Http1(r) => {
                http1::exchange_stream(
                    stream, request, written, t_send, r, watch, rec, scratch, timeout, until, sleep, stop,
                )
                .await
            }
            // HTTP/2 slots read streams through http2::one_request (its sse.rs);
            // a caller that asks here gets a protocol failure, not a hang.
            Session::Http2(_) => Err(Failed {
                class: ErrorClass::Protocol,
                written,
            }),
        }
    }

    /// The last response's status and sizes.
    #[inline]
    pub(crate) fn reply(&self) -> Reply {
        match self {
            Session::Http1(r) => Reply {
                status: r.status,
                header_bytes: r.header_bytes,
                body_bytes: r.body_bytes,
            },
            Session::Http2(s) => s.reply(),
        }
    }

    /// Bytes read off the wire for the last response (so far, when it failed).
    #[inline]
    pub(crate) fn wire_bytes(&self) -> u64 {
        match self {
            Session::Http1(r) => r.wire_bytes,
            Session::Http2(s) => s.wire_bytes(),
        }
    }

    /// True when the connection can carry another request after the
    /// response `timing` describes (the protocol's keep-alive decision).
    #[inline]
    pub(crate) fn reusable(&self, timing: &Timing) -> bool {
        match self {
            Session::Http1(r) => !r.close && !timing.extra,
            Session::Http2(_) => true,
        }
    }

    /// The `Server` header of the last response, when asked for.
    pub(crate) fn take_server(&mut self) -> Option<String> {
        match self {
            Session::Http1(r) => r.take_server(),
            Session::Http2(s) => s.server.take(),
        }
    }

    /// The headers of the last response, when asked for.
    pub(crate) fn headers(&self) -> &[(String, String)] {
        match self {
            Session::Http1(r) => r.headers(),
            Session::Http2(s) => s.headers(),
        }
    }

    /// The body of the last response, when asked for.
    pub(crate) fn body(&self) -> &[u8] {
        match self {
            Session::Http1(r) => r.body(),
            Session::Http2(s) => s.body(),
        }
    }

    /// The last response's body was longer than what was kept.
    pub(crate) fn body_truncated(&self) -> bool {
        match self {
            Session::Http1(r) => r.body_truncated,
            Session::Http2(s) => s.body_truncated(),
        }
    }
}
