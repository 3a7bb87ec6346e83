//! Network reach and credentials: where a run's connections go (`-4`/`-6`,
//! `--connect-to`, `--resolve`, a proxy from `-x/--proxy` or the
//! environment) and the `Authorization` a request carries (`-a`, the URL's
//! `user:pass@`, `--bearer-file`). Pure: the cli reads the environment and
//! the files; the engine resolves names and opens the sockets.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::PlanError;

/// The longest `--connect-to`/`--resolve` list and NO_PROXY list honoured
/// (each entry is matched per run, not per request; a longer list is a mistake).
const MAX_RULES: usize = 256;

/// Flags and environment as given, before validation.
#[derive(Clone, Debug, Default)]
pub struct ReachArgs {
    /// `-4`.
    pub ipv4: bool,
    /// `-6`.
    pub ipv6: bool,
    /// `--connect-to HOST:PORT:ADDR:PORT`, repeatable.
    pub connect_to: Vec<String>,
    /// `--resolve HOST:PORT:ADDR[,ADDR…]` (or `HOST:ADDR`), repeatable.
    pub resolve: Vec<String>,
    /// `-x/--proxy URL`.
    pub proxy: Option<String>,
    /// The proxy variables of the environment that are set, by name
    /// (`HTTPS_PROXY`, `https_proxy`, `HTTP_PROXY`, `http_proxy`,
    /// `NO_PROXY`, `no_proxy`), read by the cli.
    pub env: Vec<(String, String)>,
}

/// An address family to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Family {
    /// `-4`: IPv4 only.
    #[serde(rename = "ipv4")]
    V4,
    /// `-6`: IPv6 only.
    #[serde(rename = "ipv6")]
    V6,
}

/// Connections for `host:port` go to other addresses (`--connect-to`,
/// `--resolve`); the request's Host and the TLS server name stay the URL's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// The flag as given.
    pub rule: String,
    /// The host it applies to (lowercase); empty: any.
    pub host: String,
    /// The port it applies to; None: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Where to connect instead: names or address literals (IPv6 without
    /// brackets); a name is resolved as the target's would be.
    pub to: Vec<String>,
    /// The port to connect to; None: the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_port: Option<u16>,
}

impl Override {
    /// True when this rule applies to `host:port`.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        (self.host.is_empty() || self.host.eq_ignore_ascii_case(host)) && self.port.is_none_or(|p| p == port)
    }
}

/// An HTTP proxy the run goes through: `CONNECT` tunnels for TLS and
/// storms, absolute-form requests for plain http.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proxy {
    /// The proxy's URL with any password replaced by `***`.
    pub url: String,
    /// Where it came from: `--proxy` or the environment variable's name.
    pub from: String,
    /// The proxy's host (IPv6 without brackets).
    pub host: String,
    /// Its port (1080 when the URL has none, as curl).
    pub port: u16,
    /// `Proxy-Authorization` value from the URL's credentials (never in a
    /// result: the field is not serialized).
    #[serde(skip)]
    pub authorization: Option<String>,
}

/// Where a run's connections go, validated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    /// Only this address family (`-4`/`-6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// `--connect-to` and `--resolve` rules, in order; the first that
    /// matches applies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
    /// The proxy, when the target is not excluded by NO_PROXY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Proxy>,
}

impl Reach {
    /// True when nothing was asked for (then the plan does not record it).
    pub fn is_default(&self) -> bool {
        *self == Reach::default()
    }

    /// Validates `args` for a target `host:port`; `https` picks the
    /// environment's proxy variable (`HTTPS_PROXY` or `HTTP_PROXY`; None:
    /// storms over plain TCP, which take only `--proxy`).
    pub fn from_args(args: &ReachArgs, host: &str, https: Option<bool>) -> Result<Reach, PlanError> {
        let family = match (args.ipv4, args.ipv6) {
            (true, true) => {
                return Err(PlanError::invalid(
                    "-4/-6",
                    "give -4 (IPv4 only) or -6 (IPv6 only), not both; leave both out to use every address",
                ));
            }
            (true, false) => Some(Family::V4),
            (false, true) => Some(Family::V6),
            (false, false) => None,
        };
        if args.connect_to.len() + args.resolve.len() > MAX_RULES {
            return Err(PlanError::invalid(
                "--connect-to/--resolve",
                format!(
                    "{} rules given, more than {MAX_RULES}; give one per host and port",
                    args.connect_to.len() + args.resolve.len()
                ),
            ));
        }
        let mut overrides = Vec::new();
        for rule in &args.connect_to {
            overrides.push(parse_connect_to(rule)?);
        }
        for rule in &args.resolve {
            overrides.push(parse_resolve(rule)?);
        }
        let env = |names: [&str; 2]| {
            names.into_iter().find_map(|n| {
                args.env
                    .iter()
                    .find(|(k, v)| k == n && !v.trim().is_empty())
                    .map(|(k, v)| (k.clone(), v.clone()))
            })
        };
        let chosen = match (&args.proxy, https) {
            (Some(p), _) => Some(("--proxy".to_string(), p.clone())),
            (None, Some(true)) => env(["HTTPS_PROXY", "https_proxy"]),
            (None, Some(false)) => env(["HTTP_PROXY", "http_proxy"]),
            (None, None) => None,
        };
        let proxy = match chosen {
            Some((from, url)) if !url.is_empty() => {
                let proxy = parse_proxy(&from, &url)?;
                let no_proxy = env(["NO_PROXY", "no_proxy"]).map(|(_, v)| v).unwrap_or_default();
                (!no_proxy_matches(&no_proxy, host)).then_some(proxy)
            }
            _ => None,
        };
        Ok(Reach {
            family,
            overrides,
            proxy,
        })
    }

    /// The rule that sends `host:port` elsewhere, if any.
    pub fn override_for(&self, host: &str, port: u16) -> Option<&Override> {
        self.overrides.iter().find(|o| o.matches(host, port))
    }

    /// A line for reports, e.g. `via proxy http://127.0.0.1:8888 (--proxy); IPv6 only`.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(p) = &self.proxy {
            parts.push(format!("via proxy {} ({})", p.url, p.from));
        }
        for o in &self.overrides {
            parts.push(format!("connect-to {}", o.rule));
        }
        match self.family {
            Some(Family::V4) => parts.push("IPv4 only".to_string()),
            Some(Family::V6) => parts.push("IPv6 only".to_string()),
            None => {}
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// `Basic base64(user:pass)`.
pub fn basic_authorization(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// The `Authorization` a URL's `user:password@` asks for (`Basic`, both
/// parts percent-decoded), or None when it has neither: what `throng http`
/// targets, proxies and WebSocket storms send for URL credentials.
pub(crate) fn url_authorization(url: &url::Url) -> Option<String> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    Some(basic_authorization(
        &decode(url.username()),
        &decode(url.password().unwrap_or("")),
    ))
}

/// Splits `HOST` and the rest at the first `:` outside brackets; the host
/// loses its brackets.
fn split_host(text: &str) -> Option<(&str, &str)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let after = after.strip_prefix(':')?;
        Some((host, after))
    } else {
        text.split_once(':')
    }
}

fn parse_port(text: &str) -> Result<Option<u16>, ()> {
    match text {
        "" | "*" => Ok(None),
        t => t.parse::<u16>().ok().filter(|p| *p > 0).map(Some).ok_or(()),
    }
}

/// curl's `--connect-to HOST1:PORT1:HOST2:PORT2`; any part may be empty
/// (any host, any port, the same host, the same port).
fn parse_connect_to(rule: &str) -> Result<Override, PlanError> {
    let bad = |why: &str| {
        PlanError::invalid(
            "--connect-to",
            format!(
                "'{rule}': {why}; write HOST:PORT:ADDR:PORT, e.g. --connect-to example.test:443:127.0.0.1:8443 \
                 (IPv6 in brackets: [::1])"
            ),
        )
    };
    let (host, rest) = split_host(rule).ok_or_else(|| bad("no ':' after the host"))?;
    let (port, rest) = rest.split_once(':').ok_or_else(|| bad("no ':' after the port"))?;
    let (to, to_port) = split_host(rest).ok_or_else(|| bad("no ':' between the address and its port"))?;
    let port = parse_port(port).map_err(|()| bad(&format!("'{port}' is not a port (1-65535)")))?;
    let to_port = parse_port(to_port).map_err(|()| bad(&format!("'{to_port}' is not a port (1-65535)")))?;
    if to.contains([':', '/', ' ', '@']) && to.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(bad(&format!("'{to}' is neither a host name nor an address")));
    }
    Ok(Override {
        rule: rule.to_string(),
        host: host.to_ascii_lowercase(),
        port,
        to: if to.is_empty() {
            Vec::new()
        } else {
            vec![to.to_string()]
        },
        to_port,
    })
}

/// curl's `--resolve HOST:PORT:ADDR[,ADDR…]`, or `HOST:ADDR` for any port.
fn parse_resolve(rule: &str) -> Result<Override, PlanError> {
    let bad = |why: &str| {
        PlanError::invalid(
            "--resolve",
            format!(
                "'{rule}': {why}; write HOST:PORT:ADDR[,ADDR…] or HOST:ADDR, e.g. --resolve example.test:443:127.0.0.1 \
                 (IPv6 in brackets: [::1])"
            ),
        )
    };
    let addrs = |text: &str| -> Option<Vec<String>> {
        text.split(',')
            .map(|a| {
                let a = a.trim();
                let a = a.strip_prefix('[').and_then(|a| a.strip_suffix(']')).unwrap_or(a);
                a.parse::<std::net::IpAddr>().ok().map(|ip| ip.to_string())
            })
            .collect()
    };
    let (host, rest) = split_host(rule).ok_or_else(|| bad("no ':' after the host"))?;
    if host.is_empty() {
        return Err(bad("the host is empty"));
    }
    let (port, to) = match rest.split_once(':') {
        Some((p, a)) if parse_port(p).is_ok() && addrs(a).is_some() => {
            (parse_port(p).unwrap_or_default(), addrs(a).unwrap_or_default())
        }
        _ => (
            None,
            addrs(rest).ok_or_else(|| bad(&format!("'{rest}' is not a port and an address, nor an address")))?,
        ),
    };
    Ok(Override {
        rule: rule.to_string(),
        host: host.to_ascii_lowercase(),
        port,
        to,
        to_port: None,
    })
}

/// `http://[user:pass@]host[:port]` from `from` (the flag or variable).
fn parse_proxy(from: &str, text: &str) -> Result<Proxy, PlanError> {
    let flag: &'static str = if from == "--proxy" {
        "-x/--proxy"
    } else {
        "HTTPS_PROXY/HTTP_PROXY (environment)"
    };
    let shown = |t: &str| match url::Url::parse(t) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ if t.contains('@') => "<a URL with credentials>".to_string(),
        _ => t.to_string(),
    };
    let bad = |why: String| {
        PlanError::invalid(
            flag,
            format!(
                "{from}='{}': {why}; write http://[USER:PASSWORD@]HOST:PORT, e.g. http://127.0.0.1:3128",
                shown(text)
            ),
        )
    };
    // As curl: a proxy without a scheme is an http:// one.
    let full = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    let mut url = url::Url::parse(&full).map_err(|e| bad(format!("not a URL ({e})")))?;
    if url.scheme() != "http" {
        return Err(bad(format!(
            "the scheme '{}' is not supported (throng speaks to proxies over plain http)",
            url.scheme()
        )));
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(bad("no host".to_string())),
    };
    if !(url.path().is_empty() || url.path() == "/") || url.query().is_some() {
        return Err(bad("a proxy URL has no path".to_string()));
    }
    let port = url.port().unwrap_or(1080);
    let authorization = url_authorization(&url);
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    Ok(Proxy {
        url: url.as_str().trim_end_matches('/').to_string(),
        from: from.to_string(),
        host,
        port,
        authorization,
    })
}

/// Percent-decodes a URL's user or password (lossy on invalid UTF-8).
pub(crate) fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                // Two hex digits: at most 0xff.
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True when `host` is excluded from proxying by a NO_PROXY list: `*`, or
/// an entry equal to the host or a domain it is in (`example.test` and
/// `.example.test` both cover `a.example.test`). Address ranges (CIDR) are
/// not understood.
pub fn no_proxy_matches(list: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    list.split(',').take(MAX_RULES).any(|entry| {
        let e = entry
            .trim()
            .trim_start_matches("*.")
            .trim_start_matches('.')
            .to_ascii_lowercase();
        let e = e.strip_prefix('[').and_then(|e| e.strip_suffix(']')).unwrap_or(&e);
        if e == "*" {
            return true;
        }
        !e.is_empty() && (host == e || host.ends_with(&format!(".{e}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ReachArgs {
        ReachArgs::default()
    }

    #[test]
    fn connect_to_parses_curls_forms() {
        let o = parse_connect_to("example.test:443:127.0.0.1:8443").unwrap();
        assert_eq!(
            (o.host.as_str(), o.port, o.to.clone(), o.to_port),
            ("example.test", Some(443), vec!["127.0.0.1".to_string()], Some(8443))
        );
        let o = parse_connect_to("::[::1]:").unwrap();
        assert_eq!(
            (o.host.as_str(), o.port, o.to.clone(), o.to_port),
            ("", None, vec!["::1".to_string()], None)
        );
        assert!(o.matches("anything", 9));
        for bad in ["h", "h:1", "h:1:a", "h:x:a:1", "h:1:a:70000", "h:1:a b:1"] {
            let e = parse_connect_to(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("--connect-to: '") && e.contains("HOST:PORT:ADDR:PORT"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn resolve_takes_a_port_or_none_and_several_addresses() {
        let o = parse_resolve("example.test:8080:127.0.0.1,[::1]").unwrap();
        assert_eq!(
            (o.port, o.to.clone()),
            (Some(8080), vec!["127.0.0.1".to_string(), "::1".to_string()])
        );
        let o = parse_resolve("Example.test:127.0.0.2").unwrap();
        assert_eq!(
            (o.host.as_str(), o.port, o.to.clone()),
            ("example.test", None, vec!["127.0.0.2".to_string()])
        );
        assert!(o.matches("EXAMPLE.test", 1));
        let o = parse_resolve("h:::1").unwrap();
        assert_eq!(o.to, ["::1"]);
        for bad in ["h", "h:80:notanip", ":80:127.0.0.1", "h:80:"] {
            assert!(parse_resolve(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn proxies_come_from_the_flag_or_the_environment_and_no_proxy() {
        let mut a = args();
        a.env = vec![
            ("https_proxy".into(), "http://u:p%40ss@127.0.0.1:3128".into()),
            ("HTTP_PROXY".into(), "127.0.0.1:8888".into()),
            ("NO_PROXY".into(), "localhost, .internal.test".into()),
        ];
        let r = Reach::from_args(&a, "example.test", Some(true)).unwrap();
        let p = r.proxy.unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.from.as_str()),
            ("127.0.0.1", 3128, "https_proxy")
        );
        assert_eq!(p.url, "http://u:***@127.0.0.1:3128");
        assert_eq!(
            p.authorization.as_deref(),
            Some(basic_authorization("u", "p@ss").as_str())
        );
        let json = serde_json::to_string(&Reach::from_args(&a, "example.test", Some(true)).unwrap()).unwrap();
        assert!(!json.contains("p%40ss") && !json.contains("Basic"), "{json}");
        let r = Reach::from_args(&a, "example.test", Some(false)).unwrap();
        assert_eq!(r.proxy.unwrap().port, 8888);
        assert!(Reach::from_args(&a, "localhost", Some(false)).unwrap().proxy.is_none());
        assert!(
            Reach::from_args(&a, "a.internal.test", Some(true))
                .unwrap()
                .proxy
                .is_none()
        );
        assert!(Reach::from_args(&a, "example.test", None).unwrap().proxy.is_none());
        a.proxy = Some("http://127.0.0.1:9".into());
        assert_eq!(
            Reach::from_args(&a, "example.test", None).unwrap().proxy.unwrap().port,
            9
        );
        a.proxy = Some("socks5://127.0.0.1:9".into());
        let e = Reach::from_args(&a, "example.test", None).unwrap_err().to_string();
        assert!(e.starts_with("-x/--proxy: --proxy='socks5://127.0.0.1:9'"), "{e}");
        a.proxy = Some("http://u:secret@127.0.0.1:9/path".into());
        let e = Reach::from_args(&a, "example.test", None).unwrap_err().to_string();
        assert!(!e.contains("secret") && e.contains("no path"), "{e}");
    }

    #[test]
    fn no_proxy_matches_hosts_and_domains() {
        assert!(no_proxy_matches("*", "x"));
        assert!(no_proxy_matches("a.test", "b.a.test"));
        assert!(no_proxy_matches("[::1]", "::1"));
        assert!(!no_proxy_matches("a.test", "ba.test"));
        assert!(!no_proxy_matches("", "a"));
    }

    #[test]
    fn both_families_are_refused() {
        let mut a = args();
        a.ipv4 = true;
        a.ipv6 = true;
        assert!(
            Reach::from_args(&a, "h", None)
                .unwrap_err()
                .to_string()
                .starts_with("-4/-6:")
        );
        a.ipv6 = false;
        assert_eq!(Reach::from_args(&a, "h", None).unwrap().family, Some(Family::V4));
    }
}
