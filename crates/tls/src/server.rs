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
    server_config_named(["--tls"; 3], cert, key_pem, client_ca)
}

/// [`server_config`], its errors naming the flags the files came from
/// (certificate, key, client CA).
pub fn server_config_named(
    flags: [&'static str; 3],
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
            for c in certs(flags[2], ca)? {
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
        .with_single_cert(certs(flags[0], cert)?, key(flags[1], key_pem)?)
        .map_err(|e| TlsError::Config(format!("{}: the key does not fit the certificate ({e})", cert.0)))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
