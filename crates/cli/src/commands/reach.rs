//! The edge of network reach and credentials: the proxy environment, and
//! the files that hold headers and tokens (`-H @FILE`, `--bearer-file`).

use std::path::Path;

use crate::args::ReachArgs;
use crate::exit::UsageError;

/// The proxy variables read from the environment.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
];
/// The largest header or token file read: secrets are short, and a larger
/// file is a mistake (a log, /dev/zero).
const MAX_SECRET_FILE: u64 = 1 << 20;

/// The flags and the proxy environment, for the plan.
pub fn args(r: &ReachArgs) -> throng_plan::ReachArgs {
    throng_plan::ReachArgs {
        ipv4: r.ipv4,
        ipv6: r.ipv6,
        connect_to: r.connect_to.clone(),
        resolve: r.resolve.clone(),
        proxy: r.proxy.clone(),
        env: PROXY_VARIABLES
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.to_string(), v)))
            .collect(),
    }
}

/// `throng run`'s reach: `-4`/`-6`, `--connect-to`, `--resolve`; a proxy
/// is refused (scenario requests are not sent in absolute form or through
/// CONNECT yet), and the proxy environment is not read.
pub fn scenario(r: &ReachArgs, host: &str) -> Result<throng_plan::Reach, UsageError> {
    if r.proxy.as_deref().is_some_and(|p| !p.is_empty()) {
        return Err(UsageError(
            "-x/--proxy: throng run does not go through proxies yet; use throng http or throng storm, \
             or --connect-to to reach the target at another address"
                .into(),
        ));
    }
    let args = throng_plan::ReachArgs {
        proxy: None,
        env: Vec::new(),
        ..args(r)
    };
    throng_plan::Reach::from_args(&args, host, None).map_err(|e| UsageError(e.to_string()))
}

/// Reads a small text file named by `flag`, at most [`MAX_SECRET_FILE`] bytes.
fn read_small(flag: &str, path: &Path) -> Result<String, UsageError> {
    let cannot = |e: String| {
        UsageError(format!(
            "{flag} {}: cannot read it: {e}; give a readable text file",
            path.display()
        ))
    };
    match throng_plan::input::read_limited_text(path, MAX_SECRET_FILE) {
        Ok(text) => Ok(text),
        Err(Err(throng_plan::input::ReadError::Io(e))) => Err(cannot(e.to_string())),
        Err(Err(e)) => Err(UsageError(format!(
            "{flag} {}: {e}; give a smaller file",
            path.display()
        ))),
        Err(Ok(_)) => Err(cannot("it is not UTF-8 text".to_string())),
    }
}

/// Header lines read from files, each with its `FILE:LINE`.
pub type FileHeaders = Vec<(String, String)>;

/// `-H` values: those of the form `@FILE` are replaced by the file's lines
/// (returned apart, with `FILE:LINE`, so that the plan names the line at
/// fault and redacts their values). Blank lines and `#` comments are skipped.
pub fn split_headers(headers: Vec<String>) -> Result<(Vec<String>, FileHeaders), UsageError> {
    let mut typed = Vec::new();
    let mut from_files = Vec::new();
    for h in headers {
        let Some(path) = h.strip_prefix('@') else {
            typed.push(h);
            continue;
        };
        let text = read_small("-H @FILE", Path::new(path))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            from_files.push((format!("{path}:{}", i + 1), line.to_string()));
        }
    }
    Ok((typed, from_files))
}

/// `--bearer-file`: the path and the token on its first line.
pub fn bearer(path: &Path) -> Result<(String, String), UsageError> {
    let text = read_small("--bearer-file", path)?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    Ok((path.display().to_string(), token))
}
