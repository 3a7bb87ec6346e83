//! `throng certs`.

use std::process::ExitCode;

use throng_tls::{CertKind, Validity};

use crate::args::CertsCmd;
use crate::exit::UsageError;

pub fn run(c: CertsCmd) -> anyhow::Result<ExitCode> {
    let kind = if c.rsa { CertKind::Rsa } else { CertKind::Ecdsa };
    let validity = if c.expired {
        Validity::Expired
    } else {
        Validity::Current
    };
    let hosts: Vec<String> = c
        .hosts
        .iter()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.is_empty() {
        return Err(
            UsageError("--hosts needs at least one name or address, e.g. --hosts localhost,127.0.0.1".into()).into(),
        );
    }
    let files = throng_tls::generate(kind, &hosts, validity).map_err(|e| UsageError(format!("--hosts: {e}")))?;
    let written = throng_tls::write_files(&c.out, &files)
        .map_err(|e| UsageError(format!("--out {}: cannot write there: {e}", c.out.display())))?;
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    say!(
        "throng: wrote {} ({} keys, server valid for {}{}); keys are mode 0600",
        names.join(", "),
        if c.rsa { "RSA 2048" } else { "ECDSA P-256" },
        hosts.join(", "),
        if c.expired { ", already expired" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}
