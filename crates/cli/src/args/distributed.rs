//! `throng agent` and `throng coordinate`: one run spread over machines.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::common::PushArgs;

pub(super) const AGENT_HELP: &str = "\
An agent waits for a coordinator (`throng coordinate`), runs its share of the plan, and sends its
result back; then it waits for the next run. It serves one coordinator at a time.
Whoever has the token can make the agent run a load test: give every agent and the coordinator
the same --token-file (the coordinator proves it knows it; the token is never sent). Without
--tls-cert the connection is not encrypted: keep it on a trusted network, or give the agent a
certificate (--tls-cert/--tls-key; `throng certs` writes a lab set) and the coordinator --cacert.

Example:
  throng agent --listen 0.0.0.0:7001 --token-file /etc/throng/token \\
      --tls-cert agent.pem --tls-key agent.key";

pub(super) const COORDINATE_HELP: &str = "\
The command after -- (http, storm or run) is checked here once, then each agent runs segment i
of N of it (the same --segment mechanics as a manual split), all starting at one instant. Their
results are merged exactly (as `throng merge`) into one --json/--html. An agent that fails or
stops answering is a missing segment, named in the result: exit 1 unless --allow-missing. Ctrl-C
stops every agent and still writes the merged result. The files the command reads (--body,
--bearer-file, ...; for run, the scenario and every file it names) are read here and sent to the
agents; --targets and --data @- are not shipped yet, and a storm's --trigger is refused (it
would run on every agent). A scenario's setup: and teardown: run once, here; every agent's VUs
read the setup's captures.
With --json (or --journal) the coordinator keeps a journal of the run: if it dies, the agents
finish their parts and keep their results for 10 minutes, and `throng coordinate --resume
JOURNAL` reconnects to them and merges the run as if nothing had happened (the result says the
coordinator was restarted, and for how long it was away).

Example:
  throng coordinate --agents 10.0.0.5:7001,10.0.0.6:7001 --token-file token --json all.json \\
      -- http http://target/ -r 30000 -d 5m --threshold 'p99 < 50ms'";

#[derive(Debug, Args)]
pub struct AgentCmd {
    /// Address to listen on for a coordinator
    #[arg(long = "listen", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// File holding the shared secret a coordinator must prove it knows (an HMAC over a fresh
    /// nonce: the token never crosses the wire); without it, any coordinator that reaches the
    /// port is served
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Speak TLS with this certificate chain (PEM); the coordinator gives --cacert
    #[arg(long = "tls-cert", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve only coordinators presenting a certificate issued by this CA (PEM; mutual TLS)
    #[arg(long = "client-ca", value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Serve this many runs, then exit [default: serve until stopped]
    #[arg(long = "runs", value_name = "N")]
    pub runs: Option<u64>,
}

#[derive(Debug, Args)]
pub struct CoordinateCmd {
    /// The agents, HOST:PORT separated by commas; agent i runs segment i of N
    #[arg(
        long = "agents",
        value_name = "ADDRS",
        value_delimiter = ',',
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub agents: Vec<String>,
    /// File holding the shared secret every agent was started with
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Speak TLS to the agents, trusting only the CA certificates in this file (PEM)
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// The certificate (PEM) to present to agents that ask for one (--client-ca); needs --cacert
    #[arg(long = "cert", value_name = "FILE", requires_all = ["key", "cacert"])]
    pub cert: Option<PathBuf>,
    /// The private key of --cert (PEM)
    #[arg(long = "key", value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Verify every agent's certificate for this name instead of the host in --agents (agents
    /// reached by IP address, sharing one certificate); needs --cacert
    #[arg(long = "sni", value_name = "NAME", requires = "cacert")]
    pub sni: Option<String>,
    /// Write the merged result (JSON) to this file
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the merged result as an HTML report to this file
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 0 even when an agent's segment is missing (the result still names it)
    #[arg(long = "allow-missing")]
    pub allow_missing: bool,
    /// Stop every agent as soon as a --threshold of the command fails on the merged figures
    /// (checked every second; exit 99); also accepted inside the command
    #[arg(long = "abort-on-fail")]
    pub abort_on_fail: bool,
    /// Serve the merged live figures of every agent as Prometheus metrics at http://ADDR/metrics
    #[arg(long = "prometheus", value_name = "ADDR")]
    pub prometheus: Option<SocketAddr>,
    /// Keep serving /metrics this long after the run ended, so that a last scrape sees the final
    /// merged totals
    #[arg(long = "prometheus-linger", value_name = "DURATION", default_value = "0s",
          value_parser = throng_plan::parse_duration, requires = "prometheus")]
    pub prometheus_linger: std::time::Duration,
    /// Show each agent's own live figures beside the merged ones, on /metrics and in the pushes,
    /// labelled agent="N HOST:PORT" (N counts from 1 in --agents order); the merged series have no
    /// agent label
    #[arg(long = "per-agent")]
    pub per_agent: bool,
    /// No live progress line
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Keep the run's journal in this file (the run, its agents, how far each was followed), so that
    /// `--resume FILE` can finish the run if this coordinator dies [default: --json's path with
    /// `.journal` appended; none without --json]
    #[arg(long = "journal", value_name = "FILE", conflicts_with = "resume")]
    pub journal: Option<PathBuf>,
    /// Finish the run of this journal: reconnect to its agents (still running, or keeping their
    /// results for 10 minutes after their part ended) and merge their results, judged with the
    /// --abort-on-fail and --allow-missing the run was started with. Give the same --token-file
    /// and --cacert/--cert/--key/--sni; --json/--html default to the journal's
    #[arg(long = "resume", value_name = "JOURNAL")]
    pub resume: Option<PathBuf>,
    /// The command every agent runs its segment of: http URL ..., storm TARGET ... or run FILE ...
    /// (after --)
    #[arg(
        last = true,
        required_unless_present = "resume",
        conflicts_with = "resume",
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
    /// `--remote-write` and `--otlp`: the merged live figures pushed (last:
    /// their "Live metrics" heading would go on to the flags after them).
    #[command(flatten)]
    pub push: PushArgs,
}
