//! Server configurations for the lab server.

use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::client::{certs, key, provider, versions};
use crate::error::TlsError;

/// A server configuration from a certificate chain and key (PEM, as
/// (path, bytes)); with `client_ca`, clients must present a certificate
/// issued by it (mTLS).
pub fn server_config(
    cert: &(String, Vec<u8>),
    key_pem: &(String, Vec<u8>),
    client_ca: Option<&(String, Vec<u8>)>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider(&[]);
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions(None))
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in certs("--tls", ca)? {
                roots
                    .add(c)
                    .map_err(|e| TlsError::Config(format!("{}: not a usable CA ({e})", ca.0)))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config(format!("client verification: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs("--tls", cert)?, key("--tls", key_pem)?)
        .map_err(|e| TlsError::Config(format!("{}: the key does not fit the certificate ({e})", cert.0)))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
