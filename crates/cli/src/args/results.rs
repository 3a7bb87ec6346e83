//! The commands that read results: `report`, `merge`, `compare`, `history`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::common::Format;

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

pub(super) const COMPARE_HELP: &str = "\
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

pub(super) const HISTORY_HELP: &str = "\
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
