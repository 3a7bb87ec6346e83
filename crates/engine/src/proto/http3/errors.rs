//! HTTP/3 and QUIC failures as taxonomy classes (`h3.*`, `quic.*`, `tls.*`).

use throng_metrics::ErrorClass;

/// The class of a stream error, and whether the whole connection failed.
pub(super) fn stream_class(e: &h3::error::StreamError) -> (ErrorClass, bool) {
    use h3::error::StreamError;
    match e {
        StreamError::RemoteTerminate { code, .. } => (ErrorClass::H3(h3_code(code.value()).1), false),
        StreamError::HeaderTooBig { .. } => (ErrorClass::H3("header_too_big"), false),
        StreamError::RemoteClosing { .. } => (ErrorClass::H3("goaway"), true),
        StreamError::ConnectionError { 0: c, .. } => (h3_connection_class(c), true),
        StreamError::StreamError { .. } => (ErrorClass::H3("protocol"), false),
        _ => (ErrorClass::H3("protocol"), true),
    }
}

/// The class of an h3 connection error.
pub(super) fn h3_connection_class(e: &h3::error::ConnectionError) -> ErrorClass {
    use h3::error::ConnectionError;
    use h3::quic::ConnectionErrorIncoming;
    match e {
        ConnectionError::Remote {
            0: ConnectionErrorIncoming::ApplicationClose { error_code },
            ..
        } => ErrorClass::H3(h3_code(*error_code).0),
        ConnectionError::Remote {
            0: ConnectionErrorIncoming::Timeout,
            ..
        }
        | ConnectionError::Timeout { .. } => ErrorClass::Quic("idle_timeout"),
        ConnectionError::Remote {
            0: ConnectionErrorIncoming::Undefined(inner),
            ..
        } => match inner.downcast_ref::<quinn::ConnectionError>() {
            Some(q) => connection_class(q, false),
            None => ErrorClass::Quic("other"),
        },
        _ => ErrorClass::H3("protocol"),
    }
}

/// The class of a QUIC connection error (`handshake`: before it was up).
pub(super) fn connection_class(e: &quinn::ConnectionError, handshake: bool) -> ErrorClass {
    use quinn::ConnectionError;
    match e {
        ConnectionError::TimedOut if handshake => ErrorClass::Quic("handshake_timeout"),
        ConnectionError::TimedOut => ErrorClass::Quic("idle_timeout"),
        ConnectionError::ApplicationClosed(c) => ErrorClass::H3(h3_code(c.error_code.into_inner()).0),
        ConnectionError::ConnectionClosed(c) => transport_class(u64::from(c.error_code)),
        ConnectionError::TransportError(t) => transport_class(u64::from(t.code)),
        ConnectionError::Reset => ErrorClass::Quic("stateless_reset"),
        ConnectionError::VersionMismatch => ErrorClass::Quic("version_mismatch"),
        ConnectionError::LocallyClosed => ErrorClass::Quic("locally_closed"),
        ConnectionError::CidsExhausted => ErrorClass::Quic("cids_exhausted"),
    }
}

/// An HTTP/3 error code's name (RFC 9114 8.1, RFC 9204 6) after `$prefix`,
/// as one static string (error classes are `&'static str`).
macro_rules! h3_code_name {
    ($prefix:literal, $code:expr) => {
        match $code {
            0x100 => concat!($prefix, "H3_NO_ERROR"),
            0x101 => concat!($prefix, "H3_GENERAL_PROTOCOL_ERROR"),
            0x102 => concat!($prefix, "H3_INTERNAL_ERROR"),
            0x103 => concat!($prefix, "H3_STREAM_CREATION_ERROR"),
            0x104 => concat!($prefix, "H3_CLOSED_CRITICAL_STREAM"),
            0x105 => concat!($prefix, "H3_FRAME_UNEXPECTED"),
            0x106 => concat!($prefix, "H3_FRAME_ERROR"),
            0x107 => concat!($prefix, "H3_EXCESSIVE_LOAD"),
            0x108 => concat!($prefix, "H3_ID_ERROR"),
            0x109 => concat!($prefix, "H3_SETTINGS_ERROR"),
            0x10a => concat!($prefix, "H3_MISSING_SETTINGS"),
            0x10b => concat!($prefix, "H3_REQUEST_REJECTED"),
            0x10c => concat!($prefix, "H3_REQUEST_CANCELLED"),
            0x10d => concat!($prefix, "H3_REQUEST_INCOMPLETE"),
            0x10e => concat!($prefix, "H3_MESSAGE_ERROR"),
            0x10f => concat!($prefix, "H3_CONNECT_ERROR"),
            0x110 => concat!($prefix, "H3_VERSION_FALLBACK"),
            0x200 => concat!($prefix, "QPACK_DECOMPRESSION_FAILED"),
            0x201 => concat!($prefix, "QPACK_ENCODER_STREAM_ERROR"),
            0x202 => concat!($prefix, "QPACK_DECODER_STREAM_ERROR"),
            _ => concat!($prefix, "other"),
        }
    };
}

/// An HTTP/3 error code as the class of a connection closed with it
/// (`closed.CODE`) and of a stream reset with it (`stream_reset.CODE`).
fn h3_code(code: u64) -> (&'static str, &'static str) {
    (h3_code_name!("closed.", code), h3_code_name!("stream_reset.", code))
}

/// A QUIC transport error code (RFC 9000 20.1) as `closed.NAME`.
fn quic_code(code: u64) -> &'static str {
    match code {
        0x0 => "closed.NO_ERROR",
        0x1 => "closed.INTERNAL_ERROR",
        0x2 => "closed.CONNECTION_REFUSED",
        0x3 => "closed.FLOW_CONTROL_ERROR",
        0x4 => "closed.STREAM_LIMIT_ERROR",
        0x5 => "closed.STREAM_STATE_ERROR",
        0x6 => "closed.FINAL_SIZE_ERROR",
        0x7 => "closed.FRAME_ENCODING_ERROR",
        0x8 => "closed.TRANSPORT_PARAMETER_ERROR",
        0x9 => "closed.CONNECTION_ID_LIMIT_ERROR",
        0xa => "closed.PROTOCOL_VIOLATION",
        0xb => "closed.INVALID_TOKEN",
        0xc => "closed.APPLICATION_ERROR",
        0xd => "closed.CRYPTO_BUFFER_EXCEEDED",
        0xe => "closed.KEY_UPDATE_ERROR",
        0xf => "closed.AEAD_LIMIT_REACHED",
        0x10 => "closed.NO_VIABLE_PATH",
        _ => "closed.other",
    }
}

/// A QUIC transport error code: a TLS alert (0x100 + alert, RFC 9001 4.8)
/// as `tls.*`, any other as `quic.closed.NAME`.
fn transport_class(code: u64) -> ErrorClass {
    if (0x100..0x200).contains(&code) {
        return ErrorClass::Tls(match code - 0x100 {
            40 => "handshake_failure",
            42 => "bad_certificate",
            45 => "certificate_expired",
            46 => "certificate_unknown",
            48 => "unknown_ca",
            70 => "protocol_version",
            80 => "internal_error",
            112 => "unrecognized_name",
            116 => "certificate_required",
            120 => "no_application_protocol",
            _ => "alert",
        });
    }
    ErrorClass::Quic(quic_code(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_their_rfc_names() {
        assert_eq!(h3_code(0x107).0, "closed.H3_EXCESSIVE_LOAD");
        assert_eq!(h3_code(0x10b).1, "stream_reset.H3_REQUEST_REJECTED");
        assert_eq!(h3_code(7), ("closed.other", "stream_reset.other"));
        assert_eq!(transport_class(0xa).name(), "quic.closed.PROTOCOL_VIOLATION");
        assert_eq!(transport_class(0x100 + 48).name(), "tls.unknown_ca");
        assert_eq!(transport_class(0x100 + 99).name(), "tls.alert");
    }
}
