//! The lab and tooling commands: `serve`, `demo`, `certs`, `k8s`,
//! `completions`, `man`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use throng_plan::parse_duration;

pub(super) const SERVE_HELP: &str = "\
Endpoints:
  GET /              200, empty body
  GET /bytes/N       200 with an N-byte body
  GET /delay/MS      200 after MS milliseconds
  GET /status/CODE   an empty response with that status
  POST /echo         200 with the request body
  GET /reset         reset the connection (TCP RST), no response
  GET /close         close the connection, no response
  GET /garbage       answer with bytes that are not HTTP
  GET /sse?events=N&first=MS&interval=MS&size=B
                     an event stream (text/event-stream); faults: stall=K,
                     end=abrupt, big=BYTES, endless=1
  POST /v1/chat/completions?tokens=N&first=MS&interval=MS&usage=1
                     an OpenAI-compatible chat completion, streamed when the
                     JSON body says \"stream\": true

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
    /// rst-mid-body, tls-alert, nats-auth-error, mqtt-no-connack, …; the README lists them all);
    /// mqtt-broker is no fault but a minimal MQTT broker that holds many sessions cheaply
    #[arg(long = "fault", value_name = "NAME", conflicts_with_all = ["stall_every", "stall_for"])]
    pub fault: Option<String>,
    /// Serve HTTP/3 over QUIC on UDP --listen, with the certificate of --tls DIR; --fault then
    /// takes an HTTP/3 fault (h3-reset-stream, h3-close-connection, h3-silent, h3-no-handshake,
    /// h3-one-stream, h3-streams-exhausted, h3-short-body, h3-long-body, h3-early-hints)
    #[arg(long = "http3", requires = "tls", conflicts_with_all = ["stall_every", "stall_for", "mtls"])]
    pub http3: bool,
    /// Also answer GET /sse and POST /v1/chat/completions (streamed) over HTTP/2 without TLS
    /// (h2c, prior knowledge), on the same port as HTTP/1.1
    #[arg(long = "h2c", conflicts_with_all = ["fault", "tls", "http3"])]
    pub h2c: bool,
}

#[derive(Debug, Args)]
pub struct DemoCmd {
    /// Seconds per run
    #[arg(long = "duration", default_value = "3s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,
}

pub(super) const IMPORT_HELP: &str = "\
Examples:
  throng import curl commands.sh --out flow.yaml     # one curl command per line (or joined with \\)
  pbpaste | throng import curl - > flow.yaml         # a browser's \"Copy as cURL\"
  throng import har session.har --out flow.yaml      # a browser's recording (DevTools: Save all as HAR)
  throng import har session.har --origin https://api.example.com --out api.yaml
  throng import postman shop.postman_collection.json --out shop.yaml
  throng import openapi openapi.yaml --origin http://127.0.0.1:8080 --out api.yaml
  throng run flow.yaml

The scenario runs the requests once, in order, with one VU: change its executor to add load.
A value a recorded response gave and a later request sent (a token, an id, a Location) becomes a
capture and a {{variable}}. Credentials (Authorization, Cookie, API keys, password fields) are never
copied: each becomes {{env.NAME}}, and stderr lists the variables to set.";

/// What `throng import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportKind {
    /// curl command lines
    Curl,
    /// an HTTP Archive (HAR 1.2)
    Har,
    /// a Postman collection (v2.1 or v2.0)
    Postman,
    /// an OpenAPI 3 document (JSON or YAML)
    Openapi,
}

#[derive(Debug, Args)]
pub struct ImportCmd {
    /// What INPUT holds
    #[arg(value_enum, value_name = "KIND")]
    pub kind: ImportKind,
    /// The file to import; - reads stdin
    #[arg(value_name = "INPUT")]
    pub input: PathBuf,
    /// Write the scenario here instead of stdout (replacing the file)
    #[arg(long = "out", short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Keep the requests to this origin (scheme://host[:port]) when the input has several; default:
    /// the first request's. For openapi: the target (with a base path), instead of the document's
    /// servers
    #[arg(long = "origin", value_name = "URL")]
    pub origin: Option<String>,
    /// The scenario's name (default: the kind, `curl` or `har`)
    #[arg(long = "name", value_name = "NAME")]
    pub name: Option<String>,
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

pub(super) const K8S_JOB_HELP: &str = "\
Prints YAML on stdout (ConfigMap with the plan, a Secret for a scenario's TLS key, the Job) and,
on stderr, each agent's resources and the commands that wait, collect and merge the results.
Pod i runs --segment i/N:(i+1)/N of --segment-sequence 0,1/N,...,1, all from the same
--start-at (now + --start-in). The whole flow: docs/distributed.md.

Examples:
  throng k8s job --parallelism 4 -- http http://svc:8080/ -c 400 -d 5m > job.yaml
  throng k8s job checkout.yaml --parallelism 8 --image registry.example/throng:0.1.0 -- --env BASE=http://shop
  kubectl apply -f job.yaml";

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
    /// Start N agents as an Indexed Job, coordinate them as throng coordinate does, write the
    /// merged result, and delete the Job and its Secret (also on Ctrl-C and on failure)
    #[command(after_help = K8S_RUN_HELP)]
    Run(Box<K8sRunCmd>),
}

pub(super) const K8S_RUN_HELP: &str = "\
Each pod runs `throng agent` on its node's network, pod i on port --base-port + i; the cluster
must let pods use the host network, and this machine must reach the nodes' addresses. kubectl
does the talking to the cluster (it knows every way a kubeconfig authenticates).
The agents speak TLS only: each run makes a CA, a certificate for the name 'throng-agent' that
the agents serve (verified here, whatever the pod's address) and one this coordinator presents
(the agents serve no other); the token, the certificates and the agents' key are in the Secret,
which is deleted with the Job. The CA's key is never written anywhere.

Examples:
  throng k8s run --agents 4 -- http http://10.0.0.7:8080/ -c 400 -d 5m --json merged.json
  throng k8s run --agents 8 --namespace load --image registry.example/throng:0.1.0 -- run checkout.yaml";

#[derive(Debug, Args)]
pub struct K8sRunCmd {
    /// Agents: pods, each running one segment of the command
    #[arg(long = "agents", value_name = "N")]
    pub agents: u32,
    /// Namespace of the Job and its Secret
    #[arg(long = "namespace", value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The kubeconfig kubectl uses [default: kubectl's: $KUBECONFIG or ~/.kube/config]
    #[arg(long = "kubeconfig", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Container image with throng on the PATH [default: throng:VERSION]
    #[arg(long = "image", value_name = "IMAGE")]
    pub image: Option<String>,
    /// Name of the Job (its Secret is NAME-token) [default: throng-run- and a random suffix]
    #[arg(long = "name", value_name = "NAME")]
    pub name: Option<String>,
    /// Pod i listens on this port + i, on its node's address
    #[arg(long = "base-port", value_name = "PORT", default_value_t = 7700)]
    pub base_port: u16,
    /// Longest to wait for every agent's pod to run and listen
    #[arg(long = "ready-timeout", value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub ready_timeout: Duration,
    /// Write the merged result (JSON) to this file
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the merged result as an HTML report to this file
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 0 even when an agent's segment is missing (the result still names it)
    #[arg(long = "allow-missing")]
    pub allow_missing: bool,
    /// Show each agent's own live figures beside the merged ones in the pushes, labelled
    /// agent="N HOST:PORT" (N counts from 1); the merged series have no agent label
    #[arg(long = "per-agent")]
    pub per_agent: bool,
    /// Print the Secret (its token and the agents' TLS key redacted) and the Job that would be
    /// applied, as YAML, and exit; nothing is created and kubectl is not called
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// No live progress line
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// The command every agent runs its segment of: http URL ..., storm TARGET ... or run FILE ...
    /// (after --)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// `--remote-write` and `--otlp`: the merged live figures pushed, as `throng coordinate` does
    /// (last: their "Live metrics" heading would go on to the flags after them).
    #[command(flatten)]
    pub push: super::PushArgs,
}

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

pub(super) const COMPLETIONS_HELP: &str = "\
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

/// `throng help-markdown DIR` (hidden): the user guide's reference pages.
#[derive(Debug, Args)]
pub struct HelpMarkdownCmd {
    /// The directory to write the pages into (created if missing)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}
