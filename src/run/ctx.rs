//! [`Ctx`]: what a target sees of its run.
//!
//! A context belongs to one activation. It replays the run's journal (see
//! [`journal`](super::journal)) and appends what the activation does past its end.
//! Operations are meant to be awaited one after another: the journal is an ordered
//! list, and a replay must meet the same operations in the same order.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;

use crate::ask::Ask;
use crate::entry::Entry;
use crate::error::{AskError, CancelError, CtxError, ResumeError, Suspension, TakeError};
use crate::record::{Resumed, RunRecord};
use crate::run::journal::JournalEntry;
use crate::run::port::{Asker, Parent, Port, Replay, StartSpec};
use crate::services::Waiter;

/// A run's context: its identity, and the operations a target performs.
#[derive(Clone)]
pub struct Ctx {
    /// Shared by every clone; the context lives as long as its activation.
    inner: Arc<Inner>,
}

struct Inner {
    port: Arc<dyn Port>,
    run_id: Arc<str>,
    target: Arc<str>,
    identity: Arc<str>,
    subject: Arc<str>,
    /// Target names from this run up to the top of its chain.
    lineage: Arc<[String]>,
    /// The calling run, for a child run.
    parent: Option<Arc<str>>,
    /// Which activation of the run this is.
    epoch: u64,
    /// The replay cursor; a std mutex because it is never held across an await.
    replay: Mutex<Replay>,
    /// For a new run on a durable runtime: set once its start is durable, which a step
    /// waits for (`None`: nothing to wait for).
    started: Option<watch::Receiver<bool>>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("run_id", &self.inner.run_id)
            .field("target", &self.inner.target)
            .field("subject", &self.inner.subject)
            .finish_non_exhaustive()
    }
}

/// What the recorded entry at the cursor says about the next operation.
enum Recorded<T> {
    /// Replay is over: do it for real.
    Fresh,
    /// The recorded value.
    Replayed(T),
}

/// A step's result as the journal keeps it, or why not. A `Value` is checked for depth
/// before it is serialised or dropped, since both recurse once per level; any other type
/// is checked once serialised.
fn step_value<T: Serialize + 'static>(name: &str, mut value: T) -> Result<Value, String> {
    let too_deep = || {
        format!(
            "step {name:?} returned a value nested deeper than {} levels",
            crate::MAX_VALUE_DEPTH
        )
    };
    if let Some(json) = (&mut value as &mut dyn std::any::Any).downcast_mut::<Value>() {
        let json = std::mem::take(json);
        return crate::depth::check(json, too_deep);
    }
    let json = serde_json::to_value(value).map_err(|e| e.to_string())?;
    crate::depth::check(json, too_deep)
}

impl Ctx {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        port: Arc<dyn Port>,
        run_id: Arc<str>,
        target: Arc<str>,
        identity: Arc<str>,
        subject: Arc<str>,
        lineage: Arc<[String]>,
        parent: Option<Arc<str>>,
        epoch: u64,
        journal: Vec<JournalEntry>,
        started: Option<watch::Receiver<bool>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                port,
                run_id,
                target,
                identity,
                subject,
                lineage,
                parent,
                epoch,
                replay: Mutex::new(Replay {
                    journal,
                    ..Replay::default()
                }),
                started,
            }),
        }
    }

    /// Wait until the run's start is durable, if it is not yet: a step is the one thing
    /// an activation does outside the runtime, and none may be done for a run a crash
    /// could forget.
    async fn started(&self) -> Result<(), CtxError> {
        let Some(started) = &self.inner.started else {
            return Ok(());
        };
        if *started.borrow() {
            return Ok(());
        }
        let mut started = started.clone();
        started.wait_for(|durable| *durable).await.map_err(|_| {
            CtxError::Failed("the runtime stopped before the run's start was durable".to_owned())
        })?;
        Ok(())
    }

    /// This run's id, the same on every activation.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The target this run executes.
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// The principal the run runs as; a resume keeps it.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The subject the run lives on.
    pub fn subject(&self) -> &str {
        &self.inner.subject
    }

    /// The subject's name as the runtime shares it.
    pub(crate) fn subject_name(&self) -> &Arc<str> {
        &self.inner.subject
    }

    /// The target names from this run up to the top of its chain.
    pub fn lineage(&self) -> &[String] {
        &self.inner.lineage
    }

    /// The calling run's id, for a child run.
    pub(crate) fn parent(&self) -> Option<&Arc<str>> {
        self.inner.parent.as_ref()
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.inner.epoch
    }

    pub(crate) fn port(&self) -> &Arc<dyn Port> {
        &self.inner.port
    }

    fn replay(&self) -> MutexGuard<'_, Replay> {
        // A poisoned lock only means a target panicked mid-operation; the data is a
        // list we only push to, so it is still sound.
        self.inner
            .replay
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hand the journal and what the activation did back at its end.
    pub(crate) fn finish(&self) -> Replay {
        std::mem::take(&mut *self.replay())
    }

    /// Look at the recorded entry at the cursor; `matches` picks out the value when the
    /// entry is the same operation, anything else is a divergence.
    fn recorded<T>(
        &self,
        what: &str,
        matches: impl FnOnce(&JournalEntry) -> Option<T>,
    ) -> Result<Recorded<T>, String> {
        let mut replay = self.replay();
        let cursor = replay.cursor;
        let Some(entry) = replay.journal.get(cursor) else {
            return Ok(Recorded::Fresh);
        };
        match matches(entry) {
            Some(value) => {
                replay.cursor += 1;
                Ok(Recorded::Replayed(value))
            }
            None => {
                let message = format!(
                    "run {} diverged from its journal at entry {cursor}: recorded {}, replay met {what}",
                    self.inner.run_id,
                    entry.describe()
                );
                replay.diverged.get_or_insert_with(|| message.clone());
                Err(message)
            }
        }
    }

    fn append(&self, entry: JournalEntry) {
        let mut replay = self.replay();
        replay.journal.push(entry);
        replay.cursor = replay.journal.len();
    }

    /// Ask: park this run on its subject and return the suspension sentinel, or, on a
    /// replay, return the answer the ask was resumed with.
    ///
    /// Several asks made before the activation ends form one group: the run resumes
    /// once, when the last of them is resolved. An `on_expiry = resume` ask that lapsed
    /// answers with the [`expiry_marker`](crate::expiry_marker).
    pub async fn ask(&self, ask: Ask) -> Result<Value, AskError> {
        let what = match &ask.question {
            Some(q) => format!("ask {q:?}"),
            None => "ask (payload only)".to_owned(),
        };
        let recorded = self.recorded(&what, |entry| match entry {
            JournalEntry::Ask {
                question,
                answer: Some(answer),
                ..
            } if *question == ask.question => Some(answer.clone()),
            _ => None,
        });
        match recorded {
            Ok(Recorded::Replayed(answer)) => return Ok(answer),
            Err(message) => return Err(AskError::Diverged(message)),
            Ok(Recorded::Fresh) => {}
        }
        let question = ask.question.clone();
        let sync = ask.mode == crate::ask::Mode::Sync;
        let (waiter, answered) = sync.then(tokio::sync::oneshot::channel).unzip();
        // A sync ask counts its activation idle while it waits for the answer; the guard
        // ends that if this future is dropped before the answer comes.
        let (waiter, blocked) = waiter
            .map(|tx| Waiter::new(tx, &self.inner.port.services().inflight))
            .unzip();
        let asker = Asker {
            subject: &self.inner.subject,
            run: &self.inner.run_id,
            epoch: self.inner.epoch,
            lineage: &self.inner.lineage,
        };
        let parked = Arc::clone(&self.inner.port).park(asker, ask, waiter).await;
        let interaction = match parked {
            Ok(interaction) => interaction,
            Err(refused @ (AskError::AtCap { .. } | AskError::Invalid(_))) => {
                self.replay()
                    .refused
                    .get_or_insert_with(|| refused.to_string());
                return Err(refused);
            }
            Err(other) => return Err(other),
        };
        if let Some(answered) = answered {
            // A sync user ask: block until answered, or until the timeout hands back the
            // expiry marker. A dropped waiter means the run is being torn down.
            let answer = answered.await.map_err(|_| AskError::Cancelled {
                run: self.inner.run_id.to_string(),
            });
            drop(blocked);
            let answer = answer?;
            self.append(JournalEntry::Ask {
                interaction,
                question,
                answer: Some(answer.clone()),
            });
            return Ok(answer);
        }
        self.append(JournalEntry::Ask {
            interaction: interaction.clone(),
            question,
            answer: None,
        });
        Err(AskError::Suspended(Suspension { interaction }))
    }

    /// Wait `duration` on the runtime's clock, as a park the run's timer ends: the
    /// activation ends here (the sentinel is returned, to propagate with `?`), and the
    /// run is resumed when the deadline passes, on a restarted runtime too (the timer is
    /// durable). The park is a caller ask with no question and the payload
    /// `{"wait": "<duration>"}` ([`Entry::is_wait`]); it counts toward
    /// `INTERACTIONS_MAX_CONCURRENT_CALLER` while it stands. Cancelling it tears the
    /// run's chain down, as any caller ask's cancel does; resuming it early ends the
    /// wait early. A zero duration returns at once without parking.
    ///
    /// The run's outcome after a wait goes to its record and to whoever resumed it; a
    /// wait that ran out leaves no waiting outcome on the subject.
    pub async fn wait(&self, duration: std::time::Duration) -> Result<(), AskError> {
        if duration.is_zero() {
            return Ok(());
        }
        let text = humantime::format_duration(duration).to_string();
        let ask = Ask::caller_payload(serde_json::json!({ crate::WAIT_KEY: text }))
            .expiry_at(duration)
            .on_expiry(crate::OnExpiry::Resume);
        self.ask(ask).await.map(|_| ())
    }

    /// Report how far the run's work has come: `progress` (which should grow with each
    /// report) of `total`, when known, with a message. A note shown at once as
    /// [`Event::RunProgress`](crate::Event::RunProgress) (the MCP face relays it to the
    /// caller as `notifications/progress`), not journaled: while an activation replays
    /// what an earlier one did, its reports are not shown again.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        {
            let replay = self.replay();
            if replay.cursor < replay.journal.len() {
                return;
            }
        }
        self.inner
            .port
            .services()
            .events
            .publish(crate::Event::RunProgress {
                subject: self.inner.subject.to_string(),
                run: self.inner.run_id.to_string(),
                progress,
                total,
                message: message.map(str::to_owned),
            });
    }

    /// Run a side effect once: its result is journaled, and a replay returns the
    /// recorded result instead of running `f` again. Anything non-deterministic (a model
    /// call, I/O, a clock read, a random draw) belongs in a step.
    ///
    /// A result nested deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH) fails the
    /// step (and is journaled as that failure).
    pub async fn step<T, E, F, Fut>(&self, name: &str, f: F) -> Result<T, CtxError>
    where
        T: Serialize + DeserializeOwned + 'static,
        E: std::fmt::Display,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let recorded = self.recorded(&format!("step {name:?}"), |entry| match entry {
            JournalEntry::Step { name: n, result } if n == name => Some(result.clone()),
            _ => None,
        });
        let result = match recorded {
            Ok(Recorded::Replayed(result)) => result,
            Err(message) => return Err(CtxError::Failed(message)),
            Ok(Recorded::Fresh) => {
                self.started().await?;
                let result = match f().await {
                    Ok(value) => step_value(name, value),
                    Err(e) => Err(e.to_string()),
                };
                self.append(JournalEntry::Step {
                    name: name.to_owned(),
                    result: result.clone(),
                });
                result
            }
        };
        match result {
            Ok(value) => serde_json::from_value(value).map_err(|e| {
                CtxError::Failed(format!(
                    "step {name:?} recorded a value of another type: {e}"
                ))
            }),
            Err(message) => Err(CtxError::Failed(message)),
        }
    }

    /// Start a child run of `target` on this subject and return its record once the
    /// child's activation ends: `succeeded`, `failed`, `cancelled`, or `parked` with the
    /// asks it raised to this run. Journaled: a replay returns the recorded record and
    /// never starts the child again.
    pub async fn call(&self, target: &str, kwargs: Value) -> Result<RunRecord, CtxError> {
        let recorded = self.recorded(&format!("call of {target:?}"), |entry| match entry {
            JournalEntry::Call { target: t, record } if t == target => {
                Some(RunRecord::clone(record))
            }
            _ => None,
        });
        match recorded {
            Ok(Recorded::Replayed(record)) => return Ok(record),
            Err(message) => return Err(CtxError::Failed(message)),
            Ok(Recorded::Fresh) => {}
        }
        let spec = StartSpec {
            subject: Arc::clone(&self.inner.subject),
            target: target.to_owned(),
            kwargs,
            extras: Value::Object(Default::default()),
            identity: Arc::clone(&self.inner.identity),
            parent: Parent::Run {
                run: Arc::clone(&self.inner.run_id),
                lineage: Arc::clone(&self.inner.lineage),
            },
            key: None,
        };
        let record = Arc::clone(&self.inner.port)
            .run_to_end(spec)
            .await
            .map_err(|e| CtxError::Failed(e.to_string()))?;
        self.append(JournalEntry::Call {
            target: target.to_owned(),
            record: Box::new(record.clone()),
        });
        Ok(record)
    }

    /// Every parked entry on this run's subject, oldest first. Journaled as a step.
    pub async fn list_parked(&self) -> Result<Vec<Entry>, CtxError> {
        let port = Arc::clone(&self.inner.port);
        let subject = Arc::clone(&self.inner.subject);
        self.step("list_parked", || async move {
            port.list(&subject).await.map_err(|e| e.to_string())
        })
        .await
    }

    /// Resume the ask `interaction` on this subject with `payload`; this run is the
    /// receiver of the resumed run's next outcome. Journaled as a step, refusal included:
    /// a refusal is [`CtxError::Resolution`].
    pub async fn resume_parked(
        &self,
        interaction: &str,
        payload: Value,
    ) -> Result<Resumed, CtxError<ResumeError>> {
        let port = Arc::clone(&self.inner.port);
        let subject = Arc::clone(&self.inner.subject);
        let run = Arc::clone(&self.inner.run_id);
        let result = self
            .step(&format!("resume_parked {interaction}"), || async move {
                Ok::<_, String>(port.resume(&subject, interaction, payload, Some(run)).await)
            })
            .await;
        flatten(result)
    }

    /// Take the waiting outcome `interaction` on this subject: its result, or, for a
    /// `failed` outcome, its error. Journaled as a step, refusal included: a refusal or a
    /// failed outcome is [`CtxError::Resolution`].
    pub async fn take_parked(&self, interaction: &str) -> Result<Value, CtxError<TakeError>> {
        let port = Arc::clone(&self.inner.port);
        let subject = Arc::clone(&self.inner.subject);
        let run = Arc::clone(&self.inner.run_id);
        let result = self
            .step(&format!("take_parked {interaction}"), || async move {
                Ok::<_, String>(port.take(&subject, interaction, Some(run)).await)
            })
            .await;
        flatten(result)
    }

    /// Cancel each named interaction on this subject: a whole-chain kill that stops below
    /// this run when the park was raised beneath it. Journaled as a step, refusal included:
    /// a refusal is [`CtxError::Resolution`].
    pub async fn cancel_parked(&self, ids: &[&str]) -> Result<(), CtxError<CancelError>> {
        let port = Arc::clone(&self.inner.port);
        let subject = Arc::clone(&self.inner.subject);
        let run = Arc::clone(&self.inner.run_id);
        let owned: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
        let result = self
            .step("cancel_parked", || async move {
                Ok::<_, String>(port.cancel(&subject, owned, Some(run)).await)
            })
            .await;
        flatten(result)
    }
}

/// A resolution journaled as a step, refusal included: the step's failure or the
/// resolution's own error, as one.
fn flatten<T, E>(result: Result<Result<T, E>, CtxError>) -> Result<T, CtxError<E>> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(CtxError::Resolution(e)),
        Err(CtxError::Failed(message)) => Err(CtxError::Failed(message)),
        Err(CtxError::Resolution(never)) => match never {},
    }
}
