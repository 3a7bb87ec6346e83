//! Flags other load tools taught their users, answered with throng's own:
//! a habit that would otherwise end in a misleading error (clap's "to pass
//! '-z' as a value, use '-- -z'", or a bare number taken for a second URL)
//! gets one line naming what to use here, exit 2.

use std::ffi::OsString;

/// A flag throng does not have, as another tool's users type it, and what
/// to use instead.
const UNKNOWN: [(&str, &str, &str); 8] = [
    (
        "http",
        "-z",
        "-z is hey's and oha's duration; throng's is -d (e.g. -d 30s)",
    ),
    (
        "grpc",
        "-z",
        "-z is ghz's and oha's duration; throng's is -d (e.g. -d 30s)",
    ),
    (
        "http",
        "--latency",
        "--latency is wrk's; throng always prints the latency distribution: leave it out",
    ),
    (
        "http",
        "--no-tui",
        "--no-tui is oha's; throng has no full-screen view (its live line shows on a terminal only; -q hides it): leave it out",
    ),
    (
        "http",
        "-o",
        "-o is hey's output format and oha's output file; throng writes the result with --json FILE (--json - for stdout), --csv, --html",
    ),
    (
        "grpc",
        "-o",
        "-o is ghz's output; throng writes the result with --json FILE (--json - for stdout), --csv, --html",
    ),
    (
        "run",
        "--vus",
        "--vus is k6's; set vus: (or stages:) in the scenario file, or scale every scenario's load with --scale",
    ),
    (
        "run",
        "--duration",
        "--duration is k6's; set duration: in the scenario file, or scale every scenario's load with --scale",
    ),
];

/// What a clap error stands for when it is another tool's habit.
pub(super) fn of_clap_error(e: &clap::Error, args: &[OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let sub = subcommand(args)?;
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.as_str(),
        _ => return None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let flag = arg.split('=').next().unwrap_or(arg);
            UNKNOWN
                .iter()
                .find(|(s, f, _)| *s == sub && *f == flag)
                .map(|(_, _, say)| say.to_string())
        }
        ErrorKind::ValueValidation if arg.starts_with("--duration") && ["http", "grpc"].contains(&sub) => {
            let value = match e.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(v)) => v.as_str(),
                _ => return None,
            };
            let body = value.contains('=') || value.starts_with(['{', '[', '@', '<']);
            body.then(|| {
                "-d is the duration here (e.g. -d 30s); hey's and curl's -d request body is --data (--data @FILE for a file)"
                    .to_string()
            })
        }
        _ => None,
    }
}

/// A habit clap accepts but throng reads otherwise: `-q N` (hey's and
/// oha's rate; throng's -q is --quiet and takes no value, so N would be
/// read as a second URL), and `-k` on a plain http:// `http` run (ab's
/// keep-alive, the default here; throng's -k is --insecure, for https).
pub(super) fn of_accepted(args: &[OsString]) -> Option<String> {
    let sub = subcommand(args)?;
    if !["http", "grpc"].contains(&sub) {
        return None;
    }
    let words: Vec<&str> = args.iter().skip(2).filter_map(|a| a.to_str()).collect();
    let rate = words.windows(2).find(|w| {
        (w[0] == "-q" || w[0] == "--quiet")
            && w[1].starts_with(|c: char| c.is_ascii_digit())
            && w[1].parse::<f64>().is_ok()
    });
    if let Some(w) = rate {
        return Some(format!(
            "{} {}: -q is hey's and oha's rate, but throng's -q is --quiet (it takes no value); give the rate as -r {}",
            w[0], w[1], w[1]
        ));
    }
    let insecure = words.iter().any(|w| *w == "-k" || *w == "--insecure");
    let plain = words.iter().any(|w| w.starts_with("http://"));
    let tls = words.iter().any(|w| w.starts_with("https://"));
    (sub == "http" && insecure && plain && !tls).then(|| {
        "-k: throng keeps connections alive by default (ab's -k; --no-keepalive turns it off); its -k is \
         --insecure, for https:// URLs: leave it out"
            .to_string()
    })
}

/// A flag that still works under its old name, and what it is called now:
/// storm's `--connections` (connections in all) is `-n/--count`, since
/// `--connections` means connections open at once in `http` and `grpc`.
pub(super) fn renamed(args: &[OsString]) -> Option<String> {
    if subcommand(args)? != "storm" {
        return None;
    }
    let old = args
        .iter()
        .skip(2)
        .filter_map(|a| a.to_str())
        .take_while(|a| *a != "--")
        .any(|a| a == "--connections" || a.starts_with("--connections="));
    old.then(|| {
        "storm's --connections is now -n/--count (connections to open in all): --connections means \
         connections open at once in http and grpc (-c/--max-concurrent here). The old name still works \
         for now; write --count"
            .to_string()
    })
}

/// The subcommand, when it is the first argument.
fn subcommand(args: &[OsString]) -> Option<&str> {
    args.get(1)?.to_str().filter(|s| !s.starts_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn a_rate_after_q_and_keep_alive_k_are_answered() {
        let said = of_accepted(&args("throng http http://127.0.0.1/ -q 100")).unwrap();
        assert!(said.contains("-r 100"), "{said}");
        let said = of_accepted(&args("throng http -k http://127.0.0.1/")).unwrap();
        assert!(said.contains("--no-keepalive"), "{said}");
        assert_eq!(of_accepted(&args("throng http -k https://127.0.0.1/")), None);
        assert_eq!(of_accepted(&args("throng http -q http://127.0.0.1/")), None);
        assert_eq!(of_accepted(&args("throng http http://localhost:1/ -q -6")), None);
        assert_eq!(of_accepted(&args("throng storm -q 100 tcp://127.0.0.1:1")), None);
    }

    #[test]
    fn storms_old_connections_flag_is_named_anew() {
        for line in [
            "throng storm tcp://127.0.0.1:1 --connections 5",
            "throng storm tcp://127.0.0.1:1 --connections=5",
        ] {
            let said = renamed(&args(line)).unwrap();
            assert!(said.contains("-n/--count"), "{said}");
        }
        assert_eq!(renamed(&args("throng storm tcp://127.0.0.1:1 --count 5")), None);
        assert_eq!(renamed(&args("throng http http://127.0.0.1:1/ --connections 5")), None);
    }
}
