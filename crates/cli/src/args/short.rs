//! `-h`: the flags people use, on one screen; `--help` keeps them all.
//! Which flags each command's short help shows is this one table, applied
//! to the clap command when it is built (the flags stay in their groups).

/// Per command, the flags (clap ids: the field names) `-h` shows; the
/// others are in `--help` only.
const SHORT: [(&str, &[&str]); 4] = [
    (
        "http",
        &[
            "url",
            "more_urls",
            "connections",
            "requests",
            "duration",
            "rate",
            "threads",
            "method",
            "headers",
            "data",
            "content_type",
            "timeout",
            "http2",
            "insecure",
            "json",
            "thresholds",
            "quiet",
        ],
    ),
    (
        "storm",
        &[
            "target",
            "connections",
            "rate",
            "max_concurrent",
            "hold",
            "timeout",
            "procs",
            "source",
            "protocol",
            "send",
            "expect",
            "reconnect",
            "insecure",
            "json",
            "quiet",
        ],
    ),
    ("run", &["file", "target", "env", "scale", "json", "junit", "quiet"]),
    (
        "grpc",
        &[
            "address",
            "call",
            "proto",
            "data",
            "connections",
            "requests",
            "duration",
            "rate",
            "metadata",
            "plaintext",
            "json",
            "quiet",
        ],
    ),
];

/// `cmd` with each listed command's other flags hidden from `-h`.
pub(super) fn apply(mut cmd: clap::Command) -> clap::Command {
    for (name, keep) in SHORT {
        cmd = cmd.mut_subcommand(name, |sub| {
            let hide: Vec<String> = sub
                .get_arguments()
                .map(|a| a.get_id().to_string())
                .filter(|id| !keep.contains(&id.as_str()) && id != "help" && id != "version")
                .collect();
            let mut sub = sub;
            for id in hide {
                sub = sub.mut_arg(id, |a| a.hide_short_help(true));
            }
            sub
        });
    }
    cmd
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every id the table names is a flag of its command (a renamed field
    /// would silently drop it from `-h`).
    #[test]
    fn every_short_flag_exists() {
        let cmd = super::super::Cli::command();
        for (name, keep) in super::SHORT {
            let sub = cmd.find_subcommand(name).expect(name);
            for id in keep {
                assert!(sub.get_arguments().any(|a| a.get_id() == id), "{name}: no flag {id}");
            }
        }
    }
}
