//! The targets of a plan: URLs parsed (their credentials taken out),
//! errors said where a target was written, and each target's method.

use crate::error::PlanError;
use crate::targets::{MAX_URL_BYTES, RawTarget};

use super::{HttpArgs, Scheme, Target, is_token};

/// `r`'s error, said with where it was written (a file's line).
pub(super) fn at_error(r: &RawTarget, e: PlanError) -> PlanError {
    if r.at == "URL" {
        return e;
    }
    let PlanError::Invalid { flag, message } = e;
    let flag = if r.at.starts_with("URL") { flag } else { "--targets" };
    PlanError::invalid(flag, format!("{}: {message}", r.at))
}

pub(super) fn parse_target_at(r: &RawTarget) -> Result<(Target, Option<String>), PlanError> {
    parse_target(&r.url).map_err(|e| at_error(r, e))
}

/// A target's method: its own, `-m`'s, or POST with a body and GET without.
pub(super) fn target_method(r: &RawTarget, args: &HttpArgs, body: bool) -> Result<String, PlanError> {
    let method = r
        .method
        .clone()
        .or_else(|| args.method.clone())
        .unwrap_or_else(|| if body { "POST" } else { "GET" }.to_string());
    if method.len() > 64 {
        return Err(at_error(
            r,
            PlanError::invalid(
                "-m/--method",
                format!(
                    "a method of {} bytes is no HTTP method: a method is a short token (at most 64 bytes) such as GET",
                    method.len()
                ),
            ),
        ));
    }
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err(at_error(
            r,
            PlanError::invalid(
                "-m/--method",
                format!(
                    "'{}' is not an HTTP method; use a token such as GET, POST or PUT",
                    method.escape_debug()
                ),
            ),
        ));
    }
    Ok(method)
}

/// The target, and the `Authorization` its `user:pass@` asks for; the
/// target's `url` keeps no credentials.
pub(super) fn parse_target(given: &str) -> Result<(Target, Option<String>), PlanError> {
    let example = "e.g. http://127.0.0.1:8080/";
    // Errors quote the URL without its credentials.
    let masked = mask_userinfo(given);
    let text = masked.as_str();
    if given.len() > MAX_URL_BYTES {
        return Err(PlanError::invalid(
            "URL",
            format!(
                "the URL is {} bytes, over the limit of {MAX_URL_BYTES} bytes (64 KiB); servers commonly refuse \
                 request lines past 8 KiB (414 URI Too Long); shorten it",
                given.len()
            ),
        ));
    }
    let url = url::Url::parse(given).map_err(|e| {
        PlanError::invalid(
            "URL",
            format!("'{text}' is not a valid URL ({e}); write it in full, {example}"),
        )
    })?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(PlanError::invalid(
                "URL",
                format!("scheme '{other}' is not supported by `throng http`; use http:// or https://, {example}"),
            ));
        }
    };
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(PlanError::invalid("URL", format!("'{text}' has no host; {example}"))),
    };
    let (shown, auth) = match crate::reach::url_authorization(&url) {
        None => (given.to_string(), None),
        Some(auth) => {
            let mut bare = url.clone();
            // Neither fails on an http(s) URL with a host.
            let _ = bare.set_username("");
            let _ = bare.set_password(None);
            (bare.to_string(), Some(auth))
        }
    };
    let port = url.port_or_known_default().unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok((
        Target {
            url: shown,
            scheme,
            host,
            port,
            path,
        },
        auth,
    ))
}

/// `text` with anything between `://` and the `@` that ends the
/// authority's user information replaced by `***`: a URL fit for an error
/// message (it need not parse).
pub fn mask_userinfo(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => text.to_string(),
    }
}
