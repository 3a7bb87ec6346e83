//! Before the run: does the server speak HTTP/3? One QUIC handshake on a
//! thread and runtime of its own.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// How long an HTTP/3 preflight may take at most, whatever the plan's
/// timeout says.
const PREFLIGHT_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Before the run: does the server at `addr` speak HTTP/3? One QUIC
/// handshake with ALPN `h3` tells, on a thread and runtime of its own (the
/// caller may be inside one). Some(what happened instead) when nothing
/// answered in time or the handshake failed; None when it succeeded or
/// the check could not be made here (no socket, no runtime).
pub(crate) fn preflight(
    addr: SocketAddr,
    client: &quinn::ClientConfig,
    server_name: &str,
    timeout: std::time::Duration,
) -> Option<String> {
    let timeout = timeout.min(PREFLIGHT_LIMIT);
    let check = || -> Option<String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let bind: SocketAddr = match addr {
                SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
                SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
            };
            let endpoint = quinn::Endpoint::client(bind).ok()?;
            let connecting = endpoint.connect_with(client.clone(), addr, server_name).ok()?;
            let spoke = match tokio::time::timeout(timeout, connecting).await {
                Ok(Ok(c)) => {
                    c.close(0u32.into(), b"");
                    None
                }
                Ok(Err(e)) => Some(format!("a failed QUIC handshake: {e}")),
                Err(_) => Some(format!(
                    "no QUIC handshake on UDP port {} within {} ms",
                    addr.port(),
                    timeout.as_millis()
                )),
            };
            endpoint.close(0u32.into(), b"");
            spoke
        })
    };
    std::thread::scope(|s| s.spawn(check).join().ok().flatten())
}
