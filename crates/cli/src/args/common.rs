//! Flag groups several commands share: where to connect, TLS, output
//! and its format, the live view, exports, segments and repeats.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use throng_plan::{TlsGroup, TlsVersion, parse_duration};

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
    /// io_uring where it carries the plan and the kernel allows it, epoll otherwise.
    Auto,
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
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Live metrics")]
pub struct LiveArgs {
    /// Serve Prometheus metrics at http://ADDR/metrics while the run lasts (e.g. 127.0.0.1:9464);
    /// see docs/metrics.md
    #[arg(long = "prometheus", value_name = "ADDR")]
    pub prometheus: Option<std::net::SocketAddr>,
    /// (internal) Write the merged snapshot to FILE about once a second, for `throng agent`
    #[arg(long = "live-snapshots", value_name = "FILE", hide = true)]
    pub live_snapshots: Option<std::path::PathBuf>,
    /// Keep serving /metrics this long after the run ended, so that a last scrape sees the final
    /// totals (set it to at least the scrape interval)
    #[arg(long = "prometheus-linger", value_name = "DURATION", default_value = "0s",
          value_parser = parse_duration, requires = "prometheus")]
    pub prometheus_linger: Duration,
    /// `--remote-write` and `--otlp`, shared with `throng coordinate`.
    #[command(flatten)]
    pub push: PushArgs,
}

/// Pushing the live metrics (`--remote-write`, `--otlp`): a run's, or a
/// coordinator's merged ones.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Live metrics")]
pub struct PushArgs {
    /// Push metrics to this Prometheus remote-write URL while the run lasts and once at its end
    /// (e.g. http://127.0.0.1:9090/api/v1/write); latencies go as native histograms. A failing push
    /// is counted in the result, never changes the run's result or exit code; see docs/metrics.md
    #[arg(long = "remote-write", value_name = "URL")]
    pub remote_write: Option<String>,
    /// How often to push while the run lasts
    #[arg(long = "remote-write-interval", value_name = "DURATION", default_value = "5s",
          value_parser = parse_duration, requires = "remote_write")]
    pub remote_write_interval: Duration,
    /// Longest one push request may take; a push is tried 3 times (5xx, 429 or no answer)
    #[arg(long = "remote-write-timeout", value_name = "DURATION", default_value = "5s",
          value_parser = parse_duration, requires = "remote_write")]
    pub remote_write_timeout: Duration,
    /// Trust these CAs (PEM) for an https:// remote-write URL instead of the system's
    #[arg(long = "remote-write-cacert", value_name = "FILE", requires = "remote_write")]
    pub remote_write_cacert: Option<std::path::PathBuf>,
    /// A header for every push, 'Name: value' (repeatable), e.g. 'Authorization: Bearer TOKEN'; its
    /// value is never shown in output, results or errors
    #[arg(long = "remote-write-header", value_name = "HEADER", requires = "remote_write",
          value_parser = secret_header)]
    pub remote_write_header: Vec<crate::push::Secret>,
    /// Push OpenTelemetry metrics over OTLP/HTTP (protobuf) to this URL while the run lasts and
    /// once at its end (e.g. http://127.0.0.1:4318/v1/metrics); latencies go as exponential
    /// histograms, counters as cumulative sums. A failing push is counted in the result, never
    /// changes the run's result or exit code; see docs/metrics.md
    #[arg(long = "otlp", value_name = "URL")]
    pub otlp: Option<String>,
    /// How often to push while the run lasts
    #[arg(long = "otlp-interval", value_name = "DURATION", default_value = "5s",
          value_parser = parse_duration, requires = "otlp")]
    pub otlp_interval: Duration,
    /// Longest one push request may take; a push is tried 3 times (5xx, 429 or no answer)
    #[arg(long = "otlp-timeout", value_name = "DURATION", default_value = "5s",
          value_parser = parse_duration, requires = "otlp")]
    pub otlp_timeout: Duration,
    /// Trust these CAs (PEM) for an https:// OTLP URL instead of the system's
    #[arg(long = "otlp-cacert", value_name = "FILE", requires = "otlp")]
    pub otlp_cacert: Option<std::path::PathBuf>,
    /// A header for every push, 'Name: value' (repeatable), e.g. 'Authorization: Bearer TOKEN'; its
    /// value is never shown in output, results or errors
    #[arg(long = "otlp-header", value_name = "HEADER", requires = "otlp",
          value_parser = secret_header)]
    pub otlp_header: Vec<crate::push::Secret>,
}

/// Takes any text (checked later, by a message that never shows the value:
/// clap's own would print it).
fn secret_header(s: &str) -> Result<crate::push::Secret, std::convert::Infallible> {
    Ok(crate::push::Secret(s.to_string()))
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
