//! Awaited evaluations: [`Pool::run_async`] hands a job to the pool and awaits its result
//! without holding the caller's thread, and a watchdog thread gives up on it at its
//! deadline.
//!
//! The blocking [`Pool::run`] parks its caller on a condition variable. Called from an
//! async task, that takes a runtime worker out of service for the whole evaluation, and
//! handing the worker's other tasks to a fresh thread (`block_in_place`) costs a thread per
//! concurrent visit under load. Awaiting a oneshot instead leaves the worker free.
//!
//! The deadline is kept by a thread of the pool's own, on the real clock, not by an async
//! timer: a runtime with paused time would otherwise jump to the deadline as soon as it
//! went idle waiting for a result. At the deadline, a running job is abandoned exactly as
//! the blocking path abandons it: its cancellation flag is raised and its worker replaced
//! (within [`MAX_STUCK`](super::pool::MAX_STUCK)).
//!
//! An awaited job's time limit starts when a worker starts it, not when it is queued: a
//! door's expression is given up on (and its door broken) for the time it ran, never for
//! the time it waited behind others on a loaded machine. The wait is bounded all the
//! same, since every job ahead of it is.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::deadline::deadline_after;
use super::pool::{Failure, Pool, Retire, Shared, Task, lock, panic_message};

/// Where an awaited job stands.
enum State<T> {
    /// Queued; the caller awaits `tx`.
    Queued(oneshot::Sender<Result<T, Failure>>),
    /// Running on a worker; the caller awaits `tx`.
    Running(oneshot::Sender<Result<T, Failure>>),
    /// The result was sent.
    Done,
    /// Given up at the deadline; `replaced` if a new worker took the running one's place.
    Abandoned { replaced: bool },
}

/// An awaited job's meeting point, shared by the caller, the worker and the watchdog.
struct Slot<T> {
    state: Mutex<State<T>>,
    /// Raised when nobody waits any more; the job's ticks read it.
    cancelled: AtomicBool,
    /// How long the job may run once started.
    limit: Duration,
    /// The watchdog, told of the job's deadline when a worker starts it.
    watchdog: Arc<Inner>,
}

/// Something the watchdog can give up on.
trait Expire: Send + Sync {
    /// The deadline has passed: give up unless the job is done.
    fn expire(&self, pool: &Arc<Shared>);
}

impl<T: Send> Expire for Slot<T> {
    fn expire(&self, pool: &Arc<Shared>) {
        let mut state = lock(&self.state);
        // The flag is raised before the caller hears of the deadline, so that whatever
        // the caller does next already finds the job cancelled.
        let replaced = match std::mem::replace(&mut *state, State::Done) {
            // Only a started job is kept by the watchdog, so a queued one never gets here.
            State::Running(tx) => {
                // The state is locked, so the worker cannot finish in between and miss
                // the decision.
                let replaced = pool.replace_worker();
                self.cancelled.store(true, Ordering::Relaxed);
                let _ = tx.send(Err(Failure::Deadline));
                replaced
            }
            other => {
                *state = other;
                return;
            }
        };
        *state = State::Abandoned { replaced };
    }
}

impl<T: Send + 'static> Slot<T> {
    /// Run the job unless it was given up on, and send the result. The job's deadline,
    /// handed to it and kept by the watchdog, starts now.
    fn work(self: &Arc<Self>, job: impl FnOnce(&AtomicBool, Instant) -> T) -> Retire {
        let deadline = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, State::Done) {
                State::Queued(tx) => *state = State::Running(tx),
                other => {
                    *state = other;
                    return Retire::Stay;
                }
            }
            let deadline = deadline_after(Instant::now(), self.limit);
            // The watchdog waits a quarter of the limit past the deadline, so that the
            // job's own checks report what ran out; the watchdog is the backstop.
            let cut_off = deadline_after(deadline, self.limit / 4);
            let expiring: Arc<dyn Expire> = Arc::clone(self) as Arc<dyn Expire>;
            keep(&self.watchdog, cut_off, Arc::downgrade(&expiring));
            deadline
        };
        let result = catch_unwind(AssertUnwindSafe(|| job(&self.cancelled, deadline)));
        let mut state = lock(&self.state);
        match std::mem::replace(&mut *state, State::Done) {
            State::Running(tx) => {
                drop(state);
                let _ = tx.send(result.map_err(panic_message));
                Retire::Stay
            }
            State::Abandoned { replaced } => {
                *state = State::Abandoned { replaced };
                drop(state);
                // Dropped here, after unlocking: a large result takes a while to free.
                drop(result);
                if replaced {
                    Retire::Leave
                } else {
                    Retire::Stay
                }
            }
            other => {
                *state = other;
                Retire::Stay
            }
        }
    }
}

/// Raises the job's cancellation flag when the awaiting future is dropped before its
/// result came, so that the job's next tick ends it.
struct CancelOnDrop<T> {
    slot: Arc<Slot<T>>,
    armed: bool,
}

impl<T> Drop for CancelOnDrop<T> {
    fn drop(&mut self) {
        if self.armed {
            self.slot.cancelled.store(true, Ordering::Relaxed);
        }
    }
}

/// One deadline the watchdog keeps.
struct Due {
    at: Instant,
    seq: u64,
    job: Weak<dyn Expire>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The deadlines of every awaited job, earliest first, and the thread that keeps them.
pub(super) struct Watchdog {
    inner: Arc<Inner>,
}

struct Inner {
    due: Mutex<Heap>,
    /// Signalled when a deadline earlier than every other is added.
    earlier: Condvar,
}

#[derive(Default)]
struct Heap {
    heap: BinaryHeap<Reverse<Due>>,
    seq: u64,
}

impl Watchdog {
    /// Start the watchdog thread of `pool`. If the thread cannot start, awaited jobs still
    /// end by their own ticks; only a job stuck in one native step is then not given up on.
    fn start(pool: &Arc<Shared>) -> Watchdog {
        let inner = Arc::new(Inner {
            due: Mutex::new(Heap::default()),
            earlier: Condvar::new(),
        });
        let (watched, shared) = (Arc::clone(&inner), Arc::downgrade(pool));
        let _ = thread::Builder::new()
            .name("door-expr-watch".to_owned())
            .spawn(move || watch(&watched, &shared));
        Watchdog { inner }
    }
}

/// Give up on `job` at `at`.
fn keep(inner: &Inner, at: Instant, job: Weak<dyn Expire>) {
    let mut due = lock(&inner.due);
    let earliest = due.heap.peek().is_none_or(|Reverse(d)| at < d.at);
    due.seq += 1;
    let seq = due.seq;
    due.heap.push(Reverse(Due { at, seq, job }));
    if earliest {
        inner.earlier.notify_one();
    }
}

/// The watchdog's loop: sleep until the earliest deadline, give up on whatever is still
/// pending then. Ends when the pool is gone.
fn watch(inner: &Inner, pool: &Weak<Shared>) {
    let mut due = lock(&inner.due);
    loop {
        let now = Instant::now();
        let next = due.heap.peek().map(|Reverse(d)| d.at);
        match next {
            Some(at) if at <= now => {
                let Some(Reverse(entry)) = due.heap.pop() else {
                    continue;
                };
                drop(due);
                if let (Some(job), Some(pool)) = (entry.job.upgrade(), pool.upgrade()) {
                    job.expire(&pool);
                }
                due = lock(&inner.due);
            }
            Some(at) => {
                due = inner
                    .earlier
                    .wait_timeout(due, at - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            None => {
                if pool.strong_count() == 0 {
                    return;
                }
                due = inner
                    .earlier
                    .wait(due)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

impl Pool {
    /// Run `job` on a worker and await its result, without holding the calling thread.
    /// The job may run for `limit` from when a worker starts it: it is handed that
    /// deadline, and a flag that is raised when nobody waits any more (the watchdog gave
    /// up on it, or the awaiting future was dropped).
    ///
    /// If no worker could ever be started, the job runs on the calling thread.
    pub(super) async fn run_async<T, F>(&self, limit: Duration, job: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&AtomicBool, Instant) -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let watchdog = self.watchdog.get_or_init(|| Watchdog::start(&self.shared));
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Queued(tx)),
            cancelled: AtomicBool::new(false),
            limit,
            watchdog: Arc::clone(&watchdog.inner),
        });
        if self.shared.has_no_workers() {
            let deadline = deadline_after(Instant::now(), limit);
            return catch_unwind(AssertUnwindSafe(|| job(&slot.cancelled, deadline)))
                .map_err(panic_message);
        }
        let task_slot = Arc::clone(&slot);
        let task: Task = Box::new(move || task_slot.work(job));
        self.shared.push(task);
        let mut guard = CancelOnDrop { slot, armed: true };
        // The sender is dropped unsent only if the pool itself is torn down.
        let result = rx.await.unwrap_or(Err(Failure::Deadline));
        guard.armed = false;
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::{Duration, Instant};

    use super::super::pool::{Failure, Pool};

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime builds")
            .block_on(f)
    }

    fn roomy() -> Duration {
        Duration::from_secs(10)
    }

    #[test]
    fn awaited_results_come_back() {
        let pool = Pool::new(2, 0);
        block_on(async {
            for i in 0..100 {
                assert_eq!(pool.run_async(roomy(), move |_, _| i * 2).await, Ok(i * 2));
            }
        });
    }

    #[test]
    fn an_awaited_panic_is_reported_and_the_worker_survives() {
        let pool = Pool::new(1, 0);
        block_on(async {
            let result = pool
                .run_async(roomy(), |_, _| -> u8 { panic!("boom") })
                .await;
            assert_eq!(result, Err(Failure::Panicked("boom".to_owned())));
            assert_eq!(pool.run_async(roomy(), |_, _| 7).await, Ok(7));
        });
        assert_eq!(pool.live(), 1);
    }

    /// A job stuck past its deadline is given up on by the watchdog, its worker replaced,
    /// and its flag raised; released, the stuck worker exits.
    #[test]
    fn a_stuck_awaited_job_is_given_up_at_its_deadline() {
        let pool = Pool::new(1, 1);
        let (release, blocked) = mpsc::channel::<()>();
        let saw_cancel = Arc::new(AtomicBool::new(false));
        let saw = Arc::clone(&saw_cancel);
        block_on(async {
            let result = pool
                .run_async(Duration::from_millis(50), move |cancelled, _| {
                    let _ = blocked.recv();
                    saw.store(cancelled.load(Ordering::Relaxed), Ordering::Relaxed);
                })
                .await;
            assert_eq!(result, Err(Failure::Deadline));
            assert_eq!(pool.live(), 2);
            assert_eq!(pool.run_async(roomy(), |_, _| 1).await, Ok(1));
        });
        let _ = release.send(());
        let until = Instant::now() + Duration::from_secs(5);
        while pool.live() != 1 && Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(pool.live(), 1);
        assert!(saw_cancel.load(Ordering::Relaxed));
    }

    /// A job's limit starts when a worker starts it: time spent queued behind another job
    /// does not count against it.
    #[test]
    fn a_queued_job_s_limit_starts_when_it_runs() {
        let pool = Pool::new(1, 0);
        let (release, blocked) = mpsc::channel::<()>();
        let limit = Duration::from_millis(50);
        block_on(async {
            let first = pool.run_async(roomy(), move |_, _| {
                let _ = blocked.recv();
                Instant::now()
            });
            let second = pool.run_async(limit, |cancelled, deadline| {
                (cancelled.load(Ordering::Relaxed), deadline)
            });
            // Polled after both jobs are queued, behind the first on the only worker.
            let go = async {
                let _ = release.send(());
            };
            let (first, second, ()) = futures::join!(first, second, go);
            let first_done = first.expect("the first job ran");
            let (cancelled, deadline) = second.expect("the queued job ran");
            assert!(!cancelled);
            assert!(deadline >= first_done + limit);
        });
    }

    /// Dropping the awaiting future raises the job's flag.
    #[test]
    fn a_dropped_wait_cancels_the_job() {
        let pool = Pool::new(1, 0);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel::<bool>();
        block_on(async {
            let waiting = pool.run_async(roomy(), move |cancelled, _| {
                let _ = started_tx.send(());
                while !cancelled.load(Ordering::Relaxed) {
                    std::thread::yield_now();
                }
                let _ = seen_tx.send(true);
            });
            let mut waiting = Box::pin(waiting);
            // Poll once so the job is queued, then drop the future.
            let _ = futures::poll!(&mut waiting);
            let _ = started_rx.recv();
            drop(waiting);
        });
        assert_eq!(seen_rx.recv_timeout(Duration::from_secs(5)), Ok(true));
    }
}
