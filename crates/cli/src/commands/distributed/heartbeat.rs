//! The coordinator's sign of life before it follows a run: while it greets
//! the other agents, writes its journal, sends the runs and waits for each
//! to start (or, resuming, reconnects to the others), every agent it
//! greeted hears Alive every second, as during the run.
//!
//! ```text
//!  greet agent 0 ─► add(0) ─► greet agent 1 ─► add(1) ─► journal ─►
//!  pause(0) Run add(0) ─► pause(1) Run add(1) ─► started? ─► stop ─► follow
//!           (a thread: Alive to every agent added, once a second)
//! ```
//!
//! An agent's wait for its run is then tied to its coordinator being there
//! (silent for [`SILENCE`](super::SILENCE): gone), not to how long the
//! coordinator's preparation takes on a busy machine or with many agents.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Conn, Msg, send};

/// How often the agents hear from the coordinator.
const EVERY: Duration = Duration::from_secs(1);

/// Alive, once a second, to each agent added and not paused.
pub(super) struct Heartbeat {
    /// Per agent, a clone of its connection while it is to hear Alive.
    conns: Arc<Mutex<Vec<Option<Conn>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts the beat for `n` agents (none added yet).
    pub(super) fn start(n: usize) -> Heartbeat {
        let conns: Arc<Mutex<Vec<Option<Conn>>>> = Arc::new(Mutex::new((0..n).map(|_| None).collect()));
        let stop = Arc::new(AtomicBool::new(false));
        let (conns2, stop2) = (Arc::clone(&conns), Arc::clone(&stop));
        // Without a thread (none can be made) the agents hear nothing
        // before the run, as before there was a beat: no worse.
        let thread = std::thread::Builder::new()
            .name("throng-coord-beat".into())
            .spawn(move || beat(&conns2, &stop2))
            .ok();
        Heartbeat { conns, stop, thread }
    }

    /// Agent `i` hears Alive from now on, on a clone of `conn`.
    pub(super) fn add(&self, i: usize, conn: &Conn) {
        if let (Ok(clone), Ok(mut conns)) = (conn.try_clone(), self.conns.lock())
            && let Some(slot) = conns.get_mut(i)
        {
            *slot = Some(clone);
        }
    }

    /// Agent `i` hears nothing more from the beat: the caller writes on its
    /// connection (once this returns, the beat never does meanwhile).
    pub(super) fn pause(&self, i: usize) {
        if let Ok(mut conns) = self.conns.lock()
            && let Some(slot) = conns.get_mut(i)
        {
            *slot = None;
        }
    }

    /// Stops the beat and waits for its thread (at most one round of tiny
    /// writes, each bounded by the connection's write timeout): once this
    /// returns, nothing of it writes on any connection.
    pub(super) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

fn beat(conns: &Mutex<Vec<Option<Conn>>>, stop: &AtomicBool) {
    let mut last = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() < EVERY {
            continue;
        }
        last = Instant::now();
        let Ok(mut conns) = conns.lock() else { return };
        for slot in conns.iter_mut() {
            // An agent gone is found out by whoever reads from it next.
            if let Some(conn) = slot
                && send(conn, &Msg::Alive { seq: 0 }).is_err()
            {
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_agents_hear_alive_and_paused_ones_nothing() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ours = [0, 1].map(|_| Conn::Tcp(std::net::TcpStream::connect(addr).unwrap()));
        let mut theirs = [0, 1].map(|_| Conn::Tcp(listener.accept().unwrap().0));
        let beat = Heartbeat::start(2);
        beat.add(0, &ours[0]);
        beat.add(1, &ours[1]);
        for conn in &mut theirs {
            assert!(matches!(
                super::super::recv(conn, Duration::from_secs(10)),
                Ok(Msg::Alive { .. })
            ));
        }
        beat.pause(1);
        // Whatever the beat sent before the pause, then nothing more.
        let mut after = 0;
        while let Ok(msg) = super::super::recv(&mut theirs[1], Duration::from_millis(2500)) {
            assert!(matches!(msg, Msg::Alive { .. }));
            after += 1;
            assert!(after < 3, "alive after the pause");
        }
        // Stopped: its thread is joined, not left writing.
        let mut beat = beat;
        beat.stop();
    }
}
