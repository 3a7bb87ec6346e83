//! `throng completions SHELL` and `throng man [DIR]`: shell completion
//! scripts and man pages, generated from the same clap definitions the
//! command line is parsed with, so they never drift from it.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::shared::print_bytes;
use crate::args::{Cli, CompletionsCmd, ManCmd};

/// Prints the completion script for the shell on stdout.
pub fn completions(c: CompletionsCmd) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(c.shell, &mut cmd, "throng", &mut buf);
    print_bytes(&buf)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `throng.1` and one page per subcommand (`throng-http.1`,
/// `throng-k8s-job.1`, ...) into the directory, and names each on stderr.
pub fn man(c: ManCmd) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&c.dir).with_context(|| {
        format!(
            "cannot create the man page directory '{}' (check the path and its permissions)",
            c.dir.display()
        )
    })?;
    // Built once, every subcommand carries its full display name (throng-http),
    // which titles its page and names its file, as git's pages are named.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    write_pages(&cmd, &c.dir)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `cmd`, then its subcommands' pages, depth first, and
/// names each file on stderr.
fn write_pages(cmd: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    let path = clap_mangen::Man::new(cmd.clone()).generate_to(dir).with_context(|| {
        format!(
            "cannot write the man page of {} into '{}' (check the directory is writable)",
            cmd.get_display_name().unwrap_or(cmd.get_name()),
            dir.display()
        )
    })?;
    say!("{}", path.display());
    // Hidden subcommands (storm-part, what a storm starts in its children)
    // are not for users: no page.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir)?;
    }
    Ok(())
}
