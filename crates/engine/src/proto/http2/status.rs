//! A gRPC call's status, read from a response: the `grpc-status` value,
//! or the HTTP status mapped when there is none. A leaf: the connection
//! driver reads it from headers and trailers, a stream from its end.

/// A `grpc-status` value as a number.
pub(super) fn grpc_code(value: Option<&[u8]>) -> Option<u16> {
    std::str::from_utf8(value?).ok()?.parse().ok()
}

/// The gRPC status of a response: `found` (`grpc-status` of its
/// trailers, or of its headers in a trailers-only response); without one,
/// the HTTP status mapped as gRPC's "HTTP to gRPC status code mapping" says.
pub(super) fn grpc_code_or_http(http_status: u16, found: Option<u16>) -> u16 {
    match (found, http_status) {
        (Some(code), _) => code,
        // 200 without a status: the server broke off the call.
        (None, 200) => 13,
        (None, 400) => 13,
        (None, 401) => 16,
        (None, 403) => 7,
        (None, 404) => 12,
        (None, 429 | 502 | 503 | 504) => 14,
        (None, _) => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_status_from_the_call_or_the_http_status() {
        assert_eq!(grpc_code(Some(b"14")), Some(14));
        assert_eq!(grpc_code(Some(b"x")), None);
        assert_eq!(grpc_code(None), None);
        assert_eq!(grpc_code_or_http(200, Some(14)), 14);
        assert_eq!(grpc_code_or_http(503, Some(0)), 0);
        assert_eq!(grpc_code_or_http(200, None), 13);
        assert_eq!(grpc_code_or_http(404, None), 12);
        assert_eq!(grpc_code_or_http(503, None), 14);
        assert_eq!(grpc_code_or_http(418, None), 2);
    }
}
