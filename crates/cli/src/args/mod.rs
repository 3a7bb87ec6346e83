//! The command line, as clap reads it (raw); `commands` validates it into
//! plans.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use throng_plan::StepArg;

mod common;
mod distributed;
mod habits;
mod http;
mod mqtt;
mod results;
mod run;
mod short;
mod storm;
mod tools;

pub use self::common::{
    ExportArgs, Format, IoArg, LiveArgs, OutputArgs, PushArgs, ReachArgs, RepeatArgs, SegmentArgs, TargetsOrder,
    TlsArgs,
};
use self::distributed::{AGENT_HELP, COORDINATE_HELP};
pub use self::distributed::{AgentCmd, CoordinateCmd};
use self::http::{GRPC_EXAMPLES, HTTP_EXAMPLES, HTTP_SHORT_EXAMPLES};
pub use self::http::{GrpcCmd, HttpCmd, TraceArg};
use self::mqtt::MQTT_EXAMPLES;
pub use self::mqtt::MqttCmd;
use self::results::{COMPARE_HELP, HISTORY_HELP};
pub use self::results::{
    CompareCmd, CompareFormat, HistoryAddCmd, HistoryCmd, HistoryCommand, HistoryListCmd, HistoryReportCmd, MergeCmd,
    ReportCmd,
};
use self::run::{RUN_HELP, SWEEP_HELP};
pub use self::run::{RunCmd, SweepCmd, SweepFormat};
use self::storm::STORM_EXAMPLES;
pub use self::storm::StormCmd;
use self::tools::{COMPLETIONS_HELP, IMPORT_HELP, SERVE_HELP};
pub use self::tools::{
    CertsCmd, CompletionsCmd, DemoCmd, HelpMarkdownCmd, ImportCmd, ImportKind, K8sCmd, K8sCommand, K8sJobCmd,
    K8sRunCmd, ManCmd, ServeCmd,
};

/// A network load generator with numbers you can trust.
#[derive(Debug, Parser)]
#[command(name = "throng", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// HTTP load (HTTP/1.1, HTTP/2, HTTP/3): closed loop (-c connections) or open loop (-r requests/s).
    #[command(after_help = HTTP_SHORT_EXAMPLES, before_long_help = HTTP_EXAMPLES, after_long_help = "")]
    Http(Box<HttpCmd>),
    /// gRPC calls over HTTP/2 (unary, server-, client- and bidirectional streaming), messages built from a
    /// .proto file or server reflection.
    #[command(after_help = GRPC_EXAMPLES)]
    Grpc(Box<GrpcCmd>),
    /// Connection storm: TCP, TLS, HTTP, NATS, WebSocket or MQTT connections at a rate or all at once, held.
    #[command(after_help = STORM_EXAMPLES)]
    Storm(Box<StormCmd>),
    /// MQTT publish/subscribe load: publishers and subscribers on a broker, end-to-end latency and books.
    #[command(after_help = MQTT_EXAMPLES)]
    Mqtt(Box<MqttCmd>),
    /// Run the built-in lab server (endpoints for demos, calibration and faults).
    #[command(after_help = SERVE_HELP)]
    Serve(ServeCmd),
    /// One-command tour: starts the lab server and runs a closed-loop and an open-loop test against it.
    Demo(DemoCmd),
    /// Re-render a result file in any view.
    Report(ReportCmd),
    /// Add result files together exactly (histograms add; the merged p99 is the p99 of all samples).
    Merge(MergeCmd),
    /// Compare two sides of an A/B (result files or sets): every figure side by side, with statistics.
    #[command(after_help = COMPARE_HELP)]
    Compare(CompareCmd),
    /// Keep a history of runs (labelled, by plan) for a rolling baseline and a trend page.
    #[command(after_help = HISTORY_HELP)]
    History(HistoryCmd),
    /// Write a lab CA, server and client certificate with keys (for TLS, mTLS and tests).
    Certs(CertsCmd),
    /// Run a matrix of throng runs from a YAML file and tabulate (and chart) their figures.
    #[command(after_help = SWEEP_HELP)]
    Sweep(SweepCmd),
    /// Run a scenario file: staged virtual users running multi-step flows, with checks and thresholds.
    // -x is taken only to say what to use instead (scenarios do not go
    // through proxies yet), so the help does not offer it.
    #[command(after_help = RUN_HELP, mut_arg("proxy", |a| a.hide(true)))]
    Run(Box<RunCmd>),
    /// Agents on Kubernetes: run a plan on N agents of a cluster (k8s run), or print its manifests.
    K8s(K8sCmd),
    /// Turn curl commands, a HAR recording, a Postman collection or an OpenAPI document into a scenario.
    #[command(after_help = IMPORT_HELP)]
    Import(ImportCmd),
    /// Wait for a coordinator, run its share of a distributed run, stream the result back.
    #[command(after_help = AGENT_HELP)]
    Agent(AgentCmd),
    /// Run one command on several agents at once, started together, results merged exactly.
    #[command(after_help = COORDINATE_HELP)]
    Coordinate(Box<CoordinateCmd>),
    /// (internal) One process of `storm --procs N`: reads its orders (the validated plan and its
    /// part) as JSON on stdin, prints its result document
    #[command(name = "storm-part", hide = true)]
    StormPart,
    /// Print a shell completion script for bash, zsh, fish, powershell or elvish.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsCmd),
    /// Write man pages (throng.1 and one per subcommand, throng-http.1, ...) into a directory.
    Man(ManCmd),
    /// (internal) Write the user guide's reference pages (one markdown page per command, its
    /// --help) into a directory: docs/guide/src/reference
    #[command(name = "help-markdown", hide = true)]
    HelpMarkdown(HelpMarkdownCmd),
}

/// Parses the command line. Usage errors become one line on stderr and exit
/// code 2; `--help` and `--version` print and exit 0.
pub fn parse() -> Result<Cli, ExitCode> {
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = short::apply(Cli::command())
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    match parsed {
        Ok((mut cli, matches)) => {
            if let Some(habit) = habits::of_accepted(&args) {
                say!("throng: error: {habit}");
                return Err(ExitCode::from(2));
            }
            if let Some(note) = habits::renamed(&args) {
                say!("throng: note: {note}");
            }
            if let (Command::Storm(storm), Some(("storm", sub))) = (&mut cli.command, matches.subcommand()) {
                storm.steps = ordered_steps(sub, storm);
            }
            Ok(cli)
        }
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    Err(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        ExitCode::from(2)
                    } else {
                        ExitCode::SUCCESS
                    })
                }
                _ => {
                    match habits::of_clap_error(&e, &args) {
                        Some(habit) => say!("throng: error: {}", crate::line::bounded(&habit)),
                        None => say!("throng: {}", clap_one_line(&e)),
                    }
                    Err(ExitCode::from(2))
                }
            }
        }
    }
}

/// Parses a command the coordinator ships (`http URL ...`) with the same
/// parser as the command line; the error is clap's message on one line.
pub fn parse_shipped(command: &[String]) -> Result<Cli, String> {
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<String> = std::iter::once("throng".to_string())
        .chain(command.iter().cloned())
        .collect();
    let parsed = short::apply(Cli::command())
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
        Ok(cli) => Ok(cli),
        Err(e) => {
            let line = clap_one_line(&e);
            Err(line.strip_prefix("error: ").unwrap_or(&line).to_string())
        }
    }
}

/// --send, --send-secret and --expect values in the order they were typed.
fn ordered_steps(m: &clap::ArgMatches, storm: &StormCmd) -> Vec<StepArg> {
    type Kind = fn(String) -> StepArg;
    let mut steps: Vec<(usize, StepArg)> = Vec::new();
    for (id, values, step) in [
        ("send", &storm.send, StepArg::Send as Kind),
        ("send_secret", &storm.send_secret, StepArg::SendSecret),
        ("expect", &storm.expect, StepArg::Expect),
        // The file is read when the plan is made (commands/storm.rs).
        ("send_binary", &storm.send_binary, |path| StepArg::SendBinary {
            path,
            bytes: Vec::new(),
        }),
    ] {
        if let Some(ix) = m.indices_of(id) {
            steps.extend(ix.zip(values).map(|(i, v)| (i, step(v.clone()))));
        }
    }
    steps.sort_by_key(|(i, _)| *i);
    steps.into_iter().map(|(_, s)| s).collect()
}

/// clap's message, its tip, and where to read more, on one line.
fn clap_one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    // clap's message runs until its usage line; keep all of it on one line.
    let message: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    let (first, tip) = match message.split_first() {
        Some((first, rest)) => (
            first.to_string(),
            rest.iter().map(|l| format!(" {l}")).collect::<String>(),
        ),
        None => ("error: invalid usage".to_string(), String::new()),
    };
    use clap::CommandFactory;
    let sub = std::env::args().nth(1).filter(|a| {
        Cli::command()
            .get_subcommands()
            .any(|c| c.get_name() == a && c.get_name() != "help")
    });
    let help = match sub {
        Some(s) => format!("throng {s} --help"),
        None => "throng --help".to_string(),
    };
    crate::line::bounded(&format!("{first}{tip} (see '{help}')")).into_owned()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
