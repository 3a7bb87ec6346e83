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
    pub(super) fn feed(&mut self, i: usize, payload: &[u8], s: &mut Slot, at: Instant) -> Fed {
        let mut response: Option<Result<Feed, ParseError>> = None;
        let mut extra = false;
        let mut fed = self.records(i, payload, |plain| {
            let answered = matches!(response, Some(Ok(Feed::Done { .. })) | Some(Err(_)));
            if s.phase != Phase::Exchanging || s.early != Early::None || answered {
                extra = true;
                return Ok(());
            }
            s.first.get_or_insert(at);
            let Session::Http1(reader) = &mut s.session else {
                return Err(ErrorClass::Protocol);
            };
            response = Some(reader.feed(plain));
            Ok(())
        });
        fed.response = response;
        fed.extra |= extra;
        fed
    }

    /// Feeds a receive's bytes to slot `i`'s session and hands each piece
    /// of plaintext to `plain` (the HTTP loop's reader, the storm's one
    /// response); a failure `plain` returns fails the session's feed.
    /// `response` is left for the caller.
    pub(super) fn records(
        &mut self,
        i: usize,
        mut payload: &[u8],
        mut plain: impl FnMut(&[u8]) -> Result<(), ErrorClass>,
    ) -> Fed {
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
                if let Err(class) = plain(&self.plain[..n]) {
                    fed.failed = Some(class);
                    return fed;
                }
            }
        }
        fed.handshaken = was_handshaking && !session.is_handshaking();
        fed
    }

    /// Slot `i`'s connection carries no more TLS (a storm's hold): its
    /// session and its records' buffer go (the socket stays). Call it with
    /// no send of the slot in the kernel.
    pub(super) fn shed(&mut self, i: usize) {
        self.forget(i);
        if let Some(c) = self.conns.get_mut(i) {
            c.out = Vec::new();
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use throng_tls::rustls::pki_types::ServerName;
    use throng_tls::rustls::{ClientConnection, ServerConnection};

    use super::{Fed, Tls};
    use crate::proto::http1::{Feed, Keep};
    use crate::transport::TlsClient;
    use crate::uring::slot::{Phase, Slot};

    /// A client session of slot 0 and a server, both in memory.
    fn pair() -> (Tls, ServerConnection) {
        let files = throng_tls::generate(
            throng_tls::CertKind::Ecdsa,
            &["localhost".to_string()],
            throng_tls::Validity::Current,
        )
        .unwrap();
        let file = |name: &str| {
            let (_, text, _) = files.files.iter().find(|(n, _, _)| *n == name).unwrap();
            (name.to_string(), text.as_bytes().to_vec())
        };
        let server = throng_tls::server_config(&file("server.pem"), &file("server.key"), None).unwrap();
        let config = throng_tls::client_config(&throng_tls::ClientOptions {
            insecure: true,
            ..Default::default()
        })
        .unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = Tls::new(
            TlsClient {
                config: Arc::clone(&config),
                server_name: name.clone(),
            },
            1,
        );
        tls.conns[0].session = Some(ClientConnection::new(config, name).unwrap());
        (tls, ServerConnection::new(server).unwrap())
    }

    /// The client's records waiting, as the ring would send them.
    fn flight(tls: &mut Tls) -> Vec<u8> {
        let mut out = Vec::new();
        let session = tls.conns[0].session.as_mut().unwrap();
        while session.wants_write() {
            session.write_tls(&mut out).unwrap();
        }
        out
    }

    /// The server takes `bytes` and answers with what it then has to say.
    fn serve(server: &mut ServerConnection, mut bytes: &[u8]) -> Vec<u8> {
        while !bytes.is_empty() {
            server.read_tls(&mut bytes).unwrap();
            server.process_new_packets().unwrap();
        }
        let mut out = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut out).unwrap();
        }
        out
    }

    fn fed(tls: &mut Tls, slot: &mut Slot, bytes: &[u8]) -> Fed {
        tls.feed(0, bytes, slot, Instant::now())
    }

    #[test]
    fn records_become_a_handshake_then_a_response_for_the_reader() {
        let (mut tls, mut server) = pair();
        let mut slot = Slot::new(false, Instant::now());
        slot.phase = Phase::Connecting;
        let hello = flight(&mut tls);
        let answer = serve(&mut server, &hello);
        let f = fed(&mut tls, &mut slot, &answer);
        assert!(f.handshaken && f.failed.is_none() && f.response.is_none());

        // The request goes with the client's Finished; the response comes
        // back with one more byte after it and the server's close_notify.
        slot.phase = Phase::Exchanging;
        slot.session.reset(Keep::default());
        let session = tls.conns[0].session.as_mut().unwrap();
        std::io::Write::write_all(&mut session.writer(), b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        let request = flight(&mut tls);
        // The server's session tickets come first, then the response.
        let mut response = serve(&mut server, &request);
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut server.reader(), &mut plain).ok();
        assert!(
            plain.starts_with(b"GET / HTTP/1.1"),
            "{:?}",
            String::from_utf8_lossy(&plain)
        );
        std::io::Write::write_all(&mut server.writer(), b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokX").unwrap();
        server.send_close_notify();
        while server.wants_write() {
            server.write_tls(&mut response).unwrap();
        }
        let f = fed(&mut tls, &mut slot, &response);
        assert!(!f.handshaken && f.failed.is_none());
        assert_eq!(f.response, Some(Ok(Feed::Done { extra: 1 })));
        assert!(f.closed, "the close_notify seen");
        assert!(slot.first.is_some(), "the first byte's time taken");
    }

    #[test]
    fn bytes_that_are_not_tls_fail_the_session_in_a_tls_class() {
        let (mut tls, _server) = pair();
        let mut slot = Slot::new(false, Instant::now());
        slot.phase = Phase::Connecting;
        flight(&mut tls);
        let f = fed(&mut tls, &mut slot, b"HTTP/1.1 400 Bad Request\r\n\r\n");
        let class = f.failed.map(|c| c.name());
        assert!(class.as_deref().is_some_and(|c| c.starts_with("tls.")), "{class:?}");
        assert!(!f.handshaken && f.response.is_none());
        // A slot with no session (its connection gone) takes nothing.
        tls.forget(0);
        assert!(fed(&mut tls, &mut slot, b"late").extra);
        assert!(!tls.handshaking(0));
    }
}
