//! Ctrl-C and SIGTERM: the first stops the run gracefully, the second
//! aborts it.

use std::sync::atomic::{AtomicBool, Ordering};

use throng_engine::Control;

/// Set once a run's own watch ([`on_signal`]) takes the signals over from
/// [`exit_until_run`].
static RUN_HOLDS: AtomicBool = AtomicBool::new(false);

/// The exit code of an interrupted command (see `exit::Outcome::code`).
const INTERRUPTED: i32 = 130;

/// Until a run takes Ctrl-C and SIGTERM over, ends the process at once
/// with the interrupted code, saying that `what` was interrupted. For a
/// wait before the run that nothing else would cut short: a blocking read
/// of stdin (`--data @-` on a silent pipe or a terminal) goes on through a
/// signal that has a handler, or that the parent ignored. The signals are
/// watched before this returns.
pub fn exit_until_run(what: &'static str) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let watched = {
        let _in = rt.enter();
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    };
    let (Ok(mut int), Ok(mut term)) = watched else {
        return;
    };
    let spawned = std::thread::Builder::new()
        // At most 15 bytes, as the kernel keeps it (tests look for it).
        .name("throng-prerun".into())
        .spawn(move || {
            rt.block_on(async move {
                loop {
                    tokio::select! {
                        r = int.recv() => if r.is_none() { return },
                        r = term.recv() => if r.is_none() { return },
                    }
                    if !RUN_HOLDS.load(Ordering::SeqCst) {
                        say!("\nthrong: interrupted {what}");
                        std::process::exit(INTERRUPTED);
                    }
                }
            });
        });
    // Without the thread the signals keep the handler just installed and
    // would be lost: put the default action (the process ends) back.
    if spawned.is_err() {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: SIG_DFL is a valid disposition; signal takes no pointers.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
}

/// Starts a thread that forwards SIGINT/SIGTERM to `control` for the rest of
/// the process's life.
pub fn forward_to(control: &Control) {
    on_signal(
        control,
        "throng: stopping: waiting for requests in flight (press Ctrl-C again to stop now)",
        || {},
    );
}

/// Like [`forward_to`], saying `first` on the first signal (a command
/// whose stop means more than requests in flight).
pub fn forward_to_saying(control: &Control, first: &'static str) {
    on_signal(control, first, || {});
}

/// Like [`forward_to`], for the runs of a `--repeat`: a signal interrupts
/// every one of `controls` (the running one stops; those not started yet are
/// skipped).
pub fn forward_to_all(controls: &[Control]) {
    let Some((first, rest)) = controls.split_first() else {
        return;
    };
    let rest = rest.to_vec();
    on_signal(
        first,
        "throng: stopping: waiting for requests in flight, no more runs (press Ctrl-C again to stop now)",
        move || {
            for c in &rest {
                c.interrupt();
            }
        },
    );
}

/// Starts a thread that forwards SIGINT/SIGTERM to `pids` (child processes
/// in their own process group), once per signal, and marks `control`.
pub fn forward_to_children(control: &Control, pids: Vec<u32>) {
    on_signal(
        control,
        "throng: stopping the worker processes (press Ctrl-C again to stop them now)",
        move || {
            for pid in &pids {
                if let Ok(pid) = i32::try_from(*pid) {
                    // SAFETY: kill takes no pointers; a stale pid at worst
                    // returns ESRCH.
                    unsafe { libc::kill(pid, libc::SIGINT) };
                }
            }
        },
    );
}

/// On every SIGINT or SIGTERM: say `first` the first time, interrupt
/// `control`, then run `also`.
fn on_signal(control: &Control, first: &'static str, also: impl Fn() + Send + 'static) {
    RUN_HOLDS.store(true, Ordering::SeqCst);
    let control = control.clone();
    let spawned = std::thread::Builder::new()
        .name("throng-signals".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
                    return;
                };
                loop {
                    tokio::select! {
                        r = tokio::signal::ctrl_c() => if r.is_err() { return },
                        _ = term.recv() => {}
                    }
                    if !control.was_interrupted() {
                        say!("\n{first}");
                    }
                    control.interrupt();
                    also();
                }
            });
        });
    // Without the thread, signals keep their default action (the process
    // ends); the run itself is unaffected.
    drop(spawned);
}

/// Blocks until SIGINT or SIGTERM.
pub fn wait_for_stop() {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    rt.block_on(async {
        let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    });
}
