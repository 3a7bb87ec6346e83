//! TLS for throng: rustls (aws-lc-rs) configurations built from flags, lab
//! certificates, and the names of TLS failures.
//!
//! ```text
//!  TlsSettings (flags or a tls: block)      ─► client_config_for() ─► Arc<ClientConfig>
//!    reads the files it names              ─► ClientOptions ─► client_config()
//!  throng serve --tls DIR [--mtls]           ─► server_config() ─► Arc<ServerConfig>
//!  throng certs --out DIR                    ─► generate() ─► CA, server and client PEM files
//!  rustls::Error                             ─► failure_class() ─► "unknown_ca", "certificate_expired", …
//! ```
//!
//! Nothing here opens sockets: callers pass PEM bytes and get
//! configurations back. The file I/O is [`client_config_for`], which reads
//! the files the settings name through `throng_plan::input`'s bounded
//! reader, and [`write_files`], which writes the generated lab
//! certificates (keys 0600, no symbolic links). Every error says which
//! flag or file is at fault.

mod certs;
mod classify;
mod client;
mod error;
mod server;

pub use certs::{CertKind, GeneratedFiles, Validity, generate, write_files};
pub use classify::{failure_class, io_failure_class};
pub use client::{ClientOptions, Group, TlsVersion, client_config, client_config_for};
pub use error::TlsError;
pub use server::{server_config, server_config_named};

pub use rustls;
