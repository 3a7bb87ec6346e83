//! What a worker is given to run: the target, the request, and its share
//! of the load in one of four shapes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use throng_plan::{Arrivals, StatusSet, StormStarts};
use throng_scenario::ScenarioPlan;

use crate::transport::TlsClient;

/// How a worker's load is shaped.
#[derive(Clone, Debug)]
pub(crate) enum WorkerLoad {
    /// `connections` tasks, each looping request after request; `budget`
    /// requests in all (None: until stopped).
    Closed {
        connections: u64,
        budget: Option<u64>,
        until: Option<Instant>,
    },
    /// Requests start on `arrivals`; up to `cap` connections.
    Open {
        arrivals: Arrivals,
        cap: u64,
        gap: Duration,
        /// Connections to open before the schedule starts.
        warm: u64,
    },
    /// A storm: each start opens a connection, makes at most one request,
    /// holds it, closes it.
    Storm(StormLoad),
    /// Scenarios: virtual users running flows.
    Scenario(ScenarioLoad),
}

/// One worker's share of a storm.
#[derive(Clone, Debug)]
pub(crate) struct StormLoad {
    pub starts: StormStarts,
    /// Connections open or opening at once, at most.
    pub cap: Option<u64>,
    pub hold: Duration,
    /// True when starts follow a schedule (rate or jitter): lateness is
    /// recorded as schedule_lag.
    pub scheduled: bool,
    /// Average gap between this worker's starts.
    pub gap: Duration,
    /// This worker's index and the number of workers in the whole storm
    /// (all processes), for rotating source addresses.
    pub worker: u64,
    pub workers: u64,
    /// Reconnect held connections the server drops.
    pub reconnect: Option<throng_plan::Reconnect>,
    /// Seed for reconnect jitter.
    pub seed: u64,
    /// Reconnect as nats.go does: give up at the second authorization
    /// error in a row.
    pub nats_go: bool,
}

/// What a worker needs to run.
#[derive(Debug)]
pub(crate) struct WorkerSpec {
    /// Where connections go (shared by the workers).
    pub route: Arc<crate::reach::Route>,
    /// `--connect-to`, `--resolve`, `-4`/`-6`: also for the origins
    /// redirects lead to (see the redirect module's `dest`).
    pub reach: Arc<throng_plan::Reach>,
    /// Shared by the workers, not copied (see run_http).
    pub request: bytes::Bytes,
    pub head_request: bool,
    pub timeout: Duration,
    pub keepalive: bool,
    /// `--io`: how this worker drives its sockets (crate::uring).
    pub io: throng_plan::IoModel,
    pub expect: StatusSet,
    pub tls: Option<TlsClient>,
    /// What the connections speak once open, and what that protocol needs
    /// from the plan.
    pub wire: crate::proto::wire::Wire,
    /// Local addresses to connect from, rotated (empty: the kernel picks).
    pub source: Arc<[std::net::IpAddr]>,
    pub origin: Instant,
    pub load: WorkerLoad,
    /// `--csv-requests`: where this worker writes its rows.
    pub rows: Option<RowSpec>,
    /// Several requests to choose from (targets, `--body-lines`), and this
    /// worker's number of how many; None: every request is `request`.
    pub targets: Option<(Arc<crate::targets::TargetSpec>, u64, u64)>,
    /// `--redirects`: how an HTTP run's request follows redirects (None: it
    /// does not).
    pub follow: Option<Arc<crate::redirect::place::FollowSpec>>,
    /// `--trace-context`: the worker's trace ids (None: no traceparent).
    pub trace: Option<crate::trace::Tracer>,
    /// `--sse`/`--llm`: each response is an event stream (None: it is not).
    pub stream: Option<Arc<throng_plan::StreamSpec>>,
}

/// A worker's share of `--csv-requests`.
#[derive(Clone, Debug)]
pub(crate) struct RowSpec {
    /// The run's parts directory.
    pub dir: std::path::PathBuf,
    /// This worker's number in the rows (unique over the run's processes).
    pub worker: u64,
    /// Rows it may write.
    pub budget: u64,
}

/// A worker's share of a scenario run.
#[derive(Clone, Debug)]
pub(crate) struct ScenarioLoad {
    pub plan: Arc<ScenarioPlan>,
    pub env: Arc<HashMap<String, String>>,
    pub worker: u32,
    pub workers: u32,
    pub shared: Arc<SharedCounters>,
    pub seed: u64,
    /// Per scenario (in the plan's order): where its VUs connect, in which
    /// protocol.
    pub dests: Arc<[Arc<crate::proto::vu::dest::Dest>]>,
    /// What the file's `setup:` flow captured (`{{setup.NAME}}`).
    pub setup: Arc<HashMap<String, String>>,
    /// A `setup:` run: each VU leaves its variables here when an iteration
    /// ends (None in load runs).
    pub keep: Option<Arc<std::sync::Mutex<HashMap<String, String>>>>,
    /// A k6 script its VUs run instead of the flow.
    pub script: Option<Arc<throng_script::Script>>,
}

/// Counters every worker of the run shares (one atomic add per iteration).
#[derive(Debug)]
pub(crate) struct SharedCounters {
    /// Iterations taken, per scenario (shared-iterations).
    pub(crate) taken: Vec<AtomicU64>,
    /// The data file's shared cursor.
    pub(crate) cursor: AtomicU64,
}

impl SharedCounters {
    pub(crate) fn new(scenarios: usize) -> Self {
        SharedCounters {
            taken: (0..scenarios).map(|_| AtomicU64::new(0)).collect(),
            cursor: AtomicU64::new(0),
        }
    }
}
