//! One function per subcommand; each returns the process's exit code.

mod certs;
mod compare;
mod completions;
mod demo;
mod distributed;
mod export;
mod grpc;
mod grpc_reflect;
mod grpc_stream;
mod history;
mod http;
mod import;
mod k8s;
mod k8s_run;
mod llm;
mod merge;
mod mqtt;
mod reach;
mod report;
mod run;
mod segment;
mod serve;
mod shared;
mod storm;
mod sweep;
mod tls;

use std::process::ExitCode;

use crate::args::{Cli, Command};

pub use shared::one_line;

/// Runs the command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Http(c) => http::run(*c),
        Command::Grpc(c) => grpc::run(*c),
        Command::Storm(c) => storm::run(*c),
        Command::Mqtt(c) => mqtt::run(*c),
        Command::Serve(c) => serve::run(c),
        Command::Demo(c) => demo::run(c),
        Command::Report(c) => report::run(c),
        Command::Merge(c) => merge::run(c),
        Command::Compare(c) => compare::run(c),
        Command::History(c) => history::run(c),
        Command::Certs(c) => certs::run(c),
        Command::Sweep(c) => sweep::run(c),
        Command::Run(c) => run::run(*c),
        Command::StormPart => storm::run_part(),
        Command::K8s(c) => k8s::run(c),
        Command::Agent(c) => distributed::agent::run(c),
        Command::Coordinate(c) if c.resume.is_some() => distributed::resume::run(*c),
        Command::Coordinate(c) => distributed::coordinate::run(*c),
        Command::Import(c) => import::run(c),
        Command::Completions(c) => completions::completions(c),
        Command::Man(c) => completions::man(c),
        Command::HelpMarkdown(c) => completions::help_markdown(c),
    }
}
