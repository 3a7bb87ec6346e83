//! TLS flags → the plan's TLS settings, and the settings → a client
//! configuration (throng-tls reads the files they name).

use std::path::Path;
use std::sync::Arc;

use throng_plan::TlsSettings;
use throng_tls::rustls::ClientConfig;

use crate::args::TlsArgs;
use crate::exit::UsageError;

/// What the plan records of the TLS flags (groups and version arrive
/// parsed: clap ran their parsers).
pub fn settings(a: &TlsArgs) -> TlsSettings {
    let show = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    TlsSettings {
        insecure: a.insecure,
        cacert: show(&a.cacert),
        cert: show(&a.cert),
        key: show(&a.key),
        resume: a.resume,
        groups: a.groups.clone(),
        version: a.tls_version,
        server_name: a.sni.clone(),
    }
}

/// The client configuration of a plan's settings, files relative to `dir`.
pub fn client_config(settings: &TlsSettings, dir: &Path, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, UsageError> {
    throng_tls::client_config_for(settings, dir, alpn).map_err(|e| UsageError(e.to_string()))
}

/// Reads `DIR/name`, a certificate or key (at most
/// [`throng_plan::input::MAX_PEM_BYTES`]).
pub fn read_in(flag: &str, dir: &Path, name: &str) -> Result<(String, Vec<u8>), UsageError> {
    let path = dir.join(name);
    throng_plan::input::read_limited(&path, throng_plan::input::MAX_PEM_BYTES)
        .map(|bytes| (path.display().to_string(), bytes))
        .map_err(|e| UsageError(format!("{flag} {}: {e}; give a PEM file", path.display())))
}
