//! What watches a run while it lasts: the display on stderr and the
//! `--prometheus` endpoint, both fed from the coordinator's ticks. Either
//! one asks the engine for merged snapshots; with neither, the run copies
//! nothing.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use throng_engine::{Control, Progress};
use throng_metrics::Measurements;

use crate::args::LiveArgs;
use crate::exit::UsageError;
use crate::prometheus::Exporter;

/// The endpoint (when asked for) across every run of a command.
pub struct Watch {
    exporter: Option<Exporter>,
    linger: Duration,
    /// The first run's control: Ctrl-C and SIGTERM mark it, whichever run
    /// they stop, so a signal during the linger ends it.
    control: RefCell<Option<Control>>,
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
            control: RefCell::new(None),
        })
    }

    /// Before a run: asks for snapshots when the endpoint or a shown display
    /// will read them.
    pub fn prepare(&self, control: &Control, display_shown: bool) {
        self.control.borrow_mut().get_or_insert_with(|| control.clone());
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
    /// last scrape sees the final totals; then stops the endpoint. A signal
    /// during the linger ends it (unless a signal already stopped the run:
    /// then the linger lasts, bounded by its own length).
    pub fn linger(self) {
        if self.exporter.is_none() || self.linger.is_zero() {
            return;
        }
        let control = self.control.borrow().clone();
        let signalled_before = control.as_ref().is_some_and(Control::was_interrupted);
        let until = Instant::now() + self.linger;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || (!signalled_before && control.as_ref().is_some_and(Control::was_interrupted)) {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
}
