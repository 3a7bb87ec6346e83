//! `--remote-write URL` and `--otlp URL`: the run's metrics pushed to where
//! users keep them (each its own pusher; both at once work).
//!
//! ```text
//!  coordinator tick ─► Pusher::tick ─► batch::collect (every --remote-write-interval / --otlp-interval)
//!                                  │  into a slot of one batch (a newer batch replaces a
//!                                  ▼  waiting one, whose samples count as dropped)
//!  push thread ─► Encoder::encode (remote write: protobuf + snappy;
//!                 OTLP: ExportMetricsServiceRequest) ─► http::post
//!               (timeout per request; 5xx/429/no answer: retried with backoff, bounded,
//!                unless a newer batch waits: it carries everything the old one did)
//!  run ends ─► Pusher::finished ─► final totals pushed, waited for (bounded) ─► PushRecord
//! ```
//!
//! The collection side ([`batch`]) knows no wire format; an encoder turns a
//! batch into a body and names its headers. Each wire format is one
//! [`Encoder`] arm and one module ([`remote_write`], [`otlp`]).
//!
//! Nothing here runs on a worker: collection happens on the coordinator's
//! tick (which only reads the merged snapshot it already has), everything
//! else on a thread of its own. A push that fails never changes the run's
//! result or exit code; it is counted in the result's `remote_write` or `otlp`.

pub mod batch;
mod http;
mod otlp;
mod remote_write;

use std::collections::BTreeMap;
use std::net::ToSocketAddrs as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use throng_metrics::Measurements;
use throng_result::PushRecord;

use crate::exit::UsageError;
use crate::figures::AgentFigures;
use batch::{Batch, Gauges};

/// A header value given on the command line: never shown (Debug included).
#[derive(Clone, Default)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The wire formats a push can speak; every `match` on the kind is here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoder {
    /// Prometheus remote write 1.0 (`--remote-write`).
    RemoteWrite,
    /// OpenTelemetry metrics over OTLP/HTTP, binary protobuf (`--otlp`).
    Otlp,
}

impl Encoder {
    fn encode(self, b: &Batch) -> Vec<u8> {
        match self {
            Encoder::RemoteWrite => remote_write::encode(b),
            Encoder::Otlp => otlp::encode(b),
        }
    }

    fn headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Encoder::RemoteWrite => remote_write::HEADERS,
            Encoder::Otlp => otlp::HEADERS,
        }
    }

    /// The flag that asks for it; its companions are named after it
    /// (`-header`, `-cacert`, `-interval`, `-timeout`).
    pub fn flag(self) -> &'static str {
        match self {
            Encoder::RemoteWrite => "--remote-write",
            Encoder::Otlp => "--otlp",
        }
    }

    /// A URL to show in an error message.
    fn example(self) -> &'static str {
        match self {
            Encoder::RemoteWrite => "http://127.0.0.1:9090/api/v1/write",
            Encoder::Otlp => "http://127.0.0.1:4318/v1/metrics",
        }
    }
}

/// Tries per batch: the first and two retries.
const ATTEMPTS: u32 = 3;
/// Wait before the first retry; doubled for each next one.
const BACKOFF: Duration = Duration::from_millis(250);

/// A validated `--remote-write` or `--otlp` and its companions.
#[derive(Debug)]
pub struct Config {
    encoder: Encoder,
    endpoint: http::Endpoint,
    /// The endpoint as the result shows it (no query).
    shown: String,
    headers: Vec<(String, Secret)>,
    interval: Duration,
    timeout: Duration,
    /// `job`, `run_id`, `agent`.
    common: Vec<(&'static str, String)>,
}

/// Headers the request itself sets.
const RESERVED: &[&str] = &["host", "content-length", "connection", "transfer-encoding"];

impl Config {
    /// Checks the flags of `encoder`; `agent` names the segment when the
    /// run is one, `run_id` is shared by every agent of one test when given.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        encoder: Encoder,
        url: &str,
        headers: &[Secret],
        interval: Duration,
        timeout: Duration,
        agent: Option<String>,
        run_id: Option<String>,
        cacert: Option<&std::path::Path>,
    ) -> Result<Config, UsageError> {
        let flag = encoder.flag();
        let example = encoder.example();
        let bad = |why: String| UsageError(format!("{flag} {url}: {why}"));
        let parsed = url::Url::parse(url)
            .map_err(|e| bad(format!("not a URL ({e}); give the receiver's URL, e.g. {example}")))?;
        let https = match parsed.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(bad(format!(
                    "the scheme is {other}; give an http:// or https:// URL, e.g. {example}"
                )));
            }
        };
        if cacert.is_some() && !https {
            return Err(UsageError(format!(
                "{flag}-cacert applies to an https:// {flag} URL; leave it out for http://"
            )));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            // Not echoed: the URL holds a password.
            return Err(UsageError(format!(
                "{flag}: the URL holds a user name or password; give it as {flag}-header \
                 'Authorization: Basic …' instead"
            )));
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| bad(format!("no host; e.g. {example}")))?
            .to_string();
        let port = parsed.port_or_known_default().unwrap_or(if https { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addr = (bare, port)
            .to_socket_addrs()
            .map_err(|e| bad(format!("cannot resolve {host} ({e}); check the host name")))?
            .next()
            .ok_or_else(|| bad(format!("{host} has no address; check the host name")))?;
        let mut path = parsed.path().to_string();
        if let Some(q) = parsed.query() {
            path = format!("{path}?{q}");
        }
        let host_header = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let mut checked = Vec::new();
        for (n, h) in headers.iter().enumerate() {
            // The value is a secret (Authorization): errors name the header
            // by its position and name, never show the value.
            let which = format!("{flag}-header (#{})", n + 1);
            let Some((name, value)) = h.0.split_once(':') else {
                return Err(UsageError(format!(
                    "{which}: no ':' in it; write 'Name: value', e.g. 'Authorization: Bearer TOKEN'"
                )));
            };
            let name = name.trim();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b))
            {
                return Err(UsageError(format!(
                    "{which}: the name before ':' is not a header name; write 'Name: value'"
                )));
            }
            if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
                return Err(UsageError(format!("{which}: throng sets {name} itself; leave it out")));
            }
            let value = value.trim();
            if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(UsageError(format!(
                    "{which}: the value of {name} holds a line break; give it on one line"
                )));
            }
            checked.push((name.to_string(), Secret(value.to_string())));
        }
        if interval < Duration::from_millis(100) {
            return Err(UsageError(format!("{flag}-interval: at least 100ms (e.g. 5s)")));
        }
        if timeout.is_zero() {
            return Err(UsageError(format!("{flag}-timeout: more than 0 (e.g. 5s)")));
        }
        let run_id = run_id.unwrap_or_else(local_run_id);
        let mut common = vec![("job", "throng".to_string()), ("run_id", run_id)];
        if let Some(a) = agent {
            common.push(("agent", a));
        }
        let tls = if https {
            Some((tls_config(flag, cacert)?, server_name(bare).map_err(bad)?))
        } else {
            None
        };
        Ok(Config {
            encoder,
            endpoint: http::Endpoint {
                addr,
                host: host_header,
                path,
                tls,
            },
            shown: format!("{}://{host}:{port}{}", parsed.scheme(), parsed.path()),
            headers: checked,
            interval,
            timeout,
            common,
        })
    }

    /// The longest one batch can take: every attempt timing out, with the
    /// backoffs between.
    fn per_batch(&self) -> Duration {
        let backoffs: Duration = (0..ATTEMPTS - 1).map(|k| BACKOFF * 2u32.pow(k)).sum();
        self.timeout * ATTEMPTS + backoffs
    }
}

/// The TLS client for an https:// receiver: the system's CAs, or those of
/// `{flag}-cacert` (read bounded, as every certificate file).
fn tls_config(
    flag: &str,
    cacert: Option<&std::path::Path>,
) -> Result<std::sync::Arc<throng_tls::rustls::ClientConfig>, UsageError> {
    use throng_tls::rustls::pki_types::{CertificateDer, pem::PemObject as _};
    let cacert = match cacert {
        None => None,
        Some(path) => {
            let shown = path.display().to_string();
            let bad = |why: String| UsageError(format!("{flag}-cacert {shown}: {why}"));
            let pem = throng_plan::input::read_limited(path, throng_plan::input::MAX_PEM_BYTES)
                .map_err(|e| bad(e.to_string()))?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(format!("not a PEM certificate file ({e})")))?;
            if certs.is_empty() {
                return Err(bad("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into()));
            }
            Some((shown, pem))
        }
    };
    throng_tls::client_config(&throng_tls::ClientOptions {
        cacert,
        ..Default::default()
    })
    .map_err(|e| UsageError(format!("{flag}: {e}")))
}

/// The name an https:// receiver's certificate must hold: its host name or
/// IP address.
fn server_name(host: &str) -> Result<throng_tls::rustls::pki_types::ServerName<'static>, String> {
    throng_tls::rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host} is not a name a certificate can hold ({e})"))
}

/// Counts kept by the push thread and read at the end of each run.
#[derive(Clone, Debug, Default)]
struct Stats {
    record: PushRecord,
    /// Samples queued or in flight.
    pending: u64,
    /// Samples collected: sent + failed + dropped + pending, always.
    collected: u64,
}

/// What the coordinator's side keeps between ticks.
struct Side {
    /// Runs that ended (with `--repeat`), added up: counters continue.
    before: Measurements,
    last_push: Instant,
    last_ms: i64,
    /// When the pusher started: the start of every cumulative series.
    start_ms: i64,
    /// The record at the end of the previous run (each run's result holds
    /// its own share).
    reported: PushRecord,
    /// The labels on every series: the config's, with the run named again
    /// by [`Pusher::name_run`].
    common: Vec<(&'static str, String)>,
}

/// The batch waiting for the push thread: at most one, since each batch
/// holds the totals so far and a newer one says all an older one would.
#[derive(Default)]
struct Slot {
    waiting: Mutex<Option<Batch>>,
    ready: Condvar,
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Batch>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn has_one(&self) -> bool {
        self.lock().is_some()
    }
}

/// The push: a slot and a thread. Stops the thread when dropped.
pub struct Pusher {
    config: Arc<Config>,
    step_scenarios: BTreeMap<String, String>,
    stats: Arc<Mutex<Stats>>,
    slot: Arc<Slot>,
    side: Mutex<Side>,
    /// Set when the command ends: the thread stops, the batch in flight
    /// gets no more retries.
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pusher {
    /// Starts the push thread.
    pub fn start(config: Config, step_scenarios: BTreeMap<String, String>) -> std::io::Result<Pusher> {
        let config = Arc::new(config);
        let stats = Arc::new(Mutex::new(Stats {
            record: PushRecord {
                endpoint: config.shown.clone(),
                ..PushRecord::default()
            },
            pending: 0,
            collected: 0,
        }));
        let slot = Arc::new(Slot::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let config = Arc::clone(&config);
            let stats = Arc::clone(&stats);
            let slot = Arc::clone(&slot);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("throng-push".into())
                .spawn(move || run(&config, &slot, &stats, &stop))?
        };
        let reported = PushRecord {
            endpoint: config.shown.clone(),
            ..PushRecord::default()
        };
        let common = config.common.clone();
        Ok(Pusher {
            config,
            step_scenarios,
            stats,
            slot,
            side: Mutex::new(Side {
                before: Measurements::default(),
                last_push: Instant::now(),
                last_ms: 0,
                start_ms: unix_ms(),
                reported,
                common,
            }),
            stop,
            thread: Some(thread),
        })
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names the test `run_id` on every series from now on.
    pub fn name_run(&self, run_id: &str) {
        let mut side = self.side.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, value) in &mut side.common {
            if *name == "run_id" {
                *value = run_id.to_string();
            }
        }
    }

    /// A tick of the current run: pushes when the interval has passed;
    /// `agents`' own series go beside the merged ones (`--per-agent`).
    pub fn tick(&self, snapshot: Option<&Arc<Measurements>>, gauges: Gauges, agents: &[AgentFigures]) {
        let Some(snapshot) = snapshot else { return };
        let mut side = self.side.lock().unwrap_or_else(PoisonError::into_inner);
        if side.last_push.elapsed() < self.config.interval {
            return;
        }
        side.last_push = Instant::now();
        let mut m = side.before.clone();
        // Adding up throng's own recorders cannot fail (same shapes).
        let _ = m.merge(snapshot, Duration::ZERO);
        let batch = self.batch(&mut side, &m, gauges, agents);
        drop(side);
        self.send(batch);
    }

    /// A run ended with these measurements (the result's): pushes the
    /// final totals (and `agents`' own, each its result's), waits for the
    /// queue to empty (bounded), and returns this run's share of the counts.
    pub fn finished(&self, m: &Measurements, agents: &[AgentFigures]) -> PushRecord {
        let mut side = self.side.lock().unwrap_or_else(PoisonError::into_inner);
        // The series are never pushed: leave them out of what every tick copies.
        let mut done = m.clone();
        done.series.clear();
        if let Some(s) = done.scenario.as_mut() {
            s.series.clear();
            for t in s.tags.values_mut() {
                t.series.clear();
            }
        }
        let _ = side.before.merge(&done, Duration::ZERO);
        let total = side.before.clone();
        let batch = self.batch(&mut side, &total, Gauges::default(), agents);
        // The batch in flight ends within one request's time (it is not
        // retried once this one waits), then this one takes at most its own.
        self.send(batch);
        let deadline = Instant::now() + self.config.timeout + self.config.per_batch() + Duration::from_secs(1);
        while self.stats().pending > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut stats = self.stats();
        if stats.pending > 0 {
            // Cannot happen within the bound above unless the machine
            // stalls; what is still pending is given up, counted, and the
            // thread stops counting (it is told to stop).
            stats.record.samples_dropped += stats.pending;
            stats.pending = 0;
            stats.record.last_error = Some("the push did not finish in time".into());
        }
        let now = stats.record.clone();
        drop(stats);
        let share = PushRecord {
            endpoint: now.endpoint.clone(),
            samples_sent: now.samples_sent - side.reported.samples_sent,
            samples_failed: now.samples_failed - side.reported.samples_failed,
            samples_dropped: now.samples_dropped - side.reported.samples_dropped,
            pushes_sent: now.pushes_sent - side.reported.pushes_sent,
            pushes_failed: now.pushes_failed - side.reported.pushes_failed,
            last_error: now
                .last_error
                .clone()
                .filter(|_| now.pushes_failed > side.reported.pushes_failed),
        };
        side.reported = now;
        side.last_push = Instant::now();
        share
    }

    fn batch(&self, side: &mut Side, m: &Measurements, gauges: Gauges, agents: &[AgentFigures]) -> Batch {
        let now = unix_ms();
        // Strictly later than the last batch: a receiver refuses a second
        // value at the same instant.
        let unix_ms = now.max(side.last_ms + 1);
        side.last_ms = unix_ms;
        Batch {
            start_unix_ms: side.start_ms.min(unix_ms - 1),
            unix_ms,
            common: side.common.clone(),
            series: batch::collect(m, gauges, &self.step_scenarios)
                .into_iter()
                .chain(
                    agents
                        .iter()
                        .flat_map(|a| batch::collect_agent(a, &self.step_scenarios)),
                )
                .collect(),
        }
    }

    /// Hands `batch` to the thread; a batch still waiting is replaced (its
    /// samples count as dropped: this one carries its totals).
    fn send(&self, batch: Batch) {
        let n = batch.samples();
        let mut stats = self.stats();
        stats.pending += n;
        stats.collected += n;
        if let Some(old) = self.slot.lock().replace(batch) {
            stats.pending -= old.samples();
            stats.record.samples_dropped += old.samples();
        }
        drop(stats);
        self.slot.ready.notify_one();
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        // Closing the queue ends the thread after the batch in flight, which
        // gets no more retries (every run's final push was waited for).
        self.stop.store(true, Ordering::SeqCst);
        self.slot.ready.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The `run_id` of a run that is no agent's: when and by which process
/// (the same for both pushes of one command).
pub fn local_run_id() -> String {
    format!("{:x}-{:x}", unix_ms(), std::process::id())
}

/// Now, ms since the Unix epoch.
fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The push thread: one batch at a time, until told to stop.
fn run(config: &Config, slot: &Slot, stats: &Mutex<Stats>, stop: &AtomicBool) {
    let headers: Vec<(String, String)> = config.headers.iter().map(|(n, v)| (n.clone(), v.0.clone())).collect();
    loop {
        let batch = {
            let mut waiting = slot.lock();
            loop {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(b) = waiting.take() {
                    break b;
                }
                // Woken by send() or drop; the timeout only bounds a missed wake-up.
                waiting = slot
                    .ready
                    .wait_timeout(waiting, Duration::from_millis(200))
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g);
            }
        };
        let n = batch.samples();
        let body = config.encoder.encode(&batch);
        let outcome = push(config, &headers, &body, &|| {
            stop.load(Ordering::SeqCst) || slot.has_one()
        });
        let mut s = stats.lock().unwrap_or_else(PoisonError::into_inner);
        if s.pending < n {
            // finished() gave this batch up already: it is counted.
            continue;
        }
        s.pending -= n;
        match outcome {
            Ok(()) => {
                s.record.samples_sent += n;
                s.record.pushes_sent += 1;
            }
            Err(why) => {
                s.record.samples_failed += n;
                s.record.pushes_failed += 1;
                s.record.last_error = Some(redact(&why, &config.headers));
            }
        }
    }
}

/// One batch: tries until accepted, refused for good, out of attempts, or
/// `give_up` says so (a newer batch waits, or the command ends).
fn push(config: &Config, headers: &[(String, String)], body: &[u8], give_up: &dyn Fn() -> bool) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            if give_up() {
                return Err(format!(
                    "{} (not retried: a newer push or the end came first)",
                    last.trim()
                ));
            }
            std::thread::sleep(BACKOFF * 2u32.pow(attempt - 1));
        }
        match http::post(
            &config.endpoint,
            config.encoder.headers(),
            headers,
            body,
            config.timeout,
        ) {
            http::Answer::Status(s, _) if (200..300).contains(&s) => return Ok(()),
            http::Answer::Status(s, reason) if s >= 500 || s == 429 => {
                last = format!("HTTP {s} {reason}");
            }
            // Another status (400: a sample the receiver will never take):
            // retrying would not help.
            http::Answer::Status(s, reason) => return Err(format!("HTTP {s} {reason}")),
            http::Answer::Failed(why) => last = why,
        }
    }
    Err(format!("{} (after {ATTEMPTS} tries)", last.trim()))
}

/// `text` with every header value replaced (a receiver may echo a header).
fn redact(text: &str, headers: &[(String, Secret)]) -> String {
    let mut out = text.to_string();
    for (_, v) in headers {
        if !v.0.is_empty() {
            out = out.replace(&v.0, "<redacted>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(url: &str, headers: &[&str]) -> Result<Config, UsageError> {
        let h: Vec<Secret> = headers.iter().map(|s| Secret((*s).to_string())).collect();
        Config::new(
            Encoder::RemoteWrite,
            url,
            &h,
            Duration::from_secs(5),
            Duration::from_secs(1),
            None,
            None,
            None,
        )
    }

    #[test]
    fn a_header_value_never_shows_in_an_error_or_debug() {
        for bad in [
            "Authorization Bearer s3cr3t",
            "Host: s3cr3t",
            "Bad Name: s3cr3t",
            "X: a\ns3cr3t",
        ] {
            let e = config("http://127.0.0.1:9/api/v1/write", &[bad]).unwrap_err();
            assert!(!e.0.contains("s3cr3t"), "{}", e.0);
            assert!(e.0.starts_with("--remote-write-header (#1)"), "{}", e.0);
        }
        let c = config("http://127.0.0.1:9/w?token=q", &["Authorization: Bearer s3cr3t"]).unwrap();
        assert!(!format!("{c:?}").contains("s3cr3t"));
        assert_eq!(c.shown, "http://127.0.0.1:9/w");
        assert_eq!(c.endpoint.path, "/w?token=q");
        assert_eq!(redact("echo: Bearer s3cr3t!", &c.headers), "echo: <redacted>!");
        let e = config("http://u:pw123@127.0.0.1:9/w", &[]).unwrap_err();
        assert!(!e.0.contains("pw123"), "{}", e.0);
    }

    #[test]
    fn otlp_errors_name_the_otlp_flags() {
        let otlp = |url: &str, headers: &[&str], cacert: Option<&str>| {
            let h: Vec<Secret> = headers.iter().map(|s| Secret((*s).to_string())).collect();
            Config::new(
                Encoder::Otlp,
                url,
                &h,
                Duration::from_secs(5),
                Duration::from_secs(1),
                None,
                None,
                cacert.map(std::path::Path::new),
            )
        };
        let e = otlp("ftp://127.0.0.1:9/v1/metrics", &[], None).unwrap_err().0;
        assert!(e.starts_with("--otlp ftp://") && e.contains("4318/v1/metrics"), "{e}");
        let e = otlp("http://127.0.0.1:9/v1/metrics", &["X s3cr3t"], None)
            .unwrap_err()
            .0;
        assert!(e.starts_with("--otlp-header (#1)") && !e.contains("s3cr3t"), "{e}");
        let e = otlp("https://127.0.0.1:9/v1/metrics", &[], Some("/dev/zero"))
            .unwrap_err()
            .0;
        assert!(e.starts_with("--otlp-cacert /dev/zero"), "{e}");
        let e = otlp("http://u:pw123@127.0.0.1:9/v1/metrics", &[], None).unwrap_err().0;
        assert!(e.contains("--otlp-header") && !e.contains("pw123"), "{e}");
        let c = otlp("http://127.0.0.1:9/v1/metrics", &["Authorization: Bearer x"], None).unwrap();
        assert_eq!(c.encoder, Encoder::Otlp);
        assert_eq!(c.shown, "http://127.0.0.1:9/v1/metrics");
    }

    #[test]
    fn refuses_what_it_cannot_push_to() {
        assert!(config("ftp://127.0.0.1:9/w", &[]).unwrap_err().0.contains("ftp"));
        let https = config("https://127.0.0.1:9/w", &[]).unwrap();
        assert!(https.endpoint.tls.is_some());
        assert_eq!(https.shown, "https://127.0.0.1:9/w");
        let cacert = |url: &str, file: &str| {
            Config::new(
                Encoder::RemoteWrite,
                url,
                &[],
                Duration::from_secs(5),
                Duration::from_secs(1),
                None,
                None,
                Some(std::path::Path::new(file)),
            )
        };
        assert!(
            cacert("http://127.0.0.1:9/w", "/dev/null")
                .unwrap_err()
                .0
                .contains("applies to an https://")
        );
        let zero = cacert("https://127.0.0.1:9/w", "/dev/zero").unwrap_err().0;
        assert!(zero.starts_with("--remote-write-cacert /dev/zero"), "{zero}");
        let empty = cacert("https://127.0.0.1:9/w", "/dev/null").unwrap_err().0;
        assert!(empty.contains("no PEM certificate"), "{empty}");
        assert!(config("not a url", &[]).unwrap_err().0.contains("not a URL"));
    }

    #[test]
    fn a_stalling_receiver_drops_what_the_queue_cannot_hold_and_every_sample_is_counted_once() {
        // Accepted by the kernel, never answered.
        let stall = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/api/v1/write", stall.local_addr().unwrap());
        let c = Config::new(
            Encoder::RemoteWrite,
            &url,
            &[],
            Duration::from_millis(100),
            Duration::from_millis(200),
            None,
            None,
            None,
        )
        .unwrap();
        let p = Pusher::start(c, BTreeMap::new()).unwrap();
        let mut m = Measurements::default();
        m.requests.ok = 5;
        let snapshot = Arc::new(m.clone());
        for _ in 0..12 {
            std::thread::sleep(Duration::from_millis(110));
            p.tick(Some(&snapshot), Gauges::default(), &[]);
        }
        let r = p.finished(&m, &[]);
        let s = p.stats().clone();
        assert_eq!(s.pending, 0);
        assert_eq!(
            r.samples_sent + r.samples_failed + r.samples_dropped,
            s.collected,
            "{r:?}"
        );
        assert!(
            r.samples_dropped > 0 && r.samples_failed > 0 && r.samples_sent == 0,
            "{r:?}"
        );
        assert!(
            r.last_error.as_deref().unwrap_or_default().contains("no answer"),
            "{r:?}"
        );
    }

    #[test]
    fn a_closed_port_counts_every_sample_as_failed() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = config(&format!("http://127.0.0.1:{port}/api/v1/write"), &[]).unwrap();
        let p = Pusher::start(c, BTreeMap::new()).unwrap();
        let mut m = Measurements::default();
        m.requests.ok = 5;
        let r = p.finished(&m, &[]);
        assert!(r.samples_failed > 0, "{r:?}");
        assert_eq!((r.samples_sent, r.samples_dropped, r.pushes_failed), (0, 0, 1), "{r:?}");
        assert!(r.last_error.is_some());
    }
}
