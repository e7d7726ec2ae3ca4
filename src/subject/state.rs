//! One subject's state and every transition of it.
//!
//! The state is plain data: the parked set (oldest first), the runs living on the
//! subject with their journals and receivers, and the groups of asks each activation
//! raised. [`State::handle`] takes one operation with a [`Step`] (the time, the id
//! source, the settings) and returns nothing but the state it changed and the effects it
//! pushed on the step ([`super::effect`]): it never awaits and touches nothing outside
//! the state. Every transition is total. A teardown of a linked run's chain, which the
//! supervisor walks, is decided when its operation is handled and kept in the state as a
//! [`Teardown`] (the operation, and the entries it claims) until the supervisor's walk
//! comes back as an ordinary operation ([`Op::Walked`]), which applies it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::effect::{Effect, Launch, Receiver, Reply, Step, Waiting};
use super::{Ack, Op};
use crate::ask::{Ask, Checked, EXPIRY_MARKER_KEY, OnExpiry, expiry_marker};
use crate::entry::{Entry, EntryStatus, To};
use crate::error::{AskError, IdProblem, RunError};
use crate::event::{Event, Resolution, Settled};
use crate::ids::Kind;
use crate::inbox::InboxItem;
use crate::record::{RunRecord, RunStatus, Suspended};
use crate::run::journal::JournalEntry;
use crate::run::port::{Ending, Parent};
use crate::run::stored::Stored;
use crate::services::Waiter;
use crate::supervisor::{Timer, TimerKey};
use crate::target::Target;

mod parts;
pub(crate) use parts::Unread;
#[cfg(feature = "disk")]
pub(crate) use parts::check_part;
#[cfg(test)]
mod tests;
mod tracked;
mod visit;

use tracked::Tracked;

pub(crate) use visit::Planned;

/// The most resolutions one subject remembers (`docs/semantics.md`, "Exactly-once
/// resolution"): past it the oldest is forgotten, and reads as unknown.
pub(crate) const REMEMBERED: usize = 1024;

/// How and when an interaction of the subject was resolved, remembered for the retention
/// horizon once its entry is gone, so a retry reads `already resolved`, not `unknown`.
#[derive(Debug, Serialize, Deserialize)]
struct Memory {
    /// The interaction.
    id: String,
    /// How it was resolved.
    how: Settled,
    /// When, on the runtime's clock.
    at: DateTime<Utc>,
}

/// One parked entry and what the runtime keeps beside it.
///
/// Serialized only to pack a passive subject (`super::packed`), which holds no
/// executing activation: the fields skipped are those of one.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Parked {
    /// The entry as the door contract sees it.
    pub(crate) entry: Entry,
    /// The run that asked (or whose outcome waits).
    run: Arc<str>,
    /// What the deadline does.
    on_expiry: OnExpiry,
    /// The armed timer: the deadline of an ask, the horizon of a waiting outcome.
    timer: Option<TimerKey>,
    /// The answer, once resolved and until the run resumes (boxed, like the outcome:
    /// most entries never hold one, and a JSON value held inline is 72 bytes).
    answer: Option<Box<Value>>,
    /// A waiting outcome's result or error.
    outcome: Option<Box<Result<Value, String>>>,
    /// A `sync` user ask: the blocked activation waiting for the answer.
    #[serde(skip)]
    waiter: Option<Waiter>,
    /// A user ask as the inbox lists it, kept so a restart can list it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offered: Option<Box<InboxItem>>,
    /// Its place in the parked set (`tracked::Placed`), so the set read back from the
    /// store's keys is in the order it was parked in.
    #[serde(default, skip_serializing_if = "is_zero")]
    ord: u64,
    /// The entry converted for jq, kept until the entry changes: `$parked` is rebuilt
    /// from these whenever the set changes.
    #[serde(skip)]
    pub(crate) input: Option<crate::jq::Input>,
}

/// A group of asks raised by one activation.
#[derive(Debug, Serialize, Deserialize)]
struct Group {
    /// The asking run.
    run: Arc<str>,
    /// Its asks, in the order raised.
    members: Vec<String>,
    /// Whether the activation that raised them is still executing.
    open: bool,
    /// Set when the last ask was resolved while the activation was still executing:
    /// the receiver of the resumed run's outcome, and the ask resolved last.
    #[serde(skip)]
    pending: Option<(Option<Receiver>, String)>,
}

/// Groups have no order of their own.
impl tracked::Placed for Group {
    fn ord(&self) -> u64 {
        0
    }
    fn place(&mut self, _: u64) {}
}

/// Whether a place is the first, which is not written.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl tracked::Placed for Parked {
    fn ord(&self) -> u64 {
        self.ord
    }
    fn place(&mut self, ord: u64) {
        self.ord = ord;
    }
}

/// Runs have no order of their own: every reader sorts them as it needs.
impl tracked::Placed for Run {
    fn ord(&self) -> u64 {
        0
    }
    fn place(&mut self, _: u64) {}
}

/// One run living on the subject.
#[derive(Debug, Serialize, Deserialize)]
struct Run {
    /// The target's name: each activation runs the target registered under it then.
    target: Arc<str>,
    /// The calling run, for a child run.
    parent: Option<Arc<str>>,
    /// Whether the supervisor's run tree holds this run: a run is linked once it is part
    /// of a chain (it has a live caller, or it called a run). A run that is not linked
    /// is a chain of its own, which its subject tears down without asking.
    linked: bool,
    identity: Arc<str>,
    lineage: Arc<[String]>,
    /// Kept as text while the run waits (`crate::run::stored`).
    kwargs: Stored,
    extras: Stored,
    journal: Vec<JournalEntry>,
    status: RunStatus,
    /// Counts activations; an `Ended` or `Ask` of another epoch is stale.
    epoch: u64,
    /// Whether an activation is executing: its `Ended` (or a teardown, which aborts it)
    /// clears this. The actor holds its task.
    #[serde(skip)]
    executing: bool,
    /// Who takes the outcome of the executing activation.
    #[serde(skip)]
    receiver: Option<Receiver>,
    /// The group the executing (or last) activation raised.
    group: Option<String>,
    /// The group whose resolution started the executing activation.
    resumed_group: Option<String>,
    /// The ask whose resolution started the executing activation; a waiting outcome
    /// waits under this id.
    resumed_by: Option<String>,
    started_at: DateTime<Utc>,
    /// Interactions this run resolved on its way.
    resumed_interactions: Vec<String>,
}

/// What of a subject's state its last change wrote beside its parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Written {
    /// Its head's bytes.
    pub(crate) head: Option<Vec<u8>>,
    /// Its rest's bytes.
    pub(crate) rest: Option<Vec<u8>>,
}

/// What a subject counts against the ceilings ([`State::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Entries that count against the caller ceiling.
    pub(crate) caller: usize,
    /// Entries that count against the user ceiling.
    pub(crate) user: usize,
    /// Runs that have not ended.
    pub(crate) runs: usize,
}

/// A subject's whole state.
///
/// Serialized only to pack a passive subject (`super::packed`): the fields skipped are
/// the name (the registry's key), and what a subject with nothing executing and no
/// idle check armed holds empty.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct State {
    /// The subject's name.
    #[serde(skip)]
    pub(crate) name: Arc<str>,
    /// The parked set, oldest first. The key is the interaction id, shared with the
    /// entry's timer (until the subject is packed: unpacking allocates it anew).
    entries: Tracked<Parked>,
    /// Runs that have not ended (boxed, so the table's spare slots stay small).
    runs: Tracked<Run>,
    /// Open groups by id.
    groups: Tracked<Group>,
    /// The resolutions remembered, oldest first: at most [`REMEMBERED`], none older than
    /// the retention horizon.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    memory: VecDeque<Memory>,
    /// The place of the oldest resolution remembered: each is kept in the store under
    /// its place (`parts`), so one remembered or forgotten writes one key.
    #[serde(default, skip_serializing_if = "is_zero")]
    memory_base: u64,
    /// The remembered resolutions' places as last written (oldest, count): `None` reads
    /// as written as they stand (a state read back, or unpacked after every change was
    /// written).
    #[serde(skip)]
    memory_written: Option<(u64, usize)>,
    /// The deadline under which the store's wake index holds the subject (its earliest
    /// timer when its last change was written), so the next change can move it
    /// (`super::durable`). Never set in a runtime without a store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wake: Option<DateTime<Utc>>,
    /// The head and the rest as last written, so a change that leaves them as they are
    /// does not write them again (`None`: not known, written at the next change).
    #[serde(skip)]
    pub(crate) written: Written,
    /// Executing activations.
    #[serde(skip)]
    live: usize,
    /// The armed idle check.
    #[serde(skip)]
    idle_timer: Option<TimerKey>,
    /// When the last message was handled.
    #[serde(skip)]
    last_active: Option<DateTime<Utc>>,
    /// `$parked` converted for jq, kept until the parked set changes.
    #[serde(skip)]
    parked: Option<crate::jq::Input>,
    /// Teardowns decided and waiting for the supervisor's walk of their chains, oldest
    /// first.
    #[serde(skip)]
    teardowns: Vec<Teardown>,
    /// The entries a waiting teardown names, with its token: no other operation resolves
    /// them until it is applied.
    #[serde(skip)]
    claims: HashMap<Arc<str>, u64>,
    /// The token of the next teardown.
    #[serde(skip)]
    next_token: u64,
    /// The effects of changes handed to the store and not yet durable, oldest first: each
    /// is released when the store acknowledges its change.
    #[serde(skip)]
    pub(crate) unacked: VecDeque<Vec<Effect>>,
}

/// A teardown waiting for the supervisor's walk: an operation that tears down the chain
/// of a linked run, decided when it was handled (every check that needs no chain done,
/// the entries it names claimed) and applied when the walk comes back.
#[derive(Debug)]
pub(crate) struct Teardown {
    /// Names the walk's answer ([`Op::Walked`]).
    token: u64,
    /// The operation.
    what: Deferred,
    /// The linked runs whose chains were asked for, in the order asked.
    runs: Vec<Arc<str>>,
}

/// The operations that tear down a linked run's chain.
#[derive(Debug)]
pub(crate) enum Deferred {
    /// A cancel, whose reply waits for the teardown.
    Cancel {
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
        reply: tokio::sync::oneshot::Sender<Result<(), Vec<IdProblem>>>,
    },
    /// A killing expiry.
    Expire {
        interaction: Arc<str>,
        key: TimerKey,
    },
    /// A visit whose plan cancels.
    Visit(Planned),
}

/// The supervisor's chains, by the run whose park they tear down (asker first).
pub(crate) type Chains = HashMap<Arc<str>, Vec<Arc<str>>>;

/// What the message just handled says of the subject's activity, for its idle check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Touch {
    /// Work for the subject: it is active now.
    Active,
    /// Its idle check fired, under this key.
    Idle(TimerKey),
    /// Only an acknowledgement (a change made durable, the chains an operation waited
    /// for): no activity of its own.
    Ack,
    /// A timer of the subject's own fired (an expiry, a retention horizon): the clock
    /// moved, nobody came. Not activity: a subject woken by one (or handed one that
    /// reached its actor just after it began to drain) passivates once it is idle, not
    /// `passivate_after` later; a run the timer resumes keeps it as any run does.
    Timer,
}

impl Touch {
    /// What `self` then `next`, handled in one turn, say together: a fired idle check
    /// (the latest) stands, else any activity counts.
    pub(crate) fn then(self, next: Touch) -> Touch {
        match (self, next) {
            (_, Touch::Idle(key)) | (Touch::Idle(key), _) => Touch::Idle(key),
            (Touch::Active, _) | (_, Touch::Active) => Touch::Active,
            (Touch::Timer, _) | (_, Touch::Timer) => Touch::Timer,
            (Touch::Ack, Touch::Ack) => Touch::Ack,
        }
    }
}

/// What the actor should do after a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Keep going.
    Stay,
    /// Passivate: nothing is executing and the subject has been idle long enough.
    Passivate,
}

impl State {
    /// An empty subject.
    pub(crate) fn new(name: Arc<str>) -> Self {
        Self {
            name,
            entries: Tracked::default(),
            runs: Tracked::default(),
            groups: Tracked::default(),
            memory: VecDeque::new(),
            memory_base: 0,
            memory_written: Some((0, 0)),
            written: Written::default(),
            wake: None,
            live: 0,
            idle_timer: None,
            last_active: None,
            parked: None,
            teardowns: Vec::new(),
            claims: HashMap::new(),
            next_token: 0,
            unacked: VecDeque::new(),
        }
    }

    /// Whether anything of an executing activation is held: a count, an abort handle,
    /// a receiver or a blocked `sync` ask's waiter. Such a state is not packed.
    pub(crate) fn holds_activation(&self) -> bool {
        self.live > 0
            || !self.teardowns.is_empty()
            || !self.unacked.is_empty()
            || self
                .runs
                .values()
                .any(|run| run.executing || run.receiver.is_some())
            || self.entries.values().any(|parked| parked.waiter.is_some())
            || self.groups.values().any(|group| group.pending.is_some())
    }

    /// Whether the subject holds nothing at all, so passivating can forget it: no entry,
    /// no run, and no resolution remembered.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.runs.is_empty() && self.memory.is_empty()
    }

    /// The parked set as the door contract sees it, oldest first.
    pub(crate) fn list(&self) -> Vec<Entry> {
        self.entries.values().map(|p| p.entry.clone()).collect()
    }

    /// Whether a teardown waits for the supervisor's walk: the subject does not
    /// passivate meanwhile.
    pub(crate) fn walking(&self) -> bool {
        !self.teardowns.is_empty()
    }

    /// Handle one operation at `step.now`. Its effects are pushed on `step`, in order.
    pub(crate) fn handle(&mut self, op: Op, step: &mut Step<'_>) {
        match op {
            Op::Start {
                target,
                kwargs,
                extras,
                identity,
                parent,
                receiver,
                key,
                reply,
            } => {
                let run = self.start(step, target, kwargs, extras, identity, parent, receiver);
                if let Some(key) = key {
                    // Kept in this change: the key and its run are durable together.
                    let kept = crate::keys::Kept {
                        run: Some(run.to_string()),
                        fingerprint: key.fingerprint,
                        at: step.now,
                    };
                    step.push(Effect::Keep(key.name, kept));
                }
                step.reply(Reply::Start(reply, run));
            }
            Op::Ask {
                run,
                epoch,
                lineage,
                ask,
                checked,
                id,
                waiter,
                reply,
            } => {
                let stored = self.ask(step, run, epoch, lineage, ask, checked, id, waiter);
                // A teardown removes a run before any later message of it is handled, so
                // the asking activation is alive to receive this reply.
                if let Some(reply) = reply {
                    step.reply(Reply::Ask(reply, stored));
                }
            }
            Op::Ended(ending) => {
                let run = self.ended(step, *ending);
                self.activate_prepared(step, run);
            }
            Op::List { reply } => step.reply(Reply::List(reply, self.list())),
            Op::Record { run, reply } => step.reply(Reply::Record(reply, self.record_of(&run))),
            Op::Recall { interaction, reply } => {
                let recalled = self.recall(step, &interaction);
                step.reply(Reply::Recall(reply, recalled));
            }
            Op::Resume {
                interaction,
                payload,
                receiver,
                resumer,
                reply,
            } => match self.resume(step, &interaction, payload, receiver, resumer) {
                Ok((ack, run)) => {
                    step.reply(Reply::Resume(reply, Ok(ack)));
                    self.activate_prepared(step, run);
                }
                Err(problem) => step.reply(Reply::Resume(reply, Err(problem))),
            },
            Op::Take {
                interaction,
                taker,
                reply,
            } => {
                let taken = self.take(step, &interaction, taker);
                step.reply(Reply::Take(reply, taken));
            }
            Op::Cancel {
                ids,
                canceller,
                reply,
            } => match self.check_cancel(step, &ids) {
                Err(problems) => step.reply(Reply::Cancel(reply, Err(problems))),
                Ok(()) => {
                    let runs = self.linked_owners(ids.iter().map(String::as_str));
                    if runs.is_empty() {
                        self.cancel(step, ids, canceller, &Chains::new());
                        step.reply(Reply::Cancel(reply, Ok(())));
                    } else {
                        let claimed = ids.clone();
                        let walk = canceller.clone();
                        let what = Deferred::Cancel {
                            ids,
                            canceller,
                            reply,
                        };
                        self.defer(step, what, claimed, runs, walk);
                    }
                }
            },
            Op::Expire { interaction, key } => match self.expiry_needs(&interaction, key) {
                Some(owner) => {
                    let claimed = vec![interaction.to_string()];
                    let what = Deferred::Expire { interaction, key };
                    self.defer(step, what, claimed, vec![owner], None);
                }
                None => self.expire(step, &interaction, key, &Chains::new()),
            },
            Op::Walked { token, chains } => self.walked(step, token, chains),
            Op::Retire { interaction, key } => self.retire(step, &interaction, key),
            // The actor decides about passivation after every operation (`State::after`).
            Op::Idle { .. } => {}
            Op::Recover { reply } => {
                self.recover(step);
                step.reply(Reply::Done(reply));
            }
            Op::Undelivered { waiting, reply } => {
                let id = waiting.id.clone();
                // Already there if a later change of the subject stored it.
                if !self.entries.contains_key(id.as_str()) {
                    self.leave_waiting(step, waiting);
                }
                step.push(Effect::Delivered(id));
                step.reply(Reply::Done(reply));
            }
            Op::Replay => self.replay(step),
        }
    }

    // ----- teardowns that wait for the supervisor's walk -------------------------------

    /// Keep `what`, decided, until the supervisor's walk of the chains of `runs` comes
    /// back: claim the entries it names, and ask for the walk.
    fn defer(
        &mut self,
        step: &mut Step<'_>,
        what: Deferred,
        claimed: Vec<String>,
        runs: Vec<Arc<str>>,
        canceller: Option<Arc<str>>,
    ) {
        let token = self.next_token;
        self.next_token += 1;
        for id in claimed {
            self.claims.insert(Arc::from(id), token);
        }
        step.push(Effect::Walk {
            token,
            runs: runs.clone(),
            canceller,
        });
        self.teardowns.push(Teardown { token, what, runs });
    }

    /// The supervisor's walk for the teardown `token` came back (each chain in the order
    /// asked): apply it. Its entries were claimed, so nothing but another teardown
    /// resolved them meanwhile; one that did leaves this one nothing to do there.
    fn walked(&mut self, step: &mut Step<'_>, token: u64, answer: Vec<Vec<Arc<str>>>) {
        let Some(at) = self.teardowns.iter().position(|t| t.token == token) else {
            return;
        };
        let Teardown { what, runs, .. } = self.teardowns.remove(at);
        let mut released = Vec::new();
        self.claims.retain(|id, t| {
            let mine = *t == token;
            if mine {
                released.push(Arc::clone(id));
            }
            !mine
        });
        let chains: Chains = runs.into_iter().zip(answer).collect();
        match what {
            Deferred::Cancel {
                ids,
                canceller,
                reply,
            } => {
                self.cancel(step, ids, canceller, &chains);
                step.reply(Reply::Cancel(reply, Ok(())));
            }
            Deferred::Expire { interaction, key } => self.expire(step, &interaction, key, &chains),
            Deferred::Visit(planned) => self.visit_walked(planned, &chains, step),
        }
        // A deadline or horizon that fired while the entry was claimed, if the entry is
        // still there (a visit refused at its check leaves it), is handled now.
        for id in released {
            let due = self
                .entries
                .get(&id)
                .and_then(|p| p.timer.filter(|key| key.at <= step.now))
                .map(|key| {
                    (
                        key,
                        self.entries.get(&id).is_some_and(|p| p.outcome.is_some()),
                    )
                });
            match due {
                Some((key, true)) => self.retire(step, &id, key),
                Some((key, false)) => self.handle(
                    Op::Expire {
                        interaction: id,
                        key,
                    },
                    step,
                ),
                None => {}
            }
        }
    }

    /// The problem with resolving `id` while a waiting teardown claims it.
    fn claimed(&self, id: &str) -> Option<IdProblem> {
        self.claims
            .contains_key(id)
            .then(|| IdProblem::BeingResolved {
                id: id.to_owned(),
                subject: self.subject(),
            })
    }

    fn subject(&self) -> String {
        self.name.to_string()
    }

    /// Publish that the ask `id` was resolved, and how, and remember it.
    fn resolved(&mut self, step: &mut Step<'_>, id: &str, how: Resolution, to: Option<To>) {
        self.remember(step, id, how.into());
        step.publish(Event::AskResolved {
            subject: self.subject(),
            interaction: id.to_owned(),
            how,
            to: to.unwrap_or(To::Caller),
        });
    }

    // ----- the memory of resolutions ---------------------------------------------------

    /// Remember that `id` was resolved `how`, now. The oldest memory goes past
    /// [`REMEMBERED`].
    fn remember(&mut self, step: &mut Step<'_>, id: &str, how: Settled) {
        let at = step.now;
        self.forget_before(step, at);
        if self.memory.len() >= REMEMBERED {
            self.forget_oldest();
        }
        self.memory.push_back(Memory {
            id: id.to_owned(),
            how,
            at,
        });
    }

    /// Forget the resolutions past the retention horizon at `now`.
    fn forget_before(&mut self, step: &Step<'_>, now: DateTime<Utc>) {
        let horizon = chrono::Duration::from_std(step.settings.waiting_retention)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        while self.memory.front().is_some_and(|m| m.at <= horizon) {
            self.forget_oldest();
        }
    }

    /// Forget the oldest resolution remembered.
    fn forget_oldest(&mut self) {
        if self.memory.pop_front().is_some() {
            self.memory_base += 1;
        }
    }

    /// The problem with naming `id`, which has no entry: already resolved, if the
    /// subject still remembers it, else unknown.
    fn gone(&self, step: &Step<'_>, id: &str) -> IdProblem {
        let now = step.now;
        // Newest first: an ask resumed and then its waiting outcome taken reads as taken.
        match self.memory.iter().rev().find(|m| m.id == id) {
            Some(m) if self.within_memory(step, m.at, now) => IdProblem::AlreadyResolved {
                id: id.to_owned(),
                subject: self.subject(),
                how: m.how,
                at: m.at,
            },
            _ => IdProblem::Unknown {
                id: id.to_owned(),
                subject: self.subject(),
            },
        }
    }

    /// How the ask `id` was resolved, if the subject still remembers it: what the answer
    /// door tells a late answer. The ask's own resolution, not a later take of its
    /// waiting outcome; the entry may still be there, `running` or waiting.
    pub(crate) fn recall(&self, step: &Step<'_>, id: &str) -> Option<IdProblem> {
        let now = step.now;
        let m = self
            .memory
            .iter()
            .rev()
            .find(|m| m.id == id && m.how != Settled::Taken)?;
        self.within_memory(step, m.at, now)
            .then(|| IdProblem::AlreadyResolved {
                id: id.to_owned(),
                subject: self.subject(),
                how: m.how,
                at: m.at,
            })
    }

    /// Whether a resolution at `at` is still remembered at `now`.
    fn within_memory(&self, step: &Step<'_>, at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        step.retention_end(at) > now
    }

    // ----- starting and activations ---------------------------------------------------

    /// Start a run of `target`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &mut self,
        step: &mut Step<'_>,
        target: Arc<Target>,
        kwargs: Value,
        extras: Value,
        identity: Arc<str>,
        parent: Parent,
        receiver: Option<Receiver>,
    ) -> Arc<str> {
        let run: Arc<str> = Arc::from(step.id(Kind::Run));
        let (parent_run, lineage) = match parent {
            Parent::Top => (None, Arc::from(vec![target.name.to_string()])),
            Parent::Run { run, lineage } => {
                let mut chain = Vec::with_capacity(lineage.len() + 1);
                chain.push(target.name.to_string());
                chain.extend(lineage.iter().cloned());
                (Some(run), Arc::from(chain))
            }
        };
        // Only chains go to the supervisor's tree: a child whose caller is live here links
        // both; a run with no live caller stays a chain of its own until it calls a run.
        let caller = parent_run.as_ref().and_then(|p| self.runs.get_mut(p));
        let linked = if let Some(caller) = caller {
            caller.linked = true;
            step.push(Effect::Link {
                run: Arc::clone(&run),
                parent: parent_run.clone(),
            });
            true
        } else {
            false
        };
        step.publish(Event::RunStarted {
            subject: self.subject(),
            run: run.to_string(),
            target: target.name.to_string(),
        });
        self.runs.insert(
            Arc::clone(&run),
            Box::new(Run {
                target: Arc::clone(&target.name),
                parent: parent_run,
                linked,
                identity,
                lineage,
                kwargs: Stored::new(&kwargs),
                extras: Stored::new(&extras),
                journal: Vec::new(),
                status: RunStatus::Running,
                epoch: 0,
                executing: false,
                receiver,
                group: None,
                resumed_group: None,
                resumed_by: None,
                started_at: step.now,
                resumed_interactions: Vec::new(),
            }),
        );
        step.push(Effect::Live(Arc::clone(&run)));
        self.activate(step, &run);
        run
    }

    /// Start a new activation of `run`, replaying its journal.
    fn activate(&mut self, step: &mut Step<'_>, run_id: &Arc<str>) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.epoch += 1;
        run.status = RunStatus::Running;
        self.live += 1;
        run.executing = true;
        step.push(Effect::Activate(Box::new(Launch {
            run: Arc::clone(run_id),
            epoch: run.epoch,
            target: Arc::clone(&run.target),
            identity: Arc::clone(&run.identity),
            lineage: Arc::clone(&run.lineage),
            parent: run.parent.clone(),
            journal: run.journal.clone(),
            kwargs: run.kwargs.clone(),
            extras: run.extras.clone(),
        })));
    }

    /// An activation ended: deliver its outcome, or resume at once if its group was
    /// resolved while it ran.
    fn ended(&mut self, step: &mut Step<'_>, ending: Ending) -> Option<Arc<str>> {
        let Ending {
            run: run_id,
            epoch,
            result,
            replay,
        } = ending;
        let now = step.now;
        let run = self.runs.get_mut(&run_id)?;
        if run.epoch != epoch || !run.executing {
            return None;
        }
        run.executing = false;
        self.live = self.live.saturating_sub(1);
        step.push(Effect::Gone(Arc::clone(&run_id)));
        run.journal = replay.journal;
        // Kept while the run is parked, perhaps for long: no spare capacity.
        run.journal.shrink_to_fit();
        let resumed_group = run.resumed_group.take();
        let raised = run.group.clone();
        if let Some(g) = resumed_group {
            self.remove_group(step, &g);
        }
        let run = self.runs.get_mut(&run_id)?;

        if let Some(diverged) = replay.diverged {
            if let Some(g) = raised {
                self.drop_group_asks(step, &g, Resolution::Cancelled);
            }
            return self.finish(step, &run_id, Err(diverged), now);
        }
        if let Some(refused) = replay.refused {
            // An ask of this activation was refused: nothing it raised stays parked, and
            // a run that parks anyway fails with the refusal where it was raised.
            let outcome = match result {
                Ok(value) => Ok(value),
                Err(RunError::Failed(message)) => Err(message),
                Err(RunError::Suspended(_)) => Err(refused),
            };
            let resumer = raised.and_then(|g| self.withdraw_group(step, &g));
            if let Some(resumer) = resumer {
                // A resume of the group's last ask was held for this activation's end:
                // its resumer receives the same terminal as the run's receiver.
                let (status, result, error) = match &outcome {
                    Ok(v) => (RunStatus::Succeeded, Some(v.clone()), None),
                    Err(e) => (RunStatus::Failed, None, Some(e.clone())),
                };
                if let Some(mut record) = self.record(&run_id, status, result, error, None) {
                    record.finished_at = Some(now);
                    step.push(Effect::Deliver(resumer, Box::new(record), None));
                }
            }
            return self.finish(step, &run_id, outcome, now);
        }
        if let Some(gid) = raised.filter(|g| self.groups.contains_key(g)) {
            run.status = RunStatus::Parked;
            let receiver = run.receiver.take();
            let group = self.groups.get_mut(&gid)?;
            group.open = false;
            let pending = group.pending.take();
            let record = self
                .groups
                .get(&gid)
                .and_then(|g| self.parked_record(&run_id, &g.members));
            if let Some(record) = record {
                if let Some(run) = self.runs.get_mut(&run_id) {
                    run.status = record.status;
                }
                if let Some(receiver) = receiver {
                    step.push(Effect::Deliver(receiver, Box::new(record), None));
                }
            }
            if let Some((receiver, last)) = pending {
                return self.prepare_resume(&run_id, &gid, receiver, last);
            }
            return None;
        }
        let outcome = match result {
            Ok(value) => Ok(value),
            Err(RunError::Failed(message)) => Err(message),
            Err(RunError::Suspended(s)) => Err(format!(
                "target {} returned the suspension of interaction {} without an open ask",
                run.target, s.interaction
            )),
        };
        self.finish(step, &run_id, outcome, now)
    }

    /// End `run` for good with `outcome`, delivering it or leaving it waiting.
    fn finish(
        &mut self,
        step: &mut Step<'_>,
        run_id: &Arc<str>,
        outcome: Result<Value, String>,
        now: DateTime<Utc>,
    ) -> Option<Arc<str>> {
        let (status, result, error) = match &outcome {
            Ok(v) => (RunStatus::Succeeded, Some(v.clone()), None),
            Err(e) => (RunStatus::Failed, None, Some(e.clone())),
        };
        let mut record = self.record(run_id, status, result, error.clone(), None)?;
        record.finished_at = Some(now);
        self.keep_ended(step, &record, now);
        let run = self.runs.shift_remove(run_id)?;
        if run.linked {
            step.push(Effect::Unlink(Arc::clone(run_id)));
        }
        step.publish(match &error {
            None => Event::RunFinished {
                subject: self.subject(),
                run: run_id.to_string(),
            },
            Some(e) => Event::RunFailed {
                subject: self.subject(),
                run: run_id.to_string(),
                error: e.clone(),
            },
        });
        let waiting = run.resumed_by.map(|id| Waiting {
            id,
            run: Arc::clone(run_id),
            outcome,
        });
        match run.receiver {
            // Left waiting if the receiver stopped waiting before the actor delivers it.
            Some(receiver) => step.push(Effect::Deliver(receiver, Box::new(record), waiting)),
            None => {
                if let Some(waiting) = waiting {
                    self.leave_waiting(step, waiting);
                }
            }
        }
        None
    }

    /// Leave a resolved run's terminal waiting under the id that resumed it: its
    /// receiver was gone, or it had none.
    pub(crate) fn leave_waiting(&mut self, step: &mut Step<'_>, waiting: Waiting) {
        let Waiting { id, run, outcome } = waiting;
        let now = step.now;
        let status = if outcome.is_ok() {
            EntryStatus::Finished
        } else {
            EntryStatus::Failed
        };
        let name: Arc<str> = Arc::from(id.as_str());
        let key = step.arm(
            step.retention_end(now),
            Timer::Retention {
                subject: Arc::clone(&self.name),
                interaction: Arc::clone(&name),
            },
        );
        step.push(Effect::CountWaiting);
        self.parked = None;
        self.entries.insert(
            name,
            Box::new(Parked {
                entry: Entry::waiting(id.clone(), status),
                run,
                on_expiry: OnExpiry::Kill,
                timer: Some(key),
                answer: None,
                outcome: Some(Box::new(outcome)),
                waiter: None,
                offered: None,
                input: None,
                ord: 0,
            }),
        );
        step.publish(Event::WaitingOutcomeStored {
            subject: self.subject(),
            interaction: id,
        });
    }

    /// The record of the parked run `run_id` whose group is `members`: `parked` with the
    /// caller asks still standing, or `suspended` with the sentinel naming its user asks
    /// when only those are open.
    fn parked_record(&self, run_id: &str, members: &[String]) -> Option<RunRecord> {
        let (asks, user): (Vec<Entry>, Vec<Entry>) = members
            .iter()
            .filter_map(|id| self.entries.get(id.as_str()).map(|p| p.entry.clone()))
            .partition(|e| e.to != Some(To::User));
        let (status, asks) = if asks.is_empty() {
            (RunStatus::Suspended, None)
        } else {
            (RunStatus::Parked, Some(asks))
        };
        let mut record = self.record(run_id, status, None, None, asks)?;
        if !user.is_empty() {
            record.suspension = Some(Suspended {
                interactions: user.into_iter().map(|e| e.id).collect(),
            });
        }
        Some(record)
    }

    /// The record of the run `run_id` as it stands now, if it lives on this subject; a
    /// run that ended for good has its record kept by the hub.
    pub(crate) fn record_of(&self, run_id: &str) -> Option<RunRecord> {
        let run = self.runs.get(run_id)?;
        match run.status {
            RunStatus::Parked | RunStatus::Suspended => {
                let members = run
                    .group
                    .as_ref()
                    .and_then(|g| self.groups.get(g))
                    .map_or(&[][..], |g| g.members.as_slice());
                self.parked_record(run_id, members)
            }
            status => self.record(run_id, status, None, None, None),
        }
    }

    /// The record of `run` as it stands.
    fn record(
        &self,
        run_id: &str,
        status: RunStatus,
        result: Option<Value>,
        error: Option<String>,
        asks: Option<Vec<Entry>>,
    ) -> Option<RunRecord> {
        let run = self.runs.get(run_id)?;
        Some(RunRecord {
            run_id: run_id.to_owned(),
            target: run.target.to_string(),
            identity: run.identity.to_string(),
            status,
            started_at: run.started_at,
            finished_at: None,
            result,
            error,
            asks,
            suspension: None,
            resumed_interactions: run.resumed_interactions.clone(),
        })
    }

    /// Keep the record of a run that ended for good, and arm its retention horizon.
    fn keep_ended(&self, step: &mut Step<'_>, record: &RunRecord, now: DateTime<Utc>) {
        step.arm(
            step.retention_end(now),
            Timer::Record {
                subject: Arc::clone(&self.name),
                run: Arc::from(record.run_id.as_str()),
            },
        );
        step.push(Effect::Record(Box::new(record.clone())));
    }

    // ----- asks ----------------------------------------------------------------------

    /// Park an ask of `run`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ask(
        &mut self,
        step: &mut Step<'_>,
        run_id: Arc<str>,
        epoch: u64,
        lineage: Arc<[String]>,
        ask: Ask,
        checked: Checked,
        id: String,
        waiter: Option<Waiter>,
    ) -> Result<String, AskError> {
        let Some(run) = self
            .runs
            .get_mut(&run_id)
            .filter(|r| r.executing && r.epoch == epoch)
        else {
            step.push(Effect::Release(ask.to));
            return Err(AskError::Cancelled {
                run: run_id.to_string(),
            });
        };
        // A sync ask blocks its activation instead of parking it: it joins no group.
        let gid = match run.group.clone().filter(|g| self.groups.contains_key(g)) {
            _ if waiter.is_some() => String::new(),
            Some(g) => g,
            None => {
                let g = step.id(Kind::Group);
                run.group = Some(g.clone());
                self.groups.insert(
                    Arc::from(g.as_str()),
                    Box::new(Group {
                        run: Arc::clone(&run_id),
                        // Most activations raise one ask.
                        members: Vec::with_capacity(1),
                        open: true,
                        pending: None,
                    }),
                );
                g
            }
        };
        let name: Arc<str> = Arc::from(id.as_str());
        let key = step.arm(
            checked.deadline,
            Timer::Expiry {
                subject: Arc::clone(&self.name),
                interaction: Arc::clone(&name),
            },
        );
        let offered = (ask.to == To::User).then(|| {
            Box::new(InboxItem {
                id: id.clone(),
                subject: self.subject(),
                question: ask.question.clone(),
                answer_format: ask.format().to_owned(),
                options: ask.options.clone(),
                schema: ask.schema.clone(),
                asked_by: lineage.to_vec(),
                // Filled by the inbox, which knows the tools.
                asked_by_titles: Default::default(),
                expiry_at: checked.deadline,
            })
        });
        if let Some(item) = &offered {
            step.push(Effect::Offer(item.clone()));
        }
        let entry = Entry {
            id: id.clone(),
            status: EntryStatus::Asking,
            to: Some(ask.to),
            asked_by: Some(lineage.to_vec()),
            question: ask.question,
            answer_format: ask.answer_format,
            group_id: (!gid.is_empty()).then(|| gid.clone()),
            payload: ask.payload,
        };
        self.parked = None;
        self.entries.insert(
            name,
            Box::new(Parked {
                entry,
                run: Arc::clone(&run_id),
                on_expiry: checked.on_expiry,
                timer: Some(key),
                answer: None,
                outcome: None,
                waiter,
                offered,
                input: None,
                ord: 0,
            }),
        );
        if let Some(group) = self.groups.get_mut(&gid) {
            group.members.push(id.clone());
        }
        step.publish(Event::AskParked {
            subject: self.subject(),
            interaction: id.clone(),
            run: run_id.to_string(),
            to: ask.to,
        });
        Ok(id)
    }

    /// Remove one entry, disarming its timer and giving back its unit of the ceiling.
    fn remove_entry(&mut self, step: &mut Step<'_>, id: &str) -> Option<Parked> {
        let parked = self.entries.shift_remove(id)?;
        self.parked = None;
        // A user ask leaves the inbox with its `ask_resolved`, which every removal of an
        // asking entry publishes.
        if let Some(key) = parked.timer {
            step.disarm(key);
        }
        step.push(Effect::Release(parked.entry.to.unwrap_or(To::Caller)));
        Some(*parked)
    }

    /// Remove a resolved group and its (running) entries.
    fn remove_group(&mut self, step: &mut Step<'_>, gid: &str) {
        if let Some(group) = self.groups.shift_remove(gid) {
            for id in group.members {
                self.remove_entry(step, &id);
            }
        }
    }

    /// Withdraw the asks of a group whose activation had an ask refused: those still
    /// asking are resolved `cancelled`. Returns the receiver of a resume held for the
    /// activation's end, if one was.
    fn withdraw_group(&mut self, step: &mut Step<'_>, gid: &str) -> Option<Receiver> {
        let pending = self.groups.get_mut(gid)?.pending.take();
        self.drop_group_asks(step, gid, Resolution::Cancelled);
        pending.and_then(|(receiver, _)| receiver)
    }

    /// Remove a group whose asks will never be answered (the run diverged).
    fn drop_group_asks(&mut self, step: &mut Step<'_>, gid: &str, how: Resolution) {
        if let Some(group) = self.groups.shift_remove(gid) {
            for id in group.members {
                if let Some(p) = self.remove_entry(step, &id)
                    && p.entry.status == EntryStatus::Asking
                {
                    self.resolved(step, &id, how, p.entry.to);
                }
            }
        }
    }

    // ----- resume, take, cancel ------------------------------------------------------

    /// Check that `id` names an `asking` entry.
    fn check_asking(&self, step: &Step<'_>, id: &str) -> Result<(), IdProblem> {
        if let Some(problem) = self.claimed(id) {
            return Err(problem);
        }
        match self.entries.get(id) {
            None => Err(self.gone(step, id)),
            Some(p) if p.entry.status != EntryStatus::Asking => Err(IdProblem::WrongStatus {
                id: id.to_owned(),
                wanted: "asking".into(),
                status: p.entry.status,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Check that `id` names a waiting outcome.
    pub(crate) fn check_waiting(&self, step: &Step<'_>, id: &str) -> Result<(), IdProblem> {
        if let Some(problem) = self.claimed(id) {
            return Err(problem);
        }
        match self.entries.get(id) {
            None => Err(self.gone(step, id)),
            Some(p) if p.outcome.is_none() => Err(IdProblem::WrongStatus {
                id: id.to_owned(),
                wanted: "a waiting outcome (finished or failed)".into(),
                status: p.entry.status,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Resume the ask `id` with `payload`. Returns a run to activate, if the group is
    /// complete and its activation has ended.
    pub(crate) fn resume(
        &mut self,
        step: &mut Step<'_>,
        id: &str,
        payload: Value,
        receiver: Option<Receiver>,
        resumer: Option<Arc<str>>,
    ) -> Result<(Ack, Option<Arc<str>>), IdProblem> {
        self.check_asking(step, id)?;
        if payload.get(EXPIRY_MARKER_KEY).is_some() {
            return Err(IdProblem::ReservedKey {
                id: id.to_owned(),
                key: EXPIRY_MARKER_KEY.into(),
            });
        }
        if let Some(r) = resumer.and_then(|r| self.runs.get_mut(&r)) {
            r.resumed_interactions.push(id.to_owned());
        }
        Ok(self.resolve(step, id, payload, receiver, Resolution::Resumed))
    }

    /// Record `answer` for the asking entry `id`; resume its run if that completes the
    /// group.
    fn resolve(
        &mut self,
        step: &mut Step<'_>,
        id: &str,
        answer: Value,
        receiver: Option<Receiver>,
        how: Resolution,
    ) -> (Ack, Option<Arc<str>>) {
        let Some(parked) = self.entries.get_mut(id) else {
            return (Ack::Buffered { remaining: 0 }, None);
        };
        let to = parked.entry.to;
        if let Some(waiter) = parked.waiter.take() {
            // A sync ask: hand the answer to the blocked activation; no group resumes.
            self.remove_entry(step, id);
            step.push(Effect::Answer(waiter, answer));
            self.resolved(step, id, how, to);
            return (Ack::Started, None);
        }
        parked.entry.status = EntryStatus::Running;
        parked.input = None;
        parked.answer = Some(Box::new(answer));
        self.parked = None;
        if let Some(key) = parked.timer.take() {
            step.disarm(key);
        }
        let run_id = Arc::clone(&parked.run);
        let gid = parked.entry.group_id.clone().unwrap_or_default();
        self.resolved(step, id, how, to);
        let Some(group) = self.groups.get_mut(&gid) else {
            return (Ack::Buffered { remaining: 0 }, None);
        };
        let remaining = group
            .members
            .iter()
            .filter(|m| {
                self.entries
                    .get(m.as_str())
                    .is_some_and(|p| p.entry.status == EntryStatus::Asking)
            })
            .count();
        if remaining > 0 {
            return (Ack::Buffered { remaining }, None);
        }
        if group.open {
            group.pending = Some((receiver, id.to_owned()));
            return (Ack::Started, None);
        }
        (
            Ack::Started,
            self.prepare_resume(&run_id, &gid, receiver, id.to_owned()),
        )
    }

    /// Fill the group's answers into the journal and attach the receiver; the caller
    /// then activates the returned run.
    fn prepare_resume(
        &mut self,
        run_id: &Arc<str>,
        gid: &str,
        receiver: Option<Receiver>,
        last: String,
    ) -> Option<Arc<str>> {
        let group = self.groups.get(gid)?;
        let answers: HashMap<&str, &Value> = group
            .members
            .iter()
            .filter_map(|m| {
                let p = self.entries.get(m.as_str())?;
                Some((m.as_str(), p.answer.as_deref()?))
            })
            .collect();
        let run = self.runs.get_mut(run_id)?;
        for entry in &mut run.journal {
            if let JournalEntry::Ask {
                interaction,
                answer,
                ..
            } = entry
                && answer.is_none()
                && let Some(a) = answers.get(interaction.as_str())
            {
                *answer = Some((*a).clone());
            }
        }
        run.receiver = receiver;
        run.resumed_by = Some(last);
        run.group = None;
        run.resumed_group = Some(gid.to_owned());
        Some(Arc::clone(run_id))
    }

    /// Activate a run that [`State::resume`] or [`State::ended`] prepared.
    pub(crate) fn activate_prepared(&mut self, step: &mut Step<'_>, run: Option<Arc<str>>) {
        if let Some(run) = run {
            self.activate(step, &run);
        }
    }

    /// Take the waiting outcome `id`.
    pub(crate) fn take(
        &mut self,
        step: &mut Step<'_>,
        id: &str,
        taker: Option<Arc<str>>,
    ) -> Result<Result<Value, String>, IdProblem> {
        self.check_waiting(step, id)?;
        let parked = self.remove_entry(step, id);
        self.remember(step, id, Settled::Taken);
        if let Some(r) = taker.and_then(|r| self.runs.get_mut(&r)) {
            r.resumed_interactions.push(id.to_owned());
        }
        step.publish(Event::WaitingOutcomeTaken {
            subject: self.subject(),
            interaction: id.to_owned(),
        });
        Ok(parked
            .and_then(|p| p.outcome)
            .map_or_else(|| Err(format!("interaction {id} held no outcome")), |o| *o))
    }

    /// Check a cancel of `ids`: every problem is reported.
    pub(crate) fn check_cancel(
        &self,
        step: &Step<'_>,
        ids: &[String],
    ) -> Result<(), Vec<IdProblem>> {
        let mut problems = Vec::new();
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id.as_str()) {
                problems.push(IdProblem::Duplicate { id: id.clone() });
            } else if let Some(problem) = self.claimed(id) {
                problems.push(problem);
            } else {
                match self.entries.get(id.as_str()) {
                    None => problems.push(self.gone(step, id)),
                    // Already resolved by a resume: a cancel would resolve it twice.
                    Some(p) if p.entry.status == EntryStatus::Running => {
                        problems.push(IdProblem::WrongStatus {
                            id: id.clone(),
                            wanted: "asking or a waiting outcome".into(),
                            status: p.entry.status,
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Cancel each of `ids` (already checked): a waiting outcome is removed, an ask tears
    /// its chain down. `chains` holds the supervisor's chain of every linked owner.
    fn cancel(
        &mut self,
        step: &mut Step<'_>,
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
        chains: &Chains,
    ) {
        if let Some(r) = canceller.as_ref().and_then(|r| self.runs.get_mut(r)) {
            r.resumed_interactions.extend(ids.iter().cloned());
        }
        for id in ids {
            let Some(parked) = self.entries.get(id.as_str()) else {
                // Already torn down with an earlier id's chain.
                continue;
            };
            if parked.outcome.is_some() {
                self.remove_entry(step, &id);
                self.remember(step, &id, Settled::Cancelled);
                step.publish(Event::WaitingOutcomeDropped {
                    subject: self.subject(),
                    interaction: id,
                    reason: "cancelled".into(),
                });
                continue;
            }
            let owner = Arc::clone(&parked.run);
            self.tear_down(step, &owner, chains, &id, Resolution::Cancelled);
        }
    }

    /// Whether the supervisor's run tree holds `run`, that is, whether it is part of a
    /// chain longer than itself.
    fn is_linked(&self, run: &str) -> bool {
        self.runs.get(run).is_some_and(|r| r.linked)
    }

    /// The linked runs owning the asks among `ids`: the chains a teardown of them needs
    /// from the supervisor. A run that is not linked is a chain of its own.
    pub(crate) fn linked_owners<'i>(
        &self,
        ids: impl IntoIterator<Item = &'i str>,
    ) -> Vec<Arc<str>> {
        let mut owners: Vec<Arc<str>> = Vec::new();
        for id in ids {
            if let Some(p) = self.entries.get(id).filter(|p| p.outcome.is_none())
                && self.is_linked(&p.run)
                && !owners.contains(&p.run)
            {
                owners.push(Arc::clone(&p.run));
            }
        }
        owners
    }

    /// The runs a teardown of `owner`'s park reaches: the supervisor's chain if the
    /// owner is linked, else the owner alone; runs started on the subject under one of
    /// them since the supervisor answered are reached too (asker first).
    pub(crate) fn chain_of(&self, owner: &Arc<str>, chains: &Chains) -> Vec<Arc<str>> {
        let mut runs = chains.get(owner).cloned().unwrap_or_default();
        if !runs.iter().any(|r| r == owner) {
            runs.insert(0, Arc::clone(owner));
        }
        let mut at = 0;
        while at < runs.len() {
            let parent = Arc::clone(&runs[at]);
            for (id, run) in self.runs.iter() {
                if run.parent.as_ref() == Some(&parent) && !runs.contains(id) {
                    runs.push(Arc::clone(id));
                }
            }
            at += 1;
        }
        runs
    }

    /// Tear down the chain of the park `interaction` raised by `owner`.
    fn tear_down(
        &mut self,
        step: &mut Step<'_>,
        owner: &Arc<str>,
        chains: &Chains,
        interaction: &str,
        how: Resolution,
    ) {
        let runs = self.chain_of(owner, chains);
        let now = step.now;
        let verb = match how {
            Resolution::Expired => "expired",
            _ => "was cancelled",
        };
        let error = format!("cancelled: interaction {interaction} {verb}");
        let torn: HashSet<Arc<str>> = runs.iter().cloned().collect();
        // The entries those runs own: their asks, asking or running.
        let owned: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, p)| p.outcome.is_none() && torn.contains(&p.run))
            .map(|(_, p)| p.entry.id.clone())
            .collect();
        for id in owned {
            if let Some(p) = self.remove_entry(step, &id)
                && p.entry.status == EntryStatus::Asking
            {
                let how = if id == interaction {
                    how
                } else {
                    Resolution::Cancelled
                };
                self.resolved(step, &id, how, p.entry.to);
            }
        }
        // Receivers waiting on a group that was resolved while its activation ran.
        let mut pending: HashMap<Arc<str>, Vec<Receiver>> = HashMap::new();
        self.groups.retain(|_, g| {
            if !torn.contains(&g.run) {
                return true;
            }
            if let Some((Some(r), _)) = g.pending.take() {
                pending.entry(Arc::clone(&g.run)).or_default().push(r);
            }
            false
        });
        for run_id in &runs {
            let Some(run) = self.runs.shift_remove(run_id) else {
                continue;
            };
            if run.executing {
                // Dropped wherever the target's future stands.
                step.push(Effect::Abort(Arc::clone(run_id)));
                self.live = self.live.saturating_sub(1);
            }
            if run.linked {
                step.push(Effect::Unlink(Arc::clone(run_id)));
            }
            step.publish(Event::RunCancelled {
                subject: self.subject(),
                run: run_id.to_string(),
                interaction: interaction.to_owned(),
            });
            let record = RunRecord {
                run_id: run_id.to_string(),
                target: run.target.to_string(),
                identity: run.identity.to_string(),
                status: RunStatus::Cancelled,
                started_at: run.started_at,
                finished_at: Some(now),
                result: None,
                error: Some(error.clone()),
                asks: None,
                suspension: None,
                resumed_interactions: run.resumed_interactions,
            };
            self.keep_ended(step, &record, now);
            let receivers = run
                .receiver
                .into_iter()
                .chain(pending.remove(run_id).into_iter().flatten());
            for receiver in receivers {
                step.push(Effect::Deliver(receiver, Box::new(record.clone()), None));
            }
        }
    }

    // ----- timers ----------------------------------------------------------------------

    /// The linked owner of the ask `id` if its deadline firing at `key` would tear its
    /// chain down: the chain the expiry needs from the supervisor.
    fn expiry_needs(&self, id: &str, key: TimerKey) -> Option<Arc<str>> {
        if self.claims.contains_key(id) {
            return None;
        }
        let parked = self.entries.get(id)?;
        let due = parked.entry.status == EntryStatus::Asking
            && parked.timer == Some(key)
            && parked.on_expiry == OnExpiry::Kill;
        (due && self.is_linked(&parked.run)).then(|| Arc::clone(&parked.run))
    }

    /// An ask's deadline fired: whichever of expiry and resume the subject handles first
    /// wins, so a resolved ask or a re-armed timer makes this a no-op.
    fn expire(&mut self, step: &mut Step<'_>, id: &str, key: TimerKey, chains: &Chains) {
        // A waiting teardown claims it: the deadline is looked at again once that is
        // applied (`State::walked`).
        if self.claims.contains_key(id) {
            return;
        }
        let Some(parked) = self.entries.get_mut(id) else {
            return;
        };
        if parked.entry.status != EntryStatus::Asking || parked.timer != Some(key) {
            return;
        }
        parked.timer = None;
        let on_expiry = parked.on_expiry;
        let wait = parked.entry.is_wait();
        let owner = Arc::clone(&parked.run);
        step.publish(Event::ExpiryFired {
            subject: self.subject(),
            interaction: id.to_owned(),
        });
        match on_expiry {
            OnExpiry::Kill => self.tear_down(step, &owner, chains, id, Resolution::Expired),
            OnExpiry::Resume => {
                let (_, run) = self.resolve(step, id, expiry_marker(), None, Resolution::Expired);
                // A wait that ran out resumes its run for the run's own sake: nobody
                // resumed it to receive its outcome, so none is left waiting.
                if wait && let Some(r) = run.as_ref().and_then(|r| self.runs.get_mut(r)) {
                    r.resumed_by = None;
                }
                self.activate_prepared(step, run);
            }
        }
    }

    /// A waiting outcome's retention horizon passed: drop it, with an event.
    fn retire(&mut self, step: &mut Step<'_>, id: &str, key: TimerKey) {
        // As for an expiry, a claimed entry's horizon is looked at again later.
        if self.claims.contains_key(id) {
            return;
        }
        let due = self
            .entries
            .get(id)
            .is_some_and(|p| p.outcome.is_some() && p.timer == Some(key));
        if due {
            if let Some(p) = self.entries.get_mut(id) {
                p.timer = None;
            }
            self.remove_entry(step, id);
            step.publish(Event::WaitingOutcomeDropped {
                subject: self.subject(),
                interaction: id.to_owned(),
                reason: "retention".into(),
            });
        }
    }

    /// Note what a message said of the subject's activity: whether an idle check that
    /// fired was superseded by a later one (which then stands).
    fn note(&mut self, now: DateTime<Utc>, touch: Touch) -> bool {
        match touch {
            Touch::Idle(key) => {
                if self.idle_timer == Some(key) {
                    self.idle_timer = None;
                } else if self.idle_timer.is_some() {
                    return true;
                }
                // Else a check from before the subject last passivated woke it: it
                // counts from its waking (not from each check), and arms the next check,
                // so the subject does not keep its actor for good.
                self.last_active.get_or_insert(now);
            }
            Touch::Active => self.last_active = Some(now),
            // A change made durable is the end of earlier work, not new work: a subject
            // woken only to take it passivates as it would have without the store. A
            // timer of its own is the clock's, not work either.
            Touch::Ack | Touch::Timer => {}
        }
        false
    }

    /// After a message the actor cannot decide on yet (a change is not yet durable, an
    /// operation waits, the actor drains): note its activity, so the decision made later
    /// counts it, and consume a fired idle check, so the next decision arms a new one.
    pub(crate) fn deferred(&mut self, now: DateTime<Utc>, touch: Touch) {
        self.note(now, touch);
    }

    /// After each message: decide whether to passivate, or arm the idle check.
    pub(crate) fn after(&mut self, step: &mut Step<'_>, touch: Touch) -> After {
        let now = step.now;
        if self.note(now, touch) {
            // Superseded: the armed check stands.
            return After::Stay;
        }
        if self.live > 0 {
            return After::Stay;
        }
        // A subject woken only to take an acknowledgement, or by a timer of its own, has
        // had no work since it last passivated: it is idle already.
        let idle_since = match (self.last_active, touch) {
            (Some(at), _) => at,
            (None, Touch::Ack | Touch::Timer) => DateTime::<Utc>::MIN_UTC,
            (None, _) => now,
        };
        let due = chrono::Duration::from_std(step.settings.passivate_after)
            .ok()
            .and_then(|d| idle_since.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        if due <= now {
            self.forget_before(step, now);
            if self.entries.is_empty() && self.runs.is_empty() {
                self.arm_forgetting(step);
            }
            // A passive subject arms nothing: the idle check is forgotten.
            if let Some(key) = self.idle_timer.take() {
                step.disarm(key);
            }
            return After::Passivate;
        }
        if self.idle_timer.is_none() {
            let timer = Timer::Idle {
                subject: Arc::clone(&self.name),
            };
            self.idle_timer = Some(step.arm(due, timer));
        }
        After::Stay
    }

    /// A subject that passivates holding only resolutions it remembers is woken once
    /// the newest of them passes the retention horizon, so it can forget them and itself
    /// (a wake from an idle check armed before it passivated, which the actor handles as
    /// any such check). A subject holding entries forgets its old resolutions when
    /// something else wakes it; [`REMEMBERED`] bounds them meanwhile.
    fn arm_forgetting(&self, step: &mut Step<'_>) {
        let Some(newest) = self.memory.back() else {
            return;
        };
        let due = step.retention_end(newest.at);
        step.arm(
            due,
            Timer::Idle {
                subject: Arc::clone(&self.name),
            },
        );
    }

    /// Bring a state read back from the store after a restart into this process: the
    /// runs whose activation was executing when the process stopped are replayed from
    /// their journal (the asks that activation had raised were never completed: they
    /// are withdrawn, each resolved `cancelled`); every deadline and retention horizon is
    /// armed again with a fresh key, so a timer of the old process cannot match; the
    /// ceilings count the entries again, the inbox lists the user asks, the supervisor's
    /// tree links the chains, and the live runs are counted.
    pub(crate) fn recover(&mut self, step: &mut Step<'_>) {
        for run in &self.stopped_runs() {
            let orphans: Vec<Arc<str>> = self
                .entries
                .iter()
                .filter(|(_, p)| p.run == *run && p.entry.status == EntryStatus::Asking)
                .map(|(id, _)| Arc::clone(id))
                .collect();
            for id in orphans {
                // Never counted in this process: removed without giving a unit back.
                let to = self.entries.shift_remove(&id).and_then(|p| p.entry.to);
                self.resolved(step, &id, Resolution::Cancelled, to);
            }
            if let Some(r) = self.runs.get_mut(run) {
                r.group = None;
            }
        }
        let entries = &self.entries;
        self.groups
            .retain(|_, g| g.members.iter().any(|m| entries.contains_key(m.as_str())));
        self.forget_conversions();
        let name = Arc::clone(&self.name);
        for (id, parked) in self.entries.iter() {
            let to = parked.entry.to.unwrap_or(To::Caller);
            step.push(Effect::Occupy(to));
            let Some(old) = parked.timer else {
                continue;
            };
            let timer = if parked.outcome.is_some() {
                Timer::Retention {
                    subject: Arc::clone(&name),
                    interaction: Arc::clone(id),
                }
            } else {
                Timer::Expiry {
                    subject: Arc::clone(&name),
                    interaction: Arc::clone(id),
                }
            };
            step.rearm(old, timer);
        }
        for parked in self.entries.values() {
            if let Some(item) = parked
                .offered
                .as_ref()
                .filter(|_| parked.entry.status == EntryStatus::Asking)
            {
                step.push(Effect::Offer(item.clone()));
            }
        }
        let mut linked: Vec<(&Arc<str>, &Box<Run>)> =
            self.runs.iter().filter(|(_, r)| r.linked).collect();
        linked.sort_by(|a, b| a.0.cmp(b.0));
        for (id, run) in linked {
            step.push(Effect::Link {
                run: Arc::clone(id),
                parent: run.parent.clone(),
            });
        }
        let mut runs: Vec<&Arc<str>> = self.runs.keys().collect();
        runs.sort();
        for run in runs {
            step.push(Effect::Alive);
            step.push(Effect::Live(Arc::clone(run)));
        }
    }

    /// Whether a run's activation was executing when the state was written: read back,
    /// it is replayed ([`State::replay`]).
    pub(crate) fn executing_at_stop(&self) -> bool {
        self.runs
            .values()
            .any(|run| run.status == RunStatus::Running)
    }

    /// What the subject counts against the ceilings, as [`State::recover`] counts it
    /// again: its entries addressed to the caller (waiting outcomes among them) and to a
    /// user, and its runs that have not ended.
    pub(crate) fn counts(&self) -> Counts {
        let user = self
            .entries
            .values()
            .filter(|p| p.entry.to == Some(To::User))
            .count();
        Counts {
            caller: self.entries.len() - user,
            user,
            runs: self.runs.len(),
        }
    }

    /// The ids of the runs that have not ended.
    pub(crate) fn run_ids(&self) -> impl Iterator<Item = &Arc<str>> {
        self.runs.keys()
    }

    /// Whether a user ask is open here: the inbox lists it.
    pub(crate) fn offers(&self) -> bool {
        self.entries
            .values()
            .any(|p| p.offered.is_some() && p.entry.status == EntryStatus::Asking)
    }

    /// The earliest deadline of the subject's timers (its asks' expiries and its waiting
    /// outcomes' horizons), if it has any.
    pub(crate) fn earliest_timer(&self) -> Option<DateTime<Utc>> {
        self.entries
            .values()
            .filter_map(|p| p.timer.map(|key| key.at))
            .min()
    }

    /// After every subject has been recovered (so the ceilings count everything read
    /// back before any replay asks again): replay the runs whose activation was executing
    /// when the process stopped, from their journals.
    pub(crate) fn replay(&mut self, step: &mut Step<'_>) {
        for run in self.stopped_runs() {
            self.activate(step, &run);
        }
    }

    /// The runs that were executing when the state was written and have no activation
    /// in this process, in id order.
    fn stopped_runs(&self) -> Vec<Arc<str>> {
        let mut runs: Vec<Arc<str>> = self
            .runs
            .iter()
            .filter(|(_, run)| run.status == RunStatus::Running && !run.executing)
            .map(|(id, _)| Arc::clone(id))
            .collect();
        runs.sort();
        runs
    }

    /// Drop `$parked` and each entry's conversion for jq: a passive subject keeps plain
    /// data only, and the next visit converts again.
    pub(crate) fn forget_conversions(&mut self) {
        self.parked = None;
        self.entries
            .for_each_unkept(|_, parked| parked.input = None);
    }
}
