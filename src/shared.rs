//! What every part of a runtime shares, and the operations doors, runs and the public
//! API all go through.
//!
//! Each operation is a message to the subject's actor through the registry, then an
//! await on the reply. Nothing here holds subject state; that is the actor's alone.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ractor::ActorRef;
use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::ask::Ask;
use crate::clock::Clock;
use crate::depth;
use crate::entry::{Entry, To};
use crate::error::{
    AskError, CancelError, IdProblem, Problems, ResumeError, StartError, TakeError,
};
use crate::event::{Event, Events};
use crate::ids::{Ids, Kind};
use crate::record::{Buffered, Resumed, RunRecord};
use crate::settings::{self, Settings};
use crate::subject::state::SubjectState;
use crate::subject::{Ack, SubjectMsg, Subjects};
use crate::supervisor::{Arming, SupervisorMsg, TimerKey};
use crate::target::Targets;

/// Who started a run.
#[derive(Debug, Clone)]
pub(crate) enum Parent {
    /// A door visit or the public API: the top of a chain.
    Top,
    /// Another run, through `ctx.call`.
    Run {
        /// The calling run.
        run: Arc<str>,
        /// Its lineage, which the child extends.
        lineage: Arc<[String]>,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct StartSpec {
    /// The subject to run on.
    pub(crate) subject: Arc<str>,
    /// The target's name.
    pub(crate) target: String,
    /// Its kwargs (a JSON object).
    pub(crate) kwargs: Value,
    /// Its extras (a JSON object of declared keys).
    pub(crate) extras: Value,
    /// The principal it runs as.
    pub(crate) identity: Arc<str>,
    /// Who started it.
    pub(crate) parent: Parent,
}

impl StartSpec {
    /// The spec back if its kwargs and extras are within the depth limit; else both are
    /// dropped level by level and the start is refused (`crate::depth`).
    fn checked(mut self) -> Result<Self, StartError> {
        let what = if depth::too_deep(&self.kwargs) {
            "kwargs"
        } else if depth::too_deep(&self.extras) {
            "extras"
        } else {
            return Ok(self);
        };
        depth::drop_deep(std::mem::take(&mut self.kwargs));
        depth::drop_deep(std::mem::take(&mut self.extras));
        Err(StartError::TooDeep {
            what,
            limit: depth::MAX_VALUE_DEPTH,
        })
    }
}

/// The resume payload for `interaction` if it is within the depth limit; else it is
/// dropped level by level and the resume refused (`crate::depth`).
pub(crate) fn checked_payload(interaction: &str, payload: Value) -> Result<Value, ResumeError> {
    depth::check(payload, || {
        ResumeError::Refused(IdProblem::TooDeep {
            id: interaction.to_owned(),
            limit: depth::MAX_VALUE_DEPTH,
        })
    })
}

/// The two concurrency ceilings, counted atomically so admission under a burst is exact.
#[derive(Debug, Default)]
pub(crate) struct Caps {
    /// Caller asks (`asking`, `running`) and waiting outcomes.
    pub(crate) caller: AtomicUsize,
    /// Open user asks.
    pub(crate) user: AtomicUsize,
}

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
/// it in the ask's entry. While it is held the activation counts as idle for `settle`;
/// sending the answer (or the expiry marker) or dropping it (a teardown) ends that.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Where the answer goes.
    tx: Option<oneshot::Sender<Value>>,
    /// The runtime's count of work in flight.
    inflight: Arc<Inflight>,
}

impl Waiter {
    /// Hold `tx` for the blocked activation.
    pub(crate) fn new(tx: oneshot::Sender<Value>, inflight: &Arc<Inflight>) -> Self {
        inflight.block();
        Self {
            tx: Some(tx),
            inflight: Arc::clone(inflight),
        }
    }

    /// Hand the answer to the blocked activation. Called inside a subject message, whose
    /// own unit in flight covers the activation until it is counted busy again.
    pub(crate) fn send(mut self, answer: Value) {
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

impl Drop for Waiter {
    fn drop(&mut self) {
        self.inflight.unblock();
    }
}

/// The shared core of a runtime.
pub(crate) struct Shared {
    /// The settings in force.
    pub(crate) settings: Settings,
    /// The one clock.
    pub(crate) clock: Arc<dyn Clock>,
    /// The one id source.
    pub(crate) ids: Ids,
    /// Registered targets.
    pub(crate) targets: Targets,
    /// Saved doors.
    pub(crate) doors: crate::door::registry::Doors,
    /// The interactions inbox of user asks.
    pub(crate) inbox: crate::inbox::Inbox,
    /// Every run's latest record, kept for the retention horizon after it ends.
    pub(crate) records: crate::record::Records,
    /// The subject registry.
    pub(crate) subjects: Subjects,
    /// The supervisor actor.
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    /// Arms and disarms the supervisor's timers.
    pub(crate) timers: Arming,
    /// The event stream.
    pub(crate) events: Events,
    /// The concurrency counters.
    pub(crate) caps: Caps,
    /// Timer sequence numbers.
    timer_seq: AtomicU64,
    /// Work not yet handled.
    pub(crate) inflight: Arc<Inflight>,
    /// Runs that have not ended, on every subject.
    pub(crate) runs: AtomicUsize,
    /// Set once the runtime stops taking work (`docs/semantics.md`, "Shutdown").
    closed: AtomicBool,
    /// Notified when `closed` is set.
    closing: Notify,
    /// Background tasks a shutdown waits for: the `submit` door's record writers.
    pub(crate) tasks: Tasks,
}

impl Shared {
    pub(crate) fn new(
        settings: Settings,
        clock: Arc<dyn Clock>,
        ids: Ids,
        supervisor: ActorRef<SupervisorMsg>,
        timers: Arming,
        event_capacity: usize,
    ) -> Self {
        Self {
            settings,
            clock,
            ids,
            targets: Targets::default(),
            doors: Default::default(),
            records: Default::default(),
            inbox: Default::default(),
            subjects: Subjects::default(),
            supervisor,
            timers,
            events: Events::new(event_capacity),
            caps: Caps::default(),
            timer_seq: AtomicU64::new(0),
            inflight: Arc::default(),
            runs: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            closing: Notify::new(),
            tasks: Tasks::default(),
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

    /// A fresh id.
    pub(crate) fn id(&self, kind: Kind) -> String {
        self.ids.next(kind)
    }

    /// A timer key firing at `at`.
    pub(crate) fn timer_key(&self, at: chrono::DateTime<chrono::Utc>) -> TimerKey {
        TimerKey {
            at,
            seq: self.timer_seq.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Admit one ask of `to` under its ceiling, atomically; refused at the cap.
    pub(crate) fn admit(&self, subject: &str, to: To) -> Result<(), AskError> {
        let (counter, limit, setting) = match to {
            To::Caller => (
                &self.caps.caller,
                self.settings.max_concurrent_caller,
                settings::MAX_CONCURRENT_CALLER,
            ),
            To::User => (
                &self.caps.user,
                self.settings.max_concurrent,
                settings::MAX_CONCURRENT,
            ),
        };
        let admitted = counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok();
        if admitted {
            Ok(())
        } else {
            self.events.publish(Event::CapRefused {
                subject: subject.to_owned(),
                setting: setting.to_owned(),
                limit,
            });
            Err(AskError::AtCap { setting, limit })
        }
    }

    /// Give back one unit of `to`'s ceiling (a waiting outcome counts as a caller ask).
    pub(crate) fn release(&self, to: To) {
        let counter = match to {
            To::Caller => &self.caps.caller,
            To::User => &self.caps.user,
        };
        // Saturating: a release never wraps the counter, even if miscounted.
        let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Count a waiting outcome: counted against the caller ceiling, never refused.
    pub(crate) fn count_waiting(&self) {
        self.caps.caller.fetch_add(1, Ordering::AcqRel);
    }

    /// Park an ask of `run` on `subject`; returns the interaction id.
    ///
    /// An async ask is one message with no reply: the run makes the interaction id, and
    /// the subject, which handles the run's messages in the order sent, stores the entry
    /// before anything the run does next. Only a sync ask, whose run blocks on the
    /// answer, waits to hear that it was stored.
    pub(crate) async fn park(
        self: &Arc<Self>,
        subject: &Arc<str>,
        run: &Arc<str>,
        epoch: u64,
        lineage: &Arc<[String]>,
        ask: Ask,
        waiter: Option<oneshot::Sender<Value>>,
    ) -> Result<String, AskError> {
        let checked = match ask.validate(self.clock.now(), self.settings.max_question_chars) {
            Ok(checked) => checked,
            Err(problems) => {
                ask.drop_deep();
                return Err(AskError::Invalid(Problems(problems)));
            }
        };
        self.admit(subject, ask.to)?;
        let to = ask.to;
        let id = self.id(Kind::Interaction);
        let (reply, rx) = waiter.is_some().then(oneshot::channel).unzip();
        let msg = SubjectMsg::Ask {
            run: Arc::clone(run),
            epoch,
            lineage: Arc::clone(lineage),
            ask,
            checked,
            id: id.clone(),
            waiter,
            reply,
        };
        let cancelled = || AskError::Cancelled {
            run: run.to_string(),
        };
        if self.subjects.send(self, subject, msg).await.is_err() {
            self.release(to);
            return Err(cancelled());
        }
        match rx {
            None => Ok(id),
            // The subject releases the unit itself when it refuses the ask.
            Some(rx) => rx.await.unwrap_or_else(|_| Err(cancelled())),
        }
    }

    /// Start a run; `receiver` gets its record when its activation ends.
    pub(crate) async fn start(
        self: &Arc<Self>,
        spec: StartSpec,
        receiver: Option<oneshot::Sender<RunRecord>>,
    ) -> Result<Arc<str>, StartError> {
        if spec.subject.is_empty() {
            return Err(StartError::EmptySubject);
        }
        let spec = spec.checked()?;
        if self.is_closed() {
            return Err(StartError::Stopped);
        }
        let target = self
            .targets
            .get(&spec.target)
            .ok_or_else(|| StartError::UnknownTarget(spec.target.clone()))?;
        if !spec.kwargs.is_object() {
            return Err(StartError::NotAnObject { what: "kwargs" });
        }
        let Value::Object(extras) = &spec.extras else {
            return Err(StartError::NotAnObject { what: "extras" });
        };
        let undeclared: Vec<String> = extras
            .keys()
            .filter(|k| !target.extras.contains(*k))
            .cloned()
            .collect();
        if !undeclared.is_empty() {
            return Err(StartError::UndeclaredExtras {
                target: spec.target,
                keys: undeclared,
            });
        }
        let (reply, rx) = oneshot::channel();
        let subject = Arc::clone(&spec.subject);
        let msg = SubjectMsg::Start {
            target,
            kwargs: spec.kwargs,
            extras: spec.extras,
            identity: spec.identity,
            parent: spec.parent,
            receiver,
            reply,
        };
        self.subjects
            .send(self, &subject, msg)
            .await
            .map_err(|_| StartError::Stopped)?;
        rx.await.map_err(|_| StartError::Stopped)
    }

    /// Start a run and wait for the record its first activation ends with.
    pub(crate) async fn run_to_end(
        self: &Arc<Self>,
        spec: StartSpec,
    ) -> Result<RunRecord, StartError> {
        let (tx, rx) = oneshot::channel();
        self.start(spec, Some(tx)).await?;
        rx.await.map_err(|_| StartError::Stopped)
    }

    /// Every parked entry on `subject`, oldest first. A subject without an actor is
    /// read as it is kept and not woken.
    pub(crate) async fn list(
        self: &Arc<Self>,
        subject: &Arc<str>,
    ) -> Result<Vec<Entry>, StartError> {
        if self.is_closed() {
            return Err(StartError::Stopped);
        }
        if let Some(entries) = self.subjects.read_idle(subject, SubjectState::list) {
            return Ok(entries);
        }
        let (reply, rx) = oneshot::channel();
        self.subjects
            .send(self, subject, SubjectMsg::List { reply })
            .await
            .map_err(|_| StartError::Stopped)?;
        rx.await.map_err(|_| StartError::Stopped)
    }

    /// Resume the ask `interaction` with `payload`, with a receiver for the outcome.
    pub(crate) async fn resume(
        self: &Arc<Self>,
        subject: &Arc<str>,
        interaction: &str,
        payload: Value,
        resumer: Option<Arc<str>>,
    ) -> Result<Resumed, ResumeError> {
        let payload = checked_payload(interaction, payload)?;
        if self.is_closed() {
            return Err(ResumeError::Stopped);
        }
        let (tx, outcome) = oneshot::channel();
        let (reply, rx) = oneshot::channel();
        let msg = SubjectMsg::Resume {
            interaction: interaction.to_owned(),
            payload,
            receiver: Some(tx),
            resumer,
            reply,
        };
        self.subjects
            .send(self, subject, msg)
            .await
            .map_err(|_| ResumeError::Stopped)?;
        match rx.await.map_err(|_| ResumeError::Stopped)? {
            Err(problem) => Err(ResumeError::Refused(problem)),
            Ok(Ack::Buffered { remaining }) => Ok(Resumed::Buffered {
                status: Buffered::Buffered,
                remaining,
            }),
            Ok(Ack::Started) => outcome
                .await
                .map(Resumed::Outcome)
                .map_err(|_| ResumeError::Stopped),
        }
    }

    /// Take the waiting outcome `interaction`.
    pub(crate) async fn take(
        self: &Arc<Self>,
        subject: &Arc<str>,
        interaction: &str,
        taker: Option<Arc<str>>,
    ) -> Result<Value, TakeError> {
        if self.is_closed() {
            return Err(TakeError::Stopped);
        }
        let (reply, rx) = oneshot::channel();
        let msg = SubjectMsg::Take {
            interaction: interaction.to_owned(),
            taker,
            reply,
        };
        self.subjects
            .send(self, subject, msg)
            .await
            .map_err(|_| TakeError::Stopped)?;
        match rx.await.map_err(|_| TakeError::Stopped)? {
            Err(problem) => Err(TakeError::Refused(problem)),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(TakeError::Failed {
                id: interaction.to_owned(),
                error,
            }),
        }
    }

    /// Cancel each of `ids`: all are checked first, and any problem refuses them all.
    pub(crate) async fn cancel(
        self: &Arc<Self>,
        subject: &Arc<str>,
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
    ) -> Result<(), CancelError> {
        if self.is_closed() {
            return Err(CancelError::Stopped);
        }
        let (reply, rx) = oneshot::channel();
        let msg = SubjectMsg::Cancel {
            ids,
            canceller,
            reply,
        };
        self.subjects
            .send(self, subject, msg)
            .await
            .map_err(|_| CancelError::Stopped)?;
        rx.await
            .map_err(|_| CancelError::Stopped)?
            .map_err(|p| CancelError::Refused(Problems(p)))
    }
}
