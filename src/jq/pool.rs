//! The hard half of the deadline guard: evaluations run on a few dedicated threads, and the
//! caller awaits them only until the deadline.
//!
//! The ticks of [`deadline`](super::deadline) stop the interpreter soon after its deadline,
//! and the guarded natives ([`guard`](super::guard)) every long native step. Running
//! evaluations on threads of their own still means:
//!
//! * the caller (typically an async task on a runtime worker) awaits a oneshot, so its
//!   thread stays free while the job runs, and it hears of the deadline at the latest when
//!   the [`watchdog`](super::watchdog) gives up on the job. Giving up raises the job's
//!   cancellation flag, which the evaluation's next tick sees; so does dropping the
//!   awaiting future;
//! * a worker still busy with an abandoned evaluation is replaced at once, so other
//!   evaluations are not stalled behind it; when it finishes it exits. At most
//!   [`MAX_STUCK`] such workers exist at a time: past that, no more are replaced, and new
//!   evaluations wait in the queue instead of piling up threads;
//! * the workers have large stacks. jaq recurses on nested values and programs, and an accepted
//!   expression such as `reduce range(100000) as $i (0; [.])` overflows the 2 MiB stack of an
//!   async runtime's worker, which aborts the process. The stack is reserved address space;
//!   only the pages used are committed.
//!
//! A job's time limit starts when a worker starts it, not when it is queued: a door's
//! expression is given up on (and its door broken) for the time it ran, never for the time
//! it waited behind others on a loaded machine. The wait is bounded all the same, since
//! every job ahead of it is.
//!
//! The price is a hand-off per evaluation: a queue push, a wake-up of a sleeping worker,
//! and a wake-up of the caller. Neither side spins while it waits: on a machine with as
//! many busy threads as cores (async workers and evaluation workers together), a
//! spinning thread takes the core from the one it waits for (`docs/benchmarks.md`).
//! Threads cannot be interrupted: an abandoned evaluation keeps its worker until its next
//! tick or guarded step sees the cancellation, a few thousand units of work later.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::deadline::deadline_after;
use super::watchdog::{Expire, Watchdog};
use crate::sync::lock;

/// Stack size of a worker (and of a compilation thread): enough to drop the deepest value an
/// evaluation can build within its budget (see [`collect`](super::collect);
/// `docs/doors.md` has the margin), and for the deepest program a source within
/// [`MAX_SOURCE_BYTES`](super::program::MAX_SOURCE_BYTES) can spell.
pub(super) const STACK_BYTES: usize = 256 << 20;

/// The most abandoned evaluations that may each hold a replaced worker at one time.
pub(super) const MAX_STUCK: usize = 8;

/// Why a job gave no result.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// The deadline passed first.
    Deadline,
    /// The job panicked; the message, if it had one.
    Panicked(String),
}

/// A set of worker threads running jobs with deadlines.
pub(super) struct Pool {
    shared: Arc<Shared>,
    /// The thread that gives up on jobs at their deadlines, started on first use.
    watchdog: OnceLock<Watchdog<Shared>>,
}

/// What the workers, the watchdog and the callers share.
struct Shared {
    queue: Mutex<Queue>,
    /// The most replaced workers that may still be finishing abandoned jobs.
    max_stuck: usize,
    /// Signalled when a task is queued and a worker sleeps.
    queued: Condvar,
    /// Workers alive, replaced or not.
    live: AtomicUsize,
    /// Workers that have been replaced and have not exited yet.
    stuck: AtomicUsize,
}

struct Queue {
    tasks: VecDeque<Task>,
    /// Workers waiting on `queued`, so that a push wakes one only if needed.
    sleepers: usize,
}

/// A queued job: runs it and says whether the worker must exit afterwards.
type Task = Box<dyn FnOnce() -> Retire + Send>;

/// Whether a worker goes on serving after a task.
#[derive(PartialEq, Eq)]
enum Retire {
    Stay,
    Leave,
}

/// Where a job stands. The caller awaits the receiver of the sender held here.
enum State<T> {
    /// Queued.
    Queued(oneshot::Sender<Result<T, Failure>>),
    /// Running on a worker.
    Running(oneshot::Sender<Result<T, Failure>>),
    /// The result was sent, or nobody waits for one any more.
    Done,
    /// Given up at the deadline; `replaced` if a new worker took the running one's place,
    /// so that the running one must exit when the job ends.
    Abandoned { replaced: bool },
}

/// The meeting point of a caller, the worker running its job, and the watchdog.
struct Slot<T> {
    state: Mutex<State<T>>,
    /// Raised when nobody waits any more; the job's ticks read it.
    cancelled: AtomicBool,
    /// How long the job may run once started.
    limit: Duration,
    /// The watchdog, told of the job's deadline when a worker starts it.
    watchdog: Watchdog<Shared>,
}

impl Pool {
    /// The pool shared by all door expressions, started on first use with one worker per
    /// core (at least two).
    pub(super) fn global() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| {
            let cores = thread::available_parallelism().map_or(2, usize::from);
            Pool::new(cores.clamp(2, 8), MAX_STUCK)
        })
    }

    /// A pool of `workers` threads (fewer if the system refuses to start some), replacing at
    /// most `max_stuck` workers stuck in abandoned jobs at a time.
    pub(super) fn new(workers: usize, max_stuck: usize) -> Pool {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                tasks: VecDeque::new(),
                sleepers: 0,
            }),
            queued: Condvar::new(),
            max_stuck,
            live: AtomicUsize::new(0),
            stuck: AtomicUsize::new(0),
        });
        for _ in 0..workers {
            // A worker that cannot be started leaves a smaller pool; `run` copes with none.
            let _ = spawn_worker(&shared);
        }
        Pool {
            shared,
            watchdog: OnceLock::new(),
        }
    }

    /// Run `job` on a worker and await its result, without holding the calling thread.
    /// The job may run for `limit` from when a worker starts it: it is handed that
    /// deadline, and a flag that is raised when nobody waits any more (the watchdog gave
    /// up on it, or the awaiting future was dropped).
    ///
    /// If no worker could ever be started, the job runs on the calling thread: its own
    /// checks are then the only guard, which beats refusing every evaluation.
    pub(super) async fn run<T, F>(&self, limit: Duration, job: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&AtomicBool, Instant) -> T + Send + 'static,
    {
        if self.shared.live.load(Ordering::Acquire) == 0 {
            let deadline = deadline_after(Instant::now(), limit);
            let never = AtomicBool::new(false);
            return catch_unwind(AssertUnwindSafe(|| job(&never, deadline))).map_err(panic_message);
        }
        let (tx, rx) = oneshot::channel();
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Queued(tx)),
            cancelled: AtomicBool::new(false),
            limit,
            watchdog: self
                .watchdog
                .get_or_init(|| Watchdog::start(&self.shared))
                .clone(),
        });
        let task_slot = Arc::clone(&slot);
        self.shared.push(Box::new(move || task_slot.work(job)));
        let mut guard = CancelOnDrop { slot, armed: true };
        // The sender is dropped unsent only if the job is skipped (given up on while
        // queued, which only a dropped wait does) or the pool is torn down.
        let result = rx.await.unwrap_or(Err(Failure::Deadline));
        guard.armed = false;
        result
    }

    /// Workers alive, including replaced ones still finishing an abandoned job.
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.shared.live.load(Ordering::Acquire)
    }
}

impl Shared {
    /// Start a worker in place of a stuck one, unless too many are stuck already.
    fn replace_worker(self: &Arc<Self>) -> bool {
        if self.stuck.fetch_add(1, Ordering::AcqRel) >= self.max_stuck {
            self.stuck.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        if spawn_worker(self).is_err() {
            self.stuck.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Queue `task`, waking a worker if one sleeps.
    fn push(&self, task: Task) {
        let mut queue = lock(&self.queue);
        queue.tasks.push_back(task);
        if queue.sleepers > 0 {
            self.queued.notify_one();
        }
    }
}

impl<T: Send + 'static> Slot<T> {
    /// Run the job unless nobody waits for it any more, and send the result. The job's
    /// deadline, handed to it and kept by the watchdog, starts now.
    fn work(self: &Arc<Self>, job: impl FnOnce(&AtomicBool, Instant) -> T) -> Retire {
        let deadline = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, State::Done) {
                State::Queued(tx) if !self.cancelled.load(Ordering::Relaxed) => {
                    *state = State::Running(tx);
                }
                // Queued, but the wait was dropped: the job is skipped (dropping `tx`).
                _ => return Retire::Stay,
            }
            let deadline = deadline_after(Instant::now(), self.limit);
            // The watchdog waits a quarter of the limit past the deadline, so that the
            // job's own checks report what ran out; the watchdog is the backstop.
            let cut_off = deadline_after(deadline, self.limit / 4);
            let expiring: Arc<dyn Expire<Shared>> = Arc::clone(self) as Arc<dyn Expire<Shared>>;
            self.watchdog.keep(cut_off, Arc::downgrade(&expiring));
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
                drop(state);
                // Dropped here, after unlocking: a large result takes a while to free.
                drop(result);
                if replaced {
                    Retire::Leave
                } else {
                    Retire::Stay
                }
            }
            _ => Retire::Stay,
        }
    }
}

impl<T: Send> Expire<Shared> for Slot<T> {
    fn expire(&self, pool: &Arc<Shared>) {
        let mut state = lock(&self.state);
        match std::mem::replace(&mut *state, State::Done) {
            // Only a started job is kept by the watchdog, so a queued one never gets here.
            State::Running(tx) => {
                // The state is locked, so the worker cannot finish in between and miss
                // the decision. The flag is raised before the caller hears of the
                // deadline, so that whatever the caller does next finds the job cancelled.
                let replaced = pool.replace_worker();
                self.cancelled.store(true, Ordering::Relaxed);
                let _ = tx.send(Err(Failure::Deadline));
                *state = State::Abandoned { replaced };
            }
            other => *state = other,
        }
    }
}

/// Raises the job's cancellation flag when the awaiting future is dropped before its
/// result came, so that the job's next tick ends it (or a worker skips it unstarted).
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

fn spawn_worker(shared: &Arc<Shared>) -> std::io::Result<()> {
    // Counted before the thread starts, so that `run` never sees a pool with no workers
    // while one is starting.
    shared.live.fetch_add(1, Ordering::AcqRel);
    let worker = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("door-expr".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || serve(&worker));
    if spawned.is_err() {
        shared.live.fetch_sub(1, Ordering::AcqRel);
    }
    spawned.map(drop)
}

fn serve(shared: &Shared) {
    loop {
        let task = {
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(task) = queue.tasks.pop_front() {
                    break task;
                }
                queue.sleepers += 1;
                queue = shared
                    .queued
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
                queue.sleepers -= 1;
            }
        };
        if task() == Retire::Leave {
            shared.stuck.fetch_sub(1, Ordering::AcqRel);
            shared.live.fetch_sub(1, Ordering::AcqRel);
            return;
        }
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> Failure {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    Failure::Panicked(message)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::{Duration, Instant};

    use super::{Failure, Pool};

    /// A limit no test job comes near.
    const ROOMY: Duration = Duration::from_secs(3600);

    /// How long a test waits for something that should happen at once, before it fails
    /// instead of hanging: generous, so that a loaded machine does not fail it.
    const WITHIN: Duration = Duration::from_secs(20);

    /// Wait (without sleeping) until `done` holds, for at most [`WITHIN`].
    fn eventually(done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + WITHIN;
        while !done() {
            if Instant::now() > until {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    #[tokio::test]
    async fn results_come_back() {
        let pool = Pool::new(2, 0);
        for i in 0..100 {
            assert_eq!(pool.run(ROOMY, move |_, _| i * 2).await, Ok(i * 2));
        }
    }

    #[tokio::test]
    async fn a_panicking_job_is_reported_and_the_worker_survives() {
        let pool = Pool::new(1, 0);
        let result = pool.run(ROOMY, |_, _| -> u8 { panic!("boom") }).await;
        assert_eq!(result, Err(Failure::Panicked("boom".to_owned())));
        assert_eq!(pool.run(ROOMY, |_, _| 7).await, Ok(7));
        assert_eq!(pool.live(), 1);
    }

    /// A job stuck past its deadline is given up on by the watchdog (on the real clock),
    /// its worker replaced and its flag raised; released, the stuck worker exits. Only
    /// `max_stuck` workers are replaced at a time.
    #[tokio::test]
    async fn a_stuck_job_is_given_up_and_its_worker_replaced() {
        let pool = Pool::new(1, 1);
        let (release, blocked) = mpsc::channel::<()>();
        let saw_cancel = Arc::new(AtomicBool::new(false));
        let saw = Arc::clone(&saw_cancel);
        let result = pool
            .run(Duration::from_millis(50), move |cancelled, _| {
                let _ = blocked.recv();
                saw.store(cancelled.load(Ordering::Relaxed), Ordering::Relaxed);
            })
            .await;
        assert_eq!(result, Err(Failure::Deadline));

        // The replacement serves while the stuck worker still blocks.
        assert_eq!(pool.live(), 2);
        assert_eq!(pool.run(ROOMY, |_, _| 1).await, Ok(1));

        // Only one replacement at a time: a second stuck job is not replaced.
        let (release_too, blocked_too) = mpsc::channel::<()>();
        let result = pool
            .run(Duration::from_millis(50), move |_, _| {
                let _ = blocked_too.recv();
            })
            .await;
        assert_eq!(result, Err(Failure::Deadline));
        assert_eq!(pool.live(), 2);

        // Released, the first stuck worker saw the cancellation and exits; the second stays.
        let _ = release.send(());
        assert!(eventually(|| pool.live() == 1));
        assert!(saw_cancel.load(Ordering::Relaxed));
        let _ = release_too.send(());
        assert_eq!(pool.run(ROOMY, |_, _| 2).await, Ok(2));
        assert_eq!(pool.live(), 1);
    }

    /// The deadline is kept on the real clock: with the runtime's time paused (which jumps
    /// to the next timer as soon as the runtime idles), a job that takes real time is
    /// still awaited to its end.
    #[tokio::test(start_paused = true)]
    async fn paused_time_does_not_give_up_on_a_job() {
        let pool = Pool::new(1, 0);
        let result = pool
            .run(Duration::from_secs(60), |_, _| {
                let until = Instant::now() + Duration::from_millis(20);
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
                1
            })
            .await;
        assert_eq!(result, Ok(1));
    }

    /// A job's limit starts when a worker starts it: time spent queued behind another job
    /// does not count against it.
    #[tokio::test]
    async fn a_queued_job_s_limit_starts_when_it_runs() {
        let pool = Pool::new(1, 0);
        let (release, blocked) = mpsc::channel::<()>();
        let limit = Duration::from_millis(50);
        let first = pool.run(ROOMY, move |_, _| {
            let _ = blocked.recv();
            Instant::now()
        });
        let second = pool.run(limit, |cancelled, deadline| {
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
    }

    /// Dropping the awaiting future raises the flag of a running job.
    #[tokio::test]
    async fn a_dropped_wait_cancels_the_running_job() {
        let pool = Pool::new(1, 0);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel::<bool>();
        let waiting = pool.run(ROOMY, move |cancelled, _| {
            let _ = started_tx.send(());
            while !cancelled.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            let _ = seen_tx.send(true);
        });
        let mut waiting = Box::pin(waiting);
        // Poll once so the job is queued, then drop the future once it runs.
        let _ = futures::poll!(&mut waiting);
        assert_eq!(started_rx.recv_timeout(WITHIN), Ok(()));
        drop(waiting);
        assert_eq!(seen_rx.recv_timeout(WITHIN), Ok(true));
    }

    /// A job whose wait was dropped while it was still queued never runs, and the worker
    /// serves the next one.
    #[tokio::test]
    async fn a_job_dropped_while_queued_never_runs() {
        let pool = Pool::new(1, 0);
        let (release, blocked) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let busy = pool.run(ROOMY, move |_, _| {
            let _ = started_tx.send(());
            let _ = blocked.recv();
        });
        let mut busy = Box::pin(busy);
        let _ = futures::poll!(&mut busy);
        assert_eq!(started_rx.recv_timeout(WITHIN), Ok(()));

        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let mut queued = Box::pin(pool.run(ROOMY, move |_, _| flag.store(true, Ordering::Relaxed)));
        let _ = futures::poll!(&mut queued);
        drop(queued);

        let _ = release.send(());
        assert_eq!(busy.await, Ok(()));
        assert_eq!(pool.run(ROOMY, |_, _| 3).await, Ok(3));
        assert!(!ran.load(Ordering::Relaxed));
        assert_eq!(pool.live(), 1);
    }
}
