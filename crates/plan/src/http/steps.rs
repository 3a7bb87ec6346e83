//! The steps of [`HttpPlan::from_args`](super::HttpPlan::from_args) that
//! validate the run's shape: its targets, load, stop, connections and
//! threads, HTTP version and streams, timeout, TLS and body, and the
//! combinations of them that cannot run. Each takes the flags it checks
//! and returns their validated value, or the error naming the flag.

use std::time::Duration;

use crate::error::PlanError;
use crate::reach::Reach;
use crate::segment::Segment;
use crate::targets::{MAX_TARGETS, RawTarget};
use crate::tls::TlsSettings;

use super::{
    DEFAULT_CONNECTIONS, DEFAULT_DURATION, DEFAULT_OPEN_CAP, DEFAULT_TIMEOUT, HttpArgs, HttpVersion, Load,
    MAX_BODY_BYTES, MAX_REDIRECTS, MAX_STREAMS, MAX_STREAMS_IN_FLIGHT, Scheme, Stop, Target,
};

/// The `URL` (first) and the `--targets`, at least one and at most
/// [`MAX_TARGETS`].
pub(super) fn raw_targets(args: &mut HttpArgs) -> Result<Vec<RawTarget>, PlanError> {
    let mut raw = std::mem::take(&mut args.targets);
    if !args.url.is_empty() {
        raw.insert(0, url_target(&args.url));
    }
    if raw.is_empty() {
        return Err(PlanError::invalid(
            "URL",
            "no target; give a URL (or several), or --targets FILE, e.g. http://127.0.0.1:8080/",
        ));
    }
    if raw.len() > MAX_TARGETS {
        return Err(PlanError::invalid(
            "--targets",
            format!(
                "{} targets, over the limit of {MAX_TARGETS}; split them and run one throng per part",
                raw.len()
            ),
        ));
    }
    Ok(raw)
}

/// The target the `URL` argument stands for.
fn url_target(url: &str) -> RawTarget {
    RawTarget {
        at: "URL".into(),
        url: url.to_string(),
        ..RawTarget::default()
    }
}

/// True when the run sends more than one request: several targets, a
/// `--body-lines` file, or a target with its own method, headers or body.
pub(super) fn is_several(raw: &[RawTarget], args: &HttpArgs) -> bool {
    raw.len() > 1 || args.body_lines.is_some() || raw[0] != url_target(&args.url)
}

/// `--redirects`, at most [`MAX_REDIRECTS`] (none when not given).
pub(super) fn redirects(given: Option<u32>) -> Result<u32, PlanError> {
    let redirects = given.unwrap_or(0);
    if redirects > MAX_REDIRECTS {
        return Err(PlanError::invalid(
            "--redirects",
            format!("{redirects} is over the limit of {MAX_REDIRECTS}; give 0 to {MAX_REDIRECTS}"),
        ));
    }
    Ok(redirects)
}

/// `-r/--rate`: an open loop at that rate, a closed loop without.
pub(super) fn load(rate: Option<f64>) -> Result<Load, PlanError> {
    match rate {
        Some(rate) if !(rate.is_finite() && rate > 0.0) => Err(PlanError::invalid(
            "-r/--rate",
            "must be greater than 0 requests per second, e.g. -r 1000",
        )),
        Some(rate) => Ok(Load::Open { rate }),
        None => Ok(Load::Closed),
    }
}

/// `-n/--requests` or `-d/--duration` (one of them; 10s by default).
pub(super) fn stop(requests: Option<u64>, duration: Option<Duration>) -> Result<Stop, PlanError> {
    match (requests, duration) {
        (Some(_), Some(_)) => Err(PlanError::invalid(
            "-n/-d",
            "give either -n REQUESTS or -d DURATION, not both",
        )),
        (Some(0), None) => Err(PlanError::invalid("-n/--requests", "must be at least 1, e.g. -n 10000")),
        (Some(n), None) => Ok(Stop::Requests(n)),
        (None, Some(d)) if d.is_zero() => Err(PlanError::invalid(
            "-d/--duration",
            "must be longer than 0, e.g. -d 30s",
        )),
        (None, Some(d)) => Ok(Stop::Duration(d)),
        (None, None) => Ok(Stop::Duration(DEFAULT_DURATION)),
    }
}

/// The connections, threads and segment of a run.
pub(super) struct Workers {
    /// `-c`: the whole plan's connections (trimmed to the requests).
    pub(super) connections: u32,
    /// `-t`: at most one per connection this process opens.
    pub(super) threads: u32,
    /// `--segment`, when it is not the whole.
    pub(super) segment: Option<Segment>,
}

/// `-c/--connections`, `-t/--threads` and `--segment`: every worker owns
/// at least one connection, and a closed loop's segment at least one.
pub(super) fn workers(args: &mut HttpArgs, load: Load, stop: Stop) -> Result<Workers, PlanError> {
    let default_conns = match load {
        Load::Closed => DEFAULT_CONNECTIONS,
        Load::Open { .. } => DEFAULT_OPEN_CAP,
    };
    let mut connections = args.connections.unwrap_or(default_conns);
    if connections == 0 {
        return Err(PlanError::invalid("-c/--connections", "must be at least 1, e.g. -c 50"));
    }
    // A closed-loop run never needs more connections than requests: the
    // rest would sit idle (ab refuses such plans; we trim them).
    if let (Load::Closed, Stop::Requests(n)) = (load, stop) {
        connections = connections.min(u32::try_from(n).unwrap_or(u32::MAX));
    }

    let threads = args.threads.unwrap_or(args.cores.max(1));
    if threads == 0 {
        return Err(PlanError::invalid("-t/--threads", "must be at least 1, e.g. -t 2"));
    }
    let segment = args.segment.take().filter(|s| !s.is_whole());
    // This process's connections: its segment's share (at least one as
    // an open loop's cap).
    let mine = match &segment {
        Some(s) => {
            let share = u32::try_from(s.share(u64::from(connections))).unwrap_or(u32::MAX);
            // A segment whose share of -n is none needs no connection: with
            // -c trimmed to -n that is every segment whose share of -c is none.
            let idle = matches!(stop, Stop::Requests(n) if s.share(n) == 0);
            if share == 0 && load == Load::Closed && !idle {
                return Err(PlanError::invalid(
                    "-c/--connections",
                    format!(
                        "-c {connections} leaves segment {} no connection to send its requests on; \
                         raise -c to at least the number of segments",
                        s.range()
                    ),
                ));
            }
            share.max(1)
        }
        None => connections,
    };
    Ok(Workers {
        connections,
        // Every worker owns at least one connection.
        threads: threads.min(mine),
        segment,
    })
}

/// `--http2`/`--http3` into the version spoken. HTTP/3 runs over QUIC,
/// which is always TLS (https://).
pub(super) fn http_version(http2: bool, http3: bool, target: &Target) -> Result<HttpVersion, PlanError> {
    match (http2, http3) {
        (true, true) => Err(PlanError::invalid(
            "--http2/--http3",
            "give one of them: a run speaks one HTTP version",
        )),
        (_, true) if target.scheme != Scheme::Https => Err(PlanError::invalid(
            "--http3",
            format!(
                "HTTP/3 runs over QUIC, which is always encrypted: use an https:// URL ({})",
                target.url.replacen("http://", "https://", 1)
            ),
        )),
        (_, true) => Ok(HttpVersion::Http3),
        (true, _) => Ok(HttpVersion::Http2),
        _ => Ok(HttpVersion::Http1),
    }
}

/// `--streams` per connection (1 on HTTP/1.1), and at most
/// [`MAX_STREAMS_IN_FLIGHT`] over all `connections`.
pub(super) fn streams(given: Option<u32>, http: HttpVersion, connections: u32) -> Result<u32, PlanError> {
    let streams = match (given, http) {
        (None, _) => 1,
        (Some(_), HttpVersion::Http1) => {
            return Err(PlanError::invalid(
                "--streams",
                "multiplexes streams on HTTP/2 and HTTP/3 connections; add --http2 or --http3, or leave --streams out \
                 (HTTP/1.1 sends one request at a time per connection: raise -c instead)",
            ));
        }
        (Some(n), _) if n == 0 || n > MAX_STREAMS => {
            return Err(PlanError::invalid(
                "--streams",
                format!("must be between 1 and {MAX_STREAMS} streams per connection, e.g. --streams 10"),
            ));
        }
        (Some(n), _) => n,
    };
    if u64::from(connections) * u64::from(streams) > MAX_STREAMS_IN_FLIGHT {
        return Err(PlanError::invalid(
            "--streams",
            format!(
                "-c {connections} × --streams {streams} asks for more than {MAX_STREAMS_IN_FLIGHT} streams in \
                 flight (each is a task with its own state); lower -c or --streams, or split the load over \
                 processes with --segment"
            ),
        ));
    }
    Ok(streams)
}

/// `--timeout` (10s by default), longer than 0.
pub(super) fn timeout(given: Option<Duration>) -> Result<Duration, PlanError> {
    let timeout = given.unwrap_or(DEFAULT_TIMEOUT);
    if timeout.is_zero() {
        return Err(PlanError::invalid(
            "--timeout",
            "must be longer than 0, e.g. --timeout 10s",
        ));
    }
    Ok(timeout)
}

/// The TLS flags, for an https:// target only (QUIC on TLS 1.3 only).
pub(super) fn tls(given: &TlsSettings, target: &Target, http: HttpVersion) -> Result<Option<TlsSettings>, PlanError> {
    let tls = match target.scheme {
        Scheme::Https => Some(given.clone()),
        Scheme::Http if given.any() => {
            return Err(PlanError::invalid(
                "--cacert/--cert/--key/--insecure/--tls-*",
                format!("TLS flags apply to https:// URLs; '{}' is plain http", target.url),
            ));
        }
        Scheme::Http => None,
    };
    if http == HttpVersion::Http3
        && tls
            .as_ref()
            .is_some_and(|t| t.version == Some(crate::tls::TlsVersion::Tls12))
    {
        return Err(PlanError::invalid(
            "--tls-version",
            "QUIC (--http3) runs on TLS 1.3 only; leave out --tls-version 1.2",
        ));
    }
    Ok(tls)
}

/// `--body`/`--data`: where it came from and its bytes (none: empty), at
/// most [`MAX_BODY_BYTES`].
pub(super) fn body(given: Option<(String, Vec<u8>)>) -> Result<(Option<String>, Vec<u8>), PlanError> {
    let (body_file, body) = match given {
        Some((path, bytes)) => (Some(path), bytes),
        None => (None, Vec::new()),
    };
    if body.len() as u64 > MAX_BODY_BYTES {
        return Err(PlanError::invalid(
            "--body",
            format!(
                "{} is {} bytes, over the limit of {MAX_BODY_BYTES} bytes (64 MiB); send a smaller file",
                body_file.as_deref().unwrap_or("the body"),
                body.len()
            ),
        ));
    }
    Ok((body_file, body))
}

/// Refuses what cannot go together: HTTP/3 through a proxy, redirects
/// with several requests.
pub(super) fn combinations(http: HttpVersion, reach: &Reach, several: bool, redirects: u32) -> Result<(), PlanError> {
    if http == HttpVersion::Http3 && reach.proxy.is_some() {
        return Err(PlanError::invalid(
            "--http3",
            "HTTP/3 runs over UDP and cannot go through an HTTP proxy; leave out -x/--proxy (or set \
             --proxy '' to ignore HTTPS_PROXY), or use --http2",
        ));
    }
    if several && redirects > 0 {
        return Err(PlanError::invalid(
            "--redirects",
            "is not yet supported with several targets, --targets or --body-lines; run the redirecting \
             target on its own, or list where it leads as a target",
        ));
    }
    Ok(())
}
