//! TLS on the ring: rustls is I/O-free, so its records go through the
//! ring's own operations.
//!
//! ```text
//!  connect done ─► ClientHello ─► send (tracked) ─┐
//!  multishot recvmsg ─► read_tls ─► process_new_packets ─┬─► next flight ─► send
//!                                                        ├─► handshake done: Finished + request in one send
//!                                                        └─► plaintext ─► the HTTP/1.1 response reader
//! ```
//!
//! Each slot of a TLS plan has a session in a table beside the slots (on
//! the heap, indexed like them; plain plans have none, so their slots do
//! not grow) and a buffer of records on their way out, kept
//! until the send that carries them completes: a TLS send is always
//! tracked. The `tls` phase runs from the ClientHello (the TCP connect's
//! completion) to the handshake's end, as on epoll; the connection counts
//! as established only then, and a handshake that fails fails the
//! connection and its request with the class epoll gives (`tls.<alert or
//! cause>`, `timeout.tls`, `tls.handshake_eof`).

use std::io::Read;
use std::time::Instant;

use throng_metrics::ErrorClass;
use throng_tls::rustls::ClientConnection;

use super::slot::{Early, Phase, Slot};
use crate::proto::http1::{Feed, ParseError};
use crate::proto::session::Session;
use crate::transport::TlsClient;

/// Plaintext taken out of a session at a time (a record's most).
const PLAIN: usize = 16 * 1024;

/// A worker's TLS on its ring: the client the epoll path would use (the
/// worker's ClientConfig: resumption, ALPN, client certificate, -k, SNI),
/// a session per slot, and room for plaintext on its way to the reader.
pub(super) struct Tls {
    pub(super) client: TlsClient,
    pub(super) conns: Vec<TlsConn>,
    plain: Box<[u8]>,
}

/// One slot's TLS: its session while a connection is open, and the records
/// the kernel is sending.
#[derive(Default)]
pub(super) struct TlsConn {
    pub(super) session: Option<ClientConnection>,
    /// Records on their way out; `off` of them the kernel took.
    pub(super) out: Vec<u8>,
    pub(super) off: usize,
    /// TCP established, the ClientHello queued: the `tls` phase's start.
    pub(super) hello: Option<Instant>,
    /// The request's bytes are in `out` or the session, not all sent yet.
    pub(super) request_out: bool,
    /// The request took more than one send (its last byte left at the
    /// completion of the last, not at the submission of the first).
    pub(super) spilled: bool,
    /// The peer's close_notify came.
    pub(super) closed: bool,
}

/// What a receive's records did.
#[derive(Default)]
pub(super) struct Fed {
    /// The session failed (an alert, a certificate, a bad record).
    pub(super) failed: Option<ErrorClass>,
    /// The handshake ended with these records.
    pub(super) handshaken: bool,
    /// What the response reader said of the plaintext given to it.
    pub(super) response: Option<Result<Feed, ParseError>>,
    /// Plaintext beyond the response, or with no request in flight.
    pub(super) extra: bool,
    /// The peer's close_notify.
    pub(super) closed: bool,
}

impl Tls {
    pub(super) fn new(client: TlsClient, slots: usize) -> Self {
        let mut t = Tls {
            client,
            conns: Vec::new(),
            plain: vec![0; PLAIN].into_boxed_slice(),
        };
        t.grow(slots);
        t
    }

    /// One session holder per slot, up to `slots`.
    pub(super) fn grow(&mut self, slots: usize) {
        while self.conns.len() < slots {
            self.conns.push(TlsConn::default());
        }
    }

    /// Slot `i`'s connection is gone: its session with it. The buffer's
    /// room stays for the next one. A send of it still in the kernel fails
    /// on the socket shut down before any byte is read (crate::uring's
    /// drop_socket shuts it down first).
    pub(super) fn forget(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i) {
            c.session = None;
            c.out.clear();
            c.off = 0;
            c.hello = None;
            c.request_out = false;
            c.spilled = false;
            c.closed = false;
        }
    }

    /// Slot `i` is in its handshake (TCP up, TLS not yet).
    pub(super) fn handshaking(&self, i: usize) -> bool {
        self.conns.get(i).is_some_and(|c| c.hello.is_some())
    }

    /// A new request on slot `i`: its bytes are not in the session yet.
    pub(super) fn next_request(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i) {
            c.request_out = false;
            c.spilled = false;
        }
    }

    /// Feeds a receive's bytes to slot `i`'s session; plaintext goes to the
    /// slot's response reader while a request is in flight (its first byte
    /// at `at`).
    pub(super) fn feed(&mut self, i: usize, mut payload: &[u8], s: &mut Slot, at: Instant) -> Fed {
        let mut fed = Fed::default();
        let Some(c) = self.conns.get_mut(i) else {
            fed.failed = Some(ErrorClass::Protocol);
            return fed;
        };
        let Some(session) = c.session.as_mut() else {
            fed.extra = true;
            return fed;
        };
        let was_handshaking = session.is_handshaking();
        while !payload.is_empty() {
            if session.read_tls(&mut payload).is_err() {
                fed.failed = Some(ErrorClass::Protocol);
                return fed;
            }
            let state = match session.process_new_packets() {
                Ok(state) => state,
                Err(e) => {
                    fed.failed = Some(ErrorClass::Tls(throng_tls::failure_class(&e)));
                    return fed;
                }
            };
            if state.peer_has_closed() {
                c.closed = true;
                fed.closed = true;
            }
            let mut left = state.plaintext_bytes_to_read();
            while left > 0 {
                let n = match session.reader().read(&mut self.plain) {
                    Ok(n) if n > 0 => n,
                    _ => break,
                };
                left = left.saturating_sub(n);
                let answered = matches!(fed.response, Some(Ok(Feed::Done { .. })) | Some(Err(_)));
                if s.phase != Phase::Exchanging || s.early != Early::None || answered {
                    fed.extra = true;
                    continue;
                }
                s.first.get_or_insert(at);
                let Session::Http1(reader) = &mut s.session else {
                    fed.failed = Some(ErrorClass::Protocol);
                    return fed;
                };
                fed.response = Some(reader.feed(&self.plain[..n]));
            }
        }
        fed.handshaken = was_handshaking && !session.is_handshaking();
        fed
    }

    /// The records of a failed session's alert, to tell the peer why (best
    /// effort, as epoll does).
    pub(super) fn alert(&mut self, i: usize) -> Vec<u8> {
        let mut alert = Vec::new();
        if let Some(session) = self.conns.get_mut(i).and_then(|c| c.session.as_mut()) {
            while session.wants_write() {
                if !matches!(session.write_tls(&mut alert), Ok(n) if n > 0) {
                    break;
                }
            }
        }
        alert
    }
}
