//! The leaf services every part of a runtime shares: settings, the clock, the id source,
//! the targets, the event stream, the ceilings, the timer handle, and the count of work in
//! flight. Nothing here knows a subject, a door or a run; the operations on subjects are
//! in `crate::subject::client`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::entry::To;
use crate::error::AskError;
use crate::event::{Event, Events};
use crate::ids::Ids;
use crate::settings::{self, Settings};
use crate::supervisor::{Arming, TimerKeys};
use crate::target::Targets;

/// Messages and activations not yet handled, so a test or a simulation can wait until
/// the runtime has nothing left to do.
///
/// An activation blocked in a `sync` user ask stays counted, but is also counted as
/// `blocked` for as long as its subject holds the ask's [`Waiter`]: it waits for an answer
/// or for its timeout, neither of which comes unless someone answers or the clock moves,
/// so the runtime is quiet when every unit in flight is such an activation.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    /// How many.
    count: AtomicUsize,
    /// How many of them are activations blocked in a `sync` ask.
    blocked: AtomicUsize,
    /// Notified whenever the count falls to the blocked ones.
    zero: Notify,
}

impl Inflight {
    pub(crate) fn add(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn done(&self) {
        let left = self.count.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        if left <= self.blocked.load(Ordering::Acquire) {
            self.zero.notify_waiters();
        }
    }

    /// An activation in flight is now blocked in a `sync` ask.
    fn block(&self) {
        self.blocked.fetch_add(1, Ordering::AcqRel);
        if self.is_quiet() {
            self.zero.notify_waiters();
        }
    }

    /// The blocked activation was answered, timed out or torn down.
    fn unblock(&self) {
        let _ = self
            .blocked
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Wait until nothing is in flight but activations blocked in a `sync` ask.
    pub(crate) async fn quiet(&self) {
        loop {
            let notified = self.zero.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_quiet() {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn is_quiet(&self) -> bool {
        self.count.load(Ordering::Acquire) <= self.blocked.load(Ordering::Acquire)
    }

    /// Count one unit in flight until the returned guard is dropped or handed on with
    /// [`Pending::handed_on`]. A sender whose future is dropped half-way (a run actor
    /// killed by a teardown while it waits on a passivating subject, a caller's
    /// timeout) gives its unit back instead of leaving `settle` waiting forever.
    pub(crate) fn pending(&self) -> Pending<'_> {
        self.add();
        Pending {
            inflight: Some(self),
        }
    }
}

/// One unit in flight, given back on drop unless handed on to whoever completes it.
#[must_use]
pub(crate) struct Pending<'a> {
    /// `None` once handed on.
    inflight: Option<&'a Inflight>,
}

impl Pending<'_> {
    /// The unit now belongs to the message that carries it; its handler calls `done`.
    pub(crate) fn handed_on(mut self) {
        self.inflight = None;
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(inflight) = self.inflight.take() {
            inflight.done();
        }
    }
}

/// The answer channel of an activation blocked in a `sync` user ask, as its subject holds
/// it in the ask's entry. While the activation waits the runtime counts it as idle for
/// `settle`; that ends once, at whichever comes first: the subject sends the answer (or
/// the expiry marker) or drops the waiter (a teardown), or the activation stops waiting
/// (its [`Blocked`] guard is dropped, say by a `select!` that took another branch).
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Where the answer goes.
    tx: Option<oneshot::Sender<Value>>,
    blocked: Blocked,
}

/// One activation counted as blocked in a `sync` ask, until the first of its two holders
/// (the subject's [`Waiter`], the asking future) lets go.
#[derive(Debug)]
pub(crate) struct Blocked {
    /// Cleared by whichever holder lets go first.
    still: Arc<AtomicBool>,
    inflight: Arc<Inflight>,
}

impl Blocked {
    fn end(&self) {
        if self.still.swap(false, Ordering::AcqRel) {
            self.inflight.unblock();
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        self.end();
    }
}

impl Waiter {
    /// The waiter for `tx`, and the guard the asking future holds while it waits.
    pub(crate) fn new(tx: oneshot::Sender<Value>, inflight: &Arc<Inflight>) -> (Self, Blocked) {
        inflight.block();
        let still = Arc::new(AtomicBool::new(true));
        let blocked = || Blocked {
            still: Arc::clone(&still),
            inflight: Arc::clone(inflight),
        };
        let waiter = Self {
            tx: Some(tx),
            blocked: blocked(),
        };
        (waiter, blocked())
    }

    /// Hand the answer to the blocked activation. Called inside a subject message, whose
    /// own unit in flight covers the activation until it is counted busy again.
    pub(crate) fn send(mut self, answer: Value) {
        self.blocked.end();
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(answer);
        }
    }
}

/// Tasks a shutdown waits for, kept by their join handles. Finished ones are pruned
/// as new ones come, so the list stays about as long as the tasks alive.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    /// The handles, and the length at which the next push prunes finished ones.
    list: Mutex<(Vec<JoinHandle<()>>, usize)>,
}

impl Tasks {
    /// Keep `task`, to be waited for at shutdown.
    pub(crate) fn push(&self, task: JoinHandle<()>) {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        let (handles, prune_at) = &mut *list;
        if handles.len() >= *prune_at {
            handles.retain(|h| !h.is_finished());
            *prune_at = (handles.len() * 2).max(64);
        }
        handles.push(task);
    }

    /// Whether every task kept has ended (a simulation waits for a slot given up to be
    /// unloaded).
    pub(crate) fn all_ended(&self) -> bool {
        let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.0.iter().all(JoinHandle::is_finished)
    }

    /// Wait until every task kept, including any kept meanwhile, has ended.
    pub(crate) async fn join(&self) {
        loop {
            let handles =
                std::mem::take(&mut self.list.lock().unwrap_or_else(PoisonError::into_inner).0);
            if handles.is_empty() {
                return;
            }
            for handle in handles {
                // A task that panicked or was aborted has ended all the same.
                let _ = handle.await;
            }
        }
    }
}

/// The leaf services of a runtime.
pub(crate) struct Services {
    pub(crate) settings: Settings,
    /// The one clock.
    pub(crate) clock: Arc<dyn Clock>,
    /// The one id source.
    pub(crate) ids: Ids,
    /// Registered targets.
    pub(crate) targets: Targets,
    /// The targets offered as tools.
    pub(crate) tools: crate::tool_spec::Tools,
    pub(crate) events: Events,
    /// What the ceilings count, and the runs not ended, by slot.
    pub(crate) caps: crate::caps::Caps,
    /// The slots this runtime does not own.
    pub(crate) away: crate::slot::Away,
    /// Arms and disarms the supervisor's timers.
    pub(crate) timers: Arming,
    /// Timer keys, unique across the runtime.
    pub(crate) keys: TimerKeys,
    /// Work not yet handled.
    pub(crate) inflight: Arc<Inflight>,
    /// Set once the runtime stops taking work (`docs/semantics.md`, "Shutdown").
    closed: AtomicBool,
    /// Notified when `closed` is set.
    closing: Notify,
    /// The durable store, when the runtime was given a data directory; `None` runs in
    /// memory.
    pub(crate) store: Option<crate::store::Store>,
    /// Background tasks a shutdown waits for: the `submit` door's record writers, the
    /// deliveries of the supervisor's answers.
    pub(crate) tasks: Tasks,
    /// The damage met in the data directory (`Runtime::health`).
    pub(crate) damage: crate::health::Damage,
    /// The durable path's stages, when measured (`Builder::measure_stages`).
    pub(crate) stages: Option<Arc<dyn crate::StageSink>>,
    /// On a database nodes share, what the other nodes hold under the ceilings.
    pub(crate) cluster: std::sync::OnceLock<Arc<crate::store::owners::Counted>>,
    /// On a database nodes share, this node's number: its timer keys are made in a
    /// range of its own, and their counter kept under a key of its own.
    pub(crate) node: std::sync::OnceLock<u32>,
}

impl Services {
    pub(crate) fn new(
        settings: Settings,
        clock: Arc<dyn Clock>,
        ids: Ids,
        timers: Arming,
        event_capacity: usize,
    ) -> Self {
        Self {
            settings,
            clock,
            ids,
            targets: Targets::default(),
            tools: Default::default(),
            events: Events::new(event_capacity),
            caps: Default::default(),
            away: Default::default(),
            timers,
            keys: TimerKeys::default(),
            inflight: Arc::default(),
            closed: AtomicBool::new(false),
            closing: Notify::new(),
            tasks: Tasks::default(),
            store: None,
            damage: crate::health::Damage::default(),
            stages: None,
            cluster: std::sync::OnceLock::new(),
            node: std::sync::OnceLock::new(),
        }
    }

    /// `subject` may be served here now: its slot is not away, and on a store whose
    /// slots have owners, its lease's time to be served has not passed unrenewed (a
    /// node paused past its lease, before its next round, serves nothing of the slot,
    /// not even a read: the store gives it up and tells the runtime).
    pub(crate) fn check_served(&self, subject: &str) -> Result<(), crate::StoreFault> {
        self.away.check(subject)?;
        if self.node.get().is_none() {
            return Ok(());
        }
        let slot = crate::slot::Slot::of(subject);
        match &self.store {
            Some(store) if !store.serves(slot) => Err(crate::StoreFault::not_owner(subject, slot)),
            _ => Ok(()),
        }
    }

    /// Stop taking work: every operation from now on is refused as stopped.
    pub(crate) fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.closing.notify_waiters();
        }
    }

    /// Whether the runtime has stopped taking work.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Wait until the runtime stops taking work.
    pub(crate) async fn closed(&self) {
        let closing = self.closing.notified();
        tokio::pin!(closing);
        closing.as_mut().enable();
        if self.is_closed() {
            return;
        }
        closing.await;
    }

    /// Publish `event`, which no subject's change carries (a visit refused before it
    /// reached its subject, a ceiling refusing an ask, a record dropped): on a durable
    /// runtime it is appended to the event log in `batch` (alone when `batch` is empty)
    /// and shown once durable, with its number, like every other logged event; in memory,
    /// at once. It counts as work in flight until shown, so `settle` waits for it.
    pub(crate) fn publish_alone(&self, event: Event, batch: crate::store::Batch) {
        self.publish_alone_then(event, batch, Box::new(|| {}));
    }

    /// [`Services::publish_alone`], calling `then` once the event is shown (or will never
    /// be: the store failed), from the store's writer thread; at once in memory.
    pub(crate) fn publish_alone_then(
        &self,
        event: Event,
        mut batch: crate::store::Batch,
        then: Box<dyn FnOnce() + Send>,
    ) {
        let Some(store) = &self.store else {
            self.events.publish(event);
            return then();
        };
        match serde_json::to_vec(&event) {
            Ok(bytes) => {
                batch.append_log(bytes);
            }
            // Not expected: an event is plain data.
            Err(error) => tracing::error!(%error, ?event, "an event could not be logged"),
        }
        let (events, inflight) = (self.events.clone(), Arc::clone(&self.inflight));
        inflight.add();
        store.submit(
            batch,
            Box::new(move |result| {
                // A failed write stops the runtime (the subject whose change failed
                // says so); what it held is not shown.
                if let Ok(receipt) = result {
                    events.publish_logged(receipt.log, event);
                }
                inflight.done();
                then();
            }),
        );
    }

    /// What this node admits of a ceiling of `limit`: all of it alone; on a database
    /// nodes share, its share by the slots it owns, and no more than the other nodes
    /// left of it as last read (`docs/postgres.md`, "Ceilings across nodes").
    fn node_limit(&self, to: To, limit: usize) -> usize {
        let Some(cluster) = self.cluster.get() else {
            return limit;
        };
        let owned = usize::from(crate::slot::Slot::COUNT).saturating_sub(self.away.count());
        crate::store::owners::share_of(limit, owned).min(limit.saturating_sub(cluster.others(to)))
    }

    /// Admit one ask of `to` on `subject` under its ceiling, atomically; refused at the
    /// cap (on a database nodes share, at this node's part of it). The admission is
    /// given back unless it is handed on.
    pub(crate) fn admit(
        &self,
        subject: &str,
        to: To,
    ) -> Result<crate::caps::Admission<'_>, AskError> {
        let (limit, setting) = match to {
            To::Caller => (
                self.settings.max_concurrent_caller,
                settings::MAX_CONCURRENT_CALLER,
            ),
            To::User => (self.settings.max_concurrent, settings::MAX_CONCURRENT),
        };
        let limit = self.node_limit(to, limit);
        if let Some(admitted) = self.caps.admit(crate::slot::Slot::of(subject), to, limit) {
            Ok(admitted)
        } else {
            self.publish_alone(
                Event::CapRefused {
                    subject: subject.to_owned(),
                    setting: setting.to_owned(),
                    limit,
                },
                crate::store::Batch::new(),
            );
            Err(AskError::AtCap { setting, limit })
        }
    }
}
