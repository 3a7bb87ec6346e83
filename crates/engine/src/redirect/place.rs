//! Where a redirect points, I/O-free: the statuses that redirect, a
//! `Location` resolved against the request (`next_hop`), the headers a hop
//! carries, cookies along the way, and what an HTTP run follows
//! (`FollowSpec`). The hops themselves are `super`'s.

use std::borrow::Cow;

use throng_metrics::ErrorClass;
use throng_plan::Authority;
use throng_scenario::CookieJar;

/// More hops than the request may follow.
pub(crate) const TOO_MANY: ErrorClass = ErrorClass::Redirect("too_many");
/// No `Location`, or one that is not an http(s) URL.
pub(crate) const BAD_LOCATION: ErrorClass = ErrorClass::Redirect("bad_location");
/// To https from a run with no TLS client.
pub(crate) const SCHEME: ErrorClass = ErrorClass::Redirect("scheme");

/// The longest `Location` followed.
const MAX_LOCATION: usize = 8192;

/// True for the statuses that are followed.
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Where a request goes: origin and request target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub https: bool,
    /// Name or address literal (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    /// Path and query.
    pub target: String,
}

impl Place {
    pub(crate) fn same_origin(&self, o: &Place) -> bool {
        self.https == o.https && self.port == o.port && self.host.eq_ignore_ascii_case(&o.host)
    }

    pub(crate) fn authority(&self) -> Authority {
        Authority::new(&self.host, self.port, if self.https { 443 } else { 80 })
    }

    fn url(&self) -> Option<url::Url> {
        let scheme = if self.https { "https" } else { "http" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        url::Url::parse(&format!("{scheme}://{host}:{}{}", self.port, self.target)).ok()
    }
}

/// The request a redirect asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    pub place: Place,
    pub method: String,
    /// The body goes again (307, 308).
    pub body: bool,
}

/// The hop a `status` response with `location` asks for, after a `method`
/// request to `from`: 301, 302 and 303 become GET without a body (HEAD
/// stays HEAD), 307 and 308 keep the method and body. A relative
/// `Location` is resolved against `from`; a fragment is dropped.
pub(crate) fn next_hop(from: &Place, method: &str, status: u16, location: Option<&str>) -> Result<Hop, ErrorClass> {
    let location = location
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.len() <= MAX_LOCATION)
        .ok_or(BAD_LOCATION)?;
    let base = from.url().ok_or(BAD_LOCATION)?;
    let url = base.join(location).map_err(|_| BAD_LOCATION)?;
    let https = match url.scheme() {
        "http" => false,
        "https" => true,
        _ => return Err(BAD_LOCATION),
    };
    let host = match url.host().ok_or(BAD_LOCATION)? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(a) => a.to_string(),
        url::Host::Ipv6(a) => a.to_string(),
    };
    // Port 0 is no port anyone listens on: a connect there would fail as
    // if the first origin were down.
    let port = url.port_or_known_default().filter(|&p| p != 0).ok_or(BAD_LOCATION)?;
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let (method, body) = match status {
        307 | 308 => (method.to_string(), true),
        _ if method.eq_ignore_ascii_case("HEAD") => (method.to_string(), false),
        _ => ("GET".to_string(), false),
    };
    Ok(Hop {
        place: Place {
            https,
            host,
            port,
            target,
        },
        method,
        body,
    })
}

/// The headers of a hop: the request's, less `Host` and the credentials
/// (`Authorization`, `Cookie`, `Proxy-Authorization`) when it leaves the
/// first request's origin, less `Content-Type` when the body stays behind;
/// then `cookie` (the jar's) merged into the `Cookie` header.
pub(crate) fn hop_headers(
    headers: &[(String, String)],
    same_origin: bool,
    body: bool,
    cookie: Option<String>,
) -> Vec<(String, String)> {
    let dropped = |n: &str| {
        (!same_origin
            && ["host", "authorization", "cookie", "proxy-authorization"]
                .iter()
                .any(|d| n.eq_ignore_ascii_case(d)))
            || (!body && n.eq_ignore_ascii_case("content-type"))
    };
    let mut out: Vec<(String, String)> = headers.iter().filter(|(n, _)| !dropped(n)).cloned().collect();
    if let Some(c) = cookie {
        add_cookie(&mut out, c);
    }
    out
}

/// Adds `cookie` (a jar's `a=1; b=2`) to the `Cookie` header, after a value
/// already there.
pub(crate) fn add_cookie(headers: &mut Vec<(String, String)>, cookie: String) {
    match headers.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case("cookie")) {
        Some((_, v)) if !v.is_empty() => {
            v.push_str("; ");
            v.push_str(&cookie);
        }
        Some((_, v)) => *v = cookie,
        None => headers.push(("Cookie".to_string(), cookie)),
    }
}

/// Every `Set-Cookie` of a response from `place` into `jar`.
pub(crate) fn store_cookies(jar: &mut CookieJar, place: &Place, headers: &[(String, String)]) {
    for (_, v) in headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie")) {
        jar.store(&place.host, &place.target, v);
    }
}

/// How an HTTP run's request follows redirects (`--redirects`).
#[derive(Debug)]
pub(crate) struct FollowSpec {
    pub place: Place,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
    pub limit: u32,
}

impl FollowSpec {
    /// None when the plan follows no redirects.
    pub(crate) fn of(plan: &throng_plan::HttpPlan) -> Option<std::sync::Arc<FollowSpec>> {
        (plan.redirects > 0).then(|| {
            std::sync::Arc::new(FollowSpec {
                place: Place {
                    https: plan.target.scheme == throng_plan::Scheme::Https,
                    host: plan.target.host.clone(),
                    port: plan.target.port,
                    target: plan.target.path.clone(),
                },
                method: plan.method.clone(),
                headers: plan.headers.clone(),
                body: plan.body.clone(),
                limit: plan.redirects,
            })
        })
    }
}

/// The headers of a request as a slice, with the jar's cookie merged in
/// when there is one.
pub(crate) fn with_cookie(headers: &[(String, String)], cookie: Option<String>) -> Cow<'_, [(String, String)]> {
    match cookie {
        None => Cow::Borrowed(headers),
        Some(c) => {
            let mut h = headers.to_vec();
            add_cookie(&mut h, c);
            Cow::Owned(h)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(https: bool, host: &str, port: u16, target: &str) -> Place {
        Place {
            https,
            host: host.into(),
            port,
            target: target.into(),
        }
    }

    #[test]
    fn locations_resolve_against_the_request() {
        let from = at(false, "127.0.0.1", 8080, "/a/b?x=1");
        let hop = |loc: &str| next_hop(&from, "GET", 302, Some(loc)).map(|h| h.place);
        assert_eq!(hop("/x"), Ok(at(false, "127.0.0.1", 8080, "/x")));
        assert_eq!(hop("c?d=2#frag"), Ok(at(false, "127.0.0.1", 8080, "/a/c?d=2")));
        assert_eq!(hop("../up"), Ok(at(false, "127.0.0.1", 8080, "/up")));
        assert_eq!(hop("http://127.0.0.2:9/z"), Ok(at(false, "127.0.0.2", 9, "/z")));
        assert_eq!(hop("https://Example.COM/"), Ok(at(true, "example.com", 443, "/")));
        assert_eq!(hop("//[::1]:81/v6"), Ok(at(false, "::1", 81, "/v6")));
        for bad in [
            "",
            "   ",
            "ftp://h/",
            "http://",
            "http://h:99999/",
            "mailto:a@b",
            "http://127.0.0.1:0/x",
            "https://h:0/",
            "http://[fe80::1%25lo]:8080/",
            "http://[fe80::1%lo]/",
        ] {
            assert_eq!(hop(bad), Err(BAD_LOCATION), "{bad:?}");
        }
        assert_eq!(next_hop(&from, "GET", 301, None), Err(BAD_LOCATION));
        assert_eq!(hop(&format!("/{}", "a".repeat(MAX_LOCATION))), Err(BAD_LOCATION));
        let v6 = at(false, "::1", 8080, "/");
        assert_eq!(
            next_hop(&v6, "GET", 301, Some("/x")).map(|h| h.place.authority().to_string()),
            Ok("[::1]:8080".to_string())
        );
    }

    #[test]
    fn methods_and_bodies_follow_the_status() {
        let from = at(false, "h", 80, "/");
        let hop = |m: &str, s: u16| {
            let h = next_hop(&from, m, s, Some("/x")).unwrap();
            (h.method, h.body)
        };
        for s in [301, 302, 303] {
            assert_eq!(hop("POST", s), ("GET".to_string(), false));
            assert_eq!(hop("HEAD", s), ("HEAD".to_string(), false));
        }
        for s in [307, 308] {
            assert_eq!(hop("POST", s), ("POST".to_string(), true));
            assert_eq!(hop("PUT", s), ("PUT".to_string(), true));
        }
        assert!([301, 302, 303, 307, 308].iter().all(|&s| is_redirect(s)));
        assert!(![300, 304, 305, 200].iter().any(|&s| is_redirect(s)));
    }

    #[test]
    fn credentials_stay_with_their_origin() {
        let h = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
        };
        let given = h(&[
            ("Authorization", "Bearer t"),
            ("Cookie", "a=1"),
            ("Host", "x"),
            ("Content-Type", "text/plain"),
            ("Accept", "*/*"),
        ]);
        assert_eq!(hop_headers(&given, true, true, None), given);
        assert_eq!(
            hop_headers(&given, false, false, Some("j=2".into())),
            h(&[("Accept", "*/*"), ("Cookie", "j=2")])
        );
        assert_eq!(
            hop_headers(&given, true, false, Some("j=2".into())),
            h(&[
                ("Authorization", "Bearer t"),
                ("Cookie", "a=1; j=2"),
                ("Host", "x"),
                ("Accept", "*/*")
            ])
        );
    }
}
