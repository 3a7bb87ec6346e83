//! Request parsing and routing (pure: bytes in, bytes out).

use std::time::Duration;

use crate::auth::{self, Call, Reply};

/// Largest request (head and body) the lab accepts.
pub(crate) const MAX_REQUEST: usize = 16 * 1024 * 1024;
/// Longest `/delay`.
const MAX_DELAY_MS: u64 = 600_000;
/// Largest `/bytes`.
const MAX_BYTES: u64 = 1 << 30;

/// A complete request.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub body: &'a [u8],
    /// The `Authorization` header (empty if it is not UTF-8).
    pub authorization: Option<&'a str>,
    /// `Sec-WebSocket-Key`, on an `Upgrade: websocket` request.
    pub ws_key: Option<&'a str>,
    pub keep_alive: bool,
    /// Bytes of head and body.
    pub len: usize,
}

/// What a buffer holds.
#[derive(Debug)]
pub(crate) enum Parsed<'a> {
    Request(Request<'a>),
    Partial,
    /// Not a request the lab can read, and why.
    Bad(&'static str),
}

/// Parses one request from the front of `buf`.
pub(crate) fn parse_request(buf: &[u8]) -> Parsed<'_> {
    if buf.is_empty() {
        return Parsed::Partial;
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Bad("the request head is not HTTP/1.x"),
    };
    let mut length = 0usize;
    let mut keep_alive = req.version == Some(1);
    let mut authorization = None;
    let mut ws_key = None;
    let mut upgrade = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse().ok()) {
                Some(n) if n <= MAX_REQUEST => length = n,
                _ => return Parsed::Bad("Content-Length must be a number of bytes up to 16777216"),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked request bodies are not needed by any lab endpoint.
            return Parsed::Bad("chunked request bodies are not supported: send Content-Length");
        } else if h.name.eq_ignore_ascii_case("authorization") {
            authorization = Some(std::str::from_utf8(h.value).unwrap_or(""));
        } else if h.name.eq_ignore_ascii_case("sec-websocket-key") {
            ws_key = std::str::from_utf8(h.value).ok();
        } else if h.name.eq_ignore_ascii_case("upgrade") {
            upgrade = h.value.eq_ignore_ascii_case(b"websocket");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = h.value.to_ascii_lowercase();
            if v.windows(5).any(|w| w == b"close") {
                keep_alive = false;
            } else if v.windows(10).any(|w| w == b"keep-alive") {
                keep_alive = true;
            }
        }
    }
    let total = head + length;
    if buf.len() < total {
        return Parsed::Partial;
    }
    Parsed::Request(Request {
        method: req.method.unwrap_or("GET"),
        path: req.path.unwrap_or("/"),
        body: &buf[head..total],
        authorization,
        ws_key: ws_key.filter(|_| upgrade),
        keep_alive,
        len: total,
    })
}

/// What to do after writing `out`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Write `out`.
    Respond,
    /// Wait, then write `out`.
    Delay(Duration),
    /// Write `out` (the head), then this many filler body bytes.
    Bytes(u64),
    /// Reset the connection (RST), no response.
    Reset,
    /// Close the connection, no response.
    Close,
    /// Write something that is not HTTP, then close.
    Garbage,
    /// Write `out` (a `101 Switching Protocols`), then echo WebSocket
    /// frames (see [`crate::ws`]).
    WebSocket,
    /// Write `out` (an event stream's head), then serve the stream (see
    /// [`crate::sse`]).
    Stream(crate::sse::Stream),
    /// Answer with [`auth::Service::handle`] (it may wait for a hashing
    /// thread), written with [`json`].
    Auth(Call),
}

/// Routes `req`, writing the response head (and small bodies) into `out`.
pub(crate) fn route(req: &Request<'_>, out: &mut Vec<u8>) -> Action {
    let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let first = parts.next().unwrap_or("");
    let arg = parts.next();
    let number = |max: u64| arg.and_then(|a| a.parse::<u64>().ok()).filter(|n| *n <= max);
    match (req.method, first) {
        (_, "") => head(out, 200, 0, req.keep_alive),
        (_, "bytes") => match number(MAX_BYTES) {
            Some(n) => {
                head(out, 200, n, req.keep_alive);
                return Action::Bytes(n);
            }
            None => bad(out, "/bytes/N takes a byte count up to 1073741824", req.keep_alive),
        },
        (_, "delay") => match number(MAX_DELAY_MS) {
            Some(ms) => {
                head(out, 200, 0, req.keep_alive);
                return Action::Delay(Duration::from_millis(ms));
            }
            None => bad(out, "/delay/MS takes milliseconds up to 600000", req.keep_alive),
        },
        (_, "status") => match number(599).filter(|c| *c >= 200) {
            // Invariant: filtered to 200..=599.
            Some(code) => head(out, code as u16, 0, req.keep_alive),
            None => bad(out, "/status/CODE takes a status from 200 to 599", req.keep_alive),
        },
        ("POST" | "PUT", "echo") => {
            head(out, 200, req.body.len() as u64, req.keep_alive);
            out.extend_from_slice(req.body);
        }
        ("GET", "ws") => match req.ws_key {
            Some(key) => {
                crate::ws::switching(out, key);
                return Action::WebSocket;
            }
            None => bad(
                out,
                "/ws is a WebSocket echo: send GET with Upgrade: websocket and Sec-WebSocket-Key",
                req.keep_alive,
            ),
        },
        ("GET", "sse") if arg.is_none() => match crate::sse::Stream::sse(query) {
            Ok(stream) => {
                crate::sse::head(out, req.keep_alive);
                return Action::Stream(stream);
            }
            Err(why) => bad(out, &format!("{why}\n{}", crate::sse::SSE_USAGE), req.keep_alive),
        },
        ("POST", "v1") if arg == Some("chat/completions") => match crate::sse::Stream::chat(query, req.body) {
            Ok((stream, true)) => {
                crate::sse::head(out, req.keep_alive);
                return Action::Stream(stream);
            }
            Ok((stream, false)) => {
                let body = crate::sse::completion(stream.events);
                head_with(
                    out,
                    200,
                    body.len() as u64,
                    req.keep_alive,
                    "Content-Type: application/json\r\n",
                );
                out.extend_from_slice(body.as_bytes());
            }
            Err(why) => bad(out, &format!("{why}\n{}", crate::sse::CHAT_USAGE), req.keep_alive),
        },
        (_, "reset") => return Action::Reset,
        (_, "close") => return Action::Close,
        (_, "garbage") => return Action::Garbage,
        (method, "auth") => match auth::parse_call(method, arg.unwrap_or(""), req.body, req.authorization) {
            Ok(call) => return Action::Auth(call),
            Err(reply) => json(out, &reply, req.keep_alive),
        },
        _ => {
            let body = format!(
                "not found: try /, /bytes/N, /delay/MS, /status/CODE, POST /echo, GET /ws (WebSocket echo), GET /sse (an event stream), POST /v1/chat/completions (a streamed chat completion), {}\n",
                auth::ENDPOINTS
            );
            head(out, 404, body.len() as u64, req.keep_alive);
            out.extend_from_slice(body.as_bytes());
        }
    }
    Action::Respond
}

/// Writes the 400 for a request that could not be read; the connection
/// closes after it.
pub(crate) fn unreadable(out: &mut Vec<u8>, why: &str) {
    bad(out, why, false);
}

/// Writes `reply` as a complete response with a JSON body.
pub(crate) fn json(out: &mut Vec<u8>, reply: &Reply, keep_alive: bool) {
    let mut extra = String::from("Content-Type: application/json\r\n");
    if let Some(allow) = reply.allow {
        extra.push_str(&format!("Allow: {allow}\r\n"));
    }
    head_with(out, reply.status, reply.body.len() as u64, keep_alive, &extra);
    out.extend_from_slice(reply.body.as_bytes());
}

fn head(out: &mut Vec<u8>, status: u16, length: u64, keep_alive: bool) {
    head_with(out, status, length, keep_alive, "");
}

/// The response head; `extra` is more header lines, each ending in CRLF.
fn head_with(out: &mut Vec<u8>, status: u16, length: u64, keep_alive: bool, extra: &str) {
    let reason = match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    };
    out.extend_from_slice(format!("HTTP/1.1 {status} {reason}\r\nServer: throng-lab\r\n").as_bytes());
    // 1xx, 204 and 304 have no body and no length.
    if !(status == 204 || status == 304) {
        out.extend_from_slice(format!("Content-Length: {length}\r\n").as_bytes());
    }
    out.extend_from_slice(extra.as_bytes());
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

fn bad(out: &mut Vec<u8>, why: &str, keep_alive: bool) {
    let body = format!("{why}\n");
    head(out, 400, body.len() as u64, keep_alive);
    out.extend_from_slice(body.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn respond(raw: &[u8]) -> (Action, String) {
        let Parsed::Request(req) = parse_request(raw) else {
            panic!("not a request");
        };
        let mut out = Vec::new();
        let a = route(&req, &mut out);
        (a, String::from_utf8(out).unwrap())
    }

    #[test]
    fn routes() {
        let (a, out) = respond(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(a, Action::Respond);
        assert_eq!(
            out,
            "HTTP/1.1 200 OK\r\nServer: throng-lab\r\nContent-Length: 0\r\n\r\n"
        );
        assert_eq!(respond(b"GET /bytes/10 HTTP/1.1\r\n\r\n").0, Action::Bytes(10));
        assert_eq!(
            respond(b"GET /delay/250 HTTP/1.1\r\n\r\n").0,
            Action::Delay(Duration::from_millis(250))
        );
        assert!(
            respond(b"GET /status/503 HTTP/1.1\r\n\r\n")
                .1
                .starts_with("HTTP/1.1 503 ")
        );
        assert!(
            respond(b"GET /status/abc HTTP/1.1\r\n\r\n")
                .1
                .starts_with("HTTP/1.1 400 ")
        );
        let (_, echo) = respond(b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
        assert!(echo.ends_with("Content-Length: 3\r\n\r\nabc"));
        assert_eq!(respond(b"GET /reset HTTP/1.1\r\n\r\n").0, Action::Reset);
        let (_, nf) = respond(b"GET /nope HTTP/1.0\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404 ") && nf.contains("Connection: close"));
    }

    #[test]
    fn auth_routes_parse_calls_or_answer_json_errors() {
        let body = r#"{"email":"a@x","password":"pw"}"#;
        let register = format!(
            "POST /auth/register HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(
            respond(register.as_bytes()).0,
            Action::Auth(Call::Register {
                email: "a@x".into(),
                password: "pw".into()
            })
        );
        let (a, out) = respond(b"GET /auth/me?x=1 HTTP/1.1\r\nAuthorization: Bearer t0k\r\n\r\n");
        assert_eq!(
            (a, out.as_str()),
            (
                Action::Auth(Call::Me {
                    access_token: "t0k".into()
                }),
                ""
            )
        );

        let (a, out) = respond(b"POST /auth/login HTTP/1.1\r\nContent-Length: 4\r\n\r\n{\"e\"");
        assert_eq!(a, Action::Respond);
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("\r\nContent-Type: application/json"), "{head}");
        assert!(head.contains(&format!("\r\nContent-Length: {}", body.len())), "{head}");
        assert!(!head.contains("Connection: close"), "{head}");
        assert!(
            body.starts_with(r#"{"detail":"the body must be a JSON object"#),
            "{body}"
        );

        let (_, out) = respond(b"GET /auth/me HTTP/1.0\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 401 Unauthorized\r\n") && out.contains("Connection: close"));
        assert!(out.ends_with(r#""error":"MISSING_TOKEN"}"#), "{out}");
        let (_, out) = respond(b"DELETE /auth/login HTTP/1.1\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 405 Method Not Allowed\r\n") && out.contains("\r\nAllow: POST\r\n"));
        let (_, out) = respond(b"POST /auth HTTP/1.1\r\n\r\n");
        assert!(
            out.starts_with("HTTP/1.1 404 ") && out.contains("application/json"),
            "{out}"
        );

        let (_, nf) = respond(b"GET /nope HTTP/1.1\r\n\r\n");
        assert!(
            nf.contains("POST /auth/register") && nf.contains("GET /auth/me"),
            "{nf}"
        );
    }

    #[test]
    fn partial_and_bad_requests() {
        assert!(matches!(parse_request(b"GET / HTTP/1.1\r\n"), Parsed::Partial));
        assert!(matches!(
            parse_request(b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            Parsed::Partial
        ));
        assert!(matches!(parse_request(b"\x00\x01garbage\r\n\r\n"), Parsed::Bad(_)));
        let huge = format!("POST /echo HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_REQUEST + 1);
        let Parsed::Bad(why) = parse_request(huge.as_bytes()) else {
            panic!("a body over the cap is refused");
        };
        assert!(why.contains("up to 16777216"), "{why}");
        let mut out = Vec::new();
        unreadable(&mut out, why);
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 400 ") && out.contains("Connection: close"),
            "{out}"
        );
        assert!(out.ends_with("up to 16777216\n"), "{out}");
    }
}
