//! The figures a sweep tabulates, read off each cell's result.

use throng_result::RunResult;

/// One column of a sweep's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Figure {
    /// Connections established.
    Established,
    /// Failed connections and requests.
    Failures,
    /// First attempt → last established (ms).
    TotalConnectTime,
    /// First drop → last re-established (ms).
    TotalReconnectTime,
    /// The clients' reconnect time: server accepting again → last
    /// re-established (ms).
    ClientReconnectTime,
    /// Handshakes in which the server spoke before the PONG of CONNECT.
    OutOfTurn,
    /// Ended requests per second.
    RequestsPerSecond,
    /// Established connections per second.
    ConnectionsPerSecond,
    /// A phase's statistic (ms): `connect.p99`, `handshake.p50`, `latency.mean`.
    Phase(String, Stat),
}

/// A histogram statistic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// Smallest.
    Min,
    /// Mean.
    Mean,
    /// A percentile, in tenths (p99.9 → 999).
    P(u32),
    /// Largest.
    Max,
}

const PHASES: [&str; 22] = [
    "schedule_lag",
    "connect",
    "tls",
    "send",
    "wait",
    "receive",
    "response",
    "latency",
    "connection",
    "handshake",
    "upgrade",
    "reconnect",
    "pong",
    "first_message",
    "last_message",
    "message_gap",
    "subscribe",
    "first_event",
    "event_gap",
    "stream",
    "ttft",
    "itl",
];

impl Figure {
    /// Parses a figure name.
    pub fn parse(text: &str) -> Result<Figure, String> {
        Ok(match text.trim() {
            "established" => Figure::Established,
            "failures" => Figure::Failures,
            "total_connect_time" => Figure::TotalConnectTime,
            "total_reconnect_time" => Figure::TotalReconnectTime,
            "client_reconnect_time" => Figure::ClientReconnectTime,
            "out_of_turn" => Figure::OutOfTurn,
            "requests_per_second" => Figure::RequestsPerSecond,
            "connections_per_second" => Figure::ConnectionsPerSecond,
            other => {
                let bad = || {
                    format!(
                        "'{other}' is not a figure; use established, failures, total_connect_time, \
                         total_reconnect_time, client_reconnect_time, out_of_turn, requests_per_second, connections_per_second, or PHASE.STAT \
                         (phases: {}; stats: min, mean, p50, p90, p95, p99, p999, max)",
                        PHASES.join(", ")
                    )
                };
                let (phase, stat) = other.split_once('.').ok_or_else(bad)?;
                if !PHASES.contains(&phase) {
                    return Err(bad());
                }
                let stat = match stat {
                    "min" => Stat::Min,
                    "mean" | "avg" => Stat::Mean,
                    "max" => Stat::Max,
                    "p999" => Stat::P(999),
                    p => Stat::P(
                        p.strip_prefix('p')
                            .and_then(|n| n.parse::<u32>().ok())
                            .filter(|n| *n <= 100)
                            .ok_or_else(bad)?
                            * 10,
                    ),
                };
                Figure::Phase(phase.to_string(), stat)
            }
        })
    }

    /// The column header.
    pub fn header(&self) -> String {
        match self {
            Figure::Established => "established".into(),
            Figure::Failures => "failures".into(),
            Figure::TotalConnectTime => "total connect (ms)".into(),
            Figure::TotalReconnectTime => "total reconnect (ms)".into(),
            Figure::ClientReconnectTime => "clients' reconnect (ms)".into(),
            Figure::OutOfTurn => "out of turn".into(),
            Figure::RequestsPerSecond => "requests/s".into(),
            Figure::ConnectionsPerSecond => "connections/s".into(),
            Figure::Phase(p, s) => format!(
                "{p} {} (ms)",
                match s {
                    Stat::Min => "min".to_string(),
                    Stat::Mean => "mean".to_string(),
                    Stat::Max => "max".to_string(),
                    Stat::P(999) => "p99.9".to_string(),
                    Stat::P(n) => format!("p{}", n / 10),
                }
            ),
        }
    }

    /// The figure's value in a result (None when it does not apply, e.g. no
    /// reconnects happened).
    pub fn value(&self, r: &RunResult) -> Option<f64> {
        let m = &r.measurements;
        let ms = |us: u64| us as f64 / 1000.0;
        match self {
            Figure::Established => Some(m.connections.ok as f64),
            // Planned connections that failed, dropped ones that never came
            // back, and failed requests (retries that later succeeded are
            // not failures).
            Figure::Failures => {
                Some((m.connections.failed() + m.reconnect_gave_up.values().sum::<u64>() + m.requests.failed()) as f64)
            }
            Figure::TotalConnectTime => m.total_connect_time().map(|d| d.as_secs_f64() * 1000.0),
            Figure::TotalReconnectTime => m.total_reconnect_time().map(|d| d.as_secs_f64() * 1000.0),
            Figure::ClientReconnectTime => m.client_reconnect_time().map(|d| d.as_secs_f64() * 1000.0),
            Figure::OutOfTurn => Some(m.out_of_turn_total() as f64),
            Figure::RequestsPerSecond => Some(r.requests_per_second()),
            Figure::ConnectionsPerSecond => Some(throng_result::per_second(m.connections.ok, r.duration_s)),
            Figure::Phase(p, s) => {
                let h = m.phase(p)?;
                Some(match s {
                    Stat::Min => ms(h.min()),
                    Stat::Mean => h.mean() / 1000.0,
                    Stat::Max => ms(h.max()),
                    Stat::P(n) => ms(h.quantile(f64::from(*n) / 1000.0)),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_figures_parse() {
        assert_eq!(Figure::parse("out_of_turn").unwrap(), Figure::OutOfTurn);
        assert_eq!(
            Figure::parse("client_reconnect_time").unwrap(),
            Figure::ClientReconnectTime
        );
        assert_eq!(Figure::ClientReconnectTime.header(), "clients' reconnect (ms)");
        assert!(Figure::parse("nope").unwrap_err().contains("client_reconnect_time"));
    }
}
