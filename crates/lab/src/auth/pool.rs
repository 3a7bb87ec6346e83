//! The password-hashing pool: a fixed number of threads off the event loops.
//!
//! bcrypt at cost 12 takes about a quarter of a second of CPU. On a serving
//! thread it would stall every connection that thread holds, so it runs
//! here instead, like a real server's worker pool: at most `threads` hashes
//! at once, the rest wait in a bounded queue, and a full queue is an answer
//! (busy), not unbounded memory.

use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::{fmt, io};

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// Why a job did not run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PoolError {
    /// The queue is full.
    Busy,
    /// The job panicked, or the pool is gone.
    Failed,
}

/// A fixed set of threads that run blocking jobs for async callers.
pub(crate) struct HashPool {
    queue: SyncSender<Job>,
    threads: usize,
    capacity: usize,
}

impl fmt::Debug for HashPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashPool")
            .field("threads", &self.threads)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl HashPool {
    /// Starts `threads` threads; at most `capacity` jobs wait beyond those
    /// running. The threads end once the pool is dropped and their current
    /// job is done (they are not joined: at a high cost one hash can take
    /// hours, and stopping the server must not wait for it).
    pub(crate) fn new(threads: NonZeroUsize, capacity: usize) -> io::Result<HashPool> {
        let (queue, jobs) = sync_channel::<Job>(capacity);
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..threads.get() {
            let jobs = Arc::clone(&jobs);
            std::thread::Builder::new()
                .name(format!("throng-lab-hash-{i}"))
                .spawn(move || work(&jobs))?;
        }
        Ok(HashPool {
            queue,
            threads: threads.get(),
            capacity,
        })
    }

    /// Runs `f` on a pool thread and waits for its result without blocking
    /// the caller's thread.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.queue.try_send(job).map_err(|e| match e {
            TrySendError::Full(_) => PoolError::Busy,
            TrySendError::Disconnected(_) => PoolError::Failed,
        })?;
        // A job that panicked dropped its sender: that is the error here.
        rx.await.map_err(|_| PoolError::Failed)
    }

    /// Jobs that may wait beyond those running.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

fn work(jobs: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job; a poisoned
        // lock still guards a usable receiver.
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = job else {
            return; // the pool is gone
        };
        // A panicking job fails its own request, not the thread.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn runs_jobs_off_the_calling_thread() {
        let pool = HashPool::new(NonZeroUsize::new(2).unwrap(), 4).unwrap();
        let caller = std::thread::current().id();
        let name = block_on(pool.run(move || {
            assert_ne!(std::thread::current().id(), caller);
            std::thread::current().name().map(str::to_string)
        }));
        assert!(name.unwrap().unwrap().starts_with("throng-lab-hash-"));
    }

    #[test]
    fn a_panicking_job_fails_alone() {
        let pool = HashPool::new(NonZeroUsize::new(1).unwrap(), 4).unwrap();
        let failed = block_on(pool.run(|| -> u32 { panic!("job panics") }));
        assert_eq!(failed, Err(PoolError::Failed));
        // The one thread survived and still serves.
        assert_eq!(block_on(pool.run(|| 7)), Ok(7));
    }

    #[test]
    fn a_full_queue_is_busy() {
        let pool = HashPool::new(NonZeroUsize::new(1).unwrap(), 1).unwrap();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        block_on(async {
            // One job runs and holds the only thread, one waits in the queue...
            let running = pool.run(move || {
                let _ = started_tx.send(());
                let _ = wait.recv();
            });
            let queued = pool.run(|| ());
            tokio::pin!(running, queued);
            // Poll both once so that both are submitted.
            let _ = futures_poll_once(running.as_mut()).await;
            started.recv().unwrap();
            let _ = futures_poll_once(queued.as_mut()).await;
            // ...so a third has no room.
            assert_eq!(pool.run(|| ()).await, Err(PoolError::Busy));
            release.send(()).unwrap();
            assert_eq!(running.await, Ok(()));
            assert_eq!(queued.await, Ok(()));
        });
    }

    /// Polls `f` once, returning its output if it was ready.
    async fn futures_poll_once<F: Future + Unpin>(mut f: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        })
        .await
    }
}
