//! [`Runtime`] and its [`Builder`]: the public face of the runtime.
//!
//! A runtime is cheap to clone (a handle); every clone drives the same subjects.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::clock::{Clock, SystemClock};
use crate::entry::Entry;
use crate::error::{
    BuildError, CancelError, Problems, ResumeError, RunError, StartError, TakeError,
};
use crate::event::Event;
use crate::ids::Ids;
use crate::record::{Resumed, RunRecord};
use crate::run::Ctx;
use crate::settings::Settings;
use crate::shared::{Parent, Shared, StartSpec};
use crate::supervisor::arming::{self, Wake};
use crate::supervisor::ticker::{self, RoundRequest};
use crate::supervisor::{Supervisor, SupervisorMsg};

/// What to start: a target on a subject, with kwargs, extras and an identity.
///
/// ```
/// use parkway::Start;
/// let start = Start::new("thread-7", "triage").kwargs(serde_json::json!({"msg": "hi"}));
/// # let _ = start;
/// ```
#[derive(Debug, Clone)]
pub struct Start {
    subject: String,
    target: String,
    kwargs: Value,
    extras: Value,
    identity: String,
}

impl Start {
    /// Start `target` on `subject` with empty kwargs and extras, as identity `system`.
    pub fn new(subject: impl Into<String>, target: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            target: target.into(),
            kwargs: Value::Object(Default::default()),
            extras: Value::Object(Default::default()),
            identity: "system".to_owned(),
        }
    }

    /// The kwargs the target runs on (a JSON object).
    pub fn kwargs(mut self, kwargs: Value) -> Self {
        self.kwargs = kwargs;
        self
    }

    /// The extras handed beside the kwargs; each key must be declared by the target.
    pub fn extras(mut self, extras: Value) -> Self {
        self.extras = extras;
        self
    }

    /// The principal the run runs as.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    fn spec(self) -> StartSpec {
        StartSpec {
            subject: Arc::from(self.subject),
            target: self.target,
            kwargs: self.kwargs,
            extras: self.extras,
            identity: Arc::from(self.identity),
            parent: Parent::Top,
        }
    }
}

/// Sizes of a runtime's moving parts, for tests, tools and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Caller asks (`asking` and `running`) plus waiting outcomes.
    pub caller_open: usize,
    /// Open user asks.
    pub user_open: usize,
    /// Subjects with an actor.
    pub live_subjects: usize,
    /// Subjects kept as data, without an actor.
    pub passive_subjects: usize,
    /// The bytes of packed text the passive subjects hold.
    pub passive_bytes: usize,
    /// Runs that have not ended.
    pub runs: usize,
    /// Runs in the supervisor's run tree: those that are part of a chain (they have a
    /// live caller or called a run). A run on its own is not linked.
    pub linked_runs: usize,
    /// Armed timers.
    pub timers: usize,
    /// Passivations so far.
    pub passivations: u64,
    /// Messages that raced a passivation, were refused by the draining actor, and were
    /// delivered again to the next one.
    pub redelivered: u64,
}

/// One builder call's change to the settings, applied over the environment's.
type SettingsEdit = Box<dyn FnOnce(&mut Settings) + Send>;

/// How many events a subscriber may fall behind by default.
const DEFAULT_EVENT_CAPACITY: usize = 65_536;

/// Builds a [`Runtime`]: settings from the environment, then the builder's own.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use parkway::{Ids, ManualClock, Runtime};
/// let runtime = Runtime::builder()
///     .without_env()
///     .clock(ManualClock::default())
///     .ids(Ids::sequential())
///     .max_concurrent_caller(100)
///     .build()
///     .await
///     .unwrap();
/// assert_eq!(runtime.settings().max_concurrent_caller, 100);
/// # }
/// ```
#[must_use]
pub struct Builder {
    env: bool,
    settings: Option<Settings>,
    edits: Vec<SettingsEdit>,
    clock: Arc<dyn Clock>,
    ids: Option<Ids>,
    event_capacity: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            env: true,
            settings: None,
            edits: Vec::new(),
            clock: Arc::new(SystemClock),
            ids: None,
            event_capacity: DEFAULT_EVENT_CAPACITY,
        }
    }
}

impl Builder {
    /// Do not read settings from the environment.
    pub fn without_env(mut self) -> Self {
        self.env = false;
        self
    }

    /// Start from these settings instead of the defaults and the environment.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }

    fn edit(mut self, f: impl FnOnce(&mut Settings) + Send + 'static) -> Self {
        self.edits.push(Box::new(f));
        self
    }

    /// `INTERACTIONS_MAX_CONCURRENT_CALLER`.
    pub fn max_concurrent_caller(self, n: usize) -> Self {
        self.edit(move |s| s.max_concurrent_caller = n)
    }

    /// `INTERACTIONS_MAX_CONCURRENT`.
    pub fn max_concurrent(self, n: usize) -> Self {
        self.edit(move |s| s.max_concurrent = n)
    }

    /// `INTERACTIONS_WAITING_RETENTION`.
    pub fn waiting_retention(self, d: Duration) -> Self {
        self.edit(move |s| s.waiting_retention = d)
    }

    /// How long an idle subject keeps its actor; zero passivates at once.
    pub fn passivate_after(self, d: Duration) -> Self {
        self.edit(move |s| s.passivate_after = d)
    }

    /// How long a visit's door expressions may evaluate together (default 100 ms).
    pub fn jq_deadline(self, d: Duration) -> Self {
        self.edit(move |s| s.jq_deadline = d)
    }

    /// The largest door input document, in bytes of JSON (default 1 MiB).
    pub fn max_input_bytes(self, n: usize) -> Self {
        self.edit(move |s| s.max_input_bytes = n)
    }

    /// The one clock (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The one id source (default: random ids from an OS-drawn seed).
    pub fn ids(mut self, ids: Ids) -> Self {
        self.ids = Some(ids);
        self
    }

    /// How many events a subscriber of [`Runtime::events`] may fall behind before it loses
    /// the oldest (default 65536; at least 1).
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n.max(1);
        self
    }

    /// Start the supervisor and the ticker; must be called inside a Tokio runtime.
    pub async fn build(self) -> Result<Runtime, BuildError> {
        let mut settings = match (self.settings, self.env) {
            (Some(s), _) => s,
            (None, true) => Settings::from_env().map_err(|e| BuildError::Settings(Problems(e)))?,
            (None, false) => Settings::default(),
        };
        for edit in self.edits {
            edit(&mut settings);
        }
        let wake = Arc::new(Wake::default());
        let (arming, armed) = arming::queue(Arc::clone(&wake));
        let (supervisor, _) =
            Actor::spawn(None, Supervisor, armed)
                .await
                .map_err(|e| BuildError::Spawn {
                    what: "supervisor",
                    reason: e.to_string(),
                })?;
        let shared = Arc::new(Shared::new(
            settings,
            self.clock,
            self.ids.unwrap_or_default(),
            supervisor,
            arming,
            self.event_capacity,
        ));
        crate::tools::register(&shared.targets);
        let (rounds, requests) = mpsc::unbounded_channel();
        tokio::spawn(ticker::run(Arc::downgrade(&shared), wake, requests));
        Ok(Runtime {
            inner: Arc::new(Handle { shared, rounds }),
        })
    }
}

struct Handle {
    shared: Arc<Shared>,
    rounds: mpsc::UnboundedSender<RoundRequest>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.supervisor.stop(None);
    }
}

/// A runtime: subjects, runs, the supervisor and its timers.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Handle>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("settings", &self.inner.shared.settings)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.shared().settings
    }

    /// The runtime's clock.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.shared().clock.now()
    }

    /// Register (or replace) a target that reads the `extras` keys named.
    pub fn register<F, Fut>(&self, name: &str, extras: &[&str], f: F)
    where
        F: Fn(Ctx, Value, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, RunError>> + Send + 'static,
    {
        self.shared().targets.register(name, extras, f);
    }

    /// Start a run and wait for the record its first activation ends with: the caller
    /// is its receiver.
    pub async fn run(&self, start: Start) -> Result<RunRecord, StartError> {
        self.shared().run_to_end(start.spec()).await
    }

    /// The synchronous tool door: run a tool and return its record once its activation
    /// ends — `succeeded`, `failed`, `parked` with the `asks` it raised to its caller, or
    /// `suspended` with the sentinel when only user asks are open.
    pub async fn run_tool(&self, start: Start) -> Result<RunRecord, StartError> {
        self.run(start).await
    }

    /// The background tool door: start a tool and return its run id at once; its record
    /// (the same record [`Runtime::run_tool`] returns) is read later with
    /// [`Runtime::record`], and shows `running` until the activation ends.
    pub async fn submit(&self, start: Start) -> Result<String, StartError> {
        let shared = Arc::clone(self.shared());
        let target = start.target.clone();
        let (tx, rx) = oneshot::channel();
        let id = shared.start(start.spec(), Some(tx)).await?.to_string();
        shared.records.insert(
            id.clone(),
            RunRecord {
                run_id: id.clone(),
                target,
                status: crate::RunStatus::Running,
                started_at: shared.clock.now(),
                finished_at: None,
                result: None,
                error: None,
                asks: None,
                suspension: None,
                resumed_interactions: Vec::new(),
            },
        );
        let key = id.clone();
        // Counted in flight, so `settle` waits until the record is written.
        shared.inflight.add();
        tokio::spawn(async move {
            if let Ok(record) = rx.await {
                shared.records.insert(key, record);
            }
            shared.inflight.done();
        });
        Ok(id)
    }

    /// The record of a run started through [`Runtime::submit`].
    pub fn record(&self, run_id: &str) -> Option<RunRecord> {
        self.shared().records.get(run_id).map(|r| r.value().clone())
    }

    /// Start a run with no receiver; returns its id at once.
    pub async fn spawn(&self, start: Start) -> Result<String, StartError> {
        self.shared()
            .start(start.spec(), None)
            .await
            .map(|id| id.to_string())
    }

    /// Every parked entry on `subject`, oldest first. A subject without an actor (passive,
    /// or never seen) is read as it is kept and not woken (`docs/semantics.md`,
    /// "Passivation").
    pub async fn list(&self, subject: &str) -> Result<Vec<Entry>, StartError> {
        self.shared().list(&Arc::from(subject)).await
    }

    /// Resume the ask `interaction` with `payload` (the answer). The caller receives the
    /// run's next outcome, or `buffered` while other asks of its group are open.
    pub async fn resume(
        &self,
        subject: &str,
        interaction: &str,
        payload: Value,
    ) -> Result<Resumed, ResumeError> {
        self.shared()
            .resume(&Arc::from(subject), interaction, payload, None)
            .await
    }

    /// Resume with no receiver, as a hook or schedule fire does: when the run ends, its
    /// terminal waits on the subject as a `finished` or `failed` entry.
    pub async fn resume_detached(
        &self,
        subject: &str,
        interaction: &str,
        payload: Value,
    ) -> Result<(), ResumeError> {
        let (reply, rx) = oneshot::channel();
        let msg = crate::subject::SubjectMsg::Resume {
            interaction: interaction.to_owned(),
            payload,
            receiver: None,
            resumer: None,
            reply,
        };
        let shared = self.shared();
        shared
            .subjects
            .send(shared, &Arc::from(subject), msg)
            .await
            .map_err(|_| ResumeError::Stopped)?;
        match rx.await.map_err(|_| ResumeError::Stopped)? {
            Ok(_) => Ok(()),
            Err(problem) => Err(ResumeError::Refused(problem)),
        }
    }

    /// Take the waiting outcome `interaction`: its result, or, for a `failed` one, its
    /// error as [`TakeError::Failed`].
    pub async fn take(&self, subject: &str, interaction: &str) -> Result<Value, TakeError> {
        self.shared()
            .take(&Arc::from(subject), interaction, None)
            .await
    }

    /// Cancel each named interaction: a whole-chain kill. All ids are checked first; any
    /// problem refuses them all and changes nothing.
    pub async fn cancel(&self, subject: &str, ids: &[&str]) -> Result<(), CancelError> {
        self.shared()
            .cancel(
                &Arc::from(subject),
                ids.iter().map(|s| (*s).to_owned()).collect(),
                None,
            )
            .await
    }

    /// Save (or replace) a door; every expression is compiled and checked now, and every
    /// problem is reported together. A schedule is armed from the clock's now.
    pub fn save_door(&self, spec: crate::DoorSpec) -> Result<(), crate::SaveError> {
        crate::door::registry::save(self.shared(), spec)
    }

    /// Remove a door; whether it existed. A removed schedule fires no more.
    pub fn remove_door(&self, name: &str) -> bool {
        self.shared().doors.remove(name)
    }

    /// Visit the door `door` on `subject` with the input document `input`. A route's
    /// visitor receives the outcome inline; a hook or schedule visited by name has no
    /// receiver.
    pub async fn visit(
        &self,
        door: &str,
        subject: &str,
        input: Value,
    ) -> Result<crate::Visit, crate::VisitError> {
        let Some(saved) = self.shared().doors.get(door) else {
            return Err(crate::VisitError::UnknownDoor {
                door: door.to_owned(),
            });
        };
        crate::door::registry::visit(self.shared(), &saved, &Arc::from(subject), input).await
    }

    /// Fire `topic`: every hook on it checks its condition and visits its subject with
    /// no receiver, in name order.
    pub async fn fire(&self, topic: &str, input: Value) -> Vec<crate::HookFire> {
        crate::door::registry::fire(self.shared(), topic, input).await
    }

    /// One page of the interactions inbox: pending user asks, oldest first. Pages are
    /// numbered from 1; `page_size` defaults to 50 and is capped at 200. Caller asks are
    /// never listed.
    pub fn inbox(
        &self,
        page: usize,
        page_size: Option<usize>,
    ) -> Result<crate::Page, crate::AnswerError> {
        self.shared()
            .inbox
            .page(page, page_size.unwrap_or(crate::DEFAULT_PAGE_SIZE))
    }

    /// Follow the inbox live: an `add`, `answered` or `removed` frame for each change of a
    /// user ask from now on. Caller asks never appear in a frame.
    pub fn inbox_frames(&self) -> broadcast::Receiver<crate::Frame> {
        self.shared().inbox.subscribe()
    }

    /// The human answer door: answer the user ask `interaction`. The answer is validated
    /// by the ask's format (`text` a string, `confirm` a boolean, `select` one of the
    /// options, `form` an object valid against its schema; `external` is refused here).
    /// A user ask answered, expired or cancelled answers `already resolved (how) at …`
    /// while its subject remembers it; a caller ask and an unknown id answer `unknown
    /// interaction`.
    pub async fn answer(&self, interaction: &str, answer: Value) -> Result<(), crate::AnswerError> {
        let Some(item) = self.shared().inbox.get(interaction) else {
            return Err(crate::inbox::gone(self.shared(), interaction).await);
        };
        crate::inbox::validate(&item, &answer)?;
        match self
            .resume_detached(&item.subject, interaction, answer)
            .await
        {
            Ok(()) => Ok(()),
            Err(ResumeError::Stopped) => Err(crate::AnswerError::Stopped),
            // Answered or gone between the look-up and the resume.
            Err(_) => Err(crate::inbox::gone(self.shared(), interaction).await),
        }
    }

    /// Subscribe to the platform events published from now on.
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.shared().events.subscribe()
    }

    /// Wait until the runtime has nothing left to do at the clock's present: no message
    /// or activation in flight, and every timer due now fired and handled.
    ///
    /// With a [`ManualClock`](crate::ManualClock): advance it, then settle, and every
    /// consequence of the move has happened.
    pub async fn settle(&self) {
        loop {
            self.shared().inflight.quiet().await;
            let (tx, rx) = oneshot::channel();
            if self.inner.rounds.send(tx).is_err() {
                return;
            }
            let Ok(fired) = rx.await else {
                return;
            };
            if fired == 0 && self.shared().inflight.is_quiet() {
                return;
            }
        }
    }

    /// Sizes of the runtime's moving parts.
    pub async fn stats(&self) -> Stats {
        let shared = self.shared();
        let (live_subjects, passive_subjects, passive_bytes) = shared.subjects.census();
        let (tx, rx) = oneshot::channel();
        let _ = shared.supervisor.cast(SupervisorMsg::Stats { reply: tx });
        let (linked_runs, timers) = rx.await.unwrap_or_default();
        let (passivations, redelivered) = shared.subjects.passivation_counts();
        Stats {
            caller_open: shared
                .caps
                .caller
                .load(std::sync::atomic::Ordering::Acquire),
            user_open: shared.caps.user.load(std::sync::atomic::Ordering::Acquire),
            live_subjects,
            passive_subjects,
            passive_bytes,
            runs: shared.runs.load(std::sync::atomic::Ordering::Relaxed),
            linked_runs,
            timers,
            passivations,
            redelivered,
        }
    }
}
