//! What watches a run while it lasts: the display on stderr, the
//! `--prometheus` endpoint and the `--remote-write` and `--otlp` pushes, all fed from the
//! coordinator's ticks. Any of them asks the engine for merged snapshots;
//! with none, the run copies nothing.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use throng_engine::{Control, Progress};
use throng_metrics::Measurements;

use crate::args::{LiveArgs, PushArgs};
use crate::exit::UsageError;
use crate::figures::AgentFigures;
use crate::prometheus::Exporter;
use crate::push::batch::Gauges;
use crate::push::{Config, Encoder, Pusher};

/// Writes `figures` to `path` whole (a file beside it, renamed over it): a
/// reader never sees half of one. A failure loses only this second's.
fn write_snapshot(path: &std::path::Path, figures: &LiveFigures<&Measurements>) {
    let tmp = path.with_extension("tmp");
    let written = std::fs::File::create(&tmp).is_ok_and(|f| {
        use std::io::Write as _;
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, figures).is_ok() && w.flush().is_ok()
    });
    if written {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// The endpoint and the push (when asked for) across every run of a command.
pub struct Watch {
    exporter: Option<Exporter>,
    pushes: Pushes,
    linger: Duration,
    /// The first run's control: Ctrl-C and SIGTERM mark it, whichever run
    /// they stop, so a signal during the linger ends it.
    control: RefCell<Option<Control>>,
    /// `--live-snapshots`: where each new snapshot goes, and the last one
    /// written.
    snapshots: Option<(std::path::PathBuf, RefCell<Option<Arc<Measurements>>>)>,
}

/// What an agent's run says about itself each second (`--live-snapshots`):
/// everything measured so far, and the gauges.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct LiveFigures<M> {
    pub open_connections: u64,
    pub vus: u64,
    pub measurements: M,
}

impl Watch {
    /// Starts the endpoint when `--prometheus` asked for one, a push for each
    /// of `--remote-write` and `--otlp` given. `step_scenarios` names each scenario step's
    /// scenario (for labels); `agent` is the segment this process runs, and
    /// `start_at_unix_ms` the agreed start of every agent (the push's
    /// `run_id`, shared by the agents of one test).
    pub fn start(
        args: &LiveArgs,
        step_scenarios: BTreeMap<String, String>,
        agent: Option<String>,
        start_at_unix_ms: Option<u64>,
    ) -> anyhow::Result<Watch> {
        // One run_id for both pushes: the agreed start, or this process's own.
        let run_id = start_at_unix_ms.map_or_else(crate::push::local_run_id, |ms| format!("{ms:x}"));
        let pushes = Pushes::start(&args.push, &step_scenarios, agent, run_id)?;
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
            pushes,
            linger: args.prometheus_linger,
            control: RefCell::new(None),
            snapshots: args.live_snapshots.clone().map(|p| (p, RefCell::new(None))),
        })
    }

    /// Before a run: asks for snapshots when the endpoint or a shown display
    /// will read them.
    pub fn prepare(&self, control: &Control, display_shown: bool) {
        self.control.borrow_mut().get_or_insert_with(|| control.clone());
        if self.exporter.is_some() || self.pushes.any() || self.snapshots.is_some() || display_shown {
            control.want_snapshots();
        }
    }

    /// A coordinator tick.
    pub fn tick(&self, p: &Progress) {
        let vus = || p.snapshot.as_deref().map_or(0, crate::progress::vus);
        if let Some(e) = &self.exporter {
            e.update(p.snapshot.as_ref(), p.live.open_connections, vus(), &[]);
        }
        let gauges = crate::push::batch::Gauges {
            active_connections: p.live.open_connections,
            vus: vus(),
            running: true,
        };
        self.pushes.tick(p.snapshot.as_ref(), gauges, &[]);
        if let (Some((path, last)), Some(snapshot)) = (&self.snapshots, &p.snapshot) {
            let fresh = last.borrow().as_ref().is_none_or(|l| !Arc::ptr_eq(l, snapshot));
            if fresh {
                *last.borrow_mut() = Some(Arc::clone(snapshot));
                let figures = LiveFigures {
                    open_connections: p.live.open_connections,
                    vus: vus(),
                    measurements: &**snapshot,
                };
                write_snapshot(path, &figures);
            }
        }
    }

    /// A run ended: the endpoint shows exactly its totals from now on, the
    /// pushes send them (waiting for them, bounded; the two pushes one after
    /// the other). Writes what each push did during this run into the result.
    pub fn finished(&self, r: &mut throng_result::RunResult) {
        if let Some(e) = &self.exporter {
            e.finished(&r.measurements, &[]);
        }
        (r.remote_write, r.otlp) = self.pushes.finished(&r.measurements, &[]);
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

/// The pushes `--remote-write` and `--otlp` asked for (a run's, or a
/// coordinator's merged figures): each started, or None.
pub struct Pushes {
    remote_write: Option<Pusher>,
    otlp: Option<Pusher>,
}

impl Pushes {
    /// Checks the flags and starts a push for each URL given. `agent` names
    /// the segment this process runs (a label on every series), `run_id`
    /// the test (shared by the agents of one).
    pub fn start(
        args: &PushArgs,
        step_scenarios: &BTreeMap<String, String>,
        agent: Option<String>,
        run_id: String,
    ) -> anyhow::Result<Pushes> {
        let [remote_write, otlp] = Self::configs(args, agent, &run_id)?;
        let start = |encoder: Encoder, config: Option<Config>| -> anyhow::Result<Option<Pusher>> {
            config
                .map(|config| {
                    Pusher::start(config, step_scenarios.clone())
                        .map_err(|e| anyhow::anyhow!("{}: cannot start the push thread ({e})", encoder.flag()))
                })
                .transpose()
        };
        Ok(Pushes {
            remote_write: start(Encoder::RemoteWrite, remote_write)?,
            otlp: start(Encoder::Otlp, otlp)?,
        })
    }

    /// Checks the flags, starting nothing: for a caller with things to do
    /// before the run (`throng k8s run` creates its pods).
    pub fn check(args: &PushArgs) -> Result<(), UsageError> {
        Self::configs(args, None, &crate::push::local_run_id()).map(|_| ())
    }

    /// The configuration of `--remote-write` and of `--otlp`, each given.
    fn configs(args: &PushArgs, agent: Option<String>, run_id: &str) -> Result<[Option<Config>; 2], UsageError> {
        let config = |encoder: Encoder,
                      url: &Option<String>,
                      headers: &[crate::push::Secret],
                      interval: Duration,
                      timeout: Duration,
                      cacert: Option<&std::path::Path>|
         -> Result<Option<Config>, UsageError> {
            let Some(url) = url else { return Ok(None) };
            Config::new(
                encoder,
                url,
                headers,
                interval,
                timeout,
                agent.clone(),
                Some(run_id.to_string()),
                cacert,
            )
            .map(Some)
        };
        Ok([
            config(
                Encoder::RemoteWrite,
                &args.remote_write,
                &args.remote_write_header,
                args.remote_write_interval,
                args.remote_write_timeout,
                args.remote_write_cacert.as_deref(),
            )?,
            config(
                Encoder::Otlp,
                &args.otlp,
                &args.otlp_header,
                args.otlp_interval,
                args.otlp_timeout,
                args.otlp_cacert.as_deref(),
            )?,
        ])
    }

    /// True when at least one push was asked for.
    pub fn any(&self) -> bool {
        self.remote_write.is_some() || self.otlp.is_some()
    }

    fn each(&self) -> impl Iterator<Item = &Pusher> {
        self.remote_write.iter().chain(&self.otlp)
    }

    /// The test's name on every series from now on (a coordinator learns
    /// its agents' agreed start after the flags were checked).
    pub fn name_run(&self, run_id: &str) {
        for p in self.each() {
            p.name_run(run_id);
        }
    }

    /// A tick of the current run: each push sends when its interval
    /// passed, `agents`' own series beside the merged ones.
    pub fn tick(&self, snapshot: Option<&Arc<Measurements>>, gauges: Gauges, agents: &[AgentFigures]) {
        for p in self.each() {
            p.tick(snapshot, gauges, agents);
        }
    }

    /// A run ended with `m`: both pushes send it and are waited for (one
    /// after the other, bounded); what each did during the run, for the
    /// result's `remote_write` and `otlp`.
    pub fn finished(
        &self,
        m: &Measurements,
        agents: &[AgentFigures],
    ) -> (Option<throng_result::PushRecord>, Option<throng_result::PushRecord>) {
        (
            self.remote_write.as_ref().map(|p| p.finished(m, agents)),
            self.otlp.as_ref().map(|p| p.finished(m, agents)),
        )
    }
}
