//! `throng run` (scenario files) and `throng sweep`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::common::{LiveArgs, OutputArgs, ReachArgs, RepeatArgs, ReportFormat, SegmentArgs};

pub(super) const RUN_HELP: &str = "\
The scenario file is documented field by field in docs/scenarios.md.

Exit codes: 0 every threshold held, 99 a threshold failed (one with no samples fails unless
it ends 'or no samples'), 1 the run failed (nothing succeeded), 2 the file or a flag is wrong
(with file:line:column), 130 interrupted.

Examples:
  throng run examples/auth-stages.yaml
  throng run examples/auth-stages.yaml --scale 0.1 --target http://127.0.0.1:8080
  throng run checkout.yaml --json run.json --junit thresholds.xml --quiet";

#[derive(Debug, Args)]
pub struct RunCmd {
    /// The scenario file (YAML)
    pub file: PathBuf,
    /// Multiply every duration of the schedule by F (stages, durations, start times): 0.1 runs a
    /// 5-minute ramp in 30 s with the same shape
    #[arg(long = "scale", value_name = "F")]
    pub scale: Option<f64>,
    /// Set NAME for {{env.NAME}} (repeatable; overrides the environment); the file's target may
    /// read it too: target: "{{env.BASE}}"
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Send the requests here instead of the file's target (scheme, host, port and base path)
    #[arg(long = "target", value_name = "URL")]
    pub target: Option<String>,
    /// Redact this header's value in results and reports, repeatable (Authorization,
    /// Proxy-Authorization, Cookie and Set-Cookie always are)
    #[arg(long = "secret-header", value_name = "NAME")]
    pub secret_headers: Vec<String>,
    /// Write the threshold verdicts as JUnit XML here (for CI systems)
    #[arg(long = "junit", value_name = "FILE", help_heading = "Output")]
    pub junit: Option<PathBuf>,
    /// Worker threads [default: one per core]
    #[arg(short = 't', long = "threads", value_name = "N")]
    pub threads: Option<u32>,
    /// Send a W3C traceparent header on every request: each iteration of a VU draws a new trace
    /// id, shared by all its requests, and each request a new span (parent) id; the result keeps
    /// the slowest requests with their trace ids, and --csv-requests rows get a trace_id column.
    /// --trace-context=unsampled sends flags 00 [default when given: sampled]
    #[arg(long = "trace-context", value_name = "SAMPLING", value_enum, num_args = 0..=1,
          require_equals = true, default_missing_value = "sampled")]
    pub trace_context: Option<super::TraceArg>,
    /// With --trace-context: how many of the slowest requests the result keeps with their trace
    /// ids (1-1000) [default: 10]
    #[arg(long = "slowest", value_name = "N")]
    pub slowest: Option<u32>,
    /// Seed of the VUs' random values ({{uuid}}, {{random_int}}, think ranges) [default: from the clock]
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
    /// (internal) What the coordinator's setup: flow captured (a JSON object), for `throng agent`:
    /// this run runs neither setup: nor teardown:
    #[arg(long = "setup-captures", value_name = "FILE", hide = true)]
    pub setup_captures: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs<ReportFormat>,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub segments: SegmentArgs,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
}

pub(super) const SWEEP_HELP: &str = "\
A sweep file:
  parameters:                 # every combination is a cell, first parameter outermost
    cost: [4, 8, 11]
    clients: [50, 100, 150]
  setup: ./start-nats.sh {{cost}}          # optional, before each cell (sh -c)
  run: storm nats://u:p@127.0.0.1:4222 --count {{clients}} --jitter 2s --hold 20s
  teardown: ./stop-nats.sh                 # optional, after each cell, also after a failure
  repeat: 1                                # runs per cell (the table shows medians)
  figures: [total_connect_time, total_reconnect_time, failures, handshake.p50, handshake.p99]
  chart: { figure: total_connect_time, x: cost, lines: clients }
  cell_timeout: 30m

Figures: established, failures, total_connect_time, total_reconnect_time, client_reconnect_time,
out_of_turn, requests_per_second, connections_per_second, or PHASE.STAT (e.g. connect.p99,
handshake.p50, latency.mean).";

#[derive(Debug, Args)]
pub struct SweepCmd {
    /// The sweep file (YAML)
    pub file: PathBuf,
    /// Table layout on stdout
    #[arg(long = "format", value_enum, default_value_t = SweepFormat::Text)]
    pub format: SweepFormat,
    /// Write every cell's full results here (JSON)
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the chart the file's `chart:` asks for here (SVG)
    #[arg(long = "chart", value_name = "FILE")]
    pub chart: Option<PathBuf>,
}

/// Sweep table layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SweepFormat {
    /// Aligned columns.
    Text,
    /// A markdown table.
    Markdown,
    /// Comma-separated values.
    Csv,
}
