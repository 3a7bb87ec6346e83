//! `throng storm`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use throng_plan::{StepArg, parse_duration, parse_rate};

use super::common::{IoArg, LiveArgs, OutputArgs, ReachArgs, RepeatArgs, ReportFormat, SegmentArgs, TlsArgs};

pub(super) const STORM_EXAMPLES: &str = "\
Targets: tcp://host:port, tls://host:port, http://host:port/path, https://host:port/path,
         nats://[user:pass@]host:port, ws://host:port/path, wss://host:port/path,
         mqtt://[user:pass@]host:port, mqtts://[user:pass@]host:port

Examples:
  throng storm tls://127.0.0.1:8443 --count 10000 --rate 2000 --cacert ca.pem
  throng storm tcp://127.0.0.1:8080 --count 50000 --hold 30s      (several processes if needed)
  throng storm tls://127.0.0.1:4222 --count 150 --jitter 2s --hold 10s --insecure
  throng storm https://127.0.0.1:8443/ --count 100000 --max-concurrent 1000 --cert c.pem --key c.key
  throng storm nats://user:pass@127.0.0.1:4222 --count 10000 --rate 1000 --hold 30s
  throng storm ws://127.0.0.1:8080/chat --count 5000 --send 'hello' --expect 'hello' --hold 10s
  throng storm mqtt://dev:secret@127.0.0.1:1883 --count 10000 --rate 1000 --hold 60s --keepalive 30s
  throng storm mqtt://127.0.0.1:1883 -n 1000 --client-id 'dev-{{conn}}' --subscribe 'd/{{conn}}'";

#[derive(Debug, Args)]
pub struct StormCmd {
    /// tcp://host:port, tls://host:port, http(s)://host:port/path, nats://[user:pass@]host:port,
    /// ws(s)://[user:pass@]host:port/path or mqtt(s)://[user:pass@]host:port
    pub target: String,
    /// Connections to open in all (emqtt-bench's -c/--count)
    ///
    /// --connections, its old name, still works with a note: in http and grpc --connections means
    /// connections open at once, which is -c/--max-concurrent here.
    #[arg(short = 'n', long = "count", alias = "connections", value_name = "N")]
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
    /// Processes to spread connections over: auto (as the descriptor limit needs) or a number, at most 256
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
    /// How workers drive their sockets: auto (io_uring where it carries the storm, epoll otherwise;
    /// one line on stderr when the kernel refuses io_uring), epoll (tokio's readiness loop, every
    /// protocol) or uring (one io_uring per worker: connects, TLS handshakes, the request and the
    /// hold's close watch as ring operations; tcp://, tls://, http:// and https:// HTTP/1.1
    /// storms, without a proxy or --csv-requests). The result and report say which ran
    #[arg(long = "io", value_name = "MODEL", value_enum, default_value_t = IoArg::Auto)]
    pub io: IoArg,
    /// Protocol spoken once connected: nats, lines (with --send/--expect), none; mqtt on a ws:// or wss://
    /// target (MQTT over WebSocket) [default: from the target]
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
    /// MQTT: the protocol version, 3.1.1 or 5 [default: 3.1.1]
    #[arg(long = "mqtt-version", value_name = "3.1.1|5", help_heading = "MQTT")]
    pub mqtt_version: Option<String>,
    /// MQTT: the client identifier; {{conn}} stands for the connection's number, unique over the run
    /// [default: throng-{{conn}}]
    #[arg(long = "client-id", value_name = "ID", help_heading = "MQTT")]
    pub client_id: Option<String>,
    /// MQTT: keep-alive announced in CONNECT, in whole seconds; while held, a PINGREQ this often, its
    /// PINGRESP's round trip recorded (phase pong); 0s: none [default: 60s]
    #[arg(long = "keepalive", value_name = "DURATION", value_parser = parse_duration, help_heading = "MQTT")]
    pub keepalive: Option<Duration>,
    /// MQTT: start every connection with a clean session (the default; the opposite of --session-expiry)
    #[arg(long = "clean-start", help_heading = "MQTT")]
    pub clean_start: bool,
    /// MQTT: keep each client's session (clean session/clean start off); MQTT 5 says for how long
    /// (Session Expiry Interval, whole seconds)
    #[arg(long = "session-expiry", value_name = "DURATION", value_parser = parse_duration, help_heading = "MQTT")]
    pub session_expiry: Option<Duration>,
    /// MQTT: once connected, subscribe to this topic filter ({{conn}} as in --client-id); SUBSCRIBE →
    /// SUBACK is the phase subscribe
    #[arg(long = "subscribe", value_name = "TOPIC", help_heading = "MQTT")]
    pub subscribe: Option<String>,
    /// MQTT: the QoS of --subscribe, 0 or 1 [default: 0]
    #[arg(long = "qos", value_name = "0|1", help_heading = "MQTT")]
    pub qos: Option<u8>,
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
    /// Pass/fail criterion, repeatable: 'handshake: p(99) < 200ms', 'errors: rate < 1%', 'pong: max < 1s',
    /// on the storm's phases and errors; a failed one exits 99, and so does one with no samples unless
    /// it ends 'or no samples'
    #[arg(long = "threshold", value_name = "'METRIC: EXPR'", help_heading = "Verdicts")]
    pub thresholds: Vec<String>,
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
