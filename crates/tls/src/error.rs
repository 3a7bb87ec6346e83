//! Why a TLS configuration could not be made.

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
    /// A file the settings name cannot be read, or is larger than a
    /// certificate or key file may be.
    #[error("{flag} {path}: {problem}; give a PEM file")]
    Read {
        /// The flag (or `tls:` field) the file came from.
        flag: &'static str,
        /// The file.
        path: String,
        /// The operating system's reason, or the limit it passed.
        problem: throng_plan::input::ReadError,
    },
    /// rustls refused the configuration.
    #[error("{0}")]
    Config(String),
    /// Certificate generation failed.
    #[error("cannot generate certificates: {0}")]
    Generate(String),
}
