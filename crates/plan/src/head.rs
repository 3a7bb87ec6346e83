//! The request head every plan writes: one writer, one `Host` authority.

use std::fmt;

/// True for a byte an HTTP token (a method, a header name) may hold (RFC
/// 9110 5.6.2).
pub fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `host[:port]` as a `Host` header says it: IPv6 addresses in brackets,
/// the port left out when it is the scheme's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    host: String,
    port: u16,
    default_port: u16,
}

impl Authority {
    /// The authority of `host:port` for a scheme whose default port is
    /// `default_port` (80 for http, 443 for https).
    pub fn new(host: &str, port: u16, default_port: u16) -> Authority {
        Authority {
            host: host.to_string(),
            port,
            default_port,
        }
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if self.port != self.default_port {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// An HTTP/1.1 request head, values already rendered and validated.
#[derive(Clone, Copy, Debug)]
pub struct RequestHead<'a> {
    /// The method, e.g. `GET`.
    pub method: &'a str,
    /// The request target, e.g. `/path?q=1`.
    pub target: &'a str,
    /// For the `Host` header, unless `headers` has one.
    pub authority: &'a Authority,
    /// The user's headers, in order (a user `Content-Length` must have
    /// been dropped or refused by validation: the writer adds its own).
    pub headers: &'a [(String, String)],
    /// Bytes of body that follow the head.
    pub body_len: usize,
    /// Add `Connection: close` (unless `headers` has a `Connection`).
    pub close: bool,
}

impl RequestHead<'_> {
    /// Appends the head: request line; `Host`, then `User-Agent` unless
    /// given; the user's headers in order; `Content-Length` when there is a
    /// body or the method carries one (POST, PUT, PATCH); `Connection:
    /// close` when asked; the blank line.
    pub fn write(&self, out: &mut Vec<u8>) {
        let has = |name: &str| self.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let mut line = |parts: &[&str]| {
            for p in parts {
                out.extend_from_slice(p.as_bytes());
            }
            out.extend_from_slice(b"\r\n");
        };
        line(&[self.method, " ", self.target, " HTTP/1.1"]);
        if !has("host") {
            line(&["Host: ", &self.authority.to_string()]);
        }
        if !has("user-agent") {
            line(&[concat!("User-Agent: throng/", env!("CARGO_PKG_VERSION"))]);
        }
        for (name, value) in self.headers {
            line(&[name, ": ", value]);
        }
        if self.body_len > 0 || matches!(self.method, "POST" | "PUT" | "PATCH") {
            line(&["Content-Length: ", &self.body_len.to_string()]);
        }
        if self.close && !has("connection") {
            line(&["Connection: close"]);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// The head as bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>());
        self.write(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(a: &Authority, headers: &[(&str, &str)], method: &str, body_len: usize, close: bool) -> String {
        let headers: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let h = RequestHead {
            method,
            target: "/x?y=1",
            authority: a,
            headers: &headers,
            body_len,
            close,
        };
        String::from_utf8(h.to_vec()).unwrap()
    }

    #[test]
    fn default_ports_are_left_out_and_ipv6_is_bracketed() {
        assert_eq!(Authority::new("example.com", 80, 80).to_string(), "example.com");
        assert_eq!(Authority::new("example.com", 443, 443).to_string(), "example.com");
        assert_eq!(Authority::new("example.com", 443, 80).to_string(), "example.com:443");
        assert_eq!(Authority::new("127.0.0.1", 8080, 80).to_string(), "127.0.0.1:8080");
        assert_eq!(Authority::new("::1", 8443, 443).to_string(), "[::1]:8443");
        assert_eq!(Authority::new("::1", 80, 80).to_string(), "[::1]");
    }

    #[test]
    fn headers_in_order_with_one_host_and_one_length() {
        let a = Authority::new("::1", 8080, 80);
        let ua = concat!("User-Agent: throng/", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            head(&a, &[("Accept", "*/*"), ("X-B", "2")], "GET", 0, false),
            format!("GET /x?y=1 HTTP/1.1\r\nHost: [::1]:8080\r\n{ua}\r\nAccept: */*\r\nX-B: 2\r\n\r\n")
        );
        // A user Host and User-Agent replace throng's, in the user's place.
        let h = head(&a, &[("host", "other"), ("User-Agent", "me")], "POST", 3, true);
        assert_eq!(
            h,
            "POST /x?y=1 HTTP/1.1\r\nhost: other\r\nUser-Agent: me\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(h.to_ascii_lowercase().matches("host:").count(), 1);
        assert_eq!(h.matches("Content-Length").count(), 1);
        // A body-carrying method says 0; GET with no body says nothing.
        assert!(head(&a, &[], "PUT", 0, false).contains("Content-Length: 0\r\n"));
        assert!(!head(&a, &[], "GET", 0, false).contains("Content-Length"));
        // A user Connection header wins over close.
        let h = head(&a, &[("Connection", "keep-alive")], "GET", 0, true);
        assert_eq!(h.matches("Connection").count(), 1, "{h}");
    }
}
