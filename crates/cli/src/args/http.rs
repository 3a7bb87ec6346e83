//! `throng http` and `throng grpc`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use throng_plan::{StatusSet, parse_duration, parse_rate};

use super::common::{Format, IoArg, LiveArgs, OutputArgs, ReachArgs, RepeatArgs, SegmentArgs, TargetsOrder, TlsArgs};

pub(super) const HTTP_SHORT_EXAMPLES: &str = "\
Examples (more, and every flag: throng http --help):
  throng http http://127.0.0.1:8080/                                 GET, 50 connections, 10 s
  throng http http://127.0.0.1:8080/api -m POST -T application/json --data '{\"a\": 1}'
  throng http https://127.0.0.1:8443/ -k -c 10 -d 30s                https, certificate not checked
  throng http https://127.0.0.1:8443/ --http2 -c 4 --streams 10      HTTP/2, 40 streams
  throng http http://127.0.0.1:8080/ -r 1000 -d 1m --json -          open loop, the result on stdout";

pub(super) const HTTP_EXAMPLES: &str = "\
Examples:
  throng http http://127.0.0.1:8080/                                 GET, 50 connections, 10 s
  throng http http://127.0.0.1:8080/api -m POST -T application/json --data '{\"a\": 1}'
  throng http https://127.0.0.1:8443/ -k -c 10 -d 30s                https, certificate not checked
  throng http https://127.0.0.1:8443/ --http2 -c 4 --streams 10      HTTP/2, 40 streams
  throng http http://127.0.0.1:8080/ -r 1000 -d 1m --json -          open loop, the result on stdout
  throng http http://127.0.0.1:8080/ -c 50 -d 30s            closed loop, 50 connections, 30 s
  throng http http://127.0.0.1:8080/ -r 5000 -d 1m           open loop at 5000 req/s (CO-free latency)
  throng http http://127.0.0.1:8080/ -n 10000 -c 1000 --no-keepalive --format ab
  throng http http://127.0.0.1:8080/ -r 100 -n 8000 --no-keepalive --format httperf --json run.json";

#[derive(Debug, Args)]
pub struct HttpCmd {
    /// Target URL, e.g. http://127.0.0.1:8080/
    #[arg(required_unless_present = "targets")]
    pub url: Option<String>,
    /// More target URLs: requests go to each in turn (see --targets-order); all http:// or all https://
    #[arg(value_name = "URL")]
    pub more_urls: Vec<String>,
    /// Targets from a file: one URL per line, vegeta's http format (METHOD URL, header lines, @body
    /// file, blank line between targets) or JSON lines ({"method","url","header","body"}, body base64);
    /// - reads stdin
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
    #[arg(long = "threshold", value_name = "'METRIC: EXPR'", help_heading = "Verdicts")]
    pub thresholds: Vec<String>,
    /// Connections (closed loop), or the cap on connections (open loop) [default: 50; open loop 1000]
    #[arg(short = 'c', long = "connections", value_name = "N")]
    pub connections: Option<u32>,
    /// Total requests to send
    #[arg(short = 'n', long = "requests", value_name = "N", conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// How long to run, e.g. 30s, 2m (a bare number is seconds, as wrk's -d) [default: 10s]
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
    /// Limit on connect and on each response, e.g. 500ms, 5s (a bare number is seconds) [default: 10s]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Open a new connection for every request (Connection: close)
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,
    /// How workers drive their sockets: auto (io_uring where it carries the plan, epoll otherwise;
    /// one line on stderr when the kernel refuses io_uring), epoll (tokio's readiness loop, every
    /// protocol) or uring (one io_uring per worker: batched sends, multishot receives; HTTP/1.1
    /// closed and open loops over http:// or https://, HTTP/2 closed loops (h2c or over TLS, one
    /// target, --trace-context too), without --csv-requests). The result and report say which ran
    #[arg(long = "io", value_name = "MODEL", value_enum, default_value_t = IoArg::Auto)]
    pub io: IoArg,
    /// Speak HTTP/2: ALPN h2 over https:// (refused before the run if the server does not
    /// negotiate it), prior knowledge (h2c) over http://
    #[arg(long = "http2")]
    pub http2: bool,
    /// Speak HTTP/3 over QUIC (UDP) to an https:// URL
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
    /// Send a W3C traceparent header on every request, with a new random trace id and parent id
    /// each (redirect hops share their request's trace, each with a span of its own); the result keeps the slowest requests with their trace ids, and --csv-requests
    /// rows get a trace_id column. --trace-context=unsampled sends flags 00
    /// (correlate without asking the server to record) [default when given: sampled]
    #[arg(long = "trace-context", value_name = "SAMPLING", value_enum, num_args = 0..=1,
          require_equals = true, default_missing_value = "sampled")]
    pub trace_context: Option<TraceArg>,
    /// With --trace-context: how many of the slowest requests the result keeps with their trace
    /// ids (1-1000) [default: 10]
    #[arg(long = "slowest", value_name = "N")]
    pub slowest: Option<u32>,
    /// Read each response as an event stream (text/event-stream, HTTP/1.1, --http2 or --http3;
    /// requests say Accept: text/event-stream unless -H gives an Accept): phases first_event,
    /// event_gap and stream, events and bytes counted, and how each stream ended (completed,
    /// events, duration, sse.stalled when no event comes within --timeout, sse.too_large past
    /// 1 MiB a line or an event)
    #[arg(long = "sse", help_heading = "Streams")]
    pub sse: bool,
    /// End each stream after N events (ok; the connection closes, or over HTTP/2 and HTTP/3 the
    /// stream is reset or stopped)
    #[arg(long = "sse-events", value_name = "N", help_heading = "Streams")]
    pub sse_events: Option<u64>,
    /// End each stream this long after its request started, e.g. 30s (ok; the connection closes,
    /// or over HTTP/2 and HTTP/3 the stream is reset or stopped)
    #[arg(long = "sse-duration", value_name = "DURATION", value_parser = parse_duration,
          help_heading = "Streams")]
    pub sse_duration: Option<Duration>,
    /// Read each response as an LLM API's token stream (implies --sse): openai reads chat
    /// completion chunks (choices[].delta.content, usage.completion_tokens, data: [DONE]);
    /// phases ttft and itl, tokens and tokens per second. Without a body, POSTs a short chat
    /// request with "stream": true
    #[arg(long = "llm", value_name = "API", value_enum, help_heading = "Streams")]
    pub llm: Option<LlmArg>,
    /// With --llm: the service level a stream must meet to count in the goodput, e.g.
    /// 'ttft < 500ms, itl < 50ms' (itl: every gap between two tokens)
    #[arg(long = "slo", value_name = "'ttft < DUR, itl < DUR'", help_heading = "Streams")]
    pub slo: Option<String>,
    /// With --llm: prompts, one per line (text, sent as the user's message) or JSON lines (a whole
    /// chat request each; "stream": true is set), taken in --targets-order, cycled; at most
    /// 1,000,000 lines and 64 MiB
    #[arg(long = "prompts", value_name = "FILE", conflicts_with_all = ["body", "body_lines", "data"],
          help_heading = "Streams")]
    pub prompts: Option<PathBuf>,
    /// With --llm: the "model" of the chat requests throng writes [default: default]
    #[arg(long = "model", value_name = "NAME", help_heading = "Streams")]
    pub model: Option<String>,
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

pub(super) const GRPC_EXAMPLES: &str = "\
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
    /// The method to call (unary, server-, client- or bidirectional-streaming): package.Service/Method
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
    /// How long to run, e.g. 30s, 2m (a bare number is seconds, as wrk's -d) [default: 10s]
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
    /// Client-streaming and bidirectional calls: messages each call sends, then it half-closes; the
    /// --data message N times, or the messages of a JSON-lines --data file in order, cycled [default:
    /// the number of messages --data gives]
    #[arg(long = "stream-messages", value_name = "N")]
    pub stream_messages: Option<u64>,
    /// Client-streaming and bidirectional calls: messages per second within a call [default: as fast
    /// as flow control allows]
    #[arg(long = "stream-rate", value_name = "RATE")]
    pub stream_rate: Option<u32>,
    /// Compress each request message with gzip (grpc-encoding: gzip) and accept gzip replies, which
    /// are inflated (at most 4 MiB a message) [default: identity, nothing compressed]
    #[arg(long = "grpc-encoding", value_name = "ENCODING", value_parser = ["gzip", "identity"])]
    pub grpc_encoding: Option<String>,
    /// Limit on connect and on each call's answer [default: 10s]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    #[command(flatten)]
    pub output: OutputArgs<Format>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// `--llm`'s value: the API whose token stream is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LlmArg {
    /// OpenAI-compatible chat completions (vLLM, llama.cpp, Ollama, TGI, ... speak it too).
    Openai,
}

/// `--trace-context`'s value: the traceparent's trace flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceArg {
    /// Flags 01: the server is asked to record the trace.
    Sampled,
    /// Flags 00: ids to correlate by, without asking for a recording.
    Unsampled,
}
