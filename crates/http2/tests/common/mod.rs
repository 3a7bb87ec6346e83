//! The blocking test driver shared by the integration tests: a
//! `std::net::TcpStream`, the state machine, one read buffer, and what
//! every stream received.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use throng_http2::hpack;
use throng_http2::{Conn, ErrorCode, Event, Settings, StreamId};

/// How long one connection's exchange may take before the test fails (not
/// a timing assertion: a bound so that a stuck exchange cannot hang).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What one stream received.
#[derive(Debug, Default)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub ended: bool,
    pub reset: Option<ErrorCode>,
}

pub struct Client {
    pub sock: TcpStream,
    pub conn: Conn,
    buf: Vec<u8>,
    pub responses: HashMap<StreamId, Response>,
    pub window_updates: usize,
    pub settings_seen: bool,
    pub goaway: Option<(StreamId, ErrorCode)>,
    pub cut_off: Vec<StreamId>,
    pub eof: bool,
    started: Instant,
}

impl Client {
    pub fn connect(addr: SocketAddr, settings: Settings) -> Client {
        let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        sock.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        sock.set_nodelay(true).unwrap();
        Client {
            sock,
            conn: Conn::new(settings),
            buf: vec![0; 64 * 1024],
            responses: HashMap::new(),
            window_updates: 0,
            settings_seen: false,
            goaway: None,
            cut_off: Vec::new(),
            eof: false,
            started: Instant::now(),
        }
    }

    pub fn flush(&mut self) {
        while !self.conn.pending_output().is_empty() {
            let n = self
                .sock
                .write(self.conn.pending_output())
                .expect("write to the server");
            assert!(n > 0, "the server closed the connection");
            self.conn.consume_output(n);
        }
    }

    /// One read from the socket, its events recorded; `eof` on a close.
    pub fn read(&mut self) {
        assert!(
            !self.eof,
            "the server closed the connection; open streams: {:?}",
            self.conn.streams().collect::<Vec<_>>()
        );
        assert!(
            self.started.elapsed() < DEADLINE,
            "the exchange did not finish within {DEADLINE:?}"
        );
        let n = self
            .sock
            .read(&mut self.buf)
            .expect("read from the server (a 10 s read timeout: the exchange stalled)");
        if n == 0 {
            self.eof = true;
            return;
        }
        let Client {
            conn,
            buf,
            responses,
            window_updates,
            settings_seen,
            goaway,
            cut_off,
            ..
        } = self;
        conn.receive(&buf[..n], &mut |e| match e {
            Event::Response {
                stream,
                status,
                headers,
            } => {
                let r = responses.entry(stream).or_default();
                r.status = status;
                r.headers = headers
                    .iter()
                    .map(|(n, v)| {
                        (
                            String::from_utf8_lossy(n).into_owned(),
                            String::from_utf8_lossy(v).into_owned(),
                        )
                    })
                    .collect();
            }
            Event::Data { stream, data } => responses.entry(stream).or_default().body.extend_from_slice(data),
            Event::StreamEnd { stream } => responses.entry(stream).or_default().ended = true,
            Event::StreamReset { stream, code, .. } => responses.entry(stream).or_default().reset = Some(code),
            Event::WindowUpdate { .. } => *window_updates += 1,
            Event::Settings(_) => *settings_seen = true,
            Event::GoAway { last_stream, code, .. } => *goaway = Some((last_stream, code)),
            Event::CutOff { stream } => cut_off.push(stream),
            _ => {}
        })
        .expect("the server's frames are valid HTTP/2");
    }

    /// Flushes and reads until `until` holds or the server closes.
    pub fn run_until(&mut self, mut until: impl FnMut(&Client) -> bool) {
        while !until(self) && !self.eof {
            self.flush();
            self.read();
        }
    }

    /// The stream got its whole response or a reset.
    pub fn done(&self, stream: StreamId) -> bool {
        self.responses
            .get(&stream)
            .is_some_and(|r| r.ended || r.reset.is_some())
    }

    /// The stream got a whole response with this status and body.
    pub fn ok(&self, stream: StreamId, status: u16, body: &[u8]) -> bool {
        self.responses
            .get(&stream)
            .is_some_and(|r| r.ended && r.reset.is_none() && r.status == status && r.body == body)
    }
}

/// A request header block (encoded once, reused).
pub fn block(method: &[u8], authority: &[u8], path: &[u8], fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    hpack::encode_request(&mut b, method, b"http", authority, path, fields);
    b
}
