//! A storm's target and what a connection sends or comes from: the
//! TARGET URL (its secrets masked), `--request`, `--source`.

use std::net::IpAddr;

use crate::error::PlanError;
use crate::http::is_token;

use super::{StormRequest, StormScheme, StormTarget};

/// The most source addresses a storm rotates over.
const MAX_SOURCES: u128 = 65_536;

pub(super) fn parse_target(given: &str) -> Result<StormTarget, PlanError> {
    let example = "e.g. tcp://127.0.0.1:8080, tls://127.0.0.1:8443, https://127.0.0.1:8443/, \
                   nats://user:pass@127.0.0.1:4222, ws://127.0.0.1:8080/chat or mqtt://127.0.0.1:1883";
    // Errors quote the target with any user:password@ as ***@.
    let text = &crate::http::mask_userinfo(given);
    let url = url::Url::parse(given)
        .map_err(|e| PlanError::invalid("TARGET", format!("'{text}' is not a valid target ({e}); {example}")))?;
    let scheme = match url.scheme() {
        "tcp" => StormScheme::Tcp,
        "tls" => StormScheme::Tls,
        "http" => StormScheme::Http,
        "https" => StormScheme::Https,
        "nats" => StormScheme::Nats,
        "ws" => StormScheme::Ws,
        "wss" => StormScheme::Wss,
        "mqtt" => StormScheme::Mqtt,
        "mqtts" => StormScheme::Mqtts,
        other => {
            return Err(PlanError::invalid(
                "TARGET",
                format!("scheme '{other}' is not supported; {example}"),
            ));
        }
    };
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(PlanError::invalid("TARGET", format!("'{text}' has no host; {example}"))),
    };
    let port = match (url.port_or_known_default(), scheme) {
        (Some(p), _) => p,
        (None, StormScheme::Tls) => 443,
        (None, StormScheme::Nats) => 4222,
        (None, StormScheme::Mqtt) => 1883,
        (None, StormScheme::Mqtts) => 8883,
        (None, _) => {
            return Err(PlanError::invalid(
                "TARGET",
                format!("'{text}' needs a port; {example}"),
            ));
        }
    };
    Ok(StormTarget {
        url: redacted(&url),
        scheme,
        host,
        port,
    })
}

/// The URL as given, with any password (or a lone user part, a NATS
/// token) replaced by `***`: result files must not carry secrets.
fn redacted(url: &url::Url) -> String {
    let mut u = url.clone();
    if u.password().is_some() {
        let _ = u.set_password(Some("***"));
    } else if !u.username().is_empty() && u.scheme() == "nats" {
        let _ = u.set_username("***");
    }
    let text = u.to_string();
    // url adds a trailing slash to hosts without a path; keep what was typed.
    if !url.as_str().ends_with('/') && text.ends_with('/') && u.path() == "/" {
        text[..text.len() - 1].to_string()
    } else {
        text
    }
}

pub(super) fn target_path(text: &str) -> String {
    url::Url::parse(text)
        .map(|u| match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        })
        .unwrap_or_else(|_| "/".to_string())
}

pub(super) fn parse_request(text: &str) -> Result<StormRequest, PlanError> {
    let bad = || {
        PlanError::invalid(
            "--request",
            format!("'{text}' is not 'METHOD /path' or 'none', e.g. --request 'GET /'"),
        )
    };
    let mut parts = text.split_whitespace();
    let (Some(method), Some(path), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if method.len() > 64 || !method.bytes().all(is_token) || !path.starts_with('/') {
        return Err(bad());
    }
    Ok(StormRequest {
        method: method.to_string(),
        path: path.to_string(),
    })
}

/// Parses `127.0.0.2-127.0.0.200`, `127.0.0.0/24` or one address.
pub fn parse_sources(text: &str) -> Result<Vec<IpAddr>, PlanError> {
    let bad = |why: &str| {
        PlanError::invalid(
            "--source",
            format!("'{text}': {why}; e.g. --source 127.0.0.2-127.0.0.200 or --source 127.0.1.0/24"),
        )
    };
    let ip = |s: &str| s.trim().parse::<IpAddr>().map_err(|_| bad("not an IP address"));
    let (first, last) = if let Some((a, b)) = text.split_once('-') {
        (ip(a)?, ip(b)?)
    } else if let Some((a, bits)) = text.split_once('/') {
        let base = ip(a)?;
        let bits: u32 = bits
            .trim()
            .parse()
            .map_err(|_| bad("the prefix length is not a number"))?;
        let width = if base.is_ipv4() { 32 } else { 128 };
        if bits > width {
            return Err(bad("the prefix is longer than the address"));
        }
        let host_bits = width - bits;
        let n = to_u128(base);
        let mask = if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        let (lo, hi) = (n & !mask, n | mask);
        // Skip the network and broadcast addresses of IPv4 subnets.
        let (lo, hi) = if base.is_ipv4() && host_bits >= 2 {
            (lo + 1, hi - 1)
        } else {
            (lo, hi)
        };
        (from_u128(lo, base.is_ipv4()), from_u128(hi, base.is_ipv4()))
    } else {
        let a = ip(text)?;
        (a, a)
    };
    if first.is_ipv4() != last.is_ipv4() {
        return Err(bad("both ends must be IPv4 or both IPv6"));
    }
    let (lo, hi) = (to_u128(first), to_u128(last));
    if lo > hi {
        return Err(bad("the range runs backwards"));
    }
    if hi - lo >= MAX_SOURCES {
        return Err(bad("more than 65536 addresses"));
    }
    Ok((lo..=hi).map(|n| from_u128(n, first.is_ipv4())).collect())
}

fn to_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    }
}

fn from_u128(n: u128, v4: bool) -> IpAddr {
    if v4 {
        // Invariant: built from IPv4 values, so it fits 32 bits.
        IpAddr::V4(std::net::Ipv4Addr::from(n as u32))
    } else {
        IpAddr::V6(std::net::Ipv6Addr::from(n))
    }
}
