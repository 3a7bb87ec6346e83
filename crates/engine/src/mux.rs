//! Several targets and redirects over HTTP/2 and HTTP/3: the request of a
//! stream made from what HTTP/1.1 would send.
//!
//! ```text
//!  plan's request table (HTTP/1.1 bytes, rendered once; crate::targets)
//!     │ Pick::next ─► entry i ─► parts_of(bytes of i)   method, :authority
//!     ▼                                                 from Host, headers,
//!  http2::one_request / http3 request loop              body sliced (no copy)
//!
//!  a 3xx with Location (--redirects) ─► redirect::next_hop ─► hop_parts
//!     same origin as the plan's target: a stream of the worker's pool
//!     another origin: a connection of its own for the rest of the chain
//! ```
//!
//! Every entry is converted once before the run ([`check_table`]), so a
//! target HTTP/2 or HTTP/3 cannot carry is refused then, not counted as
//! failures; at run time the conversion is a parse of bytes already known
//! to convert.

use std::pin::Pin;
use std::time::Instant;

use bytes::Bytes;
use throng_metrics::ErrorClass;
use tokio::time::Sleep;

use crate::conn::{Failed, Timing};
use crate::ctx::Ctx;
use crate::proto::http1::Keep;
use crate::redirect::{FollowSpec, Place, TOO_MANY, hop_headers, is_redirect, next_hop};

/// Headers a multiplexed request never carries: connection-specific ones
/// (RFC 9113 8.2.2, RFC 9114 4.2); `Host` becomes `:authority`.
const NOT_CARRIED: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Header fields one request may have (a rendered request has the user's
/// `-H`s, a target's own and a few of throng's).
const MAX_FIELDS: usize = 512;

/// One request as HTTP/2 or HTTP/3 sends it.
#[derive(Debug)]
pub(crate) struct Parts {
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Parts {
    /// The request without its body.
    pub(crate) fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }

    /// Its size as counted in `sent` over HTTP/2: pseudo-header values and
    /// header fields decoded (name, value and 4 bytes each) plus 40, as
    /// crate::proto::http2::Spec counts the plan's one request; and the body.
    pub(crate) fn h2_len(&self) -> usize {
        self.values_len() + 40 + self.body.len()
    }

    /// Its size as counted over HTTP/3 (crate::proto::http3::H3Spec): every field,
    /// pseudo-headers included, as name, value and 4 bytes; and the body.
    pub(crate) fn h3_len(&self) -> u64 {
        // ":method", ":scheme", ":authority", ":path", 4 bytes each.
        (self.values_len() + 45 + self.body.len()) as u64
    }

    fn values_len(&self) -> usize {
        self.method.as_str().len()
            + self.uri.scheme_str().map_or(0, str::len)
            + self.uri.authority().map_or(0, |a| a.as_str().len())
            + self.uri.path_and_query().map_or(1, |p| p.as_str().len())
            + self
                .headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>()
    }
}

/// The HTTP/2 or HTTP/3 form of `entry`, an HTTP/1.1 request as the plan
/// rendered it (head and body), sent over `https` or not: `:authority` from
/// its `Host`, `:path` from its request target (the whole URL when it is
/// in absolute form), its other headers but the connection-specific ones,
/// its body as a slice of `entry`.
pub(crate) fn parts_of(entry: &Bytes, https: bool) -> Result<Parts, PartsError> {
    // On the stack for the usual few fields (this runs per request); on
    // the heap only for a request with more.
    let mut few = [httparse::EMPTY_HEADER; FEW_FIELDS];
    let mut req = httparse::Request::new(&mut few);
    match req.parse(entry) {
        Err(httparse::Error::TooManyHeaders) => {
            let mut many = vec![httparse::EMPTY_HEADER; MAX_FIELDS];
            let mut req = httparse::Request::new(&mut many);
            let head_len = head_len(req.parse(entry))?;
            convert(&req, entry, head_len, https)
        }
        parsed => {
            let head_len = head_len(parsed)?;
            convert(&req, entry, head_len, https)
        }
    }
}

/// Why a request as the plan rendered it cannot go out as an HTTP/2 or
/// HTTP/3 stream (checked for every request before the run).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PartsError {
    #[error("the request's head is cut off")]
    CutOff,
    #[error("the request cannot be read back ({0})")]
    Unreadable(httparse::Error),
    #[error("header '{name}' cannot be sent over HTTP/2 or HTTP/3 ({reason})")]
    HeaderName {
        name: String,
        reason: http::header::InvalidHeaderName,
    },
    #[error("the value of header '{name}' cannot be sent ({reason})")]
    HeaderValue {
        name: String,
        reason: http::header::InvalidHeaderValue,
    },
    #[error("'{target}' cannot be a request target here ({reason})")]
    Target { target: String, reason: String },
    #[error("'{method}' is not an HTTP method ({reason})")]
    Method {
        method: String,
        reason: http::method::InvalidMethod,
    },
}

/// The first request of a plan's table that cannot go out as a stream, by
/// its target's name (`target NAME`, else `request N`).
#[derive(Debug, thiserror::Error)]
#[error("{name}: {error}")]
pub(crate) struct TableError {
    name: String,
    error: PartsError,
}

/// Header fields parsed on the stack (more go to the heap).
const FEW_FIELDS: usize = 32;

fn head_len(parsed: httparse::Result<usize>) -> Result<usize, PartsError> {
    match parsed {
        Ok(httparse::Status::Complete(n)) => Ok(n),
        Ok(httparse::Status::Partial) => Err(PartsError::CutOff),
        Err(e) => Err(PartsError::Unreadable(e)),
    }
}

/// [`parts_of`] from the parsed head `req` (`head_len` bytes of `entry`).
fn convert(req: &httparse::Request<'_, '_>, entry: &Bytes, head_len: usize, https: bool) -> Result<Parts, PartsError> {
    let method = req.method.unwrap_or("GET");
    let target = req.path.unwrap_or("/");
    let mut authority = None;
    let mut headers = http::HeaderMap::new();
    for f in req.headers.iter() {
        let lower = f.name.to_ascii_lowercase();
        if lower == "host" {
            authority = Some(String::from_utf8_lossy(f.value).into_owned());
        }
        if NOT_CARRIED.contains(&lower.as_str()) {
            continue;
        }
        let name = http::HeaderName::from_bytes(lower.as_bytes()).map_err(|reason| PartsError::HeaderName {
            name: f.name.to_string(),
            reason,
        })?;
        let value = http::HeaderValue::from_bytes(f.value).map_err(|reason| PartsError::HeaderValue {
            name: f.name.to_string(),
            reason,
        })?;
        headers.append(name, value);
    }
    let uri = if target.starts_with("http://") || target.starts_with("https://") {
        target.parse::<http::Uri>().map_err(|e| e.to_string())
    } else {
        http::Uri::builder()
            .scheme(if https { "https" } else { "http" })
            .authority(authority.as_deref().unwrap_or_default())
            .path_and_query(target)
            .build()
            .map_err(|e| e.to_string())
    }
    .map_err(|reason| PartsError::Target {
        target: target.to_string(),
        reason,
    })?;
    let method = http::Method::from_bytes(method.as_bytes()).map_err(|reason| PartsError::Method {
        method: method.to_string(),
        reason,
    })?;
    Ok(Parts {
        method,
        uri,
        headers,
        body: entry.slice(head_len..),
    })
}

/// The request of a redirect's hop to `place`: `method`, the request's
/// `headers` (as crate::redirect::hop_headers left them: `Host` only when
/// the user gave it and the hop stays on the first origin), `body`.
pub(crate) fn hop_parts(
    place: &Place,
    method: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<Parts, ErrorClass> {
    let authority = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or_else(|| place.authority().to_string(), |(_, v)| v.clone());
    let uri = http::Uri::builder()
        .scheme(if place.https { "https" } else { "http" })
        .authority(authority.as_str())
        .path_and_query(place.target.as_str())
        .build()
        .map_err(|_| crate::redirect::BAD_LOCATION)?;
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if NOT_CARRIED.contains(&lower.as_str()) {
            continue;
        }
        // The plan checked the request's headers; a hop adds only a
        // cookie, so a failure here is a header no hop can carry.
        let n = http::HeaderName::from_bytes(lower.as_bytes()).map_err(|_| crate::redirect::BAD_LOCATION)?;
        let v = http::HeaderValue::from_str(value).map_err(|_| crate::redirect::BAD_LOCATION)?;
        map.append(n, v);
    }
    if !body.is_empty() {
        map.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body.len()));
    }
    let method = http::Method::from_bytes(method.as_bytes()).map_err(|_| crate::redirect::BAD_LOCATION)?;
    Ok(Parts {
        method,
        uri,
        headers: map,
        body,
    })
}

/// Converts every entry of `table` once, before the run: the first that
/// HTTP/2 or HTTP/3 cannot carry, with its target's name, as an error.
pub(crate) fn check_table(table: &throng_plan::Requests, names: &[String], https: bool) -> Result<(), TableError> {
    for i in 0..table.len() {
        if let Err(error) = parts_of(&table.bytes(i), https) {
            let t = table.target(i);
            let name = names
                .get(t)
                .map_or_else(|| format!("request {}", i + 1), |n| format!("target {n}"));
            return Err(TableError { name, error });
        }
    }
    Ok(())
}

/// A request's last exchange so far: its outcome, when its first byte went,
/// its size, and the redirects followed to it.
pub(crate) struct Chain {
    pub outcome: Result<Timing, Failed>,
    pub t_send: Instant,
    pub request_len: usize,
    pub hops: u32,
}

/// Follows the redirects of an HTTP/2 request whose first exchange is
/// `ex` (its response in `slot`), as crate::redirect::follow does for
/// HTTP/1.1: up to `f.limit` hops, each with `--timeout`, 301/302/303 as
/// GET without a body, 307/308 as they were, credentials dropped off the
/// first origin, each hop counted in `redirects`. A hop to the plan's
/// origin takes a stream of the worker's pool; one to another goes on a
/// connection of its own (h2 by ALPN for https://, h2c with prior
/// knowledge for http://), kept for the chain's next hops there and closed
/// at its end. With `trace` (the request's trace id), each hop carries a
/// traceparent of that trace with a span id of its own. Returns the final
/// exchange.
pub(crate) async fn follow_h2(
    ctx: &Ctx,
    pool: &crate::proto::http2::Pool,
    f: &FollowSpec,
    slot: &mut crate::proto::http2::Slot,
    mut ex: Chain,
    mut sleep: Pin<&mut Sleep>,
    trace: Option<[u8; 16]>,
) -> Chain {
    let keep = slot_keep(ctx);
    let mut place = f.place.clone();
    let mut method = f.method.clone();
    let mut body = true;
    let mut other = crate::redirect::Elsewhere::new(ctx);
    while let Ok(timing) = &ex.outcome {
        let status = slot.status;
        if !is_redirect(status) {
            break;
        }
        let location = slot
            .headers()
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("location"))
            .map(|(_, v)| v.as_str());
        let hop = match next_step(ex.hops, f.limit, &place, &method, status, location) {
            Ok(h) => h,
            Err(class) => {
                ex.outcome = Err(Failed { class, written: 0 });
                break;
            }
        };
        ctx.rec
            .borrow_mut()
            .redirected(timing.done, ex.request_len as u64, slot.wire_bytes());
        let same = hop.place.same_origin(&f.place);
        body &= hop.body;
        let mut headers = hop_headers(&f.headers, same, body, None);
        // With trace context: the request's trace, a span of its own.
        if let (Some(id), Some(t)) = (&trace, &ctx.spec.trace) {
            t.restamp(&mut headers, id);
        }
        let hops = ex.hops + 1;
        let t_send = Instant::now();
        let parts = match hop_parts(
            &hop.place,
            &hop.method,
            &headers,
            if body { f.body.clone() } else { Bytes::new() },
        ) {
            Ok(p) => p,
            Err(class) => {
                ex = broken(class, t_send, hops);
                break;
            }
        };
        let head = hop.method.eq_ignore_ascii_case("HEAD");
        if slot.head_request() != head {
            *slot = crate::proto::http2::Slot::new(head);
        }
        slot.reset(keep);
        sleep.as_mut().reset((t_send + ctx.spec.timeout).into());
        let outcome = if same {
            pool.hop(ctx, 0, &parts, slot, sleep.as_mut()).await
        } else {
            // The last hop's connection there stays while it is usable.
            other.go(&hop.place);
            if other.h2.as_ref().is_some_and(|own| !own.alive()) {
                other.close();
            }
            if other.h2.is_none() {
                match open_other(ctx, &hop.place, sleep.as_mut()).await {
                    Ok(own) => other.h2 = Some(own),
                    Err(class) => {
                        ex = broken(class, t_send, hops);
                        break;
                    }
                }
            }
            sleep.as_mut().reset((t_send + ctx.spec.timeout).into());
            match &other.h2 {
                Some(own) => {
                    own.exchange(ctx, parts.request(), &parts.body, parts.h2_len(), slot, sleep.as_mut())
                        .await
                }
                // Invariant: opened just above.
                None => Err(Failed {
                    class: ErrorClass::Protocol,
                    written: 0,
                }),
            }
        };
        ex = Chain {
            outcome,
            t_send,
            request_len: parts.h2_len(),
            hops,
        };
        place = hop.place;
        method = hop.method;
    }
    ex
}

/// What a hop's response keeps: its headers (for the next `Location`).
fn slot_keep(ctx: &Ctx) -> Keep {
    Keep {
        server: ctx.rec.borrow().wants_first_reply(),
        headers: true,
        body: 0,
    }
}

/// The hop a redirect asks for after `hops` followed, or the class that
/// ends the chain (the limit reached, a bad `Location`).
pub(crate) fn next_step(
    hops: u32,
    limit: u32,
    place: &Place,
    method: &str,
    status: u16,
    location: Option<&str>,
) -> Result<crate::redirect::Hop, ErrorClass> {
    if hops >= limit {
        return Err(TOO_MANY);
    }
    next_hop(place, method, status, location)
}

/// A chain that ended at hop `hops` before its exchange: `class`.
fn broken(class: ErrorClass, t_send: Instant, hops: u32) -> Chain {
    Chain {
        outcome: Err(Failed { class, written: 0 }),
        t_send,
        request_len: 0,
        hops,
    }
}

/// An HTTP/2 connection of its own to another origin than the plan's.
async fn open_other(ctx: &Ctx, place: &Place, sleep: Pin<&mut Sleep>) -> Result<crate::proto::http2::Own, ErrorClass> {
    let d = crate::redirect::dest(ctx, place).await?;
    Box::pin(crate::proto::http2::Own::open(
        ctx,
        &d.route,
        d.tls.as_ref(),
        sleep,
        None,
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_cannot_be_a_stream_says_why() {
        let said = |raw: &'static str| {
            parts_of(&Bytes::from_static(raw.as_bytes()), false)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(said("GET / HTTP/1.1\r\nHost: a"), "the request's head is cut off");
        assert!(said("GET / HTTP/1.1\r\nHo st: a\r\n\r\n").starts_with("the request cannot be read back ("));
        assert!(
            said("G(T / HTTP/1.1\r\nHost: a\r\n\r\n").starts_with("the request cannot be read back (")
                || said("G(T / HTTP/1.1\r\nHost: a\r\n\r\n").starts_with("'G(T' is not an HTTP method (")
        );
        let table = TableError {
            name: "target api".into(),
            error: PartsError::CutOff,
        };
        assert_eq!(table.to_string(), "target api: the request's head is cut off");
    }

    #[test]
    fn a_rendered_request_becomes_its_multiplexed_parts() {
        let entry = Bytes::from_static(
            b"POST /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: t\r\nX-A: 1\r\nConnection: close\r\n\
              Content-Length: 5\r\n\r\nhello",
        );
        let p = parts_of(&entry, false).unwrap();
        assert_eq!(p.method, http::Method::POST);
        assert_eq!(p.uri.to_string(), "http://127.0.0.1:8080/a?b=1");
        assert_eq!(&p.body[..], b"hello");
        let names: Vec<&str> = p.headers.keys().map(http::HeaderName::as_str).collect();
        assert_eq!(names, ["user-agent", "x-a", "content-length"]);
        // Through a proxy, plain http names the whole URL.
        let proxied = Bytes::from_static(b"GET http://h:81/x HTTP/1.1\r\nHost: h:81\r\n\r\n");
        let p = parts_of(&proxied, false).unwrap();
        assert_eq!((p.uri.to_string().as_str(), p.body.len()), ("http://h:81/x", 0));
        assert!(p.h2_len() > 0 && p.h3_len() > p.h2_len() as u64);
        let https = parts_of(&Bytes::from_static(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"), true).unwrap();
        assert_eq!(https.uri.to_string(), "https://h/");
        // More fields than fit on the stack: read on the heap, all kept.
        let mut many = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
        for i in 0..FEW_FIELDS + 8 {
            many.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            parts_of(&Bytes::from(many), false).unwrap().headers.len(),
            FEW_FIELDS + 8
        );
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: h\r\n"[..],
            b"\x00\x01",
            b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
        ] {
            assert!(parts_of(&Bytes::copy_from_slice(bad), false).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_hop_keeps_the_host_only_where_given() {
        let place = Place {
            https: true,
            host: "b.test".into(),
            port: 8443,
            target: "/next".into(),
        };
        let h = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
        };
        let p = hop_parts(&place, "GET", &h(&[("Accept", "*/*")]), Bytes::new()).unwrap();
        assert_eq!(p.uri.to_string(), "https://b.test:8443/next");
        assert_eq!(p.headers.len(), 1);
        let p = hop_parts(
            &place,
            "PUT",
            &h(&[("Host", "given"), ("Cookie", "a=1")]),
            Bytes::from("xy"),
        )
        .unwrap();
        assert_eq!(p.uri.to_string(), "https://given/next");
        assert_eq!(p.headers.get("content-length").unwrap(), "2");
        assert!(p.headers.get("host").is_none());
    }
}
