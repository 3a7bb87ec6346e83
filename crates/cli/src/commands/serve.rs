//! `throng serve`.

use std::process::ExitCode;

use anyhow::Context as _;
use std::num::NonZeroUsize;

use throng_lab::{AuthConfig, BcryptCost, Fault, FaultKind, H3Fault, H3Server, LabConfig, LabServer, Stall};

use crate::args::ServeCmd;
use crate::exit::UsageError;
use crate::signals;

/// Most server processes (each binds the port with SO_REUSEPORT): more is a
/// typo, not a plan, and would start that many processes.
const MAX_PROCS: u32 = 256;

/// Most threads per process, for serving and for hashing.
const MAX_THREADS: usize = 1024;

pub fn run(c: ServeCmd) -> anyhow::Result<ExitCode> {
    if c.http3 {
        return run_http3(&c);
    }
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
    let fault = match &c.fault {
        Some(name) => Some(name.parse::<Fault>().map_err(|e| UsageError(format!("--fault: {e}")))?),
        None => None,
    };
    let threads = c.threads.unwrap_or_else(|| throng_engine::sys::cores() as usize);
    if threads == 0 || threads > MAX_THREADS {
        return Err(UsageError(format!("--threads {threads}: give 1 to {MAX_THREADS}")).into());
    }
    if c.procs == 0 || c.procs > MAX_PROCS {
        return Err(UsageError(format!("--procs {}: give 1 to {MAX_PROCS}", c.procs)).into());
    }
    let mut auth = AuthConfig::default();
    auth.cost = BcryptCost::new(c.bcrypt_cost).map_err(|e| UsageError(format!("--bcrypt-cost: {e}")))?;
    auth.reveal_otp = c.reveal_otp;
    let hash_threads = c.hash_threads.unwrap_or_else(|| throng_engine::sys::cores() as usize);
    if hash_threads > MAX_THREADS {
        return Err(UsageError(format!("--hash-threads {hash_threads}: give 1 to {MAX_THREADS}")).into());
    }
    auth.hash_threads =
        NonZeroUsize::new(hash_threads).ok_or_else(|| UsageError("--hash-threads must be at least 1".into()))?;
    let tls = match &c.tls {
        Some(dir) => {
            let cert = super::tls::read_in("--tls", dir, "server.pem")?;
            let key = super::tls::read_in("--tls", dir, "server.key")?;
            let ca = if c.mtls {
                Some(super::tls::read_in("--mtls", dir, "ca.pem")?)
            } else {
                None
            };
            Some(throng_tls::server_config(&cert, &key, ca.as_ref()).map_err(|e| UsageError(e.to_string()))?)
        }
        None => None,
    };
    throng_engine::sys::raise_fd_limit();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let config = LabConfig {
        listen: c.listen,
        threads,
        stall,
        tls,
    };
    let started = match fault {
        Some(f) => LabServer::start_fault(&config, f),
        None if c.h2c => LabServer::start_h2c(&config, &auth),
        None => LabServer::start_with_auth(&config, &auth),
    };
    let server = started.with_context(|| {
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
    let h2c = if c.h2c { ", streams also over h2c" } else { "" };
    // More processes on the same port: each binds it with SO_REUSEPORT and
    // the kernel spreads new connections over them.
    let mut children = Vec::new();
    for _ in 1..c.procs.max(1) {
        let mut cmd = std::process::Command::new(std::env::current_exe().context("cannot find this program")?);
        cmd.args([
            "serve",
            "--listen",
            &server.addr().to_string(),
            "--threads",
            &threads.to_string(),
        ]);
        if let (Some(every), Some(f)) = (c.stall_every, c.stall_for) {
            cmd.args(["--stall-every", &throng_plan::format_duration(every)]);
            cmd.args(["--stall-for", &throng_plan::format_duration(f)]);
        }
        if let Some(dir) = &c.tls {
            cmd.arg("--tls").arg(dir);
        }
        if c.mtls {
            cmd.arg("--mtls");
        }
        cmd.args(["--bcrypt-cost", &c.bcrypt_cost.to_string()]);
        cmd.args(["--hash-threads", &hash_threads.to_string()]);
        if c.reveal_otp {
            cmd.arg("--reveal-otp");
        }
        if c.h2c {
            cmd.arg("--h2c");
        }
        if let Some(f) = fault {
            cmd.args(["--fault", f.name()]);
        }
        cmd.stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        super::shared::die_with_this_process(&mut cmd);
        children.push(cmd.spawn().context("cannot start another lab server process")?);
    }
    let procs = if c.procs > 1 {
        format!(", {} processes", c.procs)
    } else {
        String::new()
    };
    let reveal = if c.reveal_otp { ", codes revealed" } else { "" };
    if let Some(f) = fault {
        let scheme = match f.kind() {
            FaultKind::Http => scheme,
            FaultKind::Tls => "https",
            FaultKind::Nats => "nats",
            FaultKind::Mqtt => "mqtt",
            FaultKind::H2 => "http",
        };
        say!(
            "throng lab server on {scheme}://{}/ ({threads} threads{procs}), answering every connection \
             with the fault {f}; Ctrl-C to stop",
            server.addr()
        );
    } else {
        say!(
            "throng lab server on {scheme}://{}/ ({threads} threads{procs}{stall_text}{mtls}{h2c}; \
         /auth: bcrypt cost {} on {hash_threads} hashing threads{reveal}); Ctrl-C to stop",
            server.addr(),
            c.bcrypt_cost
        );
    }
    signals::wait_for_stop();
    for child in &mut children {
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill takes no pointers.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
    for mut child in children {
        let _ = child.wait();
    }
    server.stop();
    Ok(ExitCode::SUCCESS)
}

/// `throng serve --http3`: the quinn-based HTTP/3 lab server, on one thread.
fn run_http3(c: &ServeCmd) -> anyhow::Result<ExitCode> {
    let fault = match &c.fault {
        Some(name) => Some(
            name.parse::<H3Fault>()
                .map_err(|e| UsageError(format!("--fault: {e}")))?,
        ),
        None => None,
    };
    if c.procs > 1 {
        return Err(UsageError("--procs: the HTTP/3 lab server runs in one process; drop --procs".into()).into());
    }
    let dir = c
        .tls
        .as_ref()
        .ok_or_else(|| UsageError("--http3 needs --tls DIR (QUIC is always TLS); make one with throng certs".into()))?;
    let cert = super::tls::read_in("--tls", dir, "server.pem")?;
    let key = super::tls::read_in("--tls", dir, "server.key")?;
    let tls = throng_tls::server_config(&cert, &key, None).map_err(|e| UsageError(e.to_string()))?;
    let server = H3Server::start(c.listen, &tls, fault).with_context(|| {
        format!(
            "cannot listen on udp {} (is the port in use? try --listen 127.0.0.1:0)",
            c.listen
        )
    })?;
    match fault {
        Some(f) => say!(
            "throng lab server on https://{}/ (HTTP/3, UDP), answering every connection with the fault {f}; \
             Ctrl-C to stop",
            server.addr()
        ),
        None => say!(
            "throng lab server on https://{}/ (HTTP/3, UDP); Ctrl-C to stop",
            server.addr()
        ),
    }
    signals::wait_for_stop();
    server.stop();
    Ok(ExitCode::SUCCESS)
}
