//! The steps of [`StormPlan::from_args`](super::StormPlan::from_args):
//! each takes the flags it checks and returns their validated value, or
//! the error naming the flag.

use std::time::Duration;

use crate::error::PlanError;
use crate::http::{DEFAULT_TIMEOUT, HttpVersion, TlsSettings};
use crate::reach::Reach;
use crate::segment::Segment;

use super::target::{parse_request, target_path};
use super::{ClientProfile, Procs, Protocol, Reconnect, StormArgs, StormRequest, StormScheme, StormTarget, Trigger};

/// `--count`: required, at least 1.
pub(super) fn connections(given: Option<u64>) -> Result<u64, PlanError> {
    match given {
        Some(0) => Err(PlanError::invalid(
            "-n/--count",
            "must be at least 1, e.g. --count 10000",
        )),
        Some(n) => Ok(n),
        None => Err(PlanError::invalid(
            "-n/--count",
            "is required: how many connections, e.g. --count 10000",
        )),
    }
}

/// `--rate` and `--max-concurrent`, when given, above 0.
pub(super) fn pace(a: &StormArgs) -> Result<(), PlanError> {
    if let Some(r) = a.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(PlanError::invalid(
            "--rate",
            "must be greater than 0 connections per second, e.g. --rate 1000",
        ));
    }
    if a.max_concurrent == Some(0) {
        return Err(PlanError::invalid(
            "--max-concurrent",
            "must be at least 1, e.g. --max-concurrent 1000",
        ));
    }
    Ok(())
}

/// `--workers` (the cores by default), at most one per connection.
pub(super) fn workers(a: &StormArgs, connections: u64) -> Result<u32, PlanError> {
    let workers = a.workers.unwrap_or(a.cores.max(1));
    if workers == 0 {
        return Err(PlanError::invalid("--workers", "must be at least 1, e.g. --workers 2"));
    }
    Ok(u32::try_from(u64::from(workers).min(connections)).unwrap_or(workers))
}

/// `--timeout`, by default the client profile's.
pub(super) fn timeout(given: Option<Duration>, client: ClientProfile) -> Result<Duration, PlanError> {
    let timeout = given.unwrap_or(match client {
        ClientProfile::NatsGo => ClientProfile::NATS_GO_TIMEOUT,
        ClientProfile::Lenient => DEFAULT_TIMEOUT,
    });
    if timeout.is_zero() {
        return Err(PlanError::invalid(
            "--timeout",
            "must be longer than 0, e.g. --timeout 10s",
        ));
    }
    Ok(timeout)
}

/// `--request` (`none`: none); an http(s) target's GET of its path by
/// default.
pub(super) fn request(a: &StormArgs, target: &StormTarget) -> Result<Option<StormRequest>, PlanError> {
    Ok(match a.request.as_deref().map(str::trim) {
        Some("none") => None,
        Some(text) => Some(parse_request(text)?),
        None => match target.scheme {
            StormScheme::Http | StormScheme::Https => Some(StormRequest {
                method: "GET".into(),
                path: target_path(&a.target),
            }),
            _ => None,
        },
    })
}

/// `--procs`: `auto` (the default) or a count.
pub(super) fn procs(given: Option<&str>) -> Result<Procs, PlanError> {
    match given.map(str::trim) {
        None | Some("auto") => Ok(Procs::Auto),
        Some(n) => match n.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(Procs::Count(n)),
            _ => Err(PlanError::invalid(
                "--procs",
                format!("'{n}' is not 'auto' or a count of at least 1"),
            )),
        },
    }
}

/// The TLS flags, for tls://, https://, wss:// and nats:// targets only.
pub(super) fn tls(given: &TlsSettings, target: &StormTarget) -> Result<Option<TlsSettings>, PlanError> {
    if target.scheme.is_tls() || target.scheme == StormScheme::Nats {
        // NATS upgrades to TLS when the server's INFO requires it.
        Ok(Some(given.clone()))
    } else if given.any() {
        Err(PlanError::invalid(
            "--cacert/--cert/--key/--insecure/--tls-*",
            format!(
                "TLS flags apply to tls:// and https:// targets; '{}' is plain",
                target.url
            ),
        ))
    } else {
        Ok(None)
    }
}

/// `--reconnect` and its `--reconnect-wait/--reconnect-jitter/--max-reconnects`
/// (nats.go's defaults under that profile), for held connections only.
pub(super) fn reconnect(
    a: &StormArgs,
    target: &StormTarget,
    client: ClientProfile,
    hold: Duration,
) -> Result<Option<Reconnect>, PlanError> {
    let reconnect_flags = a.reconnect_wait.is_some() || a.reconnect_jitter.is_some() || a.max_reconnects.is_some();
    // nats.go reconnects by default (its AllowReconnect): a held
    // connection under that profile does too.
    let wants_reconnect = a.reconnect || (client == ClientProfile::NatsGo && a.hold.is_some_and(|h| !h.is_zero()));
    if reconnect_flags && !wants_reconnect {
        return Err(PlanError::invalid(
            "--reconnect-wait/--reconnect-jitter/--max-reconnects",
            "apply with --reconnect (or --client nats.go with --hold)",
        ));
    }
    let default_jitter = if client == ClientProfile::NatsGo && (target.scheme.is_tls() || a.tls.any()) {
        ClientProfile::NATS_GO_JITTER_TLS
    } else {
        Duration::from_millis(100)
    };
    if !wants_reconnect {
        return Ok(None);
    }
    if hold.is_zero() {
        return Err(PlanError::invalid(
            "--reconnect",
            "reconnects held connections; give --hold, e.g. --hold 30s",
        ));
    }
    Ok(Some(Reconnect {
        wait: a.reconnect_wait.unwrap_or(Duration::from_secs(2)),
        jitter: a.reconnect_jitter.unwrap_or(default_jitter),
        max: a.max_reconnects.unwrap_or(60),
    }))
}

/// `--trigger` with `--trigger-after` and `--trigger-timeout`, for held
/// connections only.
pub(super) fn trigger(a: &StormArgs, hold: Duration) -> Result<Option<Trigger>, PlanError> {
    let trigger = match (a.trigger_after, a.trigger.as_deref().map(str::trim)) {
        (_, Some("")) => return Err(PlanError::invalid("--trigger", "is empty; give a shell command")),
        (after, Some(cmd)) => {
            if hold.is_zero() {
                return Err(PlanError::invalid(
                    "--trigger",
                    "runs once every connection is held; give --hold longer than --trigger-after",
                ));
            }
            let timeout = match a.trigger_timeout {
                Some(t) if t.is_zero() => {
                    return Err(PlanError::invalid(
                        "--trigger-timeout",
                        "must be longer than 0; give the longest the command may run, e.g. 60s",
                    ));
                }
                Some(t) => t,
                None => Trigger::DEFAULT_TIMEOUT,
            };
            Some(Trigger {
                after: after.unwrap_or(Duration::ZERO),
                command: cmd.to_string(),
                timeout,
            })
        }
        (Some(_), None) => {
            return Err(PlanError::invalid("--trigger-after", "needs --trigger 'COMMAND'"));
        }
        (None, None) => None,
    };
    if a.trigger_timeout.is_some() && trigger.is_none() {
        return Err(PlanError::invalid("--trigger-timeout", "needs --trigger 'COMMAND'"));
    }
    Ok(trigger)
}

/// `--segment` (None for the whole), with at least one connection.
pub(super) fn segment(given: Option<Segment>, connections: u64) -> Result<Option<Segment>, PlanError> {
    let segment = given.filter(|s| !s.is_whole());
    if let Some(s) = &segment
        && s.share(connections) == 0
    {
        return Err(PlanError::invalid(
            "-n/--count",
            format!(
                "--count {connections} leaves segment {} no connection; raise --count to at \
                 least the number of segments",
                s.range()
            ),
        ));
    }
    Ok(segment)
}

/// Where connections go; HTTP/3 cannot go through a proxy.
pub(super) fn reach(a: &StormArgs, target: &StormTarget, http: HttpVersion) -> Result<Reach, PlanError> {
    let https = target.scheme.is_tls().then_some(true);
    let reach = Reach::from_args(&a.reach, &target.host, https)?;
    if http == HttpVersion::Http3 && reach.proxy.is_some() {
        return Err(PlanError::invalid(
            "--http3",
            "HTTP/3 runs over UDP and cannot go through an HTTP proxy; leave out -x/--proxy (or set --proxy '' \
             to ignore HTTPS_PROXY), or use --http2",
        ));
    }
    Ok(reach)
}

/// `--http2`: http:// (h2c, prior knowledge) and https:// (ALPN h2)
/// targets only; `--http3`: https:// only (QUIC is always encrypted). No
/// other protocol on the connection either way.
pub(super) fn parse_http(
    a: &StormArgs,
    target: &StormTarget,
    protocol: Option<&Protocol>,
) -> Result<HttpVersion, PlanError> {
    let (flag, version) = match (a.http2, a.http3) {
        (false, false) => return Ok(HttpVersion::Http1),
        (true, true) => {
            return Err(PlanError::invalid(
                "--http2/--http3",
                "give one of them: a storm speaks one HTTP version",
            ));
        }
        (true, false) => ("--http2", HttpVersion::Http2),
        (false, true) => ("--http3", HttpVersion::Http3),
    };
    if version == HttpVersion::Http3 && target.scheme != StormScheme::Https {
        return Err(PlanError::invalid(
            flag,
            format!(
                "HTTP/3 runs over QUIC, which is always encrypted: use an https:// target ('{}' is not one)",
                target.url
            ),
        ));
    }
    if !matches!(target.scheme, StormScheme::Http | StormScheme::Https) {
        return Err(PlanError::invalid(
            flag,
            format!(
                "applies to http:// (h2c) and https:// (ALPN h2) targets; '{}' is not one",
                target.url
            ),
        ));
    }
    if protocol.is_some() {
        return Err(PlanError::invalid(
            flag,
            format!(
                "the connection speaks {}; leave out --protocol and --send/--expect",
                version.label()
            ),
        ));
    }
    if version == HttpVersion::Http3 {
        if a.source.is_some() {
            return Err(PlanError::invalid(
                "--source",
                "QUIC connections share one UDP socket per worker and need no extra source addresses; leave out \
                 --source with --http3",
            ));
        }
        if a.tls.version == Some(crate::TlsVersion::Tls12) {
            return Err(PlanError::invalid(
                "--tls-version",
                "QUIC (--http3) runs on TLS 1.3 only; leave out --tls-version 1.2",
            ));
        }
    }
    Ok(version)
}

pub(super) fn parse_client(a: &StormArgs, target: &StormTarget) -> Result<ClientProfile, PlanError> {
    let Some(text) = a.client.as_deref().map(str::trim) else {
        return Ok(ClientProfile::Lenient);
    };
    let client = match text {
        "lenient" => ClientProfile::Lenient,
        "nats.go" | "nats-go" => ClientProfile::NatsGo,
        other => {
            return Err(PlanError::invalid(
                "--client",
                format!("'{other}' is not a client profile; use lenient or nats.go"),
            ));
        }
    };
    let nats = target.scheme == StormScheme::Nats || a.protocol.as_deref().map(str::trim) == Some("nats");
    if client == ClientProfile::NatsGo && !nats {
        return Err(PlanError::invalid(
            "--client",
            format!(
                "nats.go applies to NATS storms; '{}' does not speak NATS (use nats://… or --protocol nats)",
                target.url
            ),
        ));
    }
    Ok(client)
}
