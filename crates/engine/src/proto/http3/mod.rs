//! HTTP/3 over QUIC (quinn + h3): a connection carries up to `streams`
//! requests at once, each on its own bidirectional stream.
//!
//! ```text
//!  closed loop: one task per connection
//!     │ open: UDP socket (its own quinn Endpoint) ─► QUIC handshake ─► h3 SETTINGS
//!     │       recorded as the `tls` phase (QUIC's handshake is TLS 1.3's)
//!     ├─ h3 driver (control streams, GOAWAY, close)
//!     └─ `streams` stream tasks, each request after request:
//!          send headers (+ body), finish ─► wait ─► response head ─► body
//!          └─ record: send / wait / receive / response / latency, ok or h3.* / quic.*
//! ```
//!
//! A stream reset fails its request only; a connection error (close, idle
//! timeout, stateless reset) fails every request in flight on it, and the
//! loop opens a new connection for the next. Every request taken from the
//! budget ends in exactly one outcome.
//!
//! The files: `slot.rs` (a connection slot and its request loops), `conn.rs`
//! (opening a connection), `stream.rs` (one request on a stream), `sse.rs`
//! (its body read as an event stream, with `--sse` or `--llm`),
//! `redirect.rs` (its redirects), `storm.rs` (a storm's held connection),
//! `scenario.rs` (a VU's own connection), `errors.rs` (failures as classes),
//! `check.rs` (the pre-run check), `socket.rs` (the worker's UDP socket,
//! with the kernel's receive stamps and the send instants); here, the request every connection sends
//! (`H3Spec`) and where the loops take their requests from (`Starts`).

mod check;
mod conn;
mod errors;
mod redirect;
mod scenario;
mod send;
mod slot;
pub(crate) mod socket;
mod sse;
mod state;
mod storm;
mod stream;

use std::sync::Arc;

use bytes::Bytes;
use throng_plan::HttpPlan;

pub(crate) use check::preflight;
pub(crate) use scenario::Own;
pub(crate) use slot::connection_slot;

pub(crate) use crate::proto::starts::Starts;
pub(crate) use storm::{Held, storm_establish};

/// The largest response header section accepted (decoded), as HTTP/1.1's
/// 64 KiB head limit: a larger one is `h3.header_too_big`.
const MAX_HEADER_SECTION: u64 = 64 * 1024;

/// The code a connection is closed with when done (RFC 9114 8.1).
const H3_NO_ERROR: u32 = 0x100;

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// What every HTTP/3 connection of a run needs: the QUIC client
/// configuration and the request, made once.
pub(crate) struct H3Spec {
    pub client: quinn::ClientConfig,
    pub server_name: String,
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// The request's size as counted in `sent`: its header fields decoded
    /// (name, value and 4 bytes each, pseudo-headers included, as
    /// received headers are counted) and its body. QPACK's wire size is
    /// not known.
    pub request_len: u64,
    /// Requests in flight per connection, at most (the server's
    /// MAX_STREAMS may allow fewer: opening a stream then waits).
    pub streams: u32,
}

impl std::fmt::Debug for H3Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3Spec")
            .field("server_name", &self.server_name)
            .field("uri", &self.uri)
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
}

/// Headers HTTP/3 forbids (connection-specific) or carries as pseudo-headers.
const NOT_IN_H3: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// TLS settings a QUIC connection cannot use (not TLS 1.3).
#[derive(Debug, thiserror::Error)]
#[error("the TLS settings cannot carry QUIC ({0}); QUIC needs TLS 1.3")]
pub(crate) struct NoQuic(#[source] quinn::crypto::rustls::NoInitialCipherSuite);

/// Why a plan's request cannot be sent over HTTP/3 (what the user sees,
/// naming the flag to change).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpecError {
    #[error("--http3: {0}")]
    Quic(#[source] NoQuic),
    #[error("--method '{0}' is not an HTTP method")]
    Method(String),
    #[error("'{url}' cannot be an HTTP/3 request target ({source})")]
    Target { url: String, source: http::Error },
    #[error("--header '{0}': not a header name HTTP/3 can carry")]
    HeaderName(String),
    #[error("--header '{0}': its value cannot be sent")]
    HeaderValue(String),
}

/// The QUIC client of `tls` (its ALPN becomes `h3`), or why it cannot be
/// one.
pub(crate) fn quic_client(tls: &throng_tls::rustls::ClientConfig) -> Result<quinn::ClientConfig, NoQuic> {
    // quinn accepts a configuration without TLS 1.3 here and panics on the
    // first connection: plans refuse TLS 1.2 with HTTP/3.
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = false;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(NoQuic)?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// The parts of a request an [`H3Spec`] is made from.
struct Head<'a> {
    method: &'a str,
    authority: String,
    path: &'a str,
    /// For messages.
    url: &'a str,
    headers: &'a [(String, String)],
}

impl H3Spec {
    /// The HTTP/3 form of `plan`'s request, sent with `tls` (its ALPN
    /// becomes `h3`; QUIC needs TLS 1.3).
    pub(crate) fn new(
        plan: &HttpPlan,
        tls: &throng_tls::rustls::ClientConfig,
        server_name: String,
        streams: u32,
    ) -> Result<H3Spec, SpecError> {
        // With trace context, the placeholder counts in the request's size;
        // each request sets its own value (stream.rs).
        let traced;
        let headers = if plan.trace.is_some() {
            let mut h = plan.headers.clone();
            h.push((
                throng_plan::TRACEPARENT.to_string(),
                throng_plan::placeholder_value().to_string(),
            ));
            traced = h;
            &traced
        } else {
            &plan.headers
        };
        let head = Head {
            method: &plan.method,
            authority: plan.target.authority(),
            path: &plan.target.path,
            url: &plan.target.url,
            headers,
        };
        H3Spec::build(tls, server_name, &head, plan.body.clone(), streams)
    }

    /// A storm's: each connection makes at most the plan's one request
    /// (`GET /` when it names none), without headers or body.
    pub(crate) fn for_storm(
        plan: &throng_plan::StormPlan,
        tls: &throng_tls::rustls::ClientConfig,
    ) -> Result<H3Spec, SpecError> {
        let (method, path) = plan
            .request
            .as_ref()
            .map_or(("GET", "/"), |r| (r.method.as_str(), r.path.as_str()));
        let server_name = plan
            .tls
            .as_ref()
            .and_then(|t| t.server_name.clone())
            .unwrap_or_else(|| plan.target.host.clone());
        let head = Head {
            method,
            authority: throng_plan::Authority::new(&plan.target.host, plan.target.port, 443).to_string(),
            path,
            url: &plan.target.url,
            headers: &[],
        };
        H3Spec::build(tls, server_name, &head, Bytes::new(), 1)
    }

    fn build(
        tls: &throng_tls::rustls::ClientConfig,
        server_name: String,
        head: &Head<'_>,
        body: Bytes,
        streams: u32,
    ) -> Result<H3Spec, SpecError> {
        let client = quic_client(tls).map_err(SpecError::Quic)?;
        let method =
            http::Method::from_bytes(head.method.as_bytes()).map_err(|_| SpecError::Method(head.method.to_string()))?;
        let uri = http::Uri::builder()
            .scheme("https")
            .authority(head.authority.as_str())
            .path_and_query(head.path)
            .build()
            .map_err(|source| SpecError::Target {
                url: head.url.to_string(),
                source,
            })?;
        let mut headers = http::HeaderMap::new();
        let ua = concat!("throng/", env!("CARGO_PKG_VERSION"));
        headers.insert(http::header::USER_AGENT, http::HeaderValue::from_static(ua));
        for (name, value) in head.headers {
            let lower = name.to_ascii_lowercase();
            if NOT_IN_H3.contains(&lower.as_str()) {
                continue;
            }
            let name =
                http::HeaderName::from_bytes(lower.as_bytes()).map_err(|_| SpecError::HeaderName(name.clone()))?;
            let value = http::HeaderValue::from_str(value).map_err(|_| SpecError::HeaderValue(name.to_string()))?;
            headers.append(name, value);
        }
        if !body.is_empty() && !headers.contains_key(http::header::CONTENT_LENGTH) {
            headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(body.len()));
        }
        let pseudo = [
            (":method", method.as_str().len()),
            (":scheme", 5),
            (":authority", uri.authority().map_or(0, |a| a.as_str().len())),
            (":path", uri.path_and_query().map_or(1, |p| p.as_str().len())),
        ];
        let request_len = pseudo.iter().map(|(n, v)| n.len() + v + 4).sum::<usize>()
            + headers
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>()
            + body.len();
        Ok(H3Spec {
            request_len: request_len as u64,
            client,
            server_name,
            method,
            uri,
            headers,
            body,
            streams: streams.max(1),
        })
    }

    fn request(&self) -> http::Request<()> {
        let mut req = http::Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}
