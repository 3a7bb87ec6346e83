//! Keeping secrets out of results: which headers' values read
//! [`REDACTED`], the note a result carries about them, and a command line
//! (a sweep's `run:`) with its secrets replaced.

use super::{REDACTED, is_token, secret_names};

/// The note a result carries when some of `headers` are `secret`.
pub fn redaction_note<'a>(headers: impl Iterator<Item = &'a str>, secret: &[String]) -> Option<String> {
    let mut names: Vec<&str> = headers.filter(|n| is_secret(secret, n)).collect();
    names.sort_by_key(|n| n.to_ascii_lowercase());
    names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    (!names.is_empty()).then(|| {
        format!(
            "the values of these request headers are secret and read {REDACTED} in this result: {} \
             (Authorization, Proxy-Authorization, Cookie, Set-Cookie always; more with --secret-header, or \
             --secret-metadata for grpc)",
            names.join(", ")
        )
    })
}

/// A command line as a user typed it (a sweep's `run:`), with the values of
/// secret headers (`-H 'Authorization: …'`, and those its `--secret-header`
/// names), of `--send-secret` and `--remote-write-header` and the passwords
/// of URLs replaced: fit for a result file.
/// Words are split as a POSIX shell would (quotes, backslashes); a word
/// that holds a secret is rewritten whole, single-quoted.
pub fn redact_command(text: &str) -> String {
    // (start, end, the word unquoted) of each word.
    let mut words: Vec<(usize, usize, String)> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        let mut end = start;
        let mut quote: Option<char> = None;
        while let Some(&(i, c)) = chars.peek() {
            if quote.is_none() && c.is_whitespace() {
                break;
            }
            chars.next();
            end = i + c.len_utf8();
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (Some('\''), c) => word.push(c),
                (_, '\\') => {
                    if let Some((j, n)) = chars.next() {
                        end = j + n.len_utf8();
                        word.push(n);
                    }
                }
                (_, c) => word.push(c),
            }
        }
        words.push((start, end, word));
    }
    let marked: Vec<String> = words
        .windows(2)
        .filter(|w| matches!(w[0].2.as_str(), "--secret-header" | "--secret-metadata"))
        .map(|w| w[1].2.clone())
        .chain(words.iter().filter_map(|w| {
            w.2.strip_prefix("--secret-header=")
                .or_else(|| w.2.strip_prefix("--secret-metadata="))
                .map(str::to_string)
        }))
        .collect();
    let names = words.iter().filter_map(|w| w.2.split_once(':').map(|(n, _)| n.trim()));
    let secret = secret_names(&[], names)
        .unwrap_or_default()
        .into_iter()
        .chain(marked.iter().map(|m| m.trim().to_ascii_lowercase()))
        .collect::<Vec<_>>();
    // The word after --send-secret or --remote-write-header, or
    // FLAG=TEXT: secret whole.
    const WHOLE: [&str; 2] = ["--send-secret", "--remote-write-header"];
    let after_send_secret: Vec<bool> = std::iter::once(false)
        .chain(words.iter().map(|w| WHOLE.contains(&w.2.as_str())))
        .collect();
    // An inline body, the word after --data or --data=TEXT: a body may
    // carry credentials (a login form, a token in JSON) and is not in the
    // result either. `@FILE` and `@-` name where it comes from: kept.
    let after_data: Vec<bool> = std::iter::once(false)
        .chain(words.iter().map(|w| w.2 == "--data"))
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (i, (start, end, word)) in words.iter().enumerate() {
        let joined = WHOLE
            .iter()
            .find(|f| word.strip_prefix(**f).is_some_and(|r| r.starts_with('=')));
        if after_send_secret[i] || joined.is_some() {
            let flag = match joined {
                Some(f) if !after_send_secret[i] => format!("{f}="),
                _ => String::new(),
            };
            out.push_str(&text[at..*start]);
            out.push_str(&format!("'{flag}{REDACTED}'"));
            at = *end;
            continue;
        }
        let inline_data = if after_data[i] {
            Some("")
        } else {
            word.strip_prefix("--data=").map(|_| "--data=")
        };
        if let Some(flag) = inline_data {
            let value = &word[flag.len()..];
            if !value.starts_with('@') {
                out.push_str(&text[at..*start]);
                out.push_str(&format!("'{flag}{REDACTED}'"));
                at = *end;
            }
            continue;
        }
        let header = word
            .split_once(':')
            .filter(|(n, _)| !n.is_empty() && n.trim().bytes().all(is_token) && is_secret(&secret, n.trim()));
        let after_auth_flag = at_index(&words, *start)
            .and_then(|i| i.checked_sub(1))
            .is_some_and(|i| matches!(words[i].2.as_str(), "-a" | "--basic-auth"));
        let cookie = word
            .strip_prefix("--cookie=")
            .map(|_| format!("'--cookie={REDACTED}'"))
            .or_else(|| (*start > 0 && after_cookie_flag(&words, *start)).then(|| format!("'{REDACTED}'")));
        let replaced = match header {
            _ if after_auth_flag => Some(format!("'{REDACTED}'")),
            _ if word.starts_with("--basic-auth=") => Some(format!("'--basic-auth={REDACTED}'")),
            Some((name, _)) => Some(format!("'{}: {REDACTED}'", name.trim())),
            None if cookie.is_some() => cookie,
            None => {
                // A URL alone, or a flag's value: --proxy=URL.
                let (flag, value) = match word.split_once('=') {
                    Some((f, v)) if f.starts_with("--") => (format!("{f}="), v),
                    _ => (String::new(), word.as_str()),
                };
                url::Url::parse(value)
                    .ok()
                    .filter(|u| u.password().is_some())
                    .map(|mut u| {
                        let _ = u.set_password(Some("***"));
                        format!("'{flag}{u}'")
                    })
            }
        };
        if let Some(r) = replaced {
            out.push_str(&text[at..*start]);
            out.push_str(&r);
            at = *end;
        }
    }
    out.push_str(&text[at..]);
    out
}

/// The index of the word starting at `start`.
fn at_index(words: &[(usize, usize, String)], start: usize) -> Option<usize> {
    words.iter().position(|w| w.0 == start)
}

/// True when the word starting at `start` follows a `--cookie` flag.
fn after_cookie_flag(words: &[(usize, usize, String)], start: usize) -> bool {
    words.windows(2).any(|w| w[1].0 == start && w[0].2 == "--cookie")
}

/// True when `name` is one of `secret` (lowercase names).
pub fn is_secret(secret: &[String], name: &str) -> bool {
    secret.iter().any(|s| s.eq_ignore_ascii_case(name))
}
