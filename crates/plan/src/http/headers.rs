//! The request's headers: `-H` (and `-H @FILE`), the one `Authorization`
//! (`-a`, a URL's `user:pass@`, `--bearer-file`), a proxy's credentials,
//! `-T`, `--cookie`, the framing headers throng computes itself, and which
//! of them are secret.

use crate::error::PlanError;
use crate::head::is_token;
use crate::reach::Reach;

use super::{HttpArgs, SENSITIVE_HEADERS, Scheme, Target};

/// A request's headers, names and values, in order.
type Headers = Vec<(String, String)>;

/// The `-H` headers and those of `-H @FILE` files, in order, and the
/// names of the latter (lowercase): a file's headers are secret.
pub(super) fn given_headers(args: &HttpArgs) -> Result<(Headers, Vec<String>), PlanError> {
    let mut headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let mut from_files = Vec::new();
    for (at, line) in &args.header_lines {
        let (name, value) =
            parse_header(line).map_err(|e| PlanError::invalid("-H @FILE", format!("{at}: {}", e.message())))?;
        from_files.push(name.to_ascii_lowercase());
        headers.push((name, value));
    }
    Ok((headers, from_files))
}

/// Adds the proxy's `Proxy-Authorization` to a plain http request (an
/// https one sends it on the CONNECT instead).
pub(super) fn proxy_authorization(headers: &mut Vec<(String, String)>, reach: &Reach, target: &Target) {
    if let (Some(p), Scheme::Http) = (&reach.proxy, target.scheme)
        && let Some(auth) = &p.authorization
    {
        headers.push(("Proxy-Authorization".to_string(), auth.clone()));
    }
}

/// Adds `-T/--content-type`, refusing it beside an `-H 'Content-Type: …'`.
pub(super) fn content_type(headers: &mut Vec<(String, String)>, given: Option<&str>) -> Result<(), PlanError> {
    let Some(ct) = given else {
        return Ok(());
    };
    if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
        return Err(PlanError::invalid(
            "-T/--content-type",
            "-H 'Content-Type: …' sets it too; give one of them",
        ));
    }
    let ct = ct.trim_matches([' ', '\t']);
    if ct.is_empty() || ct.chars().any(is_forbidden_in_value) {
        return Err(PlanError::invalid(
            "-T/--content-type",
            format!("'{}' is not a media type; e.g. -T application/json", ct.escape_debug()),
        ));
    }
    headers.push(("Content-Type".to_string(), ct.to_string()));
    Ok(())
}

/// Adds the one `Authorization` that `-a`, the URL's `user:pass@` or
/// `--bearer-file` asks for, refusing two sources at once (an `-H
/// 'Authorization: …'` counts as one).
pub(super) fn authorization(
    headers: &mut Vec<(String, String)>,
    args: &HttpArgs,
    url: Option<String>,
) -> Result<(), PlanError> {
    let mut given: Vec<(&str, String)> = Vec::new();
    if headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization")) {
        given.push(("-H 'Authorization: …'", String::new()));
    }
    if let Some(a) = &args.basic_auth {
        let Some((user, password)) = a.split_once(':') else {
            return Err(PlanError::invalid(
                "-a/--basic-auth",
                "expected USER:PASSWORD (the password after the first ':'), e.g. -a alice:s3cret",
            ));
        };
        if user.is_empty() || a.chars().any(|c| c.is_control()) {
            return Err(PlanError::invalid(
                "-a/--basic-auth",
                "the user is empty or a control character is in USER:PASSWORD; e.g. -a alice:s3cret",
            ));
        }
        given.push(("-a/--basic-auth", crate::reach::basic_authorization(user, password)));
    }
    if let Some(a) = url {
        given.push(("the URL's user:password@", a));
    }
    if let Some((path, token)) = &args.bearer {
        let token = token.trim_matches([' ', '\t']);
        if token.is_empty() || token.chars().any(is_forbidden_in_value) {
            return Err(PlanError::invalid(
                "--bearer-file",
                format!("{path}: the first line is empty or holds a control character; put the token alone on it"),
            ));
        }
        given.push(("--bearer-file", format!("Bearer {token}")));
    }
    match given.as_slice() {
        [] => Ok(()),
        [(_, value)] => {
            if !value.is_empty() {
                headers.push(("Authorization".to_string(), value.clone()));
            }
            Ok(())
        }
        [(a, _), (b, _), ..] => Err(PlanError::invalid(
            "-a/--basic-auth",
            format!("both {a} and {b} set the Authorization header; give one"),
        )),
    }
}

pub(super) fn parse_header(text: &str) -> Result<(String, String), PlanError> {
    // The value may be a secret (Authorization, Cookie, an API key): an
    // error shows the name when it is a well-formed one, never the value.
    let shown = match text.split_once(':') {
        Some((name, _)) => {
            let name = name.trim_matches([' ', '\t']);
            if !name.is_empty() && name.len() <= 64 && name.bytes().all(is_token) {
                format!("'{name}: …'")
            } else {
                "a header".to_string()
            }
        }
        None => "a header".to_string(),
    };
    let bad = |why: &str| {
        PlanError::invalid(
            "-H/--header",
            format!("{shown}: {why}; expected 'Name: value', e.g. -H 'Accept: application/json'"),
        )
    };
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| bad("no ':' between name and value"))?;
    // Only spaces and tabs are optional whitespace around a field (RFC 9110
    // 5.6.3); str::trim would also eat a vertical tab or a form feed.
    let name = name.trim_matches([' ', '\t']);
    if name.is_empty() || !name.bytes().all(is_token) {
        return Err(bad("the name is empty or has characters a header name cannot have"));
    }
    let value = value.trim_matches([' ', '\t']);
    if let Some(c) = value.chars().find(|&c| is_forbidden_in_value(c)) {
        return Err(bad(&format!(
            "the value of {name} has the control character {}, which a header cannot carry",
            c.escape_debug()
        )));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Adds the `--cookie name=value` pairs to the request as one `Cookie`
/// header (after the value of a `-H Cookie:` when there is one).
pub(super) fn cookie_header(cookies: &[String], headers: &mut Vec<(String, String)>) -> Result<(), PlanError> {
    if cookies.is_empty() {
        return Ok(());
    }
    let mut pairs = Vec::with_capacity(cookies.len());
    for (i, c) in cookies.iter().enumerate() {
        // The value is a secret: an error names the cookie by its place,
        // and by its name only when that is a well-formed one.
        let (name, value) = c.split_once('=').unwrap_or(("", c));
        let bad = |why: &str| {
            let shown = if !name.is_empty() && name.len() <= 64 && name.bytes().all(is_token) {
                format!(" ('{name}')")
            } else {
                String::new()
            };
            PlanError::invalid(
                "--cookie",
                format!(
                    "cookie {}{shown}: {why}; expected --cookie 'name=value', e.g. --cookie 'session=abc123'",
                    i + 1
                ),
            )
        };
        if !c.contains('=') {
            return Err(bad("no '=' between name and value"));
        }
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(bad("the name is empty or has characters a cookie name cannot have"));
        }
        if value
            .bytes()
            .any(|b| b.is_ascii_control() || b.is_ascii_whitespace() || b == b';' || b == b',' || b >= 0x80)
        {
            return Err(bad(
                "the value has a space, ';', ',' or a control or non-ASCII character, which a cookie value cannot carry",
            ));
        }
        pairs.push(c.as_str());
    }
    let joined = pairs.join("; ");
    match headers.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case("cookie")) {
        Some((_, v)) if !v.is_empty() => {
            v.push_str("; ");
            v.push_str(&joined);
        }
        Some((_, v)) => *v = joined,
        None => headers.push(("Cookie".to_string(), joined)),
    }
    Ok(())
}

/// True for a character a header value must not carry on the wire: any
/// control character but the horizontal tab (RFC 9110 5.5).
pub fn is_forbidden_in_value(c: char) -> bool {
    c.is_ascii_control() && c != '\t'
}

/// Refuses a Transfer-Encoding (throng sends bodies with a length, never
/// chunked) and a Content-Length that contradicts the body's `len`, and
/// drops one that agrees: the request head carries the one throng computes.
pub(super) fn framing_headers(
    headers: &mut Vec<(String, String)>,
    len: u64,
    file: Option<&str>,
) -> Result<(), PlanError> {
    let body = match file {
        Some(f) => format!("--body {f} ({len} bytes)"),
        None => "no --body (0 bytes)".to_string(),
    };
    for (name, value) in headers.iter() {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(PlanError::invalid(
                "-H/--header",
                format!(
                    "'{name}: {value}': throng does not chunk request bodies; leave Transfer-Encoding out, \
                     throng sends {body} with a Content-Length"
                ),
            ));
        }
        if name.eq_ignore_ascii_case("content-length") && value.trim().parse::<u64>().ok() != Some(len) {
            return Err(PlanError::invalid(
                "-H/--header",
                format!(
                    "'{name}: {value}' contradicts {body}, and the server would read the difference as \
                     another request; leave Content-Length out, throng computes it"
                ),
            ));
        }
    }
    headers.retain(|(name, _)| !name.eq_ignore_ascii_case("content-length"));
    Ok(())
}

/// The secret header names of a plan, lowercase, sorted, each once: the
/// always-sensitive ones among `present`, and every `--secret-header`.
pub fn secret_names<'a>(marked: &[String], present: impl Iterator<Item = &'a str>) -> Result<Vec<String>, PlanError> {
    let mut out = Vec::new();
    for m in marked {
        let name = m.trim();
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(PlanError::invalid(
                "--secret-header",
                format!(
                    "'{}' is not a header name; give the name only, e.g. --secret-header X-Api-Key",
                    m.escape_debug()
                ),
            ));
        }
        out.push(name.to_ascii_lowercase());
    }
    out.extend(
        present
            .map(str::to_ascii_lowercase)
            .filter(|n| SENSITIVE_HEADERS.contains(&n.as_str())),
    );
    out.sort();
    out.dedup();
    Ok(out)
}
