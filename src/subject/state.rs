//! One subject's state and every transition of it.
//!
//! The state is plain data: the parked set (oldest first), the runs living on the
//! subject with their journals, and the groups of asks each activation raised. It holds
//! no channel: whoever awaits a reply or a run's outcome is named by a
//! [`ReplyId`](crate::ids::ReplyId), whose channel the actor holds (`super::reply`). [`State::handle`] takes one operation with a [`Step`] (the time, the id
//! source, the settings) and returns nothing but the state it changed and the effects it
//! pushed on the step ([`super::effect`]): it never awaits and touches nothing outside
//! the state. Every transition is total. A teardown of a linked run's chain, which the
//! supervisor walks, is decided when its operation is handled and kept in the state as a
//! [`Teardown`] (the operation, and the entries it claims) until the supervisor's walk
//! comes back as an ordinary operation ([`Op::Walked`]), which applies it.
//!
//! This file holds the state's types and [`State::handle`], which hands each operation
//! to the transition of its concern, one file each:
//!
//! - `runs`: starts, activations, an activation's end, outcomes left waiting, records;
//! - `asks`: parking an ask in its group, resume, take, removing entries and groups;
//! - `teardown`: cancels, chains, teardowns (with those that wait for the supervisor's
//!   walk), and the fires of deadlines and retention horizons;
//! - `memory`: how and when each interaction was resolved, for the retention horizon;
//! - `passivation`: activity, the idle check, the decision to passivate;
//! - `recovery`: a state read back after a restart, and replay;
//! - `visit`: a door's plan checked and applied;
//! - `tracked` and `parts`: the tables that mark what a change touched, and the state as
//!   keys in the store.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Op;
use super::effect::{Effect, Step};
use super::reply::Answer;
use crate::ask::OnExpiry;
use crate::entry::Entry;
use crate::event::Settled;
use crate::ids::ReplyId;
use crate::inbox::InboxItem;
use crate::record::RunStatus;
use crate::run::journal::JournalEntry;
use crate::run::stored::Stored;
use crate::supervisor::TimerKey;

mod asks;
mod fires;
mod memory;
mod parts;
mod passivation;
mod recovery;
mod runs;
mod teardown;
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
    waiter: Option<ReplyId>,
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
    pending: Option<(Option<ReplyId>, String)>,
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
    receiver: Option<ReplyId>,
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
    /// Each schedule door's last fire applied on the subject, by the boundary it was
    /// armed for (`fires`): kept with the subject so that a process that takes its slot
    /// does not fire that boundary again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    fired: BTreeMap<Arc<str>, DateTime<Utc>>,
    /// Whether `fired` changed since it was last written.
    #[serde(skip)]
    fired_dirty: bool,
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
    /// The epoch of the subject's slot in the store that the state was read under (or,
    /// for one made or unpacked, that its actor began under): its changes are written
    /// under it, and an acknowledgement of another epoch's change is not its own.
    #[serde(skip)]
    pub(crate) slot_epoch: Option<u32>,
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
        reply: ReplyId,
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
    /// More subjects hold an actor than `max_live_subjects`, and this one has been idle
    /// the longest: it passivates if it still is idle. Not activity.
    Crowded,
}

impl Touch {
    /// What `self` then `next`, handled in one turn, say together: a fired idle check
    /// (the latest) stands, else any activity counts, else an eviction.
    pub(crate) fn then(self, next: Touch) -> Touch {
        match (self, next) {
            (_, Touch::Idle(key)) | (Touch::Idle(key), _) => Touch::Idle(key),
            (Touch::Active, _) | (_, Touch::Active) => Touch::Active,
            (Touch::Crowded, _) | (_, Touch::Crowded) => Touch::Crowded,
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
            fired: BTreeMap::new(),
            fired_dirty: false,
            live: 0,
            idle_timer: None,
            last_active: None,
            parked: None,
            teardowns: Vec::new(),
            slot_epoch: None,
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
        self.entries.is_empty()
            && self.runs.is_empty()
            && self.memory.is_empty()
            && self.fired.is_empty()
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
                step.reply(reply, Answer::Start(run));
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
                    step.reply(reply, Answer::Ask(stored));
                }
            }
            Op::Ended(ending) => {
                let run = self.ended(step, *ending);
                self.activate_prepared(step, run);
            }
            Op::List { reply } => step.reply(reply, Answer::List(self.list())),
            Op::Record { run, reply } => step.reply(reply, Answer::Record(self.record_of(&run))),
            Op::Recall { interaction, reply } => {
                let recalled = self.recall(step, &interaction);
                step.reply(reply, Answer::Recall(recalled));
            }
            Op::Resume {
                interaction,
                payload,
                receiver,
                resumer,
                reply,
            } => match self.resume(step, &interaction, payload, receiver, resumer) {
                Ok((ack, run)) => {
                    step.reply(reply, Answer::Resume(Ok(ack)));
                    self.activate_prepared(step, run);
                }
                Err(problem) => step.reply(reply, Answer::Resume(Err(problem))),
            },
            Op::Take {
                interaction,
                taker,
                reply,
            } => {
                let taken = self.take(step, &interaction, taker);
                step.reply(reply, Answer::Take(taken));
            }
            Op::Cancel {
                ids,
                canceller,
                reply,
            } => match self.check_cancel(step, &ids) {
                Err(problems) => step.reply(reply, Answer::Cancel(Err(problems))),
                Ok(()) => {
                    let runs = self.linked_owners(ids.iter().map(String::as_str));
                    if runs.is_empty() {
                        self.cancel(step, ids, canceller, &Chains::new());
                        step.reply(reply, Answer::Cancel(Ok(())));
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
                step.reply(reply, Answer::Done);
            }
            Op::Undelivered { waiting, reply } => {
                let id = waiting.id.clone();
                // Already there if a later change of the subject stored it.
                if !self.entries.contains_key(id.as_str()) {
                    self.leave_waiting(step, waiting);
                }
                step.push(Effect::Delivered(id));
                step.reply(reply, Answer::Done);
            }
            Op::Replay => self.replay(step),
        }
    }

    fn subject(&self) -> String {
        self.name.to_string()
    }
}
