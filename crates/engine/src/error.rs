//! Why a run could not happen at all, and whose it is to fix: the user's
//! (a usage error, exit 2) or the run's (a failed run, exit 1). (The OS
//! errors of connections, counted by class during a run, are `errors.rs`.)

use throng_tls::rustls::pki_types::InvalidDnsNameError;

use crate::rows::CannotWrite;

/// Why a run could not happen at all. (A run whose requests all failed is
/// still a run: its result says how they failed.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The target's host name did not resolve.
    #[error("cannot resolve host '{host}': {reason}; check that host name (or pass --resolve HOST:PORT:ADDR)")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        reason: String,
    },
    /// The plan needs more descriptors than this process may open.
    #[error(
        "this plan needs about {needed} file descriptors, but this process may open at most {soft} \
         (hard limit {hard}); lower -c to about {fit}, or raise the hard limit (as root: ulimit -Hn, \
         or LimitNOFILE= for a service)"
    )]
    FdLimit {
        /// Descriptors the plan needs.
        needed: u64,
        /// The soft limit after raising it.
        soft: u64,
        /// The hard limit.
        hard: u64,
        /// Connections that would fit.
        fit: u64,
    },
    /// A scenario file's VUs, each with its own connection, would not fit
    /// the descriptor limit.
    #[error(
        "the scenarios may run {vus} VUs at once, each with its own connection, but this process may \
         open about {fit}; lower vus, max_vus or the stages' targets, or raise the descriptor limit"
    )]
    VuLimit {
        /// VUs this process's segment may run at once.
        vus: u64,
        /// Connections that fit.
        fit: u64,
    },
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(TlsSetup),
    /// The server does not speak the protocol the plan asked of it (told
    /// by the check before the run).
    #[error(transparent)]
    NotSpoken(NotSpoken),
    /// `--io uring` with `--csv-requests`, which it does not write yet.
    #[error("--io uring does not write --csv-requests rows yet; leave out --csv-requests, or run with --io epoll")]
    UringRows,
    /// `--csv-requests` names a file this process cannot write.
    #[error(transparent)]
    Rows(CannotWrite),
    /// The plan cannot run as given: a protocol's spec refused it (an
    /// HTTP/2 or HTTP/3 request the plan could not check, a QUIC client the
    /// TLS settings cannot make, `--io uring` on a kernel without it). The
    /// message is the cause's own (not an error source: the cli prints
    /// the chain, and the message already names the cause's cause).
    #[error("{0}")]
    Plan(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A part of the plan the engine builds before the run (the request
    /// table as HTTP/2 or HTTP/3 streams, a QUIC client) cannot be built.
    /// The cause is part of the message, not an error source (the cli
    /// prints an error's chain): find it with [`EngineError::Unbuildable`]'s
    /// `reason`.
    #[error("{what}: {reason}")]
    Unbuildable {
        /// What could not be built, and for what (`http: 2`, a scenario's
        /// file and name).
        what: String,
        /// Why: the builder's own error.
        reason: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A worker thread could not start or died.
    #[error("worker failed: {0}")]
    Worker(WorkerFailure),
    /// A check before the run got no complete answer within its bound (a
    /// server that answers too slowly or not at all): a failed run.
    #[error(transparent)]
    Unanswered(Unanswered),
    /// A signal stopped the command before the run started.
    #[error("interrupted {0}")]
    Interrupted(&'static str),
    /// The file's `setup:` flow failed (a request, a check or a capture):
    /// the load did not start.
    #[error(
        "the setup: flow of {file} failed, so the load did not start: {why}; fix the setup steps (or the server) \
         and run again"
    )]
    SetupFailed {
        /// The scenario file.
        file: String,
        /// What failed: steps, error classes, checks, captures.
        why: String,
    },
}

impl EngineError {
    /// True when the plan asks for something this process cannot do (a
    /// server name TLS cannot send, more descriptors or VUs than fit, a
    /// value only the engine could check): the user's to fix, not a failed
    /// run. A host that does not resolve is a failed run (the target is
    /// unreachable from here).
    pub fn is_usage(&self) -> bool {
        match self {
            EngineError::FdLimit { .. }
            | EngineError::VuLimit { .. }
            | EngineError::Tls(_)
            | EngineError::NotSpoken(_)
            | EngineError::UringRows
            | EngineError::Rows(_)
            | EngineError::Plan(_)
            | EngineError::Unbuildable { .. } => true,
            EngineError::Resolve { .. }
            | EngineError::Worker(_)
            | EngineError::Unanswered(_)
            | EngineError::SetupFailed { .. }
            | EngineError::Interrupted(_) => false,
        }
    }
}

impl From<TlsSetup> for EngineError {
    fn from(e: TlsSetup) -> Self {
        EngineError::Tls(e)
    }
}

impl From<NotSpoken> for EngineError {
    fn from(e: NotSpoken) -> Self {
        EngineError::NotSpoken(e)
    }
}

impl From<CannotWrite> for EngineError {
    fn from(e: CannotWrite) -> Self {
        EngineError::Rows(e)
    }
}

impl From<Unanswered> for EngineError {
    fn from(e: Unanswered) -> Self {
        EngineError::Unanswered(e)
    }
}

impl From<WorkerFailure> for EngineError {
    fn from(e: WorkerFailure) -> Self {
        EngineError::Worker(e)
    }
}

/// Why a plan's TLS client could not be built. (Its causes are part of the
/// message, not error sources: the cli prints an error's chain.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsSetup {
    /// A TLS plan came without a client configuration (a bug in the caller).
    #[error("{what} needs a TLS client configuration")]
    NoClientConfig {
        /// What needed it ("an https plan", "--http3", ...).
        what: String,
    },
    /// The server name (`--sni` or the host) is no valid TLS server name.
    #[error("'{name}' cannot be sent as a TLS server name ({reason}); pass --sni NAME")]
    ServerName {
        /// The name.
        name: String,
        /// Why rustls refused it.
        reason: InvalidDnsNameError,
    },
}

/// What a check before the run asked that got no complete answer in time.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unanswered {
    /// The HTTP/2 check (a TLS handshake offering h2, or the server's first
    /// frame) did not finish within its bound.
    #[error(
        "the HTTP/2 check of {addr} ({what}) did not finish within {}; the server answers too slowly or \
         not at all (it waits at most min(--timeout, {limit_s} s)): check the server, or give a longer --timeout",
        throng_plan::format_duration(*.bound)
    )]
    Http2Check {
        /// The address checked.
        addr: std::net::SocketAddr,
        /// What it waited for.
        what: &'static str,
        /// How long it waited.
        bound: std::time::Duration,
        /// The most any check waits, in seconds.
        limit_s: u64,
    },
}

/// How a run's workers failed (the run has no result).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerFailure {
    /// The OS would not start a worker thread.
    #[error("cannot start a worker thread: {0}")]
    Spawn(std::io::Error),
    /// A worker could not set up (its runtime, its sockets).
    #[error("worker {worker}: {reason}")]
    Io {
        /// Which worker.
        worker: usize,
        /// The OS's error.
        reason: std::io::Error,
    },
    /// Workers still running after an abort's grace: a bug in throng.
    #[error("{remaining} worker(s) did not stop within {grace_s} s of being told to; this is a bug in throng")]
    Stuck {
        /// Workers that had not finished.
        remaining: usize,
        /// Seconds they were given.
        grace_s: u64,
    },
    /// A worker thread panicked.
    #[error("a worker thread panicked")]
    Panicked,
    /// The workers' measurements could not be merged.
    #[error("merging worker results: {0}")]
    Merge(throng_metrics::HistError),
}

/// Where a plan asked for the protocol a destination did not speak: how
/// the refusal names it and what it suggests instead.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Asked {
    /// `throng http --http2`'s target.
    HttpTarget {
        /// The target's URL.
        url: String,
    },
    /// `throng grpc`'s target (gRPC needs HTTP/2).
    GrpcTarget {
        /// The target's authority.
        authority: String,
    },
    /// Another origin of an `--http2` run's targets.
    HttpOrigin {
        /// The origin's URL.
        url: String,
    },
    /// `throng storm --http2`'s target.
    StormTarget {
        /// The target's URL.
        url: String,
    },
    /// A scenario file's target (or a scenario's) with `http: 2` or `http: 3`.
    ScenarioTarget {
        /// The scenario file.
        file: String,
        /// "target", or "scenario NAME's target".
        which: String,
        /// The target's URL.
        url: String,
        /// 2 or 3.
        http: u8,
    },
    /// A scenario's request with its own `http: 2` or `http: 3`.
    ScenarioRequest {
        /// The request's place (file:line:col).
        at: String,
        /// The scenario's name.
        scenario: String,
        /// The scenario's target URL.
        url: String,
        /// 2 or 3.
        http: u8,
    },
}

/// A server that does not speak the protocol a plan asked of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotSpoken {
    /// Where the plan asked for it.
    pub asked: Asked,
    /// What the server spoke instead (its first bytes, a TLS protocol, a
    /// QUIC failure).
    pub spoke: String,
}

impl std::fmt::Display for NotSpoken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let spoke = &self.spoke;
        match &self.asked {
            Asked::HttpTarget { url } => write!(
                f,
                "--http2: {url} does not speak HTTP/2 (it answered with {spoke}); leave out --http2 to run over \
                 HTTP/1.1, or point at a server with HTTP/2 enabled"
            ),
            Asked::GrpcTarget { authority } => write!(
                f,
                "throng grpc: {authority} does not speak HTTP/2 (it answered with {spoke}); gRPC needs HTTP/2: \
                 point at a gRPC server (add --plaintext for one without TLS, leave it out for one with TLS)"
            ),
            Asked::HttpOrigin { url } => write!(
                f,
                "--http2: the target origin {url} does not speak HTTP/2 (it answered with {spoke}); leave out \
                 --http2 to run over HTTP/1.1, or point every target at a server with HTTP/2 enabled"
            ),
            Asked::StormTarget { url } => write!(
                f,
                "--http2: {url} does not speak HTTP/2 (it answered with {spoke}); leave out --http2 to storm \
                 over HTTP/1.1, or point at a server with HTTP/2 enabled"
            ),
            Asked::ScenarioTarget {
                file,
                which,
                url,
                http: 3,
            } => write!(
                f,
                "{file}: {which} {url} has http: 3, but the server does not speak HTTP/3 (it answered with \
                 {spoke}); write http: 2 or http: 1.1 to run over TCP, or point at a server with HTTP/3 enabled"
            ),
            Asked::ScenarioTarget { file, which, url, http } => write!(
                f,
                "{file}: {which} {url} has http: {http}, but the server does not speak HTTP/{http} (it answered \
                 with {spoke}); write http: 1.1 (or leave http: out) to run over HTTP/1.1, or point at a server \
                 with HTTP/{http} enabled"
            ),
            Asked::ScenarioRequest {
                at,
                scenario,
                url,
                http,
            } => write!(
                f,
                "{at}: this request has http: {http}, but scenario {scenario}'s target {url} does not speak \
                 HTTP/{http} (it answered with {spoke}); leave http: out to use the target's protocol, or point \
                 at a server with HTTP/{http} enabled"
            ),
        }
    }
}

impl std::error::Error for NotSpoken {}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    fn bad_name() -> TlsSetup {
        TlsSetup::ServerName {
            name: "a b".into(),
            reason: throng_tls::rustls::pki_types::ServerName::try_from("a b".to_string()).unwrap_err(),
        }
    }

    /// The cli prints an error's chain joined by ': ': a typed cause that
    /// is part of the message must not come again as its source.
    #[test]
    fn causes_are_said_once() {
        let io = || std::io::Error::other("boom");
        let said = |e: EngineError| {
            assert!(e.source().is_none(), "{e}");
            e.to_string()
        };
        assert_eq!(
            said(
                WorkerFailure::Io {
                    worker: 1,
                    reason: io()
                }
                .into()
            ),
            "worker failed: worker 1: boom"
        );
        assert_eq!(
            said(WorkerFailure::Spawn(io()).into()),
            "worker failed: cannot start a worker thread: boom"
        );
        assert_eq!(
            said(
                CannotWrite {
                    path: "/x/r.csv".into(),
                    reason: io(),
                }
                .into()
            ),
            "--csv-requests: cannot write '/x/r.csv': boom (check the directory exists and is writable)"
        );
        assert_eq!(
            said(bad_name().into()),
            "'a b' cannot be sent as a TLS server name (invalid dns name); pass --sni NAME"
        );
    }

    #[test]
    fn whose_to_fix() {
        assert!(EngineError::from(bad_name()).is_usage());
        assert!(EngineError::VuLimit { vus: 5, fit: 3 }.is_usage());
        assert!(EngineError::UringRows.is_usage());
        assert!(
            EngineError::from(CannotWrite {
                path: "r.csv".into(),
                reason: std::io::Error::other("x")
            })
            .is_usage()
        );
        assert!(!EngineError::from(WorkerFailure::Panicked).is_usage());
        let unbuilt = EngineError::Unbuildable {
            what: "HTTP/2".into(),
            reason: "no".into(),
        };
        assert!(unbuilt.is_usage());
        assert!(!EngineError::from(late()).is_usage());
    }

    fn late() -> Unanswered {
        Unanswered::Http2Check {
            addr: "127.0.0.1:9".parse().unwrap(),
            what: "the server's first HTTP/2 frame",
            bound: std::time::Duration::from_millis(1500),
            limit_s: 10,
        }
    }

    /// The typed causes say what the strings said, byte for byte, once.
    #[test]
    fn typed_causes_keep_their_text() {
        let said = |e: EngineError| {
            assert!(e.source().is_none(), "{e}");
            e.to_string()
        };
        assert_eq!(
            said(late().into()),
            "the HTTP/2 check of 127.0.0.1:9 (the server's first HTTP/2 frame) did not finish within 1.5s; \
             the server answers too slowly or not at all (it waits at most min(--timeout, 10 s)): check the \
             server, or give a longer --timeout"
        );
        let unbuilt = EngineError::Unbuildable {
            what: "s.yaml: scenario 'a' (http: 3)".into(),
            reason: "the TLS settings cannot carry QUIC (x); QUIC needs TLS 1.3".into(),
        };
        assert_eq!(
            said(unbuilt),
            "s.yaml: scenario 'a' (http: 3): the TLS settings cannot carry QUIC (x); QUIC needs TLS 1.3"
        );
    }
}
