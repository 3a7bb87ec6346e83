//! `throng mqtt`.

use std::time::Duration;

use clap::Args;
use throng_plan::{parse_duration, parse_rate};

use super::common::{Format, OutputArgs};

// clap turns every "{n}" of a help text into a line break, "{{n}}" too: an
// empty style ("\x1b[0m", left out of plain output, a no-op on a terminal)
// between the brace and the n keeps the topic's placeholder as written.
pub(super) const MQTT_EXAMPLES: &str = concat!(
    "Examples:\n",
    "  throng mqtt mqtt://127.0.0.1:1883 --publishers 2 --subscribers 4 --topic 'bench/{{\x1b[0mn}}' --qos 1 -n 10000\n",
    "  throng mqtt mqtt://dev:secret@127.0.0.1:1883 --publishers 10 --fan pairs --rate 5000 -d 30s\n",
    "  throng mqtt mqtt://127.0.0.1:1883 --publishers 50 --subscribers 1 --fan in --topic ingest --qos 2"
);

#[derive(Debug, Args)]
pub struct MqttCmd {
    /// The broker: mqtt://[user:pass@]host:port, or ws://host:port/path for MQTT over WebSocket
    pub target: String,
    /// Publishing clients [default: 1]
    #[arg(long = "publishers", value_name = "P")]
    pub publishers: Option<u64>,
    /// Subscribing clients; 0 for publish-only load [default: 1; with --fan pairs, as many as publishers]
    #[arg(long = "subscribers", value_name = "S")]
    pub subscribers: Option<u64>,
    #[arg(
        long = "topic",
        value_name = "TOPIC",
        help = "The topic [default: throng/{{\x1b[0mn}}]; {{\x1b[0mn}} stands for the publisher's (or pair's) number, from 1"
    )]
    pub topic: Option<String>,
    /// Who hears whom: out (each publisher its own topic, every subscriber on all of them), in
    /// (every publisher on one topic, every subscriber on it) or pairs (publisher i to subscriber i)
    /// [default: out]
    #[arg(long = "fan", value_name = "in|out|pairs")]
    pub fan: Option<String>,
    /// Open loop: messages per second over all publishers (lateness is schedule_lag; a message due
    /// while its publisher's window is full is dropped) [default: closed loop, each publisher as
    /// fast as its --window allows]
    #[arg(short = 'r', long = "rate", value_name = "RATE", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// QoS of every PUBLISH and subscription: 0, 1 or 2 [default: 0]
    #[arg(long = "qos", value_name = "0|1|2")]
    pub qos: Option<u8>,
    /// Bytes per message: a 26-byte header (sequence number, send time), then zeros [default: 64]
    #[arg(long = "payload", value_name = "BYTES")]
    pub payload: Option<u64>,
    /// What follows each message's header, as text or @FILE (instead of --payload's zeros)
    #[arg(long = "data", value_name = "TEXT|@FILE")]
    pub data: Option<String>,
    /// Publish with the retain flag
    #[arg(long = "retain")]
    pub retain: bool,
    /// Messages to publish in all, shared by the publishers
    #[arg(short = 'n', long = "messages", value_name = "MESSAGES", conflicts_with = "duration")]
    pub messages: Option<u64>,
    /// How long to publish, e.g. 30s [default: 10s]
    #[arg(short = 'd', long = "duration", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// QoS 1 and 2 messages each publisher has unacknowledged at once, at most the broker's MQTT 5
    /// Receive Maximum [default: 16]
    #[arg(long = "window", value_name = "N")]
    pub window: Option<u64>,
    /// After publishing, how long subscribers wait for messages still in flight (and publishers
    /// for acknowledgements); what has not come is lost [default: 2s]
    #[arg(long = "drain", value_name = "DURATION", value_parser = parse_duration)]
    pub drain: Option<Duration>,
    /// The protocol version, 3.1.1 or 5 [default: 3.1.1]
    #[arg(long = "mqtt-version", value_name = "3.1.1|5")]
    pub mqtt_version: Option<String>,
    /// Limit on each client's connect, CONNECT and SUBSCRIBE [default: 10s]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Pass/fail criterion, repeatable: 'delivery: p(99) < 50ms', 'requests: rate(ok) > 0.99'
    #[arg(long = "threshold", value_name = "'METRIC: EXPR'", help_heading = "Verdicts")]
    pub thresholds: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs<Format>,
}
