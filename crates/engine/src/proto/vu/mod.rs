//! The scenario VU connection role: where a scenario's VUs connect
//! ([`dest::Dest`], made once per run; `dest.rs`, a leaf the worker's load
//! names) and a VU's own multiplexed connections ([`Conns`]: at most one
//! per protocol, HTTP/2's [`http2::Own`] or HTTP/3's [`http3::Own`], each
//! opened at first use); a request's parts as a stream
//! ([`stream_request`]), the session that reads a stream's response, and a
//! redirect hop to another origin ([`away_hop`]: ALPN h2 or HTTP/1.1). The
//! scenario runner (`crate::scenario`) asks for a connection by the
//! protocol a request speaks and never matches on it; every such match is
//! here.
//!
//! ```text
//!  request (http: 2 | 3) ─► Conns::drop_unusable (lost, GOAWAY) ─► Conns::open (none yet)
//!                        ─► stream_request (HTTP/2-3 parts) ─► Conns::exchange | Conns::call (gRPC)
//!                                                              | Conns::sse (an sse: step)
//!  a hop elsewhere ─────────► away_hop (a connection of its own for the request's chain)
//! ```

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_metrics::ErrorClass;
use throng_plan::{HttpVersion, RequestHead, StatusSet};
use tokio::time::Sleep;

use crate::conn::{Failed, Timing, open_connection_to};
use crate::ctx::Ctx;
use crate::proto::http1::Keep;
use crate::proto::session::Session;
use crate::proto::{http2, http3};
use crate::redirect::Place;
use crate::rows::Row;

pub(crate) mod dest;

/// A VU's own multiplexed connection.
enum Own {
    Http2(http2::Own),
    Http3(http3::Own),
}

impl Own {
    fn id(&self) -> u64 {
        match self {
            Own::Http2(c) => c.id(),
            Own::Http3(c) => c.id(),
        }
    }

    /// Closes it, recording its end.
    fn close(self, ctx: &Ctx) {
        match self {
            Own::Http2(c) => c.close(ctx),
            Own::Http3(c) => c.close(ctx),
        }
    }
}

/// A VU's HTTP/2 connection in its [`Conns`].
const HTTP2: usize = 0;
/// A VU's HTTP/3 connection in its [`Conns`].
const HTTP3: usize = 1;

/// Which of a VU's connections speaks `http` (HTTP/2 or HTTP/3).
fn slot(http: HttpVersion) -> usize {
    match http {
        HttpVersion::Http3 => HTTP3,
        _ => HTTP2,
    }
}

/// A VU's multiplexed connections, one per protocol its requests speak,
/// opened at first use (boxed: HTTP/1.1 VUs do not pay for them).
#[derive(Default)]
pub(crate) struct Conns([Option<Box<Own>>; 2]);

impl Conns {
    /// The number (rows) of its connection speaking `http`, if it has one.
    pub(crate) fn id(&self, http: HttpVersion) -> Option<u64> {
        self.0[slot(http)].as_ref().map(|c| c.id())
    }

    /// Closes every one, recording their ends.
    pub(crate) fn close_all(&mut self, ctx: &Ctx) {
        for c in &mut self.0 {
            if let Some(c) = c.take() {
                c.close(ctx);
            }
        }
    }

    /// Closes its connection speaking `http` when no new stream may go on
    /// it (lost, or going away after a GOAWAY): the next step goes on a
    /// new one.
    pub(crate) async fn drop_unusable(&mut self, ctx: &Ctx, http: HttpVersion, limit: Duration) {
        let i = slot(http);
        let usable = match self.0[i].as_deref() {
            Some(Own::Http2(c)) => c.ready(limit).await,
            Some(Own::Http3(c)) => c.alive(),
            None => true,
        };
        if !usable && let Some(c) = self.0[i].take() {
            c.close(ctx);
        }
    }

    /// True when it has a connection speaking `http`.
    pub(crate) fn has(&self, http: HttpVersion) -> bool {
        self.0[slot(http)].is_some()
    }

    /// Opens its connection speaking `http` by `conn`'s route (HTTP/3:
    /// with `quic`'s client, to the route's first address; else HTTP/2,
    /// with `conn`'s TLS client), recorded in `row`; its number.
    pub(crate) async fn open(
        &mut self,
        ctx: &Ctx,
        http: HttpVersion,
        conn: &crate::targets::Dest,
        quic: Option<&(quinn::ClientConfig, String)>,
        sleep: Pin<&mut Sleep>,
        row: Option<&mut Row<'_>>,
    ) -> Result<u64, ErrorClass> {
        let opened = match (quic, http) {
            (Some((client, name)), HttpVersion::Http3) => {
                // Invariant: a route has an address (an empty resolution
                // is refused before the run); the fallback keeps this total.
                let addr = conn.route.addrs.first().copied();
                match addr {
                    Some(a) => Box::pin(http3::Own::open(ctx, client, name, a)).await.map(Own::Http3),
                    None => Err(ErrorClass::Refused),
                }
            }
            _ => Box::pin(http2::Own::open(ctx, &conn.route, conn.tls.as_ref(), sleep, row))
                .await
                .map(Own::Http2),
        }?;
        let id = opened.id();
        self.0[slot(http)] = Some(Box::new(opened));
        Ok(id)
    }

    /// One request as a stream on its connection speaking `http`, as
    /// [`http2::Own::exchange`] and [`http3::Own::exchange`] do it (a
    /// failed stream counts what it wrote, as the pool's streams).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn exchange(
        &mut self,
        ctx: &Ctx,
        http: HttpVersion,
        request: http::Request<()>,
        body: &Bytes,
        request_len: usize,
        stream: &mut http2::Slot,
        sleep: Pin<&mut Sleep>,
    ) -> Result<Timing, Failed> {
        match self.0[slot(http)].as_deref_mut() {
            Some(Own::Http2(c)) => c.exchange(ctx, request, body, request_len, stream, sleep).await,
            Some(Own::Http3(c)) => c.exchange(ctx, request, body, request_len, stream, sleep).await,
            None => Err(Failed {
                class: ErrorClass::Protocol,
                written: 0,
            }),
        }
    }

    /// A gRPC call on its HTTP/2 connection, as [`http2::Own::call`]
    /// makes it; None when it has none.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call(
        &self,
        ctx: &Ctx,
        request: http::Request<()>,
        body: &Bytes,
        shape: http2::CallShape<'_>,
        deadline: bool,
        expect: &StatusSet,
        stream: &mut http2::Slot,
        sleep: Pin<&mut Sleep>,
    ) -> Option<Result<Timing, Failed>> {
        let Some(Own::Http2(c)) = self.0[HTTP2].as_deref() else {
            return None;
        };
        Some(c.call(ctx, request, body, shape, deadline, expect, stream, sleep).await)
    }

    /// A request whose response is an event stream on its connection
    /// speaking `http`, as [`http2::Own::sse`] and [`http3::Own::sse`]
    /// read it; None when it has none.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn sse(
        &mut self,
        ctx: &Ctx,
        http: HttpVersion,
        request: http::Request<()>,
        body: &Bytes,
        request_len: usize,
        stream: &mut http2::Slot,
        watch: &mut crate::proto::events::Watch,
        sleep: Pin<&mut Sleep>,
        bounds: http2::Bounds<'_, '_>,
    ) -> Option<Result<(Timing, crate::proto::http1::EndedEarly), Failed>> {
        Some(match self.0[slot(http)].as_deref_mut()? {
            Own::Http2(c) => {
                c.sse(ctx, request, body, request_len, stream, watch, sleep, bounds)
                    .await
            }
            Own::Http3(c) => {
                c.sse(ctx, request, body, request_len, stream, watch, sleep, bounds)
                    .await
            }
        })
    }
}

/// Makes `session` read a stream's response (HTTP/2 or HTTP/3, a
/// [`http2::Slot`]), kept when it already does.
pub(crate) fn stream_session(session: &mut Session) {
    if !matches!(session, Session::Http2(_)) {
        *session = Session::Http2(Box::new(http2::Slot::new(false)));
    }
}

/// The stream slot `session` reads into, when it reads a stream's.
pub(crate) fn stream_slot(session: &mut Session) -> Option<&mut http2::Slot> {
    match session {
        Session::Http2(slot) => Some(&mut **slot),
        Session::Http1(_) => None,
    }
}

/// The stream response `session` read, when it reads a stream's.
pub(crate) fn stream_reply(session: &Session) -> Option<&http2::Slot> {
    match session {
        Session::Http2(slot) => Some(&**slot),
        Session::Http1(_) => None,
    }
}

/// One hop of an HTTP/2 or HTTP/3 step: where, what.
pub(crate) struct Hop<'a> {
    pub(crate) place: &'a Place,
    pub(crate) method: &'a str,
    pub(crate) headers: &'a [(String, String)],
    pub(crate) body: &'a Bytes,
    pub(crate) keep: Keep,
    pub(crate) timeout: Duration,
}

/// Sends `hop` on `other`'s connection, opened for it when there is none to
/// that origin: to `https://` offering ALPN h2 and http/1.1, and speaking
/// what the server chose; to `http://`, HTTP/1.1. Its response is read
/// into `away`. The outcome, the request's size and when it went; Err: it
/// could not be sent, and why.
pub(crate) async fn away_hop(
    ctx: &Ctx,
    other: &mut crate::redirect::Elsewhere<'_>,
    away: &mut Option<Session>,
    hop: &Hop<'_>,
    mut sleep: std::pin::Pin<&mut tokio::time::Sleep>,
) -> Result<(Result<crate::conn::Timing, crate::conn::Failed>, usize, Instant), ErrorClass> {
    let place = hop.place;
    other.go(place);
    if other.h2.as_ref().is_some_and(|o| !o.alive()) {
        other.close();
    }
    if place.https && other.conn.is_none() && other.h2.is_none() {
        sleep.as_mut().reset((Instant::now() + hop.timeout).into());
        let d = crate::redirect::dest(ctx, place).await?;
        // Invariant: `dest` gives an https origin a TLS client, or fails.
        let Some(mut tls) = d.tls else {
            return Err(crate::redirect::SCHEME);
        };
        let mut config = throng_tls::rustls::ClientConfig::clone(&tls.config);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        tls.config = Arc::new(config);
        let opening = open_connection_to(ctx, &d.route, Some(&tls), &[], None, false, sleep.as_mut(), None);
        let ready = Box::pin(opening).await?;
        let h2 = matches!(&ready.conn.stream, crate::transport::Transport::Tls(s)
            if s.tls.alpn_protocol() == Some(b"h2"));
        if h2 {
            other.h2 = Some(Box::pin(crate::proto::http2::Own::over(ctx, ready.conn, sleep.as_mut())).await?);
        } else {
            other.conn = Some(ready.conn);
        }
    }
    let head = hop.method.eq_ignore_ascii_case("HEAD");
    if let Some(own) = other.h2.as_ref() {
        if !matches!(away, Some(Session::Http2(s)) if s.head_request() == head) {
            *away = Some(Session::Http2(Box::new(crate::proto::http2::Slot::new(head))));
        }
        let Some(Session::Http2(slot)) = away.as_mut() else {
            // Invariant: set just above.
            return Err(ErrorClass::Protocol);
        };
        slot.reset(hop.keep);
        let Some((request, request_len)) =
            stream_request(hop.method, place, hop.headers, hop.body.len(), HttpVersion::Http2)
        else {
            return Err(ErrorClass::Protocol);
        };
        let t_send = Instant::now();
        sleep.as_mut().reset((t_send + hop.timeout).into());
        let outcome = own.exchange(ctx, request, hop.body, request_len, slot, sleep).await;
        return Ok((outcome, request_len, t_send));
    }
    if !matches!(away, Some(s @ Session::Http1(_)) if s.head_request() == head) {
        *away = Some(Session::new(head));
    }
    let Some(s) = away.as_mut() else {
        // Invariant: set just above.
        return Err(ErrorClass::Protocol);
    };
    s.reset(hop.keep);
    let mut bytes = RequestHead {
        method: hop.method,
        target: &place.target,
        authority: &place.authority(),
        headers: hop.headers,
        body_len: hop.body.len(),
        close: false,
    }
    .to_vec();
    bytes.extend_from_slice(hop.body);
    let via = crate::redirect::Via::Elsewhere(place);
    crate::redirect::hop_exchange(ctx, &mut other.conn, via, &bytes, s, hop.timeout, sleep)
        .await
        .map(|(outcome, t_send)| (outcome, bytes.len(), t_send))
}

/// A rendered request as HTTP/2 or HTTP/3 parts (`:authority` from a Host
/// header the file gives, else the target's), and its size as counted
/// in `sent`: header fields decoded (name, value and 4 bytes each,
/// pseudo-headers included) and the body. None when a header cannot be
/// sent in this form.
pub(crate) fn stream_request(
    method: &str,
    place: &Place,
    headers: &[(String, String)],
    body_len: usize,
    http: HttpVersion,
) -> Option<(http::Request<()>, usize)> {
    let scheme = if place.https || http == HttpVersion::Http3 {
        "https"
    } else {
        "http"
    };
    let authority = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or_else(|| place.authority().to_string(), |(_, v)| v.clone());
    let uri = http::Uri::builder()
        .scheme(scheme)
        .authority(authority.as_str())
        .path_and_query(place.target.as_str())
        .build()
        .ok()?;
    let mut request = http::Request::new(());
    *request.method_mut() = http::Method::from_bytes(method.as_bytes()).ok()?;
    let map = request.headers_mut();
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("user-agent")) {
        let ua = concat!("throng/", env!("CARGO_PKG_VERSION"));
        map.insert(http::header::USER_AGENT, http::HeaderValue::from_static(ua));
    }
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if http2::CONNECTION_SPECIFIC.contains(&lower.as_str()) {
            continue;
        }
        let n = http::HeaderName::from_bytes(lower.as_bytes()).ok()?;
        let v = http::HeaderValue::from_str(value).ok()?;
        map.append(n, v);
    }
    if body_len > 0 {
        map.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body_len));
    }
    let size = method.len()
        + 11
        + scheme.len()
        + 11
        + authority.len()
        + 14
        + place.target.len()
        + 9
        + map.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>()
        + body_len;
    *request.uri_mut() = uri;
    Some((request, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_request_carries_what_http2_allows() {
        let place = Place {
            https: false,
            host: "127.0.0.1".into(),
            port: 8080,
            target: "/me?x=1".into(),
        };
        let h = |n: &str, v: &str| (n.to_string(), v.to_string());
        let headers = [
            h("Host", "api.test"),
            h("Connection", "keep-alive"),
            h("X-Token", "t-42"),
        ];
        let (req, size) = stream_request("POST", &place, &headers, 5, HttpVersion::Http2).unwrap();
        assert_eq!(req.uri().to_string(), "http://api.test/me?x=1");
        assert_eq!(req.method(), "POST");
        let names: Vec<&str> = req.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["user-agent", "x-token", "content-length"]);
        assert_eq!(req.headers()["content-length"], "5");
        // Pseudo-headers, the three fields (name, value, 4 bytes each), the body.
        let ua = concat!("throng/", env!("CARGO_PKG_VERSION")).len();
        let fields = (10 + ua + 4) + (7 + 4 + 4) + (14 + 1 + 4);
        assert_eq!(size, (4 + 11) + (4 + 11) + (8 + 14) + (7 + 9) + fields + 5);
        // HTTP/3 is always https; a user's User-Agent replaces throng's.
        let (req, _) = stream_request("GET", &place, &[h("User-Agent", "me")], 0, HttpVersion::Http3).unwrap();
        assert_eq!(req.uri().to_string(), "https://127.0.0.1:8080/me?x=1");
        assert_eq!(req.headers()["user-agent"], "me");
        assert!(req.headers().get("content-length").is_none());
        // A method HTTP/2 cannot carry is never sent.
        assert!(stream_request("GE T", &place, &[], 0, HttpVersion::Http2).is_none());
    }
}
