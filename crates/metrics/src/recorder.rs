//! The per-worker recorder: everything on the per-request path, no locks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::hist::{EncodedHist, Hist};
use crate::measurements::{ByteCounts, FirstReply, Measurements, Multiplex, SeriesPoint, TlsCounts};
use crate::outcome::{ErrorClass, Outcomes};
use crate::phase::Phase;

/// Status codes below this are counted in a flat array (no hashing per
/// request); anything else goes to a map.
const STATUS_TABLE: usize = 600;

/// Records one worker's measurements. Owned by one thread; merged off the
/// hot path with [`Recorder::finish`] and [`Measurements::merge`].
///
/// Every event carries the instant it happened, which places it in the
/// per-second series. Samples go into the current second's histograms
/// only; when a second ends they are added to the run totals and kept
/// encoded in the series — one histogram write per sample.
#[derive(Clone, Debug)]
pub struct Recorder {
    origin: Instant,
    second: u64,
    point: SeriesPoint,
    current: [Hist; Phase::COUNT],
    totals: [Hist; Phase::COUNT],
    series: Vec<SeriesPoint>,
    requests: Counts,
    connections: Counts,
    reconnects: Counts,
    dropped: u64,
    status: Box<[u64; STATUS_TABLE]>,
    status_other: BTreeMap<u16, u64>,
    bytes: ByteCounts,
    open: u64,
    peak: u64,
    first_reply: Option<FirstReply>,
    tls: Option<TlsTally>,
    first_attempt: Option<Instant>,
    last_established: Option<Instant>,
    closed_by_peer: u64,
    redirects: u64,
    messages: u64,
    messages_sent: u64,
    first_drop: Option<Instant>,
    last_reconnected: Option<Instant>,
    reaccepted: Option<Instant>,
    gave_up: BTreeMap<String, u64>,
    out_of_turn: BTreeMap<&'static str, u64>,
    close_codes: BTreeMap<u16, u64>,
    hold_failures: BTreeMap<String, u64>,
    /// Connections established, by the remote address they reached.
    addresses: BTreeMap<std::net::SocketAddr, u64>,
    first_wave: u64,
    /// This second's failed requests and connection attempts by class,
    /// named into the series point when the second closes.
    second_errors: BTreeMap<ErrorClass, u64>,
    second_connection_errors: BTreeMap<ErrorClass, u64>,
    /// Streams on multiplexed connections (None: HTTP/1.1).
    mux: Option<MuxTally>,
    /// The slowest requests and their trace ids (None: no trace context).
    slowest: Option<crate::slowest::SlowTally>,
    /// Event streams (None: the run reads no streams).
    streams: Option<Box<crate::streams::StreamTally>>,
}

/// Multiplexing counts keyed by static names (no allocation per stream).
#[derive(Clone, Debug, Default)]
struct MuxTally {
    protocols: BTreeMap<&'static str, u64>,
    requested: u64,
    server_max: Option<u64>,
    peak_per_connection: u64,
    in_flight: u64,
    peak: u64,
    connections: u64,
    requests: u64,
    min_requests: u64,
    max_requests: u64,
}

/// TLS counts keyed by static names (no allocation per handshake).
#[derive(Clone, Debug, Default)]
struct TlsTally {
    handshakes: u64,
    resumed: u64,
    hello_retry: u64,
    versions: BTreeMap<&'static str, u64>,
    groups: BTreeMap<&'static str, u64>,
    ciphers: BTreeMap<&'static str, u64>,
}

impl TlsTally {
    fn to_counts(&self) -> TlsCounts {
        let own = |m: &BTreeMap<&'static str, u64>| m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        TlsCounts {
            handshakes: self.handshakes,
            resumed: self.resumed,
            hello_retry: self.hello_retry,
            versions: own(&self.versions),
            groups: own(&self.groups),
            ciphers: own(&self.ciphers),
        }
    }
}

/// What a completed TLS handshake negotiated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Handshake {
    /// Protocol version, e.g. `TLSv1_3`.
    pub version: &'static str,
    /// Key-exchange group, e.g. `X25519` (empty when resumed without one).
    pub group: &'static str,
    /// Cipher suite.
    pub cipher: &'static str,
    /// A resumed session.
    pub resumed: bool,
    /// A full handshake that needed a HelloRetryRequest.
    pub hello_retry: bool,
}

#[derive(Clone, Debug, Default)]
struct Counts {
    attempted: u64,
    ok: u64,
    errors: BTreeMap<ErrorClass, u64>,
    last_error: Option<ErrorClass>,
}

impl Counts {
    fn fail(&mut self, class: ErrorClass) {
        *self.errors.entry(class).or_default() += 1;
        self.last_error = Some(class);
    }

    fn to_outcomes(&self) -> Outcomes {
        let mut errors = BTreeMap::new();
        for (class, n) in &self.errors {
            *errors.entry(class.name().into_owned()).or_default() += n;
        }
        Outcomes {
            attempted: self.attempted,
            ok: self.ok,
            errors,
        }
    }
}

/// What a completed response looked like, for counting.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Bytes of the response head.
    pub header_bytes: u64,
    /// Bytes of the body after transfer decoding.
    pub body_bytes: u64,
}

/// Per-second error counts by class name, for the series.
fn named(by_class: BTreeMap<ErrorClass, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (class, n) in by_class {
        *out.entry(class.name().into_owned()).or_default() += n;
    }
    out
}

impl Recorder {
    /// A recorder whose series starts at `origin` (the run's start; shared
    /// by every worker of a run so that their seconds line up).
    pub fn new(origin: Instant) -> Self {
        Recorder {
            origin,
            second: 0,
            point: SeriesPoint::default(),
            current: std::array::from_fn(|_| Hist::new()),
            totals: std::array::from_fn(|_| Hist::new()),
            series: Vec::new(),
            requests: Counts::default(),
            connections: Counts::default(),
            reconnects: Counts::default(),
            dropped: 0,
            status: Box::new([0; STATUS_TABLE]),
            status_other: BTreeMap::new(),
            bytes: ByteCounts::default(),
            open: 0,
            peak: 0,
            first_reply: None,
            tls: None,
            first_attempt: None,
            last_established: None,
            closed_by_peer: 0,
            redirects: 0,
            messages: 0,
            messages_sent: 0,
            first_drop: None,
            last_reconnected: None,
            reaccepted: None,
            gave_up: BTreeMap::new(),
            out_of_turn: BTreeMap::new(),
            close_codes: BTreeMap::new(),
            hold_failures: BTreeMap::new(),
            addresses: BTreeMap::new(),
            first_wave: 0,
            second_errors: BTreeMap::new(),
            second_connection_errors: BTreeMap::new(),
            mux: None,
            slowest: None,
            streams: None,
        }
    }

    /// The run's start instant.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Moves the series forward to the second holding `now`. Events that
    /// arrive a little late for an already closed second count in the
    /// current one.
    #[inline]
    fn at(&mut self, now: Instant) {
        let s = now.saturating_duration_since(self.origin).as_secs();
        if s > self.second {
            self.roll(s);
        }
    }

    #[cold]
    fn roll(&mut self, to: u64) {
        self.close_point();
        let streams = self.mux.as_ref().map_or(0, |m| m.in_flight);
        for second in self.second + 1..to {
            self.series.push(SeriesPoint {
                second,
                concurrent_max: self.open,
                streams_max: streams,
                ..SeriesPoint::default()
            });
        }
        self.second = to;
        self.point = SeriesPoint {
            second: to,
            concurrent_max: self.open,
            streams_max: streams,
            ..SeriesPoint::default()
        };
    }

    fn close_point(&mut self) {
        let mut point = std::mem::take(&mut self.point);
        point.second = self.second;
        point.error_classes = named(std::mem::take(&mut self.second_errors));
        point.connection_error_classes = named(std::mem::take(&mut self.second_connection_errors));
        for phase in Phase::ALL {
            let i = phase.index();
            let h = &mut self.current[i];
            if h.is_empty() {
                continue;
            }
            // Same-shaped histograms always add; see Hist::add.
            let _ = self.totals[i].add(h);
            point.phases.insert(phase.name().to_string(), EncodedHist::new(h));
            h.reset();
        }
        self.series.push(point);
    }

    /// Records one sample of `phase`.
    #[inline]
    pub fn phase(&mut self, now: Instant, phase: Phase, d: Duration) {
        self.at(now);
        self.current[phase.index()].record(d);
    }

    /// A request is about to be attempted.
    #[inline]
    pub fn request_started(&mut self) {
        self.requests.attempted += 1;
    }

    /// A request ended with a complete response the plan accepts.
    #[inline]
    pub fn request_ok(&mut self, now: Instant, reply: Reply, wire_bytes: u64) {
        self.at(now);
        self.requests.ok += 1;
        self.point.requests += 1;
        self.point.ok += 1;
        self.count_reply(reply, wire_bytes);
    }

    /// A message exchange without an HTTP status (a `websocket:` step's
    /// round trip) ended well: ok, with the bytes it read.
    pub fn exchanged(&mut self, now: Instant, wire_bytes: u64) {
        self.at(now);
        self.requests.ok += 1;
        self.point.requests += 1;
        self.point.ok += 1;
        self.bytes.received += wire_bytes;
        self.point.bytes_received += wire_bytes;
    }

    /// A request ended with a complete response the plan rejects
    /// (`check_failed`): still counted as a reply with its status.
    pub fn request_rejected(&mut self, now: Instant, reply: Reply, wire_bytes: u64) {
        self.at(now);
        self.requests.fail(ErrorClass::CheckFailed);
        *self.second_errors.entry(ErrorClass::CheckFailed).or_default() += 1;
        self.point.requests += 1;
        self.point.errors += 1;
        self.count_reply(reply, wire_bytes);
    }

    #[inline]
    fn count_reply(&mut self, reply: Reply, wire_bytes: u64) {
        self.point.replies += 1;
        match self.status.get_mut(usize::from(reply.status)) {
            Some(n) => *n += 1,
            None => *self.status_other.entry(reply.status).or_default() += 1,
        }
        self.bytes.received += wire_bytes;
        self.bytes.received_headers += reply.header_bytes;
        self.bytes.received_body += reply.body_bytes;
        self.point.bytes_received += wire_bytes;
    }

    /// Notes the first reply's details (server name, sizes) once.
    pub fn wants_first_reply(&self) -> bool {
        self.first_reply.is_none()
    }

    /// Stores the first reply's details; later calls are ignored.
    pub fn first_reply(&mut self, reply: Reply, server: Option<String>) {
        if self.first_reply.is_none() {
            self.first_reply = Some(FirstReply {
                status: reply.status,
                server,
                header_bytes: reply.header_bytes,
                body_bytes: reply.body_bytes,
            });
        }
    }

    /// A request failed. `wire_bytes` read before the failure still count.
    #[inline]
    pub fn request_failed(&mut self, now: Instant, class: ErrorClass, wire_bytes: u64) {
        self.at(now);
        self.requests.fail(class);
        *self.second_errors.entry(class).or_default() += 1;
        self.point.requests += 1;
        self.point.errors += 1;
        self.bytes.received += wire_bytes;
        self.point.bytes_received += wire_bytes;
    }

    /// `n` requests were still in flight when the run was cut off.
    pub fn requests_interrupted(&mut self, now: Instant, n: u64) {
        self.at(now);
        for _ in 0..n {
            self.requests.fail(ErrorClass::Interrupted);
        }
        if n > 0 {
            *self.second_errors.entry(ErrorClass::Interrupted).or_default() += n;
        }
        self.point.requests += n;
        self.point.errors += n;
    }

    /// A scheduled request was never sent (open loop).
    pub fn dropped(&mut self, now: Instant) {
        self.dropped_many(now, 1);
    }

    /// `n` scheduled requests were never sent (open loop): counted at once,
    /// so an engine far behind an absurd schedule pays nothing per request.
    pub fn dropped_many(&mut self, now: Instant, n: u64) {
        self.at(now);
        self.dropped += n;
        self.point.dropped += n;
    }

    /// A request of a run with trace context ended: kept among the `keep`
    /// slowest when it is one. `start` is its start (latency's origin).
    pub fn slow(&mut self, keep: usize, start: Instant, latency: Duration, end: crate::SlowEnd, trace_id: [u8; 16]) {
        let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let start_us = since(self.origin, start);
        self.slowest
            .get_or_insert_with(|| crate::slowest::SlowTally::new(keep))
            .offer(latency_us, start_us, end, trace_id);
    }

    /// An event stream ended `how` (see [`crate::StreamCounts::ended`]),
    /// having seen `seen`; its request is recorded as any other.
    pub fn stream_ended(&mut self, how: &str, seen: &crate::StreamSeen) {
        self.streams.get_or_insert_with(Box::default).ended(how, seen);
    }

    /// A gRPC server-streaming call received `n` messages.
    pub fn messages(&mut self, n: u64) {
        self.messages += n;
    }

    /// A gRPC client-streaming call sent `n` request messages whole.
    pub fn messages_sent(&mut self, n: u64) {
        self.messages_sent += n;
    }

    /// A request followed a redirect: one hop, with the bytes it wrote and
    /// read (the request itself ends once, at its final response).
    pub fn redirected(&mut self, now: Instant, sent: u64, wire_bytes: u64) {
        self.at(now);
        self.redirects += 1;
        self.bytes.sent += sent;
        self.point.bytes_sent += sent;
        self.bytes.received += wire_bytes;
        self.point.bytes_received += wire_bytes;
    }

    /// Request bytes written.
    #[inline]
    pub fn sent(&mut self, now: Instant, n: u64) {
        self.at(now);
        self.bytes.sent += n;
        self.point.bytes_sent += n;
    }

    /// A connection attempt starts now.
    #[inline]
    pub fn connection_started(&mut self, now: Instant, reconnect: bool) {
        if reconnect {
            self.reconnects.attempted += 1;
        } else {
            self.connections.attempted += 1;
            self.first_attempt.get_or_insert(now);
        }
    }

    fn bucket(&mut self, reconnect: bool) -> &mut Counts {
        if reconnect {
            &mut self.reconnects
        } else {
            &mut self.connections
        }
    }

    /// `n` connection attempts were still under way when the run was cut off.
    pub fn connections_interrupted(&mut self, now: Instant, n: u64, reconnect: bool) {
        self.at(now);
        for _ in 0..n {
            self.bucket(reconnect).fail(ErrorClass::Interrupted);
        }
        if n > 0 {
            *self
                .second_connection_errors
                .entry(ErrorClass::Interrupted)
                .or_default() += n;
        }
        self.point.connection_errors += n;
    }

    /// An established connection was closed by the server before the client
    /// meant to close it.
    pub fn closed_by_peer(&mut self, now: Instant) {
        self.closed_by_peer += 1;
        self.first_drop = Some(self.first_drop.map_or(now, |f| f.min(now)));
    }

    /// A storm connection's first attempt resolved (established or failed):
    /// once all have, the storm is fully up (a trigger may fire).
    pub fn first_wave_resolved(&mut self, established_at: Option<Instant>) {
        self.first_wave += 1;
        if let Some(t) = established_at {
            self.last_established = Some(self.last_established.map_or(t, |l| l.max(t)));
        }
    }

    /// A dropped connection is back, `d` after its drop (a `reconnect` sample).
    pub fn reconnected(&mut self, now: Instant, d: Duration) {
        self.phase(now, Phase::Reconnect, d);
        self.last_reconnected = Some(self.last_reconnected.map_or(now, |l| l.max(now)));
    }

    /// A reconnect attempt's TCP connect succeeded: the server accepts
    /// again (the earliest such instant starts the clients' reconnect time).
    pub fn reconnect_accepted(&mut self, now: Instant) {
        self.reaccepted = Some(self.reaccepted.map_or(now, |f| f.min(now)));
    }

    /// A handshake saw the server speak out of turn (`what`: see
    /// [`Measurements::handshake_out_of_turn`]), whether or not it then
    /// succeeded.
    pub fn out_of_turn(&mut self, what: &'static str) {
        *self.out_of_turn.entry(what).or_default() += 1;
    }

    /// A held WebSocket's close frame from the server, with its code (see
    /// [`Measurements::close_codes`]); [`Self::closed_by_peer`] counts the
    /// drop itself.
    pub fn close_code(&mut self, code: u16) {
        *self.close_codes.entry(code).or_default() += 1;
    }

    /// A held connection this side ended because the server broke it, by
    /// class (see [`Measurements::hold_failures`]); [`Self::closed_by_peer`]
    /// counts the drop itself.
    pub fn hold_failed(&mut self, class: &ErrorClass) {
        *self.hold_failures.entry(class.name().into_owned()).or_default() += 1;
    }

    /// A connection (or reconnect) reached `addr` (see
    /// [`Measurements::addresses`]).
    pub fn reached(&mut self, addr: std::net::SocketAddr) {
        *self.addresses.entry(addr).or_default() += 1;
    }

    /// A dropped connection will not come back, because of `why`.
    pub fn gave_up(&mut self, why: &str) {
        *self.gave_up.entry(why.to_string()).or_default() += 1;
    }

    /// TCP connected after `connect` (a `connect` sample). The connection
    /// counts as established once [`Recorder::connection_established`] says
    /// so (after the TLS handshake, if any).
    #[inline]
    pub fn connected(&mut self, now: Instant, connect: Duration) {
        self.phase(now, Phase::Connect, connect);
    }

    /// A connection is ready for use: TCP connected and, with TLS, the
    /// handshake complete.
    #[inline]
    pub fn connection_established(&mut self, now: Instant, reconnect: bool) {
        self.at(now);
        self.bucket(reconnect).ok += 1;
        self.point.connections_opened += 1;
        self.open += 1;
        self.peak = self.peak.max(self.open);
        self.point.concurrent_max = self.point.concurrent_max.max(self.open);
    }

    /// A multiplexed connection speaking `protocol` (`h2`, `h3`) is ready;
    /// the plan asked for `requested` streams on it and the server allows
    /// `server_max` (None: no limit announced).
    pub fn mux_connection(&mut self, protocol: &'static str, requested: u64, server_max: Option<u64>) {
        let m = self.mux.get_or_insert_with(MuxTally::default);
        *m.protocols.entry(protocol).or_default() += 1;
        m.requested = requested;
        m.server_max = match (m.server_max, server_max) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// A stream opened on a multiplexed connection that now has
    /// `on_connection` streams in flight.
    #[inline]
    pub fn stream_opened(&mut self, now: Instant, on_connection: u64) {
        self.at(now);
        let m = self.mux.get_or_insert_with(MuxTally::default);
        m.in_flight += 1;
        m.peak = m.peak.max(m.in_flight);
        m.peak_per_connection = m.peak_per_connection.max(on_connection);
        self.point.streams_max = self.point.streams_max.max(m.in_flight);
    }

    /// A stream ended (however it ended).
    #[inline]
    pub fn stream_closed(&mut self) {
        if let Some(m) = self.mux.as_mut() {
            m.in_flight = m.in_flight.saturating_sub(1);
        }
    }

    /// A multiplexed connection closed after carrying `requests` streams.
    pub fn mux_connection_closed(&mut self, requests: u64) {
        let m = self.mux.get_or_insert_with(MuxTally::default);
        m.min_requests = if m.connections == 0 {
            requests
        } else {
            m.min_requests.min(requests)
        };
        m.max_requests = m.max_requests.max(requests);
        m.connections += 1;
        m.requests += requests;
    }

    /// A TLS handshake completed after `d` (a `tls` sample).
    pub fn tls_handshake(&mut self, now: Instant, d: Duration, h: Handshake) {
        self.phase(now, Phase::Tls, d);
        let t = self.tls.get_or_insert_with(TlsTally::default);
        t.handshakes += 1;
        t.resumed += u64::from(h.resumed);
        t.hello_retry += u64::from(h.hello_retry);
        *t.versions.entry(h.version).or_default() += 1;
        if !h.group.is_empty() {
            *t.groups.entry(h.group).or_default() += 1;
        }
        // Empty when not known (quinn does not say which suite QUIC's TLS chose).
        if !h.cipher.is_empty() {
            *t.ciphers.entry(h.cipher).or_default() += 1;
        }
    }

    /// A connection attempt failed.
    #[inline]
    pub fn connection_failed(&mut self, now: Instant, class: ErrorClass, reconnect: bool) {
        self.at(now);
        self.bucket(reconnect).fail(class);
        *self.second_connection_errors.entry(class).or_default() += 1;
        self.point.connection_errors += 1;
    }

    /// An established connection closed after `lifetime` (a `connection`
    /// sample, connect() issued → closed).
    #[inline]
    pub fn connection_closed(&mut self, now: Instant, lifetime: Duration) {
        self.phase(now, Phase::Connection, lifetime);
        self.open = self.open.saturating_sub(1);
    }

    /// The class of the most recent failed connection attempt.
    pub fn last_connection_error(&self) -> Option<String> {
        self.reconnects
            .last_error
            .or(self.connections.last_error)
            .map(|c| c.name().into_owned())
    }

    /// Connections currently open.
    pub fn open_connections(&self) -> u64 {
        self.open
    }

    /// Live figures for progress displays: (requests ended, ok, errors,
    /// bytes received).
    pub fn live(&self) -> Live {
        let errors: u64 = self.requests.errors.values().sum();
        Live {
            requests: self.requests.ok + errors,
            ok: self.requests.ok,
            errors,
            dropped: self.dropped,
            open_connections: self.open,
            connections_ok: self.connections.ok,
            first_wave: self.first_wave,
            connection_errors: self.connections.errors.values().sum(),
            unanswered: self
                .connections
                .errors
                .iter()
                .filter(|(c, _)| nobody_answered(c))
                .map(|(_, n)| n)
                .sum(),
            bytes_received: self.bytes.received,
        }
    }

    /// What [`Recorder::finish`] would return at `now`, leaving the
    /// recorder as it is (for judging thresholds while the run goes on).
    pub fn snapshot(&self, now: Instant) -> Measurements {
        self.clone().finish(now)
    }

    /// Like [`Recorder::snapshot`], but the series holds only its last
    /// `keep` seconds (and the second in progress), so that a copy costs the
    /// same in a run's first minute and its tenth hour. Totals, counters and
    /// histograms are complete. The recorder is left as it was.
    pub fn snapshot_recent(&mut self, now: Instant, keep: usize) -> Measurements {
        let cut = self.series.len().saturating_sub(keep);
        let tail = self.series.split_off(cut);
        let head = std::mem::replace(&mut self.series, tail);
        let m = self.snapshot(now);
        let tail = std::mem::replace(&mut self.series, head);
        self.series.extend(tail);
        m
    }

    /// Closes the series at `end` and returns everything recorded.
    pub fn finish(mut self, end: Instant) -> Measurements {
        self.at(end);
        self.close_point();
        let mut phases = BTreeMap::new();
        for phase in Phase::ALL {
            let h = &self.totals[phase.index()];
            if !h.is_empty() {
                phases.insert(phase.name().to_string(), h.clone());
            }
        }
        let mut status: BTreeMap<u16, u64> = self.status_other;
        for (code, &n) in self.status.iter().enumerate() {
            if n > 0 {
                // Invariant: code < STATUS_TABLE < u16::MAX.
                *status.entry(code as u16).or_default() += n;
            }
        }
        // Keep the series tidy: drop a trailing second with nothing in it
        // (a run that ends exactly on a second boundary).
        if self.series.len() > 1 && self.series.last().is_some_and(SeriesPoint::is_idle) {
            self.series.pop();
        }
        Measurements {
            requests: self.requests.to_outcomes(),
            connections: self.connections.to_outcomes(),
            reconnects: self.reconnects.to_outcomes(),
            dropped: self.dropped,
            status,
            bytes: self.bytes,
            peak_concurrent_connections: self.peak,
            phases,
            series: self.series,
            first_reply: self.first_reply,
            tls: self.tls.as_ref().map(TlsTally::to_counts),
            first_attempt_us: self.first_attempt.map(|t| since(self.origin, t)),
            last_established_us: self.last_established.map(|t| since(self.origin, t)),
            closed_by_peer: self.closed_by_peer,
            redirects: self.redirects,
            messages: self.messages,
            messages_sent: self.messages_sent,
            first_drop_us: self.first_drop.map(|t| since(self.origin, t)),
            last_reconnected_us: self.last_reconnected.map(|t| since(self.origin, t)),
            reconnect_gave_up: self.gave_up,
            first_reaccepted_us: self.reaccepted.map(|t| since(self.origin, t)),
            handshake_out_of_turn: self.out_of_turn.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            close_codes: self.close_codes.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            hold_failures: self.hold_failures,
            addresses: self.addresses.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            scenario: None,
            multiplex: self.mux.map(|m| Multiplex {
                protocols: m.protocols.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                streams_requested: m.requested,
                server_max_streams: m.server_max,
                peak_streams_per_connection: m.peak_per_connection,
                peak_streams: m.peak,
                connections: m.connections,
                requests: m.requests,
                min_requests_per_connection: m.min_requests,
                max_requests_per_connection: m.max_requests,
            }),
            slowest: self.slowest.as_ref().map(crate::slowest::SlowTally::to_slowest),
            pubsub: None,
            streams: self.streams.as_ref().map(|s| s.to_counts()),
        }
    }
}

fn since(origin: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX)
}

impl SeriesPoint {
    fn is_idle(&self) -> bool {
        self.requests == 0
            && self.dropped == 0
            && self.bytes_sent == 0
            && self.bytes_received == 0
            && self.connections_opened == 0
            && self.connection_errors == 0
            && self.phases.is_empty()
    }
}

/// True for a failed connection attempt that no peer answered: nothing
/// listens (refused), the connect (or a proxy's answer to CONNECT) timed
/// out, or it could not even start
/// (no descriptor, no port, an OS error such as ENETUNREACH). A run whose
/// first attempts all end so may stop early; one whose server answered —
/// a TLS alert, a reset, a failed check — runs the count it was asked for.
fn nobody_answered(class: &ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::Refused
            | ErrorClass::TimeoutConnect
            | ErrorClass::FdUnavailable
            | ErrorClass::AddrUnavailable
            | ErrorClass::Other(_)
            | ErrorClass::Proxy("unreachable" | "timeout")
    )
}

/// A cheap copy of a recorder's running totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Live {
    /// Requests that ended.
    pub requests: u64,
    /// Of those, ok.
    pub ok: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Scheduled requests dropped.
    pub dropped: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// Connections established so far.
    pub connections_ok: u64,
    /// Storm connections whose first attempt resolved.
    pub first_wave: u64,
    /// Failed connection attempts.
    pub connection_errors: u64,
    /// Of those, the ones no peer answered: refused, timed out connecting,
    /// or never started (no descriptor, no port, an OS error).
    pub unanswered: u64,
    /// Bytes read.
    pub bytes_received: u64,
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
