//! `throng serve`.

use std::process::ExitCode;

use anyhow::Context as _;
use throng_lab::{LabConfig, LabServer, Stall};

use super::UsageError;
use crate::args::ServeCmd;
use crate::signals;

pub fn run(c: ServeCmd) -> anyhow::Result<ExitCode> {
    let stall = match (c.stall_every, c.stall_for) {
        (Some(every), Some(duration)) => {
            if duration >= every || duration.is_zero() {
                return Err(UsageError(
                    "--stall-for must be longer than 0 and shorter than --stall-every, e.g. --stall-every 5s --stall-for 1s".into(),
                )
                .into());
            }
            Some(Stall { every, duration })
        }
        _ => None,
    };
    let threads = c.threads.unwrap_or_else(|| throng_engine::sys::cores() as usize);
    if threads == 0 {
        return Err(UsageError("--threads must be at least 1".into()).into());
    }
    let tls = match &c.tls {
        Some(dir) => {
            let cert = super::tls::read_in("--tls", dir, "server.pem")?;
            let key = super::tls::read_in("--tls", dir, "server.key")?;
            let ca = if c.mtls { Some(super::tls::read_in("--mtls", dir, "ca.pem")?) } else { None };
            Some(throng_tls::server_config(&cert, &key, ca.as_ref()).map_err(|e| UsageError(e.to_string()))?)
        }
        None => None,
    };
    throng_engine::sys::raise_fd_limit();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let server = LabServer::start(&LabConfig {
        listen: c.listen,
        threads,
        stall,
        tls,
    })
    .with_context(|| {
        format!(
            "cannot listen on {} (is the port in use? try --listen 127.0.0.1:0)",
            c.listen
        )
    })?;
    let stall_text = stall.map_or(String::new(), |s| {
        format!(
            ", silent for the last {} of every {}",
            throng_plan::format_duration(s.duration),
            throng_plan::format_duration(s.every)
        )
    });
    let mtls = if c.mtls { ", client certificates required" } else { "" };
    eprintln!(
        "throng lab server on {scheme}://{}/ ({threads} threads{stall_text}{mtls}); Ctrl-C to stop",
        server.addr()
    );
    signals::wait_for_stop();
    server.stop();
    Ok(ExitCode::SUCCESS)
}
