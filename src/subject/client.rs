//! The operations on subjects that everything else goes through: the public API, the
//! doors, the inbox's answer door, the ticker, and runs (through [`Port`], which the hub
//! implements). Each is a message to the subject's actor through the registry and an
//! await on its reply; nothing here reads or changes a subject's state.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::actor;

use super::effect::Step;
use super::hub::Hub;
use super::records::Found;
use super::registry::{Spawner, Stopped, Undelivered};
use super::reply::{Answer, Answered, Applied, Brought, Channel, Channels, Outcome};
use super::state::State;
use super::{Ack, Msg, Op};
use crate::ask::Ask;
use crate::door::outcome::{Visit, VisitError};
use crate::door::plan::VisitProblem;
use crate::door::registry::{HookFire, Hooked};
use crate::door::saved::Saved;
use crate::entry::Entry;
use crate::error::{
    AskError, CancelError, IdProblem, Problems, ResumeError, StartError, TakeError,
};
use crate::event::Event;
use crate::ids::ReplyId;
use crate::inbox::AnswerError;
use crate::record::{Buffered, Resumed, RunRecord};
use crate::run::port::{Asker, Boxed, Ending, Port, StartSpec, checked_payload};
use crate::services::{Services, Waiter};

impl Hub {
    /// Send `msg` to `subject`'s actor, waking or spawning it.
    pub(crate) async fn send(
        self: &Arc<Self>,
        subject: &Arc<str>,
        msg: Msg,
    ) -> Result<(), Undelivered> {
        // An activation polled in place by this subject's actor: handled in its turn.
        let Some(msg) = super::turn::offer(subject, msg) else {
            // In flight as a message in a mailbox is: its handler gives the unit back.
            self.services.inflight.add();
            return Ok(());
        };
        // A subject of a slot away takes nothing new; its own activations' messages
        // still reach an actor that drains (a slot handed over), and are refused by
        // one that unloads, or where no actor is left (its read-back is refused).
        if !msg.is_from_activation() {
            self.services
                .check_served(subject)
                .map_err(Undelivered::Store)?;
        }
        self.registry.send(self, subject, msg).await
    }

    /// Why no answer came from `subject` (its channel was dropped): its slot was given
    /// up meanwhile, or the runtime stopped (or the subject let the reply go).
    pub(crate) fn no_answer(&self, subject: &str) -> Undelivered {
        match self.services.away.check(subject) {
            Err(fault) => Undelivered::Store(fault),
            Ok(()) => Undelivered::Stopped,
        }
    }

    /// Send the operation `op` makes with the id of its reply, bringing `brought` and
    /// the reply's channel; the receiver of the answer.
    pub(crate) async fn send_request(
        self: &Arc<Self>,
        subject: &Arc<str>,
        brought: Brought,
        op: impl FnOnce(ReplyId) -> Op,
    ) -> Result<oneshot::Receiver<Answer<Outcome>>, Undelivered> {
        let (tx, rx) = oneshot::channel();
        let reply = self.services.ids.reply();
        let msg = Msg::Op(op(reply), brought.with(reply, Channel::Reply(tx)));
        self.send(subject, msg).await?;
        Ok(rx)
    }

    /// Send the operation `op` makes with the id of its reply, bringing `brought`, and
    /// await the answer; `Stopped` if the runtime stops first (or the subject lets the
    /// reply go unanswered), the fault if the subject cannot be read back.
    pub(crate) async fn request_with<T: Answered>(
        self: &Arc<Self>,
        subject: &Arc<str>,
        brought: Brought,
        op: impl FnOnce(ReplyId) -> Op,
    ) -> Result<T, Undelivered> {
        let rx = self.send_request(subject, brought, op).await?;
        let answer = rx.await.map_err(|_| self.no_answer(subject))?;
        read_answer(answer)
    }

    /// [`Hub::request_with`] for an operation that names no other channel.
    pub(crate) async fn request<T: Answered>(
        self: &Arc<Self>,
        subject: &Arc<str>,
        op: impl FnOnce(ReplyId) -> Op,
    ) -> Result<T, Undelivered> {
        self.request_with(subject, Brought::none(), op).await
    }

    /// A step at the clock's now, for reading an idle subject's state.
    fn step(&self) -> Step<'_> {
        let s = &self.services;
        Step::new(s.clock.now(), &s.settings, &s.ids, &s.keys)
    }

    /// Park an ask of `run` on `subject`; returns the interaction id.
    ///
    /// An async ask is one message with no reply: the run makes the interaction id, and
    /// the subject, which handles the run's messages in the order sent, stores the entry
    /// before anything the run does next. Only a sync ask, whose run blocks on the
    /// answer, waits to hear that it was stored.
    pub(crate) async fn park(
        self: &Arc<Self>,
        asker: Asker<'_>,
        ask: Ask,
        waiter: Option<Waiter>,
    ) -> Result<String, AskError> {
        let Asker {
            subject,
            run,
            epoch,
            lineage,
        } = asker;
        let checked = match ask.validate(
            self.services.clock.now(),
            self.services.settings.max_question_chars,
        ) {
            Ok(checked) => checked,
            Err(problems) => {
                ask.drop_deep();
                return Err(AskError::Invalid(Problems(problems)));
            }
        };
        let admitted = self.services.admit(subject, ask.to)?;
        let id = self
            .services
            .ids
            .interaction(crate::slot::Slot::of(subject));
        let ids = &self.services.ids;
        // A sync ask brings its waiter and awaits its reply; an async one brings nothing.
        let (waiter, reply, brought, rx) = match waiter {
            None => (None, None, Brought::none(), None),
            Some(waiter) => {
                let (tx, rx) = oneshot::channel();
                let (w, r) = (ids.reply(), ids.reply());
                let brought = Brought::none()
                    .with(w, Channel::Waiter(waiter))
                    .with(r, Channel::Reply(tx));
                (Some(w), Some(r), brought, Some(rx))
            }
        };
        let msg = Op::Ask {
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
        // Given back if the ask does not reach the subject, or if this future is dropped
        // on the way (its activation stopped).
        if self.send(subject, Msg::Op(msg, brought)).await.is_err() {
            return Err(cancelled());
        }
        admitted.handed_on();
        match rx {
            None => Ok(id),
            // The subject releases the unit itself when it refuses the ask.
            Some(rx) => match rx.await.map(read_answer) {
                Ok(Ok(stored)) => stored,
                _ => Err(cancelled()),
            },
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
        let problems: Vec<String> = [
            crate::name::problem("subject", &spec.subject),
            crate::name::problem("target", &spec.target),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !problems.is_empty() {
            return Err(StartError::InvalidName(problems.join("; ")));
        }
        let spec = spec.checked()?;
        if self.services.is_closed() {
            return Err(StartError::Stopped);
        }
        let target = self
            .services
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
        let subject = Arc::clone(&spec.subject);
        let (receiver, brought) = match receiver {
            None => (None, Brought::none()),
            Some(tx) => {
                let id = self.services.ids.reply();
                (Some(id), Brought::none().with(id, Channel::Outcome(tx)))
            }
        };
        self.request_with(&subject, brought, |reply| Op::Start {
            target,
            kwargs: spec.kwargs,
            extras: spec.extras,
            identity: spec.identity,
            parent: spec.parent,
            receiver,
            key: spec.key,
            reply,
        })
        .await
        .map_err(|why| why.or(StartError::Stopped, StartError::Store))
    }

    /// Start a run and wait for the record its first activation ends with.
    pub(crate) async fn run_to_end(
        self: &Arc<Self>,
        spec: StartSpec,
    ) -> Result<RunRecord, StartError> {
        let (tx, rx) = oneshot::channel();
        let subject = Arc::clone(&spec.subject);
        self.start(spec, Some(tx)).await?;
        rx.await.map_err(|_| {
            self.no_answer(&subject)
                .or(StartError::Stopped, StartError::Store)
        })
    }

    /// Every parked entry on `subject`, oldest first. A subject without an actor is
    /// read as it is kept and not woken.
    pub(crate) async fn list(
        self: &Arc<Self>,
        subject: &Arc<str>,
    ) -> Result<Vec<Entry>, StartError> {
        if self.services.is_closed() {
            return Err(StartError::Stopped);
        }
        let failed = |why: Undelivered| why.or(StartError::Stopped, StartError::Store);
        let idle = self.registry.read_idle(self, subject, State::list);
        if let Some(entries) = idle.map_err(failed)? {
            return Ok(entries);
        }
        self.request(subject, |reply| Op::List { reply })
            .await
            .map_err(failed)
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
        if self.services.is_closed() {
            return Err(ResumeError::Stopped);
        }
        let (tx, outcome) = oneshot::channel();
        let receiver = self.services.ids.reply();
        let brought = Brought::none().with(receiver, Channel::Outcome(tx));
        let acked = self.request_with(subject, brought, |reply| Op::Resume {
            interaction: interaction.to_owned(),
            payload,
            receiver: Some(receiver),
            resumer,
            reply,
        });
        let acked = acked
            .await
            .map_err(|why| why.or(ResumeError::Stopped, ResumeError::Store))?;
        match acked {
            Err(problem) => Err(ResumeError::Refused(problem)),
            Ok(Ack::Buffered { remaining }) => Ok(Resumed::Buffered {
                status: Buffered::Buffered,
                remaining,
            }),
            Ok(Ack::Started) => outcome.await.map(Resumed::Outcome).map_err(|_| {
                self.no_answer(subject)
                    .or(ResumeError::Stopped, ResumeError::Store)
            }),
        }
    }

    /// Take the waiting outcome `interaction`.
    pub(crate) async fn take(
        self: &Arc<Self>,
        subject: &Arc<str>,
        interaction: &str,
        taker: Option<Arc<str>>,
    ) -> Result<Value, TakeError> {
        if self.services.is_closed() {
            return Err(TakeError::Stopped);
        }
        let taken = self.request(subject, |reply| Op::Take {
            interaction: interaction.to_owned(),
            taker,
            reply,
        });
        let taken = taken
            .await
            .map_err(|why| why.or(TakeError::Stopped, TakeError::Store))?;
        match taken {
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
        if self.services.is_closed() {
            return Err(CancelError::Stopped);
        }
        self.request::<Result<(), Vec<IdProblem>>>(subject, |reply| Op::Cancel {
            ids,
            canceller,
            reply,
        })
        .await
        .map_err(|why| why.or(CancelError::Stopped, CancelError::Store))?
        .map_err(|p| CancelError::Refused(Problems(p)))
    }

    /// Visit `door` on `subject` with `input`: the subject evaluates the contract, checks
    /// and applies its plan in one message; the outcome is then read off the receivers.
    pub(crate) async fn visit(
        self: &Arc<Self>,
        door: &Arc<Saved>,
        subject: &Arc<str>,
        input: Value,
    ) -> Result<Visit, VisitError> {
        let name = door.name().to_owned();
        door.admit(&input, self.services.settings.max_input_bytes)
            .map_err(|error| self.refused(subject, error))?;
        let (tx, rx) = oneshot::channel();
        let reply = self.services.ids.reply();
        let msg = Msg::Visit {
            door: Arc::clone(door),
            input,
            reply: Some(reply),
            brought: Brought::none().with(reply, Channel::Reply(tx)),
            fire: None,
        };
        self.send(subject, msg)
            .await
            .map_err(|why| why.or(VisitError::Stopped, VisitError::Store))?;
        let no_answer = || {
            self.no_answer(subject)
                .or(VisitError::Stopped, VisitError::Store)
        };
        let answer = rx.await.map_err(|_| no_answer())?;
        let applied: Result<Applied<Outcome>, Vec<VisitProblem>> =
            read_answer(answer).map_err(|_| VisitError::Stopped)?;
        match applied {
            Ok(applied) => applied.outcome().await.map_err(|error| match error {
                VisitError::Stopped => no_answer(),
                error => error,
            }),
            Err(problems) => Err(self.refused(
                subject,
                VisitError::Refused {
                    door: name,
                    problems: Problems(problems),
                },
            )),
        }
    }

    /// Publish a refused visit, and hand the error back to its visitor.
    ///
    /// Published, not logged: the visitor holds the refusal, and nothing changed that a
    /// restart must find, so a refused visit costs the store nothing. Logged, each would
    /// be a write, and a client allowed only to visit could turn bad visits into disk
    /// writes, and push the events that matter out of the log's window.
    pub(crate) fn refused(&self, subject: &str, error: VisitError) -> VisitError {
        self.services.events.publish(Event::VisitRefused {
            subject: subject.to_owned(),
            door: error.door().to_owned(),
            error: error.to_string(),
        });
        error
    }

    /// Fire `topic`: each hook on it, in name order, evaluates its condition and its
    /// subject, then visits that subject with no receiver.
    pub(crate) async fn fire(self: &Arc<Self>, topic: &str, input: Value) -> Vec<HookFire> {
        let mut fires = Vec::new();
        for door in self.doors.hooks(topic) {
            let hooked = door.hooked(&input, &self.services).await;
            let name = door.name().to_owned();
            fires.push(match hooked {
                Hooked::No => HookFire {
                    door: name,
                    subject: None,
                    visit: None,
                },
                Hooked::Subject(s) => {
                    let subject: Arc<str> = Arc::from(s.as_str());
                    let result = self.visit(&door, &subject, input.clone()).await;
                    HookFire {
                        door: name,
                        subject: Some(s),
                        visit: Some(result),
                    }
                }
                Hooked::Refused(error) => HookFire {
                    door: name,
                    subject: None,
                    visit: Some(Err(self.refused("", error))),
                },
            });
        }
        fires
    }

    /// A schedule's timer fired at `at`: arm its next fire, and send the fire's visit to
    /// its subject, which evaluates it and publishes a refusal as an event. The ticker
    /// calls this and never waits on the evaluation.
    pub(crate) async fn scheduled(
        self: &Arc<Self>,
        name: &str,
        generation: u64,
        at: chrono::DateTime<chrono::Utc>,
    ) {
        let Some((door, subject)) = self
            .doors
            .schedule_fired(&self.services, name, generation, at)
        else {
            return;
        };
        // The node that owns the subject's slot fires it; the others have nothing to
        // refuse.
        if self.services.away.is_away(crate::slot::Slot::of(&subject)) {
            return;
        }
        let now = self.services.clock.now();
        let input = json!({
            "schedule": name,
            "fired_at": now.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        });
        // A refusal is published as an event; a schedule has nobody to tell.
        if let Err(error) = door.admit(&input, self.services.settings.max_input_bytes) {
            self.refused(&subject, error);
            return;
        }
        let msg = Msg::Visit {
            door,
            input,
            reply: None,
            brought: Brought::none(),
            fire: Some(at),
        };
        // A runtime that is stopping drops its timers; nobody waits for them then.
        let _ = self.send(&subject, msg).await;
    }

    /// The record of `run`: where it stands now if it lives (read from its subject, which
    /// is not woken if passive), or how it ended, within the retention horizon; `None`
    /// for a run never started or past the horizon. A record or subject the store holds
    /// and cannot read is the fault, never `None`.
    pub(crate) async fn record(
        self: &Arc<Self>,
        run: &str,
    ) -> Result<Option<RunRecord>, Undelivered> {
        let found = match self.records.find(run) {
            Some(found) => found,
            // Not touched since the store was opened: the store says where it is.
            None => match super::durable::find_stored(self, run)? {
                Some(found) => found,
                None => return Ok(None),
            },
        };
        let subject = match found {
            Found::Ended(record) => return Ok(Some(*record)),
            Found::Live(subject) => subject,
        };
        let live = match self
            .registry
            .read_idle(self, &subject, |state| state.record_of(run))?
        {
            Some(record) => record,
            None => match self
                .request(&subject, |reply| Op::Record {
                    run: run.to_owned(),
                    reply,
                })
                .await
            {
                Ok(record) => record,
                Err(Undelivered::Stopped) => None,
                Err(fault) => return Err(fault),
            },
        };
        // A run that ended meanwhile has its record kept.
        Ok(live.or_else(|| self.records.get_ended(run)))
    }

    /// Why the answer door refuses an answer to `id`, which is not pending: already
    /// resolved, when the ask was a user ask that left the inbox and its subject
    /// remembers how; else unknown (a caller ask never entered the inbox).
    pub(crate) async fn gone(self: &Arc<Self>, id: &str) -> AnswerError {
        let unknown = || AnswerError::Unknown { id: id.to_owned() };
        if self.inbox.left(id).is_none()
            && let Some(store) = &self.services.store
        {
            let store = store.clone();
            self.inbox
                .recall_left(|| async move {
                    tokio::task::spawn_blocking(move || super::durable::left_in_log(&store))
                        .await
                        .unwrap_or_default()
                })
                .await;
        }
        let Some(subject) = self.inbox.left(id) else {
            return unknown();
        };
        let step = self.step();
        let failed = |why: Undelivered| why.or(AnswerError::Stopped, AnswerError::Store);
        let idle = self
            .registry
            .read_idle(self, &subject, |state| state.recall(&step, id));
        let recalled = match idle {
            Ok(Some(recalled)) => recalled,
            Err(why) => return failed(why),
            Ok(None) => {
                let recalled = self.request(&subject, |reply| Op::Recall {
                    interaction: id.to_owned(),
                    reply,
                });
                match recalled.await {
                    Ok(recalled) => recalled,
                    Err(why) => return failed(why),
                }
            }
        };
        match recalled {
            Some(IdProblem::AlreadyResolved { how, at, .. }) => AnswerError::AlreadyResolved {
                id: id.to_owned(),
                how,
                at,
            },
            _ => unknown(),
        }
    }
}

/// A run's activation reaches the runtime through the hub.
impl Port for Hub {
    fn services(&self) -> &Services {
        &self.services
    }

    fn park<'a>(
        self: Arc<Self>,
        asker: Asker<'a>,
        ask: Ask,
        waiter: Option<Waiter>,
    ) -> Boxed<'a, Result<String, AskError>> {
        Box::pin(async move { Hub::park(&self, asker, ask, waiter).await })
    }

    fn run_to_end(
        self: Arc<Self>,
        spec: StartSpec,
    ) -> Boxed<'static, Result<RunRecord, StartError>> {
        Box::pin(async move { Hub::run_to_end(&self, spec).await })
    }

    fn list<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
    ) -> Boxed<'a, Result<Vec<Entry>, StartError>> {
        Box::pin(async move { Hub::list(&self, subject).await })
    }

    fn resume<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
        interaction: &'a str,
        payload: Value,
        resumer: Option<Arc<str>>,
    ) -> Boxed<'a, Result<Resumed, ResumeError>> {
        Box::pin(async move { Hub::resume(&self, subject, interaction, payload, resumer).await })
    }

    fn take<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
        interaction: &'a str,
        taker: Option<Arc<str>>,
    ) -> Boxed<'a, Result<Value, TakeError>> {
        Box::pin(async move { Hub::take(&self, subject, interaction, taker).await })
    }

    fn cancel<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
    ) -> Boxed<'a, Result<(), CancelError>> {
        Box::pin(async move { Hub::cancel(&self, subject, ids, canceller).await })
    }

    fn ended(self: Arc<Self>, subject: Arc<str>, ending: Ending) -> Boxed<'static, ()> {
        Box::pin(async move {
            let _ = self
                .send(&subject, Msg::op(Op::Ended(Box::new(ending))))
                .await;
        })
    }
}

/// The hub starts subjects' actors for the registry.
impl Spawner for Hub {
    fn services(&self) -> &Services {
        &self.services
    }

    fn spawn(
        this: &Arc<Self>,
        state: Box<State>,
        channels: Channels,
    ) -> impl Future<Output = Result<(ractor::ActorRef<Msg>, tokio::task::JoinHandle<()>), Stopped>> + Send
    {
        actor::spawn(Arc::clone(this), state, channels)
    }

    fn load(this: &Arc<Self>, subject: &Arc<str>) -> Result<Option<Box<State>>, Undelivered> {
        super::durable::load(this, subject)
    }
}

/// The value an answer carries, read as the kind the request expects. Another kind is a
/// fault of the subject's, reported and read as a stopped runtime, never a panic.
fn read_answer<T: Answered>(answer: Answer<Outcome>) -> Result<T, Undelivered> {
    T::read(answer).ok_or_else(|| {
        tracing::error!("a subject answered a request with another kind of answer");
        Undelivered::Stopped
    })
}
