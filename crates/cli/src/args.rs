//! The command line, as clap reads it (raw); `commands` validates it into
//! plans.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use throng_plan::{StatusSet, StepArg, TlsGroup, TlsVersion, parse_duration, parse_rate};

/// A network load generator with numbers you can trust.
#[derive(Debug, Parser)]
#[command(name = "throng", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// HTTP/1.1 load: closed loop (-c connections) or open loop (-r requests/s).
    #[command(after_help = HTTP_EXAMPLES)]
    Http(Box<HttpCmd>),
    /// gRPC unary calls over HTTP/2, messages built from a .proto file at run time.
    #[command(after_help = GRPC_EXAMPLES)]
    Grpc(Box<GrpcCmd>),
    /// Connection storm: TCP/TLS connections at a rate or all at once, held, past one process's limits.
    #[command(after_help = STORM_EXAMPLES)]
    Storm(Box<StormCmd>),
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
    #[command(after_help = RUN_HELP)]
    Run(Box<RunCmd>),
    /// Agents on Kubernetes: print the manifests that run a plan as N exact segments.
    K8s(K8sCmd),
    /// (internal) One process of `storm --procs N`: reads its orders (the validated plan and its
    /// part) as JSON on stdin, prints its result document
    #[command(name = "storm-part", hide = true)]
    StormPart,
    /// Print a shell completion script for bash, zsh, fish, powershell or elvish.
    #[command(after_help = COMPLETIONS_HELP)]
    Completions(CompletionsCmd),
    /// Write man pages (throng.1 and one per subcommand, throng-http.1, ...) into a directory.
    Man(ManCmd),
}

const HISTORY_HELP: &str = "\
A history directory holds one entry per run: its label, its plan's fingerprint (a hash of what
defines the load: command, targets, method, headers, protocol, connections, rate, duration or
count, the scenario's content; not threads, seeds or thresholds) and its compact result.
`throng compare --baseline DIR --last N NEW` compares NEW with the last N runs of NEW's plan,
added up exactly; `throng history report` draws one plan's runs over time.

Examples:
  throng http http://127.0.0.1:8080/ -c 10 -d 30s --json run.json
  throng history add run.json --dir perf-history --label \"$(git rev-parse --short HEAD)\"
  throng compare --baseline perf-history --last 5 run.json
  throng history report --dir perf-history --html trend.html
  throng history list --dir perf-history";

#[derive(Debug, Args)]
pub struct HistoryCmd {
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Add a result's run (each run of a result set) to a history directory, with a label.
    Add(HistoryAddCmd),
    /// Draw one plan's runs over time (p50, p99, throughput, error rate) as a self-contained HTML page.
    Report(HistoryReportCmd),
    /// List a history directory's entries: number, plan fingerprint, label, start, plan.
    List(HistoryListCmd),
}

#[derive(Debug, Args)]
pub struct HistoryAddCmd {
    /// The result file (or result set) to add, as written by --json
    #[arg(value_name = "RESULT")]
    pub result: PathBuf,
    /// The history directory (created if missing)
    #[arg(long = "dir", value_name = "DIR")]
    pub dir: PathBuf,
    /// The run's name in reports, e.g. a commit or a build number [default: the run's start]
    #[arg(long = "label", value_name = "LABEL")]
    pub label: Option<String>,
}

#[derive(Debug, Args)]
pub struct HistoryReportCmd {
    /// The history directory
    #[arg(long = "dir", value_name = "DIR")]
    pub dir: PathBuf,
    /// Write the page here
    #[arg(long = "html", value_name = "FILE")]
    pub html: PathBuf,
    /// The plan to draw, by fingerprint (see `history list`) [default: the newest entry's plan]
    #[arg(long = "plan", value_name = "FINGERPRINT")]
    pub plan: Option<String>,
    /// Only the last N runs of the plan [default: all, at most 1000]
    #[arg(long = "last", value_name = "N")]
    pub last: Option<usize>,
}

#[derive(Debug, Args)]
pub struct HistoryListCmd {
    /// The history directory
    #[arg(long = "dir", value_name = "DIR")]
    pub dir: PathBuf,
}

const COMPLETIONS_HELP: &str = "\
Examples:
  throng completions bash > ~/.local/share/bash-completion/completions/throng
  throng completions zsh > \"${fpath[1]}/_throng\"
  throng completions fish > ~/.config/fish/completions/throng.fish";

#[derive(Debug, Args)]
pub struct CompletionsCmd {
    /// The shell to write the completion script for
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManCmd {
    /// The directory to write the pages into (created if missing)
    #[arg(value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct K8sCmd {
    #[command(subcommand)]
    pub command: K8sCommand,
}

#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// Print an Indexed Job (and the ConfigMap with its plan) whose N pods each run one segment.
    #[command(after_help = K8S_JOB_HELP)]
    Job(Box<K8sJobCmd>),
}

const K8S_JOB_HELP: &str = "\
Prints YAML on stdout (ConfigMap with the plan, a Secret for a scenario's TLS key, the Job) and,
on stderr, each agent's resources and the commands that wait, collect and merge the results.
Pod i runs --segment i/N:(i+1)/N of --segment-sequence 0,1/N,...,1, all from the same
--start-at (now + --start-in). The whole flow: docs/distributed.md.

Examples:
  throng k8s job --parallelism 4 -- http http://svc:8080/ -c 400 -d 5m > job.yaml
  throng k8s job checkout.yaml --parallelism 8 --image registry.example/throng:0.1.0 -- --env BASE=http://shop
  kubectl apply -f job.yaml";

#[derive(Debug, Args)]
pub struct K8sJobCmd {
    /// A scenario file (throng run); its data and TLS files are shipped with it. Without it, give
    /// the command line after '--'
    #[arg(value_name = "PLAN")]
    pub plan: Option<PathBuf>,
    /// Agents: pods, each running one segment of the plan
    #[arg(short = 'p', long = "parallelism", value_name = "N")]
    pub parallelism: u32,
    /// Container image with throng on the PATH [default: throng:VERSION]
    #[arg(long = "image", value_name = "IMAGE")]
    pub image: Option<String>,
    /// Namespace of the Job and ConfigMap
    #[arg(long = "namespace", value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// Name of the Job and ConfigMap
    #[arg(long = "name", value_name = "NAME", default_value = "throng")]
    pub name: String,
    /// Where each pod writes segment-I.json (an emptyDir, or --results-pvc)
    #[arg(long = "results-dir", value_name = "DIR", default_value = "/results")]
    pub results_dir: String,
    /// Mount this PersistentVolumeClaim (ReadWriteMany across nodes) at --results-dir
    #[arg(long = "results-pvc", value_name = "CLAIM")]
    pub results_pvc: Option<String>,
    /// The agents start this long after the manifests are made (pulling the image, scheduling)
    #[arg(long = "start-in", value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub start_in: Duration,
    /// CPU per agent, a Kubernetes quantity (2, 500m) [default: sized for the plan]
    #[arg(long = "cpu", value_name = "QUANTITY")]
    pub cpu: Option<String>,
    /// Memory per agent, a Kubernetes quantity (512Mi, 2Gi) [default: sized for the plan]
    #[arg(long = "memory", value_name = "QUANTITY")]
    pub memory: Option<String>,
    /// After '--': the command line (http ... or storm ...), or with PLAN more throng run flags
    #[arg(last = true, value_name = "ARGS")]
    pub command: Vec<String>,
}

const RUN_HELP: &str = "\
The scenario file is documented field by field in docs/scenarios.md.

Exit codes: 0 every threshold held, 99 a threshold failed (one with no samples fails unless
it ends 'or no samples'), 1 the run failed (nothing succeeded), 2 the file or a flag is wrong
(with file:line:column), 130 interrupted.

Examples:
  throng run examples/auth-stages.yaml
  throng run examples/auth-stages.yaml --scale 0.1 --env BASE=http://127.0.0.1:8080
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
    /// Seed of the VUs' random values ({{uuid}}, {{random_int}}, think ranges) [default: from the clock]
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
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

/// Execution segments: this process's share of a plan several run together.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Execution segments")]
pub struct SegmentArgs {
    /// Run only this segment of the plan: FROM:TO as fractions, decimals or percentages
    /// (0:1/4, 1/4:1/2, 25%:50%); a single value 1/4 means 0:1/4
    #[arg(long = "segment", value_name = "SEG")]
    pub segment: Option<String>,
    /// Every agent's segments, as the points between them: 0,1/4,1/2,3/4,1 (--segment must be two
    /// consecutive points) [default: 0,FROM,TO,1]
    #[arg(long = "segment-sequence", value_name = "SEQ", requires = "segment")]
    pub sequence: Option<String>,
    /// Start at this wall-clock time (RFC 3339, e.g. 2026-11-22T10:00:00Z, or unix ms), so that
    /// agents started apart begin together; at most 24 h ahead
    #[arg(long = "start-at", value_name = "TIME")]
    pub start_at: Option<String>,
}

/// Running the same plan several times in a row.
#[derive(Clone, Copy, Debug, Args)]
#[command(next_help_heading = "Repeat")]
pub struct RepeatArgs {
    /// Run the plan N times in a row; --json then writes a result set (every run), the report adds
    /// the runs up and lists each (for `throng compare`)
    #[arg(long = "repeat", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,
    /// Pause between repeated runs, so sockets in TIME_WAIT, server queues and CPU clocks settle
    #[arg(long = "settle", value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub settle: Duration,
}

const SWEEP_HELP: &str = "\
A sweep file:
  parameters:                 # every combination is a cell, first parameter outermost
    cost: [4, 8, 11]
    clients: [50, 100, 150]
  setup: ./start-nats.sh {{cost}}          # optional, before each cell (sh -c)
  run: storm nats://u:p@127.0.0.1:4222 --connections {{clients}} --jitter 2s --hold 20s
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

const HTTP_EXAMPLES: &str = "\
Examples:
  throng http http://127.0.0.1:8080/ -c 50 -d 30s            closed loop, 50 connections, 30 s
  throng http http://127.0.0.1:8080/ -r 5000 -d 1m           open loop at 5000 req/s (CO-free latency)
  throng http http://127.0.0.1:8080/ -n 10000 -c 1000 --no-keepalive --format ab
  throng http http://127.0.0.1:8080/ -r 100 -n 8000 --no-keepalive --format httperf --json run.json";

const STORM_EXAMPLES: &str = "\
Targets: tcp://host:port, tls://host:port, http://host:port/path, https://host:port/path

Examples:
  throng storm tls://127.0.0.1:8443 --connections 10000 --rate 2000 --cacert ca.pem
  throng storm tcp://127.0.0.1:8080 --connections 50000 --hold 30s      (several processes if needed)
  throng storm tls://127.0.0.1:4222 --connections 150 --jitter 2s --hold 10s --insecure
  throng storm https://127.0.0.1:8443/ --connections 100000 --max-concurrent 1000 --cert c.pem --key c.key";

const SERVE_HELP: &str = "\
Endpoints:
  GET /              200, empty body
  GET /bytes/N       200 with an N-byte body
  GET /delay/MS      200 after MS milliseconds
  GET /status/CODE   an empty response with that status
  POST /echo         200 with the request body
  GET /reset         reset the connection (TCP RST), no response
  GET /close         close the connection, no response
  GET /garbage       answer with bytes that are not HTTP

Auth (in memory, JSON; bcrypt at --bcrypt-cost on --hash-threads threads):
  POST /auth/register    {\"email\",\"password\"} -> 200; 409 USER_EXISTS
                         (with --reveal-otp the body has the 6-digit \"otp\")
  POST /auth/verify-otp  {\"email\",\"otp\"} -> 200; 401 INVALID_OTP
  POST /auth/login       {\"email\",\"password\"} -> 200 with access_token and
                         refresh_token; 401 INVALID_CREDENTIALS, or
                         VERIFICATION_PENDING before verify-otp
  POST /auth/refresh     {\"refresh_token\"} -> 200 {\"access_token\"}; 401
  GET /auth/me           Authorization: Bearer ACCESS -> 200 {\"email\"}; 401
  Errors are {\"error\":\"CODE\",\"detail\":\"...\"}. Each process keeps its own users:
  with --procs above 1, a login must reach the process that registered.";

/// Report layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// throng's summary: outcomes and a phase table.
    Text,
    /// ApacheBench's layout.
    Ab,
    /// httperf's layout.
    Httperf,
    /// The result document (JSON).
    Json,
}

/// The layouts of a storm's or a scenario's report (ab and httperf describe
/// HTTP requests only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// throng's summary.
    Text,
    /// The result document (JSON).
    Json,
}

impl From<ReportFormat> for Format {
    fn from(f: ReportFormat) -> Format {
        match f {
            ReportFormat::Text => Format::Text,
            ReportFormat::Json => Format::Json,
        }
    }
}

const GRPC_EXAMPLES: &str = "\
Examples:
  throng grpc 127.0.0.1:50051 --plaintext --proto greeter.proto --call helloworld.Greeter/SayHello \\
      --data '{\"name\": \"throng\"}' -c 4 --streams 10 -d 30s
  throng grpc api.local:443 --cacert ca.pem --proto api.proto -I protos --call pkg.Svc/Get --data @msg.json -n 10000";

#[derive(Debug, Args)]
pub struct GrpcCmd {
    /// Server address, HOST:PORT (e.g. 127.0.0.1:50051)
    pub address: String,
    /// The .proto file that defines the service (compiled at run time; no protoc needed); left out,
    /// the service's descriptors are asked of the server's reflection service
    #[arg(long = "proto", value_name = "FILE")]
    pub proto: Option<PathBuf>,
    /// Where imports of the .proto file are looked up, repeatable (the file's own directory always is)
    #[arg(short = 'I', long = "import-path", value_name = "DIR")]
    pub import_paths: Vec<PathBuf>,
    /// The method to call, unary or server-streaming: package.Service/Method
    #[arg(long = "call", value_name = "pkg.Service/Method")]
    pub call: String,
    /// The request message as JSON (protobuf's JSON mapping), or @FILE; encoded once, sent on every
    /// call [default: {}, the empty message]
    #[arg(long = "data", value_name = "JSON|@FILE")]
    pub data: Option<String>,
    /// HTTP/2 connections (closed loop), or the cap on them (open loop) [default: 1]
    #[arg(short = 'c', long = "connections", value_name = "N")]
    pub connections: Option<u32>,
    /// Most concurrent calls (streams) per connection; the server's SETTINGS_MAX_CONCURRENT_STREAMS
    /// caps it [default: 50]
    #[arg(long = "streams", value_name = "N")]
    pub streams: Option<u32>,
    /// Total calls to make
    #[arg(short = 'n', long = "requests", value_name = "N", conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// How long to run, e.g. 30s, 2m [default: 10s]
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Open loop: start this many calls per second, whatever the answers do
    #[arg(short = 'r', long = "rate", value_name = "RATE", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Worker threads [default: number of cores]
    #[arg(short = 't', long = "threads", value_name = "N")]
    pub threads: Option<u32>,
    /// Speak gRPC over HTTP/2 in the clear (h2c); without it, TLS with ALPN h2
    #[arg(long = "plaintext")]
    pub plaintext: bool,
    /// Request metadata, repeatable: --metadata 'x-user: 42' (authorization's and cookie's values are
    /// redacted in results)
    #[arg(long = "metadata", value_name = "'KEY: VALUE'")]
    pub metadata: Vec<String>,
    /// Redact this metadata key's value in results, reports and errors, repeatable:
    /// --secret-metadata x-api-key (authorization and cookie always are)
    #[arg(long = "secret-metadata", value_name = "KEY")]
    pub secret_metadata: Vec<String>,
    /// Each call's deadline (sent as grpc-timeout); a call not answered in time is
    /// grpc.deadline_exceeded
    #[arg(long = "deadline", value_name = "DURATION", value_parser = parse_duration)]
    pub deadline: Option<Duration>,
    /// gRPC status codes that count as ok, by name or number: OK,NOT_FOUND [default: OK]
    #[arg(long = "expect-code", value_name = "LIST")]
    pub expect_code: Option<String>,
    /// Server-streaming calls: the number of messages each call must receive; a call that ends with
    /// another number is check_failed
    #[arg(long = "expect-messages", value_name = "N")]
    pub expect_messages: Option<u64>,
    /// Limit on connect and on each call's answer [default: 10s]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    #[command(flatten)]
    pub output: OutputArgs<Format>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

#[derive(Debug, Args)]
pub struct HttpCmd {
    /// Target URL, e.g. http://127.0.0.1:8080/
    #[arg(required_unless_present = "targets")]
    pub url: Option<String>,
    /// More target URLs: requests go to each in turn (see --targets-order); all http:// or all https://
    #[arg(value_name = "URL")]
    pub more_urls: Vec<String>,
    /// Targets from a file: one URL per line, vegeta's http format (METHOD URL, header lines, @body
    /// file, blank line between targets) or JSON lines ({"method","url","header","body"}, body base64)
    #[arg(long = "targets", value_name = "FILE", help_heading = "Targets and bodies")]
    pub targets: Option<PathBuf>,
    /// How requests pick their target: round-robin (each worker thread takes the targets in turn
    /// for its connections' requests), sequential (each connection walks the list from the first),
    /// random (each request)
    #[arg(long = "targets-order", value_name = "ORDER", value_enum, default_value_t = TargetsOrder::RoundRobin,
          help_heading = "Targets and bodies")]
    pub targets_order: TargetsOrder,
    /// Request body: TEXT, @FILE or @- (stdin), at most 64 MiB (-d is the duration, as in wrk)
    #[arg(long = "data", value_name = "TEXT|@FILE|@-", conflicts_with_all = ["body", "body_lines"],
          help_heading = "Targets and bodies")]
    pub data: Option<String>,
    /// Content-Type of the body, e.g. -T application/json (the same as -H 'Content-Type: …')
    #[arg(
        short = 'T',
        long = "content-type",
        value_name = "TYPE",
        help_heading = "Targets and bodies"
    )]
    pub content_type: Option<String>,
    /// A different body per request: one per line (blank lines skipped), taken in --targets-order,
    /// cycled; at most 1,000,000 lines and 64 MiB
    #[arg(
        long = "body-lines",
        value_name = "FILE",
        conflicts_with = "body",
        help_heading = "Targets and bodies"
    )]
    pub body_lines: Option<PathBuf>,
    /// Pass/fail criterion, repeatable, as in a scenario's thresholds: 'response{target:/a}: p(95) <
    /// 50ms', 'errors: rate < 1%', 'dropped: rate < 1%' (open loop); a failed one exits 99, and so
    /// does one with no samples unless it ends 'or no samples'; with -r, more than 1% dropped fails
    /// too unless a threshold bounds dropped
    #[arg(long = "threshold", value_name = "'METRIC: EXPR'")]
    pub thresholds: Vec<String>,
    /// Connections (closed loop), or the cap on connections (open loop) [default: 50; open loop 1000]
    #[arg(short = 'c', long = "connections", value_name = "N")]
    pub connections: Option<u32>,
    /// Total requests to send
    #[arg(short = 'n', long = "requests", value_name = "N", conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// How long to run, e.g. 30s, 2m [default: 10s]
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Open loop: start this many requests per second, whatever the responses do
    #[arg(short = 'r', long = "rate", value_name = "RATE", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Worker threads [default: number of cores]
    #[arg(short = 't', long = "threads", value_name = "N")]
    pub threads: Option<u32>,
    /// Request method [default: GET, or POST with --body]
    #[arg(short = 'm', long = "method", value_name = "METHOD")]
    pub method: Option<String>,
    /// Request header, repeatable: -H 'Accept: application/json'; -H @FILE reads one header a line
    /// from FILE (values redacted in results; blank lines and lines starting with # skipped)
    #[arg(short = 'H', long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// Send Authorization: Basic for USER:PASSWORD (redacted in results; as user:password@ in the URL)
    #[arg(short = 'a', long = "basic-auth", value_name = "USER:PASSWORD")]
    pub basic_auth: Option<String>,
    /// Send Authorization: Bearer with the token on this file's first line (kept out of shell history)
    #[arg(long = "bearer-file", value_name = "FILE")]
    pub bearer_file: Option<PathBuf>,
    /// Send this file as the request body (at most 64 MiB; throng sets Content-Length)
    #[arg(long = "body", value_name = "FILE")]
    pub body: Option<PathBuf>,
    /// Redact this header's value in results and reports, repeatable (Authorization,
    /// Proxy-Authorization, Cookie and Set-Cookie always are)
    #[arg(long = "secret-header", value_name = "NAME")]
    pub secret_headers: Vec<String>,
    /// Limit on connect and on each response [default: 10s]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Open a new connection for every request (Connection: close)
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,
    /// How workers drive their sockets: epoll (tokio's readiness loop, every protocol) or uring
    /// (one io_uring per worker: batched sends, multishot receives; plain http:// HTTP/1.1 closed
    /// loops only, without --csv-requests)
    #[arg(long = "io", value_name = "MODEL", value_enum, default_value_t = IoArg::Epoll)]
    pub io: IoArg,
    /// Speak HTTP/2: ALPN h2 over https:// (refused before the run if the server does not
    /// negotiate it), prior knowledge (h2c) over http://
    #[arg(long = "http2")]
    pub http2: bool,
    /// Speak HTTP/3 over QUIC (UDP) to an https:// URL; closed loops only (no -r)
    #[arg(long = "http3")]
    pub http3: bool,
    /// With --http2/--http3: most concurrent streams per connection (h2load's -m); the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS (QUIC: MAX_STREAMS) caps it [default: 1]
    #[arg(long = "streams", value_name = "N")]
    pub streams: Option<u32>,
    /// Statuses that count as ok, e.g. 200,401 or 2xx [default: 200-399]
    #[arg(long = "expect-status", value_name = "LIST", value_parser = StatusSet::parse)]
    pub expect_status: Option<StatusSet>,
    /// Follow up to N redirects per request; the final response's status is the one counted
    /// [default: 0, as ab: a 3xx is the final response; at most 100]
    #[arg(long = "redirects", value_name = "N")]
    pub redirects: Option<u32>,
    /// Send this cookie, repeatable: --cookie 'session=abc123' (one Cookie header; the
    /// values are secret and read <redacted> in results)
    #[arg(long = "cookie", value_name = "'NAME=VALUE'")]
    pub cookies: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs<Format>,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub segments: SegmentArgs,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
}

/// Where connections go, shared by `http` and `storm`.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Network")]
pub struct ReachArgs {
    /// Connect over IPv4 only (every IPv4 address the host resolves to)
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Connect over IPv6 only
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Connect to ADDR:PORT2 for HOST:PORT1, keeping Host and the TLS server name, repeatable
    /// (curl's HOST1:PORT1:HOST2:PORT2; an empty part means any or the same)
    #[arg(long = "connect-to", value_name = "HOST:PORT:ADDR:PORT")]
    pub connect_to: Vec<String>,
    /// Resolve HOST (on PORT, or any with HOST:ADDR) to these addresses instead of asking DNS, repeatable
    #[arg(long = "resolve", value_name = "HOST:PORT:ADDR[,ADDR]")]
    pub resolve: Vec<String>,
    /// Go through this HTTP proxy: CONNECT tunnels for https and storms, absolute-form requests
    /// for http [default: HTTPS_PROXY/HTTP_PROXY unless NO_PROXY names the host; '' for none]
    #[arg(short = 'x', long = "proxy", value_name = "http://[USER:PASSWORD@]HOST:PORT")]
    pub proxy: Option<String>,
}

/// `--io`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// tokio's epoll readiness loop.
    Epoll,
    /// One io_uring per worker.
    Uring,
}

/// `--targets-order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TargetsOrder {
    /// Each worker thread takes the targets in turn.
    RoundRobin,
    /// Each connection walks the list from the first target.
    Sequential,
    /// Each request picks one at random.
    Random,
}

/// What a run writes and shows, shared by `http`, `storm` and `run`. `F` is
/// the layouts the command can print (`run` and `storm`: text or json).
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs<F: ValueEnum + Clone + Send + Sync + 'static> {
    /// Report layout on stdout
    #[arg(long = "format", value_enum, default_value = "text")]
    pub format: F,
    /// Also write the result document here (a result set with --repeat)
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write a self-contained HTML report here (charts as inline SVG; fetches nothing)
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// No progress display
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    #[command(flatten)]
    pub export: ExportArgs,
}

/// TLS flags, shared by every command that connects.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "TLS")]
pub struct TlsArgs {
    /// Trust the CAs in this PEM file instead of the system's
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Client certificate (PEM) for mTLS
    #[arg(long = "cert", value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key of --cert (PEM: PKCS#8, SEC1 or RSA)
    #[arg(long = "key", value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Do not verify the server's certificate (reports say so)
    #[arg(short = 'k', long = "insecure")]
    pub insecure: bool,
    /// Resume TLS sessions instead of doing a full handshake per connection
    #[arg(long = "tls-resume")]
    pub resume: bool,
    /// Key-exchange groups to offer, in order: x25519, p256, p384, x25519mlkem768 [default: rustls's]
    #[arg(long = "tls-groups", value_name = "LIST", value_delimiter = ',', value_parser = TlsGroup::parse)]
    pub groups: Vec<TlsGroup>,
    /// Only this TLS version: 1.2 or 1.3 [default: both]
    #[arg(long = "tls-version", value_name = "VERSION", value_parser = TlsVersion::parse)]
    pub tls_version: Option<TlsVersion>,
    /// Server name to send (SNI) and verify [default: the host]
    #[arg(long = "sni", value_name = "NAME")]
    pub sni: Option<String>,
}

/// Live metrics while a run lasts, shared by `http`, `storm` and `run`.
#[derive(Clone, Copy, Debug, Default, Args)]
#[command(next_help_heading = "Live metrics")]
pub struct LiveArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics while the run lasts (e.g. 127.0.0.1:9464);
    /// see docs/metrics.md
    #[arg(long = "prometheus", value_name = "ADDR")]
    pub prometheus: Option<std::net::SocketAddr>,
    /// Keep serving /metrics this long after the run ended, so that a last scrape sees the final
    /// totals (set it to at least the scrape interval)
    #[arg(long = "prometheus-linger", value_name = "DURATION", default_value = "0s",
          value_parser = parse_duration, requires = "prometheus")]
    pub prometheus_linger: Duration,
}

/// Exports for other tools, shared by every command that runs load (listed
/// under the "Output" heading of [`OutputArgs`]).
#[derive(Clone, Debug, Default, Args)]
pub struct ExportArgs {
    /// Write the per-second series here as CSV, one row per second per metric
    /// (second,unix_ms,metric,value)
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write one CSV row per request (per connection for storms) here, streamed to disk
    #[arg(long = "csv-requests", value_name = "FILE")]
    pub csv_requests: Option<PathBuf>,
    /// Write at most N --csv-requests rows; the report says when later requests were left out
    #[arg(
        long = "csv-requests-max",
        value_name = "N",
        default_value_t = 10_000_000,
        requires = "csv_requests"
    )]
    pub csv_requests_max: u64,
    /// Append a short markdown summary to FILE: the verdict first, then the key figures (for a
    /// pull request comment or $GITHUB_STEP_SUMMARY)
    #[arg(long = "summary-md", value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Write the per-second phase histograms here as an HdrHistogram interval log
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CertsCmd {
    /// Directory to write ca.pem, ca.key, server.pem, server.key, client.pem, client.key
    #[arg(long = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// ECDSA P-256 keys (the default)
    #[arg(long = "ecdsa", conflicts_with = "rsa")]
    pub ecdsa: bool,
    /// RSA 2048 keys
    #[arg(long = "rsa")]
    pub rsa: bool,
    /// Names and addresses the server certificate is valid for
    #[arg(
        long = "hosts",
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,::1"
    )]
    pub hosts: Vec<String>,
    /// Make the server and client certificates already expired (to test failures)
    #[arg(long = "expired")]
    pub expired: bool,
}

#[derive(Debug, Args)]
pub struct StormCmd {
    /// tcp://host:port, tls://host:port, http://host:port/path or https://host:port/path
    pub target: String,
    /// Connections to open in all
    #[arg(short = 'n', long = "connections", value_name = "N")]
    pub connections: Option<u64>,
    /// New connections per second (open loop: lateness is recorded as schedule_lag) [default: as fast as possible]
    #[arg(short = 'r', long = "rate", value_name = "RATE", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// At most this many connections open or opening at once
    #[arg(short = 'c', long = "max-concurrent", value_name = "M")]
    pub max_concurrent: Option<u64>,
    /// Worker threads per process [default: number of cores]
    #[arg(short = 't', long = "workers", value_name = "W")]
    pub workers: Option<u32>,
    /// Start each connection after a uniformly random wait in [0, DURATION)
    #[arg(long = "jitter", value_name = "DURATION", value_parser = parse_duration)]
    pub jitter: Option<Duration>,
    /// Keep each connection open this long once established [default: 0, close at once]
    #[arg(long = "hold", value_name = "DURATION", value_parser = parse_duration)]
    pub hold: Option<Duration>,
    /// One HTTP request per connection, e.g. 'GET /', or 'none' [default: GET path for http(s) targets]
    #[arg(long = "request", value_name = "'METHOD /PATH'")]
    pub request: Option<String>,
    /// Limit on connect, handshake and request [default: 10s; 2s with --client nats.go]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Processes to spread connections over: auto (as the descriptor limit needs) or a number
    #[arg(long = "procs", value_name = "auto|N")]
    pub procs: Option<String>,
    /// Local addresses to connect from, rotated: a range (127.0.0.2-127.0.0.200) or a CIDR
    #[arg(long = "source", value_name = "RANGE|CIDR")]
    pub source: Option<String>,
    /// Seed for --jitter's random waits [default: from the clock; the result records it]
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
    /// Speak HTTP/2 on every connection: its handshake includes the preface and SETTINGS
    /// exchange, its request is one stream (ALPN h2 over https://, h2c over http://)
    #[arg(long = "http2")]
    pub http2: bool,
    /// Speak HTTP/3 on every connection (https:// only): each is a QUIC connection whose
    /// handshake is the `tls` phase; its request is one stream
    #[arg(long = "http3")]
    pub http3: bool,
    /// Protocol spoken once connected: nats, lines (with --send/--expect), none [default: from the target]
    #[arg(long = "protocol", value_name = "NAME", help_heading = "Protocol")]
    pub protocol: Option<String>,
    /// NATS user and password from a file ('user:password', or two lines)
    #[arg(long = "nats-creds", value_name = "FILE", help_heading = "Protocol")]
    pub nats_creds: Option<PathBuf>,
    /// Line protocol (WebSocket: a text message): send this text (escapes: \r \n \t \\ \xHH); repeatable,
    /// in order with --expect
    #[arg(long = "send", value_name = "TEXT", help_heading = "Protocol")]
    pub send: Vec<String>,
    /// Line protocol: as --send, for a secret (a password, AUTH ...): sent as given, written
    /// <redacted> in results, reports and manifests; repeatable, in order with --send and --expect
    #[arg(long = "send-secret", value_name = "TEXT", help_heading = "Protocol")]
    pub send_secret: Vec<String>,
    /// Line protocol (WebSocket: the next message): the next line must match this regular expression;
    /// repeatable
    #[arg(long = "expect", value_name = "REGEX", help_heading = "Protocol")]
    pub expect: Vec<String>,
    /// WebSocket: send the file's bytes as one binary message (@FILE); repeatable, in order with
    /// --send and --expect
    #[arg(long = "send-binary", value_name = "@FILE", help_heading = "Protocol")]
    pub send_binary: Vec<String>,
    /// WebSocket: while holding, send a ping this often and record its pong's round trip (phase pong)
    #[arg(long = "ping-every", value_name = "DURATION", value_parser = parse_duration, help_heading = "Protocol")]
    pub ping_every: Option<Duration>,
    /// Line protocol or WebSocket: limit on each --expect [default: --timeout]
    #[arg(long = "step-timeout", value_name = "DURATION", value_parser = parse_duration, help_heading = "Protocol")]
    pub step_timeout: Option<Duration>,
    /// NATS: behave like this client library: lenient (answer whatever the server says) or nats.go
    /// (fail where nats.go fails; its 2s timeout, its reconnect policy) [default: lenient]
    #[arg(long = "client", value_name = "PROFILE", help_heading = "Protocol")]
    pub client: Option<String>,
    /// Reconnect held connections the server closes (and repeat the handshake)
    #[arg(long = "reconnect", help_heading = "Reconnect")]
    pub reconnect: bool,
    /// Wait before each reconnect attempt [default: 2s, as the NATS clients]
    #[arg(long = "reconnect-wait", value_name = "DURATION", value_parser = parse_duration, help_heading = "Reconnect")]
    pub reconnect_wait: Option<Duration>,
    /// Plus a random extra wait in [0, DURATION) [default: 100ms; 1s for nats.go over TLS]
    #[arg(long = "reconnect-jitter", value_name = "DURATION", value_parser = parse_duration, help_heading = "Reconnect")]
    pub reconnect_jitter: Option<Duration>,
    /// Attempts per dropped connection before giving up [default: 60]
    #[arg(long = "max-reconnects", value_name = "N", help_heading = "Reconnect")]
    pub max_reconnects: Option<u32>,
    /// Once every connection is held, wait this long, then run --trigger [default: 0s]
    #[arg(long = "trigger-after", value_name = "DURATION", value_parser = parse_duration, help_heading = "Reconnect")]
    pub trigger_after: Option<Duration>,
    /// Shell command to run then (e.g. restart the server); its status and output are in the report
    #[arg(long = "trigger", value_name = "COMMAND", help_heading = "Reconnect")]
    pub trigger: Option<String>,
    /// Longest the --trigger command may run; then its process group gets SIGTERM, and SIGKILL 2s later [default: 60s]
    #[arg(long = "trigger-timeout", value_name = "DURATION", value_parser = parse_duration, help_heading = "Reconnect")]
    pub trigger_timeout: Option<Duration>,
    /// --send, --send-secret and --expect in command-line order (filled after parsing)
    #[arg(skip)]
    pub steps: Vec<StepArg>,
    #[command(flatten)]
    pub output: OutputArgs<ReportFormat>,
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub segments: SegmentArgs,
    #[command(flatten)]
    pub reach: ReachArgs,
}

#[derive(Debug, Args)]
pub struct ServeCmd {
    /// Address to listen on (port 0: any free port)
    #[arg(long = "listen", default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Server threads [default: number of cores]
    #[arg(long = "threads", value_name = "N")]
    pub threads: Option<usize>,
    /// Stall period: answer nothing for --stall-for at the end of every period
    #[arg(long = "stall-every", value_name = "DURATION", value_parser = parse_duration, requires = "stall_for")]
    pub stall_every: Option<Duration>,
    /// Length of each stall
    #[arg(long = "stall-for", value_name = "DURATION", value_parser = parse_duration, requires = "stall_every")]
    pub stall_for: Option<Duration>,
    /// Serve TLS with DIR/server.pem and DIR/server.key (as written by `throng certs`)
    #[arg(long = "tls", value_name = "DIR")]
    pub tls: Option<PathBuf>,
    /// Require client certificates issued by DIR/ca.pem (with --tls)
    #[arg(long = "mtls", requires = "tls")]
    pub mtls: bool,
    /// Processes listening on the same port (SO_REUSEPORT), to hold more
    /// connections than one process's descriptor limit
    #[arg(long = "procs", value_name = "N", default_value_t = 1)]
    pub procs: u32,
    /// bcrypt cost for /auth passwords (4 to 31; each step doubles the work)
    #[arg(long = "bcrypt-cost", value_name = "N", default_value_t = 12)]
    pub bcrypt_cost: u32,
    /// Put the one-time code in the /auth/register response (so a test can verify without logs)
    #[arg(long = "reveal-otp")]
    pub reveal_otp: bool,
    /// Threads that hash and check /auth passwords [default: number of cores]
    #[arg(long = "hash-threads", value_name = "N")]
    pub hash_threads: Option<usize>,
    /// Be a hostile server: answer every connection with this fault (never-answer, trickle,
    /// rst-mid-body, tls-alert, nats-auth-error, …; the README lists them all)
    #[arg(long = "fault", value_name = "NAME", conflicts_with_all = ["stall_every", "stall_for"])]
    pub fault: Option<String>,
    /// Serve HTTP/3 over QUIC on UDP --listen, with the certificate of --tls DIR; --fault then
    /// takes an HTTP/3 fault (h3-reset-stream, h3-close-connection, h3-silent, h3-no-handshake,
    /// h3-one-stream, h3-streams-exhausted, h3-short-body, h3-long-body, h3-early-hints)
    #[arg(long = "http3", requires = "tls", conflicts_with_all = ["stall_every", "stall_for", "mtls"])]
    pub http3: bool,
}

#[derive(Debug, Args)]
pub struct DemoCmd {
    /// Seconds per run
    #[arg(long = "duration", default_value = "3s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,
}

#[derive(Debug, Args)]
pub struct ReportCmd {
    /// A result file written with --json, or a result set (--repeat): its runs are added up and, in
    /// the text view, listed one per line
    pub result: PathBuf,
    /// Write the per-second series here as CSV (second,unix_ms,metric,value)
    #[arg(long = "csv", value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the per-second phase histograms here as an HdrHistogram interval log
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Report layout
    #[arg(long = "format", value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write a self-contained HTML report here instead of printing the layout
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct MergeCmd {
    /// Result files to add together (parts that ran at the same time); a result set counts as its
    /// runs added up in sequence
    #[arg(required = true, num_args = 1..)]
    pub results: Vec<PathBuf>,
    /// Where to write the merged result
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Exit 0 even when the results are execution segments that do not cover their sequence
    /// exactly once (the merged file still notes which segments are missing or repeated)
    #[arg(long = "allow-partial")]
    pub allow_partial: bool,
    /// Merge results whose plans differ (command, target, method, open or closed loop); the merged
    /// result keeps the first file's plan and says, in a note, how the others differed
    #[arg(long = "allow-mixed")]
    pub allow_mixed: bool,
}

const COMPARE_HELP: &str = "\
Sides: without --vs, exactly two files: A then B. With --vs, the files before it are side A and
those after it side B. Any file may be a result set (--repeat N); a side is all of its runs.

Figures (A, B, B-A, (B-A)/A): throughput, requests, errors, every phase's mean, p50, p90, p99,
p99.9 and max, outcomes by class, status codes, concurrency, connections/s, generator CPU-seconds,
work per CPU-second and peak memory. A side's runs are added up (percentiles of all samples).

Statistics, for throughput and the headline phases' p50 and p99 (latency; for storms connect,
tls, handshake): with 2 or more runs on each side, over the runs' figures; otherwise over each
full second of the per-second series, which is weaker (the report says so). Each gives the
difference of medians, its bootstrap interval (10000 resamples, fixed seed: reproducible) and a
two-sided Mann-Whitney U p-value. Significant: the interval excludes 0, p < 1 - confidence, and
the difference is at least --min-effect of A. A warning says when a side's own spread is larger
than the difference, or when too few runs can never reach significance (4+ per side needed).

Formats: text, markdown, json (schema throng.compare/v1, see schema/compare.schema.json), and ab
or httperf: the two tools' report layouts side by side, A | B.

Gate (--fail-on RULE..., for CI): a rule is FIGURE OP CHANGE, and it fails when the change is OP
the limit AND the change is significant by the statistics above; a change past the limit that is
not significant holds and is listed as such. The verdict (GATE FAILED / GATE PASSED, a line per
rule) comes first in every format; a failed rule exits 99.
  FIGURE  p50, p99, p(95), mean, max... alone: the headline phase (latency; connect for storms)
          METRIC: STAT as --threshold writes it: 'connect: p99', 'response{target:/login}: p(95)'
          rps or throughput (also rps{target:/a}); errors and check_failed (rates, also tagged)
  OP      >, >=, <, <=
  CHANGE  signed: +10% (relative to A), +5ms (durations), -50/s (throughput), +1pt (percentage
          points of an error rate)
Tested: throughput and the headline p50/p99 by compare's own tests; any other duration figure by
the same bootstrap and Mann-Whitney test over its runs' (or seconds') values; error rates by a
two-proportion z-test of the counts. A rule on a figure a side lacks (no samples, an unknown
target) is refused with exit 2, never held. The sides must have run the same plan (command,
target, method, loop, rate, connections, HTTP version, streams, keep-alive; a scenario's file and
executors): otherwise --fail-on is refused (exit 2) unless --allow-mixed.
--summary-md FILE appends the verdict, the tested figures and the warnings as short markdown;
--junit FILE one JUnit test case per rule.

Examples:
  throng http http://direct:8080/ -r 100 -d 30s --repeat 5 --json direct.json
  throng http http://via-nat:8080/ -r 100 -d 30s --repeat 5 --json nat.json
  throng compare direct.json nat.json
  throng compare a1.json a2.json a3.json --vs b1.json b2.json b3.json --label A=direct --label B=nat
  throng compare direct.json nat.json --format httperf
  throng compare main.json pr.json --fail-on 'p99 > +10%' 'rps < -20%' 'errors > +1pt' \\
      --summary-md \"$GITHUB_STEP_SUMMARY\" --junit gate.xml
  throng compare --baseline perf-history --last 5 run.json   (A: the last 5 runs of run.json's plan)
Exit codes: 0 compared (and every rule held), 2 a file is missing, not a result, the sides are of
different kinds, a rule does not parse or names a figure a side lacks, or --fail-on with mixed
plans; 99 a --fail-on rule failed.";

#[derive(Debug, Args)]
pub struct CompareCmd {
    /// Side A's result files or result sets (without --vs: A's file, then B's; with --baseline:
    /// the new run)
    // Not required here: files given after --fail-on are its values until
    // `compare::run` takes them back.
    #[arg(num_args = 1.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Side A is the last --last runs of the new run's plan in this history directory (see
    /// `throng history`), added up exactly
    #[arg(long = "baseline", value_name = "DIR", conflicts_with = "vs")]
    pub baseline: Option<PathBuf>,
    /// How many of the history's runs make the baseline
    #[arg(long = "last", value_name = "N", default_value_t = 5, requires = "baseline")]
    pub last: usize,
    /// Side B's result files or result sets
    #[arg(long = "vs", num_args = 1.., value_name = "FILE")]
    pub vs: Vec<PathBuf>,
    /// Name a side: A=direct, B=nat (repeatable) [default: the file's name, or A and B]
    #[arg(long = "label", value_name = "SIDE=NAME")]
    pub labels: Vec<String>,
    /// Report layout
    #[arg(long = "format", value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    /// Confidence of the bootstrap interval, percent; the test's threshold is 100 minus it
    #[arg(long = "confidence", value_name = "PERCENT", default_value_t = 95.0)]
    pub confidence: f64,
    /// Smallest difference worth calling significant, percent of A's median (0: any)
    #[arg(long = "min-effect", value_name = "PERCENT", default_value_t = 1.0)]
    pub min_effect: f64,
    /// Seed of the bootstrap's resampling
    #[arg(long = "seed", value_name = "N", default_value_t = throng_report::compare::DEFAULT_SEED)]
    pub seed: u64,
    /// Also write both sides' charts overlaid as one self-contained HTML page
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Gate rules: fail (exit 99) when a figure changed past a limit and the change is significant,
    /// e.g. 'p99 > +10%' 'rps < -20%' 'errors > +1pt' (give them after the files; see below)
    #[arg(long = "fail-on", num_args = 1.., value_name = "RULE")]
    pub fail_on: Vec<String>,
    /// Judge --fail-on rules even when the sides ran different plans (target, rate, concurrency,
    /// protocol…); without it such a gate is refused (exit 2)
    #[arg(long = "allow-mixed")]
    pub allow_mixed: bool,
    /// Also append a short markdown summary, verdict first, to FILE (for a pull request comment
    /// or $GITHUB_STEP_SUMMARY)
    #[arg(long = "summary-md", value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Also write the --fail-on rules as JUnit XML: one test case per rule, failed rules as failures
    #[arg(long = "junit", value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

/// Comparison layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Aligned columns, statistics and warnings.
    Text,
    /// Markdown tables (for tickets and pull requests).
    Markdown,
    /// A machine-readable comparison (schema throng.compare/v1).
    Json,
    /// ApacheBench's layout, A | B.
    Ab,
    /// httperf's layout, A | B.
    Httperf,
}

/// Parses the command line. Usage errors become one line on stderr and exit
/// code 2; `--help` and `--version` print and exit 0.
pub fn parse() -> Result<Cli, ExitCode> {
    use clap::{CommandFactory, FromArgMatches};
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|c| (c, m)));
    match parsed {
        Ok((mut cli, matches)) => {
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
                    say!("throng: {}", clap_one_line(&e));
                    Err(ExitCode::from(2))
                }
            }
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
    let sub = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let help = match sub {
        Some(s)
            if [
                "http", "storm", "serve", "demo", "report", "merge", "compare", "certs", "sweep", "run", "k8s",
            ]
            .contains(&s.as_str()) =>
        {
            format!("throng {s} --help")
        }
        _ => "throng --help".to_string(),
    };
    format!("{first}{tip} (see '{help}')")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
