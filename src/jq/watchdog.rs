//! The thread that gives up on the pool's jobs at their deadlines.
//!
//! A caller awaiting a job on the [`pool`](super::pool) holds no thread, so something else
//! must notice when the job's time is up. The deadline is kept by a thread of the pool's
//! own, on the real clock, not by an async timer: a runtime with paused time would
//! otherwise jump to the deadline as soon as it went idle waiting for a result. At the
//! deadline, a job still running is abandoned: its cancellation flag is raised, its caller
//! told, and its worker replaced (within [`MAX_STUCK`](super::pool::MAX_STUCK)); see
//! [`Expire`].
//!
//! It deliberately holds the jobs weakly: a job that ended is dropped by its caller and the
//! worker, and its entry here then expires nothing. It knows nothing of the pool either:
//! it holds the pool's shared state (`P`) weakly, hands it to the job it gives up on, and
//! stops when it is gone; the pool builds on it, not the other way round.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread;
use std::time::Instant;

use crate::sync::lock;

/// Something the watchdog can give up on, run by a pool whose shared state is a `P`.
pub(super) trait Expire<P>: Send + Sync {
    /// The deadline has passed: give up unless the job is done, replacing its worker in
    /// `pool` if it still runs.
    fn expire(&self, pool: &Arc<P>);
}

/// The deadlines of every started job, earliest first, and the thread that keeps them.
/// Cheap to clone: clones share the thread.
pub(super) struct Watchdog<P> {
    inner: Arc<Inner<P>>,
}

// Not derived: a derive would require `P: Clone`, and only the `Arc` is cloned.
impl<P> Clone for Watchdog<P> {
    fn clone(&self) -> Self {
        Watchdog {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<P> {
    due: Mutex<Heap<P>>,
    /// Signalled when a deadline earlier than every other is added.
    earlier: Condvar,
}

struct Heap<P> {
    heap: BinaryHeap<Reverse<Due<P>>>,
    seq: u64,
}

/// One deadline the watchdog keeps.
struct Due<P> {
    at: Instant,
    seq: u64,
    job: Weak<dyn Expire<P>>,
}

impl<P> PartialEq for Due<P> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<P> Eq for Due<P> {}

impl<P> PartialOrd for Due<P> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<P> Ord for Due<P> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<P: Send + Sync + 'static> Watchdog<P> {
    /// Start the watchdog thread of `pool`. If the thread cannot start, jobs still end by
    /// their own ticks; only a job stuck in one native step is then not given up on.
    pub(super) fn start(pool: &Arc<P>) -> Watchdog<P> {
        let inner = Arc::new(Inner {
            due: Mutex::new(Heap {
                heap: BinaryHeap::new(),
                seq: 0,
            }),
            earlier: Condvar::new(),
        });
        let (watched, shared) = (Arc::clone(&inner), Arc::downgrade(pool));
        let _ = thread::Builder::new()
            .name("door-expr-watch".to_owned())
            .spawn(move || watch(&watched, &shared));
        Watchdog { inner }
    }

    /// Give up on `job` at `at`.
    pub(super) fn keep(&self, at: Instant, job: Weak<dyn Expire<P>>) {
        let mut due = lock(&self.inner.due);
        let earliest = due.heap.peek().is_none_or(|Reverse(d)| at < d.at);
        due.seq += 1;
        let seq = due.seq;
        due.heap.push(Reverse(Due { at, seq, job }));
        if earliest {
            self.inner.earlier.notify_one();
        }
    }
}

/// The watchdog's loop: sleep until the earliest deadline, give up on whatever is still
/// pending then. Ends when the pool is gone.
fn watch<P>(inner: &Inner<P>, pool: &Weak<P>) {
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
