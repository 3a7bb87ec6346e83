//! A VU's cookie jar: what `Set-Cookie` stored, sent back on later requests
//! to a matching host and path (RFC 6265, without a public-suffix list).
//!
//! ```text
//!  response Set-Cookie ─► CookieJar::store(origin, path, value)
//!  next request         ─► CookieJar::header(origin, path) ─► Cookie: a=1; b=2
//! ```
//!
//! Values are secrets: the jar lives in a VU's memory only, and nothing
//! here prints them (its `Debug` shows names).

use std::fmt;

/// Cookies one jar holds at most; past it, new cookies are ignored.
pub const MAX_COOKIES: usize = 300;
/// Bytes of one cookie (name and value) at most; a longer one is ignored.
pub const MAX_COOKIE_BYTES: usize = 4096;

#[derive(Clone, PartialEq, Eq)]
struct Cookie {
    name: String,
    value: String,
    /// Lowercase, without a leading dot.
    domain: String,
    /// No `Domain` attribute: the setting host only, not its subdomains.
    host_only: bool,
    path: String,
    /// Sent over https only.
    secure: bool,
}

/// One VU's cookies.
#[derive(Clone, Default)]
pub struct CookieJar {
    cookies: Vec<Cookie>,
}

impl fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.cookies.iter().map(|c| &c.name)).finish()
    }
}

impl CookieJar {
    /// An empty jar.
    pub fn new() -> Self {
        CookieJar::default()
    }

    /// Forgets every cookie.
    pub fn clear(&mut self) {
        self.cookies.clear();
    }

    /// Cookies held.
    pub fn len(&self) -> usize {
        self.cookies.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// Stores what one `Set-Cookie` header says, for a response from `host`
    /// to a request for `target` (path and query). A cookie whose `Domain`
    /// the host is not in is ignored; `Max-Age` ≤ 0 or an `Expires` in the
    /// past deletes it. Other expiry times are not tracked.
    pub fn store(&mut self, host: &str, target: &str, set_cookie: &str) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || name.len() + value.len() > MAX_COOKIE_BYTES {
            return;
        }
        let host = host.to_ascii_lowercase();
        let mut cookie = Cookie {
            name: name.to_string(),
            value: value.to_string(),
            domain: host.clone(),
            host_only: true,
            path: default_path(target),
            secure: false,
        };
        let mut expired = false;
        for attr in parts {
            let (key, val) = attr.split_once('=').unwrap_or((attr, ""));
            let (key, val) = (key.trim(), val.trim());
            if key.eq_ignore_ascii_case("domain") {
                let d = val.trim_start_matches('.').to_ascii_lowercase();
                if d.is_empty() {
                    continue;
                }
                if !domain_matches(&host, &d) {
                    return;
                }
                cookie.domain = d;
                cookie.host_only = false;
            } else if key.eq_ignore_ascii_case("path") {
                if val.starts_with('/') {
                    cookie.path = val.to_string();
                }
            } else if key.eq_ignore_ascii_case("secure") {
                cookie.secure = true;
            } else if key.eq_ignore_ascii_case("max-age") {
                if let Ok(n) = val.parse::<i64>() {
                    expired = n <= 0;
                }
            } else if key.eq_ignore_ascii_case("expires") {
                expired |= expires_in_the_past(val);
            }
        }
        let same = |c: &Cookie| c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path;
        match self.cookies.iter().position(same) {
            Some(i) if expired => {
                self.cookies.remove(i);
            }
            Some(i) => self.cookies[i] = cookie,
            None if expired || self.cookies.len() >= MAX_COOKIES => {}
            None => self.cookies.push(cookie),
        }
    }

    /// The `Cookie` header value for a request to `host` for `target`
    /// (over https when `https`): longer paths first, then in the order
    /// they were set. None when no cookie matches.
    pub fn header(&self, https: bool, host: &str, target: &str) -> Option<String> {
        let host = host.to_ascii_lowercase();
        let path = target.split(['?', '#']).next().unwrap_or("/");
        let mut matching: Vec<&Cookie> = self
            .cookies
            .iter()
            .filter(|c| {
                (https || !c.secure)
                    && if c.host_only {
                        c.domain == host
                    } else {
                        domain_matches(&host, &c.domain)
                    }
                    && path_matches(path, &c.path)
            })
            .collect();
        if matching.is_empty() {
            return None;
        }
        // Stable: equal lengths keep the order they were set in.
        matching.sort_by_key(|c| std::cmp::Reverse(c.path.len()));
        let mut out = String::new();
        for (i, c) in matching.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str(&c.name);
            out.push('=');
            out.push_str(&c.value);
        }
        Some(out)
    }
}

/// RFC 6265 5.1.3: `host` is `domain` or a name under it (never an address
/// literal under another).
fn domain_matches(host: &str, domain: &str) -> bool {
    host == domain
        || (host.ends_with(domain)
            && host.as_bytes().get(host.len() - domain.len() - 1) == Some(&b'.')
            && host.parse::<std::net::IpAddr>().is_err())
}

/// RFC 6265 5.1.4.
fn path_matches(path: &str, cookie_path: &str) -> bool {
    path == cookie_path
        || (path.starts_with(cookie_path) && (cookie_path.ends_with('/') || path[cookie_path.len()..].starts_with('/')))
}

/// RFC 6265 5.1.4: the request path up to its last `/` (not included),
/// or `/`.
fn default_path(target: &str) -> String {
    let path = target.split(['?', '#']).next().unwrap_or("");
    match path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => path[..i].to_string(),
    }
}

/// True for an `Expires` date before 2000 (what servers send to delete a
/// cookie, e.g. `Thu, 01 Jan 1970 00:00:00 GMT`). Later dates are taken as
/// the future: a jar lives one iteration by default, or one VU's run.
fn expires_in_the_past(date: &str) -> bool {
    date.split([' ', '-'])
        .filter(|w| w.len() == 4 && w.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|w| w.parse::<u32>().ok())
        .any(|year| year < 2000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_path_decide_what_is_sent() {
        let mut j = CookieJar::new();
        j.store("127.0.0.1", "/login", "sid=42; Path=/; HttpOnly");
        j.store("127.0.0.1", "/app/page?x=1", "deep=1");
        j.store("127.0.0.1", "/", "sec=s; Secure");
        assert_eq!(j.header(false, "127.0.0.1", "/").as_deref(), Some("sid=42"));
        assert_eq!(
            j.header(false, "127.0.0.1", "/app/x").as_deref(),
            Some("deep=1; sid=42")
        );
        assert_eq!(
            j.header(true, "127.0.0.1", "/app").as_deref(),
            Some("deep=1; sid=42; sec=s")
        );
        assert_eq!(j.header(false, "127.0.0.1", "/apple"), Some("sid=42".to_string()));
        assert_eq!(j.header(false, "127.0.0.2", "/"), None);
        // Replaced by name, domain and path; deleted by Max-Age=0 or an old Expires.
        j.store("127.0.0.1", "/", "sid=43; Path=/");
        assert_eq!(j.header(false, "127.0.0.1", "/").as_deref(), Some("sid=43"));
        j.store("127.0.0.1", "/", "sid=; Path=/; Max-Age=0");
        assert_eq!(j.header(false, "127.0.0.1", "/"), None);
        j.store("127.0.0.1", "/app/", "deep=; Expires=Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(j.header(false, "127.0.0.1", "/app/x"), None);
        j.clear();
        assert!(j.is_empty());
    }

    #[test]
    fn domains_cover_subdomains_and_foreign_ones_are_refused() {
        let mut j = CookieJar::new();
        j.store("a.example.com", "/", "d=1; Domain=.Example.com");
        j.store("a.example.com", "/", "h=1");
        j.store("a.example.com", "/", "x=1; Domain=other.com");
        assert_eq!(j.len(), 2);
        assert_eq!(j.header(false, "b.example.com", "/").as_deref(), Some("d=1"));
        assert_eq!(j.header(false, "A.example.com", "/").as_deref(), Some("d=1; h=1"));
        assert_eq!(j.header(false, "badexample.com", "/"), None);
        assert!(!domain_matches("1.127.0.0.1", "127.0.0.1") || "1.127.0.0.1".parse::<std::net::IpAddr>().is_err());
    }

    #[test]
    fn the_jar_is_bounded_and_does_not_print_values() {
        let mut j = CookieJar::new();
        for i in 0..MAX_COOKIES + 50 {
            j.store("h", "/", &format!("c{i}=v"));
        }
        assert_eq!(j.len(), MAX_COOKIES);
        j.store("h", "/", &format!("big={}", "x".repeat(MAX_COOKIE_BYTES)));
        assert_eq!(j.len(), MAX_COOKIES);
        for garbage in ["", "novalue", "=v", ";;;", "a"] {
            let mut j = CookieJar::new();
            j.store("h", "/", garbage);
            assert!(j.is_empty(), "{garbage:?}");
        }
        let mut j = CookieJar::new();
        j.store("h", "/", "sid=s3cret");
        assert!(!format!("{j:?}").contains("s3cret"));
    }
}
