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
    throng_engine::sys::raise_fd_limit();
    let server = LabServer::start(&LabConfig {
        listen: c.listen,
        threads,
        stall,
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
    eprintln!(
        "throng lab server on http://{}/ ({threads} threads{stall_text}); Ctrl-C to stop",
        server.addr()
    );
    signals::wait_for_stop();
    server.stop();
    Ok(ExitCode::SUCCESS)
}
