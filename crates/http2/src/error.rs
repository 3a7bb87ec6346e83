//! HTTP/2 error codes (RFC 9113 §7) and the crate's error types.

use std::fmt;

/// An HTTP/2 error code as carried by RST_STREAM and GOAWAY.
///
/// A newtype rather than an enum: a peer may send any 32-bit value, and an
/// unknown code must still be reported as it arrived.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// The RFC's name for the code, or `None` for a code it does not define.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown error code {:#x}", self.0),
        }
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A malformed frame (RFC 9113 §4, §6): always a connection error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length field exceeds SETTINGS_MAX_FRAME_SIZE, or a fixed-size
    /// frame (PING, RST_STREAM, WINDOW_UPDATE, ...) has the wrong length.
    #[error("{kind} frame of {len} bytes: {why}")]
    Size {
        kind: &'static str,
        len: u32,
        why: &'static str,
    },
    /// Anything else the RFC calls a PROTOCOL_ERROR at the framing layer.
    #[error("{kind} frame: {why}")]
    Protocol { kind: &'static str, why: &'static str },
}

impl FrameError {
    /// The HTTP/2 error code a GOAWAY for this error carries.
    pub fn code(&self) -> ErrorCode {
        match self {
            FrameError::Size { .. } => ErrorCode::FRAME_SIZE_ERROR,
            FrameError::Protocol { .. } => ErrorCode::PROTOCOL_ERROR,
        }
    }
}

/// A header block that cannot be decoded (RFC 7541): a COMPRESSION_ERROR,
/// except a header list over the advertised limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HpackError {
    #[error("header block ends inside a field")]
    Truncated,
    #[error("integer does not fit in 32 bits")]
    IntegerOverflow,
    #[error("table index {0} is not in the static or dynamic table")]
    BadIndex(u32),
    #[error("Huffman string has an invalid code, the EOS symbol, or bad padding")]
    BadHuffman,
    #[error("dynamic table size update to {size} exceeds the limit {max}")]
    TableSizeTooLarge { size: u32, max: u32 },
    #[error("dynamic table size update after the first field of a block")]
    LateSizeUpdate,
    #[error("header list is larger than the advertised SETTINGS_MAX_HEADER_LIST_SIZE {max}")]
    HeaderListTooLarge { max: u32 },
}

impl HpackError {
    /// The HTTP/2 error code for this error: a decoding failure breaks the
    /// shared table (COMPRESSION_ERROR); an oversized list does not.
    pub fn code(&self) -> ErrorCode {
        match self {
            HpackError::HeaderListTooLarge { .. } => ErrorCode::ENHANCE_YOUR_CALM,
            _ => ErrorCode::COMPRESSION_ERROR,
        }
    }
}

/// Why a connection failed. After it, the connection is closed: its GOAWAY
/// (if one could be written) is in the pending output, to be flushed before
/// the socket is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnError {
    #[error("HTTP/2 framing error: {0}")]
    Frame(#[from] FrameError),
    #[error("HTTP/2 header compression error: {0}")]
    Hpack(#[from] HpackError),
    /// The peer broke a rule of the connection (RFC 9113 §5, §6).
    #[error("HTTP/2 protocol error ({code}): {why}")]
    Protocol { code: ErrorCode, why: &'static str },
    /// The connection is already closed (after an error or our GOAWAY).
    #[error("the HTTP/2 connection is closed")]
    Closed,
}

impl ConnError {
    /// The HTTP/2 error code of the GOAWAY this error sends.
    pub fn code(&self) -> ErrorCode {
        match self {
            ConnError::Frame(e) => e.code(),
            ConnError::Hpack(e) => e.code(),
            ConnError::Protocol { code, .. } => *code,
            ConnError::Closed => ErrorCode::NO_ERROR,
        }
    }
}

/// Why a request or body cannot be sent now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    #[error("the server's SETTINGS_MAX_CONCURRENT_STREAMS ({0}) streams are open")]
    StreamLimit(u32),
    #[error("the server sent GOAWAY: no new streams on this connection")]
    GoingAway,
    #[error("stream ids of this connection are used up: open a new connection")]
    StreamIdsExhausted,
    #[error("stream {0} is not open for sending")]
    NotSendable(u32),
    #[error("the HTTP/2 connection is closed")]
    Closed,
}
