//! The hard half of the deadline guard: evaluations run on a few dedicated threads, and the
//! caller stops waiting when the deadline passes.
//!
//! The ticks of [`deadline`](super::deadline) stop the interpreter soon after its deadline,
//! and the guarded natives ([`guard`](super::guard)) every long native step. Running
//! evaluations on threads of their own still means:
//!
//! * the caller (typically an async task on a runtime worker) waits at most until the
//!   deadline, whatever the evaluation does. When it stops waiting it raises the job's
//!   cancellation flag, which the evaluation's next tick sees;
//! * a worker still busy with an abandoned evaluation is replaced at once, so other
//!   evaluations are not stalled behind it; when it finishes it exits. At most
//!   [`MAX_STUCK`] such workers exist at a time: past that, no more are replaced, and new
//!   evaluations wait in the queue (and meet their own deadlines) instead of piling up threads;
//! * the workers have large stacks. jaq recurses on nested values and programs, and an accepted
//!   expression such as `reduce range(100000) as $i (0; [.])` overflows the 2 MiB stack of an
//!   async runtime's worker, which aborts the process. The stack is reserved address space;
//!   only the pages used are committed.
//!
//! The price is a hand-off per evaluation: a queue push, a wake-up of a sleeping worker,
//! and a wake-up of the caller. Neither side spins while it waits: on a machine with as
//! many busy threads as cores (async workers and evaluation workers together), a
//! spinning thread takes the core from the one it waits for (the loss is measured in
//! `docs/benchmarks.md`). Threads cannot be
//! interrupted: an abandoned evaluation keeps its worker until its next tick or guarded
//! step sees the deadline, a few thousand units of work later.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Instant;

/// Stack size of a worker (and of a compilation thread): enough for the deepest values an
/// evaluation can build before its deadline, and for the deepest program a source within
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
    pub(super) shared: Arc<Shared>,
    /// The thread that gives up on awaited jobs at their deadlines, started on first use.
    pub(super) watchdog: OnceLock<super::watchdog::Watchdog>,
}

pub(super) struct Shared {
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
pub(super) type Task = Box<dyn FnOnce() -> Retire + Send>;

/// Whether a worker goes on serving after a task.
#[derive(PartialEq, Eq)]
pub(super) enum Retire {
    Stay,
    Leave,
}

/// The meeting point of a caller and the worker running its job.
struct Slot<T> {
    state: Mutex<State<T>>,
    /// Signalled when the job is done and the caller sleeps.
    done: Condvar,
    /// Raised when the caller stops waiting; the job's ticks read it.
    cancelled: AtomicBool,
}

enum State<T> {
    Queued,
    Running,
    Done(thread::Result<T>),
    /// The caller sleeps on `done`, waiting for the job.
    Waiting {
        running: bool,
    },
    /// The caller stopped waiting. `replaced` if a new worker was started in place of the one
    /// running the job, which must then exit when the job ends.
    Abandoned {
        replaced: bool,
    },
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

    /// Run `job` on a worker and wait for its result until `deadline`.
    ///
    /// The job is handed a flag that is raised when the caller stops waiting.
    ///
    /// If no worker could ever be started, the job runs on the calling thread: its own checks
    /// are then the only guard, which beats refusing every evaluation.
    pub(super) fn run<T, F>(&self, deadline: Instant, job: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&AtomicBool) -> T + Send + 'static,
    {
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Queued),
            done: Condvar::new(),
            cancelled: AtomicBool::new(false),
        });
        if self.shared.live.load(Ordering::Acquire) == 0 {
            return catch_unwind(AssertUnwindSafe(|| job(&slot.cancelled))).map_err(panic_message);
        }

        let task_slot = Arc::clone(&slot);
        let task: Task = Box::new(move || task_slot.work(job));
        self.shared.push(task);

        let mut state = lock(&slot.state);
        loop {
            if let Some(result) = state.take_done() {
                drop(state);
                return result.map_err(panic_message);
            }
            let running = matches!(*state, State::Running | State::Waiting { running: true });
            let now = Instant::now();
            if now >= deadline {
                // A job that never started costs nothing; one that is running keeps its worker
                // busy for an unknown time, so another worker takes its place. The state is
                // still locked, so the worker cannot finish in between and miss the decision.
                let replaced = running && self.replace_worker();
                *state = State::Abandoned { replaced };
                slot.cancelled.store(true, Ordering::Relaxed);
                return Err(Failure::Deadline);
            }
            *state = State::Waiting { running };
            state = slot
                .done
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Start a worker in place of a stuck one, unless too many are stuck already.
    fn replace_worker(&self) -> bool {
        self.shared.replace_worker()
    }

    /// Workers alive, including replaced ones still finishing an abandoned job.
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.shared.live.load(Ordering::Acquire)
    }
}

impl Shared {
    /// Start a worker in place of a stuck one, unless too many are stuck already.
    pub(super) fn replace_worker(self: &Arc<Self>) -> bool {
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

    /// Whether no worker could ever be started.
    pub(super) fn has_no_workers(&self) -> bool {
        self.live.load(Ordering::Acquire) == 0
    }

    /// Queue `task`, waking a worker if one sleeps.
    pub(super) fn push(&self, task: Task) {
        let mut queue = lock(&self.queue);
        queue.tasks.push_back(task);
        if queue.sleepers > 0 {
            self.queued.notify_one();
        }
    }
}

impl<T> State<T> {
    /// The result, if the job is done; the state is then `Abandoned`, as nobody waits any more.
    fn take_done(&mut self) -> Option<thread::Result<T>> {
        match std::mem::replace(self, State::Abandoned { replaced: false }) {
            State::Done(result) => Some(result),
            other => {
                *self = other;
                None
            }
        }
    }
}

impl<T> Slot<T> {
    /// Run the job unless its caller has given up on it, and hand over the result.
    fn work(&self, job: impl FnOnce(&AtomicBool) -> T) -> Retire {
        {
            let mut state = lock(&self.state);
            match *state {
                State::Queued => *state = State::Running,
                State::Waiting { running: false } => *state = State::Waiting { running: true },
                _ => return Retire::Stay,
            }
        }
        let result = catch_unwind(AssertUnwindSafe(|| job(&self.cancelled)));
        let mut state = lock(&self.state);
        match *state {
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
            State::Waiting { .. } => {
                *state = State::Done(result);
                self.done.notify_one();
                Retire::Stay
            }
            _ => {
                // The caller has not begun to wait: it finds the result when it does.
                *state = State::Done(result);
                Retire::Stay
            }
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

/// Lock, ignoring poisoning: jobs run outside every lock (and panics in them are caught), so
/// no lock is ever held across a panic that could leave its data half-updated.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn panic_message(payload: Box<dyn std::any::Any + Send>) -> Failure {
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

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// Wait (without sleeping) until `done` holds, for at most `within`.
    fn eventually(within: Duration, done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + within;
        while !done() {
            if Instant::now() > until {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    #[test]
    fn results_come_back() {
        let pool = Pool::new(2, 0);
        for i in 0..100 {
            assert_eq!(pool.run(later(), move |_| i * 2), Ok(i * 2));
        }
    }

    #[test]
    fn a_panicking_job_is_reported_and_the_worker_survives() {
        let pool = Pool::new(1, 0);
        let result = pool.run(later(), |_| -> u8 { panic!("boom") });
        assert_eq!(result, Err(Failure::Panicked("boom".to_owned())));
        assert_eq!(pool.run(later(), |_| 7), Ok(7));
        assert_eq!(pool.live(), 1);
    }

    #[test]
    fn a_stuck_worker_is_replaced_and_exits_when_its_job_ends() {
        let pool = Pool::new(1, 1);
        let (release, blocked) = mpsc::channel::<()>();
        let saw_cancel = Arc::new(AtomicBool::new(false));
        let saw = Arc::clone(&saw_cancel);
        let started = Instant::now();
        let result = pool.run(soon(), move |cancelled| {
            let _ = blocked.recv();
            saw.store(cancelled.load(Ordering::Relaxed), Ordering::Relaxed);
        });
        assert_eq!(result, Err(Failure::Deadline));
        assert!(started.elapsed() < Duration::from_secs(2));

        // The replacement serves at once while the stuck worker still blocks.
        assert_eq!(pool.live(), 2);
        assert_eq!(pool.run(later(), |_| 1), Ok(1));

        // Only one replacement at a time: a second stuck job is not replaced.
        let (release_too, blocked_too) = mpsc::channel::<()>();
        let result = pool.run(soon(), move |_| {
            let _ = blocked_too.recv();
        });
        assert_eq!(result, Err(Failure::Deadline));
        assert_eq!(pool.live(), 2);

        // Released, the first stuck worker saw the cancellation and exits; the second stays.
        let _ = release.send(());
        assert!(eventually(Duration::from_secs(5), || pool.live() == 1));
        assert!(saw_cancel.load(Ordering::Relaxed));
        let _ = release_too.send(());
        assert_eq!(pool.run(later(), |_| 2), Ok(2));
        assert_eq!(pool.live(), 1);
    }

    #[test]
    fn a_job_still_queued_at_its_deadline_never_runs() {
        let pool = Pool::new(1, 0);
        let (release, blocked) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        // Occupy the only worker from another thread.
        let occupied = std::thread::scope(|scope| {
            let busy = scope.spawn(|| {
                pool.run(later(), move |_| {
                    let _ = started_tx.send(());
                    let _ = blocked.recv();
                })
            });
            let _ = started_rx.recv();

            let ran = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&ran);
            let result = pool.run(soon(), move |_| flag.store(true, Ordering::Relaxed));
            assert_eq!(result, Err(Failure::Deadline));

            let _ = release.send(());
            let occupied = busy.join().map_err(drop);
            // The worker skipped the abandoned job and serves the next one.
            assert_eq!(pool.run(later(), |_| 3), Ok(3));
            assert!(!ran.load(Ordering::Relaxed));
            occupied
        });
        assert_eq!(occupied, Ok(Ok(())));
        assert_eq!(pool.live(), 1);
    }

    #[test]
    fn a_deadline_already_passed_gives_up_at_once() {
        let pool = Pool::new(1, 0);
        let started = Instant::now();
        // A worker quick enough to finish before the caller looks may still deliver.
        let result = pool.run(started, |_| 1);
        assert!(
            matches!(result, Ok(1) | Err(Failure::Deadline)),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(pool.run(later(), |_| 2), Ok(2));
    }
}
