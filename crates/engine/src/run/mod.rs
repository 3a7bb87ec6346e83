//! The run setups: each turns a validated plan (and the cli's TLS client)
//! into one [`WorkerSpec`](crate::load::WorkerSpec) per worker and a
//! [`Launch`](crate::coordinate::Launch), checks what must hold before the
//! clock starts (descriptors, TLS names, the pre-run protocol checks in
//! `preflight.rs`), hands the launch to the coordinator and dresses its
//! result.
//!
//! `http.rs`: `throng http`/`grpc` (closed and open loops, HTTP/1.1, /2,
//! /3). `storm.rs`: `throng storm`. `scenario.rs`: `throng run`. `mqtt.rs`: `throng mqtt`
//! (on the caller's thread, no workers). What they
//! share is here.

mod http;
mod mqtt;
mod scenario;
mod storm;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use throng_tls::rustls::ClientConfig;
use throng_tls::rustls::pki_types::ServerName;

use crate::error::{EngineError, TlsSetup};
use crate::sys;
use crate::transport::TlsClient;

pub use http::run_http;
pub use mqtt::run_mqtt;
pub use scenario::{OnceRun, ScenarioOptions, add_once_rows, run_scenario, run_setup_flow, run_teardown_flow};
pub use storm::{StormPart, run_storm, storm_peak_estimate};

/// Descriptors a process needs besides its connections (runtimes, stdio).
const FD_RESERVE_PER_WORKER: u64 = 8;
const FD_RESERVE: u64 = 32;

/// Resolves a host to its first address.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, EngineError> {
    let fail = |reason: String| EngineError::Resolve {
        host: host.to_string(),
        reason,
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("no addresses".to_string()))
}

/// The TLS client a plan needs: none for a plain target, the given
/// configuration with the plan's server name (or `host`) for a TLS one;
/// or why the name cannot be used.
pub(crate) fn plan_tls(
    settings: Option<&throng_plan::TlsSettings>,
    config: Option<Arc<ClientConfig>>,
    host: &str,
    what: &str,
) -> Result<Option<TlsClient>, EngineError> {
    match (settings, config) {
        (Some(settings), Some(config)) => Ok(Some(tls_client(
            config,
            settings.server_name.as_deref().unwrap_or(host),
        )?)),
        (Some(_), None) => Err(TlsSetup::NoClientConfig { what: what.to_string() }.into()),
        (None, _) => Ok(None),
    }
}

fn tls_client(config: Arc<ClientConfig>, name: &str) -> Result<TlsClient, TlsSetup> {
    let server_name = ServerName::try_from(name.to_string()).map_err(|reason| TlsSetup::ServerName {
        name: name.to_string(),
        reason,
    })?;
    Ok(TlsClient { config, server_name })
}

/// Fails before starting when `connections` open at once would not fit the
/// descriptor limit (raised to the hard limit first).
fn check_fds(connections: u64, threads: u32) -> Result<(), EngineError> {
    let (soft, hard) = sys::raise_fd_limit();
    let reserve = FD_RESERVE_PER_WORKER * u64::from(threads) + FD_RESERVE;
    let needed = connections + reserve;
    if needed > soft {
        return Err(EngineError::FdLimit {
            needed,
            soft,
            hard,
            fit: soft.saturating_sub(reserve),
        });
    }
    Ok(())
}

/// Descriptors one process can spend on connections after its reserve.
pub fn connections_per_process(threads: u32) -> u64 {
    let (soft, _) = sys::raise_fd_limit();
    soft.saturating_sub(FD_RESERVE_PER_WORKER * u64::from(threads) + FD_RESERVE)
}
