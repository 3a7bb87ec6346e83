//! Where a run's connections go: every address the target's name resolves
//! to (or an override's, or the proxy's), tried in order; and the CONNECT
//! tunnel through an HTTP proxy.

use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;

use throng_metrics::ErrorClass;
use throng_plan::{Family, Reach};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::EngineError;

/// The most addresses a route keeps (a name with more is unusual; the
/// first ones are tried).
pub(crate) const MAX_ADDRS: usize = 16;
/// The longest answer to CONNECT read (status line and headers).
const MAX_CONNECT_ANSWER: usize = 16 << 10;

/// Where one run's connections go.
#[derive(Debug)]
pub(crate) struct Route {
    /// Addresses to connect to, in the order tried (deduplicated).
    pub addrs: Vec<SocketAddr>,
    /// Through a proxy: the CONNECT request to send first, when the
    /// connection is a tunnel (TLS, storms); None for plain http, whose
    /// requests name the whole URL instead.
    pub tunnel: Option<Vec<u8>>,
    /// True when `addrs` are a proxy's.
    pub proxied: bool,
}

/// The route to `host:port` under `reach`. `tunnel`: a proxy, if any, is
/// asked to CONNECT (else the requests go to it in absolute form).
pub(crate) fn route(host: &str, port: u16, reach: &Reach, tunnel: bool) -> Result<Route, EngineError> {
    let over = reach.override_for(host, port);
    // What TCP (or CONNECT) reaches: the override's, else the target's.
    let to_port = over.and_then(|o| o.to_port).unwrap_or(port);
    let to_hosts: Vec<&str> = match over {
        Some(o) if !o.to.is_empty() => o.to.iter().map(String::as_str).collect(),
        _ => vec![host],
    };
    if let Some(proxy) = &reach.proxy {
        let addrs = resolve_all(
            &proxy.host,
            proxy.port,
            reach.family,
            &format!("the proxy's host, from {}", proxy.from),
        )?;
        let tunnel = tunnel.then(|| {
            let to = throng_plan::Authority::new(to_hosts[0], to_port, 0).to_string();
            let mut req = format!("CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n");
            if let Some(auth) = &proxy.authorization {
                req.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
            }
            req.push_str("\r\n");
            req.into_bytes()
        });
        return Ok(Route {
            addrs,
            tunnel,
            proxied: true,
        });
    }
    let what = if over.is_some() {
        "--connect-to/--resolve"
    } else {
        "the URL's host"
    };
    let mut addrs = Vec::new();
    for h in to_hosts {
        for a in resolve_all(h, to_port, None, what)? {
            if !addrs.contains(&a) && addrs.len() < MAX_ADDRS {
                addrs.push(a);
            }
        }
    }
    let addrs = of_family(addrs, reach.family);
    if addrs.is_empty() {
        return Err(EngineError::Resolve {
            host: host.to_string(),
            reason: format!("{} ({what})", no_address(reach.family)),
        });
    }
    Ok(Route {
        addrs,
        tunnel: None,
        proxied: false,
    })
}

/// Every address `host:port` resolves to (at most [`MAX_ADDRS`]), of
/// `family` if given; `what` says whose host it is in the error.
pub(crate) fn resolve_all(
    host: &str,
    port: u16,
    family: Option<Family>,
    what: &str,
) -> Result<Vec<SocketAddr>, EngineError> {
    let fail = |reason: String| EngineError::Resolve {
        host: host.to_string(),
        reason: format!("{reason} ({what})"),
    };
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in (host, port).to_socket_addrs().map_err(|e| fail(e.to_string()))? {
        if !out.contains(&a) && out.len() < MAX_ADDRS {
            out.push(a);
        }
    }
    let kept = of_family(out, family);
    if kept.is_empty() {
        return Err(fail(no_address(family)));
    }
    Ok(kept)
}

pub(crate) fn of_family(addrs: Vec<SocketAddr>, family: Option<Family>) -> Vec<SocketAddr> {
    addrs
        .into_iter()
        .filter(|a| match family {
            Some(Family::V4) => a.is_ipv4(),
            Some(Family::V6) => a.is_ipv6(),
            None => true,
        })
        .collect()
}

fn no_address(family: Option<Family>) -> String {
    match family {
        Some(Family::V4) => "it has no IPv4 address, and -4 asks for one; leave -4 out".to_string(),
        Some(Family::V6) => "it has no IPv6 address, and -6 asks for one; leave -6 out".to_string(),
        None => "no addresses".to_string(),
    }
}

/// True when a failed connect to one address is worth trying the next
/// for: nothing there, or no route to it. A timeout has spent the budget.
pub(crate) fn try_next(class: ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::Refused
            | ErrorClass::AddrUnavailable
            | ErrorClass::Other("ENETUNREACH" | "EHOSTUNREACH" | "EAFNOSUPPORT" | "EADDRNOTAVAIL")
    )
}

/// Asks the proxy on `stream` to CONNECT (`request`), within the deadline
/// `sleep` was armed with; after a 2xx the stream is a tunnel to the target.
pub(crate) async fn connect_tunnel(
    stream: &mut TcpStream,
    request: &[u8],
    sleep: Pin<&mut Sleep>,
) -> Result<(), ErrorClass> {
    let work = async {
        stream
            .write_all(request)
            .await
            .map_err(|e| crate::errors::classify(&e, crate::errors::Stage::Connect))?;
        let mut buf = Vec::with_capacity(512);
        let mut chunk = [0u8; 1024];
        loop {
            // Read no further than the answer's end: what follows is the target's.
            let n = stream
                .read(&mut chunk[..1])
                .await
                .map_err(|e| crate::errors::classify(&e, crate::errors::Stage::Connect))?;
            if n == 0 {
                return Err(ErrorClass::Proxy("closed"));
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.ends_with(b"\r\n\r\n") {
                break;
            }
            if buf.len() > MAX_CONNECT_ANSWER {
                return Err(ErrorClass::Proxy("protocol"));
            }
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err(ErrorClass::Proxy("protocol")),
        }
        match answer.code.unwrap_or(0) {
            200..=299 => Ok(()),
            407 => Err(ErrorClass::Proxy("auth_required")),
            403 => Err(ErrorClass::Proxy("forbidden")),
            500..=599 => Err(ErrorClass::Proxy("bad_gateway")),
            _ => Err(ErrorClass::Proxy("refused")),
        }
    };
    // The proxy took the TCP connection but said nothing in time: its
    // fault, not the target's (which it may never have tried).
    tokio::select! {
        biased;
        r = work => r,
        () = sleep => Err(ErrorClass::Proxy("timeout")),
    }
}
