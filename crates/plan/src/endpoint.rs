//! Where an HTTP plan's requests go: a URL's scheme, host, port and path.
//! A leaf: the table of several targets and the HTTP plan both build on
//! it (it imports neither).

use serde::{Deserialize, Serialize};

use crate::head::Authority;

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS.
    Https,
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Scheme.
    pub scheme: Scheme,
    /// Host name or address literal (IPv6 without brackets).
    pub host: String,
    /// Port (the scheme's default when the URL has none).
    pub port: u16,
    /// Path and query, as sent on the request line.
    pub path: String,
}

impl Target {
    /// `host:port` for the `Host` header, with the port only when it is not
    /// the scheme's default.
    pub fn authority(&self) -> String {
        self.host_authority().to_string()
    }

    /// The [`Authority`] of this target.
    pub fn host_authority(&self) -> Authority {
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        Authority::new(&self.host, self.port, default)
    }
}
