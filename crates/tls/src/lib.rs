//! TLS for throng: rustls (aws-lc-rs) configurations built from flags, lab
//! certificates, and the names of TLS failures.
//!
//! ```text
//!  --cacert/--cert/--key/--insecure/--tls-* ─► ClientOptions ─► client_config() ─► Arc<ClientConfig>
//!  throng serve --tls DIR [--mtls]           ─► server_config() ─► Arc<ServerConfig>
//!  throng certs --out DIR                    ─► generate() ─► CA, server and client PEM files
//!  rustls::Error                             ─► failure_class() ─► "unknown_ca", "bad_certificate", …
//! ```
//!
//! Nothing here opens sockets: callers pass PEM bytes they read and get
//! configurations back. The one file I/O is [`write_files`], which
//! writes the generated lab certificates (keys 0600, no symbolic links). Every error says which flag or file is at fault.

mod certs;
mod classify;
mod client;
mod server;

pub use certs::{CertKind, GeneratedFiles, Validity, generate, write_files};
pub use classify::{failure_class, io_failure_class};
pub use client::{ClientOptions, Group, TlsVersion, client_config};
pub use server::server_config;

pub use rustls;

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM input held nothing usable.
    #[error("{flag} {path}: {problem}")]
    Pem {
        /// The flag the file came from.
        flag: &'static str,
        /// The file.
        path: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// rustls refused the configuration.
    #[error("{0}")]
    Config(String),
    /// Certificate generation failed.
    #[error("cannot generate certificates: {0}")]
    Generate(String),
}
