//! What watches a run while it lasts: the display on stderr and the
//! `--prometheus` endpoint, both fed from the coordinator's ticks. Either
//! one asks the engine for merged snapshots; with neither, the run copies
//! nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use throng_engine::{Control, Progress};
use throng_metrics::Measurements;

use crate::args::LiveArgs;
use crate::commands::UsageError;
use crate::prometheus::Exporter;

/// The endpoint (when asked for) across every run of a command.
pub struct Watch {
    exporter: Option<Exporter>,
    linger: Duration,
}

impl Watch {
    /// Starts the endpoint when `--prometheus` asked for one. `step_scenarios`
    /// names each scenario step's scenario (for labels).
    pub fn start(args: &LiveArgs, step_scenarios: BTreeMap<String, String>) -> anyhow::Result<Watch> {
        let exporter = match args.prometheus {
            Some(addr) => Some(Exporter::start(addr, step_scenarios).map_err(|e| {
                UsageError(format!(
                    "--prometheus {addr}: cannot listen there ({e}); pick a free address, e.g. 127.0.0.1:9464"
                ))
            })?),
            None => None,
        };
        Ok(Watch {
            exporter,
            linger: args.prometheus_linger,
        })
    }

    /// Before a run: asks for snapshots when the endpoint or a shown display
    /// will read them.
    pub fn prepare(&self, control: &Control, display_shown: bool) {
        if self.exporter.is_some() || display_shown {
            control.want_snapshots();
        }
    }

    /// A coordinator tick.
    pub fn tick(&self, p: &Progress) {
        if let Some(e) = &self.exporter {
            let vus = p.snapshot.as_deref().map_or(0, crate::progress::vus);
            e.update(p.snapshot.as_ref(), p.live.open_connections, vus);
        }
    }

    /// A run ended: the endpoint shows exactly its totals from now on.
    pub fn finished(&self, m: &Measurements) {
        if let Some(e) = &self.exporter {
            e.finished(m);
        }
    }

    /// Keeps serving for `--prometheus-linger` after the last run, so that a
    /// last scrape sees the final totals; then stops the endpoint.
    pub fn linger(self) {
        if self.exporter.is_some() && !self.linger.is_zero() {
            std::thread::sleep(self.linger);
        }
    }
}
