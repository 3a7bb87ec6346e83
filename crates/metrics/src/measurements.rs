//! What a run measured, as plain data that merges exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::hist::{EncodedHist, Hist, HistError};
use crate::outcome::{Outcomes, add, add_all};

/// Everything one recorder — or many, merged — measured.
///
/// Merging ([`Measurements::merge`]) adds counters and histograms, so a merged
/// percentile is the percentile of all samples, never an average of
/// percentiles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// How requests ended.
    pub requests: Outcomes,
    /// How connection attempts ended (`ok` = established). For storms, the
    /// planned connections' first attempts.
    pub connections: Outcomes,
    /// How attempts to bring back dropped connections ended (storms with
    /// `--reconnect`).
    #[serde(default, skip_serializing_if = "Outcomes::is_empty")]
    pub reconnects: Outcomes,
    /// Scheduled requests never sent: no connection was free before the
    /// request would have timed out, `-c` starts were already waiting when
    /// it fell due, or the run ended first (open loop only).
    pub dropped: u64,
    /// Responses by HTTP status code.
    pub status: BTreeMap<u16, u64>,
    /// Bytes on the wire (application layer).
    pub bytes: ByteCounts,
    /// Highest number of connections open at once. Exact for one worker;
    /// across workers, the highest per-second sum of each worker's peak
    /// (an upper bound on the true simultaneous peak).
    pub peak_concurrent_connections: u64,
    /// One histogram per phase name (µs).
    pub phases: BTreeMap<String, Hist>,
    /// Per-second buckets, by second since the run's start.
    pub series: Vec<SeriesPoint>,
    /// What the first complete response looked like (ab's "Server Software",
    /// "Document Length").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_reply: Option<FirstReply>,
    /// TLS handshakes completed, by what they negotiated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsCounts>,
    /// When the first connection attempt started, µs after the run's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_attempt_us: Option<u64>,
    /// When the last connection was established, µs after the run's start.
    /// With `first_attempt_us`: seed 000's "total connect time".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_established_us: Option<u64>,
    /// Redirects followed (hops), over all requests: a request that followed
    /// two redirects to its final response counts 2 here and 1 in `requests`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redirects: u64,
    /// Event streams (`--sse`, `--llm`): events, tokens, how they ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<crate::StreamCounts>,
    /// gRPC server-streaming calls: messages received, over all calls (a
    /// call still counts once in `requests`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages: u64,
    /// gRPC client-streaming and bidirectional calls: request messages
    /// sent whole, over all calls.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages_sent: u64,
    /// Established connections the server closed before the client meant
    /// to (during a storm's hold).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub closed_by_peer: u64,
    /// WebSocket: held sockets the server closed with a close frame, by its
    /// code (`1001`; `1005` when it gave none); MQTT 5: held connections
    /// the broker ended with DISCONNECT, by its reason code (`139`). Part
    /// of `closed_by_peer`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub close_codes: BTreeMap<String, u64>,
    /// Held connections this side ended because the server broke them, by
    /// class: `mqtt.ping_timeout` (no PINGRESP within the keep-alive). Part
    /// of `closed_by_peer`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hold_failures: BTreeMap<String, u64>,
    /// When the server first closed a held connection, µs after the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_drop_us: Option<u64>,
    /// When the last dropped connection was re-established, µs after the
    /// start. With `first_drop_us`: seed 000's "total reconnect time".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconnected_us: Option<u64>,
    /// Dropped connections that never came back, by the last attempt's
    /// failure class (or `hold_ended`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reconnect_gave_up: BTreeMap<String, u64>,
    /// When a reconnect attempt first found the server accepting again
    /// (its TCP connect succeeded), µs after the start. With
    /// `last_reconnected_us`: the clients' reconnect time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_reaccepted_us: Option<u64>,
    /// Handshakes (first connections and reconnects) in which the server
    /// spoke out of turn, by what it said: `ping_before_pong` (a PING
    /// before the PONG of CONNECT), `info_before_pong` (an INFO update),
    /// `err_then_pong` (an `-ERR`, then success). Counted whether the
    /// handshake then succeeded (lenient client) or failed (nats.go client).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub handshake_out_of_turn: BTreeMap<String, u64>,
    /// TCP connections established, by the remote address they reached
    /// (`127.0.0.1:8080`, `[::1]:8080`; a proxy's when through one): every
    /// address a name resolves to is tried in order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub addresses: BTreeMap<String, u64>,
    /// A scenario run's tags, checks, iterations, groups and VUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario::ScenarioStats>,
    /// Streams on multiplexed connections (HTTP/2, HTTP/3); absent for
    /// HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplex: Option<Multiplex>,
    /// The slowest requests with the trace ids they carried
    /// (`--trace-context`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest: Option<crate::Slowest>,
    /// A publish/subscribe run's books (`throng mqtt`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pubsub: Option<crate::PubSub>,
}

/// How requests were multiplexed on connections (HTTP/2, HTTP/3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Multiplex {
    /// Connections by the protocol they negotiated (`h2`, `h3`).
    pub protocols: BTreeMap<String, u64>,
    /// Streams per connection the plan asked for (`--streams`).
    pub streams_requested: u64,
    /// The lowest SETTINGS_MAX_CONCURRENT_STREAMS a server announced
    /// (None: no limit announced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_max_streams: Option<u64>,
    /// The most streams in flight at once on one connection.
    pub peak_streams_per_connection: u64,
    /// The most streams in flight at once. Exact for one worker; across
    /// workers the sum of their peaks (an upper bound), as for connections.
    pub peak_streams: u64,
    /// Connections closed after carrying streams.
    pub connections: u64,
    /// Streams (requests) those connections carried.
    pub requests: u64,
    /// The fewest and the most requests one of them carried.
    pub min_requests_per_connection: u64,
    /// See `min_requests_per_connection`.
    pub max_requests_per_connection: u64,
}

impl Multiplex {
    /// Adds `o`'s counts; an error when a sum passes 2^64 - 1.
    pub fn merge(&mut self, o: &Multiplex) -> Result<(), HistError> {
        add_all(&mut self.protocols, &o.protocols, "multiplex.protocols")?;
        self.streams_requested = self.streams_requested.max(o.streams_requested);
        self.server_max_streams = match (self.server_max_streams, o.server_max_streams) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.peak_streams_per_connection = self.peak_streams_per_connection.max(o.peak_streams_per_connection);
        add(&mut self.peak_streams, o.peak_streams, "multiplex.peak_streams")?;
        self.min_requests_per_connection = match (self.connections, o.connections) {
            (0, _) => o.min_requests_per_connection,
            (_, 0) => self.min_requests_per_connection,
            _ => self.min_requests_per_connection.min(o.min_requests_per_connection),
        };
        self.max_requests_per_connection = self.max_requests_per_connection.max(o.max_requests_per_connection);
        add(&mut self.connections, o.connections, "multiplex.connections")?;
        add(&mut self.requests, o.requests, "multiplex.requests")
    }

    /// Requests per closed connection, on average (None: none closed).
    pub fn requests_per_connection(&self) -> Option<f64> {
        (self.connections > 0).then(|| self.requests as f64 / self.connections as f64)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Completed TLS handshakes, counted by what they negotiated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsCounts {
    /// Handshakes completed.
    pub handshakes: u64,
    /// Of those, resumed sessions (no certificate exchange).
    pub resumed: u64,
    /// Of those, full handshakes that needed a HelloRetryRequest (the
    /// server wanted a key share the client had not sent).
    pub hello_retry: u64,
    /// By protocol version (`TLSv1_3`, …).
    pub versions: BTreeMap<String, u64>,
    /// By key-exchange group (`X25519`, `X25519MLKEM768`, …).
    pub groups: BTreeMap<String, u64>,
    /// By cipher suite.
    pub ciphers: BTreeMap<String, u64>,
}

impl TlsCounts {
    /// Adds `o`'s counts; an error when a sum passes 2^64 - 1.
    pub fn merge(&mut self, o: &TlsCounts) -> Result<(), HistError> {
        add(&mut self.handshakes, o.handshakes, "tls.handshakes")?;
        add(&mut self.resumed, o.resumed, "tls.resumed")?;
        add(&mut self.hello_retry, o.hello_retry, "tls.hello_retry")?;
        add_all(&mut self.versions, &o.versions, "tls.versions")?;
        add_all(&mut self.groups, &o.groups, "tls.groups")?;
        add_all(&mut self.ciphers, &o.ciphers, "tls.ciphers")
    }
}

/// Bytes sent and received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteCounts {
    /// Request bytes written.
    pub sent: u64,
    /// Response bytes read (headers, bodies, chunk framing).
    pub received: u64,
    /// Of `received`: response head bytes (status line and headers).
    pub received_headers: u64,
    /// Of `received`: response body bytes after transfer decoding.
    pub received_body: u64,
}

impl ByteCounts {
    fn merge(&mut self, o: &ByteCounts) -> Result<(), HistError> {
        add(&mut self.sent, o.sent, "bytes.sent")?;
        add(&mut self.received, o.received, "bytes.received")?;
        add(&mut self.received_headers, o.received_headers, "bytes.received_headers")?;
        add(&mut self.received_body, o.received_body, "bytes.received_body")
    }
}

/// The first complete response a recorder saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstReply {
    /// HTTP status.
    pub status: u16,
    /// The `Server` header, if any.
    pub server: Option<String>,
    /// Response head size in bytes.
    pub header_bytes: u64,
    /// Body size in bytes.
    pub body_bytes: u64,
}

/// One second of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the run's start (this bucket covers [second, second+1)).
    pub second: u64,
    /// Requests that ended in this second (ok + errors).
    pub requests: u64,
    /// Of those, ok.
    pub ok: u64,
    /// Of those, failed.
    pub errors: u64,
    /// The failed requests by error class (they add up to `errors`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_classes: BTreeMap<String, u64>,
    /// Responses received (any status, expected or not).
    #[serde(default)]
    pub replies: u64,
    /// Requests dropped in this second.
    pub dropped: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Connections established.
    pub connections_opened: u64,
    /// Connection attempts that failed.
    pub connection_errors: u64,
    /// The failed connection attempts by error class (they add up to
    /// `connection_errors`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connection_error_classes: BTreeMap<String, u64>,
    /// Highest number of connections open at once during this second.
    pub concurrent_max: u64,
    /// Highest number of streams in flight at once during this second
    /// (multiplexed protocols; across workers the sum of their peaks).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub streams_max: u64,
    /// This second's samples per phase, kept encoded (a long run has many
    /// seconds; decoded histograms are tens of KB each).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<String, EncodedHist>,
}

impl SeriesPoint {
    fn merge(&mut self, o: &SeriesPoint) -> Result<(), HistError> {
        add(&mut self.requests, o.requests, "series.requests")?;
        add(&mut self.ok, o.ok, "series.ok")?;
        add(&mut self.errors, o.errors, "series.errors")?;
        add(&mut self.replies, o.replies, "series.replies")?;
        add(&mut self.dropped, o.dropped, "series.dropped")?;
        add(&mut self.bytes_sent, o.bytes_sent, "series.bytes_sent")?;
        add(&mut self.bytes_received, o.bytes_received, "series.bytes_received")?;
        add(
            &mut self.connections_opened,
            o.connections_opened,
            "series.connections_opened",
        )?;
        add(
            &mut self.connection_errors,
            o.connection_errors,
            "series.connection_errors",
        )?;
        add(&mut self.concurrent_max, o.concurrent_max, "series.concurrent_max")?;
        add(&mut self.streams_max, o.streams_max, "series.streams_max")?;
        add_all(&mut self.error_classes, &o.error_classes, "series.error_classes")?;
        add_all(
            &mut self.connection_error_classes,
            &o.connection_error_classes,
            "series.connection_error_classes",
        )?;
        for (name, h) in &o.phases {
            match self.phases.get_mut(name) {
                Some(mine) => {
                    let mut sum = mine.decode()?;
                    sum.add(&h.decode()?)?;
                    *mine = EncodedHist::new(&sum);
                }
                None => {
                    self.phases.insert(name.clone(), h.clone());
                }
            }
        }
        Ok(())
    }

    /// This second's histogram of one phase (empty when nothing was recorded).
    pub fn phase(&self, name: &str) -> Result<Hist, HistError> {
        self.phases
            .get(name)
            .map_or_else(|| Ok(Hist::new()), EncodedHist::decode)
    }
}

fn merge_hists(into: &mut BTreeMap<String, Hist>, from: &BTreeMap<String, Hist>) -> Result<(), HistError> {
    for (name, h) in from {
        match into.get_mut(name) {
            Some(mine) => mine.add(h)?,
            None => {
                into.insert(name.clone(), h.clone());
            }
        }
    }
    Ok(())
}

impl Measurements {
    /// Adds `other` into `self`. `offset` is how long after `self`'s start
    /// `other` started (zero for workers of one run), so that their series
    /// and connection spans line up in time.
    pub fn merge(&mut self, other: &Measurements, offset: Duration) -> Result<(), HistError> {
        let shift_us = u64::try_from(offset.as_micros()).unwrap_or(u64::MAX);
        let shifted = |v: Option<u64>| v.map(|v| v.saturating_add(shift_us));
        self.first_attempt_us = match (self.first_attempt_us, shifted(other.first_attempt_us)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_established_us = match (self.last_established_us, shifted(other.last_established_us)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        add(&mut self.closed_by_peer, other.closed_by_peer, "closed_by_peer")?;
        add(&mut self.redirects, other.redirects, "redirects")?;
        add(&mut self.messages, other.messages, "messages")?;
        add(&mut self.messages_sent, other.messages_sent, "messages_sent")?;
        if let Some(theirs) = &other.streams {
            self.streams.get_or_insert_with(Default::default).merge(theirs)?;
        }
        self.first_drop_us = match (self.first_drop_us, shifted(other.first_drop_us)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_reconnected_us = match (self.last_reconnected_us, shifted(other.last_reconnected_us)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        add_all(
            &mut self.reconnect_gave_up,
            &other.reconnect_gave_up,
            "reconnect_gave_up",
        )?;
        self.first_reaccepted_us = match (self.first_reaccepted_us, shifted(other.first_reaccepted_us)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        add_all(&mut self.close_codes, &other.close_codes, "close_codes")?;
        add_all(&mut self.hold_failures, &other.hold_failures, "hold_failures")?;
        add_all(
            &mut self.handshake_out_of_turn,
            &other.handshake_out_of_turn,
            "handshake_out_of_turn",
        )?;
        add_all(&mut self.addresses, &other.addresses, "addresses")?;
        let offset = offset.as_secs();
        match (&mut self.scenario, &other.scenario) {
            (Some(mine), Some(theirs)) => mine.merge(theirs, offset)?,
            (None, Some(theirs)) => {
                let mut s = crate::scenario::ScenarioStats::default();
                s.merge(theirs, offset)?;
                self.scenario = Some(s);
            }
            _ => {}
        }
        self.requests.merge_as(&other.requests, "requests.")?;
        self.connections.merge_as(&other.connections, "connections.")?;
        self.reconnects.merge_as(&other.reconnects, "reconnects.")?;
        add(&mut self.dropped, other.dropped, "dropped")?;
        add_all(&mut self.status, &other.status, "status")?;
        self.bytes.merge(&other.bytes)?;
        merge_hists(&mut self.phases, &other.phases)?;
        if self.first_reply.is_none() {
            self.first_reply.clone_from(&other.first_reply);
        }
        match (&mut self.tls, &other.tls) {
            (Some(mine), Some(theirs)) => mine.merge(theirs)?,
            (None, Some(theirs)) => self.tls = Some(theirs.clone()),
            _ => {}
        }
        match (&mut self.multiplex, &other.multiplex) {
            (Some(mine), Some(theirs)) => mine.merge(theirs)?,
            (None, Some(theirs)) => self.multiplex = Some(theirs.clone()),
            _ => {}
        }
        match (&mut self.pubsub, &other.pubsub) {
            (Some(mine), Some(theirs)) => mine.merge(theirs)?,
            (None, Some(theirs)) => self.pubsub = Some(theirs.clone()),
            _ => {}
        }
        if let Some(theirs) = &other.slowest {
            self.slowest
                .get_or_insert_with(Default::default)
                .merge(theirs, shift_us);
        }

        let mut by_second: BTreeMap<u64, SeriesPoint> = std::mem::take(&mut self.series)
            .into_iter()
            .map(|p| (p.second, p))
            .collect();
        for p in &other.series {
            let second = p
                .second
                .checked_add(offset)
                .ok_or_else(|| HistError::Overflow(format!("second {} plus an offset of {offset} s", p.second)))?;
            let slot = by_second.entry(second).or_insert_with(|| SeriesPoint {
                second,
                ..SeriesPoint::default()
            });
            slot.merge(p)?;
        }
        self.series = by_second.into_values().collect();
        let series_peak = self.series.iter().map(|p| p.concurrent_max).max().unwrap_or(0);
        self.peak_concurrent_connections = series_peak
            .max(self.peak_concurrent_connections)
            .max(other.peak_concurrent_connections);
        Ok(())
    }

    /// The histogram of one phase, if anything was recorded in it.
    pub fn phase(&self, name: &str) -> Option<&Hist> {
        self.phases.get(name).filter(|h| !h.is_empty())
    }

    /// Responses per status class: index 0 is 1xx … 4 is 5xx, 5 is anything else.
    pub fn status_classes(&self) -> [u64; 6] {
        let mut out = [0u64; 6];
        for (&code, &n) in &self.status {
            let i = match code {
                100..=599 => usize::from(code / 100 - 1),
                _ => 5,
            };
            out[i] = out[i].saturating_add(n);
        }
        out
    }

    /// Seed 000's "total connect time": from the first connection attempt
    /// to the last connection established.
    pub fn total_connect_time(&self) -> Option<Duration> {
        match (self.first_attempt_us, self.last_established_us) {
            (Some(a), Some(b)) => Some(Duration::from_micros(b.saturating_sub(a))),
            _ => None,
        }
    }

    /// Seed 000's "total reconnect time": from the first held connection the
    /// server dropped to the last one re-established.
    pub fn total_reconnect_time(&self) -> Option<Duration> {
        match (self.first_drop_us, self.last_reconnected_us) {
            (Some(a), Some(b)) => Some(Duration::from_micros(b.saturating_sub(a))),
            _ => None,
        }
    }

    /// The clients' reconnect time: from the first reconnect attempt the
    /// server accepted again to the last connection back (what a client
    /// library's own timers see; it leaves out the server's downtime).
    pub fn client_reconnect_time(&self) -> Option<Duration> {
        match (self.first_reaccepted_us, self.last_reconnected_us) {
            (Some(a), Some(b)) => Some(Duration::from_micros(b.saturating_sub(a))),
            _ => None,
        }
    }

    /// Out-of-turn sightings of every kind (a handshake that saw two kinds
    /// counts twice).
    pub fn out_of_turn_total(&self) -> u64 {
        self.handshake_out_of_turn.values().fold(0, |a, &b| a.saturating_add(b))
    }

    /// Responses received (any status).
    pub fn replies(&self) -> u64 {
        self.status.values().fold(0u64, |a, &n| a.saturating_add(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(second: u64, ok: u64, lat: &[u64]) -> SeriesPoint {
        let mut h = Hist::new();
        for &v in lat {
            h.record_us(v);
        }
        SeriesPoint {
            second,
            requests: ok,
            ok,
            concurrent_max: 2,
            phases: [("latency".to_string(), EncodedHist::new(&h))].into(),
            ..SeriesPoint::default()
        }
    }

    #[test]
    fn series_merge_aligns_by_offset_and_adds() {
        let mut a = Measurements {
            series: vec![point(0, 1, &[10]), point(1, 2, &[20, 30])],
            ..Measurements::default()
        };
        let b = Measurements {
            series: vec![point(0, 5, &[40])],
            ..Measurements::default()
        };
        a.merge(&b, Duration::from_secs(1)).unwrap();
        assert_eq!(a.series.len(), 2);
        assert_eq!(a.series[1].ok, 7);
        assert_eq!(a.series[1].phase("latency").unwrap().count(), 3);
        assert_eq!(a.series[1].concurrent_max, 4);
        assert_eq!(a.peak_concurrent_connections, 4);
    }

    #[test]
    fn status_classes_bucket_codes() {
        let m = Measurements {
            status: [(200, 3), (204, 1), (404, 2), (999, 1)].into(),
            ..Measurements::default()
        };
        assert_eq!(m.status_classes(), [0, 4, 0, 2, 0, 1]);
        assert_eq!(m.replies(), 7);
    }

    #[test]
    fn json_round_trip() {
        let m = Measurements {
            series: vec![point(0, 1, &[10])],
            status: [(200, 1)].into(),
            ..Measurements::default()
        };
        let text = serde_json::to_string(&m).unwrap();
        let back: Measurements = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn both_reconnect_times_and_out_of_turn_merge() {
        let a = Measurements {
            first_drop_us: Some(1_000_000),
            first_reaccepted_us: Some(2_600_000),
            last_reconnected_us: Some(4_000_000),
            handshake_out_of_turn: [("ping_before_pong".to_string(), 3)].into(),
            ..Measurements::default()
        };
        let b = Measurements {
            first_drop_us: Some(1_100_000),
            first_reaccepted_us: Some(2_500_000),
            last_reconnected_us: Some(4_200_000),
            handshake_out_of_turn: [("ping_before_pong".to_string(), 2), ("info_before_pong".to_string(), 1)].into(),
            ..Measurements::default()
        };
        let mut m = a.clone();
        m.merge(&b, Duration::ZERO).unwrap();
        assert_eq!(m.total_reconnect_time(), Some(Duration::from_millis(3200)));
        // The earliest accept of any worker, to the last back of any.
        assert_eq!(m.client_reconnect_time(), Some(Duration::from_millis(1700)));
        assert_eq!(m.handshake_out_of_turn["ping_before_pong"], 5);
        assert_eq!(m.out_of_turn_total(), 6);
        assert_eq!(Measurements::default().client_reconnect_time(), None);
    }

    #[test]
    fn connections_per_address_add_up() {
        let a = Measurements {
            addresses: [("[::1]:80".to_string(), 3)].into(),
            ..Measurements::default()
        };
        let b = Measurements {
            addresses: [("[::1]:80".to_string(), 2), ("127.0.0.1:80".to_string(), 1)].into(),
            ..Measurements::default()
        };
        let mut m = a.clone();
        m.merge(&b, Duration::ZERO).unwrap();
        assert_eq!(m.addresses["[::1]:80"], 5);
        assert_eq!(m.addresses["127.0.0.1:80"], 1);
    }
}
