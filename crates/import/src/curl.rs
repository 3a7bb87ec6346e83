//! curl command lines (as written in runbooks, or copied from a browser's
//! "Copy as cURL"): one or more, each a request.
//!
//! The words are split as a POSIX shell splits them (single and double
//! quotes, backslashes, `$'…'`, a backslash before a line break continuing
//! the line); commands end at a line break, `;`, `&&`, `||` or `|`. A flag
//! that changes the request and is not understood here is an error naming
//! it, never dropped in silence; flags about curl's own output are ignored.

use base64::Engine as _;

use crate::model::{Body, Flow, ImportError, Origin, Step, dropped_header};

/// Flags that take a value and change nothing an importer keeps.
const IGNORED_WITH_VALUE: &[&str] = &[
    "-o",
    "--output",
    "-w",
    "--write-out",
    "-m",
    "--max-time",
    "--connect-timeout",
    "--retry",
    "--retry-delay",
    "--retry-max-time",
    "-c",
    "--cookie-jar",
    "--trace",
    "--trace-ascii",
    "-D",
    "--dump-header",
    "--stderr",
    "--max-redirs",
];

/// Flags without a value that change nothing an importer keeps.
const IGNORED: &[&str] = &[
    "-s",
    "--silent",
    "-S",
    "--show-error",
    "-v",
    "--verbose",
    "-i",
    "--include",
    "-L",
    "--location",
    "--compressed",
    "-O",
    "--remote-name",
    "-f",
    "--fail",
    "--fail-with-body",
    "-#",
    "--progress-bar",
    "--no-progress-meter",
    "-g",
    "--globoff",
    "--http1.1",
    "-N",
    "--no-buffer",
    "--no-keepalive",
    "-q",
];

/// The requests of the curl commands in `input`.
pub(crate) fn parse(input: &str) -> Result<Flow, ImportError> {
    let mut flow = Flow::default();
    for (n, (line, words)) in commands(input)?.into_iter().enumerate() {
        let step = command(&words, n + 1, line, &mut flow)?;
        if step.holds_braces() {
            return Err(ImportError::Invalid(format!(
                "curl command {} (line {line}): a value holds `{{{{`, which a scenario reads as a template; \
                 remove it, or write the request in the scenario by hand",
                n + 1
            )));
        }
        flow.steps.push(step);
    }
    if flow.steps.is_empty() {
        return Err(ImportError::Empty(
            "no curl command found: give lines starting with `curl`".into(),
        ));
    }
    Ok(flow)
}

/// What one command asks for, before it is a step.
#[derive(Default)]
struct Request {
    url: Option<String>,
    method: Option<String>,
    headers: Vec<(String, String)>,
    data: Vec<String>,
    json: bool,
    get: bool,
    head: bool,
    raw_data: bool,
}

fn command(words: &[String], n: usize, line: usize, flow: &mut Flow) -> Result<Step, ImportError> {
    let at = |what: String| ImportError::Invalid(format!("curl command {n} (line {line}): {what}"));
    let mut r = Request::default();
    let mut i = 1;
    while i < words.len() {
        let w = words[i].as_str();
        i += 1;
        // `-XPOST`, `-HName: v`: a short flag with its value attached.
        let (flag, attached) = match w.as_bytes() {
            [b'-', c, _, ..] if *c != b'-' && b"XHdAeubF".contains(c) => (&w[..2], Some(w[2..].to_string())),
            _ => (w, None),
        };
        let takes_value = matches!(
            flag,
            "-X" | "--request"
                | "-H"
                | "--header"
                | "-d"
                | "--data"
                | "--data-ascii"
                | "--data-binary"
                | "--data-raw"
                | "--data-urlencode"
                | "--json"
                | "-u"
                | "--user"
                | "-b"
                | "--cookie"
                | "-A"
                | "--user-agent"
                | "-e"
                | "--referer"
                | "--url"
                | "-F"
                | "--form"
                | "--form-string"
        ) || IGNORED_WITH_VALUE.contains(&flag);
        let value = if takes_value {
            match attached {
                Some(v) => Some(v),
                None => {
                    let v = words
                        .get(i)
                        .cloned()
                        .ok_or_else(|| at(format!("{flag} needs a value")))?;
                    i += 1;
                    Some(v)
                }
            }
        } else {
            None
        };
        let value = value.unwrap_or_default();
        match flag {
            "-X" | "--request" => r.method = Some(value.to_ascii_uppercase()),
            "-H" | "--header" => {
                let Some((name, v)) = value.split_once(':') else {
                    return Err(at(format!("-H {value:?} is not `Name: value`")));
                };
                let name = name.trim();
                if !dropped_header(name) && !v.trim().is_empty() {
                    r.headers.push((name.to_string(), v.trim().to_string()));
                }
            }
            "-d" | "--data" | "--data-ascii" | "--data-binary" | "--data-raw" | "--json" | "--data-urlencode" => {
                if value.starts_with('@') && flag != "--data-raw" {
                    return Err(at(format!(
                        "{flag} {value} reads a file; put the file's content in the command (or use --data-raw)"
                    )));
                }
                let value = if flag == "--data-urlencode" {
                    urlencode_field(&value)
                } else {
                    value
                };
                r.raw_data |= flag == "--data-raw" || flag == "--data-binary";
                r.json |= flag == "--json";
                r.data.push(value);
            }
            "-u" | "--user" => {
                let basic = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
                r.headers.push(("Authorization".into(), format!("Basic {basic}")));
            }
            "-b" | "--cookie" => {
                if !value.contains('=') {
                    return Err(at(format!(
                        "-b {value}: a cookie file is not imported; give the cookies as `name=value`"
                    )));
                }
                r.headers.push(("Cookie".into(), value));
            }
            "-A" | "--user-agent" => r.headers.push(("User-Agent".into(), value)),
            "-e" | "--referer" => r.headers.push(("Referer".into(), value)),
            "--url" => r.url = Some(value),
            "-G" | "--get" => r.get = true,
            "-I" | "--head" => r.head = true,
            "-k" | "--insecure" => flow.insecure = true,
            "-F" | "--form" | "--form-string" => {
                return Err(at(format!(
                    "{flag}: multipart bodies are not imported yet; send the body with --data-raw and its Content-Type"
                )));
            }
            "--http2" | "--http2-prior-knowledge" | "--http3" => flow.notes.push(format!(
                "curl command {n}: {flag} is not carried over; set `http:` on the target for HTTP/2 or HTTP/3"
            )),
            f if IGNORED.contains(&f) || IGNORED_WITH_VALUE.contains(&f) => {}
            f if f.starts_with('-') && f.len() > 1 => {
                return Err(at(format!(
                    "{f} is not imported (it may change the request); remove it if it does not"
                )));
            }
            _ => {
                if r.url.is_some() {
                    return Err(at(format!("a second URL {w:?}: give one URL per command")));
                }
                r.url = Some(w.to_string());
            }
        }
    }
    step(r, n, line).map_err(at)
}

fn step(r: Request, n: usize, line: usize) -> Result<Step, String> {
    let raw = r.url.ok_or("no URL")?;
    // curl takes a URL without a scheme as http://.
    let text = if raw.contains("://") {
        raw.clone()
    } else {
        format!("http://{raw}")
    };
    let mut url = url::Url::parse(&text).map_err(|e| format!("{raw}: not a URL ({e})"))?;
    let data = r.data.join("&");
    if r.get && !data.is_empty() {
        let q = match url.query() {
            Some(q) if !q.is_empty() => format!("{q}&{data}"),
            _ => data.clone(),
        };
        url.set_query(Some(&q));
    }
    let (origin, path, query) = Origin::of(&url).ok_or_else(|| format!("{raw}: only http:// and https:// URLs"))?;
    let has_body = !data.is_empty() && !r.get;
    let method = match (r.method, r.head, r.get) {
        (Some(m), _, _) => m,
        (None, true, _) => "HEAD".into(),
        (None, _, true) => "GET".into(),
        (None, _, _) if has_body => "POST".into(),
        _ => "GET".into(),
    };
    let mut headers = r.headers;
    if !url.username().is_empty() && header(&headers, "authorization").is_none() {
        // Credentials in the URL, as curl sends them: Basic.
        let user = url::form_urlencoded::parse(url.username().as_bytes())
            .map(|(k, _)| k.into_owned())
            .next();
        let pass = url.password().map(|p| {
            url::form_urlencoded::parse(format!("{p}=").as_bytes())
                .map(|(k, _)| k.into_owned())
                .next()
                .unwrap_or_default()
        });
        let pair = format!("{}:{}", user.unwrap_or_default(), pass.unwrap_or_default());
        let basic = base64::engine::general_purpose::STANDARD.encode(pair.as_bytes());
        headers.push(("Authorization".into(), format!("Basic {basic}")));
    }
    let content_type = header(&headers, "content-type").map(str::to_ascii_lowercase);
    let body = if !has_body {
        Body::None
    } else if r.json || content_type.as_deref().is_some_and(|c| c.contains("json")) {
        match serde_json::from_str(&data) {
            // `json:` sets the Content-Type itself.
            Ok(v)
                if content_type
                    .as_deref()
                    .is_none_or(|c| c.starts_with("application/json")) =>
            {
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
                Body::Json(v)
            }
            _ => Body::Raw(data),
        }
    } else if content_type.is_none() && !r.raw_data {
        form(&data).map_or(Body::Raw(data), Body::Form)
    } else {
        Body::Raw(data)
    };
    if r.json && header(&headers, "accept").is_none() {
        headers.push(("Accept".into(), "application/json".into()));
    }
    Ok(Step::new(
        format!("curl command {n} (line {line})"),
        origin,
        method,
        path,
        query,
        headers,
        body,
    ))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// `a=1&b=x%20y` as decoded pairs, when every part is `name=value`.
fn form(data: &str) -> Option<Vec<(String, String)>> {
    let pairs: Vec<_> = url::form_urlencoded::parse(data.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let whole = data.split('&').all(|p| p.contains('=')) && !pairs.is_empty();
    whole.then_some(pairs)
}

/// `--data-urlencode`'s `name=content` (or `content`) with the content encoded.
fn urlencode_field(v: &str) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    match v.split_once('=') {
        Some((name, content)) if !name.is_empty() => format!("{name}={}", enc(content)),
        Some((_, content)) => enc(content),
        None => enc(v),
    }
}

/// The commands in `input`: each one's first line and its words, for
/// those whose first word is curl. Comment lines and blank ones are
/// skipped; a command of another program is an error.
fn commands(input: &str) -> Result<Vec<(usize, Vec<String>)>, ImportError> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut line = 1;
    let mut start = 1;
    let mut chars = input.chars().peekable();
    let mut end = |words: &mut Vec<String>, start: usize| -> Result<(), ImportError> {
        if words.is_empty() {
            return Ok(());
        }
        let first = words[0].rsplit('/').next().unwrap_or_default();
        if first != "curl" {
            return Err(ImportError::Invalid(format!(
                "line {start}: `{}` is not a curl command; give one curl command per line (or lines joined with `\\`)",
                crate::yaml::scalar(&words[0]).chars().take(60).collect::<String>()
            )));
        }
        out.push((start, std::mem::take(words)));
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => line += 1,
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                    line += 1;
                }
                Some(x) => {
                    word.push(x);
                    in_word = true;
                }
                None => {}
            },
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => {
                            line += usize::from(x == '\n');
                            word.push(x);
                        }
                        None => return Err(unclosed(start, '\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => word.push(x),
                            Some('\n') => line += 1,
                            Some(x) => {
                                word.push('\\');
                                word.push(x);
                            }
                            None => return Err(unclosed(start, '"')),
                        },
                        Some(x) => {
                            line += usize::from(x == '\n');
                            word.push(x);
                        }
                        None => return Err(unclosed(start, '"')),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                in_word = true;
                ansi_c(&mut chars, &mut word).ok_or_else(|| unclosed(start, '\''))?;
            }
            '#' if !in_word => {
                // A comment, to the end of the line.
                while chars.peek().is_some_and(|&x| x != '\n') {
                    chars.next();
                }
            }
            ' ' | '\t' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\n' | ';' | '&' | '|' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                if c == '|' && !words.is_empty() {
                    // What a command pipes into is not a request: skip to the line's end.
                    while chars.peek().is_some_and(|&x| x != '\n') {
                        chars.next();
                    }
                }
                if matches!(c, '&' | '|') && chars.peek() == Some(&c) {
                    chars.next();
                }
                end(&mut words, start)?;
                if c == '\n' {
                    line += 1;
                }
                start = line;
            }
            x => {
                if !in_word && words.is_empty() {
                    start = line;
                }
                word.push(x);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    end(&mut words, start)?;
    Ok(out)
}

fn unclosed(line: usize, quote: char) -> ImportError {
    ImportError::Invalid(format!("line {line}: a {quote} quote is not closed"))
}

/// The rest of a `$'…'` word: C escapes (`\n`, `\t`, `\\`, `\'`, `\xHH`,
/// `\uHHHH`). None when it does not close.
fn ansi_c(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, word: &mut String) -> Option<()> {
    loop {
        match chars.next()? {
            '\'' => return Some(()),
            '\\' => match chars.next()? {
                'n' => word.push('\n'),
                't' => word.push('\t'),
                'r' => word.push('\r'),
                '0' => word.push('\0'),
                'e' | 'E' => word.push('\u{1b}'),
                'x' => word.push(hex(chars, 2)?),
                'u' => word.push(hex(chars, 4)?),
                other => word.push(other),
            },
            x => word.push(x),
        }
    }
}

fn hex(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, most: usize) -> Option<char> {
    let mut v = 0u32;
    for _ in 0..most {
        match chars.peek().and_then(|c| c.to_digit(16)) {
            Some(d) => {
                v = v * 16 + d;
                chars.next();
            }
            None => break,
        }
    }
    char::from_u32(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn words_split_as_a_shell_splits_them() {
        let c = commands("curl -H 'a: b c' \"x\\\"y\" $'l1\\nl2' \\\n  next # note\ncurl two").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].1, ["curl", "-H", "a: b c", "x\"y", "l1\nl2", "next"]);
        assert_eq!((c[1].0, c[1].1.len()), (3, 2));
    }

    #[test]
    fn a_command_of_another_program_or_an_open_quote_is_refused_with_its_line() {
        let e = parse("curl http://a/\nwget http://b/").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("not a curl command"), "{e}");
        let e = parse("curl 'http://a/").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("not closed"), "{e}");
    }

    #[test]
    fn flags_make_the_request() {
        let f = parse(
            "curl -X put https://h:8443/p?q=1 -H 'X-A: 1' -H 'Content-Type: application/json' -d '{\"a\":1}' -k -u u:p",
        )
        .unwrap();
        let s = &f.steps[0];
        assert_eq!((s.method.as_str(), s.path.as_str()), ("PUT", "/p"));
        assert_eq!(s.origin.url(), "https://h:8443");
        assert_eq!(s.query, [("q".to_string(), "1".to_string())]);
        assert_eq!(s.body, Body::Json(serde_json::json!({"a": 1})));
        assert!(f.insecure);
        assert!(s.headers.iter().any(|(k, v)| k == "Authorization" && v == "Basic dTpw"));
        assert!(!s.headers.iter().any(|(k, _)| k == "Content-Type"));
        let f = parse("curl -G http://h/s -d a=1 --data-urlencode 'b=x y'").unwrap();
        assert_eq!((f.steps[0].method.as_str(), f.steps[0].query.len()), ("GET", 2));
        assert_eq!(f.steps[0].query[1], ("b".into(), "x y".into()));
        let f = parse("curl http://h/f -d a=1 -d b=2").unwrap();
        assert_eq!(
            f.steps[0].body,
            Body::Form(vec![("a".into(), "1".into()), ("b".into(), "2".into())])
        );
    }

    #[test]
    fn unknown_and_file_flags_are_refused_by_name() {
        for (cmd, want) in [
            ("curl --proxy x http://h/", "--proxy is not imported"),
            ("curl -d @body.json http://h/", "reads a file"),
            ("curl -F a=b http://h/", "multipart"),
            ("curl -H", "needs a value"),
            ("curl http://a/ http://b/", "a second URL"),
            ("curl -X GET", "no URL"),
        ] {
            let e = parse(cmd).unwrap_err().to_string();
            assert!(e.contains(want), "{cmd}: {e}");
        }
    }
}
