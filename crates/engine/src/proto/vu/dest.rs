//! Where one scenario's VUs connect: made once per run by
//! `crate::run`, handed to the workers in their load (`crate::load`). A
//! leaf: it names no worker state.

use throng_plan::HttpVersion;

/// Where one scenario's VUs connect and which protocol they speak: made
/// once per run (routes resolved, TLS clients with their ALPN), shared by
/// the workers.
pub(crate) struct Dest {
    pub(crate) http: HttpVersion,
    /// The route and, for https, the TLS client (ALPN `h2` for HTTP/2).
    pub(crate) conn: crate::targets::Dest,
    /// HTTP/3 (the target's or a request's): the QUIC client (ALPN `h3`)
    /// and the TLS server name.
    pub(crate) quic: Option<(quinn::ClientConfig, String)>,
    /// The route and TLS client of each other protocol (HTTP/1.1, HTTP/2)
    /// its requests name with their own `http:`.
    pub(crate) also: Vec<(HttpVersion, crate::targets::Dest)>,
    /// The route and TLS client (mqtts://) of each broker its `mqtt:`
    /// steps name, by URL as written.
    pub(crate) mqtt: Vec<(String, crate::targets::Dest)>,
}

impl Dest {
    /// The route and TLS client of a VU's own keep-alive connection, one
    /// request at a time (HTTP/1.1).
    pub(crate) fn own(&self) -> &crate::targets::Dest {
        self.conn_for(HttpVersion::Http1)
    }

    /// The route and TLS client of `http` (the target's, when no request
    /// names another).
    pub(crate) fn conn_for(&self, http: HttpVersion) -> &crate::targets::Dest {
        self.also
            .iter()
            .find(|(h, _)| *h == http)
            .map_or(&self.conn, |(_, d)| d)
    }
}

impl Dest {
    /// The broker of an `mqtt:` step's `url`.
    pub(crate) fn mqtt_for(&self, url: &str) -> Option<&crate::targets::Dest> {
        self.mqtt.iter().find(|(u, _)| u == url).map(|(_, d)| d)
    }
}

impl std::fmt::Debug for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dest")
            .field("http", &self.http)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}
