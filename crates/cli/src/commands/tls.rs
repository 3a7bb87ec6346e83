//! TLS flags → a client configuration (files read here, at the edge).

use std::path::Path;
use std::sync::Arc;

use throng_plan::TlsSettings;
use throng_tls::rustls::ClientConfig;
use throng_tls::{ClientOptions, Group, TlsVersion};

use super::UsageError;
use crate::args::TlsArgs;

fn read(flag: &str, path: &Path) -> Result<(String, Vec<u8>), UsageError> {
    std::fs::read(path)
        .map(|bytes| (path.display().to_string(), bytes))
        .map_err(|e| UsageError(format!("{flag} {}: cannot read it: {e}", path.display())))
}

/// What the plan records of the TLS flags.
pub fn settings(a: &TlsArgs) -> TlsSettings {
    let show = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    TlsSettings {
        insecure: a.insecure,
        cacert: show(&a.cacert),
        cert: show(&a.cert),
        key: show(&a.key),
        resume: a.resume,
        groups: a.groups.clone(),
        version: a.tls_version.clone(),
        server_name: a.sni.clone(),
    }
}

/// Reads the files the flags name and builds the client configuration.
pub fn client_config(a: &TlsArgs, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, UsageError> {
    if a.insecure && a.cacert.is_some() {
        return Err(UsageError(
            "--insecure skips verification, so --cacert would be ignored; give one or the other".into(),
        ));
    }
    let groups = a
        .groups
        .iter()
        .map(|g| Group::parse(g).map_err(|e| UsageError(format!("--tls-groups: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let version = a
        .tls_version
        .as_deref()
        .map(|v| TlsVersion::parse(v).map_err(|e| UsageError(format!("--tls-version: {e}"))))
        .transpose()?;
    let options = ClientOptions {
        cacert: a.cacert.as_deref().map(|p| read("--cacert", p)).transpose()?,
        cert: a.cert.as_deref().map(|p| read("--cert", p)).transpose()?,
        key: a.key.as_deref().map(|p| read("--key", p)).transpose()?,
        insecure: a.insecure,
        resume: a.resume,
        groups,
        version,
        alpn: alpn.iter().map(|p| p.to_vec()).collect(),
    };
    throng_tls::client_config(&options).map_err(|e| UsageError(e.to_string()))
}

/// Reads `DIR/name`.
pub fn read_in(flag: &str, dir: &Path, name: &str) -> Result<(String, Vec<u8>), UsageError> {
    read(flag, &dir.join(name))
}
