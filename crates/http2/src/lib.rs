//! throng's own HTTP/2 client protocol, I/O-free in the manner of rustls:
//! bytes in, events out, bytes to send. No sockets, runtime, clock, tasks
//! or locks; a driver (the engine's worker, or a plain blocking loop) owns
//! the socket and the timeouts.
//!
//! ```text
//!  socket read ──► worker's shared read buffer ──► Conn::receive(&buf[..n], on_event)
//!                                                     │ frame::parse (in place; a cut frame is
//!                                                     │   kept, allocated only when one occurs)
//!                                                     │ hpack::Decoder (fields → one reused list)
//!                                                     ▼
//!                           on_event(Event::Response / Data / Trailers / StreamEnd /
//!                                    StreamReset / GoAway / CutOff / Settings / PingAck /
//!                                    WindowUpdate)
//!  hpack::encode_request ─► header block, encoded once, reused for every request
//!  Conn::start_request(&block) / send_data / reset_stream / ping / go_away
//!                                                     │ frames (and automatic SETTINGS and PING
//!                                                     ▼ acks, WINDOW_UPDATE credit)
//!  socket write ◄── Conn::pending_output() ─► Conn::consume_output(n)
//! ```
//!
//! Why it exists: the `h2` crate gives every connection fixed buffers (16 KB
//! to write, 8 KB to read, 4 KB of HPACK decoding, an encoder table) plus a
//! shared stream store and wakers — about 30 KB before any request. Here an
//! idle connection owns its state (a few hundred bytes), the decoder's
//! dynamic table (bounded by our SETTINGS_HEADER_TABLE_SIZE) and nothing
//! else once [`Conn::shrink`] has run.
//!
//! # How a driver uses it
//!
//! 1. [`Conn::new`] with [`Settings`]; write [`Conn::pending_output`] (the
//!    preface and our SETTINGS) and call [`Conn::consume_output`] with what
//!    the socket took.
//! 2. Encode each distinct request head once with
//!    [`hpack::encode_request`]; [`Conn::start_request`] opens a stream with
//!    it while [`Conn::can_start_request`] (the server's
//!    SETTINGS_MAX_CONCURRENT_STREAMS, ours, GOAWAY). A body goes through
//!    [`Conn::send_data`], which sends what the windows allow; the rest waits
//!    for [`Event::WindowUpdate`].
//! 3. Read into any buffer and pass the bytes to [`Conn::receive`]; it
//!    takes all of them and calls back with events. Delivered DATA counts as
//!    consumed: credit goes back by itself, so downloads never stall.
//! 4. After every receive or send, write the pending output. A
//!    [`ConnError`] closes the connection; its GOAWAY is in the pending output.
//! 5. Timeouts are the driver's: a response that does not come is
//!    [`Conn::reset_stream`] with `CANCEL`; a SETTINGS acknowledgement that
//!    does not come ([`Event::SettingsAcked`]) is a dead connection.
//! 6. When no stream is open, [`Conn::shrink`] releases the buffers.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use throng_http2::{hpack, Conn, Event, Settings};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut sock = std::net::TcpStream::connect("127.0.0.1:8080")?;
//! sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
//! let mut conn = Conn::new(Settings::default());
//! let mut head = Vec::new();
//! hpack::encode_request(&mut head, b"GET", b"http", b"127.0.0.1:8080", b"/", &[]);
//! let stream = conn.start_request(&head, true)?;
//! let mut buf = vec![0; 16 * 1024];
//! let mut done = false;
//! while !done {
//!     let n = sock.write(conn.pending_output())?;
//!     conn.consume_output(n);
//!     let n = sock.read(&mut buf)?;
//!     if n == 0 {
//!         break;
//!     }
//!     conn.receive(&buf[..n], &mut |e| match e {
//!         Event::Response { status, .. } => println!("{stream}: {status}"),
//!         Event::StreamEnd { .. } | Event::StreamReset { .. } => done = true,
//!         _ => {}
//!     })?;
//! }
//! # Ok(())
//! # }
//! ```

pub mod conn;
pub mod error;
pub mod frame;
pub mod hpack;

pub use conn::{Conn, Event, Headers, PeerSettings, Settings, StreamId};
pub use error::{ConnError, ErrorCode, FrameError, HpackError, SendError};
