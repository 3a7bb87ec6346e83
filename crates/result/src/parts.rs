//! The parts of a result document besides the measurements: where and
//! when it ran, the generator's own cost, a storm's trigger.

use serde::{Deserialize, Serialize};

/// The machine and limits the run had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name.
    pub hostname: String,
    /// `uname -sr`.
    pub os: String,
    /// Logical cores.
    pub cores: u32,
    /// RLIMIT_NOFILE soft limit during the run (after raising it).
    pub fd_limit_soft: u64,
    /// RLIMIT_NOFILE hard limit.
    pub fd_limit_hard: u64,
}

/// What the run cost the generator itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// User CPU seconds over the run.
    pub cpu_user_s: f64,
    /// System CPU seconds over the run.
    pub cpu_system_s: f64,
    /// Peak resident memory of the process, bytes.
    pub peak_rss_bytes: u64,
    /// Worker threads.
    pub threads: u32,
    /// How response arrivals were timed; absent in results written before
    /// throng said so (they used the user-space clock at the read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<Timestamps>,
    /// The kernel's side of a storm's connections, sampled system-wide while
    /// it ran; absent for other runs and in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSockets>,
    /// A storm's largest proportional set size (PSS) summed over its
    /// processes, sampled while it ran, bytes: pages the processes share
    /// (the program's own) counted once, where `peak_rss_bytes`, a sum of
    /// each process's peak RSS, counts them once per process. Absent for
    /// other runs and in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_pss_bytes: Option<u64>,
    /// How the workers drove their sockets. Always written (the default,
    /// `auto`, depends on the machine); null only for results from before
    /// throng said, and merges of only those.
    #[serde(default)]
    pub io: Option<Io>,
    /// Why epoll ran where `--io auto` would have run io_uring: the kernel
    /// or the process refused the ring (e.g. "io_uring is not permitted
    /// here (EPERM: …)"). Absent when nothing fell back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_fallback: Option<String>,
    /// Why epoll ran under `--io auto` on a machine where io_uring runs:
    /// what the plan asks that the ring does not carry yet (e.g.
    /// "--redirects", "--csv-requests rows"). Absent when the ring ran, the
    /// I/O was forced, or the kernel refused the ring (`io_fallback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_not_carried: Option<String>,
}

/// The I/O that carried a run's sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Io {
    /// tokio's epoll readiness loop.
    Epoll,
    /// One io_uring per worker.
    Uring,
    /// A merge of runs that ran on each.
    Mixed,
}

impl Io {
    /// As a reader names it: "io_uring", "epoll", "mixed".
    pub fn label(&self) -> &'static str {
        match self {
            Io::Epoll => "epoll",
            Io::Uring => "io_uring",
            Io::Mixed => "mixed",
        }
    }

    /// Two parts' I/O as one: the same, or mixed; a part that did not say
    /// takes the other's.
    pub fn merged(a: Option<Io>, b: Option<Io>) -> Option<Io> {
        match (a, b) {
            (None, x) | (x, None) => x,
            (Some(a), Some(b)) if a == b => Some(a),
            _ => Some(Io::Mixed),
        }
    }
}

/// What the kernel held for a storm's sockets: figures of the whole
/// machine (`/proc/net/sockstat` and `/proc/meminfo`), sampled a few times a
/// second while the storm ran. On loopback both ends of a connection count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSockets {
    /// TCP sockets in use when the storm started (sockstat `TCP: inuse`).
    pub tcp_sockets_before: u64,
    /// Most TCP sockets in use at once while it ran.
    pub tcp_sockets_peak: u64,
    /// Most memory in TCP socket buffers at once (sockstat `TCP: mem`,
    /// pages, as bytes): what queued data costs, not the sockets themselves.
    pub tcp_buffer_bytes_peak: u64,
    /// Growth of the kernel's slab memory (meminfo `Slab`) from the start to
    /// the sample with the most sockets: where socket, inode, file and epoll
    /// structures live. Anything else the machine did meanwhile counts too.
    pub slab_growth_bytes: u64,
}

impl KernelSockets {
    /// Sockets added at the peak over the start.
    pub fn added(&self) -> u64 {
        self.tcp_sockets_peak.saturating_sub(self.tcp_sockets_before)
    }

    /// Samples of one machine taken by runs at the same time: the largest
    /// of each figure (adding them would count the machine twice).
    pub fn merged(a: Option<&KernelSockets>, b: Option<&KernelSockets>) -> Option<KernelSockets> {
        match (a, b) {
            (None, x) | (x, None) => x.copied(),
            (Some(a), Some(b)) => Some(KernelSockets {
                tcp_sockets_before: a.tcp_sockets_before.min(b.tcp_sockets_before),
                tcp_sockets_peak: a.tcp_sockets_peak.max(b.tcp_sockets_peak),
                tcp_buffer_bytes_peak: a.tcp_buffer_bytes_peak.max(b.tcp_buffer_bytes_peak),
                slab_growth_bytes: a.slab_growth_bytes.max(b.slab_growth_bytes),
            }),
        }
    }
}

/// Which clocks timed the responses. Sends are always timed just before
/// the system call that writes the request's last bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamps {
    /// The receive clock asked for: `kernel` (the kernel's software receive
    /// timestamp, SO_TIMESTAMPING, read with the data) or `user` (the
    /// monotonic clock when the read returns; THRONG_TIMESTAMPS=user).
    /// `mixed` for a merge of both.
    pub receive: String,
    /// Responses whose arrival came from the kernel's stamp.
    pub kernel: u64,
    /// Responses timed by the user-space clock: asked for, or the fallback
    /// when a read brought no stamp or an implausible one (a clock step).
    pub user: u64,
}

impl Timestamps {
    /// Both clocks' counts added; the receive clock kept when both asked
    /// for the same one.
    pub fn merged(a: Option<&Timestamps>, b: Option<&Timestamps>) -> Option<Timestamps> {
        match (a, b) {
            (None, x) | (x, None) => x.cloned(),
            (Some(a), Some(b)) => Some(Timestamps {
                receive: if a.receive == b.receive {
                    a.receive.clone()
                } else {
                    "mixed".to_string()
                },
                kernel: a.kernel.saturating_add(b.kernel),
                user: a.user.saturating_add(b.user),
            }),
        }
    }
}

/// One run (or one piece of a merged result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// Seconds from the first request's start to the last one's end.
    pub duration_s: f64,
    /// Host it ran on.
    pub hostname: String,
    /// The generator's own cost.
    pub generator: Generator,
}

/// What `--remote-write` or `--otlp` pushed during the run: every sample collected ends
/// as exactly one of sent, failed or dropped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PushRecord {
    /// Where to: scheme, host, port and path (never the query or a header).
    pub endpoint: String,
    /// Samples (a counter's value or a histogram) the receiver accepted.
    pub samples_sent: u64,
    /// Samples in requests the receiver refused or never answered, after retries.
    pub samples_failed: u64,
    /// Samples never sent: replaced by a newer batch before they could go, or the end came first.
    pub samples_dropped: u64,
    /// Requests the receiver accepted.
    pub pushes_sent: u64,
    /// Requests that failed after retries.
    pub pushes_failed: u64,
    /// Why the last failed push failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl PushRecord {
    /// Both records added up (runs of a `--repeat`, segments of one test);
    /// counts saturate rather than wrap.
    pub fn add(&mut self, other: &PushRecord) {
        self.samples_sent = self.samples_sent.saturating_add(other.samples_sent);
        self.samples_failed = self.samples_failed.saturating_add(other.samples_failed);
        self.samples_dropped = self.samples_dropped.saturating_add(other.samples_dropped);
        self.pushes_sent = self.pushes_sent.saturating_add(other.pushes_sent);
        self.pushes_failed = self.pushes_failed.saturating_add(other.pushes_failed);
        if other.last_error.is_some() {
            self.last_error.clone_from(&other.last_error);
        }
    }

    /// One line for the text report, `what` naming the push ("remote
    /// write", "OTLP push"; the endpoint and the error clipped: a file read
    /// back can hold anything).
    pub fn summary(&self, what: &str) -> String {
        let mut line = format!(
            "{what} to {}: {} samples sent, {} failed, {} dropped ({} pushes, {} failed)",
            crate::short(&self.endpoint),
            self.samples_sent,
            self.samples_failed,
            self.samples_dropped,
            self.pushes_sent.saturating_add(self.pushes_failed),
            self.pushes_failed
        );
        if let Some(e) = &self.last_error {
            line.push_str(&format!("; last error: {}", crate::short(e)));
        }
        line
    }
}

/// What happened to a storm's `--trigger` command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TriggerRecord {
    /// The shell command.
    pub command: String,
    /// When it ran, seconds after the run's start (None: it never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fired_at_s: Option<f64>,
    /// How long it took, seconds.
    #[serde(default)]
    pub duration_s: f64,
    /// Its exit status (None: killed by a signal, timed out, or never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of what it printed (stdout and stderr).
    #[serde(default)]
    pub output: String,
    /// Why it did not run or finish, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}
