//! One gRPC call before a run, outside the workers: what `throng grpc`
//! asks the server's reflection service when no `--proto` is given.
//!
//! ```text
//!  grpc_call(plan, tls, path, framed request messages)
//!     │ a runtime of its own (current thread), one connection:
//!     │ TCP (+ TLS, ALPN h2) ── HTTP/2 ── POST path, the messages, end of stream
//!     ▼
//!  Reply { status (trailers), message, the reply's messages (unframed) }
//! ```
//!
//! Bounded: `plan.timeout` (at most [`LIMIT`]) for the whole call, and the
//! reply's bytes by the caller's `max_bytes`.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use throng_plan::HttpPlan;
use throng_tls::rustls::ClientConfig;

use crate::errors::{Stage, classify};
use crate::proto::http1::Keep;
use crate::proto::http2::Slot;
use crate::transport::Transport;

/// The longest a call may take, whatever `--timeout` says.
pub const LIMIT: Duration = Duration::from_secs(10);

/// How a call ended with an answer.
#[derive(Debug)]
pub struct Reply {
    /// The gRPC status (trailers, or headers for a trailers-only answer).
    pub status: u16,
    /// `grpc-message`, when the server gave one.
    pub message: Option<String>,
    /// The reply's messages, without their 5-byte prefixes.
    pub messages: Vec<Bytes>,
}

/// Why a call got no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The plan cannot be carried out (TLS server name, address).
    #[error(transparent)]
    Setup(#[from] crate::EngineError),
    /// The server could not be reached or spoke no HTTP/2: the class
    /// (`refused`, `tls.*`, `h2.*`, `timeout.*`) and what it means.
    #[error("{0}")]
    Unreachable(String),
    /// The answer broke the protocol or its bound.
    #[error("{0}")]
    Protocol(String),
}

/// Calls `path` (`/pkg.Service/Method`) on the plan's target once, sending
/// `body` (framed request messages) and ending the stream; returns the
/// status and the reply's messages, at most `max_bytes` of them.
pub fn grpc_call(
    plan: &HttpPlan,
    tls: Option<Arc<ClientConfig>>,
    path: &str,
    body: Bytes,
    max_bytes: usize,
) -> Result<Reply, CallError> {
    let https = plan.target.scheme == throng_plan::Scheme::Https;
    let route = crate::reach::route(&plan.target.host, plan.target.port, &plan.reach, https)?;
    let Some(&addr) = route.addrs.first() else {
        return Err(CallError::Unreachable(format!(
            "{} resolved to no address",
            plan.target.authority()
        )));
    };
    let tls = crate::plan_tls(plan.tls.as_ref(), tls, &plan.target.host, "a TLS gRPC call")?;
    let uri = http::Uri::builder()
        .scheme(if https { "https" } else { "http" })
        .authority(plan.target.authority().as_str())
        .path_and_query(path)
        .build()
        .map_err(|e| CallError::Protocol(format!("{path}: not a path HTTP/2 can send ({e})")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CallError::Unreachable(format!("cannot start a runtime: {e}")))?;
    let local = tokio::task::LocalSet::new();
    let limit = plan.timeout.min(LIMIT);
    let work = call(addr, tls, uri, body, max_bytes);
    local.block_on(&runtime, async {
        match tokio::time::timeout(limit, work).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Unreachable(format!(
                "timeout: {addr} did not answer within {}s",
                limit.as_secs_f64()
            ))),
        }
    })
}

fn unreachable(class: throng_metrics::ErrorClass) -> CallError {
    let name = class.name();
    CallError::Unreachable(format!("{name} ({})", throng_metrics::ErrorClass::describe(&name)))
}

async fn call(
    addr: std::net::SocketAddr,
    tls: Option<crate::transport::TlsClient>,
    uri: http::Uri,
    body: Bytes,
    max_bytes: usize,
) -> Result<Reply, CallError> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| unreachable(classify(&e, Stage::Connect)))?;
    let _ = tcp.set_nodelay(true);
    let stream = match tls {
        None => Transport::Plain(tcp),
        Some(t) => {
            let (conn, hello) =
                crate::tls_stream::start(t.config, t.server_name).map_err(|e| unreachable(classify(&e, Stage::Tls)))?;
            // Never fires: the whole call is under a timeout of its own.
            let sleep = std::pin::pin!(tokio::time::sleep(LIMIT * 2));
            let (stream, _, _) = crate::transport::handshake(tcp, conn, &hello, 0, true, sleep)
                .await
                .map_err(unreachable)?;
            if let Transport::Tls(s) = &stream
                && s.tls.alpn_protocol() != Some(b"h2")
            {
                return Err(CallError::Unreachable(format!(
                    "{addr} does not speak HTTP/2 over TLS (no ALPN h2)"
                )));
            }
            stream
        }
    };
    let mut request = http::Request::new(());
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = uri;
    let h = request.headers_mut();
    h.insert("content-type", http::HeaderValue::from_static("application/grpc"));
    h.insert("te", http::HeaderValue::from_static("trailers"));
    let mut slot = Slot::new(false);
    slot.reset(Keep {
        server: false,
        headers: true,
        body: max_bytes,
    });
    // Never fires: the whole call is under a timeout of its own.
    let sleep = std::pin::pin!(tokio::time::sleep(LIMIT * 2));
    crate::proto::http2::call_once(stream, &request, &body, true, &mut slot, sleep)
        .await
        .map_err(|class| match class {
            // An answer, but not one a gRPC client takes.
            throng_metrics::ErrorClass::Grpc(_) => {
                let name = class.name();
                CallError::Protocol(format!(
                    "its answer is not gRPC: {name} ({})",
                    throng_metrics::ErrorClass::describe(&name)
                ))
            }
            class => unreachable(class),
        })?;
    if slot.body_bytes > max_bytes as u64 {
        return Err(CallError::Protocol(format!(
            "the answer is larger than {} MiB; the server sent more than a reflection answer should be",
            max_bytes >> 20
        )));
    }
    // The trailers' message (kept after the headers) wins.
    let message = slot
        .headers()
        .iter()
        .rev()
        .find(|(n, _)| n == "grpc-message")
        .map(|(_, v)| v.clone());
    Ok(Reply {
        status: slot.status,
        message,
        messages: unframe(Bytes::copy_from_slice(slot.body()))?,
    })
}

/// The messages of a gRPC body (each a 5-byte prefix: compressed flag,
/// length; then the message).
fn unframe(mut body: Bytes) -> Result<Vec<Bytes>, CallError> {
    let mut messages = Vec::new();
    while !body.is_empty() {
        if body.len() < 5 {
            return Err(CallError::Protocol("the answer ends inside a message's prefix".into()));
        }
        let compressed = body[0] != 0;
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        body.advance(5);
        if compressed {
            return Err(CallError::Protocol(
                "the server compressed its answer, which throng did not ask for".into(),
            ));
        }
        if body.len() < len {
            return Err(CallError::Protocol("the answer ends inside a message".into()));
        }
        messages.push(body.split_to(len));
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unframes_messages_and_refuses_broken_ones() {
        let body = Bytes::from_static(&[0, 0, 0, 0, 2, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9]);
        let m = unframe(body).unwrap();
        assert_eq!(
            m,
            vec![Bytes::from_static(&[7, 8]), Bytes::new(), Bytes::from_static(&[9])]
        );
        assert!(unframe(Bytes::from_static(&[0, 0, 0])).is_err());
        assert!(unframe(Bytes::from_static(&[0, 0, 0, 0, 3, 1])).is_err());
        assert!(unframe(Bytes::from_static(&[1, 0, 0, 0, 1, 1])).is_err());
    }
}
