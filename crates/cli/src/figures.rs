//! One agent's live figures beside the merged ones (`throng coordinate
//! --per-agent`): what `/metrics` and the pushes show of it, under an
//! `agent` label.

use std::sync::Arc;

use throng_metrics::Measurements;

/// One agent's figures so far.
#[derive(Clone, Debug)]
pub struct AgentFigures {
    /// The `agent` label's value: its number in `--agents` (from 1) and
    /// its address.
    pub agent: String,
    /// Everything it measured so far (its result's, once it ended).
    pub measurements: Arc<Measurements>,
    /// Its connections open now.
    pub open_connections: u64,
    /// Its VUs active now.
    pub vus: u64,
    /// True while its run lasts.
    pub running: bool,
}

impl AgentFigures {
    /// The label of agent `i` (from 0) at `addr`.
    pub fn label(i: usize, addr: &str) -> String {
        format!("{} {addr}", i + 1)
    }
}
