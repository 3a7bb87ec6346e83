//! throng's own HTTP/2 client protocol, I/O-free: frames (RFC 9113) and
//! HPACK (RFC 7541). The connection state machine follows in `conn`.

pub mod conn;
pub mod error;
pub mod frame;
pub mod hpack;

pub use conn::{Conn, Event, Headers, PeerSettings, Settings, StreamId};
pub use error::{ConnError, ErrorCode, FrameError, HpackError, SendError};
