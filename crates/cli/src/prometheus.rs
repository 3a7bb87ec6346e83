//! `--prometheus ADDR`: a `/metrics` endpoint in the Prometheus/OpenMetrics
//! text format, rendered from the run's merged snapshot.
//!
//! ```text
//!  coordinator tick ─► Exporter::update(snapshot, gauges)   (an Arc swap under a mutex)
//!  scrape ─► server thread ─► render(figures) ─► text       (prometheus-client encodes)
//!  run ends ─► Exporter::finished(measurements)             (the result's exact totals)
//! ```
//!
//! The server is a small blocking loop on its own thread: one connection at a
//! time, each with short read and write timeouts, so a slow scraper can delay
//! only other scrapers, never the run. Rendering happens on that thread too.
//!
//! Histograms are classic ones (fixed `le` buckets, in seconds): the text
//! format prometheus-client writes cannot carry native histograms (it sends
//! those only in its protobuf encoding, which needs code generation at build
//! time), so throng does not offer them.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use throng_metrics::{Hist, Measurements};

use crate::figures::AgentFigures;

/// Upper bounds of the latency buckets, in seconds: 50 µs to 60 s, about
/// 1-2.5-5 per decade (what an HDR histogram at microsecond resolution can
/// say, in the buckets Prometheus users expect).
pub const BUCKETS: [f64; 19] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
];

/// Every metric name `/metrics` may show (after the `throng_` prefix and the
/// OpenMetrics suffixes), for the dashboard test and the guide (docs/guide/src/metrics-reference.md).
#[cfg(test)]
pub const NAMES: &[&str] = &[
    "throng_requests_total",
    "throng_responses_total",
    "throng_connections_total",
    "throng_dropped_total",
    "throng_bytes_sent_total",
    "throng_bytes_received_total",
    "throng_active_connections",
    "throng_vus",
    "throng_running",
    "throng_phase_duration_seconds",
    "throng_phase_duration_seconds_bucket",
    "throng_phase_duration_seconds_sum",
    "throng_phase_duration_seconds_count",
    "throng_iterations_total",
    "throng_dropped_iterations_total",
    "throng_checks_total",
    "throng_step_requests_total",
    "throng_step_response_seconds",
    "throng_step_response_seconds_bucket",
    "throng_step_response_seconds_sum",
    "throng_step_response_seconds_count",
    "throng_custom_total",
    "throng_custom_rate_total",
    "throng_custom_gauge",
    "throng_custom_trend",
    "throng_custom_trend_values_total",
];

/// What `/metrics` shows: everything measured so far plus the figures that
/// are gauges.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Runs that ended (with `--repeat`), added up: counters continue across
    /// runs instead of starting over.
    pub before: Measurements,
    /// The current run so far (None between runs).
    pub current: Option<Arc<Measurements>>,
    /// Connections open now.
    pub active_connections: u64,
    /// VUs active now (scenario runs).
    pub vus: u64,
    /// True while a run lasts.
    pub running: bool,
    /// The scenario of each step name (scenario runs), for the `scenario`
    /// label of step series.
    pub step_scenarios: Arc<BTreeMap<String, String>>,
    /// Each agent's own figures (`throng coordinate --per-agent`), shown
    /// beside the merged ones under an `agent` label.
    pub agents: Vec<AgentFigures>,
}

/// Renders `figures` in the OpenMetrics text format.
pub fn render(figures: &Figures) -> String {
    let mut registry = Registry::with_prefix("throng");
    registry.register_collector(Box::new(Snapshot(figures.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail; an error would be an encoder bug,
    // and then an empty page is the honest answer.
    if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
        out.clear();
    }
    out
}

#[derive(Debug)]
struct Snapshot(Figures);

/// A counter or gauge with a value, as prometheus-client's encoders want one.
struct Value(MetricType, u64);

impl prometheus_client::encoding::EncodeMetric for Value {
    fn encode(&self, mut e: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            MetricType::Counter => e.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&self.1, None),
            _ => e.encode_gauge(&(i64::try_from(self.1).unwrap_or(i64::MAX))),
        }
    }
    fn metric_type(&self) -> MetricType {
        self.0
    }
}

/// A value that need not be whole (a custom metric's).
struct Real(MetricType, f64);

impl prometheus_client::encoding::EncodeMetric for Real {
    fn encode(&self, mut e: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            MetricType::Counter => e.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&self.1, None),
            _ => e.encode_gauge(&self.1),
        }
    }
    fn metric_type(&self) -> MetricType {
        self.0
    }
}

/// A histogram read from an HDR histogram in microseconds.
struct Histo<'a>(&'a Hist);

impl prometheus_client::encoding::EncodeMetric for Histo<'_> {
    fn encode(&self, mut e: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = classic(self.0);
        e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, count, &buckets, None)
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Sum (seconds), count and per-bucket counts (not cumulative; the last is
/// +Inf) of an HDR histogram in microseconds. The count is exact; a bucket's
/// edge is as exact as the HDR histogram (3 significant digits), the sum is
/// mean × count.
pub fn classic(h: &Hist) -> (f64, u64, Vec<(f64, u64)>) {
    let inner = h.inner();
    let mut buckets = Vec::with_capacity(BUCKETS.len() + 1);
    let mut below = 0u64;
    for &le in &BUCKETS {
        let us = (le * 1e6).round() as u64;
        let upto = if h.is_empty() {
            0
        } else {
            inner.count_between(0, us).min(h.count())
        };
        buckets.push((le, upto.saturating_sub(below)));
        below = below.max(upto);
    }
    buckets.push((f64::INFINITY, h.count().saturating_sub(below)));
    let sum = if h.is_empty() {
        0.0
    } else {
        h.mean() * h.count() as f64 / 1e6
    };
    (sum, h.count(), buckets)
}

/// Label values without the characters the text format would need escaped.
fn clean(v: &str) -> String {
    v.chars()
        .map(|c| if matches!(c, '"' | '\\' | '\n') { '_' } else { c })
        .collect()
}

fn family<M: prometheus_client::encoding::EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    ty: MetricType,
    series: &[(Vec<(&str, String)>, M)],
) -> Result<(), std::fmt::Error> {
    let mut e = enc.encode_descriptor(name, help, unit, ty)?;
    if let [(labels, m)] = series
        && labels.is_empty()
    {
        return m.encode(e);
    }
    for (labels, m) in series {
        m.encode(e.encode_family(labels)?)?;
    }
    Ok(())
}

/// One set of figures a family shows: the merged ones (no `agent` label),
/// or one agent's (`throng coordinate --per-agent`).
struct View<'a> {
    agent: Option<&'a str>,
    m: &'a Measurements,
    active_connections: u64,
    vus: u64,
    running: bool,
}

impl View<'_> {
    /// `labels`, after this view's `agent` label when it has one.
    fn labels(&self, labels: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
        match self.agent {
            Some(a) => std::iter::once(("agent", clean(a))).chain(labels).collect(),
            None => labels,
        }
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let f = &self.0;
        let mut m = f.before.clone();
        if let Some(c) = &f.current {
            // Adding up is exact for counters and histograms; a failure
            // (histograms of different shapes) cannot happen between
            // throng's own recorders.
            let _ = m.merge(c, Duration::ZERO);
        }
        let views: Vec<View> = std::iter::once(View {
            agent: None,
            m: &m,
            active_connections: f.active_connections,
            vus: f.vus,
            running: f.running,
        })
        .chain(f.agents.iter().map(|a| View {
            agent: Some(&a.agent),
            m: &a.measurements,
            active_connections: a.open_connections,
            vus: a.vus,
            running: a.running,
        }))
        .collect();

        encode_outcomes(&mut enc, &views)?;
        encode_totals(&mut enc, &views)?;
        encode_phases(&mut enc, &views)?;
        // An http run with several targets: their figures, under target:NAME tags.
        if m.scenario
            .as_ref()
            .is_some_and(|s| s.tags.keys().any(|k| k.starts_with("target:")))
        {
            encode_targets(&mut enc, &views)?;
        } else if m.scenario.is_some() {
            encode_scenario(&mut enc, &f.step_scenarios, &views)?;
        }
        if m.scenario.is_some() {
            encode_custom(&mut enc, &views)?;
        }
        Ok(())
    }
}

/// Requests and connections by outcome, responses by status class.
fn encode_outcomes(enc: &mut DescriptorEncoder, views: &[View]) -> Result<(), std::fmt::Error> {
    let counter = |n: u64| Value(MetricType::Counter, n);
    let mut requests = Vec::new();
    let mut responses = Vec::new();
    let mut conns = Vec::new();
    for v in views {
        let m = v.m;
        requests.push((v.labels(vec![("outcome", "ok".to_string())]), counter(m.requests.ok)));
        for (class, &n) in &m.requests.errors {
            requests.push((v.labels(vec![("outcome", clean(class))]), counter(n)));
        }
        let names = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];
        for (&n, c) in m.status_classes().iter().zip(names) {
            responses.push((v.labels(vec![("class", c.to_string())]), counter(n)));
        }
        conns.push((v.labels(vec![("outcome", "ok".to_string())]), counter(m.connections.ok)));
        for (class, &n) in &m.connections.errors {
            conns.push((v.labels(vec![("outcome", clean(class))]), counter(n)));
        }
    }
    family(
        enc,
        "requests",
        "Requests that ended, by outcome (ok or an error class).",
        None,
        MetricType::Counter,
        &requests,
    )?;
    family(
        enc,
        "responses",
        "Responses by status class.",
        None,
        MetricType::Counter,
        &responses,
    )?;
    family(
        enc,
        "connections",
        "Connection attempts that ended, by outcome (ok: established).",
        None,
        MetricType::Counter,
        &conns,
    )?;
    Ok(())
}

/// A family of one value per view: its name, help, type, and the value.
type Total<'a> = (&'a str, &'a str, MetricType, &'a dyn Fn(&View) -> u64);

/// Dropped arrivals, bytes, and the gauges: open connections, VUs, running.
fn encode_totals(enc: &mut DescriptorEncoder, views: &[View]) -> Result<(), std::fmt::Error> {
    let each = |ty: MetricType, value: &dyn Fn(&View) -> u64| -> Vec<(Vec<(&'static str, String)>, Value)> {
        views.iter().map(|v| (v.labels(vec![]), Value(ty, value(v)))).collect()
    };
    let families: [Total; 6] = [
        (
            "dropped",
            "Arrivals the schedule could not start (open loop: no connection free).",
            MetricType::Counter,
            &|v| v.m.dropped,
        ),
        (
            "bytes_sent",
            "Bytes written to the target.",
            MetricType::Counter,
            &|v| v.m.bytes.sent,
        ),
        (
            "bytes_received",
            "Bytes read from the target.",
            MetricType::Counter,
            &|v| v.m.bytes.received,
        ),
        ("active_connections", "Connections open now.", MetricType::Gauge, &|v| {
            v.active_connections
        }),
        (
            "vus",
            "Virtual users active now (scenario runs).",
            MetricType::Gauge,
            &|v| v.vus,
        ),
        (
            "running",
            "1 while a run lasts, 0 before and after.",
            MetricType::Gauge,
            &|v| u64::from(v.running),
        ),
    ];
    for (name, help, ty, value) in families {
        family(enc, name, help, None, ty, &each(ty, value))?;
    }
    Ok(())
}

/// Every phase as a histogram.
fn encode_phases(enc: &mut DescriptorEncoder, views: &[View]) -> Result<(), std::fmt::Error> {
    let phases: Vec<_> = views
        .iter()
        .flat_map(|v| {
            v.m.phases
                .iter()
                .map(|(name, h)| (v.labels(vec![("phase", clean(name))]), Histo(h)))
        })
        .collect();
    family(
        enc,
        "phase_duration",
        "Time spent in each phase (connect, tls, wait, response, latency, ...).",
        Some(&Unit::Seconds),
        MetricType::Histogram,
        &phases,
    )?;
    Ok(())
}

/// An http run's targets: requests by result and response time.
fn encode_targets(enc: &mut DescriptorEncoder, views: &[View]) -> Result<(), std::fmt::Error> {
    let counter = |n: u64| Value(MetricType::Counter, n);
    let mut requests = Vec::new();
    let mut hists = Vec::new();
    for v in views {
        let Some(s) = &v.m.scenario else { continue };
        for (key, t) in &s.tags {
            let Some(target) = key.strip_prefix("target:") else {
                continue;
            };
            let labels = |result: &str| v.labels(vec![("target", clean(target)), ("result", result.to_string())]);
            requests.push((labels("ok"), counter(t.requests.saturating_sub(t.failed))));
            requests.push((labels("failed"), counter(t.failed)));
            requests.push((labels("interrupted"), counter(t.interrupted)));
            hists.push((v.labels(vec![("target", clean(target))]), Histo(&t.response)));
        }
    }
    family(
        enc,
        "target_requests",
        "Requests of each target of an http run, by result (failed: an error or an unexpected status).",
        None,
        MetricType::Counter,
        &requests,
    )?;
    family(
        enc,
        "target_response",
        "Response time of each target (first request byte to last response byte).",
        Some(&Unit::Seconds),
        MetricType::Histogram,
        &hists,
    )?;
    Ok(())
}

/// A scenario file's custom metrics: the series a push carries
/// ([`crate::custom_series::custom`]), under the same names.
fn encode_custom(enc: &mut DescriptorEncoder, views: &[View]) -> Result<(), std::fmt::Error> {
    let series: Vec<(&View, crate::custom_series::CustomSeries)> = views
        .iter()
        .flat_map(|v| {
            v.m.scenario
                .iter()
                .flat_map(move |s| crate::custom_series::custom(s).into_iter().map(move |c| (v, c)))
        })
        .collect();
    for (name, help) in [
        ("custom_total", "A custom counter's sum, by metric (and tags)."),
        (
            "custom_rate_total",
            "A custom rate's additions, by metric and result (true or false).",
        ),
        (
            "custom_gauge",
            "A custom gauge's last, smallest and largest value, by metric and stat.",
        ),
        (
            "custom_trend",
            "A custom trend's values at quantiles 0.5, 0.9, 0.95, 0.99 and 1 (the largest).",
        ),
        ("custom_trend_values_total", "Values added to a custom trend."),
    ] {
        let full = format!("throng_{name}");
        let values: Vec<(Vec<(&str, String)>, Real)> = series
            .iter()
            .filter(|(_, x)| x.name == full)
            .map(|(v, x)| {
                let ty = if x.counter {
                    MetricType::Counter
                } else {
                    MetricType::Gauge
                };
                (
                    v.labels(x.labels.iter().map(|(k, v)| (*k, clean(v))).collect()),
                    Real(ty, x.value),
                )
            })
            .collect();
        let Some(ty) = values.first().map(|(_, r)| r.0) else {
            continue;
        };
        // The text format adds _total to a counter's name itself.
        let name = name.strip_suffix("_total").unwrap_or(name);
        family(enc, name, help, None, ty, &values)?;
    }
    Ok(())
}

/// A scenario run's iterations, checks, and each step's requests and response time.
fn encode_scenario(
    enc: &mut DescriptorEncoder,
    step_scenarios: &BTreeMap<String, String>,
    views: &[View],
) -> Result<(), std::fmt::Error> {
    let counter = |n: u64| Value(MetricType::Counter, n);
    let mut iterations = Vec::new();
    let mut dropped = Vec::new();
    let mut checks = Vec::new();
    let mut steps = Vec::new();
    let mut step_hists = Vec::new();
    for v in views {
        let Some(s) = &v.m.scenario else { continue };
        iterations.push((v.labels(vec![]), counter(s.iterations)));
        dropped.push((v.labels(vec![]), counter(s.dropped_iterations)));
        for (name, c) in &s.checks {
            for (result, n) in [("pass", c.passes), ("fail", c.fails)] {
                checks.push((
                    v.labels(vec![("check", clean(name)), ("result", result.into())]),
                    counter(n),
                ));
            }
        }
        for (key, t) in &s.tags {
            let Some(step) = key.strip_prefix("step:") else {
                continue;
            };
            let scenario = step_scenarios.get(step).cloned().unwrap_or_default();
            let labels = |result: &str| {
                v.labels(vec![
                    ("scenario", clean(&scenario)),
                    ("step", clean(step)),
                    ("result", result.to_string()),
                ])
            };
            steps.push((labels("ok"), counter(t.requests.saturating_sub(t.failed))));
            steps.push((labels("failed"), counter(t.failed)));
            steps.push((labels("interrupted"), counter(t.interrupted)));
            step_hists.push((
                v.labels(vec![("scenario", clean(&scenario)), ("step", clean(step))]),
                Histo(&t.response),
            ));
        }
    }
    family(
        enc,
        "iterations",
        "Scenario iterations that ended.",
        None,
        MetricType::Counter,
        &iterations,
    )?;
    family(
        enc,
        "dropped_iterations",
        "Scenario iterations the schedule could not start.",
        None,
        MetricType::Counter,
        &dropped,
    )?;
    family(enc, "checks", "Checks by result.", None, MetricType::Counter, &checks)?;
    family(
        enc,
        "step_requests",
        "Requests of each scenario step, by result (failed: an error or an unexpected status).",
        None,
        MetricType::Counter,
        &steps,
    )?;
    family(
        enc,
        "step_response",
        "Response time of each scenario step (first request byte to last response byte).",
        Some(&Unit::Seconds),
        MetricType::Histogram,
        &step_hists,
    )?;
    Ok(())
}

/// The endpoint: figures the coordinator updates, a thread that serves
/// them. Stops serving when dropped.
pub struct Exporter {
    figures: Arc<Mutex<Figures>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long a scrape may take to send its request or read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the server checks whether it should stop.
const POLL: Duration = Duration::from_millis(20);

impl Exporter {
    /// Listens on `addr` and serves `/metrics` from a thread of its own.
    pub fn start(addr: SocketAddr, step_scenarios: BTreeMap<String, String>) -> std::io::Result<Exporter> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let figures = Arc::new(Mutex::new(Figures {
            step_scenarios: Arc::new(step_scenarios),
            ..Figures::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let figures = Arc::clone(&figures);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("throng-prometheus".into())
                .spawn(move || serve(&listener, &figures, &stop))?
        };
        Ok(Exporter {
            figures,
            stop,
            thread: Some(thread),
        })
    }

    /// A tick of the current run: the latest merged snapshot and gauges,
    /// and each agent's own figures (none unless `--per-agent`).
    pub fn update(
        &self,
        snapshot: Option<&Arc<Measurements>>,
        active_connections: u64,
        vus: u64,
        agents: &[AgentFigures],
    ) {
        if let Ok(mut f) = self.figures.lock() {
            f.agents = agents.to_vec();
            if let Some(s) = snapshot {
                f.current = Some(Arc::clone(s));
            }
            f.active_connections = active_connections;
            f.vus = vus;
            f.running = true;
        }
    }

    /// A run ended with these measurements (the result's): from now on the
    /// counters are exactly its totals (added to earlier runs'), and each
    /// agent's those of its result.
    pub fn finished(&self, m: &Measurements, agents: &[AgentFigures]) {
        // The series are never shown: leave them out of what every scrape copies.
        let mut m = m.clone();
        m.series.clear();
        if let Some(s) = m.scenario.as_mut() {
            s.series.clear();
            for t in s.tags.values_mut() {
                t.series.clear();
            }
        }
        if let Ok(mut f) = self.figures.lock() {
            let _ = f.before.merge(&m, Duration::ZERO);
            f.current = None;
            f.active_connections = 0;
            f.vus = 0;
            f.running = false;
            f.agents = agents.to_vec();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, figures: &Mutex<Figures>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                // A scraper that misbehaves gets no answer; nothing to report.
                let _ = answer(stream, figures);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Reads one request head and answers it; closes the connection after.
fn answer(mut stream: TcpStream, figures: &Mutex<Figures>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 || head.len() > 16 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, kind, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let f = figures.lock().map(|f| f.clone()).unwrap_or_default();
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                render(&f),
            )
        }
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "throng: metrics at /metrics\n".into(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found; try /metrics\n".into(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "GET /metrics\n".into(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn figures() -> Figures {
        let mut m = Measurements::default();
        m.requests.attempted = 12;
        m.requests.ok = 10;
        m.requests.errors.insert("timeout.response".into(), 2);
        m.status.insert(200, 9);
        m.status.insert(503, 1);
        let mut h = Hist::new();
        for us in [80, 300, 2_000, 2_000_000] {
            h.record_us(us);
        }
        m.phases.insert("response".into(), h.clone());
        let mut sc = throng_metrics::ScenarioStats::default();
        sc.tags.insert(
            "step:login".into(),
            throng_metrics::TagStats {
                requests: 4,
                failed: 1,
                response: h,
                ..Default::default()
            },
        );
        sc.checks
            .insert("is 200".into(), throng_metrics::CheckCount { passes: 3, fails: 1 });
        m.scenario = Some(sc);
        Figures {
            current: Some(Arc::new(m)),
            active_connections: 3,
            running: true,
            ..Figures::default()
        }
    }

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let text = render(&figures());
        assert!(text.contains("throng_requests_total{outcome=\"ok\"} 10\n"), "{text}");
        assert!(
            text.contains("throng_requests_total{outcome=\"timeout.response\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("throng_responses_total{class=\"2xx\"} 9\n"), "{text}");
        assert!(text.contains("throng_responses_total{class=\"5xx\"} 1\n"), "{text}");
        assert!(text.contains("throng_active_connections 3\n"), "{text}");
        assert!(
            text.contains("throng_phase_duration_seconds_count{phase=\"response\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("throng_phase_duration_seconds_bucket{le=\"0.0001\",phase=\"response\"} 1\n")
                || text.contains("throng_phase_duration_seconds_bucket{phase=\"response\",le=\"0.0001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("throng_step_requests_total{scenario=\"\",step=\"login\",result=\"ok\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("throng_checks_total{check=\"is 200\",result=\"fail\"} 1\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn each_agent_is_shown_beside_the_merged_figures_under_its_label() {
        let mut f = figures();
        let one = f.current.clone().unwrap();
        f.agents = ["1 127.0.0.1:7001", "2 127.0.0.1:7002"]
            .map(|agent| AgentFigures {
                agent: agent.into(),
                measurements: Arc::clone(&one),
                open_connections: 1,
                vus: 0,
                running: true,
            })
            .to_vec();
        let text = render(&f);
        assert!(text.contains("throng_requests_total{outcome=\"ok\"} 10\n"), "{text}");
        for agent in ["1 127.0.0.1:7001", "2 127.0.0.1:7002"] {
            for line in [
                format!("throng_requests_total{{agent=\"{agent}\",outcome=\"ok\"}} 10\n"),
                format!("throng_active_connections{{agent=\"{agent}\"}} 1\n"),
                format!("throng_phase_duration_seconds_count{{agent=\"{agent}\",phase=\"response\"}} 4\n"),
                format!(
                    "throng_step_requests_total{{agent=\"{agent}\",scenario=\"\",step=\"login\",result=\"ok\"}} 3\n"
                ),
            ] {
                assert!(text.contains(&line), "{line} not in {text}");
            }
        }
        // One family each: a name's TYPE line is never repeated.
        let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut unique = types.clone();
        unique.dedup();
        assert_eq!(types.len(), unique.len(), "{text}");
        assert!(
            text.contains("throng_active_connections 3\n") || text.contains("throng_active_connections{} 3\n"),
            "{text}"
        );
    }

    #[test]
    fn every_name_rendered_is_listed() {
        let text = render(&figures());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(NAMES.contains(&name), "{name} is not in NAMES");
        }
    }

    /// Metric names in a PromQL expression: identifiers starting `throng_`.
    fn metric_names(expr: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        for c in expr.chars().chain([' ']) {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                word.push(c);
            } else {
                if word.starts_with("throng_") {
                    out.push(std::mem::take(&mut word));
                }
                word.clear();
            }
        }
        out
    }

    #[test]
    fn the_dashboard_asks_only_for_metrics_throng_exports() {
        check_dashboard("throng.json", NAMES);
    }

    /// Checks a Grafana dashboard in dashboards/: its data source is an
    /// input, every query reads only metrics in `names`, and the guide's
    /// reference describes every name.
    pub(crate) fn check_dashboard(file: &str, names: &[&str]) {
        let path = format!("{}/../../dashboards/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).unwrap();
        let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(dash["__inputs"][0]["name"], "DS_PROMETHEUS");
        let mut exprs = Vec::new();
        for p in dash["panels"].as_array().unwrap() {
            if p["type"] == "row" {
                continue;
            }
            assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
            for t in p["targets"].as_array().unwrap() {
                exprs.push(t["expr"].as_str().unwrap().to_string());
            }
        }
        for v in dash["templating"]["list"].as_array().unwrap() {
            exprs.push(v["query"]["query"].as_str().unwrap().to_string());
        }
        assert!(exprs.len() >= 10, "{exprs:?}");
        for e in &exprs {
            let found = metric_names(e);
            assert!(!found.is_empty(), "{file}: {e} reads no throng metric");
            for n in found {
                assert!(names.contains(&n.as_str()), "{file}: {e}: throng does not export {n}");
            }
        }
        // Every family is documented.
        let docs = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/guide/src/metrics-reference.md"
        ))
        .unwrap();
        for n in names
            .iter()
            .filter(|n| !n.ends_with("_bucket") && !n.ends_with("_sum") && !n.ends_with("_count"))
        {
            assert!(
                docs.contains(&format!("`{n}`")),
                "docs/guide/src/metrics-reference.md does not describe {n}"
            );
        }
    }

    #[test]
    fn buckets_add_up_to_the_count() {
        let mut h = Hist::new();
        for us in 1..5_000u64 {
            h.record_us(us * 37);
        }
        let (_, count, buckets) = classic(&h);
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), count);
        assert_eq!(buckets.len(), BUCKETS.len() + 1);
    }

    #[test]
    fn finished_runs_add_up() {
        let f = figures();
        let exporter_like = {
            let mut g = f.clone();
            g.before.merge(f.current.as_deref().unwrap(), Duration::ZERO).unwrap();
            g
        };
        let text = render(&exporter_like);
        assert!(text.contains("throng_requests_total{outcome=\"ok\"} 20\n"), "{text}");
    }
}
