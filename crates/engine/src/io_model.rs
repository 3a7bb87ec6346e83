//! Which I/O carries an HTTP run or a storm. `--io auto` (the default)
//! runs io_uring when the plan is one the ring carries
//! ([`HttpPlan::ring_refuses`], [`StormPlan::ring_refuses`]) and this
//! process may set one up, epoll otherwise; `--io uring` and `--io epoll`
//! force one.

use std::sync::OnceLock;

use throng_plan::{HttpPlan, IoModel, StormPlan};
use throng_result::Io;

use crate::error::EngineError;
use crate::uring::{self, ProbeError};

/// What carries a run: epoll or io_uring, never auto.
pub(crate) struct Chosen {
    pub model: IoModel,
    /// Why epoll runs where auto would have run the ring.
    pub fallback: Option<String>,
    /// What the plan asks that the ring does not carry, when auto ran epoll
    /// for it.
    pub not_carried: Option<String>,
}

impl Chosen {
    /// As the result says it.
    pub(crate) fn io(&self) -> Io {
        match self.model {
            IoModel::Uring => Io::Uring,
            IoModel::Epoll | IoModel::Auto => Io::Epoll,
        }
    }
}

/// The probe, once per process: setting up a ring costs system calls, and
/// what the kernel and the process allow does not change while it runs
/// (`--repeat`, sweeps and merges of repeats ask again).
fn probed() -> Result<(), &'static ProbeError> {
    static PROBED: OnceLock<Result<(), ProbeError>> = OnceLock::new();
    PROBED.get_or_init(uring::probe).as_ref().map(|_| ())
}

/// The I/O `plan` runs on; `rows`: `--csv-requests` rows are written
/// (epoll only, for now). Forced io_uring that cannot run is a usage
/// error saying why; auto falls back instead.
pub(crate) fn choose(plan: &HttpPlan, rows: bool) -> Result<Chosen, EngineError> {
    choose_for(plan.io, plan.ring_refuses(), rows)
}

/// [`choose`] for a storm.
pub(crate) fn choose_storm(plan: &StormPlan, rows: bool) -> Result<Chosen, EngineError> {
    choose_for(plan.io, plan.ring_refuses(), rows)
}

/// The I/O a plan asking for `io` runs on, the ring refusing it for
/// `refuses` (the plan already refused a forced ring that cannot carry it).
fn choose_for(io: IoModel, refuses: Option<String>, rows: bool) -> Result<Chosen, EngineError> {
    let epoll = |fallback| Chosen {
        model: IoModel::Epoll,
        fallback,
        not_carried: None,
    };
    let uring = Chosen {
        model: IoModel::Uring,
        fallback: None,
        not_carried: None,
    };
    match io {
        IoModel::Epoll => Ok(epoll(None)),
        IoModel::Uring => {
            if rows {
                return Err(EngineError::UringRows);
            }
            probed().map_err(|e| EngineError::Plan(Box::new(e.clone())))?;
            Ok(uring)
        }
        IoModel::Auto => Ok(if rows || refuses.is_some() {
            // Said only where the ring could have run: a kernel that
            // refuses it is the reason that matters.
            let not_carried = probed()
                .is_ok()
                .then(|| refuses.unwrap_or_else(|| "--csv-requests rows".to_string()));
            Chosen {
                not_carried,
                ..epoll(None)
            }
        } else {
            match probed() {
                Ok(()) => uring,
                Err(e) => epoll(Some(e.why())),
            }
        }),
    }
}

/// Why `--io auto` runs this plan on epoll though the ring would carry it:
/// the kernel or the process refused io_uring ("io_uring is not permitted
/// here (EPERM: …)"). None when the ring runs, when the plan is one it
/// does not carry (epoll, silently), or when the I/O was forced.
pub fn auto_fallback(plan: &HttpPlan, rows: bool) -> Option<String> {
    fallback_for(plan.io, plan.ring_refuses(), rows)
}

/// [`auto_fallback`] for a storm.
pub fn storm_auto_fallback(plan: &StormPlan, rows: bool) -> Option<String> {
    fallback_for(plan.io, plan.ring_refuses(), rows)
}

fn fallback_for(io: IoModel, refuses: Option<String>, rows: bool) -> Option<String> {
    if io != IoModel::Auto || rows || refuses.is_some() {
        return None;
    }
    probed().err().map(ProbeError::why)
}
