//! Resource requests for one agent, from what the plan asks of it.
//!
//! The rule (docs/distributed.md repeats it):
//!
//! - **Memory**: 64 MiB for the process (runtime, per-worker buffers,
//!   histograms and per-second series), plus, for the agent's share of the
//!   peak of open connections or VUs, twice the per-unit figure measured in
//!   docs/PERFORMANCE.md ([`PerOpen`]), rounded up to a whole MiB.
//! - **CPU**: with a rate (open loop), the agent's share of the peak rate
//!   divided by half the work per CPU-second measured in
//!   docs/PERFORMANCE.md ([`Work`]); without one (closed loop: it sends as
//!   fast as its CPU allows) [`CLOSED_LOOP_CORES`]. Rounded up to whole
//!   cores, at least one, so that the static CPU manager can give the pod
//!   whole cores and throng runs one worker per core.
//! - Limits equal requests (the Guaranteed QoS class: the pod is the last to
//!   be evicted, and its CPU is not shared when the node pins cores).

/// Memory every agent needs before its connections, MiB.
pub const BASE_MIB: u64 = 64;
/// Cores for a closed-loop agent (it uses whatever it gets; `--cpu` to set).
pub const CLOSED_LOOP_CORES: u32 = 2;
/// Headroom over the measured figures.
pub const HEADROOM: f64 = 2.0;

/// What one open connection or VU costs in memory, measured in
/// docs/PERFORMANCE.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PerOpen {
    /// A plain TCP connection: 1.79 KB measured (15,000 keep-alive connections).
    Connection,
    /// A held TLS connection after its handshake (storms): 2.61 KB measured.
    HeldTls,
    /// A TLS connection carrying requests, with its session state: 10.6 KB measured.
    LiveTls,
    /// A scenario VU with its connection: 3.12 KB measured (plain).
    Vu,
    /// A scenario VU with a TLS connection: 0.93 KB beyond a live TLS connection.
    TlsVu,
}

impl PerOpen {
    /// Measured bytes per unit.
    pub fn measured_bytes(self) -> u64 {
        match self {
            PerOpen::Connection => 1_790,
            PerOpen::HeldTls => 2_610,
            PerOpen::LiveTls => 10_600,
            PerOpen::Vu => 3_120,
            PerOpen::TlsVu => 11_530,
        }
    }
}

/// What one unit of the rate costs in CPU, measured in docs/PERFORMANCE.md.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Work {
    /// Keep-alive requests: 145K per CPU-second measured.
    KeepAliveRequest,
    /// A new TCP connection per request (or per storm connection): 21.5K per CPU-second.
    NewConnection,
    /// A verified TLS 1.3 full handshake per connection: 3.9K per CPU-second.
    TlsHandshake,
    /// A scenario iteration of this many requests (keep-alive).
    Iteration(u32),
}

impl Work {
    /// Measured units per CPU-second.
    pub fn measured_per_cpu_second(self) -> f64 {
        match self {
            Work::KeepAliveRequest => 145_000.0,
            Work::NewConnection => 21_500.0,
            Work::TlsHandshake => 3_900.0,
            Work::Iteration(requests) => 140_000.0 / f64::from(requests.max(1)),
        }
    }
}

/// What the whole plan asks for at its peak (all agents together).
#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    /// Connections (or VUs) open at once at the peak.
    pub open: u64,
    /// What each of them costs.
    pub per_open: PerOpen,
    /// Units started per second at the peak (open loop); `None` for a closed loop.
    pub rate: Option<f64>,
    /// What each unit of the rate costs.
    pub work: Work,
}

/// One agent's resources, and how they were reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// CPU, a Kubernetes quantity (`2`, `500m`).
    pub cpu: String,
    /// Memory, a Kubernetes quantity (`96Mi`).
    pub memory: String,
    /// One line per figure: where it came from.
    pub why: Vec<String>,
}

/// Sizes one of `agents` agents for `load`.
pub fn size(load: &Load, agents: u32) -> Sizing {
    let n = u64::from(agents.max(1));
    let open = load.open.div_ceil(n);
    let per = (load.per_open.measured_bytes() as f64 * HEADROOM).ceil() as u64;
    let memory_mib = BASE_MIB + (open * per).div_ceil(1 << 20);
    let mut why = vec![format!(
        "memory {memory_mib}Mi = {BASE_MIB}Mi + {open} open per agent x {per} B ({:?}: {} B measured, x{HEADROOM})",
        load.per_open,
        load.per_open.measured_bytes()
    )];
    let cores = match load.rate {
        Some(rate) => {
            let share = rate / n as f64;
            let per_core = load.work.measured_per_cpu_second() / HEADROOM;
            let cores = ((share / per_core).ceil() as u32).max(1);
            why.push(format!(
                "cpu {cores} = {share:.1}/s per agent / {per_core:.0}/s per core ({:?}: {:.0} per CPU-second measured, /{HEADROOM}), whole cores",
                load.work,
                load.work.measured_per_cpu_second()
            ));
            cores
        }
        None => {
            why.push(format!(
                "cpu {CLOSED_LOOP_CORES}: a closed loop sends as fast as its CPU allows; set --cpu to choose"
            ));
            CLOSED_LOOP_CORES
        }
    };
    Sizing {
        cpu: cores.to_string(),
        memory: format!("{memory_mib}Mi"),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_follows_the_share_of_connections() {
        let load = Load {
            open: 400_000,
            per_open: PerOpen::Connection,
            rate: None,
            work: Work::KeepAliveRequest,
        };
        let s = size(&load, 4);
        // 100,000 x 3580 B = 341.4 MiB -> 342 + 64.
        assert_eq!(s.memory, "406Mi");
        assert_eq!(s.cpu, "2");
    }

    #[test]
    fn cpu_follows_the_share_of_the_rate() {
        let load = Load {
            open: 1000,
            per_open: PerOpen::Connection,
            rate: Some(400_000.0),
            work: Work::KeepAliveRequest,
        };
        // 100,000/s per agent at 72,500/s per core -> 2 cores.
        assert_eq!(size(&load, 4).cpu, "2");
        let tls = Load {
            rate: Some(10_000.0),
            work: Work::TlsHandshake,
            ..load
        };
        // 1000/s per agent at 1950/s per core -> 1 core (at least one).
        assert_eq!(size(&tls, 10).cpu, "1");
        assert_eq!(size(&tls, 1).cpu, "6");
    }
}
